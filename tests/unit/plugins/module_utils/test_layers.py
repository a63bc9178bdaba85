# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The module_utils packages are layers: each imports only itself and the layers before it in LAYERS, so a module
ships only the code of the layers it uses (AnsiballZ packs every file a module imports, transitively)."""
import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
MODULES = os.path.join(REPO, "plugins", "modules")
PREFIX = "ansible_collections.aiinfra.io_isolation.plugins.module_utils"

# the boot helpers run alone on hosts; the engine knows the errors of the layers above only by their bases
LAYERS = ("_boot", "_engine", "_host", "_observability", "_concerns", "_calibration")


def imported(path):
    """The module_utils files (relative to module_utils) that the file at ``path`` imports."""
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(PREFIX + "."):
            package = node.module[len(PREFIX):].lstrip(".").replace(".", "/")
            if os.path.isfile(os.path.join(MODULE_UTILS, package + ".py")):
                out.add(package + ".py")
            else:
                out.update("%s/%s.py" % (package, a.name) for a in node.names)
    return out


def closure(path):
    seen, todo = set(), sorted(imported(path))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported(os.path.join(MODULE_UTILS, name)))
    return seen


def test_every_file_is_in_a_layer():
    top = sorted(f for f in os.listdir(MODULE_UTILS) if f.endswith(".py") and f != "__init__.py")
    assert top == []
    assert sorted(d for d in os.listdir(MODULE_UTILS) if os.path.isdir(os.path.join(MODULE_UTILS, d))
                  and d != "__pycache__") == sorted(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_before_it(layer):
    allowed = LAYERS[:LAYERS.index(layer) + 1]
    wrong = []
    for name in sorted(os.listdir(os.path.join(MODULE_UTILS, layer))):
        if name.endswith(".py"):
            wrong += ["%s/%s imports %s" % (layer, name, dep)
                      for dep in sorted(imported(os.path.join(MODULE_UTILS, layer, name))) if dep.split("/")[0] not in allowed]
    assert wrong == []


def test_the_boot_helpers_import_nothing_of_the_collection():
    for name in os.listdir(os.path.join(MODULE_UTILS, "_boot")):
        if name.endswith(".py"):
            assert imported(os.path.join(MODULE_UTILS, "_boot", name)) == set(), name


def test_a_module_ships_only_what_it_uses():
    """The sysctl module (and host_profile's engine) no longer carry the device resolver or the codecs' users they
    do not need: the engine reports the host's errors by their bases."""
    sysctl = closure(os.path.join(MODULES, "sysctl.py"))
    assert "_host/devices.py" not in sysctl and "_concerns/cgroup.py" not in sysctl
    assert closure(os.path.join(MODULE_UTILS, "_engine", "reconcile.py")) == set()
    assert "_host/devices.py" in closure(os.path.join(MODULES, "iocost.py"))
