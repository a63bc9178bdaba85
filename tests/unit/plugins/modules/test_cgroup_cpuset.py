# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""cgroup's cpu.cpus / cpu.mems (cpuset.cpus, cpuset.mems; AllowedCPUs=, AllowedMemoryNodes=) on the simulated host:
an 8-CPU, two-node machine (node 0: CPUs 0-3, node 1: CPUs 4-7) with systemd 252 / 257, and the refusals that
must leave it untouched."""

import errno

import pytest

from sim.lab import CG, CgroupLab

STAMP = "# Managed by Ansible (aiinfra.io_isolation): aiinfra.io_isolation.cgroup. Local edits will be overwritten.\n"
GiB = 1024 ** 3
WORKLOAD = "system.slice/runtime.service/workloads/inference"


def dropin(unit):
    return "/etc/systemd/system/%s.d/50-aiinfra-io-isolation.conf" % unit


def two_nodes(lab, online="0-7", possible="0-7"):
    lab.host.set_cpus(online, possible)
    lab.host.add_numa({0: ("0-3", 8 * GiB), 1: (",".join(str(c) for c in range(4, 8) if c <= int(online[-1])), 8 * GiB)})
    return lab


@pytest.fixture
def make_lab(tmp_path, monkeypatch, run_module):
    def make(**kw):
        online = kw.pop("online", "0-7")
        return two_nodes(CgroupLab(tmp_path, **kw), online).wire(monkeypatch, run_module)
    return make


@pytest.fixture(params=[252, 257], ids=["systemd252", "systemd257"])
def lab(request, make_lab):
    return make_lab(version=request.param)


def test_slice_on_node_one_through_systemd(lab):
    result = lab.run(name="inference.slice", create=True, cpu={"cpus": "4-7", "mems": 1})
    assert not result.get("failed"), result
    assert lab.read(dropin("inference.slice")) == STAMP + "[Slice]\nAllowedCPUs=4-7\nAllowedMemoryNodes=1\n"
    assert ["systemctl", "set-property", "--runtime", "--", "inference.slice", "AllowedCPUs=4-7",
            "AllowedMemoryNodes=1"] in lab.mutating_calls()
    assert lab.cgfile("inference.slice", "cpuset.cpus") == "4-7"
    assert lab.cgfile("inference.slice", "cpuset.mems") == "1"
    assert lab.kernel.read(CG + "/inference.slice/cpuset.cpus.effective") == "4-7\n"
    assert lab.kernel.read(CG + "/inference.slice/cpuset.mems.effective") == "1\n"
    assert "cpuset" in lab.cgfile("", "cgroup.subtree_control").split()
    assert result["kernel"] == {"cpuset.cpus": [4, 5, 6, 7], "cpuset.mems": [1]}
    assert lab.kernel.writes == []

    again = lab.run(name="inference.slice", create=True, cpu={"cpus": [7, 6, 5, 4], "mems": "1"})
    assert again["changed"] is False and lab.mutating_calls() == []

    gone = lab.run(name="inference.slice", state="absent")
    assert gone["changed"] is True and lab.read(dropin("inference.slice")) is None
    assert ["systemctl", "set-property", "--runtime", "--", "inference.slice", "AllowedCPUs=",
            "AllowedMemoryNodes="] in lab.mutating_calls()
    assert lab.cgfile("inference.slice", "cpuset.cpus") in ("", None)


def test_check_mode_reports_and_changes_nothing(make_lab):
    lab = make_lab(version=257)
    result = lab.run(name="inference.slice", cpu={"cpus": "0-1"}, _ansible_check_mode=True)
    assert result["changed"] is True
    assert "AllowedCPUs=0-1" in result["diff"]["after"]["inference.slice"]["files"][dropin("inference.slice")]
    lab.assert_nothing_changed()
    assert lab.read(dropin("inference.slice")) is None


# (value, what the message must name): CPU 999, an empty list, garbage, a range backwards, an offline CPU
BAD_CPUS = [
    ("0-3,999", ["cpu.cpus '0-3,999'", "CPU 999 is not online", "/sys/devices/system/cpu/online reads 0-6",
                 "give CPUs from 0-6"]),
    ([], ["cpu.cpus: an empty CPU list", "leave cpu.cpus out"]),
    ("", ["cpu.cpus: an empty CPU list"]),
    ("0-3:2/4", ["cpuset.cpus", "'0-3:2/4' is not a CPU list"]),
    ("7-4", ["cpuset.cpus", "runs backwards; write it 4-7"]),
    ("zero", ["cpuset.cpus", "'zero' is not a CPU list"]),
    ([0, True], ["cpuset.cpus", "True", "not a CPU number"]),
    (7, ["CPU 7 is not online"]),
]


@pytest.mark.parametrize("manager,name", [("systemd", "inference.slice"), ("cgroupfs", WORKLOAD)])
@pytest.mark.parametrize("value,words", BAD_CPUS, ids=[repr(v) for v, _w in BAD_CPUS])
def test_bad_cpus_are_refused_before_anything_is_written(make_lab, manager, name, value, words):
    lab = make_lab(version=257, online="0-6")
    result = lab.run(name=name, manager=manager, cpu={"cpus": value})
    assert result["failed"] and result["msg"].startswith("Invalid request (nothing was changed)"), result
    assert "cpu.cpus" in result["msg"]      # the option, whatever the problem
    for word in words:
        assert word in result["msg"]
    assert "Traceback" not in result["msg"]
    lab.assert_nothing_changed()


@pytest.mark.parametrize("value,words", [
    (5, ["cpu.mems '5' (cpuset.mems): node 5 is not a node with memory", "/sys/devices/system/node/has_memory reads "
                                                                         "0-1", "give nodes from 0-1"]),
    ([], ["cpu.mems: an empty node list"]),
    ("0-1,x", ["cpuset.mems", "'x' is not a number"]),
])
def test_bad_mems_are_refused_before_anything_is_written(make_lab, value, words):
    lab = make_lab(version=252)
    result = lab.run(name="inference.slice", cpu={"cpus": "0-3", "mems": value}, memory={"low": "1G"})
    assert result["failed"], result
    for word in words:
        assert word in result["msg"], result["msg"]
    lab.assert_nothing_changed()


def test_a_memoryless_node_is_refused(tmp_path, monkeypatch, run_module):
    lab = CgroupLab(tmp_path, version=257)
    lab.host.set_cpus("0-7")
    lab.host.add_numa({0: ("0-3", 8 * GiB), 1: ("4-7", 0)})     # node 1: CPUs only
    lab.wire(monkeypatch, run_module)
    result = lab.run(name="inference.slice", cpu={"mems": "1"})
    assert result["failed"] and "node 1 is not a node with memory" in result["msg"]
    lab.assert_nothing_changed()


def test_without_numa_only_node_zero(tmp_path, monkeypatch, run_module):
    lab = CgroupLab(tmp_path, version=257).wire(monkeypatch, run_module)     # no /sys/devices/system/node
    bad = lab.run(name="inference.slice", cpu={"mems": "0-1"})
    assert bad["failed"] and "node 1 is not a node with memory" in bad["msg"]
    assert "a kernel without NUMA has node 0 only" in bad["msg"]
    lab.assert_nothing_changed()
    good = lab.run(name="inference.slice", cpu={"mems": "0", "cpus": "1"})
    assert not good.get("failed"), good
    assert lab.cgfile("inference.slice", "cpuset.mems") == "0" and lab.cgfile("inference.slice", "cpuset.cpus") == "1"


def test_systemd_before_244_has_no_allowed_cpus(make_lab):
    lab = make_lab(version=243)
    result = lab.run(name="inference.slice", cpu={"cpus": "0-3"})
    assert result["failed"]
    assert "cpu.cpus needs AllowedCPUs=, which systemd has since version 244; this host runs systemd 243" in result["msg"]
    lab.assert_nothing_changed()


def test_without_the_cpuset_controller(tmp_path, monkeypatch, run_module):
    lab = CgroupLab(tmp_path, version=257)
    lab.host.write(CG + "/cgroup.controllers", "cpu io memory pids")
    lab.wire(monkeypatch, run_module)
    result = lab.run(name="inference.slice", cpu={"cpus": "0", "weight": 200})
    assert result["failed"]
    assert ("cpu.cpus needs the cgroup controller cpuset (kernel file cpuset.cpus), and this host" in result["msg"]
            and "CONFIG_CPUSETS" in result["msg"] and "cgroup.controllers: cpu io memory pids" in result["msg"])
    lab.assert_nothing_changed()
    warned = lab.run(name="inference.slice", cpu={"cpus": "0", "weight": 200}, when_unsupported="warn")
    assert not warned.get("failed"), warned
    assert lab.read(dropin("inference.slice")) == STAMP + "[Slice]\nCPUWeight=200\n"
    assert any("skipped: when_unsupported=warn" in w and "cpuset" in w for w in lab.warnings)


def delegate_cpuset(lab):
    """What Delegate=yes gives a unit once the root and system.slice enable cpuset (systemd does it for a unit that
    sets AllowedCPUs= or delegates)."""
    lab.kernel._enable(CG, ["cpuset"])
    lab.kernel._enable(CG + "/system.slice", ["cpuset"])
    return lab


def test_cgroupfs_below_a_delegated_unit(make_lab):
    lab = delegate_cpuset(make_lab(version=257))
    result = lab.run(name=WORKLOAD, cpu={"cpus": "4-5", "mems": "1", "weight": 300})
    assert not result.get("failed"), result
    group = CG + "/" + WORKLOAD
    assert (group + "/cpuset.cpus", "4-5") in lab.kernel.writes
    assert (CG + "/system.slice/runtime.service/workloads/cgroup.subtree_control", "+cpu +cpuset") in lab.kernel.writes
    assert lab.kernel.read(group + "/cpuset.cpus.effective") == "4-5\n"
    assert result["kernel"]["cpuset.cpus"] == [4, 5] and result["kernel"]["cpuset.mems"] == [1]
    assert lab.run(name=WORKLOAD, cpu={"cpus": "4,5", "mems": [1], "weight": 300})["changed"] is False


def test_cgroupfs_without_cpuset_delegated_names_the_controller(make_lab):
    lab = make_lab(version=257)
    result = lab.run(name=WORKLOAD, cpu={"cpus": "1"})
    assert result["failed"] and "controller(s) cpuset are not available in %s/system.slice/runtime.service" % CG \
        in result["msg"] and "AllowedCPUs= for cpuset" in result["msg"]
    lab.assert_nothing_changed()


def test_a_refused_mems_write_puts_the_cpus_back(make_lab):
    lab = delegate_cpuset(make_lab(version=257))
    assert not lab.run(name=WORKLOAD, cpu={"cpus": "0-1"}).get("failed")
    lab.kernel.refuse["cpuset.mems"] = errno.EINVAL
    result = lab.run(name=WORKLOAD, cpu={"cpus": "2-3", "mems": "1"})
    assert result["failed"] and "cpuset.mems" in result["msg"] and "EINVAL" in result["msg"]
    assert lab.cgfile(WORKLOAD, "cpuset.cpus") == "0-1"


def test_absent_on_a_busy_group_puts_the_parents_cpus_back(make_lab):
    lab = delegate_cpuset(make_lab(version=257))
    assert not lab.run(name=WORKLOAD, cpu={"cpus": "0-1"}).get("failed")
    lab.host.write(CG + "/" + WORKLOAD + "/cgroup.procs", "4321")
    result = lab.run(name=WORKLOAD, state="absent", cpu={"cpus": "0-1"})
    assert result["changed"] and lab.cgfile(WORKLOAD, "cpuset.cpus") == ""
    assert lab.kernel.read(CG + "/" + WORKLOAD + "/cpuset.cpus.effective") == "0-7\n"
