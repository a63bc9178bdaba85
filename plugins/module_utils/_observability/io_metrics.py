# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""io_metrics exporter: the isolation state as Prometheus metrics for node_exporter's textfile collector.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

The ``io_metrics`` role installs this file with the module_utils it imports (``INSTALLED``) as a
package tree on the managed host and runs :func:`main` from a systemd timer. It reads kernel files
through the collection's own codecs (``_codecs``: io.stat, PSI, io.cost.qos/model), slice paths
through ``_cgroups``, disk names through ``_devices``, and writes one ``.prom`` file atomically
(``_kernelfs.KernelFS.atomic_write``: temp file in the same directory, fsync, rename), so
node_exporter never reads half a file. Python 3.9+, standard library only.

What is absent on the host (a slice not started, a kernel without iocost or PSI, no verify result
yet) gives no sample, never a made-up zero; a file that cannot be read or parsed is counted in
``aiinfra_io_isolation_exporter_errors`` and skipped. Metric families and their units are
documented in docs/observability.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import shutil
import signal
import sys

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import cgroup_mode, parse_mounts
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError, resolve
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import (
    IO_COST_MODEL, IO_COST_QOS, IO_STAT, PRESSURE, CodecError,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import name_of
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError, KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_latency as _latency
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as _tenancy

PREFIX = "aiinfra_io_isolation_"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"      # Debian's prometheus-node-exporter default
OUTPUT_NAME = "aiinfra_io_isolation.prom"
# Written by the io_metrics role's record_verify tasks after a verify.yml run (the drift check needs
# the controller: the roles plan there), read here.
VERIFY_FILE = "/var/lib/aiinfra-io_isolation/verify-result.json"
# The latency histogram's running totals: each run adds its window, so the buckets are counters.
LATENCY_STATE = "/var/lib/aiinfra-io_isolation/latency-state.json"
# Fixed bucket bounds (a series keeps its le values): 1 us to 2**26 us (67 s), powers of two.
LATENCY_LE_US = tuple(1 << k for k in range(27))
SLICES = ("inference.slice", "training.slice")
TIMEOUT_SECONDS = 20

# The module_utils the exporter needs on the host, relative to module_utils: itself, what it imports, transitively,
# and their packages' __init__.py (a unit test checks this list against the imports). The role copies exactly these.
INSTALLED = ("_engine/__init__.py", "_engine/reconcile.py", "_host/__init__.py", "_host/capabilities.py",
             "_host/cgroup_knobs.py", "_host/cgroups.py", "_host/codecs.py", "_host/commands.py", "_host/devices.py",
             "_host/iocost_keys.py", "_host/kernelfs.py", "_host/unit_names.py", "_observability/__init__.py",
             "_observability/io_latency.py", "_observability/io_metrics.py", "_observability/tenancy.py")

USEC = 1000000.0

# name (without PREFIX) -> (type, help). Counters end in _total; seconds and bytes are base units;
# vrate and the QoS bounds are ratios (1.0 = 100 %).
FAMILIES = (
    ("slice_present", "gauge", "1 if the slice's cgroup exists, 0 if not (a slice with no unit started)."),
    ("slice_io_pressure_waiting_seconds_total", "counter",
     "Time at least one task of the slice waited for I/O (io.pressure some)."),
    ("slice_io_pressure_stalled_seconds_total", "counter",
     "Time all non-idle tasks of the slice waited for I/O at once (io.pressure full)."),
    ("slice_memory_pressure_waiting_seconds_total", "counter",
     "Time at least one task of the slice waited for memory (memory.pressure some)."),
    ("slice_memory_pressure_stalled_seconds_total", "counter",
     "Time all non-idle tasks of the slice waited for memory at once (memory.pressure full)."),
    ("slice_io_read_bytes_total", "counter", "Bytes the slice read from the disk (io.stat rbytes)."),
    ("slice_io_written_bytes_total", "counter", "Bytes the slice wrote to the disk (io.stat wbytes)."),
    ("slice_io_reads_total", "counter", "Read requests the slice completed on the disk (io.stat rios)."),
    ("slice_io_writes_total", "counter", "Write requests the slice completed on the disk (io.stat wios)."),
    ("slice_iocost_usage_seconds_total", "counter",
     "Device time iocost charged to the slice on the disk (io.stat cost.usage)."),
    ("slice_iocost_wait_seconds_total", "counter",
     "Time the slice's I/O waited for iocost budget (io.stat cost.wait; only with blkcg debug stats)."),
    ("slice_iocost_indebt_seconds_total", "counter",
     "Time the slice was in iocost debt (io.stat cost.indebt; only with blkcg debug stats)."),
    ("slice_iocost_indelay_seconds_total", "counter",
     "Time the slice was delayed to pay iocost debt (io.stat cost.indelay; only with blkcg debug stats)."),
    ("slice_processes", "gauge",
     "Processes in the slice and every cgroup below it (cgroup.procs); 0 when the slice does not exist."),
    ("slice_units", "gauge", "Services and scopes that run in the slice (their cgroup directories)."),
    ("slice_workloads_listed", "gauge",
     "Workloads listed for the slice (--workload): listing some, it should have processes."),
    ("workload_outside", "gauge",
     "1 if a listed workload runs outside its slice, 0 if it runs in it; no sample while it does not run."),
    ("toplevel_io_read_bytes_total", "counter", "Bytes read from the disk charged to the top-level cgroup (io.stat rbytes)."),
    ("toplevel_io_written_bytes_total", "counter",
     "Bytes written to the disk charged to the top-level cgroup (io.stat wbytes)."),
    ("toplevel_io_reads_total", "counter", "Read requests on the disk charged to the top-level cgroup (io.stat rios)."),
    ("toplevel_io_writes_total", "counter", "Write requests on the disk charged to the top-level cgroup (io.stat wios)."),
    ("disk_io_read_bytes_total", "counter",
     "Bytes read from the disk, whoever was charged (the root cgroup's io.stat rbytes: the disk's own counters)."),
    ("disk_io_written_bytes_total", "counter",
     "Bytes written to the disk, whoever was charged (the root cgroup's io.stat wbytes)."),
    ("disk_io_reads_total", "counter", "Read requests on the disk, whoever was charged (the root cgroup's io.stat rios)."),
    ("disk_io_writes_total", "counter", "Write requests on the disk, whoever was charged (the root cgroup's io.stat wios)."),
    ("iocost_enabled", "gauge", "1 if iocost is enabled on the disk (io.cost.qos enable)."),
    ("iocost_model_user", "gauge", "1 if the disk's io.cost.model is user-set (ctrl=user), 0 for the kernel's class."),
    ("iocost_qos_vrate_min_ratio", "gauge", "The lowest vrate iocost may use on the disk (io.cost.qos min, 1.0 = 100%)."),
    ("iocost_qos_vrate_max_ratio", "gauge", "The highest vrate iocost may use on the disk (io.cost.qos max, 1.0 = 100%)."),
    ("iocost_vrate_ratio", "gauge", "iocost's current vrate on the disk (root io.stat cost.vrate, 1.0 = 100%)."),
    ("slice_io_latency_seconds", "histogram",
     "Latency of the slice's block I/O on the disk, from entering the block layer to completion (eBPF, sampled windows)."),
    ("config_drift", "gauge", "1 if the last verify.yml run found drift on the host, 0 if it found none."),
    ("config_drift_items", "gauge", "Number of settings the last verify.yml run found drifted."),
    ("config_verify_timestamp_seconds", "gauge", "When the last verify.yml result was recorded (Unix time)."),
    ("exporter_errors", "gauge", "Files this run could not read or parse (each one skipped, not reported as zero)."),
)

# io.stat key -> family; cost.* are microseconds in the kernel (blk-iocost.c ioc_pd_stat: usage_us, wait_us, ...)
IO_STAT_COUNTERS = (("rbytes", "slice_io_read_bytes_total", 1), ("wbytes", "slice_io_written_bytes_total", 1),
                    ("rios", "slice_io_reads_total", 1), ("wios", "slice_io_writes_total", 1),
                    ("cost.usage", "slice_iocost_usage_seconds_total", USEC),
                    ("cost.wait", "slice_iocost_wait_seconds_total", USEC),
                    ("cost.indebt", "slice_iocost_indebt_seconds_total", USEC),
                    ("cost.indelay", "slice_iocost_indelay_seconds_total", USEC))
# io.stat key -> the suffix of its toplevel_io_ and disk_io_ families
SHARE_COUNTERS = (("rbytes", "read_bytes_total"), ("wbytes", "written_bytes_total"), ("rios", "reads_total"),
                  ("wios", "writes_total"))
PSI_FAMILIES = (("io.pressure", "some", "slice_io_pressure_waiting_seconds_total"),
                ("io.pressure", "full", "slice_io_pressure_stalled_seconds_total"),
                ("memory.pressure", "some", "slice_memory_pressure_waiting_seconds_total"),
                ("memory.pressure", "full", "slice_memory_pressure_stalled_seconds_total"))


class VerifyResultError(ValueError):
    pass


def parse_verify_result(text):
    """The verify result file (JSON ``{"drift": bool, "items": [str], "time": unix seconds}``) -> that dict."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise VerifyResultError("not JSON: %s" % e)
    if not isinstance(data, dict) or not isinstance(data.get("drift"), bool) \
            or not isinstance(data.get("items", []), list) \
            or isinstance(data.get("time"), bool) or not isinstance(data.get("time"), (int, float)):
        raise VerifyResultError("expected {\"drift\": true|false, \"items\": [...], \"time\": <unix seconds>}")
    return data


class Collector:
    """One run's samples: {family: [(labels, value)]}, and the problems met on the way."""

    def __init__(self, fs):
        self.fs = fs
        self.samples = dict((name, []) for name, _kind, _help in FAMILIES)
        self.problems = []
        self._names = {}
        self._stats = {}

    def add(self, family, labels, value, suffix=""):
        self.samples[family].append((labels, value, suffix))

    def read(self, path, codec=None, parse=None):
        """Parsed file, or None when it is absent (not an error) or unreadable/unparsable (counted). An io.stat is read
        once a run (a tenant slice's is also a top-level cgroup's), so a bad one is counted once."""
        if codec is IO_STAT:
            if path not in self._stats:
                self._stats[path] = self._read(path, codec, parse)
            return self._stats[path]
        return self._read(path, codec, parse)

    def _read(self, path, codec, parse):
        try:
            text = self.fs.read(path)
        except KernelFileError as e:
            self.problems.append(str(e))
            return None
        if text is None:
            return None
        try:
            return (parse or codec.parse)(text)
        except (CodecError, VerifyResultError) as e:
            self.problems.append("%s: %s" % (path, e))
            return None

    def disk(self, majmin):
        """Labels of a disk: its kernel name (as node_exporter's diskstats name it) and MAJ:MIN."""
        if majmin not in self._names:
            self._names[majmin] = name_of(self.fs, majmin) or ""
        return {"device": self._names[majmin], "majmin": majmin}

    # -- what is read ---------------------------------------------------------------------------
    def slice(self, name, directory):
        labels = {"slice": name}
        present = self.fs.isdir(directory)
        self.add("slice_present", labels, 1 if present else 0)
        if not present:
            return
        for filename, kind, family in PSI_FAMILIES:
            psi = self.read(directory + "/" + filename, PRESSURE)
            if psi and "total" in psi.get(kind, {}):
                self.add(family, labels, psi[kind]["total"] / USEC)
        stat = self.read(directory + "/io.stat", IO_STAT) or {}
        for majmin in sorted(stat, key=_majmin_key):
            for key, family, scale in IO_STAT_COUNTERS:
                value = stat[majmin].get(key)
                if isinstance(value, int):
                    self.add(family, dict(labels, **self.disk(majmin)), value / scale if scale != 1 else value)

    def tenancy(self, root, slices, listed):
        """Who runs in each slice (processes, units, the listed workloads and whether they run in it) and who each
        disk's I/O is charged to: every top-level cgroup's io.stat, and the root's (the disk's own counters)."""
        units, truncated = _tenancy.scan_units(self.fs, root)
        if truncated:
            self.problems.append("more than %d slices: units in the rest were not looked for" % _tenancy.MAX_SLICES)
        for name in slices:
            labels = {"slice": name}
            directory = resolve(name, root=root)
            entries = listed.get(name) or []
            self.add("slice_workloads_listed", labels, len(entries))
            members = _tenancy.slice_members(self.fs, directory, root, sample=0) if self.fs.isdir(directory) else None
            self.add("slice_processes", labels, members["processes"]["count"] if members else 0)
            self.add("slice_units", labels, len(members["units"]) if members else 0)
            for w in _tenancy.workloads(entries, name, directory[len(root):] or "/", units):
                if w["running"]:
                    self.add("workload_outside", dict(labels, kind=w["kind"], name=w["name"]), 0 if w["placed"] else 1)
        for entry in self.fs.listdir(root):
            if self.fs.isdir(root + "/" + entry):
                self._share_counters("toplevel_io_", root + "/" + entry + "/io.stat", {"cgroup": entry})
        self._share_counters("disk_io_", root + "/io.stat", {})

    def _share_counters(self, prefix, path, labels):
        stat = self.read(path, IO_STAT) or {}
        for majmin in sorted(stat, key=_majmin_key):
            for key, suffix in SHARE_COUNTERS:
                value = stat[majmin].get(key)
                if isinstance(value, int):
                    self.add(prefix + suffix, dict(labels, **self.disk(majmin)), value)

    def iocost(self, root):
        qos = self.read(root + "/io.cost.qos", IO_COST_QOS) or {}
        model = self.read(root + "/io.cost.model", IO_COST_MODEL) or {}
        for majmin in sorted(qos, key=_majmin_key):
            disk = self.disk(majmin)
            q = qos[majmin]
            if "enable" in q:
                self.add("iocost_enabled", disk, 1 if q["enable"] else 0)
            for key, family in (("min", "iocost_qos_vrate_min_ratio"), ("max", "iocost_qos_vrate_max_ratio")):
                if key in q:
                    self.add(family, disk, _ratio(q[key]))
            if "ctrl" in model.get(majmin, {}):
                self.add("iocost_model_user", disk, 1 if model[majmin]["ctrl"] == "user" else 0)
        # cost.vrate: only on the root's lines, only for disks with iocost enabled (ioc_pd_stat, level 0)
        stat = self.read(root + "/io.stat", IO_STAT) or {}
        for majmin in sorted(stat, key=_majmin_key):
            vrate = stat[majmin].get("cost.vrate")
            if isinstance(vrate, (int, float)):
                self.add("iocost_vrate_ratio", self.disk(majmin), _ratio(vrate))

    def latency(self, root, slices, seconds, state_path, bpftrace):
        """Sample ``seconds`` of block I/O with io_latency's probe, add it to the running totals in
        ``state_path`` and report the totals as one histogram per slice and disk."""
        state = self.read(state_path, parse=json.loads) or {}
        series = state.get("series", {}) if isinstance(state, dict) else {}
        if not bpftrace:
            self.problems.append("bpftrace is not installed: no latency histogram (Debian: apt install bpftrace)")
        else:
            cgroups = _latency.Cgroups(root)
            try:
                # scanned each second of the window: a cgroup gone by its end keeps its name
                out, _err, _elapsed = _latency.sample(bpftrace, seconds, tick=cgroups.scan)
                counts, lost = _latency.parse(out)
            except (_latency.LatencyError, ValueError) as e:
                self.problems.append("latency probe: %s" % getattr(e, "msg", e))
                counts, lost = {}, 0
            if lost:
                self.problems.append("latency probe lost %d events" % lost)
            names = dict(("/" + name.strip("/"), name) for name in slices)
            rows = _latency.summarize(counts, self.fs, cgroups, depth=1, only=set(names))
            for row in rows:
                key = "%s|%s" % (names[row["cgroup"]], row["majmin"])
                entry = series.setdefault(key, {"slice": names[row["cgroup"]], "majmin": row["majmin"],
                                                "le": [0] * len(LATENCY_LE_US), "count": 0, "sum_us": 0.0})
                for bucket in row["histogram"]:
                    for i, le in enumerate(LATENCY_LE_US):
                        if bucket["le_us"] <= le:
                            entry["le"][i] += bucket["count"]
                entry["count"] += row["count"]
                entry["sum_us"] += row["sum_us"]
            try:
                self.fs.atomic_write(state_path, json.dumps({"series": series}, sort_keys=True), 0o644)
            except KernelFileError as e:
                self.problems.append(str(e))
        for key in sorted(series):
            entry = series[key]
            labels = dict(self.disk(entry["majmin"]), slice=entry["slice"])
            for i, le in enumerate(LATENCY_LE_US):
                self.add("slice_io_latency_seconds", dict(labels, le=_number(le / USEC)), entry["le"][i], "_bucket")
            self.add("slice_io_latency_seconds", dict(labels, le="+Inf"), entry["count"], "_bucket")
            self.add("slice_io_latency_seconds", labels, entry["sum_us"] / USEC, "_sum")
            self.add("slice_io_latency_seconds", labels, entry["count"], "_count")

    def verify(self, path):
        result = self.read(path, parse=parse_verify_result)
        if result is None:
            return
        self.add("config_drift", {}, 1 if result["drift"] else 0)
        self.add("config_drift_items", {}, len(result.get("items", [])))
        self.add("config_verify_timestamp_seconds", {}, result["time"])


def _majmin_key(majmin):
    major, _sep, minor = majmin.partition(":")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (1 << 32, 0)


def _ratio(percent):
    """A kernel percentage ("95.00", 100.0) -> a ratio (0.95, 1.0), rounded to the kernel's precision."""
    return round(float(percent) / 100.0, 6)


def cgroup_root(fs):
    """The cgroup2 mount (/sys/fs/cgroup when unified, the v2 mount of a hybrid host), None without one."""
    return cgroup_mode(parse_mounts(fs.read("/proc/mounts") or ""))[1]


def collect(fs, slices=SLICES, verify_file=VERIFY_FILE, latency_seconds=0, latency_state=LATENCY_STATE,
            bpftrace=None, workloads=None):
    """A :class:`Collector` filled from the host behind ``fs``; with ``latency_seconds`` also the
    latency histogram (the probe runs that long). ``workloads``: {slice: [{kind, name or pattern}]} listed for it."""
    c = Collector(fs)
    root = cgroup_root(fs)
    if root is not None:
        # a slice given twice would give duplicate series, which node_exporter refuses for the whole file
        for name in dict.fromkeys(slices):
            c.slice(name, resolve(name, root=root))
        c.tenancy(root, list(dict.fromkeys(slices)), workloads or {})
        c.iocost(root)
        if latency_seconds:
            c.latency(fs.path(root), list(dict.fromkeys(slices)), latency_seconds, latency_state, bpftrace)
    if verify_file:
        c.verify(verify_file)
    c.add("exporter_errors", {}, len(c.problems))
    return c


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def render(collector):
    """The text exposition format: HELP and TYPE for every family with samples, then its samples."""
    lines = []
    for name, kind, text in FAMILIES:
        samples = collector.samples[name]
        if not samples:
            continue
        lines.append("# HELP %s%s %s" % (PREFIX, name, text))
        lines.append("# TYPE %s%s %s" % (PREFIX, name, kind))
        for labels, value, suffix in samples:
            label_text = ",".join('%s="%s"' % (k, _escape(labels[k])) for k in sorted(labels))
            lines.append("%s%s%s%s %s" % (PREFIX, name, suffix, "{%s}" % label_text if label_text else "",
                                          _number(value)))
    return "\n".join(lines) + "\n"


def write(fs, directory, text, name=OUTPUT_NAME):
    """Replace ``directory/name`` atomically: the temp file (a dot name node_exporter skips) is renamed over it."""
    fs.atomic_write(directory.rstrip("/") + "/" + name, text, 0o644)


class Timeout(Exception):
    pass


def _on_alarm(_signum, _frame):
    raise Timeout()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="aiinfra-io-metrics", description=(
        "Write aiinfra.io_isolation's metrics for node_exporter's textfile collector."))
    p.add_argument("--textfile-dir", default=TEXTFILE_DIR, help="node_exporter's --collector.textfile.directory")
    p.add_argument("--slice", action="append", dest="slices", metavar="NAME",
                   help="a slice (or cgroup path) to report; repeat it; default: %s" % " ".join(SLICES))
    p.add_argument("--workload", action="append", dest="workloads", metavar="SLICE=UNIT", default=[],
                   help="a service (or a pattern such as vllm-*.service) that belongs in SLICE; repeat it")
    p.add_argument("--verify-file", default=VERIFY_FILE, help="the last verify.yml result ('' for none)")
    p.add_argument("--timeout", type=int, default=TIMEOUT_SECONDS,
                   help="give up (writing nothing) after this many seconds, besides the latency window and its start-up")
    p.add_argument("--latency-seconds", type=int, default=0,
                   help="sample block I/O latency per slice with bpftrace for this long each run (0: no histogram)")
    p.add_argument("--latency-state", default=LATENCY_STATE, help="the latency histogram's running totals")
    p.add_argument("--stdout", action="store_true", help="print the metrics instead of writing the file")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)   # tests: a fake host tree
    args = p.parse_args(argv)
    args.slices = args.slices or list(SLICES)
    for name in args.slices:
        try:
            resolve(name)
        except CgroupNameError as e:
            p.error(str(e))
    listed = {}
    for text in args.workloads:
        name, sep, unit = text.partition("=")
        if not sep or name not in args.slices or not unit.endswith(".service"):
            p.error("--workload %r: give SLICE=UNIT, SLICE one of the --slice names (%s) and UNIT a service or a pattern "
                    "ending in .service" % (text, " ".join(args.slices)))
        wild = any(ch in unit for ch in "*?[")
        listed.setdefault(name, []).append({"kind": "service", ("pattern" if wild else "name"): unit})
    args.workloads = listed
    if args.timeout < 1:
        p.error("--timeout must be at least 1 second")
    if not 0 <= args.latency_seconds <= _latency.MAX_SECONDS:
        p.error("--latency-seconds must be 0 to %d" % _latency.MAX_SECONDS)
    return args


def main(argv=None, out=None):
    """Exit status: 0 written, 1 a write failed or the run timed out (the previous file stays), 2 usage."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    fs = KernelFS(args.root)
    # Bounded: a hung read (a dying device's sysfs file) must not pile up runs behind the timer.
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    budget = args.timeout + (args.latency_seconds + int(_latency.STARTUP_GRACE) if args.latency_seconds else 0)
    signal.alarm(budget)
    try:
        collector = collect(fs, args.slices, args.verify_file, args.latency_seconds, args.latency_state,
                            shutil.which("bpftrace") if args.latency_seconds else None, args.workloads)
        text = render(collector)
    except Timeout:
        sys.stderr.write("aiinfra-io-metrics: gave up after %d s; %s left as it was\n" % (budget, OUTPUT_NAME))
        return 1
    finally:
        # the write below is local and short; an alarm inside it would leave its temp file behind
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    # the journal says which file, the metric only how many
    for problem in collector.problems:
        sys.stderr.write("aiinfra-io-metrics: skipped %s\n" % problem)
    if args.stdout:
        out.write(text)
        return 0
    try:
        write(fs, args.textfile_dir, text)
    except KernelFileError as e:
        sys.stderr.write("aiinfra-io-metrics: %s\n" % e)
        return 1
    return 0
