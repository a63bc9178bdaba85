# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The fleet report's per-host filter (documented in plugins/filter/fleet_host.yml); the report itself is
# plugin_utils/_fleet_report.py, written by the fleet_report action.

import importlib

from ansible.errors import AnsibleFilterError


def fleet_host(facts, host, qos_sources=None, model_sources=None, drift=None, boost=None, groups=None,
               objective=None, latency=None, latency_missed=None):
    # imported when called: ansible-core imports every filter file of the collection in each worker that templates
    # one of its filters (make bench-fleet, benchmarks/fleet/README.md)
    report = importlib.import_module("ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._fleet_report")
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("fleet_host: give the host's io_facts (ansible_facts.io_isolation), not %s"
                                 % type(facts).__name__)
    return report.host_record(host, facts, qos_sources, model_sources, drift, boost, groups, objective, latency,
                              latency_missed)


class FilterModule(object):
    def filters(self):
        return {"fleet_host": fleet_host}
