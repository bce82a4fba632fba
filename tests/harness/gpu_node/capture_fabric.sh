#!/usr/bin/env bash
# GPU node: capture what the node prints about its GPUs' NVLink links, NVLink fabric and
# topology, and NCCL's view of the node, for the facts cross-check and the unit tests'
# fixtures (no ansible needed; run.sh calls it). Writes under $OUT (default ./gpu-node-fabric):
#   nvidia-smi-q.txt          nvidia-smi -q (every GPU: Fabric State/Status, CliqueId, ClusterUUID)
#   nvidia-smi-nvlink-s.txt   nvidia-smi nvlink -s (per-link speed, or inactive)
#   nvidia-smi-topo-m.txt     nvidia-smi topo -m
#   nvidia-smi-L.txt          nvidia-smi -L and the GPUs' ids
#   nccl-allreduce.log        a real all-reduce over every GPU, NCCL_DEBUG=INFO, NCCL's own choice of transport
#   nccl-allreduce-net.log    the same with P2P and SHM off (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): only
#                             NCCL's network can carry the data, so NCCL says which and whether with GDRDMA
# Each log ends with rc=N (nccl_allreduce.py's exit code); with one GPU there is nothing to connect and
# no log is written. NVLink multicast stays off: the lent machines' GPUs are shared.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")"
OUT=${OUT:-$PWD/gpu-node-fabric}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi nvlink -s >"$OUT/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi topo -m >"$OUT/nvidia-smi-topo-m.txt" 2>&1
{ nvidia-smi -L; nvidia-smi --query-gpu=index,pci.bus_id,pci.device_id,name,driver_version --format=csv; } \
  >"$OUT/nvidia-smi-L.txt" 2>&1
n=$(nvidia-smi -L | grep -c '^GPU ')
if (( n < 2 )); then
  echo "nccl: $n GPU: an all-reduce needs two ranks, nothing to connect (skipped)"
  exit 0
fi
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "nccl: no PyTorch for $(command -v python3): the all-reduce is not run"
  exit 0
fi
allreduce() {  # LOG [VAR=VALUE ...]
  local log=$1; shift
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@" timeout 180 python3 nccl_allreduce.py 64 >"$log" 2>&1
  echo "rc=$?" >>"$log"
}
t0=$SECONDS
allreduce "$OUT/nccl-allreduce.log"
allreduce "$OUT/nccl-allreduce-net.log" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
echo "nccl: two all-reduces over $n GPUs in $((SECONDS - t0)) s"
grep -hE "^rank |^rc=|nccl_allreduce:" "$OUT"/nccl-allreduce*.log
