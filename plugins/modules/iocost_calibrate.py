#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: iocost_calibrate
short_description: Measure a disk with fio and derive its blk-iocost model and QoS
version_added: 0.1.0
description:
  - Measures the six coefficients of C(io.cost.model) (C(rbps rseqiops rrandiops wbps wseqiops wrandiops)) with fio,
    in the shapes of the kernel's C(tools/cgroup/iocost_coef_gen.py), and derives C(io.cost.qos) targets
    (C(rpct rlat wpct wlat min max)) from completion-latency percentiles under a bounded random load.
  - Each measurement streams fio's cumulative status every second and stops when its estimate has stopped moving
    (O(stop_rule)), at O(stop_rule.max_seconds) at the latest, instead of a fixed 120 seconds. Every coefficient
    comes back with its spread. The method is described in the collection's C(docs/calibration.md).
  - "Data safety: by default fio works on a scratch file on the filesystem O(filesystem) names: created with direct
    I/O, refused when free space is short, and removed afterwards. A raw disk is written only with
    O(destructive=true), and only when it has no partitions, no filesystem, LVM, RAID or swap signature, is not
    mounted and is not held open; otherwise the call fails before any write and lists every reason."
  - While measuring, the disk runs with scheduler C(none), C(nomerges) 1 and iocost off (as the reference tool does).
    All of it, and C(nr_requests) which a scheduler switch resets, is put back and verified afterwards, also when fio
    fails or the module receives SIGTERM, SIGHUP or SIGINT. A journal under C(/run/aiinfra-io_isolation) names what
    was changed, so a run killed outright is repaired by the next call, before it plans its own target.
  - "QoS solutions (O(solutions)): after the model, with the measured model in C(io.cost.model) and vrate pinned
    (C(rpct=0 wpct=0 min=max=level)) at each of O(solutions.levels), a rate-bound probe reader (4 KiB random reads at
    queue depth 1, O(solutions.probe_share) of the measured C(rrandiops)) runs in a transient systemd scope of
    C(IOWeight=1000) and C(CPUWeight=1000) beside a saturating antagonist (4 KiB random reads at queue depth 64) in
    one of C(IOWeight=100) and C(CPUWeight=100) (the inference and training roles' weights), both in the slice
    C(iocost_calibrate.slice); one more point holds a latency target instead (C(rpct=95),
    C(rlat) = 1.5 x the probe's solo p99, C(min=10 max=100)), and one solo run of the probe with iocost off gives the
    reference p99. RV(solutions) derives C(isolation) (the highest level whose probe p99 stays within 1.5 x solo at 95%
    of its rate or more), C(bandwidth) (level 100) and C(latency) (the latency point, when it meets the same bound)."
  - The slice is stopped afterwards and the disk's C(io.cost.model), C(io.cost.qos) and C(wbt_lat_usec) are put back,
    also on failure and signals; the journal names the slice, so a killed run's fio processes are stopped by the next
    call. On a host without systemd, cgroup v2 or iocost the phase is skipped with a warning and RV(solutions) is
    V(null).
  - The module only measures. The M(aiinfra.io_isolation.iocost) module, or the C(aiinfra.io_isolation.calibration)
    and C(aiinfra.io_isolation.io_baseline) roles, apply the result.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Resolves the disk, plans the target and applies every refusal rule; nothing is written or measured.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: Nothing is left changed on the host; RV(held_before) and RV(restore) show what was held and put back.
options:
  device:
    description:
      - The disk to calibrate, by any name the collection's device resolver accepts (kernel name, C(/dev) path,
        C(/dev/disk/by-id) or C(by-path) link, WWN, serial, C(MAJ:MIN)). Partitions are refused.
      - Required with O(destructive=true). With O(filesystem) it is optional; if given, the filesystem must live on
        this disk.
    type: str
  filesystem:
    description:
      - A directory on a mounted filesystem of the disk to calibrate. The scratch file is created there, measured
        through, and removed. The filesystem's disk is the one calibrated (a partition counts as its disk; a
        device-mapper or md device only when exactly one disk lies below it).
    type: path
  scratch_size:
    description:
      - Size of the scratch file, with a K/M/G/T suffix (base 1024) or in bytes. The filesystem needs this much free
        space plus a headroom of 1 GiB or 5% of the filesystem, whichever is larger.
      - Larger files spread the random I/O over more of the device; the kernel's reference tool uses 16 GiB.
    type: str
    default: 16G
  scratch_headroom:
    description:
      - Free space the filesystem must keep beyond the scratch file, at least; the headroom is this or 5% of the
        filesystem, whichever is larger.
    type: str
    default: 1G
  destructive:
    description:
      - Measure the raw disk O(device) itself, overwriting its contents. Only a provably blank and unused disk is
        accepted.
    type: bool
    default: false
  stop_rule:
    description:
      - When a measurement stops. The estimate is the mean rate after the ramp. It is stable when at least
        O(stop_rule.min_seconds) have passed, the last O(stop_rule.windows) one-second estimates all lie within
        O(stop_rule.tolerance) of their mean, and the relative standard error of the one-second rates after the ramp
        is at most O(stop_rule.max_rse). A measurement that does not become stable stops at O(stop_rule.max_seconds).
      - Each measurement runs O(stop_rule.passes) times, in rounds with the others (all six, all six again, ...), and
        its coefficient is the mean rate over all passes. The QoS runs (O(measure_qos)) come between the middle
        rounds, which spreads every coefficient's passes over more of the calibration. A disk whose speed swings over
        minutes (an emulated disk in the host's page cache, garbage collection, a thermal limit) looks stable within
        one run yet differs between runs; short passes spread over the calibration average several phases of it.
      - The defaults (3 passes of 5 to 6 seconds, ramp 2 s, 3 windows, tolerance 0.02, max_rse 0.02) suit real
        disks; a noisy emulated disk runs most passes to the maximum. The maximum bounds a whole calibration at
        about 3 minutes with the default QoS runs, four times less than the reference tool's fixed 12 minutes.
    type: dict
    suboptions:
      ramp_seconds:
        description: Seconds at the start of each measurement that are not counted.
        type: float
      windows:
        description: How many successive estimates must agree.
        type: int
      tolerance:
        description: How close they must be, as a fraction of their mean (V(0.02) is 2%).
        type: float
      min_seconds:
        description: The shortest measurement.
        type: float
      max_seconds:
        description: The longest pass of a measurement; a pass that does not settle stops here.
        type: float
      passes:
        description:
          - How many times each measurement runs, in turn with the others; V(1) gives one run per coefficient.
          - RV(spread) then includes the spread between the passes.
        type: int
      max_rse:
        description:
          - The largest relative standard error of the one-second rates after the ramp (standard deviation / square
            root of their count / mean) a stable measurement may have. Defaults to O(stop_rule.tolerance).
          - Without it a running mean settles on any noise once enough windows are in; with it noisy measurements
            run longer.
        type: float
  measure_qos:
    description: Also measure completion latencies under a bounded random load and derive RV(qos).
    type: bool
    default: true
  qos_seconds:
    description: Length of each of the two QoS latency runs (random read, random write), in seconds.
    type: int
    default: 8
  numjobs:
    description: fio jobs per measurement (fast devices may need more than one submitter to reach their limit).
    type: int
    default: 1
  big_block_size:
    description: Block size of the two bandwidth measurements (C(rbps), C(wbps)); the reference tool uses 128 MiB.
    type: str
    default: 128M
  solutions:
    description:
      - The solution phase after the model (see the description). With the defaults it adds at most 3 minutes per
        disk (six pairs of fio runs of O(solutions.seconds) plus about 7 s of ramps and start-up each).
    type: dict
    default: {}
    suboptions:
      measure:
        description: Run the solution phase.
        type: bool
        default: true
      levels:
        description:
          - The vrate levels (percent of the measured model, 1 to 100) to pin, each measured once.
          - The C(isolation) solution is the highest of them that holds the probe; include V(100) for C(bandwidth).
        type: list
        elements: float
        default: [100, 80, 60, 40]
      seconds:
        description: Measured seconds of the probe at each point (3 to 300).
        type: int
        default: 15
      probe_share:
        description:
          - The probe's rate as a fraction of the measured C(rrandiops) - the inference load the host is planned
            for. V(0.25) is a quarter of the disk's random-read IOPS.
        type: float
        default: 0.25
      latency_variant:
        description: Also measure the latency-target point (C(rpct=95), C(rlat) = 1.5 x the probe's solo p99).
        type: bool
        default: true
requirements:
  - fio 3.x on the managed host
seealso:
  - module: aiinfra.io_isolation.iocost
  - module: aiinfra.io_isolation.blk_queue
notes:
  - Run it on a quiet host; any other I/O on the disk ends up in the numbers.
  - The solution phase's scopes compete with the rest of the host's cgroups for the disk; on a busy host the points
    measure that competition too.
  - One call takes a few minutes (six measurements of O(stop_rule.passes) passes of up to O(stop_rule.max_seconds)
    each, two QoS runs, and the scratch file's creation). Run it as a plain task, bounded by the task's C(timeout)
    keyword. With C(async), every C(async_status) poll starts Python on the host being measured, and in the lab VM
    fio's random-read IOPS fell by about 19% while polls ran. Where a connection cannot stay open that long, use
    C(async) with a C(poll) interval of several minutes.
"""

EXAMPLES = r"""
- name: Calibrate the disk under /srv/models through a 16 GiB scratch file
  aiinfra.io_isolation.iocost_calibrate:
    filesystem: /srv/models
  register: calibration

- name: Apply what was measured
  aiinfra.io_isolation.iocost:
    device: "{{ calibration.device.name }}"
    model: "{{ calibration.model }}"
    qos: "{{ calibration.qos }}"

- name: Calibrate a blank second disk destructively, with a tighter stop rule
  aiinfra.io_isolation.iocost_calibrate:
    device: lab-nvme-b
    destructive: true
    stop_rule:
      tolerance: 0.01
      max_seconds: 60
  timeout: 1800
"""

RETURN = r"""
device:
  description: The disk that was measured, as the device resolver reads it.
  returned: always
  type: dict
  sample: {name: nvme1n1, majmin: "259:1", kind: nvme, model: QEMU NVMe Ctrl, firmware: 9.2.0, serial: lab-nvme-b,
           size_bytes: 1073741824, rotational: false}
target:
  description: What fio worked on.
  returned: always
  type: dict
  sample: {kind: file, path: /srv/models/.aiinfra-iocost-calibrate-4242.scratch, size_bytes: 17179869184,
           filesystem: /srv/models}
model:
  description: The six coefficients for C(io.cost.model) (bytes/s and IO/s).
  returned: success, not in check mode
  type: dict
  sample: {rbps: 1360000000, rseqiops: 41000, rrandiops: 38000, wbps: 1210000000, wseqiops: 35000, wrandiops: 33000}
qos:
  description: QoS for C(io.cost.qos) derived by the rule in the QoS rule in RV(method); V(null) with O(measure_qos=false).
  returned: success, not in check mode
  type: dict
  sample: {rpct: 95.0, rlat: 1250, wpct: 95.0, wlat: 2100, min: 60.0, max: 100.0}
spread:
  description:
    - Per coefficient, the relative standard error of its estimate within this run (V(0.012) is 1.2%) - the larger
      of the one over its one-second windows and the one over its passes.
  returned: success, not in check mode
  type: dict
  sample: {rbps: 0.004, rseqiops: 0.012, rrandiops: 0.018, wbps: 0.006, wseqiops: 0.015, wrandiops: 0.02}
measurements:
  description:
    - Per coefficient, in measuring order, the value, why each pass stopped (V(stable), V(max) or V(ended), joined
      by V(/)), its length, the per-second window rates and running estimates (passes end to end, for plots), its
      spread, each pass's own figures under C(passes), and the fio argv.
  returned: success, not in check mode
  type: list
  elements: dict
  sample: [{name: rbps, unit: bytes, value: 1360000000, stopped: stable, seconds: 7.1, windows: [[3.0, 1.31e9]],
            estimates: [[3.0, 1.31e9]], spread: {rse: 0.004, cv: 0.01, n: 9, passes: 3, between_passes: 0.003},
            passes: [{value: 1350000000, stopped: stable, seconds: 6.9, fio_seconds: 5.0, post_seconds: 3.0,
                      spread: {rse: 0.004, cv: 0.01, n: 3}}], argv: [fio, --name=aiinfra-rbps]}]
latency:
  description:
    - The QoS runs - random read and random write at 90% of the random IOPS measured before them - with their
      completion latency percentiles in microseconds.
    - C(after_round) is the round of measurements they followed.
  returned: success with O(measure_qos=true)
  type: dict
  sample: {read: {iops_limit: 34200, iops: 34150, percentiles_us: {"50.0": 310, "95.0": 820}},
           write: {iops_limit: 29700, iops: 29650, percentiles_us: {"50.0": 420, "95.0": 1390}},
           qos: {rpct: 95.0, rlat: 1250, wpct: 95.0, wlat: 2100, min: 60.0, max: 100.0}, after_round: 2}
kernel_model:
  description: The kernel's own iocost class for this disk, to compare with RV(model).
  returned: always
  type: dict
  sample: {rbps: 488636629, rseqiops: 8932, rrandiops: 8518, wbps: 427891549, wseqiops: 28755, wrandiops: 21940}
kernel_class:
  description: Where RV(kernel_model) comes from - V(auto) (the disk's C(ctrl=auto) line) or the class name.
  returned: always
  type: str
  sample: auto
held_before:
  description: What the disk held before the call (queue attributes and its iocost lines).
  returned: always
  type: dict
  sample: {queue: {scheduler: mq-deadline, nr_requests: 64, nomerges: 0, wbt_lat_usec: 0},
           iocost_qos: {enable: 1, ctrl: auto}, iocost_model: null}
restore:
  description: What the disk holds after the restore (its queue files), and any notes or errors.
  returned: success, not in check mode
  type: dict
  sample: {queue: {/sys/block/nvme1n1/queue/scheduler: mq-deadline}, errors: [], notes: []}
recovered:
  description:
    - What this call repaired first, one entry per journal an earlier, killed run left behind (on any disk) - the
      journal, the disk, the restored values (V(null) after a reboot, which reset them) and the scratch file removed.
  returned: success, not in check mode
  type: list
  elements: dict
  sample: [{journal: /run/aiinfra-io_isolation/calibrate-wwn_nvme.1b36-6c61.json, device: {name: nvme1n1,
            majmin: "259:0"}, restored: {/sys/block/nvme1n1/queue/scheduler: mq-deadline}, removed_scratch: null,
            notes: []}]
method:
  description: The stop rule, QoS rule, job count and block size used.
  returned: always
  type: dict
  sample: {stop_rule: {ramp_seconds: 2, windows: 3, tolerance: 0.02, max_rse: 0.02, min_seconds: 5, max_seconds: 6,
                       passes: 3},
           numjobs: 1, big_block_size: 134217728, qos_rule: "rlat/wlat = 1.5 x p95 ..."}
fio_version:
  description: The fio version on the host.
  returned: always
  type: str
  sample: "3.39"
kernel:
  description: The running kernel release.
  returned: always
  type: str
  sample: 6.12.48+deb13-amd64
host:
  description: The host's name.
  returned: always
  type: str
  sample: calib-01
date:
  description: When the measurement started (UTC, ISO 8601).
  returned: success, not in check mode
  type: str
  sample: "2026-12-01T10:00:00Z"
seconds:
  description: Wall time of the calibration, scratch file included.
  returned: success, not in check mode
  type: float
  sample: 151.2
timings:
  description: Seconds spent creating the scratch file, measuring, and in the QoS runs.
  returned: success, not in check mode
  type: dict
  sample: {scratch_fill: 12.1, measure: 118.4, qos: 20.6, solutions: 131.2}
solutions:
  description:
    - The QoS solutions derived from the solution phase, by name (C(isolation), C(bandwidth), C(latency)); each has
      C(qos) (the six keys of C(io.cost.qos), ready for it; C(rpct)/C(wpct) V(0) is no latency target), C(vrate)
      (the pinned level; V(null) for C(latency)), C(vrate_read) (the mean C(cost.vrate) of the root C(io.stat)) and
      the point's figures. C(isolation) is V(null) when no level held the probe (the C(notes) of RV(solution_phase) say so).
    - V(null) when the phase did not run.
  returned: success, not in check mode
  type: dict
  sample: {isolation: {qos: {rpct: 0.0, rlat: 1250, wpct: 0.0, wlat: 2100, min: 60.0, max: 60.0}, vrate: 60.0,
                       vrate_read: 60.0, probe_p99_us: 3030.0, probe_p99_ratio: 1.47, rate_kept: 0.999,
                       probe_iops: 749.3, probe_requested_iops: 750, antagonist_iops: 1583.0, antagonist_share: 0.528,
                       why: the highest pinned vrate with probe p99 <= 1.5x solo and >= 95% of its rate},
           bandwidth: {qos: {rpct: 0.0, rlat: 1250, wpct: 0.0, wlat: 2100, min: 100.0, max: 100.0}, vrate: 100.0}}
solution_phase:
  description:
    - The solution phase - whether it ran (C(measured)) or why not (C(skipped)), its rule and options, the probe's
      rate (C(probe_iops)), the solo run (C(solo)), one entry per point in C(points) (C(variant) V(pinned) or
      V(latency), C(level), C(qos) and C(qos_line) as written, C(probe_p99_us), C(probe_p99_ratio) to solo,
      C(probe_iops) against C(probe_requested_iops) as C(rate_kept), C(antagonist_iops) and C(antagonist_share) of
      C(rrandiops), C(vrate) sampled from C(io.stat)), C(notes) and C(seconds).
  returned: always
  type: dict
  sample: {measured: true, skipped: null, probe_iops: 750, rrandiops: 3000, seconds: 131.2, bound_seconds: 156,
           solo: {probe_p99_us: 2060.0, probe_iops: 750.1, rate_kept: 1.0},
           points: [{variant: pinned, level: 80.0, qos_line: "259:0 enable=1 ctrl=user rpct=0.00 rlat=1250 wpct=0.00
                     wlat=2100 min=80.00 max=80.00", probe_p99_us: 3260.0, probe_p99_ratio: 1.58, rate_kept: 1.0,
                     antagonist_iops: 2178.0, antagonist_share: 0.726, vrate: {mean: 80.0, min: 80.0, max: 80.0, n: 30}}],
           notes: []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as _calibrate
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import exit_module

STOP_RULE = {"ramp_seconds": {"type": "float"}, "windows": {"type": "int"}, "tolerance": {"type": "float"},
             "min_seconds": {"type": "float"}, "max_seconds": {"type": "float"}, "max_rse": {"type": "float"},
             "passes": {"type": "int", "no_log": False}}  # a count of runs, not a password


SOLUTIONS = {"measure": {"type": "bool", "default": True},
             "levels": {"type": "list", "elements": "float", "default": [100, 80, 60, 40]},
             "seconds": {"type": "int", "default": 15}, "probe_share": {"type": "float", "default": 0.25},
             "latency_variant": {"type": "bool", "default": True}}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            device={"type": "str"},
            filesystem={"type": "path"},
            scratch_size={"type": "str", "default": "16G"},
            scratch_headroom={"type": "str", "default": "1G"},
            destructive={"type": "bool", "default": False},
            stop_rule={"type": "dict", "options": STOP_RULE},
            measure_qos={"type": "bool", "default": True},
            qos_seconds={"type": "int", "default": 8},
            numjobs={"type": "int", "default": 1},
            big_block_size={"type": "str", "default": "128M"},
            solutions={"type": "dict", "default": {}, "apply_defaults": True, "options": SOLUTIONS},
        ),
        required_one_of=[("device", "filesystem")],
        supports_check_mode=True,
    )
    fs = KernelFS()
    exit_module(module, lambda: _calibrate.calibrate(fs, DeviceResolver(fs), Runner(module), module.params,
                                                     module.check_mode))


if __name__ == "__main__":
    main()
