#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Plan, and with state applied set, the RoCE QoS of each RoCE port (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_roce_qos
short_description: Read, plan and set the RoCE QoS of RDMA ports (trust, PFC, ECN/CNP, MTU, RDMA-CM defaults)
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
  - With O(dscp) (and O(rdma_cm), the default) the RDMA connection manager's defaults of each RoCE port follow the
    profile - RoCE mode C(RoCE v2) and ToS O(dscp) << 2, so that connections whose application sets no ToS carry the
    profile's DSCP - read from and written to the kernel's configfs
    C(/sys/kernel/config/rdma_cm/<device>/ports/<port>/default_roce_mode|default_roce_tos). The kernel shows them only
    in a configfs group made with C(mkdir /sys/kernel/config/rdma_cm/<device>); a group the module makes to read or
    write (check mode included) is removed again right after, as NVIDIA's C(cma_roce_tos) does, since a group left
    there keeps the rdma_cm module from being unloaded. Without C(/sys/kernel/config/rdma_cm) the plan says so;
    O(state=applied) mounts configfs (C(mount -t configfs configfs /sys/kernel/config)) and loads rdma_cm
    (C(modprobe rdma_cm)) where one of them is missing, and fails before any other change, naming what is missing and
    O(rdma_cm), when the directory still does not appear (a kernel without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS).
  - A trust, PFC or MTU change re-programs a port that may carry traffic, so it is returned in C(disruption); ECN,
    CNP and RDMA-CM changes are changes only (the RDMA-CM defaults apply to connections made after the change).
  - With O(state=applied) runs C(mlnx_qos -i <netdev> --trust <mode>), C(mlnx_qos -i <netdev> --pfc <8 values>),
    C(ip link set dev <netdev> mtu <n>) and writes the ECN/CNP and RDMA-CM files, then reads the port again and fails
    unless every value set is in place. None of these survive a reboot or a driver reload; the calling role installs
    a boot unit that sets them again.
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
  dscp:
    description:
      - The DSCP (0-63) of the profile's RoCE traffic. With O(rdma_cm), each RoCE port's RDMA-CM defaults become RoCE
        v2 and ToS O(dscp) << 2 (C(26) gives ToS C(104)). Unset, the RDMA-CM defaults are left alone and not read.
    type: int
  rdma_cm:
    description:
      - Make the RDMA-CM defaults follow O(dscp). False leaves them alone and reads nothing of RDMA-CM.
    type: bool
    default: true
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
  - Needs root (C(become)) to set values; C(mlnx_qos) also needs it to read on some drivers, the RDMA-CM defaults
    always (the configfs group is made with C(mkdir)).
  - Debian and Ubuntu ship no C(mlnx-tools) package; C(mlnx_qos) comes with DOCA-Host or MLNX_OFED.
requirements:
  - Linux sysfs; C(mlnx_qos) for trust and PFC; C(ip) (iproute2) for the MTU; for the RDMA-CM defaults the kernel's
    rdma_cm configfs (Linux 4.11 or later with CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS), C(mount) and C(modprobe)
    where configfs is not mounted or rdma_cm not loaded.
"""

EXAMPLES = r"""
- name: Plan DSCP trust and lossless priority 3 on every RoCE port
  gpudirect_roce_qos:
    trust: dscp
    pfc_priorities: [3]
    ecn_priorities: [3]
    cnp_dscp: 48
    mtu: 9000
    dscp: 26
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
    - The RDMA-CM defaults are C(rdma_cm_mode) (C(RoCE v2) or C(IB/RoCE v1)) and C(rdma_cm_tos) (0-255) in
      C(current), C(wanted) and C(to_set); C(wanted) also holds C(dscp).
    - C(rdma_cm_class), where the port trusts DSCP and mlnx_qos printed its dscp2prio map, is where RDMA-CM traffic
      lands, C(dscp), C(priority) and C(pfc) (true when that priority has PFC on, as wanted or as read); else null.
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
rdma_cm:
  description:
    - The host's side of the RDMA-CM defaults, C({}) when they are not wanted. C(wanted) (C(rdma_cm_mode),
      C(rdma_cm_tos)); C(ready) (C(/sys/kernel/config/rdma_cm) is there); C(steps), what the module does first or
      would do (C(mount configfs), C(load rdma_cm)); C(done), the steps it did; C(problem), what is missing, or empty.
  returned: always
  type: dict
  sample: {"wanted": {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104}, "ready": true, "steps": [], "done": [],
           "problem": ""}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible.module_utils import gpudirect_rdma_cm as rdma_cm
from ansible.module_utils import gpudirect_roce_qos as qos
from ansible.module_utils.gpudirect_host import C_LOCALE

TOOL_MISSING = ("mlnx_qos is not installed (package mlnx-tools of DOCA-Host / MLNX_OFED; Debian ships none): trust "
                "and PFC cannot be read or set")
RDMA_CM_OFF = ("set rdma_cm: false (the role's gpudirect_roce_qos_rdma_cm) to leave the RDMA-CM defaults alone, or "
               "unset dscp (gpudirect_roce_qos_dscp)")


def run_mlnx_qos(module, tool, netdev, *extra):
    argv = [tool, "-i", netdev] + list(extra)
    rc, out, err = module.run_command(argv, environ_update=C_LOCALE)
    return rc, out, err


def read_rdma_cm(root, port, cm_want, cm_state, current, missing):
    """The port's RDMA-CM defaults into ``current`` (rdma_cm_mode, rdma_cm_tos), or the reason into ``missing``.
    Nothing is read before rdma_cm's configfs directory is there (``cm_state['ready']``)."""
    if not cm_want or not cm_state["ready"]:
        if cm_want and not cm_state["steps"]:
            for key in cm_want:
                missing[key] = cm_state["problem"]
        return
    read = rdma_cm.read_defaults(root, port["device"], [port["port"]])
    values = read["ports"].get(str(port["port"]), {})
    errors = read["errors"].get(str(port["port"]), {})
    for key, value_key, attr in qos.RDMA_CM_KEYS:
        if value_key in values:
            current[key] = values[value_key]
        else:
            missing[key] = errors.get(attr) or read["group"] or "not read"


def read_port(module, tool, root, port, want, cm_want=None, cm_state=None):
    netdev = port["netdev"]
    current, missing = qos.read_sysfs_values(root, netdev, want)
    dscp2prio = None
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
            if rc == 0:
                dscp2prio = parsed["dscp2prio"]
    if cm_want:
        read_rdma_cm(root, port, cm_want, cm_state, current, missing)
    return current, missing, dscp2prio


def write(path, value):
    with open(path, "w") as handle:
        handle.write("%s\n" % value)


def apply_port(module, tool, root, port, to_set):
    netdev = port["netdev"]
    net = os.path.join(root, "sys", "class", "net", netdev)
    cm_values = {}
    for key, value in sorted(to_set.items()):
        if key == "trust":
            rc, out, err = run_mlnx_qos(module, tool, netdev, "--trust", value)
        elif key == "pfc":
            rc, out, err = run_mlnx_qos(module, tool, netdev, "--pfc", qos.pfc_arg(value))
        elif key == "mtu":
            rc, out, err = module.run_command(["ip", "link", "set", "dev", netdev, "mtu", str(value)],
                                              environ_update=C_LOCALE)
        elif key in ("rdma_cm_mode", "rdma_cm_tos"):
            cm_values["roce_mode" if key == "rdma_cm_mode" else "roce_tos"] = value
            continue
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
    if cm_values:
        problem = rdma_cm.write_defaults(root, port["device"], port["port"], cm_values)
        if problem:
            module.fail_json(msg="setting the RDMA-CM defaults of %s port %s (%s) failed: %s. Run the play with become; "
                                 "%s." % (port["device"], port["port"], netdev, problem, RDMA_CM_OFF))


def rdma_cm_state(root, cm_want):
    """rdma_cm's configfs on this host, as the result's ``rdma_cm`` reports it ({} when not wanted)."""
    if not cm_want:
        return {}
    found = rdma_cm.availability(root)
    return {"wanted": cm_want, "ready": found["ready"], "steps": found["steps"], "done": [],
            "problem": found["problem"]}


def prepare_rdma_cm(module, root, cm_state):
    """Mount configfs and load rdma_cm, as far as needed; fail naming what is still missing."""
    for step in cm_state["steps"]:
        if step == "mount configfs":
            argv = ["mount", "-t", "configfs", "configfs", os.path.join(root, rdma_cm.CONFIGFS.lstrip("/"))]
        else:
            argv = ["modprobe", "rdma_cm"]
        rc, out, err = module.run_command(argv, environ_update=C_LOCALE)
        if rc != 0:
            module.fail_json(msg="gpudirect_roce_qos: %s (%s) failed (rc %s): %s. The RDMA-CM defaults need %s; %s. "
                                 "Nothing else was changed." % (step, " ".join(argv), rc, (err or out).strip(),
                                                                rdma_cm.RDMA_CM, RDMA_CM_OFF))
        cm_state["done"].append(step)
    found = rdma_cm.availability(root)
    if not found["ready"]:
        module.fail_json(msg="gpudirect_roce_qos: the RDMA-CM defaults cannot be set: %s. %s; nothing else was "
                             "changed." % (found["problem"], RDMA_CM_OFF[0].upper() + RDMA_CM_OFF[1:]))
    cm_state.update(ready=True, steps=[], problem="")


def plan_port(port, current, missing, dscp2prio, want, cm_want, cm_state):
    """The port's report entry: what differs, and where RDMA-CM traffic lands."""
    to_set = qos.compare(current, want)
    if cm_want and not cm_state["ready"] and cm_state["steps"]:
        # not readable before configfs/rdma_cm are there: counted as to set, read again after they are
        for key, value in cm_want.items():
            to_set[key] = value
    wanted = dict((k, v) for k, v in want.items() if v is not None and k != "rdma_cm")
    wanted.update(cm_want)
    cm_class = None
    if cm_want:
        trust = want.get("trust") if want.get("trust") is not None else current.get("trust")
        pfc = want.get("pfc_priorities") if want.get("pfc_priorities") is not None else current.get("pfc")
        cm_class = qos.rdma_cm_class(cm_want["rdma_cm_tos"], trust, dscp2prio, pfc)
    return dict(port, current=current, to_set=to_set, not_exposed=missing, wanted=wanted, rdma_cm_class=cm_class)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            trust=dict(type="str", choices=["pcp", "dscp"]),
            pfc_priorities=dict(type="list", elements="int"),
            ecn_priorities=dict(type="list", elements="int"),
            cnp_dscp=dict(type="int"),
            cnp_802p_prio=dict(type="int"),
            mtu=dict(type="int"),
            dscp=dict(type="int"),
            rdma_cm=dict(type="bool", default=True),
            interfaces=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["planned", "applied"], default="planned"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    want = dict((k, p[k]) for k in ("trust", "pfc_priorities", "ecn_priorities", "cnp_dscp", "cnp_802p_prio", "mtu",
                                    "dscp", "rdma_cm"))
    result = dict(changed=False, wanted=False, ports=[], ports_skipped=[], changes=[], disruption=[], not_exposed=[],
                  tool_missing="", skip_reason="", rdma_cm={})
    errors = qos.validate_wanted(want)
    if errors:
        module.fail_json(msg="gpudirect_roce_qos: " + "; ".join(errors) + ". Fix the variables; nothing was changed.",
                         **result)
    cm_want = qos.rdma_cm_wanted(want)
    result["wanted"] = bool(cm_want) or any(want[k] is not None for k in ("trust", "pfc_priorities", "ecn_priorities",
                                                                         "cnp_dscp", "cnp_802p_prio", "mtu"))
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
    cm_state = rdma_cm_state(p["root"], cm_want)
    result["rdma_cm"] = cm_state

    seen = set()
    for port in qos.find_ports(p["root"]):
        label = "%s port %s" % (port["device"], port["port"])
        if named and port["netdev"] not in named and port["device"] not in named:
            result["ports_skipped"].append(dict(port, reason="not named in interfaces"))
            continue
        seen.update([port["device"], port["netdev"]])
        if port["link_layer"] != "Ethernet":
            reason = ("%s link layer: RoCE QoS (trust, PFC, ECN, RDMA-CM's RoCE defaults) is for Ethernet ports; an "
                      "InfiniBand fabric's QoS is the subnet manager's (service levels)"
                      % (port["link_layer"] or "unknown"))
            result["ports_skipped"].append(dict(port, reason=reason))
            continue
        if not port["netdev"]:
            reason = "no netdev found for %s (no gid_attrs/ndevs/0, no device/net/, no parent)" % label
            result["ports_skipped"].append(dict(port, reason=reason))
            continue
        current, missing, dscp2prio = read_port(module, tool, p["root"], port, want, cm_want, cm_state)
        entry = plan_port(port, current, missing, dscp2prio, want, cm_want, cm_state)
        result["ports"].append(entry)

    unknown = ["%s: port: no RDMA port of that netdev or device name on the host" % name for name in named
               if name not in seen]
    if not result["ports"] and not named:
        result["skip_reason"] = ("no RoCE port on the host (no RDMA device with an Ethernet link layer under "
                                 "/sys/class/infiniband)")
    describe_plan(module, result, cm_state, unknown, warn=True)

    if strict and named and result["not_exposed"]:
        module.fail_json(msg="gpudirect_roce_qos: the ports named in interfaces do not expose what is wanted: %s. "
                             "Install mlnx-tools (DOCA-Host / MLNX_OFED) or leave the value unset; nothing was "
                             "changed." % "; ".join(result["not_exposed"]), **result)
    if strict and result["ports"] and cm_state and cm_state["problem"] and not cm_state["steps"]:
        module.fail_json(msg="gpudirect_roce_qos: the RDMA-CM defaults cannot be set: %s. %s; nothing was changed."
                             % (cm_state["problem"], RDMA_CM_OFF[0].upper() + RDMA_CM_OFF[1:]), **result)
    if p["state"] != "applied" or module.check_mode or not result["changes"]:
        module.exit_json(**result)

    if cm_state and cm_state["steps"]:
        prepare_rdma_cm(module, p["root"], cm_state)
        result["changed"] = True
        # the defaults are readable now: what differs is worked out again
        for index, entry in enumerate(result["ports"]):
            current, missing, dscp2prio = read_port(module, tool, p["root"], entry, want, cm_want, cm_state)
            result["ports"][index] = plan_port(dict((k, entry[k]) for k in ("device", "port", "link_layer", "netdev",
                                                                             "netdev_from")),
                                               current, missing, dscp2prio, want, cm_want, cm_state)
        result["changes"], result["disruption"], result["not_exposed"] = [], [], []
        describe_plan(module, result, cm_state, unknown, warn=False)
        unread = ["%s port %s: %s" % (e["device"], e["port"], "; ".join("%s: %s" % kv for kv in sorted(
            (k, v) for k, v in e["not_exposed"].items() if k in cm_want))) for e in result["ports"]
            if any(k in e["not_exposed"] for k in cm_want)]
        if unread:
            module.fail_json(msg="gpudirect_roce_qos: rdma_cm is there now but the RDMA-CM defaults cannot be read: %s. "
                                 "%s." % ("; ".join(unread), RDMA_CM_OFF[0].upper() + RDMA_CM_OFF[1:]), **result)

    for entry in result["ports"]:
        if entry["to_set"]:
            apply_port(module, tool, p["root"], entry, entry["to_set"])
            result["changed"] = True
    for entry in result["ports"]:
        if not entry["to_set"]:
            continue
        current, _missing, _dscp2prio = read_port(module, tool, p["root"], entry, want, cm_want, cm_state)
        left = qos.compare(current, want)
        if left:
            module.fail_json(msg="gpudirect_roce_qos: %s still differs after the set: %s (read back %s). The driver "
                                 "refused or changed it; see dmesg." % (entry["netdev"], ", ".join(
                                     qos.describe(k, v) for k, v in sorted(left.items())), current), **result)
        entry["current"] = current
    module.exit_json(**result)


def describe_plan(module, result, cm_state, unknown, warn):
    """The plan's sentences from the ports' entries: changes, disruption, not_exposed (then ``unknown``, the names in
    interfaces that are no port); with ``warn``, a warning where RDMA-CM traffic would not land in a PFC priority."""
    if cm_state and cm_state["steps"] and result["ports"]:
        result["changes"].append("RDMA-CM: %s first (%s; the defaults are read after it)" % (
            " and ".join(cm_state["steps"]), cm_state["problem"]))
    for entry in result["ports"]:
        label = "%s port %s" % (entry["device"], entry["port"])
        for key in sorted(entry["not_exposed"]):
            result["not_exposed"].append("%s: %s: %s" % (entry["netdev"], key, entry["not_exposed"][key]))
        to_set = entry["to_set"]
        if to_set:
            result["changes"].append("%s (%s): set %s" % (entry["netdev"], label, ", ".join(
                qos.describe(k, v) for k, v in sorted(to_set.items()))))
            disruptive = [k for k in sorted(to_set) if k in qos.DISRUPTIVE]
            if disruptive:
                result["disruption"].append("%s (%s): %s changes while the port may carry traffic" % (
                    entry["netdev"], label, ", ".join(qos.describe(k, to_set[k]) for k in disruptive)))
        cm_class = entry.get("rdma_cm_class")
        if warn and cm_class and not cm_class["pfc"]:
            module.warn("%s (%s): RDMA-CM traffic at ToS %s (DSCP %d) maps to priority %d (mlnx_qos dscp2prio), which "
                        "has no PFC: it is not in the lossless class; make gpudirect_roce_qos_dscp a DSCP of a PFC "
                        "priority" % (entry["netdev"], label, entry["wanted"]["rdma_cm_tos"], cm_class["dscp"],
                                      cm_class["priority"]))
    result["not_exposed"].extend(unknown)


if __name__ == "__main__":
    main()
