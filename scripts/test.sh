#!/usr/bin/env bash
# Run every test of the project, as CI does (.ci/run calls this):
#   static   yamllint --strict, ansible-lint (production profile, offline),
#            ansible-playbook --syntax-check of every playbook
#   unit     pytest on modules and filters with real captured outputs
#   container Molecule scenarios `default` (site.yml), `os_release_pin`
#            (pin, unpin, validation) and `rolling` (four nodes, a fake
#            scheduler: batches, drain, resume only on proof) on podman
#            systemd nodes
#   vm       Molecule scenarios `rdma` (one qemu VM with Debian's kernel: a
#            wrong-order install repaired, a reboot), `kernel_update` (the
#            rdma scenario's converged node, saved, updated to the next kernel
#            ABI) and `pair` (three VMs, ring verification over their private
#            link)
#   secureboot  (not in the default set) Molecule scenario `secureboot`: the
#            rdma scenario's saved node booted through UEFI Secure Boot, a
#            signed chain, MOK enrolment; ~40 min under TCG, which the default
#            set cannot take inside CI's 90 minutes yet:
#            scripts/test.sh vm secureboot
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
  local pbs=(site.yml playbooks/*.yml) pb rc=0
  # One ansible-playbook process loads every playbook in turn (each play with its
  # own base directory, as separate runs would): 14 Python start-ups and plugin
  # loads become one. It stops at the first error, which it names; then each
  # playbook is checked alone so that every failing one is named.
  if ! ansible-playbook --syntax-check -i inventory/example "${pbs[@]}" >/dev/null; then
    for pb in "${pbs[@]}"; do
      ansible-playbook --syntax-check -i inventory/example "$pb" >/dev/null || { echo "syntax: $pb"; rc=1; }
    done
    ((rc)) || { echo "syntax: the playbooks pass one by one but not in one run"; rc=1; }
  fi
  echo "syntax-check: ${#pbs[@]} playbooks"
  return $rc
}
# One pytest worker per core: most of the tier's time is ansible-playbook runs
# over stand-in roles and fabricated trees, each test in its own tmp_path, so the
# tests run in parallel. loadgroup keeps the tests of a module that shares one
# expensive run (pytest.mark.xdist_group) on one worker, so that run is made once.
stage_unit() { pytest -q -n auto --dist loadgroup tests/unit; }
# Molecule only warns when a step of the sequence has no playbook; a skipped
# prepare, side_effect or verify would make a scenario pass without testing.
scenario() {
  local log=.cache/molecule-$1.log rc
  mkdir -p .cache
  # molecule-timed.py passes molecule's output through and ends with a table of
  # per-phase timings (image build or cache hit, boot to ssh, each action)
  python3 tests/harness/vm/molecule-timed.py --log "$log" test -s "$1"; rc=$?
  if grep -E "(prepare|side_effect|verify)\]? ?:? .*Missing playbook" "$log"; then
    echo "scenario $1: a step of its sequence did not run (missing playbook)"; return 1
  fi
  return "$rc"
}
# every scenario of a stage runs even when an earlier one failed (one after the
# other: the VM guests need the host's cores)
scenarios() {
  local s rc=0
  for s in "$@"; do scenario "$s" || rc=1; done
  return $rc
}
stage_container() { scenarios default os_release_pin rolling; }
# rdma first: kernel_update and secureboot start from the node it saves
stage_vm() { scenarios rdma kernel_update pair; }
# after vm (it starts from the disk rdma saves): scripts/test.sh vm secureboot
stage_secureboot() { scenarios secureboot; }

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
