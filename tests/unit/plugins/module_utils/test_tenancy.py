# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tenancy report: units and processes per tenant slice, listed workloads, I/O shares over an interval and the
judgement verify.yml and the health gate take from it."""

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import RequestError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as t
from sim.tenancy import TenantHost

DEFAULTS = {"devices": [], "interval": 2.0, "outside_max_pct": 50.0, "min_iops": 20.0,
            "min_bytes_per_second": 1048576, "sample": 8}


def request(**kw):
    out = dict(DEFAULTS, slices=[{"name": "inference.slice", "workloads": [{"kind": "service", "name": "vllm.service"}]},
                                 {"name": "training.slice", "workloads": []}])
    out.update(kw)
    return out


def run(host, **kw):
    fs = KernelFS(host.root)
    req, disks = t.prepare(fs, request(**kw))
    return t.report(fs, req, disks, sleep=host.sleep, clock=host.clock)


@pytest.fixture
def host(tmp_path):
    return TenantHost(tmp_path)


def test_a_placed_service_with_its_io_is_no_drift(host):
    host.unit("inference.slice/vllm.service", {101: "vllm", 102: "python3"}).unit("training.slice")
    host.unit("system.slice/ssh.service", {50: "sshd"})
    host.charge("inference.slice/vllm.service", now=True, rbytes=10 << 20, rios=2560)   # before: not in the delta
    host.charge("inference.slice/vllm.service", rbytes=4096 * 400, rios=400)
    host.charge("system.slice/ssh.service", wbytes=4096 * 10, wios=10)
    r = run(host, devices=["lab-nvme-a"])
    inf = r["slices"]["inference.slice"]
    assert inf["units"] == ["vllm.service"] and inf["processes"]["count"] == 2
    assert inf["processes"]["sample"][0] == {"pid": 101, "comm": "vllm", "cgroup": "/inference.slice/vllm.service"}
    assert inf["workloads"] == [{"kind": "service", "name": "vllm.service", "listed_as": "vllm.service",
                                 "slice": "inference.slice", "cgroup": "/inference.slice/vllm.service",
                                 "running": True, "placed": True}]
    d = r["disks"]["nvme0n1"]
    assert d["interval"] == 2.0 and host.slept == [2.0]
    assert d["total"] == {"rbytes": 4096 * 400, "wbytes": 4096 * 10, "rios": 400, "wios": 10}
    assert d["tenants"]["inference.slice"]["ios_share"] == round(400 / 410.0, 4)
    assert d["cgroups"]["system.slice"]["wios"] == 10 and "training.slice" not in d["cgroups"]
    assert d["outside_share"] == round(10 / 410.0, 4) and d["iops"] == 205.0
    assert d["judged"] is True and d["drift"] is False
    assert r["drift"] == []


def test_a_service_outside_its_slice_and_the_empty_slice_are_drift(host):
    host.unit("inference.slice").unit("system.slice/vllm.service", {101: "vllm"})
    r = run(host)
    assert r["slices"]["inference.slice"]["empty"] is True
    assert r["slices"]["inference.slice"]["workloads"][0]["placed"] is False
    assert r["drift"] == [
        "service vllm.service (listed for inference.slice as vllm.service) runs in /system.slice/vllm.service, "
        "outside its slice",
        "inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]
    assert r["disks"] == {}, "no devices: no I/O read"


def test_a_stopped_service_is_not_outside_but_its_slice_is_empty(host):
    host.unit("inference.slice")
    r = run(host)
    w = r["slices"]["inference.slice"]["workloads"][0]
    assert (w["running"], w["placed"], w["cgroup"]) == (False, None, None)
    assert r["drift"] == ["inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]


def test_a_slice_that_does_not_exist_is_empty_and_a_slice_without_workloads_is_not_judged(host):
    r = run(host)
    assert r["slices"]["inference.slice"]["exists"] is False and r["slices"]["inference.slice"]["empty"] is True
    assert r["slices"]["training.slice"]["empty"] is True
    assert r["drift"] == ["inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]


def test_patterns_match_running_services_only_and_processes_of_helpers_count(host):
    host.unit("inference.slice/embed-a.service", {11: "embed"}).unit("system.slice/embed-b.service", {12: "embed"})
    host.unit("system.slice/embed-c.scope", {13: "x"})
    host.unit("inference.slice/vllm.service", {14: "vllm"}).unit("inference.slice/vllm.service/worker", {15: "w"})
    r = run(host, slices=[{"name": "inference.slice", "workloads": [{"kind": "service", "pattern": "embed-*.service"},
                                                                    {"kind": "service", "name": "vllm.service"}]}])
    inf = r["slices"]["inference.slice"]
    assert [(w["name"], w["placed"]) for w in inf["workloads"]] == [
        ("embed-a.service", True), ("embed-b.service", False), ("vllm.service", True)]
    # a unit's own sub-cgroups are no units, and their processes count
    assert inf["units"] == ["embed-a.service", "vllm.service"] and inf["processes"]["count"] == 3
    assert r["drift"] == ["service embed-b.service (listed for inference.slice as embed-*.service) runs in "
                          "/system.slice/embed-b.service, outside its slice"]


def test_the_sample_is_bounded_and_a_process_gone_keeps_its_pid(host):
    host.unit("inference.slice/vllm.service", dict((100 + i, "w%d" % i) for i in range(20)))
    host.h.remove("/proc/100/comm")
    r = run(host, sample=3)
    p = r["slices"]["inference.slice"]["processes"]
    assert p["count"] == 20 and [s["pid"] for s in p["sample"]] == [100, 101, 102] and p["sample"][0]["comm"] is None


def test_most_io_outside_the_tenants_is_drift(host):
    host.unit("inference.slice/vllm.service", {1: "vllm"}).unit("system.slice/backup.service", {2: "tar"})
    host.charge("inference.slice/vllm.service", rbytes=4096 * 100, rios=100)
    host.charge("system.slice/backup.service", rbytes=4096 * 300, rios=300)
    r = run(host, devices=["nvme0n1"])
    d = r["disks"]["nvme0n1"]
    assert d["outside_share"] == 0.75 and d["judged"] and d["drift"]
    assert r["drift"] == ["nvme0n1: 75% of its bytes and 75% of its I/Os over 2 s were charged outside the tenant "
                          "slices (more than 50%; most to system.slice)"]


def test_bytes_or_ios_alone_make_it_drift(host):
    # few large writes outside (a checkpoint writer left in system.slice): most of the bytes, few of the I/Os
    host.unit("inference.slice/vllm.service", {1: "vllm"}).unit("system.slice/ckpt.service", {2: "ckpt"})
    host.charge("inference.slice/vllm.service", rbytes=4096 * 100, rios=100)
    host.charge("system.slice/ckpt.service", wbytes=8 << 20, wios=8)
    d = run(host, devices=["nvme0n1"])["disks"]["nvme0n1"]
    assert d["outside"]["ios_share"] < 0.1 and d["outside"]["bytes_share"] > 0.9 and d["drift"] is True


def test_an_idle_disk_is_not_judged(host):
    host.unit("system.slice/journald.service", {2: "journald"})
    host.charge("system.slice/journald.service", wbytes=4096 * 30, wios=30)     # 15 I/Os/s, 60 KiB/s
    d = run(host, devices=["nvme0n1"])["disks"]["nvme0n1"]
    assert d["outside_share"] == 1.0 and d["judged"] is False and d["drift"] is False
    assert d["note"].startswith("idle: 15.0 I/Os/s and 61440 bytes/s over 2 s")


def test_the_threshold_is_strictly_more_than(host):
    host.unit("inference.slice/vllm.service", {1: "vllm"}).unit("system.slice/a.service", {2: "a"})
    host.charge("inference.slice/vllm.service", rbytes=4096 * 100, rios=100)
    host.charge("system.slice/a.service", rbytes=4096 * 100, rios=100)
    assert run(host, devices=["nvme0n1"])["disks"]["nvme0n1"]["drift"] is False


def test_io_of_the_root_cgroup_itself_counts_outside(host):
    # the root's io.stat holds the disk's own counters: a process left in the root cgroup charges nobody below it
    host.unit("inference.slice/vllm.service", {1: "vllm"})
    host.charge("inference.slice/vllm.service", rbytes=4096 * 100, rios=100)
    host.charge("", rbytes=4096 * 300, rios=300)
    d = run(host, devices=["nvme0n1"])["disks"]["nvme0n1"]
    assert d["cgroups"]["/"]["rios"] == 300 and d["outside_share"] == 0.75 and d["drift"] is True


def test_interval_zero_reports_totals_and_does_not_judge(host):
    host.unit("system.slice/a.service", {2: "a"}).charge("system.slice/a.service", now=True, rbytes=1 << 30, rios=1000)
    r = run(host, devices=["nvme0n1"], interval=0)
    d = r["disks"]["nvme0n1"]
    assert host.slept == [] and d["total"]["rios"] == 1000 and d["judged"] is False and "since" in d["note"]
    assert r["drift"] == ["inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]


def test_a_nested_tenant_slice_is_found_by_its_dashes(host):
    host.unit("ai.slice/ai-inference.slice/vllm.service", {1: "vllm"}).unit("ai.slice/other.service", {2: "o"})
    host.charge("ai.slice/ai-inference.slice/vllm.service", rbytes=4096 * 100, rios=100)
    host.charge("ai.slice/other.service", rbytes=4096 * 300, rios=300)
    r = run(host, devices=["nvme0n1"], slices=[{"name": "ai-inference.slice",
                                                "workloads": [{"kind": "service", "name": "vllm.service"}]}])
    assert r["slices"]["ai-inference.slice"]["workloads"][0]["placed"] is True
    d = r["disks"]["nvme0n1"]
    # the top-level ai.slice holds both; only the tenant slice's own io.stat counts as the tenant's
    assert d["tenants"]["ai-inference.slice"]["rios"] == 100 and d["outside_share"] == 0.75
    assert r["drift"][-1].endswith("most to ai.slice)")


@pytest.mark.parametrize("change, message", [
    ({"interval": 61}, "interval is 61; give 0"),
    ({"interval": -1}, "interval is -1; give 0"),
    ({"outside_max_pct": 100}, "outside_max_pct is 100"),
    ({"min_iops": -1}, "min_iops is -1"),
    ({"slices": [{"name": "inference", "workloads": []}]}, "'inference' is not a slice name"),
    ({"slices": [{"name": "-bad.slice", "workloads": []}]}, "slice name '-bad.slice' is invalid"),
    ({"slices": [{"name": "inference.slice", "workloads": [{"kind": "service", "name": "vllm"}]}]},
     "workload 'vllm' of kind service must be a service name"),
    ({"devices": ["no-such-disk"]}, "tenancy: devices: "),
])
def test_bad_requests_are_refused_before_anything_is_read(host, change, message):
    with pytest.raises(RequestError) as e:
        t.prepare(KernelFS(host.root), request(**change))
    assert message in e.value.msg


def test_scan_units_walks_slices_only_and_is_bounded(host):
    host.unit("system.slice/docker-abc.scope/inner.service", {1: "x"}).unit("user.slice/user-0.slice/session-1.scope")
    host.unit("init.scope", {1: "systemd"})
    units, truncated = t.scan_units(KernelFS(host.root))
    assert units == {"docker-abc.scope": "/system.slice/docker-abc.scope", "init.scope": "/init.scope",
                     "session-1.scope": "/user.slice/user-0.slice/session-1.scope"} and not truncated
    assert t.scan_units(KernelFS(host.root), limit=1)[1] is True
