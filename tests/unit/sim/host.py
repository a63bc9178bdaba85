# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""FakeHost: builds a realistic fake /sys, /dev and /proc tree for unit tests.

Use it as ``h = FakeHost(tmp_path); h.add_nvme(); h.add_virtio()`` and hand ``KernelFS(h.root)``
to the code under test. The layout follows the kernel (6.1-6.12):

* each block device lives under ``/sys/devices/...`` (PCI path, virtio, SCSI host/target, or
  ``/sys/devices/virtual/block`` for dm/md/loop); ``/sys/block/<disk>``,
  ``/sys/class/block/<disk|part>`` and ``/sys/dev/block/MAJ:MIN`` are *relative* symlinks to it,
  as are ``device`` and ``subsystem``;
* partitions are sub-directories of their disk (``partition``, ``start``, ``size``, ``dev``) and
  are not in ``/sys/block``;
* ``/dev/<name>`` are regular files (no mknod); ``/dev/disk/by-id`` and ``by-path`` hold relative
  links (``../../nvme0n1``) named as udev's 60-persistent-storage.rules names them;
* NVMe native multipath: the head ``nvmeSnN`` lives under
  ``/sys/devices/virtual/nvme-subsystem/nvme-subsysS`` (no ``mq/``), the per-path disks
  ``nvmeScCnN`` under each controller with ``hidden`` = 1, ``mq/`` but no ``dev`` file, no
  ``/sys/dev/block`` link and no ``/dev`` node (GENHD_FL_HIDDEN);
* attribute text is what the kernel prints: NVMe ``model``/``serial``/``firmware_rev`` are
  space-padded to their Identify field widths, ``eui`` is ``%8ph`` (``00 11 22 ...``), ``wwid``
  follows ``wwid_show()`` (uuid. > eui.<nguid> > eui.<eui64> > nvme.<vid>-<serial>-<model>-<nsid>).

Values are written with a trailing newline like sysfs; files that the kernel shows empty
(``io.cost.qos`` on a fresh root, ``io.max``) are empty.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import struct

from sim.cgroup import controller_files

QUEUE_COMMON = {
    "add_random": "0", "chunk_sectors": "0", "dax": "0", "discard_granularity": "512",
    "discard_max_bytes": "2199023255040", "discard_max_hw_bytes": "2199023255040",
    "discard_zeroes_data": "0", "dma_alignment": "3", "fua": "0", "hw_sector_size": "512",
    "iostats": "1", "logical_block_size": "512", "max_discard_segments": "256",
    "max_hw_sectors_kb": "512", "max_integrity_segments": "0", "max_sectors_kb": "512",
    "max_segment_size": "4294967295", "max_segments": "127", "minimum_io_size": "512",
    "nomerges": "0", "nr_zones": "0", "optimal_io_size": "0", "physical_block_size": "512",
    "read_ahead_kb": "128", "rotational": "0", "stable_writes": "0", "virt_boundary_mask": "0",
    "write_cache": "write back", "write_same_max_bytes": "0", "write_zeroes_max_bytes": "0",
    "zone_append_max_bytes": "0", "zone_write_granularity": "0", "zoned": "none",
}
# Only blk-mq queues carry these (io_timeout/wbt need a request queue).
QUEUE_MQ = {
    "scheduler": "[none] mq-deadline kyber bfq ", "nr_requests": "1023", "wbt_lat_usec": "2000",
    "rq_affinity": "1", "io_poll": "0", "io_poll_delay": "-1", "io_timeout": "30000",
}
# bio-based queues (dm, md, NVMe multipath head): no elevator, no wbt.
QUEUE_BIO = {"scheduler": "none", "nr_requests": "128", "rq_affinity": "1", "io_poll": "0", "io_poll_delay": "-1"}
SINGLE_QUEUE_SCHEDULER = "[mq-deadline] kyber bfq none"

NVME_MODULE_PARAMS = {
    "io_queue_depth": "1024", "max_host_mem_size_mb": "128", "noacpi": "N", "poll_queues": "0",
    "sgl_threshold": "32768", "use_cmb_sqes": "Y", "use_threaded_interrupts": "0", "write_queues": "0",
}
NVME_CORE_PARAMS = {"multipath": "Y", "io_timeout": "30", "admin_timeout": "60", "max_retries": "5"}

PSI_ZERO = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
# as the lab guests mount it (systemd 252 and 257: tests/lab/observed-sysfs-debian1*.txt)
CGROUP2_MOUNT = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0"
V1_CONTROLLERS = ("cpuset", "cpu,cpuacct", "blkio", "memory", "devices", "freezer", "net_cls,net_prio",
                  "perf_event", "hugetlb", "pids", "rdma", "misc")

GB = 1024 ** 3


def _pad(text, width):
    return (text or "").ljust(width)


def _udev(text):
    """udev link-name escaping for the usual cases: trim, whitespace runs -> '_'."""
    return "_".join((text or "").split())


def _hexbytes(text):
    return "".join("%02x" % b for b in text.encode("ascii"))


def nvme_wwid(vendor_id, serial, model, nsid, eui64=None, nguid=None, uuid=None):
    """What drivers/nvme/host/sysfs.c wwid_show() prints for these identifiers."""
    if uuid:
        return "uuid." + uuid.lower()
    if nguid:
        return "eui." + nguid.replace("-", "").lower()
    if eui64:
        return "eui." + eui64.lower()
    return "nvme.%04x-%s-%s-%08x" % (vendor_id, _hexbytes(serial.rstrip()), _hexbytes(model.rstrip()), nsid)


def _uuid_fmt(hex32):
    h = hex32.replace("-", "").lower()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


class FakeHost:
    """Builder for a fake host tree below ``self.root`` (``<tmp_path>/host``)."""

    def __init__(self, tmp_path, ncpus=2, psi=True, debugfs=True, kernel="6.1.0-50-amd64"):
        self.root = os.path.join(str(tmp_path), "host")
        self.ncpus = ncpus
        self.psi = psi
        self.debugfs = debugfs
        self.devices = {}          # kernel name -> {'majmin', 'sysdir', 'kind', 'parent', ...}
        self.cgroup_mount = None   # host path of the cgroup2 mount, once add_cgroup_root() ran
        self.cgroup_features = {}
        self._used = set()
        self._mounts = [
            "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
            "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
            "udev /dev devtmpfs rw,nosuid,relatime,size=1986212k,nr_inodes=496553,mode=755 0 0",
        ]
        if debugfs:
            self._mounts.append("debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0")
        self._next_pci = 3
        self._next_virtio = 0
        self._next_scsi_host = 0
        for d in ("/sys/block", "/sys/class/block", "/sys/dev/block", "/sys/dev/char", "/sys/devices/virtual/block",
                  "/sys/class/nvme", "/sys/class/nvme-subsystem", "/sys/bus/pci", "/sys/bus/virtio", "/sys/bus/scsi",
                  "/dev/disk/by-id", "/dev/disk/by-path", "/sys/fs/cgroup", "/proc/sys/kernel"):
            self.mkdir(d)
        cpus = "0-%d" % (ncpus - 1) if ncpus > 1 else "0"
        for f in ("online", "possible", "present"):
            self.write("/sys/devices/system/cpu/" + f, cpus)
        self.write("/proc/sys/kernel/osrelease", kernel)
        self.write("/proc/meminfo", "MemTotal:        2013936 kB\nMemFree:          1234567 kB\n")
        self.write("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-%s root=/dev/vda1 ro quiet" % kernel)
        if psi:
            for res in ("io", "memory", "cpu"):
                self.write("/proc/pressure/" + res, PSI_ZERO)
        self._write_mounts()

    # -- file helpers (host paths are absolute paths as seen on the fake host) ---------------
    def path(self, host_path):
        """Host path -> real path below root."""
        return os.path.join(self.root, host_path.lstrip("/"))

    def mkdir(self, host_path):
        os.makedirs(self.path(host_path), exist_ok=True)
        return host_path

    def write(self, host_path, content="", mode=None):
        """Write a file (parents created); non-empty text gets a trailing newline like sysfs."""
        real = self.path(host_path)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        text = str(content)
        if text and not text.endswith("\n"):
            text += "\n"
        with open(real, "w") as f:
            f.write(text)
        if mode is not None:
            os.chmod(real, mode)
        return host_path

    def write_bytes(self, host_path, data):
        real = self.path(host_path)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as f:
            f.write(data)
        return host_path

    def read(self, host_path):
        with open(self.path(host_path)) as f:
            return f.read()

    def remove(self, host_path):
        real = self.path(host_path)
        if os.path.islink(real) or os.path.isfile(real):
            os.unlink(real)

    def unplug(self, name):
        """Take the whole disk ``name`` off the host as a hot-remove does: its sysfs directory, the /sys/block,
        /sys/class/block and /sys/dev/block links, its /dev node and udev's /dev/disk links go."""
        dev = self.devices.pop(name)
        for link in ["/sys/block/" + name, "/sys/class/block/" + name, "/dev/" + name] + \
                ["/dev/disk/by-id/" + n for n in dev["by_id"]] + ["/dev/disk/by-path/" + n for n in dev["by_path"]] + \
                (["/sys/dev/block/" + dev["majmin"]] if dev["majmin"] else []):
            self.remove(link)
        shutil.rmtree(self.path(dev["sysdir"]), ignore_errors=True)

    def link(self, host_path, target_host_path):
        """Relative symlink host_path -> target, spelled as kernfs spells it.

        kernfs climbs from the link's directory until it reaches an ancestor of the target's
        *parent*, so a link to an ancestor reads ``../../nvme0`` rather than ``..``; udev's
        /dev/disk links come out the same way (``../../nvme0n1``).
        """
        real = self.path(host_path)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        if os.path.lexists(real):
            os.unlink(real)
        base, ups = os.path.dirname(host_path), 0
        tparent = os.path.dirname(target_host_path)
        while not (tparent == base or tparent.startswith(base.rstrip("/") + "/")):
            base, ups = os.path.dirname(base), ups + 1
        os.symlink("../" * ups + target_host_path[len(base.rstrip("/")) + 1:], real)
        return host_path

    def _write_mounts(self):
        self.write("/proc/mounts", "\n".join(self._mounts))

    def add_mount(self, line):
        self._mounts.append(line)
        self._write_mounts()

    def sysdir(self, name):
        """Host path of a device's real sysfs directory."""
        return self.devices[name]["sysdir"]

    def set_queue(self, name, **attrs):
        for key, value in attrs.items():
            self.write("%s/queue/%s" % (self.sysdir(name), key), value)

    # -- device numbers -------------------------------------------------------------------
    def _majmin(self, majmin, major, step=1):
        if majmin is None:
            minor = 0
            while "%d:%d" % (major, minor) in self._used:
                minor += step
            majmin = "%d:%d" % (major, minor)
        if majmin in self._used:
            raise ValueError("MAJ:MIN %s is already used on this fake host" % majmin)
        self._used.add(majmin)
        return majmin

    def _pci(self, pci):
        if pci is None:
            pci = "0000:00:%02x.0" % self._next_pci
            self._next_pci += 1
        d = "/sys/devices/pci0000:00/" + pci
        if not os.path.isdir(self.path(d)):
            self.mkdir(d)
            self.write(d + "/numa_node", "-1")
            self.link(d + "/subsystem", "/sys/bus/pci")
            self.link("/sys/bus/pci/devices/" + pci, d)
        return pci, d

    # -- CPUs, NUMA nodes, PCI functions ----------------------------------------------------
    def set_cpus(self, online, possible=None):
        """CPU lists as the kernel prints them (``online='0-5,7', possible='0-7'``); present follows possible. An
        offline CPU leaves its node's cpulist (x86 numa_remove_cpu) and the root's cpuset.cpus.effective."""
        possible = possible or online
        self.write("/sys/devices/system/cpu/online", online)
        for f in ("possible", "present"):
            self.write("/sys/devices/system/cpu/" + f, possible)
        if self.cgroup_mount and os.path.exists(self.path(self.cgroup_mount + "/cpuset.cpus.effective")):
            self.write(self.cgroup_mount + "/cpuset.cpus.effective", online)

    def add_numa(self, nodes):
        """``/sys/devices/system/node``: ``nodes`` is {node: (cpulist, memory bytes)}; a node with 0 bytes has no
        memory (a CPU-only or memory-less node)."""
        d = "/sys/devices/system/node"
        numbers = sorted(nodes)
        ranges = ",".join(str(n) for n in numbers)
        with_memory = ",".join(str(n) for n in numbers if nodes[n][1])
        for f, value in (("online", ranges), ("possible", ranges), ("has_cpu", ",".join(
                str(n) for n in numbers if nodes[n][0])), ("has_memory", with_memory),
                ("has_normal_memory", with_memory)):
            self.write("%s/%s" % (d, f), value)
        for n in numbers:
            cpulist, memory = nodes[n]
            self.write("%s/node%d/cpulist" % (d, n), cpulist)
            self.write("%s/node%d/meminfo" % (d, n), "Node %d MemTotal:       %8d kB\nNode %d MemFree:        %8d kB"
                       % (n, memory // 1024, n, memory // 2048))
            self.write("%s/node%d/distance" % (d, n), " ".join("10" if m == n else "21" for m in numbers))
        if self.cgroup_mount and os.path.exists(self.path(self.cgroup_mount + "/cpuset.mems.effective")):
            self.write(self.cgroup_mount + "/cpuset.mems.effective", with_memory)

    def set_pci_node(self, pci, node, local_cpulist=None):
        """The NUMA node firmware gives a PCI function (``numa_node``; -1: none) and its ``local_cpulist``."""
        d = "/sys/devices/pci0000:00/" + pci
        self.write(d + "/numa_node", node)
        if local_cpulist is not None:
            self.write(d + "/local_cpulist", local_cpulist)

    def add_pci(self, pci, klass, vendor, device, node=-1, local_cpulist=None, boot_vga=None):
        """A PCI function (a GPU: ``klass=0x030200``, vendor 0x10de) with its sysfs attributes."""
        pci, d = self._pci(pci)
        self.write(d + "/class", "0x%06x" % klass)
        self.write(d + "/vendor", "0x%04x" % vendor)
        self.write(d + "/device", "0x%04x" % device)
        if boot_vga is not None:
            self.write(d + "/boot_vga", int(boot_vga))
        self.set_pci_node(pci, node, local_cpulist)
        return d

    # -- generic block device -------------------------------------------------------------
    def _block(self, name, sysdir, majmin, size_bytes, kind, device=None, hw_queues=0, queue=None,
               hidden=False, rotational=0, scheduler=None, ranges=(0, 256), dev_node=True, parent=None):
        if name in self.devices:
            raise ValueError("block device %s already exists on this fake host" % name)
        d = self.mkdir(sysdir)
        if not hidden:
            self.write(d + "/dev", majmin)
        major, minor = majmin.split(":") if majmin else ("", "")
        attrs = {
            "size": size_bytes // 512, "ro": 0, "removable": 0, "hidden": int(hidden), "range": ranges[0],
            "ext_range": ranges[1], "capability": 0, "alignment_offset": 0, "discard_alignment": 0,
            "diskseq": len(self.devices) + 1, "inflight": "       0        0",
            "stat": "       0        0        0        0        0        0        0        0        0        0        0"
                    "        0        0        0        0        0        0",
            "uevent": "MAJOR=%s\nMINOR=%s\nDEVNAME=%s\nDEVTYPE=disk\nDISKSEQ=%d" % (major, minor, name, len(self.devices) + 1),
        }
        for key, value in attrs.items():
            self.write("%s/%s" % (d, key), value)
        self.link(d + "/subsystem", "/sys/class/block")
        for sub in ("holders", "slaves", "power"):
            self.mkdir("%s/%s" % (d, sub))
        if device:
            self.link(d + "/device", device)
        q = dict(QUEUE_COMMON)
        q.update(QUEUE_MQ if hw_queues else QUEUE_BIO)
        q["rotational"] = str(int(rotational))
        if hw_queues and rotational:
            q["wbt_lat_usec"] = "75000"
        if scheduler:
            q["scheduler"] = scheduler
        q.update({k: str(v) for k, v in (queue or {}).items()})
        for key, value in q.items():
            self.write("%s/queue/%s" % (d, key), value)
        if hw_queues:
            self._mq(name, d, hw_queues)
        self.link("/sys/block/" + name, d)
        self.link("/sys/class/block/" + name, d)
        if not hidden:
            self.link("/sys/dev/block/" + majmin, d)
            if dev_node:
                self.write("/dev/" + name)
        self.devices[name] = {"majmin": None if hidden else majmin, "sysdir": d, "kind": kind, "parent": parent,
                              "hidden": hidden, "by_id": [], "by_path": [], "partitions": []}
        return d

    def _mq(self, name, d, hw_queues, poll_queues=0, depth=1023):
        """mq/<N>/{cpu_list,nr_tags,nr_reserved_tags,cpuC/} and debugfs hctxN/type."""
        types = [("default", hw_queues), ("poll", poll_queues)]
        index = 0
        for qtype, count in types:
            for i in range(count):
                cpus = [c for c in range(self.ncpus) if c % count == i]
                h = "%s/mq/%d" % (d, index)
                self.write(h + "/cpu_list", ", ".join(str(c) for c in cpus))
                self.write(h + "/nr_tags", depth)
                self.write(h + "/nr_reserved_tags", 0)
                for c in cpus:
                    self.mkdir("%s/cpu%d" % (h, c))
                if self.debugfs:
                    self.write("/sys/kernel/debug/block/%s/hctx%d/type" % (name, index), qtype)
                index += 1

    def _links(self, name, by_id=(), by_path=()):
        for link in by_id:
            self.link("/dev/disk/by-id/" + link, "/dev/" + name)
            self.devices[name]["by_id"].append(link)
        for link in by_path:
            self.link("/dev/disk/by-path/" + link, "/dev/" + name)
            self.devices[name]["by_path"].append(link)

    def add_partitions(self, disk, count, majmin_major=None, size_bytes=None):
        """``count`` equal partitions on ``disk`` (names like nvme0n1p1 / vda1), with by-id/by-path links."""
        info = self.devices[disk]
        d = info["sysdir"]
        disk_size = int(self.read(d + "/size")) * 512
        part_size = size_bytes or max(disk_size // (count + 1), 1 << 20)
        major, minor = (int(x) for x in info["majmin"].split(":"))
        start = 2048
        for n in range(1, count + 1):
            pname = ("%sp%d" if disk[-1].isdigit() else "%s%d") % (disk, n)
            if majmin_major is not None:
                pmm = self._majmin(None, majmin_major)
            else:
                pmm = self._majmin("%d:%d" % (major, minor + n), major)
            p = self.mkdir("%s/%s" % (d, pname))
            for key, value in (("dev", pmm), ("partition", n), ("start", start), ("size", part_size // 512), ("ro", 0),
                               ("alignment_offset", 0), ("discard_alignment", 0), ("inflight", "       0        0"),
                               ("uevent", "MAJOR=%s\nMINOR=%s\nDEVNAME=%s\nDEVTYPE=partition\nPARTN=%d"
                                % (pmm.split(":")[0], pmm.split(":")[1], pname, n))):
                self.write("%s/%s" % (p, key), value)
            self.link(p + "/subsystem", "/sys/class/block")
            self.mkdir(p + "/holders")
            self.link("/sys/class/block/" + pname, p)
            self.link("/sys/dev/block/" + pmm, p)
            self.write("/dev/" + pname)
            start += part_size // 512
            self.devices[pname] = {"majmin": pmm, "sysdir": p, "kind": info["kind"], "parent": disk, "hidden": False,
                                   "by_id": [], "by_path": [], "partitions": []}
            self._links(pname, ["%s-part%d" % (x, n) for x in info["by_id"]],
                        ["%s-part%d" % (x, n) for x in info["by_path"]])
            info["partitions"].append(pname)

    # -- NVMe -----------------------------------------------------------------------------
    def _nvme_module(self):
        for key, value in NVME_MODULE_PARAMS.items():
            if not os.path.exists(self.path("/sys/module/nvme/parameters/" + key)):
                self.write("/sys/module/nvme/parameters/" + key, value)
        for key, value in NVME_CORE_PARAMS.items():
            if not os.path.exists(self.path("/sys/module/nvme_core/parameters/" + key)):
                self.write("/sys/module/nvme_core/parameters/" + key, value)

    def set_nvme_params(self, **params):
        """e.g. ``set_nvme_params(poll_queues=1)``; ``multipath='N'`` goes to nvme_core."""
        self._nvme_module()
        for key, value in params.items():
            module = "nvme_core" if key in NVME_CORE_PARAMS else "nvme"
            self.write("/sys/module/%s/parameters/%s" % (module, key), value)

    def _nvme_subsys(self, subsys, serial, model, firmware):
        s = "/sys/devices/virtual/nvme-subsystem/nvme-subsys%d" % subsys
        if not os.path.isdir(self.path(s)):
            for key, value in (("model", _pad(model, 40)), ("serial", _pad(serial, 20)),
                               ("firmware_rev", _pad(firmware, 8)), ("subsystype", "nvm"), ("iopolicy", "numa"),
                               ("subsysnqn", "nqn.2019-08.org.qemu:%s" % serial)):
                self.write("%s/%s" % (s, key), value)
            self.link(s + "/subsystem", "/sys/class/nvme-subsystem")
            self.link("/sys/class/nvme-subsystem/nvme-subsys%d" % subsys, s)
        return s

    def _nvme_ctrl(self, ctrl, subsys, serial, model, firmware, pci, queue_count, vendor_id=0x1b36, cntlid=0):
        name = "nvme%d" % ctrl
        existing = self.devices.get(name)
        if existing:
            if existing["serial"] != serial:
                raise ValueError("controller %s exists with serial %r, not %r" % (name, existing["serial"], serial))
            return existing["sysdir"]
        self._nvme_module()
        pci, pdir = self._pci(pci)
        self.write(pdir + "/vendor", "0x%04x" % vendor_id)
        self.write(pdir + "/device", "0x0010")
        self.write(pdir + "/class", "0x010802")
        c = "%s/nvme/%s" % (pdir, name)
        attrs = {
            "model": _pad(model, 40), "serial": _pad(serial, 20), "firmware_rev": _pad(firmware, 8),
            "cntlid": cntlid, "transport": "pcie", "address": pci, "state": "live", "numa_node": -1,
            "queue_count": queue_count, "sqsize": 1023, "kato": 0, "cntrltype": "io", "dctype": "none",
            "subsysnqn": "nqn.2019-08.org.qemu:%s" % serial, "dev": "241:%d" % ctrl,
            "uevent": "MAJOR=241\nMINOR=%d\nDEVNAME=%s\nNVME_TRTYPE=pcie" % (ctrl, name),
        }
        for key, value in attrs.items():
            self.write("%s/%s" % (c, key), value)
        self.write(c + "/reset_controller", mode=0o200)
        self.write(c + "/rescan_controller", mode=0o200)
        self.link(c + "/device", pdir)
        self.link(c + "/subsystem", "/sys/class/nvme")
        self.link("/sys/class/nvme/" + name, c)
        self.link("/sys/dev/char/241:%d" % ctrl, c)
        self.write("/dev/" + name)
        s = self._nvme_subsys(subsys, serial, model, firmware)
        self.link("%s/%s" % (s, name), c)
        self.devices[name] = {"kind": "nvme-ctrl", "sysdir": c, "serial": serial, "pci": pci, "majmin": None,
                              "by_id": [], "by_path": [], "partitions": []}
        return c

    def _nvme_ns_attrs(self, d, nsid, wwid, eui64, nguid, uuid):
        self.write(d + "/wwid", wwid)
        self.write(d + "/nsid", nsid)
        if eui64:
            self.write(d + "/eui", " ".join(eui64[i:i + 2] for i in range(0, 16, 2)).lower())
        if nguid:
            self.write(d + "/nguid", _uuid_fmt(nguid))
        if uuid or nguid:
            self.write(d + "/uuid", (uuid or _uuid_fmt(nguid)).lower())
        self.write(d + "/metadata_bytes", 0)
        self.write(d + "/csi", 0)

    def add_nvme(self, ctrl=0, ns=1, serial="deadbeef", model="QEMU NVMe Ctrl", firmware="7.2.22", eui64=None,
                 nguid=None, uuid=None, majmin=None, size_gb=1, partitions=0, hw_queues=2, poll_queues=0,
                 pci=None, subsys=None, nsid=None, vendor_id=0x1b36, queue=None):
        """One NVMe namespace ``nvme<ctrl>n<ns>`` on controller ``nvme<ctrl>`` (created on first use).

        Defaults match the lab VM: QEMU NVMe, serial deadbeef, 259:0, 1 GiB, 2 hw queues, and no
        EUI-64/NGUID/UUID (QEMU's are ignored as bogus), so ``wwid`` is the ``nvme.1b36-...`` form.
        """
        nsid = ns if nsid is None else nsid
        subsys = ctrl if subsys is None else subsys
        ctrl_dir = self._nvme_ctrl(ctrl, subsys, serial, model, firmware, pci,
                                   hw_queues + poll_queues + 1, vendor_id=vendor_id)
        pci = self.devices["nvme%d" % ctrl]["pci"]
        name = "nvme%dn%d" % (ctrl, ns)
        majmin = self._majmin(majmin, 259)
        d = self._block(name, "%s/%s" % (ctrl_dir, name), majmin, int(size_gb * GB), "nvme", device=ctrl_dir,
                        hw_queues=hw_queues, queue=queue)
        if poll_queues:
            self._mq(name, d, hw_queues, poll_queues=poll_queues)
            self.write(d + "/queue/io_poll", 1)
        wwid = nvme_wwid(vendor_id, serial, model, nsid, eui64, nguid, uuid)
        self._nvme_ns_attrs(d, nsid, wwid, eui64, nguid, uuid)
        self._links(name, ["nvme-%s_%s" % (_udev(model), _udev(serial)), "nvme-%s_%s_%d" % (_udev(model), _udev(serial), nsid),
                           "nvme-" + wwid], ["pci-%s-nvme-%d" % (pci, nsid)])
        self.devices[name].update({"serial": serial, "wwid": wwid, "nsid": nsid, "controller": "nvme%d" % ctrl})
        if partitions:
            self.add_partitions(name, partitions, majmin_major=259)
        return name

    def add_nvme_multipath_head(self, subsys=0, ns=1, ctrls=(0, 1), serial="SN-MPATH-0001", model="Fake Dual-Port NVMe",
                                firmware="1.0", eui64=None, nguid="00112233445566778899aabbccddeeff", uuid=None,
                                majmin=None, size_gb=1, hw_queues=2, vendor_id=0x1d0f, multipath_links=True):
        """NVMe subsystem with several controllers sharing namespace ``ns`` (native multipath).

        Creates the head ``nvme<subsys>n<ns>`` (bio-based: no mq/, device -> nvme-subsys<subsys>) and
        one hidden path disk ``nvme<subsys>c<ctrl>n<ns>`` per controller (mq/, hidden=1, no dev).
        ``multipath_links`` adds the head's ``multipath/`` directory (kernels >= 6.14).
        """
        s = self._nvme_subsys(subsys, serial, model, firmware)
        nsid = ns
        wwid = nvme_wwid(vendor_id, serial, model, nsid, eui64, nguid, uuid)
        size = int(size_gb * GB)
        paths = []
        for cntlid, ctrl in enumerate(ctrls):
            c = self._nvme_ctrl(ctrl, subsys, serial, model, firmware, None, hw_queues + 1,
                                vendor_id=vendor_id, cntlid=cntlid + 1)
            pname = "nvme%dc%dn%d" % (subsys, ctrl, ns)
            pd = self._block(pname, "%s/%s" % (c, pname), None, size, "nvme-path", device=c, hw_queues=hw_queues,
                             hidden=True)
            self._nvme_ns_attrs(pd, nsid, wwid, eui64, nguid, uuid)
            self.write(pd + "/ana_state", "optimized")
            self.write(pd + "/ana_grpid", 1)
            self.devices[pname].update({"controller": "nvme%d" % ctrl, "wwid": wwid, "nsid": nsid})
            paths.append(pname)
        name = "nvme%dn%d" % (subsys, ns)
        majmin = self._majmin(majmin, 259)
        d = self._block(name, "%s/%s" % (s, name), majmin, size, "nvme-multipath-head", device=s, hw_queues=0)
        self._nvme_ns_attrs(d, nsid, wwid, eui64, nguid, uuid)
        if multipath_links:
            for pname in paths:
                self.link("%s/multipath/%s" % (d, pname), self.sysdir(pname))
        self._links(name, ["nvme-%s_%s" % (_udev(model), _udev(serial)), "nvme-%s_%s_%d" % (_udev(model), _udev(serial), nsid),
                           "nvme-" + wwid])
        self.devices[name].update({"serial": serial, "wwid": wwid, "nsid": nsid, "paths": paths,
                                   "subsystem": "nvme-subsys%d" % subsys})
        return name

    # -- virtio-blk -----------------------------------------------------------------------
    def add_virtio(self, name=None, majmin=None, serial="", size_gb=3, partitions=0, hw_queues=1, pci=None,
                   rotational=1, queue=None):
        """virtio-blk disk ``vd<x>`` (default major 254, 16 minors per disk); ``serial`` '' = none."""
        index = self._next_virtio
        self._next_virtio += 1
        if name is None:
            name = "vd" + "abcdefghijklmnopqrstuvwxyz"[len([n for n, i in self.devices.items() if i["kind"] == "virtio"
                                                           and not i["parent"]])]
        pci, pdir = self._pci(pci)
        self.write(pdir + "/vendor", "0x1af4")
        self.write(pdir + "/device", "0x1001")
        v = "%s/virtio%d" % (pdir, index)
        for key, value in (("device", "0x0002"), ("vendor", "0x1af4"), ("status", "0x0000000f"),
                           ("features", "0010101001110000000000000000110010000000000000000000000000000000")):
            self.write("%s/%s" % (v, key), value)
        self.link(v + "/subsystem", "/sys/bus/virtio")
        majmin = self._majmin(majmin, 254, step=16)
        sched = SINGLE_QUEUE_SCHEDULER if hw_queues == 1 else None
        d = self._block(name, "%s/block/%s" % (v, name), majmin, int(size_gb * GB), "virtio", device=v,
                        hw_queues=hw_queues, rotational=rotational, scheduler=sched,
                        queue=dict({"nr_requests": 256}, **(queue or {})), ranges=(16, 256))
        self.write(d + "/serial", serial)
        self.write(d + "/cache_type", "write back")
        self._links(name, ["virtio-" + _udev(serial)] if serial else [], ["pci-" + pci, "virtio-pci-" + pci])
        self.devices[name].update({"serial": serial or None, "pci": pci})
        if partitions:
            self.add_partitions(name, partitions)
        return name

    # -- SCSI / SATA ----------------------------------------------------------------------
    def add_scsi(self, name=None, majmin=None, vendor="ATA", model="QEMU HARDDISK", rev="2.5+", serial=None,
                 wwn=None, transport="ata", pci="0000:00:1f.2", size_gb=4, partitions=0, rotational=1, hw_queues=1,
                 queue=None):
        """SCSI disk ``sd<x>`` (major 8, 16 minors per disk). ``transport`` 'ata' (libata/AHCI) or 'scsi'.

        ``wwn`` like '0x5000c500a1b2c3d4' gives ``device/wwid`` 'naa.5000c500a1b2c3d4' and the
        ``wwn-0x...`` link; ``serial`` (default QM0000<n>) goes into ``device/vpd_pg80``.
        """
        host = self._next_scsi_host
        self._next_scsi_host += 1
        if name is None:
            name = "sd" + "abcdefghijklmnopqrstuvwxyz"[host]
        serial = serial if serial is not None else "QM%05d" % (host + 1)
        pci, pdir = self._pci(pci)
        hctl = "%d:0:0:0" % host
        if transport == "ata":
            base = "%s/ata%d/host%d/target%d:0:0/%s" % (pdir, host + 1, host, host, hctl)
        else:
            base = "%s/host%d/target%d:0:0/%s" % (pdir, host, host, hctl)
        if wwn:
            wwid = "naa." + wwn.lower().replace("0x", "")
        else:
            wwid = "t10.%s%s%s" % (_pad(vendor, 8), _pad(model, 40), serial)
        for key, value in (("vendor", _pad(vendor, 8)), ("model", _pad(model, 16)), ("rev", _pad(rev, 4)),
                           ("type", 0), ("scsi_level", 6), ("state", "running"), ("queue_depth", 32),
                           ("device_blocked", 0), ("wwid", wwid),
                           ("uevent", "DEVTYPE=scsi_device\nDRIVER=sd\nMODALIAS=scsi:t-0x00")):
            self.write("%s/%s" % (base, key), value)
        if serial:
            raw = serial.encode("ascii")
            self.write_bytes(base + "/vpd_pg80", struct.pack(">BBH", 0, 0x80, len(raw)) + raw)
        self.link(base + "/subsystem", "/sys/bus/scsi")
        majmin = self._majmin(majmin, 8, step=16)
        self._block(name, "%s/block/%s" % (base, name), majmin, int(size_gb * GB), "scsi", device=base,
                    hw_queues=hw_queues, rotational=rotational,
                    scheduler=SINGLE_QUEUE_SCHEDULER if hw_queues == 1 else None,
                    queue=dict({"nr_requests": 64}, **(queue or {})), ranges=(16, 256))
        ident = "%s_%s" % (_udev(model), _udev(serial))
        if transport == "ata":
            by_id = ["ata-" + ident, "scsi-0ATA_" + ident, "scsi-1ATA_" + ident, "scsi-SATA_" + ident]
            by_path = ["pci-%s-ata-%d" % (pci, host + 1), "pci-%s-ata-%d.0" % (pci, host + 1)]
        else:
            by_id = ["scsi-0%s_%s" % (_udev(vendor), ident)]
            by_path = ["pci-%s-scsi-%s" % (pci, hctl)]
        if wwn:
            hexwwn = wwn.lower().replace("0x", "")
            by_id += ["wwn-0x" + hexwwn, "scsi-3" + hexwwn]
        self._links(name, by_id, by_path)
        self.devices[name].update({"serial": serial, "wwid": wwid, "hctl": hctl})
        if partitions:
            self.add_partitions(name, partitions)
        return name

    # -- virtual block devices ------------------------------------------------------------
    def _virtual_index(self, prefix):
        i = 0
        while "%s%d" % (prefix, i) in self.devices:
            i += 1
        return i

    def _stack(self, name, slaves):
        d = self.sysdir(name)
        for s in slaves:
            self.link("%s/slaves/%s" % (d, s), self.sysdir(s))
            self.link("%s/holders/%s" % (self.sysdir(s), name), d)

    def add_dm(self, name="vg0-lv0", index=None, uuid=None, slaves=(), majmin=None, size_gb=1, request_based=False,
               hw_queues=1):
        """device-mapper ``dm-<index>`` (bio-based: no mq/ unless ``request_based``, e.g. dm-multipath)."""
        index = self._virtual_index("dm-") if index is None else index
        kname = "dm-%d" % index
        uuid = uuid or "LVM-FAKEVGUUID%018dFAKELVUUID%017d" % (index, index)
        majmin = self._majmin(majmin or "253:%d" % index, 253)
        d = self._block(kname, "/sys/devices/virtual/block/" + kname, majmin, int(size_gb * GB), "dm",
                        hw_queues=hw_queues if request_based else 0, ranges=(1, 1))
        for key, value in (("name", name), ("uuid", uuid), ("suspended", 0), ("use_blk_mq", int(request_based))):
            self.write("%s/dm/%s" % (d, key), value)
        self._stack(kname, slaves)
        self.link("/dev/mapper/" + name, "/dev/" + kname)
        self._links(kname, ["dm-name-" + name, "dm-uuid-" + uuid])
        self.devices[kname].update({"dm_name": name, "dm_uuid": uuid})
        return kname

    def add_md(self, index=None, name=None, level="raid1", members=(), uuid="3b5f1c2a-9d7e-4f60-8a1b-2c3d4e5f6a7b",
               majmin=None, size_gb=1, partitions=0):
        """md software RAID ``md<index>`` (bio-based, no mq/); ``name`` like 'host:0' adds md-name- links."""
        index = self._virtual_index("md") if index is None else index
        kname = "md%d" % index
        majmin = self._majmin(majmin or "9:%d" % index, 9)
        d = self._block(kname, "/sys/devices/virtual/block/" + kname, majmin, int(size_gb * GB), "md",
                        hw_queues=0, ranges=(1, 256))
        for key, value in (("level", level), ("raid_disks", len(members)), ("array_state", "clean"),
                           ("metadata_version", "1.2"), ("uuid", uuid)):
            self.write("%s/md/%s" % (d, key), value)
        for m in members:
            self.link("%s/md/dev-%s/block" % (d, m), self.sysdir(m))
        self._stack(kname, members)
        h = uuid.replace("-", "")
        by_id = ["md-uuid-" + ":".join(h[i:i + 8] for i in range(0, 32, 8))]
        if name:
            by_id.append("md-name-" + name)
            self.link("/dev/md/" + name.split(":")[-1], "/dev/" + kname)
        self._links(kname, by_id)
        self.devices[kname].update({"md_uuid": uuid})
        if partitions:
            self.add_partitions(kname, partitions, majmin_major=259)
        return kname

    def add_loop(self, index=None, backing_file=None, size_gb=None, majmin=None):
        """``loop<index>`` (blk-mq, 1 hw queue). Without ``backing_file`` it is unattached: size 0, no loop/."""
        index = self._virtual_index("loop") if index is None else index
        kname = "loop%d" % index
        if size_gb is None:
            size_gb = 1 if backing_file else 0
        majmin = self._majmin(majmin or "7:%d" % index, 7)
        d = self._block(kname, "/sys/devices/virtual/block/" + kname, majmin, int(size_gb * GB), "loop",
                        hw_queues=1, scheduler="[none] mq-deadline", ranges=(1, 1))
        if backing_file:
            for key, value in (("backing_file", backing_file), ("offset", 0), ("sizelimit", 0), ("autoclear", 0),
                               ("partscan", 0), ("dio", 0)):
                self.write("%s/loop/%s" % (d, key), value)
        return kname

    def add_zram(self, index=None, size_gb=1, majmin=None):
        """``zram<index>``: a bio-based disk with no parent device (kind 'other' to the resolver)."""
        index = self._virtual_index("zram") if index is None else index
        kname = "zram%d" % index
        majmin = self._majmin(majmin or "252:%d" % index, 252)
        d = self._block(kname, "/sys/devices/virtual/block/" + kname, majmin, int(size_gb * GB), "other",
                        hw_queues=0, ranges=(1, 1))
        self.write(d + "/disksize", int(size_gb * GB))
        self.write(d + "/comp_algorithm", "lzo lzo-rle [zstd]")
        return kname

    # -- cgroups --------------------------------------------------------------------------
    def add_cgroup_root(self, controllers="cpuset cpu io memory hugetlb pids rdma misc", subtree="memory pids",
                        iocost=True, mode="unified", io_latency=False, io_prio=False,
                        mount_options="rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot"):
        """cgroup v2 root as on Debian 12 (``mode='unified'``), or ``'hybrid'`` (tmpfs + v1 + v2 at
        /sys/fs/cgroup/unified, no v2 controllers) or ``'legacy'`` (v1 only; returns None).

        Writes io.cost.model/io.cost.qos empty (fresh kernel), io.stat with every visible disk,
        io.pressure and the other root files; returns the cgroup2 mount point (host path).
        """
        self.cgroup_features = {"io_latency": io_latency, "io_prio": io_prio}
        if mode == "unified":
            mount = "/sys/fs/cgroup"
            self.add_mount("cgroup2 %s cgroup2 %s 0 0" % (mount, mount_options))
        elif mode in ("hybrid", "legacy"):
            self.add_mount("tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0")
            for ctl in V1_CONTROLLERS:
                self.mkdir("/sys/fs/cgroup/" + ctl)
                self.add_mount("cgroup /sys/fs/cgroup/%s cgroup rw,nosuid,nodev,noexec,relatime,%s 0 0" % (ctl, ctl))
            if mode == "legacy":
                return None
            mount = "/sys/fs/cgroup/unified"
            controllers, subtree, iocost = "", "", False
            self.add_mount("cgroup2 %s cgroup2 %s,nsdelegate 0 0" % (mount, mount_options))
        else:
            raise ValueError("mode must be unified, hybrid or legacy")
        self.cgroup_mount = mount
        files = {
            "cgroup.controllers": controllers, "cgroup.subtree_control": subtree, "cgroup.procs": "1",
            "cgroup.threads": "1", "cgroup.max.depth": "max", "cgroup.max.descendants": "max",
            "cgroup.stat": "nr_descendants 0\nnr_dying_descendants 0", "cgroup.pressure": "1",
            "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0",
            "io.stat": "\n".join("%s rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0" % i["majmin"]
                                 for n, i in sorted(self.devices.items())
                                 if i["majmin"] and not i.get("parent") and i["kind"] != "nvme-ctrl"),
        }
        if "cpuset" in controllers.split():
            nodes = "/sys/devices/system/node/has_memory"
            files.update({"cpuset.cpus.effective": self.read("/sys/devices/system/cpu/online").strip(),
                          "cpuset.mems.effective": self.read(nodes).strip() if os.path.exists(self.path(nodes))
                          else "0"})
        if "memory" in controllers.split():
            files.update({"memory.stat": "anon 0\nfile 0", "memory.numa_stat": "anon N0=0", "memory.reclaim": ""})
        if "misc" in controllers.split():
            files["misc.capacity"] = ""
        if iocost and "io" in controllers.split():
            files.update({"io.cost.model": "", "io.cost.qos": ""})
        if self.psi:
            files.update({"io.pressure": PSI_ZERO, "memory.pressure": PSI_ZERO, "cpu.pressure": PSI_ZERO})
        for key, value in files.items():
            self.write("%s/%s" % (mount, key), value)
        return mount

    def add_cgroup(self, path, files=None):
        """Child cgroup ``path`` (relative to the cgroup2 mount; parents created as needed).

        Its interface files follow the parent's ``cgroup.subtree_control`` (io.weight 'default 100',
        io.max '', memory.high 'max', ...). ``files`` overrides or adds files; a value of None removes one.
        Returns the host path.
        """
        if self.cgroup_mount is None:
            raise ValueError("call add_cgroup_root() first")
        rel = path.strip("/")
        parent_rel = os.path.dirname(rel)
        parent = self.cgroup_mount + ("/" + parent_rel if parent_rel else "")
        if parent_rel and not os.path.isdir(self.path(parent)):
            self.add_cgroup(parent_rel)
        cg = self.cgroup_mount + "/" + rel
        enabled = self.read(parent + "/cgroup.subtree_control").split()
        out = {
            "cgroup.controllers": " ".join(enabled), "cgroup.subtree_control": "", "cgroup.procs": "",
            "cgroup.threads": "", "cgroup.type": "domain", "cgroup.events": "populated 0\nfrozen 0",
            "cgroup.freeze": "0", "cgroup.kill": "", "cgroup.max.depth": "max", "cgroup.max.descendants": "max",
            "cgroup.stat": "nr_descendants 0\nnr_dying_descendants 0", "cgroup.pressure": "1",
            "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0",
        }
        if self.psi:
            out.update({"io.pressure": PSI_ZERO, "memory.pressure": PSI_ZERO, "cpu.pressure": PSI_ZERO})
        for controller in ("io", "memory", "cpu", "pids"):
            if controller in enabled:
                out.update(controller_files(controller, self.cgroup_features, realism=True))
        out.update(files or {})
        self.mkdir(cg)
        for key, value in out.items():
            if value is None:
                self.remove("%s/%s" % (cg, key))
            else:
                self.write("%s/%s" % (cg, key), value)
        return cg
