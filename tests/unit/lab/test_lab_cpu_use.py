# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/lab.py down's report of what a VM cost: a process's CPU seconds and age, read from /proc."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab"))

import lab  # noqa: E402  pylint: disable=wrong-import-position


def test_a_busy_child_reports_its_cpu_and_age():
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.6: pass\ntime.sleep(30)"])
    try:
        time.sleep(0.3)
        deadline = time.monotonic() + 20
        cpu, age = lab._cpu_use(child.pid)
        while cpu < 0.5 and time.monotonic() < deadline:
            time.sleep(0.2)
            cpu, age = lab._cpu_use(child.pid)
        assert 0.5 <= cpu < 5 and cpu <= age + 0.1 and age < 60
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_reports_nothing():
    child = subprocess.Popen(["true"])
    child.wait()
    assert lab._cpu_use(child.pid) == (0.0, 0.0)
