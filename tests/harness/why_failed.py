#!/usr/bin/env python3
"""The lines of a scenario log that say why it failed, for the end of scripts/test.sh.

CI shows only the end of the suite's output. A side-effect step that runs an inner
ansible-playbook and fails prints one ``fatal: [localhost]: FAILED! => {...}`` line whose
JSON holds the inner run's whole stdout; cut to a line width, it says nothing but "rc 2".
This prints the matching lines of the log, and for each such JSON result the inner run's
own lines that say what failed (fatal, FAILED, failed=, assertion, msg).

Usage: why_failed.py LOG [MAX_LINES]
"""
import json
import re
import sys

OUTER = re.compile(r"fatal: |FAILED! =>|Idempotence test failed|^\*  => |Executed: Failed|^E  +[A-Za-z]|"
                   r"^FAILED |timed out|failed=[1-9]")
# an inner run's lines from the first that starts a failure on, those of them that say what failed
FAILURE_STARTS = re.compile(r"fatal: |FAILED!|\[ERROR\]|^ERROR")
INNER = re.compile(r"fatal: |FAILED!|failed=[1-9]|unreachable=[1-9]|\"assertion\"|\"msg\"|^ERROR|\[ERROR\]")
WIDTH = 400


def inner_lines(line):
    """What a one-line JSON task result says of the failure: its assertion and message
    (unless the message is only "non-zero return code"), then the lines of the inner
    run's stdout and stderr from its first failure on that say what failed."""
    start = line.find("=> {")
    if start < 0:
        return []
    try:
        result = json.loads(line[start + 3:])
    except ValueError:
        return []
    if not isinstance(result, dict):
        return []
    out = ["%s: %s" % (key, result[key]) for key in ("assertion", "msg")
           if isinstance(result.get(key), str) and result[key] != "non-zero return code"]
    for key in ("stdout", "stderr"):
        text = result.get(key)
        if not isinstance(text, str):
            continue
        failing = False
        for t in text.splitlines():
            failing = failing or bool(FAILURE_STARTS.search(t))
            if failing and INNER.search(t):
                out.append(t.strip())
    return out


def _result_text(lines, i):
    """Line ``i`` and, where it opens a result printed over several lines (the pretty
    form, ``=> {`` at its end), the lines up to the closing ``}``, as one line."""
    line = lines[i]
    if not line.rstrip().endswith("=> {"):
        return line
    body = [line]
    for nxt in lines[i + 1:i + 5000]:
        body.append(nxt)
        if nxt.rstrip() == "}":
            break
    return " ".join(body)


def why(lines, limit=30):
    lines = [line.rstrip("\n") for line in lines]
    out = []
    for i, line in enumerate(lines):
        if not OUTER.search(line):
            continue
        out.append(line[:WIDTH])
        out.extend("    | " + t[:WIDTH] for t in inner_lines(_result_text(lines, i))[:limit])
        if len(out) >= limit:
            break
    return out[:limit]


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    limit = int(argv[2]) if len(argv) > 2 else 30
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        for line in why(f, limit):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
