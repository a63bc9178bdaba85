# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A connection that answers module executions from recorded results instead of running them (make bench-fleet).

Everything on the controller runs as in a real run - argument specs, templating, the roles' filters, the strategy,
forks, callbacks, and the building of each module's AnsiballZ payload - and the payload is handed to this
connection as to any pipelining one. Instead of a remote Python, exec_command reads the module's name and
arguments out of the payload and answers with what the module would print:

* io_facts: the host's recorded result (FLEET_DIR/hosts/<host>.json, written by benchmarks/fleet/bench.py);
* host_profile: a result as the module returns it for a host that already holds what the arguments ask (each
  section unchanged, each cgroup's kernel values as asked, the NVMe queues without a reboot, no I/O pressure) -
  except on the hosts the fleet marks as drifted, where the sysctl section reports ``vm.swappiness`` 60 against 10
  (changed, in check mode: verify.yml's DRIFT);
* any other module: a failed result naming it (the roles' two executions are all a site.yml or verify.yml run of
  the benchmark's fleet makes; anything else is a change to measure first);
* a host whose record has ``"unreachable": true``: the connection fails, as for a host that does not answer (the
  fleet report's tests).

Each call appends a line (host, module, CPU seconds this stand-in took) to FLEET_DIR/calls.log, so that the
benchmark can report the controller's cost without it and check that every host got its own recorded facts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import ast
import json
import os
import re
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = r"""
name: fleet_replay
short_description: Answer module executions from recorded results (benchmarks/fleet)
description:
  - A benchmark-only connection - the remote side of io_facts and host_profile replaced by recorded results, so that
    only the controller's work is measured. Needs pipelining.
author: aiinfra.io_isolation contributors
options:
  fleet_dir:
    description: The fleet's directory (hosts/<host>.json, calls.log).
    default: ""
    env:
      - name: FLEET_DIR
    vars:
      - name: fleet_dir
  args_dir:
    description: Where to write each module's arguments as the controller sent them (<host>.<module>.json); none if empty.
    default: ""
    env:
      - name: FLEET_ARGS_DIR
"""

# The wrapper ansible-core writes around a module (module_common: one "key=repr(value)," line per argument).
_ARG_RE = re.compile(r"^(module_fqn|params)=(.*),$", re.MULTILINE)
SECTIONS = ("iocost", "blk_queue", "sysctl", "nvme_queues", "placement", "container_runtime")
DRIFT_SYSCTL = ("vm.swappiness", "60")
PSI_NONE = {"some": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0},
            "full": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0}}


def parse_payload(data):
    """(module short name, module arguments) of a pipelined AnsiballZ payload."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    found = dict((k, ast.literal_eval(v)) for k, v in _ARG_RE.findall(text))
    if "module_fqn" not in found or "params" not in found:
        raise AnsibleError("fleet_replay: not an AnsiballZ payload of this ansible-core (no module_fqn/params)")
    params = json.loads(found["params"])
    return found["module_fqn"].rsplit(".", 1)[-1], params.get("ANSIBLE_MODULE_ARGS", params)


def _devices(facts):
    """The host's io_facts devices by every selector a role passes (stable_selector, name)."""
    out = {}
    for dev in (facts.get("devices") or {}).values():
        identity = dev["identity"]
        for key in ("stable_selector", "name", "serial"):
            if identity.get(key):
                out[str(identity[key])] = dev
    return out


def _cgroup_result(entry, devices, check):
    """The cgroup module's result for a group that holds what ``entry`` asks (its io, memory and cpu options)."""
    name = entry.get("name")
    io, memory, cpu = entry.get("io") or {}, entry.get("memory") or {}, entry.get("cpu") or {}
    kernel = {}
    if io.get("weight") is not None:
        kernel["io.weight"] = {"default": io["weight"]}
    for key in ("min", "low", "high", "max"):
        if memory.get(key) is not None:
            kernel["memory." + key] = memory[key]
    if cpu.get("weight") is not None:
        kernel["cpu.weight"] = cpu["weight"]
    selectors = dict((str(d), devices[str(d)]["identity"]["majmin"]) for d in (io.get("max") or {}) if str(d) in devices)
    if selectors:
        kernel["io.max"] = dict((devices[d]["identity"]["majmin"], io["max"][d]) for d in selectors)
    unit_dir = "/etc/systemd/system/%s" % name
    return {"changed": False, "name": name, "manager": "systemd", "cgroup": "/sys/fs/cgroup/%s" % name,
            "kernel": kernel, "devices": selectors, "diff": {"before": {}, "after": {}},
            "persisted_to": [unit_dir, unit_dir + ".d/50-aiinfra-io-isolation.conf"], "check_mode": check}


def host_profile_result(args, facts, drift, check):
    """What host_profile returns for these arguments on a host that holds them (the sysctl drifted with ``drift``)."""
    devices = _devices(facts)
    sections = {}
    iocost = args.get("iocost")
    if iocost:
        out = []
        for item in iocost.get("devices") or []:
            dev = devices.get(str(item.get("device")))
            if dev is None:
                raise AnsibleError("fleet_replay: host_profile iocost names %s, which the host's facts lack"
                                   % item.get("device"))
            qos = dict(item.get("qos") or {}, enable=1, ctrl="user")
            out.append({"device": dev["identity"], "model": dict(item.get("model") or {}), "qos": qos,
                        "persisted_to": ["/etc/udev/rules.d/91-aiinfra-iocost-%s.rules"
                                         % dev["identity"]["stable_id"].replace(":", "_")]})
        sections["iocost"] = {"changed": False, "devices": out, "diff": {"before": {}, "after": {}}}
    blk = args.get("blk_queue")
    if blk:
        sections["blk_queue"] = {"changed": False, "devices": [], "persisted_to": [], "diff": {"before": {}, "after": {}}}
    sysctl = args.get("sysctl")
    if sysctl:
        wanted = dict((str(k), str(v)) for k, v in (sysctl.get("sysctls") or {}).items())
        result = {"changed": False, "kernel": dict(wanted), "paths": dict(
            (k, "/proc/sys/" + k.replace(".", "/")) for k in wanted), "mapped": {}, "debug_interfaces": [],
            "absent": [], "persisted_to": {"/etc/sysctl.d/90-aiinfra-io-isolation.conf": dict(wanted)},
            "diff": {"before": {}, "after": {}}}
        key, value = DRIFT_SYSCTL
        if drift and key in wanted:
            result["changed"] = True
            result["kernel"][key] = value if check else wanted[key]
            result["diff"] = {"before": {key: value}, "after": {key: wanted[key]}}
        sections["sysctl"] = result
    if args.get("nvme_queues"):
        sections["nvme_queues"] = {"changed": False, "reboot_required": False, "diff": {"before": {}, "after": {}}}
    for name in ("placement", "container_runtime"):
        if args.get(name):
            sections[name] = {"changed": False, "restart_required": [], "diff": {"before": {}, "after": {}}}
    cgroups = dict((e.get("name"), _cgroup_result(e, devices, check)) for e in args.get("cgroups") or [])
    pressure = {"host": {"io": PSI_NONE}, "cgroups": dict(
        (name, {"path": "/sys/fs/cgroup/" + name, "exists": True, "io": PSI_NONE}) for name in args.get("pressure") or [])}
    changed = any(s.get("changed") for s in sections.values())
    result = {"changed": changed, "sections": sections, "cgroups": cgroups, "reboot_required": False,
              "pressure": pressure, "diff": {"before": {}, "after": {}},
              "substrate": {"cgroup_mode": "unified", "memory_recursiveprot": True, "errors": [], "warnings": []}}
    if args.get("tenancy"):
        result["tenancy"] = {"slices": {}, "disks": {}, "drift": []}
    return result


def respond(module, args, record):
    """The module's result for one host's ``record`` ({"io_facts": result, "drift": bool})."""
    check = bool(args.get("_ansible_check_mode"))
    if module == "io_facts":
        return record["io_facts"]
    if module == "host_profile":
        return host_profile_result(args, record["io_facts"]["ansible_facts"]["io_isolation"], record.get("drift"), check)
    return {"failed": True, "msg": "fleet_replay has no recorded result for the module %s" % module}


class Connection(ConnectionBase):
    """Pipelined module executions answered from FLEET_DIR; no other command is expected."""

    transport = "fleet_replay"
    has_pipelining = True

    def _connect(self):
        self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if not in_data:
            raise AnsibleError("fleet_replay runs pipelined modules only (ansible_pipelining true), got %r" % cmd)
        start = time.process_time()
        fleet_dir = self.get_option("fleet_dir")
        host = self._play_context.remote_addr
        module, args = parse_payload(in_data)
        with open(os.path.join(fleet_dir, "hosts", host + ".json"), encoding="utf-8") as f:
            record = json.load(f)
        if record.get("unreachable"):
            raise AnsibleConnectionFailure("fleet_replay: %s is recorded as unreachable" % host)
        out = json.dumps(respond(module, args, record))
        if self.get_option("args_dir"):
            # the arguments the roles planned, for comparing planning code before and after a change
            with open(os.path.join(self.get_option("args_dir"), "%s.%s.json" % (host, module)), "w",
                      encoding="utf-8") as f:
                json.dump(dict((k, v) for k, v in args.items() if not k.startswith("_ansible_")), f, sort_keys=True)
        with open(os.path.join(fleet_dir, "calls.log"), "a", encoding="utf-8") as log:
            log.write("%s %s %.6f\n" % (host, module, time.process_time() - start))
        return 0, out.encode("utf-8"), b""

    def put_file(self, in_path, out_path):
        raise AnsibleError("fleet_replay copies no files (%s)" % in_path)

    def fetch_file(self, in_path, out_path):
        raise AnsibleError("fleet_replay fetches no files (%s)" % in_path)

    def close(self):
        self._connected = False
