#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: io_latency
short_description: Block I/O latency per cgroup and disk, sampled with eBPF for a bounded window
version_added: 0.2.0
description:
  - Samples the completion latency of block I/O for O(seconds) with C(bpftrace) and returns, per cgroup and per disk,
    the number of I/Os, the cgroup's share of the disk's I/Os, the p50, p90, p99 and p99.9 latencies and a log2
    histogram.
  - Each I/O (bio) is attributed to the cgroup the block layer charged it to (its C(blkcg), through the bio's C(blkg)),
    read at completion - not to the task that happens to run when the I/O completes, which is usually an interrupt
    or another task. Writeback is charged to the cgroup that dirtied the pages, as C(io.max) and iocost charge it.
  - Latency runs from the bio's entry into the block layer (C(submit_bio_noacct)) to its completion (C(bio_endio)) -
    the wait in C(io.max) throttling and iocost is part of it, as it is part of what the application sees.
  - The histogram is counted in the kernel with 8 buckets per power of two (exact below 16 microseconds); a
    percentile lies within its bucket, 12.5% wide, and is interpolated there.
  - Nothing is left running - the eBPF program ends itself after the window, the module stops it if it overruns, and
    it ends with the module if the module is killed.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.device.DEVICES
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads; it samples in check mode too.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: N/A
    details: The module never changes anything.
options:
  seconds:
    description:
      - How long to sample, 1 to 3600 seconds. The task takes this long plus the time C(bpftrace) needs to compile and
        attach (seconds; longer on slow or emulated machines).
    type: int
    default: 10
  depth:
    description:
      - How many levels below the cgroup root name a group - V(1) sums everything under a top-level slice
        (C(/inference.slice)), V(0) reports each cgroup as it is.
    type: int
    default: 1
  cgroups:
    description:
      - Report only these groups (as named after O(depth), for example V(/inference.slice)). Empty reports every group
        that did I/O.
    type: list
    elements: str
    default: []
requirements:
  - C(bpftrace) on the host (Debian package C(bpftrace); 0.17 and 0.23 are tested).
  - A kernel with BTF (C(/sys/kernel/btf/vmlinux); Debian's kernels have it), cgroup v2, and root.
notes:
  - The probe costs CPU on every I/O while it runs (two kprobes per bio); the collection's C(docs/observability.md)
    gives the overhead measured in the lab.
  - An I/O still in flight when the window closes is not counted.
seealso:
  - module: aiinfra.io_isolation.io_facts
"""

EXAMPLES = r"""
- name: Sample block I/O latency per slice for 30 seconds
  aiinfra.io_isolation.io_latency:
    seconds: 30
  register: lat

- name: Show the inference slice's p99 on each disk
  ansible.builtin.debug:
    msg: "{{ item.disk }}: p99 {{ item.p99_us }} us over {{ item.count }} I/Os ({{ (item.share * 100) | round(1) }}% of the disk)"
  loop: "{{ lat.latency | selectattr('cgroup', 'equalto', '/inference.slice') }}"

- name: Every cgroup on one disk, not summed per slice
  aiinfra.io_isolation.io_latency:
    seconds: 10
    depth: 0
    devices: [nvme0n1]
"""

RETURN = r"""
latency:
  description: One entry per cgroup and disk that did I/O in the window, sorted by cgroup and disk.
  returned: success
  type: list
  elements: dict
  contains:
    cgroup:
      description: The group, as a path below the cgroup root (V(/) is the root; C((no cgroup)) an I/O charged to none).
      type: str
    disk:
      description: The whole disk (an I/O to a partition counts for its disk).
      type: str
    majmin:
      description: The disk's C(MAJ:MIN).
      type: str
    count:
      description: I/Os (bios) completed in the window.
      type: int
    share:
      description: This group's part of the disk's I/Os in the window, 0 to 1.
      type: float
    p50_us:
      description: Median latency, microseconds; also C(p90_us), C(p99_us), C(p999_us).
      type: float
    sum_us:
      description: The I/Os' latencies added up, each taken at its bucket's middle (approximate, as a histogram's sum).
      type: float
    max_us:
      description: The upper bound of the highest bucket that holds an I/O.
      type: float
    histogram:
      description: Log2 buckets - C(le_us), and the C(count) of I/Os below it and at or above the previous bucket's bound.
      type: list
      elements: dict
  sample:
    - {cgroup: /inference.slice, disk: nvme0n1, majmin: "259:0", count: 48213, share: 0.71, p50_us: 88.5,
       p90_us: 140.2, p99_us: 412.0, p999_us: 980.5, max_us: 2048.0,
       histogram: [{le_us: 64, count: 1200}, {le_us: 128, count: 40110}, {le_us: 256, count: 6500}]}
seconds:
  description: The window.
  returned: success
  type: int
  sample: 10
elapsed:
  description: How long the probe ran, compile and attach included, seconds.
  returned: success
  type: float
  sample: 13.2
bpftrace:
  description: The version of C(bpftrace) that sampled.
  returned: success
  type: str
  sample: bpftrace v0.17.0
lost_events:
  description: Events the probe lost (the counts are low by at least this many; a warning says so).
  returned: success
  type: int
  sample: 0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_latency as _latency
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import DEVICES, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import resolve_many
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(
        argument_spec=merge(DEVICES, seconds={"type": "int", "default": 10}, depth={"type": "int", "default": 1},
                            cgroups={"type": "list", "elements": "str", "default": []}),
        supports_check_mode=True,
    )
    fs = KernelFS()
    exit_module(module, lambda: _latency.run(module.params, fs, Runner(module),
                                             resolve=lambda selectors: resolve_many(fs, selectors)))


if __name__ == "__main__":
    main()
