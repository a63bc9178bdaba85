# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/lab.py --hotplug: nvme-b behind a hot-pluggable PCIe root port (the one place q35 can hot-remove it
from), nvme-a where it always is; `unplug` refuses what it cannot remove before it talks to QEMU."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab"))

import lab  # noqa: E402  pylint: disable=wrong-import-position

from test_lab_disk_capacity import META  # noqa: E402  pylint: disable=wrong-import-position


def _devices(args):
    return [args[i + 1] for i, a in enumerate(args) if a == "-device"]


def test_nvme_b_sits_behind_the_root_port(tmp_path):
    class Inst:
        dir = tmp_path
    plain = _devices(lab.qemu_disk_args(Inst(), META, False, False))
    hot = _devices(lab.qemu_disk_args(Inst(), META, False, False, hotplug=True))
    port = "pcie-root-port,id=hotplug-port,bus=pcie.0,addr=0x1d,chassis=2,slot=2"
    assert port in hot and port not in plain
    assert "nvme,id=nvme-b,serial=lab-nvme-b,bus=hotplug-port" in hot
    # nvme-a keeps its slot on pcie.0; everything else is as without --hotplug
    assert [d for d in hot if d.startswith("nvme,id=nvme-a")] == [d for d in plain if d.startswith("nvme,id=nvme-a")]
    assert len(hot) == len(plain) + 1


def test_unplug_refuses_a_vm_without_the_root_port(monkeypatch, capsys):
    class Inst:
        name = "vm"

        def __init__(self, name):
            pass

        def running_state(self):
            return {"qmp": "/nonexistent", "hotplug": False}
    monkeypatch.setattr(lab, "Instance", Inst)
    monkeypatch.setattr(lab, "qmp", lambda *a, **k: pytest.fail("QMP called"))
    with pytest.raises(SystemExit):
        lab.main(["unplug", "vm"])
    assert "only nvme-b of a VM booted with --hotplug can be hot-removed" in capsys.readouterr().err


def test_hotplug_and_numa_both_place_nvme_b(capsys):
    with pytest.raises(SystemExit):
        lab.main(["up", "debian12", "--hotplug", "--numa"])
    assert "--hotplug and --numa both place nvme-b" in capsys.readouterr().err
