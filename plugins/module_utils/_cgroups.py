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

CGROUP_ROOT = "/sys/fs/cgroup"
UNIT_SUFFIXES = (".slice", ".service", ".scope")
# systemd unit names: ASCII letters, digits, ":-_.\" and "@" for instances; at most 255 chars.
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]+$")


class CgroupNameError(ValueError):
    pass


def is_unit_name(name):
    return "/" not in name and name.endswith(UNIT_SUFFIXES)


def validate_unit_name(name):
    """Problems with a systemd unit name (slice/service/scope); [] when valid."""
    problems = []
    if len(name) > 255:
        problems.append("unit name %r is longer than 255 characters" % name)
    if not _UNIT_RE.match(name):
        problems.append("unit name %r has characters systemd does not allow (use letters, digits, ':-_.\\@')" % name)
    if name.endswith(".slice"):
        stem = name[:-len(".slice")]
        if stem != "-" and (not stem or stem.startswith("-") or stem.endswith("-") or "--" in stem):
            problems.append("slice name %r is invalid: dashes separate parent slices, so they cannot lead, "
                            "trail or repeat (e.g. 'inference.slice', 'ai-inference.slice')" % name)
        if "@" in name:
            problems.append("slice name %r cannot be a template instance" % name)
    return problems


def slice_path(name):
    """'ai-inference.slice' -> 'ai.slice/ai-inference.slice' (systemd nests slices by dashes)."""
    if name == "-.slice":
        return ""
    stem = name[:-len(".slice")]
    parts = stem.split("-")
    return "/".join("-".join(parts[:i + 1]) + ".slice" for i in range(len(parts)))


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
    if is_unit_name(raw):
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
        if p.startswith("cgroup.") or "\n" in p:
            raise CgroupNameError("cgroup path component %r is not a valid group name" % p)
    return (root + "/" + "/".join(parts)).rstrip("/") if parts else root
