#!/usr/bin/env bash
# GPU-node tier: run the project's read-only stages on a real GPU server with a
# local connection. The node has no network, so ansible-core comes as wheels
# (made by tests/harness/gpu_node/wheels.sh on the controller and carried).
# Carry .cache/device-wheels and .cache/device-collections (both from wheels.sh).
# Writes what it saw under $OUT (default ./gpu-node-out):
#   gpudirect_facts.json   the facts module's result (kept as a unit-test fixture)
#   preflight.log          playbooks/preflight.yml, normal run
#   preflight-check.log    the same with --check
#   loopback.log, loopback_*.json  gpudirect_loopback cases (tests/harness/gpu_node/loopback.yml)
#   state.log, gpudirect_state.json  the converged-state record (tests/harness/gpu_node/state.yml)
#   summary.tsv, STAGE-MODE.log  the offline roles and site.yml --check (offline_roles.sh)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT=${OUT:-$PWD/gpu-node-out}; mkdir -p "$OUT"
WHEELS=${WHEELS:-.cache/device-wheels}
# Only ansible-core travels, without collections: use the project's ansible.cfg
# less its profile_tasks callback (from ansible.posix).
sed '/^callbacks_enabled/d' ansible.cfg >.gpu-node-ansible.cfg
export LANG=C.UTF-8 LC_ALL=C.UTF-8 ANSIBLE_CONFIG=$PWD/.gpu-node-ansible.cfg ANSIBLE_NOCOLOR=1

pip_python=python3
python3 -m pip --version >/dev/null 2>&1 || pip_python=$(ls /opt/*/.venv/bin/python 2>/dev/null | head -1)
"$pip_python" -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/ansible-site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/ansible-site
# community.general (modprobe) comes as a copied collection (wheels.sh)
COLLECTIONS=${COLLECTIONS:-.cache/device-collections}
[[ -d $COLLECTIONS/ansible_collections/community/general ]] || { echo "no community.general under $COLLECTIONS: run tests/harness/gpu_node/wheels.sh"; exit 1; }
export ANSIBLE_COLLECTIONS_PATH=$(cd "$COLLECTIONS" && pwd)
# Modules run with the node's own Python, as on any server (the first python3 on PATH
# may be a venv without the distribution's python3-apt, which apt and package_facts need).
node_python=/usr/bin/python3; [[ -x $node_python ]] || node_python=$(command -v python3)
echo "node python: $node_python ($("$node_python" -V 2>&1)); python3-apt: $("$node_python" -c 'import apt_pkg' 2>/dev/null && echo yes || echo no)"
inv=$(mktemp --suffix=.yml); cat >"$inv" <<INV
gpu_nodes:
  hosts:
    $(hostname -s):
      ansible_connection: local
      ansible_python_interpreter: $node_python
INV
ap() { python3 -m ansible.cli.playbook -i "$inv" "$@"; }
OUT=$OUT ap tests/harness/gpu_node/facts.yml >"$OUT/facts.log" 2>&1 || { cat "$OUT/facts.log"; exit 1; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d['ansible_facts']['gpudirect']; \
print('gpus', [(x['address'], x.get('name'), x['link']) for x in g['gpus']]); \
print('driver', g['nvidia_driver']); print('rdma_devices', g['rdma_devices']); print('changed', d['changed'])" "$OUT/gpudirect_facts.json"
# The node has no RDMA NIC: preflight must stop on exactly that, with the reason.
ap playbooks/preflight.yml >"$OUT/preflight.log" 2>&1; echo "preflight rc=$?"
ap playbooks/preflight.yml --check >"$OUT/preflight-check.log" 2>&1; echo "preflight --check rc=$?"
grep -E "msg|GPU|driver|RDMA|cannot reach|changed=" "$OUT/preflight.log" | head -40
grep -E "changed=" "$OUT/preflight-check.log"

# --- converged-state record on a real node: record, match, a watched file added is named
s0=$(date +%s.%N)
ap tests/harness/gpu_node/state.yml >"$OUT/state.log" 2>&1; echo "state rc=$? ($(python3 -c "import sys; print('%.1f s' % (float(sys.argv[2]) - float(sys.argv[1])))" "$s0" "$(date +%s.%N)"))"
grep -E "msg|changed=" "$OUT/state.log" | cut -c1-600

# --- loopback on the GPU node: the CUDA half for real, the no-NIC failure, bad input
ap tests/harness/gpu_node/loopback.yml >"$OUT/loopback.log" 2>&1; echo "loopback rc=$?"
grep -E "^ok: .*=> \(item=|msg\":|failed=|code=|Assertion|assert|PLAY RECAP|changed=" "$OUT/loopback.log" | head -40

# --- roles on the GPU node: nvidia_driver keeps the driver the image brought (no package,
# repository, headers, DKMS, holds or reload) and gpudirect_peermem picks dma-buf, changing
# nothing: --check, then two real runs (roles-check.log, roles-run1.log, roles-run2.log);
# then another branch with --check, refused before any change (roles-other-branch.log).
apj() { ANSIBLE_CALLBACK_RESULT_FORMAT=json ap "$@"; }  # a message stays on one line for grep
apj tests/harness/gpu_node/roles.yml --check >"$OUT/roles-check.log" 2>&1; echo "roles --check rc=$?"
apj tests/harness/gpu_node/roles.yml >"$OUT/roles-run1.log" 2>&1; echo "roles run 1 rc=$?"
apj tests/harness/gpu_node/roles.yml >"$OUT/roles-run2.log" 2>&1; echo "roles run 2 rc=$?"
apj tests/harness/gpu_node/roles.yml --check -e '{"nvidia_driver_branch": "570"}' >"$OUT/roles-other-branch.log" 2>&1
echo "roles --check, branch 570 wanted: rc=$? (2 expected: refused before any change)"
for log in roles-check roles-run1 roles-run2 roles-other-branch; do
  echo "== $log"
  grep -E "^[^ ].* : ok=[0-9]+ +changed=" "$OUT/$log.log"
  awk '/^TASK /{task=$0} /^(changed|fatal):/{print "  " task; print "  " $0}' "$OUT/$log.log" | cut -c1-600
  grep -E '^ *"' "$OUT/$log.log" | sed 's/^ *//' | sort -u | cut -c1-600 | grep -E \
    "outside the package manager|matches: no change|differs from wanted|no NVIDIA driver installed|nouveau: |nvidia-persistenced: |peer memory: |dma-buf: "
done

# --- the other roles that can run offline, each in a mode that leaves the node as it was,
# and site.yml --check end to end (tests/harness/gpu_node/offline_roles.sh)
OUT=$OUT inv=$inv bash tests/harness/gpu_node/offline_roles.sh; echo "offline roles rc=$?"
