"""Does the controller's connection, or a network filesystem, run over a ConnectX netdev?

Restarting openibd (or removing OFED) unloads and reloads mlx5_core: every netdev of a
ConnectX adapter goes down for a while, and the IPoIB/RoCE addresses on it with it.  If
the SSH session Ansible runs over, or an NFS/Lustre/... mount the node works from, rides
on such a netdev, the change cuts the branch it sits on.  This module finds out, from
procfs and sysfs only (paths are parameters, so unit tests use fake trees):

* the controller's address: ``SSH_CONNECTION`` (``client port server port``) of the
  module's process or of the nearest ancestor that has it (``sudo`` drops it from the
  environment; the login shell above it still has it); without one, the default route;
* the interface that carries traffic to an address: ``ip -o route get`` (the caller
  runs it) or, without ``ip``, a longest-prefix match over ``/proc/net/route`` (IPv4);
* network filesystems of ``/proc/mounts`` (nfs, nfs4, cifs, smb3, lustre, beegfs, gpfs)
  and their server address (``addr=`` option, or the host part of the source);
* whether a netdev is on a ConnectX adapter: its ``device/driver`` is ``mlx5_core``
  (or ``mlx4_core``/``mlx4_en``), or it is a bond/team/VLAN/macvlan whose lower devices
  (``lower_*`` links, ``bonding/slaves``) are.

Where the path cannot be known (a mount whose server is not an address, a Lustre NID on
``o2ib``, BeeGFS/GPFS whose servers are not in ``/proc/mounts``, an IPv6 peer without
``ip``) and the node has ConnectX netdevs, the answer is "at risk", with the reason: the
caller fails unless the admin says otherwise (never guess that it is safe).
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import os
import re
import socket
import struct

from ansible.module_utils.gpudirect_host import read_bytes, read_text

__metaclass__ = type

RDMA_NETDEV_DRIVERS = ("mlx5_core", "mlx4_core", "mlx4_en")
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "beegfs", "gpfs")
RTF_UP = 0x0001


class GuardError(ValueError):
    """Text that is not what it should be; the message quotes it."""


def parse_ssh_connection(text):
    """``"10.0.0.1 51234 10.0.0.9 22"`` -> ``{"client", "client_port", "server", "server_port"}``."""
    fields = str(text or "").split()
    if len(fields) != 4 or not fields[1].isdigit() or not fields[3].isdigit():
        raise GuardError("SSH_CONNECTION %r is not '<client address> <port> <server address> <port>'" % (text,))
    for address in (fields[0], fields[2]):
        try:
            ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            raise GuardError("SSH_CONNECTION %r: %r is not an IP address" % (text, address))
    return {"client": fields[0], "client_port": int(fields[1]), "server": fields[2], "server_port": int(fields[3])}


def ssh_connection_from_proc(proc_root, pid, limit=64):
    """``SSH_CONNECTION`` of process ``pid`` or its nearest ancestor that has it, else None."""
    seen = 0
    while pid and int(pid) > 1 and seen < limit:
        seen += 1
        environ = read_bytes(os.path.join(proc_root, str(pid), "environ")) or b""
        for entry in environ.split(b"\0"):
            if entry.startswith(b"SSH_CONNECTION="):
                return entry.split(b"=", 1)[1].decode("utf-8", "replace")
        status = read_text(os.path.join(proc_root, str(pid), "status")) or ""
        match = re.search(r"^PPid:\s*(\d+)", status, re.M)
        pid = int(match.group(1)) if match else 0
    return None


def parse_proc_route(text):
    """``/proc/net/route`` -> list of ``{"iface", "destination", "mask", "gateway", "flags", "metric"}``.

    Addresses are hexadecimal in host (little-endian on x86/arm64) byte order, as the kernel
    prints them; they are returned as dotted quads.
    """
    routes = []
    lines = str(text or "").splitlines()
    if not lines or not lines[0].split() or lines[0].split()[0] != "Iface":
        raise GuardError("/proc/net/route: first line %r is not the 'Iface Destination ...' header"
                         % (lines[0] if lines else text,))
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 8:
            raise GuardError("/proc/net/route: line %d: %r has fewer than 8 fields" % (number, line))
        try:
            dest, gateway, flags, metric, mask = (int(fields[1], 16), int(fields[2], 16), int(fields[3], 16),
                                                  int(fields[6]), int(fields[7], 16))
        except ValueError:
            raise GuardError("/proc/net/route: line %d: %r is not hexadecimal routing data" % (number, line))
        quad = lambda value: socket.inet_ntoa(struct.pack("<I", value))  # noqa: E731 - kernel prints host order
        routes.append({"iface": fields[0], "destination": quad(dest), "gateway": quad(gateway),
                       "mask": quad(mask), "flags": flags, "metric": metric})
    return routes


def route_dev_from_proc(text, address):
    """Interface of the most specific up route to an IPv4 ``address`` in ``/proc/net/route``, else None."""
    target = ipaddress.ip_address(address)
    if target.version != 4:
        return None
    best = None
    for route in parse_proc_route(text):
        if not route["flags"] & RTF_UP:
            continue
        network = ipaddress.ip_network("%s/%s" % (route["destination"], route["mask"]), strict=False)
        if target in network:
            key = (network.prefixlen, -route["metric"])
            if best is None or key > best[0]:
                best = (key, route["iface"])
    return best[1] if best else None


def parse_ip_route_get(text):
    """``ip -o route get ADDR`` output -> the ``dev`` it names, else None."""
    match = re.search(r"\bdev\s+(\S+)", str(text or ""))
    return match.group(1) if match else None


def _mount_field(text):
    """Undo /proc/mounts' octal escapes (``\\040`` for a blank)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mounts(text):
    """Network filesystems of ``/proc/mounts``: ``{"source", "mountpoint", "fstype", "server", "rdma"}``.

    ``server`` is the ``addr=`` option (nfs, cifs), else the host part of the source when it is an
    IP address, else None (a host name, or BeeGFS/GPFS, whose servers /proc/mounts does not name).
    ``rdma`` is why the mount runs over RDMA itself (``proto=rdma``, a Lustre ``@o2ib`` NID), or "".
    """
    found = []
    for number, line in enumerate(str(text or "").splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 4:
            raise GuardError("/proc/mounts: line %d: %r has fewer than 4 fields" % (number, line))
        source, mountpoint, fstype, options = (_mount_field(f) for f in fields[:4])
        if fstype.split(".")[0] not in NETWORK_FILESYSTEMS:
            continue
        opts = dict((o.split("=", 1) + [""])[:2] for o in options.split(","))
        server, rdma = opts.get("addr") or None, ""
        if "proto" in opts and opts["proto"].startswith("rdma"):
            rdma = "proto=%s (NFS over RDMA)" % opts["proto"]
        if fstype == "lustre":
            nids = re.findall(r"([^:,@/]+)@([a-z0-9]+)", source)
            if any(net.startswith("o2ib") for _, net in nids):
                rdma = "Lustre NID %s (LNet over RDMA)" % ",".join("%s@%s" % n for n in nids if n[1].startswith("o2ib"))
            elif nids:
                server = nids[0][0]
        elif server is None:
            host = None
            if source.startswith("//"):
                host = source[2:].split("/")[0]
            elif source.startswith("["):
                host = source[1:].split("]")[0]
            elif ":" in source:
                host = source.split(":")[0]
            if host:
                try:
                    server = str(ipaddress.ip_address(host))
                except ValueError:
                    server = None
        found.append({"source": source, "mountpoint": mountpoint, "fstype": fstype, "server": server, "rdma": rdma})
    return found


def netdev_driver(sys_root, ifname):
    """Basename of ``/sys/class/net/<if>/device/driver`` (e.g. ``mlx5_core``), else None."""
    link = os.path.join(sys_root, "class", "net", ifname, "device", "driver")
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def netdev_lowers(sys_root, ifname):
    """Names of the devices directly below a bond/team/VLAN/macvlan netdev (empty for a physical one)."""
    base = os.path.join(sys_root, "class", "net", ifname)
    lowers = []
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return lowers
    for entry in entries:
        if entry.startswith("lower_"):
            lowers.append(entry[len("lower_"):])
    slaves = read_text(os.path.join(base, "bonding", "slaves"))
    for name in (slaves or "").split():
        if name not in lowers:
            lowers.append(name)
    return lowers


def rdma_netdevs_below(sys_root, ifname, depth=0):
    """``[(netdev, driver)]`` of the ConnectX netdevs ``ifname`` is or stacks on."""
    if depth > 8:
        return []
    driver = netdev_driver(sys_root, ifname)
    if driver in RDMA_NETDEV_DRIVERS:
        return [(ifname, driver)]
    found = []
    for lower in netdev_lowers(sys_root, ifname):
        found.extend(rdma_netdevs_below(sys_root, lower, depth + 1))
    return found


def all_rdma_netdevs(sys_root):
    """Every netdev of the node whose driver is a ConnectX one."""
    try:
        names = sorted(os.listdir(os.path.join(sys_root, "class", "net")))
    except OSError:
        return []
    return [n for n in names if netdev_driver(sys_root, n) in RDMA_NETDEV_DRIVERS]


def _path(sys_root, ifname):
    below = rdma_netdevs_below(sys_root, ifname)
    if not below:
        return None
    if below == [(ifname, below[0][1])]:
        return "%s is driven by %s" % (ifname, below[0][1])
    return "%s stacks on %s" % (ifname, ", ".join("%s (%s)" % pair for pair in below))


def assess(sys_root, ssh_connection, mounts_text, route_dev):
    """What would a ConnectX reset cut?

    :param sys_root: the sysfs root (``/sys``).
    :param ssh_connection: ``SSH_CONNECTION`` text, or None (then the default route is checked).
    :param mounts_text: ``/proc/mounts``.
    :param route_dev: callable(address) -> interface name or None (``ip -o route get`` / /proc/net/route);
        address ``"0.0.0.0"`` asks for the default route.
    :returns: ``{"at_risk": [{"what", "interface", "address", "why"}], "checked": [sentences]}``.
    :raises GuardError: on a malformed SSH_CONNECTION or /proc/mounts.
    """
    at_risk, checked = [], []
    rdma_all = all_rdma_netdevs(sys_root)

    def judge(what, address):
        interface = route_dev(address)
        if interface is None:
            if rdma_all:
                at_risk.append({"what": what, "interface": None, "address": address,
                                "why": "no route to %s could be read, and the node has ConnectX netdevs (%s)"
                                       % (address, ", ".join(rdma_all))})
            else:
                checked.append("%s: no route read for %s; the node has no ConnectX netdev" % (what, address))
            return
        why = _path(sys_root, interface)
        if why:
            at_risk.append({"what": what, "interface": interface, "address": address, "why": why})
        else:
            checked.append("%s: %s via %s, not a ConnectX netdev" % (what, address, interface))

    if ssh_connection:
        conn = parse_ssh_connection(ssh_connection)
        judge("the controller's SSH connection", conn["client"])
    else:
        judge("the default route (no SSH_CONNECTION: the controller's path is unknown)", "0.0.0.0")
    for mount in parse_mounts(mounts_text):
        what = "%s mount %s on %s" % (mount["fstype"], mount["source"], mount["mountpoint"])
        if mount["rdma"]:
            at_risk.append({"what": what, "interface": None, "address": mount["server"],
                            "why": "it runs over RDMA itself: %s" % mount["rdma"]})
        elif mount["server"]:
            judge(what, mount["server"])
        elif rdma_all:
            at_risk.append({"what": what, "interface": None, "address": None,
                            "why": "its server is not named by an address in /proc/mounts, and the node has "
                                   "ConnectX netdevs (%s)" % ", ".join(rdma_all)})
        else:
            checked.append("%s: server unknown; the node has no ConnectX netdev" % what)
    return {"at_risk": at_risk, "checked": checked}


def describe(item):
    """One sentence for an at-risk item."""
    where = item["interface"] or "(interface unknown)"
    address = (" to %s" % item["address"]) if item["address"] else ""
    return "%s%s runs over %s: %s" % (item["what"], address, where, item["why"])
