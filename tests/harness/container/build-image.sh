#!/usr/bin/env bash
# Build the container test node image from Debian packages only (no registry):
# debootstrap a systemd Debian 12 tree and `podman import` it.
#
# The image tag carries a hash of this recipe, so the image is rebuilt exactly
# when the recipe changes and reused otherwise. Prints the image name on stdout;
# progress and timings go to stderr.
#
#   tests/harness/container/build-image.sh            # build or reuse
#   GPUDIRECT_IMAGE_FORCE=1 tests/harness/container/build-image.sh   # rebuild
set -euo pipefail

SUITE=bookworm
MIRROR=${GPUDIRECT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a freshly racked server has before our roles run: systemd as PID 1,
# python3 for Ansible, apt with signature checking, and the usual base tools.
PACKAGES=python3,python3-apt,systemd,systemd-sysv,dbus,kmod,procps,iproute2,pciutils,ca-certificates,gnupg,sudo,apt-utils,unattended-upgrades

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
recipe_hash=$( { cat "${BASH_SOURCE[0]}"; echo "$SUITE $MIRROR"; } | sha256sum | cut -c1-12)
image="localhost/gpudirect-node:debian12-${recipe_hash}"

log() { printf '[container-image] %s\n' "$*" >&2; }

if [[ -z "${GPUDIRECT_IMAGE_FORCE:-}" ]] && podman image exists "$image"; then
  log "image cached: $image"
  echo "$image"
  exit 0
fi

start=$(date +%s)
work=$(mktemp -d /var/tmp/gpudirect-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
log "debootstrap $SUITE into $work (recipe $recipe_hash)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# Container niceties: no getty on a console that does not exist, and no
# remount of a root filesystem that podman owns.
chroot "$work/rootfs" systemctl mask getty@tty1.service systemd-remount-fs.service \
  systemd-udevd.service systemd-udev-trigger.service >/dev/null 2>&1 || true
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
echo "gpudirect-node" >"$work/rootfs/etc/hostname"

tar -C "$work/rootfs" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL org.gpudirect.recipe=${recipe_hash}" - "$image" >/dev/null
# Older recipes are dead weight once a new one is built.
podman images --format '{{.Repository}}:{{.Tag}}' \
  | grep '^localhost/gpudirect-node:debian12-' | grep -v -- "-${recipe_hash}\$" \
  | xargs -r podman rmi -f >/dev/null 2>&1 || true
log "image build: $(( $(date +%s) - start )) s -> $image"
echo "$image"
