# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""iocost_calibrate through AnsibleModule: arguments, check mode, the six measurements and the QoS
runs (fio replaced by recorded-shape results), and failures as clean fail_json without a traceback.
The disk is the simulated calibration host of tests/unit/sim/calibration.py."""

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as targets
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio
from ansible_collections.aiinfra.io_isolation.plugins.modules import iocost_calibrate

from sim.calibration import BEFORE, MODEL, Lab, fio_runner


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    lab = Lab(str(tmp_path))
    lab.kind = "file"
    lab.fio_calls = []
    monkeypatch.setattr(iocost_calibrate, "KernelFS", lambda: lab.sim)
    monkeypatch.setattr(iocost_calibrate, "Runner", lambda module: fio_runner())
    monkeypatch.setattr(targets, "plan_target", lambda fs, resolver, run, params: lab.target(lab.kind))
    monkeypatch.setattr(targets, "create_scratch", lambda target: lab.events.append(("create", target.path)))
    monkeypatch.setattr(targets, "remove_scratch", lambda path: lab.events.append(("remove", path)))

    def measurement(binary, m, path, size, rule, **kw):
        # passes alternate 2% above and below the model, so their weighted mean is the model
        value = MODEL[m.name] * (1.02 if sum(c[0] == m.name for c in lab.fio_calls) % 2 == 0 else 0.98)
        lab.fio_calls.append((m.name, path, kw, rule.as_dict()))
        return {"name": m.name, "unit": m.unit, "value": int(round(value)), "stopped": "stable", "seconds": 6.1,
                "fio_seconds": 5.0, "post_seconds": 3.0, "windows": [[3.0, value]], "estimates": [[3.0, value]],
                "spread": {"rse": 0.01, "cv": 0.02, "n": 1}, "argv": ["fio", "--name=aiinfra-" + m.name]}

    def qos(binary, path, size, rrandiops, wrandiops, seconds=8, rotational=False):
        lab.fio_calls.append(("qos", rrandiops, wrandiops, seconds, rotational))
        read, write = {"95.0": 800.0}, {"95.0": 1400.0}
        return {"read": {"percentiles_us": read}, "write": {"percentiles_us": write},
                "qos": fio.derive_qos(read, write, rotational), "rule": fio.QOS_RULE}
    monkeypatch.setattr(fio, "run_measurement", measurement)
    monkeypatch.setattr(fio, "run_qos", qos)
    lab.module = lambda **args: run_module(iocost_calibrate.main, **args)
    return lab


SIX = ["rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"]


def test_a_scratch_file_calibration(lab):
    result = lab.module(filesystem="/srv/calib", scratch_size="256M", stop_rule={"max_seconds": 8, "passes": 2})
    assert not result.get("failed"), result
    assert result["model"] == MODEL and result["changed"] is False
    # two passes, in turn: all six, the QoS runs (at the first round's IOPS), then all six again
    assert [c[0] for c in lab.fio_calls] == SIX + ["qos"] + SIX
    assert lab.fio_calls[6][1:] == (MODEL["rrandiops"] * 1.02, MODEL["wrandiops"] * 1.02, 8, False)
    assert result["latency"]["after_round"] == 1
    assert lab.fio_calls[0][3]["max_seconds"] == 8 and lab.fio_calls[0][2] == {"numjobs": 1, "big_bs": 134217728}
    rbps = result["measurements"][0]
    assert rbps["stopped"] == "stable/stable" and [p["value"] for p in rbps["passes"]] == [
        round(MODEL["rbps"] * 1.02), round(MODEL["rbps"] * 0.98)]
    assert rbps["windows"] == [[3.0, MODEL["rbps"] * 1.02], [8.0, MODEL["rbps"] * 0.98]]
    # 1.5 x p95, rounded up to 50 us
    assert result["qos"] == {"rpct": 95.0, "rlat": 1200, "wpct": 95.0, "wlat": 2100, "min": 60.0, "max": 100.0}
    # the passes' spread (std 2.83% / sqrt(2 passes) = 2%) outweighs the windows'
    assert result["spread"]["rbps"] == pytest.approx(0.02, abs=1e-5) and result["fio_version"] == "3.39"
    assert lab.state() == BEFORE and lab.journals() == []


def test_default_three_passes_put_the_qos_runs_after_the_second_round(lab):
    result = lab.module(filesystem="/srv/calib", scratch_size="256M")
    assert not result.get("failed"), result
    assert [c[0] for c in lab.fio_calls] == SIX + SIX + ["qos"] + SIX
    # rate-limited at the mean of the two passes before them (+2% and -2%: the model)
    assert lab.fio_calls[12][1:] == (pytest.approx(38000), pytest.approx(33000), 8, False)
    assert result["latency"]["after_round"] == 2 and result["method"]["stop_rule"]["passes"] == 3
    assert [len(m["passes"]) for m in result["measurements"]] == [3] * 6
    assert lab.state() == BEFORE and lab.journals() == []


def test_no_qos_runs_when_not_asked(lab):
    result = lab.module(filesystem="/srv/calib", scratch_size="256M", measure_qos=False)
    assert not result.get("failed"), result
    assert [c[0] for c in lab.fio_calls] == SIX * 3 and result["qos"] is None and result["latency"] is None


def test_one_pass_runs_each_measurement_once(lab):
    result = lab.module(filesystem="/srv/calib", scratch_size="256M", stop_rule={"passes": 1})
    assert not result.get("failed"), result
    assert [c[0] for c in lab.fio_calls] == SIX + ["qos"]
    assert result["model"]["rbps"] == round(MODEL["rbps"] * 1.02) and result["method"]["stop_rule"]["passes"] == 1
    assert result["measurements"][0]["spread"]["between_passes"] is None


def test_check_mode_measures_nothing(lab):
    result = lab.module(filesystem="/srv/calib", _ansible_check_mode=True)
    assert result["changed"] is False and "model" not in result
    assert lab.fio_calls == [] and lab.sim.writes == [] and lab.events == []


def test_fio_failure_is_a_clean_failure(lab, monkeypatch):
    def fail(binary, m, path, size, rule, **kw):
        raise fio.FioError(["fio"], 1, "err=5", "fio %s on %s failed (rc=1): Input/output error" % (m.name, path))
    monkeypatch.setattr(fio, "run_measurement", fail)
    result = lab.module(filesystem="/srv/calib")
    assert result["failed"] is True and "Traceback" not in result["msg"]
    assert "fio rbps on" in result["msg"] and "put back" in result["msg"]
    assert result["fio"]["rc"] == 1 and result["restore"]["errors"] == []
    assert lab.state() == BEFORE


@pytest.mark.parametrize("args, needle", [
    ({}, "one of the following is required: device, filesystem"),
    ({"filesystem": "/srv/calib", "scratch_size": "ten"}, "scratch_size: size: 'ten' is not a size"),
    ({"filesystem": "/srv/calib", "stop_rule": {"windows": 0}}, "stop_rule:"),
    ({"filesystem": "/srv/calib", "stop_rule": {"passes": 0}}, "stop_rule: passes must be a whole number from 1 to 10"),
    ({"filesystem": "/srv/calib", "numjobs": 0}, "numjobs must be at least 1"),
])
def test_bad_input_fails_before_any_write(lab, args, needle):
    result = lab.module(**args)
    assert result.get("failed") is True and needle in result["msg"], result
    assert lab.sim.writes == [] and lab.fio_calls == []
