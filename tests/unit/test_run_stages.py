# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/run-stages.sh (make test): every stage runs, the summary counts them, and CI's tail says why a stage failed."""
import os
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# A make that passes stage "good" and fails stage "bad" with Ansible-style and make-style failure lines.
FAKE_MAKE = """#!/usr/bin/env bash
stage=${@: -1}
if [ "$stage" = bad ]; then
  printf 'TASK [x]\\n\\033[31mfatal: [h1]: FAILED! => {"msg": "the probe saw 3 I/Os"}\\033[0m\\n  of 300\\n'
  echo "make: *** [Makefile:9: bad] Error 2"
  exit 2
fi
echo "all fine"
"""


def run_stages(tmp_path, fake_make, *args):
    """tests/run-stages.sh ARGS with ``fake_make`` (a script's text) as its make; the finished process."""
    make = tmp_path / "make"
    make.write_text(fake_make)
    make.chmod(0o755)
    env = dict(os.environ, MAKE=str(make), TEST_LOGS=str(tmp_path / "logs"))
    return subprocess.run(["bash", os.path.join(REPO, "tests", "run-stages.sh")] + list(args),
                          env=env, capture_output=True, text=True, cwd=tmp_path, check=False)


def test_a_failed_stage_is_counted_and_its_reason_repeated_at_the_end(tmp_path):
    out = run_stages(tmp_path, FAKE_MAKE, "good+bad", "good2")
    assert out.returncode == 1
    tail = out.stdout.split("make test summary", 1)[1]
    assert "stages: 2 passed, 1 failed" in tail
    why = tail.split("why bad failed", 1)[1]
    # colours gone, the message and its next line kept, make's own line too; nothing of the passed stages
    assert '  | fatal: [h1]: FAILED! => {"msg": "the probe saw 3 I/Os"}' in why
    assert "  |   of 300" in why and "Error 2" in why
    assert "\x1b" not in why and "why good" not in tail and "all fine" not in why


# A make whose stage "busy" burns CPU in a child it waits for and whose "vm" stage prints what lab.py down reports.
CPU_MAKE = """#!/usr/bin/env bash
stage=${@: -1}
if [ "$stage" = busy ]; then
  python3 -c 'import time
t = time.process_time()
while time.process_time() - t < 1.2: pass'
else
  echo "co-debian12: down (stopped pid [1]); QEMU used 300 s of CPU in 400 s (0.75 cores), instance purged"
  echo "co-debian13: down (stopped pid [2]); QEMU used 120 s of CPU in 400 s (0.30 cores), instance purged"
fi
"""


def test_each_stage_reports_its_own_cpu_and_its_vms(tmp_path):
    out = run_stages(tmp_path, CPU_MAKE, "busy", "vm")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split()[0]: line for line in out.stdout.split("make test summary", 1)[1].splitlines()[1:4]}
    assert ", CPU 1 s + VMs 0 s" in rows["busy"]          # the child's 1.2 s, whole seconds
    assert ", CPU 0 s + VMs 420 s" in rows["vm"]          # both guests' QEMU
    assert ", CPU 421 s: " in rows["total"] and "cores" in rows["total"]


# A stage whose log holds failures Ansible ignored (refusal tests) before the one that failed it.
IGNORED_MAKE = """#!/usr/bin/env bash
for i in $(seq 30); do
  printf 'TASK [refused %s]\\n[ERROR]: Task failed: Module failed: Invalid request\\nOrigin: x.yml:1:7\\n' $i
  printf 'fatal: [h1]: FAILED! => {"msg": "refused %s"}\\n...ignoring\\n' $i
done
printf 'TASK [the real one]\\nfatal: [h1]: FAILED! => {"msg": "the slice file is still there"}\\n'
echo "make: *** [Makefile:9: ign] Error 2"
exit 2
"""


def test_failures_ansible_ignored_are_not_repeated_at_the_end(tmp_path):
    out = run_stages(tmp_path, IGNORED_MAKE, "ign")
    why = out.stdout.split("why ign failed", 1)[1]
    assert "the slice file is still there" in why and "Error 2" in why
    assert "refused" not in why and "Invalid request" not in why
