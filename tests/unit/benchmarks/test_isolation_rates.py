# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The isolation benchmark's rate-bound readers without a guest: their fio argv (guest.py), their rates from a
calibrated model or the device-bound capacity and each antagonist's frontier (bench.py's rate plan), whether a
reader kept its rate (from recorded fio JSON), the report's rate-bound and flat-out tables and the smoke run's
checks of its rate-bound pair."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
FIO = os.path.join(HERE, "..", "plugins", "module_utils", "fixtures", "fio")
RESULTS = os.path.join(HERE, "..", "..", "..", "benchmarks", "isolation", "results")

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

bench = load("isolation", "bench")
guest = load("isolation", "guest")
report = bench.report
DASH = "\u2014"
# The lab's device-bound disk and a calibration of it (benchmarks/isolation/results/2026-12-02-...-device-bound).
CAPACITY = {"iops": 4000, "bps": 400000000}
MODEL = {"rbps": 400831224, "rrandiops": 3999, "rseqiops": 3998, "wbps": 402250933, "wrandiops": 3997, "wseqiops": 4001}


# ---------------------------------------------------------------------------------------------- fio argv

def test_rate_bound_readers_are_the_flat_out_ones_at_each_percentage():
    assert bench.RATE_READERS == ("randread4k@10", "randread4k@25", "randread4k@50",
                                  "seqread128k@10", "seqread128k@25", "seqread128k@50")
    assert set(bench.BASIS) == set(guest.PROFILES)
    assert bench.BASIS["uring_sqpoll_idle"] == bench.BASIS["uring_sqpoll"] == ("iops", "rrandiops")
    # every smoke pair is a known pair; one of them rate-bound
    for reader, antagonist in bench.SMOKE_PAIRS:
        assert reader in bench.READERS + bench.RATE_READERS and antagonist in bench.ANTAGONISTS
    assert [r for r, a in bench.SMOKE_PAIRS if r in bench.RATE_READERS] == ["randread4k@25"]


def test_a_rate_bound_readers_argv_is_its_profiles_plus_the_rate():
    rates = {"randread4k@25": {"iops": 1000}, "seqread128k@10": {"bps": 40000000}}
    fname, args = guest.profile_job("randread4k@25", rates)
    assert fname == guest.PROFILES["randread4k"][0]
    assert args == guest.PROFILES["randread4k"][1] + ["--rate_iops=1000", "--rate_process=linear"]
    fname, args = guest.profile_job("seqread128k@10", rates)
    assert args == guest.PROFILES["seqread128k"][1] + ["--rate=40000000", "--rate_process=linear"]
    # the flat-out readers unchanged, with or without rates
    assert guest.profile_job("randread4k", rates) == guest.PROFILES["randread4k"]
    assert guest.profile_job("seqwrite1m") == guest.PROFILES["seqwrite1m"]


@pytest.mark.parametrize("rates", [None, {}, {"randread4k@25": {}}, {"randread4k@25": {"iops": 1, "bps": 2}},
                                   {"randread4k@25": {"mbps": 1}}])
def test_a_rate_bound_reader_without_its_rate_is_refused(rates):
    with pytest.raises(SystemExit, match="no rate for randread4k@25"):
        guest.profile_job("randread4k@25", rates)


def test_start_passes_the_rate_to_fio(monkeypatch, tmp_path):
    argvs = []
    monkeypatch.setattr(guest, "RUN", str(tmp_path))
    monkeypatch.setattr(guest, "run", lambda argv, check=True: argvs.append(argv))
    spec = {"mount": "/srv/bench", "seconds": 8, "ramp": 2, "rates": {"randread4k@50": {"iops": 2000}}}
    unit, out = guest.start("reader", "randread4k@50", spec, 3)
    assert unit == "aiinfra-bench-reader-3.service" and out == str(tmp_path / "reader-3.json")
    argv = argvs[-1][argvs[-1].index("fio"):]
    assert argv[1:3] == ["--name=randread4k@50", "--filename=/srv/bench/reader.dat"]
    assert argv[-2:] == ["--rate_iops=2000", "--rate_process=linear"]
    assert "--slice=inference.slice" in argvs[-1]


# ---------------------------------------------------------------------------------------------- rates

def test_rates_from_the_device_bound_capacity():
    plan = bench.rate_plan(["randread4k", "randread4k@25", "seqread128k@10"], ["randread64", "seqwrite1m"],
                           None, CAPACITY)
    assert plan["source"] == "device-bound capacity" and plan["capacity"] == CAPACITY
    assert set(plan["readers"]) == {"randread4k@25", "seqread128k@10"}     # the flat-out reader has no rate
    assert plan["readers"]["randread4k@25"] == {
        "profile": "randread4k", "percent": 25, "unit": "iops", "from": "iops", "capacity": 4000.0, "rate": 1000,
        "block_size": 4096, "load": {"iops": 1000, "bps": 4096000}}
    seq = plan["readers"]["seqread128k@10"]
    assert (seq["unit"], seq["from"], seq["rate"], seq["block_size"]) == ("bps", "bps", 40000000, 131072)
    assert seq["load"] == {"iops": pytest.approx(305.17578125), "bps": 40000000}
    assert plan["antagonists"] == {"randread64": {"unit": "iops", "from": "iops", "capacity": 4000.0},
                                   "seqwrite1m": {"unit": "bps", "from": "bps", "capacity": 400000000.0}}
    assert bench.fio_rates(plan) == {"randread4k@25": {"iops": 1000}, "seqread128k@10": {"bps": 40000000}}


def test_rates_from_the_calibrated_model_win_over_the_capacity():
    plan = bench.rate_plan(["randread4k@10", "seqread128k@50"], ["uring_sqpoll", "buffered"], MODEL, CAPACITY)
    assert plan["source"] == "calibrated model" and plan["capacity"] == MODEL
    assert plan["readers"]["randread4k@10"]["rate"] == 400                  # 10% of rrandiops 3999
    assert plan["readers"]["randread4k@10"]["from"] == "rrandiops"
    assert plan["readers"]["seqread128k@50"]["rate"] == 200415612           # half of rbps
    assert plan["readers"]["seqread128k@50"]["from"] == "rbps"
    # the shuffle's frontier is in random-read IOPS, the page-cache writer's in write bandwidth
    assert plan["antagonists"]["uring_sqpoll"] == {"unit": "iops", "from": "rrandiops", "capacity": 3999.0}
    assert plan["antagonists"]["buffered"] == {"unit": "bps", "from": "wbps", "capacity": 402250933.0}


def test_no_rate_plan_without_rate_bound_readers_and_a_refusal_without_a_capacity():
    assert bench.rate_plan(["randread4k", "seqread128k"], ["randread64"], None, None) is None
    with pytest.raises(SystemExit, match=r"the rate-bound readers \(randread4k@25\) need the disk's capacity"):
        bench.rate_plan(["randread4k@25"], ["randread64"], None, None)
    with pytest.raises(SystemExit, match="no rrandiops for randread4k in the calibrated model"):
        bench.rate_plan(["randread4k@25"], ["randread64"], {"rbps": 1}, CAPACITY)


@pytest.mark.parametrize("name", ["randread4k@0", "randread4k@100", "randread4k@x", "seqwrite1m@25", "randread4k@",
                                  "randread4k@2.5"])
def test_rate_reader_names(name):
    assert bench.rate_reader("seqread128k@33") == ("seqread128k", 33)
    with pytest.raises(SystemExit, match="unknown rate-bound reader"):
        bench.rate_reader(name)


def test_block_sizes_come_from_the_profiles():
    assert [bench.block_size(p) for p in ("randread4k", "seqread128k", "seqwrite1m")] == [4096, 131072, 1 << 20]


def test_cells_for_the_smoke_pairs():
    readers, antagonists = ["randread4k", "randread4k@25"], ["seqwrite1m", "randread64"]
    cells = bench.cells_for("roles", True, readers, antagonists, bench.SMOKE_PAIRS)
    assert cells == [{"reader": "randread4k", "antagonist": None}, {"reader": "randread4k@25", "antagonist": None},
                     {"reader": None, "antagonist": "seqwrite1m"}, {"reader": None, "antagonist": "randread64"},
                     {"reader": "randread4k", "antagonist": "seqwrite1m"},
                     {"reader": "randread4k@25", "antagonist": "randread64"}]
    # without pairs: every reader against every antagonist, as before
    assert len(bench.cells_for("roles", False, readers, antagonists)) == 4


# ---------------------------------------------------------------------------------------------- rate kept

def recorded(name, tmp_path=None, **options):
    """A recorded fio output's path; with options, a copy whose job options say so (the same run asked for another
    rate: what a disk that did the recorded rate shows when asked for that one)."""
    path = os.path.join(FIO, name)
    if not options:
        return path
    with open(path) as f:
        text = f.read()
    doc = json.loads(text[text.index("{"):])
    doc["jobs"][0]["job options"].update(options)
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return str(out)


@pytest.mark.parametrize("name,iops", [("debian12-fio-3.33-qos-read.out", 2998.50075),
                                       ("debian13-fio-3.39-qos-read.out", 2999.70003),
                                       ("debian13-fio-3.39-qos-write.out", 2999.70003)])
def test_rate_kept_from_recorded_fio_output(name, iops):
    # --rate_iops=3000 in fio's JSON job options: what it was asked for, beside what it did
    st = guest.stats(recorded(name), "reader")
    assert st["rate"] == {"iops": 3000} and st["iops"] == iops
    assert report.rate_achieved(st) == pytest.approx(iops / 3000)
    assert report.rate_achieved(st) >= 1 - report.RATE_TARGET["rate_tolerance"]


def test_rate_missed_from_recorded_fio_output(tmp_path):
    # the same disk asked for twice the rate: fio reports no error, only the IOPS it managed
    st = guest.stats(recorded("debian12-fio-3.33-qos-read.out", tmp_path, rate_iops="6000"), "reader")
    assert st["rate"] == {"iops": 6000}
    assert report.rate_achieved(st) == pytest.approx(0.49975, abs=1e-5)
    # a bandwidth rate: fio's bw_bytes against --rate
    st = guest.stats(recorded("debian12-fio-3.33-qos-read.out", tmp_path, rate="24576000"), "reader")
    assert st["rate"] == {"iops": 3000}          # both given: the IOPS rate is the one fio keeps
    del st["rate"]
    assert report.rate_achieved(st, {"bps": 24576000}) == pytest.approx(st["bw_bytes"] / 24576000)


def test_no_rate_without_one_asked(tmp_path):
    st = guest.stats(recorded("debian12-fio-3.33-qos-read.out", tmp_path, rate_iops="1k"), "reader")
    assert st["rate"] is None                     # a suffix bench.py never writes: not guessed
    assert report.rate_achieved(st) is None
    assert report.rate_achieved(st, {"iops": 3000}) == pytest.approx(0.9995)
    assert report.rate_achieved({"iops": 10.0}, None) is None
    assert report.rate_achieved({}, {"iops": 3000}) is None
    assert guest.requested_rate({"job options": {"rate": "40000000"}}) == {"bps": 40000000}
    assert guest.requested_rate({}) is None


# ---------------------------------------------------------------------------------------------- frontier

def plan_for(readers=("randread4k", "randread4k@25", "seqread128k@10"), antagonists=("randread64", "seqwrite1m")):
    return bench.rate_plan(list(readers), list(antagonists), None, CAPACITY)


def test_frontier_is_the_capacity_less_the_readers_load_in_the_antagonists_unit():
    plan = plan_for()
    # the same unit: 4000 - 1000 IOPS; 400 - 40 MB/s
    assert report.frontier(plan, "randread4k@25", "randread64") == {
        "unit": "iops", "capacity": 4000.0, "reader_load": 1000, "frontier": 3000.0, "bound": "disk"}
    assert report.frontier(plan, "seqread128k@10", "seqwrite1m")["frontier"] == 360000000.0
    # across units the reader's load in the antagonist's: 1000 4k reads take 4.1 MB/s from the writer's bandwidth,
    # 40 MB/s of 128k reads 305 of the shuffle's IOPS
    assert report.frontier(plan, "randread4k@25", "seqwrite1m")["frontier"] == 400000000.0 - 4096000
    assert report.frontier(plan, "seqread128k@10", "randread64")["frontier"] == pytest.approx(4000 - 305.17578125)
    # an antagonist that does less alone could not have had more: its solo run bounds the frontier
    assert report.frontier(plan, "randread4k@25", "randread64", alone=3990.0)["frontier"] == 3000.0
    assert report.frontier(plan, "randread4k@25", "seqwrite1m", alone=62e6) == {
        "unit": "bps", "capacity": 400000000.0, "reader_load": 4096000, "frontier": 62e6, "bound": "alone"}
    # a flat-out reader or an antagonist outside the plan has none
    assert report.frontier(plan, "randread4k", "randread64") is None
    assert report.frontier(plan, "randread4k@25", "buffered") is None
    assert report.frontier({}, "randread4k@25", "randread64") is None


def fio(iops, p99, bw=None, rate=None, direction="read"):
    """A job's stats as guest.stats leaves them (a short percentile curve through p50 = p99 / 2 and p99)."""
    out = {"dir": direction, "iops": iops, "bw_bytes": iops * 4096.0 if bw is None else bw, "ios": int(iops * 8),
           "runtime_ms": 8000, "clat_ns": {"p50": p99 // 2, "p99": p99, "p99.9": 2 * p99},
           "percentiles": {"50.000000": p99 // 2, "90.000000": p99 * 3 // 4, "99.000000": p99, "99.900000": 2 * p99},
           "rate": rate}
    return out


def one(config, rdr, ant, rstats=None, astats=None, vrate=None, repeat=1):
    return {"config": config, "repeat": repeat, "reader": rdr, "antagonist": ant, "reader_stats": rstats,
            "antagonist_stats": astats, "vrate": {"mean": vrate} if vrate else None,
            "pressure": {"inference.slice": {"some": 1.0, "full": 0.5}}}


R25, S10 = {"iops": 1000}, {"bps": 40000000}


def make_results():
    """none and roles_calibrated; a flat-out reader and two rate-bound ones against the shuffle and the writer, on
    the device-bound disk (rates from its capacity); two repeats of the solo runs, one of the pairs."""
    runs = []
    for rep in (1, 2):
        runs += [one("none", "randread4k", None, fio(2800 + 100 * rep, 400000), repeat=rep),
                 one("none", "randread4k@25", None, fio(999.5, 340000 + 20000 * rep, rate=R25), repeat=rep),
                 one("none", "seqread128k@10", None, fio(304.4, 1000000, bw=39.9e6, rate=S10), repeat=rep),
                 one("none", None, "randread64", astats=fio(3990, 60000000), repeat=rep),
                 one("none", None, "seqwrite1m", astats=fio(381, 90000000, bw=399e6, direction="write"), repeat=rep)]
    writer = fio(286, 90000000, bw=300e6, direction="write")
    runs += [
        # no isolation: the rate-bound reader falls behind and waits
        one("none", "randread4k@25", "randread64", fio(600, 8000000, rate=R25), fio(3300, 60000000)),
        one("none", "randread4k@25", "seqwrite1m", fio(990, 2000000, rate=R25), fio(372, 90000000, bw=390e6)),
        one("none", "randread4k", "randread64", fio(300, 8000000), fio(3600, 60000000)),
        # the calibrated roles: the shuffle held to 70% of its frontier with the reader at 1.4x
        one("roles_calibrated", "randread4k@25", "randread64", fio(998, 490000, rate=R25), fio(2100, 60000000), 60.0),
        one("roles_calibrated", "randread4k@25", "seqwrite1m", fio(1000, 600000, rate=R25), writer, 80.0),
        one("roles_calibrated", "seqread128k@10", "randread64", fio(305, 1200000, bw=39.95e6, rate=S10),
            fio(2000, 60000000), 70.0),
        one("roles_calibrated", "seqread128k@10", "seqwrite1m", fio(305, 1400000, bw=39.95e6, rate=S10), writer, 70.0),
        one("roles_calibrated", "randread4k", "randread64", fio(2450, 760000), fio(1500, 60000000), 65.0)]
    return {"meta": {"guest": "debian12", "kernel": "6.1.0-57-amd64", "fio": "fio-3.33", "seconds": 8, "repeats": 2,
                     "device": "lab-nvme-b", "disk_capacity": CAPACITY},
            "configs": ["none", "roles_calibrated"], "config_labels": dict(bench.LABELS),
            "readers": ["randread4k", "randread4k@25", "seqread128k@10"], "antagonists": ["randread64", "seqwrite1m"],
            "rates": plan_for(), "runs": runs}


def cell(summary, config, rdr, ant):
    found = [c for c in summary["cells"] if (c["config"], c["reader"], c["antagonist"]) == (config, rdr, ant)]
    assert len(found) == 1
    return found[0]


def test_summary_of_a_rate_bound_cell():
    summary = report.summarize(make_results())
    solo = summary["solo"]["readers"]["randread4k@25"]
    assert solo["p99"]["median"] == 370000 and solo["rate_achieved"]["median"] == pytest.approx(0.9995)
    assert "rate_achieved" not in summary["solo"]["readers"]["randread4k"]
    c = cell(summary, "roles_calibrated", "randread4k@25", "randread64")
    assert c["p99_ratio"] == pytest.approx(490000 / 370000)
    assert c["rate"] == {"unit": "iops", "requested": 1000, "percent": 25, "achieved": 0.998, "kept": True,
                         "solo_achieved": pytest.approx(0.9995), "solo_kept": True, "antagonist_unit": "iops",
                         "capacity": 4000.0, "reader_load": 1000, "frontier": 3000.0, "frontier_bound": "disk",
                         "antagonist": 2100, "frontier_share": 0.7}
    assert c["rate_met"] is True and c["flat_met"] is None
    # the writer against the 4k reader: its frontier is nearly the whole bandwidth
    w = cell(summary, "roles_calibrated", "randread4k@25", "seqwrite1m")
    assert w["rate"]["frontier_share"] == pytest.approx(300e6 / 395.904e6)
    assert w["rate_met"] is False                              # p99 1.62x solo
    # the shuffle against the 128k reader: in IOPS
    s = cell(summary, "roles_calibrated", "seqread128k@10", "randread64")
    assert s["rate"]["frontier"] == pytest.approx(3694.82421875)
    assert s["rate"]["frontier_share"] == pytest.approx(2000 / 3694.82421875)
    assert s["rate"]["kept"] is True and s["p99_ratio"] == pytest.approx(1.2)
    assert s["rate_met"] is False                              # 54% of the frontier
    assert cell(summary, "roles_calibrated", "seqread128k@10", "seqwrite1m")["rate_met"] is True
    # no isolation: the reader did 60% of its rate - a miss whatever else
    n = cell(summary, "none", "randread4k@25", "randread64")
    assert (n["rate"]["achieved"], n["rate"]["kept"], n["rate_met"]) == (0.6, False, False)
    assert n["rate"]["frontier_share"] == 1.1                  # it took what the reader left


def test_the_page_cache_writers_frontier_is_what_it_does_alone():
    results = make_results()
    results["antagonists"].append("buffered")
    results["rates"] = plan_for(antagonists=results["antagonists"])
    results["runs"] += [one("none", None, "buffered", astats=fio(62, 90000000, bw=62e6, direction="write")),
                        one("roles_calibrated", "randread4k@25", "buffered", fio(999, 450000, rate=R25),
                            fio(40, 90000000, bw=40e6, direction="write"), 75.0)]
    summary = report.summarize(results)
    rate = cell(summary, "roles_calibrated", "randread4k@25", "buffered")["rate"]
    assert (rate["frontier"], rate["frontier_bound"]) == (62e6, "alone")
    assert rate["frontier_share"] == pytest.approx(40 / 62)
    md = report.markdown(results, summary)
    assert "| randread4k@25 | 1000 IOPS (25%) | buffered | 370 \u00b5s | 450 \u00b5s | 1.22\u00d7 | yes (99.9%) " \
           "| yes (100.0%) | 40 MB/s | 62 MB/s (alone) | 65% | 75% | yes |" in md


def test_flat_out_target():
    summary = report.summarize(make_results())
    good = cell(summary, "roles_calibrated", "randread4k", "randread64")
    assert good["iops_kept"] == pytest.approx(2450 / 2950) and good["p99_ratio"] == 1.9
    assert good["flat_met"] is True and good["rate"] is None and good["rate_met"] is None
    bad = cell(summary, "none", "randread4k", "randread64")
    assert bad["flat_met"] is False


def test_verdicts_with_unknowns():
    assert report._verdict([True, None]) is None
    assert report._verdict([False, None]) is False
    assert report._verdict([True, True]) is True
    results = make_results()
    # the antagonist's figures lost: no share of its frontier, no pass mark - unless the reader already failed
    for r in results["runs"]:
        if r["reader"] and r["antagonist"] == "randread64":
            r["antagonist_stats"] = None
    summary = report.summarize(results)
    c = cell(summary, "roles_calibrated", "randread4k@25", "randread64")
    assert c["rate"]["frontier"] == 3000.0 and c["rate"]["antagonist"] is None and c["rate"]["frontier_share"] is None
    assert c["rate_met"] is None
    assert cell(summary, "none", "randread4k@25", "randread64")["rate_met"] is False


# ---------------------------------------------------------------------------------------------- the report

def test_the_report_leads_with_a_rate_bound_table_per_configuration():
    results = make_results()
    md = report.markdown(results, report.summarize(results))
    titles = [line for line in md.splitlines() if line.startswith("### ")]
    assert titles[:4] == ["### Rate-bound readers: no isolation", "### Rate-bound readers: roles + calibrated model",
                          "### Flat-out readers: reader IOPS kept and p99 / solo", "### Solo runs"]
    first = md.split("### Rate-bound readers: no isolation")[1].split("###")[0]
    assert "Rates from the device-bound capacity (randread4k@25 1000 IOPS of 4000 IOPS; seqread128k@10 40 MB/s of " \
           "400 MB/s)" in first
    assert "separate limits" in first and "Pass: p99 \u2264 1.5\u00d7 solo" in first
    assert ("| randread4k@25 | 1000 IOPS (25%) | randread64 | 370 \u00b5s | 8.00 ms | 21.62\u00d7 | no (60.0%) "
            "| yes (100.0%) | 3300 IOPS | 3000 IOPS | 110% | " + DASH + " | no |") in first
    calibrated = md.split("### Rate-bound readers: roles + calibrated model")[1].split("###")[0]
    assert "Rates from" not in calibrated                       # the note once, on the first table
    rows = [line for line in calibrated.splitlines() if line.startswith("| ") and not line.startswith("| reader")]
    assert rows == [
        "| randread4k@25 | 1000 IOPS (25%) | randread64 | 370 \u00b5s | 490 \u00b5s | 1.32\u00d7 | yes (99.8%) "
        "| yes (100.0%) | 2100 IOPS | 3000 IOPS | 70% | 60% | yes |",
        "| randread4k@25 | 1000 IOPS (25%) | seqwrite1m | 370 \u00b5s | 600 \u00b5s | 1.62\u00d7 | yes (100.0%) "
        "| yes (100.0%) | 300 MB/s | 396 MB/s | 76% | 80% | no |",
        "| seqread128k@10 | 40 MB/s (10%) | randread64 | 1.00 ms | 1.20 ms | 1.20\u00d7 | yes (99.9%) | yes (99.8%) "
        "| 2000 IOPS | 3695 IOPS | 54% | 70% | no |",
        "| seqread128k@10 | 40 MB/s (10%) | seqwrite1m | 1.00 ms | 1.40 ms | 1.40\u00d7 | yes (99.9%) | yes (99.8%) "
        "| 300 MB/s | 360 MB/s | 83% | 70% | yes |"]
    flat = md.split("### Flat-out readers: reader IOPS kept and p99 / solo")[1].split("###")[0]
    assert [line for line in flat.splitlines() if line.startswith("| ") and not line.startswith("| config")] == [
        "| no isolation | randread4k | randread64 | 300 | 10% | 20.00\u00d7 | 90% | no |",
        "| roles + calibrated model | randread4k | randread64 | 2450 | 83% | 1.90\u00d7 | 38% | yes |"]


def test_the_calibrated_source_is_named():
    results = make_results()
    results["rates"] = bench.rate_plan(results["readers"], results["antagonists"], MODEL, CAPACITY)
    md = report.markdown(results, report.summarize(results))
    assert "Rates from the calibrated model (randread4k@25 1000 IOPS of 3999 IOPS; seqread128k@10 40 MB/s of " \
           "401 MB/s)" in md


def test_html_puts_the_frontier_plot_below_the_rate_bound_tables():
    results = make_results()
    summary = report.summarize(results)
    page = report.html(results, summary, {"frontier": b"\x89PNGf", "latency-randread4k_25": b"\x89PNGl"})
    assert page.index("<h2>Rate-bound readers: roles + calibrated model</h2>") < page.index('alt="frontier"') \
        < page.index("<h2>Flat-out readers")
    assert page.index("<h2>Reader randread4k@25 (solo p99 370 \u00b5s in no isolation)</h2>") \
        < page.index('alt="latency-randread4k_25"')
    assert page.count("<table>") == 2 + 1 + 1 + 3 + 1     # rate-bound x2, flat-out, solo, per reader x3, pairs


def test_plots_of_rate_bound_readers():
    pytest.importorskip("matplotlib")
    results = make_results()
    images = report.plots(results, report.summarize(results))
    # the rate-bound readers' antagonists are measured against the frontier, not against their solo bandwidth
    assert sorted(images) == ["frontier", "latency-randread4k", "latency-randread4k_25", "latency-seqread128k_10",
                              "throughput-randread4k"]
    assert images["frontier"].startswith(b"\x89PNG\r\n\x1a\n") and len(images["frontier"]) > 5000


def test_a_recorded_run_without_rates_renders_as_before_with_the_flat_out_table():
    with open(os.path.join(RESULTS, "2026-12-02-debian12-tcg-device-bound-results.json")) as f:
        results = json.load(f)
    results.pop("summary", None)
    summary = report.summarize(results)
    assert not any(c["rate"] for c in summary["cells"])
    md = report.markdown(results, summary)
    assert "Rate-bound readers" not in md
    flat = md.split("### Flat-out readers: reader IOPS kept and p99 / solo")[1].split("###")[0]
    rows = [line for line in flat.splitlines() if line.startswith("| ") and not line.startswith("| config")]
    assert len(rows) == 4 * 2 * 4                               # configurations x readers x antagonists
    assert all(line.endswith((" | no |", " | yes |", " | %s |" % DASH)) for line in rows)


# ---------------------------------------------------------------------------------------------- the smoke run

def smoke_results(solo_iops=999.0, pair_reader=None, pair_antagonist="default"):
    """What --smoke records: the flat-out pair and the rate-bound one under the roles, each job alone first."""
    good = fio(2500, 400000)
    runs = [one("roles", "randread4k", None, good), one("roles", "randread4k@25", None, fio(solo_iops, 380000, rate=R25)),
            one("roles", None, "seqwrite1m", astats=fio(381, 90000000, bw=398e6, direction="write")),
            one("roles", None, "randread64", astats=fio(3995, 60000000)),
            one("roles", "randread4k", "seqwrite1m", good, fio(200, 90000000, bw=200e6), 90.0),
            one("roles", "randread4k@25", "randread64", pair_reader or fio(990, 900000, rate=R25),
                fio(2000, 60000000) if pair_antagonist == "default" else pair_antagonist, 70.0)]
    return {"meta": {"disk_capacity": CAPACITY, "seconds": 3, "ramp": 1}, "configs": ["roles"],
            "readers": ["randread4k", "randread4k@25"], "antagonists": ["seqwrite1m", "randread64"],
            "rates": bench.rate_plan(["randread4k", "randread4k@25"], ["seqwrite1m", "randread64"], None, CAPACITY),
            "runs": runs,
            "settings": {"roles": {"io.cost.qos": "259:1 enable=1 ctrl=user rpct=95.00", "inference.slice":
                                   {"io.weight": "default 1000"}, "training.slice": {"io.weight": "default 100"}}}}


def test_smoke_check_passes_a_sane_rate_bound_pair_without_asking_the_target():
    assert bench.smoke_check(smoke_results()) == []
    # 2.4x solo and the shuffle at a third of its frontier: far from the target, still a working benchmark
    assert bench.smoke_check(smoke_results(pair_reader=fio(700, 900000, rate=R25))) == []


@pytest.mark.parametrize("iops,got", [(900.0, "90.0%"), (1100.0, "110.0%"), (2500.0, "250.0%")])
def test_smoke_check_wants_the_rate_kept_alone_either_way(iops, got):
    assert bench.smoke_check(smoke_results(solo_iops=iops)) == [
        "randread4k@25 alone ran at %s of its rate {'iops': 1000}: not within 5%%" % got]


def test_smoke_check_wants_fio_to_have_been_given_the_plans_rate():
    results = smoke_results()
    results["runs"][1]["reader_stats"]["rate"] = None          # fio ran flat out: no rate in its job options
    assert bench.smoke_check(results) == ["fio ran randread4k@25 at None, the plan says {'iops': 1000}"]
    del results["rates"]
    assert bench.smoke_check(results) == ["rate-bound readers ran without a rate plan"]


def test_smoke_check_wants_every_figure_of_the_rate_bound_pair():
    got = bench.smoke_check(smoke_results(pair_antagonist=None))
    assert "randread4k@25 vs randread64 (roles): no antagonist throughput, share of frontier" in got
    reader = fio(990, 900000, rate=R25)
    reader["clat_ns"]["p99"] = None
    del reader["percentiles"]["99.000000"]
    got = bench.smoke_check(smoke_results(pair_reader=reader))
    assert got == ["reader randread4k@25: no fio figures (None)", "randread4k@25 vs randread64 (roles): no p99, p99 / solo"]


def test_smoke_check_wants_the_iops_throttle_in_force_too():
    results = smoke_results()
    results["runs"][3]["antagonist_stats"]["iops"] = 6702.0    # randread64 on the unthrottled disk
    assert bench.smoke_check(results) == [
        "randread64 alone did 6702 IOPS on a disk of 4000 IOPS: the throttle is not in force"]


# ---------------------------------------------------------------------------------------------- main without a VM

class FakeLab:
    """bench.Lab without a guest: the playbooks succeed, guest.py's cells come back as fio would record them (a
    rate-bound reader at its rate, as fio's job options say), and every cells spec is kept."""
    specs = []

    def __init__(self, name, out):
        self.name, self.out = name, out

    def write_inventory(self):
        return None

    def playbook(self, path, extra=None):
        return 0.1

    def guest(self, action, spec):
        if action == "prepare":
            return {"device": "/dev/nvme1n1", "made": []}
        FakeLab.specs.append(spec)
        cells = []
        for c in spec["cells"]:
            got = dict(c, wall=4.0, pressure={"inference.slice": {"some": 1.0}}, vrate={"mean": 80.0}, io={})
            if c["reader"]:
                rate = spec["rates"].get(c["reader"])
                got["reader_stats"] = fio(rate["iops"] * 0.999 if rate else 2500.0, 400000, rate=rate)
            if c["antagonist"]:
                got["antagonist_stats"] = fio(3000.0 if c["reader"] is None else 1500.0, 60000000)
            cells.append(got)
        settings = {"io.cost.qos": "259:1 enable=1 ctrl=user rpct=95.00", "inference.slice": {"io.weight": "default 1000"},
                    "training.slice": {"io.weight": "default 100"}}
        return {"settings": settings, "kernel": "6.1.0-57-amd64", "fio": "fio-3.33", "cells": cells}


def fake_vm(a):
    class Context:
        def __enter__(self):
            return a.name

        def __exit__(self, *exc):
            return False
    return Context()


def test_smoke_main_runs_both_pairs_with_the_rate_from_the_capacity(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "vm", fake_vm)
    monkeypatch.setattr(bench, "Lab", FakeLab)
    monkeypatch.setattr(bench, "disk_capacity", lambda name, serial: dict(CAPACITY))
    monkeypatch.setattr(bench, "accel", lambda: "tcg")
    monkeypatch.setattr(FakeLab, "specs", [])
    monkeypatch.setattr(sys, "argv", ["bench.py", "--smoke", "--no-probe", "--out", str(tmp_path)])
    bench.main()
    spec, = FakeLab.specs
    assert spec["rates"] == {"randread4k@25": {"iops": 1000}}
    assert [(c["reader"], c["antagonist"]) for c in spec["cells"]] == [
        ("randread4k", None), ("randread4k@25", None), (None, "seqwrite1m"), (None, "randread64"),
        ("randread4k", "seqwrite1m"), ("randread4k@25", "randread64")]
    assert (spec["seconds"], spec["ramp"]) == (3, 1)
    saved = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert saved["rates"]["source"] == "device-bound capacity"
    assert "### Rate-bound readers: roles, defaults" in (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "the rate-bound reader kept its rate alone" in capsys.readouterr().out


def test_main_refuses_rate_bound_readers_without_a_capacity_before_booting(monkeypatch):
    def no_vm(a):
        raise AssertionError("booted")
    monkeypatch.setattr(bench, "vm", no_vm)
    monkeypatch.setattr(sys, "argv", ["bench.py", "--disk-capacity", "none", "--configs", "none,roles"])
    with pytest.raises(SystemExit, match="need the disk's capacity"):
        bench.main()
    monkeypatch.setattr(sys, "argv", ["bench.py", "--readers", "randread4k@150"])
    with pytest.raises(SystemExit, match="unknown rate-bound reader randread4k@150"):
        bench.main()


# ---------------------------------------------------------------------------------------------- io.latency rows

@pytest.mark.parametrize("argv, message", [
    (["--configs", "iolatency"], "Debian's kernels do not build: add --kernel custom"),
    (["--configs", "roles_calibrated_iolatency,roles"], "roles_calibrated_iolatency need io.latency"),
    (["--configs", "roles,bogus"], "unknown configuration bogus"),
])
def test_configurations_refused_before_the_boot(monkeypatch, argv, message):
    """An io.latency comparison on a kernel without io.latency, or an unknown configuration: refused before any VM."""
    monkeypatch.setattr(sys, "argv", ["bench.py"] + argv)
    monkeypatch.setattr(bench, "vm", lambda a: pytest.fail("booted a VM"))
    with pytest.raises(SystemExit, match=message):
        bench.main()


def test_iolatency_configurations_have_labels_and_calibrate():
    assert set(bench.IOLATENCY_CONFIGS) <= set(bench.LABELS)
    assert "roles_calibrated_iolatency" in bench.CALIBRATED and "iolatency" not in bench.CALIBRATED
