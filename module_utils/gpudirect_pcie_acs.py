# -*- coding: utf-8 -*-
"""PCIe ACS on selected bridges: which bridges are selected (PLX/Broadcom PEX ports, the
GPU<->NIC paths, all, an explicit list), what their ACS Control register holds, what it
would be set to, the write with read-back, the ``--diff`` text, and the plan sentences
(``changes``, ``disruption``) of the ``gpudirect_pcie_acs`` role.

The ``gpudirect_pcie_acs`` module (library/gpudirect_pcie_acs.py) is argument handling around :func:`run`.
Register offsets always come from walking the capability list (module_utils/gpudirect_pci.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import struct

from ansible.module_utils.gpudirect_pcie_acs_boot import (
    CLEAR_CHOICES,
    CLEAR_KNOB,
    RouteError,
    bit_names,
    boot_check_lines,
    boot_parameter,
    decide_route,
    eperm_message,
    pending_bits,
    read_lockdown,
)
from ansible.module_utils.gpudirect_rdma_topo import (
    DIRECT_NIC_IDS_SOURCE,
    RDMA_TOPO_PATHS,
    RdmaTopoError,
    direct_nic_devices,
    needed_release,
    parse_check,
    parse_grub_acs,
)
from ansible.module_utils.gpudirect_pci import (
    EXT_NOT_READABLE,
    acs_info,
    decode_acs_bits,
    link_basename,
    list_pci_addresses,
    normalize_pci_address,
    pci_address_key,
    pci_device_dir,
    read_config,
    parse_pci_path,
    read_int,
    resolve,
)

VENDOR_PLX = 0x10B5
VENDOR_BROADCOM_LSI = 0x1000
# Broadcom PEX 88000 (Gen 4) and PEX 89000 (Gen 5) switch ports: 1000:c010, c012, c030, c034
# in pci.ids; the whole 0xc0xx block is taken, restricted to PCI-to-PCI bridges.
BROADCOM_PEX_DEVICE_MASK = 0xFF00
BROADCOM_PEX_DEVICE_BLOCK = 0xC000
PCI_CLASS_BRIDGE_PCI = 0x0604
ACS_CTL_DEFINED_BITS = 0x007F
DEFAULT_ACS_CTL = 0x001D
# vfio-pci and the vendor vfio variant drivers (mlx5_vfio_pci, nvgrace_gpu_vfio_pci, hisi_acc_vfio_pci,
# virtio_vfio_pci, pds_vfio_pci, ...): every driver whose name contains "vfio" hands a device to user space
VFIO_DRIVER_MARK = "vfio"
# Functions whose users an ACS change below a bridge interrupts (plan "disruption"): GPUs (PCI classes
# 0x0300 VGA, 0x0302 3D controller) and network controllers (class 0x02xx: Ethernet 0x0200,
# InfiniBand 0x0207), when a driver is bound to them.
GPU_CLASSES = (0x0300, 0x0302)
NETWORK_BASE_CLASS = 0x02

BECOME_HINT = ("the kernel shows only the first 64 bytes of /sys/bus/pci/devices/*/config to unprivileged "
               "users, so the ACS capability cannot be found: run the task with become: true")

_SHORT_BDF_RE = re.compile(r"^[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_TOPOLOGY_RE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}(/[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])+$")


class AcsError(Exception):
    """A failure to report through fail_json; ``details`` go into the result."""

    def __init__(self, msg, **details):
        super(AcsError, self).__init__(msg)
        self.msg = msg
        self.details = details


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------

def normalize_address(text):
    """``DDDD:BB:DD.F`` or ``BB:DD.F`` (domain 0000) -> ``dddd:bb:dd.f``; None when malformed."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if _SHORT_BDF_RE.match(text):
        text = "0000:" + text
    return normalize_pci_address(text)


def normalize_addresses(values, option):
    """Normalized addresses of a list option; raises AcsError naming every malformed entry."""
    good, bad = [], []
    for value in values or []:
        address = normalize_address(value)
        if address is None:
            bad.append(value)
        elif address not in good:
            good.append(address)
    if bad:
        raise AcsError("%s: malformed PCI address(es) %s; write them as DDDD:BB:DD.F (for example 0000:02:08.0) "
                       "or BB:DD.F, as lspci -D prints them. Nothing was changed." % (option, ", ".join(repr(b) for b in bad)))
    return good


def hex16(value):
    return None if value is None else "0x%04x" % value


def describe_bits(value):
    names = decode_acs_bits(value)
    return " ".join(names) if names else "none"


def config_acs_flags(cap):
    """``pci=config_acs=`` flags that force every ACS feature the bridge implements off and leave
    the others alone: one character per bit, bit 6 (DirectTrans) first, bit 0 (SrcValid) last;
    '0' where ACSCap has the bit, 'x' where it does not (the kernel rejects forcing an
    unimplemented bit)."""
    return "".join("0" if cap & (1 << bit) else "x" for bit in range(6, -1, -1))


def is_plx_bridge(vendor, device):
    """PLX Technology (0x10b5) or Broadcom PEX 88000/89000 (0x1000:0xc0xx)."""
    if vendor == VENDOR_PLX:
        return True
    return (vendor == VENDOR_BROADCOM_LSI and device is not None
            and (device & BROADCOM_PEX_DEVICE_MASK) == BROADCOM_PEX_DEVICE_BLOCK)


class Function(object):
    """The sysfs attributes of one PCI function that selection needs."""

    def __init__(self, root, address):
        self.root = root
        self.address = address
        self.devdir = pci_device_dir(root, address)
        self.vendor = read_int(os.path.join(self.devdir, "vendor"), 16)
        self.device = read_int(os.path.join(self.devdir, "device"), 16)
        self.pci_class = read_int(os.path.join(self.devdir, "class"), 16)
        self.driver = link_basename(os.path.join(self.devdir, "driver"))

    @property
    def is_bridge(self):
        return self.pci_class is not None and (self.pci_class >> 8) == PCI_CLASS_BRIDGE_PCI

    @property
    def ids(self):
        return "%s:%s" % ("????" if self.vendor is None else "%04x" % self.vendor,
                          "????" if self.device is None else "%04x" % self.device)

    @property
    def kind(self):
        """``GPU``, ``NIC`` or None (see GPU_CLASSES, NETWORK_BASE_CLASS)."""
        if self.pci_class is None:
            return None
        if (self.pci_class >> 8) in GPU_CLASSES:
            return "GPU"
        return "NIC" if (self.pci_class >> 16) == NETWORK_BASE_CLASS else None

    def upstream(self):
        """Addresses of the PCI functions above this one, root port first (its sysfs device path),
        or None when the path cannot be read."""
        try:
            _complex, chain = parse_pci_path(resolve(self.root, self.devdir))
        except (OSError, ValueError):
            return None
        if not chain or chain[-1] != self.address:
            return None
        return chain[:-1]


# --------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------

def is_vfio_driver(name):
    """Whether a PCI driver name is vfio-pci or one of its variant drivers (any name containing "vfio")."""
    return bool(name) and VFIO_DRIVER_MARK in name.lower()


def vfio_devices(functions):
    return [fn.address for fn in functions.values() if is_vfio_driver(fn.driver)]


def unknown_hint(reason):
    """What to do about a bridge whose ACS state cannot be known, by the reason found."""
    if reason.startswith(EXT_NOT_READABLE):
        return ("the kernel cannot reach its extended configuration space (check dmesg for MMCONFIG/ECAM and the "
                "firmware's PCIe settings)")
    if "0xffffffff" in reason:
        return "the device reads as all ones (gone, or failing: check dmesg and lspci -vvv as root)"
    return "its capability list is corrupt (check lspci -vvv as root and the device's firmware)"


def pair_label(pair):
    gpu = pair.get("gpu") or pair.get("gpu_address") or "GPU"
    nic = pair.get("nic") or pair.get("nic_address") or "NIC"
    return "%s/%s" % (gpu, nic)


def select(functions, mode, include, exclude, pairs, pair_distances):
    """Return ``(selected, reasons, skipped)``: addresses in order, address -> reason, skipped entries."""
    reasons = {}
    skipped = []
    if mode in ("plx", "all"):
        for fn in functions.values():
            if not fn.is_bridge:
                continue
            if mode == "all" or is_plx_bridge(fn.vendor, fn.device):
                reasons.setdefault(fn.address, mode)
    elif mode == "gpu_nic_path":
        for index, pair in enumerate(pairs):
            distance = pair.get("distance")
            if distance is not None and distance not in pair_distances:
                continue
            for address in normalize_addresses(pair.get("path") or [], "pairs[%d].path" % index):
                if address not in functions:
                    if not any(s["address"] == address for s in skipped):
                        skipped.append({"address": address,
                                        "reason": "not present in sysfs (facts gathered before a reboot or hotplug?)"})
                    continue
                reasons.setdefault(address, "gpu_nic_path %s" % pair_label(pair))
    for address in include:
        reasons.setdefault(address, "include")
    for address in exclude:
        if address in reasons:
            del reasons[address]
            skipped.append({"address": address, "reason": "excluded"})
    selected = sorted(reasons, key=pci_address_key)
    return selected, reasons, skipped


def validate_pairs(pairs):
    for index, pair in enumerate(pairs):
        path = pair.get("path")
        if path is None or not isinstance(path, list):
            raise AcsError("pairs[%d] has no 'path' list of bridge addresses; pass ansible_facts.gpudirect.pairs "
                           "from the gpudirect_facts module (run the preflight stage first). Nothing was changed."
                           % index)
        normalize_addresses(path, "pairs[%d].path" % index)


# --------------------------------------------------------------------------
# planning and writing
# --------------------------------------------------------------------------

def topology_path(root, fn):
    """Where the bridge sits: its sysfs device path below ``sys/devices`` (host bridge, then every
    PCI function from the root port down to the bridge), or None when that cannot be read."""
    try:
        real = resolve(root, fn.devdir)
    except (OSError, ValueError):
        return None
    marker = "/sys/devices/"
    if marker not in real:
        return None
    path = real.split(marker, 1)[1]
    return path if _TOPOLOGY_RE.match(path) and path.endswith("/" + fn.address) else None


def config_path(fn):
    return os.path.join(fn.devdir, "config")


def plan(functions, selected, reasons, state, acs_ctl, root="/"):
    """Read every selected bridge and compute the target values. Nothing is written here, so a
    bridge whose configuration space cannot be read stops the run before any change.
    Returns ``(entries, skipped, unknown)``; ``unknown`` lists the bridges whose ACS state
    cannot be known (extended space not readable, corrupt capability list)."""
    entries, skipped, unknown, unreadable = [], [], [], []
    for address in selected:
        fn = functions[address]
        cfg = read_config(fn.devdir)
        info = acs_info(cfg)
        if info["status"] == "unreadable":
            unreadable.append("%s (%s)" % (address, "no readable config file" if cfg is None
                                           else "read %d bytes" % len(cfg)))
            continue
        if info["status"] == "unknown":
            unknown.append({"address": address, "vendor_id": hex16(fn.vendor), "device_id": hex16(fn.device),
                            "reason": info["reason"]})
            continue
        if info["status"] != "present":
            skipped.append({"address": address, "reason": info["reason"]})
            continue
        offset, before, cap = info["offset"], info["ctl"], info["cap"]
        if state == "disabled":
            target = 0
        elif state == "enabled":
            target = acs_ctl & cap
        else:
            target = before
        entries.append({
            "address": address,
            "vendor_id": hex16(fn.vendor),
            "device_id": hex16(fn.device),
            "ids": fn.ids,
            "reason": reasons.get(address),
            "acs_offset": offset,
            "acs_offset_hex": "0x%x" % offset,
            "acs_ctl_offset": info["ctl_offset"],
            "acs_cap": hex16(cap),
            "acs_cap_bits": decode_acs_bits(cap),
            "config_acs": "%s@%s" % (config_acs_flags(cap), address),
            "topology": topology_path(root, fn),
            "before_value": before,
            "target": target,
            "path": config_path(fn),
        })
    if unreadable:
        raise AcsError("cannot read the extended PCI configuration space of %s: %s. Nothing was changed."
                       % (", ".join(unreadable), BECOME_HINT), skipped_bridges=skipped)
    return entries, skipped, unknown


def refuse_unknown(unknown, state):
    """AcsError for a state that would write while some selected bridges cannot be read."""
    lines = ["%s (%s:%s): %s; %s" % (u["address"], (u["vendor_id"] or "????")[2:], (u["device_id"] or "????")[2:],
                                     u["reason"], unknown_hint(u["reason"])) for u in unknown]
    return AcsError(
        "refusing to %s ACS: the ACS state of %d selected bridge(s) cannot be known, so their ACS Control "
        "register cannot be located safely: %s. Nothing was written to any bridge. Fix the cause, or leave "
        "the bridge(s) out with exclude (role: gpudirect_pcie_acs_exclude: [%s]) and clear ACS on them another way "
        "(firmware setup); state=query reports them without failing."
        % ("clear" if state == "disabled" else "set", len(unknown), " | ".join(lines),
           ", ".join(u["address"] for u in unknown)),
        unknown_bridges=unknown)


def write_acs_ctl(path, offset, value):
    """Write the 16-bit ACSCtl little-endian at ``offset`` of a sysfs config file and return
    the value read back from the same offset."""
    fd = os.open(path, os.O_RDWR)
    try:
        written = os.pwrite(fd, struct.pack("<H", value), offset)
        if written != 2:
            raise IOError("short write (%d of 2 bytes) at 0x%x of %s" % (written, offset, path))
        data = os.pread(fd, 2, offset)
    finally:
        os.close(fd)
    if len(data) != 2:
        raise IOError("short read-back (%d of 2 bytes) at 0x%x of %s" % (len(data), offset, path))
    return struct.unpack("<H", data)[0]


def finish_entry(entry, after, changed):
    before = entry.pop("before_value")
    entry.pop("target")
    entry.pop("path")
    ids = entry.pop("ids")
    entry.update(before=hex16(before), before_bits=decode_acs_bits(before), after=hex16(after),
                 after_bits=decode_acs_bits(after), changed=changed)
    entry["log"] = "%s %s ACS@0x%x ACSCtl@0x%x %s (%s) -> %s (%s)%s" % (
        entry["address"], ids, entry["acs_offset"], entry["acs_ctl_offset"], hex16(before), describe_bits(before),
        hex16(after), describe_bits(after), "" if changed else " unchanged")
    return entry


def apply(entries, check_mode, lockdown=None):
    """Write the planned values; returns the finished report entries. Raises AcsError on a
    write failure or read-back mismatch, with the entries done so far. ``lockdown()`` reads
    the kernel's lockdown again when a write is refused (it can be raised at run time), so
    that the message names it rather than ``become``."""
    done = []
    for entry in entries:
        before, target = entry["before_value"], entry["target"]
        if target == before or check_mode:
            done.append(finish_entry(entry, target, target != before))
            continue
        address, offset = entry["address"], entry["acs_ctl_offset"]
        try:
            after = write_acs_ctl(entry["path"], offset, target)
        except (IOError, OSError) as exc:
            if getattr(exc, "errno", None) in (1, 13):  # EPERM, EACCES
                msg = eperm_message(address, target, offset, exc, (lockdown or (lambda: read_lockdown("/")))(),
                                    os.geteuid())
            else:
                msg = "%s: writing ACSCtl 0x%04x at offset 0x%x failed (%s)" % (address, target, offset, exc)
            raise AcsError(msg, bridges=done, changed=any(e["changed"] for e in done))
        if after != target:
            failed = finish_entry(entry, after, after != before)
            done.append(failed)
            raise AcsError("%s: ACSCtl read back 0x%04x after writing 0x%04x at offset 0x%x (before 0x%04x): the "
                           "bridge did not take the value (bits hardwired, or the register is locked by firmware)"
                           % (address, after, target, offset, before),
                           bridges=done, changed=any(e["changed"] for e in done), before=hex16(before),
                           written=hex16(target), after=hex16(after))
        done.append(finish_entry(entry, after, True))
    return done


def summary(state, bridges, selected, skipped, unknown, check_mode):
    changed = [b for b in bridges if b["changed"]]
    verb = {"disabled": "cleared", "enabled": "enabled", "query": "reported"}[state]
    if not selected:
        return "no bridge selected; nothing to do"
    if state == "query":
        text = "ACS reported on %d of %d selected bridges" % (len(bridges), len(selected))
    else:
        text = "ACS %s%s on %d of %d bridges with ACS (%d selected)" % (
            "would be " if check_mode else "", verb, len(changed), len(bridges), len(selected))
    no_acs = [s for s in skipped if s["reason"].startswith("no ACS capability")]
    if no_acs:
        text += "; %d without ACS capability" % len(no_acs)
    if unknown:
        text += "; ACS UNKNOWN on %s (see unknown_bridges)" % ", ".join(u["address"] for u in unknown)
    return text


def acs_diff(bridges, unknown):
    """Ansible ``diff``: ACSCtl per bridge before and after (or as it would be, in check mode)."""
    def line(address, ids, value):
        return "%s %s ACSCtl %s (%s)\n" % (address, ids, hex16(value), describe_bits(value))
    before, after = [], []
    for bridge in bridges:
        ids = "%s:%s" % ((bridge["vendor_id"] or "0x????")[2:], (bridge["device_id"] or "0x????")[2:])
        before.append((bridge["address"], line(bridge["address"], ids, int(bridge["before"], 16))))
        after.append((bridge["address"], line(bridge["address"], ids, int(bridge["after"], 16))))
    for entry in unknown:
        text = "%s %s:%s ACSCtl unknown (%s)\n" % (entry["address"], (entry["vendor_id"] or "0x????")[2:],
                                                  (entry["device_id"] or "0x????")[2:], entry["reason"])
        before.append((entry["address"], text))
        after.append((entry["address"], text))
    key = (lambda item: pci_address_key(item[0]))
    return {
        "before_header": "ACS Control of the selected bridges (before)",
        "after_header": "ACS Control of the selected bridges (after)",
        "before": "".join(t for _a, t in sorted(before, key=key)),
        "after": "".join(t for _a, t in sorted(after, key=key)),
    }


# --------------------------------------------------------------------------
# direct-NIC platforms: rdma-core's rdma_topo decides their ACS
# --------------------------------------------------------------------------

DIRECT_NIC_CHOICES = ("auto", "rdma_topo", "skip")
MANAGED_BY_RDMA_TOPO = "ACS set by rdma_topo at boot (direct-NIC platform)"


def _device_list(devices):
    return ", ".join("%s %s (%s)" % (d["address"], d["ids"], d["name"]) for d in devices)


def direct_nic_report(functions, choice, state, root, tool, run_command):
    """What rdma_topo says about this host's direct-NIC ACS, as the module's ``direct_nic`` result.
    Runs only its read-only subcommands (``check``, ``write-grub-acs --dry-run``) through
    ``run_command(argv, environ_update) -> (rc, out, err)``. ``tool`` is rdma_topo's path or None.
    Raises AcsError, before anything is written, where the platform is direct-NIC and rdma_topo is
    missing or its output cannot be read."""
    devices = direct_nic_devices(functions)
    report = {"choice": choice, "platform": bool(devices), "devices": devices, "ids_source": DIRECT_NIC_IDS_SOURCE,
              "rdma_topo": None, "supported": None, "config_acs": "", "entries": [], "managed": [],
              "check": None}
    if choice == "skip" or (choice == "auto" and not devices):
        return report
    if tool is None:
        if state != "disabled":
            return report
        found = ("the direct-NIC device(s) %s (ids from %s)" % (_device_list(devices), DIRECT_NIC_IDS_SOURCE)
                 if devices else "no device this toolkit knows as direct-NIC, but direct_nic is rdma_topo")
        raise AcsError(
            "refusing to guess the ACS of a direct-NIC platform: found %s. Their ACS must be set asymmetrically "
            "per bridge (not cleared to 0), which rdma-core's rdma_topo computes, and rdma_topo is not installed "
            "(looked for %s and in PATH). Install rdma-core %s or later (package rdma-core; rdma_topo first "
            "shipped in 61.0, ConnectX switch-only (inline) platforms need 64.0) and run again, or set "
            "gpudirect_pcie_acs_direct_nic: skip (module: direct_nic=skip) to leave these bridges' ACS to the kernel and "
            "firmware. Nothing was changed." % (found, ", ".join(RDMA_TOPO_PATHS), needed_release(devices)),
            direct_nic=report)
    report["rdma_topo"] = tool
    environ = {"RDMA_TOPO_DEVDIR": os.path.join(root, "sys", "bus", "pci", "devices") + "/"} if root != "/" else {}
    outputs = {}
    for name, argv in (("check", [tool, "check"]), ("write-grub-acs", [tool, "write-grub-acs", "--dry-run"])):
        try:
            rc, out, err = run_command(argv, environ)
        except (OSError, IOError) as exc:
            raise AcsError("could not run %s: %s. Check that rdma-core's rdma_topo is intact (it needs python3), or set "
                           "gpudirect_pcie_acs_direct_nic: skip. Nothing was changed." % (" ".join(argv), exc), direct_nic=report)
        outputs[name] = (rc, out, err)
    try:
        grub = parse_grub_acs(outputs["write-grub-acs"][1], outputs["write-grub-acs"][0])
        check = parse_check(outputs["check"][1], outputs["check"][0])
    except RdmaTopoError as exc:
        stderr = " ".join(e.strip() for _rc, _out, e in outputs.values() if e and e.strip())
        raise AcsError("%s%s. The toolkit does not guess a direct-NIC platform's ACS: fix what rdma_topo reports "
                       "(or report it to rdma-core if the platform is a production one), or set gpudirect_pcie_acs_direct_nic: "
                       "skip. Nothing was changed." % (exc, "; stderr: %s" % stderr[:500] if stderr else ""),
                       direct_nic=report)
    report.update(supported=grub["supported"], config_acs=grub["config_acs"], entries=grub["entries"], check=check)
    if not grub["supported"] and choice == "rdma_topo":
        raise AcsError("gpudirect_pcie_acs_direct_nic is rdma_topo but %s found no direct-NIC topology it supports on this host "
                       "(%s). Use auto (rdma_topo only where its device ids are found) or skip. Nothing was changed."
                       % (tool, "; ".join(check["errors"]) or "no supported topology"), direct_nic=report)
    managed = set(e["address"] for e in grub["entries"]) | set(a["address"] for a in check["acs"])
    report["managed"] = sorted(managed, key=pci_address_key)
    return report


def leave_to_rdma_topo(selected, reasons, skipped, managed):
    """Take the bridges rdma_topo sets out of this module's selection (their ACS is asymmetric,
    never 0 everywhere); they are reported in skipped_bridges."""
    keep = []
    for address in selected:
        if address in managed:
            reasons.pop(address, None)
            skipped.append({"address": address, "reason": MANAGED_BY_RDMA_TOPO})
        else:
            keep.append(address)
    return keep


# --------------------------------------------------------------------------
# plan sentences
# --------------------------------------------------------------------------

def bound_users_below(functions, bridge):
    """GPUs and NICs with a bound driver below ``bridge``, sorted by address, as
    ``(function, note)``; a bound GPU/NIC whose place in the PCI tree cannot be read is
    counted too (it may be below), with a note saying so."""
    users = []
    for fn in sorted(functions.values(), key=lambda f: pci_address_key(f.address)):
        if fn.address == bridge or not fn.driver or fn.kind is None:
            continue
        upstream = fn.upstream()
        if upstream is None:
            users.append((fn, "its place in the PCI tree cannot be read"))
        elif bridge in upstream:
            users.append((fn, None))
    return users


def plan_sentences(bridges, functions):
    """``(changes, disruption)`` of the role's plan: one sentence per bridge whose ACS Control
    changes (or would, in check mode), and one per such bridge that has a bound GPU or NIC below
    it, naming the bridge and the devices (their peer-to-peer and DMA traffic is re-routed while
    they run)."""
    changes, disruption = [], []
    for bridge in bridges:
        if not bridge["changed"]:
            continue
        ids = "%s:%s" % ((bridge["vendor_id"] or "0x????")[2:], (bridge["device_id"] or "0x????")[2:])
        move = "ACSCtl %s (%s) -> %s (%s)" % (bridge["before"], " ".join(bridge["before_bits"]) or "none",
                                                bridge["after"], " ".join(bridge["after_bits"]) or "none")
        changes.append("ACS on bridge %s (%s): %s" % (bridge["address"], ids, move))
        users = bound_users_below(functions, bridge["address"])
        if users:
            disruption.append("ACS change on bridge %s (%s, %s) with bound %s below it" % (
                bridge["address"], ids, move, ", ".join(
                    "%s %s (driver %s%s)" % (fn.kind, fn.address, fn.driver, "; " + note if note else "")
                    for fn, note in users)))
    return changes, disruption


# --------------------------------------------------------------------------
# the kernel-parameter route: nothing written now, the kernel sets ACS at boot
# --------------------------------------------------------------------------

def kernel_args_route(bridges, state, params, acs_ctl, clear, route, direct_nic, boot):
    """Fill ``boot`` (the argument for the boot kernel) for the kernel-parameter route and
    return the bridges whose wanted-off bits are still on (``boot_check``). Raises AcsError,
    before anything changes, where the boot kernel's parameter cannot do what is asked."""
    if state == "enabled":
        if acs_ctl != DEFAULT_ACS_CTL:
            raise AcsError(
                "acs_ctl 0x%04x (role: gpudirect_pcie_acs_ctl) cannot be written: %s, so ACS is not written at run "
                "time, and without the toolkit's kernel parameter the kernel programs its own default at boot (0x%04x "
                "where an IOMMU asks for ACS, the firmware's value otherwise). Leave gpudirect_pcie_acs_ctl at 0x%04x, or "
                "set it in the firmware setup. Nothing was changed." % (acs_ctl, route["reason"], DEFAULT_ACS_CTL,
                                                                      DEFAULT_ACS_CTL),
                route=route)
        return []
    explicit = params.get("boot_argument") or ""
    if explicit:
        boot.update(boot_argument=explicit, boot_parameter=explicit.split("=", 2)[1] if explicit.count("=") >= 2 else None)
    else:
        try:
            param = boot_parameter([{"address": b["address"], "acs_cap": int(b["acs_cap"], 16)} for b in bridges],
                                   params.get("boot_kernel"), clear, direct_nic["config_acs"])
        except RouteError as exc:
            raise AcsError(exc.msg, route=route, bridges=bridges)
        boot.update(boot_argument=param["argument"], boot_parameter=param["parameter"], boot_since=param["since"])
    return boot_check_lines(bridges, clear)


def boot_sentences(bridges, clear, boot, route):
    """The plan's ``changes`` on the kernel-parameter route: one sentence per bridge whose
    wanted-off bits are still on, saying which the kernel clears at the next boot and how."""
    how = ("pci=%s" % boot["boot_parameter"]) if boot["boot_parameter"] else "the kernel command line"
    out = []
    for bridge in bridges:
        ctl, cap = int(bridge["after"], 16), int(bridge["acs_cap"], 16)
        left = pending_bits(ctl, cap, clear)
        if left:
            out.append("ACS on bridge %s (%s:%s): ACSCtl %s (%s) now; %s off at the next boot through %s (%s)" % (
                bridge["address"], (bridge["vendor_id"] or "0x????")[2:], (bridge["device_id"] or "0x????")[2:],
                bridge["after"], bit_names(ctl), bit_names(left), how, route["reason"]))
    return out


def kernel_args_summary(state, bridges, selected, boot, boot_check, route):
    if state == "enabled":
        return ("ACS not written at run time (%s): the kernel programs ACS at the next boot once the toolkit's ACS "
                "kernel parameter is gone; %d selected bridge(s) with ACS" % (route["reason"], len(bridges)))
    if not selected:
        return "no bridge selected; nothing to do"
    return ("ACS not written at run time (%s): %s at boot; %d of %d bridge(s) with ACS still have bits to clear%s"
            % (route["reason"], boot["boot_argument"] or "no kernel argument needed", len(boot_check), len(bridges),
               (" (%s)" % "; ".join(boot_check)) if boot_check else ""))


def _run_command(argv, environ_update):
    import subprocess
    env = dict(os.environ)
    env.update(environ_update)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True)
    out, err = proc.communicate()
    return proc.returncode, out, err


def _find_rdma_topo():
    for path in RDMA_TOPO_PATHS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def run(params, check_mode, warn=None, diff=False, run_command=None, find_tool=None):
    """The module's work, independent of AnsibleModule. Returns the result dict or raises AcsError.
    ``run_command(argv, environ_update) -> (rc, stdout, stderr)`` and ``find_tool() -> path or None``
    run and find rdma_topo (the module passes AnsibleModule's run_command and get_bin_path)."""
    root = params["root"] or "/"
    state = params["state"]
    mode = params["mode"]
    acs_ctl = params["acs_ctl"]
    if acs_ctl is None:
        acs_ctl = DEFAULT_ACS_CTL
    if acs_ctl < 0 or acs_ctl & ~ACS_CTL_DEFINED_BITS:
        raise AcsError("acs_ctl 0x%x sets bits outside 0-6 (SrcValid .. DirectTrans); bits 7-15 of ACS Control are "
                       "reserved. Use for example 0x001d. Nothing was changed." % acs_ctl)
    include = normalize_addresses(params["include"], "include")
    exclude = normalize_addresses(params["exclude"], "exclude")
    pairs = params["pairs"] or []
    if mode == "gpu_nic_path":
        validate_pairs(pairs)
        if not pairs and warn:
            warn("mode gpu_nic_path got no GPU/NIC pairs (ansible_facts.gpudirect.pairs is empty); "
                 "only 'include' addresses are used")

    if not os.path.isdir(os.path.join(root, "sys", "bus", "pci", "devices")):
        raise AcsError("%s has no sys/bus/pci/devices: leave root at / on a live Linux host, or point it at a "
                       "captured tree" % root)
    functions = dict((a, Function(root, a)) for a in list_pci_addresses(root))
    missing = [a for a in include if a not in functions]
    if missing:
        raise AcsError("include: no PCI function %s under %s/sys/bus/pci/devices; check the addresses with "
                       "lspci -D. Nothing was changed." % (", ".join(missing), root.rstrip("/")))

    # run-time writes or the kernel command line: decided before anything else can fail half way
    clear = params.get("clear") or "all"
    if clear not in CLEAR_CHOICES:
        raise AcsError("clear must be one of %s, not %r (role: %s). Nothing was changed."
                       % (", ".join(CLEAR_CHOICES), clear, CLEAR_KNOB))
    lockdown = read_lockdown(root)
    try:
        route = decide_route(params.get("route") or "auto", lockdown, state)
    except RouteError as exc:
        raise AcsError(exc.msg, lockdown=lockdown)

    choice = params.get("direct_nic") or "auto"
    if choice not in DIRECT_NIC_CHOICES:
        raise AcsError("direct_nic must be one of %s, not %r (role: gpudirect_pcie_acs_direct_nic). Nothing was changed."
                       % (", ".join(DIRECT_NIC_CHOICES), choice))
    tool = params.get("rdma_topo") or None
    if tool is None and choice != "skip":
        tool = (find_tool or _find_rdma_topo)()
    elif tool is not None and not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        raise AcsError("rdma_topo: %s is not an executable file; give the path of rdma-core's rdma_topo or leave it "
                       "empty to look in %s and PATH. Nothing was changed." % (tool, ", ".join(RDMA_TOPO_PATHS)))
    direct_nic = direct_nic_report(functions, choice, state, root, tool, run_command or _run_command)
    if choice == "skip" and direct_nic["devices"] and warn:
        warn("direct_nic is skip: the direct-NIC device(s) %s keep the ACS the kernel and firmware set, except where "
             "this run's selection clears it to 0, which is not what rdma_topo computes for them"
             % _device_list(direct_nic["devices"]))

    vfio = sorted(vfio_devices(functions), key=pci_address_key)
    selected, reasons, skipped = select(functions, mode, include, exclude, pairs, params["pair_distances"] or [])
    if direct_nic["managed"]:
        selected = leave_to_rdma_topo(selected, reasons, skipped, set(direct_nic["managed"]))
    if state == "disabled" and vfio and selected and not params["force"]:
        raise AcsError("refusing to clear ACS: PCI function(s) %s are bound to a vfio driver (passed to virtual "
                       "machines or user space?). Clearing ACS lets peer-to-peer traffic bypass the IOMMU, so those "
                       "devices would lose their isolation. Unbind them, or set force: true (role: gpudirect_pcie_acs_force: "
                       "true) if you accept that. Nothing was changed."
                       % ", ".join("%s (%s)" % (a, functions[a].driver) for a in vfio),
                       vfio_devices=vfio, selected=selected)

    entries, no_acs, unknown = plan(functions, selected, reasons, state, acs_ctl, root)
    if unknown and state != "query":
        raise refuse_unknown(unknown, state)
    skipped = skipped + no_acs
    boot = {"boot_argument": "", "boot_parameter": None, "boot_since": None,
            "boot_kernel": params.get("boot_kernel") or None, "clear": clear}
    boot_check = []
    if route["route"] == "kernel_args" and state in ("disabled", "enabled"):
        bridges = [finish_entry(entry, entry["before_value"], False) for entry in entries]
        boot_check = kernel_args_route(bridges, state, params, acs_ctl, clear, route, direct_nic, boot)
    else:
        bridges = apply(entries, check_mode or state == "query", lambda: read_lockdown(root))
    skipped.sort(key=lambda s: pci_address_key(s["address"]))
    changes, disruption = plan_sentences(bridges, functions)
    if route["route"] == "kernel_args" and state == "disabled":
        changes = boot_sentences(bridges, clear, boot, route)
    result = {
        "changed": any(b["changed"] for b in bridges),
        "bridges": bridges,
        "selected": selected,
        "skipped_bridges": skipped,
        "vfio_devices": vfio,
        "kernel_param": {
            "config_acs": ";".join(b["config_acs"] for b in bridges),
            "disable_acs_redir": ";".join(b["address"] for b in bridges),
            "direct_nic_config_acs": direct_nic["config_acs"],
            "boot_argument": boot["boot_argument"],
            "boot_parameter": boot["boot_parameter"],
            "boot_since": boot["boot_since"],
            "boot_kernel": boot["boot_kernel"],
            "clear": clear,
        },
        "route": route,
        "boot_check": boot_check,
        "direct_nic": direct_nic,
        "unknown_bridges": unknown,
        "state": state,
        "mode": mode,
        "msg": summary(state, bridges, selected, skipped, unknown, check_mode),
        "changes": changes,
        "disruption": disruption,
    }
    if route["route"] == "kernel_args" and state in ("disabled", "enabled"):
        result["msg"] = kernel_args_summary(state, bridges, selected, boot, boot_check, route)
    if direct_nic["rdma_topo"]:
        result["msg"] += "; direct-NIC ACS from %s: %s" % (
            direct_nic["rdma_topo"], ("pci=config_acs=\"%s\" at boot" % direct_nic["config_acs"])
            if direct_nic["config_acs"] else "the kernel's default (no pci=config_acs needed)"
            if direct_nic["supported"] else "no supported topology, nothing to set")
    if diff:
        result["diff"] = acs_diff(bridges, unknown)
    return result
