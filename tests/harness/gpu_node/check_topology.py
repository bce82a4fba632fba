#!/usr/bin/env python3
"""The coverage plan for the node's real topology, and the facts cross-checked against nvidia-smi.

    check_topology.py FACTS.json TOPO.txt

FACTS.json is gpudirect_facts' result on the node, TOPO.txt what ``nvidia-smi topo -m`` printed
there. Prints the pairs the verification plans (gpudirect_verify_coverage nearest, all, one;
plugin_utils/gpudirect_coverage.py) and, per GPU, what the facts and the matrix say. Exits 1
naming each disagreement:
  * the matrix has a GPU row for each GPU of the facts (``GPU<index>``) and no other;
  * a GPU/NIC pair's distance from sysfs is the class the matrix prints (gpudirect_topology.cross_check);
  * a GPU pair joined by ``NV<n>`` in the matrix: both GPUs have at least n NVLink links up in the
    facts; a GPU with links up is joined by NVLink to another GPU when the node has more than one;
  * the plan covers every GPU (and every NIC) of the node.
"""

import json
import os
import re
import sys

import ansible.module_utils

_PROJECT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
ansible.module_utils.__path__.extend(os.path.join(_PROJECT, d) for d in ("module_utils", "plugin_utils"))
from ansible.module_utils import gpudirect_coverage as coverage  # noqa: E402
from ansible.module_utils import gpudirect_topo_matrix as matrix  # noqa: E402
from ansible.module_utils import gpudirect_topology as topology  # noqa: E402

_NV = re.compile(r"^NV(\d+)$")


def check(facts, topo_text):
    problems, lines = [], []
    topo = matrix.nvidia_topo_matrix(topo_text)
    gpus = facts.get("gpus") or []
    nics = [d["name"] for d in facts.get("rdma_devices") or []]
    rows = sorted((r for r in topo["matrix"] if r.startswith("GPU")), key=lambda r: int(r[3:]))
    row_of = dict((g["address"], "GPU%d" % g["index"]) for g in gpus if g.get("index") is not None)
    if sorted(row_of.values(), key=lambda r: int(r[3:])) != rows:
        problems.append("nvidia-smi topo -m has GPU rows %s; the facts' GPUs are %s" % (
            rows, ", ".join("%s=%s" % (a, r) for a, r in sorted(row_of.items())) or "without nvidia-smi index"))
    for name, plan_coverage in (("nearest", "nearest"), ("all", "all"), ("one", "one")):
        plan = coverage.plan_pairs(facts, plan_coverage)
        lines.append("plan %-7s %d run%s: %s" % (name, len(plan), "" if len(plan) == 1 else "s", ", ".join(
            "%s<->%s%s" % (p["gpu"] or "host memory", p["nic"] or "no NIC", " (%s)" % p["distance"] if p["distance"]
                           else "") for p in plan)))
        if name == "nearest":
            covered = set(p["gpu"] for p in plan)
            missing = [g["address"] for g in gpus if g["address"] not in covered]
            missing += [n for n in nics if n not in set(p["nic"] for p in plan)]
            if missing:
                problems.append("the nearest plan leaves out %s" % ", ".join(missing))
            problems.extend(topology.cross_check(topo, gpus, [p for p in plan if p["distance"]]))
    for gpu in gpus:
        row = row_of.get(gpu["address"])
        links = gpu.get("nvlink") or {}
        up = links.get("links_up")
        peers = {}
        for column, value in sorted(((topo["matrix"].get(row) or {}).items()) if row else []):
            m = _NV.match(value or "")
            if column.startswith("GPU") and m:
                peers[column] = int(m.group(1))
        fabric = gpu.get("fabric") or {}
        lines.append("%s %s %s: NVLink %s/%s links up at %s GB/s; topo -m: %s; fabric %s/%s clique %s" % (
            row or "GPU?", gpu["address"], gpu.get("name"), up, links.get("links_total"),
            links.get("link_speed_gbytes_s"),
            ", ".join("NV%d to %s" % (n, c) for c, n in sorted(peers.items())) or "no NVLink to another GPU",
            fabric.get("state"), fabric.get("status"), fabric.get("clique_id")))
        if up is None:
            if peers:
                problems.append("%s %s: topo -m shows NVLink (%s) but the facts hold no NVLink links (%s)" % (
                    row, gpu["address"], peers, (facts.get("nvlink") or {}).get("reason")))
            continue
        for column, n in peers.items():
            if up < n:
                problems.append("%s %s: topo -m says NV%d to %s, the facts have %d links up" % (
                    row, gpu["address"], n, column, up))
        if up and len(rows) > 1 and not peers:
            problems.append("%s %s: %d NVLink links up but topo -m joins it to no GPU by NVLink" % (
                row, gpu["address"], up))
    return lines, problems


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as handle:
        facts = json.load(handle)
    facts = facts.get("ansible_facts", {}).get("gpudirect", facts)
    with open(argv[2]) as handle:
        text = handle.read()
    try:
        lines, problems = check(facts, text)
    except (matrix.TopoMatrixError, coverage.CoverageError) as exc:
        lines, problems = [], ["%s: %s" % (argv[2], exc)]
    for line in lines:
        print(line)
    for problem in problems:
        print("PROBLEM: %s" % problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
