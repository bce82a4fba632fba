#!/usr/bin/env python3
"""Estimated wall time of a rolling campaign over a busy fleet, with and without drain look-ahead
(issue #30, outcome 4: "Give the estimated wall time for 500 nodes before and after, from measured
per-stage times").

    benchmarks/rollout_estimate.py [--summary RUN.json | --work-s SECONDS] [--nodes 500] [--batch 10]
                                   [--lookahead N] [--job-max-h 4] [--idle 0.3] [--seed 1]

The per-node work (lock to verification, the node idle) is measured: ``--summary`` reads it from a run
summary the callback gpudirect_run_summary wrote (logs/runs/<run id>.json of a kernel_update.yml run:
each node's ``duration_s``, the mean is used), or ``--work-s`` gives it. What cannot be measured here is
how long the jobs on the nodes still run when the campaign reaches them: a model draws each node's
remaining job time uniformly from 0 to ``--job-max-h`` hours, with ``--idle`` of the nodes idle
(no job) at the start; the same draw (``--seed``) serves every row, so the rows compare.

The campaign is simulated the way playbooks/rolling.yml runs it: batches of ``--batch`` nodes one after
the other; a node's job ends its remaining time after its drain; its batch waits for the last job of
the batch, then works ``work`` seconds. Without look-ahead a node is drained at its batch. With
``gpudirect_rolling_lookahead`` N, the N nodes after a batch are drained when that batch starts, so
their jobs run out while it works. With ``gpudirect_rolling_idle_first``, the idle nodes go first.

Prints one row per policy: the campaign's wall time, the total time batches spent waiting, and the
ratio to the first row. Standard library only.
"""

import argparse
import json
import random
import sys


def work_from_summary(path):
    with open(path) as handle:
        summary = json.load(handle)
    durations = [float(node["duration_s"]) for node in summary.get("nodes", {}).values()
                 if node.get("stages") and node.get("duration_s") is not None]
    if not durations:
        raise SystemExit("%s: no node with stages and a duration_s: not a rolling run's summary" % path)
    return sum(durations) / len(durations), summary.get("run_id", path), summary.get("playbooks", [])


def simulate(remaining, work, batch, lookahead=0, idle_first=False):
    """(wall seconds, waiting seconds) of a campaign over nodes with these remaining job times."""
    nodes = list(range(len(remaining)))
    if idle_first:
        nodes.sort(key=lambda n: (remaining[n] > 0, n))
    drained_at = {}
    clock = waited = 0.0
    for start in range(0, len(nodes), batch):
        members = nodes[start:start + batch]
        for node in members:
            drained_at.setdefault(node, clock)
        for node in nodes[start + batch:start + batch + lookahead]:
            drained_at.setdefault(node, clock)
        idle_at = max(drained_at[n] + remaining[n] for n in members)
        wait = max(idle_at - clock, 0.0)
        waited += wait
        clock += wait + work
    return clock, waited


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--summary", help="a rolling run's summary JSON (logs/runs/<run id>.json)")
    source.add_argument("--work-s", type=float, help="per-node work in seconds, lock to verification")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--lookahead", type=int, default=None, help="default: one batch")
    parser.add_argument("--job-max-h", type=float, default=4.0)
    parser.add_argument("--idle", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.batch < 1 or not 0 <= args.idle <= 1 or args.job_max_h < 0:
        parser.error("--nodes and --batch must be 1 or more, --idle from 0 to 1, --job-max-h 0 or more")
    if args.summary:
        work, run_id, playbooks = work_from_summary(args.summary)
        where = "measured: mean node duration_s of run %s (%s)" % (run_id, ", ".join(playbooks))
    else:
        work, where = args.work_s, "given (--work-s)"
    lookahead = args.batch if args.lookahead is None else args.lookahead
    rng = random.Random(args.seed)
    remaining = [0.0 if rng.random() < args.idle else rng.uniform(0, args.job_max_h * 3600)
                 for _ in range(args.nodes)]
    print("nodes %d, batches of %d, per-node work %.0f s (%s)" % (args.nodes, args.batch, work, where))
    print("jobs: %.0f%% of nodes idle, the others run 0-%.1f h more (uniform, seed %d)"
          % (args.idle * 100, args.job_max_h, args.seed))
    rows = [("drained at its batch (before)", 0, False),
            ("idle first", 0, True),
            ("look-ahead %d" % lookahead, lookahead, False),
            ("look-ahead %d, idle first" % lookahead, lookahead, True)]
    base = None
    print("%-32s %12s %12s %8s" % ("policy", "wall (h)", "waiting (h)", "ratio"))
    for name, ahead, idle_first in rows:
        wall, waited = simulate(remaining, work, args.batch, ahead, idle_first)
        base = base or wall
        print("%-32s %12.1f %12.1f %8.2f" % (name, wall / 3600, waited / 3600, wall / base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
