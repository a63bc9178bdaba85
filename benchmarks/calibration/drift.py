# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""How a disk's rate drifts over minutes, and what that does to each way of sampling it.

Records one long fio run's per-second rate on the lab's blank NVMe disk (reference.py's trace
mode: the reference's own fio command with fio's 1 s bandwidth log), then replays sampling
schedules over that one trace: the reference's contiguous 120 s, and the module's N passes of
S seconds each with a ramp, one pass per round of six measurements. Each schedule is slid over
every start second; the table gives the relative standard deviation of its estimates (how far one
calibration lands from another on this host state alone) and the median (max - min) / median of
three non-overlapping estimates (the statistic compare.py reports). Every schedule sees the same
seconds, so the comparison is free of the luck of when each method happened to run.

  .venv/bin/python benchmarks/calibration/drift.py --seconds 600 --coef rrandiops --out /abs/dir
  .venv/bin/python benchmarks/calibration/drift.py --trace /abs/dir/drift-rrandiops.json   (replay only)
"""

import argparse
import json
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from labvm import add_vm_args, guest_script, vm  # noqa: E402  pylint: disable=wrong-import-position

# seconds the module needs to start and stop fio in the lab guest, beside fio's own runtime (the
# module's timings: a pass with max_seconds 8 ran fio 8.9 s and took 9.9 s)
OVERHEAD = 1.0
# seconds of the two QoS runs (8 s each by default) with their start and stop, measured in the lab
QOS_SECONDS = 18


def qos_after_round(passes):
    """The round the module's QoS runs follow (plugins/module_utils/_calibration/iocost_calibrate.py: qos_after_round)."""
    return max(1, (passes + 1) // 2)


def schedules(reference_runtime):
    """(label, [(offset, seconds measured)...], wall seconds of the measuring) per schedule.

    A module pass with max_seconds M and ramp R runs fio for about M + 1 s (fio's one-second status
    windows end at 0.94, 1.94, ... s, and the rule stops at the first that reaches M) and measures
    seconds [R, M + 1) of it (a window counts once its middle is past the ramp). Pass k of a
    coefficient starts at k * period, period = 6 * (M + 1 + OVERHEAD): the other five measurements
    run in between. With "QoS between", the QoS runs' seconds come after round qos_after_round()
    (what the module does since it runs them there); without, after the last round."""
    out = [("reference %d s" % reference_runtime, [(0, reference_runtime)], 6 * (reference_runtime + 1))]
    for passes, most, ramp, qos_between in ((1, 20, 2, False), (2, 8, 2, False), (2, 8, 2, True),
                                            (3, 6, 2, False), (3, 6, 2, True), (4, 4, 2, False),
                                            (4, 4, 2, True), (4, 5, 2, False), (6, 4, 2, False)):
        period = 6 * (most + 1 + OVERHEAD)
        label = "%d pass%s x %d s%s" % (passes, "" if passes == 1 else "es", most,
                                        ", QoS between" if qos_between and passes > 1 else "")
        gap = [QOS_SECONDS if qos_between and k >= qos_after_round(passes) else 0 for k in range(passes)]
        out.append((label, [(int(k * period) + gap[k] + ramp, most + 1 - ramp) for k in range(passes)],
                    round(passes * period)))
    return out


def estimates(trace, windows):
    """The schedule's estimate at every start second that fits in the trace."""
    span = max(off + n for off, n in windows)
    total = sum(n for _off, n in windows)
    prefix = [0.0]
    for v in trace:
        prefix.append(prefix[-1] + v)
    out = [sum(prefix[start + off + n] - prefix[start + off] for off, n in windows) / total
           for start in range(len(trace) - span + 1)]
    return out, span


def three_run_spread(values, span, rng, draws=2000):
    """Median of (max - min) / median over draws of three estimates whose seconds do not overlap."""
    spreads = []
    n = len(values)
    if n < 2 * span + 1:
        return None
    for _draw in range(draws):
        # three distinct points of a range shortened by two gaps, spread back out: every triple of
        # starts at least `span` apart is equally likely
        picks = [p + k * (span - 1) for k, p in enumerate(sorted(rng.sample(range(n - 2 * (span - 1)), 3)))]
        vals = [values[p] for p in picks]
        spreads.append((max(vals) - min(vals)) / statistics.median(vals))
    return statistics.median(spreads)


def replay(trace, reference_runtime):
    # every row draws with the same seed: rows differ by their schedule, not by their draws
    rows = []
    for label, windows, wall in schedules(reference_runtime):
        values, span = estimates(trace, windows)
        if len(values) < 2:
            continue
        rsd = statistics.pstdev(values) / statistics.mean(values)
        rows.append({"schedule": label, "measuring_seconds_per_calibration": wall, "starts": len(values),
                     "rsd": round(rsd, 4), "three_run_spread": three_run_spread(values, span, random.Random(7))})
    return rows


def markdown(coef, trace, rows):
    mean = statistics.mean(trace)
    lines = ["%s: %d s traced, mean %.0f, per-second relative sd %.1f%%" % (
        coef, len(trace), mean, 100 * statistics.pstdev(trace) / mean), "",
        "| schedule | seconds measuring per calibration (6 measurements) | starts | relative sd | 3-run spread |",
        "|---|---|---|---|---|"]
    for r in rows:
        spread = "%.1f%%" % (100 * r["three_run_spread"]) if r["three_run_spread"] is not None else "-"
        lines.append("| %s | %d | %d | %.1f%% | %s |" % (r["schedule"], r["measuring_seconds_per_calibration"],
                                                         r["starts"], 100 * r["rsd"], spread))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_args(ap, "debian13", "bench-cal")
    ap.add_argument("--seconds", type=int, default=600, help="length of the traced fio run")
    ap.add_argument("--coef", default="rrandiops", help="which of the six measurements to trace")
    ap.add_argument("--runtime", type=int, default=120, help="the reference's seconds per run")
    ap.add_argument("--trace", help="replay this recorded trace (JSON from an earlier run) instead of measuring")
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "bench-calibration"))
    a = ap.parse_args()
    if a.trace:
        with open(a.trace) as f:
            recorded = json.load(f)
        coef, trace = recorded["coef"], recorded["trace"]
    else:
        with vm(a) as name:
            res = guest_script(name, os.path.join(HERE, "reference.py"), ["lab-nvme-b", str(a.seconds), a.coef])
        coef, trace = a.coef, res["trace"][a.coef]
    rows = replay(trace, a.runtime)
    text = markdown(coef, trace, rows)
    print(text)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "drift-%s.json" % coef), "w") as f:
        json.dump({"coef": coef, "trace": trace, "rows": rows}, f, indent=1)
    with open(os.path.join(out, "drift-%s.md" % coef), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
