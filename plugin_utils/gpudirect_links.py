# -*- coding: utf-8 -*-
"""PCIe links of GPUs and RDMA NICs that trained below their maximum (preflight finding).

The facts (``ansible_facts.gpudirect``) carry each GPU's and each PCI RDMA device's
``link``: ``current_speed_gts``, ``current_width``, ``max_speed_gts``, ``max_width``,
read from sysfs ``current_link_speed``, ``current_link_width``, ``max_link_speed``,
``max_link_width``. A link below its maximum width, or a NIC below its maximum
speed, is a degraded link (a card not fully seated, a riser or retimer fault, a slot
wired narrower than the card): ``degraded`` findings, which the preflight knob
``gpudirect_preflight_degraded_link`` turns into a warning or a stop.

An NVIDIA GPU's link *speed* below its maximum is not proof of a fault: the GPU lowers
its link speed with its performance state when idle (an NVIDIA engineer's table in
NVIDIA/open-gpu-kernel-modules#731 shows P8 at generation 1 of 4, P0 at 3 of 4), and
retrains it under load. Preflight reads an idle GPU, so that case is a ``speed_idle``
finding that never stops the host; the width does not change with the power state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MODES = ("warn", "fail", "ignore")


def _fmt(speed, width):
    return "%s GT/s x%s" % ("?" if speed is None else "%g" % speed, "?" if width is None else width)


def _below(current, maximum):
    return isinstance(current, (int, float)) and isinstance(maximum, (int, float)) and current < maximum


def degraded_links(facts):
    """``[{"device", "kind", "address", "reason", "current", "max", "message"}]`` for every
    GPU and RDMA NIC whose link is below its maximum; ``reason`` is ``width``, ``speed``
    (both stop the host when the knob says fail) or ``speed_idle`` (a GPU: never stops)."""
    facts = facts or {}
    devices = [("GPU", g.get("address"), g.get("address"), g.get("link")) for g in facts.get("gpus") or []]
    seen = set()
    for dev in facts.get("rdma_devices") or []:
        address = dev.get("pci_address")
        if not address or address in seen:
            continue
        seen.add(address)
        devices.append(("NIC", "%s (%s)" % (dev.get("name"), address), address, dev.get("link")))
    findings = []
    for kind, label, address, link in devices:
        link = link or {}
        cur_s, cur_w = link.get("current_speed_gts"), link.get("current_width")
        max_s, max_w = link.get("max_speed_gts"), link.get("max_width")
        narrow, slow = _below(cur_w, max_w), _below(cur_s, max_s)
        if not (narrow or slow):
            continue
        reason = "width" if narrow else "speed_idle" if kind == "GPU" else "speed"
        current, maximum = _fmt(cur_s, cur_w), _fmt(max_s, max_w)
        if reason == "speed_idle":
            message = ("%s %s: PCIe link at %s, below its maximum %s; an idle NVIDIA GPU lowers its link speed "
                       "(it retrains under load), so this alone does not stop the host - the verification's "
                       "bandwidth tells" % (kind, label, current, maximum))
        else:
            message = ("%s %s: PCIe link trained at %s, below its maximum %s (%s): reseat the card, check the "
                       "riser/retimer and the slot's wiring (lspci -vv: LnkSta against LnkCap)"
                       % (kind, label, current, maximum, "narrower" if narrow else "slower"))
        findings.append({"device": label, "kind": kind, "address": address, "reason": reason,
                         "current": current, "max": maximum, "message": message})
    return findings


def stops_host(finding, mode):
    """Whether one finding stops the host under ``gpudirect_preflight_degraded_link``."""
    if mode not in MODES:
        raise ValueError("gpudirect_preflight_degraded_link must be one of %s, got %r" % (", ".join(MODES), mode))
    return mode == "fail" and finding.get("reason") in ("width", "speed")
