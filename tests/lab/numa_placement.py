# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""CPU and NUMA placement on a real kernel and systemd (issue 39): a lab guest with two NUMA nodes and its second
NVMe controller behind node 1's PCIe expander bridge (``lab.py up --numa``), then:

1. io_facts reports two nodes (a CPU and memory each), the node of each NVMe controller (lab-nvme-b's on node 1)
   and its hardware queues' CPUs (two poll queues, ``nvme.poll_queues=2``: every CPU is in the poll map, one poll
   queue per CPU); the cpu_placement filter's ``auto`` and ``poll`` put inference on node 1's CPU;
2. the cgroup module gives inference.slice ``cpu.cpus``/``cpu.mems`` (systemd's AllowedCPUs=/AllowedMemoryNodes=):
   ``cpuset.cpus(.effective)``/``cpuset.mems(.effective)`` read back, systemctl shows the properties, a process
   started in the slice may run and allocate on those alone (/proc/PID/status), and a re-run changes nothing;
3. CPU 999, an empty list and node 5 are refused with the module's error and nothing is written;
4. after a reboot the slice holds them (the drop-in); ``state: absent`` takes them away;
5. site.yml with ``inference_cpus: auto`` and ``training_cpus: auto`` puts inference.slice on node 1 and
   training.slice on node 0, and its re-run changes nothing; verify.yml reports OK, and DRIFT naming cpuset.cpus
   once AllowedCPUs is widened by hand; purge.yml takes them away.
  usage: .venv/bin/python tests/lab/numa_placement.py VENV_BIN [--guest debian12|debian13] [--keep]  (the filter needs ansible)
"""

import argparse
import json
import os
import subprocess
import sys
import time

import labcall
from labcall import REPO, lab, module

DROPIN = "/etc/systemd/system/inference.slice.d"


def say(msg):
    print("numa-placement: %s" % msg, flush=True)


guest = labcall.guest_out


def playbook(bin_dir, inventory, groups, name, extra):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.cache/installed" % (REPO, REPO))
    return subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", inventory, "-i", groups,
                           os.path.join(REPO, "playbooks", name), "-e", extra], text=True, capture_output=True,
                          env=env, check=False)


def kernel_view(name):
    """What the kernel and systemd hold for inference.slice's cpuset."""
    out = guest(name, "cd /sys/fs/cgroup; echo \"root=$(cat cgroup.subtree_control)\"; for f in cpuset.cpus "
                      "cpuset.cpus.effective cpuset.mems cpuset.mems.effective; do echo \"$f=$(cat inference.slice/$f "
                      "2>/dev/null || echo -)\"; done; systemctl show -p AllowedCPUs -p AllowedMemoryNodes "
                      "inference.slice; echo \"dropin=$(cat %s/*.conf 2>/dev/null | grep -E '^Allowed' | tr '\\n' ' ')\""
                      % DROPIN)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def in_slice(name):
    """Cpus_allowed_list and Mems_allowed_list of a process started in inference.slice."""
    out = guest(name, "systemd-run --quiet --slice=inference.slice --unit=numa-probe sleep 60; sleep 1; "
                      "pid=$(systemctl show -P MainPID numa-probe.service); grep -E '^(Cpus|Mems)_allowed_list' "
                      "/proc/$pid/status; cat /proc/$pid/cgroup; systemctl stop numa-probe.service")
    return dict((k.strip(), v.strip()) for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("bin", help="the venv's bin directory (ansible)")
    p.add_argument("--guest", default="debian13")
    p.add_argument("--keep", action="store_true", help="leave the VM running")
    a = p.parse_args()
    sys.path.insert(0, os.path.join(REPO, ".cache", "collections"))
    from ansible_collections.aiinfra.io_isolation.plugins.filter.io_isolation import cpu_placement

    name = "numa-" + a.guest
    t0 = time.monotonic()
    lab("down", name, "--purge")
    say(lab("up", a.guest, "--name", name, "--fresh-root", "--numa", "--append", "nvme.poll_queues=2")
        .stdout.strip().splitlines()[-1])
    inventory = os.path.join(REPO, ".cache", name + "-inventory.yml")
    try:
        with open(inventory, "w") as f:
            f.write(lab("inventory", name).stdout)

        # 1. facts and the auto placement
        facts = module(a.bin, inventory, name, "aiinfra.io_isolation.io_facts", {})
        assert not facts.get("failed"), facts
        io = facts["ansible_facts"]["io_isolation"]
        topo = io["topology"]
        say("topology: numa %s, nodes %s, memory nodes %s, accelerators %s" % (
            topo.get("numa"), [(n["node"], n.get("cpus")) for n in topo["nodes"]], topo.get("memory_nodes"),
            topo.get("accelerators")))
        assert topo["numa"] and [(n["node"], n["cpus"]) for n in topo["nodes"]] == [(0, [0]), (1, [1])], topo
        assert topo.get("memory_nodes") == [0, 1], topo
        nodes = {}
        for ctrl, info in sorted(io["nvme"].items()):
            nodes[info.get("serial")] = info.get("numa_node")
            say("%s (%s): node %s, queue CPUs %s, poll queues' CPUs %s, queues %s" % (
                ctrl, info.get("serial"), info.get("numa_node"), info.get("queue_cpus"), info.get("poll_queue_cpus"),
                info.get("queues")))
        assert nodes.get("lab-nvme-b") == 1, nodes
        nvme_b = [info for info in io["nvme"].values() if info.get("serial") == "lab-nvme-b"][0]
        assert nvme_b["queue_cpus"]["poll"] == [0, 1] and sorted(nvme_b["poll_queue_cpus"]) == [[0], [1]], nvme_b
        polled = cpu_placement(io, {"inference_cpus": "poll", "training_cpus": "auto"}, [{"device": "lab-nvme-b"}])
        say("cpu_placement poll: %s" % json.dumps(polled))
        assert (polled["inference"]["cpus"], polled["training"]["cpus"]) == ("1", "0"), polled
        placement = cpu_placement(io, {"inference_cpus": "auto", "training_cpus": "auto"}, [{"device": "lab-nvme-b"}])
        say("cpu_placement auto: %s" % json.dumps(placement))
        assert placement["inference"]["cpus"] == "1" and placement["inference"]["mems"] == "1", placement
        assert placement["training"]["cpus"] == "0", placement

        # 2. the slice's cpuset through systemd
        want = {"cpus": placement["inference"]["cpus"], "mems": placement["inference"]["mems"]}
        args = {"name": "inference.slice", "create": True, "cpu": want}
        first = module(a.bin, inventory, name, "aiinfra.io_isolation.cgroup", args)
        assert not first.get("failed") and first["changed"], first
        view = kernel_view(name)
        say("after the apply: %s" % view)
        assert (view["cpuset.cpus"], view["cpuset.mems"]) == ("1", "1"), view
        assert (view["cpuset.cpus.effective"], view["cpuset.mems.effective"]) == ("1", "1"), view
        assert (view["AllowedCPUs"], view["AllowedMemoryNodes"]) == ("1", "1"), view
        assert "cpuset" in view["root"].split(), view
        proc = in_slice(name)
        say("a process in the slice: %s" % proc)
        assert proc.get("Cpus_allowed_list") == "1" and proc.get("Mems_allowed_list") == "1", proc
        again = module(a.bin, inventory, name, "aiinfra.io_isolation.cgroup", args)
        assert not again.get("failed") and not again["changed"], again
        guest(name, "systemctl daemon-reload")
        assert kernel_view(name) == view, "daemon-reload changed the cpuset"

        # 3. refusals: nothing written
        for bad in ({"cpus": "0-1,999"}, {"cpus": ""}, {"mems": "5"}):
            before = guest(name, "cat %s/*.conf; cat /sys/fs/cgroup/inference.slice/cpuset.cpus "
                                 "/sys/fs/cgroup/inference.slice/cpuset.mems" % DROPIN)
            r = module(a.bin, inventory, name, "aiinfra.io_isolation.cgroup", {"name": "inference.slice", "cpu": bad})
            after = guest(name, "cat %s/*.conf; cat /sys/fs/cgroup/inference.slice/cpuset.cpus "
                                "/sys/fs/cgroup/inference.slice/cpuset.mems" % DROPIN)
            assert r.get("failed") and before == after, (bad, r, before, after)
            say("refused %s, nothing written: %s" % (bad, r["msg"][:220]))

        # 4. persistence and removal
        say(lab("reboot", name).stdout.strip().splitlines()[-1])
        # nothing wants an empty slice at boot: systemd realizes it (and its cpuset) when a unit starts in it
        guest(name, "systemd-run --quiet --slice=inference.slice --unit=numa-hold sleep 300")
        after_boot = kernel_view(name)
        assert {k: after_boot[k] for k in view if k != "root"} == {k: view[k] for k in view if k != "root"}, after_boot
        assert in_slice(name).get("Cpus_allowed_list") == "1"
        guest(name, "systemctl stop numa-hold.service")
        say("after the reboot, with a unit in the slice: %s" % after_boot)
        gone = module(a.bin, inventory, name, "aiinfra.io_isolation.cgroup", dict(args, state="absent"))
        assert not gone.get("failed") and gone["changed"], gone
        view = kernel_view(name)
        say("after state=absent: %s" % view)
        assert view["AllowedCPUs"] == "" and view["AllowedMemoryNodes"] == "", view
        assert view["cpuset.cpus.effective"] in ("0-1", "-"), view
        assert in_slice(name).get("Cpus_allowed_list") == "0-1"

        # 5. the roles
        groups = os.path.join(REPO, ".cache", name + "-groups.yml")
        with open(groups, "w") as f:
            f.write("all:\n  children:\n    inference:\n      hosts:\n        %s:\n    training:\n      hosts:\n"
                    "        %s:\n" % (name, name))
        extra = json.dumps({"inference_cpus": "auto", "training_cpus": "auto", "io_isolation_serial": 1})
        for run in (1, 2):
            r = playbook(a.bin, inventory, groups, "site.yml", extra)
            recap = [line for line in r.stdout.splitlines() if line.startswith(name + " ")]
            say("site.yml run %d: rc %d, %s" % (run, r.returncode, recap))
            assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
            if run == 2:
                assert recap and " changed=0 " in recap[-1], recap
        slices = guest(name, "for s in inference training; do echo \"$s $(cat /sys/fs/cgroup/$s.slice/cpuset.cpus."
                             "effective) $(cat /sys/fs/cgroup/$s.slice/cpuset.mems.effective)\"; done")
        say("the roles' slices (cpuset.cpus.effective, cpuset.mems.effective): %s" % slices.split("\n"))
        assert slices.split("\n")[:2] == ["inference 1 1", "training 0 0"], slices
        # verify.yml judges the cpusets: OK as applied, DRIFT once an operator widens AllowedCPUs by hand
        r = playbook(a.bin, inventory, groups, "verify.yml", extra)
        say("verify.yml: rc %d, %s" % (r.returncode, [line.strip() for line in r.stdout.splitlines()
                                                      if "OK: %s holds" % name in line][:1]))
        assert r.returncode == 0 and "OK: %s holds" % name in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
        guest(name, "systemctl set-property --runtime inference.slice AllowedCPUs=0-1")
        r = playbook(a.bin, inventory, groups, "verify.yml", extra)
        out = r.stdout + r.stderr
        drift = [line.strip()[:200] for line in out.splitlines() if "DRIFT on %s" % name in line]
        say("verify.yml after AllowedCPUs=0-1 by hand: rc %d, %s" % (r.returncode, drift[:1]))
        assert r.returncode != 0 and drift and "cpuset.cpus" in drift[0], out[-4000:]
        r = playbook(a.bin, inventory, groups, "purge.yml", "{}")
        assert r.returncode == 0, r.stdout[-4000:]
        left = guest(name, "systemctl show -p AllowedCPUs --value inference.slice training.slice")
        assert left.split() == [], left
        say("passed on %s in %.0f s" % (a.guest, time.monotonic() - t0))
    finally:
        if not a.keep:
            say(lab("down", name, "--purge", check=False).stdout.strip())


if __name__ == "__main__":
    main()
