#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation only: calibration_report is an action plugin (plugins/action/calibration_report.py)
# that runs on the controller; no module is ever transferred to a host.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: calibration_report
short_description: Write an HTML report (with plots) of an iocost calibration, on the controller
version_added: 0.1.0
description:
  - Writes C(<dest>/<name>.html), one self-contained file (plots embedded as PNG) for the results of
    M(aiinfra.io_isolation.iocost_calibrate) on one disk, where C(<name>) is the entry's database file name without
    C(.json) (see P(aiinfra.io_isolation.calibration_entry_file#filter)).
  - "The report has: a header (device, serial, model, firmware, capacity, kernel, fio version, host, date, repeats);
    the calibrated model next to the kernel's own class for the disk with their ratio and the spread of each
    coefficient (within a run and over the repeats); the QoS and the rule that derived it; the QoS solutions of the
    solution phase (C(isolation), C(bandwidth), C(latency) with their C(io.cost.qos) values and measured figures)
    and every point of each run (vrate level, probe p99 against its solo p99, rate kept, antagonist IOPS and share),
    with the curve plotted (probe p99 ratio and antagonist share against the pinned vrate); every run; the method and
    stop rule; for each of the six measurements the rate per window over time with the running estimate and the
    point where the run stopped (marked V(stable), V(max) or V(ended)), all repeats overlaid; and the completion
    latency percentiles of the random read and write QoS runs on a 'nines' axis with the derived C(rlat) and C(wlat)
    marked."
  - Runs on the controller only and never connects to the host. The same input gives the same bytes (no timestamps
    in the document or the PNG metadata), so the task reports C(changed) only when the content changes.
  - "The plots need the Python library C(matplotlib) on the controller, imported only when the report is written.
    Without it the report is still written, with every table but no plots and a line saying how to get them;
    the task succeeds and returns RV(plots_missing=true) (the measurement is the product, the plots a convenience)."
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
    details: Renders the report and tells whether the file would change; writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: all
    details: Runs on the controller; the managed host's platform does not matter.
options:
  results:
    description:
      - The M(aiinfra.io_isolation.iocost_calibrate) results of one disk, one per repeat. A variable registered in a
        loop (with C(results)) is accepted as it is.
      - Results of different models, firmware revisions or capacities are refused.
    type: raw
    required: true
  entry:
    description:
      - The calibration database entry of these results (from the P(aiinfra.io_isolation.calibration_entry#filter)
        filter). Without it, the entry is computed from O(results) the same way.
      - It must be of the same model, firmware and capacity as O(results).
    type: dict
  dest:
    description:
      - Directory on the controller for the report; created when missing. A relative path is relative to the
        playbook's directory.
    type: path
    required: true
  title:
    description: "The report's title. Default C(iocost calibration: <model> firmware <firmware>, <capacity>)."
    type: str
requirements:
  - matplotlib (on the controller) for the plots; without it the report has no plots
seealso:
  - module: aiinfra.io_isolation.iocost_calibrate
  - plugin: aiinfra.io_isolation.calibration_entry
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Write the calibration report of the disk next to the database
  aiinfra.io_isolation.calibration_report:
    results: "{{ calibration_runs.results }}"
    entry: "{{ calibration_entry }}"
    dest: "{{ playbook_dir }}/calibration/reports"
  register: calibration_report

- name: Show where it is
  ansible.builtin.debug:
    msg: "{{ calibration_report.path }}"
"""

RETURN = r"""
path:
  description: The report file on the controller (also in check mode, where it is not written).
  returned: success
  type: str
  sample: /srv/calibration/reports/QEMU_NVMe_Ctrl__7.2.0__1073741824.html
plots:
  description: The plots embedded in the report, in order (V(solutions) when the runs measured the solution phase).
  returned: success
  type: list
  elements: str
  sample: [measurements, latency, solutions]
plots_missing:
  description: True when matplotlib is missing on the controller and the report has no plots (RV(msg) says how
    to get them).
  returned: success
  type: bool
  sample: false
bytes:
  description: The size of the report.
  returned: success
  type: int
  sample: 183412
msg:
  description: What was done (or would be done in check mode).
  returned: always
  type: str
  sample: wrote /srv/calibration/reports/QEMU_NVMe_Ctrl__7.2.0__1073741824.html
"""
