# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""placement through AnsibleModule, and as host_profile's placement section, on the cgroup module's fake host
(SimCgroup + SimSystemd): the Slice= drop-ins, one daemon-reload, a running unit moved only with restart (else
reported in restart_required), every bad input refused with nothing written, purge without a restart."""

import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import placement as _placement
from ansible_collections.aiinfra.io_isolation.plugins.modules import cgroup, host_profile, placement, purge
from sim.lab import CG, CgroupLab

STAMP = "# Managed by Ansible (aiinfra.io_isolation): aiinfra.io_isolation.placement. Local edits will be overwritten.\n"
INVALID = "Invalid request (nothing was changed): "


def dropin(unit):
    return "/etc/systemd/system/%s.d/90-aiinfra-io-isolation-slice.conf" % unit


def body(slice_name):
    return STAMP + "[Service]\nSlice=%s\n" % slice_name


class Lab(CgroupLab):
    """CgroupLab's units (vllm.service and busy.service running, batch.service stopped) and a few more: sshd and
    systemd-journald (host-critical), a masked unit, a timer, a trainer template's running instance, an alias."""

    def __init__(self, tmp_path, version=252, **kw):
        super(Lab, self).__init__(tmp_path, version=version, **kw)
        sd = self.systemd
        sd.add_unit("ssh.service", active=True, fragment="/usr/lib/systemd/system/ssh.service")
        sd.add_unit("sshd.service", alias_of="ssh.service")
        sd.add_unit("systemd-journald.service", active=True, fragment="/usr/lib/systemd/system/systemd-journald.service",
                    file_state="static")
        sd.add_unit("legacy.service", load_state="masked", fragment="/dev/null", file_state="masked")
        sd.add_unit("fstrim.timer", fragment="/usr/lib/systemd/system/fstrim.timer")
        sd.add_unit("trainer@.service", fragment="/usr/lib/systemd/system/trainer@.service", load_state="not-found")
        sd.add_unit("trainer@1.service", active=True, fragment="/usr/lib/systemd/system/trainer@.service",
                    slice="system-trainer.slice", file_state="")

    def wire(self, monkeypatch, run_module):
        self.wire_modules(monkeypatch, cgroup, placement, host_profile, purge)
        self._run_module = run_module
        self.reset()
        return self

    def place(self, **args):
        self.reset()
        return self._run_module(placement.main, **args)

    def profile(self, **args):
        self.reset()
        return self._run_module(host_profile.main, **args)

    def cgroup_of(self, unit):
        return self.systemd.run(["systemctl", "show", "-p", "ControlGroup", "--value", "--", unit])[1].strip()

    def slice_of(self, unit):
        return self.systemd.run(["systemctl", "show", "-p", "Slice", "--value", "--", unit])[1].strip()

    def restarts(self):
        return [c[-1] for c in self.systemd.calls if c[1] == "restart"]


@pytest.fixture(params=[252, 257], ids=["systemd252", "systemd257"])
def lab(request, tmp_path, monkeypatch, run_module):
    return Lab(tmp_path, version=request.param).wire(monkeypatch, run_module)


@pytest.fixture
def lab252(tmp_path, monkeypatch, run_module):
    return Lab(tmp_path).wire(monkeypatch, run_module)


UNITS = [{"name": "vllm.service", "slice": "inference.slice"}, {"pattern": "b*.service", "slice": "training.slice"}]


def test_check_mode_then_apply_reports_restart_required_and_a_second_run_changes_nothing(lab):
    check = lab.place(units=UNITS, _ansible_check_mode=True)
    assert not check.get("failed"), check
    assert check["changed"] and check["restart_required"] == ["vllm.service", "busy.service"]
    assert check["diff"]["after"][dropin("vllm.service")] == body("inference.slice")
    assert check["diff"]["after"]["vllm.service"] == {"slice": "inference.slice", "cgroup": "/system.slice/vllm.service"}
    lab.assert_nothing_changed()
    assert lab.config_files() == []

    result = lab.place(units=UNITS)
    assert not result.get("failed"), result
    assert result["changed"] and result["restart_required"] == ["vllm.service", "busy.service"]
    assert result["restarted"] == [] and lab.restarts() == []
    assert lab.read(dropin("vllm.service")) == body("inference.slice")
    assert lab.read(dropin("batch.service")) == body("training.slice")
    assert lab.read(dropin("busy.service")) == body("training.slice")
    assert [c[1] for c in lab.mutating_calls()] == ["daemon-reload"], "one reload for every drop-in"
    # systemd loaded the slice; the running units stay where they run until they start again
    assert lab.slice_of("vllm.service") == "inference.slice" and lab.cgroup_of("vllm.service") == "/system.slice/vllm.service"
    assert result["units"]["batch.service"] == {
        "slice": "training.slice", "state": "present", "dropin": dropin("batch.service"), "matched_by": "b*.service",
        "label": "units[1]",
        "cgroup": None, "loaded_slice": "training.slice"}
    assert any("vllm.service runs in /system.slice/vllm.service, outside inference.slice, until it is restarted"
               in w and "io_isolation_restart_ok" in w for w in lab.warnings)

    again = lab.place(units=UNITS)
    assert not again.get("failed") and again["changed"] is False, again
    assert again["restart_required"] == ["vllm.service", "busy.service"], "still outside until restarted"
    lab.assert_nothing_changed()


def test_restart_moves_the_running_units_and_then_nothing_changes(lab):
    lab.place(units=UNITS)
    check = lab.place(units=UNITS, restart=True, _ansible_check_mode=True)
    assert check["changed"] and check["restarted"] == ["vllm.service", "busy.service"] and check["restart_required"] == []
    lab.assert_nothing_changed()

    result = lab.place(units=UNITS, restart=True)
    assert not result.get("failed"), result
    assert result["changed"] and result["restarted"] == ["vllm.service", "busy.service"]
    assert result["restart_required"] == [] and lab.restarts() == ["vllm.service", "busy.service"]
    assert lab.cgroup_of("vllm.service") == "/inference.slice/vllm.service"
    assert lab.cgroup_of("busy.service") == "/training.slice/busy.service"
    assert result["units"]["vllm.service"]["cgroup"] == "/inference.slice/vllm.service"
    assert lab.systemd.unit("batch.service")["active"] is False, "a stopped unit is not started"

    again = lab.place(units=UNITS, restart=True)
    assert again["changed"] is False and again["restarted"] == [] and again["restart_required"] == []
    lab.assert_nothing_changed()


def test_first_run_with_restart_writes_reloads_then_restarts(lab252):
    result = lab252.place(units=[{"name": "trainer@1.service", "slice": "training.slice"}], restart=True)
    assert not result.get("failed"), result
    assert [c[1:] for c in lab252.mutating_calls()] == [["daemon-reload"], ["restart", "--", "trainer@1.service"]]
    assert lab252.cgroup_of("trainer@1.service") == "/training.slice/trainer@1.service"


def test_absent_takes_units_out_and_restart_moves_them_back(lab252):
    lab252.place(units=UNITS, restart=True)
    result = lab252.place(units=[{"name": "vllm.service"}, {"pattern": "bu*.service"}], state="absent")
    assert not result.get("failed"), result
    assert result["changed"] and lab252.read(dropin("vllm.service")) is None
    assert lab252.read(dropin("busy.service")) is None and lab252.read(dropin("batch.service")) == body("training.slice")
    assert not os.path.isdir(lab252.host.path("/etc/systemd/system/vllm.service.d")), "the emptied directory goes too"
    assert result["units"]["vllm.service"]["state"] == "absent"
    assert result["units"]["vllm.service"]["slice"] == "system.slice"
    assert result["restart_required"] == ["vllm.service", "busy.service"] and lab252.restarts() == []

    moved = lab252.place(units=[{"name": "vllm.service"}, {"name": "busy.service"}], state="absent", restart=True)
    assert moved["changed"] and moved["restarted"] == ["vllm.service", "busy.service"]
    assert lab252.cgroup_of("vllm.service") == "/system.slice/vllm.service"
    again = lab252.place(units=[{"name": "vllm.service"}, {"pattern": "bu*.service"}], state="absent", restart=True)
    assert again["changed"] is False and list(again["units"]) == ["vllm.service"]
    assert lab252.restarts() == [] and again["restart_required"] == []
    assert lab252.place(units=[{"name": "nope.service"}], state="absent")["units"] == {}, "a unit that is gone: nothing"


def test_exclusive_takes_out_the_units_no_longer_listed(lab252):
    lab252.place(units=UNITS)
    result = lab252.place(units=[{"name": "vllm.service", "slice": "inference.slice"}], exclusive=True)
    assert not result.get("failed"), result
    assert lab252.read(dropin("vllm.service")) == body("inference.slice")
    assert lab252.read(dropin("batch.service")) is None and lab252.read(dropin("busy.service")) is None
    assert result["units"]["busy.service"]["state"] == "absent" and result["units"]["busy.service"]["matched_by"] == "exclusive"


def test_an_alias_is_placed_under_the_units_own_name_and_critical_units_with_allow_critical(lab252):
    result = lab252.place(units=[{"name": "sshd.service", "slice": "inference.slice", "allow_critical": True},
                                 {"name": "systemd-journald.service", "slice": "inference.slice",
                                  "allow_critical": True}])
    assert not result.get("failed"), result
    assert list(result["units"]) == ["ssh.service", "systemd-journald.service"]
    assert lab252.read(dropin("ssh.service")) == body("inference.slice") and lab252.read(dropin("sshd.service")) is None


def test_a_pattern_that_matches_nothing_is_a_warning(lab252):
    result = lab252.place(units=[{"pattern": "nothing-*.service", "slice": "training.slice"},
                                 {"name": "vllm.service", "slice": "inference.slice"}])
    assert not result.get("failed") and result["unmatched"] == ["nothing-*.service"]
    assert "units[0]: pattern 'nothing-*.service' matches no service on this host: nothing placed for it" \
        in lab252.warnings


def test_patterns_match_loaded_and_installed_services_but_no_template_alias_or_masked_unit(lab252):
    result = lab252.place(units=[{"pattern": "*.service", "slice": "inference.slice", "allow_critical": True}],
                          _ansible_check_mode=True)
    assert not result.get("failed"), result
    assert sorted(result["units"]) == ["batch.service", "busy.service", "gone.service", "plain.service",
                                       "runtime.service", "ssh.service", "systemd-journald.service",
                                       "trainer@1.service", "vllm.service"]


def test_a_systemd_without_json_tables_is_read_from_its_plain_table(lab252):
    lab252.systemd.json_tables = False
    result = lab252.place(units=[{"pattern": "b*.service", "slice": "training.slice"}], _ansible_check_mode=True)
    assert not result.get("failed"), result
    assert list(result["units"]) == ["batch.service", "busy.service"]


BAD = {
    "a unit systemd does not know": (
        [{"name": "nope.service", "slice": "inference.slice"}],
        "units[0]: nope.service is not a unit on this host (systemd: LoadState=not-found)"),
    "a name without its type": ([{"name": "vllm", "slice": "inference.slice"}],
                                "'vllm' has no unit type: give the full name (vllm.service)"),
    "a timer": ([{"name": "fstrim.timer", "slice": "training.slice"}],
                "fstrim.timer is a timer unit, which runs no processes of its own: Slice= means nothing there"),
    "a socket": ([{"name": "x.socket", "slice": "training.slice"}],
                 "x.socket is a socket unit: this module places services only"),
    "a template": ([{"name": "trainer@.service", "slice": "training.slice"}],
                   "trainer@.service is a template: name an instance (trainer@NAME.service) or give a pattern "
                   "(trainer@*.service)"),
    "a masked unit": ([{"name": "legacy.service", "slice": "training.slice"}], "legacy.service is masked"),
    "a name with a shell character": ([{"name": "vllm.service;reboot", "slice": "inference.slice"}],
                                      "has characters systemd does not allow"),
    "a pattern over host-critical units for training": (
        [{"label": "training units", "pattern": "s*.service", "slice": "training.slice"}],
        "training units: ssh.service (matched by 's*.service') is host-critical (remote access): it must not run "
        "under a throttled tenant's caps (io.max, memory.high), where it could stall the host. Remove it or narrow "
        "the pattern"),
    "a host-critical unit by name": ([{"name": "sshd.service", "slice": "training.slice"}],
                                     "sshd.service is host-critical (remote access)"),
    "systemd's own": ([{"name": "systemd-journald.service", "slice": "training.slice"}],
                      "systemd-journald.service is host-critical (one of systemd's own services"),
    "no slice": ([{"name": "vllm.service"}], "units[0]: vllm.service: no slice: give the slice to place it in"),
    "not a slice": ([{"name": "vllm.service", "slice": "inference"}], "'inference' is not a slice name"),
    "the root slice": ([{"name": "vllm.service", "slice": "-.slice"}], "-.slice is the root slice"),
    "a bad slice name": ([{"name": "vllm.service", "slice": "a--b.slice"}], "slice name 'a--b.slice' is invalid"),
    "a pattern that is no service pattern": ([{"pattern": "*.timer", "slice": "training.slice"}],
                                             "pattern '*.timer' must end in .service"),
    "one unit in two slices": (
        [{"label": "inference units", "name": "vllm.service", "slice": "inference.slice"},
         {"label": "training units", "pattern": "v*.service", "slice": "training.slice"}],
        "training units: vllm.service (matched by 'v*.service') is also placed in inference.slice by inference "
        "units; a unit runs in one slice: list it once"),
    "name and pattern": ([{"name": "vllm.service", "pattern": "v*", "slice": "inference.slice"}],
                         "mutually exclusive: name|pattern"),
}


@pytest.mark.parametrize("units, words", BAD.values(), ids=list(BAD))
def test_bad_input_is_refused_with_a_clear_error_and_nothing_written(lab252, units, words):
    result = lab252.place(units=units + [{"name": "vllm.service", "slice": "inference.slice"}]
                          if "vllm" not in str(units) else units)
    assert result.get("failed") and words in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"]
    if "mutually exclusive" not in words:
        assert result["msg"].startswith(INVALID)
    lab252.assert_nothing_changed()
    assert lab252.config_files() == []


def test_every_bad_entry_is_listed_at_once(lab252):
    result = lab252.place(units=[{"name": "vllm", "slice": "inference.slice"}, {"name": "x.timer", "slice": "a.slice"},
                                 {"name": "vllm.service"}])
    assert result["failed"] and len(result["errors"]) == 3, result["errors"]


def test_a_later_dropin_that_sets_the_slice_is_refused(lab252):
    lab252.host.write("/etc/systemd/system/vllm.service.d/override.conf", "[Service]\nSlice=other.slice\n")
    lab252.systemd.run(["systemctl", "daemon-reload"])
    result = lab252.place(units=[{"name": "vllm.service", "slice": "inference.slice"}])
    assert result["failed"] and ("/etc/systemd/system/vllm.service.d/override.conf sets Slice=other.slice for "
                                 "vllm.service and systemd reads it after this module's drop-in") in result["msg"]
    lab252.assert_nothing_changed()
    # one read before it is no problem: ours wins
    lab252.host.remove("/etc/systemd/system/vllm.service.d/override.conf")
    lab252.host.write("/etc/systemd/system/vllm.service.d/10-vendor.conf", "[Service]\nSlice=other.slice\n")
    assert not lab252.place(units=[{"name": "vllm.service", "slice": "inference.slice"}]).get("failed")
    assert lab252.slice_of("vllm.service") == "inference.slice"


def test_a_foreign_file_at_the_path_is_refused_unless_adopted(lab252):
    lab252.host.write(dropin("vllm.service"), "[Service]\nSlice=mine.slice\n")
    result = lab252.place(units=[{"name": "vllm.service", "slice": "inference.slice"}])
    assert result["failed"] and "exists and is not managed by aiinfra.io_isolation" in result["msg"]
    assert lab252.read(dropin("vllm.service")) == "[Service]\nSlice=mine.slice\n"
    adopted = lab252.place(units=[{"name": "vllm.service", "slice": "inference.slice"}], adopt=True)
    assert not adopted.get("failed") and lab252.read(dropin("vllm.service")) == body("inference.slice")


def test_a_failed_restart_restores_the_dropins(lab252):
    lab252.systemd.fail("restart", rc=1, err="Job for busy.service canceled.", when=lambda argv: "busy.service" in argv)
    result = lab252.place(units=UNITS, restart=True)
    assert result["failed"] and "Command systemctl restart -- busy.service failed" in result["msg"], result["msg"]
    assert lab252.config_files() == [], "every drop-in written by the call is gone again"
    assert lab252.slice_of("vllm.service") == "system.slice", "and systemd reloaded them"
    # vllm.service was restarted before the failure: that cannot be undone, it runs in inference.slice now
    assert lab252.cgroup_of("vllm.service") == "/inference.slice/vllm.service"


def test_systemctl_failing_before_any_change_writes_nothing(lab252):
    lab252.systemd.fail("list-units", rc=1, err="Failed to connect to bus")
    result = lab252.place(units=UNITS)
    assert result["failed"] and "Failed to connect to bus" in result["msg"]
    lab252.assert_nothing_changed()


# -- the host tier's entries: optional, at_next_start ------------------------------------------------------------------
HOST_TIER = [{"label": "host tier units", "name": n, "slice": "hostcritical.slice", "allow_critical": True,
              "optional": True, "at_next_start": True}
             for n in ("ssh.service", "systemd-journald.service", "docker.service", "vllm.service")]


def test_optional_entries_skip_missing_units_yield_to_other_entries_and_are_never_restarted(lab252):
    units = HOST_TIER + [{"label": "inference units", "name": "vllm.service", "slice": "inference.slice"}]
    result = lab252.place(units=units, restart=True)
    assert not result.get("failed"), result
    assert result["unmatched"] == ["docker.service"], "not on this host: skipped, not refused"
    assert result["units"]["vllm.service"]["slice"] == "inference.slice", "the tenant's entry wins"
    assert result["units"]["ssh.service"]["label"] == "host tier units"
    assert lab252.read(dropin("ssh.service")) == body("hostcritical.slice")
    assert lab252.read(dropin("systemd-journald.service")) == body("hostcritical.slice")
    assert lab252.read(dropin("docker.service")) is None
    # restart asked for the call: the tenant's unit moves, the host tier's never
    assert lab252.restarts() == ["vllm.service"] and result["restarted"] == ["vllm.service"]
    assert result["next_start"] == ["ssh.service", "systemd-journald.service"] and result["restart_required"] == []
    assert lab252.cgroup_of("ssh.service") == "/system.slice/ssh.service"
    assert any("ssh.service runs in /system.slice/ssh.service, outside hostcritical.slice, until its next start" in w
               for w in lab252.warnings)
    again = lab252.place(units=units, restart=True)
    assert again["changed"] is False and again["next_start"] == ["ssh.service", "systemd-journald.service"]
    lab252.assert_nothing_changed()


def test_a_unit_waiting_for_its_next_start_gets_its_settings_in_systemds_view(lab):
    """The colocated scenario's failure: ssh.service placed in the host tier (moves at its next start) and weighted in
    the same run. systemd applies nothing to a unit running outside the slice its files give it (lab, 252 and 257:
    its running slice may even lose the io and cpu controllers), so the run compares systemd's view of the unit and
    leaves the kernel files to its next start, instead of failing on a read-back of the old cgroup."""
    tier = {"label": "host tier slice", "name": "hostcritical.slice", "create": True, "io": {"weight": 500}}
    ssh = {"label": "runtime ssh.service", "name": "ssh.service", "when_missing": "skip", "io": {"weight": 25},
           "cpu": {"weight": 50}}
    # as on the lab guests, no unit left in system.slice asks for io or cpu once these are given another slice
    units = {"units": [dict(HOST_TIER[0], name=n) for n in ("ssh.service", "runtime.service", "busy.service")]}
    result = lab.profile(cgroups=[tier, ssh], placement=units)
    assert not result.get("failed"), result
    assert sorted(result["sections"]["placement"]["next_start"]) == ["busy.service", "runtime.service", "ssh.service"]
    assert "io" not in lab.read(CG + "/system.slice/cgroup.subtree_control")
    assert lab.cgroup_of("ssh.service") == "/system.slice/ssh.service"
    assert lab.systemd.run(["systemctl", "show", "-p", "IOWeight", "--value", "--", "ssh.service"])[1].strip() == "25"
    again = lab.profile(cgroups=[tier, ssh], placement=units)
    assert again["changed"] is False, again
    lab.systemd.run(["systemctl", "restart", "--", "ssh.service"])
    assert lab.cgroup_of("ssh.service") == "/hostcritical.slice/ssh.service"
    assert lab.read(CG + "/hostcritical.slice/ssh.service/io.weight").startswith("default 25")
    assert lab.profile(cgroups=[tier, ssh], placement=units)["changed"] is False


def test_an_optional_entry_still_refuses_a_name_that_is_no_service(lab252):
    result = lab252.place(units=[dict(HOST_TIER[0], name="sshd")])
    assert result["failed"] and "host tier units: 'sshd' has no unit type: give the full name (sshd.service)" \
        in result["msg"]
    lab252.assert_nothing_changed()
    assert lab252.config_files() == []


# -- host_profile's placement section ------------------------------------------------------------------------------
INFERENCE = {"label": "inference slice", "name": "inference.slice", "create": True, "io": {"weight": 1000}}
TRAINING = {"label": "training slice", "name": "training.slice", "create": True, "io": {"weight": 100}}
PLACEMENT = {"units": [{"label": "inference units", "name": "vllm.service", "slice": "inference.slice"},
                       {"label": "training units", "pattern": "b*.service", "slice": "training.slice"}],
             "exclusive": True}


def test_the_profile_places_units_after_creating_the_slices(lab):
    result = lab.profile(cgroups=[INFERENCE, TRAINING], placement=dict(PLACEMENT, restart=True))
    assert not result.get("failed"), result
    section = result["sections"]["placement"]
    assert section["restarted"] == ["vllm.service", "busy.service"] and section["restart_required"] == []
    assert lab.cgroup_of("vllm.service") == "/inference.slice/vllm.service"
    assert lab.read("/etc/systemd/system/inference.slice") is not None
    assert "placement: vllm.service" in result["diff"]["after"]
    calls = [c[1] for c in lab.mutating_calls()]
    assert calls.index("restart") > calls.index("start"), "the slices are started before units move into them"
    again = lab.profile(cgroups=[INFERENCE, TRAINING], placement=dict(PLACEMENT, restart=True))
    assert again["changed"] is False and again["sections"]["placement"]["restarted"] == []


def test_a_refused_placement_refuses_the_whole_profile(lab252):
    bad = {"units": [{"label": "training units", "pattern": "ssh*.service", "slice": "training.slice"}]}
    result = lab252.profile(cgroups=[INFERENCE, TRAINING], placement=bad)
    assert result["failed"] and result["msg"].startswith(INVALID + "placement: training units: ssh.service")
    lab252.assert_nothing_changed()
    assert lab252.config_files() == []
    spec = lab252.profile(placement={"units": [{"name": "vllm.service", "slice": "inference.slice", "x": 1}]})
    assert spec["failed"] and "placement: " in spec["msg"] and "x" in spec["msg"]


def test_a_profile_without_the_section_asks_nothing_of_the_units(lab252):
    result = lab252.profile(cgroups=[INFERENCE])
    assert not result.get("failed") and "placement" not in result["sections"]
    assert not any(c[1] in ("list-units", "list-unit-files", "restart") for c in lab252.systemd.calls)


# -- purge ----------------------------------------------------------------------------------------------------------
def test_purge_removes_the_dropins_with_a_reload_and_no_restart(tmp_path, monkeypatch, run_module):
    lab252 = Lab(tmp_path, iocost=()).wire(monkeypatch, run_module)
    lab252.place(units=UNITS, restart=True)
    assert len(lab252.config_files()) == 3
    check = lab252._run_module(purge.main, _ansible_check_mode=True)
    assert check["changed"] and set(check["steps"]) == {"placement"} and len(lab252.config_files()) == 3
    lab252.reset()
    result = lab252._run_module(purge.main)
    assert not result.get("failed"), result
    assert result["left"] == [] and lab252.config_files() == []
    assert [c[1] for c in lab252.mutating_calls()] == ["daemon-reload"], "no restart"
    assert result["steps"]["placement"]["restart_required"] == ["busy.service", "vllm.service"]
    assert lab252.cgroup_of("vllm.service") == "/inference.slice/vllm.service", "runs on until its next start"
    assert lab252.slice_of("vllm.service") == "system.slice"


def test_units_are_found_from_the_registrys_files():
    owned = [("placement", dropin("vllm.service")), ("cgroup", "/etc/systemd/system/vllm.service.d/50-aiinfra-io-isolation.conf"),
             ("placement", dropin("trainer@1.service"))]
    assert _placement.units(owned) == ["vllm.service", "trainer@1.service"]


def test_default_slice_and_expected_cgroup():
    assert _placement.default_slice("vllm.service") == "system.slice"
    assert _placement.default_slice("serial-getty@ttyS0.service") == "system-serial\\x2dgetty.slice"
    assert _placement.expected_cgroup("vllm.service", "ai-inference.slice") == "/ai.slice/ai-inference.slice/vllm.service"
    assert _placement.expected_cgroup("t@1.service", "system-t.slice") == "/system.slice/system-t.slice/t@1.service"
    assert _placement.critical("getty@tty1.service") == "console logins" and _placement.critical("vllm.service") is None


def test_the_own_slice_is_the_last_slice_line_of_the_units_files_but_ours(tmp_path):
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
    fs = KernelFS(str(tmp_path))
    fs.atomic_write("/usr/lib/systemd/system/x.service", "[Service]\nSlice=vendor.slice\nExecStart=/bin/true\n")
    fs.atomic_write("/etc/systemd/system/x.service.d/10-a.conf", "[Service]\n# Slice=no.slice\nSlice=a.slice\n")
    fs.atomic_write(dropin("x.service"), body("ours.slice"))
    fs.atomic_write("/etc/systemd/system/x.service.d/zz.conf", "[Service]\nSlice=\n")
    info = {"FragmentPath": "/usr/lib/systemd/system/x.service",
            "DropInPaths": "/etc/systemd/system/x.service.d/10-a.conf %s /etc/systemd/system/x.service.d/zz.conf"
                           % dropin("x.service")}
    assert _placement.loaded_slices(fs, info) == [("/usr/lib/systemd/system/x.service", "vendor.slice"),
                                                  ("/etc/systemd/system/x.service.d/10-a.conf", "a.slice"),
                                                  ("/etc/systemd/system/x.service.d/zz.conf", "")]
    assert _placement.own_slice(fs, "x.service", info) == "system.slice", "an empty Slice= resets it"
    assert _placement.later_slices(fs, info) == [("/etc/systemd/system/x.service.d/zz.conf", "")]
    assert CG == "/sys/fs/cgroup"
