#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: placement
short_description: Put systemd services into slices, persistently, and move running ones only when allowed
version_added: 0.4.0
description:
  - Places each service given in O(units) in a slice with a drop-in,
    C(/etc/systemd/system/<unit>.d/90-aiinfra-io-isolation-slice.conf), that holds C([Service]) and C(Slice=). The
    drop-in is written atomically and stamped as managed, like every file of the collection, and the
    M(aiinfra.io_isolation.purge) module removes it.
  - A unit is named exactly (O(units[].name)), or matched by a shell-style pattern (O(units[].pattern), such as
    V(vllm-*.service)) against every service systemd has loaded or installed (C(systemctl list-units --all) and
    C(systemctl list-unit-files), read as JSON where the host's systemd prints it).
  - Every entry is checked before the first write, and any refusal fails the call with nothing written. A name
    systemd does not know (C(LoadState=not-found)), a masked unit, a unit that is no service (C(Slice=) means
    nothing for a target or a timer), a template without an instance and a slice name systemd refuses are refused.
    So is a host-critical unit (C(ssh), C(dbus), C(systemd-*), the container runtime, the kubelet, logins) unless
    its entry sets O(units[].allow_critical); the training role never sets it, because a unit under a throttled
    tenant's caps can stall the host. A drop-in that systemd reads after this module's and that sets C(Slice=)
    would win, and is refused too.
  - systemd reads the drop-ins at C(daemon-reload), which the module runs once when a drop-in changed, then checks
    that systemd loaded the slice for each unit. A running service moves to its new slice only when it starts
    again. With O(restart) the module restarts each running unit that is outside its slice. Without it nothing
    that runs is touched; such units are listed in RV(restart_required), with a warning, and C(changed) says only
    what was written.
  - With O(state=absent) the drop-ins of the units given are removed (a pattern matches the units that have one),
    and each unit goes back to the slice its own files give it; O(restart) moves the running ones back now.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options:
  units:
    description:
      - The services, each with the slice to place it in.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - A service's full name, V(vllm.service) or an instance V(worker@1.service). An alias is placed under the
            unit's own name.
          - Exactly one of O(units[].name) and O(units[].pattern) is required.
        type: str
      pattern:
        description:
          - A shell-style pattern over service names, ending in V(.service) (V(vllm-*.service),
            V(trainer@*.service)). Templates and aliases are not matched, masked units neither.
          - A pattern that matches no service is a warning, listed in RV(unmatched).
        type: str
      slice:
        description:
          - The slice, such as V(inference.slice). Required with O(state=present). systemd creates a slice that has
            no unit file when a unit needs it.
        type: str
      allow_critical:
        description:
          - Place a host-critical unit (C(ssh), C(dbus), C(systemd-*), the container runtime, the kubelet, logins,
            the network, the clock) in this slice. Give it only for a slice whose caps cannot stall the host.
        type: bool
        default: false
      optional:
        description:
          - A name systemd does not know is skipped (listed in RV(unmatched)) instead of refused, and a unit another
            entry of the call lists goes where that entry says. For a list of units to protect where present, such as
            the io_baseline role's host tier (C(ssh.service), the container runtime, the kubelet).
          - A name that is no service name is still refused.
        type: bool
        default: false
      at_next_start:
        description:
          - Never restart this unit, whatever O(restart) says. Running outside its slice, it is listed in
            RV(next_start) with a warning, not in RV(restart_required), and moves at its next start (the next boot).
          - For units whose restart could cut an operator off or stop every container (remote access, the journal,
            the container runtime).
        type: bool
        default: false
      label:
        description: The name the entry's problems are given under, such as V(training units).
        type: str
  state:
    description:
      - V(present) places the units; V(absent) removes their drop-ins.
    type: str
    choices: [present, absent]
    default: present
  restart:
    description:
      - Restart each running unit that is outside its slice after the drop-ins are in place, so that it moves now.
      - Without it a running unit keeps running where it is until its next start, and is listed in
        RV(restart_required).
    type: bool
    default: false
  exclusive:
    description:
      - Also remove this module's drop-in from every service that O(units) does not list (with O(state=present)).
        The roles set it, so that a unit taken off C(inference_units) or C(training_units) leaves its slice.
    type: bool
    default: false
  adopt:
    description:
      - Take over a drop-in file at this module's path that does not carry the collection's stamp, instead of
        refusing it.
    type: bool
    default: false
notes:
  - A stopped unit starts in its slice at its next start; only a running one needs the restart.
  - A restart cannot be taken back. If a later step of the call fails, the drop-ins are restored and systemd
    reloaded, and a unit already restarted stays in its new slice until its next start.
  - See the collection's C(docs/roles.md) for the roles' C(inference_units), C(training_units) and
    C(io_isolation_restart_ok).
seealso:
  - module: aiinfra.io_isolation.cgroup
  - module: aiinfra.io_isolation.host_profile
  - name: systemd.resource-control(5)
    description: C(Slice=), and how systemd nests slices.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.resource-control.html
"""

EXAMPLES = r"""
- name: Put the inference servers and the trainers in their slices; running units move at their next start
  aiinfra.io_isolation.placement:
    units:
      - {name: vllm.service, slice: inference.slice}
      - {pattern: "trainer@*.service", slice: training.slice}
  register: placed

- name: Say which units still run outside their slice
  ansible.builtin.debug:
    msg: "Restart {{ placed.restart_required | join(', ') }} to move them"
  when: placed.restart_required | length > 0

- name: Place and move now (restarts each running unit that is outside its slice)
  aiinfra.io_isolation.placement:
    units:
      - {name: vllm.service, slice: inference.slice}
    restart: true

- name: Take a unit out again (back to the slice its own files give it)
  aiinfra.io_isolation.placement:
    units:
      - {name: vllm.service}
    state: absent
"""

RETURN = r"""
units:
  description:
    - Each unit the call placed or took out, by name - C(slice) (where it belongs now), C(state), C(dropin) (the
      file), C(matched_by) (the name or pattern that listed it, V(exclusive) for a unit O(exclusive) took out),
      C(label) (the entry's label), C(loaded_slice) (the C(Slice=) systemd holds after the call, or now in check mode) and C(cgroup) (where it
      runs, null while it is stopped).
  returned: success
  type: dict
  sample:
    vllm.service: {slice: inference.slice, state: present, matched_by: vllm.service, label: "units[0]",
                   loaded_slice: inference.slice,
                   cgroup: /system.slice/vllm.service,
                   dropin: /etc/systemd/system/vllm.service.d/90-aiinfra-io-isolation-slice.conf}
restart_required:
  description: The units that run outside their slice after the call, until they are restarted (without O(restart)).
  returned: success
  type: list
  elements: str
  sample: [vllm.service]
next_start:
  description:
    - The units of O(units[].at_next_start) entries that run outside their slice after the call; they move at their
      next start.
  returned: success
  type: list
  elements: str
  sample: [ssh.service]
restarted:
  description: The units this call restarted (in check mode, would restart) to move them into their slice.
  returned: success
  type: list
  elements: str
  sample: []
unmatched:
  description: The patterns that matched no service on the host.
  returned: success
  type: list
  elements: str
  sample: ["trainer@*.service"]
diff:
  description:
    - Before and after, keyed by drop-in path, by V(daemon-reload) (the drop-ins systemd has not loaded), and by unit
      (C(slice) systemd loaded, C(cgroup) it runs in).
  returned: success
  type: dict
  sample:
    before: {vllm.service: {slice: system.slice, cgroup: /system.slice/vllm.service}}
    after: {vllm.service: {slice: inference.slice, cgroup: /system.slice/vllm.service}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import placement as _placement
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_placement.MODULE_SPEC)
    exit_module(module, lambda: _placement.run(module.params, KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
