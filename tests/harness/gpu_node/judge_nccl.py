#!/usr/bin/env python3
"""Judge real NCCL runs with the verification's own judgement (module_utils/gpudirect_crosscheck.py).

    judge_nccl.py --expect no-gdr|any LOG [LOG ...]

Each LOG is nccl_allreduce.py's output with NCCL_DEBUG=INFO, its exit code on the last line
(``rc=N``). Prints one verdict line per log: passed (every NET channel with GDRDMA) or not
GPUDirect RDMA, with the reasons read from NCCL's own lines. ``--expect no-gdr`` (a node without
RDMA NIC): every log must be judged not GPUDirect RDMA with a reason from NCCL's lines, and its
all-reduce must have compared its data correctly; exits 1 naming what is not so.
"""

import argparse
import os
import re
import sys

import ansible.module_utils

_PROJECT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
ansible.module_utils.__path__.extend(os.path.join(_PROJECT, d) for d in ("module_utils", "plugin_utils"))
from ansible.module_utils import gpudirect_crosscheck as xc  # noqa: E402

_RC = re.compile(r"^rc=(\d+)\s*$", re.M)
# anywhere in a line: the ranks' lines can run into each other's or NCCL's
_RANK_OK = re.compile(r"rank (\d+): all_reduce .*? ok=(True|False)")
_WORLD = re.compile(r"^nccl_allreduce: (\d+) ranks", re.M)


def judge(text):
    rcs = _RC.findall(text)
    rc = int(rcs[-1]) if rcs else None
    parsed = xc.parse_nccl_log(text)
    verdict = xc.judge_nccl(parsed, rc if rc is not None else 1, nccl_tests=False)
    ranks = dict((int(r), ok == "True") for r, ok in _RANK_OK.findall(text))
    world = _WORLD.search(text)
    return rc, parsed, verdict, ranks, int(world.group(1)) if world else None


def main(argv):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--expect", choices=("no-gdr", "any"), required=True)
    args.add_argument("logs", nargs="+")
    opts = args.parse_args(argv)
    problems = []
    for path in opts.logs:
        with open(path) as handle:
            rc, parsed, verdict, ranks, world = judge(handle.read())
        name = os.path.basename(path)
        types = sorted(set(c["type"] for c in parsed["channels"]))
        print("%s: NCCL %s, %d ranks (data %s), %d transport lines (%s), network %s: %s" % (
            name, parsed["nccl_version"], len(ranks),
            "compared ok" if ranks and all(ranks.values()) else "NOT ok: %s" % ranks,
            len(parsed["channels"]), ", ".join(types) or "none", parsed["network"],
            "GPUDirect RDMA (%s)" % verdict["summary"] if verdict["status"] == "passed"
            else "not GPUDirect RDMA: " + " | ".join(verdict["problems"])))
        if opts.expect != "no-gdr":
            continue
        if rc != 0 or world is None or world < 2 or sorted(ranks) != list(range(world)) or not all(ranks.values()):
            problems.append("%s: the all-reduce did not run and compare its data on every rank (rc=%s, %s ranks "
                            "started, their lines: %s)" % (name, rc, world, ranks))
        if verdict["status"] == "passed":
            problems.append("%s: judged GPUDirect RDMA on a node without RDMA NIC" % name)
        elif not parsed["channels"]:
            problems.append("%s: NCCL printed no transport line, so the verdict is not read from NCCL's lines" % name)
        elif not parsed["net_notes"]:
            problems.append("%s: NCCL printed none of its network lines (NET/IB, Using network)" % name)
    for problem in problems:
        print("PROBLEM: %s" % problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
