# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab guests' bytecode cache for code Python imports from zip files.

Installed into the lab images only (guest-setup.sh, loaded by a .pth file at interpreter start).
Ansible sends every module as a zip (AnsiballZ) and zipimport compiles its sources on every run,
never caching bytecode. Under TCG compiling ansible.module_utils.basic and what it imports is
about 3 s of a 3.5 s ping (python -X importtime, issue 20), paid by every task of the suite.
This keeps the compiled code per source: the key is the interpreter's cache tag, the path inside
the zip and the source itself, so changed code is compiled afresh, and the cached object is what
compile() returned for that source. Anything unexpected falls back to compiling.
"""
import marshal
import os
import sys
import zipimport

CACHE_DIR = "/var/cache/aiinfra-lab-codecache"


def install():
    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None or getattr(compile_source, "lab_codecache", False):
        return

    def cached_compile_source(pathname, source):
        try:
            import hashlib  # only when zipimport compiles: a plain python3 start stays as cheap
            inner = pathname.replace(os.sep, "/").rsplit(".zip/", 1)[-1]
            key = hashlib.sha256(b"\0".join([sys.implementation.cache_tag.encode(), inner.encode(),
                                             source])).hexdigest()
            path = os.path.join(CACHE_DIR, key)
            try:
                with open(path, "rb") as f:
                    return marshal.load(f)
            except (OSError, EOFError, ValueError, TypeError):
                pass
            code = compile_source(pathname, source)
            os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
            tmp = "%s.%d.tmp" % (path, os.getpid())
            with open(tmp, "wb") as f:
                marshal.dump(code, f)
            os.replace(tmp, path)
            return code
        except Exception:  # pylint: disable=broad-except  # a cache must never break an import
            return compile_source(pathname, source)

    cached_compile_source.lab_codecache = True
    zipimport._compile_source = cached_compile_source  # pylint: disable=protected-access


install()
