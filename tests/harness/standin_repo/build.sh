#!/usr/bin/env bash
# Build the STAND-IN vendor apt repositories (DOCA-OFED, MLNX_OFED, CUDA) that
# imitate NVIDIA's real ones for the tests. See README.md next to this file.
#
# Output (path printed on stdout, last line):
#   ${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/standin-repo/<hash>/
#     www/                           document root that serve.sh serves
#       public/repo/doca/GPG-KEY-Mellanox.pub               (ASCII key, as the real site)
#       public/repo/doca/<doca-ver>/debian12/x86_64/        flat repo: ./  (InRelease, Release[.gpg], Packages[.gz], *.deb)
#       public/repo/doca/<doca-ver>/debian12/arm64-sbsa/    the same packages, Architecture: arm64
#       public/repo/mlnx_ofed/<ofed-ver>/debian12.5/x86_64/ flat repo: ./
#       compute/cuda/repos/debian12/x86_64/                 flat repo: /   (+ <keyid>.pub, as the real site)
#       compute/cuda/repos/debian12/sbsa/                   the same packages, Architecture: arm64 (+ <keyid>.pub)
#       keys/{doca,cuda}-archive-keyring.{gpg,asc,fpr}      binary + ASCII public keys, fingerprint
#     keys/                          same public keys, for file:// use
#     repo.env                       shell variables: paths, key ids, versions
#     packages.txt                   package list with versions, per repo
#   ${...}/standin-repo/current -> <hash>   (symlink, replaced atomically)
#
# The hash covers this script, src/, the H200 fixtures and the GDRCopy outputs: the repository is
# rebuilt exactly when one of them changes. The build runs in a temp dir that
# is renamed into place; a lock serialises concurrent runs. Two throwaway
# signing keys (one per vendor, as in reality) are generated per build in a
# temporary GNUPGHOME; only the public halves are kept.
#
#   tests/harness/standin_repo/build.sh                 # build or reuse
#   GPUDIRECT_STANDIN_FORCE=1 tests/harness/standin_repo/build.sh   # rebuild
#
# Needs: dpkg-deb, apt-ftparchive (apt-utils), gpg, gzip, sha256sum, flock.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$here/../../.." && pwd)
# the H200 node's nvidia-smi outputs (kept in the repository; GPUDIRECT_H200_FIXTURES
# may name another folder with the same three files)
FIXTURES=${GPUDIRECT_H200_FIXTURES:-$repo_root/tests/fixtures/gpu_node/h200/capture}

# ---- what is built ---------------------------------------------------------
# DOCA-Host releases: "<doca version> <OFED version as ofed_info -s prints it>" (one repo
# each, as upstream). DOCA 2.9.1 prints a build suffix: OFED-internal-24.10-1.1.4.0.200:
# (github.com/cnloh/notes DGX-download-needed-debs-4-EXA-client-offline-install.md, repo
# doca/2.9.1-2); 2.10.0 prints OFED-internal-25.01-0.6.0: (a libvma banner), no suffix.
DOCA_RELEASES=("2.9.1 24.10-1.1.4.0.200" "2.10.0 25.01-0.6.0")
# MLNX_OFED (legacy, pre-DOCA) release: one repo
MLNX_OFED_RELEASES=("24.10-1.1.4.0")
# NVIDIA driver versions, all in the one CUDA repo (as upstream)
NVIDIA_VERSIONS=("580.95.05" "580.105.08")
NVIDIA_BRANCH=580
# NVLSM (NVLink subnet manager) has its own version scheme; the real binary reports
# "OpenSM 2025.06.5_eb3b4ba_df9bb3c_ae214d2". The package version is the stand-in's shape.
NVLSM_VERSION=2025.06.5
NVLSM_VERSION_STRING=2025.06.5_eb3b4ba_df9bb3c_ae214d2
# the R570 data-centre release: the pre-580 package names (nvidia-fabricmanager-570,
# nvidia-imex-570) are built at this version, for their names and version shape only
NVIDIA_570_VERSION=570.133.20
CUDA_VERSION_FOR_DRIVER=13.0
# GDRCopy release in the CUDA repository stand-in (a real release: NVIDIA publishes
# gdrdrv-dkms_2.5.1-1, libgdrapi_2.5.1-1, gdrcopy-tests_2.5.1-1, gdrcopy_2.5.1-1 under
# developer.download.nvidia.com/compute/redist/gdrcopy/). The tests package prints what
# the real tools print on a node with no GPU, kept in tests/fixtures/gdrcopy/ (no test
# node has one; no published passing output or bandwidth is shipped).
GDRCOPY_VERSION=2.5.1
GDRCOPY_FIXTURES="$repo_root/tests/fixtures/gdrcopy"
# mstflint as the OFED repositories ship it (mstconfig, for roles/gpudirect_nic_config): upstream 4.16.1, the
# release "2.<OFED release digits>". Sources of the shape: MLNX_OFED 5.6-2.0.9.0's DEBS hold
# mstflint_4.16.1-2.56209_amd64.deb (a public install note listing that folder), and the source
# bundle MLNX_OFED_SRC-24.04-0.6.6.0 still carries SOURCES/mstflint_4.16.1.orig.tar.gz (a public
# listing of it). The versions for 24.10 and 25.01 (4.16.1-2.2410114, 4.16.1-2.2501060) follow that
# shape; they were not checked against NVIDIA's repositories.
MSTFLINT_UPSTREAM=4.16.1
mstflint_version() { local d=${1//./}; echo "$MSTFLINT_UPSTREAM-2.${d//-/}"; }   # 24.10-1.1.4 -> 4.16.1-2.2410114
# MFT (NVIDIA Firmware Tools, package mft: mlxconfig, for roles/gpudirect_nic_config) as the OFED repositories
# ship it next to mstflint, at the version NVIDIA pairs with the OFED release. Sources: the MFT
# documentation's "Legal Notices and 3rd Party Licenses" pages list the bundle each MFT release goes
# with: docs.nvidia.com/networking/display/mftv43011210lts/Legal+Notices+and+3rd+Party+Licenses
# (MFT 4.30.1-1210 LTS, MLNX_OFED 24.10-1.1.4.0) and
# docs.nvidia.com/networking/display/mftv4310/Legal+Notices+and+3rd+Party+Licenses (MFT 4.31.0-149,
# OFED drivers 25.01). The deb's exact Version field in NVIDIA's repositories was not checked.
mft_version() {
  case $1 in
    24.10-*) echo 4.30.1-1210 ;;
    25.01-*) echo 4.31.0-149 ;;
    *) die "mft_version: no MFT release known for OFED $1 (add it next to its source)" ;;
  esac
}
FORMAT=1   # bump to force a rebuild when the layout logic changes

log() { printf '[standin-repo] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for tool in dpkg-deb apt-ftparchive gpg gzip sha256sum flock; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install dpkg-dev apt-utils gnupg util-linux)"
done
for f in nvidia-smi-q.txt nvidia-smi-topo.txt nvidia-smi-query.csv; do
  [[ -f "$FIXTURES/$f" ]] || die "fixture $FIXTURES/$f missing (set GPUDIRECT_H200_FIXTURES)"
done

recipe_hash=$(
  {
    echo "format=$FORMAT"
    cat "$here/build.sh"
    (cd "$here" && find src -type f -print0 | sort -z | xargs -0 sha256sum)
    (cd "$FIXTURES" && sha256sum nvidia-smi-q.txt nvidia-smi-topo.txt nvidia-smi-query.csv)
    (cd "$GDRCOPY_FIXTURES" && sha256sum sanity-no-gpu-v2.5.1.stdout sanity-no-gpu-v2.5.1.stderr \
                                 copybw-no-gpu-v2.5.1.stderr)
  } | sha256sum | cut -c1-16
)
cache_root=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/standin-repo
out="$cache_root/$recipe_hash"
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9

if [[ -z "${GPUDIRECT_STANDIN_FORCE:-}" && -f "$out/repo.env" ]]; then
  log "repository cached: $out"
  ln -sfn "$recipe_hash" "$cache_root/.current.tmp" && mv -T "$cache_root/.current.tmp" "$cache_root/current"
  echo "$out"
  exit 0
fi

t0=$(date +%s)
work=$(mktemp -d "$cache_root/.tmp-$recipe_hash.XXXXXX")
# GNUPGHOME in a short path of its own: gpg-agent's socket path must stay under the
# 108-byte limit of a Unix socket name, which a deep GPUDIRECT_CACHE (a pytest tmp dir) passes
export GNUPGHOME
GNUPGHOME=$(mktemp -d "${TMPDIR:-/tmp}/standin-gpg.XXXXXX")
cleanup() { gpgconf --kill gpg-agent >/dev/null 2>&1 || true; rm -rf "$work" "$GNUPGHOME"; }
trap cleanup EXIT
export SOURCE_DATE_EPOCH=1735689600   # 2025-01-01: reproducible file dates in .debs
stage="$work/stage"
www="$work/www"
mkdir -p "$stage" "$www" "$work/keys"

MAINT="gpudirect-rdma test harness <standin@gpudirect-rdma.invalid>"

# ---- helpers -----------------------------------------------------------------
# new_pkg NAME VERSION ARCH -> prints the staging root; write files under it
new_pkg() {
  local root="$stage/$1_$2_$3"
  rm -rf "$root"; mkdir -p "$root/DEBIAN"
  echo "$root"
}

# arm_dest DESTDIR: the Arm server (SBSA) tree next to an x86_64 one, named as NVIDIA names
# it: CUDA <distro>/sbsa/, DOCA <release>/<distro>/arm64-sbsa/. Empty for MLNX_OFED, which
# the stand-in serves for x86_64 only.
arm_dest() {
  case $1 in
    */compute/cuda/repos/*/x86_64) echo "${1%/x86_64}/sbsa" ;;
    */public/repo/doca/*/x86_64) echo "${1%/x86_64}/arm64-sbsa" ;;
  esac
}

# finish_pkg ROOT DESTDIR "control fields (after Package/Version/Arch)" DESCRIPTION
# An amd64 package built into an x86_64 tree that has an arm64 twin (arm_dest) is built a
# second time from the same files with Architecture: arm64 (the userland stand-ins are shell
# or python scripts, the DKMS packages carry sources); an "all" package is copied there.
finish_pkg() {
  local root=$1 dest=$2 fields=$3 desc=$4 base name version arch
  base=$(basename "$root"); name=${base%%_*}; version=${base#*_}; version=${version%_*}; arch=${base##*_}
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $MAINT"
    echo "Section: misc"
    echo "Priority: optional"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
    [[ -n "$fields" ]] && printf '%s\n' "$fields"
    echo "Description: STAND-IN: $desc"
    echo " Test-harness imitation of the vendor package of the same name"
    echo " (gpudirect-rdma tests/harness/standin_repo). Not the real software."
  } > "$root/DEBIAN/control"
  # conffiles: everything under /etc except init scripts' siblings we list explicitly
  if [[ -d "$root/etc" ]]; then
    (cd "$root" && find etc -type f | sed 's#^#/#' | sort) > "$root/DEBIAN/conffiles"
  fi
  find "$root" -path "$root/DEBIAN" -prune -o -type d -exec chmod 755 {} +
  for s in postinst prerm postrm preinst; do [[ -f "$root/DEBIAN/$s" ]] && chmod 755 "$root/DEBIAN/$s"; done
  mkdir -p "$dest"
  local arm; arm=$(arm_dest "$dest")
  if [[ -n $arm && $arch == amd64 ]]; then
    # a linked copy whose control file is replaced (sed -i writes a new file); made before
    # either build starts, as linking changes the files' ctime under a running tar
    cp -al "$root" "$root.arm64"
    sed -i 's/^Architecture: amd64$/Architecture: arm64/' "$root.arm64/DEBIAN/control"
  fi
  deb_build "$root" "$dest/${name}_${version}_${arch}.deb"
  [[ -n $arm ]] || return 0
  mkdir -p "$arm"
  case $arch in
    all) deb_build "$root" "$arm/${name}_${version}_all.deb" ;;
    amd64) deb_build "$root.arm64" "$arm/${name}_${version}_arm64.deb" ;;
  esac
}

# deb_build ROOT OUT.deb: dpkg-deb in the background (the staging tree is not touched after
# finish_pkg); wait_debs waits for all of them before the repositories are indexed.
DEB_PIDS=()
deb_build() {
  dpkg-deb --root-owner-group -Zgzip --build "$1" "$2" >/dev/null &
  DEB_PIDS+=("$!")
}
wait_debs() {
  local p
  for p in "${DEB_PIDS[@]}"; do wait "$p" || die "dpkg-deb failed (see above)"; done
  DEB_PIDS=()
}

# dkms_maintscripts ROOT DKMS_NAME DKMS_VERSION   (what dh_dkms generates)
dkms_maintscripts() {
  local root=$1 name=$2 ver=$3
  cat > "$root/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
# dh_dkms-style: add, build and install the DKMS module for the installed kernels
DKMS_NAME=$name
DKMS_VERSION=$ver
case "\$1" in
	configure)
		if [ -x /usr/lib/dkms/common.postinst ]; then
			/usr/lib/dkms/common.postinst \$DKMS_NAME \$DKMS_VERSION "" "" "\$2"
		else
			echo "ERROR: DKMS version is too old and $name was not built with legacy DKMS support." >&2
			exit 1
		fi
	;;
esac
exit 0
EOF
  cat > "$root/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
case "\$1" in
	remove|upgrade|deconfigure)
		if [ "\$(dkms status -m $name -v $ver 2>/dev/null)" ]; then
			dkms remove -m $name -v $ver --all || true
		fi
	;;
esac
exit 0
EOF
}

# unit_maintscripts ROOT UNIT: the maintainer scripts dh_installsystemd writes for a unit the
# package ships: enable it at configure, purge its state at purge
unit_maintscripts() {
  local script when action
  for script in "postinst configure enable" "postrm purge purge"; do
    read -r script when action <<<"$script"
    cat > "$1/DEBIAN/$script" <<EOF
#!/bin/sh
set -e
if [ "\$1" = $when ] && command -v deb-systemd-helper >/dev/null 2>&1; then
	deb-systemd-helper $action $2 >/dev/null || true
fi
exit 0
EOF
  done
}

sign_flat_repo() {   # sign_flat_repo DIR KEYID ORIGIN LABEL SUITE [DEB_ARCH]
  local dir=$1 keyid=$2 origin=$3 label=$4 suite=$5 debarch=${6:-amd64}
  wait_debs
  (
    cd "$dir"
    apt-ftparchive packages . > Packages
    gzip -9n -k Packages
    apt-ftparchive \
      -o APT::FTPArchive::Release::Origin="$origin" \
      -o APT::FTPArchive::Release::Label="$label" \
      -o APT::FTPArchive::Release::Architectures="$debarch all" \
      -o APT::FTPArchive::Release::Description="STAND-IN for the vendor repository (gpudirect-rdma test harness)" \
      release . > Release.tmp
    mv Release.tmp Release
    gpg --batch --yes --local-user "$keyid" --clearsign -o InRelease Release
    gpg --batch --yes --local-user "$keyid" --armor --detach-sign -o Release.gpg Release
  )
}

gen_key() {   # gen_key NAME UID -> prints full fingerprint
  local name=$1 uid=$2 fpr
  gpg --batch --quiet --passphrase '' --quick-gen-key "$uid" ed25519 sign never 2>/dev/null
  fpr=$(gpg --batch --with-colons --list-keys "$uid" 2>/dev/null | awk -F: '/^fpr:/{print $10; exit}')
  gpg --batch --export "$fpr" > "$work/keys/$name-archive-keyring.gpg"
  gpg --batch --armor --export "$fpr" > "$work/keys/$name-archive-keyring.asc"
  # the fingerprint next to the key, for the test inventories' pinned-fingerprint knobs
  # (gpudirect_mlnx_ofed_repo_key_fingerprints, gpudirect_nvidia_driver_repo_key_fingerprints)
  echo "$fpr" > "$work/keys/$name-archive-keyring.fpr"
  echo "$fpr"
}

# ---- keys ----------------------------------------------------------------------
log "generating throwaway signing keys"
DOCA_FPR=$(gen_key doca "gpudirect-rdma STAND-IN DOCA/MLNX_OFED repository key <doca-standin@gpudirect-rdma.invalid>")
CUDA_FPR=$(gen_key cuda "gpudirect-rdma STAND-IN CUDA repository key <cuda-standin@gpudirect-rdma.invalid>")
CUDA_KEY_FILE=$(echo "${CUDA_FPR: -8}" | tr 'A-F' 'a-f').pub   # upstream names it after the key id (3bf863cc.pub)
mkdir -p "$www/keys"
cp "$work/keys/"* "$www/keys/"

# ---- OFED packages ---------------------------------------------------------------
# build_ofed_repo DEST FLAVOR(doca|mlnx) OFED_VER [DOCA_VER]
# OFED_VER is what ofed_info prints (24.10-1.1.4.0.200, 24.10-1.1.4.0); the package
# versions use its release part, the first three numbers after the dash (24.10-1.1.4).
build_ofed_repo() {
  local dest=$1 flavor=$2 ofed=$3 doca=${4:-}
  local major=${ofed%%-*}                                       # 24.10
  local rest; rest=$(cut -d. -f1-3 <<<"${ofed#*-}")             # 1.1.4
  local base="$major-$rest"                                     # 24.10-1.1.4
  local dkms_ver="$major.OFED.$major.$rest.1"                   # 24.10.OFED.24.10.1.1.4.1 (real DOCA 2.9.1 name)
  local kver="$dkms_ver-1"
  local short number header real
  if [[ $flavor == doca ]]; then
    short="OFED-internal-$ofed"; number=$ofed; header="OFED-internal-$ofed"
    real="DOCA-OFED $ofed (DOCA-Host $doca)"
  else
    short="MLNX_OFED_LINUX-$ofed"; number=$ofed; header="MLNX_OFED_LINUX-$ofed (OFED-$base)"
    real="MLNX_OFED $ofed"
  fi
  log "OFED $flavor $ofed -> $dest"

  # mlnx-ofed-kernel-dkms
  local r; r=$(new_pkg mlnx-ofed-kernel-dkms "$kver" all)
  local src="$r/usr/src/mlnx-ofed-kernel-$dkms_ver"
  mkdir -p "$src"
  cp -a "$here/src/ofed/dkms/." "$src/"
  sed "s/@DKMS_VERSION@/$dkms_ver/" "$here/src/ofed/dkms/dkms.conf.in" > "$src/dkms.conf"
  rm -f "$src/dkms.conf.in"
  printf '#define OFED_STANDIN_VERSION "%s"\n' "$base" > "$src/standin_version.h"
  dkms_maintscripts "$r" mlnx-ofed-kernel "$dkms_ver"
  finish_pkg "$r" "$dest" "Depends: dkms, make, gcc, kmod
Provides: mlnx-ofed-kernel-modules (= $kver)" \
    "mlnx-ofed-kernel DKMS source ($real): ib_peer_mem.ko exporting ib_register_peer_memory_client"

  # mlnx-ofed-kernel-utils
  r=$(new_pkg mlnx-ofed-kernel-utils "$kver" amd64)
  mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/etc/init.d" "$r/lib/systemd/system" "$r/etc/infiniband"
  sed -e "s/@SHORT@/$short/g" -e "s/@NUMBER@/$number/g" -e "s/@HEADER@/$header/g" \
      -e "s/@REAL_PACKAGE@/mlnx-ofed-kernel-utils/g" -e "s/@FLAVOR@/$real/g" \
      -e "s/@OFA_SRC@/$major/g" "$here/src/ofed/utils/ofed_info.in" > "$r/usr/bin/ofed_info"
  chmod 755 "$r/usr/bin/ofed_info"
  install -m 755 "$here/src/ofed/utils/openibd" "$r/etc/init.d/openibd"
  install -m 644 "$here/src/ofed/utils/openibd.service" "$r/lib/systemd/system/openibd.service"
  install -m 644 "$here/src/ofed/utils/openib.conf" "$r/etc/infiniband/openib.conf"
  cat > "$r/usr/sbin/ofed_uninstall.sh" <<'EOF'
#!/bin/sh
# STAND-IN for /usr/sbin/ofed_uninstall.sh: purge the OFED stand-in packages.
set -e
pkgs=$(dpkg-query -W -f='${Package} ${Status}\n' 'doca-*' 'mlnx-ofed-*' 2>/dev/null | awk '/ installed$/{print $1}')
[ -n "$pkgs" ] && DEBIAN_FRONTEND=noninteractive apt-get -y purge $pkgs
exit 0
EOF
  chmod 755 "$r/usr/sbin/ofed_uninstall.sh"
  unit_maintscripts "$r" openibd.service
  finish_pkg "$r" "$dest" "Depends: kmod
Recommends: mlnx-ofed-kernel-dkms (= $kver)" \
    "mlnx-ofed-kernel userland ($real): ofed_info, openibd"

  # mstflint: mstconfig, the tool of roles/gpudirect_nic_config (src/mft/: NV configuration state per fake
  # card). Its boot unit is what a reboot does to the cards: Next Boot becomes Current.
  r=$(new_pkg mstflint "$(mstflint_version "$base")" amd64)
  mkdir -p "$r/usr/bin" "$r/lib/systemd/system"
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/mstconfig"
  # the same script answers as mstflint (burn/query of the firmware image) when called by that name
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/mstflint"
  # and as mstfwreset (the firmware reset: query and level 3 load Next Boot and the flash's firmware)
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/mstfwreset"
  # mstflint ships mstconfig only (mlxconfig is MFT's): the boot script and unit call it by that name
  sed 's#/usr/bin/mlxconfig#/usr/bin/mstconfig#' "$here/src/mft/standin-mlxconfig-boot" \
    > "$r/usr/bin/standin-mlxconfig-boot"
  chmod 755 "$r/usr/bin/standin-mlxconfig-boot"
  sed 's#/usr/bin/mlxconfig#/usr/bin/mstconfig#' "$here/src/mft/standin-mlxconfig-boot.service" \
    > "$r/lib/systemd/system/standin-mlxconfig-boot.service"
  chmod 644 "$r/lib/systemd/system/standin-mlxconfig-boot.service"
  unit_maintscripts "$r" standin-mlxconfig-boot.service
  finish_pkg "$r" "$dest" "Depends: python3" \
    "mstflint ($real): mstconfig, reading and setting fake ConnectX cards' NV configuration"

  # mlnx-tools: mlnx_qos, the tool of roles/gpudirect_roce_qos (src/ofed/qos/: trust and PFC per
  # interface, kept under /run so that a reboot drops them as it drops a ConnectX port's)
  r=$(new_pkg mlnx-tools "$base" amd64)
  mkdir -p "$r/usr/bin"
  install -m 755 "$here/src/ofed/qos/mlnx_qos" "$r/usr/bin/mlnx_qos"
  finish_pkg "$r" "$dest" "Depends: python3" \
    "mlnx-tools ($real): mlnx_qos, trust state and PFC per interface (stand-in)"

  # mft: MFT's mlxconfig, the same stand-in script (src/mft/) under MFT's name. Its files do not
  # overlap mstflint's (mstconfig, standin-mlxconfig-boot and its unit): both install together, as
  # on a real node. Its own boot unit does the same as mstflint's; with both, the second finds
  # Current = Next Boot already.
  r=$(new_pkg mft "$(mft_version "$base")" amd64)
  mkdir -p "$r/usr/bin" "$r/lib/systemd/system"
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/mlxconfig"
  # and as MFT's flint (burn/query of the firmware image), by that name
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/flint"
  # and as MFT's mlxfwreset (the firmware reset, by that name)
  install -m 755 "$here/src/mft/mlxconfig" "$r/usr/bin/mlxfwreset"
  install -m 644 "$here/src/mft/standin-mlxconfig-boot.service" "$r/lib/systemd/system/standin-mft-boot.service"
  unit_maintscripts "$r" standin-mft-boot.service
  finish_pkg "$r" "$dest" "Depends: python3" \
    "mft ($real): MFT's mlxconfig, reading and setting fake ConnectX cards' NV configuration"

  local deps="mlnx-ofed-kernel-dkms (= $kver), mlnx-ofed-kernel-utils (= $kver)"
  deps="$deps, mlnx-tools (= $base)"
  local metas
  if [[ $flavor == doca ]]; then
    metas="doca-ofed doca-roce doca-networking"
    local mver="$doca-0${major//./}0-$major-debian12"   # e.g. 2.9.1-024100-24.10-debian12
    for m in $metas; do
      r=$(new_pkg "$m" "$mver" amd64)
      finish_pkg "$r" "$dest" "Depends: $deps
Recommends: rdma-core, ibverbs-utils" "$m metapackage (DOCA-Host $doca profile, OFED $base)"
    done
  else
    for m in mlnx-ofed-all mlnx-ofed-basic mlnx-ofed-kernel-only; do
      r=$(new_pkg "$m" "$ofed" amd64)
      finish_pkg "$r" "$dest" "Depends: $deps
Recommends: rdma-core, ibverbs-utils" "$m metapackage (MLNX_OFED $ofed)"
    done
  fi
}

for rel in "${DOCA_RELEASES[@]}"; do
  read -r doca ofed <<<"$rel"
  d="$www/public/repo/doca/$doca/debian12/x86_64"
  build_ofed_repo "$d" doca "$ofed" "$doca"
  sign_flat_repo "$d" "$DOCA_FPR" "Mellanox" "DOCA $doca (gpudirect-rdma stand-in)" "./"
  sign_flat_repo "$(arm_dest "$d")" "$DOCA_FPR" "Mellanox" "DOCA $doca arm64-sbsa (gpudirect-rdma stand-in)" "./" arm64
done
for ofed in "${MLNX_OFED_RELEASES[@]}"; do
  d="$www/public/repo/mlnx_ofed/$ofed/debian12.5/x86_64"
  build_ofed_repo "$d" mlnx "$ofed"
  sign_flat_repo "$d" "$DOCA_FPR" "Mellanox" "MLNX_OFED $ofed (gpudirect-rdma stand-in)" "./"
done
cp "$work/keys/doca-archive-keyring.asc" "$www/public/repo/doca/GPG-KEY-Mellanox.pub"
mkdir -p "$www/public/repo/mlnx_ofed"
cp "$work/keys/doca-archive-keyring.asc" "$www/public/repo/mlnx_ofed/GPG-KEY-Mellanox.pub"

# ---- NVIDIA / CUDA packages ------------------------------------------------------
cuda="$www/compute/cuda/repos/debian12/x86_64"
mkdir -p "$cuda"
nv_build_date() {   # fixed, real-looking build dates per version
  case $1 in
    580.95.05) echo "Tue Sep 23 09:45:06 UTC 2025" ;;
    580.105.08) echo "Wed Oct 29 22:33:01 UTC 2025" ;;
    *) echo "Wed Jan  1 00:00:00 UTC 2025" ;;
  esac
}
# fabricmanager_pkg NAME DRIVER_VERSION "extra control fields"
# nv-fabricmanager -v prints the version; the service fails without an NVSwitch (NVIDIA PCI
# function of class 0x0680 with id 0x1af1/0x22a3), as the real daemon does on such nodes.
fabricmanager_pkg() {
  local name=$1 ver=$2 fields=$3 r
  r=$(new_pkg "$name" "$ver-1" amd64)
  mkdir -p "$r/usr/bin" "$r/lib/systemd/system" "$r/usr/share/nvidia/nvswitch"
  cat > "$r/usr/bin/nv-fabricmanager" <<EOF
#!/bin/sh
# STAND-IN for NVIDIA's nv-fabricmanager $ver (gpudirect-rdma tests/harness/standin_repo)
case "\$1" in -v|--version) echo "Fabric Manager version is : $ver"; exit 0 ;; esac
for d in /sys/bus/pci/devices/*; do
  [ "\$(cat "\$d/vendor" 2>/dev/null)" = 0x10de ] || continue
  case "\$(cat "\$d/device" 2>/dev/null)" in 0x1af1|0x22a3) exec sleep infinity ;; esac
done
echo "nv-fabricmanager: no NVSwitch found (stand-in)" >&2
exit 1
EOF
  chmod 755 "$r/usr/bin/nv-fabricmanager"
  printf '# stand-in fabric manager configuration\nLOG_LEVEL=4\n' > "$r/usr/share/nvidia/nvswitch/fabricmanager.cfg"
  cat > "$r/lib/systemd/system/nvidia-fabricmanager.service" <<'EOF'
[Unit]
Description=NVIDIA fabric manager service (stand-in)
After=network-online.target

[Service]
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg

[Install]
WantedBy=multi-user.target
EOF
  finish_pkg "$r" "$cuda" "$fields" "$name $ver: fabric manager for NVSwitch based systems"
}
# imex_pkg NAME DRIVER_VERSION: the IMEX daemon and nvidia-imex-ctl (src/nvidia/imex/), with
# the real package's files: /etc/nvidia-imex/config.cfg, the unit (not enabled by the
# package), /usr/bin/nvidia-imex, /usr/bin/nvidia-imex-ctl, /usr/share/doc/nvidia-imex/.
# The node list (/etc/nvidia-imex/nodes_config.cfg) is the administrator's: not shipped.
imex_pkg() {
  local name=$1 ver=$2 r f
  r=$(new_pkg "$name" "$ver-1" amd64)
  mkdir -p "$r/usr/bin" "$r/lib/systemd/system" "$r/etc/nvidia-imex" "$r/usr/share/doc/nvidia-imex" \
    "$r/usr/share/nvidia-imex-standin"
  for f in nvidia-imex nvidia-imex-ctl; do
    sed "s/@VERSION@/$ver/g" "$here/src/nvidia/imex/$f" > "$r/usr/bin/$f"
    chmod 755 "$r/usr/bin/$f"
  done
  install -m 644 "$here/src/nvidia/imex/imex_common.sh" "$r/usr/share/nvidia-imex-standin/"
  install -m 644 "$here/src/nvidia/imex/config.cfg" "$r/etc/nvidia-imex/config.cfg"
  install -m 644 "$here/src/nvidia/imex/nvidia-imex.service" "$r/lib/systemd/system/"
  echo "STAND-IN: IMEX $ver imitation (gpudirect-rdma tests/harness/standin_repo), not NVIDIA's software." \
    > "$r/usr/share/doc/nvidia-imex/README.standin"
  finish_pkg "$r" "$cuda" "" "$name $ver: IMEX daemon and nvidia-imex-ctl"
}

for v in "${NVIDIA_VERSIONS[@]}"; do
  pv="$v-1"
  log "NVIDIA driver $v -> $cuda"
  for flavor in open proprietary; do
    if [[ $flavor == open ]]; then pkg=nvidia-kernel-open-dkms; other=nvidia-kernel-dkms
    else pkg=nvidia-kernel-dkms; other=nvidia-kernel-open-dkms; fi
    r=$(new_pkg "$pkg" "$pv" amd64)
    src="$r/usr/src/nvidia-$v"
    mkdir -p "$src"
    cp -a "$here/src/nvidia/kernel/." "$src/"
    sed -e "s/@VERSION@/$v/" -e "s/@FLAVOR@/$flavor/" -e "s/@PKG@/$pkg/" \
      "$here/src/nvidia/kernel/dkms.conf.in" > "$src/dkms.conf"
    rm -f "$src/dkms.conf.in"
    {
      printf '#define NV_VERSION_STRING "%s"\n' "$v"
      printf '#define NV_BUILD_DATE "%s"\n' "$(nv_build_date "$v")"
      printf '#define NV_BUILD_USER "dvs-builder@standin"\n'
    } > "$src/common/nv_standin_version.h"
    dkms_maintscripts "$r" nvidia "$v"
    finish_pkg "$r" "$cuda" "Depends: dkms, make, gcc, kmod
Provides: nvidia-kernel-dkms-any (= $v)
Conflicts: $other
Replaces: $other" \
      "NVIDIA $flavor kernel module DKMS source $v: nvidia.ko + nvidia-peermem.ko"
  done

  r=$(new_pkg nvidia-smi "$pv" amd64)
  mkdir -p "$r/usr/bin" "$r/usr/share/nvidia-smi-standin"
  sed -e "s/@VERSION@/$v/g" -e "s/@CUDA_VERSION@/$CUDA_VERSION_FOR_DRIVER/g" \
    "$here/src/nvidia/userland/nvidia-smi" > "$r/usr/bin/nvidia-smi"
  chmod 755 "$r/usr/bin/nvidia-smi"
  for f in nvidia-smi-q.txt nvidia-smi-topo.txt nvidia-smi-query.csv; do
    # the capture was taken with driver 580.159.04: report this package's version instead
    sed -e "s/580\.159\.04/$v/g" "$FIXTURES/$f" > "$r/usr/share/nvidia-smi-standin/$f"
  done
  finish_pkg "$r" "$cuda" "Depends: python3" \
    "nvidia-smi $v printing a real H200 capture"

  r=$(new_pkg nvidia-persistenced "$pv" amd64)
  mkdir -p "$r/usr/bin" "$r/lib/systemd/system"
  sed "s/@VERSION@/$v/" "$here/src/nvidia/userland/nvidia-persistenced" > "$r/usr/bin/nvidia-persistenced"
  chmod 755 "$r/usr/bin/nvidia-persistenced"
  install -m 644 "$here/src/nvidia/userland/nvidia-persistenced.service" "$r/lib/systemd/system/"
  unit_maintscripts "$r" nvidia-persistenced.service
  finish_pkg "$r" "$cuda" "" "nvidia-persistenced $v"

  r=$(new_pkg nvidia-driver-cuda "$pv" amd64)
  finish_pkg "$r" "$cuda" "Depends: nvidia-smi (= $pv), nvidia-persistenced (= $pv), nvidia-kernel-open-dkms (= $pv) | nvidia-kernel-dkms (= $pv)" \
    "NVIDIA driver CUDA metapackage $v (compute-only userland)"
  r=$(new_pkg nvidia-open "$pv" amd64)
  finish_pkg "$r" "$cuda" "Depends: nvidia-kernel-open-dkms (= $pv), nvidia-driver-cuda (= $pv)" \
    "nvidia-open metapackage $v (open kernel modules)"
  for m in cuda-drivers "cuda-drivers-$NVIDIA_BRANCH"; do
    r=$(new_pkg "$m" "$pv" amd64)
    finish_pkg "$r" "$cuda" "Depends: nvidia-driver-cuda (= $pv), nvidia-kernel-open-dkms (= $pv) | nvidia-kernel-dkms (= $pv)" \
      "$m metapackage $v"
  done

  # Fabric manager, as the CUDA repository names it from branch 580: the real package is
  # nvidia-fabricmanager at the driver version; nvidia-fabricmanager-580 is only a name it
  # provides (virtual: apt cannot install it at a version).
  fabricmanager_pkg nvidia-fabricmanager "$v" "Provides: nvidia-fabricmanager-$NVIDIA_BRANCH"
  r=$(new_pkg "cuda-drivers-fabricmanager-$NVIDIA_BRANCH" "$pv" amd64)
  finish_pkg "$r" "$cuda" "Depends: nvidia-fabricmanager (= $pv)" \
    "cuda-drivers-fabricmanager-$NVIDIA_BRANCH metapackage $v"
  # IMEX from branch 580: nvidia-imex at the driver version (nvidia-imex=580.95.05-1)
  imex_pkg nvidia-imex "$v"
done
# ---- GDRCopy ---------------------------------------------------------------------
# NVIDIA's Debian/Ubuntu package names (NVIDIA/gdrcopy packages/: dkms/debian/control
# gdrdrv-dkms, debian-lib/control libgdrapi, debian-tests/control gdrcopy-tests,
# debian-meta/control gdrcopy). gdrdrv-dkms builds gdrdrv.ko against the NVIDIA sources
# under /usr/src/nvidia-* and links it against nvidia's nvidia_p2p_* exports.
log "GDRCopy $GDRCOPY_VERSION -> $cuda"
gv="$GDRCOPY_VERSION-1"
r=$(new_pkg gdrdrv-dkms "$gv" amd64)
src="$r/usr/src/gdrdrv-$GDRCOPY_VERSION"
mkdir -p "$src"
cp -a "$here/src/gdrcopy/gdrdrv/." "$src/"
sed "s/@VERSION@/$GDRCOPY_VERSION/g" "$here/src/gdrcopy/gdrdrv/dkms.conf.in" > "$src/dkms.conf"
rm -f "$src/dkms.conf.in"
printf '#define GDRDRV_STANDIN_VERSION "%s"\n' "$GDRCOPY_VERSION" > "$src/gdrdrv_standin_version.h"
dkms_maintscripts "$r" gdrdrv "$GDRCOPY_VERSION"
finish_pkg "$r" "$cuda" "Depends: dkms, make, gcc, kmod" \
  "gdrdrv DKMS source (GDRCopy $GDRCOPY_VERSION): gdrdrv.ko, linked against nvidia"
r=$(new_pkg libgdrapi "$gv" amd64)
mkdir -p "$r/usr/share/doc/libgdrapi"
echo "STAND-IN: no libgdrapi.so is shipped; the provisioning roles never link against it." \
  > "$r/usr/share/doc/libgdrapi/README.standin"
finish_pkg "$r" "$cuda" "" "libgdrapi $GDRCOPY_VERSION (name and version only, no library)"
r=$(new_pkg gdrcopy-tests "$gv" amd64)
mkdir -p "$r/usr/bin" "$r/usr/share/gdrcopy-tests-standin"
for t in gdrcopy_sanity gdrcopy_copybw; do
  sed "s/@VERSION@/$GDRCOPY_VERSION/g" "$here/src/gdrcopy/tests/$t" > "$r/usr/bin/$t"
  chmod 755 "$r/usr/bin/$t"
done
cp "$GDRCOPY_FIXTURES/sanity-no-gpu-v2.5.1.stdout" "$r/usr/share/gdrcopy-tests-standin/sanity-no-gpu.stdout"
cp "$GDRCOPY_FIXTURES/sanity-no-gpu-v2.5.1.stderr" "$r/usr/share/gdrcopy-tests-standin/sanity-no-gpu.stderr"
cp "$GDRCOPY_FIXTURES/copybw-no-gpu-v2.5.1.stderr" "$r/usr/share/gdrcopy-tests-standin/copybw-no-gpu.stderr"
finish_pkg "$r" "$cuda" "Depends: libgdrapi (>= $gv)" \
  "gdrcopy_sanity and gdrcopy_copybw $GDRCOPY_VERSION failing as the real ones do without a GPU"
r=$(new_pkg gdrcopy "$gv" amd64)
finish_pkg "$r" "$cuda" "Depends: gdrdrv-dkms (= $gv), libgdrapi (= $gv), gdrcopy-tests (= $gv)" \
  "GDRCopy $GDRCOPY_VERSION metapackage"

# Before 580 the Debian/Ubuntu package carries the branch in its name (real version of the
# R570 data-centre release 570.133.20); no 570 driver is built, it is here for its name.
fabricmanager_pkg nvidia-fabricmanager-570 "$NVIDIA_570_VERSION" ""
imex_pkg nvidia-imex-570 "$NVIDIA_570_VERSION"

# ---- NVLSM ---------------------------------------------------------------------------
# nvlsm: its own version, no version lock to the driver (no nvidia-* name, no = dependency).
# Files as in NVIDIA's nvlsm archive: /opt/nvidia/nvlsm/{sbin/nvlsm,lib/libgrpc_mgr.so} and
# /usr/share/nvidia/nvlsm/*.conf; the fabric manager's start script runs it (no unit).
log "NVLSM $NVLSM_VERSION -> $cuda"
r=$(new_pkg nvlsm "$NVLSM_VERSION-1" amd64)
mkdir -p "$r/opt/nvidia/nvlsm/sbin" "$r/opt/nvidia/nvlsm/lib" "$r/usr/share/nvidia/nvlsm"
sed -e "s/@VERSION_STRING@/$NVLSM_VERSION_STRING/g" -e "s/@VERSION@/$NVLSM_VERSION/g" \
  "$here/src/nvidia/nvlsm/nvlsm" > "$r/opt/nvidia/nvlsm/sbin/nvlsm"
chmod 755 "$r/opt/nvidia/nvlsm/sbin/nvlsm"
# placeholder: the stand-in ships no library
echo "STAND-IN: placeholder, not a shared library" > "$r/opt/nvidia/nvlsm/lib/libgrpc_mgr.so"
for f in nvlsm.conf grpc_mgr.conf device_configuration.conf; do
  install -m 644 "$here/src/nvidia/nvlsm/$f" "$r/usr/share/nvidia/nvlsm/$f"
done
finish_pkg "$r" "$cuda" "" "nvlsm $NVLSM_VERSION: NVLink subnet manager (OpenSM $NVLSM_VERSION_STRING)"

cuda_arm=$(arm_dest "$cuda")
sign_flat_repo "$cuda" "$CUDA_FPR" "NVIDIA" "NVIDIA CUDA (gpudirect-rdma stand-in)" "/"
sign_flat_repo "$cuda_arm" "$CUDA_FPR" "NVIDIA" "NVIDIA CUDA sbsa (gpudirect-rdma stand-in)" "/" arm64
cp "$work/keys/cuda-archive-keyring.asc" "$cuda/$CUDA_KEY_FILE"
cp "$work/keys/cuda-archive-keyring.asc" "$cuda_arm/$CUDA_KEY_FILE"

# ---- metadata ----------------------------------------------------------------------
{
  for d in $(cd "$www" && find . -name Packages | sort); do
    echo "## ${d#./}" | sed 's#/Packages$#/#'
    awk '/^Package:/{p=$2} /^Version:/{printf "%-28s %s\n", p, $2}' "$www/$d"
    echo
  done
} > "$work/packages.txt"

cat > "$work/repo.env" <<EOF
# Written by tests/harness/standin_repo/build.sh ($recipe_hash). Paths are
# relative to the served document root (www/); prepend the base URL that
# serve.sh prints (http://127.0.0.1:PORT/ on the host, http://10.0.2.2:PORT/ in a qemu VM).
STANDIN_HASH=$recipe_hash
STANDIN_ROOT=$out
STANDIN_WWW=$out/www
STANDIN_DOCA_VERSIONS="$(for r in "${DOCA_RELEASES[@]}"; do echo -n "${r%% *} "; done | sed 's/ $//')"
STANDIN_DOCA_OFED_VERSIONS="$(for r in "${DOCA_RELEASES[@]}"; do echo -n "${r##* } "; done | sed 's/ $//')"
STANDIN_DOCA_REPO_PATH_TEMPLATE=public/repo/doca/{doca_version}/debian12/x86_64/
STANDIN_DOCA_REPO_PATH_TEMPLATE_ARM64=public/repo/doca/{doca_version}/debian12/arm64-sbsa/
STANDIN_DOCA_SUITE=./
STANDIN_DOCA_KEY_PATH=public/repo/doca/GPG-KEY-Mellanox.pub
STANDIN_DOCA_KEY_FPR=$DOCA_FPR
STANDIN_MLNX_OFED_VERSIONS="${MLNX_OFED_RELEASES[*]}"
STANDIN_MLNX_OFED_REPO_PATH_TEMPLATE=public/repo/mlnx_ofed/{ofed_version}/debian12.5/x86_64/
STANDIN_MLNX_OFED_KEY_PATH=public/repo/mlnx_ofed/GPG-KEY-Mellanox.pub
STANDIN_NVIDIA_VERSIONS="${NVIDIA_VERSIONS[*]}"
STANDIN_GDRCOPY_VERSION=$GDRCOPY_VERSION
STANDIN_CUDA_REPO_PATH=compute/cuda/repos/debian12/x86_64/
STANDIN_CUDA_REPO_PATH_SBSA=compute/cuda/repos/debian12/sbsa/
STANDIN_NVLSM_VERSION=$NVLSM_VERSION
STANDIN_NVIDIA_570_VERSION=$NVIDIA_570_VERSION
STANDIN_CUDA_SUITE=/
STANDIN_CUDA_KEY_PATH=compute/cuda/repos/debian12/x86_64/$CUDA_KEY_FILE
STANDIN_CUDA_KEY_FPR=$CUDA_FPR
STANDIN_KEYRING_DOCA_GPG=$out/keys/doca-archive-keyring.gpg
STANDIN_KEYRING_CUDA_GPG=$out/keys/cuda-archive-keyring.gpg
EOF

mv "$www" "$work/www.final"
rm -rf "$GNUPGHOME" "$stage"
mkdir "$work/final"
mv "$work/www.final" "$work/final/www"
mv "$work/keys" "$work/packages.txt" "$work/repo.env" "$work/final/"
echo "built in $(( $(date +%s) - t0 )) s on $(date -u +%FT%TZ)" > "$work/final/build-info.txt"
rm -rf "$out"
mv -T "$work/final" "$out"
ln -sfn "$recipe_hash" "$cache_root/.current.tmp" && mv -T "$cache_root/.current.tmp" "$cache_root/current"
# drop older builds nobody serves
for old in "$cache_root"/*/; do
  old=${old%/}
  [[ -L "$old" || "$old" == "$out" ]] && continue
  [[ -f "$old/.serving" ]] && continue
  rm -rf "$old"
done
log "built in $(( $(date +%s) - t0 )) s"
echo "$out"
