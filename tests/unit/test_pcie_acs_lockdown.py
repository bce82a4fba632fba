"""PCIe ACS under kernel lockdown (issue #44 outcome 1): module_utils/gpudirect_pcie_acs_boot.py, the
gpudirect_pcie_acs module's route option, and the role's kernel_args route.

Inputs are the kernel's own texts (tests/fixtures/pcie_acs_lockdown/README.md): the lockdown file as the
VM tier's Secure Boot node printed it and in the kernel's format for the other levels, and the ACS
parameters of Documentation/admin-guide/kernel-parameters.txt in Debian's 6.1.176 and 6.12.117 sources.
What the kernel does with those parameters at boot is modelled from drivers/pci/pci.c of the same two
sources (boot_61, boot_612 below), so the tests check the module's argument against the kernel's own
behaviour, not against the module's idea of it.
"""

import errno
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from ansible.module_utils import gpudirect_pcie_acs as acs
from ansible.module_utils import gpudirect_pcie_acs_boot as boot
from ansible.module_utils.gpudirect_pci import ACS_BITS

import gpudirect_pcie_acs as pcie_acs_module
from conftest import PROJECT_FIXTURES, ROOT
from hang_guard import HANG_GUARD_S
from sysfs_tree import PORT_DOWNSTREAM, PORT_ROOT, PORT_UPSTREAM, SysfsTree, bridge_config

FIXTURES = os.path.join(PROJECT_FIXTURES, "pcie_acs_lockdown")
SECURE_BOOT_NODE = os.path.join(PROJECT_FIXTURES, "secure_boot", "debian12_ovmf")

SV, TB, RR, CR, UF, EC, DT = (1 << bit for bit in range(7))
# QEMU's hw/pci/pcie.c pcie_acs_init: a downstream port (pcie-root-port) implements SV TB RR CR UF DT
QEMU_ROOT_PORT_CAP = SV | TB | RR | CR | UF | DT
ROOT_PORT = "0000:00:04.0"
NIC = "0000:01:00.0"
DEBIAN12_KERNEL = "6.1.0-50-amd64"
DEBIAN12_BACKPORT_KERNEL = "6.12.117+deb12-amd64"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def secure_boot_capture():
    with open(os.path.join(SECURE_BOOT_NODE, "lockdown.txt")) as handle:
        return handle.read()


# ---------------------------------------------------------------------------
# the kernel at boot, from drivers/pci/pci.c of Debian's 6.1.176 and 6.12.117
# ---------------------------------------------------------------------------

def _entries(argument, name):
    """The entries of ``pci=<name>="..."`` in ``argument`` (quotes removed, as GRUB and the kernel do)."""
    prefix = "pci=%s=" % name
    if not argument.startswith(prefix):
        return []
    return [e for e in argument[len(prefix):].strip('"').split(";") if e]


def _kernel_defaults(cap, fw_ctl, iommu):
    """pci_std_enable_acs: with an IOMMU that asked for ACS, SV RR CR UF where implemented."""
    return fw_ctl | (cap & (SV | RR | CR | UF)) if iommu else fw_ctl


def config_acs_mask_flags(text):
    """__pci_config_acs of 6.12: flag characters read from the last (bit 0) to the first."""
    mask = flags = 0
    for shift, char in enumerate(reversed(text)):
        if char in "01":
            mask |= 1 << shift
            flags |= (1 << shift) if char == "1" else 0
        elif char not in "xX":
            raise ValueError("Invalid ACS flags... Ignoring")
    return mask, flags


def boot_61(address, cap, fw_ctl, argument, iommu=True):
    """ACS Control of ``address`` after a 6.1 boot with ``argument`` (pci_enable_acs, pci_disable_acs_redir;
    6.1 has no config_acs: pci_setup logs "Unknown option" and ignores it)."""
    ctrl = _kernel_defaults(cap, fw_ctl, iommu)
    if address in _entries(argument, "disable_acs_redir"):
        ctrl &= ~(RR | CR | EC)
    return ctrl


def boot_612(address, cap, fw_ctl, argument, iommu=True, first_entry_only=False):
    """ACS Control after a 6.12 boot (pci_enable_acs, __pci_config_acs): disable_acs_redir, then config_acs,
    each ``ctrl = (fw_ctrl & ~mask) | (flags & mask)`` for a named device. ``first_entry_only`` models 6.11
    before "PCI/ACS: Fix 'pci=config_acs=' parameter" (the flags parsed once, the list not walked)."""
    ctrl = _kernel_defaults(cap, fw_ctl, iommu)
    redir = _entries(argument, "disable_acs_redir")
    if first_entry_only:
        redir = redir[:1]
    if address in redir:
        ctrl = (fw_ctl & ~(RR | CR | EC))
    entries = _entries(argument, "config_acs")
    if first_entry_only:
        entries = entries[:1]
    for entry in entries:
        text, _, target = entry.partition("@")
        if target == address:
            mask, flags = config_acs_mask_flags(text)
            ctrl = (fw_ctl & ~mask) | (flags & mask)
    return ctrl


# ---------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------

def vm_tree(tmp_path, lockdown=None, ctl=SV | RR | CR | UF, cmdline=None, osrelease=DEBIAN12_KERNEL):
    """The VM tier's node: a QEMU pcie-root-port 1b36:000c at 00:04.0 (ACS at 0x148, ACSCap as QEMU's
    pcie_acs_init gives a downstream port) with the virtio NIC below it, bound to virtio-pci."""
    t = SysfsTree(tmp_path / "root")
    t.add_pci("0000:00:00.0", vendor=0x8086, device=0x29C0, pci_class=0x060000)
    t.add_bridge(ROOT_PORT, vendor=0x1B36, device=0x000C,
                 config=bridge_config(0x1B36, 0x000C, PORT_ROOT, acs_ctl=ctl, acs_cap=QEMU_ROOT_PORT_CAP))
    t.add_nic(NIC, parent=ROOT_PORT)
    if lockdown is not None:
        t.write("sys/kernel/security/lockdown", lockdown)
    if cmdline is not None:
        t.cmdline(cmdline)
    t.write("proc/sys/kernel/osrelease", osrelease + "\n")
    return t


def switch_tree(tmp_path, lockdown, ctl=SV | RR | CR | UF):
    """Two PLX PEX8747 downstream ports (ACSCap SV TB RR CR UF DT) below one upstream port."""
    t = SysfsTree(tmp_path / "root")
    t.add_pci("0000:00:00.0", vendor=0x8086, device=0x2020, pci_class=0x060000)
    t.add_bridge("0000:00:01.0", vendor=0x8086, device=0x2030, port_type=PORT_ROOT, acs_ctl=0x001D)
    t.add_bridge("0000:01:00.0", parent="0000:00:01.0", vendor=0x10B5, device=0x8747, port_type=PORT_UPSTREAM)
    for address in ("0000:02:08.0", "0000:02:10.0"):
        t.add_bridge(address, parent="0000:01:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM,
                     acs_ctl=ctl)
    t.write("sys/kernel/security/lockdown", lockdown)
    return t


def read_ctl(tree, address, offset=0x148 + 6):
    with open(tree.abs("sys/bus/pci/devices/%s/config" % address), "rb") as handle:
        data = handle.read()
    return data[offset] | (data[offset + 1] << 8)


def set_ctl(tree, address, value, offset=0x148 + 6):
    """What the kernel left in ACS Control at boot (the test's stand-in for a reboot)."""
    path = tree.abs("sys/bus/pci/devices/%s/config" % address)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(bytes([value & 0xFF, value >> 8]))


def config_bytes(tree):
    out = {}
    base = tree.abs("sys/bus/pci/devices")
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name, "config")
        if os.path.exists(path):
            with open(path, "rb") as handle:
                out[name] = handle.read()
    return out


def params(tree, **kwargs):
    base = dict(mode="none", include=[ROOT_PORT], exclude=[], pairs=[], pair_distances=["PIX", "PXB", "PHB"],
                state="disabled", acs_ctl=0x001D, force=False, root=tree.root, direct_nic="skip", route="auto",
                clear="all", boot_kernel=DEBIAN12_KERNEL)
    base.update(kwargs)
    return base


def run(tree, check_mode=False, **kwargs):
    return acs.run(params(tree, **kwargs), check_mode)


def failure(tree, check_mode=False, **kwargs):
    with pytest.raises(acs.AcsError) as info:
        run(tree, check_mode, **kwargs)
    return info.value


# ---------------------------------------------------------------------------
# the lockdown file
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,mode,refuses", [
    (secure_boot_capture(), "integrity", True),            # the Secure Boot node, captured
    (fixture("lockdown_none.txt"), "none", False),
    (fixture("lockdown_confidentiality.txt"), "confidentiality", True),
])
def test_lockdown_levels_in_the_kernels_format(tmp_path, text, mode, refuses):
    tree = vm_tree(tmp_path, lockdown=text)
    found = boot.read_lockdown(tree.root)
    assert (found["mode"], found["refuses_pci_writes"], found["error"]) == (mode, refuses, None)
    assert found["text"] == text.strip()


def test_the_captured_secure_boot_node_is_in_integrity_mode():
    assert secure_boot_capture() == "none [integrity] confidentiality\n"


@pytest.mark.parametrize("name,needle", [
    ("lockdown_malformed_no_bracket.txt", "has no [mode]"),
    ("lockdown_malformed_word.txt", "[partial], none of none/integrity/confidentiality"),
    ("lockdown_malformed_empty.txt", "has no [mode]"),
])
def test_malformed_lockdown_is_unknown_and_auto_refuses_to_guess(tmp_path, name, needle):
    tree = vm_tree(tmp_path, lockdown=fixture(name))
    found = boot.read_lockdown(tree.root)
    assert found["mode"] is None and found["refuses_pci_writes"] is None and needle in found["error"]
    before = config_bytes(tree)
    error = failure(tree)
    assert "cannot tell whether the kernel refuses" in error.msg and needle in error.msg
    assert "gpudirect_pcie_acs_route" in error.msg and "Nothing was changed" in error.msg
    assert "become" not in error.msg
    assert config_bytes(tree) == before
    # an explicit route needs no guess; a report needs no route
    assert run(tree, route="kernel_args", clear="redirect")["route"]["route"] == "kernel_args"
    assert run(tree, state="query")["changed"] is False


def test_no_lockdown_file(tmp_path):
    tree = vm_tree(tmp_path)
    found = boot.read_lockdown(tree.root)
    assert found["refuses_pci_writes"] is None and "securityfs not mounted" in found["source"]
    # securityfs mounted (another LSM's file there) without the lockdown file: no lockdown LSM
    tree.write("sys/kernel/security/apparmor/profiles", "")
    found = boot.read_lockdown(tree.root)
    assert found["refuses_pci_writes"] is False and "no lockdown LSM" in found["source"]


# ---------------------------------------------------------------------------
# the route
# ---------------------------------------------------------------------------

INTEGRITY = {"mode": "integrity", "text": "none [integrity] confidentiality", "error": None,
             "refuses_pci_writes": True, "source": boot.LOCKDOWN_FILE}
NONE = dict(INTEGRITY, mode="none", text="[none] integrity confidentiality", refuses_pci_writes=False)
UNREAD = dict(INTEGRITY, mode=None, text=None, refuses_pci_writes=None, source="unreadable")


@pytest.mark.parametrize("choice,lockdown,state,route", [
    ("auto", NONE, "disabled", "runtime"),
    ("auto", UNREAD, "disabled", "runtime"),
    ("auto", INTEGRITY, "disabled", "kernel_args"),
    ("auto", INTEGRITY, "enabled", "kernel_args"),
    ("auto", INTEGRITY, "query", "kernel_args"),
    ("runtime", NONE, "disabled", "runtime"),
    ("runtime", INTEGRITY, "query", "runtime"),
    ("runtime", INTEGRITY, "absent", "runtime"),
    ("kernel_args", NONE, "disabled", "kernel_args"),
    ("kernel_args", INTEGRITY, "disabled", "kernel_args"),
])
def test_route_decision(choice, lockdown, state, route):
    assert boot.decide_route(choice, lockdown, state)["route"] == route


@pytest.mark.parametrize("state", ["disabled", "enabled"])
def test_runtime_forced_under_lockdown_fails_naming_lockdown_and_the_knob(state):
    with pytest.raises(boot.RouteError) as info:
        boot.decide_route("runtime", INTEGRITY, state)
    msg = info.value.msg
    assert "kernel lockdown is integrity" in msg and "gpudirect_pcie_acs_route is runtime" in msg
    assert "LOCKDOWN_PCI_ACCESS" in msg and "Nothing was changed" in msg and "become" not in msg


@pytest.mark.parametrize("check_mode", [False, True])
def test_module_runtime_under_lockdown_writes_nothing(tmp_path, check_mode):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    error = failure(tree, check_mode, route="runtime")
    assert "refusing to clear ACS at run time: kernel lockdown is integrity" in error.msg
    assert config_bytes(tree) == before and error.details["lockdown"]["mode"] == "integrity"


# ---------------------------------------------------------------------------
# EPERM: lockdown named, never become, when lockdown is the cause
# ---------------------------------------------------------------------------

def _refuse_writes(monkeypatch, err, before_raising=None):
    real_open = os.open

    def refuse(path, flags, *args):
        if flags & os.O_RDWR:
            if before_raising:
                before_raising()
            raise OSError(err, os.strerror(err), path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(acs.os, "open", refuse)


def test_eperm_after_lockdown_was_raised_at_run_time_names_lockdown(tmp_path, monkeypatch):
    """Lockdown can be raised after boot (echo integrity > /sys/kernel/security/lockdown): the file said
    none when the route was chosen, integrity when the write was refused."""
    tree = vm_tree(tmp_path, lockdown=fixture("lockdown_none.txt"))
    _refuse_writes(monkeypatch, errno.EPERM,
                   lambda: tree.write("sys/kernel/security/lockdown", secure_boot_capture()))
    error = failure(tree)
    assert "Operation not permitted" in error.msg and "kernel lockdown is integrity" in error.msg
    assert "gpudirect_pcie_acs_route: auto or kernel_args" in error.msg and "become" not in error.msg


def test_eperm_as_root_without_a_readable_lockdown_points_at_lockdown(tmp_path, monkeypatch):
    tree = vm_tree(tmp_path)
    _refuse_writes(monkeypatch, errno.EPERM)
    monkeypatch.setattr(boot.os, "geteuid", lambda: 0, raising=False)
    monkeypatch.setattr(acs.os, "geteuid", lambda: 0)
    error = failure(tree)
    assert "although running as root" in error.msg and "'Lockdown:'" in error.msg
    assert "securityfs not mounted" in error.msg and "become" not in error.msg


def test_eacces_as_a_user_still_says_become(tmp_path, monkeypatch):
    tree = vm_tree(tmp_path, lockdown=fixture("lockdown_none.txt"))
    _refuse_writes(monkeypatch, errno.EACCES)
    monkeypatch.setattr(acs.os, "geteuid", lambda: 1000)
    error = failure(tree)
    assert "Permission denied" in error.msg and "become: true" in error.msg and "lockdown" not in error.msg


# ---------------------------------------------------------------------------
# the kernel parameters, per version, from the kernel's own documentation
# ---------------------------------------------------------------------------

def test_each_kernel_documents_the_parameter_the_module_chooses_for_it():
    docs = {(6, 1): fixture("kernel-parameters-6.1.176-pci-acs.txt"),
            (6, 12): fixture("kernel-parameters-6.12.117-pci-acs.txt")}
    assert "disable_acs_redir=<pci_dev>[; ...]" in docs[(6, 1)] and "config_acs" not in docs[(6, 1)]
    assert "disable_acs_redir=<pci_dev>[; ...]" in docs[(6, 12)] and "<ACS flags>@<pci_dev>[; ...]" in docs[(6, 12)]
    for version, text in docs.items():
        name = boot.parameter_for(version)[0]
        assert "\t\t%s=" % name in text
    assert boot.parameter_for((6, 10))[0] == "disable_acs_redir" and boot.parameter_for((6, 11))[0] == "config_acs"
    assert boot.parameter_for((4, 19))[0] == "disable_acs_redir" and boot.parameter_for((4, 18)) is None


def test_config_acs_bit_order_is_the_documented_one():
    text = fixture("kernel-parameters-6.12.117-pci-acs.txt")
    documented = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("bit-")]
    assert documented == ["ACS Source Validation", "ACS Translation Blocking", "ACS P2P Request Redirect",
                          "ACS P2P Completion Redirect", "ACS Upstream Forwarding", "ACS P2P Egress Control",
                          "ACS Direct Translated P2P"]
    assert [name for _bit, name in ACS_BITS] == ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                               "EgressCtrl", "DirectTrans"]
    # the documented example: "pci=config_acs=10x" enables P2P Request Redirect, disables Translation
    # Blocking and leaves Source Validation unchanged
    assert "pci=config_acs=10x" in text
    assert config_acs_mask_flags("10x") == (RR | TB, RR)
    # and the module's flags read the same way: force off what is wanted and implemented, leave the rest
    assert boot.flags(RR | CR | EC, QEMU_ROOT_PORT_CAP) == "xxx00xx"
    assert config_acs_mask_flags(boot.flags(boot.ACS_ALL, QEMU_ROOT_PORT_CAP)) == (QEMU_ROOT_PORT_CAP, 0)


# ---------------------------------------------------------------------------
# Debian 12 (6.1): disable_acs_redir only
# ---------------------------------------------------------------------------

def test_debian12_cannot_clear_everything_and_says_which_bits_release_and_knob(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    error = failure(tree)
    assert "gpudirect_pcie_acs_clear=all asks ACS Control 0x0000 at boot" in error.msg
    assert "the boot kernel 6.1.0-50-amd64 takes pci=disable_acs_redir=" in error.msg
    assert "0000:00:04.0 SrcValid TransBlk UpstreamFwd DirectTrans" in error.msg
    assert "gpudirect_pcie_acs_clear: redirect" in error.msg and "6.11 or later" in error.msg
    assert config_bytes(tree) == before


def test_debian12_redirect_route_writes_nothing_and_the_boot_clears_the_redirect_bits(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    result = run(tree, clear="redirect")
    assert config_bytes(tree) == before and result["changed"] is False
    assert result["route"]["route"] == "kernel_args" and result["route"]["reason"] == "kernel lockdown is integrity"
    assert result["kernel_param"]["boot_argument"] == 'pci=disable_acs_redir="0000:00:04.0"'
    assert (result["kernel_param"]["boot_parameter"], result["kernel_param"]["boot_since"]) == ("disable_acs_redir", "4.19")
    assert result["boot_check"] == [
        "0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): ReqRedir CmpltRedir still on"]
    assert result["changes"] == [
        "ACS on bridge 0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd) now; "
        "ReqRedir CmpltRedir off at the next boot through pci=disable_acs_redir (kernel lockdown is integrity)"]
    assert result["disruption"] == [] and "ACS not written at run time" in result["msg"]
    # the 6.1 kernel boots with it (an IOMMU asked for ACS: the kernel's defaults first)
    set_ctl(tree, ROOT_PORT, boot_61(ROOT_PORT, QEMU_ROOT_PORT_CAP, 0, result["kernel_param"]["boot_argument"]))
    assert read_ctl(tree, ROOT_PORT) == SV | UF
    again = run(tree, clear="redirect")
    assert again["boot_check"] == [] and again["changes"] == [] and again["changed"] is False


def test_debian12_kernel_that_ignored_the_argument_is_named(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    argument = run(tree, clear="redirect")["kernel_param"]["boot_argument"]
    # config_acs is unknown to 6.1: the kernel ignores it and programs its defaults
    set_ctl(tree, ROOT_PORT, boot_61(ROOT_PORT, QEMU_ROOT_PORT_CAP, 0, argument.replace("disable_acs_redir", "config_acs")))
    assert run(tree, clear="redirect")["boot_check"] == [
        "0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): ReqRedir CmpltRedir still on"]


# ---------------------------------------------------------------------------
# 6.11 and later: config_acs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["6.11.0-061100-generic", DEBIAN12_BACKPORT_KERNEL])
def test_config_acs_clears_everything_at_boot(tmp_path, release):
    tree = vm_tree(tmp_path, lockdown=fixture("lockdown_confidentiality.txt"))
    result = run(tree, boot_kernel=release)
    assert result["kernel_param"]["boot_argument"] == 'pci=config_acs="0x00000@0000:00:04.0"'
    assert result["kernel_param"]["boot_since"] == "6.11" and result["changed"] is False
    set_ctl(tree, ROOT_PORT, boot_612(ROOT_PORT, QEMU_ROOT_PORT_CAP, 0, result["kernel_param"]["boot_argument"]))
    assert read_ctl(tree, ROOT_PORT) == 0
    assert run(tree, boot_kernel=release)["boot_check"] == []


def test_config_acs_redirect_leaves_the_other_bits_to_the_firmware(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    argument = run(tree, clear="redirect", boot_kernel=DEBIAN12_BACKPORT_KERNEL)["kernel_param"]["boot_argument"]
    assert argument == 'pci=config_acs="xxx00xx@0000:00:04.0"'
    firmware = SV | RR | CR | UF
    set_ctl(tree, ROOT_PORT, boot_612(ROOT_PORT, QEMU_ROOT_PORT_CAP, firmware, argument))
    assert read_ctl(tree, ROOT_PORT) == SV | UF
    assert run(tree, clear="redirect", boot_kernel=DEBIAN12_BACKPORT_KERNEL)["boot_check"] == []
    # clear all, on that boot: SrcValid and UpstreamFwd are named
    assert run(tree, boot_kernel=DEBIAN12_BACKPORT_KERNEL)["boot_check"] == [
        "0000:00:04.0 (1b36:000c): ACSCtl 0x0011 (SrcValid UpstreamFwd): SrcValid UpstreamFwd still on"]


def test_a_kernel_that_configured_only_the_first_bridge_is_caught(tmp_path):
    """6.11 as released parsed the flags once and configured only the first device of the list."""
    tree = switch_tree(tmp_path, secure_boot_capture())
    result = run(tree, mode="plx", include=[], boot_kernel="6.11.0-061100-generic")
    argument = result["kernel_param"]["boot_argument"]
    assert argument == 'pci=config_acs="0x00000@0000:02:08.0;0x00000@0000:02:10.0"'
    for address in ("0000:02:08.0", "0000:02:10.0"):
        set_ctl(tree, address, boot_612(address, 0x5F, 0, argument, first_entry_only=True))
    assert run(tree, mode="plx", include=[], boot_kernel="6.11.0-061100-generic")["boot_check"] == [
        "0000:02:10.0 (10b5:8747): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): "
        "SrcValid ReqRedir CmpltRedir UpstreamFwd still on"]


# ---------------------------------------------------------------------------
# releases, explicit values, other states, direct-NIC
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("release,needle", [
    (None, "gpudirect_pcie_acs_kernel_param_value"),
    ("", "is not a kernel release"),
    ("4.18.0-553.el8_10.x86_64", "predates every kernel parameter that clears ACS"),
])
def test_unknown_or_too_old_boot_kernel_fails_before_any_change(tmp_path, release, needle):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    error = failure(tree, clear="redirect", boot_kernel=release)
    assert needle in error.msg and "Nothing was changed" in error.msg and config_bytes(tree) == before


def test_an_explicit_argument_is_used_and_still_checked(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    explicit = 'pci=disable_acs_redir="pci:1b36:000c"'
    result = run(tree, boot_argument=explicit, boot_kernel=None)
    assert result["kernel_param"]["boot_argument"] == explicit
    assert result["kernel_param"]["boot_parameter"] == "disable_acs_redir"
    assert result["boot_check"][0].endswith("SrcValid ReqRedir CmpltRedir UpstreamFwd still on")


def test_enabled_and_query_under_lockdown_write_nothing(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture(), ctl=0)
    before = config_bytes(tree)
    enabled = run(tree, state="enabled")
    assert enabled["changed"] is False and enabled["kernel_param"]["boot_argument"] == ""
    assert "the kernel programs ACS at the next boot" in enabled["msg"]
    error = failure(tree, state="enabled", acs_ctl=0x005D)
    assert "acs_ctl 0x005d (role: gpudirect_pcie_acs_ctl) cannot be written" in error.msg
    assert run(tree, state="query")["route"]["route"] == "kernel_args"
    assert config_bytes(tree) == before


def test_vfio_still_refuses_on_the_kernel_args_route(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    devdir = tree.pci_dirs[NIC]
    os.unlink(os.path.join(devdir, "driver"))
    tree.mkdir("sys/bus/pci/drivers/vfio-pci")
    tree.link(tree.rel(os.path.join(devdir, "driver")), tree.abs("sys/bus/pci/drivers/vfio-pci"))
    assert "bound to a vfio driver" in failure(tree, clear="redirect").msg


def test_direct_nic_value_joins_only_a_config_acs_kernel():
    ours = [{"address": "0000:02:08.0", "acs_cap": 0x5F}]
    rdma_topo = "xx111x0@0008:00:00.0"
    joined = boot.boot_parameter(ours, DEBIAN12_BACKPORT_KERNEL, "all", rdma_topo)
    assert joined["argument"] == 'pci=config_acs="xx111x0@0008:00:00.0;0x00000@0000:02:08.0"'
    assert boot.boot_parameter([], DEBIAN12_KERNEL, "redirect", rdma_topo)["argument"] == 'pci=config_acs="%s"' % rdma_topo
    with pytest.raises(boot.RouteError) as info:
        boot.boot_parameter(ours, DEBIAN12_KERNEL, "redirect", rdma_topo)
    assert "cannot be combined into one argument" in info.value.msg


def test_module_options_and_documentation(run_module, tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    result = run_module(pcie_acs_module, {"root": tree.root, "mode": "none", "include": [ROOT_PORT],
                                          "direct_nic": "skip", "clear": "redirect",
                                          "boot_kernel": DEBIAN12_KERNEL}, check_mode=True)
    assert result["changed"] is False and result["route"]["route"] == "kernel_args"
    assert result["kernel_param"]["boot_argument"] == 'pci=disable_acs_redir="0000:00:04.0"'
    bad = run_module(pcie_acs_module, {"root": tree.root, "route": "sometimes"}, check_mode=True)
    assert bad["failed"] and "route" in bad["msg"]


# ---------------------------------------------------------------------------
# the role: the plan under lockdown, and the check after the boot
# ---------------------------------------------------------------------------

ROLE_PLAY = """
- name: The gpudirect_pcie_acs role on a fabricated tree
  hosts: all
  gather_facts: false
  tasks:
    - name: Plan only, or the whole role
      ansible.builtin.include_role:
        name: gpudirect_pcie_acs
        tasks_from: "{{ what }}"
    - name: Keep the plan
      ansible.builtin.copy:
        content: "{{ {'plan': gpudirect_pcie_acs_plan | default({}),
                      'after_boot': __gpudirect_pcie_acs_after_boot | default(none)} | to_json }}"
        dest: "{{ plan_out }}"
        mode: "0644"
      check_mode: false
      changed_when: false  # the test's own record, not the role's
"""


def _role(tmp_path, tree, what, extra_vars=None, *argv):
    """Run the role over a local connection on ``tree`` with this checkout's roles; the boot-time unit's
    files under tmp_path/etc. Returns (rc, log, {"plan", "after_boot"})."""
    from conftest import playbook_env
    etc = tmp_path / "etc"
    play, inventory, out = tmp_path / "play.yml", tmp_path / "hosts.yml", tmp_path / "plan.json"
    play.write_text(ROLE_PLAY)
    inventory.write_text("all:\n  hosts:\n    node:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    variables = {"what": what, "plan_out": str(out), "__gpudirect_pcie_acs_root": tree.root,
                 "__gpudirect_pcie_acs_conf_dir": str(etc), "__gpudirect_pcie_acs_conf_path": str(etc / "pcie-acs.conf"),
                 "__gpudirect_pcie_acs_script_path": str(etc / "gpudirect-pcie-acs"),
                 "__gpudirect_pcie_acs_unit_path": str(etc / "gpudirect-pcie-acs.service"),
                 "ansible_facts": {"os_family": "Debian", "kernel": DEBIAN12_KERNEL},
                 "gpudirect_pcie_acs_mode": "none", "gpudirect_pcie_acs_include": [ROOT_PORT],
                 "gpudirect_pcie_acs_direct_nic": "skip", "gpudirect_drain_nodes_run_no_jobs": True,
                 # no boot loader of this machine is ever looked at: gpudirect_reboot finds no GRUB here
                 "__gpudirect_reboot_ka_tool": str(tmp_path / "no-update-grub")}
    variables.update(extra_vars or {})
    if out.exists():
        out.unlink()
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inventory), str(play),
                           "-e", json.dumps(variables)] + list(argv), cwd=ROOT, env=playbook_env(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=HANG_GUARD_S, check=False)
    return proc.returncode, proc.stdout, json.loads(out.read_text()) if out.exists() else None


def test_role_under_lockdown_plans_the_kernel_parameter_and_writes_nothing(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture(), cmdline="BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro")
    before = config_bytes(tree)
    rc, log, out = _role(tmp_path, tree, "main", {"gpudirect_pcie_acs_clear": "redirect"}, "--check", "--diff")
    assert rc == 0, log[-4000:]
    plan = out["plan"]
    assert plan["route"] == "kernel_args" and plan["bridges"] == [] and plan["boot_unit"] == "none"
    assert plan["changes"][0].endswith("ReqRedir CmpltRedir off at the next boot through pci=disable_acs_redir "
                                       "(kernel lockdown is integrity)")
    assert "route kernel_args: kernel lockdown is integrity" in log
    assert config_bytes(tree) == before and not (tmp_path / "etc").exists()
    # no GRUB here: gpudirect_reboot says the argument cannot be applied; the role still keeps what to check
    assert "not applied, no drop-in is written" in log
    assert out["after_boot"] == {"argument": 'pci=disable_acs_redir="0000:00:04.0"', "bridges": [ROOT_PORT],
                                 "acs_clear": "redirect"}


def test_role_runtime_route_under_lockdown_fails_before_any_change(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    rc, log, _out = _role(tmp_path, tree, "main", {"gpudirect_pcie_acs_route": "runtime"})
    assert rc != 0
    assert "kernel lockdown is integrity" in log and "gpudirect_pcie_acs_route is runtime" in log
    assert "become" not in log.split("kernel lockdown is integrity", 1)[1][:600]
    assert config_bytes(tree) == before and not (tmp_path / "etc").exists()


def test_role_on_a_kernel_booted_with_the_argument_checks_acs(tmp_path):
    argument = 'pci=disable_acs_redir="0000:00:04.0"'
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture(), cmdline="BOOT_IMAGE=/vmlinuz ro quiet " + argument)
    rc, log, _out = _role(tmp_path, tree, "main", {"gpudirect_pcie_acs_clear": "redirect"}, "--check")
    assert rc != 0
    assert ("but ACS is still on: 0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): "
            "ReqRedir CmpltRedir still on") in log
    set_ctl(tree, ROOT_PORT, boot_61(ROOT_PORT, QEMU_ROOT_PORT_CAP, 0, argument))
    rc, log, out = _role(tmp_path, tree, "main", {"gpudirect_pcie_acs_clear": "redirect"}, "--check")
    assert rc == 0, log[-4000:]
    assert out["plan"]["changes"] == [] and out["after_boot"] is None


AFTER_BOOT_PLAY = """
- name: The reboot stage's ACS check
  hosts: node
  gather_facts: false
  tasks:
    - name: Check ACS that the kernel set at boot
      ansible.builtin.include_role:
        name: gpudirect_pcie_acs
        tasks_from: after_boot
"""


def _after_boot(tmp_path, tree, clear="redirect"):
    """tasks/after_boot.yml as the reboot stage runs it, with gpudirect_state's forget a stand-in that
    logs (the real one writes under /var/lib/gpudirect). Returns (rc, log, forgotten reasons)."""
    project = tmp_path / "project"
    (project / "roles" / "gpudirect_state" / "tasks").mkdir(parents=True)
    os.symlink(os.path.join(ROOT, "roles", "gpudirect_pcie_acs"), project / "roles" / "gpudirect_pcie_acs")
    (project / "roles" / "gpudirect_state" / "tasks" / "forget.yml").write_text(textwrap.dedent("""\
        ---
        - name: Log the removal
          ansible.builtin.debug:
            msg: "EVENT forget {{ gpudirect_state_forget_reason }}"
        """))
    (project / "play.yml").write_text("---" + AFTER_BOOT_PLAY)
    hostvars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (project / "hosts.yml").write_text("all:\n  hosts:\n    node: %s\n" % json.dumps(hostvars))
    # extra vars: the role's own vars (vars/main.yml) outrank inventory variables
    extra = {"__gpudirect_pcie_acs_root": tree.root, "gpudirect_pcie_acs_direct_nic": "skip",
             "__gpudirect_pcie_acs_after_boot": {"argument": 'pci=disable_acs_redir="0000:00:04.0"',
                                                 "bridges": [ROOT_PORT], "acs_clear": clear}}
    (project / "ansible.cfg").write_text(textwrap.dedent("""\
        [defaults]
        roles_path = roles
        library = %s/library
        module_utils = %s/module_utils
        filter_plugins = %s/filter_plugins
        retry_files_enabled = false
        """ % (ROOT, ROOT, ROOT)))
    env = dict(os.environ, ANSIBLE_CONFIG=str(project / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", "hosts.yml", "-e", json.dumps(extra),
                           "play.yml"], cwd=project,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=HANG_GUARD_S, check=False)
    return proc.returncode, proc.stdout, re.findall(r'"msg": "EVENT forget (.*)"', proc.stdout)


def test_after_boot_fails_naming_the_bridge_and_forgets_the_node(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture())
    before = config_bytes(tree)
    rc, log, forgotten = _after_boot(tmp_path, tree)
    assert rc == 2, log[-4000:]
    assert ("but ACS is still on: 0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): "
            "ReqRedir CmpltRedir still on") in log
    assert forgotten == ["ACS check after the boot 'Check that the kernel cleared ACS at boot' failed"]
    assert config_bytes(tree) == before


def test_after_boot_passes_once_the_kernel_cleared_the_bits(tmp_path):
    tree = vm_tree(tmp_path, lockdown=secure_boot_capture(), ctl=SV | UF)
    rc, log, forgotten = _after_boot(tmp_path, tree)
    assert rc == 0, log[-4000:]
    assert forgotten == [] and "ACS cleared by the kernel at boot" in log
