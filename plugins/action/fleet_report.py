# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The fleet report: one JSON and one HTML file for a verify run, or for the parts of several (AWX's slices),
# written on the controller (documented in plugins/modules/fleet_report.py). Nothing runs on a managed host.

import os
import re
import time

from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _controller_files, _fleet_report

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "default": []},
    "results": {"type": "list", "elements": "dict", "default": []},
    "active": {"type": "list", "elements": "str"},
    "parts": {"type": "list", "elements": "dict", "default": []},
    "calibration_entries": {"type": "list", "elements": "dict", "default": []},
    "name": {"type": "str", "default": "fleet-report"},
    "title": {"type": "str"},
    "job": {"type": "str"},
    "publish": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        dest = args["dest"]
        if not os.path.isabs(dest) and self._loader is not None:
            dest = os.path.join(self._loader.get_basedir(), dest)
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", args["name"]):
            result.update(failed=True, msg="fleet_report: name %r is not a plain file name (letters, digits, . _ -)"
                          % args["name"])
            return result
        start = time.monotonic()
        try:
            own = _fleet_report.part(args["hosts"], args["results"], args.get("active"), args.get("job"))
            merged = _fleet_report.merge(list(args["parts"]) + [own], args["hosts"])
            rep = _fleet_report.report(merged, args["calibration_entries"], args.get("title"))
            text_json = _fleet_report.render_json(rep)
            text_html = _fleet_report.render_html(rep)
        except _fleet_report.FleetReportError as e:
            result.update(failed=True, msg="fleet_report: %s" % e)
            return result
        seconds = round(time.monotonic() - start, 3)
        paths = dict((kind, os.path.join(dest, "%s.%s" % (args["name"], kind))) for kind in ("json", "html"))
        # The report is what the run found, not a change to anything the collection manages: never 'changed'
        # (verify.yml's recap counts what would change on the hosts).
        result.update(changed=False, json_path=paths["json"], html_path=paths["html"], counts=rep["counts"],
                      hosts=len(rep["hosts"]), classes=len(rep["classes"]), render_seconds=seconds,
                      bytes={"json": len(text_json.encode("utf-8")), "html": len(text_html.encode("utf-8"))})
        if args["publish"]:
            key = _fleet_report.PART_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", args.get("job") or "run")
            result["artifact"] = key
            result["ansible_stats"] = {"data": {key: own}, "per_host": False, "aggregate": False}
        summary = ", ".join("%s %d" % (_fleet_report.STATE_TITLES[s], n) for s, n in rep["counts"].items() if n)
        if self._task.check_mode:
            result["msg"] = "would write %s and %s (%d hosts: %s)" % (
                paths["json"], paths["html"], len(rep["hosts"]), summary)
            return result
        try:
            if os.path.exists(dest) and not os.path.isdir(dest):
                raise OSError("not a directory")
            os.makedirs(dest, exist_ok=True)
            _controller_files.replace(paths["json"], text_json.encode("utf-8"))
            _controller_files.replace(paths["html"], text_html.encode("utf-8"))
        except OSError as e:
            result.update(failed=True, msg="fleet_report: cannot write the report in %s: %s" % (
                dest, getattr(e, "strerror", None) or e))
            return result
        result["msg"] = "wrote %s and %s (%d hosts: %s)" % (paths["json"], paths["html"], len(rep["hosts"]), summary)
        return result
