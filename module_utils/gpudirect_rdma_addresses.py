"""Addresses of the RDMA interfaces (role gpudirect_rdma_addresses): input, node state, plan, files.

Pure functions; the module (library/gpudirect_rdma_addresses.py) reads the node and writes, the
filters (filter_plugins/gpudirect_rdma_addresses_filters.py) checks the play's hosts against each other,
and the unit tests (tests/unit/test_rdma_addresses*.py) import this file.

* Input: a per-host map (``{interface: "10.0.0.1/24"}`` or a list of such addresses) and/or a
  pattern (``{interface: "10.0.0.0/24"}``: the host's address is the network's address plus
  ``offset + index``). An interface is named by its netdev name (``ens1f0``), its RDMA device
  name (``mlx5_0``, ``rxe0``: its netdev from sysfs) or its MAC address.
* Node state: ``ip -j addr show`` (the addresses each netdev has now), sysfs (RDMA device ->
  netdev) and which service manages the network (netplan, NetworkManager, ifupdown,
  systemd-networkd).
* Plan: what would change; adding an address to an interface is no disruption, replacing or
  removing one it has is (RDMA connections run on it).
* Files: the persistent configuration each file backend gets (NetworkManager goes through
  community.general.nmcli in the role, no file here).
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import json
import os
import re

__metaclass__ = type

BACKENDS = ("netplan", "networkmanager", "ifupdown", "networkd")
MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
NETPLAN_FILE = "/etc/netplan/60-gpudirect-rdma-addresses.yaml"
IFUPDOWN_DIR = "/etc/network/interfaces.d"
NETWORKD_DIR = "/etc/systemd/network"
HEADER = "# Written by the gpudirect_rdma_addresses role (GPUDirect RDMA toolkit); changes here are overwritten.\n"


class AddressError(ValueError):
    """Input or node text that is not what it should be; the message says what and which knob."""


def _interface(address):
    """``"10.0.0.1/24"`` -> IPv4Interface/IPv6Interface, with the prefix required."""
    text = str(address).strip()
    if "/" not in text:
        raise ValueError("no prefix length")
    iface = ipaddress.ip_interface(text)
    if iface.ip == iface.network.network_address and iface.network.num_addresses > 2:
        raise ValueError("it is the network address of %s" % iface.network)
    if iface.version == 4 and iface.network.num_addresses > 2 and iface.ip == iface.network.broadcast_address:
        raise ValueError("it is the broadcast address of %s" % iface.network)
    return iface


def normalize_map(mapping, knob):
    """``{key: cidr | [cidr]}`` -> ``{key: [cidr, ...]}`` (canonical text), or AddressError naming ``knob``."""
    if mapping in (None, ""):
        return {}
    if not isinstance(mapping, dict):
        raise AddressError("%s must be a mapping of interface (netdev, RDMA device or MAC) to address/prefix, "
                           "not %r" % (knob, mapping))
    out = {}
    for key, value in mapping.items():
        key = str(key).strip()
        if not key:
            raise AddressError("%s: an empty interface name" % knob)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise AddressError("%s[%s]: no address" % (knob, key))
        addresses = []
        for item in values:
            try:
                addresses.append(str(_interface(item)))
            except ValueError as error:
                raise AddressError("%s[%s]: %r is not a valid address/prefix (CIDR such as 10.0.0.1/24): %s"
                                   % (knob, key, item, error))
        out[_key(key)] = addresses
    return out


def _key(key):
    return key.lower() if MAC_RE.match(key.lower()) else key


def expand_pattern(pattern, index, offset, knob="gpudirect_rdma_addresses_pattern"):
    """``{key: "10.0.0.0/24"}`` and the host's index -> ``{key: ["10.0.0.<offset+index>/24"]}``."""
    if pattern in (None, ""):
        return {}
    if not isinstance(pattern, dict):
        raise AddressError("%s must be a mapping of interface to network (such as {mlx5_0: 10.10.0.0/24}), not %r"
                           % (knob, pattern))
    try:
        index, offset = int(index), int(offset)
    except (TypeError, ValueError):
        raise AddressError("%s: the host index %r and offset %r must be integers "
                           "(gpudirect_rdma_addresses_index, gpudirect_rdma_addresses_offset)" % (knob, index, offset))
    if index < 0 or offset < 0:
        raise AddressError("%s: the host index %d and offset %d must not be negative" % (knob, index, offset))
    out = {}
    for key, network in pattern.items():
        try:
            net = ipaddress.ip_network(str(network).strip(), strict=True)
        except ValueError as error:
            raise AddressError("%s[%s]: %r is not a network in CIDR form (such as 10.10.0.0/24): %s"
                               % (knob, key, network, error))
        host = offset + index
        last = net.num_addresses - (2 if net.version == 4 and net.num_addresses > 2 else 1)
        if host < 1 or host > last:
            raise AddressError("%s[%s]: host number %d (offset %d + index %d) is outside %s (1..%d)"
                               % (knob, key, host, offset, index, net, last))
        out[_key(str(key).strip())] = ["%s/%d" % (net.network_address + host, net.prefixlen)]
    return out


def wanted(mapping, pattern, index, offset):
    """The host's wanted addresses, ``{key: [cidr]}``: the map's entries replace the pattern's for a key."""
    out = expand_pattern(pattern, index, offset) if pattern else {}
    out.update(normalize_map(mapping, "gpudirect_rdma_addresses_map"))
    return out


def duplicates(by_host):
    """``{host: {iface: [cidr]}}`` -> sentences, one per address held twice (across or within hosts)."""
    seen, problems = {}, []
    for host in sorted(by_host):
        for iface in sorted(by_host[host] or {}):
            for cidr in by_host[host][iface]:
                ip = str(ipaddress.ip_interface(cidr).ip)
                if ip in seen:
                    problems.append("%s is wanted on %s %s and on %s %s" % (ip, seen[ip][0], seen[ip][1], host, iface))
                else:
                    seen[ip] = (host, iface)
    return problems


# --- node state ---------------------------------------------------------------------

def parse_ip_addr_json(text):
    """``ip -j addr show`` -> ``{ifname: {"mac", "addresses": [cidr (scope global)], "up"}}``."""
    try:
        links = json.loads(text or "")
    except ValueError as error:
        raise AddressError("ip -j addr show printed no JSON (%s): %r" % (error, str(text)[:200]))
    if not isinstance(links, list):
        raise AddressError("ip -j addr show printed %r, not a list of links" % (str(text)[:200],))
    out = {}
    for link in links:
        if not isinstance(link, dict) or "ifname" not in link:
            # iproute2 prints {} for a link that vanished while it read them
            continue
        addresses = []
        for info in link.get("addr_info") or []:
            if info.get("scope") == "global" and info.get("family") in ("inet", "inet6") and "local" in info:
                addresses.append(str(ipaddress.ip_interface("%s/%s" % (info["local"], info["prefixlen"]))))
        out[link["ifname"]] = {"mac": str(link.get("address") or "").lower(), "addresses": addresses,
                               "up": "UP" in (link.get("flags") or [])}
    return out


def rdma_netdev(sys_root, device):
    """The netdev under RDMA device ``device`` (``/sys/class/infiniband/<dev>``), else None.

    rxe/siw: the ``parent`` attribute; a PCI device (mlx5): ``device/net/*``; else port 1's
    GID table (``ports/1/gid_attrs/ndevs/0``).
    """
    base = os.path.join(sys_root, "class", "infiniband", device)
    if not os.path.isdir(base):
        return None
    for path in (os.path.join(base, "parent"), os.path.join(base, "ports", "1", "gid_attrs", "ndevs", "0")):
        try:
            with open(path) as handle:
                name = handle.read().strip()
        except (OSError, IOError):
            continue
        if name:
            return name
    try:
        names = sorted(os.listdir(os.path.join(base, "device", "net")))
    except OSError:
        names = []
    return names[0] if names else None


def rdma_devices(sys_root):
    try:
        return sorted(os.listdir(os.path.join(sys_root, "class", "infiniband")))
    except OSError:
        return []


def resolve(wanted_by_key, links, sys_root, knob="gpudirect_rdma_addresses_map/_pattern"):
    """``{key: [cidr]}`` -> ``{netdev: {"addresses": [cidr], "named": key}}``; unknown keys fail, named."""
    out = {}
    for key in sorted(wanted_by_key):
        if MAC_RE.match(key):
            names = [name for name, link in sorted(links.items()) if link["mac"] == key]
            netdev = names[0] if len(names) == 1 else None
            if len(names) > 1:
                # a bond and its slaves share one MAC: the name must say which
                raise AddressError("%s: MAC %s is the address of %s; name the interface instead"
                                   % (knob, key, ", ".join(names)))
        elif key in links:
            netdev = key
        else:
            netdev = rdma_netdev(sys_root, key)
            if netdev is not None and netdev not in links:
                netdev = None
        if netdev is None:
            raise AddressError("%s: interface %s does not exist on this node (netdevs: %s; RDMA devices: %s)"
                               % (knob, key, ", ".join(sorted(links)) or "none",
                                  ", ".join(rdma_devices(sys_root)) or "none"))
        if netdev in out:
            raise AddressError("%s: %s and %s name the same interface %s; give its addresses once"
                               % (knob, out[netdev]["named"], key, netdev))
        out[netdev] = {"addresses": list(wanted_by_key[key]), "named": key, "mac": links[netdev]["mac"]}
    return out


def detect_backend(probe):
    """Which service manages the node's network, from a probe dict, else None.

    ``probe``: ``netplan`` (the netplan command exists and /etc/netplan has a YAML file),
    ``networkmanager`` (NetworkManager.service active), ``ifupdown`` (ifup exists and
    networking.service is active), ``networkd`` (systemd-networkd.service active). netplan
    comes first: it renders for NetworkManager or networkd, which then also run.
    """
    for backend in BACKENDS:
        if probe.get(backend):
            return backend
    return None


def guard(resolved, guarded_interface, knob):
    """Refusal (str) when a wanted interface carries the controller's connection, else ""."""
    if guarded_interface and guarded_interface in resolved:
        named = resolved[guarded_interface]["named"]
        return ("%s names %s%s, the interface that carries the controller's connection to this node: changing its "
                "addresses could cut the connection this run goes over. Remove it from %s (the role configures the "
                "RDMA interfaces, not the management network)."
                % (knob, guarded_interface, "" if named == guarded_interface else " (as %s)" % named, knob))
    return ""


# --- files --------------------------------------------------------------------------

def networkd_path(netdev):
    return os.path.join(NETWORKD_DIR, "05-gpudirect-rdma-%s.network" % netdev)


def ifupdown_path(netdev):
    return os.path.join(IFUPDOWN_DIR, "gpudirect-rdma-%s" % netdev)


def render_networkd(netdev, addresses):
    """A .network file for the interface (lexically before the image's or distribution's own files)."""
    lines = [HEADER, "[Match]\n", "Name=%s\n" % netdev, "\n", "[Network]\n"]
    lines += ["Address=%s\n" % a for a in addresses]
    lines += ["LinkLocalAddressing=no\n", "IPv6AcceptRA=no\n"]
    return "".join(lines)


def render_ifupdown(netdev, addresses):
    lines = [HEADER, "auto %s\n" % netdev]
    for number, address in enumerate(addresses):
        family = "inet6" if ipaddress.ip_interface(address).version == 6 else "inet"
        if number == 0:
            lines += ["iface %s %s static\n" % (netdev, family), "    address %s\n" % address]
        else:
            lines += ["    up ip addr add %s dev %s\n" % (address, netdev)]
    return "".join(lines)


def render_netplan(resolved):
    """One netplan file for every wanted interface (netplan merges it over the distribution's)."""
    lines = [HEADER, "network:\n", "  version: 2\n", "  ethernets:\n"]
    for netdev in sorted(resolved):
        lines += ["    %s:\n" % json.dumps(netdev), "      addresses:\n"]
        lines += ["        - %s\n" % json.dumps(a) for a in resolved[netdev]["addresses"]]
    return "".join(lines)


def files_for(backend, resolved):
    """``{path: content}`` of the persistent configuration (none for NetworkManager: nmcli keeps it)."""
    if backend == "networkd":
        return dict((networkd_path(n), render_networkd(n, v["addresses"])) for n, v in resolved.items())
    if backend == "ifupdown":
        return dict((ifupdown_path(n), render_ifupdown(n, v["addresses"])) for n, v in resolved.items())
    if backend == "netplan":
        return {NETPLAN_FILE: render_netplan(resolved)} if resolved else {}
    return {}


# --- plan ---------------------------------------------------------------------------

def plan(resolved, links, backend, files_now):
    """What the role would change, per interface.

    :param files_now: ``{path: content or None}`` of the backend's files as they are.
    :returns: ``{"changes", "disruption", "interfaces": {netdev: {"add", "remove", "keep"}}, "files": [paths]}``;
        ``files`` are the paths to write.
    """
    changes, disruption, interfaces = [], [], {}
    for netdev in sorted(resolved):
        want = resolved[netdev]["addresses"]
        have = links[netdev]["addresses"]
        add = [a for a in want if a not in have]
        remove = [a for a in have if a not in want]
        interfaces[netdev] = {"add": add, "remove": remove, "keep": [a for a in want if a in have]}
        if add:
            changes.append("%s: add %s" % (netdev, ", ".join(add)))
        if remove:
            sentence = "%s: %s %s, which RDMA connections on it use" % (
                netdev, "replace" if add else "remove", ", ".join(remove))
            changes.append(sentence)
            disruption.append(sentence + (" (by %s)" % ", ".join(add) if add else ""))
    to_write = []
    for path, content in sorted(files_for(backend, resolved).items()):
        if files_now.get(path) != content:
            to_write.append(path)
            changes.append("write %s (%s)" % (path, backend))
    return {"changes": changes, "disruption": disruption, "interfaces": interfaces, "files": to_write}
