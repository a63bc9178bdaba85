# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cgroup_boost: a bounded window without a slice's io.max caps, which the host ends by itself.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

A job that lifts caps and restores them at its end leaves them lifted when it is killed (AWX and
ansible-runner end a cancelled or timed-out job that way, and no ``always:`` runs). So the lift
carries its own end, on the host:

1. **The end is scheduled first**: ``systemd-run --on-boot=<uptime at the window's end>`` creates
   the transient timer ``aiinfra-io-isolation-boost-<slice>.timer`` and its oneshot service, which
   runs :func:`end_steps`. A controller that dies after this line has started nothing that can
   outlive the window. Not ``--on-active=<window>``: systemd 252 and 257 re-arm an ``OnActiveSec=``
   timer at every ``daemon-reload`` (counted from the reload; observed in the lab), and the lift
   itself reloads, as may anything else on the host during the window, so the end would drift
   later. ``OnBootSec=`` counts from boot on the monotonic clock, which a reload does not move and a
   change of the wall clock does not either; ``OnCalendar=`` would not survive a reload in the
   second of its end (a one-shot calendar time in the past never elapses).
2. **Then the lift**: the runtime-only drop-in ``/run/systemd/system/<slice>.d/60-aiinfra-io-isolation-boost.conf``
   (sorted after the persistent ``50-aiinfra-io-isolation.conf``, so its values win; rendered by
   ``_systemd.build_plan``, naming each disk by the very path the unit's configuration uses), and
   systemd made to apply it (:func:`reapply_steps`).
3. **The end**, by the timer, by ``state: absent``, by the cgroup module converging the slice, by
   purge, or by a reboot (``/run`` is a tmpfs): the drop-in removed and the unit's io configuration
   applied again, so the persistent caps come back.

How systemd applies a changed drop-in (observed in the lab, docs/kernel-files.md): 252 applies it at
``daemon-reload``, 257 does not - the kernel keeps the old values until the unit is realised again,
which starting any sibling unit does. ``systemctl set-property --runtime <slice> IOAccounting=yes``
re-realises the unit's io settings from its loaded configuration on both, without naming a value:
so neither the lift nor the end (which runs on the host, long after this module has gone) needs to
know the caps. Its runtime control file is removed again, and a last ``daemon-reload`` leaves the
unit's configuration exactly its files.

Every start replaces the unit's window: the old timer is stopped and the new window ends
``seconds`` after this call, whether that is sooner or later than the old end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import math
import re
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import cgroup_knobs as knobs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CGROUP_ROOT, resolve, validate_unit_name
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs import MAX, CodecError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BOOST_DROPIN_NAME, BOOST_UNIT_PREFIX, STAMP, SYSTEMD_RUNTIME_DIR, ManagedFile, owner as owner_of, stamped,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    ModuleError, Reconciler, RequestError, Setting,
)

OWNER = owner_of("cgroup_boost")
IO_MAX = knobs.find("io.max")
# IOReadBandwidthMax -> rbps, ...: the directives that carry io.max, from the knob catalogue
FIELDS = dict((d.name, d.field) for d in IO_MAX.systemd)
LIFT_ALL = dict((d.field, MAX) for d in IO_MAX.systemd)
MAX_SECONDS = 7 * 86400
# set-property of this directive makes systemd apply the unit's io settings from its loaded
# configuration again (252 and 257), whatever the value; the slices this collection caps have it.
REAPPLY = ("IOAccounting", "yes")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_END_RE = re.compile(r"^# Boost window of \S+ ends at (\S+);", re.M)
_TIMER_UNIT_RE = re.compile(r"^Description=.* ends the boost window of (\S+) at ", re.M)
_DROPIN_RE = re.compile(r"^%s/([^/]+)\.d/%s$" % (re.escape(SYSTEMD_RUNTIME_DIR), re.escape(BOOST_DROPIN_NAME)))


def now():
    """The host's clock (seconds since the epoch); tests replace it."""
    return time.time()


def uptime():
    """CLOCK_MONOTONIC, which systemd counts ``OnBootSec=`` on (seconds since boot); tests replace it."""
    return time.monotonic()


class BoostError(ModuleError):
    """The window could not be started as asked; the message says what was done about it."""


# ---------------------------------------------------------------------------------------------
# Names, times
# ---------------------------------------------------------------------------------------------

def unit_problems(unit):
    """Why ``unit`` cannot have a boost window ([] when it can)."""
    if not unit:
        return ["unit is empty: give the slice whose io.max caps to lift, e.g. unit: training.slice"]
    if not unit.endswith(".slice") or "/" in unit:
        return ["unit %r is not a slice: a boost window lifts the io.max caps of a systemd slice (a name ending in "
                ".slice, e.g. training.slice); the workloads of a service inherit its slice's caps" % unit]
    if unit == "-.slice":
        return ["unit '-.slice' is the root slice, which has no io.max; give the slice that holds the caps, e.g. "
                "training.slice"]
    return validate_unit_name(unit)


def dropin_path(unit):
    """``/run/systemd/system/<slice>.d/60-aiinfra-io-isolation-boost.conf``."""
    return "%s/%s.d/%s" % (SYSTEMD_RUNTIME_DIR, unit, BOOST_DROPIN_NAME)


def unit_base(unit):
    """``aiinfra-io-isolation-boost-<slice name without .slice>``: the timer's and its service's name.

    Characters other than letters, digits, '-' and '_' become '_' (a '.' would make systemd-run
    read the rest as a unit type).
    """
    return BOOST_UNIT_PREFIX + re.sub(r"[^A-Za-z0-9_-]", "_", unit[:-len(".slice")])


def timer_unit(unit):
    return unit_base(unit) + ".timer"


def service_unit(unit):
    return unit_base(unit) + ".service"


def unit_of(path, fs):
    """The slice whose window a registry path (a boost drop-in, or a timer's transient file) belongs to, or None."""
    m = _DROPIN_RE.match(path)
    if m:
        return m.group(1)
    m = _TIMER_UNIT_RE.search(fs.read(path) or "")
    return m.group(1) if m else None


def utc(epoch):
    return time.strftime(TIME_FORMAT, time.gmtime(epoch))


def epoch_of(text):
    try:
        return calendar.timegm(time.strptime(text, TIME_FORMAT))
    except (TypeError, ValueError):
        return None


def window_end_of(dropin):
    """The end time a boost drop-in records (UTC ISO text), or None."""
    m = _END_RE.search(dropin or "")
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------------
# The steps, declared once: this module runs them, and the timer's service runs the same list
# ---------------------------------------------------------------------------------------------

def reapply_steps(unit):
    """Make systemd apply the unit's io configuration to its cgroup now, on 252 and 257 alike."""
    control = "%s/%s.d" % (sd.RUNTIME_CONTROL_DIR, unit)
    return [
        ("systemctl", sd.daemon_reload_argv()),
        ("systemctl", sd.set_property_argv(unit, [REAPPLY], runtime=True)),
        ("remove", "%s/50-%s.conf" % (control, REAPPLY[0])),
        ("rmdir", control),
        ("systemctl", sd.daemon_reload_argv()),
    ]


def end_steps(unit):
    """What ends a window: the runtime drop-in removed, then the persistent configuration applied."""
    path = dropin_path(unit)
    return [("remove", path), ("rmdir", path.rsplit("/", 1)[0])] + reapply_steps(unit)


def run_steps(steps, fs, runner):
    """Carry out steps here, as the timer's service would."""
    for kind, arg in steps:
        if kind == "remove":
            fs.remove(arg)
        elif kind == "rmdir":
            if fs.isdir(arg) and not fs.listdir(arg):
                fs.rmdir(arg)
        else:
            runner.run(arg)


def exec_properties(steps, tools):
    """The steps as the timer's service: ExecStartPre= lines, the ExecStart= command, ExecStartPost= lines.

    The set-property step is the service's command (systemd-run's own ExecStart=); the steps before
    it run as ExecStartPre=, those after as ExecStartPost=. A directory that is not empty stays
    (``-`` lets rmdir fail).
    """
    pre, command, post = [], None, []
    for kind, arg in steps:
        if kind == "remove":
            line = [tools["rm"], "-f", "--", arg]
        elif kind == "rmdir":
            line = ["-" + tools["rmdir"], "--", arg]
        else:
            line = [tools["systemctl"]] + arg[1:]
        if kind == "systemctl" and "set-property" in arg:
            command = line
        elif command is None:
            pre.append(line)
        else:
            post.append(line)
    props = ["--property=ExecStartPre=" + " ".join(line) for line in pre]
    props += ["--property=ExecStartPost=" + " ".join(line) for line in post]
    return props, command


# The window's end runs as root (rm, rmdir, systemctl over systemd's private socket): sandboxed to the two runtime
# drop-in directories it empties and nothing else (docs/reliability.md, "What runs on the host": exposure measured in
# the lab). ``-``: a directory that is not there is no error.
SANDBOX = ("ProtectSystem=strict", "ReadWritePaths=-%s -%s" % (SYSTEMD_RUNTIME_DIR, sd.RUNTIME_CONTROL_DIR),
           "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "PrivateNetwork=yes", "IPAddressDeny=any",
           "RestrictAddressFamilies=AF_UNIX", "NoNewPrivileges=yes", "CapabilityBoundingSet=",
           "ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectKernelLogs=yes",
           "ProtectControlGroups=yes", "ProtectClock=yes", "ProtectHostname=yes", "ProtectProc=invisible",
           "RestrictNamespaces=yes", "RestrictRealtime=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
           "MemoryDenyWriteExecute=yes", "RemoveIPC=yes", "KeyringMode=private", "UMask=0077",
           "SystemCallArchitectures=native", "SystemCallFilter=@system-service")


def timer_argv(unit, on_boot_ms, end, tools):
    """``systemd-run`` for the timer that ends the window at ``on_boot_ms`` after boot (at ``end``, UTC ISO)."""
    props, command = exec_properties(end_steps(unit), tools)
    return [tools["systemd-run"], "--on-boot=%dms" % on_boot_ms, "--unit=" + unit_base(unit),
            "--description=%s: ends the boost window of %s at %s" % (STAMP, unit, end),
            "--timer-property=AccuracySec=1s", "--timer-property=RemainAfterElapse=no",
            "--collect", "--property=Type=oneshot"] + ["--property=" + p for p in SANDBOX] + props + ["--"] + command


# ---------------------------------------------------------------------------------------------
# Reading a window
# ---------------------------------------------------------------------------------------------

def _units_shown(runner, names, props):
    """{unit: {property: value}} from one ``systemctl show`` of several units (blocks split by blank lines)."""
    _rc, out, _err = runner.run(sd.show_argv(names[0], props) + list(names[1:]))
    blocks = [b for b in re.split(r"\n\s*\n", out or "") if b.strip()]
    shown = [dict((k, v[-1]) for k, v in sd.parse_show(b).items()) for b in blocks]
    return dict((s.get("Id"), s) for s in shown if s.get("Id"))


def timer_state(runner, unit):
    """'waiting' (the end is pending), 'ending' (the end runs now) or None (no timer loaded)."""
    timer, service = timer_unit(unit), service_unit(unit)
    shown = _units_shown(runner, [timer, service], ["Id", "LoadState", "ActiveState", "SubState"])
    t, s = shown.get(timer, {}), shown.get(service, {})
    if s.get("LoadState") == "loaded" and s.get("ActiveState") in ("activating", "active", "deactivating"):
        return "ending"
    if t.get("LoadState") == "loaded" and t.get("ActiveState") == "active":
        return "waiting" if t.get("SubState") == "waiting" else "ending"
    return None


def lifted_in(dropin, resolver):
    """{MAJ:MIN: {field: value}} and {MAJ:MIN: path} of the io.max lines a boost drop-in sets."""
    values, paths = {}, {}
    for name, value in sd.parse_dropin(dropin):
        if name not in FIELDS or not value:
            continue
        path, _sep, number = value.rpartition(" ")
        try:
            majmin = resolver.resolve(path).majmin
        except DeviceError:
            continue        # a disk that is gone has no io.max line to restore
        paths.setdefault(majmin, path)
        values.setdefault(majmin, {})[FIELDS[name]] = MAX if number == "infinity" else int(number)
    return values, paths


def window(fs, runner, unit, resolver=None, clock=None):
    """The slice's boost window as the host holds it, or None (no boost drop-in).

    ``active``: the drop-in is in place, its end has not come and the timer that ends it is
    pending. ``expired``: its end has passed and the caps are still lifted. ``orphaned``: no timer
    will end it (lost, or failed). One ``systemctl show`` when the drop-in exists, nothing otherwise.
    """
    if not unit.endswith(".slice"):
        return None
    path = dropin_path(unit)
    text = fs.read(path)
    if text is None:
        return None
    end = window_end_of(text)
    end_epoch = epoch_of(end)
    state = timer_state(runner, unit)
    lifted, paths = lifted_in(text, resolver or DeviceResolver(fs))
    expired = end_epoch is None or (clock or now)() >= end_epoch
    return {"unit": unit, "window_end": end, "dropin": path, "timer": timer_unit(unit), "timer_state": state,
            "active": not expired and state == "waiting", "expired": expired,
            "orphaned": state is None, "lifted": lifted, "paths": paths}


def configured_io_max(runner, unit, resolver):
    """{MAJ:MIN: {path: {field: value}}} of the io.max limits in the unit's loaded configuration.

    ``systemctl show`` lists a device under a directive only where its limit is not infinity.
    """
    _rc, out, _err = runner.run(sd.show_argv(unit, list(FIELDS)))
    out_by = {}
    for directive, entries in sd.show_values(out).items():
        if directive not in FIELDS:
            continue
        for path, value in entries.items():
            try:
                majmin = resolver.resolve(path).majmin
            except DeviceError:
                continue
            out_by.setdefault(majmin, {}).setdefault(path, dict(LIFT_ALL))[FIELDS[directive]] = value
    return out_by


def kernel_io_max(fs, cgroup_dir):
    """The parsed io.max of the unit's cgroup, or None when it has none (the slice is not running)."""
    text = fs.read(cgroup_dir + "/io.max") if cgroup_dir else None
    return None if text is None else IO_MAX.codec.parse(text)


# ---------------------------------------------------------------------------------------------
# The window as one engine setting
# ---------------------------------------------------------------------------------------------

class BoostWindow(Setting):
    """A slice's boost window: its timer, its runtime drop-in, and the io.max lines they govern.

    ``plan`` (a SystemdPlan of the lifted io.max) and ``end`` (UTC ISO) for a window to start; None
    for no window. ``watch``: {MAJ:MIN: path} whose kernel io.max must match the unit's configuration
    after the call (the devices lifted, by this call or the window it replaces or ends).
    """

    order = 45      # before the cgroup module's UnitState (50): an ended window first, then the unit's own values

    def __init__(self, unit, runner, resolver, cgroup_dir, watch, tools, plan=None, end=None, clock=None):
        self.unit = unit
        self.runner = runner
        self.resolver = resolver
        self.cgroup_dir = cgroup_dir
        self.watch = dict(watch)
        self.tools = tools
        self.plan = plan
        self.clock = clock or now
        self.file = ManagedFile(dropin_path(unit), None)
        content = None
        if plan is not None:
            content = stamped("# Boost window of %s ends at %s; the timer %s ends it, and so does a reboot (this file "
                              "is in /run).\n" % (unit, end, timer_unit(unit)) + plan.body(), OWNER)
        self.starting = plan is not None
        desired = {"dropin": content, "timer": "waiting" if self.starting else None, "window_end": end, "drift": []}
        super(BoostWindow, self).__init__("boost window %s" % unit, desired)

    # -- reading ------------------------------------------------------------------------------
    def read(self, fs):
        dropin = self.file.read(fs)
        return {"dropin": dropin, "timer": timer_state(self.runner, self.unit), "window_end": window_end_of(dropin),
                "drift": self.drift(fs)}

    def drift(self, fs):
        """[{key, want, have}]: the watched disks' io.max lines against the unit's configuration, and
        (starting) the configuration against the lift."""
        out = []
        if self.plan is not None:
            _rc, shown, _err = self.runner.run(sd.show_argv(self.unit, self.plan.properties()))
            out.extend(dict(d, key="systemd " + d["key"]) for d in self.plan.show_diff(sd.show_values(shown)))
        kernel = kernel_io_max(fs, self.cgroup_dir)
        if kernel is None or not self.watch:
            return out
        configured = configured_io_max(self.runner, self.unit, self.resolver)
        for majmin in sorted(self.watch):
            want = dict(LIFT_ALL)
            for path_values in (configured.get(majmin) or {}).values():
                for field, value in path_values.items():
                    if value != MAX:
                        want[field] = value
            for key, w, h in IO_MAX.codec.diff({majmin: want}, kernel):
                out.append({"key": "io.max " + key, "want": w, "have": h})
        return out

    def differs(self, current):
        return (current["dropin"] != self.desired["dropin"] or current["timer"] != self.desired["timer"]
                or bool(current["drift"]))

    def validate(self, current):
        return self.file.validate(current["dropin"])

    def report(self, value):
        out = {"window_end": value["window_end"], "timer": value["timer"], "dropin": value["dropin"]}
        if value["drift"]:
            out["drift"] = value["drift"]
        return out

    # -- writing ------------------------------------------------------------------------------
    def write(self, fs, value, current):
        self.stop_timer((current or {}).get("timer"))
        if not self.starting:
            run_steps(end_steps(self.unit), fs, self.runner)
            return
        left = max(epoch_of(value["window_end"]) - self.clock(), 1.0)
        on_boot_ms = int(math.ceil((uptime() + left) * 1000))
        self.runner.run(timer_argv(self.unit, on_boot_ms, value["window_end"], self.tools))     # the end, first
        self.file.write(fs, value["dropin"], None)                                                # then the lift
        run_steps(reapply_steps(self.unit), fs, self.runner)
        if timer_state(self.runner, self.unit) != "waiting":
            # The timer fired while the lift was being put in place: its end may have run before the drop-in
            # existed, and nothing would end this lift. End it here.
            self.stop_timer("ending")
            run_steps(end_steps(self.unit), fs, self.runner)
            raise BoostError("the boost window of %s ended (its timer %s fired) before the lift was in place, so the "
                             "caps were put back at once: give a window longer than the time the host needs to lift "
                             "them (seconds)" % (self.unit, timer_unit(self.unit)))

    def stop_timer(self, state):
        """Stop the timer (and a service ending the window right now: the caller ends it, or lifts again).

        systemd unloads a stopped transient unit at once, and the service with its timer, so stopping
        both answers rc 5 ("not loaded") for the second; what counts is that neither is left.
        """
        if state is None:
            return
        argv = sd.stop_argv(timer_unit(self.unit), service_unit(self.unit))
        rc, out, err = self.runner.run(argv, check=False)
        if timer_state(self.runner, self.unit) is not None:
            raise CommandError(argv, rc, out, err, reason="%s is still loaded after it was stopped (rc=%s: %s)"
                               % (timer_unit(self.unit), rc, (err or out or "").strip()[:300]))

    def restore(self, fs, previous):
        # A start that failed ends the window: the caps come back (a window it replaced is not started again).
        if self.starting:
            self.stop_timer("ending")
            run_steps(end_steps(self.unit), fs, self.runner)


# ---------------------------------------------------------------------------------------------
# The module's request
# ---------------------------------------------------------------------------------------------

MODULE_SPEC = {"argument_spec": dict(
    unit={"type": "str", "required": True},
    state={"type": "str", "choices": ["started", "absent", "stopped"], "default": "started"},
    seconds={"type": "int"},
    io={"type": "dict"},
)}


def check_form(params):
    """Problems with the parameters' own form, before the host is asked anything."""
    unit = (params.get("unit") or "").strip()
    errors = unit_problems(unit)
    if (params.get("state") or "started") != "started":
        return errors
    seconds = params.get("seconds")
    if seconds is None:
        errors.append("seconds is required with state: started: give the window's length, e.g. seconds: 600")
    elif seconds <= 0:
        errors.append("seconds: %d is no window; give its length in seconds, at least 1 (e.g. seconds: 600)" % seconds)
    elif seconds > MAX_SECONDS:
        errors.append("seconds: %d is longer than %d (7 days); a boost window is a bounded exception: give a shorter "
                      "window, or change the slice's caps themselves (training_io_max, or the cgroup module's io.max)"
                      % (seconds, MAX_SECONDS))
    io = params.get("io")
    if io is not None:
        other = sorted(k for k in io if k != "max")
        errors.extend("io.%s cannot be boosted: a boost window lifts io.max caps only; give io.max (device: {rbps, "
                      "wbps, riops, wiops: max or a number}), or leave io out to lift every io.max cap of %s"
                      % (k, unit or "the slice") for k in other)
        if "max" in io and not isinstance(io["max"], dict):
            errors.append("io.max: expected a mapping of device to {rbps, wbps, riops, wiops: max or a number}, got "
                          "%r; leave io out to lift every io.max cap of %s" % (io["max"], unit or "the slice"))
        elif "max" in io and not io["max"]:
            errors.append("io.max is empty: name the disks to lift (device: {rbps, wbps, riops, wiops: max or a "
                          "number}), or leave io out to lift every io.max cap of %s" % (unit or "the slice"))
    return errors


class Request:
    def __init__(self, params, fs, runner):
        self.params, self.fs, self.runner = params, fs, runner
        self.unit = (params.get("unit") or "").strip()
        self.starting = (params.get("state") or "started") == "started"
        self.resolver = DeviceResolver(fs)
        self.tools = {}
        self.devices = {}
        self.cgroup_dir = None

    def check_host(self):
        errors = []
        if not sd.systemd_host(self.fs):
            raise RequestError("this host does not run systemd (/run/systemd/system is missing); a boost window is a "
                               "systemd drop-in and timer")
        wanted = ("systemctl", "systemd-run", "rm", "rmdir") if self.starting else ("systemctl", "rm", "rmdir")
        for tool in wanted:
            self.tools[tool] = self.runner.which(tool)
            if not self.tools[tool]:
                errors.append("%s is not installed on this host (not found in PATH); a boost window needs it" % tool)
        if self.starting and self.fs.read(CGROUP_ROOT + "/cgroup.controllers") is None:
            errors.append("this host does not run the cgroup v2 unified hierarchy; io.max needs it: boot with "
                          "systemd.unified_cgroup_hierarchy=1")
        if errors:
            raise RequestError(errors)
        info = sd.unit_info(self.runner, self.unit)
        self.cgroup_dir = CGROUP_ROOT + info["ControlGroup"] if info["ControlGroup"] else resolve(self.unit)

    def lift(self, current):
        """The SystemdPlan of the lift and the devices it covers ({MAJ:MIN: path}); RequestError when none."""
        configured = configured_io_max(self.runner, self.unit, self.resolver)
        paths = dict((m, sorted(p)[0]) for m, p in configured.items())
        if current is not None:
            for majmin, path in current["paths"].items():   # caps the window being replaced lifted
                paths.setdefault(majmin, path)
        asked = (self.params.get("io") or {}).get("max")
        errors, wanted, records = [], {}, {}
        if asked is None:
            if not paths:
                raise RequestError(
                    "%s has no io.max caps (systemd reports no IOReadBandwidthMax=, IOWriteBandwidthMax=, "
                    "IOReadIOPSMax= or IOWriteIOPSMax= for it), so there is nothing to lift: apply the caps first "
                    "(the training role's training_io_max, or the cgroup module's io.max)" % self.unit)
            for _majmin, path in sorted(paths.items()):
                try:
                    records[path] = self.resolver.resolve(path)
                except DeviceError as e:
                    errors.append(e.message)
                    continue
                wanted[path] = dict(LIFT_ALL)
        else:
            for selector, values in sorted(asked.items()):
                try:
                    rec = self.resolver.resolve(selector)
                except DeviceError as e:
                    errors.append("io.max: %s" % e.message)
                    continue
                if rec.majmin not in paths:
                    errors.append("io.max: %s has no io.max cap on %s (%s), so a window has nothing to lift there "
                                  "(and its end could not put a value back): capped disks: %s"
                                  % (self.unit, selector, rec.majmin, ", ".join(
                                      "%s (%s)" % (paths[m], m) for m in sorted(paths)) or "none"))
                    continue
                records[selector] = rec
                wanted[selector] = values
        if errors:
            raise RequestError(errors)
        try:
            plan = sd.build_plan(self.unit, {"io": {"max": wanted}}, devices=records, paths=paths)
        except sd.SystemdError as e:
            raise RequestError(e.errors)
        self.devices = dict((paths[r.majmin], r.majmin) for r in records.values())
        return plan, dict((r.majmin, paths[r.majmin]) for r in records.values())


def part(params, fs, runner, clock=None):
    """(the BoostWindow setting, the request, the window found); RequestError before anything is written."""
    errors = check_form(params)
    if errors:
        raise RequestError(errors)
    req = Request(params, fs, runner)
    req.check_host()
    current = window(fs, runner, req.unit, req.resolver, clock)
    watch = dict((current or {}).get("paths") or {})
    plan, end = None, None
    if req.starting:
        plan, lifted = req.lift(current)
        watch.update(lifted)
        end = utc(int(math.ceil((clock or now)())) + params["seconds"])
    setting = BoostWindow(req.unit, runner, req.resolver, req.cgroup_dir, watch, req.tools, plan=plan, end=end,
                          clock=clock)
    return setting, req, current


def run(params, fs, runner, check_mode, clock=None):
    """The cgroup_boost module call."""
    setting, req, current = part(params, fs, runner, clock)
    result = Reconciler(fs, check_mode=check_mode).run([setting])
    try:
        kernel = kernel_io_max(fs, req.cgroup_dir)
    except CodecError:
        kernel = None
    return {
        "changed": result["changed"], "diff": result["diff"], "unit": req.unit,
        "active": req.starting, "window_end": setting.desired["window_end"],
        "seconds": params.get("seconds") if req.starting else None,
        "timer": timer_unit(req.unit), "dropin": dropin_path(req.unit),
        "devices": req.devices,
        "lifted": dict((path, setting.plan.expected["io.max"][majmin]) for path, majmin in req.devices.items())
        if req.starting else {},
        "previous": None if current is None else dict((k, current[k]) for k in (
            "window_end", "timer_state", "active", "expired")),
        "kernel": {"io.max": kernel},
    }


def purge(p):
    """purge's first step (``_concerns/registry.py`` walks ``REMOVALS``): every slice with a boost window on the host (a
    runtime drop-in or a timer of ours) ended, so that no timer fires after the purge and the caps in force are the
    unit's own until the cgroup step resets them."""
    units = []
    for owner, path in p.owned:
        unit = unit_of(path, p.fs) if owner == "cgroup_boost" else None
        if unit and unit not in units:
            units.append(unit)
    for unit in units:
        p.step("cgroup_boost %s" % unit,
               lambda unit=unit: run({"unit": unit, "state": "absent"}, p.fs, p.runner, p.check_mode))
