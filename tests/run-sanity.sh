#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# ansible-test sanity on a clean copy of the collection's files, in
# .cache/sanity-py<version>/ansible_collections/aiinfra/io_isolation (ansible-test needs that layout
# and refuses symlinked trees). No ignore files: every finding fails the run.
# SANITY_PYTHON: the Python to test with (default 3.11, this machine's; tests/run-newest-core.sh
# runs this script with 3.13 in its Debian 13 chroot).
set -euo pipefail
BIN=${1:?usage: run-sanity.sh VENV_BIN}
PY=${SANITY_PYTHON:-3.11}
REPO=$(cd "$(dirname "$0")/.." && pwd)
TREE=$REPO/.cache/sanity-py$PY/ansible_collections/aiinfra/io_isolation
rm -rf "$TREE" && mkdir -p "$TREE"
cd "$REPO"
git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$TREE"/
cd "$TREE"
# ansible-test lists a collection's files with git when it is a repository.
git init -q && git add -A && git -c user.email=ci@localhost -c user.name=ci commit -qm sanity
if ls tests/sanity/ignore-*.txt >/dev/null 2>&1; then
  echo "tests/sanity/ignore-*.txt exists: this project keeps sanity clean without ignore entries" >&2
  exit 1
fi
# ansible-test's --venv mode fetches get-pip from a host these machines cannot reach, so the
# sanity tools (pinned by ansible-test itself) go into a venv of their own instead of our .venv,
# where they would clash with ansible-lint's versions.
SVENV=$REPO/.cache/sanity-venv-py$PY
CORE=$("$BIN/python" -c 'import ansible; print(ansible.__version__)')
if [ ! -x "$SVENV/bin/ansible-test" ] || [ "$("$SVENV/bin/python" -c 'import ansible; print(ansible.__version__)')" != "$CORE" ]; then
  rm -rf "$SVENV"
  "python$PY" -m venv "$SVENV"
  "$SVENV/bin/python" -m pip install -q "ansible-core==$CORE"
fi
# Each sanity test's own venv is bootstrapped with a get-pip script ansible-test downloads from a
# host outside the package registries; give it our ensurepip-based stand-in instead.
PIPV=$(grep -ohP "pip='\K[0-9.]+" "$SVENV"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -1)
[ -n "$PIPV" ] || { echo "cannot find the pip version ansible-test bootstraps" >&2; exit 1; }
mkdir -p ~/.ansible/test/cache
cp tests/sanity-get-pip.py ~/.ansible/test/cache/"get_pip_${PIPV//./_}.py"
# Only one Python is there; ansible-test reports the compile test for other versions as skipped
# (modules declare python_requires >= 3.9 in tests/config.yml).
"$SVENV/bin/ansible-test" sanity --requirements --python "$PY" --color no "${@:2}"
