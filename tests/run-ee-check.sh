#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# The execution environment (ee/execution-environment.yml) without building an image (no registry
# is reachable here): ansible-builder create writes the build context, and the check runs what the
# image build would run on it - the galaxy step installs the collection from the context, and the
# context's own introspect script derives the pip requirements from the installed collection. Every
# controller requirement in meta/ee-requirements.txt must come out of that. Then the AWX project's
# collections/requirements.yml is installed from the checkout, as a project sync does.
set -euo pipefail
BIN=${1:?usage: run-ee-check.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
CTX=$REPO/.cache/ee-context
WORK=$REPO/.cache/ee-check
cd "$REPO"
rm -rf "$REPO/ee/_collection" "$CTX" "$WORK" && mkdir -p "$WORK"
fail() { echo "ee-check: $*" >&2; exit 1; }

"$BIN/ansible-galaxy" collection build --force --output-path ee/_collection . >/dev/null
ART=$(cd ee/_collection && ls aiinfra-io_isolation-*.tar.gz)
grep -qF "collection/$ART" ee/requirements.yml \
  || fail "ee/requirements.yml does not name collection/$ART (galaxy.yml's version changed?)"
"$BIN/ansible-builder" create -f ee/execution-environment.yml --context "$CTX" >/dev/null
FILE=$CTX/Dockerfile
[ -f "$FILE" ] || FILE=$CTX/Containerfile
[ -f "$CTX/_build/collection/$ART" ] || fail "the build context lacks _build/collection/$ART"
for ref in ansible-core ansible-runner; do
  grep -q "^ARG ANSIBLE_INSTALL_REFS=.*$ref" "$FILE" || fail "$FILE does not install $ref"
done
echo "ee-check: build context $CTX holds $ART; $(basename "$FILE") installs ansible-core and ansible-runner"

# The galaxy stage: ansible-galaxy collection install -r requirements.yml in _build (WORKDIR /build).
# Only the target path is configured: a copy on the caller's ANSIBLE_COLLECTIONS_PATH (make's tree)
# would otherwise count as installed and nothing would be installed here.
(cd "$CTX/_build" && ANSIBLE_COLLECTIONS_PATH="$WORK/collections" \
  "$BIN/ansible-galaxy" collection install -r requirements.yml -p "$WORK/collections" >/dev/null)
# The builder stage: the context's introspect script over the installed collections.
"$BIN/python" "$CTX/_build/scripts/introspect.py" introspect "$WORK/collections" --write-pip="$WORK/pip.txt" >/dev/null
missing=""
while read -r line; do
  req=${line%%#*}; req=$(echo "$req" | tr -d ' ')
  [ -n "$req" ] || continue
  grep -q "^$req " "$WORK/pip.txt" || missing="$missing $req"
done < meta/ee-requirements.txt
[ -z "$missing" ] || fail "the image would not get:$missing (introspected: $(tr '\n' ';' < "$WORK/pip.txt"))"
echo "ee-check: the image gets every controller requirement: $(sed 's/  #.*//' "$WORK/pip.txt" | tr '\n' ' ')"

# An AWX project sync of this checkout.
ANSIBLE_COLLECTIONS_PATH="$WORK/project" \
  "$BIN/ansible-galaxy" collection install -r collections/requirements.yml -p "$WORK/project" >/dev/null
ANSIBLE_COLLECTIONS_PATH="$WORK/project" "$BIN/ansible-doc" -t module aiinfra.io_isolation.host_profile >/dev/null \
  || fail "collections/requirements.yml did not install a usable aiinfra.io_isolation"
echo "ee-check: collections/requirements.yml installs aiinfra.io_isolation from the checkout"
