# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Sysctls, and the scheduler tunables that moved to debugfs: live, verified, persisted in owned files.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Groundwork for a future ``aiinfra.io_isolation.sysctl`` module. One call manages a SET of
settings (``{name: value}``); :func:`settings` turns it into engine settings for
``Reconciler(fs, check_mode).run(settings, errors)``:

* sysctls are written live to ``/proc/sys/<a/b/c>`` (one ``write()`` each), and only where the
  kernel holds something else; values compare token-wise (``4096 87380 6291456`` equals
  ``4096\\t87380  6291456``). They persist in ONE owned file, :data:`SYSCTL_CONF`. Nothing reloads
  a whole file (``sysctl --system`` would re-apply every other file as well);
* scheduler tunables under ``/sys/kernel/debug/sched`` (debugfs) are written live the same way
  and persist as tmpfiles.d ``w`` lines in :data:`TMPFILES_CONF`. Results flag them as debug
  interfaces (``info["debug_interfaces"]`` and a warning);
* ``{"state": "absent"}`` on a key removes it from the owned file. The live value stays as it is
  and is reported in ``values``;
* everything is validated before the first write; check mode and the structured diff are the
  Reconciler's.

Names
    sysctl names follow sysctl.d(5), that is systemd's ``sysctl_normalize()``. If the first
    separator is a dot, dots separate components and a ``/`` stands for a dot INSIDE a component.
    If the first separator is a slash, slashes separate components and dots are literal. So the
    VLAN interface ``eth0.1`` is ``net.ipv4.conf.eth0/1.rp_filter`` or
    ``net/ipv4/conf/eth0.1/rp_filter``. ``net.ipv4.conf.eth0.1.rp_filter`` means
    ``net/ipv4/conf/eth0/1/rp_filter``; when only the other file exists, the call fails and the
    message names both correct spellings. A ``/proc/sys/`` prefix is accepted. Results and the
    owned file use the dotted form, which systemd-sysctl and procps ``sysctl`` both read.

    Debugfs tunables are named ``debugfs.sched.<file>``, e.g. ``debugfs.sched.base_slice_ns`` for
    ``/sys/kernel/debug/sched/base_slice_ns``. The slash form ``debugfs/sched/<file>`` also works,
    and further components name sub-directories (``debugfs.sched.numa_balancing.scan_delay_ms``).
    The old sysctl names of the tunables that moved in 5.13 (``kernel.sched_min_granularity_ns``
    and others, :data:`MOVED_TO_DEBUGFS`) map to the debugfs file the running kernel has. The
    mapping raises a warning, and results are keyed by the debugfs name. When the kernel still
    has the sysctl (before 5.13, with ``CONFIG_SCHED_DEBUG``), the old name stays a plain sysctl.

Kernel behaviour this relies on, observed on Debian 12 (6.1.0-57) and Debian 13 (6.12.118) in the
lab (tests/lab, 2 vCPUs, 4 KiB pages):

1. Writing ``vm.dirty_bytes`` sets ``vm.dirty_ratio`` to 0 and the other way round. Writing 0 to
   ``dirty_ratio`` while it already reads 0 leaves ``dirty_bytes`` in force; writing 0 to
   ``dirty_background_ratio`` clears ``dirty_background_bytes`` even when the ratio already reads 0.
2. ``dirty_bytes`` of 4096 (below two pages) and ``dirty_background_bytes`` of 0 fail with EINVAL,
   and so does ``dirty_ratio`` 101: the old value stays (the kernel's sysctl/vm.rst says "ignored",
   which was older kernels' behaviour). 6.1 and 6.12 take ``dirty_bytes`` 2^64-1; more than 2^32-1
   pages overflows the kernel's page counts and newer kernels refuse it (ERANGE), so it is refused
   here.
3. Integer sysctls parse with base 0: ``010`` > vm.swappiness reads back 8, ``0x10`` reads 16.
   Such values are refused when the sysctl reads as integers.
4. The debugfs sched tunables parse with base 0 too (``010`` reads 8), refuse ``-1`` and words
   (EINVAL), and silently truncate above 2^32-1 (4294967296 reads 0): values are validated and
   written in decimal. ``tunable_scaling`` refuses 3 (EINVAL).
5. Writing ``tunable_scaling`` does not change ``min_granularity_ns`` / ``base_slice_ns``, and an
   offline/online cycle of CPU 1 left a written value in place on both kernels.
6. systemd-tmpfiles ``w`` lines run from systemd-tmpfiles-setup.service (After=local-fs.target).
   A stock install mounts debugfs with the static sys-kernel-debug.mount (DefaultDependencies=no),
   which nothing orders before it, so :data:`TMPFILES_DROPIN` orders it.
7. systemd-sysctl applies the files in file-name order and moves a re-assigned key to the end,
   so a later file wins at boot. Debian 12 links ``/etc/sysctl.d/99-sysctl.conf`` to
   ``/etc/sysctl.conf``; Debian 13 has neither. :func:`boot_overrides` warns about such files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import errno
import fnmatch
import os
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.capabilities import (
    parse_kernel_release, parse_mounts,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    SYSCTL_CONF, TMPFILES_CONF, TMPFILES_DROPIN, ManagedFile, is_managed, owner, stamped,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import PERSIST, merge
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import CodecSetting, Part, Setting, run_part

# systemd-tmpfiles-setup.service (After=local-fs.target) is not ordered after the static
# sys-kernel-debug.mount (DefaultDependencies=no, Before=sysinit.target) on a stock install, so the
# 'w' lines could run before debugfs is mounted. This drop-in orders them; it only matters at boot.
TMPFILES_DROPIN_BODY = ("# The scheduler tunables in %s are debugfs files: write them after debugfs is mounted.\n"
                        "[Unit]\nWants=sys-kernel-debug.mount\nAfter=sys-kernel-debug.mount\n" % TMPFILES_CONF)
SYSTEMD_RUNNING = "/run/systemd/system"
OWNER = owner("sysctl")
PROC_SYS = "/proc/sys"
DEBUGFS_MOUNT = "/sys/kernel/debug"
SCHED_DIR = DEBUGFS_MOUNT + "/sched"
DEBUGFS_PREFIX = ("debugfs", "sched")
# Where systemd-sysctl looks (first directory wins for a file name); /etc/sysctl.conf is read last
# by procps ``sysctl --system`` and, on Debian, by systemd through the 99-sysctl.conf link.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
LEGACY_SYSCTL_CONF = "/etc/sysctl.conf"

# Writing one makes the kernel set the other to 0 (mm/page-writeback.c).
EXCLUSIVE = {
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_ratio": "vm.dirty_bytes",
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
}
# Action triggers: writing does something once; they are not settings (and root cannot read them).
TRIGGERS = ("vm.drop_caches", "vm.compact_memory")

# Scheduler sysctls moved to /sys/kernel/debug/sched in 5.13 (commit 8a99b6833c88), and EEVDF (6.6)
# renamed min_granularity_ns to base_slice_ns and dropped latency_ns / wakeup_granularity_ns.
# old sysctl -> ((since, before, debugfs file), ...): the file the kernel in [since, before) has.
MOVED_IN = (5, 13)
EEVDF = (6, 6)
MOVED_TO_DEBUGFS = {
    "kernel.sched_min_granularity_ns": ((EEVDF, None, "base_slice_ns"), (MOVED_IN, EEVDF, "min_granularity_ns")),
    "kernel.sched_latency_ns": ((MOVED_IN, EEVDF, "latency_ns"),),
    "kernel.sched_wakeup_granularity_ns": ((MOVED_IN, EEVDF, "wakeup_granularity_ns"),),
    "kernel.sched_migration_cost_ns": ((MOVED_IN, None, "migration_cost_ns"),),
    "kernel.sched_nr_migrate": ((MOVED_IN, None, "nr_migrate"),),
    "kernel.sched_tunable_scaling": ((MOVED_IN, None, "tunable_scaling"),),
}
RENAMED_IN_EEVDF = (("min_granularity_ns", "base_slice_ns"),)
# debugfs sched files that are not integer tunables (strings, Y/N, read-only dumps).
DEBUGFS_NOT_INTEGER = ("features", "preempt", "verbose", "debug")
# Value ranges of known debugfs sched files (debugfs_create_u32 truncates above 2^32-1).
_U32 = (0, codecs.U32_MAX)
DEBUGFS_RANGES = {
    "base_slice_ns": _U32, "min_granularity_ns": _U32, "latency_ns": _U32, "wakeup_granularity_ns": _U32,
    "migration_cost_ns": _U32, "nr_migrate": _U32, "latency_warn_ms": _U32, "latency_warn_once": _U32,
    "tunable_scaling": (0, 2),
    "numa_balancing.scan_delay_ms": _U32, "numa_balancing.scan_period_min_ms": _U32,
    "numa_balancing.scan_period_max_ms": _U32, "numa_balancing.scan_size_mb": _U32,
    "numa_balancing.hot_threshold_ms": _U32,
}
SYSCTL_ORDER = 0
DEBUGFS_ORDER = 100
SCALING_ORDER = 90   # tunable_scaling before the tunables it scales (no effect on them observed, see 5)

_BAD_NAME = re.compile(r"[\s=*?\[\]\x00-\x1f\x7f]")
_GLOB = re.compile(r"[*?\[]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")     # tab is a separator; newlines are refused
_INTEGER = re.compile(r"^-?[0-9]+$")
_BASE0 = re.compile(r"^-?0(?:[0-9]+|[xX][0-9a-fA-F]+)$")
_DECIMAL = re.compile(r"^(?:0|[1-9][0-9]*)$")


class SysctlNameError(ValueError):
    """A name that is not a sysctl.d(5) name."""


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

def split_name(name, strict=True):
    """sysctl.d(5) name -> its /proc/sys path components (systemd's ``sysctl_normalize()``).

    ``vm.dirty_ratio`` / ``vm/dirty_ratio`` -> ``['vm', 'dirty_ratio']``;
    ``net.ipv4.conf.eth0/1.rp_filter`` / ``net/ipv4/conf/eth0.1/rp_filter`` ->
    ``['net', 'ipv4', 'conf', 'eth0.1', 'rp_filter']``. ``strict`` refuses whitespace, ``=``, glob
    characters and control characters (file parsing is lenient: globs are valid in sysctl.d).
    As in systemd, the first separator decides the form, so a first component can never contain a
    dot (no top-level /proc/sys directory does).
    """
    if not isinstance(name, str):
        raise SysctlNameError("%r is not a sysctl name; give a string such as vm.dirty_ratio" % (name,))
    if strict and _CONTROL.search(name):
        raise SysctlNameError("%r is not a sysctl name: it contains a newline or control character" % (name,))
    text = name.strip()
    if text.startswith(PROC_SYS + "/"):
        text = text[len(PROC_SYS) + 1:]
    text = text.lstrip("/")
    if strict and (not text or text.startswith("-") or _BAD_NAME.search(text)):
        raise SysctlNameError("%r is not a sysctl name: no spaces, '=', glob or control characters, and no leading "
                              "'-' (e.g. vm.dirty_ratio or net/ipv4/conf/eth0.1/rp_filter)" % (name,))
    first = re.search(r"[./]", text)
    if first and first.group() == ".":
        comps = [c.replace("/", ".") for c in text.split(".")]
    else:
        comps = text.split("/")
    if any(c in ("", ".", "..") for c in comps):
        raise SysctlNameError("%r is not a sysctl name: it has an empty, '.' or '..' component" % (name,))
    return comps


def dotted(comps):
    """Path components -> the dotted name (a dot inside a component is written '/')."""
    return ".".join(c.replace(".", "/") for c in comps)


def canonical(name):
    """Any accepted spelling -> the dotted name (``vm/dirty_ratio`` -> ``vm.dirty_ratio``)."""
    return dotted(split_name(name))


def proc_path(comps):
    """``['vm', 'dirty_ratio']`` -> ``/proc/sys/vm/dirty_ratio``."""
    return PROC_SYS + "/" + "/".join(comps)


def is_debugfs(comps):
    return len(comps) > 2 and tuple(comps[:2]) == DEBUGFS_PREFIX


def debugfs_path(comps):
    """``['debugfs', 'sched', 'base_slice_ns']`` -> ``/sys/kernel/debug/sched/base_slice_ns``."""
    return SCHED_DIR + "/" + "/".join(comps[2:])


def debugfs_name(path):
    """``/sys/kernel/debug/sched/base_slice_ns`` -> ``debugfs.sched.base_slice_ns``."""
    return dotted(list(DEBUGFS_PREFIX) + [c for c in path[len(SCHED_DIR) + 1:].split("/") if c])


def sysctl_names(fs, top=PROC_SYS, max_depth=12, limit=100000):
    """Dotted names of every file below ``top`` as seen through ``fs`` (sorted)."""
    names, stack = [], [[]]
    while stack and len(names) < limit:
        comps = stack.pop()
        path = top + "".join("/" + c for c in comps)
        for entry in fs.listdir(path):
            sub = comps + [entry]
            if fs.isdir(path + "/" + entry):
                if len(sub) < max_depth:
                    stack.append(sub)
            else:
                names.append(dotted(sub))
    return sorted(names)


def regroupings(fs, comps, top=PROC_SYS):
    """Existing files whose path joins some adjacent ``comps`` with a dot (``eth0`` + ``1`` -> ``eth0.1``).

    Finds what an ambiguous dotted name such as ``net.ipv4.conf.eth0.1.rp_filter`` meant.
    """
    if len(comps) < 2 or len(comps) > 10:
        return []
    found = []
    for mask in range(1, 2 ** (len(comps) - 1)):
        groups, current = [], [comps[0]]
        for i, comp in enumerate(comps[1:]):
            if mask >> i & 1:
                current.append(comp)
            else:
                groups.append(current)
                current = [comp]
        groups.append(current)
        candidate = [".".join(g) for g in groups]
        path = top + "/" + "/".join(candidate)
        if fs.exists(path) and not fs.isdir(path):
            found.append(candidate)
    return found


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

def value_tokens(name, value):
    """A user value -> (tokens, None) or (None, problem). Numbers, strings and lists of them.

    YAML booleans and floats are refused (a sysctl takes digits or words; quote words), and so
    are newlines and control characters (one line per sysctl in the persisted file).
    """
    if isinstance(value, bool):
        return None, ("%s: %r is a boolean; sysctls take numbers or text: write 1 or 0 (quote 'yes'/'no' if the "
                      "kernel really expects the word)" % (name, value))
    if isinstance(value, float):
        return None, "%s: %r is a floating-point number; sysctls take integers or text: quote it" % (name, value)
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value
    elif isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, str)) and not isinstance(v, bool) for v in value):
        text = " ".join(str(v) for v in value)
    else:
        return None, ("%s: %r is not a value; give a number, a string or a list of tokens (use {state: absent} "
                      "to remove a key)" % (name, value))
    if _CONTROL.search(text):
        return None, "%s: %r contains a newline or control character; a sysctl value is one line" % (name, value)
    tokens = codecs.tokens(text)
    if not tokens:
        return None, "%s: the value is empty; give a value, or {state: absent} to remove the key" % name
    return tokens, None


def _base0_hint(token):
    sign = "-" if token.startswith("-") else ""
    digits = token.lstrip("-")
    if digits[1:2] in ("x", "X"):
        return "%r is hexadecimal %s%d" % (token, sign, int(digits, 16))
    return "%r has a leading zero (read as octal or refused); write %s%s" % (token, sign, digits.lstrip("0") or "0")


def base0_problems(name):
    """validate(desired, current) for integer sysctls: the kernel parses them with base 0.

    Only applies when the current read-back is all integers (a text sysctl takes '010' as is).
    Observed on 6.1 and 6.12: ``echo 010 > vm/swappiness`` reads back 8.
    """
    def check(desired, current):
        if not desired or not current or not all(_INTEGER.match(t) for t in current.split()):
            return []
        bad = [t for t in desired.split() if _BASE0.match(t)]
        if not bad:
            return []
        return ["%s: integer sysctls are parsed with base 0 (C strtoul): %s" % (
            name, "; ".join(_base0_hint(t) for t in bad))]
    return check


def pair_value_problems(name, tokens, page_size):
    """Problems with a value for one of the vm.dirty_* exclusive keys (assumptions 1-2 above)."""
    if not _DECIMAL.match(tokens):
        return ["%s: %r is not a whole number (digits only, no units or leading zeros)" % (name, tokens)]
    number = int(tokens)
    partner = EXCLUSIVE[name]
    if name.endswith("_ratio"):
        if number > 100:
            return ["%s: %d is out of range 0..100 (percent of dirtyable memory)" % (name, number)]
        return []
    minimum = 2 * page_size if name == "vm.dirty_bytes" else 1
    if number == 0:
        return ["%s: 0 cannot be written (the kernel refuses values below %d, EINVAL); it is what the kernel "
                "shows while %s is in use: set %s instead" % (name, minimum, partner, partner)]
    if number < minimum:
        return ["%s: %d is below two pages (%d bytes); the kernel refuses it (EINVAL)" % (name, number, minimum)]
    if -(-number // page_size) > codecs.U32_MAX:
        return ["%s: %d is more than 2^32-1 pages: it overflows the kernel's page counts (6.1 and 6.12 take it, "
                "newer kernels refuse it with ERANGE); give a smaller value" % (name, number)]
    return []


# ---------------------------------------------------------------------------------------------
# Engine settings
# ---------------------------------------------------------------------------------------------

class SysctlSetting(CodecSetting):
    """One /proc/sys file, compared token-wise (``_codecs.MultiToken``), written in one ``write()``."""

    debug_interface = False

    def __init__(self, name, path, desired, order=SYSCTL_ORDER):
        super(SysctlSetting, self).__init__(name, path, codecs.MultiToken(name), desired, order=order,
                                            validate=base0_problems(name))


class ExclusivePairSetting(Setting):
    """One of ``vm.dirty_{,background_}{bytes,ratio}``: written alone, compared as a pair.

    The value is ``{name: tokens, partner: tokens}``: the desired state is the asked value plus
    the partner at 0, which is what the kernel shows after the write. ``vm.dirty_bytes: N`` is
    satisfied when dirty_bytes reads N (dirty_ratio then reads 0). Restore writes back whichever
    of the two was in force. Kernel rules: assumptions 1-2 in the module docstring.
    """

    debug_interface = False

    def __init__(self, name, desired, order=SYSCTL_ORDER):
        self.name = name
        self.partner = EXCLUSIVE[name]
        self.paths = dict((n, proc_path(split_name(n))) for n in (name, self.partner))
        super(ExclusivePairSetting, self).__init__(name, {name: desired, self.partner: "0"}, order)
        self.path = self.paths[name]

    def read(self, fs):
        out = {}
        for key in (self.name, self.partner):
            text = fs.read(self.paths[key])
            if text is None:
                raise KernelFileError(self.paths[key], None, errno.ENOENT, action="read")
            out[key] = codecs.tokens(text)
        return out

    def validate(self, current):
        if self.name == "vm.dirty_ratio" and self.desired[self.name] == "0" and current.get(self.partner) != "0":
            return ["vm.dirty_ratio: writing 0 does not switch off vm.dirty_bytes (%s now): the kernel clears "
                    "dirty_bytes only when the ratio changes, and it reads 0 already; give the ratio you want "
                    "(1..100)" % current.get(self.partner)]
        return []

    def write(self, fs, value, current):
        fs.write(self.paths[self.name], value[self.name])

    def restore(self, fs, previous):
        key = self.name if previous.get(self.name, "0") != "0" else self.partner
        fs.write(self.paths[key], previous[key])

    def report(self, value):
        return dict(value) if isinstance(value, dict) else value


class DebugfsSetting(CodecSetting):
    """An integer scheduler tunable under /sys/kernel/debug/sched (a debug interface, not ABI)."""

    debug_interface = True

    def __init__(self, name, path, desired, minimum=0, maximum=codecs.U64_MAX, order=DEBUGFS_ORDER):
        super(DebugfsSetting, self).__init__(name, path, codecs.IntValue(name, minimum, maximum), desired,
                                             order=order)

    def report(self, value):
        return None if value is None else str(value)


class LiveValue(Setting):
    """A key with ``state: absent``: never written; its live value (or None) is reported."""

    debug_interface = False

    def __init__(self, key, path):
        super(LiveValue, self).__init__(key, None)
        self.path = path

    def read(self, fs):
        try:
            text = fs.read(self.path)
        except KernelFileError:
            return None
        return None if text is None else codecs.tokens(text)

    def differs(self, current):
        return False

    def write(self, fs, value, current):
        """Never called: a live value left as is does not differ."""


# ---------------------------------------------------------------------------------------------
# Owned files
# ---------------------------------------------------------------------------------------------

def parse_sysctl_conf(text):
    """sysctl.d text -> ({dotted name: tokens}, [ignored lines]).

    Like systemd-sysctl: ``#``/``;`` comments, ``key = value`` with whitespace around both
    stripped, a leading ``-`` (ignore failures) dropped, names normalised, and a re-assigned key
    moves to the end with its last value. Globs are kept as written (normalised).
    """
    entries, ignored = {}, []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if key.startswith("-"):
            key = key[1:].strip()
        try:
            if not sep or not key:
                raise SysctlNameError(line)
            name = dotted(split_name(key, strict=False))
        except SysctlNameError:
            ignored.append(raw)
            continue
        entries.pop(name, None)
        entries[name] = codecs.tokens(value)
    return entries, ignored


def render_sysctl_conf(entries):
    """{dotted name: tokens} -> the owned sysctl.d file (stamped), one ``name = value`` per line."""
    body = "".join("%s = %s\n" % (name, value) for name, value in entries.items())
    return stamped(body, OWNER)


def parse_tmpfiles_conf(text):
    """tmpfiles.d text -> ({debugfs name: tokens}, [ignored lines]) for ``w`` lines below SCHED_DIR."""
    entries, ignored = {}, []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 6)
        if len(fields) == 7 and fields[0] == "w" and fields[1].startswith(SCHED_DIR + "/"):
            name = debugfs_name(fields[1])
            entries.pop(name, None)
            entries[name] = codecs.tokens(fields[6])
        else:
            ignored.append(raw)
    return entries, ignored


def render_tmpfiles_conf(entries):
    """{debugfs name: value} -> the owned tmpfiles.d file: ``w <path> - - - - <value>`` lines."""
    body = "".join("w %s - - - - %s\n" % (debugfs_path(split_name(name)), value) for name, value in entries.items())
    return stamped(body, OWNER)


def _read_text(fs, path):
    data = fs.read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def _owned_entries(fs, path, parse, adopt, warnings):
    """Entries of an owned file to merge into; {} when absent or foreign (ManagedFile refuses those)."""
    text = _read_text(fs, path)
    if text is None or not (is_managed(text) or adopt):
        return {}
    entries, ignored = parse(text)
    if ignored:
        warnings.append("%s: dropping lines this module does not manage: %s" % (path, "; ".join(
            line.strip() for line in ignored)))
    return entries


def boot_overrides(fs, names, own=SYSCTL_CONF):
    """Warnings for assignments applied AFTER ``own`` at boot that undo ``names`` (or set their partner)."""
    own_base = own.rsplit("/", 1)[-1]
    files = {}
    for directory in SYSCTL_DIRS:
        for entry in fs.listdir(directory):
            if entry.endswith(".conf") and entry not in files:
                files[entry] = directory + "/" + entry
    later = [files[base] for base in sorted(files) if base > own_base]
    if fs.exists(LEGACY_SYSCTL_CONF):
        later.append(LEGACY_SYSCTL_CONF)
    watch = {}
    for name in names:
        watch[name] = name
        if name in EXCLUSIVE:
            watch.setdefault(EXCLUSIVE[name], name)
    out, seen = [], set()
    for path in later:
        real = fs.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        entries, _ignored = parse_sysctl_conf(fs.read(path) or "")
        for key, value in entries.items():
            for watched, ours in sorted(watch.items()):
                if not (key == watched or _GLOB.search(key) and fnmatch.fnmatchcase(
                        "/".join(split_name(watched, strict=False)), "/".join(split_name(key, strict=False)))):
                    continue
                if watched == ours:
                    out.append("%s sets %s = %s and is applied after %s at boot (the last assignment wins): the "
                               "persisted %s will not survive a reboot; remove it there"
                               % (path, key, value, own, ours))
                else:
                    out.append("%s sets %s = %s after %s at boot: the kernel then sets %s to 0, so the persisted %s "
                               "will not survive a reboot; remove it there" % (path, key, value, own, ours, ours))
    return out


# ---------------------------------------------------------------------------------------------
# Request -> settings
# ---------------------------------------------------------------------------------------------

class _Refused(Exception):
    pass


class _Target:
    """One resolved request: ``kind`` is sysctl, pair or debugfs."""

    def __init__(self, raw, name, path, kind, state, tokens=None, order=SYSCTL_ORDER, limits=None):
        self.raw, self.name, self.path, self.kind, self.state = raw, name, path, kind, state
        self.tokens, self.order, self.limits = tokens, order, limits
        self.forget = [name]   # names removed from the owned file on state: absent


class _Host:
    """What the request is checked against: the files behind ``fs`` and the running kernel release."""

    def __init__(self, fs, release):
        self.fs = fs
        self.release = release
        self.version = parse_kernel_release(release)[:2]
        self._names = None

    def names(self):
        if self._names is None:
            self._names = sysctl_names(self.fs)
        return self._names

    def debugfs_problem(self):
        mounted = any(fstype == "debugfs" and mp == DEBUGFS_MOUNT
                      for _d, mp, fstype, _o in parse_mounts(self.fs.read("/proc/mounts")))
        if not mounted:
            return ("debugfs is not mounted on %s: mount it first (systemctl start sys-kernel-debug.mount, or mount "
                    "-t debugfs debugfs %s); kernel lockdown (confidentiality) also hides it" % (
                        DEBUGFS_MOUNT, DEBUGFS_MOUNT))
        if not self.fs.isdir(SCHED_DIR):
            return "%s does not exist: this kernel has no scheduler debug interface (CONFIG_SCHED_DEBUG)" % SCHED_DIR
        return None


def _unknown(host, raw, comps):
    name = dotted(comps)
    path = proc_path(comps)
    meant = regroupings(host.fs, comps)
    if meant:
        return ("%s: no such sysctl (%s does not exist): the dots inside a component, such as an interface name "
                "like eth0.1, must be written '/' in the dotted form; did you mean %s (slash form %s)?" % (
                    raw, path, " or ".join(dotted(m) for m in meant), " or ".join("/".join(m) for m in meant)))
    close = difflib.get_close_matches(name, host.names(), n=3, cutoff=0.6)
    hint = "; did you mean %s?" % " or ".join(close) if close else "; list them with sysctl -a"
    return "%s: unknown sysctl (%s does not exist on this host)%s" % (raw, path, hint)


def _resolve_sysctl(host, raw, comps, state, tokens):
    name, path, fs = dotted(comps), proc_path(comps), host.fs
    if state == "absent":
        return _Target(raw, name, path, "pair" if name in EXCLUSIVE else "sysctl", state)
    if fs.isdir(path):
        raise _Refused("%s is a directory of sysctls (%s), not a sysctl; name one file in it" % (raw, path))
    if not fs.exists(path):
        raise _Refused(_unknown(host, raw, comps))
    if name in TRIGGERS:
        raise _Refused("%s is an action trigger, not a setting: it acts once on each write, cannot be read back "
                       "and must not be persisted; run it as a command instead" % name)
    if not fs.is_writable(path):
        raise _Refused("%s is read-only (%s)" % (name, path))
    return _Target(raw, name, path, "pair" if name in EXCLUSIVE else "sysctl", state, tokens)


def _resolve_debugfs(host, raw, comps, state, tokens):
    name, path, fs = dotted(comps), debugfs_path(comps), host.fs
    rel = ".".join(comps[2:])
    order = SCALING_ORDER if rel == "tunable_scaling" else DEBUGFS_ORDER
    if state == "absent":
        return _Target(raw, name, path, "debugfs", state, order=order)
    problem = host.debugfs_problem()
    if problem:
        raise _Refused("%s: %s" % (raw, problem))
    if comps[-1] in DEBUGFS_NOT_INTEGER:
        raise _Refused("%s is not an integer tunable (%s); only integer scheduler tunables are managed" % (raw, path))
    if not fs.exists(path) or fs.isdir(path):
        have = sorted(e for e in fs.listdir(SCHED_DIR) if not fs.isdir(SCHED_DIR + "/" + e))
        close = difflib.get_close_matches(comps[-1], have, n=2, cutoff=0.6)
        renamed = [new for old, new in RENAMED_IN_EEVDF if comps[-1] == old and new in have]
        if renamed:
            raise _Refused("%s: this kernel (%s) has no %s: EEVDF (6.6) renamed it; did you mean %s?" % (
                raw, host.release, path, dotted(comps[:-1] + renamed)))
        raise _Refused("%s: this kernel has no %s%s (it has: %s)" % (
            raw, path, "; did you mean %s?" % " or ".join(dotted(comps[:-1] + [c]) for c in close) if close else "",
            ", ".join(have) or "nothing"))
    if not fs.is_writable(path):
        raise _Refused("%s is read-only (%s)" % (raw, path))
    limits = DEBUGFS_RANGES.get(rel, (0, codecs.U64_MAX))
    codec = codecs.IntValue(name, *limits)
    problems = codec.validate(tokens)
    if problems:
        raise _Refused("; ".join(problems))
    return _Target(raw, name, path, "debugfs", state, str(codec.normalize(tokens)), order, limits)


def _map_moved(host, raw, comps, state, tokens, warnings):
    """An old scheduler sysctl name -> the debugfs file this kernel has (see MOVED_TO_DEBUGFS)."""
    old = dotted(comps)
    rules = MOVED_TO_DEBUGFS[old]
    files = [f for _since, _before, f in rules]
    if state == "absent":
        found = [f for f in files if host.fs.exists(SCHED_DIR + "/" + f)]
        target = _resolve_debugfs(host, raw, list(DEBUGFS_PREFIX) + [(found or files)[0]], state, tokens)
        target.forget = [dotted(list(DEBUGFS_PREFIX) + [f]) for f in files]
        return target
    if host.version != (0, 0) and host.version < MOVED_IN:
        raise _Refused("%s: this kernel (%s) has no %s: before 5.13 the scheduler tunables are sysctls only with "
                       "CONFIG_SCHED_DEBUG=y" % (raw, host.release, proc_path(comps)))
    problem = host.debugfs_problem()
    if problem:
        raise _Refused("%s is not a sysctl since 5.13 (it moved to %s) and %s" % (raw, SCHED_DIR, problem))
    expected = [f for since, before, f in rules if since <= host.version and (before is None or host.version < before)]
    for f in expected + [f for f in files if f not in expected]:
        if host.fs.exists(SCHED_DIR + "/" + f):
            target = _resolve_debugfs(host, raw, list(DEBUGFS_PREFIX) + [f], state, tokens)
            msg = ("%s is not a sysctl on kernel %s (the scheduler tunables moved to debugfs in 5.13): mapped to %s "
                   "(%s); use that name to silence this warning" % (raw, host.release, target.name, target.path))
            if f == "base_slice_ns":
                msg += (". On EEVDF kernels (6.6+) base_slice_ns is the default time slice of a task, not CFS's "
                        "minimum granularity: check that the value still means what you want")
            warnings.append(msg)
            return target
    raise _Refused("%s: this kernel (%s) has neither %s nor %s; the tunable is gone (EEVDF dropped latency_ns and "
                   "wakeup_granularity_ns in 6.6)" % (raw, host.release, proc_path(comps),
                                                      " nor ".join(SCHED_DIR + "/" + f for f in files)))


def _requests(sysctls, errors):
    """The ``sysctls`` option -> [(name as given, state, value)]."""
    if not isinstance(sysctls, dict) or not sysctls:
        errors.append("sysctls must be a non-empty mapping of sysctl name -> value (or {value, state})")
        return []
    out = []
    for raw, spec in sysctls.items():
        state, value = "present", spec
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(("value", "state")))
            state = spec.get("state", "present")
            value = spec.get("value")
            if unknown or state not in ("present", "absent"):
                errors.append("%s: expected {value: ..., state: present|absent}, got %r" % (raw, spec))
                continue
            if state == "absent" and value is not None:
                errors.append("%s: state absent takes no value" % raw)
                continue
        if state == "present" and value is None:
            errors.append("%s: no value; give one, or {state: absent} to remove the key from %s" % (raw, SYSCTL_CONF))
            continue
        out.append((raw, state, value))
    return out


def _resolve_all(host, requests, errors, warnings, page_size):
    targets, seen = [], {}
    for raw, state, value in requests:
        tokens = None
        try:
            comps = split_name(raw)
            if state == "present":
                tokens, problem = value_tokens(raw, value)
                if problem:
                    raise _Refused(problem)
            name = dotted(comps)
            if is_debugfs(comps):
                target = _resolve_debugfs(host, raw, comps, state, tokens)
            elif name in MOVED_TO_DEBUGFS and not host.fs.exists(proc_path(comps)):
                target = _map_moved(host, raw, comps, state, tokens, warnings)
            else:
                target = _resolve_sysctl(host, raw, comps, state, tokens)
        except (SysctlNameError, _Refused) as e:
            errors.append(str(e))
            continue
        if target.name in seen:
            errors.append("%s and %s name the same setting (%s); give it once" % (seen[target.name], raw, target.name))
            continue
        seen[target.name] = raw
        targets.append(target)
    return _exclusive(targets, errors, page_size)


def _exclusive(targets, errors, page_size):
    """Checks the vm.dirty_* pairs; a 0 next to its non-zero partner is implied and dropped."""
    asked = dict((t.name, t) for t in targets if t.kind == "pair" and t.state == "present")
    drop = set()
    for name, target in sorted(asked.items()):
        partner = asked.get(EXCLUSIVE[name])
        if partner is not None and name.endswith("_bytes"):
            if target.tokens != "0" and partner.tokens != "0":
                errors.append("%s and %s are exclusive (writing one makes the kernel set the other to 0): ask for "
                              "one of them" % (name, partner.name))
                drop.update((name, partner.name))
                continue
            if target.tokens == "0" and partner.tokens != "0":
                drop.add(name)
            elif partner.tokens == "0" and target.tokens != "0":
                drop.add(partner.name)
    for name, target in sorted(asked.items()):
        if name not in drop:
            errors.extend(pair_value_problems(name, target.tokens, page_size))
    return [t for t in targets if not (t.state == "present" and t.name in drop)]


def _engine_setting(target):
    if target.state == "absent":
        return LiveValue(target.name, target.path)
    if target.kind == "pair":
        return ExclusivePairSetting(target.name, target.tokens, target.order)
    if target.kind == "debugfs":
        minimum, maximum = target.limits
        return DebugfsSetting(target.name, target.path, target.tokens, minimum, maximum, target.order)
    return SysctlSetting(target.name, target.path, target.tokens, target.order)


def _persisted_file(fs, path, targets, parse, render, adopt, warnings):
    """The owned file after this call's present/absent keys are merged into what it holds now."""
    entries = _owned_entries(fs, path, parse, adopt, warnings)
    for target in targets:
        if target.state == "absent":
            for name in target.forget:
                entries.pop(name, None)
            continue
        if target.kind == "pair":
            entries.pop(EXCLUSIVE[target.name], None)
        entries[target.name] = target.tokens
    return ManagedFile(path, render(entries) if entries else None, adopt=adopt), entries


def host_page_size():
    """This host's page size in bytes (4096 when it cannot be asked)."""
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 4096


def settings(fs, params, release=None, page_size=None):
    """Engine settings for one call, and everything to report with it.

    ``params``: ``sysctls`` (required): ``{name: value}``, where a value is a number, a string, a
    list of tokens, or ``{"value": ..., "state": "present"|"absent"}``. ``persist`` (default
    True): write the owned files. ``adopt`` (default False): take over an owned file that exists
    without this collection's stamp. ``release`` is ``uname -r`` of the managed host (default:
    this host's), ``page_size`` its page size in bytes (default: this host's).

    Returns ``(settings, errors, warnings, info)``. Feed ``settings`` and ``errors`` to
    ``Reconciler(fs, check_mode).run(settings, errors)``: any error fails the call before the
    first write. The Reconciler's result is keyed by dotted name (debugfs names for scheduler
    tunables) and by owned-file path. An exclusive pair key reports ``{name: v, partner: v}``,
    and :func:`flat_result` spreads it out. ``info`` is::

        {"paths": {name: kernel file},
         "mapped": {old sysctl name: debugfs name},
         "debug_interfaces": [debugfs names managed or reported],
         "absent": [names removed from the owned files; their live values stay as they are],
         "exclusive": {name: partner that the kernel shows as 0 after the write},
         "persisted": {owned file path: {name: value} it holds after the call}}
    """
    release = release or os.uname()[2]
    page_size = page_size or host_page_size()
    errors, warnings = [], []
    host = _Host(fs, release)
    targets = _resolve_all(host, _requests(params.get("sysctls"), errors), errors, warnings, page_size)
    info = {"paths": {}, "mapped": {}, "debug_interfaces": [], "absent": [], "exclusive": {}, "persisted": {}}
    out = []
    for target in targets:
        out.append(_engine_setting(target))
        info["paths"][target.name] = target.path
        if canonical(target.raw) != target.name:
            info["mapped"][canonical(target.raw)] = target.name
        if target.kind == "debugfs":
            info["debug_interfaces"].append(target.name)
        if target.state == "absent":
            info["absent"].append(target.name)
        elif target.kind == "pair":
            info["exclusive"][target.name] = EXCLUSIVE[target.name]
    persist = params.get("persist", True)
    live_debug = [t.name for t in targets if t.kind == "debugfs" and t.state == "present"]
    if live_debug:
        warnings.append("%s: kernel debug interface (debugfs), not a stable ABI: it may change or vanish with a "
                        "kernel update, and the kernel recomputes some tunables on CPU hotplug; %s" % (
                            ", ".join(live_debug),
                            "persisted with a tmpfiles.d 'w' line in %s, which needs debugfs mounted at boot"
                            % TMPFILES_CONF if persist else "not persisted (persist is off): lost at reboot"))
    if persist:
        adopt = bool(params.get("adopt"))
        for path, kinds, parse, render in (
                (SYSCTL_CONF, ("sysctl", "pair"), parse_sysctl_conf, render_sysctl_conf),
                (TMPFILES_CONF, ("debugfs",), parse_tmpfiles_conf, render_tmpfiles_conf)):
            mine = [t for t in targets if t.kind in kinds]
            if not mine:
                continue
            managed, entries = _persisted_file(fs, path, mine, parse, render, adopt, warnings)
            out.append(managed)
            info["persisted"][path] = entries
            if path == TMPFILES_CONF and fs.isdir(SYSTEMD_RUNNING):
                body = stamped(TMPFILES_DROPIN_BODY, OWNER) if entries else None
                out.append(ManagedFile(TMPFILES_DROPIN, body, adopt=adopt))
                if entries:
                    info["persisted"][TMPFILES_DROPIN] = {}
        kept = [t.name for t in targets if t.kind != "debugfs" and t.state == "present"]
        if kept:
            warnings.extend(boot_overrides(fs, kept))
    return out, errors, warnings, info


def flat_result(result):
    """The Reconciler's result with exclusive-pair reports spread into the top-level maps.

    ``{"vm.dirty_bytes": {"vm.dirty_bytes": "N", "vm.dirty_ratio": "0"}}`` becomes
    ``{"vm.dirty_bytes": "N", "vm.dirty_ratio": "0"}`` in ``diff.before``/``diff.after``/``values``.
    """
    def flat(mapping):
        # Pair reports last: they are read after the write, a LiveValue of the partner before it.
        out = dict((k, v) for k, v in mapping.items() if not isinstance(v, dict))
        for value in mapping.values():
            if isinstance(value, dict):
                out.update(value)
        return out
    res = dict(result)
    res["diff"] = {"before": flat(result["diff"]["before"]), "after": flat(result["diff"]["after"])}
    res["values"] = flat(result["values"])
    return res


# The module's options (AnsibleModule keywords); host_profile checks its sysctl section with the same.
MODULE_SPEC = {"argument_spec": merge(PERSIST, sysctls={"type": "dict", "required": True})}


def part(params, fs):
    """The settings as an engine part; its report has the kernel values and the files."""
    settings_, errors, warnings, info = settings(fs, params)

    def report(result, _check_mode):
        result = flat_result(result)
        return {"changed": result["changed"], "diff": result["diff"],
                "kernel": dict((k, v) for k, v in result["values"].items() if not k.startswith("/")),
                "paths": info["paths"], "mapped": info["mapped"], "debug_interfaces": info["debug_interfaces"],
                "absent": info["absent"], "persisted_to": info["persisted"], "warnings": list(warnings)}

    return Part(settings_, errors, report)


def run(params, fs, check_mode):
    """The module call: settings, one engine run, the result with the kernel values and the files."""
    return run_part(fs, part(params, fs), check_mode)


def purge(p):
    """purge's step: the sysctls and scheduler tunables our sysctl.d/tmpfiles.d files set, state=absent."""
    names = []
    for path, parse in ((SYSCTL_CONF, parse_sysctl_conf), (TMPFILES_CONF, parse_tmpfiles_conf)):
        names.extend(parse(p.fs.read(path) or "")[0])
    if names:
        p.step("sysctl", lambda: run(
            {"sysctls": dict((n, {"state": "absent"}) for n in names), "persist": True, "adopt": False},
            p.fs, p.check_mode))
