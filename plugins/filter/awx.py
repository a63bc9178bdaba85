# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# AWX surveys from the roles' argument specs (plugin_utils/_awx_survey.py); documented in
# plugins/filter/awx_survey.yml and awx_survey_check.yml.

import importlib

from ansible.errors import AnsibleFilterError


def _survey():
    # Imported when a survey filter runs, not with this file: ansible-core imports every filter file of the
    # collection, compiling it from source, in each worker that templates any of its filters (the roles' planning
    # tasks, for every host); this import took about 17 ms of CPU each time (make bench-fleet).
    return importlib.import_module("ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._awx_survey")


def awx_survey(specs, variables, name="", description="", limits=None):
    survey = _survey()
    try:
        return survey.survey_spec(specs, variables, name, description, limits)
    except survey.SurveyError as e:
        raise AnsibleFilterError("awx_survey: %s" % e)


def awx_survey_check(survey, specs):
    module = _survey()
    try:
        return module.check_survey(survey, specs)
    except module.SurveyError as e:
        raise AnsibleFilterError("awx_survey_check: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"awx_survey": awx_survey, "awx_survey_check": awx_survey_check}
