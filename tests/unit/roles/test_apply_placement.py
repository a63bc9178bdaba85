# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""io_baseline's apply: the placement section the host_profile calls get - the tenants' units with the restart
opt-in (io_baseline_restart_ok, from io_isolation_restart_ok) as its restart, and none at all without units. The
expression is taken from tasks/apply.yml and rendered on the controller (nothing runs on any host)."""

import json
import os

import pytest
import yaml

from playbook import REPO, ansible_playbook, debug_out

APPLY = os.path.join(REPO, "roles", "io_baseline", "tasks", "apply.yml")
DEFAULTS = os.path.join(REPO, "roles", "io_baseline", "defaults", "main.yml")
UNITS = {"units": [{"label": "inference units", "name": "vllm.service", "slice": "inference.slice",
                    "allow_critical": True}], "exclusive": True}


def profile_calls():
    return [t for t in yaml.safe_load(open(APPLY)) if "aiinfra.io_isolation.host_profile" in t]


def test_both_profile_calls_pass_the_same_placement():
    calls = profile_calls()
    assert len(calls) == 2
    assert all(c["aiinfra.io_isolation.host_profile"]["placement"] == calls[0]["aiinfra.io_isolation.host_profile"][
        "placement"] and c["vars"] == calls[0]["vars"] for c in calls)


@pytest.mark.parametrize("profile, extra, want", [
    ({"placement": UNITS}, {}, dict(UNITS, restart=False)),
    ({"placement": UNITS}, {"io_isolation_restart_ok": True}, dict(UNITS, restart=True)),
    ({"placement": UNITS}, {"io_isolation_restart_ok": True, "io_baseline_restart_ok": False}, dict(UNITS, restart=False)),
    ({"cgroups": {}}, {"io_isolation_restart_ok": True}, {}),
], ids=["default", "inventory-wide opt-in", "the role's own says no", "no units"])
def test_the_placement_section_takes_the_restart_opt_in(tmp_path, profile, extra, want):
    expression = profile_calls()[0]["vars"]["__io_baseline_placement"]
    default = yaml.safe_load(open(DEFAULTS))["io_baseline_restart_ok"]
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"io_baseline_restart_ok": extra.get("io_baseline_restart_ok", default),
                      "__io_baseline_placement": expression},
             "tasks": [{"ansible.builtin.debug": {"msg": "OUT={{ __io_baseline_placement | to_json }}"}}]}]
    (tmp_path / "pb.yml").write_text(yaml.safe_dump(play))
    given = dict((k, v) for k, v in extra.items() if k != "io_baseline_restart_ok")
    given["io_isolation_profile"] = profile
    proc = ansible_playbook("-i", "localhost,", "-c", "local", tmp_path / "pb.yml", "-e", json.dumps(given))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert debug_out(proc) == want


@pytest.mark.parametrize("profile, extra, want", [
    ({"inference": {"slice": "inference.slice"}, "placement": UNITS,
      "iocost": {"devices": [{"device": "lab-nvme-a", "model": {"ctrl": "auto"}}]}}, {},
     {"slices": [{"name": "inference.slice", "workloads": [{"kind": "service", "name": "vllm.service"}]}],
      "devices": ["lab-nvme-a"], "interval": 2.0, "outside_max_pct": 50.0, "min_iops": 20.0,
      "min_bytes_per_second": 1048576}),
    ({"training": {"slice": "training.slice"}}, {"io_baseline_io_share_seconds": 0},
     {"slices": [{"name": "training.slice", "workloads": []}], "devices": [], "interval": 0.0, "outside_max_pct": 50.0,
      "min_iops": 20.0, "min_bytes_per_second": 1048576}),
    ({"cgroups": {}}, {}, {}),
], ids=["the tenants' units and the managed disks", "no interval", "no tenant slice"])
def test_the_tenancy_report_is_asked_for_the_tenant_slices_with_the_roles_thresholds(tmp_path, profile, extra, want):
    call_vars = profile_calls()[0]["vars"]
    defaults = yaml.safe_load(open(DEFAULTS))
    play_vars = dict((k, extra.get(k, defaults[k])) for k in defaults if k.startswith("io_baseline_io_share_"))
    play_vars.update(__io_baseline_share=call_vars["__io_baseline_share"],
                     __io_baseline_tenancy=call_vars["__io_baseline_tenancy"])
    play = [{"hosts": "localhost", "gather_facts": False, "vars": play_vars,
             "tasks": [{"ansible.builtin.debug": {"msg": "OUT={{ __io_baseline_tenancy | to_json }}"}}]}]
    (tmp_path / "pb.yml").write_text(yaml.safe_dump(play))
    proc = ansible_playbook("-i", "localhost,", "-c", "local", tmp_path / "pb.yml", "-e",
                            json.dumps({"io_isolation_profile": profile}))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert debug_out(proc) == want
