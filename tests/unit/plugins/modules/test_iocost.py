# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""iocost through AnsibleModule against a fake host whose io.cost.* behave like the kernel's."""

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import iocost_apply as _boot_iocost_apply
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import IOCOST_HELPER
from ansible_collections.aiinfra.io_isolation.plugins.modules import iocost
from sim.host import FakeHost
from sim.iocost import SimIocost
from sim.kernel import SimKernel
from sim.lab import lab_host

MODEL = {"rbps": "2GB", "rseqiops": 100000, "rrandiops": 100000, "wbps": 1000000000, "wseqiops": 50000,
         "wrandiops": 50000}
QOS = {"rpct": 95, "rlat": 5000, "wpct": 95, "wlat": 5000, "min": 50, "max": 150}
NVME_A_WWID = "nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001"


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    """A host like the lab VM: two QEMU NVMe disks (259:0, 259:1), a virtio disk with a partition."""
    h = lab_host(tmp_path, vda={"partitions": 1}, cgroup={})
    sim = SimKernel(h.root)
    kernel = SimIocost(sim, devices=("259:0", "259:1", "254:0"))
    monkeypatch.setattr(iocost, "KernelFS", lambda: sim)
    h.sim, h.kernel = sim, kernel
    h.run = lambda **args: run_module(iocost.main, **args)
    return h


def etc_files(host):
    out = []
    for base in ("etc", "usr"):
        for dirpath, _dirs, files in os.walk(os.path.join(host.root, base)):
            out.extend(os.path.join(dirpath, f) for f in files)
    return sorted(out)


def test_present_applies_model_then_qos_and_persists_by_identity(lab):
    result = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS)
    assert not result.get("failed"), result
    assert result["changed"] and result["device"]["majmin"] == "259:0"
    assert [p.rsplit("/", 1)[1] for p, _line in lab.sim.writes] == ["io.cost.model", "io.cost.qos"]
    assert result["model"]["rbps"] == 2000000000 and result["model"]["ctrl"] == "user"
    assert result["qos"] == {"enable": 1, "ctrl": "user", "rpct": "95.00", "rlat": 5000, "wpct": "95.00",
                             "wlat": 5000, "min": "50.00", "max": "150.00"}
    rule_file = result["persisted_to"][0]
    assert rule_file.startswith("/etc/udev/rules.d/91-aiinfra-iocost-") and "259" not in rule_file
    rule = open(lab.sim.path(rule_file)).read()
    assert "Managed by Ansible (aiinfra.io_isolation)" in rule.splitlines()[0]
    assert 'ATTRS{wwid}=="%s"' % NVME_A_WWID in rule and "$major:$minor" in rule
    assert "259:0" not in rule.split("\n", 2)[2], "the rule must not carry the MAJ:MIN of this boot"
    assert "io.cost.model:ctrl=user,model=linear,rbps=2000000000," in rule
    assert "io.cost.qos:enable=1,ctrl=user,rpct=95.00,rlat=5000,wpct=95.00,wlat=5000,min=50.00,max=150.00" in rule
    helper = lab.sim.path(IOCOST_HELPER.path)
    assert os.stat(helper).st_mode & 0o111
    assert set(result["diff"]["after"]) >= {"io.cost.model[259:0]", "io.cost.qos[259:0]", rule_file}
    lab.sim.writes[:] = []
    again = lab.run(device="/dev/nvme0n1", model=MODEL, qos=QOS)
    assert not again.get("failed"), again["msg"]
    assert again["changed"] is False and lab.sim.writes == []


def test_helper_applies_the_rule_to_a_new_majmin(lab, tmp_path):
    """The persisted helper, run as udev would, writes the rule's lines for the device's MAJ:MIN."""
    result = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS)
    rule = open(lab.sim.path(result["persisted_to"][0])).read().splitlines()[-1]
    args = rule.split('RUN+="', 1)[1].rstrip('"').split()[2:]
    ns = vars(_boot_iocost_apply)
    written = []
    real_open, real_write = os.open, os.write
    try:
        os.open = lambda path, flags: written.append(path) or real_open(os.devnull, os.O_WRONLY)
        os.write = lambda fd, data: written.append(data) or len(data)
        assert ns["main"](["259:7"] + args) == 0
    finally:
        os.open, os.write = real_open, real_write
    assert written[0] == "/sys/fs/cgroup/io.cost.model" and written[1].startswith(b"259:7 ctrl=user model=linear")
    assert written[2] == "/sys/fs/cgroup/io.cost.qos" and written[3].startswith(b"259:7 enable=1 ctrl=user rpct=95.00")
    assert ns["main"](["259:7", "memory.max:1=1"]) == 2 and ns["main"](["nvme0n1", args[0]]) == 2


def test_helper_reports_a_refused_write_to_the_kernel_log():
    """udev hides a failing RUN program's output: the helper's failure must reach /dev/kmsg."""
    ns = vars(_boot_iocost_apply)
    opened, written = [], []
    real_open, real_write = os.open, os.write

    def fake_open(path, flags):
        opened.append(path)
        if path.startswith("/sys/fs/cgroup/"):
            raise OSError(19, "No such device")
        return real_open(os.devnull, os.O_WRONLY)

    try:
        os.open = fake_open
        os.write = lambda fd, data: written.append(data) or len(data)
        assert ns["main"](["259:7", "io.cost.model:ctrl=auto"]) == 1
    finally:
        os.open, os.write = real_open, real_write
    assert opened == ["/sys/fs/cgroup/io.cost.model", "/dev/kmsg"]
    assert written[0].startswith(b"<3>aiinfra-iocost-apply: writing") and b"No such device" in written[0]


def test_check_mode_writes_nothing_anywhere(lab):
    result = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS, _ansible_check_mode=True)
    assert result["changed"] and lab.sim.writes == [] and etc_files(lab) == []
    assert lab.kernel.model == {} and lab.kernel.qos == {}


def test_absent_returns_the_disk_to_the_kernel_and_removes_the_rule(lab):
    present = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS)
    result = lab.run(device="lab-nvme-a", state="absent")
    assert result["changed"] and result["model"]["ctrl"] == "auto"
    assert result["qos"]["enable"] == 0 and result["qos"]["ctrl"] == "auto"
    assert not os.path.exists(lab.sim.path(present["persisted_to"][0]))
    kept = lab.run(device="lab-nvme-a", state="absent", keep_enabled=True)
    assert kept["qos"]["enable"] == 1


def test_auto_model_enables_iocost_with_the_kernel_class(lab):
    result = lab.run(device="259:1", model={"ctrl": "auto"})
    assert result["qos"]["enable"] == 1 and result["model"]["ctrl"] == "auto"
    assert result["model"]["rrandiops"] == 8518


def test_class_mismatch_warns(lab, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    lab.run(device="lab-nvme-a", model=dict(MODEL, rrandiops=370))
    assert any("HDD-class" in w for w in warnings)


@pytest.mark.parametrize("args, words", [
    ({"model": dict(MODEL, riops=1000)}, "'rrandiops'"),
    ({"model": dict(MODEL, wiops=1000)}, "'wrandiops'"),
    ({"model": dict(MODEL, rbps=0)}, "meaningless"),
    ({"model": dict(MODEL, wseqiops=-5)}, "wseqiops"),
    ({"model": dict(MODEL, rbps="2G")}, "ambiguous"),
    ({"model": {"rbps": 1000}}, "all six coefficients"),
    ({"model": {"ctrl": "bogus"}}, "bogus"),
    ({"qos": dict(QOS, rpct=101)}, "rpct"),
    ({"qos": dict(QOS, min=200, max=100)}, "min=200.00 is above max=100.00"),
    ({"qos": dict(QOS, rlat=-1)}, "rlat"),
    ({"qos": {"ctrl": "bogus"}}, "bogus"),
    ({"device": "vda1"}, "partition of vda"),
    ({"device": "nvme9n9"}, "nvme9n9"),
    ({"device": "nvme0n1; rm -rf /"}, "nvme0n1; rm -rf /"),
    ({"device": "$(reboot)"}, "$(reboot)"),
])
def test_bad_input_is_refused_before_any_write(lab, args, words):
    params = dict({"device": "lab-nvme-a", "model": MODEL, "qos": QOS}, **args)
    result = lab.run(**params)
    assert result["failed"] and words in result["msg"], result["msg"]
    assert lab.sim.writes == [] and etc_files(lab) == []
    assert lab.kernel.model == {} and lab.kernel.qos == {}


def test_host_without_cgroup_v2_is_refused(tmp_path, monkeypatch, lab):
    h = FakeHost(tmp_path / "v1")
    h.add_nvme(ctrl=0, serial="x")
    h.add_cgroup_root(mode="hybrid")
    sim = SimKernel(h.root)
    monkeypatch.setattr(iocost, "KernelFS", lambda: sim)
    result = lab.run(device="nvme0n1", model=MODEL)
    assert result["failed"] and "cgroup v2 unified hierarchy" in result["msg"] and "hybrid" in result["msg"]
    assert sim.writes == [] and etc_files(h) == []


def test_kernel_without_iocost_is_refused(tmp_path, monkeypatch, lab):
    h = FakeHost(tmp_path / "noiocost")
    h.add_nvme(ctrl=0, serial="x")
    h.add_cgroup_root(iocost=False)
    sim = SimKernel(h.root)
    monkeypatch.setattr(iocost, "KernelFS", lambda: sim)
    result = lab.run(device="nvme0n1", model=MODEL)
    assert result["failed"] and "CONFIG_BLK_CGROUP_IOCOST" in result["msg"]
    assert sim.writes == [] and etc_files(h) == []


@pytest.mark.parametrize("build, selector, words", [
    (lambda h: h.add_nvme_multipath_head(subsys=2, ctrls=(2, 3), serial="lab-nvme-mp"), "lab-nvme-mp", "multipath"),
    (lambda h: h.add_dm(name="vg0-lv0"), "vg0-lv0", "blk-mq"),
])
def test_disks_without_blk_mq_are_refused(tmp_path, monkeypatch, lab, build, selector, words):
    h = FakeHost(tmp_path / "nomq")
    build(h)
    h.add_cgroup_root()
    sim = SimKernel(h.root)
    monkeypatch.setattr(iocost, "KernelFS", lambda: sim)
    result = lab.run(device=selector, model=MODEL)
    assert result["failed"] and words in result["msg"], result["msg"]
    assert sim.writes == [] and etc_files(h) == []


def test_kernel_refusal_restores_and_reports(lab):
    lab.kernel.refuse_qos = "259:0"
    result = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS)
    assert result["failed"] and "EINVAL" in result["msg"] and "io.cost.qos" in result["msg"]
    assert lab.kernel.model["259:0"]["ctrl"] == "auto", "the model written before the refusal is restored"
    assert etc_files(lab) == [], "nothing is persisted when the live apply fails"


def test_persist_false_writes_no_files(lab):
    result = lab.run(device="lab-nvme-a", model=MODEL, qos=QOS, persist=False)
    assert result["changed"] and result["persisted_to"] == [] and etc_files(lab) == []


def test_several_disks_in_one_call(lab):
    result = lab.run(devices=[{"device": "lab-nvme-a", "model": MODEL, "qos": QOS},
                              {"device": "/dev/nvme1n1", "model": {"ctrl": "auto"}}])
    assert not result.get("failed"), result
    assert [d["device"]["majmin"] for d in result["devices"]] == ["259:0", "259:1"]
    assert result["devices"][0]["qos"]["rlat"] == 5000 and result["devices"][1]["model"]["ctrl"] == "auto"
    assert result["devices"][1]["qos"]["enable"] == 1
    rules = [p for p in result["persisted_to"] if p.startswith("/etc/udev/rules.d/")]
    assert len(rules) == 2 and all(os.path.exists(lab.sim.path(p)) for p in rules)
    assert "device" not in result and "model" not in result
    # one udev helper for both disks, written once
    assert sum(1 for k in result["diff"]["after"] if k == IOCOST_HELPER.path) == 1
    lab.sim.writes[:] = []
    again = lab.run(devices=[{"device": "lab-nvme-a", "model": MODEL, "qos": QOS},
                             {"device": "lab-nvme-b", "model": {"ctrl": "auto"}}])
    assert again["changed"] is False and lab.sim.writes == []
    gone = lab.run(devices=[{"device": "lab-nvme-a"}, {"device": "lab-nvme-b"}], state="absent")
    assert gone["changed"] and [d["qos"]["enable"] for d in gone["devices"]] == [0, 0]
    assert not any(os.path.exists(lab.sim.path(p)) for p in rules)


def test_a_refusal_on_one_disk_restores_the_other(lab):
    lab.kernel.refuse_qos = "259:1"
    result = lab.run(devices=[{"device": "lab-nvme-a", "model": MODEL, "qos": QOS},
                              {"device": "lab-nvme-b", "qos": QOS}])
    assert result["failed"] and "259:1" in result["msg"] and "restored" in result["msg"]
    assert lab.kernel.qos["259:0"]["enable"] == 0 and lab.kernel.model["259:0"]["ctrl"] == "auto"
    assert etc_files(lab) == []


@pytest.mark.parametrize("args, words", [
    ({"devices": [{"device": "lab-nvme-a"}, {"device": "/dev/nvme0n1"}]}, "list each disk once"),
    ({"devices": [{"device": "lab-nvme-a"}, {"device": "vda1"}]}, "partition"),
    ({"devices": [{"device": "lab-nvme-a"}, {"device": "lab-nvme-b", "qos": {"rpct": 101}}]}, "rpct"),
    ({"devices": [{"device": "nvme0n1;reboot"}]}, "nvme0n1;reboot"),
    ({"device": "lab-nvme-a", "devices": [{"device": "lab-nvme-b"}]}, "mutually exclusive"),
    ({"devices": [{"device": "lab-nvme-a"}], "model": MODEL}, "mutually exclusive"),
    ({"state": "present"}, "one of the following is required"),
])
def test_bad_multi_disk_requests_write_nothing(lab, args, words):
    result = lab.run(**args)
    assert result["failed"] and words in result["msg"], result["msg"]
    assert lab.sim.writes == [] and etc_files(lab) == []


def test_default_qos_with_the_kernel_bound_reads_back_and_is_idempotent(lab):
    qos = {"rpct": 95, "rlat": 2000, "wpct": 95, "wlat": 10000, "min": 10, "max": 10000}
    first = lab.run(device="lab-nvme-b", qos=qos)
    assert not first.get("failed"), first
    assert first["changed"] and first["qos"]["max"] == "10000.00" and first["qos"]["min"] == "10.00"
    writes = len(lab.sim.writes)
    again = lab.run(device="lab-nvme-b", qos=qos)
    assert not again.get("failed") and again["changed"] is False and len(lab.sim.writes) == writes
