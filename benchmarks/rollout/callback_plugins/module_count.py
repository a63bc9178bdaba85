# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Count the remote module executions of a playbook run, per host (make bench-rollout).

Two counts, both per host:

* ``remote``: task results whose action runs a module on the host - one per result, one per loop
  item (the loop's summary result is not counted again); skipped results and the controller-only
  actions of CONTROLLER_ONLY are not counted, ``reboot`` is counted on its own (``reboot``), a
  delegated task under ``delegated`` and an unreachable one under ``unreachable``.
* ``module_runs``: every module an action plugin sends to a host, seen where the action layer sends
  it (``ActionBase._execute_module``, wrapped in the worker processes, which fork from this one).
  Most actions send one module, but some send more: ``copy`` and ``template`` send ``stat`` and then
  ``copy`` (content differs) or ``file`` (it does not), so this count can exceed ``remote``.

Enable with ANSIBLE_CALLBACK_PLUGINS=<this directory> ANSIBLE_CALLBACKS_ENABLED=module_count; the
counts go to ROLLOUT_COUNT_FILE (JSON) and a line per host is printed at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import collections
import json
import os

from ansible.plugins.callback import CallbackBase

try:
    from ansible.plugins.action import ActionBase
except ImportError:  # pragma: no cover - every ansible-core this collection supports has it
    ActionBase = None

DOCUMENTATION = r"""
name: module_count
type: aggregate
short_description: Count remote module executions per host
description:
  - Counts, per host, the task results that ran a module on the host and the modules the action
    plugins sent, and writes them to a JSON file (benchmarks/rollout, make bench-rollout).
options:
  count_file:
    description: Where to write the counts (JSON); empty writes none.
    default: ""
    env:
      - name: ROLLOUT_COUNT_FILE
"""

# Actions that run entirely in the controller's process: no module goes to the host, so a result of
# one of these is not a remote module execution. (include_*/import_* and meta are handled by the
# strategy and usually produce no runner result at all; they are listed so that they never count.)
CONTROLLER_ONLY = frozenset((
    "set_fact",
    "debug",
    "assert",
    "fail",
    "meta",
    "pause",
    "include",
    "include_tasks",
    "import_tasks",
    "include_role",
    "import_role",
    "import_playbook",
    "include_vars",
    "validate_argument_spec",
    "set_stats",
    "add_host",
    "group_by",
    "noop",
))

# Actions counted on their own: a reboot is a remote round trip of its own kind (a command, then the
# wait for the host to come back), not a module execution.
SEPARATE = frozenset(("reboot",))

_PREFIXES = ("ansible.builtin.", "ansible.legacy.")
EXEC_LOG_ENV = "ROLLOUT_MODULE_RUNS_LOG"


def short_action(action):
    """The action's name without the ansible.builtin./ansible.legacy. prefix; other collections'
    names stay fully qualified."""
    action = action or ""
    for prefix in _PREFIXES:
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


def classify(action, status, loop_summary=False, delegated=False):
    """What one task result counts as: "remote", "controller", "reboot", "delegated", "unreachable",
    "skipped", or None for a loop's summary result (its items were counted one by one).

    status: "ok", "failed", "skipped" or "unreachable"."""
    if loop_summary:
        return None
    if status == "skipped":
        return "skipped"
    name = short_action(action)
    if name in CONTROLLER_ONLY:
        return "controller"
    if status == "unreachable":
        return "unreachable"
    if name in SEPARATE:
        return "reboot"
    if delegated:
        return "delegated"
    return "remote"


class Counts:
    """Per-host tallies of classify()'s kinds, and of remote results by action."""

    KINDS = ("remote", "reboot", "delegated", "unreachable", "controller", "skipped")

    def __init__(self):
        self.hosts = collections.OrderedDict()

    def host(self, name):
        if name not in self.hosts:
            self.hosts[name] = dict({k: 0 for k in self.KINDS}, by_action=collections.Counter(),
                                    module_runs=0, module_runs_by_module=collections.Counter())
        return self.hosts[name]

    def add(self, host, action, status, loop_summary=False, delegated=False):
        kind = classify(action, status, loop_summary, delegated)
        if kind is None:
            return None
        h = self.host(host)
        h[kind] += 1
        if kind == "remote":
            h["by_action"][short_action(action)] += 1
        return kind

    def add_module_run(self, host, module):
        h = self.host(host)
        h["module_runs"] += 1
        h["module_runs_by_module"][short_action(module)] += 1

    def as_dict(self):
        return {name: dict(h, by_action=dict(h["by_action"]), module_runs_by_module=dict(h["module_runs_by_module"]))
                for name, h in self.hosts.items()}


def read_module_runs(path, counts):
    """Add the worker processes' module runs (JSON lines {host, module}) to counts."""
    if not path or not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                run = json.loads(line)
                counts.add_module_run(run["host"], run["module"])


def _wrap_execute_module(log_path):
    """Wrap ActionBase._execute_module so that each module an action sends to a host is logged (one JSON
    line, appended) before it goes: the workers that run the actions are forked from this process."""
    if ActionBase is None or getattr(ActionBase._execute_module, "_rollout_counted", False):
        return
    original = ActionBase._execute_module

    def _execute_module(self, module_name=None, module_args=None, tmp=None, task_vars=None, *args, **kwargs):
        try:
            host = (task_vars or {}).get("inventory_hostname") or self._play_context.remote_addr
            line = json.dumps({"host": str(host), "module": str(module_name or self._task.action)}) + "\n"
            fd = os.open(os.environ.get(EXEC_LOG_ENV, log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except Exception:  # pylint: disable=broad-except  # counting must never break the run
            pass
        return original(self, module_name, module_args, tmp, task_vars, *args, **kwargs)

    _execute_module._rollout_counted = True  # pylint: disable=protected-access
    ActionBase._execute_module = _execute_module


def _is_loop(task):
    return bool(getattr(task, "loop", None) is not None or getattr(task, "loop_with", None))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "module_count"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.counts = Counts()
        self.count_file = ""
        self.runs_log = ""

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super(CallbackModule, self).set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self.count_file = self.get_option("count_file") or ""
        if self.count_file:
            self.runs_log = self.count_file + ".module-runs.jsonl"
            if os.path.exists(self.runs_log):
                os.unlink(self.runs_log)
            os.environ[EXEC_LOG_ENV] = self.runs_log
            _wrap_execute_module(self.runs_log)

    def _add(self, result, status, item=False):
        task = getattr(result, "task", None) or result._task  # pylint: disable=protected-access
        host = (getattr(result, "host", None) or result._host).get_name()  # pylint: disable=protected-access
        action = getattr(task, "resolved_action", None) or task.action
        loop_summary = not item and _is_loop(task)
        delegated = bool(getattr(task, "delegate_to", None))
        self.counts.add(host, action, status, loop_summary, delegated)

    def v2_runner_on_ok(self, result):
        self._add(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._add(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._add(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._add(result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._add(result, "ok", item=True)

    def v2_runner_item_on_failed(self, result):
        status = "unreachable" if (getattr(result, "result", None) or result._result).get("unreachable") else "failed"  # pylint: disable=protected-access
        self._add(result, status, item=True)

    def v2_runner_item_on_skipped(self, result):
        self._add(result, "skipped", item=True)

    def v2_playbook_on_stats(self, stats):
        read_module_runs(self.runs_log, self.counts)
        out = {"hosts": self.counts.as_dict(), "stats": {}}
        for host in sorted(stats.processed.keys()):
            out["stats"][host] = stats.summarize(host)
        for host, h in out["hosts"].items():
            self._display.display("module_count: %s: %d remote module execution(s) (%s), %d module(s) sent, "
                                  "%d reboot(s)" % (host, h["remote"], ", ".join("%s %d" % kv for kv in sorted(h["by_action"].items())),
                                                    h["module_runs"], h["reboot"]))
        if self.count_file:
            with open(self.count_file, "w") as f:
                json.dump(out, f, indent=2, sort_keys=True)
            if self.runs_log and os.path.exists(self.runs_log):
                os.unlink(self.runs_log)
