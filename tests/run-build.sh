#!/usr/bin/env bash
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
# The artifact must not carry caches, venvs or lab images.
if tar -tzf "$ART" | grep -E '(^|/)(\.venv|\.cache|\.git|__pycache__)/|\.(qcow2|raw)$'; then
  echo "artifact contains files that build_ignore should exclude" >&2; exit 1
fi
"$BIN/ansible-galaxy" collection install --force -p "$OUT/installed" "$ART"
for f in plugins/modules/*.py; do
  m=$(basename "$f" .py)
  ANSIBLE_COLLECTIONS_PATH="$OUT/installed" "$BIN/ansible-doc" -t module "aiinfra.io_isolation.$m" >/dev/null
  echo "installed copy documents aiinfra.io_isolation.$m"
done
