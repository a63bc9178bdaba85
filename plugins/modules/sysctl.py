#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sysctl
short_description: Set a group of sysctls and scheduler debug tunables, live and persistently, in one call
version_added: 0.1.0
description:
  - Manages a set of kernel settings in one call. Each value is written to its C(/proc/sys) file, and only when the
    kernel holds something else. The value is read back and compared token-wise, so V(4096 87380 6291456) matches
    what the kernel prints with tabs. Nothing reloads whole files (C(sysctl --system) would also re-apply every other
    file).
  - The sysctls persist in one owned file, C(/etc/sysctl.d/90-aiinfra-io-isolation.conf). It is written atomically,
    stamped as managed, and applied by C(systemd-sysctl) at boot. The module warns when a file applied later at boot
    (for example C(/etc/sysctl.conf) through Debian 12's C(99-sysctl.conf) link) sets the same key, because the last
    assignment wins.
  - Every name and value is checked before the first write. Unknown names fail and name close matches. A value the
    kernel would read differently fails too, such as V(010), which the kernel parses as octal 8.
  - C(vm.dirty_bytes)/C(vm.dirty_ratio) and C(vm.dirty_background_bytes)/C(vm.dirty_background_ratio) are exclusive
    pairs. Writing one makes the kernel show the other as 0. Asking for one is enough, asking for both non-zero is an
    error, and the pair is compared as a whole, so a re-run reports no change.
  - The CFS/EEVDF scheduler tunables moved from sysctls to debugfs in Linux 5.13. Give them as
    C(debugfs.sched.<file>), for example V(debugfs.sched.base_slice_ns) for C(/sys/kernel/debug/sched/base_slice_ns).
    Old names such as C(kernel.sched_min_granularity_ns) are mapped, with a warning, to the file the running kernel
    has. That is C(min_granularity_ns) on 5.13 to 6.5 and C(base_slice_ns) on EEVDF kernels (6.6 and later), where
    C(min_granularity_ns) no longer exists.
  - These tunables persist as C(w) lines in C(/etc/tmpfiles.d/aiinfra-io-isolation-sched.conf). On systemd hosts a
    drop-in orders C(systemd-tmpfiles-setup.service) after C(sys-kernel-debug.mount). They are debug interfaces, not
    a stable ABI, and the result says so.
  - If the kernel refuses a value, what this call already wrote is restored and the error names the file, the value
    and the errno.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
  - aiinfra.io_isolation.persist
options:
  sysctls:
    description:
      - The settings, as a mapping of name to value.
      - A name is a sysctl in C(sysctl.d) form (V(vm.swappiness), V(net/ipv4/conf/eth0.1/rp_filter), or
        V(net.ipv4.conf.eth0/1.rp_filter) for a dot inside a component). It can also be a scheduler debug tunable,
        V(debugfs.sched.<file>).
      - A value is a number, a string, or a list of tokens (V([4096, 87380, 6291456])). Booleans and floats are
        refused; quote a word the kernel expects.
      - The value can also be a mapping C({value, state}). C(state=absent) removes the key from the owned file; the
        running kernel keeps its current value, which is reported in RV(kernel).
      - Action triggers such as C(vm.drop_caches) are refused; they are not settings.
    type: dict
    required: true
notes:
  - Debugfs must be mounted at C(/sys/kernel/debug) to manage scheduler tunables (Debian mounts it at boot). Kernel
    lockdown hides it.
  - See the collection's C(docs/sysctl.md) for the kernel behaviour this module relies on, observed on Linux 6.1 and 6.12.
seealso:
  - name: sysctl.d(5)
    description: The format and order of the persisted file.
    link: https://www.freedesktop.org/software/systemd/man/latest/sysctl.d.html
  - name: tmpfiles.d(5)
    description: The C(w) lines that re-apply the scheduler tunables at boot.
    link: https://www.freedesktop.org/software/systemd/man/latest/tmpfiles.d.html
"""

EXAMPLES = r"""
- name: Writeback and swap settings both tenants share
  aiinfra.io_isolation.sysctl:
    sysctls:
      vm.swappiness: 10
      vm.dirty_background_bytes: 268435456   # the kernel shows dirty_background_ratio as 0 afterwards
      vm.dirty_bytes: 1073741824
      vm.dirty_expire_centisecs: 1500

- name: Scheduler base slice (a debugfs tunable; min_granularity_ns before Linux 6.6)
  aiinfra.io_isolation.sysctl:
    sysctls:
      debugfs.sched.base_slice_ns: 3000000

- name: Stop managing a key (the running value stays)
  aiinfra.io_isolation.sysctl:
    sysctls:
      vm.dirty_expire_centisecs: {state: absent}

- name: Only the running kernel, nothing persisted
  aiinfra.io_isolation.sysctl:
    sysctls:
      net.core.somaxconn: 4096
    persist: false
"""

RETURN = r"""
kernel:
  description:
    - What the kernel holds after the call, keyed by dotted name (scheduler tunables by their C(debugfs.sched.*)
      name). Values are normalised token strings.
    - For an exclusive pair both keys are reported.
    - Keys with C(state=absent) show their live value (V(null) if the file does not exist).
  returned: success
  type: dict
  sample: {vm.swappiness: "10", vm.dirty_bytes: "1073741824", vm.dirty_ratio: "0", debugfs.sched.base_slice_ns: "3000000"}
paths:
  description: The kernel file behind each key.
  returned: success
  type: dict
  sample: {vm.swappiness: /proc/sys/vm/swappiness, debugfs.sched.base_slice_ns: /sys/kernel/debug/sched/base_slice_ns}
mapped:
  description: Old scheduler sysctl names given in O(sysctls), and the debugfs tunable each was mapped to.
  returned: success
  type: dict
  sample: {kernel.sched_min_granularity_ns: debugfs.sched.base_slice_ns}
debug_interfaces:
  description: The keys that are kernel debug interfaces (debugfs), not a stable ABI.
  returned: success
  type: list
  elements: str
  sample: [debugfs.sched.base_slice_ns]
absent:
  description: Keys removed from the owned files. Their live values were left as they are.
  returned: success
  type: list
  elements: str
  sample: [vm.dirty_expire_centisecs]
persisted_to:
  description: The owned files and what each holds after the call.
  returned: success
  type: dict
  sample: {/etc/sysctl.d/90-aiinfra-io-isolation.conf: {vm.swappiness: "10"}}
diff:
  description: Before and after, keyed by setting name and by owned file path.
  returned: success
  type: dict
  sample: {before: {vm.swappiness: "60"}, after: {vm.swappiness: "10"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_sysctl.MODULE_SPEC)
    exit_module(module, lambda: _sysctl.run(module.params, KernelFS(), module.check_mode))


if __name__ == "__main__":
    main()
