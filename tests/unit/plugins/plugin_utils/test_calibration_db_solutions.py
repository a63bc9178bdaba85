# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration database and QoS solutions (iocost_calibrate's solution phase): merged over repeats
conservatively, the points kept per run, validated when present, and entries without them still valid."""

import copy
import json
import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = json.load(open(os.path.join(HERE, "fixtures", "calibration_results.json")))


def pinned(level, ratio, share, kept=1.0):
    return {"qos": {"rpct": 0.0, "rlat": 1250, "wpct": 0.0, "wlat": 2100, "min": float(level), "max": float(level)},
            "vrate": float(level), "vrate_read": float(level), "probe_p99_us": 2000.0 * ratio, "probe_p99_ratio": ratio,
            "rate_kept": kept, "probe_iops": 750.0, "probe_requested_iops": 750, "antagonist_iops": share * 3000,
            "antagonist_share": share, "why": "test"}


def latency(rlat, ratio):
    return {"qos": {"rpct": 95.0, "rlat": rlat, "wpct": 0.0, "wlat": 2100, "min": 10.0, "max": 100.0}, "vrate": None,
            "vrate_read": 90.0, "probe_p99_us": 2000.0 * ratio, "probe_p99_ratio": ratio, "rate_kept": 1.0,
            "probe_iops": 750.0, "probe_requested_iops": 750, "antagonist_iops": 2500.0, "antagonist_share": 0.83}


def with_solutions(result, isolation, bandwidth_share=0.95, lat=None):
    result = copy.deepcopy(result)
    found = {"isolation": isolation, "bandwidth": pinned(100, 9.0, bandwidth_share, 0.5)}
    if lat is not None:
        found["latency"] = lat
    result["solutions"] = found
    points = [dict(pinned(100, 9.0, bandwidth_share, 0.5), variant="pinned", level=100.0, settled=True)]
    if isolation:
        points.append(dict(isolation, variant="pinned", level=isolation["vrate"], settled=True))
    result["solution_phase"] = {"measured": True, "probe_iops": 750, "probe_share": 0.25, "seconds": 140.2,
                                "point_seconds": 15, "solo": {"probe_p99_us": 2000.0, "probe_iops": 750.1},
                                "points": points}
    return result


def test_one_repeat_carries_its_solutions_and_points():
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.47, 0.52))])
    iso = entry["solutions"]["isolation"]
    assert iso["qos"] == {"rpct": 0.0, "rlat": 1250, "wpct": 0.0, "wlat": 2100, "min": 60.0, "max": 60.0}
    assert iso["vrate"] == 60.0 and iso["probe_p99_ratio"] == 1.47 and iso["antagonist_share"] == 0.52
    assert iso["repeats"] == 1 and "why" not in iso
    assert entry["solutions"]["bandwidth"]["qos"]["min"] == 100.0 and entry["solution_notes"] == []
    run = entry["runs"][0]["solutions"]
    assert run["solo_p99_us"] == 2000.0 and run["probe_iops"] == 750
    assert run["found"] == {"bandwidth": 100.0, "isolation": 60.0}
    assert [p["level"] for p in run["points"]] == [100.0, 60.0] and run["points"][1]["probe_p99_ratio"] == 1.47
    assert db.entry_problems(entry) == []


def test_repeats_take_the_lowest_isolation_vrate_and_the_tightest_latency_target():
    runs = [with_solutions(RESULTS[0], pinned(80, 1.4, 0.7), 0.9, latency(3100, 1.3)),
            with_solutions(RESULTS[1], pinned(60, 1.2, 0.5), 0.96, latency(2900, 1.45)),
            with_solutions(RESULTS[2], pinned(80, 1.3, 0.72), 0.94, latency(3300, 1.2))]
    entry = db.merge_results(runs)
    assert entry["solutions"]["isolation"]["vrate"] == 60.0 and entry["solutions"]["isolation"]["repeats"] == 3
    assert entry["solutions"]["latency"]["qos"]["rlat"] == 2900
    # bandwidth: the same qos in every repeat, the median figures
    assert entry["solutions"]["bandwidth"]["antagonist_share"] == 0.94
    assert len(entry["runs"]) == 3 and all("solutions" in r for r in entry["runs"])


def test_a_repeat_without_isolation_leaves_it_out_with_a_note():
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.2, 0.5)), with_solutions(RESULTS[1], None)])
    assert "isolation" not in entry["solutions"] and "bandwidth" in entry["solutions"]
    assert entry["solution_notes"] == ["isolation: found in 1 of 2 repeats; left out (a repeat in which no setting "
                                       "held the probe makes the conservative choice none)"]
    assert db.entry_problems(entry) == []


def test_repeats_without_the_phase_are_left_out_and_old_entries_stay_valid():
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.2, 0.5)), copy.deepcopy(RESULTS[1])])
    assert entry["solutions"]["isolation"]["repeats"] == 1
    old = db.merge_results(copy.deepcopy(RESULTS[:2]))
    assert "solutions" not in old and db.entry_problems(old) == []


@pytest.mark.parametrize("change, words", [
    (lambda s: s.update(isolation=None), "solutions.isolation is None, not an object with a qos"),
    (lambda s: s["isolation"].pop("qos"), "solutions.isolation.qos is None, not an object with rpct"),
    (lambda s: s["isolation"]["qos"].pop("rlat"), "solutions.isolation.qos.rlat is missing"),
    (lambda s: s["isolation"]["qos"].update(rlat=1.5), "solutions.isolation.qos.rlat is 1.5, not a positive integer"),
    (lambda s: s["isolation"]["qos"].update(rpct=120), "solutions.isolation.qos.rpct is 120, not a percentile from 0"),
    (lambda s: s["isolation"]["qos"].update(min=0), "solutions.isolation.qos.min is 0, not a vrate percentage"),
    (lambda s: s["isolation"]["qos"].update(min=90, max=60), "solutions.isolation.qos.min (90) is above qos.max (60)"),
    (lambda s: s["isolation"]["qos"].update(rate=1), "solutions.isolation.qos has unknown key rate"),
    (lambda s: s["isolation"].update(vrate="60"), "solutions.isolation.vrate is '60', not a number"),
    (lambda s: s.update({"bad name": s["bandwidth"]}), "the solution name 'bad name' must be letters"),
])
def test_bad_solutions_in_an_entry_are_explained(change, words):
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.2, 0.5))])
    change(entry["solutions"])
    problems = db.entry_problems(entry)
    assert any(words in p for p in problems), problems
    with pytest.raises(db.CalibrationError) as e:
        db.check_entry(entry, "x.json")
    assert "x.json is not a valid calibration entry" in str(e.value)


def test_solutions_must_be_an_object_and_notes_strings():
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.2, 0.5))])
    assert db.entry_problems(dict(entry, solutions=[1])) == ["solutions is [1], not an object of named QoS solutions"]
    assert db.entry_problems(dict(entry, solution_notes="x")) == ["solution_notes is 'x', not a list of strings"]
    # null is what an entry without measured solutions may hold
    assert db.entry_problems(dict(entry, solutions=None)) == []


def test_a_result_with_a_bad_solution_is_refused_at_merge():
    bad = with_solutions(RESULTS[0], pinned(60, 1.2, 0.5))
    bad["solutions"]["isolation"]["qos"]["max"] = -1
    with pytest.raises(db.CalibrationError) as e:
        db.merge_results([bad])
    assert "cannot be merged: solutions.isolation.qos.max is -1, not a vrate percentage from 1 to 10000" in str(e.value)


def test_an_entry_with_solutions_writes_and_reads_back(tmp_path):
    entry = db.merge_results([with_solutions(RESULTS[0], pinned(60, 1.2, 0.5), lat=latency(3100, 1.3))])
    path = tmp_path / db.entry_file_name(entry)
    path.write_text(db.entry_file_text(entry))
    (loaded,) = db.load_db(str(tmp_path))
    assert loaded["solutions"] == entry["solutions"] and loaded["solutions"]["latency"]["qos"]["rpct"] == 95.0
