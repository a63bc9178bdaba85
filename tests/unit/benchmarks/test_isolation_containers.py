# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The isolation benchmark's smoke pair through containers (bench.py --containers, issue 37) without a guest: the
image's files from ldd, a container's cgroup and liveness from /proc, the gate a container waits at (run for real with
the guest's command), the checks of placement, charge and overlap, the protection ratios and their verdict, the
report and the option's defaults."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

bench = load("isolation", "bench")
guest = load("isolation", "guest")
containers = bench.containers

DOCKER = "/inference.slice/docker-" + "a" * 64 + ".scope"
PODMAN = "/training.slice/libpod-" + "b" * 64 + ".scope/container"

# ldd of fio 3.33 on Debian 12 (shortened)
LDD = """\tlinux-vdso.so.1 (0x00007ffd2a1f3000)
\tlibaio.so.1 => /lib/x86_64-linux-gnu/libaio.so.1 (0x00007f0e1c5f1000)
\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f0e1c5d2000)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f0e1c4f3000)
\tlibnuma.so.1 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1c312000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1c9a8000)
"""


# ---------------------------------------------------------------------------------------------- guest side

def test_ldd_paths_are_the_libraries_and_the_interpreter():
    assert guest.ldd_paths(LDD) == ["/lib/x86_64-linux-gnu/libaio.so.1", "/lib/x86_64-linux-gnu/libz.so.1",
                                    "/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libc.so.6",
                                    "/lib64/ld-linux-x86-64.so.2"]
    assert guest.ldd_paths("\tstatically linked\n") == []


def test_proc_cgroup_and_liveness(tmp_path):
    pid = tmp_path / "42"
    pid.mkdir()
    (pid / "cgroup").write_text("0::%s\n" % DOCKER)
    (pid / "stat").write_text("42 (fio (x)) S 1 42 42 0\n")
    assert guest.proc_cgroup(42, str(tmp_path)) == DOCKER
    assert guest.pid_alive(42, str(tmp_path))
    (pid / "stat").write_text("42 (fio (x)) Z 1 42 42 0\n")
    assert not guest.pid_alive(42, str(tmp_path))
    assert guest.proc_cgroup(43, str(tmp_path)) is None and not guest.pid_alive(43, str(tmp_path))


def test_the_gate_holds_the_job_until_released(tmp_path):
    gate, out = str(tmp_path / "gate"), tmp_path / "out"
    os.mkfifo(gate)
    proc = subprocess.Popen(["sh", "-c", guest.GATE_SH, "sh", gate, "sh", "-c", "echo ran > %s" % out])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.5)
        assert not out.exists()
        guest.container_release({"gate": gate, "pid": proc.pid, "runtime": "docker", "name": "x"})
        assert proc.wait(10) == 0 and out.read_text() == "ran\n"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_container_not_at_its_gate_is_an_error(tmp_path, monkeypatch):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setattr(guest, "GATE_TIMEOUT", 0.3)
    with pytest.raises(SystemExit, match="podman container c is not waiting at its gate"):
        guest.container_release({"gate": gate, "pid": os.getpid(), "runtime": "podman", "name": "c"})


def test_a_containers_cell_releases_both_then_records_and_removes_them(monkeypatch):
    started, released, ran = [], [], []

    def container_start(role, profile, spec, index):
        started.append(role)
        return {"runtime": guest.CONTAINERS[role], "name": "n-" + role, "pid": 7, "out": "/nonexistent/" + role,
                "cgroup": DOCKER if role == "reader" else PODMAN, "gate": "g"}

    def _cell(spec, c, index, majmin, probe, boxed=None):
        assert started == ["antagonist", "reader"] and probe is None
        return {"reader": c["reader"], "antagonist": c["antagonist"]}
    monkeypatch.setattr(guest, "container_start", container_start)
    monkeypatch.setattr(guest, "container_release", released.append)
    monkeypatch.setattr(guest, "_cell", _cell)
    monkeypatch.setattr(guest, "run", lambda argv, check=True: ran.append(argv) or subprocess.CompletedProcess(
        argv, 0, "0\n", ""))
    monkeypatch.setattr(guest.os, "makedirs", lambda *a, **k: None)
    res = guest.cell({"launcher": "containers"}, {"reader": "randread4k", "antagonist": "seqwrite1m"}, 0, "259:1")
    assert res["reader_container"] == {"runtime": "docker", "cgroup": DOCKER, "io": None, "exit": 0}
    assert res["antagonist_container"]["runtime"] == "podman"
    assert ["docker", "rm", "-f", "n-reader"] in ran and ["podman", "rm", "-f", "n-antagonist"] in ran


def test_a_failed_containers_cell_removes_its_containers(monkeypatch):
    ran = []
    monkeypatch.setattr(guest, "container_start", lambda role, profile, spec, index: {
        "runtime": guest.CONTAINERS[role], "name": "n-" + role})

    def broken(*args, **kwargs):
        raise SystemExit("cell failed")
    monkeypatch.setattr(guest, "_cell", broken)
    monkeypatch.setattr(guest, "run", lambda argv, check=True: ran.append(argv))
    monkeypatch.setattr(guest.os, "makedirs", lambda *a, **k: None)
    with pytest.raises(SystemExit, match="cell failed"):
        guest.cell({"launcher": "containers"}, {"reader": "randread4k", "antagonist": "seqwrite1m"}, 0, "259:1")
    assert sorted(ran) == [["docker", "rm", "-f", "n-reader"], ["podman", "rm", "-f", "n-antagonist"]]


# ---------------------------------------------------------------------------------------------- checks

def stats(p99=1000000, direction="read", io_bytes=4096 * 1000, end_ms=10000, runtime_ms=3000, iops=300, bw=None):
    return {"dir": direction, "iops": iops, "bw_bytes": bw or io_bytes * 1000 // runtime_ms, "io_bytes": io_bytes,
            "runtime_ms": runtime_ms, "end_ms": end_ms, "clat_ns": {"p99": p99}}


def pair(launcher="containers", repeat=1, p99=2000000, reader="randread4k", antagonist="seqwrite1m", **kw):
    run = {"reader": reader, "antagonist": antagonist, "launcher": launcher, "repeat": repeat, "config": "roles",
           "reader_stats": stats(p99=p99), "antagonist_stats": stats(direction="write", io_bytes=300 * 10 ** 6,
                                                                     bw=100 * 10 ** 6),
           "io": {"inference.slice": {"rbytes": 4096 * 1200, "wbytes": 0},
                  "training.slice": {"rbytes": 0, "wbytes": 400 * 10 ** 6}}}
    if launcher == "containers":
        run["reader_container"] = {"runtime": "docker", "cgroup": DOCKER, "exit": 0}
        run["antagonist_container"] = {"runtime": "podman", "cgroup": PODMAN, "exit": 0}
    run.update(kw)
    return run


def test_placement_holds_for_containers_below_their_slices():
    assert containers.placement_problems(pair()) == []


@pytest.mark.parametrize("box,expect", [
    ({"runtime": "docker", "cgroup": "/system.slice/docker-" + "a" * 64 + ".scope", "exit": 0},
     "reader randread4k (repeat 1): the docker container's cgroup is '/system.slice/docker-"),
    ({"runtime": "docker", "cgroup": "/inference.slice", "exit": 0}, "not below inference.slice"),
    ({"runtime": "docker", "cgroup": DOCKER, "exit": 1}, "the docker container exited 1"),
    ({"runtime": "podman", "cgroup": DOCKER, "exit": 0}, "ran in podman, not a docker container"),
    (None, "ran in no container"),
])
def test_placement_problems(box, expect):
    got = containers.placement_problems(pair(reader_container=box))
    assert any(expect in p for p in got), got


def test_charge_holds_when_each_slice_was_charged_its_jobs_bytes():
    assert containers.charge_problems(pair()) == []


def test_a_slice_charged_less_than_fio_moved_is_a_problem():
    run = pair(io={"inference.slice": {"rbytes": 4096 * 500}, "training.slice": {"wbytes": 400 * 10 ** 6}})
    got = containers.charge_problems(run)
    assert len(got) == 1 and "inference.slice's io.stat was charged 2048000 rbytes, fio moved 4096000" in got[0]
    # no io.stat at all (no io controller on the slice): also a problem
    assert len(containers.charge_problems(pair(io={}))) == 2


def test_a_solo_job_whose_io_went_to_the_other_slice_is_a_problem():
    solo = {"reader": "randread4k", "antagonist": None, "launcher": "containers", "repeat": 2,
            "reader_stats": stats(), "io": {"inference.slice": {"rbytes": 4096 * 1100},
                                            "training.slice": {"rbytes": 4096 * 1000}}}
    assert "ran alone, yet training.slice was charged" in containers.charge_problems(solo)[0]
    solo["io"]["training.slice"]["rbytes"] = 0
    assert containers.charge_problems(solo) == []


def test_overlap_of_the_reader_with_the_antagonist():
    run = pair()
    assert containers.overlap(run, 1) == 1.0
    # the antagonist ended a second into the reader's 3 measured seconds
    run["antagonist_stats"]["end_ms"] = 8000
    assert containers.overlap(run, 1) == pytest.approx(1 / 3.0)
    assert "ran through 33% of the reader's measured seconds" in containers.overlap_problems(run, 1)[0]
    run["antagonist_stats"]["end_ms"] = None
    assert containers.overlap(run, 1) is None and "no figure" in containers.overlap_problems(run, 1)[0]
    assert containers.overlap_problems({"reader": "randread4k", "antagonist": None}, 1) == []


def test_problems_want_both_launchers():
    got = containers.problems({"meta": {"ramp": 1}, "runs": [pair()]})
    assert got == ["no systemd-run runs"]


# ---------------------------------------------------------------------------------------------- protection

def solo(launcher, repeat, p99, reader="randread4k"):
    return {"reader": reader, "antagonist": None, "launcher": launcher, "repeat": repeat, "reader_stats": stats(p99)}


def hog(launcher, repeat, bw):
    return {"reader": None, "antagonist": "seqwrite1m", "launcher": launcher, "repeat": repeat,
            "antagonist_stats": stats(direction="write", bw=bw)}


def results_of(base_pairs, boxed_pairs):
    runs = []
    for launcher, p99s in (("systemd-run", base_pairs), ("containers", boxed_pairs)):
        for rep, (alone, beside) in enumerate(p99s, 1):
            runs += [solo(launcher, rep, alone), hog(launcher, rep, 150 * 10 ** 6),
                     pair(launcher, rep, p99=beside)]
    return {"meta": {"repeats": len(base_pairs), "seconds": 3, "ramp": 1, "guest": "debian12"}, "runs": runs}


def test_protection_ratio_per_repeat_against_that_repeats_solo():
    results = results_of([(1e6, 2e6), (2e6, 3e6), (1e6, 1.2e6)], [(1e6, 1.5e6), (1e6, 2.5e6), (2e6, 2e6)])
    [row] = containers.protection(results)
    base, boxed = row["systemd-run"], row["containers"]
    assert base["ratio"]["values"] == [2.0, 1.5, 1.2] and base["ratio"]["median"] == 1.5
    assert (base["ratio"]["min"], base["ratio"]["max"]) == (1.2, 2.0)
    assert boxed["ratio"]["values"] == [1.5, 2.5, 1.0] and boxed["ratio"]["median"] == 1.5
    assert base["antagonist"]["median"] == 100.0 and base["antagonist_solo"]["median"] == 150.0
    assert row["unit"] == "MB/s" and row["verdict"] == "same"


def test_containers_outside_the_systemd_run_range_differ():
    results = results_of([(1e6, 2e6), (1e6, 2.2e6), (1e6, 1.8e6)], [(1e6, 4e6), (1e6, 5e6), (1e6, 4.5e6)])
    [row] = containers.protection(results)
    assert row["verdict"] == "differs" and row["containers"]["ratio"]["median"] == 4.5
    assert containers.verdict({"systemd-run": {"ratio": {"min": None}}, "containers": {}}) is None


def test_the_report_sets_both_launchers_side_by_side():
    results = results_of([(1e6, 2e6), (2e6, 3e6), (1e6, 1.2e6)], [(1e6, 1.5e6), (1e6, 2.5e6), (2e6, 2e6)])
    results["meta"]["runtimes"] = {"docker": "Docker version 20.10.24", "podman": "podman version 4.3.1"}
    text = containers.markdown(results, containers.protection(results))
    assert "| randread4k | seqwrite1m | systemd-run | 1.50x (1.20x-2.00x) | 2.00 ms (1.20 ms-3.00 ms) |" in text
    assert "| randread4k | seqwrite1m | containers | 1.50x (1.00x-2.50x) |" in text and "| same |" in text
    assert "Docker version 20.10.24, podman version 4.3.1" in text


# ---------------------------------------------------------------------------------------------- the option

def test_containers_defaults_leave_what_the_command_line_names():
    a = bench.argparse.Namespace(repeats=3, name="bench-iso", out="x", smoke=True)
    bench.containers_defaults(a, ["--containers"])
    assert (a.repeats, a.name, a.smoke) == (bench.CONTAINER_REPEATS, "bench-iso-ctr", False)
    assert a.out.endswith(os.path.join(".cache", "bench-isolation-containers"))
    a = bench.argparse.Namespace(repeats=3, name="bench-iso", out="x", smoke=False)
    bench.containers_defaults(a, ["--containers", "--repeats=2", "--name", "h53-x", "--out=o"])
    assert (a.repeats, a.name, a.out) == (3, "bench-iso", "x")      # argparse's, as given


def test_containers_check_runs_the_smoke_checks_per_launcher(monkeypatch):
    seen = []
    monkeypatch.setattr(bench, "smoke_check", lambda view: seen.append(sorted(set(
        r["launcher"] for r in view["runs"]))) or ["p"])
    results = results_of([(1e6, 2e6)], [(1e6, 2e6)])
    got = bench.containers_check(results)
    assert seen == [["systemd-run"], ["containers"]]
    assert got[:2] == ["systemd-run: p", "containers: p"]
