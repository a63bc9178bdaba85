#!/usr/bin/env bash
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The lab's custom kernel: Linux 6.1 from Debian's linux-source-6.1 package with the two cgroup-io
# options Debian's own kernels leave off (CONFIG_BLK_CGROUP_IOLATENCY -> io.latency,
# CONFIG_BLK_CGROUP_IOPRIO -> io.prio.class). x86_64 defconfig + kvm_guest.config + the options
# below, everything built in (CONFIG_MODULES off: virtio, NVMe, ext4), so QEMU boots it with
# -kernel and no initrd; `uname -r` ends in -vmlab.
#
#   build-kernel.sh OUTDIR
#
# Writes OUTDIR/bzImage and OUTDIR/config, and builds in OUTDIR/src (about 1.5 GB; left in place
# so a rerun with the same OUTDIR rebuilds incrementally). Missing build packages are installed
# with apt (as root, else with sudo). About 22 minutes on 2 cores. Usually run through
# `make lab-kernel` (tests/lab/lab.py kernel), which builds into a temporary directory of the lab
# cache and moves the result into place.
set -euo pipefail

usage() { echo "usage: $0 OUTDIR   (env: JOBS, default nproc)" >&2; exit 2; }
if [ $# -ne 1 ] || [ -z "$1" ]; then usage; fi
OUT=$1
JOBS=${JOBS:-$(nproc)}
SOURCE_PKG=linux-source-6.1
TARBALL=/usr/src/linux-source-6.1.tar.xz
BUILD_DEPS=("$SOURCE_PKG" flex bison bc cpio gcc make libc6-dev libelf-dev libssl-dev xz-utils perl)
ENABLE=(
    CGROUPS MEMCG BLK_CGROUP BLK_CGROUP_IOCOST BLK_CGROUP_IOLATENCY BLK_CGROUP_IOPRIO
    BLK_DEV_THROTTLING CGROUP_SCHED CFS_BANDWIDTH CGROUP_PIDS CPUSETS CGROUP_FREEZER
    CGROUP_DEVICE CGROUP_BPF BPF_SYSCALL PSI BLK_WBT BLK_WBT_MQ MQ_IOSCHED_DEADLINE
    MQ_IOSCHED_KYBER IOSCHED_BFQ BFQ_GROUP_IOSCHED BLK_DEV_NVME NVME_CORE VIRTIO_BLK
    VIRTIO_NET VIRTIO_PCI VIRTIO_CONSOLE HW_RANDOM_VIRTIO EXT4_FS DEBUG_FS IKCONFIG IKCONFIG_PROC
    BLK_DEV_IO_TRACE IO_URING AUTOFS_FS FHANDLE TMPFS TMPFS_POSIX_ACL DEVTMPFS DEVTMPFS_MOUNT
    SWAP ZSWAP SECCOMP UNIX INET PACKET BLK_DEBUG_FS SCHEDSTATS
)
DISABLE=(
    BLK_DEV_THROTTLING_LOW MODULES DEBUG_INFO DEBUG_INFO_DWARF5 DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT
    DRM SOUND USB_SUPPORT WLAN WIRELESS
)
# What the lab relies on; the build stops if olddefconfig dropped any of it.
REQUIRED=(BLK_CGROUP_IOLATENCY BLK_CGROUP_IOPRIO BLK_CGROUP_IOCOST BLK_DEV_NVME VIRTIO_BLK EXT4_FS PSI)

now() { date +%s; }
phase() {  # phase NAME START: print the phase's wall time
    echo "build-kernel: $1: $(( $(now) - $2 )) s"
}

t_start=$(now)

# 1. build dependencies, installed only when missing
missing=()
for p in "${BUILD_DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null; then
        sudo=(sudo)
    else
        echo "build-kernel: missing packages: ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
        exit 1
    fi
    echo "build-kernel: installing ${missing[*]}"
    apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600)
    "${apt[@]}" update >/dev/null
    "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -r "$TARBALL" ] || { echo "build-kernel: $TARBALL not found (package $SOURCE_PKG)" >&2; exit 1; }
source_version=$(dpkg-query -W -f='${Version}' "$SOURCE_PKG")
echo "build-kernel: $SOURCE_PKG $source_version, $JOBS jobs, output in $OUT"
phase "apt" "$t_start"

# 2. source tree
t=$(now)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$OUT/src
if [ -f "$SRC/.source-version" ] && [ "$(cat "$SRC/.source-version")" = "$source_version" ]; then
    echo "build-kernel: reusing $SRC ($source_version)"
else
    rm -rf "$SRC"
    mkdir "$SRC"
    tar -C "$SRC" --strip-components=1 -xaf "$TARBALL"
    echo "$source_version" > "$SRC/.source-version"
fi
phase "unpack" "$t"

# 3. configuration
t=$(now)
cd "$SRC"
make -s defconfig
make -s kvm_guest.config
args=()
for o in "${ENABLE[@]}"; do args+=(-e "$o"); done
for o in "${DISABLE[@]}"; do args+=(-d "$o"); done
./scripts/config "${args[@]}" --set-str LOCALVERSION "-vmlab"
make -s olddefconfig
for o in "${REQUIRED[@]}"; do
    grep -qx "CONFIG_$o=y" .config || { echo "build-kernel: CONFIG_$o is not =y after olddefconfig" >&2; exit 1; }
done
if grep -qx 'CONFIG_MODULES=y' .config; then
    echo "build-kernel: CONFIG_MODULES is still on; the lab boots without an initrd" >&2
    exit 1
fi
grep -E '^(# )?CONFIG_(BLK_CGROUP_IOLATENCY|BLK_CGROUP_IOPRIO|BLK_CGROUP_IOCOST|MODULES|BLK_DEV_NVME|VIRTIO_BLK)[= ]' .config
phase "config" "$t"

# 4. compile
t=$(now)
make -s -j"$JOBS" bzImage
release=$(make -s kernelrelease)
phase "compile" "$t"

# bzImage last: it is what marks a finished build
cp .config "$OUT/config.tmp" && mv -f "$OUT/config.tmp" "$OUT/config"
cp arch/x86/boot/bzImage "$OUT/bzImage.tmp" && mv -f "$OUT/bzImage.tmp" "$OUT/bzImage"
echo "build-kernel: $release -> $OUT/bzImage ($(stat -c %s "$OUT/bzImage") bytes)"
phase "total" "$t_start"
