# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _controller_files


def test_replace_writes_whole_files_and_leaves_an_identical_one(tmp_path):
    path = str(tmp_path / "report.html")
    assert _controller_files.replace(path, b"one") is True
    assert open(path, "rb").read() == b"one" and os.stat(path).st_mode & 0o777 == 0o644
    os.utime(path, (1, 1))
    assert _controller_files.replace(path, b"one", only_if_changed=True) is False
    assert os.stat(path).st_mtime == 1
    assert _controller_files.replace(path, b"two", only_if_changed=True) is True
    assert open(path, "rb").read() == b"two"
    assert sorted(os.listdir(str(tmp_path))) == ["report.html"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = str(tmp_path / "report.json")
    _controller_files.replace(path, b"old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        _controller_files.replace(path, b"new")
    assert open(path, "rb").read() == b"old"
    assert sorted(os.listdir(str(tmp_path))) == ["report.json"]
