#!/usr/bin/env python3
"""A fake scheduler for the rolling scenario: logs what the toolkit asks of it, with times.

    fake_scheduler.py STATE_DIR job NODE SECONDS   a job runs on NODE (marker file) until SECONDS after
                                                   NODE's drain: a drain lets running jobs finish
    fake_scheduler.py STATE_DIR drain NODE         NODE gets no new job; its job ends SECONDS later
    fake_scheduler.py STATE_DIR idle NODE          exit 0 when no job runs on NODE, else 1
    fake_scheduler.py STATE_DIR resume NODE        NODE is back in service
    fake_scheduler.py STATE_DIR disrupt NODE       the stand-in disruptive step reached NODE
    fake_scheduler.py STATE_DIR mark NODE EVENT    a point of the play (start, end, plan)

Every call appends "<epoch seconds> <event> <node> [detail]" to STATE_DIR/log.
check_rolling.py reads that log. Standard library only.
"""

import os
import sys
import time


def _marker(state, node):
    """NODE's job marker: ("pending", seconds) before its drain, ("until", epoch) after, or None."""
    try:
        with open(os.path.join(state, "job-" + node)) as handle:
            kind, value = handle.read().split()
    except FileNotFoundError:
        return None
    return kind, float(value)


def _write_marker(state, node, kind, value):
    with open(os.path.join(state, "job-" + node), "w") as handle:
        handle.write("%s %.3f\n" % (kind, value))


def job_running(state, node, now):
    """Whether NODE's job still runs: before its drain always, after it until the marker expires."""
    marker = _marker(state, node)
    return marker is not None and (marker[0] == "pending" or marker[1] > now)


def log(state, *fields):
    with open(os.path.join(state, "log"), "a") as handle:
        handle.write(" ".join(["%.3f" % time.time()] + [str(f) for f in fields]) + "\n")


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    state, verb, node = argv[1], argv[2], argv[3]
    os.makedirs(state, exist_ok=True)
    now = time.time()
    if verb == "job":
        _write_marker(state, node, "pending", float(argv[4]))
        log(state, "job", node, argv[4])
        return 0
    if verb == "idle":
        busy = job_running(state, node, now)
        log(state, "busy" if busy else "idle", node)
        return 1 if busy else 0
    if verb == "disrupt":
        log(state, "disrupt", node, "job=%s" % ("yes" if job_running(state, node, now) else "no"))
        return 0
    if verb == "drain":
        marker = _marker(state, node)
        if marker is not None and marker[0] == "pending":
            _write_marker(state, node, "until", now + marker[1])
        log(state, verb, node)
        return 0
    if verb == "resume":
        log(state, verb, node)
        return 0
    if verb == "mark":
        log(state, argv[4], node)
        return 0
    sys.exit("unknown verb %r\n%s" % (verb, __doc__))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
