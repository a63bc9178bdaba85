# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_calibrate: hold and restore of the disk's queue and iocost state around the measurement, on
simulated kernel files (tests/unit/sim/blk_queue.py, sim/iocost.py), with fio replaced.

The lab proves the same on real kernels (molecule/calibration); here every exit path is checked:
success, fio failure, a signal, a restore that fails, a run killed outright and repaired by the
next call, check mode, and input errors before any write.
"""

import json
import os
import signal
import subprocess

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import iocost_calibrate as cal
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as targets
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from sim.calibration import BEFORE, MODEL, QOS_USER, Lab, fio_runner

PARAMS = {"filesystem": "/srv/calib", "scratch_size": "256M", "measure_qos": True, "qos_seconds": 3, "numjobs": 1}


@pytest.fixture
def lab(tmp_path, monkeypatch):
    lab = Lab(str(tmp_path))
    lab.kind = "file"
    monkeypatch.setattr(targets, "plan_target", lambda fs, resolver, run, params: lab.target(lab.kind))
    monkeypatch.setattr(targets, "create_scratch", lambda target: lab.events.append(("create", target.path)))
    monkeypatch.setattr(targets, "remove_scratch", lambda path: lab.events.append(("remove", path)))
    return lab


def measuring(lab, then=None):
    """A stand-in for the fio runs that records the disk's state while "measuring"."""
    def measure(binary, target, rule, params, big_bs, timings):
        lab.events.append(("measure", lab.state(), lab.journals()))
        if then is not None:
            then()
        return {"model": dict(MODEL), "measurements": [], "spread": {}, "qos": None, "latency": None}
    return measure


def run(lab, check_mode=False, measure=None, **params):
    return cal.calibrate(lab.sim, DeviceResolver(lab.sim), fio_runner(), dict(PARAMS, **params), check_mode=check_mode,
                         measure=measure or measuring(lab))


# -- the held state and its restore ----------------------------------------------------------------

def test_the_disk_is_held_while_measuring_and_put_back_after(lab):
    result = run(lab)
    held = [e for e in lab.events if e[0] == "measure"][0]
    assert held[1]["scheduler"] == "none" and held[1]["nomerges"] == 1
    assert held[1]["qos"].startswith("259:0 enable=0 ctrl=user rpct=95.00 rlat=2000")
    assert held[2] == ["calibrate-wwn_nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001.json"] or \
        len(held[2]) == 1
    # the scheduler switch reset nr_requests; the restore writes it again, after the scheduler
    assert lab.state() == BEFORE
    assert lab.journals() == []
    assert result["model"] == MODEL and result["held_before"]["queue"]["nr_requests"] == 100
    assert [e[0] for e in lab.events] == ["create", "measure", "remove"]
    assert result["restore"]["errors"] == [] and result["changed"] is False


def test_restore_writes_in_kernel_order(lab):
    run(lab)
    attrs = [(p.rsplit("/", 1)[-1], v) for p, v in lab.sim.writes]
    restore = attrs[attrs.index(("scheduler", "mq-deadline")):]
    assert [a for a, _v in restore] == ["scheduler", "nr_requests", "nomerges", "io.cost.qos"]
    assert restore[-1][1] == QOS_USER


def test_iocost_off_on_the_disk_is_left_alone(tmp_path, monkeypatch):
    lab = Lab(str(tmp_path), iocost=False)
    monkeypatch.setattr(targets, "plan_target", lambda fs, resolver, run_, params: lab.target("device"))
    run(lab)
    # writing io.cost.qos would initialise iocost on the disk (and switch wbt off on 6.12)
    assert not [p for p, _v in lab.sim.writes if p.endswith("io.cost.qos")]
    assert lab.state() == dict(BEFORE, qos=None)


def test_a_destructive_run_reports_changed(lab):
    lab.kind = "device"
    result = run(lab, destructive=True)
    assert result["changed"] is True and result["target"]["kind"] == "device"
    assert [e[0] for e in lab.events] == ["measure"]


def test_check_mode_writes_nothing(lab):
    result = run(lab, check_mode=True)
    assert lab.sim.writes == [] and lab.journals() == [] and lab.events == []
    assert result["changed"] is False and "would measure nvme0n1" in result["msg"]
    # the disk's own ctrl=auto line is the kernel's class
    assert result["kernel_class"] == "auto" and result["kernel_model"]["rrandiops"] == 8518


# -- failures and signals --------------------------------------------------------------------------

def test_a_fio_failure_is_reported_with_the_restore(lab):
    def fail():
        raise fio.FioError(["fio", "--name=aiinfra-wbps"], 1, "fio: io_u error, error=Input/output error",
                           "fio wbps on /dev/nvme0n1 failed (rc=1): Input/output error")
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, measure=measuring(lab, fail))
    assert "Input/output error" in e.value.msg and "the disk was put back (" in e.value.msg
    assert "scheduler=mq-deadline" in e.value.msg
    assert e.value.details["fio"]["rc"] == 1
    assert lab.state() == BEFORE and lab.journals() == []
    assert lab.events[-1][0] == "remove"


def test_sigterm_while_measuring_restores_and_fails(lab):
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, measure=measuring(lab, lambda: os.kill(os.getpid(), signal.SIGTERM)))
    assert "interrupted by SIGTERM" in e.value.msg and "put back" in e.value.msg
    assert lab.state() == BEFORE and lab.journals() == []
    # the handlers are ours only while measuring
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_restore_that_fails_keeps_the_journal_and_says_so(lab):
    def refuse_scheduler():
        lab.q.refuse["scheduler"] = 5   # EIO on the next scheduler write: the restore's
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, measure=measuring(lab, lambda: (refuse_scheduler(), os.kill(os.getpid(), signal.SIGHUP))))
    assert "COULD NOT RESTORE" in e.value.msg and "journal" in e.value.msg
    assert len(lab.journals()) == 1
    # the next call repairs from the journal
    lab.q.refuse.clear()
    lab.events[:] = []
    result = run(lab)
    assert result["recovered"][0]["restored"] and lab.state() == BEFORE and lab.journals() == []


def _move_wbt(lab, usec="5000"):
    lab.sim.write(lab.q.base + "wbt_lat_usec", usec)


def test_a_wbt_latency_moved_while_held_is_written_back_through_the_engine(lab):
    before = int(lab.q.wbt_show())
    result = run(lab, measure=measuring(lab, lambda: _move_wbt(lab)))
    assert lab.q.wbt_show() == before
    assert result["restore"]["notes"] == ["nvme0n1: wbt_lat_usec read 5000 after the restore; wrote back %d" % before]
    # a pass of its own, after the queue and io.cost.qos restore (it reads what they left)
    assert lab.sim.writes[-1] == (lab.q.base + "wbt_lat_usec", str(before))
    assert result["restore"]["errors"] == [] and lab.journals() == []


def test_a_wbt_latency_in_place_is_not_written(lab):
    result = run(lab)
    assert result["restore"]["notes"] == []
    assert not [p for p, _v in lab.sim.writes if p.endswith("wbt_lat_usec")]


def test_a_refused_wbt_restore_names_file_value_and_errno_and_keeps_the_journal(lab):
    def move_and_refuse():
        _move_wbt(lab)
        lab.q.refuse["wbt_lat_usec"] = 5    # EIO on the restore's write
    result = run(lab, measure=measuring(lab, move_and_refuse))
    (error,) = result["restore"]["errors"]
    assert error.startswith("nvme0n1: Applying /sys/block/nvme0n1/queue/wbt_lat_usec failed: ")
    assert "EIO" in error and "%d" % int(result["held_before"]["queue"]["wbt_lat_usec"]) in error
    assert len(lab.journals()) == 1


# -- a run killed outright --------------------------------------------------------------------------

def _kill_mid_run(lab):
    """Leave the disk held with a journal whose process is gone, as after a SIGKILL."""
    snap = cal.snapshot(lab.sim, lab.record)
    cal.write_journal(lab.sim, lab.record, snap, lab.target())
    cal.hold(lab.sim, lab.record, snap)
    return lab.orphan_journal()


def test_the_next_call_repairs_a_killed_run(lab):
    _kill_mid_run(lab)
    assert lab.state()["scheduler"] == "none"
    lab.host.write("/srv/calib/.aiinfra-iocost-calibrate-%d.scratch" % os.getpid(), "x")
    result = run(lab)
    (report,) = result["recovered"]
    assert report["restored"] and report["device"]["name"] == "nvme0n1"
    assert report["removed_scratch"].startswith("/srv/calib/.aiinfra-iocost-calibrate-")
    # the snapshot of this call is taken after the repair: the restore puts back the original state
    assert result["held_before"]["queue"]["scheduler"] == "mq-deadline"
    assert lab.state() == BEFORE and lab.journals() == []


def test_after_a_reboot_only_the_scratch_file_is_removed(lab):
    _kill_mid_run(lab)
    lab.host.write("/proc/sys/kernel/random/boot_id", "99999999-2222-3333-4444-555555555555")
    result = run(lab)
    assert [r["restored"] for r in result["recovered"]] == [None]


def test_a_running_calibration_of_the_same_disk_is_refused(lab):
    entry = _kill_mid_run(lab)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        entry["pid"] = sleeper.pid
        with open(lab.sim.path(cal.journal_path(lab.record)), "w") as f:
            json.dump(entry, f)
        lab.sim.writes[:] = []
        with pytest.raises(cal.CalibrationError, match="another calibration of nvme0n1 is running"):
            run(lab)
        assert lab.sim.writes == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_journal_that_is_not_json_is_refused(lab):
    lab.host.write(cal.journal_path(lab.record), "garbage")
    with pytest.raises(cal.CalibrationError, match="is not a calibration journal"):
        run(lab)


# -- input ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, words", [
    ({"scratch_size": "lots"}, "scratch_size: size: 'lots' is not a size"),
    ({"scratch_size": "0"}, "scratch_size: give a size such as 4G"),
    ({"big_block_size": "max"}, "big_block_size: give a size such as 4G"),
    ({"numjobs": 0}, "numjobs must be at least 1"),
    ({"qos_seconds": 0}, "qos_seconds must be at least 1"),
    ({"stop_rule": {"tolerance": -1}}, "stop_rule: "),
    ({"big_block_size": "200M"}, "less than two 209715200-byte blocks"),
])
def test_bad_input_is_refused_before_any_write(lab, params, words):
    with pytest.raises(cal.CalibrationError, match=words):
        run(lab, **params)
    assert lab.sim.writes == [] and lab.journals() == [] and lab.events == []


def test_a_host_without_fio_is_told_to_install_it(lab):
    with pytest.raises(cal.CalibrationError, match="fio is not installed"):
        cal.calibrate(lab.sim, DeviceResolver(lab.sim), fio_runner(fio_path=None), dict(PARAMS))
    assert lab.sim.writes == []


def test_a_refused_target_lists_its_reasons(lab, monkeypatch):
    def refuse(fs, resolver, run_, params):
        raise targets.TargetRefused(["/dev/nvme0n1 is mounted on /srv", "/dev/nvme0n1 carries an ext4 filesystem"],
                                    device="/dev/nvme0n1")
    monkeypatch.setattr(targets, "plan_target", refuse)
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, destructive=True)
    assert e.value.errors == ["/dev/nvme0n1 is mounted on /srv", "/dev/nvme0n1 carries an ext4 filesystem"]
    assert lab.sim.writes == []


def test_missing_tools_answer_rc_127_to_the_target_checks():
    runner = fio_runner()
    which = runner.tools
    runner.tools = lambda name: None if name == "wipefs" else which(name)
    run_ = cal._tool_runner(runner)
    assert run_(["wipefs", "--no-act", "--json", "/dev/x"]) == (127, "", "wipefs: command not found")
    assert run_(["blkid", "-p", "/dev/x"])[0] == 2 and runner.calls == [["/usr/sbin/blkid", "-p", "/dev/x"]]


def test_kernel_class_for_a_user_model_is_the_queue_class(lab):
    model, name = cal.kernel_model({"iocost_model": {"ctrl": "user", "rbps": 1}}, lab.record)
    assert name == "ssd_dfl" and model == cal.KERNEL_CLASSES["ssd_dfl"]
    auto = dict(cal.KERNEL_CLASSES["hdd"], ctrl="auto", model="linear")
    assert cal.kernel_model({"iocost_model": auto}, lab.record) == (cal.KERNEL_CLASSES["hdd"], "auto")


def test_a_killed_run_is_repaired_before_the_target_is_planned(lab, monkeypatch):
    # its scratch file may be what makes the free-space check fail: the repair comes first
    _kill_mid_run(lab)
    seen = []

    def plan(fs, resolver, run_, params):
        seen.append((lab.state()["scheduler"], lab.journals()))
        return lab.target()
    monkeypatch.setattr(targets, "plan_target", plan)
    result = run(lab)
    assert seen == [("mq-deadline", [])] and len(result["recovered"]) == 1


def test_check_mode_repairs_nothing(lab):
    _kill_mid_run(lab)
    lab.sim.writes[:] = []
    run(lab, check_mode=True)
    assert lab.sim.writes == [] and len(lab.journals()) == 1


def test_a_journal_for_a_disk_that_moved_is_refused(lab):
    entry = _kill_mid_run(lab)
    entry["stable_id"] = "serial:someone-else"
    with open(lab.sim.path(cal.journal_path(lab.record)), "w") as f:
        json.dump(entry, f)
    with pytest.raises(cal.CalibrationError, match="is for serial:someone-else"):
        run(lab)


@pytest.mark.parametrize("passes, after", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (10, 5)])
def test_the_qos_runs_come_after_the_middle_round(passes, after):
    # at least one round first: the QoS load is a fraction of the random IOPS measured before it
    assert cal.qos_after_round(passes) == after


# -- a disk that leaves the host (hot-removed, failed) ----------------------------------------------

def _pull_the_disk(lab, fio_error=True):
    """Hot-remove the calibrated disk, then (as fio does on a disk that went away) fail the running measurement."""
    lab.host.unplug("nvme0n1")
    lab.writes_at_removal = len(lab.sim.writes)
    if fio_error:
        raise fio.FioError(["fio", "--name=aiinfra-rbps"], 128, "fio: io_u error on file /dev/nvme0n1: "
                           "Input/output error", "fio rbps on /dev/nvme0n1 failed (rc=128): Input/output error")


def test_a_disk_removed_while_measuring_fails_naming_it_and_nothing_is_written_after(lab):
    lab.kind = "device"
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, destructive=True, measure=measuring(lab, lambda: _pull_the_disk(lab)))
    msg = e.value.msg
    assert msg.startswith("nvme0n1 (259:0, serial lab-nvme-a) left the host while it was being calibrated")
    assert "nothing to put back on it, and no other disk was touched" in msg
    assert "What the measurement said: fio rbps on /dev/nvme0n1 failed (rc=128): Input/output error" in msg
    assert "COULD NOT RESTORE" not in msg
    assert e.value.details["gone"] is True and e.value.details["restore"]["gone"] is True
    # no write to the gone disk's files (or any other) after it left; no journal that would stop the next call
    assert lab.sim.writes[lab.writes_at_removal:] == []
    assert lab.journals() == []


def test_a_disk_removed_after_a_measurement_that_ended_well_still_fails(lab):
    lab.kind = "device"
    with pytest.raises(cal.CalibrationError) as e:
        run(lab, destructive=True, measure=measuring(lab, lambda: _pull_the_disk(lab, fio_error=False)))
    assert e.value.msg.startswith("nvme0n1 (259:0, serial lab-nvme-a) left the host")
    assert "What the measurement said: calibrating nvme0n1 failed: the disk is gone" in e.value.msg
    assert lab.sim.writes[lab.writes_at_removal:] == [] and lab.journals() == []


def test_the_journal_of_a_killed_run_whose_disk_is_gone_is_dropped_without_a_write(lab):
    _kill_mid_run(lab)
    lab.host.unplug("nvme0n1")
    lab.sim.writes[:] = []
    (report,) = cal.recover(lab.sim, DeviceResolver(lab.sim))
    assert report["gone"] is True and report["restored"] is None
    assert report["notes"] == ["nvme0n1 is no longer on this host: nothing to put back"]
    assert lab.sim.writes == [] and lab.journals() == []
