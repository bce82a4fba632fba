# -*- coding: utf-8 -*-
"""GPU <-> RDMA NIC pairs of ``ansible_facts.gpudirect.pairs``: the PCIe path between the two,
their distance class (PIX/PXB/PHB/NODE/SYS, module_utils/gpudirect_pci.py), the ACS state of
every bridge on the path and the path's verdict (``clear``, ``redirect``, ``unknown``).

Read-only; the collector (module_utils/gpudirect_facts_collector.py) calls :func:`gpu_nic_pairs`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.gpudirect_pci import (
    common_ancestor,
    device_acs,
    distance,
    pci_device_dir,
    union_path,
)


def acs_path_verdict(acs):
    """``{"acs_verdict", "acs_verdict_reason"}`` of one GPU/NIC path from its bridge entries:
    ``redirect`` when a bridge with a readable ACS capability redirects peer-to-peer traffic,
    else ``unknown`` when any bridge's ACS state cannot be known (never called clear), else
    ``clear``."""
    redirecting = [e for e in acs if e["readable"] and e["p2p_redirect"]]
    unknown = [e for e in acs if not e["readable"]]
    unknown_text = "; ".join("%s: %s" % (e["address"], e["reason"]) for e in unknown)
    if redirecting:
        reason = "ACS redirects peer-to-peer traffic on %s" % ", ".join(
            "%s (ACSCtl %s)" % (e["address"], e["acs_ctl_hex"]) for e in redirecting)
        if unknown:
            reason += "; ACS state unknown on %s" % unknown_text
        return {"acs_verdict": "redirect", "acs_verdict_reason": reason}
    if unknown:
        return {"acs_verdict": "unknown", "acs_verdict_reason": "ACS state unknown on %s" % unknown_text}
    return {"acs_verdict": "clear",
            "acs_verdict_reason": "no bridge on the path has ReqRedir, CmpltRedir or EgressCtrl set"}


def bridge_acs(root, fn, address):
    """The ACS entry of the bridge at ``address`` (``fn`` its PciFunction, or None), or None when
    the bridge has no ACS capability."""
    info = device_acs(pci_device_dir(root, address))
    if info["status"] == "absent":
        return None
    # unreadable (short read, not root) and unknown (extended space not readable, corrupt
    # capability list) are both "unknown" here: nothing is known about the bridge's ACS
    return {
        "address": address,
        "vendor_id": None if fn is None or fn.vendor is None else "0x%04x" % fn.vendor,
        "device_id": None if fn is None or fn.device is None else "0x%04x" % fn.device,
        "status": "present" if info["status"] == "present" else "unknown",
        "reason": info["reason"],
        "readable": info["status"] == "present",
        "acs_offset": info["offset"],
        "acs_ctl_offset": info["ctl_offset"],
        "acs_cap": info["cap"],
        "acs_cap_bits": info["cap_bits"],
        "acs_ctl": info["ctl"],
        "acs_ctl_hex": info["ctl_hex"],
        "enabled_bits": info["enabled_bits"],
        "p2p_redirect": info["p2p_redirect"],
    }


def gpu_nic_pairs(root, gpus, nics, functions, function, warn):
    """One pair per GPU (``gpus`` facts) and RDMA device (``nics`` facts) whose PCI functions are
    known. ``functions`` maps address -> PciFunction; ``function(address)`` looks one up (reading it
    when missing); ``warn(text)`` records a pair that could not be built."""
    pairs = []
    cache = {}

    def acs_of(address):
        if address not in cache:
            cache[address] = bridge_acs(root, functions.get(address), address)
        return cache[address]

    for gpu in gpus:
        gfn = functions.get(gpu["address"])
        for nic in nics:
            nfn = function(nic.get("pci_address"))
            if gfn is None or nfn is None:
                continue
            try:
                path = union_path(gfn, nfn)
                acs = [e for e in (acs_of(b) for b in path) if e is not None]
                pair = {
                    "gpu": "GPU%d" % (gpu["index"] if gpu.get("index") is not None else gpu["ordinal"]),
                    "gpu_address": gpu["address"],
                    "nic": nic["name"],
                    "nic_address": nfn.address,
                    "distance": distance(gfn, nfn),
                    "common_ancestor": common_ancestor(gfn, nfn),
                    "path": path,
                    "acs_redirect": any(e["p2p_redirect"] for e in acs if e["readable"]),
                    "acs": acs,
                }
                pair.update(acs_path_verdict(acs))
                pairs.append(pair)
            except Exception as exc:
                warn("pair %s/%s: skipped (%s: %s)" % (gpu["address"], nic["name"], type(exc).__name__, exc))
    return pairs
