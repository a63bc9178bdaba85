#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Build the collection artifact, install it into a scratch path and check that ansible-core
# finds every module from the installed copy (not from the source tree).
set -euo pipefail
BIN=${1:?usage: run-build.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=$REPO/.cache/build
rm -rf "$OUT" && mkdir -p "$OUT"
cd "$REPO"
"$BIN/ansible-galaxy" collection build --force --output-path "$OUT" .
ART=$(find "$OUT" -maxdepth 1 -name 'aiinfra-io_isolation-*.tar.gz' | head -n1)
echo "built $ART ($(du -h "$ART" | cut -f1))"
# What the artifact holds: the collection's content, its metadata and licence, and no lab,
# molecule, benchmark, CI or cache files, venvs, VM images or kernels.
LIST=$OUT/files.txt
tar -tzf "$ART" | sed -e 's|^\./||' | grep -v '/$' | sort >"$LIST"
FORBIDDEN='^(molecule|tests/lab|\.cache|\.venv|\.git|\.ci|\.config)/|(^|/)(benchmarks|__pycache__)/|\.(pyc|qcow2|raw|img|bzImage)$'
if grep -E "$FORBIDDEN" "$LIST"; then
  echo "artifact contains the files above, which build_ignore in galaxy.yml should exclude" >&2; exit 1
fi
missing=""
for f in LICENSE MANIFEST.json FILES.json meta/runtime.yml plugins/modules/*.py; do
  grep -qxF "$f" "$LIST" || missing="$missing $f"
done
if [ -n "$missing" ]; then
  echo "artifact lacks:$missing" >&2; exit 1
fi
echo "artifact holds $(wc -l <"$LIST") files"
echo "top-level directories: $(grep / "$LIST" | cut -d/ -f1 | sort -u | tr '\n' ' ')"
echo "top-level files: $(grep -v / "$LIST" | tr '\n' ' ')"
"$BIN/ansible-galaxy" collection install --force -p "$OUT/installed" "$ART"
for f in plugins/modules/*.py; do
  m=$(basename "$f" .py)
  ANSIBLE_COLLECTIONS_PATH="$OUT/installed" "$BIN/ansible-doc" -t module "aiinfra.io_isolation.$m" >/dev/null
  echo "installed copy documents aiinfra.io_isolation.$m"
done
