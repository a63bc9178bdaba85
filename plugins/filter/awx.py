# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# AWX surveys from the roles' argument specs (plugin_utils/_awx_survey.py); documented in
# plugins/filter/awx_survey.yml and awx_survey_check.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._awx_survey import (
    SurveyError, check_survey, survey_spec)


def awx_survey(specs, variables, name="", description="", limits=None):
    try:
        return survey_spec(specs, variables, name, description, limits)
    except SurveyError as e:
        raise AnsibleFilterError("awx_survey: %s" % e)


def awx_survey_check(survey, specs):
    try:
        return check_survey(survey, specs)
    except SurveyError as e:
        raise AnsibleFilterError("awx_survey_check: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"awx_survey": awx_survey, "awx_survey_check": awx_survey_check}
