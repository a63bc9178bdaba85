# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Persistence options (pairs with _argspec.PERSIST).
    DOCUMENTATION = r"""
options:
  persist:
    description:
      - Also make the setting survive reboot through the host's own mechanism (C(sysctl.d), systemd drop-ins,
        udev rules, C(modprobe.d), C(tmpfiles.d)), in a file stamped as managed by this collection.
      - With V(false) only the running kernel is changed.
    type: bool
    default: true
  adopt:
    description:
      - Take over a configuration file at the managed path that this collection did not write.
      - Without it such a file is left alone and the module fails, naming the file.
    type: bool
    default: false
"""
