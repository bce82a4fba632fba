"""Judge, record and render the results of ``library/gpudirect_loopback.py``.

Pure functions used by the ``gpudirect_verify`` role:

* ``gpudirect_verify_verdict`` is the one judging step: from everything the run measured
  on the host (the loopback results or a reason to skip, the topology notes, the
  cross-checks, the ring edges between nodes, the GDRCopy/DCGM/signing/NVLink/in-service
  checks) it builds the host's flat record, whose ``status`` is the verdict the role
  publishes (``gpudirect_verify_status``) and fails the host on. This is what lands in
  ``<report_dir>/<host>.json``. Its steps, in order, are the Python functions below:
  ``gpudirect_verify_record`` (the loopback's pairs: status, pair, bytes compared,
  bandwidth, ratios, diagnosis), ``merge_into_record`` (module_utils/gpudirect_crosscheck.py),
  ``gpudirect_verify_fabric`` (the ring) and ``add_checks``; each may only make a passing
  host fail, never the reverse.
* ``gpudirect_verify_report_md`` renders one record as a Markdown page.
* ``gpudirect_verify_fleet_table`` renders the records of every host as one
  fixed-width table (a list of lines) for the end of the run.

A host passes only on positive evidence: the module reported no diagnosis, compared
more than zero bytes and found no mismatch, for every pair tested. On a node with
GPUs, only GPU memory written by the NIC counts: a run that fell back to host memory
(mode ``auto`` without dma-buf or a peer-memory module) is ``not_proven``, which
fails the host like ``failed``; host memory passes where it was asked for
(``gpudirect_verify_mode: host``, labelled "host memory only (requested)") or where
the node has no GPU at all ("no GPU: RDMA path proven with host memory").

``gpudirect_verify_pairs`` plans the GPU/NIC pairs of ``gpudirect_verify_coverage``
(``plugin_utils/gpudirect_coverage.py``); the role runs the module once per pair and
registers the loop, whose ``results`` the record judges one by one. The role registers the module with
``failed_when: false`` (so that the report is written before the host fails), which
hides the module's own ``failed`` flag; the judgment therefore never relies on it.
"""

import os

from ansible.errors import AnsibleFilterError


import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_coverage as _coverage  # noqa: E402
from ansible.module_utils import gpudirect_crosscheck as _xc  # noqa: E402
from ansible.module_utils import gpudirect_nvlink as _nvlink  # noqa: E402
from ansible.module_utils import gpudirect_secure_boot as _secure_boot  # noqa: E402
from ansible.module_utils import gpudirect_crosscheck as _crosscheck  # noqa: E402
from ansible.module_utils import gpudirect_loopback_packages as _packages  # noqa: E402
from ansible.module_utils import gpudirect_ring as _ring  # noqa: E402
from ansible.module_utils import gpudirect_table as _table  # noqa: E402
from ansible.module_utils import gpudirect_topology as _topology  # noqa: E402
from ansible.module_utils import gpudirect_topo_matrix as _matrix  # noqa: E402

# one name per line: ansible-doc warns on a tuple assignment in a filter plugin's file
PASSED = "passed"
FAILED = "failed"
NOT_PROVEN = "not_proven"
SKIPPED = "skipped"
WOULD_RUN = "would_run"
WOULD_FAIL = "would_fail"
NOT_RUN = "not_run"
# The statuses that fail the host (the role's last task).
FAILING = (FAILED, NOT_PROVEN)

# How each status reads in the tables.
STATUS_TEXT = {
    PASSED: "passed",
    FAILED: "FAILED",
    NOT_PROVEN: "NOT PROVEN",
    SKIPPED: "skipped",
    WOULD_RUN: "check: would run",
    WOULD_FAIL: "check: would FAIL",
    NOT_RUN: "not run",
}

# Module result fields copied into the record as they are.
COPIED = ("mode", "mode_reason", "rdma_device", "port", "gid_index", "gpu", "gpu_name", "link_layer",
          "bytes_compared", "mismatches", "first_mismatch", "bandwidth_gbps", "port_rate_gbps", "ratio_port",
          "pcie_gbps", "ratio_pcie", "staged_bandwidth_gbps", "speedup", "elapsed_s", "helper_built")

GPU_MODES = ("cuda_peermem", "cuda_dmabuf")


def _diagnosis(code, message, fix="", related=None):
    return {"code": code, "message": message, "fix": fix, "related": list(related or [])}


def _normalise_diagnosis(diagnosis, result):
    """The module's {code, message, fix, related}, with whatever is missing filled in."""
    if not isinstance(diagnosis, dict):
        diagnosis = {}
    return _diagnosis(
        diagnosis.get("code") or "unknown",
        diagnosis.get("message") or result.get("msg") or "gpudirect_loopback failed without a message.",
        diagnosis.get("fix") or "",
        diagnosis.get("related") or [])


def _judge(result, check_mode):
    """(status, diagnosis or None) for one registered module result."""
    if not isinstance(result, dict) or not result:
        return (WOULD_FAIL if check_mode else FAILED), _diagnosis(
            "no_result", "gpudirect_loopback returned no result.",
            "Run the role with -vvv and look at the gpudirect_loopback task.")
    if result.get("skipped"):
        return SKIPPED, _diagnosis("task_skipped", result.get("skip_reason") or "the loopback task was skipped.")
    if result.get("diagnosis"):
        return (WOULD_FAIL if check_mode else FAILED), _normalise_diagnosis(result["diagnosis"], result)
    # failed_when hides "failed" but leaves failed_when_suppressed_exception behind
    if result.get("failed") or result.get("unreachable") or "failed_when_suppressed_exception" in result \
            or ("msg" in result and "would_run" not in result and "bytes_compared" not in result):
        # a failure the module did not diagnose: bad arguments, a crash, a lost connection
        return (WOULD_FAIL if check_mode else FAILED), _diagnosis(
            "module_error", result.get("msg") or "gpudirect_loopback failed without a diagnosis or a message.",
            "This is not a finding about the node's data path: read the message (and the module's "
            "exception, with -vvv) and fix the cause, then run again.")
    if check_mode:
        return WOULD_RUN, None
    compared = result.get("bytes_compared")
    mismatches = result.get("mismatches")
    if not isinstance(compared, int) or isinstance(compared, bool) or compared <= 0 \
            or not isinstance(mismatches, int) or isinstance(mismatches, bool):
        return FAILED, _diagnosis(
            "result_malformed",
            "gpudirect_loopback reported success without the evidence (bytes_compared=%r, mismatches=%r)."
            % (compared, mismatches),
            "The module and its helper disagree: run again with -vvv and report the module result.")
    if mismatches:
        return FAILED, _diagnosis(
            "data_mismatch", "%d of %d bytes differ from what was sent (first at offset %s)."
            % (mismatches, compared, result.get("first_mismatch")),
            "Data was corrupted on the path: check PCIe AER errors (dmesg), the NIC firmware and ACS/IOMMU "
            "settings on the path.")
    return PASSED, None


def _clean_result(result):
    """The module result without the facts it was given and Ansible's internal keys."""
    if not isinstance(result, dict):
        return result
    clean = dict((k, v) for k, v in result.items() if not k.startswith("_ansible") and k != "invocation")
    args = ((result.get("invocation") or {}).get("module_args") or {})
    if args:
        clean["module_args"] = dict((k, v) for k, v in args.items() if k != "facts")
    return clean


def gpudirect_verify_pair(record):
    """'mlx5_0 port 1 <-> GPU 0000:1b:00.0 (PIX)', 'rxe0 port 1 <-> host memory', or
    'no RDMA device <-> GPU 0000:1b:00.0' (no NIC to run with: the module failed no_rdma_device)."""
    record = record or {}
    dev = record.get("rdma_device")
    if not dev:
        # a GPU the module was run for without a NIC (a node with no RDMA device): say which
        return "no RDMA device <-> GPU %s" % record["gpu"] if record.get("gpu") else "-"
    left = "%s port %s" % (dev, record.get("port") if record.get("port") is not None else "?")
    if record.get("mode") in GPU_MODES or record.get("gpu"):
        right = "GPU %s" % (record.get("gpu") or "?")
        if record.get("distance"):
            right += " (%s)" % record["distance"]
    elif record.get("mode") == "host":
        right = "host memory"
    else:
        right = "?"
    return "%s <-> %s" % (left, right)


NO_GPU_REASON = "auto: no GPU"


def memory_label(mode, mode_reason, gpu_count=None):
    """What the NIC wrote into, as the reports say it."""
    if mode == "cuda_dmabuf":
        return "GPU memory (dma-buf)"
    if mode == "cuda_peermem":
        return "GPU memory (peer-memory module)"
    if mode != "host":
        return None
    if mode_reason == NO_GPU_REASON or (gpu_count == 0 and mode_reason == "requested"):
        return "no GPU: RDMA path proven with host memory"
    if mode_reason == "requested":
        return "host memory only (requested)"
    return "host memory (GPU memory not tested)"


def _not_proven(mode_reason, gpu_count):
    return _diagnosis(
        NOT_PROVEN,
        "GPU memory was not tested: mode auto fell back to host memory (%s) on a node with %s; the RDMA "
        "path works with host memory, but GPUDirect RDMA is not proven." % (
            mode_reason, "GPUs" if gpu_count is None else "%d GPU%s" % (gpu_count, "" if gpu_count == 1 else "s")),
        "Make a GPU memory path usable, then run playbooks/verify.yml: the open NVIDIA kernel module on a "
        "kernel >= 5.12 (dma-buf), or nvidia_peermem loaded (the gpudirect_peermem stage). To accept host "
        "memory only on this node, set gpudirect_verify_mode: host (the report then says 'host memory only "
        "(requested)').")


def _pair_record(result, check_mode, gpu_count):
    """One tested pair: the module's figures and this pair's verdict."""
    rec = dict((key, None) for key in COPIED)
    rec.update(distance=None, selection_reason=None, rdma_pci_address=None, would_run=None, module_result=None,
               path_warnings=[], memory=None)
    status, diagnosis = _judge(result, check_mode)
    if isinstance(result, dict):
        for key in COPIED:
            rec[key] = result.get(key)
        selection = result.get("selection") if isinstance(result.get("selection"), dict) else {}
        rec["distance"] = selection.get("distance")
        rec["selection_reason"] = selection.get("reason")
        rec["rdma_pci_address"] = selection.get("rdma_pci_address")
        rec["path_warnings"] = list(result.get("path_warnings") or [])
        rec["would_run"] = result.get("would_run")
        rec["module_result"] = _clean_result(result)
        rec["memory"] = memory_label(rec["mode"], rec["mode_reason"], gpu_count)
        if rec["distance"] is None and isinstance(result.get("item"), dict):
            rec["distance"] = result["item"].get("distance")   # the planned pair's class
        reason = rec["mode_reason"] or ""
        fell_back = reason.startswith("auto") or (bool(gpu_count) and reason != "requested")
        if rec["mode"] == "host" and fell_back and reason != NO_GPU_REASON and status in (PASSED, WOULD_RUN):
            status, diagnosis = (WOULD_FAIL if check_mode else NOT_PROVEN), _not_proven(rec["mode_reason"], gpu_count)
    rec["status"], rec["diagnosis"] = status, diagnosis
    rec["result"] = STATUS_TEXT[status]
    rec["pair"] = gpudirect_verify_pair(rec)
    return rec


# Which pair's verdict speaks for the host: the worst, in this order.
_WORST_FIRST = (FAILED, WOULD_FAIL, NOT_PROVEN, SKIPPED, WOULD_RUN, PASSED)


def gpudirect_verify_record(result=None, host="", skip=None, check_mode=False, time=None, gpu_count=None,
                            coverage=None):
    """One host's verification record.

    ``result`` is the registered ``gpudirect_loopback`` result, or the registered loop
    over the planned pairs (``{"results": [...]}``); ``skip`` a ``{"code": ...,
    "message": ...}`` reason not to run (then ``result`` is ignored); ``check_mode``
    whether the run was ``--check``; ``time`` when it ran (text); ``gpu_count`` the GPUs
    the facts list (labels host memory on a node without GPU); ``coverage`` the knob.

    ``pairs`` holds every tested pair with its own verdict; the host passes only when
    every pair passed. The top-level figures are those of the worst pair (the first
    one that did not pass, else the first).
    """
    record = {"host": host, "time": time, "check_mode": bool(check_mode), "notes": [], "path_warnings": [],
              "coverage": coverage, "gpu_count": gpu_count, "pairs": []}
    for key in COPIED:
        record[key] = None
    record.update(distance=None, selection_reason=None, rdma_pci_address=None, would_run=None,
                  module_result=None, memory=None)
    if skip:
        if not isinstance(skip, dict) or not skip.get("code"):
            raise AnsibleFilterError("gpudirect_verify_record: skip must be {code, message}, got %r" % (skip,))
        record["status"] = SKIPPED
        record["diagnosis"] = _diagnosis(skip["code"], skip.get("message") or skip["code"], skip.get("fix") or "")
    else:
        results = result.get("results") if isinstance(result, dict) and isinstance(result.get("results"), list) \
            else [result]
        pairs = [_pair_record(r, check_mode, gpu_count) for r in results] or [_pair_record(None, check_mode,
                                                                                          gpu_count)]
        record["pairs"] = pairs
        worst = min(pairs, key=lambda p: _WORST_FIRST.index(p["status"]))
        for key in COPIED + ("distance", "selection_reason", "rdma_pci_address", "would_run", "module_result",
                             "memory"):
            record[key] = worst[key]
        record["path_warnings"] = [w for p in pairs for w in p["path_warnings"]]
        record["status"] = worst["status"]
        diagnosis = worst["diagnosis"]
        if diagnosis and len(pairs) > 1:
            diagnosis = dict(diagnosis, message="%s (%d of %d pairs did not pass): %s" % (
                worst["pair"], sum(1 for p in pairs if p["status"] != PASSED), len(pairs), diagnosis["message"]))
        record["diagnosis"] = diagnosis
        if len(pairs) > 1 and record["would_run"] is not None:
            record["would_run"] = [cmd for p in pairs for cmd in (p["would_run"] or [])]
    record["result"] = STATUS_TEXT[record["status"]]
    record["pair"] = gpudirect_verify_pair(record)
    return record


def gpudirect_verify_pairs(facts, coverage="nearest", gpu="", rdma_device="", mode="auto"):
    """The pairs the role runs the module on: ``[{gpu, nic, distance}]`` (see
    ``plugin_utils/gpudirect_coverage.py``)."""
    try:
        return _coverage.plan_pairs(facts if isinstance(facts, dict) else {}, coverage, gpu or "",
                                    rdma_device or "", host_memory=(mode == "host"))
    except _coverage.CoverageError as exc:
        raise AnsibleFilterError(str(exc))


def gpudirect_verify_missing_packages(query_output, wanted, manager):
    """The build packages of ``wanted`` that the package query (``dpkg`` or ``rpm``, see
    ``plugin_utils/gpudirect_loopback_packages.py``) does not list as installed."""
    try:
        return _packages.missing_packages(query_output, wanted, manager)
    except _packages.PackageQueryError as exc:
        raise AnsibleFilterError("gpudirect_verify_missing_packages: %s" % exc)


def gpudirect_verify_topo_notes(topo_result, facts, pairs):
    """Notes where ``nvidia-smi topo -m`` (``topo_result``: the registered command result, or
    None when it did not run) disagrees with the distance from sysfs of a tested pair
    (``module_utils/gpudirect_topology.py`` cross_check); a note, too, when the command ran and
    failed or printed what the parser cannot read. Never fails the host: the verdict stays the
    loopback's."""
    if not isinstance(topo_result, dict) or topo_result.get("skipped") or "rc" not in topo_result:
        return []
    if topo_result["rc"] != 0:
        return ["nvidia-smi topo -m exited %s (%s): the distances from sysfs were not cross-checked"
                % (topo_result["rc"], (topo_result.get("stderr") or topo_result.get("stdout") or "").strip()[:200])]
    try:
        topo = _matrix.nvidia_topo_matrix(topo_result.get("stdout") or "")
    except _matrix.TopoMatrixError as exc:
        return ["nvidia-smi topo -m printed what the parser cannot read (%s): the distances from sysfs were not "
                "cross-checked" % exc]
    return _topology.cross_check(topo, (facts or {}).get("gpus") or [], pairs or [])


def _num(value, fmt):
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return fmt % value


def _md_cell(value):
    text = "-" if value is None or value == "" else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def gpudirect_verify_report_md(record):
    """One host's record as a Markdown page (title, a two-column table, then details)."""
    if not isinstance(record, dict) or "status" not in record:
        raise AnsibleFilterError("gpudirect_verify_report_md expects a record from gpudirect_verify_record, "
                                 "got %r" % (record,))
    r = record
    diag = r.get("diagnosis") or {}
    rows = [
        ("result", "**%s**" % STATUS_TEXT.get(r["status"], r["status"])),
        ("time", r.get("time")),
        ("mode", "%s (%s)" % (r.get("mode") or "-", r.get("mode_reason")) if r.get("mode_reason")
         else r.get("mode")),
        ("memory written by the NIC", r.get("memory")),
        ("pairs tested", "%d (coverage %s)" % (len(r.get("pairs") or []), r.get("coverage") or "-")
         if len(r.get("pairs") or []) > 1 else None),
        ("pair", r.get("pair") or gpudirect_verify_pair(r)),
        ("selected because", r.get("selection_reason")),
        ("RDMA device PCI address", r.get("rdma_pci_address")),
        ("GPU", " ".join(x for x in (r.get("gpu"), r.get("gpu_name")) if x) or None),
        ("link layer", r.get("link_layer")),
        ("bytes compared", _num(r.get("bytes_compared"), "%d")),
        ("mismatches", _num(r.get("mismatches"), "%d")
         + ("" if not r.get("mismatches") else " (first at offset %s)" % r.get("first_mismatch"))),
        ("bandwidth", _num(r.get("bandwidth_gbps"), "%.2f Gbit/s")),
        ("port rate", _num(r.get("port_rate_gbps"), "%.1f Gbit/s")),
        ("ratio of port rate", _num(r.get("ratio_port"), "%.3f")),
        ("PCIe (slowest link)", _num(r.get("pcie_gbps"), "%.1f Gbit/s")),
        ("ratio of PCIe", _num(r.get("ratio_pcie"), "%.3f")),
    ]
    if r.get("staged_bandwidth_gbps") is not None or r.get("speedup") is not None:
        rows.append(("staged path (host memory, then copy)", _num(r.get("staged_bandwidth_gbps"), "%.2f Gbit/s")))
        rows.append(("GPUDirect speedup over staged", _num(r.get("speedup"), "%.2fx")))
    rows.append(("diagnosis", diag.get("code") or "none"))
    if r["status"] == SKIPPED:
        keep = ("result", "time", "diagnosis")
    else:   # the main figures always, the others only when the module reported them
        keep = ("result", "time", "mode", "pair", "bytes compared", "bandwidth", "ratio of port rate", "diagnosis")
    rows = [(k, v) for k, v in rows if k in keep or v not in (None, "", "-")]
    lines = ["# GPUDirect RDMA verification: %s" % (r.get("host") or "?"), "", "| | |", "|---|---|"]
    lines += ["| %s | %s |" % (_md_cell(k), _md_cell(v)) for k, v in rows]
    if r.get("pairs"):
        lines += ["", "## Pairs tested", "", "| " + " | ".join(PAIR_COLUMNS) + " |",
                  "|" + "---|" * len(PAIR_COLUMNS)]
        lines += ["| %s |" % " | ".join(_md_cell(c) for c in _pair_cells(p)) for p in r["pairs"]]
    if diag:
        lines += ["", "## %s" % ("Why it was skipped" if r["status"] == SKIPPED else "Diagnosis: " + diag["code"]),
                  "", diag.get("message") or ""]
        if diag.get("fix"):
            lines += ["", "**What to do:** %s" % diag["fix"]]
        for related in diag.get("related") or []:
            lines.append("- %s" % related)
    if r.get("path_warnings"):
        lines += ["", "## Path warnings", ""] + ["- %s" % w for w in r["path_warnings"]]
    if r.get("notes"):
        lines += ["", "## Notes", ""] + ["- %s" % n for n in r["notes"]]
    if r.get("crosscheck"):
        lines += ["", "## Cross-checks (perftest, nccl-tests)", ""] + ["- %s" % n for n in
                                                                       _crosscheck.crosscheck_lines(r["crosscheck"])]
    if r.get("would_run"):
        lines += ["", "## Would run (check mode)", ""] + ["    %s" % " ".join(str(a) for a in cmd)
                                                          for cmd in r["would_run"]]
    lines += _fabric_md(r.get("fabric"))
    return "\n".join(lines) + "\n"


PAIR_COLUMNS = ("GPU", "NIC", "distance", "bytes", "Gbit/s", "of port", "verdict", "diagnosis")
TABLE_COLUMNS = ("host", "result", "mode") + PAIR_COLUMNS


def _gpu_cell(p):
    if p.get("gpu"):
        return p["gpu"]
    if p.get("mode") == "host":
        return {"no GPU: RDMA path proven with host memory": "no GPU (host memory)",
                "host memory only (requested)": "host memory (requested)"}.get(p.get("memory"), "host memory")
    return "-"


def _pair_cells(p):
    """One tested pair as the cells of PAIR_COLUMNS."""
    nic = p.get("rdma_device")
    if nic and p.get("port") is not None:
        nic = "%s/%s" % (nic, p["port"])
    diag = p.get("diagnosis") or {}
    return (_gpu_cell(p), nic or "-", p.get("distance") or "-", _num(p.get("bytes_compared"), "%d"),
            _num(p.get("bandwidth_gbps"), "%.2f"), _num(p.get("ratio_port"), "%.3f"),
            STATUS_TEXT.get(p.get("status"), p.get("status") or "-"), diag.get("code") or "-")


def gpudirect_verify_fleet_table(records, hosts=None):
    """Every host's record as lines of one table, then a count and each problem host's message.

    ``records`` is a list of records (``None`` entries are ignored); ``hosts`` the hosts
    that should have one (the play's hosts): those without a record are listed as not run.
    """
    if records is None:
        records = []
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, (list, tuple)):
        raise AnsibleFilterError("gpudirect_verify_fleet_table expects a list of records, got %r" % (records,))
    by_host = {}
    for record in records:
        if record is None:
            continue
        if not isinstance(record, dict) or "status" not in record:
            raise AnsibleFilterError("gpudirect_verify_fleet_table: not a record: %r" % (record,))
        by_host[record.get("host") or "?"] = record
    order = list(hosts or []) + sorted(h for h in by_host if h not in (hosts or []))
    rows, problems, counts = [], [], {}
    for host in order:
        r = by_host.get(host)
        if r is None:
            status = NOT_RUN
            rows.append((host, STATUS_TEXT[NOT_RUN]) + ("-",) * (len(TABLE_COLUMNS) - 3)
                        + ("failed or unreachable earlier",))
        else:
            status = r["status"]
            diag = r.get("diagnosis") or {}
            pairs = r.get("pairs") or [r]
            for p in pairs:    # one row per pair tested; a skipped host has one row of its own
                cells = _pair_cells(p) if r.get("pairs") else ("-",) * (len(PAIR_COLUMNS) - 2) + (
                    STATUS_TEXT.get(status, status), diag.get("code") or "-")
                rows.append((host, STATUS_TEXT.get(status, status), p.get("mode") or "-") + tuple(cells))
            if diag:
                problems.append("  %s: %s%s" % (host, diag.get("message"),
                                                " What to do: %s" % diag["fix"] if diag.get("fix") else ""))
            for note in r.get("notes") or []:
                problems.append("  %s: %s" % (host, note))
            for line in _crosscheck.crosscheck_lines(r.get("crosscheck")):
                problems.append("  %s: %s" % (host, line))
        counts[status] = counts.get(status, 0) + 1
    lines = ["GPUDirect RDMA verification: %d host%s" % (len(order), "" if len(order) == 1 else "s")]
    if rows:
        lines += _table.text_table([TABLE_COLUMNS] + rows, indent="  ", rule=True)
    lines.append("  " + ", ".join("%d %s" % (counts[s], STATUS_TEXT[s])
                                   for s in (PASSED, FAILED, NOT_PROVEN, SKIPPED, WOULD_RUN, WOULD_FAIL, NOT_RUN)
                                   if counts.get(s)) if counts else "  no hosts")
    return lines + _fabric_fleet_lines([by_host[h] for h in order if h in by_host]) + problems


# ---- The fabric between nodes (gpudirect_verify_fabric; plugin_utils/gpudirect_ring.py) ----

FABRIC_NOT_PROVEN = ("the fabric path between nodes was not proven (only this node's own loopback ran): set "
                     "gpudirect_verify_fabric: ring to prove it across the nodes of the batch")


def gpudirect_verify_ring_plan(members, knob=_ring.ADDRESS_KNOB):
    """``{"edges": [...], "error": None}`` for the ring over ``members`` (``{host: address}``),
    or ``{"edges": [], "error": "<message naming the nodes and the knob>"}``."""
    try:
        return {"edges": _ring.plan_ring(members if isinstance(members, dict) else {}, knob), "error": None}
    except _ring.RingError as exc:
        return {"edges": [], "error": str(exc)}


def _edge_row(edge, side, result, check_mode):
    """One ring edge as seen from one side: the edge's ends, the figures and the verdict."""
    if isinstance(result, dict) and "finished" in result and not result.get("finished") \
            and not result.get("skipped"):
        status, diagnosis = (WOULD_FAIL if check_mode else FAILED), _diagnosis(
            "ring_server_unfinished", "the target side of the edge had not finished when the role stopped waiting "
            "for it (gpudirect_verify_pair_timeout).", "Raise gpudirect_verify_pair_timeout, or look for the "
            "gpudirect_loopback_helper process on the node.")
    else:
        status, diagnosis = _judge(result, check_mode)
    result = result if isinstance(result, dict) else {}
    if diagnosis:
        diagnosis = _ring.edge_diagnosis(edge, side, diagnosis)
    return {"from": edge["from"], "from_address": edge.get("from_address"), "to": edge["to"],
            "to_address": edge.get("to_address"), "edge": _ring.edge_label(edge), "side": side,
            "rdma_device": result.get("rdma_device"), "mode": result.get("mode"), "gpu": result.get("gpu"),
            "bytes_compared": result.get("bytes_compared"), "mismatches": result.get("mismatches"),
            "bandwidth_gbps": result.get("bandwidth_gbps"), "status": status, "result": STATUS_TEXT[status],
            "diagnosis": diagnosis}


def gpudirect_verify_fabric(record, fabric="none", host="", edges=None, client_result=None, server_result=None,
                            check_mode=None, pair_with=""):
    """``record`` with ``fabric`` added: what was proven between nodes, and each ring edge tested.

    ``fabric`` is the knob (``none`` or ``ring``); ``edges`` the ring's edges
    (``gpudirect_verify_ring_plan``); ``client_result`` the registered module result of the
    edge this host wrote (this host -> next), ``server_result`` that of the edge written into
    it (previous -> this host; the ``async_status`` result); ``check_mode`` defaults to the
    record's. In ring mode a failing edge fails
    the host (its diagnosis names both ends), and a host with no neighbour verifying is
    ``not_proven``. ``none`` changes no verdict; the record says the fabric was not proven.
    """
    if not isinstance(record, dict) or "status" not in record:
        raise AnsibleFilterError("gpudirect_verify_fabric expects a record from gpudirect_verify_record, got %r"
                                 % (record,))
    record = dict(record, notes=list(record.get("notes") or []))
    if check_mode is None:
        check_mode = bool(record.get("check_mode"))
    if fabric not in ("none", "ring"):
        raise AnsibleFilterError("gpudirect_verify_fabric: fabric must be none or ring, got %r" % (fabric,))
    if fabric == "none":
        message = FABRIC_NOT_PROVEN
        if pair_with:
            message = ("pair mode with %s (gpudirect_verify_pair_with): the path between the two was proven in one "
                       "direction; gpudirect_verify_fabric: ring proves both directions and every node of the batch"
                       % pair_with)
        record["fabric"] = {"mode": "none", "proven": bool(pair_with) and record["status"] == PASSED,
                            "message": message, "edges": []}
        return record
    if record["status"] == SKIPPED:
        record["fabric"] = {"mode": "ring", "proven": False, "edges": [],
                            "message": "not in the ring: verification of this node was skipped"}
        return record
    ends = _ring.neighbours(edges or [], host)
    rows = []
    if ends["next"]:
        rows.append(_edge_row(ends["next"], "client", client_result, check_mode))
    if ends["prev"]:
        rows.append(_edge_row(ends["prev"], "server", server_result, check_mode))
    failing = [r for r in rows if r["status"] in (FAILED, WOULD_FAIL)]
    if not rows:
        diagnosis = _diagnosis(
            "ring_no_neighbour", "gpudirect_verify_fabric: ring, but no other node of this play batch verifies "
            "with %s: the fabric path of %s was not proven." % (host, host),
            "Run playbooks/verify.yml on %s together with at least one other node (the same batch: no serial that "
            "isolates it, and the others not skipped), or set gpudirect_verify_fabric: none for a loopback-only "
            "proof." % host)
        rows_status = WOULD_FAIL if check_mode else NOT_PROVEN
        failing = [{"diagnosis": diagnosis, "status": rows_status}]
    proven = bool(rows) and all(r["status"] == PASSED for r in rows)
    record["fabric"] = {
        "mode": "ring", "proven": proven, "edges": rows,
        "message": ("the fabric path was proven: %s" % "; ".join(r["edge"] for r in rows)) if proven
        else ("ring edges did not pass: %s" % "; ".join(f["diagnosis"]["message"] for f in failing)) if failing
        else "ring edges: %s" % "; ".join("%s %s" % (r["edge"], r["result"]) for r in rows)}
    if failing:
        if record["status"] in (PASSED, WOULD_RUN):
            worst = failing[0]
            record["status"] = worst["status"] if not rows else (WOULD_FAIL if check_mode else FAILED)
            record["diagnosis"] = worst["diagnosis"]
            record["result"] = STATUS_TEXT[record["status"]]
            if len(failing) > 1:
                record["notes"].append("also: %s" % failing[1]["diagnosis"]["message"])
        else:
            record["notes"] += [f["diagnosis"]["message"] for f in failing]
    return record


EDGE_COLUMNS = ("edge (writer -> target)", "seen on", "bytes", "Gbit/s", "verdict", "diagnosis")


def _edge_cells(row):
    diag = row.get("diagnosis") or {}
    seen_on = row["from"] if row.get("side") == "client" else row["to"]
    return (row.get("edge") or "-", "%s (%s)" % (seen_on, _ring.SIDE_TEXT.get(row.get("side"), "?")),
            _num(row.get("bytes_compared"), "%d"), _num(row.get("bandwidth_gbps"), "%.2f"),
            STATUS_TEXT.get(row.get("status"), row.get("status") or "-"), diag.get("code") or "-")


def _fabric_md(fabric):
    """The record's fabric section as Markdown lines (none when the record has none)."""
    if not isinstance(fabric, dict):
        return []
    lines = ["", "## Fabric between nodes (%s)" % fabric.get("mode"), "", fabric.get("message") or ""]
    if fabric.get("edges"):
        lines += ["", "| " + " | ".join(EDGE_COLUMNS) + " |", "|" + "---|" * len(EDGE_COLUMNS)]
        lines += ["| %s |" % " | ".join(_md_cell(c) for c in _edge_cells(e)) for e in fabric["edges"]]
    return lines


def _fabric_fleet_lines(records):
    """Under the fleet table: every ring edge tested (both ends' views in one row), or one line
    saying that the fabric was not proven and which knob proves it."""
    edges, order, not_proven = {}, [], []
    for r in records:
        fabric = r.get("fabric") if isinstance(r, dict) else None
        if not isinstance(fabric, dict):
            continue
        if fabric.get("mode") == "none" and r.get("status") != SKIPPED and not fabric.get("proven"):
            not_proven.append(r.get("host") or "?")
        for e in fabric.get("edges") or []:
            key = (e["from"], e["to"])
            if key not in edges:
                edges[key] = {}
                order.append(key)
            edges[key][e.get("side")] = e
    order.sort(key=lambda key: (_ring.natural_key(key[0]), _ring.natural_key(key[1])))   # ring order
    lines = []
    if order:
        cols = ("ring edge (writer -> target)", "bytes", "Gbit/s", "verdict", "diagnosis")
        rows = []
        for key in order:
            sides = edges[key]
            client, server = sides.get("client") or {}, sides.get("server") or {}
            any_side = client or server
            statuses = [s["status"] for s in (client, server) if s]
            worst = min(statuses, key=_WORST_FIRST.index)
            codes = sorted(set((s.get("diagnosis") or {}).get("code") for s in (client, server)
                               if s and s.get("diagnosis")))
            verdict = STATUS_TEXT[worst] + ("" if len(statuses) == 2 else " (one end only)")
            rows.append((any_side["edge"], _num(server.get("bytes_compared", client.get("bytes_compared")), "%d"),
                         _num(client.get("bandwidth_gbps", server.get("bandwidth_gbps")), "%.2f"), verdict,
                         ", ".join(codes) or "-"))
        lines += ["  fabric ring: %d edge%s" % (len(order), "" if len(order) == 1 else "s")]
        lines += _table.text_table([cols] + rows, indent="  ", rule=True)
    if not_proven:
        lines.append("  fabric between nodes not proven for %s (loopback only): gpudirect_verify_fabric: ring "
                     "proves it" % ", ".join(not_proven))
    return lines


# ---- The other checks (filter_plugins/gpudirect_gpu_checks.py judges each one) ----
_CHECK_FIX = {
    "gdrcopy": ("gdrcopy_sanity failed on the node: check that gdrdrv is loaded (lsmod | grep gdrdrv, "
                "/dev/gdrdrv) and built for the running kernel and driver (dkms status gdrdrv), then run "
                "gdrcopy_sanity -v there; set gpudirect_verify_gdrcopy: false to leave GDRCopy out of the verdict"),
    "dcgm": ("read the failing test's message in the report, or run the same 'dcgmi diag -r N' on the node; "
             "set gpudirect_verify_dcgm_diag_level: 0 to leave DCGM out of the verdict"),
    "module_signing": _secure_boot.SIGNING_FIX + "; set gpudirect_verify_signing: false to leave it out of the verdict",
    "nvlink_fabric": _nvlink.FABRIC_FIX,
    "in_service": ("read the node's facts in the report (playbooks/report.yml prints them): load the missing "
                   "module or bring the port up, then drain the node and run playbooks/verify.yml with "
                   "gpudirect_verify_scope: full for the loopback"),
}


# passed and failed; skipped: not run, with why; not_measured: run, but the node has nothing it can
# measure (GDRCopy's tools on a node without GPU), with the tools' own error
CHECK_STATUSES = ("passed", "failed", "skipped", "not_measured")


def add_checks(record, checks):
    """The record with ``checks`` (each from a ``gpudirect_*_check`` filter, or None) under ``checks`` and
    their summaries in ``notes``; a failed check fails a host that passed, or one in service whose
    loopback was left out, with a diagnosis naming every failed check. A skipped or not_measured
    check changes no verdict: its summary says why."""
    if not isinstance(record, dict) or "status" not in record:
        raise AnsibleFilterError("gpudirect_verify_verdict: the checks need a record with a status, got %r" % (record,))
    checks = [c for c in (checks or []) if c]
    for check in checks:
        if not isinstance(check, dict) or check.get("status") not in CHECK_STATUSES:
            raise AnsibleFilterError("gpudirect_verify_verdict: not a check: %r" % (check,))
    out = dict(record)
    out["checks"] = checks
    out["notes"] = list(record.get("notes") or []) + [c["summary"] for c in checks if c.get("summary")]
    failed = [c for c in checks if c["status"] == "failed"]
    in_service = record["status"] == "skipped" and (record.get("diagnosis") or {}).get("code") == "in_service"
    if failed and (record["status"] == "passed" or in_service):
        first = failed[0]
        out["status"] = "failed"
        out["result"] = "FAILED"
        out["diagnosis"] = {"code": "%s_failed" % first["name"],
                            "message": "; ".join("%s: %s" % (c["name"], c.get("reason") or c.get("summary"))
                                                 for c in failed)
                            + (" (the node is in service: its data path was not exercised)" if in_service
                               else " (the RDMA data path itself passed)"),
                            "fix": first.get("fix") or _CHECK_FIX.get(first["name"], ""), "related": []}
    return out


# ---- The verdict: one judging step ----
VERDICT_INPUTS = ("result", "host", "skip", "check_mode", "time", "gpu_count", "coverage", "notes", "crosscheck",
                  "fabric", "checks")
FABRIC_INPUTS = ("mode", "edges", "client", "server", "pair_with")


def gpudirect_verify_verdict(inputs):
    """The host's verification record, judged once from everything this run measured on it.

    ``inputs`` (a mapping; see filter_plugins/gpudirect_verify_verdict.yml): ``result`` (the
    registered loop over the pairs), ``host``, ``skip`` (a reason not to run: then the result and
    the cross-checks are not read), ``check_mode``, ``time``, ``gpu_count``, ``coverage``,
    ``notes`` (the topology notes), ``crosscheck``, ``fabric`` (``{mode, edges, client, server,
    pair_with}``) and ``checks``.
    """
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("gpudirect_verify_verdict expects a mapping of the run's results, got %r" % (inputs,))
    unknown = sorted(set(inputs) - set(VERDICT_INPUTS))
    fabric = inputs.get("fabric") or {}
    if not isinstance(fabric, dict):
        raise AnsibleFilterError("gpudirect_verify_verdict: fabric must be a mapping of %s, got %r"
                                 % (", ".join(FABRIC_INPUTS), fabric))
    unknown += ["fabric." + k for k in sorted(set(fabric) - set(FABRIC_INPUTS))]
    if unknown:
        raise AnsibleFilterError("gpudirect_verify_verdict: unknown input(s) %s; expected %s"
                                 % (", ".join(unknown), ", ".join(VERDICT_INPUTS)))
    skip = inputs.get("skip") or None
    host = inputs.get("host") or ""
    # with a skip the record reads no result
    record = gpudirect_verify_record(inputs.get("result"), host, skip, inputs.get("check_mode"),
                                     inputs.get("time"), inputs.get("gpu_count"), inputs.get("coverage"))
    record["notes"] = record["notes"] + [n for n in (inputs.get("notes") or []) if n]
    try:
        record = _xc.merge_into_record(record, None if skip else inputs.get("crosscheck"))
    except _xc.CrosscheckError as exc:
        raise AnsibleFilterError("gpudirect_verify_verdict: %s" % exc)
    record = gpudirect_verify_fabric(record, fabric.get("mode") or "none", host, fabric.get("edges"),
                                     fabric.get("client"), fabric.get("server"), pair_with=fabric.get("pair_with") or "")
    return add_checks(record, inputs.get("checks"))


class FilterModule(object):
    """Verification filters for gpudirect_loopback results."""

    def filters(self):
        return {
            "gpudirect_verify_verdict": gpudirect_verify_verdict,
            "gpudirect_verify_report_md": gpudirect_verify_report_md,
            "gpudirect_verify_fleet_table": gpudirect_verify_fleet_table,
            "gpudirect_verify_pairs": gpudirect_verify_pairs,
            "gpudirect_verify_missing_packages": gpudirect_verify_missing_packages,
            "gpudirect_verify_topo_notes": gpudirect_verify_topo_notes,
            "gpudirect_verify_ring_plan": gpudirect_verify_ring_plan,
        }
