# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The reference calibration method, run INSIDE the lab guest (stdin of `lab.py ssh`).

What the kernel's tools/cgroup/iocost_coef_gen.py does (read from its source; docs/calibration.md):
scheduler none and nomerges 1 on the device, then six fixed-length fio runs (--direct=1
--ioengine=libaio --time_based --runtime=RUNTIME --numjobs=1, JSON output), each coefficient =
summed bw_bytes (divided by 4096 for the IOPS ones), then the queue settings put back.
Usage: python3 - SERIAL RUNTIME [COEF,COEF...] < reference.py; prints one JSON object. With the
third argument only those coefficients run, and each also leaves its per-second rate in "trace"
(fio's bandwidth log averaged over 1000 ms; drift.py samples it).
"""

import json
import os
import subprocess
import sys
import time

RUNS = (("rbps", "read", 1, 128 * 2 ** 20), ("rseqiops", "read", 64, 4096), ("rrandiops", "randread", 64, 4096),
        ("wbps", "write", 1, 128 * 2 ** 20), ("wseqiops", "write", 64, 4096), ("wrandiops", "randwrite", 64, 4096))


def disk_by_serial(serial):
    for name in os.listdir("/sys/block"):
        for path in ("/sys/block/%s/device/serial" % name, "/sys/block/%s/serial" % name):
            if os.path.exists(path) and open(path).read().strip() == serial:
                return name
    sys.exit("no disk with serial %s" % serial)


TRACE = "/tmp/coef-trace"    # fio's --write_bw_log prefix in trace mode


def bw_log(prefix):
    """fio's averaged bandwidth log (one line per second: msec, KiB/s, ...) as bytes/s per second."""
    path = prefix + "_bw.1.log"
    with open(path) as f:
        rates = [int(line.split(",")[1]) * 1024 for line in f if line.strip()]
    os.unlink(path)
    return rates


def main(serial, runtime, only=None):
    name = disk_by_serial(serial)
    queue = "/sys/block/%s/queue/" % name
    saved = {}
    for attr, value in (("scheduler", "none"), ("nomerges", "1")):
        text = open(queue + attr).read()
        saved[attr] = text.split("[")[1].split("]")[0] if attr == "scheduler" else text.strip()
        with open(queue + attr, "w") as f:
            f.write(value)
    out = {"device": name, "runtime": runtime, "values": {}, "seconds": {}}
    if only:
        out["trace"] = {}
    try:
        for coef, rw, depth, bs in RUNS:
            if only and coef not in only:
                continue
            argv = ["fio", "--direct=1", "--ioengine=libaio", "--name=coef", "--filename=/dev/" + name,
                    "--runtime=%d" % runtime, "--time_based", "--readwrite=" + rw, "--iodepth=%d" % depth,
                    "--blocksize=%d" % bs, "--numjobs=1", "--output-format=json"]
            if only:
                argv += ["--write_bw_log=" + TRACE, "--log_avg_msec=1000"]
            t0 = time.time()
            res = subprocess.run(argv, capture_output=True, text=True, check=True, env=dict(os.environ, LANG="C"))
            out["seconds"][coef] = round(time.time() - t0, 1)
            jobs = json.loads(res.stdout[res.stdout.index("{"):])["jobs"]
            side = "read" if rw.endswith("read") else "write"
            bw = sum(job[side]["bw_bytes"] for job in jobs)
            out["values"][coef] = int(bw if coef.endswith("bps") else bw / 4096)
            if only:
                out["trace"][coef] = [r if coef.endswith("bps") else r // 4096 for r in bw_log(TRACE)]
    finally:
        for attr in ("scheduler", "nomerges"):
            with open(queue + attr, "w") as f:
                f.write(saved[attr])
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",") if len(sys.argv) > 3 else None)
