# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The concern registry (_concerns.CONCERNS) that host_profile walks, and docs/architecture.md's worked example:
a new concern is its own file (argument spec, part()) plus one registry entry, and host_profile takes it with
nothing else changed - its section checked by its spec, planned, applied in the one engine run, reported."""

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import registry as _concerns
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, Setting


def test_every_need_is_provided_by_an_earlier_concern():
    given = set()
    for concern in _concerns.CONCERNS:
        assert set(concern.needs) <= given, "%s needs %s before it" % (concern.name, set(concern.needs) - given)
        given.update(concern.provides)
    assert [c.name for c in _concerns.CONCERNS][0] == "iocost", "iocost first: the weights depend on it"


def test_services_and_containers_are_placed_after_the_cgroups_that_make_their_slices():
    names = [c.name for c in _concerns.CONCERNS]
    assert names[-2:] == ["placement", "container_runtime"] and names.index("cgroups") < names.index("placement")


def test_the_profiles_options_are_the_registrys():
    spec = _concerns.PROFILE_SPEC["argument_spec"]
    assert set(spec) == set(c.name for c in _concerns.CONCERNS) | {"pressure", "tenancy"}
    assert all(spec[c.name]["type"] == ("list" if c.many else "dict") for c in _concerns.CONCERNS)


def test_iocosts_part_provides_what_it_declares():
    class QosSetting(Setting):
        codec, device = _iocost.codecs.IO_COST_QOS, "259:0"
    part_settings = [QosSetting("io.cost.qos[nvme0n1]", {"enable": "1", "ctrl": "user"})]
    assert _iocost.planned_qos(part_settings) == {"259:0": {"enable": "1", "ctrl": "user"}}
    assert _iocost.enabled_after(part_settings) == {"259:0": True}


# -- the worked example (docs/architecture.md, "Adding a concern") ------------------------------------------------
class MotdLine(Setting):
    """The toy concern's one setting: a line in a file."""

    def __init__(self, path, line):
        super(MotdLine, self).__init__("motd", line)
        self.path = path

    def read(self, fs):
        return (fs.read(self.path) or "").rstrip("\n") or None

    def write(self, fs, value, current):
        fs.atomic_write(self.path, (value or "") + "\n")

    def validate(self, current):
        return [] if "\n" not in self.desired else ["motd: one line only"]


def motd_part(params, host):
    """Step 1: the concern's own code - settings from the request, errors, its report."""
    setting = MotdLine("/etc/motd", params["line"])
    return Part([setting], [], lambda result, _check: {"changed": result["changed"], "line": params["line"]})


MOTD = _concerns.Concern("motd", {"argument_spec": {"line": {"type": "str", "required": True}}}, motd_part)


def test_a_new_concern_is_one_registry_entry(tmp_path, monkeypatch):
    # Step 2: one entry in the registry; host_profile's options follow from it
    concerns = _concerns.CONCERNS + (MOTD,)
    monkeypatch.setattr(_concerns, "CONCERNS", concerns)
    assert "motd" in _concerns.module_spec(concerns)["argument_spec"]
    fs = KernelFS(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc" / "pressure").mkdir(parents=True)

    check = _concerns.profile({"motd": {"line": "isolated"}, "pressure": []}, fs, None, check_mode=True)
    assert check["changed"] and check["sections"]["motd"] == {"changed": True, "line": "isolated"}
    assert not (tmp_path / "etc" / "motd").exists()

    result = _concerns.profile({"motd": {"line": "isolated"}, "pressure": []}, fs, None, check_mode=False)
    assert result["changed"] and (tmp_path / "etc" / "motd").read_text() == "isolated\n"
    assert result["diff"]["after"] == {"motd: motd": "isolated"}
    again = _concerns.profile({"motd": {"line": "isolated"}, "pressure": []}, fs, None, check_mode=False)
    assert again["changed"] is False

    # its section is checked by its own spec, and named in the refusal, before anything is written
    bad = None
    try:
        _concerns.profile({"motd": {"lines": "x"}, "pressure": []}, fs, None, check_mode=False)
    except _concerns.RequestError as e:
        bad = e.msg
    assert bad and bad.startswith("Invalid request (nothing was changed): motd: ") and "lines" in bad
