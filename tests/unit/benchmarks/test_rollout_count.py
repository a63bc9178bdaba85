# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/rollout: the module_count callback's counting (what is a remote module execution, loop
items against the loop's summary, the modules an action sends), end to end on a local playbook, and
bench.py's summary and verdicts. No VM."""

import json
import os
import statistics
import subprocess
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROLLOUT = os.path.join(HERE, "..", "..", "..", "benchmarks", "rollout")
sys.path.insert(0, HERE)

from benchload import load  # noqa: E402  pylint: disable=wrong-import-position

module_count = load("rollout", "module_count", "callback_plugins")
bench = load("rollout", "bench")


@pytest.mark.parametrize("action,status,loop_summary,delegated,kind", [
    ("ansible.builtin.command", "ok", False, False, "remote"),
    ("ansible.legacy.copy", "failed", False, False, "remote"),  # a failed module still ran
    ("aiinfra.io_isolation.host_profile", "ok", False, False, "remote"),
    ("ansible.posix.sysctl", "ok", False, False, "remote"),
    ("ansible.builtin.set_fact", "ok", False, False, "controller"),
    ("debug", "ok", False, False, "controller"),
    ("ansible.builtin.assert", "failed", False, False, "controller"),
    ("ansible.builtin.include_role", "ok", False, False, "controller"),
    ("ansible.builtin.validate_argument_spec", "ok", False, False, "controller"),
    ("ansible.builtin.reboot", "ok", False, False, "reboot"),
    ("ansible.builtin.command", "skipped", False, False, "skipped"),
    ("ansible.builtin.command", "unreachable", False, False, "unreachable"),
    ("ansible.builtin.command", "ok", False, True, "delegated"),
    ("ansible.builtin.shell", "ok", True, False, None),  # the loop's summary: its items were counted
])
def test_classify(action, status, loop_summary, delegated, kind):
    assert module_count.classify(action, status, loop_summary, delegated) == kind


def test_short_action_keeps_other_collections_qualified():
    assert module_count.short_action("ansible.legacy.stat") == "stat"
    assert module_count.short_action("ansible.builtin.copy") == "copy"
    assert module_count.short_action("ansible.posix.sysctl") == "ansible.posix.sysctl"


def _task(action, loop=None, delegate_to=None):
    return types.SimpleNamespace(action=action, resolved_action=action, loop=loop, loop_with=None,
                                 delegate_to=delegate_to)


def _result(host, task, data=None):
    return types.SimpleNamespace(host=types.SimpleNamespace(get_name=lambda: host), task=task, result=data or {})


def test_callback_counts_items_not_the_loop_summary(tmp_path):
    cb = module_count.CallbackModule()
    loop = _task("ansible.builtin.shell", loop=["a", "b", "c"])
    cb.v2_runner_item_on_ok(_result("h1", loop))
    cb.v2_runner_item_on_ok(_result("h1", loop))
    cb.v2_runner_item_on_skipped(_result("h1", loop))
    cb.v2_runner_on_ok(_result("h1", loop, {"results": [{}, {}, {}]}))
    cb.v2_runner_on_ok(_result("h1", _task("ansible.builtin.set_fact")))
    cb.v2_runner_on_ok(_result("h1", _task("ansible.builtin.copy")))
    cb.v2_runner_on_ok(_result("h1", _task("ansible.builtin.reboot")))
    cb.v2_runner_item_on_failed(_result("h2", _task("ansible.builtin.file", loop=[1]), {"unreachable": True}))
    cb.v2_runner_on_skipped(_result("h2", _task("ansible.builtin.command")))
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps({"host": "h1", "module": m}) + "\n"
                           for m in ("ansible.legacy.command", "ansible.legacy.command", "ansible.legacy.stat",
                                     "ansible.legacy.file")))
    module_count.read_module_runs(str(log), cb.counts)
    got = cb.counts.as_dict()
    assert got["h1"]["remote"] == 3 and got["h1"]["by_action"] == {"shell": 2, "copy": 1}
    assert got["h1"]["reboot"] == 1 and got["h1"]["controller"] == 1 and got["h1"]["skipped"] == 1
    assert got["h1"]["module_runs"] == 4
    assert got["h1"]["module_runs_by_module"] == {"command": 2, "stat": 1, "file": 1}
    assert got["h2"]["remote"] == 0 and got["h2"]["unreachable"] == 1 and got["h2"]["skipped"] == 1


def test_controller_only_list_names_the_usual_suspects():
    for name in ("set_fact", "debug", "assert", "fail", "meta", "include_tasks", "import_tasks", "include_role",
                 "import_role", "validate_argument_spec", "set_stats", "add_host", "group_by", "pause"):
        assert name in module_count.CONTROLLER_ONLY
    assert "reboot" not in module_count.CONTROLLER_ONLY and "reboot" in module_count.SEPARATE


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact: {x: 1}
    - ansible.builtin.debug: {msg: "{{ x }}"}
    - ansible.builtin.command: "true"
      loop: [1, 2, 3]
      when: item != 3
      changed_when: false
    - ansible.builtin.copy: {content: "x\\n", dest: "%(dir)s/f", mode: "0600"}
    - ansible.builtin.include_tasks: included.yml
"""


def test_callback_end_to_end_on_a_local_playbook(tmp_path):
    """A real ansible-playbook run (connection local, writes only into tmp_path): 2 command items and a
    copy are remote executions; copy sends stat then copy, so 4 modules are sent."""
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook):
        pytest.skip("no ansible-playbook beside this Python")
    (tmp_path / "play.yml").write_text(PLAYBOOK % {"dir": tmp_path})
    (tmp_path / "included.yml").write_text("- ansible.builtin.file: {path: '%s/f', state: file}\n" % tmp_path)
    counts = tmp_path / "counts.json"
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROLLOUT, "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="module_count", ROLLOUT_COUNT_FILE=str(counts), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    res = subprocess.run([playbook, "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(tmp_path / "play.yml")], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, check=False, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(counts.read_text())
    h = got["hosts"]["localhost"]
    assert h["by_action"] == {"command": 2, "copy": 1, "file": 1}
    # set_fact, debug and include_tasks (its "included" result reaches the callback too) are the controller's
    assert h["remote"] == 4 and h["skipped"] == 1 and h["controller"] == 3
    assert h["module_runs_by_module"] == {"command": 2, "stat": 1, "copy": 1, "file": 1}
    assert got["stats"]["localhost"]["changed"] == 1
    assert "module_count: localhost: 4 remote module execution(s)" in res.stdout
    assert not os.path.exists(str(counts) + ".module-runs.jsonl")


def _run(method, round_, run, seconds, executions, changed=0):
    return {"method": method, "round": round_, "run": run, "seconds": seconds, "executions": executions,
            "module_runs": executions, "reboots": 0, "changed": changed, "by_action": {"x": executions},
            "module_runs_by_module": {}}


def test_summary_ratios_and_verdicts():
    runs = [_run("handwritten", 0, "cold", 200, 25, 17), _run("site", 0, "cold", 40, 2, 1)]
    for rnd, (h, s) in enumerate((((170, 130, 128), (30, 20, 22)), ((168, 126, 131), (32, 21, 25))), 1):
        for run, hs, ss in zip(bench.RUNS, h, s):
            runs += [_run("handwritten", rnd, run, hs, 25 if run == "converge" else 23), _run("site", rnd, run, ss, 2)]
    summ = bench.summarize(runs)
    assert summ["time"]["converge"]["handwritten"] == {"median": 169.0, "min": 168, "max": 170, "n": 2}
    assert summ["ratio"]["converge"] == round(169.0 / 31.0, 2)
    assert summ["time"]["noop"]["site"]["n"] == 4 and summ["time"]["noop"]["site"]["median"] == 21.5
    assert summ["ratio"]["noop"] == round(129.0 / 21.5, 2)
    assert summ["acceptance"]["converge"]["met"] and summ["acceptance"]["noop"]["met"]
    assert summ["acceptance"]["executions"] == {"target": 2, "got": [2], "met": True}
    assert summ["counts"]["handwritten"]["noop"]["executions"] == [23]
    assert summ["counts"]["handwritten"]["cold"]["changed"] == [17]
    assert [(r["round"], r["run"]) for r in summ["per_round"]] == [(1, "converge"), (1, "noop1"), (1, "noop2"),
                                                                   (2, "converge"), (2, "noop1"), (2, "noop2")]
    assert "executions_reboot" not in summ["acceptance"]
    # The counted converge with a reboot: 3 executions and the reboot; in no ratio.
    rebooted = dict(_run("site", 3, "reboot", 120, 3, 1), reboots=1)
    summ = bench.summarize(runs + [rebooted])
    assert summ["acceptance"]["executions_reboot"] == {"target": 3, "got": [3], "reboots": [1], "met": True}
    assert summ["acceptance"]["executions"]["got"] == [2] and summ["ratio"]["converge"] == round(169.0 / 31.0, 2)
    assert len(summ["per_round"]) == 6
    assert "3 module executions and 1 reboot in 120.0 s (target 3 and a reboot: met)" in bench.markdown(
        {"meta": {"date": "d", "guest": "g", "ansible_core": "c", "git": "h", "tree": ["t"], "rounds": 2,
                  "warmup": True, "accel": "tcg"}, "summary": summ, "runs": runs + [rebooted]})
    assert not bench.summarize(runs + [dict(rebooted, executions=4)])["acceptance"]["executions_reboot"]["met"]
    runs.append(_run("site", 2, "noop2", 22, 8))
    assert not bench.summarize(runs)["acceptance"]["executions"]["met"]


def test_state_diff_and_settings_check():
    settings = bench.load_settings()
    assert bench.diff({"a": {"b": 1}}, {"a": {"b": 2}, "c": 3}) == ["/a/b: 1 != 2", "/c: None != 3"]
    inf, trn = settings["rollout_inference"], settings["rollout_training"]
    qos = "enable=1 ctrl=user rpct=95.00"
    state = {
        "disks": {s: {"iocost_model": "ctrl=user model=linear rbps=%d rseqiops=1" % settings["rollout_iocost_model"]["rbps"],
                      "iocost_qos": qos, "scheduler": "[%s] none" % settings["rollout_scheduler"],
                      "read_ahead_kb": str(settings["rollout_read_ahead_kb"])} for s in settings["rollout_disks"]},
        "sysctls": {k: str(v) for k, v in settings["rollout_sysctls"].items()},
        "nvme_options": {"poll_queues": str(settings["rollout_nvme_poll_queues"])},
        "slices": {inf["slice"]: {"io.weight": "default %d" % inf["io_weight"], "memory.low": str(inf["memory_low"]),
                                  "memory.min": str(inf["memory_min"]), "cpu.weight": str(inf["cpu_weight"])},
                   trn["slice"]: {"io.weight": "default %d" % trn["io_weight"], "memory.high": str(trn["memory_high"]),
                                  "cpu.weight": str(trn["cpu_weight"])}},
        "persisted": [],
    }
    assert bench.settings_problems(state, settings) == []
    assert bench.configured(state)
    state["slices"][trn["slice"]]["cpu.weight"] = "50"
    assert bench.settings_problems(state, settings) == ["%s cpu.weight: 50" % trn["slice"]]
    idle = {"disks": {"lab-nvme-a": {"iocost_qos": "off"}}, "slices": {"inference.slice": None},
            "persisted": ["/etc/sysctl.d/99-sysctl.conf"]}
    assert bench.configured(idle) == []


def test_lean_method_and_the_ping_beside_each_no_op():
    """issue 40: the lean hand-written playbook as a third method, and site.yml's no-op against the ping timed just
    before it (per pair and of the medians), with the <= 2.5x verdict."""
    runs, pings = [], []
    times = {"handwritten": (170, 130, 128), "lean": (80, 60, 62), "site": (30, 20, 22)}
    for rnd in (1, 2):
        for m, secs in times.items():
            for run, t in zip(bench.RUNS, secs):
                if run.startswith("noop"):
                    pings.append({"round": rnd, "before": [m, run], "seconds": 8.0 if m == "site" else 4.0})
                runs.append(_run(m, rnd, run, t + rnd, 2 if m == "site" else 14))
    summ = bench.summarize(runs, pings)
    lean, site = [61, 63, 62, 64], [21, 23, 22, 24]     # the no-ops, round 1 then round 2
    assert summ["ratio"]["lean"]["noop"] == round(statistics.median(lean) / statistics.median(site), 2)
    assert summ["ratio"]["handwritten"]["converge"] == summ["ratio"]["converge"] == round(171.5 / 31.5, 2)
    per = [a / b for a, b in zip(lean, site)]
    assert summ["ratios"]["lean"]["noop"] == {"median": round(statistics.median(per), 2), "min": round(min(per), 2),
                                              "max": round(max(per), 2), "n": 4}
    # the site.yml no-op against the ping just before it (8 s), not against the other methods' pings (4 s)
    assert summ["ping"]["pairs"] == {"median": round(22.5 / 8, 2), "min": round(21 / 8, 2), "max": round(24 / 8, 2),
                                     "n": 4}
    assert summ["ping"]["time"]["n"] == 12 and summ["ping"]["ratio_of_medians"] == round(22.5 / 4.0, 2)
    assert summ["acceptance"]["noop_vs_ping"]["met"] is False
    fast = [dict(p, seconds=10.0) for p in pings]
    assert bench.summarize(runs, fast)["acceptance"]["noop_vs_ping"]["met"] is True     # 22.5 / 10 <= 2.5
    text = bench.markdown({"meta": {"date": "d", "guest": "g", "ansible_core": "c", "git": "h", "tree": ["t"],
                                    "rounds": 2, "warmup": False, "accel": "tcg"},
                           "summary": summ, "runs": runs, "pings": pings})
    assert "| lean hand-written / site.yml |" in text and "≤ 2.5× (NOT met)" in text
    # a subset of the methods (--methods lean,site): no issue 22 verdict without handwritten.yml
    subset = [r for r in runs if r["method"] != "handwritten"]
    text = bench.markdown({"meta": {"date": "d", "guest": "g", "ansible_core": "c", "git": "h", "tree": ["t"],
                                    "rounds": 2, "warmup": False, "accel": "tcg"},
                           "summary": bench.summarize(subset, pings), "runs": subset, "pings": pings})
    assert "Issue 22" not in text and "| hand-written |" not in text
