# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hosts for CPU and NUMA placement (issue 39), built as sysfs trees on a FakeHost, each with what it shows:

* :func:`two_sockets`: two nodes of 8 CPUs and 64 GiB; NVMe ``nvme0`` on node 0 (4 default queues) and
  ``nvme1`` on node 1 (4 default and 2 poll queues, ``poll_queues=2``), an H100-class 3D controller on each node
  and the BMC's VGA (ASPEED, ``boot_vga`` 1, no node);
* :func:`no_numa`: a kernel without CONFIG_NUMA (no ``/sys/devices/system/node``), 4 CPUs, one NVMe and one GPU
  whose ``numa_node`` reads -1;
* :func:`cpus_offline`: two nodes of 4 CPUs with CPU 6 offline (``echo 0 > cpu6/online``): it leaves ``online``
  and its node's ``cpulist``, and stays in the blk-mq maps, which cover the possible CPUs;
* :func:`lab_two_nodes`: the issue's QEMU guest, ``-numa node`` x2 with the NVMe controller behind a
  ``pxb-pcie,numa_node=1`` bridge.

Hardware queues are mapped as blk-mq's group_cpus_evenly() spreads them on such hosts: each queue a contiguous run of
a node's CPUs, so a queue never spans two nodes (:func:`spread`).
"""

from sim.host import FakeHost

GiB = 1024 ** 3
NVIDIA, ASPEED, QEMU = 0x10de, 0x1a03, 0x1234
H100, AST2500, BOCHS = 0x2330, 0x2000, 0x1111
DISPLAY_3D, VGA = 0x030200, 0x030000


def spread(host, disk, queues):
    """Rewrites ``disk``'s hctxs: ``queues`` is [(type, cpus)] in hctx order (default, then read, then poll)."""
    d = host.sysdir(disk)
    for index, (kind, cpus) in enumerate(queues):
        host.write("%s/mq/%d/cpu_list" % (d, index), ", ".join(str(c) for c in cpus))
        host.write("%s/mq/%d/nr_tags" % (d, index), 1023)
        host.write("%s/mq/%d/nr_reserved_tags" % (d, index), 0)
        if host.debugfs:
            host.write("/sys/kernel/debug/block/%s/hctx%d/type" % (disk, index), kind)


def two_sockets(tmp_path, debugfs=True, poll_queues=2):
    """``poll_queues``: nvme1's, 1 or 2 (blk-mq spreads every CPU over them: one takes 0-15, two 0-7 and 8-15)."""
    h = FakeHost(tmp_path, ncpus=16, debugfs=debugfs)
    h.add_numa({0: ("0-7", 64 * GiB), 1: ("8-15", 64 * GiB)})
    h.set_nvme_params(poll_queues=poll_queues)
    h.add_nvme(ctrl=0, serial="SN-NODE0", majmin="259:0", hw_queues=4, pci="0000:00:04.0")
    h.add_nvme(ctrl=1, serial="SN-NODE1", majmin="259:1", hw_queues=4, poll_queues=poll_queues, pci="0000:00:05.0")
    spread(h, "nvme0n1", [("default", range(i * 4, i * 4 + 4)) for i in range(4)])
    per_queue = 16 // poll_queues
    spread(h, "nvme1n1", [("default", range(i * 4, i * 4 + 4)) for i in range(4)]
           + [("poll", range(i * per_queue, (i + 1) * per_queue)) for i in range(poll_queues)])
    h.set_pci_node("0000:00:04.0", 0, "0-7")
    h.set_pci_node("0000:00:05.0", 1, "8-15")
    h.add_pci("0000:00:06.0", DISPLAY_3D, NVIDIA, H100, node=0, local_cpulist="0-7")
    h.add_pci("0000:00:07.0", DISPLAY_3D, NVIDIA, H100, node=1, local_cpulist="8-15")
    h.add_pci("0000:00:08.0", VGA, ASPEED, AST2500, node=-1, boot_vga=True)
    h.add_cgroup_root(subtree="cpuset cpu io memory pids")
    return h


def no_numa(tmp_path):
    h = FakeHost(tmp_path, ncpus=4)
    h.add_nvme(ctrl=0, serial="SN-FLAT", majmin="259:0", hw_queues=2, pci="0000:00:04.0")
    h.add_pci("0000:00:05.0", DISPLAY_3D, NVIDIA, H100, node=-1)
    h.add_cgroup_root()
    return h


def cpus_offline(tmp_path):
    h = FakeHost(tmp_path, ncpus=8)
    h.add_nvme(ctrl=0, serial="SN-OFFLINE", majmin="259:0", hw_queues=2, pci="0000:00:04.0")
    spread(h, "nvme0n1", [("default", range(0, 4)), ("default", range(4, 8))])
    h.set_pci_node("0000:00:04.0", 1, "4-5,7")
    h.add_cgroup_root()
    h.set_cpus("0-5,7", "0-7")
    h.add_numa({0: ("0-3", 16 * GiB), 1: ("4-5,7", 16 * GiB)})
    return h


def lab_two_nodes(tmp_path):
    h = FakeHost(tmp_path, ncpus=4)
    h.add_numa({0: ("0-1", 1 * GiB), 1: ("2-3", 1 * GiB)})
    h.add_virtio(name="vda", majmin="254:0", serial="lab-root")
    h.add_nvme(ctrl=0, serial="lab-nvme-a", majmin="259:0", hw_queues=2, pci="0000:00:10.0")
    spread(h, "nvme0n1", [("default", [0, 1]), ("default", [2, 3])])
    h.set_pci_node("0000:00:10.0", 1, "2-3")
    h.add_pci("0000:00:02.0", VGA, QEMU, BOCHS, node=-1, boot_vga=True)
    h.add_cgroup_root()
    return h
