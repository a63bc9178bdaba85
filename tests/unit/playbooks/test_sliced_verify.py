# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A sliced verify as AWX runs one, without AWX and without VMs: the inventory split into slices the way AWX splits
it, each slice a job of ansible-runner (the engine of AWX's jobs: a private data directory, extra vars, the job's
events and its set_stats artifact) running playbooks/verify.yml with the fleet report on, the slices' artifacts
merged the way AWX merges them for the next workflow node, and that node's job (playbooks/fleet_report.yml) writing
one report for the whole inventory. The hosts are benchmarks/fleet's synthetic ones (recorded io_facts, answered by
its fleet_replay connection): two drifted, one unreachable, one whose disk model is markup.

The single-run report of the same fleet (verify.yml unsliced) must equal the merged one, host for host."""

import html
import json
import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import awx_jobs  # noqa: E402  pylint: disable=wrong-import-position
from awx_jobs import artifact_data, awx_slices, hosts_of  # noqa: E402  pylint: disable=wrong-import-position
from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

pytest.importorskip("ansible_runner")
bench = load("fleet", "bench")

HOSTS, SLICES, DRIFT_EVERY = 9, 3, 4          # drifted: h000004, h000008
UNREACHABLE = "h000006"
HOSTILE = "h000005"
HOSTILE_MODEL = '<script>alert("s")</script><img src=x onerror=alert(1)>&'


def job(base, fleet, ident, playbook, inventory, extravars):
    """A job of the fleet: its hosts' two module executions answered by benchmarks/fleet's connection."""
    return awx_jobs.run_job(base, ident, playbook, inventory, extravars, timeout=1200, envvars={
        "FLEET_DIR": fleet, "ANSIBLE_FORKS": "5",
        "ANSIBLE_CONNECTION_PLUGINS": os.path.join(REPO, "benchmarks", "fleet", "connection_plugins")})


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    if not os.path.exists(os.path.join(awx_jobs.BIN, "ansible-playbook")):
        pytest.skip("no ansible-playbook beside this Python")
    base = str(tmp_path_factory.mktemp("sliced"))
    fleet = os.path.join(base, "fleet")
    bench.build_fleet(fleet, HOSTS, 10, drift_every=DRIFT_EVERY)
    path = os.path.join(fleet, "hosts", UNREACHABLE + ".json")
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(record, unreachable=True), f)
    path = os.path.join(fleet, "hosts", HOSTILE + ".json")
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    first = sorted(record["io_facts"]["ansible_facts"]["io_isolation"]["devices"])[0]
    record["io_facts"]["ansible_facts"]["io_isolation"]["devices"][first]["identity"]["model"] = HOSTILE_MODEL
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)
    with open(os.path.join(fleet, "inventory.yml"), encoding="utf-8") as f:
        inventory = yaml.safe_load(f)
    # the jobs' inventories are in their private data directories, not beside the fleet's database: named, as a
    # fleet under AWX names a persistent one
    inventory["all"]["vars"]["io_baseline_calibration_dir"] = os.path.join(fleet, "calibration-db")
    names = awx_jobs.inventory_hosts(inventory)
    out = {"base": base, "fleet": fleet, "inventory": inventory, "names": names, "slices": awx_slices(names, SLICES),
           "jobs": []}
    # the slices, one job each; AWX passes every job its own awx_job_id
    for number, hosts in enumerate(out["slices"], 1):
        runner = job(base, fleet, "slice%d" % number, "playbooks/verify.yml", awx_jobs.slice_inventory(inventory, hosts),
                     {"awx_job_id": 100 + number, "io_isolation_fleet_report_dir": os.path.join(base, "slices")})
        out["jobs"].append(runner)
    # AWX's next workflow node: the slices' artifacts merged, as its extra vars
    merged = awx_jobs.awx_merge(out["jobs"])
    out["merged_artifacts"] = merged
    out["report_job"] = job(base, fleet, "report", "playbooks/fleet_report.yml", inventory,
                            dict(merged, io_isolation_fleet_report_dir=os.path.join(base, "merged")))
    out["single_job"] = job(base, fleet, "single", "playbooks/verify.yml", inventory,
                            {"io_isolation_fleet_report_dir": os.path.join(base, "single")})
    for name in ("merged", "single"):
        with open(os.path.join(base, name, "fleet-report.json"), encoding="utf-8") as f:
            out[name] = json.load(f)
        with open(os.path.join(base, name, "fleet-report.html"), encoding="utf-8") as f:
            out[name + "_html"] = f.read()
    return out


def test_awx_slices_take_every_nth_host_by_name():
    assert awx_slices(["h3", "h1", "h2", "h5", "h4"], 2) == [["h1", "h3", "h5"], ["h2", "h4"]]


def test_each_slice_job_runs_its_hosts_and_publishes_its_part(sliced):
    assert [len(s) for s in sliced["slices"]] == [3, 3, 3]
    for number, (hosts, runner) in enumerate(zip(sliced["slices"], sliced["jobs"]), 1):
        assert hosts_of(runner) - {"localhost"} == set(hosts), (number, hosts_of(runner))
        data = artifact_data(runner)
        assert list(data) == ["io_isolation_fleet_part_%d" % (100 + number)], list(data)
        part = data["io_isolation_fleet_part_%d" % (100 + number)]
        assert sorted(part["hosts"]) == hosts and part["job"] == str(100 + number)
        # verify's own verdict is unchanged: a slice with a drifted or unreachable host fails
        bad = {"h000004", "h000008", UNREACHABLE} & set(hosts)
        assert (runner.status, runner.rc != 0) == (("failed", True) if bad else ("successful", False)), \
            (number, runner.status, runner.rc)
        # each slice's own page (named by its job) covers its hosts only
        with open(os.path.join(sliced["base"], "slices", "fleet-report-job%d.json" % (100 + number)),
                  encoding="utf-8") as f:
            assert sorted(json.load(f)["hosts"]) == hosts


def test_the_merged_report_covers_the_whole_inventory(sliced):
    assert sliced["report_job"].status == "successful", sliced["report_job"].stdout.read()[-3000:]
    rep = sliced["merged"]
    assert sorted(rep["hosts"]) == sliced["names"] and rep["jobs"] == ["101", "102", "103"]
    states = dict((h, r["state"]) for h, r in rep["hosts"].items())
    assert states == dict((h, "drift" if h in ("h000004", "h000008") else "unreachable" if h == UNREACHABLE
                           else "ok") for h in sliced["names"])
    assert rep["counts"] == {"ok": 6, "drift": 2, "latency": 0, "failed": 0, "unreachable": 1}
    assert rep["hosts"]["h000004"]["drift"] == ["sysctl: vm.swappiness: 60 -> 10"]
    # each host's disks are its own recorded ones, with the class and QoS the roles planned
    for name in sliced["names"]:
        if name == UNREACHABLE:
            continue
        with open(os.path.join(sliced["fleet"], "hosts", name + ".json"), encoding="utf-8") as f:
            devices = json.load(f)["io_facts"]["ansible_facts"]["io_isolation"]["devices"].values()
        want = sorted(d["identity"]["stable_selector"] for d in devices if d["identity"]["kind"] == "nvme")
        assert [d["selector"] for d in rep["hosts"][name]["disks"]] == want, name
    calibrated = set((m, f, gib * 1024 ** 3) for m, f, gib in bench.fleet_facts.CLASSES[:bench.CALIBRATED_CLASSES])
    for cls in rep["classes"]:
        assert cls["entry"] == ((cls["model"], cls["firmware"], cls["capacity_bytes"]) in calibrated), cls
        assert list(cls["qos"]) == (["the bandwidth solution, vrate 100%"] if cls["entry"]
                                    else ["the roles' QoS, vrate 10-10000%"]), cls


def test_the_merged_report_equals_the_single_runs(sliced):
    # verify's verdict with the report on is what it is without (tests/unit/benchmarks/test_fleet_bench.py runs it
    # off): the drifted hosts fail with their drift, the others say OK, and an unreachable host makes it exit 4
    runner = sliced["single_job"]
    assert (runner.status, runner.rc) == ("failed", 4)
    said = runner.stdout.read()
    for name in sliced["names"]:
        if name in ("h000004", "h000008"):
            assert "DRIFT on %s: sysctl: vm.swappiness: 60 -> 10" % name in said
        elif name != UNREACHABLE:
            assert "OK: %s holds its I/O isolation settings; QoS in force: " % name in said
    assert sliced["merged"]["hosts"] == sliced["single"]["hosts"]
    assert sliced["merged"]["classes"] == sliced["single"]["classes"]


def test_a_hostile_disk_model_is_text_on_the_page(sliced):
    page = sliced["merged_html"]
    assert HOSTILE_MODEL in [d["model"] for d in sliced["merged"]["hosts"][HOSTILE]["disks"]]
    assert html.escape(HOSTILE_MODEL, quote=True) in page
    assert "<script" not in page and "<img" not in page
