# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the lab's device-bound capacity was chosen: every benchmark job alone, on the unthrottled disk
(what the emulator's CPU sustains under TCG - the ceiling) and on the device-bound disk (lab.py
--device-bound). A capacity works when each antagonist's shape is held by the throttle well below its
TCG ceiling (then the disk, not the CPU, saturates) and the QD1 readers stay below it alone (else the
throttle's own timers make the solo tail).

  .venv/bin/python benchmarks/isolation/ceiling.py [--capacities none,device-bound,4000,200M]
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import bench  # noqa: E402  pylint: disable=wrong-import-position
import report  # noqa: E402  pylint: disable=wrong-import-position
from labvm import disk_capacity, vm  # noqa: E402  pylint: disable=wrong-import-position


def measure(a, capacity):
    a.disk_capacity = capacity
    lab = bench.Lab(a.name, a.out)
    with vm(a):
        lab.write_inventory()
        cap = disk_capacity(a.name, bench.DEVICE)
        lab.guest("prepare", {"serial": bench.DEVICE, "mount": bench.MOUNT, "files": bench.FILES})
        got = lab.guest("cells", {"serial": bench.DEVICE, "mount": bench.MOUNT, "seconds": a.seconds, "ramp": a.ramp,
                                  "cells": bench.solo_cells(bench.READERS, bench.ANTAGONISTS)})
    rows = []
    for c in got["cells"]:
        role = "reader" if c["reader"] else "antagonist"
        st = c.get(role + "_stats") or {}
        rows.append({"job": c[role], "iops": st.get("iops"), "bw": st.get("bw_bytes"),
                     "p50": (st.get("clat_ns") or {}).get("p50"), "p99": (st.get("clat_ns") or {}).get("p99")})
    return cap, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_vm_args(ap, "debian12", "bench-ceiling")
    ap.add_argument("--capacities", default="none,device-bound",
                    help="comma-separated: none, device-bound, or IOPS:BYTES_PER_S")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--ramp", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(bench.REPO, ".cache", "bench-ceiling"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    header = ["job"]
    table = {}
    for capacity in a.capacities.split(","):
        cap, rows = measure(a, capacity.replace(":", ","))
        header.append("%s (IOPS, MB/s, p50, p99)" % ("%(iops)s IOPS / %(bps)s B/s" % cap if cap else "unthrottled"))
        for r in rows:
            table.setdefault(r["job"], [r["job"]]).append("%s, %s, %s, %s" % (
                report._fmt(r["iops"], "%.0f"), report._fmt(r["bw"], "%.0f", 1e-6),
                report.fmt_latency(r["p50"]), report.fmt_latency(r["p99"])))
    md = "\n".join(report._md_table(header, list(table.values())))
    with open(os.path.join(a.out, "ceiling.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    print("(%s s per job, %.0f s in all; %s)" % (a.seconds, time.time() - t0, os.path.join(a.out, "ceiling.md")))


if __name__ == "__main__":
    main()
