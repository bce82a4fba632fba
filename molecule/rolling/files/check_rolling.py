#!/usr/bin/env python3
"""Check the rolling scenario's fake-scheduler log and play output (issue #13, "How it is checked").

    check_rolling.py LOG OUTPUT CHECK_LOG [LOSE_LOG LOSE_OUTPUT [UNREACH_LOG UNREACH_OUTPUT [AHEAD_LOG AHEAD_OUTPUT
                     [CANARY_LOG CANARY_OUTPUT STOP_LOG FIRST_OUTPUT SECOND_OUTPUT SECOND_LOG STOP_JSON
                      RECOVER_LOG RECOVER_OUTPUT]]]]

LOG is the real run's log, OUTPUT its ansible-playbook output, CHECK_LOG the log of the
--check run before it; LOSE_LOG and LOSE_OUTPUT those of the "lose" run (batches of 2,
every verification passing, roll1 made unreachable right after its disruptive step);
UNREACH_LOG and UNREACH_OUTPUT those of the "unreach" run (batches of 1, every verification
passing, roll3 made unreachable right after its disruptive step: its batch is lost whole, so
Ansible ends the run before any drain report names it and the callback
callback_plugins/gpudirect_left_behind.py must print the table); AHEAD_LOG and AHEAD_OUTPUT those
of the "ahead" run (batches of 1, every verification passing, gpudirect_rolling_lookahead 1,
jobs of 8 s on roll1, roll3 and roll4); CANARY_LOG and CANARY_OUTPUT those of the "canary" run
(batches [1, "100%"], the canary roll1 failing its verification); STOP_LOG, FIRST_OUTPUT,
SECOND_OUTPUT, SECOND_LOG and STOP_JSON those of the "stop" run (files/interrupt_run.py: the
first controller cut off mid-batch, the second refused by the fleet lock); RECOVER_LOG and
RECOVER_OUTPUT those of the run after it.
Prints one line per broken promise and exits 1 when there is any.
The expectations are the scenario's (molecule/rolling/rolling.yml): roll1 is changed and
passes, roll2 needs nothing, roll3 is changed and fails verification, roll4 comes after
roll3 with max_fail_percentage 0; roll1 and roll3 have a job running when the run starts.
"""

import json
import sys

PASS, CALM, FAIL, LATER = "gpudirect-roll1", "gpudirect-roll2", "gpudirect-roll3", "gpudirect-roll4"


def parse(text):
    events = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            events.append((float(fields[0]), fields[1], fields[2], " ".join(fields[3:])))
    return events


def problems(log_text, output, check_log_text):
    events = parse(log_text)
    found = []

    def of(node, event=None):
        return [e for e in events if e[2] == node and (event is None or e[1] == event)]

    # no two batches overlap (serial 1: each changed node is a batch, from its start to its end mark)
    spans = sorted((min(e[0] for e in of(n) if e[1] != "job"), max(e[0] for e in of(n)), n)
                   for n in (PASS, FAIL, LATER) if of(n, "start"))
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            found.append("batches overlap: %s started at %.3f before %s ended at %.3f" % (second, start, first, end))
    # no node disrupted while its job marker exists, nor before it was drained and seen idle
    for node in (PASS, FAIL, LATER):
        for when, _, _, detail in of(node, "disrupt"):
            if "job=yes" in detail:
                found.append("%s was disrupted at %.3f while its job ran" % (node, when))
            if not [e for e in of(node, "idle") if e[0] <= when] or not [e for e in of(node, "drain") if e[0] <= when]:
                found.append("%s was disrupted at %.3f before it was drained and idle" % (node, when))
    for node in (PASS, FAIL):
        if not of(node, "busy"):
            found.append("%s: the wait never saw its running job (the job marker was not waited for)" % node)
    # the node that passed is resumed after its disruption
    if not of(PASS, "resume") or not of(PASS, "disrupt") or of(PASS, "resume")[0][0] < of(PASS, "disrupt")[0][0]:
        found.append("%s passed verification but was not resumed after its disruption" % PASS)
    # the node whose verification failed stays drained and is named in the table with its resume command
    if not of(FAIL, "drain"):
        found.append("%s was never drained" % FAIL)
    if of(FAIL, "resume"):
        found.append("%s failed verification but was resumed" % FAIL)
    table = [line for line in output.splitlines() if FAIL in line and "fake_scheduler.py" in line and "resume" in line]
    if not table:
        found.append("%s is not named in the table with its resume command" % FAIL)
    # nodes that need nothing are never drained
    if of(CALM, "drain") or of(CALM, "disrupt"):
        found.append("%s needed nothing but was drained or disrupted" % CALM)
    # max_fail_percentage 0 stops before the next batch
    if of(LATER):
        found.append("%s ran after %s's batch failed (max_fail_percentage 0)" % (LATER, FAIL))
    # check mode drains, waits for and disrupts nothing
    touched = [e for e in parse(check_log_text) if e[1] in ("drain", "idle", "busy", "resume", "disrupt")]
    if touched:
        found.append("the --check run called the scheduler: %s" % ", ".join("%s %s" % (e[1], e[2]) for e in touched))
    return found


def _rows(output, node):
    """The lines of the printed drain tables that name NODE (debug prints each as a quoted item)."""
    return [line for line in output.splitlines() if line.strip().startswith('"%s  ' % node)]


def lose_problems(log_text, output):
    """The "lose" run: roll1 (batch 1 with roll3) unreachable after its disruptive step."""
    events = parse(log_text)
    found = []

    def of(node, event):
        return [e for e in events if e[2] == node and e[1] == event]

    lost = _rows(output, PASS)
    if not lost:
        found.append("lose run: the unreachable %s is not named in any table" % PASS)
    for line in lost:
        if "unreachable in this run after its drain (last stage: disrupt)" not in line:
            found.append("lose run: %s's row does not say unreachable, drained, last stage disrupt: %s"
                         % (PASS, line.strip()))
        if "fake_scheduler.py" not in line or "resume %s" % PASS not in line:
            found.append("lose run: %s's row lacks its resume command: %s" % (PASS, line.strip()))
    if of(PASS, "resume"):
        found.append("lose run: the unreachable %s was resumed" % PASS)
    if not of(FAIL, "resume"):
        found.append("lose run: %s, in the batch of the lost node, passed but was not resumed" % FAIL)
    if [e for e in events if e[2] == LATER]:
        found.append("lose run: %s ran after a node of the batch before it became unreachable" % LATER)
    if not [line for line in _rows(output, LATER) if "not reached" in line]:
        found.append("lose run: %s, never reached, is not named as not reached in the final table" % LATER)
    return found


def _left_behind_rows(output, node):
    """The rows naming NODE in the callback's table (printed unquoted, after its banner)."""
    if "NODES LEFT BEHIND" not in output:
        return []
    after = output.split("NODES LEFT BEHIND", 1)[1]
    return [line for line in after.splitlines() if line.startswith("%s  " % node)]


def unreach_problems(log_text, output):
    """The "unreach" run: roll3, alone in batch 2, unreachable after its disruptive step."""
    events = parse(log_text)
    found = []

    def of(node, event):
        return [e for e in events if e[2] == node and e[1] == event]

    if "NODES LEFT BEHIND" not in output:
        found.append("unreach run: no NODES LEFT BEHIND table (callback gpudirect_left_behind) after the lost batch")
    lost = _left_behind_rows(output, FAIL)
    if len(lost) != 1:
        found.append("unreach run: the lost %s is named %d times in the NODES LEFT BEHIND table, not once"
                     % (FAIL, len(lost)))
    for line in lost:
        if "unreachable in this run after its drain (last stage: disrupt)" not in line:
            found.append("unreach run: %s's row does not say unreachable, drained, last stage disrupt: %s"
                         % (FAIL, line.strip()))
        if "fake_scheduler.py" not in line or not line.rstrip().endswith("resume %s" % FAIL):
            found.append("unreach run: %s's row lacks its resume command: %s" % (FAIL, line.strip()))
    if not [line for line in _left_behind_rows(output, LATER) if "not reached" in line]:
        found.append("unreach run: %s, never reached, is not named as not reached in the NODES LEFT BEHIND table"
                     % LATER)
    if _left_behind_rows(output, PASS):
        found.append("unreach run: %s passed and was resumed in batch 1, yet the NODES LEFT BEHIND table names it"
                     % PASS)
    if _rows(output, FAIL):
        found.append("unreach run: a drain report printed a table naming %s: the run was not ended by the lost "
                     "batch, so the scenario does not test the callback" % FAIL)
    if not of(PASS, "resume"):
        found.append("unreach run: %s, in batch 1, passed but was not resumed" % PASS)
    if of(FAIL, "resume"):
        found.append("unreach run: the unreachable %s was resumed" % FAIL)
    if [e for e in events if e[2] == LATER]:
        found.append("unreach run: %s ran after the batch before it was lost" % LATER)
    return found


def ahead_problems(log_text, output):
    """The "ahead" run (issue #30 outcome 4): each next node is drained while the batch before it works."""
    events = parse(log_text)
    found = []

    def of(node, event):
        return [e[0] for e in events if e[2] == node and e[1] == event]

    for before, node in ((PASS, FAIL), (FAIL, LATER)):
        drains, starts, resumed = of(node, "drain"), of(node, "start"), of(before, "resume")
        if len(drains) != 1:
            found.append("ahead run: %s was drained %d times, not once (ahead of its batch, then not again)"
                         % (node, len(drains)))
            continue
        if not starts or not resumed or not drains[0] < min(starts) or not drains[0] < resumed[0]:
            found.append("ahead run: %s was not drained while %s's batch worked (drain %s, %s resumed %s, %s's "
                         "batch started %s)" % (node, before, drains, before, resumed, node, starts))
    # roll3's 8 s job ran out during roll1's batch, which itself waited 8 s for its job
    if of(FAIL, "busy"):
        found.append("ahead run: the wait at %s's batch still saw its job (%d busy checks): the waits added up"
                     % (FAIL, len(of(FAIL, "busy"))))
    if not of(PASS, "busy"):
        found.append("ahead run: %s's own wait never saw its job (the run did not wait for it)" % PASS)
    for node in (PASS, FAIL, LATER):
        if not of(node, "resume"):
            found.append("ahead run: %s passed but was not resumed" % node)
    if of(CALM, "drain"):
        found.append("ahead run: %s needs no change but was drained ahead" % CALM)
    for node in (PASS, FAIL, LATER):
        for when, _, _, detail in [e for e in events if e[2] == node and e[1] == "disrupt"]:
            if "job=yes" in detail:
                found.append("ahead run: %s was disrupted at %.3f while its job ran" % (node, when))
    if "draining ahead of their batch: %s" % FAIL not in output:
        found.append("ahead run: the output does not say that %s is drained ahead" % FAIL)
    return found


def _squash(text):
    """TEXT without any whitespace: Ansible wraps its warnings (and may break a node name at its hyphen)."""
    return "".join(text.split())


def canary_problems(log_text, output):
    """The "canary" run (issue #30 outcome 1): the canary fails, nothing else is touched."""
    events = parse(log_text)
    found = []
    if not [e for e in events if e[2] == PASS and e[1] == "disrupt"]:
        found.append("canary run: the canary %s was never disrupted" % PASS)
    if [e for e in events if e[2] == PASS and e[1] == "resume"]:
        found.append("canary run: the canary %s failed its verification but was resumed" % PASS)
    touched = [e for e in events if e[2] in (FAIL, LATER, CALM)]
    if touched:
        found.append("canary run: nodes after the failed canary were touched: %s"
                     % ", ".join("%s %s" % (e[1], e[2]) for e in touched))
    if not [line for line in _rows(output, PASS) if "fake_scheduler.py" in line and "resume %s" % PASS in line]:
        found.append("canary run: the failed canary %s is not named in the table with its resume command" % PASS)
    # max_fail_percentage stops the run after the canary's batch: no later play (no final table),
    # so that batch's report names the nodes it leaves unreached
    later = [line for line in output.splitlines() if "Not reached yet (2)" in line]
    for node in (FAIL, LATER):
        if not [line for line in later if node in line]:
            found.append("canary run: %s is not named among the nodes not reached yet" % node)
    return found


def stop_problems(log_text, first_output, second_output, second_log_text, summary_text):
    """The "stop" run (issue #30 outcomes 2, 3): cut off mid-batch, a second controller refused."""
    events = parse(log_text)
    summary = json.loads(summary_text)
    found = []
    if sorted(summary["batch"]) != [PASS, FAIL]:
        found.append("stop run: the batch cut off was %s, not %s and %s" % (summary["batch"], PASS, FAIL))
    if summary["first_rc"] == 0:
        found.append("stop run: the interrupted controller exited 0")
    if summary["second_rc"] == 0 or "Another campaign of the toolkit works on these nodes" not in second_output:
        found.append("stop run: the second controller was not refused by the fleet lock (rc %s)" % summary["second_rc"])
    if parse(second_log_text):
        found.append("stop run: the refused second controller called the scheduler: %s" % second_log_text.strip())
    for node in (PASS, FAIL):
        if not [e for e in events if e[2] == node and e[1] == "drain"]:
            found.append("stop run: %s was not drained before it was cut off" % node)
        if [e for e in events if e[2] == node and e[1] == "resume"]:
            found.append("stop run: %s was resumed although its run was cut off" % node)
    if [e for e in events if e[2] in (LATER, CALM)]:
        found.append("stop run: a node outside the cut-off batch was touched")
    if "User interrupted execution" not in first_output:
        found.append("stop run: the first controller's output does not show the interruption")
    return found


def recover_problems(log_text, output):
    """The run after the "stop" run: both nodes named first with their notes, taken over, rolled, resumed."""
    events = parse(log_text)
    found = []
    squashed = _squash(output)
    listed = "Nodesanearlierrunleftdrainedorlost(2)"
    first_batch = _squash("TASK [Log the start of the node's batch]")
    if listed not in squashed:
        found.append("recover run: it does not name first the 2 nodes the cut-off run left behind")
    elif first_batch in squashed and squashed.index(listed) > squashed.index(first_batch):
        found.append("recover run: the nodes left behind are named after the first batch started")
    for node in (PASS, FAIL):
        if _squash("%s: lost in an earlier run after its drain" % node) not in squashed:
            found.append("recover run: %s's note (lost after its drain) is not listed" % node)
        if _squash("taking over a stale run lock on %s" % node) not in squashed:
            found.append("recover run: %s's lock, left by the interrupted run, was not taken over" % node)
        if not [e for e in events if e[2] == node and e[1] == "resume"]:
            found.append("recover run: %s was not rolled again and resumed" % node)
    if _squash("no longer runs on this controller") not in squashed:
        found.append("recover run: the take-over does not say the interrupted run's process is gone")
    if _squash("fleet lock: removed the stale entry") not in squashed:
        found.append("recover run: the interrupted run's fleet lock entry was not removed as stale")
    if not [e for e in events if e[2] == LATER and e[1] == "resume"]:
        found.append("recover run: %s, never reached by the cut-off run, was not rolled" % LATER)
    if [e for e in events if e[2] == CALM]:
        found.append("recover run: %s needs nothing but was touched" % CALM)
    return found


def main(argv):
    texts = []
    for path in argv[1:]:
        with open(path) as handle:
            texts.append(handle.read())
    found = problems(*texts[:3])
    if len(texts) >= 5:
        found += lose_problems(*texts[3:5])
    if len(texts) >= 7:
        found += unreach_problems(*texts[5:7])
    if len(texts) >= 9:
        found += ahead_problems(*texts[7:9])
    if len(texts) >= 18:
        found += canary_problems(*texts[9:11])
        found += stop_problems(*texts[11:16])
        found += recover_problems(*texts[16:18])
    for line in found:
        print(line)
    print("%d problem(s)" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
