# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The calibration role's filters (controller side): merge repeats into a database entry, name and
# render its file, export entries as a systemd hwdb fragment. Each filter is documented in
# plugins/filter/<name>.yml; the database itself is plugin_utils/_calibration_db.py.

import importlib

from ansible.errors import AnsibleFilterError

# Imported by the filter that needs them, not with this file: ansible-core imports every filter file of the
# collection in each worker (a fork per task and host) that templates any of the collection's filters
# (make bench-fleet, benchmarks/fleet/README.md).
_PKG = "ansible_collections.aiinfra.io_isolation.plugins."


def _module(name):
    return importlib.import_module(_PKG + name)


def _db():
    return _module("plugin_utils._calibration_db")


# What starting and stopping one fio run costs besides its runtime; with it the bound of the defaults
# (18 passes of at most 6 s, two 8-second QoS runs) is 164 s, against 166-169 s measured per
# calibration in the lab (docs/calibration.md).
FIO_OVERHEAD_SECONDS = 2


def _filter(name, func):
    """The database function ``func`` (a name in plugin_utils/_calibration_db.py) as the filter ``name``: its
    CalibrationError becomes an AnsibleFilterError naming the filter."""
    def run(*args, **kwargs):
        db = _db()
        try:
            return getattr(db, func)(*args, **kwargs)
        except db.CalibrationError as e:
            raise AnsibleFilterError("%s: %s" % (name, e))
    run.__name__ = name
    return run


# entry: the repeats of one hardware class -> a database entry; classes: results grouped by class;
# entry_file / entry_json: the entry's safe file name and its content; hwdb: entries -> a systemd hwdb fragment.
calibration_entry = _filter("calibration_entry", "merge_results")
calibration_classes = _filter("calibration_classes", "group_by_class")
calibration_entry_file = _filter("calibration_entry_file", "entry_file_name")
calibration_entry_json = _filter("calibration_entry_json", "entry_file_text")
calibration_hwdb = _filter("calibration_hwdb", "hwdb_fragment")


def calibration_duration(stop_rule=None, measure_qos=True, qos_seconds=8, solution_phase=None):
    """Seconds one iocost_calibrate run takes at most (what the role announces before each disk), the solution
    phase (``solution_phase``: the module's ``solutions`` option; None or {} for its defaults) included."""
    solutions = _module("module_utils._calibration.solutions")
    fio = _module("module_utils._calibration.fio")
    try:
        rule = fio.StopRule(**dict((k, v) for k, v in (stop_rule or {}).items() if v is not None))
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError("calibration_duration: stop_rule %r: %s" % (stop_rule, e))
    try:
        phase = solutions.phase_seconds(solutions.options(solution_phase or {}))
    except solutions.SolutionError as e:
        raise AnsibleFilterError("calibration_duration: %s" % e)
    # the passes and QoS runs iocost_calibrate makes (_calibrate._measure and _fio.run_qos walk the same lists)
    seconds = len(fio.MEASUREMENTS) * rule.passes * (rule.max_seconds + FIO_OVERHEAD_SECONDS)
    if measure_qos:
        seconds += len(fio.QOS_RUNS) * (int(qos_seconds) + FIO_OVERHEAD_SECONDS)
    return int(round(seconds + phase))


class FilterModule(object):
    def filters(self):
        return dict((f.__name__, f) for f in (calibration_entry, calibration_classes, calibration_entry_file,
                                              calibration_entry_json, calibration_hwdb, calibration_duration))
