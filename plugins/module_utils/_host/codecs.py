# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure codecs for the Linux kernel files this collection reads and writes.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

No I/O here. Every codec is an object with the same verbs:

* ``parse(text)``: kernel read-back -> Python value (raises :class:`CodecError`);
* ``validate(desired)``: list of ALL problems with a desired value ([] when fine);
* ``normalize(desired)``: what the kernel WILL print for ``desired`` (rounding, clamping,
  page flooring, ``max``); comparable with ``parse()`` output through ``matches()``/``diff()``;
* ``format(desired)``: the exact strings to write, one ``write()`` each (one device per string);
* ``as_desired(parsed)``: a desired value that reproduces a read-back state (for restore).

Conventions: devices are ``"MAJ:MIN"`` strings; ``"max"`` means unlimited; percentages
(io.cost.qos) are the kernel's own 2-decimal strings such as ``"95.00"`` (exact, comparable);
latencies are integer microseconds; sizes and rates are integer bytes (per second).
In a normalised value, a missing key means "not managed" and ``None`` means "any value".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

# declared by the engine, which reports it without importing this file
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import CodecError
# io.cost.model's and io.cost.qos's parameters (declared apart for the controller's database code)
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.iocost_keys import COST_COEFS, QOS_PARAMS

U32_MAX = 2 ** 32 - 1
U64_MAX = 2 ** 64 - 1
S64_MAX = 2 ** 63 - 1
MAX = "max"
PAGE_SIZE = 4096

_INT_RE = re.compile(r"^[+]?[0-9]+$")
_SINT_RE = re.compile(r"^[-+]?[0-9]+$")
_DEC_RE = re.compile(r"^([0-9]+)(?:\.([0-9]+))?$")
_FLOAT_RE = re.compile(r"^-?[0-9]+\.[0-9]+$")
_MAJMIN_RE = re.compile(r"^([0-9]+):([0-9]+)$")
_NUM_UNIT_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%/]*)$")
_RELEASE_RE = re.compile(r"^\s*([0-9]+)\.([0-9]+)(?:\.([0-9]+))?")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


class _Invalid(Exception):
    """One bad value; the codec adds file/device/key context to the message."""


# ---------------------------------------------------------------------------------------------
# Scalar helpers
# ---------------------------------------------------------------------------------------------

def _text(value):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.strip()


def _int(value, minimum=None, maximum=None, allow_max=False, signed=False, unit=None):
    """Integer (or 'max') from an int or a decimal string; _Invalid with a fix otherwise."""
    if allow_max and isinstance(value, str) and value.strip() == MAX:
        return MAX
    if isinstance(value, bool) or value is None or isinstance(value, float):
        raise _Invalid("%r is not an integer; give a whole number%s" % (
            value, " in " + unit if unit else ""))
    if isinstance(value, int):
        number = value
    elif isinstance(value, (str, bytes)):
        text = _text(value)
        if not (_SINT_RE if signed else _INT_RE).match(text):
            if text.startswith("-") and not signed:
                raise _Invalid("%r is negative" % (value,))
            raise _Invalid("%r is not a plain integer%s; the kernel takes digits only, no units or "
                           "suffixes%s" % (value, " in " + unit if unit else "",
                                           " ('max' for unlimited)" if allow_max else ""))
        number = int(text)
    else:
        raise _Invalid("%r is not an integer" % (value,))
    if number < 0 and minimum == 0:
        raise _Invalid("%r is negative" % (value,))
    if minimum is not None and number < minimum or maximum is not None and number > maximum:
        raise _Invalid("%s is out of range %s..%s" % (
            number, minimum if minimum is not None else "", maximum if maximum is not None else ""))
    return number


def _hundredths(value):
    """95 / '95' / 95.5 / '60.50' -> 9500 / 9500 / 9550 / 6050 (non-negative, at most 2 decimals).

    The kernel (cgroup_parse_float(buf, 2)) rounds extra digits half-up; we refuse them instead
    so that what is written is exactly what is read back.
    """
    if isinstance(value, bool) or value is None:
        raise _Invalid("%r is not a number" % (value,))
    if isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (int, str, bytes)):
        text = _text(str(value) if isinstance(value, int) else value)
    else:
        raise _Invalid("%r is not a number" % (value,))
    if text.startswith("-"):
        raise _Invalid("%r is negative" % (value,))
    m = _DEC_RE.match(text)
    if not m:
        raise _Invalid("%r is not a decimal number such as 95 or 95.50" % (value,))
    whole, frac = m.group(1), (m.group(2) or "")
    if frac[2:].strip("0"):
        rounded = int((Decimal(text) * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        raise _Invalid("%r has more than 2 decimals; the kernel would round it to %s: write that" % (
            value, _fmt_hundredths(rounded)))
    return int(whole) * 100 + int((frac + "00")[:2])


def _fmt_hundredths(hundredths):
    return "%d.%02d" % divmod(hundredths, 100)


def _coerce(raw):
    """Read-back token -> int, float (decimal) or the string itself."""
    if _SINT_RE.match(raw):
        return int(raw)
    if _FLOAT_RE.match(raw):
        return float(raw)
    return raw


def _suggest(key, valid, explicit=None):
    if explicit and key in explicit:
        return explicit[key]
    close = difflib.get_close_matches(key, valid, n=2, cutoff=0.6)
    hint = "valid keys: %s" % ", ".join(valid)
    if close:
        return "did you mean %s? (%s)" % (" or ".join(repr(c) for c in close), hint)
    return hint


def _scaled(number_text, multiplier, original):
    try:
        total = Decimal(number_text) * multiplier
    except InvalidOperation:  # pragma: no cover - the regex only lets digits through
        raise _Invalid("%r is not a number" % (original,))
    if total != total.to_integral_value():
        raise _Invalid("%r is not a whole number of bytes" % (original,))
    return int(total)


_BINARY = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40, "P": 2 ** 50, "E": 2 ** 60}


def _size(value):
    """Memory size -> bytes or 'max'. Suffixes are binary (memparse): K M G T P E, KiB..EiB."""
    if isinstance(value, str) and value.strip().lower() in (MAX, "infinity"):
        return MAX
    if isinstance(value, (int, bool)) or value is None or not isinstance(value, (str, bytes)):
        return _int(value, 0, U64_MAX, unit="bytes")
    text = _text(value)
    if text.endswith("%"):
        raise _Invalid("%r is a percentage; cgroupfs takes bytes (systemd's Memory*= settings accept "
                       "%%, the kernel file does not): give bytes, a K/M/G/T suffix or 'max'" % (value,))
    if text.startswith("-"):
        raise _Invalid("%r is negative; give bytes, a K/M/G/T suffix or 'max'" % (value,))
    m = _NUM_UNIT_RE.match(text)
    if not m:
        raise _Invalid("%r is not a size; give bytes, a K/M/G/T/P/E suffix (base 1024) or 'max'" % (value,))
    number, unit = m.groups()
    prefix = unit[:-2] if unit.endswith("iB") else unit
    if unit == "B":
        result = _scaled(number, 1, value)
    elif prefix.upper() in _BINARY and (unit == prefix or len(prefix) == 1):
        result = _scaled(number, _BINARY[prefix.upper()], value)
    elif len(unit) == 2 and unit[1] == "B" and unit[0].upper() in _BINARY:
        raise _Invalid("%r is ambiguous (decimal or binary?); memory sizes are binary here: write %s%s or "
                       "%siB (= %d bytes), or the byte count" % (
                           value, number, unit[0].upper(), number + unit[0].upper(),
                           _scaled(number, _BINARY[unit[0].upper()], value)))
    else:
        raise _Invalid("%r has an unknown unit %r; use K, M, G, T, P, E (base 1024) or KiB..EiB" % (value, unit))
    if result > U64_MAX:
        raise _Invalid("%r is larger than the kernel's 64-bit limit; use 'max'" % (value,))
    return result


_RATE_UNITS = {"B": 1, "kB": 10 ** 3, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
               "PB": 10 ** 15, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40,
               "PiB": 2 ** 50}


def parse_rate(value):
    """'2GB' -> 2000000000 (base 1000), '2GiB' -> 2147483648 (base 1024); ints pass through.

    A trailing '/s' is allowed. Bare K/M/G/T are rejected as ambiguous. Raises CodecError.
    """
    try:
        if not isinstance(value, (str, bytes)):
            return _int(value, 0, U64_MAX, unit="bytes per second")
        text = _text(value)
        if text.endswith("/s"):
            text = text[:-2].rstrip()
        m = _NUM_UNIT_RE.match(text)
        if not m:
            raise _Invalid("%r is not a rate such as 500MB, 2GiB or 1048576" % (value,))
        number, unit = m.groups()
        if unit == "":
            return _int(number, 0, U64_MAX)
        if unit in _RATE_UNITS:
            result = _scaled(number, _RATE_UNITS[unit], value)
            if result > U64_MAX:
                raise _Invalid("%r is larger than 2^64-1" % (value,))
            return result
        if unit.upper() in ("K", "M", "G", "T", "P"):
            dec_unit = ("k" if unit.upper() == "K" else unit.upper()) + "B"
            bin_unit = unit.upper() + "iB"
            raise _Invalid("%r is ambiguous: write %s%s for %d (base 1000) or %s%s for %d (base 1024)" % (
                value, number, dec_unit, _scaled(number, _RATE_UNITS[dec_unit], value),
                number, bin_unit, _scaled(number, _RATE_UNITS[bin_unit], value)))
        raise _Invalid("%r has an unknown unit %r; use B, kB/MB/GB/TB/PB (base 1000) or KiB/MiB/GiB/TiB/PiB "
                       "(base 1024)" % (value, unit))
    except _Invalid as e:
        raise CodecError("rate: %s" % e)


def parse_size(value):
    """Memory size -> bytes or 'max' ('512M', '1GiB', 1073741824, 'max', 'infinity'). CodecError if bad."""
    try:
        return _size(value)
    except _Invalid as e:
        raise CodecError("size: %s" % e)


def parse_majmin(value):
    """'259:0' or (259, 0) -> (259, 0). Raises CodecError naming the fix."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        major, minor = value
    else:
        m = _MAJMIN_RE.match(_text(value)) if isinstance(value, (str, bytes)) else None
        if not m:
            raise CodecError("device %r: expected MAJ:MIN of a whole disk such as 259:0 (see lsblk -o "
                             "NAME,MAJ:MIN); the kernel does not take device names or paths" % (value,))
        major, minor = m.groups()
    try:
        # dev_t has 12 major and 20 minor bits (MKDEV); larger numbers would alias another device.
        return _int(major, 0, 4095), _int(minor, 0, 2 ** 20 - 1)
    except _Invalid as e:
        raise CodecError("device %r: %s; expected MAJ:MIN such as 259:0" % (value, e))


def format_majmin(value):
    """(259, 0) or '259:0' -> '259:0' (canonical, no leading zeros)."""
    return "%d:%d" % parse_majmin(value)


def kernel_version(release):
    """'6.12.117+deb13-amd64' -> (6, 12, 117); CodecError if it does not start with X.Y."""
    m = _RELEASE_RE.match(str(release))
    if not m:
        raise CodecError("kernel release %r: expected something like '6.1.0-50-amd64'" % (release,))
    return tuple(int(x or 0) for x in m.groups())


def tokens(text):
    """Whitespace-insensitive form of a multi-token value: '4096\\t87380  6291456' -> '4096 87380 6291456'."""
    if isinstance(text, (list, tuple)):
        return " ".join(str(t) for t in text)
    return " ".join(str(text).split())


def _diff_values(path, want, have):
    if want is None:
        return []
    if isinstance(want, dict):
        have = have if isinstance(have, dict) else {}
        out = []
        for key, value in want.items():
            out.extend(_diff_values("%s.%s" % (path, key), value, have.get(key)))
        return out
    return [] if want == have else [(path, want, have)]


# ---------------------------------------------------------------------------------------------
# Codec bases
# ---------------------------------------------------------------------------------------------

class Codec:
    """One kernel file. Subclasses implement parse/_validate/_normalize/_format."""

    writable = True
    read_only_hint = ""

    def __init__(self, name):
        self.name = name

    def _err(self, text):
        return "%s: %s" % (self.name, text)

    def parse(self, text):  # pragma: no cover - every codec overrides it
        raise NotImplementedError

    def validate(self, desired):
        """All problems with ``desired`` as a list of messages; [] when it can be written."""
        if not self.writable:
            return [self._err("read-only file; %s" % self.read_only_hint)]
        return self._validate(desired)

    def check(self, desired):
        """Raise CodecError with every problem of ``desired``."""
        errors = self.validate(desired)
        if errors:
            raise CodecError(errors)

    def normalize(self, desired):
        """What the kernel will read back after ``format(desired)`` is written."""
        self.check(desired)
        return self._normalize(desired)

    def format(self, desired):
        """The strings to write, one write() each."""
        self.check(desired)
        return self._format(desired)

    def parse_write(self, text):
        """A written string (kernel syntax) -> desired value (strings, unvalidated)."""
        return _text(text)

    def as_desired(self, parsed):
        """A desired value that reproduces the read-back ``parsed``."""
        return parsed

    def diff(self, want, have):
        """[(path, want, have)] for every managed field of ``want`` that ``have`` does not hold."""
        return _diff_values(self.name, want, have)

    def matches(self, want, have):
        """True when the read-back ``have`` satisfies the normalised ``want``."""
        return not self.diff(want, have)

    def _validate(self, desired):  # pragma: no cover - every writable codec overrides it
        raise NotImplementedError

    def _conversion_errors(self, convert, desired):
        """[] when ``convert(desired)`` accepts the value, else its reason, named after this file."""
        try:
            convert(desired)
        except _Invalid as e:
            return [self._err(str(e))]
        return []

    def _normalize(self, desired):  # pragma: no cover - every writable codec overrides it
        raise NotImplementedError

    def _format(self, desired):  # pragma: no cover - every writable codec overrides it
        raise NotImplementedError


def parse_device_lines(text, name):
    """Shared parser of ``MAJ:MIN key=value ...`` files -> [("MAJ:MIN", [(key, value), ...])].

    Empty device lines (``7:7 `` in root io.stat) give an empty list. CodecError on junk.
    """
    out = []
    errors = []
    for line in _text(text).splitlines():
        fields = line.split()
        if not fields:
            continue
        try:
            dev = format_majmin(fields[0])
        except CodecError:
            errors.append("%s: line %r does not start with MAJ:MIN" % (name, line))
            continue
        pairs = []
        for token in fields[1:]:
            key, sep, value = token.partition("=")
            if not sep or not key:
                errors.append("%s: %s: token %r is not key=value" % (name, dev, token))
                continue
            pairs.append((key, value))
        out.append((dev, pairs))
    if errors:
        raise CodecError(errors)
    return out


class DeviceCodec(Codec):
    """A file with one line per device; desired is ``{"MAJ:MIN": settings}``."""

    #: per-device state when the file has no line for the device (None: not initialised)
    absent = None

    def _key(self, dev):
        return format_majmin(dev)

    def lookup(self, parsed, dev):
        """The parsed state of one device, ``absent`` if the file has no line for it."""
        key = self._key(dev)
        if key in parsed:
            return parsed[key]
        return dict(self.absent) if isinstance(self.absent, dict) else self.absent

    def _validate(self, desired):
        if not isinstance(desired, dict):
            return [self._err("expected a mapping of MAJ:MIN to settings, got %r" % (desired,))]
        errors, seen = [], set()
        for dev, settings in desired.items():
            try:
                key = self._key(dev)
            except CodecError as e:
                errors.extend(self._err(m) for m in e.errors)
                continue
            if key in seen:
                errors.append(self._err("device %s is given twice" % key))
            seen.add(key)
            errors.extend(self.validate_device(key, settings))
        return errors

    def validate_device(self, dev, settings):  # pragma: no cover - subclasses override
        raise NotImplementedError

    def normalize_device(self, dev, settings):
        """normalize() for one device."""
        self.check({dev: settings})
        return self._normalize_device(settings)

    def format_device(self, dev, settings):
        """format() for one device: a single line."""
        self.check({dev: settings})
        return self._format_device(self._key(dev), settings)

    def _normalize(self, desired):
        return dict((self._key(d), self._normalize_device(s)) for d, s in desired.items())

    def _format(self, desired):
        return [self._format_device(self._key(d), s) for d, s in desired.items()]

    def diff(self, want, have):
        out = []
        for dev, value in want.items():
            out.extend(_diff_values(dev, value, self.lookup(have, dev)))
        return out


class KeyedDeviceCodec(DeviceCodec):
    """``MAJ:MIN key=value ...`` files: io.cost.model, io.cost.qos, io.max, io.latency, io.stat."""

    keys = ()
    hints = {}

    def parse(self, text):
        return dict((dev, dict((k, self._read_field(k, v)) for k, v in pairs))
                    for dev, pairs in parse_device_lines(text, self.name))

    def _read_field(self, key, raw):
        return _coerce(raw)

    def parse_write(self, text):
        return dict((dev, dict(pairs)) for dev, pairs in parse_device_lines(text, self.name))

    def _ctrl_errors(self, dev, settings, values, keys, errors, auto_noun, full_set_msg):
        """The ctrl rules of io.cost.model/qos; appends to ``errors`` and returns the effective ctrl.

        Tokens apply in order, so ctrl=auto next to values discards them; a partial user set keeps
        the other values from whatever was active, so only the full set is idempotent.
        """
        given = [k for k in keys if k in settings]
        ctrl = values.get("ctrl", "user" if given else None)
        if ctrl == "auto" and given:
            errors.append(self._err("%s: ctrl=auto uses the kernel's %s; drop %s or set ctrl=user"
                                    % (dev, auto_noun, ", ".join(given))))
        missing = [k for k in keys if k not in settings]
        if ctrl == "user" and missing:
            errors.append(self._err("%s: %s; missing %s" % (dev, full_set_msg, ", ".join(missing))))
        return ctrl

    def _where(self, dev, key, value):
        return self._err("%s %s=%s: " % (dev, key, value))

    def _field_errors(self, dev, settings, checkers):
        """Run ``checkers[key](value)`` for every given key; unknown keys get a suggestion."""
        if not isinstance(settings, dict):
            return [], [self._err("%s: expected a mapping of key: value, got %r" % (dev, settings))]
        values, errors = {}, []
        for key, value in settings.items():
            if key not in checkers:
                errors.append(self._err("%s: unknown key %r; %s" % (
                    dev, key, _suggest(key, list(self.keys), self.hints))))
                continue
            try:
                values[key] = checkers[key](value)
            except _Invalid as e:
                errors.append(self._where(dev, key, value) + str(e))
        return values, errors

    def _line(self, dev, pairs):
        return " ".join([dev] + ["%s=%s" % kv for kv in pairs])


# ---------------------------------------------------------------------------------------------
# blk-iocost: io.cost.model, io.cost.qos
# ---------------------------------------------------------------------------------------------

_CTRL = ("auto", "user")


def _choice(choices):
    def check(value):
        if not isinstance(value, str) or value.strip() not in choices:
            raise _Invalid("must be one of %s" % ", ".join(choices))
        return value.strip()
    return check


class CostModel(KeyedDeviceCodec):
    """io.cost.model (root cgroup). Coefficients: bps in bytes/s, *iops in 4 KiB IOs per second.

    Desired per device: ``{"ctrl": "auto"}`` or all six coefficients (``ctrl`` user implied).
    """

    keys = ("ctrl", "model") + COST_COEFS
    hints = {
        "riops": "the random-read IOPS key is 'rrandiops' (sequential: 'rseqiops')",
        "rios": "the random-read IOPS key is 'rrandiops' (sequential: 'rseqiops')",
        "wiops": "the random-write IOPS key is 'wrandiops' (sequential: 'wseqiops')",
        "wios": "the random-write IOPS key is 'wrandiops' (sequential: 'wseqiops')",
    }

    def __init__(self):
        super(CostModel, self).__init__("io.cost.model")

    @staticmethod
    def _coef(value):
        number = _int(value, 0, U64_MAX)
        if number == 0:
            # The kernel takes 0 but a zero throughput/IOPS model is meaningless.
            raise _Invalid("0 makes the cost model meaningless; give the measured value "
                           "(tools/cgroup/iocost_coef_gen.py) or use ctrl=auto")
        return number

    def validate_device(self, dev, settings):
        checkers = dict((k, self._coef) for k in COST_COEFS)
        checkers.update(ctrl=_choice(_CTRL), model=_choice(("linear",)))
        values, errors = self._field_errors(dev, settings, checkers)
        if not isinstance(settings, dict):
            return errors
        ctrl = self._ctrl_errors(dev, settings, values, COST_COEFS, errors, "built-in model",
                                 "a user cost model needs all six coefficients")
        if ctrl is None and "ctrl" not in settings:
            errors.append(self._err("%s: nothing to set; give ctrl=auto or all of %s" % (dev, ", ".join(COST_COEFS))))
        return errors

    def _normalize_device(self, settings):
        if settings.get("ctrl") == "auto":
            return {"ctrl": "auto", "model": "linear"}
        out = {"ctrl": "user", "model": "linear"}
        out.update((k, _int(settings[k])) for k in COST_COEFS)
        return out

    def _format_device(self, dev, settings):
        norm = self._normalize_device(settings)
        if norm["ctrl"] == "auto":
            return self._line(dev, [("ctrl", "auto")])
        return self._line(dev, [("ctrl", "user"), ("model", "linear")] + [(k, norm[k]) for k in COST_COEFS])

    def as_desired(self, parsed):
        return dict((dev, self._normalize_device(state) if state.get("ctrl") == "user" else {"ctrl": "auto"})
                    for dev, state in parsed.items())


VRATE_MIN = 100          # 1.00 % in hundredths (VRATE_MIN_PPM)
VRATE_MAX = 1000000      # 10000.00 %


class CostQos(KeyedDeviceCodec):
    """io.cost.qos (root cgroup). rpct/wpct/min/max are "X.XX" percent strings; rlat/wlat in µs.

    Desired per device: ``enable`` (bool/0/1; any non-zero enables) and either ``ctrl: auto`` or
    all six parameters (``ctrl`` user implied). Keys left out are not managed.
    """

    keys = ("enable", "ctrl") + QOS_PARAMS

    def __init__(self):
        super(CostQos, self).__init__("io.cost.qos")

    def _read_field(self, key, raw):
        if key in ("rpct", "wpct", "min", "max"):
            try:
                return _fmt_hundredths(_hundredths(raw))
            except _Invalid as e:
                raise CodecError(self._err("%s=%s: %s" % (key, raw, e)))
        return _coerce(raw)

    @staticmethod
    def _enable(value):
        if isinstance(value, bool):
            return int(value)
        return 1 if _int(value, 0, U64_MAX) else 0

    @staticmethod
    def _pct(value):
        number = _hundredths(value)
        if number > 10000:
            raise _Invalid("out of range 0..100; a percentile is at most 100 (e.g. rpct=95)")
        return number

    @staticmethod
    def _lat(value):
        # Parsed as u64 but stored in a u32: larger values would wrap silently.
        return _int(value, 0, U32_MAX, unit="microseconds (5 ms = 5000)")

    @staticmethod
    def _vrate(value):
        # Negative is EINVAL; anything else is clamped to [1.00, 10000.00].
        return min(max(_hundredths(value), VRATE_MIN), VRATE_MAX)

    def validate_device(self, dev, settings):
        checkers = {"enable": self._enable, "ctrl": _choice(_CTRL), "rpct": self._pct, "wpct": self._pct,
                    "rlat": self._lat, "wlat": self._lat, "min": self._vrate, "max": self._vrate}
        values, errors = self._field_errors(dev, settings, checkers)
        if not isinstance(settings, dict):
            return errors
        self._ctrl_errors(dev, settings, values, QOS_PARAMS, errors, "parameters",
                          "ctrl=user needs the full parameter set")
        if not settings:
            errors.append(self._err("%s: nothing to set; give enable and/or ctrl=auto or the parameters %s"
                                    % (dev, ", ".join(QOS_PARAMS))))
        if "min" in values and "max" in values and values["min"] > values["max"]:
            errors.append(self._err("%s: min=%s is above max=%s (after clamping to 1.00..10000.00); the kernel "
                                    "refuses this (EINVAL): lower min or raise max"
                                    % (dev, _fmt_hundredths(values["min"]), _fmt_hundredths(values["max"]))))
        return errors

    def _normalize_device(self, settings):
        out = {}
        if "enable" in settings:
            out["enable"] = self._enable(settings["enable"])
        if settings.get("ctrl") == "auto":
            out["ctrl"] = "auto"
        elif "rpct" in settings:
            out["ctrl"] = "user"
            out.update(rpct=_fmt_hundredths(self._pct(settings["rpct"])), rlat=self._lat(settings["rlat"]),
                       wpct=_fmt_hundredths(self._pct(settings["wpct"])), wlat=self._lat(settings["wlat"]),
                       min=_fmt_hundredths(self._vrate(settings["min"])),
                       max=_fmt_hundredths(self._vrate(settings["max"])))
        return out

    def _format_device(self, dev, settings):
        norm = self._normalize_device(settings)
        pairs = [(k, norm[k]) for k in ("enable", "ctrl") if k in norm]
        if norm.get("ctrl") == "user":
            # Write what was asked (the kernel clamps min/max itself), in the kernel's format.
            pairs += [(k, _fmt_hundredths(_hundredths(settings[k])) if k in ("min", "max") else norm[k])
                      for k in QOS_PARAMS]
        return self._line(dev, pairs)

    def as_desired(self, parsed):
        out = {}
        for dev, state in parsed.items():
            want = {"enable": state["enable"], "ctrl": state["ctrl"]}
            if state["ctrl"] == "user":
                want.update((k, state[k]) for k in QOS_PARAMS)
            out[dev] = want
        return out


# ---------------------------------------------------------------------------------------------
# blk-throttle io.max, blk-iolatency io.latency
# ---------------------------------------------------------------------------------------------

IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")


class IoMax(KeyedDeviceCodec):
    """io.max: rbps/wbps bytes/s, riops/wiops IO/s, 'max' = no limit. Any subset may be given."""

    keys = IO_MAX_KEYS
    absent = dict((k, MAX) for k in IO_MAX_KEYS)   # no line = all four unlimited
    hints = {
        "rrandiops": "io.max limits read IOPS with 'riops' (rrandiops is an io.cost.model key)",
        "rseqiops": "io.max limits read IOPS with 'riops' (rseqiops is an io.cost.model key)",
        "wrandiops": "io.max limits write IOPS with 'wiops' (wrandiops is an io.cost.model key)",
        "wseqiops": "io.max limits write IOPS with 'wiops' (wseqiops is an io.cost.model key)",
    }

    def __init__(self, name="io.max"):
        super(IoMax, self).__init__(name)

    @staticmethod
    def _limit(value):
        if isinstance(value, (str, bytes)) and re.match(r"^[0-9]+[A-Za-z]", _text(value)):
            # sscanf("%llu") stops at the suffix: '10M' would silently become 10 bytes/s.
            raise _Invalid("unit suffixes are not accepted (the kernel reads only the leading digits); "
                           "give the plain number of bytes/s or IO/s, e.g. 10485760 for 10 MiB/s")
        number = _int(value, 0, U64_MAX, allow_max=True)
        if number == 0:
            raise _Invalid("0 is out of range (the kernel answers ERANGE); use max to clear the limit")
        if number == 1:
            # Kernels before the late-2024 revert of "blk-throttle: Fix IO hang for a corner case"
            # (6.1 and 6.12 here) refuse 1 with EINVAL.
            raise _Invalid("1 is refused by kernels up to 6.12 (EINVAL) and is no useful limit; use 2 or more")
        return number

    def validate_device(self, dev, settings):
        values, errors = self._field_errors(dev, settings, dict((k, self._limit) for k in IO_MAX_KEYS))
        if not errors and not values:
            errors.append(self._err("%s: nothing to set; give any of %s (max clears a limit)"
                                    % (dev, ", ".join(IO_MAX_KEYS))))
        return errors

    def _normalize_device(self, settings):
        out = {}
        for key in IO_MAX_KEYS:
            if key in settings:
                value = self._limit(settings[key])
                cap = U32_MAX if key.endswith("iops") else U64_MAX
                # iops are capped to UINT_MAX, and the cap itself prints as max.
                out[key] = MAX if value == MAX or value >= cap else value
        return out

    def _format_device(self, dev, settings):
        return self._line(dev, [(k, self._limit(settings[k])) for k in IO_MAX_KEYS if k in settings])


IO_LOW_KEYS = IO_MAX_KEYS + ("idle", "latency")


class IoLow(IoMax):
    """io.low (CONFIG_BLK_DEV_THROTTLING_LOW, kernels before 6.10): a best-effort floor per device.

    Observed on 6.1 (lab kernel 6.1.192-vmlab-low): a new group has no line; the first write
    prints all six keys, unset rates as 0, ``idle=0``, ``latency=max``. Writing 0 is ERANGE and 1
    is EINVAL for the rates, so a value cannot be set back to "none" once set: only removing the
    group clears a line. The floor acts only with a rate, ``idle`` (µs) and ``latency`` (µs) all
    set (the kernel silently ignores an incomplete set), so this codec requires all three.
    """

    keys = IO_LOW_KEYS
    absent = dict([(k, 0) for k in IO_MAX_KEYS] + [("idle", 0), ("latency", MAX)])
    hints = {"target": "io.low uses 'latency' (microseconds)", "idle_time": "the key is 'idle' (microseconds)"}

    def __init__(self):
        super(IoLow, self).__init__("io.low")

    @classmethod
    def _rate(cls, value):
        try:
            return cls._limit(value)
        except _Invalid as e:
            if "ERANGE" in str(e):
                raise _Invalid("0 is out of range (the kernel answers ERANGE): io.low has no way back to 0 once a "
                               "rate is set; leave the key out (0 = no floor), and remove the group to clear a line")
            raise

    @staticmethod
    def _time(value):
        number = _int(value, 0, U64_MAX, allow_max=True, unit="microseconds")
        if number == 0:
            raise _Invalid("0 is out of range (the kernel answers ERANGE); give microseconds or max")
        return number

    def validate_device(self, dev, settings):
        checkers = dict((k, self._rate) for k in IO_MAX_KEYS)
        checkers.update(idle=self._time, latency=self._time)
        values, errors = self._field_errors(dev, settings, checkers)
        if errors:
            return errors
        rates = [k for k in IO_MAX_KEYS if k in values]
        if not rates or "idle" not in values or values.get("latency", MAX) == MAX:
            errors.append(self._err(
                "%s: io.low acts only with a rate (%s), idle and latency (µs) all set; the kernel ignores an "
                "incomplete set" % (dev, ", ".join(IO_MAX_KEYS))))
        return errors

    def _normalize_device(self, settings):
        out = {}
        for key in IO_LOW_KEYS:
            if key in settings:
                value = self._rate(settings[key]) if key in IO_MAX_KEYS else self._time(settings[key])
                cap = U32_MAX if key.endswith("iops") else U64_MAX
                out[key] = MAX if value == MAX or (key in IO_MAX_KEYS and value >= cap) else value
        return out

    def as_desired(self, parsed):
        # 0 is what an unset rate (or idle) reads as; it cannot be written, and leaving it out keeps it.
        return dict((dev, dict((k, v) for k, v in state.items() if v != 0)) for dev, state in parsed.items())

    def _format_device(self, dev, settings):
        # 0 means "not set" and cannot be written (ERANGE): leave such keys out.
        return self._line(dev, [(k, settings[k] if settings[k] == MAX else int(settings[k]))
                                for k in IO_LOW_KEYS if k in settings and settings[k] not in (0, "0")])


class IoLatency(KeyedDeviceCodec):
    """io.latency: ``{"target": µs | "max"}``; 0 and max both clear (the line disappears)."""

    keys = ("target",)
    absent = {"target": MAX}
    hints = {"latency": "the key is 'target' (microseconds)", "target_us": "the key is 'target' (microseconds)"}
    _units = {"us": 1, "usec": 1, "ms": 1000, "msec": 1000, "s": 1000000, "sec": 1000000}

    def __init__(self):
        super(IoLatency, self).__init__("io.latency")

    def _read_field(self, key, raw):
        return MAX if raw in (MAX, "0") else _coerce(raw)

    def _target(self, value):
        if isinstance(value, (str, bytes)):
            m = re.match(r"^([0-9]+)\s*([A-Za-z]+)$", _text(value))
            if m:
                # sscanf("%llu") stops at the unit: '10ms' is silently read as 10 µs.
                number, unit = m.groups()
                fix = " target=%d" % (int(number) * self._units[unit]) if unit in self._units else ""
                raise _Invalid("unit suffixes are not allowed (the kernel silently reads %r as %s µs); "
                               "give microseconds:%s" % (_text(value), number, fix or " e.g. target=10000"))
        # target is stored in ns (µs * 1000) in a u64.
        return _int(value, 0, U64_MAX // 1000, allow_max=True, unit="microseconds")

    def validate_device(self, dev, settings):
        values, errors = self._field_errors(dev, settings, {"target": self._target})
        if not errors and "target" not in values:
            errors.append(self._err("%s: target is required (microseconds, or max to clear)" % dev))
        return errors

    def _normalize_device(self, settings):
        target = self._target(settings["target"])
        return {"target": MAX if target in (0, MAX) else target}

    def _format_device(self, dev, settings):
        return self._line(dev, [("target", self._normalize_device(settings)["target"])])


# ---------------------------------------------------------------------------------------------
# io.weight / io.bfq.weight
# ---------------------------------------------------------------------------------------------

class IoWeight(DeviceCodec):
    """io.weight (iocost, 1..10000) and io.bfq.weight (BFQ, 1..1000).

    Value: ``{"default": N, "MAJ:MIN": N | "default"}``; "default" on a device drops its override.
    """

    absent = "default"

    def __init__(self, name, maximum, range_errno, default_resets_overrides=False):
        super(IoWeight, self).__init__(name)
        self.maximum = maximum
        self.range_errno = range_errno
        # BFQ: writing the cgroup default also drops every per-device override (observed on 6.1),
        # so format() always writes the default line first.
        self.default_resets_overrides = default_resets_overrides

    def _key(self, dev):
        return "default" if dev == "default" else format_majmin(dev)

    def parse(self, text):
        out = {}
        for line in _text(text).splitlines():
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2:
                raise CodecError(self._err("line %r is not 'default N' or 'MAJ:MIN N'" % line))
            try:
                out[self._key(fields[0])] = _int(fields[1], 0)
            except (CodecError, _Invalid):
                raise CodecError(self._err("line %r is not 'default N' or 'MAJ:MIN N'" % line))
        return out

    def parse_write(self, text):
        out = {}
        for line in _text(text).splitlines():
            fields = line.split()
            if not fields:
                continue
            if len(fields) == 1:
                fields = ["default"] + fields   # a bare 'N' sets the cgroup default
            key = fields[0] if fields[0] == "default" else format_majmin(fields[0])
            out[key] = " ".join(fields[1:])
        return out

    def _weight(self, value):
        number = _int(value)
        if not 1 <= number <= self.maximum:
            raise _Invalid("out of range; %s takes 1..%d (the kernel answers %s)"
                           % (self.name, self.maximum, self.range_errno))
        return number

    def validate_device(self, dev, settings):
        if dev != "default" and isinstance(settings, str) and settings.strip() == "default":
            return []
        try:
            self._weight(settings)
        except _Invalid as e:
            return [self._err("%s %s: %s%s" % (dev, settings, e, "" if dev == "default" else
                                               " (or 'default' to drop the override)"))]
        return []

    def _normalize_device(self, settings):
        if isinstance(settings, str) and settings.strip() == "default":
            return "default"
        return self._weight(settings)

    def _format(self, desired):
        items = sorted(desired.items(), key=lambda kv: kv[0] != "default")
        return ["%s %s" % (self._key(d), self._normalize_device(s)) for d, s in items]

    def _format_device(self, dev, settings):
        return "%s %s" % (dev, self._normalize_device(settings))

    def lookup(self, parsed, dev):
        key = self._key(dev)
        return parsed.get(key, 100 if key == "default" else "default")


# ---------------------------------------------------------------------------------------------
# Read-only statistics: io.stat, PSI
# ---------------------------------------------------------------------------------------------

class IoStat(KeyedDeviceCodec):
    """io.stat -> {"MAJ:MIN": {key: int | float | str}}; unknown keys kept, empty lines -> {}."""

    writable = False
    read_only_hint = "io.stat only reports counters"

    def __init__(self):
        super(IoStat, self).__init__("io.stat")


class Psi(Codec):
    """PSI (/proc/pressure/*, <cgroup>/{io,memory,cpu}.pressure) -> {"some": {...}, "full": {...}}.

    avg10/avg60/avg300 are floats (percent), total is an int (µs).
    """

    writable = False
    read_only_hint = "pressure files only report stall times"

    def __init__(self, name="pressure"):
        super(Psi, self).__init__(name)

    def parse(self, text):
        out = {}
        for line in _text(text).splitlines():
            fields = line.split()
            if not fields:
                continue
            pairs = [f.partition("=") for f in fields[1:]]
            if fields[0] not in ("some", "full") or not pairs or any(not p[1] for p in pairs):
                raise CodecError(self._err("line %r is not 'some|full avg10=.. avg60=.. avg300=.. total=..'" % line))
            out[fields[0]] = dict((k, _coerce(v)) for k, _sep, v in pairs)
        if not out:
            raise CodecError(self._err("empty pressure file"))
        return out


# ---------------------------------------------------------------------------------------------
# Single values
# ---------------------------------------------------------------------------------------------

class MemorySize(Codec):
    """memory.min/low/high/max, memory.swap.*, memory.zswap.max: bytes or "max".

    Input: bytes, '512M'/'1G' (base 1024, also 'MiB' forms), 'max'/'infinity'. The kernel keeps
    whole pages (rounds down) and prints values at or above PAGE_COUNTER_MAX as max.
    """

    def __init__(self, name, page_size=PAGE_SIZE):
        super(MemorySize, self).__init__(name)
        self.page_size = page_size

    def parse(self, text):
        value = _text(text)
        if value == MAX:
            return MAX
        if not _INT_RE.match(value):
            raise CodecError(self._err("read-back %r is neither bytes nor max" % value))
        return int(value)

    def _validate(self, desired):
        return self._conversion_errors(_size, desired)

    def normalize(self, desired, page_size=None):
        """Read-back bytes: floored to ``page_size`` (default the codec's), or "max"."""
        self.check(desired)
        size = _size(desired)
        if size == MAX:
            return MAX
        page = page_size or self.page_size
        pages = min(size // page, S64_MAX // page)
        return MAX if pages == S64_MAX // page else pages * page

    def _format(self, desired):
        # Plain bytes, not floored: the kernel floors with its real PAGE_SIZE.
        return [str(_size(desired))]


class IntValue(Codec):
    """An integer file (cgroup/sysfs/procfs), optionally with "max" and kernel adjustments.

    ``floor``: values below it read back as ``floor`` (nr_requests: 4).
    ``any_value``: writing it restores a kernel default that cannot be predicted; normalises to
    None ("any"), and None formats back to it (wbt_lat_usec: -1).
    """

    def __init__(self, name, minimum=None, maximum=None, allow_max=False, boolean=False,
                 floor=None, any_value=None, writable=True, read_only_hint=""):
        super(IntValue, self).__init__(name)
        self.minimum, self.maximum = minimum, maximum
        self.allow_max, self.boolean = allow_max, boolean
        self.floor, self.any_value = floor, any_value
        self.writable, self.read_only_hint = writable, read_only_hint

    def parse(self, text):
        try:
            return _int(text, allow_max=self.allow_max, signed=True)
        except _Invalid:
            raise CodecError(self._err("read-back %r is not an integer" % _text(text)))

    def _value(self, desired):
        if desired is None and self.any_value is not None:
            return self.any_value
        if self.boolean and isinstance(desired, bool):
            return int(desired)
        return _int(desired, self.minimum, self.maximum, allow_max=self.allow_max,
                    signed=self.minimum is None or self.minimum < 0)

    def _validate(self, desired):
        return self._conversion_errors(self._value, desired)

    def _normalize(self, desired):
        value = self._value(desired)
        if value == MAX:
            return MAX
        if self.any_value is not None and value == self.any_value:
            return None
        if self.floor is not None and value < self.floor:
            return self.floor
        return value

    def _format(self, desired):
        return [str(self._value(desired))]


class CpuMax(Codec):
    """cpu.max: ``{"quota": µs | "max", "period": µs}`` ('max 100000', '50000 100000').

    Without ``period`` only the quota is written and the period is not managed.
    """

    def __init__(self):
        super(CpuMax, self).__init__("cpu.max")

    def parse(self, text):
        fields = _text(text).split()
        try:
            if len(fields) != 2:
                raise _Invalid("")
            return {"quota": _int(fields[0], allow_max=True), "period": _int(fields[1])}
        except _Invalid:
            raise CodecError(self._err("read-back %r is not 'QUOTA PERIOD'" % _text(text)))

    def parse_write(self, text):
        fields = _text(text).split()
        out = {"quota": fields[0] if fields else ""}
        if len(fields) > 1:
            out["period"] = fields[1]
        return out

    def _values(self, desired):
        if isinstance(desired, (str, bytes)):
            desired = self.parse_write(desired)
        if not isinstance(desired, dict) or "quota" not in desired or set(desired) - set(("quota", "period")):
            raise _Invalid("expected {'quota': µs or 'max', 'period': µs} or 'QUOTA [PERIOD]', got %r" % (desired,))
        try:
            # 1 ms <= quota (<= 2^44-1 µs, max_cfs_runtime), 1 ms <= period <= 1 s (sched/core.c).
            quota = _int(desired["quota"], 1000, 2 ** 44 - 1, allow_max=True, unit="microseconds")
        except _Invalid as e:
            raise _Invalid("quota %s (at least 1000 µs, or max)" % e)
        out = {"quota": quota}
        if "period" in desired:
            try:
                out["period"] = _int(desired["period"], 1000, 1000000, unit="microseconds")
            except _Invalid as e:
                raise _Invalid("period %s (1000..1000000 µs)" % e)
        return out

    def _validate(self, desired):
        return self._conversion_errors(self._values, desired)

    def _normalize(self, desired):
        return self._values(desired)

    def _format(self, desired):
        values = self._values(desired)
        return [" ".join(str(values[k]) for k in ("quota", "period") if k in values)]

    def as_desired(self, parsed):
        return dict(parsed)


class Scheduler(Codec):
    """queue/scheduler: '[none] mq-deadline kyber bfq ' -> {"current": "none", "available": [...]}.

    Desired is a scheduler name; 'deadline' is the kernel's alias of mq-deadline. Writing a
    mainline scheduler that is not listed yet loads its module (observed: kyber, bfq), so only
    other names must be listed in ``available``.
    """

    aliases = {"deadline": "mq-deadline"}
    known = ("none", "mq-deadline", "kyber", "bfq")

    def __init__(self):
        super(Scheduler, self).__init__("scheduler")

    def parse(self, text):
        names = _text(text).split()
        marked = [n[1:-1] for n in names if n.startswith("[") and n.endswith("]")]
        available = [n.strip("[]") for n in names]
        if not names or len(marked) > 1 or not all(_NAME_RE.match(n) for n in available):
            raise CodecError(self._err("read-back %r is not a scheduler list" % _text(text)))
        # A queue without an elevator (not blk-mq) prints plain 'none'.
        current = marked[0] if marked else (available[0] if len(available) == 1 else None)
        return {"current": current, "available": available}

    def validate(self, desired, available=None):
        """``available``: the disk's parse()['available'] list, for schedulers outside mainline."""
        if not isinstance(desired, str) or not _NAME_RE.match(desired.strip()):
            return [self._err("%r is not a scheduler name such as %s" % (desired, ", ".join(self.known)))]
        name = self.aliases.get(desired.strip(), desired.strip())
        if name not in self.known and name not in (available or ()):
            return [self._err("%r is neither a mainline scheduler (%s) nor listed for this disk%s; load its "
                              "module first (modprobe) or pick another" % (
                                  desired, ", ".join(self.known),
                                  " (listed: %s)" % ", ".join(available) if available else ""))]
        return []

    def _normalize(self, desired):
        name = desired.strip()
        return self.aliases.get(name, name)

    def _format(self, desired):
        return [self._normalize(desired)]

    def diff(self, want, have):
        current = have.get("current") if isinstance(have, dict) else have
        return [] if want is None or want == current else [(self.name, want, current)]

    def as_desired(self, parsed):
        return parsed["current"]


_CPU_RANGE_RE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
# Beyond any kernel's CONFIG_NR_CPUS (8192) and MAX_NUMNODES (1024): a bound that keeps '0-4294967295' from
# expanding into a list of billions before the host's own CPUs are asked.
CPU_ID_MAX = 65535


def _cpu_ranges(text):
    """'0-3,8' -> [0, 1, 2, 3, 8]; raises _Invalid naming the bad part. Regions are separated by commas and
    whitespace, any run of them, as the kernel's bitmap_parselist() skips them (mq cpu_list prints '0, 1, 2');
    its stride ('0-7:2/4') and 'N' forms are not taken: no kernel prints them back."""
    out = set()
    for part in re.split(r"[\s,]+", text.strip()):
        if not part:
            continue
        m = _CPU_RANGE_RE.match(part)
        if not m:
            raise _Invalid("%r is not a number or a range N-M" % part)
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            raise _Invalid("range %r runs backwards; write it %d-%d" % (part, last, first))
        if last > CPU_ID_MAX:
            raise _Invalid("%d is beyond any CPU or node number (at most %d)" % (last, CPU_ID_MAX))
        out.update(range(first, last + 1))
    return sorted(out)


def format_ranges(numbers):
    """[0, 1, 2, 3, 8] -> '0-3,8': the kernel's '%*pbl' list form (cpuset files, sysfs cpulist); [] -> ''."""
    out, run = [], []
    for number in sorted(set(numbers)):
        if run and number == run[-1] + 1:
            run.append(number)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [number]
    if run:
        out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return ",".join(out)


class CpuList(Codec):
    """mq/<N>/cpu_list (read-only, '0, 1, 2'); parse also takes cpulist ranges '0-3,8'."""

    writable = False
    read_only_hint = ("the CPU-to-queue map comes from the driver (MSI-X affinity); change queue "
                      "counts with the nvme module parameters instead")

    def __init__(self, name="cpu_list"):
        super(CpuList, self).__init__(name)

    def parse(self, text):
        try:
            return _cpu_ranges(_text(text))
        except _Invalid:
            raise CodecError(self._err("%r is not a CPU list such as '0, 1, 2' or '0-3,8'" % _text(text)))

    def normalize(self, desired):
        return sorted(set(int(c) for c in desired))

    def format(self, desired):
        """Render as the kernel prints mq cpu_list ('0, 1, 2'); the file itself is read-only."""
        return [", ".join(str(c) for c in self.normalize(desired))]

    format_ranges = staticmethod(format_ranges)


class CpuSet(Codec):
    """cpuset.cpus / cpuset.mems (and their ``.effective``, sysfs ``online``/``has_memory``/``cpulist``): a list of
    CPU or node numbers in the kernel's list form, '0-3,8,10-11'; '' is the empty set (a cpuset.cpus that is empty
    uses its parent's CPUs).

    Desired: that text (spaces ignored), a list of numbers, or one number. The value is the sorted list of numbers;
    the kernel prints it back in canonical form (ranges for runs, ascending, no spaces), which :meth:`format` writes.
    Whether the numbers exist on the host is the caller's question (``_topology``): the codec knows the form only.
    """

    def __init__(self, name, what="CPU"):
        super(CpuSet, self).__init__(name)
        self.what = what

    def parse(self, text):
        try:
            return _cpu_ranges(_text(text))
        except _Invalid as e:
            raise CodecError(self._err("read-back %r is not a %s list: %s" % (_text(text), self.what, e)))

    def _numbers(self, desired):
        if isinstance(desired, bool) or desired is None or isinstance(desired, dict):
            raise _Invalid("expected a %s list such as '0-3,8' or a list of numbers, got %r" % (self.what, desired))
        if isinstance(desired, int):
            desired = [desired]
        if isinstance(desired, (list, tuple)):
            out = set()
            for item in desired:
                if isinstance(item, bool) or not isinstance(item, (int, str)):
                    raise _Invalid("%r in %r is not a %s number" % (item, list(desired), self.what))
                if isinstance(item, str):
                    out.update(_cpu_ranges(item) if item.strip() else [None])
                elif 0 <= item <= CPU_ID_MAX:
                    out.add(item)
                else:
                    raise _Invalid("%d is not a %s number (0..%d)" % (item, self.what, CPU_ID_MAX))
            if None in out:
                raise _Invalid("an empty item in %r" % (list(desired),))
            return sorted(out)
        if isinstance(desired, str):
            try:
                return _cpu_ranges(desired)
            except _Invalid as e:
                raise _Invalid("%r is not a %s list such as '0-3,8,10-11': %s" % (desired, self.what, e))
        raise _Invalid("expected a %s list such as '0-3,8' or a list of numbers, got %r" % (self.what, desired))

    def _validate(self, desired):
        return self._conversion_errors(self._numbers, desired)

    def _normalize(self, desired):
        return self._numbers(desired)

    def _format(self, desired):
        return [format_ranges(self._numbers(desired))]

    def as_desired(self, parsed):
        return list(parsed)


IO_PRIO_CLASSES = ("no-change", "promote-to-rt", "restrict-to-be", "idle", "none-to-rt")


class IoPrioClass(Codec):
    """io.prio.class (blk-ioprio, 5.14+): one policy name; numbers and I/O class names are refused.

    'promote-to-rt' exists from 6.5; older kernels only know 'none-to-rt' (a deprecated alias
    afterwards). :meth:`for_release` maps a request to what a given kernel accepts.
    """

    promote_since = (6, 5)

    def __init__(self):
        super(IoPrioClass, self).__init__("io.prio.class")

    def parse(self, text):
        name = _text(text)
        if name not in IO_PRIO_CLASSES:
            raise CodecError(self._err("read-back %r is not a known policy" % name))
        return name

    def for_release(self, desired, release):
        """The spelling ``release`` (uname -r) accepts: promote-to-rt <-> none-to-rt; others unchanged."""
        name = desired.strip() if isinstance(desired, str) else desired
        if name in ("promote-to-rt", "none-to-rt"):
            return "promote-to-rt" if kernel_version(release) >= self.promote_since else "none-to-rt"
        return name

    def validate(self, desired, release=None):
        """Checks the literal name; with ``release`` also that this kernel knows it."""
        name = desired.strip() if isinstance(desired, str) else desired
        if name not in IO_PRIO_CLASSES:
            return [self._err("%r is not a policy; use one of %s (a policy, not an I/O class: promote-to-rt "
                              "~ realtime, restrict-to-be ~ best-effort, idle)" % (desired, ", ".join(IO_PRIO_CLASSES)))]
        if release is not None:
            version = kernel_version(release)
            if version < (5, 14):
                return [self._err("needs kernel 5.14+ (blk-ioprio); %s is older" % release)]
            if name == "promote-to-rt" and version < self.promote_since:
                return [self._err("'promote-to-rt' needs kernel 6.5+; %s spells it 'none-to-rt' "
                                  "(for_release() maps it)" % release)]
        return []

    def _normalize(self, desired):
        return desired.strip()   # the kernel prints back the stored name as written

    def _format(self, desired):
        return [desired.strip()]


class MultiToken(Codec):
    """Sysctl-style values compared token-wise ('4096 87380 6291456'), e.g. net.ipv4.tcp_rmem."""

    def __init__(self, name, choices=None):
        super(MultiToken, self).__init__(name)
        self.choices = choices

    def parse(self, text):
        return tokens(text if not isinstance(text, bytes) else text.decode("utf-8", "replace"))

    def _validate(self, desired):
        if desired is None or isinstance(desired, (bool, dict)) or not tokens(desired):
            return [self._err("%r is not a value; give a string or a list of tokens" % (desired,))]
        if "\n" in str(desired):
            return [self._err("%r spans several lines; give one line" % (desired,))]
        if self.choices and tokens(desired) not in self.choices:
            return [self._err("%r is not one of %s" % (desired, ", ".join(self.choices)))]
        return []

    def _normalize(self, desired):
        return tokens(desired)

    def _format(self, desired):
        return [tokens(desired)]


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

IO_COST_MODEL = CostModel()
IO_COST_QOS = CostQos()
IO_MAX = IoMax()
IO_LATENCY = IoLatency()
IO_LOW = IoLow()
IO_WEIGHT = IoWeight("io.weight", 10000, "EINVAL")
IO_BFQ_WEIGHT = IoWeight("io.bfq.weight", 1000, "ERANGE", default_resets_overrides=True)
IO_STAT = IoStat()
PRESSURE = Psi()
IO_PRIO_CLASS = IoPrioClass()
CPU_MAX = CpuMax()
SCHEDULER = Scheduler()
CPU_LIST = CpuList()
CPUSET_CPUS = CpuSet("cpuset.cpus")
CPUSET_MEMS = CpuSet("cpuset.mems", "node")

MEMORY_SIZE_FILES = ("memory.min", "memory.low", "memory.high", "memory.max", "memory.swap.max",
                     "memory.swap.high", "memory.zswap.max")
MEMORY = dict((n, MemorySize(n)) for n in MEMORY_SIZE_FILES)

# Every cgroup file a module reads. The cgroup module's options name theirs in
# _cgroup_knobs.KNOBS (the knob is the option, the codec is the file).
CGROUP_FILES = dict([(c.name, c) for c in (IO_COST_MODEL, IO_COST_QOS, IO_MAX, IO_LATENCY, IO_LOW, IO_WEIGHT,
                                           IO_BFQ_WEIGHT, IO_STAT, IO_PRIO_CLASS, CPU_MAX, CPUSET_CPUS, CPUSET_MEMS)]
                    + list(MEMORY.items()))
CGROUP_FILES.update((c.name, c) for c in (CpuSet("cpuset.cpus.effective"), CpuSet("cpuset.mems.effective", "node")))
CGROUP_FILES.update((c.name, c) for c in (
    IntValue("cpu.weight", 1, 10000),
    IntValue("cpu.weight.nice", -20, 19),
    IntValue("cpu.idle", 0, 1, boolean=True),
    IntValue("memory.oom.group", 0, 1, boolean=True),
    IntValue("memory.zswap.writeback", 0, 1, boolean=True),
    IntValue("pids.max", 0, S64_MAX, allow_max=True),
))

# Every queue/<name> file a module reads (io_facts through codec_for). The settable ones are
# blk_queue's options: _blk_queue.CATALOGUE adds their write order and kernel rules, and takes
# their ranges, floors and defaults from these codecs.
QUEUE_ATTRIBUTES = dict((c.name, c) for c in (
    SCHEDULER,
    IntValue("nr_requests", 0, U32_MAX, floor=4),            # BLKDEV_MIN_RQ; upper bound is per device
    IntValue("wbt_lat_usec", -1, S64_MAX, any_value=-1),     # -1 = restore the default (any)
    IntValue("read_ahead_kb", 0, U32_MAX),
    IntValue("max_sectors_kb", 1, U32_MAX),
    IntValue("nomerges", 0, 2),
    IntValue("rq_affinity", 0, 2),
    IntValue("iostats", 0, 1, boolean=True),
    IntValue("add_random", 0, 1, boolean=True),
    IntValue("rotational", 0, 1, boolean=True),
    IntValue("io_timeout", 1, U32_MAX),
    IntValue("io_poll", 0, 1, writable=False,
             read_only_hint="writes are ignored or refused since 5.16; poll queues come from the nvme "
                            "module parameter poll_queues (applied at controller reset)"),
    MultiToken("write_cache", choices=("write back", "write through")),
))


def codec_for(path):
    """The codec for a kernel file path, or None: cgroupfs files, queue/*, mq/*/cpu_list, PSI, /proc/sys."""
    path = str(path).rstrip("/")
    base = path.rsplit("/", 1)[-1]
    parent = path.rsplit("/", 2)[-2] if path.count("/") >= 2 else ""
    if path.startswith("/proc/pressure/") or (base.endswith(".pressure") and base != "cgroup.pressure"):
        return Psi(base)
    if base == "cpu_list":
        return CPU_LIST
    if parent == "queue" and base in QUEUE_ATTRIBUTES:
        return QUEUE_ATTRIBUTES[base]
    if path.startswith("/proc/sys/"):
        return MultiToken(path[len("/proc/sys/"):].replace("/", "."))
    return CGROUP_FILES.get(base)
