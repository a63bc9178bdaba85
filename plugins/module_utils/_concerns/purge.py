"""purge: take everything this collection manages off a host, through each module's own absent path.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

What exists is read from the owned-path registry (``_host/persist.py`` ``owned_files``), never from a list
kept here: a stamped file the registry declares is ours, whatever wrote it. Each concern is then
removed by the code that manages it: its ``purge(p)`` in the order of ``REMOVALS`` (``_concerns/registry.py``,
which says why that order), given this call's context (the files found, the disks, ``step()`` and ``claim()``).
Last, the rules no module's absent path removes - NVMe controllers' (nvme_arbitration keeps no state to undo:
the controller holds the value until its next reset) and those of devices that are gone - and then the boot
helpers, which no rule runs any more.

Each step is one engine run (all-or-nothing for that concern); a failure stops the purge and
names the concern, and a re-run continues from what is left. At the end the registry is read again:
anything still there fails the call, naming the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns.registry import REMOVALS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError, Reconciler
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BOOT_HELPERS, UDEV_RULES, ManagedFile, owned_files,
)


class PurgeError(ModuleError):
    """A concern whose removal failed; ``msg`` names it and the module's own error."""

    def __init__(self, concern, error):
        msg = "purge stopped at %s (what earlier steps removed stays removed; run purge again once fixed): %s" % (
            concern, getattr(error, "msg", None) or getattr(error, "message", None) or str(error))
        errors = [e if isinstance(e, str) else str(e) for e in getattr(error, "errors", None) or []]
        super(PurgeError, self).__init__(msg, errors or [msg], {"concern": concern})


class Purge:
    """One purge call: what each concern's ``purge(p)`` is given. ``owned``/``paths``: the registry's files found at
    the start; ``disks()``: the whole disks with a stable identity (read once); ``step(label, call)``: run one
    module's absent path and report it; ``claim(paths)``: rules a step removes (the rest are removed as files)."""

    def __init__(self, fs, runner, check_mode):
        self.fs = fs
        self.runner = runner
        self.check_mode = check_mode
        self.steps = {}
        self.diff = {"before": {}, "after": {}}
        self.warnings = []
        self.reboot_required = False
        self.owned = []
        self.paths = set()
        self.claimed = set()
        self._disks = None

    def disks(self):
        if self._disks is None:
            self._disks = [d for d in DeviceResolver(self.fs).list_disks(include_empty=True) if d.stable_id and d.has_mq]
        return self._disks

    def claim(self, paths):
        self.claimed.update(paths)

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

    def run(self):
        self.owned = owned_files(self.fs)
        self.paths = set(p for _o, p in self.owned)
        for remove in REMOVALS:
            remove(self)
        rest = [p for p in sorted(self.paths) if any(r.owns(p) for r in UDEV_RULES) and p not in self.claimed]
        helpers = [h.path for h in BOOT_HELPERS if h.path in self.paths]
        if rest or helpers:
            self.step("files", lambda: Reconciler(self.fs, check_mode=self.check_mode).run(
                [ManagedFile(p, None) for p in rest + helpers], []))
        left = [] if self.check_mode else [p for _o, p in owned_files(self.fs)]
        return {"changed": any(r.get("changed") for r in self.steps.values()), "diff": self.diff,
                "found": sorted(self.paths), "steps": self.steps, "left": left,
                "reboot_required": self.reboot_required, "warnings": self.warnings}


def run(fs, runner, check_mode):
    """The module call: the removal of every owned file; raises PurgeError, or names what is left."""
    result = Purge(fs, runner, check_mode).run()
    if result["left"]:
        raise PurgeError("the final check", ValueError(
            "still managed after the purge: %s (a file of this collection no module removed: report it)"
            % ", ".join(result["left"])))
    return result
