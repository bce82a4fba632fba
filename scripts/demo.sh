#!/usr/bin/env bash
# The main job against the project's own local test node: start a systemd
# container built from Debian packages (no GPU, no RDMA NIC) and run site.yml
# against it, ending with the report. Safe to run again: the node is reused, and
# a second run shows what a no-op re-run looks like.
#   scripts/demo.sh            # run
#   scripts/demo.sh --remove   # remove the test node
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NODE=gpudirect-demo

if [[ "${1:-}" == "--remove" ]]; then
  podman rm -f "$NODE" >/dev/null 2>&1 || true
  echo "removed $NODE"; exit 0
fi
scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_CONFIG=$PWD/ansible.cfg
ansible-playbook tests/harness/container/start-nodes.yml -e "{\"__test_nodes\": [{\"name\": \"$NODE\"}]}"
ansible-playbook -i inventory/testnode site.yml "$@"
echo "The test node $NODE keeps running: run again to see a no-op re-run; 'scripts/demo.sh --remove' removes it."
