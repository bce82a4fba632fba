#!/usr/bin/env python3
"""A real NCCL all-reduce over every GPU of the node, one process per GPU (PyTorch's NCCL).

    NCCL_DEBUG=INFO python3 nccl_allreduce.py [MiB]

Each rank fills 64 MiB (default) with rank+1, all-reduces it (sum) and compares every element
with world*(world+1)/2; it prints ``rank R: all_reduce ... ok=True|False`` and the process exits
non-zero when any rank's data is wrong or a rank failed. NCCL's own debug lines (which transport
carried the data: P2P, SHM, NET/Socket, NET/IB ... /GDRDMA) go to the same output, where
judge_nccl.py reads them. A file, not stdin: torch.multiprocessing's spawn re-imports the main
module in each child. NVLink multicast stays off (the caller sets NCCL_NVLS_ENABLE=0).
"""

import os
import socket
import sys
import time


def run(rank, world, port, elements):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    x = torch.full((elements,), float(rank + 1), device="cuda")
    started = time.monotonic()
    dist.all_reduce(x)
    torch.cuda.synchronize()
    seconds = time.monotonic() - started
    want = world * (world + 1) / 2
    ok = bool((x == want).all().item())
    # one write per line: the ranks share the output with each other and with NCCL
    sys.stdout.write("rank %d: all_reduce of %d float32 on cuda:%d (%s): sum %s, want %s, every element compared "
                     "ok=%s (%.3f s)\n" % (rank, elements, rank, torch.cuda.get_device_name(rank), x[0].item(), want,
                                          ok, seconds))
    sys.stdout.flush()
    dist.destroy_process_group()
    if not ok:
        sys.exit(3)


def main():
    import torch
    import torch.multiprocessing as mp
    world = torch.cuda.device_count()
    if world < 2:
        print("nccl_allreduce: %d GPU: an all-reduce needs two ranks to connect anything" % world, flush=True)
        return 2
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print("nccl_allreduce: %d ranks, %d MiB each, torch %s, NCCL %s, NCCL_NVLS_ENABLE=%s" % (
        world, mib, torch.__version__, ".".join(map(str, torch.cuda.nccl.version())),
        os.environ.get("NCCL_NVLS_ENABLE")), flush=True)
    mp.spawn(run, args=(world, port, mib * (1 << 20) // 4), nprocs=world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
