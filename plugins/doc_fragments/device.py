# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # One device (pairs with _argspec.DEVICE).
    DOCUMENTATION = r"""
options:
  device:
    description:
      - The whole disk to manage.
      - Accepts a kernel name (V(nvme0n1)), a C(/dev) path, a C(/dev/disk/by-id/) or C(/dev/disk/by-path/) link,
        a WWN or EUI (V(eui.0011223344556677), V(0x5000c500a1b2c3d4)), a serial number, or V(MAJ:MIN).
      - Resolved to the whole-disk C(MAJ:MIN) on the host at run time; persisted configuration is keyed by the
        disk's stable identity (WWN or serial), never by name or C(MAJ:MIN), which can change between boots.
      - A partition is refused with a message naming its parent disk.
    type: str
    required: true
"""

    # A list of devices (pairs with _argspec.DEVICES).
    DEVICES = r"""
options:
  devices:
    description:
      - Limit the result to these disks. Each entry accepts the same forms as the C(device) option of the
        device-managing modules (name, C(/dev) path, C(/dev/disk/by-id/) link, WWN, serial or V(MAJ:MIN)).
      - Empty means every whole-disk block device with a non-zero size.
    type: list
    elements: str
    default: []
"""
