# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capability detection from files: cgroup mode, io.* files, debugfs sched knobs, tools."""

import gzip
import json

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import capabilities as caps
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError, Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n" \
          "debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0\n"
HYBRID = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n" \
         "cgroup /sys/fs/cgroup/blkio cgroup rw,blkio 0 0\n"


def write(root, path, text):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def host(tmp_path):
    write(tmp_path, "/proc/mounts", UNIFIED)
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
    write(tmp_path, "/sys/fs/cgroup/cgroup.subtree_control", "memory pids\n")
    write(tmp_path, "/sys/fs/cgroup/io.cost.qos", "")
    write(tmp_path, "/sys/fs/cgroup/io.cost.model", "")
    write(tmp_path, "/proc/pressure/io", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    return tmp_path


def test_unified_without_io_child_falls_back_to_kernel_config(host):
    write(host, "/boot/config-6.1.0-50-amd64",
          "CONFIG_BLK_CGROUP_IOCOST=y\n# CONFIG_BLK_CGROUP_IOLATENCY is not set\nCONFIG_BLK_DEV_THROTTLING=y\n")
    c = caps.detect(KernelFS(str(host)), release="6.1.0-50-amd64", systemd_version=252,
                    which=lambda t: "/usr/bin/" + t if t == "fio" else None)
    cg = c["cgroup"]
    assert cg["mode"] == "unified" and cg["unified"] and cg["iocost"]
    assert cg["controllers"][:3] == ["cpuset", "cpu", "io"] and cg["subtree_control"] == ["memory", "pids"]
    assert cg["io_files"]["io.weight"] is True and cg["io_files"]["io.latency"] is False
    assert cg["io_files"]["io.prio.class"] is False  # not in the config: this kernel has no such option
    assert cg["io_files_source"] == "kernel config"
    assert c["systemd"] == {"present": True, "version": 252}
    assert c["tools"]["fio"] == "/usr/bin/fio" and c["tools"]["nvme"] is None
    assert c["kernel"]["version"] == [6, 1, 0] and c["psi"] is True
    assert c["debugfs"]["mounted"] is True and c["debugfs"]["sched"] is None
    json.dumps(c)


def test_io_files_read_from_a_child_with_io(host):
    write(host, "/sys/fs/cgroup/system.slice/cgroup.controllers", "cpu io memory pids\n")
    write(host, "/sys/fs/cgroup/system.slice/io.weight", "default 100\n")
    write(host, "/sys/fs/cgroup/system.slice/io.max", "")
    write(host, "/sys/fs/cgroup/system.slice/io.prio.class", "no-change\n")
    write(host, "/sys/fs/cgroup/init.scope/cgroup.controllers", "memory pids\n")
    c = caps.detect(KernelFS(str(host)), release="6.1.192-vmlab")
    files = c["cgroup"]["io_files"]
    assert files["io.weight"] and files["io.max"] and files["io.prio.class"]
    assert files["io.latency"] is False and files["io.low"] is False
    assert c["cgroup"]["io_files_source"] == "cgroup /sys/fs/cgroup/system.slice"


def test_proc_config_gz_fallback(host):
    (host / "proc" / "config.gz").write_bytes(gzip.compress(b"CONFIG_BLK_CGROUP_IOLATENCY=y\n"))
    c = caps.detect(KernelFS(str(host)), release="6.1.192-vmlab")
    assert c["cgroup"]["io_files"]["io.latency"] is True


def test_corrupt_config_gz_is_unknown(host):
    (host / "proc" / "config.gz").write_bytes(b"not gzip")
    c = caps.detect(KernelFS(str(host)), release="6.1.192-vmlab")
    assert c["cgroup"]["io_files"]["io.latency"] is None and c["cgroup"]["io_files_source"] == "unknown"


@pytest.mark.parametrize("entries, base, mingran", [
    (["base_slice_ns", "features"], True, False),
    (["min_granularity_ns", "latency_ns"], False, True),
])
def test_debugfs_sched_knobs(host, entries, base, mingran):
    for e in entries:
        write(host, "/sys/kernel/debug/sched/" + e, "1\n")
    c = caps.detect(KernelFS(str(host)), release="6.12.0")
    assert c["debugfs"]["sched"] == {"base_slice_ns": base, "min_granularity_ns": mingran}


def test_hybrid_host_is_reported_not_failed(tmp_path):
    write(tmp_path, "/proc/mounts", HYBRID)
    c = caps.detect(KernelFS(str(tmp_path)), release="5.10.0")
    assert c["cgroup"]["mode"] == "hybrid" and c["cgroup"]["unified"] is False
    assert c["cgroup"]["mountpoint"] == "/sys/fs/cgroup/unified" and c["cgroup"]["controllers"] == []
    assert c["systemd"]["present"] is False


@pytest.mark.parametrize("mounts, mode", [
    ("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n", "legacy"),
    ("cgroup2 /mnt/cg cgroup2 rw 0 0\n", "unified"),
    ("proc /proc proc rw 0 0\nshort line\n", "none"),
])
def test_cgroup_mode(mounts, mode):
    assert caps.cgroup_mode(caps.parse_mounts(mounts))[0] == mode


def test_release_and_systemd_version_parsing():
    assert caps.parse_kernel_release("6.12.117+deb13-amd64") == (6, 12, 117)
    assert caps.parse_kernel_release("6.1") == (6, 1, 0)
    assert caps.parse_kernel_release("garbage") == (0, 0, 0)
    assert caps.parse_systemd_version("systemd 252 (252.39-1~deb12u1)\n+PAM +AUDIT") == 252
    assert caps.parse_systemd_version("") is None


class FakeModule(object):
    def __init__(self, rc=0, out="", err=""):
        self.calls = []
        self.answer = (rc, out, err)

    def run_command(self, argv, environ_update=None, data=None, check_rc=False):
        self.calls.append((argv, environ_update))
        return self.answer

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name if name == "nvme" else None


def test_runner_uses_argv_and_c_locale():
    m = FakeModule(out='{"a": 1}')
    r = Runner(m)
    assert r.run_json(["nvme", "list", "-o", "json"]) == {"a": 1}
    argv, env = m.calls[0]
    assert argv == ["nvme", "list", "-o", "json"] and env["LANG"] == "C" and env["LC_ALL"] == "C"
    assert r.which("nvme") == "/usr/bin/nvme" and r.which("fio") is None
    with pytest.raises(TypeError):
        r.run("nvme list")


def test_runner_checks_rc_stderr_and_json():
    with pytest.raises(CommandError, match="rc=1: boom"):
        Runner(FakeModule(rc=1, err="boom")).run(["x"])
    assert Runner(FakeModule(rc=1, err="boom")).run(["x"], check=False)[0] == 1
    with pytest.raises(CommandError, match="sysctl: cannot stat"):
        Runner(FakeModule(err="sysctl: cannot stat /proc/sys/x")).run(["sysctl", "-w", "x=1"], stderr_is_error=True)
    with pytest.raises(CommandError, match="not JSON"):
        Runner(FakeModule(out="plain")).run_json(["x"])


def test_bfq_as_a_module_is_reported_as_module(host):
    write(host, "/boot/config-6.1.0-50-amd64", "CONFIG_IOSCHED_BFQ=m\nCONFIG_BFQ_GROUP_IOSCHED=y\n")
    c = caps.detect(KernelFS(str(host)), release="6.1.0-50-amd64")
    assert c["cgroup"]["io_files"]["io.bfq.weight"] == "module"


# -- the memory substrate (issue 37) ---------------------------------------------------------------------------------
DEBIAN12 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0\n"


def test_memory_substrate_reads_the_mount_option_swap_and_swappiness(host):
    write(host, "/proc/mounts", DEBIAN12)
    write(host, "/proc/meminfo", "MemTotal:        2013936 kB\nSwapTotal:       1048572 kB\nSwapFree:  1 kB\n")
    write(host, "/proc/sys/vm/swappiness", "10\n")
    sub = caps.memory_substrate(KernelFS(str(host)))
    assert sub == {"cgroup_mode": "unified", "memory_recursiveprot": True, "swap_bytes": 1048572 * 1024,
                   "swappiness": 10, "mount_options": ["rw", "nosuid", "nodev", "noexec", "relatime", "nsdelegate",
                                                       "memory_recursiveprot"]}
    assert caps.detect(KernelFS(str(host)), release="6.1.0-50-amd64")["memory"] == sub
    assert caps.substrate_findings(sub, ["inference.slice"]) == ([], [])


def test_memory_substrate_on_a_host_without_the_option_swap_or_readable_files(host):
    sub = caps.memory_substrate(KernelFS(str(host)))   # UNIFIED: no memory_recursiveprot; no meminfo, no swappiness
    assert (sub["memory_recursiveprot"], sub["swap_bytes"], sub["swappiness"]) == (False, None, None)
    errors, warnings = caps.substrate_findings(dict(sub, swap_bytes=0), ["inference.slice", "hostcritical.slice"])
    assert len(errors) == 1 and errors[0].startswith(
        "memory.low/memory.min on inference.slice, hostcritical.slice would not protect the services in it")
    assert "(options: rw,nosuid,nodev,noexec,relatime)" in errors[0]
    assert len(warnings) == 1 and "no swap on this host (SwapTotal 0)" in warnings[0]
    assert caps.substrate_findings(sub, []) == ([], []), "nothing protected: nothing to say"
    assert caps.substrate_findings(dict(sub, cgroup_mode="legacy"), ["a.slice"]) == ([], [])


@pytest.mark.parametrize("text, want", [
    ("SwapTotal:       1048572 kB\n", 1048572 * 1024), ("SwapTotal: 0 kB", 0), ("SwapTotal: 12", 12),
    ("SwapTotal: x kB", None), ("MemTotal: 5 kB", None), ("", None), (None, None)])
def test_meminfo_bytes(text, want):
    assert caps.meminfo_bytes(text, "SwapTotal") == want


def test_mount_options_of_the_mount_in_force():
    mounts = caps.parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0")
    assert caps.mount_options(mounts, "/sys/fs/cgroup") == ["rw", "nsdelegate"]
    assert caps.mount_options(mounts, "/nowhere") == []
