# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake host for the sysctl engine and module tests: /proc/sys, debugfs sched files, /proc/mounts.

The pseudo-files are SimKernel handlers that parse writes the way 6.1 and 6.12 do (observed in the
lab, see _sysctl's module docstring), not stored as text.
"""

import errno
import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as sc
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler, ReconcileError
from sim.kernel import SimKernel

PAGE = 4096
U32 = 2 ** 32 - 1
DEBUGFS_MOUNT = "debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0"
BASE_MOUNTS = ["sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
               "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0"]
SYSCTLS = {
    "/proc/sys/vm/dirty_ratio": "20",
    "/proc/sys/vm/dirty_bytes": "0",
    "/proc/sys/vm/dirty_background_ratio": "10",
    "/proc/sys/vm/dirty_background_bytes": "0",
    "/proc/sys/vm/dirty_expire_centisecs": "3000",
    "/proc/sys/vm/swappiness": "60",
    "/proc/sys/vm/page-cluster": "3",
    "/proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456",
    "/proc/sys/net/ipv4/conf/eth0/rp_filter": "0",
    "/proc/sys/net/ipv4/conf/eth0.1/rp_filter": "0",
    "/proc/sys/net/core/default_qdisc": "fq_codel",
    "/proc/sys/kernel/hostname": "lab",
}
SCHED_611 = {"base_slice_ns": "3000000", "migration_cost_ns": "500000", "nr_migrate": "32",
             "tunable_scaling": "1", "features": "GENTLE_FAIR_SLEEPERS", "preempt": "none (voluntary) full"}
SCHED_61 = {"min_granularity_ns": "3000000", "latency_ns": "24000000", "wakeup_granularity_ns": "4000000",
            "migration_cost_ns": "500000", "nr_migrate": "32", "tunable_scaling": "1"}


class SysctlHost:
    """A fake host: /proc/sys files, optional debugfs sched files, /proc/mounts, over a SimKernel.

    Plain sysctls store what is written and print vectors with tabs like proc_dointvec. The dirty
    pairs follow mm/page-writeback.c: *_bytes below its minimum is EINVAL; writing dirty_bytes or
    dirty_ratio zeroes the other only when the value changes; dirty_background_* always zero the
    other one.
    """

    def __init__(self, tmp_path, release="6.12.48+deb13-amd64", debugfs=True, sched=None, extra=None):
        self.root = str(tmp_path)
        self.release = release
        self.sim = SimKernel(self.root)
        mounts = BASE_MOUNTS + ([DEBUGFS_MOUNT] if debugfs else [])
        self.real("/proc/mounts", "\n".join(mounts) + "\n")
        files = dict(SYSCTLS)
        files.update(extra or {})
        for path, value in files.items():
            self.pseudo(path, value)
        for name, value in (SCHED_611 if sched is None else sched).items():
            self.pseudo("/sys/kernel/debug/sched/" + name, value)
        self.pair_rules()

    def real(self, path, content, mode=0o644):
        full = os.path.join(self.root, path.lstrip("/"))
        if not os.path.isdir(os.path.dirname(full)):
            os.makedirs(os.path.dirname(full))
        with open(full, "w", encoding="utf-8") as f:
            f.write(content)
        os.chmod(full, mode)

    def pseudo(self, path, value, mode=0o644, handler=None):
        self.real(path, value + "\n", mode)
        self.sim.state[path] = value

        def store(line):
            self.sim.state[path] = "\t".join(line.split())
        self.sim.handlers[path] = handler or store

    def pair_rules(self):
        state = self.sim.state

        def rule(name, partner, minimum, only_on_change):
            path, other = "/proc/sys/vm/" + name, "/proc/sys/vm/" + partner

            def handler(line):
                value = int(line.strip())
                if value < minimum or (name.endswith("_ratio") and value > 100):
                    raise OSError(errno.EINVAL, "out of range")
                old = int(state[path])
                state[path] = str(value)
                if value != old or not only_on_change:
                    state[other] = "0"
            self.sim.handlers[path] = handler
        rule("dirty_bytes", "dirty_ratio", 2 * PAGE, True)
        rule("dirty_ratio", "dirty_bytes", 0, True)
        rule("dirty_background_bytes", "dirty_background_ratio", 1, False)
        rule("dirty_background_ratio", "dirty_background_bytes", 0, False)

    def get(self, path):
        return self.sim.read(path)

    def file(self, path):
        full = os.path.join(self.root, path.lstrip("/"))
        if not os.path.exists(full):
            return None
        with open(full, encoding="utf-8") as f:
            return f.read()

    def run(self, sysctls, check_mode=False, **params):
        params["sysctls"] = sysctls
        out, errors, warnings, info = sc.settings(self.sim, params, release=self.release, page_size=PAGE)
        result = Reconciler(self.sim, check_mode).run(out, errors)
        return sc.flat_result(result), warnings, info

    def refused(self, sysctls, **params):
        """Run a request that must fail; returns the error and checks that nothing was written."""
        before = [self.file(p) for p in (sc.SYSCTL_CONF, sc.TMPFILES_CONF)]
        with pytest.raises(ReconcileError) as exc:
            self.run(sysctls, **params)
        assert self.sim.writes == []
        assert [self.file(p) for p in (sc.SYSCTL_CONF, sc.TMPFILES_CONF)] == before
        assert exc.value.msg.startswith("Invalid request (nothing was changed)")
        return exc.value
