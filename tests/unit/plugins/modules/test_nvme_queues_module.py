# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvme_queues through AnsibleModule against a fake host whose nvme files behave like the driver's.

The simulator (SimNvme, Initramfs, Lab) is tests/unit/sim/nvme.py.
"""

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as nq
from ansible_collections.aiinfra.io_isolation.plugins.modules import nvme_queues

from sim import nvme as simnvme


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    lab = simnvme.Lab(tmp_path)
    warnings = []
    monkeypatch.setattr(nvme_queues, "KernelFS", lambda: lab.sim)
    monkeypatch.setattr(nvme_queues, "Runner", lambda module: lab.runner)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, msg: warnings.append(msg))
    lab.warnings = warnings
    lab.module = lambda **args: run_module(nvme_queues.main, **args)
    return lab


def test_persist_then_idempotent(lab):
    result = lab.module(poll_queues=1)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["reboot_required"] is True
    assert result["persisted"]["options"] == {"poll_queues": 1}
    assert lab.conf().splitlines()[-1] == "options nvme poll_queues=1"
    assert lab.sim.writes == [] and lab.nvme.resets == []
    assert "warnings" not in result and lab.warnings == []
    again = lab.module(poll_queues=1)
    assert again["changed"] is False and again["reboot_required"] is True


def test_after_reboot_map(lab):
    lab.module(poll_queues=1)
    lab.nvme.boot(poll_queues=1)
    result = lab.module(poll_queues=1)
    assert result["changed"] is False and result["queue_map_ok"] is True and result["reboot_required"] is False
    assert result["parameters"]["poll_queues"] == 1
    assert [c["namespaces"][n + "n1"]["io_poll"] for n, c in sorted(result["controllers"].items())] == [1, 1]


def test_check_mode(lab, run_module):
    result = lab.module(poll_queues=1, _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] is True and lab.etc_files() == []
    assert result["diff"]["before"] == {nq.CONF_PATH: None}


@pytest.mark.parametrize("args, needle", [
    ({"poll_queues": 3}, "poll_queues=3 is more than the 2 possible CPUs"),
    ({"write_queues": 3}, "write_queues=3 is more than the 2 possible CPUs"),
    ({"poll_queues": -1}, "poll_queues=-1: must be 0 or more"),
    ({"io_queue_depth": 4096}, "io_queue_depth=4096: the driver takes 2 to 4095"),
    ({"io_queue_depth": 0}, "io_queue_depth=0"),
    ({"poll_queues": "1; reboot"}, "poll_queues"),
    ({"state": "present"}, "state=present needs at least one of"),
    ({"poll_queues": 1, "reset_controllers": True}, "reset_controllers=true refused"),
])
def test_bad_input_is_a_clear_error_and_writes_nothing(lab, args, needle):
    result = lab.module(**args)
    assert result.get("failed") is True and needle in result["msg"], result
    assert "Traceback" not in result["msg"]
    assert lab.sim.writes == [] and lab.nvme.resets == [] and lab.etc_files() == []


def test_unsafe_runtime_message_names_the_controllers_and_the_way_out(lab):
    result = lab.module(poll_queues=1, reset_controllers=True)
    assert "nvme0 runs 2/0/0 default/read/poll (debugfs); poll_queues=1 would add poll queues" in result["msg"]
    assert "nvme1 runs 2/0/0" in result["msg"] and "30-second timeout" in result["msg"]
    assert "Leave reset_controllers=false" in result["msg"] and "nothing was changed" in result["msg"]


def test_absent(lab):
    lab.module(poll_queues=1)
    result = lab.module(state="absent")
    assert result["changed"] is True and lab.conf() is None and result["reboot_required"] is False
    assert lab.module(state="absent")["changed"] is False


def test_initramfs_need_is_a_warning(tmp_path, monkeypatch, run_module):
    lab = simnvme.Lab(tmp_path, initramfs=simnvme.LAB_INITRAMFS + simnvme.NVME_IN_INITRAMFS)
    warnings = []
    monkeypatch.setattr(nvme_queues, "KernelFS", lambda: lab.sim)
    monkeypatch.setattr(nvme_queues, "Runner", lambda module: lab.runner)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, msg: warnings.append(msg))
    result = run_module(nvme_queues.main, poll_queues=1)
    assert result["changed"] is True and result["action_required"] == warnings
    assert "update-initramfs -u -k" in warnings[0]
