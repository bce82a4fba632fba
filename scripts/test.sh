#!/usr/bin/env bash
# Run every test of the project, as CI does (.ci/run calls this):
#   static   yamllint --strict, ansible-lint (production profile, offline),
#            ansible-playbook --syntax-check of every playbook
#   unit     pytest on modules and filters with real captured outputs
#   container Molecule scenarios `default` (site.yml) and `os_release_pin`
#            (pin, unpin, validation) on podman systemd nodes
#   vm       Molecule scenarios `rdma` (one qemu VM with Debian's kernel) and
#            `pair` (two VMs, gpudirect_loopback pair mode over their private link)
# Give stage names to run only those: scripts/test.sh static unit
# Every stage runs even when an earlier one failed; the exit code is non-zero
# when any failed. Wall time is printed per stage and in total.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

scripts/setup.sh || exit 1
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_CONFIG=$ROOT/ansible.cfg ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

stage_static() {
  yamllint --strict . || return 1
  ansible-lint --offline --profile production || return 1
  local pb rc=0
  for pb in site.yml playbooks/*.yml; do
    ansible-playbook --syntax-check -i inventory/example "$pb" >/dev/null || { echo "syntax: $pb"; rc=1; }
  done
  echo "syntax-check: $(ls site.yml playbooks/*.yml | wc -l) playbooks"
  return $rc
}
stage_unit() { pytest -q tests/unit; }
# Molecule only warns when a step of the sequence has no playbook; a skipped
# prepare, side_effect or verify would make a scenario pass without testing.
scenario() {
  local log=.cache/molecule-$1.log rc
  mkdir -p .cache
  molecule test -s "$1" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  if grep -E "(prepare|side_effect|verify)\]? ?:? .*Missing playbook" "$log"; then
    echo "scenario $1: a step of its sequence did not run (missing playbook)"; return 1
  fi
  return "$rc"
}
stage_container() { scenario default && scenario os_release_pin; }
# both VM scenarios run even when the first fails (one after the other: each
# needs the host's cores for its TCG guests)
stage_vm() {
  local rc=0
  scenario rdma || rc=1
  scenario pair || rc=1
  return $rc
}

stages=("$@")
((${#stages[@]})) || stages=(static unit container vm)
declare -A took result
failed=0 passed=0 t_all=$(date +%s)
for s in "${stages[@]}"; do
  if [[ $s == vm && ! -d molecule/rdma ]]; then
    echo "=== vm: no molecule/rdma scenario in this checkout"; continue
  fi
  echo "=== $s"
  t0=$(date +%s)
  if "stage_$s"; then result[$s]=ok; ((passed++)); else result[$s]=FAILED; ((failed++)); fi
  took[$s]=$(( $(date +%s) - t0 ))
  echo "=== $s: ${result[$s]} in ${took[$s]} s"
done
echo
echo "stage       result  seconds"
for s in "${stages[@]}"; do
  [[ -n "${result[$s]:-}" ]] && printf '%-11s %-7s %s\n' "$s" "${result[$s]}" "${took[$s]}"
done
echo "total wall time: $(( $(date +%s) - t_all )) s"
echo "stages: $passed passed, $failed failed"
((failed == 0))
