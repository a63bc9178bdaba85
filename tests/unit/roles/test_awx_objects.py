# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/awx_objects.yml with the real awx.awx modules against a stand-in of the AWX API
(tests/unit/awx_api.py): the modules' own argument validation and lookups run, the objects come out
as AWX would hold them (job templates with become, timeouts and surveys AWX accepts, the hourly
schedule, the workflow's edges), a second run changes nothing, and bad settings fail before the
first write."""

import json
import os
import re

import pytest

from awx_api import FakeAWX
from playbook import REPO, ansible_playbook

PLAYBOOK = os.path.join(REPO, "playbooks", "awx_objects.yml")
COLLECTIONS = os.pathsep.join(os.path.join(REPO, ".cache", d) for d in ("collections", "installed"))

pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(REPO, ".cache", "installed", "ansible_collections", "awx", "awx")),
    reason="awx.awx is not installed (make collections)")


def run(awx, tmp_path, *extra):
    key = tmp_path / "fleet_key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n")
    env = {"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "CONTROLLER_HOST": awx.url, "CONTROLLER_OAUTH_TOKEN": "t0ken",
           "CONTROLLER_VERIFY_SSL": "false"}
    return ansible_playbook("-i", "localhost,", PLAYBOOK, "-e", "awx_project_url=https://git.example.com/io.git",
                            "-e", "awx_ee_image=registry.example.com/aiinfra-io-isolation-ee:0.1.0",
                            "-e", "awx_machine_ssh_key_file=%s" % key, *extra, env=env, timeout=600)


def recap(proc):
    found = re.search(r"localhost\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", proc.stdout)
    assert found, proc.stdout[-3000:] + proc.stderr[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, found.groups())))


@pytest.fixture(scope="module")
def created(tmp_path_factory):
    """The objects after a first and a second run."""
    tmp = tmp_path_factory.mktemp("awx")
    with FakeAWX() as awx:
        first = run(awx, tmp, "-e", "awx_job_slice_count=4")
        writes = len(awx.store.requests)
        second = run(awx, tmp, "-e", "awx_job_slice_count=4")
        yield awx, first, second, writes


def test_first_run_creates_and_second_changes_nothing(created):
    awx, first, second, writes = created
    assert first.returncode == 0, first.stdout[-4000:]
    assert recap(first)["changed"] > 0 and writes > 0
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second)["changed"] == 0, second.stdout[-4000:]
    assert len(awx.store.requests) == writes, awx.store.requests[writes:]


def test_project_ee_inventory_groups_and_credential(created):
    awx = created[0]
    ee = awx.named("execution_environments", "aiinfra.io_isolation EE")
    assert ee["image"] == "registry.example.com/aiinfra-io-isolation-ee:0.1.0"
    project = awx.named("projects", "aiinfra.io_isolation")
    assert (project["scm_type"], project["scm_url"], project["default_environment"]) == \
        ("git", "https://git.example.com/io.git", ee["id"])
    inventory = awx.named("inventories", "aiinfra.io_isolation")
    groups = [g for g in awx.store.listing("groups") if g["inventory"] == inventory["id"]]
    assert sorted(g["name"] for g in groups) == ["calibration", "inference", "training"]
    cred = awx.named("credentials", "aiinfra.io_isolation hosts")
    assert cred["credential_type"] == awx.named("credential_types", "Machine")["id"]
    assert cred["inputs"]["become_method"] == "sudo" and cred["inputs"]["username"] == "ansible"
    assert "not-a-real-key" in cred["inputs"]["ssh_key_data"]


def test_job_templates_run_the_playbooks_with_become_and_sized_timeouts(created):
    awx = created[0]
    cred = awx.named("credentials", "aiinfra.io_isolation hosts")
    # margin 3 x: calibrate 2 disks x 1 repeat x 326 s (164 s and the solution phase's 162 s) + 16 s; site 4 batches x 343 s; verify 4 x 22 s;
    # boost the longest window 14400 s + the 60 s grace; purge 20 s
    expected = {"calibrate": 3 * (2 * 326 + 16), "site": 3 * 4 * 343, "verify": 3 * 4 * 22,
                "training_boost": 3 * (14400 + 60), "purge": 3 * 20}
    for key, timeout in expected.items():
        jt = awx.named("job_templates", "aiinfra.io_isolation %s" % key)
        assert os.path.isfile(os.path.join(REPO, jt["playbook"])), jt["playbook"]
        assert jt["playbook"] == "playbooks/%s.yml" % key
        assert jt["become_enabled"] is True and jt["timeout"] == timeout, (key, jt["timeout"])
        assert jt["ask_limit_on_launch"] is True
        # the fleet-wide jobs sliced across execution nodes (awx_job_slice_count), the others one job
        assert jt["job_slice_count"] == (4 if key in ("site", "verify") else 1), (key, jt["job_slice_count"])
        assert awx.store.subs[("job_templates", jt["id"], "credentials")] == [cred["id"]]


def survey_of(awx, key):
    jt = awx.named("job_templates", "aiinfra.io_isolation %s" % key)
    return jt["survey_enabled"], awx.store.surveys.get(("job_templates", jt["id"]), {})


def test_surveys_offer_what_the_specs_declare(created):
    awx = created[0]
    enabled, site = survey_of(awx, "site")
    assert enabled and [q["variable"] for q in site["spec"]] == ["io_baseline_reboot_ok", "io_baseline_require_calibration"]
    assert all(q["type"] == "multiplechoice" and q["choices"] == ["true", "false"] for q in site["spec"])
    enabled, boost = survey_of(awx, "training_boost")
    seconds, grace = boost["spec"]
    assert (seconds["variable"], seconds["type"], seconds["default"], seconds["min"], seconds["max"]) == \
        ("training_boost_seconds", "integer", 600, 1, 14400)
    assert (grace["variable"], grace["default"]) == ("training_boost_grace_seconds", 60)
    enabled, calibrate = survey_of(awx, "calibrate")
    assert [q["variable"] for q in calibrate["spec"]] == ["calibration_repeats", "calibration_measure_qos",
                                                          "calibration_qos_seconds"]
    for key in ("verify", "purge"):
        assert survey_of(awx, key) == (False, {})


def test_hourly_verify_schedule_and_the_workflow(created):
    awx = created[0]
    schedule = awx.named("schedules", "aiinfra.io_isolation verify hourly")
    assert schedule["unified_job_template"] == awx.named("job_templates", "aiinfra.io_isolation verify")["id"]
    assert "RRULE:FREQ=HOURLY;INTERVAL=1" in schedule["rrule"] and schedule["enabled"] is True
    wf = awx.named("workflow_job_templates", "aiinfra.io_isolation calibrate, site, verify")
    nodes = dict((n["identifier"], n) for n in awx.store.listing("workflow_job_template_nodes")
                 if n["workflow_job_template"] == wf["id"])
    assert sorted(nodes) == ["calibrate", "site", "verify"]
    for identifier in nodes:
        assert nodes[identifier]["unified_job_template"] == \
            awx.named("job_templates", "aiinfra.io_isolation %s" % identifier)["id"]
    edges = dict((i, awx.store.subs.get(("workflow_job_template_nodes", n["id"], "success_nodes"), []))
                 for i, n in nodes.items())
    assert edges == {"calibrate": [nodes["site"]["id"]], "site": [nodes["verify"]["id"]], "verify": []}
    # without awx_fleet_report_dir: no report job, verify as it was
    assert not [t for t in awx.store.listing("job_templates") if t["name"].endswith("fleet_report")]
    assert not awx.named("job_templates", "aiinfra.io_isolation verify").get("extra_vars")


def test_the_fleet_report_follows_every_verify_its_slices_merged(tmp_path):
    """With awx_fleet_report_dir: verify jobs publish their hosts' records, a report job after verify (whatever it
    found) writes the one report, and the hourly verify is a workflow that ends with it."""
    with FakeAWX() as awx:
        proc = run(awx, tmp_path, "-e", "awx_job_slice_count=4", "-e", "awx_fleet_report_dir=/srv/fleet-reports")
        assert proc.returncode == 0, proc.stdout[-4000:]
        report = awx.named("job_templates", "aiinfra.io_isolation fleet_report")
        assert report["playbook"] == "playbooks/fleet_report.yml" and report["job_slice_count"] == 1
        assert json.loads(report["extra_vars"]) == {"io_isolation_fleet_report_dir": "/srv/fleet-reports"}
        verify = awx.named("job_templates", "aiinfra.io_isolation verify")
        assert verify["job_slice_count"] == 4 and "io_isolation_fleet_report_dir" in json.loads(verify["extra_vars"])
        for name, first in (("calibrate, site, verify", "calibrate"), ("verify, fleet report", "verify")):
            wf = awx.named("workflow_job_templates", "aiinfra.io_isolation " + name)
            nodes = dict((n["identifier"], n) for n in awx.store.listing("workflow_job_template_nodes")
                         if n["workflow_job_template"] == wf["id"])
            assert first in nodes and nodes["report"]["unified_job_template"] == report["id"], name
            assert awx.store.subs.get(("workflow_job_template_nodes", nodes["verify"]["id"], "always_nodes")) == \
                [nodes["report"]["id"]], name
        schedule = awx.named("schedules", "aiinfra.io_isolation verify hourly")
        assert schedule["unified_job_template"] == \
            awx.named("workflow_job_templates", "aiinfra.io_isolation verify, fleet report")["id"]


@pytest.mark.parametrize("extra, message", [
    (["-e", "awx_project_url="], "set awx_project_url"),
    (["-e", '{"awx_surveys": {"site": ["training_io_max"], "calibrate": ["calibration_repeats"],'
            ' "training_boost": ["training_boost_seconds"]}}'],
     "training_io_max is a dict: a survey cannot offer it; set it in the inventory"),
    (["-e", '{"awx_surveys": {"site": ["io_isolation_serial"], "calibrate": ["calibration_repeats"],'
            ' "training_boost": ["training_boost_seconds"]}}'],
     "io_isolation_serial: not an option"),
    (["-e", "awx_job_slice_count=0"], "site: expected duration 1372, job slices 0 (give a whole number, at least 1)"),
])
def test_bad_settings_fail_before_any_write(tmp_path, extra, message):
    with FakeAWX() as awx:
        proc = run(awx, tmp_path, *extra)
        assert proc.returncode != 0
        assert message in proc.stdout, proc.stdout[-3000:]
        assert awx.store.requests == []
