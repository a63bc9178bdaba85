# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""io_facts' topology (issue 39): NUMA nodes, each NVMe controller's node and the CPUs of its queue types, PCI
accelerators - on the recorded hosts of sim/topology.py, read from sysfs only (no command is run)."""

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import kernelfs as _kernelfs
from ansible_collections.aiinfra.io_isolation.plugins.modules import io_facts
from sim import topology as hosts

GiB = 1024 ** 3


@pytest.fixture
def facts(monkeypatch, run_module):
    """facts(host, **args) -> ansible_facts.io_isolation; the module may run no command."""
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)

    def run(host, **args):
        monkeypatch.setattr(io_facts, "KernelFS", lambda: _kernelfs.KernelFS(host.root))
        result = run_module(io_facts.main, **args)
        assert not result.get("failed"), result
        json.dumps(result)
        return result["ansible_facts"]["io_isolation"]
    return run


def test_two_sockets_with_gpus_on_both_nodes(tmp_path, facts):
    f = facts(hosts.two_sockets(tmp_path))
    topo = f["topology"]
    assert topo["numa"] is True and topo["memory_nodes"] == [0, 1]
    assert topo["cpus"] == {"online": list(range(16)), "possible": list(range(16)), "offline": []}
    assert topo["nodes"] == [{"node": 0, "cpus": list(range(8)), "memory_bytes": 64 * GiB, "has_memory": True},
                             {"node": 1, "cpus": list(range(8, 16)), "memory_bytes": 64 * GiB, "has_memory": True}]
    gpus = [a for a in topo["accelerators"] if a["kind"] == "3d"]
    assert [(g["address"], g["vendor"], g["vendor_id"], g["device_id"], g["node"], g["local_cpus"]) for g in gpus] == [
        ("0000:00:06.0", "NVIDIA", "0x10de", "0x2330", 0, list(range(8))),
        ("0000:00:07.0", "NVIDIA", "0x10de", "0x2330", 1, list(range(8, 16)))]
    assert all(g["class"] == "0x030200" and g["boot_vga"] is None for g in gpus)
    bmc = [a for a in topo["accelerators"] if a["kind"] == "vga"]
    assert bmc == [{"address": "0000:00:08.0", "class": "0x030000", "kind": "vga", "vendor_id": "0x1a03",
                    "vendor": "ASPEED", "device_id": "0x2000", "node": None, "local_cpus": None, "boot_vga": True}]
    assert not [a for a in topo["accelerators"] if a["class"] == "0x010802"], "NVMe is no accelerator"
    n0, n1 = f["nvme"]["nvme0"], f["nvme"]["nvme1"]
    assert n0["numa_node"] == 0 and n1["numa_node"] == 1
    assert n0["queue_cpus"] == {"default": list(range(16)), "read": [], "poll": []}
    assert n1["queues"] == {"default": 4, "read": 0, "poll": 2, "source": "debugfs"}
    assert n1["queue_cpus"] == {"default": list(range(16)), "read": [], "poll": list(range(16))}
    # each hardware queue's CPUs, by type, stay per device
    assert [(q["type"], q["cpu_list"]) for q in f["devices"]["nvme1n1"]["hw_queues"]][-2:] == [
        ("poll", list(range(8))), ("poll", list(range(8, 16)))]
    assert f["warnings"] == []


def test_without_debugfs_the_queue_cpus_are_unknown(tmp_path, facts):
    f = facts(hosts.two_sockets(tmp_path, debugfs=False))
    assert f["nvme"]["nvme1"]["queue_cpus"] is None
    assert f["nvme"]["nvme1"]["queues"]["source"] == "unavailable (debugfs is not mounted)"
    assert f["nvme"]["nvme1"]["numa_node"] == 1


def test_a_host_without_numa(tmp_path, facts):
    f = facts(hosts.no_numa(tmp_path))
    topo = f["topology"]
    assert topo["numa"] is False and topo["memory_nodes"] == [0]
    assert topo["nodes"] == [{"node": 0, "cpus": [0, 1, 2, 3], "memory_bytes": 2013936 * 1024, "has_memory": True}]
    assert f["nvme"]["nvme0"]["numa_node"] is None                  # numa_node -1: no affinity
    assert [(a["kind"], a["node"]) for a in topo["accelerators"]] == [("3d", None)]
    assert f["nvme"]["nvme0"]["queue_cpus"] == {"default": [0, 1, 2, 3], "read": [], "poll": []}


def test_one_node_is_no_numa(tmp_path, facts):
    h = hosts.no_numa(tmp_path)
    h.add_numa({0: ("0-3", 4 * GiB)})
    topo = facts(h)["topology"]
    assert topo["numa"] is False and topo["nodes"][0]["memory_bytes"] == 4 * GiB


def test_cpus_offline(tmp_path, facts):
    f = facts(hosts.cpus_offline(tmp_path))
    topo = f["topology"]
    assert topo["cpus"] == {"online": [0, 1, 2, 3, 4, 5, 7], "possible": list(range(8)), "offline": [6]}
    assert [n["cpus"] for n in topo["nodes"]] == [[0, 1, 2, 3], [4, 5, 7]]
    assert f["host"]["cpus_online"] == 7 and f["host"]["cpus_possible"] == 8
    # blk-mq maps the possible CPUs: the offline CPU is still in its queue's list (placement intersects with online)
    assert f["nvme"]["nvme0"]["queue_cpus"]["default"] == list(range(8))
    assert f["nvme"]["nvme0"]["numa_node"] == 1


def test_the_lab_guest_with_two_nodes(tmp_path, facts):
    h = hosts.lab_two_nodes(tmp_path)
    f = facts(h, cgroups=["-.slice"])
    assert f["nvme"]["nvme0"]["numa_node"] == 1
    assert [n["cpus"] for n in f["topology"]["nodes"]] == [[0, 1], [2, 3]]
    assert f["topology"]["accelerators"][0]["boot_vga"] is True


def test_cgroup_facts_show_the_effective_cpuset(tmp_path, facts):
    h = hosts.two_sockets(tmp_path)
    h.add_cgroup("inference.slice", files={"cpuset.cpus": "8-15", "cpuset.mems": "1",
                                           "cpuset.cpus.effective": "8-15", "cpuset.mems.effective": "1"})
    files = facts(h, cgroups=["inference.slice"])["cgroups"]["inference.slice"]["files"]
    assert files["cpuset.cpus"] == list(range(8, 16)) and files["cpuset.mems.effective"] == [1]
