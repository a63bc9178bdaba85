# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""SimCgroup: a cgroup v2 hierarchy on a FakeHost whose files behave like the kernel's.

A write is parsed by a per-file handler that applies the kernel's rules and renders the file
again (truncated, as the kernel prints it); a plain file in a tmp tree would be overwritten in
place by ``KernelFS.write``. Rules modelled (Linux 6.1 / 6.12):

* ``mkdir`` creates the group with the interface files of the controllers its parent enables in
  ``cgroup.subtree_control``; ``rmdir`` is refused with EBUSY while the group has processes or
  child groups (and removes the interface files with the directory);
* ``cgroup.subtree_control``: ``+x -y`` tokens in one write; ``+x`` needs x in the group's own
  ``cgroup.controllers`` (ENOENT) and is refused with EBUSY in a non-root group with processes
  (no-internal-processes rule); enabling adds x's files to every child, disabling removes them
  (EBUSY while a child still enables x for its own children);
* io.weight (1..10000, per-device lines only on disks with a line in the root io.cost.qos, else
  EOPNOTSUPP; ``MAJ:MIN default`` drops an override), io.max (0 is ERANGE, a line whose four
  limits are max disappears, iops at or above 2^32-1 print as max), io.latency, io.prio.class,
  memory.* (floored to 4096-byte pages, ``max``), memory.oom.group, cpu.weight (ERANGE outside
  1..10000), cpu.max (``QUOTA [PERIOD]``, quota >= 1000 µs), cpuset.cpus/cpuset.mems (the kernel's list form,
  '' resets; a CPU or node beyond the possible ones is EINVAL; printed back canonical) with their ``.effective``
  computed at read: the group's own set within its parent's effective one, the parent's when empty or disjoint
  (cgroup-v2.rst; the parts about offline CPUs are not modelled).

Every write the module makes is logged in ``writes`` (as in SimKernel) and every mutation of the
host (writes, mkdir, rmdir, file replacement and removal) in ``ops``. :meth:`kernel_write` is
the same kernel seen from another writer (systemd): logged in ``systemd_writes`` only. File names
in ``ignore`` are accepted and silently not applied (a kernel that ignores a value); ``refuse``
maps file names to the errno every write to them fails with.
"""

import errno
import os
import re
import shutil

from sim.kernel import SimKernel

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError, KernelFS

PAGE = 4096
U32_MAX = 2 ** 32 - 1
U64_MAX = 2 ** 64 - 1
PAGE_COUNTER_MAX = (2 ** 63 - 1) // PAGE
IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")
PRIO_CLASSES = ("no-change", "promote-to-rt", "restrict-to-be", "idle", "none-to-rt")
# Kept small (each file is created on disk): what the modules read, plus a few for realism.
GROUP_BASE = {"cgroup.subtree_control": "", "cgroup.procs": "", "cgroup.type": "domain",
              "cgroup.events": "populated 0\nfrozen 0"}


# What a host tree made for reading (sim/host.py's add_cgroup) adds to the files above, for realism.
REALISM = {
    "memory": {"memory.peak": "0", "memory.swap.current": "0", "memory.swap.high": "max", "memory.zswap.current": "0",
               "memory.stat": "anon 0\nfile 0", "memory.reclaim": "",
               "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0",
               "memory.events.local": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0"},
    "cpu": {"cpu.weight.nice": "0", "cpu.max.burst": "0", "cpu.idle": "0"},
    "pids": {"pids.current": "0", "pids.peak": "0", "pids.events": "max 0"},
}


def controller_files(controller, features, realism=False):
    """Interface files (name -> initial text) a controller adds to a non-root group; with ``realism`` also the
    ones no module writes (REALISM). The one place both the kernel model and the host trees take them from."""
    out = {}
    if controller == "io":
        out = {"io.weight": "default 100", "io.max": "", "io.stat": ""}
        if features.get("io_latency"):
            out["io.latency"] = ""
        if features.get("io_prio"):
            out["io.prio.class"] = "no-change"
        if features.get("io_low"):
            out["io.low"] = ""
    elif controller == "memory":
        out = {"memory.current": "0", "memory.min": "0", "memory.low": "0", "memory.high": "max",
               "memory.max": "max", "memory.oom.group": "0", "memory.swap.max": "max", "memory.zswap.max": "max"}
    elif controller == "cpu":
        out = {"cpu.weight": "100", "cpu.max": "max 100000"}
    elif controller == "cpuset":
        # the .effective files are computed at read (SimCgroup.read)
        out = {"cpuset.cpus": "", "cpuset.mems": "", "cpuset.cpus.effective": "", "cpuset.mems.effective": "",
               "cpuset.cpus.partition": "member"}
    elif controller == "pids":
        out = {"pids.max": "max"}
    if realism:
        out.update(REALISM.get(controller, {}))
    return out


class SimCgroup(SimKernel):
    """A KernelFS over ``host.root`` whose cgroup v2 files behave like kernel files."""

    def __init__(self, host, io_low=False):
        super(SimCgroup, self).__init__(host.root)
        if host.cgroup_mount is None:
            raise ValueError("call host.add_cgroup_root() first")
        self.host = host
        self.mount = host.cgroup_mount
        self.features = dict(host.cgroup_features, io_low=io_low)
        self.ops = []
        self.systemd_writes = []
        self.ignore = set()
        self.refuse = {}
        self.handlers_by_name = {
            "cgroup.subtree_control": self._subtree_control, "io.weight": self._io_weight, "io.max": self._io_max,
            "io.latency": self._io_latency, "io.prio.class": self._io_prio_class, "memory.oom.group": self._oom_group,
            "cpu.weight": self._cpu_weight, "cpu.max": self._cpu_max,
            "cpuset.cpus": self._cpuset, "cpuset.mems": self._cpuset,
        }
        for name in ("memory.min", "memory.low", "memory.high", "memory.max", "memory.swap.max", "memory.swap.high",
                     "memory.zswap.max"):
            self.handlers_by_name[name] = self._memory

    # -- helpers --------------------------------------------------------------------------------
    def _split(self, path):
        """(group dir, file name) for a file inside the cgroup mount, else (None, None)."""
        if not path.startswith(self.mount + "/"):
            return None, None
        directory, name = path.rsplit("/", 1)
        return directory, name

    def _in_mount(self, path):
        return path == self.mount or path.startswith(self.mount + "/")

    def text(self, path):
        return self.host.read(path).rstrip("\n") if os.path.isfile(self.host.path(path)) else None

    def _put(self, path, text):
        with open(self.host.path(path), "w") as f:
            f.write(text + "\n" if text and not text.endswith("\n") else text)

    def _tokens(self, directory, name):
        return (self.text(directory + "/" + name) or "").split()

    def disks(self):
        """MAJ:MIN of the whole, visible disks of the host."""
        return set(i["majmin"] for i in self.host.devices.values()
                   if i.get("majmin") and not i.get("parent") and i["kind"] != "nvme-ctrl")

    def iocost_disks(self):
        """Disks with a line in the root io.cost.qos (iocost initialised)."""
        return set(line.split()[0] for line in (self.text(self.mount + "/io.cost.qos") or "").splitlines()
                   if line.split())

    def groups_below(self, directory):
        real = self.host.path(directory)
        return sorted(e for e in os.listdir(real) if os.path.isdir(os.path.join(real, e)))

    # -- groups ---------------------------------------------------------------------------------
    def _create(self, path, procs="", subtree="", files=None):
        """A group with the files its parent's subtree_control gives it (no checks, no log)."""
        parent = path.rsplit("/", 1)[0]
        enabled = self._tokens(parent, "cgroup.subtree_control")
        os.mkdir(self.host.path(path))
        out = dict(GROUP_BASE, **{"cgroup.controllers": " ".join(enabled), "cgroup.procs": procs,
                                  "cgroup.subtree_control": subtree})
        for controller in enabled:
            out.update(controller_files(controller, self.features))
        out.update(files or {})
        for key, value in out.items():
            if value is not None:
                self._put(path + "/" + key, value)

    def add_group(self, rel, procs="", subtree="", files=None):
        """Test set-up: group ``rel`` below the mount (parents created empty), with processes and controllers."""
        path = self.mount + "/" + rel.strip("/")
        parts = rel.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = self.mount + "/" + "/".join(parts[:i])
            if not os.path.isdir(self.host.path(parent)):
                self._create(parent)
        self._create(path, procs=procs, files=files)
        if subtree:
            self._enable(path, subtree.split())
        return path

    def ensure_group(self, path, enable=("cpu", "io", "memory", "pids"), leaf_enable=True):
        """What systemd does to realise a unit's cgroup: parents created and enabling ``enable`` for children."""
        rel = [p for p in path[len(self.mount):].split("/") if p]
        for i in range(len(rel)):
            directory = self.mount + "/" + "/".join(rel[:i + 1])
            parent = directory.rsplit("/", 1)[0]
            self._enable(parent, [c for c in enable if c in self._tokens(parent, "cgroup.controllers")])
            if not os.path.isdir(self.host.path(directory)):
                self._create(directory)
        if leaf_enable:
            self._enable(path, [c for c in enable if c in self._tokens(path, "cgroup.controllers")])

    def _enable(self, directory, controllers):
        enabled = self._tokens(directory, "cgroup.subtree_control")
        added = [c for c in controllers if c not in enabled]
        if not added:
            return
        self._put(directory + "/cgroup.subtree_control", " ".join(enabled + added))
        for child in self.groups_below(directory):
            c = directory + "/" + child
            own = self._tokens(c, "cgroup.controllers")
            self._put(c + "/cgroup.controllers", " ".join(own + [x for x in added if x not in own]))
            for ctl in added:
                for key, value in controller_files(ctl, self.features).items():
                    self._put(c + "/" + key, value)

    def _disable(self, directory, controllers):
        enabled = self._tokens(directory, "cgroup.subtree_control")
        removed = [c for c in controllers if c in enabled]
        self._put(directory + "/cgroup.subtree_control", " ".join(c for c in enabled if c not in removed))
        for child in self.groups_below(directory):
            c = directory + "/" + child
            self._put(c + "/cgroup.controllers",
                      " ".join(x for x in self._tokens(c, "cgroup.controllers") if x not in removed))
            for ctl in removed:
                for key in controller_files(ctl, self.features):
                    os.unlink(self.host.path(c + "/" + key))

    # -- cpuset -----------------------------------------------------------------------------------
    def _possible(self, name):
        """The CPUs or nodes a cpuset file may name (top_cpuset's cpus_allowed / mems_allowed on v2: possible)."""
        if name.startswith("cpuset.cpus"):
            source = "/sys/devices/system/cpu/possible"
        else:
            source = "/sys/devices/system/node/possible"
        text = self.text(source)
        return set(parse_list(text)) if text is not None else {0}

    def effective(self, directory, name):
        """cpuset.<cpus|mems>.effective of ``directory``: the root's file, else the group's own set within its
        parent's effective set (the parent's when the group's is empty or disjoint)."""
        base = name.replace(".effective", "")
        if directory == self.mount:
            return set(parse_list(self.text(directory + "/" + base + ".effective") or ""))
        parent = self.effective(directory.rsplit("/", 1)[0], base)
        own = set(parse_list(self.text(directory + "/" + base) or ""))
        return (own & parent) or parent

    def read(self, path, default=None):
        directory, name = self._split(path)
        if directory and directory != self.mount and name in ("cpuset.cpus.effective", "cpuset.mems.effective") \
                and os.path.isfile(self.host.path(path)):
            return format_list(self.effective(directory, name)) + "\n"
        return super(SimCgroup, self).read(path, default)

    # -- KernelFS overrides ---------------------------------------------------------------------
    def write(self, path, value):
        self.writes.append((path, value))
        self.ops.append(("write", path, value))
        return self._write(path, value)

    def kernel_write(self, path, value):
        """A write by another writer (systemd): same kernel rules, logged in systemd_writes only."""
        self.systemd_writes.append((path, value))
        return self._write(path, value)

    def _write(self, path, value):
        directory, name = self._split(path)
        handler = self.handlers_by_name.get(name) if directory else None
        if handler is None:
            return KernelFS.write(self, path, value)
        if not os.path.isfile(self.host.path(path)):
            raise KernelFileError(path, value, errno.ENOENT)
        if name in self.ignore:
            return None
        if name in self.refuse:
            raise KernelFileError(path, value, self.refuse[name])
        try:
            handler(directory, name, value.strip())
        except OSError as e:
            raise KernelFileError(path, value, e.errno)
        return None

    def mkdir(self, path, mode=0o755):
        self.ops.append(("mkdir", path))
        if not self._in_mount(path):
            return super(SimCgroup, self).mkdir(path, mode)
        if os.path.isdir(self.host.path(path)):
            return None          # EEXIST: KernelFS.mkdir accepts it
        if not os.path.isdir(self.host.path(path.rsplit("/", 1)[0])):
            raise KernelFileError(path, None, errno.ENOENT, action="create directory")
        self._create(path)
        return None

    def rmdir(self, path):
        self.ops.append(("rmdir", path))
        if not self._in_mount(path):
            return super(SimCgroup, self).rmdir(path)
        if not os.path.isdir(self.host.path(path)):
            return None          # ENOENT: KernelFS.rmdir accepts it
        if self._tokens(path, "cgroup.procs") or self.groups_below(path):
            raise KernelFileError(path, None, errno.EBUSY, action="remove directory")
        shutil.rmtree(self.host.path(path))
        return None

    def atomic_write(self, path, content, mode=0o644):
        self.ops.append(("atomic_write", path))
        return super(SimCgroup, self).atomic_write(path, content, mode)

    def remove(self, path):
        self.ops.append(("remove", path))
        return super(SimCgroup, self).remove(path)

    # -- file handlers (raise OSError like the kernel) ------------------------------------------
    def _subtree_control(self, directory, _name, line):
        plus, minus = [], []
        for token in line.split():
            if token[:1] not in "+-" or len(token) < 2:
                raise OSError(errno.EINVAL, "bad token")
            (plus if token[0] == "+" else minus).append(token[1:])
        available = self._tokens(directory, "cgroup.controllers")
        enabled = self._tokens(directory, "cgroup.subtree_control")
        for c in plus:
            if c not in available:
                raise OSError(errno.ENOENT, "controller not available")
        new = [c for c in plus if c not in enabled]
        if new and directory != self.mount and self._tokens(directory, "cgroup.procs"):
            raise OSError(errno.EBUSY, "no internal processes")
        for c in minus:
            for child in self.groups_below(directory):
                if c in self._tokens(directory + "/" + child, "cgroup.subtree_control"):
                    raise OSError(errno.EBUSY, "a child enables it")
        self._enable(directory, plus)
        self._disable(directory, minus)

    def _device(self, token, need_iocost=False):
        if token not in self.disks():
            raise OSError(errno.ENODEV, "no such disk")
        if need_iocost and token not in self.iocost_disks():
            raise OSError(errno.EOPNOTSUPP, "iocost not initialised")
        return token

    @staticmethod
    def _number(text, minimum=0, maximum=U64_MAX, allow_max=False):
        if allow_max and text == "max":
            return "max"
        if not text.isdigit() or not minimum <= int(text) <= maximum:
            raise OSError(errno.EINVAL, "bad number")
        return int(text)

    def _io_weight(self, directory, name, line):
        fields = line.split()
        if len(fields) == 1:
            fields = ["default"] + fields
        if len(fields) != 2:
            raise OSError(errno.EINVAL, "bad line")
        state = {}
        for row in (self.text(directory + "/" + name) or "").splitlines():
            key, value = row.split()
            state[key] = int(value)
        key, value = fields
        if key != "default":
            self._device(key, need_iocost=True)
            if value == "default":
                state.pop(key, None)
                value = None
        if value is not None:
            state[key] = self._number(value, 1, 10000)
        rows = ["default %d" % state.get("default", 100)] + [
            "%s %d" % (k, v) for k, v in sorted(state.items()) if k != "default"]
        self._put(directory + "/" + name, "\n".join(rows))

    def _device_lines(self, path):
        out = {}
        for row in (self.text(path) or "").splitlines():
            fields = row.split()
            if fields:
                out[fields[0]] = dict(f.split("=", 1) for f in fields[1:])
        return out

    def _io_max(self, directory, name, line):
        fields = line.split()
        dev = self._device(fields[0] if fields else "")
        state = self._device_lines(directory + "/" + name)
        limits = state.get(dev, dict((k, "max") for k in IO_MAX_KEYS))
        for token in fields[1:]:
            key, sep, value = token.partition("=")
            if not sep or key not in IO_MAX_KEYS:
                raise OSError(errno.EINVAL, "bad key")
            if value == "max":
                limits[key] = "max"
                continue
            number = self._number(value)
            if number == 0:
                raise OSError(errno.ERANGE, "0 is out of range")
            limits[key] = "max" if key.endswith("iops") and number >= U32_MAX else str(number)
        if all(limits[k] == "max" for k in IO_MAX_KEYS):
            state.pop(dev, None)
        else:
            state[dev] = limits
        self._put(directory + "/" + name, "\n".join(
            "%s %s" % (d, " ".join("%s=%s" % (k, v[k]) for k in IO_MAX_KEYS)) for d, v in sorted(state.items())))

    def _io_latency(self, directory, name, line):
        fields = line.split()
        dev = self._device(fields[0] if fields else "")
        if len(fields) != 2 or not fields[1].startswith("target="):
            raise OSError(errno.EINVAL, "bad line")
        target = self._number(fields[1][len("target="):], allow_max=True)
        state = self._device_lines(directory + "/" + name)
        if target in (0, "max"):
            state.pop(dev, None)
        else:
            state[dev] = {"target": str(target)}
        self._put(directory + "/" + name,
                  "\n".join("%s target=%s" % (d, v["target"]) for d, v in sorted(state.items())))

    def _io_prio_class(self, directory, name, line):
        if line not in PRIO_CLASSES:
            raise OSError(errno.EINVAL, "unknown policy")
        self._put(directory + "/" + name, line)

    def _memory(self, directory, name, line):
        value = self._number(line, allow_max=True)
        if value != "max":
            pages = value // PAGE
            value = "max" if pages >= PAGE_COUNTER_MAX else str(pages * PAGE)
        self._put(directory + "/" + name, value)

    def _oom_group(self, directory, name, line):
        self._put(directory + "/" + name, str(self._number(line, 0, 1)))

    def _cpu_weight(self, directory, name, line):
        if not line.isdigit() or not 1 <= int(line) <= 10000:
            raise OSError(errno.ERANGE, "out of range")
        self._put(directory + "/" + name, str(int(line)))

    def _cpu_max(self, directory, name, line):
        fields = line.split()
        if not 1 <= len(fields) <= 2:
            raise OSError(errno.EINVAL, "bad line")
        quota, period = (self.text(directory + "/" + name) or "max 100000").split()
        quota = self._number(fields[0], 1000, 2 ** 44 - 1, allow_max=True)
        if len(fields) == 2:
            period = self._number(fields[1], 1000, 1000000)
        self._put(directory + "/" + name, "%s %s" % (quota, period))

    def _cpuset(self, directory, name, line):
        try:
            numbers = parse_list(line)
        except ValueError:
            raise OSError(errno.EINVAL, "bad list")
        if not set(numbers) <= self._possible(name):
            raise OSError(errno.EINVAL, "beyond the possible CPUs or nodes")
        self._put(directory + "/" + name, format_list(numbers))


def parse_list(text):
    """bitmap_parselist() without strides and 'N': regions 'a' or 'a-b' separated by any run of commas and
    whitespace; '' is the empty set (ValueError otherwise)."""
    out = set()
    for part in re.split(r"[\s,]+", text.strip()):
        if not part:
            continue
        m = re.match(r"^([0-9]+)(?:-([0-9]+))?$", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))) or int(m.group(2) or m.group(1)) > 65535:
            raise ValueError(part)      # beyond the bitmap: ERANGE in the kernel
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(out)


def format_list(numbers):
    """'%*pbl': ascending runs, 'a-b' for a run of two or more."""
    out, numbers = [], sorted(set(numbers))
    start = prev = None
    for n in numbers + [None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        start = prev = n
    return ",".join(out)
