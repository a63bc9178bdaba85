# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration database logic: merging repeats, file names, validation, loading, hwdb export."""

import copy
import fnmatch
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
RESULTS = json.load(open(os.path.join(FIXTURES, "calibration_results.json")))
LAB = json.load(open(os.path.join(FIXTURES, "calibration_hwdb", "debian13-systemd257-qemu-nvme.json")))


def results(n=3):
    return copy.deepcopy(RESULTS[:n])


# ----------------------------------------------------------------------------------------------
# merging repeats

def test_one_repeat_is_the_run_itself():
    entry = db.merge_results(results(1))
    assert entry["schema"] == 1 and entry["repeats"] == 1
    assert (entry["model"], entry["firmware"], entry["capacity_bytes"]) == ("QEMU NVMe Ctrl", "7.2.22", 1073741824)
    assert entry["iocost_model"] == RESULTS[0]["model"]
    assert entry["qos"] == {"rpct": 95.0, "rlat": 1000, "wpct": 95.0, "wlat": 2000, "min": 60.0, "max": 100.0}
    assert all(entry["spread"][k]["repeat"] is None for k in db.COEFS)
    assert entry["spread"]["rbps"]["run_rse"] == 0.01
    assert entry["host"] == "calib-01" and entry["date"] == "2026-12-01T10:00:00Z"
    assert entry["device"] == {"serial": "lab-nvme-a", "name": "nvme0n1", "kind": "nvme",
                               "stable_id": RESULTS[0]["device"]["stable_id"]}
    assert entry["runs"] == [{"date": "2026-12-01T10:00:00Z", "host": "calib-01", "seconds": 150.0,
                              "kernel": "6.12.118+deb13-amd64", "serial": "lab-nvme-a", "target": "device",
                              "model": RESULTS[0]["model"], "qos": RESULTS[0]["qos"]}]


def test_three_repeats_take_medians_and_spreads_by_hand():
    entry = db.merge_results(results(3))
    # rbps 1.0e9, 1.1e9, 1.3e9 -> median 1.1e9; (1.3 - 1.0) / 1.1 = 0.272727
    assert entry["iocost_model"] == {"rbps": 1100000000, "rseqiops": 40000, "rrandiops": 30000,
                                     "wbps": 510000000, "wseqiops": 21000, "wrandiops": 15001}
    assert entry["qos"] == {"rpct": 95.0, "rlat": 1100, "wpct": 95.0, "wlat": 2050, "min": 60.0, "max": 100.0}
    assert isinstance(entry["qos"]["rlat"], int) and isinstance(entry["qos"]["wlat"], int)
    spread = entry["spread"]
    assert spread["rbps"] == {"run_rse": 0.02, "repeat": round(0.3 / 1.1, 6)}
    assert spread["rseqiops"] == {"run_rse": 0.005, "repeat": 0.05}            # (41000 - 39000) / 40000
    assert spread["rrandiops"] == {"run_rse": 0.02, "repeat": 0.0}
    assert spread["wbps"]["repeat"] == round(20e6 / 510e6, 6)
    assert spread["wseqiops"]["repeat"] == round(2000 / 21000, 6)
    assert spread["wrandiops"] == {"run_rse": 0.025, "repeat": round(3 / 15001, 6)}  # a None RSE is left out
    assert entry["repeats"] == 3


def test_runs_are_oldest_first_and_the_latest_names_the_entry():
    entry = db.merge_results(results(3))
    assert [r["date"] for r in entry["runs"]] == ["2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z",
                                                  "2026-12-01T11:00:00Z"]
    assert [r["host"] for r in entry["runs"]] == ["calib-02", "calib-01", "calib-03"]
    assert entry["date"] == "2026-12-01T11:00:00Z" and entry["host"] == "calib-03"
    assert entry["kernel"] == "6.12.118+deb13-amd64" and entry["fio_version"] == "3.39"
    assert entry["method"]["stop_rule"]["windows"] == 3
    assert entry["kernel_model"] == RESULTS[0]["kernel_model"]


def test_kernel_model_comes_from_the_latest_run_that_reported_one():
    runs = results(3)
    runs[2]["kernel_model"] = None   # the latest (11:00) has none; 10:00 (run 0) has one, 09:00 none
    runs[0]["kernel_model"] = dict(RESULTS[0]["kernel_model"], rbps=1)
    assert db.merge_results(runs)["kernel_model"]["rbps"] == 1
    for run in runs:
        run["kernel_model"] = None
    assert db.merge_results(runs)["kernel_model"] is None


def test_host_argument_overrides_the_reported_host():
    assert db.merge_results(results(2), host="inv-a")["host"] == "inv-a"


def test_even_repeats_round_the_median():
    runs = results(2)
    runs[0]["model"]["rbps"], runs[1]["model"]["rbps"] = 1000000001, 1000000002
    runs[0]["qos"]["rlat"], runs[1]["qos"]["rlat"] = 1000, 1003
    runs[0]["qos"]["rpct"], runs[1]["qos"]["rpct"] = 95.0, 99.0
    entry = db.merge_results(runs)
    assert entry["iocost_model"]["rbps"] == 1000000002      # 1000000001.5 rounds half to even
    assert entry["qos"]["rlat"] == 1002                    # 1001.5 -> 1002
    assert entry["qos"]["rpct"] == 97.0


def test_a_loop_registered_variable_is_accepted():
    assert db.merge_results({"results": results(3), "changed": False})["repeats"] == 3


def test_repeats_without_qos_are_left_out_of_the_qos_median():
    runs = results(3)
    runs[1]["qos"] = None
    entry = db.merge_results(runs)
    assert entry["qos"]["rlat"] == 1050               # median of 1000 and 1100
    assert [r["qos"] is None for r in entry["runs"]] == [True, False, False]
    for run in runs:
        run["qos"] = None
    assert db.merge_results(runs)["qos"] is None


@pytest.mark.parametrize("field, value, words", [
    (("device", "model"), "Other NVMe", r"mix hardware classes.*result 2: Other NVMe firmware 7\.2\.22"),
    (("device", "firmware"), "7.2.23", r"mix hardware classes.*firmware 7\.2\.23"),
    (("device", "size_bytes"), 2147483648, r"mix hardware classes.*2147483648 bytes"),
])
def test_a_mix_of_hardware_classes_is_refused(field, value, words):
    runs = results(3)
    runs[1][field[0]][field[1]] = value
    with pytest.raises(db.CalibrationError, match=words):
        db.merge_results(runs)


@pytest.mark.parametrize("change, words", [
    (lambda r: r.update(failed=True, msg="fio died"), r"result 1 \(nvme0n1\) of 2026-12-01T10:00:00Z did not run: "
                                                      r"fio died"),
    (lambda r: r.update(skipped=True), "did not run: the task was skipped"),
    (lambda r: r.pop("model"), "no 'model' dict.*check-mode run measures nothing"),
    (lambda r: r["model"].update(rbps=1.5), r"model\.rbps is 1\.5, not a positive integer"),
    (lambda r: r["model"].update(wrandiops=True), r"model\.wrandiops is True"),
    (lambda r: r["model"].update(rseqiops=0), r"model\.rseqiops is 0"),
    (lambda r: r["qos"].update(rlat=None), r"qos\.rlat is None, not a positive number"),
    (lambda r: r.update(qos="fast"), r"qos is 'fast', not a dict"),
    (lambda r: r["device"].update(model=None), r"device\.model is None.*give it an explicit model"),
    (lambda r: r["device"].update(firmware=" "), r"device\.firmware is ' '"),
    (lambda r: r["device"].update(size_bytes="1G"), r"device\.size_bytes is '1G'"),
    (lambda r: r.pop("device"), r"no 'device' dict"),
])
def test_bad_results_are_explained(change, words):
    runs = results(1)
    change(runs[0])
    with pytest.raises(db.CalibrationError, match=words):
        db.merge_results(runs)


@pytest.mark.parametrize("value, words", [([], "an empty list"), ("x", "got str"), (None, "got NoneType"),
                                          (["x"], "is a str, not an iocost_calibrate result")])
def test_no_results_is_explained(value, words):
    with pytest.raises(db.CalibrationError, match=words):
        db.merge_results(value)


def test_the_entry_feeds_the_io_baseline_plan():
    from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as plan
    entry = db.merge_results(results(3))
    disk = {"identity": {"name": "nvme0n1", "serial": "lab-nvme-a", "stable_selector": "lab-nvme-a", "model": "QEMU NVMe Ctrl", "firmware": "7.2.22",
                         "size_bytes": 1073741824}}
    out = plan.iocost_plan([disk], calibration=[json.loads(json.dumps(entry))], qos={"rpct": 95, "rlat": 2000})
    assert out["sources"] == {"lab-nvme-a": "calibration"}
    # The model only: the QoS stays the plan's own unless the entry's is asked for.
    assert out["devices"] == [{"device": "lab-nvme-a", "model": entry["iocost_model"], "qos": {"rpct": 95, "rlat": 2000}}]
    out = plan.iocost_plan([disk], calibration=[entry], qos={"rpct": 95, "rlat": 2000}, calibration_qos=True)
    assert out["devices"][0]["qos"] == entry["qos"]
    other = dict(disk, identity=dict(disk["identity"], size_bytes=2147483648))
    assert plan.iocost_plan([other], calibration=[entry])["sources"] == {"lab-nvme-a": "kernel"}


# ----------------------------------------------------------------------------------------------
# validation

def good_entry():
    return db.merge_results(results(3))


def test_a_merged_entry_is_valid():
    assert db.entry_problems(good_entry()) == []
    assert db.entry_problems(json.loads(json.dumps(good_entry()))) == []


@pytest.mark.parametrize("change, words", [
    (lambda e: e.pop("iocost_model"), "missing key iocost_model"),
    (lambda e: [e.pop("model"), e.pop("qos")], "missing keys model, qos"),
    (lambda e: e.update(schema=2), "schema is 2; this collection reads schema 1"),
    (lambda e: e.update(schema="1"), "schema is '1'"),
    (lambda e: e.update(model=""), "model is '', not a non-empty string"),
    (lambda e: e.update(capacity_bytes=1.5), r"capacity_bytes is 1\.5"),
    (lambda e: e["iocost_model"].update(rbps=1.1e9), r"iocost_model\.rbps is 1100000000\.0, not a positive integer"),
    (lambda e: e["iocost_model"].update(wbps="5"), r"iocost_model\.wbps is '5'"),
    (lambda e: e["iocost_model"].pop("rrandiops"), r"iocost_model\.rrandiops is missing"),
    (lambda e: e["iocost_model"].update(ctrl="user"), "iocost_model has unknown key ctrl"),
    (lambda e: e.update(iocost_model=[1]), r"iocost_model is \[1\], not an object"),
    (lambda e: e["qos"].update(rlat=1.5), r"qos\.rlat is 1\.5, not a positive integer"),
    (lambda e: e["qos"].update(rpct=101), r"qos\.rpct is 101, not a percentile"),
    (lambda e: e["qos"].update(min=120), r"qos\.min \(120\) is above qos\.max"),
    (lambda e: e["qos"].pop("wpct"), r"qos\.wpct is missing"),
    (lambda e: e.update(qos="x"), "qos is 'x', not an object"),
])
def test_bad_entries_are_explained(change, words):
    entry = good_entry()
    change(entry)
    with pytest.raises(db.CalibrationError, match="the file is not a valid calibration entry: .*" + words):
        db.check_entry(entry, "the file")


def test_an_entry_without_qos_is_valid():
    entry = good_entry()
    entry["qos"] = None
    assert db.entry_problems(entry) == []
    assert db.entry_problems([]) == ["the entry is a list, not a JSON object"]


# ----------------------------------------------------------------------------------------------
# file names

def test_file_name_of_the_lab_disk():
    assert db.entry_file_name({"model": "QEMU NVMe Ctrl", "firmware": "7.2.0", "capacity_bytes": 1073741824}) \
        == "QEMU_NVMe_Ctrl__7.2.0__1073741824.json"


@pytest.mark.parametrize("model, firmware, name", [
    ("A_B", "1", "A%5FB__1__1.json"),
    ("A  B", "x y", "A%20%20B__x_y__1.json"),
    (" A ", "1", "%20A%20__1__1.json"),
    ("../../etc/passwd", "1", "%2E%2E%2F.%2E%2Fetc%2Fpasswd__1__1.json"),
    ("a..b", ".x", "a.%2Eb__%2Ex__1.json"),
    ("-rf", "1", "%2Drf__1__1.json"),
    ("Ünï 100%", "1", "%C3%9Cn%C3%AF_100%25__1__1.json"),
])
def test_file_names_encode_what_is_not_plain(model, firmware, name):
    got = db.entry_file_name({"model": model, "firmware": firmware, "capacity_bytes": 1})
    assert got == name
    assert db.parse_entry_file_name(got) == (model, firmware, 1)


@pytest.mark.parametrize("entry, words", [
    ({"model": "", "firmware": "1", "capacity_bytes": 1}, "must be non-empty strings"),
    ({"model": "a", "firmware": "1", "capacity_bytes": 0}, "capacity_bytes is 0"),
    ({"model": "a", "firmware": "1"}, "without capacity_bytes"),
    ({"model": "x" * 250, "firmware": "1", "capacity_bytes": 1}, "over the 255-byte limit"),
])
def test_unnameable_entries_are_refused(entry, words):
    with pytest.raises(db.CalibrationError, match=words):
        db.entry_file_name(entry)


@pytest.mark.parametrize("name", ["a__b.json", "a__b__c.json", "a____1.json", "a__b__1.txt", "%FF__b__1.json"])
def test_foreign_file_names_are_refused(name):
    with pytest.raises(db.CalibrationError):
        db.parse_entry_file_name(name)


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(model=TEXT, firmware=TEXT, capacity=st.integers(min_value=1, max_value=2 ** 64))
def test_file_names_round_trip_and_stay_in_the_directory(model, firmware, capacity):
    parts = (db.encode_component(model), db.encode_component(firmware), str(capacity))
    if len("__".join(parts) + ".json") > 255:
        with pytest.raises(db.CalibrationError, match="over the 255-byte limit"):
            db.entry_file_name({"model": model, "firmware": firmware, "capacity_bytes": capacity})
        return
    name = db.entry_file_name({"model": model, "firmware": firmware, "capacity_bytes": capacity})
    assert name == "__".join(parts) + ".json"
    assert "/" not in name and ".." not in name and "\0" not in name
    assert not name.startswith((".", "-", "_"))
    assert os.path.basename(name) == name and name.endswith(".json")
    assert set(name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._%")
    assert db.parse_entry_file_name(name) == (model, firmware, capacity)


@settings(max_examples=200, deadline=None)
@given(a=st.text(min_size=1, max_size=20), b=st.text(min_size=1, max_size=20))
def test_different_classes_get_different_names(a, b):
    names = {db.entry_file_name({"model": m, "firmware": "1", "capacity_bytes": 1}) for m in (a, b)}
    assert len(names) == (1 if a == b else 2)


# ----------------------------------------------------------------------------------------------
# loading a directory

def write(directory, name, entry):
    path = directory / name
    path.write_text(entry if isinstance(entry, str) else json.dumps(entry))
    return path


def test_a_missing_directory_is_an_empty_database(tmp_path):
    assert db.load_db(str(tmp_path / "nothing-yet")) == []
    assert db.load_db(str(tmp_path)) == []


def test_good_files_load_in_file_name_order(tmp_path):
    one = good_entry()
    two = dict(good_entry(), model="AAA Disk")
    write(tmp_path, db.entry_file_name(one), one)
    write(tmp_path, db.entry_file_name(two), two)
    write(tmp_path, "README.md", "not an entry")
    write(tmp_path, ".editor-swap.json", "{")
    (tmp_path / "reports").mkdir()
    loaded = db.load_db(str(tmp_path))
    assert [e["model"] for e in loaded] == ["AAA Disk", "QEMU NVMe Ctrl"]
    assert loaded[1] == json.loads(json.dumps(one))


@pytest.mark.parametrize("content, words", [
    ("{not json", r"QEMU_NVMe_Ctrl__7\.2\.22__1073741824\.json: not valid JSON: Expecting property name"),
    ("[]", "is not a valid calibration entry: the entry is a list"),
    ({"schema": 1}, "missing keys model, firmware, capacity_bytes, iocost_model, qos"),
    ("schema2", "schema is 2"),
    ("floatcoef", r"iocost_model\.rbps is 1100000000\.5, not a positive integer"),
    ("renamed", r"holds the entry of QEMU NVMe Ctrl firmware 7\.2\.23, 1073741824 bytes, which belongs in "
                r"QEMU_NVMe_Ctrl__7\.2\.23__1073741824\.json; rename"),
])
def test_each_kind_of_bad_file_names_the_file(tmp_path, content, words):
    entry = good_entry()
    if content == "schema2":
        content = dict(entry, schema=2)
    elif content == "floatcoef":
        entry["iocost_model"]["rbps"] = 1100000000.5
        content = entry
    elif content == "renamed":
        content = dict(entry, firmware="7.2.23")
    write(tmp_path, "QEMU_NVMe_Ctrl__7.2.22__1073741824.json", content)
    with pytest.raises(db.CalibrationError, match=str(tmp_path).replace(".", r"\.") + ".*" + words):
        db.load_db(str(tmp_path))


def test_not_utf8_and_not_a_directory_are_explained(tmp_path):
    (tmp_path / "x__y__1.json").write_bytes(b"\xff\xfe")
    with pytest.raises(db.CalibrationError, match="not UTF-8 text"):
        db.load_db(str(tmp_path))
    with pytest.raises(db.CalibrationError, match="is not a directory"):
        db.load_db(str(tmp_path / "x__y__1.json"))
    (tmp_path / "x__y__1.json").unlink()
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(db.CalibrationError, match="dir.json: not a regular file"):
        db.load_db(str(tmp_path))


def test_several_directories_one_class_each_and_relative_to_the_base(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = good_entry()
    write(tmp_path / "a", db.entry_file_name(one), one)
    other = dict(good_entry(), firmware="9.9")
    write(tmp_path / "b", db.entry_file_name(other), other)
    assert [e["firmware"] for e in db.load_db("a", str(tmp_path / "b"), basedir=str(tmp_path))] == ["7.2.22", "9.9"]
    write(tmp_path / "b", db.entry_file_name(one), one)
    with pytest.raises(db.CalibrationError, match=r"a/QEMU_NVMe_Ctrl__7\.2\.22__1073741824\.json and .*b/QEMU_NVMe"
                                                  r".* hold the same hardware class \(QEMU NVMe Ctrl firmware 7\.2\.22, "
                                                  r"1073741824 bytes\); keep one"):
        db.load_db(str(tmp_path / "a"), str(tmp_path / "b"))
    with pytest.raises(db.CalibrationError, match="a database is a directory path, got ''"):
        db.load_db("")


# ----------------------------------------------------------------------------------------------
# writing an entry

def test_the_written_file_is_what_to_nice_json_wrote_and_reads_back(tmp_path):
    from ansible.plugins.filter.core import to_nice_json
    entry = db.merge_results(results())
    text = db.entry_file_text(entry)
    assert text == to_nice_json(entry, sort_keys=True) + "\n"
    write(tmp_path, db.entry_file_name(entry), text)
    assert db.load_db(str(tmp_path)) == [json.loads(json.dumps(entry))]


def test_an_entry_that_would_not_read_back_is_not_written():
    entry = db.merge_results(results())
    entry["qos"]["rpct"] = 150
    with pytest.raises(db.CalibrationError, match=r"the calibration entry to write is not a valid calibration entry: "
                                                  r"qos\.rpct is 150"):
        db.entry_file_text(entry)


def test_the_report_is_named_after_the_database_file():
    assert db.report_file_name(good_entry()) == "QEMU_NVMe_Ctrl__7.2.22__1073741824.html"


def test_the_error_is_the_collections_one():
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as _calibrate
    assert db.CalibrationError is _calibrate.CalibrationError


# ----------------------------------------------------------------------------------------------
# matching a disk

DISK = {"name": "nvme0n1", "model": "QEMU NVMe Ctrl", "firmware": "7.2.22", "size_bytes": 1073741824}


def test_a_disk_takes_its_class_else_its_model_and_capacity_with_a_warning_never_another_size():
    exact, other_fw = good_entry(), dict(good_entry(), firmware="8.0")
    assert db.match_entry(DISK, [other_fw, exact]) == (exact, None)
    entry, warning = db.match_entry(DISK, [other_fw])
    assert entry is other_fw and warning == ("nvme0n1: no calibration for firmware 7.2.22 of QEMU NVMe Ctrl; using "
                                             "the one measured on firmware 8.0")
    assert db.match_entry(DISK, [dict(exact, capacity_bytes=2147483648)]) == (None, None)
    assert db.match_entry(dict(DISK, size_bytes=None), [exact]) == (None, None)
    # hand-written entries (io_baseline_calibration_db) need only the class keys
    assert db.match_entry(DISK, [{"model": "QEMU NVMe Ctrl", "firmware": "7.2.22", "capacity_bytes": 1073741824}])[0]


def test_a_result_and_a_disk_have_the_class_of_their_entry():
    entry = db.merge_results(results())
    assert db.device_class(RESULTS[0]["device"]) == db.entry_class(entry) == db.device_class(DISK)


# ----------------------------------------------------------------------------------------------
# hwdb

KNOWN = {"schema": 1, "model": "Vendor SSD 7000", "firmware": "FW-1.0", "capacity_bytes": 3840755982336,
         "iocost_model": {"rbps": 3000000000, "rseqiops": 400000, "rrandiops": 350000, "wbps": 2000000000,
                          "wseqiops": 300000, "wrandiops": 90000},
         "qos": {"rpct": 99.0, "rlat": 800, "wpct": 95.5, "wlat": 2500, "min": 60.0, "max": 100.0},
         "repeats": 3, "date": "2026-12-01T10:00:00Z", "host": "calib-01", "device": {"kind": "nvme"}}

KNOWN_TEXT = db.HWDB_HEADER + """\
#   Vendor SSD 7000 | FW-1.0 | 3840755982336 bytes (3.49 TiB) | 2026-12-01T10:00:00Z, 3 repeats on calib-01 -> \
Vendor_SSD_7000__FW-1.0__3840755982336.json

# Vendor SSD 7000, firmware FW-1.0, calibrated on 3.49 TiB (3840755982336); source \
Vendor_SSD_7000__FW-1.0__3840755982336.json
block:*:name:Vendor SSD 7000:fwrev:FW-1.0:
 IOCOST_SOLUTIONS=naive
 IOCOST_MODEL_NAIVE=rbps=3000000000 rseqiops=400000 rrandiops=350000 wbps=2000000000 wseqiops=300000 wrandiops=90000
 IOCOST_QOS_NAIVE=rpct=99 rlat=800 wpct=95.5 wlat=2500 min=60 max=100
"""


def test_hwdb_text_of_a_known_entry():
    assert db.hwdb_fragment([KNOWN]) == KNOWN_TEXT


def test_hwdb_header_says_who_manages_it_and_the_model_caveat():
    text = db.hwdb_fragment([])
    assert "Managed by aiinfra.io_isolation" in text
    assert "EVERY drive of that model and" in text and "#   (none)" in text
    assert all(line.startswith("#") or not line for line in text.splitlines())


@pytest.mark.parametrize("solution, key", [("naive", "NAIVE"), ("isolated-bandwidth", "ISOLATED_BANDWIDTH"),
                                           ("Bandwidth_2", "BANDWIDTH_2")])
def test_solution_names_are_mangled_as_systemd_does(solution, key):
    text = db.hwdb_fragment([KNOWN], solution=solution)
    assert " IOCOST_SOLUTIONS=%s\n" % solution in text
    assert " IOCOST_MODEL_%s=rbps=3000000000 " % key in text and " IOCOST_QOS_%s=rpct=99 " % key in text


def test_hwdb_lists_the_measured_solutions_after_the_entrys_own_qos():
    figures = {"vrate": 40, "probe_p99_ratio": 1.16, "antagonist_share": 0.08}
    # as the solution phase writes them: latency targets kept from the model's QoS where the percentile is 0
    solutions = {"bandwidth": dict(figures, qos={"rpct": 0, "rlat": 56250, "wpct": 0, "wlat": 47000, "min": 100,
                                                 "max": 100}),
                 "isolation": dict(figures, qos={"rpct": 0, "rlat": 56250, "wpct": 0, "wlat": 47000, "min": 40, "max": 40}),
                 "latency": dict(figures, qos={"rpct": 95, "rlat": 1650, "wpct": 0, "wlat": 47000, "min": 10,
                                               "max": 100})}
    text = db.hwdb_fragment([dict(KNOWN, solutions=solutions)])
    record = text.split("block:*:", 1)[1]
    # systemd's helper takes TargetSolution= when listed, else the first: the entry's own QoS stays the default
    assert " IOCOST_SOLUTIONS=naive isolation latency bandwidth\n" in record
    assert " IOCOST_QOS_ISOLATION=rpct=0 rlat=56250 wpct=0 wlat=47000 min=40 max=40\n" in record
    assert " IOCOST_QOS_LATENCY=rpct=95 rlat=1650 wpct=0 wlat=47000 min=10 max=100\n" in record
    assert " IOCOST_QOS_BANDWIDTH=rpct=0 rlat=56250 wpct=0 wlat=47000 min=100 max=100\n" in record
    # every solution has the measured model; the entry without solutions exports as before
    assert record.count(" IOCOST_MODEL_") == 4 and record.count("rbps=3000000000 ") == 4
    assert db.hwdb_fragment([KNOWN]) == KNOWN_TEXT
    with pytest.raises(db.CalibrationError, match="has a measured 'isolation' solution of its own"):
        db.hwdb_fragment([dict(KNOWN, solutions=solutions)], solution="isolation")


@pytest.mark.parametrize("solution", ["", "two words", "a/b", None, "naïve"])
def test_bad_solution_names_are_refused(solution):
    with pytest.raises(db.CalibrationError, match="solution name"):
        db.hwdb_fragment([KNOWN], solution=solution)


@pytest.mark.parametrize("model, kind, match", [
    ("Foo*Bar #1 [x]\\y", "nvme", "Foo?Bar ?1 ?x]?y"),
    ("SAMSUNG MZ7L3960HCJR", "scsi", "SAMSUNG*MZ7L3960HCJR"),
    ("HGST  HUS 726", "scsi", "HGST*HUS*726"),
    ("QEMU NVMe Ctrl", None, "QEMU NVMe Ctrl"),
])
def test_match_text_carries_no_glob_or_comment_characters(model, kind, match):
    assert db.udev_model_pattern(model, kind, "model") == match


def test_non_ascii_models_are_refused():
    with pytest.raises(db.CalibrationError, match=r"model 'Disk\\tX' has characters a hwdb match line cannot carry"):
        db.udev_model_pattern("Disk\tX", "nvme", "model")
    with pytest.raises(db.CalibrationError, match="cannot carry"):
        db.hwdb_fragment([dict(KNOWN, model="Ünï")])


def test_one_model_and_firmware_with_two_capacities_is_refused():
    small = dict(KNOWN, capacity_bytes=960197124096)
    with pytest.raises(db.CalibrationError, match=r"Vendor SSD 7000 firmware FW-1\.0 has 2 entries "
                                                  r"\(960197124096, 3840755982336 bytes\).*model and firmware only"):
        db.hwdb_fragment([KNOWN, small])
    # another firmware is another match line
    text = db.hwdb_fragment([KNOWN, dict(small, firmware="FW-2.0")])
    assert text.count("\nblock:*:name:Vendor SSD 7000:fwrev:") == 2


def test_entries_without_qos_or_invalid_are_refused():
    with pytest.raises(db.CalibrationError, match=r"^Vendor SSD 7000 firmware FW-1\.0, 3840755982336 bytes has no "
                                                  r"QoS \(calibrated with measure_qos=false\)"):
        db.hwdb_fragment([dict(KNOWN, qos=None)])
    with pytest.raises(db.CalibrationError, match=r"entry 2 .*iocost_model\.rbps"):
        db.hwdb_fragment([KNOWN, dict(KNOWN, firmware="2", iocost_model=dict(KNOWN["iocost_model"], rbps=0))])
    with pytest.raises(db.CalibrationError, match="needs a list"):
        db.hwdb_fragment("x")


def test_skip_unexportable_leaves_them_out_and_says_so():
    entries = [KNOWN, dict(KNOWN, capacity_bytes=960197124096), dict(KNOWN, model="No QoS", qos=None),
               dict(KNOWN, model="Tab\tModel"), dict(KNOWN, model="Good", firmware="2"),
               dict(KNOWN, model="New\nLine", qos=None)]
    text = db.hwdb_fragment(entries, skip_unexportable=True)
    records = parse_records(text)
    assert [record[0] for record in records] == [["block:*:name:Good:fwrev:2:"]]
    tail = text[text.index("# NOT EXPORTED:"):text.index("\n\n")]
    assert "#   Vendor SSD 7000 firmware FW-1.0 has 2 entries (960197124096, 3840755982336 bytes)" in tail
    assert "#   No QoS firmware FW-1.0, 3840755982336 bytes has no QoS" in tail
    assert "#   entry 4 (Tab\\tModel): model 'Tab\\tModel' has characters" in tail
    assert "#   New\\nLine firmware FW-1.0" in tail
    assert "\n" not in tail.replace("\n#", "")  # every reason stays a comment line
    assert db.hwdb_fragment([KNOWN], skip_unexportable=True) == KNOWN_TEXT


def test_two_spellings_with_one_match_line_are_a_conflict():
    with pytest.raises(db.CalibrationError, match=r"for the one match line block:\*:name:A\?B:fwrev:FW-1\.0:"):
        db.hwdb_fragment([dict(KNOWN, model="A*B"), dict(KNOWN, model="A?B", capacity_bytes=1)])


def test_records_are_sorted_by_model_and_firmware():
    text = db.hwdb_fragment([dict(KNOWN, model="Zed"), dict(KNOWN, model="Abc")])
    assert text.index("name:Abc:") < text.index("name:Zed:")


# The lab proof (tests/unit/plugins/plugin_utils/fixtures/calibration_hwdb/): what systemd 257 on
# Debian 13 did with the records this code rendered.

def parse_records(text):
    """[(match lines, {property: value})] as systemd-hwdb reads a hwdb file."""
    records, matches, props = [], [], {}
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line:
            if matches:
                records.append((matches, props))
            matches, props = [], {}
        elif line.startswith(" "):
            key, value = line[1:].split("=", 1)
            props[key] = value
        else:
            matches.append(line)
    return records


def hwdb_query(text, key):
    found = {}
    for matches, props in parse_records(text):
        if any(fnmatch.fnmatchcase(key, m) for m in matches):
            found.update(props)
    return ["%s=%s" % kv for kv in sorted(found.items())]


@pytest.mark.parametrize("case", LAB["cases"], ids=lambda c: c["entry"]["model"])
def test_lab_records_are_what_we_render(case):
    text = db.hwdb_fragment([case["entry"]], solution=case["solution"])
    assert text.endswith("\n" + case["records"])


@pytest.mark.parametrize("case", LAB["cases"], ids=lambda c: c["entry"]["model"])
def test_lab_lookups_match_what_systemd_hwdb_answered(case):
    for query in case["queries"]:
        got = hwdb_query(case["records"], query["key"])
        assert got[:len(query["output"])] == query["output"], query["key"]
        assert bool(got) == bool(query["output"])


def test_lab_key_is_built_from_the_udev_properties():
    props = LAB["udev_properties"]
    assert "block::name:$env{.MODEL}:fwrev:$env{ID_REVISION}:" in LAB["rule_import"]
    key = "block::name:%s:fwrev:%s:" % (props["ID_MODEL"], props["ID_REVISION"])
    assert key == LAB["cases"][0]["queries"][0]["key"]
    # udev's ID_MODEL is the sysfs attribute without its trailing blanks (what io_facts reports)
    assert props["ID_MODEL"] == LAB["sysfs"]["model"].rstrip() == LAB["cases"][0]["entry"]["model"]
    assert props["ID_REVISION"] == LAB["sysfs"]["firmware_rev"].rstrip()
    model = LAB["cases"][0]["entry"]["iocost_model"]
    assert LAB["kernel_after_apply"]["io.cost.model"].endswith(
        " ".join("%s=%d" % (k, model[k]) for k in db.COEFS))


def test_human_bytes():
    assert db.human_bytes(1073741824) == "1 GiB"
    assert db.human_bytes(512) == "512 B"
    assert db.human_bytes(1536) == "1.5 KiB"
