# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/lab.py: a guest kernel panic during a boot is seen in the serial log, only after the offset
given (the earlier boots' output stays in the same file)."""

import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab"))

import lab  # noqa: E402  pylint: disable=wrong-import-position

OOPS = ("[    2.742583] Oops: int3: 0000 [#2] PREEMPT SMP NOPTI\n"
        "[    2.742962] Kernel panic - not syncing: Fatal exception in interrupt\n")


def test_a_panic_after_the_offset_is_seen_and_one_before_it_is_not(tmp_path):
    inst = types.SimpleNamespace(run=tmp_path, name="co-debian13")
    assert lab.serial_size(inst) == 0 and not lab.panicked(inst, 0)
    (tmp_path / "serial.log").write_text("[    1.0] first boot\n" + OOPS + "[    0.0] second boot\n")
    since = lab.serial_size(inst)
    assert lab.panicked(inst, 0) and not lab.panicked(inst, since)
    with open(tmp_path / "serial.log", "a") as f:
        f.write("[    2.7] Booting SMP\n" + OOPS)
    assert lab.panicked(inst, since)


def test_wait_ssh_returns_at_once_on_a_panic_when_the_caller_retries(tmp_path, monkeypatch):
    inst = types.SimpleNamespace(run=tmp_path, name="co-debian13")
    (tmp_path / "serial.log").write_text(OOPS)
    monkeypatch.setattr(lab, "_pid_alive", lambda pid: True)

    def no_ssh(*_args, **_kwargs):
        raise AssertionError("no SSH after a panic")

    monkeypatch.setattr(lab, "ssh_run", no_ssh)
    monkeypatch.setattr(lab, "log", lambda msg: None)
    assert lab.wait_ssh({"pid": 1, "port": 2222}, 600, inst, fatal=False, panic_since=0) is None


def test_wait_ssh_gives_up_on_a_silent_console_when_the_caller_retries(tmp_path, monkeypatch):
    """The CI demo's hung boot: the kernel's last line at 61.8 s, then nothing until the 420 s timeout."""
    inst = types.SimpleNamespace(run=tmp_path, name="demo")
    (tmp_path / "serial.log").write_text("[   61.766146] iTCO_wdt iTCO_wdt.1.auto: Found a ICH9 TCO device\n")
    clock = [1000.0]
    monkeypatch.setattr(lab.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(lab.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(lab, "_pid_alive", lambda pid: True)
    monkeypatch.setattr(lab, "log", lambda msg: None)
    growing = []

    def no_answer(*_args, **_kwargs):
        if growing:     # a console still writing: the wait goes on
            with open(tmp_path / "serial.log", "a") as f:
                f.write("[  OK  ] Started something.\n")
        raise lab.subprocess.TimeoutExpired("ssh", 20)

    monkeypatch.setattr(lab, "ssh_run", no_answer)
    assert lab.wait_ssh({"pid": 1, "port": 2222}, 600, inst, fatal=False, panic_since=0) is None
    assert lab.STALL_S <= clock[0] - 1000.0 < lab.STALL_S + 5, "gave up once the console was silent for STALL_S"
    growing.append(True)
    clock[0] = 1000.0
    assert lab.wait_ssh({"pid": 1, "port": 2222}, 600, inst, fatal=False, panic_since=0) is None
    assert clock[0] - 1000.0 >= 600, "a console that keeps writing is waited for until the timeout"
