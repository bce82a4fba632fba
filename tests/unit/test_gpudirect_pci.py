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


def test_ext_chain_with_loop_terminates_without_acs():
    cfg = ConfigSpace(0x10B5, 0x8747, 0x060400).add_aer(0x100).add_ext(0x148, 0x0004, next=0x100)
    raw = cfg.build()
    assert [o for o, _c, _v in pci.iter_ext_capabilities(raw)] == [0x100, 0x148]
    assert pci.acs_info(raw)["status"] == "absent"
    assert pci.acs_ctl_offset(raw) is None


def test_ext_chain_self_loop_and_loop_after_acs():
    raw = ConfigSpace(1, 1, 0x060400).add_ext(0x100, 0x0001, next=0x100).build()
    assert len(list(pci.iter_ext_capabilities(raw))) == 1
    raw = ConfigSpace(1, 1, 0x060400).add_aer(0x100).add_acs(0x148, ctl=0x1D).add_ext(0x200, 0xB, next=0x148).build()
    assert pci.acs_ctl_offset(raw) == 0x14E


def test_ext_chain_next_below_0x100_stops():
    raw = ConfigSpace(1, 1, 0x060400).add_aer(0x100, next=0x40).build()
    assert [o for o, _c, _v in pci.iter_ext_capabilities(raw)] == [0x100]


def test_no_acs_and_empty_ext_space():
    raw = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_UPSTREAM).build()
    assert pci.acs_info(raw)["status"] == "absent"
    assert pci.acs_info(ConfigSpace(1, 1, 0x060400).build())["status"] == "absent"  # header 0
    ff = bytearray(ConfigSpace(1, 1, 0x060400).build())
    ff[0x100:0x104] = b"\xff\xff\xff\xff"
    assert pci.acs_info(bytes(ff))["status"] == "absent"
    # 256 bytes: conventional config space only, the kernel has no extended space
    assert pci.acs_info(bridge_config(1, 1, 6, acs_ctl=0x5D).build(256))["status"] == "absent"


def test_short_config_is_unreadable_not_absent():
    raw = bridge_config(0x10B5, 0x8747, sysfs_tree.PORT_DOWNSTREAM, acs_ctl=0x005D).build(64)
    info = pci.acs_info(raw)
    assert info["status"] == "unreadable"
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
