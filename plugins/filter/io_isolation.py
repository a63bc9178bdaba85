# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The roles' planning filters (controller side). Each filter is documented in plugins/filter/<name>.yml.

import importlib

from ansible.errors import AnsibleFilterError


class _Lazy(object):
    """A module imported when one of its names is first used, not when this file is imported.

    ansible-core imports every filter file of the collection in each worker process that templates one of the
    collection's filters, and forks a worker per task and host, so what these files import at the top is paid for
    per task and host: the module_utils below took about 100 ms of CPU each time (make bench-fleet,
    benchmarks/fleet/README.md). A filter that needs one of them imports it in the worker that calls it."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


_PKG = "ansible_collections.aiinfra.io_isolation.plugins."
_codecs = _Lazy(_PKG + "module_utils._host.codecs")
# io.cost's parameter names and the kernel's cost models, and unit names: small files of their own, so that the
# planning tasks do not compile codecs.py, _concerns/iocost.py or placement.py and what they import
_iocost_keys = _Lazy(_PKG + "module_utils._host.iocost_keys")
_unit_names = _Lazy(_PKG + "module_utils._host.unit_names")
_calibration_db = _Lazy(_PKG + "plugin_utils._calibration_db")


def _jmespath():
    """The jmespath library, or None without it (reported when a query is used)."""
    try:
        return importlib.import_module("jmespath")
    except ImportError:  # pragma: no cover
        return None


CAP_KEYS = {"rbps": "rbps", "wbps": "wbps", "riops": "rrandiops", "wiops": "wrandiops"}


def _identity_names(identity):
    names = set()
    for key in ("name", "majmin", "serial", "wwid", "wwn", "eui", "nguid", "uuid", "stable_id", "dev_path"):
        if identity.get(key):
            names.add(str(identity[key]))
    if identity.get("name"):
        names.add("/dev/" + identity["name"])
    for link in identity.get("by_id") or []:
        names.update((link, "/dev/disk/by-id/" + link))
    for link in identity.get("by_path") or []:
        names.update((link, "/dev/disk/by-path/" + link))
    return names


def stable_selector(identity):
    """What the roles pass as ``device``: the selector of the disk's stable identity as io_facts
    ranked it (``identity.stable_selector``; the ranking lives only in the resolver), never its
    kernel name or MAJ:MIN."""
    if identity.get("stable_selector"):
        return str(identity["stable_selector"])
    raise AnsibleFilterError("%s has no stable identity (%s); name it explicitly"
                             % (identity.get("name"), identity.get("stable_id_note") or "no WWN, serial or by-id link"))


def select_disks(facts, selectors=None, query=None):
    """The data disks: ``selectors`` (any identity form) or, when empty, a JMESPath ``query`` over the
    list of ``io_facts`` devices (each ``{identity, queue, hw_queues, iocost}``). Returns those devices."""
    devices = list(((facts or {}).get("devices") or {}).values())
    if selectors:
        out, missing = [], []
        for selector in selectors:
            found = [d for d in devices if str(selector) in _identity_names(d["identity"])]
            if not found:
                missing.append(str(selector))
            elif found[0] not in out:
                out.append(found[0])
        if missing:
            raise AnsibleFilterError("no disk on this host matches %s (disks: %s)" % (
                ", ".join(missing), ", ".join("%s serial %s" % (d["identity"]["name"], d["identity"].get("serial"))
                                              for d in devices) or "none"))
        return out
    if not query:
        return []
    jmespath = _jmespath()
    if jmespath is None:
        raise AnsibleFilterError("selecting disks by query needs the jmespath Python library on the controller")
    try:
        found = jmespath.search(query, devices)
    except jmespath.exceptions.JMESPathError as e:
        raise AnsibleFilterError("the disk query %r is not valid JMESPath: %s" % (query, e))
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(d, dict) and "identity" in d for d in found):
        raise AnsibleFilterError("the disk query %r must return a list of io_facts devices (use a filter "
                                 "expression such as [?identity.kind=='nvme'])" % query)
    return found


def calibrated_qos(qos, vrate_max):
    """``qos`` with ``max`` at most ``vrate_max`` (None: unchanged), ``min`` no higher than that.

    A calibrated model is the disk's capacity: vrate above 100% commits more than the disk completes,
    and the kernel's latency feedback does not win it back (docs/kernel-files.md, "vrate above the model").
    """
    if vrate_max is None or not qos:
        return qos
    bound = float(vrate_max)
    if float(qos.get("max", bound + 1)) <= bound:
        return qos
    out = dict(qos, max=vrate_max)
    if "min" in out and float(out["min"]) > bound:
        out["min"] = vrate_max
    return out


# io_baseline_qos_solution's value for "no solution: the roles' QoS on every disk".
NO_SOLUTION = ("", "none")


def entry_solution(entry, name):
    """(qos, figures, note) of the measured QoS solution ``name`` in a calibration entry.

    ``qos`` is None when the entry has no usable solution of that name; ``note`` then says why and how
    to get one (None when the entry has it). The solution's QoS is the io.cost.qos it was measured with
    (``entry.solutions.<name>.qos``: rpct, rlat, wpct, wlat, min, max; rpct/wpct 0 pin vrate)."""
    label = "the calibration entry %s firmware %s (%s bytes, %s)" % (
        entry.get("model"), entry.get("firmware"), entry.get("capacity_bytes"), entry.get("date") or "undated")
    solutions = entry.get("solutions")
    if not isinstance(solutions, dict):
        return None, None, ("%s has no measured QoS solutions (calibrated before the solution phase existed, or with "
                            "solutions.measure=false): calibrate this class again (playbooks/calibrate.yml) to measure "
                            "them" % label)
    found = solutions.get(name)
    if not isinstance(found, dict):
        have = sorted(k for k, v in solutions.items() if isinstance(v, dict) and isinstance(v.get("qos"), dict))
        # a name present with null: measured, and no level met the solution's bound
        why = ("none was found (no measured vrate level kept the probe within its bound)" if name in solutions
               else "it has %s" % (", ".join(have) or "none"))
        return None, None, ("%s has no %r solution: %s; set io_baseline_qos_solution to one it has, or none"
                            % (label, name, why))
    qos = found.get("qos")
    if not isinstance(qos, dict) or any(k not in qos for k in _iocost_keys.QOS_PARAMS):
        return None, None, "%s: solution %r has no complete qos (%s); calibrate this class again" % (
            label, name, ", ".join(_iocost_keys.QOS_PARAMS))
    figures = dict((k, v) for k, v in found.items() if k != "qos")
    return dict((k, qos[k]) for k in _iocost_keys.QOS_PARAMS), figures, None


def iocost_plan(disks, models=None, calibration=None, qos=None, calibration_qos=False, calibrated_vrate_max=None,
                solution=None):
    """The ``iocost`` module's ``devices`` for the disks, and where each model and QoS came from.

    Model, in order: ``models`` (keyed by any identity form of the disk), the ``calibration`` entry
    ``_calibration_db.match_entry`` picks, else the kernel's class (``ctrl: auto``).
    QoS on a calibration entry's model: its measured ``solution`` (``entry_solution``) where the entry
    has one; else the common ``qos`` (the entry's own saturation QoS only with ``calibration_qos``, which
    also wins over a solution: it is asked for by name). Either way ``max`` is at most
    ``calibrated_vrate_max`` (``calibrated_qos``). Explicit models and the kernel's class take ``qos``.
    Returns ``{devices: [{device, model, qos}], sources: {selector: explicit|calibration|kernel},
    qos_sources: {selector: {from: solution|qos|calibration, solution, vrate}}, warnings: [],
    disks: [{device, model}], uncalibrated: [{device, name, model, firmware, capacity_bytes}]}``: ``disks``
    has the six coefficients each disk will run on once applied, for planning shares of a model before
    the apply (the ``io_max_caps`` and ``per_disk`` filters); ``uncalibrated`` the disks on the kernel's
    class, with the class a calibration entry would need (io_baseline says so, or refuses them).
    """
    solution = None if solution is None or str(solution).strip().lower() in NO_SOLUTION else str(solution).strip()
    out = {"devices": [], "sources": {}, "qos_sources": {}, "warnings": [], "disks": [], "uncalibrated": []}
    for disk in disks or []:
        identity = disk["identity"]
        names = _identity_names(identity)
        model, source, disk_qos = None, "kernel", qos
        qos_source = {"from": "qos", "solution": None}
        explicit = [v for k, v in (models or {}).items() if str(k) in names]
        if explicit:
            model, source = explicit[0], "explicit"
        else:
            entry, warning = _calibration_db.match_entry(identity, calibration)
            if warning:
                out["warnings"].append(warning)
            if entry:
                model, source = entry.get("iocost_model"), "calibration"
                if calibration_qos and entry.get("qos"):
                    disk_qos, qos_source = entry["qos"], {"from": "calibration", "solution": None}
                elif solution is not None:
                    found, figures, note = entry_solution(entry, solution)
                    if found is not None:
                        disk_qos = found
                        qos_source = dict(figures, **{"from": "solution", "solution": solution})
                    else:
                        out["warnings"].append("%s: %s; it runs the roles' QoS%s meanwhile" % (
                            identity.get("name"), note,
                            "" if calibrated_vrate_max is None else " with max at most %s" % calibrated_vrate_max))
                disk_qos = calibrated_qos(disk_qos, calibrated_vrate_max)
        selector = stable_selector(identity)
        item = {"device": selector, "model": model or {"ctrl": "auto"}}
        if disk_qos:
            item["qos"] = disk_qos
        qos_source["vrate"] = [disk_qos.get("min"), disk_qos.get("max")] if disk_qos else None
        out["devices"].append(item)
        out["sources"][selector] = source
        out["qos_sources"][selector] = qos_source
        if source == "kernel":
            cls = _calibration_db.device_class(identity)
            out["uncalibrated"].append({"device": selector, "name": identity.get("name"), "model": cls[0],
                                        "firmware": cls[1], "capacity_bytes": cls[2]})
        out["disks"].append({"device": selector, "model": expected_model(disk, model)})
    return out


def qos_source_text(qos_sources, detail="full"):
    """One phrase per disk for ``iocost_plan``'s ``qos_sources``: which QoS is in force (verify.yml, the summary).

    ``detail`` full: "<selector>: <source>, vrate <bounds>"; source: "<source>" alone."""
    if detail not in ("full", "source"):
        raise AnsibleFilterError("qos_source_text: detail is %r; give full or source" % (detail,))
    out = []
    for selector, src in sorted((qos_sources or {}).items()):
        src = src or {}
        vrate = src.get("vrate") or [None, None]
        span = ("vrate %s%%" % _num(vrate[0]) if vrate[0] == vrate[1] else "vrate %s-%s%%" % (
            _num(vrate[0]), _num(vrate[1]))) if vrate[1] is not None else "the kernel's vrate bounds"
        if src.get("from") == "solution":
            what = "the %s solution" % src.get("solution")
        elif src.get("from") == "calibration":
            what = "the calibration entry's QoS"
        else:
            what = "the roles' QoS"
        out.append(what if detail == "source" else "%s: %s, %s" % (selector, what, span))
    return out


def _num(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "%d" % value if value.is_integer() else "%g" % value


def _rate(value):
    """codecs.parse_rate, without compiling codecs.py for what it returns unchanged (an int within u64: a
    calibrated model's, the kernel's class); units and errors are its."""
    if type(value) is int and 0 <= value and value.bit_length() <= 64:  # pylint: disable=unidiomatic-typecheck
        return value
    return _codecs.parse_rate(value)


def expected_model(disk, model):
    """The coefficients an io_facts disk will run on with ``model`` applied (None: the kernel's class).

    ctrl=auto: the kernel's model as io_facts read it when iocost already runs on the disk with
    ctrl=auto, else the class the kernel will pick (``kernel_class``). Coefficients the model
    does not give keep that base (a partial write keeps the others, observed on 6.1 and 6.12).
    """
    held = dict((disk.get("iocost") or {}).get("model") or {})
    if held.get("ctrl") == "auto" and all(k in held for k in _iocost_keys.COST_COEFS):
        base = dict((k, int(held[k])) for k in _iocost_keys.COST_COEFS)
    else:
        cls = _iocost_keys.kernel_class(disk["identity"].get("rotational"),
                                        (disk.get("queue") or {}).get("nr_requests"))
        base = dict(_iocost_keys.KERNEL_CLASSES[cls])
    if model and model.get("ctrl") != "auto":
        for key in _iocost_keys.COST_COEFS:
            if key in model:
                try:
                    base[key] = _rate(model[key]) if key in ("rbps", "wbps") else int(model[key])
                except (_codecs.CodecError, TypeError, ValueError):
                    raise AnsibleFilterError("iocost model %s=%r for %s is not a number"
                                             % (key, model[key], stable_selector(disk["identity"])))
    return base


def _percent(value):
    text = str(value).strip()
    if text.endswith("%"):
        try:
            return float(text[:-1])
        except ValueError:
            raise AnsibleFilterError("%r is not a percentage such as 90%%" % value)
    return None


def io_max_caps(disks, caps):
    """io.max per disk for the cgroup module from ``caps`` ({rbps, wbps, riops, wiops}, each absolute or
    'N%' of the disk's iocost model as the kernel holds it: rbps/wbps, riops of rrandiops, wiops of
    wrandiops). ``disks`` are ``iocost`` results (``devices[]``: device/model). Returns {selector: caps}."""
    out = {}
    for disk in disks or []:
        model = disk.get("model") or {}
        selector = _selector(disk)
        limits = {}
        for key, value in (caps or {}).items():
            if key not in CAP_KEYS:
                raise AnsibleFilterError("io.max cap %r: use rbps, wbps, riops or wiops" % key)
            pct = _percent(value)
            if pct is None:
                limits[key] = value
                continue
            if not 0 < pct <= 100:
                raise AnsibleFilterError("io.max cap %s=%s: a percentage of the model must be above 0 and at most "
                                         "100" % (key, value))
            base = model.get(CAP_KEYS[key])
            if not base:
                raise AnsibleFilterError("io.max cap %s=%s for %s: the disk has no iocost model to take a "
                                         "percentage of" % (key, value, selector))
            limits[key] = max(int(int(base) * pct / 100), 2)
        if limits:
            out[selector] = limits
    return out


def ram_share(value, total_bytes):
    """'20%' of ``total_bytes`` as bytes; anything else (bytes, '8G', 'max') unchanged."""
    pct = _percent(value)
    if pct is None:
        return value
    if not 0 <= pct <= 100:
        raise AnsibleFilterError("%s is not a share of RAM between 0%% and 100%%" % value)
    if not total_bytes:
        raise AnsibleFilterError("%s of RAM: the host's memory size is unknown (io_facts host.memory_stable_bytes)" % value)
    return int(int(total_bytes) * pct / 100)


def per_disk(disks, value):
    """``{selector: value}`` for each disk (``iocost`` results or plan entries)."""
    return dict((_selector(disk), value) for disk in disks or [])


def _selector(disk):
    """A disk given as an io_facts device, an iocost result, a plan entry or a selector string."""
    if isinstance(disk, dict) and "identity" in disk:
        return stable_selector(disk["identity"])
    device = disk.get("device") if isinstance(disk, dict) else disk
    return stable_selector(device) if isinstance(device, dict) else str(device)


def disk_entries(disks, settings):
    """``[{device: <selector>, **settings}]`` for each disk (one module call for all of them)."""
    out = []
    for disk in disks or []:
        entry = dict(settings or {})
        entry["device"] = _selector(disk)
        out.append(entry)
    return out


def group_entries(names, settings, label=""):
    """``{name: {label: <label><name>, name, **settings}}``: host_profile ``cgroups`` entries for groups
    that take the same settings, keyed by name (a role's plan replaces its own entries)."""
    out = {}
    for name in names or []:
        entry = dict(settings or {})
        entry.update(name=name, label=label + name)
        out[name] = entry
    return out


def _short(value, limit=120):
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# The role variables each planning filter takes, as one dict keyed by variable name (its errors name them).
INFERENCE_VARS = ("inference_slice", "inference_io_weight", "inference_memory_low", "inference_memory_min",
                  "inference_cpu_weight", "inference_io_latency_us", "inference_io_prio_class",
                  "inference_io_prio_groups", "inference_io_low", "inference_units")
TRAINING_VARS = ("training_slice", "training_io_weight", "training_io_max", "training_memory_high",
                 "training_cpu_weight", "training_io_prio_class", "training_units")
BASELINE_VARS = ("io_baseline_blk_queue", "io_baseline_sysctls", "io_baseline_nvme_queues")
TENANCY_VARS = ("io_baseline_io_share_seconds", "io_baseline_io_share_outside_max_pct", "io_baseline_io_share_min_iops",
                "io_baseline_io_share_min_bytes_per_second")
# The rest of the host as tenants (docs/isolation.md, "The host's own tiers"): baseline_plan takes these too when given.
TIER_VARS = ("io_baseline_host_tier", "io_baseline_host_tier_slice", "io_baseline_host_tier_units",
             "io_baseline_host_tier_io_weight", "io_baseline_host_tier_cpu_weight", "io_baseline_host_tier_memory_min",
             "io_baseline_system_io_weight", "io_baseline_user_io_weight", "io_baseline_runtime_units",
             "io_baseline_runtime_io_weight", "io_baseline_runtime_cpu_weight", "io_baseline_runtime_io_max",
             "io_baseline_batch_tier", "io_baseline_batch_slice", "io_baseline_batch_units",
             "io_baseline_batch_io_weight", "io_baseline_batch_cpu_weight")
# systemd's own slices: a tier of this collection is a slice of its own beside them
OWN_SLICES = ("-.slice", "system.slice", "user.slice", "machine.slice")


def _settings(settings, names, filter_name):
    """The role's variables (one dict, keyed by variable name), every one of ``names`` present."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("%s: the role's variables must be one dict keyed by variable name, not %s"
                                 % (filter_name, _short(repr(settings))))
    missing = [n for n in names if n not in settings]
    if missing:
        raise AnsibleFilterError("%s: the role's variables lack %s (pass every one of %s)"
                                 % (filter_name, ", ".join(missing), ", ".join(names)))
    return settings


def _sized(settings, name, kind, fix):
    """``len()`` of a str, list or dict variable (Jinja's ``length``), or a clear error naming it."""
    value = settings[name]
    if not isinstance(value, kind):
        raise AnsibleFilterError("%s is %s (%s): %s" % (name, _short(repr(value)), type(value).__name__, fix))
    return len(value)


def _integer(settings, name, fix):
    """Jinja's ``int`` of a variable (``'42'``, ``42.7``: 42; null: 0), or a clear error where Jinja gave 0 silently
    for text that is no number (``'500us'``)."""
    value = settings[name]
    if value is None:
        return 0
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            raise AnsibleFilterError("%s is %s: %s" % (name, _short(repr(value)), fix))


def _weight(settings, name, what="io"):
    """An io or cpu weight variable: an integer from 1 to 10000 (io.weight, cpu.weight), or a clear error."""
    value = settings[name]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit() \
            or not 1 <= int(value) <= 10000:
        raise AnsibleFilterError("%s is %s: give a weight from 1 to 10000 (the kernel's %s.weight range; 100 is "
                                 "the default every group has)" % (name, _short(repr(value)), what))
    return int(value)


def _unit_list(settings, name, patterns=True):
    """A list of service names (and patterns) the roles pass on, each checked as the placement module would."""
    units = _units(settings, name)
    for unit in units:
        problem = ("%r is a pattern: give service names here" % unit) if not patterns and _unit_names.is_pattern(unit) \
            else _unit_names.unit_problem(unit)
        if problem:
            raise AnsibleFilterError("%s: %s" % (name, problem))
    return units


def _tier_slice(settings, name):
    value = settings[name]
    if not isinstance(value, str) or not value.strip().endswith(".slice") or value.strip() in OWN_SLICES \
            or _unit_names.validate_unit_name(value.strip()):
        raise AnsibleFilterError("%s is %s: give a slice name of its own, such as hostcritical.slice (not %s)"
                                 % (name, _short(repr(value)), ", ".join(OWN_SLICES)))
    return value.strip()


def _flag(settings, name):
    value = settings[name]
    if not isinstance(value, bool):
        raise AnsibleFilterError("%s is %s: give true or false" % (name, _short(repr(value))))
    return value


def tiers_plan(profile, settings, disks):
    """``profile`` with the host's own tiers (io_baseline): the host tier's slice (io and cpu weight, memory.min) and
    its units placed there where present, never restarted (``optional``, ``at_next_start``); system.slice and
    user.slice io weights; the container runtime's units weighted and capped where the host has them
    (``when_missing: skip``); the batch tier's slice and units when asked. ``tiers``: the cgroups entries' names,
    for apply.yml's results."""
    v = settings
    cgroups, names = {}, []
    host_tier = _flag(v, "io_baseline_host_tier")
    batch = _flag(v, "io_baseline_batch_tier")
    weights = dict((n, _weight(v, n, "cpu" if "_cpu_" in n else "io")) for n in TIER_VARS if n.endswith("_weight"))
    host_units = _unit_list(v, "io_baseline_host_tier_units")
    runtime_units = _unit_list(v, "io_baseline_runtime_units", patterns=False)
    batch_units = _unit_list(v, "io_baseline_batch_units")
    if host_tier:
        name = _tier_slice(v, "io_baseline_host_tier_slice")
        memory_min = v["io_baseline_host_tier_memory_min"]
        cgroups[name] = {"label": "host tier slice", "name": name, "create": True, "when_unsupported": "warn",
                         "description": "Host-critical services (aiinfra.io_isolation host tier)",
                         "io": {"weight": weights["io_baseline_host_tier_io_weight"]},
                         "cpu": {"weight": weights["io_baseline_host_tier_cpu_weight"]},
                         "memory": {"min": memory_min}}
    for slice_name, var in (("system.slice", "io_baseline_system_io_weight"), ("user.slice", "io_baseline_user_io_weight")):
        cgroups[slice_name] = {"label": slice_name.replace(".", " "), "name": slice_name, "when_unsupported": "warn",
                               "io": {"weight": weights[var]}}
    io_max = {}
    if _sized(v, "io_baseline_runtime_io_max", dict, "give {rbps, wbps, riops, wiops}, each absolute or a "
                                                     "percentage, or {} for none") > 0:
        try:
            io_max = io_max_caps(disks, v["io_baseline_runtime_io_max"])
        except AnsibleFilterError as e:
            raise AnsibleFilterError("io_baseline_runtime_io_max: %s" % e)
    for unit in runtime_units:
        io = {"weight": weights["io_baseline_runtime_io_weight"]}
        if io_max:
            io["max"] = io_max
        cgroups[unit] = {"label": "runtime " + unit, "name": unit, "when_missing": "skip", "when_unsupported": "warn",
                         "io": io, "cpu": {"weight": weights["io_baseline_runtime_cpu_weight"]}}
    if batch:
        name = _tier_slice(v, "io_baseline_batch_slice")
        if host_tier and name == _tier_slice(v, "io_baseline_host_tier_slice"):
            raise AnsibleFilterError("io_baseline_batch_slice is %s, the host tier's slice too: give each tier a slice "
                                     "of its own" % name)
        cgroups[name] = {"label": "batch slice", "name": name, "create": True, "when_unsupported": "warn",
                         "description": "Batch and ETL work at the lowest weight (aiinfra.io_isolation batch tier)",
                         "io": {"weight": weights["io_baseline_batch_io_weight"]},
                         "cpu": {"weight": weights["io_baseline_batch_cpu_weight"]}}
    names = list(cgroups)
    profile = _slice_section(profile, cgroups, {"tiers": names})
    # where present, never restarted: a unit another role lists goes where that role says
    profile = _placement_section(profile, "host tier units", host_units if host_tier else [],
                                 v["io_baseline_host_tier_slice"], allow_critical=True, optional=True,
                                 at_next_start=True)
    return _placement_section(profile, "batch units", batch_units if batch else [], v["io_baseline_batch_slice"],
                              allow_critical=False)


def _unique(items):
    """Jinja's ``unique`` as the roles used it: order of first occurrence, strings compared case-insensitively."""
    out, seen = [], set()
    for item in items:
        key = item.lower() if isinstance(item, str) else item
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _memory_bytes(facts):
    host = (facts or {}).get("host") if isinstance(facts, dict) else None
    if not isinstance(host, dict) or "memory_stable_bytes" not in host:
        raise AnsibleFilterError("the io_facts facts (ansible_facts.io_isolation) have no host.memory_stable_bytes: "
                                 "run aiinfra.io_isolation.io_baseline (io_facts) on the host before the tenant roles")
    return host["memory_stable_bytes"]


def _planned(disks, name):
    """io_isolation_planned_disks for a per-disk setting: io_baseline plans them first."""
    if disks is None:
        raise AnsibleFilterError("%s is per data disk, and io_isolation_planned_disks is not set: run "
                                 "aiinfra.io_isolation.io_baseline on the host before the tenant roles" % name)
    if not isinstance(disks, list):
        raise AnsibleFilterError("io_isolation_planned_disks must be io_baseline's list of {device, model}, not %s"
                                 % _short(repr(disks)))
    return disks


def _ram(settings, name, memory_bytes):
    try:
        return ram_share(settings[name], memory_bytes)
    except AnsibleFilterError as e:
        raise AnsibleFilterError("%s: %s" % (name, e))


def _slice_section(profile, entries, extra):
    """``profile`` with ``entries`` added to its cgroups (a role's own entries replaced) and ``extra`` sections."""
    profile = dict(profile or {})
    cgroups = dict(profile.get("cgroups") or {})
    cgroups.update(entries)
    profile.update(cgroups=cgroups, **extra)
    return profile


def _units(settings, name):
    """A tenant's ``<role>_units``: a list of service names and patterns, or a clear error naming the variable."""
    fix = "give a list of service names or patterns (vllm.service, vllm-*.service), or [] for none"
    _sized(settings, name, list, fix)
    units = settings[name]
    bad = [u for u in units if not isinstance(u, str) or not u.strip()]
    if bad:
        raise AnsibleFilterError("%s has %s: %s" % (name, ", ".join(_short(repr(u)) for u in bad), fix))
    return [u.strip() for u in units]


def _placement_section(profile, label, units, slice_name, allow_critical, **extra):
    """``profile`` with a tenant's units in the ``placement`` section (the role's own entries replaced, by label).
    Without units and without any other role's, the profile has no placement section: nothing is asked of the
    host's units."""
    profile = dict(profile or {})
    section = dict(profile.get("placement") or {})
    entries = [e for e in section.get("units") or [] if e.get("label") != label]
    for unit in units:
        entry = {"label": label, ("pattern" if _unit_names.is_pattern(unit) else "name"): unit,
                 "slice": slice_name}
        if allow_critical:
            entry["allow_critical"] = True
        entry.update((k, v) for k, v in extra.items() if v)
        entries.append(entry)
    if entries:
        # exclusive: a unit taken off the list leaves its slice (its drop-in is removed)
        section.update(units=entries, exclusive=True)
        profile["placement"] = section
    else:
        profile.pop("placement", None)
    return profile


# The runtimes a tenant role may name in <role>_container_runtimes, and the slice Podman's containers go to (libpod has
# no setting for it: the tenant's settings go on that slice instead).
CONTAINER_RUNTIMES = ("docker", "podman")
PODMAN_SLICE = "machine.slice"


def _container_runtimes(settings, name):
    """A tenant's ``<role>_container_runtimes`` (optional, default []): docker and/or podman, or a clear error."""
    runtimes = settings.get(name) or []
    fix = "give a list of the runtimes that serve this tenant (%s), or [] for none" % ", ".join(CONTAINER_RUNTIMES)
    if not isinstance(runtimes, list) or any(r not in CONTAINER_RUNTIMES for r in runtimes):
        raise AnsibleFilterError("%s is %s: %s" % (name, _short(repr(runtimes)), fix))
    return _unique(runtimes)


def _containers_section(profile, label, runtimes, slice_name, entry):
    """``profile`` with a tenant's container runtimes in the ``container_runtime`` section (the role's own entries
    replaced, by label): Docker's default parent is the tenant's slice; Podman's is machine.slice, which gets a copy
    of the tenant's cgroups ``entry``. Without runtimes and without any other role's, no section: nothing is asked
    of the runtimes."""
    profile = dict(profile or {})
    section = dict(profile.get("container_runtime") or {})
    entries = [e for e in section.get("runtimes") or [] if e.get("label") != label]
    cgroups = dict((k, v) for k, v in (profile.get("cgroups") or {}).items() if v.get("label") != label + " (podman)")
    for runtime in runtimes:
        parent = slice_name if runtime == "docker" else PODMAN_SLICE
        entries.append({"label": label, "name": runtime, "slice": parent})
        if runtime == "podman":
            cgroups[PODMAN_SLICE] = dict(entry, name=PODMAN_SLICE, label=label + " (podman)")
    profile["cgroups"] = cgroups
    if entries:
        # every tenant's slice the profile has, whichever role lists the runtimes: a container of a runtime no role
        # lists may run in any of them (started with --cgroup-parent)
        slices = _unique([(profile.get(role) or {}).get("slice") for role in ("inference", "training")
                          if (profile.get(role) or {}).get("slice")])
        section.update(runtimes=entries, tenant_slices=slices)
        profile["container_runtime"] = section
    else:
        profile.pop("container_runtime", None)
    return profile


def inference_plan(profile, settings, disks=None, facts=None):
    """The host profile with the inference role's plan added: the slice's cgroups entry (io weight, io.latency,
    io.prio.class and io.low where asked, memory.low/min, cpu.weight), one cgroupfs entry per io.prio.class group,
    the slice in ``pressure``, the ``inference`` section ({slice, groups}) apply.yml publishes the results by, and
    the ``inference_units`` (service names or patterns) as entries of the ``placement`` section, and the
    ``inference_container_runtimes`` (optional) in the ``container_runtime`` section.

    ``settings``: the role's variables keyed by name (``INFERENCE_VARS``); ``disks``: io_isolation_planned_disks
    (needed only for io.latency and io.low); ``facts``: ansible_facts.io_isolation (host.memory_stable_bytes).
    """
    v = _settings(settings, INFERENCE_VARS, "inference_plan")
    memory_bytes = _memory_bytes(facts)
    prio_class = v["inference_io_prio_class"]
    has_class = _sized(v, "inference_io_prio_class", str, "give an io.prio.class policy name, or '' for none") > 0
    # The groups matter only with a class: without one they are neither checked nor planned.
    has_groups = has_class and _sized(v, "inference_io_prio_groups", list,
                                      "give a list of cgroup paths below the cgroup root, or [] for none") > 0
    groups = v["inference_io_prio_groups"] if has_class else []
    io = {"weight": v["inference_io_weight"]}
    if _integer(v, "inference_io_latency_us", "give the io.latency target in microseconds, or 0 for none") > 0:
        io["latency"] = per_disk(_planned(disks, "inference_io_latency_us"), v["inference_io_latency_us"])
    if has_class and not has_groups:
        io["prio_class"] = prio_class
    if _sized(v, "inference_io_low", dict, "give {rbps, wbps, riops, wiops} per disk, or {} for none") > 0:
        io["low"] = per_disk(_planned(disks, "inference_io_low"), v["inference_io_low"])
    name = v["inference_slice"]
    entry = {"label": "inference slice", "name": name, "create": True, "when_unsupported": "warn", "io": io,
             "memory": {"low": _ram(v, "inference_memory_low", memory_bytes),
                        "min": _ram(v, "inference_memory_min", memory_bytes)},
             "cpu": dict({"weight": v["inference_cpu_weight"]},
                         **_cpuset(facts, {"inference_cpus": v.get("inference_cpus", ""), "training_cpus": ""},
                                   disks, "inference"))}
    entries = {name: entry}
    entries.update(group_entries(groups, {"manager": "cgroupfs", "when_unsupported": "warn",
                                          "io": {"prio_class": prio_class}}, "inference group "))
    units = _units(v, "inference_units")
    runtimes = _container_runtimes(v, "inference_container_runtimes")
    pressure = _unique(list((profile or {}).get("pressure") or []) + [name])
    profile = _slice_section(profile, entries, {"pressure": pressure, "inference": {"slice": name, "groups": groups}})
    profile = _containers_section(profile, "inference containers", runtimes, name, entry)
    # the protected tenant may hold a host-critical unit (the container runtime its servers run in)
    return _placement_section(profile, "inference units", units, name, allow_critical=True)


def training_plan(profile, settings, disks=None, facts=None):
    """The host profile with the training role's plan added: the slice's cgroups entry (io weight, io.max caps,
    absolute or a share of each disk's planned model, io.prio.class where asked, memory.high, cpu.weight) and the
    ``training`` section ({slice}) apply.yml publishes the result by, and the ``training_units`` as entries of the
    ``placement`` section (host-critical units refused by the placement module), and the
    ``training_container_runtimes`` (optional) in the ``container_runtime`` section.

    ``settings``: the role's variables keyed by name (``TRAINING_VARS``); ``disks``: io_isolation_planned_disks
    (needed only for io.max); ``facts``: ansible_facts.io_isolation (host.memory_stable_bytes).
    """
    v = _settings(settings, TRAINING_VARS, "training_plan")
    memory_bytes = _memory_bytes(facts)
    io = {"weight": v["training_io_weight"]}
    if _sized(v, "training_io_max", dict, "give {rbps, wbps, riops, wiops}, each absolute or a percentage, "
                                          "or {} for none") > 0:
        planned = _planned(disks, "training_io_max")
        try:
            io["max"] = io_max_caps(planned, v["training_io_max"])
        except AnsibleFilterError as e:
            raise AnsibleFilterError("training_io_max: %s" % e)
    if _sized(v, "training_io_prio_class", str, "give idle or restrict-to-be, or '' for none") > 0:
        io["prio_class"] = v["training_io_prio_class"]
    name = v["training_slice"]
    wanted = v.get("training_cpus", "")
    inference_cpus = ""
    if wanted == "auto":
        # the CPUs inference does not get, as the inference role planned them before this one (site.yml's order)
        inference = ((profile or {}).get("inference") or {}).get("slice")
        if not inference:
            raise AnsibleFilterError("training_cpus auto: the CPUs inference does not get, and the profile has no "
                                     "inference plan: run aiinfra.io_isolation.inference before the training role, or "
                                     "give training_cpus a CPU list or shared")
        inference_cpus = ((profile.get("cgroups") or {}).get(inference, {}).get("cpu") or {}).get("cpus") or ""
    entry = {"label": "training slice", "name": name, "create": True, "when_unsupported": "warn", "io": io,
             "memory": {"high": _ram(v, "training_memory_high", memory_bytes)},
             "cpu": dict({"weight": v["training_cpu_weight"]},
                         **_training_cpuset(facts, wanted, inference_cpus, disks))}
    units = _units(v, "training_units")
    runtimes = _container_runtimes(v, "training_container_runtimes")
    profile = _slice_section(profile, {name: entry}, {"training": {"slice": name}})
    profile = _containers_section(profile, "training containers", runtimes, name, entry)
    # never a host-critical unit under the throttled tenant's caps: the placement module refuses them
    return _placement_section(profile, "training units", units, name, allow_critical=False)


def baseline_plan(profile, plan, settings):
    """The host profile with io_baseline's host-wide sections: ``iocost`` (the devices of ``iocost_plan``), and,
    where the role's variables ask for them, ``blk_queue`` (every data disk), ``sysctl`` and ``nvme_queues``; with the
    tier variables (``TIER_VARS``, all of them or none) the host's own tiers (``tiers_plan``).

    ``plan``: the result of ``iocost_plan``; ``settings``: the role's variables keyed by name (``BASELINE_VARS``).
    A section not asked for keeps what the profile had.
    """
    v = _settings(settings, BASELINE_VARS, "baseline_plan")
    if not isinstance(plan, dict) or not isinstance(plan.get("devices"), list):
        raise AnsibleFilterError("baseline_plan: the plan must be iocost_plan's result (with devices), not %s"
                                 % _short(repr(plan)))
    out = dict(profile or {})
    out["iocost"] = {"devices": plan["devices"]}
    if _sized(v, "io_baseline_blk_queue", dict, "give block-queue attributes, or {} to leave them") > 0:
        out["blk_queue"] = {"devices": disk_entries(plan["devices"], v["io_baseline_blk_queue"])}
    if _sized(v, "io_baseline_sysctls", dict, "give {name: value}, or {} to leave them") > 0:
        out["sysctl"] = {"sysctls": v["io_baseline_sysctls"]}
    if _sized(v, "io_baseline_nvme_queues", dict, "give the nvme_queues module's options, or {} to leave them") > 0:
        out["nvme_queues"] = v["io_baseline_nvme_queues"]
    if any(n in v for n in TIER_VARS):
        out = tiers_plan(out, _settings(v, TIER_VARS, "baseline_plan"), plan.get("disks") or [])
    return out


def _number_var(v, name, low, high=None):
    value = v[name]
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or number < low or (high is not None and number > high):
        raise AnsibleFilterError("%s is %s: give a number from %s%s" % (
            name, _short(repr(value)), _num(low), " to %s" % _num(high) if high is not None else " up"))
    return number


def tenancy_request(profile, settings):
    """host_profile's ``tenancy`` option for what the roles planned: the tenant slices (``profile.inference.slice``,
    ``profile.training.slice``), each with the services the ``placement`` section puts in it as its workloads, the
    managed disks (the ``iocost`` section's devices) and the interval and thresholds of the role's variables
    (``TENANCY_VARS``). Empty when the profile has no tenant slice (nothing to report)."""
    v = _settings(settings, TENANCY_VARS, "tenancy_request")
    profile = profile or {}
    names = [(profile.get(role) or {}).get("slice") for role in ("inference", "training")]
    names = _unique([n for n in names if n])
    if not names:
        return {}
    slices = []
    units = ((profile.get("placement") or {}).get("units")) or []
    for name in names:
        workloads = [dict({"kind": "service"}, **dict((k, u[k]) for k in ("name", "pattern") if u.get(k)))
                     for u in units if u.get("slice") == name]
        slices.append({"name": name, "workloads": workloads})
    seconds = _number_var(v, "io_baseline_io_share_seconds", 0, 60)
    return {"slices": slices,
            "devices": [d["device"] for d in ((profile.get("iocost") or {}).get("devices") or [])],
            "interval": seconds,
            "outside_max_pct": _number_var(v, "io_baseline_io_share_outside_max_pct", 0, 99.9),
            "min_iops": _number_var(v, "io_baseline_io_share_min_iops", 0),
            "min_bytes_per_second": int(_number_var(v, "io_baseline_io_share_min_bytes_per_second", 0))}


def tenancy_findings(tenancy, placement=None):
    """The tenancy report's drift (host_profile's ``tenancy.drift``) less what ``placement`` (its section's result)
    reports already: a service it lists in ``restart_required`` is said once, by the placement section."""
    restart = set((placement or {}).get("restart_required") or []) if isinstance(placement, dict) else set()
    out = []
    for line in (tenancy or {}).get("drift") or []:
        if any(line.startswith("service %s " % unit) for unit in restart):
            continue
        out.append(line)
    return out


def verify_drift(baseline, inference=None, training=None):
    """verify.yml's judgement: what a check-mode run of the roles would change, keyed as drift_summary takes it.

    ``baseline``: io_baseline_results (one result per section); ``inference``, ``training``: the tenant roles'
    results (their ``slice``, and the inference role's workload ``groups``). Returns ``{"drift": {name: result},
    "boost": the training slice's boost window or None}``: only results that would change, or that list a service
    running outside its slice (``restart_required``, the placement section without a restart); the training slice
    left out while it is in an open boost window that is its only difference (the host's timer ends it). The tenancy
    report (``baseline.tenancy``: a listed workload outside its slice, a listed slice with no process, a disk whose I/O
    is mostly charged outside the tenant slices) is drift under ``tenancy``, as its ``findings``."""
    inference, training = inference or {}, training or {}
    results = dict(baseline or {})
    tenancy = results.pop("tenancy", None)
    if isinstance(tenancy, dict):
        findings = tenancy_findings(tenancy, results.get("placement"))
        if findings:
            results["tenancy"] = {"changed": False, "findings": findings}
    results["inference slice"] = inference.get("slice") or {}
    results["training slice"] = training.get("slice") or {}
    for group, result in (inference.get("groups") or {}).items():
        results["inference group " + group] = result
    # a service that runs outside its slice (placement's restart_required), a dockerd with its old default parent and
    # a container outside its tenant's slice (container_runtime's restart_required, outside) drifted, though
    # nothing would be written
    drift = dict((k, v) for k, v in results.items()
                 if isinstance(v, dict) and (v.get("changed") or v.get("restart_required") or v.get("outside")
                                             or v.get("findings")))
    boost = (training.get("slice") or {}).get("boost")
    if isinstance(boost, dict) and boost.get("active") and boost.get("only_difference"):
        drift.pop("training slice", None)
    return {"drift": drift, "boost": boost if isinstance(boost, dict) else None}


def drift_summary(results):
    """One line per setting a check-mode run would change: ``{name: registered result}`` -> lines.

    Kernel drift the cgroup module found is given as file/key/want/have; managed files as
    "file <path> differs"; other settings as before -> after. A slice's boost window (the cgroup
    module's ``boost``) is one line saying what is wrong with it: past its end and still lifted, no
    timer to end it, or open while the slice drifted besides. A service that runs outside its slice
    (placement's ``restart_required``) is one line too; the placement's ``daemon-reload`` key is not (it
    only repeats the drop-ins). A result's ``findings`` (verify_drift's ``tenancy``) are one line each.
    """
    lines = []
    for name, result in sorted((results or {}).items()):
        restart = result.get("restart_required") if isinstance(result, dict) else None
        outside = result.get("outside") if isinstance(result, dict) else None
        findings = result.get("findings") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not (result.get("changed") or restart or outside or findings):
            continue
        lines.extend("%s: %s" % (name, f) for f in findings or [])
        for unit in restart or []:
            info = (result.get("units") or {}).get(unit)
            if info is None and "runtimes" in result:
                lines.append("%s: %s runs with its old configuration (default cgroup parent) until it is restarted "
                             "(io_isolation_restart_ok)" % (name, unit))
                continue
            info = info or {}
            lines.append("%s: %s runs in %s, outside %s, until it is restarted (io_isolation_restart_ok)"
                         % (name, unit, info.get("cgroup"), info.get("slice")))
        for c in outside or []:
            lines.append("%s: %s container %s runs in %s, outside %s" % (
                name, c.get("runtime"), c.get("id"), c.get("cgroup"), " and ".join(c.get("expected") or [])))
        before = (result.get("diff") or {}).get("before") or {}
        after = (result.get("diff") or {}).get("after") or {}
        boost = result.get("boost")
        if isinstance(boost, dict):
            lines.append("%s: %s" % (name, _boost_line(boost)))
        for key in sorted(set(before) | set(after)):
            if isinstance(boost, dict) and str(key).startswith("boost window "):
                continue
            if key == "daemon-reload" and "restart_required" in result:
                continue
            old, new = before.get(key), after.get(key)
            drift = old.get("drift") if isinstance(old, dict) else None
            if drift:
                # a single-value file's key is the file's own name (cpuset.cpus): named once
                lines.extend("%s: %s %s: want %s, have %s" % (
                    name, key, " ".join(str(p) for p in dict.fromkeys((d.get("file"), d.get("key"))) if p is not None),
                    d.get("want"), d.get("have")) for d in drift)
            elif isinstance(old, dict) and isinstance(new, dict) and "files" in new:
                changed = sorted(k for k in set(old.get("files") or {}) | set(new["files"])
                                 if (old.get("files") or {}).get(k) != new["files"].get(k))
                lines.extend("%s: %s: file %s differs" % (name, key, path) for path in changed)
            elif str(key).startswith("/"):
                what = "would be removed" if new is None else "would be created" if old is None else "differs"
                lines.append("%s: file %s %s" % (name, key, what))
            else:
                lines.append("%s: %s: %s -> %s" % (name, key, _short(old), _short(new)))
        if not before and not after and not restart and not outside and not findings:
            lines.append("%s: would change" % name)
    return lines


# CPU placement (issue 39): the words a tenant's <role>_cpus takes besides a CPU list. '' (or []) is no cpuset.
CPU_WORDS = {"inference_cpus": ("auto", "poll"), "training_cpus": ("auto", "shared")}
# Accelerators inference reads into: every display/3D/processing function but the display the firmware booted on
# (a server's BMC graphics).
PLACEMENT_POLICY = (
    "inference auto: the online CPUs of the NUMA nodes of the data disks' NVMe controllers and of the accelerators "
    "(the boot display excluded), memory on those nodes; inference poll: per data disk, the online CPUs of one of its poll "
    "queues (the first on the controller's node; blk-mq maps every CPU to a poll queue, so it takes two or more); "
    "training auto: the online CPUs inference does not get, memory on their nodes; shared or '': no cpuset "
    "(every CPU)")


def _cpu_request(v, name):
    """(word, cpus): a <role>_cpus variable as ('', None), (word, None) or ('list', [cpus])."""
    value = v.get(name)
    if value is None or value == "" or value == []:
        return "", None
    if isinstance(value, str) and value.strip() in CPU_WORDS[name]:
        return value.strip(), None
    problems = _codecs.CPUSET_CPUS.validate(value)
    if problems:
        raise AnsibleFilterError("%s is %s: give %s, a CPU list such as '0-3,8' or a list of CPU numbers, or '' for "
                                 "none (%s)" % (name, _short(repr(value)), " or ".join(CPU_WORDS[name]),
                                                problems[0].split(": ", 1)[1]))
    return "list", _codecs.CPUSET_CPUS.normalize(value)


def _topology(facts):
    topology = (facts or {}).get("topology") if isinstance(facts, dict) else None
    if not isinstance(topology, dict) or not isinstance(topology.get("cpus"), dict):
        raise AnsibleFilterError("the io_facts facts (ansible_facts.io_isolation) have no topology: they come from an "
                                 "older io_facts; gather them again with this collection's aiinfra.io_isolation.io_facts")
    return topology


def _disk_controllers(facts, disks):
    """[(disk selector, kernel name, NVMe controller name or None, its facts or None)] of the planned data disks."""
    # a list: ansible-core's lazy containers give a values() that one pass uses up (the second disk found nothing)
    devices = list((facts.get("devices") or {}).values())
    controllers = facts.get("nvme") or {}
    out = []
    for disk in disks:
        selector = str(disk.get("device")) if isinstance(disk, dict) else str(disk)
        found = [d for d in devices if selector in _identity_names(d.get("identity") or {})]
        name = found[0]["identity"]["name"] if found else None
        ctrl = next((c for c, info in sorted(controllers.items()) if name and name in (info.get("namespaces") or [])),
                    None)
        out.append((selector, name, ctrl, controllers.get(ctrl)))
    return out


def _mems(topology, cpus):
    """The nodes with memory whose online CPUs the set uses; None without NUMA (nothing to choose)."""
    if not topology.get("numa"):
        return None
    nodes = [n["node"] for n in topology.get("nodes") or [] if set(n.get("cpus") or []) & set(cpus)]
    return [n for n in nodes if n in (topology.get("memory_nodes") or [])] or None


def _placed(cpus, topology, source):
    return {"cpus": _codecs.format_ranges(cpus), "mems": _codecs.format_ranges(_mems(topology, cpus)) if _mems(topology, cpus)
            else None, "source": source}


def cpu_placement(facts, settings, disks=None):
    """Where inference and training run (issue 39): ``{inference, training}``, each ``{cpus, mems, source}`` (a CPU
    and node list for the cgroup module's ``cpu.cpus``/``cpu.mems``, or None for no cpuset), and ``policy``.

    ``settings``: ``inference_cpus`` (a CPU list, ``auto``, ``poll`` or '') and ``training_cpus`` (a CPU list,
    ``auto``, ``shared`` or ''); ``disks``: io_isolation_planned_disks (for ``auto`` and ``poll``); ``facts``:
    ansible_facts.io_isolation (``topology``, ``nvme``, ``devices``). Refused, naming the variable: a CPU that is not
    online, ``poll`` where a data disk has no poll queues (or their CPUs are unknown), and a result that leaves a
    tenant no CPU.
    """
    if not isinstance(settings, dict):
        raise AnsibleFilterError("cpu_placement: the role's variables must be one dict keyed by variable name, not %s"
                                 % _short(repr(settings)))
    topology = _topology(facts)
    online = list(topology["cpus"].get("online") or [])
    out = {"inference": {"cpus": None, "mems": None, "source": "no cpuset"},
           "training": {"cpus": None, "mems": None, "source": "no cpuset"}, "policy": PLACEMENT_POLICY, "notes": []}
    requests = dict((name, _cpu_request(settings, name)) for name in ("inference_cpus", "training_cpus"))
    for name, (word, cpus) in requests.items():
        offline = [c for c in cpus or [] if c not in online]
        if offline:
            raise AnsibleFilterError("%s %s: CPU %s %s not online on this host (online: %s); give CPUs from %s"
                                     % (name, _codecs.format_ranges(cpus), _codecs.format_ranges(offline),
                                        "is" if len(offline) == 1 else "are", _codecs.format_ranges(online),
                                        _codecs.format_ranges(online)))
    word, cpus = requests["inference_cpus"]
    inference = None
    if word == "list":
        inference = cpus
        out["inference"] = _placed(cpus, topology, "inference_cpus")
    elif word in ("auto", "poll"):
        planned = _disk_controllers(facts, _planned(disks, "inference_cpus: %s" % word))
        inference, source = (_auto(topology, planned, online) if word == "auto" else _poll(planned, online, topology))
        if inference is None:
            out["notes"].append("inference_cpus auto: %s; inference runs on every CPU" % source)
        else:
            out["inference"] = _placed(inference, topology, source)
    word, cpus = requests["training_cpus"]
    if word == "list":
        out["training"] = _placed(cpus, topology, "training_cpus")
        if inference is not None and not set(cpus) - set(inference):
            out["notes"].append("training_cpus %s are all inference's CPUs too" % _codecs.format_ranges(cpus))
    elif word == "auto" and inference is not None:
        rest = [c for c in online if c not in inference]
        if not rest:
            raise AnsibleFilterError(
                "training_cpus auto: inference takes every online CPU (%s, from %s), so training would have none: "
                "give training_cpus shared (both tenants on every CPU) or a CPU list, or narrow inference_cpus"
                % (_codecs.format_ranges(inference), out["inference"]["source"]))
        out["training"] = _placed(rest, topology, "auto: the online CPUs inference does not get")
    return out


def _cpuset(facts, settings, disks, tenant):
    """{cpus, mems} for a tenant's cgroups entry from cpu_placement, or {} for no cpuset."""
    if _cpu_request(settings, "%s_cpus" % tenant)[0] == "":
        return {}
    placed = cpu_placement(facts or {}, settings, disks)[tenant]
    return dict((k, placed[k]) for k in ("cpus", "mems") if placed[k] is not None)


def _training_cpuset(facts, wanted, inference_cpus, disks):
    """training_cpus ('', shared, a CPU list or auto) as cpus/mems; auto takes the CPUs the inference slice's plan
    (inference_cpus, '' for none) leaves."""
    if wanted == "auto" and not inference_cpus:
        return {}          # inference has no cpuset: training shares every CPU with it
    return _cpuset(facts, {"inference_cpus": inference_cpus, "training_cpus": wanted}, disks, "training")


def _auto(topology, planned, online):
    """(CPUs, source) of the nodes of the data disks' controllers and the accelerators; (None, why) when none is
    known (no NUMA, or every node reads -1)."""
    nodes, why = {}, []
    for selector, _name, ctrl, info in planned:
        if info is not None and info.get("numa_node") is not None:
            nodes.setdefault(info["numa_node"], []).append("%s (%s)" % (ctrl, selector))
    for acc in topology.get("accelerators") or []:
        if not acc.get("boot_vga") and acc.get("node") is not None:
            nodes.setdefault(acc["node"], []).append("%s %s" % (acc.get("vendor") or acc.get("vendor_id"),
                                                                acc["address"]))
    if not topology.get("numa") or not nodes:
        return None, ("no NUMA node is known for the data disks and accelerators (%s)"
                      % ("one node" if not topology.get("numa") else "their numa_node reads -1"))
    by_node = dict((n["node"], n.get("cpus") or []) for n in topology.get("nodes") or [])
    cpus = sorted(set(c for node in nodes for c in by_node.get(node, []) if c in online))
    for node, what in sorted(nodes.items()):
        why.append("node %d: %s" % (node, ", ".join(what)))
    if not cpus:
        raise AnsibleFilterError("inference_cpus auto: nodes %s have no online CPU (%s): give inference_cpus a CPU list"
                                 % (_codecs.format_ranges(nodes), "; ".join(why)))
    return cpus, "auto: " + "; ".join(why)


def _poll(planned, online, topology):
    """(CPUs, source): for each data disk, the online CPUs of one of its poll queues - the first with CPUs on the
    controller's node, else the first with an online CPU - so inference's polled I/O has queues that the other CPUs
    (training's) never submit to. blk-mq maps every CPU to a poll queue: with one poll queue every CPU shares it and
    there is nothing to choose, so a disk needs two or more; refused too where a disk has none or its types are
    unknown."""
    cpus, why = set(), []
    if not planned:
        raise AnsibleFilterError("inference_cpus poll: there are no planned data disks (io_isolation_planned_disks is "
                                 "empty), so no poll queue to follow: give inference_cpus auto or a CPU list")
    for selector, name, ctrl, info in planned:
        if info is None:
            raise AnsibleFilterError("inference_cpus poll: data disk %s (%s) is no NVMe namespace, and only NVMe "
                                     "has poll queues: give inference_cpus auto or a CPU list"
                                     % (selector, name or "not in io_facts"))
        queues = info.get("queues") or {}
        sets = info.get("poll_queue_cpus")
        if sets is None:
            raise AnsibleFilterError("inference_cpus poll: the queue types of %s (%s) are unknown (%s): mount debugfs "
                                     "(io_facts reads the hctx types there), or give a CPU list"
                                     % (ctrl, selector, queues.get("source")))
        if len(sets) < 2:
            raise AnsibleFilterError(
                "inference_cpus poll: %s (%s) has %s poll queue%s (%s default/%s read/%s poll), and blk-mq maps every "
                "CPU to a poll queue, so %s: give it two or more (aiinfra.io_isolation.nvme_queues, poll_queues), or "
                "give inference_cpus auto or a CPU list"
                % (ctrl, selector, len(sets) or "no", "" if len(sets) == 1 else "s", queues.get("default"),
                   queues.get("read"), queues.get("poll"),
                   "every CPU shares its one poll queue" if sets else "no CPU polls"))
        node_cpus = set(dict((n["node"], n.get("cpus") or []) for n in topology.get("nodes") or [])
                        .get(info.get("numa_node")) or [])
        usable = [(i, [c for c in cpu_set if c in online]) for i, cpu_set in enumerate(sets)]
        usable = [(i, c) for i, c in usable if c]
        if not usable:
            raise AnsibleFilterError("inference_cpus poll: no online CPU is served by a poll queue of %s (%s)"
                                     % (ctrl, selector))
        local = [(i, c) for i, c in usable if node_cpus and set(c) <= node_cpus]
        index, chosen = (local or usable)[0]
        cpus.update(chosen)
        why.append("%s poll queue %d of %d (CPUs %s%s)" % (
            ctrl, index + 1, len(sets), _codecs.format_ranges(chosen),
            ", node %s" % info.get("numa_node") if local else ""))
    return sorted(cpus), "poll: " + "; ".join(why)


def _boost_line(boost):
    end, timer = boost.get("window_end"), boost.get("timer")
    if boost.get("expired"):
        return "boost window ended at %s, but the caps are still lifted (%s: %s)" % (
            end, timer, "not loaded" if boost.get("orphaned") else boost.get("timer_state"))
    if boost.get("orphaned"):
        return "boost window until %s has no timer to end it (%s is not loaded)" % (end, timer)
    return "in a boost window until %s, and drifted besides it:" % end


class FilterModule(object):
    def filters(self):
        return {"select_disks": select_disks, "iocost_plan": iocost_plan, "io_max_caps": io_max_caps,
                "ram_share": ram_share, "per_disk": per_disk, "disk_entries": disk_entries,
                "group_entries": group_entries, "qos_source_text": qos_source_text,
                "drift_summary": drift_summary, "verify_drift": verify_drift, "inference_plan": inference_plan,
                "training_plan": training_plan, "baseline_plan": baseline_plan, "tenancy_request": tenancy_request,
                "tenancy_findings": tenancy_findings, "cpu_placement": cpu_placement}
