# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Services into slices: one ``Slice=`` drop-in per unit, and the restart that moves a running one.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

:func:`part` is the placement module behind its argument spec:

1. the request's own form: each entry a service name or a pattern (shell-style, over service names) and the
   slice; a unit that is no service (``Slice=`` places a service's processes; a target or timer has none), a
   template without an instance, a slice name systemd refuses are refused before the host is asked;
2. the host: patterns are matched against every service systemd has loaded or installed (``list-units --all`` and
   ``list-unit-files``, JSON where the host's systemd prints it), then every unit is asked of ``systemctl show``:
   a name systemd does not know (``LoadState=not-found``) or a masked unit is refused, an alias is placed under its
   own name. A host-critical unit (:data:`HOST_CRITICAL`: remote access, the bus, systemd's own services, the
   container runtime, logins) is refused unless its entry allows it, which the training tenant's never does. A
   drop-in read after this module's that sets ``Slice=`` would win, and is refused too;
3. the settings, in this order: each unit's drop-in (a stamped :class:`_persist.ManagedFile` with
   ``[Service]`` / ``Slice=``), one ``daemon-reload`` when any drop-in changed, and per unit its
   :class:`Placement`: the ``Slice=`` systemd loaded and where the unit runs (``ControlGroup``). systemd moves a
   running service only when it starts it again: a unit running outside its slice is restarted only with
   ``restart``, and otherwise listed in ``restart_required`` (nothing that runs is touched, and ``changed`` says
   only what was written).

Two entry options serve the host tier (the io_baseline role's ``hostcritical.slice``): ``optional`` - a name
systemd does not know is skipped (listed in ``unmatched``), and a unit another entry of the call lists goes where
that entry says (a tenant's list wins over the host tier's default list); ``at_next_start`` - the unit is never
restarted, whatever ``restart`` says: running outside its slice it is listed in ``next_start`` (it moves at its next
start, such as the next boot), not in ``restart_required``. A remote-access daemon, the journal or the container
runtime restarted by a rollout could cut an operator off or stop every container.

``state: absent`` removes the drop-ins of the units named (patterns match the units that have one); ``exclusive``
removes those of every unit the request does not list. A unit then goes back to the slice its own files give; a
running one moves at its next start, or now with ``restart``. ``purge`` removes every drop-in of this module with
``daemon-reload`` and never restarts anything.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re
from collections import OrderedDict

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import expected_cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.unit_names import (
    pattern_problem as _pattern_problem, service_problem as _service_problem, validate_unit_name,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    PLACEMENT_DROPIN_NAME, SYSTEMD_UNIT_DIR, ManagedFile, owned_units, owner, stamped,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, RequestError, Setting, run_part

OWNER = owner("placement")
# Units whose processes must never run under a throttled tenant's caps (io.max, memory.high): if they stall, the
# host stalls with them. (shell-style pattern, why).
HOST_CRITICAL = (
    ("ssh.service", "remote access"),
    ("sshd.service", "remote access"),
    ("dbus.service", "the system bus"),
    ("dbus-broker.service", "the system bus"),
    ("systemd-*.service", "one of systemd's own services (journald, logind, udevd, networkd, resolved, ...)"),
    ("containerd.service", "the container runtime"),
    ("docker.service", "the container runtime"),
    ("crio.service", "the container runtime"),
    ("podman.service", "the container runtime"),
    ("kubelet.service", "the kubelet"),
    ("getty@*.service", "console logins"),
    ("serial-getty@*.service", "console logins"),
    ("user@*.service", "a user's service manager"),
    ("user-runtime-dir@*.service", "a user's runtime directory"),
    ("polkit.service", "authorisation"),
    ("NetworkManager.service", "the network"),
    ("networking.service", "the network"),
    ("chrony.service", "the clock"),
    ("chronyd.service", "the clock"),
)
# What the placement reads of each unit (``systemctl show``).
SHOW = ("Id", "LoadState", "ActiveState", "ControlGroup", "Slice", "FragmentPath", "DropInPaths")
PLACED = ("Slice", "ControlGroup")
_DROPIN_RE = re.compile(r"^%s/([^/]+\.service)\.d/%s$" % (re.escape(SYSTEMD_UNIT_DIR), re.escape(PLACEMENT_DROPIN_NAME)))


def dropin_path(unit):
    """``/etc/systemd/system/<unit>.d/90-aiinfra-io-isolation-slice.conf``."""
    return "%s/%s.d/%s" % (SYSTEMD_UNIT_DIR, unit, PLACEMENT_DROPIN_NAME)


def render(slice_name):
    """The stamped drop-in that puts a service in ``slice_name``."""
    return stamped("[Service]\nSlice=%s\n" % slice_name, OWNER)


def critical(unit):
    """Why ``unit`` is host-critical (:data:`HOST_CRITICAL`), or None."""
    for pattern, why in HOST_CRITICAL:
        if fnmatch.fnmatchcase(unit, pattern):
            return why
    return None


def default_slice(unit):
    """The slice systemd gives a service whose files set none: an instance of a template goes to the template's own
    ``system-<prefix>.slice`` (dashes in the prefix escaped), every other service to ``system.slice``."""
    prefix, at, _rest = unit.partition("@")
    if at:
        return "system-%s.slice" % prefix.replace("-", "\\x2d")
    return "system.slice"


def _slice_lines(text):
    """The values of the ``Slice=`` assignments in a unit file's text, in order (an empty one resets it)."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith(("#", ";", "[")):
            continue
        key, sep, value = line.partition("=")
        if sep and key.strip() == "Slice":
            out.append(value.strip())
    return out


def loaded_slices(fs, info):
    """[(file, Slice= value)] of a unit's fragment and drop-ins other than this module's, in the order systemd reads
    them (``FragmentPath``, then ``DropInPaths``, which systemd lists sorted by file name)."""
    files = [info.get("FragmentPath")] + (info.get("DropInPaths") or "").split()
    out = []
    for path in files:
        if not path or path == "/dev/null" or path.rsplit("/", 1)[-1] == PLACEMENT_DROPIN_NAME:
            continue
        out.extend((path, value) for value in _slice_lines(fs.read(path)))
    return out


def later_slices(fs, info):
    """[(drop-in, Slice= value)] of the drop-ins systemd reads after this module's (their file names sort after it):
    the last of them wins over this module's."""
    return [(path, value) for path, value in loaded_slices(fs, info)
            if path != info.get("FragmentPath") and path.rsplit("/", 1)[-1] > PLACEMENT_DROPIN_NAME]


def own_slice(fs, unit, info):
    """The slice a unit's own files give it, without this module's drop-in."""
    slices = [value for _path, value in loaded_slices(fs, info)]
    return (slices[-1] if slices else "") or default_slice(unit)


# ---------------------------------------------------------------------------------------------
# The settings
# ---------------------------------------------------------------------------------------------

class _Batch:
    """What the settings of one call share: the runner and whether this call reloaded systemd already."""

    def __init__(self, runner):
        self.runner = runner
        self.reloaded = False

    def reload(self):
        self.runner.run(sd.daemon_reload_argv())
        self.reloaded = True


class DropIn(ManagedFile):
    """A unit's drop-in; removing it also removes the ``<unit>.d`` directory when that leaves it empty. Its restore
    reloads systemd (a later setting of the call failed after the reload)."""

    def __init__(self, unit, content, batch, adopt=False):
        super(DropIn, self).__init__(dropin_path(unit), content, adopt=adopt, order=10)
        self.unit = unit
        self.batch = batch

    def write(self, fs, value, current):
        super(DropIn, self).write(fs, value, current)
        directory = self.path.rsplit("/", 1)[0]
        if value is None and fs.isdir(directory) and not fs.listdir(directory):
            fs.rmdir(directory)

    def restore(self, fs, previous):
        self.write(fs, previous, None)
        self.batch.reload()


class Reload(Setting):
    """``systemctl daemon-reload`` once, after the drop-ins: its value is the drop-ins whose file differs from what
    this call wants (systemd has not loaded what will be there)."""

    order = 20

    def __init__(self, files, batch):
        super(Reload, self).__init__("daemon-reload", [])
        self.files = list(files)
        self.batch = batch

    def read(self, fs):
        return sorted(f.path for f in self.files if f.read(fs) != f.desired)

    def write(self, fs, value, current):
        self.batch.reload()

    def restore(self, fs, previous):
        """Each drop-in's restore reloads once it is back."""


class Placement(Setting):
    """Where one service is placed: the ``Slice=`` systemd loaded for it and the ``ControlGroup`` it runs in.

    Its value is ``{"slice": the loaded Slice=, "cgroup": ControlGroup or None while it is not running}``. It
    differs when systemd has not loaded ``slice`` (the drop-ins were written since, or a previous call stopped
    before the reload), and, with ``restart``, when the unit runs outside ``slice``. Writing it reloads systemd if
    no earlier setting of the call did and systemd still shows another slice, then restarts the unit if ``restart``
    is set and it runs elsewhere. Without ``restart`` a running unit stays where it is (its cgroup is the desired
    one, whatever it is). A restart cannot be taken back: restoring does nothing.
    """

    order = 30

    def __init__(self, unit, slice_name, batch, restart):
        self.unit = unit
        self.slice = slice_name
        self.batch = batch
        self.restart = restart
        self.expected = expected_cgroup(unit, slice_name)
        super(Placement, self).__init__(unit, {"slice": slice_name, "cgroup": None})

    def _show(self):
        info = sd.show_units(self.batch.runner, [self.unit], PLACED)[self.unit]
        return {"slice": info["Slice"] or None, "cgroup": info["ControlGroup"] or None}

    def outside(self, value):
        """True when the unit runs, and not in its slice."""
        return value["cgroup"] is not None and value["cgroup"] != self.expected

    def read(self, fs):
        value = self._show()
        # what a run leaves: the unit in its slice when it is restarted, else where it runs now
        self.desired["cgroup"] = self.expected if self.restart and value["cgroup"] is not None else value["cgroup"]
        return value

    def differs(self, current):
        return current["slice"] != self.slice or (self.restart and self.outside(current))

    def write(self, fs, value, current):
        if not self.batch.reloaded and self._show()["slice"] != self.slice:
            self.batch.reload()
        if self.restart and self.outside(current):
            self.batch.runner.run(sd.restart_argv(self.unit))

    def restore(self, fs, previous):
        """A restart is not undone; the drop-ins are restored, and the unit follows them at its next start."""


# ---------------------------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------------------------

class Target:
    """One unit this call places (``slice``) or takes out (``slice`` None: back to its own files' slice)."""

    def __init__(self, unit, slice_name, label, matched_by, info, at_next_start=False):
        self.unit = unit
        self.slice = slice_name
        self.label = label
        self.matched_by = matched_by
        self.info = info
        self.at_next_start = at_next_start

    @property
    def loaded(self):
        return (self.info or {}).get("LoadState") not in (None, "", "not-found")


def _slice_problem(name):
    if not name.endswith(".slice"):
        return "%r is not a slice name (such as inference.slice)" % name
    if name == "-.slice":
        return "-.slice is the root slice; services run in a slice below it"
    problems = validate_unit_name(name)
    return "; ".join(problems) if problems else None


class Request:
    def __init__(self, params, fs, runner):
        self.fs, self.runner = fs, runner
        self.state = params.get("state") or "present"
        self.restart = bool(params.get("restart"))
        self.exclusive = bool(params.get("exclusive"))
        self.adopt = bool(params.get("adopt"))
        self.errors, self.warnings = [], []
        self.unmatched = []
        self.entries = self._entries(params.get("units") or [])

    def _entries(self, units):
        """[(label, name, pattern, slice, allow_critical, optional, at_next_start)] of the well-formed entries; every problem in ``errors``."""
        out = []
        for index, entry in enumerate(units):
            name, pattern = entry.get("name"), entry.get("pattern")
            given = name if name is not None else pattern
            label = entry.get("label") or "units[%d]" % index
            if (name is None) == (pattern is None):
                self.errors.append("units[%d]: give one of name and pattern" % index)
                continue
            problem = _service_problem(name.strip()) if name is not None else _pattern_problem(pattern.strip())
            slice_name = (entry.get("slice") or "").strip() or None
            if self.state == "present" and slice_name is None:
                problem = problem or "%s: no slice: give the slice to place it in (such as inference.slice)" % given
            elif slice_name is not None:
                problem = problem or _slice_problem(slice_name)
            if problem:
                self.errors.append("%s: %s" % (label, problem))
                continue
            out.append((label, name.strip() if name is not None else None,
                        pattern.strip() if pattern is not None else None, slice_name,
                        bool(entry.get("allow_critical")), bool(entry.get("optional")),
                        bool(entry.get("at_next_start"))))
        return out

    # -- what the host has ------------------------------------------------------------------------
    def ours(self):
        """The units that have this module's drop-in, from the files."""
        out = []
        for entry in sorted(self.fs.listdir(SYSTEMD_UNIT_DIR) or []):
            if entry.endswith(".service.d") and self.fs.exists(dropin_path(entry[:-len(".d")])):
                out.append(entry[:-len(".d")])
        return out

    def targets(self):
        """{unit: Target} this call places or takes out, every refusal in ``errors``."""
        if self.state == "absent":
            return self._absent_targets()
        services = None
        wanted = []     # (name as listed or matched, label, matched_by, slice, allow_critical, optional, at_next_start)
        # an optional entry's units come last: a unit another entry lists goes where that entry says
        for label, name, pattern, slice_name, allow, optional, deferred in sorted(self.entries, key=lambda e: e[5]):
            if name is not None:
                wanted.append((name, label, name, slice_name, allow, optional, deferred))
                continue
            if services is None:
                services = sd.list_services(self.runner)
            found = sorted(n for n, i in services.items() if fnmatch.fnmatchcase(n, pattern)
                           and "not-found" not in (i["load"], i["file"]) and "masked" not in (i["load"], i["file"]))
            if not found:
                self.unmatched.append(pattern)
                self.warnings.append("%s: pattern %r matches no service on this host: nothing placed for it"
                                     % (label, pattern))
            wanted.extend((n, label, pattern, slice_name, allow, optional, deferred) for n in found)
        shown = self._show(sorted(set(w[0] for w in wanted)))
        targets = OrderedDict()
        for name, label, matched_by, slice_name, allow, optional, deferred in wanted:
            info = shown[name]
            where = "%s (matched by %r)" % (name, matched_by) if matched_by != name else name
            load = info["LoadState"]
            if optional and load == "not-found":
                self.unmatched.append(name)     # not on this host: nothing to protect
                continue
            if load != "loaded":
                self.errors.append(self._not_loaded(label, where, load))
                continue
            unit = info["Id"] or name
            if optional and unit in targets:
                continue                        # another entry of the call places it
            if _service_problem(unit):
                self.errors.append("%s: %s is an alias of %s, which is no service" % (label, name, unit))
                continue
            why = critical(unit) or critical(name)
            if why and not allow:
                self.errors.append(
                    "%s: %s is host-critical (%s): it must not run under a throttled tenant's caps (io.max, "
                    "memory.high), where it could stall the host. Remove it%s"
                    % (label, where, why, " or narrow the pattern" if matched_by != name else ""))
                continue
            earlier = targets.get(unit)
            if earlier is not None and earlier.slice != slice_name:
                self.errors.append("%s: %s is also placed in %s by %s; a unit runs in one slice: list it once"
                                   % (label, where, earlier.slice, earlier.label))
                continue
            later = later_slices(self.fs, info)
            if later:
                path, value = later[-1]
                self.errors.append(
                    "%s: %s sets Slice=%s for %s and systemd reads it after this module's drop-in (%s), so it would "
                    "win: remove that line (or the file) first" % (label, path, value, unit, PLACEMENT_DROPIN_NAME))
                continue
            if earlier is None:
                targets[unit] = Target(unit, slice_name, label, matched_by, info, deferred)
        if self.exclusive:
            self._add_removals(targets, [u for u in self.ours() if u not in targets], "exclusive", "exclusive")
        return targets

    def _not_loaded(self, label, where, load):
        if load == "not-found":
            return ("%s: %s is not a unit on this host (systemd: LoadState=not-found): install it first, or take it "
                    "out of the list" % (label, where))
        if load == "masked":
            return "%s: %s is masked (linked to /dev/null): it cannot run, so it has no slice to go to" % (label, where)
        return "%s: systemd cannot load %s (LoadState=%s): fix the unit first" % (label, where, load)

    def _show(self, names):
        return sd.show_units(self.runner, names, SHOW)

    def _absent_targets(self):
        """The units with this module's drop-in that the entries match, and the units named (a named unit whose
        drop-in is gone already is still checked, and moved with ``restart``, when systemd knows it)."""
        targets = OrderedDict()
        ours = self.ours()
        for label, name, pattern, _slice, _allow, _optional, _deferred in self.entries:
            if name is not None:
                self._add_removals(targets, [name] if name not in targets else [], label, name,
                                   keep=lambda unit, info: unit in ours or info.get("LoadState") == "loaded")
                continue
            matched = [u for u in ours if fnmatch.fnmatchcase(u, pattern)]
            self._add_removals(targets, [u for u in matched if u not in targets], label, pattern)
        return targets

    def _add_removals(self, targets, units, label, matched_by, keep=None):
        shown = self._show(units)
        for unit in units:
            if keep is None or keep(unit, shown[unit]):
                targets[unit] = Target(unit, None, label, matched_by, shown[unit])

    # -- the settings -----------------------------------------------------------------------------
    def settings(self, targets):
        batch = _Batch(self.runner)
        files = [DropIn(t.unit, render(t.slice) if t.slice else None, batch, adopt=self.adopt)
                 for t in targets.values()]
        placements = []
        for t in targets.values():
            if not t.loaded:
                continue        # the unit is gone: only its drop-in is removed
            slice_name = t.slice or own_slice(self.fs, t.unit, t.info)
            placements.append(Placement(t.unit, slice_name, batch, self.restart and not t.at_next_start))
        return files + ([Reload(files, batch)] if files else []) + placements, placements


def _report(req, targets, placements):
    """The module's result from the engine's."""
    def report(result, check_mode):
        values, before, after = result["values"], result["diff"]["before"], result["diff"]["after"]
        units, restart_required, restarted, next_start = OrderedDict(), [], [], []
        by_unit = dict((p.unit, p) for p in placements)
        for t in targets.values():
            entry = {"slice": t.slice, "state": "present" if t.slice else "absent", "dropin": dropin_path(t.unit),
                     "matched_by": t.matched_by, "label": t.label, "cgroup": None, "loaded_slice": None}
            p = by_unit.get(t.unit)
            value = values.get(t.unit)
            if p is not None and value is not None:
                entry.update(slice=p.slice, cgroup=value["cgroup"], loaded_slice=value["slice"])
                moved = (before.get(t.unit) or {}).get("cgroup") != (after.get(t.unit) or {}).get("cgroup") \
                    and t.unit in after
                if p.restart and (moved if not check_mode else p.outside(value)):
                    restarted.append(t.unit)
                elif p.outside(value) and t.at_next_start:
                    next_start.append(t.unit)
                    req.warnings.append(
                        "%s runs in %s, outside %s, until its next start (such as the next boot): it is never "
                        "restarted by this module (at_next_start)" % (t.unit, value["cgroup"], p.slice))
                elif p.outside(value):
                    restart_required.append(t.unit)
                    req.warnings.append(
                        "%s runs in %s, outside %s, until it is restarted: restart it, or set restart (the roles: "
                        "io_isolation_restart_ok)" % (t.unit, value["cgroup"], p.slice))
            units[t.unit] = entry
        return {"changed": result["changed"], "diff": result["diff"], "units": units,
                "restart_required": restart_required, "restarted": restarted, "next_start": next_start,
                "unmatched": list(req.unmatched),
                "warnings": list(req.warnings)}
    return report


# The module's options (AnsibleModule keywords); host_profile checks its placement section with the same.
MODULE_SPEC = {"argument_spec": dict(
    units={"type": "list", "elements": "dict", "default": [], "options": {
        "name": {"type": "str"},
        "pattern": {"type": "str"},
        "slice": {"type": "str"},
        "allow_critical": {"type": "bool", "default": False},
        "optional": {"type": "bool", "default": False},
        "at_next_start": {"type": "bool", "default": False},
        "label": {"type": "str"},
    }, "mutually_exclusive": [("name", "pattern")], "required_one_of": [("name", "pattern")]},
    state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    restart={"type": "bool", "default": False},
    exclusive={"type": "bool", "default": False},
    adopt={"type": "bool", "default": False},
)}


def part(params, fs, runner):
    """The request as an engine part; raises RequestError listing every refusal (nothing written)."""
    req = Request(params, fs, runner)
    if req.errors:
        raise RequestError(req.errors)
    targets = req.targets()
    if req.errors:
        raise RequestError(req.errors)
    settings, placements = req.settings(targets)
    return Part(settings, [], _report(req, targets, placements))


def run(params, fs, runner, check_mode):
    """The module call: the drop-ins, one reload, the placements; the result with each unit and what must restart."""
    return run_part(fs, part(params, fs, runner), check_mode)


def units(owned):
    """The services that have this module's drop-in, from the registry's files."""
    return owned_units(owned, _DROPIN_RE)


def purge(p):
    """purge's step: every drop-in of this module removed (state=absent) and systemd reloaded; nothing restarts."""
    names = units(p.owned)
    if names:
        p.step("placement", lambda: run(
            {"units": [{"name": u} for u in names], "state": "absent", "restart": False, "exclusive": False,
             "adopt": False}, p.fs, p.runner, p.check_mode))
