# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make the collection importable as ansible_collections.aiinfra.io_isolation for plain pytest.

ansible-test does this with its own tree; for `pytest tests/unit` we point a symlink tree in
.cache/ at the repository so the modules' absolute imports work unchanged.
"""
import os
import sys

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _collection_root():
    # Already inside ansible_collections/aiinfra/io_isolation (ansible-test, installed tree)?
    parts = REPO.split(os.sep)
    if len(parts) >= 3 and parts[-3:-1] == ["ansible_collections", "aiinfra"]:
        return os.sep.join(parts[:-3])
    tree = os.path.join(REPO, ".cache", "collections")
    link = os.path.join(tree, "ansible_collections", "aiinfra", "io_isolation")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(REPO, link)
        except FileExistsError:
            pass
    return tree


sys.path.insert(0, _collection_root())
sys.path.insert(0, HERE)     # the simulated host: the package sim (tests/unit/sim)


class ModuleDone(Exception):
    """Raised instead of exit_json/fail_json; args[0] is the result (failed=True on fail_json)."""


@pytest.fixture
def run_module(monkeypatch):
    """run_module(main, **args) -> the module's result dict, as set_module_args-style tests do."""
    def exit_json(self, **kw):
        raise ModuleDone(kw)

    def fail_json(self, **kw):
        kw["failed"] = True
        raise ModuleDone(kw)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def run(main, **args):
        with patch_module_args(args):
            with pytest.raises(ModuleDone) as exc:
                main()
        return exc.value.args[0]
    return run
