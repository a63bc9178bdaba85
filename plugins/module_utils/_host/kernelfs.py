# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kernel file accessor: the only place that touches the host's files.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

* Kernel pseudo-files (``/sys``, ``/proc``, ``/sys/fs/cgroup``) are written in place with exactly
  one ``write()`` per line: the kernel parses one device per write for ``io.cost.*`` and friends,
  and a short or split write would be parsed as two requests.
* Configuration files (``/etc/...``) are written atomically: temp file in the same directory,
  fsync, rename.
* Every failure becomes a :class:`KernelFileError` that names the file, the value, what the
  kernel said (errno) and how to fix it.
* ``root`` is a seam for tests only: every absolute path is looked up below it, so a fake
  ``/sys`` + ``/dev`` tree can stand in for a host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat
import tempfile

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import HostError

# Where cgroup v2 is mounted: every concern's cgroupfs path starts here (the one place it is written).
CGROUP_ROOT = "/sys/fs/cgroup"

# What each errno means for the files this collection writes, and what the operator can do.
ERRNO_HINTS = {
    errno.EINVAL: "the kernel rejected the value's format or range; check the key names and "
                  "units against docs/kernel-files.md",
    errno.ENODEV: "no such device, or it is a partition / not a live whole disk; "
                  "use the whole-disk device (the module resolves names to MAJ:MIN for you)",
    errno.EOPNOTSUPP: "the kernel policy is not active on this device: enable iocost on the disk "
                      "first (io.cost.qos enable=1), or the disk is not blk-mq (dm/md/NVMe "
                      "multipath head)",
    errno.ERANGE: "value out of range (for io.max, 0 is not allowed: use 'max' to clear a limit)",
    errno.EACCES: "permission denied: the file is read-only or the task does not run as root "
                  "(use become: true)",
    errno.EPERM: "operation not permitted: run as root (become: true)",
    errno.ENOENT: "the file does not exist: the controller is not enabled for this cgroup or "
                  "the running kernel does not have the feature",
    errno.EBUSY: "the device or cgroup is busy; stop the I/O or processes using it and retry",
    errno.EROFS: "the filesystem is read-only",
    errno.ENOSPC: "no space left (or, on cgroupfs, a controller cannot be enabled here)",
}

OPNOTSUPP_ALIASES = tuple(sorted({errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}))


class KernelFileError(HostError):
    """A read or write the kernel refused, with everything the operator needs to act."""

    RESULT_KEY = "kernel_error"

    def __init__(self, path, value, err, action="write"):
        self.path = path
        self.value = value
        self.errno = err
        self.action = action
        self.errname = errno.errorcode.get(err, str(err)) if isinstance(err, int) else str(err)
        strerror = os.strerror(err) if isinstance(err, int) else str(err)
        hint = ERRNO_HINTS.get(err if err not in OPNOTSUPP_ALIASES else errno.EOPNOTSUPP, "")
        if action == "read" and err == errno.EINVAL:
            # Seen on bio-based queues (NVMe multipath head): the attribute exists but cannot be read.
            hint = "the kernel does not support this attribute on this device"
        if action == "write":
            msg = "Writing %r to %s failed: %s (%s)" % (value, path, strerror, self.errname)
        else:
            msg = "%s %s failed: %s (%s)" % (action.capitalize(), path, strerror, self.errname)
        if hint:
            msg += "; " + hint
        self.message = msg
        super(KernelFileError, self).__init__(msg)

    def as_dict(self):
        return {"path": self.path, "value": self.value, "errno": self.errname,
                "action": self.action, "msg": self.message}


class KernelFS:
    """Reads and writes host files below ``root`` (``/`` on a real host)."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root)

    # -- paths ---------------------------------------------------------------------------
    def path(self, path):
        """Host path -> path on this filesystem (prefixed with the test root)."""
        if self.root == "/":
            return path
        return os.path.join(self.root, path.lstrip("/"))

    def host_path(self, real):
        """Inverse of :meth:`path` for a path below root (used after realpath)."""
        if self.root == "/":
            return real
        if real == self.root:
            return "/"
        if real.startswith(self.root + os.sep):
            return real[len(self.root):]
        return real

    def exists(self, path):
        return os.path.exists(self.path(path))

    def isdir(self, path):
        return os.path.isdir(self.path(path))

    def islink(self, path):
        return os.path.islink(self.path(path))

    def listdir(self, path):
        """Sorted entries of a directory; [] if it does not exist."""
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def realpath(self, path):
        """realpath inside the root: links anywhere in the path are followed, and absolute
        targets are re-rooted, so a fake tree behaves like the host it stands in for."""
        if self.root == "/":
            return os.path.realpath(path)
        pending = [c for c in path.split("/") if c]
        current, hops = [], 0
        while pending:
            comp = pending.pop(0)
            if comp == ".":
                continue
            if comp == "..":
                if current:
                    current.pop()
                continue
            candidate = current + [comp]
            real = os.path.join(self.root, *candidate)
            if os.path.islink(real) and hops < 40:
                hops += 1
                target = os.readlink(real)
                if target.startswith("/"):
                    current = []
                pending = [c for c in target.split("/") if c] + pending
                continue
            current = candidate
        return "/" + "/".join(current)

    def readlink(self, path):
        try:
            return os.readlink(self.path(path))
        except OSError:
            return None

    def is_writable(self, path):
        try:
            return bool(os.stat(self.path(path)).st_mode & stat.S_IWUSR)
        except OSError:
            return False

    # -- reads ---------------------------------------------------------------------------
    def read(self, path, default=None):
        """Whole file as text with the trailing newline removed; ``default`` if absent.

        Absent covers ENOENT/ENOTDIR/ENODEV/ENXIO (a vanished device); any other failure
        (EACCES, EIO, ...) raises :class:`KernelFileError`.
        """
        try:
            with open(self.path(path), "rb") as f:
                data = f.read()
        except (IOError, OSError) as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO):
                return default
            raise KernelFileError(path, None, e.errno, action="read")
        text = data.decode("utf-8", "replace")
        return text[:-1] if text.endswith("\n") else text

    @staticmethod
    def missing(path):
        """The error for a file a read needs and the kernel does not have (ENOENT, with its hint)."""
        return KernelFileError(path, None, errno.ENOENT, action="read")

    def read_bytes(self, path, default=None):
        try:
            with open(self.path(path), "rb") as f:
                return f.read()
        except (IOError, OSError) as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO):
                return default
            raise KernelFileError(path, None, e.errno, action="read")

    def read_attrs(self, directory, names):
        """{name: stripped text or None} for several small sysfs attributes in one directory."""
        out = {}
        for name in names:
            value = self.read(directory.rstrip("/") + "/" + name)
            out[name] = value.strip() if value is not None else None
        return out

    # -- writes --------------------------------------------------------------------------
    def write(self, path, value):
        """Write one line to a kernel pseudo-file in place with a single ``write()``.

        The kernel answers per write, so a refused value surfaces here as its errno.
        """
        data = value if value.endswith("\n") else value + "\n"
        raw = data.encode("utf-8")
        try:
            fd = os.open(self.path(path), os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except (IOError, OSError) as e:
            raise KernelFileError(path, value, e.errno)
        try:
            try:
                written = os.write(fd, raw)
            except (IOError, OSError) as e:
                raise KernelFileError(path, value, e.errno)
            if written != len(raw):
                # A pseudo-file that takes part of a line would mis-parse the rest: refuse.
                raise KernelFileError(path, value, errno.EIO)
        finally:
            os.close(fd)

    def write_lines(self, path, lines):
        """One ``write()`` per line, in order (the kernel handles one device per write)."""
        for line in lines:
            self.write(path, line)

    def atomic_write(self, path, content, mode=0o644):
        """Replace a configuration file atomically and durably: temp file, fsync, rename, fsync of the directory
        (and of the parents of directories made for it). After a power cut the file is the old or the new one,
        never empty or partial: the rename is only on disk once its directory is."""
        real = self.path(path)
        directory = os.path.dirname(real)
        made = []
        try:
            top = directory
            while not os.path.isdir(top):
                made.append(top)
                top = os.path.dirname(top)
            if made:
                os.makedirs(directory, 0o755)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(real), dir=directory)
        except (IOError, OSError) as e:
            raise KernelFileError(path, None, e.errno, action="create")
        try:
            with os.fdopen(fd, "wb") as f:
                # bytes as they are (a user's file put back byte for byte), text as UTF-8
                f.write(content if isinstance(content, bytes) else content.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.rename(tmp, real)
        except (IOError, OSError) as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise KernelFileError(path, None, e.errno, action="replace")
        for d in [directory] + [os.path.dirname(m) for m in made]:
            _sync_dir(path, d, "replace")

    def stat(self, path):
        """``os.stat`` of a host file (its mode, its modification time), or None where there is none."""
        try:
            return os.stat(self.path(path))
        except (IOError, OSError):
            return None

    def remove(self, path):
        """Remove a file, durably (its directory fsynced: a purge is not undone by a power cut); absent is fine."""
        real = self.path(path)
        try:
            os.unlink(real)
        except (IOError, OSError) as e:
            if e.errno != errno.ENOENT:
                raise KernelFileError(path, None, e.errno, action="remove")
            return
        _sync_dir(path, os.path.dirname(real), "remove")

    def mkdir(self, path, mode=0o755):
        try:
            os.mkdir(self.path(path), mode)
        except (IOError, OSError) as e:
            if e.errno != errno.EEXIST:
                raise KernelFileError(path, None, e.errno, action="create directory")

    def rmdir(self, path):
        """Remove an empty directory (a cgroup: the kernel refuses with EBUSY while it has members)."""
        try:
            os.rmdir(self.path(path))
        except (IOError, OSError) as e:
            if e.errno != errno.ENOENT:
                raise KernelFileError(path, None, e.errno, action="remove directory")


def _sync_dir(path, directory, action):
    """fsync a directory, so that the names a rename, unlink or mkdir changed in it are on disk. A filesystem
    that cannot sync a directory (EINVAL: some pseudo and network filesystems) has nothing to make durable."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except (IOError, OSError) as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise KernelFileError(path, None, e.errno, action=action)
