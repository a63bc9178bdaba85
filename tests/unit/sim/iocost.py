# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""blk-iocost as the kernel shows it: ``SimIocost``, the root's io.cost.model and io.cost.qos and a group's io.weight.

The rules are block/blk-iocost.c's, as observed on Debian 6.1 and 6.12: a disk's lines appear in both
root files on its first write to either (iocost is initialised on it, the model at the class
defaults, QoS disabled), even when the write is then refused; the tokens of one write are checked
before any applies (EINVAL: unknown key, ``ctrl`` other than auto/user, ``model`` other than linear,
a coefficient that is not a u64, a percentage out of 0..100, min above max) and apply in order;
``ctrl=auto`` restores the class defaults; percentages are parsed like ``cgroup_parse_float()`` (two
decimals, half-up) and printed with 2 decimals, min/max clamped to 1..10000 %, latencies stored in a
u32; per-device io.weight fails with EOPNOTSUPP until iocost is initialised on the disk; one device
per write().

Attached to a SimKernel (``SimIocost(sim)``) the files are ``ROOT/io.cost.model``, ``ROOT/io.cost.qos``
and ``ROOT/cg/io.weight``; standalone (``SimIocost(devices=None)``), :meth:`file` gives one of them
with ``write(line)`` / ``read()`` for the codec tests.
"""

import errno

from sim.kernel import U32, einval as _einval, parse_float, parse_u64, split_device

# The kernel's ssd_dfl coefficients (block/blk-iocost.c, autop[AUTOP_SSD_DFL]): what io.cost.model shows
# for an SSD with ctrl=auto. Declared here once for every test; never taken from the code under test.
SSD_DFL = {"rbps": 488636629, "rseqiops": 8932, "rrandiops": 8518, "wbps": 427891549, "wseqiops": 28755,
           "wrandiops": 21940}
COEFS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")
# QoS with ctrl=auto, in the kernel's units (percentages in ppm, latencies in µs)
QOS_DEFAULT = {"rpct": 0, "rlat": 25000, "wpct": 0, "wlat": 25000, "min": 10000, "max": 100000000}
QOS_KEYS = ("rpct", "rlat", "wpct", "wlat", "min", "max")
ROOT = "/sys/fs/cgroup"


def _pct(ppm):
    return "%d.%02d" % (ppm // 10000, ppm % 10000 // 100)


def _ctrl(state, value, defaults):
    """ctrl=auto puts the defaults back, ctrl=user keeps the values; anything else is EINVAL."""
    if value not in ("auto", "user"):
        raise _einval("ctrl")
    state["ctrl"] = value
    if value == "auto":
        state.update(defaults)


class _File(object):
    def __init__(self, write, render):
        self.write = lambda line: write(line.rstrip("\n"))
        self.read = lambda: "".join(line + "\n" for line in render().splitlines())


class SimIocost(object):
    """``model[dev]`` / ``qos[dev]`` hold each initialised disk's state (``ctrl`` 'auto' or 'user', the
    coefficients; ``enable`` 0/1 and the QoS in the kernel's units), ``weight`` the group's io.weight.
    ``devices`` are the disks iocost can run on (others: ENODEV; None: any); a write of io.cost.qos for
    ``refuse_qos`` fails with EINVAL after initialising the disk."""

    def __init__(self, sim=None, devices=("259:0", "254:0"), refuse_qos=None):
        self.model, self.qos, self.weight = {}, {}, {"default": 100}
        self.devices = devices
        self.refuse_qos = refuse_qos
        self.sim = sim
        if sim is not None:
            sim.handlers[ROOT + "/io.cost.model"] = self.write_model
            sim.handlers[ROOT + "/io.cost.qos"] = self.write_qos
            sim.handlers[ROOT + "/cg/io.weight"] = self.write_weight
            self.render()

    def file(self, name):
        """'io.cost.model' or 'io.cost.qos' as a file: write(line), read() -> text."""
        if name == "io.cost.model":
            return _File(self.write_model, self.model_text)
        return _File(self.write_qos, self.qos_text)

    def _init(self, dev):
        if self.devices is not None and dev not in self.devices:
            raise OSError(errno.ENODEV, "no such device")
        self.model.setdefault(dev, dict(ctrl="auto", model="linear", **SSD_DFL))
        self.qos.setdefault(dev, dict(enable=0, ctrl="auto", **QOS_DEFAULT))

    def write_model(self, line):
        dev, body = split_device(line)
        self._init(dev)
        new = dict(self.model[dev])
        for tok in body.split():
            key, _sep, val = tok.partition("=")
            if key == "ctrl":
                _ctrl(new, val, SSD_DFL)
            elif key == "model":
                if val != "linear":
                    raise _einval("model")
            elif key in COEFS:
                new[key] = parse_u64(val)
                new["ctrl"] = "user"
            else:
                raise _einval(key)
        self.model[dev] = new
        self.render()

    def write_qos(self, line):
        dev, body = split_device(line)
        self._init(dev)
        if self.refuse_qos == dev:
            raise _einval("refused")
        s = dict(self.qos[dev])
        for tok in body.split():
            key, _sep, val = tok.partition("=")
            if key == "enable":
                s["enable"] = 1 if parse_u64(val) else 0
                continue
            if key == "ctrl":
                _ctrl(s, val, QOS_DEFAULT)
                continue
            if key in ("rpct", "wpct"):
                v = parse_float(val)
                if v < 0 or v > 10000:
                    raise _einval(key)
                s[key] = v * 100
            elif key in ("rlat", "wlat"):
                s[key] = parse_u64(val) & U32          # stored in a u32
            elif key in ("min", "max"):
                v = parse_float(val)
                if v < 0:
                    raise _einval(key)
                s[key] = min(max(v * 100, 10000), 100000000)
            else:
                raise _einval(key)
            s["ctrl"] = "user"
        if s["min"] > s["max"]:
            raise _einval("min above max")
        self.qos[dev] = s
        self.render()

    def write_weight(self, line):
        key, value = line.split()
        if key != "default" and key not in self.qos:
            raise OSError(errno.EOPNOTSUPP, "iocost not initialised")
        if value == "default":
            self.weight.pop(key, None)
        else:
            self.weight[key] = int(value)
        self.render()

    def model_text(self):
        return "\n".join("%s ctrl=%s model=linear %s" % (d, m["ctrl"], " ".join("%s=%d" % (k, m[k]) for k in COEFS))
                         for d, m in self.model.items())

    def qos_text(self):
        return "\n".join("%s enable=%d ctrl=%s rpct=%s rlat=%d wpct=%s wlat=%d min=%s max=%s" % (
            d, q["enable"], q["ctrl"], _pct(q["rpct"]), q["rlat"], _pct(q["wpct"]), q["wlat"], _pct(q["min"]),
            _pct(q["max"])) for d, q in self.qos.items())

    def render(self):
        if self.sim is None:
            return
        self.sim.state[ROOT + "/io.cost.model"] = self.model_text()
        self.sim.state[ROOT + "/io.cost.qos"] = self.qos_text()
        self.sim.state[ROOT + "/cg/io.weight"] = "\n".join(
            "%s %s" % (k, v) for k, v in sorted(self.weight.items(), key=lambda kv: kv[0] != "default"))
