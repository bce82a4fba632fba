#!/usr/bin/env bash
# The main job against the project's own local test node: a qemu VM with
# Debian's kernel, a soft-RoCE NIC behind a PCIe root port with ACS switched on,
# and a local mirror that stands in for NVIDIA's DOCA and CUDA repositories
# (tests/harness/). It runs site.yml against that node, as on a real server:
# preflight table, pins, OFED, driver, nvidia_peermem, ACS.
# Under software emulation this takes 15-25 minutes on 2 cores the first time
# (image build, DKMS builds); run it again to see a no-op re-run.
#   scripts/demo.sh            # run (reuses a running node)
#   scripts/demo.sh --remove   # remove the test node
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

if [[ "${1:-}" == "--remove" ]]; then
  molecule destroy -s rdma; exit 0
fi
# create and prepare do nothing when the node is already up and prepared.
molecule create -s rdma
molecule prepare -s rdma
molecule converge -s rdma
echo "The test node keeps running: run again to see a no-op re-run;"
echo "'molecule login -s rdma' opens a shell on it; 'scripts/demo.sh --remove' removes it."
