# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The reconcile engine every module of this collection runs on.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

One call goes through the same steps for every kind of setting:

1. read the current value of every setting;
2. validate everything (input and input-against-current) and fail before the first write;
3. plan: the settings whose current value differs from the desired one, in the order the
   kernel needs (``order``; e.g. io.cost.model before io.cost.qos before io.weight);
4. check mode stops here and reports the plan as a diff;
5. apply in order, then let each written setting settle (what its writes left owed, done once);
6. read back every applied setting and compare it with what was asked (codecs normalise the
   desired value to what the kernel will print, so the comparison is exact);
7. on any failure (kernel refusal or read-back mismatch) restore what this call already changed,
   in reverse order, and fail with the reason and what was restored.

The result carries ``changed``, a structured ``diff: {before, after}`` and ``values``: what the
kernel holds now for every managed setting.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# What every refusal before the first write starts with (host_profile takes it off to name the section).
INVALID_REQUEST = "Invalid request (nothing was changed): "


def strip_invalid(message):
    """A refusal's message without INVALID_REQUEST (for a report that says it once for many)."""
    return message[len(INVALID_REQUEST):] if message.startswith(INVALID_REQUEST) else message


class Error(Exception):
    """The root of every error the collection raises on a host. The engine knows the branches below and
    imports nothing of the layers that raise them (a module ships only the host code it uses)."""


class HostError(Error):
    """What the host refused or cannot find - a kernel file (``_host/kernelfs.py``), a command
    (``_host/commands.py``), a selector that names no device or controller (``_host/devices.py``): ``message``
    for the task, ``as_dict()`` under ``RESULT_KEY`` in the failed result."""

    RESULT_KEY = "host_error"


class CodecError(Error, ValueError):
    """Invalid kernel text or desired value (``_host/codecs.py`` raises it); ``errors`` lists every problem
    found."""

    def __init__(self, errors):
        if not isinstance(errors, (list, tuple)):
            errors = [errors]
        self.errors = list(errors)
        self.msg = "; ".join(self.errors)
        super(CodecError, self).__init__(self.msg)


class ModuleError(Error):
    """Every refusal a module reports for its request: ``msg`` for the task, ``errors`` (each problem),
    ``details`` (extra result keys). The modules' own request errors derive from it, so that
    :func:`exit_module` is the one way every module fails."""

    def __init__(self, msg, errors=None, details=None):
        super(ModuleError, self).__init__(msg)
        self.msg = msg
        self.errors = list(errors or [msg])
        self.details = dict(details or {})


class RequestError(ModuleError):
    """Input that cannot be carried out (every problem listed); nothing was written."""

    def __init__(self, errors, details=None):
        errors = list(errors) if isinstance(errors, (list, tuple)) else [errors]
        super(RequestError, self).__init__(INVALID_REQUEST + "; ".join(errors), errors, details)


class ReconcileError(Error):
    """A failed reconcile: validation errors, a kernel refusal or a read-back mismatch."""

    def __init__(self, msg, errors=None, failed=None, restored=None, restore_errors=None,
                 kernel_error=None):
        super(ReconcileError, self).__init__(msg)
        self.msg = msg
        self.errors = list(errors or [])
        self.failed = failed
        self.restored = list(restored or [])
        self.restore_errors = list(restore_errors or [])
        self.kernel_error = kernel_error

    def details(self):
        """Extra keys for ``fail_json``."""
        out = {}
        if self.errors:
            out["errors"] = self.errors
        if self.failed is not None:
            out["failed_setting"] = self.failed
        if self.restored or self.restore_errors:
            out["restored"] = self.restored
            out["restore_errors"] = self.restore_errors
        if self.kernel_error is not None:
            out["kernel_error"] = self.kernel_error
        return out


class Setting:
    """One value on the host that a module wants in a given state.

    Subclasses implement :meth:`read` and :meth:`write`; the defaults of the rest fit most
    kernel files. ``desired`` must already be normalised to what the host will read back.
    """

    #: lower runs first; settings with equal order keep their input order
    order = 0

    def __init__(self, key, desired, order=None):
        self.key = key
        self.desired = desired
        if order is not None:
            self.order = order

    def read(self, fs):
        raise NotImplementedError

    def write(self, fs, value, current):
        """Make the host hold ``value``; ``current`` is what it held before this call."""
        raise NotImplementedError

    def differs(self, current):
        return current != self.desired

    def settle(self, fs):
        """After the last write of the call and before the read-back: finish what writes may leave owed (one
        ``daemon-reload`` for all of a call's units). Runs once per written setting; nothing to do by default."""

    def validate(self, current):
        """Problems with the desired value given the current one; [] when it is fine."""
        return []

    def restore(self, fs, previous):
        """Put back what the host held before this call."""
        self.write(fs, previous, None)

    def report(self, value):
        """How a value appears in diff/values (JSON-friendly)."""
        return value


class Directory(Setting):
    """A directory that exists (mkdir) or not (rmdir: the kernel or the file system refuses one with entries)."""

    def __init__(self, key, path, present=True, order=None):
        super(Directory, self).__init__(key, present, order)
        self.path = path

    def read(self, fs):
        return fs.isdir(self.path)

    def write(self, fs, value, current):
        if value:
            fs.mkdir(self.path)
        else:
            fs.rmdir(self.path)


class KernelFileSetting(Setting):
    """A setting held in one kernel pseudo-file, read and written through codec functions.

    ``parse(text) -> value`` turns the file's read-back into the comparable value;
    ``format(value, current) -> [lines]`` gives the line(s) to write, one ``write()`` each;
    ``restore_format(previous) -> [lines]`` (defaults to ``format``) puts the old state back.
    """

    def __init__(self, key, path, desired, parse, format, restore_format=None, order=None,
                 validate=None, compare=None):
        super(KernelFileSetting, self).__init__(key, desired, order)
        self.path = path
        self._parse = parse
        self._format = format
        self._restore_format = restore_format
        self._validate = validate
        self._compare = compare

    def read(self, fs):
        text = fs.read(self.path)
        if text is None:
            raise fs.missing(self.path)
        return self._parse(text)

    def differs(self, current):
        if self._compare is not None:
            return not self._compare(current, self.desired)
        return current != self.desired

    def validate(self, current):
        return list(self._validate(self.desired, current)) if self._validate else []

    def write(self, fs, value, current):
        fs.write_lines(self.path, self._format(value, current))

    def restore(self, fs, previous):
        fmt = self._restore_format or (lambda value, current: self._format(value, None))
        fs.write_lines(self.path, fmt(previous, None))


class CodecSetting(KernelFileSetting):
    """A kernel file managed through one of the codecs in ``_codecs``.

    ``desired`` is the user's value; the codec validates it (before any write) and normalises it
    to what the kernel will print, so the read-back comparison is exact where it must be and
    tolerant where the kernel rounds. With ``device`` (``MAJ:MIN``) a per-device file is narrowed
    to that device's line: only it is compared, written and restored. ``reset`` is what to write
    back when the device had no line before this call (e.g. ``{"enable": 0, "ctrl": "auto"}`` for
    io.cost.qos, whose lines appear on first write).
    """

    def __init__(self, key, path, codec, desired, device=None, order=None, reset=None, validate=None):
        self.codec = codec
        self.device = device
        self.raw = desired
        self.reset = reset if reset is not None else (codec.lookup({}, device) if device else None)
        self.problems = codec.validate(self._wrap(desired))
        normalised = None
        if not self.problems:
            normalised = codec.normalize(self._wrap(desired))
            normalised = codec.lookup(normalised, device) if device else normalised
        super(CodecSetting, self).__init__(key, path, normalised, parse=codec.parse, format=None,
                                           order=order, validate=validate)

    def _wrap(self, value):
        return {self.device: value} if self.device else value

    def read(self, fs):
        parsed = super(CodecSetting, self).read(fs)
        return self.codec.lookup(parsed, self.device) if self.device else parsed

    def differs(self, current):
        if self.device:
            return not self.codec.matches({self.device: self.desired}, {self.device: current})
        return not self.codec.matches(self.desired, current)

    def validate(self, current):
        return list(self.problems) + super(CodecSetting, self).validate(current)

    def write(self, fs, value, current):
        fs.write_lines(self.path, self.codec.format(self._wrap(value)))

    def restore(self, fs, previous):
        if previous is None:
            if self.reset is None:
                return
            value = self.reset
        else:
            value = self.codec.as_desired(self._wrap(previous))
            value = value[self.device] if self.device else value
        fs.write_lines(self.path, self.codec.format(self._wrap(value)))


class Plan:
    """What a reconcile would do; also the result of one."""

    def __init__(self):
        self.current = {}
        self.changes = []

    @property
    def changed(self):
        return bool(self.changes)


class Reconciler:
    """Runs settings through read -> validate -> plan -> apply -> verify -> (restore)."""

    def __init__(self, fs, check_mode=False):
        self.fs = fs
        self.check_mode = check_mode

    def _ordered(self, settings):
        return [s for _i, s in sorted(enumerate(settings), key=lambda p: (p[1].order, p[0]))]

    def plan(self, settings, errors=None):
        """Read and validate everything; raise ReconcileError before any write."""
        keys = [s.key for s in settings]
        dupes = sorted(set(k for k in keys if keys.count(k) > 1))
        problems = list(errors or [])
        if dupes:
            problems.append("the same setting is requested twice: %s" % ", ".join(dupes))
        plan = Plan()
        for s in settings:
            try:
                plan.current[s.key] = s.read(self.fs)
            except HostError as e:
                problems.append(e.message)
                continue
            except CodecError as e:
                problems.append("cannot read the current value of %s: %s" % (s.key, e))
                continue
            problems.extend(s.validate(plan.current[s.key]))
        if problems:
            raise ReconcileError(INVALID_REQUEST + "; ".join(problems), errors=problems)
        plan.changes = [s for s in self._ordered(settings) if s.differs(plan.current[s.key])]
        return plan

    def run(self, settings, errors=None):
        """Reconcile ``settings``; returns the result dict for ``exit_json``."""
        plan = self.plan(settings, errors)
        if self.check_mode or not plan.changes:
            return self._result(settings, plan, plan.current, applied=not self.check_mode)
        touched = []
        for s in plan.changes:
            touched.append(s)
            try:
                s.write(self.fs, s.desired, plan.current[s.key])
            except HostError as e:
                self._fail(touched, plan, "Applying %s failed: %s" % (s.key, e.message), s, e)
        for s in touched:
            try:
                s.settle(self.fs)
            except HostError as e:
                self._fail(touched, plan, "Applying %s failed: %s" % (s.key, e.message), s, e)
        held = dict(plan.current)
        for s in plan.changes:
            try:
                held[s.key] = s.read(self.fs)
            except HostError as e:
                self._fail(touched, plan, "Reading back %s failed: %s" % (s.key, e.message), s, e)
            except CodecError as e:
                self._fail(touched, plan, "Reading back %s failed: %s" % (s.key, e), s)
            if s.differs(held[s.key]):
                self._fail(touched, plan,
                           "The kernel holds %r for %s after writing %r; it normalised or ignored "
                           "the value" % (s.report(held[s.key]), s.key, s.report(s.desired)), s)
        return self._result(settings, plan, held, applied=True)

    def _fail(self, touched, plan, msg, failed, kernel_error=None):
        restored, restore_errors = [], []
        for s in reversed(touched):
            try:
                s.restore(self.fs, plan.current[s.key])
                restored.append(s.key)
            except HostError as e:
                restore_errors.append(e.message)
        if restored:
            msg += "; restored the earlier values of: %s" % ", ".join(restored)
        if restore_errors:
            msg += "; COULD NOT RESTORE: %s" % "; ".join(restore_errors)
        raise ReconcileError(msg, failed=failed.key, restored=restored, restore_errors=restore_errors,
                             kernel_error=kernel_error.as_dict() if kernel_error else None)

    @staticmethod
    def _result(settings, plan, held, applied):
        before, after = {}, {}
        for s in plan.changes:
            before[s.key] = s.report(plan.current[s.key])
            after[s.key] = s.report(held[s.key] if applied else s.desired)
        values = dict((s.key, s.report(held[s.key])) for s in settings)
        return {"changed": plan.changed, "diff": {"before": before, "after": after}, "values": values}


class Part:
    """One concern's share of a reconcile: its settings, the input errors found while building them,
    and how the engine's result for them becomes the concern's report.

    A single-purpose module runs one part (:func:`run_part`); ``host_profile`` runs the parts of
    every concern of a host through ONE engine run (one validation before the first write, one
    restore on failure) and hands each part the share of the result that is its own.
    ``report(result, check_mode)`` may read the host again (values after the write); it never writes.
    """

    def __init__(self, settings, errors=None, report=None):
        self.settings = list(settings)
        self.errors = list(errors or [])
        self._report = report

    def report(self, result, check_mode):
        return self._report(result, check_mode) if self._report is not None else dict(result)


def run_part(fs, part, check_mode):
    """The engine run of one part, reported."""
    return part.report(Reconciler(fs, check_mode=check_mode).run(part.settings, part.errors), check_mode)


def fail_module(module, err):
    """Turn any of the collection's errors into ``fail_json`` without a traceback."""
    if isinstance(err, ModuleError):
        module.fail_json(msg=err.msg, errors=err.errors, **err.details)
    if isinstance(err, ReconcileError):
        module.fail_json(msg=err.msg, **err.details())
    if isinstance(err, HostError):
        module.fail_json(msg=err.message, **{err.RESULT_KEY: err.as_dict()})
    module.fail_json(msg=str(err))


def exit_module(module, call):
    """The one way a module ends: with the result of ``call()`` (a dict; its ``warnings`` become task
    warnings), or - for a refusal, a device that does not resolve, an engine, kernel-file or command
    failure - through :func:`fail_module`, never with a traceback."""
    try:
        result = call()
    except (ModuleError, HostError, ReconcileError) as e:
        fail_module(module, e)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)
