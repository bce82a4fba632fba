#!/usr/bin/env bash
# VM benchmark: reboots, wall time and task count of a fresh site.yml converge
# and of the no-op re-run on one qemu node with Debian's kernel, and the no-op
# re-run divided by a bare fact-gathering run on the same node.
#
#   benchmarks/vm_converge.sh              # ~25 min under TCG on 2 cores
#   BENCH_LOOPBACK=1 benchmarks/vm_converge.sh   # also loopback_vs_perftest.sh before the VM stops
#
# The node: a fresh VM from tests/harness/vm (vm.py, its own run dir and ssh
# port, so it does not touch a running `molecule test -s rdma`), the slim Debian
# repository its sources.list names (tests/harness/vm/debian_mirror.py), the stand-in
# vendor repositories of tests/harness/standin_repo/serve.sh, soft-RoCE rxe0 and
# "firmware" ACS from molecule/resources/vm/files/testbed-setup.sh, and the knobs of the
# rdma scenario's node (inventory/testnode/group_vars, molecule/rdma/host_vars/
# rdma-node1.yml). Unlike molecule/rdma/prepare.yml it installs no wrong-order
# NVIDIA stack: the converge starts from a node that never had one.
#
# Measured, in this order, in one run:
#   fresh   ansible-playbook site.yml: wall time, tasks per node, changed, reboots
#   no-op   ansible-playbook site.yml again: the same figures; must be changed=0
#           (the node matches its converged-state record: install stages skipped)
#   full    the same with -e gpudirect_state_skip_unchanged=false: every stage
#           runs its own checks; must be changed=0 too (for comparison)
#   facts   ansible NODE -m ansible.builtin.setup (a bare fact-gathering run)
#   ratio   no-op wall time / facts wall time (target <= 3)
#   loopback (BENCH_LOOPBACK=1) benchmarks/loopback_vs_perftest.sh against the node
# Reboots of a run: how many times the guest restarted during it, from the
# serial console ("reboot: Restarting system"; vm.py cold-restarts qemu on it),
# checked against /proc/sys/kernel/random/boot_id read before and after; the
# gpudirect_reboot role's own decisions ("rebooting once: ...") are counted too.
#
# Refuses to start while another qemu runs (timings would mean little and the
# other VM, e.g. a test run, would be slowed down): BENCH_ALLOW_BUSY=1 overrides.
# Environment: BENCH_VM_NAME (default gpudirect-bench-vm), BENCH_VM_SSH_PORT
# (default 2251), BENCH_VM_STATE (run dir root, default $BENCH_WORK/vm),
# BENCH_VM_STOP_AFTER=facts (test the harness: boot, prepare, gather facts once,
# stop; no converge), BENCH_VM_KEEP_RUNNING=1 (leave the VM up at the end, for a
# look at the converged node: tests/harness/vm/vm.py --state-dir DIR ssh NAME; stop
# it with vm.py --state-dir DIR stop NAME), BENCH_RESULTS, BENCH_WORK (see lib.sh).
# Figures (key=value in $BENCH_RESULTS): vm_{fresh,noop,full}_{wall_s,tasks,changed,
# reboots,boot_id_changed,role_reboots}, vm_facts_wall_s, vm_noop_over_facts,
# vm_accel, loopback_{module_gbps,perftest_gbps,ratio}.
set -euo pipefail
# shellcheck source=benchmarks/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init vm

name=${BENCH_VM_NAME:-gpudirect-bench-vm}
port=${BENCH_VM_SSH_PORT:-2251}
state=${BENCH_VM_STATE:-$BENCH_WORK/vm}
stop_after=${BENCH_VM_STOP_AFTER:-}
vmpy=(python3 "$BENCH_ROOT/tests/harness/vm/vm.py" --state-dir "$state")
export ANSIBLE_HOST_KEY_CHECKING=false ANSIBLE_TIMEOUT=60

if pgrep -f qemu-system >/dev/null && [[ -z "${BENCH_ALLOW_BUSY:-}" ]]; then
  bench_log "another qemu is running (pgrep -af qemu-system): not starting a VM beside it; BENCH_ALLOW_BUSY=1 overrides"
  exit 1
fi

bench_put vm_host "$(bench_host)"
image=$(tests/harness/vm/build-image.sh | tail -n 1)
# the guest's Debian (127.0.0.1:8767) and the stand-in vendor repositories (shared on
# 127.0.0.1:8765); stop them at the end only when this script started them
slim_was_up=0
python3 tests/harness/vm/debian_mirror.py status >/dev/null 2>&1 && slim_was_up=1
python3 tests/harness/vm/debian_mirror.py start --image "$image" >/dev/null
standin_was_up=0
tests/harness/standin_repo/serve.sh status >/dev/null 2>&1 && standin_was_up=1
tests/harness/standin_repo/serve.sh start >/dev/null

vm_started=0
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if ((vm_started)) && [[ -n "${BENCH_VM_KEEP_RUNNING:-}" && "$BENCH_VM_KEEP_RUNNING" != 0 ]]; then
    bench_log "leaving the VM running (BENCH_VM_KEEP_RUNNING): ${vmpy[*]} ssh $name"
  elif ((vm_started)); then
    bench_log "stopping the VM"
    "${vmpy[@]}" stop "$name" --keep >/dev/null 2>&1 || true
  fi
  if ((!standin_was_up)); then
    tests/harness/standin_repo/serve.sh stop >/dev/null 2>&1 || true
  fi
  if ((!slim_was_up)); then
    python3 tests/harness/vm/debian_mirror.py stop >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_log "starting VM $name (ssh 127.0.0.1:$port, image $image)"
vm_started=1
instance=$("${vmpy[@]}" start "$name" --ssh-port "$port" --image "$image")
bench_timed "$BENCH_WORK/vm-wait-ssh.log" "${vmpy[@]}" wait-ssh "$name" --timeout 900
if ((BENCH_RC)); then bench_show_failure "$BENCH_WORK/vm-wait-ssh.log"; exit 1; fi
bench_log "ssh answers (${BENCH_WALL} s of waiting)"
key=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["identity_file"])' "$instance")
bench_put vm_accel "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["accel"])' "$state/$name/info.json")"
serial=$state/$name/serial.log

inv=$BENCH_WORK/vm-inventory
mkdir -p "$inv/host_vars"
ln -sfn "$BENCH_ROOT/inventory/testnode/group_vars" "$inv/group_vars"
ln -sfn "$BENCH_ROOT/molecule/rdma/host_vars/rdma-node1.yml" "$inv/host_vars/$name.yml"
cat >"$inv/hosts.yml" <<EOF
---
# the VM node of benchmarks/vm_converge.sh (knobs: molecule/rdma/host_vars/rdma-node1.yml)
all:
  children:
    gpu_nodes:
      hosts:
        $name:
          ansible_host: 127.0.0.1
          ansible_port: $port
          ansible_user: root
          ansible_ssh_private_key_file: $key
          ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
EOF

bench_log "testbed: soft-RoCE rxe0 and firmware-style ACS (molecule/resources/vm/files/testbed-setup.sh)"
bench_timed "$BENCH_WORK/vm-testbed.log" \
  ansible "$name" -i "$inv" -m ansible.builtin.script -a "$BENCH_ROOT/molecule/resources/vm/files/testbed-setup.sh install"
if ((BENCH_RC)); then bench_show_failure "$BENCH_WORK/vm-testbed.log"; exit 1; fi

boot_id() { "${vmpy[@]}" ssh "$name" cat /proc/sys/kernel/random/boot_id; }
restarts() { grep -c 'reboot: Restarting system' "$serial" || true; }

facts_run() {
  bench_timed "$BENCH_WORK/vm-facts.log" ansible "$name" -i "$inv" -m ansible.builtin.setup
  if ((BENCH_RC)); then bench_show_failure "$BENCH_WORK/vm-facts.log"; exit 1; fi
  bench_put vm_facts_wall_s "$BENCH_WALL"
  bench_log "facts: ${BENCH_WALL} s"
}

if [[ $stop_after == facts ]]; then
  bench_log "boot id $(boot_id)"
  facts_run
  exit 0
fi

status=0
converge() {  # converge fresh|noop|full [ansible-playbook args] : one timed site.yml run and its figures
  local run=$1 log="$BENCH_WORK/vm-$1.log" before after r0 r1 recap tasks_per_node changed failed unreachable
  shift
  local reboots role_reboots id_changed
  before=$(boot_id)
  r0=$(restarts)
  bench_log "$run: ansible-playbook site.yml $* (boot id $before)"
  bench_timed "$log" ansible-playbook -i "$inv" "$@" site.yml
  after=$(boot_id || echo unreachable)
  r1=$(restarts)
  if ! grep -q "PLAY RECAP" "$log"; then bench_show_failure "$log"; exit 1; fi
  recap=$(bench_recap "$log")
  read -r _ tasks_per_node _ changed failed unreachable _ <<<"$recap"
  reboots=$((r1 - r0))
  id_changed=0
  if [[ $before != "$after" ]]; then id_changed=1; fi
  # a reboot the console log missed still changes the boot id
  if ((id_changed && reboots == 0)); then reboots=1; fi
  role_reboots=$(grep -c 'rebooting once: ' "$log" || true)
  bench_put "vm_${run}_wall_s" "$BENCH_WALL"
  bench_put "vm_${run}_tasks" "$tasks_per_node"
  bench_put "vm_${run}_changed" "$changed"
  bench_put "vm_${run}_failed" "$((failed + unreachable))"
  bench_put "vm_${run}_reboots" "$reboots"
  bench_put "vm_${run}_boot_id_changed" "$id_changed"
  bench_put "vm_${run}_role_reboots" "$role_reboots"
  printf 'vm %-5s wall=%7.1f s  tasks=%-4s changed=%-3s failed=%s  reboots=%s (boot id changed: %s, role: %s)\n' \
    "$run" "$BENCH_WALL" "$tasks_per_node" "$changed" "$((failed + unreachable))" "$reboots" "$id_changed" "$role_reboots"
  if ((BENCH_RC || failed || unreachable)); then
    bench_log "$run: site.yml failed (rc $BENCH_RC); see $log"
    grep -E '^(fatal|failed):' "$log" | head -n 20 >&2 || true
    status=1
  fi
  if [[ $run != fresh ]] && ((changed)); then
    bench_log "$run: the re-run changed $changed tasks (must be 0); see $log"
    grep -E '^changed:' "$log" | head -n 20 >&2 || true
    status=1
  fi
}

converge fresh
if ((status)); then exit "$status"; fi
converge noop
converge full -e gpudirect_state_skip_unchanged=false
facts_run
bench_put vm_noop_over_facts "$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' \
  "$(grep '^vm_noop_wall_s=' "$BENCH_RESULTS" | cut -d= -f2)" "$(grep '^vm_facts_wall_s=' "$BENCH_RESULTS" | cut -d= -f2)")"

if [[ -n "${BENCH_LOOPBACK:-}" && "${BENCH_LOOPBACK}" != 0 ]]; then
  bench_log "loopback: benchmarks/loopback_vs_perftest.sh against $name"
  # 5 rounds, as the kernel_update scenario's check: under TCG single rounds of
  # either tool vary by +-30% (0.75-0.94 in three rounds on 2026-11-23)
  RUNS=${RUNS:-5} bench_timed "$BENCH_WORK/vm-loopback.log" benchmarks/loopback_vs_perftest.sh "$name" -i "$inv"
  if ((BENCH_RC)); then
    bench_show_failure "$BENCH_WORK/vm-loopback.log"
    status=1
  else
    last=$(grep '^module_bw=' "$BENCH_WORK/vm-loopback.log" | tail -n 1)
    echo "loopback: $last"
    # module_bw=X Gbit/s perftest_bw=Y Gbit/s module_bw/perftest_bw=R (target >= 0.9) ...
    read -r lb_module lb_perf lb_ratio <<<"$(python3 -c '
import re, sys
m = re.search(r"module_bw=([0-9.]+) .*? perftest_bw=([0-9.]+) .*?/perftest_bw=([0-9.]+)", sys.argv[1])
print(" ".join(m.groups()) if m else "? ? ?")' "$last")"
    bench_put loopback_module_gbps "$lb_module"
    bench_put loopback_perftest_gbps "$lb_perf"
    bench_put loopback_ratio "$lb_ratio"
  fi
fi
exit "$status"
