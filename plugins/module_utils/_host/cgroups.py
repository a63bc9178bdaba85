# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Cgroup names: systemd unit names and cgroupfs paths, validated and mapped to directories.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroup_knobs import find, fresh_value
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import CGROUP_FILES
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT, KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import CodecSetting, Directory, Setting
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.unit_names import validate_unit_name

UNIT_SUFFIXES = (".slice", ".service", ".scope")
# A unit name followed by anything but a path separator ("inference.slice; touch x") was meant as a unit.
_UNIT_LIKE_RE = re.compile(r"^[^/]*\.(slice|service|scope)(?![A-Za-z0-9/])")
# Whitespace and shell metacharacters: no unit, and no group this collection manages, is named so.
_SHELL_RE = re.compile(r"[\s;|&$`'\"<>(){}*?!#]")


class CgroupNameError(ValueError):
    pass


def is_unit_name(name):
    return "/" not in name and name.endswith(UNIT_SUFFIXES)


def slice_path(name):
    """'ai-inference.slice' -> 'ai.slice/ai-inference.slice' (systemd nests slices by dashes)."""
    if name == "-.slice":
        return ""
    stem = name[:-len(".slice")]
    parts = stem.split("-")
    return "/".join("-".join(parts[:i + 1]) + ".slice" for i in range(len(parts)))


def expected_cgroup(unit, slice_name):
    """The ``ControlGroup`` of ``unit`` once it runs in ``slice_name``."""
    rel = slice_path(slice_name)
    return "/%s%s" % (rel + "/" if rel else "", unit)


def resolve(name, root=CGROUP_ROOT):
    """Map a unit name or a path below the cgroup root to an absolute cgroupfs directory.

    Slices map by systemd's dash nesting; services and scopes without a slice default to
    ``system.slice`` (where systemd puts them unless ``Slice=`` says otherwise); a path is taken
    relative to the root (a leading ``/sys/fs/cgroup`` is accepted). Raises CgroupNameError.
    """
    if not name or not name.strip():
        raise CgroupNameError("cgroup name is empty")
    raw = name.strip()
    if raw.startswith(root + "/"):
        raw = raw[len(root) + 1:]
    elif raw == root:
        raw = ""
    if is_unit_name(raw) or (_UNIT_LIKE_RE.match(raw) and _SHELL_RE.search(raw)):
        problems = validate_unit_name(raw)
        if problems:
            raise CgroupNameError("; ".join(problems))
        rel = slice_path(raw) if raw.endswith(".slice") else "system.slice/" + raw
        return (root + "/" + rel).rstrip("/")
    parts = [p for p in raw.strip("/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise CgroupNameError("cgroup path %r contains '..'; give a path below %s" % (name, root))
    if raw.startswith("/") and not name.strip().startswith(root):
        raise CgroupNameError("cgroup path %r is outside %s; give it relative to the cgroup root "
                              "(e.g. 'system.slice/foo.service' or 'workloads/inference')" % (name, root))
    for p in parts:
        if p.startswith("cgroup.") or _SHELL_RE.search(p):
            raise CgroupNameError("cgroup path component %r is not a valid group name (whitespace and shell "
                                  "metacharacters are refused)" % p)
    return (root + "/" + "/".join(parts)).rstrip("/") if parts else root


# ---------------------------------------------------------------------------------------------
# cgroupfs manager: the group directory, controllers in the ancestors, the group's files
# ---------------------------------------------------------------------------------------------

def controller_of(filename):
    """'io.max' -> 'io', 'memory.oom.group' -> 'memory'."""
    return filename.split(".", 1)[0]


def controllers(fs, directory, name="cgroup.controllers"):
    return (fs.read(directory + "/" + name) or "").split()


def ancestors(path, top):
    """Directories from ``top`` down to the parent of ``path`` (both absolute; ``top`` is an ancestor)."""
    rel = [p for p in path[len(top):].split("/") if p]
    return [top + "".join("/" + p for p in rel[:i]) for i in range(len(rel))]


def has_members(fs, directory):
    """True when the group has processes of its own."""
    return bool((fs.read(directory + "/cgroup.procs") or "").strip())


def child_groups(fs, directory):
    return sorted(e for e in fs.listdir(directory) if fs.isdir(directory + "/" + e))


class GroupDir(Directory):
    """A cgroup directory: created (mkdir) or removed (rmdir, only when it has no members)."""

    order = 1

    def __init__(self, path, present=True, order=None):
        super(GroupDir, self).__init__("cgroup %s" % path, path, present, order)


class SubtreeControl(Setting):
    """Controllers a parent group must enable for its children (``cgroup.subtree_control``).

    Desired: ``needed`` is a subset of what is enabled; only the missing ones are written, in
    one ``write()`` ("+io +memory"), and only those are taken back on restore.
    """

    order = 2

    def __init__(self, directory, needed, root=CGROUP_ROOT, order=None):
        super(SubtreeControl, self).__init__(directory + "/cgroup.subtree_control", sorted(needed), order)
        self.directory = directory
        self.root = root

    def read(self, fs):
        if not fs.isdir(self.directory):   # created earlier in this call
            return []
        return sorted(controllers(fs, self.directory, "cgroup.subtree_control"))

    def differs(self, current):
        return not set(self.desired) <= set(current)

    def write(self, fs, value, current):
        missing = [c for c in value if c not in (current or [])]
        if missing:
            fs.write(self.key, " ".join("+" + c for c in missing))

    def restore(self, fs, previous):
        added = [c for c in self.desired if c not in (previous or [])]
        if added and fs.isdir(self.directory):
            fs.write(self.key, " ".join("-" + c for c in added))


class GroupFile(CodecSetting):
    """A file of a cgroup the cgroupfs manager writes (optionally one device's line of it).

    While the group does not exist yet, or its controller is still off in the parent, the file
    reads as the kernel's default for a new group, so a call that creates the group plans (and
    check mode reports) exactly what it will write.
    """

    order = 10

    def __init__(self, directory, name, desired, device=None, order=None):
        key = "%s[%s]" % (name, device) if device else name
        super(GroupFile, self).__init__(key, directory + "/" + name, CGROUP_FILES[name], desired, device=device,
                                        order=order)
        self.directory = directory
        self.name = name

    def read(self, fs):
        text = fs.read(self.path)
        if text is None:
            parent = self.directory.rsplit("/", 1)[0]
            pending = not fs.isdir(self.directory) or controller_of(self.name) not in controllers(
                fs, parent, "cgroup.subtree_control")
            if not pending:
                raise KernelFileError(self.path, None, 2, action="read")
            return fresh_value(self.name, self.device)
        parsed = self.codec.parse(text)
        return self.codec.lookup(parsed, self.device) if self.device else parsed

    def restore(self, fs, previous):
        if find(self.name).neutral is None and previous == self.codec.absent:
            return      # no write puts the line back (io.low); it goes with the group
        super(GroupFile, self).restore(fs, previous)
