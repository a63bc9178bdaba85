#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cgroup_boost
short_description: Lift a slice's io.max caps for a bounded window that the host ends by itself
version_added: 0.2.0
description:
  - Opens a window in which a systemd slice runs without its C(io.max) caps (or with the caps given in O(io)), and
    makes the host end it after O(seconds) on its own - also when the job that opened it is cancelled, killed by a
    timeout, or loses its connection, so that no C(always:) block runs.
  - With O(state=started) the end is scheduled first - C(systemd-run --on-boot=<uptime at the window's end>) creates the
    transient timer C(aiinfra-io-isolation-boost-<slice>.timer) (the slice's name without C(.slice)), whose oneshot
    service of the same name ends the window - and only then the caps are lifted, by the runtime-only drop-in
    C(/run/systemd/system/<slice>.d/60-aiinfra-io-isolation-boost.conf), which systemd is made to apply at once and
    which is read back from C(systemctl show) and the slice's C(io.max).
  - The window ends when the timer fires, at O(state=absent), when M(aiinfra.io_isolation.cgroup) converges the slice,
    when M(aiinfra.io_isolation.purge) runs, or at a reboot (C(/run) does not survive it). Ending removes the drop-in
    and makes systemd apply the slice's persistent configuration again, so the caps are whatever it holds then - the
    module never copies cap values into the host's timer.
  - Starting a window while one is open replaces it - the old timer is stopped and the new window ends O(seconds)
    after this call, sooner or later than the old end; such a run always reports a change.
  - The slice's caps are lifted on the disks its configuration caps; a disk it does not cap is refused (nothing to lift,
    and the end could not put a value back there).
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
options:
  unit:
    description:
      - The slice whose caps to lift, for example V(training.slice). Services and scopes are refused - their processes
        are capped by the slice they run in.
    type: str
    required: true
  state:
    description:
      - V(started) opens the window (or replaces the open one) for O(seconds).
      - V(absent) ends an open window now - the timer stopped, the drop-in removed, the caps applied and read back.
        Nothing changes when no window is open. V(stopped) is the same as V(absent).
    type: str
    choices: [started, absent, stopped]
    default: started
  seconds:
    description:
      - The window's length, from this call. Required with O(state=started); 1 to 604800 (7 days).
      - Under load a host's timer can be late by seconds (in the lab's emulated guests the caps came back a few
        seconds after the scheduled end, see the collection's C(docs/roles.md)).
    type: int
  io:
    description:
      - What the window sets instead of the caps. Only C(max) - a mapping of device (any selector the collection takes -
        kernel name, C(/dev) path, C(by-id) link, WWN, serial, C(MAJ:MIN)) to C(rbps), C(wbps), C(riops), C(wiops), each
        V(max) or a number (rates also as V(900MB) or V(1GiB)), as in M(aiinfra.io_isolation.cgroup).
      - Left out, every field of every disk the slice caps is set to V(max).
    type: dict
notes:
  - Check mode reads the slice and its window and reports what would change; it writes nothing and schedules nothing.
  - If the lift fails, or the timer fires before the lift is in place (a window shorter than the host needs to lift
    the caps), the window is ended and the caps come back; a window it was replacing is not opened again.
  - A killed job leaves the timer and the drop-in on the host, and nothing else; C(systemctl list-timers
    'aiinfra-io-isolation-boost-*') shows the open windows.
seealso:
  - module: aiinfra.io_isolation.cgroup
  - module: aiinfra.io_isolation.purge
"""

EXAMPLES = r"""
- name: Lift the training slice's caps for 15 minutes (the host ends the window even if this job dies)
  aiinfra.io_isolation.cgroup_boost:
    unit: training.slice
    seconds: 900
  register: boost

- name: Raise only the write cap of one disk for an hour
  aiinfra.io_isolation.cgroup_boost:
    unit: training.slice
    seconds: 3600
    io:
      max:
        lab-nvme-a:
          wbps: 2GB

- name: End the window now (the caps come back at once)
  aiinfra.io_isolation.cgroup_boost:
    unit: training.slice
    state: absent
"""

RETURN = r"""
unit:
  description: The slice.
  returned: success
  type: str
  sample: training.slice
active:
  description: Whether a window is open after this call (in check mode - would be).
  returned: success
  type: bool
  sample: true
window_end:
  description: When the host ends the window, UTC (V(null) when no window is open).
  returned: success
  type: str
  sample: "2026-12-04T02:10:00Z"
seconds:
  description: The window's length (V(null) with O(state=absent)).
  returned: success
  type: int
  sample: 900
timer:
  description: The transient timer that ends the window on the host (its service has the same name, C(.service)).
  returned: success
  type: str
  sample: aiinfra-io-isolation-boost-training.timer
dropin:
  description: The runtime drop-in that lifts the caps while the window is open.
  returned: success
  type: str
  sample: /run/systemd/system/training.slice.d/60-aiinfra-io-isolation-boost.conf
devices:
  description: The lifted disks, by the path the slice's configuration names them with, and their C(MAJ:MIN) in this boot.
  returned: success
  type: dict
  sample: {/dev/disk/by-id/nvme-nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001: "259:1"}
lifted:
  description: What the window sets for each lifted disk (V(max) - no limit), by path.
  returned: success
  type: dict
  sample: {/dev/disk/by-id/nvme-nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001:
           {rbps: max, wbps: max, riops: max, wiops: max}}
previous:
  description: The window found when the call began (V(null) if none) - its end, the timer's state (V(waiting),
    V(ending), or V(null) when no timer would end it), and whether it was open or past its end.
  returned: success
  type: dict
  sample: {window_end: "2026-12-04T02:05:00Z", timer_state: waiting, active: true, expired: false}
kernel:
  description: The slice's C(io.max) after the call (V(null) when the slice has no cgroup - nothing runs in it).
  returned: success
  type: dict
  sample: {io.max: {}}
diff:
  description: Before and after, keyed V(boost window <slice>) - the window's end, the timer's state, the drop-in.
  returned: success
  type: dict
  sample: {before: {"boost window training.slice": {window_end: null, timer: null, dropin: null}},
           after: {"boost window training.slice": {window_end: "2026-12-04T02:10:00Z", timer: waiting,
                                                   dropin: "# Managed by Ansible ..."}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module


def main():
    module = AnsibleModule(supports_check_mode=True, **_cgroup_boost.MODULE_SPEC)
    exit_module(module, lambda: _cgroup_boost.run(module.params, KernelFS(), Runner(module), module.check_mode))


if __name__ == "__main__":
    main()
