# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the managed host's kernel and userland can do, found by looking, never assumed.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Debian kernels build neither io.latency nor io.prio.class, io.low is gone since 6.10, the
scheduler tunables moved to debugfs in 5.13 and were renamed with EEVDF in 6.6: every module
asks this layer instead of guessing from version numbers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import CGROUP_ROOT

# io.* files that only exist in non-root cgroups, and the kernel options that build each; "m"
# (a module) means the file appears once the module is loaded (bfq: when a disk selects it).
CHILD_IO_FILES = {
    "io.weight": ("CONFIG_BLK_CGROUP_IOCOST",),
    "io.max": ("CONFIG_BLK_DEV_THROTTLING",),
    "io.latency": ("CONFIG_BLK_CGROUP_IOLATENCY",),
    "io.prio.class": ("CONFIG_BLK_CGROUP_IOPRIO",),
    "io.low": ("CONFIG_BLK_DEV_THROTTLING_LOW",),
    "io.bfq.weight": ("CONFIG_IOSCHED_BFQ", "CONFIG_BFQ_GROUP_IOSCHED"),
}
TOOLS = ("nvme", "fio", "systemctl", "udevadm", "sysctl", "systemd-run")


def parse_mounts(text):
    """[(device, mountpoint, fstype, options)] from /proc/mounts text."""
    out = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((parts[0], parts[1].replace("\\040", " "), parts[2], parts[3]))
    return out


def cgroup_mode(mounts):
    """'unified' (cgroup2 on /sys/fs/cgroup), 'hybrid' (v1 + cgroup2 elsewhere), 'legacy' or 'none'."""
    types = dict((mp, fstype) for _dev, mp, fstype, _opt in mounts)
    if types.get(CGROUP_ROOT) == "cgroup2":
        return "unified", CGROUP_ROOT
    v2 = [mp for mp, fstype in types.items() if fstype == "cgroup2"]
    v1 = [mp for mp, fstype in types.items() if fstype == "cgroup"]
    if v1 and v2:
        return "hybrid", sorted(v2)[0]
    if v1:
        return "legacy", None
    if v2:
        return "unified", sorted(v2)[0]
    return "none", None


def mount_options(mounts, mountpoint):
    """The options of the last mount on ``mountpoint`` (the one in force), as a list; [] when nothing is mounted."""
    found = [opts for _dev, mp, _fstype, opts in mounts if mp == mountpoint]
    return found[-1].split(",") if found else []


def meminfo_bytes(text, key):
    """A /proc/meminfo line's value in bytes (``SwapTotal:  1048572 kB``), or None."""
    for line in (text or "").splitlines():
        name, _sep, rest = line.partition(":")
        if name.strip() == key:
            parts = rest.split()
            try:
                return int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
            except (IndexError, ValueError):
                return None
    return None


def memory_substrate(fs):
    """What memory protection (memory.low, memory.min) stands on, read from the host (issue 37):

    - ``memory_recursiveprot``: the cgroup2 mount option (systemd 247+ mounts with it where the kernel, 5.7+, has
      it). Without it a slice's memory.low/min protects only pages charged to the slice's own cgroup; the services
      in it (child cgroups with no protection of their own) get none, because the kernel hands protection down
      only to children that claim it.
    - ``swap_bytes`` (``SwapTotal``) and ``swappiness``: without swap, anonymous memory cannot be reclaimed at all.
    """
    mounts = parse_mounts(fs.read("/proc/mounts"))
    mode, root = cgroup_mode(mounts)
    options = mount_options(mounts, root) if root else []
    swappiness = (fs.read("/proc/sys/vm/swappiness") or "").strip()
    return {"cgroup_mode": mode, "mount_options": options,
            "memory_recursiveprot": "memory_recursiveprot" in options,
            "swap_bytes": meminfo_bytes(fs.read("/proc/meminfo"), "SwapTotal"),
            "swappiness": int(swappiness) if swappiness.isdigit() else None}


# The rule the roles, verify.yml and the health gate follow (docs/isolation.md, "The memory substrate"): what makes
# a requested protection do nothing is refused before any write; what only weakens it is a warning.
NO_RECURSIVEPROT = (
    "memory.low/memory.min on %s would not protect the services in it: the cgroup2 mount at %s lacks "
    "memory_recursiveprot (options: %s), and without it the kernel gives a slice's protection to no child cgroup "
    "that does not set its own. Remount with it (mount -o remount,memory_recursiveprot %s; systemd 247+ on a 5.7+ "
    "kernel mounts it so at boot), or set the slice's memory protection to 0")
NO_SWAP = (
    "no swap on this host (SwapTotal 0): memory.low on %s protects its page cache, but the other tenants' anonymous "
    "memory cannot be reclaimed, so when it grows the kernel takes the protected cache anyway (memory.low is best "
    "effort) or the OOM killer ends a process; memory.high on the training slice is then the only bound, and "
    "vm.swappiness does nothing")


def substrate_findings(substrate, protected):
    """(errors, warnings) of the memory substrate for the slices in ``protected`` (names of slices given a
    memory.low or memory.min above 0): memory_recursiveprot missing is an error, no swap a warning."""
    errors, warnings = [], []
    if not protected or substrate.get("cgroup_mode") != "unified":
        return errors, warnings
    names = ", ".join(protected)
    if not substrate.get("memory_recursiveprot"):
        errors.append(NO_RECURSIVEPROT % (names, CGROUP_ROOT, ",".join(substrate.get("mount_options") or []) or "none",
                                          CGROUP_ROOT))
    if substrate.get("swap_bytes") == 0:
        warnings.append(NO_SWAP % names)
    return errors, warnings


def parse_kernel_release(release):
    """'6.12.117+deb13-amd64' -> (6, 12, 117); unknown parts are 0."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", release or "")
    if not m:
        return (0, 0, 0)
    return tuple(int(x or 0) for x in m.groups())


def kernel_config(fs, release):
    """{CONFIG_X: value} from /boot/config-<release> or /proc/config.gz; {} if neither exists."""
    text = fs.read("/boot/config-%s" % release)
    if text is None:
        raw = fs.read_bytes("/proc/config.gz")
        if raw:
            import gzip
            try:
                text = gzip.decompress(raw).decode("utf-8", "replace")
            except (IOError, OSError, EOFError):
                text = None
    out = {}
    for line in (text or "").splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:-len(" is not set")]] = "n"
    return out


def _from_config(config, options):
    """True (built in), "module" (after modprobe), False (not built) or None (unknown)."""
    if not config:
        return None
    # Kconfig lists every option the kernel has ('# X is not set' when off); one that is missing
    # does not exist in this kernel (e.g. THROTTLING_LOW after its removal in 6.10).
    values = [config.get(o, "n") for o in options]
    if any(v not in ("y", "m") for v in values):
        return False
    return "module" if "m" in values else True


def _child_with_io(fs, root):
    """A non-root cgroup whose io files are visible, to learn which io.* files this kernel has."""
    for entry in fs.listdir(root):
        path = root + "/" + entry
        if fs.isdir(path) and "io" in (fs.read(path + "/cgroup.controllers") or "").split():
            return path
    return None


def detect(fs, release=None, systemd_version=None, which=None):
    """Capabilities of the host behind ``fs`` as a JSON-friendly dict.

    ``systemd_version`` (int or None) and ``which`` (name -> path or None) come from the caller,
    which owns command execution; everything else is read from files.
    """
    release = release or os.uname()[2]
    mounts = parse_mounts(fs.read("/proc/mounts"))
    mode, v2_root = cgroup_mode(mounts)
    caps = {
        "kernel": {"release": release, "version": list(parse_kernel_release(release)),
                   "page_size": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096},
        "cgroup": {"mode": mode, "unified": mode == "unified", "mountpoint": v2_root,
                   "controllers": [], "subtree_control": [], "io_files": {}},
        "systemd": {"present": fs.isdir("/run/systemd/system"), "version": systemd_version},
        "debugfs": {"mounted": any(fstype == "debugfs" for _d, _m, fstype, _o in mounts),
                    "sched": None},
        "tools": dict((t, (which(t) if which else None)) for t in TOOLS),
        "psi": fs.exists("/proc/pressure/io"),
        "memory": memory_substrate(fs),
    }
    if mode == "unified":
        cg = caps["cgroup"]
        cg["controllers"] = (fs.read(v2_root + "/cgroup.controllers") or "").split()
        cg["subtree_control"] = (fs.read(v2_root + "/cgroup.subtree_control") or "").split()
        cg["io_files"]["io.cost.qos"] = fs.exists(v2_root + "/io.cost.qos")
        cg["io_files"]["io.cost.model"] = fs.exists(v2_root + "/io.cost.model")
        child = _child_with_io(fs, v2_root)
        config = None
        for name, options in sorted(CHILD_IO_FILES.items()):
            if child is not None:
                cg["io_files"][name] = fs.exists(child + "/" + name)
                continue
            if config is None:
                config = kernel_config(fs, release)
            # No child with io enabled yet: fall back to the kernel's build config, else unknown.
            cg["io_files"][name] = _from_config(config, options)
        cg["io_files_source"] = "cgroup %s" % child if child else ("kernel config" if config else "unknown")
        cg["iocost"] = bool(cg["io_files"]["io.cost.qos"])
    if caps["debugfs"]["mounted"] and fs.isdir("/sys/kernel/debug/sched"):
        entries = fs.listdir("/sys/kernel/debug/sched")
        # min_granularity_ns on 5.13-6.5, base_slice_ns on EEVDF kernels (6.6+).
        caps["debugfs"]["sched"] = {
            "base_slice_ns": "base_slice_ns" in entries,
            "min_granularity_ns": "min_granularity_ns" in entries,
        }
    return caps


def parse_systemd_version(text):
    """'systemd 252 (252.39-1~deb12u1)' -> 252."""
    m = re.match(r"systemd (\d+)", (text or "").strip())
    return int(m.group(1)) if m else None


def require_iocost(fs):
    """None if blk-iocost can be managed on this host, else the reason and what to do."""
    mode, root = cgroup_mode(parse_mounts(fs.read("/proc/mounts")))
    if mode != "unified":
        return ("this host does not run the cgroup v2 unified hierarchy (cgroup mode: %s); blk-iocost needs it: "
                "boot with systemd.unified_cgroup_hierarchy=1 (the default since systemd 247)" % mode)
    if not fs.exists(root + "/io.cost.qos"):
        return ("the running kernel has no blk-iocost (%s/io.cost.qos is missing): it needs CONFIG_BLK_CGROUP_IOCOST=y"
                % root)
    return None
