#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: iocost
short_description: Set blk-iocost's cost model and QoS for one disk, persistently
version_added: 0.1.0
description:
  - Manages the disk's line in C(/sys/fs/cgroup/io.cost.model) and C(/sys/fs/cgroup/io.cost.qos). Without
    C(enable=1) in C(io.cost.qos), C(io.weight) does nothing; without a model that matches the disk, weights divide the
    wrong capacity.
  - Writes in the order the kernel needs (model, then QoS with C(enable=1); iocost initialises on a disk at its
    first write), one line per C(write()), always the full set of values, reads them back and compares them with what
    the kernel prints (percentages with two decimals, vrate bounds clamped to 1.00..10000.00). If the kernel refuses a
    value, what this run already changed is restored.
  - With O(persist=true) a udev rule keyed by the disk's WWN or serial (never its name or C(MAJ:MIN), which change
    between boots) re-applies the values to whatever C(MAJ:MIN) the disk has at device add. The rule runs after
    systemd's own C(90-iocost.rules) (systemd 254 and later, hwdb entries by model), so for the disks this module
    manages its values win.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
  - aiinfra.io_isolation.persist
options:
  device:
    description:
      - The whole disk to manage, with O(model) and O(qos).
      - Accepts a kernel name (V(nvme0n1)), a C(/dev) path, a C(/dev/disk/by-id/) or C(/dev/disk/by-path/) link,
        a WWN or EUI, a serial number, or V(MAJ:MIN). Resolved to the whole-disk C(MAJ:MIN) at run time; the
        persisted rule is keyed by the disk's stable identity (WWN or serial).
      - Exactly one of O(device) and O(devices) is required.
    type: str
  devices:
    description:
      - Several disks in one call (one remote round trip), each with its own settings. All of them are validated
        before the first write, and a refusal on one disk restores what the call changed on the others.
      - O(state), O(keep_enabled), O(persist) and O(adopt) given at the top level are the defaults of every entry.
    type: list
    elements: dict
    suboptions:
      device:
        description: The disk, in any form O(device) accepts.
        type: str
        required: true
      model:
        description: As O(model).
        type: dict
      qos:
        description: As O(qos).
        type: dict
      state:
        description: As O(state).
        type: str
        choices: [present, absent]
      keep_enabled:
        description: As O(keep_enabled).
        type: bool
  state:
    description:
      - V(present) sets the model and QoS; V(absent) returns the disk to kernel control (C(ctrl=auto) for both files
        and C(enable=0), unless O(keep_enabled)) and removes the persisted rule.
    type: str
    choices: [present, absent]
    default: present
  model:
    description:
      - The linear cost model. Either C(ctrl=auto) (the kernel's class for the disk) or all six coefficients,
        which imply C(ctrl=user); a partial set is refused because the kernel keeps the other values from whatever
        model was active.
      - C(rbps), C(wbps) - sequential read/write throughput in bytes per second. An integer, or a string with an
        explicit base, V(2GB) (base 1000, 2000000000) or V(2GiB) (base 1024, 2147483648); a bare V(2G) is refused as
        ambiguous.
      - C(rseqiops), C(rrandiops), C(wseqiops), C(wrandiops) - sequential and random 4 KiB IOs per second.
      - The keys are not C(riops)/C(wiops) (those belong to C(io.max)); such keys are refused with the right name.
        Zero is refused (the kernel would take it, but it makes the model meaningless).
      - Omit O(model) to leave the model as it is.
    type: dict
  qos:
    description:
      - The QoS controller. C(enable) (default V(true)) turns iocost on for the disk.
      - Either C(ctrl=auto) (the default when no parameter is given) or all of C(rpct), C(rlat), C(wpct), C(wlat),
        C(min), C(max), which imply C(ctrl=user).
      - C(rpct), C(wpct) - latency percentiles, 0 to 100 with at most two decimals (V(95), V(99.9)).
      - C(rlat), C(wlat) - latency targets in microseconds (V(5000) is 5 ms).
      - C(min), C(max) - bounds of the virtual rate in percent of the model, two decimals; the kernel clamps them to
        1.00..10000.00, and C(min) must not exceed C(max).
    type: dict
  keep_enabled:
    description:
      - With O(state=absent), keep iocost enabled (C(enable=1)) with the kernel's own model and QoS.
    type: bool
    default: false
notes:
  - Only whole disks with blk-mq (a C(mq/) directory) can use iocost; a partition, a dm or md device, or an NVMe
    native-multipath head node given as O(device) is refused with a message naming what to use instead.
  - The udev rule calls a small helper installed at C(/usr/local/libexec/aiinfra-io_isolation/iocost-apply) (Python 3,
    standard library).
  - Per-device C(io.weight) lines of cgroups need iocost initialised on the disk first; set them after this module
    (the C(cgroup) module does).
  - Settings that break iocost are checked before the first write (check mode too) for every disk that will run it.
    The C(bfq) scheduler on such a disk is refused (measured on the lab, a rate-bound reader lost half its rate); the
    message names the disk and the fix (scheduler C(none) or C(mq-deadline) with M(aiinfra.io_isolation.blk_queue), or
    iocost off on the disk). A writeback-throttling latency set by hand (it stays on under iocost on every kernel) and
    C(io.latency) targets of cgroups on the disk are warnings. 6.1's default wbt (on under iocost; 6.2 and later switch
    it off) and C(io.max) caps are not, as the lab measured no harm from either beside iocost.
seealso:
  - module: aiinfra.io_isolation.io_facts
"""

EXAMPLES = r"""
- name: Calibrated model and latency QoS for the inference NVMe disk, selected by serial
  aiinfra.io_isolation.iocost:
    device: S6EWNS0W123456
    model:
      rbps: 2GB
      rseqiops: 100000
      rrandiops: 100000
      wbps: 1GB
      wseqiops: 50000
      wrandiops: 50000
    qos:
      rpct: 95
      rlat: 5000
      wpct: 95
      wlat: 5000
      min: 50
      max: 150

- name: Enable iocost with the kernel's own model class
  aiinfra.io_isolation.iocost:
    device: /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab-nvme-b
    model:
      ctrl: auto

- name: Two disks in one call - a calibrated model on one, the kernel's class on the other
  aiinfra.io_isolation.iocost:
    devices:
      - device: S6EWNS0W123456
        model: {rbps: 2GB, rseqiops: 100000, rrandiops: 100000, wbps: 1GB, wseqiops: 50000, wrandiops: 50000}
        qos: {rpct: 95, rlat: 5000, wpct: 95, wlat: 5000, min: 50, max: 150}
      - device: S6EWNS0W654321
        model: {ctrl: auto}

- name: Give the disk back to the kernel and drop the persisted rule
  aiinfra.io_isolation.iocost:
    device: S6EWNS0W123456
    state: absent
"""

RETURN = r"""
devices:
  description: One entry per disk, in request order, with RV(device), RV(model), RV(qos) and RV(persisted_to) for it.
  returned: success
  type: list
  elements: dict
  sample: [{device: {name: nvme0n1, majmin: "259:0"}, model: {ctrl: auto, model: linear}, qos: {enable: 1, ctrl: auto},
            persisted_to: []}]
device:
  description: The disk the selector resolved to, as C(io_facts) reports it.
  returned: with O(device)
  type: dict
  sample: {name: nvme0n1, majmin: "259:0", kind: nvme, serial: lab-nvme-a, rotational: false,
           stable_id: "wwn:nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"}
model:
  description: What C(io.cost.model) holds for the disk now (V(null) if iocost was never initialised on it).
  returned: with O(device)
  type: dict
  sample: {ctrl: user, model: linear, rbps: 2000000000, rseqiops: 100000, rrandiops: 100000, wbps: 1000000000,
           wseqiops: 50000, wrandiops: 50000}
qos:
  description: What C(io.cost.qos) holds for the disk now.
  returned: with O(device)
  type: dict
  sample: {enable: 1, ctrl: user, rpct: "95.00", rlat: 5000, wpct: "95.00", wlat: 5000, min: "50.00", max: "150.00"}
persisted_to:
  description: The managed files that carry the setting across reboots.
  returned: success
  type: list
  elements: str
  sample: [/etc/udev/rules.d/91-aiinfra-iocost-wwn_nvme.1b36-6c61622d6e766d652d61.rules]
diff:
  description: Before and after, keyed by setting (C(io.cost.model[MAJ:MIN]), C(io.cost.qos[MAJ:MIN]), file paths).
  returned: success
  type: dict
  sample: {before: {"io.cost.qos[259:0]": null}, after: {"io.cost.qos[259:0]": {enable: 1, ctrl: auto}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_iocost.MODULE_SPEC)
    exit_module(module, lambda: _iocost.run(module.params, KernelFS(), module.check_mode))


if __name__ == "__main__":
    main()
