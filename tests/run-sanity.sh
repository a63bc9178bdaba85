#!/usr/bin/env bash
# ansible-test sanity on a clean copy of the collection's files, in
# .cache/sanity/ansible_collections/aiinfra/io_isolation (ansible-test needs that layout and
# refuses symlinked trees). No ignore files: every finding fails the run.
set -euo pipefail
BIN=${1:?usage: run-sanity.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/.." && pwd)
TREE=$REPO/.cache/sanity/ansible_collections/aiinfra/io_isolation
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
# --venv: each sanity test gets the tool versions it pins, without touching our .venv.
# Only Python 3.11 is on these machines; the compile test for other versions is reported as
# skipped by ansible-test itself (modules declare python_requires >= 3.9 in tests/config.yml).
"$BIN/ansible-test" sanity --venv --requirements --python 3.11 --color no "${@:2}"
