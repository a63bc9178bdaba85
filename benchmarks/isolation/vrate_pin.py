# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lab check of the alerts IoIsolationIocostVrateAtMin / AtMax (prometheus/alerts.yml): what the io_metrics
exporter reports for iocost's vrate under each cost model on the device-bound lab disk.

The alerts say: vrate held at io.cost.qos min (max) for 10 minutes while the disk does I/O means the
model overstates (understates) the disk. On the device-bound lab disk the kernel's class for it (ssd_dfl)
promises about twice what QEMU lets the disk do, and the calibration recovers the real capacity, so the
two models are a known wrong one and a known right one on the same disk.

The first run showed neither alert firing on those: with the roles' QoS the latency target, not the model,
sets vrate. The gross configurations are the errors the alerts are for, applied through the roles (an explicit
io_baseline_iocost_models entry for lab-nvme-b, which wins over the calibration database, and
io_baseline_iocost_qos): `model_x20`, the calibrated model times 20 (at the QoS min of 10% it still allows
twice the disk, so nothing is throttled while the latency target is missed), and `model_div4_max150`, a quarter
of it with the QoS max lowered to 150% (at max it allows 37.5% of the disk, so the tenants stay throttled and
iocost raises vrate to max - as long as the latency target is met). `model_div4_max150_nolat` is that with rpct
and wpct 0 (no latency counts as missed, as in the kernel's own QoS), the only difference: on the lab the roles'
latency target held vrate at 12-62% under model_div4_max150 (results/2026-12-04-debian12-tcg-vrate-pin-gross-*),
and without it vrate sat at max (...-gross-nolat-*).

Boots (or reuses) a device-bound lab VM (bench.py's, labvm.py's options), calibrates lab-nvme-a once
(bench.py's calibrate(), or --calibration-db; the gross configurations only need the calibrated model, which
--model-from takes from a recorded results.json instead), prepares lab-nvme-b as bench.py does, installs the
io_metrics role (io_metrics.yml, no latency histogram), and for each configuration (bench.py's apply(): `roles`
with the kernel's class, `roles_calibrated`, the gross ones, `iocost_default`; --configs picks some) and each
antagonist runs guest.py's `cells` (the benchmark's reader in inference.slice, the antagonist in training.slice,
--seconds long) while the controller starts aiinfra-io-metrics.service every --interval seconds and collects
the textfile it writes. The samples are the exporter's metrics, parsed from the Prometheus text format; guest.py's own twice-a-second reading of
cost.vrate during the cell is kept beside them as a cross-check of the exporter.

Each series is judged as the rules judge theirs (the measured window stands in for their [10m]; their
`for: 20m` cannot be shown in minutes): AtMin where max(vrate) <= qos min * 1.01, AtMax where
min(vrate) >= qos max * 0.99, both only while the slices' reads + writes on the disk increase; and per sample,
the fraction of busy samples at each bound.

Writes results.json and results.md under --out; --record copies them to
results/<date>-<guest>-<accel>-vrate-pin-results.{json,md} (with --record-tag T, ...-vrate-pin-T-results).

  .venv/bin/python benchmarks/isolation/vrate_pin.py            (or: make bench-vrate-pin)
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import bench  # noqa: E402  pylint: disable=wrong-import-position
import guest  # noqa: E402  pylint: disable=wrong-import-position
from labvm import LAB, accel, add_vm_args, disk_capacity, module_utils, vm  # noqa: E402  pylint: disable=wrong-import-position

# Gross model errors: the factor on each of the calibrated model's coefficients and the change to the roles' QoS.
GROSS = {"model_x20": (20, {}), "model_div4_max150": (0.25, {"max": 150}),
         # the same without the latency targets (rpct/wpct 0: no latency counts as missed, as in the kernel's own QoS)
         "model_div4_max150_nolat": (0.25, {"max": 150, "rpct": 0, "wpct": 0})}
# iocost_default last, as in bench.py: with the kernel's QoS iocost may step its class, which a later user QoS keeps.
CONFIGS = ("roles", "roles_calibrated") + tuple(GROSS) + ("iocost_default",)
# Configurations whose model is the calibration database's (the others need no calibration, or only its model).
NEEDS_DB = ("roles_calibrated",)
READER = "randread4k"
ANTAGONISTS = ("randread64", "seqwrite1m")
IO_METRICS_PLAYBOOK = os.path.join(HERE, "io_metrics.yml")
ROLE = os.path.join(REPO, "roles", "io_metrics")
# The rules' tolerances (prometheus/alerts.yml): vrate within 1 % of a bound counts as at the bound.
AT_MIN, AT_MAX = 1.01, 0.99
PREFIX = module_utils("_observability.io_metrics").PREFIX
VRATE, QOS_MIN, QOS_MAX = PREFIX + "iocost_vrate_ratio", PREFIX + "iocost_qos_vrate_min_ratio", PREFIX + "iocost_qos_vrate_max_ratio"
IO_COUNTERS = (PREFIX + "slice_io_reads_total", PREFIX + "slice_io_writes_total")
COST_COEFS = module_utils("_host.codecs").COST_COEFS

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_exposition(text):
    """Samples of a Prometheus text exposition: [(name, {label: value}, float)]. Comments and blank lines are
    skipped; a line that is not a sample is an error (the exporter's file is machine-written)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("line %d is not a sample: %r" % (n, line))
        name, label_text, value = m.groups()
        labels, pos = {}, 0
        while label_text and pos < len(label_text):
            lm = _LABEL.match(label_text, pos)
            if not lm:
                raise ValueError("line %d: bad labels %r" % (n, label_text))
            labels[lm.group(1)] = re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], lm.group(2))
            pos = lm.end()
        out.append((name, labels, float(value)))
    return out


def disk_point(samples, majmin):
    """What the alerts read for one disk from one exporter run: vrate and the QoS bounds (ratios, None when
    absent) and the slices' reads + writes on the disk (the rules' sum over slices)."""
    point = {"vrate": None, "min": None, "max": None, "ios": None}
    keys = {VRATE: "vrate", QOS_MIN: "min", QOS_MAX: "max"}
    for name, labels, value in samples:
        if labels.get("majmin") != majmin:
            continue
        if name in keys:
            point[keys[name]] = value
        elif name in IO_COUNTERS:
            point["ios"] = (point["ios"] or 0) + value
    return point


def evaluate(points):
    """The two alert conditions over a series of points ({"t", "vrate", "min", "max", "ios"}, in time order).

    busy: the slices' reads + writes grew since the previous point (a counter that went down was reset, and
    its new value is the growth, as in Prometheus' rate()). The fractions count busy points at a bound, the
    longest stretches consecutive ones (points, and seconds from the first to the last). The `*_rule` verdicts are
    the rules' expressions with the load's span (first to last busy point, idle ones between included, as
    max_over_time sees them) as their window: max (min) of vrate at or below min * 1.01 (at or above max * 0.99).
    The points before the load started are left out: in a rule's steady [10m] window every point is busy."""
    pts = [p for p in points if p.get("vrate") is not None and p.get("ios") is not None]
    flags, growth = [False], 0.0
    for prev, cur in zip(pts, pts[1:]):
        inc = cur["ios"] - prev["ios"] if cur["ios"] >= prev["ios"] else cur["ios"]
        growth += inc
        flags.append(inc > 0)
    busy = [p for p, b in zip(pts, flags) if b]
    res = {"points": len(pts), "busy": len(busy), "io_growth": growth}
    if not busy:
        return dict(res, vrate=None, at_min_fraction=None, at_max_fraction=None, at_min_longest=None,
                    at_max_longest=None, at_min_rule=False, at_max_rule=False)
    first, last = flags.index(True), len(flags) - 1 - flags[::-1].index(True)
    window = [p["vrate"] for p in pts[first:last + 1]]
    v = [p["vrate"] for p in busy]
    lo, hi = pts[-1]["min"], pts[-1]["max"]
    at_min = [b and p["min"] is not None and p["vrate"] <= p["min"] * AT_MIN for p, b in zip(pts, flags)]
    at_max = [b and p["max"] is not None and p["vrate"] >= p["max"] * AT_MAX for p, b in zip(pts, flags)]
    return dict(res, vrate={"mean": sum(v) / len(v), "min": min(v), "max": max(v)},
                at_min_fraction=sum(at_min) / len(busy), at_max_fraction=sum(at_max) / len(busy),
                at_min_longest=_longest(pts, at_min), at_max_longest=_longest(pts, at_max),
                at_min_rule=bool(lo is not None and max(window) <= lo * AT_MIN),
                at_max_rule=bool(hi is not None and min(window) >= hi * AT_MAX))


def _longest(pts, flags):
    """The longest run of consecutive flagged points: {"points", "seconds"} (first to last of them)."""
    best, start = {"points": 0, "seconds": 0.0}, None
    for i, flag in enumerate(flags + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if i - start > best["points"]:
                best = {"points": i - start, "seconds": round(pts[i - 1]["t"] - pts[start]["t"], 1)}
            start = None
    return best


def model_rate(model, vrate, profiles):
    """The I/Os per second iocost allows at this vrate when every job is a 4k random read (rrandiops * vrate), None
    for other loads: what the model says the disk does, beside what it did."""
    for profile in profiles:
        argv = guest.PROFILES[profile][1]
        if "--rw=randread" not in argv or "--bs=4k" not in argv:
            return None
    return float(model["rrandiops"]) * vrate if model.get("rrandiops") else None


def gross_vars(config, model, role_qos):
    """The roles' variables for a gross configuration: lab-nvme-b's explicit model, the calibrated `model` with every
    coefficient times the factor (whole numbers, as io.cost.model holds them), and the roles' QoS `role_qos` with
    the configuration's change."""
    factor, qos_change = GROSS[config]
    missing = [k for k in COST_COEFS if not model.get(k)]
    if missing:
        raise SystemExit("%s: the calibrated model lacks %s" % (config, ", ".join(missing)))
    scaled = {k: max(1, int(round(float(model[k]) * factor))) for k in COST_COEFS}
    return {"io_baseline_iocost_models": {bench.DEVICE: scaled}, "io_baseline_iocost_qos": dict(role_qos, **qos_change)}


def apply(lab, config, db, model):
    """Put the host into `config` through the collection (bench.py's apply(); a gross configuration is its `roles`
    with gross_vars()); the seconds it took."""
    if config in GROSS:
        return bench.apply(lab, "roles", False, db, gross_vars(config, model, bench.role_qos()))
    return bench.apply(lab, config, False, db)


def recorded_model(path):
    """The calibrated model a recorded results.json (this benchmark's or bench.py's) holds."""
    with open(path) as f:
        results = json.load(f)
    model = (results.get("calibration") or {}).get("model")
    if not model:
        raise SystemExit("%s holds no calibration model" % path)
    return model


def role_facts():
    """Where the io_metrics role puts the exporter's output and what its service is called: read from the role."""
    import yaml  # the controller's virtualenv has it (ansible-core)
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        role_vars = yaml.safe_load(f)
    return {"unit": role_vars["__io_metrics_unit"] + ".service",
            "textfile": defaults["io_metrics_textfile_dir"].rstrip("/") + "/" + role_vars["__io_metrics_output"]}


def exporter_run(name, facts):
    """Run the exporter once in the guest; (guest time after the run, the textfile's text)."""
    cmd = "systemctl start %s && date +%%s.%%N && cat %s" % (facts["unit"], facts["textfile"])
    res = subprocess.run(LAB + ["ssh", name, "--", cmd], capture_output=True, text=True, check=False, timeout=120)
    if res.returncode != 0:
        raise RuntimeError("exporter run failed (rc %d): %s" % (res.returncode, res.stderr.strip()[-1000:]))
    stamp, text = res.stdout.split("\n", 1)
    return float(stamp), text


def measure(lab, antagonist, a, facts):
    """guest.py's cell (reader + antagonist) in a thread; the exporter sampled every a.interval s until it ends."""
    spec = {"serial": bench.DEVICE, "mount": bench.MOUNT, "seconds": a.seconds, "ramp": a.ramp,
            "cells": [{"reader": READER, "antagonist": antagonist}]}
    got = {}

    def cell():
        try:
            got["cells"] = lab.guest("cells", spec)
        except BaseException as e:  # pylint: disable=broad-exception-caught  # SystemExit from guest_script
            got["error"] = str(e)
    worker = threading.Thread(target=cell)
    worker.start()
    texts, errors = [], []
    while worker.is_alive():
        t0 = time.time()
        try:
            texts.append(exporter_run(lab.name, facts))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            errors.append(str(e))
        worker.join(max(0.0, a.interval - (time.time() - t0)))
    if "error" in got:
        raise SystemExit("guest.py cells failed: %s" % got["error"])
    return got["cells"], texts, errors


def table(results):
    lines = ["| configuration | antagonist | model in force (ctrl: rrandiops, rbps) | QoS | exporter runs (busy) "
             "| vrate mean / min / max | at min (longest) | at max (longest) | AtMin rule | AtMax rule "
             "| guest.py vrate mean / min / max | reader IOPS (MB/s) | antagonist IOPS (MB/s) | rrandiops x vrate mean |",
             "|" + "---|" * 14]
    for r in results["runs"]:
        ev, gv = r["evaluation"], r.get("guest_vrate") or {}
        model = dict(kv.split("=", 1) for kv in (r["settings"].get("io.cost.model") or "").split()[1:])
        qos = dict(kv.split("=", 1) for kv in (r["settings"].get("io.cost.qos") or "").split()[1:])
        vr = ev["vrate"]
        allowed = model_rate(model, vr["mean"], (READER, r["antagonist"])) if vr else None
        cells = [r["config"], r["antagonist"], "%s: %s, %s" % (model.get("ctrl"), model.get("rrandiops"), model.get("rbps")),
                 "%s rpct=%s rlat=%s min=%s max=%s" % (qos.get("ctrl"), qos.get("rpct"), qos.get("rlat"), qos.get("min"),
                                                       qos.get("max")),
                 "%d (%d)" % (ev["points"], ev["busy"])]
        if vr:
            cells += ["%.1f%% / %.1f%% / %.1f%%" % (100 * vr["mean"], 100 * vr["min"], 100 * vr["max"]),
                      "%.0f%% (%d runs, %.0f s)" % (100 * ev["at_min_fraction"], ev["at_min_longest"]["points"],
                                                    ev["at_min_longest"]["seconds"]),
                      "%.0f%% (%d runs, %.0f s)" % (100 * ev["at_max_fraction"], ev["at_max_longest"]["points"],
                                                    ev["at_max_longest"]["seconds"])]
        else:
            cells += ["-", "-", "-"]
        cells += ["fires" if ev["at_min_rule"] else "no", "fires" if ev["at_max_rule"] else "no",
                  "%.1f%% / %.1f%% / %.1f%%" % (gv["mean"], gv["min"], gv["max"]) if gv else "-",
                  _iops(r, "reader"), _iops(r, "antagonist"), "%.0f" % allowed if allowed else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _iops(run, role):
    st = run.get(role + "_stats") or {}
    return "%.0f (%.1f MB/s)" % (st["iops"], st.get("bw_bytes", 0) / 1e6) if st.get("iops") else "-"


def markdown(results):
    m = results["meta"]
    cal = (results.get("calibration") or {}).get("model")
    return "\n".join([
        "# iocost vrate against the QoS bounds, from the io_metrics exporter (%s, %s, kernel %s)" % (
            m["guest"], m.get("accel"), m.get("kernel")), "",
        "%s; disk %s device-bound at %s; %s in inference.slice against each antagonist in training.slice, "
        "%d s each (+%d s ramp); aiinfra-io-metrics.service run every %s s, its textfile collected." % (
            m["date"], m["device"], m.get("disk_capacity"), m["reader"], m["seconds"], m["ramp"], m["interval"]),
        "QEMU processes on the machine before the boot: %s (load average %s)." % (
            m.get("qemu_processes_before"), ", ".join("%.1f" % x for x in m.get("loadavg_before") or ())), "",
        "Calibrated model (lab-nvme-a): %s." % json.dumps(cal), ""] + _gross_lines(results) + [
        "AtMin / AtMax rule: the alert's expression with the load's span as its [10m] (their `for: 20m` is not "
        "shown). at min / at max: busy exporter runs (the slices' reads + writes grew) within 1% of the bound; longest: "
        "consecutive ones. guest.py vrate: cost.vrate read twice a second in the guest during the cell (%), a "
        "cross-check. rrandiops x vrate mean: the 4k random reads per second iocost allowed (both jobs are 4k random "
        "reads), beside the reader's and the antagonist's IOPS (and MB/s) from fio.", "",
        table(results), ""])


def _gross_lines(results):
    """What the gross configurations applied through the roles, and the model they scaled."""
    gross = results["meta"].get("gross") or {}
    if not gross:
        return []
    rec = (results.get("calibration") or {}).get("recorded")
    lines = ["The gross configurations scale %s, through the roles (io_baseline_iocost_models for %s, "
             "io_baseline_iocost_qos):" % ("the model recorded in %s (%s)" % (rec["from"], json.dumps(rec["model"]))
                                           if rec else "the calibrated model", results["meta"]["device"]), ""]
    for config, g in gross.items():
        lines.append("- %s: x%s, %s; QoS %s" % (config, g["factor"], json.dumps(g["io_baseline_iocost_models"]),
                                                json.dumps(g["io_baseline_iocost_qos"])))
    return lines + [""]


def _qemu_count():
    res = subprocess.run(["pgrep", "-c", "qemu-system"], capture_output=True, text=True, check=False)
    return int(res.stdout.strip() or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_args(ap, "debian12", "vrate-pin", "device-bound")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--antagonists", default=",".join(ANTAGONISTS))
    ap.add_argument("--seconds", type=int, default=100, help="measured seconds per cell")
    ap.add_argument("--ramp", type=int, default=2)
    ap.add_argument("--interval", type=float, default=5, help="seconds between two exporter runs")
    ap.add_argument("--calibration-db", help="an existing calibration database directory (else calibrate)")
    ap.add_argument("--model-from", help="a recorded results.json whose calibration model the gross configurations "
                                         "scale (else the calibration database's; roles_calibrated still needs that)")
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "vrate-pin"))
    ap.add_argument("--record", action="store_true",
                    help="also copy results.{json,md} to benchmarks/isolation/results/<date>-<guest>-<accel>-vrate-pin-*")
    ap.add_argument("--record-tag", help="--record as <date>-<guest>-<accel>-vrate-pin-<tag>-results.{json,md}")
    ap.add_argument("--from-json", help="only write results.md (and --record) again from this results.json")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)
        for run in results["runs"]:
            run["evaluation"] = evaluate(run["points"])
        return write(results, os.path.abspath(a.out), a.record, a.record_tag)
    configs = [c for c in CONFIGS if c in a.configs.split(",")]
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    db = os.path.abspath(a.calibration_db or os.path.join(a.out, "calibration-db"))
    facts = role_facts()
    lab = bench.Lab(a.name, a.out)
    results = {"meta": {"guest": a.guest, "device": bench.DEVICE, "reader": READER, "seconds": a.seconds,
                        "ramp": a.ramp, "interval": a.interval, "exporter": facts,
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        # the lab shares this machine's cores: other VMs slow the guest's CPU, not its throttled disk
                        "qemu_processes_before": _qemu_count(), "loadavg_before": os.getloadavg()}, "runs": []}
    with vm(a):
        lab.write_inventory()
        results["meta"]["disk_capacity"] = disk_capacity(a.name, bench.DEVICE)
        gross = [c for c in configs if c in GROSS]
        need_db = set(configs) & set(NEEDS_DB) or gross and not a.model_from
        took = bench.calibrate(lab, db) if need_db else None
        results["calibration"] = {"model": bench.calibrated_model(db), "seconds": took,
                                  "from": os.path.relpath(db, REPO)}
        if a.model_from:
            # what the gross configurations scale: a recorded run's calibration of the same lab disk
            results["calibration"]["recorded"] = {"model": recorded_model(a.model_from),
                                                  "from": os.path.relpath(os.path.abspath(a.model_from), REPO)}
        model = (results["calibration"].get("recorded") or results["calibration"])["model"]
        results["meta"]["gross"] = {c: dict(gross_vars(c, model, bench.role_qos()), factor=GROSS[c][0]) for c in gross}
        print("calibration: %s" % json.dumps(results["calibration"]), flush=True)
        lab.guest("prepare", {"serial": bench.DEVICE, "mount": bench.MOUNT, "files": bench.FILES})
        installed = False
        for config in configs:
            took = apply(lab, config, db, model)
            if not installed:
                lab.playbook(IO_METRICS_PLAYBOOK)
                installed = True
            for antagonist in a.antagonists.split(","):
                got, texts, errors = measure(lab, antagonist, a, facts)
                c = got["cells"][0]
                majmin = (got["settings"].get("io.cost.qos") or "").split(" ", 1)[0]
                points = [dict(disk_point(parse_exposition(text), majmin), t=t) for t, text in texts]
                run = {"config": config, "antagonist": antagonist, "apply_seconds": took, "settings": got["settings"],
                       "majmin": majmin, "points": points, "exporter_errors": errors,
                       "evaluation": evaluate(points), "guest_vrate": c.get("vrate"),
                       "reader_stats": c.get("reader_stats"), "antagonist_stats": c.get("antagonist_stats"),
                       "io": c.get("io")}
                for role in ("reader_stats", "antagonist_stats"):
                    (run[role] or {}).pop("percentiles", None)
                results["runs"].append(run)
                results["meta"]["kernel"] = got["kernel"]
                print("%s + %s: %s" % (config, antagonist, json.dumps(run["evaluation"])), flush=True)
    results["meta"]["accel"] = accel()
    return write(results, a.out, a.record, a.record_tag)


def write(results, out, record, tag=None):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    if record:
        stem = os.path.join(HERE, "results", "%s-%s-%s-vrate-pin-%sresults" % (
            results["meta"]["date"][:10], results["meta"]["guest"], results["meta"]["accel"], tag + "-" if tag else ""))
        for ext in ("json", "md"):
            shutil.copy(os.path.join(out, "results." + ext), stem + "." + ext)
        print("recorded %s.{json,md}" % os.path.relpath(stem, REPO))


if __name__ == "__main__":
    main()
