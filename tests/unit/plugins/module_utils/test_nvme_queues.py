# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_nvme_queues: parsers, driver detection, the hctx map, the safety rule and whole calls.

Whole calls run the real Reconciler against a FakeHost tree whose nvme files behave like the
driver's (:class:`SimNvme`): parameter writes are checked the way ``pci.c`` checks them, and a
write to ``reset_controller`` re-splits the controller's queues with the driver's arithmetic,
keeping the tag set's maps from probe. A reset that adds poll queues to a controller probed
without them reproduces what the lab showed on 6.1 and 6.12: the driver logs the new split,
blk-mq keeps only default hctxs, ``io_poll`` stays 0, and the controller is recorded in
``stalled`` (I/O from some CPUs would time out). Tests assert that nothing ever lands there.
"""

import errno
import os

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import nvme
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as nq
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import is_managed
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError, ReconcileError
from sim.host import FakeHost
from sim.kernel import SimKernel
from sim.nvme import RELEASE, MODDIR, INITRD, LAB_INITRAMFS, NVME_IN_INITRAMFS, Lab


@pytest.fixture
def lab(tmp_path):
    return Lab(tmp_path)


# --------------------------------------------------------------------------------------------
# The simulator itself reproduces the lab's observations (else the safety tests prove nothing)
# --------------------------------------------------------------------------------------------

def test_sim_matches_lab_observations(tmp_path):
    lab = Lab(tmp_path, poll_queues=1)
    assert lab.nvme.klog[-1].endswith("nvme nvme1: 2/0/1 default/read/poll queues")
    ctrls = nq.NvmeHost(lab.sim, lab.runner).controllers()
    hctxs = ctrls["nvme0"]["namespaces"]["nvme0n1"]["hctxs"]
    assert [(x["type"], x["cpu_list"]) for x in hctxs] == [("default", [0]), ("default", [1]), ("poll", [0, 1])]
    # 1 -> 0 at runtime on that boot: 2/0/0 (the vectors stay capped at the CPU count).
    lab.sim.write(nq.PARAMETERS_DIR + "/poll_queues", "0")
    lab.sim.write("/sys/class/nvme/nvme0/reset_controller", "1")
    assert lab.nvme.klog[-1].endswith("nvme nvme0: 2/0/0 default/read/poll queues")
    assert lab.nvme.stalled == []


def test_sim_reproduces_the_unsafe_reset(tmp_path):
    lab = Lab(tmp_path)
    for p, v in (("poll_queues", "1"), ("write_queues", "1")):
        lab.sim.write("%s/%s" % (nq.PARAMETERS_DIR, p), v)
    lab.sim.write("/sys/class/nvme/nvme0/reset_controller", "1")
    assert lab.nvme.klog[-1].endswith("nvme nvme0: 1/0/1 default/read/poll queues")
    assert lab.nvme.stalled == ["nvme0"]
    c = nq.NvmeHost(lab.sim).controllers()["nvme0"]
    assert [h["type"] for h in c["namespaces"]["nvme0n1"]["hctxs"]] == ["default", "default"]
    assert c["namespaces"]["nvme0n1"]["io_poll"] == 0


# --------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------

def test_parse_modprobe_options():
    text = ("# comment\noptions nvme poll_queues=2 # trailing\noptions nvme_core multipath=N\n"
            "options nvme \\\n  write-queues=1 io_queue_depth=\"512\"\nblacklist nvme\noptions  nvme poll_queues=3\n")
    assert nq.parse_modprobe_options(text) == {"poll_queues": "3", "write_queues": "1", "io_queue_depth": "512"}
    assert nq.parse_modprobe_options(text, module="nvme_core") == {"multipath": "N"}
    assert nq.parse_modprobe_options(None) == {}


@given(st.dictionaries(st.sampled_from(nq.PARAMS), st.integers(min_value=0, max_value=4095), min_size=1))
@hsettings(max_examples=60, deadline=None)
def test_rendered_file_parses_back(options):
    text = nq.render_conf(options)
    assert is_managed(text)
    assert dict((k, int(v)) for k, v in nq.parse_modprobe_options(text).items()) == options
    # parameters in the driver's order, so the file reads the same on every run
    assert text.splitlines()[-1] == "options nvme " + " ".join("%s=%d" % (p, options[p]) for p in nq.PARAMS if p in options)


def test_parse_cmdline():
    line = "BOOT_IMAGE=/vmlinuz root=/dev/vda rw nvme.poll_queues=1 nvme_core.multipath=N nvme.write-queues=2 quiet"
    assert nq.parse_cmdline(line) == {"poll_queues": "1", "write_queues": "2"}
    assert nq.parse_cmdline("root=/dev/vda") == {}


@given(st.lists(st.tuples(st.integers(0, 31), st.integers(0, 64), st.integers(0, 64), st.integers(0, 64)),
                min_size=1, max_size=8))
@hsettings(max_examples=60, deadline=None)
def test_parse_klog_keeps_the_last_line_per_controller(entries):
    text = "\n".join("[ %d.0] nvme nvme%d: %d/%d/%d default/read/poll queues" % ((i,) + e) for i, e in enumerate(entries))
    text += "\n[ 99.0] nvme nvme0: Ignoring bogus Namespace Identifiers\n"
    want = {}
    for ctrl, d, r, p in entries:
        want["nvme%d" % ctrl] = {"default": d, "read": r, "poll": p}
    assert nvme.parse_klog(text) == want


@pytest.mark.parametrize("text, count", [("0-1", 2), ("0", 1), ("0-3,8", 5), ("0-3,8-9\n", 6), ("", 0),
                                         ("x", None), (None, None)])
def test_count_cpus(text, count):
    assert nq.count_cpus(text) == count


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, needle", [
    ({"poll_queues": 3}, "more than the 2 possible CPUs"),
    ({"write_queues": 9}, "more than the 2 possible CPUs"),
    ({"poll_queues": -1}, "must be 0 or more"),
    ({"write_queues": -2}, "must be 0 or more"),
    ({"io_queue_depth": 1}, "2 to 4095"),
    ({"io_queue_depth": 4096}, "2 to 4095"),
    ({"io_queue_depth": -5}, "2 to 4095"),
])
def test_validate_values_refuses(params, needle):
    problems = nq.validate_values(params, 2)
    assert len(problems) == 1 and needle in problems[0]


def test_validate_values_accepts_the_driver_range():
    assert nq.validate_values({"poll_queues": 2, "write_queues": 0, "io_queue_depth": 2}, 2) == []
    assert nq.validate_values({"poll_queues": 0, "io_queue_depth": 4095}, 2) == []
    assert "cannot read" in nq.validate_values({"poll_queues": 1}, None)[0]


@pytest.mark.parametrize("params, needle", [
    ({"poll_queues": 3}, "more than the 2 possible CPUs (/sys/devices/system/cpu/possible)"),
    ({"poll_queues": -1}, "poll_queues=-1: must be 0 or more"),
    ({"io_queue_depth": 4096}, "io_queue_depth=4096: the driver takes 2 to 4095"),
    ({"io_queue_depth": 1}, "io_queue_depth=1"),
    ({}, "state=present needs at least one of"),
    ({"state": "absent", "poll_queues": 1}, "state=absent removes the persisted options"),
])
def test_bad_input_fails_before_any_write(lab, params, needle):
    with pytest.raises(nq.RequestError) as exc:
        lab.run(**params)
    assert needle in exc.value.msg and "nothing was changed" in exc.value.msg
    assert lab.sim.writes == [] and lab.etc_files() == [] and lab.runner.calls == []


def test_an_invalid_request_is_one_error_type_whoever_shows_it(tmp_path):
    """The input (validate), a conflicting file or an unsafe reset (plan): one class, one message form."""
    lab = Lab(tmp_path)
    with pytest.raises(nq.RequestError) as bad_input:
        lab.run(poll_queues=3)
    lab.h.write("/etc/modprobe.d/zz-nvme.conf", "options nvme poll_queues=2\n")
    with pytest.raises(nq.RequestError) as conflict:
        lab.run(poll_queues=1)
    lab.h.remove("/etc/modprobe.d/zz-nvme.conf")
    with pytest.raises(nq.RequestError) as unsafe:
        lab.run(poll_queues=1, reset_controllers=True)
    for e in (bad_input.value, conflict.value, unsafe.value):
        assert isinstance(e, ModuleError) and len(e.errors) == 1
        assert e.msg == "Invalid request (nothing was changed): " + e.errors[0]
    assert lab.sim.writes == [] and lab.etc_files() == []


# --------------------------------------------------------------------------------------------
# Driver and initramfs detection
# --------------------------------------------------------------------------------------------

def test_driver_module_from_modules_dep(lab):
    d = nq.NvmeHost(lab.sim).driver()
    assert d == {"kind": "module", "loaded": True, "module_file": MODDIR + "/kernel/drivers/nvme/host/nvme.ko",
                 "detected_by": MODDIR + "/modules.dep"}


def test_driver_builtin(tmp_path):
    lab = Lab(tmp_path, builtin=True)
    assert nq.NvmeHost(lab.sim).driver()["kind"] == "builtin"
    lab.h.remove(MODDIR + "/modules.builtin")
    d = nq.NvmeHost(lab.sim).driver()
    assert d["kind"] == "builtin" and "without initstate" in d["detected_by"]


def test_driver_compressed_module_and_missing(lab):
    lab.h.write(MODDIR + "/modules.dep", "kernel/drivers/nvme/host/nvme.ko.xz: kernel/drivers/nvme/host/nvme-core.ko.xz")
    assert nq.NvmeHost(lab.sim).driver()["module_file"].endswith("nvme.ko.xz")
    lab.h.write(MODDIR + "/modules.dep", "kernel/drivers/nvme/host/nvme-core.ko:")
    lab.h.remove("/sys/module/nvme/initstate")
    os.rename(lab.h.path("/sys/module/nvme"), lab.h.path("/sys/module/nvme.gone"))
    assert nq.NvmeHost(lab.sim).driver()["kind"] is None
    with pytest.raises(nq.RequestError) as exc:
        lab.run(poll_queues=1)
    assert "has no nvme driver" in exc.value.msg


def test_initramfs_listing(lab):
    host = nq.NvmeHost(lab.sim, lab.runner)
    info = host.initramfs()
    assert info["path"] == INITRD and info["tool"] == "lsinitramfs"
    assert info["contains_nvme"] is False and info["includes_options"] is False
    host.initramfs()
    assert len(lab.runner.called("lsinitramfs")) == 1, "listed once per call (seconds each under TCG)"
    lab.initramfs.files += NVME_IN_INITRAMFS + [nq.CONF_PATH.lstrip("/")]
    info = host.initramfs(refresh=True)
    assert info["contains_nvme"] is True and info["includes_options"] is True


def test_initramfs_unknown_without_a_listing_tool(tmp_path):
    lab = Lab(tmp_path)
    lab.runner.tools.pop("lsinitramfs")
    result = lab.run(poll_queues=1)
    assert result["initramfs"]["contains_nvme"] is None
    assert any("neither lsinitramfs nor lsinitrd" in w for w in result["warnings"])
    assert any("could not inspect" in a for a in result["action_required"])


# --------------------------------------------------------------------------------------------
# The hardware-queue map
# --------------------------------------------------------------------------------------------

def test_map_from_debugfs(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2, write_queues=1)
    c = nq.NvmeHost(lab.sim, lab.runner).controllers()["nvme0"]
    # 4 CPUs + 1 write + 2 poll queues; 4 interrupt vectors for I/O: 1 write (default), 3 read
    assert c["queues"] == {"default": 1, "read": 3, "poll": 2, "hctxs": 6, "nr_tags": 1023, "source": "debugfs"}
    assert c["transport"] == "pcie" and c["serial"] == "lab-nvme-a" and c["queue_count"] == 7
    ns = c["namespaces"]["nvme0n1"]
    assert [h["type"] for h in ns["hctxs"]] == ["default", "read", "read", "read", "poll", "poll"]
    assert ns["hctxs"][4]["cpu_list"] == [0, 2] and ns["io_poll"] == 1
    assert lab.runner.called("dmesg") == [], "the kernel log is only read when debugfs cannot say"


def test_map_from_the_kernel_log_without_debugfs(tmp_path):
    lab = Lab(tmp_path, debugfs=False, poll_queues=1)
    c = nq.NvmeHost(lab.sim, lab.runner).controllers()["nvme1"]
    assert c["queues"]["source"] == "kernel log" and c["queues"]["poll"] == 1
    hctxs = c["namespaces"]["nvme1n1"]["hctxs"]
    assert [(h["type"], h["type_source"]) for h in hctxs] == [("default", "kernel log")] * 2 + [("poll", "kernel log")]
    assert lab.runner.called("dmesg") == [["/usr/bin/dmesg"]]


def test_kernel_log_that_io_poll_contradicts_is_not_trusted(tmp_path):
    """After the unsafe reset the log says 1/0/1, but blk-mq has no poll map: io_poll reads 0."""
    lab = Lab(tmp_path, debugfs=False)
    lab.sim.write(nq.PARAMETERS_DIR + "/poll_queues", "1")
    lab.sim.write("/sys/class/nvme/nvme0/reset_controller", "1")
    c = nq.NvmeHost(lab.sim, lab.runner).controllers()["nvme0"]
    assert c["queues"]["poll"] is None and "io_poll reads [0]" in c["queues"]["note"]


def test_whole_call_without_debugfs_says_where_the_types_come_from(tmp_path):
    lab = Lab(tmp_path, debugfs=False, poll_queues=1)
    result = lab.run(poll_queues=1)
    assert result["queue_map_ok"] is True
    assert result["controllers"]["nvme0"]["queues"]["source"] == "kernel log"
    assert any(w.startswith("debugfs is not mounted (this module does not mount it)") for w in result["warnings"])
    assert not any("/sys/kernel/debug" in p for p, _v in lab.sim.writes)


def test_map_unknown_without_debugfs_and_log(tmp_path):
    lab = Lab(tmp_path, debugfs=False)
    lab.nvme.klog[:] = []
    c = nq.NvmeHost(lab.sim, lab.runner).controllers()["nvme0"]
    assert c["queues"]["poll"] is None and "debugfs is not mounted" in c["queues"]["note"]
    assert [h["type"] for h in c["namespaces"]["nvme0n1"]["hctxs"]] == [None, None]


def test_multipath_path_disks_carry_the_map(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head(subsys=0, ctrls=(0, 1))
    ctrls = nq.NvmeHost(KernelFSFor(h)).controllers()
    ns = ctrls["nvme1"]["namespaces"]["nvme0c1n1"]
    assert ns["multipath_head"] == {"name": "nvme0n1", "io_poll": 0}
    assert ctrls["nvme1"]["queues"]["hctxs"] == 2


def KernelFSFor(h):
    return SimKernel(h.root)


def test_stale_multipath_head_flag_is_reported(tmp_path):
    """6.12 lab: after 1 -> 0 poll queues with resets, the paths read io_poll 0, the head still 1."""
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head(subsys=0, ctrls=(0, 1))
    h.write(h.sysdir("nvme0n1") + "/queue/io_poll", 1)
    ctrls = nq.NvmeHost(KernelFSFor(h)).controllers()
    notes = nq.head_notes(ctrls)
    assert len(notes) == 1 and notes[0].startswith("multipath head nvme0n1: queue/io_poll reads 1 but its path nvme0c0n1")
    h.write(h.sysdir("nvme0n1") + "/queue/io_poll", 0)
    assert nq.head_notes(nq.NvmeHost(KernelFSFor(h)).controllers()) == []


def test_map_check(tmp_path):
    lab = Lab(tmp_path, poll_queues=1)
    ctrls = nq.NvmeHost(lab.sim).controllers()
    assert nq.map_check(ctrls, 1) is True
    assert nq.map_check(ctrls, 0) is False
    assert "nvme0n1 queue/io_poll reads 1, expected 0" in ctrls["nvme0"]["map_problems"]
    assert nq.map_check({}, 1) is None


# --------------------------------------------------------------------------------------------
# The safety rule for the runtime path
# --------------------------------------------------------------------------------------------

def _state(lab):
    host = nq.NvmeHost(lab.sim, lab.runner)
    return host.controllers(), host.parameters()


@pytest.mark.parametrize("boot, change, needle", [
    ({}, {"poll_queues": 1}, "nvme0 runs 2/0/0 default/read/poll (debugfs); poll_queues=1 would add poll queues"),
    ({"poll_queues": 1}, {"poll_queues": 2}, "poll_queues=2 would add poll queues"),
    ({}, {"write_queues": 1}, "write_queues=1 would add write queues"),
    ({"poll_queues": 1}, {"io_queue_depth": 512}, "io_queue_depth 1024 -> 512"),
    ({"poll_queues": 1}, {"io_queue_depth": 2048}, "a reset does not resize it"),
])
def test_runtime_problems(tmp_path, boot, change, needle):
    lab = Lab(tmp_path, **boot)
    ctrls, live = _state(lab)
    effective = dict(live, **change)
    problems = nq.runtime_problems(ctrls, live, effective)
    assert problems and needle in "; ".join(problems)


def test_runtime_safe_when_no_queue_type_is_added(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2, write_queues=1)
    ctrls, live = _state(lab)
    for change in ({"poll_queues": 1}, {"poll_queues": 0}, {"write_queues": 0}, {"poll_queues": 2, "write_queues": 1}):
        assert nq.runtime_problems(ctrls, live, dict(live, **change)) == []


def test_runtime_refused_when_types_unknown_or_not_live(tmp_path):
    lab = Lab(tmp_path, debugfs=False, poll_queues=1)
    lab.nvme.klog[:] = []
    ctrls, live = _state(lab)
    assert "hctx types are unknown" in nq.runtime_problems(ctrls, live, dict(live, poll_queues=0))[0]
    lab = Lab(tmp_path / "b", poll_queues=1)
    lab.h.write("/sys/class/nvme/nvme1/state", "resetting")
    ctrls, live = _state(lab)
    assert "nvme1 is in state 'resetting', not live" in nq.runtime_problems(ctrls, live, dict(live, poll_queues=0))


# --------------------------------------------------------------------------------------------
# Whole calls
# --------------------------------------------------------------------------------------------

def test_persist_only_by_default(lab):
    result = lab.run(poll_queues=1)
    assert result["changed"] is True
    conf = lab.conf()
    assert is_managed(conf) and conf.splitlines()[-1] == "options nvme poll_queues=1"
    assert [p for p, _v in lab.sim.writes] == [], "no parameter written, no controller reset"
    assert lab.nvme.resets == [] and lab.nvme.stalled == []
    assert result["reboot_required"] is True and result["queue_map_ok"] is False
    assert result["parameters"] == {"poll_queues": 0, "write_queues": 0, "io_queue_depth": 1024}
    assert result["next_boot"] == {"poll_queues": 1, "write_queues": 0, "io_queue_depth": 1024}
    assert result["next_boot_sources"]["poll_queues"] == nq.CONF_PATH
    assert result["persisted"] == {"mechanism": "modprobe.d", "path": nq.CONF_PATH, "options": {"poll_queues": 1},
                                   "kernel_cmdline": {}}
    assert result["driver"]["loads_from"] == "root filesystem" and result["action_required"] == []
    assert result["diff"] == {"before": {nq.CONF_PATH: None}, "after": {nq.CONF_PATH: conf}}
    assert result["controllers_reset"] == []
    again = lab.run(poll_queues=1)
    assert again["changed"] is False and again["reboot_required"] is True and lab.etc_files() == [lab.h.path(nq.CONF_PATH)]


def test_after_the_reboot_the_map_is_verified(lab):
    lab.run(poll_queues=1)
    lab.nvme.boot(poll_queues=1)  # what modprobe does at the next boot with the file
    result = lab.run(poll_queues=1)
    assert result["changed"] is False and result["reboot_required"] is False and result["queue_map_ok"] is True
    for name in ("nvme0", "nvme1"):
        c = result["controllers"][name]
        assert c["queues"]["poll"] == 1 and c["map_ok"] is True and c["map_problems"] == []
        ns = c["namespaces"][name + "n1"]
        assert ns["io_poll"] == 1 and [h["type"] for h in ns["hctxs"]].count("poll") == 1
    assert "nr_tags" not in result["controllers"]["nvme0"]["queues"]


def test_check_mode_writes_nothing(lab):
    result = lab.run(check_mode=True, poll_queues=1, write_queues=1)
    assert result["changed"] is True and lab.etc_files() == [] and lab.sim.writes == []
    assert result["diff"]["after"][nq.CONF_PATH].endswith("options nvme poll_queues=1 write_queues=1\n")
    assert result["reboot_required"] is True


def test_absent_removes_the_file_and_reports_the_reboot(lab):
    lab.run(poll_queues=1)
    lab.nvme.boot(poll_queues=1)
    result = lab.run(state="absent")
    assert result["changed"] is True and lab.conf() is None
    assert result["next_boot"]["poll_queues"] == 0 and result["reboot_required"] is True
    assert result["poll_queues_expected"] == 0 and result["queue_map_ok"] is False
    lab.nvme.boot(poll_queues=0)
    result = lab.run(state="absent")
    assert result["changed"] is False and result["reboot_required"] is False and result["queue_map_ok"] is True
    assert all(c["queues"]["poll"] == 0 for c in result["controllers"].values())


def test_foreign_file_needs_adopt(lab):
    lab.h.write(nq.CONF_PATH, "options nvme poll_queues=1\n")
    with pytest.raises(ReconcileError) as exc:
        lab.run(poll_queues=1)
    assert "not managed by aiinfra.io_isolation" in exc.value.msg
    assert lab.conf() == "options nvme poll_queues=1\n"
    assert lab.run(poll_queues=1, adopt=True)["changed"] is True and is_managed(lab.conf())


def test_conflicting_modprobe_file_and_cmdline_fail_before_any_write(lab):
    lab.h.write("/etc/modprobe.d/zz-nvme.conf", "options nvme poll_queues=2\n")
    with pytest.raises(nq.RequestError) as exc:
        lab.run(poll_queues=1)
    assert "/etc/modprobe.d/zz-nvme.conf sets nvme poll_queues=2 as well" in exc.value.msg
    assert lab.conf() is None
    lab.h.remove("/etc/modprobe.d/zz-nvme.conf")
    lab.h.write("/lib/modprobe.d/nvme.conf", "options nvme io_queue_depth=512\n")  # not managed here: fine
    lab.h.write("/proc/cmdline", "root=/dev/vda rw nvme.poll_queues=0")
    with pytest.raises(nq.RequestError) as exc:
        lab.run(poll_queues=1)
    assert "the kernel command line sets nvme.poll_queues=0" in exc.value.msg and lab.conf() is None
    lab.h.write("/proc/cmdline", "root=/dev/vda rw nvme.poll_queues=1")
    result = lab.run(poll_queues=1)
    assert result["next_boot"] == {"poll_queues": 1, "write_queues": 0, "io_queue_depth": 512}
    assert result["next_boot_sources"]["io_queue_depth"] == "/lib/modprobe.d/nvme.conf"
    assert result["next_boot_sources"]["poll_queues"] == "/proc/cmdline"


@pytest.mark.parametrize("boot, params", [
    ({}, {"poll_queues": 1}),
    ({}, {"poll_queues": 1, "write_queues": 1}),
    ({"poll_queues": 1}, {"poll_queues": 2}),
    ({"poll_queues": 1}, {"poll_queues": 1, "io_queue_depth": 256}),
])
def test_unsafe_runtime_path_is_refused_without_touching_anything(tmp_path, boot, params):
    lab = Lab(tmp_path, **boot)
    before = lab.conf()
    with pytest.raises(nq.RequestError) as exc:
        lab.run(reset_controllers=True, **params)
    assert "reset_controllers=true refused, nothing written and no controller reset" in exc.value.msg
    assert "nothing was changed" in exc.value.msg
    assert lab.sim.writes == [] and lab.nvme.resets == [] and lab.nvme.stalled == [] and lab.conf() == before
    assert lab.runner.called("lsinitramfs") == [], "refused before the slow initramfs listing"


def test_safe_runtime_path_resets_and_verifies(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2)
    result = lab.run(poll_queues=1, reset_controllers=True)
    assert result["changed"] is True and result["controllers_reset"] == ["nvme0", "nvme1"]
    assert lab.sim.writes[0] == (nq.PARAMETERS_DIR + "/poll_queues", "1")
    assert [p for p, _v in lab.sim.writes[1:]] == [
        "/sys/class/nvme/nvme0/reset_controller", "/sys/class/nvme/nvme1/reset_controller"]
    assert lab.nvme.stalled == []
    assert result["parameters"]["poll_queues"] == 1 and result["queue_map_ok"] is True
    assert result["reboot_required"] is False and lab.conf().endswith("options nvme poll_queues=1\n")
    assert all(c["queues"]["poll"] == 1 for c in result["controllers"].values())
    runtime_key = [k for k in result["diff"]["after"] if k.startswith("runtime")][0]
    assert result["diff"]["before"][runtime_key]["poll_queues"] == {"nvme0": 2, "nvme1": 2}
    assert result["diff"]["after"][runtime_key]["io_poll"] == {"nvme0": 1, "nvme1": 1}
    lab.sim.writes[:] = []
    again = lab.run(poll_queues=1, reset_controllers=True)
    assert again["changed"] is False and lab.sim.writes == [] and again["controllers_reset"] == []


def test_safe_runtime_path_to_zero_on_the_lab_boot(tmp_path):
    """The lab: booted with poll_queues=1, then 0 with a reset -> 2/0/0, io_poll 0, no stall."""
    lab = Lab(tmp_path, poll_queues=1)
    lab.run(poll_queues=1)
    result = lab.run(poll_queues=0, reset_controllers=True)
    assert result["queue_map_ok"] is True and lab.nvme.stalled == []
    assert result["controllers"]["nvme0"]["queues"]["default"] == 2
    assert result["controllers"]["nvme0"]["namespaces"]["nvme0n1"]["io_poll"] == 0
    with pytest.raises(nq.RequestError):
        lab.run(poll_queues=1, reset_controllers=True)  # the map no longer proves a poll map exists


def test_runtime_read_back_mismatch_restores_parameters_and_resets_again(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2)
    lab.nvme.ignore_resets = True  # a controller that comes back with its old split
    with pytest.raises(ReconcileError) as exc:
        lab.run(poll_queues=1, reset_controllers=True)
    assert "The kernel holds" in exc.value.msg and "'poll_queues': {'nvme0': 2, 'nvme1': 2}" in exc.value.msg
    assert exc.value.restored == [nq.CONF_PATH, "runtime (%s + reset_controller)" % nq.PARAMETERS_DIR]
    assert lab.nvme.params["poll_queues"] == 2
    assert lab.nvme.resets == ["nvme0", "nvme1", "nvme0", "nvme1"], "old parameters back, then reset again"
    assert lab.conf() is None, "the file written before the read-back was removed again"


def test_safe_runtime_path_in_check_mode(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2)
    result = lab.run(check_mode=True, poll_queues=1, reset_controllers=True)
    assert result["changed"] is True and lab.sim.writes == [] and lab.nvme.resets == [] and lab.conf() is None
    assert result["reboot_required"] is False, "predicted: the reset would make the driver run the new value"
    assert any(k.startswith("runtime") for k in result["diff"]["after"])


def test_controller_that_does_not_come_back_live(tmp_path, monkeypatch):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2)
    monkeypatch.setattr(nq, "RESET_TIMEOUT", 0.3)
    reset = lab.sim.handlers["/sys/class/nvme/nvme0/reset_controller"]

    def stuck(line):
        reset(line)
        lab.h.write("/sys/class/nvme/nvme0/state", "resetting")
    lab.sim.handlers["/sys/class/nvme/nvme0/reset_controller"] = stuck
    with pytest.raises(ReconcileError) as exc:
        lab.run(poll_queues=1, reset_controllers=True)
    assert exc.value.msg.startswith("Applying runtime (/sys/module/nvme/parameters + reset_controller) failed: "
                                    "Wait 0.3 s for /sys/class/nvme/nvme0/state failed")
    assert "(ETIMEDOUT)" in exc.value.msg and lab.nvme.params["poll_queues"] == 2


def test_runtime_kernel_refusal_restores(tmp_path):
    lab = Lab(tmp_path, ncpus=4, poll_queues=2)

    def refuse(line):
        raise OSError(errno.EBUSY, "busy")
    lab.sim.handlers["/sys/class/nvme/nvme1/reset_controller"] = refuse
    with pytest.raises(ReconcileError) as exc:
        lab.run(poll_queues=1, reset_controllers=True)
    assert "Applying runtime" in exc.value.msg and "nvme1/reset_controller" in exc.value.msg
    assert "EBUSY" in exc.value.msg and "COULD NOT RESTORE" in exc.value.msg  # nvme1 refuses the restore too
    assert lab.nvme.params["poll_queues"] == 2 and lab.conf() is None
    assert lab.nvme.resets == ["nvme0", "nvme0"], "nvme0 got the old parameters back through a second reset"


def test_hazard_warning_when_the_parameter_runs_ahead_of_the_map(lab):
    lab.sim.write(nq.PARAMETERS_DIR + "/poll_queues", "1")  # someone wrote it without a reboot
    result = lab.run(poll_queues=1)
    assert any("any reset of it (error recovery included)" in w for w in result["warnings"])
    assert result["reboot_required"] is True


def test_builtin_driver_reports_the_kernel_command_line(tmp_path):
    lab = Lab(tmp_path, builtin=True)
    result = lab.run(poll_queues=1, write_queues=1)
    assert result["changed"] is False and lab.etc_files() == [] and lab.runner.called("lsinitramfs") == []
    assert result["persisted"]["mechanism"] == "kernel command line" and result["persisted"]["path"] is None
    assert "put nvme.poll_queues=1 nvme.write_queues=1 on the kernel command line" in result["action_required"][0]
    assert result["driver"]["loads_from"] == "kernel image (built in)"
    assert result["queue_map_ok"] is False and result["reboot_required"] is False
    lab.h.write("/proc/cmdline", "root=/dev/vda nvme.poll_queues=1 nvme.write_queues=1")
    lab.nvme.boot(poll_queues=1, write_queues=1)
    result = lab.run(poll_queues=1, write_queues=1)
    assert result["action_required"] == [] and result["queue_map_ok"] is True and result["reboot_required"] is False


def test_initramfs_with_nvme_without_opt_in(tmp_path):
    lab = Lab(tmp_path, initramfs=LAB_INITRAMFS + NVME_IN_INITRAMFS)
    result = lab.run(poll_queues=1)
    assert result["changed"] is True and lab.conf() is not None
    assert lab.runner.called("update-initramfs") == []
    assert result["initramfs"]["contains_nvme"] is True and result["initramfs"]["up_to_date"] is False
    assert "update-initramfs -u -k %s" % RELEASE in result["action_required"][0]
    assert result["driver"]["loads_from"] == "initramfs (%s)" % INITRD


def test_initramfs_rebuilt_with_opt_in_then_idempotent(tmp_path):
    lab = Lab(tmp_path, initramfs=LAB_INITRAMFS + NVME_IN_INITRAMFS)
    old = os.path.getmtime(lab.h.path(INITRD)) - 10
    os.utime(lab.h.path(INITRD), (old, old))
    result = lab.run(poll_queues=1, update_initramfs=True)
    assert lab.runner.called("update-initramfs") == [["/usr/sbin/update-initramfs", "-u", "-k", RELEASE]]
    assert result["initramfs"]["includes_options"] is True and result["initramfs"]["up_to_date"] is True
    assert result["action_required"] == [] and INITRD in result["diff"]["after"]
    result = lab.run(poll_queues=1, update_initramfs=True)
    assert result["changed"] is False and len(lab.runner.called("update-initramfs")) == 1
    # absent: the file goes, and the initramfs must lose its copy too
    result = lab.run(state="absent", update_initramfs=True)
    assert result["changed"] is True and len(lab.runner.called("update-initramfs")) == 2
    assert result["initramfs"]["includes_options"] is False and lab.conf() is None


def test_initramfs_check_mode_plans_the_rebuild(tmp_path):
    lab = Lab(tmp_path, initramfs=LAB_INITRAMFS + NVME_IN_INITRAMFS)
    result = lab.run(check_mode=True, poll_queues=1, update_initramfs=True)
    assert result["changed"] is True and lab.runner.called("update-initramfs") == [] and lab.conf() is None
    assert result["diff"]["after"][INITRD] == {"includes_options": True, "up_to_date": True}


def test_host_profile_lists_the_initramfs_in_the_background_and_finishes_before_the_run(tmp_path):
    """host_profile (defer): the listing starts while planning and its answer, taken by finish(), gives the same
    settings as the module's own plan (the rebuild last) - nothing is written before."""
    lab = Lab(tmp_path, initramfs=LAB_INITRAMFS + NVME_IN_INITRAMFS)
    params = {"poll_queues": 1, "update_initramfs": True}
    deferred = nq.part(dict(params), lab.sim, lab.runner, defer=True)
    assert lab.runner.started == [["/usr/bin/lsinitramfs", INITRD]]
    assert not any(isinstance(s, nq.InitramfsUpdate) for s in deferred.settings), "not decided before finish()"
    deferred.finish()
    deferred.finish()   # once
    assert len(lab.runner.called("lsinitramfs")) == 1
    now = nq.part(dict(params), lab.sim, lab.runner)
    assert [type(s).__name__ for s in deferred.settings] == [type(s).__name__ for s in now.settings]
    assert isinstance(deferred.settings[-1], nq.InitramfsUpdate)
    assert lab.sim.writes == []


def test_a_failed_background_listing_is_the_same_warning(tmp_path):
    lab = Lab(tmp_path)
    lab.runner.answer(["/usr/bin/lsinitramfs", Ellipsis], nq.CommandError(["lsinitramfs", INITRD], 1, "", "corrupt"))
    deferred = nq.part({"poll_queues": 1}, lab.sim, lab.runner, defer=True)
    deferred.finish()
    result = deferred.report({"changed": False, "diff": {"before": {}, "after": {}}, "values": {}}, True)
    assert any("cannot list %s" % INITRD in w and "corrupt" in w for w in result["warnings"])
