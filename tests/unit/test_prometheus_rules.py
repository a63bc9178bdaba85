# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""prometheus/alerts.yml: promtool accepts the rules and their unit tests (prometheus/alerts*.test.yml) pass, and
the unit tests notice a rule that no longer does what they say (a changed threshold, a dropped guard)."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(REPO, "prometheus")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not found (make promtool unpacks it from Debian's prometheus package)")


# the rules' unit test files (promtool test rules takes them all in one run)
TESTS = sorted(f for f in os.listdir(RULES) if f.endswith(".test.yml"))


def promtool(*args, cwd=RULES):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def test_rules_are_valid():
    proc = promtool("check", "rules", "alerts.yml")
    assert proc.returncode == 0 and "SUCCESS: 11 rules found" in proc.stdout, proc.stdout + proc.stderr


def test_rule_unit_tests_pass():
    assert TESTS == ["alerts-stale.test.yml", "alerts.test.yml"]
    proc = promtool("test", "rules", *TESTS)
    assert proc.returncode == 0 and proc.stdout.count("SUCCESS") == len(TESTS), proc.stdout + proc.stderr


@pytest.mark.parametrize("old, new", [
    # the pressure threshold of the health gate (20 %) raised: host-a (30 %) would no longer warn
    ('slice="inference.slice"}[5m]) > 0.20', 'slice="inference.slice"}[5m]) > 0.40'),
    # the activity guard dropped: host-b's idle disk would alert
    ("rate(aiinfra_io_isolation_slice_io_reads_total[10m]) + rate(aiinfra_io_isolation_slice_io_writes_total[10m])\n"
     "          ) > 0\n        for: 20m\n        labels:\n          severity: warning\n        annotations:\n"
     "          summary: \"iocost vrate pinned at its QoS minimum",
     "rate(aiinfra_io_isolation_slice_io_reads_total[10m]) + rate(aiinfra_io_isolation_slice_io_writes_total[10m])\n"
     "          ) >= 0\n        for: 20m\n        labels:\n          severity: warning\n        annotations:\n"
     "          summary: \"iocost vrate pinned at its QoS minimum"),
    # the latency objective raised above host-a's p99, or the slice selector dropped (training's I/O counted)
    ("[10m]))) > 0.002", "[10m]))) > 0.005"),
    ('(rate(aiinfra_io_isolation_slice_io_latency_seconds_bucket{slice="inference.slice"}[10m]))',
     '(rate(aiinfra_io_isolation_slice_io_latency_seconds_bucket[10m]))'),
    # "pinned" read as "once at the bound": host-e's excursion would not reset it
    ("max_over_time(aiinfra_io_isolation_iocost_vrate_ratio[10m])", "min_over_time(aiinfra_io_isolation_iocost_vrate_ratio[10m])"),
    # placement: a placed workload (host-b) alerting; a slice with nothing listed (host-c) taken for an empty one
    ("expr: aiinfra_io_isolation_workload_outside == 1", "expr: aiinfra_io_isolation_workload_outside >= 0"),
    ("aiinfra_io_isolation_slice_workloads_listed > 0", "aiinfra_io_isolation_slice_workloads_listed >= 0"),
    # the I/O share: "most" raised above host-a's 90 %, the idle guard dropped (host-b), the bytes judged no more
    # (host-d), the root disk without iocost taken for a managed one (host-a's vda)
    ("+ rate(aiinfra_io_isolation_disk_io_writes_total[10m])) > 0.5\n",
     "+ rate(aiinfra_io_isolation_disk_io_writes_total[10m])) > 0.95\n"),
    ("+ rate(aiinfra_io_isolation_disk_io_writes_total[10m])) >= 20", "+ rate(aiinfra_io_isolation_disk_io_writes_total[10m])) >= 0"),
    ("+ rate(aiinfra_io_isolation_disk_io_written_bytes_total[10m])) > 0.5", "+ rate(aiinfra_io_isolation_disk_io_written_bytes_total[10m])) > 5"),
    ("\n          and on (instance, job, device) aiinfra_io_isolation_iocost_enabled == 1", ""),
])
def test_the_unit_tests_catch_a_changed_rule(tmp_path, old, new):
    text = open(os.path.join(RULES, "alerts.yml")).read()
    assert text.count(old) == 1
    (tmp_path / "alerts.yml").write_text(text.replace(old, new))
    for name in TESTS:
        shutil.copy(os.path.join(RULES, name), str(tmp_path / name))
    proc = promtool("test", "rules", *TESTS, cwd=str(tmp_path))
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _dashboard_exprs():
    import json
    with open(os.path.join(RULES, "grafana-dashboard.json")) as handle:
        dash = json.load(handle)
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_the_dashboard_queries_only_metrics_the_exporter_writes():
    import re
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as _metrics
    known = set()
    for name, kind, _help in _metrics.FAMILIES:
        known.update([_metrics.PREFIX + name] if kind != "histogram" else
                     [_metrics.PREFIX + name + s for s in ("_bucket", "_sum", "_count")])
    used = set(re.findall(r"aiinfra_io_isolation_[a-z_]+", " ".join(_dashboard_exprs())))
    assert used and used <= known, used - known


def test_promtool_parses_every_dashboard_query(tmp_path):
    # Grafana's variables as a query would get them; each expression as a recording rule
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(_dashboard_exprs()):
        expr = expr.replace("$__rate_interval", "5m").replace("$instance", ".*")
        rules += ["      - record: dashboard_query_%d" % i, "        expr: '%s'" % expr.replace("'", "''")]
    (tmp_path / "dashboard.yml").write_text("\n".join(rules) + "\n")
    proc = promtool("check", "rules", "dashboard.yml", cwd=str(tmp_path))
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
