# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""AWX surveys from the roles' argument specs: every type, choices, refusals, and answers that the
role's own argument validation (what ansible-core runs when the role starts) accepts."""

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.aiinfra.io_isolation.plugins.filter import awx
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _awx_survey as s

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def role_spec(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)


SPEC = {"mode": {"type": "str", "choices": ["fast", "safe"], "default": "safe", "description": ["The V(mode)."]},
        "count": {"type": "int", "default": 3, "required": True, "description": "How many."},
        "ratio": {"type": "float", "description": "A ratio."},
        "on": {"type": "bool", "default": False, "description": "Switch."},
        "where": {"type": "path", "description": "C(/srv) or so."},
        "disks": {"type": "list", "elements": "str", "description": "Disks."},
        "caps": {"type": "dict", "description": "Caps."}}


def test_each_type_becomes_its_question():
    spec = s.survey_spec(SPEC, ["mode", "count", "ratio", "on", "where"], "n", "d")
    assert spec["name"] == "n" and spec["description"] == "d"
    mode, count, ratio, on, where = spec["spec"]
    assert mode == {"variable": "mode", "question_name": "mode", "question_description": "The mode.",
                    "required": False, "type": "multiplechoice", "choices": ["fast", "safe"], "default": "safe"}
    assert count["type"] == "integer" and count["default"] == 3 and count["required"] is True
    assert ratio["type"] == "float" and "default" not in ratio
    assert on["type"] == "multiplechoice" and on["choices"] == ["true", "false"] and on["default"] == "false"
    assert where["type"] == "text" and where["question_description"] == "/srv or so."


@pytest.mark.parametrize("name, kind", [("disks", "list"), ("caps", "dict")])
def test_lists_and_dicts_are_refused_with_the_inventory_advice(name, kind):
    with pytest.raises(s.SurveyError, match="%s is a %s: .*inventory" % (name, kind)):
        s.survey_spec(SPEC, [name])


def test_a_variable_the_role_does_not_declare_is_refused():
    with pytest.raises(AnsibleFilterError, match="awx_survey: inference_iops: not an option"):
        awx.awx_survey(role_spec("inference"), ["inference_io_weight", "inference_iops"])
    with pytest.raises(AnsibleFilterError, match="non-empty list"):
        awx.awx_survey(role_spec("inference"), [])


def test_several_roles_answers_pass_the_roles_own_validation():
    roles = [role_spec(r) for r in ("io_baseline", "inference", "training")]
    offered = ["inference_io_weight", "inference_cpu_weight", "inference_io_prio_class", "training_io_weight",
               "training_cpu_weight", "training_memory_high", "io_baseline_reboot_ok", "io_baseline_require_calibration"]
    spec = s.survey_spec(roles, offered)
    assert [q["variable"] for q in spec["spec"]] == offered
    # AWX sends each default (integers as numbers, choices as the chosen string) as an extra var
    answers = dict((q["variable"], q["default"]) for q in spec["spec"] if "default" in q)
    options = s.options_of(roles)
    result = ArgumentSpecValidator(dict((k, options[k]) for k in answers)).validate(answers)
    assert not result.error_messages, result.error_messages
    # and every choice of a multiplechoice question is accepted too
    for q in spec["spec"]:
        for choice in q.get("choices", []):
            res = ArgumentSpecValidator({q["variable"]: options[q["variable"]]}).validate({q["variable"]: choice})
            assert not res.error_messages, (q, choice)


def test_a_hand_written_survey_is_checked():
    good = s.survey_spec(SPEC, ["mode", "count"])
    assert awx.awx_survey_check(good, SPEC) == []
    bad = {"spec": [{"variable": "mode", "type": "multiplechoice", "choices": "fast\nturbo"},
                    {"variable": "count", "type": "text"},
                    {"variable": "caps", "type": "textarea"},
                    {"variable": "nope", "type": "text"}]}
    assert awx.awx_survey_check(bad, SPEC) == [
        "mode: offers turbo, which the role refuses (choices: fast, safe)",
        "count: question type text, the spec needs integer",
        "caps is a dict: a survey cannot offer it; set it in the inventory's variables (group_vars) instead",
        "nope: not an option of the role's argument spec"]


def test_specs_in_any_form():
    full = role_spec("training")
    assert s.options_of(full) == s.options_of(full["argument_specs"]) == s.options_of(full["argument_specs"]["main"])
    with pytest.raises(s.SurveyError, match="argument specs must be"):
        s.options_of("roles/training")


def test_limits_bound_number_questions():
    spec = awx.awx_survey(SPEC, ["count", "ratio"], limits={"count": {"min": 1, "max": 10}, "ratio": {"max": 2}})
    count, ratio = spec["spec"]
    assert (count["min"], count["max"]) == (1, 10) and ratio["max"] == 2 and "min" not in ratio


@pytest.mark.parametrize("variables, limits, message", [
    (["mode"], {"mode": {"min": 1}}, "mode: limits apply to integer and float questions, not multiplechoice"),
    (["count"], {"count": {"min": 1, "low": 2}}, "count: limits take min and max, not low"),
    (["count"], {"count": {"min": "1"}}, "count: min must be an integer"),
    (["ratio"], {"ratio": {"max": 0.5}}, "ratio: max must be an integer"),
    (["count"], {"count": {"min": 5, "max": 1}}, "count: min 5 is above max 1"),
    (["count"], {"count": {"min": 4}}, "count: the default 3 is outside 4.."),
    (["count"], {"ratio": {"min": 0}}, "limits for ratio, which the survey does not offer"),
    (["count"], ["count"], "limits must map variables"),
])
def test_bad_limits_are_refused(variables, limits, message):
    with pytest.raises(AnsibleFilterError, match="awx_survey: " + message):
        awx.awx_survey(SPEC, variables, limits=limits)


def test_the_boost_playbooks_spec_gives_its_survey():
    # training_boost.yml checks its variables with this file, and awx_objects.yml builds the survey from it
    with open(os.path.join(REPO, "playbooks", "vars", "training_boost_spec.yml")) as handle:
        spec = yaml.safe_load(handle)
    survey = awx.awx_survey(spec, ["training_boost_seconds", "training_boost_grace_seconds"],
                            limits={"training_boost_seconds": {"min": 1, "max": 14400}})
    seconds, grace = survey["spec"]
    assert seconds["type"] == grace["type"] == "integer"
    assert (seconds["default"], seconds["min"], seconds["max"], grace["default"]) == (600, 1, 14400, 60)
