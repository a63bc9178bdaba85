# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cgroup name validation and mapping to cgroupfs directories."""

import pytest

from sim.host import FakeHost
from sim.cgroup import SimCgroup

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import (
    CgroupNameError, GroupDir, GroupFile, SubtreeControl, ancestors, child_groups, controller_of, controllers,
    has_members, resolve, slice_path, validate_unit_name,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler, ReconcileError


@pytest.mark.parametrize("name, path", [
    ("inference.slice", "/sys/fs/cgroup/inference.slice"),
    ("ai-inference.slice", "/sys/fs/cgroup/ai.slice/ai-inference.slice"),
    ("a-b-c.slice", "/sys/fs/cgroup/a.slice/a-b.slice/a-b-c.slice"),
    ("-.slice", "/sys/fs/cgroup"),
    ("vllm.service", "/sys/fs/cgroup/system.slice/vllm.service"),
    ("run-u12.scope", "/sys/fs/cgroup/system.slice/run-u12.scope"),
    ("system.slice/docker-abc.scope", "/sys/fs/cgroup/system.slice/docker-abc.scope"),
    ("/sys/fs/cgroup/workloads/inference", "/sys/fs/cgroup/workloads/inference"),
    ("/sys/fs/cgroup", "/sys/fs/cgroup"),
    ("workloads/./train/", "/sys/fs/cgroup/workloads/train"),
])
def test_resolve(name, path):
    assert resolve(name) == path


@pytest.mark.parametrize("name, words", [
    ("", "empty"),
    ("../etc", "'..'"),
    ("workloads/../../etc", "'..'"),
    ("/etc/passwd", "outside /sys/fs/cgroup"),
    ("-bad.slice", "dashes"),
    ("bad-.slice", "dashes"),
    ("a--b.slice", "dashes"),
    ("x@1.slice", "template"),
    ("sp ace.service", "characters"),
    ("w/cgroup.procs", "not a valid group name"),
])
def test_resolve_rejects(name, words):
    with pytest.raises(CgroupNameError, match=words.replace(".", r"\.").replace("(", r"\(")):
        resolve(name)


def test_unit_name_rules():
    assert validate_unit_name("inference.slice") == []
    assert validate_unit_name("x" * 250 + ".slice")
    assert slice_path("inference.slice") == "inference.slice"


# ---------------------------------------------------------------------------------------------
# cgroupfs manager settings, against a SimCgroup kernel
# ---------------------------------------------------------------------------------------------

CG = "/sys/fs/cgroup"


@pytest.fixture
def kernel(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, serial="a", majmin="259:0")
    h.add_cgroup_root(subtree="memory pids", io_prio=True)
    h.write(CG + "/io.cost.qos", "259:0 enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 "
                                 "max=10000.00")
    sim = SimCgroup(h)
    sim.add_group("svc", subtree="")
    return sim


@pytest.mark.parametrize("path, top, expected", [
    (CG + "/a/b/c", CG, [CG, CG + "/a", CG + "/a/b"]),
    (CG + "/s.slice/r.service/w/x", CG + "/s.slice/r.service",
     [CG + "/s.slice/r.service", CG + "/s.slice/r.service/w"]),
    (CG + "/a", CG, [CG]),
    (CG + "/a", CG + "/a", []),
])
def test_ancestors(path, top, expected):
    assert ancestors(path, top) == expected


def test_small_helpers(kernel):
    assert controller_of("io.max") == "io" and controller_of("memory.oom.group") == "memory"
    assert controllers(kernel, CG) == ["cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"]
    assert controllers(kernel, CG, "cgroup.subtree_control") == ["memory", "pids"]
    assert controllers(kernel, CG + "/nope") == []
    assert has_members(kernel, CG) and not has_members(kernel, CG + "/svc")
    kernel.add_group("svc/w")
    assert child_groups(kernel, CG + "/svc") == ["w"] and child_groups(kernel, CG + "/svc/w") == []


def test_group_dir_create_and_remove(kernel):
    d = GroupDir(CG + "/svc/new")
    assert d.key == "cgroup %s/svc/new" % CG and d.desired is True and d.order == 1
    assert d.read(kernel) is False
    result = Reconciler(kernel).run([d])
    assert result["diff"] == {"before": {d.key: False}, "after": {d.key: True}}
    assert kernel.ops == [("mkdir", CG + "/svc/new")]
    assert kernel.read(CG + "/svc/new/cgroup.controllers") == ""        # svc enables nothing for its children
    gone = GroupDir(CG + "/svc/new", present=False)
    assert Reconciler(kernel).run([gone])["changed"] and not kernel.isdir(CG + "/svc/new")
    gone.restore(kernel, True)                          # restore = back to what it was
    assert kernel.isdir(CG + "/svc/new")


def test_group_dir_rmdir_of_a_busy_group_is_refused(kernel):
    kernel.add_group("svc/busy", procs="42")
    with pytest.raises(ReconcileError) as exc:
        Reconciler(kernel).run([GroupDir(CG + "/svc/busy", present=False)])
    assert "EBUSY" in exc.value.msg and exc.value.kernel_error["action"] == "remove directory"
    assert kernel.isdir(CG + "/svc/busy")


def test_subtree_control_writes_only_the_missing_controllers_in_one_write(kernel):
    s = SubtreeControl(CG, ["io", "memory", "cpu"])
    assert s.key == CG + "/cgroup.subtree_control" and s.desired == ["cpu", "io", "memory"]
    assert s.read(kernel) == ["memory", "pids"]
    assert s.differs(["memory", "pids"]) and not s.differs(["cpu", "io", "memory", "pids"])
    result = Reconciler(kernel).run([s])
    assert kernel.writes == [(CG + "/cgroup.subtree_control", "+cpu +io")]
    assert result["diff"]["after"][s.key] == ["cpu", "io", "memory", "pids"]
    assert kernel.read(CG + "/svc/io.weight") == "default 100", "enabling adds the files to the children"
    s.restore(kernel, ["memory", "pids"])
    assert kernel.writes[-1] == (CG + "/cgroup.subtree_control", "-cpu -io")
    assert kernel.read(CG + "/cgroup.subtree_control") == "memory pids"
    assert kernel.read(CG + "/svc/io.weight") is None
    kernel.writes[:] = []
    Reconciler(kernel).run([SubtreeControl(CG, ["memory"])])
    assert kernel.writes == []


def test_subtree_control_of_a_group_created_in_the_same_call(kernel):
    s = SubtreeControl(CG + "/svc/w", ["io"], order=5)
    assert s.read(kernel) == [] and s.order == 5
    s.restore(kernel, [])                               # the group is gone: nothing to take back
    assert kernel.writes == []
    Reconciler(kernel).run([SubtreeControl(CG, ["io"]), GroupDir(CG + "/svc/w"),
                            SubtreeControl(CG + "/svc", ["io"], order=3), s])
    assert kernel.writes == [(CG + "/cgroup.subtree_control", "+io"), (CG + "/svc/cgroup.subtree_control", "+io"),
                             (CG + "/svc/w/cgroup.subtree_control", "+io")]


def test_subtree_control_refused_in_a_group_with_processes(kernel):
    kernel.add_group("svc/busy", procs="42")
    kernel.write(CG + "/cgroup.subtree_control", "+io")
    kernel.write(CG + "/svc/cgroup.subtree_control", "+io")
    with pytest.raises(ReconcileError) as exc:
        Reconciler(kernel).run([SubtreeControl(CG + "/svc/busy", ["io"])])
    assert "EBUSY" in exc.value.msg and (CG + "/svc/busy/cgroup.subtree_control", "+io") in kernel.writes
    assert kernel.read(CG + "/svc/busy/cgroup.subtree_control") == ""


def test_group_file_reads_kernel_defaults_for_a_group_not_created_yet(kernel):
    weight = GroupFile(CG + "/svc/new", "io.weight", 500, device="default")
    assert weight.key == "io.weight[default]" and weight.path == CG + "/svc/new/io.weight"
    assert weight.read(kernel) == 100 and weight.desired == 500
    limit = GroupFile(CG + "/svc/new", "io.max", {"wbps": 1000000}, device="259:0")
    assert limit.read(kernel) == {"rbps": "max", "wbps": "max", "riops": "max", "wiops": "max"}
    high = GroupFile(CG + "/svc/new", "memory.high", "1G")
    assert high.key == "memory.high" and high.read(kernel) == "max" and high.desired == 2 ** 30
    assert GroupFile(CG + "/svc/new", "cpu.max", "50000").read(kernel) == {"quota": "max", "period": 100000}
    assert GroupFile(CG + "/svc/new", "io.prio.class", "idle").read(kernel) == "no-change"


def test_group_file_of_an_existing_group_whose_controller_is_off(kernel):
    # svc exists but io is not enabled in the root's subtree_control yet: io.weight is absent
    f = GroupFile(CG + "/svc", "io.weight", 500, device="default")
    assert kernel.read(CG + "/svc/io.weight") is None and f.read(kernel) == 100
    kernel.write(CG + "/cgroup.subtree_control", "+io")
    kernel.remove(CG + "/svc/io.weight")                   # controller on, file missing: a real error
    with pytest.raises(KernelFileError) as exc:
        f.read(kernel)
    assert exc.value.errname == "ENOENT" and exc.value.action == "read"


def test_group_file_validates_and_writes_one_device_line(kernel):
    kernel.write(CG + "/cgroup.subtree_control", "+io")
    bad = GroupFile(CG + "/svc", "io.weight", 0, device="259:0")
    assert bad.problems and "out of range" in bad.problems[0]
    f = GroupFile(CG + "/svc", "io.weight", 300, device="259:0")
    result = Reconciler(kernel).run([GroupFile(CG + "/svc", "io.weight", 50, device="default"), f])
    assert kernel.writes[-2:] == [(CG + "/svc/io.weight", "default 50"), (CG + "/svc/io.weight", "259:0 300")]
    assert kernel.read(CG + "/svc/io.weight") == "default 50\n259:0 300"
    assert result["values"] == {"io.weight[default]": 50, "io.weight[259:0]": 300}
    f.restore(kernel, "default")
    assert kernel.read(CG + "/svc/io.weight") == "default 50"
    with pytest.raises(ReconcileError, match="out of range"):
        Reconciler(kernel).run([bad])


def test_group_file_read_back_mismatch_restores(kernel):
    kernel.write(CG + "/cgroup.subtree_control", "+io +cpu")
    kernel.ignore.add("cpu.weight")
    with pytest.raises(ReconcileError) as exc:
        Reconciler(kernel).run([GroupFile(CG + "/svc", "io.weight", 50, device="default"),
                                GroupFile(CG + "/svc", "cpu.weight", 50, order=30)])
    assert "The kernel holds 100 for cpu.weight after writing 50" in exc.value.msg
    assert exc.value.restored == ["cpu.weight", "io.weight[default]"]
    assert kernel.read(CG + "/svc/io.weight") == "default 100"
