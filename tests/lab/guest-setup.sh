#!/bin/sh
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Guest configuration for the lab images, run by mmdebstrap as a hook on the
# controller (as root, in mmdebstrap's private mount namespace):
#   guest-setup.sh setup     ROOTDIR                     (before any package is installed)
#   guest-setup.sh customize ROOTDIR HOSTNAME PUBKEYFILE (after all packages are installed)
# The content of this file and of guest-codecache.py is part of the recipe hash (lab.py), so any
# edit here rebuilds the cached images.
set -eu

stage=$1
root=$2

case "$stage" in
setup)
    # Must exist before linux-image-amd64's postinst runs update-initramfs.
    # Debian's default MODULES=most puts nvme.ko into the initramfs, so nvme
    # binds before the root filesystem is mounted and /etc/modprobe.d on the
    # root fs is never read (docs/kernel-files.md, "The lab's guests").
    # MODULES=list plus the hook below gives an initramfs with only what a
    # virtio root needs; nvme then loads from the root filesystem via udev,
    # where /etc/modprobe.d applies. It also keeps
    # the initramfs small, which matters because the kernel is booted directly
    # with -kernel/-initrd (the guest's own /boot is never used).
    mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
    echo 'MODULES=list' > "$root/etc/initramfs-tools/conf.d/aiinfra-lab.conf"
    # A hook instead of /etc/initramfs-tools/modules: that file is a dpkg
    # conffile and pre-seeding it would make dpkg ask about it.
    cat > "$root/etc/initramfs-tools/hooks/aiinfra-lab-virtio-root" <<'EOF'
#!/bin/sh
case "$1" in prereqs) exit 0;; esac
. /usr/share/initramfs-tools/hook-functions
# virtio root disk on q35 (PCI) + its filesystem; udev in the initramfs loads
# virtio_pci/virtio_blk by modalias, scripts/local modprobes the fs type.
manual_add_modules virtio_pci virtio_blk ext4 crc32c_generic
EOF
    chmod 0755 "$root/etc/initramfs-tools/hooks/aiinfra-lab-virtio-root"
    ;;

customize)
    hostname=$3
    pubkey=$4

    echo "$hostname" > "$root/etc/hostname"
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$hostname" > "$root/etc/hosts"
    # mmdebstrap copied the controller's resolv.conf; the guest has no DNS
    # (QEMU user net with restrict=on), so do not leak the host's.
    echo '# lab guest: no DNS (QEMU user networking, restrict=on)' > "$root/etc/resolv.conf"

    # Raw ext4 image, no partition table; the kernel mounts it rw (-append rw),
    # so no fsck pass (it would be skipped on a rw root anyway).
    cat > "$root/etc/fstab" <<'EOF'
/dev/vda        /                   ext4     rw,errors=remount-ro  0 0
debugfs         /sys/kernel/debug   debugfs  defaults              0 0
EOF

    # Root login with the per-lab key only.
    install -d -m 0700 "$root/root/.ssh"
    install -m 0600 "$pubkey" "$root/root/.ssh/authorized_keys"
    mkdir -p "$root/etc/ssh/sshd_config.d"
    cat > "$root/etc/ssh/sshd_config.d/aiinfra-lab.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
EOF

    # The bytecode cache for the modules Ansible sends (guest-codecache.py says why): loaded by a
    # .pth file at every interpreter start.
    # (Debian's python3 reads .pth files in /usr/lib/python3/dist-packages.)
    site=$root/usr/lib/python3/dist-packages
    install -D -m 0644 "$(dirname "$0")/guest-codecache.py" "$site/aiinfra_lab_codecache.py"
    echo 'import aiinfra_lab_codecache' > "$site/aiinfra-lab-codecache.pth"

    # DHCP on whatever ethernet NIC QEMU gives us (name depends on PCI slot).
    mkdir -p "$root/etc/systemd/network"
    cat > "$root/etc/systemd/network/80-aiinfra-lab.network" <<'EOF'
[Match]
Type=ether

[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF
    chroot "$root" systemctl enable systemd-networkd.service
    # Serial login prompt (the systemd getty generator would add it for
    # console=ttyS0 too; explicit is clearer).
    chroot "$root" systemctl enable serial-getty@ttyS0.service
    # Nothing in the lab waits for network-online; a guest with no uplink
    # would otherwise sit in wait-online for two minutes when something does.
    chroot "$root" systemctl mask systemd-networkd-wait-online.service
    # Periodic jobs would add I/O noise to isolation tests; mask those present.
    for t in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
             fstrim.timer man-db.timer dpkg-db-backup.timer; do
        chroot "$root" systemctl mask "$t" >/dev/null 2>&1 || true
    done
    # Boot-time units the lab never uses, masked where present: each costs seconds of every TCG boot (Debian 12,
    # systemd-analyze blame on a quiet host: podman-auto-update 5.0 s, nvmf-autoconnect 4.8 s, podman-restart 3.6 s,
    # modprobe@drm 3.4 s; e2scrub_reap 11.9 s on a loaded Debian 13 boot). No lab container uses a restart policy or
    # auto-update, no disk is NVMe over fabrics, there is no display and no LVM.
    for u in podman-auto-update.service podman-auto-update.timer podman-restart.service nvmf-autoconnect.service \
             modprobe@drm.service e2scrub_reap.service; do
        chroot "$root" systemctl mask "$u" >/dev/null 2>&1 || true
    done
    # The container runtimes are installed for the scenario that uses them (colocated enables and
    # starts docker.service); dockerd and containerd at every boot would cost every scenario's TCG boots.
    chroot "$root" systemctl disable docker.service docker.socket containerd.service >/dev/null 2>&1 || true

    # Fail the build early if the initramfs trap is back (see setup above).
    initrd=$(find "$root/boot" -maxdepth 1 -name 'initrd.img-*' | sort | head -n1)
    contents=$(chroot "$root" lsinitramfs "/boot/${initrd##*/}")
    if printf '%s\n' "$contents" | grep -q '/nvme/host/nvme\.ko'; then
        echo "guest-setup: nvme.ko is in the initramfs; /etc/modprobe.d would not apply" >&2
        exit 1
    fi
    if ! printf '%s\n' "$contents" | grep -q '/virtio_blk\.ko'; then
        echo "guest-setup: virtio_blk.ko missing from the initramfs; the root would not mount" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: $0 setup|customize ROOTDIR [HOSTNAME PUBKEYFILE]" >&2
    exit 2
    ;;
esac
