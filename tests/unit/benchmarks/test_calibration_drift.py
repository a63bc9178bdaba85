# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/calibration/drift.py on synthetic traces: where each schedule's seconds fall, the estimate at each
start, and that the replay ranks a sampling schedule by how much of a slow swing it averages out; and
reference.py's reading of fio's bandwidth log."""

import os
import random
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "calibration"))

import drift  # noqa: E402  pylint: disable=wrong-import-position
import reference  # noqa: E402  pylint: disable=wrong-import-position


def test_schedules_place_passes_one_round_of_six_apart():
    rows = dict((label, (windows, wall)) for label, windows, wall in drift.schedules(120))
    assert rows["reference 120 s"] == ([(0, 120)], 726)
    windows, wall = rows["2 passes x 8 s"]
    # fio runs ~9 s per pass and the module ~1 s more: one round of six lies between a coefficient's passes
    assert windows == [(2, 7), (62, 7)]
    assert wall == 120
    assert rows["1 pass x 20 s"][0] == [(2, 19)]
    # the default: three passes of 6 s (periods of 48 s), the QoS runs' 18 s after the second round
    windows, wall = rows["3 passes x 6 s, QoS between"]
    assert windows == [(2, 5), (50, 5), (2 + 96 + 18, 5)] and wall == 144
    assert rows["3 passes x 6 s"][0] == [(2, 5), (50, 5), (98, 5)]
    assert rows["2 passes x 8 s, QoS between"][0] == [(2, 7), (62 + 18, 7)]


@pytest.mark.parametrize("passes, after", [(1, 1), (2, 1), (3, 2), (4, 2), (7, 4)])
def test_the_replay_puts_the_qos_where_the_module_does(passes, after):
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as _calibrate
    assert drift.qos_after_round(passes) == _calibrate.qos_after_round(passes) == after


def test_estimates_average_exactly_the_scheduled_seconds():
    trace = list(range(100))
    values, span = drift.estimates(trace, [(2, 3), (10, 2)])
    assert span == 12
    assert len(values) == 100 - 12 + 1
    assert values[0] == pytest.approx((2 + 3 + 4 + 10 + 11) / 5)
    assert values[5] == pytest.approx((7 + 8 + 9 + 15 + 16) / 5)


def test_replay_of_a_constant_trace_has_no_spread():
    rows = drift.replay([1000] * 900, 120)
    assert rows and all(r["rsd"] == 0 and r["three_run_spread"] == 0 for r in rows)


def test_replay_ranks_schedules_by_how_much_of_a_slow_swing_they_average():
    # a square wave of 90 s (45 s fast, 45 s slow) plus a little noise: a contiguous 120 s average
    # spans more than a cycle, one 20 s run sits in one half, passes a minute apart land on both
    rng = random.Random(1)
    trace = [(15000 if (t // 45) % 2 else 10000) + rng.gauss(0, 200) for t in range(1200)]
    rows = dict((r["schedule"], r) for r in drift.replay(trace, 120))
    assert rows["reference 120 s"]["rsd"] < rows["2 passes x 8 s"]["rsd"]
    assert rows["2 passes x 8 s"]["rsd"] < rows["1 pass x 20 s"]["rsd"]
    assert rows["1 pass x 20 s"]["rsd"] > 0.15


def test_three_run_spread_needs_room_for_three_separate_runs():
    assert drift.three_run_spread([1.0] * 20, 10, random.Random(0)) is None
    assert drift.three_run_spread([1.0] * 21, 10, random.Random(0)) == 0
    # 21 starts and runs 10 s long leave one triple only: 0, 10 and 20
    assert drift.three_run_spread([float(i) for i in range(21)], 10, random.Random(0), draws=50) == 2.0


def test_markdown_names_every_schedule():
    trace = [1000 + (t % 7) for t in range(700)]
    rows = drift.replay(trace, 120)
    text = drift.markdown("rrandiops", trace, rows)
    assert text.startswith("rrandiops: 700 s traced")
    assert text.count("\n| ") == len(rows) + 1


def test_bw_log_reads_kib_per_second_and_removes_the_file(tmp_path):
    prefix = str(tmp_path / "coef-trace")
    with open(prefix + "_bw.1.log", "w") as f:
        f.write("1000, 81920, 0, 4096, 0\n2000, 40960, 0, 4096, 0\n\n")
    assert reference.bw_log(prefix) == [81920 * 1024, 40960 * 1024]
    assert not os.path.exists(prefix + "_bw.1.log")


def test_the_calibration_role_does_not_poll_the_host_it_measures():
    # an async task's async_status polls start Python on the measured host and slowed fio by ~19%
    with open(os.path.join(ROOT, "roles", "calibration", "tasks", "main.yml")) as f:
        tasks = yaml.safe_load(f)
    measure = [t for t in tasks if "aiinfra.io_isolation.iocost_calibrate" in t]
    assert len(measure) == 1
    assert "async" not in measure[0] and "poll" not in measure[0]
    assert measure[0]["timeout"] == "{{ calibration_timeout }}"
