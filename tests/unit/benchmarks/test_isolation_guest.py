# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/isolation/guest.py and bench.py logic that runs without a guest: fio JSON figures from
real recordings, io.pressure and root io.stat parsing, the cell list per configuration and the smoke
verdict."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "benchmarks", "isolation"))
FIO = os.path.join(HERE, "..", "plugins", "module_utils", "fixtures", "fio")

import bench  # noqa: E402  pylint: disable=wrong-import-position
import guest  # noqa: E402  pylint: disable=wrong-import-position


@pytest.mark.parametrize("name,direction", [("debian12-fio-3.33-qos-read.out", "read"),
                                            ("debian13-fio-3.39-qos-write.out", "write")])
def test_stats_from_recorded_fio(name, direction):
    path = os.path.join(FIO, name)
    with open(path) as f:
        job = json.load(f)["jobs"][0][direction]
    got = guest.stats(path, "reader")
    assert got["dir"] == direction
    assert got["iops"] == job["iops"] and got["bw_bytes"] == job["bw_bytes"]
    pct = job["clat_ns"]["percentile"]
    assert got["clat_ns"] == {"p50": pct["50.000000"], "p99": pct["99.000000"], "p99.9": pct["99.900000"]}
    assert got["percentiles"]["99.990000"] == pct["99.990000"]


def test_stats_skips_notes_before_the_json(tmp_path):
    with open(os.path.join(FIO, "debian12-fio-3.33-qos-read.out")) as f:
        text = f.read()
    p = tmp_path / "out.json"
    p.write_text("fio: some note\n" + text)
    assert guest.stats(str(p), "reader")["dir"] == "read"


def test_stats_of_a_missing_or_broken_file_is_none(tmp_path):
    assert guest.stats(str(tmp_path / "nothing.json"), "reader") is None
    p = tmp_path / "broken.json"
    p.write_text("fio: error\n")
    assert guest.stats(str(p), "reader") is None


def test_pressure_and_vrate_parsing(monkeypatch):
    files = {
        "/sys/fs/cgroup/inference.slice/io.pressure":
            "some avg10=1.00 avg60=0.50 avg300=0.10 total=1234567\nfull avg10=0.50 avg60=0.20 avg300=0.05 total=7654\n",
        "/sys/fs/cgroup/io.stat":
            "259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.vrate=87.35 cost.usage=10\n"
            "259:1 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n",
    }
    monkeypatch.setattr(guest, "read", files.get)
    assert guest.pressure_total("inference.slice") == {"some": 1234567, "full": 7654}
    assert guest.pressure_total("training.slice") is None
    assert guest.vrate("259:0") == 87.35
    assert guest.vrate("259:1") is None      # iocost off on that disk
    assert guest.vrate("8:0") is None


def test_profiles_are_the_issue_shapes():
    assert "--iodepth=1" in guest.PROFILES["randread4k"][1] and "--bs=4k" in guest.PROFILES["randread4k"][1]
    assert "--bs=128k" in guest.PROFILES["seqread128k"][1] and "--rw=read" in guest.PROFILES["seqread128k"][1]
    assert "--iodepth=32" in guest.PROFILES["seqwrite1m"][1] and "--direct=1" in guest.PROFILES["seqwrite1m"][1]
    assert "--iodepth=64" in guest.PROFILES["randread64"][1]
    assert "--direct=0" in guest.PROFILES["buffered"][1]
    assert set(guest.PROFILES) == set(bench.READERS + bench.ANTAGONISTS)


def test_solo_cells_only_under_the_first_configuration():
    first = bench.cells_for("none", True, ["randread4k"], ["seqwrite1m", "buffered"])
    assert first == [{"reader": "randread4k", "antagonist": None},
                     {"reader": None, "antagonist": "seqwrite1m"}, {"reader": None, "antagonist": "buffered"},
                     {"reader": "randread4k", "antagonist": "seqwrite1m"}, {"reader": "randread4k", "antagonist": "buffered"}]
    assert bench.cells_for("roles", False, ["randread4k"], ["seqwrite1m"]) == [
        {"reader": "randread4k", "antagonist": "seqwrite1m"}]


def _smoke_results(qos="259:1 enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=10000 min=10.00 max=100.00"):
    good = {"iops": 100.0, "clat_ns": {"p99": 1000}}
    return {"runs": [{"reader": "randread4k", "antagonist": "seqwrite1m", "reader_stats": good, "antagonist_stats": good,
                      "pressure": {"inference.slice": {"some": 1.0}}, "vrate": {"mean": 90.0}}],
            "settings": {"roles": {"io.cost.qos": qos, "inference.slice": {"io.weight": "default 1000"},
                                   "training.slice": {"io.weight": "default 100"}}}}


def test_smoke_check_passes_on_a_good_run_and_names_each_problem():
    assert bench.smoke_check(_smoke_results()) == []
    bad = _smoke_results(qos="259:1 enable=0 ctrl=auto")
    bad["runs"][0]["antagonist_stats"] = None
    bad["runs"][0]["antagonist_error"] = "fio wrote no result"
    bad["runs"][0]["vrate"] = None
    bad["settings"]["roles"]["training.slice"]["io.weight"] = "default 100\n259:1 50"
    problems = bench.smoke_check(bad)
    assert any("antagonist seqwrite1m: no fio figures (fio wrote no result)" in p for p in problems)
    assert any("cost.vrate" in p for p in problems)
    assert any("did not enable iocost" in p for p in problems)
    assert len(problems) == 3
    bad["settings"]["roles"]["inference.slice"]["io.weight"] = "default 100"
    assert any("inference.slice io.weight" in p for p in bench.smoke_check(bad))
