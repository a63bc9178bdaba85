# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host's CPU and NUMA topology, read from sysfs only: CPUs, memory nodes, PCI devices' nodes, accelerators.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Serves the cgroup module (a cpuset is checked against the CPUs that are online and the nodes that have memory
before anything is written) and io_facts (the topology the roles place tenants by). No vendor tools: PCI class,
vendor, device and ``numa_node`` are what the kernel shows every driver's device with.

A kernel without CONFIG_NUMA has no ``/sys/devices/system/node``: its one node is 0, with every online CPU and
all memory (cpuset.mems.effective reads 0 there).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs

CPU_DIR = "/sys/devices/system/cpu"
NODE_DIR = "/sys/devices/system/node"
PCI_DEVICES = "/sys/bus/pci/devices"
SYS_CLASS_NVME = "/sys/class/nvme"
_NODE_RE = re.compile(r"^node([0-9]+)$")
_LIST = codecs.CpuSet("cpulist")
# PCI base class 0x03 (display) subclasses 00 VGA, 02 3D controller (most data-centre GPUs), 80 other display
# (some compute GPUs), and base class 0x12 processing accelerators (PCI 3.0 code, used by several AI
# accelerators). A server's BMC graphics is a VGA device too: ``boot_vga`` tells the one the firmware used.
ACCELERATOR_CLASSES = {0x0300: "vga", 0x0302: "3d", 0x0380: "display", 0x1200: "processing"}
# Names for the report only; the numbers are what is compared.
PCI_VENDORS = {0x10de: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x1a03: "ASPEED", 0x1da3: "Habana", 0x1234: "QEMU",
               0x1af4: "Red Hat (virtio)", 0x1b36: "Red Hat (QEMU)", 0x102b: "Matrox"}


def _list(fs, path):
    """The numbers of a sysfs list file, or None when it is missing or not a list."""
    text = fs.read(path)
    if text is None:
        return None
    try:
        return _LIST.parse(text)
    except codecs.CodecError:
        return None


def _int(fs, path, base=10):
    text = (fs.read(path) or "").strip()
    try:
        return int(text, base) if text else None
    except ValueError:
        return None


def cpus(fs):
    """{online, possible, offline}: CPU numbers (offline: possible and present but not online)."""
    online = _list(fs, CPU_DIR + "/online") or []
    possible = _list(fs, CPU_DIR + "/possible") or list(online)
    present = _list(fs, CPU_DIR + "/present") or list(possible)
    return {"online": online, "possible": possible, "offline": sorted(set(present) - set(online))}


def _node_memory(fs, node):
    """MemTotal of one node in bytes (``Node 0 MemTotal:  16318704 kB``), or None."""
    for line in (fs.read("%s/node%d/meminfo" % (NODE_DIR, node)) or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "MemTotal:" and fields[3].isdigit():
            return int(fields[3]) * (1024 if fields[4:5] == ["kB"] else 1)
    return None


def _mem_total(fs):
    for line in (fs.read("/proc/meminfo") or "").splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            return int(fields[1]) * 1024
    return None


def nodes(fs):
    """[{node, cpus, memory_bytes, has_memory}] of the online nodes, by number; ``cpus`` are online CPUs.

    Without ``/sys/devices/system/node`` (no CONFIG_NUMA) one node 0 with every online CPU and MemTotal.
    """
    online = cpus(fs)["online"]
    if not fs.isdir(NODE_DIR):
        return [{"node": 0, "cpus": online, "memory_bytes": _mem_total(fs), "has_memory": True}]
    listed = _list(fs, NODE_DIR + "/online")
    if listed is None:
        listed = sorted(int(m.group(1)) for m in (_NODE_RE.match(e) for e in fs.listdir(NODE_DIR)) if m)
    with_memory = memory_nodes(fs)
    out = []
    for node in listed:
        node_cpus = _list(fs, "%s/node%d/cpulist" % (NODE_DIR, node)) or []
        out.append({"node": node, "cpus": sorted(set(node_cpus) & set(online)),
                    "memory_bytes": _node_memory(fs, node), "has_memory": node in with_memory})
    return out


def memory_nodes(fs, with_source=False):
    """The nodes a cpuset.mems may name: those with memory (``has_memory``; else ``online``; no NUMA: [0]).
    ``with_source``: (nodes, the file that says so)."""
    found, source = [0], "%s (missing: a kernel without NUMA has node 0 only)" % NODE_DIR
    if fs.isdir(NODE_DIR):
        for name in ("has_memory", "online"):
            listed = _list(fs, "%s/%s" % (NODE_DIR, name))
            if listed is not None:
                found, source = listed, "%s/%s" % (NODE_DIR, name)
                break
    return (found, source) if with_source else found


def available(fs, kind):
    """(numbers, the file that says so, what they are) a cpuset may name: ``cpus`` the online CPUs, ``mems`` the nodes
    with memory."""
    if kind == "cpus":
        return cpus(fs)["online"], CPU_DIR + "/online", "CPU"
    nodes, source = memory_nodes(fs, with_source=True)
    return nodes, source, "node"


def pci_node(fs, device_dir):
    """The NUMA node of a PCI device directory (``numa_node``); None for -1 (no affinity: one node, or firmware that
    does not say) and for a device without the file."""
    node = _int(fs, device_dir + "/numa_node")
    return node if node is not None and node >= 0 else None


def nvme_node(fs, ctrl):
    """The NUMA node of an NVMe controller's PCI function (``/sys/class/nvme/<ctrl>/device/numa_node``); None for
    fabrics controllers (no PCI device) and -1."""
    return pci_node(fs, "%s/%s/device" % (SYS_CLASS_NVME, ctrl))


def accelerators(fs):
    """[{address, class, kind, vendor_id, vendor, device_id, node, local_cpus, boot_vga}] of the PCI display,
    3D and processing-accelerator functions, by address."""
    out = []
    for address in sorted(fs.listdir(PCI_DEVICES)):
        d = "%s/%s" % (PCI_DEVICES, address)
        klass = _int(fs, d + "/class", 16)
        if klass is None or (klass >> 8) not in ACCELERATOR_CLASSES:
            continue
        vendor = _int(fs, d + "/vendor", 16)
        boot_vga = _int(fs, d + "/boot_vga")
        out.append({
            "address": address, "class": "0x%06x" % klass, "kind": ACCELERATOR_CLASSES[klass >> 8],
            "vendor_id": "0x%04x" % vendor if vendor is not None else None, "vendor": PCI_VENDORS.get(vendor),
            "device_id": "0x%04x" % _int(fs, d + "/device", 16) if _int(fs, d + "/device", 16) is not None else None,
            "node": pci_node(fs, d), "local_cpus": _list(fs, d + "/local_cpulist"),
            "boot_vga": bool(boot_vga) if boot_vga is not None else None,
        })
    return out


def facts(fs):
    """The topology io_facts reports: ``cpus`` (online, possible, offline), ``nodes``, ``numa`` (more than one
    node online), ``memory_nodes`` and ``accelerators``."""
    found = nodes(fs)
    return {"cpus": cpus(fs), "nodes": found, "numa": len(found) > 1, "memory_nodes": memory_nodes(fs),
            "accelerators": accelerators(fs)}


def check_set(codec, value, option, available, source, what):
    """Problems of a cpuset value against what the host has (``available``, read from ``source``); [] when every
    number is there. ``value`` is already in the codec's form (a list)."""
    problems = []
    if not value:
        problems.append("%s: an empty %s list leaves the group nothing to run on; give %ss such as %r (this host: "
                        "%s), or leave %s out to let the group use its parent's %ss"
                        % (option, what, what, codecs.format_ranges(available[:2]) or "0", _ranges(available),
                           option, what))
        return problems
    missing = [n for n in value if n not in available]
    if missing:
        problems.append("%s %r (%s): %s %s %s not %s on this host (%s reads %s); give %ss from %s"
                        % (option, codecs.format_ranges(value), codec.name, what,
                           codecs.format_ranges(missing), "is" if len(missing) == 1 else "are",
                           "online" if what == "CPU" else "a node with memory", source, _ranges(available),
                           what, _ranges(available)))
    return problems


def _ranges(numbers):
    return codecs.format_ranges(numbers) or "nothing"
