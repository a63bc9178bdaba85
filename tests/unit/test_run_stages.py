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


def test_a_failed_stage_is_counted_and_its_reason_repeated_at_the_end(tmp_path):
    make = tmp_path / "make"
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    env = dict(os.environ, MAKE=str(make), TEST_LOGS=str(tmp_path / "logs"))
    out = subprocess.run(["bash", os.path.join(REPO, "tests", "run-stages.sh"), "good+bad", "good2"],
                         env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 1
    tail = out.stdout.split("make test summary", 1)[1]
    assert "stages: 2 passed, 1 failed" in tail
    why = tail.split("why bad failed", 1)[1]
    # colours gone, the message and its next line kept, make's own line too; nothing of the passed stages
    assert '  | fatal: [h1]: FAILED! => {"msg": "the probe saw 3 I/Os"}' in why
    assert "  |   of 300" in why and "Error 2" in why
    assert "\x1b" not in why and "why good" not in tail and "all fine" not in why
