"""Unit tests for module_utils/gpudirect_pci.py on fabricated sysfs trees."""

import os
import struct

import pytest

from ansible.module_utils import gpudirect_pci as pci

import sysfs_tree
from sysfs_tree import ConfigSpace, SysfsTree, bridge_config, distance_tree, endpoint_config, gpu_server


# ---------------------------------------------------------------------------
# attribute parsing
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("32.0 GT/s PCIe", 32.0),
    ("16.0 GT/s PCIe", 16.0),
    ("8.0 GT/s", 8.0),
    ("2.5 GT/s PCIe", 2.5),
    ("Unknown", None),
    ("Unknown speed", None),
    ("", None),
    (None, None),
])
def test_parse_link_speed(text, expected):
    assert pci.parse_link_speed(text) == expected


@pytest.mark.parametrize("text,expected", [("16", 16), ("8\n", 8), ("0", 0), ("", None), (None, None),
                                           ("x4", 4), ("junk", None)])
def test_parse_link_width(text, expected):
    assert pci.parse_link_width(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("00000000:1B:00.0", "0000:1b:00.0"),
    ("0000:00:06.0", "0000:00:06.0"),
    ("00000000:00:06.0", "0000:00:06.0"),
    ("10000:e0:06.0", "10000:e0:06.0"),
    ("garbage", None),
])
def test_normalize_pci_address(text, expected):
    assert pci.normalize_pci_address(text) == expected


def test_parse_pci_path_chain_and_root_complex():
    rc, chain = pci.parse_pci_path(
        "/x/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0")
    assert rc == "pci0000:00"
    assert chain == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0"]
    # a NIC's infiniband subdirectory does not add to the chain
    rc, chain = pci.parse_pci_path("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/mlx5_1")
    assert (rc, chain) == ("pci0000:80", ["0000:80:01.0", "0000:81:00.0"])
    assert pci.parse_pci_path("/sys/devices/virtual/net/lo") == (None, [])


def test_resolve_absolute_link_stays_inside_root(tmp_path):
    tree = SysfsTree(tmp_path)
    real = tree.mkdir("sys/devices/pci0000:00/0000:00:06.0")
    os.symlink("/sys/devices/pci0000:00/0000:00:06.0", tree.abs("sys/bus/pci/devices/0000:00:06.0"))
    assert pci.resolve(tree.root, tree.abs("sys/bus/pci/devices/0000:00:06.0")) == os.path.realpath(real)
    fn = pci.read_pci_function(tree.root, "0000:00:06.0")
    assert fn.root_complex == "pci0000:00" and fn.path == []


def test_resolve_symlink_loop_raises(tmp_path):
    tree = SysfsTree(tmp_path)
    os.symlink("loop", tree.abs("sys/bus/pci/devices/loop"))
    with pytest.raises(OSError):
        pci.resolve(tree.root, tree.abs("sys/bus/pci/devices/loop/x"))


# ---------------------------------------------------------------------------
# configuration space: standard list
# ---------------------------------------------------------------------------

def test_pcie_port_type_walks_standard_list():
    cfg = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_DOWNSTREAM).build()
    assert [c for _o, c in pci.iter_capabilities(cfg)] == [0x01, 0x05, 0x10]
    assert pci.find_capability(cfg, 0x10) == 0x68
    assert pci.pcie_port_type(cfg) == (6, "downstream_port")
    assert pci.pcie_port_type(endpoint_config(0x10DE, 0x2335, 0x030200).build()) == (0, "endpoint")


def test_standard_list_loop_terminates():
    cfg = ConfigSpace(0x8086, 0x1, 0x060400).add_cap(0x40, 0x01).add_cap(0x50, 0x05)
    raw = bytearray(cfg.build())
    raw[0x51] = 0x40  # MSI points back to PM
    assert [o for o, _c in pci.iter_capabilities(bytes(raw))] == [0x40, 0x50]
    assert pci.pcie_port_type(bytes(raw)) is None


def test_standard_list_without_cap_bit_or_short_read():
    cfg = ConfigSpace(0x8086, 0x1, 0x060000).build()
    assert list(pci.iter_capabilities(cfg)) == []
    with pytest.raises(pci.ConfigSpaceUnreadable):
        pci.pcie_port_type(bridge_config(0x8086, 1, 4).build(64))
    with pytest.raises(pci.ConfigSpaceUnreadable):
        list(pci.iter_capabilities(b"\0" * 16))


# ---------------------------------------------------------------------------
# configuration space: extended list and ACS
# ---------------------------------------------------------------------------

def test_acs_found_when_not_first_in_chain():
    cfg = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_DOWNSTREAM, acs_ctl=0x005D).build()
    assert [(o, c) for o, c, _v in pci.iter_ext_capabilities(cfg)] == [(0x100, 0x0001), (0x148, 0x000D),
                                                                        (0x950, 0x000B)]
    info = pci.acs_info(cfg)
    assert info["status"] == "present"
    assert info["offset"] == 0x148
    assert info["ctl_offset"] == 0x14E == pci.acs_ctl_offset(cfg)
    assert info["cap"] == 0x005F and info["ctl"] == 0x005D and info["ctl_hex"] == "0x005d"
    assert info["enabled_bits"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert info["cap_bits"] == ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert info["p2p_redirect"] is True


def test_acs_offset_is_walked_not_assumed():
    cfg = ConfigSpace(0x8086, 0x2030, 0x060400).add_pcie(0x40, 4)
    cfg.add_aer(0x100).add_ext(0x140, 0x0019, 1, b"\0" * 16).add_ext(0x220, 0x000B).add_acs(0x2A0, ctl=0x0011)
    raw = cfg.build()
    assert pci.acs_ctl_offset(raw) == 0x2A6
    assert struct.unpack_from("<H", raw, pci.acs_ctl_offset(raw))[0] == 0x0011
    assert pci.acs_info(raw)["enabled_bits"] == ["SrcValid", "UpstreamFwd"]
    assert pci.acs_info(raw)["p2p_redirect"] is False


def corrupt_unknown(raw, *needles):
    """The list is refused (ConfigSpaceCorrupt) and acs_info says unknown with the same reason."""
    with pytest.raises(pci.ConfigSpaceCorrupt) as info:
        pci.ext_capabilities(raw)
    with pytest.raises(pci.ConfigSpaceCorrupt):
        pci.acs_ctl_offset(raw)
    acs = pci.acs_info(raw)
    assert acs["status"] == "unknown" and acs["reason"] == str(info.value)
    assert acs["ctl"] is None and acs["p2p_redirect"] is None and acs["enabled_bits"] == []
    for needle in needles:
        assert needle in acs["reason"], acs["reason"]
    return acs["reason"]


def test_ext_chain_loop_is_corrupt_not_absent():
    cfg = ConfigSpace(0x10B5, 0x8747, 0x060400).add_aer(0x100).add_ext(0x148, 0x0004, next=0x100)
    corrupt_unknown(cfg.build(), "loops", "0x148 points back to 0x100")


def test_ext_chain_self_loop_and_loop_after_acs_are_corrupt():
    corrupt_unknown(ConfigSpace(1, 1, 0x060400).add_ext(0x100, 0x0001, next=0x100).build(), "loops")
    # ACS comes before the loop: a list corrupt anywhere is not half-trusted
    raw = ConfigSpace(1, 1, 0x060400).add_aer(0x100).add_acs(0x148, ctl=0x1D).add_ext(0x200, 0xB, next=0x148).build()
    corrupt_unknown(raw, "0x200 points back to 0x148")


@pytest.mark.parametrize("nxt", [0x40, 0x04, 0xFC])
def test_ext_chain_next_below_0x100_is_corrupt(nxt):
    raw = ConfigSpace(1, 1, 0x060400).add_aer(0x100).add_acs(0x148, next=nxt).build()
    corrupt_unknown(raw, "0x148 points to 0x%x, below 0x100" % nxt)


def test_ext_chain_pointer_beyond_the_bytes_read_is_corrupt():
    raw = ConfigSpace(1, 1, 0x060400).add_pcie(0x40, 6).add_aer(0x100).add_acs(0x148, next=0x200).build()
    corrupt_unknown(raw[:0x180], "0x148 points to 0x200, beyond the 384 bytes read")
    # a header that fits but an ACS body that does not
    raw = ConfigSpace(1, 1, 0x060400).add_aer(0x100, next=0xFFC).build()
    raw = raw[:0xFFC] + struct.pack("<I", 0x0001000D)
    acs = pci.acs_info(raw)
    assert acs["status"] == "unknown" and "ACS capability at 0xffc ends beyond the 4096 bytes read" == acs["reason"]


def test_all_ones_headers_are_corrupt():
    ff = bytearray(ConfigSpace(1, 1, 0x060400).add_pcie(0x40, 6).build())
    ff[0x100:0x104] = b"\xff\xff\xff\xff"
    corrupt_unknown(bytes(ff), "header at 0x100 reads 0xffffffff", "device gone")
    raw = bytearray(ConfigSpace(1, 1, 0x060400).add_aer(0x100, next=0x300).build())
    raw[0x300:0x304] = b"\xff\xff\xff\xff"
    corrupt_unknown(bytes(raw), "header at 0x300 reads 0xffffffff")


def test_ext_next_pointer_low_bits_are_masked_as_the_spec_says():
    """PCIe base spec: the 2 low bits of Next Capability Offset are reserved, software masks them."""
    raw = bytearray(ConfigSpace(1, 1, 0x060400).add_aer(0x100).add_acs(0x148, ctl=0x11).build())
    struct.pack_into("<I", raw, 0x100, 0x0001 | (2 << 16) | (0x14B << 20))  # next 0x14b -> 0x148
    assert [o for o, _c, _v in pci.iter_ext_capabilities(bytes(raw))] == [0x100, 0x148]
    assert pci.acs_info(bytes(raw))["ctl"] == 0x11


def test_no_acs_and_empty_ext_space():
    raw = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_UPSTREAM).build()
    assert pci.acs_info(raw)["status"] == "absent"
    assert pci.acs_info(raw)["reason"] == "no ACS capability"
    assert pci.acs_info(ConfigSpace(1, 1, 0x060400).build())["status"] == "absent"  # header 0 at 0x100


def test_256_byte_config_of_a_pcie_bridge_is_extended_space_not_readable():
    """Linux exposes 256 bytes when it cannot reach a PCI Express function's extended space
    (no MMCONFIG/ECAM, or the probe at 0x100 failed): ACS unknown, never absent."""
    raw = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_DOWNSTREAM, acs_ctl=0x5D).build(256)
    with pytest.raises(pci.ExtendedSpaceNotReadable):
        pci.acs_ctl_offset(raw)
    acs = pci.acs_info(raw)
    assert acs["status"] == "unknown"
    assert acs["reason"].startswith("extended configuration space not readable: the config file has 256 bytes")
    # a corrupt standard list cannot tell conventional from PCI Express: unknown too
    loop = bytearray(raw)
    loop[0x49] = 0x40  # MSI points back to PM, before the PCIe capability is reached
    assert pci.acs_info(bytes(loop))["status"] == "unknown"
    assert "standard capability list loops" in pci.acs_info(bytes(loop))["reason"]


def test_256_byte_config_of_a_conventional_function_has_no_acs():
    cfg = ConfigSpace(0x1AF4, 0x1042, 0x018000).add_cap(0x40, 0x09).add_cap(0x98, 0x11)
    acs = pci.acs_info(cfg.build(256))
    assert acs["status"] == "absent" and "conventional PCI function" in acs["reason"]


FIRECRACKER = os.path.join(os.path.dirname(__file__), "..", "fixtures", "pci", "firecracker_h100_vm_config.txt")


def test_real_firecracker_vm_config_spaces(tmp_path):
    """Config files read as root on the lent GPU node (tests/fixtures/pci/README.md)."""
    tree, captured = sysfs_tree.config_capture_tree(tmp_path, FIRECRACKER)
    sizes = dict((a, len(fn["config"])) for a, fn in captured.items())
    assert sizes == {"0000:00:00.0": 4096, "0000:00:01.0": 256, "0000:00:02.0": 256, "0000:00:03.0": 256,
                     "0000:00:04.0": 256, "0000:00:05.0": 256, "0000:00:06.0": 4096}
    infos = dict((a, pci.device_acs(tree.abs("sys/bus/pci/devices/%s" % a))) for a in captured)
    for address in ("0000:00:01.0", "0000:00:02.0", "0000:00:03.0", "0000:00:04.0", "0000:00:05.0"):
        cfg = captured[address]["config"]
        assert not pci.is_pci_express(cfg)  # "conventional PCI endpoint" in the node's boot log
        assert [c for _o, c in pci.iter_capabilities(cfg, strict=True)] == [0x09, 0x09, 0x09, 0x09, 0x09, 0x11]
        assert infos[address]["status"] == "absent" and "conventional PCI" in infos[address]["reason"]
    gpu = captured["0000:00:06.0"]["config"]
    assert pci.pcie_port_type(gpu) == (0, "endpoint")
    # hidden capabilities keep their links with id 0: the walk goes on past them
    assert pci.ext_capabilities(gpu) == [(0x100, 0x0000, 0), (0x12C, 0x0018, 1), (0x134, 0x0000, 1),
                                         (0x1B8, 0x0001, 2), (0x248, 0x0000, 1), (0x250, 0x0000, 1),
                                         (0x2A4, 0x000B, 1), (0x2B8, 0x0004, 1), (0x2F0, 0x0003, 1)]
    assert infos["0000:00:06.0"]["status"] == "absent"
    assert infos["0000:00:00.0"]["status"] == "absent"  # host bridge: header 0 at 0x100
    # the same GPU config truncated to 256 bytes is the "not readable" case, not "absent"
    assert pci.acs_info(gpu[:256])["status"] == "unknown"
    assert pci.acs_info(gpu[:256])["reason"].startswith(pci.EXT_NOT_READABLE)


def test_short_config_is_unreadable_not_absent():
    raw = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_DOWNSTREAM, acs_ctl=0x005D).build(64)
    info = pci.acs_info(raw)
    assert info["status"] == "unreadable" and "64 bytes" in info["reason"] and "become" in info["reason"]
    assert info["ctl"] is None and info["enabled_bits"] == []
    with pytest.raises(pci.ConfigSpaceUnreadable):
        pci.acs_ctl_offset(raw)
    assert pci.acs_info(None)["status"] == "unreadable"


def test_decode_acs_bits():
    assert pci.decode_acs_bits(0x005D) == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert pci.decode_acs_bits(0x7F) == [n for _b, n in pci.ACS_BITS]
    assert pci.decode_acs_bits(0) == []
    assert pci.decode_acs_bits(0x0100) == []  # egress vector bits are not control flags


def test_device_acs_reads_sysfs_config(tmp_path):
    tree = gpu_server(tmp_path)
    info = pci.device_acs(tree.abs("sys/bus/pci/devices/0000:02:08.0"))
    assert (info["status"], info["ctl"]) == ("present", 0x005D)


# ---------------------------------------------------------------------------
# PCI functions
# ---------------------------------------------------------------------------

def test_list_pci_functions_gpu_server(tmp_path):
    tree = gpu_server(tmp_path)
    fns = {fn.address: fn for fn in pci.list_pci_functions(tree.root)}
    assert list(fns) == sorted(fns, key=pci.pci_address_key)
    gpu = fns[sysfs_tree.GPU]
    assert (gpu.vendor, gpu.device, gpu.pci_class) == (0x10DE, 0x2335, 0x030200)
    assert (gpu.subsystem_vendor, gpu.subsystem_device) == (0x10DE, 0x18BE)
    assert gpu.numa_node == 0 and gpu.driver == "nvidia" and not gpu.is_bridge
    assert (gpu.current_link_speed, gpu.current_link_width, gpu.max_link_speed, gpu.max_link_width) == \
        (32.0, 16, 32.0, 16)
    assert gpu.root_complex == "pci0000:00"
    assert gpu.path == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
    assert gpu.port_type == "endpoint"
    assert fns["0000:00:01.0"].port_type == "root_port"
    assert fns["0000:01:00.0"].port_type == "upstream_port" and fns["0000:01:00.0"].is_bridge
    assert fns["0000:02:10.0"].port_type == "downstream_port"
    assert fns["0000:00:00.0"].port_type is None and not fns["0000:00:00.0"].is_bridge
    assert fns[sysfs_tree.UNBOUND].driver is None
    assert fns[sysfs_tree.NIC1].root_complex == "pci0000:80" and fns[sysfs_tree.NIC1].numa_node == 1
    d = gpu.to_dict()
    assert d["vendor_id"] == "0x10de" and d["class"] == "0x030200"
    assert d["link"] == {"current_speed_gts": 32.0, "current_width": 16, "max_speed_gts": 32.0, "max_width": 16}


def test_missing_attributes_give_none_and_unknown_numa(tmp_path):
    tree = SysfsTree(tmp_path)
    devdir = tree.add_pci("0000:00:06.0", vendor=0x10DE, device=0x2335, pci_class=0x030200)
    os.unlink(os.path.join(devdir, "numa_node"))
    tree.write(os.path.join(devdir, "current_link_speed"), "Unknown\n")
    tree.write(os.path.join(devdir, "current_link_width"), "")
    fn = pci.read_pci_function(tree.root, "0000:00:06.0")
    assert fn.numa_node == -1 and fn.driver is None
    assert fn.current_link_speed is None and fn.current_link_width is None and fn.max_link_speed is None
    assert fn.port_type is None


def test_list_pci_functions_skips_broken_entry(tmp_path):
    tree = gpu_server(tmp_path)
    os.symlink("0000:09:00.0", tree.abs("sys/bus/pci/devices/0000:09:00.0"))  # loops onto itself
    errors = []
    fns = pci.list_pci_functions(tree.root, errors)
    assert sysfs_tree.GPU in [f.address for f in fns]
    assert [a for a, _m in errors] == ["0000:09:00.0"]


def test_no_pci_bus_gives_empty_list(tmp_path):
    assert pci.list_pci_functions(str(tmp_path)) == []


def test_pci_address_of_netdev_and_virtual(tmp_path):
    tree = gpu_server(tmp_path)
    assert pci.pci_address_of(tree.root, tree.abs("sys/class/net/ens5f0/device")) == sysfs_tree.NIC1
    assert pci.pci_address_of(tree.root, tree.abs("sys/class/infiniband/mlx5_0/device")) == sysfs_tree.NIC0
    assert pci.pci_address_of(tree.root, tree.abs("sys/class/net/nothing/device")) is None


# ---------------------------------------------------------------------------
# distance
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind,expected", [
    ("PIX", "PIX"),
    ("PXB", "PXB"),
    ("PHB", "PHB"),
    ("PHB-rootbus", "PHB"),
    ("NODE", "NODE"),
    ("NODE-unknown", "NODE"),
    ("SYS", "SYS"),
])
def test_distance_classes(tmp_path, kind, expected):
    tree, gpu, nic = distance_tree(tmp_path, kind)
    a = pci.read_pci_function(tree.root, gpu)
    b = pci.read_pci_function(tree.root, nic)
    assert pci.distance(a, b) == expected
    assert pci.distance(b, a) == expected
    assert pci.distance(a, a) == "X"


def test_distance_functions_of_one_device_and_server_pairs(tmp_path):
    tree = gpu_server(tmp_path)
    fns = {fn.address: fn for fn in pci.list_pci_functions(tree.root)}
    gpu, nic0, nic1, unbound = (fns[a] for a in (sysfs_tree.GPU, sysfs_tree.NIC0, sysfs_tree.NIC1,
                                                 sysfs_tree.UNBOUND))
    assert pci.distance(gpu, nic0) == "PIX"
    assert pci.common_ancestor(gpu, nic0) == "0000:01:00.0"
    assert pci.union_path(gpu, nic0) == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]
    assert pci.distance(gpu, nic1) == "SYS"
    assert pci.common_ancestor(gpu, nic1) is None
    assert pci.distance(nic1, unbound) == "PIX"  # two functions of one adapter


def test_distance_unknown_root_complex_is_conservative():
    a = pci.PciFunction("0000:00:01.0", root_complex=None, numa_node=-1)
    b = pci.PciFunction("0000:00:02.0", root_complex=None, numa_node=-1)
    assert pci.distance(a, b) == "NODE"
    b.numa_node, a.numa_node = 1, 0
    assert pci.distance(a, b) == "SYS"


# ---------------------------------------------------------------------------
# IOMMU
# ---------------------------------------------------------------------------

def test_iommu_passthrough_from_group_type(tmp_path):
    info = pci.iommu_info(gpu_server(tmp_path).root)
    assert info["enabled"] is True and info["mode"] == "pt" and info["groups"] == 4
    assert info["devices"] == ["dmar0", "dmar1"]
    assert info["cmdline_flags"] == {"intel_iommu": "on", "iommu": "pt"}


@pytest.mark.parametrize("cmdline,units,groups,gtype,mode,enabled", [
    ("amd_iommu=on", ("ivhd0",), 3, "DMA-FQ", "translated", True),
    ("intel_iommu=on", ("dmar0",), 2, "DMA", "translated", True),
    ("intel_iommu=on iommu=pt", ("dmar0",), 2, None, "pt", True),
    ("intel_iommu=on iommu.passthrough=1", ("dmar0",), 2, None, "pt", True),
    ("intel_iommu=on", ("dmar0",), 2, None, "translated", True),
    ("quiet", (), 0, None, "off", False),
    ("intel_iommu=off", (), 0, None, "off", False),
])
def test_iommu_modes(tmp_path, cmdline, units, groups, gtype, mode, enabled):
    tree = SysfsTree(tmp_path)
    tree.cmdline(cmdline)
    tree.iommu(units=units, groups=groups, group_type=gtype)
    info = pci.iommu_info(tree.root)
    assert (info["mode"], info["enabled"], info["groups"]) == (mode, enabled, groups)


def test_iommu_unknown_without_sysfs(tmp_path):
    info = pci.iommu_info(str(tmp_path))
    assert info == {"enabled": False, "mode": "unknown", "groups": 0, "devices": [], "group_types": {},
                    "cmdline_flags": {}}


def test_parse_cmdline_iommu_ignores_init_args():
    assert pci.parse_cmdline_iommu("ro iommu=pt amd_iommu=on -- iommu=off") == {"iommu": "pt", "amd_iommu": "on"}
