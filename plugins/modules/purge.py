#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: purge
short_description: Remove everything this collection manages from a host, through each module's own absent path
version_added: 0.2.0
description:
  - Finds what the collection manages on the host from its registry of owned paths - udev rules of
    M(aiinfra.io_isolation.iocost), M(aiinfra.io_isolation.blk_queue) and M(aiinfra.io_isolation.nvme_arbitration),
    the sysctl.d and tmpfiles.d files of M(aiinfra.io_isolation.sysctl), the modprobe.d file of
    M(aiinfra.io_isolation.nvme_queues), the systemd drop-ins and slices of M(aiinfra.io_isolation.cgroup), the boot
    helpers, and the units and launcher of the C(aiinfra.io_isolation.io_metrics) role's exporter -
    counting only files that carry the collection's managed stamp.
  - Removes each concern with the module that manages it, in this order - the units' settings (cgroup V(absent), which
    also resets what systemd applied to the running cgroups), iocost on every disk the kernel holds a model for or
    that has a rule (V(absent) - the kernel's own model at once), block-queue rules, the sysctls and scheduler
    tunables in the owned files, the NVMe driver options, then the rules no module state covers (NVMe controllers,
    devices no longer present), the boot helpers, and last the io_metrics exporter - its timer and any run stopped, its
    units, launcher and copy of the collection's code, and the files it wrote (its textfile, the latency state, the
    recorded verify result, where its unit's arguments put them) - as the role's C(io_metrics_state=absent) does.
  - Block-queue values, sysctls, NVMe queue options and NVMe Arbitration keep their live values until the next boot
    (or controller reset); the steps' results report them.
  - Each concern is one all-or-nothing engine run. A failure stops the purge and names the concern; what earlier
    steps removed stays removed, and a re-run continues from what is left. After the last step the registry is read
    again, and any managed file still there fails the call.
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options: {}
notes:
  - A disk without a stable identity never had a persisted setting of this collection; its live settings are left alone.
seealso:
  - module: aiinfra.io_isolation.io_facts
author:
  - aiinfra platform engineering (@aiinfra)
"""

EXAMPLES = r"""
- name: Take the collection off the host
  aiinfra.io_isolation.purge:
  register: purge

- name: Show what was removed
  ansible.builtin.debug:
    msg: "{{ purge.found }} (reboot for the driver defaults: {{ purge.reboot_required }})"
"""

RETURN = r"""
found:
  description: The managed files the registry found before the purge.
  returned: always
  type: list
  elements: str
  sample: [/etc/sysctl.d/90-aiinfra-io-isolation.conf, /etc/systemd/system/inference.slice.d/50-aiinfra-io-isolation.conf,
           /etc/udev/rules.d/91-aiinfra-iocost-wwn_eui.0000000000000001.rules,
           /usr/local/libexec/aiinfra-io_isolation/iocost-apply]
steps:
  description:
    - Each concern's result, as the module that manages it returns it (V(cgroup <unit>), V(iocost), V(blk_queue),
      V(sysctl), V(nvme_queues), V(files)). Concerns with nothing to remove are left out.
  returned: always
  type: dict
  sample: {"cgroup inference.slice": {"changed": true, "name": inference.slice},
           "iocost": {"changed": true}, "files": {"changed": true}}
left:
  description: Managed files still on the host after the purge (always empty on success; not computed in check mode).
  returned: always
  type: list
  elements: str
  sample: []
reboot_required:
  description: The NVMe driver still runs with the removed options; its defaults return at the next boot.
  returned: always
  type: bool
  sample: false
diff:
  description: "Each step's diff, keyed by concern and setting (C(<concern>: <setting>))."
  returned: always
  type: dict
  sample: {"before": {"files: /usr/local/libexec/aiinfra-io_isolation/iocost-apply": "#!/usr/bin/python3 ..."},
           "after": {"files: /usr/local/libexec/aiinfra-io_isolation/iocost-apply": null}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import registry as _registry
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    exit_module(module, lambda: _registry.purge(KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
