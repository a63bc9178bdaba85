# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvme-arbitration-apply: re-applies NVMe Arbitration (Set Features FID 0x01) when a controller is
added or goes live (a udev RUN program; ``NVME_EVENT=connected`` comes after probe and after every
controller reset, which resets features).

PRIVATE to aiinfra.io_isolation. The nvme_arbitration module installs this file's own text, behind a
shebang and the managed stamp, as ``/usr/local/libexec/aiinfra-io_isolation/nvme-arbitration-apply``
(``_persist.BOOT_HELPERS``); its udev rules (``91-aiinfra-nvme-arbitration-*.rules``) run it as
``nvme-arbitration-apply nvmeN 0xDWORD11``. Admin commands need the controller's state "live" (the
driver refuses to open the device before), so it waits for that (bounded), sends Set Features and
records the answer under :data:`STATUS_DIR`, where the module reads it back (``last_boot_apply``).
It runs on the managed host alone: Python 3 standard library only, nothing imported from the
collection. :func:`set_feature_argv` is also what the module itself runs, so the command is built
in one place.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys
import time

WAIT_LIVE_SECONDS = 30
STATUS_DIR = "/run/aiinfra-io_isolation/nvme-arbitration"
FID_ARBITRATION = 0x01
NVME_PATHS = ("/usr/sbin/nvme", "/usr/bin/nvme", "/sbin/nvme")


def set_feature_argv(nvme, dev_path, feature_id, dword11, save=False):
    """nvme-cli's Set Features command line. Long options only: nvme-cli 2.13 renamed the short form of
    --value to -V and made -v --verbose, so "-v 0x03020103" there sends Dword 11 = 0 and exits 0
    (observed with FID 0x04 on the lab guest)."""
    argv = [nvme, "set-feature", dev_path, "--feature-id=%d" % feature_id, "--value=0x%08x" % dword11]
    if save:
        argv.append("--save")
    return argv


def status_name(serial):
    """The status file's name for a controller serial (file-name-safe)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", serial).strip("_")[:120] + ".json"


def attr(name, key):
    try:
        with open("/sys/class/nvme/%s/%s" % (name, key)) as f:
            return f.read().strip()
    except OSError:
        return None


def main(argv):
    if len(argv) != 2 or not re.match(r"^nvme[0-9]+$", argv[0]) or not re.match(r"^0x[0-9a-f]{8}$", argv[1]):
        sys.stderr.write("usage: nvme-arbitration-apply nvmeN 0xDWORD11\n")
        return 2
    name, dw11 = argv
    start = time.time()
    state_at_add = state = attr(name, "state")
    while state != "live" and time.time() - start < WAIT_LIVE_SECONDS:
        time.sleep(0.1)
        state = attr(name, "state")
    waited = time.time() - start
    nvme = next((p for p in NVME_PATHS if os.access(p, os.X_OK)), "nvme")
    argv = set_feature_argv(nvme, "/dev/" + name, FID_ARBITRATION, int(dw11, 16))
    env = dict(os.environ, LANG="C", LC_ALL="C")
    if state != "live":
        rc, err = 1, "controller state is %r after %d s, not live" % (state, WAIT_LIVE_SECONDS)
    else:
        try:
            # udev runs this file as a program, outside any Ansible module: no run_command here
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60,  # pylint: disable=ansible-bad-function
                                  check=False)
            lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            rc, err = proc.returncode, lines[0] if lines else ""
        except (OSError, subprocess.SubprocessError) as e:
            rc, err = 1, str(e)
    serial = attr(name, "serial") or name
    status = {"controller": name, "serial": serial, "dw11": dw11, "argv": argv, "rc": rc, "stderr": err,
              "state_at_add": state_at_add, "state": state, "waited_for_live_seconds": round(waited, 2),
              "seconds": round(time.time() - start, 2), "time": time.time()}
    try:
        if not os.path.isdir(STATUS_DIR):
            os.makedirs(STATUS_DIR)
        path = os.path.join(STATUS_DIR, status_name(serial))
        with open(path + ".tmp", "w") as f:
            json.dump(status, f, sort_keys=True)
        os.rename(path + ".tmp", path)
    except OSError as e:
        sys.stderr.write("nvme-arbitration-apply: cannot record status: %s\n" % e)
    if rc:
        sys.stderr.write("nvme-arbitration-apply: %s: %s\n" % (" ".join(argv), err))
    return 1 if rc else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
