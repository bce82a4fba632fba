#!/usr/bin/env bash
# Install what the project needs on a fresh Debian 12 machine that reaches only
# PyPI and Debian's mirror: Debian packages for the test nodes, and a Python
# virtual environment with the pinned toolchain. Safe to run again: it installs
# only what is missing or what requirements.txt / requirements-test.txt changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# podman + runc + debootstrap: container test nodes; qemu + e2fsprogs: VM test
# nodes; gnupg + dpkg-dev + apt-utils: the stand-in vendor repository;
# openssh-client: Ansible's ssh connection to VMs; libibverbs-dev + gcc: the unit
# tests compile and link the loopback module's C helper; dosfstools + mtools: the
# Secure Boot VM's EFI system partition, openssl: its module signing key (the
# firmware and signed boot chain are unpacked, not installed: secure_boot.py).
DEB_PACKAGES=(podman runc debootstrap qemu-system-x86 qemu-utils e2fsprogs pciutils
              gnupg dpkg-dev apt-utils openssh-client python3-venv uidmap slirp4netns
              libibverbs-dev gcc dosfstools mtools openssl)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] apt-get install ${missing[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# requirements.txt: what runs the toolkit; requirements-test.txt: what tests and lints it.
# The stamp is one digest over both files, so a change to either reinstalls.
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-test.txt | sha256sum | cut -d' ' -f1)
if [[ ! -x .venv/bin/python ]] || [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "[setup] Python venv .venv from requirements.txt and requirements-test.txt"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt -r requirements-test.txt
  echo "$want" >"$stamp"
fi
echo "[setup] ready: ansible-core $(.venv/bin/python -c "import ansible.release as r; print(r.__version__)")"
