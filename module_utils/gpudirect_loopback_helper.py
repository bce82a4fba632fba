# -*- coding: utf-8 -*-
"""Logic of the ``gpudirect_loopback`` module that needs no node: device selection
from ``ansible_facts.gpudirect``, RoCE GID choice, helper output parsing and the
failure diagnoses (the helper's build: gpudirect_loopback_build.py).

The helper is a C program, ``roles/gpudirect_verify/files/`` (``gpudirect_loopback.h``
says which file holds what), which the gpudirect_verify role ships to the node and
the module builds there with the distribution's compiler and libibverbs headers,
again only when the sha256 of the source files and the build flags differs from the
stamp next to the binary. It links
``-libverbs`` and opens ``libcuda.so.1`` at run time with ``dlopen``, declaring the
few CUDA driver API prototypes itself, so no CUDA toolkit is needed on the node.
It prints one JSON line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import socket

from ansible.module_utils.gpudirect_host import read_attr
from ansible.module_utils.gpudirect_pci import (normalize_pci_address, parse_link_speed, parse_link_width,
                                                pci_address_key, root_path)
from ansible.module_utils.gpudirect_topology import CROSSES, GOOD, distance_rank

MODES = ("auto", "host", "cuda_peermem", "cuda_dmabuf")
GPU_MODES = ("cuda_peermem", "cuda_dmabuf")
UNKNOWN_DISTANCE_RANK = 9


class LoopbackError(Exception):
    """A failure with a diagnosis code; ``extra`` goes into the module result."""

    def __init__(self, code, message, **extra):
        super(LoopbackError, self).__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


# ---------------------------------------------------------------------------
# inventory: from facts, or a small live scan of sysfs
# ---------------------------------------------------------------------------

def unwrap_facts(facts):
    """Accept ansible_facts.gpudirect, or a dict holding it under ``gpudirect``."""
    if not facts:
        return None
    if not isinstance(facts, dict):
        raise LoopbackError("bad_input", "facts must be the ansible_facts.gpudirect dictionary")
    if "gpudirect" in facts and isinstance(facts["gpudirect"], dict):
        facts = facts["gpudirect"]
    if "ansible_facts" in facts and isinstance(facts["ansible_facts"], dict):
        facts = facts["ansible_facts"].get("gpudirect") or {}
    if "rdma_devices" not in facts or "gpus" not in facts:
        raise LoopbackError("bad_input", "facts has no rdma_devices/gpus: pass ansible_facts.gpudirect "
                                         "as gathered by the gpudirect_facts module")
    return facts


def scan_gpus(root="/"):
    """NVIDIA display/3D controllers from /sys/bus/pci/devices."""
    base = root_path(root, "sys/bus/pci/devices")
    try:
        names = os.listdir(base)
    except (IOError, OSError):
        return []
    gpus = []
    for name in sorted(names, key=pci_address_key):
        vendor = read_attr(os.path.join(base, name, "vendor"))
        klass = read_attr(os.path.join(base, name, "class")) or ""
        if vendor == "0x10de" and (klass.startswith("0x0300") or klass.startswith("0x0302")):
            gpus.append({"address": name.lower(), "ordinal": len(gpus)})
    return gpus


def facts_summary(facts, devices, gpus):
    """What the module saw, for failure messages."""
    summary = {
        "rdma_devices": [{"name": d.get("name"), "pci_address": d.get("pci_address"), "kind": d.get("kind"),
                          "ports": {p: (v or {}).get("state") for p, v in (d.get("ports") or {}).items()}}
                         for d in devices],
        "gpus": [g.get("address") for g in gpus],
        "source": "facts" if facts else "sysfs",
    }
    if facts:
        summary["pairs"] = [{"gpu_address": p.get("gpu_address"), "nic": p.get("nic"), "distance": p.get("distance")}
                            for p in facts.get("pairs") or []]
        for key in ("peermem", "dmabuf", "memlock", "unbound_mellanox_functions"):
            if key in facts:
                summary[key] = facts[key]
    return summary


# ---------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------

def _names(devices):
    return ", ".join("%s (%s)" % (d["name"], d.get("pci_address") or "no PCI function") for d in devices) or "none"


def _norm_pci(text):
    """normalize_pci_address, also for the short bus:device.function form (domain 0000)."""
    text = (text or "").strip()
    if re.match(r"^[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", text):
        text = "0000:" + text
    return normalize_pci_address(text)


def find_rdma_device(devices, wanted):
    """By name (mlx5_0, rxe0) or by PCI address; never by position."""
    by_name = [d for d in devices if d.get("name") == wanted]
    if by_name:
        return by_name[0]
    address = _norm_pci(wanted)
    by_pci = [d for d in devices if address and d.get("pci_address") == address]
    if len(by_pci) == 1:
        return by_pci[0]
    if len(by_pci) > 1:
        raise LoopbackError("unknown_rdma_device", "PCI address %s holds several RDMA devices (%s): name one "
                                                   "with rdma_device" % (wanted, _names(by_pci)))
    raise LoopbackError("unknown_rdma_device", "no RDMA device %s on this node; present: %s" % (wanted, _names(devices)))


def find_gpu(gpus, wanted):
    address = _norm_pci(wanted)
    if address is None:
        raise LoopbackError("unknown_gpu", "gpu must be a PCI address such as 0000:1b:00.0 (never an index); "
                                           "got %r; present: %s" % (wanted, ", ".join(g["address"] for g in gpus) or "none"))
    for gpu in gpus:
        if gpu.get("address") == address:
            return gpu
    raise LoopbackError("unknown_gpu", "no GPU at %s on this node; present: %s"
                        % (address, ", ".join(g["address"] for g in gpus) or "none"))


def port_active(device, port="1"):
    return ((device.get("ports") or {}).get(str(port)) or {}).get("state", "").upper() == "ACTIVE"


def pair_key(pair, devices_by_name, port):
    device = devices_by_name.get(pair.get("nic")) or {}
    return (0 if port_active(device, port) else 1, distance_rank(pair.get("distance"), unknown=UNKNOWN_DISTANCE_RANK),
            1 if pair.get("acs_redirect") else 0, pci_address_key(pair.get("gpu_address")), pair.get("nic") or "")


def select_devices(devices, gpus, pairs, mode, rdma_device=None, gpu=None, port=1):
    """Choose (rdma device, gpu or None, pair or None, reason). ``mode`` is resolved
    (host/cuda_*/selftest). Topology decides when a name is not given; a bare
    index is never used."""
    need_gpu = mode in GPU_MODES or mode == "selftest"
    chosen_gpu = find_gpu(gpus, gpu) if gpu else None
    if mode == "selftest":
        if chosen_gpu is None:
            if len(gpus) != 1:
                raise LoopbackError("unknown_gpu", "%s GPUs present (%s): name one with gpu (PCI address)"
                                    % (len(gpus), ", ".join(g["address"] for g in gpus) or "none"))
            chosen_gpu = gpus[0]
        return None, chosen_gpu, None, "selftest: the only GPU" if not gpu else "selftest: named GPU"
    if not devices:
        raise LoopbackError("no_rdma_device", "no RDMA device on this node")
    chosen_dev = find_rdma_device(devices, rdma_device) if rdma_device else None
    if need_gpu and not gpus:
        raise LoopbackError("no_gpu", "mode %s needs a GPU and the node has none (RDMA devices: %s)"
                            % (mode, _names(devices)))
    by_name = dict((d["name"], d) for d in devices)
    if not need_gpu:
        if chosen_dev:
            return chosen_dev, None, None, "named rdma_device"
        active = [d for d in devices if port_active(d, port)]
        if len(devices) == 1:
            return devices[0], None, None, "the only RDMA device"
        if len(active) == 1:
            return active[0], None, None, "the only RDMA device with port %s ACTIVE" % port
        raise LoopbackError("unknown_rdma_device", "several RDMA devices (%s): name one with rdma_device"
                            % _names(devices))
    candidates = [p for p in pairs or [] if p.get("nic") in by_name
                  and (chosen_dev is None or p.get("nic") == chosen_dev["name"])
                  and (chosen_gpu is None or p.get("gpu_address") == chosen_gpu["address"])]
    if candidates:
        best = sorted(candidates, key=lambda p: pair_key(p, by_name, port))[0]
        dev = chosen_dev or by_name[best["nic"]]
        the_gpu = chosen_gpu or find_gpu(gpus, best["gpu_address"])
        if chosen_dev and chosen_gpu:
            reason = "named rdma_device and gpu"
        else:
            reason = "closest pair by topology (%s%s) among %d" % (
                best.get("distance"), "" if port_active(dev, port) else ", port not ACTIVE", len(candidates))
        return dev, the_gpu, best, reason
    # no topology pair (no facts, or a device without PCI function): only explicit or unique choices
    if chosen_dev is None:
        if len(devices) != 1:
            raise LoopbackError("unknown_rdma_device", "no GPU/NIC topology to choose from (pass facts from "
                                "gpudirect_facts) and several RDMA devices (%s): name one with rdma_device"
                                % _names(devices))
        chosen_dev = devices[0]
    if chosen_gpu is None:
        if len(gpus) != 1:
            raise LoopbackError("unknown_gpu", "no GPU/NIC topology to choose from and %d GPUs (%s): name one "
                                "with gpu" % (len(gpus), ", ".join(g["address"] for g in gpus)))
        chosen_gpu = gpus[0]
    return chosen_dev, chosen_gpu, None, "explicit or only devices (no topology pair known)"


def resolve_mode(mode, facts, gpus, root="/"):
    """``auto`` -> what the node supports: cuda_dmabuf, else cuda_peermem, else host."""
    if mode != "auto":
        return mode, "requested"
    if not gpus:
        return "host", "auto: no GPU"
    if facts:
        dmabuf = facts.get("dmabuf") or {}
        peermem = facts.get("peermem") or {}
        if dmabuf.get("kernel_ok") and dmabuf.get("open_module"):
            return "cuda_dmabuf", "auto: dma-buf (open NVIDIA module, kernel support)"
        if peermem.get("nvidia_peermem") or peermem.get("nv_peer_mem"):
            return "cuda_peermem", "auto: peer-memory module loaded"
        return "host", "auto: neither dma-buf nor a peer-memory module available; host memory only"
    if "Open Kernel Module" in (read_attr(root_path(root, "proc/driver/nvidia/version")) or ""):
        return "cuda_dmabuf", "auto: open NVIDIA module (sysfs)"
    if os.path.isdir(root_path(root, "sys/module/nvidia_peermem")):
        return "cuda_peermem", "auto: nvidia_peermem loaded (sysfs)"
    return "host", "auto: no GPU memory path found; host memory only"


def check_mode_supported(mode, facts):
    """Fail early, from facts, when the node cannot do the requested GPU mode."""
    if not facts:
        return
    if mode == "cuda_dmabuf":
        dmabuf = facts.get("dmabuf") or {}
        if dmabuf.get("kernel_ok") is False or dmabuf.get("open_module") is False:
            raise LoopbackError("dmabuf_unsupported", "the facts say this node cannot export GPU memory as dma-buf "
                                "(kernel_ok=%s, open_module=%s)" % (dmabuf.get("kernel_ok"), dmabuf.get("open_module")))
    if mode == "cuda_peermem":
        peermem = facts.get("peermem") or {}
        if not (peermem.get("nvidia_peermem") or peermem.get("nv_peer_mem")):
            raise LoopbackError("peermem_not_loaded", "the facts say no peer-memory module is loaded "
                                "(nvidia_peermem=%s, nv_peer_mem=%s)" % (peermem.get("nvidia_peermem"),
                                                                          peermem.get("nv_peer_mem")))


# ---------------------------------------------------------------------------
# RoCE GID, link rates
# ---------------------------------------------------------------------------

IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}$")
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def gid_table(root, name, port):
    """[(index, type, gid)] of the populated GIDs of a port, by numeric index."""
    pdir = root_path(root, "sys/class/infiniband", name, "ports", str(port))
    try:
        entries = os.listdir(os.path.join(pdir, "gid_attrs", "types"))
    except (IOError, OSError):
        entries = []
    table = []
    for entry in sorted((e for e in entries if e.isdigit()), key=int):
        gid = (read_attr(os.path.join(pdir, "gids", entry)) or "").lower()
        gid_type = read_attr(os.path.join(pdir, "gid_attrs", "types", entry))
        if not gid or gid == ZERO_GID or not gid_type:
            continue
        table.append((int(entry), gid_type, gid))
    return table


def pick_gid_index(table):
    """RoCE v2 with an IPv4-mapped GID first, then any RoCE v2, then any RoCE (v1)."""
    for want in (lambda t, g: "v2" in t and IPV4_MAPPED.match(g), lambda t, g: "v2" in t, lambda t, g: True):
        for index, gid_type, gid in table:
            if want(gid_type, gid):
                return index, gid_type, gid
    return None


# ---------------------------------------------------------------------------
# pair mode: the peer's address, the route to it, the GID that carries it
# ---------------------------------------------------------------------------

def resolve_peer(peer, port):
    """The first address ``peer`` (name or address) resolves to, as text."""
    try:
        infos = socket.getaddrinfo(peer, port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise LoopbackError("peer_unreachable", "cannot resolve peer %r: %s." % (peer, exc))
    if not infos:
        raise LoopbackError("peer_unreachable", "peer %r resolves to no address." % (peer,))
    return infos[0][4][0]


def route_source(address, port):
    """This host's address on the route to ``address`` (a UDP connect sends nothing)."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect((address, port))
        return sock.getsockname()[0]
    except (socket.error, OSError) as exc:
        raise LoopbackError("peer_unreachable", "no route from this host to peer %s: %s." % (address, exc))
    finally:
        sock.close()


def address_gid(address):
    """The GID (sysfs text form) that RoCE derives from an IP address: ::ffff:a.b.c.d for IPv4."""
    try:
        packed = b"\0" * 10 + b"\xff\xff" + socket.inet_pton(socket.AF_INET, address)
    except (socket.error, OSError, ValueError):
        packed = socket.inet_pton(socket.AF_INET6, address.split("%", 1)[0])
    raw = bytearray(packed)
    return ":".join("%02x%02x" % (raw[i], raw[i + 1]) for i in range(0, 16, 2))


def gid_for_address(table, address):
    """(index, type, gid) of the GID that carries ``address``, RoCE v2 first; None when no GID does."""
    want = address_gid(address)
    matches = [entry for entry in table if entry[2] == want]
    v2 = [entry for entry in matches if "v2" in (entry[1] or "")]
    return (v2 or matches or [None])[0]


def gid_addresses(table):
    """The IP addresses the GIDs of a port carry (IPv4-mapped ones as a.b.c.d), for messages."""
    out = []
    for _index, _type, gid in table:
        raw = bytearray.fromhex(gid.replace(":", ""))
        if len(raw) != 16 or gid.startswith("fe80"):
            continue
        if IPV4_MAPPED.match(gid):
            text = socket.inet_ntop(socket.AF_INET, bytes(raw[12:]))
        else:
            text = socket.inet_ntop(socket.AF_INET6, bytes(raw))
        if text not in out:
            out.append(text)
    return out


def pcie_gbps(speed_gts, width):
    """Data rate of a PCIe link after line encoding (8b/10b up to 5 GT/s, 128b/130b above)."""
    if not speed_gts or not width:
        return None
    return round(speed_gts * width * (0.8 if speed_gts <= 5.0 else 128.0 / 130.0), 2)


def live_pci_link(root, address):
    if not address:
        return None
    base = root_path(root, "sys/bus/pci/devices", address)
    speed = parse_link_speed(read_attr(os.path.join(base, "current_link_speed")))
    width = parse_link_width(read_attr(os.path.join(base, "current_link_width")))
    return pcie_gbps(speed, width)


def path_warnings(pair):
    """Warnings about the GPU<->NIC path of the chosen pair."""
    warnings = []
    if not pair:
        return warnings
    distance = pair.get("distance")
    if distance in CROSSES:
        warnings.append("GPU %s and %s are %s apart: peer-to-peer traffic crosses %s, where GPUDirect RDMA is "
                        "slow or unsupported; prefer a GPU and NIC under one PCIe switch (%s)"
                        % (pair.get("gpu_address"), pair.get("nic"), distance, CROSSES[distance], "/".join(GOOD)))
    redirecting = [a for a in pair.get("acs") or [] if a.get("p2p_redirect")]
    if redirecting or pair.get("acs_redirect"):
        warnings.append("ACS redirects peer-to-peer requests on the path (%s): GPU<->NIC traffic detours through "
                        "the root complex (slow, or blocked by the IOMMU); clear it with the gpudirect_pcie_acs role"
                        % ", ".join("%s %s" % (a.get("address"), "/".join(a.get("enabled_bits") or []))
                                    for a in redirecting) or "bridges not named")
    return warnings


# ---------------------------------------------------------------------------
# helper output and diagnoses
# ---------------------------------------------------------------------------

def parse_helper_output(stdout):
    """The helper's JSON object: the last stdout line that parses as a JSON object."""
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "ok" in data:
            return data
    raise ValueError("the helper printed no JSON result line")


DIAGNOSES = {
    "no_rdma_device": (
        "No RDMA device on this node, so there is no NIC to move data through.",
        "Attach an RDMA NIC and load its driver (mlx5_core from DOCA-OFED/MLNX_OFED or inbox rdma-core; "
        "unbound Mellanox functions are listed in facts_seen); for a test node use soft-RoCE "
        "(modprobe rdma_rxe; rdma link add rxe0 type rxe netdev <if>); to prove only the CUDA half set "
        "selftest_gpu_only: true."),
    "unknown_rdma_device": (
        "The RDMA device asked for is not on this node.",
        "Name one of the devices listed (rdma_device: name or PCI address), or pass facts and leave it out "
        "to choose by topology."),
    "unknown_gpu": (
        "The GPU asked for is not on this node, or none can be chosen.",
        "Name a GPU by PCI address (gpu: 0000:1b:00.0), or pass facts and leave it out."),
    "no_gpu": (
        "A GPU memory mode was asked for on a node without an NVIDIA GPU.",
        "Use mode: host, or run on a GPU node."),
    "port_down": (
        "The RDMA port is not ACTIVE, so no packet can leave it.",
        "Check the cable/transceiver and switch port (ibstat, ip link); on InfiniBand a subnet manager must run "
        "(opensm or the switch's); on RoCE the netdev must be up; or choose another port/device."),
    "no_gid": (
        "The RoCE port has no usable GID, so a RoCE packet cannot be addressed.",
        "Give the port's netdev an IP address (RoCE v2 GIDs come from it) or set gid_index."),
    "peermem_not_loaded": (
        "ibv_reg_mr rejected GPU memory (EFAULT/EINVAL): no peer-memory client turned the cuMemAlloc address "
        "into pages the NIC can reach.",
        "Load nvidia_peermem (gpudirect_peermem role; it must be built against the OFED that is installed, "
        "and loaded after it), or use mode: cuda_dmabuf on an open NVIDIA module with a dma-buf capable kernel."),
    "dmabuf_unsupported": (
        "GPU memory could not be shared with the NIC as a dma-buf.",
        "dma-buf needs the open NVIDIA kernel module (driver >= 515), kernel >= 5.12 with CONFIG_DMA_SHARED_BUFFER, "
        "rdma-core >= 34 (ibv_reg_dmabuf_mr) and an RDMA driver that imports dma-buf (mlx5; soft-RoCE does "
        "not); otherwise use mode: cuda_peermem."),
    "memlock_too_low": (
        "Registering memory failed with ENOMEM: the locked-memory limit (or the pinnable memory) is too small "
        "for the buffers.",
        "Run with become (root has CAP_IPC_LOCK), raise memlock in /etc/security/limits.d for the user, or "
        "lower size."),
    "pattern_not_overwritten": (
        "The NIC reported success, but the destination still holds the pattern written before the transfer: "
        "the data went somewhere else, silently.",
        "Typical causes: device/port/GID not the ones that were meant (never pick by index), a GPU mapping that "
        "does not point at the allocation (stale or mismatched peer-memory module), reading GPU memory through "
        "a CPU mapping instead of cuMemcpyDtoH (stale caches), ACS redirecting peer traffic. Check the "
        "selection and the path warnings."),
    "data_mismatch": (
        "The destination differs from what was sent (and from what was there before).",
        "Data was corrupted on the path: check PCIe AER errors (dmesg), the NIC firmware, ACS/IOMMU settings "
        "on the path, and repeat with a smaller size to bound it."),
    "completion_error": (
        "The RDMA WRITE completed with an error status.",
        "Retry exceeded: the port cannot reach itself, or in pair mode the other host's port (GID/route/subnet, "
        "RoCE netdev down, MTU, UDP port 4791 blocked); remote access error: the memory registration is wrong "
        "(peer memory not really mapped); local protection: source buffer."),
    "completion_timeout": (
        "The RDMA WRITE did not complete in time.",
        "Check the port state and fabric (ibstat, rdma link), and the kernel log for NIC errors."),
    "cuda_unavailable": (
        "libcuda.so.1 (the NVIDIA user-space driver) cannot be loaded.",
        "Install the NVIDIA driver (gpudirect_nvidia_driver role) with its user-space libraries."),
    "cuda_error": (
        "A CUDA driver API call failed.",
        "Check nvidia-smi and the kernel log (Xid), and that no other process holds the GPU exclusively."),
    "size_exceeds_gpu_memory": (
        "size is larger than the free memory of the GPU.",
        "Lower size."),
    "bad_input": (
        "The arguments cannot be used.",
        "Fix the option named in the message."),
    "verbs_error": (
        "A verbs call failed.",
        "The stage and errno say which; check the RDMA driver in the kernel log."),
    "host_memory": (
        "Host memory for the buffers could not be allocated.",
        "Lower size."),
    "helper_build_failed": (
        "The loopback helper could not be compiled on the node.",
        "Install the C compiler and the libibverbs development files (build-essential + libibverbs-dev on "
        "Debian/Ubuntu; gcc + rdma-core-devel on the RHEL family)."),
    "helper_output_malformed": (
        "The loopback helper did not print its JSON result.",
        "Run the helper by hand (helper_path, arguments in command) and look at stderr; it may have crashed."),
    "peer_unreachable": (
        "The pair client could not reach the server side's helper.",
        "Start the server side (listen: true) first or in the same task, and run the client while the server "
        "waits (its pair_timeout); peer must be the server's address on the RDMA network, resolvable and routed "
        "from the client; let TCP pair_port through firewalls."),
    "pair_timeout": (
        "The other side of the pair did not show up, or did not answer, in time.",
        "Run both sides at once: one task on both hosts (forks >= 2, both hosts in one serial batch), or the "
        "server with async and poll: 0 before the client; the client's peer must be this server's address and "
        "TCP pair_port open; raise pair_timeout when the other host starts late (e.g. builds its helper first)."),
    "peer_lost": (
        "The connection to the other side of the pair broke off.",
        "The other side failed or was stopped: its own result names the cause."),
    "peer_failed": (
        "The other side of the pair failed, so this side stopped.",
        "Fix what the other side's diagnosis (in this message) says, then run both sides again."),
    "peer_protocol": (
        "Something that is not this module's pair helper answered on pair_port.",
        "Choose a pair_port that no other service uses, the same on both sides, and run the same module version "
        "on both hosts."),
    "pair_mismatch": (
        "The two sides of the pair were started with different settings or module versions.",
        "Give both sides the same size, and run the same version of the module on both hosts."),
    "pair_port_in_use": (
        "The server side cannot listen on pair_port: the port is taken.",
        "Wait for an earlier pair server on this host to end (it gives up after pair_timeout), or choose another "
        "pair_port, the same on both sides."),
    "pair_socket_error": (
        "The server side could not open its TCP socket for the pair exchange.",
        "The errno in the message says why; check the host's network stack and its limits."),
    "bandwidth_below_minimum": (
        "The data arrived intact, but the bandwidth is below min_ratio_port of the port rate.",
        "Check the path warnings (distance, ACS), the PCIe link width/speed of GPU and NIC, and the port rate."),
}


def diagnose(code, detail=None, related=None):
    """{code, message, fix, related} for a failure code."""
    summary, fix = DIAGNOSES.get(code, ("The loopback test failed (%s)." % code, "See detail."))
    message = summary if not detail else "%s %s" % (summary, detail)
    return {"code": code, "message": message, "fix": fix, "related": list(related or [])}
