#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvme_arbitration
short_description: Read and set the NVMe Arbitration feature (FID 0x01) of NVMe controllers
version_added: 0.1.0
description:
  - Reads the Arbitration feature (Get Features, feature identifier 0x01) of one or more NVMe controllers with
    C(nvme get-feature), decodes Command Dword 11 into O(burst) and the three weights, and reports which capabilities
    the controller claims for it (Get Features select 3 - saveable, changeable) and which arbitration mechanism the
    controller supports and runs (C(CAP.AMS), C(CC.AMS), read with C(nvme show-regs) where the kernel allows it).
  - With O(burst) or any weight given, sets the feature with C(nvme set-feature) where it differs, reads it back and
    restores the earlier values of every controller of the call if one of them fails.
  - Tells the truth about the weights. The Linux nvme driver always enables controllers with round robin arbitration
    (C(CC.AMS=RR)) and never selects weighted round robin, so O(low_weight), O(medium_weight) and O(high_weight)
    have no effect under Linux; only O(burst) acts. Setting weights returns a warning, not a silent success.
  - Controllers that cannot take the change make the task fail with the controller, the NVMe status and the fix - before
    any command is sent where Get Features select 3 says the feature is not changeable (status 0x410e Feature Not
    Changeable) or not saveable for O(save=true) (0x410d Feature Identifier Not Saveable), otherwise when Set Features
    answers so, with what the call changed on other controllers restored. With O(when_unsupported=warn) they are
    skipped with a warning instead.
  - With O(persist=true) a udev rule keyed by the controller serial re-applies the value whenever the controller is
    added or goes live again (boot, hot plug, driver rebind, controller reset). With O(save=true) on a controller that
    can save the feature, the controller keeps the value itself and no rule is written.
  - See C(docs/nvme_arbitration.md) in the collection for the feature layout and the lab evidence.
author:
  - aiinfra platform engineering (@aiinfra)
extends_documentation_fragment:
  - aiinfra.io_isolation.attributes
  - aiinfra.io_isolation.attributes.RECONCILE
  - aiinfra.io_isolation.persist
options:
  controllers:
    description:
      - The NVMe controllers to read or set. One call handles several (each module call costs seconds of start-up on
        the managed host, so list all controllers in one task).
      - Each entry is a controller name (V(nvme0)), its character device (V(/dev/nvme0)), the controller serial, or
        any selector of one of its namespaces (V(nvme0n1), a C(/dev) path, a C(/dev/disk/by-id/) link, a WWN or
        V(MAJ:MIN)).
      - A serial or multipath namespace shared by several controllers is refused; name the controllers instead.
        Selectors with shell metacharacters are refused.
    type: list
    elements: str
    required: true
  burst:
    description:
      - Arbitration Burst (AB), as the exponent the register holds; the controller fetches at most 2^O(burst) commands
        from one submission queue at a time. An integer V(0) to V(6) (1 to 64 commands), or V(unlimited).
      - B(Not) the command count - V(3) means 8 commands; V(8) is refused with that hint. V(7) is refused too (it is the
        register's encoding of V(unlimited); write V(unlimited)).
      - The only field of the feature that acts under Linux.
    type: raw
  low_weight:
    description:
      - Low Priority Weight (LPW) as the register holds it, V(0) to V(255). The field is 0's based - the controller uses
        the value plus one, so V(0) is a weight of 1 and V(255) a weight of 256 (C(nvme get-feature -H) prints the
        weight, one more than this value). V(256) is refused.
      - Inert under Linux (see the description); setting it returns a warning.
    type: raw
  medium_weight:
    description:
      - Medium Priority Weight (MPW) as the register holds it, V(0) to V(255) (0's based, like O(low_weight)).
      - Inert under Linux; setting it returns a warning.
    type: raw
  high_weight:
    description:
      - High Priority Weight (HPW) as the register holds it, V(0) to V(255) (0's based, like O(low_weight)).
      - Inert under Linux; setting it returns a warning.
    type: raw
  save:
    description:
      - Set the feature with the Save bit, so that the controller keeps the value across resets and power cycles.
      - Only where Get Features select 3 reports the feature saveable; otherwise the task fails before any change
        (or, with O(when_unsupported=warn), the value is set without saving and a warning says so; O(persist) then
        keeps it with the udev rule).
      - The saved value is compared too, so a controller whose current value matches but whose saved value does not
        is reported as changed.
    type: bool
    default: false
  when_unsupported:
    description:
      - What to do with a controller that cannot take the request (feature not changeable, not saveable with O(save),
        or a Set Features refusal).
      - V(fail) stops the task before the first change. V(warn) skips that controller (nothing changed or persisted for
        it; with O(save) on a controller that cannot save, the value is set without saving) and handles the others.
    type: str
    choices: [fail, warn]
    default: fail
notes:
  - O(persist=true) writes a udev rule keyed by the controller serial
    (C(/etc/udev/rules.d/91-aiinfra-nvme-arbitration-<serial>.rules)). It runs a helper in
    C(/usr/local/libexec/aiinfra-io_isolation/) on the controller's C(add) event (boot coldplug) and on the C(change)
    event with C(NVME_EVENT=connected) that the kernel sends each time the controller goes live - after probe, hot plug
    and every controller reset, which returns features to their saved or default values. The helper waits until the
    controller is live, sends Set Features and records the answer under C(/run/aiinfra-io_isolation/nvme-arbitration/)
    (returned as C(last_boot_apply)).
  - No rule is written for a controller whose feature is not changeable, nor when O(save=true) saved the value in the
    controller (an older rule of this module for that serial is then removed).
  - Needs C(nvme-cli) on the managed host (observed with 2.3 on Debian 12 and 2.13 on Debian 13). The module parses
    nvme-cli's plain output, which both versions print the same way; see the guide for why it does not use
    C(-o json) or the admin ioctl directly.
  - Reading C(CAP)/C(CC) maps the controller's PCI BAR. Debian kernels (C(CONFIG_IO_STRICT_DEVMEM=y)) refuse that
    while the nvme driver owns the device unless booted with C(iomem=relaxed); the module then reports
    C(cc_ams=unknown) with the reason. The driver's own choice (round robin) holds either way.
  - Without O(burst) and weights the module only reads (C(changed=false)), whatever O(save) and O(persist) say.
seealso:
  - module: aiinfra.io_isolation.io_facts
"""

EXAMPLES = r"""
- name: Report the Arbitration feature, capabilities and arbitration mechanism of both NVMe controllers
  aiinfra.io_isolation.nvme_arbitration:
    controllers: [lab-nvme-a, lab-nvme-b]
  register: arbitration

- name: Limit bursts to 8 commands per submission queue (the only field Linux honours), kept by a udev rule
  aiinfra.io_isolation.nvme_arbitration:
    controllers:
      - /dev/nvme0
      - /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab-nvme-b
    burst: 3

- name: Save burst and weights in controllers that support it; skip the others with a warning
  aiinfra.io_isolation.nvme_arbitration:
    controllers: [S6EWNS0W123456, S6EWNS0W654321]
    burst: unlimited
    low_weight: 0
    medium_weight: 3
    high_weight: 7
    save: true
    when_unsupported: warn
"""

RETURN = r"""
controllers:
  description: One entry per controller, in the order given.
  returned: success
  type: list
  elements: dict
  contains:
    controller:
      description: Kernel name of the controller in this boot.
      type: str
      sample: nvme0
    serial:
      description: Controller serial (the identity the udev rule matches).
      type: str
      sample: lab-nvme-a
    status:
      description: V(read) (no field requested), V(unchanged), V(changed) (in check mode - would change) or V(skipped)
        (when_unsupported=warn).
      type: str
      sample: unchanged
    skipped_reason:
      description: Why the controller was skipped, else V(null).
      type: str
    dw11:
      description: Command Dword 11 the controller holds now (current value).
      type: str
      sample: "0x00000007"
    arbitration:
      description: The current value decoded. C(burst) is the exponent or V(unlimited), C(burst_commands) 2^burst (V(null)
        for unlimited), the weights are register values (0's based).
      type: dict
      sample: {burst: unlimited, burst_commands: null, low_weight: 0, medium_weight: 0, high_weight: 0}
    saved:
      description: The saved value (Get Features select 2) decoded, with its C(dw11); V(null) where the controller does not
        support the Select field.
      type: dict
      sample: {dw11: "0x00000007", burst: unlimited, burst_commands: null, low_weight: 0, medium_weight: 0, high_weight: 0}
    capabilities:
      description: Get Features select 3 - C(raw) Dword 0, C(saveable), C(changeable), C(namespace_specific); all V(null)
        with a C(reason) when unknown.
      type: dict
      sample: {raw: "0x00000000", saveable: false, changeable: false, namespace_specific: false, reason: null}
    ams:
      description: Arbitration mechanism from the registers - C(cap_ams) (C(wrr_urgent), C(vendor_specific) supported),
        C(cc_ams) (V(round_robin), V(weighted_round_robin_urgent), V(vendor_specific) or V(unknown)), C(source), the raw
        C(cap) and C(cc), and C(reason) when the registers could not be read.
      type: dict
      sample: {cap_ams: {wrr_urgent: false, vendor_specific: false}, cc_ams: round_robin, source: nvme show-regs,
               cap: "0x4018200f0107ff", cc: "0x460061", reason: null}
    weights_active:
      description: Whether the weights act (only when C(CC.AMS) reads weighted round robin, which Linux never selects).
      type: bool
      sample: false
    persisted_to:
      description: The udev rule that re-applies the value, or V(null).
      type: str
      sample: /etc/udev/rules.d/91-aiinfra-nvme-arbitration-lab-nvme-a.rules
    last_boot_apply:
      description: What the udev helper recorded for this controller in this boot (rc, stderr, waited seconds), or V(null).
      type: dict
    notes:
      description: Further facts, e.g. why nothing was persisted.
      type: list
      elements: str
persisted_to:
  description: The udev rules this call manages.
  returned: success
  type: list
  elements: str
  sample: [/etc/udev/rules.d/91-aiinfra-nvme-arbitration-lab-nvme-a.rules]
diff:
  description: Before and after, keyed by setting (C(arbitration[nvme0]), file paths).
  returned: success
  type: dict
  sample: {before: {"arbitration[nvme0]": {dw11: "0x00000007", burst: unlimited}},
           after: {"arbitration[nvme0]": {dw11: "0x00000003", burst: 3}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_arbitration as _nvme_arbitration
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import PERSIST, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import Runner
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler, exit_module

RAW = {"type": "raw"}


def main():
    module = AnsibleModule(
        argument_spec=merge(PERSIST,
                            controllers={"type": "list", "elements": "str", "required": True},
                            burst=RAW, low_weight=RAW, medium_weight=RAW, high_weight=RAW,
                            save={"type": "bool", "default": False},
                            when_unsupported={"type": "str", "choices": ["fail", "warn"], "default": "fail"}),
        supports_check_mode=True,
    )
    exit_module(module, lambda: _nvme_arbitration.run(module.params, KernelFS(), Runner(module), module.check_mode,
                                                      Reconciler))


if __name__ == "__main__":
    main()
