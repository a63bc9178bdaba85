# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVMe on the simulated host: :class:`SimNvme`, the controllers as the nvme driver and nvme-cli show them.

The driver (``SimNvme.driver(host, sim)``, the nvme_queues tests): parameter writes are checked the
way ``pci.c`` checks them, and a write to ``reset_controller`` re-splits the controller's queues with
the driver's arithmetic, keeping the tag set's maps from probe. A reset that adds poll queues to a
controller probed without them reproduces what the lab showed on 6.1 and 6.12: the driver logs the
new split, blk-mq keeps only default hctxs, ``io_poll`` stays 0, and the controller is recorded in
``stalled``. :class:`Initramfs` is the boot image the nvme_queues module lists and rebuilds.

nvme-cli (``SimNvme(controllers)`` or ``SimNvme.from_recording(guest, iomem)``, the
nvme_arbitration tests): a ``Runner`` stand-in built from the recordings in
``tests/unit/plugins/module_utils/fixtures/nvme_arbitration`` (``debian1*-nvme-cli-*.json``): every
answer the recorded QEMU controllers gave is reproduced byte for byte
(``test_sim_replays_the_recordings`` checks that), and the same templates then serve states the lab
cannot show - a controller that lets the host change and save Arbitration, one without Select
support, one running WRR. Those states are synthetic and are built in the tests with
:meth:`SimController.configure`.

Formats (nvme-cli 2.3 and 2.13 print the same, see the recordings):

* ``get-feature:0x01 (Arbitration), Current value:0x00000007`` - the value with ``0x`` and 8 digits,
  except 0, printed ``00000000`` (nvme-cli's ``%#0*x``); select 3 adds one line per capability bit
  (``  Feature is changeable`` recorded for FID 0x04 on QEMU);
* ``set-feature:0x01 (Arbitration), value:0x03020103, cdw12:00000000, save:0`` on success (format
  recorded for FID 0x04, the only feature QEMU lets the host change);
* ``NVMe status: <name>: <text>(0x410e)`` on stderr with rc 1 for a refusal.
"""

import errno
import json
import os
import re

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import nvme_queues as nq
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.commands import CommandError
from sim.kernel import SimKernel
from sim.lab import lab_host
from sim.runner import FakeRunner

# The nvme driver's queue parameters as the kernel has them (drivers/nvme/host/pci.c), declared here and not taken
# from the module under test, so that a wrong limit in production fails against the simulation.
PARAMETERS_DIR = "/sys/module/nvme/parameters"
PARAMS = ("write_queues", "poll_queues", "io_queue_depth")
KERNEL_DEFAULTS = {"poll_queues": 0, "write_queues": 0, "io_queue_depth": 1024}
DEPTH_MIN, DEPTH_MAX = 2, 4095         # io_queue_depth_set: n < 2 || n > 4095 is -EINVAL

RELEASE = "6.1.0-57-amd64"
MODDIR = "/lib/modules/" + RELEASE
INITRD = "/boot/initrd.img-" + RELEASE
NVME_DEP = ("kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko kernel/block/t10-pi.ko "
            "kernel/lib/crc64-rocksoft.ko kernel/lib/crc-t10dif.ko kernel/lib/crc64.ko kernel/crypto/crct10dif_common.ko")
# What lsinitramfs listed for the lab's virtio-only initramfs (excerpt, Debian 12).
LAB_INITRAMFS = ["etc/modprobe.d", "usr/lib/modprobe.d", "usr/lib/modprobe.d/aliases.conf",
                 "usr/lib/modules/%s/kernel/drivers/block/virtio_blk.ko" % RELEASE,
                 "usr/lib/modules/%s/kernel/fs/ext4/ext4.ko" % RELEASE, "usr/sbin/modprobe"]
NVME_IN_INITRAMFS = ["usr/lib/modules/%s/kernel/drivers/nvme/host/nvme.ko" % RELEASE,
                     "usr/lib/modules/%s/kernel/drivers/nvme/host/nvme-core.ko" % RELEASE]
MQES_PLUS_1 = 2048      # QEMU's NVMe: CAP.MQES 2047
BLK_MQ_MAX_DEPTH = 10240


def driver_split(nr_io, poll_queues, write_queues, ncpus):
    """(default, read, poll) the way nvme_setup_io_queues/nvme_setup_irqs/nvme_calc_irq_sets count them.

    Interrupt vectors: admin + one per non-poll queue, and the affinity spreading caps the queue
    vectors at the number of possible CPUs (why 1 -> 0 poll queues at runtime gave 2/0/0, not
    3/0/0, in the lab).
    """
    poll = min(poll_queues, nr_io - 1)
    vectors = min(1 + nr_io - poll, 1 + ncpus)
    nrirqs = vectors - 1
    if nrirqs <= 1 or not write_queues:
        read = 0
    elif write_queues >= nrirqs:
        read = 1
    else:
        read = nrirqs - write_queues
    return max(nrirqs, 1) - read, read, poll


RECORDINGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins", "module_utils",
                              "fixtures", "nvme_arbitration")

RECORDINGS = {
    ("debian12", False): "debian12-6.1-nvme-cli-2.3-default.json",
    ("debian12", True): "debian12-6.1-nvme-cli-2.3-iomem-relaxed.json",
    ("debian13", False): "debian13-6.12-nvme-cli-2.13-default.json",
    ("debian13", True): "debian13-6.12-nvme-cli-2.13-iomem-relaxed.json",
}
NVME = "/usr/sbin/nvme"
SELECT_NAMES = {0: "Current", 1: "Default", 2: "Saved", 3: "Supported capabilities"}
CAP_LINES = ((0x1, "  Feature is saveable"), (0x2, "  Feature is per-namespace"), (0x4, "  Feature is changeable"))
# nvme-cli's texts for the statuses the module handles (0x410d/0x410e/0x410f/0x4002/0x4001 are recorded).
STATUS_TEXT = {
    0x410d: "Feature Identifier Not Saveable: The Feature Identifier specified does not support a saveable value",
    0x410e: "Feature Not Changeable: The Feature Identifier is not able to be changed",
    0x410f: "Feature Not Namespace Specific: The Feature Identifier specified is not namespace specific",
    0x4002: "Invalid Field in Command: A reserved coded value or an unsupported value in a defined field",
    0x4001: ("Invalid Command Opcode: A reserved coded value or an unsupported value in the command opcode "
             "field"),
}


def load(name):
    with open(os.path.join(RECORDINGS_DIR, name)) as f:
        return json.load(f)


def recording(guest, iomem):
    return load(RECORDINGS[(guest, iomem)])


def nvme_hex(value, digits=8):
    """nvme-cli's ``%#0*x`` with width ``digits + 2`` for non-zero values and ``digits`` for 0."""
    return "0x%0*x" % (digits, value) if value else "0" * digits


def status_stderr(status):
    return "NVMe status: %s(0x%x)\n" % (STATUS_TEXT[status], status)


class SimController(object):
    """One controller's Arbitration state and the outputs nvme-cli gives for it."""

    def __init__(self, name, serial, current=0x7, saved=0x7, default=0x7, capabilities=0x0, oncs=0x15d,
                 show_regs=None, id_ctrl=None, fail=None):
        self.name = name
        self.serial = serial
        self.current = current
        self.saved = saved
        self.default = default
        self.capabilities = capabilities
        self.oncs = oncs
        self.show_regs = show_regs or (0, "cap     : 0x4018200f0107ff\nversion : 0x10400\ncc      : 0x460061\n", "")
        self.id_ctrl = id_ctrl
        # (rc, out, err) answered instead, keyed by verb ("set-feature") or ("get-feature", "<select>")
        self.fail = dict(fail or {})

    def configure(self, **kwargs):
        for key, value in kwargs.items():
            if not hasattr(self, key):
                raise AttributeError(key)
            setattr(self, key, value)
        return self

    def id_ctrl_json(self):
        if self.id_ctrl:  # the recorded answer, with ONCS replaced where a test changed it
            return re.sub(r'"oncs":\d+', '"oncs":%d' % self.oncs, self.id_ctrl)
        return json.dumps({"vid": 6966, "sn": self.serial.ljust(20), "oncs": self.oncs}, indent=2) + "\n"

    # -- answers --------------------------------------------------------------------------------
    def get_feature(self, select):
        if select in (1, 2, 3) and not self.oncs & 0x10:
            # A controller without Select support answers every select with the current value.
            select_value = self.current
        else:
            select_value = {0: self.current, 1: self.default, 2: self.saved, 3: self.capabilities}[select]
        out = "get-feature:0x01 (Arbitration), %s value:%s\n" % (SELECT_NAMES[select], nvme_hex(select_value))
        if select == 3 and self.oncs & 0x10:
            out += "".join(line + "\n" for bit, line in CAP_LINES if select_value & bit)
        return 0, out, ""

    def set_feature(self, value, save):
        # QEMU checks the Save bit first: with --save even an unchangeable feature answers 0x410d (recorded).
        if save and not self.capabilities & 0x1:
            return 1, "", status_stderr(0x410d)
        if not self.capabilities & 0x4:
            return 1, "", status_stderr(0x410e)
        self.current = value
        if save:
            self.saved = value
        return 0, "set-feature:0x01 (Arbitration), value:%s, cdw12:00000000, save:%s\n" % (
            nvme_hex(value), "0x1" if save else "0"), ""


class SimNvme(object):
    """The host's NVMe controllers: the nvme driver's parameter files and resets (:meth:`driver`), and
    nvme-cli against :class:`SimController` objects (the ``Runner`` interface; every call recorded)."""

    def __init__(self, controllers=(), missing_device_stderr=None, installed=True, version="2.13"):
        self.controllers = dict((c.name, c) for c in controllers)
        self.version = version
        self.calls = []
        self.installed = installed
        self.missing_device_stderr = missing_device_stderr or "%s: No such file or directory\n"

    @classmethod
    def driver(cls, host, sim, ctrls=(0, 1), granted=64):
        """The nvme driver over the controllers ``nvme<N>`` (N in ``ctrls``, one namespace each) of ``host``,
        its files behaving through the SimKernel ``sim``; :meth:`boot` probes them."""
        self = cls()
        self.h, self.sim = host, sim
        self.ncpus = host.ncpus
        self.params = dict(KERNEL_DEFAULTS)
        self.granted = granted
        self.ctrls = {}
        self.stalled, self.resets, self.klog = [], [], []
        self.ignore_resets = False
        for p in PARAMS:
            sim.handlers["%s/%s" % (PARAMETERS_DIR, p)] = self._param_writer(p)
        for n in ctrls:
            name = "nvme%d" % n
            self.ctrls[name] = {"ns": ["nvme%dn1" % n]}
            sim.handlers["/sys/class/nvme/%s/reset_controller" % name] = self._resetter(name)
        host.write("/sys/module/nvme/initstate", "live")
        return self

    # == the driver ===============================================================================
    # module parameters (pci.c io_queue_count_set / io_queue_depth_set)
    def _param_writer(self, p):
        def write(line):
            try:
                n = int(line.strip(), 10)
            except ValueError:
                raise OSError(errno.EINVAL, "invalid")
            if p == "io_queue_depth" and not DEPTH_MIN <= n <= DEPTH_MAX:
                raise OSError(errno.EINVAL, "invalid")
            if p != "io_queue_depth" and not 0 <= n <= self.ncpus:
                raise OSError(errno.EINVAL, "invalid")
            self.params[p] = n
            self.h.write("%s/%s" % (PARAMETERS_DIR, p), n)
        return write

    def boot(self, **params):
        """Probe every controller with these parameters (what a reboot does)."""
        self.params.update(params)
        for p, v in self.params.items():
            self.h.write("%s/%s" % (PARAMETERS_DIR, p), v)
        for name, c in self.ctrls.items():
            c["allocated"] = self.ncpus + self.params["write_queues"] + self.params["poll_queues"]
            split = driver_split(min(c["allocated"], self.granted), self.params["poll_queues"],
                                 self.params["write_queues"], self.ncpus)
            c["nr_maps"] = 3 if split[2] else 2
            c["tags"] = min(MQES_PLUS_1, self.params["io_queue_depth"], BLK_MQ_MAX_DEPTH) - 1
            self._render(name, split, mapped=True)
        return self

    def _resetter(self, name):
        def reset(line):
            self.resets.append(name)
            if self.ignore_resets:
                return
            c = self.ctrls[name]
            split = driver_split(min(c["allocated"], self.granted), self.params["poll_queues"],
                                 self.params["write_queues"], self.ncpus)
            mapped = not (split[2] and c["nr_maps"] < 3)
            if not mapped:
                self.stalled.append(name)
            self._render(name, split, mapped)
        return reset

    def _render(self, name, split, mapped):
        default, read, poll = split
        self.klog.append("[   22.7] nvme %s: %d/%d/%d default/read/poll queues" % (name, default, read, poll))
        c = self.ctrls[name]
        self.h.write("/sys/class/nvme/%s/queue_count" % name, default + read + poll + 1)
        kinds = []
        for kind, count in (("default", default), ("read", read), ("poll", poll)):
            for i in range(count):
                cpus = [cpu for cpu in range(self.ncpus) if cpu % count == i]
                # Without a poll map (nr_maps 2) blk-mq types every hctx from the default map.
                kinds.append(("default" if not mapped else kind, cpus))
        for ns in c["ns"]:
            d = self.h.sysdir(ns)
            mq = self.h.path(d + "/mq")
            for entry in os.listdir(mq):
                for f in os.listdir(os.path.join(mq, entry)):
                    p = os.path.join(mq, entry, f)
                    os.rmdir(p) if os.path.isdir(p) else os.unlink(p)
                os.rmdir(os.path.join(mq, entry))
            dbg = self.h.path("/sys/kernel/debug/block/%s" % ns)
            if os.path.isdir(dbg):
                for entry in os.listdir(dbg):
                    os.unlink(os.path.join(dbg, entry, "type"))
                    os.rmdir(os.path.join(dbg, entry))
            for index, (kind, cpus) in enumerate(kinds):
                self.h.write("%s/mq/%d/cpu_list" % (d, index), ", ".join(str(x) for x in cpus))
                self.h.write("%s/mq/%d/nr_tags" % (d, index), c["tags"])
                self.h.write("%s/mq/%d/nr_reserved_tags" % (d, index), 0)
                if self.h.debugfs:
                    self.h.write("/sys/kernel/debug/block/%s/hctx%d/type" % (ns, index), kind)
            self.h.write(d + "/queue/io_poll", 1 if poll and c["nr_maps"] == 3 else 0)

    # == nvme-cli =================================================================================
    @classmethod
    def from_recording(cls, guest, iomem):
        """The two lab controllers exactly as recorded on that guest and boot."""
        rec = recording(guest, iomem)
        ctrls = []
        for name, attrs in sorted(rec["controllers"].items()):
            def answer(*args):
                return find(rec, ["nvme"] + list(args))
            dev = "/dev/" + name
            cur = parse_value(answer("get-feature", dev, "--feature-id=1", "--sel=0")[1])
            saved_rec = answer("get-feature", dev, "--feature-id=1", "--sel=2")
            ctrls.append(SimController(
                name, attrs["serial"].strip(), current=cur,
                saved=parse_value(saved_rec[1]) if saved_rec[0] == 0 else cur,
                capabilities=parse_value(answer("get-feature", dev, "--feature-id=1", "--sel=3")[1]),
                oncs=json.loads(answer("id-ctrl", dev, "--output-format=json")[1])["oncs"],
                show_regs=answer("show-regs", dev),
                id_ctrl=answer("id-ctrl", dev, "--output-format=json")[1]))
        missing = find(rec, ["nvme", "get-feature", "/dev/nvme9", "--feature-id=1", "--sel=0"])[2]
        version = re.match(r"nvme version ([0-9.]+)", rec["nvme_cli"]).group(1)
        return cls(controllers=ctrls, missing_device_stderr=missing.replace("/dev/nvme9", "%s"), version=version)

    def __getitem__(self, name):
        return self.controllers[name]

    # -- Runner interface -------------------------------------------------------------------------
    def which(self, name):
        return NVME if name == "nvme" and self.installed else None

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        argv = list(argv)
        self.calls.append(argv)
        rc, out, err = self._dispatch(argv)
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return rc, out, err

    def set_calls(self):
        return [c for c in self.calls if len(c) > 1 and c[1] == "set-feature"]

    def _dispatch(self, argv):
        if argv[0] != NVME:
            return 127, "", "sim: unexpected program %r\n" % argv[0]
        verb, dev = argv[1], argv[2]
        m = re.match(r"^/dev/(nvme\d+)$", dev)
        ctrl = self.controllers.get(m.group(1)) if m else None
        if ctrl is None:
            return 1, "", self.missing_device_stderr % dev
        try:
            opts = self._options(verb, argv[3:])
        except ValueError as e:
            return 1, "", "sim: %s\n" % e
        if verb == "get-feature" and ("get-feature", opts.get("sel")) in ctrl.fail:
            return ctrl.fail[("get-feature", opts.get("sel"))]
        if verb in ctrl.fail:
            return ctrl.fail[verb]
        if verb == "get-feature" and opts.get("feature-id") == "1" and set(opts) == {"feature-id", "sel"}:
            return ctrl.get_feature(int(opts["sel"]))
        if verb == "set-feature" and opts.get("feature-id") == "1" and set(opts) <= {"feature-id", "value", "save",
                                                                                     "verbose"}:
            return ctrl.set_feature(int(opts.get("value", "0"), 0), "save" in opts)
        if verb == "id-ctrl" and opts == {"output-format": "json"}:
            return 0, ctrl.id_ctrl_json(), ""
        if verb == "show-regs" and opts == {}:
            return ctrl.show_regs
        return 1, "", "sim: unsupported nvme call %r\n" % (argv,)

    def _options(self, verb, args):
        """nvme-cli's options as it parses them: long forms in both versions; short -v is --value in 2.3 and
        --verbose in 2.13 (which then sends value 0), -s is --sel for get-feature and --save for set-feature."""
        short = {"-f": "feature-id", "-o": "output-format", "-V": "value"}
        short["-s"] = "sel" if verb == "get-feature" else "save"
        short["-v"] = "value" if self.version == "2.3" else "verbose"
        flags = ("save", "verbose")
        out, i = {}, 0
        while i < len(args):
            arg = args[i]
            if arg.startswith("--"):
                key, _eq, value = arg[2:].partition("=")
                out[key] = value if _eq else None
            elif arg in short:
                key = short[arg]
                if key in flags:
                    out[key] = None
                else:
                    i += 1
                    out[key] = args[i]
            elif arg.startswith("-"):
                raise ValueError("unrecognized option %r" % arg)
            # a bare word is a positional argument, which nvme-cli 2.13 ignores (so "-v 0x3" sends 0)
            i += 1
        return out


def recorded_host(tmp_path, guest="debian12", iomem=False, vdb=False):
    """The lab guest's disks with its NVMe controllers named and addressed as that boot recorded them
    (6.12 probes asynchronously: the Debian 13 default boot has nvme0 = lab-nvme-b), and its kernel command line."""
    rec = recording(guest, iomem)
    h = lab_host(tmp_path, vda={"partitions": 1}, vdb={} if vdb else None, nvme=())
    for name, attrs in sorted(rec["controllers"].items()):
        n = int(name[len("nvme"):])
        h.add_nvme(ctrl=n, serial=attrs["serial"].strip(), majmin="259:%d" % n, pci=attrs["address"])
    h.write("/proc/cmdline", rec["cmdline"])
    return h


def parse_value(text):
    m = re.search(r"value:(?:0x)?([0-9a-fA-F]+)", text or "")
    return int(m.group(1), 16) if m else None


def find(rec, argv):
    """(rc, stdout, stderr) of the recorded command with exactly this argv (argv[0] 'nvme')."""
    for r in rec["records"]:
        if r["argv"] == list(argv):
            return r["rc"], r["stdout"], r["stderr"]
    raise KeyError("not recorded in %s: %r" % (rec["guest"], argv))


class Initramfs(object):
    """The running kernel's initramfs: ``lsinitramfs`` lists ``files``, ``update-initramfs`` rebuilds it
    (copying modprobe.d like mkinitramfs does); :meth:`runner` answers those and ``dmesg`` (the driver's log)."""

    def __init__(self, host, files=None):
        self.h = host
        self.files = list(LAB_INITRAMFS if files is None else files)

    def lsinitramfs(self, argv):
        if not os.path.exists(self.h.path(argv[1])):
            raise CommandError(argv, 1, "", "No such file")
        return 0, "\n".join(self.files) + "\n", ""

    def update(self, argv):
        assert argv[1:] == ["-u", "-k", RELEASE]
        files = [f for f in self.files if not f.startswith("etc/modprobe.d/")]
        etc = self.h.path("/etc/modprobe.d")
        if os.path.isdir(etc):
            files += ["etc/modprobe.d/" + f for f in sorted(os.listdir(etc)) if f.endswith(".conf")]
        self.files = files
        self.h.write(INITRD, "rebuilt")
        os.utime(self.h.path(INITRD), None)
        return 0, "update-initramfs: Generating %s\n" % INITRD, ""

    def runner(self, nvme=None):
        tools = {"lsinitramfs": "/usr/bin/lsinitramfs", "update-initramfs": "/usr/sbin/update-initramfs",
                 "dmesg": "/usr/bin/dmesg"}
        return FakeRunner({
            (tools["lsinitramfs"], Ellipsis): self.lsinitramfs,
            (tools["update-initramfs"], Ellipsis): self.update,
            (tools["dmesg"], Ellipsis): lambda argv: (0, "\n".join(nvme.klog if nvme else []) + "\n", ""),
        }, tools=tools)


class Lab(object):
    """A lab-like host for nvme_queues: 2 CPUs, two QEMU NVMe controllers, nvme loadable from the root filesystem."""

    def __init__(self, tmp_path, ncpus=2, debugfs=True, builtin=False, initramfs=None, **boot):
        self.h = lab_host(tmp_path, ncpus=ncpus, debugfs=debugfs, kernel=RELEASE)
        self.sim = SimKernel(self.h.root)
        self.nvme = SimNvme.driver(self.h, self.sim)
        if builtin:
            self.h.write(MODDIR + "/modules.builtin", "kernel/drivers/nvme/host/nvme.ko")
            self.h.remove("/sys/module/nvme/initstate")
        else:
            self.h.write(MODDIR + "/modules.dep", NVME_DEP)
        self.h.write(INITRD, "initramfs")
        self.initramfs = Initramfs(self.h, initramfs)
        self.runner = self.initramfs.runner(self.nvme)
        self.nvme.boot(**boot)

    def run(self, check_mode=False, **params):
        params.setdefault("state", "present")
        return nq.reconcile(params, self.sim, self.runner, check_mode=check_mode)

    def conf(self):
        path = self.h.path(nq.CONF_PATH)
        return open(path).read() if os.path.exists(path) else None

    def writes(self):
        return list(self.sim.writes)

    def etc_files(self):
        out = []
        for dirpath, _dirs, files in os.walk(self.h.path("/etc")):
            out.extend(os.path.join(dirpath, f) for f in files)
        return sorted(out)
