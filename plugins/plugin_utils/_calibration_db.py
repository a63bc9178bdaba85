# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The iocost calibration database: its one owner (write, read, match, export).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Controller side only. What each part serves:

* results -> entry: :func:`group_by_class`, :func:`merge_results` (filters ``calibration_classes``,
  ``calibration_entry``);
* write: :func:`entry_file_name`, :func:`entry_file_text` (filters ``calibration_entry_file``,
  ``calibration_entry_json``: the calibration role's ``copy``);
* read: :func:`load_db` (the ``calibration_db`` lookup, read by both roles; where the roles' database is, is
  the lookup's own ``default_dir``);
* match: :func:`match_entry` (the ``iocost_plan`` filter: which entry a disk takes);
* export: :func:`hwdb_fragment` (filter ``calibration_hwdb``), :func:`report_file_name` (the
  ``calibration_report`` action).

Pure logic: no Ansible imports, every problem is a :class:`CalibrationError` (the collection's one,
from module_utils/_calibration/errors.py) whose message names the result, entry or file, the value and how
to fix it.

An entry is one hardware class (model + firmware + capacity), one JSON file per class::

    {schema: 1, model, firmware, capacity_bytes,
     iocost_model: {rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops},   # medians over the repeats
     qos: {rpct, rlat, wpct, wlat, min, max} or null,                        # medians; rlat/wlat integers
     spread: {coef: {run_rse, repeat}}, repeats, runs: [...],
     date, kernel, fio_version, host, method, kernel_model, device: {serial, stable_id, name, kind},
     solutions: {<name>: {qos: {rpct, rlat, wpct, wlat, min, max}, vrate, ...figures}},   # optional
     solution_notes: [...]}                                                                # optional

``solutions`` (from iocost_calibrate's solution phase; entries written before it have none and stay
valid) holds only solutions that exist: ``isolation``, ``bandwidth``, ``latency`` when measured and
found, each with the full ``qos`` dict ready for io.cost.qos (rpct/wpct 0: no latency target).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import stat
import statistics
from datetime import datetime, timezone
from urllib.parse import unquote

# Both from small files of their own: this file is imported in every worker that looks the database up.
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration.errors import CalibrationError
# An entry's iocost_model and qos keys are the kernel's io.cost.model / io.cost.qos parameters, in its order.
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.iocost_keys import COST_COEFS as COEFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.iocost_keys import QOS_PARAMS as QOS_KEYS
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _controller_files

SCHEMA = 1
QOS_INT_KEYS = ("rlat", "wlat")
REQUIRED_KEYS = ("schema", "model", "firmware", "capacity_bytes", "iocost_model", "qos")
FILE_SUFFIX = ".json"
NAME_MAX = 255
# Characters a file-name component keeps as they are ('.' only where it cannot start a hidden file
# or form '..'; ' ' becomes '_' where unambiguous, see encode_component).
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_SOLUTION_RE = re.compile(r"^[A-Za-z0-9_-]+$")
# Characters a hwdb match line cannot carry literally: glob characters (the match is an fnmatch
# pattern), '\\' (fnmatch escape) and '#' (starts a comment anywhere on a hwdb line).
_HWDB_GLOB = frozenset("*?[\\#")


# ----------------------------------------------------------------------------------------------
# small helpers

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _round(value, digits=6):
    return None if value is None else round(float(value), digits)


def _median_int(values):
    """The median, rounded to the nearest integer (halves to even, as Python's round)."""
    return int(round(statistics.median(values)))


def _parse_date(text):
    if not isinstance(text, str) or not text:
        return None
    try:
        text = text.strip()
        # Python before 3.11 does not read a trailing 'Z'.
        stamp = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def human_bytes(value):
    """1073741824 -> '1 GiB', 960197124096 -> '894.25 GiB' (for titles and reports)."""
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            text = ("%.2f" % value).rstrip("0").rstrip(".")
            return "%s %s" % (text, unit)
        value /= 1024.0
    return "%s B" % value  # pragma: no cover - loop always returns


# ----------------------------------------------------------------------------------------------
# module results -> entry

def _result_label(index, result):
    device = result.get("device") if isinstance(result, dict) else None
    name = device.get("name") if isinstance(device, dict) else None
    return "calibration result %d%s%s" % (index + 1, " (%s)" % name if name else "",
                                          " of %s" % result.get("date") if isinstance(result, dict)
                                          and result.get("date") else "")


def _check_result(index, result):
    """The problems of one ``iocost_calibrate`` result, as text."""
    label = _result_label(index, result)
    if not isinstance(result, dict):
        raise CalibrationError("%s is a %s, not an iocost_calibrate result (a dict)" % (label, type(result).__name__))
    if result.get("failed") or result.get("skipped"):
        raise CalibrationError("%s did not run: %s" % (label, result.get("msg") or (
            "the task failed" if result.get("failed") else "the task was skipped")))
    problems = []
    device = result.get("device")
    if not isinstance(device, dict):
        problems.append("no 'device' dict")
    else:
        for key in ("model", "firmware"):
            if not isinstance(device.get(key), str) or not device.get(key).strip():
                problems.append("device.%s is %r: the database is keyed by model, firmware and capacity, so a disk "
                                "without them (virtio, loop, md) cannot have an entry; give it an explicit model "
                                "(io_baseline_models keyed by its serial) instead" % (key, device.get(key)))
        if not _is_int(device.get("size_bytes")) or device.get("size_bytes") <= 0:
            problems.append("device.size_bytes is %r, not a positive integer" % (device.get("size_bytes"),))
    model = result.get("model")
    if not isinstance(model, dict):
        problems.append("no 'model' dict (the six io.cost.model coefficients; a check-mode run measures nothing)")
    else:
        for key in COEFS:
            if not _is_int(model.get(key)) or model.get(key) <= 0:
                problems.append("model.%s is %r, not a positive integer" % (key, model.get(key)))
    qos = result.get("qos")
    if qos is not None and not isinstance(qos, dict):
        problems.append("qos is %r, not a dict (or null when the run measured no QoS)" % (qos,))
    elif qos is not None:
        for key in QOS_KEYS:
            if not _is_number(qos.get(key)) or qos.get(key) <= 0:
                problems.append("qos.%s is %r, not a positive number" % (key, qos.get(key)))
    found = result.get("solutions")
    if found is not None and not isinstance(found, dict):
        problems.append("solutions is %r, not a dict (or null when the run measured none)" % (found,))
    elif found:
        for name, value in sorted(found.items()):
            if value is not None:
                problems.extend(solution_problems(name, value))
    if problems:
        raise CalibrationError("%s cannot be merged: %s" % (label, "; ".join(problems)))
    return result


def device_class(device):
    """(model, firmware, size_bytes) of a disk as io_facts (``identity``) and iocost_calibrate (``device``)
    describe it: the class its database entry has (:func:`entry_class`); a missing size is 0."""
    model, firmware = device.get("model"), device.get("firmware")
    return (model.strip() if isinstance(model, str) else model,
            firmware.strip() if isinstance(firmware, str) else firmware,
            int(device.get("size_bytes") or 0))


def _class_of(result):
    return device_class(result["device"])


def unwrap_results(results):
    # A loop-registered variable ({results: [...], changed, msg}) is accepted as well as its list.
    if isinstance(results, dict) and isinstance(results.get("results"), list):
        results = results["results"]
    if isinstance(results, dict):
        results = [results]
    if not isinstance(results, (list, tuple)) or not results:
        raise CalibrationError("calibration_entry needs the list of iocost_calibrate results for one disk (the "
                               "repeats), got %s" % ("an empty list" if isinstance(results, (list, tuple))
                                                     else type(results).__name__))
    return list(results)


def group_by_class(results):
    """The results split by hardware class (model, firmware, capacity), in first-seen order.

    Disks of one class measured in one run (several identical disks on the calibration host, or
    repeats of each) make one database entry; each group is what :func:`merge_results` takes.
    """
    groups, order = {}, []
    for index, result in enumerate(unwrap_results(results)):
        key = _class_of(_check_result(index, result))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(result)
    return [groups[key] for key in order]


# The figures a solution carries besides its qos (iocost_calibrate's solution phase; _solutions.FIGURES).
SOLUTION_FIGURES = ("vrate", "vrate_read", "probe_p99_us", "probe_p99_ratio", "rate_kept", "probe_iops",
                    "probe_requested_iops", "antagonist_iops", "antagonist_share")
POINT_KEYS = ("variant", "level", "qos", "probe_p99_us", "probe_p99_ratio", "rate_kept", "probe_iops",
              "probe_requested_iops", "antagonist_iops", "antagonist_share", "settled")


def solution_problems(name, value, where="solutions"):
    """What is wrong with one QoS solution ``{qos: {rpct, rlat, wpct, wlat, min, max}, vrate, ...}``."""
    label = "%s.%s" % (where, name)
    if not isinstance(name, str) or not _SOLUTION_RE.match(name):
        return ["%s: the solution name %r must be letters, digits, '_' or '-'" % (where, name)]
    if not isinstance(value, dict):
        return ["%s is %r, not an object with a qos" % (label, value)]
    qos = value.get("qos")
    if not isinstance(qos, dict):
        return ["%s.qos is %r, not an object with %s" % (label, qos, ", ".join(QOS_KEYS))]
    problems = []
    for key in QOS_KEYS:
        item = qos.get(key)
        if key not in qos:
            problems.append("%s.qos.%s is missing" % (label, key))
        elif key in QOS_INT_KEYS and (not _is_int(item) or item <= 0):
            problems.append("%s.qos.%s is %r, not a positive integer (microseconds)" % (label, key, item))
        elif key in ("rpct", "wpct") and (not _is_number(item) or not 0 <= item <= 100):
            problems.append("%s.qos.%s is %r, not a percentile from 0 (no latency target) to 100" % (label, key, item))
        elif key in ("min", "max") and (not _is_number(item) or not 1 <= item <= 10000):
            problems.append("%s.qos.%s is %r, not a vrate percentage from 1 to 10000" % (label, key, item))
    extra = sorted(set(qos) - set(QOS_KEYS))
    if extra:
        plural = "s" if len(extra) > 1 else ""
        problems.append("%s.qos has unknown key%s %s (only %s)" % (label, plural, ", ".join(map(str, extra)),
                                                                   ", ".join(QOS_KEYS)))
    if _is_number(qos.get("min")) and _is_number(qos.get("max")) and qos["min"] > qos["max"]:
        problems.append("%s.qos.min (%s) is above qos.max (%s)" % (label, qos["min"], qos["max"]))
    for key in SOLUTION_FIGURES:
        if value.get(key) is not None and not _is_number(value.get(key)):
            problems.append("%s.%s is %r, not a number (or null)" % (label, key, value.get(key)))
    return problems


def _solution_of(solution, repeats):
    out = {"qos": dict(solution["qos"])}
    out.update((k, solution.get(k)) for k in SOLUTION_FIGURES)
    out["repeats"] = repeats
    return out


def merge_solutions(results):
    """(solutions, notes) of an entry from the repeats that measured solutions; (None, []) when none did.

    Over repeats the conservative choice: ``isolation`` is the repeat's with the LOWEST vrate (ties: the larger
    probe p99 ratio), and is left out when any repeat found none; ``latency`` is left out unless every repeat
    found it, and is the repeat's with the lowest rlat (the tightest target); ``bandwidth`` (vrate 100 in every
    repeat) carries the median figures. ``repeats`` counts the repeats a solution was measured in.
    """
    measured = [r["solutions"] for r in results if isinstance(r.get("solutions"), dict)]
    if not measured:
        return None, []
    out, notes = {}, []
    names = []
    for found in measured:
        names.extend(n for n in found if n not in names)
    for name in names:
        values = [found.get(name) for found in measured]
        have = [v for v in values if v]
        if len(have) < len(values):
            notes.append("%s: found in %d of %d repeats; left out (a repeat in which no setting held the probe "
                         "makes the conservative choice none)" % (name, len(have), len(values)))
            continue
        if name == "isolation":
            pick = sorted(have, key=lambda v: (float(v.get("vrate") or v["qos"]["max"]),
                                               -float(v.get("probe_p99_ratio") or 0)))[0]
            out[name] = _solution_of(pick, len(have))
        elif name == "latency":
            out[name] = _solution_of(sorted(have, key=lambda v: v["qos"]["rlat"])[0], len(have))
        else:
            merged = _solution_of(have[-1], len(have))
            for key in SOLUTION_FIGURES:
                numbers = [float(v[key]) for v in have if _is_number(v.get(key))]
                merged[key] = round(statistics.median(numbers), 4) if numbers else None
            out[name] = merged
    return out, notes


def _run_solutions(result):
    """A run's solution phase for ``runs[]``: its probe, solo p99, points and which solutions it found."""
    phase = result.get("solution_phase")
    if not isinstance(phase, dict) or not phase.get("measured"):
        return None
    solo = phase.get("solo") or {}
    return {"probe_iops": phase.get("probe_iops"), "probe_share": phase.get("probe_share"),
            "seconds": phase.get("seconds"), "point_seconds": phase.get("point_seconds"),
            "solo_p99_us": solo.get("probe_p99_us"), "solo_iops": solo.get("probe_iops"),
            "points": [dict((k, p.get(k)) for k in POINT_KEYS if k in p)
                       for p in phase.get("points") or [] if isinstance(p, dict)],
            "found": dict((name, (value or {}).get("vrate") if value else None)
                          for name, value in sorted((result.get("solutions") or {}).items()))}


def merge_results(results, host=None):
    """One database entry from N ``iocost_calibrate`` results (repeats) of one hardware class.

    Coefficients and QoS are the medians over the repeats (coefficients, rlat and wlat rounded to
    integers; percentages and vrate bounds to two decimals). ``spread.<coef>.run_rse`` is the median
    within-run relative standard error, ``spread.<coef>.repeat`` is (max - min) / median over the
    repeats (null for one repeat). ``host`` (the inventory name) overrides the host the module saw.
    """
    results = [_check_result(i, r) for i, r in enumerate(unwrap_results(results))]
    classes = [_class_of(r) for r in results]
    if len(set(classes)) > 1:
        raise CalibrationError(
            "the calibration results mix hardware classes (%s); an entry is one model + firmware + capacity: "
            "calibrate and merge each class separately" % ", ".join(
                "result %d: %s firmware %s, %d bytes" % (i + 1, c[0], c[1], c[2]) for i, c in enumerate(classes)))
    model, firmware, capacity = classes[0]
    order = sorted(range(len(results)), key=lambda i: (_parse_date(results[i].get("date"))
                                                       or datetime.min.replace(tzinfo=timezone.utc), i))
    latest = results[order[-1]]

    iocost_model = dict((k, _median_int([r["model"][k] for r in results])) for k in COEFS)
    # QoS over the repeats that measured it (measure_qos=false gives qos: null); null when none did.
    with_qos = [r for r in results if r.get("qos")]
    qos = {} if with_qos else None
    for key in QOS_KEYS if with_qos else ():
        value = statistics.median([float(r["qos"][key]) for r in with_qos])
        qos[key] = int(round(value)) if key in QOS_INT_KEYS else round(value, 2)
    spread = {}
    for key in COEFS:
        rses = [float((r.get("spread") or {}).get(key)) for r in results
                if _is_number((r.get("spread") or {}).get(key))]
        values = [r["model"][key] for r in results]
        repeat = None
        if len(values) > 1:
            repeat = _round((max(values) - min(values)) / statistics.median(values))
        spread[key] = {"run_rse": _round(statistics.median(rses)) if rses else None, "repeat": repeat}
    runs = []
    for i in order:
        r = results[i]
        runs.append({
            "date": r.get("date"), "host": r.get("host") or host, "seconds": r.get("seconds"),
            "kernel": r.get("kernel"), "serial": (r.get("device") or {}).get("serial"),
            "target": (r.get("target") or {}).get("kind"),
            "model": dict((k, int(r["model"][k])) for k in COEFS),
            "qos": dict((k, r["qos"][k]) for k in QOS_KEYS) if r.get("qos") else None,
        })
        phase = _run_solutions(r)
        if phase is not None:
            runs[-1]["solutions"] = phase
    solutions, solution_notes = merge_solutions([results[i] for i in order])
    # The kernel's own class for the disk, from the latest repeat that reported one.
    kernel_model = None
    for i in reversed(order):
        found = results[i].get("kernel_model")
        if isinstance(found, dict) and all(_is_int(found.get(k)) for k in COEFS):
            kernel_model = dict((k, int(found[k])) for k in COEFS)
            break
    device = latest["device"]
    entry = {
        "schema": SCHEMA,
        "model": model,
        "firmware": firmware,
        "capacity_bytes": capacity,
        "iocost_model": iocost_model,
        "qos": qos,
        "spread": spread,
        "repeats": len(results),
        "runs": runs,
        "date": latest.get("date"),
        "kernel": latest.get("kernel"),
        "fio_version": latest.get("fio_version"),
        "host": host or latest.get("host"),
        "method": latest.get("method"),
        "kernel_model": kernel_model,
        "device": {"serial": device.get("serial"), "stable_id": device.get("stable_id"),
                   "name": device.get("name"), "kind": device.get("kind")},
    }
    if solutions is not None:
        entry["solutions"] = solutions
        entry["solution_notes"] = solution_notes
    return entry


# ----------------------------------------------------------------------------------------------
# validation of stored entries

def entry_problems(entry):
    """What is wrong with a database entry (an empty list when it is usable)."""
    if not isinstance(entry, dict):
        return ["the entry is a %s, not a JSON object" % type(entry).__name__]
    problems = []
    missing = [k for k in REQUIRED_KEYS if k not in entry]
    if missing:
        problems.append("missing key%s %s" % ("s" if len(missing) > 1 else "", ", ".join(missing)))
    if "schema" in entry and (not _is_int(entry["schema"]) or entry["schema"] != SCHEMA):
        problems.append("schema is %r; this collection reads schema %d" % (entry["schema"], SCHEMA))
    for key in ("model", "firmware"):
        if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
            problems.append("%s is %r, not a non-empty string" % (key, entry[key]))
    if "capacity_bytes" in entry and (not _is_int(entry["capacity_bytes"]) or entry["capacity_bytes"] <= 0):
        problems.append("capacity_bytes is %r, not a positive integer" % (entry["capacity_bytes"],))
    if "iocost_model" in entry:
        model = entry["iocost_model"]
        if not isinstance(model, dict):
            problems.append("iocost_model is %r, not an object" % (model,))
        else:
            for key in COEFS:
                if key not in model:
                    problems.append("iocost_model.%s is missing" % key)
                elif not _is_int(model[key]) or model[key] <= 0:
                    problems.append("iocost_model.%s is %r, not a positive integer" % (key, model[key]))
            extra = sorted(set(model) - set(COEFS))
            if extra:
                problems.append("iocost_model has unknown key%s %s (only %s)" % (
                    "s" if len(extra) > 1 else "", ", ".join(map(str, extra)), ", ".join(COEFS)))
    if "qos" in entry and entry["qos"] is not None:
        qos = entry["qos"]
        if not isinstance(qos, dict):
            problems.append("qos is %r, not an object (or null: no QoS measured)" % (qos,))
        else:
            for key in QOS_KEYS:
                value = qos.get(key)
                if key not in qos:
                    problems.append("qos.%s is missing" % key)
                elif key in QOS_INT_KEYS and (not _is_int(value) or value <= 0):
                    problems.append("qos.%s is %r, not a positive integer (microseconds)" % (key, value))
                elif key in ("rpct", "wpct") and (not _is_number(value) or not 0 < value <= 100):
                    problems.append("qos.%s is %r, not a percentile above 0 and at most 100" % (key, value))
                elif key in ("min", "max") and (not _is_number(value) or value <= 0):
                    problems.append("qos.%s is %r, not a positive percentage" % (key, value))
            if (_is_number(qos.get("min")) and _is_number(qos.get("max"))
                    and qos["min"] > qos["max"]):
                problems.append("qos.min (%s) is above qos.max (%s)" % (qos["min"], qos["max"]))
    # optional: entries written before the solution phase have none
    if entry.get("solutions") is not None:
        found = entry["solutions"]
        if not isinstance(found, dict):
            problems.append("solutions is %r, not an object of named QoS solutions" % (found,))
        else:
            for name in sorted(found, key=str):
                problems.extend(solution_problems(name, found[name]))
    if "solution_notes" in entry and not (isinstance(entry["solution_notes"], list)
                                          and all(isinstance(n, str) for n in entry["solution_notes"])):
        problems.append("solution_notes is %r, not a list of strings" % (entry["solution_notes"],))
    return problems


def check_entry(entry, where="the calibration entry"):
    """Raise CalibrationError naming ``where`` unless ``entry`` is a usable database entry."""
    problems = entry_problems(entry)
    if problems:
        raise CalibrationError("%s is not a valid calibration entry: %s" % (where, "; ".join(problems)))
    return entry


def entry_class(entry):
    """(model, firmware, capacity_bytes): the hardware class of an entry, the database's key."""
    return (entry.get("model"), entry.get("firmware"), int(entry.get("capacity_bytes") or 0))


# ----------------------------------------------------------------------------------------------
# matching a disk to an entry

def match_entry(device, entries):
    """(entry, warning) for a disk (io_facts ``identity``): the entry of its model, firmware and capacity; else one of
    its model and capacity, with a warning naming both firmwares; never one of another capacity. (None, None) when
    there is none. ``entries`` may be hand-written (only model, firmware, capacity_bytes are read here)."""
    model, firmware, size = device_class(device)
    if not size:
        return None, None
    same = [e for e in entries or [] if entry_class(e)[0] == model and entry_class(e)[2] == size]
    exact = [e for e in same if entry_class(e)[1] == firmware]
    if exact:
        return exact[0], None
    if same:
        return same[0], ("%s: no calibration for firmware %s of %s; using the one measured on firmware %s"
                         % (device.get("name"), device.get("firmware"), device.get("model"), same[0].get("firmware")))
    return None, None


# ----------------------------------------------------------------------------------------------
# file names

def encode_component(text):
    """One file-name component, reversibly (decode_component).

    Letters, digits and '-' (except a leading one) stay. A single space between two other characters becomes '_'. A '.'
    stays unless it is the first character or follows another '.' (so no hidden file and no '..').
    Everything else (other spaces, '_', '%', '/', non-ASCII, ...) becomes %XX of its UTF-8 bytes.
    The result never contains '/', '..' or '__' and never starts or ends with '_'.
    """
    if not isinstance(text, str) or not text:
        raise CalibrationError("cannot name a database file after %r: model and firmware must be non-empty "
                               "strings" % (text,))
    out = []
    last = len(text) - 1
    for i, char in enumerate(text):
        if char in _PLAIN and (i > 0 or char != "-"):
            out.append(char)
        elif char == " " and 0 < i < last and text[i - 1] != " " and text[i + 1] != " ":
            out.append("_")
        elif char == "." and i > 0 and text[i - 1] != ".":
            out.append(".")
        else:
            out.append("".join("%%%02X" % b for b in char.encode("utf-8")))
    return "".join(out)


def decode_component(text):
    return unquote(text.replace("_", " "), errors="strict")


def entry_file_name(entry):
    """``<model>__<firmware>__<capacity_bytes>.json`` with each part encoded by encode_component."""
    for key in ("model", "firmware", "capacity_bytes"):
        if not isinstance(entry, dict) or key not in entry:
            raise CalibrationError("cannot name a database file for an entry without %s" % key)
    capacity = entry["capacity_bytes"]
    if not _is_int(capacity) or capacity <= 0:
        raise CalibrationError("cannot name a database file: capacity_bytes is %r, not a positive integer"
                               % (capacity,))
    name = "%s__%s__%d%s" % (encode_component(entry["model"]), encode_component(entry["firmware"]), capacity,
                             FILE_SUFFIX)
    if len(name.encode("utf-8")) > NAME_MAX:
        raise CalibrationError("the database file name for %s firmware %s would be %d bytes, over the %d-byte "
                               "limit of file names" % (entry["model"], entry["firmware"], len(name), NAME_MAX))
    return name


def report_file_name(entry):
    """The name of the entry's HTML report (calibration_report): its database file's, ending in .html."""
    return entry_file_name(entry)[:-len(FILE_SUFFIX)] + ".html"


def entry_file_text(entry):
    """The content of an entry's database file, as :func:`load_db` reads it: JSON with sorted keys, four-space
    indent and a final newline (the bytes Ansible's to_nice_json gives, so files written by earlier releases do not
    change)."""
    check_entry(entry, "the calibration entry to write")
    return json.dumps(entry, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def parse_entry_file_name(name):
    """(model, firmware, capacity_bytes) from a name made by entry_file_name, else CalibrationError."""
    if not name.endswith(FILE_SUFFIX):
        raise CalibrationError("%s: a database file name ends in %s" % (name, FILE_SUFFIX))
    parts = name[:-len(FILE_SUFFIX)].split("__")
    if len(parts) != 3 or not parts[2].isdigit() or not parts[0] or not parts[1]:
        raise CalibrationError("%s is not a database file name (<model>__<firmware>__<capacity bytes>%s)"
                               % (name, FILE_SUFFIX))
    try:
        return decode_component(parts[0]), decode_component(parts[1]), int(parts[2])
    except UnicodeDecodeError:
        raise CalibrationError("%s: the %%XX escapes in the name are not UTF-8" % name)


# ----------------------------------------------------------------------------------------------
# the database directory

def device_classes(disks):
    """{(model, capacity_bytes)} of the disks (io_facts devices with an ``identity``, or identities): the entries
    :func:`match_entry` can pick for them are those of these models and capacities (a disk of no known size takes
    none)."""
    out = set()
    for disk in disks or []:
        identity = disk.get("identity", disk) if isinstance(disk, dict) else None
        if not isinstance(identity, dict):
            raise CalibrationError("the disks to look calibration entries up for are io_facts devices (select_disks "
                                   "gives them) or their identities, got %r" % (disk,))
        model, _firmware, size = device_class(identity)
        if size:
            out.add((model, size))
    return out


def load_db(*directories, basedir=None, disks=None, index_dir=None):
    """Entries from ``<directory>/*.json`` of each directory in turn, each sorted by file name.

    A missing directory is empty; a relative one is relative to ``basedir`` (the playbook's directory
    for the lookup). Every file must be a valid entry (entry_problems) named by entry_file_name, and no
    two files, in one directory or several, may hold the same class; otherwise CalibrationError names
    the file and what is wrong.

    With ``disks`` (:func:`device_classes`) only the entries of their models and capacities are returned: all that
    :func:`match_entry` can pick for them, in the same order, so the same one is picked. The whole database is
    still checked, but with ``index_dir`` (a directory of the run's own: the lookup gives ansible-core's per-run
    controller temporary directory) each file is read once per run, not once per host: the first read records the
    class of each valid file there, keyed by its inode, size and times, and later reads of an unchanged file take
    the class from that record (a database of 1,000 entries cost about 300 ms a host read whole; make bench-fleet).
    """
    wanted = None if disks is None else device_classes(disks)
    entries, seen = [], {}
    for directory in directories:
        for path, cls, entry in _read_directory(_resolve(directory, basedir), wanted, index_dir):
            if cls in seen:
                raise CalibrationError("%s and %s hold the same hardware class (%s firmware %s, %d bytes); keep one"
                                       % ((seen[cls], path) + cls))
            seen[cls] = path
            if entry is not None:
                entries.append(entry)
    return entries


def _resolve(directory, basedir):
    if not isinstance(directory, str) or not directory:
        raise CalibrationError("a database is a directory path, got %r" % (directory,))
    path = os.path.expanduser(directory)
    return os.path.join(basedir, path) if basedir and not os.path.isabs(path) else path


def _signature(st):
    # Any write to a file changes its ctime, which no tool sets back, besides size and mtime; a replaced file has
    # another inode. A file with the signature the index recorded is the file that was checked.
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _index_path(index_dir, directory):
    key = hashlib.sha256(os.path.abspath(directory).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(index_dir, "calibration-db-index-%s.json" % key)


def _load_index(path, directory):
    """{file name: [signature..., model, firmware, capacity]} recorded for ``directory``; {} when none is usable."""
    try:
        with open(path, encoding="utf-8") as handle:
            index = json.load(handle)
    except (OSError, ValueError):
        return {}
    ok = isinstance(index, dict) and index.get("directory") == os.path.abspath(directory)
    return index.get("files") if ok and isinstance(index.get("files"), dict) else {}


def _save_index(path, directory, files):
    # Written whole and renamed into place: forked workers read and write it at the same time; a record lost to a
    # concurrent write only means that file is checked again.
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _controller_files.replace(path, json.dumps({"directory": os.path.abspath(directory), "files": files})
                                  .encode("utf-8"))
    except OSError:
        # The index only saves work; without a writable place each host reads the database whole, as before.
        pass


def _read_entry(path, name):
    """The entry of one database file, checked (content and file name), or CalibrationError naming the file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as e:
        raise CalibrationError("%s: cannot be read: %s" % (path, e.strerror or e))
    try:
        entry = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CalibrationError("%s: not UTF-8 text (%s)" % (path, e))
    except ValueError as e:
        raise CalibrationError("%s: not valid JSON: %s; fix or remove the file (the calibration role "
                               "rewrites it on the next run)" % (path, e))
    check_entry(entry, path)
    expected = entry_file_name(entry)
    if expected != name:
        raise CalibrationError("%s holds the entry of %s firmware %s, %d bytes, which belongs in %s; rename "
                               "the file" % (path, entry["model"], entry["firmware"], entry["capacity_bytes"],
                                             expected))
    return entry


def _read_directory(directory, wanted=None, index_dir=None):
    """(path, class, entry) for each entry file of one database directory, in file-name order; with ``wanted`` (a
    set of (model, capacity)) the entry is None for the others, and with ``index_dir`` those are not read again
    while unchanged since the run checked them (load_db)."""
    if not os.path.exists(directory):
        return
    if not os.path.isdir(directory):
        raise CalibrationError("the calibration database %s is not a directory" % directory)
    index_path = _index_path(index_dir, directory) if index_dir and wanted is not None else None
    known = _load_index(index_path, directory) if index_path else {}
    recorded, changed = {}, False
    for name in sorted(os.listdir(directory)):
        if not name.endswith(FILE_SUFFIX) or name.startswith("."):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise CalibrationError("%s: not a regular file (the database holds one JSON file per hardware class)"
                                   % path)
        signature = _signature(st)
        record = known.get(name)
        if isinstance(record, list) and len(record) == len(signature) + 3 and record[:len(signature)] == signature:
            cls = tuple(record[len(signature):])
            entry = _read_entry(path, name) if (cls[0], cls[2]) in wanted else None
        else:
            entry = _read_entry(path, name)
            cls = entry_class(entry)
            changed = True
        recorded[name] = signature + list(cls)
        yield path, cls, (entry if wanted is None or (cls[0], cls[2]) in wanted else None)
    if index_path and (changed or len(recorded) != len(known)):
        _save_index(index_path, directory, recorded)


# ----------------------------------------------------------------------------------------------
# systemd hwdb export

def solution_key(solution):
    """The property suffix systemd's iocost helper looks up: upper case, '-' -> '_'."""
    if not isinstance(solution, str) or not _SOLUTION_RE.match(solution):
        raise CalibrationError("the iocost solution name %r must be letters, digits, '_' or '-' (it is one word "
                               "of IOCOST_SOLUTIONS and part of the IOCOST_MODEL_<NAME> property)" % (solution,))
    return solution.upper().replace("-", "_")


def _number(value):
    value = float(value)
    if value.is_integer():
        return "%d" % value
    return ("%.2f" % value).rstrip("0").rstrip(".")


def udev_model_pattern(text, kind, what):
    """The hwdb match text for udev's ID_MODEL / ID_REVISION of a disk whose sysfs string is ``text``.

    NVMe: udev copies the sysfs attribute (trailing blanks dropped, inner spaces kept). Other kinds
    (SCSI/SATA through scsi_id/ata_id) get '_' for blanks, so each run of blanks becomes '*'.
    Glob characters, '\\\\' and '#' become '?' (any one character). Non-printable or non-ASCII text
    is refused.
    """
    text = text.strip()
    bad = [c for c in text if not 0x20 <= ord(c) < 0x7f]
    if bad:
        raise CalibrationError("%s %r has characters a hwdb match line cannot carry (%s); keep this disk's model "
                               "in the iocost module (persist=true) instead" % (what, text, ", ".join(
                                   repr(c) for c in bad)))
    out = []
    nvme = kind is None or str(kind).startswith("nvme")
    for char in text:
        if char in _HWDB_GLOB:
            out.append("?")
        elif char == " " and not nvme:
            if not out or out[-1] != "*":
                out.append("*")
        else:
            out.append(char)
    return "".join(out)


def hwdb_match(entry):
    kind = (entry.get("device") or {}).get("kind")
    return "block:*:name:%s:fwrev:%s:" % (udev_model_pattern(entry["model"], kind, "model"),
                                          udev_model_pattern(entry["firmware"], kind, "firmware"))


HWDB_HEADER = """\
# systemd hwdb: blk-iocost models and QoS for systemd's udev "iocost" helper (systemd 254 and later).
# Managed by aiinfra.io_isolation (calibration_hwdb filter); local changes are overwritten.
# systemd's 90-iocost.rules looks each whole disk up as
#   block::name:<ID_MODEL_FROM_DATABASE, else ID_MODEL>:fwrev:<ID_REVISION>:
# (udevadm info --query=property /dev/<disk> shows them) and runs "iocost apply <disk>", which
# writes the solution named by TargetSolution= in /etc/udev/iocost.conf (default naive) when it is
# listed, else the first one listed, to /sys/fs/cgroup/io.cost.model and io.cost.qos. Each record lists
# the entry's own QoS first (its name below), then the QoS solutions the calibration measured
# (isolation, latency, bandwidth: TargetSolution=isolation takes the roles' default).
# Install as /etc/udev/hwdb.d/<name>.hwdb, then: systemd-hwdb update --strict;
# udevadm trigger --action=change --settle /dev/<disk>; check: /usr/lib/udev/iocost query /dev/<disk>
#
# NOTE: the match is by model and firmware ONLY. An entry applies to EVERY drive of that model and
# firmware on a host, whatever its capacity and whichever drive was measured, so a model+firmware
# with entries for several capacities is refused. Disks the aiinfra.io_isolation.iocost module
# manages (persist=true, keyed by WWN/serial) get its values instead: its rule runs after this one.
#
# Entries (model | firmware | capacity | measured):
"""


# The measured solutions a hwdb record lists after the entry's own QoS: the one the roles default to first.
HWDB_SOLUTION_ORDER = ("isolation", "latency", "bandwidth")


def hwdb_solutions(entry):
    """The names of the solutions an entry measured, in HWDB_SOLUTION_ORDER (others after, sorted)."""
    found = entry.get("solutions") or {}
    return sorted(found, key=lambda n: (HWDB_SOLUTION_ORDER.index(n) if n in HWDB_SOLUTION_ORDER else len(HWDB_SOLUTION_ORDER), n))


def hwdb_fragment(entries, solution="naive", skip_unexportable=False):
    """The text of a systemd hwdb fragment for ``entries`` (one record per model + firmware).

    Entries that cannot be exported - no QoS, a model or firmware a match line cannot carry, or one
    model + firmware (one match line) with entries for several capacities - raise CalibrationError,
    or with ``skip_unexportable`` are left out and listed in the header as not exported.
    """
    key = solution_key(solution)
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, (list, tuple)):
        raise CalibrationError("calibration_hwdb needs a list of calibration entries, got %s"
                               % type(entries).__name__)
    by_match, skipped = {}, []

    def refuse(text):
        if not skip_unexportable:
            raise CalibrationError(text)
        skipped.append(text)

    for index, entry in enumerate(entries):
        where = "entry %d (%s)" % (index + 1, entry.get("model") if isinstance(entry, dict) else entry)
        check_entry(entry, where)
        if solution_key(solution) in [solution_key(n) for n in hwdb_solutions(entry)]:
            raise CalibrationError("%s has a measured %r solution of its own: export the entry's QoS under another "
                                   "name (solution, default naive)" % (where, solution))
        if not entry["qos"]:
            refuse("%s firmware %s, %d bytes has no QoS (calibrated with measure_qos=false); systemd's iocost "
                   "helper applies a solution only with both IOCOST_MODEL_ and IOCOST_QOS_ properties: calibrate it "
                   "again with QoS" % (entry["model"], entry["firmware"], entry["capacity_bytes"]))
            continue
        try:
            match = hwdb_match(entry)
        except CalibrationError as e:
            refuse("%s: %s" % (where, e))
            continue
        by_match.setdefault(match, []).append(entry)
    for match in sorted(by_match):
        group = by_match[match]
        if len(group) > 1:
            sizes = sorted(int(e["capacity_bytes"]) for e in group)
            del by_match[match]
            refuse("%s firmware %s has %d entries (%s bytes) for the one match line %s: systemd's hwdb matches "
                   "drives by model and firmware only, so it cannot tell these apart. Export one of them (for "
                   "example entries | selectattr('capacity_bytes', 'equalto', %d)) or manage these disks with the "
                   "iocost module (persist=true, keyed by WWN/serial)" % (
                       group[0]["model"], group[0]["firmware"], len(group), ", ".join(str(n) for n in sizes), match,
                       sizes[0]))
    ordered = [(match, by_match[match][0]) for match in sorted(by_match)]
    records = []
    lines = [HWDB_HEADER.rstrip("\n")]
    if not ordered:
        lines.append("#   (none)")
    for match, entry in ordered:
        source = entry_file_name(entry)
        lines.append("#   %s | %s | %d bytes (%s) | %s, %s repeat%s on %s -> %s" % (
            entry["model"], entry["firmware"], entry["capacity_bytes"], human_bytes(entry["capacity_bytes"]),
            entry.get("date") or "date unknown", entry.get("repeats") or "?",
            "" if entry.get("repeats") == 1 else "s", entry.get("host") or "host unknown", source))
        model = " ".join("%s=%d" % (k, entry["iocost_model"][k]) for k in COEFS)
        # the entry's own QoS under `solution`, then each solution the calibration measured under its own name
        measured = entry.get("solutions") or {}
        solutions = [(solution, entry["qos"])] + [(name, measured[name]["qos"]) for name in hwdb_solutions(entry)]
        record = [
            "# %s, firmware %s, calibrated on %s (%s); source %s" % (
                entry["model"], entry["firmware"], human_bytes(entry["capacity_bytes"]),
                entry["capacity_bytes"], source),
            match,
            " IOCOST_SOLUTIONS=%s" % " ".join(name for name, _qos in solutions),
        ]
        for name, qos in solutions:
            record += [" IOCOST_MODEL_%s=%s" % (solution_key(name), model),
                       " IOCOST_QOS_%s=%s" % (solution_key(name), " ".join(
                           "%s=%s" % (k, ("%d" % qos[k]) if k in QOS_INT_KEYS else _number(qos[k])) for k in QOS_KEYS))]
        records.append("\n".join(record))
    if skipped:
        lines.append("#\n# NOT EXPORTED:")
        lines.extend("#   " + "".join(c if c >= " " and c != "\x7f" else repr(c)[1:-1] for c in text)
                     for text in skipped)
    return "\n".join(lines) + "\n" + "".join("\n" + r + "\n" for r in records)
