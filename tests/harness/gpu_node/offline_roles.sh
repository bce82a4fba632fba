#!/usr/bin/env bash
# GPU-node tier, part 2: the roles that can run on the borrowed node with no network,
# over a local connection, each in the mode that leaves the node as it was:
#   gpudirect_os_release_pin  pin (real), --check on the pinned node, unpin (real); holds and apt
#                   configuration compared before and after
#   gpudirect_host_prereqs    real, twice (the second must change nothing), --check; with IOMMU
#                   pass-through wanted, --check (no GRUB here); its files removed afterwards
#   gpudirect_pcie_acs        query (real) and disabled in --check on the node's real PCI tree
#   gpudirect_mlnx_ofed       inbox method, --check only: installing rdma-core needs a mirror
#   site.yml        --check end to end, no RDMA NIC required
# Needs what run.sh sets up (ansible-core from carried wheels, $inv, ap). Writes logs and
# summary.tsv (stage, mode, rc, changed, failed, result) under $OUT and prints the table.
set -uo pipefail
: "${OUT:?}" "${inv:?}"
declare -A CHECK_ONLY_WHY=(
  [gpudirect_mlnx_ofed]="installing inbox rdma-core needs a package mirror, which the node lacks"
  [gpudirect_pcie_acs]="clearing ACS on a borrowed node's bridges is not undone by the harness"
  [site.yml]="the driver stages would download from vendor repositories the node cannot reach"
)
summary=$OUT/summary.tsv
printf 'stage\tmode\trc\tchanged\tfailed\tresult\n' >"$summary"

# stage NAME MODE EXPECT_RC [EXPECT_TEXT] -- ansible-playbook arguments
# EXPECT_TEXT: a line the log must hold (the reason of an expected stop)
stage() {
  local name=$1 mode=$2 want=$3 text=""; shift 3
  [[ $1 != -- ]] && { text=$1; shift; }
  shift
  local log=$OUT/${name//\//_}-$mode.log rc t0=$SECONDS
  ANSIBLE_CALLBACK_RESULT_FORMAT=json python3 -m ansible.cli.playbook -i "$inv" "$@" >"$log" 2>&1; rc=$?
  local recap changed failed result
  recap=$(grep -E '^[^ ]+ +: ok=' "$log" | tail -1)
  changed=$(sed -nE 's/.*changed=([0-9]+).*/\1/p' <<<"$recap"); failed=$(sed -nE 's/.*failed=([0-9]+).*/\1/p' <<<"$recap")
  if [[ $rc != "$want" ]]; then result="FAILED (rc $rc, $want expected)"
  elif [[ -n $text ]] && ! grep -qF -- "$text" "$log"; then result="FAILED (no line: $text)"
  elif [[ -n $text ]]; then result="ok, stopped as expected: $text"
  else result=ok; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s (%ss)\n' "$name" "$mode" "$rc" "${changed:--}" "${failed:--}" "$result" $((SECONDS - t0)) >>"$summary"
}
pkgstate() {  # what gpudirect_os_release_pin may touch: holds, apt preferences and apt.conf.d
  { echo "# apt-mark showhold"; apt-mark showhold | sort
    echo "# /etc/apt/preferences.d"; (cd /etc/apt/preferences.d && sha256sum -- * 2>/dev/null | sort)
    echo "# /etc/apt/apt.conf.d"; (cd /etc/apt/apt.conf.d && sha256sum -- * 2>/dev/null | sort)
    echo "# dpkg selections"; dpkg --get-selections | sha256sum; } >"$1"
}
R=tests/harness/gpu_node/role.yml

pkgstate "$OUT/pin-before.txt"
stage gpudirect_os_release_pin apply 0 -- $R -e harness_role=gpudirect_os_release_pin
stage gpudirect_os_release_pin check 0 -- $R -e harness_role=gpudirect_os_release_pin --check
stage gpudirect_os_release_pin unpin 0 -- $R -e harness_role=gpudirect_os_release_pin -e gpudirect_os_release_pin_state=absent
pkgstate "$OUT/pin-after.txt"
if diff -u "$OUT/pin-before.txt" "$OUT/pin-after.txt" >"$OUT/pin.diff"; then
  printf 'gpudirect_os_release_pin\tround trip\t0\t-\t-\tok: holds, preferences and apt.conf.d as before\n' >>"$summary"
else
  printf 'gpudirect_os_release_pin\tround trip\t1\t-\t-\tFAILED: package state differs (pin.diff)\n' >>"$summary"
fi

stage gpudirect_host_prereqs apply 0 -- $R -e harness_role=gpudirect_host_prereqs
stage gpudirect_host_prereqs again 0 -- $R -e harness_role=gpudirect_host_prereqs
stage gpudirect_host_prereqs check 0 -- $R -e harness_role=gpudirect_host_prereqs --check
# IOMMU pass-through wanted on a node without GRUB: the command line is left alone, said so
stage gpudirect_host_prereqs iommu-check 0 -- $R -e harness_role=gpudirect_host_prereqs -e '{"gpudirect_host_prereqs_iommu_passthrough": true}' --check
rm -f /etc/security/limits.d/90-gpudirect-memlock.conf /etc/systemd/system.conf.d/90-gpudirect-memlock.conf \
      /etc/systemd/user.conf.d/90-gpudirect-memlock.conf

stage gpudirect_pcie_acs query 0 -- $R -e harness_role=gpudirect_pcie_acs -e gpudirect_pcie_acs_state=query -e gpudirect_pcie_acs_mode=all
stage gpudirect_pcie_acs check 0 -- $R -e harness_role=gpudirect_pcie_acs -e gpudirect_pcie_acs_state=disabled -e gpudirect_pcie_acs_mode=all --check

stage gpudirect_mlnx_ofed check 0 -- $R -e harness_role=gpudirect_mlnx_ofed -e gpudirect_mlnx_ofed_method=inbox --check

# Every stage runs in check mode, the verification included: it names the build packages it
# would install (read from dpkg, no apt simulation needed) and says it would fail (no NIC here);
# check mode reports that in the table and does not fail the node, as on any node.
stage site.yml check 0 -- site.yml --check \
  -e gpudirect_preflight_require_rdma_nic=false \
  -e gpudirect_nvidia_driver_repo_base_url=file:///nonexistent/cuda -e gpudirect_mlnx_ofed_method=inbox

for s in "${!CHECK_ONLY_WHY[@]}"; do echo "check mode only: $s: ${CHECK_ONLY_WHY[$s]}"; done | sort >"$OUT/check-only.txt"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
cat "$OUT/check-only.txt"
! grep -q FAILED "$summary"
