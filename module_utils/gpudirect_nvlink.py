# -*- coding: utf-8 -*-
"""NVLink links and NVLink fabric state of each GPU, from ``nvidia-smi``'s own text.

* ``parse_nvlink_status``: ``nvidia-smi nvlink -s`` -> ``{index: {"links": [...], ...}}``,
  one entry per ``GPU <index>: <name> (UUID: ...)`` block, each link up with its speed
  (``Link 3: 26.562 GB/s``) or down (``Link 3: <inactive>``).
* ``parse_fabric``: ``nvidia-smi -q`` -> ``{pci address: {"state", "status", "clique_id",
  "cluster_uuid"}}`` from each GPU's ``Fabric`` section (``GPU 00000000:00:06.0`` blocks).

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
    """``nvidia-smi -q`` -> ``{address: {"state", "status", "clique_id", "cluster_uuid"}}``.

    The ``Fabric`` section of each ``GPU 00000000:00:06.0`` block (drivers from r550); a GPU
    block without one is left out (an older driver: the caller reports it as not read). The
    ``GPU Fabric GUID`` line is another field and is not taken for the section. Values are as
    printed (``Completed``, ``Success``, ``0``, the UUID), ``N/A`` as None; ``clique_id`` an int
    when it is a number.
    """
    if not isinstance(text, str):
        raise NvlinkParseError("nvidia-smi -q: expected text, got %r" % (text,))
    out, address, fabric_indent, number = {}, None, None, 0
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
        if field.group("key") == "Fabric" and field.group("value") is None:
            fabric_indent = indent
            out[address] = {"state": None, "status": None, "clique_id": None, "cluster_uuid": None}
            continue
        if fabric_indent is None:
            continue
        if indent <= fabric_indent:
            fabric_indent = None
            continue
        key = FABRIC_KEYS.get(field.group("key"))
        if key and indent == fabric_indent + 4:
            value = _na(field.group("value"))
            if key == "clique_id" and value is not None:
                if not value.isdigit():
                    raise NvlinkParseError("nvidia-smi -q line %d: CliqueId %r is not a number: %r"
                                           % (number, value, line))
                value = int(value)
            out[address][key] = value
    return out


# NVIDIA's fabric states (nvidia-smi -q "Fabric" section; NVML nvmlGpuFabricState_t:
# Not Supported, Not Started, In Progress, Completed). A GPU is on a working NVLink fabric
# only at Completed with Status Success; N/A (None) is a GPU that is not on one.
FABRIC_FIX = ("the GPU's NVLink fabric did not come up: check that nvidia-fabricmanager runs with the driver's own "
              "version (systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager), and on NVLink-5 "
              "HGX systems (B200/B300) that nvlsm runs too; then nvidia-smi -q -d FABRIC shows State Completed, Status "
              "Success. Set gpudirect_verify_nvlink_fabric: false to leave the fabric out of the verdict")


def judge_fabric(gpus, fabric_available=True, fabric_reason=None):
    """The ``nvlink_fabric`` check of gpudirect_verify from the facts' GPUs (each with its
    ``fabric`` from :func:`parse_fabric`): ``{name, status, summary, reason, gpus}``.

    * skipped: no GPU, the fabric state not read (``fabric_reason`` says why), or no GPU
      on an NVLink fabric (every State N/A, as on a PCIe GPU or one without NVSwitch);
    * failed: a GPU whose State is not Completed or whose Status is not Success, named
      with both values, while the node has GPUs on a fabric;
    * passed: every GPU on the fabric at Completed/Success, with its clique.
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
    per_gpu, bad, on_fabric = {}, [], []
    for gpu in gpus:
        address = gpu.get("address")
        fabric = gpu.get("fabric") or {}
        state, status = fabric.get("state"), fabric.get("status")
        per_gpu[address] = {"state": state, "status": status, "clique_id": fabric.get("clique_id")}
        if state is None and status is None:
            continue
        on_fabric.append(address)
        if state != "Completed" or status != "Success":
            bad.append("%s: State %s, Status %s" % (address, state or "N/A", status or "N/A"))
    if not on_fabric:
        reason = "no GPU of this node is on an NVLink fabric (Fabric State N/A on %d GPU(s))" % len(gpus)
        return {"name": name, "status": "skipped", "summary": "nvlink_fabric: skipped (%s)" % reason, "reason": reason,
                "gpus": per_gpu}
    if bad:
        reason = "%d of %d GPU(s) on the NVLink fabric are not Completed/Success: %s" % (
            len(bad), len(on_fabric), "; ".join(bad))
        return {"name": name, "status": "failed", "summary": "nvlink_fabric: FAILED (%s)" % reason, "reason": reason,
                "gpus": per_gpu}
    cliques = sorted(set(str(per_gpu[a]["clique_id"]) for a in on_fabric))
    summary = "nvlink_fabric: passed (%d GPU(s) Completed/Success, clique %s)" % (len(on_fabric), ", ".join(cliques))
    return {"name": name, "status": "passed", "summary": summary, "reason": "", "gpus": per_gpu}
