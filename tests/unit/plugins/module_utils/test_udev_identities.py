# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile identities (issue 38): whatever a disk says of itself - its serial, its WWN, the NVMe serial and model the
kernel builds a wwid from - the udev rule the collection persists for it either matches exactly that disk and nothing
else, or is refused with a clear error before anything is written.

The identities are generated as bytes, read the way the collection reads them (a real KernelFS over a file holding
what sysfs prints, then the device readers), and the rules are judged by a model of udev's matching (udev(7), and
systemd's udev-rules.c): a match value is compared after ``%``/``$`` substitution, as shell globs (``*?[``) with
``|`` between alternatives, against the attribute with its trailing whitespace removed; a rule line ends at ``\\n``
and a line ending in ``\\`` continues on the next. The lab checks the same rules with ``udevadm test``
(tests/lab/udev_identities.sh).
"""

import fnmatch
import os
import re
import tempfile
import types

import pytest
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import BlockDevice, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import PersistError

EXAMPLES = 10000
ROOT = tempfile.mkdtemp(prefix="udev-identities-")
FS = KernelFS(ROOT)
ATTR = "/sys/block/vdb/serial"
READER = DeviceResolver.__new__(DeviceResolver)     # its attribute readers, over FS
READER.fs = FS
SPECIAL = set('"\\%$*?[|\n')


def sysfs_read(raw):
    """What the collection's reader makes of an attribute whose file holds ``raw`` (bytes, as the kernel prints
    them: the value then a newline)."""
    path = FS.path(ATTR)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(raw + b"\n")
    return READER._read_identity(ATTR)


def udev_sees(raw):
    """The attribute as udev compares it: the file's text without its trailing whitespace."""
    return (raw + b"\n").decode("utf-8", "surrogateescape").rstrip()


def udev_matches(value, attribute):
    """Does the match value ``value`` select a device whose attribute reads ``attribute``? Substitution first (a
    value with ``%`` or ``$`` matches whatever the substitution makes of it: any device, for this model), then each
    ``|`` alternative as a glob."""
    if "%" in value or "$" in value:
        return True
    return any(fnmatch.fnmatchcase(attribute, alt) for alt in value.split("|"))


def rule_value(rule, key):
    """The match value of ``key`` in a rule file's one rule line, the file's structure checked on the way: a comment
    line, then rule lines, none continued (no line ends in a backslash) and each key's value free of quotes."""
    lines = rule.split("\n")
    assert lines[-1] == "", "the file ends with a newline"
    body = [l for l in lines[:-1] if not l.startswith("#")]
    assert all(not l.endswith("\\") for l in lines[:-1]), "no line continues into the next"
    assert len(body) == 1 and body[0].startswith('ACTION=="add|change", '), rule
    m = re.search(r'%s=="([^"]*)"' % re.escape(key), body[0])
    assert m, body[0]
    return m.group(1)


def virtio(serial, model=None):
    return BlockDevice(name="vdb", kind="virtio", majmin="254:16", rotational=True, serial=serial, model=model,
                       stable_id="virtio-serial:%s" % serial, stable_id_source="serial")


def rules_for(record):
    """Both per-disk rule families the collection writes, for one record."""
    qos = {"enable": 1, "ctrl": "user", "rpct": 95.0, "rlat": 5000, "wpct": 95.0, "wlat": 5000, "min": 50.0,
           "max": 150.0}
    return [_iocost.udev_rule(record, None, qos),
            _blk_queue.udev_rule(record, [types.SimpleNamespace(attr="read_ahead_kb", order=1, rule_value=lambda: "128")])]


identities = st.one_of(
    st.binary(min_size=1, max_size=24),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=24).map(
        lambda t: t.encode()),
    st.text(min_size=1, max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
COUNT = {"rules": 0, "refused": 0}


@hsettings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=identities, other=identities)
@example(raw=b" lab-virtio-data", other=b"lab-virtio-data")     # the trimmed value matched the other disk only
@example(raw=b"lab-virtio-data\n", other=b"lab-virtio-data")
@example(raw=b"lab*", other=b"lab-virtio-data")
@example(raw=b"a|lab-virtio-data", other=b"lab-virtio-data")
@example(raw=b"x\\", other=b"y")
@example(raw=b'x" , RUN+="/bin/sh', other=b"x")
@example(raw=b"$kernel", other=b"vdb")
@example(raw=b"%k", other=b"vdb")
def test_a_virtio_serial_yields_a_rule_for_that_disk_alone_or_a_clear_refusal(raw, other):
    serial = sysfs_read(raw)
    if serial is None:
        return      # no serial at all: the disk is identified another way (by-path)
    record = virtio(serial, model=raw.decode("latin-1"))
    try:
        files = rules_for(record)
    except PersistError as e:
        COUNT["refused"] += 1
        assert "of vdb" in str(e) and "persist: false" in str(e), str(e)
        assert not os.path.exists(FS.path("/etc/udev")), "nothing written"
        return
    COUNT["rules"] += 1
    for text in files:
        value = rule_value(text, "ATTR{serial}")
        assert not SPECIAL & set(value) and value == value.strip(), value
        assert udev_matches(value, udev_sees(raw)), "the rule matches its own disk"
        if udev_matches(value, udev_sees(other)):
            assert udev_sees(other) == udev_sees(raw), "and no disk that reads otherwise"


def nvme_wwid(vid, serial, model, nsid):
    """The kernel's wwid for an NVMe namespace without EUI-64/NGUID/UUID (drivers/nvme/host/sysfs.c wwid_show):
    serial and model without their trailing spaces and NULs, in hex."""
    serial, model = serial.rstrip(b" \0"), model.rstrip(b" \0")
    return "nvme.%04x-%s-%s-%08x" % (vid, serial.hex(), model.hex(), nsid)


@hsettings(max_examples=EXAMPLES // 5, deadline=None, suppress_health_check=list(HealthCheck))
@given(vid=st.integers(0, 0xffff), serial=st.binary(max_size=20), model=st.binary(max_size=40),
       nsid=st.integers(1, 2 ** 32 - 1), other_serial=st.binary(max_size=20))
def test_an_nvme_namespace_is_always_matched_by_its_wwid_whatever_its_serial_and_model(vid, serial, model, nsid,
                                                                                       other_serial):
    wwid = nvme_wwid(vid, serial, model, nsid)
    read = sysfs_read(wwid.encode())
    record = BlockDevice(name="nvme0n1", kind="nvme", majmin="259:0", rotational=False, wwid=read,
                         model=model.decode("latin-1"), stable_id="wwn:" + read, stable_id_source="wwn")
    for text in rules_for(record):      # never refused: the kernel's hex leaves nothing hostile
        value = rule_value(text, "ATTRS{wwid}")
        assert value == wwid and udev_matches(value, wwid)
        neighbour = nvme_wwid(vid, other_serial, model, nsid)
        assert udev_matches(value, neighbour) == (neighbour == wwid)


def test_the_property_tests_saw_both_outcomes():
    """Counts of the virtio run (it runs first, in file order): a property test that only ever refused, or only ever
    wrote rules, would prove half of its claim."""
    print("hostile identities: %d rules checked, %d refused" % (COUNT["rules"], COUNT["refused"]))
    assert COUNT["rules"] >= 100 and COUNT["refused"] >= 100, COUNT


@pytest.mark.parametrize("model", ["evil\\", "two\nlines", "x\x00y", "caf\u00e9", "ok model"])
def test_a_hostile_model_stays_inside_the_comment(model):
    text = rules_for(virtio("lab-virtio-data", model=model))[0]
    first, rest = text.split("\n", 1)
    assert first.startswith("# ") and not first.endswith("\\") and rest.count("\n") == text.count("\n") - 1
    assert rule_value(text, "ATTR{serial}") == "lab-virtio-data"
