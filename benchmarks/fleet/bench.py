# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what the roles' planning and verify's judgement cost on the controller, per host, for a fleet.

No VM: real ansible-playbook runs of playbooks/site.yml and playbooks/verify.yml with the real roles over a
synthetic fleet whose hosts use the benchmark's connection (connection_plugins/fleet_replay.py). It answers the two
module executions a host costs (io_facts, host_profile) from recorded results, so everything the controller does
(argument specs, templating, the filters, the calibration database lookup, strategy, forks, callbacks, building
each AnsiballZ payload) runs as in a real run, and nothing runs on a host.

The fleet (facts.py): each host is a simulated lab guest (Debian 12 or 13) with 1-4 NVMe data disks of one of 12
hardware classes and serials of its own, in the inference group, the training group or both; a calibration
database beside the inventory (the roles' default place) of 10 to 1,000 entries, made from the lab's recorded
calibration run (benchmarks/isolation/results/...-calibration-solutions.json) and covering 9 of the 12 classes
(the others run on the kernel's class, with the roles' warning); every 50th host has drifted (vm.swappiness).

Measured per run: wall time, the CPU seconds of ansible-playbook and all its workers (wait4), the largest process's
peak RSS, what the stand-in connection itself took (subtracted: the controller's cost without it), the slowest
tasks (ansible.posix.profile_tasks); then the growth exponent (least squares of log CPU against log hosts), and each
planning filter timed directly over the fleet's inputs (the slowest filter and its share of the planning).

  .venv/bin/python benchmarks/fleet/bench.py                       (make bench-fleet: 100, 1,000, 5,000 hosts)
  .venv/bin/python benchmarks/fleet/bench.py --hosts 100 1000 --forks 5 25 --db 100
"""

import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import facts as fleet_facts  # noqa: E402  pylint: disable=wrong-import-position
import profiled_playbook  # noqa: E402  pylint: disable=wrong-import-position

CALIBRATION_RUN = os.path.join(REPO, "benchmarks", "isolation", "results",
                               "2026-12-06-debian12-tcg-calibration-solutions.json")
CALIBRATED_CLASSES = 9      # classes 0-8 have a database entry, 9-11 run on the kernel's class
DRIFT_EVERY = 50
GOAL_MS = 50.0
PLAYBOOKS = {"site": "playbooks/site.yml", "verify": "playbooks/verify.yml", "floor": None}
# floor: ansible-core's own cost for as many task results per host as site.yml makes (34 on this fleet), each a
# debug task that templates one variable, in the same serial batches: what any playbook of that length costs.
FLOOR_TASKS = 34
# The fleet's settings besides the roles' defaults (inventory all:vars), as a platform team would set them.
FLEET_VARS = {
    "io_baseline_blk_queue": {"scheduler": "mq-deadline", "read_ahead_kb": 1024},
    "io_baseline_nvme_queues": {"poll_queues": 1},
    "training_io_max": {"wbps": "90%"},
    # the QoS solution the lab's recorded calibration measured (its isolation solution found no level)
    "io_baseline_qos_solution": "bandwidth",
}


# ----------------------------------------------------------------------------------------------
# the fleet

def calibration_entries(count):
    """``count`` database entries: the lab's recorded calibration (merged as the calibration role merges it) for
    the fleet's calibrated classes, then made-up classes no host has, up to ``count``."""
    fleet_facts._sim()  # pylint: disable=protected-access
    from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db  # pylint: disable=import-outside-toplevel
    with open(CALIBRATION_RUN, encoding="utf-8") as f:
        lab = db.merge_results(json.load(f)["runs"][1:2])
    classes = [fleet_facts.CLASSES[k] for k in range(CALIBRATED_CLASSES)]
    classes += [("FLEET FILLER %04d" % n, "F%03d" % (n % 7), 1000 + n) for n in range(max(0, count - len(classes)))]
    out = []
    for model, firmware, gib in classes[:count]:
        entry = json.loads(json.dumps(lab))
        entry.update(model=model, firmware=firmware, capacity_bytes=int(gib * 1024 ** 3))
        out.append(db.check_entry(entry))
    return out, db


def host_name(index):
    return "h%06d" % index


def build_fleet(out, hosts, db_entries, seed=40, drift_every=DRIFT_EVERY):
    """Write the fleet into ``out``: hosts/<host>.json (recorded io_facts, drift on every ``drift_every``-th host),
    inventory.yml, calibration-db/. Returns a summary (shapes, groups, disks, drifted hosts)."""
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "hosts"))
    rng = random.Random(seed)
    shapes, groups = {}, {"inference": [], "training": []}
    disks = drifted = 0
    for i in range(1, hosts + 1):
        guest = ("debian12", "debian13")[rng.random() < 0.5]
        klass = rng.randrange(len(fleet_facts.CLASSES))
        count = rng.choice(fleet_facts.DISK_COUNTS)
        key = fleet_facts.shape_key(guest, klass, count)
        if key not in shapes:
            shapes[key] = fleet_facts.shape_facts(guest, klass, count)
        name = host_name(i)
        drift = i % drift_every == 0
        record = '{"drift": %s, "io_facts": %s}' % ("true" if drift else "false",
                                                    fleet_facts.host_facts(shapes[key], i))
        with open(os.path.join(out, "hosts", name + ".json"), "w", encoding="utf-8") as f:
            f.write(record)
        role = rng.random()
        if role < 0.7:
            groups["inference"].append(name)
        if role >= 0.4:
            groups["training"].append(name)
        disks += count
        drifted += drift
    inventory = {"all": {
        "vars": dict(FLEET_VARS, ansible_connection="fleet_replay", ansible_pipelining=True,
                     ansible_python_interpreter="/usr/bin/python3"),
        "children": dict((g, {"hosts": dict((h, None) for h in names)}) for g, names in groups.items())}}
    with open(os.path.join(out, "inventory.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(inventory, f, default_flow_style=False)
    entries, db = calibration_entries(db_entries)
    os.makedirs(os.path.join(out, "calibration-db"))
    for entry in entries:
        with open(os.path.join(out, "calibration-db", db.entry_file_name(entry)), "w", encoding="utf-8") as f:
            f.write(db.entry_file_text(entry))
    return {"hosts": hosts, "shapes": len(shapes), "disks": disks, "drifted": drifted, "db_entries": len(entries),
            "inference": len(groups["inference"]), "training": len(groups["training"]),
            "both": len(set(groups["inference"]) & set(groups["training"]))}


# ----------------------------------------------------------------------------------------------
# one ansible-playbook run

RECAP_RE = re.compile(r"^(h\d{6})\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)",
                      re.MULTILINE)
PROFILE_RE = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.MULTILINE)


def run_playbook(fleet_dir, playbook, forks, log_path, profile=False, args_dir=None):
    """Run one playbook over the fleet; its wall time, CPU (itself and every worker) and peak RSS. With ``profile``
    every process samples its CPU (profiled_playbook.py): the collection's share of the controller's CPU. With
    ``args_dir`` the stand-in connection writes each module's arguments there (<host>.<module>.json)."""
    calls = os.path.join(fleet_dir, "calls.log")
    if os.path.exists(calls):
        os.remove(calls)
    profile_dir = os.path.join(fleet_dir, "profile")
    shutil.rmtree(profile_dir, ignore_errors=True)
    env = dict(os.environ, FLEET_DIR=fleet_dir, ANSIBLE_CONNECTION_PLUGINS=os.path.join(HERE, "connection_plugins"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_FORKS=str(forks),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
               ANSIBLE_STDOUT_CALLBACK="default")
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO, ".cache", "collections") + os.pathsep
                   + os.path.join(REPO, ".cache", "installed"))
    path = os.path.join(REPO, PLAYBOOKS[playbook]) if PLAYBOOKS[playbook] else write_floor(fleet_dir)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
           os.path.join(fleet_dir, "inventory.yml"), path]
    if profile:
        os.makedirs(profile_dir)
        env["FLEET_PROFILE_DIR"] = profile_dir
        cmd[0:1] = [sys.executable, os.path.join(HERE, "profiled_playbook.py")]
    if args_dir:
        os.makedirs(args_dir, exist_ok=True)
        env["FLEET_ARGS_DIR"] = args_dir
    with open(log_path, "w", encoding="utf-8") as log:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)  # pylint: disable=consider-using-with
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
    with open(log_path, encoding="utf-8") as f:
        text = f.read()
    out = {"wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
           "user_s": round(usage.ru_utime, 3), "sys_s": round(usage.ru_stime, 3),
           "peak_rss_mib": round(usage.ru_maxrss / 1024.0, 1), "rc": proc.returncode,
           "recap": recap(text), "calls": read_calls(calls), "slowest_tasks": slowest_tasks(text)}
    if profile:
        out["profile"] = profiled_playbook.summarize(os.path.join(profile_dir, "workers.log"), max(1, out["recap"]["hosts"]))
    return out


def write_floor(fleet_dir):
    """The floor playbook (FLOOR_TASKS debug tasks, serial 25%), written beside the inventory."""
    play = [{"name": "Floor", "hosts": "inference:training", "serial": "25%", "gather_facts": False,
             "tasks": [{"name": "Task %d" % n, "ansible.builtin.debug": {"msg": "{{ inventory_hostname }}"}}
                       for n in range(FLOOR_TASKS)]}]
    path = os.path.join(fleet_dir, "floor.yml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(play, f, sort_keys=False)
    return path


def recap(text):
    """Hosts ok / failed / unreachable from the PLAY RECAP."""
    out = {"hosts": 0, "failed": 0, "unreachable": 0, "changed": 0}
    for _h, _ok, changed, unreachable, failed, _skipped in RECAP_RE.findall(text):
        out["hosts"] += 1
        out["failed"] += int(failed) > 0
        out["unreachable"] += int(unreachable) > 0
        out["changed"] += int(changed) > 0
    return out


def read_calls(path):
    """The stand-in connection's log: module executions per module, hosts seen, the stand-in's CPU seconds."""
    per_module, hosts, cpu = {}, {}, 0.0
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                host, module, seconds = line.split()
                per_module[module] = per_module.get(module, 0) + 1
                hosts[host] = hosts.get(host, 0) + 1
                cpu += float(seconds)
    return {"by_module": per_module, "hosts": len(hosts), "per_host_max": max(hosts.values()) if hosts else 0,
            "standin_cpu_s": round(cpu, 3)}


def slowest_tasks(text, count=8):
    """profile_tasks' summary, each task's batches added up: the tasks that took longest (wall seconds, all hosts)."""
    summary = text.split("TASKS RECAP", 1)[-1]
    total = {}
    for task, seconds in PROFILE_RE.findall(summary):
        total[task.strip()] = total.get(task.strip(), 0.0) + float(seconds)
    found = sorted(total.items(), key=lambda kv: -kv[1])
    return [{"task": t, "wall_s": round(s, 2)} for t, s in found[:count]]


# ----------------------------------------------------------------------------------------------
# the filters, timed directly

def _defaults(role):
    with open(os.path.join(REPO, "roles", role, "defaults", "main.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def planner(fleet_dir, index_dir=None, whole_db=False):
    """The roles' planning and verify's judgement of one host, each step called as the roles call it over the
    host's recorded inputs: ``plan(name, timed)`` returns the host_profile arguments planned and the verdict;
    ``timed(step, func, *args)`` calls a step (time_filters measures it). The calibration database is looked up as
    io_baseline looks it up (the entries of the selected disks' classes, the database checked once per run through
    the index in ``index_dir``), or with ``whole_db`` as it was looked up before (every entry, for every host)."""
    fleet_facts._sim()  # pylint: disable=protected-access
    from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f  # pylint: disable=import-outside-toplevel
    from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db  # pylint: disable=import-outside-toplevel
    if os.path.join(HERE, "connection_plugins") not in sys.path:
        sys.path.insert(0, os.path.join(HERE, "connection_plugins"))
    import fleet_replay  # pylint: disable=import-outside-toplevel
    base, inf, tra = _defaults("io_baseline"), _defaults("inference"), _defaults("training")
    base.update(FLEET_VARS)
    tra.update(FLEET_VARS)
    # what the role passes baseline_plan (roles/io_baseline/tasks/main.yml)
    base_settings = dict((k, base[k]) for k in f.BASELINE_VARS + f.TIER_VARS)
    share = dict((k, base[k]) for k in base if k.startswith("io_baseline_io_share_"))
    with open(os.path.join(fleet_dir, "inventory.yml"), encoding="utf-8") as fh:
        inventory = yaml.safe_load(fh)["all"]["children"]
    in_group = dict((g, set(inventory[g]["hosts"] or {})) for g in inventory)
    db_dir = os.path.join(fleet_dir, "calibration-db")

    def lookup(selected):
        if whole_db:
            return db.load_db(db_dir)
        return db.load_db(db_dir, disks=selected, index_dir=index_dir)

    def plan(name, timed):
        with open(os.path.join(fleet_dir, "hosts", name + ".json"), encoding="utf-8") as fh:
            record = json.load(fh)
        facts = record["io_facts"]["ansible_facts"]["io_isolation"]
        selected = timed("select_disks", f.select_disks, facts, base["io_baseline_devices"],
                         base["io_baseline_device_query"])
        entries = timed("calibration_db lookup", lookup, selected)
        plan = timed("iocost_plan", f.iocost_plan, selected, {}, entries, base["io_baseline_iocost_qos"],
                     False, base["io_baseline_calibrated_vrate_max"], base["io_baseline_qos_solution"])
        profile = timed("baseline_plan", f.baseline_plan, {}, plan, base_settings)
        if name in in_group["inference"]:
            profile = timed("inference_plan", f.inference_plan, profile,
                            dict((k, v) for k, v in inf.items()), plan["disks"], facts)
        if name in in_group["training"]:
            profile = timed("training_plan", f.training_plan, profile,
                            dict((k, v) for k, v in tra.items() if k.startswith("training_")), plan["disks"], facts)
        args = {"iocost": profile.get("iocost"), "blk_queue": profile.get("blk_queue"), "sysctl": profile.get("sysctl"),
                "nvme_queues": profile.get("nvme_queues"), "cgroups": list((profile.get("cgroups") or {}).values()),
                "pressure": profile.get("pressure") or []}
        args["tenancy"] = timed("tenancy_request", f.tenancy_request, profile, share)
        result = fleet_replay.host_profile_result(dict(args, _ansible_check_mode=True), facts, record["drift"], True)
        sections = result["sections"]
        skipped = {"changed": False, "skipped": True}
        baseline = dict((k, sections.get(k, skipped)) for k in ("iocost", "blk_queue", "sysctl", "nvme_queues"))
        baseline["tenancy"] = result.get("tenancy", skipped)
        for tier in profile.get("tiers") or []:
            baseline[tier] = result["cgroups"][tier]
        inference = {"slice": result["cgroups"][profile["inference"]["slice"]], "groups": {}} \
            if profile.get("inference") else {}
        training = {"slice": result["cgroups"][profile["training"]["slice"]]} if profile.get("training") else {}
        verdict = timed("verify_drift", f.verify_drift, baseline, inference, training)
        if verdict["drift"]:
            timed("drift_summary", f.drift_summary, verdict["drift"])
        timed("qos_source_text", f.qos_source_text, plan["qos_sources"])
        return args, verdict

    return plan


def untimed(_step, func, *args):
    return func(*args)


def time_filters(fleet_dir, names, reference_hosts=100):
    """Each planning and judgement step of the roles over the hosts ``names`` in one run (one index of the
    calibration database, as one ansible-playbook run has): CPU milliseconds per host, per step and in all, and
    what the first host's lookup took (it checks the whole database for the run); beside it the lookup as it was
    before (the whole database for every host) over the first ``reference_hosts`` hosts, and the ratio."""
    seconds, first = {}, []

    def timed(step, func, *args):
        t = time.process_time()
        value = func(*args)
        took = time.process_time() - t
        seconds[step] = seconds.get(step, 0.0) + took
        if step == "calibration_db lookup" and not first:
            first.append(took)
        return value

    index_dir = tempfile.mkdtemp(prefix="bench-fleet-run-")
    try:
        plan = planner(fleet_dir, index_dir)
        for name in names:
            plan(name, timed)
    finally:
        shutil.rmtree(index_dir)
    total = sum(seconds.values())
    slowest = max(seconds, key=seconds.get)
    # the reference, side by side: the lookup as it was (the whole database read for every host), first hosts only
    ref = {}
    whole = planner(fleet_dir, whole_db=True)

    def ref_timed(step, func, *args):
        t = time.process_time()
        value = func(*args)
        if step == "calibration_db lookup":
            ref[step] = ref.get(step, 0.0) + time.process_time() - t
        return value

    for name in names[:reference_hosts]:
        whole(name, ref_timed)
    ref_ms = 1000.0 * ref.get("calibration_db lookup", 0.0) / max(1, min(len(names), reference_hosts))
    mine_ms = 1000.0 * seconds["calibration_db lookup"] / max(1, len(names))
    return {"hosts": len(names), "total_ms_per_host": round(1000.0 * total / max(1, len(names)), 3),
            "total_cpu_s": round(total, 4), "lookup_first_host_ms": round(1000.0 * first[0], 2) if first else None,
            "slowest": slowest, "reference_whole_db_lookup_ms_per_host": round(ref_ms, 3),
            "reference_hosts": min(len(names), reference_hosts),
            "lookup_ratio_to_reference": round(mine_ms / ref_ms, 3) if ref_ms else None,
            "steps": dict((k, {"ms_per_host": round(1000.0 * v / len(names), 3), "share": round(v / total, 3)})
                          for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]))}


# ----------------------------------------------------------------------------------------------
# the whole benchmark

def exponent(points):
    """Least-squares slope of log(cost) against log(hosts): 1 is linear."""
    if len(points) < 2:
        return None
    xs = [math.log(h) for h, _c in points]
    ys = [math.log(c) for _h, c in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den, 3) if den else None


def summarize(runs):
    """Per (playbook, forks, db): the growth exponent of controller CPU (the stand-in's excluded) over hosts."""
    out = []
    keys = sorted(set((r["playbook"], r["forks"], r["db_entries"]) for r in runs))
    for playbook, forks, entries in keys:
        pts = sorted((r["hosts"], r["controller_cpu_s"]) for r in runs
                     if (r["playbook"], r["forks"], r["db_entries"]) == (playbook, forks, entries))
        out.append({"playbook": playbook, "forks": forks, "db_entries": entries, "hosts": [h for h, _c in pts],
                    "exponent": exponent(pts)})
    return out


def spread(values):
    """'median' of one value, 'median (min-max)' of several."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-"
    mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    text = ("%.3g" % mid) if mid < 100 else "%.0f" % mid
    return text if len(values) == 1 else "%s (%.3g-%.3g)" % (text, values[0], values[-1])


def filter_growth(filters):
    """Per database size: the growth exponent of the planning's CPU over hosts."""
    out = []
    for entries in sorted(set(fl["db_entries"] for fl in filters)):
        series = {}
        for fl in filters:
            if fl["db_entries"] == entries:
                series.setdefault(fl.get("repeat", 0), []).append((fl["hosts"], fl["total_cpu_s"]))
        found = [exponent(sorted(pts)) for _r, pts in sorted(series.items())]
        out.append({"db_entries": entries, "hosts": sorted(set(h for pts in series.values() for h, _c in pts)),
                    "exponents": [e for e in found if e is not None]})
    return out


def markdown(result):
    lines = ["# make bench-fleet, %s" % result["date"], "",
             "ansible-core %s, Python %s, %s; %s" % (result["ansible_core"], result["python"], result["machine"],
                                                     result["note"]), ""]
    lines += ["- %s" % note for note in result.get("notes") or []] + ([""] if result.get("notes") else [])
    filters = result.get("filters") or []
    if filters:
        lines += ["## Our planning, timed directly (goal: under %.0f ms of CPU a host)" % result["goal_ms_per_host"], "",
                  "The roles' planning filters, the calibration database lookup and verify's judgement over each "
                  "host's recorded inputs, in one process, without ansible-core (CPU time).", "",
                  "| db entries | hosts | planning ms/host | first host's lookup ms (checks the database) "
                  "| slowest step | its ms/host | reference: whole-database lookup ms/host | lookup / reference |",
                  "|---|---|---|---|---|---|---|---|"]
        for key in sorted(set((x["db_entries"], x["hosts"]) for x in filters)):
            # repeats of one configuration: the median and, in brackets, the range (the spread on a shared machine)
            same = [x for x in filters if (x["db_entries"], x["hosts"]) == key]
            slowest = max(set(x["slowest"] for x in same), key=[x["slowest"] for x in same].count)
            lines.append("| %d | %d | %s | %s | %s | %s | %s | %s |" % (key + tuple(spread(v) for v in (
                [x["total_ms_per_host"] for x in same], [x["lookup_first_host_ms"] for x in same])) + (slowest,) + tuple(
                spread(v) for v in ([x["steps"][slowest]["ms_per_host"] for x in same],
                                    [x["reference_whole_db_lookup_ms_per_host"] for x in same],
                                    [x["lookup_ratio_to_reference"] for x in same]))))
        lines += ["", "Growth exponent of the planning's CPU against hosts (1 = linear; one per repeat): " + "; ".join(
            "%d entries %s" % (g["db_entries"], ", ".join(map(str, g["exponents"]))) for g in filter_growth(filters)), ""]
    if result["runs"]:
        lines += ["## Playbook runs (ansible-core and our code together)", "",
                  "| playbook | hosts | forks | db entries | wall s | CPU s | controller CPU s | ms/host | peak RSS MiB "
                  "| KiB/host | failed (drift) | sampled (--profile): ours ms/host of all (share) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in result["runs"]:
            prof = r.get("profile")
            lines.append("| %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f | %d | %s |" % (
                r["playbook"] + (" (%s)" % r["variant"] if r.get("variant") else ""), r["hosts"], r["forks"],
                r["db_entries"], r["wall_s"], r["cpu_s"], r["controller_cpu_s"],
                r["controller_ms_per_host"], r["peak_rss_mib"], r["rss_kib_per_host"], r["recap"]["failed"],
                "%.1f of %.1f (%.1f%%)" % (prof["ours_ms_per_host"], prof["sampled_ms_per_host"],
                                           100 * prof["ours_share"]) if prof else "not sampled"))
        lines += ["", "Growth exponent of controller CPU against hosts (1 = linear):", ""]
        for g in result["growth"]:
            lines.append("- %s, forks %d, %d entries, hosts %s: **%s**" % (
                g["playbook"], g["forks"], g["db_entries"], "/".join(map(str, g["hosts"])), g["exponent"]))
        for r in result["runs"]:
            prof = r.get("profile")
            if not prof:
                continue
            lines += ["", "Our code in %s, %d hosts (CPU sampled: %d workers %.1f ms/host, the strategy process %.1f "
                      "ms/host of which ours %.1f):" % (
                          r["playbook"], r["hosts"], prof["workers"], prof["workers_ms_per_host"],
                          prof["strategy_ms_per_host"], prof["strategy_ours_ms_per_host"]), "",
                      "| what of ours | ms/host |", "|---|---|"]
            lines += ["| called: %s | %.1f |" % (x["name"], x["ms_per_host"]) for x in prof["entries"][:8]]
            lines += ["| spent in: %s | %.1f |" % (x["name"], x["ms_per_host"]) for x in prof["places"][:8]]
            lines += ["| task: %s | %.1f |" % (x["name"], x["ms_per_host"]) for x in prof["tasks"][:5]]
    shown = set()
    for fl in sorted(filters, key=lambda x: (x["db_entries"], x["hosts"])):
        # each database size's largest fleet, its first repeat
        if fl["hosts"] != max(x["hosts"] for x in filters if x["db_entries"] == fl["db_entries"]) \
                or fl["db_entries"] in shown:
            continue
        shown.add(fl["db_entries"])
        lines += ["", "Planning steps, %d hosts, %d database entries: %.2f ms per host" % (
            fl["hosts"], fl["db_entries"], fl["total_ms_per_host"]), "", "| step | ms/host | share |", "|---|---|---|"]
        lines += ["| %s | %.3f | %.1f%% |" % (k, v["ms_per_host"], 100 * v["share"])
                  for k, v in sorted(fl["steps"].items(), key=lambda kv: -kv[1]["ms_per_host"])]
    return "\n".join(lines) + "\n"


def write(result, results, label):
    os.makedirs(results, exist_ok=True)
    stem = os.path.join(results, result["date"] + ("-" + label if label else ""))
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    with open(stem + ".md", "w", encoding="utf-8") as f:
        f.write(markdown(result))
    print(markdown(result))


def merge(paths, results, label):
    """One result of several runs of this script (the same machine and tree): their runs and filter timings."""
    parts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            parts.append(json.load(f))
    for n, part in enumerate(parts):
        for item in part["filters"] + part["runs"]:
            item.setdefault("repeat", n)
            item.setdefault("note", part["note"])
    result = dict(parts[0], runs=[r for p in parts for r in p["runs"]], filters=[x for p in parts for x in p["filters"]],
                  note="%d runs of this script on one machine and tree; each run's note below" % len(parts),
                  notes=[p["note"] for p in parts])
    result["growth"] = summarize(result["runs"])
    result["filter_growth"] = filter_growth(result["filters"])
    write(result, results, label)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[100, 1000, 5000])
    p.add_argument("--forks", type=int, nargs="+", default=[5])
    p.add_argument("--playbooks", nargs="*", default=["site", "verify"], choices=sorted(PLAYBOOKS))
    p.add_argument("--db", type=int, nargs="+", default=[100], help="calibration database sizes (entries)")
    p.add_argument("--profile", action="store_true", help="sample the CPU of every process: our code's share")
    p.add_argument("--filter-hosts", type=int, nargs="+", default=[100, 1000, 5000],
                   help="host counts the planning is timed over directly (0: none)")
    p.add_argument("--filter-db", type=int, nargs="+", default=[10, 100, 1000],
                   help="calibration database sizes the planning is timed with")
    p.add_argument("--out", default=os.path.join(REPO, ".cache", "bench-fleet"))
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--label", default="")
    p.add_argument("--note", default="", help="a line about the machine's load, for the results")
    p.add_argument("--variant", default="", help="what code the playbook runs ran (a reference run), for the results")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="merge earlier results into one (no runs)")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.results, args.label)
    runs, filters = [], []
    for entries in args.db if args.playbooks else []:
        for hosts in args.hosts:
            fleet_dir = os.path.join(args.out, "fleet-%d-%d" % (hosts, entries))
            t = time.monotonic()
            fleet = build_fleet(fleet_dir, hosts, entries)
            print("fleet %d hosts, %d entries: built in %.1f s (%d shapes)"
                  % (hosts, entries, time.monotonic() - t, fleet["shapes"]), flush=True)
            for playbook in args.playbooks:
                for forks in args.forks:
                    r = run_playbook(fleet_dir, playbook, forks,
                                     os.path.join(args.out, "%s-%d-%d-f%d.log" % (playbook, hosts, entries, forks)),
                                     profile=args.profile)
                    r.update(playbook=playbook, hosts=hosts, forks=forks, db_entries=entries, fleet=fleet,
                             variant=args.variant)
                    r["controller_cpu_s"] = round(r["cpu_s"] - r["calls"]["standin_cpu_s"], 3)
                    r["controller_ms_per_host"] = round(1000.0 * r["controller_cpu_s"] / hosts, 2)
                    r["rss_kib_per_host"] = round(1024.0 * r["peak_rss_mib"] / hosts, 1)
                    runs.append(r)
                    print("%-6s %5d hosts forks %2d: wall %.1f s, CPU %.1f s (stand-in %.1f), %.1f ms/host, "
                          "peak RSS %.0f MiB, rc %d, %s%s" % (
                              playbook, hosts, forks, r["wall_s"], r["cpu_s"], r["calls"]["standin_cpu_s"],
                              r["controller_ms_per_host"], r["peak_rss_mib"], r["rc"], r["recap"],
                              "; ours %.1f of %.1f sampled ms/host" % (r["profile"]["ours_ms_per_host"],
                                                                       r["profile"]["sampled_ms_per_host"])
                              if args.profile else ""), flush=True)
    for entries in args.filter_db:
        for hosts in [h for h in args.filter_hosts if h > 0]:
            fleet_dir = os.path.join(args.out, "filters-%d-%d" % (hosts, entries))
            build_fleet(fleet_dir, hosts, entries)
            fl = time_filters(fleet_dir, [host_name(i) for i in range(1, hosts + 1)])
            fl["db_entries"] = entries
            filters.append(fl)
            print("planning over %d hosts, %d entries: %.2f ms/host (first host's lookup %s ms), slowest %s" % (
                hosts, entries, fl["total_ms_per_host"], fl["lookup_first_host_ms"], fl["slowest"]), flush=True)
    import ansible  # pylint: disable=import-outside-toplevel
    result = {"date": datetime.date.today().isoformat(), "ansible_core": ansible.__version__,
              "python": platform.python_version(), "machine": "%s, %d CPUs" % (platform.machine(), os.cpu_count()),
              "note": args.note or "no note", "goal_ms_per_host": GOAL_MS, "runs": runs, "growth": summarize(runs),
              "filters": filters, "filter_growth": filter_growth(filters)}
    write(result, args.results, args.label)
    return 0 if all(r["rc"] in (0, 2) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
