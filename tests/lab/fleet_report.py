# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report on real guests (issue 40; `make lab-fleet-report`, not part of make test).

Boots a Debian 12 and a Debian 13 lab guest, rolls site.yml out on both (Debian 12 in inference and training,
Debian 13 in inference with a latency objective), with a third inventory host that does not answer; drifts the
Debian 13 guest (vm.swappiness); then runs verify.yml as AWX runs a sliced job - the inventory split as AWX splits
it into two slices, each an ansible-runner job with the report on, the slices' artifacts merged as AWX merges them
and playbooks/fleet_report.yml run with them - and verify.yml once unsliced. Checks that both reports say the same
of every host: Debian 12 OK, Debian 13 DRIFT naming vm.swappiness, the third host UNREACHABLE, the guests' NVMe
class with the QoS in force, Debian 13's latency objective. Writes both reports under .cache/lab-fleet-report/
(--out) and prints their figures. KEEP_LAB=1 leaves the guests running.

  .venv/bin/python tests/lab/fleet_report.py .venv/bin [--out DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

from labcall import REPO, guest, lab

sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
import awx_jobs  # noqa: E402  pylint: disable=wrong-import-position

GUESTS = {"fr-d12": "debian12", "fr-d13": "debian13"}
GONE = "fr-gone"
OBJECTIVE = {"p99_us": 1000000, "seconds": 5, "min_count": 1}   # generous: the lab proves the report, not latency


def inventory():
    """Both guests' connection variables (lab.py inventory), the groups, and a host nobody answers for."""
    hosts = {}
    for name in GUESTS:
        hosts.update(yaml.safe_load(lab("inventory", name).stdout)["all"]["hosts"])
    hosts[GONE] = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "root",
                   "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"}
    hosts["fr-d13"]["io_isolation_latency_objective"] = OBJECTIVE
    return {"all": {"hosts": hosts, "children": {
        "inference": {"hosts": {"fr-d12": None, "fr-d13": None, GONE: None}},
        "training": {"hosts": {"fr-d12": None}}}}}


def playbook(bin_dir, inv_path, name, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.cache/installed" % (REPO, REPO),
               ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    r = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", inv_path, "playbooks/%s.yml" % name]
                       + list(extra), cwd=REPO, env=env, text=True, capture_output=True, check=False)
    print("%s: rc %d, %.1f s" % (name, r.returncode, time.monotonic() - start), flush=True)
    return r


def check(report, label):
    hosts = report["hosts"]
    states = dict((h, r["state"]) for h, r in hosts.items())
    want = {"fr-d12": "ok", "fr-d13": "drift", GONE: "unreachable"}
    problems = []
    if states != want:
        problems.append("states %s, want %s" % (states, want))
    if not any("vm.swappiness" in line for line in hosts.get("fr-d13", {}).get("drift", [])):
        problems.append("fr-d13's drift does not name vm.swappiness: %s" % hosts.get("fr-d13", {}).get("drift"))
    if hosts.get("fr-d13", {}).get("objective") != OBJECTIVE:
        problems.append("fr-d13's objective: %s" % hosts.get("fr-d13", {}).get("objective"))
    models = set(c["model"] for c in report["classes"])
    if "QEMU NVMe Ctrl" not in models:
        problems.append("no QEMU NVMe class: %s" % models)
    classes = [(c["model"], c["disks"], c["entry"], c["qos"]) for c in report["classes"]]
    print("%s: %s; classes %s" % (label, report["counts"], classes), flush=True)
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("bin_dir")
    p.add_argument("--out", default=os.path.join(REPO, ".cache", "lab-fleet-report"))
    a = p.parse_args(argv)
    bin_dir = os.path.abspath(a.bin_dir)
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    lab("build", *sorted(set(GUESTS.values())))
    for name, image in GUESTS.items():
        lab("down", name, "--purge")
        lab("up", image, "--name", name)
    try:
        inv = inventory()
        inv_path = os.path.join(a.out, "inventory.yml")
        with open(inv_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(inv, f)
        site = playbook(bin_dir, inv_path, "site")
        if site.returncode not in (0, 4):     # 4: the host that does not answer
            raise SystemExit("site.yml failed:\n" + site.stdout[-4000:])
        guest("fr-d13", "sysctl -qw vm.swappiness=61")
        # AWX's way: two slices, one job each, then the report node with their artifacts
        jobs = []
        for number, hosts in enumerate(awx_jobs.awx_slices(awx_jobs.inventory_hosts(inv), 2), 1):
            start = time.monotonic()
            runner = awx_jobs.run_job(os.path.join(a.out, "jobs"), "slice%d" % number, "playbooks/verify.yml",
                                      awx_jobs.slice_inventory(inv, hosts),
                                      {"awx_job_id": number, "io_isolation_fleet_report_dir": os.path.join(a.out, "slices")})
            print("slice %d %s: %s rc %d, %.1f s" % (number, hosts, runner.status, runner.rc, time.monotonic() - start),
                  flush=True)
            jobs.append(runner)
        merged = awx_jobs.awx_merge(jobs)
        runner = awx_jobs.run_job(os.path.join(a.out, "jobs"), "report", "playbooks/fleet_report.yml", inv,
                                  dict(merged, io_isolation_fleet_report_dir=os.path.join(a.out, "sliced")))
        if runner.status != "successful":
            raise SystemExit("the report job failed:\n" + runner.stdout.read()[-4000:])
        single = playbook(bin_dir, inv_path, "verify", "-e", "io_isolation_fleet_report_dir=" + os.path.join(a.out, "single"))
        reports = {}
        for label in ("sliced", "single"):
            with open(os.path.join(a.out, label, "fleet-report.json"), encoding="utf-8") as f:
                reports[label] = json.load(f)
        problems = check(reports["sliced"], "sliced") + check(reports["single"], "single")
        if reports["sliced"]["hosts"] != reports["single"]["hosts"]:
            problems.append("the sliced and the single report differ")
        if single.returncode == 0:
            problems.append("verify.yml passed with a drifted and an unreachable host")
        for label in ("sliced", "single"):
            page = os.path.join(a.out, label, "fleet-report.html")
            print("%s report: %s (%d bytes)" % (label, page, os.path.getsize(page)))
        if problems:
            raise SystemExit("fleet report on the lab: " + "; ".join(problems))
        print("fleet report on the lab: OK")
    finally:
        if os.environ.get("KEEP_LAB") != "1":
            for name in GUESTS:
                lab("down", name, "--purge", check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
