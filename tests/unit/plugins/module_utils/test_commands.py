# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_host/commands.py Child: a child stopped with SIGINT gets it even when this process ignores SIGINT (started in
the background by a shell without job control, as CI's lanes are), instead of sitting out the timeout."""

import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Child, CommandError, PlanReads, Runner

SLEEPER = [sys.executable, "-c", "import sys, time\nsys.stdout.write('up\\n'); sys.stdout.flush()\ntime.sleep(60)"]


@pytest.fixture
def sigint_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def started(preexec_fn=None):
    child = Child(subprocess.Popen, SLEEPER, time.monotonic, **({"preexec_fn": preexec_fn} if preexec_fn else {}))
    out = ""
    while "up" not in out and child.open:       # the sleeper is past its start, where SIGINT would be early
        out += child.read(1)
    return child


def test_sigint_stops_the_child_although_this_process_ignores_it(sigint_ignored):
    child = started()
    t0 = time.monotonic()
    child.stop(timeout=15)
    assert child.proc.returncode == -signal.SIGINT          # SIGINT did it, not the SIGTERM 15 s later
    assert time.monotonic() - t0 < 10


def test_the_callers_preexec_still_runs(tmp_path, sigint_ignored):
    mark = tmp_path / "ran"
    child = started(lambda: mark.write_text("yes"))
    child.stop(timeout=15)
    assert mark.read_text() == "yes" and child.proc.returncode == -signal.SIGINT


class _Recorder:
    """A Runner that answers from a table and records every argv it ran."""

    def __init__(self, answers):
        self.answers = answers
        self.ran = []

    def which(self, name):
        return "/usr/bin/" + name

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        self.ran.append(list(argv))
        rc, out, err = self.answers.get(tuple(argv), (0, "", ""))
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return rc, out, err


def test_plan_reads_asks_systemd_once_per_question():
    inner = _Recorder({("systemctl", "--version"): (0, "systemd 252 (252.39-1~deb12u1)\n", "")})
    reads = PlanReads(inner)
    for _i in range(8):     # one per cgroup section
        assert reads.run(["systemctl", "--version"], check=False)[1].startswith("systemd 252")
    show = ["systemctl", "show", "-p", "LoadState", "--", "docker.service"]
    reads.run(show)
    reads.run(show)
    assert inner.ran == [["systemctl", "--version"], show]
    assert reads.saved == 8


def test_plan_reads_forgets_after_any_other_command_and_after_the_plan():
    inner = _Recorder({})
    reads = PlanReads(inner)
    show = ["systemctl", "show", "-p", "Slice", "--", "docker.service"]
    reads.run(show)
    reads.run(["systemctl", "daemon-reload"])   # not a read: what was kept may be stale
    reads.run(show)
    reads.stop()                                # the engine's reads after its writes run every time
    reads.run(show)
    reads.run(show)
    assert inner.ran == [show, ["systemctl", "daemon-reload"], show, show, show]


def test_plan_reads_keeps_a_failure_and_still_raises_it_when_checked():
    show = ["systemctl", "show", "--", "x.service"]
    inner = _Recorder({tuple(show): (1, "", "Failed to connect to bus")})
    reads = PlanReads(inner)
    with pytest.raises(CommandError) as e:
        reads.run(show)
    assert "Failed to connect to bus" in str(e.value)
    assert reads.run(show, check=False) == (1, "", "Failed to connect to bus")
    assert len(inner.ran) == 1
    assert reads.which("lsinitramfs") == "/usr/bin/lsinitramfs"


def test_runner_start_gives_what_run_would():
    runner = Runner(None)
    ok = runner.start([sys.executable, "-c", "import os, sys; print(os.environ['LC_ALL']); sys.stderr.write('e')"])
    assert ok.wait() == (0, "C\n", "e")
    failed = runner.start([sys.executable, "-c", "import sys; sys.stderr.write('broken'); sys.exit(3)"])
    with pytest.raises(CommandError) as e:
        failed.wait()
    assert e.value.rc == 3 and "broken" in str(e.value)
    with pytest.raises(TypeError):
        runner.start("ls -l")
