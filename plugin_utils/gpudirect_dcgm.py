# -*- coding: utf-8 -*-
"""Read ``dcgmi diag -r N`` (DCGM's active diagnostic) and judge it, test by test.

Three shapes are read, each tested on the fixtures in ``tests/fixtures/dcgm/``:

* JSON of DCGM 4.x (``dcgmi diag -r N -j``): ``{"DCGM Diagnostic": {"test_categories":
  [{"category", "tests": [{"name", "results": [{"entity_group", "entity_id",
  "status", "warnings"}], "test_summary": {"status"}}]}], "runtime_error"},
  "metadata": {"version", "Driver Version Detected"}}`` (NVIDIA/DCGM
  ``testing/python3/dcgm_diag_schema.json`` and ``nvvs/include/NvvsJsonStrings.h``).
* JSON of DCGM 3.x: the top key is ``"DCGM GPU Diagnostic"`` and a test has only
  ``results`` (one per GPU or per GPU list, ``"status"`` sometimes upper case,
  ``"PASS"``): the test's status is the worst of them. DCGM 4 renamed the key
  (DCGM release notes, "breaking changes"; facebookresearch/gcm#38).
* The text table (``dcgmi diag -r N`` without ``-j``): ``| name | Pass |`` rows under
  ``-----  Category  ---`` headers. DCGM 2.x/3.x write ``Pass - All``, ``Pass - GPUs: 0, 2``
  and ``Fail - GPU: 1`` rows and ``| Warning | GPU 1 ... |`` / ``| Info | ... |`` rows whose
  message continues, 45 characters a row, on the rows below; DCGM 4.x adds ``| | GPU0: Pass |``
  rows per entity and ``| Warning: GPU0 | ... |`` rows (NVIDIA/DCGM ``dcgmi/Diag.cpp``). A table
  must end with its closing ``+---...---+`` line: a cut-short table is an error, never a pass.

Every layout ``dcgmi/Diag.cpp`` prints, 2.x to 4.6, is read (tests/fixtures/dcgm/README.md):
``Error`` rows of a 2.x/3.x Deployment test, the ``Code: (...)`` row of a 2.x/3.x Diagnostic
``Warn - All``, a GPU list dcgmi cut to ``...``, a test or entity not run (``Not Run``, or an
empty cell in DCGM 4.0 to 4.4), continuation rows whose text looks like a result, one table per
run of ``--iterations`` and its ``Aborting ...`` line; in JSON a DCGM 4 test written as its name
alone (not run), ``test_summary`` warnings, and the ``iterations`` document.

A test's status is one of Pass, Fail, Warn, Skip (Not Run is Skip). The diagnostic fails on
any Fail or on a runtime error; Warn and Skip are reported and pass. A status not in that list
fails with its text (the parser does not guess what a new word means).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

STATUSES = ("Fail", "Warn", "Pass", "Skip")   # worst first
_CATEGORY = re.compile(r"^[|+]-{3,}\s+(.+?)\s+-{3,}\+")
_ROW = re.compile(r"^\|\s(.*?)\s*\|\s(.*?)\s*\|\s*$")


class DcgmOutputError(ValueError):
    """The output is not a diagnostic result the parser knows."""


def _tail(text, lines=5):
    rest = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(rest[-lines:]) if rest else "(no output)"


def normalise_status(word):
    """``PASS``/``pass``/``Pass`` -> ``Pass``; anything else raises DcgmOutputError."""
    text = str(word or "").strip()
    for status in STATUSES:
        if text.lower() == status.lower():
            return status
    raise DcgmOutputError("dcgmi diag reported the status %r, which is none of %s; read the report of "
                          "'dcgmi diag' on the node" % (text, "/".join(STATUSES)))


def _worst(statuses):
    statuses = list(statuses)
    for status in STATUSES:
        if status in statuses:
            return status
    return "Skip"


def _json_doc(text):
    start = (text or "").find("{")
    if start < 0:
        return None
    try:
        doc = json.loads(text[start:])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _from_json(doc):
    if "DCGM Diagnostic" in doc:
        body, fmt = doc["DCGM Diagnostic"], "json-v4"
    elif "DCGM GPU Diagnostic" in doc:
        body, fmt = doc["DCGM GPU Diagnostic"], "json-v3"
    else:
        raise DcgmOutputError("dcgmi diag JSON has neither 'DCGM Diagnostic' (DCGM 4) nor 'DCGM GPU Diagnostic' "
                              "(DCGM 3) at its top; keys: %s" % ", ".join(sorted(doc)))
    if not isinstance(body, dict):
        raise DcgmOutputError("dcgmi diag JSON: the diagnostic is not an object: %r" % (body,))
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    # DCGM 3 puts the NVVS result format's version ("1.7") in the body, not DCGM's
    out = {"format": fmt, "dcgm_version": metadata.get("version"),
           "driver_version": metadata.get("Driver Version Detected"),
           "runtime_error": body.get("runtime_error") or None, "tests": []}
    for category in body.get("test_categories") or []:
        for test in category.get("tests") or []:
            if not isinstance(test, dict) or "name" not in test:
                raise DcgmOutputError("dcgmi diag JSON: a test without a name in category %r"
                                      % category.get("category"))
            entities = []
            for result in test.get("results") or []:
                if "entity_id" in result:
                    who = "%s%s" % (result.get("entity_group") or "GPU", result["entity_id"])
                elif "gpu_ids" in result or "gpu_id" in result:
                    who = "GPU" + str(result.get("gpu_ids", result.get("gpu_id"))).replace(" ", "")
                else:   # one result for the test, no entity named
                    who = None
                entities.append({"entity": who, "status": normalise_status(result.get("status")),
                                 "warnings": [w.get("warning") for w in result.get("warnings") or []
                                              if isinstance(w, dict) and w.get("warning")]})
            summary = test.get("test_summary") or {}
            entry = {"category": category.get("category"), "name": test["name"], "entities": entities}
            if summary.get("status") is not None:
                word = summary["status"]
                entry["status"] = "Skip" if str(word).strip().lower() == "not run" else normalise_status(word)
            elif entities:
                entry["status"] = _worst(e["status"] for e in entities)
            elif fmt == "json-v4":
                # DCGM 4 writes a test it did not run as its name alone: HelperJsonAddResult leaves out
                # results and the test_summary of DCGM_DIAG_RESULT_NOT_RUN (dcgmi/Diag.cpp, 4.0 to 4.6)
                entry["status"], entry["not_run"] = "Skip", True
            else:
                raise DcgmOutputError("dcgmi diag JSON: test %r has neither a test_summary nor results"
                                      % test["name"])
            # DCGM 4: errors of no entity are the test_summary's warnings ("Warning" rows of the table)
            details = [{"kind": "warning", "entity": None, "text": w["warning"]}
                       for w in summary.get("warnings") or [] if isinstance(w, dict) and w.get("warning")]
            if details:
                entry["details"] = details
            out["tests"].append(entry)
    return out


def _from_json_iterations(doc):
    """``dcgmi diag --iterations N -j``: ``{"iterations": [one run's document, ...], "Overall Result":
    "Pass"|"Fail", "warning": why it stopped}`` (dcgmi/Diag.cpp RunStartDiag; NvvsJsonStrings.h)."""
    runs = doc.get("iterations")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise DcgmOutputError("dcgmi diag JSON: 'iterations' is not a list of runs: %r" % (runs,))
    out = None
    for number, run in enumerate(runs, start=1):
        parsed = _from_json(run)
        for test in parsed["tests"]:
            test["iteration"] = number
        if out is None:
            out = parsed
            continue
        out["tests"] += parsed["tests"]
        out["runtime_error"] = out["runtime_error"] or parsed["runtime_error"]
    overall = doc.get("Overall Result")
    if overall is not None and _status_word(overall, overall) == "Fail" and not out["runtime_error"] \
            and not any(t["status"] == "Fail" for t in out["tests"]):
        out["runtime_error"] = "the iterative runs stopped: %s" % (doc.get("warning") or "Overall Result Fail")
    out["iterations"] = len(runs)
    return out


_TABLE_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
_RULE = re.compile(r"^\+-{10,}\+-{10,}\+$")          # header top and the closing line
# DCGM 2.x/3.x result cells: "Pass", "Fail - All", "Pass - GPUs: 0, 2, 3", "Fail - GPU: 1"
# (dcgmi/Diag.cpp HelperDisplayGpuResults); DCGM 4.x: "Pass"/"Fail"/"Warn"/"Skip" for the test
# and "GPU0: Pass" rows per entity (HelperDisplayEntityResults), a test or entity that did not run
# printed as "" by 4.0 to 4.4 and as "Not Run" from 4.5 (HelperDisplayDiagResult). A cell longer
# than its 46 columns is cut by dcgmi itself to 43 characters and "..." (CommandOutputController::
# ReplaceTag): a long GPU list of 2.x/3.x ends so.
_RESULT = re.compile(r"^(?P<word>[A-Za-z][A-Za-z ]*?)(?:\s+-\s+(?:(?P<all>All)|[A-Za-z]+s?:\s*"
                     r"(?P<ids>[\d ,]*?)(?P<cut>\.\.\.)?))?\s*$")
_ENTITY = re.compile(r"^(?P<entity>[A-Za-z_]+)(?P<id>\d+):(?:\s+(?P<word>\S.*?))?\s*$")
# DcgmFieldsGetEntityGroupString (dcgmlib/src/dcgm_fields.cpp)
ENTITY_GROUPS = ("GPU", "vGPU", "Switch", "GPU_I", "GPU_CI", "LINK", "CPU", "CPU_CORE", "ConnectX", "None")
# "Warning"/"Info" (every version), "Warning: GPU1"/"Info: GPU1" (4.x, per entity) and "Error"
# (2.x/3.x, a Deployment test's errors: HelperDisplayDeploymentResult)
_DETAIL = re.compile(r"^(?P<kind>Warning|Info|Error)(?::\s*(?P<entity>[A-Za-z_]+\d+))?$")
_V3_DETAIL_GPU = re.compile(r"^GPU (\d+) ")
_CODE = re.compile(r"^Code: \((?P<code>\d+)\)$")   # 2.x/3.x: Diagnostic "Warn - All", then its return code
_ITERATION = re.compile(r"^Running iteration (?P<n>\d+) of (?P<of>\d+)\.\.\.$")
_ABORTED = re.compile(r"^Aborting the iterative runs of the diagnostic due to failure: (?P<why>.*)$")
_CELL_WIDTH = 45   # DATA_INFO_TAG_LEN: a detail is cut into 45-character pieces, one per row


def _status_word(word, cell):
    """A result word of the table or the JSON -> one of STATUSES; a test or entity DCGM did not run
    ("Not Run", or "" in DCGM 4.0 to 4.4) is Skip. Anything else raises, quoting ``cell``."""
    text = str(word if word is not None else "").strip()
    if text.lower() in ("not run", ""):
        return "Skip"
    try:
        return normalise_status(text)
    except DcgmOutputError:
        raise DcgmOutputError("dcgmi diag: the result %r is none of %s (nor Not Run); read the report of "
                              "'dcgmi diag' on the node" % (cell, "/".join(STATUSES)))


def _entity_row(value):
    """``(entity, status)`` of a DCGM 4 per-entity row ("GPU0: Pass", "GPU3: " for not run), or None
    when ``value`` is not one: the group must be one DCGM prints and the word a result word."""
    match = _ENTITY.match(value)
    if not match or match.group("entity") not in ENTITY_GROUPS:
        return None
    word = match.group("word") or ""
    if word.lower() not in [w.lower() for w in STATUSES] + ["not run", ""]:
        return None
    return match.group("entity") + match.group("id"), _status_word(word, value)


def parse_table(text):
    """The rows of a ``dcgmi diag`` text table, without judging whether it is whole.

    Returns the parsed dict of :func:`parse_diag` plus ``complete`` (every table's closing line
    was read after its header). Warning, Info and Error rows (DCGM 2.x/3.x ``| Warning | GPU 0
    ... |``, ``| Error | ... |``, DCGM 4.x ``| Warning: GPU0 | ... |``) and their continuation
    rows become the last test's ``details`` (``{"kind", "entity", "text"}``) and the entity's
    ``warnings``; a continuation row is read as such even where its 45 characters happen to look
    like a result ("Link 3: ..."): only a row naming a DCGM entity group and a result word is
    one. ``dcgmi diag --iterations N`` prints one table per run: their tests carry ``iteration``.
    """
    out = {"format": "text", "dcgm_version": None, "driver_version": None, "runtime_error": None, "tests": [],
           "complete": False}
    category, header, detail, iteration, tables, closed = None, False, None, None, 0, 0
    for line in (text or "").splitlines():
        line = line.rstrip()
        if not line.strip():
            continue
        head = _CATEGORY.match(line)
        if head:
            category, detail = head.group(1), None
            continue
        if _RULE.match(line):
            if header and (out["tests"] or category) and closed < tables:
                closed = tables
                header, category, detail = False, None, None
            continue
        stripped = line.strip()
        run = _ITERATION.match(stripped)
        if run or stripped == "Successfully ran diagnostic for group.":
            if closed < tables:   # the last table's closing line never came
                raise DcgmOutputError("dcgmi diag table: a new table starts before the last one closed: %r" % line)
            if run:
                iteration = int(run.group("n"))
            continue
        aborted = _ABORTED.match(stripped)
        if aborted:
            out["runtime_error"] = "the iterative runs stopped: %s" % aborted.group("why")
            continue
        row = _TABLE_ROW.match(line)
        if not row:
            continue
        name = row.group("name").strip()
        raw = row.group("value")
        raw = raw[1:] if raw.startswith(" ") else raw
        value = raw.strip()
        if name.startswith("===") or (name == "Diagnostic" and value == "Result"):
            if not header:
                if closed < tables:
                    raise DcgmOutputError("dcgmi diag table: a new table starts before the last one closed: %r"
                                          % line)
                tables += 1
            header = True
            continue
        if closed == tables and tables:
            raise DcgmOutputError("dcgmi diag table has rows after its closing line: %r" % line)
        if category == "Metadata":
            if name == "DCGM Version":
                out["dcgm_version"] = value
            elif name == "Driver Version Detected":
                out["driver_version"] = value
            continue
        tests = out["tests"]
        kind = _DETAIL.match(name)
        if kind:
            if not tests:
                raise DcgmOutputError("dcgmi diag table: a %s row before any test: %r" % (name, line))
            entity = kind.group("entity")
            text_ = raw.rstrip()
            if entity is None:
                gpu = _V3_DETAIL_GPU.match(text_)
                entity = "GPU%s" % gpu.group(1) if gpu else None
            detail = {"kind": kind.group("kind").lower(), "entity": entity, "text": text_, "_piece": len(text_)}
            tests[-1].setdefault("details", []).append(detail)
            continue
        if name:
            result = _RESULT.match(value)
            if value and not result:
                raise DcgmOutputError("dcgmi diag table: test %r has the result %r, which is none of %s"
                                      % (name, value, "/".join(STATUSES)))
            status = _status_word(result.group("word") if value else "", value)
            test = {"category": category, "name": name, "status": status, "entities": []}
            if not value:
                test["not_run"] = True           # DCGM 4.0 to 4.4 print a test not run as ""
            if iteration is not None:
                test["iteration"] = iteration
            _add_gpu_list(test, result, status, value)
            tests.append(test)
            detail = None
            continue
        if not tests:
            raise DcgmOutputError("dcgmi diag table: a result row before any test: %r" % line)
        code = _CODE.match(value)
        entity = _entity_row(value)
        result = _RESULT.match(value) if detail is None else None
        if code and tests[-1]["name"] == "Diagnostic":
            tests[-1].setdefault("details", []).append({"kind": "code", "entity": None, "text": value})
            detail = None
        elif entity:                                     # DCGM 4: "GPU0: Pass"
            tests[-1]["entities"].append({"entity": entity[0], "status": entity[1], "warnings": []})
            detail = None
        elif result and (result.group("ids") or result.group("all")):   # DCGM 3: "Fail - GPU: 1"
            _add_gpu_list(tests[-1], result, _status_word(result.group("word"), value), value)
        elif detail is not None:                         # the next 45 characters of a detail
            piece = raw.rstrip()
            # a piece shorter than the cell lost its trailing blanks to the table's padding
            detail["text"] += (" " if detail.pop("_piece", _CELL_WIDTH) < _CELL_WIDTH else "") + piece
            detail["_piece"] = len(piece)
        elif _ENTITY.match(value) and _ENTITY.match(value).group("entity") in ENTITY_GROUPS:
            _status_word(_ENTITY.match(value).group("word"), value)   # raises, naming the cell
        else:
            raise DcgmOutputError("dcgmi diag table: %r under test %r is neither a per-GPU result nor the "
                                  "continuation of a warning" % (value, tests[-1]["name"]))
    out["complete"] = bool(tables) and closed == tables
    for test in out["tests"]:
        if test["entities"]:
            test["status"] = _worst([test["status"]] + [e["status"] for e in test["entities"]])
        for item in test.get("details", []):
            item.pop("_piece", None)
            item["text"] = re.sub(r"\s+", " ", item["text"]).strip()
            if item["kind"] in ("warning", "error"):
                for ent in test["entities"]:
                    if ent["entity"] == item["entity"]:
                        ent["warnings"].append(item["text"])
    return out


def _add_gpu_list(test, result, status, cell):
    """The GPUs of a 2.x/3.x result cell ("Fail - GPUs: 0, 2") as the test's entities; a list dcgmi
    cut short ("... 1...") keeps the GPUs it shows whole and is noted in the test's ``cut``."""
    if not result:
        return
    ids = [gpu for gpu in (result.group("ids") or "").replace(" ", "").split(",") if gpu]
    if result.group("cut"):
        if (result.group("ids") or "")[-1:].isdigit():   # "... 9, 1...": the last number may be cut too
            ids = ids[:-1]
        test.setdefault("cut", []).append(cell)
    for gpu in ids:
        test["entities"].append({"entity": "GPU" + gpu, "status": status, "warnings": []})


def _from_text(text):
    parsed = parse_table(text)
    if parsed["tests"] and not parsed["complete"]:
        raise DcgmOutputError("dcgmi diag table ends before its closing line (the output was cut short?); "
                              "last test read: %r. Last lines: %s" % (parsed["tests"][-1]["name"], _tail(text)))
    return parsed


def parse_diag(text, rc=0):
    """Every test of one ``dcgmi diag`` run, its status, and counts per status.

    Returns ``{"format", "dcgm_version", "driver_version", "runtime_error", "tests",
    "counts", "rc", "ok"}``; ``ok`` is false on any Fail or a runtime error. Raises
    DcgmOutputError on output that is neither the JSON nor the table (dcgmi could not
    reach the host engine, an unknown option), with its last lines.
    """
    doc = _json_doc(text)
    if doc is not None and "iterations" in doc:
        parsed = _from_json_iterations(doc)
    else:
        parsed = _from_json(doc) if doc is not None else _from_text(text)
    if not parsed["tests"] and not parsed["runtime_error"]:
        raise DcgmOutputError("dcgmi diag printed no test result (exit status %s). Last lines: %s"
                              % (rc, _tail(text)))
    counts = dict((s, 0) for s in STATUSES)
    for test in parsed["tests"]:
        counts[test["status"]] += 1
    parsed["counts"] = counts
    parsed["rc"] = int(rc) if rc is not None else None
    parsed["ok"] = counts["Fail"] == 0 and not parsed["runtime_error"]
    return parsed


def diag_summary(parsed, level=None):
    """One line for the report: the counts, then each test that did not pass."""
    counts = parsed["counts"]
    line = "dcgmi diag%s: %s" % (" -r %s" % level if level is not None else "",
                                 ", ".join("%d %s" % (counts[s], s) for s in ("Pass", "Fail", "Warn", "Skip")))
    if parsed.get("dcgm_version"):
        line += " (DCGM %s)" % parsed["dcgm_version"]
    bad = []
    for test in parsed["tests"]:
        if test["status"] not in ("Fail", "Warn"):
            continue
        who = [e["entity"] for e in test["entities"] if e["status"] == test["status"] and e["entity"]]
        first = [d["text"] for d in test.get("details", []) if d["kind"] in ("warning", "error")][:1] or \
            [w for e in test["entities"] for w in e["warnings"]][:1]
        if test.get("cut") and who:
            who.append("... (dcgmi cut the GPU list short)")
        bad.append("%s %s%s%s" % (test["name"], test["status"], " [%s]" % ", ".join(who) if who else "",
                                  ": %s" % first[0][:200] if first else ""))
    if bad:
        line += "; " + "; ".join(bad)
    if parsed.get("runtime_error"):
        line += "; runtime error: %s" % parsed["runtime_error"]
    return line


def judge(run=None, level=None, missing=None):
    """The DCGM check of one node for the verification record.

    ``run`` is ``{"stdout", "stderr", "rc"}`` of ``dcgmi diag -r <level> -j``;
    ``missing`` the reason it was not run. Returns ``{"name": "dcgm", "status":
    passed|failed|skipped, "level", "summary", "reason", "tests"}``.
    """
    check = {"name": "dcgm", "status": "skipped", "level": level, "summary": "", "reason": missing or "",
             "tests": [], "diag": None}
    if missing:
        check["summary"] = "dcgm: not run: %s" % missing
        return check
    run = run or {}
    text = run.get("stdout") or ""
    if not text.strip():
        text = run.get("stderr") or ""
    try:
        parsed = parse_diag(text, run.get("rc"))
    except DcgmOutputError as exc:
        check.update(status="failed", summary="dcgmi diag -r %s: %s" % (level, exc),
                     reason="dcgmi diag -r %s did not give a result: %s" % (level, exc))
        return check
    check["diag"] = {k: parsed[k] for k in ("format", "dcgm_version", "driver_version", "runtime_error",
                                            "counts", "rc")}
    check["tests"] = parsed["tests"]
    check["summary"] = diag_summary(parsed, level)
    check["status"] = "passed" if parsed["ok"] else "failed"
    if not parsed["ok"]:
        check["reason"] = check["summary"]
    return check
