# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_blk_queue through the engine against simulated queue files (rules observed on 6.1 and 6.12).

The simulation (tests/unit/sim/blk_queue.py) follows the lab transcripts in docs/blk_queue.md: a
scheduler switch resets nr_requests, nr_requests < 4 reads 4 and is limited by the tag depth or
2048, wbt ignores a write of the latency it holds and 6.12 shows 0 while bfq/iocost keep it off.
"""

import errno
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as bq
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import DeviceError, DeviceResolver
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import ETC_RULES_DIR
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler, ReconcileError
from sim.blk_queue import RELEASES as RELEASE, SimQueue, queue_host
from sim.host import FakeHost
from sim.kernel import SimKernel

QOS_ON = "%s enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 min=1.00 max=10000.00"


class Lab(object):
    """The lab VM's disks on a fake host with simulated queues: two NVMe (none, 1023 tags) and a
    rotational 2-queue virtio data disk (none, 256 tags); vda with a partition; a bio-based dm."""

    def __init__(self, root, kernel="6.12", modules=True, **nvme_a):
        self.kernel = kernel
        lab_modules = (["alias bfq-iosched bfq", "alias pci:v00001B36d00000010sv* nvme"],
                       ["kernel/block/bfq.ko.xz:", "kernel/block/kyber-iosched.ko.xz:",
                        "kernel/drivers/nvme/host/nvme.ko.xz: kernel/drivers/nvme/host/nvme-core.ko.xz"])
        h = queue_host(root, kernel=kernel, dm=True, modules=lab_modules if modules else None, **nvme_a)
        self.host = h
        self.sim = h.sim
        self.q = h.q

    def iocost(self, name, majmin):
        self.sim.state[bq.IOCOST_QOS] = QOS_ON % majmin
        self.q[name].iocost(True)

    def run(self, entries=None, check_mode=False, **params):
        """Like the module: requests -> resolve -> build -> engine -> results."""
        params.setdefault("state", "present")
        params.setdefault("persist", True)
        params.setdefault("adopt", False)
        if entries is not None:
            params["devices"] = entries
        wanted = bq.requests(params)
        records = bq.resolve(DeviceResolver(self.sim), [s for s, _a in wanted])
        settings, errors, plans = bq.build(self.sim, list(zip(records, [a for _s, a in wanted])), params,
                                           release=bq.kernel_release(self.sim), page=4096)
        reconciled = Reconciler(self.sim, check_mode=check_mode).run(settings, errors)
        return bq.results(plans, reconciled, params, check_mode)

    def attrs_written(self):
        return [(p.split("/")[3], p.rsplit("/", 1)[1], v) for p, v in self.sim.writes]

    def etc(self):
        out = []
        for dirpath, _dirs, files in os.walk(os.path.join(self.host.root, "etc")):
            out.extend(os.path.join(dirpath, f) for f in files)
        return sorted(out)


@pytest.fixture
def lab(tmp_path):
    return Lab(tmp_path)


@pytest.fixture
def lab61(tmp_path):
    return Lab(tmp_path, kernel="6.1")


def values(result, index=0):
    return result[0]["devices"][index]["held"]


# -- order and kernel normalisation ----------------------------------------------------------

def test_scheduler_goes_first_then_nr_requests_and_a_second_run_writes_nothing(lab):
    entries = [{"device": "lab-nvme-a", "nr_requests": 2048, "read_ahead_kb": 1024, "scheduler": "mq-deadline"}]
    result, warnings = lab.run(entries)
    assert lab.attrs_written() == [("nvme0n1", "scheduler", "mq-deadline"), ("nvme0n1", "nr_requests", "2048"),
                                   ("nvme0n1", "read_ahead_kb", "1024")]
    assert result["changed"] and values((result,))["nr_requests"] == 2048 and warnings == []
    assert result["diff"]["before"]["nvme0n1"] == {"scheduler": "none", "nr_requests": 1023, "read_ahead_kb": 128}
    assert result["diff"]["after"]["nvme0n1"] == {"scheduler": "mq-deadline", "nr_requests": 2048, "read_ahead_kb": 1024}
    lab.sim.writes[:] = []
    again, _w = lab.run(entries)
    assert again["changed"] is False and lab.sim.writes == [] and again["diff"] == {"before": {}, "after": {}}


def test_nr_requests_is_rewritten_after_a_scheduler_switch_even_when_it_already_matches(lab):
    q = lab.q["nvme0n1"]
    q.write_scheduler("mq-deadline")
    q.write_nr_requests("64")
    q.render()
    result, _w = lab.run([{"device": "nvme0n1", "scheduler": "kyber", "nr_requests": 64}])
    # The switch resets the depth to 2 x min(1023, 128) = 256; without the second write it would stay there.
    assert lab.attrs_written() == [("nvme0n1", "scheduler", "kyber"), ("nvme0n1", "nr_requests", "64")]
    assert q.elevator == "kyber" and q.nr_requests == 64 and q.loaded == ["kyber"]
    assert values((result,))["nr_requests"] == 64


def test_a_scheduler_switch_without_nr_requests_reports_the_reset(lab):
    q = lab.q["nvme0n1"]
    result, warnings = lab.run([{"device": "nvme0n1", "scheduler": "mq-deadline"}])
    assert q.nr_requests == 256 and values((result,))["nr_requests"] == 256
    assert any("reset nr_requests from 1023 to 256" in w for w in warnings)


def test_nr_requests_below_4_is_compared_as_4(lab):
    result, warnings = lab.run([{"device": "lab-nvme-b", "nr_requests": 1}])
    assert lab.attrs_written() == [("nvme1n1", "nr_requests", "4")]
    assert values((result,))["nr_requests"] == 4 and any("BLKDEV_MIN_RQ" in w for w in warnings)
    lab.sim.writes[:] = []
    assert lab.run([{"device": "lab-nvme-b", "nr_requests": 1}])[0]["changed"] is False and lab.sim.writes == []


@pytest.mark.parametrize("entry, words", [
    ({"nr_requests": 100000}, ["100000 is above", "at most 1023", "mq/*/nr_tags", "allows up to 2048"]),
    ({"nr_requests": 1024}, ["at most 1023"]),
    ({"nr_requests": 2049, "scheduler": "mq-deadline"}, ["at most 2048", "MAX_SCHED_RQ"]),
    ({"nr_requests": 100000, "scheduler": "kyber"}, ["at most 2048"]),
])
def test_nr_requests_beyond_what_the_kernel_takes_is_refused_before_any_write(lab, entry, words):
    with pytest.raises(ReconcileError) as exc:
        lab.run([dict({"device": "lab-nvme-a"}, **entry)])
    assert all(w in exc.value.msg for w in words), exc.value.msg
    assert "nothing was changed" in exc.value.msg and lab.sim.writes == [] and lab.etc() == []
    assert lab.q["nvme0n1"].elevator == "none" and lab.q["nvme0n1"].nr_requests == 1023


def test_nr_requests_limit_follows_the_scheduler_the_disk_will_have(lab):
    q = lab.q["nvme0n1"]
    q.write_scheduler("mq-deadline")
    q.write_nr_requests("2048")
    q.render()
    with pytest.raises(ReconcileError) as exc:       # switching to none: the tag depth applies
        lab.run([{"device": "nvme0n1", "scheduler": "none", "nr_requests": 2048}])
    assert "at most 1023" in exc.value.msg and lab.sim.writes == []
    lab.run([{"device": "nvme0n1", "scheduler": "none", "nr_requests": 1000}])
    assert q.elevator == "none" and q.nr_requests == 1000
    virtio = lab.run([{"device": "lab-virtio-data", "scheduler": "mq-deadline", "nr_requests": 2048}])[0]
    assert values((virtio,))["nr_requests"] == 2048


def test_unknown_scheduler_lists_what_the_disk_offers_and_writes_nothing(lab):
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "scheduler": "foo", "nr_requests": 64}])
    msg = exc.value.msg
    assert "'foo' is not an I/O scheduler" in msg and "lists none, mq-deadline" in msg
    assert "loadable as modules: bfq, kyber" in msg and lab.sim.writes == [] and lab.etc() == []


def test_unlisted_scheduler_is_taken_when_its_module_is_installed(tmp_path):
    lab = Lab(tmp_path, modules=False)
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "scheduler": "kyber"}])
    assert "no other scheduler module is installed" in exc.value.msg and lab.sim.writes == []
    lab = Lab(tmp_path / "with-modules")
    lab.run([{"device": "lab-nvme-a", "scheduler": "kyber"}, {"device": "lab-nvme-b", "scheduler": "bfq"}])
    assert lab.q["nvme0n1"].loaded == ["kyber"] and lab.q["nvme1n1"].loaded == ["bfq"]


def test_deadline_is_the_kernels_alias_of_mq_deadline(lab):
    lab.run([{"device": "lab-nvme-a", "scheduler": "deadline"}])
    assert lab.attrs_written() == [("nvme0n1", "scheduler", "mq-deadline")]
    lab.sim.writes[:] = []
    assert lab.run([{"device": "lab-nvme-a", "scheduler": "deadline"}])[0]["changed"] is False


def test_loadable_schedulers_from_modules_alias_and_dep(tmp_path):
    h = FakeHost(tmp_path)
    h.write("/lib/modules/6.1.0-50-amd64/modules.alias", "alias bfq-iosched bfq\nalias foo bar\n")
    h.write("/lib/modules/6.1.0-50-amd64/modules.dep", "kernel/block/kyber-iosched.ko:\nkernel/block/x_iosched.ko.zst:")
    sim = SimKernel(h.root)
    assert bq.loadable_schedulers(sim, bq.kernel_release(sim)) == ["bfq", "kyber", "x"]
    assert bq.loadable_schedulers(sim, None) == [] and bq.loadable_schedulers(sim, "5.0-none") == []


def test_read_ahead_is_stored_in_pages(lab):
    result, warnings = lab.run([{"device": "lab-virtio-data", "read_ahead_kb": 4095}])
    assert lab.attrs_written() == [("vdb", "read_ahead_kb", "4092")]
    assert values((result,))["read_ahead_kb"] == 4092 and any("4092" in w and "pages" in w for w in warnings)
    lab.sim.writes[:] = []
    assert lab.run([{"device": "lab-virtio-data", "read_ahead_kb": 4095}])[0]["changed"] is False


@pytest.mark.parametrize("entry, words", [
    ({"max_sectors_kb": 513}, ["above the disk's max_hw_sectors_kb (512)", "at most 512"]),
    ({"max_sectors_kb": 3}, ["below one page"]),
    ({"rq_affinity": 3}, ["rq_affinity: 3 is not one of 0, 1, 2"]),
    ({"nomerges": 3}, ["nomerges: 3 is not one of 0, 1, 2"]),
    ({"iostats": 2}, ["iostats: 2 is not one of 0, 1"]),
    ({"wbt_lat_usec": -2}, ["wbt_lat_usec: -2 is below -1"]),
    ({"nr_requests": "many"}, ["nr_requests: 'many' is not an integer"]),
    ({"scheduler": "none; reboot"}, ["is not a scheduler name"]),
])
def test_values_the_kernel_would_refuse_or_silently_map_are_refused(lab, entry, words):
    with pytest.raises(ReconcileError) as exc:
        lab.run([dict({"device": "lab-nvme-a"}, **entry)])
    assert all(w in exc.value.msg for w in words), exc.value.msg
    assert lab.sim.writes == [] and lab.etc() == []


def test_max_sectors_kb_must_be_a_multiple_of_the_logical_block_size(tmp_path):
    lab = Lab(tmp_path, logical_block_size=4096)
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "max_sectors_kb": 254}])
    assert "multiple of the logical block size (4 KiB)" in exc.value.msg and "252" in exc.value.msg
    lab.run([{"device": "lab-nvme-a", "max_sectors_kb": 256}])
    assert lab.q["nvme0n1"].values["max_sectors_kb"] == 256


# -- wbt_lat_usec ------------------------------------------------------------------------------

def test_wbt_minus_one_is_the_default_and_never_flaps(lab):
    lab.run([{"device": "lab-nvme-a", "wbt_lat_usec": -1}, {"device": "lab-virtio-data", "wbt_lat_usec": -1}])
    assert lab.sim.writes == []                       # both hold their default (2000, 75000 rotational)
    lab.q["nvme0n1"].write_wbt_lat_usec("5000")
    lab.q["nvme0n1"].render()
    result, _w = lab.run([{"device": "lab-nvme-a", "wbt_lat_usec": -1}])
    assert lab.attrs_written() == [("nvme0n1", "wbt_lat_usec", "-1")] and values((result,))["wbt_lat_usec"] == 2000
    assert result["diff"]["after"]["nvme0n1"]["wbt_lat_usec"] == 2000


def test_wbt_switched_off_by_iocost_is_reported_not_fought(lab):
    lab.iocost("nvme1n1", "259:1")
    assert lab.q["nvme1n1"].wbt_show() == 0
    for wanted in (-1, 2000):
        result, warnings = lab.run([{"device": "lab-nvme-b", "wbt_lat_usec": wanted}], persist=False)
        assert result["changed"] is False and lab.sim.writes == []
        assert values((result,))["wbt_lat_usec"] == 0
        assert any("reads 0" in w and "iocost is enabled" in w for w in warnings)
    # Another latency is an explicit (manual) setting: the kernel keeps wbt on next to iocost.
    result, warnings = lab.run([{"device": "lab-nvme-b", "wbt_lat_usec": 5000}])
    assert values((result,))["wbt_lat_usec"] == 5000 and not any("reads 0" in w for w in warnings)
    lab.q["nvme1n1"].iocost(False)
    assert lab.q["nvme1n1"].wbt_show() == 5000


def test_switching_to_bfq_turns_wbt_off_on_612_and_the_run_stays_idempotent(lab):
    entries = [{"device": "lab-virtio-data", "scheduler": "bfq", "wbt_lat_usec": -1}]
    result, warnings = lab.run(entries)
    # wbt is written after a switch from or to bfq (the value read before it is stale); here the
    # kernel ignores the -1 because it already holds the default latency, and keeps wbt off.
    assert lab.attrs_written() == [("vdb", "scheduler", "bfq"), ("vdb", "wbt_lat_usec", "-1")]
    assert values((result,))["wbt_lat_usec"] == 0 and any("the bfq scheduler switches the default wbt off" in w for w in warnings)
    lab.sim.writes[:] = []
    assert lab.run(entries)[0]["changed"] is False and lab.sim.writes == []
    result, warnings = lab.run([{"device": "lab-nvme-a", "scheduler": "bfq"}])
    assert any("bfq switched writeback throttling off" in w for w in warnings)


@pytest.mark.parametrize("wbt, held", [(0, 0), (-1, 2000), (2000, 2000), (5000, 5000)])
def test_leaving_bfq_rewrites_wbt_after_the_switch(lab, wbt, held):
    q = lab.q["nvme0n1"]
    q.write_scheduler("bfq")             # 6.12: the default wbt is off (reads 0) while bfq runs
    q.render()
    entries = [{"device": "lab-nvme-a", "scheduler": "none", "wbt_lat_usec": wbt}]
    result, _w = lab.run(entries)
    # Leaving bfq switches the default wbt back on: a 0 read before the switch is stale.
    assert values((result,))["wbt_lat_usec"] == held and q.wbt_show() == held
    lab.sim.writes[:] = []
    assert lab.run(entries)[0]["changed"] is False and lab.sim.writes == []


def test_bfq_on_61_keeps_showing_the_latency(lab61):
    result, warnings = lab61.run([{"device": "lab-virtio-data", "scheduler": "bfq", "wbt_lat_usec": -1}])
    assert values((result,))["wbt_lat_usec"] == 75000 and not any("wbt" in w for w in warnings)


def test_wbt_zero_turns_it_off_and_stays(lab):
    lab.run([{"device": "lab-nvme-a", "wbt_lat_usec": 0}])
    assert lab.q["nvme0n1"].wbt_show() == 0
    lab.sim.writes[:] = []
    assert lab.run([{"device": "lab-nvme-a", "wbt_lat_usec": 0}])[0]["changed"] is False and lab.sim.writes == []


# -- what a disk does not have ----------------------------------------------------------------

@pytest.mark.parametrize("attr, value", [("scheduler", "mq-deadline"), ("scheduler", "none"), ("nr_requests", 64),
                                         ("wbt_lat_usec", 2000), ("rq_affinity", 2)])
def test_bio_based_disks_refuse_request_queue_attributes(lab, attr, value):
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "/dev/mapper/vg0-lv0", attr: value}])
    assert "bio-based" in exc.value.msg and attr in exc.value.msg and "vdb" in exc.value.msg
    assert lab.sim.writes == [] and lab.etc() == []


def test_bio_based_disks_take_read_ahead(lab):
    result, _w = lab.run([{"device": "/dev/mapper/vg0-lv0", "read_ahead_kb": 256}], persist=False)
    assert result["devices"][0]["held"]["read_ahead_kb"] == 256
    assert result["devices"][0]["held"]["nr_requests"] == 128      # fake bio queue: readable, not settable


def test_a_queue_file_the_kernel_lacks_is_named(lab):
    del lab.sim.state["/sys/block/nvme0n1/queue/wbt_lat_usec"]
    lab.host.remove(lab.host.sysdir("nvme0n1") + "/queue/wbt_lat_usec")
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "wbt_lat_usec": 2000, "nomerges": 2}])
    assert "/sys/block/nvme0n1/queue/wbt_lat_usec does not exist" in exc.value.msg and "6.12.118" in exc.value.msg
    assert lab.sim.writes == []


def test_a_queue_file_that_cannot_be_read_is_named(lab, monkeypatch):
    real_read = lab.sim.read

    def read(path, default=None):
        if path.endswith("nvme0n1/queue/nomerges"):
            raise KernelFileError(path, None, errno.EINVAL, action="read")
        return real_read(path, default)
    monkeypatch.setattr(lab.sim, "read", read)
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "nomerges": 2}])
    assert "cannot be read (EINVAL)" in exc.value.msg and lab.sim.writes == []


# -- failures, check mode, persistence -------------------------------------------------------

def test_a_kernel_refusal_mid_plan_restores_scheduler_then_depth(lab):
    q = lab.q["nvme0n1"]
    q.write_nr_requests("64")
    q.render()
    lab.q["nvme1n1"].refuse["read_ahead_kb"] = errno.EBUSY
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline", "nr_requests": 2048, "wbt_lat_usec": 5000},
                 {"device": "lab-nvme-b", "read_ahead_kb": 4096}])
    msg = exc.value.msg
    assert "nvme1n1/queue/read_ahead_kb" in msg and "EBUSY" in msg and "restored" in msg
    assert set(exc.value.restored) >= {"/sys/block/nvme0n1/queue/scheduler", "/sys/block/nvme0n1/queue/nr_requests"}
    # Back where it was: the old elevator, then the old depth (the elevator switch had reset it to 1023).
    assert q.elevator == "none" and q.nr_requests == 64 and q.wbt_show() == 2000
    assert lab.etc() == []
    writes = lab.attrs_written()
    assert writes.index(("nvme0n1", "scheduler", "none")) < writes.index(("nvme0n1", "nr_requests", "64"))


def test_a_refused_scheduler_write_leaves_the_disk_as_it_was(lab):
    lab.q["nvme0n1"].refuse["scheduler"] = errno.ENOMEM
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline", "nr_requests": 2048}])
    assert "ENOMEM" in exc.value.msg and lab.q["nvme0n1"].nr_requests == 1023 and lab.etc() == []


def test_check_mode_writes_nothing_and_shows_the_plan(lab):
    result, _w = lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline", "nr_requests": 1023}], check_mode=True)
    assert result["changed"] and lab.sim.writes == [] and lab.etc() == []
    # nr_requests already reads 1023 but is planned: the switch would reset it.
    assert result["diff"]["after"]["nvme0n1"] == {"scheduler": "mq-deadline", "nr_requests": 1023}
    assert result["devices"][0]["held"]["scheduler"] == "none"
    assert result["devices"][0]["warnings"] == []


def test_rule_per_disk_keyed_by_identity_in_kernel_order(lab):
    result, _w = lab.run([{"device": "lab-nvme-a", "read_ahead_kb": 1024, "nr_requests": 2048, "scheduler": "mq-deadline",
                           "wbt_lat_usec": -1, "iostats": False},
                          {"device": "vdb", "scheduler": "kyber"}])
    nvme_rule, virtio_rule = result["persisted_to"]
    assert nvme_rule == ("/etc/udev/rules.d/91-aiinfra-blk-queue-wwn_nvme.1b36-6c61622d6e766d652d61-"
                         "51454d55204e564d65204374726c-00000001.rules")
    assert virtio_rule == "/etc/udev/rules.d/91-aiinfra-blk-queue-virtio-serial_lab-virtio-data.rules"
    text = open(lab.sim.path(nvme_rule)).read()
    lines = text.splitlines()
    assert "Managed by Ansible (aiinfra.io_isolation)" in lines[0] and len(lines) == 3
    assert lines[2] == ('ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
                        'ATTRS{wwid}=="nvme.1b36-6c61622d6e766d652d61-51454d55204e564d65204374726c-00000001", '
                        'ATTR{queue/scheduler}="mq-deadline", ATTR{queue/nr_requests}="2048", '
                        'ATTR{queue/wbt_lat_usec}="-1", ATTR{queue/read_ahead_kb}="1024", ATTR{queue/iostats}="0"')
    assert "259:" not in text and "nvme0n1" not in text
    assert 'ATTR{serial}=="lab-virtio-data", ATTR{queue/scheduler}="kyber"' in open(lab.sim.path(virtio_rule)).read()
    assert oct(os.stat(lab.sim.path(nvme_rule)).st_mode & 0o777) == "0o644"


def test_the_rule_reads_the_same_on_renumbered_hardware(tmp_path):
    entries = [{"device": "lab-nvme-a", "scheduler": "mq-deadline"}, {"device": "lab-virtio-data", "nr_requests": 128}]
    first = Lab(tmp_path / "boot1")
    result, _w = first.run(entries)
    # Next boot: controllers in reverse order, a spare virtio disk in front of the data disk.
    h = FakeHost(tmp_path / "boot2", kernel=RELEASE["6.12"])
    h.add_virtio(name="vda", majmin="254:0", serial="lab-root", hw_queues=2)
    h.add_virtio(name="vdb", majmin="254:16", serial="lab-virtio-spare", hw_queues=2)
    h.add_virtio(name="vdc", majmin="254:32", serial="lab-virtio-data", hw_queues=2)
    h.add_nvme(ctrl=0, serial="lab-nvme-b", majmin="259:0")
    h.add_nvme(ctrl=1, serial="lab-nvme-a", majmin="259:1")
    shutil.copytree(os.path.join(first.host.root, "etc"), os.path.join(h.root, "etc"))
    second = Lab.__new__(Lab)
    second.host, second.sim = h, SimKernel(h.root)
    second.q = {"nvme1n1": SimQueue(second.sim, h, "nvme1n1", scheduler="mq-deadline",
                                    available=("none", "mq-deadline")),
                "vdc": SimQueue(second.sim, h, "vdc", nr_tags=256)}
    second.q["vdc"].write_nr_requests("128")
    second.q["vdc"].render()
    again, _w = second.run(entries)
    assert again["changed"] is False and second.sim.writes == []
    assert again["persisted_to"] == result["persisted_to"]
    assert [d["device"]["name"] for d in again["devices"]] == ["nvme1n1", "vdc"]


def test_persist_false_writes_no_rule_and_names_an_existing_one(lab):
    lab.run([{"device": "lab-nvme-a", "nomerges": 1}])
    result, warnings = lab.run([{"device": "lab-nvme-a", "nomerges": 2}], persist=False)
    assert result["persisted_to"] == [] and result["devices"][0]["persisted_to"] is None
    assert any("persist=false" in w and "re-applies its own values" in w for w in warnings)
    assert 'ATTR{queue/nomerges}="1"' in open(lab.etc()[0]).read()


def test_a_rule_file_we_did_not_write_is_not_overwritten(lab):
    path = bq.rule_path(DeviceResolver(lab.sim).resolve("lab-nvme-a"))
    lab.host.write(path, 'ACTION=="add", ATTR{queue/scheduler}="bfq"')
    with pytest.raises(ReconcileError) as exc:
        lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline"}])
    assert "not managed by aiinfra.io_isolation" in exc.value.msg and lab.sim.writes == []
    lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline"}], adopt=True)
    assert "mq-deadline" in lab.host.read(path)


def test_a_disk_without_stable_identity_cannot_be_persisted(tmp_path):
    h = FakeHost(tmp_path)
    h.add_loop(backing_file="/srv/scratch.img")
    sim = SimKernel(h.root)
    SimQueue(sim, h, "loop0", nr_tags=128)
    with pytest.raises(ReconcileError) as exc:
        bq_run(sim, [{"device": "loop0", "nomerges": 2}])
    assert "loop0 has no stable identity" in exc.value.msg and "persist=false" in exc.value.msg
    assert sim.writes == []
    result, _w = bq_run(sim, [{"device": "loop0", "nomerges": 2}], persist=False)
    assert result["devices"][0]["held"]["nomerges"] == 2 and result["persisted_to"] == []


def bq_run(sim, entries, **params):
    params = dict({"state": "present", "persist": True, "adopt": False, "devices": entries}, **params)
    wanted = bq.requests(params)
    records = bq.resolve(DeviceResolver(sim), [s for s, _a in wanted])
    settings, errors, plans = bq.build(sim, list(zip(records, [a for _s, a in wanted])), params, page=4096)
    return bq.results(plans, Reconciler(sim).run(settings, errors), params, False)


def test_absent_removes_the_rule_and_leaves_live_values(lab):
    lab.run([{"device": "lab-nvme-a", "scheduler": "mq-deadline", "nomerges": 2}])
    lab.sim.writes[:] = []
    result, warnings = lab.run([{"device": "lab-nvme-a"}, {"device": "lab-nvme-b"}], state="absent")
    assert lab.sim.writes == [] and lab.etc() == []
    assert result["changed"] and result["devices"][0]["removed"].startswith(ETC_RULES_DIR)
    assert result["devices"][1]["removed"] is None and result["devices"][1]["changed"] is False
    assert result["devices"][0]["held"]["scheduler"] == "mq-deadline" and lab.q["nvme0n1"].elevator == "mq-deadline"
    assert any("live values stay as they are" in w and "scheduler=mq-deadline" in w for w in warnings)
    assert lab.run([{"device": "lab-nvme-a"}], state="absent")[0]["changed"] is False


# -- requests and device selection --------------------------------------------------------------

@pytest.mark.parametrize("params, words", [
    ({"device": "nvme0n1", "io_poll": 1}, ["io_poll:", "nvme_queues", "EINVAL"]),
    ({"device": "nvme0n1", "io_poll_delay": 0}, ["io_poll_delay:", "removed in 6.4", "nvme_queues"]),
    ({"device": "nvme0n1", "cpu_list": "0"}, ["cpu_list:", "read-only", "nvme_queues"]),
    ({"devices": [{"device": "nvme0n1", "cpu_list": [0, 1], "nomerges": 1}]},
     ["devices[0] (nvme0n1): cpu_list:", "nvme_queues"]),
    ({"device": "nvme0n1"}, ["no queue attribute to set"]),
    ({"devices": []}, ["give device, or devices"]),
    ({"device": "nvme0n1", "state": "absent", "scheduler": "none"}, ["takes no queue attributes (got scheduler)"]),
])
def test_request_problems_are_all_reported_before_anything_is_read(params, words):
    with pytest.raises(bq.BlkQueueError) as exc:
        bq.requests(dict({"state": "present"}, **params))
    assert all(w in exc.value.msg for w in words), exc.value.msg
    assert "nothing was changed" in exc.value.msg


def test_top_level_attributes_are_defaults_for_each_entry():
    out = bq.requests({"state": "present", "read_ahead_kb": 4096, "scheduler": "none",
                       "devices": [{"device": "a", "scheduler": "bfq"}, {"device": "b", "nr_requests": None}]})
    assert out == [("a", {"read_ahead_kb": 4096, "scheduler": "bfq"}), ("b", {"read_ahead_kb": 4096, "scheduler": "none"})]


@pytest.mark.parametrize("selector, words", [
    ("vda1", ["'vda1' is a partition of vda (254:0)", "use vda"]),
    ("nvme0n1; rm -rf /", ["No block device matches 'nvme0n1; rm -rf /'"]),
    ("$(reboot)", ["No block device matches '$(reboot)'"]),
    ("`id`", ["No block device matches '`id`'"]),
    ("nvme0n1 && reboot", ["No block device matches"]),
])
def test_selectors_that_are_not_one_whole_disk_are_refused(lab, selector, words):
    with pytest.raises(DeviceError) as exc:
        lab.run([{"device": selector, "nomerges": 2}])
    assert all(w in exc.value.message for w in words), exc.value.message
    assert lab.sim.writes == [] and lab.etc() == []


def test_all_selector_failures_and_duplicates_come_in_one_message(lab):
    with pytest.raises(DeviceError) as exc:
        lab.run([{"device": "nvme0n1", "nomerges": 1}, {"device": "lab-nvme-a", "nomerges": 2},
                 {"device": "vda1", "nomerges": 2}])
    assert exc.value.reason == "several" and "2 of 3 device selectors failed" in exc.value.message
    assert "both resolve to nvme0n1" in exc.value.message and "partition of vda" in exc.value.message


# -- property: whatever the kernel held, a run converges and the next run writes nothing ------

@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel=st.sampled_from(["6.1", "6.12"]),
       start_sched=st.sampled_from(["none", "mq-deadline", "bfq"]),
       start_wbt=st.sampled_from([None, 0, 3000]),
       iocost=st.booleans(),
       sched=st.sampled_from([None, "none", "mq-deadline", "kyber", "bfq"]),
       nr=st.one_of(st.none(), st.integers(1, 1023)),
       wbt=st.one_of(st.none(), st.sampled_from([-1, 0, 2000, 4000])),
       ra=st.one_of(st.none(), st.integers(0, 9000)))
def test_any_start_converges_in_one_run(kernel, start_sched, start_wbt, iocost, sched, nr, wbt, ra):
    root = tempfile.mkdtemp()
    try:
        lab = Lab(root, kernel=kernel)
        q = lab.q["nvme0n1"]
        q.write_scheduler(start_sched)
        if start_wbt is not None:
            q.write_wbt_lat_usec(str(start_wbt))
        if iocost:
            lab.iocost("nvme0n1", "259:0")
        q.render()
        entry = dict((k, v) for k, v in (("scheduler", sched), ("nr_requests", nr), ("wbt_lat_usec", wbt),
                                         ("read_ahead_kb", ra)) if v is not None)
        if not entry:
            return
        entry["device"] = "lab-nvme-a"
        lab.run([entry])
        lab.sim.writes[:] = []
        again, _w = lab.run([entry])
        assert again["changed"] is False and lab.sim.writes == [], (entry, again["diff"])
        held = again["devices"][0]["held"]
        if nr is not None:
            assert held["nr_requests"] == max(nr, 4)
        if sched is not None:
            assert held["scheduler"] == sched
        if wbt not in (None, -1, 2000):
            assert held["wbt_lat_usec"] == wbt
    finally:
        shutil.rmtree(root)


# ---------------------------------------------------------------------------------------------
# The queue-attribute catalogue: one entry per option, its value rules the codec's
# ---------------------------------------------------------------------------------------------

def test_the_catalogue_is_the_kernel_write_order_and_the_argument_spec():
    assert bq.ATTRIBUTES == ("scheduler", "nr_requests", "wbt_lat_usec", "max_sectors_kb", "read_ahead_kb",
                             "rq_affinity", "nomerges", "iostats", "add_random")
    assert [bq.SETTABLE[a].order for a in bq.ATTRIBUTES] == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert [a.name for a in bq.REFUSED] == ["io_poll", "io_poll_delay", "cpu_list"]
    assert sorted(a for a in bq.ATTRIBUTES if bq.SETTABLE[a].mq_only) == [
        "nr_requests", "rq_affinity", "scheduler", "wbt_lat_usec"]
    spec = bq.argument_spec({})
    assert spec["scheduler"] == {"type": "str"} and spec["nr_requests"] == {"type": "int"}
    assert spec["rq_affinity"] == spec["nomerges"] == {"type": "int", "choices": [0, 1, 2]}
    assert spec["iostats"] == spec["add_random"] == {"type": "bool"}
    assert spec["io_poll"] == spec["cpu_list"] == {"type": "raw"}
    assert spec["devices"]["options"]["wbt_lat_usec"] == {"type": "int"}


def test_settings_take_their_value_rules_from_the_codecs(tmp_path):
    lab = Lab(str(tmp_path))
    record = DeviceResolver(lab.sim).resolve("nvme0n1")
    ctx = bq.QueueContext(lab.sim, record, RELEASE["6.12"], 4096)
    for attr in bq.ATTRIBUTES:
        assert bq.SETTABLE[attr].codec is bq.codecs.QUEUE_ATTRIBUTES[attr]
    nr = bq.make_setting(ctx, "nr_requests", 1)
    assert nr.desired == bq.SETTABLE["nr_requests"].codec.floor == 4 and "BLKDEV_MIN_RQ" in nr.notes[0]
    wbt = bq.make_setting(ctx, "wbt_lat_usec", -1)
    assert wbt.desired is None and wbt.format(None) == "-1" and wbt.report(None) == -1
    assert bq.make_setting(ctx, "max_sectors_kb", 0).problems == ["nvme0n1: max_sectors_kb: 0 is below 1"]
    assert bq.make_setting(ctx, "read_ahead_kb", 2 ** 32).problems == [
        "nvme0n1: read_ahead_kb: 4294967296 is above 4294967295"]
    stats = bq.make_setting(ctx, "iostats", True)
    assert stats.desired == 1 and stats.report(0) is False
    assert bq.held(ctx)["iostats"] in (True, False) and isinstance(bq.held(ctx)["scheduler"], str)
