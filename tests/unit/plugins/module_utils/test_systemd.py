# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""systemd manager groundwork: directives, exact conversions, expected kernel values, show parsing, delegation."""

import os

import pytest

from sim.host import FakeHost
from sim.runner import FakeRunner
from sim.cgroup import SimCgroup
from sim.systemd import SimSystemd

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import systemd as sd
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.cgroups import CgroupNameError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import BlockDevice, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import ManagedFile, is_managed
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler

NVME_WWID_LINK = "/dev/disk/by-id/nvme-nvme.1b36-6465616462656566-51454d55204e564d65204374726c-00000001"
NVME_EUI_LINK = "/dev/disk/by-id/nvme-eui.0011223344556677"
VIRTIO_LINK = "/dev/disk/by-id/virtio-lab-data"
WWN_LINK = "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"


NOT_FOUND = (1, "", "Unit not found.")     # what the runner answers a command its table does not list


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    h = FakeHost(tmp_path_factory.mktemp("sd"))
    h.add_nvme(partitions=1)                                    # nvme0n1 259:0, QEMU wwid nvme.1b36-...
    h.add_nvme(ctrl=1, serial="SN2", eui64="0011223344556677")  # nvme1n1 259:2, nvme-eui. link
    h.add_virtio(serial="lab-data")                             # vda 254:0, virtio-lab-data
    h.add_virtio(serial="")                                     # vdb 254:16, no by-id link
    h.add_scsi(wwn="0x5000c500a1b2c3d4")                        # sda 8:0, wwn- link
    return h


@pytest.fixture(scope="module")
def disks(host):
    resolver = DeviceResolver(KernelFS(host.root))
    out = dict((n, resolver.resolve(n)) for n in ("nvme0n1", "nvme1n1", "vda", "vdb", "sda"))
    out["nvme0n1p1"] = resolver.resolve("nvme0n1p1", allow_partition=True)
    return out


def plan_for(settings, unit="inference.slice", disks=None, version=257, **kw):
    return sd.build_plan(unit, settings, devices=disks, systemd_version=version, **kw)


def errors_of(settings, unit="inference.slice", disks=None, version=257, **kw):
    with pytest.raises(sd.SystemdError) as exc:
        plan_for(settings, unit, disks, version, **kw)
    return exc.value.msg


# ---------------------------------------------------------------------------------------------
# Units, sections, files
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("unit, section", [
    ("inference.slice", "Slice"), ("ai-training.slice", "Slice"), ("vllm.service", "Service"),
    ("vllm@0.service", "Service"), ("docker-abc.scope", "Scope"),
])
def test_section_from_unit_suffix(unit, section):
    assert sd.unit_section(unit) == section
    body = plan_for({"cpu": {"weight": 200}}, unit=unit).body()
    assert body.splitlines()[0] == "[%s]" % section


@pytest.mark.parametrize("unit, words", [
    ("../../etc", "not a systemd slice"), ("workloads/inference", "not a systemd slice"),
    ("inference.target", "not a systemd slice"), ("-bad.slice", "dashes"), (None, "not a systemd slice"),
])
def test_bad_unit_names_are_refused(unit, words):
    with pytest.raises(sd.SystemdError, match=words):
        sd.build_plan(unit, {"cpu": {"weight": 100}})


def test_dropin_path_and_stamped_content():
    assert sd.dropin_path("inference.slice") == "/etc/systemd/system/inference.slice.d/50-aiinfra-io-isolation.conf"
    plan = plan_for({"memory": {"high": "256M"}})
    assert plan.path == sd.dropin_path("inference.slice")
    content = plan.content()
    assert is_managed(content) and content.startswith("# Managed by Ansible (aiinfra.io_isolation)")
    assert content.endswith("[Slice]\nMemoryAccounting=yes\nMemoryHigh=268435456\n")
    setting = sd.dropin_setting("inference.slice", plan)
    assert isinstance(setting, ManagedFile) and setting.path == plan.path and setting.desired == content
    assert sd.dropin_setting("inference.slice").desired is None          # absent: remove the drop-in
    assert sd.dropin_setting("inference.slice", plan_for({})).desired is None
    assert plan.as_dict()["directives"] == ["MemoryAccounting=yes", "MemoryHigh=268435456"]


def test_slice_unit_rendering():
    text = sd.render_slice_unit("inference.slice")
    assert is_managed(text) and text.endswith("[Unit]\nDescription=Workload slice inference.slice\n")
    assert sd.render_slice_unit("a.slice", "Batch 100% jobs").endswith("Description=Batch 100%% jobs\n")
    setting = sd.slice_unit_setting("inference.slice", owner="test")
    assert setting.path == "/etc/systemd/system/inference.slice" and "test" in setting.desired
    assert sd.slice_unit_setting("inference.slice", present=False).desired is None
    with pytest.raises(sd.SystemdError, match="only slices"):
        sd.render_slice_unit("vllm.service")
    with pytest.raises(sd.SystemdError, match="defined by systemd itself"):
        sd.render_slice_unit("system.slice")
    with pytest.raises(sd.SystemdError, match="one non-empty line"):
        sd.render_slice_unit("a.slice", "two\nlines")


def test_settings_shape_errors():
    msg = errors_of({"io": {"wieght": 3}, "memory": "1G", "cpu": {"weight": 100}, "net": {}})
    assert "settings: unknown key(s) net" in msg
    assert "io: unknown key(s) wieght" in msg and "memory: expected a mapping" in msg
    assert "io.weights: expected a mapping" in errors_of({"io": {"weights": [1]}})
    msg = errors_of({"io": 5, "cpu": [1]})
    assert "io: expected a mapping, got 5" in msg and "cpu: expected a mapping, got [1]" in msg
    unmanaged = plan_for({"io": {"weight": None}, "memory": {"min": None, "oom_group": None}, "cpu": {}})
    assert unmanaged.empty and unmanaged.body() == "[Slice]\n"       # None = not managed: no accounting line


# ---------------------------------------------------------------------------------------------
# Stable device paths
# ---------------------------------------------------------------------------------------------

def test_stable_path_prefers_wwn_then_nvme_wwid_then_virtio(disks):
    assert sd.stable_device_path(disks["nvme0n1"]) == NVME_WWID_LINK     # over nvme-QEMU_NVMe_Ctrl_deadbeef_1
    assert sd.stable_device_path(disks["nvme1n1"]) == NVME_EUI_LINK
    assert sd.stable_device_path(disks["vda"]) == VIRTIO_LINK
    assert sd.stable_device_path(disks["sda"]) == WWN_LINK               # over ata-/scsi- links


def test_stable_path_fallbacks_and_unsafe_links():
    def rec(links):
        return BlockDevice(name="sdz", majmin="8:16", kind="scsi", by_id=links, stable_id="x", partition=False)
    assert sd.stable_device_path(rec(["dm-name-vg-lv", "lvm-pv-uuid-abc"])) == "/dev/disk/by-id/lvm-pv-uuid-abc"
    assert sd.stable_device_path(rec(["md-uuid-1:2", "ata-X_Y"])) == "/dev/disk/by-id/ata-X_Y"
    assert sd.stable_device_path(rec(["wwn-0x5%x", "virtio-ok"])) == "/dev/disk/by-id/virtio-ok"
    with pytest.raises(sd.SystemdError, match=r"no usable /dev/disk/by-id link \(links: dm-name-vg, a\\x20b\)"):
        sd.stable_device_path(rec(["dm-name-vg", "a\\x20b"]))


def test_stable_path_refuses_kernel_name_only_partition_and_hidden(disks):
    with pytest.raises(sd.SystemdError, match="no usable /dev/disk/by-id link .links: none.*must not name /dev/vdb"):
        sd.stable_device_path(disks["vdb"])
    with pytest.raises(sd.SystemdError, match="partition of nvme0n1.*use nvme0n1"):
        sd.stable_device_path(disks["nvme0n1p1"])
    hidden = BlockDevice(name="nvme0c0n1", kind="nvme-path", hidden=True, partition=False)
    with pytest.raises(sd.SystemdError, match="hidden"):
        sd.stable_device_path(hidden)
    shared = BlockDevice(name="vdc", majmin="254:32", kind="virtio", by_id=["virtio-dup"], partition=False,
                         stable_id_note="serial dup is shared with vdd")
    with pytest.raises(sd.SystemdError, match="no persistent identity.*shared with vdd"):
        sd.stable_device_path(shared)


def test_plan_names_disks_by_stable_path_never_kernel_name(disks):
    plan = plan_for({"io": {"weights": {"nvme0n1": 400}, "max": {"vda": {"wbps": 1000000}}}}, disks=disks)
    body = plan.body()
    assert "IODeviceWeight=%s 400" % NVME_WWID_LINK in body
    assert "IOWriteBandwidthMax=%s 1000000" % VIRTIO_LINK in body
    assert "/dev/nvme0n1" not in body and "/dev/vda" not in body
    assert plan.devices == {"259:0": NVME_WWID_LINK, "254:0": VIRTIO_LINK}


def test_device_errors_are_collected(disks):
    msg = errors_of({"io": {"weights": {"vdb": 200, "nvme0n1p1": 300, "nope": 100},
                            "max": {"nvme0n1": {"rbps": 5000000}, disks["nvme0n1"]: {"wbps": 5000000}}}},
                    disks=disks)
    assert "io.weights: vdb (254:16) has no usable /dev/disk/by-id link" in msg
    assert "io.weights: nvme0n1p1 is a partition of nvme0n1" in msg
    assert "io.weights: device 'nope' was not resolved" in msg
    assert "io.max: 'nvme0n1' and 'nvme0n1' are the same disk nvme0n1" in msg


# ---------------------------------------------------------------------------------------------
# Directives and exact conversions
# ---------------------------------------------------------------------------------------------

def test_every_setting_renders_its_directive(disks):
    plan = plan_for({
        "io": {"weight": 300, "weights": {"nvme0n1": 400, "vda": "default"},
               "max": {"nvme0n1": {"rbps": "10MB", "wbps": "10MiB", "riops": 2000, "wiops": "max"}},
               "latency": {"vda": 10000, "nvme0n1": {"target": "max"}}},
        "memory": {"min": "64M", "low": "128M", "high": "256M", "max": "1G", "swap_max": 0, "zswap_max": "max"},
        "cpu": {"weight": 200, "max": {"quota": 50000, "period": 100000}},
    }, disks=disks)
    assert plan.body().splitlines() == [
        "[Slice]",
        "IOAccounting=yes",
        "IOWeight=300",
        "IODeviceWeight=%s 400" % NVME_WWID_LINK,
        "IOReadBandwidthMax=%s 10000000" % NVME_WWID_LINK,
        "IOWriteBandwidthMax=%s 10485760" % NVME_WWID_LINK,
        "IOReadIOPSMax=%s 2000" % NVME_WWID_LINK,
        "IOWriteIOPSMax=%s infinity" % NVME_WWID_LINK,
        "IODeviceLatencyTargetSec=%s infinity" % NVME_WWID_LINK,
        "IODeviceLatencyTargetSec=%s 10000us" % VIRTIO_LINK,
        "MemoryAccounting=yes",
        "MemoryMin=67108864",
        "MemoryLow=134217728",
        "MemoryHigh=268435456",
        "MemoryMax=1073741824",
        "MemorySwapMax=0",
        "MemoryZSwapMax=infinity",
        "CPUWeight=200",
        "CPUQuota=50%",
    ]
    assert plan.expected == {
        "io.weight": {"default": 300, "259:0": 400, "254:0": "default"},
        "io.max": {"259:0": {"rbps": 10000000, "wbps": 10485760, "riops": 2000, "wiops": "max"}},
        "io.latency": {"259:0": {"target": "max"}, "254:0": {"target": 10000}},
        "memory.min": 67108864, "memory.low": 134217728, "memory.high": 268435456, "memory.max": 1073741824,
        "memory.swap.max": 0, "memory.zswap.max": "max",
        "cpu.weight": 200, "cpu.max": {"quota": 50000, "period": 100000},
    }
    assert set(plan.properties()) == {
        "IOAccounting", "IOWeight", "IODeviceWeight", "IOReadBandwidthMax", "IOWriteBandwidthMax", "IOReadIOPSMax",
        "IOWriteIOPSMax", "IODeviceLatencyTargetUSec", "MemoryAccounting", "MemoryMin", "MemoryLow", "MemoryHigh",
        "MemoryMax", "MemorySwapMax", "MemoryZSwapMax", "CPUWeight", "CPUQuotaPerSecUSec"}


def test_io_sizes_base_1000_vs_memory_base_1024(disks):
    # The lab saw IOReadBandwidthMax='... 10M' become rbps=10000000 and MemoryHigh=256M 268435456:
    # the plan never hands systemd a suffix, so the bytes are exactly what was meant.
    plan = plan_for({"io": {"max": {"vda": {"rbps": "10MB", "wbps": 10485760}}}, "memory": {"high": "256M"}},
                    disks=disks)
    assert ("IOReadBandwidthMax", VIRTIO_LINK + " 10000000") in plan.directives
    assert ("IOWriteBandwidthMax", VIRTIO_LINK + " 10485760") in plan.directives
    assert ("MemoryHigh", "268435456") in plan.directives
    msg = errors_of({"io": {"max": {"vda": {"rbps": "10M"}}}}, disks=disks)
    assert "ambiguous: write 10MB for 10000000 (base 1000) or 10MiB for 10485760 (base 1024)" in msg
    assert "memory sizes are binary here" in errors_of({"memory": {"max": "10MB"}})


def test_memory_page_rounding_and_max():
    plan = plan_for({"memory": {"min": 1000000, "high": "max", "max": "infinity", "low": 2 ** 64 - 1}})
    assert ("MemoryMin", "1000000") in plan.directives             # systemd writes the bytes as given ...
    assert plan.expected["memory.min"] == 999424                   # ... and the kernel keeps whole pages
    assert plan.show["MemoryMin"] == 1000000
    assert ("MemoryHigh", "infinity") in plan.directives and plan.expected["memory.high"] == "max"
    assert ("MemoryMax", "infinity") in plan.directives and plan.expected["memory.max"] == "max"
    assert ("MemoryLow", "infinity") in plan.directives and plan.show["MemoryLow"] == "max"
    assert plan_for({"memory": {"min": 1000000}}, page_size=65536).expected["memory.min"] == 983040


@pytest.mark.parametrize("settings, words", [
    ({"io": {"weight": 0}}, "out of range; io.weight takes 1..10000"),
    ({"io": {"weight": 10001}}, "out of range; io.weight takes 1..10000"),
    ({"cpu": {"weight": 0}}, "out of range 1..10000"),
    ({"memory": {"high": "10%"}}, "is a percentage"),
    ({"memory": {"max": -1}}, "negative"),
    ({"memory": {"max": 0}}, "0 is out of range for MemoryMax="),
    ({"memory": {"high": "0"}}, "0 is out of range for MemoryHigh="),
    ({"cpu": {"max": {"quota": 500}}}, "quota"),
])
def test_bad_values_are_refused(settings, words):
    assert words in errors_of(settings)


def test_io_value_errors_name_the_device(disks):
    msg = errors_of({"io": {"weights": {"nvme0n1": 0}, "max": {"vda": {"rbps": 0}, "sda": "10M"},
                            "latency": {"nvme1n1": "10ms"}}}, disks=disks)
    assert "io.weight: 259:0 0: out of range" in msg and "(device nvme0n1)" in msg
    assert "0 is out of range (the kernel answers ERANGE); use max to clear the limit (device vda)" in msg
    assert "io.max: expected a mapping of rbps/wbps/riops/wiops for device sda" in msg
    assert "target=10000 (device nvme1n1)" in msg


def test_zero_protection_and_swap_are_allowed():
    plan = plan_for({"memory": {"min": 0, "low": "0", "swap_max": "0", "zswap_max": 0}})
    assert ("MemoryMin", "0") in plan.directives and ("MemoryZSwapMax", "0") in plan.directives
    assert plan.expected["memory.zswap.max"] == 0


@pytest.mark.parametrize("version, words", [(252, "this host runs systemd 252"),
                                            (None, "could not be read")])
def test_zswap_needs_systemd_253(version, words):
    msg = errors_of({"memory": {"zswap_max": "1G"}}, version=version)
    assert "MemoryZSwapMax=, which systemd has since version 253" in msg and words in msg
    assert ("MemoryZSwapMax", "1073741824") in plan_for({"memory": {"zswap_max": "1G"}}, version=253).directives


def test_iops_beyond_u32_is_max_in_the_kernel(disks):
    plan = plan_for({"io": {"max": {"vda": {"riops": 2 ** 32}}}}, disks=disks)
    assert plan.expected["io.max"]["254:0"] == {"riops": "max"}
    assert ("IOReadIOPSMax", VIRTIO_LINK + " infinity") in plan.directives


@pytest.mark.parametrize("cpu_max, directives, kernel", [
    ({"quota": 50000}, [("CPUQuota", "50%")], {"quota": 50000}),
    ("150000 100000", [("CPUQuota", "150%")], {"quota": 150000, "period": 100000}),
    ({"quota": 33330, "period": 100000}, [("CPUQuota", "33.33%")], {"quota": 33330, "period": 100000}),
    ({"quota": 25000, "period": 50000}, [("CPUQuota", "50%"), ("CPUQuotaPeriodSec", "50000us")],
     {"quota": 25000, "period": 50000}),
    ({"quota": 1001, "period": 1000}, [("CPUQuota", "100.1%"), ("CPUQuotaPeriodSec", "1000us")],
     {"quota": 1001, "period": 1000}),
    ({"quota": "max"}, [("CPUQuota", "")], {"quota": "max", "period": 100000}),
])
def test_cpu_quota_becomes_an_exact_percentage(cpu_max, directives, kernel):
    plan = plan_for({"cpu": {"max": cpu_max}})
    assert plan.directives == directives
    assert plan.expected["cpu.max"] == kernel


def test_cpu_quota_show_values():
    plan = plan_for({"cpu": {"max": {"quota": 25000, "period": 50000}}})
    assert plan.show == {"CPUQuotaPerSecUSec": 500000, "CPUQuotaPeriodUSec": 50000}
    assert plan_for({"cpu": {"max": "max"}}).show == {"CPUQuotaPerSecUSec": "max"}


def test_cpu_quota_that_systemd_cannot_express():
    msg = errors_of({"cpu": {"max": {"quota": 33333, "period": 100000}}})
    assert "33.333% of a CPU" in msg and "systemd would write 33340" in msg
    assert "Use quota 33330 (CPUQuota=33.33%) or 33340 (CPUQuota=33.34%)" in msg
    assert "always writes the default period" in errors_of({"cpu": {"max": {"quota": "max", "period": 50000}}})
    assert "more than systemd can parse" in errors_of({"cpu": {"max": {"quota": 2 ** 44 - 1, "period": 1000}}})
    assert sd.format_permyriad(1) == "0.01%" and sd.format_permyriad(3330) == "33.3%"


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def test_prio_class_and_low_are_refused_with_alternatives(disks):
    msg = errors_of({"io": {"prio_class": "idle", "low": {"vda": {"rbps": 100}}}}, disks=disks)
    assert "io.prio_class for inference.slice cannot be applied with manager: systemd" in msg
    assert "no resource-control directive for the kernel file io.prio.class" in msg
    assert "manager: cgroupfs on a group below a unit with Delegate=yes" in msg and "IOSchedulingClass=" in msg
    assert "io.low for inference.slice" in msg and "since 6.10" in msg
    assert "prio_class: 3" not in errors_of({"io": {"prio_class": 3}})   # any value is refused, not parsed
    assert "io.prio.class" in sd.unsupported_message("io.prio.class")
    assert "io.low" in sd.unsupported_message("io.low")
    assert sd.unsupported_message("io.foo", "a.slice") == (
        "io.foo for a.slice has no systemd resource-control directive; use manager: cgroupfs below a Delegate=yes unit")


def test_oom_group_is_refused_for_every_unit_type():
    # systemd writes memory.oom.group only from a service's OOMPolicy=kill at start; set-property cannot change it.
    for unit in ("inference.slice", "vllm.service", "run-u1.scope"):
        msg = errors_of({"memory": {"oom_group": True}}, unit=unit)
        assert "memory.oom_group for %s" % unit in msg and "OOMPolicy=kill" in msg


# ---------------------------------------------------------------------------------------------
# Verifying the kernel files
# ---------------------------------------------------------------------------------------------

def cgroup_host(tmp_path, files):
    h = FakeHost(tmp_path)
    h.add_nvme()
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.add_cgroup("inference.slice", files=files)
    return h, KernelFS(h.root), DeviceResolver(KernelFS(h.root)).resolve("nvme0n1")


def test_kernel_diff_matches_what_systemd_wrote(tmp_path):
    h, fs, nvme = cgroup_host(tmp_path, {
        "io.weight": "default 300\n259:0 400", "io.max": "259:0 rbps=10000000 wbps=max riops=max wiops=max",
        "memory.high": "268435456", "memory.low": "999424", "cpu.max": "50000 100000", "cpu.weight": "200"})
    plan = plan_for({"io": {"weight": 300, "weights": {nvme: 400}, "max": {nvme: {"rbps": "10MB"}}},
                     "memory": {"high": "256M", "low": 1000000}, "cpu": {"weight": 200, "max": "50000"}})
    assert plan.kernel_diff(fs, h.cgroup_mount + "/inference.slice") == []


def test_kernel_diff_reports_mismatches_and_absent_files(tmp_path):
    h, fs, nvme = cgroup_host(tmp_path, {"io.weight": "default 100", "memory.high": "max", "memory.max": "junk",
                                         "memory.swap.max": None, "cpu.weight": None})
    plan = plan_for({"io": {"weight": 300, "weights": {nvme: 400}},
                     "memory": {"high": "256M", "max": "1G", "swap_max": "max"}, "cpu": {"weight": 50}})
    diffs = plan.kernel_diff(fs, h.cgroup_mount + "/inference.slice/")
    by_key = dict((d["key"], d) for d in diffs)
    assert by_key["default"]["want"] == 300 and by_key["default"]["have"] == 100
    assert by_key["259:0"]["have"] == "default"                         # per-device line missing
    assert by_key["memory.high"]["have"] == "max"
    assert "neither bytes nor max" in by_key["memory.max"]["error"]
    assert by_key["cpu.weight"]["have"] is None                          # controller off: no weight
    assert "memory.swap.max" not in by_key                               # absent file = no limit = max


def test_absent_files_satisfy_only_neutral_values(tmp_path):
    h, fs, nvme = cgroup_host(tmp_path, {"cpu.max": None, "io.max": None, "io.latency": None, "memory.min": None})
    cg = h.cgroup_mount + "/inference.slice"
    neutral = plan_for({"io": {"max": {nvme: {"rbps": "max"}}, "latency": {nvme: "max"}},
                        "memory": {"min": 0}, "cpu": {"max": "max"}})
    assert neutral.kernel_diff(fs, cg) == []
    limited = plan_for({"io": {"max": {nvme: {"rbps": 5000000}}, "latency": {nvme: 1000}}, "cpu": {"max": "50000"}})
    assert sorted(d["file"] for d in limited.kernel_diff(fs, cg)) == ["cpu.max", "io.latency", "io.max"]


# ---------------------------------------------------------------------------------------------
# systemctl show
# ---------------------------------------------------------------------------------------------

SHOW = """IOAccounting=yes
IOWeight=300
StartupIOWeight=[not set]
CPUWeight=[not set]
IODeviceWeight=/dev/disk/by-id/nvme-x 400
IODeviceWeight=/dev/disk/by-id/virtio-y 50
IOReadBandwidthMax=/dev/disk/by-id/nvme-x 10000000
IOWriteBandwidthMax=/dev/disk/by-id/nvme-x 18446744073709551615
IODeviceLatencyTargetUSec=/dev/disk/by-id/nvme-x 25ms
IODeviceLatencyTargetUSec=/dev/disk/by-id/virtio-y infinity
MemoryMin=0
MemoryHigh=268435456
MemoryMax=infinity
MemoryZSwapMax=18446744073709551615
CPUQuotaPerSecUSec=1min 4s
CPUQuotaPeriodUSec=infinity
Delegate=no
OOMPolicy=stop
ControlGroup=/inference.slice
garbage line
"""


def test_show_values_edge_cases():
    values = sd.show_values(SHOW)
    assert values["IOAccounting"] is True and values["Delegate"] is False
    assert values["IOWeight"] == 300 and values["StartupIOWeight"] is None and values["CPUWeight"] is None
    assert values["IODeviceWeight"] == {"/dev/disk/by-id/nvme-x": 400, "/dev/disk/by-id/virtio-y": 50}
    assert values["IOReadBandwidthMax"] == {"/dev/disk/by-id/nvme-x": 10000000}
    assert values["IOWriteBandwidthMax"] == {"/dev/disk/by-id/nvme-x": "max"}
    assert values["IODeviceLatencyTargetUSec"] == {"/dev/disk/by-id/nvme-x": 25000, "/dev/disk/by-id/virtio-y": "max"}
    assert values["MemoryMin"] == 0 and values["MemoryHigh"] == 268435456
    assert values["MemoryMax"] == "max" and values["MemoryZSwapMax"] == "max"
    assert values["CPUQuotaPerSecUSec"] == 64000000 and values["CPUQuotaPeriodUSec"] == "max"
    assert values["OOMPolicy"] == "stop" and values["ControlGroup"] == "/inference.slice"
    assert sd.parse_show("A=b=c\nA=d\n\n") == {"A": ["b=c", "d"]}
    with pytest.raises(sd.SystemdError, match="is not 'PATH VALUE'"):
        sd.show_values("IODeviceWeight=400")


@pytest.mark.parametrize("text, usec", [
    ("0", 0), ("500ms", 500000), ("1.500000s", 1500000), ("333.300ms", 333300), ("25ms 300us", 25300),
    ("2", 2000000), ("1h 1min", 3660000000), (u"10\u00b5s", 10), ("infinity", "max"), ("1w 1d", 691200000000),
])
def test_parse_timespan(text, usec):
    assert sd.parse_timespan(text) == usec


@pytest.mark.parametrize("text", ["", "5 parsecs", "1.5us", "abc"])
def test_parse_timespan_rejects(text):
    with pytest.raises(sd.SystemdError):
        sd.parse_timespan(text)


def test_show_diff_against_the_plan(disks):
    plan = plan_for({"io": {"weight": 300, "weights": {"nvme0n1": 400}, "max": {"nvme0n1": {"rbps": "max"}},
                            "latency": {"vda": 25000}},
                     "memory": {"high": 1000000}, "cpu": {"max": {"quota": 25000, "period": 50000}}}, disks=disks)
    shown = {"IOAccounting": True, "IOWeight": 300, "IODeviceWeight": {NVME_WWID_LINK: 400},
             "IODeviceLatencyTargetUSec": {VIRTIO_LINK: 25000}, "MemoryAccounting": True, "MemoryHigh": 1000000,
             "CPUQuotaPerSecUSec": 500000, "CPUQuotaPeriodUSec": 50000}
    assert plan.show_diff(shown) == []             # the infinity limit may be absent from show: reads as max
    shown.update(IOWeight=None, IODeviceWeight=None, CPUQuotaPeriodUSec="max")
    assert [(d["key"], d["have"]) for d in plan.show_diff(shown)] == [
        ("IOWeight", None), ("IODeviceWeight %s" % NVME_WWID_LINK, None), ("CPUQuotaPeriodUSec", "max")]


# ---------------------------------------------------------------------------------------------
# systemctl argv and version
# ---------------------------------------------------------------------------------------------

def test_argv_builders():
    assert sd.daemon_reload_argv() == ["systemctl", "daemon-reload"]
    assert sd.start_argv("inference.slice") == ["systemctl", "start", "--", "inference.slice"]
    assert sd.show_argv("inference.slice", ["IOWeight", "MemoryHigh"]) == [
        "systemctl", "show", "-p", "IOWeight", "-p", "MemoryHigh", "--", "inference.slice"]
    assert sd.set_property_argv("vllm.service", [("IOWeight", "300"), ("CPUQuota", "")]) == [
        "systemctl", "set-property", "--runtime", "--", "vllm.service", "IOWeight=300", "CPUQuota="]
    assert "--runtime" not in sd.set_property_argv("vllm.service", [], runtime=False)
    with pytest.raises(sd.SystemdError):
        sd.show_argv("x;rm -rf", ["IOWeight"])


def test_systemd_version():
    runner = FakeRunner({("systemctl", "--version"): (0, "systemd 252 (252.39-1~deb12u1)\n+PAM +AUDIT\n", "")}, default=NOT_FOUND)
    assert sd.systemd_version(runner) == 252
    assert sd.systemd_version(FakeRunner(default=NOT_FOUND)) is None


# ---------------------------------------------------------------------------------------------
# Delegation for the cgroupfs manager
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, unit, unit_path", [
    ("system.slice/containerd.service/kubepods/pod1", "containerd.service", "/sys/fs/cgroup/system.slice/containerd.service"),
    ("/sys/fs/cgroup/system.slice/docker-abc.scope", "docker-abc.scope", "/sys/fs/cgroup/system.slice/docker-abc.scope"),
    ("user.slice/user-1000.slice/user@1000.service/app.slice/podman.service/ctr", "user@1000.service",
     "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service"),
    ("workloads/inference", None, None),
    ("inference.slice", None, None),
    ("vllm.service", "vllm.service", "/sys/fs/cgroup/system.slice/vllm.service"),
])
def test_owner_unit(path, unit, unit_path):
    assert sd.owner_unit(path) == (unit, unit_path)


def test_owner_unit_rejects_escapes():
    with pytest.raises(CgroupNameError):
        sd.owner_unit("../../etc")


def delegating_host(tmp_path):
    h = FakeHost(tmp_path)
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.add_cgroup("system.slice/ctr.service", files={"cgroup.controllers": "cpu io memory pids"})
    h.add_cgroup("system.slice/plain.service")
    h.mkdir("/run/systemd/system")
    return h, KernelFS(h.root)


def show_delegate(unit):
    return ("systemctl", "show", "-p", "Delegate", "--value", "--", unit)


def test_delegation_detection(tmp_path):
    h, fs = delegating_host(tmp_path)
    runner = FakeRunner({show_delegate("ctr.service"): (0, "yes\n", ""), show_delegate("plain.service"): (0, "no\n", ""),
                         show_delegate("gone.service"): (0, "yes\n", "")}, default=NOT_FOUND)
    assert sd.systemd_host(fs)
    info = sd.delegation(runner, fs, "system.slice/ctr.service/workload")
    assert info == {"path": "/sys/fs/cgroup/system.slice/ctr.service/workload", "unit": "ctr.service",
                    "unit_path": "/sys/fs/cgroup/system.slice/ctr.service", "delegate": True, "below_unit": True,
                    "unit_active": True, "controllers": ["cpu", "io", "memory", "pids"]}
    assert sd.cgroupfs_refusal(info) is None
    assert runner.calls == [list(show_delegate("ctr.service"))]

    plain = sd.cgroupfs_refusal(sd.delegation(runner, fs, "system.slice/plain.service/x"))
    assert "belongs to plain.service, which does not have Delegate=yes" in plain
    itself = sd.cgroupfs_refusal(sd.delegation(runner, fs, "system.slice/ctr.service"))
    assert "is the cgroup of ctr.service itself" in itself
    gone = sd.cgroupfs_refusal(sd.delegation(runner, fs, "system.slice/gone.service/x"))
    assert "gone.service is not running" in gone
    calls = len(runner.calls)
    nowhere = sd.cgroupfs_refusal(sd.delegation(runner, fs, "workloads/inference"))
    assert "not below a systemd service or scope" in nowhere and "daemon-reload strips the controllers" in nowhere
    assert len(runner.calls) == calls                    # nothing to ask systemd about


def test_delegate_query_failures(tmp_path):
    h, fs = delegating_host(tmp_path)
    with pytest.raises(sd.SystemdError, match="cannot ask systemd whether ctr.service delegates.*rc=1.*Unit not found"):
        sd.delegation(FakeRunner(default=NOT_FOUND), fs, "system.slice/ctr.service/x")
    odd = FakeRunner({show_delegate("ctr.service"): (0, "maybe\n", "")}, default=NOT_FOUND)
    with pytest.raises(sd.SystemdError, match="unexpected Delegate value 'maybe'"):
        sd.unit_delegates(odd, "ctr.service")
    empty = FakeRunner({show_delegate("ctr.service"): (0, "", "")}, default=NOT_FOUND)
    assert sd.unit_delegates(empty, "ctr.service") is False


# ---------------------------------------------------------------------------------------------
# Drop-ins on a running unit: parse_dropin, reset_directives, unit_info, UnitState
# ---------------------------------------------------------------------------------------------

def test_parse_dropin():
    text = ("# Managed by Ansible (aiinfra.io_isolation): x. Local edits will be overwritten.\n[Slice]\n\n"
            "IOWeight=300\n; a comment\n  MemoryHigh = 268435456  \nIODeviceWeight=/dev/disk/by-id/x 400\n"
            "CPUQuota=\nnot an assignment\n[Unit]\nDescription=a=b\n")
    assert sd.parse_dropin(text) == [("IOWeight", "300"), ("MemoryHigh", "268435456"),
                                     ("IODeviceWeight", "/dev/disk/by-id/x 400"), ("CPUQuota", ""),
                                     ("Description", "a=b")]
    assert sd.parse_dropin(None) == [] and sd.parse_dropin("") == []


def test_reset_directives():
    previous = [("IOAccounting", "yes"), ("IOWeight", "50"), ("IODeviceWeight", "/dev/disk/by-id/a 200"),
                ("IODeviceWeight", "/dev/disk/by-id/b 300"), ("IOReadBandwidthMax", "/dev/disk/by-id/a 1000000"),
                ("IODeviceLatencyTargetSec", "/dev/disk/by-id/a 5000us"), ("MemoryAccounting", "yes"),
                ("MemoryHigh", "1073741824"), ("MemoryMin", "0"), ("CPUQuota", "50%"), ("CPUQuota", "50%")]
    target = [("IOAccounting", "yes"), ("IOWeight", "70"), ("IODeviceWeight", "/dev/disk/by-id/b 300"),
              ("MemoryAccounting", "yes"), ("MemoryMin", "4096")]
    assert sd.reset_directives(previous, target) == [
        ("MemoryHigh", ""), ("CPUQuota", ""),
        ("IODeviceLatencyTargetSec", "/dev/disk/by-id/a infinity"),
        ("IOReadBandwidthMax", "/dev/disk/by-id/a infinity"),
    ]
    # device weights are not reset here (no directive removes a line): see stale_weight_lines
    assert sd.reset_directives([("IODeviceWeight", "/dev/disk/by-id/a 200")], []) == []
    assert sd.reset_directives(target, target) == [] and sd.reset_directives([], target) == []


def test_stale_weight_lines():
    kernel = {"default": 80, "259:0": 50, "259:1": 80, "254:0": 700}
    assert sd.stale_weight_lines(kernel, configured={"254:0"}, weight=80) == ["259:0"]
    assert sd.stale_weight_lines(kernel, configured=set(), weight=700) == ["259:0", "259:1"]
    assert sd.stale_weight_lines({"default": 100}, set(), 100) == []


def sim_lab(tmp_path, version):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, serial="lab-nvme-a", majmin="259:0")
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.write("/sys/fs/cgroup/io.cost.qos", "259:0 enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 "
                                          "min=1.00 max=10000.00")
    kernel = SimCgroup(h)
    return h, kernel, SimSystemd(h, kernel, version=version)


def test_unit_info(tmp_path):
    _h, _kernel, systemd = sim_lab(tmp_path, 257)
    systemd.add_unit("vllm.service", active=True, fragment="/usr/lib/systemd/system/vllm.service")
    assert sd.unit_info(systemd, "inference.slice") == {"LoadState": "loaded", "ActiveState": "inactive",
                                                        "ControlGroup": "", "FragmentPath": ""}
    assert sd.unit_info(systemd, "vllm.service")["ControlGroup"] == "/system.slice/vllm.service"
    assert sd.unit_info(systemd, "nope.service")["LoadState"] == "not-found"
    assert systemd.calls[0] == ["systemctl", "show", "-p", "LoadState", "-p", "ActiveState", "-p", "ControlGroup",
                                "-p", "FragmentPath", "--", "inference.slice"]
    systemd.fail("show", rc=1, err="Failed to connect to bus")
    with pytest.raises(CommandError, match="Failed to connect to bus"):
        sd.unit_info(systemd, "inference.slice")


def unit_state(plan, systemd, files=None, previous=None, start=True, cgroup="/sys/fs/cgroup/inference.slice"):
    files = files if files is not None else {plan.path: plan.content()}
    return sd.UnitState("inference.slice", files, plan, systemd, cgroup, previous_dropin=previous, start=start)


@pytest.mark.parametrize("version", [252, 257])
def test_unit_state_applies_to_a_running_slice_and_verifies(tmp_path, version):
    h, kernel, systemd = sim_lab(tmp_path, version)
    systemd.run(["systemctl", "start", "--", "inference.slice"])
    systemd.calls[:] = []
    plan = plan_for({"io": {"weight": 300}, "memory": {"high": 1000000}})
    state = unit_state(plan, systemd)
    assert state.key == "inference.slice" and state.order == 50
    assert state.watch == ["io.weight", "memory.high"]
    result = Reconciler(kernel).run([state])
    assert result["changed"] and kernel.read(plan.path) == plan.content().rstrip("\n")
    # a running unit is read from its kernel files: no systemctl show
    assert systemd.calls == [
        ["systemctl", "daemon-reload"], ["systemctl", "start", "--", "inference.slice"],
        ["systemctl", "set-property", "--runtime", "--", "inference.slice", "IOAccounting=yes", "IOWeight=300",
         "MemoryAccounting=yes", "MemoryHigh=1000000"],
        ["systemctl", "daemon-reload"]]
    assert result["values"]["inference.slice"]["kernel"] == {"io.weight": {"default": 300}, "memory.high": 999424}
    assert "drift" not in result["values"]["inference.slice"]
    assert not kernel.exists("/run/systemd/system.control/inference.slice.d")
    assert h.read("/sys/fs/cgroup/inference.slice/memory.high") == "999424\n"


def test_unit_state_reads_systemctl_show_without_a_cgroup(tmp_path):
    _h, kernel, systemd = sim_lab(tmp_path, 257)
    plan = plan_for({"cpu": {"weight": 200}})
    state = unit_state(plan, systemd)
    current = state.read(kernel)
    assert current["kernel"] is None and current["files"] == {plan.path: None}
    assert current["drift"] == [{"property": "CPUWeight", "key": "CPUWeight", "want": 200, "have": None}]
    assert systemd.calls == [["systemctl", "show", "-p", "CPUWeight", "--", "inference.slice"]]
    assert state.differs(current) and state.report(current)["drift"] == current["drift"]


def test_unit_state_validate_refuses_foreign_files_unless_adopted(tmp_path):
    _h, kernel, systemd = sim_lab(tmp_path, 257)
    plan = plan_for({"cpu": {"weight": 200}})
    kernel.atomic_write(plan.path, "[Slice]\nCPUWeight=5\n")
    state = unit_state(plan, systemd, start=False)
    problems = state.validate(state.read(kernel))
    assert problems == ["%s exists and is not managed by aiinfra.io_isolation; move it away or set adopt to let the "
                        "collection take it over" % plan.path]
    adopting = sd.UnitState("inference.slice", {plan.path: plan.content()}, plan, systemd, None, adopt=True)
    assert adopting.validate(adopting.read(kernel)) == []


def test_unit_state_restore_puts_back_the_old_dropin_and_resets_new_properties(tmp_path):
    h, kernel, systemd = sim_lab(tmp_path, 257)
    old = plan_for({"io": {"weight": 100}})
    Reconciler(kernel).run([unit_state(old, systemd)])
    systemd.calls[:] = []
    new = plan_for({"io": {"weight": 300}, "cpu": {"weight": 50}})
    state = unit_state(new, systemd, previous=old.content())
    assert state.watch == ["cpu.weight", "io.weight"]
    previous = state.read(kernel)
    state.write(kernel, state.desired, previous)
    assert h.read("/sys/fs/cgroup/inference.slice/cpu.weight") == "50\n"
    state.restore(kernel, previous)
    assert kernel.read(old.path) == old.content().rstrip("\n")
    assert systemd.calls[-2] == ["systemctl", "set-property", "--runtime", "--", "inference.slice",
                                 "IOAccounting=yes", "IOWeight=100", "CPUWeight="]
    assert ["systemctl", "start", "--", "inference.slice"] not in systemd.calls[4:], "restore does not start units"
    assert h.read("/sys/fs/cgroup/inference.slice/cpu.weight") == "100\n"
    assert h.read("/sys/fs/cgroup/inference.slice/io.weight") == "default 100\n"


def test_unit_state_removes_only_its_runtime_files(tmp_path):
    h, kernel, systemd = sim_lab(tmp_path, 252)
    systemd.run(["systemctl", "start", "--", "inference.slice"])
    systemd.run(["systemctl", "set-property", "--runtime", "--", "inference.slice", "CPUWeight=7"])
    h.write("/run/systemd/system.control/inference.slice.d/50-Description.conf", "[Unit]\nDescription=x\n")
    Reconciler(kernel).run([unit_state(plan_for({"cpu": {"weight": 200}}), systemd)])
    assert os.listdir(h.path("/run/systemd/system.control/inference.slice.d")) == ["50-Description.conf"]


def test_unit_state_absent_removes_the_dropin_and_its_directory(tmp_path):
    h, kernel, systemd = sim_lab(tmp_path, 257)
    plan = plan_for({"memory": {"min": "64M"}})
    Reconciler(kernel).run([unit_state(plan, systemd)])
    state = sd.UnitState("inference.slice", {plan.path: None}, None, systemd, "/sys/fs/cgroup/inference.slice",
                         previous_dropin=plan.content())
    assert state.watch == ["memory.min"] and state.desired["kernel"] == {}
    result = Reconciler(kernel).run([state])
    assert result["changed"] and not kernel.exists("/etc/systemd/system/inference.slice.d")
    assert [c for c in systemd.calls if c[1] == "set-property"][-1][5:] == ["MemoryMin="]
    assert h.read("/sys/fs/cgroup/inference.slice/memory.min") == "0\n"
    assert result["values"]["inference.slice"] == {"files": {plan.path: None}, "kernel": {"memory.min": 0}}


# -- the unit listings and several units' show (the placement module) ------------------------------------------------
LIST_UNITS = ("systemctl", "list-units", "--all") + tuple(sd.LIST_OPTIONS)
LIST_FILES = ("systemctl", "list-unit-files") + tuple(sd.LIST_OPTIONS)


def test_list_services_reads_json_from_both_listings():
    # systemd 252's JSON (observed on the lab's Debian 12): one object per row, keyed by the column names
    units = ('[{"unit":"vllm.service","load":"loaded","active":"active","sub":"running","description":"vLLM"},'
             '{"unit":"nope.service","load":"not-found","active":"inactive","sub":"dead","description":"nope.service"}]')
    files = ('[{"unit_file":"vllm.service","state":"enabled","preset":"enabled"},'
             '{"unit_file":"batch.service","state":"disabled","preset":"enabled"},'
             '{"unit_file":"trainer@.service","state":"static","preset":null},'
             '{"unit_file":"sshd.service","state":"alias","preset":null}]')
    runner = FakeRunner({LIST_UNITS: (0, units + "\n", ""), LIST_FILES: (0, files + "\n", "")})
    assert sd.list_services(runner) == {
        "vllm.service": {"load": "loaded", "active": "active", "file": "enabled"},
        "nope.service": {"load": "not-found", "active": "inactive", "file": ""},
        "batch.service": {"load": "", "active": "", "file": "disabled"}}
    assert [c[1] for c in runner.calls] == ["list-units", "list-unit-files"]


def test_list_services_reads_the_plain_table_where_systemd_prints_no_json():
    units = ("vllm.service loaded active running vLLM inference server\n"
             "\u25cf nope.service not-found inactive dead nope.service\n")
    files = "vllm.service enabled enabled\nbatch.service disabled enabled\n"
    runner = FakeRunner({LIST_UNITS: (0, units, ""), LIST_FILES: (0, files, "")})
    got = sd.list_services(runner)
    assert got["vllm.service"] == {"load": "loaded", "active": "active", "file": "enabled"}
    assert got["nope.service"]["load"] == "not-found" and got["batch.service"]["file"] == "disabled"


def test_list_services_failures_are_errors():
    runner = FakeRunner({LIST_UNITS: CommandError(list(LIST_UNITS), 1, "", "Failed to connect to bus")})
    with pytest.raises(CommandError, match="Failed to connect to bus"):
        sd.list_services(runner)
    runner = FakeRunner({LIST_UNITS: (0, "[{", ""), LIST_FILES: (0, "[]", "")})
    with pytest.raises(CommandError, match="printed JSON that does not parse"):
        sd.list_services(runner)


def test_show_units_splits_the_blocks_by_unit():
    argv = ("systemctl", "show", "-p", "Id", "-p", "Slice", "--", "a.service", "b.service")
    runner = FakeRunner({argv: (0, "Id=a.service\nSlice=system.slice\n\nId=b.service\nSlice=\n", "")})
    assert sd.show_units(runner, ["a.service", "b.service"], ("Id", "Slice")) == {
        "a.service": {"Id": "a.service", "Slice": "system.slice"}, "b.service": {"Id": "b.service", "Slice": ""}}
    assert sd.show_units(runner, [], ("Id",)) == {}
    short = FakeRunner({argv: (0, "Id=a.service\nSlice=system.slice\n", "")})
    with pytest.raises(CommandError, match="printed 1 blocks for 2 units"):
        sd.show_units(short, ["a.service", "b.service"], ("Id", "Slice"))
    assert sd.restart_argv("vllm.service") == ["systemctl", "restart", "--", "vllm.service"]
