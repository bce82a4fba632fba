#!/usr/bin/env python3
"""Check the slurm scenario's promises (issue #43, outcome 2) from Slurm's own view.

    check_slurm.py DIR

DIR is converge.yml's state directory: <point>-nodes.txt and <point>-jobs.txt (scontrol
--oneliner show node / show job at the points before, after-run, after-crash, after-recover),
jobs.json (the job ids), the event logs run/log, crash/log, recover/log
(molecule/rolling/files/fake_scheduler.py: "<epoch> <event> <node> [detail]"), the runs'
output (run-output.txt, crash-output.txt, recover-output.txt), crash.json and the run
summaries (summary-run/latest.json, summary-recover/latest.json). Prints one line per
broken promise and exits 1 when there is any; prints what it checked otherwise. Standard
library only: it reads Slurm's text as an operator's script would (Reason is the last field
of scontrol's one-line form).
"""

import calendar
import json
import os
import re
import sys
import time

N1, N2, N3, N4 = ("gpudirect-slurm%d" % i for i in range(1, 5))
OWN = "gpudirect run "


def records(text):
    """{name: {field: value}} of scontrol's one-line records (NodeName= or JobId= lines)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        reason = None
        if " Reason=" in line and line.startswith("NodeName="):
            line, reason = line.split(" Reason=", 1)
        fields = dict(m.groups() for m in re.finditer(r"(?:^|\s)([A-Za-z/:]+)=(\S*)", line))
        if reason is not None:
            fields["Reason"] = reason.strip()
        key = fields.get("NodeName") or fields.get("JobId")
        if key:
            out[key] = fields
    return out


def epoch(stamp):
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) if stamp not in (None, "Unknown", "None") \
        else None


def events(path):
    out = []
    with open(path) as handle:
        for line in handle:
            fields = line.split()
            if len(fields) >= 3:
                out.append((float(fields[0]), fields[1], fields[2], " ".join(fields[3:])))
    return out


def drained(node):
    return "DRAIN" in node.get("State", "").split("+")


def main(directory):
    def read(name):
        with open(os.path.join(directory, name)) as handle:
            return handle.read()

    nodes = {p: records(read(p + "-nodes.txt")) for p in ("before", "after-run", "after-crash", "after-recover")}
    jobs = {p: records(read(p + "-jobs.txt")) for p in ("after-run", "after-recover")}
    ids = json.loads(read("jobs.json"))
    run, crash, recover = (events(os.path.join(directory, d, "log")) for d in ("run", "crash", "recover"))
    run_out, recover_out = read("run-output.txt"), read("recover-output.txt")
    summary_run = json.loads(read("summary-run/latest.json"))
    summary_recover = json.loads(read("summary-recover/latest.json"))
    crashed = json.loads(read("crash.json"))
    found, checked = [], []

    def expect(ok, promise, detail=""):
        (checked if ok else found).append(promise + ("" if ok else ": " + detail))

    def of(log, node, event=None):
        return [e for e in log if e[2] == node and (event is None or e[1] == event)]

    # --- slurm2: the admin's drain, exactly as it was, nothing on the node ---------------------------------------
    before2 = nodes["before"][N2]
    expect(before2.get("Reason", "").startswith("Bad DIMM [") and drained(before2),
           "the admin's drain of slurm2 is in place before the campaign", str(before2))
    for point in ("after-run", "after-crash", "after-recover"):
        now2 = nodes[point][N2]
        expect((now2.get("State"), now2.get("Reason")) == (before2.get("State"), before2.get("Reason")),
               "slurm2 keeps the admin's state and reason, its time included (%s)" % point,
               "%s %r, was %s %r" % (now2.get("State"), now2.get("Reason"), before2.get("State"), before2.get("Reason")))
    expect(not any(of(log, N2) for log in (run, crash, recover)),
           "no campaign locked, drained or disrupted slurm2", str([of(log, N2) for log in (run, crash, recover)]))
    held = summary_run["nodes"].get(N2, {})
    expect(held.get("verdict") == "held" and "Bad DIMM" in (held.get("held") or ""),
           "the run summary names slurm2 as held, with the admin's reason", str(held))
    expect(re.search(r'%s: out of service before this run by another hand \(IDLE\+DRAIN, reason \\?"Bad DIMM' % N2, run_out)
           is not None, "the campaign's output names slurm2 and why it is left alone")

    # --- slurm1: the drain waited for its job, then resumed only after verification ---------------------------------
    job1 = jobs["after-run"].get(ids["slurm1"], {})
    start1 = [e[0] for e in of(run, N1, "start")]
    disrupt1 = [e[0] for e in of(run, N1, "disrupt")]
    end1 = epoch(job1.get("EndTime"))
    expect(job1.get("JobState") == "COMPLETED", "slurm1's job ran to its end (not killed by the drain)", str(job1))
    expect(bool(start1 and disrupt1 and end1) and start1[0] < end1 <= disrupt1[0] + 1,
           "slurm1's batch began while its job ran, and the disruption came only after the job ended",
           "batch start %s, job end %s, disruption %s" % (start1, end1, disrupt1))
    expect([e[1] for e in of(run, N1) if e[1].startswith("slurm_jobs=")] == ["slurm_jobs=none"],
           "Slurm ran no job on slurm1 at its disruption", str(of(run, N1)))
    after1 = nodes["after-run"][N1]
    expect(not drained(after1) and "Reason" not in after1,
           "slurm1 is back in service after its verification passed", str(after1))
    expect(summary_run["nodes"].get(N1, {}).get("verify") == "passed"
           and summary_run["nodes"][N1].get("resumed") is True, "the run summary says slurm1 passed and was resumed",
           str(summary_run["nodes"].get(N1)))

    # --- slurm3: its job outlasted the wait: skipped, back in service, untouched --------------------------------------
    job3 = jobs["after-run"].get(ids["slurm3"], {})
    after3 = nodes["after-run"][N3]
    expect(job3.get("JobState") == "RUNNING", "slurm3's job still runs after the campaign", str(job3))
    expect(not drained(after3) and after3.get("State", "").split("+")[0] in ("ALLOCATED", "MIXED"),
           "slurm3 is back in service with its job", str(after3))
    expect(not of(run, N3, "disrupt"), "nothing disruptive reached slurm3", str(of(run, N3)))
    expect(summary_run["nodes"].get(N3, {}).get("verdict") == "skipped",
           "the run summary names slurm3 as skipped", str(summary_run["nodes"].get(N3)))
    expect(re.search(r"%s\s+skipped: the jobs on it did not end within gpudirect_drain_wait_timeout=10 s" % N3, run_out)
           is not None, "the campaign's table names slurm3 and why it was skipped")
    expect(bool(of(run, N4, "disrupt")), "the campaign went on after slurm3 (slurm4 was rolled)", str(of(run, N4)))

    # --- slurm4: failed its verification: left drained with the toolkit's reason ---------------------------------------
    after4 = nodes["after-run"][N4]
    expect(drained(after4) and after4.get("Reason", "").startswith(OWN) and ": verify [" in after4.get("Reason", ""),
           "slurm4 stays drained, its reason naming the run and the stage it stopped at", str(after4))
    expect(summary_run["nodes"].get(N4, {}).get("verify") not in ("passed", None)
           and summary_run["nodes"][N4].get("resumed") is False, "slurm4 was not resumed", str(summary_run["nodes"].get(N4)))

    # --- the killed campaign, and the run after it ----------------------------------------------------------------------
    crash1 = nodes["after-crash"][N1]
    expect(crashed.get("killed") is True, "the controller was killed while slurm1 worked", str(crashed))
    expect(drained(crash1) and crash1.get("Reason", "").startswith(OWN)
           and crash1.get("Reason") != after4.get("Reason"),
           "the killed campaign left slurm1 drained under its own reason", str(crash1))
    for node in (N1, N4):
        expect(re.search(r"%s is drained by an earlier run of this toolkit" % node, recover_out) is not None,
               "the run after it recognises %s's drain as the toolkit's own" % node)
        final = nodes["after-recover"][node]
        expect(not drained(final) and "Reason" not in final,
               "%s is back in service after the run after the killed one verified it" % node, str(final))
        rec = summary_recover["nodes"].get(node, {})
        expect(rec.get("verify") == "passed" and rec.get("resumed") is True,
               "the run after it verified and resumed %s" % node, str(rec))
    expect(summary_recover["result"] == "ok" and summary_recover["nodes"].get(N2, {}).get("verdict") == "held",
           "the run after it passed, slurm2 still held", json.dumps(summary_recover["totals"]))

    for line in checked:
        print("ok: " + line)
    for line in found:
        print("BROKEN: " + line)
    return 1 if found else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
