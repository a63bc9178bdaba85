# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The io_metrics exporter (module_utils/_observability/io_metrics.py) against fake /sys + cgroupfs trees: exact metric lines from
kernel text captured in the lab (tests/observed/debian12-6.1.txt), nothing made up for what a host lacks, the atomic
write and the bounded run (what the role installs: tests/unit/roles/test_io_metrics.py)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from sim.host import FakeHost
from sim.metrics import EXPECTED, VERIFY, lab_host

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_latency as _latency
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as m
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS


def text(h, **kw):
    return m.render(m.collect(KernelFS(h.root), **kw))


def families(output):
    return sorted({line.split()[2] for line in output.splitlines() if line.startswith("# TYPE ")})


def test_exact_lines_from_lab_output(tmp_path):
    assert text(lab_host(tmp_path)) == EXPECTED


def test_kernel_without_iocost_or_psi_gives_no_iocost_or_pressure_metric(tmp_path):
    out = text(lab_host(tmp_path, iocost=False, psi=False))
    names = families(out)
    assert not [n for n in names if "iocost" in n or "pressure" in n], out
    assert "aiinfra_io_isolation_slice_io_reads_total" in names
    assert 'aiinfra_io_isolation_slice_io_reads_total{device="nvme0n1",majmin="259:0",slice="inference.slice"} 5008' in out
    assert "aiinfra_io_isolation_exporter_errors 0" in out


def test_a_slice_not_present_gives_only_its_presence_and_no_member(tmp_path):
    out = text(lab_host(tmp_path), slices=["training.slice", "ai-batch.slice", "training.slice"])
    assert [line for line in out.splitlines() if "slice=" in line] == [
        'aiinfra_io_isolation_slice_present{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_present{slice="ai-batch.slice"} 0',
        # a cgroup that does not exist has no process and no unit (what the empty-slice alert needs)
        'aiinfra_io_isolation_slice_processes{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_processes{slice="ai-batch.slice"} 0',
        'aiinfra_io_isolation_slice_units{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_units{slice="ai-batch.slice"} 0',
        'aiinfra_io_isolation_slice_workloads_listed{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_workloads_listed{slice="ai-batch.slice"} 0']
    assert "aiinfra_io_isolation_exporter_errors 0" in out


def test_nested_slice_and_cgroup_path_are_found_where_systemd_puts_them(tmp_path):
    h = lab_host(tmp_path)
    h.add_cgroup("ai.slice/ai-serve.slice", {"io.stat": "259:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n"})
    out = text(h, slices=["ai-serve.slice", "ai.slice/ai-serve.slice"])
    for name in ("ai-serve.slice", "ai.slice/ai-serve.slice"):
        assert ('aiinfra_io_isolation_slice_io_written_bytes_total{device="nvme0n1",majmin="259:0",slice="%s"} 8192'
                % name) in out


def test_unparsable_or_unreadable_files_are_counted_and_skipped(tmp_path):
    h = lab_host(tmp_path)
    h.write("/sys/fs/cgroup/inference.slice/io.stat", "garbage line\n")
    os.unlink(h.path("/sys/fs/cgroup/io.cost.qos"))
    os.mkdir(h.path("/sys/fs/cgroup/io.cost.qos"))     # reading it fails with EISDIR, not "absent"
    h.write(VERIFY, '{"drift": "yes"}')
    out = text(h)
    assert "aiinfra_io_isolation_exporter_errors 3" in out
    names = families(out)
    assert "aiinfra_io_isolation_slice_io_read_bytes_total" not in names
    assert "aiinfra_io_isolation_iocost_qos_vrate_min_ratio" not in names
    assert "aiinfra_io_isolation_config_drift" not in names
    # what could be read is still there
    assert 'aiinfra_io_isolation_iocost_vrate_ratio{device="nvme0n1",majmin="259:0"} 1.0' in out
    assert "aiinfra_io_isolation_slice_io_pressure_waiting_seconds_total" in names


def test_main_names_the_skipped_files_on_stderr(tmp_path, capsys):
    h = lab_host(tmp_path)
    h.write("/sys/fs/cgroup/inference.slice/io.stat", "garbage line\n")
    assert m.main(["--root", h.root, "--stdout"]) == 0
    captured = capsys.readouterr()
    assert "aiinfra_io_isolation_exporter_errors 1" in captured.out
    assert captured.err.startswith("aiinfra-io-metrics: skipped /sys/fs/cgroup/inference.slice/io.stat: ")


def test_no_cgroup2_and_no_verify_result_gives_only_the_error_count(tmp_path):
    h = FakeHost(tmp_path)
    h.add_nvme(ctrl=0, majmin="259:0")
    assert text(h) == ("# HELP aiinfra_io_isolation_exporter_errors Files this run could not read or parse "
                       "(each one skipped, not reported as zero).\n"
                       "# TYPE aiinfra_io_isolation_exporter_errors gauge\n"
                       "aiinfra_io_isolation_exporter_errors 0\n")


def test_vrate_and_debug_stats_are_converted_to_base_units(tmp_path):
    h = lab_host(tmp_path)
    h.write("/sys/fs/cgroup/io.stat", "259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.vrate=87.35 "
                                      "cost.usage=10\n")
    h.write("/sys/fs/cgroup/inference.slice/io.stat",
            "259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.usage=2500000 cost.wait=1000 "
            "cost.indebt=0 cost.indelay=3\n")
    out = text(h)
    assert 'aiinfra_io_isolation_iocost_vrate_ratio{device="nvme0n1",majmin="259:0"} 0.8735' in out
    labels = '{device="nvme0n1",majmin="259:0",slice="inference.slice"}'
    for line in ("slice_iocost_usage_seconds_total%s 2.5", "slice_iocost_wait_seconds_total%s 0.001",
                 "slice_iocost_indebt_seconds_total%s 0.0", "slice_iocost_indelay_seconds_total%s 3e-06"):
        assert "aiinfra_io_isolation_" + line % labels in out


def test_label_values_are_escaped():
    c = m.Collector(KernelFS("/nonexistent"))
    c.add("slice_present", {"slice": 'a"b\\c\nd'}, 1)
    assert 'aiinfra_io_isolation_slice_present{slice="a\\"b\\\\c\\nd"} 1' in m.render(c)


# -- the file node_exporter reads ------------------------------------------------------------------

def test_main_writes_the_file_atomically_into_the_textfile_dir(tmp_path, monkeypatch):
    h = lab_host(tmp_path)
    out_dir = "/var/lib/prometheus/node-exporter"
    target = h.path(out_dir + "/" + m.OUTPUT_NAME)
    h.write(out_dir + "/" + m.OUTPUT_NAME, "old\n")
    seen = {}
    real_rename = os.rename

    def rename(src, dst):
        # at the rename the new text is complete in a temp file of the same directory, the old file untouched
        seen.update(src=src, dst=dst, old=open(dst).read(), new=open(src).read())
        real_rename(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    assert m.main(["--root", h.root]) == 0
    assert seen["dst"] == target and os.path.dirname(seen["src"]) == os.path.dirname(target)
    assert os.path.basename(seen["src"]).startswith(".")      # node_exporter reads only *.prom
    assert seen["old"] == "old\n" and seen["new"] == EXPECTED
    assert open(target).read() == EXPECTED
    assert sorted(os.listdir(os.path.dirname(target))) == [m.OUTPUT_NAME]
    assert oct(os.stat(target).st_mode & 0o777) == "0o644"


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temp_file(tmp_path, monkeypatch, capsys):
    h = lab_host(tmp_path)
    out_dir = "/var/lib/prometheus/node-exporter"
    h.write(out_dir + "/" + m.OUTPUT_NAME, "old\n")

    def rename(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "rename", rename)
    assert m.main(["--root", h.root]) == 1
    assert "No space left" in capsys.readouterr().err
    assert os.listdir(h.path(out_dir)) == [m.OUTPUT_NAME]
    assert h.read(out_dir + "/" + m.OUTPUT_NAME) == "old\n"


def test_a_run_that_hangs_gives_up_and_writes_nothing(tmp_path, monkeypatch, capsys):
    h = lab_host(tmp_path)
    out_dir = "/var/lib/prometheus/node-exporter"
    h.write(out_dir + "/" + m.OUTPUT_NAME, "old\n")

    def hang(*_a, **_k):
        time.sleep(5)
    monkeypatch.setattr(m, "collect", hang)
    started = time.monotonic()
    assert m.main(["--root", h.root, "--timeout", "1"]) == 1
    assert time.monotonic() - started < 3
    assert "gave up after 1 s" in capsys.readouterr().err
    assert os.listdir(h.path(out_dir)) == [m.OUTPUT_NAME] and h.read(out_dir + "/" + m.OUTPUT_NAME) == "old\n"


@pytest.mark.parametrize("argv, words", [
    (["--slice", "inference.slice; rm -rf /"], "inference.slice; rm -rf /"),
    (["--slice", "/etc/passwd"], "outside /sys/fs/cgroup"),
    (["--timeout", "0"], "--timeout must be at least 1"),
])
def test_bad_arguments_are_refused(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        m.parse_args(argv)
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_stdout_and_no_verify_file(tmp_path, capsys):
    h = lab_host(tmp_path)
    assert m.main(["--root", h.root, "--stdout", "--verify-file", ""]) == 0
    out = capsys.readouterr().out
    assert "config_drift" not in out and "aiinfra_io_isolation_slice_present" in out


# -- promtool ------------------------------------------------------------------------------------

PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not found (make promtool unpacks it from Debian's prometheus package)")
@pytest.mark.parametrize("kind", ["lab", "no-iocost-no-psi"])
def test_promtool_check_metrics_is_clean(tmp_path, kind):
    h = lab_host(tmp_path, iocost=kind == "lab", psi=kind == "lab")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text(h), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not found (make promtool unpacks it from Debian's prometheus package)")
def test_promtool_would_catch_a_bad_name(tmp_path):
    # the check above can fail: the same output with a counter that lacks _total is refused
    bad = text(lab_host(tmp_path)).replace("slice_io_reads_total", "slice_io_reads")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=bad, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode != 0 and "_total" in proc.stdout + proc.stderr


def test_the_excerpt_in_the_guide_is_what_the_exporter_prints():
    guide = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "observability.md")).read()
    excerpt = guide.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert excerpt and not [line for line in excerpt if line not in EXPECTED.splitlines()]


# -- latency histogram (io_latency's probe) -------------------------------------------------------

def _probe(tmp_path, h, counts):
    """A stand-in bpftrace that prints one window of counts: {(slice, bucket us): n} on the NVMe disk."""
    ino = dict((name, os.stat(h.path("/sys/fs/cgroup/" + name)).st_ino) for name, _us in counts)
    lines = {"@lat": dict(("%d,%d,%d" % (ino[name], (259 << 20) | 0, _latency.bucket_of(us)), n)
                          for (name, us), n in counts.items())}
    tool = tmp_path / "bpftrace"
    tool.write_text("#!%s\nimport sys\nsys.stdout.write(%r)\n" % (sys.executable, json.dumps({"type": "map", "data": lines}) + "\n"))
    tool.chmod(0o755)
    return str(tool)


def _series(output, slice_name):
    prefix = "aiinfra_io_isolation_slice_io_latency_seconds"
    return [line for line in output.splitlines() if line.startswith(prefix) and 'slice="%s"' % slice_name in line]


def test_latency_histogram_accumulates_windows_as_counters(tmp_path):
    h = lab_host(tmp_path)
    h.add_cgroup("training.slice", {})
    state = str(tmp_path / "latency-state.json")
    fs = KernelFS(h.root)
    first = _probe(tmp_path, h, {("inference.slice", 100): 3, ("training.slice", 5000): 2})
    m.collect(fs, latency_seconds=1, latency_state=state, bpftrace=first)
    out = m.render(m.collect(fs, latency_seconds=1, latency_state=state,
                             bpftrace=_probe(tmp_path, h, {("inference.slice", 100): 4})))
    inf = _series(out, "inference.slice")
    assert 'aiinfra_io_isolation_slice_io_latency_seconds_bucket{device="nvme0n1",le="6.4e-05",majmin="259:0",slice="inference.slice"} 0' in inf
    assert 'aiinfra_io_isolation_slice_io_latency_seconds_bucket{device="nvme0n1",le="0.000128",majmin="259:0",slice="inference.slice"} 7' in inf
    assert 'aiinfra_io_isolation_slice_io_latency_seconds_bucket{device="nvme0n1",le="+Inf",majmin="259:0",slice="inference.slice"} 7' in inf
    assert 'aiinfra_io_isolation_slice_io_latency_seconds_count{device="nvme0n1",majmin="259:0",slice="inference.slice"} 7' in inf
    assert any(line.startswith("aiinfra_io_isolation_slice_io_latency_seconds_sum{") and line.endswith(" 0.0007")
               for line in inf), inf
    trn = _series(out, "training.slice")     # no I/O in the second window: its totals stay
    assert 'aiinfra_io_isolation_slice_io_latency_seconds_count{device="nvme0n1",majmin="259:0",slice="training.slice"} 2' in trn
    assert "# TYPE aiinfra_io_isolation_slice_io_latency_seconds histogram" in out


def test_latency_without_bpftrace_is_a_counted_problem(tmp_path):
    h = lab_host(tmp_path)
    c = m.collect(KernelFS(h.root), latency_seconds=1, latency_state=str(tmp_path / "s.json"), bpftrace=None)
    assert any("bpftrace is not installed" in p for p in c.problems)
    assert "slice_io_latency_seconds" not in m.render(c)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not found (make promtool unpacks it from Debian's prometheus package)")
def test_promtool_accepts_the_latency_histogram(tmp_path):
    h = lab_host(tmp_path)
    out = m.render(m.collect(KernelFS(h.root), latency_seconds=1, latency_state=str(tmp_path / "s.json"),
                             bpftrace=_probe(tmp_path, h, {("inference.slice", 100): 3})))
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=out, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_tenancy_metrics_name_processes_units_and_listed_workloads(tmp_path):
    h = lab_host(tmp_path)
    h.add_cgroup("inference.slice/vllm.service", {"cgroup.procs": "101\n102"})
    h.add_cgroup("system.slice/embed-b.service", {"cgroup.procs": "103"})
    h.add_cgroup("training.slice")
    listed = {"inference.slice": [{"kind": "service", "name": "vllm.service"},
                                  {"kind": "service", "pattern": "embed-*.service"},
                                  {"kind": "service", "name": "stopped.service"}],
              "training.slice": [{"kind": "service", "name": "etl.service"}]}
    out = text(h, workloads=listed)
    lines = [line for line in out.splitlines() if line.startswith(("aiinfra_io_isolation_slice_processes",
                                                                   "aiinfra_io_isolation_slice_units",
                                                                   "aiinfra_io_isolation_slice_workloads",
                                                                   "aiinfra_io_isolation_workload_outside"))]
    assert lines == [
        'aiinfra_io_isolation_slice_processes{slice="inference.slice"} 2',
        'aiinfra_io_isolation_slice_processes{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_units{slice="inference.slice"} 1',
        'aiinfra_io_isolation_slice_units{slice="training.slice"} 0',
        'aiinfra_io_isolation_slice_workloads_listed{slice="inference.slice"} 3',
        'aiinfra_io_isolation_slice_workloads_listed{slice="training.slice"} 1',
        # a stopped service has no sample: where it does not run says nothing about its placement
        'aiinfra_io_isolation_workload_outside{kind="service",name="vllm.service",slice="inference.slice"} 0',
        'aiinfra_io_isolation_workload_outside{kind="service",name="embed-b.service",slice="inference.slice"} 1']
    assert 'aiinfra_io_isolation_toplevel_io_reads_total{cgroup="inference.slice",device="nvme0n1",majmin="259:0"} 5008' in out


def test_workload_arguments(capsys):
    args = m.parse_args(["--workload", "inference.slice=vllm.service", "--workload", "training.slice=etl-*.service"])
    assert args.workloads == {"inference.slice": [{"kind": "service", "name": "vllm.service"}],
                              "training.slice": [{"kind": "service", "pattern": "etl-*.service"}]}
    for bad in ("inference.slice", "other.slice=vllm.service", "inference.slice=vllm"):
        with pytest.raises(SystemExit):
            m.parse_args(["--workload", bad])
        assert "--workload" in capsys.readouterr().err
