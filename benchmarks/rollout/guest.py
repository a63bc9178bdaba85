# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs in the lab guest (python3 - ACTION SPEC, SPEC as base64 JSON; labvm.guest_script): what the
rollout benchmark reads and resets between runs, outside the timed playbook runs.

  state  {disks, slices, sysctls}       the kernel's values for the benchmark's settings, normalised
                                        (iocost "off" whatever its lines say while enable=0)
  reset  {disks, slices, files, reference}  back to the unconfigured host: the hand-written playbook's
                                        files removed, the slices stopped, iocost off, the block queues
                                        and sysctls at the reference (the state after boot), udev and
                                        systemd reloaded; prints the state afterwards

The collection's own files are removed before this by playbooks/purge.yml. Python 3.9+ stdlib only.
"""

import base64
import glob
import json
import os
import subprocess
import sys

CG = "/sys/fs/cgroup"
SLICE_FILES = ("io.weight", "memory.low", "memory.min", "memory.high", "cpu.weight")
# Writing one of each pair makes the kernel show the other as 0: reset writes the non-zero one.
DIRTY_PAIRS = (("vm.dirty_bytes", "vm.dirty_ratio"), ("vm.dirty_background_bytes", "vm.dirty_background_ratio"))
PERSISTED = ("/etc/udev/rules.d/*", "/etc/sysctl.d/*", "/etc/modprobe.d/*", "/etc/systemd/system/*.slice",
             "/etc/systemd/system/*.slice.d/*", "/run/systemd/system.control/*.slice.d/*",
             "/usr/local/libexec/aiinfra-io_isolation/*")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def disks(serials):
    """{serial: (name, MAJ:MIN)} of the whole disks with those serials."""
    out = {}
    for block in sorted(glob.glob("/sys/block/*")):
        serial = read(os.path.join(block, "device", "serial")) or read(os.path.join(block, "serial"))
        if serial and serial.strip() in serials:
            out[serial.strip()] = (os.path.basename(block), read(os.path.join(block, "dev")))
    return out


def cost_lines(name):
    """{MAJ:MIN: the rest of the line} of /sys/fs/cgroup/io.cost.<name>."""
    out = {}
    for line in (read(os.path.join(CG, "io.cost." + name)) or "").splitlines():
        key, rest = (line.split(" ", 1) + [""])[:2]
        out[key] = rest
    return out


def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def sysctl_names(names):
    """The names asked for and the partners of the dirty pairs among them."""
    out = list(names)
    for pair in DIRTY_PAIRS:
        if set(pair) & set(out):
            out += [n for n in pair if n not in out]
    return sorted(out)


def nvme_options():
    """The NVMe driver options the next module load gets, from modprobe's view of every file."""
    res = subprocess.run(["modprobe", "-c"], stdout=subprocess.PIPE, universal_newlines=True, check=False)
    opts = {}
    for line in res.stdout.splitlines():
        words = line.split()
        if len(words) > 2 and words[:2] == ["options", "nvme"]:
            opts.update(w.partition("=")[::2] for w in words[2:])
    return opts


def state(spec):
    model, qos = cost_lines("model"), cost_lines("qos")
    out = {"disks": {}, "sysctls": {}, "slices": {}, "nvme_options": nvme_options(),
           "persisted": sorted(p for pattern in PERSISTED for p in glob.glob(pattern))}
    for serial, (name, majmin) in sorted(disks(spec["disks"]).items()):
        q = os.path.join("/sys/block", name, "queue")
        enabled = "enable=1" in qos.get(majmin, "")
        out["disks"][serial] = {
            "iocost_model": model.get(majmin) if enabled else "off",
            "iocost_qos": qos.get(majmin) if enabled else "off",
            "scheduler": read(os.path.join(q, "scheduler")),
            "read_ahead_kb": read(os.path.join(q, "read_ahead_kb")),
        }
    for name in sysctl_names(spec["sysctls"]):
        out["sysctls"][name] = read(sysctl_path(name))
    for unit in spec["slices"]:
        d = os.path.join(CG, unit)
        out["slices"][unit] = {f: read(os.path.join(d, f)) for f in SLICE_FILES} if os.path.isdir(d) else None
    return out


def run(*argv):
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def reset(spec):
    ref = spec["reference"]
    for path in spec["files"]:
        if os.path.isdir(path):
            for sub in glob.glob(os.path.join(path, "*")):
                os.unlink(sub)
            os.rmdir(path)
        elif os.path.lexists(path):
            os.unlink(path)
    for unit in spec["slices"]:
        run("systemctl", "stop", unit)
        run("rm", "-rf", "/run/systemd/system.control/%s.d" % unit)
    run("systemctl", "daemon-reload")
    run("systemctl", "reset-failed")
    run("udevadm", "control", "--reload")
    for serial, (name, majmin) in sorted(disks(spec["disks"]).items()):
        if majmin in cost_lines("qos"):
            write(os.path.join(CG, "io.cost.qos"), "%s enable=0 ctrl=auto" % majmin)
            write(os.path.join(CG, "io.cost.model"), "%s ctrl=auto" % majmin)
        q = os.path.join("/sys/block", name, "queue")
        sched = ref["disks"][serial]["scheduler"].split("[")[1].split("]")[0]
        write(os.path.join(q, "scheduler"), sched)
        write(os.path.join(q, "read_ahead_kb"), ref["disks"][serial]["read_ahead_kb"])
    paired = set()
    for pair in DIRTY_PAIRS:
        if all(n in ref["sysctls"] for n in pair):
            paired.update(pair)
            name = pair[0] if ref["sysctls"][pair[0]] != "0" else pair[1]
            write(sysctl_path(name), ref["sysctls"][name])
    for name, value in ref["sysctls"].items():
        if name not in paired:
            write(sysctl_path(name), value)
    return state(spec)


def main():
    action = sys.argv[1]
    spec = json.loads(base64.b64decode(sys.argv[2])) if len(sys.argv) > 2 else {}
    print(json.dumps({"state": state, "reset": reset}[action](spec), sort_keys=True))


if __name__ == "__main__":
    main()
