# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Running host commands: argv lists, C locale, rc and stderr checked, JSON where the tool has it.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


class CommandError(Exception):
    def __init__(self, argv, rc, stdout, stderr, reason=None):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        msg = "Command %s failed" % " ".join(self.argv)
        msg += ": %s" % reason if reason else " with rc=%s: %s" % (rc, (stderr or stdout or "").strip()[:500])
        self.msg = msg
        self.message = msg
        super(CommandError, self).__init__(msg)

    def as_dict(self):
        return {"argv": self.argv, "rc": self.rc, "stderr": (self.stderr or "").strip()[:2000]}


class Runner:
    """Wraps ``AnsibleModule.run_command`` (or any callable with its signature) and ``get_bin_path``."""

    def __init__(self, module):
        self.module = module

    def which(self, name):
        """Absolute path of a tool on the host, or None."""
        return self.module.get_bin_path(name, required=False)

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        """Run argv (a list, never a shell string); returns (rc, stdout, stderr)."""
        if isinstance(argv, str):
            raise TypeError("argv must be a list")
        rc, out, err = self.module.run_command(list(argv), environ_update=C_LOCALE, data=data,
                                               check_rc=False)
        # Some tools exit 0 and still report failure on stderr (sysctl does).
        if check and (rc != 0 or (stderr_is_error and err.strip())):
            raise CommandError(argv, rc, out, err)
        return rc, out, err

    def run_json(self, argv):
        """Run a tool in its JSON output mode and decode the answer."""
        _rc, out, err = self.run(argv)
        try:
            return json.loads(out)
        except ValueError:
            raise CommandError(argv, 0, out, err, reason="output is not JSON: %r" % out[:200])
