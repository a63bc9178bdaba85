#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Every module renders with ansible-doc (attributes, examples, return values) and the
# collection's docs pass antsibull-docs lint (semantic markup, references).
set -euo pipefail
BIN=${1:?usage: run-docs-check.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
for f in plugins/modules/*.py; do
  m=$(basename "$f" .py)
  out=$("$BIN/ansible-doc" -t module "aiinfra.io_isolation.$m")
  for section in "ATTRIBUTES" "EXAMPLES" "RETURN VALUES"; do
    grep -q "$section" <<<"$out" || { echo "ansible-doc $m: no $section section" >&2; exit 1; }
  done
  echo "ansible-doc renders aiinfra.io_isolation.$m with attributes, examples and return values"
done
"$BIN/antsibull-docs" lint-collection-docs --plugin-docs --skip-rstcheck .
