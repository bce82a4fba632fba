# shellcheck shell=bash
# Helpers shared by the benchmark scripts (sourced, not run).
#
# A benchmark part writes its figures as key=value lines to $BENCH_RESULTS;
# benchmarks/run.sh reads them back and prints the one table. Logs of every
# Ansible run go to $BENCH_WORK (default .cache/benchmarks/<time>/), which is
# kept after the run.

bench_init() {  # bench_init PART : venv, work dir, results file, plain Ansible output
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
  if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
    # shellcheck disable=SC1091
    source .venv/bin/activate
  fi
  BENCH_ROOT=$PWD
  BENCH_WORK=${BENCH_WORK:-$BENCH_ROOT/.cache/benchmarks/$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$BENCH_WORK"
  BENCH_WORK=$(cd "$BENCH_WORK" && pwd)
  BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_WORK/results.env}
  touch "$BENCH_RESULTS"
  export BENCH_ROOT BENCH_WORK BENCH_RESULTS
  # the project's ansible.cfg (library/, roles/, filter_plugins/, forks, gathering),
  # no colour codes in the logs the recap is parsed from
  export ANSIBLE_CONFIG=$BENCH_ROOT/ansible.cfg ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 PY_COLORS=0
  BENCH_PART=$1
  bench_log "work dir $BENCH_WORK, results $BENCH_RESULTS"
}

bench_host() {  # bench_host : the controller's cores, load and any qemu beside this run, for the table
  local others=no
  pgrep -f qemu-system >/dev/null && others=yes
  printf '%s cores, load %s at start, other qemu running: %s\n' \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$others"
}

bench_log() { printf '[%s] %s\n' "$BENCH_PART" "$*" >&2; }

bench_put() {  # bench_put KEY VALUE : one figure for the table (replaces an older value of KEY)
  local key=$1 value=$2 tmp
  tmp=$(mktemp "$BENCH_RESULTS.XXXXXX")
  grep -v "^${key}=" "$BENCH_RESULTS" >"$tmp" || true
  printf '%s=%s\n' "$key" "$value" >>"$tmp"
  mv "$tmp" "$BENCH_RESULTS"
}

bench_now() { printf '%s\n' "$EPOCHREALTIME"; }

bench_elapsed() {  # bench_elapsed START : seconds since START (bench_now), 1 decimal
  python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$1"
}

# shellcheck disable=SC2034  # BENCH_WALL and BENCH_RC are read by the scripts that source this
bench_timed() {  # bench_timed LOG CMD... : run CMD, output to LOG; sets BENCH_WALL and BENCH_RC
  local log=$1 t0
  shift
  t0=$(bench_now)
  if "$@" >"$log" 2>&1; then BENCH_RC=0; else BENCH_RC=$?; fi
  BENCH_WALL=$(bench_elapsed "$t0")
}

# bench_recap LOG : the PLAY RECAP of an ansible-playbook log as one line of numbers:
#   hosts tasks_per_node tasks changed failed unreachable skipped
# (read them with: read -r hosts tasks_per_node tasks changed failed unreachable skipped <<<"$(bench_recap LOG)")
# tasks counts every task result a host had (ok, which includes changed, plus
# skipped, failed, unreachable); tasks_per_node is the largest count of one host.
bench_recap() {
  python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
if "PLAY RECAP" not in text:
    sys.exit("no PLAY RECAP in %s" % sys.argv[1])
recap = text.rsplit("PLAY RECAP", 1)[1]
hosts = {}
for line in recap.splitlines():
    m = re.match(r"^(\S+)\s+:\s+(ok=.*)$", line.strip())
    if m:
        hosts[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
if not hosts:
    sys.exit("empty PLAY RECAP in %s" % sys.argv[1])
def total(key):
    return sum(h.get(key, 0) for h in hosts.values())
per_host = [h.get("ok", 0) + h.get("skipped", 0) + h.get("failed", 0) + h.get("unreachable", 0)
            for h in hosts.values()]
print("%d %d %d %d %d %d %d"
      % (len(hosts), max(per_host), sum(per_host), total("changed"), total("failed"),
         total("unreachable"), total("skipped")))
PY
}

bench_show_failure() {  # bench_show_failure LOG : the end of a failed run's log
  bench_log "run failed, last lines of $1:"
  tail -n 40 "$1" >&2
}
