# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SimCgroup and SimSystemd test helpers behave like the kernel and systemd they stand in for."""

import errno
import os

import pytest

from sim.host import FakeHost
from sim.cgroup import SimCgroup
from sim.systemd import CONTROL_DIR, SimSystemd, format_timespan, parse_timespan, slice_path

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError

CG = "/sys/fs/cgroup"
QOS = "259:0 enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00"


def make(tmp_path, version=252):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, serial="lab-nvme-a", majmin="259:0")
    h.add_nvme(ctrl=1, serial="lab-nvme-b", majmin="259:1")
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.write(CG + "/io.cost.qos", QOS)
    kernel = SimCgroup(h)
    return h, kernel, SimSystemd(h, kernel, version=version)


def link(h, disk="nvme0n1"):
    return "/dev/disk/by-id/nvme-" + h.devices[disk]["wwid"]


def cat(h, path):
    return h.read(path).rstrip("\n")


# ---------------------------------------------------------------------------------------------
# SimCgroup
# ---------------------------------------------------------------------------------------------

def test_mkdir_populates_files_from_the_parent_and_rmdir_refuses_busy_groups(tmp_path):
    h, kernel, _sd = make(tmp_path)
    kernel.mkdir(CG + "/a")
    assert cat(h, CG + "/a/cgroup.controllers") == "cpu io memory pids"
    assert cat(h, CG + "/a/io.weight") == "default 100" and cat(h, CG + "/a/memory.high") == "max"
    kernel.mkdir(CG + "/a/b")
    assert cat(h, CG + "/a/b/cgroup.controllers") == "" and not os.path.exists(h.path(CG + "/a/b/io.weight"))
    with pytest.raises(KernelFileError) as exc:
        kernel.rmdir(CG + "/a")
    assert exc.value.errname == "EBUSY"                     # a child group
    h.write(CG + "/a/b/cgroup.procs", "42")
    with pytest.raises(KernelFileError, match="EBUSY"):
        kernel.rmdir(CG + "/a/b")
    h.write(CG + "/a/b/cgroup.procs", "")
    kernel.rmdir(CG + "/a/b")
    assert not os.path.exists(h.path(CG + "/a/b"))
    with pytest.raises(KernelFileError, match="ENOENT"):
        kernel.mkdir(CG + "/x/y")
    assert kernel.ops[:2] == [("mkdir", CG + "/a"), ("mkdir", CG + "/a/b")]


def test_subtree_control_rules(tmp_path):
    h, kernel, _sd = make(tmp_path)
    kernel.add_group("a/b", procs="")
    kernel.write(CG + "/a/cgroup.subtree_control", "+io +memory")
    assert cat(h, CG + "/a/cgroup.subtree_control") == "io memory"
    assert cat(h, CG + "/a/b/cgroup.controllers") == "io memory" and cat(h, CG + "/a/b/io.max") == ""
    with pytest.raises(KernelFileError, match="ENOENT"):
        kernel.write(CG + "/a/b/cgroup.subtree_control", "+cpu")       # not available in b
    kernel.write(CG + "/a/b/cgroup.subtree_control", "+io")
    with pytest.raises(KernelFileError, match="EBUSY"):
        kernel.write(CG + "/a/cgroup.subtree_control", "-io")           # b still enables io for its children
    h.write(CG + "/a/cgroup.procs", "7")
    with pytest.raises(KernelFileError, match="EBUSY"):
        kernel.write(CG + "/a/cgroup.subtree_control", "+cpu")          # no internal processes
    kernel.write(CG + "/a/cgroup.subtree_control", "+io")               # already on: allowed
    kernel.write(CG + "/a/cgroup.subtree_control", "-memory")
    assert not os.path.exists(h.path(CG + "/a/b/memory.high"))
    assert cat(h, CG + "/a/b/cgroup.controllers") == "io"
    h.write(CG + "/cgroup.procs", "1")
    kernel.write(CG + "/cgroup.subtree_control", "+cpu")                # the root is exempt


@pytest.mark.parametrize("name, lines, text", [
    ("io.weight", ["300", "259:0 400", "259:0 default", "default 50"], "default 50"),
    ("io.weight", ["259:0 400"], "default 100\n259:0 400"),
    ("io.max", ["259:0 rbps=1000 riops=4294967295"], "259:0 rbps=1000 wbps=max riops=max wiops=max"),
    ("io.max", ["259:0 rbps=1000", "259:0 rbps=max"], ""),
    ("memory.high", ["1000000"], "999424"),
    ("memory.min", ["max"], "max"),
    ("cpu.max", ["50000"], "50000 100000"),
    ("cpu.max", ["max 50000"], "max 50000"),
    ("cpu.weight", ["10000"], "10000"),
    ("io.prio.class", ["idle"], "idle"),
])
def test_file_handlers(tmp_path, name, lines, text):
    h, kernel, _sd = make(tmp_path)
    kernel.add_group("g", files={"io.prio.class": "no-change"})
    for line in lines:
        kernel.write(CG + "/g/" + name, line)
    assert cat(h, CG + "/g/" + name) == text


@pytest.mark.parametrize("name, line, err", [
    ("io.weight", "0", "EINVAL"), ("io.weight", "10001", "EINVAL"), ("io.weight", "259:1 200", errno.EOPNOTSUPP),
    ("io.weight", "8:0 200", "ENODEV"), ("io.max", "259:0 rbps=0", "ERANGE"), ("io.max", "259:0 bogus=1", "EINVAL"),
    ("memory.high", "10%", "EINVAL"), ("cpu.weight", "0", "ERANGE"), ("cpu.max", "500 100000", "EINVAL"),
    ("io.prio.class", "3", "EINVAL"), ("memory.oom.group", "2", "EINVAL"), ("io.latency", "259:0 target=5", "ENOENT"),
])
def test_file_handlers_refuse_like_the_kernel(tmp_path, name, line, err):
    _h, kernel, _sd = make(tmp_path)
    kernel.add_group("g", files={"io.prio.class": "no-change"})
    with pytest.raises(KernelFileError) as exc:
        kernel.write(CG + "/g/" + name, line)
    assert exc.value.errno == err if isinstance(err, int) else exc.value.errname == err


def test_ignore_and_refuse(tmp_path):
    h, kernel, _sd = make(tmp_path)
    kernel.add_group("g")
    kernel.ignore.add("memory.high")
    kernel.write(CG + "/g/memory.high", "4096")
    assert cat(h, CG + "/g/memory.high") == "max"
    kernel.refuse["cpu.weight"] = errno.EACCES
    with pytest.raises(KernelFileError, match="EACCES"):
        kernel.write(CG + "/g/cpu.weight", "5")
    assert kernel.writes == [(CG + "/g/memory.high", "4096"), (CG + "/g/cpu.weight", "5")]


# ---------------------------------------------------------------------------------------------
# SimSystemd
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, rel", [("inference.slice", "inference.slice"),
                                       ("ai-inference.slice", "ai.slice/ai-inference.slice"),
                                       ("a-b-c.slice", "a.slice/a-b.slice/a-b-c.slice")])
def test_slice_nesting(tmp_path, name, rel):
    h, _kernel, systemd = make(tmp_path)
    assert slice_path(name) == rel
    systemd.run(["systemctl", "start", "--", name])
    assert os.path.isdir(h.path(CG + "/" + rel))
    assert cat(h, CG + "/" + rel + "/cgroup.controllers") == "cpu io memory pids"
    assert systemd.run(["systemctl", "show", "-p", "ControlGroup", "--value", "--", name])[1] == "/%s\n" % rel


def test_version_and_unknown_units(tmp_path):
    _h, _kernel, systemd = make(tmp_path, version=257)
    assert sd.systemd_version(systemd) == 257
    out = systemd.run(["systemctl", "show", "-p", "LoadState", "-p", "FragmentPath", "--", "nope.service"])[1]
    assert out == "LoadState=not-found\nFragmentPath=\n"
    assert systemd.run(["systemctl", "show", "-p", "LoadState", "--", "x.slice"])[1] == "LoadState=loaded\n"
    with pytest.raises(CommandError, match="Unit nope.service not found"):
        systemd.run(["systemctl", "start", "--", "nope.service"])
    assert systemd.run(["systemctl", "frobnicate"], check=False)[0] == 1
    assert systemd.mutating_calls == [["systemctl", "start", "--", "nope.service"]]


@pytest.mark.parametrize("version, applied", [(252, True), (257, False)])
def test_daemon_reload_applies_changed_dropins_only_on_252(tmp_path, version, applied):
    h, _kernel, systemd = make(tmp_path, version=version)
    systemd.run(["systemctl", "start", "--", "inference.slice"])
    h.write("/etc/systemd/system/inference.slice.d/50-x.conf", "[Slice]\nIOWeight=300\n")
    systemd.run(["systemctl", "daemon-reload"])
    assert systemd.run(["systemctl", "show", "-p", "IOWeight", "--", "inference.slice"])[1] == "IOWeight=300\n"
    assert cat(h, CG + "/inference.slice/io.weight") == ("default 300" if applied else "default 100")
    systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "CPUWeight=50"])
    assert cat(h, CG + "/inference.slice/io.weight") == "default 300"   # set-property applies the whole unit
    assert cat(h, CG + "/inference.slice/cpu.weight") == "50"


def test_set_property_runtime_files_and_file_order(tmp_path):
    h, _kernel, systemd = make(tmp_path, version=252)
    systemd.run(["systemctl", "start", "--", "inference.slice"])
    h.write("/etc/systemd/system/inference.slice.d/50-aiinfra-io-isolation.conf", "[Slice]\nIOWeight=300\n")
    systemd.run(["systemctl", "daemon-reload"])
    systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "IOWeight=700", "MemoryHigh="])
    control = CONTROL_DIR + "/inference.slice.d"
    assert sorted(os.listdir(h.path(control))) == ["50-IOWeight.conf", "50-MemoryHigh.conf"]
    assert h.read(control + "/50-IOWeight.conf").endswith("[Slice]\nIOWeight=700\n")
    assert cat(h, CG + "/inference.slice/io.weight") == "default 700"
    # after a reload the later file name wins: 50-aiinfra-... sorts after 50-IOWeight.conf
    systemd.run(["systemctl", "daemon-reload"])
    assert cat(h, CG + "/inference.slice/io.weight") == "default 300"
    with pytest.raises(CommandError, match="Unknown assignment: Bogus=1"):
        systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "Bogus=1"])


def test_device_lists_apply_and_show(tmp_path):
    h, kernel, systemd = make(tmp_path, version=257)
    a, b = link(h, "nvme0n1"), link(h, "nvme1n1")
    systemd.run(["systemctl", "start", "--", "inference.slice"])
    systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "IOWeight=50",
                 "IODeviceWeight=%s 200" % a, "IODeviceWeight=%s 300" % b, "IOReadBandwidthMax=%s 10000000" % a,
                 "IOWriteIOPSMax=%s 500" % a, "MemoryMin=1000000", "CPUQuota=33.33%", "CPUQuotaPeriodSec=50ms"])
    # nvme1n1 has no iocost: the kernel refuses its line and systemd goes on without an error
    assert cat(h, CG + "/inference.slice/io.weight") == "default 50\n259:0 200"
    assert any("'259:1 300'" in m and "Operation not supported" in m for m in systemd.journal), systemd.journal
    assert cat(h, CG + "/inference.slice/io.max") == "259:0 rbps=10000000 wbps=max riops=max wiops=500"
    assert cat(h, CG + "/inference.slice/memory.min") == "999424"
    assert cat(h, CG + "/inference.slice/cpu.max") == "16665 50000"
    shown = sd.show_values(systemd.run(["systemctl", "show", "--", "inference.slice"])[1])
    assert shown["IOWeight"] == 50 and shown["IODeviceWeight"] == {a: 200, b: 300}
    assert shown["IOReadBandwidthMax"] == {a: 10000000} and shown["IOWriteIOPSMax"] == {a: 500}
    assert shown["MemoryMin"] == 1000000 and shown["MemoryHigh"] == "max" and shown["CPUWeight"] is None
    assert shown["CPUQuotaPerSecUSec"] == 333300 and shown["CPUQuotaPeriodUSec"] == 50000
    assert shown["MemoryZSwapMax"] == "max"
    # a device that leaves the list keeps its kernel line; an empty assignment clears the list
    systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "IODeviceWeight="])
    assert cat(h, CG + "/inference.slice/io.weight") == "default 50\n259:0 200"
    assert "IODeviceWeight" not in sd.show_values(systemd.run(["systemctl", "show", "--", "inference.slice"])[1])
    assert kernel.writes == [], "systemd's writes are not the module's"


def test_252_has_no_zswap_property(tmp_path):
    h, _kernel, systemd = make(tmp_path, version=252)
    assert "MemoryZSwapMax" not in systemd.run(["systemctl", "show", "--", "x.slice"])[1]
    h.write("/etc/systemd/system/x.slice.d/a.conf", "[Slice]\nMemoryZSwapMax=0\n")
    systemd.run(["systemctl", "daemon-reload"])
    assert "MemoryZSwapMax" not in systemd.run(["systemctl", "show", "--", "x.slice"])[1]


def test_fragment_path_follows_the_unit_file(tmp_path):
    h, _kernel, systemd = make(tmp_path)
    systemd.add_unit("vllm.service", active=True, fragment="/usr/lib/systemd/system/vllm.service")
    h.write("/etc/systemd/system/inference.slice", "[Unit]\nDescription=x\n")
    systemd.run(["systemctl", "daemon-reload"])
    assert sd.unit_info(systemd, "inference.slice")["FragmentPath"] == "/etc/systemd/system/inference.slice"
    assert sd.unit_info(systemd, "vllm.service") == {
        "LoadState": "loaded", "ActiveState": "active", "ControlGroup": "/system.slice/vllm.service",
        "FragmentPath": "/usr/lib/systemd/system/vllm.service"}
    h.remove("/etc/systemd/system/inference.slice")
    systemd.run(["systemctl", "daemon-reload"])
    assert sd.unit_info(systemd, "inference.slice")["FragmentPath"] == ""


def test_failure_injection(tmp_path):
    _h, _kernel, systemd = make(tmp_path)
    systemd.fail("set-property", rc=1, err="Access denied")
    with pytest.raises(CommandError) as exc:
        systemd.run(["systemctl", "set-property", "--runtime", "--", "x.slice", "IOWeight=5"])
    assert "rc=1: Access denied" in exc.value.msg
    assert systemd.run(["systemctl", "set-property", "--runtime", "--", "x.slice", "IOWeight=5"])[0] == 0
    assert sd.show_values(systemd.run(["systemctl", "show", "-p", "IOWeight", "--", "x.slice"])[1]) == {"IOWeight": 5}


@pytest.mark.parametrize("usec, text", [(0, "0"), (500000, "500ms"), (1500000, "1s 500ms"), (64000000, "1min 4s"),
                                        (25300, "25ms 300us"), ("max", "infinity")])
def test_timespans_round_trip_through_the_plugin_parser(usec, text):
    assert format_timespan(usec) == text
    assert parse_timespan(text) == usec and sd.parse_timespan(text) == usec


def test_a_running_service_keeps_its_cgroup_until_it_restarts_in_its_configured_slice(tmp_path):
    h, _kernel, systemd = make(tmp_path)
    h.mkdir(CG + "/system.slice")
    systemd.add_unit("vllm.service", active=True, fragment="/usr/lib/systemd/system/vllm.service")

    def show(prop):
        return systemd.run(["systemctl", "show", "-p", prop, "--value", "--", "vllm.service"])[1].strip()
    assert show("Slice") == "system.slice" and show("ControlGroup") == "/system.slice/vllm.service"
    h.write("/etc/systemd/system/vllm.service.d/90-x.conf", "[Service]\nSlice=inference.slice\n")
    systemd.run(["systemctl", "daemon-reload"])
    assert show("Slice") == "inference.slice" and show("ControlGroup") == "/system.slice/vllm.service"
    assert show("DropInPaths") == "/etc/systemd/system/vllm.service.d/90-x.conf"
    systemd.run(["systemctl", "restart", "--", "vllm.service"])
    assert show("ControlGroup") == "/inference.slice/vllm.service"
    assert os.path.isdir(h.path(CG + "/inference.slice/vllm.service"))
    assert not os.path.isdir(h.path(CG + "/system.slice/vllm.service"))
    with pytest.raises(CommandError, match="Unit nope.service not found"):
        systemd.run(["systemctl", "restart", "--", "nope.service"])


def test_unit_listings_as_json_or_the_plain_table(tmp_path):
    _h, _kernel, systemd = make(tmp_path)
    systemd.add_unit("vllm.service", active=True, fragment="/usr/lib/systemd/system/vllm.service")
    systemd.add_unit("batch.service", fragment="/usr/lib/systemd/system/batch.service", file_state="disabled")
    systemd.add_unit("sshd.service", alias_of="vllm.service")
    opts = ["--type=service", "--plain", "--no-legend", "--output=json"]
    assert systemd.run(["systemctl", "list-units"] + opts)[1] == (
        '[{"unit":"vllm.service","load":"loaded","active":"active","sub":"running","description":"vllm.service"}]\n')
    assert '"unit_file":"sshd.service","state":"alias"' in systemd.run(["systemctl", "list-unit-files"] + opts)[1]
    systemd.json_tables = False
    assert systemd.run(["systemctl", "list-units", "--all"] + opts)[1] == (
        "batch.service loaded inactive dead batch.service\nvllm.service loaded active running vllm.service\n")
    assert systemd.run(["systemctl", "show", "-p", "Id", "--value", "--", "sshd.service"])[1] == "vllm.service\n"
