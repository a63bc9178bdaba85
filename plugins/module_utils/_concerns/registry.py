# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The registry of concerns: what a host profile is made of (``CONCERNS``) and how purge removes them (``REMOVALS``),
with what each side of the concern interface is given - :class:`Host` to a plan, :class:`Purge` to a removal -
and the two walks over them: the host_profile module's (:func:`profile`) and the purge module's (:func:`purge`).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

A concern is one single-purpose module's request: its argument spec (the module's own ``MODULE_SPEC``) and
how it plans a request on a host as an engine part (:class:`_reconcile.Part`). ``host_profile`` walks
:data:`CONCERNS` in order - the kernel's order across concerns: iocost (model, QoS) first, because the
weights and the block-queue defaults depend on it (enabling iocost turns wbt off on 6.1 and 6.12), then the
cgroups, then the services placed in their slices, and last the container runtimes' default parent. A fact one
concern needs from another of the same call is declared: the giver's part ``provides`` it under a name, the taker
``needs`` that name (a unit test holds every need to an earlier giver), and the taker's plan reads it from
:attr:`Host.provided`.

Adding a concern: its module file (spec, ``part()``, ``purge(p)``), then its entries here.

A host profile (:func:`profile`, a whole host in one module execution): each section is the request of one
single-purpose module, checked against that module's own argument spec and turned into that module's engine part by
that module's own code. The parts run through ONE engine run: every input of every section is refused before the
first write, check mode and the diff cover the whole profile, the kernel order holds across sections, and a refusal
anywhere restores what this call changed. Each section is then reported as its module reports it. Nothing here knows
a kernel file.

Purge: what exists is read from the owned-path registry (``_host/persist.py`` ``owned_files``), never from a list
kept here: a stamped file the registry declares is ours, whatever wrote it. Each concern is then removed by the code
that manages it: its ``purge(p)`` in the order of ``REMOVALS`` (which says why that order), given this call's context
(the files found, the disks, ``step()`` and ``claim()``). Last, the rules no module's absent path removes - NVMe
controllers' (nvme_arbitration keeps no state to undo: the controller holds the value until its next reset) and
those of devices that are gone - and then the boot helpers, which no rule runs any more. Each step is one engine run
(all-or-nothing for that concern); a failure stops the purge and names the concern, and a re-run continues from what
is left. At the end the registry is read again: anything still there fails the call, naming the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as _cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import container_runtime as _container_runtime
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_metrics as _io_metrics
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as _nvme_queues
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import placement as _placement
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    ModuleError, ReconcileError, Reconciler, RequestError, Setting, strip_invalid,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import (
    memory_substrate, substrate_findings,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError, resolve
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError, PlanReads
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BOOT_HELPERS, UDEV_RULES, ManagedFile, owned_files,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as _tenancy


class Host:
    """What a concern's plan is given: the host's files and commands, one device resolver for the whole call
    (one sysfs walk), and the facts earlier concerns of the call provided."""

    def __init__(self, fs, runner):
        self.fs = fs
        self.runner = runner
        self.resolver = DeviceResolver(fs)
        self.provided = {}


class Concern:
    """``name``: the profile's key (and its section's name in the result); ``spec``: the module's argument spec;
    ``plan(params, host) -> Part``; ``many``: the profile gives a list of requests (one part each);
    ``provides``: the names of facts its part gives later concerns (``Part.provides``); ``needs``: those it takes."""

    def __init__(self, name, spec, plan, many=False, provides=(), needs=()):
        self.name = name
        self.spec = spec
        self.plan = plan
        self.many = many
        self.provides = tuple(provides)
        self.needs = tuple(needs)


# The module alone checks iocost's conflicts itself; in a profile host_profile checks them over the whole call.
CONCERNS = (
    Concern("iocost", _iocost.MODULE_SPEC,
            lambda params, host: _iocost.part(params, host.fs, host.resolver, check_conflicts=False),
            provides=("planned_qos",)),
    Concern("blk_queue", _blk_queue.MODULE_SPEC,
            lambda params, host: _blk_queue.part(params, host.fs, host.resolver, check_conflicts=False)),
    Concern("sysctl", _sysctl.MODULE_SPEC, lambda params, host: _sysctl.part(params, host.fs)),
    # its initramfs listing (seconds) runs in the background while the later sections plan (Part.finish)
    Concern("nvme_queues", _nvme_queues.MODULE_SPEC,
            lambda params, host: _nvme_queues.part(params, host.fs, host.runner, defer=True)),
    # a weight needs iocost on the disk: checked against the QoS this call's iocost puts in place
    Concern("cgroups", _cgroup.MODULE_SPEC,
            lambda params, host: _cgroup.part(params, host.fs, host.runner,
                                              planned_qos=host.provided.get("planned_qos")),
            many=True, needs=("planned_qos",)),
    # services into the slices, after the cgroups that create them
    Concern("placement", _placement.MODULE_SPEC, lambda params, host: _placement.part(params, host.fs, host.runner)),
    # the container runtimes' default parent (the tenant's slice, created above) and where containers run
    Concern("container_runtime", _container_runtime.MODULE_SPEC,
            lambda params, host: _container_runtime.part(params, host.fs, host.runner)),
)

# -- the host profile: every section through its module's own spec and part(), one engine run ---------------------

# Sections run in the registry's order (CONCERNS: the kernel's order across concerns); within a
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


PROFILE_SPEC = module_spec(CONCERNS)


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

    def settle(self, fs):
        return self.inner.settle(fs)

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
    # Planning writes nothing: what systemd answers is asked once for all sections (PlanReads, one
    # `systemctl --version` for every cgroup section), until the plan is done.
    reads = PlanReads(runner) if runner is not None else None
    host = Host(fs, reads)
    try:
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
        # what a section left running in the background while the others planned (nvme_queues' initramfs listing)
        for section in sections:
            finish = getattr(section.part, "finish", None)
            if finish is not None:
                try:
                    finish()
                except (ModuleError, ReconcileError, DeviceError, KernelFileError, CommandError) as e:
                    errors.extend("%s: %s" % (section.label, strip_invalid(m)) for m in _messages(e))
    finally:
        if reads is not None:
            reads.stop()
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


def profile(params, fs, runner, check_mode):
    """The host_profile module's call: plan every section, one engine run, each section reported as its module would."""
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


# -- purge: each concern's removal, in order -------------------------------------------------------------------

# What purge runs, in order: each concern's ``purge(p)`` (:class:`Purge` is ``p``) finds what of its own
# the registry of owned files and the kernel show, and removes it through the module's own absent path. Boost windows
# first, so that no timer fires after the purge and the caps in force are the unit's own until the cgroup step resets
# them; the services' Slice= drop-ins (a daemon-reload, never a restart: a running service stays where it runs until
# its next start); the container runtimes' files put back as they were (no daemon restart); the cgroups (state=absent
# also resets what systemd applied to the running cgroup); iocost (the kernel's own model and QoS back at once); then
# the block queues, sysctls and the nvme driver's options, whose live values stay until the next boot or driver load;
# the io_metrics exporter last. Rules no step claims and the boot helpers are
# removed after these, as files.
REMOVALS = (
    _cgroup_boost.purge,
    _placement.purge,
    _container_runtime.purge,
    _cgroup.purge,
    _iocost.purge,
    _blk_queue.purge,
    _sysctl.purge,
    _nvme_queues.purge,
    _io_metrics.purge,
)


class PurgeError(ModuleError):
    """A concern whose removal failed; ``msg`` names it and the module's own error."""

    def __init__(self, concern, error):
        msg = "purge stopped at %s (what earlier steps removed stays removed; run purge again once fixed): %s" % (
            concern, getattr(error, "msg", None) or getattr(error, "message", None) or str(error))
        errors = [e if isinstance(e, str) else str(e) for e in getattr(error, "errors", None) or []]
        super(PurgeError, self).__init__(msg, errors or [msg], {"concern": concern})


class Purge:
    """One purge call: what each concern's ``purge(p)`` is given. ``owned``/``paths``: the registry's files found at
    the start; ``disks()``: the whole disks with a stable identity (read once); ``step(label, call)``: run one
    module's absent path and report it; ``claim(paths)``: rules a step removes (the rest are removed as files)."""

    def __init__(self, fs, runner, check_mode):
        self.fs = fs
        self.runner = runner
        self.check_mode = check_mode
        self.steps = {}
        self.diff = {"before": {}, "after": {}}
        self.warnings = []
        self.reboot_required = False
        self.owned = []
        self.paths = set()
        self.claimed = set()
        self._disks = None

    def disks(self):
        if self._disks is None:
            self._disks = [d for d in DeviceResolver(self.fs).list_disks(include_empty=True) if d.stable_id and d.has_mq]
        return self._disks

    def claim(self, paths):
        self.claimed.update(paths)

    def step(self, concern, call):
        try:
            result = call()
        except Exception as e:  # pylint: disable=broad-except
            # each module's own error (request, device, engine, kernel file, command) ends the purge here
            raise PurgeError(concern, e)
        self.warnings.extend(result.pop("warnings", []))
        self.steps[concern] = result
        for side in ("before", "after"):
            for key, value in ((result.get("diff") or {}).get(side) or {}).items():
                self.diff[side]["%s: %s" % (concern, key)] = value
        return result

    def run(self):
        self.owned = owned_files(self.fs)
        self.paths = set(p for _o, p in self.owned)
        for remove in REMOVALS:
            remove(self)
        rest = [p for p in sorted(self.paths) if any(r.owns(p) for r in UDEV_RULES) and p not in self.claimed]
        helpers = [h.path for h in BOOT_HELPERS if h.path in self.paths]
        if rest or helpers:
            self.step("files", lambda: Reconciler(self.fs, check_mode=self.check_mode).run(
                [ManagedFile(p, None) for p in rest + helpers], []))
        left = [] if self.check_mode else [p for _o, p in owned_files(self.fs)]
        return {"changed": any(r.get("changed") for r in self.steps.values()), "diff": self.diff,
                "found": sorted(self.paths), "steps": self.steps, "left": left,
                "reboot_required": self.reboot_required, "warnings": self.warnings}


def purge(fs, runner, check_mode):
    """The purge module's call: the removal of every owned file; raises PurgeError, or names what is left."""
    result = Purge(fs, runner, check_mode).run()
    if result["left"]:
        raise PurgeError("the final check", ValueError(
            "still managed after the purge: %s (a file of this collection no module removed: report it)"
            % ", ".join(result["left"])))
    return result
