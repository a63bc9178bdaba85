# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration filters: entry, file name and hwdb export, with errors as AnsibleFilterError."""

import copy
import json
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import calibration as f

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_utils", "fixtures")
RESULTS = json.load(open(os.path.join(FIXTURES, "calibration_results.json")))
LAB = json.load(open(os.path.join(FIXTURES, "calibration_hwdb", "debian13-systemd257-qemu-nvme.json")))


def test_the_filters_are_registered():
    assert sorted(f.FilterModule().filters()) == ["calibration_classes", "calibration_duration", "calibration_entry",
                                                  "calibration_entry_file", "calibration_entry_json", "calibration_hwdb"]


def test_classes_pool_identical_disks_and_split_others():
    runs = copy.deepcopy(RESULTS)
    other = copy.deepcopy(RESULTS[0])
    other["device"]["size_bytes"] = 2147483648
    other["device"]["serial"] = "other"
    groups = f.calibration_classes({"results": [runs[0], other, runs[1], runs[2]], "changed": True})
    assert [len(g) for g in groups] == [3, 1]
    assert groups[1][0]["device"]["serial"] == "other"
    entries = [f.calibration_entry(g, "h") for g in groups]
    assert [e["capacity_bytes"] for e in entries] == [1073741824, 2147483648]
    assert entries[0]["repeats"] == 3


def test_classes_refuse_a_failed_run():
    with pytest.raises(AnsibleFilterError, match="calibration_classes: .*did not run: boom"):
        f.calibration_classes([dict(RESULTS[0], failed=True, msg="boom")])


def test_entry_file_and_hwdb_chain():
    entry = f.calibration_entry(copy.deepcopy(RESULTS), "inv-host")
    assert entry["host"] == "inv-host" and entry["repeats"] == 3
    assert f.calibration_entry_file(entry) == "QEMU_NVMe_Ctrl__7.2.22__1073741824.json"
    text = f.calibration_hwdb([entry])
    assert "\nblock:*:name:QEMU NVMe Ctrl:fwrev:7.2.22:\n IOCOST_SOLUTIONS=naive\n" in text
    assert " IOCOST_MODEL_NAIVE=rbps=1100000000 rseqiops=40000 rrandiops=30000 wbps=510000000 wseqiops=21000 " \
           "wrandiops=15001\n" in text
    assert " IOCOST_QOS_NAIVE=rpct=95 rlat=1100 wpct=95 wlat=2050 min=60 max=100\n" in text
    assert "3 repeats on inv-host -> QEMU_NVMe_Ctrl__7.2.22__1073741824.json" in text


def test_the_entry_file_renders_through_the_filter():
    entry = f.calibration_entry(copy.deepcopy(RESULTS), "inv-host")
    text = f.calibration_entry_json(entry)
    assert text.startswith('{\n    "capacity_bytes": 1073741824,\n') and text.endswith("}\n")
    assert json.loads(text) == entry


def test_the_lab_fragment_renders_through_the_filter():
    case = LAB["cases"][0]
    assert f.calibration_hwdb([case["entry"]], case["solution"]).endswith("\n" + case["records"])


@pytest.mark.parametrize("call, words", [
    (lambda: f.calibration_entry([]), "calibration_entry: calibration_entry needs the list"),
    (lambda: f.calibration_entry([dict(RESULTS[0], failed=True, msg="boom")]), "calibration_entry: .*did not run: boom"),
    (lambda: f.calibration_entry_file({"model": "x"}), "calibration_entry_file: .*without firmware"),
    (lambda: f.calibration_entry_json({"model": "x"}), "calibration_entry_json: .*missing keys"),
    (lambda: f.calibration_hwdb([{"model": "x"}], "naive"), "calibration_hwdb: entry 1 .*missing keys"),
    (lambda: f.calibration_hwdb([], "bad name"), "calibration_hwdb: the iocost solution name 'bad name'"),
])
def test_errors_are_filter_errors(call, words):
    with pytest.raises(AnsibleFilterError, match=words):
        call()


def test_hwdb_skip_unexportable_through_the_filter():
    entry = f.calibration_entry(copy.deepcopy(RESULTS))
    bigger = dict(entry, capacity_bytes=2147483648)
    with pytest.raises(AnsibleFilterError, match="has 2 entries"):
        f.calibration_hwdb([entry, bigger])
    text = f.calibration_hwdb([entry, bigger], "naive", True)
    assert "\nblock:" not in text and "# NOT EXPORTED:\n#   QEMU NVMe Ctrl firmware 7.2.22 has 2 entries" in text


def test_calibration_duration_bounds_one_run():
    # the defaults: 6 measurements x 3 passes x (6 s + 2 s) + 2 QoS runs x (8 s + 2 s), and the solution phase:
    # a solo run (15 s + 3 s ramp + 4 s start-up) and 5 points (each + 6 s settling at most) = 162 s
    assert f.calibration_duration() == 164 + 162 == f.calibration_duration({}, True, 8, {})
    off = {"measure": False}
    assert f.calibration_duration({}, True, 8, off) == 164
    assert f.calibration_duration({}, False, 8, off) == 144
    assert f.calibration_duration({"passes": 1, "max_seconds": 20, "min_seconds": 5}, True, 10, off) == 156
    # unset keys in a role variable are the module's defaults
    assert f.calibration_duration({"passes": None}, True, 8, {"seconds": None}) == 326
    # the lab scenario's phase: two levels of 4 s, no latency point: (4 + 7) + 2 x (4 + 13)
    assert f.calibration_duration({}, True, 8, {"levels": [100, 50], "seconds": 4, "latency_variant": False}) == 164 + 45


def test_calibration_duration_refuses_bad_solution_options():
    with pytest.raises(AnsibleFilterError, match="calibration_duration: solutions.seconds must be"):
        f.calibration_duration({}, True, 8, {"seconds": 1})


def test_calibration_duration_refuses_a_rule_the_module_refuses():
    with pytest.raises(AnsibleFilterError, match="calibration_duration: stop_rule .*max_seconds"):
        f.calibration_duration({"max_seconds": 2, "min_seconds": 1})
    with pytest.raises(AnsibleFilterError, match="calibration_duration"):
        f.calibration_duration({"bogus": 1})
