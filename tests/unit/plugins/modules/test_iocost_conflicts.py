# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Settings that break iocost (_iocost.CONFLICTS), checked before the first write: bfq is refused, a wbt latency
set by hand and io.latency beside iocost are warned about; 6.1's default wbt and io.max are not (the lab measured
no harm from either beside iocost). Through the
iocost, blk_queue and host_profile modules on the fake queue host (6.1 and 6.12); every refusal writes nothing,
in check mode too."""

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.modules import blk_queue, host_profile, iocost
from sim.host import FakeHost
from sim.iocost import SimIocost
from sim.kernel import SimKernel
from sim.lab import lab_host
from sim.blk_queue import SimQueue

MODEL = {"rbps": 401649061, "rseqiops": 3991, "rrandiops": 3994, "wbps": 402474307, "wseqiops": 3990,
         "wrandiops": 3992}
QOS = {"rpct": 0, "rlat": 250000, "wpct": 0, "wlat": 250000, "min": 80, "max": 80}
ENABLE = {"device": "lab-nvme-a", "model": MODEL, "qos": QOS, "persist": False}
SECTION = {"devices": [{"device": "lab-nvme-a", "model": MODEL, "qos": QOS}], "persist": False}
RELEASES = {"6.1": "6.1.0-57-amd64", "6.12": "6.12.118+deb13-amd64"}
SELECTOR = "nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"


def make_host(tmp_path, kernel, scheduler="none"):
    release = RELEASES[kernel]
    h = lab_host(tmp_path, kernel=release, cgroup={"subtree": "io memory pids", "io_latency": True})
    h.write("/lib/modules/%s/modules.alias" % release, "alias bfq-iosched bfq")
    sim = SimKernel(h.root)
    h.q = {"nvme0n1": SimQueue(sim, h, "nvme0n1", kernel=kernel, scheduler=scheduler,
                               available=("none", "mq-deadline") + (("bfq",) if scheduler == "bfq" else ())),
           "nvme1n1": SimQueue(sim, h, "nvme1n1", kernel=kernel)}
    h.iocost = SimIocost(sim, devices=("259:0", "259:1"))
    h.sim = sim
    return h


@pytest.fixture
def host(tmp_path, monkeypatch, run_module):
    hosts = []

    def make(kernel="6.1", scheduler="none"):
        h = make_host(tmp_path / ("h%d" % len(hosts)), kernel, scheduler)
        for module in (host_profile, blk_queue, iocost):
            monkeypatch.setattr(module, "KernelFS", lambda: h.sim)
        monkeypatch.setattr(host_profile, "Runner", lambda module: None)
        h.warnings = []
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: h.warnings.append(msg))
        h.run = lambda main, **args: (h.warnings.clear(), run_module(main, **args))[1]
        hosts.append(h)
        return h
    return make


def files(h):
    """What the kernel files hold: iocost's root files and both disks' queues."""
    return (h.sim.read("/sys/fs/cgroup/io.cost.qos"), h.sim.read("/sys/fs/cgroup/io.cost.model"),
            dict((n, (q.elevator, q.nr_requests, q.wbt_show(), dict(q.values))) for n, q in h.q.items()))


def assert_refused(h, result, before, *words):
    assert result.get("failed"), result
    assert result["msg"].startswith("Invalid request (nothing was changed): "), result["msg"]
    for word in words:
        assert word in result["msg"], (word, result["msg"])
    assert "Traceback" not in result["msg"]
    assert h.sim.writes == [], "a refusal writes nothing"
    assert files(h) == before


BFQ_WORDS = ("nvme0n1 (259:0, %s)" % SELECTOR, "bfq", "Set blk_queue scheduler none or mq-deadline for this disk, "
             "or leave iocost off on it")


# -- bfq: refused -------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["6.1", "6.12"])
@pytest.mark.parametrize("check_mode", [False, True])
def test_iocost_on_a_bfq_disk_is_refused(host, kernel, check_mode):
    h = host(kernel, scheduler="bfq")
    before = files(h)
    result = h.run(iocost.main, _ansible_check_mode=check_mode, **ENABLE)
    assert_refused(h, result, before, *BFQ_WORDS)


@pytest.mark.parametrize("check_mode", [False, True])
def test_bfq_on_an_iocost_disk_is_refused_by_blk_queue(host, check_mode):
    h = host("6.12")
    assert not h.run(iocost.main, **ENABLE).get("failed")
    h.sim.writes[:] = []
    before = files(h)
    result = h.run(blk_queue.main, device="lab-nvme-a", scheduler="bfq", persist=False, _ansible_check_mode=check_mode)
    assert_refused(h, result, before, *BFQ_WORDS)
    # the other disk, without iocost, may run bfq
    assert not h.run(blk_queue.main, device="lab-nvme-b", scheduler="bfq", persist=False).get("failed")


@pytest.mark.parametrize("check_mode", [False, True])
def test_host_profile_refuses_bfq_set_in_the_same_call(host, check_mode):
    h = host("6.1")
    before = files(h)
    result = h.run(host_profile.main, _ansible_check_mode=check_mode, iocost=SECTION,
                   blk_queue={"devices": [{"device": "lab-nvme-a", "scheduler": "bfq"}], "persist": False})
    assert_refused(h, result, before, "iocost conflict: ", *BFQ_WORDS)


def test_host_profile_counts_a_scheduler_the_same_call_changes(host):
    """A bfq disk switched to none in the call that enables iocost: the state after the call is what counts."""
    h = host("6.12", scheduler="bfq")
    result = h.run(host_profile.main, iocost=SECTION,
                   blk_queue={"devices": [{"device": "lab-nvme-a", "scheduler": "none"}], "persist": False})
    assert not result.get("failed"), result["msg"]
    assert h.q["nvme0n1"].elevator == "none" and "259:0 enable=1" in h.sim.read("/sys/fs/cgroup/io.cost.qos")
    # and the iocost module alone on that disk now finds nothing in the way
    assert not h.run(iocost.main, **ENABLE).get("failed")


def test_leaving_iocost_off_on_a_bfq_disk_is_fine(host):
    h = host("6.1", scheduler="bfq")
    result = h.run(iocost.main, device="lab-nvme-a", state="absent", persist=False)
    assert not result.get("failed"), result.get("msg")


# -- wbt: warned where a latency set by hand keeps it on ------------------------------------------

def wbt_warnings(h):
    return [w for w in h.warnings if "writeback throttling" in w]


def test_wbt_set_by_hand_under_iocost_on_6_1_is_warned_not_the_default(host):
    """6.1 keeps its default wbt on under iocost; the lab measured no harm from it, so only a latency set by hand
    is named (in the same host_profile call too), and turning it off in that call silences it."""
    h = host("6.1")
    result = h.run(iocost.main, **ENABLE)
    assert not result.get("failed"), result.get("msg")
    assert wbt_warnings(h) == [] and h.q["nvme0n1"].wbt_show() == 2000
    result = h.run(host_profile.main, iocost=SECTION,
                   blk_queue={"devices": [{"device": "lab-nvme-a", "wbt_lat_usec": 9000}], "persist": False})
    assert not result.get("failed"), result.get("msg")
    (warning,) = wbt_warnings(h)
    assert "nvme0n1 (259:0, %s)" % SELECTOR in warning and "wbt_lat_usec 9000, set by hand" in warning
    assert "Set blk_queue wbt_lat_usec 0 (or -1, the default) for this disk" in warning
    result = h.run(host_profile.main, iocost=SECTION,
                   blk_queue={"devices": [{"device": "lab-nvme-a", "wbt_lat_usec": 0}], "persist": False})
    assert not result.get("failed"), result.get("msg")
    assert wbt_warnings(h) == []
    assert h.q["nvme0n1"].wbt_show() == 0


def test_wbt_under_iocost_on_6_12_only_when_set_by_hand(host):
    h = host("6.12")
    h.run(iocost.main, **ENABLE)
    assert wbt_warnings(h) == [], "6.12 switches the default wbt off under iocost"
    result = h.run(blk_queue.main, device="lab-nvme-a", wbt_lat_usec=5000, persist=False)
    assert not result.get("failed"), result.get("msg")
    (warning,) = wbt_warnings(h)
    assert "wbt_lat_usec 5000, set by hand" in warning


# -- io.latency: warned; io.max: not -----------------------------------------------------------

@pytest.mark.parametrize("name, line, words", [
    ("io.latency", "259:0 target=2000", ["inference.slice set an io.latency target on it"]),
])
def test_io_latency_beside_iocost_is_warned(host, name, line, words):
    h = host("6.12")
    h.add_cgroup("inference.slice", {name: line})
    h.add_cgroup("training.slice", {name: "259:1 " + line.split(" ", 1)[1]})   # another disk: not this one's
    result = h.run(iocost.main, **ENABLE)
    assert not result.get("failed"), result.get("msg")
    found = [w for w in h.warnings if name + " " in w or name + " target" in w]
    assert len(found) == 1, h.warnings
    for word in words + ["nvme0n1 (259:0, %s)" % SELECTOR, "leave iocost off on the disk"]:
        assert word in found[0], (word, found[0])
    assert "training.slice" not in found[0]


def test_io_max_beside_iocost_is_no_conflict(host):
    """A cap on a low-weight group acted as a plain hard cap beside iocost on the lab: the training role's caps
    are not warned about."""
    h = host("6.12")
    h.add_cgroup("training.slice", {"io.max": "259:0 rbps=max wbps=max riops=400 wiops=max"})
    result = h.run(iocost.main, **ENABLE)
    assert not result.get("failed"), result.get("msg")
    assert [w for w in h.warnings if "io.max" in w] == []
    assert [r.name for r in _iocost.CONFLICTS] == ["bfq", "wbt", "io.latency"]


def test_a_cleared_limit_is_not_one(host):
    h = host("6.12")
    h.add_cgroup("inference.slice", {"io.max": "259:0 rbps=max wbps=max riops=max wiops=max",
                                     "io.latency": "259:0 target=max"})
    h.run(iocost.main, **ENABLE)
    assert [w for w in h.warnings if "io.max" in w or "io.latency" in w] == []


# -- the rule table itself ----------------------------------------------------------------------

class Record(object):
    name, majmin, stable_selector, rotational = "sda", "8:0", "wwn-0x5000", True


@pytest.mark.parametrize("plan, refused, warned", [
    (dict(scheduler="bfq", wbt=("default", 75000)), ["bfq"], []),
    (dict(scheduler="mq-deadline", wbt=("default", 75000)), [], []),
    (dict(scheduler="mq-deadline", wbt=("manual", 9000)), [], ["wbt"]),
    (dict(scheduler="none", wbt=("off", 0), io_latency=["/sys/fs/cgroup/b"]), [], ["io.latency"]),
    (dict(scheduler="bfq", wbt=("manual", 9000), iocost=False), [], []),
])
def test_each_rule_once(plan, refused, warned):
    disk = _iocost.DiskPlan(Record(), plan.get("iocost", True), plan["scheduler"], plan["wbt"],
                            io_latency=plan.get("io_latency", ()))
    errors, warnings = _iocost.conflicts([disk])
    names = dict((r.name, r) for r in _iocost.CONFLICTS)
    assert len(errors) == len(refused) and len(warnings) == len(warned)
    assert all(names[n].action == _iocost.REFUSE for n in refused)
    assert all(names[n].action == _iocost.WARN for n in warned)
    assert all(m.startswith("sda (8:0, wwn-0x5000): ") for m in errors + warnings)


def test_io_limits_reads_only_where_io_latency_can_be(tmp_path):
    """Only children of groups that enable io have io files; a kernel without io.latency stops at the first."""
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

    class Counting(KernelFS):
        reads = []

        def read(self, path, default=None):
            self.reads.append(path)
            return super(Counting, self).read(path, default)

    for latency in (True, False):
        h = FakeHost(tmp_path / str(latency), kernel=RELEASES["6.1"])
        h.add_cgroup_root(subtree="io memory pids", io_latency=latency)
        for name in ("a.slice", "b.slice", "system.slice/x.service", "system.slice/y.service"):
            h.add_cgroup(name)
        if latency:
            h.add_cgroup("b.slice", {"io.latency": "259:0 target=2000"})
        fs = Counting(h.root)
        Counting.reads = []
        got = _iocost.io_limits(fs, ["259:0"])
        latency_reads = [p for p in Counting.reads if p.endswith("/io.latency")]
        if latency:
            assert got == {"259:0": {"io.latency": ["/sys/fs/cgroup/b.slice"]}}
            # system.slice does not enable io for its services: theirs are not read
            groups = ("a.slice", "b.slice", "system.slice")
            assert sorted(latency_reads) == ["/sys/fs/cgroup/%s/io.latency" % g for g in groups]
        else:
            assert got == {"259:0": {"io.latency": []}} and latency_reads == []
