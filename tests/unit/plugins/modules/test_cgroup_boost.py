# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""cgroup_boost through AnsibleModule, on a fake host whose cgroup files behave like the kernel's (SimCgroup)
and a systemctl/systemd-run that behave like systemd 252 and 257 (SimSystemd; its timers fire when a test says).

The slice's caps are put in place by the cgroup module's own code, as site.yml does."""

import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup_boost as _cgroup_boost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import cgroup as _cgroup
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import registry as _registry
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import is_managed, owned_files
from ansible_collections.aiinfra.io_isolation.plugins.modules import cgroup_boost
from sim.lab import SystemdLab, lab_host
from sim.systemd import CONTROL_DIR, TRANSIENT_DIR

CG = "/sys/fs/cgroup"
KERNEL_CONFIG = "CONFIG_BLK_CGROUP_IOCOST=y\nCONFIG_BLK_DEV_THROTTLING=y\n"
DROPIN = "/run/systemd/system/training.slice.d/60-aiinfra-io-isolation-boost.conf"
TIMER = "aiinfra-io-isolation-boost-training.timer"
SERVICE = "aiinfra-io-isolation-boost-training.service"
CAPPED = "259:0 rbps=max wbps=50000000 riops=2000 wiops=max"
T0 = 1796349600.25          # 2026-12-04T02:00:00.25Z
CAPS = {"name": "training.slice", "create": True, "io": {"weight": 100, "max": {"lab-nvme-a": {
    "wbps": "50MB", "riops": 2000}}}}
LIFTED = {"rbps": "max", "wbps": "max", "riops": "max", "wiops": "max"}


class Lab(SystemdLab):
    """A host with a capped training.slice (applied by the cgroup module), and cgroup_boost wired to it."""

    def __init__(self, tmp_path, monkeypatch, run_module, version):
        h = lab_host(tmp_path, vda={"partitions": 1}, cgroup={"subtree": "cpu io memory pids"})
        h.write("/boot/config-" + os.uname()[2], KERNEL_CONFIG)
        super(Lab, self).__init__(h, version=version)
        self.clock = [T0]
        monkeypatch.setattr(_cgroup_boost, "now", lambda: self.clock[0])
        monkeypatch.setattr(_cgroup_boost, "uptime", lambda: self.clock[0] - T0 + 1000.0)     # booted 1000 s before T0
        self.wire_modules(monkeypatch, cgroup_boost)
        self._run_module = run_module
        result = self.converge()
        assert result["changed"] and self.io_max() == CAPPED, result

    def converge(self, params=None, check_mode=False):
        """The cgroup module's code on the slice, as site.yml applies it."""
        return _cgroup.reconcile(params or CAPS, self.kernel, self.systemd, check_mode)

    def run(self, **args):
        self.systemd.calls[:] = []
        self.kernel.ops[:] = []
        self.kernel.systemd_writes[:] = []
        self.warnings[:] = []
        return self._run_module(cgroup_boost.main, **args)

    def io_max(self):
        return self.read(CG + "/training.slice/io.max").rstrip("\n")

    def run_files(self):
        return self.files_below("/run/systemd")

    def mutating(self):
        """Every command but the reading ones."""
        return [c for c in self.systemd.calls if c[0] != "systemctl" or c[1] not in ("show", "--version")]


@pytest.fixture(params=[252, 257], ids=["systemd252", "systemd257"])
def lab(request, tmp_path, monkeypatch, run_module):
    return Lab(tmp_path, monkeypatch, run_module, request.param)


def dropin_text(lab, end="2026-12-04T02:10:01Z"):
    link = lab.link()
    return ("# Managed by Ansible (aiinfra.io_isolation): aiinfra.io_isolation.cgroup_boost. Local edits will be "
            "overwritten.\n# Boost window of training.slice ends at %s; the timer %s ends it, and so does a reboot "
            "(this file is in /run).\n[Slice]\nIOAccounting=yes\nIOReadBandwidthMax=%s infinity\n"
            "IOWriteBandwidthMax=%s infinity\nIOReadIOPSMax=%s infinity\nIOWriteIOPSMax=%s infinity\n"
            % (end, TIMER, link, link, link, link))


# ---------------------------------------------------------------------------------------------
# Start, the host's own end, the normal end
# ---------------------------------------------------------------------------------------------

def test_start_schedules_the_end_first_then_lifts(lab):
    seen = []

    def watch(sim, argv):
        if argv[0].endswith("systemd-run"):
            seen.append(lab.read(DROPIN))       # the drop-in does not exist yet when the end is scheduled
    lab.systemd.hooks.append(watch)
    result = lab.run(unit="training.slice", seconds=600)
    assert not result.get("failed"), result
    assert seen == [None]
    assert result["changed"] is True and result["active"] is True
    assert result["window_end"] == "2026-12-04T02:10:01Z"     # the next whole second + 600 s
    assert result["timer"] == TIMER and result["dropin"] == DROPIN and result["seconds"] == 600
    assert result["devices"] == {lab.link(): "259:0"}
    assert result["lifted"] == {lab.link(): LIFTED}
    assert result["kernel"] == {"io.max": {}} and result["previous"] is None
    assert lab.io_max() == ""
    assert lab.read(DROPIN) == dropin_text(lab)
    run = [c for c in lab.systemd.calls if c[0].endswith("systemd-run")]
    assert len(run) == 1 and run[0][1] == "--on-boot=1600750ms"        # ends exactly at window_end (1000 s uptime + 600.75)
    assert "--unit=aiinfra-io-isolation-boost-training" in run[0] and "--timer-property=AccuracySec=1s" in run[0]
    assert run[0][run[0].index("--"):] == ["--", "/usr/bin/systemctl", "set-property", "--runtime", "--",
                                           "training.slice", "IOAccounting=yes"]
    assert lab.systemd.transient[TIMER]["SubState"] == "waiting"
    assert lab.mutating() == [
        run[0],
        ["systemctl", "daemon-reload"],
        ["systemctl", "set-property", "--runtime", "--", "training.slice", "IOAccounting=yes"],
        ["systemctl", "daemon-reload"],
    ]
    # set-property's control file is gone: the unit's configuration is its files (the /run drop-in included)
    assert not os.path.exists(lab.host.path(CONTROL_DIR + "/training.slice.d"))
    assert result["diff"]["before"]["boost window training.slice"]["timer"] is None
    assert result["diff"]["after"]["boost window training.slice"] == {
        "window_end": "2026-12-04T02:10:01Z", "timer": "waiting", "dropin": dropin_text(lab)}
    assert lab.warnings == []


def test_the_host_ends_the_window_by_itself(lab):
    """The job is gone (killed): the timer's service alone puts the caps back and leaves nothing behind."""
    lab.run(unit="training.slice", seconds=60)
    assert lab.io_max() == ""
    ran = lab.systemd.fire(TIMER)
    assert [os.path.basename(argv[0]) for argv, _rc in ran] == [
        "rm", "rmdir", "systemctl", "systemctl", "rm", "rmdir", "systemctl"]
    assert [rc for _argv, rc in ran] == [0, 0, 0, 0, 0, 0, 0]
    assert lab.io_max() == CAPPED
    assert lab.run_files() == [] and lab.systemd.transient == {}
    # and the cgroup module finds the slice exactly as it left it
    assert lab.converge()["changed"] is False


def test_absent_ends_the_window_at_once(lab):
    lab.run(unit="training.slice", seconds=600)
    result = lab.run(unit="training.slice", state="absent")
    assert result["changed"] is True and result["active"] is False and result["window_end"] is None
    assert result["previous"] == {"window_end": "2026-12-04T02:10:01Z", "timer_state": "waiting", "active": True,
                                  "expired": False}
    assert lab.io_max() == CAPPED and result["kernel"]["io.max"] == {"259:0": {
        "rbps": "max", "wbps": 50000000, "riops": 2000, "wiops": "max"}}
    assert lab.systemd.transient == {} and lab.run_files() == []
    assert lab.mutating() == [
        ["systemctl", "stop", "--", TIMER, SERVICE],
        ["systemctl", "daemon-reload"],
        ["systemctl", "set-property", "--runtime", "--", "training.slice", "IOAccounting=yes"],
        ["systemctl", "daemon-reload"],
    ]
    again = lab.run(unit="training.slice", state="stopped")
    assert again["changed"] is False and lab.mutating() == [] and again["previous"] is None


def test_starting_again_replaces_the_window(lab):
    lab.run(unit="training.slice", seconds=600)
    lab.clock[0] = T0 + 100
    result = lab.run(unit="training.slice", seconds=60)
    assert result["changed"] is True and result["window_end"] == "2026-12-04T02:02:41Z"
    assert result["previous"]["window_end"] == "2026-12-04T02:10:01Z"
    assert lab.mutating()[0] == ["systemctl", "stop", "--", TIMER, SERVICE]
    assert [c for c in lab.systemd.calls if c[0].endswith("systemd-run")][0][1] == "--on-boot=1160750ms"
    assert lab.io_max() == "" and lab.read(DROPIN) == dropin_text(lab, "2026-12-04T02:02:41Z")
    lab.systemd.fire(TIMER)
    assert lab.io_max() == CAPPED


def test_a_window_for_one_field_of_one_disk(lab):
    result = lab.run(unit="training.slice", seconds=60, io={"max": {"lab-nvme-a": {"wbps": "2GB"}}})
    assert result["lifted"] == {lab.link(): {"wbps": 2000000000}}
    assert lab.io_max() == "259:0 rbps=max wbps=2000000000 riops=2000 wiops=max"
    assert "IOWriteBandwidthMax=%s 2000000000\n" % lab.link() in lab.read(DROPIN)
    lab.systemd.fire(TIMER)
    assert lab.io_max() == CAPPED


def test_an_inactive_slice_gets_the_window_in_its_configuration(lab):
    """Nothing runs in the slice (no cgroup): the lift is checked through systemctl show only."""
    lab.systemd.units["training.slice"]["active"] = False
    lab.kernel.rmdir(CG + "/training.slice")
    result = lab.run(unit="training.slice", seconds=60)
    assert result["changed"] and result["kernel"] == {"io.max": None}
    lab.systemd.run(["systemctl", "start", "--", "training.slice"])
    assert lab.io_max() == ""                      # what the slice gets once something runs in it
    lab.run(unit="training.slice", state="absent")
    assert lab.io_max() == CAPPED


# ---------------------------------------------------------------------------------------------
# Check mode, refusals, failures
# ---------------------------------------------------------------------------------------------

def test_check_mode_writes_and_schedules_nothing(lab):
    before = lab.run_files()
    result = lab.run(unit="training.slice", seconds=600, _ansible_check_mode=True)
    assert result["changed"] is True and result["active"] is True and result["window_end"] == "2026-12-04T02:10:01Z"
    assert lab.mutating() == [] and lab.kernel.ops == [] and lab.kernel.systemd_writes == []
    assert lab.run_files() == before and lab.io_max() == CAPPED and lab.systemd.transient == {}
    lab.run(unit="training.slice", seconds=600)
    result = lab.run(unit="training.slice", state="absent", _ansible_check_mode=True)
    assert result["changed"] is True and lab.mutating() == [] and lab.io_max() == ""
    assert lab.systemd.transient[TIMER]["SubState"] == "waiting" and lab.read(DROPIN) is not None


@pytest.mark.parametrize("args, message", [
    ({"seconds": 0}, "seconds: 0 is no window; give its length in seconds, at least 1 (e.g. seconds: 600)"),
    ({"seconds": -30}, "seconds: -30 is no window"),
    ({}, "seconds is required with state: started: give the window's length, e.g. seconds: 600"),
    ({"seconds": 700000}, "seconds: 700000 is longer than 604800 (7 days)"),
    ({"seconds": 60, "unit": "training.service"},
     "unit 'training.service' is not a slice: a boost window lifts the io.max caps of a systemd slice"),
    ({"seconds": 60, "unit": "-.slice"}, "unit '-.slice' is the root slice"),
    ({"seconds": 60, "unit": "train--ing.slice"}, "dashes separate parent slices"),
    ({"seconds": 60, "io": {"weight": 500}},
     "io.weight cannot be boosted: a boost window lifts io.max caps only; give io.max"),
    ({"seconds": 60, "io": {"max": "all"}}, "io.max: expected a mapping of device to {rbps, wbps, riops, wiops"),
    ({"seconds": 60, "io": {"max": {}}}, "io.max is empty: name the disks to lift"),
    ({"seconds": 60, "io": {"max": {"lab-nvme-a": {"rbsp": "max"}}}}, "unknown key 'rbsp'"),
    ({"seconds": 60, "io": {"max": {"lab-nvme-a": {"wbps": "10M"}}}}, "10M"),
    ({"seconds": 60, "io": {"max": {"lab-nvme-b": {"wbps": "max"}}}},
     "io.max: training.slice has no io.max cap on lab-nvme-b (259:1), so a window has nothing to lift there"),
    ({"seconds": 60, "io": {"max": {"nvme9n1": {"wbps": "max"}}}}, "nvme9n1"),
])
def test_bad_input_is_refused_before_anything_is_written(lab, args, message):
    params = dict({"unit": "training.slice"}, **args)
    result = lab.run(**params)
    assert result.get("failed") and message in result["msg"], result["msg"]
    assert result["msg"].startswith("Invalid request (nothing was changed): ")
    assert lab.mutating() == [] and lab.kernel.ops == [] and lab.run_files() == []
    assert lab.io_max() == CAPPED


def test_a_slice_without_caps_has_nothing_to_lift(lab):
    result = lab.run(unit="inference.slice", seconds=60)
    assert result.get("failed") and "inference.slice has no io.max caps" in result["msg"]
    assert "training_io_max" in result["msg"] and lab.mutating() == []


def test_a_host_without_systemd_run_is_refused(lab, monkeypatch):
    monkeypatch.setattr(lab.systemd, "which", lambda name: None if name == "systemd-run" else "/usr/bin/" + name)
    result = lab.run(unit="training.slice", seconds=60)
    assert result.get("failed") and "systemd-run is not installed on this host" in result["msg"]
    assert lab.mutating() == []


def test_a_failed_lift_ends_the_window(lab):
    lab.systemd.fail("set-property")
    result = lab.run(unit="training.slice", seconds=60)
    assert result.get("failed"), result
    assert "Applying boost window training.slice failed" in result["msg"]
    assert result["restored"] == ["boost window training.slice"]
    assert lab.systemd.transient == {} and lab.run_files() == [] and lab.io_max() == CAPPED


def test_a_timer_that_fires_during_the_lift_cannot_leave_it_behind(lab):
    """A window shorter than the lift: the end runs before the drop-in exists; the module ends the window itself."""
    def fire_early(sim, argv):
        if argv == ["systemctl", "daemon-reload"] and TIMER in sim.transient:
            sim.hooks.remove(fire_early)
            sim.fire(TIMER)
    lab.systemd.hooks.append(fire_early)
    result = lab.run(unit="training.slice", seconds=1)
    assert result.get("failed") and "ended (its timer %s fired) before the lift was in place" % TIMER in result["msg"]
    assert lab.io_max() == CAPPED and lab.run_files() == [] and lab.systemd.transient == {}


def test_a_drop_in_someone_else_wrote_is_not_taken_over(lab):
    lab.host.write(DROPIN, "[Slice]\nIOWeight=10\n")
    result = lab.run(unit="training.slice", seconds=60)
    assert result.get("failed") and "is not managed by aiinfra.io_isolation" in result["msg"]
    assert lab.mutating() == []


# ---------------------------------------------------------------------------------------------
# The cgroup module (site.yml, verify.yml) and purge meet a window
# ---------------------------------------------------------------------------------------------

def test_converging_the_slice_ends_the_window(lab):
    lab.run(unit="training.slice", seconds=600)
    result = lab.converge()
    assert result["changed"] is True
    assert result["boost"]["ended"] is True and result["boost"]["window_end"] == "2026-12-04T02:10:01Z"
    assert lab.io_max() == CAPPED and lab.systemd.transient == {} and lab.read(DROPIN) is None
    again = lab.converge()
    assert again["changed"] is False and "boost" not in again


def test_check_mode_reports_an_open_window_as_the_only_difference(lab):
    lab.run(unit="training.slice", seconds=600)
    result = lab.converge(check_mode=True)
    assert result["changed"] is True
    boost = result["boost"]
    assert boost["active"] is True and boost["expired"] is False and boost["only_difference"] is True
    assert boost["ended"] is False and boost["timer_state"] == "waiting" and boost["orphaned"] is False
    assert boost["window_end"] == "2026-12-04T02:10:01Z" and boost["lifted"] == {"259:0": LIFTED}
    assert lab.io_max() == "" and lab.systemd.transient[TIMER]["SubState"] == "waiting"


def test_check_mode_tells_other_drift_from_the_window(lab):
    lab.run(unit="training.slice", seconds=600)
    lab.systemd.run(["systemctl", "set-property", "--runtime", "training.slice", "IOWeight=500"])
    result = lab.converge(check_mode=True)
    assert result["boost"]["active"] is True and result["boost"]["only_difference"] is False


def test_a_window_past_its_end_is_expired(lab):
    lab.run(unit="training.slice", seconds=600)
    lab.clock[0] = T0 + 601
    boost = lab.converge(check_mode=True)["boost"]
    assert boost["expired"] is True and boost["active"] is False and boost["timer_state"] == "waiting"


def test_a_window_whose_timer_is_gone_is_orphaned(lab):
    lab.run(unit="training.slice", seconds=600)
    lab.systemd.run(["systemctl", "stop", "--", TIMER])
    boost = lab.converge(check_mode=True)["boost"]
    assert boost["orphaned"] is True and boost["active"] is False and boost["expired"] is False


def test_no_window_costs_the_cgroup_module_no_call(lab):
    lab.systemd.calls[:] = []
    lab.converge(check_mode=True)
    assert not any(TIMER in c for c in lab.systemd.calls)


def test_the_registry_knows_the_window_and_purge_ends_it(lab):
    lab.run(unit="training.slice", seconds=600)
    owned = owned_files(lab.kernel)
    assert ("cgroup_boost", DROPIN) in owned and ("cgroup_boost", TRANSIENT_DIR + "/" + TIMER) in owned
    result = _registry.purge(lab.kernel, lab.systemd, False)
    assert list(result["steps"])[:2] == ["cgroup_boost training.slice", "cgroup training.slice"]
    assert result["left"] == [] and lab.systemd.transient == {} and lab.read(DROPIN) is None


def test_purge_ends_a_timer_left_without_its_drop_in(lab):
    """A job killed between scheduling the end and the lift leaves only the timer."""
    lab.run(unit="training.slice", seconds=600)
    os.unlink(lab.host.path(DROPIN))
    result = _registry.purge(lab.kernel, lab.systemd, False)
    assert "cgroup_boost training.slice" in result["steps"] and lab.systemd.transient == {}
    assert result["left"] == []


# ---------------------------------------------------------------------------------------------
# The steps, declared once
# ---------------------------------------------------------------------------------------------

def test_the_timer_runs_the_steps_the_module_runs():
    tools = {"systemd-run": "/usr/bin/systemd-run", "rm": "/usr/bin/rm", "rmdir": "/usr/bin/rmdir",
             "systemctl": "/usr/bin/systemctl"}
    argv = _cgroup_boost.timer_argv("ai-training.slice", 1000, "2026-12-04T02:00:00Z", tools)
    assert argv[:8] == [
        "/usr/bin/systemd-run", "--on-boot=1000ms", "--unit=aiinfra-io-isolation-boost-ai-training",
        "--description=Managed by Ansible (aiinfra.io_isolation): ends the boost window of ai-training.slice at "
        "2026-12-04T02:00:00Z",
        "--timer-property=AccuracySec=1s", "--timer-property=RemainAfterElapse=no", "--collect",
        "--property=Type=oneshot"]
    sandbox = argv[8:8 + len(_cgroup_boost.SANDBOX)]
    assert sandbox[:2] == ["--property=ProtectSystem=strict",
                           "--property=ReadWritePaths=-/run/systemd/system -/run/systemd/system.control"]
    assert all(p.startswith("--property=") and not p.startswith("--property=Exec") for p in sandbox)
    assert argv[8 + len(sandbox):] == [
        "--property=ExecStartPre=/usr/bin/rm -f -- /run/systemd/system/ai-training.slice.d/"
        "60-aiinfra-io-isolation-boost.conf",
        "--property=ExecStartPre=-/usr/bin/rmdir -- /run/systemd/system/ai-training.slice.d",
        "--property=ExecStartPre=/usr/bin/systemctl daemon-reload",
        "--property=ExecStartPost=/usr/bin/rm -f -- /run/systemd/system.control/ai-training.slice.d/"
        "50-IOAccounting.conf",
        "--property=ExecStartPost=-/usr/bin/rmdir -- /run/systemd/system.control/ai-training.slice.d",
        "--property=ExecStartPost=/usr/bin/systemctl daemon-reload",
        "--", "/usr/bin/systemctl", "set-property", "--runtime", "--", "ai-training.slice", "IOAccounting=yes"]
    assert _cgroup_boost.unit_base("a.b-c.slice") == "aiinfra-io-isolation-boost-a_b-c"


def test_a_transient_timer_is_ours_only_with_the_stamp_in_its_description():
    header = "# This is a transient unit file, created programmatically via the systemd API. Do not edit.\n"
    assert is_managed(header + "[Unit]\nDescription=Managed by Ansible (aiinfra.io_isolation): ends the boost\n")
    assert not is_managed(header + "[Unit]\nDescription=someone else's timer\n")
