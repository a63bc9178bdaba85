#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# make test: run each stage (a make target) in turn, go on after a failure so that one run shows
# every broken stage, then print each stage's result and time and a closing "N passed, N failed".
set -uo pipefail
MAKE=${MAKE:-make}
declare -a rows=()
passed=0 failed=0
t_all=$(date +%s)
for stage in "$@"; do
  echo "=== make test: stage $stage"
  t0=$(date +%s)
  if "$MAKE" --no-print-directory "$stage"; then
    result=passed; passed=$((passed + 1))
  else
    result=FAILED; failed=$((failed + 1))
  fi
  secs=$(( $(date +%s) - t0 ))
  rows+=("$(printf '%-24s %-7s %5d s (%d:%02d)' "$stage" "$result" "$secs" $((secs / 60)) $((secs % 60)))")
  echo "=== make test: stage $stage $result in $secs s"
done
total=$(( $(date +%s) - t_all ))
echo
echo "make test summary (stage, result, wall time):"
printf '  %s\n' "${rows[@]}"
printf '  %-24s %-7s %5d s (%d:%02d)\n' total "" "$total" $((total / 60)) $((total % 60))
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
