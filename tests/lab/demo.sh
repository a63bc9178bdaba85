#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# `make demo`: build (or reuse) the Debian 12 lab image, boot it, print its capabilities, calibrate
# its blank NVMe disk into .cache/demo-calibration-db (report and hwdb beside it), run the
# fleet rollout (site.yml) on it as a co-located host, print what was applied and the health
# gate's reading, shut the VM down. KEEP_LAB=1 leaves it running. The NVMe disks are device-bound
# (lab.py --device-bound: a fixed capacity with QEMU block throttling, printed at boot), so the
# calibration measures a disk, not the emulator's CPU; LAB_DEVICE_BOUND=0 leaves them unthrottled. The summary is
# kept in .cache/demo-summary/ (DEMO_SUMMARY_DIR) and checked line by line.
set -euo pipefail
BIN=${1:?usage: demo.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
LAB="python3 $REPO/tests/lab/lab.py"
NAME=${LAB_NAME:-demo}
GUEST=${LAB_GUEST:-debian12}
cd "$REPO"
$LAB build "$GUEST"
# A demo killed half-way leaves its daemonized QEMU running: stop it (by its checked PID) first.
$LAB down "$NAME" --purge >/dev/null
BOUND=(); [ "${LAB_DEVICE_BOUND:-1}" = 1 ] && BOUND=(--device-bound)
$LAB up "$GUEST" --name "$NAME" "${BOUND[@]}"
if [ "${KEEP_LAB:-0}" != 1 ]; then
  trap '$LAB down "$NAME" --purge' EXIT
fi
mkdir -p .cache
$LAB inventory "$NAME" > .cache/demo-inventory.yml
"$BIN/ansible-playbook" -i .cache/demo-inventory.yml playbooks/demo.yml
"$BIN/ansible-playbook" -i .cache/demo-inventory.yml -i playbooks/inventory/demo_groups.yml playbooks/calibrate.yml
# The summary's lines and what they were rendered from are kept (make test's demo stage checks them).
SUMMARY=${DEMO_SUMMARY_DIR:-$REPO/.cache/demo-summary}
rm -rf "$SUMMARY" && mkdir -p "$SUMMARY"
"$BIN/ansible-playbook" -i .cache/demo-inventory.yml -i playbooks/inventory/demo_groups.yml playbooks/demo_rollout.yml \
  -e "io_isolation_summary_dir=$SUMMARY"
# The summary, line by line, against what it was rendered from and what this demo must show: both tenants,
# the calibrated model on every NVMe disk, weights, training's caps, inference's memory protection and the
# apply's pressure reading (tests/lab/demo_summary.py).
"$BIN/python" tests/lab/demo_summary.py "$SUMMARY/$NAME.json" --roles inference,training --model-source calibration \
  --health-source host_profile --caps --memory-protection --quiet
echo "demo: the summary and its inputs are in $SUMMARY/"
if [ "${KEEP_LAB:-0}" = 1 ]; then
  echo "The lab VM is still running: python3 tests/lab/lab.py ssh $NAME -- <command>;"
  echo "stop it with: python3 tests/lab/lab.py down $NAME --purge"
fi
