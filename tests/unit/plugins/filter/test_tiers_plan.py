# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""baseline_plan's share for the rest of the host (issue 37): the host tier's slice and units, system.slice and
user.slice weights, the container runtime's units, the optional batch tier; bad variables refused by name."""

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f

# io_isolation_planned_disks and iocost_plan's result, as test_tenant_plan.py has them
DISKS = [{"device": "nvme.1b36-lab-a", "model": {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000,
                                                 "wbps": 1000000000, "wseqiops": 50000, "wrandiops": 50000}},
         {"device": "lab-nvme-b", "model": {"rbps": 875000000, "rseqiops": 35000, "rrandiops": 35000,
                                            "wbps": 582000000, "wseqiops": 32000, "wrandiops": 32000}}]
PLAN = {"devices": [{"device": "nvme.1b36-lab-a", "model": {"rbps": 2000000000}},
                    {"device": "lab-nvme-b", "model": {"ctrl": "auto"}}],
        "disks": DISKS, "sources": {}, "qos_sources": {}, "warnings": [], "uncalibrated": []}
BASELINE = {"io_baseline_blk_queue": {}, "io_baseline_nvme_queues": {}, "io_baseline_sysctls": {"vm.swappiness": 10}}
INFERENCE = {"inference_slice": "inference.slice", "inference_io_weight": 1000, "inference_memory_low": "20%",
             "inference_memory_min": 0, "inference_cpu_weight": 1000, "inference_io_latency_us": 0,
             "inference_io_prio_class": "", "inference_io_prio_groups": [], "inference_io_low": {},
             "inference_units": []}


def assert_identical(got, want, path="profile"):
    """Equal, with the same value types and the same key order at every level."""
    assert type(got) is type(want), "%s: %r, want %r" % (path, got, want)
    if isinstance(want, dict):
        assert list(got) == list(want), "%s: keys %s, want %s" % (path, list(got), list(want))
        for key in want:
            assert_identical(got[key], want[key], "%s.%s" % (path, key))
    else:
        assert got == want, "%s: %r, want %r" % (path, got, want)


DEFAULTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "io_baseline", "defaults", "main.yml")


def role_defaults():
    """The tier variables as roles/io_baseline/defaults/main.yml sets them."""
    with open(DEFAULTS) as handle:
        defaults = yaml.safe_load(handle)
    return dict((k, defaults[k]) for k in f.TIER_VARS)


def plan(**variables):
    return f.baseline_plan(None, PLAN, dict(BASELINE, **dict(role_defaults(), **variables)))


HOST_UNITS = ["ssh.service", "sshd.service", "systemd-journald.service", "containerd.service", "docker.service",
              "podman.service", "crio.service", "kubelet.service"]


def test_the_host_tier_is_off_by_default():
    got = plan()
    assert "hostcritical.slice" not in got["cgroups"] and "placement" not in got
    assert list(got["cgroups"]) == ["system.slice", "user.slice", "containerd.service", "docker.service",
                                    "podman.service", "crio.service"]


def test_the_defaults_plan_the_host_tier_the_weights_and_the_runtime():
    got = plan(io_baseline_host_tier=True)
    assert list(got) == ["iocost", "sysctl", "cgroups", "tiers", "placement"]
    assert got["tiers"] == ["hostcritical.slice", "system.slice", "user.slice", "containerd.service", "docker.service",
                            "podman.service", "crio.service"]
    assert_identical(got["cgroups"]["hostcritical.slice"], {
        "label": "host tier slice", "name": "hostcritical.slice", "create": True, "when_unsupported": "warn",
        "description": "Host-critical services (aiinfra.io_isolation host tier)",
        "io": {"weight": 500}, "cpu": {"weight": 500}, "memory": {"min": "128M"}})
    assert_identical(got["cgroups"]["system.slice"], {"label": "system slice", "name": "system.slice",
                                                      "when_unsupported": "warn", "io": {"weight": 50}})
    assert got["cgroups"]["user.slice"]["io"] == {"weight": 50}
    assert_identical(got["cgroups"]["docker.service"], {
        "label": "runtime docker.service", "name": "docker.service", "when_missing": "skip",
        "when_unsupported": "warn", "io": {"weight": 25}, "cpu": {"weight": 50}})
    assert "batch.slice" not in got["cgroups"]
    assert_identical(got["placement"], {"units": [
        {"label": "host tier units", "name": n, "slice": "hostcritical.slice", "allow_critical": True,
         "optional": True, "at_next_start": True} for n in HOST_UNITS], "exclusive": True})


def test_a_tenant_role_after_the_baseline_keeps_the_host_tier_and_its_units_win_in_the_module():
    got = f.inference_plan(plan(io_baseline_host_tier=True), dict(INFERENCE, inference_units=["docker.service"]), DISKS,
                           {"host": {"memory_stable_bytes": 8589934592}})
    labels = [e["label"] for e in got["placement"]["units"]]
    assert labels == ["host tier units"] * len(HOST_UNITS) + ["inference units"]
    assert list(got["cgroups"])[:3] == ["hostcritical.slice", "system.slice", "user.slice"]
    assert "inference.slice" in got["cgroups"]


def test_runtime_caps_are_a_share_of_each_disks_model_and_the_batch_tier_is_the_lowest():
    got = plan(io_baseline_runtime_io_max={"wbps": "50%"}, io_baseline_batch_tier=True,
               io_baseline_batch_units=["etl-*.service"], io_baseline_host_tier=False)
    assert got["cgroups"]["containerd.service"]["io"] == {"weight": 25, "max": {
        "nvme.1b36-lab-a": {"wbps": 500000000}, "lab-nvme-b": {"wbps": 291000000}}}
    assert "hostcritical.slice" not in got["cgroups"]
    assert_identical(got["cgroups"]["batch.slice"], {
        "label": "batch slice", "name": "batch.slice", "create": True, "when_unsupported": "warn",
        "description": "Batch and ETL work at the lowest weight (aiinfra.io_isolation batch tier)",
        "io": {"weight": 10}, "cpu": {"weight": 10}})
    assert_identical(got["placement"], {"units": [
        {"label": "batch units", "pattern": "etl-*.service", "slice": "batch.slice"}], "exclusive": True})


def test_without_the_tier_variables_baseline_plan_is_what_it_was():
    assert "cgroups" not in f.baseline_plan(None, PLAN, BASELINE)


def test_tiers_off_and_no_units_leave_no_placement_section():
    got = plan(io_baseline_host_tier=False)
    assert "placement" not in got and list(got["cgroups"])[:2] == ["system.slice", "user.slice"]


@pytest.mark.parametrize("variables, words", [
    ({"io_baseline_host_tier_units": ["sshd"]},
     r"io_baseline_host_tier_units: 'sshd' has no unit type: give the full name \(sshd\.service\)"),
    ({"io_baseline_host_tier_units": ["multi-user.target"]},
     r"io_baseline_host_tier_units: multi-user\.target is a target unit, which runs no processes"),
    ({"io_baseline_host_tier_units": "ssh.service"}, r"io_baseline_host_tier_units is 'ssh\.service' \(str\)"),
    ({"io_baseline_runtime_units": ["docker*.service"]},
     r"io_baseline_runtime_units: 'docker\*\.service' is a pattern: give service names here"),
    ({"io_baseline_host_tier_io_weight": 0}, r"io_baseline_host_tier_io_weight is 0: give a weight from 1 to 10000"),
    ({"io_baseline_system_io_weight": 20000}, r"io_baseline_system_io_weight is 20000: give a weight from 1"),
    ({"io_baseline_batch_cpu_weight": "lots"}, r"io_baseline_batch_cpu_weight is 'lots': give a weight"),
    ({"io_baseline_user_io_weight": True}, r"io_baseline_user_io_weight is True"),
    ({"io_baseline_host_tier": True, "io_baseline_host_tier_slice": "system.slice"},
     r"io_baseline_host_tier_slice is 'system\.slice': give a slice name of its own"),
    ({"io_baseline_host_tier": True, "io_baseline_host_tier_slice": "hostcritical"}, r"io_baseline_host_tier_slice is 'hostcritical'"),
    ({"io_baseline_host_tier": True, "io_baseline_batch_tier": True, "io_baseline_batch_slice": "hostcritical.slice"},
     r"io_baseline_batch_slice is hostcritical\.slice, the host tier's slice too"),
    ({"io_baseline_host_tier": "yes"}, r"io_baseline_host_tier is 'yes': give true or false"),
    ({"io_baseline_runtime_io_max": {"wbps": "150%"}}, r"io_baseline_runtime_io_max: io\.max cap wbps=150%"),
])
def test_bad_tier_variables_are_refused_by_name(variables, words):
    with pytest.raises(AnsibleFilterError, match=words):
        plan(**variables)


def test_some_but_not_all_tier_variables_is_an_error():
    with pytest.raises(AnsibleFilterError, match=r"baseline_plan: the role's variables lack io_baseline_host_tier_slice"):
        f.baseline_plan(None, PLAN, dict(BASELINE, io_baseline_host_tier=True))
