# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""sysctl through AnsibleModule against a fake /proc/sys + debugfs whose files parse writes like 6.1/6.12."""

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as sc
from ansible_collections.aiinfra.io_isolation.plugins.modules import sysctl
from sim.sysctl import PAGE, SCHED_61, SysctlHost


def make(tmp_path, monkeypatch, run_module, release="6.12.118+deb13-amd64", sched=None, systemd=True):
    host = SysctlHost(tmp_path, release=release, sched=sched, extra={"/proc/sys/vm/drop_caches": "0"})
    host.warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, msg: host.warnings.append(msg))
    if systemd:
        os.makedirs(os.path.join(host.root, "run/systemd/system"))
    monkeypatch.setattr(sysctl, "KernelFS", lambda: host.sim)
    monkeypatch.setattr(sc, "host_page_size", lambda: PAGE)
    monkeypatch.setattr(sc.os, "uname", lambda: ("Linux", "lab", release, "#1", "x86_64"))
    host.module = lambda **args: run_module(sysctl.main, **args)
    return host


@pytest.fixture
def host(tmp_path, monkeypatch, run_module):
    return make(tmp_path, monkeypatch, run_module)


def written(host):
    return [(p, v) for p, v in host.sim.writes if p.startswith(("/proc", "/sys"))]


def test_set_persist_and_rerun_without_change(host):
    result = host.module(sysctls={"vm.swappiness": 10, "net.ipv4.tcp_rmem": [4096, 131072, 6291456],
                                  "vm.dirty_bytes": 1073741824})
    assert not result.get("failed"), result
    assert result["changed"]
    # tcp_rmem already held those tokens (tab-separated): only the two others were written
    assert written(host) == [("/proc/sys/vm/swappiness", "10"), ("/proc/sys/vm/dirty_bytes", "1073741824")]
    assert result["kernel"] == {"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                "vm.dirty_bytes": "1073741824", "vm.dirty_ratio": "0"}
    conf = host.file(sc.SYSCTL_CONF)
    assert conf.startswith("# Managed by Ansible (aiinfra.io_isolation)")
    assert "vm.swappiness = 10\n" in conf and "vm.dirty_bytes = 1073741824\n" in conf
    assert "dirty_ratio" not in conf
    assert result["persisted_to"] == {sc.SYSCTL_CONF: {"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                                       "vm.dirty_bytes": "1073741824"}}
    assert result["diff"]["before"]["vm.swappiness"] == "60" and result["diff"]["after"]["vm.swappiness"] == "10"
    assert result["diff"]["after"]["vm.dirty_ratio"] == "0"
    assert not any(k.startswith("/") for k in result["kernel"])
    host.sim.writes[:] = []
    again = host.module(sysctls={"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                 "vm.dirty_bytes": 1073741824})
    assert not again.get("failed"), again
    assert again["changed"] is False and host.sim.writes == []


def test_check_mode_reports_and_writes_nothing(host):
    result = host.module(sysctls={"vm.swappiness": 10}, _ansible_check_mode=True)
    assert result["changed"] and result["diff"]["after"]["vm.swappiness"] == "10"
    assert host.sim.writes == [] and host.file(sc.SYSCTL_CONF) is None
    assert result["kernel"]["vm.swappiness"] == "60"


def test_absent_removes_the_key_and_reports_the_live_value(host):
    host.module(sysctls={"vm.swappiness": 10, "vm.dirty_expire_centisecs": 1500})
    host.sim.writes[:] = []
    result = host.module(sysctls={"vm.dirty_expire_centisecs": {"state": "absent"}})
    assert result["changed"] and result["absent"] == ["vm.dirty_expire_centisecs"]
    assert result["kernel"] == {"vm.dirty_expire_centisecs": "1500"}
    assert written(host) == []
    conf = host.file(sc.SYSCTL_CONF)
    assert "dirty_expire" not in conf and "vm.swappiness = 10" in conf
    last = host.module(sysctls={"vm.swappiness": {"state": "absent"}})
    assert last["changed"] and host.file(sc.SYSCTL_CONF) is None


@pytest.mark.parametrize("sysctls, expect", [
    ({"vm.swapiness": 10}, "did you mean vm.swappiness"),
    ({"vm.dirty_bytes": 1073741824, "vm.dirty_ratio": 10}, "are exclusive"),
    ({"vm.drop_caches": 3}, "action trigger"),
    ({"vm.swappiness": "010"}, "base 0"),
    ({"vm.swappiness": True}, "is a boolean"),
    ({"vm.dirty_bytes": 4096}, "below two pages"),
    ({"vm.swappiness;reboot": 1}, "unknown sysctl"),
    ({"vm swappiness": 1}, "not a sysctl name"),
    ({"vm.swappiness": "10\nkernel.panic = 1"}, "newline"),
    ({"debugfs.sched.min_granularity_ns": 3000000}, "EEVDF (6.6) renamed it; did you mean debugfs.sched.base_slice_ns"),
    ({"debugfs.sched.base_slice_ns": 4294967296}, "4294967296"),
])
def test_bad_input_is_refused_before_any_write(host, sysctls, expect):
    result = host.module(sysctls=dict(sysctls, **{"vm.page-cluster": 0}))
    assert result["failed"] and expect in result["msg"], result["msg"]
    assert result["msg"].startswith("Invalid request (nothing was changed)")
    assert host.sim.writes == []
    assert host.file(sc.SYSCTL_CONF) is None and host.file(sc.TMPFILES_CONF) is None


def test_debugfs_tunable_is_set_persisted_with_tmpfiles_and_flagged(host):
    result = host.module(sysctls={"debugfs.sched.base_slice_ns": 2000000})
    assert not result.get("failed"), result
    assert written(host) == [("/sys/kernel/debug/sched/base_slice_ns", "2000000")]
    assert result["debug_interfaces"] == ["debugfs.sched.base_slice_ns"]
    assert result["kernel"] == {"debugfs.sched.base_slice_ns": "2000000"}
    assert "w /sys/kernel/debug/sched/base_slice_ns - - - - 2000000\n" in host.file(sc.TMPFILES_CONF)
    dropin = host.file(sc.TMPFILES_DROPIN)
    assert "After=sys-kernel-debug.mount" in dropin and dropin.startswith("# Managed by Ansible")
    assert any("debug interface" in w for w in host.warnings)
    gone = host.module(sysctls={"debugfs.sched.base_slice_ns": {"state": "absent"}})
    assert gone["changed"] and host.file(sc.TMPFILES_CONF) is None and host.file(sc.TMPFILES_DROPIN) is None
    assert gone["kernel"] == {"debugfs.sched.base_slice_ns": "2000000"}


def test_no_ordering_dropin_without_systemd(tmp_path, monkeypatch, run_module):
    host = make(tmp_path, monkeypatch, run_module, systemd=False)
    result = host.module(sysctls={"debugfs.sched.base_slice_ns": 2000000})
    assert not result.get("failed"), result
    assert host.file(sc.TMPFILES_CONF) and host.file(sc.TMPFILES_DROPIN) is None


@pytest.mark.parametrize("release, sched, target", [
    ("6.12.118+deb13-amd64", None, "debugfs.sched.base_slice_ns"),
    ("6.1.0-57-amd64", SCHED_61, "debugfs.sched.min_granularity_ns"),
])
def test_old_scheduler_name_maps_to_this_kernels_file(tmp_path, monkeypatch, run_module, release, sched, target):
    host = make(tmp_path, monkeypatch, run_module, release=release, sched=sched)
    result = host.module(sysctls={"kernel.sched_min_granularity_ns": 3500000})
    assert not result.get("failed"), result
    assert result["mapped"] == {"kernel.sched_min_granularity_ns": target}
    assert result["kernel"] == {target: "3500000"}
    assert any("mapped to %s" % target in w for w in host.warnings)


def test_a_kernel_refusal_restores_what_the_call_wrote(host):
    def refuse(line):
        raise OSError(22, "Invalid argument")
    host.sim.handlers["/proc/sys/vm/page-cluster"] = refuse
    result = host.module(sysctls={"vm.swappiness": 10, "vm.page-cluster": 2})
    assert result["failed"] and "EINVAL" in result["msg"] and "/proc/sys/vm/page-cluster" in result["msg"]
    assert host.get("/proc/sys/vm/swappiness") == "60"
    assert host.file(sc.SYSCTL_CONF) is None
