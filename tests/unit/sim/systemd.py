# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""SimSystemd: a ``Runner`` stand-in that answers ``systemctl`` like systemd 252 or 257.

Units live in ``units`` (``{name: {LoadState, active, Delegate, FragmentPath, slice}}``); every
argv is recorded in ``calls``. The configuration systemd has loaded for a unit is its fragment
plus every ``*.conf`` drop-in of ``/etc/systemd/system/<unit>.d`` and
``/run/systemd/system.control/<unit>.d``, sorted by file name (same name: /run wins); scalar
directives are last-wins with an empty assignment resetting them, device lists are keyed by path
and an empty assignment clears the list. Behaviour observed in the lab (docs/kernel-files.md):

* ``daemon-reload`` reloads every unit; systemd 252 then applies the changed configuration to
  running units, 257 does not (only ``set-property`` and ``start`` apply);
* ``set-property --runtime -- UNIT K=V ...`` merges into the loaded configuration, writes
  ``/run/systemd/system.control/<unit>.d/50-<Prop>.conf`` and applies;
* ``start -- UNIT`` creates the unit's cgroup (slices nest by dashes, services and scopes go to
  ``system.slice``) and applies;
* applying writes the unit's kernel files through the SimCgroup kernel: io.weight
  (``default N`` then one ``MAJ:MIN N`` per listed device, never removing a line it no longer
  lists; a disk without iocost refuses the line and systemd silently goes on), io.max (one line
  per listed device, unlisted ones kept), io.latency, memory.* (defaults 0 / max), cpu.weight and
  cpu.max (``CPUQuota=50%`` -> ``50000 100000``), cpuset.cpus/.mems from ``AllowedCPUs=``/``AllowedMemoryNodes=``
  (244+: cpuset enabled from the root down where the root offers it, the sets written in list form). Devices are named by path and resolved through
  the fake host's links to ``/sys/class/block/<name>/dev``;
* ``show [-p P]... [--value] -- UNIT...`` prints the properties in systemd's format (a blank
  line between units; a device limit at infinity is not listed, as systemd omits defaults; ``Id`` is the
  unit's own name for an alias, ``DropInPaths`` its drop-ins in the order systemd reads them, ``Slice`` the one
  its configuration gives);
* a service runs in the slice its configuration gave when it started (``Slice=`` of its files, else the
  vendor's ``slice``, else system.slice): ``daemon-reload`` changes ``Slice``, not ``ControlGroup``; ``restart``
  stops it (its cgroup goes) and starts it in its configured slice;
* a service running outside the slice its loaded files give it (a ``Slice=`` drop-in since it started) gets
  nothing applied: systemd counts it in no slice's members, and the slice it runs in keeps io and cpu for its
  children only while a member asks for them (an IO*/CPU* directive, Delegate=yes) (lab);
* ``list-units [--all]`` and ``list-unit-files`` with ``--type=`` print JSON with ``--output=json`` (unless
  ``json_tables`` is off, as on systemd before 246), else the plain table;
* runtime drop-ins in ``/run/systemd/system/<unit>.d`` are part of the configuration (for one
  file name: ``system.control`` over ``/etc`` over ``/run/systemd/system``);
* ``systemd-run --on-boot=... --unit=NAME [--description=] [--property=Exec*=...] -- CMD`` makes
  the transient ``NAME.timer`` (waiting) and ``NAME.service`` with their files in
  ``/run/systemd/transient``; :meth:`fire` elapses the timer: the service's ``ExecStartPre=``,
  command and ``ExecStartPost=`` run here (``rm``, ``rmdir``, ``systemctl``), then both units are
  collected. ``stop`` unloads transient units (a stopped timer takes its idle service with it, and
  a unit no longer loaded answers rc 5, as observed on 252 and 257).

``fail(verb, ...)`` makes the next call(s) of a verb fail without effect; ``hooks`` are called with
each argv before it runs (a timer firing in the middle of a module call).
"""

import json
import os
import re
import shutil
from collections import OrderedDict
from decimal import Decimal

from sim.cgroup import format_list, parse_list

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError, KernelFS

UNIT_DIR = "/etc/systemd/system"
RUNTIME_DIR = "/run/systemd/system"
CONTROL_DIR = "/run/systemd/system.control"
TRANSIENT_DIR = "/run/systemd/transient"
TRANSIENT_HEADER = "# This is a transient unit file, created programmatically via the systemd API. Do not edit.\n"
MUTATING = ("daemon-reload", "daemon-reexec", "start", "stop", "restart", "reload", "try-restart", "set-property",
            "enable", "disable", "kill")
DEVICE_LISTS = ("IODeviceWeight", "IOReadBandwidthMax", "IOWriteBandwidthMax", "IOReadIOPSMax", "IOWriteIOPSMax",
                "IODeviceLatencyTargetSec")
LIMITS = (("IOReadBandwidthMax", "rbps"), ("IOWriteBandwidthMax", "wbps"), ("IOReadIOPSMax", "riops"),
          ("IOWriteIOPSMax", "wiops"))
SCALARS = ("IOAccounting", "MemoryAccounting", "CPUAccounting", "IOWeight", "CPUWeight", "CPUQuota",
           "CPUQuotaPeriodSec", "MemoryMin", "MemoryLow", "MemoryHigh", "MemoryMax", "MemorySwapMax",
           "MemoryZSwapMax", "Delegate", "Description", "OOMPolicy", "Slice", "AllowedCPUs", "AllowedMemoryNodes")
# (directive, kernel file): systemd keeps a CPU set and prints and writes it in the kernel's list form
CPUSETS = (("AllowedCPUs", "cpuset.cpus"), ("AllowedMemoryNodes", "cpuset.mems"))
# (directive, kernel file, default)
MEMORY = (("MemoryMin", "memory.min", "0"), ("MemoryLow", "memory.low", "0"), ("MemoryHigh", "memory.high", "max"),
          ("MemoryMax", "memory.max", "max"), ("MemorySwapMax", "memory.swap.max", "max"),
          ("MemoryZSwapMax", "memory.zswap.max", "max"))
SECTIONS = {"slice": "Slice", "service": "Service", "scope": "Scope"}
_SPAN = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(us|usec|ms|msec|s|sec|min|h)?\s*")
_SPAN_UNITS = {None: 1000000, "us": 1, "usec": 1, "ms": 1000, "msec": 1000, "s": 1000000, "sec": 1000000,
               "min": 60000000, "h": 3600000000}
_BINARY = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}
_DECIMAL = {"K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}


def slice_path(name):
    """'ai-inference.slice' -> 'ai.slice/ai-inference.slice'."""
    parts = name[:-len(".slice")].split("-")
    return "/".join("-".join(parts[:i + 1]) + ".slice" for i in range(len(parts)))


def parse_timespan(text):
    """systemd time span -> µs ('infinity' -> 'max'); a bare number is seconds."""
    text = text.strip()
    if text == "infinity":
        return "max"
    total, pos = Decimal(0), 0
    while pos < len(text):
        m = _SPAN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("bad time span %r" % text)
        total += Decimal(m.group(1)) * _SPAN_UNITS[m.group(2)]
        pos = m.end()
    return int(total)


def format_timespan(usec):
    """µs -> '500ms', '1s 500ms', '1min 4s', '0', 'infinity'."""
    if usec == "max":
        return "infinity"
    if usec == 0:
        return "0"
    out = []
    for unit, size in (("min", 60000000), ("s", 1000000), ("ms", 1000), ("us", 1)):
        if usec >= size:
            out.append("%d%s" % (usec // size, unit))
            usec %= size
    return " ".join(out)


def parse_bytes(text, table):
    """'infinity' -> 'max'; '1024' -> 1024; '1K' -> table['K']."""
    text = text.strip()
    if text == "infinity":
        return "max"
    if text.isdigit():
        return int(text)
    m = re.match(r"^([0-9]+)([KMGT])$", text)
    if not m:
        raise ValueError("bad size %r" % text)
    return int(m.group(1)) * table[m.group(2)]


def quota_per_sec(text):
    """CPUQuota= value -> µs of CPU time per second ('50%' -> 500000)."""
    if not text.endswith("%"):
        raise ValueError("bad CPUQuota %r" % text)
    permyriad = int(Decimal(text[:-1]) * 100)
    return permyriad * 1000000 // 10000


def cpu_set(text):
    """An AllowedCPUs= value ('0-3,8', '0 1 2') -> sorted numbers (parse_cpu_set_full takes spaces and commas)."""
    return parse_list(",".join(text.replace(",", " ").split()))


def _config():
    return {"scalars": {}, "lists": OrderedDict((n, OrderedDict()) for n in DEVICE_LISTS)}


class SimSystemd(object):
    """``systemctl`` over a FakeHost and its SimCgroup kernel."""

    def __init__(self, host, kernel, version=252):
        self.host = host
        self.kernel = kernel
        self.version = version
        self.fs = KernelFS(host.root)
        self.units = {}
        self.loaded = {}
        self.calls = []
        self.failures = []
        self.journal = []         # what systemd would log (kernel refusals it ignores)
        self.transient = {}       # transient units (systemd-run): name -> record
        self.hooks = []
        self.aliases = {}         # alias name -> unit name
        self.json_tables = True   # list-units/list-unit-files honour --output=json (systemd 246+)

    # -- set-up ---------------------------------------------------------------------------------
    def add_unit(self, name, active=False, delegate=False, fragment=None, load_state="loaded", slice=None,
                 file_state=None, alias_of=None):
        """A unit; ``fragment`` is a vendor unit file path (FragmentPath), ``active`` realises its cgroup, ``slice``
        the slice its vendor file gives (default system.slice). ``file_state`` is what ``list-unit-files`` says of
        it (default: enabled for a unit with a fragment, unlisted without); ``alias_of`` makes it an alias."""
        if alias_of is not None:
            self.aliases[name] = alias_of
            return self.units[alias_of]
        self.units[name] = {"LoadState": load_state, "active": False, "Delegate": delegate, "vendor": fragment or "",
                            "FragmentPath": fragment or "", "slice": slice, "running_slice": None,
                            "file_state": file_state or ("enabled" if fragment else None)}
        self._reload_unit(name)
        if active:
            self._start(name)
        return self.units[name]

    def fail(self, verb, rc=1, out="", err="Failed", times=1, when=None):
        """The next ``times`` calls of ``verb`` (matching ``when(argv)``) fail with rc/out/err and change nothing."""
        self.failures.append({"verb": verb, "rc": rc, "out": out, "err": err, "times": times, "when": when})

    @property
    def mutating_calls(self):
        return [c for c in self.calls if self._verb(c) in MUTATING]

    def cgroup(self, unit):
        """Absolute cgroup directory of a unit (whether or not it exists)."""
        return self.kernel.mount + "/" + self._rel(unit)

    # -- Runner interface -----------------------------------------------------------------------
    def which(self, name):
        return "/usr/bin/" + name if name in ("systemctl", "systemd-run", "udevadm", "rm", "rmdir") else None

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        assert isinstance(argv, list), "argv must be a list"
        for hook in list(self.hooks):
            hook(self, list(argv))
        self.calls.append(list(argv))
        rc, out, err = self._dispatch(list(argv))
        if check and (rc != 0 or (stderr_is_error and err.strip())):
            raise CommandError(argv, rc, out, err)
        return rc, out, err

    # -- dispatch -------------------------------------------------------------------------------
    @staticmethod
    def _verb(argv):
        for arg in argv[1:]:
            if not arg.startswith("-"):
                return arg
        return None

    def _dispatch(self, argv):
        if argv and os.path.basename(argv[0]) == "systemd-run":
            return self._systemd_run(argv[1:])
        if not argv or argv[0] != "systemctl":
            return 127, "", "%s: command not found" % (argv[0] if argv else "")
        if argv[1:] == ["--version"]:
            full = {252: "252.39-1~deb12u1", 257: "257.9-1~deb13u1"}.get(self.version, "%d" % self.version)
            return 0, "systemd %d (%s)\n+PAM +AUDIT +SELINUX +APPARMOR +IMA +SECCOMP\n" % (self.version, full), ""
        verb = self._verb(argv)
        for failure in self.failures:
            if failure["verb"] == verb and failure["times"] != 0 and (failure["when"] is None or failure["when"](argv)):
                failure["times"] -= 1
                return failure["rc"], failure["out"], failure["err"]
        rest = argv[argv.index(verb) + 1:]
        if verb == "daemon-reload":
            return self._daemon_reload()
        if verb == "start":
            return self._cmd_start(rest)
        if verb == "show":
            return self._show(rest)
        if verb == "restart":
            return self._restart(rest)
        if verb in ("list-units", "list-unit-files"):
            return self._list(verb, rest)
        if verb == "set-property":
            return self._set_property(rest)
        if verb == "stop":
            return self._stop(rest)
        if verb == "disable":
            # a unit file in /etc/systemd/system that is there (enabled or not): disabled, --now also stops it
            units = [u for u in rest if not u.startswith("-")]
            if any(not os.path.exists(self.host.path("/etc/systemd/system/%s" % u)) for u in units):
                return 1, "", "Failed to disable unit: Unit file %s does not exist.\n" % units[0]
            return 0, "", ""
        return 1, "", "Unknown command verb %s." % verb

    # -- transient units (systemd-run, timers) --------------------------------------------------
    def _systemd_run(self, args):
        opts, command = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
        values = {"props": [], "timer_props": []}
        for opt in opts:
            key, _sep, value = opt.partition("=")
            if key in ("--property", "-p"):
                values["props"].append(value)
            elif key == "--timer-property":
                values["timer_props"].append(value)
            else:
                values[key] = value
        if not command or "--unit" not in values or "--on-boot" not in values:
            return 1, "", "SimSystemd: systemd-run needs --unit, --on-boot and a command\n"
        name = values["--unit"]
        for unit in (name + ".timer", name + ".service"):
            if unit in self.transient:
                return 1, "", "Failed to start transient timer unit: Unit %s was already loaded or has a fragment file.\n" % unit
        execs = {"ExecStartPre": [], "ExecStartPost": []}
        for prop in values["props"]:
            key, _sep, value = prop.partition("=")
            if key in execs:
                execs[key].append(value.split(" "))
        description = values.get("--description", "")
        self.transient[name + ".timer"] = {"SubState": "waiting", "on_boot": values["--on-boot"],
                                           "Description": description, "timer_props": values["timer_props"]}
        self.transient[name + ".service"] = {"SubState": "dead", "Description": description, "pre": execs["ExecStartPre"],
                                             "command": command, "post": execs["ExecStartPost"],
                                             "props": values["props"]}
        for unit, section in ((name + ".timer", "[Timer]\nOnBootSec=%s\n" % values["--on-boot"]),
                              (name + ".service", "[Service]\nExecStart=%s\n" % " ".join(command))):
            self.host.write("%s/%s" % (TRANSIENT_DIR, unit),
                            TRANSIENT_HEADER + "[Unit]\nDescription=%s\n\n%s" % (description, section))
        return 0, "", "Running timer as unit: %s.timer\nWill run service as unit: %s.service\n" % (name, name)

    def _unload(self, unit):
        self.transient.pop(unit, None)
        path = self.host.path("%s/%s" % (TRANSIENT_DIR, unit))
        if os.path.exists(path):
            os.unlink(path)

    def _stop(self, args):
        """Stops (and so unloads) the transient units given; a timer takes its idle service with it."""
        _opts, units = self._units_of(args)
        missing = []
        for unit in units:
            if unit not in self.transient:
                missing.append(unit)
                continue
            self._unload(unit)
            if unit.endswith(".timer") and self.transient.get(unit[:-len(".timer")] + ".service", {}).get(
                    "SubState") == "dead":
                self._unload(unit[:-len(".timer")] + ".service")
        if missing:
            return 5, "", "".join("Failed to stop %s: Unit %s not loaded.\n" % (u, u) for u in missing)
        return 0, "", ""

    def fire(self, name):
        """The timer ``name`` elapses: its service runs its lines here, then both units are collected.

        Returns the (argv, rc) of each line; a failing line without '-' stops the service (as systemd does).
        """
        base = name[:-len(".timer")] if name.endswith(".timer") else name
        timer, service = base + ".timer", base + ".service"
        record = self.transient[service]
        self.transient[timer]["SubState"] = "elapsed"
        record["SubState"] = "start"
        ran = []
        for line in record["pre"] + [record["command"]] + record["post"]:
            ignore = line[0].startswith("-")
            argv = [line[0].lstrip("-")] + line[1:]
            rc = self._exec(argv)
            ran.append((argv, rc))
            if rc != 0 and not ignore:
                break
        self._unload(timer)
        self._unload(service)
        return ran

    def _exec(self, argv):
        tool = os.path.basename(argv[0])
        if tool == "rm":
            path = self.host.path(argv[-1])
            if os.path.exists(path):
                os.unlink(path)
            return 0
        if tool == "rmdir":
            path = self.host.path(argv[-1])
            if not os.path.isdir(path) or os.listdir(path):
                return 1
            os.rmdir(path)
            return 0
        self.calls.append(["systemctl"] + argv[1:])
        return self._dispatch(["systemctl"] + argv[1:])[0]

    @staticmethod
    def _units_of(args):
        """(options, units): units follow '--' (or are the non-option arguments)."""
        if "--" in args:
            i = args.index("--")
            return args[:i], args[i + 1:]
        return [a for a in args if a.startswith("-")], [a for a in args if not a.startswith("-")]

    # -- units ----------------------------------------------------------------------------------
    def unit(self, name):
        """The unit record; a slice without a file is synthesised (loaded), other unknown units are not-found."""
        name = self.aliases.get(name, name)
        if name not in self.units:
            self.units[name] = {"LoadState": "loaded" if name.endswith(".slice") else "not-found", "active": False,
                                "Delegate": False, "vendor": "", "FragmentPath": "", "slice": None}
            self._reload_unit(name)
        return self.units[name]

    def configured_slice(self, name):
        """The slice a service's loaded configuration gives it: a Slice= of its files, else its vendor's, else
        system.slice."""
        u = self.unit(name)
        return self.loaded.get(name, _config())["scalars"].get("Slice") or u["slice"] or "system.slice"

    def _rel(self, name):
        if name.endswith(".slice"):
            return slice_path(name)
        u = self.unit(name)
        # a running unit stays in the cgroup it was started in until it starts again
        where = u.get("running_slice") if u["active"] and u.get("running_slice") else self.configured_slice(name)
        return "%s/%s" % (slice_path(where), name)

    def _files(self, name):
        """Unit file then drop-ins in the order systemd applies them."""
        u = self.unit(name)
        out = []
        if u["FragmentPath"] and self.fs.exists(u["FragmentPath"]):
            out.append(u["FragmentPath"])
        dropins = {}
        for directory in ("%s/%s.d" % (RUNTIME_DIR, name), "%s/%s.d" % (UNIT_DIR, name),
                          "%s/%s.d" % (CONTROL_DIR, name)):
            for entry in self.fs.listdir(directory):
                if entry.endswith(".conf"):
                    dropins[entry] = directory + "/" + entry     # a later directory wins on equal names
        return out + [dropins[k] for k in sorted(dropins)]

    def _assign(self, cfg, name, value):
        if name in DEVICE_LISTS:
            entries = cfg["lists"][name]
            if not value:
                entries.clear()
                return
            path, _sep, rest = value.partition(" ")
            entries[path] = rest.strip()
        elif name in SCALARS and (name != "MemoryZSwapMax" or self.version >= 253):
            if value:
                cfg["scalars"][name] = value
            else:
                cfg["scalars"].pop(name, None)

    def _load(self, name):
        cfg = _config()
        for path in self._files(name):
            for line in (self.fs.read(path) or "").splitlines():
                line = line.strip()
                if not line or line[0] in "#;[":
                    continue
                key, sep, value = line.partition("=")
                if sep:
                    self._assign(cfg, key.strip(), value.strip())
        return cfg

    def _reload_unit(self, name):
        u = self.units[name]
        own = "%s/%s" % (UNIT_DIR, name)
        u["FragmentPath"] = own if self.fs.exists(own) else u["vendor"]
        self.loaded[name] = self._load(name)

    def _daemon_reload(self):
        for name in sorted(self.units):
            self._reload_unit(name)
            if self.version < 257 and self.units[name]["active"]:
                self._apply(name)
        self._members()
        return 0, "", ""

    def _moving(self, name):
        """A running service or scope whose loaded files give it another slice than the one it runs in."""
        return not name.endswith(".slice") and self.cgroup(name).rsplit("/", 1)[0] != self.cgroup(self.configured_slice(name))

    def _needs(self, name):
        """The controllers a unit's loaded configuration asks of its slice: io for an IO* directive, cpu for a CPU*
        one, both for Delegate=yes."""
        cfg = self.loaded.get(name, _config())
        keys = set(cfg["scalars"]) | set(k for k, v in cfg["lists"].items() if v)
        delegate = self.units[name]["Delegate"] or cfg["scalars"].get("Delegate") == "yes"
        return set(c for c, prefix in (("io", "IO"), ("cpu", "CPU"))
                   if delegate or any(k.startswith(prefix) for k in keys))

    def _members(self):
        """A slice enables a controller for its children while a member needs it; a running service whose files now
        give it another slice is a member of none. Lab (systemd 252 and 257): ssh, journald, containerd and docker
        given Slice=hostcritical.slice while running left system.slice with ``memory pids`` and their cgroups without
        io.weight or cpu.weight. Modelled only for a slice such a service still runs in."""
        running = {}
        for name, u in self.units.items():
            if name.endswith(".slice") or not u["active"]:
                continue
            here = self.cgroup(name).rsplit("/", 1)[0]
            running.setdefault(here, []).append(name)
        for here, names in sorted(running.items()):
            members = [n for n in names if not self._moving(n)]
            if len(members) == len(names):
                continue
            need = set()
            for n in members:
                need |= self._needs(n)
            self.kernel._disable(here, [c for c in ("io", "cpu") if c not in need])

    def _cmd_start(self, args):
        _opts, units = self._units_of(args)
        for name in units:
            if self.unit(name)["LoadState"] == "not-found":
                return 5, "", "Failed to start %s: Unit %s not found.\n" % (name, name)
        for name in units:
            self._start(name)
        return 0, "", ""

    def _start(self, name):
        u = self.unit(name)
        if u["active"]:
            return
        if name.endswith(".slice") and "-" in name[:-len(".slice")]:
            self._start(name[:-len(".slice")].rsplit("-", 1)[0] + ".slice")
        if not name.endswith(".slice"):
            u["running_slice"] = self.configured_slice(name)
            # a unit requires its slice and starts after it: systemd realises the slice, with its loaded
            # properties, first (a slice nothing had started yet starts with its first unit)
            parent = self.units.get(u["running_slice"])
            if parent is not None and not parent["active"]:
                self._start(u["running_slice"])
        u["active"] = True
        self.kernel.ensure_group(self.cgroup(name), leaf_enable=name.endswith(".slice"))
        self._apply(name)

    def _restart(self, args):
        """Stops each unit (its processes and cgroup go) and starts it again, in the slice its configuration gives."""
        _opts, units = self._units_of(args)
        for name in units:
            if self.unit(name)["LoadState"] == "not-found":
                return 5, "", "Failed to restart %s: Unit %s not found.\n" % (name, name)
        for name in units:
            name = self.aliases.get(name, name)
            u = self.unit(name)
            if u["active"]:
                old = self.host.path(self.cgroup(name))
                if os.path.isdir(old):
                    shutil.rmtree(old)
                u["active"] = False
                u["running_slice"] = None
            self._start(name)
        return 0, "", ""

    def _list(self, verb, args):
        """list-units [--all] / list-unit-files, --type=service, as JSON (--output=json) or the plain table."""
        opts, patterns = self._units_of(args)
        kind = [o.split("=", 1)[1] for o in opts if o.startswith("--type=")]
        rows = []
        for name in sorted(self.units):
            u = self.units[name]
            if kind and not name.endswith("." + kind[0]):
                continue
            if verb == "list-units":
                if not u["active"] and "--all" not in opts:
                    continue
                rows.append(OrderedDict([("unit", name), ("load", u["LoadState"]),
                                         ("active", "active" if u["active"] else "inactive"),
                                         ("sub", "running" if u["active"] else "dead"), ("description", name)]))
            elif u.get("file_state"):
                rows.append(OrderedDict([("unit_file", name), ("state", u["file_state"]), ("preset", "enabled")]))
        if verb == "list-unit-files":
            rows.extend(OrderedDict([("unit_file", a), ("state", "alias"), ("preset", "-")]) for a in sorted(self.aliases))
        if "--output=json" in opts and self.json_tables:
            return 0, json.dumps(list(rows), separators=(",", ":")) + "\n", ""
        lines = [" ".join(row.values()) for row in rows]
        if "--no-legend" not in opts:
            lines.append("\n%d loaded units listed." % len(rows))
        return 0, "".join(line + "\n" for line in lines), ""

    # -- set-property ---------------------------------------------------------------------------
    def _set_property(self, args):
        opts, rest = self._units_of(args)
        if not rest:
            return 1, "", "Too few arguments.\n"
        name, assignments = rest[0], rest[1:]
        u = self.unit(name)
        if u["LoadState"] == "not-found":
            return 1, "", "Failed to set unit properties on %s: Unit %s not found.\n" % (name, name)
        pairs = []
        for a in assignments:
            key, sep, value = a.partition("=")
            if not sep or (key not in DEVICE_LISTS and key not in SCALARS):
                return 1, "", "Unknown assignment: %s\n" % a
            pairs.append((key, value))
        cfg = self.loaded[name]
        for key, value in pairs:
            self._assign(cfg, key, value)
        base = CONTROL_DIR if "--runtime" in opts else "/etc/systemd/system.control"
        section = SECTIONS[name.rsplit(".", 1)[1]]
        for key in OrderedDict((k, None) for k, _v in pairs):
            lines = ["%s=%s" % (k, v) for k, v in pairs if k == key]
            self.host.write("%s/%s.d/50-%s.conf" % (base, name, key),
                            "# This is a drop-in unit file extension, created via \"systemctl set-property\"\n"
                            "# or an equivalent operation. Do not edit.\n[%s]\n%s" % (section, "\n".join(lines)))
        self._apply(name)
        return 0, "", ""

    # -- applying to the kernel -----------------------------------------------------------------
    def majmin(self, path):
        """A device path (by-id link, /dev node) -> MAJ:MIN, or None when it does not resolve."""
        if not self.fs.exists(path):
            return None
        name = os.path.basename(self.fs.realpath(path))
        return (self.fs.read("/sys/class/block/%s/dev" % name) or "").strip() or None

    def _kwrite(self, path, line):
        try:
            self.kernel.kernel_write(path, line)
        except KernelFileError as e:
            self.journal.append(e.message)    # systemd logs the refusal and goes on

    def _apply(self, name):
        u = self.unit(name)
        cg = self.cgroup(name)
        if not u["active"] or not self.fs.isdir(cg):
            return
        if self._moving(name):
            return      # runs outside the slice its files now give it: in no slice's members, nothing applied (lab)
        cfg = self.loaded[name]
        s, lists = cfg["scalars"], cfg["lists"]
        self._kwrite(cg + "/io.weight", "default %s" % s.get("IOWeight", "100"))
        for path, value in lists["IODeviceWeight"].items():
            dev = self.majmin(path)
            if dev:
                self._kwrite(cg + "/io.weight", "%s %s" % (dev, value))
        limits = OrderedDict()
        for directive, key in LIMITS:
            for path, value in lists[directive].items():
                limits.setdefault(path, dict((k, "max") for _d, k in LIMITS))[key] = value
        for path, values in limits.items():
            dev = self.majmin(path)
            if dev:
                self._kwrite(cg + "/io.max", dev + " " + " ".join(
                    "%s=%s" % (k, parse_bytes(values[k], _DECIMAL) if values[k] != "max" else "max")
                    for _d, k in LIMITS))
        for path, value in lists["IODeviceLatencyTargetSec"].items():
            dev = self.majmin(path)
            if dev:
                self._kwrite(cg + "/io.latency", "%s target=%s" % (dev, parse_timespan(value)))
        for directive, filename, default in MEMORY:
            if directive == "MemoryZSwapMax" and self.version < 253:
                continue
            value = s.get(directive)
            self._kwrite(cg + "/" + filename, default if value is None else str(parse_bytes(value, _BINARY)))
        self._cpuset(cg, s)
        self._kwrite(cg + "/cpu.weight", s.get("CPUWeight", "100"))
        period = parse_timespan(s["CPUQuotaPeriodSec"]) if "CPUQuotaPeriodSec" in s else 100000
        if "CPUQuota" in s:
            self._kwrite(cg + "/cpu.max", "%d %d" % (quota_per_sec(s["CPUQuota"]) * period // 1000000, period))
        else:
            self._kwrite(cg + "/cpu.max", "max %d" % period)

    def _cpuset(self, cg, scalars):
        """AllowedCPUs=/AllowedMemoryNodes= (244+): systemd enables cpuset from the root down to the unit's parent
        where the root offers it, then writes the sets in list form ('' when unset)."""
        if self.version < 244:
            return
        if any(d in scalars for d, _f in CPUSETS):
            rel = [p for p in cg[len(self.kernel.mount):].split("/") if p]
            for i in range(len(rel)):
                directory = "/".join([self.kernel.mount] + rel[:i])
                if "cpuset" in self.kernel._tokens(directory, "cgroup.controllers"):
                    self.kernel._enable(directory, ["cpuset"])
        for directive, filename in CPUSETS:
            if self.fs.exists(cg + "/" + filename):
                self._kwrite(cg + "/" + filename, format_list(cpu_set(scalars.get(directive, ""))))

    # -- show -----------------------------------------------------------------------------------
    def properties(self, name):
        """[(property, value)] as ``systemctl show`` prints them (device lists repeat the property)."""
        name = self.aliases.get(name, name)
        u = self.unit(name)
        cfg = self.loaded[name]
        s, lists = cfg["scalars"], cfg["lists"]

        def yes(key):
            return "yes" if s.get(key, "no") in ("yes", "true", "1", "on") else "no"

        files = self._files(name)
        dropins = [f for f in files if f != u["FragmentPath"]]
        out = [("Id", self.aliases.get(name, name)), ("LoadState", u["LoadState"]),
               ("ActiveState", "active" if u["active"] else "inactive"),
               ("FragmentPath", u["FragmentPath"]), ("DropInPaths", " ".join(dropins)),
               ("ControlGroup", "/" + self._rel(name) if u["active"] else ""),
               ("Delegate", "yes" if u["Delegate"] else "no"), ("IOAccounting", yes("IOAccounting")),
               ("IOWeight", s.get("IOWeight", "[not set]"))]
        out += [("IODeviceWeight", "%s %s" % kv) for kv in lists["IODeviceWeight"].items()]
        for directive, _key in LIMITS:
            for path, value in lists[directive].items():
                number = parse_bytes(value, _DECIMAL)
                if number != "max":     # systemd lists only the devices whose limit is not the default
                    out.append((directive, "%s %s" % (path, number)))
        out += [("IODeviceLatencyTargetUSec", "%s %s" % (path, format_timespan(parse_timespan(value))))
                for path, value in lists["IODeviceLatencyTargetSec"].items()]
        out.append(("MemoryAccounting", yes("MemoryAccounting")))
        for directive, _filename, default in MEMORY:
            if directive == "MemoryZSwapMax" and self.version < 253:
                continue
            value = parse_bytes(s[directive], _BINARY) if directive in s else default
            out.append((directive, "infinity" if value == "max" else str(value)))
        out.append(("CPUWeight", s.get("CPUWeight", "[not set]")))
        out.append(("CPUQuotaPerSecUSec", format_timespan(quota_per_sec(s["CPUQuota"])) if "CPUQuota" in s
                    else "infinity"))
        out.append(("CPUQuotaPeriodUSec", format_timespan(parse_timespan(s["CPUQuotaPeriodSec"]))
                    if "CPUQuotaPeriodSec" in s else "infinity"))
        if self.version >= 244:
            out += [(d, format_list(cpu_set(s.get(d, "")))) for d, _f in CPUSETS]
        if not name.endswith(".slice"):
            out.append(("Slice", self.configured_slice(name)))
        return out

    def _show(self, args):
        opts, units = self._units_of(args)
        wanted, value_only, i = [], False, 0
        while i < len(opts):
            if opts[i] in ("-p", "--property"):
                wanted.append(opts[i + 1])
                i += 2
                continue
            if opts[i] == "--value":
                value_only = True
            i += 1
        lines = []
        for index, name in enumerate(units):
            if index:
                lines.append("")        # systemctl show separates units by a blank line
            if name in self.transient or name.endswith(".timer"):
                record = self.transient.get(name)
                props = [("Id", name), ("LoadState", "loaded" if record else "not-found"),
                         ("ActiveState", "inactive" if not record or record["SubState"] == "dead" else
                          "activating" if record["SubState"] == "start" else "active"),
                         ("SubState", record["SubState"] if record else "dead"),
                         ("Description", record["Description"] if record else name)]
                for prop in wanted or [p for p, _v in props]:
                    lines.extend(v if value_only else "%s=%s" % (k, v) for k, v in props if k == prop)
                continue
            props = self.properties(name)
            for prop in wanted or [p for p, _v in props]:
                for key, value in props:
                    if key == prop:
                        lines.append(value if value_only else "%s=%s" % (key, value))
        return 0, "".join(line + "\n" for line in lines), ""
