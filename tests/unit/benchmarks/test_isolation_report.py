# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/isolation/report.py on a synthetic results dict: medians and spreads, the derived ratios and
targets, the Markdown formatting, the plots, the HTML page and the files write() leaves behind."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "benchmarks", "isolation"))

import report  # noqa: E402  pylint: disable=wrong-import-position

PCTS = ("1.000000", "5.000000", "10.000000", "20.000000", "30.000000", "40.000000", "50.000000", "60.000000",
        "70.000000", "80.000000", "90.000000", "95.000000", "99.000000", "99.500000", "99.900000", "99.950000",
        "99.990000")
DASH = "\u2014"


def stats(iops, bw, p50, p99, p999, direction="read"):
    """fio-like job stats whose percentile curve runs through p50, p99 and p99.9."""
    curve = {}
    for key in PCTS:
        pct = float(key)
        if pct < 50:
            value = p50 * (0.5 + pct / 100)
        elif pct < 99:
            value = p50 + (p99 - p50) * (pct - 50) / 49
        elif pct < 99.9:
            value = p99 + (p999 - p99) * (pct - 99) / 0.9
        else:
            value = p999 * (1 + (pct - 99.9) * 10)
        curve[key] = int(value)
    curve["50.000000"], curve["99.000000"], curve["99.900000"] = p50, p99, p999
    return {"iops": iops, "bw_bytes": bw, "clat_ns": {"p50": p50, "p99": p99, "p99.9": p999}, "percentiles": curve,
            "ios": int(iops * 15), "runtime_ms": 15000, "dir": direction}


def reader(iops, p50, p99, p999):
    return stats(iops, iops * 4096.0, p50, p99, p999)


def writer(bw):
    return stats(bw / 1048576.0, bw, 2000000, 9000000, 20000000, "write")


def run(config, repeat, rdr, ant, rstats=None, astats=None, some=None, vrate=None):
    r = {"config": config, "repeat": repeat, "reader": rdr, "antagonist": ant,
         "reader_stats": rstats, "antagonist_stats": astats}
    if some is not None:
        r["pressure"] = {"inference.slice": {"some": some, "full": some / 2}, "training.slice": {"some": 1.0, "full": 0.5}}
    r["vrate"] = None if vrate is None else {"mean": vrate, "min": vrate - 30, "max": 100.0}
    return r


def make_results():
    """2 configs x 2 readers x 2 antagonists x 3 repeats, solo runs in "none" for randread4k and both antagonists
    (none for seqread128k), one contended run whose reader failed."""
    runs = []
    # Solo reader randread4k: iops 1000/1200/1100, p50 140/146/150 µs, p99 300/340/320 µs, p99.9 0.9/1.0/1.1 ms.
    solo = [(1000, 140000, 300000, 900000), (1200, 146000, 340000, 1000000), (1100, 150000, 320000, 1100000)]
    for rep, (iops, p50, p99, p999) in enumerate(solo, 1):
        runs.append(run("none", rep, "randread4k", None, rstats=reader(iops, p50, p99, p999)))
    # Solo antagonists: seqwrite1m 500/520/480 MB/s, buffered 200 MB/s.
    for rep, bw in enumerate([500e6, 520e6, 480e6], 1):
        runs.append(run("none", rep, None, "seqwrite1m", astats=writer(bw)))
        runs.append(run("none", rep, None, "buffered", astats=writer(200e6)))
    for rep in (1, 2, 3):
        # no isolation: the reader suffers (p99 7.90/7.96/8.00 ms), the antagonists run nearly free.
        runs.append(run("none", rep, "randread4k", "seqwrite1m",
                        reader(300 + rep, 1000000, [7900000, 7960000, 8000000][rep - 1], 20000000),
                        writer(450e6), some=[10.0, 12.5, 20.0][rep - 1]))
        runs.append(run("none", rep, "randread4k", "buffered", reader(500, 500000, 2000000, 5000000),
                        writer(60e6), some=30.0))
        # roles: the reader p99 is 2.31x solo against seqwrite1m (antagonist 42%), 1.25x against buffered (50%).
        runs.append(run("roles", rep, "randread4k", "seqwrite1m", reader(900, 160000, 739200, 2000000),
                        writer([200e6, 210e6, 220e6][rep - 1]), some=2.0, vrate=[90.0, 95.2, 100.0][rep - 1]))
        rstats = None if rep == 3 else reader(1000, 150000, [380000, 420000][rep - 1], 1200000)
        runs.append(run("roles", rep, "randread4k", "buffered", rstats, writer(100e6), vrate=80.0))
        # seqread128k has no solo run anywhere.
        for config in ("none", "roles"):
            for ant in ("seqwrite1m", "buffered"):
                runs.append(run(config, rep, "seqread128k", ant, reader(200, 600000, 1500000, 3000000), writer(300e6)))
    return {"meta": {"guest": "debian12", "kernel": "6.1.0-28-amd64", "fio": "fio-3.33", "date": "2026-12-01T14:00:00Z",
                     "seconds": 15, "repeats": 3, "accel": "tcg", "device": "lab-nvme-b"},
            "configs": ["none", "roles"], "config_labels": {"none": "no isolation"},
            "readers": ["randread4k", "seqread128k"], "antagonists": ["seqwrite1m", "buffered"], "runs": runs}


def cell(summary, config, rdr, ant):
    found = [c for c in summary["cells"] if (c["config"], c["reader"], c["antagonist"]) == (config, rdr, ant)]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def results():
    return make_results()


@pytest.fixture
def summary(results):
    return report.summarize(results)


def test_solo_medians_and_spread(summary):
    solo = summary["solo"]["readers"]["randread4k"]
    assert solo["config"] == "none"
    assert solo["n"] == 3
    assert solo["iops"] == {"median": 1100, "spread": 200 / 1100, "values": [1000, 1200, 1100]}
    assert solo["p50"]["median"] == 146000
    assert solo["p99"] == {"median": 320000, "spread": 0.125, "values": [300000, 340000, 320000]}
    assert solo["p99.9"]["median"] == 1000000
    assert solo["p99.9"]["spread"] == pytest.approx(0.2)
    assert solo["percentiles"]["99.000000"] == 320000
    assert list(solo["percentiles"])[0] == "1.000000" and list(solo["percentiles"])[-1] == "99.990000"
    ant = summary["solo"]["antagonists"]["seqwrite1m"]
    assert ant["config"] == "none"
    assert ant["bw_bytes"] == {"median": 500e6, "spread": 40e6 / 500e6, "values": [500e6, 520e6, 480e6]}
    assert ant["iops"]["median"] == pytest.approx(500e6 / 1048576)
    # All three equal: spread 0.
    assert summary["solo"]["antagonists"]["buffered"]["bw_bytes"]["spread"] == 0
    assert summary["solo"]["readers"]["seqread128k"] is None
    assert summary["targets"] == {"p99_ratio": 1.5, "bw_share": 0.40, "rate": report.RATE_TARGET,
                                  "flat": report.FLAT_TARGET}
    assert report.RATE_TARGET == {"p99_ratio": 1.5, "rate_tolerance": 0.05, "frontier_share": 0.60}
    assert report.FLAT_TARGET == {"iops_kept": 0.80, "p99_ratio": 2.0}


def test_cells_order_and_counts(summary):
    keys = [(c["config"], c["reader"], c["antagonist"]) for c in summary["cells"]]
    assert keys == [(c, r, a) for c in ("none", "roles") for r in ("randread4k", "seqread128k")
                    for a in ("seqwrite1m", "buffered")]
    broken = cell(summary, "roles", "randread4k", "buffered")
    assert (broken["runs"], broken["n"], broken["antagonist_n"]) == (3, 2, 3)
    # Median of the two surviving runs, spread over them.
    assert broken["reader_stats"]["p99"] == {"median": 400000, "spread": 0.1, "values": [380000, 420000]}
    assert broken["pressure"] == {}
    assert broken["vrate_mean"] == 80.0


def test_cell_medians(summary):
    c = cell(summary, "none", "randread4k", "seqwrite1m")
    assert c["reader_stats"]["p99"] == {"median": 7960000, "spread": 100000 / 7960000,
                                        "values": [7900000, 7960000, 8000000]}
    assert c["reader_stats"]["iops"] == {"median": 302, "spread": 2 / 302, "values": [301, 302, 303]}
    assert c["antagonist_bw"] == {"median": 450e6, "spread": 0, "values": [450e6] * 3}
    assert c["pressure"] == {"inference.slice": {"some": 12.5, "full": 6.25}, "training.slice": {"some": 1.0, "full": 0.5}}
    assert c["vrate_mean"] is None
    r = cell(summary, "roles", "randread4k", "seqwrite1m")
    assert r["vrate_mean"] == 95.2
    assert r["antagonist_bw"]["median"] == 210e6
    assert r["antagonist_bw"]["spread"] == pytest.approx(20e6 / 210e6)
    assert r["reader_percentiles"]["99.000000"] == 739200


def test_ratios_and_target(summary):
    none_seq = cell(summary, "none", "randread4k", "seqwrite1m")
    assert none_seq["p99_ratio"] == 24.875
    assert none_seq["p999_ratio"] == 20.0
    assert none_seq["bw_share"] == 0.9
    assert none_seq["met"] is False
    roles_seq = cell(summary, "roles", "randread4k", "seqwrite1m")
    assert roles_seq["p99_ratio"] == pytest.approx(2.31)
    assert roles_seq["bw_share"] == pytest.approx(0.42)
    assert roles_seq["met"] is False
    roles_buf = cell(summary, "roles", "randread4k", "buffered")
    assert roles_buf["p99_ratio"] == 1.25
    assert roles_buf["bw_share"] == 0.5
    assert roles_buf["met"] is True
    none_buf = cell(summary, "none", "randread4k", "buffered")
    assert none_buf["bw_share"] == pytest.approx(0.3)
    assert none_buf["met"] is False
    # No solo reader run: no ratio, no verdict, though the antagonist share is known.
    noref = cell(summary, "roles", "seqread128k", "buffered")
    assert noref["p99_ratio"] is None and noref["p999_ratio"] is None
    assert noref["bw_share"] == 1.5
    assert noref["met"] is None


def test_custom_targets(results):
    s = report.summarize(results, p99_ratio_target=2.5, bw_share_target=0.42)
    assert (s["targets"]["p99_ratio"], s["targets"]["bw_share"]) == (2.5, 0.42)
    assert cell(s, "roles", "randread4k", "seqwrite1m")["met"] is True
    assert cell(s, "roles", "randread4k", "buffered")["met"] is True
    assert cell(s, "none", "randread4k", "buffered")["met"] is False


def test_reference_config_is_first_with_solo_runs(results):
    results["runs"] = [r for r in results["runs"] if not (r["config"] == "none" and r["antagonist"] == "buffered"
                                                          and r["reader"] is None)]
    results["runs"].append(run("roles", 1, None, "buffered", astats=writer(250e6)))
    results["runs"].append(run("none", 1, None, "buffered", astats=None))  # failed solo run: not a reference
    s = report.summarize(results)
    assert s["solo"]["antagonists"]["buffered"]["config"] == "roles"
    assert s["solo"]["antagonists"]["buffered"]["bw_bytes"] == {"median": 250e6, "spread": None, "values": [250e6]}
    assert cell(s, "roles", "randread4k", "buffered")["bw_share"] == 0.4


def test_spread_edge_cases():
    assert report._agg([]) == {"median": None, "spread": None, "values": []}
    assert report._agg([5]) == {"median": 5, "spread": None, "values": [5]}
    assert report._agg([0, 0, 1]) == {"median": 0, "spread": None, "values": [0, 0, 1]}
    assert report._agg([None, 2, float("nan"), 4, True]) == {"median": 3.0, "spread": 2 / 3, "values": [2, 4]}


def test_format_latency():
    assert report.fmt_latency(146000) == "146 \u00b5s"
    assert report.fmt_latency(999400) == "999 \u00b5s"
    assert report.fmt_latency(999600) == "1.00 ms"
    assert report.fmt_latency(7960000) == "7.96 ms"
    assert report.fmt_latency(None) == DASH


def test_markdown(results, summary):
    md = report.markdown(results, summary)
    assert md.splitlines()[2] == ("guest debian12 \u00b7 kernel 6.1.0-28-amd64 \u00b7 fio fio-3.33 \u00b7 15 s per run \u00b7 "
                                  "3 repeats \u00b7 accel tcg \u00b7 device lab-nvme-b \u00b7 2026-12-01T14:00:00Z")
    # an experiment names the variables the roles ran with
    results["meta"]["roles_vars"] = {"io_baseline_iocost_qos": {"max": 10000, "min": 10}}
    assert report.markdown(results, summary).splitlines()[2].endswith(
        "2026-12-01T14:00:00Z \u00b7 roles with `{\"io_baseline_iocost_qos\": {\"max\": 10000, \"min\": 10}}`")
    del results["meta"]["roles_vars"]
    assert ("| randread4k | reader | no isolation | 3 | 1100 | 5 | 146 \u00b5s | 320 \u00b5s | 1.00 ms | 12.5% | 18.2% |"
            in md)
    assert "| seqwrite1m | antagonist | no isolation | 3 | 477 | 500 | 2.00 ms | 9.00 ms | 20.00 ms | 0.0% | 8.0% |" in md
    assert "| seqread128k | reader | %s |" % " | ".join([DASH] * 9) in md
    assert "### Reader randread4k (solo p99 320 \u00b5s in no isolation)" in md
    assert "### Reader seqread128k (no solo run)" in md
    assert ("| no isolation | seqwrite1m | 3 | 302 | 1.00 ms | 7.96 ms | 20.00 ms | 1.3%% | 24.88\u00d7 | 450 | 90%% | 12.5%% "
            "| %s | no |" % DASH) in md
    assert "| roles | seqwrite1m | 3 | 900 | 160 \u00b5s | 739 \u00b5s | 2.00 ms | 0.0% | 2.31\u00d7 | 210 | 42% | 2.0% | 95% | no |" in md
    assert ("| roles | buffered | 2 | 1000 | 150 \u00b5s | 400 \u00b5s | 1.20 ms | 10.0%% | 1.25\u00d7 | 100 | 50%% | %s | 80%% "
            "| yes |" % DASH) in md
    assert ("| roles | seqread128k" not in md.split("### Solo runs")[1])
    assert ("| roles | buffered | 3 | 200 | 600 \u00b5s | 1.50 ms | 3.00 ms | 0.0%% | %s | 300 | 150%% | %s | %s | %s |"
            % (DASH, DASH, DASH, DASH)) in md
    assert md.rstrip().splitlines()[-1].startswith(
        "Targets: a rate-bound reader's p99 \u2264 1.5\u00d7 its solo p99 at the same rate, its rate kept (\u2265 95% of it) "
        "and the antagonist \u2265 60% of its frontier; a flat-out reader \u2265 80% of its solo IOPS with p99 \u2264 "
        "2\u00d7 solo. \"target met\" in the per-reader and pair tables: reader p99 \u2264 1.5\u00d7 its solo p99 and "
        "antagonist bandwidth \u2265 40% of its solo bandwidth.")


def test_markdown_reader_table_has_one_row_per_cell(results, summary):
    md = report.markdown(results, summary)
    section = md.split("### Reader randread4k")[1].split("### Reader seqread128k")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| config")]
    assert [r.split(" | ")[0:2] for r in rows] == [["| no isolation", "seqwrite1m"], ["| no isolation", "buffered"],
                                                   ["| roles", "seqwrite1m"], ["| roles", "buffered"]]


def test_broken_results_do_not_crash():
    broken = {"meta": {}, "runs": [
        {"config": "x", "reader": "r", "antagonist": "a", "reader_stats": {"iops": None, "clat_ns": None,
                                                                           "percentiles": {"bogus": 1, "50.0": "x"}},
         "antagonist_stats": {}, "pressure": None, "vrate": {"mean": None}},
        {"config": "x", "reader": "r", "antagonist": None, "reader_stats": {"percentiles": {"99.000000": 5000}}},
        "not a run"]}
    s = report.summarize(broken)
    c = cell(s, "x", "r", "a")
    assert c["n"] == 1 and c["antagonist_n"] == 0
    assert c["reader_stats"]["p99"]["median"] is None
    assert c["p99_ratio"] is None and c["bw_share"] is None and c["met"] is None
    # The p99 falls back to fio's percentiles dict when clat_ns is missing.
    assert s["solo"]["readers"]["r"]["p99"]["median"] == 5000
    md = report.markdown(broken, s)
    assert "guest %s" % DASH in md
    assert "| x | a | 1 | %s |" % " | ".join([DASH] * 11) in md
    page = report.html(broken, s, {})
    assert "<td>%s</td>" % DASH in page
    assert report.summarize({}) == {"targets": {"p99_ratio": 1.5, "bw_share": 0.4, "rate": report.RATE_TARGET,
                                                "flat": report.FLAT_TARGET},
                                    "solo": {"readers": {}, "antagonists": {}}, "cells": []}


def test_plots(results, summary):
    pytest.importorskip("matplotlib")
    images = report.plots(results, summary)
    assert sorted(images) == ["latency-randread4k", "latency-seqread128k", "throughput-randread4k",
                              "throughput-seqread128k"]
    for png in images.values():
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert len(png) > 5000


def test_html(results, summary):
    images = {"latency-randread4k": b"\x89PNGfake", "extra": b"\x89PNGmore"}
    page = report.html(results, summary, images)
    assert page.startswith("<!DOCTYPE html>")
    assert '<img alt="latency-randread4k" src="data:image/png;base64,iVBOR2Zha2U=">' in page
    assert "data:image/png;base64,iVBOR21vcmU=" in page
    assert "<td>2.31\u00d7</td>" in page and "<td>7.96 ms</td>" in page and "<td>42%</td>" in page
    assert page.count("<table>") == 5  # flat-out readers, solo, two readers, all pairs
    results["config_labels"]["roles"] = "<roles & co>"
    assert "<td>&lt;roles &amp; co&gt;</td>" in report.html(results, summary, {})


def test_write(results, tmp_path):
    pytest.importorskip("matplotlib")
    outdir = tmp_path / "out"
    out = report.write(dict(results, summary={"stale": True}), str(outdir))
    names = sorted(os.path.basename(p) for p in out["files"])
    assert names == ["latency-randread4k.png", "latency-seqread128k.png", "report.html", "results.json", "results.md",
                     "throughput-randread4k.png", "throughput-seqread128k.png"]
    for path in out["files"]:
        assert os.path.getsize(path) > 0
    saved = json.loads((outdir / "results.json").read_text(encoding="utf-8"))
    assert saved["summary"] == json.loads(json.dumps(report.summarize(results)))
    assert saved["runs"] == results["runs"]
    assert (outdir / "results.md").read_text(encoding="utf-8") == out["markdown"]
    assert "2.31\u00d7" in out["markdown"]
    assert (outdir / "latency-randread4k.png").read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in (outdir / "report.html").read_text(encoding="utf-8")
    assert out["summary"]["cells"][0]["config"] == "none"


def test_pairs_table_one_row_per_pair_one_column_per_config(results, summary):
    header, rows = report._pairs_table(results, summary)
    assert header == ["reader vs antagonist", "no isolation", "roles"]
    assert rows[0] == ["randread4k vs seqwrite1m", "24.88\u00d7, 90%", "2.31\u00d7, 42%"]
    assert rows[1] == ["randread4k vs buffered", "6.25\u00d7, 30%", "1.25\u00d7, 50% (met)"]
    assert rows[2] == ["seqread128k vs seqwrite1m", "%s, 60%%" % DASH, "%s, 60%%" % DASH]


def test_capacity_in_the_meta_line(results, summary):
    results["meta"]["disk_capacity"] = {"iops": 3000, "bps": 150000000}
    assert "device lab-nvme-b, capacity 3000 IOPS / 150 MB/s (QEMU throttling)" in report.markdown(results, summary)
    results["meta"]["disk_capacity"] = None
    assert "device lab-nvme-b, unthrottled" in report.markdown(results, summary)


def test_calibration_against_capacity(results, summary):
    results["calibration"] = {"versus_capacity": {
        "rbps": {"model": 134000000, "capacity": 150000000, "error": -0.1067},
        "rrandiops": {"model": 2987, "capacity": 3000, "error": -0.0043}}}
    md = report.markdown(results, summary)
    assert "### Calibrated model against the disk's capacity" in md
    assert "| rbps | 134 MB/s | 150 MB/s | -10.7% |" in md
    assert "| rrandiops | 2987 | 3000 | -0.4% |" in md


def test_charge_table_names_the_threads_and_the_slices(results, summary):
    first = [r for r in results["runs"] if r["reader"] and r["antagonist"] == "seqwrite1m"][0]
    first["antagonist"] = "uring_sqpoll"
    first["antagonist_threads"] = {"fio": 1, "iou-sqp": 1}
    first["io"] = {"training.slice": {"rbytes": 300000000, "wbytes": 0, "rios": 1},
                   "inference.slice": {"rbytes": 20000000, "wbytes": 0}}
    header, rows = report._charge_table(results)
    assert rows == [["uring_sqpoll", "no isolation", "fio\u00d71, iou-sqp\u00d71", "300 MB", "20 MB", "6750 MB"]]
    assert "### Where each antagonist's I/O was charged" in report.markdown(results, summary)


def test_sweep_cells_tradeoff_plot_and_unthrottled_table(results):
    def point(label, p99, bw):
        return {"label": label, "qos": {"rlat": 2000}, "cells": [
            run("sweep", 1, "randread4k", "seqwrite1m", reader(900, 150000, p99, 2000000), writer(bw)),
            run("sweep", 1, None, "seqwrite1m", None, writer(bw))]}   # a solo cell is not a pair: skipped
    results["sweep"] = {"seconds": 8, "points": [point("default", 400000, 250e6), point("rlat=500", 320000, 100e6)]}
    results["unthrottled"] = dict(make_results(), source="benchmarks/isolation/results/x.json")
    summary = report.summarize(results)
    got = [(c["config"], round(c["p99_ratio"], 2), round(c["bw_share"], 2), c["met"]) for c in summary["sweep"]]
    assert got == [("default", 1.25, 0.5, True), ("rlat=500", 1.0, 0.2, False)]
    md = report.markdown(results, summary)
    assert "### QoS sweep under the calibrated model (8 s runs)" in md
    assert "| rlat=500 | randread4k | seqwrite1m | 320 \u00b5s | 1.00\u00d7 | 100 | 20%% | %s | no |" % DASH in md
    assert "### The unthrottled disk, TCG alone (benchmarks/isolation/results/x.json; guest debian12" in md
    assert md.count("| randread4k vs seqwrite1m | 24.88\u00d7, 90% | 2.31\u00d7, 42% |") == 2
    pytest.importorskip("matplotlib")
    images = report.plots(results, summary)
    assert images["tradeoff-randread4k"].startswith(b"\x89PNG")
    assert "tradeoff-seqread128k" not in images


def probe(reader_count, reader_p50, reader_p99, training_p50, training_p99, other=0):
    """A run's probe figures (µs), as bench.py's probe_figures leaves them."""
    return {"inference.slice": {"count": reader_count, "p50_us": reader_p50, "p99_us": reader_p99, "p999_us": None,
                                "histogram": []},
            "training.slice": {"count": 900, "p50_us": training_p50, "p99_us": training_p99, "p999_us": None,
                               "histogram": []},
            "other": other, "lost": 0, "bpftrace": "bpftrace v0.17.0"}


def test_probe_table_puts_the_block_layers_figures_beside_fios(results):
    roles = [r for r in results["runs"] if r["config"] == "roles" and r["reader"] == "randread4k"
             and r["antagonist"] == "seqwrite1m"]
    for r, p50 in zip(roles, (120, 130, 140)):
        r["probe"] = probe(13000 + p50, p50, 610, 1500, 8000, other=p50 - 118)
    solo = [r for r in results["runs"] if r["config"] == "none" and r["reader"] is None
            and r["antagonist"] == "seqwrite1m"][0]
    solo["probe"] = probe(0, None, None, 1700, 8500)
    md = report.markdown(results, report.summarize(results))
    section = md.split("### Block layer (eBPF probe, submit_bio \u2192 bio_endio) beside fio's clat")[1]
    assert section.splitlines()[2] == report.PROBE_NOTE
    assert "submit_bio to bio_endio" in report.PROBE_NOTE and "wake-up" in report.PROBE_NOTE
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| config")]
    # fio's medians / the probe's medians: reader I/Os 13500 (900 IOPS x 15 s) / 13130, p50 160 / 130 µs
    assert rows == [
        "| no isolation | %s | seqwrite1m | 1 | %s / 0 | %s / %s | %s / %s | 2.00 ms / 1.70 ms | 9.00 ms / 8.50 ms | 0 |"
        % ((DASH,) * 6),
        "| roles | randread4k | seqwrite1m | 3 | 13500 / 13130 | 160 \u00b5s / 130 \u00b5s | 739 \u00b5s / 610 \u00b5s "
        "| 2.00 ms / 1.50 ms | 9.00 ms / 8.00 ms | 12 |"]
    page = report.html(results, report.summarize(results), {})
    assert "<p>%s</p>" % report.PROBE_NOTE.replace("'", "&#x27;") in page
    assert "<td>160 \u00b5s / 130 \u00b5s</td>" in page


def test_no_probe_table_without_probe_figures(results, summary):
    assert "eBPF probe" not in report.markdown(results, summary)
