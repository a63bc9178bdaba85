# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_nvme: the controller scan, namespace -> controller, the hctx map and its fallbacks, nvme-cli argv.

The same functions serve io_facts, nvme_queues and nvme_arbitration; these tests pin what each of
them relies on. nvme-cli output parsing is tested against the lab recordings in
test_nvme_arbitration.py, the kernel-log fallback against the driver simulator in test_nvme_queues.py.
"""

import errno

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import nvme_arbitration_apply as boot
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import devices
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import kernelfs as _kernelfs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import nvme
from sim.host import FakeHost


def test_scan_reads_every_controller_in_natural_order(tmp_path):
    h = FakeHost(tmp_path)
    for n in (10, 2):
        h.add_nvme(ctrl=n, serial="sn-%d" % n, majmin="259:%d" % n)
    ctrls = nvme.scan_controllers(_kernelfs.KernelFS(h.root))
    assert list(ctrls) == ["nvme2", "nvme10"]
    c = ctrls["nvme10"]
    assert (c.serial, c.model, c.firmware, c.transport, c.state) == ("sn-10", "QEMU NVMe Ctrl", "7.2.22", "pcie", "live")
    assert c.queue_count == 3 and c.namespaces == ["nvme10n1"] and c.dev_path == "/dev/nvme10"
    assert c.subsysnqn == "nqn.2019-08.org.qemu:sn-10"


def test_unreadable_controller_attribute_is_none_and_a_warning(tmp_path, monkeypatch):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0)
    real_read = _kernelfs.KernelFS.read

    def read(self, path, default=None):
        if path == "/sys/class/nvme/nvme0/serial":
            raise _kernelfs.KernelFileError(path, None, errno.EACCES, action="read")
        return real_read(self, path, default)
    monkeypatch.setattr(_kernelfs.KernelFS, "read", read)
    warnings = []
    ctrl = nvme.scan_controllers(_kernelfs.KernelFS(h.root), warnings)["nvme0"]
    assert ctrl.serial is None and ctrl.model == "QEMU NVMe Ctrl"
    assert len(warnings) == 1 and "serial" in warnings[0] and "EACCES" in warnings[0]
    assert nvme.scan_controllers(_kernelfs.KernelFS(h.root))["nvme0"].serial is None, "no list: no warning"


def test_multipath_path_disks_belong_to_their_controller_and_head(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head(subsys=2, ns=1, ctrls=(2, 3))
    ctrls = nvme.scan_controllers(_kernelfs.KernelFS(h.root))
    assert ctrls["nvme2"].namespaces == ["nvme2c2n1"] and ctrls["nvme3"].namespaces == ["nvme2c3n1"]
    assert [devices.multipath_head(ns) for ns in ("nvme2c3n1", "nvme2n1", "vda")] == ["nvme2n1", None, None]
    assert [devices.path_controller(ns) for ns in ("nvme2c3n1", "nvme12c13n4", "nvme2n1")] == ["nvme3", "nvme13", None]


def test_hctxs_from_sysfs_and_debugfs(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, hw_queues=2, poll_queues=1)
    fs = _kernelfs.KernelFS(h.root)
    assert nvme.debugfs_mount(fs) == "/sys/kernel/debug"
    got = nvme.hctxs(fs, "nvme0n1", "/sys/kernel/debug")
    assert [(x["index"], x["type"]) for x in got] == [(0, "default"), (1, "default"), (2, "poll")]
    assert got[0]["cpu_list"] == [0] and got[0]["nr_tags"] == 1023 and got[0]["nr_reserved_tags"] == 0
    assert [x["type"] for x in nvme.hctxs(fs, "nvme0n1", None)] == [None] * 3, "debugfs not mounted: types unknown"


def test_unparsable_cpu_list_is_none_and_a_warning(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0)
    h.write(h.sysdir("nvme0n1") + "/mq/0/cpu_list", "zero")
    warnings = []
    got = nvme.hctxs(_kernelfs.KernelFS(h.root), "nvme0n1", "/sys/kernel/debug", warnings)
    assert got[0]["cpu_list"] is None and got[1]["cpu_list"] == [1]
    assert len(warnings) == 1 and "mq/0/cpu_list: could not parse 'zero'" in warnings[0]


def _ns(*types, **kw):
    return {"hctxs": [{"index": i, "type": t, "nr_tags": 1023} for i, t in enumerate(types)], "io_poll": kw.get("io_poll")}


def test_split_from_debugfs():
    split = nvme.queue_split("nvme0", {"nvme0n1": _ns("default", "read", "poll", io_poll=1)}, "/sys/kernel/debug")
    assert split == {"default": 1, "read": 1, "poll": 1, "hctxs": 3, "nr_tags": 1023, "source": "debugfs"}


@pytest.mark.parametrize("namespaces, debugfs, note", [
    ({}, "/sys/kernel/debug", "no blk-mq namespace"),
    ({"nvme0n1": _ns(None, None)}, None, "debugfs is not mounted"),
    ({"nvme0n1": _ns("default", None)}, "/sys/kernel/debug", "debugfs has no hctx types"),
])
def test_split_unknown_without_a_kernel_log_says_why(namespaces, debugfs, note):
    """io_facts runs no commands: without debugfs types the split is unknown, with the reason."""
    split = nvme.queue_split("nvme0", namespaces, debugfs)
    assert (split["default"], split["read"], split["poll"], split["source"], split["note"]) == (None, None, None, None,
                                                                                                note)


def test_split_from_the_kernel_log_only_when_debugfs_cannot_say():
    def klog():
        raise AssertionError("the kernel log is read only when debugfs cannot say")
    assert nvme.queue_split("nvme0", {"nvme0n1": _ns("default", "poll", io_poll=1)}, "/d", klog)["source"] == "debugfs"
    namespaces = {"nvme0n1": _ns(None, None, None, io_poll=1)}
    split = nvme.queue_split("nvme0", namespaces, None, lambda: {"nvme0": {"default": 2, "read": 0, "poll": 1}})
    assert (split["source"], split["poll"]) == ("kernel log", 1)
    assert [h["type"] for h in namespaces["nvme0n1"]["hctxs"]] == ["default", "default", "poll"]
    split = nvme.queue_split("nvme0", {"nvme0n1": _ns(None, None)}, None, lambda: {})
    assert split["note"] == "debugfs is not mounted and the kernel log has no queue line for nvme0"


def test_set_feature_argv_uses_long_options_only():
    assert boot.set_feature_argv("/usr/sbin/nvme", "/dev/nvme0", 0x01, 0x03020103, save=True) == [
        "/usr/sbin/nvme", "set-feature", "/dev/nvme0", "--feature-id=1", "--value=0x03020103", "--save"]
    assert "--save" not in boot.set_feature_argv("nvme", "/dev/nvme0", 0x01, 7)
