# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A calibration host for the iocost_calibrate tests: one NVMe disk (simulated queue and iocost
files, sim/blk_queue.py and sim/iocost.py) under mq-deadline with nr_requests 100 and a user
QoS, a fake command runner with fio 3.39, and a Target for a scratch file or the raw disk.
"""

import json
import os
import subprocess

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as cal
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as targets
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from sim.iocost import SimIocost
from sim.kernel import SimKernel
from sim.blk_queue import SimQueue
from sim.lab import lab_host
from sim.runner import FakeRunner

MODEL = {"rbps": 1360000000, "rseqiops": 41000, "rrandiops": 38000, "wbps": 1210000000, "wseqiops": 35000,
         "wrandiops": 33000}
QOS_USER = "259:0 enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=10000 min=10.00 max=100.00"


def fio_runner(fio_path="/usr/bin/fio"):
    """The calibration host's commands: fio 3.39 at ``fio_path`` (None: not installed), every other tool in
    /usr/sbin, and any other command answering rc 2 (blkid: nothing found)."""
    answers = {(fio_path, "--version"): (0, "fio-3.39\n", "")} if fio_path else {}
    return FakeRunner(answers, tools=lambda name: fio_path if name == "fio" else "/usr/sbin/" + name, default=(2, "", ""))


class Lab(object):
    """One NVMe disk under mq-deadline with nr_requests 100, iocost on with a user QoS."""

    def __init__(self, root, iocost=True):
        h = lab_host(root, kernel="6.12.118+deb13-amd64", nvme=("lab-nvme-a",), cgroup={})
        h.write("/proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555")
        h.mkdir("/run")
        self.host = h
        self.sim = SimKernel(h.root)
        self.q = SimQueue(self.sim, h, "nvme0n1", scheduler="mq-deadline")
        self.q.write_nr_requests("100")
        self.q.render()
        self.iocost = SimIocost(self.sim, devices=("259:0",))
        if iocost:
            self.sim.write(cal.IOCOST_QOS, QOS_USER)
        self.sim.writes[:] = []
        self.record = DeviceResolver(self.sim).resolve("lab-nvme-a")
        self.events = []

    def state(self):
        qos = [line for line in (self.sim.read(cal.IOCOST_QOS) or "").splitlines() if line.startswith("259:0 ")]
        return {"scheduler": self.q.elevator, "nr_requests": self.q.nr_requests,
                "nomerges": self.q.values["nomerges"], "qos": qos[0] if qos else None}

    def journals(self):
        d = self.sim.path(cal.JOURNAL_DIR)
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def orphan_journal(self):
        """The disk's journal as a SIGKILLed run leaves it: its pid now a process that has ended. Returns the entry."""
        path = self.sim.path(cal.journal_path(self.record))
        with open(path) as f:
            entry = json.load(f)
        dead = subprocess.Popen(["true"])
        dead.wait()
        entry["pid"] = dead.pid
        with open(path, "w") as f:
            json.dump(entry, f)
        return entry

    def target(self, kind="file"):
        path = "/srv/calib/.aiinfra-iocost-calibrate-%d.scratch" % os.getpid() if kind == "file" else "/dev/nvme0n1"
        return targets.Target(kind, path, 256 * 2 ** 20, self.record, filesystem="/srv/calib" if kind == "file" else None,
                              local_path=self.sim.path(path))


BEFORE = {"scheduler": "mq-deadline", "nr_requests": 100, "nomerges": 0, "qos": QOS_USER}
