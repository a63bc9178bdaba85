# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Shared attributes; each module adds check_mode/diff_mode support levels of its own.
    DOCUMENTATION = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
"""

    # For modules that only read the host.
    FACTS = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: N/A
    details: The module never changes anything.
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    # For modules that change the host through the reconcile engine.
    RECONCILE = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The plan is computed from the values the kernel holds; nothing is written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff is structured, C(before) and C(after) keyed by setting.
"""
