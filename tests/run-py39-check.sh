#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Managed hosts run Python 3.9+: everything that runs there must need no more than 3.9. That is
# plugins/modules and plugins/module_utils, which include the boot helpers the modules install on hosts
# (plugins/module_utils/_boot/, installed as their own text: _host/persist.py BootHelper). The controller
# side (filter, lookup, action, plugin_utils) runs on 3.11+ and is not checked.
#   run-py39-check.sh VENV_BIN            check the managed-node code
#   run-py39-check.sh VENV_BIN PATH...    check these files/directories instead
# vermin finds what needs a newer Python except `X | Y` unions, which it detects only with its
# unstable union-types heuristic (that one takes chained flag ORs such as
# `os.O_RDONLY | os.O_EXCL | O_CLOEXEC` for unions); a strict AST pass here checks the places a
# union is evaluated at run time: annotations of functions and of module/class variables (unless
# the file has `from __future__ import annotations`) and isinstance()/issubclass().
set -euo pipefail
BIN=${1:?usage: run-py39-check.sh VENV_BIN [PATH...]}
shift
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"

if [ $# -eq 0 ]; then
  set -- plugins/modules plugins/module_utils
fi

status=0
"$BIN/vermin" --no-config-file --target=3.9- --violations --eval-annotations --no-tips "$@" || status=1

"$BIN/python" - "$@" <<'EOF' || status=1
import ast
import pathlib
import sys


def unions(expr):
    return [n for n in ast.walk(expr) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr)]


found = []
for arg in sys.argv[1:]:
    root = pathlib.Path(arg)
    for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
                   for n in tree.body)
        evaluated = []
        if not lazy:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    evaluated += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                                  if x is not None and x.annotation is not None]
                    evaluated += [node.returns] if node.returns is not None else []
                if isinstance(node, (ast.Module, ast.ClassDef)):  # local variable annotations are never evaluated
                    evaluated += [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") \
                    and len(node.args) == 2:
                evaluated.append(node.args[1])
        found += ["%s:%d: `X | Y` union evaluated at run time needs Python 3.10" % (path, u.lineno)
                  for e in evaluated for u in unions(e)[:1]]
for line in found:
    print(line)
sys.exit(1 if found else 0)
EOF

if [ "$status" -ne 0 ]; then
  echo "code that runs on managed hosts needs a Python newer than 3.9 (see above)" >&2
  exit 1
fi
echo "managed-node code needs no more than Python 3.9"
