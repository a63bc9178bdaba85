# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""udev matching by stable identity, file stamps, slugs, boot helpers, the owned-path registry."""

import importlib
import zipfile

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import iocost_apply as _boot_iocost_apply
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import BlockDevice
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT, KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BLK_QUEUE_RULES, BOOT_HELPERS, IOCOST_HELPER, IOCOST_RULES, LIBEXEC_DIR, NVME_ARBITRATION_RULES, OWNED,
    SYSCTL_CONF, SYSTEMD_DROPIN_NAME, BootHelper, PersistError, is_managed, owned_files, slug, stamped, udev_match,
    udev_value,
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


def test_boot_helpers_are_shipped_as_their_own_source_behind_a_shebang_and_the_stamp():
    for helper in BOOT_HELPERS:
        text = helper.content()
        lines = text.splitlines()
        assert lines[0] == "#!/usr/bin/python3" and is_managed(text) and helper.owner in lines[1]
        assert text.endswith(open(helper.source.__file__).read())
        compile(text, helper.path, "exec")
        assert helper.path.startswith(LIBEXEC_DIR + "/") and (helper.module, helper.path) in OWNED


def test_boot_helper_source_is_read_through_zipimport(tmp_path, monkeypatch):
    """AnsiballZ runs modules from a zip: the helper's text must come from the zip's loader."""
    zpath = str(tmp_path / "ansiballz.zip")
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("zipped_iocost_apply.py", open(_boot_iocost_apply.__file__).read())
    monkeypatch.syspath_prepend(zpath)
    module = importlib.import_module("zipped_iocost_apply")
    assert module.__file__.startswith(zpath) and type(module.__loader__).__name__ == "zipimporter"
    helper = BootHelper("iocost-apply", module, "iocost")
    assert helper.content() == IOCOST_HELPER.content()


def test_udev_rule_family_paths_and_render():
    assert IOCOST_RULES.path("wwn:nvme.1b36 x") == "/etc/udev/rules.d/91-aiinfra-iocost-wwn_nvme.1b36_x.rules"
    text = IOCOST_RULES.render("QEMU NVMe Ctrl, stable id wwn:x", ['ACTION=="add", RUN+="x"'])
    assert text.splitlines()[1:] == ["# QEMU NVMe Ctrl, stable id wwn:x", 'ACTION=="add", RUN+="x"']
    assert is_managed(text) and "aiinfra.io_isolation.iocost" in text.splitlines()[0]
    assert BLK_QUEUE_RULES.pattern() == "/etc/udev/rules.d/91-aiinfra-blk-queue-*.rules"
    with pytest.raises(PersistError, match="persist: false"):
        udev_value("a b", "serial", "nvme0")


def test_owned_files_lists_only_stamped_files_the_registry_declares(tmp_path):
    root = tmp_path
    fs = KernelFS(str(root))

    def put(path, text):
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    put(IOCOST_RULES.path("wwn:a"), stamped("x\n", "aiinfra.io_isolation.iocost"))
    put(BLK_QUEUE_RULES.path("wwn:a"), "not ours\n")
    put(NVME_ARBITRATION_RULES.path("lab-nvme-a"), stamped("x\n", "aiinfra.io_isolation.nvme_arbitration"))
    put("/etc/udev/rules.d/90-iocost.rules", stamped("x\n", "someone"))
    put(SYSCTL_CONF, stamped("vm.swappiness = 10\n", "aiinfra.io_isolation.sysctl"))
    put("/etc/systemd/system/inference.slice.d/" + SYSTEMD_DROPIN_NAME, stamped("[Slice]\n", "aiinfra.io_isolation.cgroup"))
    put("/etc/systemd/system/inference.slice", stamped("[Unit]\n", "aiinfra.io_isolation.cgroup"))
    put("/etc/systemd/system/other.slice", "[Unit]\n")
    put(IOCOST_HELPER.path, IOCOST_HELPER.content())
    assert owned_files(fs) == [
        ("iocost", IOCOST_RULES.path("wwn:a")),
        ("nvme_arbitration", NVME_ARBITRATION_RULES.path("lab-nvme-a")),
        ("sysctl", SYSCTL_CONF),
        ("cgroup", "/etc/systemd/system/inference.slice.d/" + SYSTEMD_DROPIN_NAME),
        ("cgroup", "/etc/systemd/system/inference.slice"),
        ("iocost", IOCOST_HELPER.path),
    ]


def test_the_standalone_boot_helper_writes_where_the_collection_reads():
    # It cannot import _kernelfs at boot: its own copy of the cgroup mount is held to the one declaration.
    assert _boot_iocost_apply.CGROUP_ROOT == CGROUP_ROOT
