# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout summary (playbooks/templates/applied_summary.j2, printed by `make demo`) rendered by ansible-core
from recorded results, for every combination of tenants (inference, training, both), model source (calibration,
the kernel's class), reboot path (rebooted, not) and health reading (the apply's, io_facts'), each checked line
by line with the checker make test's demo stage runs on the lab (tests/lab/demo_summary.py).

The recordings in recorded/ are real runs on the lab (tests/lab/record_summaries.sh, `make record-summaries`):
each combination takes every piece from a run that had it."""

import copy
import itertools
import json
import os
import re
import sys
import tempfile

import pytest

from playbook import REPO, ansible_playbook, debug_out

sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
import demo_summary  # noqa: E402  pylint: disable=wrong-import-position

RECORDED = os.path.join(os.path.dirname(__file__), "recorded")
TEMPLATE = os.path.join(REPO, "playbooks", "templates", "applied_summary.j2")
ROLES = {"inference": ["inference"], "training": ["training"], "both": ["inference", "training"]}
# Which recorded run has the tenants of each role set.
RUN_OF_ROLES = {"both": "both-calibration-apply", "inference": "inference-kernel-reboot",
                "training": "training-kernel-apply"}
RENDER = """
- name: Render the summary for each case
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Render
      ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.template', template, template_vars=item.value) | trim | split('\\n') }}"
      loop: "{{ lookup('ansible.builtin.file', cases) | from_json | dict2items }}"
      loop_control: {label: "{{ item.key }}"}
      register: rendered
    - name: Out
      ansible.builtin.debug:
        msg: "OUT={{ dict(rendered.results | map(attribute='item.key') | zip(rendered.results | map(attribute='msg')))
                     | to_json }}"
"""


def _recorded(name):
    with open(os.path.join(RECORDED, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def _case(roles, calibration, reboot, health):
    """The summary's inputs of one combination, each piece from the recorded run that had it."""
    inputs = copy.deepcopy(_recorded(RUN_OF_ROLES[roles])["inputs"])
    disks = _recorded("both-calibration-apply" if calibration else "inference-kernel-reboot")["inputs"]
    inputs["io_baseline_disks"] = disks["io_baseline_disks"]
    inputs["io_baseline_model_sources"] = disks["io_baseline_model_sources"]
    # Recorded before the QoS solutions existed: each disk's QoS source as io_baseline plans it now (the isolation
    # solution on a calibrated disk, the roles' QoS on the kernel's class).
    inputs["io_baseline_qos_sources"] = dict(
        (d["device"]["stable_selector"], {"from": "solution", "solution": "isolation", "vrate": [80, 80]} if calibration
         else {"from": "qos", "solution": None, "vrate": [10, 10000]}) for d in disks["io_baseline_disks"])
    inputs.pop("io_isolation_reboot_elapsed", None)
    inputs["io_isolation_reboot_required"] = False
    if reboot:
        inputs["io_isolation_reboot_elapsed"] = _recorded("inference-kernel-reboot")["inputs"]["io_isolation_reboot_elapsed"]
    source = _recorded("health-io-facts" if health == "io_facts" else RUN_OF_ROLES[roles])["inputs"]
    inputs["io_isolation_health"] = source["io_isolation_health"]
    inputs["inventory_hostname"] = f"{roles}-{'calibration' if calibration else 'kernel'}-{'reboot' if reboot else 'up'}-{health}"
    return inputs


CASES = list(itertools.product(ROLES, (True, False), (True, False), ("host_profile", "io_facts")))


def _name(key):
    return "-".join(map(str, key))


def _render(cases):
    """{name: inputs} -> {name: summary lines}, every case rendered by one ansible-playbook run, as the demo does."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "cases.json"), "w", encoding="utf-8") as f:
            json.dump(cases, f)
        with open(os.path.join(tmp, "render.yml"), "w", encoding="utf-8") as f:
            f.write(RENDER)
        proc = ansible_playbook("-i", "localhost,", "-c", "local", os.path.join(tmp, "render.yml"),
                                "-e", f"template={TEMPLATE}", "-e", f"cases={os.path.join(tmp, 'cases.json')}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return debug_out(proc)


@pytest.fixture(scope="module", name="rendered")
def fixture_rendered():
    """{case: (inputs, lines)} for every case."""
    inputs = {_name(key): _case(*key) for key in CASES}
    out = _render(inputs)
    return {key: (inputs[_name(key)], out[_name(key)]) for key in CASES}


def test_recordings_are_real_runs():
    """Each recording holds what its name says (a re-recording that went wrong is caught here)."""
    both = _recorded("both-calibration-apply")["inputs"]
    assert sorted(both["group_names"]) == ["calibration", "inference", "training"]
    assert set(both["io_baseline_model_sources"].values()) == {"calibration"}
    assert both["io_isolation_health"]["source"] == "host_profile"
    reboot = _recorded("inference-kernel-reboot")["inputs"]
    assert reboot["group_names"] == ["inference"] and reboot["io_isolation_reboot_elapsed"] > 0
    assert set(reboot["io_baseline_model_sources"].values()) == {"kernel"}
    training = _recorded("training-kernel-apply")["inputs"]
    assert training["group_names"] == ["training"] and training["training_results"]["slice"]["kernel"]["io.max"]
    assert _recorded("health-io-facts")["inputs"]["io_isolation_health"]["source"] == "io_facts"


@pytest.mark.parametrize("key", CASES, ids=[_name(k) for k in CASES])
def test_summary_lines(rendered, key):
    roles, calibration, reboot, health = key
    inputs, lines = rendered[key]
    running = {t for t in ROLES[roles] if any(v is not None for v in inputs[f"{t}_results"]["slice"]["kernel"].values())}
    problems = demo_summary.check(lines, inputs, roles=ROLES[roles], model_source="calibration" if calibration else "kernel",
                                  health_source=health, caps="training" in running,
                                  memory_protection="inference" in running)
    assert problems == [], "\n".join(lines)
    ndisks = len(inputs["io_baseline_disks"])
    assert len(lines) == 1 + ndisks + len(ROLES[roles]) + 1
    assert lines[0].startswith(f"host {inputs['inventory_hostname']} ({' + '.join(ROLES[roles])}): {ndisks} data disk(s), ")
    if reboot:
        assert lines[0].endswith(f"rebooted for the NVMe queues in {inputs['io_isolation_reboot_elapsed']} s")
    else:
        assert lines[0].endswith("reboot required: False")
    for line in lines[1:1 + ndisks]:
        assert f"model from {'calibration' if calibration else 'kernel'} " in line
        assert line.endswith("% (the isolation solution)" if calibration else "% (the roles' QoS)"), line
    slices = [line.split(":")[0] for line in lines[1 + ndisks:-1]]
    assert slices == [f"slice {t}.slice" for t in ROLES[roles]]
    for tenant, line in zip(ROLES[roles], lines[1 + ndisks:-1]):
        # After the reboot nothing runs in the recorded inference slice: systemd has not created its cgroup.
        assert ("no cgroup" in line) == (tenant not in running), line
    assert f"(read by {health}; warn 20.0%, fail 45.0%)" in lines[-1]


def test_without_a_reading_the_summary_says_so_and_the_check_fails(rendered):
    """A play whose gate took no reading prints 'no reading' instead of failing; the demo's check refuses it."""
    inputs = dict(rendered[("both", True, False, "host_profile")][0])
    del inputs["io_isolation_health"]
    lines = _render({"none": inputs})["none"]
    assert lines[-1] == "health gate: no reading"
    assert any("not the health gate line" in p for p in demo_summary.check(lines, inputs))


@pytest.mark.parametrize("mangle, problem", [
    (lambda lines: lines[:-1], "no health gate line"),
    (lambda lines: lines + ["extra"], "unexpected line"),
    (lambda lines: [lines[0].replace("inference + training", "inference")] + lines[1:], "host line names"),
    (lambda lines: [lines[0], lines[1].replace("rbps=", "rbps=1")] + lines[2:], "rbps"),
    (lambda lines: [lines[0], lines[1].replace("model from calibration", "model from kernel")] + lines[2:],
     "expected calibration"),
    (lambda lines: [line.replace("io.weight 1000", "io.weight 100") for line in lines], "io.weight"),
    (lambda lines: [line.split(", io.max")[0] + ", cpu.weight 100" if line.startswith("slice training") else line
                    for line in lines], "io.max"),
    (lambda lines: lines[:-1] + [lines[-1].replace("host_profile", "io_facts")], "source"),
    (lambda lines: lines[:-1] + [lines[-1].replace("avg10 ", "avg10 9")], "avg10"),
    (lambda lines: [lines[0]] + lines[2:], "disk lines for"),
    (lambda lines: [lines[0], lines[1].replace("(the isolation solution)", "(the bandwidth solution)")] + lines[2:],
     "QoS from"),
])
def test_the_check_catches_a_wrong_line(rendered, mangle, problem):
    """The checker is not a test that cannot fail: each kind of wrong line is reported."""
    inputs, lines = rendered[("both", True, False, "host_profile")]
    assert demo_summary.check(lines, inputs, roles=["inference", "training"], model_source="calibration",
                              health_source="host_profile", caps=True, memory_protection=True) == []
    problems = demo_summary.check(mangle(list(lines)), inputs, roles=["inference", "training"],
                                  model_source="calibration", health_source="host_profile", caps=True,
                                  memory_protection=True)
    assert any(problem in p for p in problems), problems


def test_the_demo_keeps_what_the_template_reads():
    """demo_rollout.yml records every variable applied_summary.j2 reads (a new one would be missing from the
    recordings and the demo's check)."""
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(REPO, "playbooks", "demo_rollout.yml"), encoding="utf-8") as f:
        rollout = f.read()
    names = set(re.findall(r"\b((?:io_\w+|inference_\w+|training_\w+|ansible_facts|group_names|inventory_hostname))\b",
                           template))
    names -= {"io_isolation_health_warn_pct", "io_isolation_health_fail_pct"}
    for name in names:
        assert f"'{name}'" in rollout, name


def test_rendered_here_as_on_the_lab():
    """The recorded inputs render to the very lines the lab's run printed: the unit render is the demo's."""
    names = ["both-calibration-apply", "inference-kernel-reboot", "training-kernel-apply"]
    out = _render({name: _recorded(name)["inputs"] for name in names})
    for name in names:
        assert out[name] == _recorded(name)["lines"], name
