# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""purge through AnsibleModule on a fake host: the owned-path registry finds what is there, each concern is
removed by its own module's code, files the collection does not own stay, check mode writes nothing."""

import os

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BLK_QUEUE_RULES, IOCOST_HELPER, IOCOST_RULES, METRICS_LAUNCHER, METRICS_OLD_LIB_DIR, NVME_ARBITRATION_HELPER,
    NVME_ARBITRATION_RULES, SYSCTL_CONF, stamped,
)
from ansible_collections.aiinfra.io_isolation.plugins.modules import cgroup, purge
from sim.lab import SystemdLab, lab_host

SLICE_DROPIN = "/etc/systemd/system/inference.slice.d/50-aiinfra-io-isolation.conf"
FOREIGN = {"/etc/udev/rules.d/90-iocost.rules": stamped("# systemd's own\n", "someone else").replace(
    "Managed by Ansible (aiinfra.io_isolation)", "vendor"), "/etc/systemd/system/other.slice": "[Unit]\n",
    "/etc/sysctl.d/10-local.conf": "vm.swappiness = 5\n"}


class Host(SystemdLab):
    def __init__(self, tmp_path, monkeypatch, run_module):
        h = lab_host(tmp_path, cgroup={"subtree": "cpu io memory pids"})
        h.write("/sys/fs/cgroup/io.cost.qos", "")
        h.write("/sys/fs/cgroup/io.cost.model", "")
        h.write("/proc/sys/vm/swappiness", "60\n")
        super(Host, self).__init__(h, init_scope=False)
        self.wire_modules(monkeypatch, cgroup, purge)
        self.run_module = run_module

    def converge(self):
        """What the roles and modules leave behind: a slice, rules of each family, sysctls, helpers."""
        result = self.run_module(cgroup.main, name="inference.slice", create=True, io={"weight": 500})
        assert result["changed"] and not result.get("failed"), result
        disks = dict((d.name, d) for d in DeviceResolver(self.kernel).list_disks())
        self.host.write(BLK_QUEUE_RULES.path(disks["nvme1n1"].stable_id),
                        BLK_QUEUE_RULES.render("x", ['ACTION=="add|change", ATTR{queue/scheduler}="none"']))
        self.host.write(IOCOST_RULES.path("wwn:a-disk-that-is-gone"), IOCOST_RULES.render("gone", ["# no rule"]))
        self.host.write(NVME_ARBITRATION_RULES.path("lab-nvme-a"), NVME_ARBITRATION_RULES.render("ctrl", ["# rule"]))
        self.host.write(IOCOST_HELPER.path, IOCOST_HELPER.content())
        self.host.write(NVME_ARBITRATION_HELPER.path, NVME_ARBITRATION_HELPER.content())
        self.host.write(SYSCTL_CONF, stamped("vm.swappiness = 10\n", "aiinfra.io_isolation.sysctl"))
        for path, text in FOREIGN.items():
            self.host.write(path, text)

    def files(self):
        out = {}
        for top in ("/etc", "/usr/local", "/srv", "/var/lib"):
            for dirpath, _dirs, names in os.walk(self.host.path(top)):
                for name in names:
                    path = os.path.join(dirpath, name)
                    with open(path) as f:
                        out[path[len(self.host.root):]] = f.read()
        return out


def test_purge_removes_every_owned_file_through_its_module_and_nothing_else(tmp_path, monkeypatch, run_module):
    host = Host(tmp_path, monkeypatch, run_module)
    host.converge()
    before = host.files()
    owned = sorted(p for p in before if p not in FOREIGN)
    assert SLICE_DROPIN in owned and "/etc/systemd/system/inference.slice" in owned and len(owned) == 8

    check = run_module(purge.main, _ansible_check_mode=True)
    assert not check.get("failed"), check
    assert check["changed"] and check["found"] == owned and check["left"] == []
    assert host.files() == before, "check mode wrote nothing"
    assert set(check["steps"]) == {"cgroup inference.slice", "blk_queue", "sysctl", "files"}
    assert "files: " + NVME_ARBITRATION_RULES.path("lab-nvme-a") in check["diff"]["before"]

    result = run_module(purge.main)
    assert not result.get("failed"), result
    assert result["changed"] and result["left"] == [] and result["found"] == owned
    assert host.files() == FOREIGN, "every owned file is gone, the others stay"

    again = run_module(purge.main)
    assert not again.get("failed") and again["changed"] is False and again["found"] == [] and again["steps"] == {}


def test_a_failing_concern_stops_the_purge_naming_it(tmp_path, monkeypatch, run_module):
    host = Host(tmp_path, monkeypatch, run_module)
    host.converge()
    before = host.files()
    host.systemd.fail("daemon-reload", err="Failed to reload daemon: Access denied", times=10)
    result = run_module(purge.main)
    assert result["failed"] and "purge stopped at cgroup inference.slice" in result["msg"]
    assert "Traceback" not in result["msg"] and result["concern"] == "cgroup inference.slice"
    assert host.files() == before, "the failed concern was restored and nothing after it ran"


# What the io_metrics role leaves on a host (roles/io_metrics), its outputs moved by the role's variables.
METRICS_STAMP = "# Managed by Ansible (aiinfra.io_isolation): aiinfra.io_isolation.io_metrics. Local edits will be overwritten.\n"
METRICS_SERVICE = (METRICS_STAMP + "[Service]\nType=oneshot\nExecStart=/usr/bin/python3 -I %s --textfile-dir /srv/prom "
                   "--slice inference.slice --verify-file '' --timeout 20 --latency-seconds 5 --latency-state "
                   "/var/lib/aiinfra-io_isolation/latency-state.json\n" % METRICS_LAUNCHER)


def test_purge_removes_the_metrics_exporter_and_what_it_wrote(tmp_path, monkeypatch, run_module):
    host = Host(tmp_path, monkeypatch, run_module)
    h = host.host
    h.write("/etc/systemd/system/aiinfra-io-metrics.service", METRICS_SERVICE)
    h.write("/etc/systemd/system/aiinfra-io-metrics.timer", METRICS_STAMP + "[Timer]\nOnUnitActiveSec=30s\n")
    h.write(METRICS_LAUNCHER, METRICS_STAMP + "import sys\n")
    code = METRICS_OLD_LIB_DIR + "/ansible_collections/aiinfra/io_isolation/plugins/module_utils"
    h.write(code + "/_observability/io_metrics.py", "# the collection's code, as 0.1.0 copied it\n")
    h.write(code + "/_observability/__pycache__/io_metrics.cpython-311.pyc", "x")
    h.write("/srv/prom/aiinfra_io_isolation.prom", "aiinfra_io_isolation_exporter_errors 0\n")
    h.write("/srv/prom/node.prom", "someone_elses 1\n")
    h.write("/var/lib/aiinfra-io_isolation/latency-state.json", "{}\n")
    # the default verify file is not the exporter's here (--verify-file ''): it stays
    h.write("/var/lib/aiinfra-io_isolation/verify-result.json", "{}\n")
    before = host.files()

    check = run_module(purge.main, _ansible_check_mode=True)
    assert not check.get("failed"), check
    assert check["changed"] and set(check["steps"]) == {"io_metrics"} and host.files() == before
    assert check["found"] == ["/etc/systemd/system/aiinfra-io-metrics.service",
                              "/etc/systemd/system/aiinfra-io-metrics.timer", METRICS_LAUNCHER]
    assert check["diff"]["before"]["io_metrics: %s/_observability/io_metrics.py" % code] == "(44 bytes)"
    assert host.systemd.mutating_calls == []

    result = run_module(purge.main)
    assert not result.get("failed"), result
    assert result["left"] == []
    left = host.files()
    assert sorted(p for p in left if "metrics" in p or "prom" in p) == ["/srv/prom/node.prom"]
    assert os.path.exists(h.path("/var/lib/aiinfra-io_isolation/verify-result.json"))
    assert not os.path.exists(h.path(METRICS_OLD_LIB_DIR)) and os.path.isdir(h.path("/srv/prom"))
    # the timer stopped and disabled and a run it started stopped before the files went, systemd reloaded after
    calls = [c[1:] for c in host.systemd.mutating_calls]
    assert calls == [["disable", "--now", "aiinfra-io-metrics.timer"], ["stop", "aiinfra-io-metrics.service"],
                     ["daemon-reload"]]

    again = run_module(purge.main)
    assert not again.get("failed") and again["changed"] is False and again["steps"] == {}


def test_metrics_outputs_default_where_the_unit_gives_none():
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as _metrics
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_metrics as _io_metrics
    assert _io_metrics.outputs(None) == [_metrics.TEXTFILE_DIR + "/" + _metrics.OUTPUT_NAME, _metrics.LATENCY_STATE,
                                         _metrics.VERIFY_FILE]
    assert _io_metrics.outputs(METRICS_SERVICE) == ["/srv/prom/aiinfra_io_isolation.prom",
                                                    "/var/lib/aiinfra-io_isolation/latency-state.json"]


def test_every_owner_of_a_registered_path_has_a_removal():
    """A file family the registry of owned paths declares is removed by its concern's ``purge`` in REMOVALS, or - for
    the rules and boot helpers no module's absent path removes - by purge's last step; nothing is left to a list in
    purge itself."""
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns.registry import REMOVALS
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import persist
    removed_by = set(r.__module__.rsplit(".", 1)[1] for r in REMOVALS)
    as_files = set(r.module for r in persist.UDEV_RULES) | set(h.module for h in persist.BOOT_HELPERS)
    owners = set(o for o, _pattern in persist.OWNED)
    assert owners - removed_by <= as_files
    assert owners - removed_by == {"nvme_arbitration"}
    assert removed_by <= owners
