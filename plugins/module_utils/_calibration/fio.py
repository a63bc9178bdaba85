# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fio driver of iocost_calibrate: the six blk-iocost coefficients and the QoS latency targets.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

* The six measurements have the shapes of the kernel's ``tools/cgroup/iocost_coef_gen.py``
  (direct I/O, libaio, 128 MiB blocks at depth 1 for the bandwidths, 4 KiB at depth 64 for the
  IOPS), so the values are comparable with the reference tool's.
* fio runs with ``--output-format=json --status-interval=1``: every second it prints its complete,
  cumulative JSON status on stdout. :class:`DumpStream` cuts the stream into objects,
  :class:`WindowTracker` turns successive objects into one-second rates, and :class:`StopRule`
  decides when the running estimate has stopped moving; then fio is stopped (SIGINT).
* What fio's JSON really holds was checked against recordings of fio 3.33 (Debian 12) and 3.39
  (Debian 13), kept in ``tests/unit/plugins/module_utils/fixtures/fio/``:

  - ``<dir>.io_bytes`` counts COMPLETED bytes; ``<dir>.total_ios`` counts SUBMITTED I/Os (a
    128 MiB read shows ``total_ios: 2`` with ``io_bytes: 0``). The amount is therefore
    ``io_bytes`` (bytes) or ``io_bytes / bs`` (I/Os), never ``total_ios``.
  - ``<dir>.runtime`` (ms) is the time axis: cumulative and monotonic in every recording, and with
    ``group_reporting`` it is the group's time (the longest job), where ``job_runtime`` is the SUM
    of the jobs' times (2 jobs: job_runtime 1748 for runtime 873). ``job_runtime`` also holds
    garbage before the first I/O (121384 ms in a dump taken 0.9 s after the start, fio 3.39), and
    ``elapsed`` is whole seconds including fio's start-up. Neither is used.
  - The final object repeats the last status object when fio ends on its own (same runtime): such
    a zero-length step gives no window.
* Processes: :class:`_commands.Child` (argv lists, C locale, pipes read while fio runs), the child
  always killed and reaped when a function leaves by an exception (including exceptions raised by
  the caller's signal handlers); ``AnsibleModule.run_command`` only returns at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import subprocess
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import STOP_TIMEOUT, Child

BIG_BS = 128 * 1024 * 1024
SMALL_BS = 4096

# Completion-latency percentiles requested from fio in the QoS runs (fio prints them as "95.000000").
PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99)
QOS_RATE_FRACTION = 0.9
QOS_LAT_FACTOR = 1.5
QOS_LAT_STEP_US = 50
QOS_LAT_MIN_US = 50
QOS_LAT_MAX_US = 5000000
QOS_VRATE_MIN = 60.0
QOS_VRATE_MAX = 100.0
QOS_RULE = ("rpct/wpct = 95 (50 on rotational disks); rlat/wlat = 1.5 x the p95 (p50 on rotational disks) "
            "completion latency of 4 KiB random reads/writes at iodepth 64, rate-limited to 90% of the measured "
            "rrandiops/wrandiops, rounded up to a multiple of 50 us and clamped to [50 us, 5 s]; vrate min=60 "
            "max=100 (the method of resctl-bench's quick iocost-params)")

# How long fio may take beyond its own --runtime before it is called hung (start-up, file layout,
# final output; fio under emulation needs seconds to start).
STARTUP_GRACE = 60.0
# How much of fio's stderr an error keeps (the stop timeouts are _commands.STOP_TIMEOUT).
STDERR_TAIL = 4000


class Measurement:
    """One of the six coefficients: fio's rw, block size (None = the big block) and queue depth."""

    def __init__(self, name, rw, bs, iodepth, unit):
        self.name = name
        self.rw = rw
        self.bs = bs
        self.iodepth = iodepth
        self.unit = unit

    @property
    def side(self):
        """The direction fio reports the I/O under: 'read' or 'write'."""
        return "write" if "write" in self.rw else "read"

    @property
    def random(self):
        return self.rw.startswith("rand")

    def block_size(self, big_bs=BIG_BS):
        return big_bs if self.unit == "bytes" else self.bs

    def as_dict(self):
        return {"name": self.name, "rw": self.rw, "bs": self.bs, "iodepth": self.iodepth, "unit": self.unit}

    def __repr__(self):
        return "Measurement(%r, %r, %r, %r, %r)" % (self.name, self.rw, self.bs, self.iodepth, self.unit)


MEASUREMENTS = (
    Measurement("rbps", "read", BIG_BS, 1, "bytes"),
    Measurement("rseqiops", "read", SMALL_BS, 64, "iops"),
    Measurement("rrandiops", "randread", SMALL_BS, 64, "iops"),
    Measurement("wbps", "write", BIG_BS, 1, "bytes"),
    Measurement("wseqiops", "write", SMALL_BS, 64, "iops"),
    Measurement("wrandiops", "randwrite", SMALL_BS, 64, "iops"),
)
MEASUREMENT_BY_NAME = dict((m.name, m) for m in MEASUREMENTS)


class FioError(Exception):
    """fio failed or could not be run; the message names the measurement, the target and what fio said."""

    def __init__(self, argv, rc, stderr_tail, message):
        self.argv = list(argv or [])
        self.rc = rc
        self.stderr = (stderr_tail or "").strip()[-STDERR_TAIL:]
        self.stderr_tail = self.stderr
        self.msg = message
        self.message = message
        super(FioError, self).__init__(message)

    def as_dict(self):
        return {"argv": self.argv, "rc": self.rc, "stderr": self.stderr, "msg": self.msg}


# ---------------------------------------------------------------------------------------------
# fio version
# ---------------------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"fio-(\d+)\.(\d+)")


def fio_version(run, fio="fio"):
    """``fio --version`` ("fio-3.39") -> "3.39"; ValueError for a failure or a fio older than 3.x.

    ``run(argv)`` returns ``(rc, stdout, stderr)``.
    """
    rc, out, err = run([fio, "--version"])
    text = (out or "").strip()
    if rc != 0:
        raise ValueError("`%s --version` failed (rc=%s): %s" % (fio, rc, ((err or "") + text).strip()[:300]))
    m = _VERSION_RE.search(text)
    if not m:
        raise ValueError("cannot read fio's version from `%s --version` output %r; fio 3.x is needed" % (fio, text[:200]))
    major, minor = int(m.group(1)), int(m.group(2))
    if major < 3:
        raise ValueError("fio %d.%d is too old: calibration needs fio 3.x (JSON status output every second); "
                         "install a newer fio" % (major, minor))
    return "%d.%d" % (major, minor)


# ---------------------------------------------------------------------------------------------
# argv
# ---------------------------------------------------------------------------------------------

def _check_size(size_bytes, big_bs):
    if not isinstance(big_bs, int) or isinstance(big_bs, bool) or big_bs < SMALL_BS or big_bs % SMALL_BS:
        raise ValueError("big_bs must be a whole number of 4 KiB blocks, got %r" % (big_bs,))
    if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes < 2 * big_bs:
        raise ValueError("the fio target must hold at least two big blocks (2 x %d bytes), got %r bytes; give a "
                         "larger target or a smaller big block size" % (big_bs, size_bytes))


def _common_argv(fio, name, target, size_bytes, seconds):
    return [fio, "--name=aiinfra-%s" % name, "--filename=%s" % target, "--size=%d" % size_bytes,
            "--direct=1", "--ioengine=libaio", "--thread", "--time_based", "--runtime=%d" % seconds]


def measurement_argv(fio, m, target, size_bytes, max_seconds, numjobs=1, big_bs=BIG_BS, status_interval=1,
                     offset=0):
    """fio's argv for one measurement (a list: never a shell string).

    fio works on ``[offset, size_bytes)`` of ``target``. ``--allow_mounted_write=0`` (fio's default,
    spelled out) makes fio refuse to write to a mounted device; ``--eta=never`` keeps progress lines
    off stdout. All options exist in fio 3.33 and 3.39.
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset % SMALL_BS:
        raise ValueError("offset must be a multiple of 4096 bytes, got %r" % (offset,))
    _check_size(size_bytes - offset, big_bs)
    if numjobs < 1:
        raise ValueError("numjobs must be at least 1, got %r" % (numjobs,))
    seconds = int(math.ceil(max_seconds))
    if seconds < 1:
        raise ValueError("max_seconds must be at least 1, got %r" % (max_seconds,))
    argv = _common_argv(fio, m.name, target, size_bytes - offset if offset else size_bytes, seconds)
    if offset:
        argv.append("--offset=%d" % offset)
    argv += ["--rw=%s" % m.rw, "--bs=%d" % m.block_size(big_bs), "--iodepth=%d" % m.iodepth,
             "--numjobs=%d" % numjobs, "--group_reporting", "--output-format=json",
             "--status-interval=%d" % status_interval, "--eta=never", "--allow_mounted_write=0"]
    if m.random:
        argv += ["--randrepeat=0", "--norandommap"]
    return argv


def qos_argv(fio, target, size_bytes, rw, rate_iops, seconds):
    """fio's argv for one QoS latency run: 4 KiB random ``rw`` at depth 64, limited to ``rate_iops``."""
    if rw not in [r for dummy, r in QOS_RUNS]:
        raise ValueError("rw must be randread or randwrite, got %r" % (rw,))
    if size_bytes < 2 * SMALL_BS:
        raise ValueError("the fio target is too small: %r bytes" % (size_bytes,))
    if int(rate_iops) < 1:
        raise ValueError("rate_iops must be at least 1, got %r" % (rate_iops,))
    argv = _common_argv(fio, "qos-%s" % rw[4:], target, size_bytes, int(math.ceil(seconds)))
    argv += ["--rw=%s" % rw, "--bs=%d" % SMALL_BS, "--iodepth=64", "--numjobs=1", "--group_reporting",
             "--output-format=json", "--eta=never", "--allow_mounted_write=0", "--randrepeat=0", "--norandommap",
             "--rate_iops=%d" % int(rate_iops),
             "--percentile_list=%s" % ":".join("%g" % p for p in PERCENTILES)]
    return argv


# ---------------------------------------------------------------------------------------------
# The status stream
# ---------------------------------------------------------------------------------------------

_OUTSIDE = re.compile(r'[{}"\n\r]')
_NEWLINE = re.compile(r"[\n\r]")
_INSIDE_STRING = re.compile(r'["\\\n\r]')
MAX_OBJECT = 64 * 1024 * 1024


class DumpStream:
    """Cuts fio's stdout into its JSON objects, whatever the read boundaries.

    An object starts with ``{`` at the start of a line and ends where its braces balance (strings
    and escapes respected). Other lines (``fio: ...`` warnings, the normal-output text) are
    skipped. A candidate that is not valid JSON is dropped; a raw newline inside a string, or a new
    ``{`` at the start of a line before the candidate closed, abandons it (fio's own objects are
    indented and never hold raw newlines), so garbage cannot swallow the objects after it. Only
    objects with the key ``require`` (default ``"jobs"``: fio's status objects) are returned; None
    returns every object.
    """

    def __init__(self, require="jobs"):
        self.require = require
        self._buf = ""        # the current candidate object's text (or "" outside one)
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._line_start = True
        self._skip_line = False
        self.skipped = 0      # candidates dropped as invalid

    def feed(self, text):
        """Add text; returns the list of complete objects (dicts) it finished."""
        out = []
        i, n = 0, len(text)
        while i < n:
            if self._depth == 0:
                i = self._outside(text, i, n)
                continue
            i = self._inside(text, i, n, out)
        return out

    def _outside(self, text, i, n):
        if self._skip_line:
            j = _next_newline(text, i)
            if j < 0:
                return n
            self._skip_line = False
            self._line_start = True
            return j + 1
        c = text[i]
        if c in "\n\r":
            self._line_start = True
            return i + 1
        if self._line_start and c == "{":
            self._start(i + 1)
            return i + 1
        self._line_start = False
        self._skip_line = True
        return i

    def _start(self, _pos):
        self._buf = "{"
        self._depth = 1
        self._in_string = False
        self._escape = False
        self._line_start = False

    def _abandon(self):
        self.skipped += 1
        self._buf = ""
        self._depth = 0
        self._in_string = False
        self._escape = False

    def _inside(self, text, i, n, out):
        start = i
        while i < n:
            if self._escape:
                self._escape = False
                i += 1
                continue
            if self._in_string:
                m = _INSIDE_STRING.search(text, i)
                if not m:
                    i = n
                    break
                i = m.start()
                c = text[i]
                if c == "\\":
                    self._escape = True
                elif c == '"':
                    self._in_string = False
                else:  # a raw newline cannot be in a JSON string: this was not fio's object
                    self._abandon()
                    self._line_start = True
                    return i + 1
                i += 1
                continue
            if self._line_start and text[i] == "{":
                # a new object starts at column 0 before this one closed: drop this one
                self._abandon()
                self._start(i + 1)
                return i + 1
            self._line_start = False
            m = _OUTSIDE.search(text, i)
            if not m:
                i = n
                break
            i = m.start()
            c = text[i]
            if c == '"':
                self._in_string = True
            elif c == "{":
                self._depth += 1
            elif c == "}":
                self._depth -= 1
                if self._depth == 0:
                    self._buf += text[start:i + 1]
                    self._finish(out)
                    self._skip_line = False
                    self._line_start = False
                    return i + 1
            else:  # newline
                self._line_start = True
            i += 1
        self._buf += text[start:i]
        if len(self._buf) > MAX_OBJECT:
            self._abandon()
            self._skip_line = True
        return i

    def _finish(self, out):
        text, self._buf = self._buf, ""
        try:
            obj = json.loads(text)
        except ValueError:
            self.skipped += 1
            return
        if isinstance(obj, dict) and (self.require is None or self.require in obj):
            out.append(obj)
        else:
            self.skipped += 1


def _next_newline(text, i):
    m = _NEWLINE.search(text, i)
    return m.start() if m else -1


def split_dumps(text, require="jobs"):
    """All status objects in a complete fio output."""
    return DumpStream(require).feed(text + "\n")


# ---------------------------------------------------------------------------------------------
# Windows, the stop rule
# ---------------------------------------------------------------------------------------------

def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not a number: %r" % (value,))
    return value


def job_totals(dump, side):
    """(runtime_ms, io_bytes) of ``side`` summed over a status object's jobs.

    The time is the longest job's (fio's own group_reporting rule); the bytes are summed. A job
    entry with a non-zero ``error`` raises ValueError with fio's errno.
    """
    jobs = dump.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ValueError("fio status without jobs")
    runtime = 0
    io_bytes = 0
    for job in jobs:
        if not isinstance(job, dict):
            raise ValueError("fio status with a malformed job entry")
        err = job.get("error", 0)
        if err:
            why = os.strerror(err) if isinstance(err, int) else err
            raise ValueError("fio job %s reports error %s (%s)" % (job.get("jobname"), err, why))
        d = job.get(side)
        if not isinstance(d, dict):
            raise ValueError("fio status without %s statistics" % side)
        runtime = max(runtime, _num(d.get("runtime")))
        io_bytes += _num(d.get("io_bytes"))
    return runtime, io_bytes


class WindowTracker:
    """Turns successive cumulative status objects into windows ``(t_end_seconds, rate)``.

    ``t_end`` is fio's own runtime of the measured direction (seconds since the job started, not
    wall time). ``rate`` is bytes/s (``*bps``) or completed I/Os per second (``io_bytes / bs``).
    A step shorter than ``min_window`` seconds gives no window: its I/O is carried into the next
    one, so windows are contiguous (each starts where the previous ended; the first at 0). Steps
    where the time or the I/O goes backwards are ignored.
    """

    def __init__(self, measurement, big_bs=BIG_BS, min_window=0.5):
        self.measurement = measurement
        self.divisor = 1 if measurement.unit == "bytes" else measurement.block_size(big_bs)
        self.min_window = min_window
        self.base_ms = 0
        self.base_bytes = 0
        self.last = None          # (runtime_ms, io_bytes) of the newest dump
        self.dumps = 0

    def add(self, dump):
        runtime_ms, io_bytes = job_totals(dump, self.measurement.side)
        self.dumps += 1
        if self.last is not None and (runtime_ms < self.last[0] or io_bytes < self.last[1]):
            return None
        self.last = (runtime_ms, io_bytes)
        dt = (runtime_ms - self.base_ms) / 1000.0
        if dt <= 0 or dt < self.min_window:
            return None
        rate = (io_bytes - self.base_bytes) / float(self.divisor) / dt
        self.base_ms, self.base_bytes = runtime_ms, io_bytes
        return (runtime_ms / 1000.0, rate)

    def totals(self):
        """(seconds, amount) over the whole run so far (amount in the measurement's unit)."""
        if self.last is None:
            return 0.0, 0.0
        return self.last[0] / 1000.0, self.last[1] / float(self.divisor)


class StopRule:
    """When a measurement has run long enough. Pure: feed it windows, read the decision.

    The estimate is the post-ramp cumulative mean rate (post-ramp amount / post-ramp time); a
    window counts as post-ramp once at least half of it lies after ``ramp_seconds``. The rule is
    ``"stable"`` once ``min_seconds`` have passed, the last ``windows`` estimates (one per window)
    all lie within ``tolerance`` of their mean, AND the relative standard error of the post-ramp
    window rates (std / sqrt(n) / mean) is at most ``max_rse`` (default: ``tolerance``). It is
    ``"max"`` at ``max_seconds`` (fio's runtime) otherwise; ``"ended"`` when fio ended before
    either (see :meth:`end`).

    ``passes`` (default 3) is not used by the rule itself: the calibration runs every measurement
    that many times, in rounds (all six, all six again, ...), and :func:`combine_passes` merges them.
    Why: the lab's emulated disk (and a real SSD's garbage collection or a thermal limit) swings over
    minutes, slower than any stop rule can see inside one run; its one-second windows agree within
    2-5% while successive 20-second runs differ by up to 30%. Short passes spread over the whole
    calibration sample more phases of the swing than one long run of the same length.

    Why the second condition: a cumulative mean moves by about (rate - mean) / n per window, so
    with enough windows it "stops moving" whatever the noise (alternating +-50% windows pass the
    first test after 18 windows), and on the lab's emulated disks the first test alone stopped
    after 6-11 s with estimates up to 19% away from the 25 s mean. (Windows of an emulated disk are
    correlated over seconds, so the RSE is then optimistic; it is still the better stop.)
    """

    PARAMS = ("ramp_seconds", "windows", "tolerance", "min_seconds", "max_seconds", "max_rse", "passes")

    def __init__(self, ramp_seconds=2, windows=3, tolerance=0.02, min_seconds=5, max_seconds=6, max_rse=None,
                 passes=3):
        for name, value in (("ramp_seconds", ramp_seconds), ("tolerance", tolerance),
                            ("min_seconds", min_seconds), ("max_seconds", max_seconds)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError("%s must be a number, got %r" % (name, value))
        if isinstance(windows, bool) or not isinstance(windows, int):
            raise ValueError("windows must be a whole number, got %r" % (windows,))
        if ramp_seconds < 0:
            raise ValueError("ramp_seconds must be 0 or more, got %r" % (ramp_seconds,))
        if windows < 2:
            raise ValueError("windows must be at least 2 (one estimate cannot show that it stopped moving), "
                             "got %r" % (windows,))
        if not 0 < tolerance < 1:
            raise ValueError("tolerance is a fraction of the estimate between 0 and 1 (0.02 = 2%%), got %r"
                             % (tolerance,))
        if min_seconds <= 0:
            raise ValueError("min_seconds must be more than 0, got %r" % (min_seconds,))
        if max_seconds < min_seconds:
            raise ValueError("max_seconds (%r) must not be less than min_seconds (%r)" % (max_seconds, min_seconds))
        if max_seconds <= ramp_seconds + 1:
            raise ValueError("max_seconds (%r) must exceed ramp_seconds (%r) by more than one second, or nothing is "
                             "measured after the ramp" % (max_seconds, ramp_seconds))
        if max_seconds > 3600:
            raise ValueError("max_seconds must be at most 3600, got %r" % (max_seconds,))
        if max_rse is None:
            max_rse = tolerance
        if isinstance(max_rse, bool) or not isinstance(max_rse, (int, float)) or not 0 < max_rse < 1:
            raise ValueError("max_rse is a fraction between 0 and 1 (0.02 = 2%%; default: tolerance), got %r"
                             % (max_rse,))
        if isinstance(passes, bool) or not isinstance(passes, int) or not 1 <= passes <= 10:
            raise ValueError("passes must be a whole number from 1 to 10, got %r" % (passes,))
        self.passes = passes
        self.ramp_seconds = ramp_seconds
        self.window_count = windows
        self.tolerance = tolerance
        self.min_seconds = min_seconds
        self.max_seconds = max_seconds
        self.max_rse = max_rse
        self.reset()

    def reset(self):
        self.windows = []      # [t_end, rate] of every window
        self.estimates = []    # [t_end, estimate] one per post-ramp window
        self.stopped = None
        self.t = 0.0
        self._post_amount = 0.0
        self._post_time = 0.0
        self._post_rates = []

    def fresh(self):
        """A new rule with the same parameters and no state."""
        return StopRule(**self.as_dict())

    def as_dict(self):
        return {"ramp_seconds": self.ramp_seconds, "windows": self.window_count, "tolerance": self.tolerance,
                "min_seconds": self.min_seconds, "max_seconds": self.max_seconds, "max_rse": self.max_rse,
                "passes": self.passes}

    @property
    def estimate(self):
        return self.estimates[-1][1] if self.estimates else None

    @property
    def post_seconds(self):
        """Seconds of measurement after the ramp: the weight of this run's estimate."""
        return self._post_time

    def update(self, window):
        """Add a window ``(t_end, rate)``; returns None (go on), "stable" or "max"."""
        if self.stopped is not None:
            return self.stopped
        t_end, rate = float(window[0]), float(window[1])
        t_start = self.t
        if t_end <= t_start:
            return None
        self.t = t_end
        self.windows.append([t_end, rate])
        if (t_start + t_end) / 2.0 >= self.ramp_seconds:
            self._post_amount += rate * (t_end - t_start)
            self._post_time += t_end - t_start
            self._post_rates.append(rate)
            self.estimates.append([t_end, self._post_amount / self._post_time])
        if t_end >= self.min_seconds and self._settled():
            self.stopped = "stable"
        elif t_end >= self.max_seconds:
            self.stopped = "max"
        return self.stopped

    def _settled(self):
        if len(self.estimates) < self.window_count:
            return False
        last = [e for _t, e in self.estimates[-self.window_count:]]
        mean = sum(last) / len(last)
        if mean <= 0 or not all(abs(e - mean) <= self.tolerance * mean for e in last):
            return False
        rse = self.spread()["rse"]
        return rse is not None and rse <= self.max_rse

    def end(self):
        """fio ended before the rule decided."""
        if self.stopped is None:
            self.stopped = "ended"
        return self.stopped

    def spread(self):
        """How repeatable the post-ramp windows are: relative standard error of their mean, CV, count."""
        return dict(relative_spread(self._post_rates), n=len(self._post_rates))


def relative_spread(samples):
    """``{rse, cv}`` of samples: sample std / sqrt(n) / mean and std / mean (6 decimals); both None
    for fewer than two samples or a mean that is not positive."""
    n = len(samples)
    mean = sum(samples) / n if n else 0.0
    if n < 2 or mean <= 0:
        return {"rse": None, "cv": None}
    std = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1))
    return {"rse": round(std / math.sqrt(n) / mean, 6), "cv": round(std / mean, 6)}


# ---------------------------------------------------------------------------------------------
# Running fio
# ---------------------------------------------------------------------------------------------

def _fail_message(what, target, rc, stderr, reason=None):
    tail = " ".join((stderr or "").strip().split("\n")[-5:]).strip()
    msg = "fio %s on %s failed" % (what, target)
    msg += " (rc=%s)" % rc if rc is not None else ""
    if reason:
        msg += ": %s" % reason
    if tail:
        msg += ("; fio said: %s" if reason else ": %s") % tail
    return msg


def run_measurement(fio, m, target, size_bytes, rule, numjobs=1, big_bs=BIG_BS, popen=subprocess.Popen,
                    clock=time.monotonic):
    """Run one measurement until ``rule`` (a fresh copy of it) decides; returns the result dict.

    fio gets ``--runtime`` = ``rule.max_seconds`` + 2 so that it normally runs until stopped; if it
    ends on its own, what it printed is used (``stopped: "ended"``).
    """
    rule = rule.fresh()
    argv = measurement_argv(fio, m, target, size_bytes, int(math.ceil(rule.max_seconds)) + 2, numjobs=numjobs,
                            big_bs=big_bs)
    stream = DumpStream()
    tracker = WindowTracker(m, big_bs=big_bs)
    started = clock()
    deadline = started + rule.max_seconds + 2 + STARTUP_GRACE
    child = Child(popen, argv, clock, stderr_tail=STDERR_TAIL)
    ok = False
    rc = None
    try:
        decided = False
        while not decided:
            text = child.read(1.0)
            for dump in stream.feed(text):
                try:
                    window = tracker.add(dump)
                except ValueError as e:
                    child.stop(STOP_TIMEOUT)
                    raise FioError(argv, child.proc.poll(), child.stderr,
                                   _fail_message(m.name, target, child.proc.poll(), child.stderr, str(e)))
                if window is not None and rule.update(window):
                    decided = True
                    break
            if decided:
                child.stop(STOP_TIMEOUT)
                rc = child.proc.poll()
                break
            if not child.open:
                rc = child.wait(STOP_TIMEOUT)
                if rc is None:
                    child.kill()
                    rc = child.proc.poll()
                if rc != 0:
                    raise FioError(argv, rc, child.stderr, _fail_message(m.name, target, rc, child.stderr))
                rule.end()
                break
            if clock() > deadline:
                raise FioError(argv, None, child.stderr, _fail_message(
                    m.name, target, None, child.stderr, "no result after %d s; fio was killed" % (clock() - started)))
        if rule.estimate is None:
            raise FioError(argv, rc, child.stderr, _fail_message(
                m.name, target, rc, child.stderr, "fio ended after %.1f s of I/O without a measurement past the "
                "%s s ramp" % (tracker.totals()[0], rule.ramp_seconds)))
        ok = True
    finally:
        if not ok:
            child.kill()
    return {"name": m.name, "unit": m.unit, "value": int(round(rule.estimate)), "stopped": rule.stopped,
            "seconds": round(clock() - started, 2), "fio_seconds": round(rule.t, 3),
            "windows": [[round(t, 3), round(r, 1)] for t, r in rule.windows],
            "estimates": [[round(t, 3), round(e, 1)] for t, e in rule.estimates],
            "spread": rule.spread(), "post_seconds": round(rule.post_seconds, 3), "argv": argv}


def combine_passes(runs):
    """One measurement from its passes (results of :func:`run_measurement`, in the order they ran).

    The value is the mean rate over all post-ramp seconds (each pass weighted by its post-ramp time),
    the same estimator as within one pass. ``spread.rse`` is the larger of two relative standard
    errors: of the one-second windows pooled over the passes, and of the pass values themselves
    (std / sqrt(passes) / mean), which is what shows a swing slower than one pass. ``windows`` and
    ``estimates`` are laid end to end on one time axis; ``passes`` keeps each pass's own figures.
    """
    if not runs:
        raise ValueError("combine_passes needs at least one pass")
    first = runs[0]
    weights = [max(float(r.get("post_seconds") or 0.0), 0.0) for r in runs]
    values = [float(r["value"]) for r in runs]
    total = sum(weights)
    value = sum(v * w for v, w in zip(values, weights)) / total if total > 0 else sum(values) / len(values)
    windows, estimates, offset, rates = [], [], 0.0, []
    for r in runs:
        windows.extend([round(t + offset, 3), w] for t, w in r.get("windows") or [])
        estimates.extend([round(t + offset, 3), e] for t, e in r.get("estimates") or [])
        n = (r.get("spread") or {}).get("n") or 0
        rates.extend(w for _t, w in (r.get("windows") or [])[-n:] if n)
        offset += float(r.get("fio_seconds") or 0.0)
    spread = dict(relative_spread(rates), n=len(rates), passes=len(runs))
    spread["between_passes"] = relative_spread(values)["rse"]
    if spread["between_passes"] is not None:
        spread["rse"] = max(spread["rse"] or 0.0, spread["between_passes"])
    return {"name": first["name"], "unit": first["unit"], "value": int(round(value)),
            "stopped": "/".join(r["stopped"] for r in runs),
            "seconds": round(sum(r["seconds"] for r in runs), 2),
            "fio_seconds": round(offset, 3), "windows": windows, "estimates": estimates, "spread": spread,
            "post_seconds": round(total, 3),
            "passes": [dict((k, r.get(k)) for k in ("value", "stopped", "seconds", "fio_seconds", "post_seconds",
                                                    "spread")) for r in runs],
            "argv": first["argv"]}


def _run_to_end(fio_argv, what, target, seconds, popen, clock):
    """Run fio to its end (not streamed); returns its last JSON object."""
    child = Child(popen, fio_argv, clock, stderr_tail=STDERR_TAIL)
    ok = False
    try:
        started = clock()
        out = child.drain(seconds + STARTUP_GRACE)
        if child.open:
            raise FioError(fio_argv, None, child.stderr, _fail_message(
                what, target, None, child.stderr, "no result after %d s; fio was killed" % (clock() - started)))
        rc = child.wait(STOP_TIMEOUT)
        if rc is None:
            child.kill()
            rc = child.proc.poll()
        if rc != 0:
            raise FioError(fio_argv, rc, child.stderr, _fail_message(what, target, rc, child.stderr))
        dumps = split_dumps(out)
        if not dumps:
            raise FioError(fio_argv, rc, child.stderr, _fail_message(what, target, rc, child.stderr,
                                                                     "fio printed no JSON status"))
        ok = True
        return dumps[-1]
    finally:
        if not ok:
            child.kill()


def qos_result(dump, side):
    """(iops, {"95.0": us, ...}) of a finished QoS run's ``side``."""
    runtime_ms, io_bytes = job_totals(dump, side)
    job = dump["jobs"][0][side]
    pct = ((job.get("clat_ns") or {}).get("percentile")) or {}
    if not pct or not runtime_ms:
        raise ValueError("fio's %s statistics hold no completion-latency percentiles (no I/O completed)" % side)
    percentiles = {}
    for key, ns in pct.items():
        percentiles["%s" % float(key)] = round(_num(ns) / 1000.0, 3)
    iops = io_bytes / float(SMALL_BS) / (runtime_ms / 1000.0)
    return round(iops, 1), percentiles


def _percentile(percentiles_us, pct, what):
    for key, value in percentiles_us.items():
        try:
            if abs(float(key) - pct) < 1e-6:
                return float(value)
        except ValueError:
            continue
    raise ValueError("the %s latency percentiles have no p%g" % (what, pct))


def _lat_target(p_us):
    lat = QOS_LAT_FACTOR * p_us
    lat = int(math.ceil(lat / QOS_LAT_STEP_US - 1e-9)) * QOS_LAT_STEP_US
    return max(QOS_LAT_MIN_US, min(QOS_LAT_MAX_US, lat))


def derive_qos(read_percentiles_us, write_percentiles_us, rotational=False):
    """io.cost.qos targets from completion-latency percentiles in µs (see :data:`QOS_RULE`)."""
    pct = 50.0 if rotational else 95.0
    return {"rpct": pct, "rlat": _lat_target(_percentile(read_percentiles_us, pct, "read")),
            "wpct": pct, "wlat": _lat_target(_percentile(write_percentiles_us, pct, "write")),
            "min": QOS_VRATE_MIN, "max": QOS_VRATE_MAX}


# The QoS latency runs, in order: (side, fio rw). The controller's calibration_duration counts them.
QOS_RUNS = (("read", "randread"), ("write", "randwrite"))


def run_qos(fio, target, size_bytes, rrandiops, wrandiops, seconds=8, rotational=False, popen=subprocess.Popen,
            clock=time.monotonic):
    """Rate-limited random read, then random write, for ``seconds`` each; latency percentiles and the targets."""
    out = {}
    for (side, rw), iops in zip(QOS_RUNS, (rrandiops, wrandiops)):
        if isinstance(iops, bool) or not isinstance(iops, (int, float)) or iops <= 0:
            raise ValueError("the measured %s IOPS must be a positive number to rate-limit the QoS run, got %r"
                             % (rw, iops))
        limit = max(1, int(iops * QOS_RATE_FRACTION))
        argv = qos_argv(fio, target, size_bytes, rw, limit, seconds)
        t0 = clock()
        dump = _run_to_end(argv, "qos-%s" % side, target, seconds, popen, clock)
        try:
            measured, percentiles = qos_result(dump, side)
        except ValueError as e:
            raise FioError(argv, 0, "", _fail_message("qos-%s" % side, target, None, "", str(e)))
        out[side] = {"iops_limit": limit, "iops": measured, "percentiles_us": percentiles,
                     "seconds": round(clock() - t0, 2), "argv": argv}
    out["qos"] = derive_qos(out["read"]["percentiles_us"], out["write"]["percentiles_us"], rotational=rotational)
    out["rule"] = QOS_RULE
    return out
