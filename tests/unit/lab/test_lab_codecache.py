# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/guest-codecache.py: code imported from a zip is compiled once per source, the cached
code is what compile() gives, changed source is compiled afresh, and a broken cache entry falls
back to compiling. Each case runs in a fresh interpreter (the hook patches zipimport)."""

import os
import subprocess
import sys
import textwrap
import zipfile

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab", "guest-codecache.py")

RUN = textwrap.dedent("""
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("codecache", {hook!r})
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook.CACHE_DIR = {cache!r}
    hook.install()
    hook.install()  # a second install does not wrap twice
    sys.path.insert(0, {zip!r})
    import payload.mod as m
    print(m.answer(), m.__file__.endswith("mod.py"))
""")


def _zip(path, answer):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("payload/__init__.py", "")
        z.writestr("payload/mod.py", "def answer():\n    return %d\n" % answer)


def _run(tmp_path, zip_name, answer):
    zpath = str(tmp_path / zip_name)
    _zip(zpath, answer)
    cache = str(tmp_path / "cache")
    code = RUN.format(hook=HOOK, cache=cache, zip=zpath)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split(), sorted(os.listdir(cache)) if os.path.isdir(cache) else []


def test_compiled_once_per_source_whatever_the_zip_is_called(tmp_path):
    out, first = _run(tmp_path, "a.zip", 41)
    assert out == ["41", "True"]
    assert len(first) == 2  # payload/__init__.py and payload/mod.py
    out, second = _run(tmp_path, "other-temp-dir.zip", 41)
    assert out == ["41", "True"] and second == first


def test_changed_source_is_compiled_afresh(tmp_path):
    _run(tmp_path, "a.zip", 41)
    out, entries = _run(tmp_path, "a.zip", 42)
    assert out == ["42", "True"]
    assert len(entries) == 3  # the old mod.py entry stays, a new one for the new source


def test_a_broken_entry_falls_back_to_compiling(tmp_path):
    entries = _run(tmp_path, "a.zip", 41)[1]
    for name in entries:
        (tmp_path / "cache" / name).write_bytes(b"\x00not marshal data")
    out = _run(tmp_path, "a.zip", 41)[0]
    assert out == ["41", "True"]
