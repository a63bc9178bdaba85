# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cgroup knob catalogue: one entry per option, consistent with the codecs, the kernel and systemd."""

import pytest

from sim.cgroup import controller_files

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import cgroup_knobs as knobs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import CHILD_IO_FILES

ALL_FEATURES = {"io_latency": True, "io_prio": True, "io_low": True}


def test_every_option_is_one_knob():
    names = [k.name for k in knobs.KNOBS]
    assert len(names) == len(set(names))
    assert knobs.keys("io") == ("weight", "weights", "max", "latency", "prio_class", "low")
    assert knobs.keys("memory") == ("min", "low", "high", "max", "swap_max", "zswap_max", "oom_group")
    assert knobs.keys("cpu") == ("weight", "max", "cpus", "mems")
    assert [k.controller for k in knobs.of("cpu")] == ["cpu", "cpu", "cpuset", "cpuset"]
    assert set(knobs.argument_spec()) == set(knobs.GROUPS)
    assert knobs.argument_spec()["memory"]["options"]["oom_group"] == {"type": "bool"}


@pytest.mark.parametrize("knob", knobs.KNOBS, ids=lambda k: k.name)
def test_a_fresh_group_holds_the_neutral_values(knob):
    """What the kernel (SimCgroup's model of it) shows in a new group is each knob's neutral value."""
    text = controller_files(knob.controller, ALL_FEATURES)[knob.file]
    parsed = knob.codec.parse(text)
    if knob.line:
        assert knob.codec.lookup(parsed, knob.line) == knob.neutral == knobs.fresh_value(knob.file, knob.line)
    elif knob.per_device:
        assert knob.codec.lookup(parsed, "259:0") == knobs.fresh_value(knob.file, "259:0") == knob.codec.absent
        assert knob.neutral in (knob.codec.absent, None)
    else:
        assert parsed == knob.neutral == knobs.fresh_value(knob.file)


@pytest.mark.parametrize("knob", [k for k in knobs.KNOBS if k.neutral is not None], ids=lambda k: k.name)
def test_neutral_values_are_writable(knob):
    value = {"259:0": knob.neutral} if knob.per_device else ({knob.line: knob.neutral} if knob.line else knob.neutral)
    assert knob.codec.validate(value) == []


def test_every_knob_persists_through_systemd_or_says_why_not():
    for knob in knobs.KNOBS:
        assert bool(knob.systemd) != bool(knob.no_systemd), knob.name
        assert all(sd.DIRECTIVE_FILES[d.name] == knob.file for d in knob.systemd)
    assert [k.name for k in knobs.KNOBS if not k.systemd] == ["io.prio_class", "io.low", "memory.oom_group"]
    assert sd.DEVICE_DIRECTIVES == ("IODeviceWeight", "IOReadBandwidthMax", "IOWriteBandwidthMax", "IOReadIOPSMax",
                                    "IOWriteIOPSMax", "IODeviceLatencyTargetSec")
    assert sd.LATENCY_PROPERTY == "IODeviceLatencyTargetUSec" and sd.CPU_PERIOD_DEFAULT == 100000
    assert sd.unsupported_message("io.prio_class") == sd.unsupported_message("io.prio.class")


def test_gates_name_the_kernel_option():
    gated = dict((k.name, k.gate) for k in knobs.KNOBS if k.gate)
    assert sorted(gated) == ["cpu.cpus", "cpu.mems", "io.latency", "io.low", "io.max", "io.prio_class", "io.weight",
                             "io.weights"]
    assert "CONFIG_BLK_CGROUP_IOPRIO" in gated["io.prio_class"] and gated["io.weight"] == gated["io.weights"]
    # The build options are declared once, in _capabilities (which io_facts' detection reads too).
    for knob in knobs.KNOBS:
        if knob.gate and knob.file in CHILD_IO_FILES:
            assert all(option in knob.gate for option in CHILD_IO_FILES[knob.file]), knob.name
    # the cpuset files are no io file: their gate is the controller, and the kernel option that builds it
    assert gated["cpu.cpus"] == gated["cpu.mems"] == knobs.CPUSET_GATE and "CONFIG_CPUSETS" in knobs.CPUSET_GATE
    assert gated["io.max"] == "the kernel is built without CONFIG_BLK_DEV_THROTTLING"


@pytest.mark.parametrize("name, want, satisfied", [
    ("memory.low", 0, True),
    ("memory.low", 4096, False),
    ("memory.high", "max", True),
    ("cpu.max", {"quota": "max", "period": 100000}, True),
    ("cpu.max", {"quota": 50000, "period": 100000}, False),
    ("io.max", {"259:0": {"wbps": "max"}}, True),
    ("io.max", {"259:0": {"wbps": "max"}, "259:1": {"riops": 5}}, False),
    ("io.latency", {"259:0": {"target": "max"}}, True),
    ("io.weight", {"default": 100}, False),          # a weight's share goes to the parent without the file
    ("cpu.weight", 100, False),
    ("cpuset.cpus", [], True),                       # no cpuset: the parent's CPUs, as an empty cpuset.cpus
    ("cpuset.cpus", [0, 1], False),
])
def test_a_missing_file_satisfies_only_neutral_values(name, want, satisfied):
    assert knobs.find(name).neutral_satisfies(want) is satisfied


def test_find_by_module_name_or_kernel_file():
    assert knobs.find("io.prio_class") is knobs.find("io.prio.class")
    assert knobs.find("io.weight").line == "default" and knobs.find("io.weights").per_device
    assert knobs.find("memory.swap.max") is knobs.find("memory.swap_max")
    assert knobs.find("io.foo") is None


def test_input_forms_are_adapted_once_for_both_managers():
    io_max, latency = knobs.find("io.max"), knobs.find("io.latency")
    assert io_max.desired({"wbps": "10MB", "riops": 5}, "nvme0n1") == ({"wbps": 10000000, "riops": 5}, [])
    value, problems = io_max.desired({"rbps": "10M"}, "nvme0n1")
    assert problems[0].startswith("io.max rbps (nvme0n1): rate: '10M' is ambiguous")
    assert latency.desired(5000, "nvme0n1") == ({"target": 5000}, [])
    assert knobs.find("memory.high").desired("1G", "x") == ("1G", [])


def test_cpusets_through_systemd():
    """AllowedCPUs=/AllowedMemoryNodes= (systemd 244+) in list form, and what systemctl show prints back."""
    plan = sd.build_plan("inference.slice", {"cpu": {"cpus": [3, 2, 1, 0, 8], "mems": "1"}}, systemd_version=252)
    assert plan.directives == [("AllowedCPUs", "0-3,8"), ("AllowedMemoryNodes", "1")]
    assert plan.expected == {"cpuset.cpus": [0, 1, 2, 3, 8], "cpuset.mems": [1]}
    shown = sd.show_values("AllowedCPUs=0-3,8\nAllowedMemoryNodes=\n")
    assert shown == {"AllowedCPUs": [0, 1, 2, 3, 8], "AllowedMemoryNodes": []}
    assert plan.show_diff(shown) == [{"property": "AllowedMemoryNodes", "key": "AllowedMemoryNodes", "want": [1],
                                      "have": []}]
    with pytest.raises(sd.SystemdError, match="cpu.mems needs AllowedMemoryNodes=, which systemd has since version "
                                              "244; this host runs systemd 243"):
        sd.build_plan("inference.slice", {"cpu": {"mems": "0"}}, systemd_version=243)
    assert sd.reset_directives([("AllowedCPUs", "0-3")], []) == [("AllowedCPUs", "")]
