# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A lab hook for tests/lab/hot_remove.py (issue 38): once the first task whose action is
LAB_HOT_REMOVE_AFTER (default: aiinfra.io_isolation.io_facts) has returned for the lab VM LAB_HOT_REMOVE_NAME,
hot-remove its nvme-b (``lab.py unplug``, QMP device_del) before the play goes on. Callbacks run in the controller's
main process as each result comes in, so the next task starts only after the disk is gone: the facts name a disk
the apply no longer finds. Enabled with ANSIBLE_CALLBACK_PLUGINS=tests/lab/callback_plugins and
ANSIBLE_CALLBACKS_ENABLED=lab_hot_remove; not part of the collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: lab_hot_remove
type: aggregate
short_description: hot-remove a lab VM's nvme-b right after a given task (tests/lab/hot_remove.py)
description: See the module docstring.
requirements: [tests/lab/lab.py]
"""

LAB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab.py")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "lab_hot_remove"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.after = os.environ.get("LAB_HOT_REMOVE_AFTER", "aiinfra.io_isolation.io_facts")
        self.name = os.environ.get("LAB_HOT_REMOVE_NAME")
        self.done = not self.name

    def v2_runner_on_ok(self, result):
        if self.done or result._host.get_name() != self.name or result._task.action != self.after:
            return
        self.done = True
        r = subprocess.run([sys.executable, LAB, "unplug", self.name], capture_output=True, text=True, check=False)
        self._display.display("lab_hot_remove: after %s: %s" % (self.after, (r.stdout + r.stderr).strip()))
        if r.returncode != 0:
            raise SystemExit("lab_hot_remove: lab.py unplug %s failed (rc %d)" % (self.name, r.returncode))
