# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cgroup request outside AnsibleModule: manager choice, results, errors (the module tests cover the rest)."""

import os

import pytest

from sim.host import FakeHost
from sim.cgroup import SimCgroup
from sim.systemd import SimSystemd

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as cr

CG = "/sys/fs/cgroup"
QOS = "259:0 enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00"


@pytest.fixture
def host(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, serial="lab-nvme-a", majmin="259:0")
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.write(CG + "/io.cost.qos", QOS)
    kernel = SimCgroup(h)
    kernel.add_group("system.slice", subtree="cpu io memory pids")
    h.mkdir("/run/systemd/system")
    return h, kernel, SimSystemd(h, kernel, version=257)


def params(**kw):
    out = {"name": None, "manager": "auto", "state": "present", "create": False, "description": None,
           "when_unsupported": "fail", "adopt": False, "io": None, "memory": None, "cpu": None}
    out.update(kw)
    return out


def test_request_error_collects_messages():
    err = cr.RequestError(["a", "b"])
    assert err.errors == ["a", "b"] and err.msg == "Invalid request (nothing was changed): a; b" and str(err) == err.msg
    assert cr.RequestError("one").errors == ["one"]


@pytest.mark.parametrize("name, manager, expected", [
    ("inference.slice", "auto", "systemd"),
    ("vllm.service", "auto", "systemd"),
    ("system.slice/x.service/w", "auto", "cgroupfs"),
    ("inference.slice", "cgroupfs", "cgroupfs"),
])
def test_manager_choice(host, name, manager, expected):
    _h, kernel, systemd = host
    req = cr.Request(params(name=name, manager=manager), kernel, systemd)
    assert req.manager == expected and req.version == 257 and req.systemd_host is True


def test_manager_auto_without_systemd(host):
    h, kernel, systemd = host
    os.rmdir(h.path("/run/systemd/system"))
    req = cr.Request(params(name="inference.slice"), kernel, systemd)
    assert req.manager == "cgroupfs" and req.version is None and systemd.calls == []


def test_reconcile_result_shape(host):
    _h, kernel, systemd = host
    result = cr.reconcile(params(name="inference.slice", io={"weight": 300, "weights": None}), kernel, systemd)
    assert sorted(result) == ["cgroup", "changed", "devices", "diff", "kernel", "manager", "name", "persisted_to",
                              "warnings"]
    assert result["changed"] and result["warnings"] == [] and result["devices"] == {}
    assert result["kernel"] == {"io.weight": {"default": 300}}


def test_reconcile_raises_request_error_with_every_problem(host):
    _h, kernel, systemd = host
    with pytest.raises(cr.RequestError) as exc:
        cr.reconcile(params(name="inference.slice", io={"weights": {"nvme0n1": 100, "nope": 5}, "latency": {}}),
                     kernel, systemd)
    assert any(m.startswith("io.latency needs the kernel file io.latency") for m in exc.value.errors)
    assert any("io.weights: No block device matches 'nope'" in m for m in exc.value.errors)
    assert systemd.mutating_calls == [] and kernel.ops == []


def test_kernel_values(host):
    h, kernel, _systemd = host
    kernel.add_group("g")
    h.write(CG + "/g/memory.high", "junk")
    assert cr.kernel_values(kernel, CG + "/g", ["io.weight", "memory.high", "io.latency", "io.weight"]) == {
        "io.latency": None, "io.weight": {"default": 100}, "memory.high": "junk"}
    assert cr.kernel_values(kernel, None, ["cpu.weight"]) == {"cpu.weight": None}
