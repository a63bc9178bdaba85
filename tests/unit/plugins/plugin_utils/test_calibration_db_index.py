# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""load_db for the disks of one host (the io_baseline role's lookup): the same entry chosen as from the whole
database, the same errors, and each file read once per run (the index), not once per host."""

import copy
import json
import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.filter.io_isolation import iocost_plan
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = json.load(open(os.path.join(HERE, "fixtures", "calibration_results.json")))
GIB = 1024 ** 3


def entry(model, firmware, capacity):
    e = db.merge_results(copy.deepcopy(RESULTS[:1]))
    e.update(model=model, firmware=firmware, capacity_bytes=capacity)
    # a different model per entry, so that a wrong pick shows in the plan
    e["iocost_model"] = dict(e["iocost_model"], rbps=1000000 + len(model) * 1000 + capacity // GIB * 10
                             + int(firmware[1:]))
    return e


def write_db(directory, count=1000):
    """``count`` entries: 40 models x 5 firmwares x 5 capacities, so that many share a model and capacity."""
    os.makedirs(directory, exist_ok=True)
    for i in range(count):
        e = entry("M%02d DISK" % (i % 40), "F%d" % (i // 40 % 5), (1 + i // 200) * GIB)
        with open(os.path.join(directory, db.entry_file_name(e)), "w", encoding="utf-8") as f:
            f.write(db.entry_file_text(e))


def disk(n, model, firmware, size):
    return {"identity": {"name": "nvme%dn1" % n, "serial": "s%d" % n, "stable_selector": "sel-%d" % n,
                         "model": model, "firmware": firmware, "size_bytes": size, "kind": "nvme"}}


# One host's disks: its exact class, a firmware the database lacks (the first entry of its model and capacity, with
# a warning), a capacity it lacks, an unknown model, a disk of unknown size, a model with udev's trailing blanks.
HOST = [disk(0, "M07 DISK", "F3", 2 * GIB), disk(1, "M07 DISK", "F9", 4 * GIB), disk(2, "M07 DISK", "F1", 7 * GIB),
        disk(3, "NOPE", "F1", GIB), disk(4, "M01 DISK", "F0", None), disk(5, "M39 DISK  ", "F4", 5 * GIB)]


@pytest.fixture(scope="module")
def big_db(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("db") / "calibration-db")
    write_db(directory)
    return directory


def test_the_same_entry_is_chosen_from_a_database_of_1000_entries(big_db, tmp_path):
    whole = db.load_db(big_db)
    assert len(whole) == 1000
    mine = db.load_db(big_db, disks=HOST, index_dir=str(tmp_path))
    # only the entries of the disks' models and capacities, in the database's order
    assert [db.entry_class(e) for e in mine] == [db.entry_class(e) for e in whole
                                                 if (e["model"], e["capacity_bytes"]) in
                                                 {("M07 DISK", 2 * GIB), ("M07 DISK", 4 * GIB), ("M39 DISK", 5 * GIB)}]
    assert len(mine) == 15
    plan = iocost_plan(HOST, {}, whole, {"rpct": 95}, False, 100, "bandwidth")
    assert iocost_plan(HOST, {}, mine, {"rpct": 95}, False, 100, "bandwidth") == plan
    # the cases are there: an exact class, the firmware fallback, and the disks on the kernel's class
    assert plan["sources"] == {"sel-0": "calibration", "sel-1": "calibration", "sel-2": "kernel", "sel-3": "kernel",
                               "sel-4": "kernel", "sel-5": "calibration"}
    assert plan["devices"][0]["model"] == entry("M07 DISK", "F3", 2 * GIB)["iocost_model"]
    assert plan["devices"][1]["model"] == entry("M07 DISK", "F0", 4 * GIB)["iocost_model"]
    assert any("no calibration for firmware F9 of M07 DISK; using the one measured on firmware F0" in w
               for w in plan["warnings"])
    # the index does not change the choice for the next host
    assert db.load_db(big_db, disks=HOST, index_dir=str(tmp_path)) == mine


def test_the_database_is_read_once_per_run_not_per_host(big_db, tmp_path, monkeypatch):
    reads = []
    read_entry = db._read_entry  # pylint: disable=protected-access
    monkeypatch.setattr(db, "_read_entry", lambda path, name: reads.append(name) or read_entry(path, name))
    run = str(tmp_path / "run")
    db.load_db(big_db, disks=HOST, index_dir=run)
    assert len(reads) == 1000   # the first host checks every file
    for host in range(5):        # later hosts read their own classes' entries only
        del reads[:]
        other = [disk(0, "M%02d DISK" % host, "F1", 3 * GIB)]
        assert [e["firmware"] for e in db.load_db(big_db, disks=other, index_dir=run)] == ["F0", "F1", "F2", "F3", "F4"]
        assert len(reads) == 5 and all(n.startswith("M%02d_DISK__" % host) for n in reads)
    del reads[:]
    db.load_db(big_db, disks=HOST, index_dir=str(tmp_path / "another-run"))   # a new run checks again
    assert len(reads) == 1000
    del reads[:]
    db.load_db(big_db, disks=HOST)   # without a place for the index, every call reads the whole database
    assert len(reads) == 1000


def small_db(directory):
    os.makedirs(directory)
    for model, firmware, gib in (("AAA", "F1", 1), ("BBB", "F1", 1), ("CCC", "F1", 1)):
        e = entry(model, firmware, gib * GIB)
        with open(os.path.join(directory, db.entry_file_name(e)), "w", encoding="utf-8") as f:
            f.write(db.entry_file_text(e))


def error_of(*args, **kwargs):
    with pytest.raises(db.CalibrationError) as caught:
        db.load_db(*args, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("change", ["not-json", "invalid", "renamed", "directory", "not-utf8"])
def test_a_file_changed_after_the_index_fails_as_without_it(tmp_path, change):
    directory = str(tmp_path / "db")
    small_db(directory)
    run, mine = str(tmp_path / "run"), [disk(0, "AAA", "F1", GIB)]
    assert len(db.load_db(directory, disks=mine, index_dir=run)) == 1   # indexed: BBB is not read for this host
    target = os.path.join(directory, "BBB__F1__%d.json" % GIB)
    if change == "directory":
        os.remove(target)
        os.mkdir(target)
    else:
        content = {"not-json": b"{", "not-utf8": b"\xff\xfe",
                   "invalid": json.dumps(dict(entry("BBB", "F1", GIB), schema=2)).encode(),
                   "renamed": json.dumps(entry("BBB", "F2", GIB)).encode()}[change]
        with open(target, "wb") as f:
            f.write(content)
    expected = error_of(directory)
    assert "BBB__F1__" in expected
    assert error_of(directory, disks=mine, index_dir=run) == expected
    assert error_of(directory, disks=mine, index_dir=str(tmp_path / "cold")) == expected


def test_files_added_and_removed_after_the_index_and_a_class_in_two_directories(tmp_path):
    directory, other = str(tmp_path / "db"), str(tmp_path / "other")
    small_db(directory)
    run, mine = str(tmp_path / "run"), [disk(0, "AAA", "F1", GIB), disk(1, "DDD", "F1", GIB)]
    assert [e["model"] for e in db.load_db(directory, disks=mine, index_dir=run)] == ["AAA"]
    new = entry("DDD", "F1", GIB)
    with open(os.path.join(directory, db.entry_file_name(new)), "w", encoding="utf-8") as f:
        f.write(db.entry_file_text(new))
    os.remove(os.path.join(directory, "AAA__F1__%d.json" % GIB))
    assert [e["model"] for e in db.load_db(directory, disks=mine, index_dir=run)] == ["DDD"]
    small_db(other)
    expected = error_of(directory, other)
    assert "hold the same hardware class (BBB firmware F1" in expected
    assert error_of(directory, other, disks=mine, index_dir=run) == expected


def test_without_a_writable_place_for_the_index_it_reads_everything(tmp_path):
    directory = str(tmp_path / "db")
    small_db(directory)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    mine = [disk(0, "CCC", "F1", GIB)]
    assert [e["model"] for e in db.load_db(directory, disks=mine, index_dir=str(blocked / "run"))] == ["CCC"]


def test_disks_that_are_not_devices_are_refused():
    with pytest.raises(db.CalibrationError, match="io_facts devices"):
        db.load_db("/nonexistent", disks=["nvme0n1"])
