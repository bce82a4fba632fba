#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Plan, and with state applied set, the RoCE QoS of each RoCE port (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_roce_qos
short_description: Read, plan and set the RoCE QoS of RDMA ports (trust, PFC, ECN/CNP, MTU)
description:
  - Finds the RDMA ports under C(<root>/sys/class/infiniband) whose C(link_layer) is C(Ethernet) (RoCE) and their
    netdev (C(ports/<n>/gid_attrs/ndevs/0), else the device's C(net/) folder, else soft-RoCE's C(parent) file).
    InfiniBand ports are returned in C(ports_skipped) with the reason, never changed.
  - Reads only what is wanted, per port, in C(LC_ALL=C) and list form. Trust mode and PFC per priority from
    C(mlnx_qos -i <netdev>) (package C(mlnx-tools) of DOCA-Host / MLNX_OFED); ECN per priority from
    C(/sys/class/net/<netdev>/ecn/roce_np|roce_rp/enable/<0-7>) and the CNP DSCP and 802.1p priority from
    C(/sys/class/net/<netdev>/ecn/roce_np/cnp_dscp|cnp_802p_prio) (the mlx5 files of NVIDIA's "Explicit Congestion
    Notification" page); the MTU from C(/sys/class/net/<netdev>/mtu).
  - A value a port does not expose (no C(mlnx_qos), an output without a trust state or PFC table, no C(ecn/) folder)
    is reported in C(not_exposed) and left alone, unless the port was named in O(interfaces) and O(state=applied);
    then the module fails before any change, naming the port, the value and why.
  - A trust, PFC or MTU change re-programs a port that may carry traffic, so it is returned in C(disruption); ECN and
    CNP changes are changes only.
  - With O(state=applied) runs C(mlnx_qos -i <netdev> --trust <mode>), C(mlnx_qos -i <netdev> --pfc <8 values>),
    C(ip link set dev <netdev> mtu <n>) and writes the ECN/CNP files, then reads the port again and fails unless
    every value set is in place. None of these survive a reboot or a driver reload; the calling role installs a boot
    unit that sets them again.
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  trust:
    description: Priority trust state, C(dscp) (RoCEv2 routed fabrics) or C(pcp). Unset, left alone and not read.
    type: str
    choices: [pcp, dscp]
  pfc_priorities:
    description:
      - The priorities with PFC on (C([3]) is the usual RoCE class); every other priority gets PFC off. C([]) turns
        PFC off everywhere. Unset, left alone and not read.
    type: list
    elements: int
  ecn_priorities:
    description:
      - The priorities with ECN on at both the notification point (C(roce_np)) and the reaction point (C(roce_rp));
        every other priority gets it off. Unset, left alone and not read.
    type: list
    elements: int
  cnp_dscp:
    description: DSCP of the congestion notification packets the port sends (0-63). Unset, left alone.
    type: int
  cnp_802p_prio:
    description: 802.1p priority of the congestion notification packets (0-7). Unset, left alone.
    type: int
  mtu:
    description: The netdev's MTU. Unset, left alone.
    type: int
  interfaces:
    description:
      - Only these ports, by netdev (C(enp23s0f0np0)) or RDMA device (C(mlx5_0)). Empty, every RoCE port.
      - A name that is no RoCE port of the host is reported in C(not_exposed); with O(state=applied) it fails the
        module before any change.
    type: list
    elements: str
    default: []
  state:
    description: C(planned) reads and compares only; C(applied) sets what differs (check mode plans).
    type: str
    choices: [planned, applied]
    default: planned
  root:
    description: Where the host's C(/sys) is mounted below (C(/) on a live host; a fake tree in tests).
    type: path
    default: /
extends_documentation_fragment:
  - gpudirect_attributes
attributes:
  check_mode:
    support: full
    description: Reads and compares; returns the same plan and sets nothing.
  diff_mode:
    support: none
    description: Returns no diff; the plan's C(changes) say what differs.
notes:
  - Needs root (C(become)) to set values; C(mlnx_qos) also needs it to read on some drivers.
  - Debian and Ubuntu ship no C(mlnx-tools) package; C(mlnx_qos) comes with DOCA-Host or MLNX_OFED.
requirements:
  - Linux sysfs; C(mlnx_qos) for trust and PFC; C(ip) (iproute2) for the MTU.
"""

EXAMPLES = r"""
- name: Plan DSCP trust and lossless priority 3 on every RoCE port
  gpudirect_roce_qos:
    trust: dscp
    pfc_priorities: [3]
    ecn_priorities: [3]
    cnp_dscp: 48
    mtu: 9000
  check_mode: true
  register: plan

- name: Set them on two named ports
  gpudirect_roce_qos:
    trust: dscp
    pfc_priorities: [3]
    interfaces: [enp23s0f0np0, enp23s0f1np1]
    state: applied
  become: true
"""

RETURN = r"""
wanted:
  description: False when no value is wanted (nothing was read).
  returned: always
  type: bool
ports:
  description:
    - One entry per RoCE port looked at, C(device), C(port), C(netdev), C(netdev_from), C(current) (the values read),
      C(wanted), C(to_set) (the values that differ) and C(not_exposed) (value -> reason).
  returned: always
  type: list
  elements: dict
ports_skipped:
  description: Ports left out, C(device), C(port), C(netdev), C(reason) (InfiniBand link layer, not named, no netdev).
  returned: always
  type: list
  elements: dict
changes:
  description: One sentence per port with values to set; empty when every wanted value is in place.
  returned: always
  type: list
  elements: str
disruption:
  description: One sentence per port whose trust, PFC or MTU changes (traffic on the port is interrupted).
  returned: always
  type: list
  elements: str
not_exposed:
  description: "C(<netdev>: <value>: <reason>) for each wanted value a port does not expose."
  returned: always
  type: list
  elements: str
tool_missing:
  description: The sentence saying mlnx_qos is not installed, when trust or PFC is wanted and it is not; else empty.
  returned: always
  type: str
skip_reason:
  description: Why no port was looked at (nothing wanted, no RoCE port), else empty.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible.module_utils import gpudirect_roce_qos as qos
from ansible.module_utils.gpudirect_host import C_LOCALE

TOOL_MISSING = ("mlnx_qos is not installed (package mlnx-tools of DOCA-Host / MLNX_OFED; Debian ships none): trust "
                "and PFC cannot be read or set")


def run_mlnx_qos(module, tool, netdev, *extra):
    argv = [tool, "-i", netdev] + list(extra)
    rc, out, err = module.run_command(argv, environ_update=C_LOCALE)
    return rc, out, err


def read_port(module, tool, root, netdev, want):
    current, missing = qos.read_sysfs_values(root, netdev, want)
    if want.get("trust") is not None or want.get("pfc_priorities") is not None:
        if tool is None:
            for key in ("trust", "pfc_priorities"):
                if want.get(key) is not None:
                    missing["trust" if key == "trust" else "pfc"] = TOOL_MISSING
        else:
            rc, out, err = run_mlnx_qos(module, tool, netdev)
            parsed = qos.parse_mlnx_qos(out)
            why = "; ".join(parsed["errors"]) or ""
            if rc != 0:
                last = ((out + err).strip().splitlines() or ["no output"])[-1]
                why = "mlnx_qos -i %s failed (rc %s): %s" % (netdev, rc, last)
            if want.get("trust") is not None:
                if parsed["trust"] is not None and rc == 0:
                    current["trust"] = parsed["trust"]
                else:
                    missing["trust"] = why or "mlnx_qos printed no trust state"
            if want.get("pfc_priorities") is not None:
                if parsed["pfc"] is not None and rc == 0:
                    current["pfc"] = qos.priorities_of(parsed["pfc"])
                else:
                    missing["pfc"] = why or "mlnx_qos printed no PFC table"
    return current, missing


def write(path, value):
    with open(path, "w") as handle:
        handle.write("%s\n" % value)


def apply_port(module, tool, root, netdev, to_set):
    net = os.path.join(root, "sys", "class", "net", netdev)
    for key, value in sorted(to_set.items()):
        if key == "trust":
            rc, out, err = run_mlnx_qos(module, tool, netdev, "--trust", value)
        elif key == "pfc":
            rc, out, err = run_mlnx_qos(module, tool, netdev, "--pfc", qos.pfc_arg(value))
        elif key == "mtu":
            rc, out, err = module.run_command(["ip", "link", "set", "dev", netdev, "mtu", str(value)],
                                              environ_update=C_LOCALE)
        else:
            rc, out, err = 0, "", ""
            try:
                if key in ("ecn_np", "ecn_rp"):
                    point = "roce_" + key[-2:]
                    for p in qos.PRIORITIES:
                        write(os.path.join(net, "ecn", point, "enable", str(p)), 1 if p in value else 0)
                else:
                    write(os.path.join(net, "ecn", "roce_np", key), value)
            except (IOError, OSError) as exc:
                rc, err = 1, str(exc)
        if rc != 0:
            module.fail_json(msg="setting %s on %s failed (rc %s): %s. Run the play with become (the values need "
                                 "root) and check that the driver is up (ip link show %s)."
                                 % (qos.describe(key, value), netdev, rc, (err or out).strip(), netdev))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            trust=dict(type="str", choices=["pcp", "dscp"]),
            pfc_priorities=dict(type="list", elements="int"),
            ecn_priorities=dict(type="list", elements="int"),
            cnp_dscp=dict(type="int"),
            cnp_802p_prio=dict(type="int"),
            mtu=dict(type="int"),
            interfaces=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["planned", "applied"], default="planned"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    want = dict((k, p[k]) for k in ("trust", "pfc_priorities", "ecn_priorities", "cnp_dscp", "cnp_802p_prio", "mtu"))
    result = dict(changed=False, wanted=any(v is not None for v in want.values()), ports=[], ports_skipped=[],
                  changes=[], disruption=[], not_exposed=[], tool_missing="", skip_reason="")
    errors = qos.validate_wanted(want)
    if errors:
        module.fail_json(msg="gpudirect_roce_qos: " + "; ".join(errors) + ". Fix the variables; nothing was changed.",
                         **result)
    if not result["wanted"]:
        result["skip_reason"] = "no RoCE QoS value is wanted: no port read, nothing changed"
        module.exit_json(**result)

    strict = p["state"] == "applied" and not module.check_mode
    named = list(p["interfaces"])
    tool = None
    if want["trust"] is not None or want["pfc_priorities"] is not None:
        tool = module.get_bin_path("mlnx_qos")
        if tool is None:
            result["tool_missing"] = TOOL_MISSING

    seen = set()
    for port in qos.find_ports(p["root"]):
        label = "%s port %s" % (port["device"], port["port"])
        if named and port["netdev"] not in named and port["device"] not in named:
            result["ports_skipped"].append(dict(port, reason="not named in interfaces"))
            continue
        seen.update([port["device"], port["netdev"]])
        if port["link_layer"] != "Ethernet":
            reason = ("%s link layer: RoCE QoS (trust, PFC, ECN) is for Ethernet ports; an InfiniBand fabric's QoS "
                      "is the subnet manager's (service levels)" % (port["link_layer"] or "unknown"))
            result["ports_skipped"].append(dict(port, reason=reason))
            continue
        if not port["netdev"]:
            reason = "no netdev found for %s (no gid_attrs/ndevs/0, no device/net/, no parent)" % label
            result["ports_skipped"].append(dict(port, reason=reason))
            continue
        current, missing = read_port(module, tool, p["root"], port["netdev"], want)
        to_set = qos.compare(current, want)
        entry = dict(port, current=current, to_set=to_set, not_exposed=missing,
                     wanted=dict((k, v) for k, v in want.items() if v is not None))
        result["ports"].append(entry)
        for key in sorted(missing):
            result["not_exposed"].append("%s: %s: %s" % (port["netdev"], key, missing[key]))
        if to_set:
            result["changes"].append("%s (%s): set %s" % (port["netdev"], label, ", ".join(
                qos.describe(k, v) for k, v in sorted(to_set.items()))))
            disruptive = [k for k in sorted(to_set) if k in qos.DISRUPTIVE]
            if disruptive:
                result["disruption"].append("%s (%s): %s changes while the port may carry traffic" % (
                    port["netdev"], label, ", ".join(qos.describe(k, to_set[k]) for k in disruptive)))

    for name in named:
        if name not in seen:
            result["not_exposed"].append("%s: port: no RDMA port of that netdev or device name on the host" % name)
    if not result["ports"] and not named:
        result["skip_reason"] = ("no RoCE port on the host (no RDMA device with an Ethernet link layer under "
                                 "/sys/class/infiniband)")

    if strict and named and result["not_exposed"]:
        module.fail_json(msg="gpudirect_roce_qos: the ports named in interfaces do not expose what is wanted: %s. "
                             "Install mlnx-tools (DOCA-Host / MLNX_OFED) or leave the value unset; nothing was "
                             "changed." % "; ".join(result["not_exposed"]), **result)
    if p["state"] != "applied" or module.check_mode or not result["changes"]:
        module.exit_json(**result)

    for entry in result["ports"]:
        if entry["to_set"]:
            apply_port(module, tool, p["root"], entry["netdev"], entry["to_set"])
    result["changed"] = True
    for entry in result["ports"]:
        if not entry["to_set"]:
            continue
        current, _missing = read_port(module, tool, p["root"], entry["netdev"], want)
        left = qos.compare(current, want)
        if left:
            module.fail_json(msg="gpudirect_roce_qos: %s still differs after the set: %s (read back %s). The driver "
                                 "refused or changed it; see dmesg." % (entry["netdev"], ", ".join(
                                     qos.describe(k, v) for k, v in sorted(left.items())), current), **result)
        entry["current"] = current
    module.exit_json(**result)


if __name__ == "__main__":
    main()
