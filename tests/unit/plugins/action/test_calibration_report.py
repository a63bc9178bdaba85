# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The calibration_report action: one self-contained HTML file with the expected sections and plots,
changed only when the content changes, check mode writes nothing, the report without plots when
matplotlib is missing, clear errors (mixed hardware, wrong entry)."""

import base64
import copy
import json
import os
import re
import sys
from unittest import mock

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.action import calibration_report as report

from playbook import ansible_playbook, debug_out
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db as db

try:
    import matplotlib  # noqa: F401  pylint: disable=unused-import
    HAVE_MPL = True
except ImportError:  # pragma: no cover - requirements/dev.in installs it
    HAVE_MPL = False

needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed (pip install -r requirements/dev.in)")

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "plugin_utils", "fixtures")
RESULTS = json.load(open(os.path.join(FIXTURES, "calibration_results.json")))
NAME = "QEMU_NVMe_Ctrl__7.2.22__1073741824.html"
PNG = b"\x89PNG\r\n\x1a\n"


def action(args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    loader = mock.MagicMock()
    loader.get_basedir.return_value = "/nonexistent-playbook-dir"
    return report.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=loader, templar=None,
                               shared_loader_obj=None)


def run(args, check_mode=False):
    return action(args, check_mode).run(task_vars={})


def images(text):
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)]


@needs_mpl
def test_report_has_every_section_and_two_plots(tmp_path):
    out = run({"results": copy.deepcopy(RESULTS), "dest": str(tmp_path / "reports")})
    assert not out.get("failed"), out
    assert out["changed"] is True and out["plots"] == ["measurements", "latency"]
    assert out["path"] == str(tmp_path / "reports" / NAME)
    text = open(out["path"], encoding="utf-8").read()
    for section in ("header", "model", "qos", "runs", "method", "measurements", "latency"):
        assert '<section id="%s">' % section in text
    assert "<title>iocost calibration: QEMU NVMe Ctrl firmware 7.2.22, 1 GiB</title>" in text
    # header: device, firmware, capacity, kernel, fio, host, date
    for words in ("nvme0n1 (serial lab-nvme-a, wwn:nvme.1b36", "1,073,741,824 bytes (1 GiB)", "6.12.118+deb13-amd64",
                  "<td class=\"l\">3.39</td>", "calib-03", "2026-12-01T11:00:00Z"):
        assert words in text
    # model vs the kernel's class with the ratio and the spreads
    assert ('<td class="l">rbps</td><td>1,100,000,000</td><td>488,636,629</td><td>2.25x</td><td>2.00%</td>'
            '<td>27.27%</td>') in text
    assert '<td class="l">wseqiops</td><td>21,000</td><td>28,755</td><td>0.73x</td>' in text
    # QoS, the QoS rule, the stop rule
    assert "<td>95</td><td>1100</td><td>95</td><td>2050</td><td>60</td><td>100</td>" in text
    assert "rlat/wlat = 1.5 x p95 completion latency" in text
    assert '<td class="l">stop rule: tolerance</td><td class="l">0.02</td>' in text
    pngs = images(text)
    assert len(pngs) == 2 and all(p.startswith(PNG) for p in pngs)
    assert b"tIME" not in pngs[0] and b"Software" not in pngs[0]
    assert "<script" not in text and "http://" not in text and "https://" not in text  # self-contained


@needs_mpl
def test_same_input_is_not_a_change_and_new_input_is(tmp_path):
    args = {"results": copy.deepcopy(RESULTS), "dest": str(tmp_path)}
    first = run(args)
    before = open(first["path"], "rb").read()
    second = run(copy.deepcopy(args))
    assert second["changed"] is False and "up to date" in second["msg"]
    assert open(first["path"], "rb").read() == before
    changed = copy.deepcopy(RESULTS)
    changed[0]["measurements"][0]["windows"][0][1] *= 0.5
    assert run({"results": changed, "dest": str(tmp_path)})["changed"] is True
    assert open(first["path"], "rb").read() != before


@needs_mpl
def test_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "not-yet"
    out = run({"results": copy.deepcopy(RESULTS), "dest": str(dest)}, check_mode=True)
    assert out["changed"] is True and out["msg"].startswith("would write %s" % (dest / NAME))
    assert not dest.exists()
    run({"results": copy.deepcopy(RESULTS), "dest": str(dest)})
    again = run({"results": copy.deepcopy(RESULTS), "dest": str(dest)}, check_mode=True)
    assert again["changed"] is False


@needs_mpl
def test_the_entry_gives_the_numbers_and_the_title_is_kept(tmp_path):
    entry = db.merge_results(copy.deepcopy(RESULTS))
    entry["iocost_model"]["rbps"] = 1234567890
    out = run({"results": copy.deepcopy(RESULTS), "entry": entry, "dest": str(tmp_path), "title": "Rack 7 <NVMe>"})
    text = open(out["path"], encoding="utf-8").read()
    assert "<h1>Rack 7 &lt;NVMe&gt;</h1>" in text and "1,234,567,890" in text


@needs_mpl
def test_one_run_without_qos_or_windows_still_reports(tmp_path):
    result = copy.deepcopy(RESULTS[0])
    result["qos"] = None
    result.pop("latency")
    result["measurements"] = [m for m in result["measurements"] if m["name"] != "wbps"]
    out = run({"results": {"results": [result]}, "dest": str(tmp_path)})
    assert out["plots"] == ["measurements"]
    text = open(out["path"], encoding="utf-8").read()
    assert "No QoS was measured" in text and "No QoS runs: no latency percentiles." in text


@pytest.mark.parametrize("change, words", [
    (lambda rs: rs[1]["device"].update(size_bytes=2), "mix hardware classes"),
    (lambda rs: rs[0].update(failed=True, msg="fio died"), "did not run: fio died"),
])
def test_bad_results_fail_clearly(tmp_path, change, words):
    results = copy.deepcopy(RESULTS)
    change(results)
    out = run({"results": results, "dest": str(tmp_path)})
    assert out["failed"] is True and re.search("calibration_report: .*" + words, out["msg"])
    assert not list(tmp_path.iterdir())


def test_an_entry_of_another_disk_is_refused(tmp_path):
    entry = db.merge_results(copy.deepcopy(RESULTS))
    entry["firmware"] = "8.0"
    out = run({"results": copy.deepcopy(RESULTS), "entry": entry, "dest": str(tmp_path)})
    assert out["failed"] is True
    assert "the results are of QEMU NVMe Ctrl firmware 7.2.22, 1073741824 bytes but the entry is of QEMU NVMe Ctrl " \
           "firmware 8.0" in out["msg"]


def test_dest_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with mock.patch.object(report, "_load_matplotlib", side_effect=AssertionError("not reached")):
        out = run({"results": copy.deepcopy(RESULTS), "dest": str(tmp_path / "f")})
    assert out["failed"] is True and "is not a directory" in out["msg"]


def test_without_matplotlib_the_report_is_written_without_plots_and_says_how_to_get_them(tmp_path):
    with mock.patch.dict(sys.modules, {"matplotlib": None}):
        out = run({"results": copy.deepcopy(RESULTS), "dest": str(tmp_path)})
        again = run({"results": copy.deepcopy(RESULTS), "dest": str(tmp_path)})
    assert not out.get("failed"), out
    assert out["changed"] is True and out["plots"] == [] and out["plots_missing"] is True
    assert "without plots" in out["msg"] and "pip install matplotlib" in out["msg"]
    text = (tmp_path / NAME).read_text()
    assert images(text) == []
    # the measurement is all there: model, QoS and runs tables; the page says how to get the plots
    for section in ('id="header"', 'id="model"', 'id="qos"', 'id="runs"', 'id="method"', 'id="plots-missing"'):
        assert section in text
    assert "pip install matplotlib" in text
    assert again["changed"] is False and again["plots_missing"] is True


def test_without_matplotlib_check_mode_writes_nothing(tmp_path):
    with mock.patch.dict(sys.modules, {"matplotlib": None}):
        out = run({"results": copy.deepcopy(RESULTS), "dest": str(tmp_path / "r")}, check_mode=True)
    assert not out.get("failed"), out
    assert out["changed"] is True and out["plots_missing"] is True
    assert not (tmp_path / "r").exists()


def test_argument_errors_come_from_the_spec(tmp_path):
    from ansible.errors import AnsibleActionFail
    with pytest.raises(AnsibleActionFail, match="dest"):
        run({"results": copy.deepcopy(RESULTS)})


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the report
      aiinfra.io_isolation.calibration_report:
        results: "{{ runs }}"
        entry: "{{ runs | aiinfra.io_isolation.calibration_entry }}"
        dest: reports
      register: first
    - name: Again, unchanged
      aiinfra.io_isolation.calibration_report:
        results: "{{ runs }}"
        dest: reports
      register: second
    - name: Show it
      ansible.builtin.debug:
        msg: "OUT={{ {'first': first, 'second': second} | to_json }}"
"""


@needs_mpl
def test_in_a_playbook_relative_dest_and_idempotence(tmp_path):
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    (tmp_path / "vars.json").write_text(json.dumps({"runs": RESULTS}))
    proc = ansible_playbook("-i", "localhost,", "-c", "local", tmp_path / "pb.yml", "-e", "@%s" % (tmp_path / "vars.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = debug_out(proc)
    assert out["first"]["changed"] is True and out["second"]["changed"] is False
    assert out["first"]["path"] == str(tmp_path / "reports" / NAME)
    assert (tmp_path / "reports" / NAME).read_bytes().startswith(b"<!DOCTYPE html>")


def test_stop_markers_per_pass_on_the_fio_time_axis():
    m = {"stopped": "max/stable", "seconds": 20.0, "fio_seconds": 17.0,
         "passes": [{"stopped": "max", "fio_seconds": 10.0}, {"stopped": "stable", "fio_seconds": 7.0}]}
    assert report._stops(m, []) == [(10.0, "max"), (17.0, "stable")]
    # a result from before passes: one marker where fio stopped, else where the windows end
    assert report._stops({"stopped": "stable", "seconds": 7.4, "fio_seconds": 6.0}, []) == [(6.0, "stable")]
    assert report._stops({"stopped": None}, [[1.0, 5.0], [2.0, 5.0]]) == [(2.0, "stop")]
    assert report._stops({}, []) == []


def _with_solutions(result, level, ratio):
    result = copy.deepcopy(result)
    qos = {"rpct": 0.0, "rlat": 1250, "wpct": 0.0, "wlat": 2100, "min": float(level), "max": float(level)}
    bandwidth = dict(qos, min=100.0, max=100.0)
    result["solutions"] = {"isolation": {"qos": qos, "vrate": float(level), "probe_p99_ratio": ratio, "rate_kept": 1.0,
                                         "antagonist_share": 0.52},
                           "bandwidth": {"qos": bandwidth, "vrate": 100.0, "probe_p99_ratio": 9.0, "rate_kept": 0.5,
                                         "antagonist_share": 0.95}}
    result["solution_phase"] = {"measured": True, "probe_iops": 750, "solo": {"probe_p99_us": 2000.0}, "points": [
        {"variant": "pinned", "level": 100.0, "qos": bandwidth, "probe_p99_us": 18000.0, "probe_p99_ratio": 9.0,
         "rate_kept": 0.5, "antagonist_iops": 2850.0, "antagonist_share": 0.95},
        {"variant": "pinned", "level": float(level), "qos": qos, "probe_p99_us": 2000.0 * ratio,
         "probe_p99_ratio": ratio, "rate_kept": 1.0, "antagonist_iops": 1560.0, "antagonist_share": 0.52},
        {"variant": "latency", "level": None, "qos": dict(qos, rpct=95.0, rlat=3100, min=10.0, max=100.0),
         "probe_p99_us": 3600.0, "probe_p99_ratio": 1.8, "rate_kept": 1.0, "antagonist_iops": 2600.0,
         "antagonist_share": 0.87}]}
    return result


def test_report_shows_the_solutions_and_their_curve(tmp_path):
    results = [_with_solutions(RESULTS[0], 60, 1.47), _with_solutions(RESULTS[1], 80, 1.4)]
    entry = db.merge_results(results)
    text, _plots = report.render_report(results, entry)
    section = text[text.index('<section id="solutions">'):text.index('<section id="runs">')]
    # the conservative isolation over the repeats: the lower vrate
    assert "<td class=\"l\">isolation</td><td>0</td><td>1250</td><td>0</td><td>2100</td><td>60</td><td>60</td>" in section
    assert "<td class=\"l\">solo (iocost off)</td>" in section and "rpct 95 rlat 3100 min 10 max 100" in section
    assert section.count("<td class=\"l\">run 1</td><td class=\"l\">pinned</td>") == 2
    old = db.merge_results(copy.deepcopy(RESULTS[:1]))
    text, _plots = report.render_report(RESULTS[:1], old)
    assert "No solution phase was measured for this entry" in text


@needs_mpl
def test_report_plots_the_solution_curve():
    results = [_with_solutions(RESULTS[0], 60, 1.47)]
    text, plots = report.render_report(results, db.merge_results(results), mpl=report._load_matplotlib())
    assert plots == ["measurements", "latency", "solutions"] and 'id="plot-solutions"' in text
