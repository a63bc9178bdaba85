# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbooks as AWX runs them: ansible-runner (the engine AWX's jobs use) with a private data
directory per job, the project checkout, the collection installed from its built artifact on a path
of its own (as in the execution environment), the inventory's groups and variables, extra vars from
survey answers and earlier nodes' artifacts, become, and job timeouts. Asserted on the job events:
a calibrate job publishes its entries as the artifact, a site job given only that artifact applies
the calibrated model, verify says OK and then names the drift, and a training_boost job killed by
its timeout leaves a window that the host ends by itself.

Runs after test_calibration.py (file order): the site job replaces the model that file checks.
MOLECULE_INVENTORY_FILE may also be a `tests/lab/lab.py inventory` file of a fresh debian13 VM."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import testinfra.utils.ansible_runner
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.dirname(sys.executable)
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")
CONNECTION = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file",
              "ansible_private_key_file", "ansible_python_interpreter", "ansible_ssh_common_args", "ansible_pipelining")
# What the platform team keeps in the inventory's group variables (docs/awx.md): the calibration
# settings of this scenario (short runs: the lab proves behaviour) on the blank disk, the training caps.
GROUP_VARS = {
    "calibration": {"calibration_targets": [{"device": "lab-nvme-b", "destructive": True}],
                    "calibration_stop_rule": {"ramp_seconds": 1, "min_seconds": 3, "max_seconds": 6, "passes": 1},
                    "calibration_big_block_size": "16M", "calibration_solutions": {"measure": False}},
    "training": {"training_io_max": {"wbps": "90%", "riops": "50%"}},
}


def _hostvars(name):
    """The guest's connection variables, from molecule's inventory (or a lab.py one)."""
    with open(INVENTORY) as handle:
        inv = yaml.safe_load(handle)
    found = {}

    def walk(group):
        for host, hv in ((group or {}).get("hosts") or {}).items():
            if host == name:
                found.update(hv or {})
        for child in ((group or {}).get("children") or {}).values():
            walk(child)
    for group in inv.values():
        walk(group)
    return dict((k, v) for k, v in found.items() if k in CONNECTION)


@pytest.fixture(scope="module")
def awx(tmp_path_factory):
    """What every job shares: the collection installed from its artifact, as the EE holds it."""
    base = tmp_path_factory.mktemp("awx")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(base), REPO],
                   check=True, capture_output=True)
    (artifact,) = glob.glob(str(base / "aiinfra-io_isolation-*.tar.gz"))
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "-p", str(base / "ee"), artifact],
                   check=True, capture_output=True, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(base / "ee")))
    awx = {"base": base, "collections": str(base / "ee"), "jobs": []}
    yield awx
    for name, playbook, status, rc, seconds in awx["jobs"]:
        print("AWX-JOB %s %s %s rc=%d %.1f s" % (name, playbook, status, rc, seconds))
    shutil.rmtree(str(base), ignore_errors=True)


def job(awx, name, playbook, extravars=None, timeout=0):
    """One job the way AWX launches it; returns (status, rc, events, seconds)."""
    pdd = awx["base"] / name
    (pdd / "env").mkdir(parents=True)
    (pdd / "inventory").mkdir()
    os.symlink(REPO, str(pdd / "project"))      # the project checkout
    host = hosts[0]
    inventory = {"all": {"children": dict(
        (group, {"hosts": {host: _hostvars(host)}, "vars": GROUP_VARS.get(group, {})})
        for group in ("calibration", "inference", "training"))}}
    (pdd / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (pdd / "env" / "extravars").write_text(json.dumps(extravars or {}))
    envvars = {"ANSIBLE_COLLECTIONS_PATH": awx["collections"], "ANSIBLE_HOST_KEY_CHECKING": "False"}
    (pdd / "env" / "envvars").write_text(json.dumps(envvars))
    # the machine credential's privilege escalation (the lab's guests have su, not sudo)
    (pdd / "env" / "cmdline").write_text("--become --become-method su")
    (pdd / "env" / "settings").write_text(json.dumps({"job_timeout": timeout, "suppress_ansible_output": True}))
    # a clean environment, as in an EE: nothing of molecule's or this test's ANSIBLE_* settings
    env = {"PATH": BIN + ":/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    start = time.monotonic()
    subprocess.run([os.path.join(BIN, "ansible-runner"), "run", str(pdd), "-p", playbook, "--ident", name],
                   env=env, capture_output=True, check=False, timeout=1800)
    seconds = round(time.monotonic() - start, 1)
    art = pdd / "artifacts" / name
    status = (art / "status").read_text().strip()
    rc = int((art / "rc").read_text().strip())
    events = []
    for path in sorted(glob.glob(str(art / "job_events" / "*.json")),
                       key=lambda p: int(os.path.basename(p).split("-")[0])):
        with open(path) as handle:
            events.append(json.load(handle))
    awx["jobs"].append((name, playbook, status, rc, seconds))
    print("job %s (%s): status %s, rc %d, %.1f s, %d events" % (name, playbook, status, rc, seconds, len(events)))
    return status, rc, events, seconds


def results(events, kind, task=None):
    return [e["event_data"] for e in events if e["event"] == kind
            and (task is None or re.search(task, e["event_data"].get("task", "")))]


def messages(events):
    found = []
    for kind in ("runner_on_ok", "runner_item_on_ok", "runner_on_failed"):
        found += [d["res"].get("msg", "") for d in results(events, kind) if isinstance(d.get("res"), dict)]
    return [m for m in found if isinstance(m, str)]


def stats(events):
    (last,) = [e["event_data"] for e in events if e["event"] == "playbook_on_stats"]
    return last


@pytest.fixture(scope="module")
def calibrated(awx):
    """A calibrate job (survey answers as AWX passes them), then its artifact."""
    status, rc, events, seconds = job(awx, "calibrate", "playbooks/calibrate.yml",
                                      {"calibration_repeats": 1, "calibration_measure_qos": "false",
                                       "calibration_qos_seconds": 3})
    return status, rc, events, seconds


def test_calibrate_job_publishes_its_entries_as_the_artifact(calibrated):
    status, rc, events, seconds = calibrated
    assert (status, rc) == ("successful", 0), messages(events)
    entries = stats(events)["artifact_data"]["io_isolation_calibration_entries"]
    assert len(entries) == 1 and entries[0]["iocost_model"]["rbps"] > 0, entries
    said = " ".join(messages(events))
    assert re.search(r"Calibrating 1 target\(s\) x 1 repeat\(s\) on .*: lab-nvme-b; up to \d+ s per run", said), said
    measured = re.search(r"lab-nvme-b run 1: ([0-9.]+) s", said)
    assert measured, said
    # what a calibrate job costs besides its measuring runs (calibration_overhead in vars/awx_objects.yml)
    print("calibrate job: %.1f s, of which measuring %s s" % (seconds, measured.group(1)))


@pytest.fixture(scope="module")
def site(awx, calibrated):
    artifact = stats(calibrated[2])["artifact_data"]
    answers = {"io_baseline_require_calibration": "true", "io_baseline_reboot_ok": "false"}
    return artifact, job(awx, "site", "playbooks/site.yml", dict(artifact, **answers))


def test_site_job_given_only_the_artifact_applies_the_calibrated_model(host, site):
    artifact, (status, rc, events, seconds) = site
    assert (status, rc) == ("successful", 0), messages(events)
    assert stats(events)["changed"], stats(events)
    want = artifact["io_isolation_calibration_entries"][0]["iocost_model"]
    lines = [line for line in host.file("/sys/fs/cgroup/io.cost.model").content_string.splitlines()
             if line.startswith("259:")]
    assert len(lines) == 2, lines
    for line in lines:
        fields = dict(token.split("=", 1) for token in line.split()[1:])
        assert fields["ctrl"] == "user" and dict((k, int(fields[k])) for k in want) == want, line


def test_verify_job_says_ok_then_names_the_drift(awx, host, site):
    # the workflow's verify node gets the calibrate node's artifact too (a scheduled verify needs the
    # entries from a persistent io_isolation_calibration_dir instead: without them it reports the model)
    artifact = site[0]
    status, rc, events, _seconds = job(awx, "verify-ok", "playbooks/verify.yml", artifact)
    assert (status, rc) == ("successful", 0), messages(events)
    assert any(m.startswith("OK: ") and "holds its I/O isolation settings" in m for m in messages(events)), messages(events)
    before = host.check_output("sysctl -n vm.swappiness")
    host.run_test("sysctl -qw vm.swappiness=61")
    try:
        status, rc, events, _seconds = job(awx, "verify-drift", "playbooks/verify.yml", artifact)
    finally:
        host.run_test("sysctl -qw vm.swappiness=%s" % before)
    assert status == "failed" and rc != 0
    (failed,) = results(events, "runner_on_failed")
    assert failed["res"]["msg"].startswith("DRIFT on ") and "vm.swappiness" in failed["res"]["msg"], failed["res"]
    assert stats(events)["failures"], stats(events)


def _caps(host):
    """(guest clock, whether training.slice's io.max caps any disk)."""
    out = host.check_output("date +%s; cat /sys/fs/cgroup/training.slice/io.max").splitlines()
    capped = any(re.search(r"(wbps|riops)=\d", line) for line in out[1:])
    return int(out[0]), capped


def test_boost_job_killed_by_its_timeout_is_ended_by_the_host(awx, host, site):
    assert _caps(host)[1], "training.slice has no caps to lift"
    # The kill must fall inside the window, after the job lifted the caps: on a loaded CI host the job took more
    # than 30 s to reach the lift (seen once), so 50 s, with a 60 s window.
    status, rc, events, seconds = job(awx, "boost-killed", "playbooks/training_boost.yml",
                                      {"training_boost_seconds": 60, "training_boost_grace_seconds": 5}, timeout=50)
    assert status == "timeout" and rc == 254, (status, rc)
    (lift,) = results(events, "runner_on_ok", "Lift the io.max caps")
    assert not results(events, "runner_on_ok", "End the window"), "the job's own end ran: not a kill"
    said = " ".join(messages(events))
    assert "if the job is cancelled, killed by its timeout or loses the host, the host ends it by itself at" in said
    end = lift["res"]["window_end"]
    end_epoch = int(host.check_output("date -u -d %s +%%s" % end.replace("T", "\\ ").rstrip("Z")))
    now, capped = _caps(host)
    assert not capped and now < end_epoch, "the caps are not lifted after the kill"
    assert host.run("systemctl is-active aiinfra-io-isolation-boost-training.timer").stdout.strip() == "active"
    while not capped and now < end_epoch + 60:
        time.sleep(1)
        now, capped = _caps(host)
    print("boost kill: job ended after %.1f s (status %s, rc %d); window end %s; caps back %d s after it"
          % (seconds, status, rc, end, now - end_epoch))
    assert capped, "the caps were not back 60 s after the window's end"
    assert now - end_epoch <= 30, "the caps came back %d s late" % (now - end_epoch)
    status, rc, events, _seconds = job(awx, "verify-after-boost", "playbooks/verify.yml", site[0])
    assert (status, rc) == ("successful", 0), messages(events)


def test_job_timings_fit_the_figures_the_job_templates_timeouts_rest_on(awx, calibrated, site):
    """A calibrate and a site job on one host take no longer than awx_timeout_margin times the figures of
    playbooks/vars/awx_objects.yml that their templates' timeouts are sized from (one host: one batch), and
    so does every verify and purge job this module ran before this test (none if it runs first)."""
    with open(os.path.join(REPO, "playbooks", "vars", "awx_objects.yml")) as handle:
        figures = yaml.safe_load(handle)
    margin, measured = figures["awx_timeout_margin"], figures["awx_measured_seconds"]
    limits = {"playbooks/site.yml": margin * measured["site_batch"],
              "playbooks/verify.yml": margin * measured["verify_batch"],
              "playbooks/purge.yml": margin * measured["purge"]}
    jobs = awx["jobs"]
    assert {"calibrate", "site"} <= set(name for name, _p, _s, _rc, _t in jobs), jobs
    for name, playbook, status, rc, seconds in jobs:
        if playbook in limits:
            assert seconds <= limits[playbook], "%s (%s) took %.1f s, the template's figure allows %d s" % (
                name, playbook, seconds, limits[playbook])
    # a calibrate job's time besides its measuring runs is the figure calibration_overhead
    seconds = calibrated[3]
    measuring = sum(float(m) for m in re.findall(r"lab-nvme-b run \d+: ([0-9.]+) s", " ".join(messages(calibrated[2]))))
    assert measuring > 0, messages(calibrated[2])
    assert seconds - measuring <= margin * measured["calibration_overhead"], (
        "calibrate job: %.1f s, of which measuring %.1f s; the overhead figure allows %d s"
        % (seconds, measuring, margin * measured["calibration_overhead"]))
