# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One workload group's io/memory/cpu request, checked and reconciled through systemd or cgroupfs.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

:func:`reconcile` is the whole cgroup module behind its argument spec:

1. the name's own form (unit or path), then the manager (``auto``: systemd for a unit on a
   systemd host) and the host: cgroup v2, and for cgroupfs on a systemd host a group below a
   ``Delegate=yes`` service or scope;
2. the knobs of ``_cgroup_knobs`` the request gives: feature detection (io.latency,
   io.prio.class, io.low, io.weight exist only with their kernel options) and what the manager
   can carry (systemd has no directive for io.prio.class, io.low, memory.oom.group);
   ``when_unsupported: warn`` skips such keys with a warning;
3. devices through the shared resolver; per-device io.weight needs iocost initialised on the
   disk, and a weight on a group whose disks all run without iocost does nothing (warning);
4. the settings: for systemd one :class:`_systemd.UnitState` (drop-in + live apply + verify),
   for cgroupfs the group directory, the ancestors' ``cgroup.subtree_control`` and the files;
5. the reconcile engine runs them (check mode, diff, read-back, restore on failure).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import cgroup_knobs as knobs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import topology
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import detect
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import (
    CGROUP_ROOT, CgroupNameError, GroupDir, GroupFile, SubtreeControl, ancestors, child_groups, controller_of,
    controllers, has_members, is_unit_name, resolve,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    SYSTEMD_DROPIN_NAME, SYSTEMD_UNIT_DIR, is_managed, owned_units,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, RequestError, run_part

IOCOST_MODULE = "aiinfra.io_isolation.iocost"


def _clean(group):
    return dict((k, v) for k, v in (group or {}).items() if v is not None)


class Request:
    """The module's parameters, checked in the order that names the real reason for a refusal.

    First the input's own form, before the host is even asked: the name (a unit or a path; a
    unit-like name with shell metacharacters is an invalid unit name) and each value a kernel may
    lack the file for (io.prio_class 3 is no policy on any kernel); then the host (systemd, cgroup
    v2, who owns the group); then what the kernel and the manager can carry (a knob whose kernel
    file is missing is refused for that); last the per-device values, against this kernel.
    """

    def __init__(self, params, fs, runner):
        self.fs, self.runner = fs, runner
        self.params = params
        self.state = params.get("state") or "present"
        self.errors, self.warnings = [], []
        self.values = dict((group, _clean(params.get(group))) for group in knobs.GROUPS)
        self.name = (params.get("name") or "").strip()
        self.path, unit = self._name()
        self.systemd_host = sd.systemd_host(fs)
        self.version = sd.systemd_version(runner) if self.systemd_host else None
        self.caps = detect(fs, systemd_version=self.version)
        self.manager = self._manager(params.get("manager") or "auto", unit)
        self.resolver = DeviceResolver(fs)   # one sysfs walk for every lookup of the call
        self.records = {}
        self.planned_qos = {}   # io.cost.qos lines an iocost part of the same engine run puts in place
        self.boost = None       # the slice's boost window (cgroup_boost), when it has one

    # -- checks -------------------------------------------------------------------------------
    def _name(self):
        """(cgroupfs directory, is a unit name) from the name's own form; RequestError when malformed."""
        try:
            path = resolve(self.name)
        except CgroupNameError as e:
            raise RequestError(str(e))
        if path == CGROUP_ROOT:
            raise RequestError("%r is the root cgroup; give a group below it (a slice, or a path such as "
                               "'system.slice/runtime.service/workloads/inference')" % self.name)
        unit = is_unit_name(self.name)
        if unit:
            try:
                sd.unit_section(self.name)
            except sd.SystemdError as e:
                raise RequestError(e.errors)
        return path, unit

    def _manager(self, wanted, unit):
        if wanted == "auto":
            return "systemd" if unit and self.systemd_host else "cgroupfs"
        if wanted == "systemd" and not unit:
            raise RequestError("manager: systemd needs a systemd unit name (inference.slice, vllm.service, ...), not "
                               "the path %r; use manager: cgroupfs for a path below a Delegate=yes unit" % self.name)
        if wanted == "systemd" and not self.systemd_host:
            raise RequestError("manager: systemd, but this host does not run systemd (/run/systemd/system is "
                               "missing); use manager: cgroupfs")
        return wanted

    def check_host(self):
        """cgroup v2, and for cgroupfs on a systemd host a group below a Delegate=yes unit; returns the top.

        The top is the directory the module may create groups and enable controllers from.
        """
        if self.state == "present" and self.caps["cgroup"]["mode"] != "unified":
            raise RequestError("this host does not run the cgroup v2 unified hierarchy (mode: %s); the cgroup module "
                               "needs it: boot with systemd.unified_cgroup_hierarchy=1" % self.caps["cgroup"]["mode"])
        if self.manager != "cgroupfs" or not self.systemd_host:
            return CGROUP_ROOT
        try:
            info = sd.delegation(self.runner, self.fs, self.path)
        except sd.SystemdError as e:
            raise RequestError(e.errors)
        refusal = sd.cgroupfs_refusal(info)
        if refusal:
            raise RequestError(refusal)
        return info["unit_path"]

    def missing_unit(self):
        """With ``when_missing: skip``, why a systemd unit this request configures is not on the host (systemd:
        LoadState=not-found), else None: the io_baseline role configures the container runtime's unit only where
        the host has one. A slice is never missing (systemd makes one when it is asked for)."""
        if self.params.get("when_missing") != "skip" or self.manager != "systemd" or self.state != "present" \
                or self.name.endswith(".slice"):
            return None
        if sd.unit_info(self.runner, self.name)["LoadState"] != "not-found":
            return None
        return "%s is not a unit on this host (systemd: LoadState=not-found): nothing configured" % self.name

    def unsupported(self, knob, message):
        """Fail, or with when_unsupported=warn drop the knob and warn."""
        if self.params.get("when_unsupported") == "warn":
            self.warnings.append("%s (skipped: when_unsupported=warn)" % message)
            self.values[knob.group].pop(knob.key, None)
        else:
            self.errors.append(message)

    def check_forms(self):
        """The own form of each value a kernel may lack the file for, before anything about the host.

        A value no kernel takes (io.prio_class 3) is refused for that, not for what this kernel or
        manager lacks; per-device values are checked once their disks resolve.
        """
        if self.state != "present":
            return
        for knob in knobs.KNOBS:
            if not knob.gate or knob.per_device or knob.key not in self.values[knob.group]:
                continue
            value = self.values[knob.group][knob.key]
            problems = knob.codec.validate({knob.line: value} if knob.line else value)
            if problems:
                # the codec names the kernel file; the option is what the task wrote
                self.errors.extend("%s: %s" % (knob.name, p) for p in problems)
                self.values[knob.group].pop(knob.key)

    def check_features(self):
        """Knobs this kernel has no file for, or the manager cannot carry, before any value is looked at."""
        files = self.caps["cgroup"].get("io_files", {})
        root_controllers = self.caps["cgroup"].get("controllers") or []
        for knob in knobs.KNOBS:
            if not knob.gate or knob.key not in self.values[knob.group]:
                continue
            # None: unknown (no group with io enabled yet and no kernel config to read); the write and
            # its read-back tell then.
            if files.get(knob.file) is False:
                self.unsupported(knob, "%s needs the kernel file %s, which this kernel (%s) does not have: %s"
                                 % (knob.name, knob.file, self.caps["kernel"]["release"], knob.gate))
            elif knob.file not in files and knob.controller not in root_controllers:
                # systemd too needs the controller: without it AllowedCPUs= is dropped with a log line only
                self.unsupported(knob, "%s needs the cgroup controller %s (kernel file %s), and this host (kernel %s) "
                                 "does not offer it: %s (%s/cgroup.controllers: %s)"
                                 % (knob.name, knob.controller, knob.file, self.caps["kernel"]["release"], knob.gate,
                                    CGROUP_ROOT, " ".join(root_controllers) or "none"))
        if self.manager == "systemd":
            for knob in knobs.KNOBS:
                if not knob.systemd and knob.key in self.values[knob.group]:
                    self.unsupported(knob, sd.unsupported_message(knob.name, self.name))

    def check_within_host(self):
        """Values that name host resources (a cpuset's CPUs and memory nodes) against what the host has now: a CPU
        that is not online or a node without memory is refused here, before any write (the kernel would take an
        offline CPU and leave it out of cpuset.cpus.effective, and systemd drops a line the kernel refuses)."""
        if self.state != "present":
            return
        for knob in knobs.KNOBS:
            if knob.within is None or knob.key not in self.values[knob.group]:
                continue
            value = self.values[knob.group][knob.key]
            if knob.codec.validate(value):
                continue    # its form is reported by check_forms
            available, source, what = topology.available(self.fs, knob.within)
            self.errors.extend(topology.check_set(knob.codec, knob.codec.normalize(value), knob.name, available,
                                                  source, what))

    def resolve_devices(self):
        for knob in knobs.KNOBS:
            mapping = self.values[knob.group].get(knob.key) if knob.per_device else None
            if mapping is None:
                continue
            if not isinstance(mapping, dict):
                self.errors.append("%s: expected a mapping of device to value, got %r" % (knob.name, mapping))
                self.values[knob.group].pop(knob.key)
                continue
            seen = {}
            for selector in mapping:
                try:
                    # iocost, which implements io.weight, runs on blk-mq disks only.
                    rec = self.resolver.resolve(selector, require_mq=knob.file == "io.weight")
                except DeviceError as e:
                    self.errors.append("%s: %s" % (knob.name, e.message))
                    continue
                if rec.majmin in seen:
                    self.errors.append("%s: %r and %r are the same disk %s; list each disk once"
                                       % (knob.name, seen[rec.majmin], selector, rec.name))
                seen[rec.majmin] = selector
                self.records[selector] = rec

    def check_iocost(self):
        """Per-device weights need iocost initialised on the disk; weights without iocost do nothing."""
        io = self.values["io"]
        if self.state != "present" or not ("weight" in io or "weights" in io):
            return
        text = self.fs.read(CGROUP_ROOT + "/io.cost.qos")
        qos = codecs.IO_COST_QOS.parse(text) if text is not None else {}
        qos.update(self.planned_qos)
        for selector in io.get("weights", {}):
            rec = self.records.get(selector)
            if rec is not None and rec.majmin not in qos:
                self.errors.append(
                    "io.weights: enable iocost on %s first (%s): a per-device io.weight needs iocost initialised on "
                    "the disk (the kernel answers EOPNOTSUPP, and systemd silently drops the IODeviceWeight= line)"
                    % (rec.name, IOCOST_MODULE))
        # The default weight acts on every disk the group reads or writes; overrides on their disks.
        used = [self.records[s] for s in io.get("weights", {}) if s in self.records] if "weight" not in io \
            else [d for d in self.resolver.list_disks() if d.has_mq]
        if used and not any((qos.get(r.majmin) or {}).get("enable") == 1 for r in used):
            names = ", ".join(sorted(r.name for r in used))
            self.warnings.append(
                "io weights are set for %s, but iocost is disabled on every disk they apply to (%s): weights do "
                "nothing until %s enables it (qos enable=1)" % (self.name, names, IOCOST_MODULE))

    def io_limits(self):
        """{"io.latency": {MAJ:MIN: target set}} for the disks this request names (``removed``: the group goes,
        with every line it had): what iocost's conflict rules read (_iocost.LIMIT_FILES)."""
        if self.state != "present":
            return {"removed": True}
        out = {"io.latency": {}}
        for selector, value in (self.values["io"].get("latency") or {}).items():
            if selector in self.records:
                target = value.get("target") if isinstance(value, dict) else value
                out["io.latency"][self.majmin(selector)] = target is not None and str(target).strip() not in ("max", "0")
        return out

    # -- settings -----------------------------------------------------------------------------
    def majmin(self, selector):
        return self.records[selector].majmin

    def systemd_settings(self):
        unit = self.name
        plan = None
        try:
            if self.state == "present":
                plan = sd.build_plan(unit, self.values,
                                     devices=self.records, systemd_version=self.version,
                                     page_size=self.caps["kernel"]["page_size"])
        except sd.SystemdError as e:
            raise RequestError(e.errors)
        info = sd.unit_info(self.runner, unit)
        is_slice = unit.endswith(".slice")
        dropin = sd.dropin_path(unit)
        files = {dropin: plan.content() if plan is not None and not plan.empty else None}
        ours = is_slice and info["FragmentPath"] == sd.UNIT_DIR + "/" + unit and is_managed(
            self.fs.read(sd.UNIT_DIR + "/" + unit))
        # systemd synthesises a slice that has no unit file (LoadState=loaded, no FragmentPath);
        # create writes one, with a Description, so the slice is a real unit operators can find.
        if is_slice and self.state == "present" and self.params.get("create") and (not info["FragmentPath"] or ours):
            try:
                files[sd.slice_unit_path(unit)] = sd.render_slice_unit(unit, self.params.get("description"))
            except sd.SystemdError as e:
                raise RequestError(e.errors)
        elif ours and self.state == "absent":
            files[sd.slice_unit_path(unit)] = None
        if self.state == "present" and info["LoadState"] == "not-found":
            raise RequestError("%s does not exist (systemd: LoadState=not-found); install the unit first, this module "
                               "only configures it" % unit)
        cgroup = CGROUP_ROOT + info["ControlGroup"] if info["ControlGroup"] else (resolve(unit) if is_slice else None)
        previous = self.fs.read(dropin)
        live = self._stale_weights(unit, plan, cgroup, previous)
        state = sd.UnitState(unit, files, plan, self.runner, cgroup, previous_dropin=previous,
                             start=is_slice and self.state == "present", adopt=self.params.get("adopt"), live=live)
        settings = [state]
        # Converging a slice ends its boost window (cgroup_boost): the unit's own values are the ones
        # asked for, and the window's end, scheduled on the host, would otherwise undo them later.
        self.boost = _cgroup_boost.window(self.fs, self.runner, unit, self.resolver) if is_slice else None
        if self.boost is not None:
            settings.insert(0, _cgroup_boost.BoostWindow(unit, self.runner, self.resolver, cgroup, self.boost["paths"], {}))
        return settings, cgroup, [p for p, c in sorted(files.items()) if c is not None]

    def _stale_weights(self, unit, plan, cgroup, previous):
        """IODeviceWeight= assignments for io.weight lines that nothing configures any more.

        systemd cannot remove a per-device line; a disk dropped from io.weights (or set to
        'default') would keep its old weight. Lines no drop-in of the unit lists (``systemctl
        show`` minus this module's previous drop-in, plus the new plan) are set to the group's
        weight on the running unit and verified; they vanish when the cgroup is made again.
        """
        text = self.fs.read(cgroup + "/io.weight") if cgroup else None
        if text is None:
            return []
        kernel = codecs.IO_WEIGHT.parse(text)
        ours = set(path for name, path_value in sd.parse_dropin(previous) if name == "IODeviceWeight"
                   for path in [path_value.rpartition(" ")[0]])
        _rc, out, _err = self.runner.run(sd.show_argv(unit, ["IODeviceWeight"]))
        shown = sd.show_values(out).get("IODeviceWeight") or {}
        configured = set(self._majmin_of(p) for p in shown if p not in ours)
        expected = plan.expected.get("io.weight", {}) if plan is not None else {}
        configured.update(dev for dev, value in expected.items() if dev != "default" and value != "default")
        if plan is None:
            weight = 100 if "IOWeight" in dict(sd.parse_dropin(previous)) else kernel.get("default", 100)
        else:
            weight = expected.get("default", kernel.get("default", 100))
        disks = dict((d.majmin, d) for d in self.resolver.list_disks())
        live = []
        for dev in sorted(d for d in kernel if d != "default" and d not in configured):
            try:
                path = sd.stable_device_path(disks[dev]) if dev in disks else None
            except sd.SystemdError:
                path = None
            if path is None:
                self.warnings.append("%s has an io.weight line for %s that no configuration asks for, and the disk "
                                     "has no by-id link to name it with; it goes away when the cgroup is made again"
                                     % (unit, dev))
                continue
            if plan is not None:
                plan.expected.setdefault("io.weight", {})[dev] = weight
            if dev in sd.stale_weight_lines(kernel, configured, weight):
                live.append(("IODeviceWeight", "%s %d" % (path, weight)))
                self.warnings.append(
                    "systemd cannot remove the io.weight line of %s (%s) from %s; it is set to the group's weight %d "
                    "and goes away when the cgroup is made again (reboot, or the slice stopping)"
                    % (disks[dev].name, dev, unit, weight))
        return live

    def _majmin_of(self, path):
        try:
            return self.resolver.resolve(path).majmin
        except DeviceError:
            return path   # a disk that is gone: nothing in the kernel file can match it

    def cgroupfs_settings(self, top):
        """The group, the controllers its ancestors below ``top`` must enable, and its files."""
        path = self.path
        if self.state == "absent":
            return self._cgroupfs_absent(path), path
        files = self._group_files(path)
        needed = sorted(set(controller_of(f.name) for f in files))
        settings = []
        for directory in ancestors(path, top) + [path]:
            if directory != path:
                settings.extend(self._subtree(directory, needed, top))
            if not self.fs.isdir(directory):
                settings.append(GroupDir(directory, True, order=1))
        return settings + files, path

    def _subtree(self, directory, needed, top):
        exists = self.fs.isdir(directory)
        enabled = controllers(self.fs, directory, "cgroup.subtree_control") if exists else []
        missing = [c for c in needed if c not in enabled]
        if not missing:
            return []
        if exists:
            available = controllers(self.fs, directory)
            absent = [c for c in missing if c not in available]
            if absent:
                self.errors.append(
                    "controller(s) %s are not available in %s (cgroup.controllers: %s)%s" % (
                        ", ".join(absent), directory, " ".join(available) or "none",
                        ": the delegating unit must have them (e.g. IOAccounting=yes, MemoryAccounting=yes, "
                        "CPUAccounting=yes, AllowedCPUs= for cpuset, or Delegate=yes for all)" if directory == top else ""))
            if directory != CGROUP_ROOT and has_members(self.fs, directory):
                self.errors.append(
                    "%s has processes of its own, and the kernel does not enable controllers for the children of a "
                    "group with processes (no-internal-processes rule, EBUSY): move them into a child group first "
                    "(container runtimes do this), then retry" % directory)
        return [SubtreeControl(directory, missing, order=2 + directory.count("/"))]

    def _group_files(self, path, values=None):
        """The GroupFiles of the given knobs (``values``: {group: {key: value}}), in write order."""
        values = self.values if values is None else values
        out = []
        for knob in sorted(knobs.KNOBS, key=lambda k: k.order):
            if knob.key not in values[knob.group]:
                continue
            value = values[knob.group][knob.key]
            if not knob.per_device:
                out.append(GroupFile(path, knob.file, self._spelled_for_kernel(knob, value), device=knob.line,
                                     order=knob.order))
                continue
            for selector, line in sorted(value.items()):
                line, problems = knob.desired(line, selector)
                self.errors.extend(problems)
                out.append(GroupFile(path, knob.file, line, device=self.majmin(selector), order=knob.order))
        for f in out:
            self.errors.extend(f.problems)
        return out

    def _spelled_for_kernel(self, knob, value):
        """A name this kernel spells otherwise (io.prio.class promote-to-rt before 6.5), with a warning."""
        codec, release = knob.codec, self.caps["kernel"]["release"]
        if not hasattr(codec, "for_release") or not isinstance(value, str) or codec.validate(value):
            return value
        spelled = codec.for_release(value, release)
        if spelled != value.strip():
            self.warnings.append("%s %s is spelled %s on kernel %s (before 6.5)" % (knob.name, value, spelled, release))
        return spelled

    def _cgroupfs_absent(self, path):
        if not self.fs.isdir(path):
            return []
        busy = has_members(self.fs, path) or child_groups(self.fs, path)
        if not busy:
            return [GroupDir(path, False)]
        given = [k for group in self.values.values() for k in group]
        self.warnings.append("%s is not empty (%s), so it is kept%s" % (
            path, "it has processes" if has_members(self.fs, path) else "it has child groups",
            "; the given settings are put back to the kernel defaults" if given else
            "; give io/memory/cpu keys to put those settings back to the kernel defaults"))
        neutral = dict((group, {}) for group in knobs.GROUPS)
        for knob in knobs.KNOBS:
            if knob.key in self.values[knob.group] and knob.neutral is not None:
                value = copy.deepcopy(knob.neutral)
                neutral[knob.group][knob.key] = dict((s, value) for s in self.values[knob.group][knob.key]) \
                    if knob.per_device else value
        return self._group_files(path, neutral)


def boost_report(window, result, unit, check_mode):
    """The slice's boost window as this call found it, and whether it explains every difference.

    ``only_difference``: what the call changes (or in check mode would change) is the window itself -
    its drop-in and timer, and the io.max lines of the disks it lifted - and nothing else of the unit.
    ``ended``: this call ended the window (not in check mode).
    """
    before, after = result["diff"]["before"], result["diff"]["after"]
    key = "boost window %s" % unit
    only = True
    for name in set(before) | set(after):
        if name == key:
            continue
        old, new = before.get(name) or {}, after.get(name) or {}
        if name != unit or old.get("files") != new.get("files"):
            only = False
            continue
        for drift in old.get("drift") or []:
            device = str(drift.get("key", "")).split(".", 1)[0]
            if drift.get("file") != "io.max" or device not in window["lifted"]:
                only = False
    keys = ("window_end", "active", "expired", "orphaned", "timer", "timer_state", "dropin", "lifted")
    out = dict((k, window[k]) for k in keys)
    out["only_difference"] = only
    out["ended"] = bool(result["changed"]) and not check_mode
    return out


def kernel_values(fs, directory, names):
    """{file: parsed value} the group holds now (None for a missing file or group)."""
    out = {}
    for name in sorted(set(names)):
        text = fs.read(directory + "/" + name) if directory else None
        try:
            out[name] = None if text is None else codecs.CGROUP_FILES[name].parse(text)
        except codecs.CodecError:
            out[name] = text
    return out


# The module's options (AnsibleModule keywords); host_profile checks each cgroups entry with the same.
MODULE_SPEC = {"argument_spec": dict(
    name={"type": "str", "required": True},
    manager={"type": "str", "choices": ["auto", "systemd", "cgroupfs"], "default": "auto"},
    state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    create={"type": "bool", "default": False},
    description={"type": "str"},
    when_unsupported={"type": "str", "choices": ["fail", "warn"], "default": "fail"},
    when_missing={"type": "str", "choices": ["fail", "skip"], "default": "fail"},
    adopt={"type": "bool", "default": False},
    **knobs.argument_spec()
)}


def part(params, fs, runner, planned_qos=None):
    """The request as an engine part; raises RequestError for any refusal (nothing written).

    ``planned_qos``: {MAJ:MIN: io.cost.qos line} that an iocost part of the same engine run
    (``host_profile``) puts in place before these settings, so weights are checked against it.
    """
    req = Request(params, fs, runner)   # the name's own form
    req.planned_qos = dict(planned_qos or {})
    req.check_forms()
    if req.errors:
        raise RequestError(req.errors)
    top = req.check_host()
    missing = req.missing_unit()
    if missing:
        return _skipped(req, missing)
    if req.state == "present":
        req.check_features()
    req.check_within_host()
    req.resolve_devices()
    req.check_iocost()
    if req.errors:
        raise RequestError(req.errors)
    persisted = []
    if req.manager == "systemd":
        settings, cgroup, persisted = req.systemd_settings()
        watch = settings[-1].watch
    else:
        settings, cgroup = req.cgroupfs_settings(top)
        watch = [s.name for s in settings if isinstance(s, GroupFile)]
    if req.errors:
        raise RequestError(req.errors)

    def report(result, check_mode):
        out = {
            "changed": result["changed"], "diff": result["diff"], "manager": req.manager, "name": req.name,
            "cgroup": cgroup, "persisted_to": persisted,
            "devices": dict((s, r.majmin) for s, r in sorted(req.records.items())),
            "kernel": kernel_values(fs, cgroup if cgroup and fs.isdir(cgroup) else None, watch),
            "warnings": req.warnings,
        }
        if req.boost is not None:
            out["boost"] = boost_report(req.boost, result, req.name, check_mode)
        return out

    out = Part(settings, [], report)
    out.io_limits = (cgroup or req.path, req.io_limits())
    return out


def _skipped(req, why):
    """The part of a request for a unit the host does not have (``when_missing: skip``): no setting, and a report
    that says so."""
    def report(result, check_mode):
        return {"changed": False, "diff": result["diff"], "manager": req.manager, "name": req.name, "cgroup": None,
                "persisted_to": [], "devices": {}, "kernel": {}, "skipped": True, "skip_reason": why,
                "warnings": req.warnings}
    out = Part([], [], report)
    out.io_limits = (req.path, {"io.latency": {}})
    return out


def reconcile(params, fs, runner, check_mode=False):
    """Run the cgroup module's request; returns the result dict (with ``warnings``). Raises RequestError."""
    return run_part(fs, part(params, fs, runner), check_mode)


_DROPIN_RE = re.compile(r"^%s/([^/]+)\.d/%s$" % (re.escape(SYSTEMD_UNIT_DIR), re.escape(SYSTEMD_DROPIN_NAME)))
_UNIT_RE = re.compile(r"^%s/([^/]+\.slice)$" % re.escape(SYSTEMD_UNIT_DIR))


def units(owned):
    """systemd units this module manages, from the registry's files: those with our drop-in, and slices we created."""
    return owned_units(owned, _DROPIN_RE, _UNIT_RE)


def purge(p):
    """purge's step: each unit state=absent, which also resets what systemd had applied to the running cgroup."""
    for unit in units(p.owned):
        p.step("cgroup %s" % unit, lambda unit=unit: reconcile(
            {"name": unit, "manager": "systemd", "state": "absent"}, p.fs, p.runner, p.check_mode))
