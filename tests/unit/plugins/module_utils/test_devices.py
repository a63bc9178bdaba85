# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for the block-device resolver (_devices) on FakeHost trees."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest
from hypothesis import given, strategies as st

from sim.host import FakeHost

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import devices as _devices
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import (
    BlockDevice, DeviceError, DeviceResolver, list_disks, normalize_wwn, resolve, resolve_many)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS, KernelFileError

EUI = "0011223344556677"
SCSI_WWN = "0x5000c500a1b2c3d4"
QEMU_WWID = "nvme.1b36-6465616462656566-51454d55204e564d65204374726c-00000001"
GIB = 1024 ** 3


@pytest.fixture
def host(tmp_path):
    """The lab VM plus a SATA disk: nvme0n1 259:0 (2 partitions), vda 254:0, sda 8:0."""
    h = FakeHost(tmp_path)
    h.add_nvme(partitions=2)
    h.add_virtio(serial="VIRTSER01", partitions=1, pci="0000:00:05.0")
    h.add_scsi(wwn=SCSI_WWN, partitions=1)
    return h


@pytest.fixture
def fs(host):
    return KernelFS(host.root)


def _err(fs, selector, **kwargs):
    with pytest.raises(DeviceError) as exc:
        resolve(fs, selector, **kwargs)
    return exc.value


# -- input forms -----------------------------------------------------------------------------

@pytest.mark.parametrize("selector", [
    "nvme0n1", " nvme0n1 ", "/dev/nvme0n1", "259:0",
    "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_deadbeef_1", "nvme-QEMU_NVMe_Ctrl_deadbeef_1",
    "/dev/disk/by-id/nvme-" + QEMU_WWID, "/dev/disk/by-path/pci-0000:00:03.0-nvme-1", "pci-0000:00:03.0-nvme-1",
    QEMU_WWID, QEMU_WWID.upper(), "deadbeef", "DEADBEEF",
])
def test_nvme_input_forms(fs, selector):
    assert resolve(fs, selector).name == "nvme0n1"


@pytest.mark.parametrize("selector", [
    "eui." + EUI, "EUI." + EUI.upper(), "0x" + EUI, EUI, "00:11:22:33:44:55:66:77", "00 11 22 33 44 55 66 77",
    "nvme-eui." + EUI, "/dev/disk/by-id/nvme-eui." + EUI,
])
def test_nvme_wwn_forms(tmp_path, selector):
    h = FakeHost(tmp_path)
    h.add_nvme(eui64=EUI, serial="S3EVNX0K123456", model="Samsung SSD 970 EVO Plus 1TB")
    rec = resolve(KernelFS(h.root), selector)
    assert rec.name == "nvme0n1"
    assert rec.wwn == "eui." + EUI
    assert rec.eui == "00 11 22 33 44 55 66 77"
    assert rec.stable_id == "wwn:eui." + EUI


@pytest.mark.parametrize("selector", ["uuid.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
                                      "eui.00112233445566778899aabbccddeeff", "00112233-4455-6677-8899-aabbccddeeff"])
def test_nvme_uuid_and_nguid_forms(tmp_path, selector):
    h = FakeHost(tmp_path)
    h.add_nvme(nguid="00112233445566778899aabbccddeeff", uuid="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    rec = resolve(KernelFS(h.root), selector)
    assert rec.name == "nvme0n1"
    assert rec.wwid == "uuid.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    assert rec.nguid == "00112233-4455-6677-8899-aabbccddeeff"


@pytest.mark.parametrize("selector", [
    "vda", "/dev/vda", "254:0", "/dev/disk/by-id/virtio-VIRTSER01", "virtio-VIRTSER01", "VIRTSER01",
    "/dev/disk/by-path/pci-0000:00:05.0", "virtio-pci-0000:00:05.0",
])
def test_virtio_input_forms(fs, selector):
    assert resolve(fs, selector).name == "vda"


@pytest.mark.parametrize("selector", [
    "sda", "/dev/sda", "8:0", "wwn-" + SCSI_WWN, "/dev/disk/by-id/wwn-" + SCSI_WWN, SCSI_WWN, SCSI_WWN.upper(),
    "naa.5000C500A1B2C3D4", "5000c500a1b2c3d4", "/dev/disk/by-id/ata-QEMU_HARDDISK_QM00001", "scsi-35000c500a1b2c3d4",
    "QM00001", "pci-0000:00:1f.2-ata-1",
])
def test_scsi_input_forms(fs, selector):
    assert resolve(fs, selector).name == "sda"


# -- records --------------------------------------------------------------------------------

def test_nvme_record(fs):
    rec = resolve(fs, "nvme0n1")
    d = rec.as_dict()
    assert d["majmin"] == "259:0" and (d["major"], d["minor"]) == (259, 0)
    assert d["partition"] is False and d["parent"] is None and d["hidden"] is False
    assert d["has_mq"] is True and d["rotational"] is False
    assert d["kind"] == "nvme" and d["controller"] == "nvme0" and d["nsid"] == 1
    # sysfs pads model/serial/firmware to the Identify field widths; the record is stripped.
    assert (d["model"], d["serial"], d["firmware"]) == ("QEMU NVMe Ctrl", "deadbeef", "7.2.22")
    assert d["size_bytes"] == GIB
    assert d["wwn"] == d["wwid"] == QEMU_WWID
    assert d["by_id"] == sorted(d["by_id"]) and "nvme-QEMU_NVMe_Ctrl_deadbeef_1" in d["by_id"]
    assert d["by_path"] == ["pci-0000:00:03.0-nvme-1"]
    assert d["stable_id"] == "wwn:" + QEMU_WWID and d["stable_id_source"] == "wwn"
    assert d["dev_path"] == "/dev/nvme0n1"


def test_virtio_record(fs):
    rec = resolve(fs, "vda")
    assert (rec.kind, rec.majmin, rec.serial, rec.rotational, rec.has_mq) == ("virtio", "254:0", "VIRTSER01", True, True)
    assert rec.size_bytes == 3 * GIB and rec.wwn is None
    assert rec.stable_id == "virtio-serial:VIRTSER01" and rec.stable_id_source == "serial"
    assert rec.by_path == ["pci-0000:00:05.0", "virtio-pci-0000:00:05.0"]


def test_virtio_without_serial_uses_by_path(tmp_path):
    h = FakeHost(tmp_path)
    h.add_virtio(pci="0000:00:07.0")
    rec = resolve(KernelFS(h.root), "vda")
    assert rec.serial is None
    assert rec.stable_id == "by-path:pci-0000:00:07.0" and rec.stable_id_source == "by-path"


def test_scsi_record(fs):
    rec = resolve(fs, "sda")
    assert (rec.kind, rec.vendor, rec.model, rec.firmware) == ("scsi", "ATA", "QEMU HARDDISK", "2.5+")
    assert rec.serial == "QM00001"  # from the binary VPD page 0x80
    assert rec.wwn == rec.wwid == "naa.5000c500a1b2c3d4"
    assert rec.stable_id == "wwn:naa.5000c500a1b2c3d4"
    assert "wwn-" + SCSI_WWN in rec.by_id and "pci-0000:00:1f.2-ata-1.0" in rec.by_path


def test_scsi_without_wwn_uses_t10_wwid(tmp_path):
    h = FakeHost(tmp_path)
    h.add_scsi(transport="scsi", vendor="QEMU", model="QEMU HARDDISK", serial="drive-scsi0")
    rec = resolve(KernelFS(h.root), "sda")
    assert rec.wwn.startswith("t10.QEMU")
    assert rec.stable_id.startswith("wwn:t10.qemu_qemu_harddisk_drive-scsi0")
    assert " " not in rec.stable_id


def test_scsi_wwn_from_link_when_no_wwid_attribute(tmp_path):
    h = FakeHost(tmp_path)
    h.add_scsi(wwn=SCSI_WWN, serial="")
    h.remove(h.sysdir("sda") + "/device/wwid")
    rec = resolve(KernelFS(h.root), "sda")
    assert rec.wwid is None and rec.serial is None
    assert rec.wwn == SCSI_WWN
    assert rec.stable_id == "wwn:" + SCSI_WWN


def test_unreadable_attributes_become_none(fs, monkeypatch):
    real_read, real_read_bytes = fs.read, fs.read_bytes

    def read(path, default=None):
        if path.endswith("/device/serial"):
            raise KernelFileError(path, None, errno.EIO, action="read")
        return real_read(path, default)

    def read_bytes(path, default=None):
        if path.endswith("vpd_pg80"):
            raise KernelFileError(path, None, errno.EACCES, action="read")
        return real_read_bytes(path, default)

    monkeypatch.setattr(fs, "read", read)
    monkeypatch.setattr(fs, "read_bytes", read_bytes)
    assert resolve(fs, "nvme0n1").serial is None
    assert resolve(fs, "sda").serial is None


def test_short_vpd_page_is_ignored(host, fs):
    host.write_bytes(host.sysdir("sda") + "/device/vpd_pg80", b"\x00\x80")
    assert resolve(fs, "sda").serial is None


def test_dev_node_missing_falls_back_to_sysfs(host, fs):
    host.remove("/dev/vda")
    assert resolve(fs, "/dev/vda").name == "vda"


def test_by_id_link_through_mapper_and_absolute_target(tmp_path):
    h = FakeHost(tmp_path)
    h.add_virtio(serial="S1")
    dm = h.add_dm(name="vg0-data", slaves=["vda"])
    os.symlink("../../mapper/vg0-data", h.path("/dev/disk/by-id/custom-data"))
    os.symlink("/dev/vda", h.path("/dev/disk/by-id/custom-abs"))
    fs = KernelFS(h.root)
    assert resolve(fs, "custom-data").name == dm
    assert resolve(fs, "/dev/mapper/vg0-data").name == dm
    assert resolve(fs, "custom-abs").name == "vda"
    assert "custom-abs" in resolve(fs, "vda").by_id


# -- partitions -----------------------------------------------------------------------------

@pytest.mark.parametrize("selector", [
    "nvme0n1p1", "/dev/nvme0n1p1", "259:1", "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_deadbeef_1-part1",
    "pci-0000:00:03.0-nvme-1-part1",
])
def test_partition_is_refused_naming_parent(fs, selector):
    e = _err(fs, selector)
    assert e.reason == "partition"
    assert "nvme0n1p1 (259:1)" in e.message
    assert "is a partition of nvme0n1 (259:0)" in e.message
    assert e.message.endswith("use nvme0n1")
    assert e.candidates[0]["name"] == "nvme0n1"


def test_partition_majmin_error_names_parent(fs):
    e = _err(fs, "254:1")
    assert "'254:1' resolves to vda1 (254:1), which is a partition of vda (254:0)" in e.message


def test_allow_partition(fs):
    rec = resolve(fs, "259:2", allow_partition=True)
    assert (rec.name, rec.partition, rec.parent, rec.partition_number) == ("nvme0n1p2", True, "nvme0n1", 2)
    assert rec.majmin == "259:2" and rec.dev_path == "/dev/nvme0n1p2"
    assert rec.serial == "deadbeef" and rec.kind == "nvme"
    assert rec.stable_id == "wwn:%s:part2" % QEMU_WWID
    assert rec.by_id and all(link.endswith("-part2") for link in rec.by_id)
    assert rec.size_bytes < GIB
    sda1 = resolve(fs, "sda1", allow_partition=True)
    assert sda1.parent == "sda" and sda1.majmin == "8:1"


def test_partition_of_disk_without_stable_id(tmp_path):
    h = FakeHost(tmp_path)
    h.add_md(members=(), partitions=1)
    h.remove(h.sysdir("md0") + "/md/uuid")
    for link in os.listdir(h.path("/dev/disk/by-id")):
        os.unlink(h.path("/dev/disk/by-id/" + link))
    rec = resolve(KernelFS(h.root), "md0p1", allow_partition=True)
    assert rec.parent == "md0" and rec.stable_id is None
    assert "parent disk md0 has no stable identity" in rec.stable_id_note


# -- dm / md / zram: require_mq -------------------------------------------------------------

def test_dm_resolves_but_require_mq_refuses(tmp_path):
    h = FakeHost(tmp_path)
    h.add_virtio(serial="A")
    h.add_virtio(serial="B")
    h.add_dm(name="vg0-lv0", slaves=["vda", "vdb"])
    fs = KernelFS(h.root)
    rec = resolve(fs, "/dev/mapper/vg0-lv0")
    assert (rec.kind, rec.dm_name, rec.has_mq, rec.slaves) == ("dm", "vg0-lv0", False, ["vda", "vdb"])
    assert rec.stable_id.startswith("dm-uuid:LVM-") and rec.stable_id_source == "dm-uuid"
    e = _err(fs, "dm-0", require_mq=True)
    assert e.reason == "not_mq"
    assert "device-mapper device 'vg0-lv0' without blk-mq" in e.message
    assert "/sys/block/dm-0/mq does not exist" in e.message
    assert "blk-iocost needs a blk-mq disk" in e.message
    assert "manage the disks underneath it instead: vda, vdb" in e.message
    assert {c["name"] for c in e.candidates} == {"vda", "vdb"}


def test_request_based_dm_passes_require_mq(tmp_path):
    h = FakeHost(tmp_path)
    h.add_scsi(wwn=SCSI_WWN, serial="LUN0001")
    h.add_scsi(wwn=SCSI_WWN, serial="LUN0001")  # second path to the same LUN
    h.add_dm(name="mpatha", uuid="mpath-35000c500a1b2c3d4", slaves=["sda", "sdb"], request_based=True)
    fs = KernelFS(h.root)
    assert resolve(fs, "mpatha", require_mq=True).name == "dm-0"
    # Both paths share the WWN and the serial is per path: they fall back to by-path.
    sda, sdb = resolve(fs, "sda"), resolve(fs, "sdb")
    assert sda.stable_id_source == sdb.stable_id_source == "by-path"
    assert sda.stable_id == "by-path:pci-0000:00:1f.2-ata-1"
    assert "wwn naa.5000c500a1b2c3d4 is shared with sdb" in sda.stable_id_note
    assert "serial scsi-serial:LUN0001 is shared with sdb" not in sda.stable_id_note
    assert "serial LUN0001 is shared with sdb" in sda.stable_id_note
    assert sda.holders == ["dm-0"]
    e = _err(fs, SCSI_WWN)
    assert e.reason == "ambiguous" and {c["name"] for c in e.candidates} == {"sda", "sdb"}
    assert "They are all held by dm-0 (e.g. paths of one LUN under dm-multipath): select dm-0 instead." in e.message


def test_md_require_mq_and_partition(tmp_path):
    h = FakeHost(tmp_path)
    h.add_virtio(serial="A")
    h.add_virtio(serial="B")
    h.add_md(level="raid1", members=["vda", "vdb"], name="host:data", partitions=1)
    fs = KernelFS(h.root)
    assert resolve(fs, "data").name == "md0"
    rec = resolve(fs, "/dev/md/data")
    assert (rec.kind, rec.md_level, rec.slaves, rec.has_mq) == ("md", "raid1", ["vda", "vdb"], False)
    assert rec.stable_id == "md-uuid:3b5f1c2a-9d7e-4f60-8a1b-2c3d4e5f6a7b"
    e = _err(fs, "md0", require_mq=True)
    assert e.reason == "not_mq" and "an md software-RAID device without blk-mq" in e.message
    assert "vda, vdb" in e.message
    e = _err(fs, "md0p1")
    assert "is a partition of md0 (9:0)" in e.message


def test_md_uuid_from_link_when_attribute_missing(tmp_path):
    h = FakeHost(tmp_path)
    h.add_md(members=())
    h.remove(h.sysdir("md0") + "/md/uuid")
    rec = resolve(KernelFS(h.root), "md0")
    assert rec.md_uuid == "3b5f1c2a:9d7e4f60:8a1b2c3d:4e5f6a7b"


def test_other_bio_device(tmp_path):
    h = FakeHost(tmp_path)
    h.add_zram()
    fs = KernelFS(h.root)
    rec = resolve(fs, "zram0")
    assert rec.kind == "other" and rec.stable_id is None
    assert "no WWN, serial" in rec.stable_id_note
    e = _err(fs, "zram0", require_mq=True)
    assert "zram0 (252:0) is a bio-based device without blk-mq (/sys/block/zram0/mq does not exist)" in e.message


# -- NVMe native multipath ------------------------------------------------------------------

@pytest.mark.parametrize("links", [True, False])
def test_nvme_multipath_head(tmp_path, links):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0)
    head = h.add_nvme_multipath_head(subsys=1, ns=1, ctrls=(1, 2), multipath_links=links)
    fs = KernelFS(h.root)
    rec = resolve(fs, head)
    assert head == "nvme1n1"
    assert (rec.kind, rec.has_mq, rec.nvme_subsystem, rec.controller) == ("nvme-multipath-head", False, "nvme-subsys1", None)
    assert rec.nvme_paths == ["nvme1c1n1", "nvme1c2n1"]
    assert rec.serial == "SN-MPATH-0001" and rec.wwn == "eui.00112233445566778899aabbccddeeff"
    assert rec.stable_id == "wwn:eui.00112233445566778899aabbccddeeff"
    e = _err(fs, "/dev/nvme1n1", require_mq=True)
    assert e.reason == "not_mq"
    for phrase in ("is an NVMe native-multipath head", "nvme-subsys1", "nvme1c1n1, nvme1c2n1",
                   "blk-iocost needs a blk-mq disk", "not supported on multipath heads", "nvme_core.multipath=N"):
        assert phrase in e.message
    assert [c["name"] for c in e.candidates] == ["nvme0n1"]
    names = [d.name for d in list_disks(fs, include_empty=True)]
    assert names == ["nvme0n1", "nvme1n1"]


def test_nvme_path_device_is_refused(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head()
    fs = KernelFS(h.root)
    e = _err(fs, "nvme0c1n1")
    assert e.reason == "hidden"
    assert "hidden per-path device of the NVMe native-multipath head nvme0n1 (via controller nvme1)" in e.message
    assert e.message.endswith("use nvme0n1")
    # The WWN is shared by head and paths; only the visible head matches.
    assert resolve(fs, "eui.00112233445566778899aabbccddeeff").name == "nvme0n1"
    hidden = DeviceResolver(fs).disk("nvme0c0n1")
    assert hidden.hidden and hidden.majmin is None and hidden.has_mq and hidden.kind == "nvme-path"
    assert hidden.stable_id is None and "hidden" in hidden.stable_id_note


def test_generic_hidden_device(host, fs):
    host.remove(host.sysdir("vda") + "/dev")
    e = _err(fs, "vda")
    assert e.reason == "hidden" and "without a device number" in e.message


# -- ambiguity and unknown input -------------------------------------------------------------

def test_serial_shared_by_two_namespaces_is_ambiguous(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, ns=1)
    h.add_nvme(ctrl=0, ns=2)
    fs = KernelFS(h.root)
    e = _err(fs, "deadbeef")
    assert e.reason == "ambiguous"
    assert [c["name"] for c in e.candidates] == ["nvme0n1", "nvme0n2"]
    for text in ("nvme0n1 (259:0, nvme, serial deadbeef, wwn nvme.1b36-", "nvme0n2 (259:1,",
                 "share the controller's serial"):
        assert text in e.message
    # Each namespace still has a unique, stable identity.
    ids = {resolve(fs, n).stable_id for n in ("nvme0n1", "nvme0n2")}
    assert len(ids) == 2


@pytest.mark.parametrize("selector, what", [
    ("nosuchdisk", "No block device matches 'nosuchdisk'"),
    ("/dev/nvme9n1", "/dev/nvme9n1 does not exist"),
    ("/dev/disk/by-id/nvme-nothing", "/dev/disk/by-id/nvme-nothing does not exist"),
    ("9:9", "No block device has the device number 9:9"),
    ("/dev/nvme0", "/dev/nvme0 (-> /dev/nvme0) is not a block device known to sysfs"),
    ("eui.ffffffffffffffff", "No block device matches"),
])
def test_unknown_selector_lists_what_exists(fs, selector, what):
    e = _err(fs, selector)
    assert e.reason == "not_found"
    assert what in e.message
    for text in ("nvme0n1 (259:0, nvme, serial deadbeef", "vda (254:0, virtio, serial VIRTSER01, wwn -)",
                 "sda (8:0, scsi, serial QM00001, wwn naa.5000c500a1b2c3d4)", "/dev/disk/by-id"):
        assert text in e.message
    assert {c["name"] for c in e.candidates} == {"nvme0n1", "vda", "sda"}
    assert "nvme0n1p1" not in e.message


def test_dangling_by_id_link(host, fs):
    os.symlink("../../sdz", host.path("/dev/disk/by-id/wwn-0xdead"))
    e = _err(fs, "wwn-0xdead")
    assert "dangling" in e.message
    assert "wwn-0xdead" not in resolve(fs, "sda").by_id


@pytest.mark.parametrize("selector", [None, "", "   "])
def test_empty_selector(fs, selector):
    assert _err(fs, selector).reason == "empty"


def test_vanished_sys_block_link_still_resolves(host, fs):
    host.remove("/sys/block/vda")
    rec = resolve(fs, "vda")
    assert rec.name == "vda" and rec.stable_id == "virtio-serial:VIRTSER01"
    assert "vda" not in [d.name for d in list_disks(fs)]


# -- stable ids -----------------------------------------------------------------------------

def _zoo(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, ns=1, partitions=1)
    h.add_nvme(ctrl=0, ns=2)
    h.add_nvme(ctrl=1, ns=1, serial="deadbeef", pci="0000:00:09.0")  # QEMU twin: same serial, same wwid
    h.add_nvme_multipath_head(subsys=2, ctrls=(2, 3))
    h.add_virtio(serial="V1")
    h.add_virtio()
    h.add_virtio(name="vdc", serial="V1")
    h.add_scsi(wwn=SCSI_WWN)
    h.add_scsi(transport="scsi")
    h.add_dm(slaves=["vda"])
    h.add_md(members=["vdb"])
    h.add_loop()
    h.add_loop(backing_file="/var/lib/img")
    h.add_zram()
    return h


def test_stable_id_is_never_a_kernel_name_or_majmin(tmp_path):
    h = _zoo(tmp_path)
    disks = list_disks(KernelFS(h.root), include_empty=True)
    assert len(disks) == 14
    prefixes = ("wwn:", "nvme-serial:", "virtio-serial:", "scsi-serial:", "dm-uuid:", "md-uuid:", "by-path:")
    seen = set()
    for d in disks:
        assert d.stable_id not in (d.name, d.majmin, "/dev/" + d.name)
        if d.stable_id is None:
            assert d.stable_id_note and "no persistent identity for %s" % d.name in d.stable_id_note
            continue
        assert d.stable_id.startswith(prefixes)
        assert d.name not in d.stable_id.split(":")
        assert d.stable_id not in seen
        seen.add(d.stable_id)


def test_stable_id_fallbacks(tmp_path):
    h = _zoo(tmp_path)
    by_name = {d.name: d for d in list_disks(KernelFS(h.root), include_empty=True)}
    # Two QEMU controllers with serial deadbeef: nvme0n1 and nvme1n1 share wwid and serial+nsid.
    assert by_name["nvme0n1"].stable_id == "by-path:pci-0000:00:03.0-nvme-1"
    assert by_name["nvme1n1"].stable_id == "by-path:pci-0000:00:09.0-nvme-1"
    assert "wwn %s is shared with nvme1n1" % QEMU_WWID.lower() in by_name["nvme0n1"].stable_id_note
    assert by_name["nvme0n2"].stable_id == "wwn:" + QEMU_WWID.replace("00000001", "00000002")
    # vda and vdc both claim serial V1.
    assert by_name["vda"].stable_id.startswith("by-path:")
    assert by_name["vdb"].stable_id_source == "by-path"
    assert by_name["loop0"].stable_id is None and "numbered at attach time" in by_name["loop0"].stable_id_note
    assert by_name["loop1"].backing_file == "/var/lib/img"
    assert by_name["nvme2n1"].stable_id_source == "wwn"
    assert by_name["sdb"].stable_id.startswith("wwn:t10.")


def test_nvme_serial_stable_id_includes_nsid(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, ns=1, pci="0000:00:03.0")
    h.add_nvme(ctrl=1, ns=1, pci="0000:00:04.0", serial="other")
    for n in ("nvme0n1", "nvme1n1"):
        h.remove(h.sysdir(n) + "/wwid")
    fs = KernelFS(h.root)
    assert resolve(fs, "nvme0n1").stable_id == "nvme-serial:deadbeef:nsid:1"
    assert resolve(fs, "nvme1n1").stable_id == "nvme-serial:other:nsid:1"


# -- list_disks -----------------------------------------------------------------------------

def test_list_disks_skips_empty_and_hidden(tmp_path):
    h = FakeHost(tmp_path)
    for ns in (1, 2, 10):
        h.add_nvme(ctrl=0, ns=ns)
    h.add_loop()
    h.add_loop(backing_file="/srv/a.img")
    h.add_nvme_multipath_head(subsys=1, ctrls=(1, 2))
    fs = KernelFS(h.root)
    assert [d.name for d in list_disks(fs)] == ["loop1", "nvme0n1", "nvme0n2", "nvme0n10", "nvme1n1"]
    assert [d.name for d in list_disks(fs, include_empty=True)][:2] == ["loop0", "loop1"]
    loop0 = resolve(fs, "loop0")
    assert loop0.size_bytes == 0 and loop0.kind == "loop" and loop0.has_mq


def test_list_disks_scans_by_id_once(host, fs, monkeypatch):
    calls = []
    real = fs.listdir

    def listdir(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(fs, "listdir", listdir)
    disks = list_disks(fs)
    assert [d.name for d in disks] == ["nvme0n1", "sda", "vda"]
    assert calls.count("/dev/disk/by-id") == 1 and calls.count("/dev/disk/by-path") == 1
    assert calls.count("/sys/block") == 1


def test_list_disks_is_empty_on_empty_host(tmp_path):
    fs = KernelFS(FakeHost(tmp_path).root)
    assert list_disks(fs) == []
    e = _err(fs, "nvme0n1")
    assert "Block devices on this host: none" in e.message


# -- resolve_many ---------------------------------------------------------------------------

def test_resolve_many_ok(fs):
    recs = resolve_many(fs, iter(["259:0", "VIRTSER01", "wwn-" + SCSI_WWN]), require_mq=True)
    assert [r.name for r in recs] == ["nvme0n1", "vda", "sda"]


def test_resolve_many_reports_every_failure(fs):
    with pytest.raises(DeviceError) as exc:
        resolve_many(fs, ["nvme0n1", "nvme0n1p1", "nosuch", "/dev/nvme0n1"])
    e = exc.value
    assert e.reason == "several"
    assert e.message.startswith("3 of 4 device selectors failed:\n- ")
    assert [x.reason for x in e.errors] == ["partition", "not_found", "duplicate"]
    assert "'nvme0n1' and '/dev/nvme0n1' both resolve to nvme0n1" in e.message
    assert e.selector == ["nvme0n1p1", "nosuch", "/dev/nvme0n1"]
    d = e.as_dict()
    assert d["reason"] == "several" and len(d["errors"]) == 3


def test_resolve_many_single_failure_and_duplicates_allowed(fs):
    with pytest.raises(DeviceError) as exc:
        resolve_many(fs, ["vda", "nosuch"])
    assert exc.value.reason == "not_found"
    recs = resolve_many(fs, ["vda", "254:0"], allow_duplicates=True)
    assert [r.name for r in recs] == ["vda", "vda"]


# -- helpers --------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("eui.0011223344556677", "0011223344556677"),
    ("wwn-0x5000C500A1B2C3D4", "5000c500a1b2c3d4"),
    ("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", "5000c500a1b2c3d4"),
    ("naa.5000c500a1b2c3d4", "5000c500a1b2c3d4"),
    ("nvme-eui.0011223344556677", "0011223344556677"),
    ("nvme.1b36-6465-51-00000001", "1b3664655100000001"),
    ("uuid.0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("00 11 22 33", "00112233"),
    (None, ""),
    ("  ", ""),
])
def test_normalize_wwn(value, expected):
    assert normalize_wwn(value) == expected


@given(st.binary(min_size=8, max_size=16))
def test_normalize_wwn_spellings_agree(raw):
    hexs = raw.hex()
    spaced = " ".join(hexs[i:i + 2] for i in range(0, len(hexs), 2))
    spellings = ["eui." + hexs, "EUI." + hexs.upper(), "0x" + hexs, "wwn-0x" + hexs, "naa." + hexs, spaced,
                 "nvme-eui." + hexs, spaced.replace(" ", ":")]
    assert {normalize_wwn(s) for s in spellings} == {hexs}
    assert normalize_wwn(normalize_wwn(hexs)) == hexs


def test_block_device_helpers():
    rec = BlockDevice(name="vda", majmin="254:0", kind="virtio", serial="S")
    assert rec.by_id == [] and rec.as_dict()["by_id"] == []
    assert rec.summary() == "vda (254:0, virtio, serial S, wwn -)"
    assert repr(rec) == "BlockDevice(vda (254:0, virtio, serial S, wwn -))"
    assert rec.brief() == {"name": "vda", "majmin": "254:0", "kind": "virtio", "serial": "S", "wwn": None}
    assert BlockDevice(name="x").summary().startswith("x (no MAJ:MIN,")
    with pytest.raises(TypeError):
        BlockDevice(nmae="typo")


def test_device_error_as_dict():
    e = DeviceError("boom", selector="x", reason="not_found", candidates=[{"name": "vda"}])
    assert str(e) == "boom"
    assert e.as_dict() == {"msg": "boom", "selector": "x", "reason": "not_found", "candidates": [{"name": "vda"}]}


def test_kinds_constant_covers_records(tmp_path):
    h = _zoo(tmp_path)
    r = DeviceResolver(KernelFS(h.root))
    kinds = {d.kind for d in r.list_disks(include_empty=True)} | {r.disk("nvme2c2n1").kind}
    assert kinds <= set(_devices.KINDS)
    assert kinds == set(_devices.KINDS)
    assert r.record("nosuch") is None


def test_odd_sysfs_contents_are_tolerated(host, fs):
    host.write(host.sysdir("vda") + "/size", "garbage")
    host.write("/dev/disk/by-id/not-a-link", "")          # a stray regular file
    os.symlink("../devices/virtual/block/gone", host.path("/sys/block/gone"))  # device vanished mid-scan
    host.remove("/sys/block/nvme0n1")                      # parent missing from /sys/block
    r = DeviceResolver(fs)
    assert r.resolve("vda").size_bytes is None
    assert [d.name for d in r.list_disks(include_empty=True)] == ["sda", "vda"]
    part = r.resolve("nvme0n1p1", allow_partition=True)
    assert part.parent == "nvme0n1" and part.stable_id == "wwn:%s:part1" % QEMU_WWID


def test_stable_selector_resolves_to_the_same_disk(tmp_path):
    """What the roles pass to the modules (io_facts' identity.stable_selector) names the disk its
    stable_id names - including disks whose only identity is a by-path link (the purge.yml bug of
    issue 21: the roles' filter ranked identities differently and refused such a disk)."""
    h = _zoo(tmp_path)
    fs = KernelFS(h.root)
    disks = list_disks(fs, include_empty=True)
    sources = set()
    for d in disks:
        if d.stable_id is None:
            assert d.stable_selector is None
            continue
        sources.add(d.stable_id_source)
        assert d.stable_selector and d.name not in (d.stable_selector, "/dev/" + d.name)
        assert resolve(fs, d.stable_selector).name == d.name, (d.name, d.stable_selector)
    assert {"wwn", "by-path", "dm-uuid", "md-uuid"} <= sources
    virtio = FakeHost(tmp_path / "virtio")
    virtio.add_virtio(pci="0000:00:07.0")
    virtio.add_virtio(serial="VIRTSER01")
    fs = KernelFS(virtio.root)
    assert [(d.stable_id_source, d.stable_selector) for d in list_disks(fs)] == [
        ("by-path", "/dev/disk/by-path/pci-0000:00:07.0"), ("serial", "VIRTSER01")]
    assert [resolve(fs, d.stable_selector).name for d in list_disks(fs)] == ["vda", "vdb"]


def test_a_disk_gone_since_the_facts_is_named_by_its_nvme_serial(tmp_path):
    """A request planned from io_facts names a disk by its WWN; after a hot-remove the error names the disk as its
    label does (the serial in the nvme driver's made-up wwid) and says what to do."""
    from sim.lab import lab_host
    h = lab_host(str(tmp_path))
    fs = KernelFS(h.root)
    wwid = DeviceResolver(fs).resolve("lab-nvme-b").wwn
    h.unplug("nvme1n1")
    with pytest.raises(DeviceError) as e:
        DeviceResolver(fs).resolve(wwid)
    assert e.value.reason == "not_found"
    assert ("No block device matches %r (the NVMe namespace 1 of serial 'lab-nvme-b', model 'QEMU NVMe Ctrl')"
            % wwid) in e.value.message
    assert "it has been removed since (hot-removed, failed or detached): run again" in e.value.message
    assert "nvme0n1 (259:0, nvme, serial lab-nvme-a" in e.value.message


@pytest.mark.parametrize("value", ["eui.0011223344556677", "nvme.1b36-zz-41-00000001", "nvme.1b36-00-41-00000001",
                                   "nvme.1b36-41-", "lab-nvme-b", None])
def test_only_the_nvme_drivers_own_wwid_is_decoded(value):
    assert _devices.describe_nvme_wwid(value) == ""
