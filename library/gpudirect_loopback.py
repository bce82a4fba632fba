#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Prove GPUDirect RDMA on one node: RDMA WRITE loopback into GPU (or host) memory (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_loopback
short_description: Move a known pattern through an RDMA NIC into GPU or host memory, compare every byte, measure
description:
  - Connects an RC queue pair of one RDMA port to itself (loopback through the NIC), fills a
    destination buffer with pattern A, RDMA WRITEs a different pattern B from a source buffer,
    waits for the completion, copies the destination back (GPU memory with C(cuMemcpyDtoH) on an
    allocation with C(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) set, never through a CPU mapping) and
    compares every byte. A destination that still holds pattern A is reported as
    C(pattern_not_overwritten), the silent failure where every call succeeds and no data arrives.
  - Then measures the bandwidth of I(iterations) writes of I(size) bytes, as Gbit/s and as a
    fraction of the port rate and of the PCIe links of NIC and GPU; in a GPU mode also the staged
    path (RDMA WRITE into host memory, then C(cuMemcpyHtoD)) and the GPUDirect speedup.
  - The work is done by a small C helper, C(roles/gpudirect_verify/files/*.c, *.h), which the
    gpudirect_verify role ships to the node (I(source)). The module compiles it there with the
    distribution's C compiler and libibverbs headers into I(helper_dir), linked with
    C(-libverbs), and writes the sha256 of the source files and build flags next to the binary;
    it builds again only when that stamp differs from the files it is given. C(libcuda.so.1) is
    opened at run time, so no CUDA toolkit is needed on the node.
  - Devices are chosen by name or PCI address, or by topology from I(facts) (the closest GPU/NIC
    pair, PIX < PXB < PHB < NODE < SYS); never by a bare index.
  - On failure the result carries C(diagnosis) (code, message, fix, related path warnings) and
    nothing stays allocated (the helper is a separate process that releases everything).
  - B(Pair mode) proves the path between two hosts instead of one port in loopback. The server side
    (I(listen=true), the target) allocates the destination in the memory of I(mode), fills it with
    pattern A, registers it and waits on TCP I(pair_port) for the client. The client side
    (I(peer), the initiator) connects, both exchange QP number, LID, GID, MTU, address and rkey
    over that connection, connect their RC queue pairs to each other, and the client RDMA WRITEs
    pattern B from its source (also in the memory of its I(mode)). The server copies the
    destination back and compares every byte (its compare is the verdict, sent back to the
    client), then the client measures the bandwidth and sends it to the server. Both sides return
    the compare counts and the bandwidth; a failure on one side is reported on both.
  - Both sides of a pair must run at the same time. Run one task on both hosts with
    C(listen) true on one and C(peer) set on the other (the linear strategy runs it on both at
    once; it needs forks >= 2 and both hosts in one serial batch), or start the server with
    C(async) and poll 0, run the client, then collect the server with C(async_status) (see
    EXAMPLES). The client keeps trying to connect for I(pair_timeout) seconds, so the order in
    which the two start does not matter.
  - On RoCE each side uses the GID that carries its own address on the TCP connection (RoCE v2
    first), unless I(gid_index) is set, so that the RDMA traffic takes the network the exchange
    took; I(peer) must therefore be the server's address on the network of the RDMA ports. A
    client whose route to I(peer) leaves through an address that no GID of the chosen port
    carries fails early with C(no_gid).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  mode:
    description:
      - C(host) registers host memory (any RDMA device, soft-RoCE included).
      - C(cuda_peermem) registers C(cuMemAlloc) memory with C(ibv_reg_mr); needs C(nvidia_peermem).
      - C(cuda_dmabuf) exports C(cuMemAlloc) memory with C(cuMemGetHandleForAddressRange) and
        registers the dma-buf with C(ibv_reg_dmabuf_mr); needs the open NVIDIA module, a dma-buf
        capable kernel and RDMA driver.
      - C(auto) picks C(cuda_dmabuf), else C(cuda_peermem), else C(host), from I(facts) (or sysfs).
    type: str
    choices: [auto, host, cuda_peermem, cuda_dmabuf]
    default: auto
  facts:
    description:
      - C(ansible_facts.gpudirect) as gathered by C(gpudirect_facts). Used to choose devices by
        topology, to fail early on what the node cannot do, and for path warnings (distance, ACS).
      - Without it the module reads sysfs and needs explicit or unambiguous devices.
    type: dict
  rdma_device:
    description: RDMA device name (C(mlx5_0), C(rxe0)) or its PCI address. Default from topology.
    type: str
  gpu:
    description: PCI address of the GPU (C(0000:1b:00.0)). Default from topology. Never an index.
    type: str
  port:
    description: Port number of the RDMA device.
    type: int
    default: 1
  gid_index:
    description:
      - GID index for RoCE ports. Default the first RoCE v2 GID with an IPv4-mapped address, from
        C(/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/*). Ignored on InfiniBand.
    type: int
  size:
    description: Bytes per RDMA WRITE, and the size of the compared buffer (1 to 2 GiB).
    type: int
    default: 1048576
    aliases: [message_size]
  iterations:
    description: Number of writes in the bandwidth measurement (and in the staged one).
    type: int
    default: 100
  tx_depth:
    description: Writes in flight during the bandwidth measurement (clamped to the device limits).
    type: int
    default: 128
  staged:
    description:
      - In a GPU mode, also measure the staged path (RDMA into host memory, then cuMemcpyHtoD).
      - Loopback only; ignored in pair mode.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for completions before failing with C(completion_timeout).
    type: int
    default: 60
  min_ratio_port:
    description: Fail with C(bandwidth_below_minimum) when bandwidth / port rate is below this fraction.
    type: float
  source:
    description:
      - Paths on the node of the helper's source files; the C(.c) files are compiled together, the
        C(.h) files are found next to them. The gpudirect_verify role ships them and sets the fact
        C(gpudirect_verify_helper_source) to this list (C(include_role tasks_from=helper) alone
        does only that).
      - A directory stands for the C(.c) and C(.h) files in it (for ad-hoc calls on a node the
        role has run on, C(source=/var/lib/gpudirect/loopback/src)).
      - Their sha256 (names, contents, build flags) decides whether the helper in I(helper_dir) is
        rebuilt.
    type: list
    elements: path
    required: true
  helper_dir:
    description:
      - Where the compiled helper C(gpudirect_loopback_helper) and its stamp
        C(gpudirect_loopback_helper.sha256) are kept. Needs root for the default.
    type: path
    default: /var/lib/gpudirect/loopback
  build_only:
    description:
      - Build the helper from I(source) into I(helper_dir) when its stamp differs, and stop there
        without choosing devices or moving data (C(helper_built), C(helper_path), C(helper_sha256)).
      - The C(gpudirect_verify) role builds the helper this way once per platform, on one node, and
        copies the binary and its stamp to the other nodes of the platform, which then need no compiler.
    type: bool
    default: false
  selftest_gpu_only:
    description:
      - Run only the CUDA half, for a GPU node without RDMA NIC - allocate GPU memory, set
        SYNC_MEMOPS, export it as a dma-buf with C(cuMemGetHandleForAddressRange), round-trip
        patterns A and B through it (H2D, D2H, compare every byte) and measure pinned H2D/D2H
        bandwidth (the copy of the staged path). No RDMA device is used.
    type: bool
    default: false
  listen:
    description:
      - Pair mode, server side (the target) - own the destination buffer, wait on TCP I(pair_port)
        (all addresses) for the client, compare every byte after its write.
      - Excludes I(peer). With C(false) and no I(peer) the module runs the loopback.
      - Name I(rdma_device) when the host has several (the server cannot know the client's network
        before it connects).
    type: bool
    default: false
  peer:
    description:
      - Pair mode, client side (the initiator) - address or name of the server host, on the network
        of the RDMA ports (RoCE GIDs are derived from it). The client writes into the server's
        buffer and measures the bandwidth.
      - Without I(rdma_device), a host with several RDMA devices uses the one whose GIDs carry
        this host's address on the route to I(peer).
      - Excludes I(listen).
    type: str
  pair_port:
    description:
      - TCP port of the out-of-band exchange (QP number, LID/GID, MTU, address, rkey, verdict).
      - The same on both sides.
    type: int
    default: 18516
  pair_timeout:
    description:
      - Seconds the server waits for the client to connect, and the client keeps trying to reach the
        server (it may not listen yet). Each later message may take I(pair_timeout) + I(timeout).
      - On expiry the server fails with C(pair_timeout), the client with C(peer_unreachable).
    type: int
    default: 120
  _corrupt_one_byte:
    description:
      - For tests. After the transfer completes, flips the lowest bit of one destination byte
        (offset I(size)/2+1), in GPU memory with C(cuMemsetD8), before the copy-back. The copy-back
        and the byte compare then must report a C(data_mismatch) at that offset, which proves that
        the comparison can fail.
      - In pair mode the destination is on the server - set it there; the client then fails with
        the server's C(data_mismatch) too.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description:
      - Chooses devices and reports the commands it would run (C(would_run)), with the build first
        when the stamp differs from I(source) (then C(changed)); builds and moves nothing.
  diff_mode:
    support: none
    description: Nothing on the node is configured.
extends_documentation_fragment:
  - gpudirect_attributes
notes:
  - Run with C(become) - the helper cache is under C(/var/lib) and registering memory needs a
    sufficient memlock limit (root has CAP_IPC_LOCK).
  - C(changed) is true only when the helper had to be built (no binary, or its stamp is not the
    sha256 of I(source) and the build flags).
  - Soft-RoCE (rdma_rxe) is CPU-bound; its port rate is nominal, so C(ratio_port) means little there.
  - C(cuda_dmabuf) and C(cuda_peermem) with an RDMA NIC (GPU memory registered with
    C(ibv_reg_dmabuf_mr) or through C(nvidia_peermem), and the NIC's write into it) have not run on
    real hardware in this project's tests, for want of a machine with an RDMA NIC next to a GPU.
    What has run is C(host) mode, loopback and pair, over soft-RoCE in qemu VMs, and
    I(selftest_gpu_only) on NVIDIA H100/H200 GPUs in VMs without an RDMA NIC.
  - Pair mode - both sides need the same I(size), I(pair_port) and module version (C(pair_mismatch)
    otherwise). The helper build happens before the exchange, so a first run on a fresh host
    spends part of I(pair_timeout) compiling.
requirements:
  - A C compiler and the libibverbs development files on the node (C(build-essential libibverbs-dev)
    on Debian/Ubuntu, C(gcc rdma-core-devel) on the RHEL family).
  - For GPU modes, the NVIDIA driver (C(libcuda.so.1)).
"""

EXAMPLES = r"""
# The C source goes to the node first: the role's tasks_from=helper ships it (and the
# compiler and headers it needs) and sets gpudirect_verify_helper_source to its paths.
- name: Ship the helper source
  ansible.builtin.include_role:
    name: gpudirect_verify
    tasks_from: helper

- name: Prove GPUDirect RDMA on the closest GPU/NIC pair, in the mode the node supports
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    facts: "{{ ansible_facts.gpudirect }}"
  become: true
  register: loopback

- name: dma-buf path on a named pair, 4 MiB writes
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    mode: cuda_dmabuf
    rdma_device: mlx5_0
    gpu: "0000:1b:00.0"
    size: 4194304
    iterations: 200
  become: true

- name: Soft-RoCE host-memory loopback on a test VM
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    mode: host
    rdma_device: rxe0
    size: 65536
  become: true

- name: CUDA half only, on a GPU node without NIC
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    selftest_gpu_only: true
    facts: "{{ ansible_facts.gpudirect }}"
  become: true

# Pair mode, one task on both hosts of a play (hosts: node-a:node-b): Ansible runs it
# on both at once; node-a listens, node-b writes into node-a's GPU memory from its own.
# rdma_address is an inventory variable: each host's address on the RDMA network.
- name: RDMA WRITE from node-b into node-a over the fabric, compare on node-a
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    facts: "{{ ansible_facts.gpudirect }}"
    mode: cuda_dmabuf
    listen: "{{ inventory_hostname == 'node-a' }}"
    peer: "{{ omit if inventory_hostname == 'node-a' else hostvars['node-a'].rdma_address }}"
  become: true
  register: pair

# Pair mode when the two sides cannot share one task (other plays, serial batches):
# the server in the background, the client, then the server's result.
- name: Start the pair server on node-a
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    mode: host
    rdma_device: mlx5_0
    listen: true
    pair_timeout: 300
  become: true
  async: 600
  poll: 0
  register: pair_server
  when: inventory_hostname == 'node-a'

- name: Write from node-b into node-a's buffer, measure the bandwidth
  gpudirect_loopback:
    source: "{{ gpudirect_verify_helper_source }}"
    mode: host
    peer: "{{ hostvars['node-a'].rdma_address }}"
  become: true
  register: pair_client
  when: inventory_hostname == 'node-b'

- name: Collect the server's compare
  ansible.builtin.async_status:
    jid: "{{ pair_server.ansible_job_id }}"
  become: true
  register: pair_verdict
  until: pair_verdict.finished
  retries: 60
  delay: 5
  when: inventory_hostname == 'node-a'
"""

RETURN = r"""
changed:
  description: Whether the helper was built in this run.
  returned: always
  type: bool
mode:
  description: Memory mode used (C(host), C(cuda_peermem), C(cuda_dmabuf), C(selftest_gpu_only)).
  returned: always
  type: str
  sample: cuda_dmabuf
mode_reason:
  description: Why this mode (C(requested) or what C(auto) found).
  returned: always
  type: str
rdma_device:
  description: RDMA device used, null in selftest or when none was found.
  returned: always
  type: str
  sample: mlx5_0
port:
  description: Port used.
  returned: always
  type: int
gid_index:
  description: GID index used on a RoCE port, null on InfiniBand or when not reached.
  returned: always
  type: int
gpu:
  description: PCI address of the GPU, null in host mode.
  returned: always
  type: str
  sample: "0000:1b:00.0"
selection:
  description: Why these devices (named, only one, closest pair) and the pair's distance.
  returned: always
  type: dict
bytes_compared:
  description: Bytes copied back and compared (I(size)).
  returned: when the helper ran
  type: int
mismatches:
  description: Bytes that differ from what was sent.
  returned: when the helper ran
  type: int
first_mismatch:
  description: Offset of the first differing byte, null when none.
  returned: when the helper ran
  type: int
bandwidth_gbps:
  description: RDMA WRITE bandwidth into the destination, Gbit/s (10^9 bit/s).
  returned: when the helper ran
  type: float
port_rate_gbps:
  description: Port rate from sysfs or facts, Gbit/s.
  returned: always
  type: float
ratio_port:
  description: bandwidth_gbps / port_rate_gbps.
  returned: always
  type: float
pcie_gbps:
  description: Slowest PCIe link of NIC and GPU (data rate after line encoding), null when unknown.
  returned: always
  type: float
ratio_pcie:
  description: bandwidth_gbps / pcie_gbps.
  returned: always
  type: float
staged_bandwidth_gbps:
  description: RDMA WRITE into host memory followed by cuMemcpyHtoD, Gbit/s; null in host mode.
  returned: always
  type: float
speedup:
  description: bandwidth_gbps / staged_bandwidth_gbps (GPUDirect over staging).
  returned: always
  type: float
helper_wall_s:
  description:
    - Seconds the helper ran, as the module timed it (the whole data path of this call - CUDA context, allocations,
      dma-buf export, every iteration, the compare - without building the helper or Ansible's own overhead).
  returned: when the helper ran
  type: float
  sample: 0.912
h2d_bandwidth_gbps:
  description: Pinned host-to-device copy bandwidth (selftest_gpu_only), Gbit/s.
  returned: with selftest_gpu_only
  type: float
diagnosis:
  description: Null on success; on failure code, message, fix and related path warnings.
  returned: always
  type: dict
  sample: {"code": "pattern_not_overwritten", "message": "...", "fix": "...", "related": []}
path_warnings:
  description: Warnings about the GPU/NIC path (PHB/NODE/SYS distance, ACS redirect).
  returned: always
  type: list
  elements: str
facts_seen:
  description: Devices, GPUs, pairs and peer-memory state the module saw (on failures about devices).
  returned: on failure
  type: dict
helper_path:
  description: Path of the compiled helper.
  returned: always
  type: str
helper_built:
  description: Whether the helper was compiled in this run.
  returned: always
  type: bool
helper_sha256:
  description: sha256 of I(source) and the build flags, as the stamp next to the helper records it; null in
    check mode when I(source) is not on the node yet.
  returned: always
  type: str
would_run:
  description: In check mode, the commands (argument lists) that would run.
  returned: in check mode
  type: list
pair_role:
  description: C(server) or C(client) in pair mode, null in loopback.
  returned: always
  type: str
peer:
  description: The other host of the pair - the client's address as the server saw it, or the server's address.
  returned: in pair mode
  type: str
  sample: 10.99.0.2
peer_address:
  description: The address I(peer) resolved to (client side).
  returned: in pair mode, client side
  type: str
pair_port:
  description: TCP port of the exchange.
  returned: in pair mode
  type: int
local_address:
  description: This host's address on the TCP connection (the one its GID carries on RoCE).
  returned: in pair mode, once connected
  type: str
gid:
  description: The GID used on a RoCE port, as C(index), C(type) and C(gid) (sysfs text form).
  returned: on RoCE, once chosen
  type: dict
  sample: {"index": 1, "type": "RoCE v2", "gid": "0000:0000:0000:0000:0000:ffff:0a63:0001"}
remote_gid:
  description: The other side's GID (pair mode, RoCE).
  returned: in pair mode, once connected
  type: str
peer_mode:
  description: The memory mode of the other side (pair mode).
  returned: in pair mode, once connected
  type: str
peer_error:
  description: The other side's failure code when it failed first (with C(peer_failed) here).
  returned: in pair mode
  type: str
helper:
  description: The helper's own JSON result.
  returned: when the helper ran
  type: dict
command:
  description: The helper command line (argument list).
  returned: when the helper ran
  type: list
"""

import os
import time
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import C_LOCALE
from ansible.module_utils.gpudirect_loopback_build import (
    build, build_command, helper_digest, helper_is_current, helper_paths, read_sources, source_paths)
from ansible.module_utils.gpudirect_loopback_helper import (
    GPU_MODES, LoopbackError, check_mode_supported, diagnose, facts_summary, find_gpu, gid_addresses, gid_for_address,
    gid_table, live_pci_link, parse_helper_output,
    path_warnings, pcie_gbps, pick_gid_index, resolve_mode, resolve_peer, route_source, scan_gpus, select_devices,
    unwrap_facts)
from ansible.module_utils.gpudirect_rdma_sysfs import scan_port, scan_rdma_devices

ROOT = "/"   # sysfs/procfs root; unit tests point it at a fabricated tree
MAX_SIZE = 1 << 31


class Loopback(object):

    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.result = {
            "changed": False, "mode": self.p["mode"], "mode_reason": None, "rdma_device": None,
            "port": self.p["port"], "gid_index": None, "gpu": None, "selection": {}, "port_rate_gbps": None,
            "ratio_port": None, "pcie_gbps": None, "ratio_pcie": None, "bandwidth_gbps": None,
            "staged_bandwidth_gbps": None, "speedup": None, "diagnosis": None, "path_warnings": [],
            "helper_path": None, "helper_built": False, "helper_sha256": None,
            "pair_role": "server" if self.p["listen"] else "client" if self.p["peer"] else None,
        }
        if self.result["pair_role"]:
            self.result.update(pair_port=self.p["pair_port"], peer=self.p["peer"])
        self.pair_gid_auto = False
        self.facts = None
        self.devices = []
        self.gpus = []
        self.pair = None

    # ------------------------------------------------------------------
    def fail(self, code, detail, **extra):
        result = dict(self.result)
        result.update(extra)
        result["diagnosis"] = diagnose(code, detail, self.result["path_warnings"])
        if code in ("no_rdma_device", "unknown_rdma_device", "unknown_gpu", "no_gpu", "port_down",
                    "peermem_not_loaded", "dmabuf_unsupported", "memlock_too_low"):
            result["facts_seen"] = facts_summary(self.facts, self.devices, self.gpus)
        msg = "%s What to do: %s" % (result["diagnosis"]["message"], result["diagnosis"]["fix"])
        if self.result["path_warnings"] and code not in ("no_rdma_device", "bad_input"):
            msg += " Path: " + " ".join(self.result["path_warnings"])
        self.module.fail_json(msg=msg, **result)

    # ------------------------------------------------------------------
    def validate(self):
        p = self.p
        if p["size"] < 1 or p["size"] > MAX_SIZE:
            self.fail("bad_input", "size must be 1..%d bytes, got %d." % (MAX_SIZE, p["size"]))
        for name in ("iterations", "tx_depth", "timeout", "port"):
            if p[name] < 1:
                self.fail("bad_input", "%s must be >= 1, got %d." % (name, p[name]))
        if p["selftest_gpu_only"] and p["rdma_device"]:
            self.fail("bad_input", "selftest_gpu_only uses no RDMA device: leave rdma_device out.")
        if not any(path.endswith(".c") or os.path.isdir(path) for path in p["source"]):
            self.fail("bad_input", "source lists no .c file (%s): pass gpudirect_verify_helper_source, the paths the "
                      "role's tasks_from=helper ships." % (", ".join(p["source"]) or "empty"))
        if p["listen"] and p["peer"]:
            self.fail("bad_input", "listen (the server side) and peer (the client side) exclude each other: give the "
                      "server listen: true and the client peer: <server address>.")
        if self.result["pair_role"]:
            if p["selftest_gpu_only"]:
                self.fail("bad_input", "selftest_gpu_only moves no data over RDMA: leave listen and peer out.")
            if not 1 <= p["pair_port"] <= 65535:
                self.fail("bad_input", "pair_port must be 1..65535, got %d." % p["pair_port"])
            if p["pair_timeout"] < 1:
                self.fail("bad_input", "pair_timeout must be >= 1, got %d." % p["pair_timeout"])
            if p["peer"] is not None and not p["peer"].strip():
                self.fail("bad_input", "peer is empty: give the server's address, or leave peer out.")
            if p["peer"] and p["_corrupt_one_byte"]:
                self.fail("bad_input", "_corrupt_one_byte flips a byte of the destination, which is on the server: "
                          "set it on the listen side.")

    def inventory(self):
        self.facts = unwrap_facts(self.p["facts"])
        if self.facts:
            self.devices = list(self.facts.get("rdma_devices") or [])
            self.gpus = list(self.facts.get("gpus") or [])
        else:
            self.devices = scan_rdma_devices(ROOT)
            self.gpus = scan_gpus(ROOT)

    def peer_route(self):
        """Client side: the peer's address and this host's address on the route to it."""
        address = resolve_peer(self.p["peer"].strip(), self.p["pair_port"])
        self.result["peer_address"] = address
        self.result["local_address"] = route_source(address, self.p["pair_port"])

    def device_on_route(self):
        """Client side without rdma_device: the one device whose GIDs carry the route's source address."""
        source = self.result.get("local_address")
        if not source or self.p["rdma_device"] or len(self.devices) < 2:
            return None
        on_route = [d["name"] for d in self.devices
                    if any(gid_for_address(gid_table(ROOT, d["name"], port), source)
                           for port in (d.get("ports") or {}))]
        return on_route[0] if len(on_route) == 1 else None

    def choose(self):
        p = self.p
        if p["selftest_gpu_only"]:
            mode, reason = "selftest", "selftest_gpu_only"
        else:
            mode, reason = resolve_mode(p["mode"], self.facts, self.gpus, ROOT)
            if not self.devices:
                # the memory it would have tested and the GPU named stay in the result: the role's
                # record then says which GPU (or host memory) went without a NIC
                self.result["mode"], self.result["mode_reason"] = mode, reason
                if p["gpu"] and mode != "host":
                    self.result["gpu"] = find_gpu(self.gpus, p["gpu"])["address"]
                raise LoopbackError("no_rdma_device", "Seen: %s (from %s)." % (
                    "GPUs " + ", ".join(g["address"] for g in self.gpus) if self.gpus else "no GPU either",
                    "facts" if self.facts else "sysfs"))
        self.result["mode"] = "selftest_gpu_only" if mode == "selftest" else mode
        self.result["mode_reason"] = reason
        on_route = self.device_on_route()
        dev, gpu, pair, why = select_devices(self.devices, self.gpus, (self.facts or {}).get("pairs"), mode,
                                             p["rdma_device"] or on_route, p["gpu"], p["port"])
        if on_route:
            why = "the device whose GIDs carry %s, this host's address towards peer %s" % (
                self.result["local_address"], self.result["peer_address"])
        self.pair = pair
        self.result["rdma_device"] = dev["name"] if dev else None
        self.result["gpu"] = gpu["address"] if gpu and mode != "host" else None
        self.result["selection"] = {"reason": why, "distance": pair.get("distance") if pair else None,
                                    "rdma_pci_address": dev.get("pci_address") if dev else None}
        self.result["path_warnings"] = path_warnings(pair) if mode in GPU_MODES else []
        for warning in self.result["path_warnings"]:
            self.module.warn(warning)
        if mode in GPU_MODES:
            check_mode_supported(mode, self.facts)
        if gpu and gpu.get("memory_total_mib") and p["size"] > gpu["memory_total_mib"] * (1 << 20):
            raise LoopbackError("size_exceeds_gpu_memory", "size %d bytes is larger than the %d MiB of GPU %s."
                                % (p["size"], gpu["memory_total_mib"], gpu["address"]))
        return mode, dev, gpu

    def port_checks(self, dev):
        p = self.p
        live = scan_port(ROOT, dev["name"], p["port"])
        port = live or (dev.get("ports") or {}).get(str(p["port"]))
        if port is None:
            raise LoopbackError("port_down", "%s has no port %d (ports: %s)." % (
                dev["name"], p["port"], ", ".join(sorted((dev.get("ports") or {}).keys())) or "none"))
        self.result["port_rate_gbps"] = port.get("rate_gbps")
        if (port.get("state") or "").upper() != "ACTIVE":
            raise LoopbackError("port_down", "Port %d of %s is %s (physical state %s)." % (
                p["port"], dev["name"], port.get("state"), port.get("phys_state")))
        if (port.get("link_layer") or "") == "Ethernet":
            if p["gid_index"] is not None:
                self.result["gid_index"] = p["gid_index"]
            elif self.result["pair_role"]:
                self.pair_gid(dev, port)
            else:
                chosen = pick_gid_index(gid_table(ROOT, dev["name"], p["port"]))
                if chosen is None:
                    raise LoopbackError("no_gid", "Port %d of %s (netdev %s) has no populated RoCE GID." % (
                        p["port"], dev["name"], port.get("netdev")))
                self.result["gid_index"] = chosen[0]
                self.result["gid"] = {"index": chosen[0], "type": chosen[1], "gid": chosen[2]}

    def pair_gid(self, dev, port):
        """Pair mode on RoCE: the GID that carries this side's address on the TCP connection. The
        helper chooses it once connected (--gid-index auto); the client checks here that one exists."""
        p = self.p
        table = gid_table(ROOT, dev["name"], p["port"])
        if not table:
            raise LoopbackError("no_gid", "Port %d of %s (netdev %s) has no populated RoCE GID." % (
                p["port"], dev["name"], port.get("netdev")))
        self.pair_gid_auto = True
        source = self.result.get("local_address")
        if self.result["pair_role"] != "client" or not source:
            return
        chosen = gid_for_address(table, source)
        if chosen is None:
            raise LoopbackError("no_gid", "no GID of %s port %d carries %s, the address this host reaches peer %s (%s) "
                                "from: the RDMA port is not on the peer's subnet (its GIDs carry %s). Give peer as the "
                                "server's address on the network of %s, name the rdma_device on the peer's network, or "
                                "set gid_index." % (dev["name"], p["port"], source, p["peer"],
                                                    self.result["peer_address"],
                                                    ", ".join(gid_addresses(table)) or "no IP address", dev["name"]))
        self.result["gid_index"] = chosen[0]
        self.result["gid"] = {"index": chosen[0], "type": chosen[1], "gid": chosen[2]}

    def pcie(self, dev, gpu):
        links = [live_pci_link(ROOT, dev.get("pci_address")) if dev else None]
        if gpu:
            link = gpu.get("link") or {}
            links.append(pcie_gbps(link.get("current_speed_gts"), link.get("current_width"))
                         or live_pci_link(ROOT, gpu.get("address")))
        known = [x for x in links if x]
        # a link that is unknown for one end leaves the path unknown
        return min(known) if known and len(known) == len(links) else None

    # ------------------------------------------------------------------
    def helper_command(self, binary, mode, dev, gpu):
        p = self.p
        if mode == "selftest":
            cmd = [binary, "--selftest-gpu-only", "--gpu", gpu["address"]]
        else:
            cmd = [binary, "--mode", mode, "--device", dev["name"], "--port", str(p["port"])]
            if self.pair_gid_auto:
                cmd += ["--gid-index", "auto"]
            elif self.result["gid_index"] is not None:
                cmd += ["--gid-index", str(self.result["gid_index"])]
            if mode in GPU_MODES:
                cmd += ["--gpu", gpu["address"]]
                if not self.result["pair_role"]:
                    cmd += ["--staged", "1" if p["staged"] else "0"]
            cmd += ["--depth", str(p["tx_depth"])]
        cmd += ["--size", str(p["size"]), "--iters", str(p["iterations"]), "--timeout", str(p["timeout"])]
        if self.result["pair_role"] == "server":
            cmd += ["--pair-listen"]
        elif self.result["pair_role"] == "client":
            cmd += ["--pair-peer", self.result["peer_address"]]
        if self.result["pair_role"]:
            cmd += ["--pair-port", str(p["pair_port"]), "--pair-timeout", str(p["pair_timeout"])]
        if p["_corrupt_one_byte"]:
            cmd.append("--corrupt")
        return cmd

    def helper_state(self):
        """(binary, stamp, sources, digest, current): the helper in helper_dir against the source."""
        binary, stamp = helper_paths(self.p["helper_dir"])
        sources = source_paths(self.p["source"])
        try:
            files = read_sources(sources, self.module.check_mode)
        except LoopbackError as exc:
            self.fail(exc.code, exc.message, **exc.extra)
        digest = helper_digest(files) if files is not None else None
        self.result.update(helper_path=binary, helper_sha256=digest)
        return binary, stamp, sources, digest, digest is not None and helper_is_current(binary, stamp, digest)

    def build_helper(self, sources, binary, stamp, digest):
        try:
            build(self.module, sources, binary, stamp, digest)
        except LoopbackError as exc:
            self.fail(exc.code, exc.message, **exc.extra)
        self.result.update(helper_built=True, changed=True)

    def build_only(self):
        binary, stamp, sources, digest, current = self.helper_state()
        if self.module.check_mode:
            self.result.update(changed=not current, would_run=[] if current else [build_command("cc", sources, binary)])
        elif not current:
            self.build_helper(sources, binary, stamp, digest)
        self.module.exit_json(**self.result)

    def run(self):
        self.validate()
        if self.p["build_only"]:
            self.build_only()
        try:
            if self.result["pair_role"] == "client":
                self.peer_route()
            self.inventory()
            mode, dev, gpu = self.choose()
            if mode != "selftest":
                self.port_checks(dev)
                self.result["pcie_gbps"] = self.pcie(dev, gpu if mode in GPU_MODES else None)
        except LoopbackError as exc:
            self.fail(exc.code, exc.message, **exc.extra)
        binary, stamp, sources, digest, current = self.helper_state()
        cmd = self.helper_command(binary, mode, dev, gpu)
        if self.module.check_mode:
            would = [] if current else [build_command("cc", sources, binary)]
            self.result.update(changed=not current, would_run=would + [cmd])
            self.module.exit_json(**self.result)
        if not current:
            self.build_helper(sources, binary, stamp, digest)
        started = time.monotonic()
        rc, out, err = self.module.run_command(cmd, environ_update=dict(C_LOCALE))
        self.result["helper_wall_s"] = round(time.monotonic() - started, 3)
        self.result["command"] = cmd
        try:
            helper = parse_helper_output(out)
        except ValueError as exc:
            self.fail("helper_output_malformed", "%s (rc=%s)." % (exc, rc), rc=rc, stdout=out, stderr=err)
        self.result["helper"] = helper
        self.absorb(helper, mode)
        if not helper.get("ok"):
            code = helper.get("error") or "helper_failed"
            detail = helper.get("detail") or ""
            if helper.get("stage"):
                detail = "%s [stage %s, errno %s]" % (detail, helper.get("stage"), helper.get("errno"))
            if self.p["_corrupt_one_byte"] and code in ("data_mismatch", "pattern_not_overwritten"):
                detail += " (expected here: _corrupt_one_byte flipped one destination byte on purpose)"
            if code == "memlock_too_low" and self.facts:
                detail += " memlock seen by gpudirect_facts: %s" % (self.facts.get("memlock"),)
            if code == "data_mismatch" and self.result["pair_role"] == "client" and helper.get("stage") == \
                    "compare_on_server":
                detail += " (the server compared; with _corrupt_one_byte on the server this is expected)"
            self.fail(code, detail, rc=rc, stderr=err)
        minimum = self.p["min_ratio_port"]
        if minimum is not None and self.result["ratio_port"] is not None and self.result["ratio_port"] < minimum:
            self.fail("bandwidth_below_minimum", "%.3f Gbit/s is %.3f of the %.1f Gbit/s port, below %.3f." % (
                self.result["bandwidth_gbps"], self.result["ratio_port"], self.result["port_rate_gbps"], minimum))
        self.module.exit_json(**self.result)

    def absorb(self, helper, mode):
        r = self.result
        for key in ("bytes_compared", "mismatches", "bandwidth_gbps", "staged_bandwidth_gbps", "h2d_bandwidth_gbps",
                    "d2h_bandwidth_gbps", "gpu_name", "link_layer", "active_mtu", "elapsed_s"):
            if key in helper:
                r[key] = helper[key]
        r["first_mismatch"] = helper.get("first_mismatch")
        if r["pair_role"]:
            self.absorb_pair(helper)
        if mode == "selftest":
            r["dmabuf_exported"] = bool(helper.get("dmabuf_exported"))
            return
        bw = r.get("bandwidth_gbps")
        if bw and r["port_rate_gbps"]:
            r["ratio_port"] = round(bw / r["port_rate_gbps"], 4)
        if bw and r["pcie_gbps"]:
            r["ratio_pcie"] = round(bw / r["pcie_gbps"], 4)
        if bw and r.get("staged_bandwidth_gbps"):
            r["speedup"] = round(bw / r["staged_bandwidth_gbps"], 3)

    def absorb_pair(self, helper):
        r = self.result
        for key in ("peer", "local_address", "remote_gid", "peer_mode", "peer_error"):
            if helper.get(key) is not None:
                r[key] = helper[key]
        index = helper.get("gid_index")
        if helper.get("gid") and index is not None and index >= 0:
            types = dict((entry[0], entry[1]) for entry in gid_table(ROOT, r["rdma_device"], self.p["port"]))
            r["gid_index"] = index
            r["gid"] = {"index": index, "type": types.get(index), "gid": helper["gid"]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="auto", choices=["auto", "host", "cuda_peermem", "cuda_dmabuf"]),
            facts=dict(type="dict"),
            rdma_device=dict(type="str"),
            gpu=dict(type="str"),
            port=dict(type="int", default=1),
            gid_index=dict(type="int"),
            size=dict(type="int", default=1048576, aliases=["message_size"]),
            iterations=dict(type="int", default=100),
            tx_depth=dict(type="int", default=128),
            staged=dict(type="bool", default=True),
            timeout=dict(type="int", default=60),
            min_ratio_port=dict(type="float"),
            source=dict(type="list", elements="path", required=True),
            helper_dir=dict(type="path", default="/var/lib/gpudirect/loopback"),
            build_only=dict(type="bool", default=False),
            selftest_gpu_only=dict(type="bool", default=False),
            listen=dict(type="bool", default=False),
            peer=dict(type="str"),
            pair_port=dict(type="int", default=18516),
            pair_timeout=dict(type="int", default=120),
            _corrupt_one_byte=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    try:
        Loopback(module).run()
    except Exception as exc:  # a bug, not a node problem: say so with the traceback
        module.fail_json(msg="gpudirect_loopback failed unexpectedly: %s" % exc, exception=traceback.format_exc())


if __name__ == "__main__":
    main()
