# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""iocost-apply: re-applies iocost settings at device add (a udev RUN program).

PRIVATE to aiinfra.io_isolation. The iocost module installs this file's own text, behind a shebang
and the managed stamp, as ``/usr/local/libexec/aiinfra-io_isolation/iocost-apply``
(``_persist.BOOT_HELPERS``), and its udev rules (``91-aiinfra-iocost-*.rules``) run it with the
MAJ:MIN udev gives and ``file:token,token`` arguments. It writes one line per write() to the root
cgroup files in argument order (model before qos). It runs on the managed host alone: Python 3
standard library only, nothing imported from the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import sys

ALLOWED = ("io.cost.model", "io.cost.qos")
# _kernelfs.CGROUP_ROOT: this helper runs at boot outside the collection (a unit test holds the two equal).
CGROUP_ROOT = "/sys/fs/cgroup"


def main(argv):
    if len(argv) < 2 or not re.match(r"^[0-9]+:[0-9]+$", argv[0]):
        sys.stderr.write("usage: iocost-apply MAJ:MIN file:token,token ...\n")
        return 2
    status = 0
    for arg in argv[1:]:
        name, _sep, tokens = arg.partition(":")
        if name not in ALLOWED or not re.match(r"^[a-z]+=[A-Za-z0-9.]+(,[a-z]+=[A-Za-z0-9.]+)*$", tokens):
            sys.stderr.write("iocost-apply: refusing %r\n" % arg)
            return 2
        line = ("%s %s\n" % (argv[0], tokens.replace(",", " "))).encode()
        try:
            fd = os.open(CGROUP_ROOT + "/" + name, os.O_WRONLY)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as e:
            report("writing %r to %s/%s failed: %s" % (line, CGROUP_ROOT, name, e))
            status = 1
    return status


def report(msg):
    # udev logs a failing RUN program only at debug level: put it in the kernel log as well,
    # where dmesg and journalctl -k show it.
    sys.stderr.write("iocost-apply: %s\n" % msg)
    try:
        fd = os.open("/dev/kmsg", os.O_WRONLY)
        try:
            os.write(fd, ("<3>aiinfra-iocost-apply: %s\n" % msg).encode())
        finally:
            os.close(fd)
    except OSError:
        pass


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
