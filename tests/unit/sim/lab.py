# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab VM as the tests compose it from the simulated pieces.

:func:`lab_host` is the lab guest's disks on a FakeHost (what ``tests/lab`` boots: a virtio root disk
``vda`` 254:0 with serial lab-root, a virtio data disk ``vdb`` 254:16 with serial lab-virtio-data, the
QEMU NVMe controllers ``nvme<N>`` whose namespace ``nvme<N>n1`` is 259:N, serials lab-nvme-a, -b);
:class:`SystemdLab` puts a kernel whose cgroup files behave like the kernel's (SimCgroup) and a
systemd (SimSystemd) on such a host, with the modules under test wired to them. The test files'
own ``Lab`` classes add what only their concern needs.
"""

import os

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.modules import cgroup
from sim.cgroup import SimCgroup
from sim.host import FakeHost
from sim.systemd import CONTROL_DIR, SimSystemd

NVME_SERIALS = ("lab-nvme-a", "lab-nvme-b")
CG = "/sys/fs/cgroup"
# io.cost.qos with iocost on (1) or off (0) on a disk, the kernel's defaults otherwise
QOS_LINE = "%s enable=%d ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00"
KERNEL_CONFIG = ("CONFIG_BLK_CGROUP_IOCOST=y\nCONFIG_BLK_DEV_THROTTLING=y\n# CONFIG_BLK_CGROUP_IOLATENCY is not set\n"
                 "CONFIG_BLK_CGROUP_IOPRIO=y\nCONFIG_IOSCHED_BFQ=y\nCONFIG_BFQ_GROUP_IOSCHED=y\n")


def lab_host(tmp_path, vda=None, vdb=None, nvme=NVME_SERIALS, cgroup=None, **host):
    """A FakeHost (``host`` are its options) with the lab guest's disks, added in this order:

    ``vda`` and ``vdb`` when given their ``add_virtio`` options (a dict, ``{}`` for the defaults), one
    NVMe controller per serial in ``nvme``, then the cgroup2 root when given its ``add_cgroup_root``
    options (a dict).
    """
    h = FakeHost(tmp_path, **host)
    if vda is not None:
        h.add_virtio(name="vda", majmin="254:0", serial="lab-root", **vda)
    if vdb is not None:
        h.add_virtio(name="vdb", majmin="254:16", serial="lab-virtio-data", **vdb)
    for n, serial in enumerate(nvme):
        h.add_nvme(ctrl=n, serial=serial, majmin="259:%d" % n)
    if cgroup is not None:
        h.add_cgroup_root(**cgroup)
    return h


class SystemdLab(object):
    """``host`` (with its cgroup2 root) booted by systemd ``version``: ``kernel`` (SimCgroup), ``systemd``
    (SimSystemd), /run/systemd/system, and unless ``booted`` is false ``system.slice`` enabling
    cpu io memory pids (and ``init.scope`` with PID 1 when ``init_scope``)."""

    def __init__(self, host, version=252, io_low=False, booted=True, init_scope=True):
        self.host = host
        self.kernel = SimCgroup(host, io_low=io_low)
        self.systemd = SimSystemd(host, self.kernel, version=version)
        if booted:
            host.mkdir("/run/systemd/system")
            if init_scope:
                self.kernel.add_group("init.scope", procs="1")
            self.kernel.add_group("system.slice", subtree="cpu io memory pids")
        self.warnings = []

    def wire_modules(self, monkeypatch, *modules):
        """The ``modules`` read and write this host's kernel and run its systemd; their warnings land in ``warnings``."""
        for module in modules:
            monkeypatch.setattr(module, "KernelFS", lambda: self.kernel)
            monkeypatch.setattr(module, "Runner", lambda module: self.systemd)
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, msg: self.warnings.append(msg))
        return self

    def read(self, path):
        """A host file's text, or None where there is none."""
        real = self.host.path(path)
        if not os.path.isfile(real):
            return None
        with open(real) as f:
            return f.read()

    def link(self, disk="nvme0n1"):
        """The by-id link of an NVMe disk (its wwid)."""
        return "/dev/disk/by-id/nvme-" + self.host.devices[disk]["wwid"]

    def files_below(self, *tops):
        """The host paths of the files below ``tops``, sorted."""
        out = []
        for top in tops:
            for dirpath, _dirs, files in os.walk(self.host.path(top)):
                out.extend(os.path.join(dirpath, f)[len(self.host.root):] for f in files)
        return sorted(out)


class CgroupLab(SystemdLab):
    """The cgroup module's host (its tests and host_profile's): vda, the two NVMe disks (iocost on 259:0), the
    cgroup2 root, and unless ``systemd`` is false units of every kind: runtime.service (delegated, a
    supervisor in a child group), plain.service, busy.service (delegated, processes in its own group),
    vllm.service (active), batch.service and gone.service (inactive)."""

    def __init__(self, tmp_path, version=252, systemd=True, io_latency=False, io_prio=True, io_low=False,
                 iocost=(("259:0", 1),), root_subtree="cpu io memory pids"):
        h = lab_host(tmp_path, vda={"partitions": 1},
                     cgroup={"subtree": root_subtree, "io_latency": io_latency, "io_prio": io_prio})
        h.write(CG + "/io.cost.qos", "\n".join(QOS_LINE % pair for pair in iocost))
        h.write("/boot/config-" + os.uname()[2], KERNEL_CONFIG)
        super(CgroupLab, self).__init__(h, version=version, io_low=io_low, booted=systemd)
        if systemd:
            self.systemd.add_unit("runtime.service", active=True, delegate=True,
                                  fragment="/usr/lib/systemd/system/runtime.service")
            self.kernel.add_group("system.slice/runtime.service/supervisor", procs="4242")
            self.systemd.add_unit("plain.service", active=True, fragment="/usr/lib/systemd/system/plain.service")
            self.systemd.add_unit("busy.service", active=True, delegate=True,
                                  fragment="/usr/lib/systemd/system/busy.service")
            h.write(CG + "/system.slice/busy.service/cgroup.procs", "777")
            self.systemd.add_unit("vllm.service", active=True, fragment="/usr/lib/systemd/system/vllm.service")
            self.systemd.add_unit("batch.service", fragment="/usr/lib/systemd/system/batch.service")
            self.systemd.add_unit("gone.service", delegate=True, fragment="/usr/lib/systemd/system/gone.service")
        self._run_module = None

    def wire(self, monkeypatch, run_module):
        """Point the cgroup module at this host's kernel and systemd, and collect its warnings."""
        self.wire_modules(monkeypatch, cgroup)
        self._run_module = run_module
        self.reset()
        return self

    def reset(self):
        """Forget what set-up and earlier runs did: calls, kernel writes and host mutations."""
        self.systemd.calls[:] = []
        self.kernel.writes[:] = []
        self.kernel.ops[:] = []
        self.kernel.systemd_writes[:] = []
        self.warnings[:] = []

    def run(self, **args):
        self.reset()
        return self._run_module(cgroup.main, **args)

    def cgfile(self, group, name):
        text = self.read("%s/%s/%s" % (CG, group, name))
        return None if text is None else text.rstrip("\n")

    def config_files(self):
        return self.files_below("/etc", CONTROL_DIR)

    def mutating_calls(self):
        return self.systemd.mutating_calls

    def set_property_calls(self):
        return [c for c in self.systemd.calls if c[1] == "set-property"]

    def assert_nothing_changed(self):
        assert self.kernel.ops == [] and self.kernel.writes == [], self.kernel.ops
        assert self.mutating_calls() == [], self.mutating_calls()
        assert self.kernel.systemd_writes == []
