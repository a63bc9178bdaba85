# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs INSIDE a lab guest as root (fed on stdin by bench.py): `python3 - ACTION BASE64-JSON`.

  prepare  {"serial", "mount", "files"}  ext4 on the disk with that serial (made when the disk has
           no signature), mounted at `mount`, with `files` ({name: MiB}) filled once by fio
  qos      {"serial", "qos"}  write iocost's QoS line for the disk (the benchmark's QoS sweep varies
           only that knob); prints the line before and after
  cells    {"mount", "serial", "seconds", "ramp", "cells": [{"reader", "antagonist"}], "rates"}
           each cell: the antagonist in training.slice and the reader in inference.slice, started
           together as transient units with systemd-run (no --wait: it needs D-Bus), polled until
           both end; prints one JSON line with every cell's fio figures, the slices' io.pressure
           and io.stat (bytes and I/Os charged to each slice) over the cell, the threads of each
           job's unit, iocost's cost.vrate sampled twice a second, and the settings in force.
           With "probe" (a bpftrace program, bench.py's, from the collection's io_latency) each
           cell first starts bpftrace and waits for its probes to attach, then the jobs; the cell
           gets the program's JSON output, the cgroup ids below both slices and the disk's MAJ:MIN
           (bench.py sums the histogram per slice). A rate-bound reader, `<profile>@<percent>`, is its
           profile at the rate bench.py computed for it ("rates": {name: {"iops" | "bps": n}}). A CPU-bound
           antagonist (CPU_PROFILES, `cpuhog`) is the CPU burner below instead of fio, with one worker per CPU
           of the guest; every cell also gets the CPU time each slice used (cpu.stat) and the CPUs and memory
           nodes each job was allowed (its cpuset, from /proc/PID/status).

  containers {}  the --containers run's runtimes ready: docker.service started (the lab image has it disabled at
           boot), the image IMAGE built from the guest's own Debian packages - busybox-static and fio with the
           libraries it links (ldd) in a root filesystem, `docker import` and `podman import`, nothing pulled - once
           per runtime; prints the runtimes' versions and the image's files.

With "launcher": "containers" in the cells spec each job runs in a container instead of a transient unit: the reader
in a Docker container with --cgroup-parent=inference.slice, the antagonist in a Podman container with
--cgroup-parent=training.slice (CONTAINERS), both created first and held at a gate (a FIFO the container's shell
reads before it execs fio), then - after the probe attached - released together, so the containers' start-up (seconds
under TCG) is in no job's figures. A cell then also records each container's cgroup (from /proc/PID/cgroup), the
I/O its own cgroup was charged (io.stat, last sample while it ran) and its exit status.

Standard library only; fio with JSON output; no shell.
"""

import base64
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ENV = dict(os.environ, LANG="C", LC_ALL="C")
SLICES = {"reader": "inference.slice", "antagonist": "training.slice"}
RUN = "/run/aiinfra-bench"
# bpftrace compiles its program before it attaches: seconds under emulation, more on a busy guest.
ATTACH_TIMEOUT = 60
# After the window the program prints its maps and exits; this long past the window it is stopped.
PROBE_GRACE = 30

# --containers: the runtime of each role (bench.py's containers pair) and the image both run, built in the guest.
CONTAINERS = {"reader": "docker", "antagonist": "podman"}
IMAGE = "localhost/aiinfra-bench/fio:1"
# The container's command: wait at the gate (a FIFO, $1), then become the job. busybox sh, no loop: read blocks until
# the benchmark opens the FIFO and writes a line.
GATE_SH = 'read -r _ < "$1"; shift; exec "$@"'
# A container that is not at its gate this long after `run -d` returned (it is there at once when it works).
GATE_TIMEOUT = 60

# fio job per profile: (file, argv). Readers read the reader file; the shuffle reads the checkpoint
# file, the checkpoint writers write theirs, so no two jobs share blocks. The QD1 readers use psync:
# a task blocked in pread() counts in io.pressure, one waiting in io_getevents() does not.
PROFILES = {
    # KV-cache spill / embedding lookup: one 4k random read at a time.
    "randread4k": ("reader.dat", ["--rw=randread", "--bs=4k", "--iodepth=1", "--direct=1", "--ioengine=psync"]),
    # model-weight load: 128k sequential reads, one at a time.
    "seqread128k": ("reader.dat", ["--rw=read", "--bs=128k", "--iodepth=1", "--direct=1", "--ioengine=psync"]),
    # checkpoint write straight to the disk.
    "seqwrite1m": ("ckpt.dat", ["--rw=write", "--bs=1M", "--iodepth=32", "--direct=1", "--ioengine=libaio"]),
    # dataset shuffle: deep random reads.
    "randread64": ("ckpt.dat", ["--rw=randread", "--bs=4k", "--iodepth=64", "--direct=1", "--ioengine=libaio"]),
    # checkpoint write through the page cache: dirty writeback, where memory.high and the dirty
    # limits act.
    "buffered": ("buffered.dat", ["--rw=write", "--bs=1M", "--direct=0", "--ioengine=psync"]),
    # the shuffle again, through io_uring with a kernel SQ polling thread: the shape said to
    # "bypass the scheduler"; the same reads as randread64, so any difference is SQPOLL's.
    "uring_sqpoll": ("ckpt.dat", ["--rw=randread", "--bs=4k", "--iodepth=64", "--direct=1", "--ioengine=io_uring",
                                  "--sqthread_poll=1"]),
}
# Experiments (not in the default matrix): the shuffles in the idle I/O priority class, to show what
# ioprio changes under iocost - with the `none` scheduler nothing reads it.
PROFILES["randread64_idle"] = (PROFILES["randread64"][0], PROFILES["randread64"][1] + ["--prioclass=3"])
PROFILES["uring_sqpoll_idle"] = (PROFILES["uring_sqpoll"][0], PROFILES["uring_sqpoll"][1] + ["--prioclass=3"])

# A rate-bound reader (an inference server at its planned request rate): a reader profile with fio's rate cap, named
# <profile>@<percent of the disk's capacity>; bench.py computes the rate and hands it over in the cells spec.
RATE_SEP = "@"
# fio's option per unit of a rate: I/Os per second (4k random reads) or bytes per second (sequential reads).
RATE_OPTIONS = {"iops": "--rate_iops=%d", "bps": "--rate=%d"}
# linear (fio's default, said explicitly): evenly spaced I/Os, so the reader's load is its planned rate at every
# instant and the antagonist's frontier holds throughout; poisson bunches them, and at QD1 a bunch waits in fio.
# Behind its schedule fio issues at once to catch up (its clat does not hold that lateness) and reports nothing
# about a rate it missed, only its IOPS and bandwidth (rate_iops_min would end the job, and lose its figures):
# whether the rate was kept is achieved against requested, from the JSON (stats' "rate").
RATE_PROCESS = "linear"


# The CPU-bound training job (bench.py's CPU-contention pair): a data loader or tokenizer at full tilt, one worker
# per CPU of the machine, as such jobs are sized. Not fio's cpuio engine: it spins on the clock (usec_spin) and
# reports no work, and under TCG a vCPU the host descheduled still reads as busy, so only work done tells what the
# job got. Each worker hashes a 64 KiB block with SHA-256 over and over and counts the blocks of the measured window
# (after the ramp); the parent writes one JSON document. argv: WORKERS SECONDS RAMP OUT.
CPU_BURNER = r"""
import hashlib, json, os, resource, sys, time
workers, seconds, ramp, out = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
block = bytes(range(256)) * 256
begin = time.monotonic() + ramp
end = begin + seconds
children = []
for _ in range(workers):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        while time.monotonic() < begin:
            hashlib.sha256(block).digest()
        n, t0 = 0, time.monotonic()
        while time.monotonic() < end:
            hashlib.sha256(block).digest()
            n += 1
        ru = resource.getrusage(resource.RUSAGE_SELF)
        os.write(w, json.dumps({"blocks": n, "seconds": time.monotonic() - t0,
                                "cpu_s": ru.ru_utime + ru.ru_stime}).encode())
        os._exit(0)
    os.close(w)
    children.append((pid, r))
done = []
for pid, r in children:
    with os.fdopen(r) as f:
        done.append(json.loads(f.read()))
    os.waitpid(pid, 0)
with open(out, "w") as f:
    json.dump({"engine": "sha256", "block_bytes": len(block), "workers": done}, f)
"""
CPU_PROFILES = {"cpuhog": CPU_BURNER}


def profile_job(profile, rates=None):
    """A profile's (file, fio args); a rate-bound reader's (<profile>@<percent>) with its rate from `rates`."""
    base, sep = profile.partition(RATE_SEP)[:2]
    fname, args = PROFILES[base]
    if not sep:
        return fname, args
    rate = (rates or {}).get(profile)
    if not rate or len(rate) != 1 or next(iter(rate)) not in RATE_OPTIONS:
        raise SystemExit("no rate for %s (bench.py passes {\"iops\" | \"bps\": n}): %r" % (profile, rate))
    unit, value = next(iter(rate.items()))
    return fname, args + [RATE_OPTIONS[unit] % value, "--rate_process=" + RATE_PROCESS]


def run(argv, check=True):
    res = subprocess.run(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if check and res.returncode != 0:
        raise SystemExit("%s: rc %d: %s" % (" ".join(argv), res.returncode, res.stderr.strip()))
    return res


def disk_of(serial):
    for name in sorted(os.listdir("/sys/block")):
        try:
            with open("/sys/block/%s/device/serial" % name) as f:
                if f.read().strip() == serial:
                    with open("/sys/block/%s/dev" % name) as d:
                        return name, d.read().strip()
        except OSError:
            continue
    raise SystemExit("no disk with serial %s" % serial)


def prepare(spec):
    dev = "/dev/" + disk_of(spec["serial"])[0]
    mnt = spec["mount"]
    os.makedirs(mnt, exist_ok=True)
    if not os.path.ismount(mnt):
        if not run(["blkid", "-p", dev], check=False).stdout.strip():
            run(["mkfs.ext4", "-q", "-E", "nodiscard", "-L", "aiinfra-bench", dev])
        run(["mount", dev, mnt])
    made = []
    for fname, mib in sorted(spec["files"].items()):
        path = os.path.join(mnt, fname)
        if os.path.exists(path) and os.path.getsize(path) == mib << 20:
            continue
        # Written with real data once: reads of never-written blocks cost the emulated disk nothing.
        run(["fio", "--name=fill", "--filename=" + path, "--size=%dM" % mib, "--rw=write", "--bs=1M",
             "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output-format=json"])
        made.append(fname)
    run(["sync"])
    return {"device": dev, "made": made}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def pressure_total(slice_):
    """io.pressure's cumulative stall times (µs) of a slice, or None without the file."""
    text = read("/sys/fs/cgroup/%s/io.pressure" % slice_)
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        kind, rest = (line.split(" ", 1) + [""])[:2]
        fields = dict(kv.split("=", 1) for kv in rest.split())
        out[kind] = int(fields["total"])
    return out


def io_stat(slice_, majmin):
    """A slice's io.stat counters for the disk ({"rbytes", "wbytes", "rios", "wios"}), {} without."""
    line = disk_line("/sys/fs/cgroup/%s/io.stat" % slice_, majmin) or ""
    return dict((k, int(v)) for k, v in (kv.split("=", 1) for kv in line.split()[1:])
                if k in ("rbytes", "wbytes", "rios", "wios"))


def threads(unit, slice_):
    """The threads in a unit's cgroup by name (fio's own, io_uring's iou-sqp-*/iou-wrk-*), or None."""
    tids = (read("/sys/fs/cgroup/%s/%s/cgroup.threads" % (slice_, unit)) or "").split()
    names = {}
    for tid in tids:
        name = (read("/proc/%s/comm" % tid) or "?").strip()
        name = name.rsplit("-", 1)[0] if name.startswith("iou-") else name  # iou-sqp-<pid> -> iou-sqp
        names[name] = names.get(name, 0) + 1
    return names or None


def disk_line(path, majmin):
    """The disk's line of a per-device cgroup file (io.stat, io.cost.*), or None."""
    for line in (read(path) or "").splitlines():
        if line.startswith(majmin + " "):
            return line
    return None


def vrate(majmin):
    """iocost's current base vrate (%) for the disk: root io.stat's cost.vrate, None when off."""
    for kv in (disk_line("/sys/fs/cgroup/io.stat", majmin) or "").split()[1:]:
        if kv.startswith("cost.vrate="):
            return float(kv.split("=", 1)[1])
    return None


def settings(majmin):
    """What isolation is in force: enough to tell the configurations apart in the results."""
    out = {"io.cost.model": disk_line("/sys/fs/cgroup/io.cost.model", majmin),
           "io.cost.qos": disk_line("/sys/fs/cgroup/io.cost.qos", majmin),
           # the I/O scheduler decides whether anything reads a request's I/O priority
           "scheduler": (read("/sys/dev/block/%s/queue/scheduler" % majmin) or "").strip() or None}
    for slice_ in SLICES.values():
        base = "/sys/fs/cgroup/" + slice_
        out[slice_] = dict((f, (read(os.path.join(base, f)) or "").strip() or None)
                           for f in ("io.weight", "io.max", "cpu.weight", "memory.low", "memory.high", "cpuset.cpus",
                                     "cpuset.cpus.effective", "cpuset.mems.effective"))
    for key in ("dirty_bytes", "dirty_background_bytes", "dirty_ratio", "dirty_background_ratio"):
        out["vm." + key] = (read("/proc/sys/vm/" + key) or "").strip()
    return out


def stats(path, role):
    """The figures of one fio job from its JSON output (the direction it drove)."""
    try:
        with open(path) as f:
            text = f.read()
        # fio may print notes before the JSON document.
        doc = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        return None
    job = doc["jobs"][0]
    side = "write" if job["write"]["io_bytes"] > job["read"]["io_bytes"] else "read"
    d = job[side]
    pct = d.get("clat_ns", {}).get("percentile", {})

    def at(p):
        v = pct.get("%.6f" % p)
        return int(v) if v is not None else None
    return {"dir": side, "iops": d["iops"], "bw_bytes": d["bw_bytes"], "ios": d.get("total_ios"),
            # the bytes of the measured seconds; when fio wrote its output (the end, epoch ms): when the job measured
            "io_bytes": d.get("io_bytes"), "end_ms": doc.get("timestamp_ms"),
            "runtime_ms": d.get("runtime"), "clat_ns": {"p50": at(50), "p99": at(99), "p99.9": at(99.9)},
            "percentiles": dict((k, int(v)) for k, v in pct.items()), "rate": requested_rate(job)}


def requested_rate(job):
    """The rate fio was given, from its JSON's job options ({"iops": n} or {"bps": n}), None without one: what a
    rate-bound job's IOPS or bandwidth is held against."""
    opts = job.get("job options") or {}
    for unit, option in RATE_OPTIONS.items():
        key = option.split("=", 1)[0][2:]
        try:
            return {unit: int(opts[key])}
        except (KeyError, ValueError):
            continue     # not given, or with a suffix (bench.py passes plain numbers)
    return None


def cpu_stats(path):
    """The CPU burner's figures: bytes hashed per second over its workers (each worker's blocks over its own measured
    seconds), per worker, and the CPU time they were given (ramp included); None without its output."""
    try:
        with open(path) as f:
            doc = json.load(f)
        workers = doc["workers"]
        size = doc["block_bytes"]
        per = [w["blocks"] * size / w["seconds"] for w in workers]
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    if not per:
        return None
    return {"engine": doc.get("engine"), "workers": len(per), "hashed_bps": sum(per),
            "per_worker_bps": [round(b) for b in per], "cpu_s": round(sum(w.get("cpu_s", 0) for w in workers), 2)}


def cpu_usage(slice_, root="/sys/fs/cgroup"):
    """A slice's CPU time so far (usage_usec of cpu.stat, which every cgroup v2 group has), None without the file."""
    for line in (read(os.path.join(root, slice_, "cpu.stat")) or "").splitlines():
        key, _sep, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value)
    return None


def allowed(unit, slice_, root="/sys/fs/cgroup", proc="/proc"):
    """The CPUs and memory nodes a unit's first process may use ({"cpus", "mems"}: Cpus_allowed_list and
    Mems_allowed_list of /proc/PID/status, what its cpuset gives it), None when the unit has no process."""
    pids = (read(os.path.join(root, slice_, unit, "cgroup.procs")) or "").split()
    for pid in pids:
        fields = {}
        for line in (read(os.path.join(proc, pid, "status")) or "").splitlines():
            key, _sep, value = line.partition(":")
            fields[key] = value.strip()
        if "Cpus_allowed_list" in fields:
            return {"cpus": fields["Cpus_allowed_list"], "mems": fields.get("Mems_allowed_list")}
    return None


def job_state(job):
    """A job's state as systemd names it: a unit's own; a container's "active" while its process runs."""
    if job[3] is None:
        return unit_state(job[0])
    return "active" if pid_alive(job[3]["pid"]) else "inactive"


def unit_state(unit):
    res = run(["systemctl", "show", "-P", "ActiveState", unit], check=False)
    return res.stdout.strip() or "inactive"


def start(role, profile, spec, index):
    unit = "aiinfra-bench-%s-%d" % (role, index)
    out = os.path.join(RUN, "%s-%d.json" % (role, index))
    if os.path.exists(out):
        os.unlink(out)
    run(["systemctl", "reset-failed", unit + ".service"], check=False)
    argv = ["systemd-run", "--quiet", "--unit=" + unit, "--slice=" + SLICES[role], "--"] + job_argv(profile, spec, out)
    run(argv)
    return unit + ".service", out


def ldd_paths(text):
    """The files a dynamically linked program loads, from ldd's output: each library's resolved path and the
    program interpreter (the line without "=>"); vDSO and unresolved lines ("not found") left out."""
    paths = []
    for line in text.splitlines():
        line = line.strip()
        name, arrow, rest = line.partition("=>")
        where = (rest if arrow else name).strip().split(" (", 1)[0].strip()
        if where.startswith("/") and where not in paths:
            paths.append(where)
    return paths


def proc_cgroup(pid, proc="/proc"):
    """A process's cgroup v2 path ("/inference.slice/docker-<id>.scope"), None when it has ended."""
    for line in (read(os.path.join(proc, str(pid), "cgroup")) or "").splitlines():
        if line.startswith("0::"):
            return line[3:].strip()
    return None


def pid_alive(pid, proc="/proc"):
    """Whether a process runs (a zombie, waiting for its runtime's shim to reap it, has ended)."""
    stat = read(os.path.join(proc, str(pid), "stat"))
    if not stat:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def image_files():
    """{path in the image: file in the guest}: busybox (sh, for the gate) and fio with every library it loads."""
    fio = shutil.which("fio")
    busybox = shutil.which("busybox")
    if not fio or not busybox:
        raise SystemExit("the guest lacks %s (the lab image installs fio and busybox-static)"
                         % " and ".join(n for n, p in (("fio", fio), ("busybox", busybox)) if not p))
    files = {"/bin/busybox": busybox, "/usr/bin/fio": fio}
    for path in ldd_paths(run(["ldd", fio]).stdout):
        files[path] = path
    return files


def containers(spec):
    """The runtimes ready for a containers cell: dockerd started, IMAGE in both stores (built once)."""
    run(["systemctl", "start", "docker.service"])
    files = image_files()
    built = []
    for rt in sorted(set(CONTAINERS.values())):
        if run([rt, "image", "inspect", IMAGE], check=False).returncode == 0:
            continue
        root = os.path.join(RUN, "image-root")
        shutil.rmtree(root, ignore_errors=True)
        for inside, host in files.items():
            target = root + inside
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy(host, target)           # the file a library's symlink names, under the symlink's name
        os.symlink("busybox", os.path.join(root, "bin", "sh"))
        os.makedirs(os.path.join(root, "tmp"), mode=0o1777, exist_ok=True)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        res = subprocess.run([rt, "import", "-", IMAGE], stdin=tar.stdout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, check=False)
        tar.stdout.close()
        tar.wait()
        shutil.rmtree(root, ignore_errors=True)
        if res.returncode != 0 or tar.returncode != 0:
            raise SystemExit("%s import of %s: rc %d: %s" % (rt, IMAGE, res.returncode, res.stderr.strip()))
        built.append(rt)
    return {"image": IMAGE, "files": sorted(files), "built": built,
            "versions": dict((rt, run([rt, "--version"]).stdout.strip()) for rt in sorted(set(CONTAINERS.values())))}


def container_start(role, profile, spec, index):
    """The job's container created and held at its gate: {"runtime", "name", "pid", "cgroup", "gate", "out"}."""
    rt = CONTAINERS[role]
    name = "aiinfra-bench-%s-%d" % (role, index)
    out = os.path.join(RUN, "%s-%d.json" % (role, index))
    gate = os.path.join(RUN, "gate-%s-%d" % (role, index))
    for path in (out, gate):
        if os.path.exists(path):
            os.unlink(path)
    os.mkfifo(gate)
    run([rt, "rm", "-f", name], check=False)
    # Debian 12's dockerd refuses a container under AppArmor without apparmor_parser (not in the lab image):
    # unconfined, for both runtimes alike (molecule/colocated/tasks/containers.yml)
    run([rt, "run", "-d", "--name", name, "--cgroup-parent=" + SLICES[role], "--network", "none",
         "--security-opt", "apparmor=unconfined", "-v", "%s:%s" % (spec["mount"], spec["mount"]),
         "-v", "%s:%s" % (RUN, RUN), IMAGE, "/bin/sh", "-c", GATE_SH, "sh", gate] + job_argv(profile, spec, out))
    pid = int(run([rt, "inspect", "-f", "{{.State.Pid}}", name]).stdout.strip() or 0)
    return {"runtime": rt, "name": name, "pid": pid, "cgroup": proc_cgroup(pid) if pid else None, "gate": gate,
            "out": out}


def container_release(job):
    """Let a container past its gate; SystemExit when it is not waiting there."""
    deadline = time.monotonic() + GATE_TIMEOUT
    while True:
        try:
            fd = os.open(job["gate"], os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:              # ENXIO: nobody reads the FIFO (yet)
            if time.monotonic() > deadline or not pid_alive(job["pid"]):
                raise SystemExit("%s container %s is not waiting at its gate %s (%s)"
                                 % (job["runtime"], job["name"], job["gate"], e.strerror))
            time.sleep(0.1)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def container_end(job):
    """The container's exit status, then the container removed."""
    res = run([job["runtime"], "wait", job["name"]], check=False)
    run([job["runtime"], "rm", "-f", job["name"]], check=False)
    return int(res.stdout.strip()) if res.stdout.strip().isdigit() else None


def job_argv(profile, spec, out):
    """The command of a job: the CPU burner with a worker per CPU of the machine (not of the job's cpuset: a
    training job is sized for the host), else fio with the profile's file and options."""
    if profile in CPU_PROFILES:
        return [sys.executable, "-c", CPU_PROFILES[profile], str(os.cpu_count() or 1), str(spec["seconds"]),
                str(spec["ramp"]), out]
    fname, args = profile_job(profile, spec.get("rates"))
    return ["fio", "--name=" + profile, "--filename=" + os.path.join(spec["mount"], fname), "--time_based",
            "--runtime=%d" % spec["seconds"], "--ramp_time=%d" % spec["ramp"], "--output-format=json",
            "--output=" + out] + args


def _die_with_parent():
    # bpftrace must not outlive this script (an ssh session that drops): PR_SET_PDEATHSIG(SIGTERM)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Probe:
    """bpftrace running the benchmark's program for one cell, its output in files under RUN (read
    without pipes: nothing can block on a full one). Always ended by close()."""

    def __init__(self, program, index):
        bpftrace = shutil.which("bpftrace")
        if not bpftrace:
            raise SystemExit("bpftrace is not installed in the guest (bench.py --no-probe runs without it)")
        self.out = os.path.join(RUN, "probe-%d.json" % index)
        self.err = os.path.join(RUN, "probe-%d.err" % index)
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([bpftrace, "-f", "json", "-e", program], env=ENV, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.started = time.monotonic()
        self.attached = None

    def wait_attached(self):
        """Until bpftrace says its probes are attached (its window starts then); seconds it took."""
        while '"attached_probes"' not in (read(self.out) or ""):
            if self.proc.poll() is not None:
                raise SystemExit("bpftrace ended (rc %s) before attaching: %s" % (self.proc.returncode, self.stderr()))
            if time.monotonic() - self.started > ATTACH_TIMEOUT:
                raise SystemExit("bpftrace did not attach within %d s: %s" % (ATTACH_TIMEOUT, self.stderr()))
            time.sleep(0.2)
        self.attached = time.monotonic()
        return round(self.attached - self.started, 1)

    def stderr(self):
        return (read(self.err) or "").strip()[-1000:] or "no output"

    def collect(self, window):
        """bpftrace's output once the program ended itself after its window (stopped if it overran)."""
        left = self.attached + window + PROBE_GRACE - time.monotonic()
        try:
            self.proc.wait(max(left, 0))
        except subprocess.TimeoutExpired:
            raise SystemExit("bpftrace did not end %d s after its %d s window: %s" % (PROBE_GRACE, window, self.stderr()))
        if self.proc.returncode != 0:
            raise SystemExit("bpftrace failed (rc %s): %s" % (self.proc.returncode, self.stderr()))
        return read(self.out) or ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def cgroup_ids(into, root="/sys/fs/cgroup"):
    """Every cgroup under both slices by inode number (the id the block layer charges a bio to: the
    nearest cgroup with the io controller, the slice or a unit below it) -> the slice's name."""
    for slice_ in SLICES.values():
        for directory, _dirs, _files in os.walk(os.path.join(root, slice_)):
            try:
                into[str(os.stat(directory).st_ino)] = slice_
            except OSError:
                continue     # a unit's cgroup removed while walking
    return into


def cell(spec, c, index, majmin):
    os.makedirs(RUN, exist_ok=True)
    boxed, probe = {}, None
    try:
        if spec.get("launcher") == "containers":
            # The containers first, held at their gates: their start-up (seconds under TCG) is before the probe's
            # window and no part of the cell.
            for role in ("antagonist", "reader"):
                if c.get(role):
                    boxed[role] = container_start(role, c[role], spec, index)
        probe = Probe(spec["probe"]["program"], index) if spec.get("probe") else None
        if not boxed:
            return _cell(spec, c, index, majmin, probe)
        res = _cell(spec, c, index, majmin, probe, boxed)
        for role, job in list(boxed.items()):
            res[role + "_container"] = {"runtime": job["runtime"], "cgroup": job["cgroup"], "io": job.get("io"),
                                        "exit": container_end(job)}
            del boxed[role]
        return res
    finally:
        if probe:
            probe.close()
        for job in boxed.values():      # a cell that failed leaves no container behind
            run([job["runtime"], "rm", "-f", job["name"]], check=False)


def _cell(spec, c, index, majmin, probe, boxed=None):
    """One cell's jobs started (transient units, or the containers of `boxed` let past their gates), polled until
    they end, and their figures."""
    if c.get("antagonist") == "buffered" or c.get("reader") == "buffered":
        # Start from a clean page cache so each buffered run dirties the same amount.
        run(["sync"])
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    # The probe's window starts at its attach: the jobs start right after it (their ramp is its warm-up).
    attach = probe.wait_attached() if probe else None
    before = dict((s, pressure_total(s)) for s in SLICES.values())
    io_before = dict((s, io_stat(s, majmin)) for s in SLICES.values())
    cpu_before = dict((s, cpu_usage(s)) for s in SLICES.values())
    t0 = time.monotonic()
    jobs = {}
    # The antagonist first: the reader meets it already running (both ramp before measuring).
    for role in ("antagonist", "reader"):
        if c.get(role) and boxed:
            container_release(boxed[role])
            # the cgroup below its slice, as the unit's: "<slice>/<rest>" -> (rest, slice)
            where = (boxed[role]["cgroup"] or "/").lstrip("/").partition("/")
            jobs[role] = (where[2], boxed[role]["out"], where[0], boxed[role])
        elif c.get(role):
            unit, out = start(role, c[role], spec, index)
            jobs[role] = (unit, out, SLICES[role], None)
    # The jobs' ramp the probe also counts (its warm-up began at the attach): how late they started.
    started = round(time.monotonic() - probe.attached, 2) if probe else None
    # A unit's cgroup is gone once it ends: its id is taken while it runs.
    cgroups = cgroup_ids({})
    samples, unit_threads, unit_cpus = [], {}, {}
    deadline = t0 + spec["seconds"] + spec["ramp"] + 60
    measuring_from = t0 + spec["ramp"] + 0.5
    while True:
        states = dict((role, job_state(job)) for role, job in jobs.items())
        if all(s in ("inactive", "failed") for s in states.values()):
            break
        if time.monotonic() > deadline:
            for job in jobs.values():
                if job[3] is None:
                    run(["systemctl", "stop", job[0]], check=False)
            raise SystemExit("cell %s did not end within %d s" % (c, deadline - t0))
        if time.monotonic() >= measuring_from and majmin:
            v = vrate(majmin)
            if v is not None:
                samples.append(v)
            for role, job in jobs.items():
                if role not in unit_threads:
                    unit_threads[role] = threads(job[0], job[2])
                if not unit_cpus.get(role):
                    unit_cpus[role] = allowed(job[0], job[2])
                if job[3] is not None and states[role] == "active":
                    # the container's own cgroup goes with it: its last reading while it ran
                    job[3]["io"] = io_stat(os.path.join(job[2], job[0]), majmin) or job[3].get("io")
        cgroup_ids(cgroups)
        time.sleep(0.5)
    wall = time.monotonic() - t0
    after = dict((s, pressure_total(s)) for s in SLICES.values())
    io_after = dict((s, io_stat(s, majmin)) for s in SLICES.values())
    cpu_after = dict((s, cpu_usage(s)) for s in SLICES.values())
    # A buffered writer leaves dirty pages behind: write them back now, not in the next cell.
    run(["sync"])
    press = {}
    for s in SLICES.values():
        if before[s] is not None and after[s] is not None:
            press[s] = dict((k, round(100.0 * (after[s][k] - before[s][k]) / 1e6 / wall, 2)) for k in after[s])
    res = {"reader": c.get("reader"), "antagonist": c.get("antagonist"), "wall": round(wall, 1), "pressure": press,
           "io": dict((s, dict((k, v - io_before[s].get(k, 0)) for k, v in io_after[s].items())) for s in SLICES.values()),
           "vrate": ({"mean": round(sum(samples) / len(samples), 2), "min": min(samples), "max": max(samples),
                      "n": len(samples)} if samples else None),
           # CPUs each slice used on average over the cell, as the guest accounts them
           "cpu": dict((s, round((cpu_after[s] - cpu_before[s]) / 1e6 / wall, 3)) for s in SLICES.values()
                       if cpu_before[s] is not None and cpu_after[s] is not None)}
    for role, (unit, out, _where, _boxed) in jobs.items():
        res[role + "_threads"] = unit_threads.get(role)
        res[role + "_cpus"] = unit_cpus.get(role)
        if c[role] in CPU_PROFILES:
            res[role + "_stats"] = cpu_stats(out)
        else:
            res[role + "_stats"] = stats(out, role)
        if (res[role + "_stats"] and c[role] not in CPU_PROFILES
                and "--sqthread_poll=1" in profile_job(c[role], spec.get("rates"))[1]):
            # fio measures no completion latency under SQPOLL (fio 3.33 reports one constant 17.1 s
            # for every percentile): only its IOPS and bandwidth mean anything.
            res[role + "_stats"].update(clat_ns={"p50": None, "p99": None, "p99.9": None}, percentiles={})
        if res[role + "_stats"] is None:
            res[role + "_error"] = "fio wrote no result (%s %s)" % (unit, states.get(role))
    if probe:
        res["probe_raw"] = {"output": probe.collect(spec["probe"]["window"]), "cgroups": cgroups, "majmin": majmin,
                            "attach_s": attach, "jobs_started_s": started}
    return res


def cells(spec):
    majmin = disk_of(spec["serial"])[1]
    out = {"settings": settings(majmin), "kernel": os.uname().release,
           "fio": run(["fio", "--version"]).stdout.strip(), "cells": []}
    if spec.get("probe") and shutil.which("bpftrace"):
        out["bpftrace"] = run(["bpftrace", "--version"]).stdout.strip()
    for i, c in enumerate(spec["cells"]):
        out["cells"].append(cell(spec, c, i, majmin))
    return out


def qos(spec):
    majmin = disk_of(spec["serial"])[1]
    path = "/sys/fs/cgroup/io.cost.qos"
    before = disk_line(path, majmin)
    with open(path, "w") as f:
        f.write("%s %s" % (majmin, spec["qos"]))
    return {"before": before, "after": disk_line(path, majmin)}


def main():
    action, spec = sys.argv[1], json.loads(base64.b64decode(sys.argv[2]))
    result = {"prepare": prepare, "cells": cells, "qos": qos, "containers": containers}[action](spec)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
