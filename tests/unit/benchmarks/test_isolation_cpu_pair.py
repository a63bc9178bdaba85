# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The isolation benchmark's CPU-contention pair (issue 39) without a guest: the CPU burner run for real and its
figures, the cell's CPU time and cpusets, --cpu-pair's options and refusals, the check that each configuration's
jobs ran where it says, and the report's CPU table from a synthetic run."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
FIO = os.path.join(HERE, "..", "plugins", "module_utils", "fixtures", "fio")

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

bench = load("isolation", "bench")
guest = load("isolation", "guest")
report = bench.report
CAPACITY = {"iops": 4000, "bps": 400000000}
READER = "randread4k@25"


# ---------------------------------------------------------------------------------------------- the burner

def burn(tmp_path, workers, seconds=0.2, ramp=0.05):
    out = tmp_path / "hog.json"
    subprocess.run([sys.executable, "-c", guest.CPU_BURNER, str(workers), str(seconds), str(ramp), str(out)],
                   check=True, timeout=60)
    return json.loads(out.read_text()), guest.cpu_stats(str(out))


def test_the_burner_counts_each_workers_blocks_in_the_measured_window(tmp_path):
    doc, got = burn(tmp_path, 2)
    assert doc["engine"] == "sha256" and doc["block_bytes"] == 65536 and len(doc["workers"]) == 2
    for worker in doc["workers"]:
        assert worker["blocks"] > 0 and 0 < worker["seconds"] < 5 and worker["cpu_s"] > 0
    assert got["workers"] == 2 and got["engine"] == "sha256"
    per = [w["blocks"] * 65536 / w["seconds"] for w in doc["workers"]]
    assert got["hashed_bps"] == pytest.approx(sum(per))
    assert got["per_worker_bps"] == [round(b) for b in per]


def test_the_burner_holds_nothing_systemd_would_expand():
    # systemd-run hands the code to the unit's ExecStart, which substitutes $VARIABLES (and a unit file %specifiers)
    assert "$" not in guest.CPU_BURNER and "%" not in guest.CPU_BURNER
    compile(guest.CPU_BURNER, "cpuhog", "exec")


@pytest.mark.parametrize("text", [None, "", "{", '{"workers": [], "block_bytes": 65536}',
                                  '{"workers": [{"blocks": 3, "seconds": 0}], "block_bytes": 65536}',
                                  '{"workers": [{"seconds": 1}], "block_bytes": 65536}'])
def test_cpu_stats_of_a_missing_or_broken_output_is_none(tmp_path, text):
    path = tmp_path / "hog.json"
    if text is not None:
        path.write_text(text)
    assert guest.cpu_stats(str(path)) is None


def test_job_argv_runs_the_burner_with_a_worker_per_cpu_of_the_machine(monkeypatch):
    monkeypatch.setattr(guest.os, "cpu_count", lambda: 2)
    spec = {"mount": "/srv/bench", "seconds": 10, "ramp": 2, "rates": {READER: {"iops": 1000}}}
    assert guest.job_argv("cpuhog", spec, "/run/x/antagonist-3.json") == [
        sys.executable, "-c", guest.CPU_BURNER, "2", "10", "2", "/run/x/antagonist-3.json"]
    argv = guest.job_argv(READER, spec, "/run/x/reader-3.json")
    assert argv[:3] == ["fio", "--name=" + READER, "--filename=/srv/bench/reader.dat"]
    assert argv[-2:] == ["--rate_iops=1000", "--rate_process=linear"]


def test_start_puts_the_hog_in_training_slice(monkeypatch, tmp_path):
    argvs = []
    monkeypatch.setattr(guest, "RUN", str(tmp_path))
    monkeypatch.setattr(guest, "run", lambda argv, check=True: argvs.append(argv))
    unit, out = guest.start("antagonist", "cpuhog", {"mount": "/srv/bench", "seconds": 4, "ramp": 1}, 0)
    assert unit == "aiinfra-bench-antagonist-0.service"
    assert argvs[-1][:5] == ["systemd-run", "--quiet", "--unit=aiinfra-bench-antagonist-0", "--slice=training.slice",
                             "--"]
    assert argvs[-1][5:8] == [sys.executable, "-c", guest.CPU_BURNER] and argvs[-1][-1] == out


# ---------------------------------------------------------------------------------------------- CPU time, cpusets

def test_cpu_usage_and_the_cpus_a_unit_may_use(tmp_path):
    cg, proc = tmp_path / "cg", tmp_path / "proc"
    (cg / "training.slice" / "u.service").mkdir(parents=True)
    (cg / "training.slice" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2400000\nsystem_usec 100000\n")
    (cg / "training.slice" / "u.service" / "cgroup.procs").write_text("41\n42\n")
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "status").write_text("Name:\tpython3\nCpus_allowed:\t1\nCpus_allowed_list:\t0\n"
                                        "Mems_allowed_list:\t0\n")
    assert guest.cpu_usage("training.slice", str(cg)) == 2500000
    assert guest.cpu_usage("inference.slice", str(cg)) is None
    # 41 ended between the two reads: the next process answers
    assert guest.allowed("u.service", "training.slice", str(cg), str(proc)) == {"cpus": "0", "mems": "0"}
    assert guest.allowed("gone.service", "training.slice", str(cg), str(proc)) is None


def test_settings_show_each_slices_cpuset(monkeypatch):
    files = {"/sys/fs/cgroup/inference.slice/cpuset.cpus": "1\n", "/sys/fs/cgroup/inference.slice/cpuset.cpus.effective":
             "1\n", "/sys/fs/cgroup/training.slice/cpuset.cpus.effective": "0-1\n"}
    monkeypatch.setattr(guest, "read", files.get)
    got = guest.settings("259:1")
    assert got["inference.slice"]["cpuset.cpus"] == "1" and got["inference.slice"]["cpuset.cpus.effective"] == "1"
    assert got["training.slice"]["cpuset.cpus"] is None and got["training.slice"]["cpuset.cpus.effective"] == "0-1"


def test_a_cell_with_the_hog_records_its_work_the_slices_cpu_time_and_the_jobs_cpus(monkeypatch, tmp_path):
    with open(os.path.join(FIO, "debian13-fio-3.39-qos-read.out")) as f:
        reader_json = f.read()
    states, usage = [], {"inference.slice": 0, "training.slice": 0}

    def start(role, profile, spec, index):
        out = tmp_path / ("%s.json" % role)
        if role == "reader":
            out.write_text(reader_json)
        else:
            subprocess.run([sys.executable, "-c", guest.CPU_BURNER, "1", "0.1", "0", str(out)], check=True, timeout=60)
        return "aiinfra-bench-%s-0.service" % role, str(out)

    def unit_state(unit):
        states.append(unit)
        return "active" if len(states) <= 6 else "inactive"

    def read(path):
        for slice_ in usage:
            if path == "/sys/fs/cgroup/%s/cpu.stat" % slice_:
                usage[slice_] += 1000000 if slice_ == "training.slice" else 100000
                return "usage_usec %d\n" % usage[slice_]
            if path.startswith("/sys/fs/cgroup/%s/aiinfra-bench-" % slice_) and path.endswith("/cgroup.procs"):
                return "7\n" if slice_ == "inference.slice" else "8\n"
        return {"/proc/7/status": "Cpus_allowed_list:\t1\nMems_allowed_list:\t1\n",
                "/proc/8/status": "Cpus_allowed_list:\t0\nMems_allowed_list:\t0\n"}.get(path)
    monkeypatch.setattr(guest, "start", start)
    monkeypatch.setattr(guest, "unit_state", unit_state)
    monkeypatch.setattr(guest, "read", read)
    monkeypatch.setattr(guest, "run", lambda argv, check=True: None)
    spec = {"mount": "/srv/bench", "seconds": 1, "ramp": 0, "rates": {READER: {"iops": 3000}}}
    res = guest._cell(spec, {"reader": READER, "antagonist": "cpuhog"}, 0, "259:1", None)
    assert res["reader_cpus"] == {"cpus": "1", "mems": "1"} and res["antagonist_cpus"] == {"cpus": "0", "mems": "0"}
    assert res["antagonist_stats"]["workers"] == 1 and res["antagonist_stats"]["hashed_bps"] > 0
    assert res["reader_stats"]["rate"] == {"iops": 3000} and res["reader_stats"]["clat_ns"]["p99"]
    # cpu.stat read once before and once after: 1 s and 0.1 s of CPU over the cell's wall time
    assert res["cpu"]["training.slice"] == pytest.approx(1.0 / res["wall"], rel=0.2)
    assert res["cpu"]["inference.slice"] == pytest.approx(0.1 / res["wall"], rel=0.2)


# ---------------------------------------------------------------------------------------------- bench options

def parsed(argv):
    """bench.py's parser on argv, then --cpu-pair's defaults (as main does)."""
    seen = {}

    class Stop(Exception):
        pass

    def parse_args(self, args=None, namespace=None):
        seen["a"] = original(self, argv, namespace)
        raise Stop()
    original = bench.argparse.ArgumentParser.parse_args
    bench.argparse.ArgumentParser.parse_args = parse_args
    try:
        bench.main()
    except Stop:
        pass
    finally:
        bench.argparse.ArgumentParser.parse_args = original
    return bench.cpu_pair_defaults(seen["a"], argv)


def test_cpu_pair_sets_its_run_and_leaves_what_the_command_line_names():
    a = parsed(["--cpu-pair"])
    assert (a.configs, a.readers, a.antagonists, a.seconds, a.ramp, a.guest) == (
        "roles,roles_cpuset", "randread4k@25", "cpuhog", 10, 2, "debian13")
    assert a.numa and not a.probe and not a.sweep and a.repeats == 3 and a.tcg_thread == "multi"
    assert a.out.endswith(os.path.join(".cache", "bench-isolation-cpu")) and a.disk_capacity == "device-bound"
    assert a.unthrottled_reference == "none"
    a = parsed(["--cpu-pair", "--guest", "debian12", "--seconds=20", "--read", "seqread128k@25", "--probe",
                "--unthrottled-reference", "x.json"])
    assert (a.guest, a.seconds, a.readers, a.probe) == ("debian12", 20, "seqread128k@25", True)
    assert a.unthrottled_reference == "x.json"
    assert a.configs == "roles,roles_cpuset" and a.numa


def test_cpuset_refusals():
    auto = bench.CPUSET_VARS
    assert bench.cpuset_refusal(["roles"], auto, False) is None
    assert bench.cpuset_refusal(["roles", "roles_cpuset"], auto, True) is None
    assert "needs a guest with two NUMA nodes (--numa)" in bench.cpuset_refusal(["roles_cpuset"], auto, False)
    # explicit lists split any guest with two CPUs
    assert bench.cpuset_refusal(["roles_cpuset"], {"inference_cpus": "1", "training_cpus": "0"}, False) is None
    for bad in ({"inference_cpus": "1", "training_cpus": "shared"}, {"inference_cpus": "", "training_cpus": "0"},
                {"training_cpus": "0"}):
        assert "that split the CPUs" in bench.cpuset_refusal(["roles_cpuset"], bad, True)


def test_the_hog_needs_no_file_and_no_rate_plan_entry():
    assert bench.files_for([READER], ["cpuhog"]) == {"reader.dat": 256}
    assert bench.files_for(["randread4k"], ["seqwrite1m", "buffered"]) == bench.FILES
    plan = bench.rate_plan([READER], ["cpuhog", "randread64"], None, CAPACITY)
    assert set(plan["antagonists"]) == {"randread64"} and plan["readers"][READER]["rate"] == 1000
    assert bench.CPU_ANTAGONISTS == ("cpuhog",) and "cpuhog" not in bench.ANTAGONISTS


def test_roles_cpuset_applies_site_yml_with_the_split(monkeypatch, tmp_path):
    calls = []
    lab = bench.Lab("h", str(tmp_path))
    monkeypatch.setattr(lab, "playbook", lambda path, extra=None: calls.append((os.path.basename(path), extra)))
    monkeypatch.setattr(lab, "guest", lambda action, spec: calls.append((action, spec)))
    lab.files = {"reader.dat": 256}
    bench.apply(lab, "roles_cpuset", False, "db", {"training_cpu_weight": 50})
    bench.apply(lab, "roles", False, "db", {"training_cpu_weight": 50}, cpuset={"inference_cpus": "1"})
    (book, split), prep, (book2, plain) = calls[0], calls[1], calls[2]
    assert book == book2 == "site.yml" and prep == ("prepare", {"serial": bench.DEVICE, "mount": bench.MOUNT,
                                                                "files": {"reader.dat": 256}})
    assert (split["inference_cpus"], split["training_cpus"], split["training_cpu_weight"]) == ("auto", "auto", 50)
    # the same roles run without the split: no cpuset variable, so the roles take it away
    assert "inference_cpus" not in plain and plain["training_cpu_weight"] == 50
    assert dict((k, v) for k, v in split.items() if k not in bench.CPUSET_VARS) == plain


# ---------------------------------------------------------------------------------------------- the check

def hog(bps=8e7):
    return {"engine": "sha256", "workers": 2, "hashed_bps": bps, "per_worker_bps": [bps / 2, bps / 2], "cpu_s": 20.0}


def reader(p99, iops=1000.0, rate=1000):
    return {"dir": "read", "iops": iops, "bw_bytes": iops * 4096, "ios": int(iops * 10), "runtime_ms": 10000,
            "clat_ns": {"p50": p99 // 4, "p99": p99, "p99.9": p99 * 2}, "percentiles": {"99.000000": p99},
            "rate": {"iops": rate}}


def run(config, repeat, rd=None, hg=None, cpus=("0-1", "0-1"), used=(0.1, 1.9)):
    out = {"config": config, "repeat": repeat, "reader": READER if rd else None, "antagonist": "cpuhog" if hg else None,
           "wall": 13.0, "cpu": {"inference.slice": used[0], "training.slice": used[1]}}
    if rd:
        out.update(reader_stats=rd, reader_cpus={"cpus": cpus[0], "mems": cpus[0]})
    if hg:
        out.update(antagonist_stats=hg, antagonist_cpus={"cpus": cpus[1], "mems": cpus[1]})
    return out


def cpu_results(split=True):
    """Three repeats: the reader and the hog alone and together under roles, together under roles_cpuset."""
    runs = []
    for rep, (solo, shared, apart) in enumerate(((400000, 2400000, 600000), (500000, 2000000, 500000),
                                                 (450000, 3000000, 700000)), 1):
        runs += [run("roles", rep, rd=reader(solo), used=(0.15, 0)), run("roles", rep, hg=hog(1e8), used=(0, 1.95)),
                 run("roles", rep, rd=reader(shared, iops=900.0), hg=hog(9e7), used=(0.1, 1.9)),
                 run("roles_cpuset", rep, rd=reader(apart), hg=hog(5e7),
                     cpus=("1", "0") if split else ("0-1", "0-1"), used=(0.15, 1.0))]
    return {"configs": ["roles", "roles_cpuset"], "config_labels": bench.LABELS, "readers": [READER],
            "antagonists": ["cpuhog"], "cpu_antagonists": ["cpuhog"], "runs": runs,
            "rates": bench.rate_plan([READER], ["cpuhog"], None, CAPACITY),
            "meta": {"guest": "debian13", "seconds": 10, "repeats": 3, "device": bench.DEVICE}}


def test_cpu_pair_check_passes_a_run_that_measured_what_it_says():
    assert bench.cpu_pair_check(cpu_results()) == []


def test_cpu_pair_check_names_each_problem():
    results = cpu_results(split=False)
    results["runs"][2]["reader_cpus"]["cpus"] = "1"              # roles: the reader alone on CPU 1
    results["runs"][5]["antagonist_stats"] = None               # repeat 2: the hog wrote nothing
    results["runs"][5]["antagonist_error"] = "fio wrote no result"
    results["runs"][8]["reader_stats"] = None                   # repeat 3's solo reader failed
    del results["runs"][10]["antagonist_cpus"]
    problems = bench.cpu_pair_check(results)
    assert problems == [
        "randread4k@25 vs cpuhog (roles, repeat 1): a split in force without roles_cpuset, the reader had CPUs 1 and "
        "the hog 0-1",
        "randread4k@25 vs cpuhog (roles_cpuset, repeat 1): no split in force, the reader had CPUs 0-1 and the hog 0-1",
        "None vs cpuhog (roles, repeat 2): the CPU hog has no work figures (fio wrote no result)",
        "randread4k@25 vs cpuhog (roles_cpuset, repeat 2): no split in force, the reader had CPUs 0-1 and the hog 0-1",
        "randread4k@25 vs None (roles, repeat 3): the reader has no p99 (None)",
        "randread4k@25 vs cpuhog (roles, repeat 3): the CPUs the jobs could use were not read (['0-1', None])",
        "randread4k@25 vs cpuhog (roles_cpuset, repeat 3): no split in force, the reader had CPUs 0-1 and the hog 0-1"]


# ---------------------------------------------------------------------------------------------- the report

def test_the_summary_has_the_hogs_work_kept_and_each_repeats_ratio():
    summary = report.summarize(cpu_results())
    shared, apart = summary["cells"]
    assert (shared["config"], apart["config"]) == ("roles", "roles_cpuset")
    assert summary["solo"]["antagonists"]["cpuhog"]["hashed_bps"]["median"] == 1e8
    assert shared["p99_ratio"] == pytest.approx(2400000 / 450000) and apart["p99_ratio"] == pytest.approx(600000 / 450000)
    assert shared["cpu"]["p99_ratio_per_repeat"] == pytest.approx([6.0, 4.0, 3000000 / 450000])
    assert apart["cpu"]["p99_ratio_per_repeat"] == pytest.approx([1.5, 1.0, 700000 / 450000])
    assert shared["cpu"]["kept"] == pytest.approx(0.9) and apart["cpu"]["kept"] == pytest.approx(0.5)
    assert apart["cpu"]["allowed"] == {"reader": "1", "antagonist": "0"}
    assert apart["cpu"]["used"] == {"inference.slice": 0.15, "training.slice": 1.0}
    assert shared["rate"]["achieved"] == pytest.approx(0.9) and shared["rate"]["kept"] is False
    assert apart["rate"]["kept"] is True and apart["rate"]["frontier"] is None      # no disk frontier for a CPU hog


def test_the_markdown_leads_with_the_cpu_table_and_keeps_the_hog_out_of_the_disk_tables():
    results = cpu_results()
    md = report.markdown(results, report.summarize(results))
    table = md.split("### CPU contention")[1].split("###")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "configuration" not in line]
    assert rows == [
        "| alone (roles, defaults) | randread4k@25 (1000 IOPS) | \u2014 | 3 | 450 \u00b5s (22%) | \u2014 | \u2014 | "
        "yes (100.0%) | \u2014 | \u2014 | \u2014 / 0.15 |",
        "| alone (roles, defaults) | cpuhog (no reader) | \u2014 | 3 | \u2014 | \u2014 | \u2014 | \u2014 | 100 (0%) | "
        "\u2014 | 1.95 / \u2014 |",
        "| roles, defaults | randread4k@25 (1000 IOPS) vs cpuhog | 0-1 / 0-1 | 3 | 2.40 ms (42%) | 5.33\u00d7 | "
        "6.00, 4.00, 6.67 | no (90.0%) | 90 (0%) | 90% | 1.90 / 0.10 |",
        "| roles + cpuset split | randread4k@25 (1000 IOPS) vs cpuhog | 1 / 0 | 3 | 600 \u00b5s (33%) | 1.33\u00d7 | "
        "1.50, 1.00, 1.56 | yes (100.0%) | 50 (0%) | 50% | 1.00 / 0.15 |"]
    assert "Under TCG a vCPU is a host thread" in table
    assert "Rate-bound readers" not in md and "Flat-out readers" not in md


def test_disk_antagonists_are_no_cpu_cells():
    results = cpu_results()
    results["cpu_antagonists"] = []         # a run from before the CPU pair: the same cells are rate-bound ones
    summary = report.summarize(results)
    assert all(c["cpu"] is None for c in summary["cells"])
    assert "CPU contention" not in report.markdown(results, summary)
