#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation only: fleet_report is an action plugin (plugins/action/fleet_report.py) that runs on the
# controller; no module is ever transferred to a host.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: fleet_report
short_description: Write one JSON and one HTML report of a fleet's verify run, on the controller
version_added: 0.1.0
description:
  - Writes C(<dest>/<name>.json) and C(<dest>/<name>.html) for a run of C(playbooks/verify.yml) (or for the parts of
    several runs, such as the slices of an AWX job) - the hosts by state (V(OK), V(DRIFT) with what drifted,
    V(LATENCY) when the inference slice missed its latency objective, V(FAILED), V(UNREACHABLE)), the hardware classes
    of their data disks with and without a calibration entry, the iocost model and the QoS in force per class, and
    the latency objective and samples of each host that sets one.
  - The HTML page is one self-contained file - inline style, no script, no external asset - and every value that
    comes from a host (its name, its disks' serials and models, its drift) is escaped.
  - Each host's record comes from the P(aiinfra.io_isolation.fleet_host#filter) filter. A host of O(hosts) without a
    record is V(UNREACHABLE); a host whose record says OK but that is missing from O(active) failed after its
    judgement and is V(FAILED).
  - With O(publish=true) the run's part (its records and its hosts without one) is also returned as the
    C(set_stats) data C(io_isolation_fleet_part_<job>), which AWX keeps as the job's artifact and passes to later
    workflow nodes as an extra variable; C(playbooks/fleet_report.yml) merges those parts into one report.
  - The task never reports C(changed) - the report is what the run found, not a change to a host.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Builds the report and returns its figures; writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: all
    details: Runs on the controller; the managed hosts' platform does not matter.
options:
  dest:
    description: The directory on the controller the two files are written in (created when missing). A relative path
      is taken from the playbook's directory.
    type: path
    required: true
  hosts:
    description: Every host of the run (C(ansible_play_hosts_all)), or of the inventory when O(parts) are merged.
    type: list
    elements: str
    default: []
  results:
    description: The hosts' records (P(aiinfra.io_isolation.fleet_host#filter)); each names its host.
    type: list
    elements: dict
    default: []
  active:
    description: The hosts that had not failed at the end of the run (C(ansible_play_hosts)). Without it a record's
      state is taken as it is.
    type: list
    elements: str
  parts:
    description: Parts of earlier runs (the artifacts C(io_isolation_fleet_part_*)), merged before this run's; a
      host's record from any part wins over its having none elsewhere.
    type: list
    elements: dict
    default: []
  calibration_entries:
    description: Calibration entries (C(io_isolation_calibration_entries), the calibrate job's artifact) whose
      hardware classes count as calibrated even where no host has a disk of them.
    type: list
    elements: dict
    default: []
  name:
    description: The files' name without the extension (letters, digits, C(.), C(_), C(-)).
    type: str
    default: fleet-report
  title:
    description: The page's title.
    type: str
  job:
    description: The run's job (C(awx_job_id) under AWX), named in the report and in the published part's key.
    type: str
  publish:
    description: Return this run's part as C(set_stats) data (C(io_isolation_fleet_part_<job>), V(run) without
      O(job)).
    type: bool
    default: false
seealso:
  - plugin: aiinfra.io_isolation.fleet_host
    plugin_type: filter
  - plugin: aiinfra.io_isolation.drift_summary
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Write the fleet report of this run (verify.yml does this with io_isolation_fleet_report_dir)
  aiinfra.io_isolation.fleet_report:
    dest: /srv/fleet-reports
    hosts: "{{ ansible_play_hosts_all }}"
    active: "{{ ansible_play_hosts }}"
    results: "{{ ansible_play_hosts_all | map('extract', hostvars) | map(attribute='fleet_record', default=none)
                 | select | list }}"
  run_once: true
  delegate_to: localhost
  check_mode: false

- name: One report from the parts of the slices of an AWX job (playbooks/fleet_report.yml)
  aiinfra.io_isolation.fleet_report:
    dest: /srv/fleet-reports
    hosts: "{{ query('ansible.builtin.inventory_hostnames', 'inference:training') }}"
    parts: "{{ query('ansible.builtin.vars', *query('ansible.builtin.varnames', '^io_isolation_fleet_part_')) }}"
"""

RETURN = r"""
json_path:
  description: The JSON report on the controller (also in check mode, where it is not written).
  returned: success
  type: str
  sample: /srv/fleet-reports/fleet-report.json
html_path:
  description: The HTML page on the controller.
  returned: success
  type: str
  sample: /srv/fleet-reports/fleet-report.html
counts:
  description: Hosts per state.
  returned: success
  type: dict
  sample: {ok: 996, drift: 2, latency: 0, failed: 1, unreachable: 1}
hosts:
  description: Hosts in the report.
  returned: success
  type: int
  sample: 1000
classes:
  description: Hardware classes in the report.
  returned: success
  type: int
  sample: 12
bytes:
  description: The size of each file.
  returned: success
  type: dict
  sample: {json: 803114, html: 182407}
render_seconds:
  description: Seconds the controller took to build and render the report.
  returned: success
  type: float
  sample: 0.41
artifact:
  description: The C(set_stats) key this run's part was published under (with O(publish=true)).
  returned: when O(publish=true)
  type: str
  sample: io_isolation_fleet_part_4711
msg:
  description: What was done (or would be done in check mode), with the hosts per state.
  returned: always
  type: str
  sample: "wrote /srv/fleet-reports/fleet-report.json and /srv/fleet-reports/fleet-report.html (1000 hosts: DRIFT 2, OK 998)"
"""
