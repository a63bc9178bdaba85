# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Jobs the way AWX runs them, without AWX: its split of an inventory for job slicing, one job as ansible-runner
runs it (AWX's engine: a private data directory, the project checkout, extra vars, the job's events and its
set_stats artifact), and its merge of the slices' artifacts for the next workflow node. Used by the sliced verify's
unit test (tests/unit/playbooks/test_sliced_verify.py) and the lab's (tests/lab/fleet_report.py)."""

import os
import sys

import yaml

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.path.dirname(sys.executable)


def awx_slices(names, count):
    """AWX's split of an inventory for job slicing (ansible/awx at e21dd0a, awx/main/models/inventory.py):
    get_script_data takes the inventory's enabled hosts ``order_by('name')`` and get_sliced_hosts gives slice
    ``slice_number`` of ``slice_count`` the hosts ``[slice_number - 1::slice_count]``."""
    ordered = sorted(names)
    return [ordered[number - 1::count] for number in range(1, count + 1)]


def slice_inventory(inventory, hosts):
    """A YAML inventory (``all`` with vars, hosts and child groups) cut to ``hosts``, as get_script_data cuts it: the
    groups keep only the slice's hosts, the variables are kept whole."""
    hosts = set(hosts)
    top = inventory["all"]
    out = {"all": {"vars": dict(top.get("vars") or {}), "children": {}}}
    if top.get("hosts"):
        out["all"]["hosts"] = dict((h, v) for h, v in top["hosts"].items() if h in hosts)
    for group, body in (top.get("children") or {}).items():
        members = dict((h, v) for h, v in ((body or {}).get("hosts") or {}).items() if h in hosts)
        if members:
            out["all"]["children"][group] = dict(body, hosts=members)
    return out


def inventory_hosts(inventory):
    top = inventory["all"]
    names = set(top.get("hosts") or {})
    for body in (top.get("children") or {}).values():
        names.update((body or {}).get("hosts") or {})
    return sorted(names)


def run_job(base, ident, playbook, inventory, extravars, envvars=None, timeout=1800):
    """One job: its own private data directory under ``base``, the checkout as its project, the inventory and extra
    vars; ``envvars`` on top of this checkout's collection and tools. Returns the ansible_runner Runner."""
    import ansible_runner  # pylint: disable=import-outside-toplevel
    pdd = os.path.join(base, ident)
    os.makedirs(os.path.join(pdd, "inventory"))
    os.symlink(REPO, os.path.join(pdd, "project"))
    with open(os.path.join(pdd, "inventory", "hosts.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(inventory, f)
    env = {"ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".cache", "collections"), "ANSIBLE_NOCOLOR": "1",
           "PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(envvars or {})
    # A cancel callback of our own, as AWX gives one: without it ansible-runner installs SIGTERM and SIGINT handlers
    # in this process and leaves them there (a later test of a module's SIGTERM handling found one).
    return ansible_runner.run(private_data_dir=pdd, playbook=playbook, ident=ident, extravars=extravars,
                              envvars=env, quiet=True, timeout=timeout, cancel_callback=lambda: False)


def artifact_data(runner):
    """The job's set_stats data, as AWX reads it (the playbook_on_stats event's artifact_data)."""
    stats = [e["event_data"] for e in runner.events if e.get("event") == "playbook_on_stats"]
    if len(stats) != 1:
        raise AssertionError("job %s has %d stats events" % (runner.config.ident, len(stats)))
    return stats[0].get("artifact_data") or {}


def awx_merge(runners):
    """What the next workflow node gets of a sliced job: WorkflowJob.get_effective_artifacts
    (awx/main/models/workflow.py) updates one dict with each finished slice job's artifacts in (finished, id)
    order; the node's job gets it as extra vars."""
    merged = {}
    for runner in runners:
        merged.update(artifact_data(runner))
    return merged


def hosts_of(runner):
    """The hosts a job's events name."""
    return set(e["event_data"]["host"] for e in runner.events
               if e.get("event", "").startswith("runner_on_") and e["event_data"].get("host"))
