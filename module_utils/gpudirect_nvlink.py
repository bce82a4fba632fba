# -*- coding: utf-8 -*-
"""NVLink links and NVLink fabric state of each GPU, from ``nvidia-smi``'s own text.

* ``parse_nvlink_status``: ``nvidia-smi nvlink -s`` -> ``{index: {"links": [...], ...}}``,
  one entry per ``GPU <index>: <name> (UUID: ...)`` block, each link up with its speed
  (``Link 3: 26.562 GB/s``) or down (``Link 3: <inactive>``).
* ``parse_fabric``: ``nvidia-smi -q`` -> ``{pci address: {"state", "status", "clique_id",
  "cluster_uuid", "health", "unknown"}}`` from each GPU's ``Fabric`` section (``GPU 00000000:00:06.0``
  blocks), its ``Health`` sub-block included (drivers from r560/r570 print it).
* ``judge_fabric``: the ``nvlink_fabric`` check of gpudirect_verify from every field of that section.

Both are pure: the facts collector (module_utils/gpudirect_facts_collector.py) runs the
commands and attaches the result to each GPU. A line the parser does not expect inside a
block it reads raises ``NvlinkParseError`` naming the line, so a new driver's format is
reported instead of read wrongly. ``N/A`` becomes None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.gpudirect_pci import normalize_pci_address

_GPU_HEADER = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
_LINK = re.compile(r"^\s*Link (?P<link>\d+): (?P<value>.*?)\s*$")
_SPEED = re.compile(r"^(?P<speed>\d+(?:\.\d+)?) GB/s$")
_Q_GPU = re.compile(r"^GPU (?P<address>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_Q_FIELD = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s*(?::\s*(?P<value>.*?))?\s*$")
FABRIC_KEYS = {"State": "state", "Status": "status", "CliqueId": "clique_id", "ClusterUUID": "cluster_uuid"}
# The rows of the Fabric > Health sub-block as nvidia-smi prints them: 565 prints Bandwidth alone,
# 570 adds the route and access-timeout rows, 580 Summary and Incorrect Configuration, 580.159 and
# 580.173 Partition Assigned (tests/fixtures/nvlink_fabric/README.md). Each is one field of NVML's
# nvmlGpuFabricInfo_v3_t: healthSummary (NVML_GPU_FABRIC_HEALTH_SUMMARY_*) and the healthMask slots
# (NVML_GPU_FABRIC_HEALTH_MASK_*).
HEALTH_KEYS = {"Summary": "summary", "Bandwidth": "bandwidth", "Route Recovery in progress": "route_recovery_in_progress",
               "Route Unhealthy": "route_unhealthy", "Access Timeout Recovery": "access_timeout_recovery",
               "Incorrect Configuration": "incorrect_configuration", "Partition Assigned": "partition_assigned"}
HEALTH_LABELS = dict((key, label) for label, key in HEALTH_KEYS.items())


class NvlinkParseError(ValueError):
    """nvidia-smi printed something these parsers do not read; the message quotes the line."""


def _na(value):
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]") else value


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{index: {"index", "name", "uuid", "links": [{"link", "up",
    "speed_gbytes_s"}], "links_total", "links_up", "link_speed_gbytes_s", "total_gbytes_s"}}``.

    ``link_speed_gbytes_s`` is the speed every active link shares (None when they differ or none
    is up); ``total_gbytes_s`` their sum, one direction, as nvidia-smi prints GB/s (gigabytes).
    A GPU without NVLink prints its header and no link (``links_total`` 0). Text with no GPU
    header at all (an empty answer, an error line) gives ``{}``; the caller says why.
    """
    if not isinstance(text, str):
        raise NvlinkParseError("nvidia-smi nvlink -s: expected text, got %r" % (text,))
    gpus, current = {}, None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        header = _GPU_HEADER.match(line)
        if header:
            index = int(header.group("index"))
            if index in gpus:
                raise NvlinkParseError("nvidia-smi nvlink -s line %d: GPU %d listed twice: %r" % (number, index, line))
            current = gpus[index] = {"index": index, "name": header.group("name").strip(),
                                     "uuid": header.group("uuid"), "links": []}
            continue
        link = _LINK.match(line)
        if link and current is not None:
            value = link.group("value")
            speed = _SPEED.match(value)
            if speed:
                current["links"].append({"link": int(link.group("link")), "up": True,
                                         "speed_gbytes_s": float(speed.group("speed"))})
            elif value.strip("<>").lower() in ("inactive", "n/a", "disabled", "off"):
                current["links"].append({"link": int(link.group("link")), "up": False, "speed_gbytes_s": None})
            else:
                raise NvlinkParseError("nvidia-smi nvlink -s line %d: link state %r is neither 'N GB/s' nor "
                                       "<inactive>: %r" % (number, value, line))
            continue
        if current is None:
            continue   # text before the first GPU header (a warning nvidia-smi printed): not a link line
        raise NvlinkParseError("nvidia-smi nvlink -s line %d: expected 'Link N: ...' or 'GPU N: ...', got %r"
                               % (number, line))
    for gpu in gpus.values():
        up = [link["speed_gbytes_s"] for link in gpu["links"] if link["up"]]
        gpu["links_total"] = len(gpu["links"])
        gpu["links_up"] = len(up)
        gpu["link_speed_gbytes_s"] = up[0] if up and len(set(up)) == 1 else None
        gpu["total_gbytes_s"] = round(sum(up), 3) if up else 0.0
    return gpus


def parse_fabric(text):
    """``nvidia-smi -q`` -> ``{address: {"state", "status", "clique_id", "cluster_uuid", "health",
    "unknown"}}``.

    The ``Fabric`` section of each ``GPU 00000000:00:06.0`` block (drivers from r550); a GPU
    block without one is left out (an older driver: the caller reports it as not read). The
    ``GPU Fabric GUID`` line is another field and is not taken for the section. Values are as
    printed (``Completed``, ``Success``, ``0``, the UUID), ``N/A`` as None; ``clique_id`` an int
    when it is a number.

    ``health`` is the ``Health`` sub-block, ``{"summary", "bandwidth", "route_recovery_in_progress",
    "route_unhealthy", "access_timeout_recovery", "incorrect_configuration", "partition_assigned"}``
    with only the rows this driver printed (:data:`HEALTH_KEYS`), or None where the driver prints no
    Health sub-block. Every other line of the section is kept in ``unknown``, ``{path: value}``
    (``"Health/Partition State"``, ``"Cliques/Unicast"``), so that :func:`judge_fabric` names it
    instead of passing over it.
    """
    if not isinstance(text, str):
        raise NvlinkParseError("nvidia-smi -q: expected text, got %r" % (text,))
    out, address, fabric_indent, stack, number = {}, None, None, [], 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        gpu = _Q_GPU.match(line)
        if gpu:
            address = normalize_pci_address(gpu.group("address"))
            if address is None:
                raise NvlinkParseError("nvidia-smi -q line %d: not a PCI address: %r" % (number, line))
            fabric_indent = None
            continue
        field = _Q_FIELD.match(line)
        if not field or address is None:
            continue
        indent = len(field.group("indent"))
        key, value = field.group("key"), field.group("value")
        if key == "Fabric" and value is None and (fabric_indent is None or indent <= fabric_indent):
            fabric_indent, stack = indent, []
            out[address] = {"state": None, "status": None, "clique_id": None, "cluster_uuid": None,
                            "health": None, "unknown": {}}
            continue
        if fabric_indent is None:
            continue
        if indent <= fabric_indent:
            fabric_indent = None
            continue
        fabric = out[address]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([name for _, name in stack] + [key])
        if value is None:                       # a sub-block's header: "Health"
            stack.append((indent, key))
            if path == "Health":
                fabric["health"] = {}
            continue
        value = _na(value)
        if path in FABRIC_KEYS:
            if path == "CliqueId" and value is not None:
                if not value.isdigit():
                    raise NvlinkParseError("nvidia-smi -q line %d: CliqueId %r is not a number: %r"
                                           % (number, value, line))
                value = int(value)
            fabric[FABRIC_KEYS[path]] = value
        elif path.startswith("Health/") and path[len("Health/"):] in HEALTH_KEYS:
            fabric["health"][HEALTH_KEYS[path[len("Health/"):]]] = value
        else:
            fabric["unknown"][path] = value
    return out


# NVIDIA's fabric states (nvidia-smi -q "Fabric" section; NVML nvmlGpuFabricState_t:
# Not Supported, Not Started, In Progress, Completed). A GPU is on a working NVLink fabric
# only at Completed with Status Success; N/A (None) is a GPU that is not on one.
FABRIC_STATES = ("Completed", "In Progress", "Not Started", "Not Supported")
FABRIC_FIX = ("the GPU's NVLink fabric did not come up, or reports a fault: check that nvidia-fabricmanager runs with "
              "the driver's own version (systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager), "
              "and on NVLink-5 HGX systems (B200/B300) that nvlsm runs too; on a GB200/GB300 NVL72 compute tray a Health "
              "fault comes from the rack's NVLink switch trays, whose fabric manager (NMX) the rack's operator runs. "
              "nvidia-smi -q -d FABRIC must show State Completed, Status Success and, where the driver prints a Health "
              "block, Summary Healthy (or N/A) with no route, bandwidth or configuration fault. Set "
              "gpudirect_verify_nvlink_fabric: false to leave the fabric out of the verdict")

# What each Health row may say (NVML nvmlGpuFabricInfo_v3_t; the words are nvidia-smi's, as real
# drivers print them: tests/fixtures/nvlink_fabric/README.md). N/A (None) is a row the driver or
# the GPU does not report (H100/H200 HGX print every row N/A): no evidence either way, so it passes.
# A value in neither list is not guessed at: the check fails naming it.
HEALTH_GOOD = {
    "summary": ("Healthy",),                    # NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY
    "bandwidth": ("Full",),                     # ..._MASK_DEGRADED_BW_FALSE
    "route_recovery_in_progress": ("False",),   # ..._MASK_ROUTE_RECOVERY_FALSE
    "route_unhealthy": ("False",),              # ..._MASK_ROUTE_UNHEALTHY_FALSE
    "access_timeout_recovery": ("False",),      # ..._MASK_ACCESS_TIMEOUT_RECOVERY_FALSE
    "incorrect_configuration": ("None",),       # ..._MASK_INCORRECT_CONFIGURATION_NONE ("Correct Configuration")
    "partition_assigned": (),                   # only N/A seen on real drivers: any other word is unknown
}
HEALTH_BAD = {
    "summary": ("Unhealthy", "Limited Capacity"),   # ..._SUMMARY_UNHEALTHY, ..._SUMMARY_LIMITED_CAPACITY
    "bandwidth": ("Degraded",),                     # ..._MASK_DEGRADED_BW_TRUE
    "route_recovery_in_progress": ("True",),
    "route_unhealthy": ("True",),
    "access_timeout_recovery": ("True",),
    # any word but None names the misconfiguration NVML found (SysGUID, chassis serial number,
    # no partition, insufficient NVLinks, incompatible GPU firmware, invalid location, ...)
    "incorrect_configuration": None,
    "partition_assigned": (),
}
HEALTH_FIX = ("the GPU is on its NVLink fabric but the fabric reports it degraded or faulty (nvidia-smi -q -d FABRIC, "
              "Health): NVLink traffic to its peers runs at reduced bandwidth, is being rerouted or fails; read the "
              "fabric manager's log (journalctl -u nvidia-fabricmanager; on a GB200/GB300 tray ask the rack's NVLink "
              "switch operator), and keep the node out of service until Health shows Summary Healthy")
UNKNOWN_FIX = ("these are fields or values of the Fabric section that this toolkit does not know, so it will not call "
               "the fabric healthy: look each up for this driver in NVIDIA's NVML reference (nvmlGpuFabricInfo_v3_t, "
               "NVML_GPU_FABRIC_HEALTH_*) or the nvidia-smi man page; if it is harmless, set "
               "gpudirect_verify_nvlink_fabric: false until the toolkit reads it, and report it to the toolkit")


def _health_findings(fabric):
    """``(unhealthy, unknown)``: the Health rows and other fields of one GPU's fabric that are not
    healthy, and those whose words this module does not know, each as ``"Label value"``."""
    unhealthy, unknown = [], []
    health = fabric.get("health") or {}
    for key in [k for k in HEALTH_LABELS if k in health] + sorted(k for k in health if k not in HEALTH_LABELS):
        value = health[key]
        if value is None or value in HEALTH_GOOD.get(key, ()):
            continue
        label = HEALTH_LABELS.get(key, key)
        bad = HEALTH_BAD.get(key, ())
        if key in HEALTH_BAD and (bad is None or value in bad):
            unhealthy.append("%s %s" % (label, value))
        else:
            unknown.append("Health/%s %r" % (label, value))
    for path in sorted(fabric.get("unknown") or {}):
        value = fabric["unknown"][path]
        if value is not None:
            unknown.append("%s %r" % (path, value))
    return unhealthy, unknown


def judge_fabric(gpus, fabric_available=True, fabric_reason=None):
    """The ``nvlink_fabric`` check of gpudirect_verify from the facts' GPUs (each with its
    ``fabric`` from :func:`parse_fabric`): ``{name, status, summary, reason, gpus}``.

    Every field of the section is judged:

    * skipped: no GPU, the fabric state not read (``fabric_reason`` says why), or no GPU
      on an NVLink fabric (State, Status, every Health row and every other field N/A, as on a
      PCIe GPU, one without NVSwitch, or an older driver's facts without ``health``);
    * failed: a GPU whose State is not Completed or whose Status is not Success, named
      with both values; a GPU whose Health sub-block reports a fault (Summary Unhealthy or
      Limited Capacity, Bandwidth Degraded, a route recovering or unhealthy, an access timeout
      recovery, an Incorrect Configuration other than None), named with each faulty row; a GPU
      with a Health value or another field this module does not know, named with its value;
    * passed: every GPU on the fabric at Completed/Success with no Health fault, with its clique.
    """
    name = "nvlink_fabric"
    if not isinstance(gpus, list):
        raise ValueError("judge_fabric: expected the facts' list of GPUs, got %r" % (gpus,))
    if not gpus:
        return {"name": name, "status": "skipped", "summary": "nvlink_fabric: skipped (no GPU)", "reason": "no GPU",
                "gpus": {}}
    if not fabric_available:
        reason = "the fabric state was not read: %s" % (fabric_reason or "unknown")
        return {"name": name, "status": "skipped", "summary": "nvlink_fabric: skipped (%s)" % reason, "reason": reason,
                "gpus": {}}
    per_gpu, bad, sick, strange, on_fabric, healthy_summary = {}, [], [], [], [], []
    for gpu in gpus:
        address = gpu.get("address")
        fabric = gpu.get("fabric") or {}
        state, status = fabric.get("state"), fabric.get("status")
        health = fabric.get("health")
        unhealthy, unknown = _health_findings(fabric)
        per_gpu[address] = {"state": state, "status": status, "clique_id": fabric.get("clique_id"),
                            "health": dict(health) if isinstance(health, dict) else None,
                            "problems": unhealthy + unknown}
        reported = [v for v in (health or {}).values() if v is not None] + \
            [v for v in (fabric.get("unknown") or {}).values() if v is not None]
        if state is None and status is None and not reported:
            continue
        on_fabric.append(address)
        if state != "Completed" or status != "Success":
            line = "%s: State %s, Status %s" % (address, state or "N/A", status or "N/A")
            if state is not None and state not in FABRIC_STATES:
                line += " (a State nvidia-smi is not known to print: %s are)" % ", ".join(FABRIC_STATES)
            bad.append(line)
        if unhealthy:
            sick.append("%s: %s" % (address, ", ".join(unhealthy)))
        if unknown:
            strange.append("%s: %s" % (address, ", ".join(unknown)))
        if (health or {}).get("summary") == "Healthy":
            healthy_summary.append(address)
    if not on_fabric:
        reason = "no GPU of this node is on an NVLink fabric (Fabric State N/A on %d GPU(s))" % len(gpus)
        return {"name": name, "status": "skipped", "summary": "nvlink_fabric: skipped (%s)" % reason, "reason": reason,
                "gpus": per_gpu}
    if bad or sick or strange:
        parts = []
        if bad:
            parts.append("%d of %d GPU(s) on the NVLink fabric are not Completed/Success: %s" % (
                len(bad), len(on_fabric), "; ".join(bad)))
        if sick:
            parts.append("%d of %d GPU(s) on the NVLink fabric report a fabric fault in nvidia-smi -q's Fabric Health: "
                         "%s; %s" % (len(sick), len(on_fabric), "; ".join(sick), HEALTH_FIX))
        if strange:
            parts.append("nvidia-smi -q printed Fabric fields or values this toolkit does not know on %d GPU(s): %s; %s"
                         % (len(strange), "; ".join(strange), UNKNOWN_FIX))
        reason = "; ".join(parts)
        return {"name": name, "status": "failed", "summary": "nvlink_fabric: FAILED (%s)" % reason, "reason": reason,
                "gpus": per_gpu}
    cliques = sorted(set(str(per_gpu[a]["clique_id"]) for a in on_fabric))
    summary = "nvlink_fabric: passed (%d GPU(s) Completed/Success, clique %s" % (len(on_fabric), ", ".join(cliques))
    if healthy_summary:
        summary += ", Health Summary Healthy on %d" % len(healthy_summary)
    return {"name": name, "status": "passed", "summary": summary + ")", "reason": "", "gpus": per_gpu}
