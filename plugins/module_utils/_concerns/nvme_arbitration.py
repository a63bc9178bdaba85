# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVMe Arbitration feature (Set/Get Features FID 0x01) per controller, through nvme-cli.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Controllers are found with :class:`_nvme.ControllerResolver` and commanded through
:class:`_nvme.NvmeCli` (the NVMe layer); this file holds the feature:

* the Dword 11 fields (:func:`decode`, :func:`encode`) and the checks of the module's values;
* :class:`ControllerProbe` - what one controller holds and supports for FID 0x01;
* the persistence: a udev rule per controller serial and its boot helper;
* :class:`Request` - the module's logic: validate every input, probe each controller (current,
  saved and capabilities with Get Features select 0/2/3, CAP.AMS/CC.AMS from the registers),
  decide what is unsupported, and build the reconcile-engine settings (one
  :class:`ArbitrationSetting` per controller, the udev rule and its helper as managed files).

Kernel facts this relies on (docs/kernel-files.md, "NVMe Arbitration (Set Features FID 0x01)"):
Command Dword 11 of FID 0x01 holds AB
(bits 2:0, 2^AB commands, 7 = no limit), LPW/MPW/HPW (bits 15:8/23:16/31:24, 0's based). The
Linux nvme driver always enables controllers with CC.AMS = round robin, so the weights only
act under weighted round robin, which Linux never selects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import nvme_arbitration_apply as boot
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.nvme import (
    FID_ARBITRATION, SELECT_CURRENT, SELECT_SAVED, SELECT_SUPPORTED, ControllerError, ControllerResolver, NvmeCli,
    NvmeCommandError, check_selector, hex32)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    NVME_ARBITRATION_HELPER, NVME_ARBITRATION_RULES, ManagedFile, udev_value,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import ModuleError, ReconcileError, RequestError, Setting

# -- the feature -------------------------------------------------------------------------------
AB_UNLIMITED = 7          # AB = 111b: no limit
AB_MAX_EXPONENT = 6       # 2^6 = 64 commands, the largest finite burst
WEIGHT_MAX = 255          # 8-bit, 0's based fields
WEIGHTS = ("low_weight", "medium_weight", "high_weight")
WEIGHT_SHIFTS = {"low_weight": 8, "medium_weight": 16, "high_weight": 24}
WEIGHT_TAGS = {"low_weight": "LPW", "medium_weight": "MPW", "high_weight": "HPW"}

# Get Features select=3 answer (Dword 0), NVMe Base spec "Select" field.
CAP_SAVEABLE, CAP_NS_SPECIFIC, CAP_CHANGEABLE = 0x1, 0x2, 0x4
# Identify Controller ONCS bit 4: Save field in Set Features / Select field in Get Features.
ONCS_SAVE_SELECT = 0x10

# CAP.AMS (bits 18:17) and CC.AMS (bits 13:11), LIBNVME NVME_CAP_AMS_SHIFT / NVME_CC_AMS_SHIFT.
CAP_AMS_SHIFT, CC_AMS_SHIFT = 17, 11
CC_AMS_NAMES = {0: "round_robin", 1: "weighted_round_robin_urgent", 7: "vendor_specific"}

# What to do about the statuses Set Features Arbitration meets, by (SCT, SC) (names: _nvme.STATUS_NAMES).
STATUS_HINTS = {
    (0, 0x01): "the controller does not implement this command",
    (0, 0x02): "the controller does not support this feature or one of the values (an unsupported Select value, "
               "feature or reserved bits)",
    (1, 0x0d): "the controller cannot save Arbitration across power cycles; use save: false (persist: true re-applies "
               "the value at controller add through a udev rule keyed by the controller serial)",
    (1, 0x0e): "the controller does not let the host change Arbitration at all; remove this controller from the task, "
               "or use when_unsupported: warn to skip it with a warning",
    (1, 0x0f): "Arbitration is a controller feature; send it to the controller (/dev/nvmeN), not a namespace",
}

# -- persistence: _persist.NVME_ARBITRATION_RULES run the boot helper _boot_nvme_arbitration_apply ---


# == the feature's fields ========================================================================

def decode(dw11):
    """Command Dword 11 of FID 0x01 -> fields (weights as the register holds them, 0's based)."""
    ab = dw11 & 0x7
    out = {"burst": "unlimited" if ab == AB_UNLIMITED else ab,
           "burst_commands": None if ab == AB_UNLIMITED else 2 ** ab}
    for name in WEIGHTS:
        out[name] = (dw11 >> WEIGHT_SHIFTS[name]) & 0xff
    return out


def encode(fields):
    """Fields (burst exponent or 'unlimited', register weights) -> Dword 11; reserved bits 7:3 are 0."""
    ab = AB_UNLIMITED if fields["burst"] == "unlimited" else int(fields["burst"])
    dw11 = ab
    for name in WEIGHTS:
        dw11 |= (int(fields[name]) & 0xff) << WEIGHT_SHIFTS[name]
    return dw11


def _as_int(value):
    """An int from an int or a decimal string; None for anything else (bools included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    return None


def validate_burst(value):
    """(normalised burst, problem): 0..6 (the AB exponent) or 'unlimited'."""
    if value is None:
        return None, None
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "no limit", "nolimit"):
        return "unlimited", None
    n = _as_int(value)
    how = ("burst is the AB exponent n of the Arbitration feature (the controller fetches up to 2^n commands "
           "from one submission queue at a time): an integer 0..6 (1..64 commands) or 'unlimited'")
    if n is None:
        return None, "burst=%r is not valid: %s" % (value, how)
    if 0 <= n <= AB_MAX_EXPONENT:
        return n, None
    if n == AB_UNLIMITED:
        return None, ("burst=7 is not valid: 7 is the register's encoding of no limit; write burst: unlimited "
                      "(%s)" % how)
    hint = ""
    if n > 0 and n & (n - 1) == 0 and n.bit_length() - 1 <= AB_MAX_EXPONENT:
        hint = "; for %d commands write burst: %d" % (n, n.bit_length() - 1)
    return None, "burst=%r is out of range: %s%s" % (value, how, hint)


def validate_weight(name, value):
    """(register value, problem) for one of the *_weight options (0..255, 0's based)."""
    if value is None:
        return None, None
    n = _as_int(value)
    how = ("%s is the %s field's register value, 0..255 (8 bits, 0's based: the controller uses value + 1, "
           "so 0 means weight 1 and 255 weight 256)" % (name, WEIGHT_TAGS[name]))
    if n is None:
        return None, "%s=%r is not valid: %s" % (name, value, how)
    if 0 <= n <= WEIGHT_MAX:
        return n, None
    hint = "; for a weight of 256 write %s: 255" % name if n == 256 else ""
    return None, "%s=%r is out of range: %s%s" % (name, value, how, hint)


def requested_fields(params):
    """({field: value} the user asked for, [problems])."""
    wanted, problems = {}, []
    burst, problem = validate_burst(params.get("burst"))
    if problem:
        problems.append(problem)
    elif burst is not None:
        wanted["burst"] = burst
    for name in WEIGHTS:
        weight, problem = validate_weight(name, params.get(name))
        if problem:
            problems.append(problem)
        elif weight is not None:
            wanted[name] = weight
    return wanted, problems


def decode_ams(cap, cc):
    """CAP.AMS / CC.AMS from the two registers."""
    cap_ams = (cap >> CAP_AMS_SHIFT) & 0x3
    cc_ams = (cc >> CC_AMS_SHIFT) & 0x7
    return ({"wrr_urgent": bool(cap_ams & 0x1), "vendor_specific": bool(cap_ams & 0x2)},
            CC_AMS_NAMES.get(cc_ams, "reserved_%d" % cc_ams))


# == per-controller probe ========================================================================

def iomem_relaxed(fs):
    return "iomem=relaxed" in (fs.read("/proc/cmdline") or "").split()


def ams_info(fs, cli, ctrl):
    """What CAP.AMS / CC.AMS say, or why they could not be read."""
    info = {"cap_ams": None, "cc_ams": "unknown", "source": None, "reason": None, "cap": None, "cc": None}
    regs, problem = cli.show_regs(ctrl)
    if regs is None:
        reason = problem
        if ctrl.transport in (None, "pcie") and not iomem_relaxed(fs):
            reason += ("; the registers live in the controller's PCI BAR, which kernels built with "
                       "CONFIG_IO_STRICT_DEVMEM=y (Debian's) do not let user space map while the nvme driver owns "
                       "it: boot with the kernel argument iomem=relaxed to read CAP/CC")
        info["reason"] = reason
        return info
    info["cap_ams"], info["cc_ams"] = decode_ams(regs["cap"], regs["cc"])
    info["source"] = "nvme show-regs"
    info["cap"], info["cc"] = "0x%x" % regs["cap"], "0x%x" % regs["cc"]
    return info


class ControllerProbe:
    """Everything read from one controller before planning (each command once)."""

    def __init__(self, cli, fs, ctrl):
        self.ctrl = ctrl
        self.problems = []
        self.notes = []
        self.current = self.saved = None
        self.capabilities = None
        self.capabilities_reason = None
        self.select_supported = None
        if ctrl.state != "live":
            self.problems.append("%s is in state %r, not live: the driver refuses admin commands until it is; retry "
                                 "when /sys/class/nvme/%s/state reads live" % (ctrl.summary(), ctrl.state, ctrl.name))
            self.ams = {"cap_ams": None, "cc_ams": "unknown", "source": None, "cap": None, "cc": None,
                        "reason": "controller not live"}
            return
        try:
            self.current = cli.get_feature(ctrl, FID_ARBITRATION, SELECT_CURRENT)
        except NvmeCommandError as e:
            self.problems.append(e.message)
        try:
            self.select_supported = bool(cli.oncs(ctrl) & ONCS_SAVE_SELECT)
        except NvmeCommandError as e:
            self.capabilities_reason = "Identify Controller failed: %s" % e.message
        if self.select_supported:
            try:
                self.capabilities = cli.get_feature(ctrl, FID_ARBITRATION, SELECT_SUPPORTED)
            except NvmeCommandError as e:
                self.capabilities_reason = e.message
            try:
                self.saved = cli.get_feature(ctrl, FID_ARBITRATION, SELECT_SAVED)
            except NvmeCommandError as e:
                self.notes.append("saved value unreadable: %s" % e.message)
        elif self.select_supported is False:
            # Before NVMe 1.1 the Select field was reserved: such a controller answers select=3 with the current
            # value, which would read as capabilities. Do not ask.
            self.capabilities_reason = ("the controller does not support the Select field of Get Features (Identify "
                                        "Controller ONCS bit 4 is 0): saveable/changeable are unknown")
        self.ams = ams_info(fs, cli, ctrl)

    def capability(self, bit):
        return None if self.capabilities is None else bool(self.capabilities & bit)

    def capabilities_report(self):
        if self.capabilities is None:
            return {"raw": None, "saveable": None, "changeable": None, "namespace_specific": None,
                    "reason": self.capabilities_reason}
        return {"raw": hex32(self.capabilities), "saveable": self.capability(CAP_SAVEABLE),
                "changeable": self.capability(CAP_CHANGEABLE), "namespace_specific": self.capability(CAP_NS_SPECIFIC),
                "reason": None}

    def weights_active(self):
        return self.ams.get("cc_ams") == "weighted_round_robin_urgent"


def weights_warning(probe):
    """Why the requested weights do nothing on this controller (the module warns, never stays silent)."""
    ams = probe.ams
    if ams["cc_ams"] == "unknown":
        how = "CC.AMS could not be read (%s)" % ams["reason"]
    else:
        how = "CC.AMS reads %s (%s, cc=%s)" % (ams["cc_ams"], ams["source"], ams["cc"])
    extra = ""
    if ams.get("cap_ams") is not None and not ams["cap_ams"]["wrr_urgent"]:
        extra = " The controller does not support weighted round robin at all (CAP.AMS bit 17 is 0)."
    return ("%s: the arbitration weights have no effect: %s, and the Linux nvme driver always enables controllers "
            "with round robin arbitration (nvme_enable_ctrl sets CC.AMS=RR; it never selects weighted round robin "
            "and creates I/O queues without a priority class). Only burst acts. The weights are stored in the "
            "feature anyway.%s" % (probe.ctrl.summary(), how, extra))


# == engine settings ============================================================================

class ArbitrationSetting(Setting):
    """FID 0x01 on one controller: ``{"current": dw11, "saved": dw11 or None}``.

    ``save`` also compares (and writes, with Set Features SV=1) the saved value.
    """

    order = 100

    def __init__(self, cli, probe, wanted, save):
        super(ArbitrationSetting, self).__init__("arbitration[%s]" % probe.ctrl.name, None)
        self.cli = cli
        self.probe = probe
        self.ctrl = probe.ctrl
        self.wanted = dict(wanted)
        self.save = save
        self.refusal = None
        self._first = True
        self.desired = self._merge(probe.current)

    def _merge(self, current):
        fields = decode(current if current is not None else AB_UNLIMITED)
        fields.update(self.wanted)
        dw11 = encode(fields)
        return {"current": dw11, "saved": dw11 if self.save else None}

    def read(self, fs):
        if self._first:  # the probe just read these; do not ask the controller twice
            self._first = False
            return {"current": self.probe.current, "saved": self.probe.saved if self.save else None}
        saved = self.cli.get_feature(self.ctrl, FID_ARBITRATION, SELECT_SAVED) if self.save else None
        return {"current": self.cli.get_feature(self.ctrl, FID_ARBITRATION, SELECT_CURRENT), "saved": saved}

    def differs(self, current):
        if current["current"] != self.desired["current"]:
            return True
        return self.save and current["saved"] != self.desired["current"]

    def write(self, fs, value, current):
        try:
            self.cli.set_feature(self.ctrl, FID_ARBITRATION, value["current"], self.save)
        except NvmeCommandError as e:
            if e.status is not None and e.status.refusal:
                self.refusal = e
            raise

    def restore(self, fs, previous):
        # Only what really changed: a refused Set Features changed nothing, and writing the old value to a
        # controller that refuses changes would fail again.
        now = self.read(fs)
        if self.save and previous.get("saved") is not None and now["saved"] != previous["saved"]:
            self.cli.set_feature(self.ctrl, FID_ARBITRATION, previous["saved"], True)
            now = self.read(fs)
        if now["current"] != previous["current"]:
            self.cli.set_feature(self.ctrl, FID_ARBITRATION, previous["current"], False)

    def report(self, value):
        if value is None or value.get("current") is None:
            return None
        out = {"dw11": hex32(value["current"])}
        out.update(decode(value["current"]))
        if value.get("saved") is not None:
            out["saved_dw11"] = hex32(value["saved"])
        return out


def rule_path(ctrl):
    return NVME_ARBITRATION_RULES.path(ctrl.serial)


def udev_rule(ctrl, dw11):
    """The rule that re-applies ``dw11`` to the controller with this serial at every controller add."""
    serial = udev_value(ctrl.serial, "serial", ctrl.name)
    fields = decode(dw11)
    if fields["burst"] == "unlimited":
        burst = "unlimited"
    else:
        burst = "%d (%d commands)" % (fields["burst"], fields["burst_commands"])
    # Keyed by serial (ATTR matching ignores the attribute's trailing padding); no kernel name, no PCI address.
    # Two events (observed on 6.1 and 6.12): "add" when the driver registers the controller - at hot plug
    # before Identify, so the serial does not match yet, but at boot coldplug (udevadm trigger) it does;
    # and "change" with NVME_EVENT=connected, which nvme_start_ctrl() sends each time the controller goes
    # live: after probe and after every reset (reset_controller, error recovery), which resets features.
    match = 'SUBSYSTEM=="nvme", KERNEL=="nvme[0-9]*", ATTR{serial}=="%s", RUN+="%s $kernel %s"' % (
        serial, NVME_ARBITRATION_HELPER.path, hex32(dw11))
    header = ("NVMe controller serial %s (%s): Arbitration (FID 0x01) dword 11 %s = burst %s, weights (register "
              "values) low %d, medium %d, high %d"
              % (serial, ctrl.model or "NVMe", hex32(dw11), burst, fields["low_weight"], fields["medium_weight"],
                 fields["high_weight"]))
    return NVME_ARBITRATION_RULES.render(header, ['ACTION=="add", %s' % match,
                                                  'ACTION=="change", ENV{NVME_EVENT}=="connected", %s' % match])


def last_boot_apply(fs, ctrl):
    """What the udev helper recorded for this controller in this boot, or None."""
    text = fs.read("%s/%s" % (boot.STATUS_DIR, boot.status_name(ctrl.serial or ctrl.name)))
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


# == the request ================================================================================

class Request:
    """One module call: inputs validated, controllers resolved and probed, settings built."""

    def __init__(self, params, fs, runner):
        self.params = params
        self.fs = fs
        self.cli = NvmeCli(runner, hints=STATUS_HINTS)
        self.warnings = []
        self.skipped = {}          # controller name -> reason
        self.no_save = set()       # controllers whose save was refused (warn: applied without save)
        self.wanted, problems = requested_fields(params)
        selectors = list(params.get("controllers") or [])
        if not selectors:
            problems.append("controllers is empty: name at least one NVMe controller")
        problems.extend(p for p in (check_selector(s) for s in selectors) if p)
        if problems:
            raise RequestError(problems)
        try:
            self.controllers = ControllerResolver(fs, feature="Arbitration").resolve_many(selectors)
        except ControllerError as e:
            raise RequestError([e.message], {"candidates": e.candidates})
        if self.cli.locate() is None:
            raise ModuleError("nvme-cli is not installed on the host (no nvme in PATH): install the nvme-cli package "
                              "(apt-get install nvme-cli); the module reads and sets the Arbitration feature with it")
        self.probes = dict((c.name, ControllerProbe(self.cli, fs, c)) for c in self.controllers)

    @property
    def read_only(self):
        return not self.wanted

    def _warn(self, message):
        # settings() runs again after a refusal under warn: say each thing once
        if message not in self.warnings:
            self.warnings.append(message)

    def _unsupported(self, ctrl, message, errors, fix):
        if self.params.get("when_unsupported") == "warn":
            self._warn("%s (skipped: when_unsupported=warn; nothing was changed or persisted for %s)"
                       % (message, ctrl.name))
            self.skipped[ctrl.name] = message
        else:
            errors.append("%s. To go on: %s" % (message, fix))

    def settings(self):
        """(settings, errors) for the engine; errors make it fail before any write."""
        errors, settings, rules = [], [], []
        save = bool(self.params.get("save"))
        persist = self.params.get("persist", True)
        for ctrl in self.controllers:
            probe = self.probes[ctrl.name]
            if probe.problems:
                errors.extend(probe.problems)
                continue
            if self.read_only or ctrl.name in self.skipped:
                continue
            setting = ArbitrationSetting(self.cli, probe, self.wanted, save and ctrl.name not in self.no_save)
            change = setting.differs({"current": probe.current, "saved": probe.saved})
            if change and probe.capability(CAP_CHANGEABLE) is False:
                self._unsupported(ctrl, (
                    "%s does not let the host change Arbitration (FID 0x01): Get Features select=3 reports "
                    "capabilities %s (changeable bit 2 = 0), so Set Features would be refused with status 0x410e "
                    "Feature Not Changeable; the controller keeps %s (wanted %s)"
                    % (ctrl.summary(), hex32(probe.capabilities), hex32(probe.current), hex32(setting.desired["current"]))),
                    errors, fix="ask for what it holds, remove %s from controllers, or set when_unsupported: warn to "
                                "skip it with a warning" % ctrl.name)
                continue
            if setting.save and (probe.capability(CAP_SAVEABLE) is False or probe.select_supported is False):
                if probe.select_supported is False:
                    why = ("Identify Controller ONCS bit 4 is 0: the controller supports neither the Save bit of Set "
                           "Features nor the Select field of Get Features")
                else:
                    why = "Get Features select=3 reports capabilities %s (saveable bit 0 = 0)" % hex32(probe.capabilities)
                message = ("%s cannot save Arbitration (FID 0x01): %s, so Set Features with save would be refused with "
                           "status 0x410d Feature Identifier Not Saveable; use save: false (persist: true re-applies the "
                           "value at controller add through a udev rule keyed by the serial)" % (ctrl.summary(), why))
                if self.params.get("when_unsupported") == "warn":
                    self._warn(message + " (when_unsupported=warn: set without save%s)"
                               % (", persisted by the udev rule" if persist else ""))
                    self.no_save.add(ctrl.name)
                    setting = ArbitrationSetting(self.cli, probe, self.wanted, False)
                else:
                    errors.append(message)
                    continue
            settings.append(setting)
            if persist:
                rules.append((ctrl, probe, setting))
        for ctrl, probe, setting in rules:
            if probe.capability(CAP_CHANGEABLE) is False:
                # Nothing to change and nothing the host could change: the controller holds the value by itself.
                note = "not persisted: the feature is not changeable, the controller always holds %s" % hex32(
                    probe.current)
                if note not in probe.notes:
                    probe.notes.append(note)
                continue
            if setting.save:
                # The controller keeps the saved value across resets and power cycles; a rule of ours with an
                # older value would fight it at the next boot.
                settings.append(NVME_ARBITRATION_RULES.file(ctrl.serial, None, adopt=self.params.get("adopt")))
                continue
            try:
                content = udev_rule(ctrl, setting.desired["current"])
            except ValueError as e:
                errors.append(str(e))
                continue
            settings.append(NVME_ARBITRATION_RULES.file(ctrl.serial, content, adopt=self.params.get("adopt")))
        if any(isinstance(s, ManagedFile) and s.desired is not None for s in settings):
            settings.append(NVME_ARBITRATION_HELPER.file(adopt=self.params.get("adopt")))
        return settings, errors

    def refused(self, settings):
        """The setting whose Set Features the controller refused in the last run, or None."""
        for s in settings:
            if isinstance(s, ArbitrationSetting) and s.refusal is not None:
                return s
        return None

    def reconcile(self, reconciler):
        """Run the engine; under when_unsupported=warn a controller that refuses is dropped and the rest re-run.

        The capabilities usually predict a refusal (then nothing is sent); this covers controllers that do
        not report them (no Select support) or report them wrongly. The engine has restored what the failed
        run changed before the retry.
        """
        while True:
            settings, errors = self.settings()
            try:
                return reconciler.run(settings, errors), settings
            except ReconcileError as e:
                bad = self.refused(settings)
                if bad is None or self.params.get("when_unsupported") != "warn" or e.restore_errors:
                    raise
                status = bad.refusal.status
                if status.not_saveable and bad.save:
                    self._warn("%s (when_unsupported=warn: set without save)" % bad.refusal.message)
                    self.no_save.add(bad.ctrl.name)
                else:
                    self._warn("%s (skipped: when_unsupported=warn; nothing was changed or persisted for %s)"
                               % (bad.refusal.message, bad.ctrl.name))
                    self.skipped[bad.ctrl.name] = bad.refusal.message

    def report(self, result, settings):
        """Per-controller results: what the controller holds now, its capabilities and AMS, what was done."""
        values = result.get("values", {})
        changed_keys = set(result.get("diff", {}).get("after", {}))
        by_ctrl = dict((s.ctrl.name, s) for s in settings if isinstance(s, ArbitrationSetting))
        paths = dict((s.key, s) for s in settings if isinstance(s, ManagedFile))
        out = []
        for ctrl in self.controllers:
            probe = self.probes[ctrl.name]
            setting = by_ctrl.get(ctrl.name)
            held = None
            if setting is not None and values.get(setting.key) is not None:
                held = values[setting.key]
                current, saved = int(held["dw11"], 16), held.get("saved_dw11")
                saved = int(saved, 16) if saved else probe.saved
            else:
                current, saved = probe.current, probe.saved
            if ctrl.name in self.skipped:
                status = "skipped"
            elif self.read_only:
                status = "read"
            elif setting is not None and setting.key in changed_keys:
                status = "changed"
            else:
                status = "unchanged"
            rule = rule_path(ctrl) if ctrl.serial else None
            entry = {
                "controller": ctrl.name, "dev_path": ctrl.dev_path, "serial": ctrl.serial, "model": ctrl.model,
                "firmware": ctrl.firmware, "transport": ctrl.transport, "address": ctrl.address,
                "selector": ctrl.selector, "matched_by": ctrl.matched_by, "namespaces": ctrl.namespaces,
                "status": status, "skipped_reason": self.skipped.get(ctrl.name),
                "dw11": hex32(current), "arbitration": decode(current) if current is not None else None,
                "saved": ({"dw11": hex32(saved)} if saved is not None else None),
                "saved_with_this_call": bool(setting is not None and setting.save and status == "changed"),
                "capabilities": probe.capabilities_report(),
                "ams": probe.ams, "weights_active": probe.weights_active(),
                "persisted_to": rule if rule in paths and paths[rule].desired is not None else None,
                "last_boot_apply": last_boot_apply(self.fs, ctrl),
                "notes": list(probe.notes),
            }
            if saved is not None:
                entry["saved"].update(decode(saved))
            out.append(entry)
        return out

    def weight_warnings(self):
        if not any(w in self.wanted for w in WEIGHTS):
            return []
        return [weights_warning(self.probes[c.name]) for c in self.controllers
                if c.name not in self.skipped and not self.probes[c.name].problems
                and not self.probes[c.name].weights_active()]


def run(params, fs, runner, check_mode, reconciler_class):
    """The whole module call: returns the exit_json keys (``warnings`` separate) or raises."""
    request = Request(params, fs, runner)
    result, settings = request.reconcile(reconciler_class(fs, check_mode=check_mode))
    controllers = request.report(result, settings)
    persisted = sorted(s.key for s in settings if isinstance(s, ManagedFile) and s.desired is not None
                       and s.key != NVME_ARBITRATION_HELPER.path)
    return {"changed": result["changed"], "diff": result["diff"], "controllers": controllers,
            "persisted_to": persisted, "warnings": request.warnings + request.weight_warnings()}
