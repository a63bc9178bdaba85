# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_host/commands.py Child: a child stopped with SIGINT gets it even when this process ignores SIGINT (started in
the background by a shell without job control, as CI's lanes are), instead of sitting out the timeout."""

import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Child

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
