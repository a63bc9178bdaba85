# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""io_facts through AnsibleModule (set_module_args style) against fake hosts."""

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import kernelfs as _kernelfs
from ansible_collections.aiinfra.io_isolation.plugins.modules import io_facts
from sim.host import FakeHost


@pytest.fixture
def run(monkeypatch, run_module):
    """run(host, **args) -> the module's result dict (exit or fail)."""
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)

    def _run(host, check_mode=False, **args):
        monkeypatch.setattr(io_facts, "KernelFS", lambda: _kernelfs.KernelFS(host.root))
        if check_mode:
            args["_ansible_check_mode"] = True
        return run_module(io_facts.main, **args)
    return _run


def lab_like_host(tmp_path):
    h = FakeHost(tmp_path)
    h.add_virtio(name="vda", majmin="254:0", serial="lab-root")
    h.add_nvme(ctrl=0, serial="lab-nvme-a", eui64="0000000000000001", majmin="259:0")
    h.add_nvme(ctrl=1, serial="lab-nvme-b", eui64="0000000000000002", majmin="259:1")
    h.add_loop(index=0)
    h.add_cgroup_root(subtree="io memory pids")
    h.add_cgroup("inference.slice")
    h.write("/sys/fs/cgroup/io.cost.model",
            "259:0 ctrl=user model=linear rbps=2000000000 rseqiops=100000 rrandiops=100000 wbps=1000000000 "
            "wseqiops=50000 wrandiops=50000")
    h.write("/sys/fs/cgroup/io.cost.qos",
            "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n"
            "259:1 enable=0 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00")
    h.write("/sys/fs/cgroup/inference.slice/io.weight", "default 1000\n259:0 800")
    h.write("/sys/fs/cgroup/inference.slice/memory.low", "8589934592")
    h.write("/sys/fs/cgroup/inference.slice/io.stat",
            "259:0 rbytes=20512768 wbytes=0 rios=5008 wios=0 dbytes=0 dios=0 cost.usage=50080")
    h.write("/boot/config-6.1.0-50-amd64", "CONFIG_BLK_CGROUP_IOLATENCY is not set\n# CONFIG_BLK_CGROUP_IOPRIO is not set\n")
    return h


def test_facts_on_a_lab_like_host(tmp_path, run):
    h = lab_like_host(tmp_path)
    result = run(h, cgroups=["inference.slice", "training.slice"])
    assert result["changed"] is False
    f = result["ansible_facts"]["io_isolation"]
    json.dumps(f)  # facts must be plain JSON
    caps = f["capabilities"]
    assert caps["cgroup"]["mode"] == "unified" and caps["cgroup"]["iocost"] is True
    assert caps["cgroup"]["io_files"]["io.latency"] is False and caps["cgroup"]["io_files"]["io.weight"] is True
    assert sorted(f["devices"]) == ["nvme0n1", "nvme1n1", "vda"], "empty loop devices are skipped"
    n0 = f["devices"]["nvme0n1"]
    assert n0["identity"]["majmin"] == "259:0" and n0["identity"]["serial"] == "lab-nvme-a"
    assert n0["identity"]["stable_id"] and "259:0" not in n0["identity"]["stable_id"]
    assert n0["iocost"]["enabled"] is True and n0["iocost"]["model"]["rbps"] == 2000000000
    assert n0["iocost"]["qos"]["rpct"] == "95.00"
    assert f["devices"]["nvme1n1"]["iocost"]["enabled"] is False
    assert f["devices"]["vda"]["iocost"] == {"enabled": False, "model": None, "qos": None, "initialised": False}
    assert n0["queue"]["scheduler"] == "none" and "mq-deadline" in n0["queue"]["schedulers_available"]
    assert n0["queue"]["nr_requests"] == 1023
    assert [q["cpu_list"] for q in n0["hw_queues"]] == [[0], [1]]
    assert f["nvme"]["nvme0"]["serial"] == "lab-nvme-a" and f["nvme"]["nvme0"]["namespaces"] == ["nvme0n1"]
    assert f["nvme"]["nvme0"]["queues"] == {"default": 2, "read": 0, "poll": 0, "source": "debugfs"}
    assert f["nvme_parameters"]["poll_queues"] == 0
    inf = f["cgroups"]["inference.slice"]
    assert inf["exists"] and inf["files"]["io.weight"] == {"default": 1000, "259:0": 800}
    assert inf["files"]["memory.low"] == 8589934592 and inf["files"]["memory.high"] == "max"
    assert inf["files"]["io.stat"]["259:0"]["cost.usage"] == 50080
    assert f["cgroups"]["training.slice"] == {"name": "training.slice", "path": "/sys/fs/cgroup/training.slice",
                                              "exists": False}
    assert f["pressure"]["io"]["some"]["total"] == 0
    # No memory-block sysfs here: MemTotal rounded down to 128 MiB (1966.7 MiB -> 1920 MiB).
    assert f["host"] == {"memory_bytes": 2013936 * 1024, "memory_stable_bytes": 1920 << 20, "cpus_online": 2,
                         "cpus_possible": 2}
    assert f["warnings"] == []


def test_shares_of_ram_use_the_memory_blocks_which_do_not_move_between_boots(tmp_path, run):
    """MemTotal moved by 4 KiB between two boots of the lab's 6.12 guest; online memory blocks did not."""
    h = lab_like_host(tmp_path)
    h.write("/sys/devices/system/memory/block_size_bytes", "8000000\n")
    for n in range(16):
        h.write("/sys/devices/system/memory/memory%d/state" % n, "online\n" if n != 3 else "offline\n")
    first = run(h)["ansible_facts"]["io_isolation"]["host"]
    h.write("/proc/meminfo", "MemTotal:        2013940 kB\n")
    second = run(h)["ansible_facts"]["io_isolation"]["host"]
    assert first["memory_stable_bytes"] == second["memory_stable_bytes"] == 15 * (128 << 20)
    assert first["memory_bytes"] != second["memory_bytes"]


def test_poll_queues_are_seen_in_the_split(tmp_path, run):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, hw_queues=1, poll_queues=1)
    h.add_cgroup_root()
    f = run(h)["ansible_facts"]["io_isolation"]
    assert f["nvme"]["nvme0"]["queues"]["poll"] == 1
    assert f["devices"]["nvme0n1"]["queue"]["io_poll"] == 1


def test_hybrid_host_reports_instead_of_failing(tmp_path, run):
    h = FakeHost(tmp_path, debugfs=False)
    h.add_virtio(name="vda", serial="x")
    h.add_cgroup_root(mode="hybrid")
    result = run(h, check_mode=True, cgroups=["inference.slice"])
    f = result["ansible_facts"]["io_isolation"]
    assert f["capabilities"]["cgroup"]["mode"] == "hybrid"
    assert "unified" in f["cgroups"]["inference.slice"]["error"]
    assert f["devices"]["vda"]["hw_queues"][0]["type"] is None


def test_device_filter_and_bad_selector(tmp_path, run):
    h = lab_like_host(tmp_path)
    f = run(h, devices=["259:1"])["ansible_facts"]["io_isolation"]
    assert list(f["devices"]) == ["nvme1n1"]
    failed = run(h, devices=["nvme9n9"])
    assert failed["failed"] and "nvme9n9" in failed["msg"] and "nvme0n1" in failed["msg"]


def test_bad_cgroup_name_is_reported(tmp_path, run):
    h = lab_like_host(tmp_path)
    f = run(h, cgroups=["../../etc"])["ansible_facts"]["io_isolation"]
    assert "'..'" in f["cgroups"]["../../etc"]["error"]


def test_unparsable_file_becomes_a_warning(tmp_path, run):
    h = lab_like_host(tmp_path)
    h.write("/sys/fs/cgroup/inference.slice/io.weight", "garbage here too")
    result = run(h, cgroups=["inference.slice"])
    f = result["ansible_facts"]["io_isolation"]
    assert f["cgroups"]["inference.slice"]["files"]["io.weight"] == {"unparsed": "garbage here too"}
    assert any("io.weight" in w for w in f["warnings"])


def test_multipath_head_is_reported_with_its_path_queues(tmp_path, run):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, serial="lab-nvme-a")
    h.add_nvme_multipath_head(subsys=2, ns=1, ctrls=(2, 3), serial="lab-nvme-mp")
    h.add_cgroup_root()
    # Observed on 6.1: reading wbt_lat_usec of the bio-based head gives EINVAL.
    f = run(h)["ansible_facts"]["io_isolation"]
    head = f["devices"]["nvme2n1"]
    assert head["identity"]["kind"] == "nvme-multipath-head" and head["identity"]["has_mq"] is False
    assert head["hw_queues"] == []
    assert f["nvme"]["nvme2"]["namespaces"] == ["nvme2n1"] and f["nvme"]["nvme3"]["namespaces"] == ["nvme2n1"]
    assert f["nvme"]["nvme2"]["queues"]["source"] == "debugfs"
    assert "nvme2c2n1" not in f["devices"], "hidden path disks are not whole disks of their own"


def test_unreadable_queue_attribute_is_not_applicable(tmp_path, run, monkeypatch):
    import errno
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0)
    h.add_cgroup_root()
    real_read = _kernelfs.KernelFS.read

    def read(self, path, default=None):
        if path.endswith("/queue/wbt_lat_usec"):
            raise _kernelfs.KernelFileError(path, None, errno.EINVAL, action="read")
        if path.endswith("/hctx0/type"):
            raise _kernelfs.KernelFileError(path, None, errno.EACCES, action="read")
        return real_read(self, path, default)
    monkeypatch.setattr(_kernelfs.KernelFS, "read", read)
    f = run(h)["ansible_facts"]["io_isolation"]
    assert f["devices"]["nvme0n1"]["queue"]["wbt_lat_usec"] is None
    assert not any("wbt_lat_usec" in w for w in f["warnings"])
    assert any("hctx0/type" in w and "EACCES" in w for w in f["warnings"])
    assert f["nvme"]["nvme0"]["queues"]["source"].startswith("unavailable")


def test_tenancy_reports_the_slices_and_the_disks_io_without_sleeping_at_interval_zero(tmp_path, run):
    h = lab_like_host(tmp_path)
    h.write("/sys/fs/cgroup/inference.slice/cgroup.procs", "")
    h.add_cgroup("system.slice/vllm.service")
    h.write("/sys/fs/cgroup/system.slice/vllm.service/cgroup.procs", "4242")
    h.write("/proc/4242/comm", "vllm\n")
    result = run(h, tenancy={"slices": [{"name": "inference.slice", "workloads": [{"name": "vllm.service"}]}],
                             "devices": ["lab-nvme-a"], "interval": 0})
    t = result["ansible_facts"]["io_isolation"]["tenancy"]
    assert result["changed"] is False
    assert t["slices"]["inference.slice"]["workloads"][0]["cgroup"] == "/system.slice/vllm.service"
    assert t["drift"] == [
        "service vllm.service (listed for inference.slice as vllm.service) runs in /system.slice/vllm.service, "
        "outside its slice",
        "inference.slice lists 1 workload(s) (vllm.service) and no process runs in it"]
    d = t["disks"]["nvme0n1"]
    assert d["judged"] is False and d["tenants"]["inference.slice"]["rios"] == 5008


def test_a_bad_tenancy_request_fails_clearly(tmp_path, run):
    result = run(lab_like_host(tmp_path), tenancy={"slices": [{"name": "inference.slice",
                                                               "workloads": [{"name": "vllm"}]}]})
    assert result["failed"] and "workload 'vllm' of kind service must be a service name" in result["msg"]
