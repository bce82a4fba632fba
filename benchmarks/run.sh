#!/usr/bin/env bash
# The benchmarks of "kernel updates, reboots and fleet rollouts", in one run,
# printed as one table: metric, value, target, verdict.
#
#   benchmarks/run.sh [fleet] [vm] [loopback]      # default: all three
#
#   fleet     benchmarks/fleet_noop.sh $FLEET_SIZES (default "1 4 16"): no-op run
#             over container nodes, wall time per node
#   vm        benchmarks/vm_converge.sh: reboots, wall time and tasks of a fresh
#             site.yml converge and of its no-op re-run on a VM node, no-op/facts
#   loopback  benchmarks/loopback_vs_perftest.sh against the same VM node, run by
#             vm_converge.sh before it stops the VM (so `loopback` alone also
#             boots and converges the VM: the loopback needs the converged node)
#
# Each part writes key=value lines to one results file ($BENCH_WORK/results.env,
# BENCH_WORK defaults to .cache/benchmarks/<time>/, with every Ansible log);
# the table is built from it. Exit code: non-zero when a part failed or a
# figure missed its target.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BENCH_WORK=${BENCH_WORK:-$PWD/.cache/benchmarks/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$BENCH_WORK"
BENCH_RESULTS=$BENCH_WORK/results.env
: >"$BENCH_RESULTS"
export BENCH_WORK BENCH_RESULTS

parts=("$@")
((${#parts[@]})) || parts=(fleet vm loopback)
fleet=0 vm=0 loopback=0
for p in "${parts[@]}"; do
  case $p in
    fleet) fleet=1 ;;
    vm) vm=1 ;;
    loopback) vm=1 loopback=1 ;;
    *) echo "unknown part: $p (fleet, vm, loopback)" >&2; exit 2 ;;
  esac
done

failed=()
if ((fleet)); then
  echo "=== fleet: benchmarks/fleet_noop.sh ${FLEET_SIZES:-1 4 16}"
  # shellcheck disable=SC2086  # FLEET_SIZES is a list of numbers
  benchmarks/fleet_noop.sh ${FLEET_SIZES:-1 4 16} || failed+=(fleet)
fi
if ((vm)); then
  echo "=== vm: benchmarks/vm_converge.sh$( ((loopback)) && echo ' (with loopback_vs_perftest.sh)')"
  BENCH_LOOPBACK=$loopback benchmarks/vm_converge.sh || failed+=(vm)
fi

echo
echo "results: $BENCH_RESULTS (logs in $BENCH_WORK)"
python3 - "$BENCH_RESULTS" "$fleet" "$vm" "$loopback" "${failed[*]}" <<'PY'
import sys

path, want_fleet, want_vm, want_loop, failed_parts = sys.argv[1:6]
res = {}
for line in open(path):
    if "=" in line:
        k, v = line.rstrip("\n").split("=", 1)
        res[k] = v

rows = []      # metric, value, target, verdict
misses = 0

def num(key):
    try:
        return float(res[key])
    except (KeyError, ValueError):
        return None

def row(metric, key, target="", check=None, unit=""):
    global misses
    value = res.get(key)
    if value is None:
        rows.append((metric, "-", target or "", "NOT MEASURED"))
        misses += 1
        return
    verdict = "info"
    if check is not None:
        ok = check(float(value))
        verdict = "PASS" if ok else "FAIL"
        misses += not ok
    rows.append((metric, value + unit, target, verdict))

if want_fleet == "1":
    sizes = res.get("fleet_nodes", "").split()
    if res.get("fleet_host"):
        rows.append(("fleet: controller", res["fleet_host"], "", "info"))
    row("fleet: converge of %s nodes (once, before the no-op runs)" % res.get("fleet_converge_nodes", "?"),
        "fleet_converge_wall_s", unit=" s")
    prev = None
    for n in sizes:
        forks = res.get("fleet_n%s_forks" % n, "?")
        row("fleet no-op N=%s (forks %s): wall time" % (n, forks), "fleet_n%s_wall_s" % n, unit=" s")
        row("fleet no-op N=%s: tasks per node" % n, "fleet_n%s_tasks_per_node" % n)
        row("fleet no-op N=%s: changed" % n, "fleet_n%s_changed" % n, "0", lambda v: v == 0)
        per = num("fleet_n%s_s_per_node" % n)
        if prev is None:
            row("fleet no-op N=%s: wall time per node" % n, "fleet_n%s_s_per_node" % n, unit=" s")
        else:
            pn, pv = prev
            row("fleet no-op N=%s: wall time per node" % n, "fleet_n%s_s_per_node" % n,
                "< %s s (N=%s)" % (pv, pn), lambda v, pv=pv: v < pv, unit=" s")
        if per is not None:
            prev = (n, per)
    if not sizes:
        rows.append(("fleet", "-", "", "NOT MEASURED"))
        misses += 1

if want_vm == "1":
    if res.get("vm_host"):
        rows.append(("vm: controller", res["vm_host"], "", "info"))
    if res.get("vm_accel"):
        rows.append(("vm: accelerator", res["vm_accel"], "", "info"))
    row("vm fresh converge: reboots (console restarts)", "vm_fresh_reboots", "<= 1", lambda v: v <= 1)
    row("vm fresh converge: reboots decided by gpudirect_reboot", "vm_fresh_role_reboots", "<= 1", lambda v: v <= 1)
    row("vm no-op re-run: reboots (console restarts)", "vm_noop_reboots", "0", lambda v: v == 0)
    row("vm no-op re-run: boot id changed", "vm_noop_boot_id_changed", "0", lambda v: v == 0)
    row("vm no-op re-run: reboots decided by gpudirect_reboot", "vm_noop_role_reboots", "0", lambda v: v == 0)
    row("vm fresh converge: wall time", "vm_fresh_wall_s", unit=" s")
    row("vm fresh converge: tasks", "vm_fresh_tasks")
    row("vm fresh converge: changed", "vm_fresh_changed")
    row("vm no-op re-run: wall time", "vm_noop_wall_s", unit=" s")
    row("vm no-op re-run: tasks", "vm_noop_tasks")
    row("vm no-op re-run: changed", "vm_noop_changed", "0", lambda v: v == 0)
    row("vm no-op re-run, every stage (skip_unchanged=false): wall time", "vm_full_wall_s", unit=" s")
    row("vm no-op re-run, every stage: tasks", "vm_full_tasks")
    row("vm no-op re-run, every stage: changed", "vm_full_changed", "0", lambda v: v == 0)
    row("vm bare fact gathering (ansible -m setup): wall time", "vm_facts_wall_s", unit=" s")
    row("vm no-op re-run / fact gathering", "vm_noop_over_facts", "<= 3", lambda v: v <= 3)

if want_loop == "1":
    row("loopback: gpudirect_loopback RDMA WRITE", "loopback_module_gbps", unit=" Gbit/s")
    row("loopback: ib_write_bw", "loopback_perftest_gbps", unit=" Gbit/s")
    row("loopback: module / ib_write_bw", "loopback_ratio", ">= 0.9", lambda v: v >= 0.9)

head = ("metric", "value", "target", "verdict")
w = [max(len(str(r[i])) for r in rows + [head]) for i in range(4)]
line = "| " + " | ".join("%-*s" for _ in w) + " |"
print(line % (w[0], head[0], w[1], head[1], w[2], head[2], w[3], head[3]))
print("|" + "|".join("-" * (x + 2) for x in w) + "|")
for r in rows:
    print(line % (w[0], r[0], w[1], r[1], w[2], r[2], w[3], r[3]))
if failed_parts:
    print("failed parts: %s (their logs are in the work dir)" % failed_parts)
sys.exit(1 if misses or failed_parts else 0)
PY
