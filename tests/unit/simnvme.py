# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A simulated nvme driver for the nvme_queues tests (SimNvme, FakeRunner, Lab).

Parameter writes are checked the way ``pci.c`` checks them, and a write to ``reset_controller``
re-splits the controller's queues with the driver's arithmetic, keeping the tag set's maps from
probe. A reset that adds poll queues to a controller probed without them reproduces what the lab
showed on 6.1 and 6.12: the driver logs the new split, blk-mq keeps only default hctxs,
``io_poll`` stays 0, and the controller is recorded in ``stalled``.
"""

import errno
import os

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as nq
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from fakehost import FakeHost
from simkernel import SimKernel

RELEASE = "6.1.0-57-amd64"
MODDIR = "/lib/modules/" + RELEASE
INITRD = "/boot/initrd.img-" + RELEASE
NVME_DEP = ("kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko kernel/block/t10-pi.ko "
            "kernel/lib/crc64-rocksoft.ko kernel/lib/crc-t10dif.ko kernel/lib/crc64.ko kernel/crypto/crct10dif_common.ko")
# What lsinitramfs listed for the lab's virtio-only initramfs (excerpt, Debian 12).
LAB_INITRAMFS = ["etc/modprobe.d", "usr/lib/modprobe.d", "usr/lib/modprobe.d/aliases.conf",
                 "usr/lib/modules/%s/kernel/drivers/block/virtio_blk.ko" % RELEASE,
                 "usr/lib/modules/%s/kernel/fs/ext4/ext4.ko" % RELEASE, "usr/sbin/modprobe"]
NVME_IN_INITRAMFS = ["usr/lib/modules/%s/kernel/drivers/nvme/host/nvme.ko" % RELEASE,
                     "usr/lib/modules/%s/kernel/drivers/nvme/host/nvme-core.ko" % RELEASE]
MQES_PLUS_1 = 2048      # QEMU's NVMe: CAP.MQES 2047
BLK_MQ_MAX_DEPTH = 10240


def driver_split(nr_io, poll_queues, write_queues, ncpus):
    """(default, read, poll) the way nvme_setup_io_queues/nvme_setup_irqs/nvme_calc_irq_sets count them.

    Interrupt vectors: admin + one per non-poll queue, and the affinity spreading caps the queue
    vectors at the number of possible CPUs (why 1 -> 0 poll queues at runtime gave 2/0/0, not
    3/0/0, in the lab).
    """
    poll = min(poll_queues, nr_io - 1)
    vectors = min(1 + nr_io - poll, 1 + ncpus)
    nrirqs = vectors - 1
    if nrirqs <= 1 or not write_queues:
        read = 0
    elif write_queues >= nrirqs:
        read = 1
    else:
        read = nrirqs - write_queues
    return max(nrirqs, 1) - read, read, poll


class SimNvme(object):
    """The nvme driver's parameter files and controller resets on a FakeHost (see the module doc)."""

    def __init__(self, host, sim, ctrls=(0, 1), granted=64):
        self.h, self.sim = host, sim
        self.ncpus = host.ncpus
        self.params = dict(nq.DEFAULTS)
        self.granted = granted
        self.ctrls = {}
        self.stalled, self.resets, self.klog = [], [], []
        self.ignore_resets = False
        for p in nq.PARAMS:
            sim.handlers["%s/%s" % (nq.PARAMETERS_DIR, p)] = self._param_writer(p)
        for n in ctrls:
            name = "nvme%d" % n
            host.add_nvme(ctrl=n, serial="lab-nvme-%s" % "ab"[n % 2], majmin="259:%d" % n)
            self.ctrls[name] = {"ns": ["nvme%dn1" % n]}
            sim.handlers["/sys/class/nvme/%s/reset_controller" % name] = self._resetter(name)
        host.write("/sys/module/nvme/initstate", "live")

    # module parameters (pci.c io_queue_count_set / io_queue_depth_set)
    def _param_writer(self, p):
        def write(line):
            try:
                n = int(line.strip(), 10)
            except ValueError:
                raise OSError(errno.EINVAL, "invalid")
            if p == "io_queue_depth" and not nq.DEPTH_MIN <= n <= nq.DEPTH_MAX:
                raise OSError(errno.EINVAL, "invalid")
            if p != "io_queue_depth" and not 0 <= n <= self.ncpus:
                raise OSError(errno.EINVAL, "invalid")
            self.params[p] = n
            self.h.write("%s/%s" % (nq.PARAMETERS_DIR, p), n)
        return write

    def boot(self, **params):
        """Probe every controller with these parameters (what a reboot does)."""
        self.params.update(params)
        for p, v in self.params.items():
            self.h.write("%s/%s" % (nq.PARAMETERS_DIR, p), v)
        for name, c in self.ctrls.items():
            c["allocated"] = self.ncpus + self.params["write_queues"] + self.params["poll_queues"]
            split = driver_split(min(c["allocated"], self.granted), self.params["poll_queues"],
                                 self.params["write_queues"], self.ncpus)
            c["nr_maps"] = 3 if split[2] else 2
            c["tags"] = min(MQES_PLUS_1, self.params["io_queue_depth"], BLK_MQ_MAX_DEPTH) - 1
            self._render(name, split, mapped=True)
        return self

    def _resetter(self, name):
        def reset(line):
            self.resets.append(name)
            if self.ignore_resets:
                return
            c = self.ctrls[name]
            split = driver_split(min(c["allocated"], self.granted), self.params["poll_queues"],
                                 self.params["write_queues"], self.ncpus)
            mapped = not (split[2] and c["nr_maps"] < 3)
            if not mapped:
                self.stalled.append(name)
            self._render(name, split, mapped)
        return reset

    def _render(self, name, split, mapped):
        default, read, poll = split
        self.klog.append("[   22.7] nvme %s: %d/%d/%d default/read/poll queues" % (name, default, read, poll))
        c = self.ctrls[name]
        self.h.write("/sys/class/nvme/%s/queue_count" % name, default + read + poll + 1)
        kinds = []
        for kind, count in (("default", default), ("read", read), ("poll", poll)):
            for i in range(count):
                cpus = [cpu for cpu in range(self.ncpus) if cpu % count == i]
                # Without a poll map (nr_maps 2) blk-mq types every hctx from the default map.
                kinds.append(("default" if not mapped else kind, cpus))
        for ns in c["ns"]:
            d = self.h.sysdir(ns)
            mq = self.h.path(d + "/mq")
            for entry in os.listdir(mq):
                for f in os.listdir(os.path.join(mq, entry)):
                    p = os.path.join(mq, entry, f)
                    os.rmdir(p) if os.path.isdir(p) else os.unlink(p)
                os.rmdir(os.path.join(mq, entry))
            dbg = self.h.path("/sys/kernel/debug/block/%s" % ns)
            if os.path.isdir(dbg):
                for entry in os.listdir(dbg):
                    os.unlink(os.path.join(dbg, entry, "type"))
                    os.rmdir(os.path.join(dbg, entry))
            for index, (kind, cpus) in enumerate(kinds):
                self.h.write("%s/mq/%d/cpu_list" % (d, index), ", ".join(str(x) for x in cpus))
                self.h.write("%s/mq/%d/nr_tags" % (d, index), c["tags"])
                self.h.write("%s/mq/%d/nr_reserved_tags" % (d, index), 0)
                if self.h.debugfs:
                    self.h.write("/sys/kernel/debug/block/%s/hctx%d/type" % (ns, index), kind)
            self.h.write(d + "/queue/io_poll", 1 if poll and c["nr_maps"] == 3 else 0)


class FakeRunner(object):
    """Commands on the fake host: lsinitramfs lists ``initramfs``, update-initramfs rebuilds it
    (copying modprobe.d like mkinitramfs does), dmesg prints the sim's kernel log."""

    def __init__(self, host, nvme=None, initramfs=None, tools=("lsinitramfs", "update-initramfs", "dmesg")):
        self.h = host
        self.nvme = nvme
        self.initramfs = list(LAB_INITRAMFS if initramfs is None else initramfs)
        self.tools = dict((t, "/usr/%sbin/%s" % ("s" if t.startswith("update") else "", t)) for t in tools)
        self.calls = []

    def which(self, name):
        return self.tools.get(name)

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        assert isinstance(argv, list)
        self.calls.append(list(argv))
        tool = os.path.basename(argv[0])
        if tool == "lsinitramfs":
            if not os.path.exists(self.h.path(argv[1])):
                raise CommandError(argv, 1, "", "No such file")
            return 0, "\n".join(self.initramfs) + "\n", ""
        if tool == "update-initramfs":
            assert argv[1:] == ["-u", "-k", RELEASE]
            files = [f for f in self.initramfs if not f.startswith("etc/modprobe.d/")]
            etc = self.h.path("/etc/modprobe.d")
            if os.path.isdir(etc):
                files += ["etc/modprobe.d/" + f for f in sorted(os.listdir(etc)) if f.endswith(".conf")]
            self.initramfs = files
            self.h.write(INITRD, "rebuilt")
            os.utime(self.h.path(INITRD), None)
            return 0, "update-initramfs: Generating %s\n" % INITRD, ""
        if tool == "dmesg":
            return 0, "\n".join(self.nvme.klog if self.nvme else []) + "\n", ""
        raise AssertionError("unexpected command %r" % argv)

    def called(self, tool):
        return [c for c in self.calls if os.path.basename(c[0]) == tool]


class Lab(object):
    """A lab-like host: 2 CPUs, two QEMU NVMe controllers, nvme loadable from the root filesystem."""

    def __init__(self, tmp_path, ncpus=2, debugfs=True, builtin=False, initramfs=None, **boot):
        self.h = FakeHost(tmp_path, ncpus=ncpus, debugfs=debugfs, kernel=RELEASE)
        self.sim = SimKernel(self.h.root)
        self.nvme = SimNvme(self.h, self.sim)
        if builtin:
            self.h.write(MODDIR + "/modules.builtin", "kernel/drivers/nvme/host/nvme.ko")
            self.h.remove("/sys/module/nvme/initstate")
        else:
            self.h.write(MODDIR + "/modules.dep", NVME_DEP)
        self.h.write(INITRD, "initramfs")
        self.runner = FakeRunner(self.h, self.nvme, initramfs)
        self.nvme.boot(**boot)

    def run(self, check_mode=False, **params):
        params.setdefault("state", "present")
        return nq.reconcile(params, self.sim, self.runner, check_mode=check_mode)

    def conf(self):
        path = self.h.path(nq.CONF_PATH)
        return open(path).read() if os.path.exists(path) else None

    def writes(self):
        return list(self.sim.writes)

    def etc_files(self):
        out = []
        for dirpath, _dirs, files in os.walk(self.h.path("/etc")):
            out.extend(os.path.join(dirpath, f) for f in files)
        return sorted(out)
