#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: host_profile
short_description: Apply a host's whole I/O-isolation profile in one module execution
version_added: 0.2.0
description:
  - Reconciles everything the collection's single-purpose modules set on a host - the iocost model and QoS, block-queue
    attributes, sysctls, the NVMe driver's queues, any number of cgroups, the services placed in slices and the container runtimes' default parent - in B(one)
    remote module execution. A
    fleet pays each module execution once per host and per run; with this module a rollout is two (M(aiinfra.io_isolation.io_facts),
    then this), and so is a drift check in check mode.
  - Each section takes exactly the options of its module, checked with that module's own argument spec, and is carried
    out by that module's own code, engine and persistence. The modules stay for ad-hoc use; the results are the same.
  - All sections run through one reconcile. Every input of every section is checked before the first write, and a
    refusal names the section and the item (for example the training slice's C(io.max) line); nothing is applied then. The
    kernel's order holds across sections - iocost first, because per-disk weights need it, then the cgroups, and the
    services last, into the slices the cgroups created. If the
    kernel refuses a value, what this call already changed, in any section, is restored.
  - Returns the pressure (PSI) of the host and of the cgroups named in O(pressure), read after the apply, so that a
    health gate needs no further call.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
  - aiinfra.io_isolation.tenancy
options:
  iocost:
    description:
      - The options of M(aiinfra.io_isolation.iocost) (for example O(aiinfra.io_isolation.iocost#module:devices) with
        each disk's model and QoS). Omit to leave iocost alone.
    type: dict
  blk_queue:
    description:
      - The options of M(aiinfra.io_isolation.blk_queue). Omit to leave the block queues alone.
    type: dict
  sysctl:
    description:
      - The options of M(aiinfra.io_isolation.sysctl). Omit to leave the sysctls alone.
    type: dict
  nvme_queues:
    description:
      - The options of M(aiinfra.io_isolation.nvme_queues). Omit to leave the NVMe driver's queues alone.
      - RV(reboot_required) says when the running driver differs from what the next boot gives.
    type: dict
  cgroups:
    description:
      - Cgroups to configure, each with the options of M(aiinfra.io_isolation.cgroup), applied in list order after
        every other section.
      - An entry may add C(label), the name its problems, diff keys and warnings are given under (default the
        group's C(name)), such as V(training slice).
      - A group may be listed once.
    type: list
    elements: dict
    default: []
  placement:
    description:
      - The options of M(aiinfra.io_isolation.placement) - systemd services put into slices by a C(Slice=) drop-in
        each, applied after the cgroups. Omit to leave the services alone.
      - A running service outside its slice is restarted only with the section's O(aiinfra.io_isolation.placement#module:restart);
        otherwise the section's result lists it in C(restart_required).
    type: dict
  container_runtime:
    description:
      - The options of M(aiinfra.io_isolation.container_runtime) - the container runtimes' default cgroup parent
        (Docker's C(daemon.json), Podman's C(containers.conf)) and the placement check of running containers,
        applied last. Omit to leave the runtimes alone.
      - A daemon that must read its file again is restarted only with the section's
        O(aiinfra.io_isolation.container_runtime#module:restart); otherwise the section's result lists it in
        C(restart_required).
    type: dict
  pressure:
    description:
      - Cgroups (unit names or paths) whose io, memory and cpu pressure to return in RV(pressure), read after the
        apply. The host's pressure is always returned.
    type: list
    elements: str
    default: []
notes:
  - The sections' own notes apply (see each module). Devices, errors and persistence work as there.
  - Settings that break iocost are checked across sections, for every disk the call touches, as the whole call leaves
    it, before the first write (check mode too). C(bfq) on a disk that runs iocost is refused even when another section
    of the same call sets it (a disk switched away from bfq in the same call is fine); a wbt latency set by hand and
    C(io.latency) beside iocost are warnings. Messages start with C(iocost conflict).
seealso:
  - module: aiinfra.io_isolation.io_facts
  - module: aiinfra.io_isolation.iocost
  - module: aiinfra.io_isolation.blk_queue
  - module: aiinfra.io_isolation.sysctl
  - module: aiinfra.io_isolation.nvme_queues
  - module: aiinfra.io_isolation.cgroup
  - module: aiinfra.io_isolation.placement
  - module: aiinfra.io_isolation.container_runtime
"""

EXAMPLES = r"""
- name: Apply a co-location profile in one call
  aiinfra.io_isolation.host_profile:
    iocost:
      devices:
        - device: nvme0n1
          model: {rbps: 2000000000, rseqiops: 100000, rrandiops: 100000, wbps: 1000000000, wseqiops: 50000,
                  wrandiops: 50000}
          qos: {enable: true, rpct: 95, rlat: 2000, wpct: 95, wlat: 10000, min: 10, max: 10000}
    blk_queue:
      devices:
        - {device: nvme0n1, scheduler: none, read_ahead_kb: 128}
    sysctl:
      sysctls: {vm.dirty_background_bytes: 268435456, vm.dirty_bytes: 1073741824, vm.swappiness: 10}
    nvme_queues:
      poll_queues: 1
    cgroups:
      - {label: inference slice, name: inference.slice, create: true, io: {weight: 1000}, cpu: {weight: 1000}}
      - label: training slice
        name: training.slice
        create: true
        io: {weight: 50, max: {nvme0n1: {wbps: 500MB}}}
        memory: {high: 8G}
    placement:
      units:
        - {name: vllm.service, slice: inference.slice}
    pressure: [inference.slice]
    tenancy:
      slices:
        - name: inference.slice
          workloads: [{name: vllm.service}]
        - name: training.slice
      devices: [nvme0n1]
  register: profile

- name: Fail the host when the inference slice stalls on I/O
  ansible.builtin.assert:
    that: profile.pressure.cgroups['inference.slice'].io.some.avg10 < 45

- name: Fail the host when a workload is outside its slice, or the disk's I/O is mostly charged elsewhere
  ansible.builtin.assert:
    that: profile.tenancy.drift | length == 0
    fail_msg: "{{ profile.tenancy.drift | join('; ') }}"
"""

RETURN = r"""
changed:
  description: Whether any section changed anything.
  returned: always
  type: bool
diff:
  description: "What changed, or would change in check mode, keyed by C(<section>: <setting>)."
  returned: always
  type: dict
  sample:
    before: {"training slice: training.slice": {IOWeight: null}}
    after: {"training slice: training.slice": {IOWeight: "50"}}
sections:
  description:
    - The result of each section given, as its module returns it (its C(diff) keyed as that module keys it), by
      section name (C(iocost), C(blk_queue), C(sysctl), C(nvme_queues), C(placement), C(container_runtime)).
  returned: always
  type: dict
  sample:
    sysctl: {changed: false, kernel: {vm.swappiness: "10"}, persisted_to: {/etc/sysctl.d/90-aiinfra-io-isolation.conf: {vm.swappiness: "10"}}}
cgroups:
  description: The result of each cgroup, as M(aiinfra.io_isolation.cgroup) returns it, by name.
  returned: always
  type: dict
  sample:
    inference.slice: {changed: false, manager: systemd, cgroup: /sys/fs/cgroup/inference.slice,
                      kernel: {io.weight: {default: 1000}}}
substrate:
  description:
    - The memory substrate, read before any write - C(cgroup_mode), the cgroup2 C(mount_options),
      C(memory_recursiveprot), C(swap_bytes) (C(SwapTotal); null when unreadable), C(swappiness) - with
      C(protected) (the O(cgroups) slices given memory.low or memory.min above 0) and the findings for them.
    - C(errors) refuse the call before any write (a missing C(memory_recursiveprot) while a slice asks for memory
      protection - it would protect none of the services in the slice); C(warnings) are reported (no swap).
  returned: success
  type: dict
  sample:
    cgroup_mode: unified
    mount_options: [rw, nosuid, nodev, noexec, relatime, nsdelegate, memory_recursiveprot]
    memory_recursiveprot: true
    swap_bytes: 0
    swappiness: 10
    protected: [inference.slice, hostcritical.slice]
    errors: []
    warnings: ["no swap on this host (SwapTotal 0): memory.low on inference.slice protects its page cache, ..."]
reboot_required:
  description: The NVMe section's C(reboot_required); false without that section.
  returned: always
  type: bool
pressure:
  description:
    - Pressure stall information read after the apply - the host's (C(/proc/pressure)) and each cgroup's in
      O(pressure) (C(exists) false when the group does not exist; then its values are null).
  returned: always
  type: dict
  sample:
    host: {io: {some: {avg10: 0.0, avg60: 0.0, avg300: 0.0, total: 1234}, full: {avg10: 0.0, avg60: 0.0, avg300: 0.0, total: 987}}}
    cgroups:
      inference.slice: {path: /sys/fs/cgroup/inference.slice, exists: true,
                        io: {some: {avg10: 0.0, avg60: 0.0, avg300: 0.0, total: 0}, full: {avg10: 0.0, avg60: 0.0, avg300: 0.0, total: 0}}}
tenancy:
  description:
    - Who runs in the tenant slices and who the disks' I/O is charged to, read after the apply (with O(tenancy)).
      verify.yml and the health gate judge RV(tenancy.drift).
  returned: with O(tenancy)
  type: dict
  contains:
    slices:
      description:
        - By slice name - C(cgroup), C(exists), C(units), C(processes) (C(count), C(sample) of C(pid)/C(comm)/C(cgroup)),
          C(listed) (the number of workloads listed), C(empty), and C(workloads), each with C(kind), C(name),
          C(listed_as), C(slice), C(cgroup) (where it runs, null when it does not), C(running) and C(placed).
      type: dict
      sample:
        inference.slice:
          cgroup: /inference.slice
          exists: true
          listed: 1
          empty: false
          units: [lab-reader.service]
          processes: {count: 1, sample: [{pid: 1234, comm: fio, cgroup: /inference.slice/lab-reader.service}]}
          workloads: [{kind: service, name: lab-reader.service, listed_as: lab-reader.service, slice: inference.slice,
                       cgroup: /inference.slice/lab-reader.service, running: true, placed: true}]
    disks:
      description:
        - By kernel name - C(majmin), C(interval) (the seconds measured), C(total), C(cgroups) (each top-level cgroup
          with I/O, and C(/) for what the root cgroup itself was charged), C(tenants), C(outside) (each with C(rbytes),
          C(wbytes), C(rios), C(wios), C(bytes_share), C(ios_share)), C(outside_share) (the larger of the two),
          C(iops), C(bytes_per_second), C(judged), C(drift) and, when not judged, C(note).
      type: dict
      sample:
        nvme0n1:
          majmin: "259:0"
          interval: 2.001
          total: {rbytes: 819200, wbytes: 0, rios: 200, wios: 0}
          cgroups:
            inference.slice: {rbytes: 819200, wbytes: 0, rios: 200, wios: 0, bytes_share: 1.0, ios_share: 1.0}
          tenants: {inference.slice: {rbytes: 819200, wbytes: 0, rios: 200, wios: 0, bytes_share: 1.0, ios_share: 1.0}}
          outside: {rbytes: 0, wbytes: 0, rios: 0, wios: 0, bytes_share: 0.0, ios_share: 0.0}
          outside_share: 0.0
          iops: 99.95
          bytes_per_second: 409395
          judged: true
          drift: false
    drift:
      description: One message per finding (a workload outside its slice, a listed slice with no process, a disk
        whose I/O is mostly charged outside the tenant slices); empty when none.
      type: list
      elements: str
      sample: ["inference.slice lists 1 workload(s) (lab-reader.service) and no process runs in it"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import registry as _registry
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_registry.PROFILE_SPEC)
    exit_module(module, lambda: _registry.profile(module.params, KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
