# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cgroup name validation and mapping to cgroupfs directories."""

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._cgroups import (
    CgroupNameError, resolve, slice_path, validate_unit_name,
)


@pytest.mark.parametrize("name, path", [
    ("inference.slice", "/sys/fs/cgroup/inference.slice"),
    ("ai-inference.slice", "/sys/fs/cgroup/ai.slice/ai-inference.slice"),
    ("a-b-c.slice", "/sys/fs/cgroup/a.slice/a-b.slice/a-b-c.slice"),
    ("-.slice", "/sys/fs/cgroup"),
    ("vllm.service", "/sys/fs/cgroup/system.slice/vllm.service"),
    ("run-u12.scope", "/sys/fs/cgroup/system.slice/run-u12.scope"),
    ("system.slice/docker-abc.scope", "/sys/fs/cgroup/system.slice/docker-abc.scope"),
    ("/sys/fs/cgroup/workloads/inference", "/sys/fs/cgroup/workloads/inference"),
    ("/sys/fs/cgroup", "/sys/fs/cgroup"),
    ("workloads/./train/", "/sys/fs/cgroup/workloads/train"),
])
def test_resolve(name, path):
    assert resolve(name) == path


@pytest.mark.parametrize("name, words", [
    ("", "empty"),
    ("../etc", "'..'"),
    ("workloads/../../etc", "'..'"),
    ("/etc/passwd", "outside /sys/fs/cgroup"),
    ("-bad.slice", "dashes"),
    ("bad-.slice", "dashes"),
    ("a--b.slice", "dashes"),
    ("x@1.slice", "template"),
    ("sp ace.service", "characters"),
    ("w/cgroup.procs", "not a valid group name"),
])
def test_resolve_rejects(name, words):
    with pytest.raises(CgroupNameError, match=words.replace(".", r"\.").replace("(", r"\(")):
        resolve(name)


def test_unit_name_rules():
    assert validate_unit_name("inference.slice") == []
    assert validate_unit_name("x" * 250 + ".slice")
    assert slice_path("inference.slice") == "inference.slice"
