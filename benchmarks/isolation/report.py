# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Report for the isolation benchmark: summary, Markdown, PNG plots and a self-contained HTML page.

bench.py runs a latency-sensitive reader fio job (inference.slice) alone, an antagonist fio job
(training.slice) alone, and both together under several isolation configurations, and hands the
results dict to the functions here:

  summarize(results)                 medians and spreads per solo job and per (config, reader, antagonist) cell,
                                     the reader's p99 as a multiple of its solo p99, the antagonist's bandwidth
                                     as a share of its solo bandwidth, and whether both targets are met; for a
                                     rate-bound reader whether it kept its rate and the antagonist's share of its
                                     frontier (RATE_TARGET), for a flat-out one its IOPS kept (FLAT_TARGET)
  markdown(results, summary)         GitHub Markdown tables, led by the rate-bound readers per configuration and
                                     the flat-out readers against their target
  plots(results, summary)            {name: PNG bytes}: latency-<reader>, throughput-<reader> (flat-out readers),
                                     frontier (rate-bound readers) and, with a QoS sweep, tradeoff-<reader>
  html(results, summary, images)     one HTML page with the tables and the images inlined
  write(results, outdir)             all of the above into outdir (results.json, results.md, report.html, *.png)

A CPU-bound antagonist (results["cpu_antagonists"], bench.py's CPU pair) gets the CPU table instead of the rate-bound
and flat-out ones: the reader's p99 against solo (per repeat too) and its rate kept, the CPUs each job could use, and
what the CPU hog kept - its hashing throughput against its own solo run, and the CPU time each slice used.

Optional parts of the results, each with its own table: "rates" (bench.py's rate_plan: each rate-bound reader's
rate and load, each antagonist's capacity, and where the capacity came from), "probe" in a run (the block layer's latency
per slice from the collection's eBPF probe, shown beside fio's), "calibration" (the calibrated model against
the disk's capacity), "sweep" (every pair once per QoS setting: share against p99 / solo, the
trade-off plots) and "unthrottled" (a whole results dict of a run on the unthrottled disk, shown as
a pair table of its own).

Any statistic may be missing in a broken run (a job that failed has null stats); such values are
skipped in medians and shown as an em dash. The spread is (max - min) / median over the repeats.

  .venv/bin/python benchmarks/isolation/report.py results.json OUTDIR   (re-render a saved run)
"""

import argparse
import base64
import html as htmlmod
import io
import json
import math
import os
import re
import statistics

READER_SLICE = "inference.slice"
ANTAGONIST_SLICE = "training.slice"
LATENCIES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
NINES = (50.0, 90.0, 99.0, 99.9, 99.99)
DASH = "\u2014"
TIMES = "\u00d7"
FIGSIZE = (10, 4)
DPI = 100
# The targets of issue 35. A rate-bound reader (an inference server at its planned rate): p99 at most 1.5x its solo
# p99 at the same rate, its rate kept (fio's IOPS or bandwidth at least 95% of the rate it was given: fio does not
# say when it fell behind), and the antagonist at least 60% of its frontier. A flat-out reader, which alone takes
# most of the disk: at least 80% of its solo IOPS and p99 at most 2x.
RATE_TARGET = {"p99_ratio": 1.5, "rate_tolerance": 0.05, "frontier_share": 0.60}
FLAT_TARGET = {"iops_kept": 0.80, "p99_ratio": 2.0}
# The figure of a job's stats in each unit of a rate or a frontier.
UNIT_STAT = {"iops": "iops", "bps": "bw_bytes"}


# ---------------------------------------------------------------------------------------------- summary

def _num(value):
    """A finite int or float, else None (bools, strings, NaN and None are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _dict(value):
    return value if isinstance(value, dict) else {}


def _stats(run, key):
    """The run's stats dict for reader_stats / antagonist_stats, None when the job failed or is absent."""
    stats = run.get(key)
    return stats if isinstance(stats, dict) and stats else None


def _agg(values):
    """{"median", "spread", "values"} over the known values; spread is None for < 2 values or a zero median."""
    vals = [v for v in values if _num(v) is not None]
    if not vals:
        return {"median": None, "spread": None, "values": []}
    med = statistics.median(vals)
    spread = (max(vals) - min(vals)) / med if len(vals) >= 2 and med else None
    return {"median": med, "spread": spread, "values": vals}


def _percentiles(stats):
    """fio's clat percentiles as {float percentile: ns}, unparsable entries dropped."""
    out = {}
    for key, value in _dict(stats.get("percentiles")).items():
        try:
            pct = float(key)
        except (TypeError, ValueError):
            continue
        if _num(value) is not None and math.isfinite(pct):
            out[pct] = value
    return out


def _latency(stats, name, pct):
    """clat_ns[name] (p50, p99, p99.9), falling back to the matching entry of the percentiles dict."""
    value = _num(_dict(stats.get("clat_ns")).get(name))
    if value is not None:
        return value
    for key, val in _percentiles(stats).items():
        if abs(key - pct) < 1e-6:
            return val
    return None


def _median_percentiles(stats_list):
    """{"%.6f" % percentile: median ns} over the runs, in percentile order."""
    by_pct = {}
    for stats in stats_list:
        for pct, value in _percentiles(stats).items():
            by_pct.setdefault(pct, []).append(value)
    return dict(("%.6f" % pct, statistics.median(by_pct[pct])) for pct in sorted(by_pct))


def _job(stats_list):
    """Medians and spreads of one job's stats over its repeats."""
    out = {"n": len(stats_list),
           "iops": _agg([s.get("iops") for s in stats_list]),
           "bw_bytes": _agg([s.get("bw_bytes") for s in stats_list]),
           # the CPU burner's work (guest.py's cpu_stats); None for fio jobs
           "hashed_bps": _agg([s.get("hashed_bps") for s in stats_list])}
    for name, pct in LATENCIES:
        out[name] = _agg([_latency(s, name, pct) for s in stats_list])
    out["percentiles"] = _median_percentiles(stats_list)
    return out


def _order(results, listed, field, runs):
    """The presentation order: results[listed], then any name that only appears in the runs."""
    order = [x for x in (results.get(listed) or []) if isinstance(x, str)]
    for run in runs:
        name = run.get(field)
        if isinstance(name, str) and name not in order:
            order.append(name)
    return order


def _runs(results):
    return [r for r in (results.get("runs") or []) if isinstance(r, dict)]


def _solo_stats(runs, configs, field, other, name, stats_key):
    """(config, stats of its solo runs) of the first config (in presentation order) that has any with stats."""
    for config in configs:
        stats = [_stats(run, stats_key) for run in runs
                 if run.get("config") == config and run.get(field) == name and run.get(other) is None]
        stats = [s for s in stats if s is not None]
        if stats:
            return config, stats
    return None, []


def _solo(runs, configs, field, other, name, stats_key):
    """The solo runs of the first config (in presentation order) that has any with stats, summarised."""
    config, stats = _solo_stats(runs, configs, field, other, name, stats_key)
    return dict(config=config, **_job(stats)) if stats else None


def _ratio(num, den):
    return num / den if num is not None and den else None


def _median_of(solo, key):
    return solo[key]["median"] if solo else None


def summarize(results, p99_ratio_target=1.5, bw_share_target=0.40):
    """Medians per solo job and per contended (config, reader, antagonist) cell, with the derived ratios.

    Returns {"targets": {"p99_ratio", "bw_share"}, "solo": {"readers": {name: job}, "antagonists": {name: job}},
    "cells": [cell]}. A solo job is None when no config has a solo run of it with stats, else {"config" (the
    reference: the first config in presentation order with such runs), "n", "iops", "bw_bytes", "p50", "p99",
    "p99.9" (each {"median", "spread", "values"}), "percentiles" ({"%f" percentile: median ns})}.
    A cell (configs x readers x antagonists order, only combinations with runs): {"config", "reader",
    "antagonist" (names), "runs", "n" (runs with reader stats), "antagonist_n", "reader_stats" ({"iops",
    "bw_bytes", "p50", "p99", "p99.9"}), "reader_percentiles", "antagonist_bw", "antagonist_iops",
    "pressure" ({slice: {"some", "full"}: median}), "vrate_mean", "p99_ratio", "p999_ratio", "bw_share", "met"}.
    """
    runs = _runs(results)
    configs = _order(results, "configs", "config", runs)
    readers = _order(results, "readers", "reader", runs)
    antagonists = _order(results, "antagonists", "antagonist", runs)
    plan = _dict(results.get("rates"))
    cpu_hogs = set(x for x in results.get("cpu_antagonists") or [] if isinstance(x, str))
    solo = {"readers": {}, "antagonists": dict((a, _solo(runs, configs, "antagonist", "reader", a, "antagonist_stats"))
                                               for a in antagonists)}
    for reader in readers:
        config, stats = _solo_stats(runs, configs, "reader", "antagonist", reader, "reader_stats")
        job = solo["readers"][reader] = dict(config=config, **_job(stats)) if stats else None
        rated = _planned(plan, reader)
        if job and rated:
            # Alone at its rate: whether the disk carries that rate at all.
            job["rate_achieved"] = _agg([rate_achieved(s, _request(rated)) for s in stats])
    cells = []
    for config in configs:
        for reader in readers:
            for antagonist in antagonists:
                sel = [run for run in runs if run.get("config") == config and run.get("reader") == reader
                       and run.get("antagonist") == antagonist]
                if sel:
                    cell = _cell(config, reader, antagonist, sel, solo, p99_ratio_target, bw_share_target, plan)
                    cell["cpu"] = (_cpu_figures(runs, cell, sel, solo["antagonists"].get(antagonist))
                                   if antagonist in cpu_hogs else None)
                    cells.append(cell)
    out = {"targets": {"p99_ratio": p99_ratio_target, "bw_share": bw_share_target, "rate": dict(RATE_TARGET),
                       "flat": dict(FLAT_TARGET)}, "solo": solo, "cells": cells}
    sweep = _dict(results.get("sweep"))
    if sweep.get("points"):
        out["sweep"] = []
        for point in sweep["points"]:
            for c in point.get("cells") or []:
                if isinstance(c, dict) and c.get("reader") and c.get("antagonist"):
                    cell = _cell(point.get("label"), c["reader"], c["antagonist"], [c], solo, p99_ratio_target,
                                 bw_share_target, plan)
                    out["sweep"].append(dict(cell, qos=point.get("qos")))
    return out


def _planned(plan, reader):
    """The rate plan's entry of a rate-bound reader ({"unit", "rate", "percent", "load", ...}), None for a flat-out one."""
    entry = _dict(_dict(plan.get("readers")).get(reader))
    return entry if entry.get("unit") in UNIT_STAT and _num(entry.get("rate")) else None


def _request(entry):
    return {entry["unit"]: entry["rate"]}


def rate_achieved(stats, requested=None):
    """The share of its rate a rate-bound job achieved: fio's IOPS (or bandwidth) over the rate fio was given (its JSON's
    job options: guest.py's "rate"; else `requested`), both {"iops" | "bps": n}. None when either is unknown."""
    rate = _dict(_dict(stats).get("rate")) or _dict(requested)
    for unit, key in UNIT_STAT.items():
        if _num(rate.get(unit)):
            return _ratio(_num(_dict(stats).get(key)), rate[unit])
    return None


def frontier(plan, reader, antagonist, alone=None):
    """What the antagonist could have had with the reader's planned load served first: its capacity less the reader's
    load, both in the antagonist's unit (IOPS for the 4k random shuffles, bytes per second for the 1 MiB writers) -
    or what the antagonist does alone (`alone`, same unit) where that is less: the page-cache writer, whose
    writeback never fills the disk, could not have had more. The assumption: the disk's IOPS and its bandwidth are
    separate limits, each I/O taking one from the first and its bytes from the second - what QEMU's throttle on the
    lab disk is. Where I/Os of different shapes share a device's time, the frontier of a pair of different shapes is
    lower than this. {"unit", "capacity", "reader_load", "frontier", "bound" ("disk" or "alone")}, or None when the
    plan lacks either job."""
    rated = _planned(plan, reader)
    ant = _dict(_dict(plan.get("antagonists")).get(antagonist))
    unit, capacity = ant.get("unit"), _num(ant.get("capacity"))
    load = _num(_dict(_dict(rated).get("load")).get(unit))
    if not rated or unit not in UNIT_STAT or capacity is None or load is None:
        return None
    out = {"unit": unit, "capacity": capacity, "reader_load": load, "frontier": capacity - load, "bound": "disk"}
    if _num(alone) is not None and alone < out["frontier"]:
        out.update(frontier=alone, bound="alone")
    return out


def _verdict(conditions):
    """False when a known condition fails, None when one is unknown, else True."""
    if any(c is False for c in conditions):
        return False
    return None if any(c is None for c in conditions) else True


def _at_most(value, bound):
    return None if value is None else value <= bound


def _at_least(value, bound):
    return None if value is None else value >= bound


def _cell(config, reader, antagonist, sel, solo, p99_ratio_target, bw_share_target, plan):
    rstats = [s for s in (_stats(run, "reader_stats") for run in sel) if s is not None]
    astats = [s for s in (_stats(run, "antagonist_stats") for run in sel) if s is not None]
    rjob = _job(rstats)
    pressure = {}
    for run in sel:
        for slice_name, values in _dict(run.get("pressure")).items():
            for kind, value in _dict(values).items():
                pressure.setdefault(slice_name, {}).setdefault(kind, []).append(value)
    pressure = dict((s, dict((k, _agg(v)["median"]) for k, v in kinds.items())) for s, kinds in pressure.items())
    vrate = _agg([_dict(run.get("vrate")).get("mean") for run in sel])["median"]
    solo_r, solo_a = solo["readers"].get(reader), solo["antagonists"].get(antagonist)
    cell = {"config": config, "reader": reader, "antagonist": antagonist, "runs": len(sel), "n": len(rstats),
            "antagonist_n": len(astats),
            "reader_stats": dict((k, rjob[k]) for k in ("iops", "bw_bytes", "p50", "p99", "p99.9")),
            "reader_percentiles": rjob["percentiles"],
            "antagonist_bw": _agg([s.get("bw_bytes") for s in astats]),
            "antagonist_iops": _agg([s.get("iops") for s in astats]),
            "pressure": pressure, "vrate_mean": vrate}
    cell["p99_ratio"] = _ratio(cell["reader_stats"]["p99"]["median"], _median_of(solo_r, "p99"))
    cell["p999_ratio"] = _ratio(cell["reader_stats"]["p99.9"]["median"], _median_of(solo_r, "p99.9"))
    cell["bw_share"] = _ratio(cell["antagonist_bw"]["median"], _median_of(solo_a, "bw_bytes"))
    if cell["p99_ratio"] is None or cell["bw_share"] is None:
        cell["met"] = None
    else:
        cell["met"] = cell["p99_ratio"] <= p99_ratio_target and cell["bw_share"] >= bw_share_target
    cell["iops_kept"] = _ratio(cell["reader_stats"]["iops"]["median"], _median_of(solo_r, "iops"))
    rated = _planned(plan, reader)
    cell["rate"] = _rate_figures(plan, cell, rated, rstats, astats, solo_r, solo_a) if rated else None
    if rated:
        kept = cell["rate"]["kept"]
        cell["flat_met"] = None
        cell["rate_met"] = _verdict([_at_most(cell["p99_ratio"], RATE_TARGET["p99_ratio"]), kept,
                                     _at_least(cell["rate"]["frontier_share"], RATE_TARGET["frontier_share"])])
    else:
        cell["rate_met"] = None
        cell["flat_met"] = _verdict([_at_least(cell["iops_kept"], FLAT_TARGET["iops_kept"]),
                                     _at_most(cell["p99_ratio"], FLAT_TARGET["p99_ratio"])])
    return cell


def _cpu_figures(runs, cell, sel, solo_a):
    """A cell with a CPU-bound antagonist: its hashing throughput (median, spread) and the share of its solo run's it
    kept, the CPUs each slice used (medians of cpu.stat over each run's wall time), the CPUs each job could use (the
    most common reading), and the reader's p99 over its solo p99 repeat by repeat (the solo run of the same repeat)."""
    work = _agg([s.get("hashed_bps") for s in (_stats(run, "antagonist_stats") for run in sel) if s])
    used = {}
    for run in sel:
        for slice_name, cpus in _dict(run.get("cpu")).items():
            used.setdefault(slice_name, []).append(cpus)
    per_repeat = []
    for run in sorted(sel, key=lambda r: (_num(r.get("repeat")) or 0)):
        solo = [r for r in runs if r.get("reader") == cell["reader"] and r.get("antagonist") is None
                and r.get("repeat") == run.get("repeat")]
        per_repeat.append(_ratio(_latency(_dict(_stats(run, "reader_stats")), "p99", 99.0),
                                 _latency(_dict(_stats(solo[0], "reader_stats")), "p99", 99.0) if solo else None))
    return {"hashed_bps": work, "kept": _ratio(work["median"], _median_of(solo_a, "hashed_bps")),
            "used": dict((k, _agg(v)["median"]) for k, v in used.items()),
            "allowed": dict((role, _most_common([_dict(run.get(role + "_cpus")).get("cpus") for run in sel]))
                            for role in ("reader", "antagonist")),
            "p99_ratio_per_repeat": per_repeat}


def _most_common(values):
    values = [v for v in values if isinstance(v, str)]
    return max(sorted(set(values)), key=values.count) if values else None


def _rate_figures(plan, cell, rated, rstats, astats, solo_r, solo_a):
    """A rate-bound cell's figures: the rate requested and achieved (medians of achieved / requested over the runs),
    alone and here, and the antagonist's throughput against its frontier (in the antagonist's unit; its solo run
    bounds it)."""
    floor = 1 - RATE_TARGET["rate_tolerance"]
    achieved = _agg([rate_achieved(s, _request(rated)) for s in rstats])["median"]
    alone = _dict(_dict(solo_r).get("rate_achieved")).get("median")
    out = {"unit": rated["unit"], "requested": rated["rate"], "percent": rated.get("percent"),
           "achieved": achieved, "kept": _at_least(achieved, floor), "solo_achieved": alone,
           "solo_kept": _at_least(alone, floor), "antagonist_unit": None, "capacity": None, "reader_load": None,
           "frontier": None, "frontier_bound": None, "antagonist": None, "frontier_share": None}
    unit = _dict(_dict(plan.get("antagonists")).get(cell["antagonist"])).get("unit")
    front = frontier(plan, cell["reader"], cell["antagonist"],
                     _median_of(solo_a, UNIT_STAT[unit]) if unit in UNIT_STAT else None)
    if front:
        thr = _agg([s.get(UNIT_STAT[front["unit"]]) for s in astats])["median"]
        out.update(antagonist_unit=front["unit"], capacity=front["capacity"], reader_load=front["reader_load"],
                   frontier=front["frontier"], frontier_bound=front["bound"], antagonist=thr,
                   frontier_share=_ratio(thr, front["frontier"]) if front["frontier"] > 0 else None)
    return out


# ---------------------------------------------------------------------------------------------- formatting

def fmt_latency(ns):
    """146000 -> '146 µs', 7960000 -> '7.96 ms', None -> '—'."""
    if _num(ns) is None:
        return DASH
    if round(ns / 1e3) < 1000:
        return "%.0f \u00b5s" % (ns / 1e3)
    return "%.2f ms" % (ns / 1e6)


def _fmt(value, pattern, scale=1.0):
    return DASH if _num(value) is None else pattern % (value * scale)


def _fmt_met(met):
    return DASH if met is None else ("yes" if met else "no")


def _label(results, config):
    label = _dict(results.get("config_labels")).get(config)
    return label if isinstance(label, str) and label else config


def _meta_line(results):
    meta = _dict(results.get("meta"))

    def get(key):
        value = meta.get(key)
        return DASH if value is None or value == "" else str(value)

    parts = ["guest %s" % get("guest"), "kernel %s" % get("kernel"), "fio %s" % get("fio"),
             "%s s per run" % get("seconds"), "%s repeats" % get("repeats"), "accel %s" % get("accel")]
    if meta.get("device"):
        cap, known = _dict(meta.get("disk_capacity")), "disk_capacity" in meta  # older runs did not say
        parts.append("device %s%s" % (meta["device"], ", capacity %s IOPS / %.0f MB/s (QEMU throttling)" % (
            cap.get("iops"), cap.get("bps", 0) / 1e6) if cap else ", unthrottled" if known else ""))
    if meta.get("date"):
        parts.append(str(meta["date"]))
    if meta.get("roles_vars"):
        # an experiment: the roles ran with these variables instead of their defaults
        parts.append("roles with `%s`" % json.dumps(meta["roles_vars"], sort_keys=True))
    return " \u00b7 ".join(parts)


def _solo_table(results, summary):
    header = ["solo job", "kind", "config", "n", "IOPS", "MB/s", "p50", "p99", "p99.9", "p99 spread", "MB/s spread"]
    rows = []
    for kind, jobs in (("reader", summary["solo"]["readers"]), ("antagonist", summary["solo"]["antagonists"])):
        for name, job in jobs.items():
            if not job:
                rows.append([name, kind] + [DASH] * (len(header) - 2))
                continue
            rows.append([name, kind, _label(results, job["config"]), str(job["n"]),
                         _fmt(job["iops"]["median"], "%.0f"), _fmt(job["bw_bytes"]["median"], "%.0f", 1e-6),
                         fmt_latency(job["p50"]["median"]), fmt_latency(job["p99"]["median"]),
                         fmt_latency(job["p99.9"]["median"]), _fmt(job["p99"]["spread"], "%.1f%%", 100),
                         _fmt(job["bw_bytes"]["spread"], "%.1f%%", 100)])
    return header, rows


def _reader_table(results, summary, reader):
    header = ["config", "antagonist", "n", "reader IOPS", "p50", "p99", "p99.9", "p99 spread", "p99 / solo",
              "antagonist MB/s", "antagonist share of solo", "inference io some", "vrate mean", "target met"]
    rows = []
    for cell in _cells_for(summary, reader):
        rd = cell["reader_stats"]
        some = _dict(cell["pressure"].get(READER_SLICE)).get("some")
        rows.append([_label(results, cell["config"]), cell["antagonist"], str(cell["n"]),
                     _fmt(rd["iops"]["median"], "%.0f"), fmt_latency(rd["p50"]["median"]),
                     fmt_latency(rd["p99"]["median"]), fmt_latency(rd["p99.9"]["median"]),
                     _fmt(rd["p99"]["spread"], "%.1f%%", 100), _fmt(cell["p99_ratio"], "%.2f" + TIMES),
                     _fmt(cell["antagonist_bw"]["median"], "%.0f", 1e-6), _fmt(cell["bw_share"], "%.0f%%", 100),
                     _fmt(some, "%.1f%%"), _fmt(cell["vrate_mean"], "%.0f%%"), _fmt_met(cell["met"])])
    return header, rows


def _cells_for(summary, reader, antagonist=None):
    return [c for c in summary["cells"] if c["reader"] == reader and (antagonist is None or c["antagonist"] == antagonist)]


def _readers(summary):
    """Readers in presentation order: those with a solo entry, then any that only have contended cells."""
    order = list(summary["solo"]["readers"])
    for cell in summary["cells"]:
        if cell["reader"] not in order:
            order.append(cell["reader"])
    return order


def _target_line(summary):
    t, rate, flat = summary["targets"], RATE_TARGET, FLAT_TARGET
    return ("Targets: a rate-bound reader's p99 \u2264 %.2g%s its solo p99 at the same rate, its rate kept (\u2265 %.0f%% "
            "of it) and the antagonist \u2265 %.0f%% of its frontier; a flat-out reader \u2265 %.0f%% of its solo IOPS "
            "with p99 \u2264 %.2g%s solo. \"target met\" in the per-reader and pair tables: reader p99 \u2264 %.2g%s its "
            "solo p99 and antagonist bandwidth \u2265 %.0f%% of its solo bandwidth. Medians over the repeats; spread = "
            "(max \u2212 min) / median." % (
                rate["p99_ratio"], TIMES, 100 * (1 - rate["rate_tolerance"]), 100 * rate["frontier_share"],
                100 * flat["iops_kept"], flat["p99_ratio"], TIMES, t["p99_ratio"], TIMES, 100 * t["bw_share"]))


def _rated_cells(summary, config=None):
    """The contended cells of rate-bound readers (of one configuration)."""
    return [c for c in summary["cells"] if c["rate"] and not c.get("cpu") and (config is None or c["config"] == config)]


def _fmt_unit(value, unit):
    """A rate or throughput in its unit: '1000 IOPS', '100 MB/s'."""
    return _fmt(value, "%.0f IOPS") if unit == "iops" else _fmt(value, "%.0f MB/s", 1e-6)


def _fmt_kept(kept, achieved):
    return DASH if kept is None else "%s (%s)" % ("yes" if kept else "no", _fmt(achieved, "%.1f%%", 100))


def _rate_note(results):
    """Where the rates came from, what the frontier assumes, and the target the pass mark is for."""
    plan = _dict(results.get("rates"))
    caps = []
    for name, entry in sorted(_dict(plan.get("readers")).items()):
        caps.append("%s %s of %s" % (name, _fmt_unit(entry.get("rate"), entry.get("unit")),
                                     _fmt_unit(entry.get("capacity"), entry.get("unit"))))
    return ("Rates from the %s (%s): each rate-bound reader is its flat-out profile with fio's rate (--rate_iops or "
            "--rate, evenly spaced), at that percentage of the disk's capacity for its shape; solo p99 is the reader "
            "alone at the same rate. Rate kept: fio's IOPS or bandwidth \u2265 %.0f%% of its rate (fio does not flag a "
            "missed rate, and its clat leaves out how late an I/O was issued: a reader that falls behind shows here, "
            "not in its p99). Frontier: the antagonist's capacity less the reader's planned load, in the antagonist's "
            "unit, with the disk's IOPS and bandwidth taken as separate limits (QEMU's throttle on the lab disk; on a "
            "device whose I/Os of different shapes share its time, the frontier of a mixed pair is lower); \"(alone)\": "
            "what the antagonist did alone, where that is less (the page-cache writer). Pass: p99 "
            "\u2264 %.2g%s solo, rate kept, antagonist \u2265 %.0f%% of its frontier." % (
                plan.get("source", "disk's capacity"), "; ".join(caps) or DASH, 100 * (1 - RATE_TARGET["rate_tolerance"]),
                RATE_TARGET["p99_ratio"], TIMES, 100 * RATE_TARGET["frontier_share"]))


def _rate_table(results, summary, config):
    """One configuration's rate-bound cells: the reader's tail and rate, the antagonist against its frontier."""
    header = ["reader", "rate", "antagonist", "solo p99", "p99", "p99 / solo", "rate kept", "rate kept alone",
              "antagonist", "frontier", "% of frontier", "vrate mean", "pass"]
    rows = []
    for cell in _rated_cells(summary, config):
        rate, solo = cell["rate"], summary["solo"]["readers"].get(cell["reader"])
        rows.append([cell["reader"], "%s (%s)" % (_fmt_unit(rate["requested"], rate["unit"]),
                                                  _fmt(rate["percent"], "%d%%")),
                     cell["antagonist"], fmt_latency(_median_of(solo, "p99")),
                     fmt_latency(cell["reader_stats"]["p99"]["median"]), _fmt(cell["p99_ratio"], "%.2f" + TIMES),
                     _fmt_kept(rate["kept"], rate["achieved"]), _fmt_kept(rate["solo_kept"], rate["solo_achieved"]),
                     _fmt_unit(rate["antagonist"], rate["antagonist_unit"]),
                     _fmt_unit(rate["frontier"], rate["antagonist_unit"]) + (
                         " (alone)" if rate["frontier_bound"] == "alone" else ""),
                     _fmt(rate["frontier_share"], "%.0f%%", 100),
                     _fmt(cell["vrate_mean"], "%.0f%%"), _fmt_met(cell["rate_met"])])
    return header, rows


def _flat_table(results, summary):
    """The flat-out readers' cells against their target: the reader's IOPS kept and its p99 against its solo run."""
    header = ["config", "reader", "antagonist", "reader IOPS", "% of solo IOPS", "p99 / solo", "antagonist share of solo",
              "pass"]
    rows = []
    for cell in summary["cells"]:
        if cell["rate"] is None and not cell.get("cpu"):
            rows.append([_label(results, cell["config"]), cell["reader"], cell["antagonist"],
                         _fmt(cell["reader_stats"]["iops"]["median"], "%.0f"), _fmt(cell["iops_kept"], "%.0f%%", 100),
                         _fmt(cell["p99_ratio"], "%.2f" + TIMES), _fmt(cell["bw_share"], "%.0f%%", 100),
                         _fmt_met(cell["flat_met"])])
    return header, rows


CPU_NOTE = ("The reader in inference.slice, the CPU hog (one SHA-256 worker per CPU of the guest) in training.slice; "
            "\"alone\": each job by itself under the first configuration. p99 / solo: the medians' ratio, then each "
            "repeat's against the solo run of the same repeat. Rate kept: fio's IOPS or bandwidth \u2265 %.0f%% of its "
            "rate. CPUs: what each job could run on (Cpus_allowed_list: its cpuset). Hog kept: its hashing throughput "
            "against its own run alone. CPUs used: each slice's cpu.stat over the cell's wall time, as the guest "
            "accounts it. Under TCG a vCPU is a host thread: the guest counts a vCPU the host did not run as busy, and "
            "the emulated disk's completions need host CPU that no guest cpuset governs, so the hog's throughput, not "
            "its CPU time, is what it got." % (100 * (1 - RATE_TARGET["rate_tolerance"])))


def _cpu_cells(summary):
    return [c for c in summary["cells"] if c.get("cpu")]


def _cpu_used(runs, field, name, slice_name):
    """The median CPUs a slice used over the solo runs of one job (field reader/antagonist)."""
    other = "antagonist" if field == "reader" else "reader"
    return _agg([_dict(r.get("cpu")).get(slice_name) for r in runs
                 if r.get(field) == name and r.get(other) is None])["median"]


def _cpu_table(results, summary):
    """The CPU-contention pairs: the reader's tail and rate with and without the hog, and what the hog kept."""
    header = ["configuration", "reader", "CPUs: reader / hog", "n", "reader p99 (spread)", "p99 / solo",
              "per repeat", "rate kept", "hog SHA-256 MB/s (spread)", "hog kept", "CPUs used: training / inference"]
    runs, rows, shown, plan = _runs(results), [], set(), _dict(results.get("rates"))

    def named(reader):
        rated = _planned(plan, reader)
        return "%s (%s)" % (reader, _fmt_unit(rated["rate"], rated["unit"])) if rated else reader

    def used(pair):
        return " / ".join(_fmt(v, "%.2f") for v in pair)
    for cell in _cpu_cells(summary):
        reader, hog = cell["reader"], cell["antagonist"]
        solo_r, solo_a = summary["solo"]["readers"].get(reader), summary["solo"]["antagonists"].get(hog)
        if reader not in shown and solo_r:
            shown.add(reader)
            rate = _dict(solo_r.get("rate_achieved"))
            rows.append(["alone (%s)" % _label(results, solo_r["config"]), named(reader), DASH, str(solo_r["n"]),
                         "%s (%s)" % (fmt_latency(solo_r["p99"]["median"]), _fmt(solo_r["p99"]["spread"], "%.0f%%", 100)),
                         DASH, DASH, _fmt_kept(_at_least(rate.get("median"), 1 - RATE_TARGET["rate_tolerance"]),
                                               rate.get("median")) if rate else DASH, DASH, DASH,
                         used((DASH, _cpu_used(runs, "reader", reader, READER_SLICE)))])
        if hog not in shown and solo_a:
            shown.add(hog)
            work = solo_a["hashed_bps"]
            rows.append(["alone (%s)" % _label(results, solo_a["config"]), "%s (no reader)" % hog, DASH,
                         str(solo_a["n"]), DASH, DASH, DASH, DASH,
                         "%s (%s)" % (_fmt(work["median"], "%.0f", 1e-6), _fmt(work["spread"], "%.0f%%", 100)), DASH,
                         used((_cpu_used(runs, "antagonist", hog, ANTAGONIST_SLICE), DASH))])
    for cell in _cpu_cells(summary):
        cpu, rd, rate = cell["cpu"], cell["reader_stats"], cell["rate"] or {}
        rows.append([_label(results, cell["config"]), "%s vs %s" % (named(cell["reader"]), cell["antagonist"]),
                     "%s / %s" % (cpu["allowed"].get("reader") or DASH, cpu["allowed"].get("antagonist") or DASH),
                     str(cell["n"]), "%s (%s)" % (fmt_latency(rd["p99"]["median"]), _fmt(rd["p99"]["spread"], "%.0f%%", 100)),
                     _fmt(cell["p99_ratio"], "%.2f" + TIMES),
                     ", ".join(_fmt(r, "%.2f") for r in cpu["p99_ratio_per_repeat"]) or DASH,
                     _fmt_kept(rate.get("kept"), rate.get("achieved")),
                     "%s (%s)" % (_fmt(cpu["hashed_bps"]["median"], "%.0f", 1e-6),
                                  _fmt(cpu["hashed_bps"]["spread"], "%.0f%%", 100)),
                     _fmt(cpu["kept"], "%.0f%%", 100),
                     used((cpu["used"].get(ANTAGONIST_SLICE), cpu["used"].get(READER_SLICE)))])
    return header, rows


def _rate_titles(results, summary):
    """The title of each configuration's rate-bound table, in presentation order."""
    configs = []
    for cell in _rated_cells(summary):
        if cell["config"] not in configs:
            configs.append(cell["config"])
    return [(config, "Rate-bound readers: %s" % _label(results, config)) for config in configs]


def _md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header, rows):
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _reader_title(results, summary, reader):
    job = summary["solo"]["readers"].get(reader)
    if not job:
        return "Reader %s (no solo run)" % reader
    return "Reader %s (solo p99 %s in %s)" % (reader, fmt_latency(job["p99"]["median"]), _label(results, job["config"]))


def _pairs_table(results, summary):
    """One row per reader x antagonist, one column per configuration: 'p99 / solo, antagonist share'."""
    configs = []
    for cell in summary["cells"]:
        if cell["config"] not in configs:
            configs.append(cell["config"])
    header = ["reader vs antagonist"] + [_label(results, c) for c in configs]
    rows = []
    for reader in _readers(summary):
        antagonists = []
        for cell in _cells_for(summary, reader):
            if cell["antagonist"] not in antagonists:
                antagonists.append(cell["antagonist"])
        for antagonist in antagonists:
            row = ["%s vs %s" % (reader, antagonist)]
            for config in configs:
                got = [c for c in _cells_for(summary, reader, antagonist) if c["config"] == config]
                row.append(DASH if not got else "%s, %s%s" % (
                    _fmt(got[0]["p99_ratio"], "%.2f" + TIMES), _fmt(got[0]["bw_share"], "%.0f%%", 100),
                    " (met)" if got[0]["met"] else ""))
            rows.append(row)
    return header, rows


def _calibration_table(results):
    """The calibrated model's coefficients against the capacity the lab gave the disk."""
    versus = _dict(_dict(results.get("calibration")).get("versus_capacity"))
    header = ["coefficient", "calibrated", "disk capacity", "error"]
    rows = []
    for key, v in versus.items():
        scale, unit = (1e-6, " MB/s") if key.endswith("bps") else (1, "")
        rows.append([key, _fmt(v.get("model"), "%.0f" + unit, scale), _fmt(v.get("capacity"), "%.0f" + unit, scale),
                     _fmt(v.get("error"), "%+.1f%%", 100)])
    return header, rows


def _charge_table(results):
    """Per antagonist (first contended run of each): the threads of its unit and the bytes the kernel
    charged to its slice against the bytes fio moved over the same run (ramp included in the charge)."""
    header = ["antagonist", "config", "threads in its unit", "charged to %s" % ANTAGONIST_SLICE,
              "charged to %s" % READER_SLICE, "fio moved (measured part)"]
    rows, seen = [], set()
    for run in _runs(results):
        name = run.get("antagonist")
        # io.stat exists in a slice only where the io controller is on (not under "no isolation")
        if (not name or name in seen or not run.get("reader") or not isinstance(run.get("io"), dict)
                or not any(_dict(v) for v in run["io"].values())):
            continue
        seen.add(name)
        io_ = run["io"]

        def mb(slice_):
            d = _dict(io_.get(slice_))
            total = sum(v for k, v in d.items() if k in ("rbytes", "wbytes") and _num(v) is not None)
            return "%.0f MB" % (total / 1e6) if d else DASH
        st = _dict(_stats(run, "antagonist_stats"))
        moved = _num(st.get("bw_bytes")) and _num(st.get("runtime_ms"))
        threads = ", ".join("%s×%d" % (k, v) for k, v in sorted(_dict(run.get("antagonist_threads")).items()))
        rows.append([name, _label(results, run.get("config")), threads or DASH, mb(ANTAGONIST_SLICE), mb(READER_SLICE),
                     "%.0f MB" % (st["bw_bytes"] * st["runtime_ms"] / 1e9) if moved else DASH])
    return header, rows


PROBE_NOTE = ("The probe (the collection's io_latency program) times each bio in the block layer, from submit_bio to "
              "bio_endio, in the slice the kernel charged it to; fio's clat also holds the system call's return and "
              "the job's wake-up (CPU time, scarce under TCG). The probe counts bios as submitted (a bio the "
              "disk's limits split counts once; io.stat counts its parts) over a window that holds fio's measured "
              "seconds and the part of its ramp after the probe's warm-up; fio counts its I/Os over the measured "
              "seconds. Medians over the repeats; fio / probe.")


def _count(value):
    return _fmt(value, "%.0f")


def _pair(fio, probe, fmt):
    return "%s / %s" % (fmt(fio), fmt(probe))


def _probe_table(results):
    """Per (config, reader, antagonist) with probe figures: fio's figures beside the probe's for the job
    in each slice (medians over the repeats)."""
    header = ["config", "reader", "antagonist", "n", "reader I/Os", "reader p50", "reader p99",
              "antagonist p50", "antagonist p99", "other I/Os on the disk"]
    groups = {}
    for run in _runs(results):
        if isinstance(run.get("probe"), dict):
            groups.setdefault((run.get("config"), run.get("reader"), run.get("antagonist")), []).append(run)
    return header, [_probe_row(results, key, sel) for key, sel in groups.items()]


def _median_at(runs, *path):
    """The median over the runs of run[path[0]][path[1]]..., missing values skipped."""
    values = []
    for run in runs:
        for key in path:
            run = _dict(run).get(key)
        values.append(run)
    return _agg(values)["median"]


def _probe_row(results, key, sel):
    config, rdr, ant = key

    def probe_ns(slice_, name):
        us = _median_at(sel, "probe", slice_, name)
        return None if us is None else us * 1e3
    fio_ios = _median_at(sel, "reader_stats", "ios") if rdr else None
    row = [_label(results, config), rdr or DASH, ant or DASH, str(len(sel)),
           _pair(fio_ios, _median_at(sel, "probe", READER_SLICE, "count"), _count)]
    for role, slice_ in (("reader", READER_SLICE), ("antagonist", ANTAGONIST_SLICE)):
        for name in ("p50", "p99"):
            row.append(_pair(_median_at(sel, role + "_stats", "clat_ns", name), probe_ns(slice_, name + "_us"),
                             fmt_latency))
    return row + [_count(_median_at(sel, "probe", "other"))]


def _sweep_table(results, summary):
    header = ["QoS", "reader", "antagonist", "reader p99", "p99 / solo", "antagonist MB/s", "share of solo",
              "vrate mean", "target met"]
    rows = []
    for cell in summary.get("sweep") or []:
        rows.append([cell["config"], cell["reader"], cell["antagonist"], fmt_latency(cell["reader_stats"]["p99"]["median"]),
                     _fmt(cell["p99_ratio"], "%.2f" + TIMES), _fmt(cell["antagonist_bw"]["median"], "%.0f", 1e-6),
                     _fmt(cell["bw_share"], "%.0f%%", 100), _fmt(cell["vrate_mean"], "%.0f%%"), _fmt_met(cell["met"])])
    return header, rows


def _sections(results, summary):
    """(title, (header, rows)[, note]) of every table in the report, in order: the rate-bound readers per
    configuration, the flat-out readers against their target, then the details."""
    out = []
    cpu = _cpu_table(results, summary)
    if cpu[1]:
        out.append(("CPU contention: a rate-bound reader beside a CPU-bound training job", cpu, CPU_NOTE))
    for i, (config, title) in enumerate(_rate_titles(results, summary)):
        out.append((title, _rate_table(results, summary, config)) + ((_rate_note(results),) if i == 0 else ()))
    flat = _flat_table(results, summary)
    if flat[1]:
        out.append(("Flat-out readers: reader IOPS kept and p99 / solo", flat))
    out.append(("Solo runs", _solo_table(results, summary)))
    out += [(_reader_title(results, summary, r), _reader_table(results, summary, r)) for r in _readers(summary)]
    if summary["cells"]:
        out.append(("All pairs: reader p99 / solo, antagonist share of solo", _pairs_table(results, summary)))
    probe = _probe_table(results)
    if probe[1]:
        out.append(("Block layer (eBPF probe, submit_bio → bio_endio) beside fio's clat", probe, PROBE_NOTE))
    if _dict(results.get("calibration")).get("versus_capacity"):
        out.append(("Calibrated model against the disk's capacity", _calibration_table(results)))
    charge = _charge_table(results)
    if charge[1]:
        out.append(("Where each antagonist's I/O was charged", charge))
    if summary.get("sweep"):
        out.append(("QoS sweep under the calibrated model (%s s runs)" % _dict(results.get("sweep")).get("seconds"),
                    _sweep_table(results, summary)))
    ref = _dict(results.get("unthrottled"))
    if ref.get("runs"):
        ref_summary = summarize(ref, summary["targets"]["p99_ratio"], summary["targets"]["bw_share"])
        out.append(("The unthrottled disk, TCG alone (%s; %s)" % (ref.get("source", "recorded run"), _meta_line(ref)),
                    _pairs_table(ref, ref_summary)))
    return out


def markdown(results, summary):
    """The report as GitHub Markdown: meta line, then every table of _sections, the target."""
    lines = ["## I/O isolation benchmark", "", _meta_line(results)]
    for title, table, *note in _sections(results, summary):
        lines += ["", "### " + title, ""] + note + [""] * len(note)
        lines += _md_table(*table)
    lines += ["", _target_line(summary)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- plots

def _nines(pct):
    return -math.log10(1.0 - pct / 100.0)


def _curve(percentiles):
    """(x on the nines scale, y in µs) of a {"%f" percentile: ns} dict, skipping p >= 100 and y <= 0."""
    xs, ys = [], []
    for key, ns in percentiles.items():
        pct = float(key)
        if 0 <= pct < 100 and _num(ns) is not None and ns > 0:
            xs.append(_nines(pct))
            ys.append(ns / 1e3)
    return xs, ys


def _png(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _latency_figure(results, summary, reader, antagonists, configs, Figure):
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    axes = fig.subplots(1, len(antagonists), sharey=True, squeeze=False)[0]
    solo = summary["solo"]["readers"].get(reader)
    for ax, antagonist in zip(axes, antagonists):
        drawn = False
        for i, config in enumerate(configs):
            for cell in _cells_for(summary, reader, antagonist):
                if cell["config"] == config:
                    xs, ys = _curve(cell["reader_percentiles"])
                    if xs:
                        ax.plot(xs, ys, marker=".", color="C%d" % i, label=_label(results, config))
                        drawn = True
        if solo:
            xs, ys = _curve(solo["percentiles"])
            if xs:
                ax.plot(xs, ys, linestyle="--", color="black", label="solo (%s)" % _label(results, solo["config"]))
                drawn = True
        if drawn:
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([_nines(p) for p in NINES])
        ax.set_xticklabels(["%g" % p for p in NINES])
        ax.set_xlim(0, _nines(NINES[-1]) * 1.05)
        ax.set_title("vs %s" % antagonist)
        ax.set_xlabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("%s clat (\u00b5s)" % reader)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize="small")
    fig.suptitle("Reader %s: completion latency percentiles" % reader)
    fig.tight_layout()
    return _png(fig)


def _bars(ax, results, summary, reader, antagonists, configs, key, scale, target, ylabel):
    width = 0.8 / max(len(configs), 1)
    for i, config in enumerate(configs):
        xs, hs = [], []
        for j, antagonist in enumerate(antagonists):
            for cell in _cells_for(summary, reader, antagonist):
                if cell["config"] == config and cell[key] is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    hs.append(cell[key] * scale)
        if xs:
            ax.bar(xs, hs, width=width, color="C%d" % i, label=_label(results, config))
    ax.axhline(target, color="black", linestyle="--", linewidth=1, label="target")
    ax.set_xticks(range(len(antagonists)))
    ax.set_xticklabels(antagonists)
    ax.set_xlim(-0.5, len(antagonists) - 0.5)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)


def _throughput_figure(results, summary, reader, antagonists, configs, Figure):
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    left, right = fig.subplots(1, 2)
    t = summary["targets"]
    _bars(left, results, summary, reader, antagonists, configs, "bw_share", 100, 100 * t["bw_share"],
          "antagonist bandwidth (% of solo)")
    left.set_title("Antagonist throughput kept")
    _bars(right, results, summary, reader, antagonists, configs, "p99_ratio", 1, t["p99_ratio"],
          "reader p99 (%s solo)" % TIMES)
    right.set_title("Reader %s p99 inflation" % reader)
    left.legend(fontsize="small")
    fig.tight_layout()
    return _png(fig)


def _tradeoff_figure(results, summary, reader, Figure):
    """Antagonist share of solo bandwidth (x) against reader p99 / solo (y): one point per QoS setting
    and antagonist, the roles' default ringed, the target region shaded."""
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.subplots()
    t = summary["targets"]
    cells = [c for c in summary.get("sweep") or [] if c["reader"] == reader
             and c["p99_ratio"] is not None and c["bw_share"] is not None]
    antagonists = []
    for c in cells:
        if c["antagonist"] not in antagonists:
            antagonists.append(c["antagonist"])
    ax.axvspan(t["bw_share"] * 100, max([100 * c["bw_share"] for c in cells] + [100]) * 1.05, ymax=1,
               color="green", alpha=0.06)
    ax.axhline(t["p99_ratio"], color="black", linestyle="--", linewidth=1)
    ax.axvline(t["bw_share"] * 100, color="black", linestyle="--", linewidth=1)
    for i, antagonist in enumerate(antagonists):
        mine = [c for c in cells if c["antagonist"] == antagonist]
        ax.scatter([100 * c["bw_share"] for c in mine], [c["p99_ratio"] for c in mine], color="C%d" % i,
                   label=antagonist)
        for c in mine:
            ax.annotate(c["config"], (100 * c["bw_share"], c["p99_ratio"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
            if c["config"] == "default":
                ax.scatter([100 * c["bw_share"]], [c["p99_ratio"]], s=160, facecolors="none", edgecolors="black")
    ax.set_yscale("log")
    ax.set_xlabel("antagonist bandwidth (% of solo)")
    ax.set_ylabel("reader %s p99 (%s solo)" % (reader, TIMES))
    ax.set_title("Reader %s: what each QoS setting buys and costs (ringed: the roles' default; "
                 "target: right of and below the dashed lines)" % reader, fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    if antagonists:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return _png(fig)


def _frontier_figure(results, summary, Figure):
    """Per configuration: each rate-bound cell's antagonist throughput (y) against its frontier (x), both as a share of
    the antagonist's capacity; the diagonal is the frontier, the dashed line the target's share of it. Filled: the
    reader held its p99 and its rate (the pass mark's reader half)."""
    titles = _rate_titles(results, summary)
    fig = Figure(figsize=(max(FIGSIZE[0], 4 * len(titles)), FIGSIZE[1] + 1), dpi=DPI)
    axes = fig.subplots(1, len(titles), sharey=True, squeeze=False)[0]
    plan = _dict(results.get("rates"))
    antagonists, profiles = [], []
    for cell in _rated_cells(summary):
        profile = _planned(plan, cell["reader"]).get("profile") or cell["reader"]
        antagonists += [cell["antagonist"]] if cell["antagonist"] not in antagonists else []
        profiles += [profile] if profile not in profiles else []
    markers = "os^Dv"
    for ax, (config, title) in zip(axes, titles):
        ax.plot([0, 100], [0, 100], color="black", linewidth=1, label="frontier")
        ax.plot([0, 100], [0, 100 * RATE_TARGET["frontier_share"]], color="black", linestyle="--", linewidth=1,
                label="%.0f%% of it" % (100 * RATE_TARGET["frontier_share"]))
        for cell in _rated_cells(summary, config):
            rate = cell["rate"]
            if rate["frontier"] is None or rate["antagonist"] is None or not rate["capacity"]:
                continue
            held = _verdict([_at_most(cell["p99_ratio"], RATE_TARGET["p99_ratio"]), rate["kept"]])
            color = "C%d" % antagonists.index(cell["antagonist"])
            profile = _planned(plan, cell["reader"]).get("profile") or cell["reader"]
            x, y = 100 * rate["frontier"] / rate["capacity"], 100 * rate["antagonist"] / rate["capacity"]
            ax.scatter([x], [y], color=color, marker=markers[profiles.index(profile) % len(markers)],
                       facecolors=color if held else "none")
            ax.annotate(_fmt(rate["percent"], "%d%%"), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlim(0, 105)
        ax.set_ylim(bottom=0)
        ax.set_title(_label(results, config), fontsize="small")
        ax.set_xlabel("frontier (% of the antagonist's capacity)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("antagonist throughput (% of its capacity)")
    # the legend's colours are the antagonists, its markers the readers' shapes
    for i, antagonist in enumerate(antagonists):
        axes[0].scatter([], [], color="C%d" % i, marker="s", label=antagonist)
    for i, profile in enumerate(profiles):
        axes[0].scatter([], [], color="gray", marker=markers[i % len(markers)], facecolors="none",
                        label="%s at a rate" % profile)
    axes[0].legend(fontsize="x-small")
    fig.suptitle("Antagonist throughput against the frontier (labels: the reader's rate; filled: the reader held "
                 "p99 \u2264 %.2g%s solo and its rate)" % (RATE_TARGET["p99_ratio"], TIMES), fontsize="small")
    fig.tight_layout()
    return _png(fig)


def plots(results, summary):
    """{"latency-<reader>": PNG bytes, "throughput-<reader>": PNG bytes (flat-out readers)} for each reader with
    contended cells, "frontier" with rate-bound cells, "tradeoff-<reader>" with a sweep."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    runs = _runs(results)
    configs = _order(results, "configs", "config", runs)
    antagonist_order = _order(results, "antagonists", "antagonist", runs)
    images = {}
    for reader in _readers(summary):
        cells = _cells_for(summary, reader)
        antagonists = [a for a in antagonist_order if any(c["antagonist"] == a for c in cells)]
        if not antagonists:
            continue
        images["latency-" + _safe(reader)] = _latency_figure(results, summary, reader, antagonists, configs, Figure)
        if not any(c["rate"] for c in cells):
            # the share of solo bandwidth; a rate-bound reader's antagonist is measured against its frontier instead
            images["throughput-" + _safe(reader)] = _throughput_figure(results, summary, reader, antagonists, configs,
                                                                       Figure)
    if _rated_cells(summary):
        images["frontier"] = _frontier_figure(results, summary, Figure)
    for reader in sorted(set(c["reader"] for c in summary.get("sweep") or [])):
        images["tradeoff-" + _safe(reader)] = _tradeoff_figure(results, summary, reader, Figure)
    return images


# ---------------------------------------------------------------------------------------------- html

def _html_table(header, rows):
    esc = htmlmod.escape
    out = ["<table>", "<thead><tr>" + "".join("<th>%s</th>" % esc(str(h)) for h in header) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join("<td>%s</td>" % esc(str(c)) for c in row) + "</tr>" for row in rows]
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


STYLE = """body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; }
td:first-child, td:nth-child(2) { text-align: left; }
img { max-width: 100%; }"""


def html(results, summary, images):
    """A self-contained HTML page: meta, the tables, and the images inlined as data: URIs."""
    esc = htmlmod.escape
    title = "I/O isolation benchmark"
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', "<title>%s</title>" % esc(title),
             "<style>\n%s\n</style>" % STYLE, "</head>", "<body>", "<h1>%s</h1>" % esc(title),
             "<p>%s</p>" % esc(_meta_line(results))]
    shown = set()
    places = _image_places(results, summary)
    for title, table, *note in _sections(results, summary):
        parts += ["<h2>%s</h2>" % esc(title)] + ["<p>%s</p>" % esc(n) for n in note] + [_html_table(*table)]
        for name in places.get(title, ()):
            if name in images:
                shown.add(name)
                parts.append(_img(name, images[name]))
    for name in sorted(set(images) - shown):
        parts.append(_img(name, images[name]))
    parts += ["<p>%s</p>" % esc(_target_line(summary)), "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _image_places(results, summary):
    """{section title: the images shown after it}: each reader's below its table, the frontier below the last
    rate-bound table."""
    places = dict((_reader_title(results, summary, r), [p + _safe(r) for p in ("latency-", "throughput-", "tradeoff-")])
                  for r in _readers(summary))
    titles = _rate_titles(results, summary)
    if titles:
        places[titles[-1][1]] = ["frontier"]
    return places


def _img(name, png):
    data = base64.b64encode(png).decode("ascii")
    return '<figure><img alt="%s" src="data:image/png;base64,%s"><figcaption>%s</figcaption></figure>' % (
        htmlmod.escape(name, quote=True), data, htmlmod.escape(name))


# ---------------------------------------------------------------------------------------------- files

def write(results, outdir):
    """Summary, results.json (results + "summary"), results.md, report.html and <name>.png into outdir."""
    results = dict((k, v) for k, v in results.items() if k != "summary")
    summary = summarize(results)
    md = markdown(results, summary)
    try:
        images = plots(results, summary)
    except ImportError:
        images = {}
    os.makedirs(outdir, exist_ok=True)
    files = []

    def put(name, data, mode="w"):
        path = os.path.join(outdir, name)
        with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            f.write(data)
        files.append(path)

    put("results.json", json.dumps(dict(results, summary=summary), indent=1, ensure_ascii=False) + "\n")
    put("results.md", md)
    put("report.html", html(results, summary, images))
    for name in sorted(images):
        put(name + ".png", images[name], "wb")
    return {"summary": summary, "markdown": md, "files": files}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("results", help="a results.json written by bench.py or by write()")
    ap.add_argument("outdir")
    a = ap.parse_args()
    with open(a.results, encoding="utf-8") as f:
        out = write(json.load(f), a.outdir)
    print(out["markdown"], end="")


if __name__ == "__main__":
    main()
