#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: io_facts
short_description: Gather a host's I/O-isolation capabilities and state
version_added: 0.1.0
description:
  - Reads, in one module run and without a subprocess per file, what the host can isolate and what it is set to.
  - B(Capabilities) - cgroup v2 mode and controllers, which C(io.*) files the kernel has (C(io.cost.qos), C(io.weight),
    C(io.max), C(io.latency), C(io.prio.class), C(io.low), C(io.bfq.weight)), systemd and its version, debugfs
    scheduler knobs (C(min_granularity_ns) before EEVDF, C(base_slice_ns) from 6.6), the C(nvme) and C(fio) tools,
    and the kernel release.
  - B(Devices) - every whole-disk block device with its identity (the same record the device-managing modules
    resolve to, including the stable identity persisted settings are keyed by, C(stable_id), and
    C(stable_selector), the selector for that identity which every device option accepts - what the roles pass to
    the modules, so that no request depends on this boot's names or numbers), its queue settings, its blk-mq
    hardware queues with their C(cpu_list) and, where debugfs is readable, their type (default, read or poll),
    and its blk-iocost model and QoS.
  - B(NVMe) - controllers with model, serial, firmware and the default/read/poll queue split as the block layer
    uses it (debugfs), plus the C(nvme) module parameters, which the driver samples only at probe or
    controller reset.
  - B(Cgroups) of interest with their io, memory and cpu files, C(io.stat) and pressure, and global PSI.
  - B(Tenancy) with O(tenancy) - the units and processes in each tenant slice, where its listed workloads run,
    and who each managed disk's I/O was charged to over an interval, judged as verify.yml judges it.
  - On a host without the cgroup v2 unified hierarchy it reports the mode (V(hybrid), V(legacy)) instead of failing.
  - Never changes anything.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.FACTS
  - aiinfra.io_isolation.device.DEVICES
  - aiinfra.io_isolation.tenancy
options:
  cgroups:
    description:
      - Cgroups to report, as systemd unit names (V(inference.slice), V(vllm.service)) or paths below the cgroup
        root (V(system.slice/docker-0123.scope), V(workloads/train)).
      - A cgroup that does not exist is reported with C(exists=false) instead of failing.
    type: list
    elements: str
    default: []
  include_empty:
    description:
      - Also report block devices of size 0, such as unattached loop devices.
    type: bool
    default: false
notes:
  - Reading debugfs (hardware queue types) and some cgroup files needs root; without it those values are V(null) and
    a warning says why.
  - The formats, ranges and traps of the kernel files the collection relies on, checked on real kernels, are in the
    collection's guide C(docs/kernel-files.md).
"""

EXAMPLES = r"""
- name: Gather I/O-isolation facts for every disk and the two tenant slices
  aiinfra.io_isolation.io_facts:
    cgroups:
      - inference.slice
      - training.slice

- name: Show which NVMe disks have iocost enabled
  ansible.builtin.debug:
    msg: "{{ ansible_facts.io_isolation.devices | dict2items
             | selectattr('value.identity.kind', 'equalto', 'nvme')
             | map(attribute='key') | list }}"

- name: Who runs in the tenant slices, and who the NVMe disk's I/O is charged to over 2 seconds
  aiinfra.io_isolation.io_facts:
    devices: []
    tenancy:
      slices:
        - name: inference.slice
          workloads: [{name: vllm.service}, {pattern: "embed-*.service"}]
        - name: training.slice
      devices: [/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab-nvme-a]
      interval: 2

- name: Gather facts about one disk by its stable identity only
  aiinfra.io_isolation.io_facts:
    devices:
      - /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab-nvme-a
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to C(ansible_facts).
  returned: always
  type: dict
  contains:
    io_isolation:
      description: The host's I/O-isolation capabilities and state.
      returned: always
      type: dict
      contains:
        capabilities:
          description:
            - What the kernel and userland provide.
            - C(memory) is the memory substrate memory protection stands on (issue 37) - the cgroup2
              C(mount_options) and C(memory_recursiveprot), C(swap_bytes) (C(SwapTotal)) and C(swappiness) -
              which M(aiinfra.io_isolation.host_profile) checks before any write.
          returned: always
          type: dict
          sample:
            kernel: {release: 6.1.0-50-amd64, version: [6, 1, 0], page_size: 4096}
            cgroup:
              mode: unified
              unified: true
              mountpoint: /sys/fs/cgroup
              controllers: [cpuset, cpu, io, memory, hugetlb, pids, rdma, misc]
              subtree_control: [memory, pids]
              iocost: true
              io_files: {io.cost.qos: true, io.cost.model: true, io.weight: true, io.max: true, io.latency: false,
                         io.prio.class: false, io.low: false, io.bfq.weight: false}
              io_files_source: kernel config
            systemd: {present: true, version: 252}
            debugfs: {mounted: true, sched: {base_slice_ns: false, min_granularity_ns: true}}
            tools: {nvme: /usr/sbin/nvme, fio: /usr/bin/fio, systemctl: /usr/bin/systemctl, udevadm: /usr/bin/udevadm,
                    sysctl: /usr/sbin/sysctl, systemd-run: /usr/bin/systemd-run}
            psi: true
            memory: {cgroup_mode: unified, memory_recursiveprot: true, swap_bytes: 0, swappiness: 10,
                     mount_options: [rw, nosuid, nodev, noexec, relatime, nsdelegate, memory_recursiveprot]}
        devices:
          description: Whole-disk block devices by kernel name.
          returned: always
          type: dict
          sample:
            nvme0n1:
              identity: {name: nvme0n1, majmin: "259:0", kind: nvme, model: QEMU NVMe Ctrl, serial: lab-nvme-a,
                         firmware: 7.2.22, has_mq: true, partition: false, rotational: false,
                         stable_id: "wwn:eui.0000000000000001", stable_id_source: wwn,
                         stable_selector: eui.0000000000000001, by_id: [nvme-QEMU_NVMe_Ctrl_lab-nvme-a]}
              queue: {scheduler: none, schedulers_available: [none, mq-deadline], nr_requests: 1023,
                      wbt_lat_usec: 2000, read_ahead_kb: 128, nomerges: 0, rq_affinity: 1, io_poll: 0}
              hw_queues: [{index: 0, cpu_list: [0], nr_tags: 1023, nr_reserved_tags: 0, type: default}]
              iocost:
                enabled: true
                initialised: true
                model: {ctrl: user, model: linear, rbps: 2000000000, rseqiops: 100000, rrandiops: 100000,
                        wbps: 1000000000, wseqiops: 50000, wrandiops: 50000}
                qos: {enable: 1, ctrl: user, rpct: "95.00", rlat: 5000, wpct: "95.00", wlat: 5000,
                      min: "50.00", max: "150.00"}
        nvme:
          description:
            - NVMe controllers by name, with the queue split the block layer uses.
            - C(numa_node) is the node of the controller's PCI function (C(device/numa_node)); V(null) where it reads
              -1 (no affinity - one node, or firmware that does not say) and for fabrics controllers.
            - C(queue_cpus) lists, per queue type (C(default), C(read), C(poll)), the CPUs whose I/O those hardware
              queues serve (the union of their C(mq/*/cpu_list)); blk-mq maps the possible CPUs, so an offline CPU
              stays in it. V(null) when the hctx types are unavailable (debugfs not mounted, see C(queues.source)).
              Every type the controller has maps every CPU; with poll queues, C(queue_cpus.poll) is every CPU.
            - C(poll_queue_cpus) lists the CPUs of each poll queue, in hardware-queue order (V([]) without poll queues,
              V(null) when the types are unavailable); with two or more, a CPU set has a poll queue of its own.
          returned: always
          type: dict
          sample:
            nvme0: {model: QEMU NVMe Ctrl, serial: lab-nvme-a, firmware: 7.2.22, transport: pcie, state: live,
                    queue_count: 3, namespaces: [nvme0n1],
                    queues: {default: 2, read: 0, poll: 0, source: debugfs}, numa_node: 1,
                    queue_cpus: {default: [0, 1, 2, 3], read: [], poll: []}, poll_queue_cpus: []}
            nvme1: {model: Fast NVMe, serial: SN-NODE1, firmware: 1.0, transport: pcie, state: live,
                    queue_count: 7, namespaces: [nvme1n1],
                    queues: {default: 4, read: 0, poll: 2, source: debugfs}, numa_node: 1,
                    queue_cpus: {default: [0, 1, 2, 3, 4, 5, 6, 7], read: [], poll: [0, 1, 2, 3, 4, 5, 6, 7]},
                    poll_queue_cpus: [[0, 1, 2, 3], [4, 5, 6, 7]]}
        nvme_parameters:
          description: The nvme driver's queue parameters (sampled at probe or controller reset).
          returned: always
          type: dict
          sample: {poll_queues: 0, write_queues: 0, io_queue_depth: 1024}
        cgroups:
          description: The cgroups asked for in O(cgroups), by the name given.
          returned: always
          type: dict
          sample:
            inference.slice:
              name: inference.slice
              path: /sys/fs/cgroup/inference.slice
              exists: true
              files: {io.weight: {default: 1000}, io.max: {}, memory.low: 8589934592, memory.high: max,
                      io.stat: {"259:0": {rbytes: 20512768, rios: 5008, cost.usage: 50080}},
                      io.pressure: {some: {avg10: 0.12, avg60: 0.02, avg300: 0.0, total: 46782}}}
        pressure:
          description: Global pressure stall information (C(/proc/pressure)).
          returned: when the kernel has PSI
          type: dict
          sample: {io: {some: {avg10: 0.09, avg60: 0.1, avg300: 0.06, total: 498019},
                        full: {avg10: 0.09, avg60: 0.04, avg300: 0.0, total: 230984}}}
        host:
          description:
            - Memory and CPU counts, for sizing memory protection as a share of RAM and NVMe queue counts.
            - C(memory_bytes) is MemTotal, which moves by a few KiB between boots.
              C(memory_stable_bytes) does not, so shares of RAM are taken of it. It counts the online memory
              blocks of C(/sys/devices/system/memory). Where that directory is missing, it is MemTotal
              rounded down to 128 MiB.
          returned: always
          type: dict
          sample: {memory_bytes: 2067300352, memory_stable_bytes: 2147483648, cpus_online: 2, cpus_possible: 2}
        topology:
          description:
            - The CPU and NUMA topology, from sysfs only (no vendor tools), for placing tenants next to their disks
              and accelerators. V(null) when sysfs could not be read (the reason is in
              RV(ansible_facts.io_isolation.warnings)).
            - C(cpus) - C(online), C(possible) and C(offline) CPU numbers (C(/sys/devices/system/cpu)).
            - C(nodes) - each online node with its online C(cpus), C(memory_bytes) (the node's C(MemTotal)) and
              C(has_memory). A kernel without NUMA (no C(/sys/devices/system/node)) shows one node 0 with every
              online CPU and all memory. C(numa) is true with more than one node.
            - C(memory_nodes) - the nodes a cgroup's O(aiinfra.io_isolation.cgroup#module:cpu.mems) may name.
            - C(accelerators) - PCI functions of class display (C(kind) V(vga) 0x0300, V(3d) 0x0302, V(display)
              0x0380) and processing accelerator (V(processing) 0x1200), with C(vendor_id), C(device_id), C(vendor)
              (a name for well-known vendors), C(node) (V(null) for -1), C(local_cpus) and C(boot_vga) (V(true) for
              the display the firmware used, usually a server's BMC graphics, which is no accelerator).
          returned: always
          type: dict
          sample:
            cpus: {online: [0, 1, 2, 3, 4, 5, 7], possible: [0, 1, 2, 3, 4, 5, 6, 7], offline: [6]}
            numa: true
            nodes:
              - {node: 0, cpus: [0, 1, 2, 3], memory_bytes: 17179869184, has_memory: true}
              - {node: 1, cpus: [4, 5, 7], memory_bytes: 17179869184, has_memory: true}
            memory_nodes: [0, 1]
            accelerators:
              - {address: "0000:41:00.0", class: "0x030200", kind: 3d, vendor_id: "0x10de", vendor: NVIDIA,
                 device_id: "0x2330", node: 1, local_cpus: [4, 5, 7], boot_vga: null}
              - {address: "0000:03:00.0", class: "0x030000", kind: vga, vendor_id: "0x1a03", vendor: ASPEED,
                 device_id: "0x2000", node: null, local_cpus: null, boot_vga: true}
        tenancy:
          description:
            - With O(tenancy) - C(slices), C(disks) and C(drift), as M(aiinfra.io_isolation.host_profile) returns
              them in its RV(aiinfra.io_isolation.host_profile#module:tenancy).
              Its C(drift) lists the findings.
          returned: with O(tenancy)
          type: dict
          sample:
            slices:
              inference.slice: {cgroup: /inference.slice, exists: true, listed: 1, empty: true, units: [],
                                processes: {count: 0, sample: []},
                                workloads: [{kind: service, name: vllm.service, listed_as: vllm.service,
                                             slice: inference.slice, cgroup: /system.slice/vllm.service,
                                             running: true, placed: false}]}
            disks: {}
            drift: ["service vllm.service (listed for inference.slice as vllm.service) runs in /system.slice/vllm.service, outside its slice",
                    "inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]
        warnings:
          description: Files that could not be read or parsed (for example debugfs without root).
          returned: always
          type: list
          elements: str
          sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_facts as _io_facts
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import DEVICES, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import tenancy as _tenancy
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(
        argument_spec=merge(DEVICES, cgroups={"type": "list", "elements": "str", "default": []},
                            include_empty={"type": "bool", "default": False},
                            tenancy={"type": "dict", "options": _tenancy.OPTIONS}),
        supports_check_mode=True,
    )
    exit_module(module, lambda: _io_facts.run(module.params, KernelFS(), Runner(module)))


if __name__ == "__main__":
    main()
