#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Install the collections of requirements/collections.txt into .cache/installed/ansible_collections
# (make collections). Each comes out of a pinned, hash-checked wheel of the `ansible` package (which
# bundles it); only the collection's own directory is unpacked. A collection already there at the
# pinned version is left alone.
set -euo pipefail
BIN=${1:?usage: run-install-collections.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DEST=$REPO/.cache/installed/ansible_collections
mkdir -p "$DEST"
while read -r coll version wheel sha; do
  case "$coll" in ''|'#'*) continue ;; esac
  ns=${coll%%.*}
  name=${coll#*.}
  target=$DEST/$ns/$name
  have=$("$BIN/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' \
    "$target/MANIFEST.json" 2>/dev/null || true)
  if [ "$have" = "$version" ]; then
    echo "$coll $version: installed"
    continue
  fi
  tmp=$(mktemp -d "$DEST/.tmp-$coll.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "$wheel --hash=sha256:$sha" >"$tmp/req.txt"
  "$BIN/python" -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$tmp/req.txt" -d "$tmp"
  "$BIN/python" - "$tmp" "$ns" "$name" "$version" <<'PY'
import glob, json, os, sys, zipfile
tmp, ns, name, version = sys.argv[1:]
prefix = "ansible_collections/%s/%s/" % (ns, name)
(whl,) = glob.glob(os.path.join(tmp, "*.whl"))
with zipfile.ZipFile(whl) as z:
    members = [m for m in z.namelist() if m.startswith(prefix)]
    if not members:
        sys.exit("%s has no %s" % (os.path.basename(whl), prefix))
    z.extractall(os.path.join(tmp, "x"), members)
got = json.load(open(os.path.join(tmp, "x", prefix, "MANIFEST.json")))["collection_info"]["version"]
if got != version:
    sys.exit("%s bundles %s.%s %s, not the pinned %s" % (os.path.basename(whl), ns, name, got, version))
PY
  mkdir -p "$DEST/$ns"
  rm -rf "$target"
  mv "$tmp/x/ansible_collections/$ns/$name" "$target"
  rm -rf "$tmp"
  trap - EXIT
  echo "$coll $version: installed from $wheel"
done <"$REPO/requirements/collections.txt"
