# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the collection's iocost_calibrate against the reference method on the lab's NVMe disk.

Boots (or reuses) a lab VM, then for each repeat runs the reference method (reference.py in the
guest: six fixed fio runs of --runtime seconds) and the module (ours.yml through ansible-playbook),
interleaved so that drift of the host affects both alike. Both measure the blank lab-nvme-b raw.
Prints, and writes as JSON and Markdown under --out: per coefficient the median and the repeat
spread ((max - min) / median) of each method, and the wall time per calibration (the module's
includes Ansible's own overhead; the reference's includes only its SSH session).

  .venv/bin/python benchmarks/calibration/compare.py --repeats 3 --runtime 120   (or: make bench-calibration)
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from labvm import add_vm_args, ansible_playbook, guest_script, sh, vm, write_inventory  # noqa: E402  pylint: disable=wrong-import-position

COEFS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")


def reference(name, runtime):
    t0 = time.time()
    out = guest_script(name, os.path.join(HERE, "reference.py"), ["lab-nvme-b", str(runtime)])
    wall = time.time() - t0
    return {"wall": round(wall, 1), "values": out["values"], "seconds": out["seconds"]}


def ours(inventory, out_json, stop_rule):
    argv, env = ansible_playbook([inventory], os.path.join(HERE, "ours.yml"),
                                 ["out=%s" % out_json] + ([json.dumps({"stop_rule": stop_rule})] if stop_rule else []))
    t0 = time.time()
    sh(argv, env=env, capture_output=True)
    wall = time.time() - t0
    with open(out_json) as f:
        result = json.load(f)
    return {"wall": round(wall, 1), "values": result["model"], "module_seconds": result["seconds"],
            "stopped": dict((m["name"], [m["stopped"], m["seconds"]]) for m in result["measurements"]),
            "passes": dict((m["name"], [p["value"] for p in m.get("passes") or []]) for m in result["measurements"]),
            "between_passes": dict((m["name"], (m.get("spread") or {}).get("between_passes"))
                                   for m in result["measurements"]),
            "spread_within_run": result["spread"], "qos": result["qos"]}


def summary(runs):
    out = {}
    for coef in COEFS:
        values = [r["values"][coef] for r in runs]
        med = statistics.median(values)
        out[coef] = {"median": med, "spread": (max(values) - min(values)) / med if med else None, "values": values}
    out["wall"] = {"mean": round(statistics.mean(r["wall"] for r in runs), 1), "values": [r["wall"] for r in runs]}
    return out


def markdown(res):
    ref, our = res["summary"]["reference"], res["summary"]["ours"]
    lines = ["| coefficient | reference median | reference spread | ours median | ours spread | ours / reference |",
             "|---|---|---|---|---|---|"]
    for coef in COEFS:
        r, o = ref[coef], our[coef]
        row = (coef, r["median"], 100 * r["spread"], o["median"], 100 * o["spread"], o["median"] / r["median"])
        lines.append("| %s | %d | %.1f%% | %d | %.1f%% | %.2f |" % row)
    lines.append("| wall time per calibration | %.0f s | | %.0f s | | %.1fx faster |"
                 % (ref["wall"]["mean"], our["wall"]["mean"], ref["wall"]["mean"] / our["wall"]["mean"]))
    passes = [(i + 1, coef, run["passes"][coef], run["between_passes"][coef])
              for i, run in enumerate(res["runs"]["ours"])
              for coef in COEFS if len((run.get("passes") or {}).get(coef) or []) > 1]
    if passes:
        most = max(len(values) for _i, _c, values, _b in passes)
        lines += ["", "The module's passes (between: its `between_passes`, the passes' relative standard error):", "",
                  "| run | coefficient | %s | between |" % " | ".join("pass %d" % (k + 1) for k in range(most)),
                  "|---|---|%s---|" % ("---|" * most)]
        for i, coef, values, between in passes:
            cells = [str(v) for v in values] + [""] * (most - len(values))
            shown = "-" if between is None else "%.1f%%" % (100 * between)
            lines.append("| %d | %s | %s | %s |" % (i, coef, " | ".join(cells), shown))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    add_vm_args(ap, "debian13", "bench-cal")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=120, help="seconds per reference fio run")
    ap.add_argument("--stop-rule", type=json.loads, default=None, help="JSON stop_rule for the module")
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "bench-calibration"))
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)      # the playbook's copy to localhost needs an absolute path
    os.makedirs(a.out, exist_ok=True)
    with vm(a):
        inventory = os.path.join(a.out, "inventory.yml")
        write_inventory(a.name, inventory)
        res = {"guest": a.guest, "runtime": a.runtime, "repeats": a.repeats, "runs": {"reference": [], "ours": []}}
        for i in range(a.repeats):
            res["runs"]["reference"].append(reference(a.name, a.runtime))
            print("reference run %d: %s" % (i + 1, res["runs"]["reference"][-1]), flush=True)
            res["runs"]["ours"].append(ours(inventory, os.path.join(a.out, "ours-%d.json" % (i + 1)), a.stop_rule))
            print("module run %d: %s" % (i + 1, res["runs"]["ours"][-1]), flush=True)
        res["summary"] = {k: summary(v) for k, v in res["runs"].items()}
        res["table"] = markdown(res)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(a.out, "results.md"), "w") as f:
            f.write(res["table"] + "\n")
        print(res["table"])


if __name__ == "__main__":
    main()
