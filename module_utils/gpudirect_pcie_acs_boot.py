# -*- coding: utf-8 -*-
"""PCIe ACS when user space may not write PCI configuration space: the kernel's lockdown,
the choice between writing ACS Control at run time and having the kernel set it at boot
through a kernel parameter, the parameter the boot kernel understands, and the check of the
registers after that boot. Used by module_utils/gpudirect_pcie_acs.py.

Facts this file relies on, from the kernel's own source (Debian's linux-source-6.1 6.1.176-1
and linux-source-6.12 6.12.117-1~deb12u1; tests/fixtures/pcie_acs_lockdown/README.md quotes them):

- Lockdown. ``security/lockdown/lockdown.c`` ``lockdown_read`` prints the levels ``none``,
  ``integrity``, ``confidentiality`` separated by blanks, the active one in brackets, and turns
  the last blank into a newline (``none [integrity] confidentiality``). The parser is
  ``gpudirect_secure_boot.parse_lockdown`` (the one the module-signing facts use).
  ``include/linux/security.h`` orders ``LOCKDOWN_PCI_ACCESS`` below ``LOCKDOWN_INTEGRITY_MAX``,
  so both integrity and confidentiality refuse it; ``drivers/pci/pci-sysfs.c`` ``pci_write_config``
  and ``drivers/pci/proc.c`` ``proc_bus_pci_write`` return ``security_locked_down(LOCKDOWN_PCI_ACCESS)``,
  -EPERM, and the kernel logs ``Lockdown: <comm>: direct PCI access is restricted; see man
  kernel_lockdown.7``. The kernel's own writes at enumeration are not user-space writes and are not
  refused.
- ``pci=disable_acs_redir=<pci_dev>[; ...]`` (Documentation/admin-guide/kernel-parameters.txt;
  mainline since 4.19: Logan Gunthorpe's aaca43fda742, merged with the pci/peer-to-peer branch
  in 2018-08). ``drivers/pci/pci.c`` clears ``PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC`` (ReqRedir,
  CmpltRedir, EgressCtrl) and nothing else, after the kernel's own defaults. With an IOMMU the
  kernel first sets SrcValid, ReqRedir, CmpltRedir, UpstreamFwd (and TransBlk on external or
  untrusted ports) where ACSCap has them (``pci_std_enable_acs``), so SrcValid and UpstreamFwd
  stay on.
- ``pci=config_acs=<ACS flags>@<pci_dev>[; ...]`` (mainline since 6.11, commit 47c8846a49ba
  "PCI: Extend ACS configurability"). The flags are one character per ACS Control bit, the last
  character bit 0 (SrcValid) and the first bit 6 (DirectTrans): ``0`` force off, ``1`` force on,
  ``x`` leave. Bits not forced keep the value firmware left (``fw_ctrl``), so forcing every bit
  ACSCap implements to ``0`` gives ACS Control 0x0000. From 6.11 both parameters go through one
  parser; 6.11 as released configured only the first device of a list, for both parameters (fixed
  by "PCI/ACS: Fix 'pci=config_acs=' parameter", 9cf8a952d57b, taken into the stable series; the
  6.12.117 source has the fix). The check after the boot catches a kernel that ignored an entry.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.gpudirect_host import read_text
from ansible.module_utils.gpudirect_pci import decode_acs_bits
from ansible.module_utils.gpudirect_secure_boot import LOCKDOWN_MODES, parse_lockdown
from ansible.module_utils.gpudirect_versions import parse_kernel_version

LOCKDOWN_FILE = "/sys/kernel/security/lockdown"
# LOCKDOWN_PCI_ACCESS < LOCKDOWN_INTEGRITY_MAX (include/linux/security.h): refused at both levels
LOCKDOWN_REFUSES_PCI = ("integrity", "confidentiality")

ROUTES = ("auto", "runtime", "kernel_args")
CLEAR_CHOICES = ("all", "redirect")

ACS_ALL = 0x007F
# PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC: what pci=disable_acs_redir clears
ACS_REDIRECT = 0x0004 | 0x0008 | 0x0020
CLEAR_MASKS = {"all": ACS_ALL, "redirect": ACS_REDIRECT}

# (name, first mainline release, ACS Control bits it can force off)
PARAM_CONFIG_ACS = ("config_acs", (6, 11), ACS_ALL)
PARAM_DISABLE_ACS_REDIR = ("disable_acs_redir", (4, 19), ACS_REDIRECT)

ROUTE_KNOB = "gpudirect_pcie_acs_route"
CLEAR_KNOB = "gpudirect_pcie_acs_clear"
VALUE_KNOB = "gpudirect_pcie_acs_kernel_param_value"


class RouteError(Exception):
    """A refusal, before anything is written; ``msg`` says what is wrong and what to do."""

    def __init__(self, msg):
        super(RouteError, self).__init__(msg)
        self.msg = msg


def bit_names(value):
    return " ".join(decode_acs_bits(value)) or "none"


def version_text(version):
    return "%d.%d" % version


# --------------------------------------------------------------------------
# lockdown
# --------------------------------------------------------------------------

def read_lockdown(root="/"):
    """The kernel's lockdown as this node shows it, for the route decision:
    ``{"mode", "text", "error", "refuses_pci_writes", "source"}``.

    ``mode`` is the bracketed level (parse_lockdown); ``refuses_pci_writes`` True for
    integrity and confidentiality, False for none and for a mounted securityfs without the
    file (a kernel without the lockdown LSM), None when it cannot be known (securityfs not
    mounted, or text that is not the kernel's format: ``error`` then says what was read)."""
    security = os.path.join(root or "/", "sys", "kernel", "security")
    text = read_text(os.path.join(security, "lockdown"))
    out = {"mode": None, "text": None, "error": None, "refuses_pci_writes": None, "source": LOCKDOWN_FILE}
    if text is None:
        try:
            mounted = bool(os.listdir(security))
        except OSError:
            mounted = False
        if mounted:
            out["refuses_pci_writes"] = False
            out["source"] = "%s absent while securityfs is mounted (no lockdown LSM)" % LOCKDOWN_FILE
        else:
            out["source"] = "%s unreadable (securityfs not mounted at /sys/kernel/security?)" % LOCKDOWN_FILE
        return out
    out["text"] = text.strip()[:200]
    try:
        mode = parse_lockdown(text)
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    if mode not in LOCKDOWN_MODES:
        out["error"] = "%s has the level [%s], none of %s: %r" % (LOCKDOWN_FILE, mode, "/".join(LOCKDOWN_MODES),
                                                                 out["text"])
        return out
    out["mode"] = mode
    out["refuses_pci_writes"] = mode in LOCKDOWN_REFUSES_PCI
    return out


def lockdown_cause(lockdown):
    """One sentence naming lockdown as the reason user-space PCI writes are refused."""
    return ("kernel lockdown is %s (%s: %s), and lockdown refuses user-space writes to PCI configuration space "
            "(LOCKDOWN_PCI_ACCESS: the kernel logs 'Lockdown: ...: direct PCI access is restricted')"
            % (lockdown["mode"], LOCKDOWN_FILE, lockdown["text"]))


def decide_route(choice, lockdown, state):
    """``{"choice", "route", "why", "lockdown"}``: runtime (write ACS Control now, and with the
    boot-time unit at every boot) or kernel_args (no user-space write: the kernel sets ACS at
    boot from its command line). Raises RouteError, before anything is written, where the
    admin's choice cannot work (runtime under lockdown) or the lockdown cannot be read
    (auto with a lockdown file that is not the kernel's format)."""
    writes = state in ("disabled", "enabled")
    out = {"choice": choice, "route": None, "why": None, "reason": None, "lockdown": lockdown}
    if choice not in ROUTES:
        raise RouteError("route must be one of %s, not %r (role: %s). Nothing was changed."
                         % (", ".join(ROUTES), choice, ROUTE_KNOB))
    if choice == "kernel_args":
        out.update(route="kernel_args", why="%s is kernel_args" % ROUTE_KNOB, reason="%s is kernel_args" % ROUTE_KNOB)
        return out
    if lockdown["refuses_pci_writes"]:
        if choice == "runtime" and writes:
            raise RouteError(
                "refusing to %s ACS at run time: %s, and %s is runtime. Set %s: auto (or kernel_args) to have "
                "the kernel set ACS at boot through its command line (a reboot, planned through the reboot "
                "stage), or boot without lockdown. Nothing was changed."
                % ("clear" if state == "disabled" else "set", lockdown_cause(lockdown), ROUTE_KNOB, ROUTE_KNOB))
        if choice == "auto":
            out.update(route="kernel_args", why=lockdown_cause(lockdown), reason="kernel lockdown is %s" % lockdown["mode"])
            return out
        out.update(route="runtime", why="%s is runtime" % ROUTE_KNOB, reason="%s is runtime" % ROUTE_KNOB)
        return out
    if lockdown["error"] and choice == "auto" and writes:
        raise RouteError(
            "cannot tell whether the kernel refuses user-space writes to PCI configuration space: %s. Set %s: "
            "kernel_args (the kernel sets ACS at boot; works with and without lockdown) or runtime (write now, "
            "refused under lockdown) explicitly. Nothing was changed." % (lockdown["error"], ROUTE_KNOB))
    out["route"] = "runtime"
    out["why"] = ("%s is runtime" % ROUTE_KNOB if choice == "runtime"
                  else "kernel lockdown is %s" % lockdown["mode"] if lockdown["mode"]
                  else lockdown["source"])
    out["reason"] = out["why"]
    return out


def eperm_message(address, target, offset, exc, lockdown, euid):
    """Why a write of ACS Control failed with EPERM/EACCES and what to do: lockdown named as the
    cause when it is on (or cannot be read while running as root), never ``become`` then."""
    head = "%s: writing ACSCtl 0x%04x at offset 0x%x failed (%s)" % (address, target, offset, exc)
    if lockdown["refuses_pci_writes"]:
        return ("%s: %s. Nothing more was written. Set %s: auto or kernel_args to have the kernel clear ACS at boot "
                "through its command line instead." % (head, lockdown_cause(lockdown), ROUTE_KNOB))
    if euid == 0 and getattr(exc, "errno", None) == 1:
        return ("%s although running as root: the kernel or a security module refused the write. %s; look for "
                "'Lockdown:' in the kernel log (dmesg). Under lockdown set %s: kernel_args."
                % (head, lockdown["error"] or lockdown["source"] if lockdown["refuses_pci_writes"] is None
                   else "%s says [%s]" % (LOCKDOWN_FILE, lockdown["mode"]), ROUTE_KNOB))
    return "%s: writing PCI configuration space needs root, run the task with become: true" % head


# --------------------------------------------------------------------------
# the kernel parameter for the boot kernel
# --------------------------------------------------------------------------

def parse_release(release):
    """``(major, minor)`` of a kernel release such as ``6.1.0-50-amd64``; None when it is not one."""
    return parse_kernel_version((release or "").strip()) if release else None


def parameter_for(version):
    """The parameter a kernel of ``version`` takes for clearing ACS: config_acs from 6.11,
    disable_acs_redir from 4.19, else None."""
    for param in (PARAM_CONFIG_ACS, PARAM_DISABLE_ACS_REDIR):
        if version >= param[1]:
            return param
    return None


def flags(wanted, cap):
    """``pci=config_acs=`` flags forcing ``wanted`` bits off and leaving the others: bit 6 first,
    ``0`` where the bit is wanted off and implemented (ACSCap), ``x`` elsewhere."""
    return "".join("0" if wanted & cap & (1 << bit) else "x" for bit in range(6, -1, -1))


def boot_parameter(bridges, release, clear, direct_config_acs=""):
    """The kernel argument that has the boot kernel ``release`` clear the ``clear`` bits
    (all, redirect) that each bridge implements, joined with rdma_topo's ``config_acs`` value
    of a direct-NIC platform. ``bridges``: dicts with ``address`` and ``acs_cap`` (int).
    Returns ``{"argument", "parameter", "since", "value"}`` (argument "" when no bridge has a
    bit to clear). Raises RouteError naming the bits, the release and the knobs where the
    boot kernel's parameter cannot clear what is asked, or the release is unknown."""
    mask = CLEAR_MASKS[clear]
    wanted = [(b["address"], b["acs_cap"] & mask) for b in bridges if b["acs_cap"] & mask]
    if not wanted and not direct_config_acs:
        return {"argument": "", "parameter": None, "since": None, "value": ""}
    version = parse_release(release)
    if version is None:
        raise RouteError("the boot kernel's release %r is not a kernel release, so the ACS kernel parameter it "
                         "understands cannot be chosen: run the preflight stage (or gather facts) first, or give the "
                         "whole argument in %s. Nothing was changed." % (release, VALUE_KNOB))
    param = parameter_for(version)
    if param is None:
        raise RouteError(
            "the boot kernel %s predates every kernel parameter that clears ACS (pci=disable_acs_redir= came with "
            "Linux %s, pci=config_acs= with %s), and user-space writes are not an option on this node (%s). Boot "
            "a newer kernel, or give the argument your vendor kernel documents in %s. Nothing was changed."
            % (release, version_text(PARAM_DISABLE_ACS_REDIR[1]), version_text(PARAM_CONFIG_ACS[1]), ROUTE_KNOB,
               VALUE_KNOB))
    if param is PARAM_DISABLE_ACS_REDIR:
        beyond = [(address, bits & ~param[2]) for address, bits in wanted if bits & ~param[2]]
        if beyond:
            raise RouteError(
                "%s=%s asks ACS Control 0x0000 at boot, but the boot kernel %s takes pci=disable_acs_redir= (Linux %s "
                "to 6.10), which clears only ReqRedir, CmpltRedir and EgressCtrl; pci=config_acs=, which can clear "
                "every bit, came with Linux %s. These bits would stay as the kernel and firmware set them: %s. Set "
                "%s: redirect to clear only the redirect bits (peer-to-peer requests and completions then go "
                "straight through the switch), or boot a kernel %s or later. Nothing was changed."
                % (CLEAR_KNOB, clear, release, version_text(param[1]), version_text(PARAM_CONFIG_ACS[1]),
                   "; ".join("%s %s" % (address, bit_names(bits)) for address, bits in beyond), CLEAR_KNOB,
                   version_text(PARAM_CONFIG_ACS[1])))
    if param is PARAM_DISABLE_ACS_REDIR and direct_config_acs and wanted:
        raise RouteError(
            "this direct-NIC platform's ACS comes from rdma_topo's pci=config_acs= value, and the bridges this role "
            "clears would need pci=disable_acs_redir= on the boot kernel %s (before Linux %s): the two cannot be "
            "combined into one argument. Boot a kernel %s or later, or leave those bridges out "
            "(gpudirect_pcie_acs_exclude). Nothing was changed."
            % (release, version_text(PARAM_CONFIG_ACS[1]), version_text(PARAM_CONFIG_ACS[1])))
    if param is PARAM_CONFIG_ACS or (direct_config_acs and not wanted):
        ours = ["%s@%s" % (flags(bits, bits), address) for address, bits in wanted]
        entries = ([direct_config_acs] if direct_config_acs else []) + ours
        name, since = PARAM_CONFIG_ACS[0], PARAM_CONFIG_ACS[1]
    else:
        entries = [address for address, _bits in wanted]
        name, since = param[0], param[1]
    if not entries:
        return {"argument": "", "parameter": None, "since": None, "value": ""}
    value = ";".join(entries)
    # ';' separates GRUB commands: the value is quoted, as the kernel's own examples do
    return {"argument": 'pci=%s="%s"' % (name, value), "parameter": name, "since": version_text(since), "value": value}


# --------------------------------------------------------------------------
# the registers after the boot
# --------------------------------------------------------------------------

def pending_bits(ctl, cap, clear):
    """Bits of ACS Control that ``clear`` wants off, the bridge implements, and are still on."""
    return ctl & cap & CLEAR_MASKS[clear]


def boot_check_lines(bridges, clear):
    """One line per bridge whose wanted-off bits are still on: ``<address> (<ids>): ACSCtl <value>
    (<bits>): <bits still on> still on``. ``bridges``: the module's report entries."""
    lines = []
    for bridge in bridges:
        ctl, cap = int(bridge["after"], 16), int(bridge["acs_cap"], 16)
        left = pending_bits(ctl, cap, clear)
        if left:
            lines.append("%s (%s:%s): ACSCtl %s (%s): %s still on" % (
                bridge["address"], (bridge["vendor_id"] or "0x????")[2:], (bridge["device_id"] or "0x????")[2:],
                bridge["after"], bit_names(ctl), bit_names(left)))
    return lines
