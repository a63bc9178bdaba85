# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""systemd unit names and the unit patterns the roles list: which are valid, and why not.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Pure checks in a file of their own (cgroups.py and placement.py use them and re-export them): the roles' planning
filters check unit names on the controller, where ansible-core compiles the collection's Python from source in
every worker process (one per task and host), and placement.py with what it imports took about 60 ms there each
time (make bench-fleet, benchmarks/fleet/README.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# systemd unit names: ASCII letters, digits, ":-_.\" and "@" for instances; at most 255 chars.
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]+$")
# Unit types whose processes Slice= could place, besides services; the placement module places services only.
OTHER_EXEC_TYPES = (".socket", ".mount", ".swap")
_GLOB = re.compile(r"[*?\[]")
_PATTERN = re.compile(r"^[A-Za-z0-9:_.\\@*?\[\]!-]+$")


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


def is_pattern(text):
    """True when a unit the roles list is a pattern (it has a shell wildcard), not a name."""
    return bool(_GLOB.search(text))


def unit_problem(text):
    """Why ``text`` is neither a service name nor a pattern over service names this module takes, or None: what the
    roles check of a list of units before they ask the host."""
    text = (text or "").strip()
    return pattern_problem(text) if is_pattern(text) else service_problem(text)


def service_problem(name):
    """Why ``name`` is no service name this module can place, or None."""
    problems = validate_unit_name(name)
    if problems:
        return "; ".join(problems)
    if "." not in name:
        return "%r has no unit type: give the full name (%s.service)" % (name, name)
    if not name.endswith(".service"):
        kind = name[name.rindex("."):]
        if kind in OTHER_EXEC_TYPES:
            return ("%s is a %s unit: this module places services only (Slice= of a %s places its short-lived "
                    "helper processes)" % (name, kind[1:], kind[1:]))
        return ("%s is a %s unit, which runs no processes of its own: Slice= means nothing there. Place the services "
                "it starts" % (name, kind[1:]))
    if name.endswith("@.service"):
        return ("%s is a template: name an instance (%s) or give a pattern (%s)"
                % (name, name.replace("@.", "@NAME."), name.replace("@.", "@*.")))
    return None


def pattern_problem(pattern):
    if not _PATTERN.match(pattern):
        return ("pattern %r has characters no unit name has (a pattern is a unit name with the shell wildcards "
                "* ? [...])" % pattern)
    if not pattern.endswith(".service"):
        return "pattern %r must end in .service (it matches services, such as vllm-*.service)" % pattern
    return None
