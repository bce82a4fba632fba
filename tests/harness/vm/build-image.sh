#!/usr/bin/env bash
# Build the VM test node image (Debian 12 with Debian's own kernel) from Debian
# packages only: debootstrap a tree, install the kernel and the RDMA/DKMS
# tool chain inside the chroot, then `mkfs.ext4 -d` the tree into a raw image.
# The kernel and initrd are copied out next to it for direct kernel boot.
#
# Output directory (printed on stdout):
#   ${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/vm/<recipe-hash>/
#     rootfs.img        raw ext4 root filesystem (never written to: VMs boot a qcow2 overlay)
#     vmlinuz initrd.img kernel + initramfs for -kernel/-initrd
#     id_ed25519[.pub]  throwaway SSH key, root login by key only
#     kernel-release    uname -r of the guest kernel
#     packages.txt      dpkg -l of the image, for the record
#     packages.list     dpkg-query -W of the image (name, version): debian_mirror.py's seed
#     debian-slim-port  the port of the slim repository the guests' apt uses (vm.py starts it)
#
# Package sources: debootstrap and the chroot stage use the real mirror; the finished
# image's /etc/apt/sources.list names the harness's slim Debian repository,
#   deb [signed-by=/etc/apt/keyrings/gpudirect-debian-slim.gpg] http://10.0.2.2:8767/debian bookworm main
# (tests/harness/vm/debian_mirror.py, served on the host's 127.0.0.1:8767 by whatever
# starts VMs), with the harness key it signs with, and no package lists: a guest's
# first apt-get update reads the slim repository's.
#
# The hash covers this file and the files it installs from tests/harness/vm/guest/,
# the suite, the mirror, the slim repository's port and its key's fingerprint: the
# image is rebuilt exactly when the recipe changes. Builds go to a temp dir that is
# renamed into place, so an interrupted build never leaves a half image behind; a
# lock serialises runs.
#
#   tests/harness/vm/build-image.sh                       # build or reuse
#   GPUDIRECT_IMAGE_FORCE=1 tests/harness/vm/build-image.sh   # rebuild
#
# Time-budget choice: build-essential and the matching linux-headers are baked
# into the image. Under TCG emulation, downloading and unpacking a compiler in
# the guest costs minutes on every fresh VM; preinstalled, a DKMS role only
# builds (the build itself is unavoidable). A real server gets them from the
# roles; the image merely makes that step a no-op for the test.
set -euo pipefail

SUITE=bookworm
MIRROR=${GPUDIRECT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE_SIZE=${GPUDIRECT_VM_IMAGE_SIZE:-6G}   # sparse; leaves room for DKMS builds
# the slim Debian repository the guests use (debian_mirror.py; the port is baked in)
SLIM_PORT=${GPUDIRECT_DEBIAN_SLIM_PORT:-8767}

# debootstrap stage: the base system that boots and takes an ssh login.
BASE_PACKAGES=systemd,systemd-sysv,udev,dbus,kmod,procps,iproute2,iputils-ping,netbase,openssh-server,python3,python3-apt,sudo,ca-certificates,gnupg,apt-utils,less
# chroot stage: kernel (+ matching headers), RDMA user space, DKMS tool chain.
CHROOT_PACKAGES=(
  linux-image-amd64 linux-headers-amd64 initramfs-tools zstd
  pciutils rdma-core ibverbs-providers ibverbs-utils perftest
  dkms build-essential
)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
# the harness key the slim repository is signed with (made once, cached): a new key
# means a new image, whose guests trust it
slim_keyring=$(python3 "$here/debian_mirror.py" key)
slim_fpr=$(cat "${slim_keyring%.gpg}.fpr")
recipe_hash=$(
  {
    cat "$self"
    if [[ -d "$here/guest" ]]; then find "$here/guest" -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0r cat; fi
    echo "$SUITE $MIRROR $IMAGE_SIZE"
    echo "slim $SLIM_PORT $slim_fpr"
  } | sha256sum | cut -c1-16
)
cache_root=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/vm
out="$cache_root/$recipe_hash"

log() { printf '[vm-image] %s\n' "$*" >&2; }

mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9   # a second concurrent run waits here, then finds the image cached

if [[ -z "${GPUDIRECT_IMAGE_FORCE:-}" && -f "$out/rootfs.img" && -f "$out/vmlinuz" && -f "$out/initrd.img" ]]; then
  log "image cached: $out"
  echo "$out"
  exit 0
fi

for tool in debootstrap mkfs.ext4 ssh-keygen chroot; do
  command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { log "must run as root (debootstrap, chroot)"; exit 1; }

start=$(date +%s)
work=$(mktemp -d "$cache_root/.tmp-$recipe_hash.XXXXXX")
root="$work/rootfs"

umount_chroot() {
  local m
  for m in dev/pts dev sys proc; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m" || true; fi
  done
}
cleanup() {
  umount_chroot
  # --one-file-system: never follow a mount that somehow survived into the host's /dev or /proc
  if [[ -d "$work" ]]; then rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT

phase() { log "$1 (+$(( $(date +%s) - start )) s)"; }

phase "debootstrap $SUITE minbase into $root (recipe $recipe_hash)"
debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 40 "$work/debootstrap.log" >&2; exit 1; }

# ---- chroot stage -----------------------------------------------------------
cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
EOF
# no daemons started inside the chroot
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cat >"$root/etc/apt/apt.conf.d/90gpudirect-vm" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "3";
Acquire::Languages "none";
EOF
# Time-budget choice: dpkg does not fsync each file it unpacks (as Debian's own
# container images do). The guest's disk is a throwaway overlay, and a guest that
# dies mid-unpack fails its scenario either way. Measured in a TCG guest
# (2026-11-29): linux-headers-6.1.0-57-common (17,000 files) installed in 33.9 s
# with the fsyncs, 29.3 s without. The roles do not know; a real node syncs.
printf 'force-unsafe-io\n' >"$root/etc/dpkg/dpkg.cfg.d/gpudirect-vm-unsafe-io"
# initramfs: only what a virtio/ext4 root needs (MODULES=list: the modules file).
# Time-budget choice: with MODULES=most every initramfs holds ~750 modules and
# each update-initramfs (kernel install, DKMS, nouveau blacklist) took ~13 min
# under TCG; the list keeps it to seconds and boots the same root.
mkdir -p "$root/etc/initramfs-tools/conf.d"
printf 'MODULES=list\n' >"$root/etc/initramfs-tools/conf.d/gpudirect-vm.conf"
printf 'virtio_pci\nvirtio_blk\nvirtio_net\next4\ncrc32c_generic\n' >>"$root/etc/initramfs-tools/modules"
# kernel postinst wants a valid fstab and /proc
cat >"$root/etc/fstab" <<'EOF'
/dev/vda  /  ext4  rw,errors=remount-ro  0  0
EOF

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"

phase "apt-get install kernel, headers, rdma-core, perftest, dkms, build-essential"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C \
  sh -c 'apt-get update && apt-get install -y "$@"' sh "${CHROOT_PACKAGES[@]}" >"$work/apt.log" 2>&1 \
  || { tail -n 40 "$work/apt.log" >&2; exit 1; }

# shellcheck disable=SC2016  # ${Depends} is dpkg-query's field, not a shell expansion
kver=$(chroot "$root" dpkg-query -W -f='${Depends}' linux-image-amd64 | grep -o 'linux-image-[^ ,]*' | head -1 | sed 's/^linux-image-//')
[[ -n "$kver" && -f "$root/boot/vmlinuz-$kver" && -f "$root/boot/initrd.img-$kver" ]] \
  || { log "kernel/initrd for '$kver' not found in /boot"; ls -l "$root/boot" >&2; exit 1; }
[[ -d "$root/usr/src/linux-headers-$kver" ]] || { log "headers for $kver missing"; exit 1; }
chroot "$root" dpkg -l >"$work/packages.txt"
# shellcheck disable=SC2016  # dpkg-query's fields, not shell expansions
chroot "$root" dpkg-query -W -f='${Package}\t${Version}\n' >"$work/packages.list"

# ---- guest configuration ----------------------------------------------------
phase "configure guest (ssh key, networkd, serial console, pair link)"
echo "gpudirect-vm" >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tgpudirect-vm\n' >"$root/etc/hosts"
: >"$root/etc/machine-id"                  # fresh id at each VM's first boot
rm -f "$root/var/lib/dbus/machine-id"

ssh-keygen -q -t ed25519 -N '' -C "gpudirect-vm-throwaway" -f "$work/id_ed25519"
install -d -m 700 "$root/root/.ssh"
install -m 600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
cat >"$root/etc/ssh/sshd_config.d/gpudirect-vm.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
EOF

# DHCP on every NIC through systemd-networkd; slirp's DNS is static.
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/20-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF
rm -f "$root/etc/resolv.conf"
printf 'nameserver 10.0.2.3\n' >"$root/etc/resolv.conf"

# Private link between two VMs (qemu -netdev socket): no DHCP there. vm.py
# passes gpudirect.pairnet=MAC,ADDR/PREFIX on the kernel command line; this unit
# turns it into a static networkd config before networkd starts.
cat >"$root/usr/local/sbin/gpudirect-pairnet" <<'EOF'
#!/bin/sh
set -eu
arg=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^gpudirect\.pairnet=//p' | tail -n 1)
[ -n "$arg" ] || exit 0
mac=${arg%%,*}; addr=${arg#*,}
mkdir -p /run/systemd/network
cat >/run/systemd/network/10-pairnet.network <<NET
[Match]
MACAddress=$mac

[Network]
Address=$addr
LinkLocalAddressing=no
IPv6AcceptRA=no
NET
EOF
chmod 755 "$root/usr/local/sbin/gpudirect-pairnet"
cat >"$root/etc/systemd/system/gpudirect-pairnet.service" <<'EOF'
[Unit]
Description=Static address for the VM pair link (from the kernel command line)
DefaultDependencies=no
Before=systemd-networkd.service
After=local-fs.target
ConditionKernelCommandLine=gpudirect.pairnet

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gpudirect-pairnet

[Install]
WantedBy=systemd-networkd.service
EOF

# Boot loader stand-in. The VM boots with qemu -kernel/-initrd (no firmware boot
# loader), so a kernel update inside the guest would never be booted. At every
# shutdown the guest writes its default boot kernel (/vmlinuz, /initrd.img, the
# links Debian moves to the newest kernel; else the newest /boot/vmlinuz-*) as a
# tar archive onto a small raw disk (serial gpudirect-boot); vm.py boots the next
# qemu from that archive, as a boot loader would boot the default entry. When the
# guest has /boot/grub/grub.cfg (a test installed GRUB's config tools), the archive
# also carries grub.cfg, grubenv and /boot's kernels, and vm.py boots GRUB's choice.
cat >"$root/usr/local/sbin/gpudirect-boot-handoff" <<'EOF'
#!/bin/sh
set -eu
disk=/dev/disk/by-id/virtio-gpudirect-boot
[ -b "$disk" ] || exit 0
if [ -e /vmlinuz ] && [ -e /initrd.img ]; then
  k=$(readlink -f /vmlinuz); i=$(readlink -f /initrd.img)
else
  v=$(ls /boot/vmlinuz-* | sed 's|^/boot/vmlinuz-||' | sort -V | tail -n 1)
  k=/boot/vmlinuz-$v; i=/boot/initrd.img-$v
fi
d=$(mktemp -d)
ln -s "$k" "$d/vmlinuz"; ln -s "$i" "$d/initrd.img"; basename "$k" | sed 's/^vmlinuz-//' >"$d/kernel-release"
# with a GRUB configuration, also its menu, environment block and every kernel it can
# name: vm.py boots the entry GRUB would choose (tests/harness/vm/grub_menu.py)
set --
if [ -f /boot/grub/grub.cfg ]; then
  cd /
  set -- -C / boot/grub/grub.cfg $(ls -d boot/grub/grubenv boot/vmlinuz-* boot/initrd.img-* 2>/dev/null || true)
fi
tar -chf "$disk" -C "$d" vmlinuz initrd.img kernel-release "$@"
sync
rm -rf "$d"
EOF
chmod 755 "$root/usr/local/sbin/gpudirect-boot-handoff"
cat >"$root/etc/systemd/system/gpudirect-boot-handoff.service" <<'EOF'
[Unit]
Description=Test VM boot loader stand-in: hand the default boot kernel to the host at shutdown
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=/usr/local/sbin/gpudirect-boot-handoff

[Install]
WantedBy=multi-user.target
EOF

# Under TCG an Ansible task spends ~1 s compiling its AnsiballZ zip's sources:
# the guest's python3 keeps what it compiled from zips (guest/, which says more)
pydist="$root/usr/lib/python3/dist-packages"
install -m 644 "$here/guest/gpudirect_testbed_zipcache.py" "$pydist/"
echo "import gpudirect_testbed_zipcache" >"$pydist/gpudirect_testbed_zipcache.pth"

chroot "$root" systemctl enable systemd-networkd.service gpudirect-pairnet.service serial-getty@ttyS0.service \
  gpudirect-boot-handoff.service >/dev/null 2>&1
# Boot time under TCG is precious: nothing waits for the network, no periodic jobs.
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer systemd-timesyncd.service >/dev/null 2>&1 || true

# The guests' Debian: the slim repository on the host (debian_mirror.py; why: README.md,
# "Debian packages"), signed with the harness key. Debian's own mirror served the build
# above; a guest never uses it.
install -d -m 755 "$root/etc/apt/keyrings"
install -m 644 "$slim_keyring" "$root/etc/apt/keyrings/gpudirect-debian-slim.gpg"
cat >"$root/etc/apt/sources.list" <<EOF
# the VM tests' slim Debian repository (the host's tests/harness/vm/debian_mirror.py)
deb [signed-by=/etc/apt/keyrings/gpudirect-debian-slim.gpg] http://10.0.2.2:$SLIM_PORT/debian $SUITE main
EOF
# for vm.py: this image's guests need the slim repository served on this port
echo "$SLIM_PORT" >"$work/debian-slim-port"

# tidy up: no policy-rc.d, no package cache, no apt lists (the roles run apt-get update,
# which reads the slim repository's)
rm -f "$root/usr/sbin/policy-rc.d"
chroot "$root" apt-get clean
rm -rf "$root/var/lib/apt/lists/"* "$root/var/log/"*.log "$root/var/log/apt/"* "$root/tmp/"*
umount_chroot

# ---- image ------------------------------------------------------------------
phase "mkfs.ext4 -d ($IMAGE_SIZE sparse)"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
echo "$kver" >"$work/kernel-release"
truncate -s "$IMAGE_SIZE" "$work/rootfs.img"
mkfs.ext4 -q -F -L gpudirect-root -d "$root" "$work/rootfs.img" >"$work/mkfs.log" 2>&1 \
  || { cat "$work/mkfs.log" >&2; exit 1; }
chmod 444 "$work/rootfs.img"
echo "$recipe_hash" >"$work/recipe-hash"
rm -rf --one-file-system "$root"

# atomic publish: rename the finished temp dir onto the hash dir
if [[ -e "$out" ]]; then rm -rf --one-file-system "$out"; fi
mv "$work" "$out"
trap - EXIT
# Older recipes stay: a VM (of this or another scenario) may still boot from
# one, and a cold reboot reopens its backing file. Prune on request only.
if [[ -n "${GPUDIRECT_VM_PRUNE:-}" ]]; then
  for old in "$cache_root"/*/; do
    old=${old%/}
    [[ "$old" == "$out" || ! -f "$old/recipe-hash" ]] && continue
    log "prune $old"
    rm -rf --one-file-system "$old"
  done
fi
log "image build: $(( $(date +%s) - start )) s -> $out (kernel $kver)"
echo "$out"
