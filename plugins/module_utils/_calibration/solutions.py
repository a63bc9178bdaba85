# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The solution phase of iocost_calibrate: the disk's isolation trade-off, measured after its model.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

With the just-measured model in ``io.cost.model`` and iocost's vrate pinned (``rpct=0 wpct=0
min=max=L``) at a series of levels L, a rate-bound probe reader (4 KiB random reads at QD1, fio
``rate_iops`` = a share of the measured ``rrandiops``, ``rate_process=linear``) runs in one transient
scope of weight 1000 beside a saturating antagonist (4 KiB random reads at QD64) in another of weight
100 (IOWeight and CPUWeight, as the inference and training roles deploy their slices), both in the
calibration's own slice. One more point holds a latency target instead of a pin; one solo run of the
probe (iocost off, as the hold leaves it) gives the reference p99. From the points:

* ``isolation``: the highest pinned level whose probe p99 is within :data:`P99_BOUND` x solo and
  whose probe kept at least :data:`RATE_KEPT_MIN` of its rate (none: no solution, with a note);
* ``bandwidth``: vrate 100 pinned, no latency target (the disk's measured capacity, never above it);
* ``latency``: the latency-target point, when it meets the same bound as ``isolation``.

The scopes are started with ``systemd-run --scope`` (systemd's private socket: no D-Bus needed): the
systemd-run process execs fio in the new scope, so this module reads fio's JSON from its pipe and
stops it by its PID. The slice is stopped afterwards (and by the next call when this one was killed:
the journal names it), which ends anything left in it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import subprocess
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import STOP_TIMEOUT, Child
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT

# The calibration's own slice: a top-level one (no '-' in the name, so systemd creates no parent slice).
SLICE = "iocost_calibrate.slice"
# IOWeight and CPUWeight of the two scopes: what the inference and training roles give their slices
# (inference_cpu_weight 1000, training_cpu_weight 100), so the probe is measured as it would be deployed.
PROBE_WEIGHT = 1000
ANTAGONIST_WEIGHT = 100
DEFAULT_LEVELS = (100, 80, 60, 40)
DEFAULT_SECONDS = 15
# The probe's rate as a share of the measured rrandiops: an inference reader planned at a quarter of the
# disk. In the lab's device-bound disk (issue 35's measurements) a QD1 4 KiB reader keeps 25% alone.
DEFAULT_PROBE_SHARE = 0.25
# The isolation criterion (issue 35's acceptance): the probe's p99 within 1.5x its solo p99, its rate kept.
P99_BOUND = 1.5
RATE_KEPT_MIN = 0.95
# The latency-target variant: rpct 95 with rlat = 1.5 x the probe's solo p99 (rounded up to 50 us), vrate
# free between 10 and 100. Why this rlat: iocost's read-latency target is the one knob in its own language
# for "reads stay within 1.5x of what they get alone"; the probe's solo p99 is that alone-latency at the
# planned load, so the target asks the controller to hold 95% of all reads under the isolation bound, and
# max 100 keeps vrate from over-committing the disk while it looks for that (issue 35: max 10000 failed).
LAT_RPCT = 95.0
LAT_FACTOR = 1.5
LAT_VRATE_MIN = 10.0
LAT_VRATE_MAX = 100.0
# The antagonist starts first. iocost moves vrate to a new min/max bound gradually (4% a period, and only
# while the device is busy: ioc_adjust_base_vrate() in block/blk-iocost.c), so the probe starts once the
# root io.stat's cost.vrate is within VRATE_SETTLED of the pinned level, or after SETTLE_MAX seconds
# (the point then records settled: false); the latency point gets SETTLE_LATENCY seconds to find its vrate.
# The probe measures after its ramp; the antagonist's IOPS are its scope's io.stat reads over the same window,
# and it is stopped when the probe ends.
PROBE_RAMP = 3
SETTLE_MAX = 6
SETTLE_LATENCY = 3
VRATE_SETTLED = 1.0
# Starting one fio process under systemd-run and reading its final report, besides its runtime (TCG guests:
# 2-4 s measured).
FIO_OVERHEAD_SECONDS = 4
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
RULE = ("vrate pinned (rpct=0 wpct=0 min=max=level) at each level with the measured model; probe: 4 KiB random reads "
        "QD1 at probe_share x rrandiops (fio rate_iops, linear) in a scope of IOWeight 1000; antagonist: 4 KiB random "
        "reads QD64 libaio in a scope of IOWeight 100; isolation = the highest level with probe p99 <= 1.5 x its solo "
        "p99 (iocost off) and >= 95% of its rate kept; bandwidth = level 100; latency = rpct 95, rlat 1.5 x solo p99, "
        "min 10 max 100, when it meets the isolation bound")
OPTION_KEYS = ("measure", "levels", "seconds", "probe_share", "latency_variant")


class SolutionError(Exception):
    """The phase could not run or its input is wrong: the message names the value and the fix."""


def options(given):
    """The phase's settings from the module's ``solutions`` option (None: not measured); SolutionError on bad input."""
    if given is None:
        return None
    if not isinstance(given, dict):
        raise SolutionError("solutions must be a dict such as {measure: true, levels: [100, 80, 60, 40]}, got %r"
                            % (given,))
    unknown = sorted(set(given) - set(OPTION_KEYS))
    if unknown:
        raise SolutionError("solutions: unknown key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(OPTION_KEYS)))
    opts = {"measure": True, "levels": list(DEFAULT_LEVELS), "seconds": DEFAULT_SECONDS,
            "probe_share": DEFAULT_PROBE_SHARE, "latency_variant": True}
    opts.update((k, v) for k, v in given.items() if v is not None)
    if not opts["measure"]:
        return None
    levels = opts["levels"]
    if not isinstance(levels, (list, tuple)) or not levels:
        raise SolutionError("solutions.levels must be a non-empty list of vrate percentages such as [100, 80, 60, 40], "
                            "got %r" % (levels,))
    clean = []
    for level in levels:
        try:
            number = float(level)
        except (TypeError, ValueError):
            number = None
        if isinstance(level, bool) or number is None or not 1 <= number <= 100:
            raise SolutionError("solutions.levels: %r is not a vrate percentage from 1 to 100 (a calibrated model's "
                                "100%% is the disk's measured capacity)" % (level,))
        clean.append(round(number, 2))
    if len(set(clean)) != len(clean):
        raise SolutionError("solutions.levels %r names a level twice" % (levels,))
    opts["levels"] = sorted(clean, reverse=True)
    seconds = opts["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 3 <= seconds <= 300:
        raise SolutionError("solutions.seconds must be a whole number of seconds from 3 to 300, got %r" % (seconds,))
    share = opts["probe_share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise SolutionError("solutions.probe_share is the probe's rate as a fraction of the measured rrandiops, "
                            "above 0 and below 1 (0.25 = a quarter of the disk), got %r" % (share,))
    opts["probe_share"] = float(share)
    opts["latency_variant"] = bool(opts["latency_variant"])
    return opts


def point_seconds(seconds, solo=False):
    """About the longest one point takes: the settling (not for the solo run), the probe's ramp, run and start-up."""
    return seconds + PROBE_RAMP + FIO_OVERHEAD_SECONDS + (0 if solo else SETTLE_MAX)


def phase_seconds(opts):
    """The phase's bound: the solo run, one point per level, the latency point."""
    if not opts:
        return 0
    points = len(opts["levels"]) + (1 if opts["latency_variant"] else 0)
    return point_seconds(opts["seconds"], solo=True) + points * point_seconds(opts["seconds"])


def preflight(fs, which):
    """(tools, None) when the phase can run here, else (None, the reason); reads only."""
    if not fs.exists(CGROUP_ROOT + "/cgroup.controllers"):
        return None, "%s is not a cgroup v2 mount: the solution phase needs cgroup v2 and iocost" % CGROUP_ROOT
    if not fs.exists(CGROUP_ROOT + "/io.cost.qos"):
        return None, ("this kernel has no %s/io.cost.qos (built without CONFIG_BLK_CGROUP_IOCOST): there is no iocost "
                      "to find solutions for" % CGROUP_ROOT)
    if "io" not in (fs.read(CGROUP_ROOT + "/cgroup.controllers") or "").split():
        return None, "the io controller is not available in %s/cgroup.controllers" % CGROUP_ROOT
    if not fs.exists("/run/systemd/system"):
        return None, ("the host does not run systemd (no /run/systemd/system): the solution phase starts its two "
                      "cgroups as systemd scopes; measure solutions on a systemd host of the same hardware class")
    tools = {}
    for name in ("systemd-run", "systemctl"):
        tools[name] = which(name)
        if tools[name] is None:
            return None, "%s is not installed: the solution phase starts its two cgroups with it" % name
    return tools, None


# ---------------------------------------------------------------------------------------------
# argv
# ---------------------------------------------------------------------------------------------

def _fio_common(binary, name, target, size_bytes):
    return [binary, "--name=aiinfra-%s" % name, "--filename=%s" % target, "--size=%d" % size_bytes, "--direct=1",
            "--thread", "--time_based", "--rw=randread", "--bs=%d" % fio.SMALL_BS, "--randrepeat=0", "--norandommap",
            "--output-format=json", "--eta=never", "--allow_mounted_write=0",
            "--percentile_list=%s" % ":".join("%g" % p for p in PERCENTILES)]


def probe_argv(binary, target, size_bytes, rate_iops, seconds):
    """The probe: 4 KiB random reads at QD1 (psync: one request at a time), held at ``rate_iops``."""
    if int(rate_iops) < 1:
        raise SolutionError("the probe's rate must be at least 1 IOPS, got %r" % (rate_iops,))
    return _fio_common(binary, "probe", target, size_bytes) + [
        "--ioengine=psync", "--iodepth=1", "--rate_iops=%d" % int(rate_iops), "--rate_process=linear",
        "--ramp_time=%d" % PROBE_RAMP, "--runtime=%d" % seconds]


def antagonist_argv(binary, target, size_bytes, seconds):
    """The antagonist: 4 KiB random reads at QD64 through libaio; it runs until stopped after the probe (its
    runtime only bounds a run whose stop never comes)."""
    return _fio_common(binary, "antagonist", target, size_bytes) + [
        "--ioengine=libaio", "--iodepth=64", "--runtime=%d" % (seconds + PROBE_RAMP + SETTLE_MAX + fio.STARTUP_GRACE)]


def scope_argv(systemd_run, unit, weight, argv):
    """``argv`` in a transient scope ``unit``.scope of the calibration slice with ``IOWeight`` and ``CPUWeight``
    ``weight`` (systemd-run execs it)."""
    return [systemd_run, "--scope", "--quiet", "--collect", "--slice=%s" % SLICE, "--unit=%s" % unit,
            "-p", "IOWeight=%d" % weight, "-p", "CPUWeight=%d" % weight, "--"] + list(argv)


def pinned_qos(level, rlat, wlat):
    return {"rpct": 0.0, "rlat": int(rlat), "wpct": 0.0, "wlat": int(wlat), "min": float(level), "max": float(level)}


def latency_qos(rlat, wlat):
    return {"rpct": LAT_RPCT, "rlat": int(rlat), "wpct": 0.0, "wlat": int(wlat), "min": LAT_VRATE_MIN,
            "max": LAT_VRATE_MAX}


def latency_target(solo_p99_us):
    """rlat for the latency variant: 1.5 x the probe's solo p99, rounded up to 50 us, at least 50 us."""
    return max(fio.QOS_LAT_MIN_US, int(math.ceil(LAT_FACTOR * solo_p99_us / fio.QOS_LAT_STEP_US - 1e-9))
               * fio.QOS_LAT_STEP_US)


# ---------------------------------------------------------------------------------------------
# Running one point
# ---------------------------------------------------------------------------------------------

def _read_figures(dump, what, argv):
    """(iops, {pct: us}) of a finished fio run's reads."""
    try:
        job = dump["jobs"][0]
        if job.get("error"):
            raise ValueError("fio reports error %s" % job["error"])
        read = job["read"]
        pct = (read.get("clat_ns") or {}).get("percentile") or {}
        if not pct:
            raise ValueError("no completion-latency percentiles (no read completed)")
        return float(read["iops"]), dict(("%s" % float(k), round(float(v) / 1000.0, 1)) for k, v in pct.items())
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise fio.FioError(argv, 0, "", "fio %s: cannot read its JSON result (%s)" % (what, e))


def _vrate(fs, majmin):
    """iocost's current vrate (%) for the disk from the root io.stat's cost.vrate; None when iocost is off."""
    for line in (fs.read(CGROUP_ROOT + "/io.stat") or "").splitlines():
        if line.startswith(majmin + " "):
            for kv in line.split()[1:]:
                if kv.startswith("cost.vrate="):
                    try:
                        return float(kv.split("=", 1)[1])
                    except ValueError:
                        return None
    return None


def _reads(fs, cgroup, majmin):
    """The ``rios`` counter of a cgroup's io.stat for the disk, or None."""
    for line in (fs.read("%s/%s/io.stat" % (CGROUP_ROOT, cgroup)) or "").splitlines():
        if line.startswith(majmin + " "):
            for kv in line.split()[1:]:
                if kv.startswith("rios="):
                    return int(kv.split("=", 1)[1])
    return None


def _fail(what, argv, child, rc):
    tool = " ".join(argv[:argv.index("--")] if "--" in argv else argv[:1])
    return fio.FioError(argv, rc, child.stderr, "%s (%s) failed (rc=%s): %s" % (
        what, tool, rc, " ".join((child.stderr or "").strip().splitlines()[-3:]) or "no message"))


def _result(what, argv, child, out):
    found = fio.split_dumps(out)
    if not found:
        raise fio.FioError(argv, child.proc.poll(), child.stderr, "fio %s printed no JSON result%s" % (
            what, ": %s" % child.stderr.strip()[-300:] if child.stderr.strip() else ""))
    return found[-1]


def run_point(fs, majmin, probe, seconds, antagonist=None, settle=None, popen=subprocess.Popen,
              clock=time.monotonic):
    """One point: the antagonist (``(argv, cgroup)``) first, vrate settled, then the probe (argv) to its end.

    ``settle``: the pinned level to wait for (root io.stat's cost.vrate within VRATE_SETTLED, at most
    SETTLE_MAX s), a number of seconds to wait (``("wait", s)``), or None. Returns {"probe": fio's JSON,
    "antagonist_iops", "antagonist": fio's JSON or None, "vrate": samples over the probe's window,
    "settled", "settle_seconds"}. A child that fails, or one that runs past its bound, ends the point with a
    FioError naming the command, its rc and stderr; every child is killed and reaped on the way out.
    """
    a_child = p_child = None
    a_out, p_out = [], []
    try:
        out = {"vrate": [], "settled": None, "settle_seconds": 0.0, "antagonist": None, "antagonist_iops": None}
        if antagonist is not None:
            a_argv, a_cgroup = antagonist
            a_child = Child(popen, a_argv, clock, stderr_tail=fio.STDERR_TAIL)
            t0 = clock()
            limit = SETTLE_LATENCY if isinstance(settle, tuple) else SETTLE_MAX
            while True:
                a_out.append(a_child.read(0.25))
                if not a_child.open:
                    raise _fail("the antagonist", a_argv, a_child, a_child.wait(STOP_TIMEOUT))
                waited = clock() - t0
                vrate = _vrate(fs, majmin)
                if isinstance(settle, (int, float)) and vrate is not None and abs(vrate - settle) <= VRATE_SETTLED:
                    out["settled"] = True
                    break
                if waited >= limit:
                    out["settled"] = False if isinstance(settle, (int, float)) else None
                    break
            out["settle_seconds"] = round(clock() - t0, 2)
        p_child = Child(popen, probe, clock, stderr_tail=fio.STDERR_TAIL)
        started = clock()
        deadline = started + seconds + PROBE_RAMP + fio.STARTUP_GRACE
        window = None       # (time, antagonist reads) when the probe's ramp is over
        next_sample = started
        while p_child.open:
            p_out.append(p_child.read(0.2))
            if a_child is not None and a_child.open:
                a_out.append(a_child.read(0))
            now = clock()
            if a_child is not None and window is None and now - started >= PROBE_RAMP + 1:
                window = (now, _reads(fs, a_cgroup, majmin))
            if window is not None and now >= next_sample:
                value = _vrate(fs, majmin)
                if value is not None:
                    out["vrate"].append(value)
                next_sample = now + 0.5
            if now > deadline:
                raise fio.FioError(probe, None, p_child.stderr, "fio probe gave no result after %d s; it was killed"
                                   % (now - started))
        rc = p_child.wait(STOP_TIMEOUT)
        if rc != 0:
            raise _fail("the probe", probe, p_child, rc)
        out["probe"] = _result("probe", probe, p_child, "".join(p_out))
        if a_child is not None:
            end = (clock(), _reads(fs, a_cgroup, majmin))
            if window is not None and window[1] is not None and end[1] is not None and end[0] > window[0]:
                out["antagonist_iops"] = round((end[1] - window[1]) / (end[0] - window[0]), 1)
            if not a_child.open:
                raise _fail("the antagonist", a_argv, a_child, a_child.wait(STOP_TIMEOUT))
            a_out.append(a_child.stop(STOP_TIMEOUT))     # SIGINT: fio prints its result and exits
            out["antagonist"] = _result("antagonist", a_argv, a_child, "".join(a_out))
        return out
    finally:
        # on the way out by an exception (signals included) both are killed; after a point, reaped
        for child in (p_child, a_child):
            if child is not None:
                child.kill()


def point_figures(dumps, argvs, requested, rrandiops, solo_p99=None, antagonist_iops=None):
    """One point's figures from the fio results of its probe (and antagonist); ``antagonist_iops`` (from its
    scope's io.stat over the probe's window) wins over fio's average over the antagonist's whole run."""
    iops, pct = _read_figures(dumps["probe"], "probe", argvs["probe"])
    p99 = pct.get("99.0")
    out = {"probe_requested_iops": int(requested), "probe_iops": round(iops, 1),
           "rate_kept": round(iops / requested, 4) if requested else None,
           "probe_p50_us": pct.get("50.0"), "probe_p99_us": p99, "probe_p999_us": pct.get("99.9"),
           "probe_p99_ratio": round(p99 / solo_p99, 3) if solo_p99 and p99 is not None else None}
    if dumps.get("antagonist") is not None:
        a_iops, _apct = _read_figures(dumps["antagonist"], "antagonist", argvs["antagonist"])
        if antagonist_iops is not None:
            a_iops = antagonist_iops
        out.update(antagonist_iops=round(a_iops, 1), antagonist_share=round(a_iops / rrandiops, 4))
    return out


class Phase:
    """What one solution phase needs: the disk, fio and systemd-run, the target and the measured model."""

    def __init__(self, fs, record, binary, tools, target, opts, model, write_qos, popen=subprocess.Popen,
                 clock=time.monotonic):
        self.fs = fs
        self.record = record
        self.binary = binary
        self.tools = tools
        self.target = target
        self.opts = opts
        self.model = model
        self.write_qos = write_qos      # write_qos(model or None, qos dict) -> the disk's io.cost.qos line
        self.popen = popen
        self.clock = clock
        self.tag = "%d" % int(time.time() * 1000)

    def units(self, n):
        return ("iocost-calibrate-probe-%s-%d" % (self.tag, n), "iocost-calibrate-antagonist-%s-%d" % (self.tag, n))

    def measure(self, n, rate, settle=None, solo_p99=None):
        """One point: the probe at ``rate`` alone (``settle`` False) or beside the antagonist, after vrate settled
        at the pinned level ``settle`` (a number) or for SETTLE_LATENCY seconds (``True``)."""
        seconds = self.opts["seconds"]
        probe_unit, antagonist_unit = self.units(n)
        argvs = {"probe": scope_argv(self.tools["systemd-run"], probe_unit, PROBE_WEIGHT, probe_argv(
            self.binary, self.target.path, self.target.size_bytes, rate, seconds))}
        antagonist = None
        if settle is not False:
            argvs["antagonist"] = scope_argv(self.tools["systemd-run"], antagonist_unit, ANTAGONIST_WEIGHT,
                                             antagonist_argv(self.binary, self.target.path, self.target.size_bytes,
                                                             seconds))
            antagonist = (argvs["antagonist"], "%s/%s.scope" % (SLICE, antagonist_unit))
        t0 = self.clock()
        res = run_point(self.fs, self.record.majmin, argvs["probe"], seconds, antagonist,
                        ("wait", SETTLE_LATENCY) if settle is True else settle, popen=self.popen, clock=self.clock)
        out = point_figures(res, argvs, rate, self.model["rrandiops"], solo_p99, res["antagonist_iops"])
        samples = res["vrate"]
        out["vrate"] = ({"mean": round(sum(samples) / len(samples), 2), "min": min(samples), "max": max(samples),
                         "n": len(samples)} if samples else None)
        out.update(settled=res["settled"], settle_seconds=res["settle_seconds"], seconds=round(self.clock() - t0, 1))
        return out


def run_phase(phase):
    """The solo run, the pinned levels and the latency point; returns the phase report (points, solutions)."""
    opts = phase.opts
    rrandiops = phase.model["rrandiops"]
    rate = max(1, int(round(opts["probe_share"] * rrandiops)))
    t0 = phase.clock()
    solo = phase.measure(0, rate, False)
    solo.update(variant="solo", level=None, qos=None, qos_line=None)
    if not solo.get("probe_p99_us"):
        raise SolutionError("the probe's solo run measured no p99 latency")
    rlat = latency_target(solo["probe_p99_us"])
    # a pinned point has no latency target (rpct/wpct 0), but its rlat/wlat still set iocost's period: 2 x the
    # larger of the two (ioc_refresh_period_us() in block/blk-iocost.c, 1 ms to 1 s). Both are the latency
    # target's rlat, so the period (a few ms) is on the scale of the probe's own latency, not the model phase's
    # saturated latencies (tens of ms: a period of 100 ms and more, which lets a burst of the antagonist through)
    wlat = plain_rlat = rlat
    points = []
    plan = [("pinned", level, pinned_qos(level, plain_rlat, wlat)) for level in opts["levels"]]
    if opts["latency_variant"]:
        plan.append(("latency", None, latency_qos(rlat, wlat)))
    for n, (variant, level, qos) in enumerate(plan, 1):
        line = phase.write_qos(phase.model if n == 1 else None, qos)
        point = phase.measure(n, rate, level if level is not None else True, solo["probe_p99_us"])
        point.update(variant=variant, level=level, qos=qos, qos_line=line)
        points.append(point)
    solutions, notes = derive(points)
    return {"rule": RULE, "probe_share": opts["probe_share"], "probe_iops": rate, "rrandiops": rrandiops,
            "levels": opts["levels"], "point_seconds": opts["seconds"], "latency_rlat": rlat, "solo": solo,
            "points": points, "solutions": solutions, "notes": notes,
            "seconds": round(phase.clock() - t0, 1)}


# ---------------------------------------------------------------------------------------------
# Solutions from the points
# ---------------------------------------------------------------------------------------------

FIGURES = ("probe_p99_us", "probe_p99_ratio", "rate_kept", "probe_iops", "probe_requested_iops", "antagonist_iops",
           "antagonist_share")


def holds(point):
    """The isolation criterion: p99 within P99_BOUND x solo and the rate kept."""
    ratio, kept = point.get("probe_p99_ratio"), point.get("rate_kept")
    return ratio is not None and kept is not None and ratio <= P99_BOUND and kept >= RATE_KEPT_MIN


def solution(point, why):
    out = {"qos": dict(point["qos"]), "vrate": point.get("level"), "why": why,
           "vrate_read": (point.get("vrate") or {}).get("mean")}
    out.update((k, point.get(k)) for k in FIGURES)
    return out


def derive(points):
    """({name: solution}, notes) from the measured points (see the module docstring)."""
    notes = []
    pinned = sorted([p for p in points if p.get("variant") == "pinned"], key=lambda p: -p["level"])
    solutions = {}
    held = [p for p in pinned if holds(p)]
    if held:
        solutions["isolation"] = solution(held[0], "the highest pinned vrate with probe p99 <= %gx solo and >= %d%% "
                                          "of its rate" % (P99_BOUND, int(RATE_KEPT_MIN * 100)))
    else:
        solutions["isolation"] = None
        notes.append("no pinned level (%s) held the probe within %gx its solo p99 at >= %d%% of its rate: no "
                     "isolation solution; measure lower levels (solutions.levels) or a smaller probe_share"
                     % (", ".join("%g" % p["level"] for p in pinned), P99_BOUND, int(RATE_KEPT_MIN * 100)))
    full = [p for p in pinned if p["level"] == 100]
    if full:
        solutions["bandwidth"] = solution(full[0], "vrate 100 pinned: the measured capacity, no latency target")
    else:
        notes.append("level 100 was not measured: no bandwidth solution")
    for p in points:
        if p.get("variant") != "latency":
            continue
        if holds(p):
            solutions["latency"] = solution(p, "latency target rpct %g rlat %d us, vrate %g-%g: held the probe "
                                            "within %gx solo" % (LAT_RPCT, p["qos"]["rlat"], LAT_VRATE_MIN,
                                                                 LAT_VRATE_MAX, P99_BOUND))
        else:
            values = (LAT_RPCT, p["qos"]["rlat"], LAT_VRATE_MIN, LAT_VRATE_MAX, p.get("probe_p99_ratio"),
                      p.get("rate_kept"))
            notes.append("the latency target (rpct %g rlat %d us, min %g max %g) gave the probe %sx its solo p99 at "
                         "%s of its rate: not a solution" % values)
    return solutions, notes


def qos_line(fs, majmin):
    """The disk's line of io.cost.qos as the kernel shows it, or None."""
    for line in (fs.read(CGROUP_ROOT + "/io.cost.qos") or "").splitlines():
        if line.startswith(majmin + " "):
            return line.strip()
    return None


def stop_slice(run, systemctl, fs, wait=10.0, clock=time.monotonic, sleep=time.sleep):
    """Stop the calibration slice (and so anything left in it); None, or what is left and how to fix it."""
    rc, _out, err = run([systemctl, "stop", SLICE])
    # 5: the unit is not loaded (nothing was started, or systemd already collected it)
    if rc not in (0, 5):
        return ("`systemctl stop %s` failed (rc=%s): %s; stop it by hand (systemctl stop %s)"
                % (SLICE, rc, (err or "").strip()[:300], SLICE))
    deadline = clock() + wait
    path = "%s/%s" % (CGROUP_ROOT, SLICE)
    while fs.exists(path):
        if clock() > deadline:
            return ("%s still exists %d s after `systemctl stop %s`; check `systemctl status %s` and stop what is "
                    "left in it" % (path, wait, SLICE, SLICE))
        sleep(0.2)
    return None
