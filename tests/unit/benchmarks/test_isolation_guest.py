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
sys.path.insert(0, HERE)
FIO = os.path.join(HERE, "..", "plugins", "module_utils", "fixtures", "fio")

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

bench = load("isolation", "bench")
guest = load("isolation", "guest")


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
    # the SQPOLL shuffle is randread64's reads through io_uring with a polling thread, nothing else
    uring = guest.PROFILES["uring_sqpoll"]
    assert uring[0] == guest.PROFILES["randread64"][0]
    assert set(uring[1]) - set(guest.PROFILES["randread64"][1]) == {"--ioengine=io_uring", "--sqthread_poll=1"}
    assert set(guest.PROFILES) == set(bench.READERS + bench.ANTAGONISTS + bench.EXPERIMENTS)
    assert guest.PROFILES["randread64_idle"][1] == guest.PROFILES["randread64"][1] + ["--prioclass=3"]


def test_solo_cells_only_under_the_first_configuration():
    first = bench.cells_for("none", True, ["randread4k"], ["seqwrite1m", "buffered"])
    assert first == [{"reader": "randread4k", "antagonist": None},
                     {"reader": None, "antagonist": "seqwrite1m"}, {"reader": None, "antagonist": "buffered"},
                     {"reader": "randread4k", "antagonist": "seqwrite1m"}, {"reader": "randread4k", "antagonist": "buffered"}]
    assert bench.cells_for("roles", False, ["randread4k"], ["seqwrite1m"]) == [
        {"reader": "randread4k", "antagonist": "seqwrite1m"}]


def _smoke_results(qos="259:1 enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=10000 min=10.00 max=100.00"):
    good = {"iops": 100.0, "clat_ns": {"p99": 1000}}
    return {"meta": {"disk_capacity": {"iops": 3000, "bps": 150000000}},
            "runs": [{"reader": "randread4k", "antagonist": "seqwrite1m", "reader_stats": good, "antagonist_stats": good,
                      "pressure": {"inference.slice": {"some": 1.0}}, "vrate": {"mean": 90.0}},
                     {"reader": None, "antagonist": "seqwrite1m", "antagonist_stats": dict(good, bw_bytes=160e6)}],
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


def test_smoke_check_wants_the_device_bound_disk_and_its_throttle_in_force():
    free = _smoke_results()
    free["runs"][1]["antagonist_stats"]["bw_bytes"] = 1057e6      # what TCG alone gave seqwrite1m
    assert bench.smoke_check(free) == [
        "seqwrite1m alone moved 1057 MB/s on a disk of 150 MB/s: the throttle is not in force"]
    free["meta"]["disk_capacity"] = None
    assert bench.smoke_check(free) == ["the disk was not device-bound (no capacity recorded for lab-nvme-b)"]


def test_io_stat_and_threads(monkeypatch):
    files = {"/sys/fs/cgroup/training.slice/io.stat":
             "259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
             "259:1 rbytes=8192 wbytes=1048576 rios=2 wios=1 dbytes=0 dios=0 cost.vrate=1\n",
             "/sys/fs/cgroup/training.slice/u.service/cgroup.threads": "10\n11\n12\n",
             "/proc/10/comm": "fio\n", "/proc/11/comm": "iou-sqp-10\n", "/proc/12/comm": "iou-wrk-10\n"}
    monkeypatch.setattr(guest, "read", files.get)
    assert guest.io_stat("training.slice", "259:1") == {"rbytes": 8192, "wbytes": 1048576, "rios": 2, "wios": 1}
    assert guest.io_stat("inference.slice", "259:1") == {}
    assert guest.threads("u.service", "training.slice") == {"fio": 1, "iou-sqp": 1, "iou-wrk": 1}
    assert guest.threads("gone.service", "training.slice") is None


def test_calibrated_model_against_the_capacity():
    got = bench.versus_capacity({"rbps": 134000000, "wbps": 143000000, "rseqiops": 2998, "rrandiops": 2987,
                                 "wseqiops": 3000, "wrandiops": 2977}, {"iops": 3000, "bps": 150000000})
    assert got["rbps"] == {"model": 134000000, "capacity": 150000000, "error": -0.1067}
    assert got["wrandiops"]["error"] == -0.0077
    assert bench.versus_capacity(None, {"iops": 1, "bps": 1}) is None
    assert bench.versus_capacity({"rbps": 1}, None) is None


def test_sweep_points_start_from_the_roles_default_qos():
    points = bench.sweep_points()
    label, default = points[0]
    assert label == "default" and default == bench.role_qos()
    assert len(points) == len(bench.SWEEP) + 1
    assert dict(points[1:])["rlat=500"] == dict(default, rlat=500)
    assert bench.qos_line(default).startswith("enable=1 ctrl=user rpct=")


def test_settings_name_the_scheduler(monkeypatch):
    files = {"/sys/dev/block/259:1/queue/scheduler": "[none] mq-deadline\n",
             "/sys/fs/cgroup/io.cost.qos": "259:1 enable=1 ctrl=user rpct=95.00\n"}
    monkeypatch.setattr(guest, "read", files.get)
    got = guest.settings("259:1")
    assert got["scheduler"] == "[none] mq-deadline"
    assert got["io.cost.qos"].startswith("259:1 enable=1")
    assert guest.settings("8:0")["scheduler"] is None


# ---------------------------------------------------------------------------------------------- the probe

def bpftrace_json(counts):
    """bpftrace -f json's output of io_latency's program: the attach line, then the map at exit."""
    return "\n".join([json.dumps({"type": "attached_probes", "data": {"probes": 5}}),
                      json.dumps({"type": "map", "data": {"@lat": dict(("%d,%d,%d" % k, v) for k, v in counts.items())}}),
                      json.dumps({"type": "map", "data": {"@warmed": 1}})]) + "\n"


DISK = (259 << 20) | 1     # the benchmark's disk, 259:1
OTHER_DISK = (254 << 20)   # the guest's root disk


def test_probe_spec_is_io_latencys_program_over_ramp_runtime_and_the_late_start():
    spec = bench.probe_spec(15, 2)
    assert spec["window"] == 15 + 2 + bench.PROBE_MARGIN
    assert bench.probe_spec(3, 1, bench.SMOKE_PROBE_MARGIN)["window"] == 3 + 1 + bench.SMOKE_PROBE_MARGIN
    assert spec["program"] == bench.latency.program(spec["window"], warmup=2)


def test_probe_figures_sum_each_slice_on_the_benchmarks_disk():
    lat = bench.latency
    # inference: 90 reads of 200 us in the reader's unit, 10 of 3000 us in the slice itself (no unit)
    counts = {(501, DISK, lat.bucket_of(200)): 90, (500, DISK, lat.bucket_of(3000)): 10,
              (601, DISK, lat.bucket_of(8000)): 40,        # training's unit
              (1, DISK, lat.bucket_of(100)): 3,            # the root: charged outside both slices
              (501, OTHER_DISK, lat.bucket_of(50)): 1000}  # another disk: not the benchmark's
    raw = {"output": bpftrace_json(counts), "majmin": "259:1", "attach_s": 4.2, "jobs_started_s": 0.6,
           "cgroups": {"500": "inference.slice", "501": "inference.slice", "600": "training.slice",
                       "601": "training.slice"}}
    got = bench.probe_figures(raw, "bpftrace v0.17.0")
    inf, train = got["inference.slice"], got["training.slice"]
    assert inf["count"] == 100 and train["count"] == 40
    assert got["other"] == 3 and got["lost"] == 0 and got["bpftrace"] == "bpftrace v0.17.0"
    assert (got["attach_s"], got["jobs_started_s"]) == (4.2, 0.6)
    low, high = lat.bucket_range(lat.bucket_of(200))
    assert low <= inf["p50_us"] <= high
    low, high = lat.bucket_range(lat.bucket_of(3000))
    assert low <= inf["p99_us"] <= high and low <= inf["p999_us"] <= high
    assert sum(b["count"] for b in inf["histogram"]) == 100
    # nothing in a slice: a zero count and no percentiles, not a crash
    empty = bench.probe_figures(dict(raw, output=bpftrace_json({})), None)["inference.slice"]
    assert empty == {"count": 0, "p50_us": None, "p99_us": None, "p999_us": None, "histogram": []}


def test_cgroup_ids_name_the_slice_of_every_cgroup_below_it(tmp_path):
    for d in ("inference.slice/aiinfra-bench-reader-0.service", "training.slice", "system.slice/ssh.service"):
        (tmp_path / d).mkdir(parents=True)
    got = guest.cgroup_ids({}, str(tmp_path))

    def ino(d):
        return str(os.stat(str(tmp_path / d)).st_ino)
    assert got == {ino("inference.slice"): "inference.slice",
                   ino("inference.slice/aiinfra-bench-reader-0.service"): "inference.slice",
                   ino("training.slice"): "training.slice"}
    # a unit that ended keeps its name: ids accumulate
    (tmp_path / "inference.slice" / "aiinfra-bench-reader-0.service").rmdir()
    assert guest.cgroup_ids(dict(got), str(tmp_path)) == got


def _probe_results(count, ios=3000, started=0.6):
    results = _smoke_results()
    results["meta"].update(probe=True, seconds=3, ramp=1)
    results["runs"][0]["reader_stats"] = dict(results["runs"][0]["reader_stats"], ios=ios)
    for r in results["runs"]:
        r["probe"] = {"inference.slice": {"count": count if r["reader"] else 0},
                      "training.slice": {"count": 500}, "jobs_started_s": started}
    return results


def test_smoke_check_wants_the_probe_to_count_the_readers_io():
    tol = bench.PROBE_TOLERANCE
    # 3000 reads in fio's 3 s: the probe counts those and at most the 1 s ramp's 1000 more
    for fine in (3000, 3600, 4000, int(3000 * (1 - tol)) + 1, int(4000 * (1 + tol)) - 1):
        assert bench.smoke_check(_probe_results(fine)) == [], fine
    assert bench.smoke_check(_probe_results(0)) == [
        "the probe saw no I/O in inference.slice while randread4k ran"]
    for far in (int(3000 * (1 - tol)) - 1, int(4000 * (1 + tol)) + 2, 9000):
        got = bench.smoke_check(_probe_results(far))
        assert got == ["the probe counted %d I/Os in inference.slice, fio 3000 in its 3 s: outside 2550..4600 "
                       "(fio's count and its 1 s ramp, 15%% either way)" % far], far
    late = bench.smoke_check(_probe_results(3600, started=bench.PROBE_MARGIN + 0.5))
    assert len(late) == 2 and all("ended before fio's" in p for p in late)
    # The run's own margin (the smoke run's is longer) is the one judged, and the message names it
    wide = _probe_results(3600, started=bench.PROBE_MARGIN + 0.5)
    wide["meta"]["probe_margin"] = bench.SMOKE_PROBE_MARGIN
    assert bench.smoke_check(wide) == []
    wide = _probe_results(3600, started=bench.SMOKE_PROBE_MARGIN + 0.5)
    wide["meta"]["probe_margin"] = bench.SMOKE_PROBE_MARGIN
    assert "(%d s margin)" % bench.SMOKE_PROBE_MARGIN in bench.smoke_check(wide)[0]
    missing = _probe_results(3600)
    del missing["runs"][1]["probe"]
    assert bench.smoke_check(missing) == ["None vs seqwrite1m: no probe figures"]
    # without --probe nothing is asked of it
    missing["meta"]["probe"] = False
    assert bench.smoke_check(missing) == []


def fake_bpftrace(tmp_path, monkeypatch, script):
    """A stand-in bpftrace on PATH (the real one needs root and a kernel), the cell's files under tmp_path."""
    path = tmp_path / "bin" / "bpftrace"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    monkeypatch.setenv("PATH", str(path.parent) + os.pathsep + os.environ["PATH"])
    monkeypatch.setattr(guest, "RUN", str(tmp_path))
    monkeypatch.setattr(guest, "ENV", dict(os.environ))


ATTACHED = """echo '{"type": "attached_probes", "data": {"probes": 5}}'\n"""


def test_probe_waits_for_the_attach_then_collects_what_the_program_printed(tmp_path, monkeypatch):
    fake_bpftrace(tmp_path, monkeypatch, "sleep 0.5\n" + ATTACHED + "sleep 0.5\necho '{\"type\": \"map\"}'\n")
    probe = guest.Probe("program", 0)
    try:
        assert probe.proc.args[1:4] == ["-f", "json", "-e"] and probe.proc.args[4] == "program"
        assert probe.wait_attached() >= 0.4
        assert probe.collect(1).splitlines() == [ATTACHED.split("'")[1], '{"type": "map"}']
    finally:
        probe.close()
    assert probe.proc.returncode == 0


def test_probe_that_never_attaches_fails_the_cell_with_its_reason(tmp_path, monkeypatch):
    fake_bpftrace(tmp_path, monkeypatch, "echo 'ERROR: no BTF' >&2\nexit 1\n")
    probe = guest.Probe("program", 0)
    with pytest.raises(SystemExit, match=r"bpftrace ended \(rc 1\) before attaching: ERROR: no BTF"):
        probe.wait_attached()
    probe.close()


def test_a_probe_that_hangs_is_bounded_and_killed(tmp_path, monkeypatch):
    fake_bpftrace(tmp_path, monkeypatch, "exec sleep 60\n")
    monkeypatch.setattr(guest, "ATTACH_TIMEOUT", 0.5)
    probe = guest.Probe("program", 0)
    with pytest.raises(SystemExit, match="did not attach within"):
        probe.wait_attached()
    probe.close()
    assert probe.proc.returncode == -9


def test_a_probe_that_overruns_its_window_fails_and_is_killed(tmp_path, monkeypatch):
    fake_bpftrace(tmp_path, monkeypatch, ATTACHED + "exec sleep 60\n")
    monkeypatch.setattr(guest, "PROBE_GRACE", 0.5)
    probe = guest.Probe("program", 0)
    probe.wait_attached()
    with pytest.raises(SystemExit, match="did not end 0 s after its 0 s window"):
        probe.collect(0)
    probe.close()
    assert probe.proc.returncode == -9


def test_a_cell_ends_its_probe_when_it_fails(tmp_path, monkeypatch):
    fake_bpftrace(tmp_path, monkeypatch, ATTACHED + "exec sleep 60\n")
    seen = []

    def broken(spec, c, index, majmin, probe):
        seen.append(probe)
        raise SystemExit("systemd-run failed")
    monkeypatch.setattr(guest, "_cell", broken)
    with pytest.raises(SystemExit, match="systemd-run failed"):
        guest.cell({"probe": {"program": "p", "window": 5}}, {"reader": "randread4k"}, 0, "259:1")
    assert seen[0].proc.returncode == -9
    # without a probe, none is started
    monkeypatch.setattr(guest, "_cell", lambda spec, c, index, majmin, probe: probe)
    assert guest.cell({}, {}, 0, "259:1") is None
