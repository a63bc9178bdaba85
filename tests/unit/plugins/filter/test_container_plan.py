# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tenant roles' <role>_container_runtimes in the host profile (the container_runtime section, machine.slice for
Podman), and verify.yml's judgement and summary of that section's result."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f
from test_tenant_plan import inference, training


def test_no_runtimes_no_section():
    assert "container_runtime" not in training(inference())
    assert "machine.slice" not in training(inference())["cgroups"]


def test_docker_for_training_podman_for_inference():
    got = training(inference(inference_container_runtimes=["podman"]), training_container_runtimes=["docker"])
    assert got["container_runtime"] == {
        "runtimes": [{"label": "inference containers", "name": "podman", "slice": "machine.slice"},
                     {"label": "training containers", "name": "docker", "slice": "training.slice"}],
        "tenant_slices": ["inference.slice", "training.slice"]}
    # Podman's machine.slice carries the inference tenant's settings
    machine = got["cgroups"]["machine.slice"]
    assert machine == dict(got["cgroups"]["inference.slice"], name="machine.slice", label="inference containers (podman)")
    # planning a role again replaces its own entries (and its machine.slice copy), keeps the other role's
    again = inference(got)
    assert again["container_runtime"]["runtimes"] == [
        {"label": "training containers", "name": "docker", "slice": "training.slice"}]
    assert "machine.slice" not in again["cgroups"]
    assert "container_runtime" not in training(again)


def test_every_tenant_slice_counts_whichever_role_lists_the_runtime():
    """Found in the lab: with only the training role listing docker, a Podman container started with
    --cgroup-parent=inference.slice was reported outside (inference planned first, before the section existed)."""
    got = training(inference(), training_container_runtimes=["docker"])
    assert got["container_runtime"]["tenant_slices"] == ["inference.slice", "training.slice"]
    got = inference(training(), inference_container_runtimes=["podman"])
    assert got["container_runtime"]["tenant_slices"] == ["inference.slice", "training.slice"]


def test_variables_without_runtimes_still_plan():
    """Playbooks that call the filters without the new variable keep working (it defaults to [])."""
    settings = dict((k, v) for k, v in __import__("test_tenant_plan").TRAINING.items())
    settings.pop("training_container_runtimes", None)
    assert "container_runtime" not in f.training_plan(None, settings, [], {"host": {"memory_stable_bytes": 2 ** 33}})


@pytest.mark.parametrize("value", ["docker", ["docker", "containerd"], [None]])
def test_bad_runtimes_name_the_variable(value):
    with pytest.raises(AnsibleFilterError, match=r"training_container_runtimes is .*: give a list of the runtimes "
                                                 r"that serve this tenant \(docker, podman\)"):
        training(training_container_runtimes=value)


SECTION = {"changed": False, "diff": {"before": {}, "after": {}}, "runtimes": {"docker": {}},
           "restart_required": [], "outside": []}


def test_verify_drift_takes_a_stale_daemon_and_containers_outside():
    clean = f.verify_drift({"container_runtime": SECTION})
    assert clean["drift"] == {}
    stale = dict(SECTION, restart_required=["docker.service"])
    outside = dict(SECTION, outside=[{"runtime": "podman", "id": "0a1b2c3d4e5f", "cgroup": "/machine.slice/libpod-x.scope",
                                      "expected": ["inference.slice", "training.slice"]}])
    assert list(f.verify_drift({"container_runtime": stale})["drift"]) == ["container_runtime"]
    assert list(f.verify_drift({"container_runtime": outside})["drift"]) == ["container_runtime"]
    assert f.drift_summary({"container_runtime": stale}) == [
        "container_runtime: docker.service runs with its old configuration (default cgroup parent) until it is "
        "restarted (io_isolation_restart_ok)"]
    assert f.drift_summary({"container_runtime": outside}) == [
        "container_runtime: podman container 0a1b2c3d4e5f runs in /machine.slice/libpod-x.scope, outside "
        "inference.slice and training.slice"]
