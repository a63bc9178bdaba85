# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel file accessor: one write() per line, errno mapping, atomic config writes, root seam."""

import errno
import os

import pytest

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import kernelfs as _kernelfs
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS, KernelFileError


@pytest.fixture
def fs(tmp_path):
    (tmp_path / "sys").mkdir()
    return KernelFS(str(tmp_path))


def test_write_uses_exactly_one_write_per_line(fs, tmp_path, monkeypatch):
    target = tmp_path / "sys" / "io.cost.qos"
    target.write_text("")
    calls = []
    real_write = os.write

    def counting_write(fd, data):
        calls.append(data)
        return real_write(fd, data)
    monkeypatch.setattr(_kernelfs.os, "write", counting_write)
    fs.write_lines("/sys/io.cost.qos", ["259:0 enable=1", "254:0 enable=0\n"])
    assert calls == [b"259:0 enable=1\n", b"254:0 enable=0\n"]


def test_short_write_is_an_error(fs, tmp_path, monkeypatch):
    (tmp_path / "sys" / "f").write_text("")
    monkeypatch.setattr(_kernelfs.os, "write", lambda fd, data: len(data) - 1)
    with pytest.raises(KernelFileError) as exc:
        fs.write("/sys/f", "12345")
    assert exc.value.errname == "EIO"


@pytest.mark.parametrize("err, words", [
    (errno.EINVAL, "format or range"),
    (errno.ENODEV, "whole disk"),
    (errno.EOPNOTSUPP, "enable iocost"),
    (errno.ERANGE, "use 'max'"),
    (errno.EACCES, "become"),
    (errno.ENOENT, "does not exist"),
    (errno.EBUSY, "busy"),
])
def test_errno_messages_name_file_value_and_fix(fs, tmp_path, monkeypatch, err, words):
    (tmp_path / "sys" / "io.max").write_text("")

    def refuse(fd, data):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(_kernelfs.os, "write", refuse)
    with pytest.raises(KernelFileError) as exc:
        fs.write("/sys/io.max", "259:0 rbps=0")
    msg = exc.value.message
    assert "/sys/io.max" in msg and "'259:0 rbps=0'" in msg and errno.errorcode[err] in msg and words in msg
    assert exc.value.as_dict()["errno"] == errno.errorcode[err]


def test_write_to_missing_file_maps_enoent(fs):
    with pytest.raises(KernelFileError) as exc:
        fs.write("/sys/fs/cgroup/x/io.weight", "default 100")
    assert exc.value.errname == "ENOENT"


def test_read_missing_returns_default_and_strips_one_newline(fs, tmp_path):
    assert fs.read("/sys/nope") is None
    assert fs.read("/sys/nope", "") == ""
    (tmp_path / "sys" / "f").write_text("a b \n")
    assert fs.read("/sys/f") == "a b "
    assert fs.read_bytes("/sys/f") == b"a b \n"
    assert fs.read_bytes("/sys/nope") is None
    assert fs.read_attrs("/sys", ["f", "nope"]) == {"f": "a b", "nope": None}


def test_read_permission_error_raises(fs, tmp_path, monkeypatch):
    def deny(*a, **k):
        raise IOError(errno.EACCES, "denied")
    monkeypatch.setattr("builtins.open", deny)
    with pytest.raises(KernelFileError, match="EACCES"):
        fs.read("/sys/f")
    with pytest.raises(KernelFileError, match="EACCES"):
        fs.read_bytes("/sys/f")


def test_atomic_write_replaces_and_sets_mode(fs, tmp_path):
    fs.atomic_write("/etc/sysctl.d/90-x.conf", "a = 1\n", mode=0o600)
    p = tmp_path / "etc" / "sysctl.d" / "90-x.conf"
    assert p.read_text() == "a = 1\n" and (p.stat().st_mode & 0o777) == 0o600
    fs.atomic_write("/etc/sysctl.d/90-x.conf", "a = 2\n")
    assert p.read_text() == "a = 2\n"
    assert [n for n in os.listdir(str(p.parent)) if n.startswith(".")] == []
    fs.remove("/etc/sysctl.d/90-x.conf")
    fs.remove("/etc/sysctl.d/90-x.conf")  # absent is fine
    assert not p.exists()


def synced(monkeypatch):
    """The paths fsync is called on, in order (directories end with '/')."""
    seen = []
    real_fsync = os.fsync

    def fsync(fd):
        path = os.readlink("/proc/self/fd/%d" % fd)
        seen.append(path + ("/" if os.path.isdir(path) else ""))
        return real_fsync(fd)
    monkeypatch.setattr(_kernelfs.os, "fsync", fsync)
    return seen


def test_atomic_write_and_remove_sync_the_directories_they_change(fs, tmp_path, monkeypatch):
    seen = synced(monkeypatch)
    fs.atomic_write("/etc/systemd/system/x.slice.d/50-a.conf", "[Slice]\n")
    d = str(tmp_path / "etc" / "systemd" / "system")
    # the file's data, then its directory (the rename), then the parents of the directories made for it
    assert seen[1:] == [d + "/x.slice.d/", d + "/", str(tmp_path / "etc" / "systemd") + "/", str(tmp_path / "etc") + "/",
                        str(tmp_path) + "/"]
    assert seen[0].startswith(d + "/x.slice.d/.50-a.conf.")
    seen[:] = []
    fs.atomic_write("/etc/systemd/system/x.slice.d/50-a.conf", "[Slice]\nA=1\n")
    assert seen[1:] == [d + "/x.slice.d/"]
    seen[:] = []
    fs.remove("/etc/systemd/system/x.slice.d/50-a.conf")
    fs.remove("/etc/systemd/system/x.slice.d/50-a.conf")      # absent: nothing to sync
    assert seen == [d + "/x.slice.d/"]


def test_a_directory_sync_that_fails_is_an_error_but_one_it_cannot_do_is_not(fs, tmp_path, monkeypatch):
    real_fsync = os.fsync

    def fsync(fd, err):
        if os.path.isdir(os.readlink("/proc/self/fd/%d" % fd)):
            raise OSError(err, os.strerror(err))
        return real_fsync(fd)
    monkeypatch.setattr(_kernelfs.os, "fsync", lambda fd: fsync(fd, errno.EINVAL))
    fs.atomic_write("/etc/x.conf", "data")
    monkeypatch.setattr(_kernelfs.os, "fsync", lambda fd: fsync(fd, errno.EIO))
    with pytest.raises(KernelFileError, match="EIO"):
        fs.atomic_write("/etc/x.conf", "data2")


def test_atomic_write_failure_cleans_temp(fs, tmp_path, monkeypatch):
    monkeypatch.setattr(_kernelfs.os, "rename", lambda src, dst: (x for x in ()).throw(OSError(errno.EXDEV, "x")))
    with pytest.raises(KernelFileError, match="EXDEV"):
        fs.atomic_write("/etc/x.conf", "data")
    assert os.listdir(str(tmp_path / "etc")) == []


def test_atomic_write_unwritable_dir(fs, tmp_path, monkeypatch):
    monkeypatch.setattr(_kernelfs.tempfile, "mkstemp", lambda **k: (x for x in ()).throw(OSError(errno.EROFS, "ro")))
    with pytest.raises(KernelFileError, match="read-only"):
        fs.atomic_write("/etc/x.conf", "data")


def test_remove_and_mkdir_errors(fs, tmp_path):
    (tmp_path / "sys" / "d").mkdir()
    with pytest.raises(KernelFileError):
        fs.remove("/sys/d")
    fs.mkdir("/sys/newdir")
    fs.mkdir("/sys/newdir")  # exists is fine
    with pytest.raises(KernelFileError):
        fs.mkdir("/sys/missing/child")


def test_root_seam_rebases_absolute_links(fs, tmp_path):
    (tmp_path / "sys" / "devices" / "disk").mkdir(parents=True)
    os.symlink("/sys/devices/disk", str(tmp_path / "sys" / "abs"))
    os.symlink("devices/disk", str(tmp_path / "sys" / "rel"))
    assert fs.realpath("/sys/abs") == "/sys/devices/disk"
    assert fs.realpath("/sys/rel") == "/sys/devices/disk"
    assert fs.readlink("/sys/rel") == "devices/disk" and fs.readlink("/sys/none") is None
    # Absolute links are only re-rooted by realpath(); sysfs itself uses relative links.
    assert fs.islink("/sys/rel") and fs.isdir("/sys/rel") and fs.exists("/sys/rel")
    assert fs.listdir("/sys") == ["abs", "devices", "rel"] and fs.listdir("/nope") == []
    assert fs.host_path(str(tmp_path)) == "/" and fs.host_path("/elsewhere") == "/elsewhere"


def test_real_root_paths_are_untouched():
    real = KernelFS("/")
    assert real.path("/sys/block") == "/sys/block" and real.host_path("/x") == "/x"
    assert real.realpath("/") == "/"


def test_is_writable(fs, tmp_path):
    p = tmp_path / "sys" / "ro"
    p.write_text("0")
    p.chmod(0o444)
    assert fs.is_writable("/sys/ro") is False
    p.chmod(0o644)
    assert fs.is_writable("/sys/ro") is True
    assert fs.is_writable("/sys/none") is False
