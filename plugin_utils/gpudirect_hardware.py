# -*- coding: utf-8 -*-
"""A node comes back with what it had (issue #29, outcome 6).

Before a disruption (driver reload, OFED restart, reboot) the drain records the node's
hardware inventory from ``ansible_facts.gpudirect``; after it, the resume decision
compares the inventory of the facts gathered again by verification. A GPU or RDMA
device that is gone, a PCIe link that trained narrower (or whose slot lost speed), a port that was
ACTIVE and is not, a port rate that fell, NIC firmware that changed, an IOMMU that was
on and is off, fewer NVLink links up: each is a finding, and a node with a finding stays drained
with a before/after table, unless the admin accepted it (a pattern in
``gpudirect_drain_hardware_accept``).

``inventory(facts)``
    The parts of the facts a node must come back with, as plain data:
    ``{"gpus": {address: {...}}, "rdma": {name: {...}}, "iommu": mode}``.
``findings(before, after)``
    ``[{"what", "before", "after"}, ...]`` in a stable order; empty when nothing
    is missing or degraded.
``judge(before, after, accept)``
    ``{"findings": [...], "accepted": [...]}``: the findings that no pattern of
    ``accept`` (regular expressions, searched in "what: before -> after") matches,
    and those that one does. Bad patterns raise ValueError naming the knob.
``table(rows)``
    The findings as aligned text lines.

Pure functions: no I/O. Inputs that are not facts raise ValueError.
"""

from __future__ import annotations

import re

from ansible.module_utils.gpudirect_table import text_table

ACCEPT_KNOB = "gpudirect_drain_hardware_accept"
_IOMMU_OFF = (None, "off", "unknown", "")


def _link(link):
    """The link's trained width and its capable speed. Not its current speed: a GPU lowers
    its link speed when idle (power management) and raises it under load, so the speed
    read before and after a disruption differs on a healthy node; a lane lost in training
    shows as a narrower width, a slot or riser that lost its generation as a lower maximum."""
    if not isinstance(link, dict):
        return None
    speed, width = link.get("max_speed_gts"), link.get("current_width")
    if speed is None and width is None:
        return None
    return {"speed_gts": speed, "width": width}


def _nvlink(gpu):
    """Links up per GPU where the facts carry NVLink state (None when they do not)."""
    nvlink = gpu.get("nvlink")
    if not isinstance(nvlink, dict):
        return None
    up = nvlink.get("links_up")
    if isinstance(up, int):
        return up
    links = nvlink.get("links")
    if isinstance(links, list):
        return sum(1 for link in links if isinstance(link, dict) and link.get("active"))
    return None


def inventory(facts):
    """The hardware of ``ansible_facts.gpudirect`` that must survive a disruption."""
    if not isinstance(facts, dict):
        raise ValueError("expected ansible_facts.gpudirect (a dict), got %s" % type(facts).__name__)
    gpus = {}
    for gpu in facts.get("gpus") or []:
        if not isinstance(gpu, dict) or not gpu.get("address"):
            raise ValueError("a GPU of the facts has no address: %r" % (gpu,))
        gpus[gpu["address"]] = {"name": gpu.get("name") or gpu.get("device_id"), "link": _link(gpu.get("link")),
                                "nvlink_up": _nvlink(gpu)}
    rdma = {}
    for dev in facts.get("rdma_devices") or []:
        if not isinstance(dev, dict) or not dev.get("name"):
            raise ValueError("an RDMA device of the facts has no name: %r" % (dev,))
        ports = {}
        for num, port in sorted((dev.get("ports") or {}).items()):
            if isinstance(port, dict):
                ports[str(num)] = {"state": port.get("state"), "rate_gbps": port.get("rate_gbps")}
        rdma[dev["name"]] = {"address": dev.get("pci_address"), "fw_ver": dev.get("fw_ver"),
                             "link": _link(dev.get("link")), "ports": ports}
    iommu = facts.get("iommu")
    return {"gpus": gpus, "rdma": rdma, "iommu": iommu.get("mode") if isinstance(iommu, dict) else None}


def _link_text(link):
    if not link:
        return "no link"
    return "x%s (up to %s GT/s)" % (link.get("width"), link.get("speed_gts"))


def _slower(before, after):
    if not before or not after:
        return bool(before) and not after
    for key in ("speed_gts", "width"):
        b, a = before.get(key), after.get(key)
        if isinstance(b, (int, float)) and isinstance(a, (int, float)) and a < b:
            return True
    return False


def findings(before, after):
    """What the node lost or degraded between two inventories (list of dicts)."""
    for name, inv in (("before", before), ("after", after)):
        if not isinstance(inv, dict) or not {"gpus", "rdma"} <= set(inv):
            raise ValueError("the %s inventory is not one of gpudirect_hardware.inventory: %r" % (name, inv))
    rows = []

    def add(what, was, now):
        rows.append({"what": what, "before": str(was), "after": str(now)})

    for address, gpu in sorted(before["gpus"].items()):
        now = after["gpus"].get(address)
        label = "GPU %s (%s)" % (address, gpu.get("name"))
        if now is None:
            add(label, "present", "missing")
            continue
        if _slower(gpu.get("link"), now.get("link")):
            add(label + " PCIe link", _link_text(gpu.get("link")), _link_text(now.get("link")))
        if isinstance(gpu.get("nvlink_up"), int) and (now.get("nvlink_up") or 0) < gpu["nvlink_up"]:
            add(label + " NVLink links up", gpu["nvlink_up"], now.get("nvlink_up"))
    for name, dev in sorted(before["rdma"].items()):
        now = after["rdma"].get(name)
        label = "RDMA device %s%s" % (name, " (%s)" % dev["address"] if dev.get("address") else "")
        if now is None:
            add(label, "present", "missing")
            continue
        if dev.get("fw_ver") and now.get("fw_ver") != dev.get("fw_ver"):
            add(label + " firmware", dev.get("fw_ver"), now.get("fw_ver"))
        if _slower(dev.get("link"), now.get("link")):
            add(label + " PCIe link", _link_text(dev.get("link")), _link_text(now.get("link")))
        for num, port in sorted(dev.get("ports", {}).items()):
            later = now.get("ports", {}).get(num)
            if later is None:
                add("%s port %s" % (label, num), "present", "missing")
                continue
            if port.get("state") == "ACTIVE" and later.get("state") != "ACTIVE":
                add("%s port %s state" % (label, num), port.get("state"), later.get("state"))
            b, a = port.get("rate_gbps"), later.get("rate_gbps")
            if isinstance(b, (int, float)) and isinstance(a, (int, float)) and a < b:
                add("%s port %s rate" % (label, num), "%g Gb/s" % b, "%g Gb/s" % a)
    # an IOMMU that was on and is off or unreadable now (a firmware setting reset by the
    # reboot); a change between enabled modes is the toolkit's own (gpudirect_host_prereqs' iommu=pt)
    if before.get("iommu") not in _IOMMU_OFF and after.get("iommu") in _IOMMU_OFF:
        add("IOMMU mode", before.get("iommu"), after.get("iommu"))
    return rows


def judge(before, after, accept=None):
    """The findings split into those that keep the node drained and those the admin accepted."""
    accept = [] if accept is None else accept
    if isinstance(accept, str) or not isinstance(accept, (list, tuple)):
        raise ValueError("%s must be a list of regular expressions, got %r" % (ACCEPT_KNOB, accept))
    patterns = []
    for item in accept:
        if not isinstance(item, str) or not item:
            raise ValueError("%s: %r is not a regular expression (a non-empty string)" % (ACCEPT_KNOB, item))
        try:
            patterns.append(re.compile(item))
        except re.error as exc:
            raise ValueError("%s: %r is not a valid regular expression: %s" % (ACCEPT_KNOB, item, exc))
    out = {"findings": [], "accepted": []}
    for row in findings(before, after):
        text = "%s: %s -> %s" % (row["what"], row["before"], row["after"])
        out["accepted" if any(p.search(text) for p in patterns) else "findings"].append(row)
    return out


def table(rows):
    """Aligned lines: what, before, after."""
    head = ("what", "before the disruption", "after it")
    return text_table([head] + [(r["what"], r["before"], r["after"]) for r in rows])
