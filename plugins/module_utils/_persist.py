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

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._reconcile import Setting

STAMP = "Managed by Ansible (aiinfra.io_isolation)"


def stamped(body, owner, comment="#"):
    """``body`` with the managed-file stamp on top; ``owner`` names the module/role that wrote it."""
    header = "%s %s: %s. Local edits will be overwritten.\n" % (comment, STAMP, owner)
    return header + body if body.endswith("\n") or not body else header + body + "\n"


def is_managed(content):
    """True if ``content`` (a file's text, or None when absent) carries this collection's stamp."""
    return content is not None and STAMP in content.split("\n", 2)[0]


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
