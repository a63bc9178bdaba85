# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Import a benchmark's script by path under a name of its own (isolation_bench, rollout_bench, ...).

Every benchmark has a bench.py (and some a guest.py); imported by their plain names from sys.path,
whichever test ran first would decide which one `bench` is for all the others.
"""

import importlib.util
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "benchmarks")


def load(benchmark, name, subdir=""):
    key = "%s_%s" % (benchmark, name)
    if key in sys.modules:
        return sys.modules[key]
    directory = os.path.normpath(os.path.join(BENCHMARKS, benchmark, subdir))
    # The script's own sibling imports (isolation's report, the shared labvm) resolve from here.
    for path in (directory, os.path.normpath(os.path.join(BENCHMARKS, benchmark))):
        if path not in sys.path:
            sys.path.insert(0, path)
    spec = importlib.util.spec_from_file_location(key, os.path.join(directory, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module
