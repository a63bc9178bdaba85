# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for _calibrate_target: where iocost calibration may measure.

Two kinds of test: synthetic FakeHost trees for every refusal reason, and replays of what the lab
guest (debian13, kernel 6.12, util-linux 2.41) really showed in each disk state
(fixtures/calibrate_target/), where the fake host must give the same reasons the real kernel gave.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import stat
import types

import pytest
from hypothesis import given, strategies as st

from sim.host import FakeHost
from sim.runner import FakeRunner

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as ct
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration.calibrate_target import (
    SCRATCH_PREFIX, ScratchError, Target, TargetRefused, claim, create_scratch, find_leftovers, parse_blkid_export,
    parse_mountinfo, parse_swaps, parse_wipefs_json, plan_target, remove_scratch,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

MIB = 1024 ** 2
GIB = 1024 ** 3
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "calibrate_target")
EMPTY_WIPEFS = '{\n   "signatures": [\n\n   ]\n}\n'
ROOT_LINE = "29 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro"


def _load(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


DEVICES = _load("devices-debian13-6.12.json")
FILESYSTEMS = _load("filesystems-debian13-6.12.json")
MULTIPATH = _load("multipath-loop-debian13-6.12.json")


def _statvfs(total=10 * GIB, free=8 * GIB, frsize=4096, ro=False):
    return types.SimpleNamespace(f_bsize=frsize, f_frsize=frsize, f_blocks=total // frsize, f_bfree=free // frsize,
                                 f_bavail=free // frsize, f_files=65536, f_ffree=65000, f_favail=65000,
                                 f_flag=(1 if ro else 0) | 4096, f_namemax=255)


def blank_answers(*nodes):
    out = {}
    for n in nodes:
        out[("blkid", "-p", "-o", "export", "/dev/" + n)] = (2, "", "")
        out[("wipefs", "--no-act", "--json", "/dev/" + n)] = (0, EMPTY_WIPEFS, "")
    return out


def lab_host(tmp_path):
    """The lab guest's disks: vda 254:0 (root), vdb 254:16, nvme0n1 259:0, nvme1n1 259:1."""
    h = FakeHost(tmp_path, kernel="6.12.118+deb13-amd64")
    h.add_virtio(serial="lab-root", size_gb=3)
    h.add_virtio(serial="lab-virtio-data", size_gb=1)
    h.add_nvme(ctrl=0, serial="lab-nvme-a")
    h.add_nvme(ctrl=1, serial="lab-nvme-b")
    h.write("/proc/self/mountinfo", ROOT_LINE)
    h.write("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority")
    return h


@pytest.fixture
def host(tmp_path):
    return lab_host(tmp_path)


@pytest.fixture
def free_disk(monkeypatch):
    """No exclusive holder unless a test says otherwise; records the paths probed."""
    probed = []

    def probe(path):
        probed.append(path)
        return None
    monkeypatch.setattr(ct, "probe_exclusive", probe)
    return probed


@pytest.fixture
def space(monkeypatch):
    """statvfs stand-in: space.value is returned for every path."""
    holder = types.SimpleNamespace(value=_statvfs(), paths=[])

    def fake(path):
        holder.paths.append(path)
        return holder.value
    monkeypatch.setattr(ct, "statvfs", fake)
    return holder


def plan(h, run=None, **params):
    fs = KernelFS(h.root)
    return plan_target(fs, DeviceResolver(fs), run or FakeRunner(), params)


def refused(h, run=None, **params):
    with pytest.raises(TargetRefused) as exc:
        plan(h, run, **params)
    e = exc.value
    assert e.message == "\n".join(e.reasons) and e.reasons
    return e


def add_mount(h, line):
    text = h.read("/proc/self/mountinfo")
    h.write("/proc/self/mountinfo", text.rstrip("\n") + "\n" + line)


def add_opener(h, pid, comm, fds):
    h.write("/proc/%d/comm" % pid, comm)
    for fd, target in fds.items():
        real = h.path("/proc/%d/fd/%d" % (pid, fd))
        os.makedirs(os.path.dirname(real), exist_ok=True)
        os.symlink(target, real)


# -- parsers -----------------------------------------------------------------------------------

def test_parse_mountinfo_real_lines():
    text = "\n".join([
        ROOT_LINE,
        "46 29 259:3 / /mnt/cal\\040part rw,relatime shared:126 - ext4 /dev/nvme1n1p1 rw",
        "39 29 0:32 / /tmp rw,nosuid,nodev shared:16 - tmpfs tmpfs rw,size=1009428k,nr_inodes=1048576,inode64",
        "46 29 259:1 / /mnt/cal ro,relatime shared:126 - ext4 /dev/nvme1n1 ro",
        "50 29 0:40 /sub /srv rw master:3 shared:9 - nfs4 host:/export rw,vers=4.2",
        "garbage line",
    ])
    m = parse_mountinfo(text)
    assert [x["mount_point"] for x in m] == ["/", "/mnt/cal part", "/tmp", "/mnt/cal", "/srv"]
    assert m[0]["majmin"] == "254:0" and m[0]["source"] == "/dev/vda" and m[0]["read_only"] is False
    assert m[1]["fstype"] == "ext4" and m[1]["optional"] == ["shared:126"]
    assert m[3]["read_only"] is True
    assert m[4]["root"] == "/sub" and m[4]["optional"] == ["master:3", "shared:9"] and m[4]["source"] == "host:/export"


def test_parse_mountinfo_superblock_ro_counts():
    m = parse_mountinfo("46 29 259:1 / /mnt/x rw,relatime - ext4 /dev/nvme1n1 ro,errors=remount-ro")
    assert m[0]["read_only"] is True


_PATH_CHARS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
                      min_size=1, max_size=12)


def _escape(path):
    return "".join("\\%03o" % ord(c) if c in " \t\n\\" else c for c in path)


@given(st.lists(_PATH_CHARS, min_size=1, max_size=4))
def test_parse_mountinfo_escapes_roundtrip(parts):
    path = "/" + "/".join(parts)
    line = "46 29 8:1 / %s rw,relatime shared:1 - ext4 /dev/sda1 rw" % _escape(path)
    m = parse_mountinfo(line)
    assert len(m) == 1 and m[0]["mount_point"] == path


def test_parse_swaps():
    text = ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
            "/dev/vdb2                               partition\t524284\t\t0\t\t-2\n"
            "/swap\\040file                          file\t\t1048572\t\t12\t\t-3\n")
    s = parse_swaps(text)
    assert [(x["filename"], x["type"], x["size_kib"], x["used_kib"], x["priority"]) for x in s] == [
        ("/dev/vdb2", "partition", 524284, 0, -2), ("/swap file", "file", 1048572, 12, -3)]


def test_parse_blkid_export_and_escapes():
    tags = parse_blkid_export("DEVNAME=/dev/vdb\nUUID=LabPv0-AbCd\nVERSION=LVM2\\ 001\nTYPE=LVM2_member\nUSAGE=raid\n"
                              "\nDEVNAME=/dev/other\nTYPE=ext4\n")
    assert tags == {"DEVNAME": "/dev/vdb", "UUID": "LabPv0-AbCd", "VERSION": "LVM2 001", "TYPE": "LVM2_member",
                    "USAGE": "raid"}


def test_parse_wipefs_json():
    assert parse_wipefs_json("") == []
    assert parse_wipefs_json(EMPTY_WIPEFS) == []
    sigs = parse_wipefs_json('{"signatures": [{"device": "vdb", "offset": "0x438", "type": "ext4", '
                             '"uuid": "u", "label": null}]}')
    assert sigs == [{"device": "vdb", "offset": "0x438", "type": "ext4", "uuid": "u", "label": None}]
    with pytest.raises(ValueError):
        parse_wipefs_json('{"other": 1}')
    with pytest.raises(ValueError):
        parse_wipefs_json("wipefs: error")


@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True),
                       st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
                       min_size=1, max_size=6))
def test_parse_blkid_export_roundtrip(tags):
    text = "".join("%s=%s\n" % (k, re.sub(r"([^A-Za-z0-9_./:-])", r"\\\1", v)) for k, v in tags.items())
    assert parse_blkid_export(text) == tags


# -- raw device: refusals one by one --------------------------------------------------------------

def test_device_needs_destructive(host, free_disk):
    e = refused(host, device="lab-virtio-data", destructive=False)
    assert e.reasons == ["calibrating /dev/vdb (254:16) directly would overwrite data on it; name a filesystem for a "
                         "scratch file, or set destructive: true on a blank disk"]
    assert e.device == "vdb"


def test_neither_given(host):
    e = refused(host)
    assert "nothing to calibrate on" in e.message and "destructive: true" in e.message


def test_blank_disk_is_accepted(host, free_disk):
    run = FakeRunner(blank_answers("vdb"))
    t = plan(host, run, device="lab-virtio-data", destructive=True)
    assert (t.kind, t.path, t.size_bytes, t.disk.name, t.filesystem, t.created) == (
        "device", "/dev/vdb", GIB, "vdb", None, False)
    assert t.local_path == os.path.join(host.root, "dev/vdb")
    assert free_disk == [t.local_path]
    assert run.calls == [["blkid", "-p", "-o", "export", "/dev/vdb"], ["wipefs", "--no-act", "--json", "/dev/vdb"]]
    d = t.as_dict()
    json.dumps(d)
    assert d["disk"]["serial"] == "lab-virtio-data" and d["kind"] == "device"


def test_partition_selector_refused(host, free_disk):
    host.add_partitions("vdb", 1)
    e = refused(host, device="/dev/vdb1", destructive=True)
    assert len(e.reasons) == 1 and "is a partition of vdb" in e.message and "calibrate the whole disk" in e.message


def test_unknown_device(host):
    e = refused(host, device="no-such-serial", destructive=True)
    assert "No block device matches 'no-such-serial'" in e.message
    assert e.details["device_error"]["reason"] == "not_found"


def test_reason_partitions(host, free_disk):
    host.add_partitions("vdb", 2)
    e = refused(host, FakeRunner(blank_answers("vdb", "vdb1", "vdb2")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb (254:16) has 2 partitions (/dev/vdb1, /dev/vdb2): raw calibration would destroy "
                         "them; delete them (wipefs --all on each partition, then on /dev/vdb) or calibrate through a "
                         "filesystem on one of them"]


@pytest.mark.parametrize("tool_output, expected", [
    ({"blkid": (0, "DEVNAME=/dev/vdb\nUUID=abc\nTYPE=ext4\nUSAGE=filesystem\n", "")},
     "/dev/vdb carries an ext4 filesystem (UUID abc); if its data is not needed, erase it with wipefs --all /dev/vdb"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nUUID=x\nTYPE=xfs\nUSAGE=filesystem\n", "")}, "carries a xfs filesystem"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nUUID=u\nVERSION=LVM2\\ 001\nTYPE=LVM2_member\nUSAGE=raid\n", "")},
     "/dev/vdb carries an LVM physical volume (LVM2_member) (UUID u); remove it from LVM first"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nUUID=u\nLABEL=h:0\nVERSION=1.2\nTYPE=linux_raid_member\nUSAGE=raid\n", "")},
     "/dev/vdb carries an md RAID member (linux_raid_member) (LABEL h:0, UUID u); stop its array"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nUUID=s\nVERSION=1\nTYPE=swap\nUSAGE=other\n", "")},
     "/dev/vdb carries a swap signature (UUID s); swapoff /dev/vdb if it is active"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nTYPE=isw_raid_member\nUSAGE=raid\n", "")},
     "/dev/vdb carries a RAID or volume-manager member (isw_raid_member)"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nTYPE=BitLocker\nUSAGE=crypto\n", "")}, "carries an encrypted volume (BitLocker)"),
    ({"blkid": (0, "DEVNAME=/dev/vdb\nPTUUID=1ab5e7c0\nPTTYPE=dos\n", "")},
     "/dev/vdb has a partition table (dos) (PTUUID 1ab5e7c0); delete it"),
    # only wipefs sees it (blkid -p found nothing): still a reason
    ({"wipefs": (0, '{"signatures": [{"device": "vdb", "offset": "0x10040", "type": "btrfs", "uuid": "b", '
                    '"label": null}]}', "")},
     "/dev/vdb carries a btrfs signature (UUID b, offset 0x10040)"),
])
def test_reason_signature(host, free_disk, tool_output, expected):
    answers = blank_answers("vdb")
    if "blkid" in tool_output:
        answers[("blkid", "-p", "-o", "export", "/dev/vdb")] = tool_output["blkid"]
    if "wipefs" in tool_output:
        answers[("wipefs", "--no-act", "--json", "/dev/vdb")] = tool_output["wipefs"]
    e = refused(host, FakeRunner(answers), device="vdb", destructive=True)
    assert len(e.reasons) == 1 and e.reasons[0].startswith("/dev/vdb ") and expected in e.reasons[0], e.reasons


def test_signature_seen_by_both_tools_is_reported_once(host, free_disk):
    answers = blank_answers("vdb")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb")] = (0, "DEVNAME=/dev/vdb\nTYPE=ext4\nUSAGE=filesystem\n", "")
    answers[("wipefs", "--no-act", "--json", "/dev/vdb")] = (
        0, '{"signatures": [{"device": "vdb", "offset": "0x438", "type": "ext4", "uuid": null, "label": null}]}', "")
    e = refused(host, FakeRunner(answers), device="vdb", destructive=True)
    assert len(e.reasons) == 1


def test_gpt_protective_mbr_not_double_counted(host, free_disk):
    answers = blank_answers("vdb")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb")] = (0, "DEVNAME=/dev/vdb\nPTUUID=p\nPTTYPE=gpt\n", "")
    answers[("wipefs", "--no-act", "--json", "/dev/vdb")] = (0, json.dumps({"signatures": [
        {"device": "vdb", "offset": "0x200", "type": "gpt", "uuid": None, "label": None},
        {"device": "vdb", "offset": "0x3ffffe00", "type": "gpt", "uuid": None, "label": None},
        {"device": "vdb", "offset": "0x1fe", "type": "PMBR", "uuid": None, "label": None}]}), "")
    e = refused(host, FakeRunner(answers), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb has a partition table (gpt) (PTUUID p); delete it if its partitions are not needed "
                         "(wipefs --all /dev/vdb)"]


def test_signature_on_partition_is_reported(host, free_disk):
    host.add_partitions("vdb", 1)
    answers = blank_answers("vdb", "vdb1")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb1")] = (
        0, "DEVNAME=/dev/vdb1\nUUID=p1\nTYPE=ext4\nUSAGE=filesystem\nPART_ENTRY_SCHEME=dos\n", "")
    e = refused(host, FakeRunner(answers), device="vdb", destructive=True)
    assert any(r.startswith("/dev/vdb1 carries an ext4 filesystem (UUID p1)") for r in e.reasons), e.reasons


@pytest.mark.parametrize("blkid, wipefs, refused_expected", [
    ((2, "", ""), (127, "", "wipefs: not found"), False),        # one tool answering is enough
    ((127, "", "blkid: not found"), (0, EMPTY_WIPEFS, ""), False),
    ((127, "", "blkid: not found"), (127, "", "wipefs: not found"), True),
    ((4, "", "blkid: error: /dev/vdb: Permission denied"), (1, "", "wipefs: cannot open"), True),
    ((2, "", ""), (0, "not json", ""), False),
])
def test_probe_tools_failing(host, free_disk, blkid, wipefs, refused_expected):
    run = FakeRunner({("blkid", "-p", "-o", "export", "/dev/vdb"): blkid, ("wipefs", "--no-act", "--json", "/dev/vdb"): wipefs})
    if refused_expected:
        e = refused(host, run, device="vdb", destructive=True)
        assert len(e.reasons) == 1 and e.reasons[0].startswith("cannot tell whether /dev/vdb is blank: blkid -p rc=")
        assert "install util-linux" in e.reasons[0]
    else:
        assert plan(host, run, device="vdb", destructive=True).kind == "device"


def test_runner_that_raises_is_handled(host, free_disk):
    run = FakeRunner({("blkid", "-p", "-o", "export", "/dev/vdb"): CommandError(["blkid"], 2, "", ""),
                      ("wipefs", "--no-act", "--json", "/dev/vdb"): OSError(errno.ENOENT, "No such file")})
    assert plan(host, run, device="vdb", destructive=True).kind == "device"


def test_tool_paths_from_params(host, free_disk):
    run = FakeRunner({("/usr/sbin/blkid", "-p", "-o", "export", "/dev/vdb"): (2, "", ""),
                      ("/usr/sbin/wipefs", "--no-act", "--json", "/dev/vdb"): (0, EMPTY_WIPEFS, "")})
    assert plan(host, run, device="vdb", destructive=True, blkid="/usr/sbin/blkid", wipefs="/usr/sbin/wipefs")


def test_reason_mounted_partition(host, free_disk):
    host.add_partitions("vdb", 1)
    add_mount(host, "46 29 254:17 / /mnt/lab\\040data rw,relatime shared:126 - ext4 /dev/vdb1 rw")
    e = refused(host, FakeRunner(blank_answers("vdb", "vdb1")), device="vdb", destructive=True)
    assert "/dev/vdb1 is mounted on /mnt/lab data (ext4); unmount it (umount '/mnt/lab data') and remove it from " \
           "/etc/fstab" in e.reasons


def test_reason_mounted_whole_disk_twice(host, free_disk):
    add_mount(host, "46 29 254:16 / /mnt/a rw,relatime - ext4 /dev/vdb rw")
    add_mount(host, "47 29 254:16 /sub /mnt/b rw,relatime - ext4 /dev/vdb rw")
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert [r for r in e.reasons if "is mounted on" in r] == [
        "/dev/vdb is mounted on /mnt/a (ext4); unmount it (umount /mnt/a) and remove it from /etc/fstab",
        "/dev/vdb is mounted on /mnt/b (ext4); unmount it (umount /mnt/b) and remove it from /etc/fstab"]


def test_mount_of_other_disk_is_ignored(host, free_disk):
    add_mount(host, "46 29 259:1 / /mnt/x rw - ext4 /dev/nvme1n1 rw")
    assert plan(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True).kind == "device"


def test_reason_active_swap(host, free_disk):
    host.write("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                              "/dev/vdb                                partition\t1048572\t\t2048\t\t-2")
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb is active swap (/dev/vdb in /proc/swaps, 2048 KiB used); swapoff /dev/vdb and "
                         "remove it from /etc/fstab"]


def test_reason_active_swap_through_link(host, free_disk):
    host.add_partitions("vdb", 1)
    host.write("/proc/swaps", "Filename Type Size Used Priority\n"
                              "/dev/disk/by-id/virtio-lab-virtio-data-part1 partition 100 0 -2")
    e = refused(host, FakeRunner(blank_answers("vdb", "vdb1")), device="vdb", destructive=True)
    assert any(r.startswith("/dev/vdb1 is active swap (/dev/disk/by-id/virtio-lab-virtio-data-part1") for r in e.reasons)


def test_reason_holder_dm(host, free_disk):
    host.add_dm(name="labdm", slaves=("vdb",))
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb is in use by device-mapper device dm-0 (/dev/mapper/labdm) "
                         "(/sys/class/block/vdb/holders/dm-0); remove it first (lvremove/vgchange -an for LVM, "
                         "dmsetup remove labdm)"]


def test_reason_holder_md_on_partition(host, free_disk):
    host.add_partitions("vdb", 1)
    host.add_md(members=("vdb1",))
    e = refused(host, FakeRunner(blank_answers("vdb", "vdb1")), device="vdb", destructive=True)
    assert "/dev/vdb1 is in use by md array md0 (/sys/class/block/vdb1/holders/md0); stop it first " \
           "(mdadm --stop /dev/md0)" in e.reasons


def test_reason_holder_other_kind(host, free_disk):
    host.link(host.sysdir("vdb") + "/holders/bcache0", "/sys/devices/virtual/block/bcache0")
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb is in use by bcache0 (/sys/class/block/vdb/holders/bcache0); release it first "
                         "(bcache: echo 1 > /sys/block/bcache0/bcache/detach or stop)"]


def test_refuse_dm_without_slaves(host, space):
    host.add_dm(name="zero")
    fs_host(host, "46 29 253:0 / /mnt/cal rw - ext4 /dev/mapper/zero rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=MIB)
    assert "device-mapper device zero has no underlying disks (slaves/ is empty)" in e.message


def test_reason_exclusive_holder(host, monkeypatch):
    monkeypatch.setattr(ct, "probe_exclusive", lambda path: errno.EBUSY)
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb (254:16) is claimed by the kernel: an exclusive open (O_EXCL) fails with EBUSY (a "
                         "mount, swap, md/dm/bcache member or a program that opened it exclusively); it must be free "
                         "before fio may write to it (check with lsblk /dev/vdb and fuser -vm /dev/vdb)"]


def test_reason_device_node_missing(host, monkeypatch):
    monkeypatch.setattr(ct, "probe_exclusive", lambda path: errno.ENOENT)
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons[0].startswith("cannot open /dev/vdb: No such file or directory (ENOENT)")


def test_probe_exclusive_on_regular_file_is_none(tmp_path):
    p = tmp_path / "f"
    p.write_text("x")
    assert ct.probe_exclusive(str(p)) is None
    assert ct.probe_exclusive(str(tmp_path / "missing")) == errno.ENOENT


def test_reason_held_open_by_processes(host, free_disk):
    host.add_partitions("vdb", 1)
    add_opener(host, 1234, "sleep", {0: "/dev/vdb"})
    add_opener(host, 99, "fio", {3: "/dev/vdb1", 4: "/dev/vdb"})
    add_opener(host, 7, "bash", {0: "/dev/pts/0", 1: "pipe:[123]", 2: "/dev/vda"})
    e = refused(host, FakeRunner(blank_answers("vdb", "vdb1")), device="vdb", destructive=True)
    assert e.reasons[0].startswith("/dev/vdb (254:16) has 1 partition")
    assert e.reasons[1:] == ["/dev/vdb is held open by 2 processes: pid 99 (fio) has /dev/vdb, /dev/vdb1 open; "
                             "pid 1234 (sleep) has /dev/vdb open; stop them (kill 99 1234) before calibrating"]


def test_own_process_is_not_an_opener(host, free_disk):
    add_opener(host, os.getpid(), "python3", {5: "/dev/vdb"})
    assert plan(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)


def test_reason_multipath_head(tmp_path, free_disk):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head()
    h.write("/proc/self/mountinfo", ROOT_LINE)
    e = refused(h, FakeRunner(blank_answers("nvme0n1")), device="nvme0n1", destructive=True)
    assert len(e.reasons) == 1 and "NVMe native-multipath head" in e.reasons[0]
    assert "nvme_core.multipath=N" in e.reasons[0]


def test_reason_read_only_disk_and_size_zero(host, free_disk):
    host.write(host.sysdir("vdb") + "/ro", "1")
    host.write(host.sysdir("vdb") + "/size", "0")
    e = refused(host, FakeRunner(blank_answers("vdb")), device="vdb", destructive=True)
    assert e.reasons == ["/dev/vdb (254:16) is read-only (/sys/block/vdb/ro = 1): a raw write calibration needs a "
                         "writable disk", "/dev/vdb (254:16) has size 0 (no medium?)"]


def test_all_reasons_at_once(host, monkeypatch):
    """One refusal lists everything: partitions, table, signatures, mount, swap, holder, EBUSY, openers."""
    monkeypatch.setattr(ct, "probe_exclusive", lambda path: errno.EBUSY)
    host.add_partitions("vdb", 3)
    host.add_dm(name="vg-lv", slaves=("vdb3",))
    add_mount(host, "46 29 254:17 / /data rw,relatime - ext4 /dev/vdb1 rw")
    host.write("/proc/swaps", "Filename Type Size Used Priority\n/dev/vdb2 partition 524284 0 -2")
    add_opener(host, 4242, "fio", {3: "/dev/vdb"})
    answers = blank_answers("vdb", "vdb1", "vdb2", "vdb3")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb")] = (0, "DEVNAME=/dev/vdb\nPTUUID=1ab5e7c0\nPTTYPE=dos\n", "")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb1")] = (0, "DEVNAME=/dev/vdb1\nTYPE=ext4\nUSAGE=filesystem\n", "")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb2")] = (0, "DEVNAME=/dev/vdb2\nTYPE=swap\nUSAGE=other\n", "")
    answers[("blkid", "-p", "-o", "export", "/dev/vdb3")] = (0, "DEVNAME=/dev/vdb3\nTYPE=LVM2_member\nUSAGE=raid\n", "")
    e = refused(host, FakeRunner(answers), device="lab-virtio-data", destructive=True)
    starts = [
        "/dev/vdb (254:16) has 3 partitions (/dev/vdb1, /dev/vdb2, /dev/vdb3)",
        "/dev/vdb has a partition table (dos)",
        "/dev/vdb1 carries an ext4 filesystem",
        "/dev/vdb2 carries a swap signature",
        "/dev/vdb3 carries an LVM physical volume (LVM2_member)",
        "/dev/vdb1 is mounted on /data (ext4)",
        "/dev/vdb2 is active swap",
        "/dev/vdb3 is in use by device-mapper device dm-0 (/dev/mapper/vg-lv)",
        "/dev/vdb (254:16) is claimed by the kernel: an exclusive open (O_EXCL) fails with EBUSY (the mount, swap or "
        "holder listed here)",
        "/dev/vdb is held open by 1 process: pid 4242 (fio) has /dev/vdb open",
    ]
    assert len(e.reasons) == len(starts), e.reasons
    for reason, start in zip(e.reasons, starts):
        assert reason.startswith(start), (reason, start)
    assert e.message.count("\n") == len(starts) - 1
    assert e.as_dict()["reasons"] == e.reasons and e.device == "vdb"


# -- filesystem (scratch file) targets ---------------------------------------------------------

def fs_host(host, line, directory="/mnt/cal"):
    host.mkdir(directory)
    add_mount(host, line)
    return host


def test_file_target_on_whole_disk(host, space, free_disk):
    fs_host(host, "46 29 259:1 / /mnt/cal rw,relatime shared:126 - ext4 /dev/nvme1n1 rw")
    host.mkdir("/mnt/cal/data")
    run = FakeRunner()
    t = plan(host, run, filesystem="/mnt/cal/data", scratch_size=256 * MIB)
    assert run.calls == [] and free_disk == []          # a file target probes no device
    assert (t.kind, t.disk.name, t.filesystem, t.fstype, t.mount_source) == (
        "file", "nvme1n1", "/mnt/cal", "ext4", "/dev/nvme1n1")
    assert t.path == "/mnt/cal/data/%s%d.scratch" % (SCRATCH_PREFIX, os.getpid())
    assert t.local_path == host.path(t.path) and t.size_bytes == 256 * MIB
    assert t.free_bytes == 8 * GIB and t.headroom_bytes == GIB
    assert space.paths == [host.path("/mnt/cal/data")] * 2   # read-only flag + free space


def test_file_target_size_rounded_to_mib(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    assert plan(host, filesystem="/mnt/cal", scratch_size=MIB + 1).size_bytes == 2 * MIB


def test_file_target_partition_parent_and_escaped_mount_point(host, space):
    host.add_partitions("nvme1n1", 1, majmin_major=259)
    mm = host.devices["nvme1n1p1"]["majmin"]
    fs_host(host, "46 29 %s / /mnt/cal\\040part rw,relatime - ext4 /dev/nvme1n1p1 rw" % mm, "/mnt/cal part")
    t = plan(host, filesystem="/mnt/cal part", scratch_size=64 * MIB, device="nvme1n1p1")
    assert t.disk.name == "nvme1n1" and t.filesystem == "/mnt/cal part"


def test_file_target_root_longest_match(host, space):
    host.mkdir("/root")
    add_mount(host, "46 29 259:1 / /root2 rw - ext4 /dev/nvme1n1 rw")  # a prefix that is not a parent
    t = plan(host, filesystem="/root", scratch_size=64 * MIB)
    assert t.disk.name == "vda" and t.filesystem == "/"


def test_file_target_later_mount_on_same_point_wins(host, space):
    fs_host(host, "46 29 259:0 / /mnt/cal rw - ext4 /dev/nvme0n1 rw")
    add_mount(host, "47 46 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    assert plan(host, filesystem="/mnt/cal", scratch_size=64 * MIB).disk.name == "nvme1n1"


def test_file_target_through_symlink(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    os.symlink("/mnt/cal", host.path("/srv-link"))
    t = plan(host, filesystem="/srv-link", scratch_size=64 * MIB)
    assert t.disk.name == "nvme1n1" and t.directory == "/mnt/cal"


def test_file_target_dm_over_one_disk(host, space):
    host.add_dm(name="labdm", slaves=("vdb",))
    fs_host(host, "46 29 253:0 / /mnt/cal rw,relatime - ext4 /dev/mapper/labdm rw")
    assert plan(host, filesystem="/mnt/cal", scratch_size=64 * MIB).disk.name == "vdb"


def test_file_target_dm_on_md_on_partitions_of_one_disk(host, space):
    host.add_partitions("nvme1n1", 2, majmin_major=259)
    host.add_md(members=("nvme1n1p1", "nvme1n1p2"))
    host.add_dm(name="vg-lv", slaves=("md0",))
    fs_host(host, "46 29 253:0 / /mnt/cal rw - xfs /dev/mapper/vg-lv rw")
    assert plan(host, filesystem="/mnt/cal", scratch_size=64 * MIB).disk.name == "nvme1n1"


def test_refuse_filesystem_spanning_disks(host, space):
    host.add_dm(name="labspan", slaves=("nvme1n1", "vdb"))
    fs_host(host, "46 29 253:0 / /mnt/cal rw,relatime - ext4 /dev/mapper/labspan rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert e.reasons == ["the filesystem on /mnt/cal spans nvme1n1, vdb: calibrate each disk through a filesystem of "
                         "its own or destructive on a blank disk"]


def test_refuse_md_raid_spanning_disks(host, space):
    host.add_md(members=("nvme0n1", "nvme1n1"))
    fs_host(host, "46 29 9:0 / /mnt/cal rw - ext4 /dev/md0 rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert "spans nvme0n1, nvme1n1" in e.message


@pytest.mark.parametrize("line, words", [
    ("39 29 0:32 / /mnt/cal rw,nosuid,nodev shared:16 - tmpfs tmpfs rw,size=1009428k", "not backed by one local disk (tmpfs)"),
    ("40 29 0:33 / /mnt/cal rw - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c", "(overlay)"),
    ("41 29 0:34 / /mnt/cal rw - nfs4 srv:/export rw,vers=4.2", "a network filesystem (nfs4)"),
    ("42 29 0:35 / /mnt/cal rw - fuse.sshfs u@h:/ rw", "(fuse.sshfs)"),
])
def test_refuse_not_a_disk_filesystem(host, space, line, words):
    fs_host(host, line)
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert len(e.reasons) == 1 and words in e.reasons[0] and "name a directory on a filesystem on the disk" in e.message


def test_refuse_unknown_anonymous_device(host, space):
    fs_host(host, "42 29 0:50 / /mnt/cal rw - weirdfs none rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert "is not backed by a block device (device number 0:50" in e.message


def test_btrfs_anonymous_majmin_uses_source_and_members(host, space):
    fs_host(host, "42 29 0:45 / /mnt/cal rw - btrfs /dev/nvme1n1 rw,ssd,space_cache=v2")
    host.mkdir("/sys/fs/btrfs/0f1e2d3c/devices/nvme1n1")
    assert plan(host, filesystem="/mnt/cal", scratch_size=64 * MIB).disk.name == "nvme1n1"
    host.mkdir("/sys/fs/btrfs/0f1e2d3c/devices/vdb")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert "spans nvme1n1, vdb" in e.message


def test_refuse_loop_backed_filesystem(host, space):
    host.add_loop(backing_file="/var/tmp/img")
    fs_host(host, "42 29 7:0 / /mnt/cal rw - ext4 /dev/loop0 rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert "loop device loop0 (backing file /var/tmp/img)" in e.message


def test_refuse_filesystem_on_multipath_head(tmp_path, space):
    h = FakeHost(tmp_path)
    h.add_nvme_multipath_head()
    h.write("/proc/self/mountinfo", "46 1 259:0 / / rw - ext4 /dev/nvme0n1 rw")
    e = refused(h, filesystem="/", scratch_size=64 * MIB)
    assert "NVMe native-multipath head" in e.message


def test_refuse_read_only_mount(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal ro,relatime shared:126 - ext4 /dev/nvme1n1 ro")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB)
    assert e.reasons == ["the filesystem of /mnt/cal (ext4 on /mnt/cal, mounted from /dev/nvme1n1) is mounted "
                         "read-only; remount it read-write (mount -o remount,rw /mnt/cal) or name a directory on a "
                         "writable filesystem"]


def test_refuse_read_only_from_statvfs(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    space.value = _statvfs(ro=True)
    assert "mounted read-only" in refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB).message


@pytest.mark.parametrize("total, free, size, ok", [
    (10 * GIB, 8 * GIB, 7 * GIB, True),               # 7 + 1 (floor) <= 8
    (10 * GIB, 8 * GIB, 7 * GIB + MIB, False),
    (100 * GIB, 10 * GIB, 5 * GIB, True),              # headroom 5 % = 5 GiB
    (100 * GIB, 10 * GIB, 5 * GIB + MIB, False),
])
def test_free_space_boundaries(host, space, total, free, size, ok):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    space.value = _statvfs(total=total, free=free)
    if ok:
        assert plan(host, filesystem="/mnt/cal", scratch_size=size).size_bytes == size
    else:
        assert "not enough free space" in refused(host, filesystem="/mnt/cal", scratch_size=size).message


def test_refuse_free_space_message_has_numbers(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    space.value = _statvfs(total=973 * MIB + 4096 * 7, free=905 * MIB)
    e = refused(host, filesystem="/mnt/cal", scratch_size=2 * GIB)
    assert e.reasons == [
        "not enough free space for the scratch file in /mnt/cal (ext4 on /mnt/cal, mounted from /dev/nvme1n1): "
        "948961280 bytes (905.0 MiB) free, need 3221225472 bytes (3.0 GiB) = scratch_size 2147483648 (2.0 GiB) + "
        "headroom 1073741824 (1.0 GiB, the larger of 1.0 GiB and 5% of the filesystem's 973.0 MiB); free space there "
        "or name a directory on a larger filesystem"]


def test_free_space_suggests_smaller_size_and_names_leftovers(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    host.write("/mnt/cal/%s77.scratch" % SCRATCH_PREFIX, "x" * 99)  # + newline = 100 bytes
    space.value = _statvfs(total=10 * GIB, free=3 * GIB)
    e = refused(host, filesystem="/mnt/cal", scratch_size=4 * GIB)
    assert "set scratch_size to at most 2147483648 (2.0 GiB)" in e.message
    assert "scratch files of earlier runs use 100 B there: /mnt/cal/%s77.scratch" % SCRATCH_PREFIX in e.message


def test_headroom_min_param(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    space.value = _statvfs(total=GIB, free=900 * MIB)
    assert "not enough free space" in refused(host, filesystem="/mnt/cal", scratch_size=256 * MIB).message
    t = plan(host, filesystem="/mnt/cal", scratch_size=256 * MIB, headroom_min=64 * MIB)
    assert t.headroom_bytes == 64 * MIB
    e = refused(host, filesystem="/mnt/cal", scratch_size=256 * MIB, headroom_min=-1)
    assert "headroom_min must be" in e.message


def test_refuse_device_mismatch(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB, device="lab-virtio-data")
    assert e.reasons == ["device 'lab-virtio-data' is vdb (254:16) but the filesystem of /mnt/cal is on nvme1n1 "
                         "(259:1): name one disk (drop device, or name a directory on a filesystem on vdb)"]
    assert plan(host, filesystem="/mnt/cal", scratch_size=64 * MIB, device="lab-nvme-b").disk.name == "nvme1n1"


def test_refuse_device_unknown_with_filesystem(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    e = refused(host, filesystem="/mnt/cal", scratch_size=64 * MIB, device="nope")
    assert e.reasons[0].startswith("device: No block device matches 'nope'")


def test_all_filesystem_reasons_at_once(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal ro,relatime - ext4 /dev/nvme1n1 ro")
    space.value = _statvfs(total=GIB, free=900 * MIB)
    e = refused(host, filesystem="/mnt/cal", scratch_size=2 * GIB, device="vdb")
    assert [r.split(" ")[0:3] for r in e.reasons] == [
        ["the", "filesystem", "of"], ["device", "'vdb'", "is"], ["not", "enough", "free"]]
    assert "read-only" in e.reasons[0]


@pytest.mark.parametrize("params, words", [
    ({"filesystem": "relative/dir", "scratch_size": MIB}, "filesystem must be an absolute directory path"),
    ({"filesystem": "/mnt/nope", "scratch_size": MIB}, "filesystem: /mnt/nope does not exist"),
    ({"filesystem": "/etc/hostname", "scratch_size": MIB}, "filesystem: /etc/hostname is not a directory"),
    ({"filesystem": "/mnt", "scratch_size": 0}, "scratch_size must be a positive number of bytes, got 0"),
    ({"filesystem": "/mnt", "scratch_size": True}, "scratch_size must be a positive number"),
    ({"filesystem": "/mnt"}, "scratch_size must be a positive number of bytes, got None"),
])
def test_refuse_bad_filesystem_params(host, space, params, words):
    host.mkdir("/mnt")
    host.write("/etc/hostname", "lab")
    assert words in refused(host, **params).message


def test_refuse_existing_scratch_of_same_pid(host, space):
    fs_host(host, "46 29 259:1 / /mnt/cal rw - ext4 /dev/nvme1n1 rw")
    host.write("/mnt/cal/%s%d.scratch" % (SCRATCH_PREFIX, os.getpid()), "x")
    assert "already exists (a leftover" in refused(host, filesystem="/mnt/cal", scratch_size=MIB).message


def test_mountinfo_missing(host, space):
    host.mkdir("/mnt/cal")
    os.unlink(host.path("/proc/self/mountinfo"))
    assert "no mount in /proc/self/mountinfo holds /mnt/cal" in refused(host, filesystem="/mnt/cal",
                                                                        scratch_size=MIB).message


# -- replays of the lab recordings ------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(k for k, v in DEVICES["states"].items() if "commands" in v))
def test_lab_device_state_replay(tmp_path, monkeypatch, key):
    """The fake host set up like the guest in each recorded state gives the reasons the guest gave."""
    rec = DEVICES["states"][key]
    h = lab_host(tmp_path)
    disk = rec["disk"]
    parts = rec["partitions"]
    if parts:
        h.add_partitions(disk, len(parts), majmin_major=259 if disk.startswith("nvme") else None)
    for node, holders in sorted(rec["holders"].items()):
        for holder in holders:
            assert holder.startswith("dm-")
            h.add_dm(name="labdm", slaves=(node,), index=int(holder[3:]))
    fake_mm = {name: h.devices[name]["majmin"] for name in [disk] + parts}
    lines = []
    for line in rec["mountinfo"]:
        fields = line.split(" ")
        fields[2] = fake_mm[rec["majmins"][fields[2]]]
        lines.append(" ".join(fields))
    h.write("/proc/self/mountinfo", "\n".join([ROOT_LINE] + lines))
    h.write("/proc/swaps", rec["swaps"])
    for pid, info in rec["openers"].items():
        add_opener(h, int(pid), info["comm"], {int(fd): t for fd, t in info["fds"].items()})
    monkeypatch.setattr(ct, "probe_exclusive", lambda path: errno.EBUSY if rec["o_excl"] == "EBUSY" else None)
    run = FakeRunner({tuple(c["argv"]): (c["rc"], c["stdout"], c["stderr"]) for c in rec["commands"]})
    fs = KernelFS(h.root)
    params = {"device": rec["serial"], "destructive": True}
    if rec["lab_refused"] is None:
        t = plan_target(fs, DeviceResolver(fs), run, params)
        assert t.as_dict()["disk"]["name"] == rec["lab_ok"]["disk"]["name"]
        assert t.size_bytes == rec["lab_ok"]["size_bytes"]
    else:
        with pytest.raises(TargetRefused) as exc:
            plan_target(fs, DeviceResolver(fs), run, params)
        assert exc.value.reasons == rec["lab_refused"]
    with pytest.raises(TargetRefused) as exc:
        plan_target(fs, DeviceResolver(fs), run, dict(params, destructive=False))
    assert exc.value.reasons == rec["lab_refused_not_destructive"]


def test_lab_partition_selector_replay(host):
    rec = DEVICES["states"]["lab-virtio-data/partition-selector"]
    host.add_partitions("vdb", 1)
    e = refused(host, **rec["params"])
    assert e.reasons == rec["lab_refused"]


def test_lab_every_refusal_kind_was_recorded():
    """The recordings cover each reason the brief names, from the real kernel and util-linux."""
    seen = "\n".join("\n".join(v.get("lab_refused") or []) for v in DEVICES["states"].values())
    for words in ("has 1 partition", "has 2 partitions", "has a partition table (dos)", "carries an ext4 filesystem",
                  "carries a swap signature", "(LVM2_member)", "(linux_raid_member)", "is mounted on /mnt/lab data",
                  "is active swap", "is in use by device-mapper device", "fails with EBUSY",
                  "is held open by 1 process: pid", "(sleep)", "calibrate the whole disk"):
        assert words in seen, words
    for serial in ("lab-virtio-data", "lab-nvme-b"):
        assert DEVICES["states"][serial + "/blank"]["lab_refused"] is None
        assert len(DEVICES["states"][serial + "/everything"]["lab_refused"]) == 8


@pytest.mark.parametrize("name", sorted(FILESYSTEMS["cases"]))
def test_lab_filesystem_case_replay(tmp_path, monkeypatch, name):
    rec = FILESYSTEMS["cases"][name]
    h = lab_host(tmp_path)
    names = set(rec["majmins"].values())
    for p in sorted(n for n in names if re.match(r"^(nvme1n1p|vdb)\d+$", n)):
        disk = "nvme1n1" if p.startswith("nvme") else "vdb"
        h.add_partitions(disk, 1, majmin_major=259 if disk.startswith("nvme") else None)
    for dm, slaves in sorted(rec["slaves"].items()):
        h.add_dm(name=rec["dm_names"][dm], slaves=tuple(slaves), index=int(dm[3:]))
    mounts = []
    for line in rec["mountinfo"].splitlines():
        fields = line.split(" ")
        name_of = rec["majmins"].get(fields[2])
        if name_of is not None:
            fields[2] = h.devices[name_of]["majmin"]
        mounts.append(" ".join(fields))
        h.mkdir(parse_mountinfo(line)[0]["mount_point"])
    h.write("/proc/self/mountinfo", "\n".join(mounts))
    for d in ("/mnt/cal/data", "/root"):
        h.mkdir(d)
    sv = rec["statvfs"]
    monkeypatch.setattr(ct, "statvfs", lambda path: types.SimpleNamespace(**sv))
    fs = KernelFS(h.root)
    params = rec["params"]
    if rec["lab_refused"] is None:
        t = plan_target(fs, DeviceResolver(fs), FakeRunner(), params)
        ok = rec["lab_ok"]
        assert t.disk.name == ok["disk"]["name"]
        for k in ("kind", "size_bytes", "filesystem", "fstype", "mount_source", "free_bytes", "headroom_bytes"):
            assert getattr(t, k) == ok[k], k
        assert re.sub(r"-\d+\.scratch$", "", t.path) == re.sub(r"-\d+\.scratch$", "", ok["path"])
    else:
        with pytest.raises(TargetRefused) as exc:
            plan_target(fs, DeviceResolver(fs), FakeRunner(), params)
        assert exc.value.reasons == rec["lab_refused"]


def _multipath_lab_host(tmp_path):
    """The --multipath boot: the head nvme2n1 (259:1, subsystem 2, controllers 2 and 3, no multipath/ links)."""
    h = FakeHost(tmp_path, kernel="6.12.118+deb13-amd64")
    h.add_virtio(serial="lab-root", size_gb=3)
    h.add_nvme_multipath_head(subsys=2, ctrls=(2, 3), serial="lab-nvme-mp", model="QEMU NVMe Ctrl",
                              firmware="7.2.22", majmin="259:1", nguid=None, multipath_links=False)
    return h


def test_lab_multipath_head_raw_replay(tmp_path, free_disk):
    rec = MULTIPATH["head_raw_blank"]
    h = _multipath_lab_host(tmp_path)
    h.write("/proc/self/mountinfo", ROOT_LINE)
    run = FakeRunner({tuple(c["argv"]): (c["rc"], c["stdout"], c["stderr"]) for c in rec["commands"]})
    assert refused(h, run, **rec["params"]).reasons == rec["refused"]


def test_lab_multipath_head_filesystem_replay(tmp_path, space):
    rec = MULTIPATH["head_filesystem"]
    h = _multipath_lab_host(tmp_path)
    h.mkdir("/mnt/mp")
    h.write("/proc/self/mountinfo", "\n".join([ROOT_LINE] + rec["mountinfo"]))
    assert refused(h, **rec["params"]).reasons == rec["refused"]


def test_lab_loop_filesystem_replay(host, space):
    rec = MULTIPATH["loop_filesystem"]
    host.add_loop(backing_file="/root/loop.img", size_gb=0.25)
    host.mkdir("/mnt/loop")
    add_mount(host, rec["mountinfo"][0])
    assert refused(host, **rec["params"]).reasons == rec["refused"]


def test_lab_scratch_recording_shows_direct_io():
    s = FILESYSTEMS["scratch"]
    cs = s["create_scratch_256MiB_ext4_lab_nvme_b"]
    assert cs["direct_io"] is True and cs["st_size"] == 256 * MIB and cs["mode"] == "0o600"
    assert all(x["O_DIRECT_set"] for x in cs["fdinfo_during_write"])
    assert cs["page_cache_resident_bytes_after"] == 0
    assert s["buffered_dd_256MiB_for_comparison"]["page_cache_resident_bytes_after"] == 256 * MIB
    assert cs["unique_4k_blocks_in_first_16MiB"] == 4096 and cs["zlib_ratio_first_mib"] > 0.99
    assert s["create_scratch_enospc"]["errno"] == "ENOSPC" and s["create_scratch_enospc"]["left_behind"] is False
    assert s["remove_scratch_twice"] == [True, False] and s["leftovers_after_remove"] == []


def test_lab_claim_recording():
    c = _load("claim-debian13-6.12.json")["claim"]
    assert c["fio_randwrite"]["rc"] == 0 and c["fio_randwrite"]["summary"]["error"] == 0
    assert c["fio_randread"]["rc"] == 0 and c["fio_randread"]["summary"]["read_iops"] > 0
    assert c["syscalls_while_claimed"]["mount_syscall"]["errno"] == "EBUSY"
    assert c["syscalls_while_claimed"]["swapon_syscall"]["errno"] == "EBUSY"
    assert c["mkfs_while_claimed"]["rc"] != 0 and c["mount_after_release"]["rc"] == 0
    assert "EBUSY" in c["second_claim"][0]


# -- scratch files ------------------------------------------------------------------------------

def _target(tmp_path, size=4 * MIB, pid=4321):
    path = str(tmp_path / ("%s%d.scratch" % (SCRATCH_PREFIX, pid)))
    return Target("file", path, size, None, filesystem=str(tmp_path), directory=str(tmp_path))


def _drop_direct(monkeypatch, calls):
    def refuse(fd):
        calls.append(fd)
        raise OSError(errno.EINVAL, "Invalid argument")
    monkeypatch.setattr(ct, "enable_direct", refuse)


def test_create_scratch_fills_file(tmp_path, monkeypatch):
    seen = []
    t = _target(tmp_path, size=3 * MIB + 8192)
    # whatever the test machine's filesystem does with O_DIRECT, the result is the same file
    secs = create_scratch(t, chunk=MIB, progress=lambda w, total: seen.append((w, total)))
    st_ = os.stat(t.path)
    assert secs >= 0 and t.created is True and t.create_seconds == secs
    assert st_.st_size == 3 * MIB + 8192 and stat.S_IMODE(st_.st_mode) == 0o600
    assert seen == [(MIB, t.size_bytes), (2 * MIB, t.size_bytes), (3 * MIB, t.size_bytes),
                    (3 * MIB + 8192, t.size_bytes)]
    with open(t.path, "rb") as f:
        data = f.read()
    blocks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    assert len(set(blocks)) == len(blocks)          # every 4 KiB block unique (no dedup)
    import zlib
    assert len(zlib.compress(data[:MIB])) > 0.99 * MIB   # incompressible
    assert t.direct_io in (True, False)
    if not t.direct_io:
        assert "O_DIRECT" in t.direct_io_note


def test_create_scratch_uses_o_direct_when_accepted(tmp_path, monkeypatch):
    flags = []
    real_write = ct.write_chunk

    def spy(fd, view):
        import fcntl
        flags.append(bool(fcntl.fcntl(fd, fcntl.F_GETFL) & ct.O_DIRECT))
        return real_write(fd, view)
    monkeypatch.setattr(ct, "write_chunk", spy)
    t = _target(tmp_path, size=2 * MIB)
    try:
        create_scratch(t)
    except ScratchError:  # pragma: no cover - a test filesystem that rejects O_DIRECT writes with EINVAL
        pytest.skip("this filesystem does not take O_DIRECT writes")
    assert flags and all(f == t.direct_io for f in flags)
    assert (t.direct_io_note is None) == t.direct_io


def test_create_scratch_falls_back_when_fs_rejects_o_direct(tmp_path, monkeypatch):
    calls = []
    _drop_direct(monkeypatch, calls)
    t = _target(tmp_path, size=2 * MIB)
    create_scratch(t)
    assert calls and t.direct_io is False and t.created is True
    assert "rejected O_DIRECT (EINVAL" in t.direct_io_note
    assert os.path.getsize(t.path) == 2 * MIB


def test_create_scratch_falls_back_when_first_direct_write_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(ct, "enable_direct", lambda fd: True)
    real_write = ct.write_chunk
    state = {"n": 0}

    def write(fd, view):
        state["n"] += 1
        if state["n"] == 1:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, view)
    monkeypatch.setattr(ct, "write_chunk", write)
    monkeypatch.setattr(ct, "disable_direct", lambda fd: None)
    t = _target(tmp_path, size=2 * MIB)
    create_scratch(t)
    assert t.direct_io is False and "rejected the first direct write" in t.direct_io_note
    assert os.path.getsize(t.path) == 2 * MIB


def test_create_scratch_other_fcntl_error_cleans_up(tmp_path, monkeypatch):
    def fail(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(ct, "enable_direct", fail)
    t = _target(tmp_path)
    with pytest.raises(ScratchError) as exc:
        create_scratch(t)
    assert exc.value.errname == "EIO" and not os.path.exists(t.path) and t.created is False


def test_create_scratch_enospc_removes_partial_file(tmp_path, monkeypatch):
    real_write = ct.write_chunk
    state = {"n": 0}

    def write(fd, view):
        state["n"] += 1
        if state["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, view)
    monkeypatch.setattr(ct, "write_chunk", write)
    t = _target(tmp_path, size=8 * MIB)
    with pytest.raises(ScratchError) as exc:
        create_scratch(t)
    e = exc.value
    assert not os.path.exists(t.path) and t.created is False
    assert e.errname == "ENOSPC" and e.path == t.path
    assert e.message == ("Write scratch file %s failed: No space left on device (ENOSPC); the filesystem is full: free "
                         "space there or lower scratch_size" % t.path)
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC and str(e) == e.message
    assert e.as_dict() == {"path": t.path, "errno": "ENOSPC", "action": "write", "msg": e.message}


def test_create_scratch_interrupt_removes_partial_file(tmp_path):
    t = _target(tmp_path, size=4 * MIB)

    def progress(written, total):
        raise KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        create_scratch(t, progress=progress)
    assert not os.path.exists(t.path)


def test_create_scratch_is_exclusive(tmp_path):
    t = _target(tmp_path)
    with open(t.path, "w") as f:
        f.write("precious")
    with pytest.raises(ScratchError) as exc:
        create_scratch(t)
    assert exc.value.errname == "EEXIST" and "leftover of an earlier run" in exc.value.message
    with open(t.path) as f:
        assert f.read() == "precious"   # never truncated, never removed


def test_create_scratch_refuses_symlink(tmp_path):
    t = _target(tmp_path)
    os.symlink(str(tmp_path / "elsewhere"), t.path)
    with pytest.raises(ScratchError):
        create_scratch(t)
    assert not os.path.exists(str(tmp_path / "elsewhere"))


def test_create_scratch_bad_chunk(tmp_path):
    with pytest.raises(ValueError):
        create_scratch(_target(tmp_path), chunk=1000)


def test_remove_scratch_and_leftovers(tmp_path):
    t = _target(tmp_path, size=MIB)
    create_scratch(t)
    other = tmp_path / ("%s99.scratch" % SCRATCH_PREFIX)
    other.write_text("x")
    (tmp_path / ("%sabc.scratch" % SCRATCH_PREFIX)).write_text("not ours: no pid")
    (tmp_path / "unrelated.scratch").write_text("x")
    os.mkdir(str(tmp_path / ("%s5.scratch" % SCRATCH_PREFIX)))
    assert find_leftovers(str(tmp_path)) == sorted([t.path, str(other)])
    assert remove_scratch(t.path) is True
    assert remove_scratch(t.path) is False            # idempotent
    assert find_leftovers(str(tmp_path)) == [str(other)]
    assert find_leftovers(str(tmp_path / "missing")) == []


def test_remove_scratch_refuses_foreign_names(tmp_path):
    victim = tmp_path / "data.db"
    victim.write_text("x")
    with pytest.raises(ValueError):
        remove_scratch(str(victim))
    assert victim.exists()
    d = tmp_path / ("%s5.scratch" % SCRATCH_PREFIX)
    d.mkdir()
    with pytest.raises(ScratchError) as exc:
        remove_scratch(str(d))
    assert "not a regular file" in exc.value.message


def test_claim_is_noop_for_files(tmp_path):
    t = _target(tmp_path)
    with claim(t) as fd:
        assert fd is None
    p = tmp_path / "plain"
    p.write_text("x")
    with claim(str(p)) as fd:
        assert fd is None


def test_claim_missing_device(tmp_path):
    with pytest.raises(TargetRefused) as exc:
        with claim(str(tmp_path / "nope")):
            pass
    assert "cannot claim" in exc.value.message


def test_claim_block_device_holds_and_releases(monkeypatch):
    """claim() on a block device opens O_RDONLY|O_EXCL once and closes it at the end, even on error."""
    opened, closed = [], []
    monkeypatch.setattr(ct.os, "stat", lambda p: types.SimpleNamespace(st_mode=stat.S_IFBLK | 0o660))
    monkeypatch.setattr(ct.os, "open", lambda p, flags: opened.append((p, flags)) or 42)
    monkeypatch.setattr(ct.os, "close", closed.append)
    t = Target("device", "/dev/vdb", GIB, None)
    with pytest.raises(RuntimeError):
        with claim(t) as fd:
            assert fd == 42 and closed == []
            raise RuntimeError("fio failed")
    assert opened == [("/dev/vdb", os.O_RDONLY | os.O_EXCL | ct.O_CLOEXEC)] and closed == [42]


def test_claim_busy_device_is_refused(monkeypatch):
    def busy(p, flags):
        raise OSError(errno.EBUSY, "Device or resource busy")
    monkeypatch.setattr(ct.os, "stat", lambda p: types.SimpleNamespace(st_mode=stat.S_IFBLK | 0o660))
    monkeypatch.setattr(ct.os, "open", busy)
    with pytest.raises(TargetRefused) as exc:
        with claim("/dev/vdb"):
            pass
    assert exc.value.reasons == ["cannot claim /dev/vdb exclusively: Device or resource busy (EBUSY); something "
                                 "claimed it since it was checked (a mount, swapon, md/dm or a program with O_EXCL): "
                                 "free it and retry"]
