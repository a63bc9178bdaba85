# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' argument specs refuse wrong types with a clear message (validated on the controller
with ansible.builtin.validate_argument_spec against each role's meta/argument_specs.yml; nothing
runs on any host)."""

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.validate_argument_spec:
        argument_spec: "{{ spec }}"
        provided_arguments: "{{ given }}"
"""


def validate(tmp_path, role, given):
    spec = yaml.safe_load(open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")))
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    extra = json.dumps({"spec": spec["argument_specs"]["main"]["options"], "given": given})
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    return subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(tmp_path / "pb.yml"), "-e", extra], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.mark.parametrize("role, given, words", [
    ("inference", {"inference_io_weight": "heavy"}, "argument 'inference_io_weight' is of type str"),
    ("training", {"training_io_max": [1]}, "argument 'training_io_max' is of type list"),
    ("inference", {"inference_units": {"vllm.service": 1}}, "argument 'inference_units' is of type dict"),
    ("io_baseline", {"io_baseline_devices": {"a": 1}}, "argument 'io_baseline_devices' is of type dict"),
    ("calibration", {"calibration_targets": [{"filesystem": "/srv"}], "calibration_repeats": "often"},
     "argument 'calibration_repeats' is of type str"),
    ("calibration", {}, "missing required arguments: calibration_targets"),
])
def test_wrong_type_is_refused_by_name(tmp_path, role, given, words):
    run = validate(tmp_path, role, given)
    assert run.returncode != 0 and words in run.stdout, run.stdout[-2000:]


@pytest.mark.parametrize("role, given", [
    ("inference", {"inference_io_weight": 500, "inference_memory_low": "20%"}),
    ("training", {"training_io_max": {"wbps": "90%"}, "training_memory_high": "8G",
                  "training_units": ["trainer@*.service"]}),
    ("io_baseline", {"io_baseline_devices": ["lab-nvme-a"], "io_baseline_nvme_queues": {"poll_queues": 1},
                     "io_baseline_restart_ok": True}),
    ("calibration", {"calibration_targets": [{"device": "lab-nvme-b", "destructive": True}], "calibration_repeats": 3,
                     "calibration_stop_rule": {"max_seconds": 60}}),
])
def test_good_values_pass(tmp_path, role, given):
    run = validate(tmp_path, role, given)
    assert run.returncode == 0, run.stdout[-2000:]
