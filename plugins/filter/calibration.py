# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The calibration role's filters (controller side): merge repeats into a database entry, name and
# render its file, export entries as a systemd hwdb fragment. Each filter is documented in
# plugins/filter/<name>.yml; the database itself is plugin_utils/_calibration_db.py.

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._calibration_db import (
    CalibrationError, entry_file_name, entry_file_text, group_by_class, hwdb_fragment, merge_results)


def _filter(name, func):
    """``func`` as the filter ``name``: its CalibrationError becomes an AnsibleFilterError naming the filter."""
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except CalibrationError as e:
            raise AnsibleFilterError("%s: %s" % (name, e))
    run.__name__ = name
    run.__doc__ = func.__doc__
    return run


# entry: the repeats of one hardware class -> a database entry; classes: results grouped by class;
# entry_file / entry_json: the entry's safe file name and its content; hwdb: entries -> a systemd hwdb fragment.
calibration_entry = _filter("calibration_entry", merge_results)
calibration_classes = _filter("calibration_classes", group_by_class)
calibration_entry_file = _filter("calibration_entry_file", entry_file_name)
calibration_entry_json = _filter("calibration_entry_json", entry_file_text)
calibration_hwdb = _filter("calibration_hwdb", hwdb_fragment)


class FilterModule(object):
    def filters(self):
        return dict((f.__name__, f) for f in (calibration_entry, calibration_classes, calibration_entry_file,
                                              calibration_entry_json, calibration_hwdb))
