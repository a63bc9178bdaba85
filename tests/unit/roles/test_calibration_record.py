# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration role's controller side (roles/calibration/tasks/record.yml) from recorded runs, with
ansible-playbook: without matplotlib on the controller the run still writes the database entries and
the hwdb export, writes the reports without plots, and says once (not per host or disk) how to get
the plots. Two hosts of two hardware classes, so "once" can fail."""

import copy
import json
import os
import sys

from playbook import ansible_playbook

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "unit", "plugins", "plugin_utils", "fixtures")
RESULTS = json.load(open(os.path.join(FIXTURES, "calibration_results.json")))
HINT = "have no plots: matplotlib is missing on the controller"

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: The controller side of the calibration role
      ansible.builtin.import_tasks: %s
""" % os.path.join(REPO, "roles", "calibration", "tasks", "record.yml")


def runs(firmware):
    out = copy.deepcopy(RESULTS)
    for result in out:
        result["device"]["firmware"] = firmware
    return {"results": out, "changed": True, "msg": "All items completed"}


def play(tmp_path, pythonpath=None):
    db = tmp_path / "db"
    inventory = {"all": {"hosts": {
        "calib-a": {"__calibration_runs": runs("7.2.22")},
        "calib-b": {"__calibration_runs": runs("8.0.1")},
    }, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "calibration_db_dir": str(db), "calibration_report_dir": str(db / "reports"),
                "calibration_hwdb_file": str(db / "90-aiinfra-iocost.hwdb")}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    env = {"ANSIBLE_SHOW_CUSTOM_STATS": "1"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return ansible_playbook("-i", tmp_path / "inventory.json", tmp_path / "pb.yml", env=env), db


def test_without_matplotlib_the_database_and_hwdb_are_written_and_the_hint_comes_once(tmp_path):
    # a matplotlib that cannot be imported shadows any installed one, in the controller's process only
    blocker = tmp_path / "nompl" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is blocked for this test')\n")
    proc, db = play(tmp_path, str(tmp_path / "nompl"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    entries = sorted(p.name for p in db.glob("*.json"))
    assert entries == ["QEMU_NVMe_Ctrl__7.2.22__1073741824.json", "QEMU_NVMe_Ctrl__8.0.1__1073741824.json"], out
    assert "7.2.22" in (db / "90-aiinfra-iocost.hwdb").read_text()
    reports = sorted((db / "reports").glob("*.html"))
    assert len(reports) == 2 and all("data:image/png" not in r.read_text() for r in reports)
    assert out.count(HINT) == 1, out
    # the artifact a workflow's next node gets: both hosts' entries, once each
    stats = json.loads(out[out.index("CUSTOM STATS:"):].split("RUN:", 1)[1].strip().splitlines()[0].strip())
    assert sorted(e["firmware"] for e in stats["io_isolation_calibration_entries"]) == ["7.2.22", "8.0.1"]


def test_with_matplotlib_no_hint(tmp_path):
    import pytest
    pytest.importorskip("matplotlib")
    proc, db = play(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert HINT not in out
    assert all("data:image/png" in r.read_text() for r in (db / "reports").glob("*.html"))
