# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Persistence layer: configuration files this collection owns under /etc.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Each ecosystem's own mechanism carries a setting across reboots (sysctl.d, systemd drop-ins,
udev rules, modprobe.d, tmpfiles.d). Whatever the mechanism, the file is:

* stamped as managed on its first lines, so operators see who owns it and the collection never
  overwrites a file it did not write (unless told to adopt it);
* written atomically (temp file, fsync, rename) through the kernel file accessor;
* a :class:`ManagedFile` setting, so it goes through the same reconcile engine as kernel
  files: planned, shown as a diff, verified, and restored if a later step of the call fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._reconcile import Setting

STAMP = "Managed by Ansible (aiinfra.io_isolation)"


def stamped(body, owner, comment="#"):
    """``body`` with the managed-file stamp on top; ``owner`` names the module/role that wrote it."""
    header = "%s %s: %s. Local edits will be overwritten.\n" % (comment, STAMP, owner)
    return header + body if body.endswith("\n") or not body else header + body + "\n"


def is_managed(content):
    """True if ``content`` (a file's text, or None when absent) carries this collection's stamp.

    The stamp is on the first line, or on the second after a ``#!`` line (scripts).
    """
    if content is None:
        return False
    head = content.split("\n", 2)
    return STAMP in head[0] or (head[0].startswith("#!") and len(head) > 1 and STAMP in head[1])


class ManagedFile(Setting):
    """A whole configuration file with known content (``None`` = the file must not exist)."""

    order = 1000  # persistence after the live kernel writes it describes

    def __init__(self, path, content, mode=0o644, adopt=False, order=None):
        super(ManagedFile, self).__init__(path, content, order)
        self.path = path
        self.mode = mode
        self.adopt = adopt

    def read(self, fs):
        data = fs.read_bytes(self.path)
        return None if data is None else data.decode("utf-8", "replace")

    def validate(self, current):
        if current is not None and not is_managed(current) and not self.adopt:
            return ["%s exists and is not managed by aiinfra.io_isolation; move it away or set "
                    "adopt to let the collection take it over" % self.path]
        return []

    def write(self, fs, value, current):
        if value is None:
            fs.remove(self.path)
        else:
            fs.atomic_write(self.path, value, self.mode)


class PersistError(ValueError):
    pass


_UDEV_SAFE = re.compile(r"^[A-Za-z0-9._:+@-]+$")


def _udev_value(value, what, device):
    value = (value or "").strip()
    if not _UDEV_SAFE.match(value):
        raise PersistError("the %s of %s (%r) has characters a udev rule cannot match safely; "
                           "use persist=false and re-apply at boot another way" % (what, device, value))
    return value


def udev_match(record):
    """udev match keys that select a whole disk by its stable identity, never by name or MAJ:MIN.

    ``record`` is a resolved device (``_devices.BlockDevice``). WWN: the ``wwid`` attribute (on the
    NVMe namespace itself, on the parent for SCSI: ``ATTRS`` searches both). Serial: virtio's
    ``serial`` attribute on the disk. Otherwise the by-path identity (``ID_PATH``).
    """
    base = 'SUBSYSTEM=="block", ENV{DEVTYPE}=="disk"'
    if record.stable_id_source == "wwn" and record.wwid:
        return base + ', ATTRS{wwid}=="%s"' % _udev_value(record.wwid, "WWN", record.name)
    if record.stable_id_source == "serial" and record.kind == "virtio":
        return base + ', ATTR{serial}=="%s"' % _udev_value(record.serial, "serial", record.name)
    if record.stable_id_source == "by-path" and record.by_path:
        link = record.by_path[0]
        return base + ', ENV{ID_PATH}=="%s"' % _udev_value(link, "by-path identity", record.name)
    raise PersistError("%s has no identity a udev rule can match (stable id: %s%s); use persist=false"
                       % (record.name, record.stable_id, "; " + record.stable_id_note if record.stable_id_note else ""))


def slug(stable_id):
    """A file-name-safe form of a stable identity."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stable_id).strip("_")[:120]
