# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated kernel files: ``SimKernel`` is a KernelFS whose pseudo-files behave like kernel files (a
write is parsed by a handler, not stored), and the kernel's own parsers the handlers use (a refusal is
an OSError with the kernel's errno). The subsystems attach their handlers to it: sim/iocost.py,
sim/blk_queue.py, sim/nvme.py, sim/sysctl.py; sim/cgroup.py is a SimKernel of its own.
"""

import errno
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS, KernelFileError


class SimKernel(KernelFS):
    """A KernelFS whose pseudo-files behave like kernel files: a write is parsed, not stored.

    ``handlers[path](line)`` applies one written line to ``state[path]`` or raises OSError;
    reads render ``state[path]``. Every write is logged.
    """

    def __init__(self, root):
        super(SimKernel, self).__init__(root)
        self.state = {}
        self.handlers = {}
        self.writes = []

    def read(self, path, default=None):
        if path in self.state:
            return self.state[path]
        return super(SimKernel, self).read(path, default)

    def write(self, path, value):
        self.writes.append((path, value))
        if path in self.handlers:
            try:
                self.handlers[path](value)
            except OSError as e:
                raise KernelFileError(path, value, e.errno)
            return None
        return super(SimKernel, self).write(path, value)


U32 = 2 ** 32 - 1
U64 = 2 ** 64 - 1


def einval(what):
    return OSError(errno.EINVAL, what)


def parse_float(text, shift=2):
    """cgroup_parse_float(): sscanf("%lld.%n%lld%n"), extra digits rounded half-up."""
    m = re.match(r"^(-?\d+)(?:\.(\d+))?", text)
    if not m:
        raise einval("not a number")
    whole, frac = int(m.group(1)), m.group(2) or ""
    if len(frac) < shift:
        f = int(frac or 0) * 10 ** (shift - len(frac))
    else:
        div = 10 ** (len(frac) - shift)
        f = (int(frac) + div // 2) // div
    return whole * 10 ** shift + f


def parse_u64(text):
    if not re.match(r"^\d+$", text) or int(text) > U64:
        raise einval("not a u64")
    return int(text)


def split_device(line):
    """'MAJ:MIN rest' -> ('MAJ:MIN', 'rest')."""
    m = re.match(r"^(\d+):(\d+)\s+(.*)$", line.strip("\n"))
    if not m:
        raise einval("no MAJ:MIN")
    return "%s:%s" % (m.group(1), m.group(2)), m.group(3)
