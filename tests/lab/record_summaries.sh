#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Record the rollout summary's inputs on the lab for the unit tests (tests/unit/playbooks/recorded/), one real
# run per shape the summary has: the demo itself (both tenants, calibrated model, the apply's pressure
# reading), the inference tenant alone on the kernel's model class through the NVMe-queue reboot, the training
# tenant alone on the kernel's model class, and the health gate read by io_facts (a play without the apply).
# Run after `KEEP_LAB=1 make demo` (it uses that VM and its summary), then stop the VM:
#   make record-summaries && python3 tests/lab/lab.py down demo --purge
set -euo pipefail
BIN=${1:?usage: record_summaries.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$REPO/tests/unit/playbooks/recorded
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$REPO"
mkdir -p "$OUT"
run() {  # run NAME GROUPS_YAML PLAYBOOK [ansible-playbook args]: the summary of one run as $OUT/NAME.json
  local name=$1 groups=$2 playbook=$3
  shift 3
  printf '%s\n' "$groups" > "$WORK/groups.yml"
  mkdir -p "$WORK/$name" "$WORK/empty-db"
  "$BIN/ansible-playbook" -i .cache/demo-inventory.yml -i "$WORK/groups.yml" "$playbook" \
    -e "io_isolation_summary_dir=$WORK/$name" -e "io_isolation_calibration_dir=$WORK/empty-db" "$@"
  cp "$WORK/$name/demo.json" "$OUT/$name.json"
}
cp .cache/demo-summary/demo.json "$OUT/both-calibration-apply.json"
run inference-kernel-reboot 'all: {children: {inference: {hosts: {demo: }}}}' playbooks/demo_rollout.yml \
  -e '{"io_baseline_nvme_queues": {"poll_queues": 1}, "io_baseline_reboot_ok": true}'
run training-kernel-apply 'all: {children: {training: {hosts: {demo: }, vars: {training_io_max: {wbps: 90%}}}}}' \
  playbooks/demo_rollout.yml
run health-io-facts 'all: {children: {inference: {hosts: {demo: }}}}' tests/lab/record_health_io_facts.yml
echo "recorded: $(ls "$OUT")"
