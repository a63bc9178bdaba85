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

from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _codecs as codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._persist import (
    IOCOST_HELPER, IOCOST_RULES, PersistError, udev_match,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._argspec import PERSIST, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._capabilities import require_iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._reconcile import CodecSetting, ModuleError, Part, run_part

ROOT = "/sys/fs/cgroup"
# The kernel's own cost models (autop[] in block/blk-iocost.c; hdd and ssd_dfl read back on the lab's
# 6.1 and 6.12 kernels): what a disk runs on with ctrl=auto. docs/kernel-files.md has the table.
KERNEL_CLASSES = {
    "hdd": dict(rbps=174019176, rseqiops=41708, rrandiops=370, wbps=178075866, wseqiops=42705, wrandiops=378),
    "ssd_qd1": dict(rbps=245855193, rseqiops=61575, rrandiops=6946, wbps=141365009, wseqiops=33716,
                    wrandiops=26796),
    "ssd_dfl": dict(rbps=488636629, rseqiops=8932, rrandiops=8518, wbps=427891549, wseqiops=28755, wrandiops=21940),
    "ssd_fast": dict(rbps=3102524156, rseqiops=724816, rrandiops=778122, wbps=1742780862, wseqiops=425702,
                     wrandiops=443193),
}


def kernel_class(rotational, queue_depth):
    """The class the kernel picks for a disk (ioc_autop_idx): hdd when rotational, ssd_qd1 at queue
    depth 1, else ssd_dfl (it steps to ssd_fast only while neither model nor QoS is user-set)."""
    if rotational:
        return "hdd"
    return "ssd_qd1" if queue_depth == 1 else "ssd_dfl"


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


def held(fs, majmin):
    """(model, qos) the kernel holds for the disk now; None where it has no line."""
    out = []
    for name, codec in (("io.cost.model", codecs.IO_COST_MODEL), ("io.cost.qos", codecs.IO_COST_QOS)):
        out.append(codec.lookup(codec.parse(fs.read(ROOT + "/" + name) or ""), majmin))
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
        out.append(CodecSetting("io.cost.model[%s]" % dev, ROOT + "/io.cost.model", codecs.IO_COST_MODEL, model,
                                device=dev, order=10, reset={"ctrl": "auto"}))
    out.append(CodecSetting("io.cost.qos[%s]" % dev, ROOT + "/io.cost.qos", codecs.IO_COST_QOS, qos,
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


ENTRY_KEYS = ("device", "model", "qos", "state", "keep_enabled")
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


def part(params, fs, resolver=None):
    """Every requested disk as one engine part (a refusal on one disk restores the others).

    Its report has changed, diff and the disks: per disk device/model/qos/persisted_to - one
    disk's at the top level (O(device)), or ``devices`` (O(devices)).
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

    def report(result, _check_mode):
        warnings, disks = [], []
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

    return Part(all_settings, errors, report)


def run(params, fs, check_mode):
    """The module call."""
    return run_part(fs, part(params, fs), check_mode)
