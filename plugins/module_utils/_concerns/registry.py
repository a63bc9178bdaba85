# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The registry of concerns: what a host profile is made of (``CONCERNS``) and how purge removes them (``REMOVALS``).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

A concern is one single-purpose module's request: its argument spec (the module's own ``MODULE_SPEC``) and
how it plans a request on a host as an engine part (:class:`_reconcile.Part`). ``host_profile`` walks
:data:`CONCERNS` in order - the kernel's order across concerns: iocost (model, QoS) first, because the
weights and the block-queue defaults depend on it (enabling iocost turns wbt off on 6.1 and 6.12), then the
cgroups, and last the services placed in their slices. A fact one concern needs from another of the same call is
declared: the giver's part ``provides`` it under a name, the taker ``needs`` that name (a unit test holds every
need to an earlier giver), and the taker's plan reads it from :attr:`Host.provided`.

Adding a concern: its module file (spec, ``part()``, ``purge(p)``), then its entries here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as _cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_metrics as _io_metrics
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as _nvme_queues
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import placement as _placement
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver


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
)

# What purge runs, in order: each concern's ``purge(p)`` (``_concerns/purge.py`` gives ``p``) finds what of its own
# the registry of owned files and the kernel show, and removes it through the module's own absent path. Boost windows
# first, so that no timer fires after the purge and the caps in force are the unit's own until the cgroup step resets
# them; the services' Slice= drop-ins (a daemon-reload, never a restart: a running service stays where it runs until
# its next start); the cgroups (state=absent also resets what systemd applied to the running cgroup); iocost (the kernel's own
# model and QoS back at once); then the block queues, sysctls and the nvme driver's options, whose live values stay
# until the next boot or driver load; the io_metrics exporter last. Rules no step claims and the boot helpers are
# removed after these, as files.
REMOVALS = (
    _cgroup_boost.purge,
    _placement.purge,
    _cgroup.purge,
    _iocost.purge,
    _blk_queue.purge,
    _sysctl.purge,
    _nvme_queues.purge,
    _io_metrics.purge,
)
