# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A disk hot-removed mid-run (issue 38), on a lab guest whose lab-nvme-b sits behind a hot-pluggable PCIe root port
(``lab.py up --hotplug``; ``lab.py unplug`` is QMP device_del, the guest lets the controller go):

1. site.yml (both tenants, both NVMe disks), then site.yml again with a block-queue change for every data disk,
   lab-nvme-b hot-removed right after its io_facts task returned (callback_plugins/lab_hot_remove.py: the play goes
   on only once the disk is gone). The apply must fail with an error that names the disk (its serial) and says
   nothing was changed, without a traceback; every managed file and lab-nvme-a's queue and iocost state are as
   before. Then purge.yml removes everything, the gone disk's udev rules too, and site.yml converges again on the
   disks left.
2. After a power cycle (lab-nvme-b back), iocost_calibrate on lab-nvme-b with lab-nvme-b hot-removed while fio
   runs: the call fails naming the disk as gone, without a traceback; no calibration journal is left behind;
   lab-nvme-a's state is as before; and a calibration of lab-nvme-a then runs (no leftover stops it).
  usage: python3 tests/lab/hot_remove.py VENV_BIN [--guest debian12|debian13] [--name N] [--keep]
"""

import argparse
import os
import subprocess
import threading
import time

import labcall
from labcall import REPO, lab, module

GONE, KEPT = "lab-nvme-b", "lab-nvme-a"
# the hex of lab-nvme-b's serial: the nvme driver's wwid for its namespace, and its rule files' names, hold it
GONE_HEX = GONE.encode().hex()
# Every file the collection manages on the host (its stamp names it), with its checksum: as power_cut.sh.
MANAGED = ('grep -rlIZ "Managed by Ansible (aiinfra.io_isolation)" /etc /usr/local/libexec /var/lib/aiinfra-io_isolation '
           '2>/dev/null | sort -z | xargs -0 -r sha256sum')
# A disk's kernel state as the collection sets it: its queue attributes and its iocost lines.
DISK_STATE = r'''d=; for b in /sys/block/nvme*; do [ "$(tr -d ' ' < $b/device/serial 2>/dev/null)" = "%s" ] && d=${b##*/}; done
[ -n "$d" ] || { echo "no disk with serial %s"; exit 1; }
mm=$(cat /sys/block/$d/dev); echo "$d $mm"
for a in scheduler nomerges nr_requests read_ahead_kb rq_affinity max_sectors_kb wbt_lat_usec; do
  echo "$a=$(cat /sys/block/$d/queue/$a)"; done
grep -H "^$mm " /sys/fs/cgroup/io.cost.model /sys/fs/cgroup/io.cost.qos || true'''
CALIBRATE = {"destructive": True, "measure_qos": False, "solutions": {"measure": False},
             "stop_rule": {"passes": 1, "min_seconds": 3, "max_seconds": 5, "ramp_seconds": 1}}


say = labcall.Say("hot-remove")
fail = say.fail
guest = labcall.guest_out


def playbook(bin_dir, inv, groups, name, *extra, hook=None):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.cache/installed" % (REPO, REPO))
    if hook:
        env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, "tests", "lab", "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="lab_hot_remove", LAB_HOT_REMOVE_NAME=hook)
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", inv, "-i", groups,
                        os.path.join(REPO, "playbooks", name)] + list(extra),
                       text=True, capture_output=True, env=env, check=False)
    return r, time.monotonic() - t0


def boot(args, fresh):
    r = lab("up", args.guest, "--name", args.name, "--hotplug", *(["--fresh-root"] if fresh else []), check=False)
    if r.returncode != 0:
        fail("lab.py up", r.stdout + r.stderr)
    inv = os.path.join(REPO, ".cache", "%s-inventory.yml" % args.name)
    with open(inv, "w") as f:
        f.write(lab("inventory", args.name).stdout)
    return inv


def rollout(args, inv, groups):
    name = args.name
    r, took = playbook(args.bin, inv, groups, "site.yml")
    if r.returncode != 0:
        fail("site.yml", r.stdout + r.stderr)
    rules = guest(name, "ls /etc/udev/rules.d/ | grep -c %s || true" % GONE_HEX).strip()
    say("1. site.yml on both disks in %.0f s: %s rule file(s) of %s" % (took, rules, GONE))
    if rules in ("", "0"):
        fail("site.yml wrote no rule for %s: the purge would have nothing to show" % GONE)
    files, kept = guest(name, MANAGED), guest(name, DISK_STATE % (KEPT, KEPT))
    r, took = playbook(args.bin, inv, groups, "site.yml", "-e", '{"io_baseline_blk_queue": {"read_ahead_kb": 256}}',
                       hook=name)
    out = r.stdout + r.stderr
    if "hot-removed" not in out:
        fail("the hook did not hot-remove %s after io_facts" % GONE, out)
    if r.returncode == 0:
        fail("site.yml passed although %s was removed between io_facts and the apply" % GONE, out)
    fatal = [line for line in out.splitlines() if line.startswith("fatal:")]
    if not fatal or "Traceback" in out or GONE not in fatal[0] or "nothing was changed" not in fatal[0]:
        fail("the apply's error does not name %s, say nothing was changed, or has a traceback" % GONE, out)
    if guest(name, MANAGED) != files:
        fail("managed files changed by the failed apply")
    after = guest(name, DISK_STATE % (KEPT, KEPT))
    if after != kept:
        fail("%s changed by the failed apply:\nbefore:\n%s\nafter:\n%s" % (KEPT, kept, after))
    say("   site.yml with %s hot-removed after io_facts: failed in %.0f s, naming it: %s"
        % (GONE, took, fatal[0][fatal[0].find('"msg"'):][:400]))
    say("   %d managed files and %s's queue and iocost state as before the run" % (len(files.splitlines()), KEPT))
    r, took = playbook(args.bin, inv, groups, "purge.yml")
    if r.returncode != 0:
        fail("purge.yml with %s gone" % GONE, r.stdout + r.stderr)
    left = guest(name, MANAGED)
    gone_rules = guest(name, "ls /etc/udev/rules.d/ | grep %s || true" % GONE_HEX).strip()
    if left.strip() or gone_rules:
        fail("managed files left after purge.yml: %s %s" % (left, gone_rules))
    say("   purge.yml in %.0f s: no managed file left, %s's rules too" % (took, GONE))
    r, took = playbook(args.bin, inv, groups, "site.yml")
    if r.returncode != 0:
        fail("site.yml on the disks left", r.stdout + r.stderr)
    say("   site.yml again, on the disks left: passed in %.0f s" % took)


def calibration(args, inv):
    name = args.name
    kept = guest(name, DISK_STATE % (KEPT, KEPT))
    unplugged = {}

    def pull():
        # wait for fio on the guest, let it run 3 s, then pull the disk
        for _attempt in range(600):
            if labcall.guest(name, "pgrep -x fio >/dev/null", check=False).returncode == 0:
                break
            time.sleep(0.5)
        else:
            unplugged["error"] = "fio never started"
            return
        time.sleep(3)
        unplugged["at"] = time.monotonic()
        unplugged["out"] = lab("unplug", name, check=False)
    watcher = threading.Thread(target=pull)
    watcher.start()
    t0 = time.monotonic()
    res = module(args.bin, inv, name, "aiinfra.io_isolation.iocost_calibrate", dict(CALIBRATE, device=GONE))
    watcher.join()
    if "error" in unplugged or unplugged["out"].returncode != 0:
        fail("the hot-remove during the calibration: %s" % (unplugged.get("error") or unplugged["out"].stderr))
    msg = str(res.get("msg"))
    if not res.get("failed"):
        fail("the calibration of %s passed although the disk was removed mid-run" % GONE, str(res))
    if "left the host while it was being calibrated" not in msg or "serial %s" % GONE not in msg or \
            "Traceback" in str(res.get("module_stderr", "")) + msg:
        fail("the calibration's error does not name the gone disk", str(res))
    journals = guest(name, "ls /run/aiinfra-io_isolation/ 2>/dev/null | grep -c '^calibrate-' || true").strip()
    if journals not in ("", "0"):
        fail("a calibration journal was left behind: %s" % journals)
    if guest(name, DISK_STATE % (KEPT, KEPT)) != kept:
        fail("%s changed by the failed calibration" % KEPT)
    say("2. iocost_calibrate on %s, hot-removed %.0f s into the call: failed in %.0f s: %s"
        % (GONE, unplugged["at"] - t0, time.monotonic() - t0, msg[:300]))
    say("   no journal left, %s as before" % KEPT)
    t0 = time.monotonic()
    res = module(args.bin, inv, name, "aiinfra.io_isolation.iocost_calibrate", dict(CALIBRATE, device=KEPT))
    if res.get("failed"):
        fail("the calibration of %s after the removal" % KEPT, str(res.get("msg")))
    if guest(name, DISK_STATE % (KEPT, KEPT)) != kept:
        fail("%s not put back by its calibration" % KEPT)
    say("   then iocost_calibrate on %s: passed in %.0f s (rrandiops %s), the disk put back"
        % (KEPT, time.monotonic() - t0, (res.get("model") or {}).get("rrandiops")))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("bin", help="the venv's bin directory (ansible, ansible-playbook)")
    p.add_argument("--guest", default="debian12", choices=("debian12", "debian13"))
    p.add_argument("--name", default="hotremove")
    p.add_argument("--keep", action="store_true", help="leave the VM running")
    args = p.parse_args()
    args.bin = os.path.abspath(args.bin)
    t0 = time.monotonic()
    lab("down", args.name, "--purge", check=False)
    try:
        inv = boot(args, fresh=True)
        groups = os.path.join(REPO, ".cache", "%s-groups.yml" % args.name)
        with open(groups, "w") as f:
            f.write("all:\n  children:\n    inference:\n      hosts:\n        %s:\n    training:\n      hosts:\n"
                    "        %s:\n" % (args.name, args.name))
        rollout(args, inv, groups)
        lab("down", args.name)      # a power cycle brings lab-nvme-b back; the root disk stays
        inv = boot(args, fresh=False)
        calibration(args, inv)
        say("passed on %s in %.0f s" % (args.guest, time.monotonic() - t0))
    finally:
        if not args.keep:
            lab("down", args.name, "--purge", check=False)


if __name__ == "__main__":
    main()
