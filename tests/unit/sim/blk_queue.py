# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated ``/sys/block/<disk>/queue/*`` files with the rules observed on Debian 6.1 and 6.12.

Attach to a :class:`sim.kernel.SimKernel` over a FakeHost tree: ``SimQueue(sim, host, "nvme0n1")``;
:func:`queue_host` is the lab VM with its queues simulated.
Observed in the lab (docs/blk_queue.md has the transcripts):

* scheduler: a name the kernel has or can load (``<name>-iosched`` module), 'deadline' is
  mq-deadline, the same name again is a no-op, anything else EINVAL; a switch sets nr_requests to
  2 x min(tag depth, 128) for a scheduler, to the tag depth for none; bfq switches the default wbt
  off and leaving it switches it back on;
* nr_requests: < 4 stored as 4; above the tag depth (none) or 2048 (a scheduler) EINVAL;
* wbt_lat_usec: -1 = default (2000 us / 75000 us rotational), a write of the held latency is
  ignored, 0 = off (manual), another value = on (manual); 6.12 shows 0 while wbt is off, 6.1 always
  shows the latency; iocost enable switches the default wbt off;
* read_ahead_kb floors to 4 KiB pages; max_sectors_kb < 4 EINVAL, above max_hw EINVAL (6.1) or
  clamped (6.12); rq_affinity ignores other numbers, nomerges/iostats/add_random map them.

``refuse[attr] = errno`` makes the next write of that attribute fail, like a kernel refusal.
"""

import errno
import os

from sim.kernel import SimKernel
from sim.lab import lab_host

RELEASES = {"6.1": "6.1.0-57-amd64", "6.12": "6.12.118+deb13-amd64"}
ON_DEFAULT, ON_MANUAL, OFF_DEFAULT, OFF_MANUAL = 1, 2, 3, 4
MAX_SCHED_RQ = 2048


class SimQueue(object):
    def __init__(self, sim, host, name, kernel="6.12", scheduler="none", available=("none", "mq-deadline"),
                 loadable=("kyber", "bfq"), nr_tags=1023, rotational=False, max_hw_sectors_kb=512,
                 logical_block_size=512):
        self.sim, self.name, self.kernel = sim, name, kernel
        self.base = "/sys/block/%s/queue/" % name
        self.available = list(available)
        self.loadable = set(loadable)
        self.loaded = []
        self.elevator = scheduler
        self.nr_tags = nr_tags
        self.nr_requests = nr_tags if scheduler == "none" else 2 * min(nr_tags, 128)
        self.rotational = rotational
        self.default_lat = 75000000 if rotational else 2000000
        self.min_lat = self.default_lat
        self.wbt_state = OFF_DEFAULT if scheduler == "bfq" else ON_DEFAULT
        self.max_hw = max_hw_sectors_kb
        self.values = {"max_sectors_kb": min(max_hw_sectors_kb, 1280), "read_ahead_kb": 128, "rq_affinity": 1,
                       "nomerges": 0, "iostats": 1, "add_random": 0}
        self.refuse = {}
        sysdir = host.sysdir(name)
        host.write(sysdir + "/queue/rotational", int(rotational))
        host.write(sysdir + "/queue/max_hw_sectors_kb", max_hw_sectors_kb)
        host.write(sysdir + "/queue/logical_block_size", logical_block_size)
        mq = host.path(sysdir + "/mq")
        for hctx in (os.listdir(mq) if os.path.isdir(mq) else []):
            host.write("%s/mq/%s/nr_tags" % (sysdir, hctx), nr_tags)
        for attr in ("scheduler", "nr_requests", "wbt_lat_usec", "max_sectors_kb", "read_ahead_kb", "rq_affinity",
                     "nomerges", "iostats", "add_random"):
            sim.handlers[self.base + attr] = self._handler(attr)
        self.render()

    # -- kernel behaviour ------------------------------------------------------------------
    def _handler(self, attr):
        def handle(line):
            if attr in self.refuse:
                raise OSError(self.refuse.pop(attr), "refused")
            getattr(self, "write_" + attr, lambda v: self.write_value(attr, v))(line.strip())
            self.render()
        return handle

    @staticmethod
    def _int(text):
        try:
            return int(text)
        except ValueError:
            raise OSError(errno.EINVAL, "not a number")

    def write_scheduler(self, name):
        name = {"deadline": "mq-deadline"}.get(name, name)
        if name == self.elevator:
            return
        if name not in self.available:
            if name not in self.loadable:
                raise OSError(errno.EINVAL, "no such elevator")
            self.available.append(name)
            self.loaded.append(name)
        if self.elevator == "bfq" and self.wbt_state == OFF_DEFAULT:
            self.wbt_state = ON_DEFAULT            # bfq_exit_queue -> wbt_enable_default
        self.elevator = name
        self.nr_requests = self.nr_tags if name == "none" else 2 * min(self.nr_tags, 128)
        if name == "bfq":
            self.wbt_disable_default()

    def write_nr_requests(self, text):
        nr = max(self._int(text), 4)
        if nr == self.nr_requests:
            return
        if nr > (self.nr_tags if self.elevator == "none" else MAX_SCHED_RQ):
            raise OSError(errno.EINVAL, "too deep")
        self.nr_requests = nr

    def write_wbt_lat_usec(self, text):
        val = self._int(text)
        if val < -1:
            raise OSError(errno.EINVAL, "below -1")
        val = self.default_lat if val == -1 else val * 1000
        if val == self.min_lat:
            return                                  # wbt_get_min_lat(q) == val: nothing happens
        self.min_lat = val
        self.wbt_state = ON_MANUAL if val else OFF_MANUAL

    def wbt_disable_default(self):
        if self.wbt_state == ON_DEFAULT:
            self.wbt_state = OFF_DEFAULT

    def iocost(self, enable):
        """io.cost.qos enable=1 / 0 for this disk (6.12: wbt_disable_default / wbt_enable_default)."""
        if enable:
            self.wbt_disable_default()
        elif self.wbt_state == OFF_DEFAULT:
            self.wbt_state = ON_DEFAULT
        self.render()

    def write_max_sectors_kb(self, text):
        val = self._int(text)
        if val < 4:
            raise OSError(errno.EINVAL, "below a page")
        if val > self.max_hw:
            if self.kernel == "6.1":
                raise OSError(errno.EINVAL, "above max_hw_sectors_kb")
            val = self.max_hw
        self.values["max_sectors_kb"] = val

    def write_read_ahead_kb(self, text):
        self.values["read_ahead_kb"] = self._int(text) // 4 * 4

    def write_rq_affinity(self, text):
        val = self._int(text)
        if val in (0, 1, 2):
            self.values["rq_affinity"] = val

    def write_nomerges(self, text):
        val = self._int(text)
        self.values["nomerges"] = 2 if val == 2 else (1 if val else 0)

    def write_value(self, attr, text):
        self.values[attr] = 1 if self._int(text) else 0

    # -- what reads show -------------------------------------------------------------------
    def wbt_show(self):
        if self.kernel != "6.1" and self.wbt_state in (OFF_DEFAULT, OFF_MANUAL):
            return 0
        return self.min_lat // 1000

    def render(self):
        names = ["[%s]" % n if n == self.elevator else n for n in self.available]
        state = {"scheduler": " ".join(names) + " ", "nr_requests": self.nr_requests,
                 "wbt_lat_usec": self.wbt_show()}
        state.update(self.values)
        for attr, value in state.items():
            self.sim.state[self.base + attr] = str(value)


def queue_host(tmp_path, kernel="6.12", dm=False, modules=(["alias bfq-iosched bfq"], ["kernel/block/kyber-iosched.ko.xz:"]),
               **nvme_a):
    """The lab VM on ``kernel`` (6.1 or 6.12) with simulated queues: two QEMU NVMe disks (none, 1023 tags) and the
    rotational 2-queue virtio data disk vdb (none, 256 tags); vda with a partition; with ``dm`` a bio-based dm
    on vdb. ``modules`` are the lines of the kernel's modules.alias and modules.dep (None: no such files);
    ``nvme_a`` are SimQueue options for nvme0n1. ``h.q`` are the SimQueues, ``h.sim`` their SimKernel."""
    h = lab_host(tmp_path, kernel=RELEASES[kernel], vda={"partitions": 1, "hw_queues": 2}, vdb={"hw_queues": 2})
    if dm:
        h.add_dm(name="vg0-lv0", slaves=["vdb"])
    h.add_cgroup_root()
    if modules:
        base = "/lib/modules/%s/" % RELEASES[kernel]
        h.write(base + "modules.alias", "\n".join(modules[0]))
        h.write(base + "modules.dep", "\n".join(modules[1]))
    sim = SimKernel(h.root)
    h.q = {"nvme0n1": SimQueue(sim, h, "nvme0n1", kernel=kernel, **nvme_a),
           "nvme1n1": SimQueue(sim, h, "nvme1n1", kernel=kernel),
           "vdb": SimQueue(sim, h, "vdb", kernel=kernel, nr_tags=256, rotational=True, max_hw_sectors_kb=2147483647)}
    h.sim = sim
    return h
