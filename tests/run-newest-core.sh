#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# The newest ansible-core the collection supports (requirements/newest.txt) needs Python >= 3.12
# and these machines have 3.11, so it runs on Debian 13's Python 3.13 in a trixie chroot built with
# mmdebstrap from the lab's Debian mirror (tests/lab/lab.py), cached under
# ~/.cache/aiinfra-io_isolation/controllers/debian13-<hash of the recipe>/. There it runs:
#   unit      pytest on the tests that run ansible-core's code (UNIT_TESTS below)
#   sanity    ansible-test sanity --python 3.13 on the whole collection (tests/run-sanity.sh)
#   playbook  playbooks/site.yml (io_baseline, inference, training) against a Debian 13 lab VM:
#             first with a bad role argument, which must fail before the host changes, then a
#             converge, then once more, which must change nothing
#   usage: tests/run-newest-core.sh [unit] [sanity] [playbook]     (default: all three)
# The chroot shares this machine's network (the lab VM's SSH port is on 127.0.0.1). Every command
# in it runs in a mount namespace of its own (/proc, /dev, a read-only /sys, the repository and the
# lab's SSH key at their host paths, the host's CA certificates for pip): a trap unmounts them and
# they end with the namespace anyway, so nothing is ever left mounted on this machine.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
LAB=(python3 "$REPO/tests/lab/lab.py")
GUEST=debian13
NAME=${LAB_NAME:-newest-core}        # the lab instance (and host) name
CACHE=${IO_ISOLATION_CONTROLLER_CACHE:-$HOME/.cache/aiinfra-io_isolation/controllers}
WORK=$REPO/.cache/newest-core
# The chroot's recipe; its hash (with requirements/newest.txt and the Debian suite) names the cache
# dir, so a changed recipe builds a new one. Bump FORMAT when the build below changes otherwise.
FORMAT=1
PACKAGES=python3,python3-venv,git,rsync,openssh-client,shellcheck
VENV=/opt/newest-core               # inside the chroot

PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(unit sanity playbook)
for p in "${PARTS[@]}"; do
  case $p in unit | sanity | playbook) ;; *) echo "usage: $0 [unit] [sanity] [playbook]" >&2; exit 2 ;; esac
done
say() { echo "newest-core: $*"; }
now() { date +%s; }

# From lab.py: the Debian 13 suite, apt sources on this machine's mirror, the lab's SSH key.
mapfile -t INFO < <(python3 - "$REPO/tests/lab" "$GUEST" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import lab
recipe = lab.load_recipe()
g = recipe["guests"][sys.argv[2]]
print(g["suite"])
print(lab.ssh_key())
print("\n".join(lab._sources_lines(g["suite"], g.get("extra_suites", []), recipe["common"]["components"])))
EOF
)
SUITE=${INFO[0]}
KEYDIR=$(dirname "${INFO[1]}")
SOURCES=("${INFO[@]:2}")
KEY=$({ printf '%s\n' "format=$FORMAT" "suite=$SUITE" "packages=$PACKAGES" "venv=$VENV"
        cat "$REPO/requirements/newest.txt"; } | sha256sum | cut -c1-12)
DIR=$CACHE/$GUEST-$KEY
ROOT=$DIR/rootfs

mounts_under() { awk -v p="$1/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo; }

# What in_chroot runs in its own mount namespace: mount, chroot, unmount (also on failure).
MOUNT_AND_CHROOT=$(cat <<'EOF'
set -euo pipefail
root=$1 repo=$2 keydir=$3
shift 3
mounted=()
undo() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}"
  done
}
trap undo EXIT
mnt() { local target=$root$1; shift; mount "$@" "$target"; mounted+=("$target"); }
mkdir -p "$root$repo" "$root$keydir"
mnt /proc -t proc proc
mnt /sys -t sysfs -o ro,nosuid,nodev,noexec sysfs
mnt /dev --rbind /dev
mount --make-rslave "$root/dev"
mnt /etc/ssl/certs -o bind,ro /etc/ssl/certs
mnt /etc/resolv.conf -o bind,ro /etc/resolv.conf
mnt "$repo" --bind "$repo"
mnt "$keydir" -o bind,ro "$keydir"
chroot "$root" "$@"
EOF
)
# in_chroot CMD...: CMD as root in the chroot, with a clean environment, in $REPO.
in_chroot() {
  unshare --mount --propagation private -- bash -c "$MOUNT_AND_CHROOT" bash "$ROOT" "$REPO" "$KEYDIR" \
    /usr/bin/env -i -C "$REPO" HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 \
    PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PYTHONDONTWRITEBYTECODE=1 ANSIBLE_NOCOLOR=1 \
    ANSIBLE_COLLECTIONS_PATH="$REPO/.cache/collections" "$@"
}

LAB_UP=
cleanup() {
  local rc=$?
  if [ -n "$LAB_UP" ]; then "${LAB[@]}" down "$NAME" --purge || rc=1; fi
  # The mounts live in the commands' own namespaces; should one show here all the same, undo it.
  local left
  left=$(mounts_under "$DIR")
  if [ -n "$left" ]; then
    echo "newest-core: error: mounts left under $DIR: $left; unmounting" >&2
    sort -r <<<"$left" | while read -r m; do umount -R -l "$m" || true; done
    rc=1
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The chroot: Debian 13 with python3 and the pinned venv, built once per recipe (under a lock, so
# that two runs do not build it at the same time); `complete` is written last.
build_chroot() {
  [ -f "$DIR/complete" ] && { say "chroot cached: $DIR"; return; }
  if [ -e "$DIR" ]; then
    [ -z "$(mounts_under "$DIR")" ] || { echo "refusing to delete $DIR: mounts inside it" >&2; exit 1; }
    rm -rf --one-file-system "$DIR"
  fi
  mkdir -p "$DIR"
  python3 - "$REPO/tests/lab" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import lab
lab.ensure_host_tools(["mmdebstrap"])
EOF
  local mode ok=
  # unshare first (the package scripts' mounts stay private), root mode where unsharing is refused.
  for mode in unshare root; do
    say "mmdebstrap --mode=$mode $SUITE -> $ROOT"
    if mmdebstrap --mode=$mode --variant=apt --include=$PACKAGES \
        --aptopt='Acquire::Languages "none"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        "$SUITE" "$ROOT" "${SOURCES[@]}" >"$DIR/mmdebstrap-$mode.log" 2>&1; then
      ok=$mode
      break
    fi
    tail -n 15 "$DIR/mmdebstrap-$mode.log" >&2
    [ -z "$(mounts_under "$ROOT")" ] || { echo "mounts left under $ROOT" >&2; exit 1; }
    rm -rf --one-file-system "$ROOT"
  done
  [ -n "$ok" ] || { echo "newest-core: mmdebstrap failed in unshare and root mode" >&2; exit 1; }
  # Mount points for in_chroot; pip trusts the host's CA certificates (bind-mounted at run time).
  rm -f "$ROOT/etc/resolv.conf"
  : >"$ROOT/etc/resolv.conf"
  mkdir -p "$ROOT/etc/ssl/certs"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 180\ndisable-pip-version-check = true\n' \
    >"$ROOT/etc/pip.conf"
  in_chroot python3 -m venv "$VENV"
  in_chroot "$VENV/bin/python" -m pip install -q -r requirements/newest.txt
  in_chroot "$VENV/bin/python" -m pip check
  # Exactly the pins: nothing unpinned came in as a dependency.
  in_chroot "$VENV/bin/python" -m pip freeze | sort -f >"$DIR/pip-freeze.txt"
  if ! diff -u <(grep -v '^#' "$REPO/requirements/newest.txt" | sort -f) "$DIR/pip-freeze.txt" >&2; then
    echo "newest-core: requirements/newest.txt does not pin exactly what the venv holds (diff above)" >&2
    exit 1
  fi
  chroot "$ROOT" dpkg-query -W -f="\${Package} \${Version}\n" >"$DIR/packages.txt"
  printf 'key=%s\nsuite=%s\nmode=%s\nbuilt=%s\n' "$KEY" "$SUITE" "$ok" "$(date -Is)" >"$DIR/complete"
}

T_ALL=$(now)
mkdir -p "$CACHE" "$WORK"
t=$(now)
( flock 9; build_chroot ) 9>"$CACHE/$GUEST.lock"
T_CHROOT=$(($(now) - t))
VERSIONS=$(in_chroot python -c 'import sys, ansible; print(f"ansible-core {ansible.__version__} on Python {sys.version.split()[0]}")')
say "$VERSIONS (Debian 13 chroot $DIR, ready in $T_CHROOT s)"
# The collection as aiinfra.io_isolation, as `make tree` makes it.
mkdir -p "$REPO/.cache/collections/ansible_collections/aiinfra"
# (left alone when it is right: make test runs stages side by side, and ln -sfn is not atomic)
link=$REPO/.cache/collections/ansible_collections/aiinfra/io_isolation
[ "$(readlink "$link")" = "$REPO" ] || ln -sfn "$REPO" "$link"

recap() { sed -n '/^PLAY RECAP/,$p' "$1" | grep -E ' : ok=' || true; }
playbook() {
  "${LAB[@]}" down "$NAME" --purge >/dev/null # a killed run's VM
  LAB_UP=1
  local t run
  t=$(now)
  "${LAB[@]}" up "$GUEST" --name "$NAME" --boot-attempts 2
  STEPS+=("lab VM up $(($(now) - t)) s")
  "${LAB[@]}" inventory "$NAME" >"$WORK/inventory.yml"
  cat >"$WORK/groups.yml" <<EOF
# tests/run-newest-core.sh: the lab guest serves inference and trains; no calibration database.
all:
  vars:
    io_isolation_calibration_dir: ""
    io_baseline_blk_queue: {scheduler: mq-deadline, read_ahead_kb: 256}
    io_baseline_iocost_models:
      lab-nvme-a: {rbps: 2GB, rseqiops: 100000, rrandiops: 100000, wbps: 1GB, wseqiops: 50000,
                   wrandiops: 50000}
    inference_memory_low: 10%
    inference_memory_min: 32M
    training_io_max: {wbps: 90%, riops: 50%}
    training_memory_high: 50%
  children:
    inference:
      hosts:
        $NAME:
    training:
      hosts:
        $NAME:
EOF
  # A bad argument of a later role fails before the host is changed: the roles plan on the
  # controller and the one apply comes after every role's argument check (issue 22).
  say "playbook run 0: site.yml with inference_io_weight=lots must fail and change nothing"
  t=$(now)
  in_chroot ansible-playbook -i "$WORK/inventory.yml" -i "$WORK/groups.yml" playbooks/site.yml \
    -e inference_io_weight=lots 2>&1 | tee "$WORK/run0.log" || true
  recap "$WORK/run0.log" >"$WORK/recap0.txt"
  if ! grep -q ' changed=0 .* failed=1 ' "$WORK/recap0.txt" \
    || ! grep -q "inference_io_weight" "$WORK/run0.log" \
    || grep -q "Apply what the roles planned" "$WORK/run0.log"; then
    echo "newest-core: a bad inference_io_weight did not fail before the apply:" >&2
    cat "$WORK/recap0.txt" >&2
    exit 1
  fi
  STEPS+=("site.yml run 0 (bad argument, refused before the apply) $(($(now) - t)) s: $(tr -s ' ' <"$WORK/recap0.txt")")
  for run in 1 2; do
    say "playbook run $run: ansible-playbook playbooks/site.yml"
    t=$(now)
    in_chroot ansible-playbook -i "$WORK/inventory.yml" -i "$WORK/groups.yml" playbooks/site.yml \
      2>&1 | tee "$WORK/run$run.log"
    recap "$WORK/run$run.log" >"$WORK/recap$run.txt"
    grep -q ' : ok=' "$WORK/recap$run.txt" || { echo "newest-core: run $run printed no PLAY RECAP" >&2; exit 1; }
    STEPS+=("site.yml run $run $(($(now) - t)) s: $(tr -s ' ' <"$WORK/recap$run.txt")")
  done
  if grep -vq ' changed=0 ' "$WORK/recap2.txt"; then
    echo "newest-core: the second run changed something (not idempotent):" >&2
    cat "$WORK/recap2.txt" >&2
    exit 1
  fi
  "${LAB[@]}" down "$NAME" --purge
  LAB_UP=
}

# The unit tests whose outcome depends on ansible-core: the modules (AnsibleModule, the argument specs through
# ArgumentSpecValidator), the filter, lookup and action plugins, the roles and playbooks run by ansible-playbook, and
# the crash-consistency runs of the modules. The rest (codecs, the simulated host, the engine, the lab and benchmark
# scripts) is plain Python the unit stage runs, and the code that reaches hosts runs on Debian 13's Python 3.13 in the
# lab's guests; running it here again cost about 40% of this stage's unit time for no ansible-core coverage.
UNIT_TESTS=(tests/unit/plugins/modules tests/unit/plugins/filter tests/unit/plugins/lookup tests/unit/plugins/action
            tests/unit/plugins/plugin_utils tests/unit/plugins/test_crash_consistency.py tests/unit/roles
            tests/unit/playbooks)

declare -A TIME
STEPS=()
for part in "${PARTS[@]}"; do
  t=$(now)
  say "--- $part"
  case $part in
    unit)
      # pytest's temporary files (about 1 GB) in one place that each run empties first; the
      # chroot's /tmp is in the cache and would keep pytest's last three sessions otherwise.
      in_chroot python -m pytest -p no:cacheprovider --basetemp=/tmp/newest-core-unit "${UNIT_TESTS[@]}"
      rm -rf --one-file-system "$ROOT/tmp/newest-core-unit"
      ;;
    sanity) in_chroot env SANITY_PYTHON=3.13 bash tests/run-sanity.sh "$VENV/bin" ;;
    playbook) playbook ;;
  esac
  TIME[$part]=$(($(now) - t))
  say "$part passed in ${TIME[$part]} s"
done

say "summary: $VERSIONS"
say "  chroot ${T_CHROOT} s"
for part in "${PARTS[@]}"; do say "  $part ${TIME[$part]} s"; done
for step in "${STEPS[@]}"; do say "    $step"; done
say "  total $(($(now) - T_ALL)) s"
