# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""cpu_placement (issue 39, the roles' inference_cpus / training_cpus): each recorded host of sim/topology.py, its
io_facts gathered from its sysfs tree, and the placement the stated policy gives it - or the refusal."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_facts
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from sim import topology as hosts


def gathered(host):
    return io_facts.gather(KernelFS(host.root), release="6.12.57+deb13-amd64")


def disks(facts, *names):
    """io_isolation_planned_disks for these disks: their stable selectors, as io_baseline plans them."""
    return [{"device": facts["devices"][n]["identity"]["stable_selector"], "model": {}} for n in names]


def place(facts, planned, inference="", training=""):
    return f.cpu_placement(facts, {"inference_cpus": inference, "training_cpus": training}, planned)


def test_the_lab_guest_auto_puts_inference_on_node_one(tmp_path):
    facts = gathered(hosts.lab_two_nodes(tmp_path))
    out = place(facts, disks(facts, "nvme0n1"), "auto", "auto")
    assert out["inference"] == {"cpus": "2-3", "mems": "1", "source": "auto: node 1: nvme0 (%s)"
                                % facts["devices"]["nvme0n1"]["identity"]["stable_selector"]}
    assert out["training"] == {"cpus": "0-1", "mems": "0", "source": "auto: the online CPUs inference does not get"}
    assert out["notes"] == [] and "boot display excluded" in out["policy"]


def test_two_sockets_gpus_on_both_nodes_leave_training_nothing_under_auto(tmp_path):
    facts = gathered(hosts.two_sockets(tmp_path))
    planned = disks(facts, "nvme1n1")
    out = place(facts, planned, "auto", "shared")
    assert out["inference"]["cpus"] == "0-15" and out["inference"]["mems"] == "0-1"
    assert out["inference"]["source"].startswith("auto: node 0: NVIDIA 0000:00:06.0; node 1: nvme1 (")
    assert "ASPEED" not in out["inference"]["source"]             # the BMC's boot display is no accelerator
    assert out["training"] == {"cpus": None, "mems": None, "source": "no cpuset"}
    with pytest.raises(AnsibleFilterError, match=r"training_cpus auto: inference takes every online CPU \(0-15, from "
                                                 r"auto: node 0: .*give training_cpus shared"):
        place(facts, planned, "auto", "auto")


def test_two_sockets_poll_puts_inference_on_its_own_poll_queue(tmp_path):
    """blk-mq maps every CPU to a poll queue (nvme1's two: 0-7 and 8-15): inference takes the one on the controller's
    node, training the CPUs that poll through the other."""
    facts = gathered(hosts.two_sockets(tmp_path))
    assert facts["nvme"]["nvme1"]["queue_cpus"]["poll"] == list(range(16))
    assert facts["nvme"]["nvme1"]["poll_queue_cpus"] == [list(range(8)), list(range(8, 16))]
    out = place(facts, disks(facts, "nvme1n1"), "poll", "auto")
    assert out["inference"] == {"cpus": "8-15", "mems": "1", "source": "poll: nvme1 poll queue 2 of 2 (CPUs 8-15, node 1)"}
    assert out["training"] == {"cpus": "0-7", "mems": "0", "source": "auto: the online CPUs inference does not get"}
    out = place(facts, disks(facts, "nvme1n1"), "poll", [8, 9])
    assert out["training"] == {"cpus": "8-9", "mems": "1", "source": "training_cpus"}
    assert out["notes"] == ["training_cpus 8-9 are all inference's CPUs too"]


def test_poll_on_a_disk_without_poll_queues_is_refused(tmp_path):
    facts = gathered(hosts.two_sockets(tmp_path))
    with pytest.raises(AnsibleFilterError, match=r"inference_cpus poll: nvme0 \(.*\) has no poll queues \(4 default/0 "
                                                 r"read/0 poll\), and blk-mq maps every CPU to a poll queue, so no CPU "
                                                 r"polls: give it two or more"):
        place(facts, disks(facts, "nvme0n1", "nvme1n1"), "poll")


def test_poll_with_one_poll_queue_is_refused(tmp_path):
    """One poll queue serves every CPU: nothing to give inference that training would not share."""
    facts = gathered(hosts.two_sockets(tmp_path, poll_queues=1))
    assert facts["nvme"]["nvme1"]["poll_queue_cpus"] == [list(range(16))]
    with pytest.raises(AnsibleFilterError, match=r"nvme1 \(.*\) has 1 poll queue \(4 default/0 read/1 poll\), and "
                                                 r"blk-mq maps every CPU to a poll queue, so every CPU shares its one "
                                                 r"poll queue: give it two or more"):
        place(facts, disks(facts, "nvme1n1"), "poll")


def test_poll_without_debugfs_is_refused(tmp_path):
    facts = gathered(hosts.two_sockets(tmp_path, debugfs=False))
    with pytest.raises(AnsibleFilterError, match="the queue types of nvme1 .* are unknown .*mount debugfs"):
        place(facts, disks(facts, "nvme1n1"), "poll")


def test_a_host_without_numa_gets_no_cpuset_from_auto(tmp_path):
    facts = gathered(hosts.no_numa(tmp_path))
    out = place(facts, disks(facts, "nvme0n1"), "auto", "auto")
    assert out["inference"]["cpus"] is None and out["training"]["cpus"] is None
    assert out["notes"] == ["inference_cpus auto: no NUMA node is known for the data disks and accelerators (one "
                            "node); inference runs on every CPU"]
    listed = place(facts, [], "2-3", "0-1")
    assert listed["inference"] == {"cpus": "2-3", "mems": None, "source": "inference_cpus"}


def test_cpus_offline_are_left_out_and_refused(tmp_path):
    facts = gathered(hosts.cpus_offline(tmp_path))
    out = place(facts, disks(facts, "nvme0n1"), "auto", "auto")
    assert out["inference"]["cpus"] == "4-5,7" and out["inference"]["mems"] == "1"
    assert out["training"]["cpus"] == "0-3" and out["training"]["mems"] == "0"
    with pytest.raises(AnsibleFilterError, match=r"inference_cpus 4-7: CPU 6 is not online on this host \(online: "
                                                 r"0-5,7\); give CPUs from 0-5,7"):
        place(facts, [], "4-7")


@pytest.mark.parametrize("settings,words", [
    ({"inference_cpus": "999"}, "inference_cpus 999: CPU 999 is not online"),
    ({"inference_cpus": "0-3:2/4"}, "inference_cpus is '0-3:2/4': give auto or poll, a CPU list"),
    ({"training_cpus": "poll"}, "training_cpus is 'poll': give auto or shared"),
    ({"inference_cpus": [True]}, "inference_cpus is [True]"),
])
def test_bad_variables_name_the_variable(tmp_path, settings, words):
    facts = gathered(hosts.lab_two_nodes(tmp_path))
    with pytest.raises(AnsibleFilterError) as e:
        f.cpu_placement(facts, settings, [])
    assert words in str(e.value)


def test_auto_needs_the_planned_disks_and_the_topology(tmp_path):
    facts = gathered(hosts.lab_two_nodes(tmp_path))
    with pytest.raises(AnsibleFilterError, match="io_isolation_planned_disks is not set"):
        place(facts, None, "auto")
    with pytest.raises(AnsibleFilterError, match="no planned data disks"):
        place(facts, [], "poll")
    with pytest.raises(AnsibleFilterError, match="have no topology"):
        place({"devices": {}}, [], "auto")
