#!/usr/bin/env bash
# Prove the stand-in DKMS behaviour against Debian 12's real kernel headers,
# without a VM: a debootstrap chroot (linux-headers-amd64, dkms, build-essential)
# installs the stand-in packages with apt from the served repository
# (http://127.0.0.1:PORT/, signed-by the throwaway keys) and the resulting
# modules are inspected with modinfo / nm / modprobe --dump-modversions.
#
# Scenarios (each from a clean state of the stand-in packages):
#   A  NVIDIA stand-in only (no OFED)       -> nvidia-peermem.ko: no OFED dependency, stub init (-EINVAL)
#   B  OFED first, then NVIDIA              -> nvidia-peermem.ko depends on ib_peer_mem, links the symbols
#   C  NVIDIA first, then OFED, no rebuild  -> still the stub; after `dkms remove/install` of nvidia: linked
#
#   tests/harness/standin_repo/prove_dkms.sh [CHROOT_DIR]
# CHROOT_DIR defaults to ${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/standin-chroot
# (made with debootstrap when missing, ~3 min). Needs root, debootstrap.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}
CH=${1:-$cache/standin-chroot}
PORT=${GPUDIRECT_STANDIN_PORT:-8765}
MIRROR=${GPUDIRECT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { printf '\n=== %s\n' "$*"; }

if [[ ! -x "$CH/usr/sbin/dkms" ]]; then
  say "debootstrap $CH"
  rm -rf "$CH.tmp"
  debootstrap --variant=minbase \
    --include=linux-headers-amd64,dkms,build-essential,kmod,ca-certificates,gnupg,binutils \
    bookworm "$CH.tmp" "$MIRROR" >/dev/null
  mv "$CH.tmp" "$CH"
fi

eval "$("$here/serve.sh" start "$PORT" 2>/dev/null)"

mounted=()
mnt() { mount --bind "$1" "$2"; mounted+=("$2"); }
cleanup() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
mnt /proc "$CH/proc"; mnt /sys "$CH/sys"; mnt /dev "$CH/dev"; mnt /dev/pts "$CH/dev/pts"

KVER=$(ls "$CH/lib/modules" | sort -V | tail -n1)
in_ch() { chroot "$CH" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }

say "apt sources in the chroot (what a role writes; only base URL and key differ from the real vendors')"
install -d "$CH/etc/apt/keyrings"
cp "$STANDIN_DOCA_KEYRING" "$CH/etc/apt/keyrings/doca-standin.gpg"
cp "$STANDIN_CUDA_KEYRING" "$CH/etc/apt/keyrings/cuda-standin.gpg"
H=${STANDIN_BASE_URL_HOST%/}
cat > "$CH/etc/apt/sources.list.d/doca.list" <<EOF
deb [signed-by=/etc/apt/keyrings/doca-standin.gpg] $H/public/repo/doca/2.9.1/debian12/x86_64/ ./
EOF
cat > "$CH/etc/apt/sources.list.d/cuda-debian12-x86_64.list" <<EOF
deb [signed-by=/etc/apt/keyrings/cuda-standin.gpg] $H/compute/cuda/repos/debian12/x86_64/ /
EOF
cat "$CH"/etc/apt/sources.list.d/*.list
printf '#!/bin/sh\nexit 101\n' > "$CH/usr/sbin/policy-rc.d"; chmod 755 "$CH/usr/sbin/policy-rc.d"
in_ch apt-get update -o Dpkg::Use-Pty=0 2>&1 | grep -v '^Get:\|^Ign:\|^Hit:' || true
in_ch apt-cache policy nvidia-open doca-ofed | sed -n '1,20p'

purge_all() {
  in_ch sh -c 'pkgs=$(dpkg-query -W -f="\${Package} \${Status}\n" "nvidia-*" "cuda-drivers*" "doca-*" "mlnx-ofed-*" 2>/dev/null | awk "/ installed\$/{print \$1}"); [ -z "$pkgs" ] || apt-get -y -q purge $pkgs' >/tmp/purge.log 2>&1 || { echo "purge failed:"; tail -n 20 /tmp/purge.log; }
  rm -rf "$CH/usr/src/ofa_kernel" "$CH/var/lib/dkms/nvidia" "$CH/var/lib/dkms/mlnx-ofed-kernel"
}

show_peermem() {
  local ko
  ko=$(in_ch sh -c "ls /lib/modules/$KVER/updates/dkms/nvidia-peermem.ko* 2>/dev/null | head -n1")
  echo "module file:     $ko"
  echo "modinfo depends: '$(in_ch modinfo -F depends "$ko")'"
  echo "modinfo version: $(in_ch modinfo -F version "$ko")   license: $(in_ch modinfo -F license "$ko")"
  echo "undefined symbols of interest (nm -u):"
  in_ch sh -c "nm -u '$ko' | grep -E 'peer_memory_client|nvidia_p2p' || echo '  (none)'"
  echo "modversions (modprobe --dump-modversions) of interest:"
  in_ch sh -c "modprobe --dump-modversions '$ko' | grep -E 'peer_memory_client|nvidia_p2p' || echo '  (none)'"
  echo "init function compiled (objdump of nv_mem_client_init):"
  in_ch sh -c "objdump -d --no-show-raw-insn '$ko' 2>/dev/null | awk '/<init_module>:|<nv_mem_client_init>:/{p=1} p&&/^\$/{exit} p' | grep -E 'mov +\\\$0xffffffea|call|ret' | head -n 8"
}

say "A: NVIDIA stand-in installed WITHOUT OFED (apt-get install nvidia-open=580.95.05-1)"
purge_all
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 nvidia-open=580.95.05-1 nvidia-driver-cuda=580.95.05-1 \
  nvidia-kernel-open-dkms=580.95.05-1 nvidia-smi=580.95.05-1 nvidia-persistenced=580.95.05-1 2>&1 \
  | grep -E 'Setting up|Building|Installing|nvidia-peermem:|Error|error' || true
in_ch dkms status
show_peermem
echo "nvidia.ko: depends='$(in_ch modinfo -k "$KVER" -F depends nvidia)' license='$(in_ch modinfo -k "$KVER" -F license nvidia)' version=$(in_ch modinfo -k "$KVER" -F version nvidia)"

say "A (explicit): dkms build / install -k $KVER of the same module, forced"
in_ch dkms build -m nvidia -v 580.95.05 -k "$KVER" --force 2>&1 | tail -n 3
echo "Kbuild decision (make.log):"; in_ch sh -c "grep -h 'nvidia-peermem:' /var/lib/dkms/nvidia/580.95.05/$KVER/x86_64/log/make.log | sort -u"
in_ch dkms install -m nvidia -v 580.95.05 -k "$KVER" --force 2>&1 | tail -n 3
show_peermem

say "B: OFED FIRST (apt-get install doca-ofed), then NVIDIA"
purge_all
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 doca-ofed 2>&1 | grep -E 'Setting up|Building|Error|error' || true
echo "ofed_info -s: $(in_ch ofed_info -s)    ofed_info -n: $(in_ch ofed_info -n)"
echo "OFED module: $(in_ch modinfo -k "$KVER" -F filename ib_peer_mem)  depends='$(in_ch modinfo -k "$KVER" -F depends ib_peer_mem)'"
echo "/usr/src/ofa_kernel:"; (cd "$CH" && find usr/src/ofa_kernel -maxdepth 3 | sort | sed 's/^/  \//')
echo "default -> $(readlink -f "$CH/usr/src/ofa_kernel/default" | sed "s#^$CH##")"
grep -P '\tib_(un)?register_peer_memory_client\t' "$CH/usr/src/ofa_kernel/x86_64/$KVER/Module.symvers"
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 nvidia-open=580.95.05-1 nvidia-driver-cuda=580.95.05-1 \
  nvidia-kernel-open-dkms=580.95.05-1 nvidia-smi=580.95.05-1 nvidia-persistenced=580.95.05-1 2>&1 \
  | grep -E 'Setting up|Error|error' || true
in_ch dkms status
show_peermem

say "C: NVIDIA FIRST, OFED afterwards (no rebuild): the stub stays until nvidia is rebuilt"
purge_all
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 nvidia-open=580.95.05-1 nvidia-driver-cuda=580.95.05-1 \
  nvidia-kernel-open-dkms=580.95.05-1 nvidia-smi=580.95.05-1 nvidia-persistenced=580.95.05-1 >/dev/null 2>&1
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 doca-ofed >/dev/null 2>&1
echo "-- after OFED install, before rebuild:"
show_peermem
echo "-- dkms remove + install of nvidia/580.95.05 for $KVER:"
in_ch dkms remove -m nvidia -v 580.95.05 -k "$KVER" >/dev/null 2>&1
in_ch dkms build -m nvidia -v 580.95.05 -k "$KVER" 2>&1 | tail -n 2
echo "Kbuild decision (make.log):"; in_ch sh -c "grep -h 'nvidia-peermem:' /var/lib/dkms/nvidia/580.95.05/$KVER/x86_64/log/make.log | sort -u"
in_ch dkms install -m nvidia -v 580.95.05 -k "$KVER" 2>&1 | tail -n 2
show_peermem

say "upgrade: DOCA 2.9.1 -> 2.10.0 repository, NVIDIA 580.95.05 -> 580.105.08"
sed -i 's#/doca/2.9.1/#/doca/2.10.0/#' "$CH/etc/apt/sources.list.d/doca.list"
in_ch apt-get update -q >/dev/null 2>&1
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 doca-ofed nvidia-open=580.105.08-1 nvidia-driver-cuda=580.105.08-1 \
  nvidia-kernel-open-dkms=580.105.08-1 nvidia-smi=580.105.08-1 nvidia-persistenced=580.105.08-1 2>&1 \
  | grep -E 'Unpacking|Error|error' || true
echo "ofed_info -s: $(in_ch ofed_info -s)"
in_ch dkms status
show_peermem
sed -i 's#/doca/2.10.0/#/doca/2.9.1/#' "$CH/etc/apt/sources.list.d/doca.list"

say "GDRCopy after the driver: apt-get install gdrdrv-dkms libgdrapi gdrcopy-tests (gdrdrv links against nvidia)"
in_ch apt-get install -y -q -o Dpkg::Use-Pty=0 gdrdrv-dkms libgdrapi gdrcopy-tests 2>&1 | grep -E 'Setting up|Building|Error|error' || true
in_ch dkms status gdrdrv
echo "gdrdrv.ko: depends='$(in_ch modinfo -k "$KVER" -F depends gdrdrv)' nvidia_src='$(in_ch modinfo -k "$KVER" -F nvidia_src gdrdrv)'"
echo "gdrdrv imports: $(in_ch sh -c "modprobe --dump-modversions \$(modinfo -k $KVER -F filename gdrdrv) | grep nvidia_p2p")"
echo "gdrcopy_sanity in the chroot (no GPU: the real tool's CUDA_ERROR_NO_DEVICE failure):"; in_ch gdrcopy_sanity 2>&1 | head -n 3 || true
in_ch apt-get -y -q purge gdrcopy-tests libgdrapi gdrdrv-dkms >/dev/null 2>&1 || true

say "nvidia-smi without the module loaded (real message, exit 9)"
in_ch nvidia-smi || echo "exit=$?"
purge_all
rm -f "$CH/usr/sbin/policy-rc.d"
