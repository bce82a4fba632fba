#!/usr/bin/env bash
# Fleet benchmark: a no-op re-run over 1, 4 and 16 container nodes, and the wall
# time per node (it should fall as nodes are added, up to the forks limit).
#
#   benchmarks/fleet_noop.sh [N...]          # default: 1 4 16
#
# Starts max(N) podman systemd containers from the project's image, with the
# options the container scenario uses (tests/harness/container/start-nodes.yml:
# build-image.sh, runc, ulimits, systemd), converges them all once, then for
# each N times a no-op run over the first N nodes with forks >= N. That run
# must report changed=0 (and no failed or unreachable host); the script fails
# otherwise. The containers are removed at the end, also on failure.
#
# What runs: the container scenario's converge playbook
# (molecule/default/converge.yml), i.e. the stages of site.yml a container can
# carry, in site.yml's order: the converged-state check, preflight, os_pin,
# pcie_acs, report, the record. The no-op runs find every node as its converge
# left it, so the install stages end at once (roles/gpudirect_state);
# FLEET_EXTRA_ARGS="-e gpudirect_state_skip_unchanged=false" times every
# stage's own checks instead. drivers,
# reboot and verify need a kernel of their own (DKMS, modprobe, a reboot, an
# RDMA device) and are measured on the VM node (benchmarks/vm_converge.sh).
# Node knobs: inventory/testnode/group_vars (no GPU, no RDMA NIC).
#
# Environment: FLEET_PREFIX (container names, default gpudirect-bench),
# FLEET_PLAYBOOK (default molecule/default/converge.yml), FLEET_EXTRA_ARGS
# (more ansible-playbook arguments for the timed runs), FLEET_FORKS (forks of
# each timed run, default N; never below N), BENCH_RESULTS, BENCH_WORK (see lib.sh).
# Figures (key=value in $BENCH_RESULTS): fleet_converge_wall_s, fleet_converge_nodes,
# fleet_nodes, fleet_n<N>_{wall_s,tasks_per_node,tasks,changed,failed,forks,s_per_node}.
set -euo pipefail
# shellcheck source=benchmarks/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init fleet

sizes=("$@")
((${#sizes[@]})) || sizes=(1 4 16)
max=0
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { bench_log "not a node count: $n"; exit 2; }
  if ((n > max)); then max=$n; fi
done
prefix=${FLEET_PREFIX:-gpudirect-bench}
playbook=${FLEET_PLAYBOOK:-molecule/default/converge.yml}
names=()
for i in $(seq 1 "$max"); do names+=("$(printf '%s-%02d' "$prefix" "$i")"); done

for name in "${names[@]}"; do
  if podman container exists "$name"; then
    bench_log "container $name exists already (a run that was killed?): remove it first: podman rm -f $name"
    exit 1
  fi
done

started=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if ((${#started[@]})); then
    bench_log "removing ${#started[@]} containers"
    podman rm -f -t 5 "${started[@]}" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

inventory() {  # inventory N : an inventory of the first N nodes; prints its directory
  local n=$1 dir="$BENCH_WORK/fleet-inventory-$1" i
  mkdir -p "$dir"
  ln -sfn "$BENCH_ROOT/inventory/testnode/group_vars" "$dir/group_vars"
  {
    echo "---"
    echo "# $n container nodes of benchmarks/fleet_noop.sh"
    echo "all:"
    echo "  children:"
    echo "    gpu_nodes:"
    echo "      hosts:"
    for ((i = 0; i < n; i++)); do
      echo "        ${names[i]}:"
      echo "          ansible_connection: containers.podman.podman"
      echo "          ansible_host: ${names[i]}"
      echo "          ansible_user: root"
    done
  } >"$dir/hosts.yml"
  echo "$dir"
}

# start-nodes.yml: build or reuse the image, one systemd container per node,
# wait until systemd inside each has booted
nodes_json=$(printf '%s\n' "${names[@]}" | python3 -c \
  'import json, sys; print(json.dumps({"__test_nodes": [{"name": l.strip()} for l in sys.stdin if l.strip()]}))')
bench_put fleet_host "$(bench_host)"
inv=$(inventory "$max")
bench_log "starting $max containers ($prefix-01..)"
started=("${names[@]}")  # start-nodes.yml may fail half-way: remove whatever exists
# its play runs on the implicit localhost (the controller's own Python)
bench_timed "$BENCH_WORK/fleet-start.log" \
  ansible-playbook -i "$inv" tests/harness/container/start-nodes.yml -e "$nodes_json"
if ((BENCH_RC)); then bench_show_failure "$BENCH_WORK/fleet-start.log"; exit 1; fi
bench_log "containers up in ${BENCH_WALL} s"

bench_log "converging $max nodes once ($playbook, forks $max)"
bench_timed "$BENCH_WORK/fleet-converge.log" \
  ansible-playbook -i "$inv" --forks "$max" "$playbook"
if ((BENCH_RC)); then bench_show_failure "$BENCH_WORK/fleet-converge.log"; exit 1; fi
recap=$(bench_recap "$BENCH_WORK/fleet-converge.log")
read -r _ tasks_per_node _ changed _ _ _ <<<"$recap"
bench_log "converge: ${BENCH_WALL} s, $tasks_per_node tasks per node, changed=$changed"
bench_put fleet_converge_nodes "$max"
bench_put fleet_converge_wall_s "$BENCH_WALL"
bench_put fleet_nodes "${sizes[*]}"

status=0
for n in "${sizes[@]}"; do
  forks=${FLEET_FORKS:-$n}
  if ((forks < n)); then forks=$n; fi
  inv=$(inventory "$n")
  log="$BENCH_WORK/fleet-noop-$n.log"
  # shellcheck disable=SC2086  # FLEET_EXTRA_ARGS is a list of words
  bench_timed "$log" ansible-playbook -i "$inv" --forks "$forks" ${FLEET_EXTRA_ARGS:-} "$playbook"
  if ((BENCH_RC)) && ! grep -q "PLAY RECAP" "$log"; then bench_show_failure "$log"; exit 1; fi
  recap=$(bench_recap "$log")
  read -r _ tasks_per_node tasks changed failed unreachable _ <<<"$recap"
  per_node=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / int(sys.argv[2])))' "$BENCH_WALL" "$n")
  bench_put "fleet_n${n}_wall_s" "$BENCH_WALL"
  bench_put "fleet_n${n}_tasks_per_node" "$tasks_per_node"
  bench_put "fleet_n${n}_tasks" "$tasks"
  bench_put "fleet_n${n}_changed" "$changed"
  bench_put "fleet_n${n}_failed" "$((failed + unreachable))"
  bench_put "fleet_n${n}_forks" "$forks"
  bench_put "fleet_n${n}_s_per_node" "$per_node"
  printf 'fleet no-op N=%-3s forks=%-3s wall=%7.1f s  tasks/node=%-3s tasks=%-4s changed=%s failed=%s  per node=%6.2f s\n' \
    "$n" "$forks" "$BENCH_WALL" "$tasks_per_node" "$tasks" "$changed" "$((failed + unreachable))" "$per_node"
  if ((BENCH_RC || changed || failed || unreachable)); then
    bench_log "N=$n: the re-run was not a clean no-op (rc $BENCH_RC, changed=$changed, failed=$failed, unreachable=$unreachable); see $log"
    grep -E '^(changed|failed|fatal):' "$log" | head -n 20 >&2 || true
    status=1
  fi
done
exit "$status"
