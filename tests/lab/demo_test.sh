#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# make test's demo stage: the README's `KEEP_LAB=1 make demo` as a user runs it, on a fresh lab instance (demo.sh
# checks its summary line by line), then a command in the kept VM the way the demo says, then the VM is stopped.
# A script, not a recipe: `make -n` runs recipe lines that hold $(MAKE), and this one stops a VM.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
LOG=.cache/demo-test.log
mkdir -p .cache
trap 'python3 tests/lab/lab.py down demo --purge >/dev/null' EXIT
KEEP_LAB=1 make --no-print-directory demo | tee "$LOG"
# The demo's own words: "The lab VM is still running: python3 tests/lab/lab.py ssh demo -- <command>;"
how=$(sed -n 's/^The lab VM is still running: \(.*\) <command>;$/\1/p' "$LOG")
[ -n "$how" ] || { echo "demo-test: the demo did not say how to reach the kept VM" >&2; exit 1; }
echo "demo-test: $how uname -r"
$how uname -r
