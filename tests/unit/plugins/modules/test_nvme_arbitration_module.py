# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvme_arbitration through AnsibleModule: a fake sysfs like the lab guests and SimNvme answering with
the nvme-cli outputs recorded there (the success path on synthetic controller states)."""

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import NVME_ARBITRATION_HELPER
from ansible_collections.aiinfra.io_isolation.plugins.modules import nvme_arbitration

from sim.nvme import SimNvme, recorded_host

RULE_A = "/etc/udev/rules.d/91-aiinfra-nvme-arbitration-lab-nvme-a.rules"


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    """A host like the lab VM (debian12 booted without iomem=relaxed unless the test reconfigures it)."""
    def build(guest="debian12", iomem=False):
        h = recorded_host(tmp_path / ("%s-%s" % (guest, iomem)), guest, iomem)
        h.nvme = SimNvme.from_recording(guest, iomem)
        h.fs = KernelFS(h.root)
        h.warnings = []
        monkeypatch.setattr(nvme_arbitration, "KernelFS", lambda: h.fs)
        monkeypatch.setattr(nvme_arbitration, "Runner", lambda module: h.nvme)
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: h.warnings.append(msg))
        h.run = lambda **args: run_module(nvme_arbitration.main, **args)
        return h
    return build


def written(host):
    out = []
    for base in ("etc", "usr", "run"):
        for dirpath, _dirs, files in os.walk(os.path.join(host.root, base)):
            out.extend(os.path.join(dirpath, f) for f in files)
    return out


@pytest.mark.parametrize("args, words", [
    ({"high_weight": 256}, ["high_weight=256 is out of range", "0..255", "for a weight of 256 write high_weight: 255"]),
    ({"burst": 8}, ["burst=8 is out of range", "AB exponent", "for 8 commands write burst: 3"]),
    ({"burst": "8"}, ["burst='8' is out of range", "write burst: 3"]),
    ({"controllers": ["nvme0; reboot"], "burst": 3}, ["'nvme0; reboot' has characters", "(';')"]),
    ({"controllers": ["/dev/nvme0 $(id)"], "burst": 3}, ["'$'", "'('", "')'"]),
    ({"controllers": ["nvme7"], "burst": 3}, ["No NVMe controller nvme7", "nvme0 (serial lab-nvme-a"]),
    ({"controllers": ["no-such-serial"], "burst": 3}, ["No NVMe controller matches 'no-such-serial'"]),
])
def test_bad_inputs_fail_clearly_and_touch_nothing(lab, args, words):
    host = lab()
    full = {"controllers": ["lab-nvme-a", "lab-nvme-b"]}
    full.update(args)
    result = host.run(**full)
    assert result.get("failed"), result
    for word in words:
        assert word in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"]
    assert host.nvme.set_calls() == [] and written(host) == []
    if "controllers" not in args:
        assert host.nvme.calls == [], "input errors stop before the first nvme command"


def test_unknown_controller_lists_what_exists(lab):
    result = lab().run(controllers=["nvme7"])
    assert result["failed"] and [c["name"] for c in result["candidates"]] == ["nvme0", "nvme1"]


def test_read_path_on_the_recorded_debian12_guest(lab):
    host = lab("debian12", False)
    result = host.run(controllers=["lab-nvme-a", "/dev/nvme1"])
    assert not result.get("failed"), result
    assert result["changed"] is False and host.warnings == []
    a, b = result["controllers"]
    assert (a["controller"], a["matched_by"], b["matched_by"]) == ("nvme0", "controller serial", "controller name")
    assert a["dw11"] == "0x00000007" and a["arbitration"]["burst"] == "unlimited" and a["status"] == "read"
    assert a["capabilities"]["changeable"] is False and a["capabilities"]["saveable"] is False
    assert a["ams"]["cc_ams"] == "unknown" and "iomem=relaxed" in a["ams"]["reason"]
    assert "get-property: Invalid argument" in a["ams"]["reason"]


def test_read_path_on_the_recorded_debian13_guest_with_iomem_relaxed(lab):
    host = lab("debian13", True)
    result = host.run(controllers=["nvme0n1"])
    c = result["controllers"][0]
    assert c["ams"] == {"cap_ams": {"wrr_urgent": False, "vendor_specific": False}, "cc_ams": "round_robin",
                        "source": "nvme show-regs", "reason": None, "cap": "0x4018200f0107ff", "cc": "0x460061"}
    assert c["weights_active"] is False and c["matched_by"] == "namespace nvme0n1"


def test_matching_request_is_unchanged_and_warns_that_weights_are_inert(lab):
    host = lab("debian13", False)
    result = host.run(controllers=["lab-nvme-a", "lab-nvme-b"], burst="unlimited", low_weight=0, medium_weight=0,
                      high_weight=0)
    assert result["changed"] is False and result["persisted_to"] == [] and written(host) == []
    assert [c["status"] for c in result["controllers"]] == ["unchanged", "unchanged"]
    # 6.12 probes asynchronously: in this recorded boot the controller at 09.0 (lab-nvme-b) became nvme0
    assert [c["controller"] for c in result["controllers"]] == ["nvme1", "nvme0"]
    assert len(host.warnings) == 2 and all("the arbitration weights have no effect" in w for w in host.warnings)
    assert "Invalid Command Opcode" in host.warnings[0], "2.13's answer to show-regs without iomem=relaxed"


def test_refusal_fails_and_warn_skips(lab):
    host = lab("debian13", False)
    result = host.run(controllers=["lab-nvme-a", "lab-nvme-b"], burst=3, high_weight=7, save=True)
    assert result["failed"] and "nothing was changed" in result["msg"]
    assert "0x410e Feature Not Changeable" in result["msg"] and len(result["errors"]) == 2
    assert host.nvme.set_calls() == [] and written(host) == []
    skipped = host.run(controllers=["lab-nvme-a", "lab-nvme-b"], burst=3, high_weight=7, save=True,
                       when_unsupported="warn")
    assert not skipped.get("failed") and skipped["changed"] is False
    assert [c["status"] for c in skipped["controllers"]] == ["skipped", "skipped"]
    assert sum("skipped: when_unsupported=warn" in w for w in host.warnings) == 2
    assert host.nvme.set_calls() == [] and written(host) == []


def test_success_path_on_synthetic_controllers(lab):
    host = lab("debian12", True)
    for name in ("nvme0", "nvme1"):
        host.nvme[name].configure(capabilities=0x4)  # synthetic: changeable, not saveable
    check = host.run(controllers=["lab-nvme-a"], burst=3, _ansible_check_mode=True)
    assert check["changed"] is True and host.nvme.set_calls() == [] and written(host) == []
    result = host.run(controllers=["lab-nvme-a", "lab-nvme-b"], burst=3)
    assert not result.get("failed"), result
    assert result["changed"] is True
    assert result["diff"]["before"]["arbitration[nvme0]"]["burst"] == "unlimited"
    assert result["diff"]["after"]["arbitration[nvme0]"] == {"dw11": "0x00000003", "burst": 3, "burst_commands": 8,
                                                             "low_weight": 0, "medium_weight": 0, "high_weight": 0}
    assert RULE_A in result["persisted_to"] and os.path.exists(host.path(RULE_A))
    assert os.path.exists(host.path(NVME_ARBITRATION_HELPER.path))
    assert host.warnings == [], "burst alone draws no weight warning"
    again = host.run(controllers=["lab-nvme-a", "lab-nvme-b"], burst=3)
    assert again["changed"] is False


def test_failure_at_write_is_reported_with_the_nvme_status(lab):
    host = lab("debian12", True)
    for name in ("nvme0", "nvme1"):
        host.nvme[name].configure(oncs=0x0d)  # synthetic: no Select support, so the refusal is not predicted
    result = host.run(controllers=["lab-nvme-a"], burst=3)
    assert result["failed"]
    assert "refused Set Features Arbitration (FID 0x01) value 0x00000003" in result["msg"]
    assert result["kernel_error"]["nvme_status"] == {"value": "0x410e", "name": "Feature Not Changeable", "sct": 1,
                                                     "sc": "0x0e", "dnr": True,
                                                     "nvme_cli": ("Feature Not Changeable: The Feature Identifier is "
                                                                  "not able to be changed")}
    assert written(host) == []
