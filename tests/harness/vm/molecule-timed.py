#!/usr/bin/env python3
"""Run a molecule command, pass its output through, and print per-phase timings.

    tests/harness/vm/molecule-timed.py test -s rdma
    tests/harness/vm/molecule-timed.py --log /tmp/rdma.log test -s rdma

The summary lists the image build (or cache hit), boot-to-ssh per VM, each
molecule action in order (verify twice: before and after the reboot) and the
total. Exit status is molecule's. Standard library only.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "rdma \u279c create: Executing" (colour) or "[rdma > create] Executing" (plain)
ACTION = re.compile(r"(?:\u279c|>) (\w+)(?::|\]) (Executing\s*$|Executed: \w+)")
NOTES = (
    re.compile(r"\[vm-image\] (image build: .*|image cached: .*)"),
    re.compile(r"\[vm\] (\S+: ssh answers after .*)"),
    re.compile(r"(ib_write_bw rxe0 .*Gb/s)"),
)


def main() -> int:
    args = sys.argv[1:]
    log = None
    if args[:1] == ["--log"]:
        log = open(args[1], "w")
        args = args[2:]
    t0 = time.monotonic()
    phases: list[list] = []   # [name, start, end, result]
    notes: list[str] = []
    env = dict(os.environ, PY_COLORS="0", ANSIBLE_FORCE_COLOR="0")
    p = subprocess.Popen(["molecule", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", env=env)
    assert p.stdout is not None
    for raw in p.stdout:
        sys.stdout.write(raw)
        if log:
            log.write(raw)
        line = ANSI.sub("", raw)
        now = time.monotonic()
        m = ACTION.search(line)
        if m:
            name, what = m.group(1), m.group(2).strip()
            if what == "Executing":
                phases.append([name, now, None, "?"])
            elif what.startswith("Executed") and phases and phases[-1][0] == name and phases[-1][2] is None:
                phases[-1][2] = now
                phases[-1][3] = what.split(": ", 1)[1]
        for rx in NOTES:
            n = rx.search(line)
            if n:
                notes.append(n.group(1).strip().strip('",'))
    rc = p.wait()
    end = time.monotonic()
    out = ["", "==== per-phase timings " + "=" * 40]
    out += [f"  {n}" for n in dict.fromkeys(notes)]
    for name, start, stop, result in phases:
        out.append(f"  {name:<12} {((stop or end) - start):7.1f} s  {result}")
    out.append(f"  {'total':<12} {end - t0:7.1f} s  (molecule rc {rc})")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if log:
        log.write(text)
        log.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
