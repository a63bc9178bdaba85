# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The tenancy report's request (pairs with _observability/tenancy.py OPTIONS).
    DOCUMENTATION = r"""
options:
  tenancy:
    description:
      - Report who runs in the tenant slices and who the managed disks' I/O is charged to, read from cgroupfs
        only (no command), and judge it (the findings are the report's C(drift)). Omitted, nothing of it is read.
      - Per slice, its units (the service and scope directories below it), its processes (counted over the
        C(cgroup.procs) of its whole subtree, with a bounded sample named by C(/proc/<pid>/comm)) and each listed
        workload with the cgroup it runs in.
      - Per disk in O(tenancy.devices), the bytes and I/Os charged to each top-level cgroup, to each tenant slice
        and outside the tenant slices, from two readings of C(io.stat) O(tenancy.interval) seconds apart.
      - The guide C(docs/observability.md) says why the thresholds are what they are.
    type: dict
    version_added: 0.4.0
    suboptions:
      slices:
        description:
          - The tenant slices, each with the workloads listed for it.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: The slice (V(inference.slice)); a nested one by systemd's dashes (V(ai-inference.slice)).
            type: str
            required: true
          workloads:
            description:
              - The workloads that belong in the slice. Each one that runs outside it is DRIFT, and so is the slice
                when it lists any and no process runs in it.
            type: list
            elements: dict
            default: []
            suboptions:
              kind:
                description: What the workload is; V(service) is a systemd service, found by its cgroup directory.
                type: str
                default: service
                choices: [service]
              name:
                description: The unit's name (V(vllm.service)). One of O(tenancy.slices[].workloads[].name) and
                  O(tenancy.slices[].workloads[].pattern).
                type: str
              pattern:
                description: A shell pattern over the running services' names (V(vllm-*.service)).
                type: str
      devices:
        description:
          - The managed disks whose I/O shares to report and judge, in any form the device options take.
        type: list
        elements: str
        default: []
      interval:
        description:
          - Seconds between the two readings of C(io.stat); the call takes that much longer. V(0) reports the totals
            since each cgroup was created, which are not judged. At most 60.
        type: float
        default: 2.0
      outside_max_pct:
        description:
          - DRIFT when more than this share (percent) of a disk's bytes, or of its I/Os, over the interval was
            charged outside the tenant slices.
        type: float
        default: 50.0
      min_iops:
        description:
          - A disk below both this many I/Os per second and O(tenancy.min_bytes_per_second) over the interval is
            idle, and not judged.
        type: float
        default: 20.0
      min_bytes_per_second:
        description:
          - See O(tenancy.min_iops).
        type: int
        default: 1048576
      sample:
        description:
          - How many of a slice's processes to name.
        type: int
        default: 8
"""
