# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Persistence layer: configuration files this collection owns under /etc.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Each ecosystem's own mechanism carries a setting across reboots (sysctl.d, systemd drop-ins,
udev rules, modprobe.d, tmpfiles.d). Whatever the mechanism, the file is:

* stamped as managed on its first lines, so operators see who owns it and the collection never
  overwrites a file it did not write (unless told to adopt it);
* written atomically (temp file, fsync, rename) through the kernel file accessor;
* a :class:`ManagedFile` setting, so it goes through the same reconcile engine as kernel
  files: planned, shown as a diff, verified, and restored if a later step of the call fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re

# The boot helpers: imported so that AnsiballZ packs them with every module that can install one.
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import iocost_apply as _boot_iocost_apply
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._boot import nvme_arbitration_apply as _boot_nvme_arbitration_apply
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Setting

STAMP = "Managed by Ansible (aiinfra.io_isolation)"
# The first line systemd writes into a transient unit's file (systemd-run).
TRANSIENT_HEADER = "# This is a transient unit file, created programmatically via the systemd API."


def owner(module):
    """The owner a managed file's stamp names: the module that wrote it."""
    return "aiinfra.io_isolation.%s" % module


def stamped(body, owner, comment="#"):
    """``body`` with the managed-file stamp on top; ``owner`` names the module/role that wrote it."""
    header = "%s %s: %s. Local edits will be overwritten.\n" % (comment, STAMP, owner)
    return header + body if body.endswith("\n") or not body else header + body + "\n"


def is_managed(content):
    """True if ``content`` (a file's text, or None when absent) carries this collection's stamp.

    The stamp is on the first line, or on the second after a ``#!`` line (scripts). A systemd
    transient unit (written by systemd itself, its own header first) is ours when its
    ``Description=`` starts with the stamp, as the boost window's timer does.
    """
    if content is None:
        return False
    head = content.split("\n", 3)
    if head[0].startswith(TRANSIENT_HEADER):
        return any(line.startswith("Description=" + STAMP) for line in head[1:3])
    return STAMP in head[0] or (head[0].startswith("#!") and len(head) > 1 and STAMP in head[1])


def read_exact(fs, path):
    """A file's bytes as text that carries every byte (undecodable ones as surrogates), or None: what a setting holding
    someone else's file compares and writes back byte for byte."""
    data = fs.read_bytes(path)
    return None if data is None else data.decode("utf-8", "surrogateescape")


def write_exact(fs, path, value, mode):
    """Put back what :func:`read_exact` read (None: no file), atomically with ``mode``."""
    if value is None:
        fs.remove(path)
    else:
        fs.atomic_write(path, value.encode("utf-8", "surrogateescape"), mode)


class ManagedFile(Setting):
    """A whole configuration file with known content (``None`` = the file must not exist)."""

    order = 1000  # persistence after the live kernel writes it describes

    def __init__(self, path, content, mode=0o644, adopt=False, order=None):
        super(ManagedFile, self).__init__(path, content, order)
        self.path = path
        self.mode = mode
        self.adopt = adopt

    def read(self, fs):
        data = fs.read_bytes(self.path)
        return None if data is None else data.decode("utf-8", "replace")

    def validate(self, current):
        if current is not None and not is_managed(current) and not self.adopt:
            return ["%s exists and is not managed by aiinfra.io_isolation; move it away or set "
                    "adopt to let the collection take it over" % self.path]
        return []

    def write(self, fs, value, current):
        if value is None:
            fs.remove(self.path)
        else:
            fs.atomic_write(self.path, value, self.mode)


class PersistError(ValueError):
    pass


# == the paths this collection owns ================================================================
# Every file the collection writes outside the kernel's own files is declared here, once: the
# modules build their files from these declarations, and the purge module finds what a host holds
# by walking them (``owned_files``). A path in a module that is not declared here is a bug.

ETC_RULES_DIR = "/etc/udev/rules.d"
LIBEXEC_DIR = "/usr/local/libexec/aiinfra-io_isolation"
SYSCTL_CONF = "/etc/sysctl.d/90-aiinfra-io-isolation.conf"
TMPFILES_CONF = "/etc/tmpfiles.d/aiinfra-io-isolation-sched.conf"
# debugfs scheduler tunables need debugfs mounted: this drop-in orders systemd-tmpfiles-setup after it.
TMPFILES_DROPIN = "/etc/systemd/system/systemd-tmpfiles-setup.service.d/50-aiinfra-io-isolation-debugfs.conf"
MODPROBE_CONF = "/etc/modprobe.d/aiinfra-io-isolation-nvme.conf"
SYSTEMD_UNIT_DIR = "/etc/systemd/system"
SYSTEMD_DROPIN_NAME = "50-aiinfra-io-isolation.conf"
# The placement module's drop-in: a service's Slice=. Its own name (a unit may have the cgroup module's drop-in
# too), sorted after the vendor's numbered drop-ins so that its Slice= is the one systemd keeps.
PLACEMENT_DROPIN_NAME = "90-aiinfra-io-isolation-slice.conf"
# The boost window (cgroup_boost): a runtime-only drop-in, sorted after the persistent one so that
# its values win, and the transient timer (plus the service it starts) that ends the window.
# /run is a tmpfs: a reboot ends a window too.
SYSTEMD_RUNTIME_DIR = "/run/systemd/system"
SYSTEMD_TRANSIENT_DIR = "/run/systemd/transient"
BOOST_DROPIN_NAME = "60-aiinfra-io-isolation-boost.conf"
BOOST_UNIT_PREFIX = "aiinfra-io-isolation-boost-"

_UDEV_SAFE = re.compile(r"[A-Za-z0-9._:+@-]+\Z")   # \Z: "$" would let a trailing newline through


def udev_value(value, what, device):
    """``value`` as a udev rule may quote it in a match, or PersistError naming the device and the fix.

    Only characters that mean themselves to udev pass: no quote or backslash (the rule's syntax), no ``%`` or ``$``
    (udev substitutes them in match values), no ``*``, ``?``, ``[`` or ``|`` (glob patterns and alternatives), no
    whitespace (udev drops an attribute's trailing whitespace, and a leading one would never match), nothing
    outside ASCII. Taken as the device shows it, never trimmed: a trimmed value could match another device and
    never this one (tests/unit/plugins/module_utils/test_udev_identities.py)."""
    value = value or ""
    if not _UDEV_SAFE.match(value):
        raise PersistError("the %s of %s (%r) has characters a udev rule cannot match safely; use persist: false "
                           "and re-apply at boot another way" % (what, device, value))
    return value


def udev_match(record):
    """udev match keys that select a whole disk by its stable identity, never by name or MAJ:MIN.

    ``record`` is a resolved device (``_devices.BlockDevice``). WWN: the ``wwid`` attribute (on the
    NVMe namespace itself, on the parent for SCSI: ``ATTRS`` searches both). Serial: virtio's
    ``serial`` attribute on the disk. Otherwise the by-path identity (``ID_PATH``).
    """
    base = 'SUBSYSTEM=="block", ENV{DEVTYPE}=="disk"'
    if record.stable_id_source == "wwn" and record.wwid:
        return base + ', ATTRS{wwid}=="%s"' % udev_value(record.wwid, "WWN", record.name)
    if record.stable_id_source == "serial" and record.kind == "virtio":
        return base + ', ATTR{serial}=="%s"' % udev_value(record.serial, "serial", record.name)
    if record.stable_id_source == "by-path" and record.by_path:
        link = record.by_path[0]
        return base + ', ENV{ID_PATH}=="%s"' % udev_value(link, "by-path identity", record.name)
    raise PersistError("%s has no identity a udev rule can match (stable id: %s%s); use persist: false"
                       % (record.name, record.stable_id, "; " + record.stable_id_note if record.stable_id_note else ""))


def slug(stable_id):
    """A file-name-safe form of a stable identity."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stable_id).strip("_")[:120]


class UdevRule:
    """One family of per-device udev rule files: ``/etc/udev/rules.d/91-aiinfra-<kind>-<identity>.rules``.

    Numbered 91, after systemd's ``90-iocost.rules`` (systemd 254+): udev runs RUN programs and
    assignments in rule order, so for the devices this collection manages its values come last and
    win. A rule never names a kernel name or MAJ:MIN, not even in a comment: they change between
    boots, and the rule must read the same on a renumbered boot so that a re-run reports no change.
    """

    def __init__(self, kind, module):
        self.kind = kind
        self.module = module
        self.owner = owner(module)
        self.prefix = "91-aiinfra-%s-" % kind

    def path(self, identity):
        return "%s/%s%s.rules" % (ETC_RULES_DIR, self.prefix, slug(identity))

    def pattern(self):
        return "%s/%s*.rules" % (ETC_RULES_DIR, self.prefix)

    def owns(self, path):
        return fnmatch.fnmatchcase(path, self.pattern())

    def render(self, comment, lines):
        """The stamped file: a ``# comment`` header line, then one rule per line. The comment names the disk by what
        the disk says of itself (its model), so it keeps printable ASCII but the backslash, on one line: a line
        break would end the comment, and udev joins a line ending in a backslash to the next, swallowing the rule."""
        comment = "".join(c if " " <= c <= "~" and c != "\\" else "?" for c in comment.replace("\n", " "))
        return stamped("# %s\n" % comment + "".join(l + "\n" for l in lines), self.owner)

    def file(self, identity, content, adopt=False):
        """The rule as an engine setting; ``content`` None removes it."""
        return ManagedFile(self.path(identity), content, adopt=adopt)


class BootHelper:
    """A program a udev rule runs at boot, shipped as a real module_utils file of the collection.

    The file is linted and unit-tested like the rest of the code; what lands on the host is its own
    text behind a shebang and the managed stamp. AnsiballZ packs it with the module because the
    module that installs it imports it; its text is read back through the import system
    (its module's loader), which works from AnsiballZ's zip as from a checkout.
    """

    def __init__(self, name, source, module):
        self.name = name
        self.path = "%s/%s" % (LIBEXEC_DIR, name)
        self.source = source
        self._content = None
        self.module = module
        self.owner = owner(module)

    def content(self):
        # Read once per process (every disk of a call asks for the same file). The loader that imported
        # it reads it back: zipimport inside AnsiballZ, ansible's collection loader or the file system.
        if self._content is not None:
            return self._content
        loader = getattr(self.source, "__loader__", None)
        try:
            data = loader.get_data(self.source.__file__)
        except (AttributeError, OSError, NotImplementedError):
            with open(self.source.__file__, "rb") as f:
                data = f.read()
        self._content = "#!/usr/bin/python3\n" + stamped(data.decode("utf-8"), self.owner)
        return self._content

    def file(self, adopt=False):
        # written before the rules that run it (order 900 < ManagedFile's 1000)
        return ManagedFile(self.path, self.content(), mode=0o755, adopt=adopt, order=900)


IOCOST_RULES = UdevRule("iocost", "iocost")
BLK_QUEUE_RULES = UdevRule("blk-queue", "blk_queue")
NVME_ARBITRATION_RULES = UdevRule("nvme-arbitration", "nvme_arbitration")
UDEV_RULES = (IOCOST_RULES, BLK_QUEUE_RULES, NVME_ARBITRATION_RULES)
IOCOST_HELPER = BootHelper("iocost-apply", _boot_iocost_apply, "iocost")
NVME_ARBITRATION_HELPER = BootHelper("nvme-arbitration-apply", _boot_nvme_arbitration_apply, "nvme_arbitration")
BOOT_HELPERS = (IOCOST_HELPER, NVME_ARBITRATION_HELPER)

# The io_metrics role's exporter: its systemd units and its launcher, which carries the module_utils it imports (all
# stamped), and where 0.1.0 copied those module_utils as a package tree, removed when found
# (roles/io_metrics/vars/main.yml says the same; a unit test holds them equal).
METRICS_UNIT = "aiinfra-io-metrics"
METRICS_LAUNCHER = LIBEXEC_DIR + "/io-metrics"
METRICS_OLD_LIB_DIR = "/usr/local/lib/aiinfra-io_isolation/io_metrics"

# The container runtimes' own configuration files, which the container_runtime module edits (a JSON merge, one TOML
# key) and never owns: each one's original, byte for byte, is kept in a stamped copy below ORIGINALS_DIR until purge
# puts it back (:class:`Original`).
DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERS_CONF = "/etc/containers/containers.conf"
ORIGINALS_DIR = "/var/lib/aiinfra-io_isolation/originals"

# (owner module, glob of the files it writes) - what purge walks. The systemd entries are the
# cgroup module's drop-ins and the slices it creates (a slice file is only ours when stamped), the placement
# module's Slice= drop-ins, and
# cgroup_boost's runtime drop-ins and timers (systemd writes the timer's file; it is ours when its
# Description carries the stamp).
OWNED = tuple((r.module, r.pattern()) for r in UDEV_RULES) + (
    ("sysctl", SYSCTL_CONF),
    ("sysctl", TMPFILES_CONF),
    ("sysctl", TMPFILES_DROPIN),
    ("nvme_queues", MODPROBE_CONF),
    ("cgroup", "%s/*.d/%s" % (SYSTEMD_UNIT_DIR, SYSTEMD_DROPIN_NAME)),
    ("cgroup", "%s/*.slice" % SYSTEMD_UNIT_DIR),
    ("placement", "%s/*.service.d/%s" % (SYSTEMD_UNIT_DIR, PLACEMENT_DROPIN_NAME)),
    ("cgroup_boost", "%s/*.d/%s" % (SYSTEMD_RUNTIME_DIR, BOOST_DROPIN_NAME)),
    ("cgroup_boost", "%s/%s*.timer" % (SYSTEMD_TRANSIENT_DIR, BOOST_UNIT_PREFIX)),
    ("io_metrics", "%s/%s.*" % (SYSTEMD_UNIT_DIR, METRICS_UNIT)),
    ("io_metrics", METRICS_LAUNCHER),
    ("container_runtime", "%s/*.orig" % ORIGINALS_DIR),
) + tuple((h.module, h.path) for h in BOOT_HELPERS)


def owned_units(owned, *patterns):
    """The unit names (each pattern's group 1) that the registry's files ``owned`` (``[(owner, path)]``) are for,
    once each, in their order: the first pattern that matches a path names its unit."""
    out = []
    for _owner, path in owned:
        for pattern in patterns:
            m = pattern.match(path)
            if m:
                if m.group(1) not in out:
                    out.append(m.group(1))
                break
    return out


def owned_files(fs):
    """[(owner module, path)] of every file on the host that the registry declares and that carries
    the managed stamp (a file of the same name without it belongs to someone else)."""
    out = []
    for owner, pattern in OWNED:
        directory, _sep, name = pattern.rpartition("/")
        dirs = [directory]
        if "*" in directory:
            parent, _sep, sub = directory.rpartition("/")
            dirs = ["%s/%s" % (parent, d) for d in sorted(fs.listdir(parent) or []) if fnmatch.fnmatchcase(d, sub)]
        for d in dirs:
            for entry in sorted(fs.listdir(d) or []):
                path = "%s/%s" % (d, entry)
                if fnmatch.fnmatchcase(entry, name) and is_managed(ManagedFile(path, None).read(fs)):
                    out.append((owner, path))
    return out


class Original(ManagedFile):
    """The stamped copy of a file someone else owns (a container runtime's configuration) as it was before the
    collection first edited it: ``ORIGINALS_DIR/<path with / as _>.orig``. Its first line is the stamp, its second
    says whether the file existed and with which mode, the rest is the file's bytes exactly as they were, so that
    purge puts them back byte for byte. It is written once, before the first edit, and kept while the edit stands
    (a copy already there is never replaced: it holds the file as the user had it)."""

    def __init__(self, of, owner_module, order=5):
        self.of = of
        self.owner = owner(owner_module)
        super(Original, self).__init__(self.for_path(of), None, mode=0o600, order=order)

    @staticmethod
    def for_path(of):
        return "%s/%s.orig" % (ORIGINALS_DIR, of.strip("/").replace("/", "_"))

    def render(self, data, mode):
        """The copy's bytes for the original ``data`` (bytes, or None when the file did not exist)."""
        head = stamped("# original of %s: %s\n" % (
            self.of, "absent" if data is None else "present, mode %04o" % (mode & 0o7777)), self.owner)
        return head.encode("utf-8") + (data or b"")

    def keep(self, fs):
        """Desire the copy of ``of`` as it is now, unless a copy exists already (then keep that one)."""
        current = fs.read_bytes(self.path)
        if current is not None:
            self.desired = current.decode("utf-8", "surrogateescape")
            return
        data = fs.read_bytes(self.of)
        info = fs.stat(self.of) if data is not None else None
        self.desired = self.render(data, info.st_mode if info else 0o644).decode("utf-8", "surrogateescape")

    def read(self, fs):
        return read_exact(fs, self.path)

    def write(self, fs, value, current):
        write_exact(fs, self.path, value, self.mode)

    @staticmethod
    def parse(data):
        """(present, mode, original bytes) of a copy's bytes, or None when they are no such copy."""
        lines = data.split(b"\n", 2)
        if len(lines) < 3 or STAMP.encode("utf-8") not in lines[0]:
            return None
        m = re.match(br"^# original of \S+: (absent|present, mode ([0-7]{4}))$", lines[1])
        if not m:
            return None
        if m.group(1) == b"absent":
            return False, None, None
        return True, int(m.group(2), 8), lines[2]
