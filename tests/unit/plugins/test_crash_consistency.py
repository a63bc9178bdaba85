# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A rollout killed between two writes (issue 38): the module's process dies after its N-th change to the host (a
kernel file, a persisted file, a systemd command), for every N of an uninterrupted run, so no restore runs - as
with ``kill -9``, an OOM kill or a cut controller connection. Then:

* check mode (what verify.yml runs) reports the interrupted host as changed, unless it already holds everything;
* the next run converges, and leaves the host exactly as the uninterrupted run did (every file's text, every kernel
  file the simulation parses, what systemd has loaded and where each unit runs) - but for one state that is the
  requested one too: a slice the crash left written and loaded but not yet started. A converged host is in that
  state after every reboot (a slice unit has no [Install]: it starts with the first unit placed in it), so the run
  leaves it so, and its values are compared where systemd holds them until then, its loaded unit;
* a run after that changes nothing.

The hosts are the simulated ones the module tests use (tests/unit/sim): the tenant slices and a service placed in
one (cgroup + placement through systemd), iocost with the block queues and their udev rules and boot helper, and
the sysctls with their sysctl.d and tmpfiles.d files.
"""

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import LIBEXEC_DIR, is_managed
from ansible_collections.aiinfra.io_isolation.plugins.modules import blk_queue, cgroup, host_profile, iocost, placement, sysctl
from sim.blk_queue import queue_host
from sim.iocost import SimIocost
from sim.lab import CgroupLab
from sim.sysctl import PAGE, SysctlHost


class Crash(BaseException):
    """The process dies here: not an Exception, so no restore path of the engine sees it."""


FS_CHANGES = ("write", "atomic_write", "remove", "mkdir", "rmdir")


class Host(object):
    """One simulated host: ``fs`` (the modules' KernelFS), ``systemd`` (or None), ``root`` and ``extra_state()``
    (what the simulation keeps outside files), with every change to it counted; ``crash_at`` makes the N-th one the
    process's last."""

    def __init__(self, root, fs, systemd=None, extra_state=lambda: None):
        self.root = root
        self.fs = fs
        self.systemd = systemd
        self.extra_state = extra_state
        self.changes = 0
        self.crash_at = None
        for name in FS_CHANGES:
            self._count(fs, name, lambda *a, **k: True)
        if systemd is not None:
            before = []

            def mutating(argv, *a, **k):
                return len(systemd.mutating_calls) > before[-1]
            self._count(systemd, "run", mutating, before=lambda: before.append(len(systemd.mutating_calls)))

    def _count(self, obj, name, changed, before=lambda: None):
        inner = getattr(obj, name)

        def counted(*args, **kwargs):
            before()
            result = inner(*args, **kwargs)
            if changed(*args, **kwargs):
                self.changes += 1
                if self.crash_at is not None and self.changes >= self.crash_at:
                    raise Crash(self.changes)
            return result
        setattr(obj, name, counted)

    def snapshot(self):
        files, modes = {}, {}
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    files[path[len(self.root):]] = f.read().decode("utf-8", "replace")
                st = os.stat(path)
                modes[path[len(self.root):]] = (st.st_mode & 0o7777, st.st_uid)
        state = {"files": files, "modes": modes, "kernel": dict(getattr(self.fs, "state", {})),
                 "extra": self.extra_state()}
        if self.systemd is not None:
            state["loaded"] = self.systemd.loaded
            state["units"] = dict((n, (u.get("active"), u.get("running_slice"))) for n, u in self.systemd.units.items())
        return json.loads(json.dumps(state, sort_keys=True, default=repr))


@pytest.fixture
def run(run_module, monkeypatch):
    """run(main, args, check=False) -> the module's result; a Crash at the host's crash point goes through."""
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: None)
    return lambda main, args, check=False: run_module(main, **dict(args, _ansible_check_mode=check))


# -- the hosts and what each case applies ---------------------------------------------------------------------

def slices_host(tmp_path, monkeypatch):
    lab = CgroupLab(str(tmp_path), version=257)
    lab.wire_modules(monkeypatch, cgroup, placement, host_profile)
    return Host(lab.host.root, lab.kernel, lab.systemd)


SLICES = {
    "cgroups": [{"label": "inference slice", "name": "inference.slice", "create": True, "io": {"weight": 1000},
                 "memory": {"low": "8G", "min": "1G"}, "cpu": {"weight": 1000}},
                {"label": "training slice", "name": "training.slice", "create": True,
                 "io": {"weight": 50, "max": {"lab-nvme-a": {"wbps": "500MB", "riops": 20000}}},
                 "memory": {"high": "8G"}, "cpu": {"weight": 50}}],
    "placement": {"units": [{"name": "vllm.service", "slice": "inference.slice"}], "restart": True},
}

MODEL = {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000, "wbps": 1000000000, "wseqiops": 50000,
         "wrandiops": 50000}
QOS = {"rpct": 95, "rlat": 5000, "wpct": 95, "wlat": 5000, "min": 50, "max": 80}


def disks_host(tmp_path, monkeypatch):
    h = queue_host(str(tmp_path))
    h.iocost = SimIocost(h.sim, devices=("259:0", "259:1", "254:0"))
    for module in (host_profile, blk_queue, iocost):
        monkeypatch.setattr(module, "KernelFS", lambda: h.sim)
    monkeypatch.setattr(host_profile, "Runner", lambda module: None)
    return Host(h.root, h.sim)


DISKS = {
    "iocost": {"devices": [{"device": "lab-nvme-a", "model": MODEL, "qos": QOS},
                           {"device": "lab-nvme-b", "model": {"ctrl": "auto"}}]},
    "blk_queue": {"devices": [{"device": "lab-nvme-a", "scheduler": "mq-deadline", "read_ahead_kb": 256, "nr_requests": 256},
                              {"device": "lab-nvme-b", "scheduler": "none", "read_ahead_kb": 512}]},
}


def sysctl_host(tmp_path, monkeypatch):
    h = SysctlHost(str(tmp_path), release="6.12.118+deb13-amd64")
    os.makedirs(os.path.join(h.root, "run/systemd/system"))
    monkeypatch.setattr(sysctl, "KernelFS", lambda: h.sim)
    monkeypatch.setattr(host_profile, "KernelFS", lambda: h.sim)
    monkeypatch.setattr(host_profile, "Runner", lambda module: None)
    monkeypatch.setattr(_sysctl, "host_page_size", lambda: PAGE)
    monkeypatch.setattr(_sysctl.os, "uname", lambda: ("Linux", "lab", h.release, "#1", "x86_64"))
    return Host(h.root, h.sim)


SYSCTLS = {"sysctls": {"vm.swappiness": 10, "vm.dirty_bytes": 1073741824, "vm.dirty_background_bytes": 268435456,
                       "net.ipv4.tcp_rmem": [4096, 131072, 6291456], "debugfs.sched.base_slice_ns": 3000000}}

CASES = {
    "slices (host_profile: cgroups, placement)": (slices_host, host_profile.main, SLICES),
    "disks (host_profile: iocost, blk_queue)": (disks_host, host_profile.main, DISKS),
    "sysctl module": (sysctl_host, sysctl.main, SYSCTLS),
    "sysctl section (host_profile)": (sysctl_host, host_profile.main, {"sysctl": SYSCTLS}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_crash_point_is_reported_by_check_mode_and_repaired_by_the_next_run(case, tmp_path, monkeypatch, run):
    build, main, args = CASES[case]
    whole = build(tmp_path / "whole", monkeypatch)
    first = run(main, args)
    assert not first.get("failed") and first["changed"], first
    changes, expected = whole.changes, whole.snapshot()
    assert changes >= 3, "a case with so few changes proves little"
    assert run(main, args)["changed"] is False

    for n in range(1, changes):
        host = build(tmp_path / ("crash-%d" % n), monkeypatch)
        host.crash_at = n
        with pytest.raises(Crash):
            run(main, args)
        host.crash_at = None
        interrupted = host.snapshot()
        changes_before = host.changes
        verify = run(main, args, check=True)
        assert not verify.get("failed"), (n, verify)
        assert host.changes == changes_before, "check mode changed the host after crash %d" % n
        assert verify["changed"] or interrupted == expected, \
            "check mode calls the host converged after a crash after change %d of %d" % (n, changes)
        repaired = run(main, args)
        assert not repaired.get("failed"), (n, repaired)
        got, want = _unstarted_slices_aside(host.snapshot(), expected)
        assert got == want, _difference(got, want, n, changes)
        again = run(main, args)
        assert again["changed"] is False, (n, json.dumps(again.get("diff"), indent=1)[:3000], host.snapshot()["units"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_file_written_has_its_declared_mode_and_owner(case, tmp_path, monkeypatch, run):
    """Each file the collection writes gets the mode its declaration gives (persist: 0644, the boot helpers 0755),
    whatever the umask, and belongs to the user that ran the module (root on a host)."""
    build, main, args = CASES[case]
    host = build(tmp_path / "host", monkeypatch)
    old = os.umask(0o077)
    try:
        assert not run(main, args).get("failed")
    finally:
        os.umask(old)
    snap = host.snapshot()
    ours = dict((p, snap["modes"][p]) for p, text in snap["files"].items() if is_managed(text))
    assert ours, "the case writes files"
    for path, (mode, uid) in sorted(ours.items()):
        assert mode == (0o755 if path.startswith(LIBEXEC_DIR + "/") else 0o644) and uid == os.getuid(), (path, oct(mode))


def _unstarted_slices_aside(got, want):
    """``got`` and ``want`` without the running state of the slices ``got`` has loaded but not started (their
    cgroupfs directories and active flags); what systemd loaded for them stays compared."""
    got, want = json.loads(json.dumps(got)), json.loads(json.dumps(want))
    for unit, (active, _slice) in sorted((got.get("units") or {}).items()):
        if unit.endswith(".slice") and not active and want["units"].get(unit, [False])[0]:
            for snap in (got, want):
                snap["units"].pop(unit)
                top = "/sys/fs/cgroup/%s/" % unit
                for path in [p for p in snap["files"] if p.startswith(top)]:
                    snap["files"].pop(path)
                    snap["modes"].pop(path, None)
    return got, want


def _difference(got, want, n, changes):
    out = ["after a crash after change %d of %d the next run left a different host:" % (n, changes)]
    for part in sorted(set(got) | set(want)):
        g, w = got.get(part) or {}, want.get(part) or {}
        if isinstance(g, dict) and isinstance(w, dict):
            for key in sorted(set(g) | set(w)):
                if g.get(key) != w.get(key):
                    out.append("  %s %s: %r != %r" % (part, key, g.get(key), w.get(key)))
        elif g != w:
            out.append("  %s: %r != %r" % (part, g, w))
    return "\n".join(out[:20])
