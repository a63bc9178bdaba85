# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: does the collection keep an inference reader's latency while training hammers the disk?

Boots (or reuses) a lab VM, puts ext4 on lab-nvme-b with one file per job, and for each repeat
applies each configuration through the collection itself, then runs fio in the slices (guest.py):
every reader profile against every antagonist, plus each job alone under the first configuration
(the reference for "solo"). The readers are the flat-out QD1 loops and the same loops at a planned rate
(rate-bound: <reader>@<percent>, at RATE_PERCENTS of the disk's capacity for the reader's shape - from the
calibrated model when this run calibrates, else the device-bound capacity; rate_plan() records which, and each
antagonist's frontier: its capacity less the reader's load). Configurations, in this order per repeat:

  none              no isolation: purge.yml, then a reboot (sysctls and the like return only then)
  roles             site.yml: io_baseline + inference + training with their defaults
  roles_calibrated  site.yml with the model from the calibration role (lab-nvme-a, same hardware
                    class, calibrated once per benchmark into <out>/calibration-db)
  iocost_default    iocost_default.yml: iocost with the kernel's model class, weights 1000:100

With --kernel custom (the lab kernel with io.latency, make lab-kernel), --configs may also name:

  roles_calibrated_iolatency  roles_calibrated plus the inference slice's io.latency target (--iolatency-us),
                              beside the calibrated model's iocost QoS solution
  iolatency                   purge.yml and a reboot, then only that target (iolatency.yml): io.latency instead
                              of iocost

--cpu-pair (make bench-isolation-cpu) runs the CPU-contention pair instead (issue 39): a rate-bound reader
(CPU_PAIR's) beside a CPU-bound training job (guest.py's CPU burner, `cpuhog`: one SHA-256 worker per CPU of the
guest, in training.slice) on a guest with two NUMA nodes of one vCPU each (lab.py up --numa, nvme-b on node 1), under

  roles             as above: inference and training share both CPUs, cpu.weight 1000:100
  roles_cpuset      roles plus the cpuset split, inference_cpus/training_cpus (--cpuset-vars, default auto: inference
                    on the node of its disk, node 1's CPU; training on the other)

and checks that each configuration's jobs ran where it says (cpu_pair_check). The report's CPU table has the reader's
p99 against solo and its rate kept, and the hog's hashing throughput and CPU time against its own solo run.

The roles_calibrated configurations take the calibration entry's measured isolation solution (io_baseline's
io_baseline_qos_solution default), so the report shows what a calibration's solution does on an identical disk.

The order matters: with the kernel's QoS (ctrl=auto) iocost steps its class up to ssd_fast once
vrate stays above 500% for 10 s, and a user QoS written later keeps that class. The roles write
their QoS right after the reboot, as on a freshly booted host, so they run with the class the
kernel picks first (ssd_dfl); iocost_default, last, gets to step.

The disk is device-bound by default: both lab NVMe drives get a fixed capacity (--disk-capacity,
QEMU block throttling), so the emulated disk, not the emulator's CPU, is what the tenants share -
as on a saturated real NVMe. The calibration must recover that capacity (the report compares the
model with it). --sweep then re-runs every pair of a flat-out reader under the calibrated model with each QoS
setting of SWEEP written in turn: the trade-off plots (antagonist share against reader p99 / solo). The
recorded run on the unthrottled disk (--unthrottled-reference) is the report's last table: what
TCG alone shows.

With --probe (the default) every cell also records the block layer's latency per slice, from
submit_bio to bio_endio, with the collection's eBPF probe (io_latency's bpftrace program, run by
guest.py around the jobs; the sweep runs without it): count, percentiles and histogram beside fio's.

--containers (make bench-isolation-containers, issue 37) runs the smoke pair (--smoke's cells, runs and checks) once
per repeat as transient units (systemd-run) and once in containers: the reader in a Docker container with
--cgroup-parent=inference.slice, the antagonist in a Podman container with --cgroup-parent=training.slice, from an image
built in the guest out of its Debian packages (guest.py's `containers`; nothing is pulled). The roles are applied once;
the two launchers alternate their order from repeat to repeat. Besides the smoke checks per launcher it checks that
each container ran below its slice and the slice was charged its I/O, and that the antagonist ran through the reader's
measured seconds (containers.py); results.json and results.md then set the two launchers' protection ratios (reader
p99 against its solo p99) side by side, with their range over the repeats.

Writes results.json, results.md, report.html and the plots under --out (report.py).

  .venv/bin/python benchmarks/isolation/bench.py              (or: make bench-isolation)
  .venv/bin/python benchmarks/isolation/bench.py --smoke      (one configuration, seconds; make test)
  .venv/bin/python benchmarks/isolation/bench.py --containers (the smoke pair, systemd-run and containers)
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import containers  # noqa: E402  pylint: disable=wrong-import-position
import guest  # noqa: E402  pylint: disable=wrong-import-position
import report  # noqa: E402  pylint: disable=wrong-import-position
from labvm import (LAB, accel, add_vm_args, ansible_playbook, disk_capacity, guest_script, module_utils, sh, vm,  # noqa: E402  pylint: disable=wrong-import-position
                   write_inventory)

# The probe's program, parsing and percentiles: io_latency's, not a copy.
latency = module_utils("_observability.io_latency")

CONFIGS = ("none", "roles", "roles_calibrated", "iocost_default")
# On a kernel with io.latency only (--kernel custom; Debian's kernels do not build it), asked for by --configs:
# the inference slice's io.latency target instead of iocost, and beside the roles' calibrated iocost solution.
IOLATENCY_CONFIGS = ("iolatency", "roles_calibrated_iolatency")
LABELS = {"none": "no isolation", "iocost_default": "iocost, kernel model, weights 1000:100",
          "roles": "roles, defaults", "roles_calibrated": "roles + calibrated model",
          "iolatency": "io.latency target, no iocost", "roles_calibrated_iolatency": "roles + calibrated + io.latency"}
# The CPU-contention pair's configuration (--configs or --cpu-pair): the roles with the cpuset split.
CPU_CONFIGS = ("roles_cpuset",)
LABELS["roles_cpuset"] = "roles + cpuset split"
CPUSET_VARS = {"inference_cpus": "auto", "training_cpus": "auto"}
# Antagonists that load the CPUs, not the disk: no rate plan entry, no frontier (guest.py's CPU burner).
CPU_ANTAGONISTS = tuple(guest.CPU_PROFILES)
# --cpu-pair: sized to finish in about 10 minutes under TCG with 3 repeats (boot, 2 applies and 4 cells a repeat).
# Multi-threaded TCG: with one host thread for both vCPUs a guest cpuset would separate nothing on the host.
CPU_PAIR = {"configs": "roles,roles_cpuset", "readers": "randread4k@25", "antagonists": "cpuhog", "seconds": 10,
            "ramp": 2, "guest": "debian13", "out": os.path.join(REPO, ".cache", "bench-isolation-cpu"),
            "unthrottled_reference": "none"}
# Configurations that need the calibration database.
CALIBRATED = ("roles_calibrated", "roles_calibrated_iolatency")
READERS = ("randread4k", "seqread128k")
ANTAGONISTS = ("seqwrite1m", "randread64", "uring_sqpoll", "buffered")
EXPERIMENTS = ("randread64_idle", "uring_sqpoll_idle")   # --antagonists only: ioprio's effect
# Rate-bound readers: each flat-out reader at these percentages of the disk's capacity for its shape, as an inference
# server runs at a planned request rate (a flat-out QD1 loop takes 60-77% of the lab disk by itself).
RATE_PERCENTS = (10, 25, 50)
RATE_READERS = tuple("%s%s%d" % (r, guest.RATE_SEP, pct) for r in READERS for pct in RATE_PERCENTS)
# Each job's measure of the disk: the unit of a reader's rate and of an antagonist's frontier, and the calibrated
# model's coefficient for the job's shape (the device-bound capacity has one figure per unit, lab.py's iops and bps).
BASIS = {"randread4k": ("iops", "rrandiops"), "seqread128k": ("bps", "rbps"), "seqwrite1m": ("bps", "wbps"),
         "randread64": ("iops", "rrandiops"), "uring_sqpoll": ("iops", "rrandiops"), "buffered": ("bps", "wbps")}
BASIS.update((e, BASIS[e[:-len("_idle")]]) for e in EXPERIMENTS)
# --smoke: the flat-out pair the probe's tolerance was set on, and one rate-bound pair (each job also alone).
SMOKE_PAIRS = (("randread4k", "seqwrite1m"), ("randread4k@25", "randread64"))
DEVICE = "lab-nvme-b"        # the disk both tenants share
CALIBRATE = "lab-nvme-a"     # blank, same model/firmware/capacity: its entry applies to lab-nvme-b
MOUNT = "/srv/bench"
FILES = {"reader.dat": 256, "ckpt.dat": 256, "buffered.dat": 256}
# The recorded run on the unthrottled disk (what TCG alone shows), the report's last table.
UNTHROTTLED = os.path.join(HERE, "results", "2026-12-01-debian12-tcg-final-results.json")
# QoS settings the sweep writes (iocost's io.cost.qos keys); the roles' default is added to them.
# max=100 keeps vrate at the model: with a calibrated model, never above what the disk completes.
SWEEP = ({"rlat": 500}, {"rlat": 1000}, {"rlat": 5000}, {"min": 1}, {"max": 100}, {"max": 150},
         {"rlat": 1000, "max": 100}, {"min": 1, "max": 100})
ROLE_DEFAULTS = os.path.join(REPO, "roles", "io_baseline", "defaults", "main.yml")
SLICES = (report.READER_SLICE, report.ANTAGONIST_SLICE)
# The probe's window runs this long past fio's ramp + runtime: the jobs start after the probe attached
# (systemd-run, fio's start-up), so fio measures that much later. The smoke run shares the machine with
# make test's other stages: there the two systemd-runs took 2.22 and 2.63 s (CI, 2026-12-06), so it waits longer.
PROBE_MARGIN = 2
SMOKE_PROBE_MARGIN = 6
# --containers: repeats unless --repeats says (each repeat: the smoke cells twice, about 5 minutes under TCG)
CONTAINER_REPEATS = 5
# How far outside fio's count (plus its ramp) the probe's count of the reader's I/Os may be. Two smoke
# runs on Debian 12 under TCG (3 s, 1 s ramp), probe / fio: 14469 / 10749 and 16053 / 12084 alone,
# 11875 / 9070 and 9186 / 7851 against seqwrite1m - the probe counted fio's ramp too (its reads began
# after the 1 s warm-up), at +4%, -1.5%, -7% and -49% of the measured seconds' rate. A ramp at 1.6x
# the measured rate would still pass the upper bound; 15% below fio's count (which the window holds
# whole) is a probe that misses the slice's I/O; 15% above count plus ramp, one that counts another's.
PROBE_TOLERANCE = 0.15


class Lab:
    def __init__(self, name, out):
        self.name, self.out = name, out
        self.files = FILES
        self.inventory = [os.path.join(out, "inventory.yml"), os.path.join(out, "groups.yml")]

    def write_inventory(self):
        write_inventory(self.name, self.inventory[0])
        # One co-located host: inference and training on the same disk; it calibrates its class too.
        with open(self.inventory[1], "w") as f:
            f.write("all:\n  children:\n"
                    "    inference:\n      hosts:\n        %(n)s:\n"
                    "    training:\n      hosts:\n        %(n)s:\n"
                    "    calibration:\n      hosts:\n        %(n)s:\n"
                    "      vars:\n        calibration_targets:\n"
                    "          - {device: %(c)s, destructive: true}\n" % {"n": self.name, "c": CALIBRATE})

    def guest(self, action, spec):
        return guest_script(self.name, os.path.join(HERE, "guest.py"), [action, spec])

    def playbook(self, path, extra=None):
        argv, env = ansible_playbook(self.inventory, path, [json.dumps(extra or {})])
        t0 = time.time()
        res = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        log = os.path.join(self.out, "ansible.log")
        with open(log, "a") as f:
            f.write("$ %s\n%s\n%s\n" % (" ".join(argv), res.stdout, res.stderr))
        if res.returncode != 0:
            raise SystemExit("%s failed (rc %d); see %s:\n%s" % (os.path.basename(path), res.returncode, log,
                                                                 res.stdout[-3000:]))
        return time.time() - t0


def apply(lab, config, fresh, db, extra=None, iolatency_us=None, cpuset=None):
    """Put the host into `config` through the collection; returns the seconds it took. `extra`: more
    variables for the roles (to try other defaults); `iolatency_us`: the io.latency configurations' target;
    `cpuset`: roles_cpuset's inference_cpus/training_cpus (default CPUSET_VARS)."""
    t0 = time.time()
    # The health gate would fail a host that a previous run just stalled: not what is measured here.
    roles = dict({"io_isolation_health_fail_pct": 101, "io_isolation_health_warn_pct": 101}, **(extra or {}))
    if config == "none":
        if not fresh:
            lab.playbook(os.path.join(REPO, "playbooks", "purge.yml"))
            sh(LAB + ["reboot", lab.name], capture_output=True)
            lab.write_inventory()
    elif config == "iocost_default":
        lab.playbook(os.path.join(HERE, "iocost_default.yml"), {"bench_device": DEVICE})
    elif config == "roles":
        # No calibration database: io_baseline takes the kernel's class for each disk.
        lab.playbook(os.path.join(REPO, "playbooks", "site.yml"),
                     dict(roles, io_isolation_calibration_dir=os.path.join(lab.out, "no-calibration-db")))
    elif config == "roles_cpuset":
        # the roles configuration plus the split; "roles" after it takes the split away (the drop-in loses
        # AllowedCPUs=, which the cgroup module resets on the running slice)
        lab.playbook(os.path.join(REPO, "playbooks", "site.yml"),
                     dict(roles, io_isolation_calibration_dir=os.path.join(lab.out, "no-calibration-db"),
                          **(cpuset or CPUSET_VARS)))
    elif config == "roles_calibrated":
        lab.playbook(os.path.join(REPO, "playbooks", "site.yml"), dict(roles, io_isolation_calibration_dir=db))
    elif config == "roles_calibrated_iolatency":
        lab.playbook(os.path.join(REPO, "playbooks", "site.yml"),
                     dict(roles, io_isolation_calibration_dir=db, inference_io_latency_us=iolatency_us))
    elif config == "iolatency":
        # iocost off (purge, then a reboot resets the kernel state), the target on the inference slice alone
        lab.playbook(os.path.join(REPO, "playbooks", "purge.yml"))
        sh(LAB + ["reboot", lab.name], capture_output=True)
        lab.write_inventory()
        lab.playbook(os.path.join(HERE, "iolatency.yml"), {"bench_iolatency_us": iolatency_us})
    else:
        raise SystemExit("unknown configuration %s" % config)
    # After a reboot the filesystem is not mounted; prepare is idempotent.
    lab.guest("prepare", {"serial": DEVICE, "mount": MOUNT, "files": lab.files})
    return round(time.time() - t0, 1)


def calibrate(lab, db):
    if os.path.isdir(db) and any(n.endswith(".json") for n in os.listdir(db)):
        return None
    return round(lab.playbook(os.path.join(REPO, "playbooks", "calibrate.yml"),
                              {"io_isolation_calibration_dir": db}), 1)


def calibrated_model(db):
    """The iocost model of the calibration database's entry (one hardware class in the lab), or None."""
    for name in sorted(os.listdir(db)) if os.path.isdir(db) else []:
        if name.endswith(".json"):
            with open(os.path.join(db, name)) as f:
                entry = json.load(f)
            return entry.get("iocost_model")
    return None


def versus_capacity(model, capacity):
    """Each calibrated coefficient against the throttle it should recover: {key: {model, capacity, error}}."""
    if not model or not capacity:
        return None
    out = {}
    for key in ("rbps", "wbps", "rseqiops", "rrandiops", "wseqiops", "wrandiops"):
        want = capacity["bps"] if key.endswith("bps") else capacity["iops"]
        got = model.get(key)
        out[key] = {"model": got, "capacity": want,
                    "error": None if got is None else round((float(got) - want) / want, 4)}
    return out


def role_qos():
    """The roles' default QoS (io_baseline_iocost_qos), read from the role, not copied."""
    import yaml  # the controller's virtualenv has it (ansible-core)
    with open(ROLE_DEFAULTS) as f:
        return yaml.safe_load(f)["io_baseline_iocost_qos"]


def qos_line(qos):
    return "enable=1 ctrl=user " + " ".join("%s=%s" % (k, qos[k]) for k in ("rpct", "rlat", "wpct", "wlat", "min", "max"))


def sweep_points():
    base = role_qos()
    points = [("default", base)]
    for change in SWEEP:
        points.append((",".join("%s=%s" % kv for kv in sorted(change.items())), dict(base, **change)))
    return points


def solo_cells(readers, antagonists):
    """Each job alone: the solo reference of every ratio (and, in ceiling.py, what the disk allows)."""
    return ([{"reader": r, "antagonist": None} for r in readers]
            + [{"reader": None, "antagonist": a} for a in antagonists])


def cells_for(config, first, readers, antagonists, pairs=None):
    """The cells of one configuration: each job alone under the first, then `pairs` (default: every reader against
    every antagonist)."""
    cells = solo_cells(readers, antagonists) if first else []
    pairs = [(r, a) for r in readers for a in antagonists] if pairs is None else pairs
    cells += [{"reader": r, "antagonist": a} for r, a in pairs]
    return cells


def rate_reader(name):
    """<reader>@<percent> -> (reader, percent); SystemExit for a name that is not a flat-out reader at 1-99%."""
    base, sep, percent = name.partition(guest.RATE_SEP)
    if not sep or base not in READERS or not percent.isdigit() or not 0 < int(percent) < 100:
        raise SystemExit("unknown rate-bound reader %s: <reader>%s<percent>, reader one of %s, percent 1-99"
                         % (name, guest.RATE_SEP, ", ".join(READERS)))
    return base, int(percent)


def block_size(profile):
    """The block size (bytes) of a profile's fio job, from its --bs (fio's k and m are binary)."""
    value = [a for a in guest.PROFILES[profile][1] if a.startswith("--bs=")][0][len("--bs="):].lower()
    scale = {"k": 1 << 10, "m": 1 << 20}.get(value[-1:], 1)
    return int(value.rstrip("km")) * scale


def capacity_of(profile, model, capacity):
    """The disk's capacity for a job's shape, in its unit (BASIS): the calibrated model's coefficient when there is a
    model, else the device-bound capacity's figure."""
    unit, coefficient = BASIS[profile]
    value = model.get(coefficient) if model else (capacity or {}).get(unit)
    if not value:
        raise SystemExit("no %s for %s in the %s" % (coefficient if model else unit, profile,
                                                     "calibrated model" if model else "disk's capacity"))
    return float(value)


def rate_plan(readers, antagonists, model=None, capacity=None):
    """The rate of each rate-bound reader and each antagonist's capacity, in results["rates"]; None without a
    rate-bound reader.

    The disk's capacity comes from the calibrated model (`model`: rrandiops for 4k random reads, rbps for 128k
    sequential ones; wbps and rrandiops for the antagonists) or, without one, from the device-bound capacity
    (`capacity`, {"iops", "bps"}); "source" says which, "from" which figure. A reader's rate is its percent of
    its shape's capacity, its load that rate in both units (IOPS and bytes per second): report.frontier() takes
    an antagonist's capacity less the reader's load in the antagonist's unit.
    """
    rated = [r for r in readers if guest.RATE_SEP in r]
    if not rated:
        return None
    if not model and not capacity:
        raise SystemExit("the rate-bound readers (%s) need the disk's capacity: a calibrated model (configuration "
                         "roles_calibrated) or a device-bound disk (--disk-capacity)" % ", ".join(rated))
    plan = {"source": "calibrated model" if model else "device-bound capacity",
            "capacity": dict(model) if model else dict(capacity), "readers": {}, "antagonists": {}}
    for name in rated:
        profile, percent = rate_reader(name)
        unit, coefficient = BASIS[profile]
        cap = capacity_of(profile, model, capacity)
        rate = int(round(cap * percent / 100.0))
        size = block_size(profile)
        plan["readers"][name] = {
            "profile": profile, "percent": percent, "unit": unit, "from": coefficient if model else unit,
            "capacity": cap, "rate": rate, "block_size": size,
            "load": {"iops": rate if unit == "iops" else rate / float(size), "bps": rate * size if unit == "iops" else rate}}
    for name in antagonists:
        if name in CPU_ANTAGONISTS:
            continue         # no disk capacity to share: its figures are CPU time and work (report's CPU table)
        unit, coefficient = BASIS[name]
        plan["antagonists"][name] = {"unit": unit, "from": coefficient if model else unit,
                                     "capacity": capacity_of(name, model, capacity)}
    return plan


def fio_rates(plan):
    """guest.py's "rates" of the cells spec: {reader: {unit: rate}}."""
    return dict((name, {r["unit"]: r["rate"]}) for name, r in ((plan or {}).get("readers") or {}).items())


def files_for(readers, antagonists):
    """The files of FILES the jobs read or write (a CPU-bound job none): prepare fills only those."""
    used = set(guest.PROFILES[name.partition(guest.RATE_SEP)[0]][0] for name in list(readers) + list(antagonists)
               if name not in CPU_ANTAGONISTS)
    return dict((f, mib) for f, mib in FILES.items() if f in used)


def cpu_pair_defaults(a, argv):
    """--cpu-pair: CPU_PAIR's configurations, jobs, run length, guest and output where the command line does not
    name them (and no unthrottled disk's table), a guest with two NUMA nodes, no probe (it times the block layer,
    not the CPUs) and no sweep."""
    # argparse takes a unique prefix of an option too (--sec 5)
    given = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    for key, value in CPU_PAIR.items():
        if not any(("--" + key.replace("_", "-")).startswith(name) for name in given):
            setattr(a, key, value)
    a.numa, a.sweep = True, False
    if "--probe" not in given:
        a.probe = False
    return a


def cpuset_refusal(configs, cpuset, numa):
    """Why roles_cpuset cannot split this guest's CPUs, or None: auto and poll follow the NUMA node of the disk,
    and a guest without nodes gives inference every CPU - no split to measure."""
    if "roles_cpuset" not in configs:
        return None
    words = sorted(set(v for v in cpuset.values() if v in ("auto", "poll")))
    if words and not numa:
        return ("roles_cpuset with %s needs a guest with two NUMA nodes (--numa): without them inference gets every "
                "CPU" % ", ".join(words))
    if not cpuset.get("inference_cpus") or cpuset.get("training_cpus") in (None, "", "shared"):
        return "roles_cpuset needs inference_cpus and training_cpus that split the CPUs: %s" % json.dumps(cpuset)
    return None


def cpu_pair_check(results):
    """The CPU pair measured what it says: every reader and CPU hog has figures, and each run's jobs had the CPUs of
    its configuration - under roles_cpuset disjoint sets (the split), otherwise the same set (no split)."""
    cpu_list = module_utils("_host.codecs").CPU_LIST
    problems = []
    for run in results["runs"]:
        where = "%s vs %s (%s, repeat %s)" % (run.get("reader"), run.get("antagonist"), run.get("config"),
                                              run.get("repeat"))
        if run.get("antagonist") in CPU_ANTAGONISTS and not (run.get("antagonist_stats") or {}).get("hashed_bps"):
            problems.append("%s: the CPU hog has no work figures (%s)" % (where, run.get("antagonist_error")))
        if run.get("reader") and not ((run.get("reader_stats") or {}).get("clat_ns") or {}).get("p99"):
            problems.append("%s: the reader has no p99 (%s)" % (where, run.get("reader_error")))
        if not (run.get("reader") and run.get("antagonist")):
            continue
        got = [(run.get(role + "_cpus") or {}).get("cpus") for role in ("reader", "antagonist")]
        if None in got:
            problems.append("%s: the CPUs the jobs could use were not read (%s)" % (where, got))
            continue
        reader, hog = (set(cpu_list.parse(c)) for c in got)
        if run.get("config") in CPU_CONFIGS and reader & hog:
            problems.append("%s: no split in force, the reader had CPUs %s and the hog %s" % (where, got[0], got[1]))
        elif run.get("config") not in CPU_CONFIGS and reader != hog:
            problems.append("%s: a split in force without roles_cpuset, the reader had CPUs %s and the hog %s"
                            % (where, got[0], got[1]))
    return problems


def containers_defaults(a, argv):
    """--containers: CONTAINER_REPEATS repeats, the name and output directory of its own, unless given."""
    given = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    for key, value in (("repeats", CONTAINER_REPEATS), ("name", "bench-iso-ctr"),
                       ("out", os.path.join(REPO, ".cache", "bench-isolation-containers"))):
        if not any(("--" + key).startswith(name) for name in given):
            setattr(a, key, value)
    a.smoke = False       # its single repeat and verdict are the containers run's, per launcher
    return a


def containers_run(lab, a, results, pairs, fresh, db):
    """The roles once, then per repeat the smoke cells under each launcher (order alternating), into results."""
    results["meta"]["repeats"] = a.repeats
    results["launchers"] = list(containers.LAUNCHERS)
    took = apply(lab, "roles", fresh, db, a.roles_vars)
    results["timings"]["apply"]["roles"] = [took]
    readers, antagonists = results["readers"], results["antagonists"]
    for rep in range(1, a.repeats + 1):
        order = containers.LAUNCHERS if rep % 2 else tuple(reversed(containers.LAUNCHERS))
        for launcher in order:
            spec = {"serial": DEVICE, "mount": MOUNT, "seconds": a.seconds, "ramp": a.ramp,
                    "cells": cells_for("roles", True, readers, antagonists, pairs),
                    "rates": fio_rates(results["rates"]), "launcher": launcher}
            if a.probe:
                spec["probe"] = probe_spec(a.seconds, a.ramp, a.probe_margin)
            t0 = time.time()
            got = lab.guest("cells", spec)
            results["timings"]["cells"].setdefault(launcher, []).append(round(time.time() - t0, 1))
            results["settings"]["roles"] = got["settings"]
            results["meta"].update(kernel=got["kernel"], fio=got["fio"])
            for c in got["cells"]:
                c.update(config="roles", repeat=rep, launcher=launcher)
                if "probe_raw" in c:
                    c["probe"] = probe_figures(c.pop("probe_raw"), got.get("bpftrace"))
                results["runs"].append(c)
                if a.verbose:
                    print(json.dumps(c)[:400], flush=True)
            print("repeat %d %s: %d runs in %.0f s" % (rep, launcher, len(got["cells"]), time.time() - t0), flush=True)
            with open(os.path.join(a.out, "results-partial.json"), "w") as f:
                json.dump(results, f)


def containers_check(results):
    """The smoke run's checks per launcher, and containers.py's (placement, charge, overlap)."""
    problems = []
    for launcher in containers.LAUNCHERS:
        view = dict(results, runs=containers.launcher_runs(results, launcher))
        problems += ["%s: %s" % (launcher, p) for p in smoke_check(view)] if view["runs"] else []
    return problems + containers.problems(results)


def containers_report(results, out):
    """results.json and results.md of a containers run; SystemExit listing what did not hold."""
    rows = containers.protection(results)
    results["protection"] = rows
    problems = results["problems"] = containers_check(results)
    text = containers.markdown(results, rows)
    if problems:
        text += "\nThe run's checks failed:\n\n" + "".join("- %s\n" % p for p in problems)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    print("wrote results.json, results.md in %s (total %.0f s)" % (out, results["timings"]["total"]))
    if problems:
        raise SystemExit("the containers run did not measure what it says:\n  " + "\n  ".join(problems))


def probe_spec(seconds, ramp, margin=PROBE_MARGIN):
    """The cell spec's probe: a window over fio's ramp (forgotten, as fio's --ramp_time) and its runtime."""
    window = ramp + seconds + margin
    return {"program": latency.program(window, warmup=ramp), "window": window}


def probe_figures(raw, version):
    """guest.py's probe output -> per slice {count, p50_us, p99_us, p999_us, histogram} on the benchmark's
    disk; "other": that disk's I/O charged outside both slices (the root when a slice has no io controller)."""
    counts, lost = latency.parse(raw["output"])
    per, other = dict((s, {}) for s in SLICES), 0
    for (cgid, dev, bucket), count in counts.items():
        if latency.majmin(dev) != raw["majmin"]:
            continue
        slice_ = raw["cgroups"].get(str(cgid))
        if slice_ not in per:
            other += count
            continue
        per[slice_][bucket] = per[slice_].get(bucket, 0) + count
    out = {"other": other, "lost": lost, "bpftrace": version,
           "attach_s": raw.get("attach_s"), "jobs_started_s": raw.get("jobs_started_s")}
    for slice_, buckets in per.items():
        out[slice_] = {"count": sum(buckets.values()), "p50_us": latency.percentile(buckets, 50.0),
                       "p99_us": latency.percentile(buckets, 99.0), "p999_us": latency.percentile(buckets, 99.9),
                       "histogram": latency.log2_histogram(buckets)}
    return out


def probe_line(run):
    """One line per cell: the probe's figures per slice beside fio's for the job in that slice."""
    parts = []
    for role, slice_ in (("reader", report.READER_SLICE), ("antagonist", report.ANTAGONIST_SLICE)):
        pr, st = run["probe"][slice_], run.get(role + "_stats") or {}
        clat = st.get("clat_ns") or {}
        parts.append("%s (%s): probe %d I/Os p50 %s p99 %s; fio %s I/Os p50 %s p99 %s" % (
            slice_, run.get(role) or "idle", pr["count"], report.fmt_latency(_ns(pr["p50_us"])),
            report.fmt_latency(_ns(pr["p99_us"])), st.get("ios", "-"), report.fmt_latency(clat.get("p50")),
            report.fmt_latency(clat.get("p99"))))
    return "probe %s vs %s: %s; attached in %s s, jobs started %s s later" % (
        run.get("reader"), run.get("antagonist"), " | ".join(parts), run["probe"]["attach_s"],
        run["probe"]["jobs_started_s"])


def _ns(us):
    return None if us is None else us * 1000


def smoke_check(results):
    """The smoke run in `make test`: the pieces work end to end (not a performance test)."""
    problems = []
    for run in results["runs"]:
        for role in ("reader", "antagonist"):
            if run.get(role):
                st = run.get(role + "_stats") or {}
                if not st.get("iops") or not (st.get("clat_ns") or {}).get("p99"):
                    problems.append("%s %s: no fio figures (%s)" % (role, run[role], run.get(role + "_error")))
        if run.get("reader") and run.get("antagonist"):
            if "inference.slice" not in run.get("pressure", {}):
                problems.append("no io.pressure for inference.slice")
            if not run.get("vrate"):
                problems.append("no cost.vrate sampled while iocost was on")
        if results["meta"].get("probe"):
            problems += _probe_problems(run, results["meta"])
    cap = results.get("meta", {}).get("disk_capacity")
    if not cap:
        problems.append("the disk was not device-bound (no capacity recorded for %s)" % DEVICE)
    else:
        for run in results["runs"]:
            st = (run.get("antagonist_stats") or {}) if not run.get("reader") else {}
            # QEMU's burst allowance and fio's ramp make a little over the capacity possible, not more.
            if st.get("bw_bytes") and st["bw_bytes"] > 1.15 * cap["bps"]:
                problems.append("%s alone moved %.0f MB/s on a disk of %.0f MB/s: the throttle is not in force"
                                % (run["antagonist"], st["bw_bytes"] / 1e6, cap["bps"] / 1e6))
            if st.get("iops") and st["iops"] > 1.15 * cap["iops"]:
                problems.append("%s alone did %.0f IOPS on a disk of %d IOPS: the throttle is not in force"
                                % (run["antagonist"], st["iops"], cap["iops"]))
    problems += _rate_problems(results)
    st = results["settings"]["roles"]
    if "enable=1" not in (st.get("io.cost.qos") or ""):
        problems.append("the roles did not enable iocost on %s: %s" % (DEVICE, st.get("io.cost.qos")))
    for slice_, weight in (("inference.slice", "default 1000"), ("training.slice", "default 100")):
        if weight not in (st[slice_].get("io.weight") or ""):
            problems.append("%s io.weight is %r" % (slice_, st[slice_].get("io.weight")))
    return problems


def _rate_problems(results):
    """The rate-bound pair's figures exist and are sane: alone, the reader ran at the rate fio was asked for (fio got
    the plan's rate, and kept it within the report's tolerance either way: below, the disk did not carry it; above,
    the cap was not in force); beside the antagonist every figure of the report's rate-bound table is there. The
    isolation target itself is not asked (3 s under TCG)."""
    rated = [run for run in results["runs"] if guest.RATE_SEP in (run.get("reader") or "")]
    if not rated:
        return []
    plan = results.get("rates") or {}
    if not plan.get("readers"):
        return ["rate-bound readers ran without a rate plan"]
    problems, tol, rates = [], report.RATE_TARGET["rate_tolerance"], fio_rates(plan)
    for run in rated:
        name, st = run["reader"], run.get("reader_stats") or {}
        want = rates.get(name)
        if st and st.get("rate") != want:
            problems.append("fio ran %s at %s, the plan says %s" % (name, st.get("rate"), want))
        if not run.get("antagonist"):
            got = report.rate_achieved(st, want)
            if got is None or abs(got - 1) > tol:
                problems.append("%s alone ran at %s of its rate %s: not within %.0f%%" % (
                    name, "no figure" if got is None else "%.1f%%" % (100 * got), want, 100 * tol))
    for cell in report.summarize(results)["cells"]:
        if cell["reader"] in plan["readers"]:
            rate = cell["rate"]
            figures = {"p99": cell["reader_stats"]["p99"]["median"], "p99 / solo": cell["p99_ratio"],
                       "rate achieved": rate["achieved"], "antagonist throughput": rate["antagonist"],
                       "frontier": rate["frontier"], "share of frontier": rate["frontier_share"]}
            missing = [k for k, v in figures.items() if not v or v < 0]
            if missing:
                problems.append("%s vs %s (%s): no %s" % (cell["reader"], cell["antagonist"], cell["config"],
                                                          ", ".join(missing)))
    return problems


def _probe_problems(run, meta):
    """The probe saw the reader's I/O in its slice, as many as fio counted and at most its ramp's more."""
    probe = run.get("probe")
    if not probe:
        return ["%s vs %s: no probe figures" % (run.get("reader"), run.get("antagonist"))]
    margin = meta.get("probe_margin", PROBE_MARGIN)
    if (probe.get("jobs_started_s") or 0) > margin:
        return ["the jobs started %s s after the probe attached: its window (%d s margin) ended before fio's"
                % (probe["jobs_started_s"], margin)]
    if not run.get("reader"):
        return []
    count = probe[report.READER_SLICE]["count"]
    ios = (run.get("reader_stats") or {}).get("ios")
    if not count:
        return ["the probe saw no I/O in %s while %s ran" % (report.READER_SLICE, run["reader"])]
    # The window holds fio's measured seconds and, of its ramp, what the warm-up did not forget (the jobs
    # start after the attach): between fio's count and that plus the whole ramp at fio's rate.
    low, high = ios * (1 - PROBE_TOLERANCE), ios * (1 + meta["ramp"] / float(meta["seconds"])) * (1 + PROBE_TOLERANCE)
    if ios and not low <= count <= high:
        return ["the probe counted %d I/Os in %s, fio %d in its %s s: outside %.0f..%.0f (fio's count and its %s s "
                "ramp, %.0f%% either way)" % (count, report.READER_SLICE, ios, meta["seconds"], low, high,
                                              meta["ramp"], 100 * PROBE_TOLERANCE)]
    return []


def sweep(lab, a, db, readers, antagonists, results):
    """Every pair of a flat-out reader under the calibrated model, once per QoS point; ratios against the main run's
    solos. (The rate-bound readers would multiply its hour by four.)"""
    readers = [r for r in readers if guest.RATE_SEP not in r]
    apply(lab, "roles_calibrated", False, db, a.roles_vars)
    results["sweep"] = {"points": [], "seconds": a.sweep_seconds}
    for label, qos in sweep_points():
        wrote = lab.guest("qos", {"serial": DEVICE, "qos": qos_line(qos)})
        spec = {"serial": DEVICE, "mount": MOUNT, "seconds": a.sweep_seconds, "ramp": a.ramp,
                "cells": cells_for("sweep", False, readers, antagonists)}
        t0 = time.time()
        got = lab.guest("cells", spec)
        results["sweep"]["points"].append({"label": label, "qos": qos, "line": wrote["after"], "cells": got["cells"]})
        print("sweep %s: %s, %d runs in %.0f s" % (label, wrote["after"], len(got["cells"]), time.time() - t0), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_args(ap, "debian12", "bench-iso", "device-bound")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15, help="measured seconds per fio run")
    ap.add_argument("--ramp", type=int, default=2, help="seconds each fio job runs before it measures")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--readers", default=",".join(READERS + RATE_READERS),
                    help="flat-out readers (%s) and rate-bound ones, <reader>@<percent of the disk's capacity>"
                         % ", ".join(READERS))
    ap.add_argument("--antagonists", default=",".join(ANTAGONISTS))
    ap.add_argument("--roles-vars", type=json.loads, default={},
                    help="JSON variables for the roles in the roles configurations (to try other defaults)")
    ap.add_argument("--calibration-db", help="an existing calibration database directory (else calibrate)")
    ap.add_argument("--iolatency-us", type=int, default=1000,
                    help="the inference slice's io.latency target in the io.latency configurations (%s); default "
                         "%%(default)s" % ", ".join(IOLATENCY_CONFIGS))
    ap.add_argument("--cpu-pair", action="store_true",
                    help="the CPU-contention pair only (CPU_PAIR: %s vs %s under %s, %s s runs, guest %s with two "
                         "NUMA nodes; about 10 minutes under TCG); options given on the command line win"
                         % (CPU_PAIR["readers"], CPU_PAIR["antagonists"], CPU_PAIR["configs"], CPU_PAIR["seconds"],
                            CPU_PAIR["guest"]))
    ap.add_argument("--cpuset-vars", type=json.loads, default=CPUSET_VARS,
                    help="JSON: roles_cpuset's inference_cpus and training_cpus; default %s" % json.dumps(CPUSET_VARS))
    ap.add_argument("--smoke", action="store_true",
                    help="one configuration (roles), the pairs of SMOKE_PAIRS (one rate-bound), 3 s runs, one repeat")
    ap.add_argument("--containers", action="store_true",
                    help="the smoke pair (as --smoke) each repeat both as transient units and in containers (reader: "
                         "Docker in inference.slice, antagonist: Podman in training.slice), side by side; --repeats "
                         "(default here %d), --name and --out as given" % CONTAINER_REPEATS)
    ap.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True,
                    help="afterwards, every pair under the calibrated model with each QoS of SWEEP (trade-off plots; "
                         "needs the roles_calibrated configuration)")
    ap.add_argument("--probe", action=argparse.BooleanOptionalAction, default=True,
                    help="record the block layer's latency per slice with the collection's eBPF probe in every cell")
    ap.add_argument("--sweep-seconds", type=int, default=6, help="measured seconds per fio run in the sweep")
    ap.add_argument("--unthrottled-reference", default=UNTHROTTLED,
                    help="results.json of a run on the unthrottled disk, shown as the last table (or none)")
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "bench-isolation"))
    ap.add_argument("--probe-margin", type=int, default=PROBE_MARGIN,
                    help="seconds the probe's window runs past fio's ramp and runtime (the jobs' start-up must fit)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.cpu_pair:
        cpu_pair_defaults(a, sys.argv[1:])
    pairs = None
    if a.containers:
        containers_defaults(a, sys.argv[1:])
    if a.smoke or a.containers:
        repeats = a.repeats
        a.configs, a.repeats, a.seconds, a.ramp, a.probe_margin = "roles", 1, 3, 1, SMOKE_PROBE_MARGIN
        if a.containers:
            a.repeats = repeats
        a.readers = ",".join(dict.fromkeys(pair[0] for pair in SMOKE_PAIRS))
        a.antagonists = ",".join(dict.fromkeys(pair[1] for pair in SMOKE_PAIRS))
        a.sweep, pairs = False, SMOKE_PAIRS
    known = CONFIGS + CPU_CONFIGS + IOLATENCY_CONFIGS
    configs = [c for c in known if c in a.configs.split(",")]
    unknown = sorted(set(a.configs.split(",")) - set(known))
    if unknown:
        raise SystemExit("unknown configuration %s (known: %s)" % (", ".join(unknown), ", ".join(known)))
    refusal = cpuset_refusal(configs, a.cpuset_vars, a.numa)
    if refusal:
        raise SystemExit(refusal)
    if set(configs) & set(IOLATENCY_CONFIGS) and a.kernel == "debian":
        raise SystemExit("%s need io.latency, which Debian's kernels do not build: add --kernel custom (make lab-kernel)"
                         % ", ".join(sorted(set(configs) & set(IOLATENCY_CONFIGS))))
    readers, antagonists = a.readers.split(","), a.antagonists.split(",")
    for n in readers + antagonists:
        if guest.RATE_SEP in n and n in readers:
            rate_reader(n)
        elif n in CPU_ANTAGONISTS and n in readers:
            raise SystemExit("%s is a CPU-bound training job: an antagonist, not a reader" % n)
        elif n not in READERS + ANTAGONISTS + EXPERIMENTS + CPU_ANTAGONISTS:
            raise SystemExit("unknown profile %s" % n)
    if a.disk_capacity == "none" and not set(CALIBRATED) & set(configs):
        rate_plan(readers, antagonists)      # nothing will give the rates a capacity: refused before the boot
    # Absolute: ansible-playbook resolves a relative calibration directory against the playbook's.
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    db = os.path.abspath(a.calibration_db or os.path.join(a.out, "calibration-db"))
    lab = Lab(a.name, a.out)
    lab.files = files_for(readers, antagonists)
    t_start = time.time()
    results = {"meta": {"guest": a.guest, "kernel_choice": a.kernel, "iolatency_us": a.iolatency_us, "seconds": a.seconds, "ramp": a.ramp, "repeats": a.repeats,
                        "device": DEVICE, "roles_vars": a.roles_vars, "probe": a.probe,
                        "probe_margin": a.probe_margin, "numa": a.numa, "tcg_thread": a.tcg_thread,
                        "cpuset_vars": a.cpuset_vars if "roles_cpuset" in configs else None,
                        # the controller's CPUs and load: under TCG the guest's vCPUs are its threads
                        "host": {"cpus": os.cpu_count(), "load_start": [round(x, 2) for x in os.getloadavg()]},
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
               "configs": configs, "config_labels": LABELS, "readers": readers, "antagonists": antagonists,
               "cpu_antagonists": [n for n in antagonists if n in CPU_ANTAGONISTS],
               "runs": [], "settings": {}, "timings": {"apply": {}, "cells": {}}}
    with vm(a):
        lab.write_inventory()
        results["meta"]["disk_capacity"] = capacity = disk_capacity(a.name, DEVICE)
        print("disk %s: %s" % (DEVICE, "capacity %(iops)s IOPS, %(bps)s B/s (QEMU throttling)" % capacity
                               if capacity else "unthrottled"), flush=True)
        prep = lab.guest("prepare", {"serial": DEVICE, "mount": MOUNT, "files": lab.files})
        print("prepared %s on %s (filled %s)" % (MOUNT, prep["device"], prep["made"] or "nothing"), flush=True)
        if set(CALIBRATED) & set(configs):
            took = calibrate(lab, db)
            print("calibration database %s (%s)" % (db, "calibrated in %s s" % took if took else "reused"), flush=True)
            results["calibration"] = {"model": calibrated_model(db), "seconds": took}
            results["calibration"]["versus_capacity"] = versus_capacity(results["calibration"]["model"],
                                                                        capacity)
            print("calibrated model %s" % json.dumps(results["calibration"]), flush=True)
        # Once for the whole run: every configuration and repeat runs each reader at the same rate.
        results["rates"] = rate_plan(readers, antagonists, (results.get("calibration") or {}).get("model"), capacity)
        if results["rates"]:
            print("rate-bound readers from the %s: %s" % (results["rates"]["source"], json.dumps(fio_rates(results["rates"]))),
                  flush=True)
        fresh = not a.reuse
        if a.containers:
            results["meta"]["containers"] = lab.guest("containers", {})
            results["meta"]["runtimes"] = results["meta"]["containers"]["versions"]
            print("containers: image %(image)s (built for %(built)s), %(versions)s" % results["meta"]["containers"],
                  flush=True)
            containers_run(lab, a, results, pairs, fresh, db)
            fresh, a.repeats = False, 0      # the loop below has nothing left to run
        for rep in range(1, a.repeats + 1):
            for i, config in enumerate(configs):
                took = apply(lab, config, fresh, db, a.roles_vars, a.iolatency_us, a.cpuset_vars)
                fresh = False
                spec = {"serial": DEVICE, "mount": MOUNT, "seconds": a.seconds, "ramp": a.ramp,
                        "cells": cells_for(config, i == 0, readers, antagonists, pairs),
                        "rates": fio_rates(results["rates"])}
                if a.probe:
                    spec["probe"] = probe_spec(a.seconds, a.ramp, a.probe_margin)
                t0 = time.time()
                got = lab.guest("cells", spec)
                results["timings"]["apply"].setdefault(config, []).append(took)
                results["timings"]["cells"].setdefault(config, []).append(round(time.time() - t0, 1))
                results["settings"][config] = got["settings"]
                results["meta"].update(kernel=got["kernel"], fio=got["fio"])
                for c in got["cells"]:
                    c.update(config=config, repeat=rep)
                    if "probe_raw" in c:
                        c["probe"] = probe_figures(c.pop("probe_raw"), got.get("bpftrace"))
                    results["runs"].append(c)
                    if a.verbose or a.smoke:
                        print(json.dumps(c)[:400], flush=True)
                        if c.get("probe"):
                            print(probe_line(c), flush=True)
                print("repeat %d %s: applied in %s s, %d runs in %.0f s" % (
                    rep, config, took, len(got["cells"]), time.time() - t0), flush=True)
                # what a run that is stopped early leaves: report.py renders it (results-partial.json OUTDIR)
                with open(os.path.join(a.out, "results-partial.json"), "w") as f:
                    json.dump(results, f)
        if a.sweep and "roles_calibrated" in configs:
            sweep(lab, a, db, readers, antagonists, results)
    results["meta"]["accel"] = accel()
    results["meta"]["host"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    if a.unthrottled_reference not in ("", "none") and not a.smoke and not a.containers:
        with open(a.unthrottled_reference) as f:
            results["unthrottled"] = dict(json.load(f), source=os.path.relpath(a.unthrottled_reference, REPO))
        results["unthrottled"].pop("summary", None)
    results["timings"]["total"] = round(time.time() - t_start, 1)
    if a.containers:
        containers_report(results, a.out)
        return
    written = report.write(results, a.out)
    print(written["markdown"])
    print("wrote %s (total %.0f s)" % (", ".join(written["files"]), results["timings"]["total"]))
    if set(antagonists) & set(CPU_ANTAGONISTS) or "roles_cpuset" in configs:
        problems = cpu_pair_check(results)
        if problems:
            raise SystemExit("the CPU pair did not measure what it says:\n  " + "\n  ".join(problems))
    if a.smoke:
        problems = smoke_check(results)
        if problems:
            raise SystemExit("smoke run failed:\n  " + "\n  ".join(problems))
        print("smoke run: every job produced figures%s; the roles' settings were in force; the rate-bound reader "
              "kept its rate alone" % (" and the probe counted the reader's I/O as fio did" if a.probe else ""))


if __name__ == "__main__":
    main()
