# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/fleet (make bench-fleet) at a few hosts, so that it cannot rot: the fleet's recorded facts, the
stand-in connection's answers through a real verify.yml run (each host judged on its own recorded facts, the
drifted ones failed with what drifted), the filters timed directly, and the growth exponent. No VM."""

import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

bench = load("fleet", "bench")
fleet_facts = load("fleet", "facts")
fleet_replay = load("fleet", "fleet_replay", "connection_plugins")


def test_lab_guest_facts_are_the_lab_guests():
    """The simulated Debian 12 guest has the lab's disks and the NVMe identity the lab recorded (the wwid of
    lab-nvme-a in tests/unit/playbooks/recorded/both-calibration-apply.json)."""
    facts = fleet_facts.lab_guest("debian12")["ansible_facts"]["io_isolation"]
    assert sorted(facts["devices"]) == ["nvme0n1", "nvme1n1", "vda", "vdb"]
    a = facts["devices"]["nvme0n1"]["identity"]
    assert a["serial"] == "lab-nvme-a" and a["model"] == "QEMU NVMe Ctrl" and a["size_bytes"] == 1073741824
    assert a["stable_selector"] == "nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"
    assert facts["capabilities"]["kernel"]["release"] == "6.1.0-57-amd64"
    assert facts["capabilities"]["systemd"]["version"] == 252


def test_host_facts_give_each_host_its_own_serials():
    shape = fleet_facts.shape_facts("debian13", 1, 2)
    one, two = (json.loads(fleet_facts.host_facts(shape, i))["ansible_facts"]["io_isolation"] for i in (7, 8))
    assert one["devices"]["nvme1n1"]["identity"]["serial"] == "h000007-1"
    assert two["devices"]["nvme1n1"]["identity"]["serial"] == "h000008-1"
    sel = one["devices"]["nvme0n1"]["identity"]["stable_selector"]
    assert "h000007-0".encode().hex() in sel and sel != two["devices"]["nvme0n1"]["identity"]["stable_selector"]
    assert one["devices"]["nvme0n1"]["identity"]["model"] == fleet_facts.CLASSES[1][0]


def test_parse_payload_reads_the_wrapper_ansible_core_writes():
    payload = ('import x\n\nif __name__ == "__main__":\n    _ansiballz_main(\nansible_module=\'io_facts\',\n'
               'module_fqn=\'ansible_collections.aiinfra.io_isolation.plugins.modules.io_facts\',\n'
               'params=%r,\nzip_data=\'UEsDB\',\n)\n' % json.dumps({"ANSIBLE_MODULE_ARGS": {"cgroups": ["a.slice"]}}))
    assert fleet_replay.parse_payload(payload.encode()) == ("io_facts", {"cgroups": ["a.slice"]})


def test_exponent_and_recap():
    assert bench.exponent([(100, 10.0), (1000, 100.0), (5000, 500.0)]) == 1.0
    assert bench.exponent([(100, 1.0), (1000, 100.0)]) == 2.0
    text = ("h000001                    : ok=16   changed=0    unreachable=0    failed=0    skipped=18\n"
            "h000002                    : ok=15   changed=1    unreachable=0    failed=1    skipped=19\n")
    assert bench.recap(text) == {"hosts": 2, "failed": 1, "unreachable": 0, "changed": 1}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Five hosts (every second one drifted), ten database entries, and one verify.yml run over them."""
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "ansible-playbook")):
        pytest.skip("no ansible-playbook beside this Python")
    out = str(tmp_path_factory.mktemp("fleet"))
    summary = bench.build_fleet(os.path.join(out, "fleet"), 5, 10, drift_every=2)
    run = bench.run_playbook(os.path.join(out, "fleet"), "verify", 5, os.path.join(out, "verify.log"),
                             profile=True, args_dir=os.path.join(out, "args"))
    with open(os.path.join(out, "verify.log"), encoding="utf-8") as f:
        log = f.read()
    return {"dir": os.path.join(out, "fleet"), "summary": summary, "run": run, "log": log, "args": os.path.join(out, "args")}


def test_verify_runs_on_the_recorded_results(fleet):
    run, log = fleet["run"], fleet["log"]
    assert fleet["summary"]["hosts"] == 5 and fleet["summary"]["drifted"] == 2 and fleet["summary"]["db_entries"] == 10
    # two module executions per host, each answered by the stand-in, nothing else sent
    assert run["calls"]["by_module"] == {"io_facts": 5, "host_profile": 5}, log[-3000:]
    assert run["calls"]["hosts"] == 5 and run["calls"]["per_host_max"] == 2
    # the drifted hosts: host_profile would change them (check mode), and verify fails them
    assert run["recap"] == {"hosts": 5, "failed": 2, "unreachable": 0, "changed": 2} and run["rc"] == 2
    assert run["cpu_s"] > 0 and run["peak_rss_mib"] > 0 and run["wall_s"] > 0
    for i in (1, 3, 5):
        with open(os.path.join(fleet["dir"], "hosts", bench.host_name(i) + ".json"), encoding="utf-8") as f:
            facts = json.load(f)["io_facts"]["ansible_facts"]["io_isolation"]
        selectors = [d["identity"]["stable_selector"] for d in facts["devices"].values() if d["identity"]["kind"] == "nvme"]
        ok = [line for line in log.splitlines() if "OK: %s holds" % bench.host_name(i) in line]
        assert ok, log[-3000:]
        # the QoS in force names this host's own disks: verify judged the facts recorded for it
        assert sorted(re.findall(r"nvme\.1b36-[0-9a-f-]+", ok[0])) == sorted(selectors)
    for i in (2, 4):
        assert re.search(r"DRIFT on %s: sysctl: vm\.swappiness: 60 -> 10" % bench.host_name(i), log), log[-3000:]


def test_filters_timed_over_the_fleet(fleet):
    got = bench.time_filters(fleet["dir"], [bench.host_name(i) for i in range(1, 6)])
    assert got["hosts"] == 5 and got["total_ms_per_host"] > 0
    assert {"calibration_db lookup", "select_disks", "iocost_plan", "baseline_plan", "verify_drift",
            "drift_summary"} <= set(got["steps"])
    assert abs(sum(s["share"] for s in got["steps"].values()) - 1.0) < 0.01


def test_the_roles_send_what_the_whole_database_planned(fleet):
    """The host_profile arguments of the real verify.yml run (the roles' lookup: the entries of each host's disk
    classes, the database checked once per run) are what planning over the whole database gives, as the roles
    planned before the lookup was per class, on each host's recorded facts."""
    plan = bench.planner(fleet["dir"], whole_db=True)
    calibrated = 0
    for i in range(1, 6):
        with open(os.path.join(fleet["args"], "%s.host_profile.json" % bench.host_name(i)), encoding="utf-8") as f:
            sent = json.load(f)
        before, _verdict = plan(bench.host_name(i), bench.untimed)
        before = json.loads(json.dumps(before))
        assert dict((k, sent.get(k)) for k in before) == before
        calibrated += sum(d["model"].get("ctrl") != "auto"
                          for d in before["iocost"]["devices"])
    assert calibrated, "no host of the fleet has a calibrated disk: the comparison would not show a wrong entry"


def test_the_profile_attributes_the_controllers_cpu_to_the_collections_files(fleet):
    prof = fleet["run"]["profile"]
    # io_facts, the planning tasks and host_profile: several workers a host, each sampled, and the strategy process
    assert prof["workers"] >= 5 * 10 and prof["strategy_ms_per_host"] > 0
    assert 0 < prof["ours_ms_per_host"] < prof["sampled_ms_per_host"]
    assert any(x["name"].startswith("plugins/filter/io_isolation.py") for x in prof["entries"] + prof["places"])
    assert all(x["name"].startswith("plugins/") for x in prof["entries"] + prof["places"])


def test_our_frames_are_told_from_ansible_cores():
    profiled = load("fleet", "profiled_playbook")

    class Code:
        def __init__(self, filename, name):
            self.co_filename, self.co_name = filename, name

    class Frame:
        def __init__(self, filename, name, local=None):
            self.f_code, self.f_locals = Code(filename, name), local or {}

    coll = "/x/ansible_collections/aiinfra/io_isolation/plugins/"
    assert profiled.our_frame(Frame(coll + "filter/io_isolation.py", "iocost_plan")) == \
        "plugins/filter/io_isolation.py:iocost_plan"
    assert profiled.our_frame(Frame(coll + "lookup/calibration_db.py", "<module>")) == \
        "plugins/lookup/calibration_db.py (import)"
    loader = "/v/ansible/utils/collection_loader/_collection_finder.py"
    assert profiled.our_frame(Frame(loader, "get_code", {
        "fullname": "ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.codecs"})) == \
        "plugins/module_utils/_host/codecs.py (import)"
    assert profiled.our_frame(Frame(loader, "get_code", {"fullname": "ansible_collections.ansible.posix.x"})) is None
    assert profiled.our_frame(Frame("/v/ansible/template/__init__.py", "template")) is None
