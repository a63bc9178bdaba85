# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The FakeHost test helper builds the layout the kernel builds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from sim.host import FakeHost, nvme_wwid


def _all_links(root):
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                yield p


def test_links_are_relative_and_stay_inside_root(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(partitions=1)
    h.add_virtio(serial="S")
    h.add_scsi(wwn="0x5000c500a1b2c3d4")
    h.add_dm(slaves=["vda"])
    h.add_md(members=["sda"], name="h:0")
    h.add_nvme_multipath_head(subsys=3, ctrls=(3, 4))
    root = os.path.realpath(h.root)
    links = list(_all_links(h.root))
    assert len(links) > 50
    for p in links:
        target = os.readlink(p)
        assert not os.path.isabs(target), p
        assert os.path.realpath(p).startswith(root + os.sep), p


def test_sysfs_aliases_point_at_one_directory(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(partitions=1)
    real = os.path.realpath(h.path("/sys/block/nvme0n1"))
    assert real.endswith("/sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1")
    assert os.path.realpath(h.path("/sys/class/block/nvme0n1")) == real
    assert os.path.realpath(h.path("/sys/dev/block/259:0")) == real
    assert os.readlink(h.path("/sys/block/nvme0n1/device")) == "../../nvme0"   # kernfs spelling
    assert os.readlink(h.path("/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_deadbeef_1")) == "../../nvme0n1"
    # Partitions: a sub-directory of the disk, in class/block and dev/block but not in /sys/block.
    assert os.path.realpath(h.path("/sys/dev/block/259:1")) == os.path.join(real, "nvme0n1p1")
    assert not os.path.lexists(h.path("/sys/block/nvme0n1p1"))
    assert h.read("/sys/class/block/nvme0n1p1/partition") == "1\n"
    assert os.path.isfile(h.path("/dev/nvme0n1p1"))


def test_nvme_attributes_and_queues(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(eui64="0011223344556677")
    c = "/sys/class/nvme/nvme0/"
    assert h.read(c + "serial") == "deadbeef" + " " * 12 + "\n"
    assert h.read(c + "model") == "QEMU NVMe Ctrl".ljust(40) + "\n"
    assert h.read(c + "transport") == "pcie\n"
    ns = "/sys/block/nvme0n1/"
    assert h.read(ns + "eui") == "00 11 22 33 44 55 66 77\n"
    assert h.read(ns + "wwid") == "eui.0011223344556677\n"
    assert h.read(ns + "size") == "2097152\n"
    q = {k: h.read(ns + "queue/" + k) for k in ("scheduler", "nr_requests", "wbt_lat_usec", "read_ahead_kb",
                                                "nomerges", "rq_affinity", "rotational", "io_poll", "io_poll_delay")}
    assert q == {"scheduler": "[none] mq-deadline kyber bfq \n", "nr_requests": "1023\n", "wbt_lat_usec": "2000\n",
                 "read_ahead_kb": "128\n", "nomerges": "0\n", "rq_affinity": "1\n", "rotational": "0\n",
                 "io_poll": "0\n", "io_poll_delay": "-1\n"}
    assert [h.read(ns + "mq/%d/cpu_list" % i) for i in (0, 1)] == ["0\n", "1\n"]
    assert h.read(ns + "mq/0/nr_tags") == "1023\n"
    assert h.read("/sys/kernel/debug/block/nvme0n1/hctx1/type") == "default\n"
    assert h.read("/sys/module/nvme/parameters/poll_queues") == "0\n"
    h.set_nvme_params(poll_queues=1, multipath="N")
    assert h.read("/sys/module/nvme/parameters/poll_queues") == "1\n"
    assert h.read("/sys/module/nvme_core/parameters/multipath") == "N\n"
    h.set_queue("nvme0n1", scheduler="[mq-deadline] none")
    assert h.read(ns + "queue/scheduler") == "[mq-deadline] none\n"


def test_poll_queues_and_rotational_defaults(tmp_path):
    h = FakeHost(tmp_path, ncpus=4)
    h.add_nvme(hw_queues=2, poll_queues=1)
    h.add_virtio()
    assert h.read("/sys/block/nvme0n1/mq/0/cpu_list") == "0, 2\n"
    assert h.read("/sys/kernel/debug/block/nvme0n1/hctx2/type") == "poll\n"
    assert h.read("/sys/block/nvme0n1/queue/io_poll") == "1\n"
    assert h.read("/sys/block/vda/queue/rotational") == "1\n"
    assert h.read("/sys/block/vda/queue/wbt_lat_usec") == "75000\n"
    assert h.read("/sys/block/vda/queue/scheduler") == "[mq-deadline] kyber bfq none\n"


def test_multipath_head_layout(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head(subsys=0, ns=1, ctrls=(0, 1))
    head = "/sys/block/nvme0n1/"
    assert not os.path.exists(h.path(head + "mq"))
    assert os.path.realpath(h.path(head + "device")).endswith("/sys/devices/virtual/nvme-subsystem/nvme-subsys0")
    assert sorted(os.listdir(h.path(head + "multipath"))) == ["nvme0c0n1", "nvme0c1n1"]
    for path in ("nvme0c0n1", "nvme0c1n1"):
        d = "/sys/block/%s/" % path
        assert h.read(d + "hidden") == "1\n"
        assert not os.path.exists(h.path(d + "dev"))
        assert os.path.isdir(h.path(d + "mq"))
        assert not os.path.exists(h.path("/dev/" + path))
    assert sorted(os.listdir(h.path("/sys/dev/block"))) == ["259:0"]
    assert os.path.islink(h.path("/sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme1"))


def test_unattached_loop_and_collisions(tmp_path):
    h = FakeHost(tmp_path)
    h.add_loop()
    assert h.read("/sys/block/loop0/size") == "0\n"
    assert not os.path.exists(h.path("/sys/block/loop0/loop"))
    with pytest.raises(ValueError):
        h.add_virtio(majmin="7:0")
    with pytest.raises(ValueError):
        h.add_loop(index=0, majmin="7:9")
    h.add_nvme(ctrl=0)
    with pytest.raises(ValueError):
        h.add_nvme(ctrl=0, ns=2, serial="different")


def test_cgroup_root_unified(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme()
    h.add_virtio()
    mount = h.add_cgroup_root()
    assert mount == "/sys/fs/cgroup"
    assert "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0" \
        in h.read("/proc/mounts")
    assert h.read(mount + "/cgroup.controllers") == "cpuset cpu io memory hugetlb pids rdma misc\n"
    assert h.read(mount + "/cgroup.subtree_control") == "memory pids\n"
    assert h.read(mount + "/io.cost.qos") == "" and h.read(mount + "/io.cost.model") == ""
    assert h.read(mount + "/io.stat").splitlines() == [
        "259:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0", "254:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0"]
    assert h.read("/proc/pressure/io").startswith("some avg10=0.00")
    # Children get the files of the controllers enabled in the parent.
    cg = h.add_cgroup("system.slice/a.service")  # parent system.slice is created with defaults
    assert h.read(mount + "/system.slice/memory.high") == "max\n"
    assert h.read(mount + "/system.slice/cgroup.controllers") == "memory pids\n"
    assert not os.path.exists(h.path(cg + "/io.weight"))
    assert not os.path.exists(h.path(cg + "/memory.high"))  # system.slice enables nothing below it
    h.write(mount + "/cgroup.subtree_control", "cpu io memory pids")
    cg = h.add_cgroup("/iotest", files={"io.max": "259:0 rbps=1 wbps=max riops=max wiops=max", "pids.max": None})
    assert h.read(cg + "/io.weight") == "default 100\n"
    assert h.read(cg + "/io.max").startswith("259:0 rbps=1")
    assert h.read(cg + "/cpu.weight") == "100\n"
    assert not os.path.exists(h.path(cg + "/pids.max"))
    assert not os.path.exists(h.path(cg + "/io.latency"))


def test_cgroup_root_hybrid_and_legacy(tmp_path):
    h = FakeHost(tmp_path / "a")
    assert h.add_cgroup_root(mode="hybrid") == "/sys/fs/cgroup/unified"
    mounts = h.read("/proc/mounts")
    assert "tmpfs /sys/fs/cgroup tmpfs" in mounts and "cgroup2 /sys/fs/cgroup/unified cgroup2" in mounts
    assert "/sys/fs/cgroup/blkio cgroup" in mounts
    assert h.read("/sys/fs/cgroup/unified/cgroup.controllers") == ""
    h2 = FakeHost(tmp_path / "b", psi=False)
    with pytest.raises(ValueError):
        h2.add_cgroup("x")
    assert h2.add_cgroup_root(mode="legacy") is None
    assert "cgroup2" not in h2.read("/proc/mounts")
    assert not os.path.exists(h2.path("/proc/pressure/io"))
    with pytest.raises(ValueError):
        FakeHost(tmp_path / "c").add_cgroup_root(mode="v3")


def test_cgroup_optional_io_files(tmp_path):
    h = FakeHost(tmp_path)
    h.add_cgroup_root(subtree="io", io_latency=True, io_prio=True)
    cg = h.add_cgroup("lat")
    assert h.read(cg + "/io.latency") == ""
    assert h.read(cg + "/io.prio.class") == "no-change\n"


@pytest.mark.parametrize("kwargs, expected", [
    ({}, "nvme.1b36-6465616462656566-51454d55204e564d65204374726c-00000001"),
    ({"eui64": "0011223344556677"}, "eui.0011223344556677"),
    ({"nguid": "00112233-4455-6677-8899-AABBCCDDEEFF", "eui64": "0011223344556677"}, "eui.00112233445566778899aabbccddeeff"),
    ({"uuid": "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0"}, "uuid.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
])
def test_nvme_wwid(kwargs, expected):
    assert nvme_wwid(0x1b36, "deadbeef", "QEMU NVMe Ctrl", 1, **kwargs) == expected
