# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-playbook on the controller against this collection, for the tests that run a real play on
localhost (the calibration report, the calibration database lookup, the calibration role's record)."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def ansible_playbook(*args, env=None, timeout=300):
    """The finished ansible-playbook process (argv after the command: inventory, playbook, -e ...)."""
    full = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
                ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".cache", "collections"), ANSIBLE_STDOUT_CALLBACK="default")
    full.update(env or {})
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook")] + [str(a) for a in args],
                          capture_output=True, text=True, env=full, timeout=timeout, check=False)


def debug_out(proc):
    """The JSON a play printed with ansible.builtin.debug as msg "OUT=<json>"."""
    line = [x for x in proc.stdout.splitlines() if '"msg": "OUT=' in x][0]
    return json.loads(json.loads("{" + line.strip() + "}")["msg"][4:])
