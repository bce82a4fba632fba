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

Both stop at their first CUDA driver call on a machine without a GPU: ``ASSERTDRV``
(``tests/common.hpp``) prints ``CUDA error: CUDA_ERROR_NO_DEVICE`` and the failed
assertion and exits 1, ``gdrcopy_copybw`` before any bandwidth, ``gdrcopy_sanity`` in
every test that needs CUDA. On a node whose facts list no NVIDIA GPU the check is then
``not_measured``, with the tools' own error lines as the reason: nothing was measured,
and nothing failed that the node has.

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
# the lines in which the tools name their own error: ASSERTDRV's (tests/common.hpp), gdr_open_safe's,
# and the dynamic loader's when libcuda is not there at all
_ERROR_LINE = re.compile(r"^(CUDA error: \S+|gdr_open error: .*|.*error while loading shared libraries: .*)$")
_CUDA_ERROR = re.compile(r"^CUDA error: (CUDA_ERROR_\w+)$")
# cuGetErrorString's words for the errors that mean "no GPU here" (CUDA driver API, CUresult 100)
NO_DEVICE_ERRORS = {"CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected"}

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


def tool_errors(text):
    """The error lines a tool printed, each once with how often, the most frequent first:
    ``[(line, count)]``."""
    seen = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if _ERROR_LINE.match(line):
            seen[line] = seen.get(line, 0) + 1
    return sorted(seen.items(), key=lambda item: -item[1])


def _error_words(text):
    """The tool's error lines quoted, with the CUDA driver's words for a no-device error; "" without any."""
    said = []
    for line, count in tool_errors(text):
        cuda = _CUDA_ERROR.match(line)
        meaning = NO_DEVICE_ERRORS.get(cuda.group(1)) if cuda else None
        said.append("'%s'%s%s" % (line, " (%s)" % meaning if meaning else "",
                                  " %d times" % count if count > 1 else ""))
    return ", ".join(said)


def _own_words(name, run, parsed=None):
    """One tool's failure in its own words, for a reason: exit status, what it got to, its error lines."""
    text = (run.get("stdout") or "") + "\n" + (run.get("stderr") or "")
    words = _error_words(text) or "last lines: %s" % _tail(run.get("stderr") or run.get("stdout"), 2)
    if parsed is not None:
        got = " with %d of %d tests passed" % (parsed["passed"], parsed["total"])
    elif name == "gdrcopy_copybw":
        got = " before printing a bandwidth"
    else:
        got = " before its summary"
    return "%s exited %s%s: %s" % (name, run.get("rc"), got, words)


def _no_gpu(gpu_count):
    """True when the node's facts list no NVIDIA GPU (0), False with GPUs, None when unknown."""
    if gpu_count is None or gpu_count == "":
        return None
    return int(gpu_count) == 0


def judge(sanity=None, copybw=None, missing=None, gpu_count=None):
    """The gdrcopy check of one node, for the verification record.

    ``sanity`` / ``copybw`` are ``{"stdout", "stderr", "rc"}`` of each tool's run
    (``None``: not run); ``missing`` the reason they were not run (tools absent,
    check mode); ``gpu_count`` the NVIDIA GPUs the node's facts list (``None``:
    unknown). Returns ``{"name": "gdrcopy", "status": passed|failed|not_measured|skipped,
    "summary", "sanity", "copybw", "reason"}``, and ``fix`` when the check's own advice
    replaces the verdict's usual one.

    A failing ``gdrcopy_sanity`` fails the check; ``gdrcopy_copybw`` is reported, and
    fails the check only when it stopped before printing its bandwidths. On a node
    with no GPU (``gpu_count`` 0) a tool that failed makes the check
    ``not_measured`` ("GDRCopy not measured: ..."), with the tools' own error
    lines as the reason and no bandwidth; a tool that reports a result there fails
    the check, since there was no GPU to measure (the output is not this node's).
    On a node with GPUs, or an unknown count, a failure stays a failure.
    """
    check = {"name": "gdrcopy", "status": "skipped", "summary": "", "sanity": None, "copybw": None,
             "reason": missing or ""}
    if missing:
        check["summary"] = "gdrcopy: not run: %s" % missing
        return check
    problems, lines, failed_runs, passed_runs = [], [], [], []
    for name, key, parse, summarize in (("gdrcopy_sanity", "sanity", parse_sanity, sanity_summary),
                                        ("gdrcopy_copybw", "copybw", parse_copybw, copybw_summary)):
        run = (sanity if key == "sanity" else copybw)
        if run is None:
            continue
        text = (run.get("stdout") or "") + ("\n" + run["stderr"] if run.get("stderr") else "")
        try:
            parsed = parse(text, run.get("rc"))
        except GdrcopyOutputError as exc:
            problems.append(str(exc))
            lines.append(str(exc))
            failed_runs.append(_own_words(name, run))
            continue
        check[key] = parsed
        lines.append(summarize(parsed))
        if key == "sanity" and not parsed["ok"]:
            errors = _error_words(text)
            problems.append(summarize(parsed) + ("; its errors: %s" % errors if errors else ""))
            failed_runs.append(_own_words(name, run, parsed))
        else:
            passed_runs.append(name)
    if _no_gpu(gpu_count) and (failed_runs or passed_runs):
        check["copybw"] = None       # no GPU: no bandwidth of this node's can be there
        if passed_runs:
            check["sanity"] = None
            check["status"] = "failed"
            check["reason"] = ("%s reported a result on a node whose facts list no NVIDIA GPU: there was no GPU to "
                               "measure, so the output is not this node's" % " and ".join(passed_runs))
            check["summary"] = "GDRCopy result refused: %s" % check["reason"]
            check["fix"] = ("find where the GDRCopy tools on this node come from (dpkg -S or rpm -qf on the path that "
                            "ran): NVIDIA's gdrcopy_sanity and gdrcopy_copybw cannot pass without a GPU; set "
                            "gpudirect_verify_gdrcopy: false to leave GDRCopy out of the verdict")
            return check
        check["status"] = "not_measured"
        check["reason"] = "no NVIDIA GPU on this node (its facts list none); %s" % "; ".join(failed_runs)
        check["summary"] = "GDRCopy not measured: %s" % check["reason"]
        return check
    check["status"] = "failed" if problems else "passed"
    check["summary"] = "; ".join(lines)
    check["reason"] = "; ".join(problems)
    return check
