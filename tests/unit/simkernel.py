# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated kernel files for engine and module tests.

``SimKernel`` is a KernelFS whose pseudo-files behave like kernel files (a write is parsed by a
handler, not stored); ``SimIocost`` implements io.cost.model / io.cost.qos / io.weight with the
rules observed on Debian 6.1 and 6.12: lines appear on first write, tokens apply in order,
``ctrl=auto`` restores the class defaults, percentages print with 2 decimals, per-device io.weight
fails with EOPNOTSUPP until iocost is initialised on the disk, one device per write().
"""

import errno

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS, KernelFileError


class SimKernel(KernelFS):
    """A KernelFS whose pseudo-files behave like kernel files: a write is parsed, not stored.

    ``handlers[path](line)`` applies one written line to ``state[path]`` or raises OSError;
    reads render ``state[path]``. Every write is logged.
    """

    def __init__(self, root):
        super(SimKernel, self).__init__(root)
        self.state = {}
        self.handlers = {}
        self.writes = []

    def read(self, path, default=None):
        if path in self.state:
            return self.state[path]
        return super(SimKernel, self).read(path, default)

    def write(self, path, value):
        self.writes.append((path, value))
        if path in self.handlers:
            try:
                self.handlers[path](value)
            except OSError as e:
                raise KernelFileError(path, value, e.errno)
            return None
        return super(SimKernel, self).write(path, value)


SSD_DFL = {"rbps": 488636629, "rseqiops": 8932, "rrandiops": 8518, "wbps": 427891549, "wseqiops": 28755,
           "wrandiops": 21940}
QOS_AUTO = {"rpct": "0.00", "rlat": 25000, "wpct": "0.00", "wlat": 25000, "min": "1.00", "max": "10000.00"}
ROOT = "/sys/fs/cgroup"


class SimIocost(object):
    def __init__(self, sim, devices=("259:0", "254:0"), refuse_qos=None):
        self.model, self.qos, self.weight = {}, {}, {"default": 100}
        self.devices = devices
        self.refuse_qos = refuse_qos
        sim.handlers[ROOT + "/io.cost.model"] = self.write_model
        sim.handlers[ROOT + "/io.cost.qos"] = self.write_qos
        sim.handlers[ROOT + "/cg/io.weight"] = self.write_weight
        self.sim = sim
        self.render()

    def _init(self, dev):
        if dev not in self.devices:
            raise OSError(errno.ENODEV, "no such device")
        self.model.setdefault(dev, dict(ctrl="auto", model="linear", **SSD_DFL))
        self.qos.setdefault(dev, dict(enable=0, ctrl="auto", **QOS_AUTO))

    def write_model(self, line):
        ((dev, pairs),) = codecs.parse_device_lines(line, "io.cost.model")
        self._init(dev)
        for k, v in pairs:
            if k == "ctrl" and v == "auto":
                self.model[dev].update(ctrl="auto", **SSD_DFL)
            elif k in SSD_DFL:
                self.model[dev][k] = int(v)
                self.model[dev]["ctrl"] = "user"
        self.render()

    def write_qos(self, line):
        ((dev, pairs),) = codecs.parse_device_lines(line, "io.cost.qos")
        self._init(dev)
        if self.refuse_qos == dev:
            raise OSError(errno.EINVAL, "refused")
        for k, v in pairs:
            if k == "enable":
                self.qos[dev]["enable"] = 1 if int(v) else 0
            elif k == "ctrl" and v == "auto":
                self.qos[dev].update(ctrl="auto", **QOS_AUTO)
            elif k in QOS_AUTO:
                self.qos[dev][k] = int(v) if k in ("rlat", "wlat") else "%.2f" % float(v)
                self.qos[dev]["ctrl"] = "user"
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

    def render(self):
        self.sim.state[ROOT + "/io.cost.model"] = "\n".join(
            "%s ctrl=%s model=linear %s" % (d, m["ctrl"], " ".join("%s=%s" % (k, m[k]) for k in SSD_DFL))
            for d, m in self.model.items())
        self.sim.state[ROOT + "/io.cost.qos"] = "\n".join(
            "%s enable=%d ctrl=%s %s" % (d, q["enable"], q["ctrl"], " ".join("%s=%s" % (k, q[k]) for k in QOS_AUTO))
            for d, q in self.qos.items())
        self.sim.state[ROOT + "/cg/io.weight"] = "\n".join(
            "%s %s" % (k, v) for k, v in sorted(self.weight.items(), key=lambda kv: kv[0] != "default"))
