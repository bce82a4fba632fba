# -*- coding: utf-8 -*-
"""Direct-NIC platforms and rdma-core's ``rdma_topo``: which PCI functions mark a platform whose
ACS must be set asymmetrically (ConnectX-8 built-in switch ports, ConnectX DMA Direct functions,
NVIDIA Grace/Vera root ports), where ``rdma_topo`` is installed, and parsers for what its
``check`` and ``write-grub-acs --dry-run`` subcommands print.

On these platforms clearing ACS to 0 is wrong: the switch port toward the GPU keeps P2P Request
Redirect while the port toward the NIC's DMA function drops it, and so on. rdma_topo computes
that per bridge as a ``pci=config_acs=`` kernel argument; the ``gpudirect_pcie_acs`` module asks it and
never computes those values itself.

Nothing here runs a command; callers pass the text and exit status.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# rdma-core kernel-boot/rdma_topo, table pci_device_types (read at rdma-core commit 691953d8d, after
# v64.0): the functions whose ids make rdma_topo recognise a direct-NIC topology. Plain ConnectX NIC
# ids (15b3:1021/1023/1025) and BlueField-3 (15b3:a2dc, switch 15b3:197b) are left out: rdma_topo
# knows them too, but they sit in ordinary PCIe-switch servers as well, where rdma_topo finds no
# supported topology. ``since`` is the first rdma-core release whose rdma_topo knows the id.
DIRECT_NIC_IDS = {
    (0x10DE, 0x22B1): ("grace_rp", "NVIDIA Grace PCIe root port", "61.0"),
    (0x10DE, 0x22B2): ("grace_rp", "NVIDIA Grace PCIe root port", "61.0"),
    (0x10DE, 0x22B8): ("grace_rp", "NVIDIA Grace PCIe root port", "61.0"),
    (0x10DE, 0x2F95): ("vera_rp", "NVIDIA Vera PCIe root port", "later than 64.0"),
    (0x10DE, 0x2F96): ("vera_rp", "NVIDIA Vera PCIe root port", "later than 64.0"),
    (0x15B3, 0x2100): ("cx_dma", "ConnectX-8 DMA Direct function", "61.0"),
    (0x15B3, 0x197C): ("cx_switch", "ConnectX built-in PCIe switch port", "61.0"),
    (0x15B3, 0x1979): ("cx_switch", "ConnectX built-in PCIe switch port", "64.0"),
}
DIRECT_NIC_IDS_SOURCE = "rdma-core kernel-boot/rdma_topo (pci_device_types)"
# rdma_topo first shipped in rdma-core 61.0 (commit be213be4b "kernel-boot: Add rdma_topo tool");
# rdma-core's CMake installs it to CMAKE_INSTALL_SBINDIR, packaged as /usr/sbin/rdma_topo
# (debian/rdma-core.install, redhat/rdma-core.spec, suse/rdma-core.spec).
RDMA_TOPO_FIRST_RELEASE = "61.0"
RDMA_TOPO_PATHS = ("/usr/sbin/rdma_topo", "/sbin/rdma_topo", "/usr/local/sbin/rdma_topo")

# what rdma_topo prints when the host has no topology it supports (64.0 and later; 61.0-63.x)
UNSUPPORTED_MARKS = ("No supported topology detected", "No ConnectX DMA Direct functions detected")

_BDF = r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
_CHECK_LINE_RE = re.compile(r"^(OK|FAIL)\s+(\S.*)$")
_MESSAGE_RE = re.compile(r"^(?:(E|W): )(.*)$")
_ACS_OK_RE = re.compile(r"^ACS for (\w+) (%s) has correct values ([01]{7,}) = ([01x]{7})$" % _BDF)
_ACS_BAD_RE = re.compile(r"^ACS for (\w+) (%s) has incorrect values ([01]{7,}) != ([01x]{7}),? "
                         r"\(0x([0-9a-f]+) != 0x([0-9a-f]+)\)$" % _BDF)
_ACS_UNREADABLE_RE = re.compile(r"^Could not read ACS control register for (\w+) (%s)$" % _BDF)
_TOPOLOGY_RE = re.compile(r"^All (.+) have correct PCI topology$")
_GRUB_LINE_RE = re.compile(r'^GRUB_CMDLINE_LINUX="\$GRUB_CMDLINE_LINUX pci=config_acs=\\"(.*)\\""$')
_CONFIG_ACS_ENTRY_RE = re.compile(r"^([01x]{1,16})@(%s)$" % _BDF)


class RdmaTopoError(Exception):
    """rdma_topo output that cannot be trusted; the message says what was found."""


def direct_nic_devices(functions):
    """PCI functions whose vendor:device ids are in DIRECT_NIC_IDS, sorted by address, as dicts
    (``address``, ``ids``, ``type``, ``name``, ``since``). ``functions`` maps addresses to objects
    with ``vendor`` and ``device`` ints (or None)."""
    found = []
    for address in sorted(functions):
        fn = functions[address]
        entry = DIRECT_NIC_IDS.get((fn.vendor, fn.device))
        if entry is None:
            continue
        found.append({"address": address, "ids": "%04x:%04x" % (fn.vendor, fn.device), "type": entry[0],
                      "name": entry[1], "since": entry[2]})
    return found


def needed_release(devices):
    """The rdma-core release whose rdma_topo knows every device of ``devices``."""
    later = [d["since"] for d in devices if d["since"] != RDMA_TOPO_FIRST_RELEASE]
    if any(s.startswith("later") for s in later):
        return "a release later than 64.0 (rdma-core's master branch knows these ids)"
    if later:
        return max(later, key=lambda s: tuple(int(p) for p in s.split(".")))
    return RDMA_TOPO_FIRST_RELEASE


def _message(line):
    match = _MESSAGE_RE.match(line)
    return (match.group(1), match.group(2)) if match else (None, None)


def is_unsupported(text):
    """Whether rdma_topo said the host has no topology it supports."""
    for line in (text or "").splitlines():
        level, message = _message(line.strip())
        if level == "E" and any(message.startswith(mark) for mark in UNSUPPORTED_MARKS):
            return True
    return False


def parse_check(text, rc):
    """``rdma_topo check`` output -> dict:

    ``supported`` (False when rdma_topo found no supported topology), ``topology`` (the words of
    its "All ... have correct PCI topology" line, or None), ``acs`` (one dict per bridge:
    ``device_type``, ``address``, ``current`` bits as rdma_topo prints them, ``required`` mask
    (bit 6 first; x = leave), ``ok``, and for a wrong one ``current_value``/``wanted_value``),
    ``checks`` (every OK/FAIL line: ``ok``, ``text``), ``failed`` (the FAIL texts), ``errors``
    (its E:/W: lines). rdma-core 64.0 and later exit 100 when a check fails; 61.0-63.x exit 0, so
    the lines decide. Raises RdmaTopoError on a line it does not know or an empty output."""
    result = {"supported": True, "topology": None, "acs": [], "checks": [], "failed": [], "errors": []}
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise RdmaTopoError("rdma_topo check printed nothing (exit status %s)" % rc)
    for line in lines:
        level, message = _message(line)
        if level is not None:
            result["errors"].append("%s: %s" % (level, message))
            if level == "E" and any(message.startswith(mark) for mark in UNSUPPORTED_MARKS):
                result["supported"] = False
            continue
        match = _CHECK_LINE_RE.match(line)
        if not match:
            raise RdmaTopoError("rdma_topo check printed a line this toolkit does not know: %r" % line)
        ok, body = match.group(1) == "OK", match.group(2).strip()
        result["checks"].append({"ok": ok, "text": body})
        if not ok:
            result["failed"].append(body)
        topo = _TOPOLOGY_RE.match(body)
        if topo and ok:
            result["topology"] = topo.group(1)
            continue
        good, bad, unreadable = _ACS_OK_RE.match(body), _ACS_BAD_RE.match(body), _ACS_UNREADABLE_RE.match(body)
        if good and ok:
            result["acs"].append({"device_type": good.group(1), "address": good.group(2),
                                  "current": good.group(3), "required": good.group(4), "ok": True})
        elif bad and not ok:
            result["acs"].append({"device_type": bad.group(1), "address": bad.group(2), "current": bad.group(3),
                                  "required": bad.group(4), "ok": False,
                                  "current_value": "0x%04x" % int(bad.group(5), 16),
                                  "wanted_value": "0x%04x" % int(bad.group(6), 16)})
        elif unreadable and not ok:
            result["acs"].append({"device_type": unreadable.group(1), "address": unreadable.group(2),
                                  "current": None, "required": None, "ok": False})
        elif body.startswith("ACS for ") or body.startswith("Could not read ACS"):
            raise RdmaTopoError("rdma_topo check printed an ACS line this toolkit cannot read: %r" % line)
    if result["errors"] and not result["checks"] and rc == 0 and result["supported"]:
        raise RdmaTopoError("rdma_topo check printed only %s" % "; ".join(result["errors"]))
    return result


def parse_grub_acs(text, rc):
    """``rdma_topo write-grub-acs --dry-run`` output -> dict ``supported``, ``config_acs`` (the value
    of ``pci=config_acs=``, entries joined with ``;``, empty when rdma_topo wants only the kernel's
    default ACS) and ``entries`` (``flags``, ``address``). An "E: No supported topology" output
    gives ``supported`` False. Raises RdmaTopoError on any other error or a malformed output."""
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise RdmaTopoError("rdma_topo write-grub-acs --dry-run printed nothing (exit status %s)" % rc)
    if is_unsupported(text):
        return {"supported": False, "config_acs": "", "entries": []}
    errors = [line for line in lines if _message(line)[0] is not None]
    if errors:
        raise RdmaTopoError("rdma_topo write-grub-acs --dry-run failed (exit status %s): %s"
                            % (rc, "; ".join(errors)))
    if rc != 0:
        raise RdmaTopoError("rdma_topo write-grub-acs --dry-run exited %s" % rc)
    body = [line for line in lines if not line.startswith("#")]
    if len(body) != 1:
        raise RdmaTopoError("rdma_topo write-grub-acs --dry-run printed %d GRUB_CMDLINE_LINUX lines, expected one: %r"
                            % (len(body), "\n".join(lines)))
    match = _GRUB_LINE_RE.match(body[0])
    if not match:
        raise RdmaTopoError("rdma_topo write-grub-acs --dry-run printed %r, not the GRUB_CMDLINE_LINUX line with "
                            "pci=config_acs=\\\"...\\\" it writes" % body[0])
    value = match.group(1)
    entries, seen = [], set()
    for item in value.split(";") if value else []:
        entry = _CONFIG_ACS_ENTRY_RE.match(item)
        if not entry:
            raise RdmaTopoError("rdma_topo write-grub-acs --dry-run: %r in pci=config_acs is not FLAGS@DDDD:BB:DD.F "
                                "(flags 0, 1 or x, bit 6 first)" % item)
        if entry.group(2) in seen:
            raise RdmaTopoError("rdma_topo write-grub-acs --dry-run names %s twice in pci=config_acs" % entry.group(2))
        seen.add(entry.group(2))
        entries.append({"flags": entry.group(1), "address": entry.group(2)})
    return {"supported": True, "config_acs": value, "entries": entries}
