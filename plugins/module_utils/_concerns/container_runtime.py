# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Containers into slices: the container runtimes' default cgroup parent, and where running containers are.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

:func:`part` is the container_runtime module behind its argument spec. For a host where one runtime serves one
tenant, each entry of ``runtimes`` names a runtime and the tenant's slice:

* **Docker** (:data:`RUNTIMES` ``docker``): ``/etc/docker/daemon.json`` gets ``"cgroup-parent": "<slice>"`` and
  ``native.cgroupdriver=systemd`` in ``exec-opts``, merged into the user's file: every other key and every other
  exec-opt stays as the user wrote it (a ``native.cgroupdriver=cgroupfs`` is replaced: a slice is a systemd
  parent). dockerd reads the file only when it starts: a running daemon that started before the file changed is
  restarted only with ``restart`` (the roles' ``io_isolation_restart_ok``), else it is listed in
  ``restart_required``. A restart stops the containers that have no restart policy: that is why it is opt-in.
* **Podman** (``podman``): libpod has no setting for its containers' default parent (containers.conf has no such
  key: checked against containers.conf(5) and containers/common's configuration); a rootful container started
  without ``--cgroup-parent`` goes to ``machine.slice``, hard-coded. So the only slice a Podman entry takes is
  ``machine.slice``, and the tenant is the slice: its settings go on ``machine.slice`` (the roles do that). What the
  module writes is ``cgroup_manager = "systemd"`` in ``[engine]`` of ``/etc/containers/containers.conf``: that one
  key, the rest of the file byte for byte. Podman has no daemon; the next ``podman run`` reads it.

Before a runtime's file is first edited, its original (bytes, mode, or that it did not exist) is kept in a stamped
copy (:class:`_persist.Original`); ``state: absent`` and purge put it back byte for byte when the file still holds
what this module made of it, and otherwise take out only this module's keys (the user's later edits stay) and say
so. A file that does not parse is refused with nothing written.

The placement check (``check``): every container's cgroup is read from cgroupfs (``docker-<id>.scope``,
``libpod-<id>.scope`` below any slice; no runtime command, so it works whether or not the daemon answers), and a
container outside its tenant's slice is reported in ``outside``: a runtime listed in ``runtimes`` expects its
containers below its slice or one of ``tenant_slices`` (a Podman container started with
``--cgroup-parent=inference.slice`` by the user's own tooling is placed, not only the ones in ``machine.slice``); any
other runtime's containers below one of ``tenant_slices``. The check writes nothing and changes nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time
from collections import OrderedDict

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import slice_path, validate_unit_name
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    CONTAINERS_CONF, DOCKER_DAEMON_JSON, Original, read_exact, write_exact,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, RequestError, Setting, run_part

MODULE = "container_runtime"
# Podman's parent for a rootful container without --cgroup-parent under the systemd manager (libpod's
# SystemdDefaultCgroupParent); Docker's under the systemd driver is system.slice.
PODMAN_PARENT = "machine.slice"
# dockerd refuses to start when a daemon.json key is also given as a flag
DOCKER_FLAGS = {"cgroup-parent": "--cgroup-parent", "exec-opts": "--exec-opt"}
CGROUP_DRIVER = "native.cgroupdriver="


class Runtime:
    """One container runtime: its configuration file, its daemon's service (None: no daemon), the scope name its
    containers get under the systemd driver, and where they go without a parent."""

    def __init__(self, name, config, service, scope, default_parent):
        self.name = name
        self.config = config
        self.service = service
        self.scope = re.compile(scope)
        self.default_parent = default_parent


RUNTIMES = OrderedDict((r.name, r) for r in (
    Runtime("docker", DOCKER_DAEMON_JSON, "docker.service", r"^docker-([0-9a-f]{64})\.scope$", "system.slice"),
    Runtime("podman", CONTAINERS_CONF, None, r"^libpod-([0-9a-f]{64})\.scope$", PODMAN_PARENT),
))


class ConfigError(ValueError):
    """A runtime's file this module cannot edit (it does not parse); the message names the file and the fix."""


# ---------------------------------------------------------------------------------------------
# Docker: daemon.json, a JSON merge
# ---------------------------------------------------------------------------------------------

def _json(text, path):
    try:
        data = json.loads(text, object_pairs_hook=OrderedDict)
    except ValueError as e:
        raise ConfigError("%s does not parse as JSON (%s): dockerd would not start with it either; fix the file "
                          "(python3 -m json.tool %s shows where), then run again" % (path, e, path))
    if not isinstance(data, dict):
        raise ConfigError("%s holds a JSON %s, not an object: dockerd takes an object ({...}); fix the file"
                          % (path, type(data).__name__))
    return data


def _dump(data):
    return json.dumps(data, indent=2, separators=(",", ": ")) + "\n"


def _exec_opts(data, path):
    opts = data.get("exec-opts", [])
    if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
        raise ConfigError("%s: exec-opts is %r, not a list of strings as dockerd takes it; fix the file"
                          % (path, opts))
    return opts


def docker_merge(text, slice_name, path=DOCKER_DAEMON_JSON):
    """daemon.json's text (None: no file) with the slice as the default cgroup parent under the systemd driver; the
    text itself when it holds both already (the user's formatting kept), else the merged object re-written."""
    data = _json(text, path) if text is not None and text.strip() else OrderedDict()
    opts = _exec_opts(data, path)
    want = [o for o in opts if not o.replace(" ", "").startswith(CGROUP_DRIVER)] + [CGROUP_DRIVER + "systemd"]
    if text is not None and data.get("cgroup-parent") == slice_name and \
            [o.replace(" ", "") for o in opts if o.replace(" ", "").startswith(CGROUP_DRIVER)] == [want[-1]]:
        return text
    data["cgroup-parent"] = slice_name
    data["exec-opts"] = want
    return _dump(data)


def docker_unmerge(text, original, path=DOCKER_DAEMON_JSON):
    """daemon.json's text with this module's keys as they were in ``original`` (None: absent) and everything the user
    changed since kept; None when nothing else is left of a file that did not exist."""
    data = _json(text, path) if text is not None and text.strip() else OrderedDict()
    before = _json(original, path) if original is not None and original.strip() else OrderedDict()
    for key in ("cgroup-parent", "exec-opts"):
        if key in before:
            data[key] = before[key]
        else:
            data.pop(key, None)
    if original is None and not data:
        return None
    return _dump(data)


def docker_parent(text):
    """The cgroup-parent a daemon.json text sets (None: none, or the text does not parse)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return None
    return data.get("cgroup-parent") if isinstance(data, dict) else None


# ---------------------------------------------------------------------------------------------
# Podman: containers.conf, one TOML key
# ---------------------------------------------------------------------------------------------

_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")
_MANAGER = re.compile(r"^(\s*cgroup_manager\s*=\s*)(\"[^\"]*\"|'[^']*')(.*)$")


def _toml_check(text, path):
    """Raise ConfigError when ``text`` is no TOML (tomllib where the host's Python has it, 3.11+)."""
    try:
        import tomllib  # novermin (guarded: the ImportError path below serves Python < 3.11)
    except ImportError:
        tomllib = None
    if tomllib is None:
        # Python < 3.11 has no TOML parser: at least the table headers this module edits by must be whole
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("[") and not line.lstrip().startswith("[[") and not _TABLE.match(line) \
                    and "=" not in line and not line.strip().endswith(","):
                raise ConfigError("%s line %d (%r) is no TOML table header; fix the file" % (path, number, line))
        return
    try:
        tomllib.loads(text)
    except Exception as e:  # tomllib.TOMLDecodeError, a ValueError
        raise ConfigError("%s does not parse as TOML (%s): Podman would refuse it too; fix the file, then run again"
                          % (path, e))


def podman_merge(text, path=CONTAINERS_CONF, value="systemd"):
    """containers.conf's text (None: no file) with ``cgroup_manager = "<value>"`` in ``[engine]``: only that line
    written or added, every other byte as it was."""
    if text is None:
        return "[engine]\ncgroup_manager = \"%s\"\n" % value
    _toml_check(text, path)
    lines = text.splitlines(True)
    table, engine_at = None, None
    for i, line in enumerate(lines):
        m = _TABLE.match(line)
        if m:
            table = m.group(1)
            if table == "engine" and engine_at is None:
                engine_at = i
            continue
        if table == "engine":
            k = _MANAGER.match(line.rstrip("\r\n"))
            if k:
                if k.group(2).strip("\"'") == value:
                    return text
                ending = line[len(line.rstrip("\r\n")):]
                return "".join(lines[:i] + ["%s\"%s\"%s%s" % (k.group(1), value, k.group(3), ending)] + lines[i + 1:])
    entry = "cgroup_manager = \"%s\"\n" % value
    if engine_at is None:
        # no [engine] table: one at the end, after a blank line
        sep = "" if text.endswith("\n") or not text else "\n"
        return text + sep + ("\n" if text.strip() else "") + "[engine]\n" + entry
    if not lines[engine_at].endswith("\n"):
        return "".join(lines[:engine_at]) + lines[engine_at] + "\n" + entry + "".join(lines[engine_at + 1:])
    return "".join(lines[:engine_at + 1] + [entry] + lines[engine_at + 1:])


def podman_unmerge(text, original, path=CONTAINERS_CONF):
    """containers.conf's text with ``cgroup_manager`` as ``original`` had it (its line put back, or taken out)."""
    if text is None:
        return None
    m = None
    table = None
    for line in (original or "").splitlines():
        t = _TABLE.match(line)
        if t:
            table = t.group(1)
        elif table == "engine" and _MANAGER.match(line):
            m = _MANAGER.match(line).group(2).strip("\"'")
    if m is not None:
        return podman_merge(text, path, m)
    out, table = [], None
    for line in text.splitlines(True):
        t = _TABLE.match(line)
        if t:
            table = t.group(1)
        elif table == "engine" and _MANAGER.match(line.rstrip("\r\n")):
            continue
        out.append(line)
    result = "".join(out)
    if original is None and result.strip() in ("", "[engine]"):
        return None
    return result


# ---------------------------------------------------------------------------------------------
# The settings
# ---------------------------------------------------------------------------------------------

class ConfigFile(Setting):
    """A runtime's own configuration file (not this collection's: never stamped), as text; None = no file. Written
    atomically with the mode it had (0644 for a new one)."""

    order = 10

    def __init__(self, runtime, content):
        super(ConfigFile, self).__init__(runtime.config, content)
        self.runtime = runtime
        self.path = runtime.config
        self.mode = 0o644

    def read(self, fs):
        text = read_exact(fs, self.path)
        info = fs.stat(self.path) if text is not None else None
        if info is not None:
            self.mode = info.st_mode & 0o7777
        return text

    def write(self, fs, value, current):
        write_exact(fs, self.path, value, self.mode)


class DaemonRestart(Setting):
    """A runtime daemon that must read its file again. Value: ``{"active": bool, "stale": bool}``, ``stale`` when
    the daemon runs and started before the file's last change (or this call changes it). It differs only with
    ``restart`` and a stale daemon; writing restarts the service. A restart is not undone: restoring does nothing."""

    order = 30

    def __init__(self, runtime, config, restart, runner):
        super(DaemonRestart, self).__init__(runtime.service, {"active": None, "stale": False})
        self.runtime = runtime
        self.config = config
        self.restart = restart
        self.runner = runner

    def read(self, fs):
        info = sd.show_units(self.runner, [self.runtime.service],
                             ("LoadState", "ActiveState", "ExecMainStartTimestampMonotonic"))[self.runtime.service]
        active = info["ActiveState"] in ("active", "reloading", "activating")
        stale = False
        if active:
            changing = self.config.read(fs) != self.config.desired
            stat = fs.stat(self.config.path)
            try:
                started_mono = int(info["ExecMainStartTimestampMonotonic"] or 0) / 1e6
            except ValueError:
                started_mono = 0
            started = time.time() - (time.monotonic() - started_mono)
            stale = changing or (stat is not None and stat.st_mtime > started)
        self.desired = {"active": active, "stale": False if self.restart else stale}
        return {"active": active, "stale": stale}

    def write(self, fs, value, current):
        self.runner.run(sd.restart_argv(self.runtime.service))

    def restore(self, fs, previous):
        """A restart is not undone."""


def _flag_problems(runner, runtime):
    """The daemon.json keys this module sets that the service's command line gives as flags too (dockerd then
    refuses to start)."""
    info = sd.show_units(runner, [runtime.service], ("LoadState", "ExecStart"))[runtime.service]
    if info["LoadState"] != "loaded":
        return []
    return ["%s: %s's command line has %s, and daemon.json would set %s too: dockerd refuses to start with a setting "
            "given both ways. Take the flag out of the unit (a drop-in with ExecStart=), then run again"
            % (runtime.config, runtime.service, flag, key)
            for key, flag in DOCKER_FLAGS.items() if flag in info["ExecStart"]]


# ---------------------------------------------------------------------------------------------
# The placement check: where running containers are
# ---------------------------------------------------------------------------------------------

def containers(fs, root=CGROUP_ROOT):
    """[{runtime, id, cgroup}] of every container cgroup below any slice (the systemd driver's scopes), sorted."""
    out = []

    def walk(rel, depth):
        for entry in fs.listdir("%s/%s" % (root, rel) if rel else root):
            path = "%s/%s" % (rel, entry) if rel else entry
            if entry.endswith(".slice") and depth < 8:
                walk(path, depth + 1)
                continue
            for runtime in RUNTIMES.values():
                m = runtime.scope.match(entry)
                if m and fs.isdir("%s/%s" % (root, path)):
                    out.append({"runtime": runtime.name, "id": m.group(1)[:12], "cgroup": "/" + path})
    walk("", 0)
    return sorted(out, key=lambda c: (c["runtime"], c["cgroup"]))


def below(cgroup, slice_name):
    """True when a cgroup path is below a slice."""
    rel = slice_path(slice_name)
    return cgroup.startswith("/%s/" % rel)


def check(fs, expected, tenant_slices):
    """The running containers, each with where it is expected (its runtime's slice or any tenant slice: a container
    started with ``--cgroup-parent`` into a tenant's slice is placed, whichever runtime started it) and whether it is
    outside."""
    out = []
    for c in containers(fs):
        own = [expected[c["runtime"]]] if c["runtime"] in expected else []
        want = own + [s for s in tenant_slices if s not in own]
        c["expected"] = want
        c["outside"] = bool(want) and not any(below(c["cgroup"], s) for s in want)
        out.append(c)
    return out


# ---------------------------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------------------------

def _slice_problem(name):
    if not isinstance(name, str) or not name.endswith(".slice"):
        return "%r is not a slice name (such as training.slice)" % (name,)
    if name == "-.slice":
        return "-.slice is the root slice; containers run in a slice below it"
    problems = validate_unit_name(name)
    return "; ".join(problems) if problems else None


class Request:
    def __init__(self, params, fs, runner):
        self.fs, self.runner = fs, runner
        self.state = params.get("state") or "present"
        self.restart = bool(params.get("restart"))
        self.do_check = params.get("check", True) is not False
        self.errors, self.warnings = [], []
        self.entries = OrderedDict()
        for index, entry in enumerate(params.get("runtimes") or []):
            self._entry(index, entry)
        self.tenant_slices = []
        for name in params.get("tenant_slices") or []:
            problem = _slice_problem(name)
            if problem:
                self.errors.append("tenant_slices: %s" % problem)
            elif name not in self.tenant_slices:
                self.tenant_slices.append(name)
        for e in self.entries.values():
            if e["slice"] and e["slice"] not in self.tenant_slices:
                self.tenant_slices.append(e["slice"])

    def _entry(self, index, entry):
        label = entry.get("label") or "runtimes[%d]" % index
        name, slice_name = entry.get("name"), entry.get("slice")
        if name not in RUNTIMES:
            self.errors.append("%s: %r is no runtime this module configures (%s)" % (label, name, ", ".join(RUNTIMES)))
            return
        if name in self.entries:
            self.errors.append("%s: %s is listed twice (also %s); a runtime serves one tenant here: list it once, and "
                               "start the other tenant's containers with --cgroup-parent"
                               % (label, name, self.entries[name]["label"]))
            return
        if self.state == "present":
            problem = _slice_problem(slice_name)
            if problem:
                self.errors.append("%s: slice: %s" % (label, problem))
                return
            if name == "podman" and slice_name != PODMAN_PARENT:
                self.errors.append(
                    "%s: Podman has no setting for its containers' default cgroup parent (containers.conf has no "
                    "such key; libpod puts a rootful container without --cgroup-parent in %s): give slice: %s and "
                    "put the tenant's settings on that slice (the roles do: <role>_container_runtimes), or start the "
                    "containers with --cgroup-parent=%s" % (label, PODMAN_PARENT, PODMAN_PARENT, slice_name))
                return
        self.entries[name] = {"label": label, "runtime": RUNTIMES[name], "slice": slice_name}

    def settings(self):
        """The engine settings: per runtime its original's copy, its file, and its daemon's restart."""
        out = []
        for e in self.entries.values():
            runtime = e["runtime"]
            original = Original(runtime.config, MODULE)
            text = ConfigFile(runtime, None).read(self.fs)
            try:
                if self.state == "present":
                    original.keep(self.fs)
                    desired = (docker_merge(text, e["slice"], runtime.config) if runtime.name == "docker"
                               else podman_merge(text, runtime.config))
                else:
                    desired, original.desired = self._restored(runtime, text, original), None
            except ConfigError as err:
                self.errors.append("%s: %s" % (e["label"], err))
                continue
            if runtime.service and self.state == "present" and desired != text:
                self.errors.extend("%s: %s" % (e["label"], p) for p in _flag_problems(self.runner, runtime))
            config = ConfigFile(runtime, desired)
            if self.state == "absent" and original.read(self.fs) is None and desired == text:
                continue        # nothing of this module's: leave the user's file and its daemon alone
            out.extend([original, config])
            if runtime.service and self._has_service(runtime):
                out.append(DaemonRestart(runtime, config, self.restart, self.runner))
        return out

    def _has_service(self, runtime):
        info = sd.show_units(self.runner, [runtime.service], ("LoadState",))[runtime.service]
        return info["LoadState"] == "loaded"

    def _restored(self, runtime, text, original):
        """What ``state: absent`` leaves: the original byte for byte when the file is still what this module made of
        it, else the file with only this module's keys put back (the user's later edits kept, and a warning)."""
        data = self.fs.read_bytes(original.path)
        parsed = Original.parse(data) if data is not None else None
        if data is not None and parsed is None:
            raise ConfigError("%s is no copy this module wrote (it does not parse): move it away, then run again"
                              % original.path)
        if parsed is None:
            return text     # no copy of an original: nothing of this module's to take back
        present, mode, before = parsed
        before_text = before.decode("utf-8", "surrogateescape") if present else None
        ours = (docker_merge(before_text, self.entries_slice(runtime, text), runtime.config) if runtime.name == "docker"
                else podman_merge(before_text, runtime.config))
        if text == ours or text == before_text:
            return before_text
        self.warnings.append("%s changed since this module wrote it: only its own keys were put back as they were, "
                             "and the other changes kept (the original is not restored byte for byte)"
                             % runtime.config)
        return docker_unmerge(text, before_text, runtime.config) if runtime.name == "docker" else \
            podman_unmerge(text, before_text, runtime.config)

    def entries_slice(self, runtime, text):
        """The slice the file holds now (what this module wrote there), for comparing it with the original's merge."""
        return docker_parent(text) if runtime.name == "docker" else None


def _report(req, settings):
    def report(result, check_mode):
        values, before, after = result["values"], result["diff"]["before"], result["diff"]["after"]
        restart_required, restarted, runtimes = [], [], OrderedDict()
        for s in settings:
            if isinstance(s, DaemonRestart):
                value = values.get(s.key) or {}
                if s.restart and (s.key in after if not check_mode else value.get("stale")):
                    restarted.append(s.key)
                elif value.get("stale"):
                    restart_required.append(s.key)
                    req.warnings.append(
                        "%s runs with its old configuration until it is restarted (containers without a restart "
                        "policy stop): restart it, or set restart (the roles: io_isolation_restart_ok)" % s.key)
        for name, e in req.entries.items():
            runtime = e["runtime"]
            runtimes[name] = {"config": runtime.config, "slice": e["slice"] if req.state == "present" else None,
                              "state": req.state, "original": Original.for_path(runtime.config),
                              "changed": runtime.config in after or runtime.config in before}
        out = {"changed": result["changed"], "diff": result["diff"], "runtimes": runtimes,
               "restart_required": restart_required, "restarted": restarted, "warnings": list(req.warnings)}
        if req.do_check:
            expected = dict((n, e["slice"]) for n, e in req.entries.items() if req.state == "present")
            found = check(req.fs, expected, req.tenant_slices)
            out["containers"] = found
            out["outside"] = [c for c in found if c["outside"]]
            for c in out["outside"]:
                out["warnings"].append("%s container %s runs in %s, outside %s" % (
                    c["runtime"], c["id"], c["cgroup"], " and ".join(c["expected"])))
        return out
    return report


# The module's options (AnsibleModule keywords); host_profile checks its container_runtime section with the same.
MODULE_SPEC = {"argument_spec": dict(
    runtimes={"type": "list", "elements": "dict", "default": [], "options": {
        "name": {"type": "str", "required": True, "choices": list(RUNTIMES)},
        "slice": {"type": "str"},
        "label": {"type": "str"},
    }},
    tenant_slices={"type": "list", "elements": "str", "default": []},
    state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    restart={"type": "bool", "default": False},
    check={"type": "bool", "default": True},
)}


def part(params, fs, runner):
    """The request as an engine part; raises RequestError listing every refusal (nothing written)."""
    req = Request(params, fs, runner)
    if req.errors:
        raise RequestError(req.errors)
    settings = req.settings()
    if req.errors:
        raise RequestError(req.errors)
    return Part(settings, [], _report(req, settings))


def run(params, fs, runner, check_mode):
    """The module call: the runtimes' files, their daemons' restarts, and the placement check."""
    return run_part(fs, part(params, fs, runner), check_mode)


def purge(p):
    """purge's step: every runtime file with a copy of its original put back (state=absent); no daemon restarts."""
    names = [name for name, runtime in RUNTIMES.items()
             if any(path == Original.for_path(runtime.config) for _owner, path in p.owned)]
    if names:
        p.step(MODULE, lambda: run({"runtimes": [{"name": n} for n in names], "state": "absent", "restart": False,
                                    "check": False, "tenant_slices": []}, p.fs, p.runner, p.check_mode))
