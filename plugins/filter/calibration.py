# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The calibration role's filters (controller side): merge repeats into a database entry, name its
# file, export entries as a systemd hwdb fragment. Each filter is documented in plugins/filter/<name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._calibration_db import (
    CalibrationError, entry_file_name, group_by_class, hwdb_fragment, merge_results)


def calibration_entry(results, host=None):
    """A calibration database entry from the ``iocost_calibrate`` results (repeats) of one disk."""
    try:
        return merge_results(results, host=host)
    except CalibrationError as e:
        raise AnsibleFilterError("calibration_entry: %s" % e)


def calibration_classes(results):
    """The ``iocost_calibrate`` results grouped by hardware class (model, firmware, capacity)."""
    try:
        return group_by_class(results)
    except CalibrationError as e:
        raise AnsibleFilterError("calibration_classes: %s" % e)


def calibration_entry_file(entry):
    """The entry's file name in the database: ``<model>__<firmware>__<capacity>.json``, safely encoded."""
    try:
        return entry_file_name(entry)
    except CalibrationError as e:
        raise AnsibleFilterError("calibration_entry_file: %s" % e)


def calibration_hwdb(entries, solution="naive", skip_unexportable=False):
    """The text of a systemd hwdb fragment for the udev ``iocost`` helper."""
    try:
        return hwdb_fragment(entries, solution=solution, skip_unexportable=skip_unexportable)
    except CalibrationError as e:
        raise AnsibleFilterError("calibration_hwdb: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"calibration_entry": calibration_entry, "calibration_classes": calibration_classes,
                "calibration_entry_file": calibration_entry_file,
                "calibration_hwdb": calibration_hwdb}
