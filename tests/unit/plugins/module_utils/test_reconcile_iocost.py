# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The engine with the real codecs against a simulated blk-iocost (rules from observed kernels).

The simulation follows what Debian 6.1/6.12 did in the lab: lines appear on first write, tokens
apply in order, ``ctrl=auto`` restores the class defaults, percentages print with 2 decimals,
per-device io.weight fails with EOPNOTSUPP until iocost is initialised on the disk.
"""

import errno

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    CodecSetting, Reconciler, ReconcileError,
)
from sim.iocost import ROOT, SSD_DFL, SimIocost
from sim.kernel import SimKernel

USER_MODEL = {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000, "wbps": 1000000000,
              "wseqiops": 50000, "wrandiops": 50000}
USER_QOS = {"enable": 1, "rpct": 95, "rlat": 5000, "wpct": 95, "wlat": 5000, "min": 50, "max": 150}


def iocost_settings(dev="259:0", model=None, qos=None, weight=800):
    return [
        CodecSetting("io.weight[%s]" % dev, ROOT + "/cg/io.weight", codecs.IO_WEIGHT, weight, device=dev, order=30),
        CodecSetting("io.cost.qos[%s]" % dev, ROOT + "/io.cost.qos", codecs.IO_COST_QOS, qos or USER_QOS, device=dev,
                     order=20, reset={"enable": 0, "ctrl": "auto"}),
        CodecSetting("io.cost.model[%s]" % dev, ROOT + "/io.cost.model", codecs.IO_COST_MODEL, model or USER_MODEL,
                     device=dev, order=10, reset={"ctrl": "auto"}),
    ]


@pytest.fixture
def sim(tmp_path):
    return SimKernel(str(tmp_path))


def test_iocost_applies_model_then_qos_then_weight_and_is_idempotent(sim):
    SimIocost(sim)
    result = Reconciler(sim).run(iocost_settings())
    assert [p.rsplit("/", 1)[1] for p, _line in sim.writes] == ["io.cost.model", "io.cost.qos", "io.weight"]
    assert sim.writes[1][1] == "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00"
    assert result["values"]["io.cost.qos[259:0]"]["rpct"] == "95.00"
    assert result["diff"]["before"]["io.cost.qos[259:0]"] is None  # no line before the first write
    assert result["values"]["io.weight[259:0]"] == 800
    sim.writes[:] = []
    assert Reconciler(sim).run(iocost_settings())["changed"] is False and sim.writes == []


def test_check_mode_writes_nothing(sim):
    SimIocost(sim)
    result = Reconciler(sim, check_mode=True).run(iocost_settings())
    assert sim.writes == [] and result["changed"]
    assert set(result["diff"]["after"]) == {"io.cost.model[259:0]", "io.cost.qos[259:0]", "io.weight[259:0]"}


def test_kernel_refusal_mid_plan_restores_the_model(sim):
    kernel = SimIocost(sim, refuse_qos="259:0")
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(iocost_settings())
    assert "io.cost.qos" in exc.value.msg and "EINVAL" in exc.value.msg
    assert kernel.model["259:0"]["ctrl"] == "auto" and kernel.model["259:0"]["rbps"] == SSD_DFL["rbps"]
    assert "io.cost.model[259:0]" in exc.value.restored
    assert "259:0" not in kernel.weight


def test_invalid_input_is_refused_before_any_write(sim):
    SimIocost(sim)
    bad_model = dict(USER_MODEL, riops=1000)
    bad_qos = dict(USER_QOS, rpct=101)
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(iocost_settings(model=bad_model, qos=bad_qos, weight=0))
    assert sim.writes == []
    msg = exc.value.msg
    assert "rrandiops" in msg and "rpct" in msg and "1..10000" in msg


def test_unknown_device_is_reported_with_enodev_and_nothing_left_behind(sim):
    kernel = SimIocost(sim)
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(iocost_settings(dev="8:0"))
    assert "ENODEV" in exc.value.msg and "8:0" in exc.value.msg
    assert kernel.model == {} and kernel.qos == {}


def test_ctrl_auto_after_user_values(sim):
    kernel = SimIocost(sim)
    Reconciler(sim).run(iocost_settings())
    back = [CodecSetting("io.cost.model[259:0]", ROOT + "/io.cost.model", codecs.IO_COST_MODEL, {"ctrl": "auto"},
                         device="259:0")]
    result = Reconciler(sim).run(back)
    assert result["changed"] and kernel.model["259:0"]["ctrl"] == "auto"
    assert Reconciler(sim).run(back)["changed"] is False


def test_plain_codec_setting_and_junk_readback(sim):
    sim.state["/sys/block/nvme0n1/queue/nr_requests"] = "64"
    sim.handlers["/sys/block/nvme0n1/queue/nr_requests"] = \
        lambda line: sim.state.__setitem__("/sys/block/nvme0n1/queue/nr_requests", str(max(4, int(line))))
    nr = codecs.QUEUE_ATTRIBUTES["nr_requests"]
    s = CodecSetting("nr_requests[nvme0n1]", "/sys/block/nvme0n1/queue/nr_requests", nr, 1)
    result = Reconciler(sim).run([s])
    assert result["values"]["nr_requests[nvme0n1]"] == 4, "the codec predicts the kernel's floor of 4"
    sim.state["/sys/block/nvme0n1/queue/nr_requests"] = "junk"
    with pytest.raises(ReconcileError, match="cannot read the current value"):
        Reconciler(sim).run([CodecSetting("nr", "/sys/block/nvme0n1/queue/nr_requests", nr, 8)])


def test_restore_of_a_plain_setting_uses_the_previous_value(sim):
    sim.state["/sys/a"] = "64"
    sim.handlers["/sys/a"] = lambda line: sim.state.__setitem__("/sys/a", line.strip())
    sim.state["/sys/b"] = "1"

    def busy(line):
        raise OSError(errno.EBUSY, "busy")
    sim.handlers["/sys/b"] = busy
    ra = codecs.QUEUE_ATTRIBUTES["read_ahead_kb"]
    with pytest.raises(ReconcileError):
        Reconciler(sim).run([CodecSetting("a", "/sys/a", ra, 128), CodecSetting("b", "/sys/b", ra, 256)])
    assert sim.state["/sys/a"] == "64"
