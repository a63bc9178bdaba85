# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what a rollout and a drift-check re-run cost, hand-written playbooks against site.yml.

The same co-location settings (settings.yml) are rolled out on one lab VM three ways:

  handwritten  handwritten.yml: ansible.builtin + ansible.posix, about a task per file or setting, the
               disks discovered (lsblk) and looped over
  lean         lean.yml: ansible.builtin + ansible.posix, one task per setting, no loop over facts
  site         playbooks/site.yml (io_baseline + inference + training) with site_vars.yml, the
               host in both groups

Each method gets a converge and two no-op re-runs, one block per method, the blocks' order turning
(round 1: handwritten, lean, site; round 2: site, lean, handwritten, ...) so that machine noise hits
all alike. Right before every no-op re-run (of any method) `ansible -m ping` against the same host is
timed: the floor of one module execution on this machine at that moment, which the site.yml no-op is
judged against (site.yml no-op / the ping just before it, and the ratio of the medians).

Before every converge the VM is put back into the unconfigured state: playbooks/purge.yml for the
collection's files, then guest.py's reset for the hand-written playbook's files and the live
values (block queues, sysctls, iocost, slices) - outside the timed runs, and checked against the
state read right after boot. A warm-up converge of each method first (reported as "cold", not in the
ratios) lets the guest's code cache compile each method's modules once. After every converge and
no-op the kernel's values are read back: both methods must leave exactly the same ones.

Timed: the whole ansible-playbook run (wall clock). Counted by the callback plugin
callback_plugins/module_count.py: remote module executions per host per run, reboots separately,
and the modules the action plugins sent. The compared runs do not reboot: the NVMe poll_queues
setting waits for the next boot with both methods. One more site.yml converge at the end (--reboot,
on by default; counted, not timed against anything) lets io_baseline reboot for the queues
(io_isolation_reboot_ok) so that the executions of a run with a reboot are counted too.

Writes <results>/<date>-<guest>-<accel>[-<label>].json and .md and prints the table; the playbook
logs go to <out>/ansible.log.

  .venv/bin/python benchmarks/rollout/bench.py [--rounds 2] [--label x]   (or: make bench-rollout)
"""

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.dirname(HERE)]
from labvm import accel, add_vm_args, ansible_playbook, guest_script, vm, write_inventory  # noqa: E402  pylint: disable=wrong-import-position

METHODS = ("handwritten", "lean", "site")
HANDWRITTEN = ("handwritten", "lean")
LABELS = {"handwritten": "hand-written", "lean": "lean hand-written", "site": "site.yml"}
RUNS = ("converge", "noop1", "noop2")
RUN_LABELS = {"cold": "converge (cold, warm-up)", "converge": "converge", "noop1": "no-op re-run 1",
              "noop2": "no-op re-run 2", "reboot": "converge with the reboot"}
SETTINGS = os.path.join(HERE, "settings.yml")
PLAYBOOKS = {"handwritten": (os.path.join(HERE, "handwritten.yml"), []),
             "lean": (os.path.join(HERE, "lean.yml"), []),
             "site": (os.path.join(REPO, "playbooks", "site.yml"),
                      ["@" + SETTINGS, "@" + os.path.join(HERE, "site_vars.yml")])}
PURGE = os.path.join(REPO, "playbooks", "purge.yml")
# What the hand-written playbook leaves on the host (its undo removes them; the slice directories whole).
HANDWRITTEN_FILES = ("/etc/udev/rules.d/91-rollout-iocost.rules", "/etc/udev/rules.d/91-rollout-queue.rules",
                     "/etc/sysctl.d/90-rollout.conf", "/etc/modprobe.d/rollout-nvme.conf")
# The tree whose change under a running benchmark makes its site.yml figures a mix of two versions.
WATCHED = ("playbooks", "roles", "plugins")
# Issue 22's acceptance: site.yml faster than handwritten.yml by these factors, and this many module executions per
# host; issue 40's: a site.yml no-op at most this many times `ansible -m ping` measured in the same run.
TARGETS = {"converge": 3.0, "noop": 5.0, "executions": 2, "executions_reboot": 3, "noop_vs_ping": 2.5}
# The site.yml converge that may reboot (the NVMe queue setting needs one).
REBOOT_EXTRA = ["io_isolation_reboot_ok=true"]


def load_settings():
    with open(SETTINGS) as f:
        return yaml.safe_load(f)


def guest_spec(settings):
    return {"disks": settings["rollout_disks"], "sysctls": sorted(settings["rollout_sysctls"]),
            "slices": [settings["rollout_inference"]["slice"], settings["rollout_training"]["slice"]]}


def handwritten_files(settings):
    out = list(HANDWRITTEN_FILES)
    for s in (settings["rollout_inference"]["slice"], settings["rollout_training"]["slice"]):
        out += ["/etc/systemd/system/" + s, "/etc/systemd/system/%s.d" % s]
    return out


def kernel_part(state):
    """The values the settings decide (not which files hold them: those differ by method)."""
    return {k: v for k, v in state.items() if k != "persisted"}


def configured(state):
    """What of either method a host holds (a VM reused with --reuse must hold none of it)."""
    out = ["%s iocost" % serial for serial, d in state["disks"].items() if d["iocost_qos"] != "off"]
    out += ["%s exists" % unit for unit, files in state["slices"].items() if files is not None]
    return out + [p for p in state["persisted"] if "rollout" in p or "aiinfra" in p]


def settings_problems(state, settings):
    """What in a converged host's state differs from settings.yml (beyond the two methods agreeing)."""
    problems = []
    model = settings["rollout_iocost_model"]
    for serial in settings["rollout_disks"]:
        d = state["disks"].get(serial)
        if d is None:
            problems.append("disk %s not found" % serial)
            continue
        if "enable=1" not in (d["iocost_qos"] or "") or "rbps=%d " % model["rbps"] not in (d["iocost_model"] or ""):
            problems.append("%s iocost: %s / %s" % (serial, d["iocost_model"], d["iocost_qos"]))
        if "[%s]" % settings["rollout_scheduler"] not in (d["scheduler"] or ""):
            problems.append("%s scheduler: %s" % (serial, d["scheduler"]))
        if d["read_ahead_kb"] != str(settings["rollout_read_ahead_kb"]):
            problems.append("%s read_ahead_kb: %s" % (serial, d["read_ahead_kb"]))
    for name, value in settings["rollout_sysctls"].items():
        if state["sysctls"].get(name) != str(value):
            problems.append("%s: %s" % (name, state["sysctls"].get(name)))
    if state["nvme_options"].get("poll_queues") != str(settings["rollout_nvme_poll_queues"]):
        problems.append("nvme options: %s" % state["nvme_options"])
    inf, trn = settings["rollout_inference"], settings["rollout_training"]
    want = {inf["slice"]: {"io.weight": "default %d" % inf["io_weight"], "memory.low": str(inf["memory_low"]),
                           "memory.min": str(inf["memory_min"]), "cpu.weight": str(inf["cpu_weight"])},
            trn["slice"]: {"io.weight": "default %d" % trn["io_weight"], "memory.high": str(trn["memory_high"]),
                           "cpu.weight": str(trn["cpu_weight"])}}
    for unit, files in want.items():
        got = state["slices"].get(unit) or {}
        for f, v in files.items():
            if got.get(f) != v:
                problems.append("%s %s: %s" % (unit, f, got.get(f)))
    return problems


def diff(a, b, path=""):
    """Where two JSON-like values differ, as 'path: a != b' lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k), b.get(k), "%s/%s" % (path, k))
        return out
    return [] if a == b else ["%s: %r != %r" % (path or "/", a, b)]


def tree_fingerprint():
    """sha256 over the files of WATCHED (site.yml, purge.yml, the roles and the modules they send)."""
    h = hashlib.sha256()
    for top in WATCHED:
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".pyc"):
                    continue
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, REPO).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def git_head():
    res = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return res.stdout.strip() or None


class Lab:
    """The VM, its inventory (the host in both groups) and the playbook runs."""

    def __init__(self, name, out):
        self.name, self.out = name, out
        self.inventory = [os.path.join(out, "inventory.yml"), os.path.join(out, "groups.yml")]
        self.log = os.path.join(out, "ansible.log")

    def write_inventory(self):
        write_inventory(self.name, self.inventory[0])
        with open(self.inventory[1], "w") as f:
            f.write("all:\n  children:\n    inference:\n      hosts:\n        %(n)s:\n"
                    "    training:\n      hosts:\n        %(n)s:\n" % {"n": self.name})

    def guest(self, action, spec):
        return guest_script(self.name, os.path.join(HERE, "guest.py"), [action, spec])

    def timed(self, argv, env, what):
        """Run an ansible command, its output appended to the log; its seconds (a failure stops the benchmark)."""
        t0 = time.monotonic()
        res = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        took = time.monotonic() - t0
        with open(self.log, "a") as f:
            f.write("$ %s\n%s\n%s\n" % (" ".join(argv), res.stdout, res.stderr))
        if res.returncode != 0:
            raise SystemExit("%s failed (rc %d); see %s:\n%s" % (what, res.returncode, self.log, res.stdout[-3000:]))
        return took

    def playbook(self, path, extra, count_file=None):
        """Run a playbook; (seconds, counts from the callback or None)."""
        argv, env = ansible_playbook(self.inventory, path, extra)
        installed = os.path.join(REPO, ".cache", "installed")
        env["ANSIBLE_COLLECTIONS_PATH"] += os.pathsep + installed
        if count_file:
            env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
                       ANSIBLE_CALLBACKS_ENABLED="module_count", ROLLOUT_COUNT_FILE=count_file)
            if os.path.exists(count_file):
                os.unlink(count_file)
        took = self.timed(argv, env, os.path.basename(path))
        counts = None
        if count_file:
            with open(count_file) as f:
                counts = json.load(f)
        return took, counts


def ping(lab):
    """`ansible -m ping` against the VM, the same inventory and environment as the playbooks; seconds."""
    argv, env = ansible_playbook(lab.inventory, "", [])
    argv = [os.path.join(os.path.dirname(argv[0]), "ansible")] + argv[1:-1] + [lab.name, "-m", "ansible.builtin.ping"]
    return lab.timed(argv, env, "ansible -m ping")


def run_record(lab, method, round_, run, took, counts):
    h = counts["hosts"].get(lab.name) or {}
    st = counts["stats"].get(lab.name) or {}
    return {"method": method, "round": round_, "run": run, "seconds": round(took, 1),
            "executions": h.get("remote", 0), "module_runs": h.get("module_runs", 0), "reboots": h.get("reboot", 0),
            "by_action": h.get("by_action", {}), "module_runs_by_module": h.get("module_runs_by_module", {}),
            "changed": st.get("changed"), "ok": st.get("ok"), "load1": os.getloadavg()[0]}


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def spread(values):
    return {"median": round(statistics.median(values), 1), "min": min(values), "max": max(values), "n": len(values)} \
        if values else None


def spread3(values, digits=2):
    """min/median/max of ratios."""
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "n": len(values)} if values else None


def summarize(runs, pings=()):
    """Medians and spreads per method and kind of run (converge, noop = both re-runs); each hand-written
    playbook's time / site.yml's per round and of the medians; site.yml no-op / the ping timed just before it;
    the counts, and the acceptance verdicts. ``pings``: {round, before: [method, run], seconds}."""
    def secs(method, kinds, rnd=None):
        return [r["seconds"] for r in runs if r["method"] == method and r["run"] in kinds
                and r["round"] != 0 and (rnd is None or r["round"] == rnd)]
    methods = [m for m in METHODS if any(r["method"] == m for r in runs)]
    kinds = {"converge": ("converge",), "noop": ("noop1", "noop2")}
    out = {"time": {}, "ratio": {}, "ratios": {}, "per_round": [], "counts": {}, "acceptance": {}, "ping": {}}
    for kind, names in kinds.items():
        out["time"][kind] = {m: spread(secs(m, names)) for m in methods}
        for m in HANDWRITTEN:
            if m in methods and "site" in methods:
                a, b = out["time"][kind][m], out["time"][kind]["site"]
                out["ratio"].setdefault(m, {})[kind] = ratio(a["median"], b["median"]) if a and b else None
    # issue 22's ratio (the heavier hand-written playbook), kept at its old place
    out["ratio"]["converge"] = out["ratio"].get("handwritten", {}).get("converge")
    out["ratio"]["noop"] = out["ratio"].get("handwritten", {}).get("noop")
    rounds = sorted({r["round"] for r in runs if r["round"] != 0})
    for rnd in rounds:
        for run in RUNS:
            t = {m: secs(m, (run,), rnd) for m in methods}
            row = {"round": rnd, "run": run}
            row.update((m, v[0]) for m, v in t.items() if v)
            if len(row) == 2:
                continue    # the reboot's round: no converge and no-op blocks
            row["ratio"] = dict((m, ratio(row[m], row["site"])) for m in HANDWRITTEN if m in row and "site" in row)
            out["per_round"].append(row)
    for m in HANDWRITTEN:
        for kind, names in kinds.items():
            per = [r["ratio"][m] for r in out["per_round"] if r["run"] in names and r["ratio"].get(m)]
            if per:
                out["ratios"].setdefault(m, {})[kind] = spread3(per)
    # site.yml's no-op against the ping timed right before it
    ping_s = [p["seconds"] for p in pings if p["round"] != 0]
    pairs = []
    for r in runs:
        if r["method"] == "site" and r["run"] in kinds["noop"] and r["round"] != 0:
            before = [p for p in pings if p["round"] == r["round"] and p["before"] == ["site", r["run"]]]
            if before:
                pairs.append(r["seconds"] / before[-1]["seconds"])
    site_noop = out["time"]["noop"].get("site")
    out["ping"] = {"time": spread(ping_s), "pairs": spread3(pairs),
                   "ratio_of_medians": ratio(site_noop["median"], statistics.median(ping_s))
                   if site_noop and ping_s else None}
    for m in methods:
        for kind, names in dict(kinds, cold=("cold",), reboot=("reboot",)).items():
            rs = [r for r in runs if r["method"] == m and r["run"] in names]
            if rs:
                out["counts"].setdefault(m, {})[kind] = {
                    k: sorted({r[k] for r in rs}) for k in ("executions", "module_runs", "reboots", "changed")}
                out["counts"][m][kind]["by_action"] = rs[-1]["by_action"]
                out["counts"][m][kind]["module_runs_by_module"] = rs[-1]["module_runs_by_module"]
    site = {k: c for k, c in out["counts"].get("site", {}).items() if k != "reboot"}
    rebooted = out["counts"].get("site", {}).get("reboot")
    out["acceptance"] = {
        "converge": {"target": TARGETS["converge"], "got": out["ratio"]["converge"],
                     "met": bool(out["ratio"]["converge"] and out["ratio"]["converge"] >= TARGETS["converge"])},
        "noop": {"target": TARGETS["noop"], "got": out["ratio"]["noop"],
                 "met": bool(out["ratio"]["noop"] and out["ratio"]["noop"] >= TARGETS["noop"])},
        "executions": {"target": TARGETS["executions"],
                       "got": sorted({n for c in site.values() for n in c["executions"]}),
                       "met": all(c["executions"] == [TARGETS["executions"]] for c in site.values()) and bool(site)},
    }
    got = out["ping"]["ratio_of_medians"]
    out["acceptance"]["noop_vs_ping"] = {
        "target": TARGETS["noop_vs_ping"], "got": got, "pairs": out["ping"]["pairs"],
        "met": bool(got) and got <= TARGETS["noop_vs_ping"]}
    if rebooted:
        out["acceptance"]["executions_reboot"] = {
            "target": TARGETS["executions_reboot"], "got": rebooted["executions"], "reboots": rebooted["reboots"],
            "met": rebooted["executions"] == [TARGETS["executions_reboot"]] and rebooted["reboots"] == [1]}
    return out


def _range(values):
    return str(values[0]) if len(values) == 1 else "%s-%s" % (values[0], values[-1])


def _sp(s):
    if not s:
        return "-"
    return "%.1f" % s["median"] if s["n"] == 1 else "%.1f (%.1f-%.1f, n=%d)" % (s["median"], s["min"], s["max"], s["n"])


def _rsp(s):
    if not s:
        return "-"
    return "%.2f×" % s["median"] if s["n"] == 1 else "%.2f× (%.2f-%.2f×, n=%d)" % (s["median"], s["min"], s["max"],
                                                                                   s["n"])


def _x(value):
    return "%.2f×" % value if value else "-"


def markdown(results):
    meta, summ, runs = results["meta"], results["summary"], results["runs"]
    methods = [m for m in METHODS if any(r["method"] == m for r in runs)]
    hand = [m for m in HANDWRITTEN if m in methods and "site" in methods]
    lines = ["# Rollout cost: hand-written playbooks against site.yml", "",
             "%s, %s guest (kernel %s), %s, ansible-core %s, pipelining on, one host in both groups; git %s "
             "(watched tree %s%s). %d round(s), blocks alternating; %s; `ansible -m ping` timed right before every "
             "no-op re-run." % (
                 meta["date"], meta["guest"], meta.get("kernel", "?"), meta.get("accel"), meta["ansible_core"],
                 meta["git"], meta["tree"][0], " - CHANGED DURING THE RUN: rerun" if len(meta["tree"]) > 1 else "",
                 meta["rounds"], "warm-up converge of each method first" if meta["warmup"] else "no warm-up"),
             "", "Methods: hand-written = handwritten.yml (disks discovered with lsblk and looped over, a task per file "
             "or setting); lean hand-written = lean.yml (one task per setting, no loop over facts); site.yml = "
             "playbooks/site.yml with site_vars.yml.",
             "", "## Wall time per run (s)", "",
             "| round | run | " + " | ".join(LABELS[m] for m in methods) + " | ping before it | "
             + " | ".join("%s / site.yml" % LABELS[m] for m in hand) + " |",
             "|---|---|" + "---|" * (len(methods) + 1 + len(hand))]
    cold = {r["method"]: r["seconds"] for r in runs if r["run"] == "cold"}
    if cold:
        lines.append("| warm-up | %s | %s | - | %s |" % (
            RUN_LABELS["cold"], " | ".join("%.1f" % cold[m] if m in cold else "-" for m in methods),
            " | ".join(_x(ratio(cold.get(m), cold.get("site"))) for m in hand)))
    pings = results.get("pings") or []
    for r in summ["per_round"]:
        before = [p["seconds"] for p in pings if p["round"] == r["round"] and p["before"] == ["site", r["run"]]]
        lines.append("| %d | %s | %s | %s | %s |" % (
            r["round"], RUN_LABELS[r["run"]], " | ".join("%.1f" % r[m] if m in r else "-" for m in methods),
            "%.1f" % before[-1] if before else "-", " | ".join(_x(r["ratio"].get(m)) for m in hand)))
    lines += ["", "## Summary (median, min-max)", "",
              "| run | " + " | ".join("%s (s)" % LABELS[m] for m in methods) + " | "
              + " | ".join("%s / site.yml: of the medians; per round min/median/max" % LABELS[m] for m in hand) + " |",
              "|---|" + "---|" * (len(methods) + len(hand))]
    for kind, label in (("converge", "converge"), ("noop", "no-op re-run")):
        lines.append("| %s | %s | %s |" % (
            label, " | ".join(_sp(summ["time"][kind].get(m)) for m in methods),
            " | ".join("%s; %s" % (_x(summ["ratio"].get(m, {}).get(kind)), _rsp(summ["ratios"].get(m, {}).get(kind)))
                       for m in hand)))
    lines += [""]
    for kind, label in (("converge", "converge"), ("noop", "no-op re-run")) if "handwritten" in hand else ():
        acc = summ["acceptance"][kind]
        lines.append("Issue 22's target, %s hand-written / site.yml >= %g×: %s (%s)." % (
            label, acc["target"], _x(acc["got"]), "met" if acc["met"] else "NOT met"))
    p, acc = summ.get("ping") or {}, summ["acceptance"].get("noop_vs_ping")
    if acc and p.get("time"):
        lines += ["", "## site.yml no-op against `ansible -m ping` (same run, interleaved)", "",
                  "| ping (s), median (min-max) | site.yml no-op (s) | no-op / ping: of the medians | "
                  "no-op / the ping just before it: median (min-max) | issue 40's target |", "|---|---|---|---|---|",
                  "| %s | %s | %s | %s | ≤ %g× (%s) |" % (
                      _sp(p["time"]), _sp(summ["time"]["noop"].get("site")), _x(p["ratio_of_medians"]),
                      _rsp(p["pairs"]), acc["target"], "met" if acc["met"] else "NOT met")]
    lines += ["", "## Remote module executions per host per run (callback_plugins/module_count.py)", "",
              "| method | run | module executions | modules sent (incl. copy's stat + file/copy) | reboots | changed tasks "
              "| executions by action |", "|---|---|---|---|---|---|---|"]
    for m in methods:
        for kind, label in (("cold", "converge (cold)"), ("converge", "converge"), ("noop", "no-op re-run"),
                            ("reboot", RUN_LABELS["reboot"])):
            c = summ["counts"].get(m, {}).get(kind)
            if c:
                lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    LABELS[m], label, _range(c["executions"]), _range(c["module_runs"]), _range(c["reboots"]),
                    _range(c["changed"]), ", ".join("%s %d" % kv for kv in sorted(c["by_action"].items()))))
    acc = summ["acceptance"]["executions"]
    lines += ["", "site.yml module executions per host per run: %s (target %d: %s)." % (
        ", ".join(map(str, acc["got"])), acc["target"], "met" if acc["met"] else "NOT met")]
    acc = summ["acceptance"].get("executions_reboot")
    if acc:
        rec = [r for r in runs if r["run"] == "reboot"][-1]
        verdict = "met" if acc["met"] else "NOT met"
        lines += ["site.yml with the reboot for the NVMe queues: %s module executions and %s reboot in %.1f s "
                  "(target %d and a reboot: %s)." % (_range(acc["got"]), _range(acc["reboots"]), rec["seconds"],
                                                     acc["target"], verdict)]
    return "\n".join(lines) + "\n"


def write_results(results, directory, label):
    os.makedirs(directory, exist_ok=True)
    meta = results["meta"]
    stem = "%s-%s-%s%s" % (meta["date"][:10], meta["guest"], meta.get("accel") or "unknown", "-" + label if label else "")
    paths = [os.path.join(directory, stem + ext) for ext in (".json", ".md")]
    with open(paths[0], "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    text = markdown(results)
    with open(paths[1], "w") as f:
        f.write(text)
    return paths, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_args(ap, "debian12", "bench-rollout")
    ap.add_argument("--rounds", type=int, default=2, help="blocks per method (alternating order); default %(default)s")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="a converge of each method before the rounds, reported as cold (default on)")
    ap.add_argument("--methods", default=",".join(METHODS), help="for trying one method alone")
    ap.add_argument("--reboot", action=argparse.BooleanOptionalAction, default=True,
                    help="a last site.yml converge that reboots for the NVMe queues, counted (default on)")
    ap.add_argument("--label", default="", help="added to the result files' names")
    ap.add_argument("--results", default=os.path.join(HERE, "results"), help="where the JSON and markdown go")
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "bench-rollout"), help="logs and counts")
    a = ap.parse_args()
    methods = [m for m in METHODS if m in a.methods.split(",")]
    if not os.path.isdir(os.path.join(REPO, ".cache", "installed", "ansible_collections", "ansible", "posix")):
        raise SystemExit("ansible.posix is not installed: make collections")
    # A stop by signal still shuts the VM down (vm()'s finally).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    a.out = os.path.abspath(a.out)
    os.makedirs(os.path.join(a.out, "counts"), exist_ok=True)
    if os.path.exists(os.path.join(a.out, "ansible.log")):
        os.unlink(os.path.join(a.out, "ansible.log"))
    settings = load_settings()
    spec = guest_spec(settings)
    lab = Lab(a.name, a.out)
    import ansible  # pylint: disable=import-outside-toplevel
    results = {"meta": {"guest": a.guest, "rounds": a.rounds, "warmup": a.warmup, "methods": methods,
                        "reboot": a.reboot and "site" in methods,
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git": git_head(),
                        "ansible_core": ansible.__version__, "tree": [tree_fingerprint()], "settings": settings},
               "runs": [], "pings": [], "states": {}}
    t_start = time.time()
    expected = None

    def check(state, what):
        nonlocal expected
        got = kernel_part(state)
        if expected is None:
            problems = settings_problems(state, settings)
            if problems:
                raise SystemExit("after %s the host does not hold settings.yml:\n  %s" % (what, "\n  ".join(problems)))
            expected = got
            results["states"]["converged"] = state
        else:
            d = diff(expected, got)
            if d:
                raise SystemExit("after %s the kernel holds other values than after the first converge:\n  %s"
                                 % (what, "\n  ".join(d)))

    def reset(reference):
        lab.playbook(PURGE, [])
        state = lab.guest("reset", dict(spec, files=handwritten_files(settings), reference=reference))
        d = diff(reference, state)
        if d:
            raise SystemExit("the reset did not bring the host back to its state after boot:\n  %s" % "\n  ".join(d))

    def block(method, round_, runs):
        playbook, extra = PLAYBOOKS[method]
        extra = extra + (REBOOT_EXTRA if runs == ("reboot",) else [])
        if method == "site":
            fp = tree_fingerprint()
            if fp not in results["meta"]["tree"]:
                results["meta"]["tree"].append(fp)
                print("WARNING: playbooks/, roles/ or plugins/ changed during the run (%s): rerun" % fp, flush=True)
        for run in runs:
            if run.startswith("noop"):
                took = ping(lab)
                results["pings"].append({"round": round_, "before": [method, run], "seconds": round(took, 2),
                                         "load1": os.getloadavg()[0]})
                print("round %d ping        (before %s %s) %6.1f s" % (round_, method, run, took), flush=True)
            count_file = os.path.join(a.out, "counts", "%s-%d-%s.json" % (method, round_, run))
            took, counts = lab.playbook(playbook, extra, count_file)
            rec = run_record(lab, method, round_, run, took, counts)
            results["runs"].append(rec)
            print("round %d %-11s %-8s %6.1f s  %2d module executions (%d modules sent), %d reboots, changed=%s"
                  % (round_, method, run, rec["seconds"], rec["executions"], rec["module_runs"], rec["reboots"],
                     rec["changed"]), flush=True)
            if run.startswith("noop") and rec["changed"]:
                if method in HANDWRITTEN:
                    raise SystemExit("the hand-written playbook is not idempotent: changed=%s on %s" % (rec["changed"], run))
                print("WARNING: %s changed %s task(s) on a re-run" % (method, rec["changed"]), flush=True)
            if run == "reboot" and rec["reboots"] != 1:
                raise SystemExit("the converge with io_isolation_reboot_ok did not reboot (%s reboots)" % rec["reboots"])
            if run == "reboot":
                # A slice is active only once something runs in it; after the boot nothing has, so
                # start both: systemd then sets their cgroups from the persisted configuration alone.
                subprocess.run([sys.executable, os.path.join(REPO, "tests", "lab", "lab.py"), "ssh", a.name, "--",
                                "systemctl", "start", "--"] + spec["slices"], check=True, capture_output=True)
            if run in ("cold", "converge", "noop2", "reboot"):
                check(lab.guest("state", spec), "%s %s (round %d)" % (method, run, round_))
            # what was measured so far, for a run that is stopped before its end (not a result file)
            with open(os.path.join(a.out, "results-partial.json"), "w") as f:
                json.dump(dict(results, summary=summarize(results["runs"], results["pings"])), f, indent=1,
                          sort_keys=True)

    with vm(a):
        lab.write_inventory()
        reference = lab.guest("state", spec)
        results["states"]["reference"] = reference
        if configured(reference):
            raise SystemExit("%s is not unconfigured (%s): purge it, or let the benchmark boot its own VM"
                             % (a.name, ", ".join(configured(reference))))
        kernel = subprocess.run([sys.executable, os.path.join(REPO, "tests", "lab", "lab.py"), "ssh", a.name, "--",
                                 "uname", "-r"], capture_output=True, text=True, check=False).stdout.strip()
        results["meta"]["kernel"] = kernel
        print("%s up (%s); state after boot read; results go to %s" % (a.name, kernel, a.results), flush=True)
        if a.warmup:
            for method in methods:
                block(method, 0, ("cold",))
                reset(reference)
        for round_ in range(1, a.rounds + 1):
            for method in (methods if round_ % 2 else methods[::-1]):
                block(method, round_, RUNS)
                reset(reference)
        if results["meta"]["reboot"]:
            # Last: the boot takes the NVMe queue setting, so the VM is not reset after it.
            block("site", a.rounds + 1, ("reboot",))
    results["meta"]["accel"] = accel()
    tree = tree_fingerprint()
    if tree not in results["meta"]["tree"]:
        results["meta"]["tree"].append(tree)
    results["meta"]["seconds"] = round(time.time() - t_start, 1)
    results["summary"] = summarize(results["runs"], results["pings"])
    paths, text = write_results(results, a.results, a.label)
    print(text)
    print("wrote %s (total %.0f s)" % (", ".join(os.path.relpath(p, REPO) for p in paths), results["meta"]["seconds"]))
    if len(results["meta"]["tree"]) > 1:
        raise SystemExit("playbooks/, roles/ or plugins/ changed during the run: the site.yml figures mix two versions; rerun")


if __name__ == "__main__":
    main()
