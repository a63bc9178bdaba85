# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cgroup module's knobs: every io/memory/cpu option declared once.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

One :class:`Knob` per option of the cgroup module says everything the managers need: the
module key and its argument type, the kernel file and its codec, the cgroupfs write order, the
neutral value (what a fresh group holds, and what ``state: absent`` puts back), the feature
gate (why a kernel may lack the file), and how it persists: the systemd directive(s) that carry
it into a drop-in, or why systemd cannot. The cgroupfs manager (``_cgroup``), the
systemd manager (``_systemd``), the fresh-group reads (``_cgroups``) and the module's argument
spec walk :data:`KNOBS`; adding a knob is one entry here (plus its tests).

The codecs stay in ``_codecs.CGROUP_FILES``, keyed by kernel file: io_facts reads files that are
no knob (io.stat, io.cost.*) through the same registry, so a knob names its file and borrows
the codec, instead of the registry depending on the module's options.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import CHILD_IO_FILES
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import (
    CGROUP_FILES, MAX, CodecError, parse_rate,
)

GROUPS = ("io", "memory", "cpu")
RAW = {"type": "raw"}
# A knob whose neutral value is the codec's value for a missing line (per-device files).
FROM_CODEC = object()
# A knob whose gate is the kernel options _capabilities.CHILD_IO_FILES lists for its file (if any).
FROM_CAPABILITIES = object()
# io.max and io.low rates may carry an explicit base ('10MB', '10MiB'); the kernel takes bytes.
RATE_KEYS = ("rbps", "wbps")


def _gate(file, note=None):
    """Why a kernel may lack ``file``: the build options come from ``_capabilities.CHILD_IO_FILES``."""
    text = "the kernel is built without %s" % " and ".join(CHILD_IO_FILES[file])
    return "%s (%s)" % (text, note) if note else text


class Directive:
    """A systemd resource-control directive that carries a knob (or one field of it) into the drop-in.

    ``field``: the key of the knob's value it carries (io.max's rbps..wiops, cpu.max's quota and
    period); ``since``: the first systemd version that has it; ``zero_ignored``: systemd logs
    "out of range" for 0 and drops the line, so 0 is refused instead.
    """

    def __init__(self, name, field=None, since=None, zero_ignored=False):
        self.name = name
        self.field = field
        self.since = since
        self.zero_ignored = zero_ignored


class Knob:
    """One option of the cgroup module (``io.max``, ``memory.low``, ...) and everything about it.

    ``option``: the argument spec of the module key. ``file``: the kernel file (``line``: the one
    line of it the knob owns, io.weight's ``default``; ``per_device``: a mapping of device to value,
    one line per disk). ``order``: cgroupfs write order. ``neutral``: what a fresh group holds, the
    value ``state: absent`` puts back; None when no write can put it back (io.low). ``gate``: why a
    kernel may lack the file (by default the build options ``_capabilities.CHILD_IO_FILES`` lists for
    it; None: every kernel with the controller has it). ``systemd``: the
    directive(s) that persist it in a drop-in; ``no_systemd``: why there is none, and what to use.
    ``proportional``: a weight; a missing file (controller off) is not its neutral value, because
    the group's share then goes to its parent. ``adapt``: turns accepted input forms into the
    codec's form, returning (value, [(field, problem)]). ``within``: for a value that names host resources, which
    of them (``cpus``: online CPUs, ``mems``: nodes with memory; ``_topology.available`` reads them); every number
    given must be among them, checked before any write.
    """

    def __init__(self, group, key, file, option, order, neutral=FROM_CODEC, per_device=False, line=None,
                 systemd=(), no_systemd=None, gate=FROM_CAPABILITIES, proportional=False, adapt=None, within=None):
        self.group = group
        self.key = key
        self.name = "%s.%s" % (group, key)
        self.file = file
        # the cgroup controller that gives the file (cpuset for the cpu group's cpus and mems)
        self.controller = file.split(".", 1)[0]
        self.within = within
        self.codec = CGROUP_FILES[file]
        self.option = option
        self.order = order
        self.per_device = per_device
        self.line = line
        self.systemd = systemd if isinstance(systemd, tuple) else (systemd,)
        self.no_systemd = no_systemd
        if gate is FROM_CAPABILITIES:
            gate = _gate(file) if file in CHILD_IO_FILES else None
        self.gate = gate
        self.proportional = proportional
        self._adapt = adapt
        if neutral is FROM_CODEC:
            neutral = self.codec.lookup({}, line) if line else self.codec.absent
        self.neutral = neutral

    def desired(self, value, label):
        """(value in the codec's form, [problem]); problems name the knob, the field and ``label``."""
        if self._adapt is None:
            return value, []
        value, problems = self._adapt(value)
        return value, ["%s %s (%s): %s" % (self.name, field, label, problem) for field, problem in problems]

    def neutral_satisfies(self, want):
        """True when a missing file (controller off for the group) already holds ``want``.

        A missing file holds no limit, no protection and no policy, so every field ``want`` sets
        must be the neutral one; a weight (proportional) is never satisfied that way.
        """
        if self.proportional or self.neutral is None:
            return False
        if self.per_device:
            return all(_within(self.neutral, value) for value in want.values())
        return _within(self.neutral, want)


def _within(neutral, want):
    if isinstance(want, dict) and isinstance(neutral, dict):
        return all(neutral.get(field) == value for field, value in want.items())
    return want == neutral


def _rates(value):
    if not isinstance(value, dict):
        return value, []
    out, problems = dict(value), []
    for field in RATE_KEYS:
        raw = out.get(field)
        if isinstance(raw, str) and raw.strip() not in (MAX, "") and not raw.strip().isdigit():
            try:
                out[field] = parse_rate(raw)
            except CodecError as e:
                problems.append((field, str(e)))
    return out, problems


def _latency_target(value):
    """io.latency takes a bare target as well as {"target": ...}."""
    return (value if isinstance(value, dict) else {"target": value}), []


# No cpuset file is in CHILD_IO_FILES: the gate is the controller itself (cgroup.controllers of the root).
CPUSET_GATE = ("the cpuset controller is not in the root's cgroup.controllers: the kernel is built without "
               "CONFIG_CPUSETS, or cpuset is bound to a cgroup v1 hierarchy (hybrid mode)")


def _cpuset(key, file, order, directive, within):
    # AllowedCPUs=/AllowedMemoryNodes= came with systemd's cpuset support (244); systemd enables the controller for
    # the unit's ancestors itself once a unit sets them.
    return Knob("cpu", key, file, RAW, order, neutral=[], systemd=Directive(directive, since=244), gate=CPUSET_GATE,
                within=within)


def _memory(key, file, order, directive, neutral, **extra):
    return Knob("memory", key, file, RAW, order, neutral=neutral, systemd=Directive(directive, **extra))


# Module order within each group: argument spec, messages and drop-in lines follow it.
KNOBS = (
    Knob("io", "weight", "io.weight", {"type": "int"}, 10, line="default", systemd=Directive("IOWeight"),
         proportional=True),
    Knob("io", "weights", "io.weight", {"type": "dict"}, 11, per_device=True, systemd=Directive("IODeviceWeight"),
         proportional=True),
    Knob("io", "max", "io.max", {"type": "dict"}, 12, per_device=True, adapt=_rates, systemd=(
        Directive("IOReadBandwidthMax", "rbps"), Directive("IOWriteBandwidthMax", "wbps"),
        Directive("IOReadIOPSMax", "riops"), Directive("IOWriteIOPSMax", "wiops"))),
    Knob("io", "latency", "io.latency", {"type": "dict"}, 13, per_device=True, adapt=_latency_target,
         systemd=Directive("IODeviceLatencyTargetSec"),
         gate=_gate("io.latency", "Debian's kernels leave it off")),
    Knob("io", "prio_class", "io.prio.class", {"type": "str"}, 15, neutral="no-change",
         gate=_gate("io.prio.class", "Debian's kernels leave it off; it needs 5.14+"),
         no_systemd="systemd has no resource-control directive for the kernel file io.prio.class, and it owns the "
                    "cgroups of its units (a value written there directly is neither part of the unit nor restored "
                    "by systemd). Use manager: cgroupfs on a group below a unit with Delegate=yes, or give the unit's "
                    "processes an I/O priority with the unit's IOSchedulingClass= (and IOSchedulingPriority=): that "
                    "is a per-process ioprio_set(2), not the cgroup policy"),
    # No write takes an io.low line back to "unset" (0 is ERANGE); it goes with the group.
    Knob("io", "low", "io.low", {"type": "dict"}, 14, neutral=None, per_device=True, adapt=_rates,
         gate=_gate("io.low", "an experimental option Debian never built, removed from Linux in 6.10") +
         "; protect the group with io weights and iocost QoS instead",
         no_systemd="systemd has no directive for the kernel file io.low (and kernels since 6.10 have no io.low at "
                    "all). Use manager: cgroupfs on a group below a unit with Delegate=yes, on a kernel built with "
                    "CONFIG_BLK_DEV_THROTTLING_LOW"),
    _memory("min", "memory.min", 20, "MemoryMin", 0),
    _memory("low", "memory.low", 20, "MemoryLow", 0),
    _memory("high", "memory.high", 21, "MemoryHigh", MAX, zero_ignored=True),
    _memory("max", "memory.max", 21, "MemoryMax", MAX, zero_ignored=True),
    _memory("swap_max", "memory.swap.max", 22, "MemorySwapMax", MAX),
    _memory("zswap_max", "memory.zswap.max", 22, "MemoryZSwapMax", MAX, since=253),
    Knob("memory", "oom_group", "memory.oom.group", {"type": "bool"}, 23, neutral=0,
         no_systemd="systemd has no resource-control directive for the kernel file memory.oom.group. It writes it "
                    "only for services, from the service setting OOMPolicy=kill, when the service starts (systemctl "
                    "set-property cannot change it on a running unit). Put OOMPolicy=kill in the service's own unit, "
                    "or use manager: cgroupfs below a unit with Delegate=yes"),
    Knob("cpu", "weight", "cpu.weight", {"type": "int"}, 30, neutral=100, systemd=Directive("CPUWeight"),
         proportional=True),
    Knob("cpu", "max", "cpu.max", RAW, 31, neutral={"quota": MAX, "period": 100000},
         systemd=(Directive("CPUQuota", "quota"), Directive("CPUQuotaPeriodSec", "period"))),
    _cpuset("cpus", "cpuset.cpus", 32, "AllowedCPUs", "cpus"),
    _cpuset("mems", "cpuset.mems", 33, "AllowedMemoryNodes", "mems"),
)


def of(group):
    """The knobs of one option group, in module order."""
    return [k for k in KNOBS if k.group == group]


def keys(group):
    return tuple(k.key for k in of(group))


def find(name):
    """The knob a module name (``io.prio_class``) or kernel file (``io.prio.class``) stands for, or None.

    io.weight is two knobs (the default line and the per-device lines); the default line answers.
    """
    for knob in KNOBS:
        if name in (knob.name, knob.file):
            return knob
    return None


def by_file(file):
    return [k for k in KNOBS if k.file == file]


def fresh_value(file, device=None):
    """What ``file`` (or its ``device`` line) holds in a group just made: the kernel's defaults."""
    knob = by_file(file)[0]
    codec = knob.codec
    if device:
        return codec.lookup(codec.parse(""), device)    # a new group has no device lines
    return knob.neutral


def argument_spec():
    """The module's io/memory/cpu options, from the knobs."""
    return dict((group, {"type": "dict", "options": dict((k.key, dict(k.option)) for k in of(group))})
                for group in GROUPS)
