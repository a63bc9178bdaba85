# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""After the calibration scenario: the kernel holds the database entry's model on both NVMe disks,
and no journal, scratch file or fio process is left."""

import glob
import json
import os

import testinfra.utils.ansible_runner

hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
DB = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "calibration-db")
COEFS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")


def _entry():
    files = glob.glob(os.path.join(DB, "*.json"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        return json.load(f)


def test_kernel_holds_the_calibrated_model(host):
    want = _entry()["iocost_model"]
    lines = host.file("/sys/fs/cgroup/io.cost.model").content_string.splitlines()
    nvme = [line for line in lines if line.startswith("259:")]
    assert len(nvme) == 2, lines
    for line in nvme:
        fields = dict(token.split("=", 1) for token in line.split()[1:])
        assert fields["ctrl"] == "user"
        assert dict((k, int(fields[k])) for k in COEFS) == want


def test_nothing_left_behind(host):
    assert host.run("ls /run/aiinfra-io_isolation/").stdout.strip() == ""
    assert host.run("ls -a /srv/calib").stdout.split() == [".", "..", "lost+found"]
    assert host.run("pgrep -x fio").rc == 1
    # the solution phase's slice and its scopes are gone
    assert not host.file("/sys/fs/cgroup/iocost_calibrate.slice").exists
    assert host.run("systemctl list-units --all --plain --no-legend 'iocost-calibrate-*' 'iocost_calibrate.slice'")\
        .stdout.strip() == ""


def test_the_entry_holds_the_measured_solutions():
    entry = _entry()
    assert set(entry["solutions"]) >= {"bandwidth"}, entry.get("solution_notes")
    for name, solution in entry["solutions"].items():
        assert sorted(solution["qos"]) == ["max", "min", "rlat", "rpct", "wlat", "wpct"], name
    for run in entry["runs"]:
        assert [p["level"] for p in run["solutions"]["points"]] == [100.0, 50.0]
