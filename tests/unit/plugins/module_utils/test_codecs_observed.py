# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_codecs against real kernel output (tests/observed/*.txt: Debian 6.1, 6.12, custom 6.1).

Each observed file is a transcript of ``$ command`` / output / ``[rc=N]`` blocks. Every read-back
of a file we have a codec for must parse; every write the kernel accepted must validate (except
the deliberate rejections listed below); every write the kernel refused with EINVAL/ERANGE (or
EACCES on a read-only file) must be refused by validate(); a read-back right after an accepted
write must match normalize(); and format() of every parsed state must give a string the kernel
accepted (the same as, or of the same shape as, an observed accepted write).

The transcripts are part of the repository (``tests/observed/``, provenance in its README.md).
A missing directory is a failure, not a skip.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs as c

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
OBSERVED = os.path.join(REPO, "tests", "observed")

# Writes the kernel accepts that validate() refuses on purpose: (codec name, written text) -> why.
DELIBERATE_REJECTS = {
    ("io.cost.model", "259:0 rbps=0"): "accepted by the kernel, but a zero coefficient is a meaningless model",
    ("io.cost.model", "259:0 rbps=1500000000"): "partial model: we always write all six coefficients",
    ("io.cost.model", "259:0 ctrl=user rbps=2000000000\n254:0 ctrl=user rbps=1000000000"): "partial model",
    ("io.cost.model", "259:0 ctrl=user rbps=2000000000\n253:0 ctrl=user rbps=1000000000"): "partial model",
    ("io.cost.qos", "259:0 min=60.5 max=140"): "partial user QoS: we always write the full parameter set",
    ("io.latency", "259:0 target=10ms"): "the kernel silently reads '10ms' as 10 µs",
}
# Refusals the codec cannot predict (depend on the device, not on the text).
DEVICE_DEPENDENT = {
    ("nr_requests", "100000"): "the maximum depends on the tag depth and the scheduler",
}
NOT_THE_CODECS_JOB = ("No such device",)        # ENODEV: device existence is checked elsewhere
REFUSED = ("Invalid argument", "Numerical result out of range", "Permission denied")

EXPECTED_KINDS = {"io.cost.model", "io.cost.qos", "io.max", "io.latency", "io.weight", "io.bfq.weight",
                  "io.stat", "io.pressure", "pressure", "memory.high", "memory.low", "memory.min",
                  "memory.max", "memory.swap.max", "scheduler", "cpu_list", "io.prio.class", "nr_requests",
                  "wbt_lat_usec", "sysctl"}
# only in the '-- name exists: value|' summary lines
EXPECTED_SUMMARY_KINDS = {"io.weight", "io.bfq.weight", "io.pressure", "io.prio.class", "memory.high", "memory.low",
                          "memory.min", "memory.max", "memory.swap.max", "memory.swap.high", "memory.zswap.max",
                          "memory.oom.group", "scheduler", "nr_requests", "wbt_lat_usec", "io_poll", "rotational",
                          "nomerges", "rq_affinity", "max_sectors_kb", "read_ahead_kb", "iostats", "add_random",
                          "write_cache"}

_RC = re.compile(r"\[rc=(\d+)\]$")
_ECHO = re.compile(r"^echo '(.*)' > (\S+)$", re.S)


class Block:
    def __init__(self, source, lineno, command, output, rc):
        self.source, self.lineno, self.command, self.output, self.rc = source, lineno, command, output, rc

    def where(self):
        return "%s:%d: $ %s" % (self.source, self.lineno, self.command)


def read_transcript(path):
    """(blocks, summary lines '-- ...', kernel release) of one observed file."""
    with open(path) as f:
        lines = f.read().splitlines()
    blocks, summaries, i = [], [], 0
    release = None
    header = re.search(r"\b(\d+\.\d+)\b", lines[0]) if lines else None
    while i < len(lines):
        line = lines[i]
        if line.startswith("-- "):
            summaries.append((i + 1, line))
        if not line.startswith("$ "):
            i += 1
            continue
        start, command = i + 1, line[2:]
        while command.count("'") % 2 and i + 1 < len(lines):      # quoted value spanning lines
            i += 1
            command += "\n" + lines[i]
        output, rc = [], None
        while rc is None and i + 1 < len(lines):
            i += 1
            m = _RC.search(lines[i])
            if m:
                rc = int(m.group(1))
                if lines[i][:m.start()]:
                    output.append(lines[i][:m.start()])
            else:
                output.append(lines[i])
        blocks.append(Block(os.path.basename(path), start, command, output, rc))
        if command == "uname -r" and rc == 0:
            release = output[0].strip()
        i += 1
    return blocks, summaries, release or (header.group(1) if header else None)


def transcripts():
    if not os.path.isdir(OBSERVED):
        pytest.fail("observed kernel outputs not found at %s: they are part of the repository "
                    "(tests/observed/*.txt); restore them with git" % OBSERVED)
    paths = sorted(glob.glob(os.path.join(OBSERVED, "*.txt")))
    if not paths:
        pytest.fail("no *.txt transcripts in %s" % OBSERVED)
    return [(p,) + read_transcript(p) for p in paths]


def cat_path(command):
    m = re.match(r"^cat (/\S+)$", command)
    return m.group(1) if m and "*" not in m.group(1) else None


def readbacks():
    """[(block, codec, text)] for every observed read of a file we have a codec for."""
    out = []
    for _path, blocks, _summaries, _release in transcripts():
        for b in blocks:
            if b.rc != 0:
                continue
            path = cat_path(b.command)
            if path and c.codec_for(path):
                out.append((b, c.codec_for(path), "\n".join(b.output)))
            if b.command.startswith("grep . "):
                for line in b.output:
                    file_path, _sep, value = line.partition(":")
                    if c.codec_for(file_path):
                        out.append((b, c.codec_for(file_path), value))
            if b.command.startswith("sysctl"):
                for line in b.output:
                    m = re.match(r"^([\w.]+) = (.*)$", line)
                    if m:
                        out.append((b, c.codec_for("/proc/sys/" + m.group(1).replace(".", "/")), m.group(2)))
    return out


def writes():
    """[(block, transcript release, codec, value, path, previous scheduler list)] for every echo."""
    out = []
    for _path, blocks, _summaries, release in transcripts():
        available = None
        for b in blocks:
            path = cat_path(b.command)
            if path and path.endswith("/scheduler") and b.rc == 0:
                available = c.SCHEDULER.parse("\n".join(b.output))["available"]
            m = _ECHO.match(b.command)
            if m and c.codec_for(m.group(2)):
                out.append((b, release, c.codec_for(m.group(2)), m.group(1), m.group(2), available))
    return out


def validate_write(codec, value, release, available):
    """validate() of a written string; a string parse_write() cannot read counts as refused."""
    try:
        desired = codec.parse_write(value)
    except c.CodecError as e:
        return e.errors
    if isinstance(codec, c.IoPrioClass):
        return codec.validate(desired, release)
    if isinstance(codec, c.Scheduler):
        return codec.validate(desired, available)
    return codec.validate(desired)


# --------------------------------------------------------------------------------------------

def test_observed_directory_present():
    found = transcripts()
    assert len(found) >= 4, [p for p, _b, _s, _r in found]
    assert all(release for _p, _b, _s, release in found)


def test_every_readback_parses():
    failures, kinds, lines = [], set(), 0
    for block, codec, text in readbacks():
        try:
            codec.parse(text)
        except c.CodecError as e:
            failures.append("%s -> %s" % (block.where(), e))
        kinds.add("sysctl" if isinstance(codec, c.MultiToken) and "." in codec.name else
                  "pressure" if isinstance(codec, c.Psi) and "." not in codec.name else codec.name)
        lines += max(1, len(text.splitlines()))
    assert not failures, "\n".join(failures)
    assert EXPECTED_KINDS <= kinds, "never saw: %s" % sorted(EXPECTED_KINDS - kinds)
    assert lines > 300


def test_summary_lines_parse():
    """'-- io.weight exists: default 100|' and '-- scheduler = [none] mq-deadline  (-rw-r--r--)'."""
    failures, parsed, kinds = [], 0, set()
    for _path, _blocks, summaries, _release in transcripts():
        for lineno, line in summaries:
            m = re.match(r"^-- (\S+) exists: (.*)$", line) or re.match(r"^-- (\S+) = (.*) \([-rwx]+\)$", line)
            codec = m and (c.CGROUP_FILES.get(m.group(1)) or c.QUEUE_ATTRIBUTES.get(m.group(1)) or
                           c.codec_for("/sys/fs/cgroup/x/" + m.group(1)))
            if not codec:
                continue
            text = "\n".join(m.group(2).split("|"))
            try:
                codec.parse(text)
                parsed += 1
                kinds.add(codec.name)
            except c.CodecError as e:
                failures.append("line %d %r -> %s" % (lineno, line, e))
    assert not failures, "\n".join(failures)
    assert EXPECTED_SUMMARY_KINDS <= kinds, "never saw: %s" % sorted(EXPECTED_SUMMARY_KINDS - kinds)
    assert parsed > 50


def test_observed_specifics():
    """Spot checks of shapes the kernel documentation does not show."""
    seen = [(codec, codec.parse(text)) for _b, codec, text in readbacks()]
    stat = [p for codec, p in seen if codec is c.IO_STAT and "7:7" in p]
    assert stat and all(p["7:7"] == {} for p in stat)                    # empty device lines (6.1)
    vrate = [p["259:0"]["cost.vrate"] for codec, p in seen if codec is c.IO_STAT
             and "cost.vrate" in p.get("259:0", {})]
    assert vrate and set(vrate) == {100.0}
    scheds = [p for codec, p in seen if codec is c.SCHEDULER]
    assert any(p["available"][-1] == "none" and p["current"] != "none" for p in scheds)   # 6.1: none last
    assert any(p["available"][0] == "none" and p["current"] == "mq-deadline" for p in scheds)   # 6.12: first
    cpus = [p for codec, p in seen if codec is c.CPU_LIST]
    assert sorted(set(tuple(p) for p in cpus)) == [(0,), (1,)]


def test_accepted_writes_validate_and_refused_writes_are_refused():
    failures, used, checked = [], set(), 0
    for b, release, codec, value, _path, available in writes():
        errors = validate_write(codec, value, release, available)
        key = (codec.name, value)
        checked += 1
        if b.rc == 0:
            if key in DELIBERATE_REJECTS:
                used.add(key)
                if not errors:
                    failures.append("%s: listed as a deliberate rejection but validate() accepts it" % b.where())
            elif errors:
                failures.append("%s: the kernel accepted it, validate() says %s" % (b.where(), errors))
            continue
        message = " ".join(b.output)
        if any(s in message for s in NOT_THE_CODECS_JOB) or key in DEVICE_DEPENDENT:
            used.add(key)
            continue
        assert any(s in message for s in REFUSED), b.where()
        if not errors:
            failures.append("%s: the kernel refused it (%s), validate() accepts it" % (b.where(), message))
    assert not failures, "\n".join(failures)
    stale = set(DELIBERATE_REJECTS) | set(DEVICE_DEPENDENT)
    stale -= used
    # each custom-6.1 / Debian variant of the two-device write appears in only some transcripts
    assert all("\n" in v for _n, v in stale), "listed but never observed: %s" % sorted(stale)
    assert checked > 150


def test_readback_after_accepted_write_matches_normalize():
    """What the kernel printed right after an accepted write equals what normalize() predicted."""
    failures, compared = [], 0
    for _path, blocks, _summaries, release in transcripts():
        for write, read in zip(blocks, blocks[1:]):
            m = _ECHO.match(write.command)
            if not m or write.rc != 0 or cat_path(read.command) != m.group(2) or read.rc != 0:
                continue
            codec = c.codec_for(m.group(2))
            if codec is None or (codec.name, m.group(1)) in DELIBERATE_REJECTS:
                continue
            want = codec.normalize(codec.parse_write(m.group(1)))
            have = codec.parse("\n".join(read.output))
            compared += 1
            if not codec.matches(want, have):
                failures.append("%s: normalize -> %r, kernel printed %r (diff %r)"
                                % (write.where(), want, have, codec.diff(want, have)))
    assert not failures, "\n".join(failures)
    assert compared > 60


def shape(codec, line):
    """Device-independent shape of a written line: the keys (and kinds of values) it carries."""
    desired = codec.parse_write(line)
    if isinstance(codec, c.IoWeight):
        return tuple(("default" if k == "default" else "dev", "default" if v == "default" else "N")
                     for k, v in desired.items())
    if isinstance(codec, c.KeyedDeviceCodec):
        return tuple(tuple(settings) for settings in desired.values())
    return "max" if codec.normalize(desired) == "max" else type(codec.normalize(desired)).__name__


def semantic(codec, line):
    """Device-independent meaning of a written line."""
    norm = codec.normalize(codec.parse_write(line))
    if isinstance(codec, c.IoWeight):
        return sorted(("default" if k == "default" else "dev", str(v)) for k, v in norm.items())
    if isinstance(codec, c.DeviceCodec):
        return [sorted(v.items()) for v in norm.values()]
    return norm


def tokens_of(codec, line):
    """{(key, normalised value)} of a written line, ignoring the device."""
    out = set()
    for dev, settings in codec.parse_write(line).items():
        for key, value in settings.items():
            try:
                norm = codec.normalize_device(dev, {key: value}).get(key, value)
            except c.CodecError:            # a partial set: compare the raw spelling's meaning
                norm = value
            out.add((key, str(norm)))
    return out


def test_format_of_every_parsed_state_is_an_accepted_write():
    """Each formatted line equals an accepted write (same meaning, any device), or is made only of
    key=value tokens the kernel accepted in some write, or has the key sequence of an accepted write."""
    accepted = {}
    for b, release, codec, value, _path, available in writes():
        if b.rc == 0:
            accepted.setdefault(codec.name, []).append(value)
    failures, exact, similar = [], 0, 0
    for block, codec, text in readbacks():
        if not codec.writable or codec.name not in accepted:
            continue
        parsed = codec.parse(text)
        desired = codec.as_desired(parsed)
        lines = codec.format(desired) if desired or not isinstance(codec, c.DeviceCodec) else []
        for line in lines:
            errors = codec.validate(codec.parse_write(line))
            if errors:
                failures.append("%s: format() gave %r which does not validate: %s" % (block.where(), line, errors))
                continue
            if any(semantic(codec, line) == semantic(codec, a) for a in accepted[codec.name]
                   if (codec.name, a) not in DELIBERATE_REJECTS):
                exact += 1
            elif any(shape(codec, line) == shape(codec, a) for a in accepted[codec.name]) or (
                    isinstance(codec, c.KeyedDeviceCodec) and
                    tokens_of(codec, line) <= set().union(*[tokens_of(codec, a) for a in accepted[codec.name]])):
                similar += 1
            else:
                failures.append("%s: format() gave %r, unlike any accepted write %r"
                                % (block.where(), line, accepted[codec.name]))
            # and the kernel's read-back of that write would match the parsed state
            dev_state = codec.normalize(codec.parse_write(line))
            if not codec.matches(dev_state, parsed):
                failures.append("%s: %r does not reproduce %r" % (block.where(), line, parsed))
    assert not failures, "\n".join(failures)
    assert exact > 50 and similar > 0, (exact, similar)
