# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The registry of concerns: what a host profile is made of (``CONCERNS``) and how purge removes them (``REMOVALS``),
with what each side of the concern interface is given - :class:`Host` to a plan, :class:`Purge` to a removal -
and the purge module's walk (:func:`purge`).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

A concern is one single-purpose module's request: its argument spec (the module's own ``MODULE_SPEC``) and
how it plans a request on a host as an engine part (:class:`_reconcile.Part`). ``host_profile`` walks
:data:`CONCERNS` in order - the kernel's order across concerns: iocost (model, QoS) first, because the
weights and the block-queue defaults depend on it (enabling iocost turns wbt off on 6.1 and 6.12), then the
cgroups, then the services placed in their slices, and last the container runtimes' default parent. A fact one
concern needs from another of the same call is
declared: the giver's part ``provides`` it under a name, the taker ``needs`` that name (a unit test holds every
need to an earlier giver), and the taker's plan reads it from :attr:`Host.provided`.

Adding a concern: its module file (spec, ``part()``, ``purge(p)``), then its entries here.

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

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as _cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import container_runtime as _container_runtime
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_metrics as _io_metrics
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as _nvme_queues
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import placement as _placement
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError, Reconciler
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BOOT_HELPERS, UDEV_RULES, ManagedFile, owned_files,
)


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
    Concern("nvme_queues", _nvme_queues.MODULE_SPEC, lambda params, host: _nvme_queues.part(params, host.fs, host.runner)),
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
