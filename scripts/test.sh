#!/usr/bin/env bash
# Run every test of the project, as CI does (.ci/run calls this):
#   static   yamllint --strict, ansible-lint (production profile, offline),
#            `ansible-test sanity` on the built collection (scripts/sanity.sh),
#            ansible-playbook --syntax-check of every playbook
#   unit     pytest on modules and filters with real captured outputs
#   container Molecule scenarios `default` (site.yml), `os_release_pin`
#            (pin, unpin, validation) and `rolling` (four nodes, a fake
#            scheduler: batches, drain, resume only on proof) on podman
#            systemd nodes
#   rdma     Molecule scenario `rdma` (one qemu VM with Debian's kernel: a
#            wrong-order install repaired, a power cycle); it saves its node
#            right after its idempotence step
#   kernel_update  Molecule scenario `kernel_update` (the node rdma saved,
#            updated to the next kernel ABI)
#   pair     Molecule scenario `pair` (three VMs, ring verification over their
#            private link)
#   secureboot  Molecule scenario `secureboot`: the node rdma saved, booted
#            through UEFI Secure Boot, a signed chain, MOK enrolment
#   slurm    Molecule scenario `slurm`: a real Slurm (slurmctld, slurmd, munge) in
#            podman containers with real jobs; campaigns with the built-in Slurm
#            support (admin drains kept, waits, skips, a killed run finished)
#   vm       rdma, then kernel_update, one after the other
# kernel_update and secureboot wait for rdma to have saved its node in this suite
# when rdma runs in another lane, and start at once when run alone
# (scripts/test.sh kernel_update).
#
# With no arguments the default set runs in two lanes, one per core: TCG guests and
# Ansible controllers beside them lose throughput when more of them run than there
# are cores (benchmarks/suite-time.md: the same 11 module calls on 1, 2,
# 3 and 4 VMs at once took 20.6, 25.7, 43 and 64 s each, so 4 at once did 20 % less
# work per second than 2). The background lane runs rdma, the foreground lane runs
# container and slurm. Then each lane takes the next stage of the shared pool
# (kernel_update and secureboot, which start from the node rdma saves after its
# idempotence step, then pair) that the other lane has not taken, so that both end
# at about the same time: the foreground lane, done first, takes kernel_update, the
# longest (CI's log of stop 48: rdma then kernel_update in one lane was about 125
# minutes alone). static and unit run in a third lane whose scheduling group has
# nice 19: they take the CPU time the two lanes leave idle (a VM lane waits on its
# guest's network and disk, a Slurm job's drain, a reboot). Each background lane
# writes .cache/lane-NAME.log, printed in full when the foreground lane is done, then
# followed until it ends. The closing table gives each stage, when each lane ended,
# and the total against the suite's 60-minute aim and CI's 90 minutes
# (benchmarks/suite-time.md keeps the measurements).
# Give stage names to run only those, one after the other:
#   scripts/test.sh static unit
# Every stage runs even when an earlier one failed; the exit code is non-zero
# when any failed. Wall time is printed per stage and in total.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

# the background lane finds what its parent set up
[[ ${1:-} == --lane ]] || scripts/setup.sh || exit 1
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_CONFIG=$ROOT/ansible.cfg ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# Every VM of the suite gets 1 vCPU (tests/harness/vm/vm.py: GPUDIRECT_VM_SMP): up to
# five TCG guests share 2 cores here, and a guest vCPU that waits on a descheduled
# sibling (a TLB shootdown, a spinlock) spins. The same kernel install from rdma's
# saved node beside two busy processes: 307.6 s with 2 vCPUs, 246.1 s with 1; alone
# with 1: 110.5 s (benchmarks/suite-time.md).
export GPUDIRECT_VM_SMP=${GPUDIRECT_VM_SMP:-1}

stage_static() {
  yamllint --strict . || return 1
  ansible-lint --offline --profile production || return 1
  # validate-modules, yamllint of the docs, import, compile ... on the collection as built
  scripts/sanity.sh || return 1
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
# --durations: the log ends with the slowest tests, where the tier's time goes.
stage_unit() {
  mkdir -p .cache
  pytest -q -n auto --dist loadgroup --durations=40 tests/unit 2>&1 | tee .cache/unit.log
  return "${PIPESTATUS[0]}"
}
# Molecule only warns when a step of the sequence has no playbook; a skipped
# prepare, side_effect or verify would make a scenario pass without testing.
scenario() {
  local log=.cache/molecule-$1.log rc
  mkdir -p .cache
  # molecule-timed.py passes molecule's output through and ends with a table of
  # per-phase timings (image build or cache hit, boot to ssh, each action)
  python3 tests/harness/vm/molecule-timed.py --log "$log" test -s "$1"; rc=$?
  if grep -E "(prepare|side_effect|verify)\]? ?:? .*Missing playbook" "$log"; then
    echo "scenario $1: a step of its sequence did not run (missing playbook)"; rc=1
  fi
  # the plays select run-time groups through gpudirect_hosts: a pattern warning is a
  # play that names a group the way that warns in every admin's run (issue #31)
  if grep -E "Could not match supplied host pattern" "$log"; then
    echo "scenario $1: a play names a host pattern that matches no group or host"; rc=1
  fi
  # for a scenario of the other lane that starts from the node this one saved
  echo "@$1 $( ((rc)) && echo FAILED || echo ok)" >>"$results"
  return "$rc"
}
# after_saved SCENARIO SAVED: wait until the background lane's SCENARIO has saved its
# node as SAVED during this suite (vm.py save writes saved.json last), or has ended
# without doing so; at once when there is no such lane. Fails in the second case, and
# in this lane when SCENARIO ran here earlier in this suite without saving its node.
after_saved() {
  local saved=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/vm/saved/$2/saved.json
  if [[ -z ${GPUDIRECT_TEST_LANE_PID:-} ]]; then
    if grep -q "^@$1 " "$results" && (( $(stat -c %Y "$saved" 2>/dev/null || echo 0) < t_all )); then
      echo "=== not run: the $1 scenario ended without saving its node ($2), which this one starts from"
      return 1
    fi
    return 0
  fi
  echo "=== waiting for the other lane's $1 scenario to save its node ($2)"
  # t_all: when this suite started
  until (( $(stat -c %Y "$saved" 2>/dev/null || echo 0) >= t_all )); do
    if grep -q "^@$1 " "$results" || ! kill -0 "$GPUDIRECT_TEST_LANE_PID" 2>/dev/null; then
      echo "=== not run: the $1 scenario ended without saving its node ($2), which this one starts from"
      return 1
    fi
    sleep 10
  done
  echo "=== $1 saved its node ($2): starting"
}
# every scenario of a stage runs even when an earlier one failed (one after the
# other: the VM guests need the host's cores)
scenarios() {
  local s rc=0
  for s in "$@"; do scenario "$s" || rc=1; done
  return $rc
}
stage_container() { scenarios default os_release_pin rolling; }
stage_rdma() { scenarios rdma; }
# kernel_update and secureboot start from the disk rdma saves right after its
# idempotence step: in the default set each waits for that save in its own lane, while
# rdma goes on with its later checks; alone (scripts/test.sh kernel_update) at once
stage_kernel_update() { after_saved rdma rdma-converged && scenarios kernel_update; }
stage_secureboot() { after_saved rdma rdma-converged && scenarios secureboot; }
# the VM chain one after the other: rdma first, the others start from the node it saves
stage_vm() { scenarios rdma kernel_update; }
stage_pair() { scenarios pair; }
stage_slurm() { scenarios slurm; }

results=${GPUDIRECT_TEST_RESULTS:-}
# run_stages STAGE...: each stage in turn; writes "STAGE RESULT SECONDS" lines to
# $results (one file shared by both lanes)
run_stages() {
  local s t0 r
  for s in "$@"; do
    if ! declare -F "stage_$s" >/dev/null; then
      echo "=== $s: no such stage (static unit container pair rdma kernel_update secureboot slurm vm)"
      echo "$s FAILED 0" >>"$results"; continue
    fi
    if [[ $s =~ ^(vm|rdma|kernel_update|pair|secureboot)$ && ! -d molecule/rdma ]]; then
      echo "=== $s: no molecule/rdma scenario in this checkout"; continue
    fi
    echo "=== $s"
    t0=$(date +%s)
    if "stage_$s"; then r=ok; else r=FAILED; fi
    echo "=== $s: $r in $(( $(date +%s) - t0 )) s"
    echo "$s $r $(( $(date +%s) - t0 ))" >>"$results"
  done
}

# run_pool STAGE...: after a lane's own stages, each stage of the shared pool in turn
# that the other lane has not taken yet (mkdir is the claim: one lane gets it)
run_pool() {
  local s
  for s in "$@"; do
    mkdir "$results.claim-$s" 2>/dev/null && run_stages "$s"
  done
}

# the background lane: `scripts/test.sh --lane STAGE...` (the parent set up .venv
# and the results file)
# when this suite started (a lane takes its parent's)
t_all=${GPUDIRECT_TEST_T0:-$(date +%s)}
if [[ ${1:-} == --lane ]]; then
  lane_name=$2; shift 2
  # setsid put this lane in a session of its own, and with the kernel's autogroup
  # scheduling (/proc/sys/kernel/sched_autogroup_enabled, 1 here) each session is a group
  # that gets its share of the CPU whatever its processes' niceness: the cpu lane at
  # nice 19 took a third of the cores beside the two others (the full run of 3e6d02d:
  # unit in 1493 s while the default scenario took 1472 s instead of 750). The
  # group's niceness is what counts between groups.
  if [[ ${GPUDIRECT_TEST_NICE:-0} != 0 && -w /proc/self/autogroup ]]; then
    echo "$GPUDIRECT_TEST_NICE" 2>/dev/null >/proc/self/autogroup \
      || echo "=== lane $lane_name: its scheduling group could not be given nice $GPUDIRECT_TEST_NICE"
  fi
  run_stages "$@"
  # shellcheck disable=SC2086  # the pool's stage names, one word each
  run_pool ${GPUDIRECT_TEST_POOL:-}
  echo "lane $lane_name $(( $(date +%s) - t_all ))" >>"$results"
  exit 0
fi
export GPUDIRECT_TEST_T0=$t_all
mkdir -p .cache
# The harness's HTTP servers on 127.0.0.1: the stand-in vendor repositories, the next
# kernel ABI and the slim Debian repository. A scenario's create step starts them and
# leaves them to the next scenario. When the suite ends it stops each one that was not
# serving when it began (one that was belongs to a demo or another suite), unless another
# suite is still running: each suite notes its pid under the cache's harness-users/, and
# the last one to end stops what it started. (A scenario run by hand with molecule beside
# a suite is not noted: start the servers before either, and neither stops them.)
harness_servers=(
  "${GPUDIRECT_STANDIN_PORT:-8765} tests/harness/standin_repo/serve.sh stop ${GPUDIRECT_STANDIN_PORT:-8765}"
  "${GPUDIRECT_KERNEL_REPO_PORT:-8766} python3 tests/harness/vm/kernel_repo.py stop ${GPUDIRECT_KERNEL_REPO_PORT:-8766}"
  "${GPUDIRECT_DEBIAN_SLIM_PORT:-8767} python3 tests/harness/vm/debian_mirror.py stop --port ${GPUDIRECT_DEBIAN_SLIM_PORT:-8767}"
)
harness_users=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/harness-users
mkdir -p "$harness_users" && echo "$ROOT" >"$harness_users/$$"
serving() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
servers_found=()
for entry in "${harness_servers[@]}"; do
  serving "${entry%% *}" && servers_found+=("${entry%% *}")
done
stop_servers() {
  local entry port user others=()
  rm -f "$harness_users/$$"
  for user in "$harness_users"/*; do
    [[ -e $user ]] || continue
    # a pid that is gone (a suite killed with -9) or reused by another program is no user
    if grep -qs 'scripts/test.sh' "/proc/${user##*/}/cmdline"; then others+=("${user##*/}"); else rm -f "$user"; fi
  done
  if ((${#others[@]})); then
    echo "=== the harness servers are left running: another suite (pid ${others[*]}) uses them"
    return 0
  fi
  for entry in "${harness_servers[@]}"; do
    port=${entry%% *}
    [[ " ${servers_found[*]} " == *" $port "* ]] && continue
    serving "$port" || continue
    # shellcheck disable=SC2086  # the stop command, one word per argument
    (cd "$ROOT" && ${entry#* } >/dev/null 2>&1) && echo "=== stopped the harness server this run started on 127.0.0.1:$port"
  done
}
trap stop_servers EXIT
results=$ROOT/.cache/test-results.$$
: >"$results"
export GPUDIRECT_TEST_RESULTS=$results
if (($#)); then
  order=("$@")
  run_stages "$@"
else
  order=(static unit container slurm rdma kernel_update secureboot pair)
  # the stages either lane takes when done with its own, longest first
  export GPUDIRECT_TEST_POOL="kernel_update secureboot pair"
  # lane NAME STAGE...: a background lane in its own session (one kill stops it with
  # its qemu and molecule), writing .cache/lane-NAME.log; LANE_NICE (default 0) its niceness,
  # LANE_POOL (default the shared pool) the pool it takes stages from when done
  lane() {
    local name=$1 pool=${LANE_POOL-$GPUDIRECT_TEST_POOL} niceness=${LANE_NICE:-0}; shift
    # LANE_NICE and LANE_POOL are this call's, not the lane's: its tests (unit) run
    # scripts/test.sh's functions and must not inherit them
    env -u LANE_NICE -u LANE_POOL GPUDIRECT_TEST_POOL="$pool" GPUDIRECT_TEST_NICE="$niceness" \
      setsid nice -n "$niceness" "$ROOT/scripts/test.sh" --lane "$name" "$@" >"$ROOT/.cache/lane-$name.log" 2>&1 </dev/null &
    lane_pids+=("$!"); lane_names+=("$name")
    echo "=== lane $name ($*, then the pool: $pool) runs beside this one: .cache/lane-$name.log"
  }
  lane_pids=() lane_names=()
  trap 'for p in "${lane_pids[@]}"; do kill -TERM -- -"$p" 2>/dev/null; done; rm -rf "$results" "$results".claim-*; stop_servers' EXIT
  trap 'exit 130' INT TERM
  # rdma saves its converged node after its idempotence step, then goes on with its
  # later checks; kernel_update and secureboot start from that node
  lane vm rdma
  # kernel_update and secureboot, from the pool, wait for that save when this lane
  # gets to them first
  export GPUDIRECT_TEST_LANE_PID=${lane_pids[0]}
  # the CPU-only tiers in the time the others leave idle; no stage of the pool
  LANE_NICE=19 LANE_POOL="" lane cpu static unit
  run_stages container slurm
  # shellcheck disable=SC2086  # the pool's stage names, one word each
  run_pool $GPUDIRECT_TEST_POOL
  echo "lane foreground $(( $(date +%s) - t_all ))" >>"$results"
  for i in "${!lane_pids[@]}"; do
    echo "=== lane ${lane_names[i]}: its output so far, then until it ends"
    # in the background: a signal to this script is handled at once, not after tail
    tail -n +1 --pid="${lane_pids[i]}" -f "$ROOT/.cache/lane-${lane_names[i]}.log" &
    wait "${lane_pids[i]}"
    wait $!
  done
  trap stop_servers EXIT
fi

# report: the table of stages, when each lane ended, and the total against the
# budget; fails when any stage failed or left no result
report() {
  local s line r t name total failed=0 passed=0
  table=""
  # the scenarios that failed (scenario() writes "@NAME ok|FAILED"), for why_failed
  failed_scenarios=$(sed -n 's/^@\([a-z_]*\) FAILED$/\1/p' "$results")
  echo
  echo "stage          result  seconds"
  for s in "${order[@]}"; do
    # a stage skipped for want of molecule/rdma wrote nothing and said so; a lane
    # that died wrote nothing either: that is a failure
    if line=$(grep -m1 "^$s " "$results"); then
      read -r _ r t <<<"$line"
    elif [[ $s =~ ^(vm|rdma|kernel_update|pair|secureboot)$ && ! -d molecule/rdma ]]; then
      continue
    else
      r=FAILED t="(no result: the lane ended before it)"
    fi
    printf '%-14s %-7s %s\n' "$s" "$r" "$t"
    table+="$s $r"$'\n'
    if [[ $r == ok ]]; then ((passed++)); else ((failed++)); fi
  done
  # the budget: when each lane ended, from the suite's start, and the total against
  # the 60 minutes the suite aims at and the 90 after which CI stops it
  while read -r _ name t; do
    printf 'lane %-16s ended at %5s s (%s min)\n' "$name" "$t" "$(awk -v t="$t" 'BEGIN{printf "%.1f", t/60}')"
  done < <(grep '^lane ' "$results")
  rm -rf "$results" "$results".claim-*
  total=$(( $(date +%s) - t_all ))
  echo "total wall time: $total s ($(awk -v t="$total" 'BEGIN{printf "%.1f", t/60}') min; aim 60 min: $( ((total <= 3600)) && echo within || echo OVER); CI stops at 90 min: $( ((total <= 5400)) && echo within || echo OVER))"
  echo "stages: $passed passed, $failed failed"
  ((failed == 0)) || why_failed
  ((failed == 0))
}
# why_failed: after the table, the lines that say why each failed scenario failed (CI
# shows the end of the output; the full logs are .cache/molecule-NAME.log)
why_failed() {
  local s log
  if grep -q "^unit FAILED" <<<"$table" && [[ -f .cache/unit.log ]]; then
    echo
    echo "--- why unit failed (all of it in .cache/unit.log)"
    grep -E "^(FAILED|ERROR) |^A test wrote" .cache/unit.log | cut -c1-400 | head -n 30
  fi
  for s in $failed_scenarios; do
    log=.cache/molecule-$s.log
    [[ -f $log ]] || continue
    echo
    echo "--- why scenario $s failed (the first lines that say so; all of it in $log)"
    # with the inner run's own failure lines under a side effect's one-line result
    python3 tests/harness/why_failed.py "$log" 40
  done
}
report
