# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One calibration of one disk: target, held queue state, six measurements, QoS, restore.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

The order of a call:

1. resolve the disk and plan the target (``_calibrate_target``): every refusal before any write;
2. repair what a killed earlier run left (a journal under /run names what it changed);
3. write the journal, create the scratch file, then hold the disk for measuring through the
   reconcile engine (scheduler ``none``, ``nomerges`` 1, iocost off), read back and verified;
4. the six fio measurements and the QoS latency runs (``_fio``);
5. with ``solutions``: the solution phase (``_solutions``): the measured model written to
   ``io.cost.model``, vrate pinned at each level by ``io.cost.qos``, a probe and an antagonist in two
   transient scopes of the calibration slice;
6. always (success, fio failure, SIGTERM/SIGHUP/SIGINT): stop the calibration slice (what is left in
   it ends), put back scheduler, ``nr_requests`` (a scheduler switch resets it), ``nomerges``, the
   ``io.cost.model`` and ``io.cost.qos`` lines, then ``wbt_lat_usec`` if the kernel moved it, all
   through the engine and verified; remove the scratch file, then the journal.

A SIGKILL cannot be caught: the journal lets the next call (for any disk) put the disk back and
remove the scratch file, before it plans its own target. A reboot resets the kernel state by
itself; then only the scratch file is removed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import platform
import signal
import time
from contextlib import contextmanager

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import calibrate_target as targets
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import fio
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration import solutions
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, name_of
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import slug
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    CodecSetting, Reconciler,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._calibration.errors import CalibrationError

IOCOST_QOS = blk_queue.IOCOST_QOS
IOCOST_MODEL = "/sys/fs/cgroup/io.cost.model"
JOURNAL_DIR = "/run/aiinfra-io_isolation"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# What the measurement needs on the disk (the reference tool sets the same): no scheduler and no
# merging between fio and the device, and no iocost throttling of fio itself.
HOLD_QUEUE = {"scheduler": "none", "nomerges": 1}
RESTORED_QUEUE = ("scheduler", "nr_requests", "nomerges")
# The kernel's built-in iocost classes (blk-iocost.c autop[]; docs/kernel-files.md, "iocost's
# built-in cost-model classes"): shown next to the calibrated model when the disk holds a user
# model (its own class is then not visible).
KERNEL_CLASSES = {
    "hdd": {"rbps": 174019176, "rseqiops": 41708, "rrandiops": 370,
            "wbps": 178075866, "wseqiops": 42705, "wrandiops": 378},
    "ssd_dfl": {"rbps": 488636629, "rseqiops": 8932, "rrandiops": 8518,
                "wbps": 427891549, "wseqiops": 28755, "wrandiops": 21940},
}


class Interrupted(BaseException):
    """A signal arrived while measuring (BaseException: no ``except Exception`` swallows it)."""

    def __init__(self, signum):
        super(Interrupted, self).__init__(signum)
        self.name = signal.Signals(signum).name


@contextmanager
def signals_as_exceptions(signums=(signal.SIGTERM, signal.SIGHUP, signal.SIGINT)):
    """Turn termination signals into :class:`Interrupted` so ``finally`` blocks restore the disk."""
    def handler(signum, _frame):
        raise Interrupted(signum)
    old = {}
    for signum in signums:
        old[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


# ---------------------------------------------------------------------------------------------
# What the disk holds, holding it, putting it back
# ---------------------------------------------------------------------------------------------

def snapshot(fs, record):
    """What the measurement will change, as the kernel holds it now (JSON-friendly)."""
    ctx = blk_queue.QueueContext(fs, record)
    queue = blk_queue.held(ctx)
    model, qos = iocost.held(fs, record.majmin)
    return {"queue": dict((attr, queue.get(attr)) for attr in RESTORED_QUEUE + ("wbt_lat_usec",)),
            "iocost_qos": qos, "iocost_model": model}


def _queue_settings(fs, record, attrs):
    settings, errors, _plans = blk_queue.build(fs, [(record, attrs)], {"persist": False})
    problems = errors + [p for s in settings for p in getattr(s, "problems", [])]
    return settings, problems


def _qos_setting(record, desired):
    return CodecSetting("io.cost.qos[%s]" % record.majmin, IOCOST_QOS, codecs.IO_COST_QOS, desired,
                        device=record.majmin, order=200, reset={"enable": 0, "ctrl": "auto"})


def _model_setting(record, desired):
    return CodecSetting("io.cost.model[%s]" % record.majmin, IOCOST_MODEL, codecs.IO_COST_MODEL, desired,
                        device=record.majmin, order=190, reset={"ctrl": "auto"})


def pin(fs, record, model, qos):
    """iocost on for the solution phase: ``model`` (the six coefficients; None: leave the model) and ``qos``
    (the six QoS keys) with enable=1 ctrl=user, through the engine and verified; returns the disk's qos line."""
    settings = []
    if model is not None:
        settings.append(_model_setting(record, dict((k, int(model[k])) for k in codecs.COST_COEFS)))
    settings.append(_qos_setting(record, dict(qos, enable=1, ctrl="user")))
    Reconciler(fs).run(settings, [])
    return solutions.qos_line(fs, record.majmin)


def hold(fs, record, snap):
    """Put the disk into measuring state through the engine (verified; undone on failure)."""
    settings, problems = _queue_settings(fs, record, dict(HOLD_QUEUE))
    qos = snap.get("iocost_qos")
    if qos and str(qos.get("enable")) == "1":
        # iocost off while measuring: it would throttle fio by the model being measured.
        settings.append(_qos_setting(record, {"enable": 0}))
    return Reconciler(fs).run(settings, problems)


def restore(fs, record, snap):
    """Put back what :func:`snapshot` saw; returns the engine result plus any wbt note."""
    queue = snap["queue"]
    attrs = dict((attr, queue[attr]) for attr in RESTORED_QUEUE if queue.get(attr) is not None)
    settings, problems = _queue_settings(fs, record, attrs)
    model, qos = snap.get("iocost_model"), snap.get("iocost_qos")
    now_model, now_qos = iocost.held(fs, record.majmin)
    # The solution phase writes the model: put the one before back. A disk that had no iocost lines before
    # (iocost never initialised on it) keeps the lines the phase's writes made - the kernel cannot take them
    # away - set to what an uninitialised disk behaves as: the built-in model, iocost off.
    if model:
        settings.append(_model_setting(record, codecs.IO_COST_MODEL.as_desired({record.majmin: model})[record.majmin]))
    elif now_model:
        settings.append(_model_setting(record, {"ctrl": "auto"}))
    if qos:
        desired = codecs.IO_COST_QOS.as_desired({record.majmin: qos})[record.majmin]
        settings.append(_qos_setting(record, desired))
    elif now_qos:
        settings.append(_qos_setting(record, {"enable": 0, "ctrl": "auto"}))
    result = Reconciler(fs).run(settings, problems)
    result["notes"] = _restore_wbt(fs, record, queue.get("wbt_lat_usec"))
    return result


def _restore_wbt(fs, record, before):
    """Put ``wbt_lat_usec`` back through the engine if the restore left it elsewhere; notes on what was written.

    wbt is switched by the kernel, not by us (iocost on/off, bfq; enabling iocost calls wbt_disable_default():
    docs/kernel-files.md, "iocost's built-in cost-model classes"), so this is a pass of its own after the
    restore: it must read what those writes left.
    """
    if before is None:
        return []
    settings, problems = _queue_settings(fs, record, {"wbt_lat_usec": before})
    diff = Reconciler(fs).run(settings, problems)["diff"]
    return ["%s: wbt_lat_usec read %s after the restore; wrote back %s" % (record.name, now, before)
            for now in diff["before"].values()]


# ---------------------------------------------------------------------------------------------
# The journal: what a killed run must undo
# ---------------------------------------------------------------------------------------------

def journal_path(record):
    return "%s/calibrate-%s.json" % (JOURNAL_DIR, slug(record.stable_id or record.name))


def _boot_id(fs):
    return (fs.read(BOOT_ID) or "").strip()


def write_journal(fs, record, snap, target, slice_name=None):
    """The journal a killed run is repaired from: the disk's snapshot, the scratch file, the solution phase's slice."""
    fs.mkdir(JOURNAL_DIR, 0o700)
    entry = {"device": record.brief(), "stable_id": record.stable_id, "pid": os.getpid(), "boot_id": _boot_id(fs),
             "started": time.time(), "snapshot": snap,
             "scratch": target.path if target.kind == "file" else None, "slice": slice_name}
    fs.atomic_write(journal_path(record), json.dumps(entry, sort_keys=True) + "\n", mode=0o600)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == 1   # EPERM: it exists
    return True


def _read_journal(fs, path):
    try:
        return json.loads(fs.read(path) or "")
    except ValueError:
        raise CalibrationError("%s is not a calibration journal (not JSON); remove it once the disk's scheduler, "
                               "nomerges and io.cost.qos are checked by hand" % path)


def _running(fs, entry):
    """True when the journal's calibration still runs (same boot, its process alive, not us)."""
    pid = entry.get("pid")
    return bool(entry.get("boot_id") == _boot_id(fs) and pid and pid != os.getpid() and _alive(pid))


def recover(fs, resolver, run=None, which=None):
    """Undo what killed calibrations left, for every journal whose process is gone.

    Runs before the target is planned, so a killed run's scratch file no longer takes the free
    space and its disk is back in its own state before it is checked again. In the same boot the
    disk is found by the journal's MAJ:MIN (still valid) and checked against its stable identity;
    after a reboot the kernel state is fresh and only the scratch file is removed. A disk that left the
    host in the same boot (its MAJ:MIN is no block device now) took its kernel state with it: nothing is
    restored, the report says ``gone``. A solution phase's
    slice is stopped first (its fio processes outlive a killed module), with ``run``/``which`` (the
    command runner). Returns a report per journal.
    """
    reports = []
    for name in fs.listdir(JOURNAL_DIR):
        if not (name.startswith("calibrate-") and name.endswith(".json")):
            continue
        path = "%s/%s" % (JOURNAL_DIR, name)
        entry = _read_journal(fs, path)
        if _running(fs, entry):
            continue    # another calibration, of another disk (the same disk is refused later)
        report = {"journal": path, "device": entry.get("device"), "started": entry.get("started"),
                  "restored": None, "removed_scratch": None, "notes": []}
        if entry.get("boot_id") == _boot_id(fs):
            if entry.get("slice"):
                report["stopped_slice"] = _stop_slice(fs, run, which, path)
            try:
                record = resolver.resolve((entry.get("device") or {}).get("majmin") or "")
            except DeviceError as e:
                if e.reason != "not_found":
                    raise CalibrationError("the calibration journal %s names %s: %s; check that disk by hand and "
                                           "remove the journal" % (path, entry.get("device"), e.message))
                record = None
            if record is None:
                # the disk left the host since (hot-removed, failed): its kernel state went with it
                report["gone"] = True
                report["notes"] = ["%s is no longer on this host: nothing to put back"
                                   % ((entry.get("device") or {}).get("name") or entry.get("stable_id"))]
            elif entry.get("stable_id") and record.stable_id != entry["stable_id"]:
                raise CalibrationError("the calibration journal %s is for %s, but %s is now %s; check the disk by "
                                       "hand and remove the journal" % (path, entry["stable_id"], record.majmin,
                                                                        record.stable_id))
            else:
                result = restore(fs, record, entry["snapshot"])
                report["restored"] = result["diff"]["after"]
                report["notes"] = result["notes"]
        scratch = entry.get("scratch")
        if scratch and fs.exists(scratch):
            try:
                targets.remove_scratch(fs.path(scratch))
            except (OSError, ValueError) as e:
                raise CalibrationError("cannot remove the scratch file %s of the killed run (journal %s): %s"
                                       % (scratch, path, e))
            report["removed_scratch"] = scratch
        fs.remove(path)
        reports.append(report)
    return reports


def _stop_slice(fs, run, which, journal):
    """Stop the solution phase's slice for :func:`recover`; CalibrationError when it cannot."""
    systemctl = which("systemctl") if which else None
    if run is None or systemctl is None:
        raise CalibrationError("the calibration journal %s names the slice %s of a killed solution phase, and "
                               "systemctl is not available to stop it; stop it by hand (systemctl stop %s) and run "
                               "again" % (journal, solutions.SLICE, solutions.SLICE))
    problem = solutions.stop_slice(run, systemctl, fs)
    if problem:
        raise CalibrationError("repairing the killed calibration of journal %s: %s" % (journal, problem))
    return solutions.SLICE


def refuse_if_running(fs, record):
    """A calibration of the same disk that is still running makes this one fail before any write."""
    path = journal_path(record)
    if fs.read(path) is None:
        return
    entry = _read_journal(fs, path)
    if _running(fs, entry):
        raise CalibrationError("another calibration of %s is running (pid %s, journal %s); wait for it to finish"
                               % (record.name, entry["pid"], path))


# ---------------------------------------------------------------------------------------------
# One calibration
# ---------------------------------------------------------------------------------------------

def stop_rule(params):
    try:
        return fio.StopRule(**dict((k, v) for k, v in (params or {}).items() if v is not None))
    except (TypeError, ValueError) as e:
        raise CalibrationError("stop_rule: %s" % e)


def kernel_model(snap, record):
    """The kernel's own class for the disk: its auto line, else the class its queue selects."""
    model = snap.get("iocost_model")
    if model and model.get("ctrl") == "auto":
        return dict((k, int(model[k])) for k in codecs.COST_COEFS), "auto"
    name = "hdd" if record.rotational else "ssd_dfl"
    return dict(KERNEL_CLASSES[name]), name


DEFAULT_SCRATCH = "16G"


def _request(params):
    """(scratch_size, big_block_size, headroom) in bytes; CalibrationError on bad input."""
    sizes = {}
    for name, default in (("scratch_size", DEFAULT_SCRATCH), ("big_block_size", None), ("scratch_headroom", None)):
        value = params.get(name)
        value = default if value is None else value
        try:
            sizes[name] = codecs.parse_size(value) if value is not None else None
        except codecs.CodecError as e:
            raise CalibrationError("%s: %s" % (name, e))
        if sizes[name] == "max" or (sizes[name] is not None and sizes[name] <= 0):
            raise CalibrationError("%s: give a size such as 4G, not %r" % (name, value))
    if params.get("numjobs", 1) < 1:
        raise CalibrationError("numjobs must be at least 1")
    if params.get("qos_seconds", 1) < 1:
        raise CalibrationError("qos_seconds must be at least 1")
    try:
        solutions.options(params.get("solutions"))
    except solutions.SolutionError as e:
        raise CalibrationError(str(e))
    return sizes["scratch_size"], sizes["big_block_size"], sizes["scratch_headroom"]


def _tool_runner(runner):
    """``run(argv) -> (rc, out, err)`` that answers rc 127 for a tool the host lacks instead of failing."""
    def run(argv):
        path = argv[0] if "/" in argv[0] else runner.which(argv[0])
        if path is None:
            return 127, "", "%s: command not found" % argv[0]
        return runner.run([path] + list(argv[1:]), check=False)
    return run


def calibrate(fs, resolver, runner, params, check_mode=False, measure=None, solve=None):
    """The module's work. ``runner`` is a ``_commands.Runner``; ``measure`` replaces the model phase's fio runs
    and ``solve`` the solution phase's point runs (:func:`_solve`'s signature) in tests."""
    scratch_size, big_bs, headroom = _request(params)
    rule = stop_rule(params.get("stop_rule"))
    run = _tool_runner(runner)
    # first repair what killed runs left (their disks' state, their scratch files)
    recovered = [] if check_mode else recover(fs, resolver, run, runner.which)
    phase_opts = solutions.options(params.get("solutions"))
    request = dict(params, scratch_size=scratch_size)
    if headroom is not None:
        request["headroom_min"] = headroom
    try:
        target = targets.plan_target(fs, resolver, run, request)
    except targets.TargetRefused as e:
        raise CalibrationError(str(e), errors=e.reasons)
    except DeviceError as e:
        raise CalibrationError(e.message, details=dict((k, v) for k, v in e.as_dict().items() if k != "msg"))
    record = target.disk
    refuse_if_running(fs, record)
    binary = runner.which("fio")
    if binary is None:
        raise CalibrationError("fio is not installed on this host; install it (apt-get install fio) and run again")
    try:
        version = fio.fio_version(run, fio=binary)
    except (ValueError, fio.FioError) as e:
        raise CalibrationError(str(e))
    if target.size_bytes < 2 * (big_bs or fio.BIG_BS):
        raise CalibrationError("the target holds %d bytes, less than two %d-byte blocks for the bandwidth runs; give a "
                               "larger scratch_size or a smaller big_block_size"
                               % (target.size_bytes, big_bs or fio.BIG_BS))
    snap = snapshot(fs, record)
    base = {"device": record.as_dict(), "target": target.as_dict(), "fio_version": version,
            "kernel": platform.release(), "host": platform.node(),
            "method": {"stop_rule": rule.as_dict(), "numjobs": params.get("numjobs", 1),
                       "big_block_size": big_bs or fio.BIG_BS, "qos_rule": fio.QOS_RULE,
                       "qos_seconds": params.get("qos_seconds"), "measure_qos": params.get("measure_qos", True)}}
    km, kclass = kernel_model(snap, record)
    base.update(kernel_model=km, kernel_class=kclass, held_before=snap)
    tools, skipped = (None, "not asked for (solutions.measure=false)") if phase_opts is None else \
        solutions.preflight(fs, runner.which)
    phase = {"measured": False, "skipped": skipped, "rule": solutions.RULE, "options": phase_opts,
             "bound_seconds": solutions.phase_seconds(phase_opts) if tools else 0}
    base["method"]["solutions"] = phase_opts
    if phase_opts is not None and tools is None:
        base.setdefault("warnings", []).append("%s: no QoS solutions measured: %s" % (record.name, skipped))
    if check_mode:
        base.update(changed=False, msg="would measure %s through %s %s" % (record.name, target.kind, target.path),
                    solution_phase=phase)
        return base
    started = time.time()
    timings = {}
    result = dict(base, recovered=recovered, changed=target.kind == "device")
    write_journal(fs, record, snap, target, solutions.SLICE if tools else None)
    failure = None
    try:
        with signals_as_exceptions():
            try:
                if target.kind == "file":
                    t0 = time.time()
                    targets.create_scratch(target)
                    timings["scratch_fill"] = round(time.time() - t0, 2)
                # the O_EXCL hold keeps a raw disk from being mounted or claimed while fio writes
                with targets.claim(target):
                    hold(fs, record, snap)
                    result.update((measure or _measure)(binary, target, rule, params, big_bs, timings))
                    if tools:
                        t0 = time.time()
                        phase.update((solve or _solve)(fs, record, binary, tools, target, phase_opts, result))
                        phase.update(measured=True)
                        timings["solutions"] = round(time.time() - t0, 2)
            finally:
                result["restore"] = _restore_all(fs, record, snap, target, run, tools)
    except Interrupted as e:
        failure = CalibrationError("interrupted by %s while calibrating %s; the disk was put back (%s)"
                                   % (e.name, record.name, _restored_text(result.get("restore"))),
                                   details={"restore": result.get("restore")})
    except fio.FioError as e:
        fio_error = {"argv": e.argv, "rc": e.rc, "stderr": e.stderr}
        failure = CalibrationError("%s; the disk was put back (%s)" % (e, _restored_text(result.get("restore"))),
                                   details={"restore": result.get("restore"), "fio": fio_error})
    except solutions.SolutionError as e:
        failure = CalibrationError("the solution phase on %s failed: %s; the disk was put back (%s)"
                                   % (record.name, e, _restored_text(result.get("restore"))),
                                   details={"restore": result.get("restore")})
    except (targets.TargetRefused, OSError) as e:
        failure = CalibrationError("calibrating %s failed: %s; the disk was put back (%s)"
                                   % (record.name, e, _restored_text(result.get("restore"))),
                                   details={"restore": result.get("restore")})
    if (result.get("restore") or {}).get("gone"):
        said = failure
        if said is None:
            said = CalibrationError("calibrating %s failed: the disk is gone" % record.name,
                                    details={"restore": result.get("restore")})
        # the cause first, whatever the measurement said about it (fio: an I/O error, a missing device)
        failure = CalibrationError("%s. What the measurement said: %s" % (_gone_text(record), said.msg),
                                   details=dict(said.details or {}, gone=True))
    if failure is not None:
        raise failure
    result["seconds"] = round(time.time() - started, 1)
    result["target"] = target.as_dict()     # now with how the scratch file was written
    result["timings"] = timings
    result["solution_phase"] = phase
    result["solutions"] = phase.get("solutions")
    result["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    return result


def gone(fs, record):
    """True when the disk has left the host (hot-removed, failed, detached): its MAJ:MIN is no block device now, or
    another one. Its queue settings and iocost lines went with it, so there is nothing to put back; a disk that
    comes back starts from the kernel's defaults and its udev rules."""
    return name_of(fs, record.majmin) != record.name


def _gone_text(record):
    return ("%s (%s, serial %s) left the host while it was being calibrated (hot-removed, failed or detached); its "
            "queue settings and iocost lines went with it, so there is nothing to put back on it, and no other disk "
            "was touched" % (record.name, record.majmin, record.serial or "-"))


def _restore_all(fs, record, snap, target, run=None, tools=None):
    """Stop the solution phase's slice, restore the disk and remove the scratch file and journal; never raises
    for the restore itself. A disk that left the host is not restored (``gone``)."""
    out = {"queue": None, "errors": [], "notes": [], "gone": False}
    if tools:
        try:
            problem = solutions.stop_slice(run, tools["systemctl"], fs)
        except Exception as e:  # pylint: disable=broad-except
            problem = "stopping %s: %s" % (solutions.SLICE, e)
        if problem:
            out["errors"].append(problem)
    res, problem = None, None
    try:
        res = None if gone(fs, record) else restore(fs, record, snap)
    except Exception as e:  # pylint: disable=broad-except
        problem = e
    if res is not None:
        out["queue"] = res["values"]
        out["notes"] = res["notes"]
    elif problem is None or gone(fs, record):   # gone before the restore, or it left during it
        out["gone"] = True
        out["notes"] = [_gone_text(record)]
    else:
        # keep the journal: the next call repairs what this one could not
        out["errors"].append("%s: %s" % (record.name, getattr(problem, "msg", problem)))
    if target.kind == "file":
        try:
            targets.remove_scratch(target.local_path)
        except (OSError, ValueError) as e:
            out["errors"].append("cannot remove %s: %s" % (target.path, e))
    if not out["errors"]:
        fs.remove(journal_path(record))
    return out


def _restored_text(restore_report):
    if not restore_report:
        return "nothing had been changed yet"
    if restore_report.get("gone"):
        return "nothing to put back: the disk is gone%s" % (
            "; but %s; the journal %s stays for the next run" % ("; ".join(restore_report["errors"]), JOURNAL_DIR)
            if restore_report.get("errors") else "")
    if restore_report.get("errors"):
        return "COULD NOT RESTORE: %s; the journal %s stays for the next run" % (
            "; ".join(restore_report["errors"]), JOURNAL_DIR)
    queue = restore_report.get("queue") or {}
    return ", ".join("%s=%s" % (k.rsplit("/", 1)[-1], v) for k, v in sorted(queue.items())) or "as before"


def qos_after_round(passes):
    """After which round of the six measurements the QoS runs: the middle one (1 of 1 or 2, 2 of 3 or 4).

    Why not at the end: a disk that drifts over minutes is sampled best by passes spread as widely as
    possible, and the QoS runs' time between two rounds widens every coefficient's spread of passes
    for free. The QoS load needs the random IOPS, so it waits for at least one round."""
    return max(1, (passes + 1) // 2)


def _solve(fs, record, binary, tools, target, opts, result):
    """The solution phase with fio and systemd-run (``_solutions``); ``result`` holds the model phase's."""
    phase = solutions.Phase(fs, record, binary, tools, target, opts, result["model"],
                            lambda model, qos: pin(fs, record, model, qos))
    return solutions.run_phase(phase)


def _measure(binary, target, rule, params, big_bs, timings):
    """The six coefficients in rounds, with the QoS latency runs between the middle rounds."""
    numjobs = params.get("numjobs", 1)
    kw = {"numjobs": numjobs}
    if big_bs:
        kw["big_bs"] = big_bs
    runs = dict((m.name, []) for m in fio.MEASUREMENTS)
    latency = None
    measuring = 0.0
    # all six, all six again, ...: a coefficient's passes lie one round (about 50 s) apart (see StopRule)
    for done in range(1, rule.passes + 1):
        t0 = time.time()
        for m in fio.MEASUREMENTS:
            runs[m.name].append(fio.run_measurement(binary, m, target.path, target.size_bytes, rule, **kw))
        measuring += time.time() - t0
        if done == qos_after_round(rule.passes) and params.get("measure_qos", True):
            # rate-limited to a fraction of the random IOPS measured so far
            sofar = dict((name, fio.combine_passes(runs[name])["value"]) for name in ("rrandiops", "wrandiops"))
            t0 = time.time()
            latency = fio.run_qos(binary, target.path, target.size_bytes, sofar["rrandiops"], sofar["wrandiops"],
                                  seconds=params.get("qos_seconds", 8), rotational=bool(target.disk.rotational))
            latency["after_round"] = done
            timings["qos"] = round(time.time() - t0, 2)
    timings["measure"] = round(measuring, 2)
    measurements = [fio.combine_passes(runs[m.name]) for m in fio.MEASUREMENTS]
    model = dict((m["name"], int(m["value"])) for m in measurements)
    out = {"model": model, "measurements": measurements,
           "spread": dict((m["name"], (m["spread"] or {}).get("rse")) for m in measurements)}
    if latency is not None:
        out["qos"] = latency["qos"]
        out["latency"] = latency
    else:
        out["qos"] = None
        out["latency"] = None
    return out
