# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the lab scripts in this directory share: lab.py as a subprocess, a command in a guest, one module call through
ansible ad hoc with its JSON result. Imported from the scripts' own directory (``python3 tests/lab/<script>.py``)."""

import json
import os
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = [sys.executable, os.path.join(REPO, "tests", "lab", "lab.py")]


def lab(*args, check=True):
    return subprocess.run(LAB + list(args), check=check, text=True, capture_output=True)


def guest(name, script, check=True):
    """``script`` run by bash in the guest; the CompletedProcess (a failure stops the script when ``check``)."""
    r = lab("ssh", name, "--", "bash -c %s" % shlex.quote(script), check=False)
    if check and r.returncode != 0:
        raise SystemExit("guest command failed (rc %d): %s\n%s%s" % (r.returncode, script, r.stdout, r.stderr))
    return r


def guest_out(name, script, check=True):
    """:func:`guest`'s stdout."""
    return guest(name, script, check).stdout


class Say:
    """A lab script's progress lines under its name (``say(msg)``), and its failure (``say.fail``: the message, the
    tail of what explains it, exit status 1)."""

    def __init__(self, prefix):
        self.prefix = prefix

    def __call__(self, msg):
        print("%s: %s" % (self.prefix, msg), flush=True)

    def fail(self, msg, detail=""):
        self("FAILED: " + msg)
        if detail:
            print(detail[-6000:], flush=True)
        sys.exit(1)


def module(bin_dir, inventory, name, module_name, args):
    """One module call through ansible ad hoc; its JSON result."""
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.cache/installed" % (REPO, REPO))
    r = subprocess.run([os.path.join(bin_dir, "ansible"), "-i", inventory, name, "-m", module_name]
                       + (["-a", json.dumps(args)] if args else []), text=True, capture_output=True, env=env, check=False)
    try:
        return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"][name]
    except (ValueError, KeyError, IndexError):
        raise SystemExit("ansible printed no result (rc %d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
