# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated host the unit tests run against, one file a subsystem (conftest.py puts tests/unit on sys.path).

* host.py: FakeHost, the fake /sys, /dev and /proc tree (block devices, NVMe, cgroup2 root);
* kernel.py: SimKernel, a KernelFS whose pseudo-files parse writes, and the kernel's parsers;
* iocost.py: blk-iocost (io.cost.model, io.cost.qos, io.weight) and the kernel's ssd_dfl coefficients;
* cgroup.py: SimCgroup, cgroup v2 files with the kernel's rules;  systemd.py: SimSystemd, systemctl/systemd-run;
* blk_queue.py: the block queue files (SimQueue) and the lab VM with its queues (queue_host);
* sysctl.py: /proc/sys and debugfs sched files (SysctlHost);  nvme.py: the nvme driver and nvme-cli (SimNvme);
* calibration.py: the iocost_calibrate host;  metrics.py: the io_metrics exporter's host;
* runner.py: FakeRunner, the Runner stand-in for other commands;  lab.py: the lab VM composed of these.

test_sim_host.py and test_sim_systemd.py test the simulators themselves.
"""
