# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The io_facts of the fleet benchmark's synthetic hosts, from the unit tests' simulated lab guests.

No complete io_facts result of a lab guest is recorded anywhere in the repository (tests/unit/playbooks/recorded/
holds the rollout summary's inputs, not io_facts), so the facts are made the way the module makes them:
``io_facts.gather`` (the module's own code) over a simulated sysfs/cgroupfs tree (tests/unit/sim) of the lab's
guests as tests/lab/lab.py boots them - a virtio root disk vda (serial lab-root), the virtio data disk vdb
(lab-virtio-data), QEMU NVMe controllers with 1 GiB namespaces, Debian 12 (kernel 6.1, systemd 252) or Debian 13
(kernel 6.12, systemd 257), 2 vCPUs, 2 GiB.

A fleet host is a *shape* (guest, hardware class of its NVMe data disks, how many) with serials of its own: each
shape is gathered once with placeholder serials, and each host's facts are that text with the placeholders
replaced (serials appear plain, in the udev by-id links, and hex-encoded in the NVMe wwid, which is the disks'
stable selector).
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

GUESTS = {  # name -> (kernel release, systemd version), as tests/lab boots them
    "debian12": ("6.1.0-57-amd64", 252),
    "debian13": ("6.12.57+deb13-amd64", 257),
}
KERNEL_CONFIG = ("CONFIG_BLK_CGROUP_IOCOST=y\nCONFIG_BLK_DEV_THROTTLING=y\n# CONFIG_BLK_CGROUP_IOLATENCY is not set\n"
                 "CONFIG_BLK_CGROUP_IOPRIO=y\nCONFIG_IOSCHED_BFQ=y\nCONFIG_BFQ_GROUP_IOSCHED=y\n")
# The lab's own NVMe class (QEMU 7.2's controller) first; then made-up data-centre classes: (model, firmware, GiB).
CLASSES = [
    ("QEMU NVMe Ctrl", "7.2.22", 1),
    ("FLEET DC1500 3.84TB", "E2MU200", 3576),
    ("FLEET DC1500 7.68TB", "E2MU200", 7153),
    ("FLEET DC1500 7.68TB", "E2MU210", 7153),
    ("FLEET PM9A3 1.92TB", "GDC5A02Q", 1788),
    ("FLEET PM9A3 3.84TB", "GDC5A02Q", 3576),
    ("FLEET P5520 7.68TB", "9CV10410", 7153),
    ("FLEET P5520 15.36TB", "9CV10410", 14306),
    ("FLEET CD6-R 3.84TB", "0109", 3576),
    ("FLEET CD6-R 7.68TB", "0109", 7153),
    ("FLEET 7450 PRO 3.84TB", "E2MU200", 3576),
    ("FLEET 7450 PRO 7.68TB", "E2MU210", 7153),
]
DISK_COUNTS = (1, 2, 3, 4)
# Placeholder serial prefix of the shapes; a host's replaces it with "h%06d-" (same length: the hex-encoded
# wwid keeps its form).
PLACEHOLDER = "h000000-"


def _sim():
    """tests/unit/sim and the collection (the unit tests' symlink tree in .cache/collections) importable."""
    for path in (os.path.join(REPO, "tests", "unit"), os.path.join(REPO, ".cache", "collections")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from sim.host import FakeHost  # pylint: disable=import-outside-toplevel
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS  # pylint: disable=import-outside-toplevel
    return FakeHost, io_facts, KernelFS


def which(name):
    """The guests' tools (Debian's paths); io_facts only reports them."""
    return {"systemctl": "/usr/bin/systemctl", "systemd-run": "/usr/bin/systemd-run", "nvme": "/usr/sbin/nvme",
            "udevadm": "/usr/bin/udevadm"}.get(name)


def gather_guest(guest, nvme, tmp):
    """io_facts of one simulated lab guest: ``nvme`` is [(serial, model, firmware, GiB)], one controller each."""
    fake_host, io_facts, kernel_fs = _sim()
    release, systemd = GUESTS[guest]
    h = fake_host(tmp, ncpus=2, kernel=release)
    h.add_virtio(name="vda", majmin="254:0", serial="lab-root", partitions=1)
    h.add_virtio(name="vdb", majmin="254:16", serial="lab-virtio-data")
    for n, (serial, model, firmware, gib) in enumerate(nvme):
        h.add_nvme(ctrl=n, serial=serial, model=model, firmware=firmware, size_gb=gib, majmin="259:%d" % n)
    h.add_cgroup_root(subtree="cpu io memory pids")
    h.mkdir("/run/systemd/system")
    h.write("/boot/config-" + release, KERNEL_CONFIG)
    facts = io_facts.gather(kernel_fs(h.root), release=release, systemd_version=systemd, which=which)
    return {"changed": False, "ansible_facts": {"io_isolation": facts}, "warnings": list(facts["warnings"])}


def lab_guest(guest):
    """The io_facts result of a lab guest itself: its two NVMe disks lab-nvme-a and lab-nvme-b."""
    with tempfile.TemporaryDirectory() as tmp:
        return gather_guest(guest, [("lab-nvme-a",) + CLASSES[0], ("lab-nvme-b",) + CLASSES[0]], tmp)


def shape_key(guest, klass, disks):
    return "%s-c%02d-d%d" % (guest, klass, disks)


def shape_facts(guest, klass, disks):
    """The io_facts result (JSON text) of one shape, serials ``h000000-<n>``."""
    with tempfile.TemporaryDirectory() as tmp:
        nvme = [(PLACEHOLDER + str(n),) + CLASSES[klass] for n in range(disks)]
        return json.dumps(gather_guest(guest, nvme, tmp), sort_keys=True)


def _hex(text):
    return text.encode().hex()


def host_facts(shape_text, index):
    """A host's io_facts result text: the shape's with serial prefix ``h<index>-`` in every form."""
    mine = "h%06d-" % index
    return shape_text.replace(PLACEHOLDER, mine).replace(_hex(PLACEHOLDER), _hex(mine))
