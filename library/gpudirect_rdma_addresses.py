#!/usr/bin/python
"""Plan and write the addresses of the RDMA interfaces with the node's network service."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_rdma_addresses
short_description: Plan and write the addresses of a node's RDMA interfaces with the service that manages its network
description:
  - Resolves each interface of O(addresses) (a netdev name, an RDMA device name such as C(mlx5_0) or C(rxe0), whose
    netdev it reads from sysfs, or a MAC address) and reads the addresses each has now (C(ip -j addr show)).
  - Finds which service manages the network (O(backend) C(auto)) - netplan (the C(netplan) command and a file in
    C(/etc/netplan)), NetworkManager (active), ifupdown (C(ifup) and an active C(networking.service)),
    systemd-networkd (active), in this order - and fails naming O(backend) when none is found.
  - Connection guard. Fails, before any change, when an interface to configure carries the controller's connection
    (C(SSH_CONNECTION) of the module's process or an ancestor, else the default route; the route from
    C(ip -o route get)), naming the interface.
  - Returns C(changes) and C(disruption), the lists every plan of the toolkit returns. Adding an address is no
    disruption; replacing or removing an address an interface has is one (RDMA connections use it).
  - With O(state=applied), writes the persistent configuration - C(/etc/systemd/network/05-gpudirect-rdma-<if>.network)
    and C(networkctl reload) / C(reconfigure); C(/etc/netplan/60-gpudirect-rdma-addresses.yaml) and
    C(netplan generate) / C(apply); C(/etc/network/interfaces.d/gpudirect-rdma-<if>) and C(ifdown) / C(ifup) - removes
    the addresses not wanted, and waits until every wanted address is on its interface. For NetworkManager it changes
    nothing and returns C(nmcli), the connections for C(community.general.nmcli).
  - The role owns the whole configuration of an interface it names; the service's other files for it no longer apply.
options:
  addresses:
    description:
      - Interface (netdev, RDMA device or MAC) to its addresses (C(10.0.0.1/24)), as the role's input check returns
        them.
    type: dict
    required: true
  backend:
    description: The service that manages the network; C(auto) finds it.
    type: str
    default: auto
    choices: [auto, netplan, networkmanager, ifupdown, networkd]
  backend_knob:
    description: The variable that sets O(backend), named in messages.
    type: str
    default: gpudirect_rdma_addresses_backend
  addresses_knob:
    description: The variables that gave O(addresses), named in messages.
    type: str
    default: gpudirect_rdma_addresses_map/gpudirect_rdma_addresses_pattern
  state:
    description: C(planned) reads only; C(applied) writes and applies the configuration.
    type: str
    default: planned
    choices: [planned, applied]
  wait:
    description: Seconds O(state=applied) waits for the addresses to appear.
    type: int
    default: 30
  ssh_connection:
    description: C(SSH_CONNECTION) to judge instead of the module's own (tests).
    type: str
  sys_root:
    description: The sysfs root.
    type: path
    default: /sys
  proc_root:
    description: The procfs root.
    type: path
    default: /proc
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.no_diff
attributes:
  check_mode:
    support: full
    description: Check mode plans and reports C(changed) as a run would, and writes nothing.
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the addresses (read-only)
  gpudirect_rdma_addresses:
    addresses: {mlx5_0: [10.10.0.7/24], "0c:42:a1:00:00:01": [10.11.0.7/24]}
  check_mode: true
  register: plan

- name: Write them with the node's network service
  gpudirect_rdma_addresses:
    addresses: {mlx5_0: [10.10.0.7/24]}
    state: applied
"""

RETURN = r"""
backend:
  description: The service that manages the network, as found or given.
  returned: always
  type: str
  sample: networkd
changes:
  description: What would change (or changed), one sentence each; empty when in place.
  returned: always
  type: list
  elements: str
  sample: ["enp0s5: add 10.99.0.1/24", "write /etc/systemd/network/05-gpudirect-rdma-enp0s5.network (networkd)"]
disruption:
  description: The replacements and removals of addresses interfaces have now.
  returned: always
  type: list
  elements: str
interfaces:
  description: Per netdev, C(named) (as the input named it), C(addresses) wanted, C(add), C(remove) and C(keep).
  returned: always
  type: dict
files:
  description: The configuration files that differ from what the role writes (written with O(state=applied)).
  returned: always
  type: list
  elements: str
guarded_interface:
  description: The interface of the controller's connection (never configured), or null when none was read.
  returned: always
  type: str
nmcli:
  description: For NetworkManager, the connections for C(community.general.nmcli) (C(conn_name), C(ifname), C(ip4), C(ip6)).
  returned: always
  type: list
  elements: dict
"""

import glob
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import C_LOCALE, read_text, run_or_fail
from ansible.module_utils.gpudirect_netguard import GuardError, parse_ip_route_get, parse_ssh_connection
from ansible.module_utils.gpudirect_netguard import ssh_connection_from_proc
from ansible.module_utils.gpudirect_rdma_addresses import AddressError, detect_backend, files_for, guard
from ansible.module_utils.gpudirect_rdma_addresses import parse_ip_addr_json, plan, resolve


def read_links(module):
    ip = module.get_bin_path("ip", required=True)
    try:
        return parse_ip_addr_json(run_or_fail(module, [ip, "-j", "addr", "show"]))
    except AddressError as error:
        module.fail_json(msg=str(error))


def service_active(module, unit):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return False
    rc, out, _ = module.run_command([systemctl, "is-active", unit], environ_update=dict(C_LOCALE))
    return rc == 0 and out.strip() == "active"


def probe_backends(module):
    return {
        "netplan": bool(module.get_bin_path("netplan")) and bool(glob.glob("/etc/netplan/*.yaml")
                                                                 + glob.glob("/etc/netplan/*.yml")),
        "networkmanager": service_active(module, "NetworkManager.service"),
        "ifupdown": bool(module.get_bin_path("ifup")) and os.path.exists("/etc/network/interfaces")
        and service_active(module, "networking.service"),
        "networkd": service_active(module, "systemd-networkd.service"),
    }


def guarded_interface(module, params):
    """The interface the controller's connection (else the default route) runs over, or None."""
    ssh = params["ssh_connection"]
    if ssh is None:
        ssh = os.environ.get("SSH_CONNECTION") or ssh_connection_from_proc(params["proc_root"], os.getpid())
    address = "0.0.0.0"
    if ssh:
        try:
            address = parse_ssh_connection(ssh)["client"]
        except GuardError as error:
            module.fail_json(msg="connection guard: %s" % error)
    ip = module.get_bin_path("ip", required=True)
    rc, out, _ = module.run_command([ip, "-o", "route", "get", address], environ_update=dict(C_LOCALE))
    return parse_ip_route_get(out) if rc == 0 else None


def nmcli_connections(resolved):
    out = []
    for netdev in sorted(resolved):
        addresses = resolved[netdev]["addresses"]
        out.append({"conn_name": "gpudirect-rdma-%s" % netdev, "ifname": netdev,
                    "ip4": [a for a in addresses if ":" not in a], "ip6": [a for a in addresses if ":" in a]})
    return out


def write_file(path, content):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    tmp = path + ".gpudirect-tmp"
    with open(tmp, "w") as handle:
        handle.write(content)
    # netplan warns about files others can read (they may hold secrets)
    os.chmod(tmp, 0o600 if path.startswith("/etc/netplan/") else 0o644)
    os.rename(tmp, path)


def apply(module, backend, resolved, planned):
    changed_ifs = [n for n, v in planned["interfaces"].items() if v["add"] or v["remove"]]
    for path, content in files_for(backend, resolved).items():
        if path in planned["files"]:
            write_file(path, content)
    if backend == "networkd":
        networkctl = module.get_bin_path("networkctl", required=True)
        run_or_fail(module, [networkctl, "reload"])
        targets = sorted(set(changed_ifs) | set(n for n in resolved if any(n in p for p in planned["files"])))
        if targets:
            run_or_fail(module, [networkctl, "reconfigure"] + targets)
    elif backend == "netplan":
        netplan = module.get_bin_path("netplan", required=True)
        run_or_fail(module, [netplan, "generate"])
        run_or_fail(module, [netplan, "apply"])
    elif backend == "ifupdown":
        ifup, ifdown = module.get_bin_path("ifup", required=True), module.get_bin_path("ifdown", required=True)
        for netdev in changed_ifs:
            # rc 1: the interface was not up under ifupdown yet
            run_or_fail(module, [ifdown, netdev], ok=(0, 1))
            run_or_fail(module, [ifup, netdev])
    ip = module.get_bin_path("ip", required=True)
    deadline = time.time() + module.params["wait"]
    while True:
        links = read_links(module)
        missing = dict((n, [a for a in v["addresses"] if a not in links[n]["addresses"]]) for n, v in resolved.items()
                       if n in links)
        missing = dict((n, m) for n, m in missing.items() if m)
        if not missing or time.time() > deadline:
            break
        time.sleep(1)
    if missing:
        module.fail_json(msg="after %s applied the configuration, %s still lack(s) %s (waited %d s); see the %s "
                         "journal" % (backend, ", ".join(sorted(missing)),
                                      "; ".join("%s: %s" % (n, ", ".join(m)) for n, m in sorted(missing.items())),
                                      module.params["wait"], backend), changes=planned["changes"])
    # what the service did not take away itself (a replaced address it never knew)
    for netdev, info in sorted(planned["interfaces"].items()):
        for address in info["remove"]:
            if address in links.get(netdev, {}).get("addresses", []):
                run_or_fail(module, [ip, "addr", "del", address, "dev", netdev])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            addresses=dict(type="dict", required=True),
            backend=dict(type="str", default="auto",
                         choices=["auto", "netplan", "networkmanager", "ifupdown", "networkd"]),
            backend_knob=dict(type="str", default="gpudirect_rdma_addresses_backend"),
            addresses_knob=dict(type="str", default="gpudirect_rdma_addresses_map/gpudirect_rdma_addresses_pattern"),
            state=dict(type="str", default="planned", choices=["planned", "applied"]),
            wait=dict(type="int", default=30),
            ssh_connection=dict(type="str"),
            sys_root=dict(type="path", default="/sys"),
            proc_root=dict(type="path", default="/proc"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = {"backend": None, "changes": [], "disruption": [], "interfaces": {}, "files": [],
              "guarded_interface": None, "nmcli": []}
    wanted = dict((k, v if isinstance(v, list) else [v]) for k, v in params["addresses"].items())
    if not wanted:
        module.exit_json(changed=False, **result)
    links = read_links(module)
    try:
        resolved = resolve(wanted, links, params["sys_root"], params["addresses_knob"])
    except AddressError as error:
        module.fail_json(msg=str(error), **result)
    result["guarded_interface"] = guarded_interface(module, params)
    refusal = guard(resolved, result["guarded_interface"], params["addresses_knob"])
    if refusal:
        module.fail_json(msg=refusal, **result)
    backend = params["backend"]
    if backend == "auto":
        backend = detect_backend(probe_backends(module))
        if backend is None:
            module.fail_json(msg="no service that manages the network was found (netplan, NetworkManager, ifupdown's "
                                 "networking.service, systemd-networkd): set %s to the one this node uses"
                                 % params["backend_knob"], **result)
    result["backend"] = backend
    files_now = dict((path, read_text(path)) for path in files_for(backend, resolved))
    planned = plan(resolved, links, backend, files_now)
    for netdev, info in planned["interfaces"].items():
        info.update(named=resolved[netdev]["named"], addresses=resolved[netdev]["addresses"])
    result.update(changes=planned["changes"], disruption=planned["disruption"], interfaces=planned["interfaces"],
                  files=planned["files"])
    if backend == "networkmanager":
        result["nmcli"] = nmcli_connections(resolved)
    changed = bool(planned["changes"]) and backend != "networkmanager"
    if params["state"] == "applied" and changed and not module.check_mode:
        apply(module, backend, resolved, planned)
    module.exit_json(changed=changed if params["state"] == "applied" else False, **result)


if __name__ == "__main__":
    main()
