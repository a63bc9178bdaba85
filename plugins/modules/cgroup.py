#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cgroup
short_description: I/O, memory and CPU protection or limits for a workload group, through systemd or cgroupfs
version_added: 0.1.0
description:
  - Gives one cgroup v2 group (a systemd slice, service or scope, or a path below C(/sys/fs/cgroup) that a
    C(Delegate=yes) unit owns) its I/O weight, limits and latency target, memory protection and limits, CPU weight and
    quota, and the CPUs and memory nodes it may use (cpuset), idempotently and verified against the kernel files.
  - With O(manager=systemd) it writes a drop-in C(/etc/systemd/system/<unit>.d/50-aiinfra-io-isolation.conf) (stamped
    as managed, atomic) with systemd's own directives (C(IOWeight=), C(IODeviceWeight=), C(IOReadBandwidthMax=),
    C(IOWriteBandwidthMax=), C(IOReadIOPSMax=), C(IOWriteIOPSMax=), C(IODeviceLatencyTargetSec=), C(MemoryMin=),
    C(MemoryLow=), C(MemoryHigh=), C(MemoryMax=), C(MemorySwapMax=), C(MemoryZSwapMax=), C(CPUWeight=), C(CPUQuota=),
    C(AllowedCPUs=), C(AllowedMemoryNodes=)),
    reloads systemd and applies the directives to the running unit with C(systemctl set-property --runtime) (no
    restart; systemd 257 does not apply a changed drop-in at daemon-reload), removes the runtime control files that
    leaves behind, and reads the unit's kernel files back. Devices are named by C(/dev/disk/by-id) links; I/O rates are
    written as plain bytes because systemd reads I/O suffixes in base 1000 and memory suffixes in base 1024.
  - With O(manager=cgroupfs) it creates the group, enables the controllers it needs in each ancestor's
    C(cgroup.subtree_control) and writes the files, one C(write()) per line. On a systemd host this is allowed only below
    a unit with C(Delegate=yes), because systemd owns every other group and undoes direct writes (on systemd 252 a
    C(daemon-reload) strips hand-enabled controllers and the group's C(io.*) files vanish).
  - Everything is validated before the first write; if the kernel or systemd refuses a value, what this run changed is
    put back.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options:
  name:
    description:
      - The group. A systemd unit name (V(inference.slice), V(ai-training.slice), V(vllm.service), a C(.scope)), or a
        path below C(/sys/fs/cgroup), relative (V(system.slice/runtime.service/workloads/inference)) or absolute.
      - Paths with C(..) or outside C(/sys/fs/cgroup), and unit names systemd would refuse, fail before anything is done.
    type: str
    required: true
  manager:
    description:
      - Who applies the settings. V(auto) uses V(systemd) when O(name) is a unit and the host runs systemd, else
        V(cgroupfs).
    type: str
    choices: [auto, systemd, cgroupfs]
    default: auto
  state:
    description:
      - V(present) applies the given settings.
      - V(absent) with V(systemd) removes the drop-in (and a slice unit this module created) and puts the unit's values
        back to systemd's defaults on the running unit. With V(cgroupfs) it removes the group if it is empty; a group
        with processes or child groups is kept, and the settings given in the task are put back to the kernel defaults.
    type: str
    choices: [present, absent]
    default: present
  create:
    description:
      - With V(systemd), create the slice (a stamped C(/etc/systemd/system/<name>.slice)) if no unit of that name exists.
        Services and scopes are never created. A cgroupfs group is always created.
    type: bool
    default: false
  description:
    description:
      - C(Description=) of a slice created with O(create=true).
    type: str
  when_unsupported:
    description:
      - What to do with a setting the kernel or the manager cannot apply (io.latency, io.prio.class or io.low on a
        kernel built without them; cpu.cpus or cpu.mems without the cpuset controller; io.prio.class, io.low or
        memory.oom.group under O(manager=systemd)).
      - V(fail) stops before any change; V(warn) skips those settings with a warning and applies the rest.
    type: str
    choices: [fail, warn]
    default: fail
  when_missing:
    description:
      - What to do when the unit O(name) is not on the host (systemd C(LoadState=not-found)) with O(state=present).
      - V(fail) refuses it before any change; V(skip) configures nothing for it and reports RV(skipped). For settings
        of a unit that only some hosts have, such as the container runtime's C(docker.service).
      - A slice is never missing (systemd makes one when it is asked for); a name that is no unit name is refused
        either way.
    type: str
    choices: [fail, skip]
    default: fail
  adopt:
    description:
      - Take over a drop-in or slice unit file at the managed path that this collection did not write.
    type: bool
    default: false
  io:
    description:
      - I/O controller settings. Devices (the keys of O(io.weights), O(io.max), O(io.latency), O(io.low)) are given
        like every device of this collection (kernel name, C(/dev) path, C(/dev/disk/by-id) or C(by-path) link, WWN,
        serial or C(MAJ:MIN)) and resolved to the whole disk; a partition is refused.
    type: dict
    suboptions:
      weight:
        description:
          - C(io.weight) default of the group, 1..10000 (kernel default 100). Takes effect only on disks where iocost is
            enabled (M(aiinfra.io_isolation.iocost)); a warning says so when it is off on every disk the group uses.
        type: int
      weights:
        description:
          - Per-device C(io.weight) overrides, device -> 1..10000 or V(default) (drop the override). iocost must be
            initialised on each disk first; otherwise the task fails with "enable iocost on <disk> first".
        type: dict
      max:
        description:
          - Per-device C(io.max), device -> any of C(rbps), C(wbps) (bytes/s; an integer or a string with an explicit
            base, V(200MB) = 200000000, V(200MiB) = 209715200), C(riops), C(wiops) (IO/s), each a number or V(max) to
            clear. V(0) and unit-less suffixes (V(10M)) are refused.
        type: dict
      latency:
        description:
          - Per-device C(io.latency) target in microseconds (or V(max) to clear), device -> µs. Needs a kernel with
            C(CONFIG_BLK_CGROUP_IOLATENCY) (Debian's kernels do not have it).
        type: dict
      prio_class:
        description:
          - C(io.prio.class) policy, one of V(no-change), V(promote-to-rt), V(restrict-to-be), V(idle) (a policy name,
            not an I/O class number). Kernels before 6.5 call V(promote-to-rt) V(none-to-rt); it is mapped.
          - Needs C(CONFIG_BLK_CGROUP_IOPRIO); only with O(manager=cgroupfs) (systemd has no directive for it; its
            C(IOSchedulingClass=) is a per-process priority instead).
        type: str
      low:
        description:
          - Per-device C(io.low), device -> C(rbps), C(wbps), C(riops), C(wiops), C(idle), C(latency). Only kernels
            before 6.10 built with C(CONFIG_BLK_DEV_THROTTLING_LOW) have it, and only O(manager=cgroupfs) can set it.
        type: dict
  memory:
    description:
      - Memory controller settings. Sizes are bytes or strings with K, M, G, T (base 1024, also KiB..TiB), or V(max) /
        V(infinity). The kernel keeps whole pages, so values are compared after rounding down to the page size.
        Percentages and negative values are refused.
    type: dict
    suboptions:
      min:
        description: C(memory.min), hard protection.
        type: raw
      low:
        description: C(memory.low), best-effort protection.
        type: raw
      high:
        description: C(memory.high), throttling limit.
        type: raw
      max:
        description: C(memory.max), hard limit (the group's own OOM killer acts above it).
        type: raw
      swap_max:
        description: C(memory.swap.max).
        type: raw
      zswap_max:
        description: C(memory.zswap.max) (C(MemoryZSwapMax=) needs systemd 253 or later).
        type: raw
      oom_group:
        description: C(memory.oom.group); only with O(manager=cgroupfs) (for a service, use its own C(OOMPolicy=kill)).
        type: bool
  cpu:
    description:
      - CPU controller settings.
    type: dict
    suboptions:
      weight:
        description: C(cpu.weight), 1..10000 (kernel default 100).
        type: int
      max:
        description:
          - C(cpu.max) as V(QUOTA PERIOD) in microseconds (V(50000 100000) is half a CPU), V(max), or a dict with
            C(quota) and C(period). With V(systemd) it becomes C(CPUQuota=) with at most two decimals; a quota that no
            such percentage produces is refused with the two nearest that work.
        type: raw
      cpus:
        description:
          - C(cpuset.cpus), the CPUs the group's tasks may run on, as a CPU list in the kernel's form (V(0-3,8,10-11))
            or a list of CPU numbers. With V(systemd) it becomes C(AllowedCPUs=) (systemd 244 or later), which systemd
            writes to C(cpuset.cpus) after enabling the C(cpuset) controller in the ancestors; with V(cgroupfs) the
            module enables C(+cpuset) in the ancestors below the delegated unit and writes the file.
          - Every CPU must be online now (C(/sys/devices/system/cpu/online)); an empty list, a CPU that is offline or
            does not exist (V(999)), or a malformed list is refused before anything is written. Leave the key out to
            let the group use its parent's CPUs (V(state=absent) puts it back to that).
          - Needs the C(cpuset) controller in the root's C(cgroup.controllers) (C(CONFIG_CPUSETS), cgroup v2).
            Exclusive CPUs and partitions (C(cpuset.cpus.exclusive), C(cpuset.cpus.partition)) are not managed.
        type: raw
      mems:
        description:
          - C(cpuset.mems), the NUMA memory nodes the group's tasks allocate from, as a node list (V(0), V(0-1)) or a
            list of node numbers. With V(systemd) it becomes C(AllowedMemoryNodes=) (systemd 244 or later).
          - Every node must have memory (C(/sys/devices/system/node/has_memory); on a kernel without NUMA only V(0)).
            Checked before any write like O(cpu.cpus).
        type: raw
notes:
  - A slice in a boost window of M(aiinfra.io_isolation.cgroup_boost) has its window ended first (its timer stopped,
    its runtime drop-in removed), so the run applies the slice's own values, which the window's scheduled end would
    otherwise re-apply later. RV(boost) says what was found; check mode ends nothing.
  - Values are compared with what the kernel files hold after rounding (memory to pages, io.max iops to 32 bits);
    with V(systemd) a unit that is not running (no cgroup yet) is compared through C(systemctl show).
  - The drop-in survives reboots and C(daemon-reload); cgroupfs groups below a delegated unit live as long as that
    unit, whose owner (a container runtime) creates them again.
  - How workloads land in the groups (C(Slice=), C(systemd-run --slice), Docker's C(--cgroup-parent)) is described in
    the collection's C(docs/cgroup.md).
seealso:
  - module: aiinfra.io_isolation.iocost
  - module: aiinfra.io_isolation.io_facts
"""

EXAMPLES = r"""
- name: Inference slice, protected (created if missing)
  aiinfra.io_isolation.cgroup:
    name: inference.slice
    create: true
    io:
      weight: 1000
    memory:
      min: 4G
      low: 8G
    cpu:
      weight: 1000

- name: Training slice, capped on the shared NVMe disk
  aiinfra.io_isolation.cgroup:
    name: training.slice
    create: true
    io:
      weight: 50
      max:
        lab-nvme-a:
          wbps: 900MB
          riops: 50000
    memory:
      high: 12G
    cpu:
      max: "150000 100000"

- name: Inference on the CPUs and memory of NUMA node 1, where its NVMe disks and GPUs are
  aiinfra.io_isolation.cgroup:
    name: inference.slice
    cpu:
      cpus: "16-31"
      mems: "1"

- name: A group below a container runtime's delegated unit, with an I/O priority policy
  aiinfra.io_isolation.cgroup:
    name: system.slice/runtime.service/workloads/embeddings
    manager: cgroupfs
    io:
      weight: 500
      prio_class: restrict-to-be
    when_unsupported: warn

- name: Drop what this module set on training.slice
  aiinfra.io_isolation.cgroup:
    name: training.slice
    state: absent
"""

RETURN = r"""
manager:
  description: The manager that applied the settings.
  returned: success
  type: str
  sample: systemd
cgroup:
  description: The group's directory below C(/sys/fs/cgroup) (V(null) for a unit that has no cgroup and is not a slice).
  returned: success
  type: str
  sample: /sys/fs/cgroup/inference.slice
kernel:
  description: What the group's kernel files hold now, for every file this run manages (V(null) where a file is absent).
  returned: success
  type: dict
  sample: {io.weight: {default: 1000}, memory.min: 4294967296, memory.low: 8589934592, cpu.weight: 1000,
           cpuset.cpus: [16, 17, 18, 19], cpuset.mems: [1]}
devices:
  description: Each device selector and the C(MAJ:MIN) it resolved to in this boot.
  returned: success
  type: dict
  sample: {lab-nvme-a: "259:0"}
skipped:
  description: True when O(when_missing=skip) found no such unit on the host, so nothing was configured.
  returned: when the unit is missing and O(when_missing=skip)
  type: bool
  sample: true
skip_reason:
  description: Why nothing was configured (O(when_missing=skip)).
  returned: when RV(skipped)
  type: str
  sample: "docker.service is not a unit on this host (systemd: LoadState=not-found): nothing configured"
boost:
  description:
    - The slice's boost window (M(aiinfra.io_isolation.cgroup_boost)) as this run found it; only returned when the
      slice had one. With O(manager=systemd) a run on a slice ends its window (the timer stopped, the runtime drop-in
      removed) before applying the slice's settings; in check mode it reports the window and ends nothing.
    - C(window_end) (UTC), C(active) (its end has not come and its timer is pending), C(expired) (its end has passed,
      the caps are still lifted), C(orphaned) (no timer will end it), C(timer), C(timer_state), C(dropin), C(lifted)
      (the lifted C(io.max) by C(MAJ:MIN)), C(only_difference) (everything this run changes or would change is the
      window itself - its files, its timer and the C(io.max) lines it lifted), C(ended) (this run ended it).
  returned: when the slice has a boost window
  type: dict
  sample: {window_end: "2026-12-04T02:10:01Z", active: true, expired: false, orphaned: false,
           timer: aiinfra-io-isolation-boost-training.timer, timer_state: waiting,
           dropin: /run/systemd/system/training.slice.d/60-aiinfra-io-isolation-boost.conf,
           lifted: {"259:0": {rbps: max, wbps: max, riops: max, wiops: max}}, only_difference: true, ended: false}
persisted_to:
  description: Managed files that carry the settings across reboots (the drop-in, a created slice unit).
  returned: success
  type: list
  elements: str
  sample: [/etc/systemd/system/inference.slice.d/50-aiinfra-io-isolation.conf]
diff:
  description: >-
    Before and after. For V(systemd) keyed by unit, with the managed files and the kernel values; for V(cgroupfs) keyed
    by file (C(io.max[259:0]), C(memory.high), C(<dir>/cgroup.subtree_control), C(cgroup <dir>)).
  returned: success
  type: dict
  sample: {before: {memory.high: max}, after: {memory.high: 12884901888}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as _cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_cgroup.MODULE_SPEC)
    exit_module(module, lambda: _cgroup.reconcile(module.params, KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
