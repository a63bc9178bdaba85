# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""blk-iocost for one disk: io.cost.model + io.cost.qos, live and persisted by a udev rule.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Kernel order (observed on 6.1 and 6.12): iocost initialises on a disk at the first write of
either root file, so the model goes first, then the QoS with ``enable=1``; per-device io.weight
lines only work after that (cgroup module). Persistence: a udev rule keyed by the disk's WWN or
serial runs a small helper at device add, which writes the same lines for whatever MAJ:MIN the
disk has in that boot. Our rules are numbered 91, after systemd's ``90-iocost.rules`` (systemd
254+, hwdb by model): udev runs RUN programs in rule order, so for the disks this collection
manages our values are written last and win.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    IOCOST_HELPER, IOCOST_RULES, PersistError, udev_match,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import PERSIST, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import parse_kernel_release, require_iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT, KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import CodecSetting, ModuleError, Part, run_part
# the kernel's own cost models (declared apart for the controller's planning filters)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.iocost_keys import KERNEL_CLASSES

# rrandiops between the kernel's HDD class (hdd) and its slowest SSD class (ssd_qd1): a model on
# the wrong side of it was most likely measured on (or copied from) the other kind of disk.
ROTATIONAL_RANDIOPS_LIMIT = 1600


def model_input(model):
    """User model options -> codec input: ``ctrl`` auto, or the six coefficients (units allowed for bps)."""
    model = dict(model or {})
    out = {}
    for key, value in model.items():
        if key in ("rbps", "wbps") and isinstance(value, str) and not value.strip().isdigit():
            try:
                value = codecs.parse_rate(value)
            except codecs.CodecError as e:
                return None, ["io.cost.model: %s=%s: %s" % (key, value, "; ".join(e.errors))]
        out[key] = value
    return out, []


def qos_input(qos, state, keep_enabled):
    if state == "absent":
        return {"enable": 1 if keep_enabled else 0, "ctrl": "auto"}
    qos = dict(qos or {})
    qos.setdefault("enable", True)
    if not any(k in qos for k in ("ctrl",) + codecs.QOS_PARAMS):
        qos["ctrl"] = "auto"
    return qos


def class_warnings(record, model):
    """Warn when the model's class does not match the disk.

    Kernel classes: docs/kernel-files.md, "iocost's built-in cost-model classes"."""
    if not model or model.get("ctrl") == "auto" or "rrandiops" not in model:
        return []
    try:
        randiops = int(model["rrandiops"])
    except (TypeError, ValueError):
        return []
    if record.rotational and randiops > ROTATIONAL_RANDIOPS_LIMIT:
        return ["%s is rotational but the model has SSD-class random IOPS (rrandiops=%d; the kernel's HDD "
                "class uses %d): weights will divide capacity the disk does not have"
                % (record.name, randiops, KERNEL_CLASSES["hdd"]["rrandiops"])]
    if not record.rotational and randiops < ROTATIONAL_RANDIOPS_LIMIT:
        return ["%s is not rotational but the model has HDD-class random IOPS (rrandiops=%d; the kernel's "
                "SSD classes use %d and more): the disk will be throttled far below what it can do"
                % (record.name, randiops, KERNEL_CLASSES["ssd_qd1"]["rrandiops"])]
    return []


# ---------------------------------------------------------------------------------------------
# Settings that break iocost on a disk: each rule once, here. The iocost and blk_queue modules check
# the disk as their call leaves it; host_profile checks every disk as the whole call leaves it
# (a scheduler or wbt the same call changes, the io.latency targets its cgroups set). A refusal is an
# input error: nothing is written, in check mode too. Measured on the device-bound lab and read from
# the source: docs/kernel-files.md, "Settings beside iocost".
# ---------------------------------------------------------------------------------------------

WBT_DEFAULT_USEC = {False: 2000, True: 75000}   # wbt_default_latency_nsec(): by rotational
# ioc_qos_write() switches the default wbt off when iocost is enabled and back on when it is not
# ("blk-iocost: disable writeback throttling", 6.2); 6.1's blk-iocost.c has no wbt call.
WBT_OFF_UNDER_IOCOST_SINCE = (6, 2)
REFUSE, WARN = "refuse", "warn"


def kernel_turns_wbt_off(release):
    """Whether enabling iocost switches the default wbt off on this kernel (``release``: uname -r)."""
    return bool(release) and parse_kernel_release(release)[:2] >= WBT_OFF_UNDER_IOCOST_SINCE


def wbt_state(usec, rotational):
    """A wbt_lat_usec value (-1 or None: the default) as ("off" | "default" | "manual", usec)."""
    default = WBT_DEFAULT_USEC[bool(rotational)]
    if usec is None or usec == -1 or usec == default:
        return ("default", default)
    return ("off", 0) if usec == 0 else ("manual", usec)


class DiskPlan:
    """One disk as a call leaves it: what the conflict rules read.

    ``wbt`` is :func:`wbt_state`'s pair; ``io_latency`` the cgroups (paths) that will hold a latency
    target on the disk.
    """

    def __init__(self, record, iocost, scheduler, wbt, io_latency=()):
        self.record = record
        self.iocost = iocost
        self.scheduler = scheduler
        self.wbt = wbt
        self.io_latency = sorted(io_latency)

    @property
    def label(self):
        rec = self.record
        return "%s (%s, %s)" % (rec.name, rec.majmin, rec.stable_selector or "no stable selector")

    def wbt_on(self):
        """Whether writeback throttling will run on the disk beside iocost by a latency set by hand.

        6.1's default wbt also stays on under iocost (6.2 and later switch it off), but on the lab it made
        no difference to a protected reader beside a buffered writer (docs/kernel-files.md, "Settings
        beside iocost"), so only a latency someone set - which every kernel keeps on - is named."""
        return bool(self.wbt) and self.wbt[0] == "manual"


class Conflict:
    """A setting that breaks iocost: when it ``applies`` to a disk with iocost on, ``action`` (REFUSE: an input
    error, nothing written; WARN: a task warning) with ``message``, which names the disk, the value and the fix."""

    def __init__(self, name, action, applies, message):
        self.name = name
        self.action = action
        self.applies = applies
        self.message = message


def _groups(paths):
    return ", ".join(p[len(CGROUP_ROOT) + 1:] if p.startswith(CGROUP_ROOT + "/") else p for p in paths)


CONFLICTS = (
    Conflict("bfq", REFUSE, lambda d: d.scheduler == "bfq", lambda d: (
        "%s: iocost is enabled on the disk and its I/O scheduler would be bfq. bfq schedules the requests again "
        "by its own weights (io.bfq.weight); beside it a reader that iocost protects lost half its rate on the "
        "lab (docs/kernel-files.md, 'Settings beside iocost'). Set blk_queue scheduler none or mq-deadline for "
        "this disk, or leave iocost off on it" % d.label)),
    Conflict("wbt", WARN, DiskPlan.wbt_on, lambda d: (
        "%s: iocost is enabled on the disk and writeback throttling would stay on (wbt_lat_usec %d, set by "
        "hand: every kernel keeps such a latency on under iocost, while 6.2 and later switch the default off). "
        "wbt throttles every cgroup's writeback, the protected ones' too, by one disk-wide latency that iocost's "
        "weights do not see (docs/kernel-files.md, 'Settings beside iocost'). Set blk_queue wbt_lat_usec 0 (or "
        "-1, the default) for this disk, or leave iocost off on it" % (d.label, d.wbt[1]))),
    Conflict("io.latency", WARN, lambda d: d.io_latency, lambda d: (
        "%s: iocost is enabled on the disk and %s set an io.latency target on it. io.latency throttles the "
        "siblings of a group that misses its target, a second controller beside iocost's weights: on the lab "
        "the pair was never better than iocost alone and the other groups got less (docs/kernel-files.md, "
        "'Settings beside iocost'). Use iocost's weights and QoS alone, or leave iocost off on the disk"
        % (d.label, _groups(d.io_latency)))),
)


def conflicts(disks):
    """(errors, warnings): every rule of CONFLICTS on every disk that will run iocost."""
    errors, warnings = [], []
    for disk in disks:
        if not disk.iocost:
            continue
        for rule in CONFLICTS:
            if rule.applies(disk):
                (errors if rule.action == REFUSE else warnings).append(rule.message(disk))
    return errors, warnings


def _queue(fs, record, attr):
    try:
        return fs.read("/sys/block/%s/queue/%s" % (record.name, attr))
    except KernelFileError:
        return None


def queue_now(fs, record):
    """(scheduler, wbt_lat_usec) the disk holds now; None for what it does not have."""
    try:
        scheduler = codecs.SCHEDULER.parse(_queue(fs, record, "scheduler") or "").get("current")
    except codecs.CodecError:
        scheduler = None
    try:
        wbt = int((_queue(fs, record, "wbt_lat_usec") or "").strip())
    except ValueError:
        wbt = None
    return scheduler, wbt


# The cgroup files beside iocost that a conflict rule reads. io.max is not among them: on the lab a cap on a
# low-weight group acted as a plain hard cap beside iocost, and a cap near a group's own rate cost it that rate
# with or without iocost (docs/kernel-files.md, "Settings beside iocost").
LIMIT_FILES = ("io.latency",)


def io_limits(fs, majmins, root=CGROUP_ROOT):
    """{MAJ:MIN: {"io.latency": [groups]}}: the cgroups that hold an io.latency target on each disk now.

    Only the children of groups that enable io for them have io files, so only those are read; a kernel
    without io.latency (Debian's) has it in none of them, which the first such child shows."""
    out = dict((m, dict((name, []) for name in LIMIT_FILES)) for m in majmins)
    if not out:
        return out
    stack, probed = [root], False
    while stack:
        directory = stack.pop()
        if "io" not in (fs.read(directory + "/cgroup.subtree_control") or "").split():
            continue
        children = [directory + "/" + e for e in sorted(fs.listdir(directory) or [], reverse=True)
                    if fs.isdir(directory + "/" + e)]
        if children and not probed:
            probed = True
            if not fs.exists(children[0] + "/io.latency"):
                return out
        for child in children:
            stack.append(child)
            for name, codec, limited in (("io.latency", codecs.IO_LATENCY, _io_latency_set),):
                try:
                    parsed = codec.parse(fs.read(child + "/" + name) or "")
                except (codecs.CodecError, KernelFileError):
                    continue
                for majmin, line in parsed.items():
                    if majmin in out and limited(line):
                        out[majmin][name].append(child)
    return out


def _io_latency_set(line):
    return bool(line) and str(line.get("target")) not in ("max", "0")


def kernel_release(fs):
    return (fs.read("/proc/sys/kernel/osrelease") or "").strip() or None


def plan_disks(fs, records, enabled, queues=None, groups=None):
    """The DiskPlan of every disk in ``records`` ({MAJ:MIN: record}) that ``enabled`` ({MAJ:MIN: bool}) says will
    run iocost: the disk as now, with what this call changes on top. ``queues``: {MAJ:MIN: (scheduler,
    wbt_state)} from a blk_queue request; ``groups``: [(cgroup path, {"io.latency": {MAJ:MIN: set}})] from
    cgroup requests (a group removed: every disk False)."""
    on = [m for m in sorted(records) if enabled.get(m)]
    held_limits = io_limits(fs, on)
    out = []
    for majmin in on:
        record = records[majmin]
        scheduler, usec = queue_now(fs, record)
        wbt = wbt_state(usec, record.rotational) if usec is not None else None
        if (queues or {}).get(majmin):
            scheduler, wbt = queues[majmin]
        limits = dict((k, set(v)) for k, v in held_limits[majmin].items())
        for path, planned in groups or []:
            if planned.get("removed"):
                for name in LIMIT_FILES:
                    limits[name].discard(path)
            for name in LIMIT_FILES:
                if majmin in planned.get(name, {}):
                    (limits[name].add if planned[name][majmin] else limits[name].discard)(path)
        out.append(DiskPlan(record, True, scheduler, wbt, limits["io.latency"]))
    return out


def held(fs, majmin):
    """(model, qos) the kernel holds for the disk now; None where it has no line."""
    out = []
    for name, codec in (("io.cost.model", codecs.IO_COST_MODEL), ("io.cost.qos", codecs.IO_COST_QOS)):
        out.append(codec.lookup(codec.parse(fs.read(CGROUP_ROOT + "/" + name) or ""), majmin))
    return tuple(out)


def rule_path(record):
    return IOCOST_RULES.path(record.stable_id)


def _helper_args(name, lines):
    """'MAJ:MIN a=1 b=2' lines -> 'name:a=1,b=2' helper arguments (MAJ:MIN comes from udev)."""
    return ["%s:%s" % (name, ",".join(line.split()[1:])) for line in lines]


def udev_rule(record, model, qos):
    """The rule that re-applies ``model``/``qos`` (normalised, per device) to this disk at add."""
    args = []
    if model is not None:
        args += _helper_args("io.cost.model", codecs.IO_COST_MODEL.format({record.majmin: model}))
    args += _helper_args("io.cost.qos", codecs.IO_COST_QOS.format({record.majmin: qos}))
    return IOCOST_RULES.render("%s, stable id %s" % (record.model or record.kind, record.stable_id), [
        'ACTION=="add|change", %s, RUN+="%s $major:$minor %s"' % (udev_match(record), IOCOST_HELPER.path, " ".join(args))])


def settings(record, params):
    """Engine settings (and input problems) for one disk: model, qos, then the persisted rule."""
    state = params["state"]
    errors = []
    model = None
    if state == "absent":
        model = {"ctrl": "auto"}
    elif params.get("model") is not None:
        model, errors = model_input(params["model"])
    qos = qos_input(params.get("qos"), state, params.get("keep_enabled"))
    out = []
    dev = record.majmin
    if model is not None:
        out.append(CodecSetting("io.cost.model[%s]" % dev, CGROUP_ROOT + "/io.cost.model", codecs.IO_COST_MODEL, model,
                                device=dev, order=10, reset={"ctrl": "auto"}))
    out.append(CodecSetting("io.cost.qos[%s]" % dev, CGROUP_ROOT + "/io.cost.qos", codecs.IO_COST_QOS, qos,
                            device=dev, order=20, reset={"enable": 0, "ctrl": "auto"}))
    persisted = []
    if params.get("persist", True):
        path = rule_path(record) if record.stable_id else None
        if state == "present" and not any(s.problems for s in out):
            try:
                content = udev_rule(record, out[0].desired if model is not None else None, out[-1].desired)
            except PersistError as e:
                errors.append(str(e))
                content = None
            if content is not None:
                out.append(IOCOST_HELPER.file(adopt=params.get("adopt")))
                out.append(IOCOST_RULES.file(record.stable_id, content, adopt=params.get("adopt")))
                persisted.append(path)
        elif state == "absent" and path:
            out.append(IOCOST_RULES.file(record.stable_id, None, adopt=params.get("adopt")))
    return out, errors, persisted


_STATE = {"type": "str", "choices": ["present", "absent"]}
# The module's options (AnsibleModule keywords); host_profile checks its iocost section with the same.
MODULE_SPEC = {
    "argument_spec": merge(PERSIST,
                           device={"type": "str"},
                           devices={"type": "list", "elements": "dict", "options": {
                               "device": {"type": "str", "required": True}, "model": {"type": "dict"},
                               "qos": {"type": "dict"}, "state": _STATE, "keep_enabled": {"type": "bool"}}},
                           state=dict(_STATE, default="present"),
                           model={"type": "dict"}, qos={"type": "dict"},
                           keep_enabled={"type": "bool", "default": False}),
    "mutually_exclusive": [("device", "devices"), ("devices", "model"), ("devices", "qos")],
    "required_one_of": [("device", "devices")],
}


def entries(params):
    """The module's request as a list of per-disk params: O(device) alone, or each O(devices) entry
    (O(state), O(keep_enabled), O(persist) and O(adopt) given at the top level are their defaults)."""
    common = dict((k, params.get(k)) for k in ("state", "keep_enabled", "persist", "adopt"))
    if params.get("device") is not None:
        return [dict(common, device=params["device"], model=params.get("model"), qos=params.get("qos"))]
    out = []
    for entry in params.get("devices") or []:
        merged = dict(common)
        merged.update(dict((k, v) for k, v in entry.items() if v is not None))
        out.append(merged)
    return out


def planned_qos(settings_):
    """{MAJ:MIN: io.cost.qos line} for each disk whose io.cost.qos these settings write."""
    return dict((s.device, s.desired) for s in settings_
                if getattr(s, "codec", None) is codecs.IO_COST_QOS and s.device and s.desired is not None)


def enabled_after(settings_):
    """{MAJ:MIN: True/False} for each disk whose io.cost.qos these settings write: enable=1 after the call."""
    return dict((m, str(line.get("enable")) == "1") for m, line in planned_qos(settings_).items())


def part(params, fs, resolver=None, check_conflicts=True):
    """Every requested disk as one engine part (a refusal on one disk restores the others).

    Its report has changed, diff and the disks: per disk device/model/qos/persisted_to - one
    disk's at the top level (O(device)), or ``devices`` (O(devices)). With ``check_conflicts``
    (the module alone; host_profile checks its whole call instead) a disk that would run iocost
    beside a setting of CONFLICTS that refuses is an input error, the others warnings.
    """
    problem = require_iocost(fs)
    if problem:
        raise ModuleError(problem)
    resolver = resolver or DeviceResolver(fs)
    requests = entries(params)
    records = resolver.resolve_many([r["device"] for r in requests], require_mq=True)
    all_settings, errors, per_disk, helper_added = [], [], [], False
    for record, request in zip(records, requests):
        settings_, errs, persisted = settings(record, request)
        for s in settings_:
            # the udev helper is one file for every disk
            if getattr(s, "path", None) == IOCOST_HELPER.path:
                if helper_added:
                    continue
                helper_added = True
            all_settings.append(s)
        errors.extend(errs)
        per_disk.append((record, request, persisted))
    conflict_warnings = []
    if check_conflicts and not errors:
        found, conflict_warnings = conflicts(plan_disks(fs, dict((r.majmin, r) for r in records),
                                                        enabled_after(all_settings)))
        errors.extend(found)

    def report(result, _check_mode):
        warnings, disks = list(conflict_warnings), []
        for record, request, persisted in per_disk:
            warnings.extend(class_warnings(record, request.get("model")))
            model, qos = held(fs, record.majmin)
            disks.append({"device": record.as_dict(), "model": model, "qos": qos, "persisted_to": persisted})
        out = {"changed": result["changed"], "diff": result["diff"], "warnings": warnings}
        if params.get("device") is not None:
            out.update(disks[0])
        else:
            out["devices"] = disks
            out["persisted_to"] = [path for disk in disks for path in disk["persisted_to"]]
        return out

    out = Part(all_settings, errors, report)
    # what a host_profile call's cgroups check their weights against (the QoS in force after this run)
    out.provides = {"planned_qos": planned_qos(all_settings)}
    return out


def run(params, fs, check_mode):
    """The module call."""
    return run_part(fs, part(params, fs), check_mode)


def purge(p):
    """purge's step: disks whose iocost the kernel holds, or with our rule, state=absent (the kernel's own model and
    QoS back at once, the rule removed). Their rules are this step's even where the kernel has no iocost."""
    disks = [d for d in p.disks() if IOCOST_RULES.path(d.stable_id) in p.paths or any(held(p.fs, d.majmin))]
    p.claim(IOCOST_RULES.path(d.stable_id) for d in disks)
    if disks and require_iocost(p.fs) is None:
        p.step("iocost", lambda: run({
            "devices": [{"device": d.stable_selector} for d in disks], "state": "absent", "keep_enabled": False,
            "persist": True, "adopt": False}, p.fs, p.check_mode))
