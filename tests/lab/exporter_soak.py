# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The io_metrics exporter soak (issue 38): the exporter on its timer for an hour on a lab guest under a changing load,
each run's memory and CPU recorded, the textfile checked at every scrape, and no process, kprobe or BPF program left.

1. A lab guest (single-threaded TCG: a kprobe attached while the other vCPU runs the probed function crashed guests
   under multi-threaded TCG) gets the roles (site.yml, both tenants) and the io_metrics role with a 5 s interval and
   a latency window (the histogram's bpftrace: its kprobes and BPF programs are attached and removed by every run).
2. A measuring drop-in on the exporter's unit, ``ExecStartPre=+`` and ``ExecStopPost=+`` (full privileges, outside
   the sandbox; the exporter's own ``ExecStart`` and its sandbox are unchanged), writes one line when a run starts
   and one when it has ended: the run's cgroup ``memory.peak`` (the highest memory charged to the run: the exporter,
   bpftrace, their page cache and kernel memory) and ``cpu.stat usage_usec`` (what systemd's ``CPUUsageNSec``
   reads), systemd's result and exit status, the processes still in the cgroup besides the recorder, and the
   kprobes registered (``/sys/kernel/debug/kprobes/list``, ``/sys/kernel/tracing/kprobe_events``).
3. A sampler on the guest (outside the exporter's unit) copies the textfile every SCRAPE seconds with its age, the
   unit's state and, while no run is active, the bpftrace processes and kprobes; once a minute it scrapes the
   guest's node_exporter (``node_textfile_scrape_error``). The controller collects the samples every minute and
   checks each textfile with ``promtool check metrics`` (once per distinct content).
4. The load changes every PHASE seconds (by default a sixteenth of the soak, so each quarter holds one cycle): fio
   reads in inference.slice on lab-nvme-a, fio writes in training.slice on lab-nvme-b, both, nothing.
5. At the end the timer is stopped; no bpftrace process, no kprobe, and no more BPF programs than before the
   exporter was installed; the journal holds no process systemd had to kill at a run's end.

The summary (runs, failed runs, invalid scrapes, memory and CPU per run min/median/max, growth from the first quarter
of the runs to the last) is written as JSON and Markdown; the soak fails when a bound is exceeded (``judge``).
  usage: python3 tests/lab/exporter_soak.py VENV_BIN [--guest debian13] [--seconds 3600] [--out DIR]
"""

import argparse
import datetime
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from labcall import REPO, lab  # noqa: E402  pylint: disable=wrong-import-position
from labcall import guest as _guest  # noqa: E402  pylint: disable=wrong-import-position

UNIT = "aiinfra-io-metrics"
TEXTFILE = "/var/lib/prometheus/node-exporter/aiinfra_io_isolation.prom"
SOAK_DIR = "/var/lib/aiinfra-soak"
MIB = 1024 * 1024

# Bounds (judge); each one an option. Memory and CPU per run: ceilings (an eighth of the guest's 2 GiB; three times
# the exporter's own timeout); the leak test is the growth: the last quarter's median over the first quarter's, the
# quarters each holding one cycle of the load. The CPU's growth is reported, not judged (0: off): under TCG a guest's
# CPU time includes the time the host took its vCPU away, and the other VMs on a shared host come and go within an hour
# (the summary gives the guest's share of a host core, vm_host_cpu_share). The textfile's age and the gap between
# runs: the timer still runs.
BOUNDS = {
    "max_memory_mib": 256.0,
    "max_cpu_seconds": 60.0,
    "memory_growth": 1.10,
    "cpu_growth": 0.0,
    "max_textfile_age_seconds": 120.0,
    "max_gap_seconds": 120.0,
}

# One line per run event, in the run's own cgroup, with the shell's builtins only (no process of its own besides
# the shell): "start ID UPTIME" and "stop ID UPTIME RESULT EXIT_CODE EXIT_STATUS PEAK_BYTES USAGE_USEC PROCS
# KPROBES KPROBE_EVENTS".
RECORDER = r"""#!/bin/sh
# aiinfra.io_isolation exporter soak (tests/lab/exporter_soak.py): one line per run event; always succeeds.
read -r up _ < /proc/uptime
read -r line < /proc/self/cgroup
cg=/sys/fs/cgroup${line#0::}
if [ "$1" = start ]; then
  echo "start $INVOCATION_ID $up" >> %(dir)s/runs.log
  exit 0
fi
peak=-; [ -r "$cg/memory.peak" ] && read -r peak < "$cg/memory.peak"
usage=-; while read -r k v; do [ "$k" = usage_usec ] && usage=$v; done < "$cg/cpu.stat"
procs=0; while read -r p; do [ "$p" = "$$" ] || procs=$((procs + 1)); done < "$cg/cgroup.procs"
kp=0; if [ -r /sys/kernel/debug/kprobes/list ]; then while read -r l; do kp=$((kp + 1)); done < /sys/kernel/debug/kprobes/list; fi
ke=0; if [ -r /sys/kernel/tracing/kprobe_events ]; then while read -r l; do ke=$((ke + 1)); done < /sys/kernel/tracing/kprobe_events; fi
echo "stop $INVOCATION_ID $up ${SERVICE_RESULT:--} ${EXIT_CODE:--} ${EXIT_STATUS:--} $peak $usage $procs $kp $ke" >> %(dir)s/runs.log
exit 0
""" % {"dir": SOAK_DIR}

DROPIN = """[Service]
# aiinfra.io_isolation exporter soak (tests/lab/exporter_soak.py): measuring only, with full privileges
ExecStartPre=+/bin/sh %(dir)s/record start
ExecStopPost=+/bin/sh %(dir)s/record stop
""" % {"dir": SOAK_DIR}

# Every SCRAPE seconds one sample file (written under a temporary name, then renamed): its time, the exporter unit's
# state and invocation before and after, bpftrace processes and kprobes, the textfile's age and content; every
# NODE_EVERY samples the guest node_exporter's textfile collector lines.
SAMPLER = r"""#!/bin/bash
# aiinfra.io_isolation exporter soak (tests/lab/exporter_soak.py): the sampler.
scrape=$1 node_every=$2 out=%(dir)s/out
mkdir -p "$out"
count() { local n=0 l; [ -r "$1" ] || { echo 0; return; }; while read -r l; do n=$((n + 1)); done < "$1"; echo $n; }
n=0
while :; do
  n=$((n + 1))
  f=$(printf '%%s/%%08d' "$out" "$n")
  {
    echo "ts $EPOCHREALTIME"
    echo "before $(systemctl show -p ActiveState -p InvocationID %(unit)s.service | tr '\n' ' ')"
    echo "bpftrace $(pgrep -c -x bpftrace)"
    echo "kprobes $(count /sys/kernel/debug/kprobes/list) $(count /sys/kernel/tracing/kprobe_events)"
    echo "after $(systemctl show -p ActiveState -p InvocationID %(unit)s.service | tr '\n' ' ')"
    if [ $((n %% node_every)) -eq 0 ]; then
      python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=30).read().decode())' \
        2>/dev/null | grep -E '^node_textfile_(scrape_error|mtime_seconds)' | sed 's/^/node /'
      echo "node-done $?"
    fi
    # one copy (the exporter renames a new file over the old one): its mtime, its size in bytes, its text
    if cp -p %(textfile)s "$f.prom" 2>/dev/null; then
      echo "mtime $(stat -c %%.9Y "$f.prom")"
      echo "textfile $(stat -c %%s "$f.prom")"
      cat "$f.prom"
      rm -f "$f.prom"
    else
      echo "textfile-missing"
    fi
  } > "$f.tmp" 2>&1
  mv "$f.tmp" "$f.s"
  sleep "$scrape"
done
""" % {"dir": SOAK_DIR, "unit": UNIT, "textfile": TEXTFILE}

# Until the exporter's run (a oneshot service: "activating" while it runs) has ended.
WAIT_RUN = ("until systemctl show -P ActiveState %s.service | grep -qxE 'inactive|failed'; do sleep 1; done" % UNIT)

# The load's phases, in order, repeated: (name, [(slice, disk serial, fio arguments)]).
PHASES = (
    ("read", [("inference.slice", "lab-nvme-a", ["--rw=randread", "--bs=4k", "--rate_iops=200", "--readonly"])]),
    ("write", [("training.slice", "lab-nvme-b", ["--rw=write", "--bs=64k", "--rate_iops=50"])]),
    ("mixed", [("inference.slice", "lab-nvme-a", ["--rw=randread", "--bs=4k", "--rate_iops=200", "--readonly"]),
               ("training.slice", "lab-nvme-b", ["--rw=write", "--bs=64k", "--rate_iops=50"])]),
    ("idle", []),
)


def say(msg):
    print("exporter-soak: %s" % msg, flush=True)


def guest(name, script, check=True, attempts=6):
    """labcall.guest, again after a failed connection (ssh's 255): on a host shared with other VMs a new connection
    to a busy TCG guest can time out in its banner exchange."""
    for attempt in range(attempts):
        r = _guest(name, script, check=False)
        if r.returncode != 255:
            break
        say("ssh failed (attempt %d of %d): %s" % (attempt + 1, attempts, r.stderr.strip()[-200:]))
        time.sleep(10)
    if check and r.returncode != 0:
        raise SystemExit("guest command failed (rc %d): %s\n%s%s" % (r.returncode, script, r.stdout, r.stderr))
    return r


def host_cpu(pid):
    """CPU seconds the QEMU process has used (utime + stime), None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------------------------
# Parsing and judgement (tests/unit/lab/test_exporter_soak.py)

def parse_runs(text):
    """The recorder's lines: {invocation: run} for each run with both a start and a stop line, in start order. A run
    is {id, start, end, seconds, result, exit_code, exit_status, memory_peak, cpu_seconds, procs, kprobes,
    kprobe_events}; a value the kernel did not give is None."""
    starts, runs = {}, []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "start":
            starts[words[1]] = float(words[2])
        elif len(words) == 11 and words[0] == "stop" and words[1] in starts:
            start = starts.pop(words[1])

            def num(word, kind=int):
                return None if word == "-" else kind(word)
            usage = num(words[7])
            runs.append({
                "id": words[1], "start": start, "end": float(words[2]), "seconds": round(float(words[2]) - start, 3),
                "result": words[3], "exit_code": words[4], "exit_status": words[5], "memory_peak": num(words[6]),
                "cpu_seconds": None if usage is None else usage / 1e6, "procs": int(words[8]),
                "kprobes": int(words[9]), "kprobe_events": int(words[10])})
    return sorted(runs, key=lambda r: r["start"])


def run_failed(run):
    return run["result"] != "success" or run["exit_status"] not in ("0", "-") or (
        run["exit_code"] not in ("exited", "-"))


def split_batch(text):
    """The controller's batch of sample files ("=== NAME" then its text): [(name, text)]."""
    out, name, lines = [], None, []
    for line in text.split("\n"):
        if line.startswith("=== "):
            if name is not None:
                out.append((name, "\n".join(lines)))
            name, lines = line[4:].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        out.append((name, "\n".join(lines)))
    return out


def parse_sample(text):
    """One sample file: {ts, before: (state, invocation), after: ..., bpftrace, kprobes, kprobe_events, mtime,
    textfile (None when missing), node: {metric line: value} or None, node_ok}."""
    s = {"ts": None, "before": None, "after": None, "bpftrace": None, "kprobes": None, "kprobe_events": None,
         "mtime": None, "textfile": None, "truncated": False, "node": None, "node_ok": None}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        word, _sep, rest = line.partition(" ")
        if word == "ts":
            s["ts"] = float(rest)
        elif word in ("before", "after"):
            # systemctl show's "ActiveState=inactive InvocationID=..." in the order systemd lists them
            props = dict(part.partition("=")[::2] for part in rest.split())
            s[word] = (props.get("ActiveState", ""), props.get("InvocationID", ""))
        elif word == "bpftrace":
            s["bpftrace"] = int(rest or 0)
        elif word == "kprobes":
            a, b = rest.split()
            s["kprobes"], s["kprobe_events"] = int(a), int(b)
        elif word == "node":
            name, _sep, value = rest.rpartition(" ")
            s["node"] = s["node"] or {}
            s["node"][name] = float(value)
        elif word == "node-done":
            s["node"] = s["node"] or {}
            s["node_ok"] = "node_textfile_scrape_error" in s["node"]
        elif word == "mtime":
            s["mtime"] = float(rest)
        elif word == "textfile":
            # the copy's bytes exactly (what follows may be the batch's separator)
            size, data = int(rest), "\n".join(lines[i + 1:]).encode()
            s["textfile"] = data[:size].decode(errors="replace")
            s["truncated"] = len(data) < size
            break
        elif line == "textfile-missing":
            break
    return s


def idle_leftovers(sample):
    """What a sample taken while no run was active found left over (bpftrace processes, kprobes): [] when the unit
    was active at either end of the sample or a run started in between."""
    before, after = sample["before"], sample["after"]
    if not before or not after or before != after or before[0] not in ("inactive", "failed"):
        return []
    found = []
    if sample["bpftrace"]:
        found.append("%d bpftrace processes" % sample["bpftrace"])
    if sample["kprobes"] or sample["kprobe_events"]:
        found.append("%d kprobes, %d kprobe events" % (sample["kprobes"], sample["kprobe_events"]))
    return found


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def growth(values):
    """The last quarter's median over the first quarter's (None with fewer than 8 values or a zero first median)."""
    values = [v for v in values if v is not None]
    if len(values) < 8:
        return None
    q = len(values) // 4
    first, last = statistics.median(values[:q]), statistics.median(values[-q:])
    return round(last / first, 4) if first else None


def slope_per_hour(points):
    """Least-squares slope of (seconds, value) points, per hour; None with fewer than 2 distinct times."""
    points = [(t, v) for t, v in points if v is not None]
    if len(points) < 2:
        return None
    times, values = [t for t, v in points], [v for t, v in points]
    mt, mv = statistics.fmean(times), statistics.fmean(values)
    den = sum((t - mt) ** 2 for t in times)
    if not den:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / den * 3600


def summarize(runs, scrapes, leftovers, final, bounds, meta):
    """The soak's figures. scrapes: [{ts, valid, age, problem}]; leftovers: [text]; final: the end checks."""
    memory = [r["memory_peak"] for r in runs]
    cpu = [r["cpu_seconds"] for r in runs]
    starts = [r["start"] for r in runs]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    t0 = starts[0] if starts else 0
    mem_mib = [None if m is None else m / MIB for m in memory]
    return dict(meta, **{
        "bounds": dict(bounds),
        "runs": len(runs),
        "failed_runs": sum(1 for r in runs if run_failed(r)),
        "failed_examples": [r for r in runs if run_failed(r)][:5],
        "run_seconds": spread([r["seconds"] for r in runs]),
        "run_period_seconds": spread(gaps),
        "memory_peak_mib": spread(mem_mib),
        "memory_growth": growth(memory),
        "memory_slope_mib_per_hour": slope_per_hour([(s - t0, m) for s, m in zip(starts, mem_mib)]),
        "cpu_seconds_per_run": spread(cpu),
        "cpu_growth": growth(cpu),
        "cpu_slope_seconds_per_hour": slope_per_hour([(s - t0, c) for s, c in zip(starts, cpu)]),
        "runs_with_processes_at_stop": sum(1 for r in runs if r["procs"]),
        "runs_with_kprobes_at_stop": sum(1 for r in runs if r["kprobes"] or r["kprobe_events"]),
        "scrapes": len(scrapes),
        "invalid_scrapes": sum(1 for s in scrapes if not s["valid"]),
        "invalid_examples": [s for s in scrapes if not s["valid"]][:5],
        "distinct_textfiles": meta.get("distinct_textfiles"),
        "textfile_age_seconds": spread([s["age"] for s in scrapes]),
        "leftovers": leftovers,
        "final": final,
    })


def judge(summary):
    """The bounds the soak asserts: [problem]; empty when it passed."""
    b = summary["bounds"]
    problems = []
    if not summary["runs"]:
        problems.append("no exporter run was recorded")
    if summary["failed_runs"]:
        problems.append("%d of %d runs failed" % (summary["failed_runs"], summary["runs"]))
    if not summary["scrapes"]:
        problems.append("no scrape was taken")
    if summary["invalid_scrapes"]:
        problems.append("%d of %d scrapes invalid" % (summary["invalid_scrapes"], summary["scrapes"]))
    checks = (
        ("memory_peak_mib", "max", "max_memory_mib", "a run's memory peak %.1f MiB is above %.1f MiB"),
        ("cpu_seconds_per_run", "max", "max_cpu_seconds", "a run's CPU %.2f s is above %.2f s"),
        ("textfile_age_seconds", "max", "max_textfile_age_seconds", "the textfile was %.0f s old, above %.0f s"),
        ("run_period_seconds", "max", "max_gap_seconds", "%.0f s between two runs' starts, above %.0f s"),
    )
    for key, stat, bound, text in checks:
        if summary.get(key) and summary[key][stat] > b[bound]:
            problems.append(text % (summary[key][stat], b[bound]))
    for key, bound, what in (("memory_growth", "memory_growth", "memory peak"), ("cpu_growth", "cpu_growth", "CPU")):
        if summary.get(key) is not None and b[bound] and summary[key] > b[bound]:
            problems.append("the runs' median %s grew %.2fx from the first quarter to the last (bound %.2fx)"
                            % (what, summary[key], b[bound]))
    if summary["runs_with_processes_at_stop"]:
        problems.append("%d runs left processes in the unit's cgroup" % summary["runs_with_processes_at_stop"])
    if summary["runs_with_kprobes_at_stop"]:
        problems.append("%d runs left kprobes registered after they ended" % summary["runs_with_kprobes_at_stop"])
    problems.extend("left over: %s" % text for text in summary["leftovers"][:10])
    problems.extend(summary["final"].get("problems", []))
    return problems


def markdown(summary, problems):
    def fmt(sp, unit, digits=1):
        if not sp:
            return "-"
        return "%.*f / %.*f / %.*f %s" % (digits, sp["min"], digits, sp["median"], digits, sp["max"], unit)

    rows = [
        ("guest", "%s (%s), kernel %s, systemd %s" % (summary["guest"], summary["accel"], summary["kernel"],
                                                      summary["systemd"])),
        ("soak", "%d s, interval %d s, latency window %d s, load phases of %d s (%s)" % (
            summary["seconds"], summary["interval"], summary["latency_seconds"], summary["phase_seconds"],
            ", ".join(summary["phases"]))),
        ("runs (failed)", "%d (%d)" % (summary["runs"], summary["failed_runs"])),
        ("run length min / median / max", fmt(summary["run_seconds"], "s")),
        ("start to start min / median / max", fmt(summary["run_period_seconds"], "s")),
        ("memory peak per run min / median / max", fmt(summary["memory_peak_mib"], "MiB")),
        ("memory growth, last quarter / first (slope)", "%s (%s MiB/h)" % (
            summary["memory_growth"], "-" if summary["memory_slope_mib_per_hour"] is None
            else "%.2f" % summary["memory_slope_mib_per_hour"])),
        ("CPU per run min / median / max", fmt(summary["cpu_seconds_per_run"], "s", 2)),
        ("CPU growth, last quarter / first (slope)", "%s (%s s/h)" % (
            summary["cpu_growth"], "-" if summary["cpu_slope_seconds_per_hour"] is None
            else "%.3f" % summary["cpu_slope_seconds_per_hour"])),
        ("scrapes (invalid), distinct files checked", "%d (%d), %s" % (
            summary["scrapes"], summary["invalid_scrapes"], summary["distinct_textfiles"])),
        ("textfile age at a scrape min / median / max", fmt(summary["textfile_age_seconds"], "s")),
        ("node_exporter scrapes (textfile errors)", "%s (%s)" % (summary.get("node_scrapes"),
                                                                 summary.get("node_scrape_errors"))),
        ("runs with processes / kprobes left at their end", "%d / %d" % (
            summary["runs_with_processes_at_stop"], summary["runs_with_kprobes_at_stop"])),
        ("at the end", "; ".join("%s %s" % (k, v) for k, v in sorted(summary["final"].items()) if k != "problems")),
        ("the guest's share of a host core min / median / max", fmt(summary.get("vm_host_cpu_share"), "", 2)),
        ("result", "PASSED" if not problems else "FAILED: " + "; ".join(problems)),
    ]
    out = ["# io_metrics exporter soak: %s" % summary["guest"], "",
           "`make lab-soak` (tests/lab/exporter_soak.py), %s." % summary["date"], "", "| | |", "|---|---|"]
    out += ["| %s | %s |" % row for row in rows]
    out += ["", "Bounds: %s." % ", ".join("%s %s" % kv for kv in sorted(summary["bounds"].items())), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# The lab

def promtool_check(text):
    """(valid, problem) from promtool check metrics."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, text=True, capture_output=True, check=False)
    return r.returncode == 0, (r.stdout + r.stderr).strip()[-500:]


def put(name, path, text, mode="0644"):
    r = subprocess.run(LAB_SSH(name) + ["install -D -m %s /dev/stdin %s" % (mode, path)], input=text, text=True,
                       capture_output=True, check=False)
    if r.returncode:
        raise SystemExit("could not write %s on the guest: %s" % (path, r.stderr.strip()))


def LAB_SSH(name):  # noqa: N802  pylint: disable=invalid-name
    return [sys.executable, os.path.join(REPO, "tests", "lab", "lab.py"), "ssh", name, "--"]


def bpf_programs(name):
    """JIT-compiled BPF programs the kernel lists (/proc/kallsyms bpf_prog_ symbols) and whether the list is on."""
    out = guest(name, "cat /proc/sys/net/core/bpf_jit_kallsyms 2>/dev/null || echo -; "
                      "grep -c ' bpf_prog_' /proc/kallsyms || true", check=False).stdout.split()
    return (int(out[-1]), out[0]) if len(out) == 2 and out[-1].isdigit() else (-1, "?")


def fio_argv(unit, slc, disk, extra, seconds):
    return ["systemd-run", "--collect", "--quiet", "--slice=" + slc, "--unit=" + unit, "fio", "--name=" + unit,
            "--direct=1", "--ioengine=psync", "--time_based", "--runtime=%d" % seconds, "--filename=" + disk] + extra


class Soak:
    def __init__(self, a, name):
        self.a, self.name = a, name
        self.scrapes, self.leftovers, self.node = [], [], []
        self.checked = {}   # sha256 of a textfile -> (valid, problem)
        self.first_run_seen = False
        self.lost_batches = 0

    def collect(self):
        """Fetch and remove the samples written so far; check each one."""
        script = ("cd %s/out 2>/dev/null || exit 0; for f in $(ls | grep '[.]s$' | head -2000); do "
                  "printf '\\n=== %%s\\n' \"$f\"; cat \"$f\"; rm -f \"$f\"; done" % SOAK_DIR)
        r = guest(self.name, script, check=False)
        if r.returncode:
            say("collecting the samples failed (rc %d), samples of this batch may be lost: %s"
                % (r.returncode, r.stderr.strip()[-300:]))
            self.lost_batches += 1
        batch = r.stdout
        for _name, text in split_batch(batch):
            self.check(parse_sample(text))

    def check(self, s):
        self.leftovers.extend("%s at %.0f (no run active)" % (t, s["ts"]) for t in idle_leftovers(s))
        if s["node"] is not None:
            err = s["node"].get("node_textfile_scrape_error")
            self.node.append(err)
        if s["textfile"] is None:
            # before the first write the file may not be there yet; after it, a missing file is an invalid scrape
            if self.first_run_seen:
                self.scrapes.append({"ts": s["ts"], "valid": False, "age": None, "problem": "textfile missing"})
            return
        self.first_run_seen = True
        key = hashlib.sha256(s["textfile"].encode()).hexdigest()
        if key not in self.checked:
            self.checked[key] = promtool_check(s["textfile"])
        valid, problem = self.checked[key]
        if s["truncated"]:
            valid, problem = False, "the copy was cut short in transfer"
        if valid and not s["textfile"].strip():
            valid, problem = False, "empty textfile"
        age = None if s["mtime"] is None or s["ts"] is None else round(s["ts"] - s["mtime"], 3)
        self.scrapes.append({"ts": s["ts"], "valid": valid, "age": age, "problem": None if valid else problem})


def vm_pid(name):
    """The QEMU process of the lab VM (lab.py status), None when not found."""
    for row in (line.split() for line in lab("status").stdout.splitlines()):
        if row[:1] == [name] and len(row) > 3 and row[3].isdigit():
            return int(row[3])
    return None


def guest_facts(name):
    out = guest(name, "uname -r; systemctl --version | head -1").stdout.splitlines()
    return out[0].strip(), out[1].split()[1] if len(out) > 1 and len(out[1].split()) > 1 else "?"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("bin", help="the venv's bin directory (ansible-playbook)")
    p.add_argument("--guest", default="debian13", choices=("debian12", "debian13"))
    p.add_argument("--name", default=None, help="the lab VM's name (default soak-GUEST)")
    p.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS", 3600)))
    p.add_argument("--interval", type=int, default=5, help="io_metrics_interval_seconds")
    p.add_argument("--latency-seconds", type=int, default=2, help="io_metrics_latency_seconds (0: no histogram)")
    p.add_argument("--scrape-seconds", type=int, default=5)
    p.add_argument("--phase-seconds", type=int, default=0, help="default: a sixteenth of the soak, at least 30")
    p.add_argument("--out", default=os.path.join("tests", "lab", "results"),
                   help="directory for exporter-soak-GUEST.json/.md, relative to the checkout")
    p.add_argument("--keep", action="store_true", help="leave the VM running")
    p.add_argument("--exporter-only", action="store_true",
                   help="the io_metrics role alone, without site.yml first (the slices then exist while fio runs)")
    for key, value in BOUNDS.items():
        p.add_argument("--" + key.replace("_", "-"), type=float, default=value)
    p.add_argument("--report", metavar="RAW",
                   help="only summarize and judge the raw records an earlier soak kept (.cache/NAME-raw.json)")
    a = p.parse_args()
    bounds = {k: getattr(a, k) for k in BOUNDS}
    if a.report:
        with open(a.report) as f:
            raw = json.load(f)
        a.guest = raw["meta"]["guest"]
        return report(a, raw, bounds, time.monotonic())
    name = a.name or "soak-" + a.guest
    phase_seconds = a.phase_seconds or max(30, a.seconds // 16)
    t0 = time.monotonic()
    lab("down", name, "--purge")
    say(lab("up", a.guest, "--name", name, "--fresh-root", "--tcg-thread", "single", "--boot-attempts", "2")
        .stdout.strip().splitlines()[-1])
    soak = Soak(a, name)
    try:
        return run(a, name, soak, bounds, phase_seconds, t0)
    finally:
        if not a.keep:
            lab("down", name, "--purge", check=False)


def run(a, name, soak, bounds, phase_seconds, t0):
    cache = os.path.join(REPO, ".cache")
    os.makedirs(cache, exist_ok=True)
    inventory = os.path.join(cache, name + "-inventory.yml")
    groups = os.path.join(cache, name + "-groups.yml")
    with open(inventory, "w") as f:
        f.write(lab("inventory", name).stdout)
    with open(groups, "w") as f:
        f.write("all:\n  children:\n    inference:\n      hosts:\n        %s:\n    training:\n      hosts:\n"
                "        %s:\n" % (name, name))
    kernel, systemd = guest_facts(name)
    rows = [line.split() for line in lab("status").stdout.splitlines()]
    accel = "%s, single-threaded" % next((row[5] for row in rows if row[:1] == [name] and len(row) > 5), "?")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.cache/installed" % (REPO, REPO))
    t = time.monotonic()
    playbooks = ([] if a.exporter_only else [os.path.join(REPO, "playbooks", "site.yml")]) + [
        os.path.join(REPO, "tests", "lab", "exporter_soak.yml")]
    r = subprocess.run([os.path.join(a.bin, "ansible-playbook"), "-i", inventory, "-i", groups] + playbooks
                       + ["-e", "soak_interval=%d" % a.interval, "-e", "soak_latency=%d" % a.latency_seconds],
                       env=env, text=True, capture_output=True, check=False)
    if r.returncode:
        print(r.stdout[-8000:], r.stderr[-3000:], file=sys.stderr)
        raise SystemExit("exporter-soak: the roles and io_metrics failed to apply")
    say("%s (interval %d s, latency window %d s) applied in %.0f s"
        % ("io_metrics" if a.exporter_only else "site.yml and io_metrics", a.interval, a.latency_seconds,
           time.monotonic() - t))

    # the BPF programs before the measuring drop-in and the load: stop the timer for a moment, wait for the run
    guest(name, "systemctl stop %s.timer; %s" % (UNIT, WAIT_RUN))
    baseline_bpf, jit_kallsyms = bpf_programs(name)
    put(name, SOAK_DIR + "/record", RECORDER, "0755")
    put(name, SOAK_DIR + "/sample", SAMPLER, "0755")
    put(name, "/etc/systemd/system/%s.service.d/90-soak-record.conf" % UNIT, DROPIN)
    disks = dict(line.split() for line in guest(
        name, "lsblk -dno SERIAL,NAME | grep '^lab-nvme-[ab] '").stdout.splitlines())
    guest(name, "systemctl daemon-reload && systemctl start %s.timer && systemd-run --quiet --collect "
                "--unit=aiinfra-soak-sampler --property=Nice=5 /bin/bash %s/sample %d %d"
          % (UNIT, SOAK_DIR, a.scrape_seconds, max(1, 60 // a.scrape_seconds)))
    say("soak started: %d s, load phases of %d s on %s; BPF programs before: %d (bpf_jit_kallsyms %s)"
        % (a.seconds, phase_seconds, disks, baseline_bpf, jit_kallsyms))

    start = time.monotonic()
    end = start + a.seconds
    phase_no, next_phase, phases_run, load_failures, shares = 0, start, [], [], []
    qemu = vm_pid(name)
    last = (time.monotonic(), host_cpu(qemu) if qemu else None)
    while True:
        now = time.monotonic()
        used = host_cpu(qemu) if qemu else None
        if used is not None and last[1] is not None and now - last[0] >= 30:
            shares.append(round((used - last[1]) / (now - last[0]), 3))
            last = (now, used)
        if now >= end:
            break
        if now >= next_phase:
            phase, jobs = PHASES[phase_no % len(PHASES)]
            seconds = int(min(phase_seconds, end - now))
            for i, (slc, serial, extra) in enumerate(jobs):
                r = guest(name, " ".join(shlex.quote(w) for w in fio_argv(
                    "soak-%s-%d-%d" % (phase, phase_no, i), slc, "/dev/" + disks[serial], extra, seconds)), check=False)
                if r.returncode:
                    say("the %s phase's fio %d did not start (rc %d): %s" % (phase, i, r.returncode, r.stderr[-300:]))
                    load_failures.append("%s %d" % (phase, i))
            phases_run.append(phase)
            say("%5.0f s: %s phase for %d s; %d scrapes so far (%d invalid), %d checked textfiles" % (
                now - start, phase, seconds, len(soak.scrapes), sum(1 for s in soak.scrapes if not s["valid"]),
                len(soak.checked)))
            phase_no += 1
            next_phase += phase_seconds
        time.sleep(max(1.0, min(60.0, next_phase - time.monotonic(), end - time.monotonic())))
        soak.collect()

    # the end: load and sampler stopped, the timer stopped and its last run ended
    guest(name, "systemctl stop 'soak-*.service' aiinfra-soak-sampler.service %s.timer 2>/dev/null; "
                "%s" % (UNIT, WAIT_RUN), check=False)
    soak.collect()
    runs = parse_runs(guest(name, "cat %s/runs.log" % SOAK_DIR).stdout)
    end_bpf = bpf_programs(name)[0]
    left = guest(name, "pgrep -c -x bpftrace; cat /sys/kernel/debug/kprobes/list /sys/kernel/tracing/kprobe_events "
                       "2>/dev/null | wc -l; journalctl -q -o cat -u %s.service | grep -cE "
                       "'Killing process|remains running|left-over process' || true; "
                       "journalctl -q -o cat -u %s.service | grep -c 'aiinfra-io-metrics: gave up' || true"
                 % (UNIT, UNIT), check=False).stdout.split()
    left = (left + ["-1"] * 4)[:4] if all(w.isdigit() for w in left) else ["-1"] * 4
    final = {"bpftrace_processes": int(left[0]), "kprobes": int(left[1]), "processes_killed_by_systemd": int(left[2]),
             "runs_that_gave_up": int(left[3]), "bpf_programs_before": baseline_bpf, "bpf_programs_after": end_bpf}
    problems = []
    if -1 in final.values():
        problems.append("the end checks could not be read from the guest")
    if final["bpftrace_processes"] > 0:
        problems.append("%d bpftrace processes left at the end" % final["bpftrace_processes"])
    if final["kprobes"] > 0:
        problems.append("%d kprobes left at the end" % final["kprobes"])
    if final["processes_killed_by_systemd"] > 0:
        problems.append("systemd killed %d processes left at a run's end" % final["processes_killed_by_systemd"])
    if end_bpf < 0 or baseline_bpf < 0:
        problems.append("the BPF programs could not be counted")
    elif end_bpf > baseline_bpf:
        problems.append("%d BPF programs at the end, %d before the soak" % (end_bpf, baseline_bpf))
    node_errors = sum(1 for e in soak.node if e is None or e != 0)
    if node_errors:
        problems.append("%d of %d node_exporter scrapes had a textfile error or failed" % (node_errors, len(soak.node)))
    if load_failures:
        problems.append("%d of the load's fio jobs did not start" % len(load_failures))
    final["problems"] = problems
    meta = {"guest": a.guest, "kernel": kernel, "systemd": systemd, "accel": accel,
            "date": datetime.date.today().isoformat(), "seconds": a.seconds, "interval": a.interval,
            "latency_seconds": a.latency_seconds, "phase_seconds": phase_seconds, "phases": phases_run,
            "distinct_textfiles": len(soak.checked), "lost_batches": soak.lost_batches,
            "load_failures": load_failures, "vm_host_cpu_share": spread(shares), "node_scrapes": len(soak.node),
            "node_scrape_errors": node_errors,
            "wall_seconds": round(time.monotonic() - t0)}
    raw = {"runs": runs, "scrapes": soak.scrapes, "leftovers": soak.leftovers, "final": final, "meta": meta}
    with open(os.path.join(cache, name + "-raw.json"), "w") as f:
        json.dump(raw, f)
    return report(a, raw, bounds, t0)


def report(a, raw, bounds, t0):
    """The summary of the raw records, judged, written as JSON and Markdown; the exit status."""
    runs, meta = raw["runs"], raw["meta"]
    summary = summarize(runs, raw["scrapes"], raw["leftovers"], raw["final"], bounds, meta)
    verdict = judge(summary)
    summary["passed"] = not verdict
    summary["problems"] = verdict
    out = a.out if os.path.isabs(a.out) else os.path.join(REPO, a.out)
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "exporter-soak-%s" % a.guest)
    summary["per_run"] = [{k: r[k] for k in ("start", "seconds", "memory_peak", "cpu_seconds", "result")} for r in runs]
    for path, text in ((base + ".json", json.dumps(summary, indent=1, sort_keys=True) + "\n"),
                       (base + ".md", markdown(summary, verdict))):
        with tempfile.NamedTemporaryFile("w", dir=out, delete=False) as f:
            f.write(text)
        os.chmod(f.name, 0o644)
        os.replace(f.name, path)
    print(markdown(summary, verdict), flush=True)
    say("%s in %d s; %s(.json|.md)" % ("PASSED" if not verdict else "FAILED", time.monotonic() - t0,
                                       os.path.relpath(base, REPO)))
    return 0 if not verdict else 1


if __name__ == "__main__":
    sys.exit(main())
