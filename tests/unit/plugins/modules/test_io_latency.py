# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The io_latency module: refusals end the task with the reason and its fix, before any probe runs."""

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_latency as _latency
from ansible_collections.aiinfra.io_isolation.plugins.modules import io_latency


def test_a_bad_window_fails_the_task(run_module):
    result = run_module(io_latency.main, seconds=0)
    assert result["failed"] and result["msg"] == "seconds=0: the window is 1 to 3600 seconds"


def test_without_root_the_task_says_to_become(run_module, monkeypatch):
    monkeypatch.setattr(_latency.os, "geteuid", lambda: 1000)
    result = run_module(io_latency.main, seconds=5)
    assert result["failed"] and "io_latency needs root: bpftrace loads eBPF programs (run the task with become)" in result["msg"]
    assert "latency" not in result
