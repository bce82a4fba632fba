# -*- coding: utf-8 -*-
"""The one scan of the RDMA devices in sysfs, shared by ``gpudirect_facts`` and
``gpudirect_loopback``.

``/sys/class/infiniband/<dev>`` is one RDMA device: a ``device`` link to its PCI
function (an HCA such as mlx5_0), or a ``parent`` netdev (soft-RoCE rxe0, soft-iWARP
siw0). ``ports/<n>/`` holds the port state (``"4: ACTIVE"``), ``phys_state``
(``"5: LinkUp"``), ``link_layer`` (``InfiniBand`` / ``Ethernet``), ``rate``
(``"200 Gb/sec (4X HDR)"``) and, on RoCE, ``gid_attrs/ndevs/0`` (the netdev). The
formats are the kernel's (drivers/infiniband/core/sysfs.c); the tests build trees as a
ConnectX node and the soft-RoCE VM show them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.module_utils.gpudirect_host import read_attr
from ansible.module_utils.gpudirect_pci import link_basename, pci_address_of, root_path

INFINIBAND = "sys/class/infiniband"


def parse_sysfs_state(text):
    """``"4: ACTIVE"`` -> ``(4, "ACTIVE")``; ``"ACTIVE"`` -> ``(None, "ACTIVE")``."""
    if text is None:
        return None, None
    match = re.match(r"^\s*(\d+)\s*:\s*(.*?)\s*$", text)
    if match:
        return int(match.group(1)), match.group(2)
    return None, text.strip() or None


def parse_rate(text):
    """``"100 Gb/sec (4X EDR)"`` -> 100.0, ``"2.5 Gb/sec (1X SDR)"`` -> 2.5."""
    if not text:
        return None
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec", text)
    return float(match.group(1)) if match else None


def _port_names(devdir):
    try:
        return sorted(os.listdir(os.path.join(devdir, "ports")), key=lambda p: int(p) if p.isdigit() else 0)
    except (IOError, OSError):
        return []


def scan_port(root, name, port):
    """State of port ``port`` of RDMA device ``name``, or None when that port does not exist."""
    pdir = root_path(root, INFINIBAND, name, "ports", str(port))
    if not os.path.isdir(pdir):
        return None
    state_num, state = parse_sysfs_state(read_attr(os.path.join(pdir, "state")))
    rate = read_attr(os.path.join(pdir, "rate"))
    return {
        "state": state,
        "state_num": state_num,
        "phys_state": parse_sysfs_state(read_attr(os.path.join(pdir, "phys_state")))[1],
        "link_layer": read_attr(os.path.join(pdir, "link_layer")),
        "rate": rate,
        "rate_gbps": parse_rate(rate),
        "netdev": read_attr(os.path.join(pdir, "gid_attrs", "ndevs", "0")) or None,
    }


def scan_rdma_device(root, name, warn=None):
    """One RDMA device: kind (hca, soft-roce, soft-iwarp, unknown), driver, PCI address,
    netdevs and ports. ``warn(text)`` receives what the caller should know (a soft device
    whose netdev has no PCI function, a device with neither link)."""
    warn = warn or (lambda text: None)
    devdir = root_path(root, INFINIBAND, name)
    node_type = parse_sysfs_state(read_attr(os.path.join(devdir, "node_type")))[1]
    device_link = os.path.join(devdir, "device")
    parent = read_attr(os.path.join(devdir, "parent"))
    netdevs = []
    if os.path.lexists(device_link):
        kind = "hca"
        address = pci_address_of(root, device_link)
        driver = link_basename(os.path.join(device_link, "driver"))
        try:
            netdevs = sorted(os.listdir(os.path.join(device_link, "net")))
        except (IOError, OSError):
            netdevs = []
        parent = None
    elif parent:
        if node_type == "RNIC" or name.startswith("siw"):
            kind, driver = "soft-iwarp", "siw"
        else:
            kind, driver = "soft-roce", "rdma_rxe"
        address = pci_address_of(root, root_path(root, "sys/class/net", parent, "device"))
        netdevs = [parent]
        if address is None:
            warn("rdma %s: parent netdev %s has no PCI device; no GPU pair for it" % (name, parent))
    else:
        kind, driver, address = "unknown", None, None
        warn("rdma %s: neither a device link nor a parent netdev" % name)
    ports = {}
    for num in _port_names(devdir):
        ports[str(num)] = scan_port(root, name, num)
        netdev = ports[str(num)]["netdev"]
        if netdev and netdev not in netdevs:
            netdevs.append(netdev)
    return {
        "name": name,
        "kind": kind,
        "driver": driver,
        "pci_address": address,
        "parent_netdev": parent,
        "node_type": node_type,
        "node_guid": read_attr(os.path.join(devdir, "node_guid")),
        "fw_ver": read_attr(os.path.join(devdir, "fw_ver")) or None,
        "netdevs": netdevs,
        "ports": ports,
    }


def scan_rdma_devices(root="/", warn=None):
    """Every device of ``/sys/class/infiniband`` by name ([] when the class is absent).
    A device that cannot be read is left out, with a ``warn`` naming it."""
    warn = warn or (lambda text: None)
    base = root_path(root, INFINIBAND)
    try:
        names = sorted(os.listdir(base))
    except (IOError, OSError):
        return []
    devices = []
    for name in names:
        try:
            devices.append(scan_rdma_device(root, name, warn))
        except Exception as exc:  # one odd device must not hide the others
            warn("rdma %s: skipped (%s: %s)" % (name, type(exc).__name__, exc))
    return devices
