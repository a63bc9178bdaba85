# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Block-device resolver: turn what an operator wrote into one whole disk and its MAJ:MIN.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Accepted selectors (strings):

* kernel name (``nvme0n1``, ``vda``, ``sda``, ``dm-0``);
* a ``/dev`` path (``/dev/nvme0n1``, ``/dev/mapper/vg-lv``) or a ``/dev/disk/by-id/...`` /
  ``/dev/disk/by-path/...`` link, or the bare name of such a link;
* ``MAJ:MIN`` (looked up through ``/sys/dev/block/MAJ:MIN``);
* a WWN in any usual spelling (``eui.0011223344556677``, ``0x5000c500a1b2c3d4``,
  ``wwn-0x5000...``, ``naa.5000...``, ``nvme.1b36-...``, ``uuid.<uuid>``), compared without
  prefixes, separators or case against the device's ``wwid``/``eui``/``nguid``/``uuid`` and its
  ``wwn-`` links;
* a serial number (NVMe controller serial, virtio ``serial``, SCSI VPD page 0x80).

Only sysfs and ``/dev`` are read, always through :class:`KernelFS` (whose ``root`` lets a fake
tree stand in for a host); nothing is executed.

Every record carries ``stable_id``: the identity to key persisted configuration by (a WWN that
is unique on the host, else the serial (+ namespace id for NVMe), else a device-mapper / md
UUID, else a ``/dev/disk/by-path`` name). It is never a kernel name or MAJ:MIN, which the kernel
may renumber at the next boot; when nothing stable exists it is ``None`` and ``stable_id_note``
says why. ``stable_selector`` is the selector for that same identity that this resolver accepts
(what the roles pass to the modules), and :func:`stable_by_id_link` the ``/dev/disk/by-id`` link
a systemd drop-in names. This file is the only place that ranks identities.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import HostError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError

SYS_BLOCK = "/sys/block"
SYS_CLASS_BLOCK = "/sys/class/block"
SYS_DEV_BLOCK = "/sys/dev/block"
BY_ID = "/dev/disk/by-id"
BY_PATH = "/dev/disk/by-path"

KINDS = ("nvme", "nvme-multipath-head", "nvme-path", "virtio", "scsi", "dm", "md", "loop", "other")

_MAJMIN_RE = re.compile(r"^(\d+):(\d+)$")
# NVMe kernel names, here because a disk's kind depends on them; _nvme builds on these.
# A namespace disk nvme<C>n<N>, or under native multipath the head nvme<S>n<N> and its hidden
# path disks nvme<S>c<C>n<N> (subsystem S, controller C), which carry the head's blk-mq queues.
NVME_CTRL_NAME = re.compile(r"^nvme(\d+)$")
NVME_PATH_NAME = re.compile(r"^nvme(\d+)c(\d+)n(\d+)$")
_LOOP_RE = re.compile(r"^loop\d+$")
_MD_RE = re.compile(r"^md\d+$")
_WWN_SCHEMES = ("naa.", "eui.", "uuid.", "t10.", "nvme.")
_WWN_SEPARATORS = re.compile(r"[\s:\-_.]+")

FIELDS = (
    "name", "majmin", "major", "minor", "partition", "partition_number", "parent", "hidden",
    "kind", "dev_path", "has_mq", "rotational", "size_bytes",
    "model", "vendor", "serial", "firmware", "wwn", "wwid", "eui", "nguid", "uuid", "nsid",
    "controller", "nvme_subsystem", "nvme_paths", "dm_name", "dm_uuid", "md_uuid", "md_level",
    "backing_file", "slaves", "holders", "by_id", "by_path", "stable_id", "stable_id_source", "stable_id_note",
    "stable_selector",
)


def natural(name):
    """Sort key: nvme2 before nvme10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def multipath_head(disk):
    """The head ``nvme<S>n<N>`` I/O goes through for path disk ``nvme<S>c<C>n<N>``; None for other disks."""
    m = NVME_PATH_NAME.match(disk)
    return "nvme%sn%s" % (m.group(1), m.group(3)) if m else None


def path_controller(disk):
    """The controller ``nvme<C>`` of path disk ``nvme<S>c<C>n<N>``; None for other disks."""
    m = NVME_PATH_NAME.match(disk)
    return "nvme%s" % m.group(2) if m else None


def normalize_wwn(value):
    """A WWN/wwid in any common spelling -> lower-case hex/text without prefixes or separators.

    ``eui.0011223344556677``, ``00 11 22 33 44 55 66 77`` (sysfs ``eui``), ``wwn-0x0011...``
    and ``0x0011...`` all give ``0011223344556677``. Returns '' for nothing usable.
    """
    if value is None:
        return ""
    v = str(value).strip().lower()
    for prefix in ("/dev/disk/by-id/", "wwn-", "nvme-"):
        if v.startswith(prefix):
            v = v[len(prefix):]
    if v.startswith("0x"):
        v = v[2:]
    for scheme in _WWN_SCHEMES:
        if v.startswith(scheme):
            v = v[len(scheme):]
            break
    return _WWN_SEPARATORS.sub("", v)


_NVME_WWID_RE = re.compile(r"^nvme\.([0-9a-f]{4})-([0-9a-f]+)-([0-9a-f]+)-([0-9a-f]{8})$")


def describe_nvme_wwid(value):
    """' (the NVMe namespace 1 of serial 'S', model 'M')' for the wwid the nvme driver makes up for a namespace
    without EUI-64, NGUID or UUID (``nvme.<vid>-<serial hex>-<model hex>-<nsid>``, nvme_core's wwid_show), so a
    message names a disk the host no longer has the way its label does; '' for anything else."""
    m = _NVME_WWID_RE.match(str(value or "").strip().lower())
    if not m:
        return ""
    try:
        serial, model = (bytes.fromhex(h).decode("ascii").strip() for h in (m.group(2), m.group(3)))
    except (ValueError, UnicodeDecodeError):
        return ""
    if not (serial and model and all(" " <= c <= "~" for c in serial + model)):
        return ""
    return " (the NVMe namespace %d of serial %r, model %r)" % (int(m.group(4), 16), serial, model)


def _clean_token(value):
    """Collapse whitespace runs to '_' (as udev does for link names)."""
    return re.sub(r"\s+", "_", value.strip())


class SelectorError(HostError):
    """A selector that does not name exactly one thing: ``reason`` (not_found, ambiguous, duplicate,
    several, ...), ``candidates`` (what exists), ``errors`` (each failure, for ``several``)."""

    RESULT_KEY = "device_error"

    def __init__(self, message, selector=None, reason="not_found", candidates=None, errors=None):
        self.message = message
        self.selector = selector
        self.reason = reason
        self.candidates = candidates or []
        self.errors = errors or []
        super(SelectorError, self).__init__(message)

    def as_dict(self):
        out = {"msg": self.message, "selector": self.selector, "reason": self.reason,
               "candidates": list(self.candidates)}
        if self.errors:
            out["errors"] = [e.as_dict() for e in self.errors]
        return out


class DeviceError(SelectorError):
    """A selector that does not name exactly one usable whole disk.

    ``reason`` is one of: empty, not_found, ambiguous, partition, hidden, not_mq, duplicate,
    several. ``candidates`` lists what exists (dicts with name, majmin, serial, wwn, kind).
    """


class BlockDevice:
    """One block device as read from sysfs. Attributes are the names in ``FIELDS``."""

    def __init__(self, **kwargs):
        for field in FIELDS:
            setattr(self, field, kwargs.pop(field, None))
        if kwargs:
            raise TypeError("unknown BlockDevice fields: %s" % ", ".join(sorted(kwargs)))
        for field in ("nvme_paths", "slaves", "holders", "by_id", "by_path"):
            if getattr(self, field) is None:
                setattr(self, field, [])

    def as_dict(self):
        out = {}
        for field in FIELDS:
            value = getattr(self, field)
            out[field] = list(value) if isinstance(value, list) else value
        return out

    def summary(self):
        """``nvme0n1 (259:0, nvme, serial deadbeef, wwn eui.0011...)`` for messages."""
        return "%s (%s, %s, serial %s, wwn %s)" % (
            self.name, self.majmin or "no MAJ:MIN", self.kind, self.serial or "-", self.wwn or "-")

    def brief(self):
        return {"name": self.name, "majmin": self.majmin, "kind": self.kind,
                "serial": self.serial, "wwn": self.wwn}

    def wwn_keys(self):
        """Normalised identifiers a WWN selector may match."""
        keys = set()
        for value in (self.wwn, self.wwid, self.eui, self.nguid, self.uuid):
            key = normalize_wwn(value)
            if key:
                keys.add(key)
        for link in self.by_id:
            if link.startswith("wwn-") or re.match(r"^nvme-(eui|uuid|nvme)\.", link):
                key = normalize_wwn(link)
                if key:
                    keys.add(key)
        return keys

    def __repr__(self):
        return "BlockDevice(%s)" % self.summary()


class DeviceResolver:
    """Resolves selectors against one host's sysfs/dev, scanning it once per instance."""

    def __init__(self, fs):
        self.fs = fs
        self._links = None
        self._disks = None

    # -- low-level reads ----------------------------------------------------------------
    def _read(self, path, trim=str.strip):
        """Attribute text, ``trim``med (stripped by default), or None if absent/unreadable ('' stays '')."""
        try:
            value = self.fs.read(path)
        except KernelFileError:
            return None
        return trim(value) if value is not None else None

    def _read_nonempty(self, path):
        value = self._read(path)
        return value if value else None

    def _read_identity(self, path):
        """An identity a udev rule may match (``ATTR{serial}``, ``ATTRS{wwid}``) as udev compares it: trailing
        whitespace dropped, leading whitespace kept, so that a rule is never written for a value the device does
        not show (persist.udev_value refuses it instead). None if absent or empty."""
        value = self._read(path, trim=str.rstrip)
        return value if value and value.strip() else None

    def _read_int(self, path):
        value = self._read(path)
        try:
            return int(value)
        except (TypeError, ValueError):
            return None

    def _vpd_serial(self, path):
        """Unit serial number from a binary VPD page 0x80 (4-byte header, then ASCII)."""
        try:
            data = self.fs.read_bytes(path)
        except KernelFileError:
            return None
        if not data or len(data) < 4:
            return None
        length = (data[2] << 8) | data[3]
        text = data[4:4 + length].decode("ascii", "replace").replace("\x00", " ").strip()
        return text or None

    # -- /dev/disk reverse map ------------------------------------------------------------
    def links(self):
        """{kernel name: {'by-id': [...], 'by-path': [...]}} built with one scan of each dir."""
        if self._links is None:
            links = {}
            for directory, key in ((BY_ID, "by-id"), (BY_PATH, "by-path")):
                for entry in self.fs.listdir(directory):
                    target = self._link_target(directory + "/" + entry)
                    if target:
                        links.setdefault(target, {"by-id": [], "by-path": []})[key].append(entry)
            for value in links.values():
                value["by-id"].sort()
                value["by-path"].sort()
            self._links = links
        return self._links

    def _link_target(self, path):
        """Kernel name a /dev link points at, or None (dangling / not a block device)."""
        target = self.fs.readlink(path)
        if target is None:
            return None
        if not os.path.isabs(target):
            target = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if os.path.dirname(target) != "/dev":
            target = self.fs.realpath(path)
        name = os.path.basename(target)
        return name if self.fs.exists(SYS_CLASS_BLOCK + "/" + name) else None

    # -- records --------------------------------------------------------------------------
    def _nvme_paths_of_head(self, name, base):
        paths = [p for p in self.fs.listdir(base + "/multipath") if NVME_PATH_NAME.match(p)]
        if paths:
            return sorted(paths, key=natural)
        # Older kernels (< 6.14) have no multipath/ links: path nvmeScCnN belongs to head nvmeSnN.
        out = [e for e in self.fs.listdir(SYS_BLOCK) if multipath_head(e) == name]
        return sorted(out, key=natural)

    def _kind(self, name, base, major, dev_subsys, dev_name):
        if self.fs.isdir(base + "/dm"):
            return "dm"
        if self.fs.isdir(base + "/md") or _MD_RE.match(name):
            return "md"
        if self.fs.isdir(base + "/loop") or (_LOOP_RE.match(name) and major in (7, None)):
            return "loop"
        if dev_subsys == "nvme-subsystem" or (dev_name or "").startswith("nvme-subsys"):
            return "nvme-multipath-head"
        if dev_subsys == "nvme" or NVME_CTRL_NAME.match(dev_name or ""):
            return "nvme-path" if NVME_PATH_NAME.match(name) else "nvme"
        if dev_subsys == "virtio" or (dev_name or "").startswith("virtio"):
            return "virtio"
        if dev_subsys == "scsi" or self.fs.exists(base + "/device/scsi_level"):
            return "scsi"
        return "other"

    def _disk_record(self, name):
        """Record for a whole disk (no stable_id yet), or None if sysfs has no such disk."""
        base = SYS_CLASS_BLOCK + "/" + name
        if not self.fs.exists(base):
            return None
        dev = self._read(base + "/dev")
        m = _MAJMIN_RE.match(dev or "")
        major, minor = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        hidden = self._read(base + "/hidden") == "1" or not m
        rotational = self._read_int(base + "/queue/rotational")
        size = self._read_int(base + "/size")
        dev_name = dev_subsys = None
        if self.fs.exists(base + "/device"):
            # Resolve one link at a time from a real directory: sysfs links are relative to the
            # directory they live in, not to the /sys/class/block alias used to reach it.
            device = self.fs.realpath(self.fs.realpath(base) + "/device")
            dev_name = os.path.basename(device)
            if self.fs.exists(device + "/subsystem"):
                dev_subsys = os.path.basename(self.fs.realpath(device + "/subsystem"))
        kind = self._kind(name, base, major, dev_subsys, dev_name)
        links = self.links().get(name, {"by-id": [], "by-path": []})
        rec = BlockDevice(
            name=name, majmin=dev if m else None, major=major, minor=minor, partition=False,
            hidden=hidden, kind=kind, dev_path=None if hidden else "/dev/" + name,
            has_mq=self.fs.isdir(SYS_BLOCK + "/" + name + "/mq"),
            rotational=None if rotational is None else bool(rotational),
            size_bytes=None if size is None else size * 512,
            by_id=list(links["by-id"]), by_path=list(links["by-path"]),
        )
        if kind.startswith("nvme"):
            rec.wwid = self._read_identity(base + "/wwid")
            rec.wwn = rec.wwid
            rec.eui = self._read_nonempty(base + "/eui")
            rec.nguid = self._read_nonempty(base + "/nguid")
            rec.uuid = self._read_nonempty(base + "/uuid")
            rec.nsid = self._read_int(base + "/nsid")
            rec.model = self._read_nonempty(base + "/device/model")
            rec.serial = self._read_nonempty(base + "/device/serial")
            rec.firmware = self._read_nonempty(base + "/device/firmware_rev")
            if kind == "nvme-multipath-head":
                rec.nvme_subsystem = dev_name
                rec.nvme_paths = self._nvme_paths_of_head(name, base)
            else:
                rec.controller = dev_name
        elif kind == "virtio":
            rec.serial = self._read_identity(base + "/serial")
        elif kind == "scsi":
            rec.vendor = self._read_nonempty(base + "/device/vendor")
            rec.model = self._read_nonempty(base + "/device/model")
            rec.firmware = self._read_nonempty(base + "/device/rev")
            rec.wwid = self._read_identity(base + "/device/wwid")
            rec.serial = self._vpd_serial(base + "/device/vpd_pg80")
            wwn_links = [link[4:] for link in rec.by_id if link.startswith("wwn-")]
            rec.wwn = rec.wwid if rec.wwid and rec.wwid.startswith(("naa.", "eui.")) else None
            if rec.wwn is None and wwn_links:
                rec.wwn = wwn_links[0]
            if rec.wwn is None:
                rec.wwn = rec.wwid
        elif kind == "dm":
            rec.dm_name = self._read_nonempty(base + "/dm/name")
            rec.dm_uuid = self._read_nonempty(base + "/dm/uuid")
        elif kind == "md":
            rec.md_uuid = self._read_nonempty(base + "/md/uuid")
            rec.md_level = self._read_nonempty(base + "/md/level")
            if rec.md_uuid is None:
                uuids = [link[8:] for link in rec.by_id if link.startswith("md-uuid-")]
                rec.md_uuid = uuids[0] if uuids else None
        elif kind == "loop":
            rec.backing_file = self._read_nonempty(base + "/loop/backing_file")
        if kind in ("dm", "md"):
            rec.slaves = sorted(self.fs.listdir(base + "/slaves"), key=natural)
        rec.holders = sorted(self.fs.listdir(base + "/holders"), key=natural)
        return rec

    def _partition_record(self, name):
        base = SYS_CLASS_BLOCK + "/" + name
        parent_name = os.path.basename(os.path.dirname(self.fs.realpath(base)))
        parent = self.disk(parent_name)
        if parent is None:  # parent vanished from /sys/block mid-scan
            parent = self._disk_record(parent_name)
            _assign_stable_ids([parent])
        rec = BlockDevice(**parent.as_dict())
        dev = self._read(base + "/dev")
        m = _MAJMIN_RE.match(dev or "")
        size = self._read_int(base + "/size")
        links = self.links().get(name, {"by-id": [], "by-path": []})
        rec.name = name
        rec.majmin = dev if m else None
        rec.major, rec.minor = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        rec.partition = True
        rec.partition_number = self._read_int(base + "/partition")
        rec.parent = parent_name
        rec.dev_path = "/dev/" + name
        rec.size_bytes = None if size is None else size * 512
        rec.by_id, rec.by_path = list(links["by-id"]), list(links["by-path"])
        if parent.stable_id:
            rec.stable_id = "%s:part%s" % (parent.stable_id, rec.partition_number)
            rec.stable_id_note = "partition %s of %s" % (rec.partition_number, parent.stable_id)
        else:
            rec.stable_id = None
            rec.stable_id_note = "parent disk %s has no stable identity: %s" % (parent_name, parent.stable_id_note)
        return rec

    def _all_disks(self):
        """Every whole disk in /sys/block (hidden ones too), with stable ids assigned."""
        if self._disks is None:
            disks = {}
            for name in self.fs.listdir(SYS_BLOCK):
                rec = self._disk_record(name)
                if rec is not None:
                    disks[name] = rec
            _assign_stable_ids(list(disks.values()))
            self._disks = disks
        return self._disks

    def disk(self, name):
        return self._all_disks().get(name)

    def record(self, name):
        """Record for any block device name (disk or partition), or None."""
        disk = self.disk(name)
        if disk is not None:
            return disk
        base = SYS_CLASS_BLOCK + "/" + name
        if not self.fs.exists(base):
            return None
        if self.fs.exists(base + "/partition"):
            return self._partition_record(name)
        rec = self._disk_record(name)
        if rec is not None:
            _assign_stable_ids([rec])
        return rec

    def list_disks(self, include_empty=False):
        """Visible whole disks (no hidden NVMe path devices), natural order by name."""
        out = []
        for name in sorted(self._all_disks(), key=natural):
            rec = self._all_disks()[name]
            if rec.hidden:
                continue
            if not include_empty and not rec.size_bytes:
                continue
            out.append(rec)
        return out

    # -- resolution -----------------------------------------------------------------------
    def _visible(self):
        return self.list_disks(include_empty=True)

    def _existing(self):
        return "; ".join(d.summary() for d in self._visible()) or "none"

    def _not_found(self, selector, what):
        msg = ("%s. Block devices on this host: %s. Use a kernel name, /dev path or MAJ:MIN from this "
               "list, or better a persistent name (a /dev/disk/by-id link, WWN or serial)."
               % (what, self._existing()))
        return DeviceError(msg, selector=selector, reason="not_found",
                           candidates=[d.brief() for d in self._visible()])

    def _lookup(self, selector):
        """selector -> (kernel name, how it was matched); raises DeviceError."""
        if selector.startswith("/"):
            return self._lookup_path(selector)
        m = _MAJMIN_RE.match(selector)
        if m:
            name = name_of(self.fs, selector)
            if name is None:
                raise self._not_found(selector, "No block device has the device number %s" % selector)
            return name, "MAJ:MIN"
        if "/" not in selector and self.fs.exists(SYS_CLASS_BLOCK + "/" + selector):
            return selector, "kernel name"
        for directory, how in ((BY_ID, "by-id link"), (BY_PATH, "by-path link"), ("/dev/mapper", "dm name"),
                               ("/dev/md", "md name")):
            if "/" not in selector and self.fs.islink(directory + "/" + selector):
                name = self._link_target(directory + "/" + selector)
                if name is None:
                    raise self._not_found(selector, "%s/%s is a dangling link" % (directory, selector))
                return name, how
        return self._lookup_identity(selector)

    def _lookup_path(self, selector):
        path = os.path.normpath(selector)
        if self.fs.exists(path):
            real = self.fs.realpath(path)
            name = os.path.basename(real)
            if os.path.dirname(real) == "/dev" and self.fs.exists(SYS_CLASS_BLOCK + "/" + name):
                return name, "path"
            raise self._not_found(selector, "%s (-> %s) is not a block device known to sysfs" % (selector, real))
        name = os.path.basename(path)
        # /dev/<name> without a node (e.g. a container without /dev): sysfs is authoritative.
        if os.path.dirname(path) == "/dev" and self.fs.exists(SYS_CLASS_BLOCK + "/" + name):
            return name, "path"
        raise self._not_found(selector, "%s does not exist" % selector)

    def _lookup_identity(self, selector):
        disks = self._visible()
        key = normalize_wwn(selector)
        by_wwn = [d for d in disks if key and key in d.wwn_keys()]
        wanted = selector.strip().lower()
        by_serial = [d for d in disks if d.serial and d.serial.strip().lower() == wanted]
        matches, how = (by_wwn, "WWN") if by_wwn else (by_serial, "serial")
        if not matches:
            raise self._not_found(
                selector, "No block device matches %r%s (tried kernel name, /dev path, MAJ:MIN, "
                "/dev/disk/by-id and by-path link names, WWN and serial). If the host had this disk when the request "
                "was planned (io_facts), it has been removed since (hot-removed, failed or detached): run again to "
                "plan for the disks it has now; the purge module removes a gone disk's persisted rules"
                % (selector, describe_nvme_wwid(selector)))
        if len(matches) > 1:
            hint = ""
            holders = set(matches[0].holders).intersection(*[d.holders for d in matches[1:]])
            if how == "serial" and all(d.kind.startswith("nvme") for d in matches):
                hint = (" NVMe namespaces of one controller share the controller's serial;"
                        " select one namespace by WWN, /dev/disk/by-id link or kernel name.")
            elif holders:
                hint = (" They are all held by %s (e.g. paths of one LUN under dm-multipath): select %s instead."
                        % (", ".join(sorted(holders)), sorted(holders)[0]))
            msg = ("%s %r is ambiguous: it matches %d block devices: %s.%s Use a WWN or /dev/disk/by-id "
                   "link that names exactly one of them."
                   % (how, selector, len(matches), "; ".join(d.summary() for d in matches), hint))
            raise DeviceError(msg, selector=selector, reason="ambiguous",
                              candidates=[d.brief() for d in matches])
        return matches[0].name, how

    def resolve(self, selector, allow_partition=False, require_mq=False):
        """One selector -> :class:`BlockDevice` of a whole disk; raises :class:`DeviceError`.

        ``allow_partition`` returns partitions instead of refusing them. ``require_mq`` refuses
        devices without ``/sys/block/<disk>/mq`` (blk-iocost needs a blk-mq disk).
        """
        if selector is None or not str(selector).strip():
            raise DeviceError("Empty device selector: give a kernel name, /dev path, by-id link, WWN, "
                              "serial or MAJ:MIN.", selector=selector, reason="empty")
        selector = str(selector).strip()
        name, _how = self._lookup(selector)
        rec = self.record(name)
        said = "%s (%s)" % (name, rec.majmin or "no MAJ:MIN")
        if selector != name:
            said = "%r resolves to %s, which" % (selector, said)
        if rec.partition and not allow_partition:
            parent = self.disk(rec.parent)
            raise DeviceError(
                "%s is a partition of %s (%s); io cgroup and iocost settings apply to whole disks only: use %s"
                % (said, rec.parent, parent.majmin if parent else "?", rec.parent),
                selector=selector, reason="partition", candidates=[parent.brief()] if parent else [])
        if rec.hidden:
            raise DeviceError(self._hidden_message(said, rec), selector=selector, reason="hidden",
                              candidates=[d.brief() for d in self._visible()])
        if require_mq and not rec.has_mq:
            raise DeviceError(self._not_mq_message(said, rec), selector=selector, reason="not_mq",
                              candidates=[d.brief() for d in self._visible() if d.has_mq])
        return rec

    def _hidden_message(self, said, rec):
        head = multipath_head(rec.name)
        if head:
            return ("%s is a hidden per-path device of the NVMe native-multipath head %s (via controller %s): "
                    "it has no device number, so cgroup io files cannot address it; use %s"
                    % (said, head, rec.controller, head))
        return "%s is a hidden block device without a device number; it cannot be configured" % said

    def _not_mq_message(self, said, rec):
        where = "/sys/block/%s/mq" % (rec.parent or rec.name)
        if rec.kind == "nvme-multipath-head":
            paths = ", ".join(rec.nvme_paths) or "none found"
            return ("%s is an NVMe native-multipath head (subsystem %s, paths: %s). A head is a "
                    "bio-based device without blk-mq (%s does not exist), and blk-iocost needs a blk-mq "
                    "disk, so iocost is not supported on multipath heads; the hidden path devices have no "
                    "device number and cannot be configured either. To use iocost, disable NVMe native "
                    "multipath (kernel parameter nvme_core.multipath=N, then reboot) so that each path "
                    "becomes a regular blk-mq namespace (nvmeXnY) and manage those path devices."
                    % (said, rec.nvme_subsystem, paths, where))
        label = {"dm": "a device-mapper device", "md": "an md software-RAID device"}.get(rec.kind, "a bio-based device")
        if rec.kind == "dm" and rec.dm_name:
            label = "device-mapper device %r" % rec.dm_name
        msg = "%s is %s without blk-mq (%s does not exist): blk-iocost needs a blk-mq disk" % (said, label, where)
        if rec.slaves:
            msg += "; manage the disks underneath it instead: %s" % ", ".join(rec.slaves)
        return msg

    def resolve_many(self, selectors, allow_partition=False, require_mq=False, allow_duplicates=False):
        """Resolve a list; all failures (and duplicates) are reported together in one DeviceError."""
        def duplicate(first, selector, rec):
            return DeviceError("%r and %r both resolve to %s; list each disk once" % (first, selector, rec.summary()),
                               selector=selector, reason="duplicate", candidates=[rec.brief()])

        return resolve_each(selectors, lambda s: self.resolve(s, allow_partition=allow_partition, require_mq=require_mq),
                            DeviceError, "device", None if allow_duplicates else duplicate)


def resolve_each(selectors, resolve, error_class, what, duplicate=None):
    """``resolve`` each selector; every failure (and, with ``duplicate``, each second selector of the
    same ``.name``) is reported together in one ``error_class`` - the user fixes a list in one go.

    Disks (DeviceResolver) and NVMe controllers (_nvme.ControllerResolver) share this.
    """
    selectors = list(selectors)
    found, errors, seen = [], [], {}
    for selector in selectors:
        try:
            item = resolve(selector)
        except error_class as e:
            errors.append(e)
            continue
        if duplicate is not None and item.name in seen:
            errors.append(duplicate(seen[item.name], selector, item))
            continue
        seen[item.name] = selector
        found.append(item)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise error_class("%d of %d %s selectors failed:\n%s" % (
            len(errors), len(selectors), what, "\n".join("- " + e.message for e in errors)),
            selector=[e.selector for e in errors], reason="several", errors=errors)
    return found


def _stable_candidates(rec):
    """Ordered (source, id) candidates for a whole disk's persistent identity."""
    out = []
    if rec.wwn:
        out.append(("wwn", "wwn:" + _clean_token(rec.wwn).lower()))
    if rec.serial:
        family = "nvme" if rec.kind.startswith("nvme") else rec.kind
        sid = "%s-serial:%s" % (family, _clean_token(rec.serial))
        if rec.kind.startswith("nvme") and rec.nsid is not None:
            sid += ":nsid:%d" % rec.nsid
        out.append(("serial", sid))
    if rec.dm_uuid:
        out.append(("dm-uuid", "dm-uuid:" + rec.dm_uuid))
    if rec.md_uuid:
        out.append(("md-uuid", "md-uuid:" + rec.md_uuid))
    for link in rec.by_path:
        out.append(("by-path", "by-path:" + link))
        break
    return out


# /dev/disk/by-id link names by preference: WWN first, then the NVMe wwid forms, the virtio
# serial, then the other serial-based links. dm-name-/md-name- are names an admin may change.
_LINK_RANKS = (
    (re.compile(r"^wwn-"), 0),
    (re.compile(r"^nvme-(eui|uuid)\."), 1),
    (re.compile(r"^nvme-nvme\."), 2),
    (re.compile(r"^virtio-"), 3),
    (re.compile(r"^(nvme-|scsi-|ata-|usb-)"), 4),
    (re.compile(r"^(dm-uuid-|md-uuid-)"), 5),
)
_LINK_EXCLUDED = re.compile(r"^(dm-name-|md-name-)")
# Characters that survive unit-file parsing unchanged ('%' is a specifier, '\' an escape,
# whitespace separates the path from the value).
_LINK_SAFE = re.compile(r"^[A-Za-z0-9#+.:=@_,~-]+$")


def _link_rank(link):
    if _LINK_EXCLUDED.match(link) or not _LINK_SAFE.match(link):
        return None
    for pattern, rank in _LINK_RANKS:
        if pattern.match(link):
            return rank
    return len(_LINK_RANKS)


def stable_by_id_link(rec):
    """The best ``/dev/disk/by-id`` link of a disk with a stable identity (None: none usable)."""
    if rec.stable_id is None:
        return None
    ranked = sorted((_link_rank(link), link) for link in rec.by_id if _link_rank(link) is not None)
    return "%s/%s" % (BY_ID, ranked[0][1]) if ranked else None


def _stable_selector(rec):
    """A selector for the disk's stable identity (``stable_id_source``) that :meth:`resolve` accepts."""
    source = rec.stable_id_source
    if source == "wwn":
        return rec.wwid or rec.wwn
    if source == "serial":
        return rec.serial
    if source in ("dm-uuid", "md-uuid"):
        link = next((l for l in rec.by_id if l.startswith(source + "-")), None)
        return "%s/%s" % (BY_ID, link) if link else stable_by_id_link(rec)
    if source == "by-path":
        return "%s/%s" % (BY_PATH, rec.by_path[0])
    return None


def _assign_stable_ids(records):
    """Pick for each record the first candidate identity that is unique among visible disks."""
    counts = {}
    owners = {}
    per_record = {}
    for rec in records:
        per_record[rec.name] = _stable_candidates(rec)
        if rec.hidden:
            continue
        for _source, sid in per_record[rec.name]:
            counts[sid] = counts.get(sid, 0) + 1
            owners.setdefault(sid, []).append(rec.name)
    for rec in records:
        rec.stable_id = rec.stable_id_source = rec.stable_selector = None
        if rec.hidden:
            rec.stable_id_note = "%s is hidden (no device number); it cannot be configured" % rec.name
            continue
        notes = []
        for source, sid in per_record[rec.name]:
            if counts[sid] == 1:
                rec.stable_id, rec.stable_id_source = sid, source
                break
            others = [n for n in owners[sid] if n != rec.name]
            notes.append("%s %s is shared with %s" % (source, sid.split(":", 1)[1], ", ".join(others)))
        if rec.stable_id is None:
            if not per_record[rec.name]:
                notes.append("it has no WWN, serial, device-mapper/md UUID or /dev/disk/by-path link")
            if rec.kind == "loop":
                notes.append("loop devices are numbered at attach time")
            rec.stable_id_note = ("no persistent identity for %s: %s; its kernel name and MAJ:MIN can change "
                                  "at reboot, so do not persist settings keyed by them" % (rec.name, "; ".join(notes)))
        else:
            rec.stable_id_note = "; ".join(notes) if notes else None
            rec.stable_selector = _stable_selector(rec)


def name_of(fs, majmin):
    """Kernel name of the block device ``MAJ:MIN`` (its ``/sys/dev/block`` link), None when there is none."""
    link = SYS_DEV_BLOCK + "/" + majmin
    if not fs.exists(link):
        return None
    return os.path.basename(fs.realpath(link))


def list_disks(fs, include_empty=False):
    """Every visible whole-disk block device, as :class:`BlockDevice` records.

    Hidden devices (NVMe multipath per-path disks, anything without ``dev``) are skipped, and so
    are size-0 devices (unattached loop/nbd) unless ``include_empty``.
    """
    return DeviceResolver(fs).list_disks(include_empty=include_empty)


def resolve(fs, selector, allow_partition=False, require_mq=False):
    """Resolve one selector on ``fs`` (a :class:`KernelFS`); see :meth:`DeviceResolver.resolve`."""
    return DeviceResolver(fs).resolve(selector, allow_partition=allow_partition, require_mq=require_mq)


def resolve_many(fs, selectors, allow_partition=False, require_mq=False, allow_duplicates=False):
    """Resolve several selectors with one scan; raises one DeviceError listing every failure."""
    return DeviceResolver(fs).resolve_many(selectors, allow_partition=allow_partition, require_mq=require_mq,
                                           allow_duplicates=allow_duplicates)
