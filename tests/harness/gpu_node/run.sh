#!/usr/bin/env bash
# GPU-node tier: run the project's read-only stages on a real GPU server with a
# local connection. The node has no network, so ansible-core comes as wheels
# (made by tests/harness/gpu_node/wheels.sh on the controller and carried).
# Carry .cache/device-wheels and .cache/device-collections (both from wheels.sh).
# Writes what it saw under $OUT (default ./gpu-node-out):
#   gpudirect_facts.json   the facts module's result (kept as a unit-test fixture)
#   preflight.log          playbooks/preflight.yml, normal run
#   preflight-check.log    the same with --check
#   loopback.log, loopback_*.json  gpudirect_loopback cases (tests/harness/gpu_node/loopback.yml)
#   state.log, gpudirect_state.json  the converged-state record (tests/harness/gpu_node/state.yml)
#   summary.tsv, STAGE-MODE.log  the offline roles and site.yml --check (offline_roles.sh)
#   fabric/                nvidia-smi's NVLink, fabric and topology text, two real NCCL all-reduces
#                          (capture_fabric.sh); topology.txt, nccl.txt: their checks
#   verify-auto/, verify-host/, verify-*.log  the gpudirect_verify role itself (verify.yml)
#   verify-in_service/     the same role on a node in service: read-only (gpudirect_verify_scope)
#   gpus.tsv, checks.tsv   the per-GPU table and every check with its exit code (printed at the end)
# Every GPU of the node is proven (the CUDA half of the loopback on each, the role's verdict for
# each); the run exits 1 when any check did not show what it must. GPU_NODE_STEPS (default all)
# picks steps: facts is always run; then any of preflight state loopback fabric verify in_service roles offline.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT=${OUT:-$PWD/gpu-node-out}; mkdir -p "$OUT"
WHEELS=${WHEELS:-.cache/device-wheels}
# Only ansible-core travels, without collections: use the project's ansible.cfg
# less its profile_tasks callback (from ansible.posix).
sed '/^callbacks_enabled/d' ansible.cfg >.gpu-node-ansible.cfg
export LANG=C.UTF-8 LC_ALL=C.UTF-8 ANSIBLE_CONFIG=$PWD/.gpu-node-ansible.cfg ANSIBLE_NOCOLOR=1

pip_python=python3
python3 -m pip --version >/dev/null 2>&1 || pip_python=$(ls /opt/*/.venv/bin/python 2>/dev/null | head -1)
"$pip_python" -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/ansible-site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/ansible-site
# community.general (modprobe) comes as a copied collection (wheels.sh)
COLLECTIONS=${COLLECTIONS:-.cache/device-collections}
[[ -d $COLLECTIONS/ansible_collections/community/general ]] || { echo "no community.general under $COLLECTIONS: run tests/harness/gpu_node/wheels.sh"; exit 1; }
export ANSIBLE_COLLECTIONS_PATH=$(cd "$COLLECTIONS" && pwd)
# Modules run with the node's own Python, as on any server (the first python3 on PATH
# may be a venv without the distribution's python3-apt, which apt and package_facts need).
node_python=/usr/bin/python3; [[ -x $node_python ]] || node_python=$(command -v python3)
echo "node python: $node_python ($("$node_python" -V 2>&1)); python3-apt: $("$node_python" -c 'import apt_pkg' 2>/dev/null && echo yes || echo no)"
inv=$(mktemp --suffix=.yml); cat >"$inv" <<INV
gpu_nodes:
  hosts:
    $(hostname -s):
      ansible_connection: local
      ansible_python_interpreter: $node_python
  vars:
    # the lent node runs no jobs: gpudirect_verify runs its full loopback (gpudirect_verify_scope)
    gpudirect_drain_nodes_run_no_jobs: true
INV
ap() { python3 -m ansible.cli.playbook -i "$inv" "$@"; }
apj() { ANSIBLE_CALLBACK_RESULT_FORMAT=json ap "$@"; }  # a message stays on one line for grep
H=tests/harness/gpu_node
STEPS=${GPU_NODE_STEPS:-preflight state loopback fabric verify in_service roles offline}
want() { [[ " $STEPS " == *" $1 "* ]]; }
# check NAME RC WANTED_RC SECONDS [why]: one row of checks.tsv; a row whose rc is not the wanted one fails the run
printf 'check\trc\twanted\tseconds\tresult\n' >"$OUT/checks.tsv"
check() {
  local result=ok; [[ $2 == "$3" ]] || result="FAILED${5:+: $5}"
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$result" >>"$OUT/checks.tsv"
  echo "== $1: rc=$2 (wanted $3) in $4 s: $result"
}
RUN0=$SECONDS
t0=$SECONDS; OUT=$OUT ap $H/facts.yml >"$OUT/facts.log" 2>&1; rc=$?; check facts $rc 0 $((SECONDS - t0))
(( rc == 0 )) || { cat "$OUT/facts.log"; exit 1; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d['ansible_facts']['gpudirect']; \
print('gpus', [(x['address'], x.get('name'), x['link']) for x in g['gpus']]); \
print('nvlink', g.get('nvlink')); [print('  %s nvlink %s fabric %s' % (x['address'], \
  {k: v for k, v in (x.get('nvlink') or {}).items() if k != 'links'} if x.get('nvlink') else None, x.get('fabric'))) for x in g['gpus']]; \
print('driver', g['nvidia_driver']); print('rdma_devices', g['rdma_devices']); print('changed', d['changed'])" "$OUT/gpudirect_facts.json"
NICS=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['ansible_facts']['gpudirect']['rdma_devices']))" "$OUT/gpudirect_facts.json")

# The node has no RDMA NIC: preflight must stop on exactly that, with the reason.
if want preflight; then
  pre_want=0; (( NICS == 0 )) && pre_want=2
  t0=$SECONDS; ap playbooks/preflight.yml >"$OUT/preflight.log" 2>&1; rc=$?
  (( NICS > 0 )) || grep -q "no RDMA device" "$OUT/preflight.log" || rc="$rc (no 'no RDMA device' line)"
  check preflight "$rc" $pre_want $((SECONDS - t0)) "without RDMA NIC it must stop on 'no RDMA device'"
  t0=$SECONDS; ap playbooks/preflight.yml --check >"$OUT/preflight-check.log" 2>&1; rc=$?
  check "preflight --check" $rc $pre_want $((SECONDS - t0))
  grep -E "msg|GPU|driver|RDMA|cannot reach|changed=" "$OUT/preflight.log" | head -40
  grep -E "changed=" "$OUT/preflight-check.log"
fi

# --- converged-state record on a real node: record, match, a watched file added is named
if want state; then
  t0=$SECONDS; ap $H/state.yml >"$OUT/state.log" 2>&1; check state $? 0 $((SECONDS - t0))
  grep -E "msg|changed=" "$OUT/state.log" | cut -c1-600
fi

# --- loopback on the GPU node: the CUDA half for real on every GPU (gpus.tsv), the no-NIC failure, bad input
if want loopback; then
  t0=$SECONDS; ap $H/loopback.yml >"$OUT/loopback.log" 2>&1; check "loopback (every GPU)" $? 0 $((SECONDS - t0))
  grep -E "msg\":|failed=|Assertion|assert|PLAY RECAP|changed=" "$OUT/loopback.log" | cut -c1-400 | head -40
fi

# --- NVLink, fabric and topology as nvidia-smi prints them, cross-checked with the facts and the
# coverage plan; a real NCCL all-reduce judged by the verification's NCCL judgement (no NIC here:
# never GPUDirect RDMA)
if want fabric; then
  t0=$SECONDS; OUT=$OUT/fabric bash $H/capture_fabric.sh >"$OUT/fabric.log" 2>&1; rc=$?; cat "$OUT/fabric.log"
  check "capture (nvidia-smi, NCCL)" $rc 0 $((SECONDS - t0))
  t0=$SECONDS; python3 $H/check_topology.py "$OUT/gpudirect_facts.json" "$OUT/fabric/nvidia-smi-topo-m.txt" \
    >"$OUT/topology.txt" 2>&1; rc=$?; cat "$OUT/topology.txt"
  check "coverage plan, topology vs nvidia-smi topo -m" $rc 0 $((SECONDS - t0))
  if compgen -G "$OUT/fabric/nccl-allreduce*.log" >/dev/null; then
    expect=any; (( NICS == 0 )) && expect=no-gdr
    t0=$SECONDS; python3 $H/judge_nccl.py --expect $expect "$OUT"/fabric/nccl-allreduce*.log >"$OUT/nccl.txt" 2>&1
    rc=$?; cat "$OUT/nccl.txt"; check "NCCL judgement (expect $expect)" $rc 0 $((SECONDS - t0))
  fi
fi

# --- the verification role itself: its failing verdict for every GPU without a NIC, with the fix;
# host memory only, labelled as such. The role fails the host (rc 2) where the node has no NIC.
if want verify; then
  ver_want=0; (( NICS == 0 )) && ver_want=2
  for mode in auto host; do
    t0=$SECONDS
    apj $H/verify.yml -e gpudirect_verify_mode=$mode -e "gpudirect_verify_report_dir=$OUT/verify-$mode" \
      >"$OUT/verify-$mode.log" 2>&1; rc=$?
    check "gpudirect_verify role, mode $mode" $rc $ver_want $((SECONDS - t0))
    if (( NICS == 0 )); then
      python3 $H/check_verify.py "$OUT/verify-$mode/$(hostname -s).json" "$OUT/gpudirect_facts.json" $mode; rc=$?
      check "gpudirect_verify verdict per GPU, mode $mode" $rc 0 0
    fi
  done
fi

# --- the verification role on a node in service (gpudirect_verify_scope: in_service): it
# only reads (facts, signatures, NVLink fabric, driver, RDMA port, peer-memory path); no
# helper is built and no GPU memory is touched. Without a NIC its in_service check fails
# the host (rc 2) naming "no RDMA device"; verify-in_service/ holds the report.
if want in_service; then
  ver_want=0; (( NICS == 0 )) && ver_want=2
  stamp=/var/lib/gpudirect/loopback/gpudirect_loopback_helper.sha256
  before=$(stat -c %Y "$stamp" 2>/dev/null || echo none)
  t0=$SECONDS
  apj $H/verify.yml -e gpudirect_verify_scope=in_service -e "gpudirect_verify_report_dir=$OUT/verify-in_service" \
    >"$OUT/verify-in_service.log" 2>&1; rc=$?
  check "gpudirect_verify role, in service (read-only)" $rc $ver_want $((SECONDS - t0))
  ! grep -q "TASK \[gpudirect_verify : Write a pattern" "$OUT/verify-in_service.log"
  check "in service: the loopback did not run" $? 0 0
  [[ $(stat -c %Y "$stamp" 2>/dev/null || echo none) == "$before" ]]
  check "in service: no helper built" $? 0 0
  python3 - "$OUT/verify-in_service/$(hostname -s).json" "$NICS" <<'PY'
import json, sys
report, nics = json.load(open(sys.argv[1])), int(sys.argv[2])
check = [c for c in report.get("checks", []) if c["name"] == "in_service"]
print("status:", report["status"], "| diagnosis:", (report.get("diagnosis") or {}).get("code"),
      "|", check[0]["summary"] if check else "no in_service check")
ok = bool(check) and (report["status"] == "failed" and check[0]["reason"] == "no RDMA device" if nics == 0
                      else report["status"] == "skipped" and check[0]["status"] == "passed")
sys.exit(0 if ok else 1)
PY
  check "in service: the report's verdict and its in_service check" $? 0 0
fi

# --- roles on the GPU node: gpudirect_nvidia_driver keeps the driver the image brought (no package,
# repository, headers, DKMS, holds or reload) and gpudirect_peermem picks dma-buf, changing
# nothing: --check, then two real runs (roles-check.log, roles-run1.log, roles-run2.log);
# then another branch with --check, refused before any change (roles-other-branch.log).
if want roles; then
  t0=$SECONDS; apj $H/roles.yml --check >"$OUT/roles-check.log" 2>&1; check "roles --check" $? 0 $((SECONDS - t0))
  t0=$SECONDS; apj $H/roles.yml >"$OUT/roles-run1.log" 2>&1; check "roles run 1" $? 0 $((SECONDS - t0))
  t0=$SECONDS; apj $H/roles.yml >"$OUT/roles-run2.log" 2>&1; check "roles run 2" $? 0 $((SECONDS - t0))
  grep -qE "changed=0 " "$OUT/roles-run2.log" || check "roles run 2 changed nothing" 1 0 0
  t0=$SECONDS; apj $H/roles.yml --check -e '{"gpudirect_nvidia_driver_branch": "570"}' >"$OUT/roles-other-branch.log" 2>&1
  check "roles --check, branch 570 wanted (refused before any change)" $? 2 $((SECONDS - t0))
  for log in roles-check roles-run1 roles-run2 roles-other-branch; do
    echo "== $log"
    grep -E "^[^ ].* : ok=[0-9]+ +changed=" "$OUT/$log.log"
    awk '/^TASK /{task=$0} /^(changed|fatal):/{print "  " task; print "  " $0}' "$OUT/$log.log" | cut -c1-600
    grep -E '^ *"' "$OUT/$log.log" | sed 's/^ *//' | sort -u | cut -c1-600 | grep -E \
      "outside the package manager|matches: no change|differs from wanted|no NVIDIA driver installed|nouveau: |nvidia-persistenced: |peer memory: |dma-buf: "
  done
fi

# --- the other roles that can run offline, each in a mode that leaves the node as it was,
# and site.yml --check end to end (tests/harness/gpu_node/offline_roles.sh)
if want offline; then
  t0=$SECONDS; OUT=$OUT inv=$inv bash $H/offline_roles.sh; rc=$?
  grep -q FAILED "$OUT/summary.tsv" && rc="$rc (FAILED rows in summary.tsv)"
  check "offline roles, site.yml --check (summary.tsv)" "$rc" 0 $((SECONDS - t0))
fi

# --- the summary: one row per GPU, then every check; exit 1 when any check failed
python3 - "$OUT" <<'PY'
import csv, json, os, socket, sys
out = sys.argv[1]
facts = json.load(open(os.path.join(out, "gpudirect_facts.json")))["ansible_facts"]["gpudirect"]
rows = {}
if os.path.exists(os.path.join(out, "gpus.tsv")):
    rows = dict((r["GPU"], r) for r in csv.DictReader(open(os.path.join(out, "gpus.tsv")), delimiter="\t"))
verdicts = {}
for mode in ("auto",):
    path = os.path.join(out, "verify-%s" % mode, "%s.json" % socket.gethostname().split(".")[0])
    if os.path.exists(path):
        for pair in json.load(open(path)).get("pairs") or []:
            verdicts[pair.get("gpu")] = "%s %s" % (pair.get("result"), (pair.get("diagnosis") or {}).get("code") or "")
head = ("GPU", "name", "CUDA half", "bytes compared", "mismatches", "corruption caught", "H2D Gbit/s", "D2H Gbit/s",
        "seconds", "role verdict", "NVLink up", "fabric")
table = [head]
for g in facts["gpus"]:
    r = rows.get(g["address"], {})
    nv, fab = g.get("nvlink") or {}, g.get("fabric") or {}
    table.append((g["address"], g.get("name") or "-", r.get("result", "not run"), r.get("bytes compared", "-"),
                  r.get("mismatches", "-"), r.get("corruption caught", "-"), r.get("H2D Gbit/s", "-"),
                  r.get("D2H Gbit/s", "-"), r.get("seconds", "-"), verdicts.get(g["address"], "not run").strip(),
                  "%s/%s" % (nv.get("links_up"), nv.get("links_total")) if nv else "-",
                  "%s/%s" % (fab.get("state") or "N/A", fab.get("status") or "N/A") if fab else "-"))
widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
print("\nGPU-node summary: %d GPU%s, %d RDMA NIC%s" % (len(facts["gpus"]), "" if len(facts["gpus"]) == 1 else "s",
      len(facts["rdma_devices"]), "" if len(facts["rdma_devices"]) == 1 else "s"))
for row in table:
    print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
PY
echo
column -t -s $'\t' "$OUT/checks.tsv" 2>/dev/null || cat "$OUT/checks.tsv"
failed=$(awk -F'\t' 'NR > 1 && $5 != "ok"' "$OUT/checks.tsv" | wc -l)
echo "GPU-node tier: $(( $(wc -l <"$OUT/checks.tsv") - 1 )) checks, $failed failed, $((SECONDS - RUN0)) s"
(( failed == 0 ))
