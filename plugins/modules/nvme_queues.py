#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvme_queues
short_description: Set the NVMe driver's poll and write queues safely, and verify the hardware-queue map
version_added: 0.1.0
description:
  - Manages the C(nvme) (PCIe) driver parameters C(poll_queues), C(write_queues) and C(io_queue_depth), and returns
    the hardware-queue map every controller runs now - per namespace each blk-mq hctx with its type (default, read,
    poll) and C(cpu_list), and C(queue/io_poll).
  - The driver reads these parameters only when a controller sets up its queues (probe at boot or module load, or a
    controller reset), and sizes the blk-mq tag set, including whether it has a poll map, only at probe. Changing
    C(poll_queues) at runtime and resetting a controller that was probed without poll queues left I/O from some CPUs
    waiting for the 30-second timeout on every request (observed on Linux 6.1 and 6.12).
  - By default the module therefore only persists the values, as C(options nvme ...) in
    C(/etc/modprobe.d/aiinfra-io-isolation-nvme.conf) (stamped as managed, written atomically), reports
    RV(reboot_required), and neither writes C(/sys/module/nvme/parameters) nor resets anything.
  - With O(reset_controllers=true) the running driver is changed too - the parameters are written and every PCIe
    controller is reset through C(/sys/class/nvme/<ctrl>/reset_controller) - but only when that is proven safe from
    the map each controller holds now, that is when no controller would get more poll or write queues than it runs
    already and O(io_queue_depth) does not change. Otherwise the call fails before any write, naming the controller
    and the counts.
  - If the booted kernel's initramfs contains C(nvme.ko), modprobe reads the initramfs's copy of C(modprobe.d) at
    boot; the initramfs is rebuilt only with O(update_initramfs=true), otherwise RV(action_required) says so. If nvme
    is built into the kernel, C(modprobe.d) does not apply at all; the module then writes nothing and reports the
    C(nvme.poll_queues=N) kernel arguments needed. It never edits boot loader configuration.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options:
  state:
    description:
      - V(present) persists the given values. V(absent) removes the managed file; the driver returns to its defaults
        (or to what other configuration sets) at the next boot, which RV(reboot_required) reports.
    type: str
    choices: [present, absent]
    default: present
  poll_queues:
    description:
      - Hardware queues without interrupts, reserved for polled I/O (C(io_uring) with C(IORING_SETUP_IOPOLL), or
        C(preadv2)/C(pwritev2) with C(RWF_HIPRI), on files opened with C(O_DIRECT)).
      - 0 up to the number of possible CPUs (C(/sys/devices/system/cpu/possible)); the driver refuses more, and a
        refused option makes C(modprobe nvme) fail.
      - Omit to leave it unmanaged. With O(state=present) at least one of O(poll_queues), O(write_queues) and
        O(io_queue_depth) is required.
    type: int
  write_queues:
    description:
      - With a value above 0 the interrupt-driven queues are split into a default (write) set of this size and a
        separate read set, so reads do not queue behind writes.
      - 0 up to the number of possible CPUs.
    type: int
  io_queue_depth:
    description:
      - Entries per I/O submission queue, 2 to 4095 (the driver's range). The blk-mq tag depth follows it at probe.
    type: int
  reset_controllers:
    description:
      - Also change the running driver - write C(/sys/module/nvme/parameters) and reset every PCIe NVMe controller -
        when that is proven safe (see the description). A reset pauses I/O on all of the controller's namespaces
        while it runs, the root filesystem's included.
      - With V(false) nothing in the running driver is touched; the values apply at the next boot.
    type: bool
    default: false
  update_initramfs:
    description:
      - When the booted kernel's initramfs contains C(nvme.ko), run C(update-initramfs -u -k <release>) after the
        C(modprobe.d) file changed, so the initramfs carries it. This can take many minutes (18.7 minutes under
        emulation with Debian's C(MODULES=most)).
      - With V(false) the need is reported in RV(action_required).
    type: bool
    default: false
  adopt:
    description:
      - Take over an existing C(/etc/modprobe.d/aiinfra-io-isolation-nvme.conf) that this collection did not write.
    type: bool
    default: false
notes:
  - The parameters apply to every PCIe NVMe controller of the host; fabrics controllers (TCP, RDMA, FC) take their
    queue counts from their connect options and are only reported.
  - The hctx types come from debugfs (C(/sys/kernel/debug/block/<ns>/hctxN/type)) when it is mounted. The module never
    mounts it; without it, the driver's C(X/Y/Z default/read/poll queues) line from the kernel log (C(dmesg)) gives
    the counts, and RV(controllers) says which source was used.
  - Kernel command-line values C(nvme.<param>=) override C(modprobe.d); a conflicting value there or in another
    C(modprobe.d) file fails the call before any write.
  - See C(docs/nvme_queues.md) for what the queue types do, how to use poll queues, and the multipath caveat.
seealso:
  - module: aiinfra.io_isolation.io_facts
"""

EXAMPLES = r"""
- name: One poll queue for polled I/O, taken at the next boot
  aiinfra.io_isolation.nvme_queues:
    poll_queues: 1
  register: nvme_q

- name: Reboot when the driver does not run it yet
  ansible.builtin.reboot:
  when: nvme_q.reboot_required and nvme_q.action_required | length == 0

- name: After the reboot, the map has one poll queue per controller and io_poll reads 1
  aiinfra.io_isolation.nvme_queues:
    poll_queues: 1
  register: nvme_q
  failed_when: not nvme_q.queue_map_ok

- name: Fewer poll queues on a host booted with more, applied now by resetting the controllers
  aiinfra.io_isolation.nvme_queues:
    poll_queues: 1
    reset_controllers: true

- name: A host whose initramfs loads nvme (Debian MODULES=most) - rebuild it with the options
  aiinfra.io_isolation.nvme_queues:
    poll_queues: 2
    write_queues: 2
    update_initramfs: true

- name: Back to the driver defaults at the next boot
  aiinfra.io_isolation.nvme_queues:
    state: absent
"""

RETURN = r"""
parameters:
  description: What C(/sys/module/nvme/parameters) holds now (after this call).
  returned: success
  type: dict
  sample: {poll_queues: 0, write_queues: 0, io_queue_depth: 1024}
next_boot:
  description: What the driver will hold after the next boot, from its defaults, every C(modprobe.d) file and the
    kernel command line.
  returned: success
  type: dict
  sample: {poll_queues: 1, write_queues: 0, io_queue_depth: 1024}
next_boot_sources:
  description: Where each RV(next_boot) value comes from.
  returned: success
  type: dict
  sample: {poll_queues: /etc/modprobe.d/aiinfra-io-isolation-nvme.conf, write_queues: driver default,
           io_queue_depth: driver default}
persisted:
  description: The persistence mechanism, the managed file and the options it holds (planned ones in check mode),
    and the C(nvme.*) values on the current kernel command line.
  returned: success
  type: dict
  sample: {mechanism: modprobe.d, path: /etc/modprobe.d/aiinfra-io-isolation-nvme.conf, options: {poll_queues: 1},
           kernel_cmdline: {}}
driver:
  description: Whether nvme is built in or a loadable module, how that was found, and where it loads from.
  returned: success
  type: dict
  sample: {kind: module, loaded: true, module_file: /lib/modules/6.1.0-57-amd64/kernel/drivers/nvme/host/nvme.ko,
           detected_by: /lib/modules/6.1.0-57-amd64/modules.dep, loads_from: root filesystem}
initramfs:
  description: The booted kernel's initramfs, whether it contains C(nvme.ko) and the managed file, and (when it
    contains nvme) whether it is up to date with the file.
  returned: success
  type: dict
  sample: {path: /boot/initrd.img-6.1.0-57-amd64, tool: lsinitramfs, contains_nvme: false, includes_options: false}
possible_cpus:
  description: Number of possible CPUs, the upper bound for O(poll_queues) and O(write_queues).
  returned: success
  type: int
  sample: 2
reboot_required:
  description: True when a reboot alone changes what the driver runs - the persisted values (and the kernel command
    line) differ from the running parameters or from a controller's poll-queue count.
  returned: success
  type: bool
  sample: true
action_required:
  description: What the operator must do before the values can take effect (rebuild the initramfs, kernel command
    line for a built-in driver). Also issued as warnings.
  returned: success
  type: list
  elements: str
  sample: []
controllers_reset:
  description: The controllers this call reset (only with O(reset_controllers=true) and a safe change).
  returned: success
  type: list
  elements: str
  sample: []
controllers:
  description:
    - Per NVMe controller - transport, state, serial, model, C(queue_count) (I/O queues + admin), the
      default/read/poll split with its source (C(debugfs) or C(kernel log)), and per namespace (C(nvmeXnY), or the
      per-path C(nvmeXcYnZ) under native multipath, with its head's C(io_poll)) each hctx's index, type, cpu_list,
      nr_tags and nr_reserved_tags (the same record as io_facts' C(hw_queues)), and C(queue/io_poll).
    - For PCIe controllers also C(poll_queues_expected), C(map_ok) and C(map_problems).
  returned: success
  type: dict
  sample:
    nvme0:
      transport: pcie
      state: live
      serial: lab-nvme-a
      model: QEMU NVMe Ctrl
      queue_count: 4
      queues: {default: 2, read: 0, poll: 1, hctxs: 3, source: debugfs}
      namespaces:
        nvme0n1:
          io_poll: 1
          hctxs:
            - {index: 0, type: default, cpu_list: [0], nr_tags: 1023, nr_reserved_tags: 0}
            - {index: 1, type: default, cpu_list: [1], nr_tags: 1023, nr_reserved_tags: 0}
            - {index: 2, type: poll, cpu_list: [0, 1], nr_tags: 1023, nr_reserved_tags: 0}
      poll_queues_expected: 1
      map_ok: true
      map_problems: []
poll_queues_expected:
  description: The poll-queue count RV(queue_map_ok) checks against (the requested one, or with O(state=absent) what
    the next boot gives).
  returned: success
  type: int
  sample: 1
queue_map_ok:
  description: True when every PCIe controller runs exactly RV(poll_queues_expected) poll hctxs on each namespace and
    C(queue/io_poll) reads 1 with poll queues (0 without); null when there is no PCIe controller.
  returned: success
  type: bool
  sample: true
diff:
  description: Before and after, keyed by setting (the managed file, the runtime change, the initramfs).
  returned: success
  type: dict
  sample: {before: {/etc/modprobe.d/aiinfra-io-isolation-nvme.conf: null},
           after: {/etc/modprobe.d/aiinfra-io-isolation-nvme.conf: "# Managed by Ansible ...\n\
                                                                     options nvme poll_queues=1\n"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as _nvme_queues
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_nvme_queues.MODULE_SPEC)
    exit_module(module, lambda: _nvme_queues.reconcile(module.params, KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
