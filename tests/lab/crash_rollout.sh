#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# A real rollout killed mid-apply (issue 38): site.yml on a lab guest that serves both tenants, its one
# host_profile call killed with SIGKILL at a random point (no restore runs, as with kill -9, an OOM kill or a
# lost controller), RUNS times, each from a purged host. After each kill verify.yml must report DRIFT (unless
# the call had already ended); at the end site.yml converges, verify.yml passes and site.yml again changes
# nothing. The unit test tests/unit/plugins/test_crash_consistency.py kills a simulated run after each of its
# changes; this is the same on a real kernel and systemd, at random points.
#   usage: tests/lab/crash_rollout.sh VENV_BIN [RUNS] [SEED]      (LAB_GUEST=debian12|debian13, LAB_NAME=crash)
set -euo pipefail
BIN=${1:?usage: crash_rollout.sh VENV_BIN [RUNS] [SEED]}
RUNS=${2:-4}
SEED=${3:-$RANDOM}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
LAB=(python3 "$REPO/tests/lab/lab.py")
NAME=${LAB_NAME:-crash}
GUEST=${LAB_GUEST:-debian12}
cd "$REPO"
say() { echo "crash-rollout: $*"; }
"${LAB[@]}" down "$NAME" --purge >/dev/null
"${LAB[@]}" up "$GUEST" --name "$NAME"
trap '"${LAB[@]}" down "$NAME" --purge' EXIT
mkdir -p .cache
INV=.cache/crash-inventory.yml
GROUPS_INV=.cache/crash-groups.yml
"${LAB[@]}" inventory "$NAME" > "$INV"
printf 'all:\n  children:\n    inference:\n      hosts:\n        %s:\n    training:\n      hosts:\n        %s:\n' \
  "$NAME" "$NAME" > "$GROUPS_INV"
# Without pipelining the module runs as a file, AnsiballZ_host_profile.py, that the guest can find by name (an
# extra variable: the lab's inventory turns pipelining on per host, which the environment does not override).
play() { "$BIN/ansible-playbook" -i "$INV" -i "$GROUPS_INV" -e ansible_pipelining=false "$@"; }

# The watcher, on the guest: wait for host_profile's process (the Python process, not the shell that started
# it), then either ("measure") say how long it lived, or sleep DELAY and SIGKILL it, saying whether it killed it
# or the call had ended first.
# shellcheck disable=SC2016  # the guest's shell expands it
WATCH='for i in $(seq 1 12000); do p=$(pgrep -f "^/usr/bin/python3 .*AnsiballZ_host_profile" | head -1)
[ -n "$p" ] && break; sleep 0.05; done
[ -n "$p" ] || { echo "no host_profile call seen"; exit 3; }
if [ "$1" = measure ]; then t0=$(date +%s.%N); while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
  awk -v now="$(date +%s.%N)" -v t0="$t0" "BEGIN { printf \"%.2f\\n\", now - t0 }"; exit 0; fi
sleep "$1"; if kill -9 "$p" 2>/dev/null; then echo killed; else echo ended; fi'
watch() { "${LAB[@]}" ssh "$NAME" -- bash -s -- "$1" <<<"$WATCH"; }

say "guest $GUEST as $NAME, $RUNS killed rollouts, seed $SEED"
# How long the call takes here: an uninterrupted rollout, timed on the guest, then purged.
watch measure >/tmp/crash-rollout-window.log 2>&1 &
watcher=$!
play playbooks/site.yml >/tmp/crash-rollout-first.log 2>&1 || { tail -40 /tmp/crash-rollout-first.log; exit 1; }
wait "$watcher" || { cat /tmp/crash-rollout-window.log; exit 1; }
WINDOW=$(tail -1 /tmp/crash-rollout-window.log)
say "an uninterrupted rollout's host_profile call lived ${WINDOW} s: the kills fall in that window"
killed=0
for run in $(seq 1 "$RUNS"); do
  play playbooks/purge.yml >/dev/null
  delay=$(python3 -c "import random; random.seed($SEED * 100 + $run); print(round(random.uniform(0, $WINDOW), 2))")
  watch "$delay" >/tmp/crash-rollout-watch.log 2>&1 &
  watcher=$!
  rc=0
  play playbooks/site.yml >/tmp/crash-rollout-run.log 2>&1 || rc=$?
  wait "$watcher" || true
  what=$(tail -1 /tmp/crash-rollout-watch.log)
  vrc=0
  play playbooks/verify.yml >/tmp/crash-rollout-verify.log 2>&1 || vrc=$?
  drift=$(grep -c "DRIFT on $NAME" /tmp/crash-rollout-verify.log || true)
  say "run $run: host_profile $what after ${delay} s; site.yml rc=$rc; verify.yml rc=$vrc, DRIFT lines $drift"
  case $what in
    killed)
      killed=$((killed + 1))
      [ "$rc" -ne 0 ] || { say "site.yml passed although its host_profile call was killed"; exit 1; }
      if [ "$vrc" -eq 0 ] || [ "$drift" -eq 0 ]; then say "verify.yml did not report the interrupted host"; exit 1; fi ;;
    ended) if [ "$rc" -ne 0 ] || [ "$vrc" -ne 0 ]; then say "an uninterrupted rollout did not verify"; exit 1; fi ;;
    *) say "the watcher: $(cat /tmp/crash-rollout-watch.log)"; exit 1 ;;
  esac
done
play playbooks/site.yml >/tmp/crash-rollout-repair.log 2>&1 || { tail -40 /tmp/crash-rollout-repair.log; exit 1; }
play playbooks/verify.yml >/tmp/crash-rollout-verify.log 2>&1 || { tail -40 /tmp/crash-rollout-verify.log; exit 1; }
play playbooks/site.yml >/tmp/crash-rollout-again.log 2>&1
grep -Eq "$NAME +: ok=[0-9]+ +changed=0 " /tmp/crash-rollout-again.log || { tail -20 /tmp/crash-rollout-again.log; exit 1; }
say "passed: $killed of $RUNS rollouts killed mid-call, each reported by verify.yml; the next site.yml repaired" \
    "the host, verify.yml passed, and site.yml again changed nothing"
