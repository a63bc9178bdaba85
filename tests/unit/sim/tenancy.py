# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A host with tenants for the tenancy report: units in slices with processes, and io.stat counters that move while
the report sleeps between its two readings (the kernel charging I/O to cgroups)."""

from sim.host import FakeHost

NVME = "259:0"
ROOT_DISK = "254:0"
COUNTERS = ("rbytes", "wbytes", "rios", "wios")


class TenantHost:
    """FakeHost with the lab's disks, a cgroup2 root with io enabled, and helpers for units, processes and I/O."""

    def __init__(self, tmp_path):
        self.h = FakeHost(tmp_path)
        self.h.add_virtio(name="vda", majmin=ROOT_DISK, serial="lab-root")
        self.h.add_nvme(ctrl=0, serial="lab-nvme-a", eui64="0000000000000001", majmin=NVME)
        self.mount = self.h.add_cgroup_root(subtree="io memory pids")
        self.io = {}            # cgroup path ("" = root) -> {majmin: {counter: value}}
        self.pending = []       # I/O the kernel charges while the report sleeps
        self.slept = []

    @property
    def root(self):
        return self.h.root

    def unit(self, cgroup, procs=None):
        """A cgroup (``system.slice/vllm.service``) with processes {pid: comm}."""
        self.h.add_cgroup(cgroup)
        procs = procs or {}
        self.h.write("%s/%s/cgroup.procs" % (self.mount, cgroup), "\n".join(str(p) for p in procs))
        for pid, comm in procs.items():
            self.h.write("/proc/%d/comm" % pid, comm + "\n")
        return self

    def charge(self, cgroup, majmin=NVME, now=False, **counters):
        """I/O charged to ``cgroup`` and every ancestor up to the root (io.stat is hierarchical): at once with
        ``now``, else while the report sleeps."""
        if now:
            self._apply(cgroup, majmin, counters)
        else:
            self.pending.append((cgroup, majmin, counters))
        return self

    def _apply(self, cgroup, majmin, counters):
        parts = [p for p in cgroup.strip("/").split("/") if p]
        for depth in range(len(parts), -1, -1):
            path = "/".join(parts[:depth])
            line = self.io.setdefault(path, {}).setdefault(majmin, dict((k, 0) for k in COUNTERS))
            for k, v in counters.items():
                line[k] += v
        self._write()

    def _write(self):
        for path, lines in self.io.items():
            text = "\n".join("%s %s dbytes=0 dios=0" % (m, " ".join("%s=%d" % (k, v[k]) for k in COUNTERS))
                             for m, v in sorted(lines.items()))
            self.h.write(self.mount + ("/" + path if path else "") + "/io.stat", text)

    def sleep(self, seconds):
        """The report's sleep: the pending I/O is charged."""
        self.slept.append(seconds)
        for cgroup, majmin, counters in self.pending:
            self._apply(cgroup, majmin, counters)
        self.pending = []

    def clock(self):
        """A monotonic clock that moves by the slept seconds."""
        return float(sum(self.slept))
