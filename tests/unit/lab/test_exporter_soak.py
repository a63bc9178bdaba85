# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/exporter_soak.py (make lab-soak): the records it parses, and the bounds it asserts."""

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab"))

import exporter_soak as soak  # noqa: E402  pylint: disable=wrong-import-position

MIB = 1024 * 1024
VALID = ("# HELP aiinfra_io_isolation_exporter_errors Files this run could not read or parse.\n"
         "# TYPE aiinfra_io_isolation_exporter_errors gauge\naiinfra_io_isolation_exporter_errors 0\n")


def records(n, peak=lambda i: 60 * MIB, cpu_us=lambda i: 2000000, period=6.0, status="0"):
    lines = []
    for i in range(n):
        lines.append("start inv%d %.2f" % (i, 100 + i * period))
        end = 100 + i * period + 4
        lines.append("stop inv%d %.2f success exited %s %d %d 0 0 0" % (i, end, status, peak(i), cpu_us(i)))
    return "\n".join(lines) + "\n"


def scrapes(n, valid=True, age=3.0):
    return [{"ts": 1000.0 + 5 * i, "valid": valid, "age": age, "problem": None if valid else "bad"} for i in range(n)]


def summary(runs_text=None, scrape_list=None, leftovers=(), final=None, bounds=None):
    runs = soak.parse_runs(runs_text if runs_text is not None else records(40))
    return soak.summarize(runs, scrape_list if scrape_list is not None else scrapes(100), list(leftovers),
                          final or {"problems": []}, dict(soak.BOUNDS, **(bounds or {})), {"distinct_textfiles": 40})


def test_runs_pair_their_start_and_stop_lines():
    text = ("start a 10.00\nstop zz 11.0 success exited 0 1 1 0 0 0\nstop a 14.50 success exited 0 52428800 1500000 "
            "0 0 0\nstart b 15.00\nstop b 19.25 exit-code exited 1 - - 1 2 1\nstart c 20.00\n")
    runs = soak.parse_runs(text)
    assert [r["id"] for r in runs] == ["a", "b"]          # no start for zz, no stop yet for c
    a, b = runs
    assert (a["seconds"], a["memory_peak"], a["cpu_seconds"]) == (4.5, 52428800, 1.5)
    assert not soak.run_failed(a)
    assert (b["memory_peak"], b["cpu_seconds"], b["procs"], b["kprobes"], b["kprobe_events"]) == (None, None, 1, 2, 1)
    assert soak.run_failed(b)


@pytest.mark.parametrize("result,code,status", [("timeout", "killed", "TERM"), ("success", "killed", "-"),
                                                ("success", "exited", "1")])
def test_a_run_that_did_not_exit_0_failed(result, code, status):
    run = soak.parse_runs("start x 1\nstop x 2 %s %s %s 1 1 0 0 0\n" % (result, code, status))[0]
    assert soak.run_failed(run)


SAMPLE = """ts 1700000010.250000
before ActiveState=inactive InvocationID=0123abcd
bpftrace 0
kprobes 0 0
after InvocationID=0123abcd ActiveState=inactive
node node_textfile_mtime_seconds{file="/var/lib/prometheus/node-exporter/aiinfra_io_isolation.prom"} 1.700000008e+09
node node_textfile_scrape_error 0
node-done 0
mtime 1700000008.000000000
textfile %d
""" % len(VALID) + VALID


def test_a_batch_of_samples_is_split_and_each_parsed():
    # as the controller's fetch prints them: a newline, the name, the file
    batch = "\n=== 00000001.s\n%s\n=== 00000002.s\nts 5.0\nbefore ActiveState=active\nbpftrace 1\nkprobes 2 0\nafter ActiveState=active\n" \
            "textfile-missing\n\n=== 00000003.s\n%s" % (SAMPLE, SAMPLE.replace(VALID, VALID[:-1]).replace(
                "textfile %d" % len(VALID), "textfile %d" % (len(VALID) - 1)))
    parts = soak.split_batch(batch)
    assert [part[0] for part in parts] == ["00000001.s", "00000002.s", "00000003.s"]
    first = soak.parse_sample(parts[0][1])
    assert first["ts"] == 1700000010.25 and first["mtime"] == 1700000008.0
    assert first["before"] == first["after"] == ("inactive", "0123abcd")
    assert first["node"]["node_textfile_scrape_error"] == 0 and first["node_ok"]
    assert first["textfile"] == VALID and not first["truncated"]
    second = soak.parse_sample(parts[1][1])
    assert second["textfile"] is None and second["node"] is None and (second["bpftrace"], second["kprobes"]) == (1, 2)
    # a file without its last newline keeps exactly its bytes: promtool sees what node_exporter would
    assert soak.parse_sample(parts[2][1])["textfile"] == VALID[:-1]
    assert soak.parse_sample(SAMPLE[:-5])["truncated"]


def test_leftovers_count_only_while_no_run_was_active_throughout():
    s = soak.parse_sample(SAMPLE)
    assert soak.idle_leftovers(s) == []
    s.update(bpftrace=1, kprobes=2)
    assert soak.idle_leftovers(s) == ["1 bpftrace processes", "2 kprobes, 0 kprobe events"]
    assert soak.idle_leftovers(dict(s, after=("inactive", "another run"))) == []   # a run came and went
    assert soak.idle_leftovers(dict(s, before=("activating", "0123abcd"), after=("activating", "0123abcd"))) == []


def test_growth_compares_the_last_quarter_with_the_first():
    assert soak.growth([10] * 40) == 1.0
    assert soak.growth([10] * 10 + [11] * 20 + [12] * 10) == 1.2
    assert soak.growth([10] * 7) is None
    assert soak.slope_per_hour([(0, 1.0), (1800, 2.0), (3600, 3.0)]) == pytest.approx(2.0)
    assert soak.slope_per_hour([(0, 1.0)]) is None


def test_a_clean_soak_passes_and_says_its_figures():
    s = summary()
    assert soak.judge(s) == []
    assert s["runs"] == 40 and s["failed_runs"] == 0 and s["scrapes"] == 100 and s["invalid_scrapes"] == 0
    assert s["memory_peak_mib"] == {"min": 60.0, "median": 60.0, "max": 60.0, "n": 40}
    assert s["cpu_seconds_per_run"]["median"] == 2.0 and s["run_period_seconds"]["max"] == pytest.approx(6.0)
    assert s["memory_growth"] == 1.0 and s["memory_slope_mib_per_hour"] == pytest.approx(0.0)


@pytest.mark.parametrize("kwargs,expected", [
    ({"runs_text": records(40, status="1")}, "40 of 40 runs failed"),
    ({"runs_text": ""}, "no exporter run was recorded"),
    ({"scrape_list": scrapes(99) + scrapes(1, valid=False)}, "1 of 100 scrapes invalid"),
    ({"scrape_list": []}, "no scrape was taken"),
    ({"scrape_list": scrapes(10, age=500.0)}, "the textfile was 500 s old"),
    ({"runs_text": records(40, peak=lambda i: (60 + i) * MIB)}, "median memory peak grew 1.47x"),
    ({"runs_text": records(40, peak=lambda i: 400 * MIB)}, "memory peak 400.0 MiB is above 256.0 MiB"),
    ({"runs_text": records(40, cpu_us=lambda i: 2000000 + i * 100000), "bounds": {"cpu_growth": 1.5}},
     "median CPU grew 2.22x"),
    ({"runs_text": records(40, cpu_us=lambda i: 90000000)}, "a run's CPU 90.00 s is above 60.00 s"),
    ({"runs_text": records(40, period=300.0)}, "300 s between two runs' starts"),
    ({"runs_text": records(3).replace("0 0 0\n", "1 2 0\n")}, "3 runs left processes in the unit's cgroup"),
    ({"runs_text": records(3).replace("0 0 0\n", "0 2 0\n")}, "3 runs left kprobes registered"),
    ({"leftovers": ["1 bpftrace processes at 5 (no run active)"]}, "left over: 1 bpftrace processes"),
    ({"final": {"problems": ["2 kprobes left at the end"]}}, "2 kprobes left at the end"),
])
def test_each_bound_fails_the_soak(kwargs, expected):
    problems = soak.judge(summary(**kwargs))
    assert any(expected in p for p in problems), problems


def test_the_cpu_growth_is_reported_and_judged_only_when_asked():
    s = summary(runs_text=records(40, cpu_us=lambda i: 2000000 + i * 100000))
    assert s["cpu_growth"] == pytest.approx(2.2245, abs=1e-3) and soak.judge(s) == []


def test_the_markdown_says_passed_or_why_not():
    s = summary()
    s.update(guest="debian13", accel="tcg", kernel="6.12", systemd="257", seconds=3600, interval=5, latency_seconds=2,
             phase_seconds=225, phases=["read", "idle"], date="2026-01-01", node_scrapes=60, node_scrape_errors=0)
    assert "| result | PASSED |" in soak.markdown(s, [])
    text = soak.markdown(s, ["1 of 100 scrapes invalid"])
    assert "| result | FAILED: 1 of 100 scrapes invalid |" in text and "| runs (failed) | 40 (0) |" in text
    assert "60.0 / 60.0 / 60.0 MiB" in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not found (make promtool)")
def test_each_distinct_textfile_is_checked_by_promtool_once():
    checker = soak.Soak(None, "vm")
    sample = soak.parse_sample(SAMPLE)
    checker.check(soak.parse_sample(SAMPLE.replace("textfile %d\n" % len(VALID), "textfile-missing\n")))  # no run yet
    assert checker.scrapes == []
    checker.check(sample)
    checker.check(sample)
    bad = dict(sample, textfile="aiinfra_io_isolation_x{a=\"1\"} 1\naiinfra_io_isolation_x{a=\"1\"} 2\n")
    checker.check(bad)
    checker.check(dict(sample, textfile=None))      # missing after the first run
    checker.check(dict(sample, truncated=True))
    assert [s["valid"] for s in checker.scrapes] == [True, True, False, False, False]
    assert len(checker.checked) == 2 and checker.scrapes[0]["age"] == pytest.approx(2.25)
    assert checker.scrapes[3]["problem"] == "textfile missing" and checker.node == [0.0] * 6
