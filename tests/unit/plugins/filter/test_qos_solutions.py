# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""io_baseline's QoS on a calibrated disk: the entry's measured solution by name (iocost_plan's ``solution``), the
roles' QoS where the entry has none, and which one is in force (``qos_sources``, ``qos_source_text``)."""

import copy

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f

from test_io_isolation_filters import CAL, FACTS, QOS, WWID_A

ROLES_QOS = dict(QOS, max=10000)
ISOLATION = {"rpct": 0, "rlat": 2000, "wpct": 0, "wlat": 10000, "min": 80, "max": 80}
BANDWIDTH = dict(ISOLATION, min=100, max=100)
SOLVED = dict(CAL, solutions={"isolation": {"qos": ISOLATION, "vrate": 80, "probe_p99_ratio": 1.31},
                              "bandwidth": {"qos": BANDWIDTH, "vrate": 100, "probe_p99_ratio": 9.8}})
DISKS = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"]]


def plan(entry, solution="isolation", calibration_qos=False):
    return f.iocost_plan(DISKS, {}, [copy.deepcopy(entry)], ROLES_QOS, calibration_qos, 100, solution)


def test_a_calibrated_disk_runs_the_solution_named():
    out = plan(SOLVED)
    a, b = out["devices"]
    assert a["qos"] == ISOLATION
    assert b["qos"] == ROLES_QOS            # no entry for that capacity: the kernel's class keeps the roles' QoS
    assert out["qos_sources"][WWID_A] == {"from": "solution", "solution": "isolation", "vrate": [80, 80],
                                          "probe_p99_ratio": 1.31}
    assert out["qos_sources"]["lab-nvme-b"] == {"from": "qos", "solution": None, "vrate": [10, 10000]}
    assert out["warnings"] == []
    assert plan(SOLVED, "bandwidth")["devices"][0]["qos"] == BANDWIDTH


@pytest.mark.parametrize("none", [None, "none", "", "None"])
def test_none_takes_the_roles_qos_capped(none):
    out = plan(SOLVED, none)
    assert out["devices"][0]["qos"] == dict(ROLES_QOS, max=100)
    assert out["qos_sources"][WWID_A]["from"] == "qos" and out["warnings"] == []


def test_an_entry_without_solutions_keeps_working_with_a_note():
    """A database calibrated before the solution phase: the roles' QoS, capped, and a warning saying how to measure."""
    out = plan(CAL)
    assert out["devices"][0]["qos"] == dict(ROLES_QOS, max=100)
    assert out["qos_sources"][WWID_A]["from"] == "qos"
    warning, = out["warnings"]
    assert "nvme0n1" in warning and "no measured QoS solutions" in warning and "playbooks/calibrate.yml" in warning
    assert "with max at most 100" in warning


def test_a_solution_the_entry_lacks_is_named_with_what_it_has():
    warning, = plan(SOLVED, "latency")["warnings"]
    assert "no 'latency' solution" in warning and "it has bandwidth, isolation" in warning
    # measured, and no level met the bound: said so
    unsolved = dict(SOLVED, solutions=dict(SOLVED["solutions"], isolation=None))
    out = plan(unsolved)
    assert out["devices"][0]["qos"] == dict(ROLES_QOS, max=100)
    assert "no measured vrate level kept the probe within its bound" in out["warnings"][0]
    broken = dict(SOLVED, solutions={"isolation": {"qos": {"rpct": 0}}})
    assert "no complete qos" in plan(broken)["warnings"][0]


def test_the_entrys_own_qos_asked_for_wins_over_a_solution():
    out = plan(SOLVED, "isolation", calibration_qos=True)
    assert out["devices"][0]["qos"] == dict(CAL["qos"], max=100)
    assert out["qos_sources"][WWID_A]["from"] == "calibration"


def test_a_solution_above_the_cap_is_capped():
    high = dict(SOLVED, solutions={"isolation": {"qos": dict(ISOLATION, min=150, max=150)}})
    assert plan(high)["devices"][0]["qos"] == dict(ISOLATION, min=100, max=100)


def test_qos_source_text():
    out = plan(SOLVED)
    # in selector order
    assert f.qos_source_text(out["qos_sources"]) == [
        "lab-nvme-b: the roles' QoS, vrate 10-10000%", "%s: the isolation solution, vrate 80%%" % WWID_A]
    assert f.qos_source_text(out["qos_sources"], "source") == ["the roles' QoS", "the isolation solution"]
    assert f.qos_source_text({"x": {"from": "calibration", "vrate": [60.5, 100]}}) == [
        "x: the calibration entry's QoS, vrate 60.5-100%"]
    assert f.qos_source_text({"x": {"from": "qos", "vrate": None}}) == ["x: the roles' QoS, the kernel's vrate bounds"]
    assert f.qos_source_text(None) == []
    with pytest.raises(AnsibleFilterError, match="give full or source"):
        f.qos_source_text({}, "short")
