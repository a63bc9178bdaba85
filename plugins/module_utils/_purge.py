# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""purge: take everything this collection manages off a host, through each module's own absent path.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

What exists is read from the owned-path registry (``_persist.owned_files``), never from a list
kept here: a stamped file the registry declares is ours, whatever wrote it. Each concern is then
removed by the code that manages it, in this order:

0. boost windows (a runtime drop-in or a timer of cgroup_boost): cgroup_boost state=absent, so that
   no timer fires after the purge and the caps in force are the unit's own until step 1 resets them;
1. systemd units with our drop-in (or a slice unit we created): the cgroup module's state=absent,
   which also resets what systemd had applied to the running cgroup;
2. disks whose iocost the kernel holds, or with our iocost rule: iocost state=absent (the kernel's
   own model and QoS back at once, the rule removed);
3. disks with our block-queue rule: blk_queue state=absent (the rule; the live values stay until
   the next boot, as that module reports);
4. the sysctls and scheduler tunables in our sysctl.d/tmpfiles.d files: sysctl state=absent;
5. our modprobe.d options: nvme_queues state=absent (the driver's defaults at its next load);
6. NVMe controllers with our arbitration rule, and rules whose disk or controller is gone: the rule
   file itself (the controller keeps the live value until its next reset);
7. the boot helpers once no rule runs them.
8. the io_metrics exporter (its timer stopped and disabled, its units, launcher and library, and the
   files it wrote: its textfile, the recorded verify result, the latency state), as the role's
   ``io_metrics_state: absent`` does.

Each concern is one engine run (all-or-nothing for that concern); a failure stops the purge and
names the concern, and a re-run continues from what is left. At the end the registry is read again:
anything still there fails the call, naming the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _blk_queue, _cgroup_boost, _cgroup, _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils import _metrics, _nvme_queues, _sysctl
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._capabilities import require_iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._persist import (
    BLK_QUEUE_RULES, BOOT_HELPERS, IOCOST_RULES, METRICS_LIB_DIR, METRICS_UNIT, SYSCTL_CONF, SYSTEMD_DROPIN_NAME,
    SYSTEMD_UNIT_DIR, TMPFILES_CONF, UDEV_RULES, ManagedFile, owned_files,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._reconcile import Directory, ModuleError, Reconciler

_DROPIN_RE = re.compile(r"^%s/([^/]+)\.d/%s$" % (re.escape(SYSTEMD_UNIT_DIR), re.escape(SYSTEMD_DROPIN_NAME)))
_UNIT_RE = re.compile(r"^%s/([^/]+\.slice)$" % re.escape(SYSTEMD_UNIT_DIR))


class PurgeError(ModuleError):
    """A concern whose removal failed; ``msg`` names it and the module's own error."""

    def __init__(self, concern, error):
        msg = "purge stopped at %s (what earlier steps removed stays removed; run purge again once fixed): %s" % (
            concern, getattr(error, "msg", None) or getattr(error, "message", None) or str(error))
        errors = [e if isinstance(e, str) else str(e) for e in getattr(error, "errors", None) or []]
        super(PurgeError, self).__init__(msg, errors or [msg], {"concern": concern})


def units(owned):
    """systemd units the cgroup module manages: those with our drop-in, and slices we created."""
    out = []
    for _owner, path in owned:
        m = _DROPIN_RE.match(path) or _UNIT_RE.match(path)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def boost_units(owned, fs):
    """Slices with a boost window on the host: a runtime drop-in or a timer of cgroup_boost."""
    out = []
    for owner, path in owned:
        unit = _cgroup_boost.unit_of(path, fs) if owner == "cgroup_boost" else None
        if unit and unit not in out:
            out.append(unit)
    return out


def sysctl_names(fs):
    """The sysctls and debugfs tunables our files set, read with the sysctl module's own parsers."""
    names = []
    for path, parse in ((SYSCTL_CONF, _sysctl.parse_sysctl_conf), (TMPFILES_CONF, _sysctl.parse_tmpfiles_conf)):
        names.extend(parse(fs.read(path) or "")[0])
    return names


class Purge:
    def __init__(self, fs, runner, check_mode):
        self.fs = fs
        self.runner = runner
        self.check_mode = check_mode
        self.steps = {}
        self.diff = {"before": {}, "after": {}}
        self.warnings = []
        self.reboot_required = False

    def step(self, concern, call):
        try:
            result = call()
        except Exception as e:  # pylint: disable=broad-except
            # each module's own error (request, device, engine, kernel file, command) ends the purge here
            raise PurgeError(concern, e)
        self.warnings.extend(result.pop("warnings", []))
        self.steps[concern] = result
        for side in ("before", "after"):
            for key, value in ((result.get("diff") or {}).get(side) or {}).items():
                self.diff[side]["%s: %s" % (concern, key)] = value
        return result

    def metrics(self, owned):
        """The exporter's timer stopped and disabled first (no run writes its textfile again), then its files,
        then systemd reloaded without its units. ``owned``: the registry's files found at the start."""
        service = "%s.service" % METRICS_UNIT
        if not self.check_mode:
            # disable --now: rc 1 when systemd never loaded the unit (files copied by hand, no daemon-reload);
            # stop: a run the timer started before it stopped would write its files again after they are removed
            # (the lab caught it), rc 5 when the service is not loaded
            for argv, ok in ((["systemctl", "disable", "--now", "%s.timer" % METRICS_UNIT], (0, 1)),
                             (["systemctl", "stop", service], (0, 5))):
                rc, _out, err = self.runner.run(argv, check=False)
                if rc not in ok:
                    raise ModuleError("%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
            # a run stopped mid-way leaves the unit "failed" in systemd's memory, its file gone: forget it
            self.runner.run(["systemctl", "reset-failed", service], check=False)
        result = Reconciler(self.fs, check_mode=self.check_mode).run(metrics_settings(self.fs, owned), [])
        if result.get("changed") and not self.check_mode:
            self.runner.run(["systemctl", "daemon-reload"])
        return result

    def run(self):
        owned = owned_files(self.fs)
        paths = set(p for _o, p in owned)
        for unit in boost_units(owned, self.fs):
            self.step("cgroup_boost %s" % unit, lambda unit=unit: _cgroup_boost.run(
                {"unit": unit, "state": "absent"}, self.fs, self.runner, self.check_mode))
        for unit in units(owned):
            self.step("cgroup %s" % unit, lambda unit=unit: _cgroup.reconcile(
                {"name": unit, "manager": "systemd", "state": "absent"}, self.fs, self.runner, self.check_mode))
        disks = [d for d in DeviceResolver(self.fs).list_disks(include_empty=True) if d.stable_id and d.has_mq]
        iocost = [d for d in disks if IOCOST_RULES.path(d.stable_id) in paths or any(_iocost.held(self.fs, d.majmin))]
        if iocost and require_iocost(self.fs) is None:
            self.step("iocost", lambda: _iocost.run({
                "devices": [{"device": d.stable_selector} for d in iocost], "state": "absent", "keep_enabled": False,
                "persist": True, "adopt": False}, self.fs, self.check_mode))
        queues = [d for d in disks if BLK_QUEUE_RULES.path(d.stable_id) in paths]
        # the rules no module's absent path removes: NVMe controllers' (nvme_arbitration keeps no state to
        # undo: the controller holds the value until its next reset) and those of devices that are gone
        handled = set([IOCOST_RULES.path(d.stable_id) for d in iocost] + [BLK_QUEUE_RULES.path(d.stable_id) for d in queues])
        rest = [p for p in sorted(paths) if any(r.owns(p) for r in UDEV_RULES) and p not in handled]
        # ... then the boot helpers, which no rule runs any more
        helpers = [h.path for h in BOOT_HELPERS if h.path in paths]
        if queues:
            self.step("blk_queue", lambda: _blk_queue.run(
                {"devices": [{"device": d.stable_selector} for d in queues], "state": "absent", "adopt": False},
                self.fs, self.check_mode))
        names = sysctl_names(self.fs)
        if names:
            self.step("sysctl", lambda: _sysctl.run(
                {"sysctls": dict((n, {"state": "absent"}) for n in names), "persist": True, "adopt": False},
                self.fs, self.check_mode))
        if any(o == "nvme_queues" for o, _p in owned):
            result = self.step("nvme_queues", lambda: _nvme_queues.reconcile(
                {"state": "absent"}, self.fs, self.runner, self.check_mode))
            self.reboot_required = bool(result.get("reboot_required"))
        if rest or helpers:
            self.step("files", lambda: Reconciler(self.fs, check_mode=self.check_mode).run(
                [ManagedFile(p, None) for p in rest + helpers], []))
        if any(o == "io_metrics" for o, _p in owned):
            self.step("io_metrics", lambda: self.metrics(owned))
        left = [] if self.check_mode else [p for _o, p in owned_files(self.fs)]
        return {"changed": any(r.get("changed") for r in self.steps.values()), "diff": self.diff,
                "found": sorted(paths), "steps": self.steps, "left": left,
                "reboot_required": self.reboot_required, "warnings": self.warnings}


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


def metrics_outputs(service_text):
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
    outputs = ["%s/%s" % (args["--textfile-dir"].rstrip("/"), _metrics.OUTPUT_NAME), args["--latency-state"]]
    return outputs + ([args["--verify-file"]] if args["--verify-file"] else [])


def metrics_settings(fs, owned):
    """The io_metrics exporter's removal as engine settings: the stamped units and launcher, the files it wrote
    and its library tree (files, then directories deepest first)."""
    stamped = [p for o, p in owned if o == "io_metrics"]
    service = fs.read("%s/%s.service" % (SYSTEMD_UNIT_DIR, METRICS_UNIT))
    settings = [ManagedFile(p, None) for p in stamped]
    # unstamped: the exporter's own output and state files, and the collection's code copied as it is
    settings += [GoneFile(p) for p in metrics_outputs(service) if fs.exists(p)]
    stack, dirs = [(METRICS_LIB_DIR, 0)], []
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
                settings.append(GoneFile(child))
    return settings + dirs


def run(fs, runner, check_mode):
    """The module call: the removal of every owned file; raises PurgeError, or names what is left."""
    result = Purge(fs, runner, check_mode).run()
    if result["left"]:
        raise PurgeError("the final check", ValueError(
            "still managed after the purge: %s (a file of this collection no module removed: report it)"
            % ", ".join(result["left"])))
    return result
