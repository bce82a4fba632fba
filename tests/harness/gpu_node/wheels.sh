#!/usr/bin/env bash
# Download ansible-core and its dependencies as wheels for the GPU node's
# Python (3.12, x86_64), which has no network, and the collections the roles use
# beyond ansible.builtin (community.general: modprobe, dpkg/dnf locks), copied from
# the venv's `ansible` package. Output: .cache/device-wheels/, .cache/device-collections/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
core=$(grep '^ansible-core==' requirements.txt)
.venv/bin/pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
  -d .cache/device-wheels "$core"
ls .cache/device-wheels
rm -rf .cache/device-collections && mkdir -p .cache/device-collections/ansible_collections/community
cp -a .venv/lib/python3*/site-packages/ansible_collections/community/general \
  .cache/device-collections/ansible_collections/community/
du -sh .cache/device-collections
