# -*- coding: utf-8 -*-
"""Read what GDRCopy's test tools print, and judge it.

``gdrcopy_sanity`` (package ``gdrcopy-tests`` on Debian/Ubuntu, ``gdrcopy`` on EL)
runs the library's unit tests against the loaded ``gdrdrv`` and ends with one summary
line (NVIDIA/gdrcopy ``tests/testsuites/testsuite.cpp``)::

    Total: 28, Passed: 28, Failed: 0, Waived: 0

followed, when there are any, by ``List of failed tests:`` and ``List of waived tests:``
with one four-space-indented name per line (older releases also listed the passed
tests). It exits 1 when a test failed. Releases before 2.3 used libcheck and ended with
``100%: Checks: 15, Failures: 0, Errors: 0``, which NVIDIA/gdrcopy#156 shows could
read 100% although tests had failed: the exit status counts as much as the numbers.

``gdrcopy_copybw`` copies one buffer to and from GPU memory through the BAR mapping
and prints ``write BW: 9638.54MB/s`` and ``read BW: 530.135MB/s``, where MB is
bytes / 1024 / 1024 (``tests/copybw.cpp``). GB/s here is 10^9 bytes per second.

Pure functions over text; fixtures and their sources in ``tests/fixtures/gdrcopy/``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SUMMARY = re.compile(r"^Total:\s*(\d+),\s*Passed:\s*(\d+),\s*Failed:\s*(\d+),\s*Waived:\s*(\d+)\s*$", re.M)
_CHECK_SUMMARY = re.compile(r"^(\d+)%:\s*Checks:\s*(\d+),\s*Failures:\s*(\d+),\s*Errors:\s*(\d+)\s*$", re.M)
_LIST = re.compile(r"^List of (passed|failed|waived) tests:\s*$")
_BW = re.compile(r"^(write|read) BW:\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*MB/s\s*$", re.M)
_GPU = re.compile(r"^GPU id:(\d+); name: (.*?); Bus id: (\S+)\s*$", re.M)
_SELECT = re.compile(r"^selecting device (\d+)\s*$", re.M)
_SIZE = re.compile(r"^testing size: (\d+)\s*$", re.M)

MIB = 1024 * 1024


class GdrcopyOutputError(ValueError):
    """The output is not what the tool prints when it ran to its end."""


def _tail(text, lines=5):
    rest = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(rest[-lines:]) if rest else "(no output)"


def parse_sanity(text, rc=0):
    """Counts, test names and a verdict from ``gdrcopy_sanity``'s output and exit status.

    Returns ``{"format", "total", "passed", "failed", "waived", "failed_tests",
    "waived_tests", "passed_tests", "rc", "ok"}``; ``ok`` is true only with exit
    status 0, no failed test and at least one test passed. Raises
    ``GdrcopyOutputError`` when no summary line is there (the tool stopped before
    the end: no gdrdrv, no GPU, no CUDA), with the last lines it printed.
    """
    text = text or ""
    match = _SUMMARY.search(text)
    lists = {"passed": [], "failed": [], "waived": []}
    if match:
        total, passed, failed, waived = (int(x) for x in match.groups())
        fmt = "summary"
        current = None
        for line in text[match.end():].splitlines():
            head = _LIST.match(line.strip())
            if head:
                current = head.group(1)
            elif current and line.startswith("    ") and line.strip():
                lists[current].append(line.strip())
            elif line.strip():
                current = None
    else:
        match = _CHECK_SUMMARY.search(text)
        if not match:
            raise GdrcopyOutputError(
                "gdrcopy_sanity printed no summary line ('Total: N, Passed: N, Failed: N, Waived: N'), exit status "
                "%s; it stopped before running its tests. Last lines: %s" % (rc, _tail(text)))
        _percent, total, failures, errors = (int(x) for x in match.groups())
        fmt = "libcheck"
        failed = failures + errors
        passed = total - failed
        waived = 0
    rc = int(rc) if rc is not None else None
    ok = rc == 0 and failed == 0 and passed > 0
    return {"format": fmt, "total": total, "passed": passed, "failed": failed, "waived": waived,
            "failed_tests": lists["failed"], "waived_tests": lists["waived"], "passed_tests": lists["passed"],
            "rc": rc, "ok": ok}


def sanity_summary(parsed):
    """One line for the report: counts, and the failed tests by name."""
    line = "gdrcopy_sanity: %d passed, %d failed, %d waived of %d" % (
        parsed["passed"], parsed["failed"], parsed["waived"], parsed["total"])
    if parsed["failed_tests"]:
        line += " (failed: %s)" % ", ".join(parsed["failed_tests"])
    if parsed["rc"] not in (0, None):
        line += "; exit status %s" % parsed["rc"]
    return line


def parse_copybw(text, rc=0):
    """Bandwidths from ``gdrcopy_copybw``: ``{"device", "gpu_name", "bus_id", "size",
    "write_mib_s", "read_mib_s", "write_gbs", "read_gbs", "rc"}``.

    Raises ``GdrcopyOutputError`` without both ``write BW`` and ``read BW`` lines.
    """
    text = text or ""
    found = {}
    for kind, value in _BW.findall(text):
        found[kind] = float(value)
    if "write" not in found or "read" not in found:
        raise GdrcopyOutputError(
            "gdrcopy_copybw printed no 'write BW: ...MB/s' and 'read BW: ...MB/s' lines, exit status %s. "
            "Last lines: %s" % (rc, _tail(text)))
    gpus = {int(i): (name, bus) for i, name, bus in _GPU.findall(text)}
    selected = _SELECT.search(text)
    device = int(selected.group(1)) if selected else None
    name, bus = gpus.get(device, (None, None))
    size = _SIZE.search(text)
    return {"device": device, "gpu_name": name, "bus_id": bus, "size": int(size.group(1)) if size else None,
            "write_mib_s": found["write"], "read_mib_s": found["read"],
            "write_gbs": round(found["write"] * MIB / 1e9, 3), "read_gbs": round(found["read"] * MIB / 1e9, 3),
            "rc": int(rc) if rc is not None else None}


def copybw_summary(parsed):
    """One line for the report."""
    where = "GPU %s" % parsed["device"] if parsed["device"] is not None else "GPU"
    if parsed["gpu_name"]:
        where += " (%s, %s)" % (parsed["gpu_name"], parsed["bus_id"])
    return "gdrcopy_copybw on %s, %s bytes: write %.2f GB/s, read %.2f GB/s" % (
        where, parsed["size"] if parsed["size"] is not None else "?", parsed["write_gbs"], parsed["read_gbs"])


def judge(sanity=None, copybw=None, missing=None):
    """The gdrcopy check of one node, for the verification record.

    ``sanity`` / ``copybw`` are ``{"stdout", "stderr", "rc"}`` of each tool's run
    (``None``: not run); ``missing`` the reason they were not run (tools absent,
    check mode). Returns ``{"name": "gdrcopy", "status": passed|failed|skipped,
    "summary", "sanity", "copybw", "reason"}``. A failing ``gdrcopy_sanity`` fails
    the check; ``gdrcopy_copybw`` is reported, and fails the check only when it
    stopped before printing its bandwidths.
    """
    check = {"name": "gdrcopy", "status": "skipped", "summary": "", "sanity": None, "copybw": None,
             "reason": missing or ""}
    if missing:
        check["summary"] = "gdrcopy: not run: %s" % missing
        return check
    problems, lines = [], []
    for key, parse, summarize in (("sanity", parse_sanity, sanity_summary),
                                  ("copybw", parse_copybw, copybw_summary)):
        run = (sanity if key == "sanity" else copybw)
        if run is None:
            continue
        text = (run.get("stdout") or "") + ("\n" + run["stderr"] if run.get("stderr") else "")
        try:
            parsed = parse(text, run.get("rc"))
        except GdrcopyOutputError as exc:
            problems.append(str(exc))
            lines.append(str(exc))
            continue
        check[key] = parsed
        lines.append(summarize(parsed))
        if key == "sanity" and not parsed["ok"]:
            problems.append(summarize(parsed))
    check["status"] = "failed" if problems else "passed"
    check["summary"] = "; ".join(lines)
    check["reason"] = "; ".join(problems)
    return check
