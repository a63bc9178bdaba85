# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""cgroup through AnsibleModule: a fake host whose cgroup files behave like the kernel's (SimCgroup) and a
systemctl that behaves like systemd 252 / 257 (SimSystemd)."""

import os

import pytest

from sim.lab import CG, CgroupLab
from sim.systemd import CONTROL_DIR

STAMP = "# Managed by Ansible (aiinfra.io_isolation): aiinfra.io_isolation.cgroup. Local edits will be overwritten.\n"
RUNTIME = CG + "/system.slice/runtime.service"
WORKLOAD = "system.slice/runtime.service/workloads/inference"
GiB = 1024 ** 3


def dropin(unit):
    return "/etc/systemd/system/%s.d/50-aiinfra-io-isolation.conf" % unit


@pytest.fixture
def make_lab(tmp_path, monkeypatch, run_module):
    return lambda **kw: CgroupLab(tmp_path, **kw).wire(monkeypatch, run_module)


@pytest.fixture(params=[252, 257], ids=["systemd252", "systemd257"])
def lab(request, make_lab):
    return make_lab(version=request.param)


@pytest.fixture
def lab257(make_lab):
    return make_lab(version=257)


@pytest.fixture(scope="module")
def shared_host(tmp_path_factory):
    return CgroupLab(tmp_path_factory.mktemp("cgroup-ro"), version=257)


@pytest.fixture
def ro_lab(shared_host, monkeypatch, run_module):
    """One host for the tests that must not change anything (each asserts that it did not)."""
    return shared_host.wire(monkeypatch, run_module)


# ---------------------------------------------------------------------------------------------
# manager: systemd
# ---------------------------------------------------------------------------------------------

INFERENCE = {"name": "inference.slice", "create": True, "io": {"weight": 1000},
             "memory": {"min": "4G", "low": "8G"}, "cpu": {"weight": 1000}}
INFERENCE_BODY = ("[Slice]\nIOAccounting=yes\nIOWeight=1000\nMemoryAccounting=yes\nMemoryMin=4294967296\n"
                  "MemoryLow=8589934592\nCPUWeight=1000\n")


def test_create_slice_writes_dropin_and_unit_then_applies(lab):
    assert lab.systemd.unit("inference.slice")["FragmentPath"] == ""      # synthesised: no unit file
    result = lab.run(**INFERENCE)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["manager"] == "systemd"
    assert result["cgroup"] == CG + "/inference.slice"
    assert result["persisted_to"] == ["/etc/systemd/system/inference.slice", dropin("inference.slice")]
    assert lab.read(dropin("inference.slice")) == STAMP + INFERENCE_BODY
    assert lab.read("/etc/systemd/system/inference.slice") == (
        STAMP + "[Unit]\nDescription=Workload slice inference.slice\n")
    assert lab.mutating_calls() == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "start", "--", "inference.slice"],
        ["systemctl", "set-property", "--runtime", "--", "inference.slice", "IOAccounting=yes", "IOWeight=1000",
         "MemoryAccounting=yes", "MemoryMin=4294967296", "MemoryLow=8589934592", "CPUWeight=1000"],
        ["systemctl", "daemon-reload"],
    ]
    # set-property's runtime files are gone again: the unit's configuration is exactly its files.
    assert lab.config_files() == ["/etc/systemd/system/inference.slice", dropin("inference.slice")]
    assert not os.path.exists(lab.host.path(CONTROL_DIR + "/inference.slice.d"))
    assert lab.cgfile("inference.slice", "io.weight") == "default 1000"
    assert lab.cgfile("inference.slice", "memory.min") == str(4 * GiB)
    assert lab.cgfile("inference.slice", "memory.low") == str(8 * GiB)
    assert lab.cgfile("inference.slice", "cpu.weight") == "1000"
    assert result["kernel"] == {"io.weight": {"default": 1000}, "memory.min": 4 * GiB, "memory.low": 8 * GiB,
                                "cpu.weight": 1000}
    unit = lab.systemd.unit("inference.slice")
    assert unit["active"] and unit["FragmentPath"] == "/etc/systemd/system/inference.slice"
    assert lab.kernel.writes == [], "the systemd manager never writes cgroup files itself"
    assert lab.warnings == []

    again = lab.run(**INFERENCE)
    assert again["changed"] is False and again["diff"] == {"before": {}, "after": {}}
    assert lab.mutating_calls() == [] and lab.kernel.ops == []
    assert again["kernel"] == result["kernel"]


def test_create_slice_with_description_and_dash_nesting(lab):
    result = lab.run(name="ai-inference.slice", create=True, description="Inference 100% protected",
                     io={"weight": 300})
    assert result["changed"] and result["cgroup"] == CG + "/ai.slice/ai-inference.slice"
    assert lab.read("/etc/systemd/system/ai-inference.slice").endswith("Description=Inference 100%% protected\n")
    assert lab.cgfile("ai.slice/ai-inference.slice", "io.weight") == "default 300"


def test_existing_slice_without_create_gets_no_unit_file(lab):
    result = lab.run(name="inference.slice", io={"weight": 200})
    assert result["changed"] and result["persisted_to"] == [dropin("inference.slice")]
    assert lab.config_files() == [dropin("inference.slice")]
    assert lab.cgfile("inference.slice", "io.weight") == "default 200"


TRAINING = {"name": "training.slice", "create": True,
            "io": {"weight": 50, "weights": {"lab-nvme-a": 200},
                   "max": {"lab-nvme-a": {"rbps": "200MB", "wbps": "200MiB", "riops": 50000}}},
            "memory": {"high": "12G"}, "cpu": {"weight": 50, "max": "150000 100000"}}


def test_training_slice_weights_limits_memory_cpu(lab):
    result = lab.run(**TRAINING)
    assert not result.get("failed"), result
    link = lab.link("nvme0n1")
    assert lab.read(dropin("training.slice")) == STAMP + "\n".join([
        "[Slice]", "IOAccounting=yes", "IOWeight=50", "IODeviceWeight=%s 200" % link,
        "IOReadBandwidthMax=%s 200000000" % link, "IOWriteBandwidthMax=%s 209715200" % link,
        "IOReadIOPSMax=%s 50000" % link, "MemoryAccounting=yes", "MemoryHigh=12884901888", "CPUWeight=50",
        "CPUQuota=150%"]) + "\n"
    assert "/dev/nvme0n1" not in lab.read(dropin("training.slice"))
    assert lab.cgfile("training.slice", "io.weight") == "default 50\n259:0 200"
    assert lab.cgfile("training.slice", "io.max") == "259:0 rbps=200000000 wbps=209715200 riops=50000 wiops=max"
    assert lab.cgfile("training.slice", "memory.high") == "12884901888"
    assert lab.cgfile("training.slice", "cpu.weight") == "50"
    assert lab.cgfile("training.slice", "cpu.max") == "150000 100000"
    assert result["devices"] == {"lab-nvme-a": "259:0"}
    assert result["kernel"]["io.max"] == {"259:0": {"rbps": 200000000, "wbps": 209715200, "riops": 50000,
                                                    "wiops": "max"}}
    assert result["kernel"]["cpu.max"] == {"quota": 150000, "period": 100000}
    again = lab.run(**TRAINING)
    assert again["changed"] is False and lab.mutating_calls() == [] and lab.kernel.ops == []


def test_check_mode_writes_nothing_and_reports_the_diff(lab):
    result = lab.run(_ansible_check_mode=True, **TRAINING)
    assert result["changed"] is True
    lab.assert_nothing_changed()
    assert lab.config_files() == [] and not lab.systemd.unit("training.slice")["active"]
    before, after = result["diff"]["before"]["training.slice"], result["diff"]["after"]["training.slice"]
    assert before["files"] == {dropin("training.slice"): None, "/etc/systemd/system/training.slice": None}
    assert after["files"][dropin("training.slice")].startswith(STAMP + "[Slice]\nIOAccounting=yes\nIOWeight=50\n")
    assert after["kernel"]["io.weight"] == {"default": 50, "259:0": 200}
    assert after["kernel"]["memory.high"] == 12 * GiB
    # the slice is not running: what systemd would report is compared, not kernel files
    assert before["kernel"] is None
    assert {"key": "IOWeight", "property": "IOWeight", "want": 50, "have": None} in before["drift"]
    assert [c[1] for c in lab.systemd.calls] == ["--version", "show", "show"]


def test_check_mode_on_a_configured_unit_shows_kernel_before_and_after(lab):
    lab.run(**INFERENCE)
    result = lab.run(_ansible_check_mode=True, **dict(INFERENCE, io={"weight": 300}))
    assert result["changed"] is True
    lab.assert_nothing_changed()
    before, after = result["diff"]["before"]["inference.slice"], result["diff"]["after"]["inference.slice"]
    assert before["kernel"]["io.weight"] == {"default": 1000} and after["kernel"]["io.weight"] == {"default": 300}
    assert "IOWeight=1000" in before["files"][dropin("inference.slice")]
    assert "IOWeight=300" in after["files"][dropin("inference.slice")]
    assert before["drift"] == [{"file": "io.weight", "key": "default", "want": 300, "have": 1000}]
    assert lab.cgfile("inference.slice", "io.weight") == "default 1000"


def test_changed_dropin_is_applied_to_the_running_slice(lab):
    """257 does not apply a changed drop-in at daemon-reload; the module's set-property does, on both."""
    lab.run(**INFERENCE)
    result = lab.run(**dict(INFERENCE, io={"weight": 300}, cpu={"weight": 200}))
    assert result["changed"] and lab.cgfile("inference.slice", "io.weight") == "default 300"
    assert lab.cgfile("inference.slice", "cpu.weight") == "200"
    assert lab.set_property_calls() == [
        ["systemctl", "set-property", "--runtime", "--", "inference.slice", "IOAccounting=yes", "IOWeight=300",
         "MemoryAccounting=yes", "MemoryMin=4294967296", "MemoryLow=8589934592", "CPUWeight=200"]]
    assert ["systemctl", "start", "--", "inference.slice"] in lab.mutating_calls()   # a no-op on an active slice
    assert not os.path.exists(lab.host.path(CONTROL_DIR + "/inference.slice.d"))


def test_drift_in_the_kernel_is_repaired(lab):
    lab.run(**TRAINING)
    lab.host.write(CG + "/training.slice/memory.high", "max")           # changed behind systemd's back
    result = lab.run(**TRAINING)
    assert result["changed"] is True
    assert result["diff"]["before"]["training.slice"]["drift"] == [
        {"file": "memory.high", "key": "memory.high", "want": 12 * GiB, "have": "max"}]
    assert len(lab.set_property_calls()) == 1
    assert lab.cgfile("training.slice", "memory.high") == "12884901888"
    assert ("atomic_write", dropin("training.slice")) in lab.kernel.ops     # same content, rewritten


def test_dropping_a_device_weight_resets_it_to_the_unit_weight(lab):
    lab.run(**TRAINING)
    link = lab.link("nvme0n1")
    smaller = dict(TRAINING, io={"weight": 50})
    result = lab.run(**smaller)
    assert result["changed"]
    (call,) = lab.set_property_calls()
    assert "IODeviceWeight=%s 50" % link in call
    # io.max lines of the dropped device are cleared with infinity
    assert "IOReadBandwidthMax=%s infinity" % link in call and "IOWriteBandwidthMax=%s infinity" % link in call
    assert "IOReadIOPSMax=%s infinity" % link in call
    assert "IODeviceWeight" not in lab.read(dropin("training.slice"))
    # systemd cannot remove a per-device line: it now holds the unit's weight, which is the same share
    assert lab.cgfile("training.slice", "io.weight") == "default 50\n259:0 50"
    assert lab.cgfile("training.slice", "io.max") == ""
    assert lab.run(**smaller)["changed"] is False


def test_dropping_a_scalar_emits_an_empty_assignment(lab):
    lab.run(name="inference.slice", memory={"min": "1G", "high": "12G"}, cpu={"max": "50000 100000"})
    assert lab.cgfile("inference.slice", "memory.high") == "12884901888"
    assert lab.cgfile("inference.slice", "cpu.max") == "50000 100000"
    result = lab.run(name="inference.slice", memory={"min": "1G"})
    assert result["changed"]
    (call,) = lab.set_property_calls()
    assert call[-3:] == ["MemoryMin=1073741824", "MemoryHigh=", "CPUQuota="]
    assert lab.cgfile("inference.slice", "memory.high") == "max"
    assert lab.cgfile("inference.slice", "cpu.max") == "max 100000"
    assert lab.cgfile("inference.slice", "memory.min") == "1073741824"
    assert sorted(result["kernel"]) == ["cpu.max", "memory.high", "memory.min"]   # what the old drop-in set
    assert result["kernel"]["memory.high"] == "max"


def test_absent_removes_dropin_and_our_slice_unit(lab):
    lab.run(**INFERENCE)
    result = lab.run(name="inference.slice", state="absent")
    assert result["changed"] is True and result["persisted_to"] == []
    assert lab.config_files() == []
    assert not os.path.exists(lab.host.path("/etc/systemd/system/inference.slice.d"))
    (call,) = lab.set_property_calls()
    assert call[5:] == ["IOWeight=", "MemoryMin=", "MemoryLow=", "CPUWeight="]
    assert lab.cgfile("inference.slice", "io.weight") == "default 100"
    assert lab.cgfile("inference.slice", "memory.min") == "0" and lab.cgfile("inference.slice", "memory.low") == "0"
    assert lab.cgfile("inference.slice", "cpu.weight") == "100"
    assert lab.systemd.unit("inference.slice")["FragmentPath"] == ""
    assert result["kernel"] == {"io.weight": {"default": 100}, "memory.min": 0, "memory.low": 0, "cpu.weight": 100}
    again = lab.run(name="inference.slice", state="absent")
    assert again["changed"] is False and lab.mutating_calls() == []


def test_absent_keeps_a_slice_unit_file_we_did_not_write(lab):
    lab.host.write("/etc/systemd/system/inference.slice", "[Unit]\nDescription=hand-made\n")
    lab.systemd.run(["systemctl", "daemon-reload"])
    lab.run(name="inference.slice", io={"weight": 300})
    result = lab.run(name="inference.slice", state="absent")
    assert result["changed"] and lab.config_files() == ["/etc/systemd/system/inference.slice"]
    assert lab.read("/etc/systemd/system/inference.slice") == "[Unit]\nDescription=hand-made\n"


def test_create_leaves_an_existing_hand_written_slice_unit_alone(lab):
    lab.host.write("/etc/systemd/system/inference.slice", "[Unit]\nDescription=hand-made\n")
    lab.systemd.run(["systemctl", "daemon-reload"])
    result = lab.run(name="inference.slice", create=True, io={"weight": 300})
    assert not result.get("failed"), result["msg"]
    assert result["persisted_to"] == [dropin("inference.slice")]
    assert lab.read("/etc/systemd/system/inference.slice") == "[Unit]\nDescription=hand-made\n"


def test_foreign_dropin_needs_adopt(lab):
    lab.host.write(dropin("inference.slice"), "[Slice]\nIOWeight=10\n")
    result = lab.run(name="inference.slice", io={"weight": 300})
    assert result["failed"] and "is not managed by aiinfra.io_isolation" in result["msg"] and "adopt" in result["msg"]
    lab.assert_nothing_changed()
    assert lab.read(dropin("inference.slice")) == "[Slice]\nIOWeight=10\n"
    adopted = lab.run(name="inference.slice", io={"weight": 300}, adopt=True)
    assert adopted["changed"] and lab.read(dropin("inference.slice")).startswith(STAMP)


def test_set_property_failure_restores_the_earlier_dropin(lab):
    lab.run(**INFERENCE)
    earlier = lab.read(dropin("inference.slice"))
    lab.systemd.fail("set-property", rc=1, err="Failed to set unit properties on inference.slice: Access denied\n")
    result = lab.run(**dict(INFERENCE, io={"weight": 300}))
    assert result["failed"]
    assert "Applying inference.slice failed" in result["msg"]
    assert "Command systemctl set-property --runtime -- inference.slice IOAccounting=yes IOWeight=300" in result["msg"]
    assert "rc=1: Failed to set unit properties on inference.slice: Access denied" in result["msg"]
    assert "restored the earlier values of: inference.slice" in result["msg"]
    assert result["restored"] == ["inference.slice"] and result["restore_errors"] == []
    assert result["kernel_error"]["argv"][:4] == ["systemctl", "set-property", "--runtime", "--"]
    assert lab.read(dropin("inference.slice")) == earlier
    assert lab.cgfile("inference.slice", "io.weight") == "default 1000"
    assert len(lab.set_property_calls()) == 2                 # the refused one and the restoring one
    assert lab.mutating_calls()[-1] == ["systemctl", "daemon-reload"]
    assert lab.config_files() == ["/etc/systemd/system/inference.slice", dropin("inference.slice")]
    assert lab.run(**INFERENCE)["changed"] is False


def test_kernel_ignoring_a_value_fails_the_read_back_and_restores(lab):
    lab.kernel.ignore.add("memory.high")
    result = lab.run(name="inference.slice", create=True, io={"weight": 300}, memory={"high": "1G"})
    assert result["failed"] and "The kernel holds" in result["msg"] and "memory.high" in result["msg"]
    assert "it normalised or ignored the value" in result["msg"]
    assert result["failed_setting"] == "inference.slice" and result["restored"] == ["inference.slice"]
    assert lab.config_files() == [], "the drop-in and the slice unit of the failed run are removed again"
    # the restore took the weight back as well
    assert lab.cgfile("inference.slice", "io.weight") == "default 100"
    assert lab.set_property_calls()[-1][5:] == ["IOWeight=", "MemoryHigh="]


def test_unit_that_does_not_exist_is_refused(lab):
    result = lab.run(name="nope.service", io={"weight": 300})
    assert result["failed"]
    assert "nope.service does not exist (systemd: LoadState=not-found); install the unit first" in result["msg"]
    lab.assert_nothing_changed()
    assert lab.config_files() == []


def test_a_missing_unit_is_skipped_with_when_missing_skip_and_an_existing_one_configured(lab):
    result = lab.run(name="nope.service", when_missing="skip", io={"weight": 50})
    assert not result.get("failed") and result["changed"] is False and result["skipped"] is True, result
    assert result["skip_reason"] == "nope.service is not a unit on this host (systemd: LoadState=not-found): nothing configured"
    lab.assert_nothing_changed()
    assert lab.config_files() == []
    done = lab.run(name="vllm.service", when_missing="skip", io={"weight": 50})
    assert done["changed"] and not done.get("skipped") and lab.read(dropin("vllm.service")) is not None


def test_when_missing_skip_still_refuses_a_bad_name(lab):
    result = lab.run(name="nope", when_missing="skip", io={"weight": 50})
    assert result["failed"] and lab.config_files() == []


def test_create_does_not_create_services(lab):
    result = lab.run(name="nope.service", create=True, io={"weight": 300})
    assert result["failed"] and "does not exist" in result["msg"] and lab.config_files() == []


def test_running_service_gets_set_property_but_no_start(lab):
    result = lab.run(name="vllm.service", io={"weight": 800}, memory={"high": "2G"})
    assert result["changed"] and result["cgroup"] == CG + "/system.slice/vllm.service"
    # set-property applies to the running cgroup before systemd has loaded the new drop-in; one reload loads it after
    assert [c[1] for c in lab.mutating_calls()] == ["set-property", "daemon-reload"]
    assert lab.read(dropin("vllm.service")).startswith(STAMP + "[Service]\nIOAccounting=yes\nIOWeight=800\n")
    assert lab.cgfile("system.slice/vllm.service", "io.weight") == "default 800"
    assert lab.cgfile("system.slice/vllm.service", "memory.high") == str(2 * GiB)


def test_inactive_service_is_verified_through_systemctl_show(lab):
    result = lab.run(name="batch.service", io={"weight": 800}, cpu={"max": "50000 100000"})
    assert result["changed"] and result["cgroup"] is None
    assert [c[1] for c in lab.mutating_calls()] == ["daemon-reload"]
    assert not os.path.isdir(lab.host.path(CG + "/system.slice/batch.service"))
    assert result["kernel"] == {"cpu.max": None, "io.weight": None}
    shown = [c for c in lab.systemd.calls if c[1] == "show" and "IOWeight" in c]
    assert len(shown) == 2                                     # before and read-back
    assert lab.run(name="batch.service", io={"weight": 800}, cpu={"max": "50000 100000"})["changed"] is False


def test_systemd_refuses_prio_class_low_and_oom_group(make_lab):
    lab = make_lab(io_prio=True, io_low=True)
    args = {"name": "inference.slice", "memory": {"oom_group": True},
            "io": {"weight": 300, "prio_class": "idle", "low": {"lab-nvme-a": {"rbps": 1000}}}}
    result = lab.run(**args)
    assert result["failed"]
    assert "io.prio_class for inference.slice cannot be applied with manager: systemd" in result["msg"]
    assert "io.low for inference.slice cannot be applied with manager: systemd" in result["msg"]
    assert "memory.oom_group for inference.slice cannot be applied with manager: systemd" in result["msg"]
    assert len(result["errors"]) == 3
    lab.assert_nothing_changed()
    assert lab.config_files() == []

    warned = lab.run(when_unsupported="warn", **args)
    assert warned["changed"] and not warned.get("failed")
    assert len(lab.warnings) == 3 and all("(skipped: when_unsupported=warn)" in w for w in lab.warnings)
    assert lab.warnings[0].startswith("io.prio_class for inference.slice cannot be applied")
    body = lab.read(dropin("inference.slice"))
    assert "IOWeight=300" in body and "OOMPolicy" not in body and "Low" not in body.replace("MemoryLow", "")
    assert warned["devices"] == {}, "a skipped io.low does not resolve its devices"


# ---------------------------------------------------------------------------------------------
# iocost checks
# ---------------------------------------------------------------------------------------------

def test_per_device_weight_needs_iocost_on_the_disk(lab):
    result = lab.run(name="inference.slice", io={"weights": {"lab-nvme-b": 300}})
    assert result["failed"]
    assert "io.weights: enable iocost on nvme1n1 first (aiinfra.io_isolation.iocost)" in result["msg"]
    lab.assert_nothing_changed()
    assert lab.config_files() == []


def test_weight_with_iocost_off_everywhere_warns(make_lab):
    lab = make_lab(iocost=(("259:0", 0),))
    result = lab.run(name="inference.slice", io={"weight": 300})
    assert result["changed"] and not result.get("failed")
    assert lab.warnings == [
        "io weights are set for inference.slice, but iocost is disabled on every disk they apply to (nvme0n1, nvme1n1, "
        "vda): weights do nothing until aiinfra.io_isolation.iocost enables it (qos enable=1)"]


def test_per_device_weight_on_an_initialised_but_disabled_disk_warns(make_lab):
    lab = make_lab(iocost=(("259:0", 0), ("259:1", 1)))
    result = lab.run(name="inference.slice", io={"weights": {"lab-nvme-a": 300}})
    assert result["changed"] and "disabled on every disk they apply to (nvme0n1)" in lab.warnings[0]
    assert lab.cgfile("inference.slice", "io.weight") == "default 100\n259:0 300"


def test_weight_with_iocost_on_one_used_disk_does_not_warn(lab):
    lab.run(name="inference.slice", io={"weight": 300})
    assert lab.warnings == []


# ---------------------------------------------------------------------------------------------
# Bad input: a clear message and nothing written
# ---------------------------------------------------------------------------------------------

TARGETS = {"systemd": {"name": "inference.slice"}, "cgroupfs": {"name": WORKLOAD}}
BAD = [
    ({"io": {"weight": 0}}, "out of range; io.weight takes 1..10000", "out of range; io.weight takes 1..10000"),
    ({"io": {"weight": 10001}}, "out of range; io.weight takes 1..10000", "out of range; io.weight takes 1..10000"),
    ({"io": {"weights": {"lab-nvme-a": 0}}}, "259:0 0: out of range", "259:0 0: out of range"),
    ({"io": {"max": {"lab-nvme-a": {"rbps": 0}}}}, "0 is out of range (the kernel answers ERANGE)",
     "0 is out of range (the kernel answers ERANGE)"),
    ({"io": {"max": {"lab-nvme-a": {"rbps": "0"}}}}, "0 is out of range", "0 is out of range"),
    ({"io": {"max": {"lab-nvme-a": {"rbps": "10M"}}}}, "ambiguous", "ambiguous"),
    ({"memory": {"high": "10%"}}, "'10%' is a percentage", "'10%' is a percentage"),
    ({"memory": {"min": -1}}, "-1 is negative", "-1 is negative"),
    ({"memory": {"max": "-1"}}, "'-1' is negative", "'-1' is negative"),
    ({"io": {"max": {"vda1": {"wbps": 1000000}}}}, "vda1 (254:1) is a partition of vda",
     "vda1 (254:1) is a partition of vda"),
    ({"io": {"weights": {"nvme0n1": 100, "/dev/nvme0n1": 200}}}, "are the same disk nvme0n1",
     "are the same disk nvme0n1"),
    # the value's own form before the manager's or the kernel's capabilities (issue 21): 3 is no policy anywhere
    ({"io": {"prio_class": "3"}}, "'3' is not a policy", "'3' is not a policy"),
    ({"io": {"prio_class": 3}}, "'3' is not a policy", "'3' is not a policy"),
    ({"io": {"latency": {"lab-nvme-a": 5000}}}, "io.latency needs the kernel file io.latency",
     "io.latency needs the kernel file io.latency"),
    ({"cpu": {"weight": 0}}, "out of range 1..10000", "cpu.weight"),
    ({"cpu": {"max": "500 100000"}}, "quota", "quota"),
    ({"io": {"weights": {"nvme9n9": 100}}}, "nvme9n9", "nvme9n9"),
]


@pytest.mark.parametrize("manager", ["systemd", "cgroupfs"])
@pytest.mark.parametrize("args, systemd_words, cgroupfs_words", BAD,
                         ids=["%s-%d" % (sorted(a)[0], i) for i, (a, _s, _c) in enumerate(BAD)])
def test_bad_input_is_refused_before_any_write(ro_lab, manager, args, systemd_words, cgroupfs_words):
    result = ro_lab.run(**dict(TARGETS[manager], **args))
    assert result["failed"] is True
    words = systemd_words if manager == "systemd" else cgroupfs_words
    assert words in result["msg"], result["msg"]
    assert result["msg"].startswith("Invalid request (nothing was changed): ")
    ro_lab.assert_nothing_changed()
    assert ro_lab.config_files() == []
    assert not os.path.exists(ro_lab.host.path(CG + "/system.slice/runtime.service/workloads"))


@pytest.mark.parametrize("name, words", [
    ("../../etc", "cgroup path '../../etc' contains '..'"),
    ("workloads/../../etc", "contains '..'"),
    ("/etc/systemd", "outside /sys/fs/cgroup"),
    ("bad-.slice", "dashes"),
    ("/sys/fs/cgroup", "is the root cgroup"),
])
def test_bad_names_are_refused(ro_lab, name, words):
    result = ro_lab.run(name=name, io={"weight": 300})
    assert result["failed"] and words in result["msg"], result["msg"]
    ro_lab.assert_nothing_changed()
    assert ro_lab.config_files() == []


def test_manager_systemd_needs_a_unit_name(ro_lab):
    result = ro_lab.run(name=WORKLOAD, manager="systemd", io={"weight": 300})
    assert result["failed"] and "manager: systemd needs a systemd unit name" in result["msg"]
    ro_lab.assert_nothing_changed()


def test_latency_on_a_kernel_without_io_latency_is_skipped_with_warn(lab257):
    args = {"name": "inference.slice", "io": {"weight": 300, "latency": {"lab-nvme-a": 5000}}}
    result = lab257.run(when_unsupported="warn", **args)
    assert result["changed"] and not result.get("failed")
    assert len(lab257.warnings) == 1
    assert lab257.warnings[0].startswith("io.latency needs the kernel file io.latency, which this kernel")
    assert "CONFIG_BLK_CGROUP_IOLATENCY" in lab257.warnings[0]
    assert "skipped: when_unsupported=warn" in lab257.warnings[0]
    assert "Latency" not in lab257.read(dropin("inference.slice"))
    assert lab257.cgfile("inference.slice", "io.weight") == "default 300"


def test_latency_on_a_kernel_with_io_latency(make_lab):
    lab = make_lab(version=257, io_latency=True)
    result = lab.run(name="inference.slice", io={"latency": {"lab-nvme-a": 5000}})
    assert result["changed"] and not result.get("failed"), result
    assert "IODeviceLatencyTargetSec=%s 5000us" % lab.link("nvme0n1") in lab.read(dropin("inference.slice"))
    assert lab.cgfile("inference.slice", "io.latency") == "259:0 target=5000"
    assert lab.run(name="inference.slice", io={"latency": {"lab-nvme-a": 5000}})["changed"] is False


# ---------------------------------------------------------------------------------------------
# manager: cgroupfs below a Delegate=yes unit
# ---------------------------------------------------------------------------------------------

DELEGATED = {"name": WORKLOAD, "io": {"weight": 500, "max": {"lab-nvme-a": {"wbps": "900MB", "riops": 50000}},
                                      "prio_class": "restrict-to-be"},
             "memory": {"high": "12G", "oom_group": True}, "cpu": {"max": "150000 100000"}}


def test_cgroupfs_creates_the_group_below_a_delegated_unit(lab):
    result = lab.run(**DELEGATED)
    assert not result.get("failed"), result
    assert result["changed"] and result["manager"] == "cgroupfs" and result["cgroup"] == CG + "/" + WORKLOAD
    assert lab.systemd.calls == [["systemctl", "--version"],
                                 ["systemctl", "show", "-p", "Delegate", "--value", "--", "runtime.service"]]
    group = CG + "/" + WORKLOAD
    assert lab.kernel.ops == [
        ("mkdir", RUNTIME + "/workloads"),
        ("mkdir", group),
        ("write", RUNTIME + "/cgroup.subtree_control", "+cpu +io +memory"),
        ("write", RUNTIME + "/workloads/cgroup.subtree_control", "+cpu +io +memory"),
        ("write", group + "/io.weight", "default 500"),
        ("write", group + "/io.max", "259:0 wbps=900000000 riops=50000"),
        ("write", group + "/io.prio.class", "restrict-to-be"),
        ("write", group + "/memory.high", "12884901888"),
        ("write", group + "/memory.oom.group", "1"),
        ("write", group + "/cpu.max", "150000 100000"),
    ]
    assert lab.cgfile(WORKLOAD, "io.max") == "259:0 rbps=max wbps=900000000 riops=50000 wiops=max"
    assert lab.cgfile(WORKLOAD, "cgroup.controllers") == "cpu io memory"
    assert lab.cgfile("system.slice/runtime.service/workloads", "cgroup.subtree_control") == "cpu io memory"
    assert result["kernel"] == {
        "cpu.max": {"quota": 150000, "period": 100000},
        "io.max": {"259:0": {"rbps": "max", "wbps": 900000000, "riops": 50000, "wiops": "max"}},
        "io.prio.class": "restrict-to-be", "io.weight": {"default": 500}, "memory.high": 12 * GiB,
        "memory.oom.group": 1}
    assert result["diff"]["before"]["cgroup %s/workloads" % RUNTIME] is False
    assert result["diff"]["after"][RUNTIME + "/cgroup.subtree_control"] == ["cpu", "io", "memory"]
    assert result["persisted_to"] == [] and lab.config_files() == []
    assert lab.mutating_calls() == []

    again = lab.run(**DELEGATED)
    assert again["changed"] is False and lab.kernel.ops == [] and again["diff"] == {"before": {}, "after": {}}


def test_cgroupfs_check_mode_plans_a_group_that_does_not_exist(ro_lab):
    result = ro_lab.run(_ansible_check_mode=True, **DELEGATED)
    assert result["changed"] is True
    ro_lab.assert_nothing_changed()
    assert not os.path.exists(ro_lab.host.path(RUNTIME + "/workloads"))
    after = result["diff"]["after"]
    assert after["cgroup %s/workloads" % RUNTIME] is True and after["cgroup %s/%s" % (CG, WORKLOAD)] is True
    before = result["diff"]["before"]
    assert before["io.weight[default]"] == 100 and before["memory.high"] == "max"     # a new group's defaults
    assert before["io.max[259:0]"] == {"rbps": "max", "wbps": "max", "riops": "max", "wiops": "max"}
    assert after["io.weight[default]"] == 500 and after["memory.high"] == 12 * GiB
    assert after["io.max[259:0]"] == {"wbps": 900000000, "riops": 50000}


def test_cgroupfs_in_an_existing_group_only_writes_files(lab257):
    lab257.kernel.add_group("system.slice/runtime.service/workloads", subtree="")
    lab257.host.write(RUNTIME + "/cgroup.subtree_control", "")
    lab257.kernel._enable(RUNTIME, ["io"])
    lab257.kernel._enable(RUNTIME + "/workloads", ["io"])
    lab257.kernel.add_group(WORKLOAD)
    result = lab257.run(name=WORKLOAD, io={"weight": 700})
    assert result["changed"] and lab257.kernel.ops == [("write", CG + "/" + WORKLOAD + "/io.weight", "default 700")]


@pytest.mark.parametrize("name, words", [
    ("workloads/inference", "/sys/fs/cgroup/workloads/inference is not below a systemd service or scope"),
    ("system.slice/plain.service/x", "belongs to plain.service, which does not have Delegate=yes"),
    ("system.slice/runtime.service", "is the cgroup of runtime.service itself"),
    ("system.slice/busy.service/workloads/x", "/sys/fs/cgroup/system.slice/busy.service has processes of its own"),
    ("system.slice/gone.service/x", "gone.service is not running (its cgroup %s/system.slice/gone.service does not "
                                    "exist); start it" % CG),
    ("system.slice/nope.service/x", "belongs to nope.service, which does not have Delegate=yes"),
])
def test_cgroupfs_refusals_come_before_any_write(ro_lab, name, words):
    result = ro_lab.run(name=name, manager="cgroupfs", io={"weight": 300})
    assert result["failed"] and words in result["msg"], result["msg"]
    ro_lab.assert_nothing_changed()


def test_cgroupfs_refuses_the_unit_itself_by_unit_name(ro_lab):
    result = ro_lab.run(name="runtime.service", manager="cgroupfs", io={"weight": 300})
    assert result["failed"] and "is the cgroup of runtime.service itself" in result["msg"]
    ro_lab.assert_nothing_changed()


# The real reason first: the input's own form (the name, then each value), then the host (who owns
# the group), then what the kernel has, then the per-device values (issue 21).
PWNED = "inference.slice; touch /etc/pwned"


@pytest.mark.parametrize("manager", ["auto", "cgroupfs"])
def test_a_unit_like_name_with_shell_metacharacters_is_refused_for_its_characters(ro_lab, manager):
    # Not "not below a systemd service or scope" (the '/' in '/etc/pwned' would make it a path): it was meant
    # as a unit, and its characters are the reason - before the host, the kernel's files or the values.
    result = ro_lab.run(name=PWNED, manager=manager, io={"latency": {"lab-nvme-a": 5000}, "prio_class": 3})
    assert result["failed"] and "has characters systemd does not allow" in result["msg"], result["msg"]
    for other in ("not below a systemd service or scope", "io.latency", "is not a policy"):
        assert other not in result["msg"]
    ro_lab.assert_nothing_changed()
    assert ro_lab.config_files() == [] and ro_lab.systemd.calls == []     # refused before systemd is asked
    assert not os.path.exists(ro_lab.host.path("/etc/pwned")) and not os.path.exists(ro_lab.host.path(CG + "/" + PWNED))


def test_a_path_through_a_directory_named_with_shell_metacharacters_is_refused_for_its_name(ro_lab):
    name = "system.slice/x;reboot.service/workloads"
    result = ro_lab.run(name=name, io={"weight": 300})
    assert result["failed"] and "'x;reboot.service' is not a valid group name" in result["msg"], result["msg"]
    assert "not below a systemd service or scope" not in result["msg"]
    ro_lab.assert_nothing_changed()
    assert ro_lab.systemd.calls == []


@pytest.mark.parametrize("manager, name", [("cgroupfs", WORKLOAD), ("systemd", "inference.slice")])
def test_prio_class_3_is_refused_as_no_policy_before_the_kernel_or_manager_is_asked(make_lab, manager, name):
    lab = make_lab(version=257, io_prio=False)
    result = lab.run(name=name, manager=manager, io={"weight": 300, "prio_class": 3})
    assert result["failed"] and "'3' is not a policy" in result["msg"], result["msg"]
    for other in ("does not have", "cannot be applied with manager"):
        assert other not in result["msg"]
    lab.assert_nothing_changed()
    assert lab.config_files() == []
    # A policy name on a kernel without the file: refused for the missing file, or skipped with a warning.
    missing = ("io.prio_class needs the kernel file io.prio.class, which this kernel (%s) does not have: the kernel is "
               "built without CONFIG_BLK_CGROUP_IOPRIO" % os.uname()[2])
    result = lab.run(name=name, manager=manager, io={"weight": 300, "prio_class": "idle"})
    assert result["failed"] and missing in result["msg"], result["msg"]
    assert result["errors"][0].startswith(missing)
    lab.assert_nothing_changed()
    warned = lab.run(name=name, manager=manager, when_unsupported="warn", io={"weight": 300, "prio_class": "idle"})
    assert not warned.get("failed"), warned["msg"]
    assert len(lab.warnings) == 1 and lab.warnings[0].startswith(missing), lab.warnings
    assert "io.prio.class" not in warned["kernel"]
    assert not [w for w in lab.kernel.writes if w[0].endswith("/io.prio.class")]


def test_cgroupfs_ebusy_rule_on_an_intermediate_group(lab257):
    lab257.kernel.add_group("system.slice/runtime.service/workloads", procs="31337")
    result = lab257.run(name=WORKLOAD, io={"weight": 300})
    assert result["failed"]
    assert "%s/workloads has processes of its own" % RUNTIME in result["msg"] and "EBUSY" in result["msg"]
    lab257.assert_nothing_changed()


def test_cgroupfs_read_back_failure_restores_the_whole_tree(lab257):
    before = lab257.files_below(RUNTIME)
    subtree = lab257.cgfile("system.slice/runtime.service", "cgroup.subtree_control")
    lab257.kernel.ignore.add("cpu.max")
    result = lab257.run(**DELEGATED)
    assert result["failed"] and "The kernel holds" in result["msg"] and "cpu.max" in result["msg"]
    assert result["restored"][-2:] == ["cgroup %s" % (CG + "/" + WORKLOAD), "cgroup %s/workloads" % RUNTIME]
    assert result["restore_errors"] == []
    assert not os.path.exists(lab257.host.path(RUNTIME + "/workloads"))
    assert lab257.cgfile("system.slice/runtime.service", "cgroup.subtree_control") == subtree
    assert (RUNTIME + "/cgroup.subtree_control", "-cpu -io -memory") in lab257.kernel.writes
    assert lab257.files_below(RUNTIME) == before


def test_cgroupfs_absent_removes_an_empty_group(lab257):
    lab257.run(**DELEGATED)
    result = lab257.run(name=WORKLOAD, state="absent")
    assert result["changed"] and lab257.kernel.ops == [("rmdir", CG + "/" + WORKLOAD)]
    assert not os.path.exists(lab257.host.path(CG + "/" + WORKLOAD))
    assert lab257.warnings == []
    assert lab257.run(name=WORKLOAD, state="absent")["changed"] is False


def test_cgroupfs_absent_keeps_a_busy_group_and_resets_the_given_keys(lab257):
    lab257.run(**DELEGATED)
    lab257.host.write(CG + "/" + WORKLOAD + "/cgroup.procs", "9001")
    result = lab257.run(name=WORKLOAD, state="absent", io={"weight": 500, "max": {"lab-nvme-a": {"wbps": 1}}},
                        memory={"high": "12G"})
    assert result["changed"] and not result.get("failed"), result
    assert os.path.isdir(lab257.host.path(CG + "/" + WORKLOAD))
    assert lab257.warnings == ["%s/%s is not empty (it has processes), so it is kept; the given settings are put back "
                               "to the kernel defaults" % (CG, WORKLOAD)]
    assert lab257.cgfile(WORKLOAD, "io.weight") == "default 100"
    assert lab257.cgfile(WORKLOAD, "io.max") == ""
    assert lab257.cgfile(WORKLOAD, "memory.high") == "max"
    assert lab257.cgfile(WORKLOAD, "cpu.max") == "150000 100000", "keys not given are left alone"
    assert ("rmdir", CG + "/" + WORKLOAD) not in lab257.kernel.ops


def test_cgroupfs_absent_of_a_group_with_children_keeps_it(lab257):
    lab257.run(**DELEGATED)
    result = lab257.run(name="system.slice/runtime.service/workloads", state="absent")
    assert result["changed"] is False and os.path.isdir(lab257.host.path(CG + "/" + WORKLOAD))
    assert "is not empty (it has child groups), so it is kept; give io/memory/cpu keys" in lab257.warnings[0]


def test_cgroupfs_on_a_host_without_systemd_takes_any_path(make_lab):
    lab = make_lab(systemd=False, root_subtree="memory pids")
    result = lab.run(name="workloads/inference", io={"weight": 300}, memory={"low": "1G"})
    assert not result.get("failed"), result
    assert result["manager"] == "cgroupfs" and lab.systemd.calls == []
    assert lab.kernel.ops == [
        ("mkdir", CG + "/workloads"),
        ("mkdir", CG + "/workloads/inference"),
        ("write", CG + "/cgroup.subtree_control", "+io"),            # the root: exempt from the EBUSY rule
        ("write", CG + "/workloads/cgroup.subtree_control", "+io +memory"),
        ("write", CG + "/workloads/inference/io.weight", "default 300"),
        ("write", CG + "/workloads/inference/memory.low", "1073741824"),
    ]
    assert lab.cgfile("workloads/inference", "io.weight") == "default 300"
    assert lab.run(name="workloads/inference", io={"weight": 300}, memory={"low": "1G"})["changed"] is False
    # a unit name on a host without systemd is a plain path
    unit = lab.run(name="inference.slice", io={"weight": 300})
    assert unit["manager"] == "cgroupfs" and unit["cgroup"] == CG + "/inference.slice"


def test_manager_systemd_on_a_host_without_systemd(make_lab):
    lab = make_lab(systemd=False)
    result = lab.run(name="inference.slice", manager="systemd", io={"weight": 300})
    assert result["failed"] and "this host does not run systemd" in result["msg"]
    lab.assert_nothing_changed()


def test_cgroupfs_per_device_weight(lab257):
    result = lab257.run(name=WORKLOAD, io={"weights": {"lab-nvme-a": 250}})
    assert result["changed"] and lab257.cgfile(WORKLOAD, "io.weight") == "default 100\n259:0 250"
    dropped = lab257.run(name=WORKLOAD, io={"weights": {"lab-nvme-a": "default"}})
    assert dropped["changed"] and lab257.cgfile(WORKLOAD, "io.weight") == "default 100"
    assert lab257.kernel.writes == [(CG + "/" + WORKLOAD + "/io.weight", "259:0 default")]


def test_systemd_weight_default_drops_an_earlier_override(lab257):
    lab257.run(name="inference.slice", io={"weight": 300, "weights": {"lab-nvme-a": 700}})
    result = lab257.run(name="inference.slice", io={"weight": 300, "weights": {"lab-nvme-a": "default"}})
    assert not result.get("failed"), result["msg"]
    assert "IODeviceWeight" not in lab257.read(dropin("inference.slice"))
    assert lab257.cgfile("inference.slice", "io.weight") in ("default 300", "default 300\n259:0 300")


@pytest.mark.parametrize("version, applied", [(252, True), (257, False)])
def test_only_252_applies_a_changed_dropin_without_set_property(make_lab, version, applied):
    """Why the module runs set-property: with a set-property that does nothing, 257 keeps the old value."""
    lab = make_lab(version=version)
    lab.run(**INFERENCE)
    lab.systemd.fail("set-property", rc=0, err="", times=-1)          # accepted, no effect
    result = lab.run(**dict(INFERENCE, io={"weight": 300}))
    if applied:
        assert not result.get("failed") and lab.cgfile("inference.slice", "io.weight") == "default 300"
    else:
        assert result["failed"] and "The kernel holds" in result["msg"]
        assert "{'file': 'io.weight', 'key': 'default', 'want': 300, 'have': 1000}" in result["msg"]
        assert lab.cgfile("inference.slice", "io.weight") == "default 1000"
        assert "IOWeight=1000" in lab.read(dropin("inference.slice"))


def test_cgroupfs_kernel_refusal_restores_and_names_the_file(lab257):
    lab257.kernel.refuse["cpu.max"] = 13      # EACCES
    result = lab257.run(**DELEGATED)
    assert result["failed"]
    assert result["msg"].startswith("Applying cpu.max failed: Writing '150000 100000' to %s/%s/cpu.max failed: "
                                    "Permission denied (EACCES)" % (CG, WORKLOAD))
    assert result["kernel_error"]["errno"] == "EACCES" and result["failed_setting"] == "cpu.max"
    assert "cgroup %s/workloads" % RUNTIME in result["restored"]
    assert not os.path.exists(lab257.host.path(RUNTIME + "/workloads"))
    assert lab257.cgfile("system.slice/runtime.service", "cgroup.subtree_control") == ""


def test_cgroupfs_controller_missing_in_the_delegated_unit(lab257):
    lab257.host.write(RUNTIME + "/cgroup.controllers", "memory pids")
    result = lab257.run(name=WORKLOAD, io={"weight": 300}, cpu={"weight": 200})
    assert result["failed"]
    assert "controller(s) cpu, io are not available in %s (cgroup.controllers: memory pids)" % RUNTIME in result["msg"]
    assert "IOAccounting=yes" in result["msg"]
    lab257.assert_nothing_changed()


def test_cgroupfs_prio_class_on_a_kernel_without_it(make_lab):
    lab = make_lab(version=257, io_prio=False)
    args = {"name": WORKLOAD, "io": {"weight": 300, "prio_class": "idle"}}
    result = lab.run(**args)
    assert result["failed"] and "io.prio_class needs the kernel file io.prio.class" in result["msg"]
    assert "CONFIG_BLK_CGROUP_IOPRIO" in result["msg"]
    lab.assert_nothing_changed()
    warned = lab.run(when_unsupported="warn", **args)
    assert warned["changed"] and "io.prio.class" not in warned["kernel"]
    assert lab.cgfile(WORKLOAD, "io.weight") == "default 300"
    assert len(lab.warnings) == 1 and "skipped: when_unsupported=warn" in lab.warnings[0]


def test_cgroupfs_busy_reset_is_idempotent(lab257):
    lab257.run(**DELEGATED)
    lab257.host.write(CG + "/" + WORKLOAD + "/cgroup.procs", "9001")
    args = {"name": WORKLOAD, "state": "absent", "io": {"weight": 1}, "memory": {"high": "1G"}, "cpu": {"max": "1"}}
    assert lab257.run(**args)["changed"] is True
    assert lab257.cgfile(WORKLOAD, "cpu.max") == "max 100000" and lab257.cgfile(WORKLOAD, "memory.high") == "max"
    assert lab257.run(**args)["changed"] is False and lab257.kernel.ops == []


@pytest.mark.parametrize("version", [252, 257])
def test_zswap_max_needs_systemd_253(make_lab, version):
    lab = make_lab(version=version)
    result = lab.run(name="inference.slice", memory={"zswap_max": "1G"})
    if version == 252:
        assert result["failed"] and "MemoryZSwapMax=, which systemd has since version 253; this host runs systemd 252" \
            in result["msg"]
        lab.assert_nothing_changed()
    else:
        assert result["changed"] and lab.cgfile("inference.slice", "memory.zswap.max") == str(GiB)


def test_cpu_quota_with_a_period(lab):
    result = lab.run(name="inference.slice", cpu={"max": {"quota": 25000, "period": 50000}})
    assert result["changed"] and not result.get("failed"), result
    assert "CPUQuota=50%\nCPUQuotaPeriodSec=50000us\n" in lab.read(dropin("inference.slice"))
    assert lab.cgfile("inference.slice", "cpu.max") == "25000 50000"
    assert result["kernel"]["cpu.max"] == {"quota": 25000, "period": 50000}
    refused = lab.run(name="inference.slice", cpu={"max": {"quota": 33333, "period": 100000}})
    assert refused["failed"] and "Use quota 33330 (CPUQuota=33.33%) or 33340 (CPUQuota=33.34%)" in refused["msg"]


def test_service_in_its_own_slice_uses_systemds_control_group(lab257):
    lab257.systemd.add_unit("embed.service", active=True, slice="ai-inference.slice",
                            fragment="/usr/lib/systemd/system/embed.service")
    result = lab257.run(name="embed.service", memory={"low": "1G"})
    assert result["changed"] and result["cgroup"] == CG + "/ai.slice/ai-inference.slice/embed.service"
    assert lab257.cgfile("ai.slice/ai-inference.slice/embed.service", "memory.low") == str(GiB)


def test_systemctl_failures_before_any_change_are_reported(lab257):
    lab257.systemd.fail("show", rc=1, err="Failed to connect to bus: No such file or directory",
                        when=lambda argv: "LoadState" in argv)
    result = lab257.run(name="inference.slice", io={"weight": 300})
    assert result["failed"] and result["msg"].startswith("Command systemctl show -p LoadState")
    assert "rc=1: Failed to connect to bus" in result["msg"] and result["command"]["rc"] == 1
    lab257.assert_nothing_changed()
    lab257.systemd.fail("show", rc=1, err="Access denied", when=lambda argv: "IOWeight" in argv)
    result = lab257.run(name="inference.slice", io={"weight": 300})
    assert result["failed"] and "Access denied" in result["msg"]
    assert result["msg"].startswith("Invalid request (nothing was changed): Command systemctl show")
    lab257.assert_nothing_changed()


def test_daemon_reload_failure_restores(lab257):
    lab257.run(**INFERENCE)
    earlier = lab257.read(dropin("inference.slice"))
    lab257.systemd.fail("daemon-reload", rc=1, err="Failed to reload daemon: Access denied")
    result = lab257.run(**dict(INFERENCE, io={"weight": 300}))
    assert result["failed"] and "Command systemctl daemon-reload failed with rc=1" in result["msg"]
    assert result["restored"] == ["inference.slice"] and lab257.read(dropin("inference.slice")) == earlier
    assert lab257.cgfile("inference.slice", "io.weight") == "default 1000"


def test_a_dropped_device_weight_follows_later_unit_weight_changes(lab257):
    lab257.run(name="inference.slice", io={"weight": 50, "weights": {"lab-nvme-a": 200}})
    lab257.run(name="inference.slice", io={"weight": 50})
    assert lab257.cgfile("inference.slice", "io.weight") == "default 50\n259:0 50"
    result = lab257.run(name="inference.slice", io={"weight": 80})
    assert result["changed"] and not result.get("failed")
    assert lab257.cgfile("inference.slice", "io.weight") in ("default 80", "default 80\n259:0 80")


def test_a_device_weight_from_another_dropin_is_left_to_that_dropin(make_lab):
    # An operator's own drop-in gives the second disk a weight; only lines nothing configures count as stale.
    lab = make_lab(version=257, iocost=(("259:0", 1), ("259:1", 1)))
    lab.host.write("/etc/systemd/system/inference.slice.d/10-operator.conf",
                   "[Slice]\nIODeviceWeight=%s 900\n" % lab.link("nvme1n1"))
    lab.run(name="inference.slice", io={"weight": 50, "weights": {"lab-nvme-a": 200}})
    assert lab.cgfile("inference.slice", "io.weight") == "default 50\n259:0 200\n259:1 900"
    result = lab.run(name="inference.slice", io={"weight": 80})
    assert not result.get("failed"), result
    # the line of the disk this module dropped follows the unit weight; the operator's line stays
    assert lab.cgfile("inference.slice", "io.weight") == "default 80\n259:0 80\n259:1 900"
    (call,) = lab.set_property_calls()[-1:]
    assert "IODeviceWeight=%s 80" % lab.link("nvme0n1") in call
    assert not [a for a in call if a.startswith("IODeviceWeight=%s" % lab.link("nvme1n1"))]
    assert lab.run(name="inference.slice", io={"weight": 80})["changed"] is False


# -- the input's own form is checked before the host's capabilities (issue 21) ------------------------

@pytest.mark.parametrize("manager", ["auto", "systemd", "cgroupfs"])
@pytest.mark.parametrize("name", ["inference.slice; touch /etc/pwned", "inference.slice && reboot",
                                  "vllm.service $(id)"])
def test_a_unit_name_with_shell_metacharacters_is_an_invalid_unit_name(make_lab, manager, name):
    lab = make_lab()
    before = lab.config_files()
    result = lab.run(name=name, manager=manager, io={"weight": 100})
    assert result["failed"] and "has characters systemd does not allow" in result["msg"], result["msg"]
    assert "not below a systemd service or scope" not in result["msg"]
    assert lab.kernel.writes == [] and lab.mutating_calls() == [] and lab.config_files() == before


def test_a_path_component_with_shell_metacharacters_is_refused(make_lab):
    lab = make_lab()
    result = lab.run(name="system.slice/runtime.service/work loads;x", manager="cgroupfs", io={"weight": 100})
    assert result["failed"] and "'work loads;x' is not a valid group name" in result["msg"]
    assert lab.kernel.writes == [] and lab.mutating_calls() == []


@pytest.mark.parametrize("io_prio", [True, False])
def test_prio_class_3_is_refused_as_not_a_policy_whatever_the_kernel_has(make_lab, io_prio):
    lab = make_lab(io_prio=io_prio)
    result = lab.run(name=WORKLOAD, manager="cgroupfs", io={"prio_class": 3})
    assert result["failed"] and "'3' is not a policy" in result["msg"], result["msg"]
    assert "does not have" not in result["msg"]
    assert lab.kernel.writes == [] and lab.mutating_calls() == []
    # a valid policy on a kernel without the file: refused for the missing file
    if not io_prio:
        result = lab.run(name=WORKLOAD, manager="cgroupfs", io={"prio_class": "idle"})
        assert result["failed"] and "needs the kernel file io.prio.class" in result["msg"]
