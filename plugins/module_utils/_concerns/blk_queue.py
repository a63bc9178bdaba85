# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Block-queue settings (``/sys/block/<disk>/queue/*``) for several disks, live and by udev rule.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Kernel rules this file encodes (observed on Debian 6.1.0-57 and 6.12.118, see docs/blk_queue.md):

* ``scheduler`` first: switching the elevator resets ``nr_requests`` (to 2 x min(tag depth, 128)
  for a scheduler, to the tag depth for ``none``); writing the scheduler a disk already has
  changes nothing. So ``nr_requests`` is written after the scheduler, and again whenever the
  scheduler changes, and a restore puts the old scheduler back before the old ``nr_requests``.
* ``nr_requests``: below 4 (BLKDEV_MIN_RQ) the kernel stores 4; above the limit it answers EINVAL.
  The limit is the hardware tag depth (``mq/*/nr_tags``) without a scheduler, 2048 (MAX_SCHED_RQ)
  with one: the module checks against the scheduler the disk will have, before any write.
* ``wbt_lat_usec``: ``-1`` means the default (2000 us non-rotational, 75000 us rotational); a write
  of the latency the kernel already holds is ignored. 6.12 shows 0 while bfq or iocost has switched
  the default wbt off, and keeps it off for ``-1`` or the default latency; any other value turns
  it on (manual). The module does not fight that: it reports it.
* ``read_ahead_kb`` is stored in pages (4095 reads back 4092); ``max_sectors_kb`` must be at least
  a page and at most ``max_hw_sectors_kb`` (6.1: EINVAL above, 6.12: clamps; 6.12 rounds down to
  the logical block size); ``rq_affinity``/``nomerges`` 3 and ``iostats`` 2 are silently mapped by
  the kernel, so only the documented values are accepted.
* bio-based disks (dm, md, zram, NVMe multipath heads) have no scheduler, ``nr_requests``, wbt or
  ``rq_affinity``: 6.12 has no such files, 6.1 ignores (scheduler) or refuses them.
* ``io_poll``, ``io_poll_delay`` and ``mq/*/cpu_list`` are not settings (writes refused, ignored,
  or the file is read-only): refused with a pointer to the nvme_queues module.

Persistence: one udev rule per disk, keyed by its stable identity, ``ACTION=="add|change"`` with
``ATTR{queue/...}`` assignments in kernel order (udev writes them one by one, in order).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import iocost as _iocost
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver, resolve_each
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import (
    BLK_QUEUE_RULES, PersistError, is_managed, udev_match,
)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.argspec import PERSIST
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Part, RequestError, Setting, run_part

NVME_QUEUES = "aiinfra.io_isolation.nvme_queues"
IOCOST_QOS = "/sys/fs/cgroup/io.cost.qos"

MAX_SCHED_RQ = 2048        # block/blk-mq-tag.c: upper bound with an I/O scheduler (16 x 128)
WBT_DEFAULT_USEC = _iocost.WBT_DEFAULT_USEC


def argument_spec(persist_spec):
    """The module's spec: ``device`` + attributes, or ``devices`` entries (top-level attributes as defaults)."""
    options = dict((a.name, a.option()) for a in CATALOGUE)
    entry = {"device": {"type": "str", "required": True}}
    entry.update(options)
    spec = {
        "device": {"type": "str"},
        "devices": {"type": "list", "elements": "dict", "options": entry},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    }
    spec.update(options)
    for name, option in persist_spec.items():
        spec[name] = dict(option)
    return spec


class BlkQueueError(RequestError):
    """Input that cannot be turned into a request; ``errors`` lists every problem."""


def requests(params):
    """[(selector, {attribute: value})] from the module parameters; BlkQueueError lists every problem.

    With ``devices``, top-level attributes are defaults that an entry's own values override.
    """
    problems = []
    defaults = dict((a, params.get(a)) for a in ATTRIBUTES if params.get(a) is not None)
    for refused in REFUSED:
        if params.get(refused.name) is not None:
            problems.append("%s: %s" % (refused.name, refused.refused))
    if params.get("device") is not None:
        entries = [{"device": params["device"]}]
    else:
        entries = list(params.get("devices") or [])
        if not entries:
            problems.append("give device, or devices with at least one entry")
    refused_anywhere = bool(problems)
    out = []
    for index, entry in enumerate(entries):
        selector = entry.get("device")
        where = "devices[%d] (%s)" % (index, selector) if params.get("device") is None else str(selector)
        for refused in REFUSED:
            if entry.get(refused.name) is not None:
                problems.append("%s: %s: %s" % (where, refused.name, refused.refused))
                refused_anywhere = True
        attrs = dict(defaults)
        attrs.update((a, entry[a]) for a in ATTRIBUTES if entry.get(a) is not None)
        if params.get("state") == "absent" and attrs:
            problems.append("%s: state=absent removes the disk's persisted rule and takes no queue attributes "
                            "(got %s); the live values stay as they are" % (where, ", ".join(sorted(attrs))))
        elif params.get("state") != "absent" and not attrs and not refused_anywhere:
            problems.append("%s: no queue attribute to set; give at least one of %s" % (where, ", ".join(ATTRIBUTES)))
        out.append((selector, attrs))
    if problems:
        raise BlkQueueError(problems)
    return out


def resolve(resolver, selectors):
    """[record] for the selectors (whole disks, each once); one DeviceError naming every failure."""
    def one(selector):
        try:
            return resolver.resolve(selector)
        except DeviceError as e:
            if e.reason != "partition" or not e.candidates:
                raise
            parent = e.candidates[0]
            raise DeviceError("%r is a partition of %s (%s): a partition has no queue of its own (no queue/ "
                              "directory), its I/O goes through the whole disk's queue; use %s"
                              % (selector, parent["name"], parent["majmin"], parent["name"]),
                              selector=selector, reason="partition", candidates=e.candidates)

    def duplicate(first, selector, record):
        return DeviceError("%r and %r both resolve to %s; list each disk once" % (first, selector, record.summary()),
                           selector=selector, reason="duplicate", candidates=[record.brief()])

    return resolve_each(selectors, one, DeviceError, "device", duplicate)


# ---------------------------------------------------------------------------------------------
# What one disk's queue looks like (read once per run, before anything is written)
# ---------------------------------------------------------------------------------------------

class _Missing(object):
    """A queue file the kernel does not have for this disk (ENOENT), or cannot read (EINVAL)."""

    def __init__(self, err=None):
        self.err = err

    def __repr__(self):
        return "<absent>" if self.err is None else "<unreadable: %s>" % self.err.errname


def page_size():
    return os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


kernel_release = _iocost.kernel_release


def loadable_schedulers(fs, release):
    """Elevator names that a write would load as a module (``<name>-iosched``: module or alias)."""
    if not release:
        return []
    base = "/lib/modules/%s" % release
    names = set()
    for line in (fs.read(base + "/modules.alias") or "").splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "alias" and parts[1].endswith("-iosched"):
            names.add(parts[1][:-len("-iosched")])
    for line in (fs.read(base + "/modules.dep") or "").splitlines():
        module = os.path.basename(line.split(":", 1)[0])
        module = re.sub(r"\.ko(\.[a-z0-9]+)?$", "", module).replace("_", "-")
        if module.endswith("-iosched"):
            names.add(module[:-len("-iosched")])
    return sorted(names)


class QueueContext:
    """One disk: its record and the queue facts the settings depend on (read lazily, cached)."""

    def __init__(self, fs, record, release=None, page=None):
        self.fs = fs
        self.record = record
        self.name = record.name
        self.base = "/sys/block/%s" % record.name
        self.release = release
        self.page_kb = (page or page_size()) // 1024
        self._cache = {}
        self.settings = {}      # attribute -> QueueSetting of this run

    def path(self, attr):
        return "%s/queue/%s" % (self.base, attr)

    def _cached(self, key, read):
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]

    def _int(self, path):
        try:
            text = self.fs.read(path)
        except KernelFileError:
            return None
        try:
            return int((text or "").strip())
        except ValueError:
            return None

    def current_scheduler(self):
        """What the kernel printed before this run: {"current", "available"}, or None."""
        def read():
            try:
                return codecs.SCHEDULER.parse(self.fs.read(self.path("scheduler")) or "")
            except (codecs.CodecError, KernelFileError):
                return None
        return self._cached("scheduler", read)

    def effective_scheduler(self):
        """The scheduler the disk will run once this run's scheduler write (if any) is done."""
        setting = self.settings.get("scheduler")
        if setting is not None and setting.desired is not None:
            return setting.desired
        current = self.current_scheduler()
        return current["current"] if current else None

    def scheduler_changes(self):
        setting = self.settings.get("scheduler")
        current = self.current_scheduler()
        return bool(setting is not None and setting.desired is not None and current
                    and current["current"] != setting.desired)

    def tag_depths(self):
        """(nr_tags, nr_reserved_tags) of the hardware queues: the smallest over all hctxs."""
        def read():
            tags, reserved = [], []
            for hctx in self.fs.listdir(self.base + "/mq"):
                if hctx.isdigit():
                    tags.append(self._int("%s/mq/%s/nr_tags" % (self.base, hctx)))
                    reserved.append(self._int("%s/mq/%s/nr_reserved_tags" % (self.base, hctx)))
            tags = [t for t in tags if t is not None]
            reserved = [r for r in reserved if r is not None]
            return (min(tags) if tags else None, max(reserved) if reserved else 0)
        return self._cached("tags", read)

    def rotational(self):
        return self._cached("rotational", lambda: bool(self._int(self.path("rotational"))))

    def max_hw_sectors_kb(self):
        return self._cached("max_hw", lambda: self._int(self.path("max_hw_sectors_kb")))

    def logical_block_kb(self):
        def read():
            size = self._int(self.path("logical_block_size"))
            return size // 1024 if size and size >= 1024 else 0
        return self._cached("lbs", read)

    def iocost_enabled(self):
        def read():
            try:
                parsed = codecs.IO_COST_QOS.parse(self.fs.read(IOCOST_QOS) or "")
            except (codecs.CodecError, KernelFileError):
                return False
            line = codecs.IO_COST_QOS.lookup(parsed, self.record.majmin) or {}
            return str(line.get("enable")) == "1"
        return self._cached("iocost", read)

    def wbt_default(self):
        return WBT_DEFAULT_USEC[self.rotational()]

    def wbt_off_cause(self):
        """Why the kernel may hold default wbt off on this disk after this run, or None."""
        if self.effective_scheduler() == "bfq":
            return "the bfq scheduler switches the default wbt off"
        if self.iocost_enabled() and _iocost.kernel_turns_wbt_off(self.release):
            return "iocost is enabled on the disk (io.cost.qos enable=1), which switches the default wbt off"
        return None

    def planned_queue(self):
        """(scheduler, wbt state) the disk holds after this run: what iocost's conflict rules read."""
        wbt = self.settings.get("wbt_lat_usec")
        if wbt is not None and not wbt.problems:
            return self.effective_scheduler(), _iocost.wbt_state(wbt.desired, self.rotational())
        now = self._int(self.path("wbt_lat_usec"))
        state = _iocost.wbt_state(now, self.rotational()) if now is not None else None
        if now == 0 and self.scheduler_changes() and self.current_scheduler()["current"] == "bfq":
            state = _iocost.wbt_state(None, self.rotational())   # leaving bfq switches the default wbt back on
        return self.effective_scheduler(), state

    def not_mq_message(self, attrs):
        rec = self.record
        msg = ("%s (%s) is a bio-based disk (no blk-mq: %s/mq does not exist): it has no I/O scheduler, request "
               "depth, writeback throttling or completion affinity, so %s cannot be set (6.12 has no such files; "
               "6.1 ignores a scheduler write and refuses the others)"
               % (rec.name, rec.majmin, self.base, ", ".join(attrs)))
        if rec.kind == "nvme-multipath-head":
            msg += ("; it is an NVMe native-multipath head: the queues belong to the hidden path disks (%s), "
                    "reachable only with native multipath off (nvme_core.multipath=N)" % ", ".join(rec.nvme_paths or []))
        elif rec.slaves:
            msg += "; set these on the disks underneath it: %s" % ", ".join(rec.slaves)
        return msg


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

def _int_input(value, what, minimum=None, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise ValueError("%s: %r is not an integer" % (what, value))
    if minimum is not None and value < minimum:
        raise ValueError("%s: %d is below %d" % (what, value, minimum))
    if maximum is not None and value > maximum:
        raise ValueError("%s: %d is above %d" % (what, value, maximum))
    return value


class QueueSetting(Setting):
    """One ``queue/<attr>`` file of one disk. ``desired`` is what the kernel will print.

    The value's range, floor and default are the file's codec's; a subclass adds the kernel's
    rules that depend on the disk (limits read from sysfs, what a scheduler switch resets).
    """

    def __init__(self, ctx, attribute, raw):
        self.ctx = ctx
        self.attribute = attribute
        self.attr = attribute.name
        self.codec = attribute.codec
        self.raw = raw
        self.problems = []
        self.notes = []          # input the kernel will normalise (reported as warnings)
        self.written = False
        desired = None
        try:
            desired = self.normalize(raw)
        except ValueError as e:
            self.problems.append("%s: %s" % (ctx.name, e))
        super(QueueSetting, self).__init__(ctx.path(self.attr), desired, attribute.order)
        ctx.settings[self.attr] = self

    # -- input -------------------------------------------------------------------------
    def number(self, raw):
        """The input as an integer within the codec's range; ValueError naming the attribute."""
        return _int_input(raw, self.attr, minimum=self.codec.minimum, maximum=self.codec.maximum)

    def normalize(self, raw):
        return self.codec.normalize(self.number(raw))

    def format(self, value):
        return str(int(value))

    def parse(self, text):
        return self.codec.parse(text)

    def check(self, current):
        """Problems of the desired value against this disk (limits read from sysfs)."""
        return []

    # -- engine ------------------------------------------------------------------------
    def read(self, fs):
        try:
            text = fs.read(self.key)
        except KernelFileError as e:
            if e.errno == errno.EINVAL:     # the attribute exists but does not apply (6.1 bio-based wbt)
                return _Missing(e)
            raise
        if text is None:
            return _Missing()
        try:
            return self.parse(text)
        except (ValueError, codecs.CodecError):
            raise KernelFileError(self.key, None, errno.EIO, action="read")

    def validate(self, current):
        problems = list(self.problems)
        if self.attribute.mq_only and not self.ctx.record.has_mq:
            return problems + ["%s: %s" % (self.attr, self.ctx.not_mq_message([self.attr]))]
        if isinstance(current, _Missing):
            if current.err is None:
                return problems + ["%s does not exist: the running kernel (%s) has no %s for %s"
                                   % (self.key, self.ctx.release or "?", self.attr, self.ctx.name)]
            return problems + ["%s cannot be read (%s): the kernel does not support %s on %s"
                               % (self.key, current.err.errname, self.attr, self.ctx.name)]
        if problems:
            return problems
        return ["%s: %s: %s" % (self.ctx.name, self.attr, p) for p in self.check(current)]

    def write(self, fs, value, current):
        self.written = True
        fs.write(self.key, self.format(value))

    def restore(self, fs, previous):
        if previous is not None and not isinstance(previous, _Missing):
            fs.write(self.key, self.format(previous))

    def report(self, value):
        return self.attribute.report(value)

    def rule_value(self):
        return self.format(self.desired)


class SchedulerSetting(QueueSetting):
    """queue/scheduler: the name in brackets; a switch resets nr_requests (restore puts it back)."""

    def __init__(self, ctx, attribute, raw, loadable=()):
        self.loadable = list(loadable)
        self.nr_before = None
        super(SchedulerSetting, self).__init__(ctx, attribute, raw)

    def normalize(self, raw):
        if not isinstance(raw, str) or not re.match(r"^[A-Za-z0-9_.-]+$", raw.strip()):
            raise ValueError("scheduler: %r is not a scheduler name (none, mq-deadline, kyber, bfq, ...)" % (raw,))
        name = raw.strip()
        return self.codec.aliases.get(name, name)

    def format(self, value):
        return value["current"] if isinstance(value, dict) else value

    def read(self, fs):
        current = super(SchedulerSetting, self).read(fs)
        if self.written:
            return current      # the read-back after the switch: keep the depth from before it
        try:
            self.nr_before = int((fs.read(self.ctx.path("nr_requests")) or "").strip())
        except (ValueError, KernelFileError):
            self.nr_before = None
        return current

    def check(self, current):
        if current.get("current") is None:
            return ["the kernel shows no active scheduler (%r); the disk is not blk-mq" % " ".join(current["available"])]
        if self.desired in current["available"]:
            return []
        if self.desired in self.loadable:
            return []   # the kernel loads <name>-iosched on write (observed: kyber, bfq)
        loadable = [n for n in self.loadable if n not in current["available"]]
        return ["%r is not an I/O scheduler this kernel has: %s lists %s%s. Nothing was written; pick one of "
                "those (kernel names: none, mq-deadline, kyber, bfq; 'deadline' means mq-deadline)"
                % (self.desired, self.ctx.path("scheduler"), ", ".join(current["available"]),
                   "; loadable as modules: %s" % ", ".join(loadable) if loadable else
                   "; no other scheduler module is installed")]

    def differs(self, current):
        return current.get("current") != self.desired

    def restore(self, fs, previous):
        # Old elevator first (resets nr_requests to that elevator's default), then the old depth.
        if not isinstance(previous, dict):
            return
        fs.write(self.key, previous["current"])
        nr_path = self.ctx.path("nr_requests")
        if self.nr_before is not None and (fs.read(nr_path) or "").strip() != str(self.nr_before):
            fs.write(nr_path, str(self.nr_before))

    def rule_value(self):
        return self.desired


class NrRequestsSetting(QueueSetting):
    """queue/nr_requests: compared after the scheduler; rewritten whenever the scheduler changes."""

    def normalize(self, raw):
        value = self.number(raw)
        stored = self.codec.normalize(value)
        if stored != value:
            self.notes.append("%s: nr_requests %d is below the kernel's minimum (BLKDEV_MIN_RQ): the kernel stores "
                              "%d, so %d is written and compared" % (self.ctx.name, value, stored, stored))
        return stored

    def limits(self):
        """(lowest, highest, why) for the scheduler the disk will run when nr_requests is written."""
        scheduler = self.ctx.effective_scheduler()
        nr_tags, reserved = self.ctx.tag_depths()
        lowest = max(self.codec.floor, reserved + 1)
        if scheduler in (None, "none"):
            return lowest, nr_tags, ("with scheduler none the limit is the hardware tag depth (%s/mq/*/nr_tags = %s)"
                                     % (self.ctx.base, nr_tags))
        return lowest, MAX_SCHED_RQ, ("with scheduler %s the limit is %d (the kernel's MAX_SCHED_RQ)"
                                      % (scheduler, MAX_SCHED_RQ))

    def check(self, current):
        lowest, highest, why = self.limits()
        if highest is not None and self.desired > highest:
            tip = ""
            if self.ctx.effective_scheduler() in (None, "none") and highest < MAX_SCHED_RQ:
                tip = "; an I/O scheduler (e.g. mq-deadline) allows up to %d" % MAX_SCHED_RQ
            return ["%d is above what the kernel accepts for %s: at most %d; %s%s. Nothing was written"
                    % (self.desired, self.ctx.name, highest, why, tip)]
        if self.desired < lowest:
            return ["%d is not above the %d reserved tags of %s" % (self.desired, lowest - 1, self.ctx.name)]
        return []

    def differs(self, current):
        if current != self.desired:
            return True
        # A scheduler switch earlier in this run resets nr_requests: plan the write anyway.
        return not self.written and self.ctx.scheduler_changes()

    def restore(self, fs, previous):
        scheduler = self.ctx.settings.get("scheduler")
        if scheduler is not None and scheduler.written:
            return      # the scheduler's restore puts the old depth back after the old elevator
        super(NrRequestsSetting, self).restore(fs, previous)


class WbtSetting(QueueSetting):
    """queue/wbt_lat_usec: -1 = the kernel default; wbt switched off by bfq/iocost is not fought."""

    def format(self, value):
        return self.codec.format(value)[0] if value is None else str(int(value))

    def satisfied(self, current):
        default = self.ctx.wbt_default()
        off_by_default = current == 0 and self.ctx.wbt_off_cause() is not None
        if self.desired is None:
            return current == default or off_by_default
        if self.desired == 0:
            return current == 0
        # The kernel ignores a write of the latency it already holds, so while bfq/iocost keeps the
        # default wbt off, asking for the default latency leaves it off (6.12): accept that.
        return current == self.desired or (off_by_default and self.desired == default)

    def differs(self, current):
        if not self.satisfied(current):
            return True
        # bfq switches the default wbt off when it starts and on when it goes: a switch from or to
        # bfq earlier in this run makes the value read now stale, so write it after the switch.
        return not self.written and self.ctx.scheduler_changes() and "bfq" in (
            self.ctx.current_scheduler()["current"], self.ctx.effective_scheduler())


class MaxSectorsSetting(QueueSetting):
    def check(self, current):
        problems = []
        hw = self.ctx.max_hw_sectors_kb()
        if self.desired < self.ctx.page_kb:
            problems.append("%d is below one page (%d KiB): the kernel refuses it (EINVAL)"
                            % (self.desired, self.ctx.page_kb))
        if hw is not None and self.desired > hw:
            problems.append("%d is above the disk's max_hw_sectors_kb (%d): 6.1 refuses it (EINVAL), 6.12 clamps it; "
                            "give at most %d" % (self.desired, hw, hw))
        lbs = self.ctx.logical_block_kb()
        if lbs > 1 and self.desired % lbs:
            problems.append("%d is not a multiple of the logical block size (%d KiB): 6.12 rounds it down to %d; "
                            "give that" % (self.desired, lbs, self.desired - self.desired % lbs))
        return problems


class ReadAheadSetting(QueueSetting):
    def normalize(self, raw):
        value = self.number(raw)
        page_kb = self.ctx.page_kb
        if value % page_kb:
            floored = value - value % page_kb
            self.notes.append("%s: read_ahead_kb %d is not a whole number of pages: the kernel stores %d (%d KiB "
                              "pages), so %d is written and compared" % (self.ctx.name, value, floored, page_kb, floored))
            value = floored
        return value


class ChoiceSetting(QueueSetting):
    """rq_affinity / nomerges (0, 1, 2) and iostats / add_random (booleans, written 0/1)."""

    def normalize(self, raw):
        if isinstance(raw, bool):
            raw = int(raw)
        value = _int_input(raw, self.attr)
        if value not in self.attribute.choices:
            # The kernel does not refuse other numbers, it maps them (rq_affinity 3 is ignored,
            # nomerges 3 reads 1, iostats 2 reads 1): refuse them instead.
            raise ValueError("%s: %d is not one of %s"
                             % (self.attr, value, ", ".join(str(c) for c in self.attribute.choices)))
        return value


class QueueAttribute:
    """One option of the module: a ``queue/<name>`` file it sets, or a name it takes only to refuse it.

    ``setting``: the QueueSetting class that knows the kernel's rules for the file; its codec (range,
    floor, default, booleans) is the file's in ``_codecs.QUEUE_ATTRIBUTES``. ``mq_only``: only
    request-based (blk-mq) queues have the file. ``refused``: why the option is no setting and where
    it really lives (an unknown-option error would not say). ``order``: the kernel write order.
    """

    def __init__(self, name, setting=None, mq_only=False, refused=None):
        self.name = name
        self.setting = setting
        self.mq_only = mq_only
        self.refused = refused
        self.codec = codecs.QUEUE_ATTRIBUTES[name] if setting else None
        self.order = None
        # Settings that take a few values, none of which the kernel refuses (it maps the others).
        self.choices = tuple(range(self.codec.minimum, self.codec.maximum + 1)) if setting is ChoiceSetting else None

    def option(self):
        """The argument spec of the option (the codec says whether it is a name, a number or a boolean)."""
        if self.refused:
            return {"type": "raw"}
        if isinstance(self.codec, codecs.Scheduler):
            return {"type": "str"}
        if self.codec.boolean:
            return {"type": "bool"}
        return {"type": "int", "choices": list(self.choices)} if self.choices else {"type": "int"}

    def report(self, value):
        """A value as the module shows it: the scheduler by name, booleans as booleans, -1 for wbt's default."""
        if isinstance(value, dict):
            return value.get("current")
        if value is None:
            return getattr(self.codec, "any_value", None)
        return bool(value) if getattr(self.codec, "boolean", False) and isinstance(value, int) else value


def _in_write_order(*attributes):
    """The attributes, each settable one numbered for the engine in the order given (10, 20, ...)."""
    for index, attribute in enumerate(a for a in attributes if a.setting):
        attribute.order = 10 * (index + 1)
    return attributes


# The catalogue blk_queue walks (argument spec, input, settings, udev rule, result). It lives here,
# with the QueueSetting classes that carry each attribute's kernel rules; the codecs stay in
# _codecs.QUEUE_ATTRIBUTES, where io_facts reads every queue file, settable or not.
# Kernel order: what a later write depends on comes first (scheduler resets nr_requests and, with
# bfq, switches wbt off); the rest are independent. The udev rule lists them in the same order.
CATALOGUE = _in_write_order(
    QueueAttribute("scheduler", SchedulerSetting, mq_only=True),
    QueueAttribute("nr_requests", NrRequestsSetting, mq_only=True),
    QueueAttribute("wbt_lat_usec", WbtSetting, mq_only=True),
    QueueAttribute("max_sectors_kb", MaxSectorsSetting),
    QueueAttribute("read_ahead_kb", ReadAheadSetting),
    QueueAttribute("rq_affinity", ChoiceSetting, mq_only=True),
    QueueAttribute("nomerges", ChoiceSetting),
    QueueAttribute("iostats", ChoiceSetting),
    QueueAttribute("add_random", ChoiceSetting),
    QueueAttribute("io_poll", refused=(
        "queue/io_poll is not a setting: it shows 1 when the disk has poll queues, and since 5.16 the kernel refuses "
        "writes (EINVAL; observed on 6.1 and 6.12) or ignores them. Poll queues come from the nvme driver's "
        "poll_queues parameter, applied when the controller sets up its queues: use %s" % NVME_QUEUES)),
    QueueAttribute("io_poll_delay", refused=(
        "queue/io_poll_delay does nothing: hybrid polling was removed in 6.4 and the kernel ignores the value (6.1 "
        "stores and shows it, 6.12 always shows -1). For polled I/O set up poll queues with %s" % NVME_QUEUES)),
    QueueAttribute("cpu_list", refused=(
        "mq/*/cpu_list is read-only (mode 0444, EACCES on write): the CPU-to-hardware-queue map comes from the "
        "driver's interrupt affinity. Change the queue split (default/read/poll queues) with %s and read the "
        "resulting map from its result or io_facts" % NVME_QUEUES)),
)
SETTABLE = dict((a.name, a) for a in CATALOGUE if a.setting)
ATTRIBUTES = tuple(a.name for a in CATALOGUE if a.setting)
REFUSED = tuple(a for a in CATALOGUE if a.refused)


def make_setting(ctx, attr, raw, loadable=()):
    """The QueueSetting of attribute ``attr`` for one disk; ``loadable``: scheduler modules the kernel can load."""
    attribute = SETTABLE[attr]
    if attribute.setting is SchedulerSetting:
        return SchedulerSetting(ctx, attribute, raw, loadable)
    return attribute.setting(ctx, attribute, raw)


# ---------------------------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------------------------

def rule_path(record):
    return BLK_QUEUE_RULES.path(record.stable_id)


def udev_rule(record, settings):
    """The rule that re-applies ``settings`` (QueueSettings of one disk) at add/change, in kernel order."""
    assigns = ['ATTR{queue/%s}="%s"' % (s.attr, s.rule_value()) for s in sorted(settings, key=lambda s: s.order)]
    return BLK_QUEUE_RULES.render("%s, stable id %s" % (record.model or record.kind, record.stable_id),
                                  ['ACTION=="add|change", %s, %s' % (udev_match(record), ", ".join(assigns))])


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------

class DevicePlan:
    def __init__(self, ctx, settings, rule=None, rule_path=None):
        self.ctx = ctx
        self.settings = settings       # QueueSettings of this disk
        self.rule = rule               # ManagedFile or None
        self.rule_path = rule_path     # persisted_to (present) / removed (absent)


def build(fs, records_and_attrs, params, release=None, page=None):
    """(all settings, input errors, [DevicePlan]) for the resolved disks."""
    state = params.get("state", "present")
    loadable = loadable_schedulers(fs, release)
    settings, errors, plans = [], [], []
    for record, attrs in records_and_attrs:
        ctx = QueueContext(fs, record, release, page)
        own = [make_setting(ctx, attr, attrs[attr], loadable) for attr in ATTRIBUTES if attr in attrs]
        plan = DevicePlan(ctx, own)
        if state == "present" and params.get("persist", True):
            try:
                if record.stable_id is None:
                    raise PersistError("%s has no stable identity to key a udev rule by (%s); use persist=false"
                                       % (record.name, record.stable_id_note))
                content = udev_rule(record, own) if not any(s.problems for s in own) else None
            except PersistError as e:
                errors.append(str(e))
                content = None
            if content is not None:
                plan.rule_path = rule_path(record)
                plan.rule = BLK_QUEUE_RULES.file(record.stable_id, content, adopt=params.get("adopt"))
        elif state == "absent" and record.stable_id is not None:
            plan.rule_path = rule_path(record)
            plan.rule = BLK_QUEUE_RULES.file(record.stable_id, None, adopt=params.get("adopt"))
        settings.extend(own)
        if plan.rule is not None:
            settings.append(plan.rule)
        plans.append(plan)
    return settings, errors, plans


def held(ctx):
    """What the kernel holds now for every attribute this module knows (None: absent/unreadable)."""
    out = {}
    for attr in ATTRIBUTES:
        try:
            text = ctx.fs.read(ctx.path(attr))
        except KernelFileError:
            text = None
        if text is None:
            out[attr] = None
            continue
        try:
            out[attr] = SETTABLE[attr].report(SETTABLE[attr].codec.parse(text))
        except codecs.CodecError:
            out[attr] = text.strip()
    return out


def _nest(flat, key_to_device):
    out = {}
    for key, value in flat.items():
        if key in key_to_device:
            name, attr = key_to_device[key]
            out.setdefault(name, {})[attr] = value
        else:
            out[key] = value
    return out


def results(plans, reconciled, params, check_mode):
    """The module result: per-disk records, held values, warnings; diff nested by disk."""
    state = params.get("state", "present")
    key_to_device = {}
    for plan in plans:
        for s in plan.settings:
            key_to_device[s.key] = (plan.ctx.name, s.attr)
    changed_keys = set(reconciled["diff"]["after"])
    devices, warnings, persisted = [], [], []
    for plan in plans:
        ctx = plan.ctx
        values = held(ctx)
        notes = []
        for s in plan.settings:
            notes.extend(s.notes)
        asked = dict((s.attr, s) for s in plan.settings)
        wbt = asked.get("wbt_lat_usec")
        cause = ctx.wbt_off_cause()
        if wbt is not None and values.get("wbt_lat_usec") == 0 and wbt.desired != 0 and cause and wbt.satisfied(0):
            notes.append("%s: wbt_lat_usec reads 0: %s. This module does not turn it back on: -1 or the default latency "
                         "(%d) leave it off; another value would force wbt on next to it"
                         % (ctx.name, cause, ctx.wbt_default()))
        scheduler = asked.get("scheduler")
        if (scheduler is not None and scheduler.desired == "bfq" and wbt is None and not check_mode
                and scheduler.key in changed_keys and values.get("wbt_lat_usec") == 0):
            notes.append("%s: bfq switched writeback throttling off (wbt_lat_usec reads 0); it is left that way"
                         % ctx.name)
        if scheduler is not None and scheduler.key in changed_keys and "nr_requests" not in asked:
            before = scheduler.nr_before
            now = values.get("nr_requests")
            if not check_mode and before is not None and before != now:
                notes.append("%s: the scheduler change reset nr_requests from %s to %s (the kernel's default for %s); "
                             "set nr_requests to keep a value" % (ctx.name, before, now, scheduler.desired))
            elif check_mode:
                notes.append("%s: switching the scheduler to %s will reset nr_requests to that scheduler's default"
                             % (ctx.name, scheduler.desired))
        if state == "absent" and plan.rule_path and plan.rule_path in changed_keys:
            notes.append("%s: removed %s; the live values stay as they are until the next boot (or until set "
                         "explicitly): %s" % (ctx.name, plan.rule_path,
                                              ", ".join("%s=%s" % (k, values[k]) for k in ATTRIBUTES if values[k] is not None)))
        if state == "present" and not params.get("persist", True) and ctx.record.stable_id:
            existing = ctx.fs.read(rule_path(ctx.record))
            if existing is not None and is_managed(existing):
                notes.append("%s: persist=false, but %s exists and re-applies its own values at the next boot"
                             % (ctx.name, rule_path(ctx.record)))
        own_keys = set(s.key for s in plan.settings) | set([plan.rule_path] if plan.rule_path else [])
        entry = {
            "device": ctx.record.as_dict(),
            "changed": bool(own_keys & changed_keys),
            "held": values,
            "warnings": notes,
            "persisted_to": plan.rule_path if state == "present" else None,
        }
        if state == "absent":
            entry["removed"] = plan.rule_path if plan.rule_path in changed_keys else None
        devices.append(entry)
        warnings.extend(notes)
        if state == "present" and plan.rule_path:
            persisted.append(plan.rule_path)
    diff = {"before": _nest(reconciled["diff"]["before"], key_to_device),
            "after": _nest(reconciled["diff"]["after"], key_to_device)}
    return {"changed": reconciled["changed"], "diff": diff, "devices": devices, "persisted_to": persisted}, warnings


# The module's options (AnsibleModule keywords); host_profile checks its blk_queue section with the same.
MODULE_SPEC = {"argument_spec": argument_spec(PERSIST), "mutually_exclusive": [("device", "devices")],
               "required_one_of": [("device", "devices")]}


def planned_queues(plans):
    """{MAJ:MIN: (scheduler, wbt state)} each disk of the run holds after it (iocost's conflict rules)."""
    return dict((plan.ctx.record.majmin, plan.ctx.planned_queue()) for plan in plans
                if plan.ctx.record.majmin and plan.ctx.record.has_mq)


def part(params, fs, resolver=None, check_conflicts=True):
    """Resolve, build: the engine part whose report is the per-disk result.

    With ``check_conflicts`` (the module alone; host_profile checks its whole call instead) a disk
    that runs iocost is checked against iocost's conflict rules as this run leaves it. The part
    carries ``queues`` (:func:`planned_queues`) for host_profile.
    """
    wanted = requests(params)
    records = resolve(resolver or DeviceResolver(fs), [selector for selector, _attrs in wanted])
    release = kernel_release(fs)
    settings, errors, plans = build(fs, list(zip(records, [attrs for _s, attrs in wanted])), params,
                                    release=release)
    queues = planned_queues(plans) if params.get("state", "present") == "present" else {}
    conflict_warnings = []
    if check_conflicts and queues and not errors:
        ctxs = [p.ctx for p in plans if p.ctx.record.majmin in queues]
        disks = dict((ctx.record.majmin, ctx.record) for ctx in ctxs)
        enabled = dict((ctx.record.majmin, ctx.iocost_enabled()) for ctx in ctxs)
        found, conflict_warnings = _iocost.conflicts(_iocost.plan_disks(fs, disks, enabled, queues=queues))
        errors.extend(found)

    def report(reconciled, check_mode):
        result, warnings = results(plans, reconciled, params, check_mode)
        result["warnings"] = conflict_warnings + warnings
        return result

    out = Part(settings, errors, report)
    out.queues = queues
    return out


def run(params, fs, check_mode):
    """The module call: one engine run of the part, the per-disk report."""
    return run_part(fs, part(params, fs), check_mode)


def purge(p):
    """purge's step: disks with our rule, state=absent (the rule; the live values stay until the next boot, as this
    module reports)."""
    disks = [d for d in p.disks() if BLK_QUEUE_RULES.path(d.stable_id) in p.paths]
    p.claim(BLK_QUEUE_RULES.path(d.stable_id) for d in disks)
    if disks:
        p.step("blk_queue", lambda: run(
            {"devices": [{"device": d.stable_selector} for d in disks], "state": "absent", "adopt": False},
            p.fs, p.check_mode))
