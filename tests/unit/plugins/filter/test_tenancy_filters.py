# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tenancy report in the roles: the request apply.yml sends (tenancy_request) and its findings in verify.yml's
judgement (tenancy_findings, verify_drift, drift_summary)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f

SHARE = {"io_baseline_io_share_seconds": "2", "io_baseline_io_share_outside_max_pct": 50,
         "io_baseline_io_share_min_iops": 20, "io_baseline_io_share_min_bytes_per_second": "1048576"}
PROFILE = {
    "iocost": {"devices": [{"device": "eui.0000000000000001", "model": {"ctrl": "auto"}}]},
    "inference": {"slice": "inference.slice", "groups": []},
    "training": {"slice": "training.slice"},
    "placement": {"exclusive": True, "units": [
        {"label": "inference units", "name": "vllm.service", "slice": "inference.slice"},
        {"label": "inference units", "pattern": "embed-*.service", "slice": "inference.slice"},
        {"label": "training units", "name": "etl.service", "slice": "training.slice"}]},
}
OUTSIDE = ("service vllm.service (listed for inference.slice as vllm.service) runs in /system.slice/vllm.service, "
           "outside its slice")
EMPTY = "inference.slice lists 2 workload(s) (vllm.service, embed-*.service) and no process runs in it"
DISK = ("nvme0n1: 100% of its bytes and 100% of its I/Os over 2 s were charged outside the tenant slices (more than "
        "50%; most to system.slice)")


def test_the_request_names_the_tenant_slices_their_services_and_the_managed_disks():
    assert f.tenancy_request(PROFILE, SHARE) == {
        "slices": [{"name": "inference.slice",
                    "workloads": [{"kind": "service", "name": "vllm.service"}, {"kind": "service", "pattern": "embed-*.service"}]},
                   {"name": "training.slice", "workloads": [{"kind": "service", "name": "etl.service"}]}],
        "devices": ["eui.0000000000000001"], "interval": 2.0, "outside_max_pct": 50.0, "min_iops": 20.0,
        "min_bytes_per_second": 1048576}


def test_the_request_of_one_tenant_without_units_and_of_no_tenant():
    one = {"inference": {"slice": "inference.slice"}}
    assert f.tenancy_request(one, SHARE)["slices"] == [{"name": "inference.slice", "workloads": []}]
    assert f.tenancy_request(one, SHARE)["devices"] == []
    assert f.tenancy_request({}, SHARE) == {} and f.tenancy_request(None, SHARE) == {}


@pytest.mark.parametrize("name, value, message", [
    ("io_baseline_io_share_seconds", 61, "io_baseline_io_share_seconds is 61: give a number from 0 to 60"),
    ("io_baseline_io_share_seconds", "two", "io_baseline_io_share_seconds is 'two'"),
    ("io_baseline_io_share_outside_max_pct", 100, "io_baseline_io_share_outside_max_pct is 100: give a number from 0 to 99.9"),
    ("io_baseline_io_share_min_iops", -1, "io_baseline_io_share_min_iops is -1: give a number from 0 up"),
    ("io_baseline_io_share_min_bytes_per_second", True, "io_baseline_io_share_min_bytes_per_second is True"),
])
def test_a_bad_variable_is_named(name, value, message):
    with pytest.raises(AnsibleFilterError) as e:
        f.tenancy_request(PROFILE, dict(SHARE, **{name: value}))
    assert message in str(e.value)


def test_a_missing_variable_is_named():
    with pytest.raises(AnsibleFilterError) as e:
        f.tenancy_request(PROFILE, {})
    assert "io_baseline_io_share_seconds" in str(e.value)


def test_findings_leave_out_what_placement_reports_already():
    tenancy = {"drift": [OUTSIDE, EMPTY, DISK]}
    assert f.tenancy_findings(tenancy) == [OUTSIDE, EMPTY, DISK]
    assert f.tenancy_findings(tenancy, {"restart_required": ["vllm.service"]}) == [EMPTY, DISK]
    # a service whose name starts like another's is not taken for it
    assert f.tenancy_findings(tenancy, {"restart_required": ["vllm"]}) == [OUTSIDE, EMPTY, DISK]
    assert f.tenancy_findings({"changed": False, "skipped": True}) == [] and f.tenancy_findings(None) == []


def test_verify_reports_the_findings_as_drift_once_each():
    same = {"changed": False}
    tenancy = {"slices": {}, "disks": {}, "drift": [EMPTY, DISK]}
    got = f.verify_drift({"sysctl": same, "tenancy": tenancy})
    assert got["drift"] == {"tenancy": {"changed": False, "findings": [EMPTY, DISK]}}
    assert f.drift_summary(got["drift"]) == ["tenancy: " + EMPTY, "tenancy: " + DISK]
    # no findings, or the skipped result of a play without tenant slices: no drift
    assert f.verify_drift({"sysctl": same, "tenancy": dict(tenancy, drift=[])})["drift"] == {}
    assert f.verify_drift({"tenancy": {"changed": False, "skipped": True}})["drift"] == {}
    # a service placement lists as restart_required is said once, by placement
    placed = {"changed": False, "restart_required": ["vllm.service"],
              "units": {"vllm.service": {"slice": "inference.slice", "cgroup": "/system.slice/vllm.service"}}}
    got = f.verify_drift({"placement": placed, "tenancy": dict(tenancy, drift=[OUTSIDE, EMPTY])})
    assert f.drift_summary(got["drift"]) == [
        "placement: vllm.service runs in /system.slice/vllm.service, outside inference.slice, until it is restarted "
        "(io_isolation_restart_ok)",
        "tenancy: " + EMPTY]
