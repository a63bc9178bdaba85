# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A lab-like host for the io_metrics exporter's tests: kernel text captured on the lab's Debian 12 guest
(tests/observed/debian12-6.1.txt) in a FakeHost tree, and the exact exposition the exporter must make of it."""

import json

from sim import lab

# Read back on the lab's Debian 12 guest (6.1) with iocost on the NVMe disk and fio in a child group
# (tests/observed/debian12-6.1.txt, "io.stat / io.pressure with I/O in the child").
CHILD_IO_STAT = ("254:0 rbytes=28102656 wbytes=0 rios=326 wios=0 dbytes=0 dios=0\n"
                 "259:0 rbytes=20512768 wbytes=0 rios=5008 wios=0 dbytes=0 dios=0 cost.usage=50080\n")
CHILD_IO_PRESSURE = ("some avg10=0.24 avg60=0.06 avg300=0.01 total=48063\n"
                     "full avg10=0.24 avg60=0.06 avg300=0.01 total=48063\n")
ROOT_IO_STAT = ("7:7 \n7:6 \n7:5 \n7:4 \n7:3 \n7:2 \n7:1 \n7:0 \n"
                "259:0 rbytes=22663168 wbytes=0 rios=5107 wios=0 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=50080\n"
                "254:0 rbytes=85087232 wbytes=51306496 rios=1631 wios=268 dbytes=0 dios=0\n")
QOS = "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n"
MODEL = ("259:0 ctrl=user model=linear rbps=2000000000 rseqiops=100000 rrandiops=100000 wbps=1000000000 "
         "wseqiops=50000 wrandiops=50000\n")
VERIFY = "/var/lib/aiinfra-io_isolation/verify-result.json"

EXPECTED = """\
# HELP aiinfra_io_isolation_slice_present 1 if the slice's cgroup exists, 0 if not (a slice with no unit started).
# TYPE aiinfra_io_isolation_slice_present gauge
aiinfra_io_isolation_slice_present{slice="inference.slice"} 1
aiinfra_io_isolation_slice_present{slice="training.slice"} 0
# HELP aiinfra_io_isolation_slice_io_pressure_waiting_seconds_total Time at least one task of the slice waited for I/O (io.pressure some).
# TYPE aiinfra_io_isolation_slice_io_pressure_waiting_seconds_total counter
aiinfra_io_isolation_slice_io_pressure_waiting_seconds_total{slice="inference.slice"} 0.048063
# HELP aiinfra_io_isolation_slice_io_pressure_stalled_seconds_total Time all non-idle tasks of the slice waited for I/O at once (io.pressure full).
# TYPE aiinfra_io_isolation_slice_io_pressure_stalled_seconds_total counter
aiinfra_io_isolation_slice_io_pressure_stalled_seconds_total{slice="inference.slice"} 0.048063
# HELP aiinfra_io_isolation_slice_memory_pressure_waiting_seconds_total Time at least one task of the slice waited for memory (memory.pressure some).
# TYPE aiinfra_io_isolation_slice_memory_pressure_waiting_seconds_total counter
aiinfra_io_isolation_slice_memory_pressure_waiting_seconds_total{slice="inference.slice"} 1.5
# HELP aiinfra_io_isolation_slice_memory_pressure_stalled_seconds_total Time all non-idle tasks of the slice waited for memory at once (memory.pressure full).
# TYPE aiinfra_io_isolation_slice_memory_pressure_stalled_seconds_total counter
aiinfra_io_isolation_slice_memory_pressure_stalled_seconds_total{slice="inference.slice"} 0.25
# HELP aiinfra_io_isolation_slice_io_read_bytes_total Bytes the slice read from the disk (io.stat rbytes).
# TYPE aiinfra_io_isolation_slice_io_read_bytes_total counter
aiinfra_io_isolation_slice_io_read_bytes_total{device="vda",majmin="254:0",slice="inference.slice"} 28102656
aiinfra_io_isolation_slice_io_read_bytes_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 20512768
# HELP aiinfra_io_isolation_slice_io_written_bytes_total Bytes the slice wrote to the disk (io.stat wbytes).
# TYPE aiinfra_io_isolation_slice_io_written_bytes_total counter
aiinfra_io_isolation_slice_io_written_bytes_total{device="vda",majmin="254:0",slice="inference.slice"} 0
aiinfra_io_isolation_slice_io_written_bytes_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 0
# HELP aiinfra_io_isolation_slice_io_reads_total Read requests the slice completed on the disk (io.stat rios).
# TYPE aiinfra_io_isolation_slice_io_reads_total counter
aiinfra_io_isolation_slice_io_reads_total{device="vda",majmin="254:0",slice="inference.slice"} 326
aiinfra_io_isolation_slice_io_reads_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 5008
# HELP aiinfra_io_isolation_slice_io_writes_total Write requests the slice completed on the disk (io.stat wios).
# TYPE aiinfra_io_isolation_slice_io_writes_total counter
aiinfra_io_isolation_slice_io_writes_total{device="vda",majmin="254:0",slice="inference.slice"} 0
aiinfra_io_isolation_slice_io_writes_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 0
# HELP aiinfra_io_isolation_slice_iocost_usage_seconds_total Device time iocost charged to the slice on the disk (io.stat cost.usage).
# TYPE aiinfra_io_isolation_slice_iocost_usage_seconds_total counter
aiinfra_io_isolation_slice_iocost_usage_seconds_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 0.05008
# HELP aiinfra_io_isolation_slice_processes Processes in the slice and every cgroup below it (cgroup.procs); 0 when the slice does not exist.
# TYPE aiinfra_io_isolation_slice_processes gauge
aiinfra_io_isolation_slice_processes{slice="inference.slice"} 0
aiinfra_io_isolation_slice_processes{slice="training.slice"} 0
# HELP aiinfra_io_isolation_slice_units Services and scopes that run in the slice (their cgroup directories).
# TYPE aiinfra_io_isolation_slice_units gauge
aiinfra_io_isolation_slice_units{slice="inference.slice"} 0
aiinfra_io_isolation_slice_units{slice="training.slice"} 0
# HELP aiinfra_io_isolation_slice_workloads_listed Workloads listed for the slice (--workload): listing some, it should have processes.
# TYPE aiinfra_io_isolation_slice_workloads_listed gauge
aiinfra_io_isolation_slice_workloads_listed{slice="inference.slice"} 0
aiinfra_io_isolation_slice_workloads_listed{slice="training.slice"} 0
# HELP aiinfra_io_isolation_toplevel_io_read_bytes_total Bytes read from the disk charged to the top-level cgroup (io.stat rbytes).
# TYPE aiinfra_io_isolation_toplevel_io_read_bytes_total counter
aiinfra_io_isolation_toplevel_io_read_bytes_total{cgroup="inference.slice",device="vda",majmin="254:0"} 28102656
aiinfra_io_isolation_toplevel_io_read_bytes_total{cgroup="inference.slice",device="nvme0n1",majmin="259:0"} 20512768
# HELP aiinfra_io_isolation_toplevel_io_written_bytes_total Bytes written to the disk charged to the top-level cgroup (io.stat wbytes).
# TYPE aiinfra_io_isolation_toplevel_io_written_bytes_total counter
aiinfra_io_isolation_toplevel_io_written_bytes_total{cgroup="inference.slice",device="vda",majmin="254:0"} 0
aiinfra_io_isolation_toplevel_io_written_bytes_total{cgroup="inference.slice",device="nvme0n1",majmin="259:0"} 0
# HELP aiinfra_io_isolation_toplevel_io_reads_total Read requests on the disk charged to the top-level cgroup (io.stat rios).
# TYPE aiinfra_io_isolation_toplevel_io_reads_total counter
aiinfra_io_isolation_toplevel_io_reads_total{cgroup="inference.slice",device="vda",majmin="254:0"} 326
aiinfra_io_isolation_toplevel_io_reads_total{cgroup="inference.slice",device="nvme0n1",majmin="259:0"} 5008
# HELP aiinfra_io_isolation_toplevel_io_writes_total Write requests on the disk charged to the top-level cgroup (io.stat wios).
# TYPE aiinfra_io_isolation_toplevel_io_writes_total counter
aiinfra_io_isolation_toplevel_io_writes_total{cgroup="inference.slice",device="vda",majmin="254:0"} 0
aiinfra_io_isolation_toplevel_io_writes_total{cgroup="inference.slice",device="nvme0n1",majmin="259:0"} 0
# HELP aiinfra_io_isolation_disk_io_read_bytes_total Bytes read from the disk, whoever was charged (the root cgroup's io.stat rbytes: the disk's own counters).
# TYPE aiinfra_io_isolation_disk_io_read_bytes_total counter
aiinfra_io_isolation_disk_io_read_bytes_total{device="vda",majmin="254:0"} 85087232
aiinfra_io_isolation_disk_io_read_bytes_total{device="nvme0n1",majmin="259:0"} 22663168
# HELP aiinfra_io_isolation_disk_io_written_bytes_total Bytes written to the disk, whoever was charged (the root cgroup's io.stat wbytes).
# TYPE aiinfra_io_isolation_disk_io_written_bytes_total counter
aiinfra_io_isolation_disk_io_written_bytes_total{device="vda",majmin="254:0"} 51306496
aiinfra_io_isolation_disk_io_written_bytes_total{device="nvme0n1",majmin="259:0"} 0
# HELP aiinfra_io_isolation_disk_io_reads_total Read requests on the disk, whoever was charged (the root cgroup's io.stat rios).
# TYPE aiinfra_io_isolation_disk_io_reads_total counter
aiinfra_io_isolation_disk_io_reads_total{device="vda",majmin="254:0"} 1631
aiinfra_io_isolation_disk_io_reads_total{device="nvme0n1",majmin="259:0"} 5107
# HELP aiinfra_io_isolation_disk_io_writes_total Write requests on the disk, whoever was charged (the root cgroup's io.stat wios).
# TYPE aiinfra_io_isolation_disk_io_writes_total counter
aiinfra_io_isolation_disk_io_writes_total{device="vda",majmin="254:0"} 268
aiinfra_io_isolation_disk_io_writes_total{device="nvme0n1",majmin="259:0"} 0
# HELP aiinfra_io_isolation_iocost_enabled 1 if iocost is enabled on the disk (io.cost.qos enable).
# TYPE aiinfra_io_isolation_iocost_enabled gauge
aiinfra_io_isolation_iocost_enabled{device="nvme0n1",majmin="259:0"} 1
# HELP aiinfra_io_isolation_iocost_model_user 1 if the disk's io.cost.model is user-set (ctrl=user), 0 for the kernel's class.
# TYPE aiinfra_io_isolation_iocost_model_user gauge
aiinfra_io_isolation_iocost_model_user{device="nvme0n1",majmin="259:0"} 1
# HELP aiinfra_io_isolation_iocost_qos_vrate_min_ratio The lowest vrate iocost may use on the disk (io.cost.qos min, 1.0 = 100%).
# TYPE aiinfra_io_isolation_iocost_qos_vrate_min_ratio gauge
aiinfra_io_isolation_iocost_qos_vrate_min_ratio{device="nvme0n1",majmin="259:0"} 0.5
# HELP aiinfra_io_isolation_iocost_qos_vrate_max_ratio The highest vrate iocost may use on the disk (io.cost.qos max, 1.0 = 100%).
# TYPE aiinfra_io_isolation_iocost_qos_vrate_max_ratio gauge
aiinfra_io_isolation_iocost_qos_vrate_max_ratio{device="nvme0n1",majmin="259:0"} 1.5
# HELP aiinfra_io_isolation_iocost_vrate_ratio iocost's current vrate on the disk (root io.stat cost.vrate, 1.0 = 100%).
# TYPE aiinfra_io_isolation_iocost_vrate_ratio gauge
aiinfra_io_isolation_iocost_vrate_ratio{device="nvme0n1",majmin="259:0"} 1.0
# HELP aiinfra_io_isolation_config_drift 1 if the last verify.yml run found drift on the host, 0 if it found none.
# TYPE aiinfra_io_isolation_config_drift gauge
aiinfra_io_isolation_config_drift 1
# HELP aiinfra_io_isolation_config_drift_items Number of settings the last verify.yml run found drifted.
# TYPE aiinfra_io_isolation_config_drift_items gauge
aiinfra_io_isolation_config_drift_items 2
# HELP aiinfra_io_isolation_config_verify_timestamp_seconds When the last verify.yml result was recorded (Unix time).
# TYPE aiinfra_io_isolation_config_verify_timestamp_seconds gauge
aiinfra_io_isolation_config_verify_timestamp_seconds 1796360000
# HELP aiinfra_io_isolation_exporter_errors Files this run could not read or parse (each one skipped, not reported as zero).
# TYPE aiinfra_io_isolation_exporter_errors gauge
aiinfra_io_isolation_exporter_errors 0
"""


def lab_host(tmp_path, iocost=True, psi=True):
    """The lab's Debian 12 guest as the observed transcript shows it: NVMe 259:0, virtio 254:0, inference.slice
    with I/O on both, training.slice not started, a recorded verify result."""
    h = lab.lab_host(tmp_path, psi=psi, vda={}, nvme=("lab-nvme-a",))
    for i in range(8):
        h.add_loop(index=i, majmin="7:%d" % i)
    h.add_cgroup_root(subtree="io memory pids", iocost=iocost)
    files = {"io.stat": CHILD_IO_STAT}
    if psi:
        files.update({"io.pressure": CHILD_IO_PRESSURE,
                      "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n"
                                         "full avg10=0.00 avg60=0.00 avg300=0.00 total=250000\n"})
    h.add_cgroup("inference.slice", files)
    if iocost:
        h.write("/sys/fs/cgroup/io.stat", ROOT_IO_STAT)
        h.write("/sys/fs/cgroup/io.cost.qos", QOS)
        h.write("/sys/fs/cgroup/io.cost.model", MODEL)
    else:
        # without iocost the kernel prints no cost.* keys (ioc_pd_stat returns early)
        h.write("/sys/fs/cgroup/io.stat", ROOT_IO_STAT.replace(" cost.vrate=100.00 cost.usage=50080", ""))
        h.write("/sys/fs/cgroup/inference.slice/io.stat", CHILD_IO_STAT.replace(" cost.usage=50080", ""))
    h.write(VERIFY, json.dumps({"drift": True, "items": ["a: x", "b: y"], "time": 1796360000}))
    return h
