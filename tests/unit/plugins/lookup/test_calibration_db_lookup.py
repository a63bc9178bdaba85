# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration_db lookup: directories to entries, each kind of bad file named, and the documented
query()/wantlist=true usage through a real ansible-playbook run on localhost (nothing leaves the controller)."""

import copy
import json
import os

import pytest

from ansible import constants as C
from ansible.errors import AnsibleLookupError

from ansible_collections.aiinfra.io_isolation.plugins.lookup.calibration_db import LookupModule

from playbook import ansible_playbook, debug_out
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "plugin_utils", "fixtures")
RESULTS = json.load(open(os.path.join(FIXTURES, "calibration_results.json")))


def entry(**changes):
    e = db.merge_results(copy.deepcopy(RESULTS))
    e.update(changes)
    return e


def save(directory, e, name=None):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or db.entry_file_name(e))
    path.write_text(json.dumps(e, indent=2, sort_keys=True) if not isinstance(e, str) else e)
    return path


def run(terms, basedir="/"):
    lookup = LookupModule()
    lookup.get_basedir = lambda variables: basedir
    return lookup.run(terms, variables={})


def test_missing_directory_is_empty(tmp_path):
    assert run([str(tmp_path / "db")]) == []


def test_entries_are_returned_flat_in_file_name_order(tmp_path):
    save(tmp_path / "db", entry())
    save(tmp_path / "db", entry(model="AAA Disk"))
    got = run([str(tmp_path / "db")])
    assert [e["model"] for e in got] == ["AAA Disk", "QEMU NVMe Ctrl"]
    assert got[1]["iocost_model"]["rbps"] == 1100000000


def test_a_relative_path_is_relative_to_the_playbook(tmp_path):
    save(tmp_path / "db", entry())
    assert len(run(["db"], basedir=str(tmp_path))) == 1


def test_several_directories_and_a_class_in_two_of_them(tmp_path):
    save(tmp_path / "a", entry())
    save(tmp_path / "b", entry(firmware="9.9"))
    assert [e["firmware"] for e in run([str(tmp_path / "a"), str(tmp_path / "b")])] == ["7.2.22", "9.9"]
    save(tmp_path / "b", entry())
    with pytest.raises(AnsibleLookupError, match=r"a/QEMU_NVMe_Ctrl__7\.2\.22__1073741824\.json and .*b/QEMU_NVMe"
                                                 r".* hold the same hardware class"):
        run([str(tmp_path / "a"), str(tmp_path / "b")])


@pytest.mark.parametrize("content, words", [
    ("{", "not valid JSON"),
    ({"schema": 1, "model": "QEMU NVMe Ctrl"}, "missing keys firmware, capacity_bytes, iocost_model, qos"),
    ("schema", "schema is 3; this collection reads schema 1"),
    ("coef", r"iocost_model\.wbps is '510000000', not a positive integer"),
    ("qos", r"qos\.wlat is -1, not a positive integer"),
])
def test_each_kind_of_bad_file_fails_with_its_name(tmp_path, content, words):
    if content == "schema":
        content = entry(schema=3)
    elif content == "coef":
        content = entry()
        content["iocost_model"]["wbps"] = "510000000"
    elif content == "qos":
        content = entry()
        content["qos"]["wlat"] = -1
    save(tmp_path / "db", content, name="QEMU_NVMe_Ctrl__7.2.22__1073741824.json")
    with pytest.raises(AnsibleLookupError, match=r"calibration_db: .*db/QEMU_NVMe_Ctrl__7\.2\.22__1073741824\.json"
                                                 r".*" + words):
        run([str(tmp_path / "db")])


def test_disks_take_the_entries_of_their_classes_and_the_run_keeps_an_index(tmp_path):
    save(tmp_path / "db", entry())
    save(tmp_path / "db", entry(model="AAA Disk"))
    save(tmp_path / "db", entry(firmware="9.9"))
    lookup = LookupModule()
    lookup.get_basedir = lambda variables: "/"
    disk = {"identity": {"name": "nvme0n1", "model": "QEMU NVMe Ctrl", "firmware": "1.0", "size_bytes": 1073741824}}
    got = lookup.run([str(tmp_path / "db")], variables={}, disks=[disk])
    assert [(e["model"], e["firmware"]) for e in got] == [("QEMU NVMe Ctrl", "7.2.22"), ("QEMU NVMe Ctrl", "9.9")]
    # the run's controller temporary directory holds the index of the database just checked
    index = db._index_path(C.DEFAULT_LOCAL_TMP, str(tmp_path / "db"))  # pylint: disable=protected-access
    assert sorted(json.load(open(index))["files"]) == sorted(os.listdir(tmp_path / "db"))
    save(tmp_path / "db", "{", name="BBB__1__1.json")
    with pytest.raises(AnsibleLookupError, match=r"calibration_db: .*db/BBB__1__1\.json: not valid JSON"):
        lookup.run([str(tmp_path / "db")], variables={}, disks=[disk])


def test_a_term_that_is_not_a_path_is_refused():
    with pytest.raises(AnsibleLookupError, match="a database is a directory path"):
        run([""])


def test_default_dir_is_decided_here(tmp_path):
    lookup = LookupModule()

    def ask(variables, terms=()):
        return lookup.run(list(terms), variables=variables, default_dir=True)

    assert ask({"inventory_dir": "/inv", "playbook_dir": "/pb"}) == ["/inv/calibration-db"]
    assert ask({"inventory_dir": None, "playbook_dir": "/pb"}) == ["/pb/calibration-db"]
    assert ask({"inventory_dir": "None", "playbook_dir": "/pb"}) == ["/pb/calibration-db"]   # "-i host,"
    assert ask({"io_isolation_calibration_dir": "/srv/db", "inventory_dir": "/inv"}) == ["/srv/db"]
    with pytest.raises(AnsibleLookupError, match="not both"):
        ask({}, ["/srv/db"])
    with pytest.raises(AnsibleLookupError, match="name at least one database directory"):
        run([])


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: query() and lookup(wantlist=true) give a list for 0, 1 and 2 entries
      ansible.builtin.set_fact:
        out:
          empty_query: "{{ query('aiinfra.io_isolation.calibration_db', base ~ '/empty') }}"
          empty_wantlist: "{{ lookup('aiinfra.io_isolation.calibration_db', base ~ '/empty', wantlist=true) }}"
          one_query: "{{ query('aiinfra.io_isolation.calibration_db', base ~ '/one') | map(attribute='model') }}"
          one_wantlist: "{{ lookup('aiinfra.io_isolation.calibration_db', base ~ '/one', wantlist=true)
                            | map(attribute='model') }}"
          one_plain_is_the_entry: "{{ lookup('aiinfra.io_isolation.calibration_db', base ~ '/one') is mapping }}"
          two_query: "{{ query('aiinfra.io_isolation.calibration_db', base ~ '/two') | map(attribute='model') }}"
          relative: "{{ query('aiinfra.io_isolation.calibration_db', 'two') | length }}"
          for_disk: "{{ query('aiinfra.io_isolation.calibration_db', base ~ '/two', disks=[disk]) | map(attribute='model') }}"
          default_dir: "{{ lookup('aiinfra.io_isolation.calibration_db', default_dir=true) }}"
          plan: "{{ [disk] | aiinfra.io_isolation.iocost_plan({}, query('aiinfra.io_isolation.calibration_db',
                    base ~ '/one')) }}"
    - name: A templated io_isolation_calibration_dir is the default, templated
      ansible.builtin.set_fact:
        configured: "{{ lookup('aiinfra.io_isolation.calibration_db', default_dir=true) }}"
      vars:
        io_isolation_calibration_dir: "{{ base }}/configured"
    - name: Show it
      ansible.builtin.debug:
        msg: "OUT={{ out | combine({'configured_dir': configured}) | to_json }}"
"""


def test_documented_usage_in_a_playbook(tmp_path):
    save(tmp_path / "one", entry())
    save(tmp_path / "two", entry())
    save(tmp_path / "two", entry(model="AAA Disk"))
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    disk = {"identity": {"name": "nvme0n1", "serial": "lab-nvme-a", "stable_selector": "lab-nvme-a", "model": "QEMU NVMe Ctrl",
                         "firmware": "7.2.22", "size_bytes": 1073741824}}
    extra = json.dumps({"base": str(tmp_path), "disk": disk})
    proc = ansible_playbook("-i", "localhost,", "-c", "local", tmp_path / "pb.yml", "-e", extra, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = debug_out(proc)
    assert out["empty_query"] == [] and out["empty_wantlist"] == []
    assert out["one_query"] == ["QEMU NVMe Ctrl"] and out["one_wantlist"] == ["QEMU NVMe Ctrl"]
    assert out["one_plain_is_the_entry"] is True   # the caveat the documentation gives
    assert out["two_query"] == ["AAA Disk", "QEMU NVMe Ctrl"]
    assert out["relative"] == 2
    assert out["for_disk"] == ["QEMU NVMe Ctrl"]
    assert out["default_dir"] == str(tmp_path / "calibration-db")   # no inventory file: beside the playbook
    assert out["configured_dir"] == str(tmp_path / "configured")
    assert out["plan"]["sources"] == {"lab-nvme-a": "calibration"}
    assert out["plan"]["devices"][0]["model"]["rbps"] == 1100000000
