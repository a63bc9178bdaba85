# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/isolation/vrate_pin.py without a guest: the Prometheus text parser, the per-disk point it takes
from one exporter run (on the exporter's own output for a lab-like host), the two vrate alert conditions
evaluated as prometheus/alerts.yml states them, and the gross configurations' role variables."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position
from sim.metrics import EXPECTED, ROOT_IO_STAT, lab_host  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs as _codecs  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as _metrics
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS  # noqa: E402  pylint: disable=wrong-import-position

vp = load("isolation", "vrate_pin")
RULES = os.path.join(HERE, "..", "..", "..", "prometheus", "alerts.yml")


def test_parser_reads_labels_escapes_timestamps_and_special_values():
    text = ('# HELP x a "help"\n# TYPE x gauge\n\n'
            'x{a="1",b="q\\"uo\\\\te\\n",c="{,}"} 2.5\n'
            'y 3 1700000000000\n'
            'z{} +Inf\n'
            'w{ a = "1" } -1e-3\n')
    assert vp.parse_exposition(text) == [("x", {"a": "1", "b": 'q"uo\\te\n', "c": "{,}"}, 2.5),
                                         ("y", {}, 3.0), ("z", {}, float("inf")), ("w", {"a": "1"}, -0.001)]


@pytest.mark.parametrize("line", ["x{a=1} 2", "x 2 3 4", "x", 'x{a="1" b="2"} 1', "x{a=\"1\"} two"])
def test_parser_refuses_what_is_not_a_sample(line):
    with pytest.raises(ValueError):
        vp.parse_exposition(line + "\n")


def test_the_exporter_output_round_trips():
    samples = vp.parse_exposition(EXPECTED)
    # every sample line, nothing from HELP/TYPE
    assert len(samples) == len([ln for ln in EXPECTED.splitlines() if ln and not ln.startswith("#")])
    assert ("aiinfra_io_isolation_slice_iocost_usage_seconds_total",
            {"device": "nvme0n1", "majmin": "259:0", "slice": "inference.slice"}, 0.05008) in samples


def test_disk_point_from_the_exporter_is_what_the_rules_read():
    # sim/metrics.py: QoS min=50 max=150, cost.vrate=100.00, inference.slice rios=5008 wios=0 on 259:0
    point = vp.disk_point(vp.parse_exposition(EXPECTED), "259:0")
    assert point == {"vrate": 1.0, "min": 0.5, "max": 1.5, "ios": 5008.0}
    # the virtio disk has I/O but no iocost: no vrate, no bounds
    assert vp.disk_point(vp.parse_exposition(EXPECTED), "254:0") == {"vrate": None, "min": None, "max": None,
                                                                     "ios": 326.0 + 0}
    assert vp.disk_point(vp.parse_exposition(EXPECTED), "8:0") == {"vrate": None, "min": None, "max": None,
                                                                   "ios": None}


def test_disk_point_sums_reads_and_writes_over_slices():
    text = "\n".join([
        'aiinfra_io_isolation_slice_io_reads_total{device="d",majmin="1:0",slice="a"} 10',
        'aiinfra_io_isolation_slice_io_writes_total{device="d",majmin="1:0",slice="a"} 5',
        'aiinfra_io_isolation_slice_io_reads_total{device="d",majmin="1:0",slice="b"} 7',
        'aiinfra_io_isolation_slice_io_reads_total{device="e",majmin="1:1",slice="b"} 1000',
        'aiinfra_io_isolation_slice_io_read_bytes_total{device="d",majmin="1:0",slice="b"} 4096'])
    assert vp.disk_point(vp.parse_exposition(text), "1:0")["ios"] == 22


def exporter_point(tmp_path, n, vrate, rios):
    """One exporter run (the collection's _metrics) on the lab-like host with this vrate (%) and reads."""
    h = lab_host(tmp_path / str(n))
    h.write("/sys/fs/cgroup/io.stat", ROOT_IO_STAT.replace("cost.vrate=100.00", "cost.vrate=%.2f" % vrate))
    h.write("/sys/fs/cgroup/inference.slice/io.stat",
            "259:0 rbytes=4096 wbytes=0 rios=%d wios=0 dbytes=0 dios=0 cost.usage=1\n" % rios)
    text = _metrics.render(_metrics.collect(KernelFS(h.root)))
    return dict(vp.disk_point(vp.parse_exposition(text), "259:0"), t=float(n))


def test_pinned_at_min_from_exporter_runs(tmp_path):
    # sim/metrics.py's QoS: min=50.00 max=150.00; 50.4 % is within the rule's 1 %
    points = [exporter_point(tmp_path, n, v, 100 * n) for n, v in enumerate((50.0, 50.0, 50.4, 50.0))]
    ev = vp.evaluate(points)
    assert ev["at_min_rule"] and not ev["at_max_rule"]
    assert (ev["points"], ev["busy"], ev["at_min_fraction"], ev["at_max_fraction"]) == (4, 3, 1.0, 0.0)
    assert ev["vrate"]["min"] == 0.5 and ev["vrate"]["max"] == pytest.approx(0.504)


def test_one_run_above_min_keeps_at_min_from_firing(tmp_path):
    # max_over_time: one run at 50.6 % (> 50 * 1.01) in the window is enough; the fraction still counts the rest
    points = [exporter_point(tmp_path, n, v, 100 * n) for n, v in enumerate((50.0, 50.0, 50.6, 50.0, 50.0))]
    ev = vp.evaluate(points)
    assert not ev["at_min_rule"]
    assert ev["at_min_fraction"] == 0.75


def pt(t, vrate, ios, lo=0.1, hi=100.0):
    return {"t": t, "vrate": vrate, "min": lo, "max": hi, "ios": ios}


def test_no_io_no_alert_even_at_min():
    ev = vp.evaluate([pt(0, 0.1, 50), pt(5, 0.1, 50), pt(10, 0.1, 50)])
    assert ev["busy"] == 0 and ev["vrate"] is None
    assert not ev["at_min_rule"] and not ev["at_max_rule"]


def test_idle_runs_do_not_count_in_the_fractions():
    ev = vp.evaluate([pt(0, 0.5, 0), pt(5, 0.1, 10), pt(10, 0.5, 10), pt(15, 0.1, 20)])
    assert ev["busy"] == 2 and ev["at_min_fraction"] == 1.0
    assert ev["vrate"] == {"mean": pytest.approx(0.1), "min": 0.1, "max": 0.1}
    # the rule's max_over_time looks at every run in the window, idle or not
    assert not ev["at_min_rule"]


def test_a_reset_counter_counts_its_new_value_as_growth():
    ev = vp.evaluate([pt(0, 0.1, 1000), pt(5, 0.1, 3)])
    assert ev["busy"] == 1 and ev["io_growth"] == 3


def test_pinned_at_max():
    ev = vp.evaluate([pt(0, 99.5, 0), pt(5, 100.0, 10), pt(10, 99.2, 20)])
    assert ev["at_max_rule"] and not ev["at_min_rule"]
    assert ev["at_max_fraction"] == 1.0
    ev = vp.evaluate([pt(0, 99.5, 0), pt(5, 100.0, 10), pt(10, 98.9, 20)])
    assert not ev["at_max_rule"] and ev["at_max_fraction"] == 0.5


def test_points_without_vrate_are_left_out():
    ev = vp.evaluate([pt(0, None, 0), pt(5, 0.1, 10), pt(10, 0.1, 20)])
    assert ev["points"] == 2 and ev["busy"] == 1


def test_the_tolerances_are_the_rules():
    with open(RULES) as f:
        rules = f.read()
    assert "aiinfra_io_isolation_iocost_qos_vrate_min_ratio * %s" % vp.AT_MIN in rules
    assert "aiinfra_io_isolation_iocost_qos_vrate_max_ratio * %s" % vp.AT_MAX in rules
    for name in (vp.VRATE,) + vp.IO_COUNTERS:
        assert name in rules


def test_the_window_is_the_loads_span():
    # vrate 100 % before the load (idle, as after the configuration was applied), pinned once the I/O runs
    points = [pt(0, 1.0, 0), pt(5, 0.1, 10), pt(10, 0.1, 20), pt(15, 0.1, 30), pt(20, 0.9, 30)]
    ev = vp.evaluate(points)
    assert ev["at_min_rule"] and ev["busy"] == 3
    assert ev["at_min_longest"] == {"points": 3, "seconds": 10.0}


def test_longest_stretch_at_min():
    points = [pt(0, 0.5, 0), pt(5, 0.1, 1), pt(10, 0.3, 2), pt(15, 0.1, 3), pt(20, 0.1, 4), pt(25, 0.1, 5),
              pt(30, 0.1, 5), pt(35, 0.1, 6)]
    ev = vp.evaluate(points)
    # the idle point at 30 s breaks the stretch: at min only while the disk works
    assert ev["at_min_longest"] == {"points": 3, "seconds": 10.0}
    assert ev["at_max_longest"] == {"points": 0, "seconds": 0.0}


def test_model_rate_only_for_4k_random_reads():
    model = {"rrandiops": "8518", "rbps": "488636629"}
    assert vp.model_rate(model, 0.5, ("randread4k", "randread64")) == 4259.0
    assert vp.model_rate(model, 0.5, ("randread4k", "seqwrite1m")) is None
    assert vp.model_rate({}, 0.5, ("randread4k",)) is None


CALIBRATED = {"rbps": 401649061, "rrandiops": 3994, "rseqiops": 3991, "wbps": 402474307, "wrandiops": 3992,
              "wseqiops": 3990}
RECORDED = os.path.join(HERE, "..", "..", "..", "benchmarks", "isolation", "results",
                        "2026-12-04-debian12-tcg-vrate-pin-results.json")


@pytest.mark.parametrize("config", sorted(vp.GROSS))
def test_gross_vars_scale_every_coefficient_and_change_only_the_qos_given(config):
    factor, change = vp.GROSS[config]
    role_qos = vp.bench.role_qos()
    got = vp.gross_vars(config, CALIBRATED, role_qos)
    model = got["io_baseline_iocost_models"][vp.bench.DEVICE]
    assert model == {k: round(CALIBRATED[k] * factor) for k in _codecs.COST_COEFS}
    assert got["io_baseline_iocost_qos"] == dict(role_qos, **change)
    assert set(got) == {"io_baseline_iocost_models", "io_baseline_iocost_qos"}
    # what the iocost module will write: the collection's own codecs accept both
    assert _codecs.IO_COST_MODEL.validate({"259:0": model}) == []
    assert _codecs.IO_COST_QOS.validate({"259:0": dict(got["io_baseline_iocost_qos"], enable=1, ctrl="user")}) == []


def test_the_gross_configurations_are_the_errors_each_alert_is_for():
    # With the roles' QoS, model_x20 at the vrate floor still allows more than the model's own coefficients (the
    # calibrated disk): nothing is throttled, so iocost can only lower vrate on missed latency - down to the floor.
    # model_div4_max150 at its ceiling allows less than the disk: the tenants are throttled while the disk has room.
    role_qos = vp.bench.role_qos()
    factor, change = vp.GROSS["model_x20"]
    assert factor * dict(role_qos, **change)["min"] / 100.0 > 1
    factor, change = vp.GROSS["model_div4_max150"]
    assert factor * dict(role_qos, **change)["max"] / 100.0 < 1


def test_gross_vars_refuse_a_model_without_all_six_coefficients():
    partial = dict(CALIBRATED)
    del partial["wrandiops"]
    with pytest.raises(SystemExit, match="wrandiops"):
        vp.gross_vars("model_x20", partial, vp.bench.role_qos())
    with pytest.raises(SystemExit, match="rbps"):
        vp.gross_vars("model_x20", dict(CALIBRATED, rbps=None), vp.bench.role_qos())


def test_apply_gives_the_gross_configurations_to_the_roles_without_a_database(monkeypatch):
    calls = []
    monkeypatch.setattr(vp.bench, "apply", lambda *args: calls.append(args) or 1.5)
    assert vp.apply("lab", "model_div4_max150", "/db", CALIBRATED) == 1.5
    assert vp.apply("lab", "roles_calibrated", "/db", CALIBRATED) == 1.5
    assert calls[0] == ("lab", "roles", False, "/db",
                        vp.gross_vars("model_div4_max150", CALIBRATED, vp.bench.role_qos()))
    assert calls[1] == ("lab", "roles_calibrated", False, "/db")


def test_the_first_runs_configurations_stay_selectable_and_iocost_default_stays_last():
    assert set(("roles", "roles_calibrated", "iocost_default")) | set(vp.GROSS) == set(vp.CONFIGS)
    assert vp.CONFIGS[-1] == "iocost_default"


def test_recorded_model_is_the_recorded_calibration(tmp_path):
    assert vp.recorded_model(RECORDED) == CALIBRATED
    empty = tmp_path / "results.json"
    empty.write_text('{"calibration": {"model": null}}')
    with pytest.raises(SystemExit, match="no calibration model"):
        vp.recorded_model(str(empty))


def test_markdown_names_what_the_gross_configurations_applied():
    qos = vp.bench.role_qos()
    results = {"meta": {"guest": "g", "accel": "tcg", "kernel": "k", "date": "d", "device": "lab-nvme-b",
                        "disk_capacity": None, "reader": "randread4k", "seconds": 1, "ramp": 0, "interval": 5,
                        "gross": {"model_x20": dict(vp.gross_vars("model_x20", CALIBRATED, qos), factor=20)}},
               "calibration": {"model": None, "recorded": {"model": CALIBRATED, "from": "rec.json"}}, "runs": []}
    text = vp.markdown(results)
    assert "the model recorded in rec.json" in text
    assert "- model_x20: x20, " in text and '"rrandiops": 79880' in text


def test_the_nolat_variant_differs_from_model_div4_max150_only_in_the_latency_targets():
    # the comparison that shows which input held vrate below max: the same model and max, latency never missed
    (f1, q1), (f2, q2) = vp.GROSS["model_div4_max150"], vp.GROSS["model_div4_max150_nolat"]
    assert f1 == f2 and dict(q1, rpct=0, wpct=0) == q2


@pytest.mark.parametrize("tag, stem", [(None, "2026-12-04-g-tcg-vrate-pin-results"),
                                       ("gross", "2026-12-04-g-tcg-vrate-pin-gross-results")])
def test_record_names_the_files_with_the_tag(tmp_path, monkeypatch, tag, stem):
    monkeypatch.setattr(vp, "HERE", str(tmp_path))
    (tmp_path / "results").mkdir()
    results = {"meta": {"guest": "g", "accel": "tcg", "kernel": "k", "date": "2026-12-04T10:00:00Z",
                        "device": "lab-nvme-b", "reader": "randread4k", "seconds": 1, "ramp": 0, "interval": 5},
               "runs": []}
    vp.write(results, str(tmp_path / "out"), True, tag)
    assert sorted(os.listdir(str(tmp_path / "results"))) == [stem + ".json", stem + ".md"]
