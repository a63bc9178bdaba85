# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/lab.py --disk-capacity: parsing, refusals, and the QEMU -drive options it becomes."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab"))

import lab  # noqa: E402  pylint: disable=wrong-import-position

META = {"disks": {"nvme-a": {"bus": "nvme", "serial": "lab-nvme-a", "file": "nvme-a.raw", "eui64": "0x1", "uuid": "u1"},
                  "nvme-b": {"bus": "nvme", "serial": "lab-nvme-b", "file": "nvme-b.raw", "eui64": "0x2", "uuid": "u2"},
                  "virtio-data": {"bus": "virtio", "serial": "lab-virtio-data", "file": "virtio-data.raw"}}}


def test_drive_by_key_or_serial_with_decimal_suffixes():
    got = lab.parse_disk_capacity(["nvme-a=3000,150M", "lab-nvme-b=100,5000k"], META)
    assert got == {"nvme-a": {"iops": 3000, "bps": 150000000}, "nvme-b": {"iops": 100, "bps": 5000000}}
    assert lab.describe_capacity(got, META) == "lab-nvme-a 3000 IOPS / 150 MB/s, lab-nvme-b 100 IOPS / 5 MB/s"
    assert lab.describe_capacity({}, META) == "none (unthrottled)"
    assert lab.parse_disk_capacity(["nvme-b=%s" % lab.DEVICE_BOUND_CAPACITY], META)["nvme-b"]["iops"] > 0


@pytest.mark.parametrize("spec,why", [
    ("virtio-data=1,1M", "no NVMe drive 'virtio-data'"),
    ("nvme-a=3000", "expected DRIVE=IOPS,BYTES_PER_S"),
    ("nvme-a=3000,1T", "expected DRIVE=IOPS,BYTES_PER_S"),
    ("nvme-a=0,1M", "must be positive"),
])
def test_refusals_name_the_value_and_the_fix(spec, why, capsys):
    with pytest.raises(SystemExit):
        lab.parse_disk_capacity([spec], META)
    err = capsys.readouterr().err
    assert why in err and repr(spec) in err


def test_only_the_throttled_drive_gets_throttling_options(tmp_path):
    class Inst:
        dir = tmp_path
    args = lab.qemu_disk_args(Inst(), META, False, False, {"nvme-b": {"iops": 3000, "bps": 150000000}})
    drives = [args[i + 1] for i, a in enumerate(args) if a == "-drive"]
    assert [d for d in drives if "throttling" in d] == [
        "if=none,id=d-nvme-b,file=%s,format=raw,cache=writeback,discard=unmap,"
        "throttling.iops-total=3000,throttling.bps-total=150000000" % (tmp_path / "nvme-b.raw")]
    assert len(drives) == 3
