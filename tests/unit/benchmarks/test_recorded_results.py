# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Recorded benchmark results name no path of the machine that ran them: a result is read on another checkout."""
import glob
import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# What a guest's paths start with (kernel files, persisted configuration, devices): those are results.
GUEST_ROOTS = ("dev", "etc", "proc", "run", "srv", "sys", "usr", "var", "lib")
# An absolute path in JSON or Markdown: after a quote, a space, a bracket or a backtick.
PATH = re.compile(r"""(?:^|["'\s(`=])(/[A-Za-z0-9._-]+)(/[^\s"'`)<>,]*)""")


def build_machine_paths(text):
    return sorted({head + tail for head, tail in PATH.findall(text) if head[1:] not in GUEST_ROOTS})


def test_the_check_finds_a_build_machines_path():
    assert build_machine_paths('{"db": "/home/ci/checkout/.cache/bench/calibration-db", "f": "/etc/udev/x.rules"}') == [
        "/home/ci/checkout/.cache/bench/calibration-db"]
    assert build_machine_paths("wrote /root/.cache/aiinfra/x.json and `/sys/block/nvme0n1/queue`") == [
        "/root/.cache/aiinfra/x.json"]
    assert build_machine_paths("1.5 MB/s, 4 KiB I/Os, p99/solo") == []


def test_no_recorded_result_names_a_path_of_the_machine_that_ran_it():
    files = [f for f in glob.glob(os.path.join(REPO, "benchmarks", "*", "results", "*"))
             if f.endswith((".json", ".md"))]
    assert files
    found = dict((os.path.relpath(f, REPO), build_machine_paths(open(f, encoding="utf-8").read())) for f in files)
    assert dict((f, p) for f, p in found.items() if p) == {}
