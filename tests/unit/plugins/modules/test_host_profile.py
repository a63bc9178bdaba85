# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""host_profile: several sections through one engine run, on the cgroup module's fake host (SimCgroup +
SimSystemd). Each section must give what its own module gives, and any refusal must write nothing."""

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.modules import blk_queue, cgroup, host_profile, iocost
from sim.iocost import SimIocost
from sim.blk_queue import queue_host
from sim.lab import CgroupLab
from sim.systemd import CONTROL_DIR

INFERENCE = {"label": "inference slice", "name": "inference.slice", "create": True, "io": {"weight": 1000},
             "memory": {"low": "8G"}, "cpu": {"weight": 1000}}
TRAINING = {"label": "training slice", "name": "training.slice", "create": True,
            "io": {"weight": 50, "max": {"lab-nvme-a": {"wbps": "500MB"}}}, "memory": {"high": "8G"}}


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    lab = CgroupLab(tmp_path, version=257).wire_modules(monkeypatch, cgroup, host_profile)
    lab.profile = lambda **args: (lab.reset(), run_module(host_profile.main, **args))[1]
    lab.cgroup = lambda **args: (lab.reset(), run_module(cgroup.main, **args))[1]
    return lab


def strip(entry):
    return dict((k, v) for k, v in entry.items() if k != "label")


def test_two_slices_in_one_call_match_what_the_cgroup_module_does(lab, tmp_path_factory, run_module, monkeypatch):
    result = lab.profile(cgroups=[INFERENCE, TRAINING], pressure=["inference.slice", "nope.slice"])
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and set(result["cgroups"]) == {"inference.slice", "training.slice"}
    assert all(k.startswith(("inference slice: ", "training slice: ")) for k in result["diff"]["after"])
    assert result["cgroups"]["training.slice"]["kernel"]["io.weight"] == {"default": 50}
    assert lab.cgfile("training.slice", "io.max").startswith("259:0 rbps=max wbps=500000000")
    assert result["pressure"]["cgroups"]["inference.slice"]["exists"] is True
    assert result["pressure"]["cgroups"]["nope.slice"] == {"path": "/sys/fs/cgroup/nope.slice", "exists": False,
                                                           "io": None, "memory": None, "cpu": None}
    # the same requests through the cgroup module change nothing more: one implementation
    for entry in (INFERENCE, TRAINING):
        again = lab.cgroup(**strip(entry))
        assert not again.get("failed") and again["changed"] is False, again
    # and the profile again is a no-op too
    again = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert again["changed"] is False and again["diff"] == {"before": {}, "after": {}}
    assert lab.mutating_calls() == []


def test_two_slices_cost_three_daemon_reloads_not_four(lab):
    """Each slice's drop-in is loaded before its start and set-property; the reload that only matches systemd to the
    files again after the runtime control files go is owed and paid once, by the next unit's or after the writes."""
    result = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert not result.get("failed"), result.get("msg")
    verbs = [c[1] for c in lab.mutating_calls()]
    assert verbs.count("daemon-reload") == 3, verbs
    assert verbs[-1] == "daemon-reload", "nothing is owed when the call ends: %s" % verbs
    assert lab.files_below(CONTROL_DIR) == [], "set-property's runtime control files are removed"


def test_check_mode_plans_the_whole_profile_and_writes_nothing(lab):
    result = lab.profile(cgroups=[INFERENCE, TRAINING], _ansible_check_mode=True)
    assert not result.get("failed") and result["changed"], result.get("msg")
    assert any(k.startswith("training slice: ") for k in result["diff"]["after"])
    lab.assert_nothing_changed()
    assert lab.config_files() == []


@pytest.mark.parametrize("bad, words", [
    ({"io": {"weight": "lots"}}, ["training slice: ", "io", "weight"]),
    ({"io": {"max": {"lab-nvme-a": {"rbps": 0}}}}, ["training slice: ", "io.max", "rbps"]),
    ({"io": {"max": {"no-such-disk": {"wbps": 1}}}}, ["training slice: ", "no-such-disk"]),
    ({"bogus": 1}, ["training slice: ", "bogus"]),
])
def test_a_bad_section_refuses_the_whole_profile_before_any_write(lab, bad, words):
    training = dict(TRAINING, **bad) if "bogus" not in bad else dict(TRAINING, bogus=1)
    result = lab.profile(cgroups=[INFERENCE, training])
    assert result["failed"] and result["msg"].startswith("Invalid request (nothing was changed): "), result["msg"]
    for word in words:
        assert word in result["msg"], (word, result["msg"])
    assert "inference slice" not in result["msg"]
    lab.assert_nothing_changed()
    assert lab.config_files() == []


def test_every_bad_section_is_listed_at_once(lab):
    result = lab.profile(sysctl={"sysctls": "vm.swappiness=10"}, nvme_queues={"poll_queues": "many"},
                         cgroups=[dict(INFERENCE, cpu={"weight": 0})])
    assert result["failed"], result
    assert [e.split(":")[0] for e in result["errors"]] == ["sysctl", "nvme_queues", "inference slice"], result["errors"]
    lab.assert_nothing_changed()


def test_a_group_listed_twice_is_refused(lab):
    result = lab.profile(cgroups=[INFERENCE, dict(INFERENCE, label="again")])
    assert result["failed"] and "listed twice" in result["msg"]
    lab.assert_nothing_changed()


def test_a_kernel_refusal_in_a_later_section_restores_the_earlier_one(lab):
    lab.kernel.ignore.add("memory.high")        # only the training slice sets it
    result = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert result["failed"] and "The kernel holds" in result["msg"], result["msg"]
    assert result["failed_setting"] == "training slice: training.slice"
    assert result["restored"] == ["training slice: training.slice", "inference slice: inference.slice"]
    assert lab.config_files() == [], "both slices' drop-ins and unit files are removed again"
    assert lab.cgfile("inference.slice", "io.weight") == "default 100"
    assert lab.mutating_calls()[-1] == ["systemctl", "daemon-reload"], "a failed call leaves no reload owed"


# -- iocost and block queues in one run (the kernel's order across sections) -------------------

MODEL = {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000, "wbps": 1000000000, "wseqiops": 50000,
         "wrandiops": 50000}
QOS = {"rpct": 95, "rlat": 5000, "wpct": 95, "wlat": 5000, "min": 50, "max": 150}


@pytest.fixture
def disks(tmp_path, monkeypatch, run_module):
    h = queue_host(tmp_path)
    sim = h.sim
    h.iocost = SimIocost(sim, devices=("259:0", "259:1", "254:0"))
    for module in (host_profile, blk_queue, iocost):
        monkeypatch.setattr(module, "KernelFS", lambda: sim)
    monkeypatch.setattr(host_profile, "Runner", lambda module: None)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: None)
    h.run = run_module
    return h


def test_iocost_before_the_block_queues_and_the_same_result_as_the_modules(disks):
    profile = {"iocost": {"devices": [{"device": "lab-nvme-a", "model": MODEL, "qos": QOS}]},
               "blk_queue": {"devices": [{"device": "lab-nvme-a", "scheduler": "mq-deadline", "read_ahead_kb": 256}]}}
    result = disks.run(host_profile.main, **profile)
    assert not result.get("failed"), result.get("msg")
    written = [p for p, _line in disks.sim.writes]
    assert written.index("/sys/fs/cgroup/io.cost.qos") < written.index("/sys/block/nvme0n1/queue/scheduler")
    assert result["sections"]["blk_queue"]["devices"][0]["held"]["scheduler"] == "mq-deadline"
    assert result["sections"]["iocost"]["devices"][0]["model"]["rbps"] == 2000000000
    assert "blk_queue: /sys/block/nvme0n1/queue/read_ahead_kb" in result["diff"]["after"]
    # each module, given its section, finds nothing left to do; so does the profile
    assert disks.run(iocost.main, **profile["iocost"])["changed"] is False
    assert disks.run(blk_queue.main, **profile["blk_queue"])["changed"] is False
    assert disks.run(host_profile.main, **profile)["changed"] is False


def test_a_bad_block_queue_value_refuses_the_iocost_section_too(disks):
    profile = {"iocost": {"devices": [{"device": "lab-nvme-a", "model": MODEL, "qos": QOS}]},
               "blk_queue": {"devices": [{"device": "lab-nvme-a", "read_ahead_kb": -1}]}}
    result = disks.run(host_profile.main, **profile)
    assert result["failed"] and "read_ahead_kb" in result["msg"], result
    assert all(e.startswith("blk_queue: ") for e in result["errors"]), result["errors"]
    assert disks.sim.writes == []


def test_a_disk_removed_between_the_facts_and_the_apply_refuses_the_whole_profile(disks):
    """site.yml plans every section from io_facts, naming each disk by its stable id; a disk hot-removed before the
    apply makes the call fail naming it, and the disk still there is not touched either."""
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
    ids = dict((s, DeviceResolver(disks.sim).resolve(s).wwn) for s in ("lab-nvme-a", "lab-nvme-b"))
    profile = {"iocost": {"devices": [{"device": ids[s], "model": MODEL, "qos": QOS} for s in sorted(ids)]},
               "blk_queue": {"devices": [{"device": ids[s], "read_ahead_kb": 256} for s in sorted(ids)]}}
    disks.unplug("nvme1n1")
    result = disks.run(host_profile.main, **profile)
    assert result["failed"] and result["msg"].startswith("Invalid request (nothing was changed)"), result
    assert "of serial 'lab-nvme-b', model 'QEMU NVMe Ctrl'" in result["msg"]
    assert "it has been removed since" in result["msg"]
    assert sorted(e.split(":")[0] for e in result["errors"]) == ["blk_queue", "iocost"]
    assert disks.sim.writes == []


# -- the memory substrate (issue 37): read before any write ----------------------------------------------------------
def without_recursiveprot(lab):
    mounts = lab.host.read("/proc/mounts").replace(",memory_recursiveprot", "")
    lab.host.write("/proc/mounts", mounts)


def test_memory_protection_without_memory_recursiveprot_is_refused_before_any_write(lab):
    without_recursiveprot(lab)
    result = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert result["failed"] and result["msg"].startswith("Invalid request (nothing was changed): "), result["msg"]
    assert ("memory substrate: memory.low/memory.min on inference.slice would not protect the services in it: the "
            "cgroup2 mount at /sys/fs/cgroup lacks memory_recursiveprot") in result["msg"]
    assert "mount -o remount,memory_recursiveprot /sys/fs/cgroup" in result["msg"]
    lab.assert_nothing_changed()
    assert lab.config_files() == []
    # without memory protection there is nothing the option would carry: the same host takes the profile
    done = lab.profile(cgroups=[dict(INFERENCE, memory={"low": 0}), TRAINING])
    assert not done.get("failed"), done.get("msg")
    assert done["substrate"]["memory_recursiveprot"] is False and done["substrate"]["protected"] == []


def test_no_swap_is_a_warning_and_the_substrate_is_reported(lab):
    lab.host.write("/proc/meminfo", "MemTotal:        2013936 kB\nSwapTotal:             0 kB\n")
    lab.host.write("/proc/sys/vm/swappiness", "60")
    result = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert not result.get("failed"), result.get("msg")
    sub = result["substrate"]
    assert (sub["memory_recursiveprot"], sub["swap_bytes"], sub["swappiness"], sub["protected"], sub["errors"]) == \
        (True, 0, 60, ["inference.slice"], [])
    assert "nsdelegate" in sub["mount_options"]
    assert any(w.startswith("memory substrate: no swap on this host (SwapTotal 0): memory.low on inference.slice")
               for w in lab.warnings), lab.warnings
    lab.host.write("/proc/meminfo", "MemTotal:        2013936 kB\nSwapTotal:       1048572 kB\n")
    again = lab.profile(cgroups=[INFERENCE, TRAINING])
    assert again["substrate"]["swap_bytes"] == 1048572 * 1024 and again["substrate"]["warnings"] == []
    assert not any("memory substrate" in w for w in lab.warnings)


def test_tenancy_is_read_after_the_apply_and_judged(lab, monkeypatch):
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy
    monkeypatch.setattr(tenancy.time, "sleep", lambda seconds: None)
    result = lab.profile(cgroups=[INFERENCE, TRAINING], tenancy={
        "slices": [{"name": "inference.slice", "workloads": [{"name": "vllm.service"}]}, {"name": "training.slice"}],
        "devices": ["lab-nvme-a"], "interval": 0.5})
    assert not result.get("failed"), result.get("msg")
    t = result["tenancy"]
    # the slices the apply created exist when it is read, and nothing runs in them; the lab's vllm runs elsewhere
    assert t["slices"]["inference.slice"]["exists"] is True and t["slices"]["inference.slice"]["empty"] is True
    assert t["slices"]["training.slice"]["listed"] == 0
    assert t["drift"] == [
        "service vllm.service (listed for inference.slice as vllm.service) runs in /system.slice/vllm.service, "
        "outside its slice",
        "inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]
    assert t["disks"]["nvme0n1"]["judged"] is False and t["disks"]["nvme0n1"]["note"].startswith("idle: ")


def test_a_bad_tenancy_request_is_refused_before_the_first_write(lab):
    result = lab.profile(cgroups=[INFERENCE, TRAINING], tenancy={"slices": [{"name": "inference"}], "interval": 90,
                                                                 "devices": ["no-such-disk"]})
    assert result["failed"] and "'inference' is not a slice name" in result["msg"] and "interval is 90" in result["msg"]
    assert "tenancy: devices: " in result["msg"]
    lab.assert_nothing_changed()
