"""Turn ``ansible_facts.gpudirect`` into findings and a readable per-host table.

Pure functions over the facts dictionary produced by ``library/gpudirect_facts.py``;
the playbooks print their output and decide what is fatal.

Distance verdicts follow the bring-up notes in the project's sources: GPUDirect
RDMA performs well across PIX and PXB, usually well across PHB, and badly across
NODE and SYS (measured there: ~10 GB/s PIX against ~2 GB/s SYS on 100 Gb/s RoCE).
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

from ansible.module_utils.gpudirect_topo_matrix import gpudirect_distance_verdict  # noqa: E402
from ansible.module_utils import gpudirect_limits as _limits  # noqa: E402
from ansible.module_utils import gpudirect_secure_boot as _secure_boot  # noqa: E402
from ansible.module_utils import gpudirect_nvlink as _nvlink  # noqa: E402

from ansible.module_utils import gpudirect_topology as _topology  # noqa: E402


def _distance_rank(distance):
    if distance not in _topology.DISTANCE_ORDER:
        raise AnsibleFilterError("unknown GPU/NIC distance class %r; expected one of %s"
                                 % (distance, ", ".join(_topology.DISTANCE_ORDER)))
    return _topology.distance_rank(distance)


def gpudirect_best_pair(facts):
    """Return the closest GPU/NIC pair (lowest distance class), or None without pairs."""
    pairs = (facts or {}).get("pairs") or []
    if not pairs:
        return None
    return min(pairs, key=lambda p: (_distance_rank(p["distance"]), p["gpu_address"], p["nic"]))


def _acs_enabled(pair):
    return [b for b in pair.get("acs") or [] if b.get("readable", True) and b.get("acs_ctl")]


def _reasons(reboot_reasons):
    if reboot_reasons is None:
        return []
    if isinstance(reboot_reasons, str) or not isinstance(reboot_reasons, (list, tuple)):
        raise AnsibleFilterError("reboot_reasons must be a list of strings (gpudirect_reboot_reasons), got %r"
                                 % (reboot_reasons,))
    return [str(r) for r in reboot_reasons]


def gpudirect_findings(facts, max_distance="SYS", reboot_reasons=None, signing_configured=None):
    """List what stands between this host and working GPUDirect RDMA.

    Each finding is ``{"severity": "fatal"|"bad"|"warn"|"info", "check": name,
    "message": text}``. ``fatal`` means no later stage can fix it; ``bad`` means
    verification is expected to fail or underperform until an admin acts.
    ``max_distance`` is the farthest distance class accepted for the closest pair.
    ``reboot_reasons`` are the reboots this run's stages asked for and did not get
    (``gpudirect_reboot_reasons`` after the reboot stage): what they changed takes
    effect only after it, which the facts of the running system cannot show.
    ``signing_configured`` (whether the gpudirect_dkms signing knobs are set; None: unknown)
    adds the module-signing finding when the kernel refuses unsigned modules.
    """
    facts = facts or {}
    _distance_rank(max_distance)
    run_reasons = _reasons(reboot_reasons)
    findings = []

    def add(severity, check, message):
        findings.append({"severity": severity, "check": check, "message": message})

    best = gpudirect_best_pair(facts)
    if best is not None:
        verdict = gpudirect_distance_verdict(best["distance"])
        if _distance_rank(best["distance"]) > _distance_rank(max_distance):
            add("fatal", "topology",
                "closest GPU/NIC pair %s <-> %s is %s, farther than the accepted %s: move the GPU "
                "or NIC to slots under the same PCIe switch" % (best["gpu_address"], best["nic"],
                                                                 best["distance"], max_distance))
        elif verdict != "good":
            add("warn" if verdict == "warn" else "bad", "topology",
                "closest GPU/NIC pair %s <-> %s is %s: GPUDirect RDMA works but %s"
                % (best["gpu_address"], best["nic"], best["distance"],
                   "may be slower than PIX/PXB" if verdict == "warn"
                   else "bandwidth is typically a fraction of PIX/PXB"))
        for bridge in _acs_enabled(best):
            add("warn", "acs",
                "ACS is enabled on bridge %s (ACSCtl %s: %s) on the path of %s <-> %s: peer-to-peer "
                "traffic is redirected through the root complex until the pcie_acs stage clears it"
                % (bridge["address"], bridge.get("acs_ctl_hex"), " ".join(bridge.get("enabled_bits") or []),
                   best["gpu_address"], best["nic"]))
        for bridge in [b for b in best.get("acs") or [] if b.get("status") == "unknown"]:
            add("warn", "acs",
                "ACS state of bridge %s on the path of %s <-> %s is unknown (%s): the path is not known "
                "to be ACS-clear" % (bridge["address"], best["gpu_address"], best["nic"], bridge.get("reason")))

    for fn in facts.get("unbound_mellanox_functions") or []:
        add("bad", "nic_driver",
            "Mellanox PCI function %s has no driver bound: load the OFED driver, or run "
            "`echo 1 > /sys/bus/pci/devices/%s/remove; echo 1 > /sys/bus/pci/rescan`"
            % (fn.get("address"), fn.get("address")))

    for dev in facts.get("rdma_devices") or []:
        for num, port in sorted((dev.get("ports") or {}).items()):
            if port.get("state") != "ACTIVE":
                add("warn", "port_state", "RDMA device %s port %s is %s (physical state %s)"
                    % (dev.get("name"), num, port.get("state"), port.get("phys_state")))

    kernel = facts.get("kernel") or {}
    if kernel.get("reboot_pending") or run_reasons:
        reasons = list(kernel.get("reboot_reasons") or []) if kernel.get("reboot_pending") else []
        reasons += [r for r in run_reasons if r not in reasons]
        add("warn", "kernel", "reboot pending: %s; the lines above show the running system, not what "
                              "the next boot gets" % "; ".join(reasons or ["default boot kernel differs from running"]))

    oops = (facts.get("kernel_oops") or {})
    if oops.get("lines"):
        add("bad", "kernel_log", "kernel log reports driver faults since boot (first: %s)" % oops["lines"][0])

    # judged on what a job gets (new logins, new services), not on the surveying session
    for severity, message in _limits.memlock_findings(facts.get("memlock")):
        add(severity, "memlock", message)

    for severity, message in _secure_boot.findings(facts.get("secure_boot"), signing_configured):
        add(severity, "signing", message)

    # bad, not fatal: the driver stage installs and starts the fabric manager (and NVLSM) that
    # bring it up; verification then fails a GPU still off its fabric
    nvlink = facts.get("nvlink") or {}
    fabric = _nvlink.judge_fabric(facts.get("gpus") or [], bool(nvlink.get("fabric_available")),
                                  nvlink.get("fabric_reason") or nvlink.get("reason"))
    if fabric["status"] == "failed":
        add("bad", "nvlink_fabric", "%s: CUDA cannot start on those GPUs until it is; %s"
            % (fabric["reason"], _nvlink.FABRIC_FIX))

    imex = facts.get("imex") or {}
    if imex.get("installed") and imex.get("problems"):
        add("warn", "imex", "the IMEX domain is not whole (%s): multi-node NVLink memory sharing fails for jobs that "
            "span the missing nodes; every node of gpudirect_nvidia_driver_imex_nodes must run nvidia-imex with the same list"
            % "; ".join(imex["problems"][:4]))

    for warning in facts.get("warnings") or []:
        add("info", "facts", warning)
    return findings


def _fmt_link(link):
    link = link or {}

    def one(speed, width):
        if speed is None and width is None:
            return "?"
        return "%s GT/s x%s" % (speed if speed is not None else "?", width if width is not None else "?")
    return "%s (max %s)" % (one(link.get("current_speed_gts"), link.get("current_width")),
                            one(link.get("max_speed_gts"), link.get("max_width")))


def _fmt_nvlink(gpu, nvlink):
    """'NVLink 18/18 links up, 26.562 GB/s each (478.116 GB/s); fabric Completed/Success, clique 0,
    cluster 00000000-...' for one GPU; where the facts did not read them, why (``nvlink`` is the facts'
    ``nvlink`` section: a node without nvidia-smi says so, it is not a finding)."""
    nvlink = nvlink or {}
    links = gpu.get("nvlink")
    if links is None:
        text = "NVLink not read (%s)" % (nvlink.get("reason") or "facts without the nvlink section")
    elif not links.get("links_total"):
        text = "NVLink none (no link listed)"
    else:
        speed = links.get("link_speed_gbytes_s")
        text = "NVLink %s/%s links up, %s (%s GB/s)" % (
            links.get("links_up"), links.get("links_total"),
            "%s GB/s each" % speed if speed is not None else "speeds differ" if links.get("links_up") else "none up",
            links.get("total_gbytes_s"))
    fabric = gpu.get("fabric")
    if fabric is None:
        text += "; fabric not read (%s)" % (nvlink.get("fabric_reason") or "facts without the nvlink section")
    else:
        text += "; fabric %s/%s, clique %s, cluster %s" % (
            fabric.get("state") or "N/A", fabric.get("status") or "N/A",
            "N/A" if fabric.get("clique_id") is None else fabric.get("clique_id"), fabric.get("cluster_uuid") or "N/A")
    return text


def gpudirect_preflight_report(facts, host="", max_distance="SYS", reboot_reasons=None, signing_configured=None,
                               nic_config=None, roce_qos=None):
    """Render the facts as a list of lines: one readable table per host.

    Every line describes the running system (loaded modules, booted command line,
    live ACS registers). ``reboot_reasons`` (``gpudirect_reboot_reasons``: reboots
    this run asked for and did not get) adds a line saying so, and the lines a
    reboot changes are marked as read before it. ``nic_config`` (the ``gpudirect_nic_config_plan`` fact)
    adds the NIC firmware section (:func:`gpudirect_nic_firmware_lines`); None leaves it out.
    ``roce_qos`` (the ``gpudirect_roce_qos_plan`` fact) adds the RoCE QoS section
    (:func:`gpudirect_roce_qos_lines`); None leaves it out.
    """
    facts = facts or {}
    run_reasons = _reasons(reboot_reasons)
    lines = ["GPUDirect RDMA: %s" % host if host else "GPUDirect RDMA"]

    kernel = facts.get("kernel") or {}
    pending = bool(kernel.get("reboot_pending") or run_reasons)
    before = " (before the pending reboot)" if pending else ""
    lines.append("  kernel     running %s, default boot %s%s" % (
        kernel.get("running"), kernel.get("default") or "unknown",
        ", REBOOT PENDING" if pending else ""))
    if run_reasons:
        lines.append("  reboot     asked for by this run, not done: %s" % "; ".join(run_reasons))

    drv = facts.get("nvidia_driver") or {}
    lines.append("  driver     %s%s" % ("loaded nvidia %s (%s kernel module)" % (drv.get("version"), drv.get("flavor"))
                                        if drv.get("loaded") else "nvidia kernel module not loaded", before))
    peer = facts.get("peermem") or {}
    dmabuf = facts.get("dmabuf") or {}
    lines.append("  peer mem   nvidia_peermem %s, nv_peer_mem %s, dma-buf prerequisites %s%s" % (
        "loaded" if peer.get("nvidia_peermem") else "not loaded",
        "loaded" if peer.get("nv_peer_mem") else "not loaded",
        "met" if dmabuf.get("kernel_ok") and dmabuf.get("open_module") else "not met", before))
    iommu = facts.get("iommu") or {}
    lines.append("  iommu      %s%s" % (iommu.get("mode", "unknown"),
                                       " (as booted; the command line changes at the pending reboot)"
                                       if pending else ""))
    for n, text in enumerate(_limits.memlock_lines(facts.get("memlock"))):
        lines.append("  %-10s %s" % ("memlock" if n == 0 else "", text))

    if "secure_boot" in facts:
        for n, text in enumerate(_secure_boot.report_lines(facts.get("secure_boot"))):
            lines.append("  %-10s %s" % ("signing" if n == 0 else "", text))

    gpus = facts.get("gpus") or []
    lines.append("  GPUs       %d" % len(gpus))
    for gpu in gpus:
        lines.append("    %s %s:%s %s %s numa %s driver %s" % (
            gpu.get("address"), gpu.get("vendor_id"), gpu.get("device_id"), gpu.get("name") or "",
            _fmt_link(gpu.get("link")), gpu.get("numa_node"), gpu.get("driver")))
        lines.append("      %s" % _fmt_nvlink(gpu, facts.get("nvlink")))
    imex = facts.get("imex") or {}
    if imex.get("installed"):
        if imex.get("domain_state") is None:
            lines.append("  IMEX       not read (%s)" % (imex.get("reason") or "unknown"))
        else:
            ready = sum(1 for n in imex.get("nodes") or [] if n.get("state") == "READY")
            lines.append("  IMEX       domain %s, %d/%d nodes READY%s" % (
                imex["domain_state"], ready, len(imex.get("nodes") or []),
                "" if not imex.get("problems") else ": " + "; ".join(imex["problems"][:4])
                + (" (+%d more)" % (len(imex["problems"]) - 4) if len(imex["problems"]) > 4 else "")))
    nics = facts.get("rdma_devices") or []
    lines.append("  RDMA NICs  %d" % len(nics))
    for dev in nics:
        ports = ", ".join("port %s %s %s %s" % (n, p.get("state"), p.get("link_layer"), p.get("rate") or "")
                          for n, p in sorted((dev.get("ports") or {}).items()))
        lines.append("    %s %s netdev %s %s" % (dev.get("name"), dev.get("pci_address"),
                                                  ",".join(dev.get("netdevs") or []) or "-", ports))
    for fn in facts.get("unbound_mellanox_functions") or []:
        lines.append("    %s Mellanox %s:%s NO DRIVER BOUND" % (fn.get("address"), fn.get("vendor_id"),
                                                                fn.get("device_id")))

    if nic_config is not None:
        lines.extend(gpudirect_nic_firmware_lines(facts, nic_config, "  "))
    if roce_qos is not None:
        lines.extend(gpudirect_roce_qos_lines(roce_qos, "  ", facts))

    pairs = facts.get("pairs") or []
    if pairs:
        lines.append("  GPU/NIC pairs (distance as in nvidia-smi topo -m)")
        lines.append("    %-14s %-22s %-8s %-8s %s" % ("GPU", "NIC", "distance", "verdict", "ACS on path"))
        for pair in sorted(pairs, key=lambda p: (_distance_rank(p["distance"]), p["gpu_address"], p["nic"])):
            acs = _acs_enabled(pair)
            acs_text = ", ".join("%s %s" % (b["address"], b.get("acs_ctl_hex")) for b in acs) or "clear"
            if pair.get("acs_verdict") == "unknown":
                acs_text = "UNKNOWN (%s)" % pair.get("acs_verdict_reason")
            elif any(not b.get("readable", True) for b in pair.get("acs") or []):
                acs_text += " (some bridges unreadable: run with become)"
            lines.append("    %-14s %-22s %-8s %-8s %s" % (
                pair["gpu_address"], "%s %s" % (pair["nic"], pair.get("nic_address") or ""),
                pair["distance"], gpudirect_distance_verdict(pair["distance"]), acs_text))
    else:
        lines.append("  GPU/NIC pairs: none (%s)" % (
            "no GPU" if not gpus else "no RDMA device" if not nics else "no pair"))

    findings = gpudirect_findings(facts, max_distance, run_reasons, signing_configured)
    lines.append("  findings   %s" % ("none" if not findings else len(findings)))
    for f in findings:
        lines.append("    %-5s %-10s %s" % (f["severity"].upper(), f["check"], f["message"]))
    return lines


# --------------------------------------------------------------------------------------------
# NIC firmware (issue #32): the nic_config plan (library/gpudirect_nic_config.py, registered by
# roles/gpudirect_nic_config/tasks/plan.yml as gpudirect_nic_config_plan) beside the firmware version in the facts
# (rdma_devices[].fw_ver, read from /sys/class/infiniband/<dev>/fw_ver). No query of its own.
# --------------------------------------------------------------------------------------------

# the module's per-card list (library/gpudirect_nic_config.py card_report) -> the parameter's state
_NIC_PARAM_STATES = (
    ("in_place", "in_place"),
    ("to_set", "to_set"),
    ("pending", "pending"),
    ("unsupported", "not_exposed"),
    ("deferred", "deferred"),
    ("skipped", "skipped"),
)
_NIC_MARKERS = {
    "in_place": "ok",
    "to_set": "DIFFERS from the knobs: next boot is not the wanted value (gpudirect_nic_config sets it; a firmware reset "
              "loads it)",
    "pending": "DIFFERS from the knobs: running value; next boot already holds the wanted value (waits for a "
               "firmware reset or reboot)",
    "not_exposed": "NOT EXPOSED by this card (reported, not failed; left alone)",
    "deferred": "HIDDEN by the firmware until ADVANCED_PCI_SETTINGS=1 is in effect (set by the run after the reset)",
    "skipped": "SKIPPED",
}
# how a status reads in "configuration not read (...)"
_NIC_STATUS_LABEL = {"not_read": "no plan in this run", "not_configured": "not configured", "tool_missing": "tool missing",
                     "no_card": "no card", "not_queried": "not queried"}
_SOFTWARE_RDMA_DRIVERS = ("rdma_rxe", "siw")
_NIC_PLAN_KEYS = ("wanted", "devices")


def _card_key(pci):
    """'0000:17:00.1' -> '0000:17:00' (the card: bus and device; its functions share the NV config)."""
    return pci.rsplit(".", 1)[0] if isinstance(pci, str) and "." in pci else pci


def _nic_status(nic_config):
    """(status, reason) of the firmware configuration read as a whole."""
    if nic_config is None:
        return ("not_read", "the gpudirect_nic_config plan (roles/gpudirect_nic_config/tasks/plan.yml) did not run on this host in this "
                            "run: no plan pass and no gpudirect_nic_config role (playbooks/verify.yml alone, or the stage "
                            "left out by tag)")
    wanted = nic_config.get("wanted")
    if isinstance(wanted, str):     # a plan record templated to text: "True" / "False"
        wanted = wanted.strip().lower() in ("true", "yes", "1")
    if not wanted:
        return ("not_configured", "gpudirect_nic_config_profiles and gpudirect_nic_config_params are empty: no firmware value is wanted, "
                                  "so the cards' configuration is not read")
    if nic_config.get("tool_missing"):
        return ("tool_missing", nic_config["tool_missing"])
    if not nic_config.get("devices"):
        return ("no_card", nic_config.get("skip_reason") or "gpudirect_nic_config found no ConnectX physical function to query")
    return ("read", "")


def _nic_param_rows(card, where):
    rows = []
    for key, state in _NIC_PARAM_STATES:
        entries = card.get(key) or []
        if not isinstance(entries, list):
            raise AnsibleFilterError("gpudirect_nic_firmware: %s: %s must be a list of parameter rows, got %r"
                                     % (where, key, entries))
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("param"):
                raise AnsibleFilterError("gpudirect_nic_firmware: %s: a %s row without a param: %r"
                                         % (where, key, entry))
            marker = _NIC_MARKERS[state]
            if state == "skipped" and entry.get("reason"):
                marker = "SKIPPED: %s" % entry["reason"]
            read = state in ("in_place", "to_set", "pending")
            rows.append({
                "param": entry["param"],
                "state": state,
                "differs": state in ("to_set", "pending"),
                "wanted": entry.get("wanted"),
                "current": entry.get("current") if read else None,
                "next_boot": entry.get("next_boot") if read else None,
                "source": entry.get("source"),
                "marker": marker,
            })
    return sorted(rows, key=lambda r: r["param"])


def gpudirect_nic_firmware(facts, nic_config=None):
    """Per ConnectX card (and every other RDMA NIC of the facts): its firmware version and the
    firmware configuration values nic_config manages, with the ones that differ from the knobs.

    ``facts``: ``ansible_facts.gpudirect`` (``rdma_devices`` with ``pci_address`` and ``fw_ver``).
    ``nic_config``: the ``gpudirect_nic_config_plan`` fact (``wanted``, ``devices``, ``tool_missing``, ...);
    None when the plan did not run. Returns a list of cards, each ``pci``, ``rdma_devices``,
    ``type``, ``part``, ``fw_ver`` (None when sysfs had none), ``status`` (``read``,
    ``not_configured``, ``tool_missing``, ``no_card``, ``not_read``, ``not_queried``), ``reason``,
    ``current_known``, ``params`` (``param``, ``state``, ``differs``, ``wanted``, ``current``,
    ``next_boot``, ``source``, ``marker``), ``differs`` and ``not_exposed`` (parameter names), ``firmware``
    (``psid``, ``running``, ``pending``, ``pinned``, ``state``, ``marker``; None when no image is pinned)."""
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("gpudirect_nic_firmware: the input must be ansible_facts.gpudirect (a dict), got %s"
                                 % type(facts).__name__)
    facts = facts or {}
    if nic_config is not None:
        if not isinstance(nic_config, dict) or any(k not in nic_config for k in _NIC_PLAN_KEYS):
            raise AnsibleFilterError("gpudirect_nic_firmware: nic_config must be the gpudirect_nic_config_plan fact (a dict with "
                                     "wanted and devices, from roles/gpudirect_nic_config/tasks/plan.yml) or none, got %r"
                                     % (nic_config,))
        if not isinstance(nic_config["devices"], list):
            raise AnsibleFilterError("gpudirect_nic_firmware: nic_config.devices must be a list, got %r"
                                     % (nic_config["devices"],))
    status, reason = _nic_status(nic_config)

    # the RDMA devices of the facts, by card (a card's ports are functions of one bus/device)
    by_card = {}
    for dev in facts.get("rdma_devices") or []:
        if dev.get("driver") in _SOFTWARE_RDMA_DRIVERS or not dev.get("pci_address"):
            continue  # soft-RoCE / siw: no firmware of its own
        by_card.setdefault(_card_key(dev["pci_address"]), []).append(dev)

    cards = []
    seen = set()
    for index, card in enumerate((nic_config or {}).get("devices") or []):
        where = "nic_config.devices[%d]" % index
        if not isinstance(card, dict) or not isinstance(card.get("pci"), str):
            raise AnsibleFilterError("gpudirect_nic_firmware: %s has no pci address: %r" % (where, card))
        key = _card_key(card["pci"])
        seen.add(key)
        devs = sorted(by_card.get(key, []), key=lambda d: d.get("name") or "")
        queried = "to_set" in card or "in_place" in card
        card_status, card_reason = status, reason
        if status == "read" and not queried:
            card_status, card_reason = "not_queried", "gpudirect_nic_config returned no query of this card"
        cards.append({
            "pci": card["pci"],
            "rdma_devices": [d.get("name") for d in devs],
            "type": card.get("type"),
            "part": card.get("part"),
            "fw_ver": _one_fw_ver(devs),
            "status": card_status,
            "reason": card_reason,
            "current_known": card.get("current_known") if queried else None,
            "params": _nic_param_rows(card, where) if queried else [],
            "firmware": _nic_firmware_version(card.get("firmware"), where),
        })
    for key in sorted(k for k in by_card if k not in seen):
        devs = sorted(by_card[key], key=lambda d: d.get("name") or "")
        card_status, card_reason = status, reason
        if status == "read":
            card_status, card_reason = "not_queried", "not a ConnectX card gpudirect_nic_config queried (another vendor, or " \
                                                      "left out by gpudirect_nic_config_devices)"
        cards.append({
            "pci": min(d["pci_address"] for d in devs),
            "rdma_devices": [d.get("name") for d in devs],
            "type": None,
            "part": None,
            "fw_ver": _one_fw_ver(devs),
            "status": card_status,
            "reason": card_reason,
            "current_known": None,
            "params": [],
            "firmware": None,
        })
    for card in cards:
        card["differs"] = [r["param"] for r in card["params"] if r["differs"]]
        card["not_exposed"] = [r["param"] for r in card["params"] if r["state"] == "not_exposed"]
    return sorted(cards, key=lambda c: c["pci"])


_NIC_FIRMWARE_MARKERS = {
    "in_place": "ok",
    "to_update": "DIFFERS from the pinned image",
    "pending_reset": "BURNED, waits for a firmware reset or reboot",
    "no_image": "NO PINNED IMAGE for this PSID",
    "not_read": "not read",
}


def _nic_firmware_version(firmware, where):
    """The card's firmware version against gpudirect_nic_config_firmware (None: no image pinned at all)."""
    if firmware is None:
        return None
    if not isinstance(firmware, dict) or "state" not in firmware:
        raise AnsibleFilterError("gpudirect_nic_firmware: %s: firmware must be the module's firmware report (a dict "
                                 "with state), got %r" % (where, firmware))
    out = dict((k, firmware.get(k)) for k in ("psid", "running", "pending", "pinned", "state"))
    out["marker"] = _NIC_FIRMWARE_MARKERS.get(firmware["state"], firmware["state"])
    return out


def _one_fw_ver(devs):
    versions = sorted(set(d.get("fw_ver") for d in devs if d.get("fw_ver")))
    return ", ".join(versions) if versions else None


def gpudirect_nic_firmware_lines(facts, nic_config=None, indent="  "):
    """The result of :func:`gpudirect_nic_firmware` as readable lines: a title saying whether the
    firmware configuration was read (and why not), then per card its firmware version and each
    managed parameter with current, next boot, wanted and a marker."""
    cards = gpudirect_nic_firmware(facts, nic_config)
    status, reason = _nic_status(nic_config)
    if status == "read":
        differ = sum(len(c["differs"]) for c in cards)
        if differ:
            summary = "%d parameter(s) differ from the knobs" % differ
        elif any(c["not_exposed"] for c in cards):
            summary = "no exposed parameter differs from the knobs"
        else:
            summary = "every managed parameter as the knobs want"
        title = "NIC firmware: configuration read by gpudirect_nic_config; " + summary
    else:
        title = "NIC firmware: configuration not read (%s): %s" % (_NIC_STATUS_LABEL.get(status, status), reason)
    lines = [indent + title]
    if not cards:
        lines.append(indent + "  no RDMA NIC with a PCI function in the facts")
    for card in cards:
        lines.append(indent + "  %s %s %s%s fw %s" % (
            card["pci"], ",".join(card["rdma_devices"]) or "-", card["type"] or "",
            (" " + card["part"]) if card["part"] else "",
            card["fw_ver"] or "unknown (no fw_ver in /sys/class/infiniband)"))
        if card["status"] != status:
            lines.append(indent + "    configuration not read (%s): %s" % (_NIC_STATUS_LABEL.get(card["status"],
                                                                                                card["status"]),
                                                                           card["reason"]))
        firmware = card.get("firmware")
        if firmware:
            lines.append(indent + "    firmware PSID %s running %s pending %s pinned %s %s" % (
                firmware["psid"] or "?", firmware["running"] or "?", firmware["pending"] or "-",
                firmware["pinned"] or "-", firmware["marker"]))
        if card["status"] == "read" and card["current_known"] is False:
            lines.append(indent + "    the tool printed Next Boot only: a value waiting for a firmware reset cannot "
                                  "be seen")
        for row in card["params"]:
            if row["state"] in ("in_place", "to_set", "pending"):
                lines.append(indent + "    %-24s current %-12s next boot %-12s wanted %-8s %s" % (
                    row["param"], row["current"] if row["current"] is not None else "?",
                    row["next_boot"] if row["next_boot"] is not None else "?", row["wanted"], row["marker"]))
            else:
                lines.append(indent + "    %-24s %s%s" % (
                    row["param"], ("wanted %s: " % row["wanted"]) if row["wanted"] is not None else "",
                    row["marker"]))
    return lines


# RoCE QoS (issue #32, outcomes 2 and 4): the gpudirect_roce_qos plan (library/gpudirect_roce_qos.py,
# registered by roles/gpudirect_roce_qos/tasks/plan.yml as gpudirect_roce_qos_plan), per port the
# values read against the knobs, marked where they differ or where the port does not expose them.
_ROCE_QOS_KEYS = ("wanted", "ports", "changes", "not_exposed")
# per value the knob it comes from (the port's report keys to the plan's wanted keys)
_ROCE_QOS_VALUES = (("trust", "trust"), ("pfc", "pfc_priorities"), ("mtu", "mtu"), ("ecn_np", "ecn_priorities"),
                    ("ecn_rp", "ecn_priorities"), ("cnp_dscp", "cnp_dscp"), ("cnp_802p_prio", "cnp_802p_prio"),
                    ("rdma_cm_mode", "rdma_cm_mode"), ("rdma_cm_tos", "rdma_cm_tos"))
_ROCE_QOS_DISRUPTIVE = ("trust", "pfc", "mtu")
_RDMA_CM_KEYS = ("rdma_cm_mode", "rdma_cm_tos")


def _roce_qos_text(key, value):
    if value is None:
        return "?"
    if key in ("pfc", "ecn_np", "ecn_rp", "pfc_priorities", "ecn_priorities"):
        return ",".join(str(p) for p in value) or "none"
    return str(value)


def _rdma_cm_fact_lines(facts, indent):
    """RDMA-CM's defaults as gpudirect_facts read them back (``rdma_devices[].rdma_cm``), for a section whose plan
    does not manage them: one line per RoCE port, or per device the reason they were not read."""
    lines = []
    for dev in (facts or {}).get("rdma_devices") or []:
        cm = dev.get("rdma_cm") if isinstance(dev, dict) else None
        if not isinstance(cm, dict):
            continue
        for number, port in sorted((cm.get("ports") or {}).items()):
            tos = port.get("default_roce_tos")
            lines.append(indent + "  %s port %s: RoCE mode %s, ToS %s" % (
                dev.get("name"), number, port.get("default_roce_mode") or "?",
                "?" if tos is None else "%s (DSCP %s)" % (tos, port.get("dscp"))))
        for number, errors in sorted((cm.get("errors") or {}).items()):
            for attr, why in sorted(errors.items()):
                lines.append(indent + "  %s port %s: %s not read: %s" % (dev.get("name"), number, attr, why))
        if not cm.get("read") and cm.get("reason") and not cm.get("ports") \
                and not cm["reason"].startswith("no RoCE (Ethernet) port"):
            lines.append(indent + "  %s: not read: %s" % (dev.get("name"), cm["reason"]))
    if not lines:
        return []
    return [indent + "RDMA-CM defaults as gpudirect_facts read them (not managed by gpudirect_roce_qos: "
                     "gpudirect_roce_qos_dscp unset or gpudirect_roce_qos_rdma_cm false)"] + lines


def gpudirect_roce_qos_lines(roce_qos=None, indent="  ", facts=None):
    """The RoCE QoS section: a title saying whether the ports were read (how many values differ from the
    knobs) or why not, then per RoCE port each wanted value with current, wanted and a marker (RDMA-CM's
    defaults too, with the class its traffic lands in where the port's dscp2prio map was read), and the
    ports left out with their reason. ``roce_qos``: the ``gpudirect_roce_qos_plan`` fact, or None (the
    plan did not run on this host in this run). ``facts`` (``ansible_facts.gpudirect``): where the plan does
    not manage RDMA-CM's defaults, the values gpudirect_facts read back are listed after the section."""
    if roce_qos is not None and (not isinstance(roce_qos, dict) or any(k not in roce_qos for k in _ROCE_QOS_KEYS)
                                 or not isinstance(roce_qos["ports"], list)):
        raise AnsibleFilterError("gpudirect_roce_qos_lines: roce_qos must be the gpudirect_roce_qos_plan fact (a dict "
                                 "with wanted, ports, changes and not_exposed, from "
                                 "roles/gpudirect_roce_qos/tasks/plan.yml) or none, got %r" % (roce_qos,))
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("gpudirect_roce_qos_lines: facts must be ansible_facts.gpudirect (a dict) or none, "
                                 "got %r" % (facts,))
    if roce_qos is None:
        return [indent + "RoCE QoS: not read (no plan in this run): the gpudirect_roce_qos plan "
                         "(roles/gpudirect_roce_qos/tasks/plan.yml) did not run on this host in this run"] \
            + _rdma_cm_fact_lines(facts, indent)
    if not roce_qos["wanted"]:
        return [indent + "RoCE QoS: not read (not configured): every gpudirect_roce_qos_* value is unset; no port "
                         "is read or changed"] + _rdma_cm_fact_lines(facts, indent)
    cm = roce_qos.get("rdma_cm") or {}
    lines = []
    differ = 0
    for index, port in enumerate(roce_qos["ports"]):
        if not isinstance(port, dict) or not isinstance(port.get("current"), dict) \
                or not isinstance(port.get("wanted"), dict):
            raise AnsibleFilterError("gpudirect_roce_qos_lines: roce_qos.ports[%d] must be a port of the module's "
                                     "report (netdev, current, wanted, to_set, not_exposed), got %r" % (index, port))
        lines.append(indent + "  %s (%s port %s)" % (port.get("netdev"), port.get("device"), port.get("port")))
        to_set = port.get("to_set") or {}
        missing = port.get("not_exposed") or {}
        for key, knob in _ROCE_QOS_VALUES:
            if knob not in port["wanted"]:
                continue
            wanted = _roce_qos_text(knob, port["wanted"][knob])
            if key in missing:
                lines.append(indent + "    %-14s wanted %-8s %s: %s" % (
                    key, wanted, "NOT READ" if key in _RDMA_CM_KEYS else "NOT EXPOSED by this port (left alone)",
                    missing[key]))
                continue
            if key in to_set and key not in port["current"] and key in _RDMA_CM_KEYS:
                differ += 1
                marker = "NOT READ YET (%s: gpudirect_roce_qos does that, then sets it)" % " and ".join(
                    cm.get("steps") or ["rdma_cm missing"])
            elif key in to_set:
                differ += 1
                marker = "DIFFERS from the knobs (gpudirect_roce_qos sets it%s)" % (
                    "; traffic on the port stops briefly" if key in _ROCE_QOS_DISRUPTIVE else "")
            else:
                marker = "ok"
            lines.append(indent + "    %-14s current %-10s wanted %-10s %s"
                         % (key, _roce_qos_text(key, port["current"].get(key)), wanted, marker))
        cm_class = port.get("rdma_cm_class")
        if isinstance(cm_class, dict) and "rdma_cm_tos" in port["wanted"]:
            lines.append(indent + "    %-14s ToS %s is DSCP %s: priority %s (the port's dscp2prio map), %s" % (
                "rdma_cm class", port["wanted"]["rdma_cm_tos"], cm_class.get("dscp"), cm_class.get("priority"),
                "PFC on: lossless" if cm_class.get("pfc") else
                "NO PFC: RDMA-CM traffic is NOT in the lossless class (choose a DSCP of a PFC priority)"))
    for port in roce_qos.get("ports_skipped") or []:
        lines.append(indent + "  skipped %s port %s (%s): %s" % (port.get("device"), port.get("port"),
                                                                 port.get("netdev") or "no netdev", port.get("reason")))
    if not roce_qos["ports"]:
        title = "RoCE QoS: no RoCE port read: %s" % (roce_qos.get("skip_reason") or "no RoCE port on the host")
    elif differ:
        title = "RoCE QoS: read by gpudirect_roce_qos; %d value(s) differ from the knobs" % differ
    elif roce_qos["not_exposed"]:
        title = "RoCE QoS: read by gpudirect_roce_qos; no exposed value differs from the knobs"
    else:
        title = "RoCE QoS: read by gpudirect_roce_qos; every wanted value in place"
    if roce_qos.get("tool_missing"):
        title += " (%s)" % roce_qos["tool_missing"]
    if cm.get("problem") and not cm.get("steps"):
        title += " (RDMA-CM: %s; the apply fails: gpudirect_roce_qos_rdma_cm: false leaves RDMA-CM alone)" % cm["problem"]
    return [indent + title] + lines + ([] if cm else _rdma_cm_fact_lines(facts, indent))


class FilterModule(object):
    """Reporting filters for GPUDirect RDMA facts."""

    def filters(self):
        return {
            "gpudirect_findings": gpudirect_findings,
            "gpudirect_preflight_report": gpudirect_preflight_report,
            "gpudirect_nic_firmware": gpudirect_nic_firmware,
            "gpudirect_nic_firmware_lines": gpudirect_nic_firmware_lines,
            "gpudirect_roce_qos_lines": gpudirect_roce_qos_lines,
        }
