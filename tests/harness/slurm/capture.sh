#!/usr/bin/env bash
# Capture what real Slurm prints for a node in each state a drain goes through,
# as unit-test fixtures: starts a controller and three compute nodes
# (start-cluster.yml), walks them through the states below, writes each raw output
# to tests/fixtures/slurm/ with a README.md naming its command, and removes the
# containers (GPUDIRECT_SLURM_KEEP=1 keeps them).
#
#   tests/harness/slurm/capture.sh [OUT_DIR]       # default tests/fixtures/slurm
#
# node 1: idle, mixed (a one-CPU job), draining (DRAIN set while it runs), drained
#         (the job ended), resumed
# node 2: allocated (an --exclusive job), draining, then an admin's drain ("Bad DIMM")
# node 3: slurmd stopped: not responding, then down; slurmd started: back by itself
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(realpath -m "${1:-$root/tests/fixtures/slurm}")
head=gpudirect-slurm-head
n1=gpudirect-slurm1 n2=gpudirect-slurm2 n3=gpudirect-slurm3
job_seconds=30
reason_run='gpudirect run X: drain'
reason_admin='Bad DIMM'
playbook=${ANSIBLE_PLAYBOOK:-$root/.venv/bin/ansible-playbook}

log() { printf '[slurm-capture] %s: %s\n' "$(date +%T)" "$*" >&2; }
on_head() { podman exec "$head" "$@"; }
state_of() { on_head scontrol -o show node "$1" | grep -o 'State=[^ ]*' | cut -d= -f2; }
# wait_state NODE REGEX [SECONDS]: until the node's State= value matches
wait_state() {
  local node=$1 want=$2 limit=${3:-90} since=$SECONDS s
  while s=$(state_of "$node"); ! [[ $s =~ ^($want)$ ]]; do
    (( SECONDS - since < limit )) || { log "$node still $s after ${limit}s (wanted $want)"; exit 1; }
    sleep 1
  done
  log "$node State=$s after $(( SECONDS - since ))s"
}

rows=()
# capture NAME NODE [COMMAND...]: COMMAND (if any), then the node's one-line and
# multi-line scontrol forms and sinfo, all in one exec on the controller (one moment);
# each output saved raw
capture() {
  local name=$1 node=$2 state reason f
  shift 2
  on_head sh -c 'node=$1; shift
    if [ $# -gt 0 ]; then "$@" || exit 1; fi
    mkdir -p /tmp/capture
    scontrol -o show node "$node" >/tmp/capture/scontrol-o-show-node
    scontrol show node "$node" >/tmp/capture/scontrol-show-node
    sinfo -h -N -o "%N %T %E" >/tmp/capture/sinfo' sh "$node" "$@"
  for f in scontrol-o-show-node scontrol-show-node sinfo; do
    on_head cat "/tmp/capture/$f" >"$out/$f-$name.txt"
  done
  state=$(grep -o 'State=[^ ]*' "$out/scontrol-o-show-node-$name.txt")
  reason=$(grep -o ' Reason=.*' "$out/scontrol-o-show-node-$name.txt" || true)
  state="\`$state${reason}\`"
  rows+=("| \`scontrol-o-show-node-$name.txt\` | \`scontrol -o show node $node\` | $node $state |")
  rows+=("| \`scontrol-show-node-$name.txt\` | \`scontrol show node $node\` | $node $state |")
  rows+=("| \`sinfo-$name.txt\` | \`sinfo -h -N -o '%N %T %E'\` | \`$(grep "^$node " "$out/sinfo-$name.txt")\` |")
}
capture_job() {
  local name=$1 job=$2 state
  on_head scontrol -o show job "$job" >"$out/scontrol-o-show-job-$name.txt"
  state=$(grep -o 'JobState=[^ ]*' "$out/scontrol-o-show-job-$name.txt")
  rows+=("| \`scontrol-o-show-job-$name.txt\` | \`scontrol -o show job $job\` | \`$state\` |")
}

cleanup() {
  [[ -n "${GPUDIRECT_SLURM_KEEP:-}" ]] || podman rm -f "$head" "$n1" "$n2" "$n3" >/dev/null 2>&1 || true
}
trap cleanup EXIT

mkdir -p "$out"
start=$(date +%s)
log "starting the cluster"
"$playbook" "$here/start-cluster.yml" \
  -e "{\"__slurm_head\": \"$head\", \"__slurm_nodes\": [\"$n1\", \"$n2\", \"$n3\"]}" >"$out/.start-cluster.log" 2>&1 \
  || { tail -n 40 "$out/.start-cluster.log" >&2; exit 1; }
rm -f "$out/.start-cluster.log"
log "cluster up: $(( $(date +%s) - start )) s"

capture idle "$n1"

job1=$(on_head sbatch --parsable -w "$n1" -o /dev/null --wrap "sleep $job_seconds")
job2=$(on_head sbatch --parsable -w "$n2" -o /dev/null --exclusive --wrap "sleep $job_seconds")
wait_state "$n1" MIXED
wait_state "$n2" ALLOCATED
capture mixed "$n1"
capture allocated "$n2"
capture_job running "$job1"

on_head scontrol update NodeName="$n1" State=DRAIN Reason="$reason_run"
on_head scontrol update NodeName="$n2" State=DRAIN Reason="$reason_run"
wait_state "$n1" 'MIXED\+DRAIN'
wait_state "$n2" 'ALLOCATED\+DRAIN'
capture draining "$n1"
capture draining-allocated "$n2"

podman exec "$n3" systemctl stop slurmd.service
wait_state "$n3" 'IDLE\+NOT_RESPONDING'
capture not-responding "$n3"
wait_state "$n3" 'DOWN.*' 120
capture down "$n3"

wait_state "$n1" 'IDLE\+DRAIN' $(( job_seconds + 30 ))
capture drained "$n1"
wait_state "$n2" 'IDLE\+DRAIN' 30
capture_job completed "$job1"

# at once: slurmctld marks a resumed node not responding until its next ping answers
capture just-resumed "$n1" scontrol update NodeName="$n1" State=RESUME
wait_state "$n1" IDLE
capture resumed "$n1"

on_head scontrol update NodeName="$n2" State=RESUME
wait_state "$n2" IDLE
on_head scontrol update NodeName="$n2" State=DRAIN Reason="$reason_admin"
wait_state "$n2" 'IDLE\+DRAIN'
capture admin-drained "$n2"

podman exec "$n3" systemctl start slurmd.service
wait_state "$n3" IDLE
capture returned "$n3"

version=$(on_head dpkg-query -W -f '${Version}' slurmctld)
h="podman exec $head"
{
  echo "# Slurm outputs captured from a real cluster"
  echo
  echo "Debian 12 slurmctld/slurmd $version in podman containers, captured $(date -u +%F) by"
  echo "tests/harness/slurm: \`tests/harness/slurm/capture.sh\` wrote every file here, this one included."
  echo "A controller \`$head\` and compute nodes \`$n1\`, \`$n2\`, \`$n3\` (2 CPUs each, one"
  echo "partition \`gpudirect\`; slurm.conf from tests/harness/slurm/slurm.conf.j2). Each file is the"
  echo "unedited stdout of its command, run on the controller (\`$h <command>\`)."
  echo
  echo "What was done, in order (the table's rows follow it):"
  echo
  echo '```sh'
  echo "$h sbatch --parsable -w $n1 -o /dev/null --wrap 'sleep $job_seconds'              # job $job1: one CPU of 2, MIXED"
  echo "$h sbatch --parsable -w $n2 -o /dev/null --exclusive --wrap 'sleep $job_seconds'  # job $job2: ALLOCATED"
  echo "$h scontrol update NodeName=$n1 State=DRAIN Reason='$reason_run'   # while job $job1 runs"
  echo "$h scontrol update NodeName=$n2 State=DRAIN Reason='$reason_run'   # while job $job2 runs"
  echo "podman exec $n3 systemctl stop slurmd.service                     # not responding, then down"
  echo "# the jobs end: $n1 and $n2 drained"
  echo "$h scontrol update NodeName=$n1 State=RESUME                       # just-resumed, then resumed"
  echo "$h scontrol update NodeName=$n2 State=RESUME"
  echo "$h scontrol update NodeName=$n2 State=DRAIN Reason='$reason_admin'                  # an admin's drain"
  echo "podman exec $n3 systemctl start slurmd.service                    # back by itself (ReturnToService=2)"
  echo '```'
  echo
  echo "| file | command | state |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out/README.md"
log "done: $(( $(date +%s) - start )) s, $(( ${#rows[@]} )) files in $out"
