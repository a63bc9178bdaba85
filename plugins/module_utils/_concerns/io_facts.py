# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Host facts for io_facts: one pass over sysfs, cgroupfs, debugfs and procfs, no subprocesses.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import cgroup_knobs as knobs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import nvme
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import topology
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import detect, parse_systemd_version
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError, resolve as cgroup_path
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver, multipath_head
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as _tenancy

# Every queue file the codecs know, plus io_poll_delay (no codec: it does nothing since 6.4, but
# what the kernel stores there is still worth showing).
QUEUE_FACTS = tuple(codecs.QUEUE_ATTRIBUTES) + ("io_poll_delay",)
# The cgroup module's knob files, plus what io_facts reads that no option sets.
CGROUP_FACTS = (("cgroup.controllers", "cgroup.subtree_control")
                + tuple(sorted(set(k.file for k in knobs.KNOBS)))
                + ("io.bfq.weight", "io.stat", "io.pressure", "memory.current", "memory.swap.high",
                   "memory.pressure", "cpu.pressure", "cpuset.cpus.effective", "cpuset.mems.effective"))


class Reader:
    """Reads and parses files, collecting problems as warnings instead of failing the whole run."""

    def __init__(self, fs):
        self.fs = fs
        self.warnings = []

    def text(self, path, quiet_errnos=()):
        try:
            return self.fs.read(path)
        except KernelFileError as e:
            # debugfs and some cgroup files are root-only; report, do not fail.
            if e.errno not in quiet_errnos:
                self.warnings.append(e.message)
            return None

    def parsed(self, path, codec=None, quiet_errnos=()):
        text = self.text(path, quiet_errnos)
        if text is None:
            return None
        codec = codec or codecs.codec_for(path)
        if codec is None:
            return _plain(text)
        try:
            return codec.parse(text)
        except codecs.CodecError as e:
            self.warnings.append("%s: could not parse %r: %s" % (path, text[:200], e))
            return {"unparsed": text}


def _plain(text):
    value = text.strip()
    if re.match(r"^-?\d+$", value):
        return int(value)
    return value


def _queue(reader, name):
    base = "/sys/block/%s/queue/" % name
    out = {}
    for attr in QUEUE_FACTS:
        # EINVAL on read: the attribute does not apply to this queue (wbt_lat_usec on the bio-based
        # NVMe multipath head, observed on 6.1): not applicable, not a problem.
        # Absent attributes read as None already: no separate existence check (one syscall per file).
        value = reader.parsed(base + attr, quiet_errnos=(errno.EINVAL,))
        if attr == "scheduler" and isinstance(value, dict) and "current" in value:
            out["scheduler"] = value["current"]
            out["schedulers_available"] = value["available"]
        else:
            out[attr] = value
    return out


def _iocost(model, qos, majmin):
    m = codecs.IO_COST_MODEL.lookup(model, majmin) if model is not None else None
    q = codecs.IO_COST_QOS.lookup(qos, majmin) if qos is not None else None
    return {"enabled": bool(q and q.get("enable")), "model": m, "qos": q,
            "initialised": m is not None or q is not None}


def _nvme_controllers(reader, reported, hw_by_name, debugfs):
    """Every NVMe controller with the reported disks it carries and its queue split.

    The split comes from debugfs only: io_facts runs no commands, so the kernel-log fallback of
    :func:`_nvme.queue_split` is not taken and the types are reported unavailable instead. ``numa_node``
    is the PCI function's (None: -1, or no PCI device); ``queue_cpus`` the CPUs each queue type serves
    and ``poll_queue_cpus`` each poll queue's (None where the types are unavailable).
    """
    out = {}
    for name, ctrl in nvme.scan_controllers(reader.fs, reader.warnings).items():
        # A multipath head is carried through its path disk on this controller (which has the queues).
        carried = [ns for ns in ctrl.namespaces if (multipath_head(ns) or ns) in reported]
        queue_disks = dict((ns, {"hctxs": hw_by_name[ns] if ns in hw_by_name
                                 else nvme.hctxs(reader.fs, ns, debugfs, reader.warnings)}) for ns in carried)
        split = nvme.queue_split(name, queue_disks, debugfs)
        out[name] = {
            "model": ctrl.model, "serial": ctrl.serial, "firmware": ctrl.firmware, "transport": ctrl.transport,
            "state": ctrl.state, "subsysnqn": ctrl.subsysnqn, "queue_count": ctrl.queue_count,
            "namespaces": [multipath_head(ns) or ns for ns in carried],
            "queues": {"default": split["default"], "read": split["read"], "poll": split["poll"],
                       "source": split["source"] or "unavailable (%s)" % split["note"]},
            "numa_node": topology.nvme_node(reader.fs, name),
            "queue_cpus": nvme.queue_cpus(queue_disks),
            "poll_queue_cpus": nvme.poll_queue_cpus(queue_disks),
        }
    return out


def _cgroup(reader, name, caps):
    try:
        path = cgroup_path(name, root=caps["cgroup"]["mountpoint"])
    except CgroupNameError as e:
        return {"name": name, "exists": False, "error": str(e)}
    if not reader.fs.isdir(path):
        return {"name": name, "path": path, "exists": False}
    present = set(reader.fs.listdir(path))
    files = {}
    for f in CGROUP_FACTS:
        if f in present:
            value = reader.parsed(path + "/" + f)
            files[f] = value.split() if f.startswith("cgroup.") and isinstance(value, str) else value
    return {"name": name, "path": path, "exists": True, "files": files}


def _host(reader):
    """Memory and CPU counts the roles size things by (memory protection as a share of RAM, queue counts)."""
    mem = None
    for line in (reader.text("/proc/meminfo") or "").splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            mem = int(fields[1]) * 1024 if len(fields) < 3 or fields[2] == "kB" else int(fields[1])
    cpus = {}
    for kind in ("online", "possible"):
        text = reader.text("/sys/devices/system/cpu/" + kind)
        try:
            cpus[kind] = len(codecs.CPU_LIST.parse(text)) if text else None
        except codecs.CodecError:
            cpus[kind] = None
    return {"memory_bytes": mem, "memory_stable_bytes": _stable_memory(reader, mem),
            "cpus_online": cpus["online"], "cpus_possible": cpus["possible"]}


MEMORY_ROUND = 128 << 20


def _stable_memory(reader, mem_total):
    """The RAM size shares of RAM are taken of: the same on every boot.

    MemTotal moves by a few KiB between boots (seen in the lab: 2018848 kB on a first boot of
    6.12, 2018852 kB after), so a share of it would make a re-run after a reboot report drift.
    Online memory blocks x block size (memory hotplug sysfs) is fixed; without that sysfs,
    MemTotal rounded down to 128 MiB."""
    base = "/sys/devices/system/memory"
    size = reader.text(base + "/block_size_bytes") if reader.fs.exists(base + "/block_size_bytes") else None
    try:
        block = int(size.strip(), 16) if size else 0
    except ValueError:
        block = 0
    if block > 0:
        online = 0
        for name in reader.fs.listdir(base):
            if name.startswith("memory") and name[6:].isdigit():
                state = (reader.text("%s/%s/state" % (base, name), quiet_errnos=(errno.ENOENT,)) or "").strip()
                online += state == "online"
        if online:
            return online * block
    if mem_total:
        return max(mem_total // MEMORY_ROUND, 1) * MEMORY_ROUND
    return None


def gather(fs, devices=None, cgroups=(), include_empty=False, release=None, systemd_version=None, which=None):
    """All io_facts in one dict: capabilities, devices, nvme, cgroups, pressure, warnings."""
    reader = Reader(fs)
    caps = detect(fs, release=release, systemd_version=systemd_version, which=which)
    resolver = DeviceResolver(fs)
    records = resolver.resolve_many(devices) if devices else resolver.list_disks(include_empty=include_empty)
    model = qos = None
    if caps["cgroup"]["unified"] and caps["cgroup"].get("iocost"):
        root = caps["cgroup"]["mountpoint"]
        model = reader.parsed(root + "/io.cost.model", codecs.IO_COST_MODEL)
        qos = reader.parsed(root + "/io.cost.qos", codecs.IO_COST_QOS)
    debugfs = nvme.debugfs_mount(fs)
    out_devices, hw_by_name = {}, {}
    for rec in records:
        hw_by_name[rec.name] = nvme.hctxs(fs, rec.name, debugfs, reader.warnings)
        out_devices[rec.name] = {"identity": rec.as_dict(), "queue": _queue(reader, rec.name),
                                 "hw_queues": hw_by_name[rec.name], "iocost": _iocost(model, qos, rec.majmin)}
    pressure = dict((res, reader.parsed("/proc/pressure/" + res, codecs.Psi(res))) for res in ("io", "memory", "cpu"))
    host = _host(reader)
    try:
        topo = topology.facts(fs)
    except KernelFileError as e:
        reader.warnings.append(e.message)
        topo = None
    parameters = dict((p, reader.text("%s/%s" % (nvme.DRIVER_PARAMETERS_DIR, p))) for p in nvme.QUEUE_PARAMETERS)
    return {
        "capabilities": caps,
        "devices": out_devices,
        "nvme": _nvme_controllers(reader, out_devices, hw_by_name, debugfs),
        "nvme_parameters": dict((p, _plain(v)) for p, v in parameters.items() if v is not None),
        "cgroups": dict((name, _cgroup(reader, name, caps)) for name in cgroups) if caps["cgroup"]["unified"]
        else dict((name, {"name": name, "exists": False, "error": "cgroup v2 is not the unified hierarchy on this host"})
                  for name in cgroups),
        "pressure": dict((res, v) for res, v in pressure.items() if v is not None),
        "host": host,
        "topology": topo,
        "warnings": reader.warnings,
    }


def run(params, fs, runner):
    """The module call: facts under ``ansible_facts.io_isolation``; never changes anything. With ``tenancy``, also
    who runs in the tenant slices and who the disks' I/O is charged to (``_tenancy.report``; its request is checked
    before anything is read)."""
    request = disks = None
    if params.get("tenancy") is not None:
        request, disks = _tenancy.prepare(fs, params["tenancy"])
    systemd_version, warnings = None, []
    if fs.isdir("/run/systemd/system") and runner.which("systemctl"):
        try:
            systemd_version = parse_systemd_version(runner.run(["systemctl", "--version"])[1])
        except CommandError as e:
            warnings.append(e.msg)
    facts = gather(fs, devices=params.get("devices"), cgroups=params.get("cgroups") or (),
                   include_empty=params.get("include_empty"), systemd_version=systemd_version, which=runner.which)
    if request is not None:
        root = facts["capabilities"]["cgroup"]["mountpoint"] or _tenancy.CGROUP_ROOT
        facts["tenancy"] = _tenancy.report(fs, request, disks, root=root)
        facts["warnings"].extend("tenancy: %s" % w for w in facts["tenancy"].pop("warnings"))
    return {"changed": False, "ansible_facts": {"io_isolation": facts}, "warnings": warnings + facts["warnings"]}
