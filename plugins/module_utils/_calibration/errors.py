# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's calibration error, in a file of its own.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

The controller's database code (plugin_utils/_calibration_db: the calibration_db lookup, the roles' planning)
raises it too, and imports it from here: ansible-core compiles a collection's Python from source in every worker
process (one per task and host), and iocost_calibrate.py with what it imports took about 300 ms there each time
(make bench-fleet, benchmarks/fleet/README.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError


class CalibrationError(ModuleError):
    """A refusal or failure with a message for the user; ``details`` go into the result.

    The collection's one calibration error: the calibration module (iocost_calibrate) and the controller's database
    code (plugin_utils/_calibration_db: results, entries, database files, hwdb export) raise it.
    """
