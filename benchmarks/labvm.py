# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every benchmark needs from the lab: its VM options, the VM's life, its inventory, and
ansible-playbook from this virtualenv against the collection in this checkout."""

import base64
import contextlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# make's symlink tree (make tree; tests/unit/conftest.py makes the same): this checkout as aiinfra.io_isolation.
COLLECTIONS = os.path.join(REPO, ".cache", "collections")
LAB = [sys.executable if sys.version_info >= (3, 11) else "python3", os.path.join(REPO, "tests", "lab", "lab.py")]


def sh(argv, **kw):
    """Run argv; on failure print what it captured (the reason) before raising."""
    try:
        return subprocess.run(argv, check=True, text=True, **kw)
    except subprocess.CalledProcessError as e:
        for text in (e.stdout, e.stderr):
            if text:
                print(text[-6000:], file=sys.stderr, flush=True)
        raise


def add_vm_args(ap, guest, name, disk_capacity="none"):
    ap.add_argument("--guest", default=guest)
    ap.add_argument("--name", default=name)
    ap.add_argument("--disk-capacity", default=disk_capacity,
                    help="the lab NVMe drives' capacity: device-bound (lab.py's, the disk and not the emulator's "
                         "CPU is the bottleneck), IOPS,BYTES_PER_S for both, or none; default %(default)s")
    ap.add_argument("--tcg-thread", choices=("multi", "single"), default="multi",
                    help="under TCG, lab.py's --tcg-thread: single keeps a kprobe's attach from racing the other vCPU "
                         "(docs/kernel-files.md); default %(default)s")
    ap.add_argument("--kernel", default="debian",
                    help="lab.py's --kernel: debian (the guest's own), custom (make lab-kernel: io.latency and "
                         "io.prio.class) or a bzImage path; default %(default)s")
    ap.add_argument("--numa", action="store_true",
                    help="lab.py's --numa: two NUMA nodes of one vCPU each, nvme-b behind node 1's PCIe bridge")
    ap.add_argument("--reuse", action="store_true", help="use a running VM of that name")
    ap.add_argument("--keep", action="store_true", help="leave the VM running")


@contextlib.contextmanager
def vm(a):
    """The benchmark's VM from the options of add_vm_args: booted (after removing a stale one of that
    name) unless --reuse, both NVMe drives with --disk-capacity (and two NUMA nodes with --numa), shut down and its disks removed
    afterwards unless --keep."""
    if not a.reuse:
        sh(LAB + ["down", a.name, "--purge"], capture_output=True)
        caps = {"none": [], "device-bound": ["--device-bound"]}.get(a.disk_capacity)
        if caps is None:
            caps = ["--disk-capacity=%s=%s" % (drive, a.disk_capacity) for drive in ("nvme-a", "nvme-b")]
        sh(LAB + ["up", a.guest, "--name", a.name, "--boot-attempts", "2", "--tcg-thread", a.tcg_thread,
                  "--kernel", getattr(a, "kernel", "debian")] + caps + (["--numa"] if getattr(a, "numa", False) else []))
    try:
        yield a.name
    finally:
        if not a.keep:
            sh(LAB + ["down", a.name, "--purge"], capture_output=True)


def guest_script(name, script, args):
    """Run the Python file `script` in the guest with `args`; its last stdout line, parsed as JSON.
    An argument that is not a str is passed as base64 JSON: lab.py ssh hands the words to the
    guest's shell, which would eat JSON's quotes."""
    words = [a if isinstance(a, str) else base64.b64encode(json.dumps(a).encode()).decode() for a in args]
    with open(script) as stdin:
        res = subprocess.run(LAB + ["ssh", name, "--", "python3", "-"] + words, stdin=stdin,
                             capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit("%s %s failed (rc %d): %s" % (os.path.basename(script), " ".join(words[:1]), res.returncode,
                                                       res.stderr.strip()[-2000:]))
    return json.loads(res.stdout.strip().splitlines()[-1])


def disk_capacity(name, serial):
    """The capacity the running lab VM gives the drive with that serial ({"iops", "bps"}), None if unthrottled:
    read back from lab.py, which set it."""
    configs = json.loads(sh(LAB + ["instance-config", name], capture_output=True).stdout)
    return configs[0]["disk_capacity"].get(serial)


def accel():
    """What QEMU runs on (tcg or kvm), as the lab's own probe recorded it (lab.py's cache)."""
    spec = importlib.util.spec_from_file_location("lab", LAB[1])
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    try:
        with open(lab.cache_root() / "accel.json") as f:
            return json.load(f).get("accel")
    except (OSError, ValueError):
        return None


def write_inventory(name, path):
    """lab.py's inventory of the VM (its SSH port changes with every boot)."""
    with open(path, "w") as f:
        f.write(sh(LAB + ["inventory", name], capture_output=True).stdout)


def ansible_playbook(inventories, playbook, extra_vars):
    """ansible-playbook argv and environment: this virtualenv's, with this checkout as the collection."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS + os.pathsep + env.get("ANSIBLE_COLLECTIONS_PATH", "")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook")]
    for inv in inventories:
        argv += ["-i", inv]
    argv += [playbook]
    for extra in extra_vars:
        argv += ["-e", extra]
    return argv, env


def module_utils(name):
    """The collection's module_utils `name` from this checkout, imported as the modules import it."""
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    return importlib.import_module("ansible_collections.aiinfra.io_isolation.plugins.module_utils." + name)
