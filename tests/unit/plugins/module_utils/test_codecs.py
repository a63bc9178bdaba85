# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _codecs: hypothesis round-trips through a model of the kernel, and every
rejection named in the reference / observed kernel output.

The kernel's write parsers and read-back printers are re-implemented independently of the
codecs: blk-iocost.c by the simulated host's SimIocost (sim/iocost.py), blk-throttle.c,
blk-iolatency.c, mm/page_counter.c, ... by the ``Fake*`` classes below, so ``parse(kernel(format(d)))`` checks the codecs against kernel semantics, not against
themselves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import re

import pytest
from hypothesis import assume, example, given, settings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs as c
from sim.cgroup import format_list, parse_list
from sim.iocost import SSD_DFL, SimIocost
from sim.kernel import U32, U64, einval, split_device

S64 = 2 ** 63 - 1


def kernel_list(text):
    """What cpuset.cpus reads after ``text`` is written (the simulated kernel's parser and printer)."""
    return format_list(parse_list(text))


class FakeIoMax:
    def __init__(self):
        self.devs = {}

    def write(self, line):
        dev, body = split_device(line)
        v = list(self.devs.get(dev, [U64, U64, U32, U32]))
        for tok in body.split():
            key, _sep, val = tok.partition("=")
            m = re.match(r"^\d+", val)
            if val == "max":
                n = U64
            elif m:
                n = int(m.group(0))                # sscanf("%llu") ignores trailing junk
            else:
                raise einval("EINVAL")
            if n == 0:
                raise OSError(errno.ERANGE, "ERANGE")
            if key not in c.IO_MAX_KEYS or n <= 1:
                raise einval("EINVAL")
            idx = c.IO_MAX_KEYS.index(key)
            v[idx] = min(n, U32) if idx >= 2 else n
        self.devs[dev] = v

    def read(self):
        out = []
        for d, v in self.devs.items():
            if v == [U64, U64, U32, U32]:
                continue
            cells = ["max" if x == (U64 if i < 2 else U32) else str(x) for i, x in enumerate(v)]
            out.append("%s rbps=%s wbps=%s riops=%s wiops=%s\n" % tuple([d] + cells))
        return "".join(out)


class FakeIoLatency:
    def __init__(self):
        self.devs = {}

    def write(self, line):
        dev, body = split_device(line)
        key, _sep, val = body.strip().partition("=")
        if key != "target":
            raise einval("EINVAL")
        if val == "max":
            self.devs[dev] = 0
        else:
            m = re.match(r"^\d+", val)
            if not m:
                raise einval("EINVAL")
            self.devs[dev] = int(m.group(0)) * 1000 % 2 ** 64     # stored in ns
        if not self.devs[dev]:
            del self.devs[dev]

    def read(self):
        return "".join("%s target=%d\n" % (d, ns // 1000) for d, ns in self.devs.items())


class FakeIoWeight:
    def __init__(self, maximum, bfq=False):
        self.maximum, self.bfq = maximum, bfq
        self.default, self.devs = 100, {}

    def write(self, line):
        line = line.strip()
        if ":" not in line:
            m = re.match(r"^(?:default )?(\d+)$", line)
            if not m or not 1 <= int(m.group(1)) <= self.maximum:
                raise einval("EINVAL")
            self.default = int(m.group(1))
            if self.bfq:
                self.devs = {}
            return
        dev, body = split_device(line)
        if body.strip() == "default":
            self.devs.pop(dev, None)
        elif re.match(r"^\d+$", body.strip()) and 1 <= int(body) <= self.maximum:
            self.devs[dev] = int(body)
        else:
            raise einval("EINVAL")

    def read(self):
        return "default %d\n" % self.default + "".join("%s %d\n" % kv for kv in self.devs.items())


def fake_memory(line, page=4096):
    """page_counter_memparse + seq_puts_memcg_tunable."""
    line = line.strip()
    if line == "max":
        return "max\n"
    m = re.match(r"^(\d+)([KMGTPE]?)$", line, re.I)
    if not m:
        raise einval("EINVAL")
    shift = " KMGTPE".index(m.group(2).upper() or " ") * 10
    pages = min((int(m.group(1)) << shift) // page, S64 // page)
    return "max\n" if pages == S64 // page else "%d\n" % (pages * page)


def run(fake, lines):
    for line in lines:
        fake.write(line + "\n")
    return fake.read()


def assert_roundtrip(codec, desired, fake):
    """format -> kernel -> parse holds everything normalize() promises, and as_desired round-trips."""
    want = codec.normalize(desired)
    have = codec.parse(run(fake, codec.format(desired)))
    assert codec.diff(want, have) == []
    assert codec.matches(want, have)
    # the engine keeps normalised values and writes them: normalize is idempotent, format accepts it
    assert codec.normalize(want) == want
    assert codec.matches(want, codec.parse(run(fake, codec.format(want))))
    again = codec.parse(run(fake, codec.format(codec.as_desired(have))))
    assert again == have
    return want, have


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

devs = st.builds(lambda a, b: "%d:%d" % (a, b), st.integers(0, 4095), st.integers(0, 2 ** 20 - 1))


def as_int_or_str(strategy):
    return strategy.flatmap(lambda n: st.sampled_from([n, str(n)]))


def hundredths_repr(h):
    """Several spellings of a 2-decimal number: 95, '95', '95.5', '95.50', 95.5."""
    whole, frac = divmod(h, 100)
    forms = ["%d.%02d" % (whole, frac), h / 100.0]
    if frac % 10 == 0:
        forms.append("%d.%d" % (whole, frac // 10))
    if frac == 0:
        forms.extend([whole, str(whole), "%d.000" % whole])
    return st.sampled_from(forms)


coefs = st.fixed_dictionaries(dict((k, as_int_or_str(st.integers(1, U64))) for k in c.COST_COEFS))
cost_model_device = st.one_of(st.just({"ctrl": "auto"}), coefs,
                              coefs.map(lambda d: dict(d, ctrl="user", model="linear")))
pct = st.integers(0, 10000).flatmap(hundredths_repr)
vrate = st.integers(0, 2000000).flatmap(hundredths_repr)
lat = as_int_or_str(st.integers(0, U32))
enable = st.sampled_from([0, 1, 2, True, False, "0", "1", "7"])


@st.composite
def qos_device(draw):
    kind = draw(st.sampled_from(["user", "auto", "enable"]))
    out = {}
    if kind != "user" or draw(st.booleans()):
        out["enable"] = draw(enable)
    if kind == "auto":
        out["ctrl"] = "auto"
    elif kind == "user":
        lo, hi = sorted([draw(st.integers(0, 2000000)), draw(st.integers(0, 2000000))])
        out.update(rpct=draw(pct), rlat=draw(lat), wpct=draw(pct), wlat=draw(lat),
                   min=draw(hundredths_repr(lo)), max=draw(hundredths_repr(hi)))
        if draw(st.booleans()):
            out["ctrl"] = "user"
    return out


io_limit = st.one_of(st.just("max"), as_int_or_str(st.integers(2, U64)))
io_max_device = st.dictionaries(st.sampled_from(c.IO_MAX_KEYS), io_limit, min_size=1)
latency_device = st.fixed_dictionaries({"target": st.one_of(st.sampled_from(["max", 0, "0"]),
                                                            as_int_or_str(st.integers(1, U64 // 1000)))})


# --------------------------------------------------------------------------------------------
# Round-trips
# --------------------------------------------------------------------------------------------

@settings(deadline=None)
@given(st.dictionaries(devs, cost_model_device, min_size=1, max_size=3))
def test_cost_model_roundtrip(desired):
    want, have = assert_roundtrip(c.IO_COST_MODEL, desired, SimIocost(devices=None).file("io.cost.model"))
    for dev, w in want.items():
        if w["ctrl"] == "user":
            assert have[dev] == w              # the full user set is read back exactly


@settings(deadline=None)
@given(st.dictionaries(devs, qos_device(), min_size=1, max_size=3))
def test_cost_qos_roundtrip(desired):
    want, have = assert_roundtrip(c.IO_COST_QOS, desired, SimIocost(devices=None).file("io.cost.qos"))
    for dev, w in want.items():
        if w.get("ctrl") == "user":
            assert dict((k, have[dev][k]) for k in w) == w     # enable is only compared when managed
            assert len(w) >= 7


@settings(deadline=None)
@given(st.dictionaries(devs, io_max_device, min_size=1, max_size=3))
def test_io_max_roundtrip(desired):
    want, have = assert_roundtrip(c.IO_MAX, desired, FakeIoMax())
    for dev, w in want.items():
        full = c.IO_MAX.lookup(have, dev)
        assert dict((k, full[k]) for k in w) == w
        if len(w) == 4 and set(w.values()) == {"max"}:
            assert dev not in have             # all-max devices vanish from the read-back


@settings(deadline=None)
@given(st.dictionaries(devs, latency_device, min_size=1, max_size=3))
def test_io_latency_roundtrip(desired):
    want, have = assert_roundtrip(c.IO_LATENCY, desired, FakeIoLatency())
    for dev, w in want.items():
        assert c.IO_LATENCY.lookup(have, dev) == w


@pytest.mark.parametrize("codec,fake", [(c.IO_WEIGHT, lambda: FakeIoWeight(10000)),
                                        (c.IO_BFQ_WEIGHT, lambda: FakeIoWeight(1000, bfq=True))])
@settings(deadline=None)
@given(data=st.data())
def test_io_weight_roundtrip(codec, fake, data):
    weight = as_int_or_str(st.integers(1, codec.maximum))
    desired = data.draw(st.dictionaries(devs, st.one_of(weight, st.just("default")), max_size=3))
    if data.draw(st.booleans()) or not desired:
        desired["default"] = data.draw(weight)
    want, have = assert_roundtrip(codec, desired, fake())
    for key, w in want.items():
        assert codec.lookup(have, key) == w


SIZE_SUFFIXES = ["K", "k", "M", "G", "T", "KiB", "MiB", "GiB", "B", ""]
sizes = st.one_of(as_int_or_str(st.integers(0, U64)), st.sampled_from(["max", "infinity", " max "]),
                  st.tuples(st.integers(0, 2 ** 20), st.sampled_from(SIZE_SUFFIXES)).map(lambda t: "%d%s" % t))


@settings(deadline=None)
@given(sizes, st.sampled_from([4096, 16384, 65536]))
def test_memory_roundtrip(desired, page):
    codec = c.MemorySize("memory.high", page_size=page)
    assume(c.parse_size(desired) == "max" or c.parse_size(desired) <= U64)
    want = codec.normalize(desired)
    have = codec.parse(fake_memory(codec.format(desired)[0], page))
    assert want == have == codec.normalize(want)
    if want != "max":
        assert want % page == 0 and want <= c.parse_size(desired) < want + page


@settings(deadline=None)
@given(st.integers(-1, 100000))
def test_queue_int_roundtrips(value):
    nr = c.QUEUE_ATTRIBUTES["nr_requests"]
    if value >= 0:
        # kernel: values below BLKDEV_MIN_RQ (4) are raised to 4
        assert nr.normalize(value) == nr.parse("%d\n" % max(value, 4))
    wbt = c.QUEUE_ATTRIBUTES["wbt_lat_usec"]
    readback = wbt.parse("2000\n" if value == -1 else "%d\n" % value)   # -1 -> the default
    assert wbt.matches(wbt.normalize(value), readback)
    assert wbt.format(wbt.normalize(value)) == [str(value)]


@settings(deadline=None)
@given(st.one_of(st.just("max"), st.integers(1000, 2 ** 44 - 1)), st.one_of(st.none(), st.integers(1000, 1000000)))
def test_cpu_max_roundtrip(quota, period):
    desired = {"quota": quota} if period is None else {"quota": quota, "period": period}
    line = c.CPU_MAX.format(desired)[0]
    have = c.CPU_MAX.parse("%s %d\n" % (line.split()[0], period or 100000))
    assert c.CPU_MAX.matches(c.CPU_MAX.normalize(desired), have)
    assert c.CPU_MAX.normalize(line) == c.CPU_MAX.normalize(desired)
    assert c.CPU_MAX.as_desired(have) == have


@settings(deadline=None)
@given(st.sets(st.integers(0, 511), max_size=40))
def test_cpu_list_roundtrip(cpus):
    assert c.CPU_LIST.parse(c.CPU_LIST.format(cpus)[0]) == sorted(cpus)
    assert c.CPU_LIST.parse(c.CPU_LIST.format_ranges(cpus)) == sorted(cpus)


CPUSETS = [c.CPUSET_CPUS, c.CPUSET_MEMS]


@settings(deadline=None)
@given(st.sampled_from(CPUSETS), st.sets(st.integers(0, c.CPU_ID_MAX), max_size=60))
def test_cpuset_roundtrip_through_the_kernel_printer(codec, numbers):
    # sim.cgroup's bitmap_parselist/'%*pbl' is the kernel model: parse(kernel(format(x))) == x
    line = codec.format(sorted(numbers))[0]
    assert kernel_list(line) == line                     # the codec writes what the kernel prints back
    assert codec.parse(line + "\n") == sorted(numbers) == codec.normalize(sorted(numbers))
    assert codec.parse(line) == codec.normalize(line) == codec.normalize(list(numbers))
    assert codec.as_desired(codec.parse(line)) == sorted(numbers)


@settings(deadline=None)
@given(st.sampled_from(CPUSETS), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 8)), max_size=12),
       st.sampled_from([",", ", "]))
def test_cpuset_any_spelling_normalises_to_the_canonical_form(codec, runs, sep):
    # overlapping, unsorted ranges and single numbers: the kernel keeps the set and prints it canonical
    text = sep.join("%d-%d" % (a, a + n) if n else str(a) for a, n in runs)
    numbers = sorted(set(x for a, n in runs for x in range(a, a + n + 1)))
    assert codec.normalize(text) == numbers
    assert codec.format(text) == [format_list(numbers)]
    assert kernel_list(text.replace(" ", "")) == codec.format(text)[0]


@settings(deadline=None, max_examples=2000)
@example(c.CPUSET_CPUS, "0 1")        # two regions, as the kernel reads them: 0-1
@example(c.CPUSET_CPUS, "7000 0")     # not 70000
@given(st.sampled_from(CPUSETS), st.text(alphabet="0123456789-,:/ xa", min_size=1, max_size=12))
def test_cpuset_refuses_what_the_kernel_refuses(codec, text):
    """Garbage: the codec refuses exactly the spellings the kernel's parser refuses (strides aside: refused both)."""
    try:
        kernel = kernel_list(text)       # whitespace separates regions as commas do (bitmap_parselist)
    except ValueError:
        kernel = None
    problems = codec.validate(text)
    if kernel is None:
        assert problems and codec.name in problems[0]
    else:
        assert not problems and codec.format(text) == [kernel]


@pytest.mark.parametrize("value,words", [
    ("0-3:2/4", "not a number or a range"), ("3-1", "runs backwards; write it 1-3"), ("0-", "'0-'"),
    ("-1", "'-1'"), ([0, -1], "-1 is not a CPU number"), ([0, "x"], "'x'"), (True, "expected a CPU list"),
    ({"cpus": 1}, "expected a CPU list"), (None, "expected a CPU list"), ("0-70000", "beyond any CPU or node"),
    ([1.5], "1.5"),
])
def test_cpuset_refusals_name_the_value(value, words):
    problems = c.CPUSET_CPUS.validate(value)
    assert problems and problems[0].startswith("cpuset.cpus: ") and words in problems[0], problems


def test_cpuset_forms():
    assert c.CPUSET_CPUS.parse("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert c.CPUSET_CPUS.parse("\n") == [] and c.CPUSET_CPUS.format([]) == [""]
    assert c.CPUSET_CPUS.format([3, 2, 1, 0, 8, 11, 10]) == ["0-3,8,10-11"]
    assert c.CPUSET_CPUS.format(7) == ["7"] and c.CPUSET_CPUS.format(["0-1", 5]) == ["0-1,5"]
    assert c.CPUSET_CPUS.format("0,,1 2") == ["0-2"]            # bitmap_parselist skips runs of ',' and spaces
    assert c.CPUSET_CPUS.format([4, 5]) == ["4-5"]             # '%*pbl' writes a run of two as a range
    assert c.CPUSET_MEMS.validate("1 ") == [] and "node" in c.CPUSET_MEMS.validate("a")[0]
    assert c.codec_for("/sys/fs/cgroup/x.slice/cpuset.cpus.effective").parse("0-1") == [0, 1]
    with pytest.raises(c.CodecError, match="read-back 'x' is not a CPU list"):
        c.CPUSET_CPUS.parse("x")


@settings(deadline=None)
@given(st.lists(st.integers(0, 2 ** 31), min_size=1, max_size=4), st.lists(st.sampled_from([" ", "\t", "  "]), min_size=4, max_size=4))
def test_multitoken_roundtrip(values, seps):
    codec = c.MultiToken("net.ipv4.tcp_rmem")
    kernel_text = "".join("%d%s" % (v, seps[i]) for i, v in enumerate(values)) + "\n"
    assert codec.normalize(values) == codec.parse(kernel_text)
    assert codec.normalize(" ".join(str(v) for v in values)) == codec.parse(kernel_text)
    assert codec.format(values) == [codec.parse(kernel_text)]


@settings(deadline=None)
@given(st.sampled_from(["none", "mq-deadline", "kyber", "bfq", "deadline"]),
       st.permutations(["none", "mq-deadline", "kyber", "bfq"]), st.booleans())
def test_scheduler_roundtrip(name, order, trailing):
    current = c.SCHEDULER.format(name)[0]
    text = " ".join("[%s]" % n if n == current else n for n in order) + (" " if trailing else "") + "\n"
    have = c.SCHEDULER.parse(text)
    assert have["available"] == list(order)
    assert c.SCHEDULER.matches(c.SCHEDULER.normalize(name), have)
    assert c.SCHEDULER.as_desired(have) == current
    assert c.SCHEDULER.validate(name, available=have["available"]) == []


@settings(deadline=None)
@given(st.sampled_from(c.IO_PRIO_CLASSES), st.sampled_from(["5.15.0-1", "6.1.0-50-amd64", "6.5.0", "6.12.117+deb13-amd64"]))
def test_io_prio_class_roundtrip(name, release):
    mapped = c.IO_PRIO_CLASS.for_release(name, release)
    assert c.IO_PRIO_CLASS.validate(mapped, release) == []
    assert c.IO_PRIO_CLASS.parse(c.IO_PRIO_CLASS.format(mapped)[0] + "\n") == c.IO_PRIO_CLASS.normalize(mapped)


# --------------------------------------------------------------------------------------------
# Examples from the reference and the observed kernels
# --------------------------------------------------------------------------------------------

def test_cost_model_parse_observed_line():
    text = ("259:0 ctrl=auto model=linear rbps=488636629 rseqiops=8932 rrandiops=8518 wbps=427891549 "
            "wseqiops=28755 wrandiops=21940\n")
    parsed = c.IO_COST_MODEL.parse(text)
    assert parsed == {"259:0": dict(SSD_DFL, ctrl="auto", model="linear")}
    assert c.IO_COST_MODEL.as_desired(parsed) == {"259:0": {"ctrl": "auto"}}
    assert c.IO_COST_MODEL.format({"259:0": {"ctrl": "auto"}}) == ["259:0 ctrl=auto"]
    assert c.IO_COST_MODEL.matches(c.IO_COST_MODEL.normalize({"259:0": {"ctrl": "auto"}}), parsed)


def test_cost_model_format_is_full_set_in_kernel_order():
    desired = {(259, 0): {"wrandiops": 50000, "rbps": "2000000000", "rseqiops": 100000, "rrandiops": 100000,
                          "wbps": 1000000000, "wseqiops": 50000}}
    assert c.IO_COST_MODEL.format(desired) == [
        "259:0 ctrl=user model=linear rbps=2000000000 rseqiops=100000 rrandiops=100000 wbps=1000000000 "
        "wseqiops=50000 wrandiops=50000"]
    assert c.IO_COST_MODEL.format_device("259:0", desired[(259, 0)]) == c.IO_COST_MODEL.format(desired)[0]


def test_cost_qos_observed_examples():
    line = "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=60.50 max=140.00"
    parsed = c.IO_COST_QOS.parse(line)
    want = c.IO_COST_QOS.normalize({"259:0": {"enable": 2, "rpct": 95, "rlat": 5000, "wpct": "95", "wlat": "5000",
                                              "min": 60.5, "max": "140"}})
    assert want == parsed
    assert c.IO_COST_QOS.format(c.IO_COST_QOS.as_desired(parsed)) == [line]
    auto = c.IO_COST_QOS.parse("259:0 enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00")
    assert c.IO_COST_QOS.as_desired(auto) == {"259:0": {"enable": 1, "ctrl": "auto"}}
    assert c.IO_COST_QOS.format({"259:0": {"enable": True, "ctrl": "auto"}}) == ["259:0 enable=1 ctrl=auto"]
    assert c.IO_COST_QOS.format({"259:0": {"enable": 0}}) == ["259:0 enable=0"]
    assert c.IO_COST_QOS.normalize_device("259:0", {"enable": "7"}) == {"enable": 1}


def test_cost_qos_min_max_clamp():
    desired = {"259:0": {"rpct": 0, "rlat": 1, "wpct": 100, "wlat": U32, "min": 0, "max": 20000}}
    norm = c.IO_COST_QOS.normalize(desired)["259:0"]
    assert (norm["min"], norm["max"], norm["wpct"]) == ("1.00", "10000.00", "100.00")
    # the raw value is written; the kernel clamps it
    assert c.IO_COST_QOS.format(desired) == ["259:0 ctrl=user rpct=0.00 rlat=1 wpct=100.00 wlat=4294967295 "
                                             "min=0.00 max=20000.00"]
    # 0.5 and 0.9 both clamp to 1.00, so min == max after clamping is fine
    assert c.IO_COST_QOS.validate({"259:0": dict(desired["259:0"], min="0.9", max="0.5")}) == []


def test_io_max_observed_and_caps():
    parsed = c.IO_MAX.parse("\n259:0 rbps=104857600 wbps=max riops=1000 wiops=max\n\n254:0 rbps=2 wbps=max riops=max wiops=max\n")
    assert parsed.pop("254:0") == {"rbps": 2, "wbps": "max", "riops": "max", "wiops": "max"}
    assert parsed == {"259:0": {"rbps": 104857600, "wbps": "max", "riops": 1000, "wiops": "max"}}
    assert c.IO_MAX.lookup({}, "259:0") == dict((k, "max") for k in c.IO_MAX_KEYS)
    assert c.IO_MAX.format({"259:0": {"riops": 1000, "rbps": 104857600}}) == ["259:0 rbps=104857600 riops=1000"]
    assert c.IO_MAX.normalize({"259:0": {"riops": U32 + 5, "wiops": U32 - 1, "rbps": U64}}) == {
        "259:0": {"riops": "max", "wiops": U32 - 1, "rbps": "max"}}
    clear = dict((k, "max") for k in c.IO_MAX_KEYS)
    assert c.IO_MAX.format({"259:0": clear}) == ["259:0 rbps=max wbps=max riops=max wiops=max"]
    assert c.IO_MAX.matches(c.IO_MAX.normalize({"259:0": clear}), {})
    assert not c.IO_MAX.matches(c.IO_MAX.normalize({"259:0": clear}), parsed)
    assert c.IO_MAX.diff({"259:0": {"riops": 500}}, parsed) == [("259:0.riops", 500, 1000)]


def test_io_latency_examples():
    assert c.IO_LATENCY.parse("259:0 target=10000\n") == {"259:0": {"target": 10000}}
    assert c.IO_LATENCY.format({"259:0": {"target": 0}}) == ["259:0 target=max"]
    assert c.IO_LATENCY.normalize({"259:0": {"target": "max"}}) == {"259:0": {"target": "max"}}
    assert c.IO_LATENCY.matches({"259:0": {"target": "max"}}, c.IO_LATENCY.parse(""))


def test_io_weight_examples():
    parsed = c.IO_WEIGHT.parse("default 300\n\n259:0 200\n")
    assert parsed == {"default": 300, "259:0": 200}
    assert c.IO_WEIGHT.format({"259:0": "default", "default": 300}) == ["default 300", "259:0 default"]
    assert c.IO_WEIGHT.lookup(parsed, "254:0") == "default"
    assert c.IO_WEIGHT.lookup({}, "default") == 100
    assert c.IO_WEIGHT.parse_write("300\n\n259:0 default") == {"default": "300", "259:0": "default"}
    assert c.IO_WEIGHT.format_device("259:0", 400) == "259:0 400"
    assert c.IO_BFQ_WEIGHT.default_resets_overrides and not c.IO_WEIGHT.default_resets_overrides
    assert c.IO_WEIGHT.diff({"default": 300, "259:0": "default"}, parsed) == [("259:0", "default", 200)]


def test_io_stat_keeps_unknown_keys_and_empty_lines():
    text = ("7:7 \n7:6 \n259:0 rbytes=22663168 wbytes=0 rios=5107 wios=0 dbytes=0 dios=0 cost.vrate=100.00 "
            "cost.usage=50080 depth=max avg_lat=-1\n")
    parsed = c.IO_STAT.parse(text)
    assert parsed["7:7"] == {} and parsed["7:6"] == {}
    assert parsed["259:0"]["cost.vrate"] == 100.0 and parsed["259:0"]["cost.usage"] == 50080
    assert parsed["259:0"]["depth"] == "max" and parsed["259:0"]["avg_lat"] == -1
    assert c.IO_STAT.validate({"259:0": {}})[0].startswith("io.stat: read-only")


def test_psi():
    text = "some avg10=1.46 avg60=6.86 avg300=5.27 total=22518284\n\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    assert c.PRESSURE.parse(text) == {"some": {"avg10": 1.46, "avg60": 6.86, "avg300": 5.27, "total": 22518284},
                                      "full": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0}}
    assert c.PRESSURE.parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") == {
        "some": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0}}      # cpu on older kernels
    with pytest.raises(c.CodecError, match="pressure"):
        c.PRESSURE.parse("")
    with pytest.raises(c.CodecError, match="some|full"):
        c.PRESSURE.parse("partial avg10=1")
    with pytest.raises(c.CodecError):
        c.PRESSURE.parse("some avg10")


def test_memory_examples():
    mem = c.MEMORY["memory.max"]
    assert mem.normalize(1000) == 0                  # observed: 1000 reads back 0
    assert mem.format(1000) == ["1000"]              # written unfloored: the kernel floors itself
    assert mem.normalize("512M") == 536870912 == mem.parse("536870912\n")
    assert mem.normalize("1G") == mem.normalize("1GiB") == mem.normalize("1024M") == 1073741824
    assert mem.normalize("infinity") == mem.normalize("max") == mem.parse("max") == "max"
    assert mem.normalize(2 ** 63) == "max"           # >= PAGE_COUNTER_MAX pages prints as max
    assert mem.normalize(12288, page_size=65536) == 0
    assert mem.normalize("1.5G") == 1610612736
    assert mem.normalize("512B") == 512 - 512 % 4096
    assert c.parse_size(4096) == 4096


def test_scheduler_examples():
    assert c.SCHEDULER.parse("[none] mq-deadline kyber bfq \n") == {
        "current": "none", "available": ["none", "mq-deadline", "kyber", "bfq"]}
    assert c.SCHEDULER.parse("[mq-deadline] none")["current"] == "mq-deadline"
    assert c.SCHEDULER.parse("none [mq-deadline] ")["current"] == "mq-deadline"
    assert c.SCHEDULER.parse("none\n") == {"current": "none", "available": ["none"]}
    assert c.SCHEDULER.normalize("deadline") == "mq-deadline"
    assert c.SCHEDULER.diff("bfq", {"current": "none"}) == [("scheduler", "bfq", "none")]


def test_cpu_list_examples():
    assert c.CPU_LIST.parse("0, 1, 2\n") == [0, 1, 2]
    assert c.CPU_LIST.parse("0-3,8") == [0, 1, 2, 3, 8]
    assert c.CPU_LIST.parse("") == []
    assert c.CPU_LIST.format([2, 0, 1, 1]) == ["0, 1, 2"]
    assert c.CPU_LIST.format_ranges([]) == "" and c.CPU_LIST.format_ranges([5]) == "5"
    assert "read-only" in c.CPU_LIST.validate([0])[0] and "nvme" in c.CPU_LIST.validate([0])[0]


def test_io_prio_class_release_mapping():
    assert c.IO_PRIO_CLASS.for_release("promote-to-rt", "6.1.0-50-amd64") == "none-to-rt"
    assert c.IO_PRIO_CLASS.for_release("none-to-rt", "6.12.117+deb13-amd64") == "promote-to-rt"
    assert c.IO_PRIO_CLASS.for_release("idle", "6.1.192-vmlab") == "idle"
    assert c.IO_PRIO_CLASS.validate("none-to-rt", "6.12.117+deb13-amd64") == []   # deprecated but accepted
    assert "5.14" in c.IO_PRIO_CLASS.validate("idle", "5.10.0-30-amd64")[0]
    assert c.IO_PRIO_CLASS.parse("restrict-to-be\n") == "restrict-to-be"
    assert c.kernel_version("6.12.117+deb13-amd64") == (6, 12, 117)
    assert c.kernel_version("6.1") == (6, 1, 0)


def test_single_values():
    weight = c.CGROUP_FILES["cpu.weight"]
    assert weight.normalize("100") == 100 and weight.format(100) == ["100"]
    oom = c.CGROUP_FILES["memory.oom.group"]
    assert oom.normalize(True) == 1 and oom.format(False) == ["0"] and oom.parse("0\n") == 0
    pids = c.CGROUP_FILES["pids.max"]
    assert pids.normalize("max") == "max" and pids.parse("max\n") == "max"
    nice = c.CGROUP_FILES["cpu.weight.nice"]
    assert nice.normalize("-20") == -20
    wbt = c.QUEUE_ATTRIBUTES["wbt_lat_usec"]
    assert wbt.normalize(-1) is None and wbt.format(None) == ["-1"] and wbt.matches(None, 2000)
    assert c.QUEUE_ATTRIBUTES["nr_requests"].normalize(1) == 4
    assert c.QUEUE_ATTRIBUTES["write_cache"].normalize("write  back") == "write back"
    assert c.CPU_MAX.parse("max 100000\n") == {"quota": "max", "period": 100000}
    assert c.CPU_MAX.format("50000 100000") == ["50000 100000"]
    assert c.CPU_MAX.format({"quota": "max"}) == ["max"]


def test_helpers():
    assert c.parse_majmin("259:0") == (259, 0) and c.parse_majmin((8, 16)) == (8, 16)
    assert c.format_majmin("259:00") == "259:0"
    assert c.tokens("4096\t87380  6291456\n") == "4096 87380 6291456" == c.tokens([4096, 87380, 6291456])
    assert c.parse_rate("2GB") == 2000000000 and c.parse_rate("2GiB") == 2147483648
    assert c.parse_rate("500MB/s") == 500000000 and c.parse_rate(1048576) == 1048576
    assert c.parse_rate("100") == 100 and c.parse_rate("1.5kB") == 1500
    assert c.parse_rate(b"1KiB") == 1024
    err = c.CodecError("one")
    assert err.errors == ["one"] and str(err) == "one"
    assert str(c.CodecError(["a", "b"])) == "a; b"


@pytest.mark.parametrize("path,name", [
    ("/sys/fs/cgroup/io.cost.model", "io.cost.model"), ("/sys/fs/cgroup/x/io.bfq.weight", "io.bfq.weight"),
    ("/sys/fs/cgroup/x/memory.swap.max", "memory.swap.max"), ("/proc/pressure/cpu", "cpu"),
    ("/sys/fs/cgroup/x/io.pressure", "io.pressure"), ("/sys/block/nvme0n1/queue/scheduler", "scheduler"),
    ("/sys/block/nvme0n1/queue/nr_requests", "nr_requests"), ("/sys/block/nvme0n1/mq/0/cpu_list", "cpu_list"),
    ("/proc/sys/vm/swappiness", "vm.swappiness"), ("io.max", "io.max"),
])
def test_codec_for(path, name):
    assert c.codec_for(path).name == name


def test_codec_for_unknown():
    assert c.codec_for("/sys/fs/cgroup/cgroup.pressure") is None
    assert c.codec_for("/sys/block/nvme0n1/queue/zoned") is None


# --------------------------------------------------------------------------------------------
# Rejections: every message names the file, the key/value and the fix
# --------------------------------------------------------------------------------------------

REJECT = [
    # io.cost.model
    (c.IO_COST_MODEL, {"259:0": {"ctrl": "user", "model": "linear", "riops": 1000}},
     ["io.cost.model", "'riops'", "'rrandiops'", "'rseqiops'"]),
    (c.IO_COST_MODEL, {"259:0": {"wiops": 1}}, ["'wrandiops'", "'wseqiops'"]),
    (c.IO_COST_MODEL, {"259:0": {"rbpz": 1}}, ["'rbpz'", "did you mean 'rbps'"]),
    (c.IO_COST_MODEL, {"259:0": {"foo": 1}}, ["'foo'", "valid keys: ctrl, model, rbps"]),
    (c.IO_COST_MODEL, {"259:0": dict(SSD_DFL, rbps=0)}, ["rbps=0", "meaningless", "ctrl=auto"]),
    (c.IO_COST_MODEL, {"259:0": dict(SSD_DFL, rbps="1G")}, ["rbps=1G", "digits only"]),
    (c.IO_COST_MODEL, {"259:0": dict(SSD_DFL, rbps="abc")}, ["rbps=abc", "not a plain integer"]),
    (c.IO_COST_MODEL, {"259:0": dict(SSD_DFL, rbps=U64 + 1)}, ["rbps=", "out of range"]),
    (c.IO_COST_MODEL, {"259:0": dict(SSD_DFL, rbps=1.5)}, ["rbps=1.5", "not an integer"]),
    (c.IO_COST_MODEL, {"259:0": {"model": "quadratic"}}, ["model=quadratic", "linear"]),
    (c.IO_COST_MODEL, {"259:0": {"model": "linear"}}, ["nothing to set", "ctrl=auto"]),
    (c.IO_COST_MODEL, {"259:0": {"rbps": 1500000000}}, ["needs all six", "missing rseqiops"]),
    (c.IO_COST_MODEL, {"259:0": {"ctrl": "user"}}, ["needs all six"]),
    (c.IO_COST_MODEL, {"259:0": {"ctrl": "auto", "rbps": 5}}, ["ctrl=auto", "drop rbps"]),
    (c.IO_COST_MODEL, {"259:0": {"ctrl": "manual"}}, ["ctrl=manual", "auto, user"]),
    (c.IO_COST_MODEL, {"nvme0n1": {"ctrl": "auto"}}, ["'nvme0n1'", "MAJ:MIN", "lsblk"]),
    (c.IO_COST_MODEL, {"259:0": "auto"}, ["expected a mapping"]),
    (c.IO_COST_MODEL, ["259:0 ctrl=auto"], ["expected a mapping of MAJ:MIN"]),
    (c.IO_COST_MODEL, {"259:0": {"ctrl": "auto"}, "259:00": {"ctrl": "auto"}}, ["259:0 is given twice"]),
    (c.IO_COST_MODEL, {"4096:0": {"ctrl": "auto"}}, ["4096", "out of range"]),
    # io.cost.qos
    (c.IO_COST_QOS, {"259:0": {"rpct": 101}}, ["rpct=101", "0..100"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": "95.555", "rlat": 1, "wpct": 1, "wlat": 1, "min": 1, "max": 1}},
     ["rpct=95.555", "more than 2 decimals", "round it to 95.56"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": "-1"}}, ["rpct=-1", "negative"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": "95%"}}, ["rpct=95%", "decimal number"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": None}}, ["rpct=None", "not a number"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": True}}, ["not a number"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": [1]}}, ["not a number"]),
    (c.IO_COST_QOS, {"259:0": {"min": 200, "max": 100}}, ["min=200.00 is above max=100.00", "lower min"]),
    (c.IO_COST_QOS, {"259:0": {"min": "-5", "max": 100}}, ["min=-5", "negative"]),
    (c.IO_COST_QOS, {"259:0": {"foo": 1}}, ["unknown key 'foo'", "valid keys: enable"]),
    (c.IO_COST_QOS, {"259:0": {"enabled": 1}}, ["'enabled'", "did you mean 'enable'"]),
    (c.IO_COST_QOS, {"259:0": {"enable": -1}}, ["enable=-1", "negative"]),
    (c.IO_COST_QOS, {"259:0": {"rlat": "5ms", "rpct": 1, "wpct": 1, "wlat": 1, "min": 1, "max": 1}},
     ["rlat=5ms", "microseconds (5 ms = 5000)"]),
    (c.IO_COST_QOS, {"259:0": {"rlat": U32 + 1, "rpct": 1, "wpct": 1, "wlat": 1, "min": 1, "max": 1}},
     ["rlat=4294967296", "out of range"]),
    (c.IO_COST_QOS, {"259:0": {"ctrl": "auto", "rpct": 95}}, ["ctrl=auto", "drop rpct"]),
    (c.IO_COST_QOS, {"259:0": {"ctrl": "user"}}, ["ctrl=user needs the full parameter set"]),
    (c.IO_COST_QOS, {"259:0": {}}, ["nothing to set"]),
    (c.IO_COST_QOS, {"259:0": {"rpct": 101, "min": 200, "max": 100, "foo": 1}},
     ["rpct=101", "'foo'", "missing rlat, wpct, wlat", "min=200.00 is above"]),
    # io.max
    (c.IO_MAX, {"259:0": {"rbps": 0}}, ["io.max", "rbps=0", "ERANGE", "use max to clear"]),
    (c.IO_MAX, {"259:0": {"wiops": "0"}}, ["wiops=0", "use max to clear"]),
    (c.IO_MAX, {"259:0": {"rbps": 1}}, ["rbps=1", "EINVAL"]),
    (c.IO_MAX, {"259:0": {"rbps": "1M"}}, ["rbps=1M", "suffixes", "10485760"]),
    (c.IO_MAX, {"259:0": {"rbps": "abc"}}, ["rbps=abc", "'max' for unlimited"]),
    (c.IO_MAX, {"259:0": {"foo": 1}}, ["unknown key 'foo'"]),
    (c.IO_MAX, {"259:0": {"wbps": "-5"}}, ["wbps=-5", "'-5' is negative"]),
    (c.IO_MAX, {"259:0": {"rrandiops": 5}}, ["'rrandiops'", "'riops'"]),
    (c.IO_MAX, {"259:0": {}}, ["nothing to set", "max clears"]),
    # io.latency
    (c.IO_LATENCY, {"259:0": {"target": "10ms"}}, ["io.latency", "target=10ms", "10 µs", "target=10000"]),
    (c.IO_LATENCY, {"259:0": {"target": "2s"}}, ["target=2000000"]),
    (c.IO_LATENCY, {"259:0": {"target": "5min"}}, ["unit suffixes", "e.g. target=10000"]),
    (c.IO_LATENCY, {"259:0": {"target": "abc"}}, ["target=abc", "not a plain integer"]),
    (c.IO_LATENCY, {"259:0": {"foo": 1}}, ["unknown key 'foo'"]),
    (c.IO_LATENCY, {"259:0": {"latency": 1}}, ["'latency'", "the key is 'target'"]),
    (c.IO_LATENCY, {"259:0": {}}, ["target is required"]),
    # io.weight / io.bfq.weight
    (c.IO_WEIGHT, {"259:0": 0}, ["io.weight", "259:0 0", "1..10000", "EINVAL", "'default' to drop"]),
    (c.IO_WEIGHT, {"259:0": 10001}, ["259:0 10001", "1..10000"]),
    (c.IO_WEIGHT, {"default": 0}, ["default 0", "1..10000"]),
    (c.IO_WEIGHT, {"default": "default"}, ["default default", "not a plain integer"]),
    (c.IO_WEIGHT, {"259:0": "abc"}, ["259:0 abc", "not a plain integer"]),
    (c.IO_WEIGHT, {"259:0": "io.weight 8000"}, ["'io.weight 8000'"]),
    (c.IO_BFQ_WEIGHT, {"259:0": 1001}, ["io.bfq.weight", "1..1000", "ERANGE"]),
    (c.IO_BFQ_WEIGHT, {"default": 1001}, ["default 1001", "1..1000"]),
    # memory
    (c.MEMORY["memory.high"], "-1", ["memory.high", "'-1' is negative", "'max'"]),
    (c.MEMORY["memory.low"], "10%", ["memory.low", "'10%' is a percentage", "bytes"]),
    (c.MEMORY["memory.min"], "512MB", ["ambiguous", "512MiB", "536870912"]),
    (c.MEMORY["memory.max"], "12 apples", ["unknown unit"]),
    (c.MEMORY["memory.max"], "lots", ["not a size"]),
    (c.MEMORY["memory.max"], "1.5K1", ["not a size"]),
    (c.MEMORY["memory.max"], "0.5", ["whole number of bytes"]),
    (c.MEMORY["memory.max"], "20E", ["64-bit limit", "'max'"]),
    (c.MEMORY["memory.max"], -1, ["-1 is negative"]),
    (c.MEMORY["memory.max"], None, ["not an integer"]),
    (c.MEMORY["memory.swap.max"], 1.5, ["not an integer"]),
    # single values
    (c.CGROUP_FILES["cpu.weight"], 0, ["cpu.weight", "out of range 1..10000"]),
    (c.CGROUP_FILES["memory.oom.group"], 2, ["memory.oom.group", "0..1"]),
    (c.CGROUP_FILES["cpu.weight"], "max", ["not a plain integer"]),
    (c.CGROUP_FILES["cpu.weight"], {}, ["not an integer"]),
    (c.QUEUE_ATTRIBUTES["nr_requests"], -1, ["negative"]),
    (c.QUEUE_ATTRIBUTES["wbt_lat_usec"], "abc", ["wbt_lat_usec", "not a plain integer"]),
    (c.QUEUE_ATTRIBUTES["wbt_lat_usec"], -2, ["out of range -1.."]),
    (c.QUEUE_ATTRIBUTES["io_poll"], 1, ["io_poll", "read-only", "poll_queues"]),
    (c.QUEUE_ATTRIBUTES["write_cache"], "write maybe", ["write back, write through"]),
    (c.CGROUP_FILES["cpu.max"], "max 10", ["period", "1000..1000000"]),
    (c.CGROUP_FILES["cpu.max"], "10 100000", ["quota", "at least 1000"]),
    (c.CGROUP_FILES["cpu.max"], {"period": 100000}, ["expected {'quota'"]),
    (c.SCHEDULER, "foo bar", ["not a scheduler name"]),
    (c.SCHEDULER, None, ["not a scheduler name"]),
    (c.IO_PRIO_CLASS, "rt", ["io.prio.class", "'rt' is not a policy", "promote-to-rt"]),
    (c.IO_PRIO_CLASS, 1, ["1 is not a policy"]),
    (c.MultiToken("kernel.foo"), "", ["kernel.foo", "not a value"]),
    (c.MultiToken("kernel.foo"), None, ["not a value"]),
    (c.MultiToken("kernel.foo"), "a\nb", ["several lines"]),
]


@pytest.mark.parametrize("codec,desired,needles", REJECT)
def test_rejections(codec, desired, needles):
    errors = codec.validate(desired)
    assert errors, desired
    text = " | ".join(errors)
    assert all(e.startswith(codec.name + ": ") for e in errors), errors
    for needle in needles:
        assert needle in text, (needle, errors)
    with pytest.raises(c.CodecError) as info:
        codec.format(desired)
    assert info.value.errors == errors
    with pytest.raises(c.CodecError):
        codec.normalize(desired)


def test_scheduler_available_and_prio_release():
    assert c.SCHEDULER.validate("bfq", available=["none", "mq-deadline"]) == []   # the kernel loads bfq
    errors = c.SCHEDULER.validate("foo", available=["none", "mq-deadline"])
    assert "'foo'" in errors[0] and "listed: none, mq-deadline" in errors[0] and "modprobe" in errors[0]
    assert c.SCHEDULER.validate("adios", available=["none", "adios"]) == []
    assert "mainline" in c.SCHEDULER.validate("adios")[0]
    errors = c.IO_PRIO_CLASS.validate("promote-to-rt", "6.1.0-50-amd64")
    assert "6.5+" in errors[0] and "'none-to-rt'" in errors[0]


@pytest.mark.parametrize("call,needle", [
    (lambda: c.parse_majmin("nvme0n1"), "lsblk"),
    (lambda: c.parse_majmin(("a", 1)), "expected MAJ:MIN"),
    (lambda: c.parse_majmin(259), "expected MAJ:MIN"),
    (lambda: c.kernel_version("linux"), "6.1.0-50-amd64"),
    (lambda: c.parse_rate("2G"), "2GB for 2000000000 (base 1000) or 2GiB for 2147483648 (base 1024)"),
    (lambda: c.parse_rate("1k"), "1kB for 1000"),
    (lambda: c.parse_rate("10Mb"), "unknown unit 'Mb'"),
    (lambda: c.parse_rate("fast"), "not a rate"),
    (lambda: c.parse_rate("20000PB"), "2^64-1"),
    (lambda: c.parse_rate("0.5B"), "whole number"),
    (lambda: c.parse_rate(-1), "negative"),
    (lambda: c.parse_rate(U64 + 1), "out of range"),
    (lambda: c.parse_size("10%"), "percentage"),
    (lambda: c.IO_COST_MODEL.parse("nvme0n1 rbps=1"), "does not start with MAJ:MIN"),
    (lambda: c.IO_COST_MODEL.parse("259:0 rbps"), "not key=value"),
    (lambda: c.IO_COST_QOS.parse("259:0 rpct=abc"), "rpct=abc"),
    (lambda: c.IO_WEIGHT.parse("default"), "not 'default N'"),
    (lambda: c.IO_WEIGHT.parse("sda 100"), "not 'default N'"),
    (lambda: c.MEMORY["memory.max"].parse("lots"), "neither bytes nor max"),
    (lambda: c.CGROUP_FILES["cpu.weight"].parse("max"), "not an integer"),
    (lambda: c.CPU_MAX.parse("max"), "QUOTA PERIOD"),
    (lambda: c.SCHEDULER.parse("[a] [b]"), "not a scheduler list"),
    (lambda: c.SCHEDULER.parse(""), "not a scheduler list"),
    (lambda: c.CPU_LIST.parse("3-1"), "not a CPU list"),
    (lambda: c.CPU_LIST.parse("a"), "not a CPU list"),
    (lambda: c.IO_PRIO_CLASS.parse("rt"), "not a known policy"),
    (lambda: c.IO_COST_MODEL.normalize_device("259:0", {"rbps": 1}), "needs all six"),
])
def test_parse_errors(call, needle):
    with pytest.raises(c.CodecError) as info:
        call()
    assert needle in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_parsers_never_crash(text):
    """Any text either parses or raises CodecError naming what is wrong (never another exception)."""
    parsers = [codec.parse for codec in (
        c.IO_COST_MODEL, c.IO_COST_QOS, c.IO_MAX, c.IO_LATENCY, c.IO_WEIGHT, c.IO_STAT, c.PRESSURE,
        c.MEMORY["memory.max"], c.CPU_MAX, c.SCHEDULER, c.CPU_LIST, c.IO_PRIO_CLASS, c.QUEUE_ATTRIBUTES["nr_requests"],
        c.MultiToken("x"))] + [c.parse_rate, c.parse_size, c.parse_majmin]
    for parse in parsers:
        try:
            parse(text)
        except c.CodecError as e:
            assert e.errors and all(isinstance(m, str) and m for m in e.errors), (parse, text, e.errors)


junk_value = st.one_of(st.integers(), st.text(max_size=8), st.floats(), st.none(), st.booleans())
junk_settings = st.one_of(st.dictionaries(st.text(max_size=8), junk_value, max_size=4), st.integers(), st.text(max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(devs, st.text(max_size=6)), junk_settings, max_size=3))
def test_validate_never_crashes(desired):
    """validate() returns messages for any garbage; format() then raises CodecError, never anything else."""
    for codec in (c.IO_COST_MODEL, c.IO_COST_QOS, c.IO_MAX, c.IO_LATENCY, c.IO_WEIGHT):
        errors = codec.validate(desired)
        assert isinstance(errors, list)
        if errors:
            with pytest.raises(c.CodecError):
                codec.format(desired)
        else:
            codec.format(desired)
            codec.normalize(desired)


# io.low, as observed on 6.1 with CONFIG_BLK_DEV_THROTTLING_LOW (tests/lab/observed-io-low-6.1.txt)
def test_io_low_parses_the_kernel_lines_and_matches_a_full_request():
    text = "259:0 rbps=1000000 wbps=0 riops=0 wiops=500 idle=1000 latency=2000\n"
    parsed = c.IO_LOW.parse(text)
    assert parsed == {"259:0": {"rbps": 1000000, "wbps": 0, "riops": 0, "wiops": 500, "idle": 1000, "latency": 2000}}
    want = {"259:0": {"rbps": 1000000, "wiops": 500, "idle": 1000, "latency": 2000}}
    assert c.IO_LOW.validate(want) == []
    assert c.IO_LOW.format(want) == ["259:0 rbps=1000000 wiops=500 idle=1000 latency=2000"]
    assert c.IO_LOW.matches(c.IO_LOW.normalize(want), parsed)
    assert not c.IO_LOW.matches(c.IO_LOW.normalize({"259:0": dict(want["259:0"], idle=999)}), parsed)
    # no line = nothing set; the unset values read as 0 (rates, idle) and max (latency)
    unset = {"rbps": 0, "wbps": 0, "riops": 0, "wiops": 0, "idle": 0, "latency": "max"}
    assert c.IO_LOW.lookup({}, "259:0") == unset


@pytest.mark.parametrize("settings, expect", [
    ({"rbps": 0, "idle": 1, "latency": 1}, "ERANGE): io.low has no way back to 0"),
    ({"rbps": 1, "idle": 1, "latency": 1}, "EINVAL"),
    ({"rbps": "10M", "idle": 1, "latency": 1}, "unit suffixes are not accepted"),
    ({"rbps": 1000000, "idle": 0, "latency": 1}, "0 is out of range"),
    ({"rbps": 1000000}, "acts only with a rate"),
    ({"idle": 1000, "latency": 2000}, "acts only with a rate"),
    ({"rbps": 1000000, "idle": 1000, "latency": "max"}, "acts only with a rate"),
    ({"rbps": 1000000, "idle": 1000, "target": 2000}, "io.low uses 'latency'"),
])
def test_io_low_refuses_what_the_kernel_refuses_or_ignores(settings, expect):
    errors = c.IO_LOW.validate({"259:0": settings})
    assert errors and expect in " ".join(errors)


def test_io_low_restore_form_leaves_out_the_unwritable_zeros():
    parsed = c.IO_LOW.parse("259:0 rbps=max wbps=0 riops=0 wiops=500 idle=1000 latency=2000\n")
    desired = c.IO_LOW.as_desired(parsed)
    assert desired == {"259:0": {"rbps": "max", "wiops": 500, "idle": 1000, "latency": 2000}}
    assert c.IO_LOW.format(desired) == ["259:0 rbps=max wiops=500 idle=1000 latency=2000"]
