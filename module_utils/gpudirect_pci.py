# -*- coding: utf-8 -*-
"""Read-only helpers for GPUDirect RDMA modules: sysfs PCI walking, PCI
configuration-space capability walking, GPU<->NIC topology distance, IOMMU state.

Every function takes a ``root`` path (default ``/``) or a device directory under
it, so unit tests and offline analysis run on a captured or fabricated tree.
Symlinks are resolved *inside* ``root`` (an absolute link target is taken
relative to ``root``), so a copied tree with absolute links still works.

Nothing here writes. The ``gpudirect_pcie_acs`` module writes ACSCtl at the absolute
offset given by :func:`acs_ctl_offset`; offsets are always found by walking
the capability lists, never assumed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re

from ansible.module_utils.gpudirect_host import read_attr

SYSFS_PCI_DEVICES = "sys/bus/pci/devices"

PCI_VENDOR_NVIDIA = 0x10DE
PCI_VENDOR_MELLANOX = 0x15B3

# Standard configuration header
PCI_STATUS = 0x06
PCI_STATUS_CAP_LIST = 0x10
PCI_CAPABILITY_LIST = 0x34
PCI_STD_HEADER_SIZE = 0x40
PCI_CFG_SPACE_SIZE = 0x100
PCI_CFG_SPACE_EXP_SIZE = 0x1000

PCI_CAP_ID_EXP = 0x10
PCI_EXP_FLAGS = 0x02  # PCI Express Capabilities register, 16 bit

PCI_EXT_CAP_START = 0x100
PCI_EXT_CAP_ID_AER = 0x0001
PCI_EXT_CAP_ID_ACS = 0x000D
PCI_ACS_CAP = 0x04  # ACS Capability register (16 bit), offset in the ACS capability
PCI_ACS_CTRL = 0x06  # ACS Control register (16 bit), offset in the ACS capability

# ACS Capability / Control bits (same positions in both registers), PCIe base spec 7.7.8
ACS_BITS = (
    (0, "SrcValid"),
    (1, "TransBlk"),
    (2, "ReqRedir"),
    (3, "CmpltRedir"),
    (4, "UpstreamFwd"),
    (5, "EgressCtrl"),
    (6, "DirectTrans"),
)
# Bits that send peer-to-peer requests/completions up to the root complex
# instead of across the switch: the ones that hurt GPUDirect RDMA.
ACS_P2P_REDIRECT_BITS = ("ReqRedir", "CmpltRedir", "EgressCtrl")

PCIE_PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}

_BDF_RE = re.compile(r"^(?P<domain>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$")
_HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$")
_SPEED_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s")
_MAX_STD_CAPS = 48  # (256 - 64) / 4: more hops than that is a loop


class ConfigSpaceError(Exception):
    """The configuration space cannot answer the question; ``str()`` says why."""


class ConfigSpaceUnreadable(ConfigSpaceError):
    """The configuration space read back too short to answer (unprivileged read:
    the kernel only shows the first 64 bytes to non-root users)."""


class ConfigSpaceCorrupt(ConfigSpaceError):
    """A capability list that cannot be trusted: it loops, points below 0x100 (or
    into the standard header), points past the bytes read, or a header reads as
    all ones (device gone, or the read failed)."""


class ExtendedSpaceNotReadable(ConfigSpaceError):
    """A PCI Express function whose config file has only 256 bytes: the kernel could
    not reach its extended configuration space (no usable MMCONFIG/ECAM, or the
    probe at 0x100 failed), so its extended capabilities (ACS) are unknown."""


EXT_NOT_READABLE = "extended configuration space not readable"


# --------------------------------------------------------------------------
# small file helpers
# --------------------------------------------------------------------------

def root_path(root, *parts):
    """Join ``parts`` (absolute or relative) below ``root``."""
    return os.path.join(root or "/", *[p.lstrip("/") for p in parts])


def read_int(path, base=0, default=None):
    """Read an integer attribute ("0x10de", "-1", "16")."""
    text = read_attr(path)
    if text is None or text == "":
        return default
    try:
        return int(text, base)
    except ValueError:
        return default


def resolve(root, path):
    """Resolve every symlink of ``path`` as if ``root`` were ``/`` (a chroot-like
    realpath): absolute link targets restart at ``root``, ``..`` never climbs
    above it. Returns an absolute path under ``root``."""
    root = os.path.realpath(root or "/")
    if root == "/":
        return os.path.realpath(path)
    path = os.path.abspath(path)
    if path == root:
        return root
    if not path.startswith(root + os.sep):
        raise ValueError("%s is not below %s" % (path, root))
    parts = [p for p in path[len(root) + 1:].split("/") if p not in ("", ".")]
    current = root
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if current != root:
                current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = root
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        current = candidate
    return current


def link_basename(path):
    """Basename of a symlink's target (``driver`` -> ``mlx5_core``), or None."""
    try:
        return os.path.basename(os.readlink(path).rstrip("/")) or None
    except (IOError, OSError):
        return None


# --------------------------------------------------------------------------
# PCI addresses, link attributes
# --------------------------------------------------------------------------

def is_pci_address(text):
    return bool(text) and _BDF_RE.match(text) is not None


def normalize_pci_address(text):
    """``00000000:1B:00.0`` (nvidia-smi) or ``0000:1b:00.0`` -> ``0000:1b:00.0``."""
    match = _BDF_RE.match((text or "").strip())
    if not match:
        return None
    return "%04x:%s:%s.%s" % (int(match.group("domain"), 16), match.group("bus").lower(),
                              match.group("dev").lower(), match.group("fn"))


def pci_address_key(address):
    """Sort key: numeric (domain, bus, device, function)."""
    match = _BDF_RE.match(address or "")
    if not match:
        return (1 << 32, 0, 0, 0, address)
    return (int(match.group("domain"), 16), int(match.group("bus"), 16),
            int(match.group("dev"), 16), int(match.group("fn")), address)


def parse_link_speed(text):
    """``"32.0 GT/s PCIe"`` -> 32.0, ``"2.5 GT/s"`` -> 2.5; empty/"Unknown" -> None."""
    if text is None:
        return None
    match = _SPEED_RE.match(text)
    return float(match.group(1)) if match else None


def parse_link_width(text):
    """``"16"`` -> 16; empty or non-numeric -> None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        return int(text, 10)
    except ValueError:
        match = re.match(r"^x?(\d+)$", text)
        return int(match.group(1)) if match else None


def parse_pci_path(real_path):
    """Split a resolved sysfs device path into ``(root_complex, chain)``.

    ``.../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0``
    gives ``("pci0000:00", ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0",
    "0000:03:00.0"])``: every PCI function from the root port (or the root-bus
    device itself) down to the device, the device last. The root complex is the
    first host-bridge component (``pciDDDD:BB``); functions found behind a
    nested domain (VMD) stay in the chain. ``(None, [])`` when no host bridge
    appears in the path.
    """
    parts = [p for p in (real_path or "").split("/") if p]
    root_complex = None
    chain = []
    for part in parts:
        if root_complex is None:
            if _HOST_BRIDGE_RE.match(part):
                root_complex = part
            continue
        if _BDF_RE.match(part):
            chain.append(part.lower())
    return root_complex, chain


# --------------------------------------------------------------------------
# configuration space
# --------------------------------------------------------------------------

def read_config(devdir, size=None):
    """Bytes of ``<devdir>/config`` (at most ``size``), or None when missing."""
    try:
        with open(os.path.join(devdir, "config"), "rb") as handle:
            return handle.read(size) if size else handle.read()
    except (IOError, OSError):
        return None


def _u8(cfg, off):
    return cfg[off]


def _u16(cfg, off):
    return cfg[off] | (cfg[off + 1] << 8)


def _u32(cfg, off):
    return cfg[off] | (cfg[off + 1] << 8) | (cfg[off + 2] << 16) | (cfg[off + 3] << 24)


def iter_capabilities(cfg, strict=False):
    """Yield ``(offset, cap_id)`` of the standard capability list (from 0x34).

    Raises ConfigSpaceUnreadable when the list points beyond what was read
    (64-byte unprivileged read). Stops on a null pointer, a pointer into the
    header, a repeated offset, an id of 0xff, or after 48 hops; with ``strict``
    all but the null pointer raise ConfigSpaceCorrupt instead.
    """
    cfg = bytearray(cfg or b"")
    if len(cfg) < PCI_STD_HEADER_SIZE:
        raise ConfigSpaceUnreadable("config space has %d bytes" % len(cfg))
    if not _u16(cfg, PCI_STATUS) & PCI_STATUS_CAP_LIST:
        return
    ptr = _u8(cfg, PCI_CAPABILITY_LIST) & 0xFC
    seen = set()
    hops = 0
    while ptr:
        if ptr < PCI_STD_HEADER_SIZE or ptr in seen or hops >= _MAX_STD_CAPS:
            if strict:
                raise ConfigSpaceCorrupt("standard capability list %s at 0x%x" % (
                    "points into the header" if ptr < PCI_STD_HEADER_SIZE else "loops", ptr))
            return
        if ptr + 2 > len(cfg):
            raise ConfigSpaceUnreadable("capability at 0x%x beyond the %d bytes read" % (ptr, len(cfg)))
        seen.add(ptr)
        hops += 1
        cap_id = _u8(cfg, ptr)
        if cap_id == 0xFF:
            if strict:
                raise ConfigSpaceCorrupt("standard capability at 0x%x reads 0xff (device gone, or the read failed)"
                                         % ptr)
            return
        yield ptr, cap_id
        ptr = _u8(cfg, ptr + 1) & 0xFC


def find_capability(cfg, cap_id):
    """Offset of standard capability ``cap_id`` or None."""
    for offset, found in iter_capabilities(cfg):
        if found == cap_id:
            return offset
    return None


def pcie_port_type(cfg):
    """``(code, name)`` of the PCI Express device/port type, or None when the
    function has no PCIe capability. Raises ConfigSpaceUnreadable."""
    offset = find_capability(cfg, PCI_CAP_ID_EXP)
    if offset is None:
        return None
    cfg = bytearray(cfg)
    if offset + PCI_EXP_FLAGS + 2 > len(cfg):
        raise ConfigSpaceUnreadable("PCIe capability beyond the bytes read")
    code = (_u16(cfg, offset + PCI_EXP_FLAGS) >> 4) & 0xF
    return code, PCIE_PORT_TYPES.get(code, "type_%d" % code)


def is_pci_express(cfg):
    """Whether the standard capability list has a PCI Express capability.
    Raises ConfigSpaceUnreadable / ConfigSpaceCorrupt when that cannot be told."""
    return any(cap_id == PCI_CAP_ID_EXP for _offset, cap_id in iter_capabilities(cfg, strict=True))


def ext_capabilities(cfg):
    """``[(offset, cap_id, version), ...]`` of the extended capability list, walked
    to its end before anything is returned, so a list corrupt anywhere is never
    half-trusted.

    Header at 0x100: id bits 15:0, version bits 19:16, next offset bits 31:20. The
    two low bits of the next offset are reserved and masked, as the PCIe base
    specification tells software to (and Linux's ``PCI_EXT_CAP_NEXT`` does); an id
    of 0 in the middle of the list is a hidden capability (hypervisors zero the ids
    they hide and keep the links) and the walk goes on.

    * fewer than 256 bytes read: ConfigSpaceUnreadable (unprivileged read);
    * exactly 256 bytes: a conventional PCI function (no PCI Express capability)
      has no extended space, so ``[]``; a PCI Express function raises
      ExtendedSpaceNotReadable ("extended configuration space not readable");
    * header 0 at 0x100: no extended capabilities, ``[]``;
    * ConfigSpaceCorrupt for a header reading 0xffffffff, a next offset below
      0x100, a loop, or an offset (or a header) beyond the bytes read.
    """
    cfg = bytearray(cfg or b"")
    size = len(cfg)
    if size < PCI_CFG_SPACE_SIZE:
        raise ConfigSpaceUnreadable("config space has %d bytes (unprivileged read?)" % size)
    if size < PCI_EXT_CAP_START + 4:
        if is_pci_express(cfg):
            raise ExtendedSpaceNotReadable(
                "%s: the config file has %d bytes although the function has a PCI Express capability "
                "(the kernel could not reach the extended space: no usable MMCONFIG/ECAM, or the read at 0x100 "
                "failed)" % (EXT_NOT_READABLE, size))
        return []
    offset = PCI_EXT_CAP_START
    header = _u32(cfg, offset)
    if header == 0:
        return []
    found = []
    seen = set()
    while True:
        if header == 0xFFFFFFFF:
            raise ConfigSpaceCorrupt("extended capability header at 0x%x reads 0xffffffff (device gone, or the "
                                     "read failed)" % offset)
        seen.add(offset)
        found.append((offset, header & 0xFFFF, (header >> 16) & 0xF))
        nxt = (header >> 20) & 0xFFC
        if nxt == 0:
            return found
        if nxt < PCI_EXT_CAP_START:
            raise ConfigSpaceCorrupt("extended capability at 0x%x points to 0x%x, below 0x100 where extended "
                                     "capabilities start" % (offset, nxt))
        if nxt in seen:
            raise ConfigSpaceCorrupt("extended capability list loops: 0x%x points back to 0x%x" % (offset, nxt))
        if nxt + 4 > size:
            raise ConfigSpaceCorrupt("extended capability at 0x%x points to 0x%x, beyond the %d bytes read"
                                     % (offset, nxt, size))
        offset = nxt
        header = _u32(cfg, offset)


def iter_ext_capabilities(cfg):
    """Iterate over :func:`ext_capabilities` (same exceptions, raised before the first item)."""
    return iter(ext_capabilities(cfg))


def find_ext_capability(cfg, cap_id):
    """Offset of extended capability ``cap_id`` or None. Raises ConfigSpaceError
    (see :func:`ext_capabilities`)."""
    for offset, found, _version in iter_ext_capabilities(cfg):
        if found == cap_id:
            return offset
    return None


def decode_acs_bits(value):
    """Names of the ACS bits set in an ACSCap/ACSCtl value, in bit order."""
    if value is None:
        return []
    return [name for bit, name in ACS_BITS if value & (1 << bit)]


def acs_ctl_offset(cfg):
    """Absolute config-space offset of the ACS Control register (ACS capability
    offset + 6), or None when the function has no ACS capability.
    Raises ConfigSpaceError when the extended space could not be read or walked."""
    offset = find_ext_capability(cfg, PCI_EXT_CAP_ID_ACS)
    if offset is None:
        return None
    return offset + PCI_ACS_CTRL


def acs_info(cfg):
    """ACS state of one function's config space.

    Returns ``{"status", "reason", "offset", "ctl_offset", "cap", "ctl", "ctl_hex",
    "cap_bits", "enabled_bits", "p2p_redirect"}``; ``status`` is

    * ``present``: ACS found by a clean walk; ``reason`` None;
    * ``absent``: the whole list was walked without finding ACS, or the function is
      conventional PCI (256-byte config, no PCI Express capability); ``reason`` says which;
    * ``unreadable``: the read was shorter than 256 bytes (not root, or no config file);
    * ``unknown``: the extended space is not readable (256-byte config of a PCI Express
      function) or a list is corrupt; ``reason`` says what was found where.

    Only ``present`` carries register values; nothing else may be taken as "ACS clear".
    """
    info = {"status": "unreadable", "reason": None, "offset": None, "ctl_offset": None, "cap": None,
            "ctl": None, "ctl_hex": None, "cap_bits": [], "enabled_bits": [], "p2p_redirect": None}
    if cfg is None:
        info["reason"] = "no readable config file"
        return info
    try:
        offset = find_ext_capability(cfg, PCI_EXT_CAP_ID_ACS)
    except ConfigSpaceUnreadable as exc:
        info["reason"] = "configuration space read returned %d bytes (%s); the kernel shows 64 bytes to " \
                         "unprivileged readers: read it as root (become: true)" % (len(cfg), exc)
        return info
    except ConfigSpaceError as exc:
        info.update(status="unknown", reason=str(exc))
        return info
    if offset is None:
        conventional = len(cfg) < PCI_EXT_CAP_START + 4
        info.update(status="absent", reason="no ACS capability (conventional PCI function: no PCI Express "
                                            "capability, so no extended configuration space)"
                    if conventional else "no ACS capability")
        return info
    if offset + PCI_ACS_CTRL + 2 > len(cfg):
        info.update(status="unknown", reason="ACS capability at 0x%x ends beyond the %d bytes read"
                    % (offset, len(cfg)))
        return info
    data = bytearray(cfg)
    cap = _u16(data, offset + PCI_ACS_CAP)
    ctl = _u16(data, offset + PCI_ACS_CTRL)
    enabled = decode_acs_bits(ctl)
    info.update(status="present", offset=offset, ctl_offset=offset + PCI_ACS_CTRL, cap=cap, ctl=ctl,
                ctl_hex="0x%04x" % ctl, cap_bits=decode_acs_bits(cap), enabled_bits=enabled,
                p2p_redirect=any(b in ACS_P2P_REDIRECT_BITS for b in enabled))
    return info


def device_acs(devdir):
    """:func:`acs_info` of the device directory's ``config`` file."""
    return acs_info(read_config(devdir))


# --------------------------------------------------------------------------
# PCI functions
# --------------------------------------------------------------------------

class PciFunction(object):
    """One PCI function as seen in sysfs."""

    __slots__ = ("address", "sysfs_path", "vendor", "device", "pci_class", "subsystem_vendor",
                 "subsystem_device", "numa_node", "driver", "current_link_speed", "current_link_width",
                 "max_link_speed", "max_link_width", "root_complex", "chain", "port_type")

    def __init__(self, address, **kwargs):
        self.address = address
        for name in self.__slots__[1:]:
            setattr(self, name, kwargs.get(name))
        if self.chain is None:
            self.chain = []

    @property
    def is_bridge(self):
        return self.pci_class is not None and (self.pci_class >> 8) == 0x0604

    @property
    def path(self):
        """Bridge BDFs from the root port down to (not including) the device."""
        return [bdf for bdf in self.chain if bdf != self.address]

    def to_dict(self):
        hex4 = (lambda v: None if v is None else "0x%04x" % v)
        return {
            "address": self.address,
            "vendor_id": hex4(self.vendor),
            "device_id": hex4(self.device),
            "class": None if self.pci_class is None else "0x%06x" % self.pci_class,
            "subsystem_vendor_id": hex4(self.subsystem_vendor),
            "subsystem_device_id": hex4(self.subsystem_device),
            "numa_node": self.numa_node,
            "driver": self.driver,
            "is_bridge": self.is_bridge,
            "port_type": self.port_type,
            "link": {
                "current_speed_gts": self.current_link_speed,
                "current_width": self.current_link_width,
                "max_speed_gts": self.max_link_speed,
                "max_width": self.max_link_width,
            },
            "path": self.path,
            "root_complex": self.root_complex,
        }

    def __repr__(self):
        return "PciFunction(%s %s:%s)" % (self.address, self.vendor, self.device)


def pci_device_dir(root, address):
    return root_path(root, SYSFS_PCI_DEVICES, address)


def read_pci_function(root, address, devdir=None):
    """Read one function from ``<root>/sys/bus/pci/devices/<address>`` (or ``devdir``)."""
    root = root or "/"
    devdir = devdir or pci_device_dir(root, address)
    real = resolve(root, devdir)
    root_complex, chain = parse_pci_path(real)
    if not chain or chain[-1] != address:
        # the link did not lead into a pciDDDD:BB tree: keep at least the device
        chain = chain + [address] if address not in chain else chain
    port_type = None
    try:
        found = pcie_port_type(read_config(devdir, PCI_CFG_SPACE_SIZE))
        if found is not None:
            port_type = found[1]
    except ConfigSpaceUnreadable:
        port_type = None
    return PciFunction(
        address,
        sysfs_path=real,
        vendor=read_int(os.path.join(devdir, "vendor"), 16),
        device=read_int(os.path.join(devdir, "device"), 16),
        pci_class=read_int(os.path.join(devdir, "class"), 16),
        subsystem_vendor=read_int(os.path.join(devdir, "subsystem_vendor"), 16),
        subsystem_device=read_int(os.path.join(devdir, "subsystem_device"), 16),
        numa_node=read_int(os.path.join(devdir, "numa_node"), 10, -1),
        driver=link_basename(os.path.join(devdir, "driver")),
        current_link_speed=parse_link_speed(read_attr(os.path.join(devdir, "current_link_speed"))),
        current_link_width=parse_link_width(read_attr(os.path.join(devdir, "current_link_width"))),
        max_link_speed=parse_link_speed(read_attr(os.path.join(devdir, "max_link_speed"))),
        max_link_width=parse_link_width(read_attr(os.path.join(devdir, "max_link_width"))),
        root_complex=root_complex,
        chain=chain,
        port_type=port_type,
    )


def list_pci_addresses(root="/"):
    """Sorted addresses under ``<root>/sys/bus/pci/devices`` ([] when absent)."""
    try:
        names = os.listdir(root_path(root, SYSFS_PCI_DEVICES))
    except (IOError, OSError):
        return []
    return sorted((n for n in names if is_pci_address(n)), key=pci_address_key)


def list_pci_functions(root="/", errors=None):
    """Every PCI function, sorted by address. A function that cannot be read is
    skipped and ``(address, message)`` appended to ``errors`` when given."""
    result = []
    for address in list_pci_addresses(root):
        try:
            result.append(read_pci_function(root, address))
        except Exception as exc:  # one broken device must not hide the others
            if errors is not None:
                errors.append((address, "%s: %s" % (type(exc).__name__, exc)))
    return result


def pci_address_of(root, path):
    """PCI address of the function a ``device`` symlink (or a directory below a
    PCI function) leads to, or None (virtual device)."""
    if not os.path.lexists(path):
        return None
    try:
        real = resolve(root, path)
    except (OSError, ValueError):
        return None
    _rc, chain = parse_pci_path(real)
    if chain:
        return chain[-1]
    base = os.path.basename(real)
    return base.lower() if is_pci_address(base) else None


# --------------------------------------------------------------------------
# topology distance
# --------------------------------------------------------------------------

def _numa(fn):
    value = getattr(fn, "numa_node", None)
    return value if isinstance(value, int) and value >= 0 else None


def distance(a, b):
    """GPU<->NIC distance class, same meaning as the ``nvidia-smi topo -m`` legend.

    ``a`` and ``b`` are :class:`PciFunction` objects (``address``, ``chain``:
    BDFs from the root port down to the device, ``root_complex``, ``numa_node``).

    * ``X``    same function.
    * ``PIX``  at most a single PCIe bridge: the two chains share a bridge and,
      below the deepest shared bridge, each side crosses at most one more bridge
      before reaching its device (both under the same switch, or functions of
      one device).
    * ``PXB``  multiple bridges without the host bridge: they share a bridge
      (root port or deeper) but one side crosses two or more bridges below it
      (nested switches).
    * ``PHB``  same root complex (host bridge ``pciDDDD:BB``) but no shared
      bridge: different root ports, or either device sits on the root bus.
    * ``NODE`` different root complexes on the same NUMA node, or NUMA unknown
      on either side (``numa_node`` -1).
    * ``SYS``  different root complexes on different NUMA nodes.

    A device whose root complex cannot be determined is treated as being on
    its own host bridge (NODE or SYS by NUMA): the conservative answer.
    """
    if a.address == b.address:
        return "X"
    same_rc = a.root_complex is not None and a.root_complex == b.root_complex
    if not same_rc:
        na, nb = _numa(a), _numa(b)
        if na is not None and nb is not None and na != nb:
            return "SYS"
        return "NODE"
    pa, pb = a.path, b.path
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"
    if len(pa) - common <= 1 and len(pb) - common <= 1:
        return "PIX"
    return "PXB"


def common_ancestor(a, b):
    """Deepest bridge shared by both paths, or None."""
    last = None
    for x, y in zip(a.path, b.path):
        if x != y:
            break
        last = x
    return last


def union_path(a, b):
    """Bridges of both paths, ``a``'s first, without duplicates."""
    out = []
    for bdf in list(a.path) + list(b.path):
        if bdf not in out:
            out.append(bdf)
    return out


# --------------------------------------------------------------------------
# IOMMU
# --------------------------------------------------------------------------

IOMMU_CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")


def parse_cmdline_iommu(cmdline):
    """IOMMU-related ``key=value`` flags of a kernel command line (last one wins)."""
    flags = {}
    for token in (cmdline or "").split():
        if token == "--":
            break
        if "=" not in token:
            continue
        key, value = token.split("=", 1)
        if key in IOMMU_CMDLINE_KEYS:
            flags[key] = value
    return flags


def iommu_info(root="/"):
    """IOMMU state: ``{enabled, mode, groups, devices, cmdline_flags, group_types}``.

    ``mode``: ``pt`` (identity/passthrough DMA domains), ``translated`` (DMA
    domains), ``off`` (no IOMMU unit / disabled on the command line) or
    ``unknown`` (sysfs does not say). The default domain type of the groups
    (``/sys/kernel/iommu_groups/*/type``) wins over the command line.
    """
    cmdline = read_attr(root_path(root, "proc/cmdline"), "")
    flags = parse_cmdline_iommu(cmdline)
    class_dir = root_path(root, "sys/class/iommu")
    groups_dir = root_path(root, "sys/kernel/iommu_groups")
    devices = None
    try:
        devices = sorted(os.listdir(class_dir))
    except (IOError, OSError):
        devices = None
    groups = None
    group_types = {}
    try:
        names = os.listdir(groups_dir)
        groups = len(names)
        for name in names:
            kind = read_attr(os.path.join(groups_dir, name, "type"))
            if kind:
                group_types[kind] = group_types.get(kind, 0) + 1
    except (IOError, OSError):
        groups = None

    disabled_on_cmdline = (flags.get("iommu") == "off" or flags.get("intel_iommu") == "off"
                           or flags.get("amd_iommu") == "off")
    enabled = bool(devices) or bool(groups)
    if disabled_on_cmdline and not enabled:
        mode = "off"
    elif enabled:
        translated = sum(n for t, n in group_types.items() if t.startswith("DMA"))
        identity = group_types.get("identity", 0)
        if translated:
            mode = "translated"
        elif identity:
            mode = "pt"
        elif flags.get("iommu") == "pt" or flags.get("iommu.passthrough") in ("1", "on", "y"):
            mode = "pt"
        else:
            mode = "translated"
    elif devices is not None and groups is not None:
        mode = "off"
    else:
        mode = "unknown"
    return {
        "enabled": enabled,
        "mode": mode,
        "groups": groups if groups is not None else 0,
        "devices": devices or [],
        "group_types": group_types,
        "cmdline_flags": flags,
    }
