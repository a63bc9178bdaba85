# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A host's whole I/O-isolation profile in one module execution.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Each section of the profile is the request of one single-purpose module (iocost, blk_queue,
sysctl, nvme_queues, one cgroup per entry), checked against that module's own argument spec and
turned into that module's engine part (:class:`_reconcile.Part`) by that module's own code. The
parts run through ONE engine run: every input of every section is refused before the first
write, check mode and the diff cover the whole profile, the kernel order holds across sections
(iocost before the weights that need it), and a refusal anywhere restores what this call changed.
Each section is then reported as its module reports it. Nothing here knows a kernel file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import (
    memory_substrate, substrate_findings,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns.registry import CONCERNS, Host
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError, resolve
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as _tenancy
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    ModuleError, ReconcileError, Reconciler, RequestError, Setting, strip_invalid,
)

# Sections run in the registry's order (_concerns.CONCERNS: the kernel's order across concerns); within a
# section its own order holds: each section's orders are shifted into a band.
BAND = 1000000


# The module's own options: one per concern of the registry (checked against that module's spec when it runs;
# a list where the concern takes many requests), the groups whose pressure the health gate reads, and the tenancy
# report verify.yml and the health gate judge (read after the apply, like the pressure).
def module_spec(concerns):
    return {"argument_spec": dict(
        [(c.name, {"type": "list", "elements": "dict", "default": []} if c.many else {"type": "dict"}) for c in concerns]
        + [("pressure", {"type": "list", "elements": "str", "default": []}),
           ("tenancy", {"type": "dict", "options": _tenancy.OPTIONS})])}


MODULE_SPEC = module_spec(CONCERNS)


def _validated(concern, label, params):
    """A section's parameters checked and defaulted by its module's own argument spec."""
    spec = concern.spec
    validator = ArgumentSpecValidator(spec["argument_spec"], mutually_exclusive=spec.get("mutually_exclusive"),
                                      required_one_of=spec.get("required_one_of"))
    result = validator.validate(params)
    if result.error_messages:
        raise RequestError(["%s: %s" % (label, m) for m in result.error_messages])
    return result.validated_parameters


def _messages(err):
    """Every problem an error of the collection carries, as text."""
    if isinstance(err, (ModuleError, ReconcileError)):
        return list(err.errors) or [err.msg]
    if isinstance(err, (DeviceError, KernelFileError, CommandError)):
        return [err.message]
    return [str(err)]


class Section:
    def __init__(self, concern, label, part):
        self.concern = concern
        self.name = concern.name
        self.label = label
        self.part = part
        self.keys = {}     # the engine key this call gave a setting -> the key the section's own report uses


class Labeled(Setting):
    """A section's setting under the key ``<label>: <its key>`` and in the section's order band.

    The setting itself is untouched (some use their key as their path); this only renames it for
    the one engine run, so two sections' keys never collide and messages name the section.
    """

    def __init__(self, inner, label, order):  # pylint: disable=super-init-not-called
        self.inner = inner
        self.label = label
        self.key = "%s: %s" % (label, inner.key)
        self.order = order

    @property
    def desired(self):
        return self.inner.desired

    def read(self, fs):
        return self.inner.read(fs)

    def write(self, fs, value, current):
        return self.inner.write(fs, value, current)

    def differs(self, current):
        return self.inner.differs(current)

    def validate(self, current):
        return ["%s: %s" % (self.label, p) for p in self.inner.validate(current)]

    def restore(self, fs, previous):
        return self.inner.restore(fs, previous)

    def report(self, value):
        return self.inner.report(value)


def protected_slices(params):
    """The slices the profile gives memory protection (memory.low or memory.min above 0), in order."""
    out = []
    for entry in params.get("cgroups") or []:
        memory = entry.get("memory") or {}
        if (entry.get("state") or "present") == "present" and str(entry.get("name") or "").endswith(".slice") \
                and any(str(memory.get(k)).strip() not in ("None", "", "0") for k in ("low", "min")):
            out.append(entry["name"])
    return out


def substrate(params, fs):
    """The memory substrate (``_capabilities.memory_substrate``) with its findings for this profile: ``errors``
    refuse the call before any write, ``warnings`` are reported."""
    found = memory_substrate(fs)
    found["protected"] = protected_slices(params)
    found["errors"], found["warnings"] = substrate_findings(found, found["protected"])
    return found


def plan(params, fs, runner):
    """Every section as an engine part, in kernel order; RequestError listing every refusal, by section."""
    requests = []
    for concern in CONCERNS:
        if not concern.many:
            if params.get(concern.name) is not None:
                requests.append((concern, concern.name, params[concern.name]))
            continue
        names = {}
        for entry in params.get(concern.name) or []:
            entry = dict(entry)
            label = entry.pop("label", None) or entry.get("name") or concern.name
            requests.append((concern, label, entry))
            if entry.get("name") in names:
                raise RequestError("%s: %r is listed twice (as %s and %s); give each once"
                                   % (concern.name, entry["name"], names[entry["name"]], label))
            names[entry.get("name")] = label
    memory = substrate(params, fs)
    sections, errors = [], ["memory substrate: %s" % m for m in memory["errors"]]
    host = Host(fs, runner)
    for concern, label, raw in requests:
        try:
            part = concern.plan(_validated(concern, label, raw), host)
            host.provided.update(getattr(part, "provides", None) or {})
        except RequestError as e:
            if all(m.startswith(label + ": ") for m in e.errors):
                errors.extend(e.errors)     # already named by section (argument spec)
            else:
                errors.extend("%s: %s" % (label, strip_invalid(m)) for m in _messages(e))
            continue
        except (ModuleError, ReconcileError, DeviceError, KernelFileError, CommandError) as e:
            errors.extend("%s: %s" % (label, strip_invalid(m)) for m in _messages(e))
            continue
        errors.extend("%s: %s" % (label, m) for m in part.errors)
        sections.append(Section(concern, label, part))
    if errors:
        raise RequestError(errors)
    found, warnings = conflicts(fs, host.resolver, sections, host.provided.get("planned_qos") or {})
    if found:
        raise RequestError(["iocost conflict: %s" % m for m in found])
    return sections, ["iocost conflict: %s" % m for m in warnings], memory


def conflicts(fs, resolver, sections, planned_qos):
    """iocost's conflict rules (_iocost.CONFLICTS) on every disk that runs iocost after this call, as the whole
    call leaves it: the QoS its iocost section writes (else the disk's own), the scheduler and wbt its blk_queue
    section sets, the io.latency targets its cgroups set. (errors, warnings)."""
    qos = codecs.IO_COST_QOS.parse(fs.read(_iocost.CGROUP_ROOT + "/io.cost.qos") or "")
    enabled = dict((m, str((line or {}).get("enable")) == "1") for m, line in qos.items())
    enabled.update((m, str((line or {}).get("enable")) == "1") for m, line in planned_qos.items())
    if not any(enabled.values()):
        return [], []
    queues, groups = {}, []
    touched = set(planned_qos)      # the disks this call configures: its iocost, blk_queue and io.latency
    for section in sections:
        queues.update(getattr(section.part, "queues", None) or {})
        if getattr(section.part, "io_limits", None) is not None:
            groups.append(section.part.io_limits)
            touched.update(m for name in _iocost.LIMIT_FILES for m in section.part.io_limits[1].get(name, {}))
    touched.update(queues)
    records = dict((d.majmin, resolver.resolve(d.name)) for d in resolver.list_disks()
                   if enabled.get(d.majmin) and d.majmin in touched)
    return _iocost.conflicts(_iocost.plan_disks(fs, records, enabled, queues=queues, groups=groups))


def run(params, fs, runner, check_mode):
    """The module call: plan every section, one engine run, each section reported as its module would."""
    tenancy = None
    if params.get("tenancy") is not None:
        tenancy = _tenancy.prepare(fs, params["tenancy"])     # refused before the first write, like any section
    sections, conflict_warnings, memory = plan(params, fs, runner)
    settings = []
    for band, section in enumerate(sections, 1):
        for s in section.part.settings:
            labeled = Labeled(s, section.label, band * BAND + s.order)
            section.keys[labeled.key] = s.key
            settings.append(labeled)
    result = Reconciler(fs, check_mode=check_mode).run(settings)
    out = {"changed": result["changed"], "diff": result["diff"], "sections": {},
           "reboot_required": False, "substrate": memory,
           "warnings": list(conflict_warnings) + ["memory substrate: %s" % m for m in memory["warnings"]]}
    out.update((c.name, {}) for c in CONCERNS if c.many)
    for section in sections:
        own = _share(result, section.keys)
        report = section.part.report(own, check_mode)
        out["warnings"].extend("%s: %s" % (section.label, w) for w in report.pop("warnings", []))
        if section.concern.many:
            out[section.name][report["name"]] = report
        else:
            out["sections"][section.name] = report
        out["reboot_required"] = out["reboot_required"] or bool(report.get("reboot_required"))
    out["pressure"] = pressure(fs, params.get("pressure") or [])
    if tenancy is not None:
        out["tenancy"] = _tenancy.report(fs, *tenancy)
        out["warnings"].extend("tenancy: %s" % w for w in out["tenancy"].pop("warnings"))
    return out


def _share(result, keys):
    """The engine result restricted to one section's settings, keyed as the section knows them."""
    def pick(mapping):
        return dict((keys[k], v) for k, v in mapping.items() if k in keys)
    before, after = pick(result["diff"]["before"]), pick(result["diff"]["after"])
    return {"changed": bool(before or after), "diff": {"before": before, "after": after},
            "values": pick(result["values"])}


def pressure(fs, names):
    """PSI for the health gate: the host's, and each named cgroup's io/memory/cpu pressure."""
    out = {"host": {}, "cgroups": {}}
    for kind in ("io", "memory", "cpu"):
        path = "/proc/pressure/" + kind
        text = fs.read(path)
        out["host"][kind] = codecs.codec_for(path).parse(text) if text is not None else None
    for name in names:
        try:
            path = resolve(name)
        except CgroupNameError as e:
            out["cgroups"][name] = {"exists": False, "error": str(e)}
            continue
        entry = {"path": path, "exists": fs.isdir(path)}
        for kind in ("io", "memory", "cpu"):
            text = fs.read("%s/%s.pressure" % (path, kind)) if entry["exists"] else None
            entry[kind] = codecs.codec_for(path + "/%s.pressure" % kind).parse(text) if text is not None else None
        out["cgroups"][name] = entry
    return out
