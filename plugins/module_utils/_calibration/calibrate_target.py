# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where iocost calibration may measure: a scratch file on a named filesystem, or a blank raw disk.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

* Default: a scratch file ``<dir>/.aiinfra-iocost-calibrate-<pid>.scratch`` on the filesystem that
  holds the directory the operator named. The mount is found in ``/proc/self/mountinfo`` (longest
  mount point, the one whose device is the directory's ``st_dev`` when several match), and its
  MAJ:MIN is traced to one whole disk: a partition to its parent, a dm/md device through its
  ``slaves/`` (recursively) when exactly one disk is underneath. tmpfs, overlay and network
  filesystems, read-only mounts and too little free space (scratch size + max(1 GiB, 5 %) headroom)
  are refused.
* A raw disk only with ``destructive: true``, and only when it is blank and unused: no partitions,
  no signature (``blkid -p`` and ``wipefs --no-act``, on the disk and its partitions), not mounted,
  no active swap, no ``holders/``, no exclusive opener (``O_EXCL`` open gives EBUSY), no process
  with it open (``/proc/*/fd``). Every reason is reported at once in one :class:`TargetRefused`.
* :func:`create_scratch` fills the file with O_DIRECT writes from a page-aligned buffer (each
  4 KiB block unique and incompressible); :func:`claim` holds an ``O_EXCL`` descriptor on a raw disk
  while fio measures it, so nothing can mount or claim the disk meanwhile (fio opens without
  ``O_EXCL``, which the kernel still allows).

Host paths are always looked up through :meth:`KernelFS.path`, so a fake root stands in for a host
in tests; ``Target.path`` is the host path (what fio gets), ``Target.local_path`` the one this
process opens.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import errno
import fcntl
import json
import mmap
import os
import re
import stat
import struct
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import (
    SYS_BLOCK, SYS_CLASS_BLOCK, SYS_DEV_BLOCK, DeviceError,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError

SCRATCH_PREFIX = ".aiinfra-iocost-calibrate-"
SCRATCH_SUFFIX = ".scratch"
_SCRATCH_RE = re.compile(r"^" + re.escape(SCRATCH_PREFIX) + r"(\d+)" + re.escape(SCRATCH_SUFFIX) + r"$")

MIB = 1024 * 1024
GIB = 1024 * MIB
HEADROOM_MIN = GIB
HEADROOM_FRACTION = 0.05
ALIGN = 4096          # O_DIRECT: buffer address, offset and length aligned to the logical block size
STAMP_EVERY = 4096    # one unique stamp per 4 KiB block defeats block-level dedup

MOUNTINFO = "/proc/self/mountinfo"
SWAPS = "/proc/swaps"
BLKID = "blkid"
WIPEFS = "wipefs"

O_DIRECT = getattr(os, "O_DIRECT", 0o40000)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

# Filesystems that are not one local disk: memory, overlay/union, network, FUSE, pseudo.
NOT_DISK_FSTYPES = frozenset((
    "tmpfs", "ramfs", "devtmpfs", "overlay", "overlayfs", "aufs", "unionfs", "squashfs", "nfs", "nfs4", "cifs",
    "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs", "lustre", "beegfs", "gpfs", "afs", "ncpfs", "sshfs",
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs", "hugetlbfs", "mqueue",
    "autofs", "bpf", "pstore", "configfs", "fusectl", "efivarfs", "binfmt_misc", "iso9660", "zfs",
))
NETWORK_FSTYPES = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs",
                             "lustre", "beegfs", "gpfs", "afs", "ncpfs", "sshfs"))

SIGNATURE_KINDS = {
    "LVM2_member": "an LVM physical volume (LVM2_member)",
    "LVM1_member": "an LVM1 physical volume (LVM1_member)",
    "linux_raid_member": "an md RAID member (linux_raid_member)",
    "swap": "a swap signature",
    "crypto_LUKS": "a LUKS encrypted volume (crypto_LUKS)",
    "bcache": "a bcache backing/cache device (bcache)",
    "zfs_member": "a ZFS pool member (zfs_member)",
    "ceph": "a Ceph OSD (ceph)",
}
_SIGNATURE_FIX = {
    "LVM2_member": "remove it from LVM first (vgreduce/vgremove, then pvremove %(dev)s)",
    "linux_raid_member": "stop its array (mdadm --stop) and clear the member (mdadm --zero-superblock %(dev)s)",
    "swap": "swapoff %(dev)s if it is active, remove it from /etc/fstab, then wipefs --all %(dev)s",
    "crypto_LUKS": "close it (cryptsetup close) and erase it (wipefs --all %(dev)s) if its data is not needed",
}
_DEFAULT_FIX = "if its data is not needed, erase it with wipefs --all %(dev)s"


def _human(n):
    """1288490188 -> '1.2 GiB' (binary units, one decimal)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%d B" % n  # pragma: no cover


def _unescape_octal(text):
    """Kernel seq_file escapes (``\\040`` space, ``\\011`` tab, ``\\012`` newline, ``\\134`` backslash)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


# -- parsers (pure) ------------------------------------------------------------------------------

def parse_mountinfo(text):
    """``/proc/<pid>/mountinfo`` text -> list of dicts, in file order.

    Keys: mount_id, parent_id, majmin, root, mount_point, options (list), optional (list), fstype,
    source, super_options (list), read_only (per-mount or superblock ``ro``). Malformed lines are
    skipped; octal escapes in paths are decoded.
    """
    out = []
    for line in (text or "").split("\n"):  # not splitlines(): \r, \x1c... may be part of a path
        parts = line.split(" ")
        if len(parts) < 10 or "-" not in parts[6:]:
            continue
        sep = parts.index("-", 6)
        if len(parts) < sep + 4:
            continue
        options = parts[5].split(",")
        super_options = parts[sep + 3].split(",")
        out.append({
            "mount_id": parts[0], "parent_id": parts[1], "majmin": parts[2], "root": _unescape_octal(parts[3]),
            "mount_point": _unescape_octal(parts[4]), "options": options, "optional": parts[6:sep],
            "fstype": parts[sep + 1], "source": _unescape_octal(parts[sep + 2]), "super_options": super_options,
            "read_only": "ro" in options or "ro" in super_options,
        })
    return out


def parse_swaps(text):
    """``/proc/swaps`` -> [{'filename', 'type', 'size_kib', 'used_kib', 'priority'}] (header skipped)."""
    out = []
    for line in (text or "").split("\n"):
        parts = [p for p in re.split(r"[ \t]+", line) if p]  # the kernel escapes only space, tab, \n, \\
        if len(parts) < 5 or parts[0] == "Filename":
            continue
        try:
            size, used, prio = int(parts[2]), int(parts[3]), int(parts[4])
        except ValueError:
            continue
        out.append({"filename": _unescape_octal(parts[0]), "type": parts[1], "size_kib": size,
                    "used_kib": used, "priority": prio})
    return out


def _unescape_export(value):
    """blkid -o export escapes shell-unsafe characters with a backslash; undo that."""
    return re.sub(r"\\(.)", r"\1", value)


def parse_blkid_export(text):
    """``blkid -p -o export DEV`` -> {KEY: value} (one device; first block only)."""
    out = {}
    for line in (text or "").splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, sep, value = line.partition("=")
        if sep and re.match(r"^[A-Z0-9_]+$", key):
            out[key] = _unescape_export(value)
    return out


def parse_wipefs_json(text):
    """``wipefs --no-act --json DEV`` -> list of signature dicts (device, offset, type, uuid, label).

    wipefs prints nothing at all when it finds no signature; raises ValueError on other non-JSON.
    """
    if not (text or "").strip():
        return []
    data = json.loads(text)
    sigs = data.get("signatures") if isinstance(data, dict) else None
    if not isinstance(sigs, list):
        raise ValueError("no 'signatures' list in wipefs output")
    return [s for s in sigs if isinstance(s, dict)]


# -- errors ----------------------------------------------------------------------------------

class TargetRefused(Exception):
    """The target cannot be used; ``reasons`` lists every reason, each with how to fix it.

    ``device`` names the disk (or filesystem) concerned; the message is one line per reason.
    """

    def __init__(self, reasons, device=None, details=None):
        self.reasons = [r for r in reasons if r]
        self.device = device
        self.details = details or {}
        self.message = "\n".join(self.reasons)
        super(TargetRefused, self).__init__(self.message)

    def as_dict(self):
        out = {"msg": self.message, "reasons": list(self.reasons), "device": self.device}
        out.update(self.details)
        return out


class ScratchError(OSError):
    """Creating or removing the scratch file failed; names path, errno and the fix.

    An ``OSError`` (``errno`` set), so callers that catch OSError around file work catch it too;
    ``str()`` is the full message.
    """

    def __init__(self, path, err, action, hint=None):
        super(ScratchError, self).__init__(err, os.strerror(err))
        self.path = path
        self.errname = errno.errorcode.get(err, str(err))
        self.action = action
        hints = {
            errno.ENOSPC: "the filesystem is full: free space there or lower scratch_size",
            errno.EDQUOT: "a disk quota is exceeded: raise it or lower scratch_size",
            errno.EEXIST: "a file of that name exists (a leftover of an earlier run?): remove it and retry",
            errno.EROFS: "the filesystem is read-only: remount it read-write or name another filesystem",
            errno.EACCES: "permission denied: run as root (become: true) or name a writable directory",
            errno.EPERM: "operation not permitted: run as root (become: true)",
            errno.EIO: "the disk reported an I/O error: check dmesg; do not calibrate a failing disk",
            errno.ENOENT: "the directory does not exist any more",
        }
        self.hint = hint or hints.get(err, "")
        msg = "%s scratch file %s failed: %s (%s)" % (action.capitalize(), path, os.strerror(err), self.errname)
        if self.hint:
            msg += "; " + self.hint
        self.message = msg

    def __str__(self):
        return self.message

    def as_dict(self):
        return {"path": self.path, "errno": self.errname, "action": self.action, "msg": self.message}


# -- the target ----------------------------------------------------------------------------------

class Target:
    """What fio will measure. ``kind`` is 'file' or 'device'; see the module docstring."""

    def __init__(self, kind, path, size_bytes, disk, filesystem=None, local_path=None, fstype=None,
                 mount_source=None, directory=None, free_bytes=None, headroom_bytes=None, leftovers=None):
        self.kind = kind
        self.path = path
        self.local_path = local_path or path
        self.size_bytes = size_bytes
        self.disk = disk
        self.filesystem = filesystem
        self.fstype = fstype
        self.mount_source = mount_source
        self.directory = directory
        self.free_bytes = free_bytes
        self.headroom_bytes = headroom_bytes
        self.leftovers = list(leftovers or [])
        self.created = False
        self.direct_io = None
        self.direct_io_note = None
        self.create_seconds = None

    def as_dict(self):
        disk = None
        if self.disk is not None:
            disk = dict(self.disk.brief(), dev_path=self.disk.dev_path, stable_id=self.disk.stable_id,
                        size_bytes=self.disk.size_bytes)
        return {
            "kind": self.kind, "path": self.path, "size_bytes": self.size_bytes, "disk": disk,
            "filesystem": self.filesystem, "fstype": self.fstype, "mount_source": self.mount_source,
            "directory": self.directory, "free_bytes": self.free_bytes, "headroom_bytes": self.headroom_bytes,
            "leftovers": list(self.leftovers), "created": self.created, "direct_io": self.direct_io,
            "direct_io_note": self.direct_io_note, "create_seconds": self.create_seconds,
        }

    def __repr__(self):
        disk = self.disk.name if self.disk is not None else "-"
        return "Target(%s %s, %d bytes, disk %s)" % (self.kind, self.path, self.size_bytes or 0, disk)


# -- seams (module functions so tests can stand in for the kernel) ---------------------------------

def statvfs(path):
    return os.statvfs(path)


def probe_exclusive(path):
    """None if ``path`` is not a block device or opens with O_EXCL; else the errno (EBUSY = claimed)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno
    if not stat.S_ISBLK(st.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL | O_CLOEXEC)
    except OSError as e:
        return e.errno
    os.close(fd)
    return None


def dev_st_dev(path):
    """``st_dev`` of a path as 'MAJ:MIN', or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))


def _run(run, argv):
    """run(argv) -> (rc, out, err); a missing tool or a raising runner becomes rc 127 / its rc."""
    try:
        rc, out, err = run(list(argv))
    except OSError as e:
        return 127, "", "%s: %s" % (argv[0], os.strerror(e.errno) if e.errno else e)
    except Exception as e:  # a Runner with check=True raises CommandError (rc/stdout/stderr kept)
        if hasattr(e, "rc"):
            return e.rc, getattr(e, "stdout", "") or "", getattr(e, "stderr", "") or str(e)
        raise
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    return rc, out or "", err or ""


# -- planning --------------------------------------------------------------------------------------

class _Planner:
    def __init__(self, fs, resolver, run, params):
        self.fs = fs
        self.resolver = resolver
        self.run = run
        self.params = params
        self.blkid = params.get("blkid") or BLKID
        self.wipefs = params.get("wipefs") or WIPEFS
        self._mounts = None

    # -- host reads --
    def mounts(self):
        if self._mounts is None:
            try:
                text = self.fs.read(MOUNTINFO)
            except KernelFileError:
                text = None
            self._mounts = parse_mountinfo(text)
        return self._mounts

    def swaps(self):
        try:
            return parse_swaps(self.fs.read(SWAPS))
        except KernelFileError:
            return []

    def _label(self, rec):
        return "%s (%s)" % (rec.name, rec.majmin or "no MAJ:MIN")

    def partitions(self, disk):
        """Partition kernel names of a whole disk (sysfs children with a ``partition`` file)."""
        base = SYS_BLOCK + "/" + disk.name
        out = [e for e in self.fs.listdir(base) if self.fs.exists("%s/%s/partition" % (base, e))]
        return sorted(out, key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)])

    def majmin_of(self, name):
        value = self.fs.read(SYS_CLASS_BLOCK + "/" + name + "/dev")
        return value.strip() if value else None

    # -- filesystem target --
    def mount_for(self, directory):
        """The mountinfo entry holding ``directory`` (a host path already resolved)."""
        candidates = []
        for m in self.mounts():
            mp = m["mount_point"]
            if directory == mp or mp == "/" or directory.startswith(mp.rstrip("/") + "/"):
                candidates.append(m)
        if not candidates:
            return None
        longest = max(len(m["mount_point"]) for m in candidates)
        best = [m for m in candidates if len(m["mount_point"]) == longest]
        st_dev = dev_st_dev(self.fs.path(directory))
        same_dev = [m for m in best if m["majmin"] == st_dev]
        return (same_dev or best)[-1]  # a later mount on the same point hides the earlier ones

    def _btrfs_devices(self, name):
        """All member devices of the btrfs filesystem that has ``name`` among its devices."""
        for fsid in self.fs.listdir("/sys/fs/btrfs"):
            members = self.fs.listdir("/sys/fs/btrfs/%s/devices" % fsid)
            if name in members:
                return members
        return [name]

    def whole_disks(self, name, seen=None):
        """Whole disks underneath block device ``name`` -> (list of disk records, reasons)."""
        seen = set() if seen is None else seen
        if name in seen:
            return [], []
        seen.add(name)
        rec = self.resolver.record(name)
        if rec is None:
            return [], ["block device %s is not in sysfs (%s/%s missing)" % (name, SYS_CLASS_BLOCK, name)]
        if rec.partition:
            parent = self.resolver.disk(rec.parent)
            if parent is None:
                return [], ["the parent disk %s of partition %s is not in sysfs" % (rec.parent, name)]
            rec = parent
            if rec.name in seen and rec.kind not in ("dm", "md"):
                return [rec], []
            seen.add(rec.name)
        if rec.kind in ("dm", "md"):
            slaves = self.fs.listdir(SYS_CLASS_BLOCK + "/" + rec.name + "/slaves")
            if not slaves:
                what = "device-mapper device %s" % (rec.dm_name or rec.name) if rec.kind == "dm" else rec.name
                return [], ["%s has no underlying disks (slaves/ is empty)" % what]
            disks, reasons = [], []
            for slave in slaves:
                d, r = self.whole_disks(slave, seen)
                disks.extend(x for x in d if x.name not in [y.name for y in disks])
                reasons.extend(r)
            return disks, reasons
        if rec.kind == "loop":
            return [], ["it is on loop device %s (backing file %s): name a directory on the filesystem that "
                        "holds the backing file instead" % (rec.name, rec.backing_file or "unknown")]
        return [rec], []

    def plan_file(self):
        p = self.params
        directory = p.get("filesystem")
        reasons = []
        if not isinstance(directory, str) or not directory.startswith("/"):
            raise TargetRefused(["filesystem must be an absolute directory path, got %r" % (directory,)],
                                device=directory)
        size = p.get("scratch_size")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise TargetRefused(["scratch_size must be a positive number of bytes, got %r" % (size,)],
                                device=directory)
        floor = p.get("headroom_min")
        if floor is not None and (not isinstance(floor, int) or isinstance(floor, bool) or floor < 0):
            raise TargetRefused(["headroom_min must be a number of bytes >= 0, got %r" % (floor,)], device=directory)
        size = -(-size // MIB) * MIB  # whole MiB: every O_DIRECT write is a full aligned chunk
        real = self.fs.realpath(directory)
        if not self.fs.isdir(real):
            what = "does not exist" if not self.fs.exists(real) else "is not a directory"
            raise TargetRefused(["filesystem: %s %s; name an existing directory on the filesystem of the disk "
                                 "to calibrate (the scratch file goes there)" % (directory, what)], device=directory)
        shown = directory if real == directory.rstrip("/") or real == directory else "%s (-> %s)" % (directory, real)
        mount = self.mount_for(real)
        if mount is None:
            raise TargetRefused(["no mount in %s holds %s; is /proc mounted?" % (MOUNTINFO, shown)],
                                device=directory)
        where = "%s (%s on %s, mounted from %s)" % (shown, mount["fstype"], mount["mount_point"], mount["source"])
        disk = None
        fstype = mount["fstype"]
        usable_fs = not (fstype in NOT_DISK_FSTYPES or fstype.startswith("fuse"))
        if not usable_fs:
            kind = "a network filesystem" if fstype in NETWORK_FSTYPES else "not backed by one local disk"
            reasons.append("the filesystem of %s is %s (%s): its speed is not a disk's; name a directory on a "
                           "filesystem on the disk to calibrate" % (where, kind, fstype))
        else:
            disk = self._file_disk(mount, shown, where, reasons)
        if mount["read_only"] or self._statvfs_ro(real):
            reasons.append("the filesystem of %s is mounted read-only; remount it read-write "
                           "(mount -o remount,rw %s) or name a directory on a writable filesystem"
                           % (where, mount["mount_point"]))
        if disk is not None and p.get("device") not in (None, ""):
            self._check_same_disk(p["device"], disk, shown, reasons)
        scratch = real.rstrip("/") + "/" + SCRATCH_PREFIX + str(os.getpid()) + SCRATCH_SUFFIX
        leftovers = find_leftovers(self.fs.path(real))
        free = headroom = None
        if disk is not None:  # a filesystem refused for what it is (tmpfs, spans disks...) needs no space check
            free, headroom = self._free_space(real, size, where, leftovers, reasons)
        if self.fs.exists(scratch):
            reasons.append("%s already exists (a leftover of an earlier run with the same process id): remove it "
                           "(rm %s) and retry" % (scratch, scratch))
        if reasons:
            raise TargetRefused(reasons, device=disk.name if disk is not None else directory,
                                details={"filesystem": mount["mount_point"], "fstype": fstype})
        return Target("file", scratch, size, disk, filesystem=mount["mount_point"], local_path=self.fs.path(scratch),
                      fstype=fstype, mount_source=mount["source"], directory=real, free_bytes=free,
                      headroom_bytes=headroom, leftovers=[self.fs.host_path(x) for x in leftovers])

    def _statvfs_ro(self, real):
        try:
            return bool(statvfs(self.fs.path(real)).f_flag & getattr(os, "ST_RDONLY", 1))
        except OSError:
            return False

    def _file_disk(self, mount, shown, where, reasons):
        majmin = mount["majmin"]
        name = None
        if self.fs.exists(SYS_DEV_BLOCK + "/" + majmin):
            name = os.path.basename(self.fs.realpath(SYS_DEV_BLOCK + "/" + majmin))
        elif mount["source"].startswith("/dev/") and self.fs.exists(mount["source"]):
            # btrfs shows an anonymous MAJ:MIN (0:N); its source names one member device.
            cand = os.path.basename(self.fs.realpath(mount["source"]))
            if self.fs.exists(SYS_CLASS_BLOCK + "/" + cand):
                name = cand
        if name is None:
            reasons.append("the filesystem of %s is not backed by a block device (device number %s has no %s "
                           "entry): name a directory on a filesystem on the disk to calibrate"
                           % (where, majmin, SYS_DEV_BLOCK))
            return None
        names = self._btrfs_devices(name) if mount["fstype"] == "btrfs" else [name]
        disks, problems = [], []
        for n in names:
            d, r = self.whole_disks(n)
            disks.extend(x for x in d if x.name not in [y.name for y in disks])
            problems.extend(r)
        if problems:
            reasons.extend("the filesystem of %s: %s" % (where, r) for r in problems)
            return None
        if len(disks) > 1:
            reasons.append("the filesystem on %s spans %s: calibrate each disk through a filesystem of its own "
                           "or destructive on a blank disk" % (mount["mount_point"], ", ".join(d.name for d in disks)))
            return None
        if not disks:
            reasons.append("no whole disk found underneath the filesystem of %s" % where)
            return None
        disk = disks[0]
        try:
            self.resolver.resolve(disk.name, require_mq=True)
        except DeviceError as e:
            reasons.append("the filesystem of %s is on a disk iocost cannot manage: %s" % (where, e.message))
        return disk

    def _check_same_disk(self, selector, disk, shown, reasons):
        try:
            rec = self.resolver.resolve(selector, allow_partition=True)
        except DeviceError as e:
            reasons.append("device: %s" % e.message)
            return
        named = self.resolver.disk(rec.parent) if rec.partition else rec
        if named is None or named.name != disk.name:
            reasons.append("device %r is %s but the filesystem of %s is on %s: name one disk (drop device, or "
                           "name a directory on a filesystem on %s)"
                           % (selector, self._label(named or rec), shown, self._label(disk),
                              (named or rec).name))

    def _free_space(self, real, size, where, leftovers, reasons):
        try:
            st = statvfs(self.fs.path(real))
        except OSError as e:
            reasons.append("statvfs(%s) failed: %s" % (real, os.strerror(e.errno)))
            return None, None
        total = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        floor = self.params.get("headroom_min")
        floor = HEADROOM_MIN if floor is None else int(floor)
        headroom = max(floor, int(total * HEADROOM_FRACTION))
        need = size + headroom
        if free < need:
            fits = free - headroom
            msg = ("not enough free space for the scratch file in %s: %d bytes (%s) free, need %d bytes (%s) = "
                   "scratch_size %d (%s) + headroom %d (%s, the larger of %s and 5%% of the filesystem's %s); "
                   % (where, free, _human(free), need, _human(need), size, _human(size), headroom,
                      _human(headroom), _human(floor), _human(total)))
            msg += ("free space there or set scratch_size to at most %d (%s)" % (fits, _human(fits)) if fits >= MIB
                    else "free space there or name a directory on a larger filesystem")
            if leftovers:
                sizes = sum(_size(x) for x in leftovers)
                msg += "; scratch files of earlier runs use %s there: %s" % (
                    _human(sizes), ", ".join(self.fs.host_path(x) for x in leftovers))
            reasons.append(msg)
        return free, headroom

    # -- raw device target --
    def plan_device(self):
        p = self.params
        selector = p["device"]
        try:
            disk = self.resolver.resolve(selector)
        except DeviceError as e:
            if e.reason == "partition":
                raise TargetRefused(["%s; calibrate the whole disk" % e.message], device=str(selector),
                                    details={"device_error": e.as_dict()})
            raise TargetRefused([e.message], device=str(selector), details={"device_error": e.as_dict()})
        label = "%s (%s)" % (disk.dev_path, disk.majmin)
        if not p.get("destructive"):
            raise TargetRefused(["calibrating %s directly would overwrite data on it; name a filesystem for a "
                                 "scratch file, or set destructive: true on a blank disk" % label], device=disk.name)
        reasons = []
        parts = self.partitions(disk)
        nodes = [disk.name] + parts
        majmins = {}
        for n in nodes:
            mm = disk.majmin if n == disk.name else self.majmin_of(n)
            if mm:
                majmins[mm] = n
        if parts:
            one = len(parts) == 1
            reasons.append("%s has %d partition%s (%s): raw calibration would destroy %s; delete %s (wipefs "
                           "--all on each partition, then on %s) or calibrate through a filesystem on %s"
                           % (label, len(parts), "" if one else "s", ", ".join("/dev/" + x for x in parts),
                              "it" if one else "them", "it" if one else "them", disk.dev_path,
                              "it" if one else "one of them"))
        reasons.extend(self._signatures(nodes))
        usage = self._mounted(majmins) + self._swap(nodes) + self._holders(disk, parts)
        reasons.extend(usage)
        explained = bool(usage)
        err = probe_exclusive(self.fs.path(disk.dev_path))
        if err == errno.EBUSY:
            why = ("the mount, swap or holder listed here" if explained
                   else "a mount, swap, md/dm/bcache member or a program that opened it exclusively")
            reasons.append("%s is claimed by the kernel: an exclusive open (O_EXCL) fails with EBUSY (%s); it "
                           "must be free before fio may write to it (check with lsblk %s and fuser -vm %s)"
                           % (label, why, disk.dev_path, disk.dev_path))
        elif err is not None:
            reasons.append("cannot open %s: %s (%s); the device node must exist and be readable by root"
                           % (disk.dev_path, os.strerror(err), errno.errorcode.get(err, err)))
        reasons.extend(self._openers(disk, parts, majmins))
        try:
            self.resolver.resolve(disk.name, require_mq=True)
        except DeviceError as e:
            reasons.append(e.message)
        if self.fs.read(SYS_CLASS_BLOCK + "/" + disk.name + "/ro", "0").strip() == "1":
            reasons.append("%s is read-only (%s/%s/ro = 1): a raw write calibration needs a writable disk"
                           % (label, SYS_BLOCK, disk.name))
        if not disk.size_bytes:
            reasons.append("%s has size 0 (no medium?)" % label)
        if reasons:
            raise TargetRefused(reasons, device=disk.name)
        return Target("device", disk.dev_path, disk.size_bytes, disk, local_path=self.fs.path(disk.dev_path))

    def _signatures(self, nodes):
        """One reason per signature found on the disk or its partitions (blkid -p, wipefs --no-act)."""
        reasons = []
        for n in nodes:
            dev = "/dev/" + n
            found = []  # (type, detail)
            answered, failures = False, []
            rc, out, err = _run(self.run, [self.blkid, "-p", "-o", "export", dev])
            if rc == 0:
                answered = True
                tags = parse_blkid_export(out)
                if tags.get("PTTYPE"):
                    found.append(("PTTYPE:" + tags["PTTYPE"], _details(tags, ("PTUUID",)), None))
                if tags.get("TYPE"):
                    found.append((tags["TYPE"], _details(tags, ("LABEL", "UUID")), tags.get("USAGE")))
            elif rc == 2:
                answered = True  # low-level probe found nothing
            else:
                failures.append("blkid -p rc=%s: %s" % (rc, (err or out).strip()[:200]))
            rc, out, err = _run(self.run, [self.wipefs, "--no-act", "--json", dev])
            if rc == 0:
                try:
                    sigs = parse_wipefs_json(out)
                except ValueError as e:
                    failures.append("wipefs output is not JSON (%s): %r" % (e, out[:100]))
                else:
                    answered = True
                    for s in sigs:
                        t = s.get("type") or "unknown"
                        key = t if t not in ("dos", "gpt", "PMBR", "atari", "sun", "sgi", "bsd", "mac") else "PTTYPE:" + t
                        if key == "PTTYPE:PMBR" and "PTTYPE:gpt" in [f[0] for f in found]:
                            continue  # the protective MBR of a GPT disk
                        if key not in [f[0] for f in found]:
                            found.append((key, _details({"UUID": s.get("uuid"), "LABEL": s.get("label"),
                                                         "offset": s.get("offset")}, ("LABEL", "UUID", "offset")),
                                          None))
            else:
                failures.append("wipefs --no-act rc=%s: %s" % (rc, (err or out).strip()[:200]))
            for key, detail, usage in found:
                reasons.append(_signature_reason(dev, key, detail, usage))
            if not answered:
                reasons.append("cannot tell whether %s is blank: %s; install util-linux (blkid, wipefs) or fix "
                               "the error" % (dev, "; ".join(failures)))
        return reasons

    def _mounted(self, majmins):
        out = []
        for m in self.mounts():
            if m["majmin"] in majmins:
                n = majmins[m["majmin"]]
                out.append("/dev/%s is mounted on %s (%s); unmount it (umount %s) and remove it from /etc/fstab"
                           % (n, m["mount_point"], m["fstype"], _shell_quote(m["mount_point"])))
        return out

    def _swap(self, nodes):
        out = []
        for s in self.swaps():
            real = os.path.basename(self.fs.realpath(s["filename"])) if s["filename"].startswith("/dev/") else None
            if real in nodes:
                out.append("/dev/%s is active swap (%s in %s, %d KiB used); swapoff %s and remove it from /etc/fstab"
                           % (real, s["filename"], SWAPS, s["used_kib"], s["filename"]))
        return out

    def _holders(self, disk, parts):
        out = []
        for n in [disk.name] + parts:
            for h in self.fs.listdir(SYS_CLASS_BLOCK + "/" + n + "/holders"):
                rec = self.resolver.record(h)
                if rec is not None and rec.kind == "dm":
                    what = "device-mapper device %s (/dev/mapper/%s)" % (h, rec.dm_name) if rec.dm_name else h
                    fix = "remove it first (lvremove/vgchange -an for LVM, dmsetup remove %s)" % (rec.dm_name or h)
                elif rec is not None and rec.kind == "md":
                    what = "md array %s" % h
                    fix = "stop it first (mdadm --stop /dev/%s)" % h
                else:
                    what = h
                    fix = "release it first (bcache: echo 1 > /sys/block/%s/bcache/detach or stop)" % h
                out.append("/dev/%s is in use by %s (%s/%s/holders/%s); %s" % (n, what, SYS_CLASS_BLOCK, n, h, fix))
        return out

    def _openers(self, disk, parts, majmins):
        """Processes with the disk or a partition open, from /proc/<pid>/fd links."""
        nodes = set("/dev/" + n for n in [disk.name] + parts)
        me = str(os.getpid())
        found = {}
        for pid in self.fs.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            fd_dir = "/proc/%s/fd" % pid
            for fd in self.fs.listdir(fd_dir):
                target = self.fs.readlink(fd_dir + "/" + fd)
                if not target or not target.startswith("/dev/"):
                    continue
                hit = target if target in nodes else None
                if hit is None and self.fs.root == "/":
                    try:
                        st = os.stat(fd_dir + "/" + fd)
                    except OSError:
                        continue
                    mm = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
                    if stat.S_ISBLK(st.st_mode) and mm in majmins:
                        hit = "%s (= /dev/%s)" % (target, majmins[mm])
                if hit:
                    found.setdefault(pid, set()).add(hit)
        if not found:
            return []
        procs = []
        for pid in sorted(found, key=int):
            comm = (self.fs.read("/proc/%s/comm" % pid) or "?").strip()
            procs.append("pid %s (%s) has %s open" % (pid, comm, ", ".join(sorted(found[pid]))))
        return ["%s is held open by %d process%s: %s; stop %s (kill %s) before calibrating"
                % (disk.dev_path, len(found), "" if len(found) == 1 else "es", "; ".join(procs),
                   "it" if len(found) == 1 else "them", " ".join(sorted(found, key=int)))]


def _shell_quote(text):
    return text if re.match(r"^[A-Za-z0-9_./:@%+=-]+$", text) else "'%s'" % text.replace("'", "'\\''")


def _details(tags, keys):
    return ", ".join("%s %s" % (k, tags[k]) for k in keys if tags.get(k))


def _signature_reason(dev, key, detail, usage=None):
    extra = " (%s)" % detail if detail else ""
    if key.startswith("PTTYPE:"):
        return ("%s has a partition table (%s)%s; delete it if its partitions are not needed (wipefs --all %s)"
                % (dev, key[7:], extra, dev))
    what = SIGNATURE_KINDS.get(key)
    if what is None:
        article = "an" if key[:1].lower() in "aeiou" else "a"
        what = {"filesystem": "%s %s filesystem" % (article, key),
                "raid": "a RAID or volume-manager member (%s)" % key,
                "crypto": "an encrypted volume (%s)" % key}.get(usage, "%s %s signature" % (article, key))
    fix = _SIGNATURE_FIX.get(key, _DEFAULT_FIX) % {"dev": dev}
    return "%s carries %s%s; %s" % (dev, what, extra, fix)


def _size(path):
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def plan_target(fs, resolver, run, params):
    """Decide what fio measures (no writes); raises :class:`TargetRefused` listing every reason.

    ``params``: ``device`` (selector or None), ``filesystem`` (directory or None), ``scratch_size``
    (bytes; rounded up to whole MiB), ``destructive`` (bool); optional ``blkid``/``wipefs`` paths.
    """
    params = dict(params or {})
    planner = _Planner(fs, resolver, run, params)
    if params.get("filesystem") not in (None, ""):
        return planner.plan_file()
    if params.get("device") not in (None, ""):
        return planner.plan_device()
    raise TargetRefused(["nothing to calibrate on: name a filesystem (a directory on the disk to measure; a scratch "
                         "file is created there and removed afterwards) or a device with destructive: true "
                         "(a blank disk, overwritten)"])


# -- scratch file ----------------------------------------------------------------------------------

def enable_direct(fd):
    """Set O_DIRECT on an open descriptor (EINVAL if the filesystem cannot do direct I/O)."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | O_DIRECT)
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT)


def disable_direct(fd):
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~O_DIRECT)


def write_chunk(fd, view):
    """Write all of ``view``; a 0-byte write is ENOSPC."""
    done = 0
    while done < len(view):
        n = os.write(fd, view[done:])
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done += n
    return done


def _stamp(buf, index, length):
    """Make every 4 KiB block of the chunk unique (chunk index, block index) over random base data."""
    for off in range(0, length, STAMP_EVERY):
        struct.pack_into("<QQ", buf, off, index, off)


def create_scratch(target, chunk=MIB, progress=None):
    """Create ``target.path`` exclusively (0600) and fill ``size_bytes`` with O_DIRECT writes.

    Returns the seconds it took. Falls back to buffered writes + fsync only when the filesystem
    rejects O_DIRECT with EINVAL (``target.direct_io_note`` says so). On any failure the partial
    file is removed and :class:`ScratchError` raised. ``progress(written, total)`` is called per chunk.
    """
    if chunk <= 0 or chunk % ALIGN:
        raise ValueError("chunk must be a positive multiple of %d bytes, got %r" % (ALIGN, chunk))
    path = target.local_path or target.path
    shown = target.path
    total = int(target.size_bytes)
    start = time.time()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    except OSError as e:
        raise ScratchError(shown, e.errno, "create")
    buf = None
    try:
        direct, note = True, None
        try:
            direct = enable_direct(fd)
            if not direct:
                note = "O_DIRECT did not stick on the descriptor; buffered writes + fsync used"
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            direct = False
            note = ("the filesystem rejected O_DIRECT (EINVAL on fcntl F_SETFL): buffered writes + fsync used; "
                    "fio's direct=1 may fail here too")
        try:
            os.posix_fallocate(fd, 0, total)  # ENOSPC now rather than after minutes of writing
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
                raise
        buf = mmap.mmap(-1, chunk)  # anonymous mappings are page aligned, as O_DIRECT needs
        buf[:] = os.urandom(chunk)
        written, index = 0, 0
        while written < total:
            n = min(chunk, total - written)
            n = -(-n // ALIGN) * ALIGN
            _stamp(buf, index, n)
            try:
                write_chunk(fd, memoryview(buf)[:n])
            except OSError as e:
                if not (e.errno == errno.EINVAL and direct and written == 0):
                    raise
                disable_direct(fd)
                direct = False
                note = ("the filesystem accepted O_DIRECT but rejected the first direct write (EINVAL): buffered "
                        "writes + fsync used")
                os.lseek(fd, 0, os.SEEK_SET)
                continue
            written += n
            index += 1
            if progress is not None:
                progress(written, total)
        os.fsync(fd)
    except BaseException as e:
        try:
            os.close(fd)
        except OSError:
            pass
        _unlink_quiet(path)
        if buf is not None:
            try:
                buf.close()
            except BufferError:  # a slice of it is still referenced by the traceback; GC frees it
                pass
        if isinstance(e, OSError) and e.errno:
            raise ScratchError(shown, e.errno, "write")
        raise
    os.close(fd)
    buf.close()
    target.created = True
    target.direct_io = direct
    target.direct_io_note = note
    target.create_seconds = round(time.time() - start, 3)
    return target.create_seconds


def _unlink_quiet(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def remove_scratch(path):
    """Remove one of our scratch files; absent is fine. Refuses anything not named like ours."""
    if not _SCRATCH_RE.match(os.path.basename(path or "")):
        raise ValueError("refusing to remove %r: not a scratch file of this collection (%s<pid>%s)"
                         % (path, SCRATCH_PREFIX, SCRATCH_SUFFIX))
    try:
        st = os.lstat(path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return False
        raise ScratchError(path, e.errno, "remove")
    if not stat.S_ISREG(st.st_mode):
        raise ScratchError(path, errno.EINVAL, "remove", hint="it is not a regular file; remove it by hand")
    try:
        os.unlink(path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return False
        raise ScratchError(path, e.errno, "remove")
    return True


def find_leftovers(directory):
    """Our scratch files (regular files named ``.aiinfra-iocost-calibrate-<pid>.scratch``) in directory."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = []
    for name in names:
        if _SCRATCH_RE.match(name):
            full = os.path.join(directory, name)
            try:
                if stat.S_ISREG(os.lstat(full).st_mode):
                    out.append(full)
            except OSError:
                continue
    return sorted(out)


@contextlib.contextmanager
def claim(path):
    """Hold an O_EXCL read-only descriptor on a raw disk for the whole measurement (no-op for files).

    ``path`` is a :class:`Target` or a path. While held, mount/swapon/mkfs -- anything opening the
    disk exclusively -- gets EBUSY; fio's plain (non-exclusive) opens still work. Yields the fd or None.
    """
    if isinstance(path, Target):
        if path.kind != "device":
            yield None
            return
        local, shown = path.local_path, path.path
    else:
        local = shown = path
    try:
        st = os.stat(local)
    except OSError as e:
        raise TargetRefused(["cannot claim %s: %s" % (shown, os.strerror(e.errno))], device=shown)
    if not stat.S_ISBLK(st.st_mode):
        yield None
        return
    try:
        fd = os.open(local, os.O_RDONLY | os.O_EXCL | O_CLOEXEC)
    except OSError as e:
        hint = ("something claimed it since it was checked (a mount, swapon, md/dm or a program with O_EXCL): "
                "free it and retry" if e.errno == errno.EBUSY else "check the device node")
        raise TargetRefused(["cannot claim %s exclusively: %s (%s); %s"
                             % (shown, os.strerror(e.errno), errno.errorcode.get(e.errno, e.errno), hint)],
                            device=shown)
    try:
        yield fd
    finally:
        os.close(fd)
