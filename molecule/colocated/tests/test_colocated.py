# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""After purge.yml: no file stamped by the collection is left, the slices have no settings of ours, and the container
runtimes' own files are the user's again, byte for byte and with their mode."""

import os

import pytest
import testinfra.utils.ansible_runner
import yaml

hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
STAMP = "Managed by Ansible (aiinfra.io_isolation)"
DIRS = ("/etc/udev/rules.d /etc/sysctl.d /etc/tmpfiles.d /etc/modprobe.d /etc/systemd/system /usr/local/libexec "
        "/var/lib/aiinfra-io_isolation")


def test_no_managed_file_is_left(host):
    found = host.run("grep -rlF '%s' %s 2>/dev/null" % (STAMP, DIRS))
    assert found.stdout.strip() == "", found.stdout


def test_slices_have_no_drop_ins_of_ours(host):
    for unit in ("inference.slice", "training.slice", "system.slice", "user.slice", "hostcritical.slice"):
        assert not host.file("/etc/systemd/system/%s.d/50-aiinfra-io-isolation.conf" % unit).exists


def test_the_host_tier_left_no_slice_drop_in_and_its_units_were_not_restarted(host):
    # purge removes the Slice= drop-ins with a daemon-reload and never restarts: the units moved at the boot stay in
    # the host tier's slice until their next start
    for unit in ("ssh.service", "systemd-journald.service"):
        assert not host.file("/etc/systemd/system/%s.d/90-aiinfra-io-isolation-slice.conf" % unit).exists
        assert host.run("systemctl show -P ControlGroup %s" % unit).stdout.startswith("/hostcritical.slice/")


def _chain_host(playbook):
    """The guest side_effect.yml runs one of its two chains on (its loop names each chain's playbook and host)."""
    with open(os.path.join(os.path.dirname(__file__), os.pardir, "side_effect.yml")) as f:
        plays = yaml.safe_load(f)
    for play in plays:
        for task in play.get("tasks", []):
            for item in task.get("loop", []) if isinstance(task.get("loop"), list) else []:
                if isinstance(item, dict) and item.get("playbook") == playbook:
                    return item["host"]
    raise AssertionError("side_effect.yml runs no chain %s" % playbook)


def _placement(host):
    """The placement figures, on the guest that ran the placement and reboot chain; the other guest has none."""
    import json
    if host.backend.get_hostname() != _chain_host("chain_reboot.yml"):
        assert not host.file("/var/tmp/aiinfra-lab-placement.json").exists
        pytest.skip("the placement chain (chain_reboot.yml) ran on the other guest")
    return json.loads(host.file("/var/tmp/aiinfra-lab-placement.json").content_string)


def test_placement_charged_the_services_reads_to_its_slice_before_and_after_the_reboot(host):
    """The side effect's figures (placement.yml, placement_after_reboot.yml): the reader listed in inference_units,
    moved there by site.yml's restart, and started there by the boot, had its reads charged to inference.slice."""
    kept = _placement(host)
    for when in ("placed", "after_reboot"):
        m = kept[when]
        assert m["cgroup"] == "/inference.slice/lab-reader.service", (when, m)
        assert m["inference_rios"] >= 200 and m["inference_share"] >= 0.9, (when, m)


def test_placement_the_service_left_the_list_without_a_trace(host):
    """placement_after_reboot.yml took the reader off the list through the placement module's absent path: its
    Slice= drop-in and the drop-in directory are gone, systemd gives the unit its own slice again, and the unit itself
    (not the collection's) is still there."""
    _placement(host)
    assert not host.file("/etc/systemd/system/lab-reader.service.d").exists
    assert host.run("systemctl show -P Slice lab-reader.service").stdout.strip() == "system.slice"
    assert host.file("/etc/systemd/system/lab-reader.service").exists


def test_runtime_files_are_the_users_byte_for_byte(host):
    # the copies converge.yml wrote beside the user's files before the rollout merged into them
    for path, copy in (("/etc/docker/daemon.json", "/root/lab-originals/daemon.json"),
                       ("/etc/containers/containers.conf", "/root/lab-originals/containers.conf")):
        same = host.run("cmp %s %s" % (path, copy))
        assert same.rc == 0, same.stdout + same.stderr
        assert host.file(path).mode == 0o640
    assert host.run("ls -A /var/lib/aiinfra-io_isolation/originals 2>/dev/null").stdout.strip() == ""
