#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Power cuts (issue 38): the lab guest is hard-reset with QMP system_reset (no shutdown, nothing the guest has not
# synced survives) right after each of these, then it boots and is checked:
#   1. a sysctl module call (one sysctl.d file replaced by a rename): reset within a second of the module's return,
#      well inside ext4's 5 s journal commit - without the directory fsync the rename may be lost;
#   2. site.yml (both tenants): every managed file holds exactly what it held before the reset (none empty or
#      partial, none missing), the boot helpers applied what the files say (verify.yml passes);
#   3. purge.yml: no managed file is left after the reset, and the host boots.
#   usage: tests/lab/power_cut.sh VENV_BIN      (LAB_GUEST=debian12|debian13, LAB_NAME=powercut)
set -euo pipefail
BIN=${1:?usage: power_cut.sh VENV_BIN}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
LAB=(python3 "$REPO/tests/lab/lab.py")
NAME=${LAB_NAME:-powercut}
GUEST=${LAB_GUEST:-debian12}
cd "$REPO"
export ANSIBLE_COLLECTIONS_PATH="$REPO/.cache/collections:$REPO/.cache/installed"
say() { echo "power-cut: $*"; }
t0=$(date +%s)
"${LAB[@]}" down "$NAME" --purge >/dev/null
"${LAB[@]}" up "$GUEST" --name "$NAME" --fresh-root
trap '"${LAB[@]}" down "$NAME" --purge' EXIT
mkdir -p .cache
INV=.cache/$NAME-inventory.yml
GROUPS_INV=.cache/$NAME-groups.yml
"${LAB[@]}" inventory "$NAME" > "$INV"
printf 'all:\n  children:\n    inference:\n      hosts:\n        %s:\n    training:\n      hosts:\n        %s:\n' \
  "$NAME" "$NAME" > "$GROUPS_INV"
play() { "$BIN/ansible-playbook" -i "$INV" -i "$GROUPS_INV" "$@"; }
on() { "${LAB[@]}" ssh "$NAME" -- "$@"; }
cut_power() { "${LAB[@]}" reboot "$NAME" --hard; }
# Every file the collection manages on the host, with its size and checksum (its stamp names it).
# shellcheck disable=SC2016  # the guest's shell expands it
MANAGED='grep -rlIZ "Managed by Ansible (aiinfra.io_isolation)" /etc /usr/local/libexec /var/lib/aiinfra-io_isolation \
         2>/dev/null | sort -z | xargs -0 -r sha256sum | while read -r sum path; do \
         echo "$sum $(stat -c %s "$path") $path"; done'

# 1. one module call, then the power cut at once
# shellcheck disable=SC2016  # the guest's shell expands it
"$BIN/ansible" -i "$INV" "$NAME" -m aiinfra.io_isolation.sysctl -a '{"sysctls": {"vm.swappiness": 17}}' >/dev/null
cut_power
# shellcheck disable=SC2016
on 'grep -qx "vm.swappiness = 17" /etc/sysctl.d/90-aiinfra-io-isolation.conf && [ "$(cat /proc/sys/vm/swappiness)" = 17 ]' \
  || { say "FAILED: the sysctl.d file written just before the power cut is not what the guest booted with"; exit 1; }
say "1. sysctl module, then a power cut at once: the sysctl.d file survived and applied at boot"
"$BIN/ansible" -i "$INV" "$NAME" -m aiinfra.io_isolation.sysctl -a '{"sysctls": {"vm.swappiness": {"state": "absent"}}}' \
  >/dev/null

# 2. the rollout
play playbooks/site.yml >/dev/null
before=$(on "$MANAGED")
cut_power
after=$(on "$MANAGED")
if [ "$before" != "$after" ]; then
  say "FAILED: the managed files changed across the power cut"; diff <(echo "$before") <(echo "$after") || true; exit 1
fi
if echo "$after" | awk '$2 == 0 { bad = 1 } END { exit !bad }'; then
  say "FAILED: an empty managed file after the power cut"; echo "$after"; exit 1
fi
say "2. site.yml, then a power cut: $(echo "$after" | wc -l) managed files, each as before the cut"
play playbooks/verify.yml >/dev/null || { say "FAILED: verify.yml after the power cut"; exit 1; }
say "   verify.yml passes: the boot helpers and systemd applied what the files say"

# 3. the purge
play playbooks/purge.yml >/dev/null
cut_power
left=$(on "$MANAGED")
if [ -n "$left" ]; then
  say "FAILED: managed files back after the purge and a power cut:"; echo "$left"; exit 1
fi
say "3. purge.yml, then a power cut: no managed file left"
say "passed on $GUEST in $(( $(date +%s) - t0 )) s"
