"""Unit tests for library/gpudirect_pcie_acs.py (logic: module_utils/gpudirect_pcie_acs.py) on fake sysfs trees
whose config files carry real configuration-space byte layouts (tests/unit/sysfs_tree.py).

The central property: the module writes only the two bytes of ACS Control at the offset found
by walking the extended capability list, never a fixed offset such as the 0xf2a of the old
``setpci -s $pci f2a.w=0000`` scripts. Most tests compare every byte of every config file of the
tree before and after a run.
"""

import errno
import os
import struct

import pytest

from ansible.module_utils import basic

from ansible.module_utils import gpudirect_pcie_acs as acs

import gpudirect_pcie_acs as pcie_acs_module
from hang_guard import HANG_GUARD_S
from sysfs_tree import (
    ACS_ALL_CTL,
    PORT_DOWNSTREAM,
    PORT_ROOT,
    PORT_UPSTREAM,
    ConfigSpace,
    SysfsTree,
    bridge_config,
    config_capture_tree,
    gpu_server,
)

PLX_UP = "0000:01:00.0"
PLX_DN_148 = "0000:02:08.0"
PLX_DN_2A0 = "0000:02:10.0"
PLX_DN_F24 = "0000:02:18.0"
ROOT_PORT = "0000:00:01.0"
PEX89K = "0000:41:00.0"
LSI_OTHER_BRIDGE = "0000:40:02.0"
PLX_NT_ENDPOINT = "0000:02:00.1"
GPU = "0000:03:00.0"
NIC = "0000:04:00.0"
NIC_F1 = "0000:04:00.1"

# a vendor-specific extended capability (id 0x000b) whose body covers 0xf24..0xf5f: the bytes
# at 0xf2a are *its* data, exactly where the old PLX-only script writes.
VSEC_AT_F20_BODY = bytes(range(0x40, 0x80))


# ---------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------

def acs_2a0_config(vendor=0x10B5, device=0x8747, ctl=ACS_ALL_CTL):
    """PCIe downstream port whose extended list is AER 0x100 -> VSEC 0x140 -> LTR 0x1c0 ->
    ACS 0x2a0 -> VSEC 0xf20 (data over 0xf2a) -> end."""
    cfg = ConfigSpace(vendor, device, 0x060400)
    cfg.add_cap(0x40, 0x01, b"\x03\x00").add_cap(0x48, 0x05).add_pcie(0x68, PORT_DOWNSTREAM)
    cfg.add_aer(0x100)
    cfg.add_ext(0x140, 0x000B, 1, b"\x02\x00\x10\x01" + b"\xaa" * 12)
    cfg.add_ext(0x1C0, 0x0018, 1, b"\x03\x10\x03\x10")
    cfg.add_acs(0x2A0, ctl=ctl)
    cfg.add_ext(0xF20, 0x000B, 1, VSEC_AT_F20_BODY)
    return cfg


def acs_f24_config(ctl=ACS_ALL_CTL):
    """The one layout where 0xf2a *is* ACS Control: a PLX port whose ACS capability sits at 0xf24
    (AER 0x100 -> VSEC 0x950 -> ACS 0xf24)."""
    cfg = ConfigSpace(0x10B5, 0x8747, 0x060400)
    cfg.add_cap(0x40, 0x01, b"\x03\x00").add_cap(0x48, 0x05).add_pcie(0x68, PORT_DOWNSTREAM)
    cfg.add_aer(0x100)
    cfg.add_ext(0x950, 0x000B, 1, b"\x01\x00\x14\x01")
    cfg.add_acs(0xF24, ctl=ctl)
    return cfg


def server(tmp_path, plx_ctl=ACS_ALL_CTL):
    """Intel root port 00:01.0 (ACS 0x148, ctl 0x001d) -> PLX PEX8747 upstream 01:00.0 (no ACS) ->
    downstream ports 02:08.0 (ACS 0x148), 02:10.0 (ACS 0x2a0, VSEC data at 0xf2a), 02:18.0
    (ACS 0xf24) and an NT endpoint 02:00.1 of PLX (not a bridge) -> GPU 03:00.0 under 02:08.0,
    ConnectX 04:00.0/.1 under 02:10.0. Second host bridge pci0000:40: a Broadcom/LSI bridge
    1000:1234 (not a PEX switch) at 40:02.0 and a PEX89000 port 1000:c030 at 41:00.0 (ACS 0x1f0)."""
    t = SysfsTree(tmp_path / "root")
    t.add_pci("0000:00:00.0", vendor=0x8086, device=0x2020, pci_class=0x060000)
    t.add_bridge(ROOT_PORT, vendor=0x8086, device=0x2030, port_type=PORT_ROOT, acs_ctl=0x001D)
    t.add_bridge(PLX_UP, parent=ROOT_PORT, vendor=0x10B5, device=0x8747, port_type=PORT_UPSTREAM)
    t.add_bridge(PLX_DN_148, parent=PLX_UP, vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM,
                 acs_ctl=plx_ctl, acs_offset=0x148)
    t.add_bridge(PLX_DN_2A0, parent=PLX_UP, vendor=0x10B5, device=0x8747, config=acs_2a0_config(ctl=plx_ctl))
    t.add_bridge(PLX_DN_F24, parent=PLX_UP, vendor=0x10B5, device=0x8747, config=acs_f24_config(ctl=plx_ctl))
    nt = ConfigSpace(0x10B5, 0x87B0, 0x068000)
    nt.add_cap(0x40, 0x01).add_pcie(0x68, 0).add_aer(0x100).add_acs(0x148, ctl=0x001D)
    t.add_pci(PLX_NT_ENDPOINT, parent=PLX_UP, vendor=0x10B5, device=0x87B0, pci_class=0x068000, config=nt)
    t.add_gpu(GPU, parent=PLX_DN_148)
    t.add_nic(NIC, parent=PLX_DN_2A0)
    t.add_nic(NIC_F1, parent=PLX_DN_2A0)
    t.add_bridge(LSI_OTHER_BRIDGE, host="pci0000:40", vendor=0x1000, device=0x1234, port_type=PORT_ROOT,
                 acs_ctl=0x001D)
    t.add_bridge(PEX89K, parent=LSI_OTHER_BRIDGE, vendor=0x1000, device=0xC030, port_type=PORT_DOWNSTREAM,
                 config=bridge_config(0x1000, 0xC030, PORT_DOWNSTREAM, acs_ctl=plx_ctl, acs_offset=0x1F0))
    return t


def snapshot(tree):
    """address -> bytes of its config file (every function of the tree)."""
    out = {}
    base = tree.abs("sys/bus/pci/devices")
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name, "config")
        if os.path.exists(path):
            with open(path, "rb") as handle:
                out[name] = handle.read()
    return out


def changed_bytes(before, after):
    """address -> sorted offsets whose byte differs."""
    diff = {}
    for address, old in before.items():
        new = after[address]
        assert len(old) == len(new), address
        offsets = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
        if offsets:
            diff[address] = offsets
    return diff


def u16(raw, offset):
    return struct.unpack_from("<H", raw, offset)[0]


def params(tree, **kwargs):
    base = dict(mode="plx", include=[], exclude=[], pairs=[], pair_distances=["PIX", "PXB", "PHB"],
                state="disabled", acs_ctl=0x001D, force=False, root=tree.root)
    base.update(kwargs)
    return base


def run(tree, check_mode=False, **kwargs):
    return acs.run(params(tree, **kwargs), check_mode)


def by_address(result):
    return dict((b["address"], b) for b in result["bridges"])


def failure(tree, check_mode=False, **kwargs):
    with pytest.raises(acs.AcsError) as info:
        run(tree, check_mode, **kwargs)
    return info.value


# ---------------------------------------------------------------------------
# addresses
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("0000:02:08.0", "0000:02:08.0"),
    ("02:08.0", "0000:02:08.0"),
    ("0000:A1:1F.7", "0000:a1:1f.7"),
    (" 0001:02:08.0 ", "0001:02:08.0"),
    ("02:08", None),
    ("0000:02:08.8", None),
    ("2:08.0", None),
    ("0000:02:08.0;rm", None),
    ("", None),
    (None, None),
    (42, None),
])
def test_normalize_address(text, expected):
    assert acs.normalize_address(text) == expected


def test_is_plx_bridge_ids():
    assert acs.is_plx_bridge(0x10B5, 0x8747)
    for device in (0xC010, 0xC012, 0xC030, 0xC034):
        assert acs.is_plx_bridge(0x1000, device)
    assert not acs.is_plx_bridge(0x1000, 0x0097)  # SAS3008 HBA
    assert not acs.is_plx_bridge(0x1000, 0x02B2)  # PEX890xx synthetic place-holder endpoint
    assert not acs.is_plx_bridge(0x8086, 0x2030)


# ---------------------------------------------------------------------------
# the capability walk and the write: only the computed ACSCtl offset changes
# ---------------------------------------------------------------------------

def test_plx_mode_writes_only_computed_acsctl_offsets(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    # the trap is real: 0xf2a of the 0x2a0 port holds another capability's data
    assert u16(before[PLX_DN_2A0], 0xF2A) == u16(VSEC_AT_F20_BODY, 0x6) != 0
    assert u16(before[PLX_DN_2A0], 0x2A6) == ACS_ALL_CTL

    result = run(tree)

    after = snapshot(tree)
    assert changed_bytes(before, after) == {
        PLX_DN_148: [0x14E],            # 0x148 + 6 (low byte 0x5d -> 0; high byte already 0)
        PLX_DN_2A0: [0x2A6],            # 0x2a0 + 6
        PLX_DN_F24: [0xF2A],            # the one layout where 0xf2a is ACSCtl, found by walking
        PEX89K: [0x1F6],                # Broadcom PEX89000 port, ACS at 0x1f0
    }
    assert after[PLX_DN_2A0][0xF20:0xF64] == before[PLX_DN_2A0][0xF20:0xF64]
    for address in (PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K):
        assert len(after[address]) == 4096
    assert result["changed"] is True
    report = by_address(result)
    assert report[PLX_DN_2A0]["acs_offset"] == 0x2A0
    assert report[PLX_DN_2A0]["acs_ctl_offset"] == 0x2A6
    assert report[PLX_DN_2A0]["acs_offset_hex"] == "0x2a0"
    assert report[PLX_DN_F24]["acs_ctl_offset"] == 0xF2A
    assert report[PEX89K]["acs_ctl_offset"] == 0x1F6


def test_report_fields_before_after_and_bits(tmp_path):
    tree = server(tmp_path)
    result = run(tree)
    entry = by_address(result)[PLX_DN_148]
    assert entry["vendor_id"] == "0x10b5" and entry["device_id"] == "0x8747"
    assert entry["before"] == "0x005d"
    assert entry["before_bits"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert entry["after"] == "0x0000" and entry["after_bits"] == []
    assert entry["acs_cap"] == "0x005f"
    assert entry["acs_cap_bits"] == ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert entry["changed"] is True
    assert entry["reason"] == "plx"
    assert entry["log"] == ("0000:02:08.0 10b5:8747 ACS@0x148 ACSCtl@0x14e 0x005d "
                            "(SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans) -> 0x0000 (none)")
    assert set(entry) >= {"address", "vendor_id", "device_id", "acs_offset", "before", "after", "changed"}


def test_plx_mode_selects_plx_and_pex_bridges_only(tmp_path):
    tree = server(tmp_path)
    result = run(tree)
    assert result["selected"] == [PLX_UP, PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K]
    # Intel root port, the non-PEX LSI bridge and the PLX NT endpoint (class 0x0680) are not taken
    for address in (ROOT_PORT, LSI_OTHER_BRIDGE, PLX_NT_ENDPOINT):
        assert address not in result["selected"]
    assert result["skipped_bridges"] == [{"address": PLX_UP, "reason": "no ACS capability"}]
    assert [b["address"] for b in result["bridges"]] == [PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K]
    assert result["vfio_devices"] == []


def test_chained_capabilities_acs_last_after_many(tmp_path):
    """ACS as the 6th extended capability, behind capabilities of every size."""
    t = SysfsTree(tmp_path / "root")
    cfg = ConfigSpace(0x10B5, 0x9797, 0x060400)
    cfg.add_cap(0x40, 0x01).add_pcie(0x68, PORT_DOWNSTREAM)
    cfg.add_aer(0x100).add_ext(0x148, 0x0003, 1, b"\x11" * 8).add_ext(0x158, 0x0004, 1, b"\x22" * 12)
    cfg.add_ext(0x300, 0x0019, 1, b"\x33" * 0x20).add_ext(0x400, 0x000B, 1, b"\x0d\x00" * 8)
    cfg.add_acs(0xA00, ctl=0x007F, cap=0x007F)
    t.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x9797, config=cfg)
    before = snapshot(t)
    result = run(t)
    assert changed_bytes(before, snapshot(t)) == {"0000:05:00.0": [0xA06]}
    assert by_address(result)["0000:05:00.0"]["before"] == "0x007f"


def test_vendor_specific_data_that_looks_like_acs_is_not_written(tmp_path):
    """A VSEC whose body contains the ACS capability id (0x000d) is not mistaken for ACS."""
    t = SysfsTree(tmp_path / "root")
    cfg = ConfigSpace(0x10B5, 0x8747, 0x060400)
    cfg.add_cap(0x40, 0x01).add_pcie(0x68, PORT_DOWNSTREAM)
    cfg.add_aer(0x100).add_ext(0x400, 0x000B, 1, struct.pack("<IHH", 0x0001000D, 0x5F, 0x5D))
    t.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x8747, config=cfg)
    before = snapshot(t)
    result = run(t)
    assert snapshot(t) == before
    assert result["skipped_bridges"] == [{"address": "0000:05:00.0", "reason": "no ACS capability"}]
    assert result["changed"] is False


def looping_bridge_config():
    cfg = ConfigSpace(0x10B5, 0x8747, 0x060400)
    cfg.add_cap(0x40, 0x01).add_pcie(0x68, PORT_DOWNSTREAM)
    cfg.add_aer(0x100, next=0x200).add_ext(0x200, 0x000B, 1, b"\x01" * 8, next=0x100)
    cfg.poke(0xF28, struct.pack("<HH", 0x005F, 0x005D))  # ACS-looking bytes nothing links to
    return cfg


def corrupt_trees(tmp_path):
    """The server plus one bridge per kind of unknown ACS state (all PLX ports, so mode plx selects them)."""
    tree = server(tmp_path)
    tree.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x8747, config=looping_bridge_config())
    tree.add_bridge("0000:06:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM, acs_ctl=0x005D,
                    config_size=256)
    gone = bytearray(bridge_config(0x10B5, 0x8747, PORT_DOWNSTREAM, acs_ctl=0x005D).build())
    gone[0x100:0x104] = b"\xff\xff\xff\xff"
    tree.add_bridge("0000:07:00.0", vendor=0x10B5, device=0x8747, config=bytes(gone))
    below = ConfigSpace(0x10B5, 0x8747, 0x060400).add_pcie(0x68, PORT_DOWNSTREAM).add_aer(0x100, next=0x40)
    tree.add_bridge("0000:08:00.0", vendor=0x10B5, device=0x8747, config=below)
    return tree


UNKNOWN_REASONS = {
    "0000:05:00.0": "extended capability list loops: 0x200 points back to 0x100",
    "0000:06:00.0": "extended configuration space not readable: the config file has 256 bytes",
    "0000:07:00.0": "extended capability header at 0x100 reads 0xffffffff",
    "0000:08:00.0": "extended capability at 0x100 points to 0x40, below 0x100",
}


def test_query_reports_unknown_bridges_with_their_reasons(tmp_path):
    tree = corrupt_trees(tmp_path)
    before = snapshot(tree)
    result = run(tree, state="query")
    assert snapshot(tree) == before and result["changed"] is False
    unknown = dict((u["address"], u) for u in result["unknown_bridges"])
    assert sorted(unknown) == sorted(UNKNOWN_REASONS)
    for address, needle in UNKNOWN_REASONS.items():
        assert unknown[address]["reason"].startswith(needle), unknown[address]
        assert (unknown[address]["vendor_id"], unknown[address]["device_id"]) == ("0x10b5", "0x8747")
    # never reported as "no ACS capability", never among the bridges with a register
    assert not set(unknown) & set(s["address"] for s in result["skipped_bridges"])
    assert not set(unknown) & set(by_address(result))
    assert "ACS UNKNOWN on 0000:05:00.0, 0000:06:00.0, 0000:07:00.0, 0000:08:00.0" in result["msg"]


@pytest.mark.parametrize("state", ["disabled", "enabled"])
@pytest.mark.parametrize("check_mode", [False, True])
def test_disabled_refuses_unknown_bridges_and_writes_nothing(tmp_path, state, check_mode):
    tree = corrupt_trees(tmp_path)
    before = snapshot(tree)
    error = failure(tree, check_mode=check_mode, state=state)
    assert snapshot(tree) == before  # the good PLX ports were not written either
    assert error.msg.startswith("refusing to %s ACS" % ("clear" if state == "disabled" else "set"))
    for address, needle in UNKNOWN_REASONS.items():
        assert "%s (10b5:8747): %s" % (address, needle) in error.msg
    assert "Nothing was written to any bridge" in error.msg
    assert "gpudirect_pcie_acs_exclude: [0000:05:00.0, 0000:06:00.0, 0000:07:00.0, 0000:08:00.0]" in error.msg
    assert "MMCONFIG/ECAM" in error.msg and "gone, or failing" in error.msg and "list is corrupt" in error.msg
    assert [u["address"] for u in error.details["unknown_bridges"]] == sorted(UNKNOWN_REASONS)


def test_excluding_the_unknown_bridges_lets_the_others_be_cleared(tmp_path):
    tree = corrupt_trees(tmp_path)
    result = run(tree, exclude=sorted(UNKNOWN_REASONS))
    assert result["changed"] is True and result["unknown_bridges"] == []
    assert [b["after"] for b in result["bridges"]] == ["0x0000"] * 4


def test_bridge_with_256_byte_config_is_unknown_not_skipped(tmp_path):
    """A PCIe bridge with a 256-byte config file: the kernel could not reach its extended space."""
    t = SysfsTree(tmp_path / "root")
    t.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x8112, config_size=256)
    result = run(t, state="query")
    assert result["skipped_bridges"] == [] and result["bridges"] == []
    assert result["unknown_bridges"][0]["reason"].startswith("extended configuration space not readable")
    error = failure(t)
    assert "0000:05:00.0 (10b5:8112): extended configuration space not readable" in error.msg


def test_conventional_pci_bridge_with_256_bytes_has_no_acs(tmp_path):
    """No PCI Express capability: conventional PCI, no extended space by design, so no ACS."""
    t = SysfsTree(tmp_path / "root")
    cfg = ConfigSpace(0x10B5, 0x8112, 0x060400).add_cap(0x40, 0x01)
    t.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x8112, config=cfg, config_size=256)
    result = run(t)
    assert result["skipped_bridges"][0]["reason"].startswith("no ACS capability (conventional PCI function")
    assert result["unknown_bridges"] == [] and result["changed"] is False
    assert result["msg"].endswith("1 without ACS capability")


# ---------------------------------------------------------------------------
# unreadable config space, check mode, idempotence, read-back
# ---------------------------------------------------------------------------

def test_unprivileged_64_byte_config_fails_with_become_hint_before_any_write(tmp_path):
    tree = server(tmp_path)
    # the second selected bridge reads short: the first must not have been written either
    with open(tree.abs("sys/bus/pci/devices/%s/config" % PLX_DN_2A0), "r+b") as handle:
        handle.truncate(64)
    before = snapshot(tree)
    error = failure(tree)
    assert "become" in error.msg and PLX_DN_2A0 in error.msg and "64 bytes" in error.msg
    assert "Nothing was changed" in error.msg
    assert snapshot(tree) == before


def test_missing_config_file_fails(tmp_path):
    t = SysfsTree(tmp_path / "root")
    t.add_bridge("0000:05:00.0", vendor=0x10B5, device=0x8747, config=None)
    error = failure(t)
    assert "0000:05:00.0 (no readable config file)" in error.msg and "become" in error.msg


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path, monkeypatch):
    tree = server(tmp_path)
    before = snapshot(tree)

    def no_write(*args):
        raise AssertionError("check mode must not write")

    monkeypatch.setattr(acs.os, "pwrite", no_write)
    result = run(tree, check_mode=True)
    assert snapshot(tree) == before
    assert result["changed"] is True
    entry = by_address(result)[PLX_DN_2A0]
    assert entry["before"] == "0x005d" and entry["after"] == "0x0000" and entry["changed"] is True
    assert "would be cleared" in result["msg"]


def test_second_run_is_idempotent_and_does_not_write(tmp_path, monkeypatch):
    tree = server(tmp_path)
    first = run(tree)
    assert first["changed"] is True
    cleared = snapshot(tree)

    def no_write(*args):
        raise AssertionError("an already clear register must not be written")

    monkeypatch.setattr(acs.os, "pwrite", no_write)
    second = run(tree)
    assert second["changed"] is False
    assert all(b["changed"] is False and b["before"] == b["after"] == "0x0000" for b in second["bridges"])
    assert snapshot(tree) == cleared
    assert "unchanged" in second["bridges"][0]["log"]


def test_already_clear_tree_reports_unchanged(tmp_path):
    tree = server(tmp_path, plx_ctl=0x0000)
    result = run(tree)
    assert result["changed"] is False
    assert "cleared on 0 of 4" in result["msg"]


def test_read_back_mismatch_fails_with_before_and_after(tmp_path, monkeypatch):
    tree = server(tmp_path)
    monkeypatch.setattr(acs.os, "pwrite", lambda fd, data, offset: len(data))  # the device ignores writes
    error = failure(tree)
    assert "0000:02:08.0" in error.msg
    assert "read back 0x005d after writing 0x0000 at offset 0x14e (before 0x005d)" in error.msg
    assert error.details["before"] == "0x005d"
    assert error.details["written"] == "0x0000"
    assert error.details["after"] == "0x005d"
    assert error.details["changed"] is False
    assert error.details["bridges"][0]["address"] == PLX_DN_148


def test_read_back_mismatch_after_earlier_success_reports_changed(tmp_path, monkeypatch):
    tree = server(tmp_path)
    real = os.pwrite
    calls = []

    def flaky(fd, data, offset):
        calls.append(offset)
        if len(calls) == 1:
            return real(fd, data, offset)
        return real(fd, b"\x1d\x00", offset)  # firmware keeps some bits

    monkeypatch.setattr(acs.os, "pwrite", flaky)
    error = failure(tree)
    assert error.details["changed"] is True
    assert [b["address"] for b in error.details["bridges"]] == [PLX_DN_148, PLX_DN_2A0]
    assert error.details["after"] == "0x001d"
    assert calls == [0x14E, 0x2A6]  # stopped at the first mismatch


def test_write_permission_denied_says_become(tmp_path, monkeypatch):
    tree = server(tmp_path)
    real_open = os.open

    def deny(path, flags, *args):
        if flags & os.O_RDWR:
            raise OSError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(acs.os, "open", deny)
    error = failure(tree)
    assert "Permission denied" in error.msg and "become: true" in error.msg


# ---------------------------------------------------------------------------
# vfio-pci safety
# ---------------------------------------------------------------------------

def bind_vfio(tree, address, driver="vfio-pci"):
    devdir = tree.pci_dirs[address]
    os.unlink(os.path.join(devdir, "driver"))
    tree.mkdir("sys/bus/pci/drivers/%s" % driver)
    tree.link(tree.rel(os.path.join(devdir, "driver")), tree.abs("sys/bus/pci/drivers/%s" % driver))


# vfio-pci and the variant drivers of Linux's drivers/vfio/pci/ (module names as lsmod shows them)
VFIO_DRIVERS = ["vfio-pci", "mlx5_vfio_pci", "nvgrace_gpu_vfio_pci", "hisi_acc_vfio_pci", "virtio_vfio_pci",
                "pds_vfio_pci", "some_future_vfio_variant"]


@pytest.mark.parametrize("driver", VFIO_DRIVERS)
def test_every_vfio_style_driver_blocks_clearing(tmp_path, driver):
    tree = server(tmp_path)
    bind_vfio(tree, NIC_F1, driver)
    before = snapshot(tree)
    error = failure(tree)
    assert "%s (%s)" % (NIC_F1, driver) in error.msg and "vfio driver" in error.msg
    assert error.details["vfio_devices"] == [NIC_F1]
    assert snapshot(tree) == before


@pytest.mark.parametrize("driver,expected", [("vfio-pci", True), ("mlx5_vfio_pci", True), ("VFIO-PCI", True),
                                             ("mlx5_core", False), ("nvidia", False), ("pcieport", False),
                                             (None, False), ("", False)])
def test_is_vfio_driver(driver, expected):
    assert acs.is_vfio_driver(driver) is expected


def test_vfio_bound_device_refuses_unless_forced(tmp_path):
    tree = server(tmp_path)
    bind_vfio(tree, NIC_F1)
    before = snapshot(tree)
    error = failure(tree)
    assert "%s (vfio-pci)" % NIC_F1 in error.msg and "force" in error.msg
    assert error.details["vfio_devices"] == [NIC_F1]
    assert snapshot(tree) == before
    # check mode predicts the same refusal
    assert failure(tree, check_mode=True).details["vfio_devices"] == [NIC_F1]

    forced = run(tree, force=True)
    assert forced["changed"] is True and forced["vfio_devices"] == [NIC_F1]


def test_vfio_does_not_block_query_or_enable(tmp_path):
    tree = server(tmp_path, plx_ctl=0x0000)
    bind_vfio(tree, NIC)
    assert run(tree, state="query")["vfio_devices"] == [NIC]
    enabled = run(tree, state="enabled")
    assert enabled["changed"] is True


# ---------------------------------------------------------------------------
# include / exclude / modes
# ---------------------------------------------------------------------------

def test_include_exclude_and_short_addresses(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    result = run(tree, include=["00:01.0"], exclude=["02:18.0", "0000:7f:00.0"])
    assert ROOT_PORT in result["selected"] and PLX_DN_F24 not in result["selected"]
    assert {"address": PLX_DN_F24, "reason": "excluded"} in result["skipped_bridges"]
    assert by_address(result)[ROOT_PORT]["reason"] == "include"
    assert set(changed_bytes(before, snapshot(tree))) == {ROOT_PORT, PLX_DN_148, PLX_DN_2A0, PEX89K}


@pytest.mark.parametrize("option", ["include", "exclude"])
def test_malformed_address_fails_before_any_write(tmp_path, option):
    tree = server(tmp_path)
    before = snapshot(tree)
    error = failure(tree, **{option: ["0000:02:08.0", "02:8.0", "bogus"]})
    assert error.msg.startswith(option + ": malformed PCI address(es) '02:8.0', 'bogus'")
    assert "DDDD:BB:DD.F" in error.msg
    assert snapshot(tree) == before


def test_include_of_unknown_address_fails(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    error = failure(tree, include=["0000:99:00.0"])
    assert "0000:99:00.0" in error.msg and "lspci -D" in error.msg
    assert snapshot(tree) == before


def test_mode_all_takes_every_bridge(tmp_path):
    tree = server(tmp_path)
    result = run(tree, mode="all", state="query")
    assert result["selected"] == [ROOT_PORT, PLX_UP, PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, LSI_OTHER_BRIDGE, PEX89K]
    assert PLX_NT_ENDPOINT not in result["selected"]


def test_mode_none_selects_only_include(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    nothing = run(tree, mode="none")
    assert nothing["selected"] == [] and nothing["changed"] is False
    assert nothing["msg"] == "no bridge selected; nothing to do"
    assert snapshot(tree) == before
    one = run(tree, mode="none", include=[PLX_DN_2A0])
    assert one["selected"] == [PLX_DN_2A0]
    assert changed_bytes(before, snapshot(tree)) == {PLX_DN_2A0: [0x2A6]}


def test_gpu_nic_path_uses_pair_paths_and_distance_filter(tmp_path):
    tree = server(tmp_path)
    pairs = [
        {"gpu": "GPU0", "nic": "mlx5_0", "distance": "PIX", "path": [ROOT_PORT, PLX_UP, PLX_DN_148, PLX_DN_2A0]},
        {"gpu": "GPU0", "nic": "mlx5_9", "distance": "SYS", "path": [ROOT_PORT, PLX_UP, PLX_DN_148, LSI_OTHER_BRIDGE]},
    ]
    before = snapshot(tree)
    result = run(tree, mode="gpu_nic_path", pairs=pairs)
    assert result["selected"] == [ROOT_PORT, PLX_UP, PLX_DN_148, PLX_DN_2A0]
    assert by_address(result)[PLX_DN_148]["reason"] == "gpu_nic_path GPU0/mlx5_0"
    assert set(changed_bytes(before, snapshot(tree))) == {ROOT_PORT, PLX_DN_148, PLX_DN_2A0}
    widened = run(tree, mode="gpu_nic_path", pairs=pairs, pair_distances=["SYS"], state="query")
    assert LSI_OTHER_BRIDGE in widened["selected"]


def test_gpu_nic_path_from_real_gpudirect_facts(tmp_path):
    """The pairs published by gpudirect_facts feed the module unchanged."""
    gpudirect_facts = pytest.importorskip("gpudirect_facts")
    tree = gpu_server(tmp_path / "srv")
    facts = gpudirect_facts.gather_facts(tree.root, nvidia_smi=False, kernel_log=False, live=False)
    assert facts["pairs"], "the gpu_server scenario has GPU/NIC pairs"
    result = run(tree, mode="gpu_nic_path", pairs=facts["pairs"])
    # the PIX pair's path; the SYS pair (to the NIC on the other socket) is left out
    assert result["selected"] == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]
    assert result["skipped_bridges"] == [{"address": "0000:01:00.0", "reason": "no ACS capability"}]
    assert all(b["after"] == "0x0000" for b in result["bridges"])
    again = run(tree, mode="gpu_nic_path", pairs=facts["pairs"])
    assert again["changed"] is False


def test_gpu_nic_path_stale_address_is_skipped(tmp_path):
    tree = server(tmp_path)
    result = run(tree, mode="gpu_nic_path", pairs=[{"path": [PLX_DN_148, "0000:66:00.0"]}])
    assert result["selected"] == [PLX_DN_148]
    assert result["skipped_bridges"][0]["address"] == "0000:66:00.0"
    assert "not present in sysfs" in result["skipped_bridges"][0]["reason"]


@pytest.mark.parametrize("pairs,needle", [
    ([{"gpu": "GPU0"}], "pairs[0] has no 'path'"),
    ([{"path": "0000:02:08.0"}], "pairs[0] has no 'path'"),
    ([{"path": [PLX_DN_148]}, {"path": ["zz:00.0"]}], "pairs[1].path: malformed"),
])
def test_malformed_pairs_fail_before_any_write(tmp_path, pairs, needle):
    tree = server(tmp_path)
    before = snapshot(tree)
    assert needle in failure(tree, mode="gpu_nic_path", pairs=pairs).msg
    assert snapshot(tree) == before


# ---------------------------------------------------------------------------
# enabled / query
# ---------------------------------------------------------------------------

def test_enabled_restores_kernel_default_masked_by_acscap(tmp_path):
    tree = server(tmp_path, plx_ctl=0x0000)
    t = tree
    cfg = bridge_config(0x10B5, 0x8747, PORT_DOWNSTREAM, acs_ctl=0x0000, acs_offset=0x148, acs_cap=0x0015)
    t.add_bridge("0000:02:20.0", parent=PLX_UP, vendor=0x10B5, device=0x8747, config=cfg)
    result = run(tree, state="enabled")
    report = by_address(result)
    assert report[PLX_DN_148]["after"] == "0x001d"
    assert report[PLX_DN_148]["after_bits"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert report["0000:02:20.0"]["after"] == "0x0015"  # CmpltRedir not implemented: not written
    assert "enabled on 5 of 5" in result["msg"]
    assert run(tree, state="enabled")["changed"] is False


def test_enabled_custom_value_and_reserved_bits(tmp_path):
    tree = server(tmp_path, plx_ctl=0x0000)
    result = run(tree, state="enabled", acs_ctl=0x005D)
    assert by_address(result)[PLX_DN_2A0]["after"] == "0x005d"
    before = snapshot(tree)
    error = failure(tree, state="enabled", acs_ctl=0x0180)
    assert "reserved" in error.msg and snapshot(tree) == before


def test_query_reports_without_writing(tmp_path, monkeypatch):
    tree = server(tmp_path)
    monkeypatch.setattr(acs.os, "pwrite", lambda *a: pytest.fail("query must not write"))
    result = run(tree, state="query")
    assert result["changed"] is False
    assert all(b["before"] == b["after"] for b in result["bridges"])
    assert by_address(result)[PLX_DN_148]["before"] == "0x005d"
    assert result["msg"].startswith("ACS reported on 4 of 5")


def test_root_without_sysfs_fails(tmp_path):
    with pytest.raises(acs.AcsError) as info:
        acs.run(dict(mode="plx", include=[], exclude=[], pairs=[], pair_distances=[], state="disabled",
                          acs_ctl=0x1D, force=False, root=str(tmp_path / "nothing")), False)
    assert "sys/bus/pci/devices" in info.value.msg


# ---------------------------------------------------------------------------
# the module end to end through main()
# ---------------------------------------------------------------------------



def test_main_end_to_end_check_then_apply_then_idempotent(tmp_path, monkeypatch, run_module):
    tree = server(tmp_path)
    before = snapshot(tree)
    checked = run_module(pcie_acs_module, {"root": tree.root}, check_mode=True)
    assert checked["changed"] is True and snapshot(tree) == before
    applied = run_module(pcie_acs_module, {"root": tree.root})
    assert applied.get("failed") is not True, applied
    assert applied["changed"] is True
    assert applied["selected"] == [PLX_UP, PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K]
    assert [b["after"] for b in applied["bridges"]] == ["0x0000"] * 4
    assert applied["skipped_bridges"] == [{"address": PLX_UP, "reason": "no ACS capability"}]
    assert applied["vfio_devices"] == []
    assert checked["bridges"] == applied["bridges"]  # check mode predicted exactly what happened
    again = run_module(pcie_acs_module, {"root": tree.root})
    assert again["changed"] is False


def test_main_check_diff_shows_acsctl_before_and_after_per_bridge(tmp_path, monkeypatch, run_module):
    tree = corrupt_trees(tmp_path)
    before = snapshot(tree)
    args = {"root": tree.root, "exclude": ["0000:05:00.0", "0000:07:00.0", "0000:08:00.0"],
            "_ansible_diff": True, "state": "query"}
    queried = run_module(pcie_acs_module, args, check_mode=True)
    assert queried["diff"]["before"] == queried["diff"]["after"]  # query changes nothing
    assert ("0000:06:00.0 10b5:8747 ACSCtl unknown (extended configuration space not readable"
            in queried["diff"]["before"])
    args.update(state="disabled", exclude=sorted(UNKNOWN_REASONS))
    checked = run_module(pcie_acs_module, args, check_mode=True)
    assert checked["changed"] is True and snapshot(tree) == before
    assert checked["diff"]["before"].splitlines() == [
        "0000:02:08.0 10b5:8747 ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans)",
        "0000:02:10.0 10b5:8747 ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans)",
        "0000:02:18.0 10b5:8747 ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans)",
        "0000:41:00.0 1000:c030 ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans)"]
    assert checked["diff"]["after"].splitlines() == [
        "0000:02:08.0 10b5:8747 ACSCtl 0x0000 (none)", "0000:02:10.0 10b5:8747 ACSCtl 0x0000 (none)",
        "0000:02:18.0 10b5:8747 ACSCtl 0x0000 (none)", "0000:41:00.0 1000:c030 ACSCtl 0x0000 (none)"]
    applied = run_module(pcie_acs_module, dict(args, _ansible_check_mode=False))
    assert applied["diff"] == checked["diff"]  # check mode predicted the real change
    converged = run_module(pcie_acs_module, args, check_mode=True)
    assert converged["changed"] is False
    assert converged["diff"]["before"] == converged["diff"]["after"] == checked["diff"]["after"]
    assert "diff" not in run_module(pcie_acs_module, {"root": tree.root, "exclude": sorted(UNKNOWN_REASONS)})


def test_main_argument_validation(tmp_path, monkeypatch, run_module):
    tree = server(tmp_path)
    bad_mode = run_module(pcie_acs_module, {"root": tree.root, "mode": "plx_only"})
    assert bad_mode["failed"] is True and "mode" in bad_mode["msg"]
    bad_address = run_module(pcie_acs_module, {"root": tree.root, "include": ["2:8.0"]})
    assert bad_address["failed"] is True and "include: malformed" in bad_address["msg"]
    assert bad_address["changed"] is False
    bad_distance = run_module(pcie_acs_module, {"root": tree.root, "pair_distances": ["FAR"]})
    assert bad_distance["failed"] is True


def test_main_vfio_refusal_json(tmp_path, monkeypatch, run_module):
    tree = server(tmp_path)
    bind_vfio(tree, NIC)
    result = run_module(pcie_acs_module, {"root": tree.root})
    assert result["failed"] is True
    assert result["vfio_devices"] == [NIC]
    assert result["changed"] is False


def test_main_gpu_nic_path_warns_on_empty_pairs(tmp_path, monkeypatch, run_module):
    # record module.warn calls (ansible-core 2.19 may route them to the controller's Display
    # when controller code was imported in the same process; see test_gpudirect_facts.py)
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg, **kw: warned.append(msg))
    tree = server(tmp_path)
    result = run_module(pcie_acs_module, {"root": tree.root, "mode": "gpu_nic_path", "pairs": []})
    assert result["changed"] is False and result["selected"] == []
    assert len(warned) == 1 and "no GPU/NIC pairs" in warned[0]


def test_result_has_no_reserved_skipped_key(tmp_path, monkeypatch, run_module):
    """A true 'skipped' key would make Ansible report the whole task as skipped."""
    tree = server(tmp_path)
    result = run_module(pcie_acs_module, {"root": tree.root})
    assert "skipped" not in result and result["skipped_bridges"]
    assert result["changed"] is True


# ---------------------------------------------------------------------------
# the boot-time applier (roles/gpudirect_pcie_acs/files/gpudirect-pcie-acs) with a setpci stand-in
# ---------------------------------------------------------------------------

BOOT_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "gpudirect_pcie_acs", "files", "gpudirect-pcie-acs")
MODULE_UTILS = os.path.join(os.path.dirname(__file__), "..", "..", "module_utils")

# Behaves like pciutils' setpci for "-s BDF -d VVVV:DDDD ECAP_ACS+0x6.w[=VALUE]" on the fake
# tree: a -d mismatch selects no device (warning, exit 0), a device without the capability
# fails (exit 1) and writes nothing. Every call is appended to $SETPCI_LOG.
SETPCI_STUB = r'''#!%(python)s
import os, struct, sys
import ansible.module_utils
sys.path.insert(0, %(module_utils)r)
ansible.module_utils.__path__.append(%(module_utils)r)  # gpudirect_pci imports gpudirect_host as Ansible ships it
import gpudirect_pci
args = sys.argv[1:]
with open(os.environ["SETPCI_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
bdf, ids, reg = args[args.index("-s") + 1], args[args.index("-d") + 1], args[-1]
if not reg.upper().startswith("ECAP_ACS+0X6.W"):
    sys.exit("stub: unexpected register %%s" %% reg)
path = os.path.join(os.environ["PCIE_ACS_SYSFS"], "bus/pci/devices", bdf, "config")
cfg = open(path, "rb").read() if os.path.exists(path) else b""
if len(cfg) < 4 or "%%04x:%%04x" %% struct.unpack_from("<HH", cfg, 0) != ids:
    sys.stderr.write("setpci: Warning: No devices selected for operation group 1.\n")
    sys.exit(0)
offset = gpudirect_pci.find_ext_capability(cfg, gpudirect_pci.PCI_EXT_CAP_ID_ACS)
if offset is None:
    sys.stderr.write("setpci: %%s: Instance #0 of Extended capability 000d not found - there are no "
                     "capabilities with that id.\n" %% bdf)
    sys.exit(1)
offset += 6
if "=" in reg:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(struct.pack("<H", int(reg.split("=", 1)[1], 16)))
else:
    print("%%04x" %% struct.unpack_from("<H", cfg, offset)[0])
'''


def boot_env(tmp_path, tree):
    import sys
    stub = tmp_path / "setpci"
    stub.write_text(SETPCI_STUB % {"python": sys.executable, "module_utils": os.path.abspath(MODULE_UTILS)})
    stub.chmod(0o755)
    log = tmp_path / "setpci.log"
    log.write_text("")
    env = dict(os.environ, PCIE_ACS_SETPCI=str(stub), PCIE_ACS_SYSFS=tree.abs("sys"), SETPCI_LOG=str(log))
    return env, log


def run_boot(tmp_path, tree, conf_text):
    import subprocess
    env, log = boot_env(tmp_path, tree)
    conf = tmp_path / "pcie-acs.conf"
    conf.write_text(conf_text)
    proc = subprocess.run(["bash", BOOT_SCRIPT, str(conf)], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    return proc.returncode, proc.stdout + proc.stderr, log.read_text().splitlines()


def test_boot_script_clears_listed_bridges_via_capability_walk(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    conf = ("# Ansible managed\nforce=no\n"
            "0000:02:08.0 10b5:8747\n0000:02:10.0 10b5:8747  # ACS at 0x2a0, VSEC data at 0xf2a\n"
            "0000:41:00.0 1000:c030\n")
    rc, out, calls = run_boot(tmp_path, tree, conf)
    assert rc == 0, out
    assert changed_bytes(before, snapshot(tree)) == {PLX_DN_148: [0x14E], PLX_DN_2A0: [0x2A6], PEX89K: [0x1F6]}
    assert ("gpudirect-pcie-acs: 0000:02:10.0 10b5:8747 ACSCtl 005d (SrcValid ReqRedir CmpltRedir UpstreamFwd "
            "DirectTrans) -> 0000 (none)") in out
    assert all(" ECAP_ACS+0x6.w" in c for c in calls), calls  # never a numeric offset
    rc, out, calls = run_boot(tmp_path, tree, conf)
    assert rc == 0 and out.count("already clear") == 3
    assert writes(calls) == []  # nothing written the second time


def writes(calls):
    return [c for c in calls if "=" in c.split()[-1]]


def test_boot_script_refuses_everything_when_ids_at_an_address_differ(tmp_path):
    """Buses renumbered: the address now holds another device. Nothing is written anywhere,
    the refusal is logged at priority err (<3>) and the unit fails."""
    tree = server(tmp_path)
    before = snapshot(tree)
    conf = ("0000:02:08.0 10b5:9999\n"       # another device sits at that address now
            "0000:02:18.0 10b5:8747\n")      # fine on its own
    rc, out, calls = run_boot(tmp_path, tree, conf)
    assert rc == 1 and snapshot(tree) == before and writes(calls) == []
    assert ("<3>gpudirect-pcie-acs: 0000:02:08.0: expected the bridge 10b5:9999, found 10b5:8747 class 0x060400 "
            "at that address") in out
    assert "refusing to write ACS on any bridge" in out and "Re-run the Ansible role gpudirect_pcie_acs" in out
    assert "<3>gpudirect-pcie-acs: 1 problem(s) in" in out and "nothing was written" in out


def test_boot_script_refuses_a_non_bridge_with_the_listed_ids(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    rc, out, calls = run_boot(tmp_path, tree, "0000:02:00.1 10b5:87b0\n")  # PLX NT endpoint, class 0x068000
    assert rc == 1 and snapshot(tree) == before and calls == []
    assert "expected the bridge 10b5:87b0, found 10b5:87b0 class 0x068000" in out


def test_boot_script_missing_acs_less_and_malformed_lines_write_nothing(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    conf = ("0000:01:00.0 10b5:8747\n"       # no ACS capability: setpci refuses
            "0000:7f:00.0 10b5:8747\n"       # gone
            "02:10.0 10b5:8747\n"            # malformed (no domain)
            "0000:02:18.0 10b5:8747\n")      # fine, but not written while the others are wrong
    rc, out, calls = run_boot(tmp_path, tree, conf)
    assert rc == 1 and snapshot(tree) == before and writes(calls) == []
    assert "<3>gpudirect-pcie-acs: 0000:01:00.0 10b5:8747: cannot read ACSCtl" in out and "not found" in out
    assert "<3>gpudirect-pcie-acs: 0000:7f:00.0 10b5:8747: no PCI function at that address" in out
    assert "malformed line '02:10.0 10b5:8747'" in out
    assert "3 problem(s)" in out


def test_report_records_where_each_bridge_sits(tmp_path):
    result = run(server(tmp_path), check_mode=True)
    assert dict((b["address"], b["topology"]) for b in result["bridges"]) == {
        PLX_DN_148: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0",
        PLX_DN_2A0: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0",
        PLX_DN_F24: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:18.0",
        PEX89K: "pci0000:40/0000:40:02.0/0000:41:00.0"}


def test_boot_script_refuses_an_identical_port_that_moved_to_the_address(tmp_path):
    """Same address, same ids, another place in the tree (a renumbering put another switch's
    identical port there): nothing is written."""
    tree = server(tmp_path)
    before = snapshot(tree)
    conf = ("0000:02:08.0 10b5:8747 pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0\n"
            "0000:02:10.0 10b5:8747 pci0000:00/0000:00:03.0/0000:01:00.0/0000:02:10.0\n")
    rc, out, calls = run_boot(tmp_path, tree, conf)
    assert rc == 1 and snapshot(tree) == before and writes(calls) == []
    assert ("<3>gpudirect-pcie-acs: 0000:02:10.0 10b5:8747: expected at pci0000:00/0000:00:03.0/0000:01:00.0/"
            "0000:02:10.0, found at pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0") in out
    rc, out, _calls = run_boot(tmp_path, tree, "0000:02:10.0 10b5:8747 pci0000:00/0000:00:01.0/0000:02:08.0\n")
    assert rc == 1 and "malformed line" in out and snapshot(tree) == before  # path must end in the address
    rc, out, _calls = run_boot(tmp_path, tree, conf.splitlines()[0] + "\n")
    assert rc == 0, out
    assert changed_bytes(before, snapshot(tree)) == {PLX_DN_148: [0x14E]}


def test_boot_script_accepts_wide_domains(tmp_path):
    """VMD and other firmware give domains wider than 4 digits (10000:e0:06.0)."""
    t = SysfsTree(tmp_path / "root")
    t.add_bridge("10000:e0:06.0", host="pci10000:e0", vendor=0x8086, device=0x2030, port_type=PORT_ROOT,
                 acs_ctl=0x001D)
    rc, out, _calls = run_boot(tmp_path, t, "10000:e0:06.0 8086:2030\n")
    assert rc == 0, out
    assert "10000:e0:06.0 8086:2030 ACSCtl 001d (SrcValid ReqRedir CmpltRedir UpstreamFwd) -> 0000 (none)" in out


@pytest.mark.parametrize("driver", VFIO_DRIVERS)
def test_boot_script_refuses_with_vfio_unless_forced(tmp_path, driver):
    tree = server(tmp_path)
    bind_vfio(tree, NIC_F1, driver)
    before = snapshot(tree)
    rc, out, calls = run_boot(tmp_path, tree, "force=no\n0000:02:08.0 10b5:8747\n")
    assert rc == 1 and calls == []
    assert "<3>gpudirect-pcie-acs: refusing to clear ACS: %s (%s) bound to a vfio driver" % (NIC_F1, driver) in out
    assert snapshot(tree) == before
    rc, out, _calls = run_boot(tmp_path, tree, "force=yes\n0000:02:08.0 10b5:8747\n")
    assert rc == 0, out
    assert changed_bytes(before, snapshot(tree)) == {PLX_DN_148: [0x14E]}


def test_boot_script_matches_the_role_template(tmp_path):
    """The configuration the role writes (templates/pcie-acs.conf.j2) is what the script parses."""
    from jinja2 import Environment, FileSystemLoader
    tree = server(tmp_path)
    result = run(tree, check_mode=True)
    templates = os.path.join(os.path.dirname(BOOT_SCRIPT), "..", "templates")
    env = Environment(loader=FileSystemLoader(templates), keep_trailing_newline=True, trim_blocks=True)
    env.filters["comment"] = lambda text: "#\n# %s\n#" % text
    env.filters["regex_replace"] = lambda value, pattern, repl: __import__("re").sub(pattern, repl, value)
    text = env.get_template("pcie-acs.conf.j2").render(
        ansible_managed="Ansible managed", __gpudirect_pcie_acs_script_path="/usr/local/sbin/gpudirect-pcie-acs",
        __gpudirect_pcie_acs_unit_name="gpudirect-pcie-acs.service", gpudirect_pcie_acs_mode="plx", gpudirect_pcie_acs_include=[],
        gpudirect_pcie_acs_exclude=[], gpudirect_pcie_acs_force=False, __gpudirect_pcie_acs_conf_bridges=result["bridges"])
    assert "0000:02:10.0 10b5:8747 pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0\n" in text
    assert "0000:41:00.0 1000:c030 pci0000:40/0000:40:02.0/0000:41:00.0\n" in text
    before = snapshot(tree)
    rc, out, _calls = run_boot(tmp_path, tree, text)
    assert rc == 0, out
    assert set(changed_bytes(before, snapshot(tree))) == {b["address"] for b in result["bridges"]}


def test_documentation_parses_and_matches_the_argument_spec(monkeypatch):
    import yaml
    doc = yaml.safe_load(pcie_acs_module.DOCUMENTATION)
    yaml.safe_load(pcie_acs_module.EXAMPLES)
    returned = yaml.safe_load(pcie_acs_module.RETURN)
    captured = {}

    class Stop(Exception):
        pass

    def fake_module(argument_spec, supports_check_mode):
        captured.update(argument_spec)
        assert supports_check_mode is True
        raise Stop()

    monkeypatch.setattr(pcie_acs_module, "AnsibleModule", fake_module)
    with pytest.raises(Stop):
        pcie_acs_module.main()
    assert set(doc["options"]) == set(captured)
    for name, spec in captured.items():
        assert doc["options"][name]["type"] == spec["type"], name
        assert doc["options"][name].get("default") == spec.get("default"), name
        assert doc["options"][name].get("choices") == spec.get("choices"), name
    assert {"bridges", "selected", "skipped_bridges", "vfio_devices", "kernel_param", "msg"} <= set(returned)


# ---------------------------------------------------------------------------
# plan sentences: changes and disruption (the role's gpudirect_pcie_acs_plan)
# ---------------------------------------------------------------------------

BITS_5D = "SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans"


def test_plan_names_every_change_and_the_bound_gpu_and_nics_below_each_bridge(tmp_path, run_module):
    tree = server(tmp_path)
    before = snapshot(tree)
    checked = run_module(pcie_acs_module, {"root": tree.root, "_ansible_diff": True}, check_mode=True)
    assert snapshot(tree) == before  # the plan is read-only
    assert checked["changed"] is True
    move = "ACSCtl 0x005d (%s) -> 0x0000 (none)" % BITS_5D
    assert checked["changes"] == [
        "ACS on bridge 0000:02:08.0 (10b5:8747): " + move,
        "ACS on bridge 0000:02:10.0 (10b5:8747): " + move,
        "ACS on bridge 0000:02:18.0 (10b5:8747): " + move,
        "ACS on bridge 0000:41:00.0 (1000:c030): " + move]
    # 02:18.0 and the PEX89000 port have nothing below them: changing them interrupts nobody
    assert checked["disruption"] == [
        "ACS change on bridge 0000:02:08.0 (10b5:8747, %s) with bound GPU 0000:03:00.0 (driver nvidia) below it"
        % move,
        "ACS change on bridge 0000:02:10.0 (10b5:8747, %s) with bound NIC 0000:04:00.0 (driver mlx5_core), "
        "NIC 0000:04:00.1 (driver mlx5_core) below it" % move]
    assert checked["diff"]["after"].splitlines()[0] == "0000:02:08.0 10b5:8747 ACSCtl 0x0000 (none)"
    applied = run_module(pcie_acs_module, {"root": tree.root, "_ansible_diff": True})
    assert applied["changed"] is True
    assert (applied["changes"], applied["disruption"], applied["diff"]) == \
        (checked["changes"], checked["disruption"], checked["diff"])
    converged = run_module(pcie_acs_module, {"root": tree.root, "_ansible_diff": True}, check_mode=True)
    assert converged["changed"] is False
    assert converged["changes"] == [] and converged["disruption"] == []
    assert converged["diff"]["before"] == converged["diff"]["after"] == applied["diff"]["after"]


def test_plan_restoring_acs_is_a_change_and_a_disruption_too(tmp_path):
    tree = server(tmp_path, plx_ctl=0x0000)
    result = run(tree, check_mode=True, state="enabled", mode="none", include=[PLX_DN_148])
    assert result["changes"] == [
        "ACS on bridge 0000:02:08.0 (10b5:8747): ACSCtl 0x0000 (none) -> 0x001d "
        "(SrcValid ReqRedir CmpltRedir UpstreamFwd)"]
    assert len(result["disruption"]) == 1 and "bound GPU 0000:03:00.0 (driver nvidia)" in result["disruption"][0]


def test_plan_query_changes_nothing_and_disrupts_nobody(tmp_path):
    result = run(server(tmp_path), state="query")
    assert result["changed"] is False and result["changes"] == [] and result["disruption"] == []


def test_plan_unbound_or_non_gpu_nic_devices_below_are_no_disruption(tmp_path):
    tree = SysfsTree(tmp_path / "root")
    tree.add_bridge(ROOT_PORT, vendor=0x8086, device=0x2030, port_type=PORT_ROOT, acs_ctl=0x001D)
    tree.add_bridge(PLX_DN_148, parent=ROOT_PORT, vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM,
                    acs_ctl=ACS_ALL_CTL, acs_offset=0x148)
    tree.add_gpu(GPU, parent=PLX_DN_148, driver=None)           # GPU without a driver: nobody uses it
    tree.add_nic(NIC, parent=PLX_DN_148, driver=None)           # NIC without a driver
    tree.add_pci("0000:03:00.1", parent=PLX_DN_148, vendor=0x10DE, device=0x22A3, pci_class=0x040300,
                 driver="snd_hda_intel")                       # the GPU's audio function: not a GPU or NIC
    result = run(tree, check_mode=True)
    assert [b["address"] for b in result["bridges"] if b["changed"]] == [PLX_DN_148]
    assert len(result["changes"]) == 1 and result["disruption"] == []


def test_plan_a_bound_gpu_whose_place_cannot_be_read_is_named(tmp_path):
    """Malformed sysfs: a bound GPU whose devices/ entry is a plain directory (no link into a
    pciDDDD:BB tree), so whether it sits below the bridge cannot be known: it is named, never
    assumed elsewhere."""
    tree = server(tmp_path)
    stray = tree.abs("sys/bus/pci/devices/0000:0a:00.0")
    os.makedirs(stray)
    for name, text in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200")):
        with open(os.path.join(stray, name), "w") as handle:
            handle.write(text + "\n")
    os.symlink("../../../../bus/pci/drivers/nvidia", os.path.join(stray, "driver"))
    result = run(tree, check_mode=True, mode="none", include=[PLX_DN_F24])
    assert result["disruption"] == [
        "ACS change on bridge 0000:02:18.0 (10b5:8747, ACSCtl 0x005d (%s) -> 0x0000 (none)) with bound GPU "
        "0000:0a:00.0 (driver nvidia; its place in the PCI tree cannot be read) below it" % BITS_5D]


FIRECRACKER = os.path.join(os.path.dirname(__file__), "..", "fixtures", "pci", "firecracker_h100_vm_config.txt")


def test_plan_on_the_real_h100_vm_capture_has_nothing_to_change(tmp_path, run_module):
    """Config spaces read as root on the lent H100 node (tests/fixtures/pci/README.md): a flat bus
    with no PCI-to-PCI bridge; the GPU (bound to nvidia) and the host bridge have no ACS."""
    tree, captured = config_capture_tree(tmp_path, FIRECRACKER)
    assert captured["0000:00:06.0"]["driver"] == "nvidia"
    result = run_module(pcie_acs_module, {"root": tree.root, "mode": "all", "_ansible_diff": True}, check_mode=True)
    assert result["changed"] is False and result["selected"] == []
    assert result["changes"] == [] and result["disruption"] == []
    assert result["diff"]["before"] == result["diff"]["after"] == ""
    named = run(tree, check_mode=True, mode="none", include=["00:06.0", "0000:00:00.0"])
    assert named["changes"] == [] and named["disruption"] == []
    assert [s["address"] for s in named["skipped_bridges"]] == ["0000:00:00.0", "0000:00:06.0"]
    assert all(s["reason"].startswith("no ACS capability") for s in named["skipped_bridges"])


# ---------------------------------------------------------------------------
# the role: tasks/plan.yml is read-only and says what tasks/main.yml then does
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
        content: "{{ gpudirect_pcie_acs_plan | to_json }}"
        dest: "{{ plan_out }}"
        mode: "0644"
      check_mode: false
      changed_when: false  # the test's own record, not the role's
"""


def _role(tmp_path, tree, what, *extra):
    """Run the role (``what``: plan or main) over a local connection on ``tree``, with the boot-time
    unit's files under tmp_path; returns (rc, log, gpudirect_pcie_acs_plan)."""
    import json
    import subprocess
    import sys
    from conftest import ROOT, playbook_env
    etc = tmp_path / "etc"
    play, inventory, plan_out = tmp_path / "play.yml", tmp_path / "hosts.yml", tmp_path / "plan.json"
    play.write_text(ROLE_PLAY)
    inventory.write_text("all:\n  hosts:\n    node:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    extra_vars = {"what": what, "plan_out": str(plan_out), "__gpudirect_pcie_acs_root": tree.root,
                  "__gpudirect_pcie_acs_conf_dir": str(etc), "__gpudirect_pcie_acs_conf_path": str(etc / "pcie-acs.conf"),
                  "__gpudirect_pcie_acs_script_path": str(etc / "gpudirect-pcie-acs"),
                  "__gpudirect_pcie_acs_unit_path": str(etc / "gpudirect-pcie-acs.service"),
                  "ansible_facts": {"os_family": "Debian", "kernel": "6.12.0"},
                  # the role alone clears ACS under bound devices (a disruption): on a node that runs no
                  # jobs only, as nothing drains it here (gpudirect_drain disrupt)
                  "gpudirect_drain_nodes_run_no_jobs": True}
    if plan_out.exists():
        plan_out.unlink()
    env = playbook_env(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inventory), str(play),
                           "-e", json.dumps(extra_vars)] + list(extra), cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=HANG_GUARD_S, check=False)
    plan = json.loads(plan_out.read_text()) if plan_out.exists() else None
    return proc.returncode, proc.stdout, plan


def _recap(log):
    line = [x for x in log.splitlines() if x.startswith("node ")][-1]
    return dict((k, int(v)) for k, v in (item.split("=") for item in line.split()[2:]))


def test_role_plan_is_read_only_then_main_acts_on_it_and_converges(tmp_path):
    tree = server(tmp_path)
    before = snapshot(tree)
    off = ["-e", '{"gpudirect_pcie_acs_persist": false}']
    rc, log, plan = _role(tmp_path, tree, "plan", *off)
    assert rc == 0, log
    assert _recap(log)["changed"] == 0 and snapshot(tree) == before  # planning wrote nothing
    assert plan["bridges"] == [PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K]
    assert plan["changes"][0] == ("ACS on bridge 0000:02:08.0 (10b5:8747): ACSCtl 0x005d (%s) -> 0x0000 (none)"
                                  % BITS_5D)
    assert len(plan["changes"]) == 4 and plan["boot_unit"] == "none"
    assert [d.split(" with ")[1] for d in plan["disruption"]] == [
        "bound GPU 0000:03:00.0 (driver nvidia) below it",
        "bound NIC 0000:04:00.0 (driver mlx5_core), NIC 0000:04:00.1 (driver mlx5_core) below it"]
    # the whole role in check mode, boot-time unit wanted: the diff names every bridge, the plan names
    # the unit's files, nothing is written
    rc, log, with_unit = _role(tmp_path, tree, "main", "--check", "--diff")
    assert rc == 0, log
    assert "+0000:02:08.0 10b5:8747 ACSCtl 0x0000 (none)" in log and snapshot(tree) == before
    assert with_unit["boot_unit"] == "install" and not (tmp_path / "etc").exists()
    assert with_unit["changes"][-1].startswith("boot-time unit gpudirect-pcie-acs.service: install (bridge list ")
    rc, log, _plan = _role(tmp_path, tree, "main", *off)
    assert rc == 0, log
    assert set(changed_bytes(before, snapshot(tree))) == {PLX_DN_148, PLX_DN_2A0, PLX_DN_F24, PEX89K}
    # converged: the plan is empty and a second run changes nothing
    rc, log, again = _role(tmp_path, tree, "main", *off)
    assert rc == 0, log
    assert _recap(log)["changed"] == 0
    assert (again["changes"], again["disruption"], again["bridges"]) == ([], [], [])
