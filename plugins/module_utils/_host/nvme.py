# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVMe controllers as one layer, serving io_facts, nvme_queues and nvme_arbitration.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

* Controllers: the one scan of ``/sys/class/nvme`` (:func:`scan_controllers`), the namespaces
  each controller carries and, under native multipath, which head a path disk belongs to
  (``_devices.multipath_head``, ``_devices.path_controller``); :class:`ControllerResolver` turns an
  operator's selector (``nvme0``, ``/dev/nvme0``, a controller serial, any namespace selector of
  :class:`_devices.DeviceResolver`) into one controller.
* The blk-mq hardware-queue map: each hctx's ``cpu_list`` and tags from sysfs and its type
  default/read/poll from debugfs (:func:`hctxs`), and the controller's default/read/poll split
  with its one chain of fallbacks (:func:`queue_split`): debugfs, else the driver's
  ``X/Y/Z default/read/poll queues`` kernel-log line when the caller can read the log and
  ``queue/io_poll`` agrees with it, else unknown with the reason (docs/kernel-files.md, "Facts
  io_facts reports"; docs/nvme_queues.md, "debugfs").
* :class:`NvmeCli`: argv-only calls of ``nvme get-feature``/``set-feature``/``show-regs``/
  ``id-ctrl`` with their outputs parsed and NVMe status codes decoded (formats observed with
  nvme-cli 2.3 on Debian 12 and 2.13 on Debian 13; see docs/nvme_arbitration.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import nvme_arbitration_apply as boot
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import parse_mounts
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import (
    NVME_CTRL_NAME as CTRL_NAME, DeviceError, DeviceResolver, SelectorError, natural, path_controller, resolve_each,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError

SYS_CLASS_NVME = "/sys/class/nvme"
# Namespace disks below a controller's directory: nvme<C>n<N>, or path disks nvme<S>c<C>n<N>.
NS_NAME = re.compile(r"^nvme(\d+)(?:c(\d+))?n(\d+)$")
CONTROLLER_ATTRS = ("serial", "model", "firmware_rev", "transport", "state", "address", "subsysnqn", "cntlid",
                    "queue_count")


def _warn(warnings, message):
    # Callers read the same files more than once per run (before and after a change): say it once.
    if warnings is not None and message not in warnings:
        warnings.append(message)


# == controllers in sysfs =======================================================================

class NvmeController:
    """One NVMe controller as sysfs shows it (``/sys/class/nvme/nvmeN``).

    ``namespaces`` are the disks below the controller's directory: ``nvme<C>n<N>``, or the path
    disks ``nvme<S>c<C>n<N>`` under native multipath. ``queue_count`` includes the admin queue.
    """

    FIELDS = ("name", "dev_path", "serial", "model", "firmware", "transport", "state", "address", "subsysnqn",
              "cntlid", "queue_count", "namespaces", "selector", "matched_by")

    def __init__(self, **kwargs):
        for field in self.FIELDS:
            setattr(self, field, kwargs.pop(field, None))
        if kwargs:
            raise TypeError("unknown NvmeController fields: %s" % ", ".join(sorted(kwargs)))
        self.namespaces = list(self.namespaces or [])

    def as_dict(self):
        return dict((f, list(getattr(self, f)) if f == "namespaces" else getattr(self, f)) for f in self.FIELDS)

    def summary(self):
        return "%s (serial %s, %s, %s)" % (self.name, self.serial or "-", self.model or "unknown model",
                                           self.address or self.transport or "-")


def scan_controllers(fs, warnings=None):
    """{name: NvmeController} for every controller in /sys/class/nvme, in natural order.

    An unreadable attribute reads as None; its error goes to ``warnings`` when a list is given.
    """
    out = {}
    for name in sorted((n for n in fs.listdir(SYS_CLASS_NVME) if CTRL_NAME.match(n)), key=natural):
        base = "%s/%s" % (SYS_CLASS_NVME, name)
        attrs = {}
        for key in CONTROLLER_ATTRS:
            try:
                value = fs.read("%s/%s" % (base, key))
            except KernelFileError as e:
                _warn(warnings, e.message)
                value = None
            # the serial as udev compares it (trailing padding dropped, a leading space kept: persist.udev_value)
            value = (value or "").rstrip() if key == "serial" else (value or "").strip()
            attrs[key] = value if value.strip() else None
        out[name] = NvmeController(
            name=name, dev_path="/dev/" + name, serial=attrs["serial"], model=attrs["model"],
            firmware=attrs["firmware_rev"], transport=attrs["transport"], state=attrs["state"],
            address=attrs["address"], subsysnqn=attrs["subsysnqn"], cntlid=attrs["cntlid"],
            queue_count=int(attrs["queue_count"]) if (attrs["queue_count"] or "").isdigit() else None,
            namespaces=sorted(e for e in fs.listdir(base) if NS_NAME.match(e)))
    return out


class ControllerError(SelectorError):
    """A selector that does not name exactly one NVMe controller (``reason`` as in DeviceError)."""


# Selectors are looked up in sysfs and never reach a shell, but a selector that could only be
# meant for one (';', '$(', '|', quotes...) is refused outright: no controller is named like that.
_SELECTOR_RE = re.compile(r"^[A-Za-z0-9/][A-Za-z0-9._:/+@ -]*\Z")
_CTRL_SELECTOR_RE = re.compile(r"^(?:/dev/)?(nvme\d+)$")


def check_selector(selector):
    """None if ``selector`` may name a controller, else the reason it cannot."""
    if selector is None or not str(selector).strip():
        return "an empty controller selector"
    text = str(selector)
    if not _SELECTOR_RE.match(text) or "//" in text or "/../" in text:
        bad = sorted(set(c for c in text if not re.match(r"[A-Za-z0-9._:/+@ -]", c)))
        shown = " ".join(repr(c) for c in bad) if bad else "its form"
        return ("controller selector %r has characters no NVMe controller name, /dev path, WWN or serial uses "
                "(%s); give nvme0, /dev/nvme0, a namespace (nvme0n1, /dev/disk/by-id/...) or the controller serial"
                % (text, shown))
    return None


class ControllerResolver:
    """Resolves controller selectors against one host's sysfs (scanned once per instance).

    ``feature`` names what the caller sets per controller, for the messages that ask to list
    controllers by name (a shared serial, a multipath namespace).
    """

    def __init__(self, fs, devices=None, feature="the feature"):
        self.fs = fs
        self._devices = devices
        self._controllers = None
        self.feature = feature

    @property
    def devices(self):
        if self._devices is None:
            self._devices = DeviceResolver(self.fs)
        return self._devices

    def controllers(self):
        """{name: NvmeController} for every controller in /sys/class/nvme."""
        if self._controllers is None:
            self._controllers = scan_controllers(self.fs)
        return self._controllers

    def _existing(self):
        ctrls = self.controllers()
        return "; ".join(ctrls[n].summary() for n in ctrls) or "none"

    def _found(self, ctrl, selector, how):
        found = NvmeController(**ctrl.as_dict())
        found.selector, found.matched_by = selector, how
        return found

    def resolve(self, selector):
        """One selector -> :class:`NvmeController`; raises :class:`ControllerError`."""
        problem = check_selector(selector)
        if problem:
            raise ControllerError(problem[0].upper() + problem[1:], selector=selector, reason="invalid")
        selector = str(selector).strip()
        ctrls = self.controllers()
        m = _CTRL_SELECTOR_RE.match(selector)
        if m:
            if m.group(1) in ctrls:
                return self._found(ctrls[m.group(1)], selector, "controller name")
            raise ControllerError("No NVMe controller %s (no %s/%s). NVMe controllers on this host: %s."
                                  % (selector, SYS_CLASS_NVME, m.group(1), self._existing()),
                                  selector=selector, candidates=self._candidates())
        by_serial = [c for c in ctrls.values() if c.serial and c.serial.strip() == selector]
        if not by_serial:
            by_serial = [c for c in ctrls.values() if c.serial and c.serial.strip().lower() == selector.lower()]
        if len(by_serial) == 1:
            return self._found(by_serial[0], selector, "controller serial")
        if len(by_serial) > 1:
            names = [c.name for c in by_serial]
            raise ControllerError(
                "Serial %r is shared by the controllers %s (controllers of one NVM subsystem report the subsystem's "
                "serial); %s is set per controller: list the controllers by name (%s) instead."
                % (selector, ", ".join(names), self.feature, ", ".join(names)), selector=selector, reason="ambiguous",
                candidates=[self._brief(ctrls[n]) for n in names])
        return self._from_namespace(selector)

    def _from_namespace(self, selector):
        try:
            disk = self.devices.resolve(selector)
        except DeviceError as e:
            if e.reason == "not_found":
                raise ControllerError(
                    "No NVMe controller matches %r (tried controller name nvmeN, /dev/nvmeN, controller serial and "
                    "the namespace selectors: kernel name, /dev path, by-id/by-path link, WWN, serial, MAJ:MIN). "
                    "NVMe controllers on this host: %s." % (selector, self._existing()),
                    selector=selector, candidates=self._candidates())
            raise ControllerError("%s: %s" % (selector, e.message), selector=selector, reason=e.reason,
                                  candidates=self._candidates())
        ctrls = self.controllers()
        if disk.kind == "nvme" and disk.controller in ctrls:
            return self._found(ctrls[disk.controller], selector, "namespace %s" % disk.name)
        if disk.kind == "nvme-multipath-head":
            names = sorted(set(path_controller(p) for p in disk.nvme_paths if path_controller(p)), key=natural)
            names = [n for n in names if n in ctrls]
            if len(names) == 1:
                return self._found(ctrls[names[0]], selector, "namespace %s" % disk.name)
            raise ControllerError(
                "%r resolves to the NVMe multipath namespace %s, reached through the controllers %s; %s is "
                "set per controller: list them by name (%s)." % (selector, disk.name, ", ".join(names) or "none",
                                                                 self.feature, ", ".join(names) or "nvmeN"),
                selector=selector, reason="ambiguous", candidates=[self._brief(ctrls[n]) for n in names])
        raise ControllerError("%r resolves to %s, which is not an NVMe namespace (kind %s); NVMe controllers on this "
                              "host: %s." % (selector, disk.name, disk.kind, self._existing()),
                              selector=selector, reason="not_nvme", candidates=self._candidates())

    @staticmethod
    def _brief(ctrl):
        return {"name": ctrl.name, "serial": ctrl.serial, "model": ctrl.model, "address": ctrl.address}

    def _candidates(self):
        return [self._brief(c) for c in self.controllers().values()]

    def resolve_many(self, selectors):
        """All selectors -> controllers; every failure (and duplicates) reported in one ControllerError."""
        def duplicate(first, selector, ctrl):
            return ControllerError("%r and %r both name controller %s; list each controller once"
                                   % (first, selector, ctrl.summary()), selector=selector, reason="duplicate")

        return resolve_each(selectors, self.resolve, ControllerError, "controller", duplicate)


# == the driver's queue parameters ==============================================================

DRIVER_PARAMETERS_DIR = "/sys/module/nvme/parameters"
# Sampled when a controller sets up its I/O queues (probe, reset): drivers/nvme/host/pci.c.
QUEUE_PARAMETERS = ("poll_queues", "write_queues", "io_queue_depth")


# == the blk-mq hardware-queue map ==============================================================

NR_TAGS = codecs.IntValue("nr_tags")
NR_RESERVED_TAGS = codecs.IntValue("nr_reserved_tags")
KLOG_LINE = re.compile(r"nvme (nvme\d+): (\d+)/(\d+)/(\d+) default/read/poll queues")


def debugfs_mount(fs):
    """Where debugfs is mounted, or None (nothing in the collection mounts it)."""
    return next((mp for _d, mp, fstype, _o in parse_mounts(fs.read("/proc/mounts")) if fstype == "debugfs"), None)


def _read(fs, path, codec, warnings):
    """One small file, parsed; None when absent, unreadable or unparsable (the last two warn)."""
    try:
        text = fs.read(path)
    except KernelFileError as e:
        _warn(warnings, e.message)
        return None
    if text is None:
        return None
    if codec is None:
        return text.strip() or None
    try:
        return codec.parse(text)
    except codecs.CodecError as e:
        _warn(warnings, "%s: could not parse %r: %s" % (path, text[:200], e))
        return None


def hctxs(fs, disk, debugfs, warnings=None):
    """The blk-mq hardware contexts of one disk, in index order.

    ``cpu_list``, ``nr_tags`` and ``nr_reserved_tags`` come from sysfs (``/sys/block/<disk>/mq/<N>/``);
    ``type`` (default/read/poll) only from debugfs (``<debugfs>/block/<disk>/hctxN/type``), so it is
    None when debugfs is not mounted (``debugfs`` None) or cannot be read.
    """
    out = []
    mq = "/sys/block/%s/mq" % disk
    for entry in sorted((e for e in fs.listdir(mq) if e.isdigit()), key=int):
        d = "%s/%s/" % (mq, entry)
        out.append({
            "index": int(entry),
            "cpu_list": _read(fs, d + "cpu_list", codecs.CPU_LIST, warnings),
            "nr_tags": _read(fs, d + "nr_tags", NR_TAGS, warnings),
            "nr_reserved_tags": _read(fs, d + "nr_reserved_tags", NR_RESERVED_TAGS, warnings),
            "type": _read(fs, "%s/block/%s/hctx%s/type" % (debugfs, disk, entry), None, warnings) if debugfs else None,
        })
    return out


def parse_klog(text):
    """{controller: {default, read, poll}} from the driver's last 'X/Y/Z default/read/poll queues' line."""
    out = {}
    for line in (text or "").splitlines():
        m = KLOG_LINE.search(line)
        if m:
            out[m.group(1)] = {"default": int(m.group(2)), "read": int(m.group(3)), "poll": int(m.group(4))}
    return out


def read_klog(runner):
    """The driver's queue-count lines from ``dmesg``, else ``journalctl --dmesg`` ({} if neither answers)."""
    for argv in (["dmesg"], ["journalctl", "--dmesg", "--boot", "--output=cat", "--no-pager"]):
        tool = runner.which(argv[0])
        if not tool:
            continue
        try:
            _rc, out, _err = runner.run([tool] + argv[1:])
        except CommandError:
            continue
        return parse_klog(out)
    return {}


def queue_split(ctrl, namespaces, debugfs, klog=None):
    """The default/read/poll counts of a controller's tag set, and where they were read.

    ``namespaces`` is ``{disk: {"hctxs": [...], "io_poll": 0/1/None}}`` for the controller's blk-mq
    disks (all share one tag set: the first with hctxs is counted; ``io_poll`` is only read with
    ``klog``). The fallbacks, in order:

    1. every hctx type read from debugfs: ``source: debugfs``;
    2. ``klog`` (a callable returning :func:`parse_klog`'s dict; None when the caller runs no
       commands, as io_facts) has a line for ``ctrl``: ``source: kernel log``, trusted only when
       ``queue/io_poll`` agrees with it (a reset that added poll queues logs them although blk-mq
       never maps them, observed on 6.1/6.12), and the hctxs are typed by their order (blk-mq
       numbers them default, read, poll) with ``type_source: kernel log``;
    3. unknown: counts None, ``source`` None and ``note`` saying why.
    """
    hctx_list = next((ns["hctxs"] for _n, ns in sorted(namespaces.items()) if ns["hctxs"]), [])
    types = [h["type"] for h in hctx_list]
    nr_tags = hctx_list[0]["nr_tags"] if hctx_list else None
    if hctx_list and all(types):
        return {"default": types.count("default"), "read": types.count("read"), "poll": types.count("poll"),
                "hctxs": len(hctx_list), "nr_tags": nr_tags, "source": "debugfs"}
    if not hctx_list:
        why = "no blk-mq namespace"
    else:
        why = "debugfs is not mounted" if not debugfs else "debugfs has no hctx types"
    counts = klog().get(ctrl) if klog is not None else None
    if counts is None:
        note = why if klog is None else "%s and the kernel log has no queue line for %s" % (why, ctrl)
        return {"default": None, "read": None, "poll": None, "hctxs": len(hctx_list) or None, "nr_tags": nr_tags,
                "source": None, "note": note}
    split = dict(counts, hctxs=len(hctx_list) or None, nr_tags=nr_tags, source="kernel log")
    io_poll = set(ns["io_poll"] for ns in namespaces.values())
    if io_poll and io_poll != {1 if counts["poll"] else 0}:
        # queue/io_poll reads 1 only when the tag set has a poll map with queues.
        return dict(split, default=None, read=None, poll=None, source=None,
                    note="the kernel log says %d/%d/%d default/read/poll but queue/io_poll reads %s: the "
                         "blk-mq map does not have those queues (changed by a reset after probe?)"
                         % (counts["default"], counts["read"], counts["poll"], sorted(io_poll)))
    total = counts["default"] + counts["read"] + counts["poll"]
    if hctx_list and len(hctx_list) == total:
        # blk-mq numbers hctxs by map: default first, then read, then poll (queue_offset).
        kinds = ["default"] * counts["default"] + ["read"] * counts["read"] + ["poll"] * counts["poll"]
        for ns in namespaces.values():
            for h, kind in zip(ns["hctxs"], kinds):
                h["type"] = kind
                h["type_source"] = "kernel log"
    elif hctx_list:
        split["note"] = ("the kernel log says %d/%d/%d but the namespaces have %d hctxs: the map does not "
                         "match the driver's counts (a reset after probe?)"
                         % (counts["default"], counts["read"], counts["poll"], len(hctx_list)))
    return split


QUEUE_TYPES = ("default", "read", "poll")


def queue_cpus(namespaces):
    """{default, read, poll}: the CPUs each type of hardware queue serves (the union of its hctxs' ``cpu_list``, as
    the kernel lists them: possible CPUs, offline ones too), from the first namespace with hctxs (one tag set per
    controller); None when a hctx's type is unknown (no debugfs), since a CPU list without its type says nothing of
    which CPUs poll. A type without queues has []."""
    hctx_list = _typed_hctxs(namespaces)
    if hctx_list is None:
        return None
    out = dict((kind, set()) for kind in QUEUE_TYPES)
    for h in hctx_list:
        out[h["type"]].update(h["cpu_list"] or [])
    return dict((kind, sorted(cpus)) for kind, cpus in out.items())


def poll_queue_cpus(namespaces):
    """The CPUs of each poll hardware queue, in hctx order (None: types unknown). blk-mq maps every possible CPU to a
    queue of each type it has, so the poll queues' union is every CPU; one poll queue serves them all, and only with
    two or more does a CPU set have a poll queue of its own."""
    hctx_list = _typed_hctxs(namespaces)
    if hctx_list is None:
        return None
    return [sorted(h["cpu_list"] or []) for h in hctx_list if h["type"] == "poll"]


def _typed_hctxs(namespaces):
    """The hctxs of the first namespace that has them (one tag set per controller), when each one's type is known."""
    hctx_list = next((ns["hctxs"] for _n, ns in sorted(namespaces.items()) if ns["hctxs"]), [])
    if not hctx_list or not all(h.get("type") in QUEUE_TYPES for h in hctx_list):
        return None
    return hctx_list


# == nvme-cli ===================================================================================

FID_ARBITRATION = boot.FID_ARBITRATION
FEATURE_NAMES = {FID_ARBITRATION: "Arbitration"}
SELECT_CURRENT, SELECT_DEFAULT, SELECT_SAVED, SELECT_SUPPORTED = 0, 1, 2, 3
SELECT_NAMES = {0: "Current", 1: "Default", 2: "Saved", 3: "Supported capabilities"}

# NVMe status field (completion DW3 bits 31:17 as nvme-cli prints it): SC 7:0, SCT 10:8,
# CRD 12:11, More 13, DNR 14. The codes Set/Get Features meet, by (SCT, SC), NVMe Base spec names.
STATUS_NAMES = {
    (0, 0x01): "Invalid Command Opcode",
    (0, 0x02): "Invalid Field in Command",
    (1, 0x0d): "Feature Identifier Not Saveable",
    (1, 0x0e): "Feature Not Changeable",
    (1, 0x0f): "Feature Not Namespace Specific",
}
NOT_SAVEABLE = (1, 0x0d)
# The controller refused the feature or the value (not an I/O or driver error).
REFUSALS = (NOT_SAVEABLE, (1, 0x0e), (0, 0x02))

_GET_FEATURE_RE = re.compile(r"^get-feature:0x([0-9a-fA-F]+) \(([^)]*)\), ([A-Za-z ]+?) value:(?:0x)?([0-9a-fA-F]{1,8})\s*$")
_SET_FEATURE_RE = re.compile(r"^set-feature:0x[0-9a-fA-F]+ \([^)]*\), value:(?:0x)?([0-9a-fA-F]{1,8})\b", re.M)
_STATUS_RE = re.compile(r"NVMe status: (.*?)\(0x([0-9a-fA-F]+)\)\s*$")
_REG_RE = re.compile(r"^([a-z]+)\s*:\s*(?:0x)?([0-9a-fA-F]+)\s*$")


def hex32(value):
    return None if value is None else "0x%08x" % value


class NvmeStatus:
    """An NVMe completion status as nvme-cli prints it (``NVMe status: <text>(0x410e)``).

    ``hints`` maps (SCT, SC) to what the caller's user can do about it (``hint``).
    """

    def __init__(self, value, text="", hints=None):
        self.value = value
        self.text = text.strip().rstrip(":").strip()
        self.sc = value & 0xff
        self.sct = (value >> 8) & 0x7
        self.dnr = bool(value & 0x4000)
        known = STATUS_NAMES.get((self.sct, self.sc))
        self.name = known or (self.text.split(":")[0] if self.text else "status 0x%x" % value)
        self.hint = (hints or {}).get((self.sct, self.sc))

    @property
    def refusal(self):
        """True when the controller refused the feature or value (not an I/O or driver error)."""
        return (self.sct, self.sc) in REFUSALS

    @property
    def not_saveable(self):
        return (self.sct, self.sc) == NOT_SAVEABLE

    def describe(self):
        return "NVMe status 0x%04x %s (status code type %d, status code 0x%02x%s)" % (
            self.value, self.name, self.sct, self.sc, ", do not retry" if self.dnr else "")

    def as_dict(self):
        return {"value": "0x%04x" % self.value, "name": self.name, "sct": self.sct, "sc": "0x%02x" % self.sc,
                "dnr": self.dnr, "nvme_cli": self.text}


def parse_status(text, hints=None):
    """The NvmeStatus in nvme-cli's output, or None."""
    for line in (text or "").splitlines():
        m = _STATUS_RE.search(line.strip())
        if m:
            return NvmeStatus(int(m.group(2), 16), m.group(1), hints)
    return None


class NvmeCommandError(CommandError):
    """nvme-cli failed; ``status`` is the decoded NVMe status when the controller answered."""

    def __init__(self, argv, rc, stdout, stderr, what, ctrl, status=None, fix=None):
        self.status = status
        self.ctrl = ctrl
        first = _first_line(stderr) or _first_line(stdout) or "no output"
        if status is not None:
            reason = "%s: %s" % (what, status.describe())
            if status.hint or fix:
                reason += "; %s" % (fix or status.hint)
        else:
            reason = "%s: %s" % (what, first)
            if fix:
                reason += "; %s" % fix
        super(NvmeCommandError, self).__init__(argv, rc, stdout, stderr, reason=reason)
        # The engine shows e.message; lead with the device and what was refused, then the command.
        self.message = self.msg = "%s (command: %s, rc=%s)" % (reason, " ".join(self.argv), rc)

    def as_dict(self):
        out = super(NvmeCommandError, self).as_dict()
        if self.status is not None:
            out["nvme_status"] = self.status.as_dict()
        return out


def _first_line(text):
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def parse_get_feature(text, fid=FID_ARBITRATION):
    """``get-feature:0x01 (Arbitration), Current value:0x00000007`` -> (select name, value).

    nvme-cli 2.3 and 2.13 print this same line (capabilities without ``0x``: ``value:00000000``).
    Raises ValueError for anything else.
    """
    for line in (text or "").splitlines():
        m = _GET_FEATURE_RE.match(line.strip())
        if m:
            if int(m.group(1), 16) != fid:
                raise ValueError("nvme-cli answered for feature 0x%s, not 0x%02x" % (m.group(1), fid))
            return m.group(3), int(m.group(4), 16)
    raise ValueError("unexpected nvme get-feature output %r" % (text or "")[:200])


def parse_set_feature(text):
    """The Dword 11 nvme-cli reports it sent (``set-feature:0x01 (Arbitration), value:0x03020103, ...``), or None."""
    m = _SET_FEATURE_RE.search(text or "")
    return int(m.group(1), 16) if m else None


def parse_show_regs(text):
    """``nvme show-regs`` plain output -> {register: int}. 2.3 prints bare hex, 2.13 with 0x."""
    regs = {}
    for line in (text or "").splitlines():
        m = _REG_RE.match(line.strip())
        if m:
            regs[m.group(1)] = int(m.group(2), 16)
    return regs


class NvmeCli:
    """nvme-cli through the collection's Runner (argv lists, C locale).

    ``hints`` (see :class:`NvmeStatus`) are added to the errors of refused commands.
    """

    def __init__(self, runner, nvme=None, hints=None):
        self.runner = runner
        self.nvme = nvme
        self.hints = hints

    def locate(self):
        """Path of nvme, or None."""
        if self.nvme is None:
            self.nvme = self.runner.which("nvme")
        return self.nvme

    def _run(self, argv):
        rc, out, err = self.runner.run(argv, check=False)
        return rc, out or "", err or ""

    def _status(self, out, err):
        return parse_status(err + "\n" + out, self.hints)

    def get_feature(self, ctrl, fid, select):
        argv = [self.nvme, "get-feature", ctrl.dev_path, "--feature-id=%d" % fid, "--sel=%d" % select]
        rc, out, err = self._run(argv)
        what = "%s: Get Features %s (FID 0x%02x, select %d: %s) failed" % (
            ctrl.summary(), FEATURE_NAMES[fid], fid, select, SELECT_NAMES[select])
        if rc != 0:
            raise NvmeCommandError(argv, rc, out, err, what, ctrl, self._status(out, err))
        try:
            name, value = parse_get_feature(out, fid)
        except ValueError as e:
            raise NvmeCommandError(argv, rc, out, err, what, ctrl,
                                   fix="%s; this nvme-cli prints a format the module does not know" % e)
        if name != SELECT_NAMES[select]:
            raise NvmeCommandError(argv, rc, out, err, what, ctrl,
                                   fix="nvme-cli reported the %s value, not the %s value" % (name, SELECT_NAMES[select]))
        return value

    def set_feature(self, ctrl, fid, dw11, save):
        # the boot helper runs the same command: built in one place (long options only, see there)
        argv = boot.set_feature_argv(self.nvme, ctrl.dev_path, fid, dw11, save)
        rc, out, err = self._run(argv)
        if rc != 0:
            what = "%s refused Set Features %s (FID 0x%02x) value %s%s" % (
                ctrl.summary(), FEATURE_NAMES[fid], fid, hex32(dw11), " with save" if save else "")
            raise NvmeCommandError(argv, rc, out, err, what, ctrl, self._status(out, err))
        sent = parse_set_feature(out)
        if sent is not None and sent != dw11:
            raise NvmeCommandError(argv, rc, out, err, "%s: Set Features %s (FID 0x%02x)" % (
                ctrl.summary(), FEATURE_NAMES[fid], fid), ctrl,
                fix="nvme-cli sent Dword 11 %s, not %s: it did not take the value option as given" % (
                    hex32(sent), hex32(dw11)))

    def oncs(self, ctrl):
        """Identify Controller ONCS (int), from ``nvme id-ctrl -o json`` (2.3 and 2.13 both have it)."""
        argv = [self.nvme, "id-ctrl", ctrl.dev_path, "--output-format=json"]
        rc, out, err = self._run(argv)
        what = "%s: Identify Controller failed" % ctrl.summary()
        if rc != 0:
            raise NvmeCommandError(argv, rc, out, err, what, ctrl, self._status(out, err))
        try:
            return int(json.loads(out)["oncs"])
        except (ValueError, KeyError, TypeError):
            raise NvmeCommandError(argv, rc, out, err, what, ctrl, fix="no ONCS field in %r" % out[:200])

    def show_regs(self, ctrl):
        """(regs, None) or (None, reason). Plain output: 2.3's JSON mode exits 1 even on success."""
        argv = [self.nvme, "show-regs", ctrl.dev_path]
        rc, out, err = self._run(argv)
        regs = parse_show_regs(out) if rc == 0 else {}
        if rc == 0 and "cap" in regs and "cc" in regs and regs.get("version", regs.get("vs", 0)) >= 0x10000:
            return regs, None
        status = self._status(out, err)
        said = status.describe() if status else (_first_line(err) or "rc=%s, no usable register values" % rc)
        return None, "%s %s: %s" % (" ".join(argv), "failed" if rc else "printed no usable registers", said)
