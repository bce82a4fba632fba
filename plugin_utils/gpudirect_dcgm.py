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

A test's status is one of Pass, Fail, Warn, Skip. The diagnostic fails on any Fail or
on a runtime error; Warn and Skip are reported and pass. A status not in that list
fails with its text (the parser does not guess what a new word means).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

STATUSES = ("Fail", "Warn", "Pass", "Skip")   # worst first
_CATEGORY = re.compile(r"^[|+]-{3,}\s+(.+?)\s+-{3,}\+")
_ROW = re.compile(r"^\|\s(.*?)\s*\|\s(.*?)\s*\|\s*$")
_ENTITY = re.compile(r"^([A-Za-z_]+\s*\d+):\s*(\S.*?)\s*$")


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
            summary = (test.get("test_summary") or {}).get("status")
            if summary is not None:
                status = normalise_status(summary)
            elif entities:
                status = _worst(e["status"] for e in entities)
            else:
                raise DcgmOutputError("dcgmi diag JSON: test %r has neither a test_summary nor results"
                                      % test["name"])
            out["tests"].append({"category": category.get("category"), "name": test["name"], "status": status,
                                 "entities": entities})
    return out


_TABLE_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
_RULE = re.compile(r"^\+-{10,}\+-{10,}\+$")          # header top and the closing line
# DCGM 2.x/3.x result cells: "Pass", "Fail - All", "Pass - GPUs: 0, 2, 3", "Fail - GPU: 1"
# (dcgmi/Diag.cpp HelperDisplayGpuResults); DCGM 4.x: "Pass"/"Fail"/"Warn"/"Skip"/"Not Run"
# for the test and "GPU0: Pass" rows per entity (HelperDisplayEntityResults)
_RESULT = re.compile(r"^(?P<word>[A-Za-z][A-Za-z ]*?)(?:\s+-\s+(?:(?P<all>All)|[A-Za-z]+s?:\s*(?P<ids>[\d ,]+?)))?\s*$")
_DETAIL = re.compile(r"^(?P<kind>Warning|Info)(?::\s*(?P<entity>[A-Za-z]+\d+))?$")
_V3_DETAIL_GPU = re.compile(r"^GPU (\d+) ")
_CELL_WIDTH = 45   # DATA_INFO_TAG_LEN: a detail is cut into 45-character pieces, one per row


def _status_word(word, cell):
    if word == "Not Run":   # DCGM 4: the test did not run on that entity
        return "Skip"
    try:
        return normalise_status(word)
    except DcgmOutputError:
        raise DcgmOutputError("dcgmi diag table: the result cell %r does not start with one of %s; read the "
                              "report of 'dcgmi diag' on the node" % (cell, "/".join(STATUSES)))


def parse_table(text):
    """The rows of a ``dcgmi diag`` text table, without judging whether it is whole.

    Returns the parsed dict of :func:`parse_diag` plus ``complete`` (the table's closing
    line was read after its header). Warning and Info rows (DCGM 2.x/3.x ``| Warning | GPU 0
    ... |``, DCGM 4.x ``| Warning: GPU0 | ... |``) and their continuation rows become the
    last test's ``details`` (``{"kind", "entity", "text"}``) and the entity's ``warnings``.
    """
    out = {"format": "text", "dcgm_version": None, "driver_version": None, "runtime_error": None, "tests": [],
           "complete": False}
    category, header, detail = None, False, None
    for line in (text or "").splitlines():
        line = line.rstrip()
        if not line.strip():
            continue
        head = _CATEGORY.match(line)
        if head:
            category, detail = head.group(1), None
            continue
        if _RULE.match(line):
            if header and (out["tests"] or category):
                out["complete"] = True
            continue
        row = _TABLE_ROW.match(line)
        if not row:
            continue
        name = row.group("name").strip()
        raw = row.group("value")
        raw = raw[1:] if raw.startswith(" ") else raw
        value = raw.strip()
        if name.startswith("===") or (name == "Diagnostic" and value == "Result"):
            header = True
            continue
        if out["complete"]:
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
            if not result:
                raise DcgmOutputError("dcgmi diag table: test %r has the result %r, which is none of %s"
                                      % (name, value, "/".join(STATUSES)))
            status = _status_word(result.group("word"), value)
            test = {"category": category, "name": name, "status": status, "entities": []}
            for gpu in (result.group("ids") or "").replace(" ", "").split(","):
                if gpu:
                    test["entities"].append({"entity": "GPU" + gpu, "status": status, "warnings": []})
            tests.append(test)
            detail = None
            continue
        if not tests:
            raise DcgmOutputError("dcgmi diag table: a result row before any test: %r" % line)
        entity = _ENTITY.match(value)
        result = _RESULT.match(value) if detail is None else None
        if entity:                                      # DCGM 4: "GPU0: Pass"
            status = _status_word(entity.group(2), value)
            tests[-1]["entities"].append({"entity": entity.group(1).replace(" ", ""), "status": status,
                                          "warnings": []})
            detail = None
        elif result and (result.group("ids") or result.group("all")):   # DCGM 3: "Fail - GPU: 1"
            status = _status_word(result.group("word"), value)
            for gpu in (result.group("ids") or "").replace(" ", "").split(","):
                if gpu:
                    tests[-1]["entities"].append({"entity": "GPU" + gpu, "status": status, "warnings": []})
        elif detail is not None:                         # the next 45 characters of a detail
            piece = raw.rstrip()
            # a piece shorter than the cell lost its trailing blanks to the table's padding
            detail["text"] += (" " if detail.pop("_piece", _CELL_WIDTH) < _CELL_WIDTH else "") + piece
            detail["_piece"] = len(piece)
        else:
            raise DcgmOutputError("dcgmi diag table: %r under test %r is neither a per-GPU result nor the "
                                  "continuation of a warning" % (value, tests[-1]["name"]))
    for test in out["tests"]:
        if test["entities"]:
            test["status"] = _worst([test["status"]] + [e["status"] for e in test["entities"]])
        for item in test.get("details", []):
            item.pop("_piece", None)
            item["text"] = re.sub(r"\s+", " ", item["text"]).strip()
            if item["kind"] == "warning":
                for ent in test["entities"]:
                    if ent["entity"] == item["entity"]:
                        ent["warnings"].append(item["text"])
    return out


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
        first = [d["text"] for d in test.get("details", []) if d["kind"] == "warning"][:1] or \
            [w for e in test["entities"] for w in e["warnings"]][:1]
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
