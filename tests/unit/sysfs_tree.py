"""Build fake sysfs/procfs trees for unit tests of gpudirect_pci / gpudirect_facts.

The layout follows the kernel's:

* PCI functions are real directories nested under ``sys/devices/pciDDDD:BB/``
  (a bridge's children are sub-directories of the bridge), with relative
  symlinks ``sys/bus/pci/devices/<bdf> -> ../../../devices/...``;
* ``driver`` is a symlink to ``sys/bus/pci/drivers/<name>``;
* ``config`` is a binary file (4096 bytes by default) whose standard and
  extended capability chains are built byte by byte by :class:`ConfigSpace`;
* ``sys/class/infiniband/<dev>`` and ``sys/class/net/<dev>`` are symlinks to
  directories below the PCI function (or below ``sys/devices/virtual``).

Scenario builders at the bottom model a real GPU server, the real H200 capture
(``tests/fixtures/gpu_node/h200/capture``) and one small tree per distance class.
"""

import gzip
import os
import re
import struct

# ---------------------------------------------------------------------------
# configuration space
# ---------------------------------------------------------------------------

ACS_ALL_CTL = 0x005D  # SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans
ACS_CAP_TYPICAL = 0x005F  # SV TB RR CR UF DT

PORT_ENDPOINT = 0x0
PORT_ROOT = 0x4
PORT_UPSTREAM = 0x5
PORT_DOWNSTREAM = 0x6


class ConfigSpace(object):
    """A PCI configuration space assembled byte by byte.

    Standard capabilities are linked from 0x34 in the order added; extended
    capabilities are linked from 0x100 in the order added unless ``next`` is
    given explicitly (to build loops or odd chains). The first extended
    capability must be placed at 0x100 for the chain to be found.
    """

    def __init__(self, vendor, device, pci_class, header_type=None):
        self.vendor = vendor
        self.device = device
        self.pci_class = pci_class
        if header_type is None:
            header_type = 1 if (pci_class >> 8) == 0x0604 else 0
        self.header_type = header_type
        self.std = []  # (offset, cap_id, body)
        self.ext = []  # (offset, cap_id, version, body, next)
        self.raw = []  # (offset, bytes) written last

    def add_cap(self, offset, cap_id, body=b""):
        self.std.append((offset, cap_id, bytes(body)))
        return self

    def add_pcie(self, offset, port_type, version=2):
        flags = (version & 0xF) | ((port_type & 0xF) << 4)
        return self.add_cap(offset, 0x10, struct.pack("<H", flags) + b"\0" * 56)

    def add_ext(self, offset, cap_id, version=1, body=b"", next=None):
        self.ext.append((offset, cap_id, version, bytes(body), next))
        return self

    def add_aer(self, offset, next=None):
        return self.add_ext(offset, 0x0001, 2, b"\0" * 0x44, next)

    def add_acs(self, offset, ctl=ACS_ALL_CTL, cap=ACS_CAP_TYPICAL, next=None):
        return self.add_ext(offset, 0x000D, 1, struct.pack("<HH", cap, ctl), next)

    def poke(self, offset, data):
        self.raw.append((offset, bytes(data)))
        return self

    def build(self, size=4096):
        data = bytearray(4096)
        struct.pack_into("<HH", data, 0, self.vendor, self.device)
        data[0x09] = self.pci_class & 0xFF
        data[0x0A] = (self.pci_class >> 8) & 0xFF
        data[0x0B] = (self.pci_class >> 16) & 0xFF
        data[0x0E] = self.header_type
        if self.std:
            struct.pack_into("<H", data, 0x06, 0x0010)  # status: capabilities list
            data[0x34] = self.std[0][0]
            for i, (offset, cap_id, body) in enumerate(self.std):
                nxt = self.std[i + 1][0] if i + 1 < len(self.std) else 0
                data[offset] = cap_id
                data[offset + 1] = nxt
                data[offset + 2:offset + 2 + len(body)] = body
        for i, (offset, cap_id, version, body, nxt) in enumerate(self.ext):
            if nxt is None:
                nxt = self.ext[i + 1][0] if i + 1 < len(self.ext) else 0
            header = (cap_id & 0xFFFF) | ((version & 0xF) << 16) | ((nxt & 0xFFF) << 20)
            struct.pack_into("<I", data, offset, header)
            data[offset + 4:offset + 4 + len(body)] = body
        for offset, raw in self.raw:
            data[offset:offset + len(raw)] = raw
        return bytes(data[:size])


def bridge_config(vendor, device, port_type, acs_ctl=None, acs_offset=0x148, acs_cap=ACS_CAP_TYPICAL):
    """A PCIe bridge: PM 0x40 -> MSI 0x48 -> PCIe 0x68 in the standard list;
    AER at 0x100 -> ACS at ``acs_offset`` (when ``acs_ctl`` is not None) ->
    vendor-specific 0x000b at 0x950."""
    cfg = ConfigSpace(vendor, device, 0x060400)
    cfg.add_cap(0x40, 0x01, b"\x03\x00").add_cap(0x48, 0x05).add_pcie(0x68, port_type)
    cfg.add_aer(0x100)
    if acs_ctl is not None:
        cfg.add_acs(acs_offset, ctl=acs_ctl, cap=acs_cap)
    cfg.add_ext(0x950, 0x000B, 1, b"\x01\x00\x14\x01")
    return cfg


def endpoint_config(vendor, device, pci_class):
    """An endpoint: PM 0x60 -> PCIe 0x78 -> MSI-X 0xb4; AER 0x100 -> SR-IOV-ish 0x180."""
    cfg = ConfigSpace(vendor, device, pci_class)
    cfg.add_cap(0x60, 0x01).add_pcie(0x78, PORT_ENDPOINT).add_cap(0xB4, 0x11)
    cfg.add_aer(0x100).add_ext(0x180, 0x0010, 1, b"\0" * 0x30)
    return cfg


# ---------------------------------------------------------------------------
# tree
# ---------------------------------------------------------------------------

class SysfsTree(object):
    """A fake root directory: ``tree.root`` is what the module's ``root`` gets."""

    def __init__(self, base):
        self.root = str(base)
        self.pci_dirs = {}
        os.makedirs(self.abs("sys/bus/pci/devices"), exist_ok=True)
        os.makedirs(self.abs("sys/class/net"), exist_ok=True)

    # generic ---------------------------------------------------------------
    def abs(self, rel):
        return os.path.join(self.root, rel.lstrip("/"))

    def write(self, rel, content, binary=False):
        path = rel if os.path.isabs(rel) and rel.startswith(self.root) else self.abs(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if binary else "w") as handle:
            handle.write(content)
        return path

    def mkdir(self, rel):
        os.makedirs(self.abs(rel), exist_ok=True)
        return self.abs(rel)

    def link(self, link_rel, target_abs):
        """Relative symlink at ``link_rel`` (relative to root) to ``target_abs``."""
        link_abs = self.abs(link_rel)
        os.makedirs(os.path.dirname(link_abs), exist_ok=True)
        if os.path.lexists(link_abs):
            os.unlink(link_abs)
        os.symlink(os.path.relpath(target_abs, os.path.dirname(link_abs)), link_abs)
        return link_abs

    def rel(self, path):
        return os.path.relpath(path, self.root)

    # PCI -------------------------------------------------------------------
    def add_pci(self, address, parent=None, host="pci0000:00", vendor=0x8086, device=0x0001,
                pci_class=0x060400, numa_node=-1, driver=None, current_link_speed=None,
                current_link_width=None, max_link_speed=None, max_link_width=None, config=None,
                config_size=4096, subsystem=None):
        """Create one PCI function. ``parent`` is the address of the bridge above
        (None: on the root bus of ``host``). ``config``: a ConfigSpace, raw
        bytes, or None (no config file)."""
        if parent is not None:
            devdir = os.path.join(self.pci_dirs[parent], address)
        else:
            devdir = self.abs(os.path.join("sys/devices", host, address))
        os.makedirs(devdir, exist_ok=True)
        self.pci_dirs[address] = devdir
        self.write(os.path.join(devdir, "vendor"), "0x%04x\n" % vendor)
        self.write(os.path.join(devdir, "device"), "0x%04x\n" % device)
        self.write(os.path.join(devdir, "class"), "0x%06x\n" % pci_class)
        self.write(os.path.join(devdir, "numa_node"), "%d\n" % numa_node)
        if subsystem is not None:
            self.write(os.path.join(devdir, "subsystem_vendor"), "0x%04x\n" % subsystem[0])
            self.write(os.path.join(devdir, "subsystem_device"), "0x%04x\n" % subsystem[1])
        for name, value in (("current_link_speed", current_link_speed), ("current_link_width", current_link_width),
                            ("max_link_speed", max_link_speed), ("max_link_width", max_link_width)):
            if value is not None:
                self.write(os.path.join(devdir, name), "%s\n" % value)
        if config is not None:
            raw = config.build(config_size) if isinstance(config, ConfigSpace) else bytes(config)
            self.write(os.path.join(devdir, "config"), raw, binary=True)
        if driver:
            self.mkdir("sys/bus/pci/drivers/%s" % driver)
            self.link(self.rel(os.path.join(devdir, "driver")), self.abs("sys/bus/pci/drivers/%s" % driver))
        self.link("sys/bus/pci/devices/%s" % address, devdir)
        return devdir

    def add_bridge(self, address, parent=None, host="pci0000:00", vendor=0x8086, device=0x2030,
                   port_type=PORT_ROOT, acs_ctl=None, acs_offset=0x148, numa_node=-1, config="auto",
                   config_size=4096, driver="pcieport"):
        if config == "auto":
            config = bridge_config(vendor, device, port_type, acs_ctl, acs_offset)
        return self.add_pci(address, parent, host, vendor, device, 0x060400, numa_node, driver,
                            config=config, config_size=config_size)

    def add_gpu(self, address, parent=None, host="pci0000:00", device=0x2335, numa_node=-1,
                driver="nvidia", speed="32.0 GT/s PCIe", width="16", pci_class=0x030200):
        return self.add_pci(address, parent, host, 0x10DE, device, pci_class, numa_node, driver,
                            speed, width, speed, width, endpoint_config(0x10DE, device, pci_class),
                            subsystem=(0x10DE, 0x18BE))

    def add_nic(self, address, parent=None, host="pci0000:00", device=0x101B, numa_node=-1,
                driver="mlx5_core", pci_class=0x020700, speed="16.0 GT/s PCIe", width="16"):
        return self.add_pci(address, parent, host, 0x15B3, device, pci_class, numa_node, driver,
                            speed, width, speed, width, endpoint_config(0x15B3, device, pci_class))

    # network / RDMA ----------------------------------------------------------
    def add_netdev(self, name, pci=None):
        if pci is not None:
            ndir = os.path.join(self.pci_dirs[pci], "net", name)
            os.makedirs(ndir, exist_ok=True)
            self.link(self.rel(os.path.join(ndir, "device")), self.pci_dirs[pci])
        else:
            ndir = self.mkdir("sys/devices/virtual/net/%s" % name)
        self.write(os.path.join(ndir, "ifindex"), "2\n")
        self.link("sys/class/net/%s" % name, ndir)
        return ndir

    def add_ib(self, name, pci=None, parent=None, node_type="1: CA", fw_ver=None, node_guid=None,
               ports=None):
        """An RDMA device: below PCI function ``pci`` (with a ``device`` link),
        or a software device with a ``parent`` netdev file (rxe/siw).
        ``ports`` maps port number -> dict(state, phys_state, link_layer, rate, ndev)."""
        if pci is not None:
            idir = os.path.join(self.pci_dirs[pci], "infiniband", name)
            os.makedirs(idir, exist_ok=True)
            self.link(self.rel(os.path.join(idir, "device")), self.pci_dirs[pci])
        else:
            idir = self.mkdir("sys/devices/virtual/infiniband/%s" % name)
        if parent is not None:
            self.write(os.path.join(idir, "parent"), parent + "\n")
        self.write(os.path.join(idir, "node_type"), node_type + "\n")
        if fw_ver is not None:
            self.write(os.path.join(idir, "fw_ver"), fw_ver + "\n")
        if node_guid is not None:
            self.write(os.path.join(idir, "node_guid"), node_guid + "\n")
        for num, port in (ports or {}).items():
            pdir = os.path.join(idir, "ports", str(num))
            for attr in ("state", "phys_state", "link_layer", "rate"):
                if port.get(attr) is not None:
                    self.write(os.path.join(pdir, attr), port[attr] + "\n")
            if port.get("ndev"):
                self.write(os.path.join(pdir, "gid_attrs", "ndevs", "0"), port["ndev"] + "\n")
        self.link("sys/class/infiniband/%s" % name, idir)
        return idir

    def empty_infiniband(self):
        return self.mkdir("sys/class/infiniband")

    # modules, proc, boot -------------------------------------------------------
    def module(self, *names):
        for name in names:
            self.mkdir("sys/module/%s" % name)

    def nvidia_version(self, text):
        self.write("proc/driver/nvidia/version", text)

    def kernel(self, running, default=None, link="boot/vmlinuz", reboot_required=None):
        self.write("proc/sys/kernel/osrelease", running + "\n")
        if default is not None:
            self.write("boot/vmlinuz-%s" % default, "kernel image\n")
            target = "vmlinuz-%s" % default if link.startswith("boot/") else "boot/vmlinuz-%s" % default
            os.makedirs(os.path.dirname(self.abs(link)), exist_ok=True)
            os.symlink(target, self.abs(link))
        if reboot_required is not None:
            self.write("var/run/reboot-required", "*** System restart required ***\n")
            if reboot_required:
                self.write("var/run/reboot-required.pkgs", "\n".join(reboot_required) + "\n")

    def cmdline(self, text):
        self.write("proc/cmdline", text + "\n")

    def iommu(self, units=(), groups=0, group_type=None):
        self.mkdir("sys/class/iommu")
        for unit in units:
            self.mkdir("sys/class/iommu/%s" % unit)
        self.mkdir("sys/kernel/iommu_groups")
        for n in range(groups):
            gdir = self.mkdir("sys/kernel/iommu_groups/%d" % n)
            if group_type:
                self.write(os.path.join(gdir, "type"), group_type + "\n")

    def kernel_config_gz(self, text):
        path = self.abs("proc/config.gz")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with gzip.open(path, "wt") as handle:
            handle.write(text)


# ---------------------------------------------------------------------------
# scenarios
# ---------------------------------------------------------------------------

GPU = "0000:03:00.0"
NIC0 = "0000:04:00.0"
NIC1 = "0000:81:00.0"
UNBOUND = "0000:81:00.1"


def gpu_server(base, downstream_acs=ACS_ALL_CTL):
    """A two-socket GPU server.

    NUMA 0, pci0000:00: Intel root port 00:01.0 (ACSCtl 0x001d) -> PLX PEX8747
    upstream port 01:00.0 (no ACS) -> downstream ports 02:08.0 and 02:10.0
    (ACSCtl ``downstream_acs``) -> H100-class GPU 10de:2335 at 03:00.0 and
    ConnectX-6 15b3:101b mlx5_0 (InfiniBand, ib0) at 04:00.0: PIX.
    NUMA 1, pci0000:80: root port 80:01.0 (ACS present, ACSCtl 0) ->
    ConnectX-6 mlx5_1 (RoCE, ens5f0) at 81:00.0 (SYS to the GPU) and an unbound
    function 81:00.1; a Mellanox bridge without driver at 80:03.0 (not reported).
    """
    t = SysfsTree(base)
    t.add_pci("0000:00:00.0", vendor=0x8086, device=0x2020, pci_class=0x060000, numa_node=0)
    t.add_bridge("0000:00:01.0", vendor=0x8086, device=0x2030, port_type=PORT_ROOT, acs_ctl=0x001D, numa_node=0)
    t.add_bridge("0000:01:00.0", parent="0000:00:01.0", vendor=0x10B5, device=0x8747,
                 port_type=PORT_UPSTREAM, numa_node=0)
    t.add_bridge("0000:02:08.0", parent="0000:01:00.0", vendor=0x10B5, device=0x8747,
                 port_type=PORT_DOWNSTREAM, acs_ctl=downstream_acs, numa_node=0)
    t.add_bridge("0000:02:10.0", parent="0000:01:00.0", vendor=0x10B5, device=0x8747,
                 port_type=PORT_DOWNSTREAM, acs_ctl=downstream_acs, numa_node=0)
    t.add_gpu(GPU, parent="0000:02:08.0", numa_node=0)
    t.add_nic(NIC0, parent="0000:02:10.0", numa_node=0)
    t.add_netdev("ib0", pci=NIC0)
    t.add_ib("mlx5_0", pci=NIC0, fw_ver="20.39.1002", node_guid="b859:9f03:00a1:b2c4",
             ports={1: {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand",
                        "rate": "200 Gb/sec (4X HDR)"}})

    t.add_bridge("0000:80:01.0", host="pci0000:80", vendor=0x8086, device=0x2030, port_type=PORT_ROOT,
                 acs_ctl=0x0000, numa_node=1)
    t.add_bridge("0000:80:03.0", host="pci0000:80", vendor=0x15B3, device=0x1976, port_type=PORT_ROOT,
                 numa_node=1, driver=None)
    t.add_nic(NIC1, parent="0000:80:01.0", numa_node=1, pci_class=0x020000)
    t.add_pci(UNBOUND, parent="0000:80:01.0", vendor=0x15B3, device=0x101B, pci_class=0x020000,
              numa_node=1, config=endpoint_config(0x15B3, 0x101B, 0x020000))
    t.add_netdev("ens5f0", pci=NIC1)
    t.add_ib("mlx5_1", pci=NIC1, fw_ver="20.39.1002",
             ports={1: {"state": "1: DOWN", "phys_state": "3: Disabled", "link_layer": "Ethernet",
                        "rate": "100 Gb/sec (4X EDR)", "ndev": "ens5f0"}})

    t.nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    t.module("nvidia", "ib_core", "mlx5_core", "nvidia_peermem")
    t.kernel("6.1.0-18-amd64", default="6.1.0-18-amd64")
    t.cmdline("BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=x ro intel_iommu=on iommu=pt quiet")
    t.iommu(units=("dmar0", "dmar1"), groups=4, group_type="identity")
    t.write("boot/config-6.1.0-18-amd64", "CONFIG_DMA_SHARED_BUFFER=y\nCONFIG_INFINIBAND=m\n")
    return t


H200_LINE = re.compile(r"^(?P<addr>\S+) vendor=(?P<vendor>\S+) device=(?P<device>\S+) class=(?P<cls>\S+) "
                       r"numa=(?P<numa>\S+) speed=(?P<speed>.*?) width=(?P<width>\S*) driver=(?P<driver>\S*)$")


def h200_capture(base, fixtures_dir):
    """The real H200 node from ``tests/fixtures/gpu_node/h200/capture``: every PCI function of
    sysfs.txt on the root bus of pci0000:00 (a flat VM bus, no config files in
    the capture), the modules of /sys/module, an empty /sys/class/infiniband,
    the kernel config as /proc/config.gz, and osrelease + the NVIDIA version
    file from system.txt."""
    t = SysfsTree(base)
    with open(os.path.join(fixtures_dir, "sysfs.txt")) as handle:
        lines = handle.read().splitlines()
    config_lines = []
    for i, line in enumerate(lines):
        match = H200_LINE.match(line)
        if match:
            t.add_pci(match.group("addr"), vendor=int(match.group("vendor"), 16),
                      device=int(match.group("device"), 16), pci_class=int(match.group("cls"), 16),
                      numa_node=int(match.group("numa")), driver=match.group("driver") or None,
                      current_link_speed=match.group("speed") or None,
                      current_link_width=match.group("width") or None)
        elif line.startswith("CONFIG_") or line.startswith("# CONFIG_"):
            config_lines.append(line)
        elif i > 0 and H200_LINE.match(lines[i - 1]) and not line.startswith("/"):
            t.module(*line.split())
    t.empty_infiniband()
    t.kernel_config_gz("\n".join(config_lines) + "\n")
    with open(os.path.join(fixtures_dir, "system.txt")) as handle:
        system = handle.read().splitlines()
    t.write("proc/sys/kernel/osrelease", system[0] + "\n")
    t.nvidia_version("\n".join(l for l in system if l.startswith(("NVRM version", "GCC version"))) + "\n")
    return t


def distance_tree(base, kind):
    """Smallest tree for one distance class; returns (tree, gpu_address, nic_address)."""
    t = SysfsTree(base)
    gpu, nic = "0000:03:00.0", "0000:04:00.0"
    if kind == "PIX":
        t.add_bridge("0000:00:01.0")
        t.add_bridge("0000:01:00.0", "0000:00:01.0", vendor=0x10B5, device=0x8747, port_type=PORT_UPSTREAM)
        t.add_bridge("0000:02:08.0", "0000:01:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM)
        t.add_bridge("0000:02:10.0", "0000:01:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM)
        t.add_gpu(gpu, "0000:02:08.0")
        t.add_nic(nic, "0000:02:10.0")
    elif kind == "PXB":
        # GPU behind a second switch nested under the first one's port 02:08.0
        t.add_bridge("0000:00:01.0")
        t.add_bridge("0000:01:00.0", "0000:00:01.0", vendor=0x10B5, device=0x8747, port_type=PORT_UPSTREAM)
        t.add_bridge("0000:02:08.0", "0000:01:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM)
        t.add_bridge("0000:02:10.0", "0000:01:00.0", vendor=0x10B5, device=0x8747, port_type=PORT_DOWNSTREAM)
        t.add_bridge("0000:05:00.0", "0000:02:08.0", vendor=0x10B5, device=0x8725, port_type=PORT_UPSTREAM)
        t.add_bridge("0000:06:00.0", "0000:05:00.0", vendor=0x10B5, device=0x8725, port_type=PORT_DOWNSTREAM)
        gpu = "0000:07:00.0"
        t.add_gpu(gpu, "0000:06:00.0")
        t.add_nic(nic, "0000:02:10.0")
    elif kind == "PHB":
        t.add_bridge("0000:00:01.0")
        t.add_bridge("0000:00:02.0")
        t.add_gpu(gpu, "0000:00:01.0")
        t.add_nic(nic, "0000:00:02.0")
    elif kind == "PHB-rootbus":
        t.add_bridge("0000:00:01.0")
        t.add_gpu(gpu, "0000:00:01.0")
        nic = "0000:00:05.0"
        t.add_nic(nic)
    elif kind in ("NODE", "NODE-unknown", "SYS"):
        gnuma, nnuma = {"NODE": (0, 0), "NODE-unknown": (-1, 1), "SYS": (0, 1)}[kind]
        nic = "0000:41:00.0"
        t.add_bridge("0000:00:01.0", numa_node=gnuma)
        t.add_gpu(gpu, "0000:00:01.0", numa_node=gnuma)
        t.add_bridge("0000:40:01.0", host="pci0000:40", numa_node=nnuma)
        t.add_nic(nic, "0000:40:01.0", host="pci0000:40", numa_node=nnuma)
    else:
        raise ValueError(kind)
    t.add_netdev("eth0", pci=nic)
    t.add_ib("mlx5_0", pci=nic, ports={1: {"state": "4: ACTIVE", "phys_state": "5: LinkUp",
                                             "link_layer": "Ethernet", "rate": "100 Gb/sec (4X EDR)",
                                             "ndev": "eth0"}})
    t.write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    return t, gpu, nic


CONFIG_CAPTURE_HEAD = re.compile(r"^== (?P<addr>\S+) (?P<vendor>0x[0-9a-f]{4}):(?P<device>0x[0-9a-f]{4}) "
                                 r"class=(?P<cls>0x[0-9a-f]{6}) config=(?P<size>\d+) driver=(?P<driver>\S+)$")


def read_config_capture(path):
    """Parse a ``tests/fixtures/pci/*_config.txt`` capture (format in that folder's README)
    into ``{address: {"vendor", "device", "class", "driver", "config": bytes}}``."""
    functions = {}
    current = None
    with open(path) as handle:
        for line in handle.read().splitlines():
            match = CONFIG_CAPTURE_HEAD.match(line)
            if match:
                current = functions[match.group("addr")] = {
                    "vendor": int(match.group("vendor"), 16), "device": int(match.group("device"), 16),
                    "class": int(match.group("cls"), 16),
                    "driver": None if match.group("driver") == "-" else match.group("driver"),
                    "config": bytearray(int(match.group("size")))}
            elif line.strip():
                offset, row = line.split(":", 1)
                data = bytes(int(b, 16) for b in row.split())
                start = int(offset, 16)
                current["config"][start:start + len(data)] = data
    for fn in functions.values():
        fn["config"] = bytes(fn["config"])
    return functions


def config_capture_tree(base, path):
    """A tree with every function of a config capture on the root bus of pci0000:00 (the
    captured VM has a flat bus), each with its captured config file."""
    t = SysfsTree(base)
    functions = read_config_capture(path)
    for address, fn in sorted(functions.items()):
        t.add_pci(address, vendor=fn["vendor"], device=fn["device"], pci_class=fn["class"],
                  driver=fn["driver"], config=fn["config"])
    return t, functions
