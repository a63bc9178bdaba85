# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' planning filters: inference_plan, training_plan (the tenant roles) and baseline_plan (io_baseline).

Each expected dict below is what the roles' nested Jinja (set_fact + combine, before these filters) produced for the
same variables, rendered through ansible-core 2.19's Templar and written here literally: same keys, key order (the
cgroups reach host_profile in that order), values and value types (a string weight stays a string, as it reached
the module).
"""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f

FACTS = {"host": {"memory_stable_bytes": 8589934592}}
# io_isolation_planned_disks: two data disks, one calibrated, one on the kernel's SSD class.
DISKS = [{"device": "nvme.1b36-lab-a", "model": {"rbps": 2000000000, "rseqiops": 100000, "rrandiops": 100000,
                                                 "wbps": 1000000000, "wseqiops": 50000, "wrandiops": 50000}},
         {"device": "lab-nvme-b", "model": {"rbps": 875000000, "rseqiops": 35000, "rrandiops": 35000,
                                            "wbps": 582000000, "wseqiops": 32000, "wrandiops": 32000}}]
GROUPS = ["inference.slice/runtime.service/payload", "inference.slice/runtime.service/batcher"]
# The profile as io_baseline and the training role left it.
AFTER_TRAINING = {"iocost": {"devices": [{"device": "lab-nvme-b", "model": {"ctrl": "auto"}}]},
                  "cgroups": {"training.slice": {"label": "training slice", "name": "training.slice"}},
                  "pressure": ["training.slice"], "training": {"slice": "training.slice"}}

# roles/*/defaults/main.yml
INFERENCE = {"inference_slice": "inference.slice", "inference_io_weight": 1000, "inference_memory_low": "20%",
             "inference_memory_min": 0, "inference_cpu_weight": 1000, "inference_io_latency_us": 0,
             "inference_io_prio_class": "", "inference_io_prio_groups": [], "inference_io_low": {},
             "inference_units": []}
TRAINING = {"training_slice": "training.slice", "training_io_weight": 100, "training_io_max": {},
            "training_memory_high": "60%", "training_cpu_weight": 100, "training_io_prio_class": "",
            "training_units": []}
BASELINE = {"io_baseline_blk_queue": {}, "io_baseline_nvme_queues": {},
            "io_baseline_sysctls": {"vm.swappiness": 10, "vm.dirty_background_bytes": 268435456,
                                    "vm.dirty_bytes": 1073741824}}


def assert_identical(got, want, path="profile"):
    """Equal, with the same value types and the same key order at every level."""
    assert type(got) is type(want), "%s: %s %r, want %s %r" % (path, type(got).__name__, got, type(want).__name__, want)
    if isinstance(want, dict):
        assert list(got) == list(want), "%s: keys %s, want %s" % (path, list(got), list(want))
        for key in want:
            assert_identical(got[key], want[key], "%s.%s" % (path, key))
    elif isinstance(want, list):
        assert len(got) == len(want), "%s: %r, want %r" % (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_identical(g, w, "%s[%d]" % (path, i))
    else:
        assert got == want, "%s: %r, want %r" % (path, got, want)


GIVEN = object()  # disks, facts: the module's DISKS and FACTS unless a test gives its own


def inference(profile=None, disks=GIVEN, facts=GIVEN, **variables):
    return f.inference_plan(profile, dict(INFERENCE, **variables), DISKS if disks is GIVEN else disks,
                            FACTS if facts is GIVEN else facts)


def training(profile=None, disks=GIVEN, facts=GIVEN, **variables):
    return f.training_plan(profile, dict(TRAINING, **variables), DISKS if disks is GIVEN else disks,
                           FACTS if facts is GIVEN else facts)


INFERENCE_CASES = {
    "defaults": ({}, None, {
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000}, "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["inference.slice"],
        "inference": {"slice": "inference.slice", "groups": []}}),
    "io latency, after io_baseline and training": ({"inference_io_latency_us": 500}, AFTER_TRAINING, {
        "iocost": {"devices": [{"device": "lab-nvme-b", "model": {"ctrl": "auto"}}]},
        "cgroups": {"training.slice": {"label": "training slice", "name": "training.slice"},
                    "inference.slice": {
                        "label": "inference slice", "name": "inference.slice", "create": True,
                        "when_unsupported": "warn",
                        "io": {"weight": 1000, "latency": {"nvme.1b36-lab-a": 500, "lab-nvme-b": 500}},
                        "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["training.slice", "inference.slice"],
        "training": {"slice": "training.slice"},
        "inference": {"slice": "inference.slice", "groups": []}}),
    "io latency as text": ({"inference_io_latency_us": "750"}, None, {
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000, "latency": {"nvme.1b36-lab-a": "750", "lab-nvme-b": "750"}},
            "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["inference.slice"],
        "inference": {"slice": "inference.slice", "groups": []}}),
    "prio class without groups: on the slice": ({"inference_io_prio_class": "promote-to-rt"}, None, {
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000, "prio_class": "promote-to-rt"},
            "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["inference.slice"],
        "inference": {"slice": "inference.slice", "groups": []}}),
    "prio class with groups: on the groups": (
        {"inference_io_prio_class": "promote-to-rt", "inference_io_prio_groups": GROUPS}, None, {
            "cgroups": {
                "inference.slice": {
                    "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
                    "io": {"weight": 1000}, "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}},
                "inference.slice/runtime.service/payload": {
                    "manager": "cgroupfs", "when_unsupported": "warn", "io": {"prio_class": "promote-to-rt"},
                    "name": "inference.slice/runtime.service/payload",
                    "label": "inference group inference.slice/runtime.service/payload"},
                "inference.slice/runtime.service/batcher": {
                    "manager": "cgroupfs", "when_unsupported": "warn", "io": {"prio_class": "promote-to-rt"},
                    "name": "inference.slice/runtime.service/batcher",
                    "label": "inference group inference.slice/runtime.service/batcher"}},
            "pressure": ["inference.slice"],
            "inference": {"slice": "inference.slice", "groups": GROUPS}}),
    "prio groups without a class: ignored": ({"inference_io_prio_groups": GROUPS}, None, {
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000}, "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["inference.slice"],
        "inference": {"slice": "inference.slice", "groups": []}}),
    "io_low": ({"inference_io_low": {"rbps": "100M", "riops": 1000}}, None, {
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000, "low": {"nvme.1b36-lab-a": {"rbps": "100M", "riops": 1000},
                                           "lab-nvme-b": {"rbps": "100M", "riops": 1000}}},
            "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "pressure": ["inference.slice"],
        "inference": {"slice": "inference.slice", "groups": []}}),
    "memory as a size and a share, weights as text": (
        {"inference_memory_low": "8G", "inference_memory_min": "5%", "inference_io_weight": "500",
         "inference_cpu_weight": "200"}, None, {
            "cgroups": {"inference.slice": {
                "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
                "io": {"weight": "500"}, "memory": {"low": "8G", "min": 429496729}, "cpu": {"weight": "200"}}},
            "pressure": ["inference.slice"],
            "inference": {"slice": "inference.slice", "groups": []}}),
    # Jinja's unique compared case-insensitively: a pressure entry differing only in case keeps its place alone.
    "pressure deduplicated as Jinja's unique did": ({}, {"pressure": ["Inference.slice"]}, {
        "pressure": ["Inference.slice"],
        "cgroups": {"inference.slice": {
            "label": "inference slice", "name": "inference.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 1000}, "memory": {"low": 1717986918, "min": 0}, "cpu": {"weight": 1000}}},
        "inference": {"slice": "inference.slice", "groups": []}}),
}


@pytest.mark.parametrize("variables, profile, want", INFERENCE_CASES.values(), ids=list(INFERENCE_CASES))
def test_inference_plan_is_what_the_jinja_planned(variables, profile, want):
    assert_identical(inference(profile, **variables), want)


def test_inference_plan_leaves_the_profile_it_was_given_alone():
    before = {"pressure": ["training.slice"], "cgroups": {"training.slice": {"name": "training.slice"}}}
    inference(before, inference_io_latency_us=500)
    assert before == {"pressure": ["training.slice"], "cgroups": {"training.slice": {"name": "training.slice"}}}


def test_inference_plan_replaces_its_own_entries_on_a_second_run():
    first = inference(inference_io_prio_class="idle", inference_io_prio_groups=GROUPS)
    second = inference(first, inference_io_weight=800)
    assert list(second["cgroups"]) == ["inference.slice"] + GROUPS
    assert second["cgroups"]["inference.slice"]["io"] == {"weight": 800}
    assert second["pressure"] == ["inference.slice"]


TRAINING_CASES = {
    "defaults": ({}, None, {
        "cgroups": {"training.slice": {
            "label": "training slice", "name": "training.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 100}, "memory": {"high": 5153960755}, "cpu": {"weight": 100}}},
        "training": {"slice": "training.slice"}}),
    "io_max absolute": ({"training_io_max": {"rbps": 1000000, "wbps": "1G"}}, None, {
        "cgroups": {"training.slice": {
            "label": "training slice", "name": "training.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 100, "max": {"nvme.1b36-lab-a": {"rbps": 1000000, "wbps": "1G"},
                                          "lab-nvme-b": {"rbps": 1000000, "wbps": "1G"}}},
            "memory": {"high": 5153960755}, "cpu": {"weight": 100}}},
        "training": {"slice": "training.slice"}}),
    "io_max a share of each disk's model": ({"training_io_max": {"wbps": "90%", "riops": "10%", "wiops": 5000}}, None, {
        "cgroups": {"training.slice": {
            "label": "training slice", "name": "training.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 100,
                   "max": {"nvme.1b36-lab-a": {"wbps": 900000000, "riops": 10000, "wiops": 5000},
                           "lab-nvme-b": {"wbps": 523800000, "riops": 3500, "wiops": 5000}}},
            "memory": {"high": 5153960755}, "cpu": {"weight": 100}}},
        "training": {"slice": "training.slice"}}),
    "prio class, memory.high max": ({"training_io_prio_class": "idle", "training_memory_high": "max"}, None, {
        "cgroups": {"training.slice": {
            "label": "training slice", "name": "training.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 100, "prio_class": "idle"}, "memory": {"high": "max"}, "cpu": {"weight": 100}}},
        "training": {"slice": "training.slice"}}),
    "another slice, memory.high a share": ({"training_memory_high": "50%", "training_slice": "batch.slice"}, None, {
        "cgroups": {"batch.slice": {
            "label": "training slice", "name": "batch.slice", "create": True, "when_unsupported": "warn",
            "io": {"weight": 100}, "memory": {"high": 4294967296}, "cpu": {"weight": 100}}},
        "training": {"slice": "batch.slice"}}),
}


@pytest.mark.parametrize("variables, profile, want", TRAINING_CASES.values(), ids=list(TRAINING_CASES))
def test_training_plan_is_what_the_jinja_planned(variables, profile, want):
    assert_identical(training(profile, **variables), want)


def test_training_after_inference_keeps_the_inference_plan():
    got = training(inference())
    assert list(got) == ["cgroups", "pressure", "inference", "training"]
    assert list(got["cgroups"]) == ["inference.slice", "training.slice"]
    assert got["pressure"] == ["inference.slice"]


PLAN = {"devices": [{"device": "nvme.1b36-lab-a", "model": {"rbps": 2000000000}, "qos": {"rpct": 95, "max": 100}},
                    {"device": "lab-nvme-b", "model": {"ctrl": "auto"}}],
        "disks": DISKS, "sources": {}, "qos_sources": {}, "warnings": [], "uncalibrated": []}


# -- the tenants' units: the placement section ----------------------------------------------------------------------
INFERENCE_UNITS = {"label": "inference units", "name": "vllm.service", "slice": "inference.slice", "allow_critical": True}
TRAINING_UNITS = {"label": "training units", "pattern": "trainer@*.service", "slice": "training.slice"}


def test_no_units_no_placement_section():
    assert "placement" not in training(inference())
    assert "placement" not in inference({"placement": {"units": [INFERENCE_UNITS], "exclusive": True}}), \
        "the role's own entries go, and with them the section"


def test_units_are_placement_entries_of_both_tenants():
    got = training(inference(inference_units=["vllm.service"]), training_units=[" trainer@*.service"])
    assert list(got) == ["cgroups", "pressure", "inference", "placement", "training"]
    assert_identical(got["placement"], {"units": [INFERENCE_UNITS, TRAINING_UNITS], "exclusive": True})
    # planning a role again replaces its own entries, keeps the other role's
    again = inference(got, inference_units=["vllm-*.service", "embed.service"], inference_slice="ai-inference.slice")
    assert_identical(again["placement"]["units"], [
        TRAINING_UNITS,
        {"label": "inference units", "pattern": "vllm-*.service", "slice": "ai-inference.slice", "allow_critical": True},
        {"label": "inference units", "name": "embed.service", "slice": "ai-inference.slice", "allow_critical": True}])
    assert_identical(inference(again)["placement"], {"units": [TRAINING_UNITS], "exclusive": True})


@pytest.mark.parametrize("call, words", [
    (lambda: inference(inference_units="vllm.service"),
     r"inference_units is 'vllm\.service' \(str\): give a list of service names or patterns"),
    (lambda: training(training_units=["ok.service", "", 3]),
     r"training_units has '', 3: give a list of service names or patterns \(vllm\.service, vllm-\*\.service\)"),
    (lambda: f.training_plan(None, dict((k, v) for k, v in TRAINING.items() if k != "training_units"), DISKS, FACTS),
     r"training_plan: the role's variables lack training_units"),
])
def test_bad_units_name_the_variable(call, words):
    with pytest.raises(AnsibleFilterError, match=words):
        call()


def test_baseline_plan_defaults():
    assert_identical(f.baseline_plan(None, PLAN, BASELINE), {
        "iocost": {"devices": PLAN["devices"]},
        "sysctl": {"sysctls": {"vm.swappiness": 10, "vm.dirty_background_bytes": 268435456,
                               "vm.dirty_bytes": 1073741824}}})


def test_baseline_plan_every_section_over_an_earlier_profile():
    earlier = {"cgroups": {"training.slice": {"name": "training.slice"}}, "iocost": {"devices": []}}
    variables = {"io_baseline_blk_queue": {"scheduler": "none", "read_ahead_kb": 128},
                 "io_baseline_sysctls": {"vm.swappiness": 10}, "io_baseline_nvme_queues": {"poll_queues": 1}}
    assert_identical(f.baseline_plan(earlier, PLAN, variables), {
        "cgroups": {"training.slice": {"name": "training.slice"}},
        "iocost": {"devices": PLAN["devices"]},
        "blk_queue": {"devices": [{"scheduler": "none", "read_ahead_kb": 128, "device": "nvme.1b36-lab-a"},
                                  {"scheduler": "none", "read_ahead_kb": 128, "device": "lab-nvme-b"}]},
        "sysctl": {"sysctls": {"vm.swappiness": 10}},
        "nvme_queues": {"poll_queues": 1}})


def test_baseline_plan_keeps_sections_it_is_not_asked_for():
    earlier = {"blk_queue": {"devices": []}, "sysctl": {"sysctls": {"vm.swappiness": 1}}, "nvme_queues": {"x": 1}}
    got = f.baseline_plan(earlier, PLAN, {"io_baseline_blk_queue": {}, "io_baseline_sysctls": {},
                                          "io_baseline_nvme_queues": {}})
    assert_identical(got, dict(earlier, iocost={"devices": PLAN["devices"]}))


# Input the Jinja failed on with a bare Python or undefined-variable message, or took silently: each error names
# the variable and says what to give.
@pytest.mark.parametrize("call, words", [
    (lambda: inference(facts={}), r"have no host\.memory_stable_bytes: run aiinfra\.io_isolation\.io_baseline"),
    (lambda: inference(disks=None, inference_io_latency_us=500),
     r"inference_io_latency_us is per data disk, and io_isolation_planned_disks is not set: run "
     r"aiinfra\.io_isolation\.io_baseline"),
    (lambda: inference(disks=None, inference_io_low={"rbps": 1}), r"inference_io_low is per data disk"),
    (lambda: inference(inference_io_latency_us="500us"),
     r"inference_io_latency_us is '500us': give the io\.latency target in microseconds, or 0 for none"),
    (lambda: inference(inference_io_prio_class=None),
     r"inference_io_prio_class is None \(NoneType\): give an io\.prio\.class policy name, or '' for none"),
    (lambda: inference(inference_io_prio_class="idle", inference_io_prio_groups="a.slice/b"),
     r"inference_io_prio_groups is 'a\.slice/b' \(str\): give a list of cgroup paths"),
    (lambda: inference(inference_io_low=["rbps"]), r"inference_io_low is \['rbps'\] \(list\): give \{rbps"),
    (lambda: inference(inference_memory_low="120%"), r"inference_memory_low: 120% is not a share of RAM"),
    (lambda: training(training_io_max=["wbps"]), r"training_io_max is \['wbps'\] \(list\): give \{rbps, wbps"),
    (lambda: training(training_io_max={"xbps": 1}), r"training_io_max: io\.max cap 'xbps': use rbps, wbps"),
    (lambda: training(disks=None, training_io_max={"wbps": "90%"}), r"training_io_max is per data disk"),
    (lambda: training(disks=[{"device": "x", "model": {}}], training_io_max={"wbps": "90%"}),
     r"training_io_max: io\.max cap wbps=90% for x: the disk has no iocost model"),
    (lambda: training(facts={"host": {"memory_stable_bytes": None}}),
     r"training_memory_high: 60% of RAM: the host's memory size is unknown"),
    (lambda: training(training_io_prio_class=0), r"training_io_prio_class is 0 \(int\): give idle or restrict-to-be"),
    (lambda: f.training_plan(None, {"training_slice": "t.slice"}, DISKS, FACTS),
     r"training_plan: the role's variables lack training_io_weight, "),
    (lambda: f.inference_plan(None, "inference.slice", DISKS, FACTS),
     r"inference_plan: the role's variables must be one dict keyed by variable name"),
    (lambda: f.baseline_plan(None, PLAN, dict(BASELINE, io_baseline_sysctls=None)),
     r"io_baseline_sysctls is None \(NoneType\): give \{name: value\}"),
    (lambda: f.baseline_plan(None, {"disks": []}, BASELINE), r"baseline_plan: the plan must be iocost_plan's result"),
])
def test_bad_input_names_the_variable_and_the_fix(call, words):
    with pytest.raises(AnsibleFilterError, match=words):
        call()


def test_a_missing_latency_is_none():
    # Jinja's int of null was 0 (no target): still so.
    assert "latency" not in inference(inference_io_latency_us=None)["cgroups"]["inference.slice"]["io"]


# -- CPUs (issue 39): inference_cpus / training_cpus through cpu_placement -----------------------------------------

def _two_nodes(tmp_path):
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import io_facts
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
    from sim import topology
    facts = io_facts.gather(KernelFS(topology.lab_two_nodes(tmp_path).root), release="6.12.57+deb13-amd64")
    facts["host"] = dict(facts.get("host") or {}, memory_stable_bytes=8589934592)
    disks = [{"device": facts["devices"]["nvme0n1"]["identity"]["stable_selector"], "model": {}}]
    return facts, disks


def test_no_cpus_asked_no_cpuset_and_no_topology_needed():
    profile = training(inference(), inference_cpus="")
    assert profile["cgroups"]["inference.slice"]["cpu"] == {"weight": 1000}
    assert profile["cgroups"]["training.slice"]["cpu"] == {"weight": 100}


def test_auto_places_inference_on_its_disks_node_and_training_on_the_rest(tmp_path):
    facts, disks = _two_nodes(tmp_path)
    profile = inference(disks=disks, facts=facts, inference_cpus="auto")
    assert profile["cgroups"]["inference.slice"]["cpu"] == {"weight": 1000, "cpus": "2-3", "mems": "1"}
    profile = training(profile, disks=disks, facts=facts, training_cpus="auto")
    assert profile["cgroups"]["training.slice"]["cpu"] == {"weight": 100, "cpus": "0-1", "mems": "0"}
    assert training(profile, disks=disks, facts=facts, training_cpus="shared")["cgroups"]["training.slice"]["cpu"] == {
        "weight": 100}
    assert training(profile, disks=disks, facts=facts, training_cpus="3")["cgroups"]["training.slice"]["cpu"] == {
        "weight": 100, "cpus": "3", "mems": "1"}


def test_training_auto_follows_an_inference_without_cpuset(tmp_path):
    facts, disks = _two_nodes(tmp_path)
    profile = training(inference(disks=disks, facts=facts), disks=disks, facts=facts, training_cpus="auto")
    assert profile["cgroups"]["training.slice"]["cpu"] == {"weight": 100}


@pytest.mark.parametrize("call, words", [
    (lambda facts, disks: training({}, disks=disks, facts=facts, training_cpus="auto"),
     "training_cpus auto: the CPUs inference does not get, and the profile has no inference plan"),
    (lambda facts, disks: inference(disks=disks, facts=facts, inference_cpus="0-1,999"),
     r"inference_cpus 0-1,999: CPU 999 is not online on this host \(online: 0-3\); give CPUs from 0-3"),
    (lambda facts, disks: inference(disks=disks, facts=facts, inference_cpus="poll"),
     "inference_cpus poll: nvme0 (.*) has no poll queues"),
    (lambda facts, disks: training(inference(disks=disks, facts=facts, inference_cpus="0-3"), disks=disks, facts=facts,
                                   training_cpus="auto"),
     r"training_cpus auto: inference takes every online CPU \(0-3, from inference_cpus\)"),
    (lambda facts, disks: inference(disks=disks, facts={"host": facts["host"]}, inference_cpus="auto"),
     "have no topology: they come from an older io_facts"),
])
def test_bad_cpus_are_refused_naming_the_variable(tmp_path, call, words):
    facts, disks = _two_nodes(tmp_path)
    with pytest.raises(AnsibleFilterError, match=words):
        call(facts, disks)
