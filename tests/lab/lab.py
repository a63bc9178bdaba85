# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""QEMU lab for aiinfra.io_isolation: build Debian guest images, run VMs.

The collection changes kernel I/O-isolation state (blk-iocost, cgroup v2, NVMe
queues), so it is exercised in throwaway VMs, never on the controller. This
script runs on the controller (Python 3.11, stdlib only, as root):

  lab.py build [GUEST ...] [--force]        build/verify cached images (default: all)
  lab.py up GUEST [--name N] [--append EXTRA] [--renumber] [--multipath]
                  [--kernel debian|custom|PATH] [--timeout S]
                  [--disk-capacity DRIVE=IOPS,BYTES_PER_S ...] [--device-bound] [--hotplug]
  lab.py ssh NAME [-- CMD ...]               run a command (or a shell) in the guest
  lab.py status                              list lab instances
  lab.py reboot NAME [--hard]                systemctl reboot (or QMP system_reset), wait for SSH
  lab.py unplug NAME [DEVICE]                hot-remove nvme-b (QMP device_del; needs up --hotplug)
  lab.py down NAME [--purge]                 stop QEMU (--purge: drop the root overlay and data disks)
  lab.py inventory NAME                      Ansible YAML inventory for the running VM
  lab.py observe NAME OUTFILE                capture the block/NVMe sysfs layout into a file
  lab.py kernel [--force | --status]         build the custom 6.1 kernel (io.latency, io.prio.class)

Layout (see README.md): images in ${IO_ISOLATION_LAB_CACHE:-~/.cache/aiinfra-io_isolation/lab}/
<guest>-<recipe-hash>/, instances (persistent data disks + per-boot run dir) in
${IO_ISOLATION_LAB_STATE:-<cache>/instances}/<name>/.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

# Bump when the build procedure changes in a way the recipe files do not show
# (e.g. mkfs options, what is extracted); it is part of the cache key.
IMAGE_FORMAT_VERSION = "1"

LAB_DIR = Path(__file__).resolve().parent
REPO_DIR = LAB_DIR.parent.parent
RECIPE_FILE = LAB_DIR / "recipe.toml"
SETUP_SCRIPT = LAB_DIR / "guest-setup.sh"
# The guests' bytecode cache for zip-imported code (Ansible's modules), installed by SETUP_SCRIPT.
CODECACHE_SCRIPT = LAB_DIR / "guest-codecache.py"

# Host tools -> the Debian package that provides them. Fresh CI machines have
# none of these; as root we install them (apt-get update once, then install).
HOST_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "mmdebstrap": "mmdebstrap",
    "mkfs.ext4": "e2fsprogs",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}
BUILD_TOOLS = ("mmdebstrap", "mkfs.ext4", "ssh-keygen")
MMDEBSTRAP_TRIES = 3
# apt's words for a transient mirror or network problem
DOWNLOAD_FAILURES = ("Failed to fetch", "Hash Sum mismatch", "File has unexpected size",
                     "Temporary failure", "Could not resolve", "Connection timed out",
                     "Connection failed", "Undetermined Error", "Unable to fetch", "Mirror sync in progress")
RUN_TOOLS = ("qemu-system-x86_64", "qemu-img", "ssh", "ssh-keygen")

DEBIAN_CODENAMES = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                    "oldoldstable", "oldstable", "stable", "testing", "unstable"}

# Guest disks. Each data disk lives in the instance dir (not the per-boot run
# dir) so that two boots of one instance see the same disks - that is what
# --renumber needs to show names and MAJ:MIN moving under a fixed identity.
DATA_DISK_SIZE = 1 << 30
NVME_PLAIN = (  # (key, controller serial)
    ("nvme-a", "lab-nvme-a"),
    ("nvme-b", "lab-nvme-b"),
)
NVME_MULTIPATH_SERIAL = "lab-nvme-mp"
QEMU_NVME_MODEL = "QEMU NVMe Ctrl"  # QEMU has no property to change it
NVME_MULTIPATH_NQN = "nqn.2024-01.io.aiinfra.lab:multipath"
VIRTIO_DATA_SERIAL = "lab-virtio-data"
# PCI slots on q35's pcie.0: fixed so a boot is reproducible; --renumber
# reverses the NVMe slot order (the kernel numbers controllers in probe order,
# which follows PCI order).
PCI_NET, PCI_ROOT, PCI_VDATA, PCI_VDATA_RENUMBERED = 0x2, 0x3, 0x4, 0x5
# --renumber also puts a small spare virtio disk in front of the data disk: virtio names and
# minors follow probe order deterministically (vdb 254:16 -> vdc 254:32), unlike NVMe minors,
# which already move between identical boots (asynchronous namespace scan).
VIRTIO_SPARE_SERIAL = "lab-virtio-spare"
VIRTIO_SPARE_SIZE = 64 << 20
# --identity-disk SERIAL: small extra virtio disks whose serial is whatever the test gives (hostile identities,
# issue 38), at fixed slots after the data disk's; virtio-blk's serial holds at most 20 bytes.
PCI_IDENTITY_SLOTS = (0x6, 0x7)
VIRTIO_SERIAL_MAX = 20
PCI_NVME_SLOTS = (0x8, 0x9, 0xA, 0xB)
# --numa: two NUMA nodes (one vCPU and half the memory each) and the second NVMe controller behind a PCIe
# expander bridge on node 1 (pxb-pcie's numa_node), so its numa_node, its queues' CPUs and a cpuset placement
# have something to show (issue 39). The bridge takes a free slot on pcie.0 and its own bus numbers.
PCI_NUMA_PXB, NUMA_PXB_BUS = 0x1C, 0x80
# --hotplug: the second NVMe controller behind a PCIe root port, the one kind of slot q35 can hot-remove a device
# from (pcie.0 and an NVMe controller's namespace bus cannot: QEMU 7.2 says "Bus ... does not support hotplugging"),
# so `unplug` takes the whole controller and its namespace away mid-run, as a pulled drive does (issue 38).
PCI_HOTPLUG_PORT = 0x1D
HOTPLUG_PORT_ID, HOTPLUG_NVME = "hotplug-port", "nvme-b"

SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]

# Commands for `observe`: what the device resolver has to cope with.
OBSERVE_COMMANDS = [
    "uname -r",
    "systemctl --version | head -1",
    "cat /proc/cmdline",
    "lsblk -o NAME,MAJ:MIN,SIZE,TYPE,SERIAL,MODEL,WWN",
    "lsmod | grep -E '^(nvme|virtio)' || true",
    "lsinitramfs /boot/initrd.img-$(uname -r) 2>/dev/null | grep -E '\\.ko' || echo '(no initramfs for this kernel)'",
    "ls -l /sys/block/",
    "ls -l /sys/class/block/",
    "ls -l /sys/dev/block/",
    "ls -l /dev/disk/by-id/ /dev/disk/by-path/",
    "ls -l /dev/nvme* /dev/vd*",
    "for d in /sys/class/block/*; do echo \"== $d -> $(readlink $d)\"; ls $d; "
    "echo \"dev=$(cat $d/dev) size=$(cat $d/size) hidden=$(cat $d/hidden 2>/dev/null)\"; "
    "ls -l $d/device 2>&1; echo \"device resolves to: $(readlink -f $d/device)\"; done",
    "grep . /sys/class/block/nvme*/device/{serial,model,firmware_rev,transport,cntlid,subsysnqn,address,state,numa_node}",
    "grep . /sys/class/block/nvme*/{wwid,eui,nguid,uuid,nsid,ana_state,ana_grpid}",
    "grep . /sys/block/vd*/serial",
    "for d in /sys/block/nvme*; do echo \"== $d\"; ls -l $d/multipath/ 2>&1; done",
    "ls -l /sys/class/nvme/",
    "for c in /sys/class/nvme/*; do echo \"== $c\"; ls $c; ls -l $c/device $c/subsystem 2>&1; "
    "grep . $c/{serial,model,firmware_rev,transport,cntlid,subsysnqn,address,state,queue_count,sqsize}; done",
    "ls -l /sys/class/nvme-subsystem/",
    "for s in /sys/class/nvme-subsystem/*; do echo \"== $s -> $(readlink $s)\"; ls -l $s/; "
    "grep . $s/{subsysnqn,model,serial,firmware_rev,iopolicy,subsystype}; done",
    "for d in /dev/nvme*n* /dev/vd?; do echo \"== $d\"; udevadm info --query=property --name=$d "
    "| grep -E '^(DEVPATH|DEVNAME|MAJOR|MINOR|DEVTYPE|ID_SERIAL|ID_SERIAL_SHORT|ID_WWN|ID_MODEL|ID_REVISION|ID_PATH|ID_NSID|DEVLINKS)='; done",
    "nvme list",
    "nvme list-subsys",
    "cat /proc/mounts",
    "cat /sys/fs/cgroup/cgroup.controllers",
    "cat /sys/fs/cgroup/cgroup.subtree_control",
    "grep . /sys/block/*/queue/scheduler",
    "grep . /sys/block/*/queue/rotational",
    "ls /sys/kernel/debug/block/*/",
    "grep . /sys/kernel/debug/block/nvme*/hctx*/type",
    "grep . /sys/module/nvme/parameters/* /sys/module/nvme_core/parameters/*",
    "ls /sys/class/nvme/nvme0/",
    "dmesg | grep -iE 'nvme|virtio_blk|vd[a-z]' || true",
]


# --------------------------------------------------------------------------
# small helpers

def log(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def die(msg: str, code: int = 1) -> "NoReturn":  # noqa: F821
    log(f"error: {msg}")
    sys.exit(code)


def cache_root() -> Path:
    env = os.environ.get("IO_ISOLATION_LAB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "aiinfra-io_isolation" / "lab"


def state_root() -> Path:
    env = os.environ.get("IO_ISOLATION_LAB_STATE")
    return Path(env) if env else cache_root() / "instances"


@contextlib.contextmanager
def locked(path: Path):
    """Exclusive flock: two builds of one guest, or up/down of one instance, serialize."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


_apt_updated = False


def ensure_host_tools(tools) -> None:
    """Install the Debian packages for missing tools (as root), else explain."""
    global _apt_updated
    missing = sorted({HOST_TOOLS[t] for t in tools if not shutil.which(t)})
    if not missing:
        return
    if os.geteuid() != 0:
        die(f"missing host packages {missing}; run: apt-get install -y {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        log("apt-get update")
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
        _apt_updated = True
    log(f"apt-get install -y {' '.join(missing)}")
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    still = [t for t in tools if not shutil.which(t)]
    if still:
        die(f"tools still missing after install: {still}")


def load_recipe() -> dict:
    with open(RECIPE_FILE, "rb") as fh:
        return tomllib.load(fh)


def guest_names() -> list[str]:
    return sorted(load_recipe()["guests"])


# --------------------------------------------------------------------------
# SSH key (one per lab cache, baked into every image built from that cache)

def ssh_key() -> Path:
    key = cache_root() / "ssh" / "id_ed25519"
    if key.exists() and key.with_suffix(".pub").exists():
        return key
    ensure_host_tools(["ssh-keygen"])
    with locked(cache_root() / "ssh.lock"):
        if not (key.exists() and key.with_suffix(".pub").exists()):
            key.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(key.parent, 0o700)
            for p in (key, key.with_suffix(".pub")):
                p.unlink(missing_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                            "aiinfra-io_isolation-lab", "-f", str(key)], check=True)
            log(f"generated lab SSH key {key}")
    return key


# --------------------------------------------------------------------------
# Debian mirror: reuse what this machine's apt uses (never hard-code a host)

def _apt_source_entries() -> list[tuple[str, list[str]]]:
    """(uri, suites) of every enabled 'deb' entry in /etc/apt/sources.list*."""
    entries = []
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":  # deb822 stanzas
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in fields.get("types", "").split():
                    continue
                for uri in fields.get("uris", "").split():
                    entries.append((uri, fields.get("suites", "").split()))
        else:  # one-line format: deb [opts] uri suite comp...
            for line in text.splitlines():
                line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
                if len(line) >= 3 and line[0] == "deb":
                    entries.append((line[1], [line[2]]))
    return entries


def debian_mirrors() -> tuple[str, str | None]:
    """(archive URI, security URI or None) taken from this machine's apt sources."""
    env_m = os.environ.get("IO_ISOLATION_LAB_MIRROR")
    env_s = os.environ.get("IO_ISOLATION_LAB_SECURITY_MIRROR")
    archive = security = None
    for uri, suites in _apt_source_entries():
        for s in suites:
            base, _sep, pocket = s.partition("-")
            if base not in DEBIAN_CODENAMES:
                continue
            if pocket == "security" or s.endswith("/updates"):
                security = security or uri
            else:
                archive = archive or uri
    archive = env_m or archive
    security = env_s or security
    if not archive:
        die("no Debian archive found in /etc/apt/sources.list*; set IO_ISOLATION_LAB_MIRROR")
    return archive.rstrip("/"), security.rstrip("/") if security else None


# --------------------------------------------------------------------------
# Image build and cache

def recipe_key(guest: str) -> tuple[str, dict]:
    recipe = load_recipe()
    if guest not in recipe["guests"]:
        die(f"unknown guest {guest!r}; known: {', '.join(guest_names())}")
    pub = ssh_key().with_suffix(".pub").read_text().strip()
    material = {
        "format": IMAGE_FORMAT_VERSION,
        "common": recipe["common"],
        "guest": recipe["guests"][guest],
        "setup_sh": hashlib.sha256(SETUP_SCRIPT.read_bytes()).hexdigest(),
        "codecache_py": hashlib.sha256(CODECACHE_SCRIPT.read_bytes()).hexdigest(),
        "pubkey": pub,
    }
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]
    return digest, recipe


def image_dir(guest: str) -> Path:
    digest, _recipe = recipe_key(guest)
    return cache_root() / f"{guest}-{digest}"


IMAGE_FILES = ("image.raw", "vmlinuz", "initrd.img")


def verify_image(d: Path, full: bool) -> str | None:
    """None if the cache dir is complete and intact, else why not.

    The `complete` marker is written last and lists sha256/size/mtime of each
    file. `full` re-hashes (≈ seconds for the sparse 3 GB image); otherwise size
    and mtime are compared, which catches truncated copies and later writes.
    """
    marker = read_json(d / "complete")
    if marker is None:
        return "no complete marker (partial or interrupted build)"
    for name in IMAGE_FILES:
        info = marker.get("files", {}).get(name)
        p = d / name
        if not info or not p.exists():
            return f"{name} missing"
        st = p.stat()
        if st.st_size != info["size"]:
            return f"{name} size {st.st_size} != {info['size']}"
        if full:
            if sha256_file(p) != info["sha256"]:
                return f"{name} checksum mismatch"
        elif st.st_mtime_ns != info["mtime_ns"]:
            return f"{name} modified after build"
    return None


def _sources_lines(suite: str, extra: list[str], components: str) -> list[str]:
    archive, security = debian_mirrors()
    lines = [f"deb {archive} {suite} {components}"]
    for s in extra:
        if s.endswith("-security"):
            if security:
                lines.append(f"deb {security} {s} {components}")
        else:
            lines.append(f"deb {archive} {s} {components}")
    return lines


def build_image(guest: str, force: bool = False) -> Path:
    ensure_host_tools(BUILD_TOOLS)
    digest, recipe = recipe_key(guest)
    d = cache_root() / f"{guest}-{digest}"
    with locked(cache_root() / f"{guest}.lock"):
        if not force:
            why = verify_image(d, full=True)
            if why is None:
                log(f"{guest}: cached image OK: {d}")
                return d
            if d.exists():
                log(f"{guest}: cache {d.name} unusable ({why}); rebuilding")
        if os.geteuid() != 0:
            # unshare mode as non-root gives subuid-owned files that mkfs -d
            # would copy verbatim; root (CI, dev machines) is the supported case.
            die("building images needs root")
        if d.exists():
            _rmtree_no_mounts(d)
        d.mkdir(parents=True)
        g, common = recipe["guests"][guest], recipe["common"]
        rootfs = d / "rootfs"
        sources = _sources_lines(g["suite"], g.get("extra_suites", []), common["components"])
        hostname = f"lab-{guest}"
        base = [
            "mmdebstrap", "--variant=apt", "--format=directory",
            # the guest's own packages after the common ones (a package one suite has and the other has not)
            "--include=" + ",".join(common["packages"] + g.get("packages", [])),
            "--aptopt=Acquire::Languages \"none\"",
            # docs/man pages are dead weight in a throwaway guest
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/info/*",
            f"--setup-hook=sh {shlex.quote(str(SETUP_SCRIPT))} setup \"$1\"",
            f"--customize-hook=sh {shlex.quote(str(SETUP_SCRIPT))} customize \"$1\" "
            f"{hostname} {shlex.quote(str(ssh_key().with_suffix('.pub')))}",
            g["suite"], str(rootfs), *sources,
        ]
        timings = {}
        mode_used = None
        t0 = time.monotonic()
        # unshare is preferred (private mount namespace: nothing the package
        # scripts mount can leak to the controller); as root it needs no
        # subuids. Fall back to root mode if this kernel forbids unsharing.
        # A mirror mid-sync or a dropped connection fails a download: that is retried (with a
        # pause) in the same mode, anything else moves on to the next mode.
        for mode in ("unshare", "root"):
            for attempt in range(1, MMDEBSTRAP_TRIES + 1):
                log(f"{guest}: mmdebstrap --mode={mode} {g['suite']} ({', '.join(sources)})"
                    + (f", attempt {attempt}" if attempt > 1 else ""))
                logf = d / f"mmdebstrap-{mode}-{attempt}.log"
                with open(logf, "w") as lf:
                    rc = subprocess.run([base[0], f"--mode={mode}", *base[1:]], check=False,
                                        stdout=lf, stderr=subprocess.STDOUT).returncode
                if rc == 0:
                    mode_used = mode
                    break
                text = logf.read_text(errors="replace")
                log(f"{guest}: mmdebstrap --mode={mode} failed (rc={rc}); tail of {logf}:")
                sys.stderr.write("".join(text.splitlines(True)[-15:]))
                if rootfs.exists():
                    _rmtree_no_mounts(rootfs)
                if not any(m in text for m in DOWNLOAD_FAILURES) or attempt == MMDEBSTRAP_TRIES:
                    break
                log(f"{guest}: a download failed; trying again in {30 * attempt} s")
                time.sleep(30 * attempt)
            if mode_used:
                break
        if mode_used is None:
            die(f"{guest}: mmdebstrap failed in both unshare and root mode")
        timings["mmdebstrap_s"] = round(time.monotonic() - t0, 1)

        # Direct kernel boot: the kernel and initramfs are taken out of the
        # image; the guest's /boot is never read at boot (docs/kernel-files.md, "The lab's guests").
        kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
        initrds = sorted((rootfs / "boot").glob("initrd.img-*"))
        if len(kernels) != 1 or len(initrds) != 1:
            die(f"{guest}: expected one kernel and one initrd in /boot, got {kernels} {initrds}")
        kver = kernels[0].name.removeprefix("vmlinuz-")
        shutil.copyfile(kernels[0], d / "vmlinuz")
        shutil.copyfile(initrds[0], d / "initrd.img")
        pkgs = subprocess.run(["chroot", str(rootfs), "dpkg-query", "-W",
                               "-f=${Package} ${Version}\\n"],
                              capture_output=True, text=True, check=True).stdout
        (d / "packages.txt").write_text(pkgs)

        t1 = time.monotonic()
        # mkfs.ext4 -d copies the tree (ownership, modes, xattrs) into a new
        # filesystem image: no loop mount, nothing touches the host's block layer.
        part = d / "image.raw.partial"
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "lab-root", "-d", str(rootfs),
                        str(part), common["image_size"]], check=True)
        os.replace(part, d / "image.raw")
        timings["mkfs_s"] = round(time.monotonic() - t1, 1)
        _rmtree_no_mounts(rootfs)

        files = {}
        for name in IMAGE_FILES:
            p = d / name
            st = p.stat()
            files[name] = {"sha256": sha256_file(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        timings["total_s"] = round(time.monotonic() - t0, 1)
        manifest = {
            "guest": guest, "recipe_hash": digest, "suite": g["suite"], "kernel": kver,
            "mmdebstrap_mode": mode_used, "sources": sources, "timings": timings,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        write_json(d / "manifest.json", manifest)
        write_json(d / "complete", {"files": files, **manifest})  # last: marks the dir usable
        log(f"{guest}: built {d} (kernel {kver}, mode {mode_used}, {timings})")
        return d


def _rmtree_no_mounts(path: Path) -> None:
    """rmtree, but never into a mount point: a root-mode mmdebstrap killed
    mid-build can leave /proc, /sys or a /dev bind mount inside rootfs/, and
    recursing into the host's /dev would be a disaster."""
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split()[4] for line in fh]
    inside = [m for m in mounts if m.startswith(prefix)]
    if inside:
        die(f"refusing to delete {path}: mount points inside it: {inside}; unmount them first")
    shutil.rmtree(path)


def ensure_image(guest: str, full_verify: bool = False) -> Path:
    d = image_dir(guest)
    if verify_image(d, full=full_verify) is None:
        return d
    return build_image(guest)


# --------------------------------------------------------------------------
# Accelerator: KVM if it actually runs a kernel, else TCG

def detect_accel(kernel: Path) -> str:
    """'kvm' or 'tcg'. /dev/kvm existing is not enough: on the project's
    machines it is present but unusable (-cpu host/max abort or hang, other
    CPU models crawl), so boot the kernel with no root under KVM and require
    it to reach its 'no root' panic within seconds (TCG needs ~5 s for that,
    a working KVM well under 2). Cached per host boot + QEMU version."""
    forced = os.environ.get("IO_ISOLATION_LAB_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = "?"
    qver = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, check=False,
                          text=True).stdout.splitlines()[0]
    cache = cache_root() / "accel.json"
    cached = read_json(cache) or {}
    if cached.get("boot_id") == boot_id and cached.get("qemu") == qver:
        return cached["accel"]
    probe_log = cache_root() / "accel-probe.log"
    probe_log.unlink(missing_ok=True)
    cmd = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-machine", "q35",
           "-m", "256", "-nodefaults", "-no-user-config", "-display", "none",
           "-serial", f"file:{probe_log}", "-no-reboot", "-kernel", str(kernel),
           "-append", "console=ttyS0 panic=-1 root=/dev/lab-probe-none"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=8)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    took = time.monotonic() - t0
    text = probe_log.read_text(errors="replace") if probe_log.exists() else ""
    accel = "kvm" if "Kernel panic" in text else "tcg"
    log(f"accelerator probe: KVM {'works' if accel == 'kvm' else 'unusable'} "
        f"({took:.1f} s, rc={proc.returncode}); using {accel}")
    write_json(cache, {"boot_id": boot_id, "qemu": qver, "accel": accel, "probe_s": round(took, 1)})
    return accel


# --------------------------------------------------------------------------
# Instances

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")


class Instance:
    def __init__(self, name: str):
        if not NAME_RE.match(name):
            die(f"bad instance name {name!r} (lowercase letters, digits, '-'; it becomes the hostname)")
        self.name = name
        self.dir = state_root() / name
        self.run = self.dir / "run"
        self.state_file = self.run / "state.json"
        self.pidfile = self.run / "qemu.pid"
        self.lock = self.dir / "lock"

    # -- process identity: only ever signal a PID whose command line is ours
    def _is_ours(self, pid: int) -> bool:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return bool(argv) and b"qemu-system" in argv[0] and str(self.pidfile).encode() in argv

    def qemu_pids(self) -> list[int]:
        """PIDs of QEMU processes started for this instance (state file, else a
        /proc scan for our pidfile path in the command line: finds an orphan
        whose run dir was lost)."""
        pids = set()
        st = read_json(self.state_file) or {}
        for pid in (st.get("pid"), _read_int(self.pidfile)):
            if pid and self._is_ours(pid):
                pids.add(pid)
        for p in Path("/proc").iterdir():
            if p.name.isdigit() and int(p.name) not in pids and self._is_ours(int(p.name)):
                pids.add(int(p.name))
        return sorted(pids)

    def state(self) -> dict | None:
        return read_json(self.state_file)

    def running_state(self) -> dict:
        st = self.state()
        if not st or not self._is_ours(st.get("pid", 0)):
            die(f"instance {self.name} is not running (see `lab.py status`)")
        return st

    def meta(self) -> dict:
        """Persistent per-instance identity: disk serials, EUI-64s and UUIDs are
        fixed at creation so every boot presents the same disks."""
        path = self.dir / "instance.json"
        m = read_json(path)
        if m:
            return m
        self.dir.mkdir(parents=True, exist_ok=True)

        def ids(key):
            h = hashlib.sha256(f"{self.name}/{key}".encode()).digest()
            # 52:54:00 is QEMU's locally administered OUI; 40 bits from the hash.
            eui = (0x525400 << 40) | int.from_bytes(h[:5], "big")
            return {"eui64": f"0x{eui:016x}", "uuid": str(uuid.UUID(bytes=h[5:21], version=4))}
        m = {"name": self.name, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "disks": {}}
        for key, serial in NVME_PLAIN:
            m["disks"][key] = {"bus": "nvme", "serial": serial, "file": f"{key}.raw", **ids(key)}
        m["disks"]["nvme-mp"] = {"bus": "nvme-multipath", "serial": NVME_MULTIPATH_SERIAL,
                                 "nqn": NVME_MULTIPATH_NQN, "file": "nvme-mp.raw", **ids("nvme-mp")}
        m["disks"]["virtio-data"] = {"bus": "virtio", "serial": VIRTIO_DATA_SERIAL,
                                     "file": "virtio-data.raw"}
        write_json(path, m)
        return m

    def cleanup_stale(self) -> None:
        """Remove what a killed earlier run left (pid file, QMP socket, overlay).
        Refuses if a QEMU of ours is still alive: that is not stale."""
        pids = self.qemu_pids()
        if pids:
            die(f"instance {self.name} still has QEMU running (pid {pids}); `lab.py down {self.name}` first")
        if self.run.exists():
            st = self.state() or {}
            log(f"{self.name}: removing stale run dir from an earlier boot "
                f"(pid {st.get('pid')}, port {st.get('port')} - no such QEMU)")
            self._keep_serial_log()
            shutil.rmtree(self.run)
            # A QEMU that was killed did not flush its root overlay: do not boot from it.
            (self.dir / "root.qcow2").unlink(missing_ok=True)

    def _keep_serial_log(self) -> None:
        src = self.run / "serial.log"
        if src.exists():
            shutil.copyfile(src, self.dir / "serial-last.log")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qmp(sock_path: str, command: str, args: dict | None = None, timeout: float = 10) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        f = s.makefile("rwb")
        json.loads(f.readline())  # greeting
        for cmd in ({"execute": "qmp_capabilities"},
                    {"execute": command, **({"arguments": args} if args else {})}):
            f.write(json.dumps(cmd).encode() + b"\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    return {}  # e.g. QEMU exited on 'quit' before answering
                msg = json.loads(line)
                if "return" in msg or "error" in msg:
                    break
        return msg


def ssh_ctl(st: dict) -> str:
    return str(Path(st["instance_dir"]) / "run" / "ssh.ctl")


def ssh_argv(st: dict, *cmd: str, tty: bool = False, mux: bool = True) -> list[str]:
    """ssh command line for the guest. With mux, it rides on the instance's
    master connection when one is up: a fresh connection costs 2-5 s under
    TCG (sshd re-exec, key exchange and PAM/logind session in the guest), a
    multiplexed one a fraction of a second. A dead socket means ssh connects
    directly."""
    mux_opts = (["-o", "ControlMaster=no", "-o", f"ControlPath={ssh_ctl(st)}"] if mux
                else ["-o", "ControlPath=none"])
    return ["ssh", *mux_opts, *SSH_OPTS, *(["-t"] if tty else []), "-i", st["key"],
            "-p", str(st["port"]), "root@127.0.0.1", *cmd]


def ssh_run(st: dict, cmd: str, timeout: float = 60, input: str | None = None,
            mux: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(ssh_argv(st, cmd, mux=mux), capture_output=True, text=True, check=False,
                          timeout=timeout, input=input, stdin=None if input else subprocess.DEVNULL)


def ssh_master_start(st: dict) -> None:
    """Background master connection (ssh -M -N -f). Its stdio must not be our
    pipes, or callers capturing output would wait for it. Short keepalives so
    a guest that vanishes (system_reset, crash) frees the socket within ~15 s."""
    subprocess.run(["ssh", "-M", "-N", "-f", "-o", f"ControlPath={ssh_ctl(st)}",
                    "-o", "ControlPersist=yes", "-o", "ServerAliveInterval=5",
                    "-o", "ServerAliveCountMax=3", *SSH_OPTS, "-i", st["key"],
                    "-p", str(st["port"]), "root@127.0.0.1"],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60, check=False)


def ssh_master_stop(st: dict) -> None:
    """Ask our master to exit (ssh -O exit), then make sure its PID is gone."""
    ctl = ssh_ctl(st)
    if not os.path.exists(ctl):
        return
    r = subprocess.run(["ssh", "-o", f"ControlPath={ctl}", "-O", "check", "root@127.0.0.1"],
                       capture_output=True, text=True, timeout=10, check=False)
    m = re.search(r"pid=(\d+)", r.stderr + r.stdout)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["ssh", "-o", f"ControlPath={ctl}", "-O", "exit", "root@127.0.0.1"],
                       capture_output=True, timeout=10, check=False)
    if m:
        pid = int(m.group(1))
        for _attempt in range(50):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                break
            if f"ControlPath={ctl}".encode() not in argv or not _pid_alive(pid):
                break
            time.sleep(0.1)
        else:
            log(f"ssh master pid {pid} did not exit; SIGTERM")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(ctl)


def _serial_tail(inst: Instance, lines: int = 30) -> str:
    log_path = inst.run / "serial.log"
    if not log_path.exists():
        return ""
    return "".join(log_path.read_text(errors="replace").splitlines(True)[-lines:])


PANIC = "Kernel panic - not syncing"
# A booting guest writes to its serial console at least every few seconds (kernel messages, then systemd's status
# lines, which repeat while a start job waits); this long a silence without SSH is a hung boot.
STALL_S = 180


def serial_size(inst: Instance) -> int:
    log_path = inst.run / "serial.log"
    return log_path.stat().st_size if log_path.exists() else 0


def panicked(inst: Instance, since: int) -> bool:
    """Did the guest's kernel panic after byte `since` of its serial log?"""
    log_path = inst.run / "serial.log"
    if not log_path.exists():
        return False
    with open(log_path, "rb") as f:
        f.seek(since)
        return PANIC.encode() in f.read()


def wait_ssh(st: dict, timeout: float, inst: Instance, cmd: str = "cat /proc/sys/kernel/random/boot_id",
             not_equal: str | None = None, fatal: bool = True, panic_since: int | None = None) -> str | None:
    """Poll until `cmd` answers over SSH (and differs from not_equal); return its output.
    Without `fatal`, a timeout returns None (the caller retries the boot); so does, at once, a
    kernel panic in the serial log after byte `panic_since`, and a boot whose serial console has said
    nothing for STALL_S (the hung TCG boots: a CI demo's kernel went silent 62 s in, and sat out the
    whole timeout before failing)."""
    deadline = time.monotonic() + timeout
    size, grown = serial_size(inst), time.monotonic()
    while time.monotonic() < deadline:
        if not _pid_alive(st["pid"]):
            die(f"QEMU (pid {st['pid']}) exited while waiting for SSH; serial log tail:\n{_serial_tail(inst)}")
        if panic_since is not None and not fatal and panicked(inst, panic_since):
            log(f"{inst.name}: the guest kernel panicked while booting; serial log tail:\n{_serial_tail(inst)}")
            return None
        now = serial_size(inst)
        if now != size:
            size, grown = now, time.monotonic()
        elif panic_since is not None and not fatal and time.monotonic() - grown > STALL_S:
            log(f"{inst.name}: the guest's console has been silent for {STALL_S} s without SSH; serial log "
                f"tail:\n{_serial_tail(inst)}")
            return None
        try:
            r = ssh_run(st, cmd, timeout=20, mux=False)
            if r.returncode == 0 and r.stdout.strip() and r.stdout.strip() != not_equal:
                return r.stdout.strip()
        except subprocess.TimeoutExpired:
            pass
        time.sleep(1)
    msg = (f"no SSH answer from {inst.name} on 127.0.0.1:{st['port']} within {timeout:.0f} s "
           f"(serial log: {inst.run / 'serial.log'}); tail:\n{_serial_tail(inst)}")
    if not fatal:
        log(msg)
        return None
    die(msg + f"\nthe VM is left running for inspection, `lab.py down {inst.name}` stops it")


def settle(st: dict, inst: Instance) -> float:
    """Wait for the guest's udev queue to drain; return the seconds it took.

    SSH answers while udev may still be running coldplug RUN programs (under TCG a Python helper
    takes about a second per disk), so a check right after SSH can see a disk before its rule
    ran. Seen in CI: a renumbered NVMe disk read without its iocost model. A booted lab VM means
    SSH answers and udev has settled."""
    t0 = time.monotonic()
    r = ssh_run(st, "udevadm settle --timeout=180", timeout=200)
    if r.returncode != 0:
        die(f"udev on {inst.name} did not settle within 180 s: {r.stderr.strip()}")
    return round(time.monotonic() - t0, 1)


CUSTOM_KERNEL = "linux-6.1-iolatency-ioprio"  # <name>.bzImage + <name>.config
BUILD_KERNEL_SCRIPT = LAB_DIR / "build-kernel.sh"
CUSTOM_KERNEL_HOWTO = (
    "build it with `make lab-kernel` (tests/lab/build-kernel.sh; needs the Debian package "
    "linux-source-6.1, installed with apt when missing; about 22 minutes on 2 cores) or set "
    f"IO_ISOLATION_LAB_KERNELS to a directory holding {CUSTOM_KERNEL}.bzImage. Without it the "
    "scenarios and benchmarks that boot `--kernel custom` - the io.latency and io.prio.class checks "
    "on a real kernel - cannot run; everything else uses Debian's kernels, which lack those files")


def kernel_cache() -> Path:
    return cache_root() / "kernels"


def cached_kernel() -> Path:
    """Where `lab.py kernel` (or a seed) puts the custom bzImage; its .config sits beside it."""
    return kernel_cache() / f"{CUSTOM_KERNEL}.bzImage"


def custom_kernel_status() -> tuple[Path | None, str]:
    """Where the 6.1 kernel with io.latency/io.prio.class is, without building or copying anything.

    (path, "IO_ISOLATION_LAB_KERNELS" | "cache" | "seed") or (None, why not). Order: the
    explicit directory, the lab cache (`make lab-kernel`), then a prebuilt copy in a
    `shared/lab-kernels/` beside the clone, which is only ever a seed for the cache."""
    env = os.environ.get("IO_ISOLATION_LAB_KERNELS")
    if env:
        k = Path(env) / f"{CUSTOM_KERNEL}.bzImage"
        return (k, "IO_ISOLATION_LAB_KERNELS") if k.is_file() else (
            None, f"{k} not found (IO_ISOLATION_LAB_KERNELS is set)")
    cached = cached_kernel()
    if cached.is_file():
        return cached, "cache"
    seed = REPO_DIR.parent / "shared" / "lab-kernels" / f"{CUSTOM_KERNEL}.bzImage"
    if seed.is_file():
        return seed, "seed"
    return None, f"{cached} not found"


def _install_kernel(bzimage: Path, config: Path | None, copy: bool) -> Path:
    """Put a kernel (and its .config) into the cache atomically; the bzImage goes last."""
    dest = cached_kernel()
    dest.parent.mkdir(parents=True, exist_ok=True)
    for src, dst in ((config, dest.with_suffix(".config")), (bzimage, dest)):
        if src is None or not src.is_file():
            continue
        if copy:
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        else:
            os.replace(src, dst)
    return dest


def find_custom_kernel() -> Path:
    """The 6.1 kernel with io.latency/io.prio.class for `up --kernel custom`, or die saying how to get it."""
    k, source = custom_kernel_status()
    if k is None:
        die(f"no custom kernel: {source}; {CUSTOM_KERNEL_HOWTO}")
    if source != "seed":
        return k
    with locked(cache_root() / "kernels.lock"):
        dest = cached_kernel()
        if not dest.is_file():
            log(f"seeding the kernel cache with the prebuilt {k} (copied once into {dest.parent}; "
                "`make lab-kernel` would build the same)")
            _install_kernel(k, k.with_suffix(".config"), copy=True)
    return dest


def cmd_kernel(a) -> None:
    if a.status:
        k, source = custom_kernel_status()
        if k is None:
            print(f"custom kernel: missing ({source}); {CUSTOM_KERNEL_HOWTO}")
            sys.exit(1)
        print(f"custom kernel: {k} ({'copied into the cache at first use' if source == 'seed' else source})")
        return
    dest = cached_kernel()
    if not a.force and custom_kernel_status()[1] == "seed":
        # the prebuilt copy beside the clone, as `up --kernel custom` would take it at first use: a build costs
        # about 22 minutes of both cores, which make test's other lane needs
        print(f"custom kernel: {find_custom_kernel()} (seeded from the prebuilt copy beside the clone; "
              "`lab.py kernel --force` builds it)")
        return
    with locked(cache_root() / "kernels.lock"):
        if dest.is_file() and not a.force:
            print(f"custom kernel: {dest} is already there (`lab.py kernel --force` rebuilds it)")
            return
        # The build tree (about 1.5 GB) stays after a failure, so a rerun continues from it.
        work = kernel_cache() / ".build"
        work.mkdir(parents=True, exist_ok=True)
        log(f"building the custom kernel in {work} (about 22 minutes on 2 cores)")
        t0 = time.monotonic()
        r = subprocess.run(["bash", str(BUILD_KERNEL_SCRIPT), str(work)], check=False)
        if r.returncode != 0:
            die(f"kernel build failed (rc={r.returncode}); the build tree is kept in {work}")
        _install_kernel(work / "bzImage", work / "config", copy=False)
        shutil.rmtree(work)
    print(f"custom kernel: {dest} (built in {(time.monotonic() - t0) / 60:.1f} min)")


_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
# The device-bound lab disk (--device-bound): the capacity both NVMe drives get. Chosen below what
# the emulator's CPU sustains under TCG for every I/O shape the benchmark runs, and above what the
# QD1 reader does alone, so the throttle - not TCG - is what saturates (docs/isolation.md, "The lab
# disk"; benchmarks/isolation/ceiling.py measures both).
DEVICE_BOUND_CAPACITY = "4000,400M"


def parse_disk_capacity(specs: list[str], meta: dict) -> dict:
    """--disk-capacity DRIVE=IOPS,BYTES_PER_S (DRIVE: nvme-a or its serial lab-nvme-a; BYTES_PER_S
    with an optional decimal k/M/G suffix) -> {drive key: {"iops": n, "bps": n}}.

    The capacity is QEMU's block throttling on that drive (throttling.iops-total/bps-total): the
    emulated disk then completes no more than that, whatever the guest asks, so the disk and not
    the emulator's CPU is the bottleneck - as on a real, saturated NVMe. QEMU's default burst
    allowance (a bucket of a tenth of a second of either limit) is kept."""
    caps = {}
    keys = {k: k for k, v in meta["disks"].items() if v["bus"] == "nvme"}
    keys.update({v["serial"]: k for k, v in meta["disks"].items() if v["bus"] == "nvme"})
    for spec in specs:
        m = re.fullmatch(r"([\w-]+)=(\d+),(\d+)([kKmMgG]?)", spec.strip())
        if not m:
            die(f"--disk-capacity {spec!r}: expected DRIVE=IOPS,BYTES_PER_S, e.g. nvme-b=3000,150M")
        if m.group(1) not in keys:
            die(f"--disk-capacity {spec!r}: no NVMe drive {m.group(1)!r}; drives: {', '.join(sorted(keys))}")
        iops, bps = int(m.group(2)), int(m.group(3)) * _SI[m.group(4).lower()]
        if iops <= 0 or bps <= 0:
            die(f"--disk-capacity {spec!r}: IOPS and bytes per second must be positive")
        caps[keys[m.group(1)]] = {"iops": iops, "bps": bps}
    return caps


def describe_capacity(caps: dict, meta: dict) -> str:
    return ", ".join(f"{meta['disks'][k]['serial']} {c['iops']} IOPS / {c['bps'] / 1e6:g} MB/s"
                     for k, c in sorted(caps.items())) or "none (unthrottled)"


def qemu_disk_args(inst: Instance, meta: dict, multipath: bool, renumber: bool,
                   capacity: dict | None = None, identity: list[str] | None = None, numa: bool = False,
                   hotplug: bool = False) -> list[str]:
    """Data disks: two single-namespace NVMe controllers (distinct serials,
    EUI-64, UUID), optionally a two-controller NVMe subsystem sharing one
    namespace (native multipath), and one virtio disk with a serial. `capacity`
    (parse_disk_capacity) throttles drives to a fixed IOPS and bandwidth. `numa`: the
    second controller (nvme-b) sits behind the expander bridge of NUMA node 1 (numa_args). `hotplug`: nvme-b
    sits behind a hot-pluggable PCIe root port (`unplug` removes it)."""
    args = []
    disks = meta["disks"]
    for key, info in disks.items():
        if key == "nvme-mp" and not multipath:
            continue
        f = inst.dir / info["file"]
        if not f.exists():
            with open(f, "wb") as fh:
                fh.truncate(DATA_DISK_SIZE)  # sparse
        drive = f"if=none,id=d-{key},file={f},format=raw,cache=writeback,discard=unmap"
        cap = (capacity or {}).get(key)
        if cap:
            drive += f",throttling.iops-total={cap['iops']},throttling.bps-total={cap['bps']}"
        args += ["-drive", drive]
    # controllers in PCI order; --renumber reverses it
    ctrls = [(key, info["serial"], None) for key, info in disks.items() if info["bus"] == "nvme"]
    if multipath:
        ctrls += [("nvme-mp-1", NVME_MULTIPATH_SERIAL, "mpsubsys"),
                  ("nvme-mp-2", NVME_MULTIPATH_SERIAL, "mpsubsys")]
        args += ["-device", f"nvme-subsys,id=mpsubsys,nqn={NVME_MULTIPATH_NQN}"]
    slots = list(PCI_NVME_SLOTS[:len(ctrls)])
    if hotplug:
        args += ["-device", f"pcie-root-port,id={HOTPLUG_PORT_ID},bus=pcie.0,addr=0x{PCI_HOTPLUG_PORT:x},"
                            "chassis=2,slot=2"]
    if renumber:
        slots.reverse()
    for (cid, serial, subsys), slot in zip(ctrls, slots):
        dev = f"nvme,id={cid},serial={serial},addr=0x{slot:x}"
        if numa:
            # with an expander bridge, a device without bus= lands on the newest bus (the bridge's): name it
            dev = (f"nvme,id={cid},serial={serial},bus=numa1-port" if cid == "nvme-b"
                   else f"nvme,id={cid},serial={serial},bus=pcie.0,addr=0x{slot:x}")
        if hotplug and cid == HOTPLUG_NVME:
            dev = f"nvme,id={cid},serial={serial},bus={HOTPLUG_PORT_ID}"
        if subsys:
            dev += f",subsys={subsys}"
        args += ["-device", dev]
    for key, info in disks.items():
        if info["bus"] == "nvme":
            bus, shared = key, "off"
        elif info["bus"] == "nvme-multipath" and multipath:
            # declared after both controllers: a shared namespace is attached
            # to every controller of the subsystem
            bus, shared = "nvme-mp-1", "on"
        else:
            continue
        args += ["-device", f"nvme-ns,drive=d-{key},bus={bus},nsid=1,shared={shared},"
                 f"eui64={info['eui64']},uuid={info['uuid']}"]
    v = disks["virtio-data"]
    vaddr = PCI_VDATA
    if renumber:
        args += _small_virtio_disk(inst, "virtio-spare", PCI_VDATA, VIRTIO_SPARE_SERIAL)
        vaddr = PCI_VDATA_RENUMBERED
    args += ["-device", f"virtio-blk-pci,drive=d-virtio-data,{'bus=pcie.0,' if numa else ''}addr=0x{vaddr:x},"
                        f"serial={v['serial']}"]
    for i, (serial, slot) in enumerate(zip(identity or [], PCI_IDENTITY_SLOTS)):
        args += _small_virtio_disk(inst, f"identity-{i}", slot, serial)
    return args


def numa_args() -> list[str]:
    """QEMU arguments for --numa: nodes 0 and 1 with a vCPU and 1 GiB each, and node 1's PCIe expander bridge
    with one root port (qemu_disk_args puts nvme-b there)."""
    return ["-object", "memory-backend-ram,id=numa-m0,size=1G", "-object", "memory-backend-ram,id=numa-m1,size=1G",
            "-numa", "node,nodeid=0,cpus=0,memdev=numa-m0", "-numa", "node,nodeid=1,cpus=1,memdev=numa-m1",
            "-device", f"pxb-pcie,id=numa1-pxb,bus_nr={NUMA_PXB_BUS},numa_node=1,bus=pcie.0,addr=0x{PCI_NUMA_PXB:x}",
            "-device", "pcie-root-port,id=numa1-port,bus=numa1-pxb,chassis=1,slot=1"]


def _small_virtio_disk(inst: Instance, name: str, slot: int, serial: str) -> list[str]:
    """QEMU arguments for a small sparse virtio disk ``<name>.raw`` in the instance dir (made once) at PCI ``slot``."""
    disk = inst.dir / f"{name}.raw"
    if not disk.exists():
        with open(disk, "wb") as fh:
            fh.truncate(VIRTIO_SPARE_SIZE)
    # QEMU's option syntax: a comma in a value is written twice
    return ["-drive", f"if=none,id=d-{name},file={disk},format=raw,cache=writeback",
            "-device", f"virtio-blk-pci,drive=d-{name},addr=0x{slot:x},serial={serial.replace(',', ',,')}"]


def _start_qemu(inst: Instance, common: list[str]) -> tuple[int, dict]:
    """Start the daemonized QEMU with an SSH forward on a free loopback port."""
    for _attempt in range(3):
        port = free_port()
        # restrict=on: the guest reaches nothing; only the SSH forward, on loopback.
        argv = common + ["-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22"]
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, check=False)
        if r.returncode == 0:
            break
        if "hostfwd" in r.stderr or "forwarding" in r.stderr:
            log(f"port {port} taken meanwhile, retrying")
            continue
        die(f"QEMU failed to start (rc={r.returncode}):\n{r.stderr}\ncommand: {shlex.join(argv)}")
    else:
        die("could not find a free port for the SSH forward")
    pid = _read_int(inst.pidfile)
    if not pid or not inst._is_ours(pid):
        die(f"QEMU started but pid file {inst.pidfile} is unusable")
    return port, {"pid": pid, "port": port, "started_at": time.time(), "argv": argv, "t0": t0}


def cmd_up(a) -> None:
    if a.hotplug and a.numa:
        die("--hotplug and --numa both place nvme-b (a hot-pluggable root port, node 1's expander bridge); give one")
    ensure_host_tools(RUN_TOOLS)
    recipe = load_recipe()
    if a.guest not in recipe["guests"]:
        die(f"unknown guest {a.guest!r}; known: {', '.join(guest_names())}")
    if len(a.identity_disk) > len(PCI_IDENTITY_SLOTS) or any(
            not s or len(s.encode()) > VIRTIO_SERIAL_MAX or not all(" " <= c <= "~" for c in s) for s in a.identity_disk):
        die(f"--identity-disk takes up to {len(PCI_IDENTITY_SLOTS)} serials of 1 to {VIRTIO_SERIAL_MAX} printable "
            f"ASCII characters, not {a.identity_disk!r}")
    inst = Instance(a.name or a.guest)
    img = ensure_image(a.guest, full_verify=a.verify)
    manifest = read_json(img / "manifest.json") or {}
    key = ssh_key()
    with locked(inst.lock):
        inst.cleanup_stale()
        meta = inst.meta()
        bound = [f"{drive[0]}={DEVICE_BOUND_CAPACITY}" for drive in NVME_PLAIN] if a.device_bound else []
        capacity = parse_disk_capacity(a.disk_capacity + bound, meta)
        meta["last_guest"] = a.guest
        write_json(inst.dir / "instance.json", meta)
        inst.run.mkdir(parents=True)
        # The instance's root disk: a copy-on-write overlay over the cached image (which is only
        # ever read). It survives `down` like a real machine's disk, so a power-cycled boot (e.g.
        # --renumber) still has what the collection persisted under /etc; `down --purge`,
        # --fresh-root, a killed run or a rebuilt image start a new one.
        overlay = inst.dir / "root.qcow2"
        backing_marker = inst.dir / "root.backing"
        backing = str(img / "image.raw")
        reuse = (overlay.exists() and not a.fresh_root
                 and backing_marker.exists() and backing_marker.read_text().strip() == backing)
        if reuse:
            log(f"{inst.name}: reusing the root disk of the last boot ({overlay})")
        else:
            overlay.unlink(missing_ok=True)
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", backing,
                            "-F", "raw", str(overlay)], check=True)
            backing_marker.write_text(backing + "\n")
        if a.kernel == "debian":
            kernel, initrd = img / "vmlinuz", img / "initrd.img"
        else:
            kernel = find_custom_kernel() if a.kernel == "custom" else Path(a.kernel).resolve()
            initrd = None  # the custom kernel has everything built in
            if not kernel.exists():
                die(f"kernel {kernel} not found")
        accel = detect_accel(kernel)
        accel_args = (["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else
                      ["-accel", f"tcg,thread={a.tcg_thread},tb-size=512", "-cpu", "max"])
        # tsc=reliable under TCG: Debian 12's 6.1 kernel marks the TSC unstable on QEMU's AMD-vendored `max` CPU
        # with two vCPUs ("TSCs unsynchronized") and falls back to the emulated HPET, so every clock read is a
        # system call and an MMIO exit (measured: Python's clock loop 1.33 M reads in 5 s on hpet, 2.19 M on tsc;
        # a 50-IOPS fio reader 5.2 s of QEMU CPU per 20 s on hpet, 4.0 s on tsc). The guest TSC is the host's.
        append = f"root=/dev/vda rw console=ttyS0 systemd.hostname={inst.name}"
        if accel == "tcg":
            append += " tsc=reliable"
        if a.append:
            append += " " + a.append
        qmp_sock = inst.run / "qmp.sock"
        if len(str(qmp_sock)) > 100:  # sun_path limit
            die(f"state dir path too long for a UNIX socket: {qmp_sock}; set IO_ISOLATION_LAB_STATE")
        common = [
            "qemu-system-x86_64", "-name", f"lab-{inst.name},debug-threads=on",
            "-machine", "q35", "-smp", "2", "-m", "2G", *accel_args,
            "-nodefaults", "-no-user-config", "-display", "none", "-rtc", "base=utc",
            "-kernel", str(kernel), *(["-initrd", str(initrd)] if initrd else []),
            "-append", append,
            "-drive", f"if=none,id=root,file={overlay},format=qcow2,cache=unsafe",
            "-device", f"virtio-blk-pci,drive=root,addr=0x{PCI_ROOT:x},serial=lab-root",
            *(numa_args() if a.numa else []),
            *qemu_disk_args(inst, meta, a.multipath, a.renumber, capacity, a.identity_disk, a.numa, a.hotplug),
            "-device", f"virtio-net-pci,netdev=n0,{'bus=pcie.0,' if a.numa else ''}addr=0x{PCI_NET:x}",
            "-qmp", f"unix:{qmp_sock},server=on,wait=off",
            "-serial", f"file:{inst.run / 'serial.log'}",
            "-pidfile", str(inst.pidfile), "-daemonize",
        ]
        st_base = {
            "name": inst.name, "guest": a.guest, "key": str(key),
            "accel": accel, "tcg_thread": a.tcg_thread if accel == "tcg" else None, "kernel": str(kernel), "initrd": str(initrd) if initrd else None,
            "append": append, "multipath": a.multipath, "renumber": a.renumber, "identity_disks": a.identity_disk,
            "numa": a.numa, "hotplug": a.hotplug,
            "disk_capacity": capacity,
            "image": str(img), "overlay": str(overlay), "qmp": str(qmp_sock),
            "serial_log": str(inst.run / "serial.log"), "instance_dir": str(inst.dir),
        }
        for boot in range(1, a.boot_attempts + 1):
            port, st = _start_qemu(inst, common)
            write_json(inst.state_file, {**st_base, **st})
            log(f"{inst.name}: QEMU pid {st['pid']} ({accel}), ssh on 127.0.0.1:{port}; waiting for SSH "
                f"(boot {boot} of {a.boot_attempts})")
            if wait_ssh({**st_base, **st}, a.timeout, inst, fatal=boot == a.boot_attempts, panic_since=0) is not None:
                break
            # A TCG boot that never reaches SSH (seen once in CI): power it off and boot again from
            # a fresh root overlay - the hung boot's overlay was never flushed.
            _stop_qemu(inst, st["pid"], str(qmp_sock))
            inst._keep_serial_log()
            (inst.run / "serial.log").unlink(missing_ok=True)
            overlay.unlink(missing_ok=True)
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", backing,
                            "-F", "raw", str(overlay)], check=True)
        st = {**st_base, **st}
        st["boot_to_ssh_s"] = round(time.monotonic() - st.pop("t0"), 1)
        ssh_master_start(st)
        st["udev_settle_s"] = settle(st, inst)
        info = ssh_run(st, "uname -r; systemctl --version | head -1").stdout.split("\n")
        st["uname_r"], st["systemd"] = info[0].strip(), (info[1].split() + ["", ""])[1]
        write_json(inst.state_file, st)
    g = recipe["guests"][a.guest]
    if a.kernel == "debian" and not st["uname_r"].startswith(g.get("expect_kernel", "")):
        log(f"warning: kernel {st['uname_r']} but recipe expects {g['expect_kernel']}*")
    if st["systemd"] != g.get("expect_systemd", st["systemd"]):
        log(f"warning: systemd {st['systemd']} but recipe expects {g['expect_systemd']}")
    print(f"{inst.name}: up in {st['boot_to_ssh_s']} s (boot to SSH), {a.guest} kernel "
          f"{st['uname_r']} systemd {st['systemd']}, {accel}, ssh -p {port} root@127.0.0.1 "
          f"(mmdebstrap image {manifest.get('recipe_hash')})")
    if capacity:
        print(f"{inst.name}: disk capacity (QEMU block throttling): {describe_capacity(capacity, meta)}")


def cmd_ssh(a) -> None:
    inst = Instance(a.name)
    st = inst.running_state()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    # Hand the terminal over to ssh: exit status and stdin pass through. Like
    # ssh itself, the words are joined with spaces and run by the guest's shell.
    argv = ssh_argv(st, " ".join(cmd)) if cmd else ssh_argv(st, tty=sys.stdin.isatty())
    os.execvp("ssh", argv)


def cmd_status(a) -> None:
    root = state_root()
    rows = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if not d.is_dir() or not NAME_RE.match(d.name):
            continue
        inst = Instance(d.name)
        st = inst.state() or {}
        pids = inst.qemu_pids()
        if pids:
            state = "running" if st.get("pid") in pids else f"orphan-qemu({pids})"
        elif inst.run.exists():
            state = "stale"
        else:
            state = "stopped"
        up = f"{time.time() - st['started_at']:.0f}s" if pids and st.get("started_at") else "-"
        flags = ",".join([f for f in ("multipath", "renumber", "hotplug") if st.get(f)]
                         + [f"{k}={c['iops']},{c['bps']}" for k, c in sorted((st.get("disk_capacity") or {}).items())]) or "-"
        guest = st.get("guest") or (read_json(d / "instance.json") or {}).get("last_guest", "-")
        rows.append((d.name, guest, state, str(st.get("pid", "-")) if pids else "-",
                     str(st.get("port", "-")) if pids else "-", st.get("accel", "-") if pids else "-",
                     up, flags))
    hdr = ("NAME", "GUEST", "STATE", "PID", "PORT", "ACCEL", "UPTIME", "FLAGS")
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    for r in [hdr] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if not rows:
        print(f"(no instances under {root})")


def cmd_reboot(a) -> None:
    inst = Instance(a.name)
    with locked(inst.lock):
        st = inst.running_state()
        before = ssh_run(st, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
        ssh_master_stop(st)  # it would hang on the dying connection
        t0 = time.monotonic()
        if a.hard:
            qmp(st["qmp"], "system_reset")
        else:
            # The connection may drop before ssh gets a status; ignore it.
            with contextlib.suppress(subprocess.TimeoutExpired):
                ssh_run(st, "systemctl reboot", timeout=30, mux=False)
        # A new boot_id proves the guest really went through a boot.
        since = serial_size(inst)
        if wait_ssh(st, a.timeout, inst, not_equal=before or None, fatal=False, panic_since=since) is None:
            # Under TCG a 6.12 guest's SMP boot panicked once in CI ("Oops: int3" in sched_clock_cpu
            # while another CPU came up), and boots hang silent: the emulator, not the guest's state. Reset it once.
            log(f"{inst.name}: resetting the VM once after the failed boot")
            qmp(st["qmp"], "system_reset")
            wait_ssh(st, a.timeout, inst, not_equal=before or None)
        ssh_master_start(st)
        st["udev_settle_s"] = settle(st, inst)
        took = round(time.monotonic() - t0, 1)
        st["last_reboot_s"] = took
        write_json(inst.state_file, st)
    print(f"{inst.name}: rebooted ({'QMP system_reset' if a.hard else 'systemctl reboot'}) "
          f"to SSH in {took} s")


def cmd_unplug(a) -> None:
    """Hot-remove a device (QMP device_del) and wait until QEMU has let it go: the guest was asked to give it up
    (ACPI or PCIe hotplug), its driver let go and the slot is empty. Prints the seconds that took."""
    inst = Instance(a.name)
    st = inst.running_state()
    if a.device != HOTPLUG_NVME or not st.get("hotplug"):
        die(f"{inst.name}: only {HOTPLUG_NVME} of a VM booted with --hotplug can be hot-removed (q35's pcie.0 and "
            f"an NVMe namespace bus do not support hotplugging)")
    t0 = time.monotonic()
    r = qmp(st["qmp"], "device_del", {"id": a.device})
    if "error" in r:
        die(f"{inst.name}: device_del {a.device}: {r['error'].get('desc')}")
    while True:
        present = qmp(st["qmp"], "qom-list", {"path": "/machine/peripheral"}).get("return") or []
        if a.device not in {p.get("name") for p in present}:
            break
        if time.monotonic() - t0 > a.timeout:
            die(f"{inst.name}: {a.device} still present {a.timeout:.0f} s after device_del (the guest did not "
                "release it)")
        time.sleep(0.2)
    print(f"{inst.name}: {a.device} hot-removed in {time.monotonic() - t0:.1f} s")


def cmd_down(a) -> None:
    inst = Instance(a.name)
    if not inst.dir.exists():
        print(f"{inst.name}: no such instance")
        return
    with locked(inst.lock):
        st = inst.state() or {}
        pids = inst.qemu_pids()
        if pids and st.get("pid") in pids and not a.fast:
            # Flush the guest's page cache to the persistent data disks.
            with contextlib.suppress(subprocess.TimeoutExpired):
                ssh_run(st, "sync", timeout=15)
        if st:
            ssh_master_stop(st)
        cpu = [_cpu_use(pid) for pid in pids]
        for pid in pids:
            _stop_qemu(inst, pid, st.get("qmp") if pid == st.get("pid") else None)
        if inst.run.exists():
            inst._keep_serial_log()
            shutil.rmtree(inst.run)
        if a.purge and inst.dir.exists():
            shutil.rmtree(inst.dir)
    # What the VM cost the host: make test's stages are planned by it (issue 36), and a guest under TCG
    # is the emulator's CPU, not wall time.
    used = ", ".join(f"QEMU used {c:.0f} s of CPU in {w:.0f} s ({c / w:.2f} cores)" for c, w in cpu if w > 0)
    print(f"{inst.name}: down" + (f" (stopped pid {pids})" if pids else " (was not running)")
          + (f"; {used}" if used else "") + (", instance purged" if a.purge else ""))


def _cpu_use(pid: int) -> tuple[float, float]:
    """(CPU seconds, seconds alive) of a running process, from /proc; (0, 0) if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    # fields after "(comm)": state is [0]; utime, stime are [11], [12]; starttime is [19]
    return (int(fields[11]) + int(fields[12])) / tick, uptime - int(fields[19]) / tick


def _stop_qemu(inst: Instance, pid: int, qmp_sock: str | None) -> None:
    """QMP quit, then SIGTERM, then SIGKILL - each time re-checking that the
    PID is still our QEMU, so a recycled PID is never signalled."""
    def gone(wait: float) -> bool:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not inst._is_ours(pid) or not _pid_alive(pid):
                return True
            time.sleep(0.2)
        return False
    if qmp_sock and os.path.exists(qmp_sock):
        with contextlib.suppress(OSError, ValueError):
            qmp(qmp_sock, "quit", timeout=5)
        if gone(10):
            return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if inst._is_ours(pid):
            log(f"{inst.name}: sending {sig.name} to QEMU pid {pid}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if gone(wait):
            return
    die(f"QEMU pid {pid} did not exit")


def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def cmd_inventory(a) -> None:
    inst = Instance(a.name)
    st = inst.running_state()
    meta = inst.meta()
    disks = []
    for k, v in meta["disks"].items():
        if k == "nvme-mp" and not st.get("multipath"):
            continue
        d = dict(role=k, **{kk: vv for kk, vv in v.items() if kk not in ("file", "eui64", "uuid")})
        cap = (st.get("disk_capacity") or {}).get(k)
        if cap:  # the capacity the lab gives this drive (QEMU block throttling)
            d.update(capacity_iops=cap["iops"], capacity_bps=cap["bps"])
        if v["bus"].startswith("nvme"):
            # Linux ignores the namespace IDs of QEMU's NVMe (quirk "Ignoring
            # bogus Namespace Identifiers"), so no eui/uuid in sysfs; the
            # wwid falls back to nvme.<vid>-<hex serial>-<hex model>-<nsid>.
            d["wwid"] = (f"nvme.1b36-{v['serial'].encode().hex()}-"
                         f"{QEMU_NVME_MODEL.encode().hex()}-00000001")
        disks.append(d)
    for i, serial in enumerate(st.get("identity_disks") or []):
        disks.append({"role": f"identity-{i}", "bus": "virtio", "serial": serial})
    lines = [
        "# Generated by tests/lab/lab.py inventory; valid while the VM runs.",
        "all:",
        "  hosts:",
        f"    {inst.name}:",
        "      ansible_host: 127.0.0.1",
        f"      ansible_port: {st['port']}",
        "      ansible_user: root",
        f"      ansible_ssh_private_key_file: {_yaml_str(st['key'])}",
        "      ansible_python_interpreter: /usr/bin/python3",
        # Each module through the open (multiplexed) SSH session, not copied to a file first:
        # fewer round trips per task, and round trips are most of a task's cost under TCG.
        "      ansible_pipelining: true",
        # ServerAlive: a session a guest reboot cuts is never closed by QEMU's user networking
        "      ansible_ssh_common_args: \"-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
        "-o ServerAliveInterval=5 -o ServerAliveCountMax=6\"",
        f"      lab_guest: {st['guest']}",
        f"      lab_kernel_release: {_yaml_str(st.get('uname_r', ''))}",
        f"      lab_multipath: {str(bool(st.get('multipath'))).lower()}",
        f"      lab_numa: {str(bool(st.get('numa'))).lower()}",
        f"      lab_renumbered: {str(bool(st.get('renumber'))).lower()}",
        "      lab_disks:",
    ]
    for d in disks:
        lines.append("        - " + ", ".join(f"{k}: {_yaml_str(str(v))}" for k, v in d.items())
                     .join(["{", "}"]))
    print("\n".join(lines))


def cmd_instance_config(a) -> None:
    """Molecule's instance_config.yml entries (JSON, which is YAML) for running VMs."""
    out = []
    for name in a.names:
        inst = Instance(name)
        st, disks = inst.running_state(), inst.meta()["disks"]
        out.append({"instance": name, "address": "127.0.0.1", "user": "root", "port": st["port"],
                    "identity_file": st["key"], "guest": st["guest"],
                    "renumbered": bool(st.get("renumber")), "multipath": bool(st.get("multipath")),
                    # by serial: what a consumer finds the disk by in the guest
                    "disk_capacity": {disks[k]["serial"]: c for k, c in (st.get("disk_capacity") or {}).items()}})
    print(json.dumps(out, indent=2))


def _portable_paths(text: str) -> str:
    """text with this machine's lab paths spelled as a user would (~/.cache/..., $IO_ISOLATION_LAB_*),
    so that a recorded command line names no home directory."""
    home = str(Path.home())
    subst = [(str(state_root()), "$IO_ISOLATION_LAB_STATE") if os.environ.get("IO_ISOLATION_LAB_STATE") else None,
             (str(cache_root()), "$IO_ISOLATION_LAB_CACHE") if os.environ.get("IO_ISOLATION_LAB_CACHE") else None,
             (home, "~") if home != "/" else None]
    for old, new in filter(None, subst):
        text = re.sub(rf"(?<![^\s=,:']){re.escape(old)}(?=/)", lambda _m, new=new: new, text)
    return text


def cmd_observe(a) -> None:
    inst = Instance(a.name)
    st = inst.running_state()
    # One SSH session runs every command (bash -s), printing each as
    # "$ cmd", its output and "[rc=N]", like tests/observed/*.txt.
    script = ["exec 2>&1"]
    for c in OBSERVE_COMMANDS:
        script += [f"echo {shlex.quote('$ ' + c)}", f"( {c} )", 'echo "[rc=$?]"', "echo"]
    r = ssh_run(st, "bash -s", timeout=300, input="\n".join(script) + "\n")
    flags = " ".join(f"--{f}" for f in ("multipath", "renumber") if st.get(f)) or "(none)"
    disks = ", ".join(f"{k}={v['serial']}" for k, v in inst.meta()["disks"].items())
    header = (f"# Observed by `tests/lab/lab.py observe` on instance {inst.name}: guest {st['guest']}, "
              f"kernel {st.get('uname_r')}, {st['accel']}, up flags {flags}\n"
              f"# QEMU data disks (instance-wide; nvme-mp only with --multipath): {disks}\n"
              f"# QEMU command line: {_portable_paths(shlex.join(st['argv']))}\n\n")
    Path(a.outfile).write_text(header + r.stdout)
    print(f"wrote {a.outfile} ({len(r.stdout.splitlines())} lines, ssh rc={r.returncode})")


def cmd_build(a) -> None:
    for g in a.guests or guest_names():
        build_image(g, force=a.force)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("build", help="build (or verify) cached guest images")
    s.add_argument("guests", nargs="*", help="default: every guest in recipe.toml")
    s.add_argument("--force", action="store_true", help="rebuild even if the cache is intact")
    s.set_defaults(func=cmd_build)
    s = sub.add_parser("up", help="boot a VM")
    s.add_argument("guest")
    s.add_argument("--name", help="instance name (default: the guest name); also the hostname")
    s.add_argument("--append", default="", help="extra kernel command line")
    s.add_argument("--fresh-root", action="store_true",
                   help="start from a new root overlay instead of the disk the last boot left")
    s.add_argument("--identity-disk", action="append", default=[], metavar="SERIAL",
                   help=f"add a small virtio disk with this serial (printable ASCII, at most {VIRTIO_SERIAL_MAX} "
                        f"bytes; hostile identities); up to {len(PCI_IDENTITY_SLOTS)}")
    s.add_argument("--renumber", action="store_true",
                   help="reverse the NVMe controllers' PCI order and put a spare virtio disk before the data disk")
    s.add_argument("--multipath", action="store_true",
                   help="add an NVMe subsystem with two controllers sharing one namespace")
    s.add_argument("--numa", action="store_true",
                   help="two NUMA nodes (a vCPU and 1 GiB each), nvme-b behind a PCIe expander bridge on node 1")
    s.add_argument("--kernel", default="debian",
                   help="debian (the image's, with initrd), custom (6.1 with io.latency/io.prio.class, "
                        "see `kernel`), or a bzImage path")
    s.add_argument("--timeout", type=float, default=420, help="seconds to wait for SSH")
    s.add_argument("--boot-attempts", type=int, default=2,
                   help="power-cycle and boot again (fresh root overlay) when SSH does not answer in time, the "
                        "kernel panics or the console stalls")
    s.add_argument("--verify", action="store_true", help="re-hash the cached image before booting")
    s.add_argument("--disk-capacity", action="append", default=[], metavar="DRIVE=IOPS,BYTES_PER_S",
                   help="give an NVMe drive (nvme-a, nvme-b or its serial) a fixed capacity with QEMU block "
                        "throttling, e.g. nvme-b=3000,150M; repeatable")
    s.add_argument("--device-bound", action="store_true",
                   help=f"both NVMe drives at the lab's device-bound capacity ({DEVICE_BOUND_CAPACITY}): the disk, "
                        "not the emulator's CPU, is the bottleneck")
    s.add_argument("--tcg-thread", choices=("multi", "single"), default="multi",
                   help="under TCG: one host thread per vCPU (multi) or all vCPUs on one thread (single: guest "
                        "kernels that patch their own code while the other vCPU runs it, as ftrace does when a "
                        "kprobe attaches, see molecule/colocated)")
    s.add_argument("--hotplug", action="store_true",
                   help=f"put {HOTPLUG_NVME} behind a hot-pluggable PCIe root port, so that `unplug` can remove it")
    s.set_defaults(func=cmd_up)
    s = sub.add_parser("ssh", help="run a command in the guest: ssh NAME -- CMD...")
    s.add_argument("name")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_ssh)
    s = sub.add_parser("status", help="list instances")
    s.set_defaults(func=cmd_status)
    s = sub.add_parser("reboot", help="reboot the guest and wait for SSH")
    s.add_argument("name")
    s.add_argument("--hard", action="store_true", help="QMP system_reset instead of systemctl reboot")
    s.add_argument("--timeout", type=float, default=420)
    s.set_defaults(func=cmd_reboot)
    s = sub.add_parser("unplug", help=f"hot-remove {HOTPLUG_NVME} (QMP device_del; needs up --hotplug)")
    s.add_argument("name")
    s.add_argument("device", nargs="?", default=HOTPLUG_NVME)
    s.add_argument("--timeout", type=float, default=60, help="seconds to wait for the guest to release it")
    s.set_defaults(func=cmd_unplug)
    s = sub.add_parser("down", help="stop the VM and drop its run dir (the root disk stays until --purge)")
    s.add_argument("name")
    s.add_argument("--purge", action="store_true", help="also delete the instance's data disks")
    s.add_argument("--fast", action="store_true", help="skip the guest sync before quitting")
    s.set_defaults(func=cmd_down)
    s = sub.add_parser("inventory", help="print an Ansible YAML inventory for the running VM")
    s.add_argument("name")
    s.set_defaults(func=cmd_inventory)
    s = sub.add_parser("instance-config", help="print molecule instance_config entries for running VMs")
    s.add_argument("names", nargs="+")
    s.set_defaults(func=cmd_instance_config)
    s = sub.add_parser("kernel", help="build the custom 6.1 kernel (io.latency, io.prio.class) into the cache")
    s.add_argument("--force", action="store_true", help="rebuild even if the cache has one")
    s.add_argument("--status", action="store_true",
                   help="only say whether one is available (exit 0) or not (exit 1); builds nothing")
    s.set_defaults(func=cmd_kernel)
    s = sub.add_parser("observe", help="capture the guest's block/NVMe layout into a file")
    s.add_argument("name")
    s.add_argument("outfile")
    s.set_defaults(func=cmd_observe)
    a = p.parse_args(argv)
    a.func(a)


if __name__ == "__main__":
    main()
