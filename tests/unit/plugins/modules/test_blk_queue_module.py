# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""blk_queue through AnsibleModule against a fake host whose queue files behave like the kernel's."""

import errno
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.aiinfra.io_isolation.plugins.modules import blk_queue
from sim.blk_queue import queue_host

NVME_A_RULE = ("/etc/udev/rules.d/91-aiinfra-blk-queue-wwn_nvme.1b36-6c61622d6e766d652d61-"
               "51454d55204e564d65204374726c-00000001.rules")
VIRTIO_RULE = "/etc/udev/rules.d/91-aiinfra-blk-queue-virtio-serial_lab-virtio-data.rules"


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    h = queue_host(tmp_path)
    sim = h.sim
    monkeypatch.setattr(blk_queue, "KernelFS", lambda: sim)
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    h.warnings = warnings
    h.run = lambda **args: run_module(blk_queue.main, **args)
    return h


def etc_files(host):
    out = []
    for dirpath, _dirs, files in os.walk(os.path.join(host.root, "etc")):
        out.extend(os.path.join(dirpath, f) for f in files)
    return sorted(out)


def kernel_state(host):
    return dict((n, (q.elevator, q.nr_requests, q.wbt_show(), dict(q.values))) for n, q in host.q.items())


DEVICES = [
    {"device": "lab-nvme-a", "scheduler": "mq-deadline", "nr_requests": 2048, "rq_affinity": 2},
    {"device": "/dev/disk/by-id/virtio-lab-virtio-data", "scheduler": "kyber", "nr_requests": 512, "iostats": False},
]


def test_several_disks_in_one_call_with_shared_defaults(lab):
    result = lab.run(devices=DEVICES, read_ahead_kb=4096)
    assert not result.get("failed"), result
    assert result["changed"] and result["persisted_to"] == [NVME_A_RULE, VIRTIO_RULE]
    a, data = result["devices"]
    assert a["device"]["name"] == "nvme0n1" and data["device"]["serial"] == "lab-virtio-data"
    assert a["held"] == {"scheduler": "mq-deadline", "nr_requests": 2048, "wbt_lat_usec": 2000, "max_sectors_kb": 512,
                         "read_ahead_kb": 4096, "rq_affinity": 2, "nomerges": 0, "iostats": True,
                         "add_random": False}
    assert data["held"]["scheduler"] == "kyber" and data["held"]["iostats"] is False
    assert data["held"]["read_ahead_kb"] == 4096 and a["persisted_to"] == NVME_A_RULE
    assert lab.q["vdb"].loaded == ["kyber"]
    assert result["diff"]["before"]["nvme0n1"]["scheduler"] == "none"
    assert result["diff"]["after"]["vdb"] == {"scheduler": "kyber", "nr_requests": 512, "read_ahead_kb": 4096,
                                              "iostats": False}
    assert result["diff"]["before"][VIRTIO_RULE] is None and "kyber" in result["diff"]["after"][VIRTIO_RULE]
    lab.sim.writes[:] = []
    again = lab.run(devices=DEVICES, read_ahead_kb=4096)
    assert again["changed"] is False and lab.sim.writes == [] and again["diff"] == {"before": {}, "after": {}}


def test_single_device_form_and_warnings(lab):
    result = lab.run(device="259:1", nr_requests=2, read_ahead_kb=130, add_random=False, persist=False)
    assert result["changed"] and result["persisted_to"] == [] and etc_files(lab) == []
    assert result["devices"][0]["held"]["nr_requests"] == 4 and result["devices"][0]["held"]["read_ahead_kb"] == 128
    assert any("BLKDEV_MIN_RQ" in w for w in lab.warnings) and any("pages" in w for w in lab.warnings)
    assert result["devices"][0]["warnings"] == lab.warnings


def test_check_mode_writes_nothing_anywhere(lab):
    before = kernel_state(lab)
    result = lab.run(devices=DEVICES, _ansible_check_mode=True)
    assert result["changed"] and lab.sim.writes == [] and etc_files(lab) == []
    assert kernel_state(lab) == before and result["devices"][0]["held"]["scheduler"] == "none"
    assert result["diff"]["after"]["nvme0n1"]["nr_requests"] == 2048
    assert result["persisted_to"] == [NVME_A_RULE, VIRTIO_RULE]


def test_absent_removes_the_rules_and_reports_the_live_values(lab):
    lab.run(devices=DEVICES)
    result = lab.run(devices=[{"device": "lab-nvme-a"}, {"device": "lab-virtio-data"}], state="absent")
    assert result["changed"] and etc_files(lab) == [] and result["persisted_to"] == []
    assert [d["removed"] for d in result["devices"]] == [NVME_A_RULE, VIRTIO_RULE]
    assert result["devices"][0]["held"]["scheduler"] == "mq-deadline"     # left as it is until the next boot
    assert any("live values stay as they are" in w for w in lab.warnings)
    assert result["diff"]["after"] == {NVME_A_RULE: None, VIRTIO_RULE: None}
    assert lab.run(device="lab-nvme-a", state="absent")["changed"] is False


def test_a_kernel_refusal_restores_and_fails_cleanly(lab):
    lab.q["vdb"].refuse["iostats"] = errno.EIO
    before = kernel_state(lab)
    result = lab.run(devices=DEVICES)
    assert result["failed"] and "iostats" in result["msg"] and "EIO" in result["msg"] and "restored" in result["msg"]
    assert result["failed_setting"] == "/sys/block/vdb/queue/iostats"
    assert kernel_state(lab) == before and etc_files(lab) == []
    assert result["kernel_error"]["errno"] == "EIO"


@pytest.mark.parametrize("args, words", [
    ({"device": "lab-nvme-a", "io_poll": 1}, ["io_poll:", "aiinfra.io_isolation.nvme_queues"]),
    ({"device": "lab-nvme-a", "io_poll_delay": 0}, ["io_poll_delay:", "aiinfra.io_isolation.nvme_queues"]),
    ({"device": "lab-nvme-a", "cpu_list": "0-1"}, ["cpu_list:", "read-only", "aiinfra.io_isolation.nvme_queues"]),
    ({"devices": [{"device": "lab-nvme-a", "io_poll": True, "nomerges": 2}]},
     ["devices[0] (lab-nvme-a): io_poll:", "nvme_queues"]),
    ({"device": "lab-nvme-a", "scheduler": "foo"}, ["'foo' is not an I/O scheduler", "lists none, mq-deadline",
                                                    "loadable as modules: bfq, kyber"]),
    ({"device": "lab-nvme-a", "nr_requests": 100000}, ["100000 is above", "at most 1023", "nr_tags"]),
    ({"device": "lab-nvme-a", "scheduler": "mq-deadline", "nr_requests": 100000}, ["at most 2048"]),
    ({"device": "nvme0n1; rm -rf /", "nomerges": 2}, ["No block device matches 'nvme0n1; rm -rf /'"]),
    ({"device": "$(reboot)", "nomerges": 2}, ["$(reboot)"]),
    ({"device": "lab-nvme-a | sh", "nomerges": 2}, ["'lab-nvme-a | sh'"]),
    ({"device": "vda1", "nomerges": 2}, ["partition of vda", "use vda"]),
    ({"device": "nvme9n9", "nomerges": 2}, ["nvme9n9"]),
    ({"device": "lab-nvme-a", "rq_affinity": 3}, ["rq_affinity", "0, 1, 2"]),
    ({"device": "lab-nvme-a", "max_sectors_kb": 1024}, ["max_hw_sectors_kb (512)"]),
    ({"device": "lab-nvme-a", "wbt_lat_usec": -5}, ["below -1"]),
    ({"device": "lab-nvme-a"}, ["no queue attribute"]),
    ({"device": "lab-nvme-a", "state": "absent", "scheduler": "none"}, ["takes no queue attributes"]),
    ({"device": "lab-nvme-a", "devices": [{"device": "lab-nvme-b", "nomerges": 1}], "nomerges": 1},
     ["mutually exclusive"]),
    ({"nomerges": 1}, ["one of the following is required: device, devices"]),
])
def test_bad_input_is_refused_before_any_write(lab, args, words):
    before = kernel_state(lab)
    result = lab.run(**args)
    assert result["failed"] and all(w in result["msg"] for w in words), result["msg"]
    assert lab.sim.writes == [] and etc_files(lab) == [] and kernel_state(lab) == before
