# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The custom kernel's files after the scenario: what the inference role asked for is what the
kernel holds (testinfra, on the molecule instance)."""
import json

SLICE = "/sys/fs/cgroup/inference.slice"
GROUP = SLICE + "/lab-inference-runtime.service/payload"


def _nvme_majmins(host):
    out = host.check_output("lsblk -d -J -o NAME,MAJ:MIN,TYPE")
    return sorted(d["maj:min"] for d in json.loads(out)["blockdevices"] if d["name"].startswith("nvme"))


def test_custom_kernel_has_both_files(host):
    assert host.check_output("uname -r").endswith("vmlab")
    assert host.file(SLICE + "/io.latency").exists
    assert host.file(GROUP + "/io.prio.class").exists


def test_io_latency_target_on_every_nvme_disk(host):
    lines = host.check_output("cat %s/io.latency" % SLICE).splitlines()
    targets = dict(line.split(" ", 1) for line in lines)
    majmins = _nvme_majmins(host)
    assert len(majmins) == 2
    for majmin in majmins:
        assert targets.get(majmin) == "target=2000", lines


def test_io_latency_from_systemd(host):
    # Through systemd, not cgroupfs: the slice's drop-in carries it, so it survives a daemon-reload.
    # (systemd 252 lists each entry once per place that sets it: the drop-in and the live
    # set-property; the same value both times)
    out = host.check_output("systemctl show -P IODeviceLatencyTargetUSec inference.slice")
    entries = set(out.split())
    assert len([e for e in entries if e.startswith("/dev/disk/by-id/nvme-")]) == 2, out
    assert entries - {e for e in entries if e.startswith("/dev/disk/by-id/nvme-")} == {"2ms"}, out


def test_io_prio_class_in_the_runtimes_group(host):
    assert host.file(GROUP + "/io.prio.class").content_string.strip() == "restrict-to-be"
    # the slice and the runtime's own group keep the kernel's default: the policy is where the processes are
    assert host.file(SLICE + "/lab-inference-runtime.service/io.prio.class").content_string.strip() == "no-change"
    assert host.file(GROUP + "/cgroup.procs").content_string.split()
