# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""udev matching by stable identity, file stamps, slugs."""

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._devices import BlockDevice
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._persist import (
    PersistError, is_managed, slug, stamped, udev_match,
)


def disk(**kw):
    base = dict(name="vdb", kind="virtio", majmin="254:16", rotational=True, stable_id=None, stable_id_source=None)
    base.update(kw)
    return BlockDevice(**base)


def test_match_by_wwid_serial_and_path():
    nvme = disk(name="nvme0n1", kind="nvme", wwid="nvme.1b36-61-00000001", stable_id="wwn:nvme.1b36-61-00000001",
                stable_id_source="wwn")
    assert udev_match(nvme).endswith('ATTRS{wwid}=="nvme.1b36-61-00000001"')
    virtio = disk(serial="lab-virtio-data", stable_id="virtio-serial:lab-virtio-data", stable_id_source="serial")
    assert udev_match(virtio).endswith('ATTR{serial}=="lab-virtio-data"')
    path = disk(by_path=["pci-0000:00:04.0"], stable_id="by-path:pci-0000:00:04.0", stable_id_source="by-path")
    assert udev_match(path).endswith('ENV{ID_PATH}=="pci-0000:00:04.0"')
    for rule in (udev_match(nvme), udev_match(virtio), udev_match(path)):
        assert 'ENV{DEVTYPE}=="disk"' in rule and "254:16" not in rule and "vdb" not in rule


@pytest.mark.parametrize("rec, words", [
    (disk(serial='bad"serial', stable_id="virtio-serial:x", stable_id_source="serial"), "cannot match safely"),
    (disk(stable_id_note="loop devices are numbered at attach time"), "loop devices"),
])
def test_unmatchable_identities_are_refused(rec, words):
    with pytest.raises(PersistError, match=words):
        udev_match(rec)


def test_stamps_and_slugs():
    assert is_managed(stamped("x\n", "t")) and not is_managed("x\n") and not is_managed(None)
    assert is_managed("#!/usr/bin/python3\n" + stamped("", "t")) and not is_managed("#!/bin/sh\nplain\n")
    assert slug("wwn:nvme.1b36-61/../x") == "wwn_nvme.1b36-61_.._x"


def test_rotational_disk_with_ssd_model_warns():
    hdd = disk(name="sda", kind="scsi", rotational=True)
    assert "SSD-class" in _iocost.class_warnings(hdd, {"rrandiops": 100000})[0]
    assert _iocost.class_warnings(hdd, {"rrandiops": 370}) == []
    assert _iocost.class_warnings(hdd, {"ctrl": "auto"}) == [] and _iocost.class_warnings(hdd, {"rrandiops": "x"}) == []
