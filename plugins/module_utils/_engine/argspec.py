# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Argument-spec pieces shared by the modules, kept in step with the doc fragments.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Each piece here has a doc fragment of the same name in ``plugins/doc_fragments``; the sanity
test ``validate-modules`` checks that a module's spec and documentation agree.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

# aiinfra.io_isolation.devices: a list of device selectors (empty = all whole disks).
DEVICES = {
    "devices": {"type": "list", "elements": "str", "default": []},
}

# aiinfra.io_isolation.persist: survive reboot through the host's native mechanism.
PERSIST = {
    "persist": {"type": "bool", "default": True},
    "adopt": {"type": "bool", "default": False},
}


def merge(*pieces, **extra):
    """One argument_spec from shared pieces plus a module's own options (no silent override)."""
    spec = {}
    for piece in pieces + (extra,):
        for name, option in piece.items():
            if name in spec:
                raise ValueError("option %s is defined twice" % name)
            spec[name] = copy.deepcopy(option)
    return spec
