# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""AWX survey questions from the roles' argument specs (controller side).

A survey generated here can only offer what the role's ``meta/argument_specs.yml`` accepts: a
variable the spec declares, with its type and choices. Lists and dicts have no survey type that
carries them faithfully; they belong in inventory variables, so they are refused with that advice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


class SurveyError(ValueError):
    pass


# argument spec type -> AWX survey question type (str/path/raw with choices become multiplechoice)
TYPES = {"str": "text", "path": "text", "raw": "text", "int": "integer", "float": "float", "bool": "multiplechoice"}
REFUSED = ("list", "dict")


def options_of(specs):
    """The options of one or more argument specs: a parsed ``meta/argument_specs.yml``, its ``main``
    entry point, an options dict, or a list of any of these (later ones do not override earlier)."""
    if isinstance(specs, (list, tuple)):
        out = {}
        for spec in specs:
            for name, option in options_of(spec).items():
                out.setdefault(name, option)
        return out
    if not isinstance(specs, dict):
        raise SurveyError("argument specs must be a parsed meta/argument_specs.yml or its options, got %s"
                          % type(specs).__name__)
    if "argument_specs" in specs:
        specs = specs["argument_specs"]
    if "main" in specs and isinstance(specs["main"], dict):
        specs = specs["main"]
    if "options" in specs and isinstance(specs["options"], dict):
        specs = specs["options"]
    return specs


def _summary(description):
    text = description[0] if isinstance(description, list) and description else description
    text = re.sub(r"[A-Z]\(([^)]*)\)", r"\1", "%s" % (text or ""))     # C(x), V(x), O(x) -> x
    return text.strip()


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%s" % value


def question(name, option):
    """One AWX survey question for the option ``name`` of an argument spec."""
    kind = option.get("type", "str")
    if kind in REFUSED:
        raise SurveyError("%s is a %s: a survey cannot offer it; set it in the inventory's variables "
                          "(group_vars) instead" % (name, kind))
    if kind not in TYPES:
        raise SurveyError("%s has type %s, which no survey question carries" % (name, kind))
    out = {"variable": name, "question_name": name, "question_description": _summary(option.get("description")),
           "required": bool(option.get("required", False)), "type": TYPES[kind]}
    choices = option.get("choices")
    if kind == "bool":
        choices = [True, False]
    if choices:
        out["type"] = "multiplechoice"
        out["choices"] = [_text(c) for c in choices]
    if "default" in option and option["default"] is not None and not isinstance(option["default"], (list, dict)):
        default = option["default"]
        out["default"] = default if kind in ("int", "float") and not choices else _text(default)
    return out


def _limit(var, item, limits):
    """Narrow a number question to ``limits`` ({min, max}): argument specs carry no bounds, a survey
    can, and a bound the playbook checks is better refused at launch than after it started."""
    if item["type"] not in ("integer", "float"):
        raise SurveyError("%s: limits apply to integer and float questions, not %s" % (var, item["type"]))
    unknown = sorted(set(limits) - {"min", "max"})
    if unknown:
        raise SurveyError("%s: limits take min and max, not %s" % (var, ", ".join(unknown)))
    for key in ("min", "max"):
        if key in limits:
            # AWX takes only integer limits, for float questions too (JobTemplateSurveySpec validation)
            if isinstance(limits[key], bool) or not isinstance(limits[key], int):
                raise SurveyError("%s: %s must be an integer (AWX refuses other limits), got %r" % (var, key, limits[key]))
            item[key] = limits[key]
    if "min" in item and "max" in item and item["min"] > item["max"]:
        raise SurveyError("%s: min %s is above max %s" % (var, item["min"], item["max"]))
    default = item.get("default")
    if default is not None and not (item.get("min", default) <= default <= item.get("max", default)):
        raise SurveyError("%s: the default %s is outside %s..%s" % (var, default, item.get("min", ""), item.get("max", "")))
    return item


def survey_spec(specs, variables, name="", description="", limits=None):
    """An AWX ``survey_spec`` offering ``variables``, each checked against the argument specs;
    ``limits`` ({variable: {min, max}}) bounds number questions."""
    options = options_of(specs)
    if not isinstance(variables, (list, tuple)) or not variables:
        raise SurveyError("name the variables the survey offers (a non-empty list)")
    unknown = [v for v in variables if v not in options]
    if unknown:
        raise SurveyError("%s: not an option of the role's argument spec (%s)"
                          % (", ".join(unknown), ", ".join(sorted(options)) or "none"))
    limits = limits or {}
    if not isinstance(limits, dict):
        raise SurveyError("limits must map variables to {min, max}, got %s" % type(limits).__name__)
    stray = [v for v in limits if v not in variables]
    if stray:
        raise SurveyError("limits for %s, which the survey does not offer" % ", ".join(stray))
    spec = []
    for var in variables:
        item = question(var, options[var])
        if var in limits:
            item = _limit(var, item, limits[var] or {})
        spec.append(item)
    return {"name": name, "description": description, "spec": spec}


def check_survey(survey, specs):
    """The problems of a hand-written survey_spec against the argument specs (empty: none)."""
    options = options_of(specs)
    problems = []
    for item in (survey or {}).get("spec") or []:
        var = item.get("variable")
        if var not in options:
            problems.append("%s: not an option of the role's argument spec" % var)
            continue
        try:
            expected = question(var, options[var])
        except SurveyError as e:
            problems.append("%s" % e)
            continue
        if item.get("type") != expected["type"] and not (expected["type"] == "text" and item.get("type") == "textarea"):
            problems.append("%s: question type %s, the spec needs %s" % (var, item.get("type"), expected["type"]))
        offered = item.get("choices")
        if isinstance(offered, str):
            offered = [c for c in offered.split("\n") if c]
        if "choices" in expected and offered is not None:
            extra = [c for c in offered if _text(c) not in expected["choices"]]
            if extra:
                problems.append("%s: offers %s, which the role refuses (choices: %s)"
                                % (var, ", ".join(_text(c) for c in extra), ", ".join(expected["choices"])))
    return problems
