#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: blk_queue
short_description: Set block-queue attributes (scheduler, nr_requests, wbt, read-ahead, ...) of disks, persistently
version_added: 0.1.0
description:
  - Manages C(/sys/block/<disk>/queue/) attributes of one or several whole disks in one call - C(scheduler),
    C(nr_requests), C(wbt_lat_usec), C(max_sectors_kb), C(read_ahead_kb), C(rq_affinity), C(nomerges), C(iostats),
    C(add_random).
  - Validates every value against what the kernel will accept on each disk before the first write (the request limit
    of the scheduler the disk will run, C(max_hw_sectors_kb), the schedulers the kernel has or can load), then writes
    in the order the kernel needs - the scheduler first, because switching it resets C(nr_requests) - reads everything
    back and restores what it changed if the kernel refuses a value.
  - Compares what the kernel will hold, not what was typed - C(nr_requests) below 4 is stored as 4, C(read_ahead_kb)
    is stored in whole pages, O(wbt_lat_usec=-1) is the kernel default - so a second run reports no change.
  - With O(persist=true) a udev rule per disk, keyed by the disk's WWN or serial (never its name or C(MAJ:MIN)),
    re-applies the values at device add (boot, hot-plug), in the same order.
  - C(queue/io_poll), C(queue/io_poll_delay) and C(mq/*/cpu_list) are not settings; options of those names are
    refused with a pointer to M(aiinfra.io_isolation.nvme_queues).
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
  - aiinfra.io_isolation.persist
options:
  device:
    description:
      - One whole disk to manage, with the attributes given at the top level.
      - Accepts a kernel name (V(nvme0n1)), a C(/dev) path, a C(/dev/disk/by-id/) or C(/dev/disk/by-path/) link,
        a WWN or EUI, a serial number, or V(MAJ:MIN). A partition is refused with its parent disk's name (a partition
        has no queue of its own).
      - Mutually exclusive with O(devices); one of the two is required.
    type: str
  devices:
    description:
      - Several disks in one call (each module call costs seconds on a busy host). Each entry has C(device) (same
        forms as O(device)) and any of the attributes below; attributes given at the top level are defaults for every
        entry, and an entry's own values override them.
    type: list
    elements: dict
    suboptions:
      device:
        description: The whole disk, in any form O(device) accepts.
        type: str
        required: true
      scheduler:
        description: See O(scheduler).
        type: str
      nr_requests:
        description: See O(nr_requests).
        type: int
      wbt_lat_usec:
        description: See O(wbt_lat_usec).
        type: int
      max_sectors_kb:
        description: See O(max_sectors_kb).
        type: int
      read_ahead_kb:
        description: See O(read_ahead_kb).
        type: int
      rq_affinity:
        description: See O(rq_affinity).
        type: int
        choices: [0, 1, 2]
      nomerges:
        description: See O(nomerges).
        type: int
        choices: [0, 1, 2]
      iostats:
        description: See O(iostats).
        type: bool
      add_random:
        description: See O(add_random).
        type: bool
      io_poll:
        description: Refused, see O(io_poll).
        type: raw
      io_poll_delay:
        description: Refused, see O(io_poll_delay).
        type: raw
      cpu_list:
        description: Refused, see O(cpu_list).
        type: raw
  state:
    description:
      - V(present) sets the attributes (and writes the udev rule with O(persist=true)).
      - V(absent) removes the disk's udev rule and takes no attributes. The live values are left as they are (the
        kernel has no "reset to default" for most of them) and are returned; they go back to the kernel's defaults at
        the next boot.
    type: str
    choices: [present, absent]
    default: present
  scheduler:
    description:
      - The I/O scheduler (elevator), for example V(none), V(mq-deadline) (V(deadline) is the kernel's alias), V(kyber),
        V(bfq). It must be listed in C(queue/scheduler) or be installed as a loadable module (the kernel loads
        C(<name>-iosched) on write); anything else is refused with the list of what the disk offers.
      - Written first. Switching resets C(nr_requests) to the new scheduler's default; the result warns when that
        happens and O(nr_requests) is not managed.
      - Bio-based disks (dm, md, NVMe multipath heads) have no scheduler and are refused.
    type: str
  nr_requests:
    description:
      - Request-queue depth. Values below 4 are stored as 4 by the kernel (the module writes and compares 4, with a
        warning).
      - The upper limit depends on the scheduler the disk will run - the hardware tag depth (C(mq/*/nr_tags), 1023
        on the lab's NVMe disks) with V(none), 2048 with any scheduler - and is checked before the first write.
      - Written after O(scheduler), and again whenever the scheduler changes.
    type: int
  wbt_lat_usec:
    description:
      - Writeback-throttling latency target in microseconds; V(0) turns wbt off, V(-1) means the kernel default (2000
        non-rotational, 75000 rotational).
      - While bfq or iocost has switched the default wbt off (6.12 shows V(0)), V(-1) and the default latency leave it
        off - the kernel ignores a write of the latency it already holds - and the module reports that instead of
        fighting it; another value turns wbt on next to them.
    type: int
  max_sectors_kb:
    description:
      - Largest request size in KiB. At least one page (4 KiB) and at most the disk's C(max_hw_sectors_kb), a multiple
        of the logical block size.
    type: int
  read_ahead_kb:
    description:
      - Read-ahead in KiB. The kernel stores whole pages, so a value that is not a multiple of the page size (4 KiB) is
        rounded down, compared as rounded, and reported in a warning.
    type: int
  rq_affinity:
    description:
      - Completion CPU - V(0) anywhere, V(1) the submitting CPU's group (default), V(2) the submitting CPU. Other
        numbers are refused (the kernel ignores them silently).
    type: int
    choices: [0, 1, 2]
  nomerges:
    description:
      - V(0) all merges, V(1) only simple one-hit merges, V(2) no merges.
    type: int
    choices: [0, 1, 2]
  iostats:
    description: Account I/O statistics (C(/proc/diskstats)) for the disk.
    type: bool
  add_random:
    description: Let the disk's I/O timing feed the kernel's entropy pool.
    type: bool
  io_poll:
    description:
      - Refused. C(queue/io_poll) only shows whether the disk has poll queues; the kernel refuses writes since 5.16.
        Poll queues come from the nvme driver's C(poll_queues) parameter - use M(aiinfra.io_isolation.nvme_queues).
      - Accepted as an option only so that the refusal can say this (an unknown option would not).
    type: raw
  io_poll_delay:
    description:
      - Refused. Hybrid polling was removed in 6.4 and the kernel ignores the value; use
        M(aiinfra.io_isolation.nvme_queues) for polled I/O.
    type: raw
  cpu_list:
    description:
      - Refused. C(mq/*/cpu_list) is read-only (the CPU-to-queue map comes from the driver); change the queue split with
        M(aiinfra.io_isolation.nvme_queues).
    type: raw
notes:
  - Values are applied live by writing the sysfs files (one C(write()) each), never through C(udevadm trigger).
  - The udev rule C(/etc/udev/rules.d/91-aiinfra-blk-queue-<stable id>.rules) holds exactly the attributes of the last
    call for that disk; give all of a disk's attributes in one task.
  - With O(persist=false) only the running kernel is changed; an existing rule is left in place (and reported).
  - On a disk that runs iocost, O(scheduler=bfq) is refused before the first write (check mode too), since bfq defeats
    iocost's weights (measured on the lab). A O(wbt_lat_usec) latency set by hand on such a disk is a warning (every
    kernel keeps it on under iocost); set 0 to switch wbt off, or -1 for the default.
seealso:
  - module: aiinfra.io_isolation.io_facts
  - module: aiinfra.io_isolation.iocost
"""

EXAMPLES = r"""
- name: mq-deadline with a deep queue and large read-ahead on the training disks, one call
  aiinfra.io_isolation.blk_queue:
    read_ahead_kb: 4096
    devices:
      - device: lab-nvme-a
        scheduler: mq-deadline
        nr_requests: 2048
      - device: /dev/disk/by-id/virtio-lab-virtio-data
        scheduler: none
        nr_requests: 128
        wbt_lat_usec: -1

- name: Latency-sensitive inference disk, single-device form
  aiinfra.io_isolation.blk_queue:
    device: lab-nvme-b
    scheduler: none
    rq_affinity: 2
    nomerges: 2
    add_random: false

- name: Stop persisting the settings of a disk (live values stay until the next boot)
  aiinfra.io_isolation.blk_queue:
    device: lab-nvme-b
    state: absent
"""

RETURN = r"""
devices:
  description: One entry per disk, in the order given.
  returned: success
  type: list
  elements: dict
  contains:
    device:
      description: The disk the selector resolved to, as C(io_facts) reports it.
      type: dict
      sample: {name: nvme0n1, majmin: "259:0", kind: nvme, serial: lab-nvme-a, rotational: false,
               stable_id: "wwn:nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"}
    changed:
      description: Whether this disk's queue or rule changed (or would, in check mode).
      type: bool
    held:
      description:
        - What the kernel holds after the call for every attribute the module knows (V(null) where the disk has no
          such file). In check mode, what it holds now.
      type: dict
      sample: {scheduler: mq-deadline, nr_requests: 2048, wbt_lat_usec: 2000, max_sectors_kb: 512, read_ahead_kb: 4096,
               rq_affinity: 1, nomerges: 0, iostats: true, add_random: false}
    warnings:
      description:
        - What the kernel normalised or did on its own - C(nr_requests) raised to 4, read-ahead rounded to pages,
          C(nr_requests) reset by a scheduler change, wbt switched off by bfq or iocost, a rule left in place with
          O(persist=false), live values left by O(state=absent). Also emitted as task warnings.
      type: list
      elements: str
      sample: ["nvme0n1: wbt_lat_usec reads 0: iocost is enabled on the disk (io.cost.qos enable=1), which switches
                the default wbt off. This module does not turn it back on"]
    persisted_to:
      description: The udev rule that carries the values across reboots (V(null) with O(persist=false) or O(state=absent)).
      type: str
      sample: /etc/udev/rules.d/91-aiinfra-blk-queue-wwn_nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001.rules
    removed:
      description: With O(state=absent), the rule file this call removed (V(null) if there was none).
      type: str
      returned: state=absent
persisted_to:
  description: All rule files this call manages (O(state=present), O(persist=true)).
  returned: success
  type: list
  elements: str
diff:
  description: Before and after, nested by disk name and attribute; rule files by path (V(null) = absent).
  returned: success
  type: dict
  sample: {before: {nvme0n1: {scheduler: none, nr_requests: 1023}}, after: {nvme0n1: {scheduler: mq-deadline, nr_requests: 2048}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_blk_queue.MODULE_SPEC)
    exit_module(module, lambda: _blk_queue.run(module.params, KernelFS(), module.check_mode))


if __name__ == "__main__":
    main()
