# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The solution phase of iocost_calibrate (_solutions, and its place in _calibrate): options, argv, the
solutions derived from measured points, and on simulated kernel files (tests/unit/sim/calibration.py) the
pinned model and QoS while measuring and their restore - with the slice stopped - on success, failure,
a signal and a killed run repaired from the journal. The lab proves it on real kernels (molecule/calibration).
"""

import json
import os
import signal

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as cal
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as targets
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import solutions as sol
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from sim.calibration import BEFORE, MODEL, Lab, fio_runner

PARAMS = {"filesystem": "/srv/calib", "scratch_size": "256M", "measure_qos": True, "qos_seconds": 3, "numjobs": 1,
          "solutions": {"measure": True, "levels": [100, 80, 60, 40], "seconds": 15, "probe_share": 0.25,
                        "latency_variant": True}}
BASE_QOS = {"rpct": 95.0, "rlat": 1250, "wpct": 95.0, "wlat": 2100, "min": 60.0, "max": 100.0}


# -- options, argv, bounds -------------------------------------------------------------------------

def test_options_defaults_and_order():
    opts = sol.options({})
    assert opts["levels"] == [100, 80, 60, 40] and opts["seconds"] == 15 and opts["probe_share"] == 0.25
    assert sol.options({"levels": [40, 100, 70]})["levels"] == [100, 70, 40]
    assert sol.options(None) is None and sol.options({"measure": False}) is None


@pytest.mark.parametrize("given, words", [
    ({"levels": []}, "non-empty list"),
    ({"levels": [120]}, "120 is not a vrate percentage from 1 to 100"),
    ({"levels": [80, 80]}, "names a level twice"),
    ({"levels": [True]}, "not a vrate percentage"),
    ({"seconds": 1}, "solutions.seconds must be a whole number of seconds from 3 to 300, got 1"),
    ({"probe_share": 1.5}, "above 0 and below 1"),
    ({"probe": 1}, "unknown key(s) probe"),
])
def test_bad_options_are_named(given, words):
    with pytest.raises(sol.SolutionError) as e:
        sol.options(given)
    assert words in str(e.value)


def test_the_default_phase_stays_within_three_minutes():
    opts = sol.options({})
    # solo (15 s measured + 3 s ramp + 4 s start-up) + 4 levels and the latency point (each + at most 6 s settling)
    assert sol.phase_seconds(opts) == 22 + 5 * 28 == 162 <= 180
    assert sol.phase_seconds(None) == 0


def test_probe_and_antagonist_argv():
    probe = sol.probe_argv("/usr/bin/fio", "/srv/x", 2 ** 28, 750.6, 15)
    assert "--rate_iops=750" in probe and "--rate_process=linear" in probe and "--iodepth=1" in probe
    assert "--ioengine=psync" in probe and "--runtime=15" in probe and "--ramp_time=3" in probe
    antagonist = sol.antagonist_argv("/usr/bin/fio", "/srv/x", 2 ** 28, 15)
    assert "--iodepth=64" in antagonist and "--ioengine=libaio" in antagonist and "--direct=1" in antagonist
    # the antagonist runs until stopped after the probe; its runtime only bounds a stop that never comes
    assert "--runtime=84" in antagonist and "--ramp_time" not in " ".join(antagonist)
    scope = sol.scope_argv("/usr/bin/systemd-run", "u1", 100, ["fio"])
    assert scope == ["/usr/bin/systemd-run", "--scope", "--quiet", "--collect", "--slice=iocost_calibrate.slice",
                     "--unit=u1", "-p", "IOWeight=100", "-p", "CPUWeight=100", "--", "fio"]


def test_latency_target_is_one_and_a_half_solo_p99_rounded_up():
    assert sol.latency_target(2060.0) == 3100
    assert sol.latency_target(10.0) == 50


# -- solutions from points ---------------------------------------------------------------------------

def point(level, ratio, kept=1.0, share=0.5, variant="pinned"):
    qos = sol.pinned_qos(level, 1250, 2100) if variant == "pinned" else sol.latency_qos(3100, 2100)
    return {"variant": variant, "level": level, "qos": qos, "probe_p99_ratio": ratio, "rate_kept": kept,
            "probe_p99_us": 2000.0 * ratio, "antagonist_share": share, "antagonist_iops": share * 3000,
            "probe_iops": 750 * kept, "probe_requested_iops": 750, "vrate": {"mean": level or 94.0}}


# the issue's table: 100 -> 11x, 80 -> 1.58x, 60 -> 1.47x, 40 -> 1.09x, latency target 1.79x
ISSUE = [point(100, 11.0, 0.52, 0.96), point(80, 1.58, 1.0, 0.72), point(60, 1.47, 1.0, 0.52),
         point(40, 1.09, 1.0, 0.33), point(None, 1.79, 1.0, 0.88, "latency")]


def test_isolation_is_the_highest_level_within_the_bound():
    solutions, notes = sol.derive(ISSUE)
    iso = solutions["isolation"]
    assert iso["vrate"] == 60 and iso["qos"] == {"rpct": 0.0, "rlat": 1250, "wpct": 0.0, "wlat": 2100,
                                                 "min": 60.0, "max": 60.0}
    assert iso["probe_p99_ratio"] == 1.47 and iso["antagonist_share"] == 0.52 and iso["vrate_read"] == 60
    assert solutions["bandwidth"]["qos"]["min"] == solutions["bandwidth"]["qos"]["max"] == 100.0
    assert solutions["bandwidth"]["qos"]["rpct"] == 0.0
    # the latency point missed the bound: recorded as a note, not a solution
    assert "latency" not in solutions
    assert notes == ["the latency target (rpct 95 rlat 3100 us, min 10 max 100) gave the probe 1.79x its solo p99 "
                     "at 1.0 of its rate: not a solution"]


def test_a_level_that_lost_the_rate_does_not_count():
    solutions, _notes = sol.derive([point(100, 1.2, 0.90), point(80, 1.4, 0.96)])
    assert solutions["isolation"]["vrate"] == 80


def test_no_level_holds_gives_null_with_a_note_and_a_latency_point_that_holds_is_a_solution():
    solutions, notes = sol.derive([point(100, 3.0), point(80, 2.0), point(None, 1.3, 0.99, 0.8, "latency")])
    assert solutions["isolation"] is None
    assert "no pinned level (100, 80) held the probe within 1.5x" in notes[0]
    assert solutions["latency"]["qos"] == {"rpct": 95.0, "rlat": 3100, "wpct": 0.0, "wlat": 2100, "min": 10.0,
                                           "max": 100.0}
    assert solutions["latency"]["vrate"] is None and solutions["latency"]["vrate_read"] == 94.0


def test_without_level_100_there_is_no_bandwidth_solution():
    solutions, notes = sol.derive([point(80, 1.2)])
    assert "bandwidth" not in solutions and "level 100 was not measured: no bandwidth solution" in notes


# -- fio results of one point -------------------------------------------------------------------------

def _dump(iops, p50_ns, p99_ns):
    return {"jobs": [{"error": 0, "read": {"iops": iops, "clat_ns": {"percentile": {
        "50.000000": p50_ns, "99.000000": p99_ns, "99.900000": p99_ns * 2}}}}]}


def test_point_figures():
    figures = sol.point_figures({"probe": _dump(748.0, 600000, 3030000), "antagonist": _dump(1583.0, 1, 1)},
                                {"probe": ["p"], "antagonist": ["a"]}, 750, 3000, solo_p99=2060.0)
    assert figures == {"probe_requested_iops": 750, "probe_iops": 748.0, "rate_kept": 0.9973, "probe_p50_us": 600.0,
                       "probe_p99_us": 3030.0, "probe_p999_us": 6060.0, "probe_p99_ratio": 1.471,
                       "antagonist_iops": 1583.0, "antagonist_share": 0.5277}


def test_a_fio_result_without_latencies_is_a_clear_error():
    with pytest.raises(fio.FioError) as e:
        sol.point_figures({"probe": {"jobs": [{"error": 0, "read": {"iops": 0, "clat_ns": {}}}]}}, {"probe": ["p"]},
                          750, 3000)
    assert "fio probe: cannot read its JSON result (no completion-latency percentiles" in str(e.value)


class FakeProc(object):
    """A finished child whose pipes hold ``out``; stands in for the systemd-run/fio process."""

    def __init__(self, argv, out, rc=0, err=b""):
        self.argv = argv
        self._rc = rc
        self.returncode = None
        rfd, wfd = os.pipe()
        os.write(wfd, out)
        os.close(wfd)
        erfd, ewfd = os.pipe()
        os.write(ewfd, err)
        os.close(ewfd)
        self.stdout = os.fdopen(rfd, "rb")
        self.stderr = os.fdopen(erfd, "rb")

    def poll(self):
        self.returncode = self._rc
        return self._rc

    def wait(self, timeout=None):
        return self.poll()

    def kill(self):
        pass

    def send_signal(self, sig):
        pass


def test_run_point_reads_the_probe_and_names_a_failing_command(lab):
    def popen(argv, **kw):
        return FakeProc(argv, json.dumps(_dump(750.0, 1, 2)).encode())
    res = sol.run_point(lab.sim, "259:0", ["systemd-run", "--", "fio", "--name=aiinfra-probe"], 15, popen=popen)
    assert res["probe"]["jobs"][0]["read"]["iops"] == 750.0 and res["antagonist"] is None and res["vrate"] == []

    def failing(argv, **kw):
        return FakeProc(argv, b"", rc=1, err=b"Failed to start transient scope unit: Access denied\n")
    with pytest.raises(fio.FioError) as e:
        sol.run_point(lab.sim, "259:0", ["/usr/bin/systemd-run", "--scope", "--", "fio"], 15, popen=failing)
    assert "the probe (/usr/bin/systemd-run --scope) failed (rc=1): Failed to start transient scope unit" in str(e.value)
    with pytest.raises(fio.FioError) as e:
        sol.run_point(lab.sim, "259:0", ["probe"], 15, antagonist=(["/usr/bin/systemd-run", "--", "fio"], "x.scope"),
                      settle=60.0, popen=failing)
    assert "the antagonist (/usr/bin/systemd-run) failed (rc=1)" in str(e.value)


# -- the phase inside a calibration --------------------------------------------------------------------

def systemd_runner(lab, stop_rc=0):
    """The simulated host's commands, with systemctl stop answering like systemd (the slice dir goes away)."""
    def stop(argv):
        path = lab.sim.path("%s/%s" % (sol.CGROUP_ROOT, sol.SLICE))
        if stop_rc == 0 and os.path.isdir(path):
            os.rmdir(path)
        return stop_rc, "", "Failed to stop: Access denied\n" if stop_rc else ""
    return fio_runner().answer(["/usr/sbin/systemctl", "stop", sol.SLICE], stop)


@pytest.fixture
def lab(tmp_path, monkeypatch):
    lab = Lab(str(tmp_path))
    lab.host.mkdir("/run/systemd/system")
    monkeypatch.setattr(targets, "plan_target", lambda fs, resolver, run_, params: lab.target("file"))
    monkeypatch.setattr(targets, "create_scratch", lambda target: lab.events.append(("create", target.path)))
    monkeypatch.setattr(targets, "remove_scratch", lambda path: lab.events.append(("remove", path)))
    return lab


def model_phase(binary, target, rule, params, big_bs, timings):
    return {"model": dict(MODEL, rrandiops=3000), "measurements": [], "spread": {}, "qos": dict(BASE_QOS),
            "latency": None}


def iocost_lines(lab):
    def line(name):
        found = [x for x in (lab.sim.read("/sys/fs/cgroup/" + name) or "").splitlines() if x.startswith("259:0 ")]
        return found[0] if found else None
    return line("io.cost.model"), line("io.cost.qos")


def solving(lab, ratios=(11.0, 1.58, 1.47, 1.09, 1.79), then=None):
    """The real phase (run_phase, pin through the engine) with each point's fio pair replaced."""
    def solve(fs, record, binary, tools, target, opts, result):
        phase = sol.Phase(fs, record, binary, tools, target, opts, result["model"],
                          lambda model, qos: cal.pin(fs, record, model, qos))

        def measure(n, rate, settle=None, solo_p99=None):
            lab.sim.mkdir("%s/%s" % (sol.CGROUP_ROOT, sol.SLICE))      # systemd made the slice
            lab.events.append(("point", n, rate, settle) + iocost_lines(lab))
            if then is not None and n == 2:
                then()
            if n == 0:
                return {"probe_p99_us": 2060.0, "probe_iops": rate, "rate_kept": 1.0, "probe_requested_iops": rate}
            ratio = ratios[n - 1]
            return {"probe_p99_us": 2060.0 * ratio, "probe_p99_ratio": ratio, "rate_kept": 1.0, "probe_iops": rate,
                    "probe_requested_iops": rate, "antagonist_iops": 100.0 * n, "antagonist_share": 0.1 * n,
                    "vrate": None}
        phase.measure = measure
        return sol.run_phase(phase)
    return solve


def run(lab, solve=None, runner=None, check_mode=False, **params):
    return cal.calibrate(lab.sim, DeviceResolver(lab.sim), runner or systemd_runner(lab), dict(PARAMS, **params),
                         check_mode=check_mode, measure=model_phase, solve=solve or solving(lab))


def test_the_phase_pins_the_measured_model_and_each_level_then_puts_everything_back(lab):
    model_before, qos_before = iocost_lines(lab)
    runner = systemd_runner(lab)
    result = run(lab, runner=runner)
    points = [e for e in lab.events if e[0] == "point"]
    # the solo run, then each level with vrate settled at it, then the latency point (a fixed settling time)
    assert [(e[1], e[2], e[3]) for e in points] == [(0, 750, False), (1, 750, 100.0), (2, 750, 80.0), (3, 750, 60.0),
                                                    (4, 750, 40.0), (5, 750, True)]
    # solo: iocost off as the hold leaves it; then the measured model and each pinned level
    assert points[0][5].startswith("259:0 enable=0 ctrl=user rpct=95.00")
    assert "ctrl=user model=linear rbps=1360000000 rseqiops=41000 rrandiops=3000" in points[1][4]
    # rlat/wlat of a pinned point only set iocost's period: the latency target's, 1.5 x the solo p99 2060 us
    assert points[1][5] == "259:0 enable=1 ctrl=user rpct=0.00 rlat=3100 wpct=0.00 wlat=3100 min=100.00 max=100.00"
    assert points[4][5].endswith("min=40.00 max=40.00")
    assert points[5][5] == "259:0 enable=1 ctrl=user rpct=95.00 rlat=3100 wpct=0.00 wlat=3100 min=10.00 max=100.00"
    assert iocost_lines(lab) == (model_before, qos_before) and lab.state() == BEFORE
    assert not os.path.exists(lab.sim.path("%s/%s" % (sol.CGROUP_ROOT, sol.SLICE)))
    assert ["/usr/sbin/systemctl", "stop", sol.SLICE] in runner.calls and lab.journals() == []
    assert result["solutions"]["isolation"]["vrate"] == 60.0 and result["solutions"]["bandwidth"]["vrate"] == 100.0
    phase = result["solution_phase"]
    assert phase["measured"] is True and phase["probe_iops"] == 750 and len(phase["points"]) == 5
    assert phase["points"][2]["qos_line"].endswith("min=60.00 max=60.00") and phase["latency_rlat"] == 3100
    assert result["method"]["solutions"]["levels"] == [100, 80, 60, 40] and "solutions" in result["timings"]


def test_the_journal_names_the_slice_while_measuring(lab):
    seen = []
    run(lab, solve=solving(lab, then=lambda: seen.append(json.load(open(lab.sim.path(
        "%s/%s" % (cal.JOURNAL_DIR, lab.journals()[0])))))))
    assert seen[0]["slice"] == sol.SLICE and seen[0]["snapshot"]["iocost_model"]["ctrl"] == "auto"


def test_a_failing_point_restores_model_qos_and_slice(lab):
    before = iocost_lines(lab)

    def fail():
        raise fio.FioError(["systemd-run"], 1, "Failed to start transient scope unit", "probe (systemd-run) failed")
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, solve=solving(lab, then=fail))
    assert "probe (systemd-run) failed; the disk was put back (" in e.value.msg
    assert iocost_lines(lab) == before and lab.state() == BEFORE and lab.journals() == []
    assert not os.path.exists(lab.sim.path("%s/%s" % (sol.CGROUP_ROOT, sol.SLICE)))


def test_sigterm_during_the_phase_restores_and_fails(lab):
    before = iocost_lines(lab)
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, solve=solving(lab, then=lambda: os.kill(os.getpid(), signal.SIGTERM)))
    assert "interrupted by SIGTERM" in e.value.msg
    assert iocost_lines(lab) == before and lab.state() == BEFORE and lab.journals() == []


def test_wbt_moved_by_iocost_is_written_back(lab):
    before = int(lab.q.wbt_show())
    result = run(lab, solve=solving(lab, then=lambda: lab.sim.write(lab.q.base + "wbt_lat_usec", "5000")))
    assert lab.q.wbt_show() == before
    assert result["restore"]["notes"] == ["nvme0n1: wbt_lat_usec read 5000 after the restore; wrote back %d" % before]


def test_a_slice_that_cannot_be_stopped_keeps_the_journal(lab):
    result = run(lab, runner=systemd_runner(lab, stop_rc=1))
    (error,) = result["restore"]["errors"]
    assert error.startswith("`systemctl stop iocost_calibrate.slice` failed (rc=1): Failed to stop: Access denied")
    assert len(lab.journals()) == 1
    # the disk itself was put back
    assert lab.state() == BEFORE


def test_a_disk_without_iocost_lines_is_left_with_iocost_off(tmp_path, monkeypatch):
    lab = Lab(str(tmp_path), iocost=False)
    lab.host.mkdir("/run/systemd/system")
    monkeypatch.setattr(targets, "plan_target", lambda fs, resolver, run_, params: lab.target("device"))
    result = run(lab)
    model, qos = iocost_lines(lab)
    assert qos.startswith("259:0 enable=0 ctrl=auto") and " ctrl=auto " in model
    assert result["restore"]["errors"] == []


def _kill_mid_phase(lab):
    """Leave the disk pinned and the slice up with a journal whose process is gone, as after a SIGKILL."""
    snap = cal.snapshot(lab.sim, lab.record)
    cal.write_journal(lab.sim, lab.record, snap, lab.target(), sol.SLICE)
    cal.hold(lab.sim, lab.record, snap)
    cal.pin(lab.sim, lab.record, MODEL, sol.pinned_qos(60, 1250, 2100))
    lab.sim.mkdir("%s/%s" % (sol.CGROUP_ROOT, sol.SLICE))
    lab.orphan_journal()


def test_the_next_call_stops_the_slice_and_restores_model_and_qos_of_a_killed_phase(lab):
    before = iocost_lines(lab)
    _kill_mid_phase(lab)
    assert "min=60.00" in iocost_lines(lab)[1]
    runner = systemd_runner(lab)
    result = run(lab, runner=runner, solutions={"measure": False})
    (report,) = result["recovered"]
    assert report["stopped_slice"] == sol.SLICE and report["restored"]
    assert runner.calls[0] == ["/usr/sbin/systemctl", "stop", sol.SLICE]
    assert iocost_lines(lab) == before and lab.state() == BEFORE and lab.journals() == []
    assert result["solutions"] is None and result["solution_phase"]["skipped"].startswith("not asked for")


def test_a_killed_phase_whose_slice_cannot_be_stopped_is_refused_before_any_write(lab):
    _kill_mid_phase(lab)
    lab.sim.writes[:] = []
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, runner=systemd_runner(lab, stop_rc=1))
    assert "repairing the killed calibration of journal" in e.value.msg and "stop it by hand" in e.value.msg
    assert lab.sim.writes == []


def test_without_systemd_the_phase_is_skipped_with_a_warning(lab):
    os.rmdir(lab.sim.path("/run/systemd/system"))
    result = run(lab)
    assert result["solutions"] is None and result["solution_phase"]["measured"] is False
    assert "does not run systemd" in result["solution_phase"]["skipped"]
    assert result["warnings"] == ["nvme0n1: no QoS solutions measured: %s" % result["solution_phase"]["skipped"]]
    assert not [e for e in lab.events if e[0] == "point"]


def test_bad_solution_options_fail_before_any_write(lab):
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, solutions={"levels": [0]})
    assert "solutions.levels: 0 is not a vrate percentage" in e.value.msg
    assert lab.sim.writes == [] and lab.journals() == []


def test_check_mode_reports_the_planned_phase(lab):
    result = run(lab, check_mode=True)
    assert result["solution_phase"]["bound_seconds"] == 162 and lab.sim.writes == []
