# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nvme (PCIe) driver's queue split: poll_queues, write_queues, io_queue_depth.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

The three values are module parameters of ``nvme`` (``drivers/nvme/host/pci.c``). The driver
reads them when a controller sets up its I/O queues: at probe (boot, module load) and at a
controller reset. The blk-mq tag set, including whether it has a poll map at all, is built only
at probe. This module therefore:

* persists the values as ``options nvme ...`` in ONE owned, stamped file, :data:`CONF_PATH`
  (read by modprobe when the module loads), or, when nvme is built into the kernel, reports the
  ``nvme.<param>=`` kernel arguments that are needed (boot loader files are never edited);
* checks whether the booted kernel's initramfs carries ``nvme.ko`` (then modprobe runs from the
  initramfs and sees the initramfs's copy of ``/etc/modprobe.d``): the initramfs is rebuilt only
  behind an opt-in, otherwise the need is reported;
* changes the running driver only behind an opt-in (``reset_controllers``) and only where the
  reset is proven safe from the map every controller holds now (:func:`runtime_problems`);
  otherwise it reports ``reboot_required`` and touches neither the parameters nor a controller;
* reads back the hardware-queue map per controller and namespace through the NVMe layer
  (:mod:`_nvme`): each hctx's ``cpu_list`` (sysfs), its type default/read/poll (debugfs
  ``hctxN/type``, or the driver's kernel-log line when debugfs is not mounted; it is never
  mounted here), and ``queue/io_poll``.

A call runs :meth:`Request.validate`, :meth:`Request.plan`, :meth:`Request.apply` and
:meth:`Request.report` (:func:`reconcile`); every invalid request, whether the input or the host
shows it, is refused with :class:`RequestError` before anything is written.

Kernel behaviour this relies on, observed in the lab (Debian 12 6.1.0-57, Debian 13 6.12, QEMU
NVMe, 2 possible CPUs; see docs/nvme_queues.md for the commands and outputs):

1. ``/sys/module/nvme/parameters/{poll,write}_queues`` refuse values above the number of possible
   CPUs, negative values and words with EINVAL; ``io_queue_depth`` takes 2..4095 and refuses
   0, 1, 4096 and negative values with EINVAL. A refused write leaves the old value.
2. Boot with ``options nvme poll_queues=1`` (nvme loaded from the root filesystem): the driver logs
   ``2/0/1 default/read/poll queues``, the namespace has three hctxs, debugfs types
   ``default default poll``, the poll hctx's cpu_list holds every CPU, ``queue/io_poll`` reads 1.
3. ``poll_queues=1`` written at runtime + ``reset_controller`` on a controller probed without
   poll queues: the driver logs ``1/0/1`` but the namespace keeps two ``default`` hctxs and
   ``io_poll`` 0, and I/O from one CPU waits for the 30 s timeout (docs/kernel-files.md, "The lab's
   guests" and "Where a real kernel disagreed with the reference").
4. After a boot with ``poll_queues=1``, ``poll_queues=0`` + ``reset_controller`` (the direction
   :func:`runtime_problems` allows) gives ``2/0/0``, two ``default`` hctxs, ``io_poll`` 0, no
   stall from either CPU; the write returns after the reset (0.1-0.15 s per controller).
5. Native multipath (6.12): the per-path disks ``nvmeXcYnZ`` carry the hctxs; the head's
   ``io_poll`` is set when the head is created and stays 1 after the paths lost their poll
   queues through a reset (io_uring IOPOLL on the head then fails with EOPNOTSUPP).
6. ``modprobe nvme poll_queues=3`` on 2 CPUs fails (``could not insert 'nvme': Invalid
   argument``): an invalid option in modprobe.d leaves the host without NVMe disks.
7. mkinitramfs copies ``/etc/modprobe.d/*.conf`` into the image; with ``nvme.ko`` in it the
   copy in the initramfs is what modprobe reads at boot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import nvme
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import multipath_head
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import MODPROBE_CONF as CONF_PATH, ManagedFile, owner, stamped
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, RequestError, Setting, run_part

OWNER = owner("nvme_queues")
PARAMETERS_DIR = nvme.DRIVER_PARAMETERS_DIR
PARAMS = nvme.QUEUE_PARAMETERS
# The driver's defaults (pci.c): what a boot without options gives.
DEFAULTS = {"poll_queues": 0, "write_queues": 0, "io_queue_depth": 1024}
DEPTH_MIN, DEPTH_MAX = 2, 4095
CPU_POSSIBLE = "/sys/devices/system/cpu/possible"
# kmod's configuration directories, in its priority order: a file name in an earlier directory
# hides the same name in a later one; all files are then read in file-name order.
MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/lib/modprobe.d",
                 "/usr/lib/modprobe.d")
NVME_KO = re.compile(r"(^|/)drivers/nvme/host/nvme\.ko(\.(xz|zst|gz))?$")
INITRAMFS_PATHS = ("/boot/initrd.img-%s", "/boot/initramfs-%s.img")
RESET_TIMEOUT = 60.0
NO_INITRAMFS = {"path": None, "tool": None, "contains_nvme": False, "includes_options": None, "mtime": None}
STALL = "on 6.1 and 6.12 that left I/O from some CPUs waiting for the 30-second timeout on every request"


# -- small parsers -------------------------------------------------------------------------------
def count_cpus(text):
    """Number of CPUs in a sysfs cpulist ('0-3,8' -> 5); None if unreadable."""
    if text is None:
        return None
    try:
        return len(codecs.CPU_LIST.parse(text))
    except codecs.CodecError:
        return None


def _int_or_none(text):
    value = (text or "").strip()
    return int(value) if re.match(r"^-?\d+$", value) else None


def _norm(name):
    # kmod and the kernel treat '-' and '_' in module and parameter names alike.
    return name.replace("-", "_")


def parse_modprobe_options(text, module="nvme"):
    """{param: value} of the ``options <module> ...`` lines of one modprobe.d file (last one wins)."""
    out = {}
    lines, pending = [], ""
    for raw in (text or "").splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    if pending:
        lines.append(pending)
    for line in lines:
        line = line.split("#", 1)[0].strip()
        words = line.split()
        if len(words) < 3 or words[0] != "options" or _norm(words[1]) != module:
            continue
        for word in words[2:]:
            name, sep, value = word.partition("=")
            if sep:
                out[_norm(name)] = value.strip('"')
    return out


def parse_cmdline(text, module="nvme"):
    """{param: value} of ``<module>.<param>=value`` kernel arguments (the last one wins)."""
    out = {}
    for word in (text or "").split():
        name, sep, value = word.partition("=")
        mod, dot, param = name.partition(".")
        if sep and dot and _norm(mod) == module:
            out[_norm(param)] = value.strip('"')
    return out


def render_conf(options):
    """The owned modprobe.d file for ``{param: int}`` (only the managed parameters)."""
    body = ("# Queue split of the nvme (PCIe) driver; modprobe reads this when the module loads (boot).\n"
            "# A change needs a reboot, or a rebuilt initramfs first if nvme.ko is in it.\n"
            "options nvme %s\n" % " ".join("%s=%d" % (p, options[p]) for p in PARAMS if p in options))
    return stamped(body, OWNER)


# -- what the host has ---------------------------------------------------------------------------
class NvmeHost:
    """Reads the driver, its parameters, the persisted configuration and the queue map.

    Every file goes through ``fs`` (KernelFS); commands (lsinitramfs, dmesg) through ``runner``.
    """

    def __init__(self, fs, runner=None):
        self.fs = fs
        self.runner = runner
        self.warnings = []
        self._klog = None
        self._initramfs = None
        self._listing = None    # (info, started listing) from start_initramfs_listing
        self.release = (fs.read("/proc/sys/kernel/osrelease") or os.uname()[2]).strip()
        self.debugfs = nvme.debugfs_mount(fs)

    # driver ---------------------------------------------------------------------------------
    def possible_cpus(self):
        return count_cpus(self.fs.read(CPU_POSSIBLE))

    def driver(self):
        """Where nvme comes from: built in, a loadable module (and its file), or missing."""
        moddir = "/lib/modules/%s" % self.release
        loaded = self.fs.isdir("/sys/module/nvme")
        builtin_list = self.fs.read(moddir + "/modules.builtin") or ""
        module_file = None
        for line in (self.fs.read(moddir + "/modules.dep") or "").splitlines():
            path = line.split(":", 1)[0].strip()
            if NVME_KO.search(path):
                module_file = path if path.startswith("/") else moddir + "/" + path
                break
        if any(NVME_KO.search(line.strip()) for line in builtin_list.splitlines()):
            kind, how = "builtin", moddir + "/modules.builtin"
        elif module_file:
            kind, how = "module", moddir + "/modules.dep"
        elif loaded and not self.fs.exists("/sys/module/nvme/initstate"):
            # Built-in code with parameters gets /sys/module/<name> too, but never initstate.
            kind, how = "builtin", "/sys/module/nvme without initstate"
        elif loaded:
            kind, how = "module", "/sys/module/nvme/initstate"
        else:
            kind, how = None, "neither %s/modules.builtin nor modules.dep lists nvme.ko" % moddir
        return {"kind": kind, "loaded": loaded, "module_file": module_file, "detected_by": how}

    def parameters(self):
        """What the driver holds now, {param: int or None}."""
        return dict((p, _int_or_none(self.fs.read("%s/%s" % (PARAMETERS_DIR, p)))) for p in PARAMS)

    def cmdline(self):
        return parse_cmdline(self.fs.read("/proc/cmdline"))

    def modprobe_options(self):
        """[(file, {param: value})] for nvme from every modprobe.d file kmod reads, in its order."""
        seen = {}
        for directory in MODPROBE_DIRS:
            for entry in self.fs.listdir(directory):
                if entry.endswith(".conf") and entry not in seen:
                    seen[entry] = directory + "/" + entry
        out = []
        for entry in sorted(seen):
            path = seen[entry]
            try:
                text = self.fs.read(path)
            except KernelFileError as e:
                self.warnings.append(e.message)
                continue
            options = parse_modprobe_options(text)
            if options:
                out.append((path, options))
        return out

    # initramfs ------------------------------------------------------------------------------
    def initramfs(self, refresh=False):
        """The booted kernel's initramfs: does it carry nvme.ko and this module's options file?

        Listing it takes seconds (7 s under TCG for a 6 MB zstd image), so it is listed once per
        call unless ``refresh``.
        """
        if self._initramfs is None or refresh:
            self._initramfs = self._list_initramfs()
        return dict(self._initramfs)

    def start_initramfs_listing(self):
        """Start listing the initramfs in the background (a runner that can ``start`` a command), so that the
        seconds it takes pass while the call plans its other sections; :meth:`initramfs` takes the answer.
        Nothing is started without such a runner, or without an image and a tool to list it."""
        if self._initramfs is not None or self._listing is not None or not callable(getattr(self.runner, "start", None)):
            return
        info, tool = self._initramfs_target()
        if tool:
            try:
                self._listing = (info, self.runner.start([tool, info["path"]]))
            except OSError:
                self._listing = None    # listed in the foreground, with its error reported there

    def _initramfs_target(self):
        """(info, tool): the booted kernel's image with its mtime and the tool that lists it (None, with ``info``
        final, when there is no image or no tool)."""
        info = dict(NO_INITRAMFS, contains_nvme=None)
        for pattern in INITRAMFS_PATHS:
            if self.fs.exists(pattern % self.release):
                info["path"] = pattern % self.release
                break
        if info["path"] is None:
            info["contains_nvme"] = False
            return info, None
        info["mtime"] = os.path.getmtime(self.fs.path(info["path"]))
        tool = None
        if self.runner is not None:
            for name in ("lsinitramfs", "lsinitrd"):
                tool = self.runner.which(name)
                if tool:
                    break
        if not tool:
            self.warnings.append("cannot list %s (neither lsinitramfs nor lsinitrd is installed): whether nvme "
                                 "loads from the initramfs is unknown" % info["path"])
            return info, None
        info["tool"] = os.path.basename(tool)
        return info, tool

    def _list_initramfs(self):
        listing, self._listing = self._listing, None
        if listing is not None:
            info, started = listing
        else:
            info, tool = self._initramfs_target()
            if not tool:
                return info
        try:
            _rc, out, _err = started.wait() if listing is not None else self.runner.run([tool, info["path"]])
        except CommandError as e:
            self.warnings.append("cannot list %s: %s" % (info["path"], e.message))
            return info
        # lsinitramfs prints paths; lsinitrd prints ls -l lines: the path is the last word.
        names = set(line.split()[-1].lstrip("./") for line in out.splitlines() if line.strip())
        info["contains_nvme"] = any(NVME_KO.search(n) for n in names)
        info["includes_options"] = CONF_PATH.lstrip("/") in names
        return info

    # queue map ------------------------------------------------------------------------------
    def forget_klog(self):
        self._klog = None  # a reset logs a new queue line

    def klog(self):
        """The driver's queue-count lines from the kernel log (only read when debugfs cannot say)."""
        if self._klog is None:
            self._klog = nvme.read_klog(self.runner) if self.runner is not None else {}
        return self._klog

    def controllers(self):
        """{controller: record} for every NVMe controller, with its namespaces' hctx maps."""
        out = {}
        for name, ctrl in nvme.scan_controllers(self.fs, self.warnings).items():
            namespaces = dict((ns, self._namespace(ns)) for ns in ctrl.namespaces
                              if self.fs.isdir("/sys/block/%s/mq" % ns))
            out[name] = {
                "transport": ctrl.transport, "state": ctrl.state, "serial": ctrl.serial, "model": ctrl.model,
                "queue_count": ctrl.queue_count, "namespaces": namespaces,
                "queues": nvme.queue_split(name, namespaces, self.debugfs, self.klog),
            }
        return out

    def _namespace(self, ns):
        rec = {"hctxs": nvme.hctxs(self.fs, ns, self.debugfs, self.warnings),
               "io_poll": _int_or_none(self.fs.read("/sys/block/%s/queue/io_poll" % ns))}
        head = multipath_head(ns)
        if head:
            # Native multipath: I/O goes through the head nvme<S>n<N>, a bio-based disk without mq/.
            rec["multipath_head"] = {"name": head,
                                     "io_poll": _int_or_none(self.fs.read("/sys/block/%s/queue/io_poll" % head))}
        return rec


def pcie(controllers):
    """Controllers driven by the nvme (PCIe) driver; fabrics controllers have their own options."""
    return dict((n, c) for n, c in controllers.items() if c.get("transport") == "pcie")


# -- decisions ----------------------------------------------------------------------------------
def validate_values(params, ncpus):
    """Problems with the requested values; [] when the driver will take them."""
    problems = []
    for p in ("poll_queues", "write_queues"):
        v = params.get(p)
        if v is None:
            continue
        if v < 0:
            problems.append("%s=%d: must be 0 or more" % (p, v))
        elif ncpus is None:
            problems.append("%s: cannot read %s to check the value against the number of possible CPUs"
                            % (p, CPU_POSSIBLE))
        elif v > ncpus:
            problems.append("%s=%d is more than the %d possible CPUs (%s): the driver refuses it with EINVAL, "
                            "and a refused option makes 'modprobe nvme' fail, so no NVMe disk would appear "
                            "at boot; use at most %d" % (p, v, ncpus, CPU_POSSIBLE, ncpus))
    depth = params.get("io_queue_depth")
    if depth is not None and not DEPTH_MIN <= depth <= DEPTH_MAX:
        problems.append("io_queue_depth=%d: the driver takes %d to %d (EINVAL otherwise)"
                        % (depth, DEPTH_MIN, DEPTH_MAX))
    return problems


def write_probe(split):
    """write_queues a controller was set up with, as far as its map tells (0 without read queues)."""
    return split["default"] if split.get("read") else 0


def runtime_problems(controllers, live, effective):
    """Why resetting the PCIe controllers with ``effective`` parameters is not proven safe ([] = safe).

    Safe means: every controller already runs at least as many poll and write queues as the reset
    would ask for (a reset can only re-split what probe created, and a poll map exists only when
    probe had poll queues), its hctx types are known, and io_queue_depth stays what the tag set
    was sized for.
    """
    problems, adds = [], []
    if effective["io_queue_depth"] != live["io_queue_depth"]:
        problems.append("io_queue_depth %s -> %s: the blk-mq tag set is sized when the controller is probed and a "
                        "reset does not resize it" % (live["io_queue_depth"], effective["io_queue_depth"]))
    for name, c in sorted(pcie(controllers).items()):
        split = c["queues"]
        if c.get("state") != "live":
            problems.append("%s is in state %r, not live" % (name, c.get("state")))
            continue
        if split.get("poll") is None:
            problems.append("%s: its hctx types are unknown (%s)" % (name, split.get("note") or "no source"))
            continue
        running = "%s runs %d/%d/%d default/read/poll (%s)" % (
            name, split["default"], split["read"], split["poll"], split["source"])
        if effective["poll_queues"] > split["poll"]:
            adds.append("%s; poll_queues=%d would add poll queues" % (running, effective["poll_queues"]))
        elif effective["write_queues"] > write_probe(split):
            adds.append("%s; write_queues=%d would add write queues (no read hctxs means it runs write_queues=0)"
                        % (running, effective["write_queues"]))
        if split.get("nr_tags") and effective["io_queue_depth"] < split["nr_tags"] + 1:
            problems.append("%s: io_queue_depth=%d is below its tag depth (%d tags)"
                            % (name, effective["io_queue_depth"], split["nr_tags"]))
    if adds:
        problems.append("%s: blk-mq does not map queue types a controller was not probed with, and %s"
                        % ("; ".join(adds), STALL))
    return problems


def map_check(controllers, want_poll):
    """Per PCIe controller: does the map have ``want_poll`` poll hctxs and queue/io_poll to match?"""
    checks, ok = {}, True
    want_io_poll = 1 if want_poll else 0
    for name, c in sorted(pcie(controllers).items()):
        problems = []
        split = c["queues"]
        if split.get("poll") is None:
            problems.append("hctx types unknown: %s" % split.get("note"))
        elif split["poll"] != want_poll:
            problems.append("%d poll queue(s), expected %d" % (split["poll"], want_poll))
        for ns, rec in sorted(c["namespaces"].items()):
            polls = [h for h in rec["hctxs"] if h["type"] == "poll"]
            if split.get("poll") is not None and len(polls) != want_poll:
                problems.append("%s has %d poll hctx(s), expected %d" % (ns, len(polls), want_poll))
            if rec["io_poll"] != want_io_poll:
                problems.append("%s queue/io_poll reads %s, expected %d" % (ns, rec["io_poll"], want_io_poll))
        c["poll_queues_expected"] = want_poll
        c["map_ok"] = not problems
        c["map_problems"] = problems
        checks[name] = not problems
        ok = ok and not problems
    return ok if checks else None


# -- engine settings -------------------------------------------------------------------------------
class RuntimeQueues(Setting):
    """Driver parameters written live, then every PCIe controller reset, then the map verified.

    One setting, so that a failure restores in the right order: the old parameters first, then
    the resets that make the controllers take them again.
    """

    order = 10

    def __init__(self, host, targets, controllers, want_poll, timeout=None):
        self.host = host
        self.targets = dict(targets)
        self.names = sorted(pcie(controllers))
        self.timeout = RESET_TIMEOUT if timeout is None else timeout
        self.reset_done = []
        desired = {"parameters": dict(self.targets),
                   "poll_queues": dict((n, want_poll) for n in self.names),
                   "io_poll": dict((n, 1 if want_poll else 0) for n in self.names)}
        super(RuntimeQueues, self).__init__("runtime (%s + reset_controller)" % PARAMETERS_DIR, desired)

    def read(self, fs):
        params = self.host.parameters()
        self.host.forget_klog()
        controllers = self.host.controllers()
        return {"parameters": dict((p, params[p]) for p in self.targets),
                "poll_queues": dict((n, controllers[n]["queues"]["poll"]) for n in self.names if n in controllers),
                "io_poll": dict((n, _common_io_poll(controllers[n])) for n in self.names if n in controllers)}

    def write(self, fs, value, current):
        for p in PARAMS:
            if p in value["parameters"]:
                fs.write("%s/%s" % (PARAMETERS_DIR, p), str(value["parameters"][p]))
        for name in self.names:
            self._reset(fs, name)

    def restore(self, fs, previous):
        # Old parameters first, then reset every controller (all of them, even if one refuses).
        for p in PARAMS:
            if p in previous["parameters"]:
                fs.write("%s/%s" % (PARAMETERS_DIR, p), str(previous["parameters"][p]))
        failures = []
        for name in self.names:
            try:
                self._reset(fs, name)
            except KernelFileError as e:
                failures.append(e)
        if failures:
            raise failures[0]

    def _reset(self, fs, name):
        # reset_controller returns once the reset work has run (nvme_reset_ctrl_sync); wait for
        # 'live' in case the controller was still settling.
        fs.write("%s/%s/reset_controller" % (nvme.SYS_CLASS_NVME, name), "1")
        self.reset_done.append(name)
        deadline = time.time() + self.timeout
        while (fs.read("%s/%s/state" % (nvme.SYS_CLASS_NVME, name)) or "").strip() != "live":
            if time.time() > deadline:
                raise KernelFileError("%s/%s/state" % (nvme.SYS_CLASS_NVME, name), "live", errno.ETIMEDOUT,
                                      action="wait %g s for" % self.timeout)
            time.sleep(0.2)


def _common_io_poll(controller):
    values = sorted(set(rec["io_poll"] for rec in controller["namespaces"].values()))
    return values[0] if len(values) == 1 else (values or None)


class InitramfsUpdate(Setting):
    """``update-initramfs -u -k <release>`` so that the initramfs's copy of modprobe.d matches."""

    order = 1100  # after the modprobe.d file it copies

    def __init__(self, host, conf_content, runner):
        self.host = host
        self.path = host.initramfs()["path"]
        self.conf_content = conf_content
        self.runner = runner
        self.rebuilt = False
        super(InitramfsUpdate, self).__init__(self.path, {"includes_options": conf_content is not None,
                                                          "up_to_date": True})

    def read(self, fs):
        info = self.host.initramfs(refresh=bool(self.rebuilt))
        if info["includes_options"] is None:
            raise CommandError([info["tool"] or "lsinitramfs", self.path], None, "", "",
                               reason="cannot tell what the initramfs holds")
        return {"includes_options": info["includes_options"],
                "up_to_date": initramfs_up_to_date(fs, info, self.conf_content)}

    def write(self, fs, value, current):
        tool = self.runner.which("update-initramfs")
        if not tool:
            raise CommandError(["update-initramfs"], None, "", "", reason="update-initramfs is not installed "
                               "(dracut hosts: run dracut --force --kver %s)" % self.host.release)
        self.runner.run([tool, "-u", "-k", self.host.release])
        self.rebuilt = True

    def restore(self, fs, previous):
        # A rebuilt initramfs cannot be un-built; the restored modprobe.d file is picked up by
        # the next rebuild. Nothing to do here.
        return None


def initramfs_up_to_date(fs, info, conf_content):
    """Does the initramfs carry the options file exactly when it should, and was it built after it?"""
    held = fs.read_bytes(CONF_PATH)
    held = None if held is None else held.decode("utf-8", "replace")
    if held != conf_content:
        return False  # the file changes in this run: any initramfs built before is stale
    if info["includes_options"] != (conf_content is not None):
        return False
    if conf_content is not None and info["mtime"] is not None:
        return info["mtime"] >= os.path.getmtime(fs.path(CONF_PATH))
    return True


# -- the request ---------------------------------------------------------------------------------
def boot_values(driver, files, cmdline):
    """What the driver will hold after the next boot, and where each value comes from.

    kmod reads the modprobe.d files in file-name order and appends their options, so a later file
    wins; ``nvme.<param>=`` on the kernel command line is applied after them (and is the only
    source for a built-in driver).
    """
    values, sources = dict(DEFAULTS), dict((p, "driver default") for p in PARAMS)
    if driver["kind"] == "module":
        for path, opts in sorted(files, key=lambda f: os.path.basename(f[0])):
            for p in PARAMS:
                if _int_or_none(opts.get(p)) is not None:
                    values[p], sources[p] = _int_or_none(opts[p]), path
    for p in PARAMS:
        if _int_or_none(cmdline.get(p)) is not None:
            values[p], sources[p] = _int_or_none(cmdline[p]), "/proc/cmdline"
    return values, sources


def conflicts(asked, files, cmdline):
    """Other places that set a parameter this call persists, to another value (modprobe.d driver)."""
    out = []
    for p, v in sorted(asked.items()):
        for path, opts in files:
            if path != CONF_PATH and p in opts and _int_or_none(opts[p]) != v:
                out.append("%s sets nvme %s=%s as well: kmod applies every file's options in file-name order, so "
                           "one of the two is lost at boot; remove it there" % (path, p, opts[p]))
        if p in cmdline and _int_or_none(cmdline[p]) != v:
            out.append("the kernel command line sets nvme.%s=%s, which overrides %s=%d from modprobe.d at boot; "
                       "remove it from the boot loader configuration" % (p, cmdline[p], p, v))
    return out


def hazards(live, controllers):
    """A poll_queues parameter above what a controller runs: its next reset (error recovery too) stalls."""
    out = []
    for name, c in sorted(pcie(controllers).items()):
        running = c["queues"].get("poll")
        if running is not None and live["poll_queues"] is not None and live["poll_queues"] > running:
            out.append("the driver's poll_queues parameter reads %d but %s runs %d poll queue(s): any reset of it "
                       "(error recovery included) would take the parameter, and %s; reboot so that it is probed "
                       "with it" % (live["poll_queues"], name, running, STALL))
    return out


def head_notes(controllers):
    """Multipath heads whose queue/io_poll disagrees with the map of their paths."""
    out, seen = [], set()
    for _name, c in sorted(pcie(controllers).items()):
        for ns, rec in sorted(c["namespaces"].items()):
            head = rec.get("multipath_head")
            if not head or head["name"] in seen or c["queues"].get("poll") is None:
                continue
            seen.add(head["name"])
            path_poll = 1 if c["queues"]["poll"] else 0
            if head["io_poll"] is not None and head["io_poll"] != path_poll:
                out.append("multipath head %s: queue/io_poll reads %d but its path %s runs %d poll queue(s). The head "
                           "takes the flag when it is created and a controller reset does not update it (observed on "
                           "6.12); io_uring IOPOLL through the head failed with EOPNOTSUPP while it read 1 without poll "
                           "queues. A reboot makes them agree"
                           % (head["name"], head["io_poll"], ns, c["queues"]["poll"]))
    return out


class Request:
    """One nvme_queues call: :meth:`validate`, :meth:`plan`, the engine run, :meth:`reread`, :meth:`report`."""

    def __init__(self, params, fs, runner):
        self.params = params
        self.fs = fs
        self.runner = runner
        self.host = NvmeHost(fs, runner)
        self.state = params.get("state") or "present"
        self.asked = dict((p, int(params[p])) for p in PARAMS if params.get(p) is not None)

    def validate(self):
        """The input's own form, then what the host must have for it; raises :class:`RequestError`."""
        errors = []
        if self.state == "absent" and self.asked:
            errors.append("state=absent removes the persisted options; do not give %s with it"
                          % ", ".join(sorted(self.asked)))
        if self.state == "present" and not self.asked:
            errors.append("state=present needs at least one of %s" % ", ".join(PARAMS))
        self.ncpus = self.host.possible_cpus()
        errors.extend(validate_values(self.asked, self.ncpus))
        self.driver = self.host.driver()
        if self.driver["kind"] is None:
            errors.append("this kernel (%s) has no nvme driver: %s" % (self.host.release, self.driver["detected_by"]))
        if errors:
            raise RequestError(errors)

    def plan(self, defer=False):
        """What the next boot and the running driver get, as engine settings.

        Raises :class:`RequestError` for a conflicting setting elsewhere or an unsafe runtime change,
        before listing the initramfs (seconds) and before any write. With ``defer`` the listing only starts
        here (in the background) and :meth:`finish` takes it and adds the initramfs rebuild if one is due:
        host_profile calls it once every section is planned, before the engine runs.
        """
        host, driver, state, asked = self.host, self.driver, self.state, self.asked
        self.live = host.parameters()
        self.cmdline = host.cmdline()
        self.controllers = host.controllers()
        files = host.modprobe_options()
        held = dict(files).get(CONF_PATH, {})
        self.conf_content = render_conf(asked) if state == "present" and driver["kind"] == "module" else None
        planned = [f for f in files if f[0] != CONF_PATH]
        if self.conf_content is not None:
            planned.append((CONF_PATH, parse_modprobe_options(self.conf_content)))
        self.next_boot, self.sources = boot_values(driver, planned, self.cmdline)
        errors = conflicts(asked, files, self.cmdline) if driver["kind"] == "module" else []

        # Parameters this call owns: the ones asked for, or (absent) the ones the owned file held.
        targets = dict((p, self.next_boot[p]) for p in (asked if state == "present" else held) if p in PARAMS)
        if driver["kind"] == "builtin":
            targets = dict(asked) if state == "present" else {}
        self.effective = dict(self.live)
        self.effective.update(targets)
        self.runtime = None
        needs_runtime = driver["loaded"] and (
            any(self.live[p] != v for p, v in targets.items())
            or any(c["queues"].get("poll") != self.effective["poll_queues"] for c in pcie(self.controllers).values()))
        if self.params.get("reset_controllers") and needs_runtime:
            unsafe = runtime_problems(self.controllers, self.live, self.effective)
            if unsafe:
                errors.append("reset_controllers=true refused, nothing written and no controller reset: %s. Leave "
                              "reset_controllers=false: the values are persisted and taken at the next boot "
                              "(reboot_required)" % "; ".join(unsafe))
            else:
                self.runtime = RuntimeQueues(host, targets, self.controllers, self.effective["poll_queues"])
        if errors:
            raise RequestError(errors)

        self.settings = [self.runtime] if self.runtime is not None else []
        if driver["kind"] == "module" or state == "absent":
            self.settings.append(ManagedFile(CONF_PATH, self.conf_content, adopt=self.params.get("adopt")))
        self.initramfs, self.rebuild = None, None
        if defer and driver["kind"] == "module":
            host.start_initramfs_listing()
            return
        self.finish()

    def finish(self):
        """The initramfs (listed now, or the listing :meth:`plan` started) and, if it carries nvme.ko and
        update_initramfs is on, its rebuild as the last setting. Once."""
        if self.initramfs is not None:
            return
        self.initramfs = self.host.initramfs() if self.driver["kind"] == "module" else dict(NO_INITRAMFS)
        if self.initramfs["contains_nvme"] and self.params.get("update_initramfs"):
            self.rebuild = InitramfsUpdate(self.host, self.conf_content, self.runner)
            self.settings.append(self.rebuild)

    def reread(self, result, check_mode):
        """After the engine run: read again what a change moved (parameters and map, initramfs)."""
        if result["changed"] and not check_mode:
            if self.runtime is not None:
                self.host.forget_klog()
                self.live, self.controllers = self.host.parameters(), self.host.controllers()
            if self.rebuild is not None:
                self.initramfs = self.host.initramfs(refresh=True)

    def report(self, result, check_mode):
        """The module result (with ``warnings``): the driver now and at the next boot, the map, what to do."""
        driver, controllers, initramfs = self.driver, self.controllers, self.initramfs
        want_poll = (self.asked.get("poll_queues", self.next_boot["poll_queues"]) if self.state == "present"
                     else self.next_boot["poll_queues"])
        map_ok = map_check(controllers, want_poll)
        if initramfs["contains_nvme"]:
            initramfs["up_to_date"] = (initramfs_up_to_date(self.fs, initramfs, self.conf_content)
                                       if initramfs["includes_options"] is not None else None)
        actions = self._actions(check_mode)
        notes = []
        if self.host.debugfs is None and pcie(controllers):
            notes.append("debugfs is not mounted (this module does not mount it): the hctx types come from the "
                         "driver's 'X/Y/Z default/read/poll queues' kernel-log line and the hctx order, see "
                         "controllers.*.queues")
        for c in controllers.values():
            c["queues"].pop("nr_tags", None)
        initramfs.pop("mtime", None)
        return {
            "changed": result["changed"],
            "diff": result["diff"],
            "parameters": self.live,
            "next_boot": self.next_boot,
            "next_boot_sources": self.sources,
            "persisted": {"mechanism": "modprobe.d" if driver["kind"] == "module" else "kernel command line",
                          "path": CONF_PATH if self.conf_content is not None else None,
                          "options": dict(self.asked) if self.conf_content else {},
                          "kernel_cmdline": self.cmdline},
            "driver": dict(driver, loads_from=_loads_from(driver, initramfs)),
            "initramfs": initramfs,
            "possible_cpus": self.ncpus,
            "reboot_required": self._reboot_required(check_mode),
            "action_required": actions,
            "controllers_reset": list(self.runtime.reset_done) if self.runtime is not None else [],
            "controllers": controllers,
            "poll_queues_expected": want_poll,
            "queue_map_ok": map_ok,
            "warnings": (self.host.warnings + notes + hazards(self.live, controllers) + head_notes(controllers)
                         + actions),
        }

    def _actions(self, check_mode):
        """What the operator must do before the next boot takes the values (boot loader, initramfs)."""
        actions, initramfs = [], self.initramfs
        if self.driver["kind"] == "builtin" and self.state == "present":
            missing = ["nvme.%s=%d" % (p, v) for p, v in sorted(self.asked.items())
                       if _int_or_none(self.cmdline.get(p)) != v]
            if missing:
                actions.append("nvme is built into kernel %s, so modprobe.d does not apply: put %s on the kernel "
                               "command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub) and "
                               "reboot" % (self.host.release, " ".join(missing)))
        if initramfs["contains_nvme"]:
            if not initramfs["up_to_date"] and (self.rebuild is None or check_mode):
                actions.append("nvme.ko is in %s, so at boot modprobe reads the initramfs's copy of modprobe.d: "
                               "rebuild it (update-initramfs -u -k %s, or update_initramfs=true) before rebooting"
                               % (initramfs["path"], self.host.release))
        elif initramfs["contains_nvme"] is None:
            actions.append("could not inspect %s: if nvme.ko is in it, rebuild it before rebooting" % initramfs["path"])
        return actions

    def _reboot_required(self, check_mode):
        """Does the running driver (or, in check mode after a planned reset, the predicted one) differ
        from what the next boot gives?"""
        running = dict(self.live)
        polls = [c["queues"].get("poll") for c in pcie(self.controllers).values()]
        if self.runtime is not None and check_mode:
            running, polls = self.effective, [self.effective["poll_queues"]] * len(polls)
        return bool(self.driver["loaded"]) and (
            any(running[p] is not None and running[p] != self.next_boot[p] for p in PARAMS)
            or any(poll != self.next_boot["poll_queues"] for poll in polls))


# The module's options (AnsibleModule keywords); host_profile checks its nvme_queues section with the same.
MODULE_SPEC = {"argument_spec": {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "poll_queues": {"type": "int"},
    "write_queues": {"type": "int"},
    "io_queue_depth": {"type": "int"},
    "reset_controllers": {"type": "bool", "default": False},
    "update_initramfs": {"type": "bool", "default": False},
    "adopt": {"type": "bool", "default": False},
}}


def part(params, fs, runner, defer=False):
    """Validate and plan: the engine part whose report is the module result. With ``defer`` (host_profile)
    the initramfs is listed in the background while the other sections plan: the part's ``finish()`` must be
    called before the engine runs (it completes ``settings``)."""
    request = Request(params, fs, runner)
    request.validate()
    request.plan(defer=defer)

    def report(result, check_mode):
        request.reread(result, check_mode)
        return request.report(result, check_mode)

    out = Part(request.settings, [], report)
    if defer:
        def finish():
            request.finish()
            out.settings = list(request.settings)
        out.finish = finish
    return out


def reconcile(params, fs, runner, check_mode=False):
    """One nvme_queues call: validate, plan, apply and report; returns the module result (with ``warnings``)."""
    return run_part(fs, part(params, fs, runner), check_mode)


def _loads_from(driver, initramfs):
    if driver["kind"] == "builtin":
        return "kernel image (built in)"
    if driver["kind"] != "module":
        return None
    if initramfs.get("contains_nvme"):
        return "initramfs (%s)" % initramfs["path"]
    if initramfs.get("contains_nvme") is None:
        return "unknown (initramfs not inspected)"
    return "root filesystem"


def purge(p):
    """purge's step: our modprobe.d options, state=absent (the driver's defaults at its next load)."""
    if any(o == "nvme_queues" for o, _p in p.owned):
        result = p.step("nvme_queues", lambda: reconcile({"state": "absent"}, p.fs, p.runner, p.check_mode))
        p.reboot_required = bool(result.get("reboot_required"))
