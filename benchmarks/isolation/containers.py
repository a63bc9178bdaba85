# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The smoke pair through containers (bench.py --containers, issue 37): what the run is judged by and its report.

Each repeat runs the smoke cells (each job alone, then SMOKE_PAIRS) twice under the roles: once with the jobs as
transient units (systemd-run, as `make test`'s smoke) and once in containers (the reader in a Docker container with
--cgroup-parent=inference.slice, the antagonist in a Podman container with --cgroup-parent=training.slice). Every run
carries "launcher". Besides the smoke run's checks (bench.smoke_check, per launcher):

- placement_problems: each container ran below its slice (cgroup from /proc/PID/cgroup, a docker-/libpod- scope) and
  exited 0;
- charge_problems (both launchers): each job's slice was charged, in io.stat, at least the bytes fio moved in its
  measured seconds, and in a job's solo run the other slice next to nothing;
- overlap_problems: in a pair, the antagonist ran through the reader's measured seconds (fio's end time and runtime).

protection() is the comparison: per pair and launcher the reader's p99 against its solo p99 of the same repeat and
launcher (the protection ratio, 1 = untouched), its median and range over the repeats, beside the antagonist's
throughput (a weaker antagonist would look like better protection). verdict(): the containers' median ratio inside the
systemd-run range is "same"; else "differs" - reported as it is, not tuned away.
"""

import statistics

LAUNCHERS = ("systemd-run", "containers")
READER_SLICE, ANTAGONIST_SLICE = "inference.slice", "training.slice"
# role -> (runtime, slice, the scope name's prefix under the systemd cgroup manager)
PLACEMENT = {"reader": ("docker", READER_SLICE, "docker-"), "antagonist": ("podman", ANTAGONIST_SLICE, "libpod-")}
SLICE_OF = {"reader": READER_SLICE, "antagonist": ANTAGONIST_SLICE}
# The slice's io.stat counts the job's ramp too: at least fio's measured bytes, less this for rounding.
CHARGE_TOLERANCE = 0.05
# In a solo run the other slice was charged at most this share of the job's bytes.
STRAY_SHARE = 0.05
# The share of the reader's measured seconds the antagonist must have run through.
OVERLAP_MIN = 0.9


def _num(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def launcher_runs(results, launcher):
    """The runs of one launcher (runs without "launcher" are systemd-run's: the smoke run's own)."""
    return [r for r in results.get("runs") or [] if (r.get("launcher") or "systemd-run") == launcher]


def placement_problems(run):
    """A containers run's jobs ran in containers below their slices and ended well."""
    problems = []
    for role, (runtime, slice_, prefix) in PLACEMENT.items():
        if not run.get(role):
            continue
        box = run.get(role + "_container") or {}
        where = "%s %s (repeat %s)" % (role, run[role], run.get("repeat"))
        cgroup = box.get("cgroup") or ""
        parts = cgroup.strip("/").split("/")
        if box.get("runtime") != runtime:
            problems.append("%s: ran in %s, not a %s container" % (where, box.get("runtime") or "no container", runtime))
        if parts[0] != slice_ or len(parts) < 2 or not parts[1].startswith(prefix):
            problems.append("%s: the %s container's cgroup is %r, not below %s (%s<id>.scope)"
                            % (where, runtime, cgroup or None, slice_, prefix))
        if box.get("exit") != 0:
            problems.append("%s: the %s container exited %s" % (where, runtime, box.get("exit")))
    return problems


def _bytes(stats):
    """fio's bytes of the measured seconds: io_bytes, else bandwidth times runtime."""
    got = _num(stats.get("io_bytes"))
    if got is None and _num(stats.get("bw_bytes")) is not None and _num(stats.get("runtime_ms")) is not None:
        got = stats["bw_bytes"] * stats["runtime_ms"] / 1000.0
    return got


def charge_problems(run):
    """Each job's slice was charged (io.stat) for what fio moved; alone, the other slice for next to nothing."""
    problems = []
    io = run.get("io") or {}
    for role, slice_ in SLICE_OF.items():
        stats = run.get(role + "_stats") or {}
        moved = _bytes(stats)
        if not run.get(role) or not moved:
            continue
        key = "wbytes" if stats.get("dir") == "write" else "rbytes"
        where = "%s %s (%s, repeat %s)" % (role, run[role], run.get("launcher") or "systemd-run", run.get("repeat"))
        charged = _num((io.get(slice_) or {}).get(key))
        if charged is None or charged < moved * (1 - CHARGE_TOLERANCE):
            problems.append("%s: %s's io.stat was charged %s %s, fio moved %d in its measured seconds"
                            % (where, slice_, charged, key, moved))
        other = ANTAGONIST_SLICE if slice_ == READER_SLICE else READER_SLICE
        stray = _num((io.get(other) or {}).get(key)) or 0
        if not (run.get("reader") and run.get("antagonist")) and stray > moved * STRAY_SHARE:
            problems.append("%s ran alone, yet %s was charged %d %s (the job moved %d)"
                            % (where, other, stray, key, moved))
    return problems


def overlap(run, ramp):
    """The share of the reader's measured seconds the antagonist's job ran through (ramp included), None without
    both jobs' end times and runtimes. A job measured over [end - runtime, end]; it ran from `ramp` s before that."""
    rs, st = run.get("reader_stats") or {}, run.get("antagonist_stats") or {}
    nums = [_num(x) for x in (rs.get("end_ms"), rs.get("runtime_ms"), st.get("end_ms"), st.get("runtime_ms"))]
    if None in nums or nums[1] <= 0:
        return None
    r_end, r_ms, a_end, a_ms = nums
    r_from, a_from = r_end - r_ms, a_end - a_ms - 1000.0 * (ramp or 0)
    return max(0.0, min(r_end, a_end) - max(r_from, a_from)) / r_ms


def overlap_problems(run, ramp):
    if not (run.get("reader") and run.get("antagonist")):
        return []
    got = overlap(run, ramp)
    if got is None or got < OVERLAP_MIN:
        return ["%s vs %s (%s, repeat %s): the antagonist ran through %s of the reader's measured seconds, not %.0f%%"
                % (run["reader"], run["antagonist"], run.get("launcher") or "systemd-run", run.get("repeat"),
                   "no figure" if got is None else "%.0f%%" % (100 * got), 100 * OVERLAP_MIN)]
    return []


def problems(results):
    """Every check of this module over a containers run's results (bench.smoke_check runs beside it)."""
    out = []
    ramp = (results.get("meta") or {}).get("ramp")
    for run in results.get("runs") or []:
        if run.get("launcher") == "containers":
            out += placement_problems(run)
        out += charge_problems(run) + overlap_problems(run, ramp)
    for launcher in LAUNCHERS:
        if not launcher_runs(results, launcher):
            out.append("no %s runs" % launcher)
    return out


def _p99(stats):
    return _num(((stats or {}).get("clat_ns") or {}).get("p99"))


def _agg(values):
    vals = [v for v in values if _num(v) is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0, "values": []}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals), "values": vals}


def _throughput(stats):
    """An antagonist's work: MB/s for a writer, IOPS for a reader (the unit it is planned in)."""
    stats = stats or {}
    if stats.get("dir") == "write":
        return _num(stats.get("bw_bytes")) and stats["bw_bytes"] / 1e6
    return _num(stats.get("iops"))


def protection(results):
    """[{"reader", "antagonist", "unit", launcher: {"ratio", "p99_pair", "p99_solo", "antagonist", "antagonist_solo"}
    (each an aggregate over the repeats: median, min, max, n, values)}] per pair in the order run. The ratio of a
    repeat is the reader's p99 beside the antagonist over its p99 alone, both of that repeat and launcher."""
    pairs = []
    for run in results.get("runs") or []:
        pair = (run.get("reader"), run.get("antagonist"))
        if all(pair) and pair not in pairs:
            pairs.append(pair)
    out = []
    for reader, antagonist in pairs:
        row = {"reader": reader, "antagonist": antagonist}
        for launcher in LAUNCHERS:
            runs = launcher_runs(results, launcher)
            ratios, pair_p99, solo_p99, hog, hog_solo = [], [], [], [], []
            for run in runs:
                if run.get("reader") == reader and run.get("antagonist") == antagonist:
                    solo = [_p99(r.get("reader_stats")) for r in runs if r.get("repeat") == run.get("repeat")
                            and r.get("reader") == reader and not r.get("antagonist")]
                    p99, alone = _p99(run.get("reader_stats")), (solo or [None])[0]
                    pair_p99.append(p99)
                    solo_p99.append(alone)
                    ratios.append(p99 / alone if p99 and alone else None)
                    hog.append(_throughput(run.get("antagonist_stats")))
                elif run.get("antagonist") == antagonist and not run.get("reader"):
                    hog_solo.append(_throughput(run.get("antagonist_stats")))
            row[launcher] = {"ratio": _agg(ratios), "p99_pair": _agg(pair_p99), "p99_solo": _agg(solo_p99),
                             "antagonist": _agg(hog), "antagonist_solo": _agg(hog_solo)}
        row["unit"] = "MB/s" if antagonist.startswith("seqwrite") or antagonist == "buffered" else "IOPS"
        row["verdict"] = verdict(row)
        out.append(row)
    return out


def verdict(row):
    """"same" when the containers' median protection ratio lies within the systemd-run ratios' range over the
    repeats, "differs" when outside, None without figures of both."""
    base, boxed = row.get("systemd-run", {}).get("ratio") or {}, row.get("containers", {}).get("ratio") or {}
    if base.get("min") is None or boxed.get("median") is None:
        return None
    return "same" if base["min"] <= boxed["median"] <= base["max"] else "differs"


def _ms(ns):
    return "-" if ns is None else "%.2f ms" % (ns / 1e6)


def _times(value):
    return "%.2fx" % value


def _whole(value):
    return "%.0f" % value


def _range(agg, fmt):
    if agg.get("median") is None:
        return "-"
    if agg["n"] < 2:
        return fmt(agg["median"])
    return "%s (%s-%s)" % (fmt(agg["median"]), fmt(agg["min"]), fmt(agg["max"]))


def markdown(results, rows):
    """The side-by-side table: per pair and launcher the protection ratio, the p99s and the antagonist's work."""
    meta = results.get("meta") or {}
    lines = ["# Isolation smoke pair: systemd-run and containers", "",
             "Guest %s (kernel %s), %s; roles applied once; %s repeats of %s s (ramp %s s), each repeat both launchers "
             "(order alternating). Reader in inference.slice, antagonist in training.slice: as transient units "
             "(systemd-run), or the reader in a Docker container and the antagonist in a Podman container "
             "(--cgroup-parent=the slice; %s)." % (
                 meta.get("guest"), meta.get("kernel"), meta.get("accel"), meta.get("repeats"), meta.get("seconds"),
                 meta.get("ramp"), ", ".join("%s" % v for v in sorted((meta.get("runtimes") or {}).values()))
                 or "runtimes not recorded"),
             "",
             "Protection ratio: the reader's p99 beside the antagonist over its p99 alone in the same repeat and "
             "launcher (1.00x: untouched). Median (min-max) over the repeats.", "",
             "| reader | antagonist | launcher | p99 / solo | p99 | p99 alone | antagonist | antagonist alone | same? |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for launcher in LAUNCHERS:
            f = row[launcher]
            lines.append("| %s | %s | %s | %s | %s | %s | %s %s | %s %s | %s |" % (
                row["reader"], row["antagonist"], launcher, _range(f["ratio"], _times), _range(f["p99_pair"], _ms),
                _range(f["p99_solo"], _ms), _range(f["antagonist"], _whole), row["unit"],
                _range(f["antagonist_solo"], _whole), row["unit"],
                "" if launcher == "systemd-run" else (row["verdict"] or "-")))
    lines += ["", "same?: the containers' median ratio within the systemd-run range (else differs)."]
    return "\n".join(lines) + "\n"
