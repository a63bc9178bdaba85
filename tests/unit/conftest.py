# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make the collection importable as ansible_collections.aiinfra.io_isolation for plain pytest.

ansible-test does this with its own tree; for `pytest tests/unit` we point a symlink tree in
.cache/ at the repository so the modules' absolute imports work unchanged.
"""
import os
import sys

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
sys.path.insert(0, HERE)
