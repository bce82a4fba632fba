#!/usr/bin/env bash
# Fleet benchmark: the controller's time for playbooks/kernel_update.yml's plan pass and
# no-op re-run as the node count grows (default 16, 64, 256), the time per node, and the
# projection to 500 nodes.
#
#   benchmarks/fleet_kernel_update_plan.sh [N...]      # default: 16 64 256
#
# The nodes are simulated: N inventory names with the local connection, each one this
# machine, so what is measured is the controller (forking, templating the campaign over
# N nodes, the plan module's Python start-up and its apt-cache read), not a network.
# kernel_update_packages is [libc6], installed at its candidate on this Debian machine:
# every node is at the campaign's target, so the run is the no-op re-run a 500-node
# rollout ends with (the plan, "nothing to do" for every node, nothing locked, drained or
# changed); the script fails when a node is changed, failed or not judged at target.
# Package lists are not refreshed (kernel_update_refresh_cache: false): apt-get update is
# the network's time, not the controller's. Forks: ansible.cfg's (25) unless
# FLEET_FORKS is set.
#
# Figures (key=value in $BENCH_RESULTS): ku_plan_n<N>_{wall_s,s_per_node,changed,failed},
# ku_plan_projected_500_s (the largest N's per-node time times 500).
set -euo pipefail
# shellcheck source=benchmarks/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init ku_plan

sizes=("$@")
((${#sizes[@]})) || sizes=(16 64 256)
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { bench_log "not a node count: $n"; exit 2; }
done
command -v apt-cache >/dev/null || { bench_log "needs apt-cache (a Debian or Ubuntu controller)"; exit 2; }
bench_log "$(bench_host)"
export GPUDIRECT_RUN_SUMMARY_DIR=""
forks=()
[[ -n ${FLEET_FORKS:-} ]] && forks=(--forks "$FLEET_FORKS")

last_per_node=""
for n in "${sizes[@]}"; do
  inv=$BENCH_WORK/ku-plan-$n.yml
  {
    echo "gpu_nodes:"
    echo "  hosts:"
    for i in $(seq 1 "$n"); do printf '    sim-%04d: {}\n' "$i"; done
    echo "  vars:"
    echo "    ansible_connection: local"
    echo "    ansible_python_interpreter: $(command -v python3)"
    echo "    kernel_update_packages: [libc6]"
    echo "    kernel_update_refresh_cache: false"
  } >"$inv"
  log=$BENCH_WORK/ku-plan-$n.log
  bench_timed "$log" ansible-playbook -i "$inv" "${forks[@]}" playbooks/kernel_update.yml
  read -r hosts _ _ changed failed unreachable _ <<<"$(bench_recap "$log")"
  done_count=$(grep -c ': nothing to do, not locked or drained' "$log" || true)
  per_node=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) / int(sys.argv[2])))' "$BENCH_WALL" "$n")
  bench_log "$n nodes: ${BENCH_WALL} s (${per_node} s per node), rc $BENCH_RC, changed $changed, failed $failed, unreachable $unreachable, at target $done_count"
  bench_put "ku_plan_n${n}_wall_s" "$BENCH_WALL"
  bench_put "ku_plan_n${n}_s_per_node" "$per_node"
  bench_put "ku_plan_n${n}_changed" "$changed"
  bench_put "ku_plan_n${n}_failed" "$failed"
  if ((BENCH_RC != 0 || changed != 0 || failed != 0 || unreachable != 0 || hosts != n || done_count != n)); then
    bench_log "the no-op run over $n nodes was not a no-op: see $log"
    exit 1
  fi
  last_per_node=$per_node
done
projected=$(python3 -c 'import sys; print("%.0f" % (float(sys.argv[1]) * 500))' "$last_per_node")
bench_put ku_plan_projected_500_s "$projected"
bench_log "projected for 500 nodes at ${last_per_node} s per node: ${projected} s"
