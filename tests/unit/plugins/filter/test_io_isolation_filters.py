# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' planning filters: disk selection, iocost model sources, io.max shares, RAM shares."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns.iocost import KERNEL_CLASSES

WWID_A = "nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"


def disk(name, majmin, serial, kind="nvme", rotational=False, wwid=None, model="QEMU NVMe Ctrl", firmware="9.2.0",
         size=1073741824):
    return {"identity": {"name": name, "majmin": majmin, "serial": serial, "kind": kind, "rotational": rotational,
                         "wwid": wwid, "model": model, "firmware": firmware, "size_bytes": size, "has_mq": True,
                         "by_id": ["nvme-QEMU_NVMe_Ctrl_%s" % serial] if kind == "nvme" else ["virtio-%s" % serial],
                         "by_path": [], "stable_id": ("wwn:" + wwid) if wwid else serial and "serial:" + serial,
                         "stable_selector": wwid or serial},
            "iocost": {"enabled": False}}


FACTS = {"devices": {
    "nvme0n1": disk("nvme0n1", "259:0", "lab-nvme-a", wwid=WWID_A),
    "nvme1n1": disk("nvme1n1", "259:1", "lab-nvme-b", size=2147483648),
    "vda": disk("vda", "254:0", "lab-root", kind="virtio"),
    "sda": disk("sda", "8:0", "HDD1", kind="scsi", rotational=True),
}}
NVME_QUERY = "[?identity.kind=='nvme' && identity.rotational==`false`]"


def names(disks):
    return sorted(d["identity"]["name"] for d in disks)


def test_query_selects_the_nvme_namespaces():
    assert names(f.select_disks(FACTS, [], NVME_QUERY)) == ["nvme0n1", "nvme1n1"]
    assert names(f.select_disks(FACTS, [], "[?identity.rotational]")) == ["sda"]
    assert f.select_disks(FACTS, [], "[?identity.kind=='md']") == []


@pytest.mark.parametrize("selector", ["lab-nvme-a", "/dev/nvme0n1", "259:0", WWID_A, "wwn:" + WWID_A,
                                      "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab-nvme-a", "nvme0n1"])
def test_explicit_selectors_win_over_the_query(selector):
    assert names(f.select_disks(FACTS, [selector, "lab-nvme-a"], NVME_QUERY)) == ["nvme0n1"]


def test_unknown_selector_names_the_disks():
    with pytest.raises(AnsibleFilterError, match=r"no disk on this host matches nope.*nvme0n1 serial lab-nvme-a"):
        f.select_disks(FACTS, ["lab-nvme-a", "nope"], None)


@pytest.mark.parametrize("query, words", [("[?identity.kind=='nvme'", "not valid JMESPath"),
                                          ("[].identity.name", "must return a list of io_facts devices")])
def test_bad_queries_are_explained(query, words):
    with pytest.raises(AnsibleFilterError, match=words):
        f.select_disks(FACTS, [], query)


MODEL = {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000, "wbps": 1000000000, "wseqiops": 50000,
         "wrandiops": 50000}
QOS = {"rpct": 95, "rlat": 2000, "wpct": 95, "wlat": 10000, "min": 10, "max": 100}
CAL = {"model": "QEMU NVMe Ctrl", "firmware": "9.2.0", "capacity_bytes": 1073741824,
       "iocost_model": dict(MODEL, rbps=1500000000), "qos": dict(QOS, rlat=1500)}


def test_model_sources_in_order():
    disks = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"], FACTS["devices"]["vda"]]
    plan = f.iocost_plan(disks, {"vda": MODEL}, [CAL], QOS)
    # nvme0n1: calibration (model, firmware, capacity); nvme1n1: another capacity -> kernel; vda: explicit
    assert plan["sources"] == {WWID_A: "calibration", "lab-nvme-b": "kernel", "lab-root": "explicit"}
    a, b, v = plan["devices"]
    # The QoS is the common one for every disk: a calibration entry gives the model only.
    assert a == {"device": WWID_A, "model": CAL["iocost_model"], "qos": QOS}
    assert b == {"device": "lab-nvme-b", "model": {"ctrl": "auto"}, "qos": QOS}
    assert v["model"] == MODEL and plan["warnings"] == []


def test_disks_on_the_kernels_class_are_named_with_the_class_an_entry_would_need():
    disks = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"], FACTS["devices"]["vda"]]
    plan = f.iocost_plan(disks, {"vda": MODEL}, [CAL], QOS)
    nvme1 = FACTS["devices"]["nvme1n1"]["identity"]
    # only nvme1n1 (no entry of its capacity); calibrated and explicit disks are not listed
    assert plan["uncalibrated"] == [{"device": "lab-nvme-b", "name": "nvme1n1", "model": nvme1["model"],
                                     "firmware": nvme1["firmware"], "capacity_bytes": nvme1["size_bytes"]}]
    assert [u["name"] for u in f.iocost_plan(disks, {}, [], QOS)["uncalibrated"]] == ["nvme0n1", "nvme1n1", "vda"]


def test_calibration_qos_only_when_asked_for():
    disks = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"]]
    a, b = f.iocost_plan(disks, {}, [CAL], QOS, True)["devices"]
    assert a["qos"] == CAL["qos"] and a["qos"]["rlat"] == 1500
    assert b["qos"] == QOS                   # no entry for that capacity: the common QoS
    # An entry without a QoS (measure_qos: false) falls back to the common one.
    a, = f.iocost_plan(disks[:1], {}, [dict(CAL, qos=None)], QOS, True)["devices"]
    assert a["qos"] == QOS


def test_a_calibrated_model_is_never_over_committed():
    """On a calibration entry's model the QoS max is capped (the model is the disk's capacity); explicit models
    and the kernel's class keep the QoS as given."""
    disks = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"], FACTS["devices"]["vda"]]
    roles_qos = dict(QOS, max=10000)
    a, b, v = f.iocost_plan(disks, {"vda": MODEL}, [CAL], roles_qos, False, 100)["devices"]
    assert a["qos"] == dict(roles_qos, max=100)
    assert b["qos"] == roles_qos and v["qos"] == roles_qos
    # the entry's own QoS is capped too; a max already below the cap, or no cap, is left alone
    a, = f.iocost_plan(disks[:1], {}, [dict(CAL, qos=dict(QOS, max=400))], roles_qos, True, 100)["devices"]
    assert a["qos"] == dict(QOS, max=100, rlat=2000)
    assert f.iocost_plan(disks[:1], {}, [CAL], dict(QOS, max=80), False, 100)["devices"][0]["qos"]["max"] == 80
    assert f.iocost_plan(disks[:1], {}, [CAL], roles_qos)["devices"][0]["qos"] == roles_qos


@pytest.mark.parametrize("qos, vrate_max, expected", [
    ({"min": 10, "max": 10000}, 100, {"min": 10, "max": 100}),
    ({"min": 150, "max": 10000}, 100, {"min": 100, "max": 100}),   # min above the cap comes down with it
    ({"rpct": 95}, 100, {"rpct": 95, "max": 100}),                  # no max given: the kernel's could be above
    ({"min": 10, "max": 60}, 100, {"min": 10, "max": 60}),
    ({"min": 10, "max": 10000}, None, {"min": 10, "max": 10000}),
    (None, 100, None),
])
def test_calibrated_qos(qos, vrate_max, expected):
    assert f.calibrated_qos(qos, vrate_max) == expected


def test_calibration_of_another_firmware_is_used_with_a_warning():
    plan = f.iocost_plan([FACTS["devices"]["nvme0n1"]], {}, [dict(CAL, firmware="8.0.0")], QOS)
    assert plan["sources"][WWID_A] == "calibration"
    assert "firmware 9.2.0" in plan["warnings"][0] and "8.0.0" in plan["warnings"][0]


def test_the_plan_knows_each_disks_model_before_the_apply():
    held = dict(disk("nvme2n1", "259:2", "lab-nvme-c", model="Fast NVMe"), iocost={"enabled": True, "model": dict(
        ctrl="auto", model="linear", rbps=3102524156, rseqiops=724816, rrandiops=778122, wbps=1742780862,
        wseqiops=425702, wrandiops=443193)})
    qd1 = dict(disk("sdb", "8:16", "SSD1", kind="scsi", model="Old SSD"), queue={"nr_requests": 1})
    spinning = disk("sdc", "8:32", "HDD2", kind="scsi", rotational=True, model="Spinning Disk")
    disks = [FACTS["devices"]["nvme0n1"], FACTS["devices"]["nvme1n1"], spinning, held, qd1]
    plan = f.iocost_plan(disks, {"lab-nvme-b": {"rbps": "2GB", "wrandiops": 60000}}, [CAL], QOS)
    a, b, hdd, fast, ssd_qd1 = plan["disks"]
    assert a == {"device": WWID_A, "model": CAL["iocost_model"]}           # calibrated
    # a partial explicit model keeps the class's other coefficients (what the kernel does)
    assert b["model"] == dict(KERNEL_CLASSES["ssd_dfl"], rbps=2000000000, wrandiops=60000)
    assert hdd["model"] == KERNEL_CLASSES["hdd"]                             # rotational: the kernel's hdd class
    assert fast["model"]["rbps"] == 3102524156                               # iocost runs: what the kernel holds
    assert ssd_qd1["model"] == KERNEL_CLASSES["ssd_qd1"]
    caps = f.io_max_caps(plan["disks"], {"wbps": "50%"})
    assert caps["lab-nvme-b"] == {"wbps": KERNEL_CLASSES["ssd_dfl"]["wbps"] // 2}
    with pytest.raises(AnsibleFilterError, match="rbps='fast' for lab-nvme-b is not a number"):
        f.iocost_plan(disks[1:2], {"lab-nvme-b": {"rbps": "fast"}}, [], QOS)


def test_group_entries():
    assert f.group_entries(["a/b", "c"], {"io": {"prio_class": "idle"}}, "inference group ") == {
        "a/b": {"io": {"prio_class": "idle"}, "name": "a/b", "label": "inference group a/b"},
        "c": {"io": {"prio_class": "idle"}, "name": "c", "label": "inference group c"}}
    assert f.group_entries([], {}) == {}


def test_disk_without_stable_identity_is_refused():
    nameless = disk("vdb", "254:16", None, kind="virtio")
    nameless["identity"]["by_id"] = []
    with pytest.raises(AnsibleFilterError, match="vdb has no stable identity"):
        f.iocost_plan([nameless])


KERNEL_CLASS = {"ctrl": "auto", "rbps": 1370000000, "rrandiops": 100000, "wbps": 600000000, "wrandiops": 40000}
RESULTS = [{"device": FACTS["devices"]["nvme0n1"]["identity"], "model": dict(MODEL, ctrl="user")},
           {"device": FACTS["devices"]["nvme1n1"]["identity"], "model": KERNEL_CLASS}]


def test_io_max_caps_as_a_share_of_each_model():
    caps = f.io_max_caps(RESULTS, {"wbps": "90%", "riops": "50%", "rbps": "200MB"})
    assert caps == {WWID_A: {"wbps": 900000000, "riops": 50000, "rbps": "200MB"},
                    "lab-nvme-b": {"wbps": 540000000, "riops": 50000, "rbps": "200MB"}}
    assert f.io_max_caps(RESULTS, {"rbps": "max"}) == {WWID_A: {"rbps": "max"}, "lab-nvme-b": {"rbps": "max"}}


@pytest.mark.parametrize("caps, words", [({"wbps": "0%"}, "above 0"), ({"wbps": "150%"}, "at most 100"),
                                         ({"wbps": "ninety%"}, "not a percentage"), ({"riopz": 5}, "use rbps")])
def test_bad_caps_are_explained(caps, words):
    with pytest.raises(AnsibleFilterError, match=words):
        f.io_max_caps(RESULTS, caps)


def test_share_of_a_disk_without_model_is_refused():
    with pytest.raises(AnsibleFilterError, match="no iocost model"):
        f.io_max_caps([{"device": FACTS["devices"]["vda"]["identity"], "model": None}], {"wbps": "50%"})


def test_ram_share_and_passthrough():
    assert f.ram_share("20%", 2000000000) == 400000000
    assert f.ram_share("8G", 2000000000) == "8G" and f.ram_share(0, None) == 0 and f.ram_share("max", 1) == "max"
    with pytest.raises(AnsibleFilterError, match="memory size is unknown"):
        f.ram_share("20%", None)
    with pytest.raises(AnsibleFilterError, match="between 0% and 100%"):
        f.ram_share("120%", 1000)


def test_per_disk_and_entries_use_stable_selectors():
    assert f.per_disk(RESULTS, 2000) == {WWID_A: 2000, "lab-nvme-b": 2000}
    assert f.disk_entries([{"device": "lab-nvme-b"}], {"scheduler": "none"}) == [
        {"scheduler": "none", "device": "lab-nvme-b"}]
    assert f.disk_entries(RESULTS, {}) == [{"device": WWID_A}, {"device": "lab-nvme-b"}]
    # io_facts devices (as purge.yml passes them)
    assert f.disk_entries([FACTS["devices"]["vda"]], {}) == [{"device": "lab-root"}]
    assert f.per_disk([FACTS["devices"]["nvme0n1"]], 1) == {WWID_A: 1}
    # a disk whose only stable identity is its by-path link (a VM's root disk without a serial): the
    # resolver's choice is used, so purge and the roles never stop on it
    by_path = {"identity": {"name": "vda", "serial": None, "wwid": None, "by_id": [], "by_path": ["pci-0000:00:04.0"],
                            "stable_id": "by-path:pci-0000:00:04.0",
                            "stable_selector": "/dev/disk/by-path/pci-0000:00:04.0"}}
    assert f.disk_entries([by_path], {}) == [{"device": "/dev/disk/by-path/pci-0000:00:04.0"}]
    with pytest.raises(AnsibleFilterError, match="loop0 has no stable identity .loop devices are numbered"):
        f.disk_entries([{"identity": {"name": "loop0", "stable_selector": None,
                                      "stable_id_note": "loop devices are numbered at attach time"}}], {})
    assert set(f.FilterModule().filters()) == {"select_disks", "iocost_plan", "io_max_caps", "ram_share", "per_disk",
                                               "disk_entries", "group_entries", "drift_summary", "qos_source_text",
                                               "verify_drift", "inference_plan", "training_plan", "baseline_plan",
                                               "tenancy_request", "tenancy_findings", "cpu_placement"}


def test_drift_summary_lines():
    cgroup = {"changed": True, "diff": {
        "before": {"training.slice": {"files": {"/etc/x.conf": "a"}, "kernel": {},
                                      "drift": [{"file": "io.weight", "key": "default", "want": 100, "have": 500}]}},
        "after": {"training.slice": {"files": {"/etc/x.conf": "a"}, "kernel": {}}}}}
    iocost = {"changed": True, "diff": {"before": {"io.cost.qos[259:0]": {"rlat": 5000}, "/etc/udev/r.rules": "x"},
                                        "after": {"io.cost.qos[259:0]": {"rlat": 7000}, "/etc/udev/r.rules": "y"}}}
    files = {"changed": True, "diff": {"before": {"s": {"files": {"/etc/a": "1"}}}, "after": {"s": {"files": {"/etc/a": "2"}}}}}
    lines = f.drift_summary({"training slice": cgroup, "iocost": iocost, "same": {"changed": False}, "files": files,
                             "bare": {"changed": True}})
    assert lines == ["bare: would change",
                     "files: s: file /etc/a differs",
                     "iocost: file /etc/udev/r.rules differs",
                     "iocost: io.cost.qos[259:0]: {'rlat': 5000} -> {'rlat': 7000}",
                     "training slice: training.slice io.weight default: want 100, have 500"]
    assert f.drift_summary({"x": {"changed": False}}) == []
    # a single-value file (its key is its own name) is named once
    cpus = {"changed": True, "diff": {"before": {"inference.slice": {"files": {}, "kernel": {}, "drift": [
        {"file": "cpuset.cpus", "key": "cpuset.cpus", "want": [1], "have": [0, 1]}]}},
        "after": {"inference.slice": {"files": {}, "kernel": {}}}}}
    assert f.drift_summary({"inference slice": cpus}) == [
        "inference slice: inference.slice cpuset.cpus: want [1], have [0, 1]"]


def test_drift_summary_names_the_services_outside_their_slice():
    placed = {"changed": False, "restart_required": ["vllm.service"], "diff": {"before": {}, "after": {}},
              "units": {"vllm.service": {"slice": "inference.slice", "cgroup": "/system.slice/vllm.service"}}}
    assert f.drift_summary({"placement": placed}) == [
        "placement: vllm.service runs in /system.slice/vllm.service, outside inference.slice, until it is restarted "
        "(io_isolation_restart_ok)"]
    dropin = "/etc/systemd/system/vllm.service.d/90-aiinfra-io-isolation-slice.conf"
    written = dict(placed, changed=True, diff={
        "before": {dropin: None, "daemon-reload": [dropin], "vllm.service": {"slice": "system.slice"}},
        "after": {dropin: "[Service]\nSlice=inference.slice\n", "daemon-reload": [], "vllm.service": {"slice": "inference.slice"}}})
    assert f.drift_summary({"placement": written})[1:] == [
        "placement: file %s would be created" % dropin,
        "placement: vllm.service: {'slice': 'system.slice'} -> {'slice': 'inference.slice'}"]


def test_drift_summary_names_what_is_wrong_with_a_boost_window():
    window = {"window_end": "2026-12-04T02:10:01Z", "timer": "aiinfra-io-isolation-boost-training.timer",
              "timer_state": "waiting", "active": False, "expired": True, "orphaned": False, "only_difference": True}
    cgroup = {"changed": True, "boost": window, "diff": {
        "before": {"boost window training.slice": {"window_end": "2026-12-04T02:10:01Z", "timer": "waiting"},
                   "training.slice": {"files": {}, "kernel": {}, "drift": [
                       {"file": "io.max", "key": "259:0.wbps", "want": 50000000, "have": "max"}]}},
        "after": {"boost window training.slice": {"window_end": None, "timer": None},
                  "training.slice": {"files": {}, "kernel": {}}}}}
    assert f.drift_summary({"training slice": cgroup}) == [
        "training slice: boost window ended at 2026-12-04T02:10:01Z, but the caps are still lifted "
        "(aiinfra-io-isolation-boost-training.timer: waiting)",
        "training slice: training.slice io.max 259:0.wbps: want 50000000, have max"]
    orphaned = dict(cgroup, boost=dict(window, expired=False, orphaned=True, timer_state=None))
    assert f.drift_summary({"t": orphaned})[0] == (
        "t: boost window until 2026-12-04T02:10:01Z has no timer to end it "
        "(aiinfra-io-isolation-boost-training.timer is not loaded)")
    gone = dict(cgroup, boost=dict(window, orphaned=True, timer_state=None))
    assert f.drift_summary({"t": gone})[0].endswith("still lifted (aiinfra-io-isolation-boost-training.timer: not loaded)")
    open_window = dict(cgroup, boost=dict(window, expired=False, active=True, only_difference=False))
    assert f.drift_summary({"t": open_window})[0] == "t: in a boost window until 2026-12-04T02:10:01Z, and drifted besides it:"


def test_verify_drift_keeps_what_would_change_and_forgives_an_open_boost_window_alone():
    changed, same = {"changed": True, "diff": {"before": {"a": 1}, "after": {"a": 2}}}, {"changed": False}
    got = f.verify_drift({"iocost": changed, "sysctl": same}, {"slice": same, "groups": {"llm": changed, "emb": same}},
                         {"slice": changed})
    assert got == {"drift": {"iocost": changed, "inference group llm": changed, "training slice": changed},
                   "boost": None}
    # a service running outside its slice is drift, though nothing would be written
    placed = {"changed": False, "restart_required": ["vllm.service"],
              "units": {"vllm.service": {"slice": "inference.slice", "cgroup": "/system.slice/vllm.service"}}}
    assert f.verify_drift({"placement": placed, "sysctl": same})["drift"] == {"placement": placed}
    assert f.verify_drift({"placement": dict(placed, restart_required=[])})["drift"] == {}
    # a host with neither tenant role, or results without a slice
    assert f.verify_drift({"sysctl": same}) == {"drift": {}, "boost": None}
    assert f.verify_drift({}, {}, {"slice": None}) == {"drift": {}, "boost": None}
    # the training slice in an open window that is its only difference: no drift, and the window is reported
    window = {"active": True, "only_difference": True, "window_end": "2026-12-06T14:00:00Z"}
    got = f.verify_drift({}, None, {"slice": dict(changed, boost=window)})
    assert got == {"drift": {}, "boost": window}
    # a window past its end, or one beside other drift, stays drift
    for boost in (dict(window, active=False), dict(window, only_difference=False)):
        got = f.verify_drift({}, None, {"slice": dict(changed, boost=boost)})
        assert list(got["drift"]) == ["training slice"] and got["boost"] == boost
