# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One workload group's io/memory/cpu request, checked and reconciled through systemd or cgroupfs.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

:func:`reconcile` is the whole cgroup module behind its argument spec:

1. the name (unit or path) and the manager (``auto``: systemd for a unit on a systemd host);
2. feature detection (io.latency, io.prio.class, io.low, io.weight exist only with their kernel
   options) and what the manager can carry (systemd has no directive for io.prio.class, io.low,
   memory.oom.group); ``when_unsupported: warn`` skips such keys with a warning;
3. devices through the shared resolver; per-device io.weight needs iocost initialised on the
   disk, and a weight on a group whose disks all run without iocost does nothing (warning);
4. the settings: for systemd one :class:`_systemd.UnitState` (drop-in + live apply + verify),
   for cgroupfs the group directory, the ancestors' ``cgroup.subtree_control`` and the files;
5. the reconcile engine runs them (check mode, diff, read-back, restore on failure).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _codecs as codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._capabilities import detect
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._cgroups import (
    CGROUP_ROOT, CgroupNameError, GroupDir, GroupFile, SubtreeControl, ancestors, child_groups, controller_of,
    controllers, has_members, is_unit_name, resolve,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._persist import is_managed
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._reconcile import Reconciler, RequestError

IOCOST_MODULE = "aiinfra.io_isolation.iocost"
DEVICE_KEYS = ("weights", "max", "latency", "low")
# Feature-gated io keys: (kernel file, why a kernel lacks it)
GATED = (
    ("latency", "io.latency", "the kernel is built without CONFIG_BLK_CGROUP_IOLATENCY (Debian's kernels leave it off)"),
    ("prio_class", "io.prio.class", "the kernel is built without CONFIG_BLK_CGROUP_IOPRIO (Debian's kernels leave it "
                                    "off; it needs 5.14+)"),
    ("low", "io.low", "the kernel has no CONFIG_BLK_DEV_THROTTLING_LOW (an experimental option Debian never built, "
                      "removed from Linux in 6.10); protect the group with io weights and iocost QoS instead"),
    ("weight", "io.weight", "the kernel is built without CONFIG_BLK_CGROUP_IOCOST"),
    ("weights", "io.weight", "the kernel is built without CONFIG_BLK_CGROUP_IOCOST"),
)
MEMORY_FILES = (("min", "memory.min", 20), ("low", "memory.low", 20), ("high", "memory.high", 21),
                ("max", "memory.max", 21), ("swap_max", "memory.swap.max", 22), ("zswap_max", "memory.zswap.max", 22))
# Values of a fresh group: what state=absent puts back in a group that still has members.
DEFAULTS = {"io.weight": 100, "io.prio.class": "no-change", "memory.min": 0, "memory.low": 0, "memory.high": "max",
            "memory.max": "max", "memory.swap.max": "max", "memory.zswap.max": "max", "memory.oom.group": 0,
            "cpu.weight": 100, "cpu.max": {"quota": "max"}}
DEVICE_DEFAULTS = {"io.weight": "default", "io.max": dict((k, "max") for k in codecs.IO_MAX_KEYS),
                   "io.latency": {"target": "max"}, "io.low": None}


def _clean(group):
    return dict((k, v) for k, v in (group or {}).items() if v is not None)


class Request:
    """The module's parameters, checked against the host."""

    def __init__(self, params, fs, runner):
        self.fs, self.runner = fs, runner
        self.params = params
        self.state = params.get("state") or "present"
        self.errors, self.warnings = [], []
        self.io, self.memory, self.cpu = (_clean(params.get(k)) for k in ("io", "memory", "cpu"))
        self.name = (params.get("name") or "").strip()
        self.systemd_host = sd.systemd_host(fs)
        self.version = sd.systemd_version(runner) if self.systemd_host else None
        self.caps = detect(fs, systemd_version=self.version)
        self.manager = self._manager(params.get("manager") or "auto")
        self.resolver = DeviceResolver(fs)   # one sysfs walk for every lookup of the call
        self.records = {}

    # -- checks -------------------------------------------------------------------------------
    def _manager(self, wanted):
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
        if wanted == "auto":
            return "systemd" if unit and self.systemd_host else "cgroupfs"
        if wanted == "systemd" and not unit:
            raise RequestError("manager: systemd needs a systemd unit name (inference.slice, vllm.service, ...), not "
                               "the path %r; use manager: cgroupfs for a path below a Delegate=yes unit" % self.name)
        if wanted == "systemd" and not self.systemd_host:
            raise RequestError("manager: systemd, but this host does not run systemd (/run/systemd/system is "
                               "missing); use manager: cgroupfs")
        return wanted

    def unsupported(self, group, key, message):
        """Fail, or with when_unsupported=warn drop the key and warn."""
        if self.params.get("when_unsupported") == "warn":
            self.warnings.append("%s (skipped: when_unsupported=warn)" % message)
            getattr(self, group).pop(key, None)
        else:
            self.errors.append(message)

    def check_features(self):
        files = self.caps["cgroup"].get("io_files", {})
        if self.caps["cgroup"]["mode"] != "unified":
            raise RequestError("this host does not run the cgroup v2 unified hierarchy (mode: %s); the cgroup module "
                               "needs it: boot with systemd.unified_cgroup_hierarchy=1" % self.caps["cgroup"]["mode"])
        for key, name, why in GATED:
            # The value's own form first: a value that is wrong on every kernel is refused for that,
            # not for what this kernel lacks (per-device values are checked once their disks resolve).
            codec = codecs.CGROUP_FILES.get(name)
            if key in self.io and codec is not None and not isinstance(codec, codecs.DeviceCodec):
                problems = codec.validate(self.io[key])
                if problems:
                    self.errors.extend(problems)
                    self.io.pop(key)
                    continue
            # None: unknown (no group with io enabled yet and no kernel config to read); the write and
            # its read-back tell then.
            if key in self.io and files.get(name) is False:
                self.unsupported("io", key, "io.%s needs the kernel file %s, which this kernel (%s) does not have: %s"
                                 % (key, name, self.caps["kernel"]["release"], why))
        if self.manager == "systemd":
            for group, key in (("io", "prio_class"), ("io", "low"), ("memory", "oom_group")):
                if key in getattr(self, group):
                    self.unsupported(group, key, sd.unsupported_message(key, self.name))

    def resolve_devices(self):
        for key in DEVICE_KEYS:
            mapping = self.io.get(key)
            if mapping is None:
                continue
            if not isinstance(mapping, dict):
                self.errors.append("io.%s: expected a mapping of device to value, got %r" % (key, mapping))
                self.io.pop(key)
                continue
            seen = {}
            for selector in mapping:
                try:
                    rec = self.resolver.resolve(selector, require_mq=key == "weights")
                except DeviceError as e:
                    self.errors.append("io.%s: %s" % (key, e.message))
                    continue
                if rec.majmin in seen:
                    self.errors.append("io.%s: %r and %r are the same disk %s; list each disk once"
                                       % (key, seen[rec.majmin], selector, rec.name))
                seen[rec.majmin] = selector
                self.records[selector] = rec

    def check_iocost(self):
        """Per-device weights need iocost initialised on the disk; weights without iocost do nothing."""
        if self.state != "present" or not ("weight" in self.io or "weights" in self.io):
            return
        text = self.fs.read(CGROUP_ROOT + "/io.cost.qos")
        qos = codecs.IO_COST_QOS.parse(text) if text is not None else {}
        for selector in self.io.get("weights", {}):
            rec = self.records.get(selector)
            if rec is not None and rec.majmin not in qos:
                self.errors.append(
                    "io.weights: enable iocost on %s first (%s): a per-device io.weight needs iocost initialised on "
                    "the disk (the kernel answers EOPNOTSUPP, and systemd silently drops the IODeviceWeight= line)"
                    % (rec.name, IOCOST_MODULE))
        # The default weight acts on every disk the group reads or writes; overrides on their disks.
        used = [self.records[s] for s in self.io.get("weights", {}) if s in self.records] if "weight" not in self.io \
            else [d for d in self.resolver.list_disks() if d.has_mq]
        if used and not any((qos.get(r.majmin) or {}).get("enable") == 1 for r in used):
            names = ", ".join(sorted(r.name for r in used))
            self.warnings.append(
                "io weights are set for %s, but iocost is disabled on every disk they apply to (%s): weights do "
                "nothing until %s enables it (qos enable=1)" % (self.name, names, IOCOST_MODULE))

    # -- settings -----------------------------------------------------------------------------
    def majmin(self, selector):
        return self.records[selector].majmin

    def systemd_settings(self):
        unit = self.name
        plan = None
        try:
            if self.state == "present":
                plan = sd.build_plan(unit, {"io": self.io, "memory": self.memory, "cpu": self.cpu},
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
        return [state], cgroup, [p for p, c in sorted(files.items()) if c is not None]

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

    def cgroupfs_settings(self):
        path = resolve(self.name)
        top = CGROUP_ROOT
        if self.systemd_host:
            try:
                info = sd.delegation(self.runner, self.fs, path)
            except sd.SystemdError as e:
                raise RequestError(e.errors)
            refusal = sd.cgroupfs_refusal(info)
            if refusal:
                raise RequestError(refusal)
            top = info["unit_path"]
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
                        "CPUAccounting=yes, or Delegate=yes for all)" if directory == top else ""))
            if directory != CGROUP_ROOT and has_members(self.fs, directory):
                self.errors.append(
                    "%s has processes of its own, and the kernel does not enable controllers for the children of a "
                    "group with processes (no-internal-processes rule, EBUSY): move them into a child group first "
                    "(container runtimes do this), then retry" % directory)
        return [SubtreeControl(directory, missing, order=2 + directory.count("/"))]

    def _group_files(self, path, values=None):
        io, memory, cpu = values if values is not None else (self.io, self.memory, self.cpu)
        out = []
        if "weight" in io:
            out.append(GroupFile(path, "io.weight", io["weight"], device="default", order=10))
        for selector, value in sorted((io.get("weights") or {}).items()):
            out.append(GroupFile(path, "io.weight", value, device=self.majmin(selector), order=11))
        for key, name, order in (("max", "io.max", 12), ("latency", "io.latency", 13), ("low", "io.low", 14)):
            for selector, value in sorted((io.get(key) or {}).items()):
                if key == "latency" and not isinstance(value, dict):
                    value = {"target": value}
                if key in ("max", "low") and isinstance(value, dict):
                    value = self._rates(value, selector)
                out.append(GroupFile(path, name, value, device=self.majmin(selector), order=order))
        if "prio_class" in io:
            value = io["prio_class"]
            if isinstance(value, str) and not codecs.IO_PRIO_CLASS.validate(value):
                value = codecs.IO_PRIO_CLASS.for_release(value, self.caps["kernel"]["release"])
                if value != io["prio_class"].strip():
                    self.warnings.append("io.prio_class %s is spelled %s on kernel %s (before 6.5)"
                                         % (io["prio_class"], value, self.caps["kernel"]["release"]))
            out.append(GroupFile(path, "io.prio.class", value, order=15))
        for key, name, order in MEMORY_FILES:
            if key in memory:
                out.append(GroupFile(path, name, memory[key], order=order))
        if "oom_group" in memory:
            out.append(GroupFile(path, "memory.oom.group", memory["oom_group"], order=23))
        if "weight" in cpu:
            out.append(GroupFile(path, "cpu.weight", cpu["weight"], order=30))
        if "max" in cpu:
            out.append(GroupFile(path, "cpu.max", cpu["max"], order=31))
        for f in out:
            self.errors.extend(f.problems)
        return out

    def _rates(self, value, selector):
        """io.max rbps/wbps may carry an explicit base ('10MB', '10MiB'); the kernel takes bytes."""
        out = dict(value)
        for key in ("rbps", "wbps"):
            raw = out.get(key)
            if isinstance(raw, str) and raw.strip() not in ("max", "") and not raw.strip().isdigit():
                try:
                    out[key] = codecs.parse_rate(raw)
                except codecs.CodecError as e:
                    self.errors.append("io rate %s (%s): %s" % (key, selector, e))
        return out

    def _cgroupfs_absent(self, path):
        if not self.fs.isdir(path):
            return []
        busy = has_members(self.fs, path) or child_groups(self.fs, path)
        if not busy:
            return [GroupDir(path, False)]
        given = [k for g in (self.io, self.memory, self.cpu) for k in g]
        self.warnings.append("%s is not empty (%s), so it is kept%s" % (
            path, "it has processes" if has_members(self.fs, path) else "it has child groups",
            "; the given settings are put back to the kernel defaults" if given else
            "; give io/memory/cpu keys to put those settings back to the kernel defaults"))
        io = {}
        if "weight" in self.io:
            io["weight"] = DEFAULTS["io.weight"]
        for key, name in (("weights", "io.weight"), ("max", "io.max"), ("latency", "io.latency")):
            if key in self.io:
                io[key] = dict((s, DEVICE_DEFAULTS[name]) for s in self.io[key])
        if "prio_class" in self.io:
            io["prio_class"] = DEFAULTS["io.prio.class"]
        memory = dict((k, DEFAULTS[n]) for k, n, _o in MEMORY_FILES if k in self.memory)
        if "oom_group" in self.memory:
            memory["oom_group"] = 0
        cpu = dict((k, DEFAULTS["cpu." + k]) for k in ("weight", "max") if k in self.cpu)
        return self._group_files(path, (io, memory, cpu))


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


def reconcile(params, fs, runner, check_mode=False):
    """Run the cgroup module's request; returns the result dict (with ``warnings``). Raises RequestError."""
    req = Request(params, fs, runner)
    if req.state == "present":
        req.check_features()
    req.resolve_devices()
    req.check_iocost()
    if req.errors:
        raise RequestError(req.errors)
    persisted = []
    if req.manager == "systemd":
        settings, cgroup, persisted = req.systemd_settings()
        watch = settings[0].watch
    else:
        settings, cgroup = req.cgroupfs_settings()
        watch = [s.name for s in settings if isinstance(s, GroupFile)]
    if req.errors:
        raise RequestError(req.errors)
    result = Reconciler(fs, check_mode=check_mode).run(settings)
    return {
        "changed": result["changed"], "diff": result["diff"], "manager": req.manager, "name": req.name,
        "cgroup": cgroup, "persisted_to": persisted,
        "devices": dict((s, r.majmin) for s, r in sorted(req.records.items())),
        "kernel": kernel_values(fs, cgroup if cgroup and fs.isdir(cgroup) else None, watch),
        "warnings": req.warnings,
    }
