# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check the rollout summary (playbooks/templates/applied_summary.j2) line by line.

The demo keeps each host's summary as <dir>/<host>.json: {"lines": [...], "inputs": {...}} (demo_rollout.yml with
io_isolation_summary_dir). Each line is parsed on its own and compared with the variables it was rendered from,
then with what the caller expects (the tenants, where the model came from, which call read the pressure), so a
line that is missing, extra, mangled or wrong fails with its text. make test's demo stage runs this on the lab's
summary; the unit tests run check() on the template rendered from recorded inputs.

    python3 tests/lab/demo_summary.py .cache/demo-summary/demo.json --roles inference,training \
        --model-source calibration --health-source host_profile --caps --memory-protection
"""
from __future__ import annotations

import argparse
import json
import re
import sys

HOST = re.compile(r"^host (?P<host>\S+) \((?P<groups>[^)]*)\): (?P<n>\d+) data disk\(s\), "
                  r"(?:reboot required: (?P<required>True|False)|rebooted for the NVMe queues in (?P<elapsed>\d+) s)$")
DISK = re.compile(r"^disk (?P<name>\S+) \((?P<majmin>\d+:\d+), serial (?P<serial>[^)]*)\): model from (?P<source>\S+) "
                  r"\[(?P<mctrl>auto|user)\] rbps=(?P<rbps>\d+) wbps=(?P<wbps>\d+) rrandiops=(?P<rrandiops>\d+) "
                  r"wrandiops=(?P<wrandiops>\d+); qos (?P<enable>on|off) \[(?P<qctrl>auto|user)\] "
                  r"rpct=(?P<rpct>[\d.]+) rlat=(?P<rlat>\d+)us wpct=(?P<wpct>[\d.]+) wlat=(?P<wlat>\d+)us "
                  r"vrate (?P<min>[\d.]+)-(?P<max>[\d.]+)%(?: \((?P<qsource>[^)]*)\))?$")
SLICE_IDLE = re.compile(r"^slice (?P<name>\S+): no cgroup \(nothing runs in it yet: systemd creates it with the persisted "
                        r"settings when a unit starts there\)$")
SLICE = re.compile(r"^slice (?P<name>\S+): io\.weight (?P<weight>\d+|-)(?P<rest>.*), cpu\.weight (?P<cpu>\d+|-)$")
IO_MAX = re.compile(r"^io\.max (?P<dev>\d+:\d+)(?P<caps>(?: \w+=\d+)*)$")
MEMORY = re.compile(r"^(?P<file>memory\.(?:min|low|high)) (?P<value>\d+|max)(?: \((?P<pct>[\d.]+)% of RAM\))?$")
HEALTH = re.compile(r"^health gate: (?P<scope>inference slice|host) io pressure some avg10 (?P<avg10>[\d.]+)% "
                    r"\(read by (?P<source>host_profile|io_facts); warn (?P<warn>[\d.]+)%, fail (?P<fail>[\d.]+)%\)$")
TENANTS = ("inference", "training")


def _num(value):
    return float(value)


def _slice_problems(line, name, result, ram):
    """Problems of one 'slice ...' line against the slice's result (the cgroup module's kernel values), and the
    io.max caps and memory files the line shows."""
    kernel = result["kernel"]
    want_name = result.get("name", name + ".slice")
    idle = all(value is None for value in kernel.values())
    m = (SLICE_IDLE if idle else SLICE).match(line)
    if not m:
        return [f"not the {'idle ' if idle else ''}slice line of {want_name}: {line!r}"], {}, {}
    out = []
    if idle:
        return ([] if m["name"] == want_name else [f"slice {m['name']}: expected {want_name}"]), None, None
    if m["name"] != want_name:
        out.append(f"slice {m['name']}: expected {want_name}")
    weight = (kernel.get("io.weight") or {}).get("default")
    if m["weight"] != ("-" if weight is None else str(weight)):
        out.append(f"{want_name}: io.weight {m['weight']}, the result says {weight}")
    cpu = kernel.get("cpu.weight")
    if m["cpu"] != ("-" if cpu is None else str(cpu)):
        out.append(f"{want_name}: cpu.weight {m['cpu']}, the result says {cpu}")
    parts = [p for p in m["rest"].split(", ") if p]
    io_max = {}
    memory = {}
    for part in parts:
        cap = IO_MAX.match(part)
        mem = MEMORY.match(part)
        if cap:
            io_max[cap["dev"]] = dict(kv.split("=") for kv in cap["caps"].split())
        elif mem:
            memory[mem["file"]] = mem
        else:
            out.append(f"{want_name}: unreadable part {part!r}")
    want_max = {dev: {k: str(v) for k, v in caps.items() if v != "max"} for dev, caps in (kernel.get("io.max") or {}).items()}
    if io_max != want_max:
        out.append(f"{want_name}: io.max {io_max}, the result says {want_max}")
    want_memory = [f for f in ("memory.min", "memory.low", "memory.high") if f in kernel]
    if sorted(memory) != sorted(want_memory):
        out.append(f"{want_name}: memory files {sorted(memory)}, the result has {want_memory}")
    for f, mem in memory.items():
        value = kernel.get(f)
        if mem["value"] != str(value):
            out.append(f"{want_name}: {f} {mem['value']}, the result says {value}")
        if isinstance(value, int) and ram:
            if mem["pct"] is None or abs(_num(mem["pct"]) - 100 * value / ram) > 0.05:
                out.append(f"{want_name}: {f} share {mem['pct']}% of RAM, expected {100 * value / ram:.1f}%")
    return out, io_max, memory


def check(lines, inputs, roles=None, model_source=None, health_source=None, caps=False, memory_protection=False):
    """Every problem of the summary `lines` against `inputs` (what they were rendered from) and the expectations."""
    problems = []
    lines = list(lines)
    if not lines:
        return ["the summary is empty"]
    host = HOST.match(lines[0])
    disks = inputs["io_baseline_disks"]
    if not host:
        return [f"line 1 is not the host line: {lines[0]!r}"]
    groups = [g for g in host["groups"].split(" + ") if g]
    want_groups = [g for g in inputs["group_names"] if g in TENANTS]
    if sorted(groups) != sorted(want_groups):
        problems.append(f"host line names {groups}, the host's groups are {want_groups}")
    if roles is not None and sorted(groups) != sorted(roles):
        problems.append(f"host line names {groups}, expected {sorted(roles)}")
    if host["host"] != inputs["inventory_hostname"]:
        problems.append(f"host line names {host['host']}, the host is {inputs['inventory_hostname']}")
    if int(host["n"]) != len(disks):
        problems.append(f"host line counts {host['n']} data disk(s), the apply returned {len(disks)}")
    elapsed = inputs.get("io_isolation_reboot_elapsed")
    if elapsed is not None:
        if host["elapsed"] != str(elapsed):
            problems.append(f"host line: the host rebooted in {elapsed} s, the line says {lines[0]!r}")
    elif host["required"] != str(bool(inputs.get("io_isolation_reboot_required", False))):
        problems.append(f"host line: reboot required {host['required']}, "
                        f"the result says {inputs.get('io_isolation_reboot_required')}")
    rest = lines[1:]
    by_name = {d["device"]["name"]: d for d in disks}
    seen = []
    while rest and rest[0].startswith("disk "):
        line = rest.pop(0)
        m = DISK.match(line)
        if not m:
            problems.append(f"not a disk line: {line!r}")
            continue
        disk = by_name.get(m["name"])
        if disk is None:
            problems.append(f"disk line for {m['name']}, which is not a data disk: {line!r}")
            continue
        seen.append(m["name"])
        dev, model, qos = disk["device"], disk["model"], disk["qos"]
        source = inputs["io_baseline_model_sources"].get(dev["stable_selector"], "?")
        want = {"majmin": dev["majmin"], "serial": str(dev["serial"]), "source": source, "mctrl": model["ctrl"],
                "qctrl": qos["ctrl"], "enable": "on" if qos["enable"] else "off"}
        want.update({k: model[k] for k in ("rbps", "wbps", "rrandiops", "wrandiops")})
        want.update({k: qos[k] for k in ("rpct", "rlat", "wpct", "wlat", "min", "max")})
        for key, value in want.items():
            same = _num(m[key]) == _num(value) if isinstance(value, (int, float)) else m[key] == str(value)
            if not same:
                problems.append(f"disk {m['name']}: {key} {m[key]}, the result says {value}")
        qsrc = (inputs.get("io_baseline_qos_sources") or {}).get(dev["stable_selector"])
        if qsrc is not None:
            said = {"solution": f"the {qsrc.get('solution')} solution",
                    "calibration": "the calibration entry's QoS"}.get(qsrc.get("from"), "the roles' QoS")
            if m["qsource"] != said:
                problems.append(f"disk {m['name']}: QoS from {m['qsource']!r}, the plan says {said!r}")
        if model_source is not None and m["source"] != model_source:
            problems.append(f"disk {m['name']}: model from {m['source']}, expected {model_source}")
        for key in ("rbps", "wbps", "rrandiops", "wrandiops"):
            if int(m[key]) <= 0:
                problems.append(f"disk {m['name']}: model {key}={m[key]} is not a measured value")
    if sorted(seen) != sorted(by_name):
        problems.append(f"disk lines for {sorted(seen)}, the data disks are {sorted(by_name)}")
    ram = inputs.get("ansible_facts", {}).get("io_isolation", {}).get("host", {}).get("memory_bytes") or 0
    for tenant in TENANTS:
        result = (inputs.get(f"{tenant}_results") or {}).get("slice")
        if not result or "kernel" not in result:
            continue
        if not rest or not rest[0].startswith("slice "):
            problems.append(f"no slice line for {tenant}")
            continue
        found, io_max, memory = _slice_problems(rest.pop(0), tenant, result, ram)
        problems.extend(found)
        if tenant == "training" and caps and not io_max:
            problems.append("training slice line shows no io.max cap")
        if tenant == "inference" and memory_protection and not {"memory.min", "memory.low"} & set(memory or {}):
            problems.append("inference slice line shows no memory.min or memory.low")
    if roles is not None:
        for tenant in roles:
            if not ((inputs.get(f"{tenant}_results") or {}).get("slice") or {}).get("kernel"):
                problems.append(f"no {tenant} slice in the results")
    if not rest:
        return problems + ["no health gate line"]
    line = rest.pop(0)
    health = HEALTH.match(line)
    if not health:
        problems.append(f"not the health gate line: {line!r}")
    else:
        reading = inputs.get("io_isolation_health")
        if reading is None:
            problems.append("a health reading is printed but none was taken")
        else:
            for key in ("scope", "source"):
                if health[key] != reading[key]:
                    problems.append(f"health gate: {key} {health[key]}, the reading says {reading[key]}")
            for key, field in (("avg10", "avg10"), ("warn", "warn_pct"), ("fail", "fail_pct")):
                if _num(health[key]) != _num(reading[field]):
                    problems.append(f"health gate: {key} {health[key]}, the reading says {reading[field]}")
        if health_source is not None and health["source"] != health_source:
            problems.append(f"health gate read by {health['source']}, expected {health_source}")
    problems.extend(f"unexpected line: {line!r}" for line in rest)
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("file", help="<io_isolation_summary_dir>/<host>.json")
    p.add_argument("--roles", help="comma-separated tenants the host runs (inference,training)")
    p.add_argument("--model-source", help="where every data disk's model must come from (calibration, kernel, explicit)")
    p.add_argument("--health-source", choices=("host_profile", "io_facts"))
    p.add_argument("--caps", action="store_true", help="the training slice must show io.max caps")
    p.add_argument("--memory-protection", action="store_true", help="the inference slice must show memory.min/low")
    p.add_argument("--quiet", action="store_true", help="print only the problems and the count, not the lines")
    a = p.parse_args(argv)
    with open(a.file, encoding="utf-8") as f:
        rec = json.load(f)
    problems = check(rec["lines"], rec["inputs"], roles=a.roles.split(",") if a.roles else None,
                     model_source=a.model_source, health_source=a.health_source, caps=a.caps,
                     memory_protection=a.memory_protection)
    for line in [] if a.quiet else rec["lines"]:
        print(f"summary: {line}")
    for problem in problems:
        print(f"summary: PROBLEM: {problem}")
    print(f"summary: {len(rec['lines'])} lines checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
