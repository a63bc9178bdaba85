# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_fio: the status-stream parser, windows, stop rule and QoS rule against real fio output, and the
process handling (streaming, SIGINT/SIGTERM/SIGKILL, errors, exceptions) against a fake fio.

The recordings (fixtures/fio/*.out, recordings.json, README.md) are what fio 3.39 (Debian 13) and
fio 3.33 (Debian 12) printed in the QEMU lab for the six measurements on a file and on a raw NVMe
disk, the QoS runs, an interrupted run and failing runs. Expected coefficients are computed here by
hand from fio's own cumulative totals (io_bytes, runtime) and compared with fio's own bw_bytes/iops.
"""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "fio")
MANIFEST = json.load(open(os.path.join(FIXTURES, "recordings.json")))
D13 = "debian13-fio-3.39"
D12 = "debian12-fio-3.33"
TAGS = sorted(set(re.match(r"(debian\d+-fio-\d+\.\d+)-", name).group(1) for name in MANIFEST))
NAMES = [m.name for m in fio.MEASUREMENTS]


def fixture_text(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def dumps_of(name):
    return fio.split_dumps(fixture_text(name))


def raw_objects(text):
    """The reference split: json's own decoder from each top-level '{'."""
    dec = json.JSONDecoder()
    i, out = 0, []
    while True:
        j = text.find("{", i)
        if j < 0:
            return out
        obj, i = dec.raw_decode(text, j)
        out.append(obj)


def measurement_fixtures():
    out = []
    for tag in TAGS:
        for target in ("file", "nvme"):
            for name in NAMES:
                fname = "%s-%s-%s.out" % (tag, target, name)
                if fname in MANIFEST:
                    out.append((fname, fio.MEASUREMENT_BY_NAME[name]))
    return out


MEAS_FIXTURES = measurement_fixtures()


def test_both_fio_versions_recorded():
    assert TAGS == [D12, D13]
    assert len([f for f, _m in MEAS_FIXTURES if f.startswith(D12)]) == 12
    assert len([f for f, _m in MEAS_FIXTURES if f.startswith(D13)]) == 12
    for tag in TAGS:
        assert fixture_text("%s-version.out" % tag).startswith("fio-3.")


# ---------------------------------------------------------------------------------------------
# The recordings: what fio's JSON holds
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fname,m", MEAS_FIXTURES, ids=[f for f, _m in MEAS_FIXTURES])
def test_recording_parses_and_counters_are_monotonic(fname, m):
    text = fixture_text(fname)
    dumps = fio.split_dumps(text)
    assert dumps == raw_objects(text)
    assert len(dumps) == text.count('"fio version"') >= 5
    assert MANIFEST[fname]["rc"] == 0
    prev = (0, 0)
    for d in dumps:
        assert len(d["jobs"]) == 1
        cur = fio.job_totals(d, m.side)
        assert cur[0] >= prev[0] and cur[1] >= prev[1], "runtime and io_bytes are cumulative"
        prev = cur
    # the other direction did nothing
    other = "write" if m.side == "read" else "read"
    assert fio.job_totals(dumps[-1], other)[1] == 0


@pytest.mark.parametrize("fname,m", MEAS_FIXTURES, ids=[f for f, _m in MEAS_FIXTURES])
def test_windows_add_up_to_fios_own_totals(fname, m):
    """Windows are contiguous: their amounts add up to the final io_bytes over the final runtime,
    which is fio's own bw_bytes (bytes/s) or iops (I/O per s) of the final object."""
    dumps = dumps_of(fname)
    tracker = fio.WindowTracker(m, min_window=0)
    windows = [w for w in (tracker.add(d) for d in dumps) if w]
    t_prev, amount = 0.0, 0.0
    for t, rate in windows:
        amount += rate * (t - t_prev)
        t_prev = t
    final = dumps[-1]["jobs"][0][m.side]
    assert t_prev == pytest.approx(final["runtime"] / 1000.0)
    divisor = 1 if m.unit == "bytes" else 4096
    assert amount == pytest.approx(final["io_bytes"] / divisor, rel=1e-9)
    mean = amount / t_prev
    own = final["bw_bytes"] if m.unit == "bytes" else final["iops"]
    assert mean == pytest.approx(own, rel=2e-3)


BY_HAND = [
    # recording: (io_bytes, runtime ms) of the final object, the value by hand
    (D13, "nvme-rrandiops", 470515712, 6002, 470515712 / 4096 / 6.002),
    (D13, "nvme-wbps", 19998441472, 6011, 19998441472 / 6.011),
    (D13, "file-rseqiops", 365371392, 6001, 89202 / 6.001),
    (D13, "file-rbps", 54626615296, 6016, 407 * 134217728 / 6.016),
    (D12, "nvme-rrandiops", 422952960, 6001, 103260 / 6.001),
    (D12, "nvme-wbps", 19998441472, 6024, 149 * 134217728 / 6.024),
    (D12, "file-wseqiops", 254509056, 6001, 62136 / 6.001),
]


@pytest.mark.parametrize("tag,name,io_bytes,ms,by_hand", BY_HAND)
def test_coefficients_by_hand(tag, name, io_bytes, ms, by_hand):
    """Final totals of the recordings, divided by hand."""
    m = fio.MEASUREMENT_BY_NAME[name.split("-")[1]]
    dumps = dumps_of("%s-%s.out" % (tag, name))
    assert fio.job_totals(dumps[-1], m.side) == (ms, io_bytes)
    tracker = fio.WindowTracker(m)
    for d in dumps:
        tracker.add(d)
    seconds, amount = tracker.totals()
    assert amount / seconds == pytest.approx(by_hand, rel=1e-12)
    final = dumps[-1]["jobs"][0][m.side]
    assert by_hand == pytest.approx(final["bw_bytes"] if m.unit == "bytes" else final["iops"], rel=1e-3)


def test_estimate_by_hand_debian13_nvme_rrandiops():
    """Windows end at 0.878 1.878 2.879 3.885 4.885 5.886 (6.002 is a 0.116 s step: carried, dropped at
    the end). With ramp 2 the windows from 1.878 on count (midpoint 2.38): 151363584 -> 464097280 bytes
    in 4.008 s = 76351 IOs / 4.008 s = 19049.65/s. The last three estimates lie within 1.2% of their
    mean, but the four window rates have a relative standard error of 2.2%: the default rule (2%) goes
    on, a 5% rule is stable at 5.886 s."""
    m = fio.MEASUREMENT_BY_NAME["rrandiops"]
    default = fio.StopRule()
    tracker = fio.WindowTracker(m)
    assert [default.update(w) for w in (tracker.add(d) for d in dumps_of(D13 + "-nvme-rrandiops.out")) if w] == \
        [None] * 6
    assert 0.02 < default.spread()["rse"] < 0.022
    rule = fio.StopRule(tolerance=0.05)
    tracker = fio.WindowTracker(m)
    decisions = [rule.update(w) for w in (tracker.add(d) for d in dumps_of(D13 + "-nvme-rrandiops.out")) if w]
    assert [round(t, 3) for t, _r in rule.windows] == [0.878, 1.878, 2.879, 3.885, 4.885, 5.886]
    assert decisions == [None] * 5 + ["stable"]
    assert rule.stopped == "stable"
    assert (464097280 - 151363584) == 76351 * 4096
    assert rule.estimate == pytest.approx(76351 / 4.008, rel=1e-12)
    assert round(rule.estimate) == 19050
    by_hand = [(io - 151363584) / 4096 / ((ms - 1878) / 1000.0)
               for ms, io in ((2879, 230330368), (3885, 307941376), (4885, 390017024), (5886, 464097280))]
    assert [e for _t, e in rule.estimates] == pytest.approx(by_hand, rel=1e-12)
    last = by_hand[1:]
    assert max(abs(e / (sum(last) / 3) - 1) for e in last) < 0.012


@pytest.mark.parametrize("tag,issued", [(D13, 2), (D12, 1)])
def test_total_ios_counts_submissions_not_completions(tag, issued):
    """Why io_bytes and not total_ios: a 128 MiB read in flight is counted in total_ios."""
    first = dumps_of(tag + "-file-rbps.out")[0]["jobs"][0]
    assert first["read"]["total_ios"] == issued and first["read"]["io_bytes"] == 0
    # and job_runtime already runs while the read side's runtime is 0
    assert first["read"]["runtime"] == 0 and first["job_runtime"] > 0


def test_job_runtime_is_not_the_time_axis():
    """job_runtime is garbage before the first I/O (fio 3.39) and the SUM of the jobs' times with
    group_reporting; the direction's runtime is neither."""
    first = dumps_of(D13 + "-nvme-wbps.out")[0]["jobs"][0]
    assert first["job_runtime"] > 100000 and first["write"]["runtime"] == 0
    nj2 = dumps_of(D13 + "-nvme-rrandiops-nj2.out") + dumps_of(D12 + "-nvme-rrandiops-nj2.out")
    assert len(nj2) == 10
    for d in nj2:
        job = d["jobs"][0]
        assert len(d["jobs"]) == 1
        assert job["job_runtime"] == pytest.approx(2 * job["read"]["runtime"], abs=5)


@pytest.mark.parametrize("tag", [D13, D12])
def test_numjobs_without_group_reporting_sums_the_jobs(tag):
    dumps = dumps_of(tag + "-nvme-rrandiops-nj2-nogroup.out")
    for d in dumps:
        assert len(d["jobs"]) == 2
        runtime, io_bytes = fio.job_totals(d, "read")
        assert io_bytes == sum(j["read"]["io_bytes"] for j in d["jobs"])
        assert runtime == max(j["read"]["runtime"] for j in d["jobs"])
    m = fio.MEASUREMENT_BY_NAME["rrandiops"]
    tracker = fio.WindowTracker(m)
    rates = [w[1] for w in (tracker.add(d) for d in dumps) if w]
    first = dumps[0]["jobs"]
    both = sum(j["read"]["io_bytes"] for j in first) / 4096 / (max(j["read"]["runtime"] for j in first) / 1000.0)
    assert rates[0] == pytest.approx(both, rel=1e-12)
    # two jobs do more than either alone
    assert rates[0] > 1.5 * dumps[0]["jobs"][0]["read"]["io_bytes"] / 4096 / (first[0]["read"]["runtime"] / 1000.0)


def test_duplicate_final_object_gives_no_window():
    dumps = dumps_of(D13 + "-file-wbps.out")
    assert dumps[-1]["jobs"][0]["write"] == dumps[-2]["jobs"][0]["write"]
    tracker = fio.WindowTracker(fio.MEASUREMENT_BY_NAME["wbps"], min_window=0)
    windows = [tracker.add(d) for d in dumps]
    assert windows[-1] is None and windows[-2] is not None


@pytest.mark.parametrize("tag", [D13, D12])
def test_error_recording_raises(tag):
    dumps = dumps_of(tag + "-err-notblock.out")
    assert MANIFEST[tag + "-err-notblock.out"]["rc"] == 1
    assert "err=22" in MANIFEST[tag + "-err-notblock.out"]["stderr"]
    with pytest.raises(ValueError, match="error 22 .Invalid argument"):
        fio.job_totals(dumps[0], "read")


@pytest.mark.parametrize("tag", [D13, D12])
def test_sigint_recording_ends_with_a_final_object(tag):
    dumps = dumps_of(tag + "-nvme-rrandiops-sigint.out")
    assert MANIFEST[tag + "-nvme-rrandiops-sigint.out"]["rc"] == 128
    assert len(dumps) == 4
    assert dumps[-1]["jobs"][0]["read"]["runtime"] < 3500
    assert dumps[-1]["jobs"][0]["read"]["runtime"] > dumps[-2]["jobs"][0]["read"]["runtime"]


@pytest.mark.parametrize("tag", TAGS)
def test_version_recordings(tag):
    text = fixture_text("%s-version.out" % tag)
    assert fio.fio_version(lambda argv: (0, text, "")) == tag.rsplit("-", 1)[1]


# ---------------------------------------------------------------------------------------------
# DumpStream
# ---------------------------------------------------------------------------------------------

STREAM = fixture_text(D13 + "-nvme-rrandiops.out")
STREAM_OBJECTS = raw_objects(STREAM)


def chunked(text, cuts):
    points = sorted(set(c % (len(text) + 1) for c in cuts))
    pieces, last = [], 0
    for p in points:
        pieces.append(text[last:p])
        last = p
    pieces.append(text[last:])
    return pieces


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10 ** 6), max_size=60))
def test_stream_any_chunking_gives_the_same_objects(cuts):
    stream = fio.DumpStream()
    got = []
    for piece in chunked(STREAM, cuts):
        got += stream.feed(piece)
    assert got == STREAM_OBJECTS
    assert len(got) == 7


GARBAGE = st.one_of(
    st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=80).filter(
        lambda s: not s.startswith("{")),
    st.sampled_from([
        "{", "{{{", '{"unterminated', "{not json}", "{[", '{"a": [1, 2', "}", "}}}", '"', "\\", "[1, 2]",
        "fio: pid=0, err=22/file:filesetup.c:1149, func=total_file_size, error=Invalid argument",
        "aiinfra-rbps: (groupid=0, jobs=1): err= 0: pid=4242: Tue Dec  1 09:45:54 2026",
        "fio: terminating on signal 2", "Jobs: 1 (f=1): [r(1)][50.0%][r=75.2MiB/s][r=19.2k IOPS][eta 00m:03s]",
    ]))


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.lists(GARBAGE, max_size=3), min_size=8, max_size=8),
       st.lists(st.integers(min_value=0, max_value=10 ** 6), max_size=30))
def test_stream_skips_garbage_lines_between_objects(garbage, cuts):
    parts = []
    for i, obj_text in enumerate(_object_texts(STREAM)):
        parts += [g + "\n" for g in garbage[i]]
        parts.append(obj_text)
    parts += [g + "\n" for g in garbage[-1]]
    text = "".join(parts)
    stream = fio.DumpStream()
    got = []
    for piece in chunked(text, cuts):
        got += stream.feed(piece)
    assert got == STREAM_OBJECTS


def _object_texts(text):
    """The recorded stream cut into each object's own text (with its trailing newline)."""
    out, start = [], 0
    while True:
        i = text.find("\n}\n", start)
        if i < 0:
            return out
        out.append(text[start:i + 3])
        start = i + 3


def test_object_texts_helper_is_exact():
    assert "".join(_object_texts(STREAM)) == STREAM
    assert len(_object_texts(STREAM)) == 7


@hsettings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.lists(st.integers(min_value=0, max_value=500), max_size=10))
def test_stream_never_crashes_on_garbage(text, cuts):
    stream = fio.DumpStream(require=None)
    for piece in chunked(text, cuts):
        for obj in stream.feed(piece):
            assert isinstance(obj, dict)


def test_stream_garbage_cases():
    s = fio.DumpStream(require=None)
    assert s.feed('{"a": 1}\n[1]\n  {"indented": 1}\n{"b": "x}"}trailing\n{"bad" 1}\n{"c": {"d": 2}}\n') == [
        {"a": 1}, {"b": "x}"}, {"c": {"d": 2}}]
    assert s.skipped == 1
    # a raw newline in a string abandons the candidate; the next object is still found
    assert s.feed('{"x": "no\nend\n{"ok": 1}\n') == [{"ok": 1}]
    # an unclosed candidate is abandoned by the next object at column 0
    assert s.feed('{"open": [\n{"ok": 2}\n') == [{"ok": 2}]
    # escapes, split anywhere
    for cut in range(1, 20):
        s2 = fio.DumpStream(require=None)
        text = '{"q": "a\\"}{\\\\"}\n'
        assert s2.feed(text[:cut]) + s2.feed(text[cut:]) == [{"q": 'a"}{\\'}]
    # carriage returns (fio's eta lines) count as line ends
    assert fio.DumpStream(require=None).feed('Jobs: 1\r{"r": 1}\n') == [{"r": 1}]
    # by default only fio's status objects (with "jobs") come out
    assert fio.DumpStream().feed('{\n}\n{"jobs": []}\n{"x": {"jobs": 1}}\n') == [{"jobs": []}]


def test_stream_drops_oversized_candidates(monkeypatch):
    monkeypatch.setattr(fio, "MAX_OBJECT", 100)
    s = fio.DumpStream(require=None)
    assert s.feed('{"big": "' + "x" * 200) == []
    assert s.feed('"}\n{"small": 1}\n') == [{"small": 1}]


# ---------------------------------------------------------------------------------------------
# WindowTracker
# ---------------------------------------------------------------------------------------------

def dump(runtime_ms, io_bytes, side="read", error=0, jobs=1):
    other = "write" if side == "read" else "read"
    return {"jobs": [{"jobname": "j", "error": error, side: {"runtime": runtime_ms, "io_bytes": io_bytes // jobs},
                      other: {"runtime": 0, "io_bytes": 0}} for _i in range(jobs)]}


def test_tracker_units_and_carry():
    t = fio.WindowTracker(fio.MEASUREMENT_BY_NAME["rseqiops"])
    assert t.add(dump(0, 0)) is None
    assert t.add(dump(1000, 4096 * 1000)) == (1.0, 1000.0)
    assert t.add(dump(1200, 4096 * 1300)) is None            # 0.2 s: carried into the next window
    assert t.add(dump(1100, 4096 * 1400)) is None            # time went backwards: ignored
    assert t.add(dump(2000, 4096 * 2000)) == (2.0, 1000.0)    # 1000 IOs in 1.0 s
    assert t.add(dump(2000, 4096 * 2000)) is None            # duplicate
    b = fio.WindowTracker(fio.MEASUREMENT_BY_NAME["wbps"], big_bs=1 << 20)
    assert b.add(dump(500, 1 << 30, side="write")) == (0.5, float(2 << 30))
    two = fio.WindowTracker(fio.MEASUREMENT_BY_NAME["rrandiops"])
    assert two.add(dump(1000, 4096 * 2000, jobs=2)) == (1.0, 2000.0)


def test_tracker_refuses_fio_errors_and_malformed_objects():
    t = fio.WindowTracker(fio.MEASUREMENT_BY_NAME["rbps"])
    with pytest.raises(ValueError, match="error 5 .Input/output error"):
        t.add(dump(1000, 1, error=5))
    for bad in ({}, {"jobs": []}, {"jobs": ["x"]}, {"jobs": [{"read": {"runtime": "1", "io_bytes": 0}}]},
                {"jobs": [{"write": {}}]}):
        with pytest.raises(ValueError):
            t.add(bad)


# ---------------------------------------------------------------------------------------------
# StopRule
# ---------------------------------------------------------------------------------------------

def feed(rule, rates, step=1.0, t0=0.0):
    t = t0
    for r in rates:
        t += step
        if rule.update((t, r)):
            break
    return rule


@pytest.mark.parametrize("kw,match", [
    ({"ramp_seconds": -1}, "ramp_seconds must be 0 or more"),
    ({"windows": 1}, "windows must be at least 2"),
    ({"windows": 2.5}, "windows must be a whole number"),
    ({"windows": True}, "windows must be a whole number"),
    ({"tolerance": 0}, "tolerance is a fraction"),
    ({"tolerance": 1.5}, "tolerance is a fraction"),
    ({"tolerance": "0.02"}, "tolerance must be a number"),
    ({"min_seconds": 0}, "min_seconds must be more than 0"),
    ({"min_seconds": 30}, r"max_seconds \(6\) must not be less than min_seconds \(30\)"),
    ({"passes": 0}, "passes must be a whole number from 1 to 10"),
    ({"passes": 11}, "passes must be a whole number from 1 to 10"),
    ({"passes": 1.5}, "passes must be a whole number"),
    ({"passes": True}, "passes must be a whole number"),
    ({"ramp_seconds": 10, "max_seconds": 10.5, "min_seconds": 5}, "must exceed ramp_seconds"),
    ({"max_seconds": 4000}, "at most 3600"),
    ({"max_seconds": float("nan")}, "max_seconds must be a number"),
    ({"max_rse": 0}, "max_rse is a fraction"),
])
def test_rule_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        fio.StopRule(**kw)


def test_rule_as_dict_and_fresh():
    r = fio.StopRule(ramp_seconds=1, windows=4, tolerance=0.01, min_seconds=6, max_seconds=30)
    assert r.as_dict() == {"ramp_seconds": 1, "windows": 4, "tolerance": 0.01, "min_seconds": 6, "max_seconds": 30,
                           "max_rse": 0.01, "passes": 3}
    feed(r, [5.0] * 10)
    f = r.fresh()
    assert f.as_dict() == r.as_dict() and f.windows == [] and f.stopped is None and r.stopped == "stable"
    assert fio.StopRule(max_rse=0.03).as_dict()["max_rse"] == 0.03
    assert fio.StopRule().as_dict() == {"ramp_seconds": 2, "windows": 3, "tolerance": 0.02, "min_seconds": 5,
                                        "max_seconds": 6, "max_rse": 0.02, "passes": 3}
    assert fio.StopRule(passes=2).fresh().passes == 2
    assert fio.StopRule(**fio.StopRule(tolerance=0.05, max_rse=0.1).as_dict()).max_rse == 0.1


def test_rule_noise_free_stops_at_min_seconds():
    r = feed(fio.StopRule(), [1000.0] * 40)
    assert r.stopped == "stable" and r.t == 5.0 and r.estimate == 1000.0
    assert r.estimates == [[3.0, 1000.0], [4.0, 1000.0], [5.0, 1000.0]]
    assert r.spread() == {"rse": 0.0, "cv": 0.0, "n": 3}
    r = feed(fio.StopRule(min_seconds=9, max_seconds=20), [1000.0] * 40)
    assert r.t == 9.0


def test_rule_alternating_noise_hits_max():
    r = feed(fio.StopRule(max_seconds=25), [1500.0, 500.0] * 40)
    assert r.stopped == "max" and r.t == 25.0
    assert len(r.windows) == 25
    sp = r.spread()
    assert sp["n"] == 23 and sp["cv"] == pytest.approx(0.5 * math.sqrt(23 / 22.0) * 1000 / r.estimate, rel=0.05)
    # a wide tolerance accepts the same noise
    assert feed(fio.StopRule(tolerance=0.2, max_seconds=25), [1500.0, 500.0] * 40).stopped == "stable"
    # the estimates alone (no bound on the standard error) "stop moving" after 18 post-ramp windows
    r = feed(fio.StopRule(max_rse=0.99, max_seconds=25), [1500.0, 500.0] * 40)
    assert r.stopped == "stable" and r.t == 20.0 and len(r.estimates) == 18


def test_rule_drift_is_never_stable():
    r = feed(fio.StopRule(), [100.0 * i for i in range(1, 60)])
    assert r.stopped == "max"
    r = feed(fio.StopRule(max_seconds=60), [100.0 * i for i in range(1, 100)])
    assert r.stopped == "max" and r.t == 60.0
    # without the bound on the standard error the cumulative mean of a drift looks settled in the end
    assert feed(fio.StopRule(max_seconds=60, max_rse=0.99), [100.0 * i for i in range(1, 100)]).stopped == "stable"


def test_rule_ramp_is_excluded():
    # ramp windows 0.5 and 1.5 (midpoints 0.25, 1.0... < 2) are junk; the estimate ignores them
    r = feed(fio.StopRule(), [0.0, 1e9, 200.0, 200.0, 200.0, 200.0])
    assert r.estimate == 200.0 and r.stopped == "stable"
    # midpoint rule: [1.5, 2.4] is ramp (mid 1.95), [2.4, 3.4] is not
    r = fio.StopRule()
    for t, rate in ((1.5, 7.0), (2.4, 9.0), (3.4, 100.0)):
        r.update((t, rate))
    assert r.estimates == [[3.4, 100.0]]
    r = fio.StopRule()
    r.update((1.6, 7.0))
    r.update((2.5, 9.0))
    assert r.estimates == [[2.5, 9.0]]


def test_rule_estimate_is_time_weighted_and_spread_by_hand():
    r = fio.StopRule(ramp_seconds=0, max_seconds=100, min_seconds=50)
    for w in ((1.0, 100.0), (3.0, 400.0), (4.0, 100.0)):
        r.update(w)
    assert r.estimate == pytest.approx((100 + 800 + 100) / 4.0)
    sp = r.spread()
    mean = 200.0
    std = math.sqrt(((100 - mean) ** 2 * 2 + (400 - mean) ** 2) / 2)
    assert sp == {"rse": round(std / math.sqrt(3) / mean, 6), "cv": round(std / mean, 6), "n": 3}
    assert fio.StopRule().spread() == {"rse": None, "cv": None, "n": 0}


def test_rule_end_and_after_decision():
    r = feed(fio.StopRule(), [10.0] * 3)
    assert r.stopped is None and r.end() == "ended" and r.stopped == "ended"
    r = feed(fio.StopRule(), [10.0] * 10)
    assert r.stopped == "stable"
    assert r.update((50.0, 1.0)) == "stable" and len(r.windows) == 5
    assert r.end() == "stable"
    # windows that do not move forward are ignored
    r = fio.StopRule()
    r.update((1.0, 5.0))
    assert r.update((1.0, 6.0)) is None and len(r.windows) == 1


def test_rule_max_rse():
    noisy = [1000.0, 1100.0, 950.0, 1050.0, 980.0, 1020.0] * 10
    loose = feed(fio.StopRule(tolerance=0.05, max_rse=0.5), noisy)
    tight = feed(fio.StopRule(tolerance=0.05, max_rse=0.01, max_seconds=60), noisy)
    assert loose.stopped == tight.stopped == "stable" and loose.t == 5.0 < tight.t
    assert tight.spread()["rse"] <= 0.01 < feed(fio.StopRule(tolerance=0.05, max_rse=0.01), noisy[:8]).spread()["rse"]


@given(st.lists(st.floats(min_value=0, max_value=1e12, allow_nan=False), min_size=1, max_size=60),
       st.floats(min_value=0.5, max_value=2.0))
def test_rule_estimate_is_the_post_ramp_mean(rates, step):
    r = fio.StopRule(max_seconds=3600, min_seconds=3600)
    feed(r, rates, step=step)
    post = [x for i, x in enumerate(rates) if (i + 0.5) * step >= 2]
    if post:
        assert r.estimate == pytest.approx(sum(post) / len(post), rel=1e-9, abs=1e-6)
    else:
        assert r.estimate is None


def test_rule_on_the_long_recordings():
    """Replays of the 25 s Debian 13 runs: the default rule's decisions on real TCG noise."""
    series = json.load(open(os.path.join(FIXTURES, D13 + "-long-series.json")))
    out = {}
    for key, rec in series.items():
        m = fio.MEASUREMENT_BY_NAME[key.rsplit("-", 1)[1]]
        tracker = fio.WindowTracker(m, big_bs=rec["big_bs"])
        rule = fio.StopRule(max_seconds=25)   # the recordings are 25 s long
        for runtime, io_bytes in rec["dumps"]:
            w = tracker.add({"jobs": [{"error": 0, m.side: {"runtime": runtime, "io_bytes": io_bytes}}]})
            if w and rule.update(w):
                break
        out[key] = (rule.stopped, round(rule.t, 1))
    assert out["long-file-rseqiops"] == ("stable", 5.9)
    assert out["long-file-wbps"] == ("stable", 8.3)
    assert out["long-nvme-rrandiops"] == ("max", 25.0)       # CV 0.27 under TCG: never within 2%
    assert out["long-nvme-wbps"] == (None, 24.9)             # the 25 s recording ends first
    assert [s for s, _t in out.values()].count("stable") == 8    # the 6 on the file, both wrandiops


# ---------------------------------------------------------------------------------------------
# argv, version, QoS rule
# ---------------------------------------------------------------------------------------------

def test_measurement_argv():
    m = fio.MEASUREMENT_BY_NAME["rrandiops"]
    assert fio.measurement_argv("/usr/bin/fio", m, "/dev/nvme1n1", 1 << 30, 27) == [
        "/usr/bin/fio", "--name=aiinfra-rrandiops", "--filename=/dev/nvme1n1", "--size=1073741824", "--direct=1",
        "--ioengine=libaio", "--thread", "--time_based", "--runtime=27", "--rw=randread", "--bs=4096",
        "--iodepth=64", "--numjobs=1", "--group_reporting", "--output-format=json", "--status-interval=1",
        "--eta=never", "--allow_mounted_write=0", "--randrepeat=0", "--norandommap"]
    a = fio.measurement_argv("fio", fio.MEASUREMENT_BY_NAME["wbps"], "/x", 1 << 30, 25.5, numjobs=4, big_bs=1 << 20,
                             status_interval=2, offset=1 << 20)
    assert "--bs=1048576" in a and "--iodepth=1" in a and "--numjobs=4" in a and "--runtime=26" in a
    assert "--status-interval=2" in a and "--offset=1048576" in a and "--size=%d" % ((1 << 30) - (1 << 20)) in a
    assert "--randrepeat=0" not in a and "--rw=write" in a
    assert "--bs=134217728" in fio.measurement_argv("fio", fio.MEASUREMENTS[0], "/x", 1 << 28, 5)


@pytest.mark.parametrize("kw,match", [
    ({"size_bytes": (1 << 28) - 1}, "at least two big blocks"),
    ({"big_bs": 1000}, "whole number of 4 KiB blocks"),
    ({"numjobs": 0}, "numjobs must be at least 1"),
    ({"max_seconds": 0}, "max_seconds must be at least 1"),
    ({"offset": 7}, "offset must be a multiple of 4096"),
    ({"offset": 4096}, "at least two big blocks"),
])
def test_measurement_argv_refusals(kw, match):
    args = dict(fio="fio", m=fio.MEASUREMENTS[0], target="/x", size_bytes=1 << 28, max_seconds=5)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        fio.measurement_argv(**args)


def test_measurements_table():
    assert [(m.name, m.rw, m.bs, m.iodepth, m.unit) for m in fio.MEASUREMENTS] == [
        ("rbps", "read", 134217728, 1, "bytes"), ("rseqiops", "read", 4096, 64, "iops"),
        ("rrandiops", "randread", 4096, 64, "iops"), ("wbps", "write", 134217728, 1, "bytes"),
        ("wseqiops", "write", 4096, 64, "iops"), ("wrandiops", "randwrite", 4096, 64, "iops")]
    assert fio.BIG_BS == 128 << 20
    assert "Measurement('rbps'" in repr(fio.MEASUREMENTS[0])
    assert fio.MEASUREMENTS[5].as_dict()["rw"] == "randwrite"


def test_qos_argv():
    a = fio.qos_argv("fio", "/dev/x", 1 << 30, "randwrite", 2700.9, 10)
    assert "--rate_iops=2700" in a and "--rw=randwrite" in a and "--runtime=10" in a and "--iodepth=64" in a
    assert "--percentile_list=1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.99" in a
    assert not any(x.startswith("--status-interval") for x in a)
    for kw in ({"rw": "read"}, {"rate_iops": 0}, {"size_bytes": 4096}):
        args = dict(fio="fio", target="/x", size_bytes=1 << 30, rw="randread", rate_iops=10, seconds=10)
        args.update(kw)
        with pytest.raises(ValueError):
            fio.qos_argv(**args)


@pytest.mark.parametrize("answer,expected", [
    ((0, "fio-3.39\n", ""), "3.39"), ((0, "fio-3.33\n", ""), "3.33"), ((0, "fio-3.36-12-gdeadbeef\n", ""), "3.36"),
])
def test_fio_version(answer, expected):
    seen = []
    assert fio.fio_version(lambda argv: seen.append(argv) or answer, fio="/usr/bin/fio") == expected
    assert seen == [["/usr/bin/fio", "--version"]]


@pytest.mark.parametrize("answer,match", [
    ((0, "fio-2.2.10\n", ""), "fio 2.2 is too old: calibration needs fio 3.x"),
    ((127, "", "fio: not found"), r"failed \(rc=127\): fio: not found"),
    ((0, "something else", ""), "cannot read fio's version"),
])
def test_fio_version_refusals(answer, match):
    with pytest.raises(ValueError, match=match):
        fio.fio_version(lambda argv: answer)


def pcts(p50, p95):
    return {"50.0": p50, "95.0": p95, "99.0": p95 * 3}


@pytest.mark.parametrize("p95,expected", [
    (100.0, 150), (100.01, 200), (133.3, 200), (10.0, 50), (0.0, 50), (3333.34, 5050), (1e7, 5000000),
])
def test_derive_qos_rounding(p95, expected):
    q = fio.derive_qos(pcts(1.0, p95), pcts(1.0, 400.0))
    assert q == {"rpct": 95.0, "rlat": expected, "wpct": 95.0, "wlat": 600, "min": 60.0, "max": 100.0}


def test_derive_qos_rotational_and_keys():
    q = fio.derive_qos({"50.000000": 4000.0, "95.000000": 9000.0}, {"50.0": 8000.0}, rotational=True)
    assert q == {"rpct": 50.0, "rlat": 6000, "wpct": 50.0, "wlat": 12000, "min": 60.0, "max": 100.0}
    with pytest.raises(ValueError, match="write latency percentiles have no p95"):
        fio.derive_qos({"95.0": 1.0}, {"50.0": 1.0})
    assert "1.5 x the p95" in fio.QOS_RULE and "90%" in fio.QOS_RULE


@pytest.mark.parametrize("tag", TAGS)
def test_qos_recordings(tag):
    r_iops, r_p = fio.qos_result(dumps_of("%s-qos-read.out" % tag)[-1], "read")
    w_iops, w_p = fio.qos_result(dumps_of("%s-qos-write.out" % tag)[-1], "write")
    expected_keys = set("%s" % p for p in fio.PERCENTILES)
    assert set(r_p) == expected_keys and set(w_p) == expected_keys
    raw = dumps_of("%s-qos-read.out" % tag)[-1]["jobs"][0]["read"]
    assert r_iops == round(raw["io_bytes"] / 4096 / (raw["runtime"] / 1000.0), 1)
    assert r_p["95.0"] == raw["clat_ns"]["percentile"]["95.000000"] / 1000.0
    q = fio.derive_qos(r_p, w_p)
    assert q["rlat"] == int(math.ceil(1.5 * r_p["95.0"] / 50.0)) * 50
    assert q["wlat"] == int(math.ceil(1.5 * w_p["95.0"] / 50.0)) * 50


def test_qos_recording_by_hand_debian13():
    r_iops, r_p = fio.qos_result(dumps_of(D13 + "-qos-read.out")[-1], "read")
    _w_iops, w_p = fio.qos_result(dumps_of(D13 + "-qos-write.out")[-1], "write")
    assert r_iops == 2999.7                      # 30000 IOs in 10.001 s at --rate_iops=3000
    assert r_p["95.0"] == 288.768 and w_p["95.0"] == 618.496
    # 1.5 x 288.768 = 433.152 -> 450; 1.5 x 618.496 = 927.744 -> 950
    assert fio.derive_qos(r_p, w_p) == {"rpct": 95.0, "rlat": 450, "wpct": 95.0, "wlat": 950, "min": 60.0,
                                        "max": 100.0}


def test_qos_result_without_io():
    with pytest.raises(ValueError, match="no completion-latency percentiles"):
        fio.qos_result({"jobs": [{"error": 0, "read": {"runtime": 0, "io_bytes": 0, "clat_ns": {"N": 0}}}]}, "read")


# ---------------------------------------------------------------------------------------------
# Running fio: a fake fio (a Python child) behind an injected popen
# ---------------------------------------------------------------------------------------------

FAKE_FIO = r'''
import json, os, signal, sys, time
cfg = json.loads(sys.argv[1])
argv = sys.argv[2:]
def note(what):
    if cfg.get("log"):
        with open(cfg["log"], "a") as f:
            f.write(json.dumps(what) + "\n")
note({"argv": argv, "pid": os.getpid(), "LANG": os.environ.get("LANG"), "LC_ALL": os.environ.get("LC_ALL")})
final = {"text": ""}
def on_signal(sig, _frame):
    note({"signal": sig})
    if sig in cfg.get("ignore", []):
        return
    os.write(1, final["text"].encode())  # not sys.stdout: the main loop may be inside its write()
    os._exit(cfg.get("signal_rc", 0))
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
if cfg.get("stderr_first"):
    sys.stderr.write(cfg["stderr_first"])
    sys.stderr.flush()
pieces = []
if cfg.get("replay"):
    text = open(cfg["replay"]).read()
    size = cfg.get("chunk", 4000)
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
for step in range(cfg.get("synthetic", 0)):
    ms = (step + 1) * cfg.get("step_ms", 1000)
    side = cfg.get("side", "read")
    other = "write" if side == "read" else "read"
    doc = {"fio version": "fio-3.39", "jobs": [{"jobname": "fake", "error": 0,
           side: {"runtime": ms, "io_bytes": int(ms * cfg.get("bytes_per_ms", 4096))},
           other: {"runtime": 0, "io_bytes": 0}}]}
    pieces.append(cfg.get("garbage", "") + json.dumps(doc, indent=2) + "\n")
for piece in pieces:
    if "{" in piece:
        final["text"] = piece
    sys.stdout.write(piece)
    sys.stdout.flush()
    time.sleep(cfg.get("delay", 0.01))
if cfg.get("stderr"):
    sys.stderr.write(cfg["stderr"])
while cfg.get("hang"):
    time.sleep(0.05)
sys.exit(cfg.get("rc", 0))
'''


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_fio.py"
    script.write_text(FAKE_FIO)
    log = tmp_path / "log.jsonl"
    procs = []

    def make(**cfg):
        cfg.setdefault("log", str(log))

        def popen(argv, **kw):
            assert isinstance(argv, list) and kw["stdout"] == subprocess.PIPE and kw["stderr"] == subprocess.PIPE
            p = subprocess.Popen([sys.executable, str(script), json.dumps(cfg)] + argv, **kw)
            procs.append(p)
            return p
        return popen

    def events():
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]
    make.procs = procs
    make.events = events
    yield make
    left = []
    for p in procs:  # nothing may be left running (killed here so that a failing test leaves nothing behind)
        if p.poll() is None:
            left.append(p.pid)
            p.kill()
            p.wait()
    assert not left, "fake fio %s still running" % left


def assert_reaped(proc):
    """Exited and waited for: no process (not even a zombie) is left under its pid."""
    assert proc.returncode is not None
    assert not os.path.exists("/proc/%d" % proc.pid)


RRAND = fio.MEASUREMENT_BY_NAME["rrandiops"]


def test_run_measurement_replay_stops_on_the_rule(fake):
    popen = fake(replay=os.path.join(FIXTURES, D13 + "-nvme-rrandiops.out"), chunk=1500, delay=0.005)
    res = fio.run_measurement("fio", RRAND, "/dev/nvme1n1", 1 << 29, fio.StopRule(tolerance=0.05), popen=popen)
    assert res["value"] == 19050 and res["stopped"] == "stable"
    assert res["name"] == "rrandiops" and res["unit"] == "iops"
    # fio's own runtime is the rule's maximum (6 s) + 2, so the module, not fio, ends a pass
    assert res["argv"] == fio.measurement_argv("fio", RRAND, "/dev/nvme1n1", 1 << 29, 8)
    assert [w[0] for w in res["windows"]] == [0.878, 1.878, 2.879, 3.885, 4.885, 5.886]
    assert res["estimates"][-1] == [5.886, round(76351 / 4.008, 1)]
    assert res["spread"]["n"] == 4 and 0 < res["spread"]["rse"] < 0.05 and res["post_seconds"] == 4.008
    ev = fake.events()
    assert ev[0]["argv"] == res["argv"] and ev[0]["LANG"] == "C" and ev[0]["LC_ALL"] == "C"
    # the replay printed all 7 objects within ~0.1 s, so fio may have ended first; either way it is reaped
    assert_reaped(fake.procs[0])


def test_run_measurement_sends_sigint_and_reads_no_further(fake):
    popen = fake(synthetic=40, delay=0.05, bytes_per_ms=4096 * 10, garbage="fio: a warning\n")
    res = fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(), popen=popen)
    assert res["stopped"] == "stable" and res["value"] == 10000 and res["windows"][-1][0] == 5.0
    assert res["fio_seconds"] == 5.0
    assert {"signal": int(signal.SIGINT)} in fake.events()
    assert_reaped(fake.procs[0])


def test_run_measurement_rule_is_not_consumed(fake):
    rule = fio.StopRule()
    for _i in range(2):
        res = fio.run_measurement("fio", RRAND, "/x", 1 << 29, rule,
                                  popen=fake(synthetic=40, delay=0.01, bytes_per_ms=4096))
        assert res["stopped"] == "stable" and res["value"] == 1000
    assert rule.windows == [] and rule.stopped is None


def test_run_measurement_escalates_to_sigterm_and_sigkill(fake, monkeypatch):
    monkeypatch.setattr(fio, "STOP_TIMEOUT", 0.3)
    res = fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(),
                              popen=fake(synthetic=8, delay=0.01, ignore=[int(signal.SIGINT)], hang=True))
    assert res["stopped"] == "stable"
    assert [e["signal"] for e in fake.events() if "signal" in e] == [signal.SIGINT, signal.SIGTERM]
    res = fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(),
                              popen=fake(synthetic=8, delay=0.01, ignore=[int(signal.SIGINT), int(signal.SIGTERM)],
                                         hang=True))
    assert res["stopped"] == "stable"
    assert fake.procs[1].returncode == -signal.SIGKILL
    assert_reaped(fake.procs[1])


def test_run_measurement_fio_ends_on_its_own(fake):
    # 4 windows of 1 s at a changing rate: never stable, fio ends, its output is used
    popen = fake(replay=os.path.join(FIXTURES, D13 + "-nvme-rbps.out"), chunk=100000, delay=0.01)
    # the recording ends at 6.002 s, before a maximum of 8
    res = fio.run_measurement("fio", fio.MEASUREMENTS[0], "/x", 1 << 29, fio.StopRule(max_seconds=8), popen=popen)
    assert res["stopped"] == "ended"
    # post-ramp windows end at 3.368 4.377 5.380 6.002: from 2352 ms / 402653184 B to 6002 ms / 31541166080 B
    assert res["value"] == round((31541166080 - 402653184) / 3.650)
    assert fake.procs[0].returncode == 0


def test_run_measurement_fio_fails(fake):
    popen = fake(rc=1, stderr="fio: pid=0, err=22/file:filesetup.c:1149, func=total_file_size, "
                              "error=Invalid argument\n")
    with pytest.raises(fio.FioError) as e:
        fio.run_measurement("fio", RRAND, "/dev/nvme1n1", 1 << 29, fio.StopRule(), popen=popen)
    assert e.value.rc == 1
    assert str(e.value).startswith("fio rrandiops on /dev/nvme1n1 failed (rc=1): fio: pid=0, err=22")
    assert e.value.stderr == e.value.stderr_tail and "Invalid argument" in e.value.stderr
    assert e.value.argv[1] == "--name=aiinfra-rrandiops"
    assert e.value.as_dict()["rc"] == 1


def test_run_measurement_fio_reports_a_job_error(fake):
    name = D13 + "-err-notblock.out"
    popen = fake(replay=os.path.join(FIXTURES, name), stderr_first=MANIFEST[name]["stderr"], hang=True)
    with pytest.raises(fio.FioError, match=r"fio rrandiops on /dev/x failed .*error 22 \(Invalid argument\).*"
                                           r"you need to specify size="):
        fio.run_measurement("fio", RRAND, "/dev/x", 1 << 29, fio.StopRule(), popen=popen)
    assert_reaped(fake.procs[0])


def test_run_measurement_no_output(fake):
    with pytest.raises(fio.FioError, match=r"rc=0\): fio ended after 0.0 s of I/O without a measurement past the "
                                           r"2 s ramp"):
        fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(), popen=fake())


def test_run_measurement_hung_fio_is_killed(fake, monkeypatch):
    monkeypatch.setattr(fio, "STARTUP_GRACE", 0.5)
    t0 = time.monotonic()
    with pytest.raises(fio.FioError, match="no result after .* fio was killed"):
        rule = fio.StopRule(min_seconds=1, max_seconds=1.5, ramp_seconds=0)
        fio.run_measurement("fio", RRAND, "/x", 1 << 29, rule,
                            popen=fake(hang=True, ignore=[int(signal.SIGINT), int(signal.SIGTERM)]))
    assert time.monotonic() - t0 < 15
    assert_reaped(fake.procs[0])


def test_exception_from_the_callers_clock_kills_fio(fake):
    calls = []

    def clock():
        calls.append(1)
        if len(calls) > 4:
            raise KeyboardInterrupt()
        return time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(),
                            popen=fake(synthetic=100, delay=0.2, ignore=[int(signal.SIGINT)], hang=True), clock=clock)
    assert fake.procs[0].returncode == -signal.SIGKILL
    assert_reaped(fake.procs[0])


class Interrupted(Exception):
    pass


def test_exception_from_a_signal_handler_kills_fio(fake):
    def handler(_sig, _frame):
        raise Interrupted()
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Interrupted):
            fio.run_measurement("fio", RRAND, "/x", 1 << 29, fio.StopRule(),
                                popen=fake(synthetic=1000, delay=0.3, bytes_per_ms=1))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert_reaped(fake.procs[0])


def qos_popen(fake_factory, tag=D13):
    """One fake per run: the read recording for --rw=randread, the write one for --rw=randwrite."""
    def popen(argv, **kw):
        side = "read" if "--rw=randread" in argv else "write"
        return fake_factory(replay=os.path.join(FIXTURES, "%s-qos-%s.out" % (tag, side)), chunk=2000,
                            delay=0.001)(argv, **kw)
    return popen


def test_run_qos(fake):
    res = fio.run_qos("fio", "/dev/nvme1n1", 1 << 29, 3334.0, 20000, seconds=10, popen=qos_popen(fake))
    assert res["read"]["iops_limit"] == 3000 and res["write"]["iops_limit"] == 18000
    assert "--rate_iops=3000" in res["read"]["argv"] and "--rate_iops=18000" in res["write"]["argv"]
    assert res["read"]["iops"] == 2999.7 and res["read"]["percentiles_us"]["95.0"] == 288.768
    assert res["qos"] == {"rpct": 95.0, "rlat": 450, "wpct": 95.0, "wlat": 950, "min": 60.0, "max": 100.0}
    assert res["rule"] == fio.QOS_RULE
    assert [e["argv"][1] for e in fake.events()] == ["--name=aiinfra-qos-read", "--name=aiinfra-qos-write"]
    rot = fio.run_qos("fio", "/dev/sda", 1 << 29, 100, 100, rotational=True, popen=qos_popen(fake))
    assert rot["qos"]["rpct"] == 50.0 and rot["qos"]["rlat"] == int(math.ceil(1.5 * 121.344 / 50)) * 50


def test_run_qos_failures(fake, monkeypatch):
    with pytest.raises(ValueError, match="randread IOPS must be a positive number"):
        fio.run_qos("fio", "/x", 1 << 29, 0, 100, popen=fake())
    with pytest.raises(fio.FioError, match=r"fio qos-read on /x failed \(rc=2\): boom"):
        fio.run_qos("fio", "/x", 1 << 29, 100, 100, popen=fake(rc=2, stderr="boom\n"))
    with pytest.raises(fio.FioError, match="fio printed no JSON status"):
        fio.run_qos("fio", "/x", 1 << 29, 100, 100, popen=fake(stderr="hmm\n"))
    with pytest.raises(fio.FioError, match="no completion-latency percentiles"):
        fio.run_qos("fio", "/x", 1 << 29, 100, 100, popen=fake(synthetic=1))
    monkeypatch.setattr(fio, "STARTUP_GRACE", 0.3)
    with pytest.raises(fio.FioError, match="no result after"):
        fio.run_qos("fio", "/x", 1 << 29, 100, 100, seconds=0.2, popen=fake(hang=True))


def _pass(value, post, windows, fio_seconds, stopped="max", n=None):
    return {"name": "wbps", "unit": "bytes", "value": value, "stopped": stopped, "seconds": fio_seconds + 1.5,
            "fio_seconds": fio_seconds, "post_seconds": post, "windows": windows,
            "estimates": [[t, value] for t, _r in windows[-(n or len(windows)):]],
            "spread": {"rse": 0.01, "cv": 0.02, "n": n or len(windows)}, "argv": ["fio", "--name=aiinfra-wbps"]}


def test_combine_passes_weights_by_post_ramp_time():
    a = _pass(1000, 8.0, [[1.0, 900.0], [2.0, 950.0], [3.0, 1000.0], [10.0, 1000.0]], 10.0, n=2)
    b = _pass(700, 2.0, [[1.0, 600.0], [3.0, 700.0], [4.0, 700.0]], 4.0, stopped="stable", n=2)
    c = fio.combine_passes([a, b])
    assert c["value"] == round((1000 * 8 + 700 * 2) / 10.0) == 940
    assert c["stopped"] == "max/stable" and c["seconds"] == 11.5 + 5.5 and c["fio_seconds"] == 14.0
    assert c["post_seconds"] == 10.0 and c["argv"] == a["argv"] and c["name"] == "wbps" and c["unit"] == "bytes"
    # the second pass's windows continue the time axis where the first ended
    assert c["windows"] == [[1.0, 900.0], [2.0, 950.0], [3.0, 1000.0], [10.0, 1000.0], [11.0, 600.0],
                            [13.0, 700.0], [14.0, 700.0]]
    assert c["estimates"][-1] == [14.0, 700]
    assert [p["value"] for p in c["passes"]] == [1000, 700] and c["passes"][1]["stopped"] == "stable"
    # pooled post-ramp windows 1000 1000 700 700: std 173.2, rse = 173.2 / 2 / 850 = 0.1019;
    # between passes 1000 / 700: std 212.1, rse = 212.1 / sqrt(2) / 850 = 0.1765 - the larger one counts
    s = c["spread"]
    assert s["n"] == 4 and s["passes"] == 2
    assert s["cv"] == pytest.approx(173.205 / 850, abs=1e-4)
    assert s["between_passes"] == pytest.approx(0.176471, abs=1e-5) and s["rse"] == s["between_passes"]


def test_combine_passes_one_pass_and_equal_passes():
    a = _pass(500, 3.0, [[1.0, 400.0], [3.0, 500.0], [4.0, 500.0], [5.0, 500.0]], 5.0, stopped="stable", n=3)
    one = fio.combine_passes([a])
    assert one["value"] == 500 and one["stopped"] == "stable" and one["spread"]["between_passes"] is None
    assert one["spread"]["rse"] == 0.0 and one["windows"] == a["windows"]
    two = fio.combine_passes([a, dict(a)])
    assert two["value"] == 500 and two["spread"]["between_passes"] == 0.0 and two["spread"]["n"] == 6
    # passes without post-ramp time (fio ended early) still average, unweighted
    z = fio.combine_passes([_pass(100, 0.0, [], 0.0), _pass(300, 0.0, [], 0.0)])
    assert z["value"] == 200 and z["spread"]["cv"] is None and z["spread"]["between_passes"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one pass"):
        fio.combine_passes([])


@given(st.lists(st.tuples(st.floats(1, 1e10), st.floats(0.5, 30)), min_size=1, max_size=6))
def test_combine_passes_value_lies_between_the_passes(passes):
    runs = [_pass(int(round(v)), w, [[1.0, v], [2.0, v]], 2.0, n=1) for v, w in passes]
    c = fio.combine_passes(runs)
    values = [r["value"] for r in runs]
    assert min(values) - 1 <= c["value"] <= max(values) + 1
    assert (c["spread"]["rse"] is None) == (len(runs) == 1) and len(c["passes"]) == len(runs) and len(c["windows"]) == 2 * len(runs)
