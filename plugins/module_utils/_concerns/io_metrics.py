# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The io_metrics role's files on a host, and their removal (purge's step; the role installs them).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

The exporter itself is ``_observability/io_metrics.py``; its paths on the host are declared in ``_host/persist.py``
(``METRICS_*``). Removing it: its timer stopped and disabled, its service stopped, its units and launcher, the
package tree 0.1.0 copied, and the files it wrote (its textfile, the recorded verify result, the latency state), as the role's
``io_metrics_state: absent`` does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Directory, ModuleError, Reconciler
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    METRICS_OLD_LIB_DIR, METRICS_UNIT, SYSTEMD_UNIT_DIR, ManagedFile,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as _metrics


class GoneFile(ManagedFile):
    """A file the collection wrote or copied without a stamp (the exporter's output, its copy of our code): removed
    whatever it holds; the diff gives its size, not its text."""

    def __init__(self, path):
        super(GoneFile, self).__init__(path, None, adopt=True)

    def report(self, value):
        return None if value is None else "(%d bytes)" % len(value)


def gone_directory(path, depth):
    """A directory that must not exist, emptied by the settings before it (deeper ones first)."""
    return Directory(path, path, False, order=1200 - min(depth, 99))


def outputs(service_text):
    """The files the installed exporter writes: its ExecStart's arguments, or the exporter's defaults where the
    unit does not give one (the role's variables can move them)."""
    args = {"--textfile-dir": _metrics.TEXTFILE_DIR, "--verify-file": _metrics.VERIFY_FILE,
            "--latency-state": _metrics.LATENCY_STATE}
    for line in (service_text or "").splitlines():
        if line.startswith("ExecStart="):
            words = shlex.split(line[len("ExecStart="):])
            for flag, value in zip(words, words[1:]):
                if flag in args:
                    args[flag] = value
    found = ["%s/%s" % (args["--textfile-dir"].rstrip("/"), _metrics.OUTPUT_NAME), args["--latency-state"]]
    return found + ([args["--verify-file"]] if args["--verify-file"] else [])


def settings(fs, owned):
    """The exporter's removal as engine settings: the stamped units and launcher, the files it wrote and the package
    tree 0.1.0 copied (files, then directories deepest first). ``owned``: the registry's files found."""
    stamped = [p for o, p in owned if o == "io_metrics"]
    service = fs.read("%s/%s.service" % (SYSTEMD_UNIT_DIR, METRICS_UNIT))
    out = [ManagedFile(p, None) for p in stamped]
    # unstamped: the exporter's own output and state files, and the collection's code as 0.1.0 copied it
    out += [GoneFile(p) for p in outputs(service) if fs.exists(p)]
    stack, dirs = [(METRICS_OLD_LIB_DIR, 0)], []
    while stack:
        path, depth = stack.pop()
        if not fs.isdir(path):
            continue
        dirs.append(gone_directory(path, depth))
        for entry in sorted(fs.listdir(path) or []):
            child = "%s/%s" % (path, entry)
            if fs.isdir(child) and not fs.islink(child):
                stack.append((child, depth + 1))
            else:
                out.append(GoneFile(child))
    return out + dirs


def remove(fs, runner, check_mode, owned):
    """The timer stopped and disabled first (no run writes its textfile again), then the files, then systemd
    reloaded without the units."""
    service = "%s.service" % METRICS_UNIT
    if not check_mode:
        # disable --now: rc 1 when systemd never loaded the unit (files copied by hand, no daemon-reload);
        # stop: a run the timer started before it stopped would write its files again after they are removed
        # (the lab caught it), rc 5 when the service is not loaded
        for argv, ok in ((["systemctl", "disable", "--now", "%s.timer" % METRICS_UNIT], (0, 1)),
                         (["systemctl", "stop", service], (0, 5))):
            rc, _out, err = runner.run(argv, check=False)
            if rc not in ok:
                raise ModuleError("%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
        # a run stopped mid-way leaves the unit "failed" in systemd's memory, its file gone: forget it
        runner.run(["systemctl", "reset-failed", service], check=False)
    result = Reconciler(fs, check_mode=check_mode).run(settings(fs, owned), [])
    if result.get("changed") and not check_mode:
        runner.run(["systemctl", "daemon-reload"])
    return result


def purge(p):
    """purge's step, when the registry found any of the exporter's stamped files."""
    if any(o == "io_metrics" for o, _p in p.owned):
        p.step("io_metrics", lambda: remove(p.fs, p.runner, p.check_mode, p.owned))
