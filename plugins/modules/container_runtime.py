#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: container_runtime
short_description: Put a container runtime's containers into a tenant's slice by default, and find containers outside
version_added: 0.4.0
description:
  - For a host where one container runtime serves one tenant, makes the tenant's slice the runtime's default cgroup
    parent under the systemd cgroup driver, and reports the running containers that are outside their tenant's slice.
  - B(Docker.) C(/etc/docker/daemon.json) gets the slice as its C(cgroup-parent) and C(native.cgroupdriver=systemd) in
    C(exec-opts), merged into the file as it is - every other key and exec-opt stays as the user wrote it (a
    C(native.cgroupdriver=cgroupfs) is replaced). A container started without C(--cgroup-parent) then runs in
    C(/<slice>/docker-<id>.scope). dockerd reads the file when it starts - a daemon that runs and started before the
    file changed is restarted only with O(restart), and otherwise listed in RV(restart_required). A restart stops the
    containers that have no restart policy, which is why it is opt-in.
  - B(Podman.) libpod has no setting for its containers' default parent - C(containers.conf) has no such key (checked
    against containers.conf(5) and containers/common's configuration), and a rootful container started without
    C(--cgroup-parent) runs in C(machine.slice). So a Podman entry takes only V(machine.slice) as its slice, and the
    tenant is that slice - its settings go on C(machine.slice) (the roles do that for
    C(<role>_container_runtimes)). The module sets C(cgroup_manager = "systemd") in the C([engine]) table of
    C(/etc/containers/containers.conf) - that one line, every other byte of the file as it was. Podman has no daemon
    to restart.
  - Before a runtime's file is first changed, its original - bytes, mode, or that there was none - is kept in a copy
    stamped as managed, C(/var/lib/aiinfra-io_isolation/originals/<path>.orig). O(state=absent) and
    M(aiinfra.io_isolation.purge) put the original back byte for byte when the file still holds what this module made
    of it; when the user changed it since, only this module's keys are put back as they were, the other changes kept,
    and a warning says so.
  - A file that does not parse (JSON, TOML) is refused with nothing written, and so is a C(docker.service) whose
    command line gives C(--cgroup-parent) or C(--exec-opt) (dockerd refuses a setting given both ways).
  - B(The placement check) (O(check)) reads every container's cgroup from cgroupfs - C(docker-<id>.scope) and
    C(libpod-<id>.scope) below any slice; no runtime command is run - and reports in RV(outside) each container
    outside its tenant's slice - below the slice of its runtime when the runtime is in O(runtimes), else below one of
    O(tenant_slices) (containers started with C(--cgroup-parent) by the user's own tooling). The check changes nothing.
  - The kubelet owns everything below C(kubepods.slice) - this module does not configure containerd or CRI-O; on a
    Kubernetes node the tenant is C(kubepods.slice) itself (see the collection's containers guide).
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options:
  runtimes:
    description:
      - The runtimes and the slice that is their containers' default parent. A runtime may be listed once.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The runtime.
        type: str
        required: true
        choices: [docker, podman]
      slice:
        description:
          - The tenant's slice, such as V(training.slice) (required with O(state=present)). It should exist (the
            cgroup module creates it); Docker asks systemd for C(docker-<id>.scope) in it.
          - For V(podman) only V(machine.slice).
        type: str
      label:
        description: The name problems and warnings give for the entry (default C(runtimes[N])).
        type: str
  tenant_slices:
    description:
      - Slices a container of a runtime not in O(runtimes) may run in (started with C(--cgroup-parent) by the user's
        tooling); the slices of O(runtimes) count too. Empty, and no runtime listed - nothing is expected of any
        container.
    type: list
    elements: str
    default: []
  state:
    description:
      - V(present) sets each runtime's default parent; V(absent) puts each listed runtime's file back as it was before
        this module changed it.
    type: str
    choices: [present, absent]
    default: present
  restart:
    description:
      - Restart a daemon (C(docker.service)) that runs and started before its file changed. Without it the daemon is
        listed in RV(restart_required), and its containers go on running where they are.
    type: bool
    default: false
  check:
    description: Report where the running containers are (RV(containers), RV(outside)).
    type: bool
    default: true
notes:
  - A container that runs keeps its cgroup - a changed default applies to containers created afterwards.
  - Rootless Podman and Docker are out of scope - their containers run below the user's C(user@<uid>.service).
seealso:
  - module: aiinfra.io_isolation.placement
  - module: aiinfra.io_isolation.cgroup
  - module: aiinfra.io_isolation.purge
"""

EXAMPLES = r"""
- name: Docker's containers in the training slice by default; Podman's machine.slice carries the inference tenant
  aiinfra.io_isolation.container_runtime:
    runtimes:
      - {name: docker, slice: training.slice}
      - {name: podman, slice: machine.slice}
    tenant_slices: [inference.slice, training.slice]
    restart: true
  register: runtimes

- name: Fail when a container runs outside its tenant's slice
  ansible.builtin.assert:
    that: runtimes.outside | length == 0
    fail_msg: "{{ runtimes.outside }}"

- name: Only look - which containers run outside the tenant slices
  aiinfra.io_isolation.container_runtime:
    tenant_slices: [inference.slice, training.slice]
  check_mode: true
  register: placement

- name: Put Docker's own daemon.json back
  aiinfra.io_isolation.container_runtime:
    runtimes:
      - name: docker
    state: absent
"""

RETURN = r"""
changed:
  description: Whether a runtime's file changed (or a daemon was restarted).
  returned: always
  type: bool
diff:
  description: The runtimes' files before and after, keyed by path; the daemon's state by unit.
  returned: always
  type: dict
runtimes:
  description: Per runtime given, its file, the slice, the state and the copy of its original.
  returned: always
  type: dict
  sample:
    docker: {config: /etc/docker/daemon.json, slice: training.slice, state: present, changed: true,
             original: /var/lib/aiinfra-io_isolation/originals/etc_docker_daemon.json.orig}
restart_required:
  description: The daemons that run with their old configuration until they are restarted.
  returned: always
  type: list
  elements: str
  sample: [docker.service]
restarted:
  description: The daemons this call restarted (or would, in check mode).
  returned: always
  type: list
  elements: str
containers:
  description:
    - Every container found in cgroupfs - its runtime, id (12 characters), cgroup, the slices it is expected below,
      and whether it is outside them.
  returned: when O(check) is true
  type: list
  elements: dict
  sample:
    - {runtime: docker, id: 3f4e5d6c7b8a, cgroup: /training.slice/docker-3f4e5d6c7b8a0000000000000000000000000000000000000000000000000000.scope,
       expected: [training.slice], outside: false}
outside:
  description: The containers of RV(containers) that run outside their tenant's slice.
  returned: when O(check) is true
  type: list
  elements: dict
  sample:
    - {runtime: podman, id: 0a1b2c3d4e5f, cgroup: /machine.slice/libpod-0a1b2c3d4e5f0000000000000000000000000000000000000000000000000000.scope,
       expected: [inference.slice, training.slice], outside: true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import container_runtime as _container_runtime
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_container_runtime.MODULE_SPEC)
    exit_module(module, lambda: _container_runtime.run(module.params, KernelFS(), Runner(module),
                                                       module.check_mode))


if __name__ == "__main__":
    main()
