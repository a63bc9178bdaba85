# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Who runs in the tenant slices, and who the managed disks' I/O is charged to: read from cgroupfs only.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

io_facts and host_profile report it (their ``tenancy`` option, :data:`OPTIONS`), verify.yml and the health gate judge
it (:func:`report`'s ``drift``), and the io_metrics exporter publishes the same readings as metrics
(:func:`scan_units`, :func:`slice_members`, :func:`toplevel_io`).

- **Workloads.** Each tenant slice lists its workloads (``kind: service``, a unit name or a shell pattern). Where a
  unit runs is the cgroup directory systemd made for it: every service and scope is a directory named after the unit
  in a chain of ``.slice`` directories (``/system.slice/vllm.service``), so walking the slices finds them all without
  asking systemd (:func:`scan_units`). A workload kind that is not a systemd unit (a container started with
  ``--cgroup-parent``) joins as another ``kind`` with its own matcher over the same scan (:data:`MATCHERS`).
- **Members.** A slice's processes are the ``cgroup.procs`` of every cgroup below it: counted, and a bounded sample
  named by ``/proc/<pid>/comm``; its units are the service and scope directories below it.
- **I/O shares.** ``io.stat`` is cumulative, so a share "over the last interval" needs two readings: one call reads
  the root's and each top-level cgroup's ``io.stat`` (and the tenant slices' own: ``io.stat`` counts the whole
  subtree), sleeps ``interval`` seconds and reads again. The shares are of the deltas. With ``interval`` 0 they are
  of the totals since each cgroup was created, and not judged. The root's own ``io.stat`` (from the disk's own
  counters, 5.15 and later) is the total, so I/O charged to the root cgroup itself (kernel threads, processes left
  in the root) counts as outside the tenants; on a kernel without it, the sum of the top-level cgroups is.
- **Judgement.** DRIFT (``drift``, one message each) when a listed workload runs outside its slice, when a slice that
  lists workloads has no process, or, on a disk that moved at least ``min_iops`` I/Os per second or
  ``min_bytes_per_second`` over the interval, when more than ``outside_max_pct`` % of its bytes or of its I/Os was
  charged outside the tenant slices. Below that traffic the disk is idle and nothing is judged. Bytes and I/Os are
  both judged: an unplaced checkpoint writer moves most of the bytes in few I/Os, an unplaced embedding lookup
  most of the I/Os in few bytes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError, resolve, slice_path
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import IO_STAT, CodecError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT, KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import RequestError

UNIT_KINDS = (".service", ".scope")
COUNTERS = ("rbytes", "wbytes", "rios", "wios")
# Bounds that keep one call cheap on a host with thousands of containers: slices walked, cgroups read below one
# tenant slice, processes named in a slice's sample.
MAX_SLICES = 1024
MAX_CGROUPS = 4096
SAMPLE = 8
MAX_INTERVAL = 60
ROOT_ROW = "/"

# The tenancy option of io_facts and host_profile (AnsibleModule keywords), documented once in the doc fragment
# aiinfra.io_isolation.tenancy.
OPTIONS = {
    "slices": {"type": "list", "elements": "dict", "default": [], "options": {
        "name": {"type": "str", "required": True},
        "workloads": {"type": "list", "elements": "dict", "default": [], "options": {
            "kind": {"type": "str", "default": "service", "choices": ["service"]},
            "name": {"type": "str"},
            "pattern": {"type": "str"},
        }, "mutually_exclusive": [("name", "pattern")], "required_one_of": [("name", "pattern")]},
    }},
    "devices": {"type": "list", "elements": "str", "default": []},
    "interval": {"type": "float", "default": 2.0},
    "outside_max_pct": {"type": "float", "default": 50.0},
    "min_iops": {"type": "float", "default": 20.0},
    "min_bytes_per_second": {"type": "int", "default": 1048576},
    "sample": {"type": "int", "default": SAMPLE},
}


def _rel(path, root):
    """'/sys/fs/cgroup/system.slice/x.service' -> '/system.slice/x.service' (systemd's ControlGroup form)."""
    return path[len(root):] or "/"


def _under(cgroup, slice_cgroup):
    return cgroup == slice_cgroup or cgroup.startswith(slice_cgroup.rstrip("/") + "/")


def scan_units(fs, root=CGROUP_ROOT, limit=MAX_SLICES):
    """{unit name: its cgroup ("/system.slice/vllm.service")} of every service and scope systemd placed: the children
    named ``*.service`` / ``*.scope`` of the root and of every ``.slice`` directory below it (a unit's own subtree,
    such as a container's under ``Delegate=yes``, is not entered). Returns (units, truncated)."""
    units, pending, seen = {}, [root], 0
    while pending:
        directory = pending.pop(0)
        seen += 1
        if seen > limit:
            return units, True
        for entry in fs.listdir(directory):
            path = directory + "/" + entry
            if entry.endswith(".slice") and fs.isdir(path):
                pending.append(path)
            elif entry.endswith(UNIT_KINDS) and fs.isdir(path):
                units.setdefault(entry, _rel(path, root))
    return units, False


def _service_matcher(entry, units):
    """The services an entry (name or pattern) names among the scanned units: [(unit, cgroup or None)]."""
    if entry.get("pattern"):
        return sorted((u, c) for u, c in units.items() if u.endswith(".service")
                      and fnmatch.fnmatchcase(u, entry["pattern"]))
    return [(entry["name"], units.get(entry["name"]))]


# kind -> the function that finds an entry's workloads among the scanned units (a container kind adds its own)
MATCHERS = {"service": _service_matcher}


def workloads(entries, slice_name, slice_cgroup, units):
    """Each listed workload of a slice: {kind, name, listed_as, slice, cgroup, running, placed}. A name that runs
    nowhere is listed (running false, placed None); a pattern that matches nothing running lists nothing."""
    out = []
    for entry in entries:
        kind = entry.get("kind") or "service"
        for name, cgroup in MATCHERS[kind](entry, units):
            out.append({"kind": kind, "name": name, "listed_as": entry.get("pattern") or entry.get("name"),
                        "slice": slice_name, "cgroup": cgroup, "running": cgroup is not None,
                        "placed": None if cgroup is None else _under(cgroup, slice_cgroup)})
    return out


def _procs(fs, path):
    try:
        text = fs.read(path + "/cgroup.procs") or ""
    except KernelFileError:
        return []
    return [int(p) for p in text.split() if p.isdigit()]


def slice_members(fs, path, root=CGROUP_ROOT, sample=SAMPLE, limit=MAX_CGROUPS):
    """The units and processes below a slice's directory: {units, processes: {count, sample: [{pid, comm,
    cgroup}]}, cgroups, truncated}. A process gone between the two reads keeps its pid with comm None."""
    units, count, names, cgroups = [], 0, [], 0
    pending, truncated = [path], False
    while pending:
        directory = pending.pop(0)
        cgroups += 1
        if cgroups > limit:
            truncated = True
            break
        pids = _procs(fs, directory)
        count += len(pids)
        for pid in pids[:max(sample - len(names), 0)]:
            try:
                comm = fs.read("/proc/%d/comm" % pid)
            except KernelFileError:
                comm = None
            names.append({"pid": pid, "comm": comm, "cgroup": _rel(directory, root)})
        parent_is_slice = directory == path or directory.endswith(".slice")
        for entry in fs.listdir(directory):
            child = directory + "/" + entry
            if not fs.isdir(child):
                continue
            if parent_is_slice and entry.endswith(UNIT_KINDS):
                units.append(entry)
            pending.append(child)
    return {"units": sorted(units), "processes": {"count": count, "sample": names}, "cgroups": cgroups,
            "truncated": truncated}


def _stat(fs, path, majmins, problems):
    """{majmin: {counter: int}} of one io.stat for the disks asked (absent disk line: zeros); None without the file."""
    try:
        text = fs.read(path + "/io.stat")
        parsed = IO_STAT.parse(text) if text is not None else None
    except (KernelFileError, CodecError) as e:
        problems.append("%s/io.stat: %s" % (path, getattr(e, "message", e)))
        parsed = None
    if parsed is None:
        return None
    return dict((m, dict((k, int((parsed.get(m) or {}).get(k) or 0)) for k in COUNTERS)) for m in majmins)


def toplevel_io(fs, majmins, tenant_paths, root=CGROUP_ROOT, problems=None):
    """One reading: {"root": the root's io.stat or None, "top": {top-level cgroup: stat}, "tenants": {slice: stat}}
    for the disks ``majmins``; ``tenant_paths``: {slice name: its directory}."""
    problems = problems if problems is not None else []
    top = {}
    for entry in fs.listdir(root):
        path = root + "/" + entry
        if fs.isdir(path):
            stat = _stat(fs, path, majmins, problems)
            if stat is not None:
                top[entry] = stat
    tenants = {}
    for name, path in tenant_paths.items():
        stat = _stat(fs, path, majmins, problems) if fs.isdir(path) else None
        tenants[name] = stat or dict((m, dict((k, 0) for k in COUNTERS)) for m in majmins)
    return {"root": _stat(fs, root, majmins, problems), "top": top, "tenants": tenants}


def _delta(after, before):
    if before is None:
        return dict(after)
    # a counter that went down belongs to a cgroup removed and created again in between: count from zero
    return dict((k, after[k] - before[k] if after[k] >= before[k] else after[k]) for k in COUNTERS)


def _sum(stats):
    return dict((k, sum(s[k] for s in stats)) for k in COUNTERS)


def _share(part, total):
    """(bytes share, I/O share) of ``part`` in ``total``; 0.0 of nothing."""
    b, i = total["rbytes"] + total["wbytes"], total["rios"] + total["wios"]
    return (round(float(part["rbytes"] + part["wbytes"]) / b, 4) if b else 0.0,
            round(float(part["rios"] + part["wios"]) / i, 4) if i else 0.0)


def disk_shares(name, majmin, before, after, seconds, tenant_names, limits):
    """One disk's report from two readings (``before`` None: the totals of ``after``)."""
    def delta(kind, name):
        earlier = (before or {}).get(kind, {}).get(name, {}).get(majmin) if before else None
        return _delta(after[kind][name][majmin], earlier) if before else after[kind][name][majmin]
    top = dict((cg, delta("top", cg)) for cg in after["top"])
    tenants = dict((t, delta("tenants", t)) for t in tenant_names)
    children = _sum(top.values()) if top else dict((k, 0) for k in COUNTERS)
    root = after["root"]
    if root is not None:
        root = _delta(root[majmin], before["root"][majmin]) if before and before["root"] is not None else root[majmin]
        # the disk's own counters count merged requests: never less than what the cgroups were charged
        total = dict((k, max(root[k], children[k])) for k in COUNTERS)
    else:
        total = children
    own = dict((k, total[k] - children[k]) for k in COUNTERS)
    rows = dict(top)
    if any(own.values()):
        rows[ROOT_ROW] = own
    tenant_sum = _sum(tenants.values()) if tenants else dict((k, 0) for k in COUNTERS)
    # the top-level cgroup charged most outside the tenants: its own I/O less its tenant slices' (a nested tenant)
    inside = {}
    for t in tenant_names:
        top_name = slice_path(t).split("/", 1)[0]
        inside[top_name] = _sum([inside.get(top_name, dict((k, 0) for k in COUNTERS)), tenants[t]])
    rest = sorted(((sum(max(v[k] - inside.get(cg, {}).get(k, 0), 0) for k in ("rbytes", "wbytes")), cg)
                   for cg, v in rows.items()), reverse=True)
    outside = dict((k, max(total[k] - tenant_sum[k], 0)) for k in COUNTERS)
    out_bytes, out_ios = _share(outside, total)
    ios, nbytes = total["rios"] + total["wios"], total["rbytes"] + total["wbytes"]
    report = {
        "device": name, "majmin": majmin, "interval": seconds, "total": total,
        "cgroups": dict((cg, dict(v, bytes_share=_share(v, total)[0], ios_share=_share(v, total)[1]))
                        for cg, v in rows.items() if any(v.values())),
        "tenants": dict((t, dict(v, bytes_share=_share(v, total)[0], ios_share=_share(v, total)[1]))
                        for t, v in tenants.items()),
        "outside": dict(outside, bytes_share=out_bytes, ios_share=out_ios),
        "outside_share": max(out_bytes, out_ios),
        "most_outside": rest[0][1] if rest and rest[0][0] > 0 else None,
        "iops": round(ios / seconds, 2) if seconds else None,
        "bytes_per_second": int(nbytes / seconds) if seconds else None,
        "judged": False, "drift": False,
    }
    if not seconds:
        report["note"] = "totals since each cgroup was created (interval 0): not judged"
    elif report["iops"] < limits["min_iops"] and report["bytes_per_second"] < limits["min_bytes_per_second"]:
        report["note"] = ("idle: %s I/Os/s and %s bytes/s over %s s, below the %s I/Os/s or %s bytes/s judged"
                          % (report["iops"], report["bytes_per_second"], _num(seconds), _num(limits["min_iops"]),
                             limits["min_bytes_per_second"]))
    else:
        report["judged"] = True
        report["drift"] = report["outside_share"] * 100.0 > limits["outside_max_pct"]
    return report


def _num(value):
    return "%g" % value


def check(request):
    """The request's problems (slice names, interval, thresholds) before anything is read; [] when fine."""
    problems = []
    for s in request.get("slices") or []:
        name = s.get("name") or ""
        if not name.endswith(".slice"):
            problems.append("tenancy: %r is not a slice name (such as inference.slice)" % name)
            continue
        try:
            resolve(name)
        except CgroupNameError as e:
            problems.append("tenancy: %s" % e)
        for w in s.get("workloads") or []:
            given = w.get("name") or w.get("pattern") or ""
            if (w.get("kind") or "service") == "service" and not given.endswith(".service"):
                problems.append("tenancy: %s: workload %r of kind service must be a service name or a pattern ending "
                                "in .service" % (name, given))
    interval = request.get("interval")
    if interval is None or not 0 <= float(interval) <= MAX_INTERVAL:
        problems.append("tenancy: interval is %r; give 0 (totals, not judged) to %d seconds" % (interval, MAX_INTERVAL))
    pct = request.get("outside_max_pct")
    if pct is None or not 0 <= float(pct) < 100:
        problems.append("tenancy: outside_max_pct is %r; give a percentage from 0 to below 100" % (pct,))
    for key in ("min_iops", "min_bytes_per_second", "sample"):
        if request.get(key) is None or request[key] < 0:
            problems.append("tenancy: %s is %r; give 0 or more" % (key, request.get(key)))
    return problems


def prepare(fs, request):
    """(request, disks) for :func:`report`: the request checked (:func:`check`) and its devices resolved to
    [(kernel name, MAJ:MIN)]; raises RequestError listing every problem, before anything else is read."""
    problems = check(request)
    disks = []
    if request.get("devices"):
        try:
            disks = [(d.name, d.majmin) for d in DeviceResolver(fs).resolve_many(request["devices"])]
        except DeviceError as e:
            problems.append("tenancy: devices: %s" % e.message)
    if problems:
        raise RequestError(problems)
    return request, disks


def report(fs, request, disks, root=CGROUP_ROOT, sleep=time.sleep, clock=time.monotonic):
    """The tenancy report: {slices: {name: ...}, disks: {name: ...}, drift: [message], warnings: [...]}.

    ``request``: the tenancy option (:data:`OPTIONS`, validated, :func:`check` clean); ``disks``: [(kernel name,
    MAJ:MIN)] of its resolved ``devices``."""
    warnings = []
    units, truncated = scan_units(fs, root)
    if truncated:
        warnings.append("more than %d slices: units in the rest were not looked for" % MAX_SLICES)
    slices, drift, tenant_paths = {}, [], {}
    for s in request.get("slices") or []:
        name = s["name"]
        path = (root + "/" + slice_path(name)).rstrip("/")
        tenant_paths[name] = path
        cgroup = _rel(path, root)
        entry = {"name": name, "cgroup": cgroup, "exists": fs.isdir(path), "listed": len(s.get("workloads") or [])}
        members = slice_members(fs, path, root, sample=request.get("sample", SAMPLE)) if entry["exists"] else \
            {"units": [], "processes": {"count": 0, "sample": []}, "cgroups": 0, "truncated": False}
        if members["truncated"]:
            warnings.append("%s has more than %d cgroups: the rest were not counted" % (name, MAX_CGROUPS))
        entry.update(units=members["units"], processes=members["processes"],
                     workloads=workloads(s.get("workloads") or [], name, cgroup, units))
        entry["empty"] = members["processes"]["count"] == 0
        for w in entry["workloads"]:
            if w["running"] and not w["placed"]:
                drift.append("%s %s (listed for %s as %s) runs in %s, outside its slice"
                             % (w["kind"], w["name"], name, w["listed_as"], w["cgroup"]))
        if entry["listed"] and entry["empty"]:
            drift.append("%s lists %d workload(s) (%s) and no process runs in it"
                         % (name, entry["listed"], ", ".join((w.get("name") or w.get("pattern"))
                                                             for w in s.get("workloads") or [])))
        slices[name] = entry
    out_disks = {}
    if disks:
        majmins = [m for _n, m in disks]
        interval = float(request.get("interval") or 0)
        first = toplevel_io(fs, majmins, tenant_paths, root, warnings) if interval else None
        started = clock()
        if interval:
            sleep(interval)
        second = toplevel_io(fs, majmins, tenant_paths, root, warnings)
        seconds = round(clock() - started, 3) if interval else 0
        limits = dict((k, request[k]) for k in ("outside_max_pct", "min_iops", "min_bytes_per_second"))
        for name, majmin in disks:
            d = disk_shares(name, majmin, first, second, seconds, list(tenant_paths), limits)
            if d["drift"]:
                drift.append("%s: %s%% of its bytes and %s%% of its I/Os over %s s were charged outside the tenant "
                             "slices (more than %s%%; most to %s)"
                             % (name, _pct(d["outside"]["bytes_share"]), _pct(d["outside"]["ios_share"]),
                                _num(seconds), _num(limits["outside_max_pct"]), d["most_outside"]))
            out_disks[name] = d
    return {"slices": slices, "disks": out_disks, "drift": drift, "warnings": warnings}


def _pct(share):
    return "%g" % round(share * 100, 1)
