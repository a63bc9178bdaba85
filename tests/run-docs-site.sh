#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# The docs site (`make docs`): antsibull-docs writes the modules', filters', lookup's and roles'
# pages (roles from meta/argument_specs.yml) as rst, the guides docs/*.md join them as Markdown
# (myst-parser), and Sphinx builds HTML offline with every warning an error. Everything generated
# goes under .cache/docs-site/; the versioned sources are docs/site/ (conf.py, index.rst with the
# guides' toctree, the Ansible docsite labels the generated pages refer to).
set -euo pipefail
BIN=${1:?usage: run-docs-site.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
# antsibull-docs runs ansible-doc, which finds the collection through the tree `make tree` links.
export PATH="$BIN:$PATH"
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$REPO/.cache/collections:$REPO/.cache/installed}
OUT=$REPO/.cache/docs-site
SRC=$OUT/rst
SECONDS=0

# A fresh source and output tree every time: an incremental Sphinx build would not repeat the
# warnings of pages it did not re-read, so a second run could pass where the first failed.
rm -rf "$SRC" "$OUT/html" "$OUT/doctrees"
mkdir -p "$SRC/guides"
chmod 700 "$OUT" "$SRC"  # antsibull-docs wants its directory writable by its owner only

antsibull-docs collection --use-current --fail-on-error --cleanup everything \
  --dest-dir "$SRC" aiinfra.io_isolation >"$OUT/antsibull-docs.log" 2>&1 \
  || { cat "$OUT/antsibull-docs.log" >&2; exit 1; }
cp docs/site/index.rst "$SRC/index.rst"
cp docs/*.md docs/*.png "$SRC/guides/"   # the guides and the images they show (fleet.md: the report)

# The intersphinx inventory conf.py reads instead of fetching the Ansible docsite's.
"$BIN/python" - docs/site/ansible_devel.inv.txt "$OUT/ansible_devel.inv" <<'PY'
import sys
import zlib
with open(sys.argv[1], encoding="utf-8") as src:
    lines = [line for line in src if line.strip() and not line.startswith("#")]
with open(sys.argv[2], "wb") as inv:
    inv.write(b"# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n"
              b"# The remainder of this file is compressed using zlib.\n")
    inv.write(zlib.compress("".join(lines).encode("utf-8")))
PY

sphinx-build -b html -c docs/site -d "$OUT/doctrees" -W --keep-going -q "$SRC" "$OUT/html"
echo "docs site built in ${SECONDS}s: $OUT/html/index.html"
