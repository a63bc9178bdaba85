# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""io_latency's logic: the in-kernel bucket arithmetic, bpftrace's NDJSON, percentiles, attribution
to cgroups (by directory inode, as cgroup v2 ids are) and whole disks, the host checks, and the probe's
process handling with a stand-in bpftrace (a script). Attribution on real kernels is proven in the lab."""

import json
import os
import stat
import sys
import time

import pytest
from hypothesis import given, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_latency as lat
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

from sim.host import FakeHost
from sim.runner import FakeRunner


@given(st.integers(min_value=0, max_value=(16 << 26) - 1))
def test_bucket_holds_its_latency_and_is_narrow(us):
    low, high = lat.bucket_range(lat.bucket_of(us))
    assert low <= us < high
    assert high - low == 1 if us < 16 else (high - low) * 8 <= low


@given(st.integers(min_value=0, max_value=1 << 28), st.integers(min_value=0, max_value=1 << 28))
def test_buckets_keep_order(a, b):
    if a <= b:
        assert lat.bucket_of(a) <= lat.bucket_of(b)


def test_program_ends_itself_after_the_window():
    text = lat.program(17)
    assert "interval:s:17" in text and "exit();" in text
    assert "bi_blkg->blkcg->css.cgroup->kn->id" in text      # charged cgroup, not the current task's
    assert "bpf_get_current_cgroup_id" not in text and "cgroup" not in text.split("kprobe:bio_endio")[0]


def test_a_warmup_forgets_its_seconds_once():
    assert "clear(@lat)" not in lat.program(17)
    text = lat.program(17, warmup=2)
    warm = text.split("interval:s:2")[1].split("}")[0]
    assert "/@warmed == 0/" in warm and "clear(@lat);" in warm and "@warmed = 1;" in warm
    assert "interval:s:17" in text
    for bad in (-1, 17, 30):
        with pytest.raises(ValueError, match="below the window"):
            lat.program(17, warmup=bad)


def ndjson(counts, lost=0, key=lambda k: "%d,%d,%d" % k):
    lines = [json.dumps({"type": "attached_probes", "data": {"probes": 3}})]
    if lost:
        lines.append(json.dumps({"type": "lost_events", "data": {"events": lost}}))
    lines.append(json.dumps({"type": "map", "data": {"@lat": dict((key(k), v) for k, v in counts.items())}}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("key", [lambda k: "%d,%d,%d" % k, lambda k: "[%d, %d, %d]" % k])
def test_parse_reads_the_map_in_either_key_spelling(key):
    counts = {(4321, (259 << 20) | 0, 40): 7, (1, (259 << 20) | 3, 3): 2}
    assert lat.parse(ndjson(counts, lost=5, key=key)) == (counts, 5)


def test_parse_refuses_a_key_that_is_not_three_numbers():
    with pytest.raises(ValueError, match="not \\(cgroup id, dev, bucket\\)"):
        lat.parse(json.dumps({"type": "map", "data": {"@lat": {"1,2": 3}}}))


def test_percentiles_interpolate_within_the_bucket():
    assert lat.percentile({5: 10}, 50) == 5.5       # exact bucket [5, 6)
    idx = lat.bucket_of(100)                        # [96, 104)
    assert lat.bucket_range(idx) == (96, 104)
    assert lat.percentile({idx: 4}, 50) == 100.0
    assert lat.percentile({3: 90, idx: 10}, 99) == 103.2
    assert lat.percentile({}, 50) is None


def test_log2_histogram_sums_the_fine_buckets():
    buckets = {lat.bucket_of(3): 1, lat.bucket_of(100): 2, lat.bucket_of(120): 3, lat.bucket_of(200): 4}
    assert lat.log2_histogram(buckets) == [{"le_us": 4, "count": 1}, {"le_us": 128, "count": 5},
                                           {"le_us": 256, "count": 4}]


@pytest.fixture
def host(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, majmin="259:0", partitions=1)
    h.add_nvme(ctrl=1, serial="cafe", majmin="259:2")
    for d in ("inference.slice/vllm.service", "training.slice"):
        h.mkdir("/sys/fs/cgroup/" + d)
    return h


def cgid(h, path):
    return os.stat(h.path("/sys/fs/cgroup/" + path)).st_ino


def test_summary_names_slices_and_whole_disks(host):
    fs = KernelFS(host.root)
    groups = lat.Cgroups(host.path("/sys/fs/cgroup"))
    part = host.read("/sys/class/block/nvme0n1p1/dev").strip()
    major, minor = (int(x) for x in part.split(":"))
    counts = {(cgid(host, "inference.slice/vllm.service"), (major << 20) | minor, lat.bucket_of(90)): 30,
              (cgid(host, "inference.slice"), (259 << 20) | 0, lat.bucket_of(110)): 10,
              (cgid(host, "training.slice"), (259 << 20) | 0, lat.bucket_of(5000)): 60,
              (cgid(host, "training.slice"), (259 << 20) | 2, lat.bucket_of(7)): 1,
              (0, (259 << 20) | 2, lat.bucket_of(7)): 1}
    rows = lat.summarize(counts, fs, groups, depth=1)
    by = dict(((r["cgroup"], r["disk"]), r) for r in rows)
    assert sorted(by) == [("(no cgroup)", "nvme1n1"), ("/inference.slice", "nvme0n1"),
                          ("/training.slice", "nvme0n1"), ("/training.slice", "nvme1n1")]
    inf = by[("/inference.slice", "nvme0n1")]
    assert (inf["count"], inf["share"], inf["majmin"]) == (40, 0.4, "259:0")   # the partition's I/O counts for its disk
    assert by[("/training.slice", "nvme0n1")]["p50_us"] > 4000 and by[("/training.slice", "nvme1n1")]["share"] == 0.5
    exact = lat.summarize(counts, fs, groups, depth=0, only={"/inference.slice/vllm.service"})
    assert [(r["cgroup"], r["count"]) for r in exact] == [("/inference.slice/vllm.service", 30)]
    only_b = lat.summarize(counts, fs, groups, devices={"259:2"})
    assert sorted(r["disk"] for r in only_b) == ["nvme1n1", "nvme1n1"]


def test_a_removed_cgroup_is_named_by_its_id(host):
    groups = lat.Cgroups(host.path("/sys/fs/cgroup"))
    assert groups.name(987654321, 1) == "cgroup id 987654321 (removed)"


def test_host_checks_name_each_fix():
    problems = lat.check_host(lambda name: None, geteuid=lambda: 1000, exists=lambda p: False)
    assert [p.split(":")[0].split(" (")[0] for p in problems] == [
        "io_latency needs root", "bpftrace is not installed", "the kernel has no BTF",
        "/sys/fs/cgroup is not a cgroup v2 hierarchy"]
    assert lat.check_host(lambda name: "/usr/bin/" + name, geteuid=lambda: 0, exists=lambda p: True) == []


def fake_bpftrace(tmp_path, body):
    path = tmp_path / "bpftrace"
    path.write_text("#!%s\nimport json, sys, time\n%s\n" % (sys.executable, body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_sample_returns_the_probes_output(tmp_path):
    counts = {(1, 259 << 20, 20): 3}
    tool = fake_bpftrace(tmp_path, "assert sys.argv[1:3] == ['-f', 'json'] and 'interval:s:2' in sys.argv[4]\n"
                                   "sys.stdout.write(%r)" % ndjson(counts))
    out, _err, elapsed = lat.sample(tool, 2)
    assert lat.parse(out) == (counts, 0) and elapsed < 30


def test_a_failing_probe_is_reported_with_its_words(tmp_path):
    tool = fake_bpftrace(tmp_path, "sys.stderr.write('ERROR: Could not resolve symbol: submit_bio_noacct\\n'); sys.exit(1)")
    with pytest.raises(lat.LatencyError, match="bpftrace failed \\(rc=1\\): ERROR: Could not resolve symbol"):
        lat.sample(tool, 1)


def test_an_overrunning_probe_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(lat, "STARTUP_GRACE", 1.0)
    pidfile = tmp_path / "pid"
    tool = fake_bpftrace(tmp_path, "import os\nopen(%r, 'w').write(str(os.getpid()))\n"
                                   "sys.stderr.write('attaching\\n'); sys.stderr.flush()\ntime.sleep(600)" % str(pidfile))
    started = time.monotonic()
    with pytest.raises(lat.LatencyError, match="did not end 1 s after a 1 s window and was stopped; it said: attaching"):
        lat.sample(tool, 1)
    assert time.monotonic() - started < 30
    with pytest.raises(OSError):
        os.kill(int(pidfile.read_text()), 0)     # gone and reaped


@pytest.mark.parametrize("params, message", [
    ({"seconds": 0, "depth": 1}, "seconds=0: the window is 1 to 3600 seconds"),
    ({"seconds": 3601, "depth": 1}, "seconds=3601"),
    ({"seconds": 5, "depth": -1}, "depth=-1"),
])
def test_bad_options_are_refused_before_the_probe_runs(params, message):
    with pytest.raises(lat.LatencyError, match=message):
        lat.run(dict(params, devices=[], cgroups=[]), None, FakeRunner())


def test_run_reports_a_missing_tool_before_anything_runs(monkeypatch):
    monkeypatch.setattr(lat.os, "geteuid", lambda: 0)
    with pytest.raises(lat.LatencyError, match="bpftrace is not installed"):
        lat.run({"seconds": 5, "depth": 1, "devices": [], "cgroups": []}, None, FakeRunner())


def test_a_cgroup_removed_during_the_window_keeps_the_name_scanned_before(host):
    groups = lat.Cgroups(host.path("/sys/fs/cgroup"))
    host.mkdir("/sys/fs/cgroup/training.slice/job.service")
    cg = cgid(host, "training.slice/job.service")
    groups.scan()                                    # at the window's start
    host.mkdir("/sys/fs/cgroup/inference.slice/late.service")    # made during the window: found by a rescan
    os.rmdir(host.path("/sys/fs/cgroup/training.slice/job.service"))   # (kernfs never reuses an id; a tmp dir may)
    assert groups.name(cgid(host, "inference.slice/late.service"), 0) == "/inference.slice/late.service"
    assert groups.name(cg, 0) == "/training.slice/job.service"     # the rescan kept what the first scan saw
    assert groups.name(cg, 1) == "/training.slice"


@pytest.mark.parametrize("tick", [True, False])
def test_a_job_that_starts_and_ends_inside_the_window_keeps_its_name(host, tmp_path, tick):
    # the probe runs 2.5 s; a job's cgroup lives from 0.2 s to 1.8 s of it, unseen before and after
    groups = lat.Cgroups(host.path("/sys/fs/cgroup"))
    job = host.path("/sys/fs/cgroup/training.slice/ckpt.service")
    idfile = tmp_path / "id"
    tool = fake_bpftrace(tmp_path, "import os\ntime.sleep(0.2)\nos.mkdir(%r)\nopen(%r, 'w').write(str(os.stat(%r).st_ino))\n"
                                   "time.sleep(1.6)\nos.rmdir(%r)\ntime.sleep(0.7)\nprint('{}')"
                         % (job, str(idfile), job, job))
    lat.sample(tool, 2, tick=groups.scan if tick else None)
    expected = "/training.slice/ckpt.service" if tick else "cgroup id %s (removed)" % idfile.read_text()
    assert groups.name(int(idfile.read_text()), 0) == expected
