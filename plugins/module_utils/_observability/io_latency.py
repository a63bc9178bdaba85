# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Block I/O latency per cgroup and disk, sampled with bpftrace for a bounded window (io_latency).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Attribution: a bio belongs to the cgroup the block layer charged it to - ``bio->bi_blkg->blkcg`` -
read when the bio completes (``bio_endio``), not ``bpf_get_current_cgroup_id()``: completion runs in
whatever task or interrupt context it lands in. Writeback bios carry the inode owner's blkg, so they
are charged where io.max and iocost charge them too.

Latency: from ``submit_bio_noacct`` (the bio enters the block layer, before blk-throttle's io.max
queue and iocost's wait) to ``bio_endio`` - what the submitter waits for, and what fio reports as
completion latency. A bio resubmitted after a split or a throttle keeps its first start. kprobes with
BTF casts, because they work alike on bpftrace 0.17 (Debian 12) and 0.23 (Debian 13).

Histogram: log2 of microseconds with 8 linear steps per power of two (12.5% wide buckets, exact below
16 us), counted in the kernel; percentiles interpolate within a bucket. The program ends itself after
the window (``interval``), and the module also stops it (SIGINT, SIGTERM, SIGKILL) if it overruns and,
through the parent-death signal, if the module itself is killed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import json
import os
import re
import signal
import subprocess
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Child
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError

BTF = "/sys/kernel/btf/vmlinux"
SUB_BUCKETS = 8
MAX_SECONDS = 3600
# bpftrace compiles and attaches before the window starts (seconds under emulation), and prints its
# maps after it: the window plus this is the most it may take before it is stopped.
STARTUP_GRACE = 60.0
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))

PROGRAM = r"""
kprobe:submit_bio_noacct
/@start[arg0] == 0/
{
  @start[arg0] = nsecs;
}

kprobe:bio_endio
/@start[arg0] != 0/
{
  $bio = (struct bio *)arg0;
  $v = (nsecs - @start[arg0]) / 1000;
  delete(@start[arg0]);
  $e = (uint64)0;
  unroll(26) {
    if ($v >= 16) {
      $v = $v >> 1;
      $e = $e + 1;
    }
  }
  @lat[$bio->bi_blkg->blkcg->css.cgroup->kn->id, $bio->bi_bdev->bd_dev, $e * 8 + $v] = count();
}

%(warmup)sinterval:s:%(seconds)d
{
  exit();
}

END
{
  clear(@start);
}
"""


class LatencyError(ModuleError):
    pass


# A warm-up forgets what completed before it: the window then counts the same seconds as a fio job with
# --ramp_time (the isolation benchmark), from the probe's attach.
# (an interval probe fires every period: the flag makes it fire once)
WARMUP = """interval:s:%d
/@warmed == 0/
{
  clear(@lat);
  @warmed = 1;
}

"""


def program(seconds, warmup=0):
    """The bpftrace program: a window of ``seconds`` after attaching, the first ``warmup`` of them forgotten."""
    if not 0 <= warmup < seconds:
        raise ValueError("warmup=%s: 0 or more, below the window (%s s)" % (warmup, seconds))
    return PROGRAM % {"seconds": seconds, "warmup": WARMUP % warmup if warmup else ""}


def bucket_range(index):
    """[low, high) in microseconds of a histogram bucket index (``e * 8 + v`` from the program)."""
    if index < 2 * SUB_BUCKETS:
        return index, index + 1
    e = index // SUB_BUCKETS - 1
    v = index - SUB_BUCKETS * e
    return v << e, (v + 1) << e


def bucket_of(us):
    """The bucket index of a latency in whole microseconds (the program's arithmetic, for tests)."""
    e = 0
    while us >= 2 * SUB_BUCKETS:
        us >>= 1
        e += 1
    return e * SUB_BUCKETS + us


def majmin(dev):
    """A kernel-internal dev_t (MINORBITS 20) as MAJ:MIN."""
    return "%d:%d" % (dev >> 20, dev & 0xFFFFF)


def _key(key):
    # bpftrace prints a map's tuple key as "a,b,c" in its JSON output; accept any spelling of three numbers
    numbers = re.findall(r"-?\d+", "%s" % key)
    if len(numbers) != 3:
        raise ValueError("map key %r is not (cgroup id, dev, bucket)" % (key,))
    return tuple(int(n) for n in numbers)


def parse(output):
    """bpftrace's NDJSON output -> {(cgroup id, dev, bucket): count}; ``lost`` events counted."""
    counts = {}
    lost = 0
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        kind, data = obj.get("type"), obj.get("data")
        if kind == "lost_events" and isinstance(data, dict):
            lost += int(data.get("events", 0))
        if kind != "map" or not isinstance(data, dict) or "@lat" not in data:
            continue
        for key, value in (data["@lat"] or {}).items():
            counts[_key(key)] = counts.get(_key(key), 0) + int(value)
    return counts, lost


def percentile(buckets, pct):
    """The ``pct`` percentile (us) of {bucket: count}, interpolated linearly inside its bucket."""
    total = sum(buckets.values())
    if not total:
        return None
    rank = pct / 100.0 * total
    seen = 0
    for index in sorted(buckets):
        count = buckets[index]
        if seen + count >= rank:
            low, high = bucket_range(index)
            return round(low + (high - low) * max(0.0, rank - seen) / count, 1)
        seen += count
    return float(bucket_range(max(buckets))[1])


def log2_histogram(buckets):
    """The fine buckets summed into powers of two: [{le_us, count}] (count of latencies < le_us)."""
    out = {}
    for index, count in buckets.items():
        low, _high = bucket_range(index)
        le = 1
        while le <= low:
            le <<= 1
        out[le] = out.get(le, 0) + count
    return [{"le_us": le, "count": out[le]} for le in sorted(out)]


class Cgroups:
    """cgroup v2 ids (the directory's inode number) to paths below the root. Scanned during the window
    too (each scan adds to the last): a cgroup removed before the window ends (a job that finished)
    keeps its name."""

    def __init__(self, root=CGROUP_ROOT):
        self.root = root
        self.paths = None

    def scan(self):
        paths = dict(self.paths or {})
        for directory, _dirs, _files in os.walk(self.root):
            try:
                ino = os.stat(directory).st_ino
            except OSError:
                continue
            rel = os.path.relpath(directory, self.root)
            paths[ino] = "/" if rel == "." else "/" + rel
        self.paths = paths

    def name(self, cgid, depth):
        if cgid == 0:
            return "(no cgroup)"     # a bio the block layer charged to no blkg
        if self.paths is None or cgid not in self.paths:
            self.scan()
        path = self.paths.get(cgid)
        if path is None:
            return "cgroup id %d (removed)" % cgid
        if depth and path != "/":
            path = "/" + "/".join(path.strip("/").split("/")[:depth])
        return path


def disk_of(fs, mm):
    """(whole disk name, its MAJ:MIN) for a MAJ:MIN that may be a partition."""
    link = "/sys/dev/block/%s" % mm
    if not fs.exists(link):
        return None, mm
    real = fs.realpath(link)
    if fs.exists(real + "/partition"):
        real = os.path.dirname(real)
        mm = (fs.read(real + "/dev", "") or mm).strip()
    return os.path.basename(real), mm


def summarize(counts, fs, cgroups, depth=1, devices=None, only=None):
    """Per (cgroup, disk): count, the disk's share, percentiles, the log2 histogram."""
    per = {}
    for (cgid, dev, index), count in counts.items():
        disk, mm = disk_of(fs, majmin(dev))
        if devices is not None and mm not in devices:
            continue
        name = cgroups.name(cgid, depth)
        if only and name not in only:
            continue
        key = (name, disk or mm, mm)
        buckets = per.setdefault(key, {})
        buckets[index] = buckets.get(index, 0) + count
    disk_totals = {}
    for (name, disk, mm), buckets in per.items():
        disk_totals[mm] = disk_totals.get(mm, 0) + sum(buckets.values())
    out = []
    for (name, disk, mm), buckets in sorted(per.items()):
        total = sum(buckets.values())
        row = {"cgroup": name, "disk": disk, "majmin": mm, "count": total,
               "share": round(float(total) / disk_totals[mm], 4),
               # approximate: each I/O at its bucket's middle (a histogram's _sum)
               "sum_us": round(sum(c * sum(bucket_range(i)) / 2.0 for i, c in buckets.items()), 1),
               "max_us": float(bucket_range(max(buckets))[1]), "histogram": log2_histogram(buckets)}
        for label, pct in PERCENTILES:
            row[label + "_us"] = percentile(buckets, pct)
        out.append(row)
    return out


def _die_with_parent():
    # the probe must not outlive a killed module: PR_SET_PDEATHSIG(SIGTERM) in the child
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def check_host(which, geteuid=None, exists=None, root=CGROUP_ROOT):
    """What the host lacks for the probe, each with its fix (empty: nothing)."""
    geteuid = geteuid or os.geteuid
    exists = exists or os.path.exists
    problems = []
    if geteuid() != 0:
        problems.append("io_latency needs root: bpftrace loads eBPF programs (run the task with become)")
    if not which("bpftrace"):
        problems.append("bpftrace is not installed (Debian: apt install bpftrace)")
    if not exists(BTF):
        problems.append("the kernel has no BTF (%s is missing): the probe reads struct bio through BTF; "
                        "a kernel built with CONFIG_DEBUG_INFO_BTF=y has it (Debian's do)" % BTF)
    if not exists(os.path.join(root, "cgroup.controllers")):
        problems.append("%s is not a cgroup v2 hierarchy: attribution names cgroup v2 groups" % root)
    return problems


def sample(bpftrace, seconds, popen=subprocess.Popen, clock=time.monotonic, tick=None):
    """Run the program for ``seconds``, calling ``tick()`` about every second meanwhile; returns
    (stdout, stderr, elapsed)."""
    argv = [bpftrace, "-f", "json", "-e", program(seconds)]
    started = clock()
    child = Child(popen, argv, clock, preexec_fn=_die_with_parent)
    try:
        out = child.drain(seconds + STARTUP_GRACE, tick=tick)
        if child.open:
            out += child.stop()
            raise LatencyError("bpftrace did not end %d s after a %d s window and was stopped; it said: %s"
                               % (STARTUP_GRACE, seconds, child.stderr.strip()[-500:] or "nothing"))
        rc = child.wait(10)
        if rc != 0:
            raise LatencyError("bpftrace failed (rc=%s): %s" % (rc, child.stderr.strip()[-1000:] or "no output"),
                               details={"argv": argv[:4] + ["<program>"], "rc": rc})
        return out, child.stderr, round(clock() - started, 1)
    finally:
        child.kill()


def run(params, fs, runner, popen=subprocess.Popen, cgroups=None, resolve=None):
    seconds = params["seconds"]
    if not 1 <= seconds <= MAX_SECONDS:
        raise LatencyError("seconds=%s: the window is 1 to %d seconds" % (seconds, MAX_SECONDS))
    depth = params["depth"]
    if depth < 0:
        raise LatencyError("depth=%s: 0 (each cgroup) or more (the first N levels below the root)" % depth)
    devices = None
    if params.get("devices"):
        devices = set(d.majmin for d in resolve(params["devices"]))
    problems = check_host(runner.which)
    if problems:
        raise LatencyError("; ".join(problems), errors=problems)
    bpftrace = runner.which("bpftrace")
    _rc, version, _err = runner.run([bpftrace, "--version"])
    cgroups = cgroups or Cgroups()
    # scanned every second of the window: a job's cgroup that appears and ends inside it keeps its name
    out, _err, elapsed = sample(bpftrace, seconds, popen=popen, tick=cgroups.scan)
    counts, lost = parse(out)
    rows = summarize(counts, fs, cgroups, depth=depth, devices=devices,
                     only=set(params.get("cgroups") or []) or None)
    result = {"changed": False, "seconds": seconds, "elapsed": elapsed, "latency": rows,
              "bpftrace": version.strip(), "lost_events": lost, "warnings": []}
    if lost:
        result["warnings"].append("bpftrace lost %d events: the counts are low" % lost)
    return result
