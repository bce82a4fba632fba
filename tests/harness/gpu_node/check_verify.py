#!/usr/bin/env python3
"""Check the gpudirect_verify role's JSON report from the GPU node (tests/harness/gpu_node/verify.yml).

    check_verify.py REPORT.json FACTS.json auto|host

The node has no RDMA NIC. ``auto``: the record must fail (status failed or not_proven, never
passed) with one pair per GPU of the facts, each with its own no_rdma_device diagnosis and a
fix, and the GPU memory it would have tested named. ``host``: one pair, labelled host memory
only (requested), failing with no_rdma_device. Prints one line per pair and exits 1 naming
each thing that is not so.
"""

import json
import sys

FAILING = ("failed", "not_proven")


def check(record, facts, mode):
    problems = []
    gpus = [g["address"] for g in facts.get("gpus") or []]
    pairs = record.get("pairs") or []
    if record.get("status") not in FAILING:
        problems.append("status %r: a node without RDMA NIC must fail verification" % record.get("status"))
    diagnosis = record.get("diagnosis") or {}
    if not diagnosis.get("fix"):
        problems.append("the host's diagnosis has no fix: %r" % diagnosis)
    if mode == "auto":
        if sorted(str(p.get("gpu")) for p in pairs) != sorted(gpus):
            problems.append("pairs cover GPUs %s, the node has %s" % ([p.get("gpu") for p in pairs], gpus))
    elif mode == "host":
        if len(pairs) != 1 or pairs[0].get("memory") != "host memory only (requested)":
            problems.append("host mode: want one pair labelled 'host memory only (requested)', got %s"
                            % [p.get("memory") for p in pairs])
    else:
        problems.append("mode must be auto or host, got %r" % mode)
    for p in pairs:
        d = p.get("diagnosis") or {}
        print("  %-14s %-28s %-10s %s: %s" % (p.get("gpu") or "-", p.get("memory") or "-", p.get("result"),
                                              d.get("code"), (d.get("message") or "")[:120]))
        if p.get("status") not in FAILING or d.get("code") != "no_rdma_device" or not d.get("fix"):
            problems.append("pair %s: %s %s (want a failing no_rdma_device verdict with its fix)"
                            % (p.get("gpu") or "host memory", p.get("status"), d.get("code")))
    return problems


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as handle:
        record = json.load(handle)
    with open(argv[2]) as handle:
        facts = json.load(handle)
    facts = facts.get("ansible_facts", {}).get("gpudirect", facts)
    problems = check(record, facts, argv[3])
    print("verify %s: %s%s" % (argv[3], record.get("result"), " (what to do: %s)" % (record.get("diagnosis") or {})
                                                               .get("fix", "")[:160]))
    for problem in problems:
        print("  PROBLEM: %s" % problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
