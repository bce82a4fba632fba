#!/usr/bin/env bash
# Compare gpudirect_loopback's RDMA WRITE bandwidth with perftest's ib_write_bw on
# the same node, same RDMA device, same message size and iteration count, in one run.
#
#   benchmarks/loopback_vs_perftest.sh HOST_PATTERN [ansible ad-hoc options...]
#
# Environment: DEVICE (rdma device, default rxe0), SIZE (bytes, default 65536),
# ITERS (default 1000), MODE (module mode, default host), PORT (default 18515),
# RUNS (rounds, default 3; each round runs both tools, the order alternating
# round by round so that drift on a busy host falls on both alike).
# ib_write_bw runs server and client on the node (loopback through the NIC: the
# client connects to the node's own IPv4 address on the RDMA device's netdev,
# 127.0.0.1 when it has none), with the GID index the module chose.
# Prints each round, then the median module_bw and perftest_bw (Gbit/s) and the
# median of the rounds' module/perftest ratios (target >= 0.9). Medians, because
# one round under an emulator can be off by a third either way (single rounds
# seen from 0.75 to 1.25 on the same code).
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS=${1:?usage: $0 HOST_PATTERN [ansible options]}
shift
DEVICE=${DEVICE:-rxe0}
SIZE=${SIZE:-65536}
ITERS=${ITERS:-1000}
MODE=${MODE:-host}
PORT=${PORT:-18515}
RUNS=${RUNS:-3}
ANSIBLE=${ANSIBLE:-ansible}
PY=${PYTHON:-python3}
export ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=json ANSIBLE_CALLBACKS_ENABLED=ansible.builtin.default

json_field() {  # json_field FILE KEY : value of KEY in the first host's task result
  "$PY" - "$1" "$2" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
res = list(data["plays"][0]["tasks"][0]["hosts"].values())[0]
if res.get("failed") or res.get("unreachable"):
    sys.stderr.write("task failed: %s\n" % res.get("msg"))
    sys.exit(1)
print(res.get(sys.argv[2]))
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mods=() perfs=()
run_module() {
  "$ANSIBLE" "$HOSTS" -b "$@" -m gpudirect_loopback \
    -a "mode=$MODE rdma_device=$DEVICE size=$SIZE iterations=$ITERS source=/var/lib/gpudirect/loopback/src" >"$tmp/module.json" || {
      cat "$tmp/module.json"; exit 1; }
  module_bw=$(json_field "$tmp/module.json" bandwidth_gbps)
  gid=$(json_field "$tmp/module.json" gid_index)
}
run_perftest() {
  local gidopt=""
  [ "$gid" != "None" ] && gidopt="-x $gid"
  # server in the background, client to the node's own address; both exit after one test
  script="set -e; dev=$DEVICE; nd=\$(cat /sys/class/infiniband/\$dev/ports/1/gid_attrs/ndevs/0 2>/dev/null || true);
ip=\$(ip -4 -o addr show dev \"\$nd\" 2>/dev/null | awk '{print \$4}' | cut -d/ -f1 | head -1); ip=\${ip:-127.0.0.1};
ib_write_bw -d \$dev $gidopt -s $SIZE -n $ITERS -p $PORT --report_gbits -F >/tmp/ib_write_bw.server 2>&1 & srv=\$!;
sleep 2; ib_write_bw -d \$dev $gidopt -s $SIZE -n $ITERS -p $PORT --report_gbits -F \$ip; wait \$srv"
  "$ANSIBLE" "$HOSTS" -b "$@" -m ansible.builtin.shell -a "$script" >"$tmp/perf.json" || { cat "$tmp/perf.json"; exit 1; }
  json_field "$tmp/perf.json" stdout >"$tmp/perf.txt"
  # the role's parser (module_utils/gpudirect_crosscheck.py): the result row's BW average, Gbit/s
  perftest_bw=$("$PY" - "$tmp/perf.txt" <<'PY'
import os
import sys
# as Ansible loads it: the project's module_utils under ansible.module_utils, where its own
# imports (gpudirect_versions) are found too
import ansible.module_utils
ansible.module_utils.__path__.append(os.path.abspath("module_utils"))
from ansible.module_utils import gpudirect_crosscheck as xc
try:
    print(xc.parse_perftest(open(sys.argv[1]).read())["bw_average_gbps"])
except xc.CrosscheckError as exc:
    sys.stderr.write("%s\n" % exc)
PY
) || true
  [ -n "$perftest_bw" ] || { echo "no ib_write_bw result:"; cat "$tmp/perf.txt"; exit 1; }
}
# odd rounds run the module first (round 1 so: it picks the GID index that
# ib_write_bw then uses), even rounds ib_write_bw first
for run in $(seq 1 "$RUNS"); do
  if ((run % 2)); then
    run_module "$@"; run_perftest "$@"
  else
    run_perftest "$@"; run_module "$@"
  fi
  echo "run $run: module_bw=${module_bw} Gbit/s perftest_bw=${perftest_bw} Gbit/s (device $DEVICE, gid $gid, size $SIZE, iters $ITERS)"
  mods+=("$module_bw") perfs+=("$perftest_bw")
done
"$PY" - "${mods[*]}" "${perfs[*]}" <<'PY'
import statistics
import sys
m = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
# each round's two figures were taken back to back: their ratio cancels the drift
# of a busy host, and the median of the rounds drops the odd disturbed one
ratio = statistics.median(a / b for a, b in zip(m, p))
print("module_bw=%.4f Gbit/s perftest_bw=%.4f Gbit/s module_bw/perftest_bw=%.3f (target >= 0.9) %s"
      " (medians of %d rounds; the ratio is the median of the rounds' ratios)"
      % (statistics.median(m), statistics.median(p), ratio, "PASS" if ratio >= 0.9 else "BELOW TARGET", len(m)))
PY
