#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# make test: run each stage (a make target) in turn, go on after a failure so that one run shows
# every broken stage, then print each stage's result and time and a closing "N passed, N failed".
#
# An argument "a,b+x,y" runs two lanes at the same time: a then b, and x then y. Each stage's
# output goes to .cache/test-logs/<stage>.log and is printed when the stage ends, so the lanes'
# output does not interleave. On 2 cores this pays where neither lane keeps both cores busy: the
# VM-less stages beside a one-VM scenario (issue 20, measured).
set -uo pipefail
MAKE=${MAKE:-make}
LOGS=${TEST_LOGS:-.cache/test-logs}
mkdir -p "$LOGS"
rm -f "$LOGS"/*.result

fmt() { printf '%-28s %-7s %5d s (%d:%02d)%s' "$1" "$2" "$3" $(($3 / 60)) $(($3 % 60)) "$4"; }

# run_stage STAGE [ALONGSIDE]: one make target, its result in $LOGS/STAGE.result.
run_stage() {
  local stage=$1 beside=${2:-} t0 result secs rc
  echo "=== make test: stage $stage${beside:+ (alongside $beside)}"
  t0=$(date +%s)
  if [ -n "$beside" ]; then
    timed "$stage" >"$LOGS/$stage.log" 2>&1
    rc=$?
  else
    timed "$stage" 2>&1 | tee "$LOGS/$stage.log"
    rc=${PIPESTATUS[0]}
  fi
  if [ "$rc" -eq 0 ]; then result=passed; else result=FAILED; fi
  secs=$(($(date +%s) - t0))
  if [ -n "$beside" ]; then
    # one block per stage, printed whole when it ends
    { echo "=== make test: output of stage $stage"; cat "$LOGS/$stage.log"; } | sed "s|^|[$stage] |"
  fi
  echo "=== make test: stage $stage $result in $secs s"
  echo "$result $secs $(cpu_used "$stage")${beside:+ (alongside $beside)}" >"$LOGS/$stage.result"
}

# timed STAGE: the make target in a subshell that writes its CPU time (make and every process it waited
# for) to $LOGS/STAGE.times, bash's `times` format: the second line is the children's user and system time.
timed() {
  ( "$MAKE" --no-print-directory "$1"; rc=$?; times >"$LOGS/$1.times"; exit $rc )
}

# cpu_used STAGE: "cpu=N+M" - CPU seconds of the stage's own processes, and of its lab VMs (daemonized QEMU,
# which no one waits for: lab.py down reports what each used). What lanes can share is planned from these.
cpu_used() {
  local own vms
  own=$(sed -n 2p "$LOGS/$1.times" 2>/dev/null \
        | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t }')
  vms=$(grep -o 'QEMU used [0-9]* s of CPU' "$LOGS/$1.log" 2>/dev/null | awk '{ t += $3 } END { printf "%d", t }')
  echo "cpu=${own:-0}+${vms:-0}"
}

# why_failed LOG: each Ansible "fatal:"/"failed:" with the lines of its message, and the lines that
# pytest, make and our scripts print for a failure; colours stripped, at most 60 lines. A failure Ansible
# ignored (ignore_errors: its "...ignoring" follows before the next task) is left out: a scenario's
# refusal tests print dozens, and they once filled the 60 lines ahead of the failure that mattered.
why_failed() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" 2>/dev/null | awk '
    function flush() { printf "%s", pend; pend = "" }
    /TASK \[|PLAY RECAP/ { flush(); left = 0 }
    /\.\.\.ignoring/ { pend = ""; left = 0; next }
    /fatal: \[|failed: \[|^FAILED |^E  |smoke run failed|[Ee]rror:|Error [0-9]+$|Traceback/ {
      pend = pend $0 "\n"; left = 8; next }
    left > 0 { left--; pend = pend $0 "\n" }
    END { flush() }' | head -60
}

run_lane() {  # run_lane "what runs beside it" STAGE...
  local beside=$1 stage
  shift
  for stage in "$@"; do run_stage "$stage" "$beside"; done
}

order=()
t_all=$(date +%s)
for arg in "$@"; do
  if [[ $arg == *+* ]]; then
    IFS=, read -r -a stages1 <<<"${arg%%+*}"
    IFS=, read -r -a stages2 <<<"${arg#*+}"
    run_lane "${stages2[*]}" "${stages1[@]}" &
    pid1=$!
    run_lane "${stages1[*]}" "${stages2[@]}" &
    pid2=$!
    wait "$pid1" "$pid2"
    order+=("${stages1[@]}" "${stages2[@]}")
  else
    run_stage "$arg"
    order+=("$arg")
  fi
done
total=$(($(date +%s) - t_all))

passed=0 failed=0
echo
echo "make test summary (stage, result, wall time, CPU seconds of its processes and of its lab VMs):"
cpu_all=0
for stage in "${order[@]}"; do
  if read -r result secs cpu beside <"$LOGS/$stage.result" 2>/dev/null; then :; else result=FAILED secs=0 cpu=cpu=0+0 beside=" (no result)"; fi
  if [ "$result" = passed ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  own=${cpu#cpu=} vms=${own#*+} own=${own%+*}
  cpu_all=$((cpu_all + own + vms))
  echo "  $(fmt "$stage" "$result" "$secs" ", CPU $own s + VMs $vms s${beside:+ $beside}")"
done
echo "  $(fmt total "" "$total" ", CPU $cpu_all s: $((cpu_all * 100 / (total > 0 ? total : 1) / $(nproc)))% of $(nproc) cores")"
# CI keeps only the output's tail: what made each failed stage fail is repeated here, at the end.
for stage in "${order[@]}"; do
  read -r result _ <"$LOGS/$stage.result" 2>/dev/null || result=FAILED
  [ "$result" = passed ] && continue
  echo
  echo "why $stage failed (the lines that say so in $LOGS/$stage.log):"
  why_failed "$LOGS/$stage.log" | sed 's/^/  | /'
done
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
