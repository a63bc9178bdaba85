# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the roles' planning imports on the controller. ansible-core compiles a collection's Python from source in
every worker (one per task and host), so a planning task that imports codecs.py, placement.py or iocost.py pays
for it on every host (make bench-fleet, benchmarks/fleet/README.md): the planning steps do not."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import codecs

from test_io_isolation_filters import FACTS

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(f.__file__), "..", "..", "..", "..", ".."))
DEFAULTS = os.path.join(os.path.dirname(f.__file__), "..", "..", "roles", "io_baseline", "defaults", "main.yml")

# In a fresh interpreter: the filter file, then the planning steps of one host as the roles call them.
PLAN = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
facts = json.loads(sys.stdin.read())
from ansible_collections.aiinfra.io_isolation.plugins.filter import io_isolation as f
from ansible_collections.aiinfra.io_isolation.plugins.lookup.calibration_db import LookupModule
LookupModule().run([], variables={"playbook_dir": "/pb"}, default_dir=True)
after_default_dir = sorted(m for m in sys.modules if m.startswith("ansible_collections.aiinfra"))
selected = f.select_disks(facts, [], "[?identity.kind=='nvme']")
entry = {"model": "QEMU NVMe Ctrl", "firmware": "9.2.0", "capacity_bytes": 1073741824,
         "iocost_model": {"rbps": 1, "rseqiops": 2, "rrandiops": 3, "wbps": 4, "wseqiops": 5, "wrandiops": 6}}
plan = f.iocost_plan(selected, {}, [entry], {"rpct": 95, "rlat": 5000, "wpct": 95, "wlat": 5000, "min": 50,
                                             "max": 100}, False, 100, "none")
import yaml
with open(sys.argv[2]) as defaults:
    base = yaml.safe_load(defaults)
f.baseline_plan({}, plan, dict((k, base[k]) for k in f.BASELINE_VARS + f.TIER_VARS))
print(json.dumps([after_default_dir, sorted(m for m in sys.modules if m.startswith("ansible_collections.aiinfra"))]))
"""
HEAVY = ("module_utils._host.codecs", "module_utils._concerns.placement", "module_utils._concerns.iocost",
         "module_utils._host.systemd", "module_utils._host.devices", "module_utils._calibration.iocost_calibrate",
         "plugin_utils._awx_survey")


def test_the_planning_steps_import_no_module_code():
    proc = subprocess.run([sys.executable, "-c", PLAN, COLLECTIONS, DEFAULTS], input=json.dumps(FACTS), capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    after_default_dir, loaded = json.loads(proc.stdout)
    # the roles' defaults ask the lookup for its default directory in every worker: no database code for that
    assert [m for m in after_default_dir if "plugin_utils" in m or "module_utils" in m] == []
    assert "ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.unit_names" in loaded
    assert [m for m in loaded if m.endswith(HEAVY)] == []


@pytest.mark.parametrize("value", [0, 1, 1100000000, 2 ** 64 - 1, 2 ** 64, -1, True, False, 5.0, "2GB", "2GiB/s",
                                   "2G", None, "x"])
def test_rate_is_parse_rate(value):
    def outcome(func):
        try:
            return func(value)
        except codecs.CodecError as e:
            return str(e)
    assert outcome(f._rate) == outcome(codecs.parse_rate)  # pylint: disable=protected-access
