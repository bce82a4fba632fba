# -*- coding: utf-8 -*-
"""RoCE QoS of a port (issue #32, outcome 2): parse ``mlnx_qos -i <netdev>``, read the mlx5 ECN/CNP
sysfs files, find the RoCE ports under /sys/class/infiniband, and compare with the wanted values.

Sources:

* ``mlnx_qos`` is Mellanox/NVIDIA's tool from the ``mlnx-tools`` package (DOCA-Host / MLNX_OFED);
  its output layout is ``pretty_print()`` in https://github.com/Mellanox/mlnx-tools
  (python/mlnx_qos): ``Priority trust state: <pcp|dscp|none>`` ("none" after "Priority trust state
  is not supported on your system"), then ``PFC configuration:`` with a ``priority 0 .. 7`` row and
  an ``enabled`` row of eight 0/1 values (and, where the driver has buffers, a ``buffer`` row).
  The parser is module_utils/gpudirect_nic_config.py's (its captures: tests/fixtures/nic_config/);
  more real and malformed outputs: tests/fixtures/roce_qos/ (README.md names each source).
* ECN and CNP: NVIDIA's "Explicit Congestion Notification" page of the DOCA/MLNX_OFED docs
  (https://docs.nvidia.com/doca/sdk/explicit+congestion+notification/index.html):
  ``/sys/class/net/<netdev>/ecn/<roce_np|roce_rp>/enable/<priority 0..7>`` holds 0 or 1;
  the notification point's ``cnp_dscp`` and ``cnp_802p_prio`` (``/sys/class/net/<netdev>/ecn/
  roce_np/``) are the DSCP and 802.1p priority of the CNPs the port sends.
* RDMA-CM's defaults per port (issue #44, outcome 4): module_utils/gpudirect_rdma_cm.py (the kernel's configfs
  ``/sys/kernel/config/rdma_cm/<device>/ports/<n>/default_roce_mode|default_roce_tos``); the profile's DSCP
  (``dscp``) gives RoCE v2 and ToS ``dscp << 2``.
* A RoCE port is a port of an RDMA device whose ``ports/<n>/link_layer`` reads ``Ethernet``; its
  netdev is ``ports/<n>/gid_attrs/ndevs/0`` (the kernel's GID table), else the device's ``net/``
  folder (mlx5: the PCI function's netdev), else the ``parent`` file soft-RoCE (rdma_rxe) writes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.module_utils import gpudirect_rdma_cm as rdma_cm
from ansible.module_utils.gpudirect_host import read_attr as _read
from ansible.module_utils.gpudirect_nic_config import parse_mlnx_qos as _nic_parse_mlnx_qos

PRIORITIES = tuple(range(8))
TRUST_VALUES = ("pcp", "dscp")
ECN_POINTS = ("roce_np", "roce_rp")

_UNSUPPORTED = re.compile(r"^\s*(.*(?:is|are) not supported on your system!?)\s*$")


def parse_mlnx_qos(text):
    """``mlnx_qos -i <netdev>`` output -> dict, for the plan.

    The reading itself is ``parse_mlnx_qos`` of module_utils/gpudirect_nic_config.py (the project's one
    parser of this output, strict: it names the line it cannot read); this wraps it for a plan that must
    go on per port. ``trust``: ``pcp``/``dscp`` or ``None``; ``pfc``: the eight 0/1 values of the
    ``enabled`` row (index = priority) or ``None``; ``dcbx``, ``cable_len``; ``dscp2prio`` (DSCP -> priority,
    as the port maps them under DSCP trust; ``None`` when not printed); ``errors``: sentences for
    what could not be read. The tool's own "... is not supported on your system" lines (a driver without
    the trust file, a netdev without DCB) are taken out first and given as the reason.
    """
    if not isinstance(text, str):
        raise TypeError("mlnx_qos output must be text, got %r" % (text,))
    result = {"dcbx": None, "trust": None, "pfc": None, "cable_len": None, "dscp2prio": None, "errors": []}
    unsupported, kept = [], []
    for line in text.splitlines():
        match = _UNSUPPORTED.match(line)
        if match:
            unsupported.append(match.group(1))
        else:
            kept.append(line)
    trust_none = any(re.match(r"^\s*Priority trust state:\s*none\s*$", line) for line in kept)
    if trust_none:
        # the tool prints "none" after it failed to read the trust state: read the rest without it
        kept = [line for line in kept if not re.match(r"^\s*Priority trust state:", line)] + \
            ["Priority trust state: pcp"]
    try:
        parsed = _nic_parse_mlnx_qos("\n".join(kept))
    except ValueError as exc:
        reason = "; ".join(unsupported) if unsupported else "could not read mlnx_qos output (%s)" % exc
        result["errors"].append(reason)
        return result
    result["dcbx"] = parsed["dcbx_mode"]
    result["cable_len"] = parsed["cable_len"]
    result["pfc"] = [1 if flag else 0 for flag in parsed["pfc"]["enabled"]]
    result["dscp2prio"] = parsed["dscp2prio"]
    if trust_none:
        result["errors"].append("mlnx_qos reads the trust state as none: "
                                + ("; ".join(u for u in unsupported if "trust" in u) or "no trust state on this port"))
    elif parsed["trust"] not in TRUST_VALUES:
        result["errors"].append("mlnx_qos printed an unknown trust state %r" % parsed["trust"])
    else:
        result["trust"] = parsed["trust"]
    return result


def pfc_list(priorities):
    """[3] -> [0, 0, 0, 1, 0, 0, 0, 0] (the ``enabled`` row for these priorities)."""
    return [1 if p in priorities else 0 for p in PRIORITIES]


def pfc_arg(priorities):
    """[3] -> '0,0,0,1,0,0,0,0', the value of ``mlnx_qos --pfc``."""
    return ",".join(str(v) for v in pfc_list(priorities))


def priorities_of(row):
    """[0, 0, 0, 1, 0, 0, 0, 0] -> [3]."""
    return [p for p, v in zip(PRIORITIES, row) if v]


def validate_wanted(wanted):
    """The module's wanted values -> a list of error sentences ([] when good). ``None`` is "leave alone"."""
    errors = []
    trust = wanted.get("trust")
    if trust is not None and trust not in TRUST_VALUES:
        errors.append("trust must be pcp or dscp (mlnx_qos --trust), got %r" % (trust,))
    for key in ("pfc_priorities", "ecn_priorities"):
        value = wanted.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or any(isinstance(p, bool) or not isinstance(p, int) or p not in PRIORITIES
                                              for p in value) or len(set(value)) != len(value):
            errors.append("%s must be a list of distinct priorities 0-7 (an empty list turns it off on every "
                          "priority), got %r" % (key, value))
    for key, high in (("cnp_dscp", 63), ("cnp_802p_prio", 7)):
        value = wanted.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high):
            errors.append("%s must be a number 0-%d, got %r" % (key, high, value))
    mtu = wanted.get("mtu")
    if mtu is not None and (isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 9978):
        errors.append("mtu must be a number 68-9978 (the netdev's MTU; ConnectX takes up to 9978), got %r" % (mtu,))
    dscp = wanted.get("dscp")
    if dscp is not None and not rdma_cm.is_dscp(dscp):
        errors.append("dscp must be a number 0-63 (the DSCP of the RoCE traffic; RDMA-CM's default ToS is dscp << 2), "
                      "got %r" % (dscp,))
    if not isinstance(wanted.get("rdma_cm", True), bool):
        errors.append("rdma_cm must be true or false, got %r" % (wanted.get("rdma_cm"),))
    return errors


def rdma_cm_wanted(wanted):
    """The RDMA-CM defaults the wanted values ask for: {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": dscp << 2} when
    ``rdma_cm`` is on (the default) and ``dscp`` is set, else {}. Call after validate_wanted."""
    return rdma_cm.wanted(wanted.get("dscp"), wanted.get("rdma_cm", True))


# the keys of a port's report for the RDMA-CM defaults, and the configfs attribute each is read from
RDMA_CM_KEYS = (("rdma_cm_mode", "roce_mode", "default_roce_mode"), ("rdma_cm_tos", "roce_tos", "default_roce_tos"))


def rdma_cm_class(tos, trust, dscp2prio, pfc_priorities):
    """Where RDMA-CM traffic of ToS ``tos`` lands on a port that trusts DSCP: {"dscp", "priority", "pfc"}
    (``pfc``: the priority has PFC on), from the port's dscp2prio map (mlnx_qos). None when the port does not
    classify by DSCP (trust pcp) or the map or the PFC priorities are unknown."""
    if trust != "dscp" or not dscp2prio or pfc_priorities is None:
        return None
    dscp = rdma_cm.split_tos(tos)["dscp"]
    priority = dscp2prio.get(dscp)
    if priority is None:
        return None
    return {"dscp": dscp, "priority": priority, "pfc": priority in pfc_priorities}


def find_ports(root):
    """RDMA ports under <root>/sys/class/infiniband -> list of dicts (device, port, link_layer, netdev,
    netdev_from), sorted by device and port. ``netdev`` is None where no netdev is found."""
    base = os.path.join(root, "sys", "class", "infiniband")
    ports = []
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return ports
    for device in devices:
        ports_dir = os.path.join(base, device, "ports")
        try:
            numbers = sorted(os.listdir(ports_dir), key=lambda n: int(n) if n.isdigit() else 0)
        except OSError:
            continue
        for number in numbers:
            pdir = os.path.join(ports_dir, number)
            link_layer = _read(os.path.join(pdir, "link_layer"))
            netdev, source = None, None
            ndev = _read(os.path.join(pdir, "gid_attrs", "ndevs", "0"))
            if ndev:
                netdev, source = ndev, "ports/%s/gid_attrs/ndevs/0" % number
            if netdev is None:
                try:
                    nets = sorted(os.listdir(os.path.join(base, device, "device", "net")))
                except OSError:
                    nets = []
                if len(nets) == 1 or (nets and number.isdigit() and int(number) <= len(nets)):
                    netdev = nets[0] if len(nets) == 1 else nets[int(number) - 1]
                    source = "device/net/"
            if netdev is None:
                parent = _read(os.path.join(base, device, "parent"))
                if parent:
                    netdev, source = parent, "parent"
            ports.append({"device": device, "port": int(number) if number.isdigit() else number,
                          "link_layer": link_layer, "netdev": netdev, "netdev_from": source})
    return ports


def read_sysfs_values(root, netdev, want):
    """MTU and the ECN/CNP values of a netdev, only those ``want`` asks for -> (current, not_exposed).

    ``current``: mtu (int), ecn_np / ecn_rp (the priorities with enable/<p> = 1), cnp_dscp, cnp_802p_prio.
    ``not_exposed``: {value: reason} for each wanted value the port has no file for.
    """
    net = os.path.join(root, "sys", "class", "net", netdev)
    current, missing = {}, {}
    if want.get("mtu") is not None:
        mtu = _read(os.path.join(net, "mtu"))
        if mtu is not None and mtu.isdigit():
            current["mtu"] = int(mtu)
        else:
            missing["mtu"] = "no readable %s" % os.path.join("/sys/class/net", netdev, "mtu")
    if want.get("ecn_priorities") is not None:
        for point in ECN_POINTS:
            enabled, absent = [], []
            for p in PRIORITIES:
                value = _read(os.path.join(net, "ecn", point, "enable", str(p)))
                if value is None:
                    absent.append(p)
                elif value == "1":
                    enabled.append(p)
            if absent:
                missing["ecn_" + point[-2:]] = ("no /sys/class/net/%s/ecn/%s/enable/<0-7> (the mlx5 driver's ECN "
                                                "files; soft-RoCE and other drivers have none)" % (netdev, point))
            else:
                current["ecn_" + point[-2:]] = enabled
    for key in ("cnp_dscp", "cnp_802p_prio"):
        if want.get(key) is None:
            continue
        value = _read(os.path.join(net, "ecn", "roce_np", key))
        if value is not None and value.isdigit():
            current[key] = int(value)
        else:
            missing[key] = "no /sys/class/net/%s/ecn/roce_np/%s (mlx5 only)" % (netdev, key)
    return current, missing


def compare(current, want):
    """The values to set on a port: {value: wanted} for each wanted value read and not in place."""
    to_set = {}
    if want.get("trust") is not None and "trust" in current and current["trust"] != want["trust"]:
        to_set["trust"] = want["trust"]
    if want.get("pfc_priorities") is not None and "pfc" in current \
            and current["pfc"] != sorted(want["pfc_priorities"]):
        to_set["pfc"] = sorted(want["pfc_priorities"])
    if want.get("mtu") is not None and "mtu" in current and current["mtu"] != want["mtu"]:
        to_set["mtu"] = want["mtu"]
    if want.get("ecn_priorities") is not None:
        for key in ("ecn_np", "ecn_rp"):
            if key in current and current[key] != sorted(want["ecn_priorities"]):
                to_set[key] = sorted(want["ecn_priorities"])
    for key in ("cnp_dscp", "cnp_802p_prio"):
        if want.get(key) is not None and key in current and current[key] != want[key]:
            to_set[key] = want[key]
    for key, value in sorted(rdma_cm_wanted(want).items()):
        if key in current and current[key] != value:
            to_set[key] = value
    return to_set


# a change of these re-programs the port's classification or its frame size while traffic flows
DISRUPTIVE = ("trust", "pfc", "mtu")


def describe(key, value):
    """One value as the plan's sentences write it."""
    if key == "pfc":
        return "PFC on priorities %s" % (",".join(str(p) for p in value) or "none")
    if key in ("ecn_np", "ecn_rp"):
        return "ECN %s on priorities %s" % ("notification point" if key == "ecn_np" else "reaction point",
                                            ",".join(str(p) for p in value) or "none")
    if key == "rdma_cm_mode":
        return "RDMA-CM default RoCE mode %s" % value
    if key == "rdma_cm_tos":
        return "RDMA-CM default ToS %s (DSCP %d)" % (value, rdma_cm.split_tos(value)["dscp"])
    return "%s %s" % (key, value)
