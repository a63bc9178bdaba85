# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""systemd resource control for the cgroup module: drop-ins, the kernel values they produce, delegation.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Pure functions and small value objects; the only I/O goes through a :class:`KernelFS` or a
``Runner`` (argv lists) passed in by the caller.

* :func:`build_plan` turns the module's desired cgroup settings into systemd resource-control
  directives for ``/etc/systemd/system/<unit>.d/50-aiinfra-io-isolation.conf`` and, for every
  directive, the value the kernel file will hold once systemd applies it (normalised with the
  codecs of ``_codecs``, so the comparison with the kernel read-back is exact) and the value
  ``systemctl show`` will report.
* Conversions are exact: I/O sizes are rendered as plain bytes (systemd reads I/O suffixes in
  base 1000, memory suffixes in base 1024: ``10M`` is 10000000 bytes/s but 10485760 bytes of
  memory), memory values are floored to whole pages by the kernel, and a CPU quota becomes a
  ``CPUQuota=`` percentage (at most two decimals) that systemd turns back into the same number
  of microseconds.
* Devices are named by a stable ``/dev/disk/by-id`` link, never by ``/dev/nvme0n1``; systemd
  resolves the link to MAJ:MIN when it applies the unit.
* ``io.prio.class``, ``io.low`` and (on slices) ``memory.oom.group`` have no directive: they are
  refused with a message that names the alternatives.
* For the cgroupfs manager, :func:`delegation` finds the unit that owns a cgroupfs path and
  whether it has ``Delegate=yes``; :func:`cgroupfs_refusal` explains why a path is not allowed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from decimal import Decimal

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import cgroup_knobs as knobs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import parse_systemd_version
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import (
    CGROUP_ROOT, expected_cgroup, is_unit_name, resolve, validate_unit_name,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import (
    CGROUP_FILES, MAX, PAGE_SIZE, CodecError, CpuMax, CpuSet, IoLatency, IoWeight, MemorySize, format_ranges,
    parse_size,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import stable_by_id_link
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    SYSTEMD_DROPIN_NAME as DROPIN_NAME, SYSTEMD_UNIT_DIR as UNIT_DIR, ManagedFile, owner as owner_of, stamped,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Setting

OWNER = owner_of("cgroup")
SECTIONS = {".slice": "Slice", ".service": "Service", ".scope": "Scope"}
# Slices systemd itself defines; a unit file in /etc would replace the vendor one.
BUILTIN_SLICES = ("-.slice", "system.slice", "user.slice", "machine.slice")
CPU_PERIOD_DEFAULT = knobs.find("cpu.max").neutral["period"]   # µs; CGROUP_CPU_QUOTA_DEFAULT_PERIOD_USEC
USEC_PER_SEC = 1000000
INT_MAX = 2 ** 31 - 1              # parse_permyriad_unbounded() returns an int
U64_MAX_TEXT = "18446744073709551615"


def _show_name(directive):
    """The ``systemctl show`` property of a directive: time spans '...Sec=' are shown as '...USec'."""
    return directive[:-len("Sec")] + "USec" if directive.endswith("Sec") else directive


# Directives (and their show properties) that take 'PATH VALUE', one per device.
DEVICE_DIRECTIVES = tuple(d.name for k in knobs.KNOBS if k.per_device for d in k.systemd)
DEVICE_PROPERTIES = tuple(_show_name(d) for d in DEVICE_DIRECTIVES)
LATENCY_PROPERTY = _show_name(knobs.find("io.latency").systemd[0].name)
# Directives (and show properties) that hold a CPU or node list: systemctl shows them in the kernel's list form.
CPU_SET_PROPERTIES = dict((d.name, k.codec) for k in knobs.KNOBS if isinstance(k.codec, CpuSet) for d in k.systemd)
# The directive that switches an option group's controller on for the unit.
ACCOUNTING = {"io": "IOAccounting", "memory": "MemoryAccounting"}

_SPAN_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([^\s0-9.]+)")
_TIME_UNITS = {
    "us": 1, "usec": 1, u"\u00b5s": 1, u"\u03bcs": 1,
    "ms": 1000, "msec": 1000,
    "s": USEC_PER_SEC, "sec": USEC_PER_SEC,
    "min": 60 * USEC_PER_SEC, "h": 3600 * USEC_PER_SEC, "hr": 3600 * USEC_PER_SEC,
    "d": 86400 * USEC_PER_SEC, "w": 7 * 86400 * USEC_PER_SEC,
    "month": 2629800 * USEC_PER_SEC, "y": 31557600 * USEC_PER_SEC,
}


class SystemdError(ValueError):
    """A request systemd cannot carry out exactly; ``errors`` lists every problem."""

    def __init__(self, errors):
        if not isinstance(errors, (list, tuple)):
            errors = [errors]
        self.errors = list(errors)
        self.msg = "; ".join(self.errors)
        super(SystemdError, self).__init__(self.msg)


# ---------------------------------------------------------------------------------------------
# Units, paths, files
# ---------------------------------------------------------------------------------------------

def unit_section(unit):
    """'inference.slice' -> 'Slice', 'vllm.service' -> 'Service', 'run-u1.scope' -> 'Scope'."""
    problems = [] if is_unit_name(unit or "") else [
        "%r is not a systemd slice, service or scope name (it must end in .slice, .service or .scope and contain "
        "no '/'); for a path below /sys/fs/cgroup use manager: cgroupfs" % (unit,)]
    problems = problems or validate_unit_name(unit)
    if problems:
        raise SystemdError(problems)
    return SECTIONS[unit[unit.rindex("."):]]


def dropin_dir(unit):
    unit_section(unit)
    return "%s/%s.d" % (UNIT_DIR, unit)


def dropin_path(unit):
    """``/etc/systemd/system/<unit>.d/50-aiinfra-io-isolation.conf``."""
    return "%s/%s" % (dropin_dir(unit), DROPIN_NAME)


def slice_unit_path(name):
    if unit_section(name) != "Slice":
        raise SystemdError("%s is not a slice; only slices can be created (services and scopes come from "
                           "their packages or container runtimes)" % name)
    return "%s/%s" % (UNIT_DIR, name)


def render_slice_unit(name, description=None, owner=OWNER):
    """A minimal, stamped ``/etc/systemd/system/<name>.slice`` for ``create: true``."""
    path = slice_unit_path(name)
    if name in BUILTIN_SLICES:
        raise SystemdError("%s is defined by systemd itself; do not create it (a file at %s would replace the "
                           "vendor unit): drop create" % (name, path))
    text = description if description is not None else "Workload slice %s" % name
    if not text.strip() or "\n" in text or "\r" in text:
        raise SystemdError("slice description %r must be one non-empty line" % (text,))
    # '%' starts a unit specifier; '%%' is a literal percent sign.
    return stamped("[Unit]\nDescription=%s\n" % text.strip().replace("%", "%%"), owner, comment="#")


def slice_unit_setting(name, description=None, owner=OWNER, present=True, adopt=False):
    """The slice unit file as a reconcile setting (``present=False``: the file must not exist)."""
    content = render_slice_unit(name, description, owner) if present else None
    return ManagedFile(slice_unit_path(name), content, adopt=adopt)


def dropin_setting(unit, plan=None, owner=OWNER, adopt=False):
    """The drop-in as a reconcile setting; no plan (or an empty one) means the file must not exist."""
    content = plan.content(owner) if plan is not None and not plan.empty else None
    return ManagedFile(dropin_path(unit), content, adopt=adopt)


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------

def stable_device_path(record):
    """The ``/dev/disk/by-id`` link a drop-in should name for a resolved whole disk.

    The link is ranked by ``_devices.stable_by_id_link`` (WWN first, then the NVMe wwid forms, the
    virtio serial, other serial links). Raises :class:`SystemdError` for a
    partition, a hidden device, or a disk whose only name is its kernel name.
    """
    name = record.name
    if record.partition:
        raise SystemdError("%s is a partition of %s; io settings apply to whole disks only: use %s"
                           % (name, record.parent, record.parent))
    if record.hidden or not record.majmin:
        raise SystemdError("%s is a hidden block device without a device number; it cannot be configured" % name)
    if record.stable_id is None:
        raise SystemdError("%s has no persistent identity, so a drop-in cannot name it reliably: %s"
                           % (name, record.stable_id_note or "no WWN, serial or by-id link"))
    link = stable_by_id_link(record)
    if link is None:
        raise SystemdError(
            "%s (%s) has no usable /dev/disk/by-id link (links: %s); a drop-in must not name /dev/%s, which can be "
            "another disk after a reboot. Give the disk a serial number or WWN (QEMU: serial= / wwn=) so that "
            "udev creates a by-id link, or use manager: cgroupfs"
            % (name, record.majmin, ", ".join(record.by_id) or "none", name))
    return link


def _is_record(value):
    return hasattr(value, "majmin") and hasattr(value, "by_id")


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def unsupported_message(setting, unit=None):
    """Why ``setting`` (kernel file or module name) cannot be applied by the systemd manager, and what to use."""
    where = " for %s" % unit if unit else ""
    knob = knobs.find(setting)
    if knob is not None and knob.no_systemd:
        return "%s%s cannot be applied with manager: systemd: %s" % (knob.name, where, knob.no_systemd)
    return "%s%s has no systemd resource-control directive; use manager: cgroupfs below a Delegate=yes unit" % (
        setting, where)


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------

class SystemdPlan:
    """Directives for one unit, with what the kernel and ``systemctl show`` will report.

    ``directives``: ``[(name, value)]`` in file order. ``expected``: ``{kernel file: normalised
    value}`` comparable with the file's codec ``parse()``. ``show``: ``{property: value}`` in the
    form of :func:`show_values`. ``devices``: ``{MAJ:MIN: by-id path}``.
    """

    def __init__(self, unit):
        self.unit = unit
        self.section = unit_section(unit)
        self.directives = []
        self.expected = {}
        self.show = {}
        self.devices = {}

    @property
    def empty(self):
        return not self.directives

    @property
    def path(self):
        return dropin_path(self.unit)

    def body(self):
        lines = ["[%s]" % self.section] + ["%s=%s" % pair for pair in self.directives]
        return "\n".join(lines) + "\n"

    def content(self, owner=OWNER):
        return stamped(self.body(), owner, comment="#")

    def properties(self):
        """The ``systemctl show -p`` properties that report the managed directives."""
        return list(self.show)

    def as_dict(self):
        return {"unit": self.unit, "path": self.path, "directives": ["%s=%s" % d for d in self.directives],
                "expected": dict(self.expected), "devices": dict(self.devices)}

    def kernel_diff(self, fs, cgroup_dir):
        """[{file, key, want, have}] for every expected kernel value the group's files do not hold.

        A missing file counts as holding no limit, protection or policy (its controller is off):
        it satisfies the knobs' neutral values only, and never a weight.
        """
        out = []
        for name, want in self.expected.items():
            codec = CGROUP_FILES[name]
            text = fs.read(cgroup_dir.rstrip("/") + "/" + name)
            if text is None:
                if not knobs.find(name).neutral_satisfies(want):
                    out.append({"file": name, "key": name, "want": want, "have": None})
                continue
            try:
                have = codec.parse(text)
            except CodecError as e:
                out.append({"file": name, "key": name, "want": want, "have": text, "error": e.msg})
                continue
            out.extend({"file": name, "key": key, "want": w, "have": h} for key, w, h in codec.diff(want, have))
        return out

    def show_diff(self, shown):
        """[{property, key, want, have}] for managed directives ``systemctl show`` reports differently.

        ``shown`` is :func:`show_values` output. A device without a limit or latency line reads as max.
        """
        out = []
        for prop, want in self.show.items():
            have = shown.get(prop)
            if not isinstance(want, dict):
                if have != want:
                    out.append({"property": prop, "key": prop, "want": want, "have": have})
                continue
            have = have if isinstance(have, dict) else {}
            for path, value in sorted(want.items()):
                got = have.get(path, None if prop == "IODeviceWeight" else MAX)
                if got != value:
                    out.append({"property": prop, "key": "%s %s" % (prop, path), "want": value, "have": got})
        return out


def _items(mapping, what, errors):
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        errors.append("%s: expected a mapping of device to value, got %r" % (what, mapping))
        return []
    return list(mapping.items())


def _check_keys(group, values, valid, errors):
    if not isinstance(values, dict):
        errors.append("%s: expected a mapping, got %r" % (group, values))
        return False
    unknown = sorted(k for k in values if k not in valid)
    if unknown:
        errors.append("%s: unknown key(s) %s; valid keys: %s" % (group, ", ".join(unknown), ", ".join(valid)))
    return True


class _Builder:
    """Fills a SystemdPlan group by group, collecting every problem before failing."""

    def __init__(self, plan, devices, version, page_size, paths=None):
        self.plan = plan
        self.devices = devices or {}
        self.paths = paths or {}
        self.version = version
        self.page_size = page_size
        self.errors = []

    # -- helpers ----------------------------------------------------------------------------
    def device(self, key, what, seen):
        """(record, by-id path) for a device key (a BlockDevice or a selector in ``devices``)."""
        rec = key if _is_record(key) else self.devices.get(key)
        if rec is None:
            self.errors.append("%s: device %r was not resolved (resolve selectors with _devices.resolve_many and "
                               "pass them in devices)" % (what, key))
            return None, None
        try:
            # a path the unit's configuration already names the disk by (cgroup_boost), else the ranked link
            path = self.paths.get(rec.majmin) or stable_device_path(rec)
        except SystemdError as e:
            self.errors.extend("%s: %s" % (what, m) for m in e.errors)
            return None, None
        if rec.majmin in seen:
            self.errors.append("%s: %r and %r are the same disk %s; list each disk once"
                               % (what, seen[rec.majmin], key if not _is_record(key) else rec.name, rec.name))
            return None, None
        seen[rec.majmin] = key if not _is_record(key) else rec.name
        self.plan.devices[rec.majmin] = path
        return rec, path

    def validated(self, problems, label):
        self.errors.extend("%s (%s)" % (p, label) if label else p for p in problems)
        return not problems

    def add(self, name, value):
        self.plan.directives.append((name, value))

    def per_device(self, mapping, what):
        """Sorted [(path, majmin, value, label)] of a per-device mapping."""
        entries, seen = [], {}
        for key, value in _items(mapping, what, self.errors):
            rec, path = self.device(key, what, seen)
            if rec is not None:
                entries.append((path, rec.majmin, value, "device %s" % rec.name))
        return sorted(entries, key=lambda e: e[0])

    # -- knobs ------------------------------------------------------------------------------
    def group(self, group, values):
        """One option group: every knob given, through the directive(s) the catalogue names for it."""
        if not _check_keys(group, values, knobs.keys(group), self.errors):
            return
        given = [k for k in knobs.of(group) if values.get(k.key) is not None]
        self.errors.extend(unsupported_message(k.name, self.plan.unit) for k in given if not k.systemd)
        carried = [k for k in given if k.systemd and self.has_directives(k)]
        if carried and group in ACCOUNTING:
            self.add(ACCOUNTING[group], "yes")
            self.plan.show[ACCOUNTING[group]] = True
        for knob in carried:
            self.render(knob, values[knob.key])

    def has_directives(self, knob):
        """False (with the reason) when this host's systemd is older than a directive of the knob."""
        missing = [d for d in knob.systemd if d.since and (self.version is None or self.version < d.since)]
        for d in missing:
            self.errors.append("%s needs %s=, which systemd has since version %d; this host runs %s. Drop %s or use "
                               "manager: cgroupfs below a Delegate=yes unit"
                               % (knob.name, d.name, d.since, "systemd %d" % self.version if self.version else
                                  "a systemd whose version could not be read", knob.key))
        return not missing

    def render(self, knob, value):
        """How systemd spells the value depends on the kind of kernel file (the knob's codec)."""
        if isinstance(knob.codec, MemorySize):
            self.memory_size(knob, value)
        elif isinstance(knob.codec, CpuMax):
            self.cpu_max(knob, value)
        elif isinstance(knob.codec, CpuSet):
            self.cpu_set(knob, value)
        elif not knob.per_device:
            self.number(knob, value)
        elif isinstance(knob.codec, IoWeight):
            self.device_weights(knob, value)
        elif isinstance(knob.codec, IoLatency):
            self.device_latency(knob, value)
        else:
            self.device_limits(knob, value)

    def number(self, knob, value):
        """A plain number (IOWeight=, CPUWeight=); with ``line``, that line of the kernel file."""
        codec, line = knob.codec, knob.line
        wrapped = {line: value} if line else value
        if not self.validated(codec.validate(wrapped), None):
            return
        number = codec.normalize(wrapped)[line] if line else codec.normalize(wrapped)
        if line:
            self.plan.expected.setdefault(knob.file, {})[line] = number
        else:
            self.plan.expected[knob.file] = number
        self.add(knob.systemd[0].name, str(number))
        self.plan.show[knob.systemd[0].name] = number

    def device_weights(self, knob, mapping):
        codec, directive = knob.codec, knob.systemd[0].name
        shown = {}
        for path, majmin, value, label in self.per_device(mapping, knob.name):
            if not self.validated(codec.validate({majmin: value}), label):
                continue
            weight = codec.normalize({majmin: value})[majmin]
            self.plan.expected.setdefault(knob.file, {})[majmin] = weight
            if weight != "default":   # no directive drops an override; 'default' = no line
                self.add(directive, "%s %d" % (path, weight))
                shown[path] = weight
        if shown:
            self.plan.show[directive] = shown

    def device_limits(self, knob, mapping):
        """io.max: one directive per field, each listing its devices."""
        codec = knob.codec
        limits, lines = {}, dict((d.name, []) for d in knob.systemd)
        for path, majmin, settings, label in self.per_device(mapping, knob.name):
            if not isinstance(settings, dict):
                self.errors.append("%s: expected a mapping of %s for %s, got %r"
                                   % (knob.name, "/".join(d.field for d in knob.systemd), label, settings))
                continue
            values, problems = knob.desired(settings, label)
            if problems:
                self.errors.extend(problems)
                continue
            if not self.validated(codec.validate({majmin: values}), label):
                continue
            limits[majmin] = codec.normalize({majmin: values})[majmin]
            for d in knob.systemd:
                if d.field in limits[majmin]:
                    value = limits[majmin][d.field]
                    lines[d.name].append((path, "infinity" if value == MAX else str(value), value))
        for d in knob.systemd:
            for path, text, value in lines[d.name]:
                self.add(d.name, "%s %s" % (path, text))
                self.plan.show.setdefault(d.name, {})[path] = value
        if limits:
            self.plan.expected[knob.file] = limits

    def device_latency(self, knob, mapping):
        codec, directive = knob.codec, knob.systemd[0].name
        targets = {}
        for path, majmin, value, label in self.per_device(mapping, knob.name):
            settings, _problems = knob.desired(value, label)
            if not self.validated(codec.validate({majmin: settings}), label):
                continue
            targets[majmin] = codec.normalize({majmin: settings})[majmin]
            target = targets[majmin]["target"]
            self.add(directive, "%s %s" % (path, "infinity" if target == MAX else "%dus" % target))
            self.plan.show.setdefault(_show_name(directive), {})[path] = target
        if targets:
            self.plan.expected[knob.file] = targets

    def memory_size(self, knob, value):
        """Bytes as given (the kernel floors them to pages; the expectation is floored), or infinity."""
        codec, directive = knob.codec, knob.systemd[0]
        if not self.validated(codec.validate(value), None):
            return
        size = parse_size(value)
        if size == 0 and directive.zero_ignored:
            self.errors.append("%s: 0 is out of range for %s= (systemd ignores the line); give at least one "
                               "page (%d bytes) or max" % (knob.name, directive.name, self.page_size))
            return
        normalised = codec.normalize(value, self.page_size)
        self.plan.expected[knob.file] = normalised
        self.add(directive.name, "infinity" if normalised == MAX else str(size))
        self.plan.show[directive.name] = MAX if normalised == MAX else size

    def cpu_max(self, knob, value):
        """cpu.max as CPUQuota= (a percentage of one CPU per second) and CPUQuotaPeriodSec=."""
        if not self.validated(knob.codec.validate(value), None):
            return
        values = knob.codec.normalize(value)
        quota_directive, period_directive = (d.name for d in knob.systemd)
        quota, period = values["quota"], values.get("period", CPU_PERIOD_DEFAULT)
        if quota == MAX:
            if period != CPU_PERIOD_DEFAULT:
                self.errors.append("%s: with quota max systemd always writes the default period %d µs; drop the "
                                   "period or give a quota" % (knob.file, CPU_PERIOD_DEFAULT))
                return
            self.add(quota_directive, "")   # empty assignment: no quota
            self.plan.expected[knob.file] = dict(knob.neutral)
            self.plan.show["CPUQuotaPerSecUSec"] = MAX
            return
        try:
            permyriad = quota_permyriad(quota, period)
        except SystemdError as e:
            self.errors.extend(e.errors)
            return
        self.add(quota_directive, format_permyriad(permyriad))
        self.plan.show["CPUQuotaPerSecUSec"] = permyriad * USEC_PER_SEC // 10000
        if period != CPU_PERIOD_DEFAULT:
            self.add(period_directive, "%dus" % period)
            self.plan.show[_show_name(period_directive)] = period
        self.plan.expected[knob.file] = dict(values)

    def cpu_set(self, knob, value):
        """AllowedCPUs=/AllowedMemoryNodes= in the kernel's list form, which systemd writes to cpuset.cpus/.mems
        as is (its cpu_set_to_range_string) and ``systemctl show`` prints back."""
        if not self.validated(knob.codec.validate(value), None):
            return
        numbers = knob.codec.normalize(value)
        directive = knob.systemd[0].name
        self.add(directive, format_ranges(numbers))
        self.plan.expected[knob.file] = numbers
        self.plan.show[directive] = numbers


def quota_permyriad(quota, period):
    """CPU quota µs per period -> the CPUQuota= value in 1/100 % for which systemd writes exactly ``quota``.

    systemd keeps CPUQuota= as µs per second (percent x 10000 / 100) and writes
    ``floor(per_sec * period / 1 s)`` into cpu.max. Raises SystemdError naming the nearest
    quotas systemd can express when ``quota`` is not one of them.
    """
    permyriad = -(-quota * 10000 // period)            # ceil
    if permyriad > INT_MAX:
        raise SystemdError("cpu.max: quota %d per period %d is CPUQuota=%s, more than systemd can parse"
                           % (quota, period, format_permyriad(permyriad)))
    written = permyriad * period // 10000
    if written != quota:
        below = (permyriad - 1) * period // 10000
        raise SystemdError("cpu.max: quota %d µs per %d µs is %s%% of a CPU, and CPUQuota= takes at most two "
                           "decimals: systemd would write %d. Use quota %d (CPUQuota=%s) or %d (CPUQuota=%s)"
                           % (quota, period, Decimal(quota * 100) / Decimal(period), written, below,
                              format_permyriad(permyriad - 1), written, format_permyriad(permyriad)))
    return permyriad


def format_permyriad(permyriad):
    """5000 -> '50%', 3333 -> '33.33%', 3330 -> '33.3%'."""
    whole, frac = divmod(permyriad, 100)
    return "%d%%" % whole if not frac else "%d.%s%%" % (whole, ("%02d" % frac).rstrip("0"))


def build_plan(unit, settings, devices=None, systemd_version=None, page_size=PAGE_SIZE, paths=None):
    """Desired cgroup settings -> :class:`SystemdPlan`; raises SystemdError listing every problem.

    ``settings`` (None values are not managed)::

        {"io": {"weight": N, "weights": {dev: N | "default"},
                "max": {dev: {"rbps"|"wbps": bytes/s | "10MB" | "10MiB" | "max", "riops"|"wiops": N | "max"}},
                "latency": {dev: µs | "max" | {"target": ...}}, "prio_class": refused, "low": refused},
         "memory": {"min"|"low"|"high"|"max"|"swap_max"|"zswap_max": bytes | "512M" | "max", "oom_group": bool},
         "cpu": {"weight": N, "max": {"quota": µs | "max", "period": µs} | "QUOTA [PERIOD]"}}

    ``dev`` is a resolved ``_devices.BlockDevice`` or a selector that ``devices`` maps to one.
    ``systemd_version`` gates directives newer systemd has (MemoryZSwapMax=); ``page_size`` is the host's (memory values floor to it).
    ``paths``: {MAJ:MIN: device path} to name a disk by instead of its ranked by-id link (systemd keys
    a unit's device entries by the path's text, so a drop-in that overrides another must repeat it).
    """
    plan = SystemdPlan(unit)
    builder = _Builder(plan, devices, systemd_version, page_size, paths)
    settings = settings or {}
    _check_keys("settings", settings, knobs.GROUPS, builder.errors)
    for group in knobs.GROUPS:
        if isinstance(settings, dict) and settings.get(group) is not None:
            builder.group(group, settings[group])
    if builder.errors:
        seen = []
        for message in builder.errors:
            if message not in seen:
                seen.append(message)
        raise SystemdError(seen)
    return plan


# ---------------------------------------------------------------------------------------------
# systemctl
# ---------------------------------------------------------------------------------------------

def daemon_reload_argv():
    return ["systemctl", "daemon-reload"]


class Reloads:
    """The daemon-reloads of one module call's units. A reload that only makes systemd's loaded configuration match
    the files again (after the runtime control files are removed) is owed, not run: the next unit's reload, or
    :meth:`flush` once the call's writes are done (the engine's settle step), pays it. So is the reload that loads a
    running unit's changed files: ``set-property`` merges into the loaded configuration and applies to the cgroup
    either way. Only a unit about to be started needs its files loaded first. One reload costs systemd a re-read of
    every unit and a run of every generator (about 3 s on a TCG lab guest, most of it PID 1's): a converge of five
    slices made ten; the lab's first rollout of a colocated host made ten for its nine units, and now makes one per
    created slice and one more."""

    def __init__(self, runner):
        self.runner = runner
        self.owed = False

    def now(self):
        self.runner.run(daemon_reload_argv())
        self.owed = False

    def later(self):
        self.owed = True

    def flush(self):
        if self.owed:
            self.now()


def reloads(runner):
    """The one :class:`Reloads` of the call that ``runner`` runs commands for."""
    batch = getattr(runner, "systemd_reloads", None)
    if batch is None:
        batch = Reloads(runner)
        runner.systemd_reloads = batch
    return batch


def start_argv(unit):
    unit_section(unit)
    return ["systemctl", "start", "--", unit]


def stop_argv(*units):
    return ["systemctl", "stop", "--"] + list(units)


def show_argv(unit, properties):
    if not unit.endswith(".timer"):     # the boost window's timer; every other unit is a managed one
        unit_section(unit)
    argv = ["systemctl", "show"]
    for prop in properties:
        argv += ["-p", prop]
    return argv + ["--", unit]


def set_property_argv(unit, directives, runtime=True):
    """``systemctl set-property [--runtime] -- UNIT K=V ...`` (set-property takes unit-file syntax)."""
    unit_section(unit)
    return ["systemctl", "set-property"] + (["--runtime"] if runtime else []) + ["--", unit] + [
        "%s=%s" % pair for pair in directives]


def restart_argv(unit):
    unit_section(unit)
    return ["systemctl", "restart", "--", unit]


# systemctl's list-* tables: JSON (``--output=json``, which systemd 246 and newer honour for tables), and the same
# argv prints the plain table without legend on a systemd that ignores it for tables.
LIST_OPTIONS = ["--type=service", "--plain", "--no-legend", "--no-pager", "--output=json"]


def _table(runner, argv, columns):
    """[{column: value}] of a systemctl list-* table, from its JSON or, where the host's systemd prints text, its
    plain whitespace-separated columns (the last column takes the rest of the line)."""
    _rc, out, err = runner.run(argv)
    text = (out or "").strip()
    if text.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError:
            raise CommandError(argv, 0, out, err, reason="it printed JSON that does not parse: %r" % text[:200])
        return [dict((c, str(row.get(c) if row.get(c) is not None else "")) for c in columns)
                for row in rows if isinstance(row, dict)]
    out_rows = []
    for line in text.splitlines():
        fields = line.split(None, len(columns) - 1)
        if fields and fields[0] in ("\u25cf", "*"):      # a bullet some versions print before failed units
            fields = fields[1:]
        if fields:
            out_rows.append(dict(zip(columns, fields + [""] * (len(columns) - len(fields)))))
    return out_rows


def list_services(runner):
    """Every service systemd knows on this host: {name: {"load": LoadState or "", "active": ActiveState or "",
    "file": unit-file state or ""}} - the units it has loaded (``list-units --all``) and those installed
    (``list-unit-files``), which a stopped, unreferenced service is only in. Templates (``foo@.service``) and
    aliases are left out: a drop-in goes to the unit's own name."""
    out = {}
    for row in _table(runner, ["systemctl", "list-units", "--all"] + LIST_OPTIONS,
                      ("unit", "load", "active", "sub", "description")):
        entry = out.setdefault(row["unit"], {"load": "", "active": "", "file": ""})
        entry.update(load=row["load"], active=row["active"])
    for row in _table(runner, ["systemctl", "list-unit-files"] + LIST_OPTIONS, ("unit_file", "state", "preset")):
        out.setdefault(row["unit_file"], {"load": "", "active": "", "file": ""})["file"] = row["state"]
    return dict((name, info) for name, info in out.items()
                if name.endswith(".service") and "@." not in name and info["file"] != "alias")


def show_units(runner, units, properties):
    """``systemctl show -p P... -- UNIT...`` as {unit as asked: {property: value}} (one block per unit, in order)."""
    if not units:
        return {}
    argv = ["systemctl", "show"]
    for prop in properties:
        argv += ["-p", prop]
    argv += ["--"] + list(units)
    _rc, out, err = runner.run(argv)
    blocks = re.split(r"\n\s*\n", (out or "").strip("\n"))
    if len(blocks) != len(units):
        raise CommandError(argv, 0, out, err, reason="it printed %d blocks for %d units: %r"
                           % (len(blocks), len(units), (out or "")[:300]))
    result = {}
    for unit, block in zip(units, blocks):
        shown = parse_show(block)
        result[unit] = dict((p, (shown.get(p) or [""])[-1]) for p in properties)
    return result


def systemd_version(runner):
    """The host's systemd version as an int (``systemctl --version``), or None if unknown."""
    rc, out, _err = runner.run(["systemctl", "--version"], check=False)
    return parse_systemd_version(out) if rc == 0 else None


def parse_timespan(text):
    """systemd time span as printed by ``systemctl show`` -> µs; 'infinity' -> 'max'.

    '0', '500ms', '1.500000s', '1min 4s', '333.300ms', '25ms 300us'. A bare number is seconds.
    """
    value = text.strip()
    if value == "infinity":
        return MAX
    if re.match(r"^[0-9]+$", value):
        return int(value) * USEC_PER_SEC
    total, pos = Decimal(0), 0
    while pos < len(value):
        m = _SPAN_RE.match(value, pos)
        if not m or m.group(2) not in _TIME_UNITS:
            raise SystemdError("time span %r is not in systemd's format (e.g. 500ms, 1min 4s)" % text)
        total += Decimal(m.group(1)) * _TIME_UNITS[m.group(2)]
        pos = m.end()
    if not value or total != total.to_integral_value():
        raise SystemdError("time span %r is not a whole number of microseconds" % text)
    return int(total)


def parse_show(text):
    """``Key=value`` lines -> {key: [values]} (device properties repeat their key)."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _show_number(value):
    if value in ("infinity", U64_MAX_TEXT):
        return MAX
    return int(value) if value.isdigit() else value


def _show_scalar(key, value):
    if value == "[not set]":
        return None
    if key.endswith("Accounting") or key == "Delegate":
        return {"yes": True, "no": False}.get(value, value)
    if key in CPU_SET_PROPERTIES:
        try:
            return CPU_SET_PROPERTIES[key].parse(value)
        except CodecError:
            return value
    if "USec" in key or key.endswith("Sec"):
        return parse_timespan(value)
    return _show_number(value)


def show_values(text):
    """``systemctl show -p ...`` output -> comparable values.

    Weights: int or None (``[not set]``). Memory: bytes or 'max' (``infinity``, and the raw
    ``18446744073709551615`` some versions print for MemoryZSwapMax). Time spans (``*USec``):
    µs or 'max'. Booleans for ``*Accounting``/``Delegate``. Device lists (IODeviceWeight,
    IO*BandwidthMax, IO*IOPSMax, IODeviceLatencyTargetUSec): ``{path: value}``.
    """
    out = {}
    for key, values in parse_show(text).items():
        if key in DEVICE_PROPERTIES:
            devices = {}
            for value in values:
                path, _sep, number = value.rpartition(" ")
                if not path:
                    raise SystemdError("%s=%s is not 'PATH VALUE'" % (key, value))
                devices[path.strip()] = parse_timespan(number) if key == LATENCY_PROPERTY else _show_number(number)
            out[key] = devices
        else:
            out[key] = _show_scalar(key, values[-1])
    return out


# ---------------------------------------------------------------------------------------------
# Delegation (cgroupfs manager on a systemd host)
# ---------------------------------------------------------------------------------------------

def systemd_host(fs):
    """True when systemd is the init system (sd_booted(): /run/systemd/system exists)."""
    return fs.isdir("/run/systemd/system")


def owner_unit(path, root=CGROUP_ROOT):
    """(unit, its cgroup directory) of the systemd service or scope that owns ``path``, or (None, None).

    Walks the path's components from the root and stops at the first ``*.service``/``*.scope``:
    the system manager's units never nest below a service or scope, so anything deeper (e.g.
    ``user@1000.service/app.slice/x.service``) belongs to whoever that unit delegated to, and the
    unit to ask about delegation is the outermost one. A component systemd would refuse as a unit
    name (``x;reboot.service``) is a plain directory, not a unit. Raises CgroupNameError for a bad path.
    """
    full = resolve(path, root)
    parts = [p for p in full[len(root):].split("/") if p]
    for index, part in enumerate(parts):
        if part.endswith((".service", ".scope")) and not validate_unit_name(part):
            return part, "/".join([root] + parts[:index + 1])
    return None, None


def unit_delegates(runner, unit):
    """True when ``systemctl show -p Delegate --value UNIT`` says yes."""
    unit_section(unit)
    argv = ["systemctl", "show", "-p", "Delegate", "--value", "--", unit]
    rc, out, err = runner.run(argv, check=False)
    if rc != 0:
        raise SystemdError("cannot ask systemd whether %s delegates its cgroup: %s failed (rc=%s): %s"
                           % (unit, " ".join(argv), rc, (err or out or "").strip()[:300]))
    value = (out or "").strip().lower()
    if value not in ("yes", "no", ""):
        raise SystemdError("unexpected Delegate value %r for %s from %s" % (value, unit, " ".join(argv)))
    return value == "yes"


def delegation(runner, fs, path, root=CGROUP_ROOT):
    """Who owns a cgroupfs path: {path, unit, unit_path, delegate, below_unit, unit_active, controllers}."""
    full = resolve(path, root)
    unit, unit_dir = owner_unit(full, root)
    info = {"path": full, "unit": unit, "unit_path": unit_dir, "delegate": False, "below_unit": False,
            "unit_active": False, "controllers": []}
    if unit is None:
        return info
    info["below_unit"] = full != unit_dir
    info["unit_active"] = fs.isdir(unit_dir)
    if info["unit_active"]:
        info["controllers"] = (fs.read(unit_dir + "/cgroup.controllers") or "").split()
    info["delegate"] = unit_delegates(runner, unit)
    return info


def cgroupfs_refusal(info):
    """None when the cgroupfs manager may write below ``info["path"]`` (from :func:`delegation`), else why not."""
    path, unit = info["path"], info["unit"]
    if unit is None:
        return ("%s is not below a systemd service or scope, so systemd owns it: on a systemd host writes made "
                "straight into cgroupfs do not last (observed on systemd 252: a daemon-reload strips the "
                "controllers enabled by hand and the group's io.* files vanish). Use manager: systemd (a slice or "
                "service), or create the group below a unit with Delegate=yes (a service with Delegate=yes, or a "
                "container runtime's delegated scope)" % path)
    if not info["delegate"]:
        return ("%s belongs to %s, which does not have Delegate=yes: systemd manages that unit's whole cgroup "
                "subtree and reverts direct writes. Set Delegate=yes on %s (systemctl edit %s) and restart it, or use "
                "manager: systemd" % (path, unit, unit, unit))
    if not info["below_unit"]:
        return ("%s is the cgroup of %s itself: with Delegate=yes only the subtree below it is delegated, and "
                "systemd keeps managing the unit's own cgroup. Use a child group such as %s/workload"
                % (path, unit, path))
    if not info["unit_active"]:
        return ("%s is not running (its cgroup %s does not exist); start it before creating groups below it"
                % (unit, info["unit_path"]))
    return None


# ---------------------------------------------------------------------------------------------
# Applying a drop-in to a running unit, as one reconcile setting
# ---------------------------------------------------------------------------------------------

RUNTIME_CONTROL_DIR = "/run/systemd/system.control"
# Directive -> kernel file it sets (Accounting directives only switch controllers on).
DIRECTIVE_FILES = dict((d.name, k.file) for k in knobs.KNOBS for d in k.systemd)


def parse_dropin(text):
    """[(name, value)] of a drop-in's assignments (section headers and comments skipped)."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        name, sep, value = line.partition("=")
        if sep:
            out.append((name.strip(), value.strip()))
    return out


def _device_entries(directives):
    """{(directive, path): value} of the per-device assignments."""
    out = {}
    for name, value in directives:
        if name in DEVICE_DIRECTIVES and value:
            path, _sep, rest = value.partition(" ")
            out[(name, path)] = rest.strip()
    return out


def reset_directives(previous, target):
    """Assignments that take back, on a running unit, what ``previous`` set and ``target`` does not.

    ``systemctl set-property`` merges: a property missing from the drop-in keeps its value on the
    running unit until the cgroup is made again. A scalar is reset by an empty assignment
    (systemd's default), a device limit or latency by ``infinity``. Per-device weights are not
    here: systemd cannot remove an io.weight line at all, see :func:`stale_weight_lines`.
    """
    names = set(n for n, _v in target)
    out = []
    for name, _value in previous:
        if name in DEVICE_DIRECTIVES or name.endswith("Accounting") or name in names:
            continue
        if (name, "") not in out:
            out.append((name, ""))
    kept = _device_entries(target)
    for (name, path), _value in sorted(_device_entries(previous).items()):
        if name != "IODeviceWeight" and (name, path) not in kept:
            out.append((name, "%s infinity" % path))
    return out


def stale_weight_lines(kernel, configured, weight):
    """MAJ:MIN of per-device io.weight lines no configuration asks for, that do not hold ``weight``.

    No directive writes ``MAJ:MIN default``, so a line systemd once wrote stays until the cgroup is
    made again. The closest systemd can come is the group's own weight: such lines are set to it
    (and the caller keeps verifying them), so a disk does not stay on a stale value silently.
    ``kernel``: parsed io.weight; ``configured``: MAJ:MIN the unit's configuration lists.
    """
    return sorted(dev for dev, value in kernel.items()
                  if dev != "default" and dev not in configured and value != weight)


def unit_info(runner, unit):
    """LoadState, ActiveState, ControlGroup, FragmentPath of a unit (``systemctl show``)."""
    props = ("LoadState", "ActiveState", "ControlGroup", "FragmentPath")
    _rc, out, _err = runner.run(show_argv(unit, props))
    shown = parse_show(out)
    return dict((p, (shown.get(p) or [""])[-1]) for p in props)


class UnitState(Setting):
    """A unit's managed files (drop-in, created slice) and the kernel values systemd derives from them.

    One setting, because they change together: the files are written (a unit to start is loaded
    first), ``systemctl set-property --runtime`` applies the directives to the running cgroup (systemd
    257 no longer re-applies a changed drop-in at daemon-reload; 252 does), the runtime control
    files set-property leaves in ``/run/systemd/system.control`` are removed so that the unit's
    configuration is exactly its files again, and a daemon-reload for all of the call's units loads that. Verified by
    reading the kernel files of the unit's cgroup; for a unit that is not running (no cgroup),
    by ``systemctl show``.

    ``files``: ``{path: content or None}``; ``plan``: the SystemdPlan (None for state=absent).
    """

    order = 50

    def __init__(self, unit, files, plan, runner, cgroup_dir, previous_dropin=None, start=False, adopt=False,
                 live=None):
        self.unit = unit
        self.live = list(live or [])   # runtime-only assignments (stale device weights)
        self.plan = plan
        self.runner = runner
        self.cgroup_dir = cgroup_dir
        self.start = start
        self.adopt = adopt
        self.directives = list(plan.directives) if plan is not None else []
        self.watch = sorted(set(list(plan.expected if plan is not None else ())
                                + [DIRECTIVE_FILES[n] for n, _v in parse_dropin(previous_dropin)
                                   if n in DIRECTIVE_FILES]))
        # the unit's files are ManagedFiles: their reading, adopt check and atomic writes are the persistence layer's
        self.files = [ManagedFile(path, content, adopt=adopt) for path, content in sorted(files.items())]
        desired = {"files": dict(files), "kernel": dict(plan.expected) if plan is not None else {}, "drift": []}
        super(UnitState, self).__init__(unit, desired)
        reloads(runner).owed = False    # built before the call's first write: nothing of this call is owed yet

    # -- reading ------------------------------------------------------------------------------
    def read(self, fs):
        files = dict((f.path, f.read(fs)) for f in self.files)
        runtime = self._runtime_files(fs, parse_dropin(files.get(dropin_path(self.unit))))
        kernel, drift = {}, []
        cgroup = self._live_cgroup(fs)
        if cgroup:
            for name in self.watch:
                text = fs.read(cgroup + "/" + name)
                kernel[name] = None if text is None else CGROUP_FILES[name].parse(text)
            if self.plan is not None:
                drift = self.plan.kernel_diff(fs, cgroup)
        elif self.plan is not None and self.plan.show:
            kernel = None   # not running: compare systemd's view of the unit instead
            _rc, out, _err = self.runner.run(show_argv(self.unit, self.plan.properties()))
            drift = self.plan.show_diff(show_values(out))
        out = {"files": files, "kernel": kernel, "drift": drift}
        if runtime:
            out["runtime"] = runtime
        return out

    def _live_cgroup(self, fs):
        """The cgroup systemd applies this unit's settings to, or None: not running, or a service or scope running
        outside the slice its loaded files give it (a ``Slice=`` waiting for the unit's next start). systemd counts such
        a unit in no slice's members: its running slice's controllers may go and set-property reaches no kernel file
        (lab, systemd 252 and 257: docs/cgroup.md), so its settings are compared in systemd's view until it starts
        again. Asked at each read: a restart during the run (placement) moves a service's cgroup."""
        if self.unit.endswith(".slice"):
            return self.cgroup_dir if self.cgroup_dir and fs.isdir(self.cgroup_dir) else None
        _rc, out, _err = self.runner.run(show_argv(self.unit, ["Slice", "ControlGroup"]))
        shown = dict((k, v[-1]) for k, v in parse_show(out).items())
        running, configured = shown.get("ControlGroup") or "", shown.get("Slice") or ""
        # by the running unit's own name: the request may name an alias
        if not running or (configured and running != expected_cgroup(running.rsplit("/", 1)[-1], configured)):
            return None
        path = CGROUP_ROOT + running
        return path if fs.isdir(path) else None

    def differs(self, current):
        return current["files"] != self.desired["files"] or bool(current["drift"]) or bool(current.get("runtime"))

    def validate(self, current):
        problems = []
        for f in self.files:
            problems.extend(f.validate(current["files"].get(f.path)))
        return problems

    def report(self, value):
        out = {"files": value["files"], "kernel": value["kernel"]}
        for key in ("drift", "runtime"):
            if value.get(key):
                out[key] = value[key]
        return out

    def _runtime_files(self, fs, previous):
        """The runtime drop-ins (``systemctl set-property --runtime``'s ``50-<Directive>.conf``) of the directives this
        unit's drop-in sets or set. _apply removes the ones it writes once their values are in force; one still there
        (a run killed in between) shadows the persistent drop-in until the next boot, so it counts as a difference."""
        control = "%s/%s.d" % (RUNTIME_CONTROL_DIR, self.unit)
        names = set(n for n, _v in list(self.directives) + list(previous))
        return sorted("%s/50-%s.conf" % (control, n) for n in names if fs.exists("%s/50-%s.conf" % (control, n)))

    # -- writing ------------------------------------------------------------------------------
    def settle(self, fs):
        reloads(self.runner).flush()

    def write(self, fs, value, current):
        previous = parse_dropin((current or {}).get("files", {}).get(dropin_path(self.unit)))
        self._apply(fs, value["files"], self.directives, previous, extra=self.live,
                    files_changed=current is None or current.get("files") != value["files"])

    def restore(self, fs, previous):
        old = parse_dropin(previous["files"].get(dropin_path(self.unit)))
        self._apply(fs, previous["files"], old, self.directives, start=False)
        reloads(self.runner).flush()    # a failed call ends after its restores: nothing may stay owed

    def _apply(self, fs, files, directives, previous, start=None, extra=(), files_changed=True):
        batch = reloads(self.runner)
        # writes before removals
        by_path = dict((f.path, f) for f in self.files)
        for path, content in sorted(files.items(), key=lambda kv: kv[1] is None):
            by_path[path].write(fs, content, None)
        if self.start if start is None else start:
            if files_changed or batch.owed:
                batch.now()     # systemd loads the files (and what earlier units owe) before the start
            self.runner.run(start_argv(self.unit))
        elif files_changed:
            # set-property merges into the loaded configuration and applies to the running cgroup whether or not systemd
            # has loaded the new files yet: the reload that loads them is owed, one for all of the call's units
            batch.later()
        assignments = list(directives) + reset_directives(previous, directives) + list(extra)
        control = "%s/%s.d" % (RUNTIME_CONTROL_DIR, self.unit)
        if assignments and self._live_cgroup(fs):
            self.runner.run(set_property_argv(self.unit, assignments, runtime=True))
            for name in sorted(set(n for n, _v in assignments)):
                fs.remove("%s/50-%s.conf" % (control, name))
            _remove_if_empty(fs, control)
            batch.later()
        stale = self._runtime_files(fs, previous)     # left by a run killed before its removal above
        if stale:
            for path in stale:
                fs.remove(path)
            _remove_if_empty(fs, control)
            batch.later()
        for path, content in files.items():
            if content is None:
                _remove_if_empty(fs, path.rsplit("/", 1)[0])


def _remove_if_empty(fs, directory):
    if directory.endswith(".d") and fs.isdir(directory) and not fs.listdir(directory):
        fs.rmdir(directory)
