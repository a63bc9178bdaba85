# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
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
