#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Read-only survey of a GPU server for GPUDirect RDMA (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_facts
short_description: Survey GPUs, RDMA NICs, PCIe topology, ACS, IOMMU and peer-memory state for GPUDirect RDMA
description:
  - Reads sysfs and procfs (never writes) and returns C(ansible_facts.gpudirect).
  - Lists NVIDIA GPUs (vendor 0x10de, class 0x0300xx/0x0302xx) and RDMA devices
    (C(/sys/class/infiniband), ConnectX ports as well as soft-RoCE C(rxe) devices),
    the PCIe bridges between each of them and its root complex, and for every GPU x RDMA
    device pair the distance class with the meaning of C(nvidia-smi topo -m)
    (PIX, PXB, PHB, NODE, SYS) and the ACS state of the bridges on the pair's path.
  - Also reports the NVIDIA kernel module version and flavour (open or proprietary),
    Mellanox PCI functions left without a driver, IOMMU mode, peer-memory modules,
    dma-buf prerequisites, running versus default boot kernel, the memlock limit and
    driver faults in the kernel log.
  - ACS registers are found by walking the PCI capability lists, never at fixed
    offsets. Reading them needs root (become), since unprivileged reads of
    C(/sys/bus/pci/devices/*/config) stop after 64 bytes; such bridges are reported
    with C(status=unknown) and C(readable=false), as are bridges whose extended
    configuration space is not readable (256-byte config file of a PCI Express function)
    or whose capability list is corrupt. A path through such a bridge is never called
    ACS-clear (C(acs_verdict=unknown)).
  - A host without GPU or RDMA device gives empty lists, not an error. A device that
    cannot be parsed is skipped and named in C(warnings).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers
options:
  root:
    description:
      - Directory holding the C(sys/), C(proc/), C(boot/) and C(var/) trees to read.
      - Leave at C(/) on a live host. Point it at a captured or fabricated tree to
        analyse a node offline; live probes (C(nvidia-smi), C(dmesg), C(grubby)) then
        stay off because they would describe this host, not the tree.
    type: path
    default: /
  nvidia_smi:
    description:
      - Run C(nvidia-smi --query-gpu) when it is installed and add name, index, compute
        capability and memory size to the matching GPU (matched by PCI bus id).
      - Without C(nvidia-smi) the GPUs are still reported from sysfs.
    type: bool
    default: true
  kernel_log:
    description:
      - Read the kernel log with C(dmesg) for Oops, NVIDIA Xid and C(NVRM ... failed) lines.
      - Most hosts restrict C(dmesg) to root; a failure is reported in
        C(kernel_oops.reason), never as a module failure.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode returns the same facts.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
  platform:
    platforms: linux
    description: Linux sysfs and procfs.
notes:
  - C(changed) is always false.
  - C(memlock) reports what RDMA jobs get, not the limit of the module process.
    C(memlock.login) is what pam_limits gives a new login session of an ordinary user
    (limits.conf and limits.d with pam_limits' precedence), C(memlock.service) what a
    unit started now gets (C(systemctl show DefaultLimitMEMLOCK)). The module
    process (the Ansible session, usually root, which C(*) does not cover) is
    C(memlock.session).
  - Distance classes follow the C(nvidia-smi topo -m) legend; NVLink is not considered.
requirements:
  - Linux with sysfs mounted at C(<root>/sys).
"""

EXAMPLES = r"""
- name: Survey the node
  gpudirect_facts:

- name: Show the closest GPU/NIC pair
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpudirect.pairs | sort(attribute='distance') | first | default('no pair') }}"

- name: Analyse a captured tree offline, without live probes
  gpudirect_facts:
    root: /srv/captures/node17
  delegate_to: localhost

- name: Survey without running nvidia-smi or dmesg
  gpudirect_facts:
    nvidia_smi: false
    kernel_log: false
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    gpudirect:
      description: Everything the GPUDirect RDMA roles need to know about the node.
      returned: always
      type: dict
      contains:
        root:
          description: The tree that was read (the C(root) option).
          returned: always
          type: str
          sample: /
        gpus:
          description: NVIDIA GPUs (vendor 0x10de, class 0x0300xx or 0x0302xx), sorted by PCI address.
          returned: always
          type: list
          elements: dict
          contains:
            ordinal:
              description: Position in this list (0-based).
              type: int
              sample: 0
            address:
              description: PCI address (domain:bus:device.function).
              type: str
              sample: "0000:00:06.0"
            vendor_id:
              description: PCI vendor id.
              type: str
              sample: "0x10de"
            device_id:
              description: PCI device id.
              type: str
              sample: "0x2335"
            class:
              description: PCI class code.
              type: str
              sample: "0x030200"
            subsystem_vendor_id:
              description: PCI subsystem vendor id, null when not exposed.
              type: str
              sample: "0x10de"
            subsystem_device_id:
              description: PCI subsystem device id, null when not exposed.
              type: str
              sample: "0x18be"
            numa_node:
              description: NUMA node of the function, -1 when unknown.
              type: int
              sample: 0
            driver:
              description: Bound driver, null when none.
              type: str
              sample: nvidia
            port_type:
              description: PCIe device/port type from the PCIe capability, null when unreadable.
              type: str
              sample: endpoint
            link:
              description: PCIe link; every value null when sysfs does not say.
              type: dict
              contains:
                current_speed_gts:
                  description: Current link speed in GT/s.
                  type: float
                  sample: 32.0
                current_width:
                  description: Current link width (lanes).
                  type: int
                  sample: 16
                max_speed_gts:
                  description: Maximum link speed in GT/s.
                  type: float
                  sample: 32.0
                max_width:
                  description: Maximum link width (lanes).
                  type: int
                  sample: 16
            path:
              description: PCI addresses of the bridges from the root port down to the GPU.
              type: list
              elements: str
              sample: ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
            root_complex:
              description: Host bridge the GPU hangs from (sysfs C(pciDDDD:BB)).
              type: str
              sample: "pci0000:00"
            index:
              description: nvidia-smi index, null without nvidia-smi.
              type: int
              sample: 0
            name:
              description: Product name from nvidia-smi, null without nvidia-smi.
              type: str
              sample: NVIDIA H200
            compute_cap:
              description: CUDA compute capability from nvidia-smi, null without nvidia-smi.
              type: str
              sample: "9.0"
            memory_total_mib:
              description: Memory size in MiB from nvidia-smi, null without nvidia-smi.
              type: int
              sample: 143771
        nvidia_driver:
          description: NVIDIA kernel module, from C(/proc/driver/nvidia/version).
          returned: always
          type: dict
          contains:
            loaded:
              description: Whether the nvidia kernel module is loaded.
              type: bool
              sample: true
            version:
              description: Kernel module version, null when not loaded.
              type: str
              sample: "580.159.04"
            flavor:
              description: C(open) (NVIDIA UNIX Open Kernel Module) or C(proprietary); null when unknown.
              type: str
              sample: open
        rdma_devices:
          description: RDMA devices from C(/sys/class/infiniband), sorted by name.
          returned: always
          type: list
          elements: dict
          contains:
            name:
              description: RDMA device name.
              type: str
              sample: mlx5_0
            kind:
              description: C(hca) (PCI function), C(soft-roce) (rdma_rxe) or C(soft-iwarp) (siw).
              type: str
              sample: hca
            driver:
              description: Driver of the PCI function, or C(rdma_rxe)/C(siw) for software devices.
              type: str
              sample: mlx5_core
            pci_address:
              description: PCI function of the device; for software devices the PCI function of
                the parent netdev; null for a purely virtual netdev.
              type: str
              sample: "0000:04:00.0"
            numa_node:
              description: NUMA node of that PCI function, -1 when unknown.
              type: int
              sample: 0
            parent_netdev:
              description: Netdev a software RDMA device is bound to, null for an HCA.
              type: str
              sample: eth0
            node_type:
              description: Node type without its number (C(CA), C(RNIC), ...).
              type: str
              sample: CA
            node_guid:
              description: Node GUID, null when absent.
              type: str
              sample: "b859:9f03:00a1:b2c4"
            fw_ver:
              description: Firmware version, null when absent (software devices).
              type: str
              sample: "20.39.1002"
            link:
              description:
                - PCIe link of the device's PCI function (C(current_speed_gts), C(current_width), C(max_speed_gts),
                  C(max_width), as for GPUs); null for a software device without one.
              type: dict
              sample: {"current_speed_gts": 16.0, "current_width": 16, "max_speed_gts": 16.0, "max_width": 16}
            netdevs:
              description: Network interfaces of the device.
              type: list
              elements: str
              sample: [ib0]
            ports:
              description: Ports keyed by port number (a string).
              type: dict
              sample:
                "1":
                  state: ACTIVE
                  state_num: 4
                  phys_state: LinkUp
                  link_layer: InfiniBand
                  rate: "200 Gb/sec (4X HDR)"
                  rate_gbps: 200.0
                  netdev: null
              contains:
                state:
                  description: Logical state name (C(ACTIVE), C(DOWN), C(INIT), ...).
                  type: str
                state_num:
                  description: Logical state number.
                  type: int
                phys_state:
                  description: Physical state name (C(LinkUp), C(Disabled), C(Polling), ...).
                  type: str
                link_layer:
                  description: C(InfiniBand) or C(Ethernet).
                  type: str
                rate:
                  description: Raw rate string.
                  type: str
                rate_gbps:
                  description: Rate in Gb/s.
                  type: float
                netdev:
                  description: Netdev of GID 0 (RoCE), null when none.
                  type: str
        unbound_mellanox_functions:
          description: Mellanox (vendor 0x15b3) physical functions that are not bridges and have no
            driver bound; typically fixed by loading the driver or a PCI remove/rescan. SR-IOV virtual
            functions (with a C(physfn) link) are left out, since they are often unbound on purpose.
          returned: always
          type: list
          elements: dict
          contains:
            address:
              description: PCI address.
              type: str
              sample: "0000:81:00.1"
            vendor_id:
              description: PCI vendor id.
              type: str
              sample: "0x15b3"
            device_id:
              description: PCI device id.
              type: str
              sample: "0x1007"
            class:
              description: PCI class code.
              type: str
              sample: "0x020000"
            numa_node:
              description: NUMA node, -1 when unknown.
              type: int
              sample: 1
        pairs:
          description: One entry per GPU x RDMA device (with a PCI function).
          returned: always
          type: list
          elements: dict
          contains:
            gpu:
              description: C(GPU<index>) (nvidia-smi index, else the ordinal).
              type: str
              sample: GPU0
            gpu_address:
              description: PCI address of the GPU.
              type: str
              sample: "0000:03:00.0"
            nic:
              description: RDMA device name.
              type: str
              sample: mlx5_0
            nic_address:
              description: PCI address of the RDMA device.
              type: str
              sample: "0000:04:00.0"
            distance:
              description: C(PIX), C(PXB), C(PHB), C(NODE) or C(SYS), as in C(nvidia-smi topo -m).
              type: str
              sample: PIX
            common_ancestor:
              description: Deepest bridge shared by both paths, null when none.
              type: str
              sample: "0000:01:00.0"
            path:
              description: Union of both bridge paths (GPU's first).
              type: list
              elements: str
              sample: ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]
            acs_redirect:
              description: Whether a readable bridge on the path redirects peer-to-peer traffic
                (ReqRedir, CmpltRedir or EgressCtrl set). False does not mean clear; see I(acs_verdict).
              type: bool
              sample: true
            acs_verdict:
              description:
                - C(redirect) a bridge with a readable ACS capability redirects peer-to-peer traffic;
                  C(unknown) no readable bridge redirects but the ACS state of at least one bridge
                  cannot be known (C(status=unknown) in I(acs)), so the path is not called clear;
                  C(clear) every bridge of the path was read and none redirects.
              type: str
              choices: [redirect, unknown, clear]
              sample: unknown
            acs_verdict_reason:
              description: The verdict in words, naming the redirecting bridges (with ACSCtl) and the
                bridges whose ACS state is unknown (with the reason).
              type: str
              sample: "ACS state unknown on 0000:02:08.0: extended configuration space not readable: the config
                file has 256 bytes although the function has a PCI Express capability (...)"
            acs:
              description: Bridges of the path with an ACS capability, plus bridges whose ACS state
                cannot be known (C(status=unknown)).
              type: list
              elements: dict
              contains:
                address:
                  description: Bridge PCI address.
                  type: str
                vendor_id:
                  description: Bridge vendor id.
                  type: str
                device_id:
                  description: Bridge device id.
                  type: str
                status:
                  description: C(present) (ACS read by a clean capability walk) or C(unknown) (config
                    space read too short when not root, extended configuration space not readable
                    because a PCI Express function has a 256-byte config file, or a corrupt capability
                    list with a loop, a next pointer below 0x100 or beyond the bytes read, or an
                    all-ones header).
                  type: str
                  choices: [present, unknown]
                reason:
                  description: Why the state is unknown; null when C(present).
                  type: str
                  sample: "extended capability list loops: 0x200 points back to 0x100"
                readable:
                  description: True when C(status=present); the register fields are null otherwise.
                  type: bool
                acs_offset:
                  description: Config-space offset of the ACS extended capability.
                  type: int
                acs_ctl_offset:
                  description: Absolute config-space offset of the ACS Control register.
                  type: int
                acs_cap:
                  description: ACS Capability register.
                  type: int
                acs_cap_bits:
                  description: Names of the capabilities the bridge offers.
                  type: list
                  elements: str
                acs_ctl:
                  description: ACS Control register.
                  type: int
                acs_ctl_hex:
                  description: ACS Control register as C(0x%04x).
                  type: str
                enabled_bits:
                  description: Names of the bits set in ACSCtl (SrcValid TransBlk ReqRedir
                    CmpltRedir UpstreamFwd EgressCtrl DirectTrans).
                  type: list
                  elements: str
                p2p_redirect:
                  description: Whether ReqRedir, CmpltRedir or EgressCtrl is set.
                  type: bool
        iommu:
          description: IOMMU state.
          returned: always
          type: dict
          contains:
            enabled:
              description: Whether an IOMMU unit or IOMMU groups exist.
              type: bool
            mode:
              description: C(pt), C(translated), C(off) or C(unknown).
              type: str
              sample: pt
            groups:
              description: Number of IOMMU groups.
              type: int
            devices:
              description: Entries of C(/sys/class/iommu).
              type: list
              elements: str
            group_types:
              description: Count of groups per default domain type (C(identity), C(DMA), C(DMA-FQ)).
              type: dict
            cmdline_flags:
              description: IOMMU-related kernel command-line flags (iommu, intel_iommu, amd_iommu,
                iommu.passthrough, iommu.strict).
              type: dict
              sample: {"intel_iommu": "on", "iommu": "pt"}
        peermem:
          description: Peer-memory related kernel modules present in C(/sys/module).
          returned: always
          type: dict
          contains:
            nvidia_peermem:
              description: nvidia_peermem is loaded.
              type: bool
            nv_peer_mem:
              description: Legacy nv_peer_mem is loaded.
              type: bool
            gdrdrv:
              description: GDRCopy's gdrdrv is loaded.
              type: bool
            ib_core:
              description: ib_core is loaded or built in.
              type: bool
        dmabuf:
          description: Prerequisites of the dma-buf GPUDirect RDMA path.
          returned: always
          type: dict
          contains:
            kernel_ok:
              description: Running kernel is 5.12 or newer; null when unknown.
              type: bool
            open_module:
              description: The loaded NVIDIA module is the open flavour.
              type: bool
            config_dma_shared_buffer:
              description: C(y), C(m) or C(n) from the running kernel's config; null when unknown.
              type: str
              sample: "y"
        kernel:
          description: Running and default boot kernel.
          returned: always
          type: dict
          contains:
            running:
              description: Running kernel release.
              type: str
              sample: 6.1.0-18-amd64
            default:
              description: Kernel release booted next, null when unknown.
              type: str
              sample: 6.1.0-20-amd64
            default_source:
              description: Where C(default) came from (C(/boot/vmlinuz), C(/vmlinuz), C(grubby)).
              type: str
            reboot_pending:
              description: The default kernel differs from the running one, or a reboot-required
                flag file exists.
              type: bool
            reboot_reasons:
              description: Why a reboot is pending.
              type: list
              elements: str
        memlock:
          description: Locked-memory limits. C(soft), C(hard), C(soft_bytes) and C(hard_bytes) are
            RLIMIT_MEMLOCK of the module process, as in C(session) (kept for older readers).
          returned: always
          type: dict
          contains:
            soft:
              description: Soft limit of the module process, C(unlimited) or a byte count.
              type: str
              sample: unlimited
            hard:
              description: Hard limit of the module process, C(unlimited) or a byte count.
              type: str
              sample: unlimited
            soft_bytes:
              description: Soft limit in bytes, null when unlimited.
              type: int
            hard_bytes:
              description: Hard limit in bytes, null when unlimited.
              type: int
            session:
              description: The module process (the Ansible session) with its uid; a session opened
                before a change keeps its old limit, and root is outside pam_limits' C(*) domain.
              type: dict
              sample: {"soft": "257548288", "hard": "257548288", "soft_bytes": 257548288,
                       "hard_bytes": 257548288, "uid": 0}
            login:
              description: What pam_limits gives a new login session (ssh, su, runuser) of an
                ordinary user, from limits.conf and limits.d; C(domains) evaluates each user or
                C(@group) named in a memlock entry. Null when the files could not be read
                (C(login_reason) says why).
              type: dict
              sample: {"soft": "unlimited", "hard": "unlimited", "soft_bytes": null, "hard_bytes": null,
                       "soft_source": "/etc/security/limits.d/90-gpudirect-memlock.conf:4 *",
                       "hard_source": "/etc/security/limits.d/90-gpudirect-memlock.conf:5 *",
                       "stopped_by": null, "base_source": "PID 1: 257548288/257548288", "domains": []}
            service:
              description: What a unit started now gets (C(systemctl show -p DefaultLimitMEMLOCK
                -p DefaultLimitMEMLOCKSoft)); C(configured) is what system.conf and its drop-ins set
                and C(pending_reexec) whether the manager has not read it yet. Null without systemd
                or off a live root (C(service_reason) says why).
              type: dict
              sample: {"soft": "unlimited", "hard": "unlimited", "soft_bytes": null, "hard_bytes": null,
                       "source": "systemctl show DefaultLimitMEMLOCK", "pending_reexec": false,
                       "configured": {"soft": "unlimited", "hard": "unlimited",
                                      "source": "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf:4"}}
            login_reason:
              description: Why C(login) is null; null when it is not.
              type: str
            service_reason:
              description: Why C(service) is null (no systemctl, root is not /, systemctl failed);
                null when it is not.
              type: str
              sample: "systemctl not found"
        kernel_oops:
          description: Driver faults in the kernel log (Oops, Xid, NVRM ... failed).
          returned: always
          type: dict
          contains:
            available:
              description: Whether the kernel log could be read.
              type: bool
            reason:
              description: Why it could not be read; null when it could.
              type: str
            matches:
              description: Number of matching lines.
              type: int
            lines:
              description: The first 20 matching lines.
              type: list
              elements: str
        nvidia_smi:
          description: Outcome of the nvidia-smi enrichment.
          returned: always
          type: dict
          contains:
            available:
              description: Whether nvidia-smi ran and answered.
              type: bool
            reason:
              description: Why not; null when it did.
              type: str
            gpus:
              description: Parsed rows.
              type: list
              elements: dict
              sample: [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0",
                        "driver_version": "580.159.04", "compute_cap": "9.0", "memory_total_mib": 143771}]
        warnings:
          description: Parsing faults that were skipped (also emitted as module warnings).
          returned: always
          type: list
          elements: str
"""

import gzip
import os
import re
import resource
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_pci import (
    PCI_VENDOR_MELLANOX,
    PCI_VENDOR_NVIDIA,
    acs_info,
    common_ancestor,
    distance,
    iommu_info,
    list_pci_addresses,
    normalize_pci_address,
    pci_address_key,
    pci_device_dir,
    read_config,
    read_pci_function,
    read_text,
    root_path,
    union_path,
)
from ansible.module_utils.gpudirect_kernel import C_LOCALE, default_boot_kernel, running_kernel
from ansible.module_utils.gpudirect_rdma_sysfs import parse_rate, parse_sysfs_state, scan_rdma_devices  # noqa: F401
from ansible.module_utils.gpudirect_limits import (
    configured_manager_memlock,
    login_memlock,
    parse_proc_limits,
    parse_systemctl_show,
    read_limits,
    service_memlock,
    read_systemd_conf,
    show_limit,
)
from ansible.module_utils.gpudirect_versions import VersionError, parse_proc_driver_version

MAX_OOPS_LINES = 20
OOPS_RE = re.compile(r"Oops|Xid|NVRM:.*failed")
NVIDIA_SMI_QUERY = "index,name,pci.bus_id,driver_version,compute_cap,memory.total"
GPU_CLASSES = (0x0300, 0x0302)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem", "gdrdrv", "ib_core")


# --------------------------------------------------------------------------
# pure parsers
# --------------------------------------------------------------------------

def parse_nvidia_version(text):
    """``/proc/driver/nvidia/version`` -> ``{loaded, version, flavor}`` (gpudirect_versions' parser).

    A file that exists but has no recognised ``NVRM version:`` line is loaded with
    version and flavour None (the caller warns).
    """
    if text is None:
        return {"loaded": False, "version": None, "flavor": None}
    try:
        found = parse_proc_driver_version(text)
    except VersionError:
        return {"loaded": True, "version": None, "flavor": None}
    return {"loaded": True, "version": found["version"], "flavor": found["flavor"]}


def parse_kernel_version(release):
    """``"6.18.44-fc"`` -> (6, 18); None when unparseable."""
    match = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_kernel_config(text, option):
    """Value of ``option`` in a kernel config: ``y``/``m``/string, ``n`` when
    "is not set", None when absent."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith(option + "="):
            return line.split("=", 1)[1].strip('"')
        if line == "# %s is not set" % option:
            return "n"
    return None


def parse_nvidia_smi_csv(text):
    """Rows of ``nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,
    compute_cap,memory.total --format=csv[,noheader,nounits]``."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip() or line.lower().startswith("index"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 6:
            raise ValueError("unexpected nvidia-smi line: %r" % line)
        index, name, bus_id, driver_version, compute_cap, memory = fields[:6]
        mem = re.match(r"^(\d+)", memory)
        rows.append({
            "index": int(index) if index.isdigit() else None,
            "name": name,
            "pci_bus_id": normalize_pci_address(bus_id),
            "driver_version": driver_version,
            "compute_cap": compute_cap,
            "memory_total_mib": int(mem.group(1)) if mem else None,
        })
    return rows


def _limit(value):
    if value == resource.RLIM_INFINITY:
        return "unlimited", None
    return str(value), int(value)


def memlock_limits(getrlimit=resource.getrlimit):
    soft, hard = getrlimit(resource.RLIMIT_MEMLOCK)
    soft_s, soft_b = _limit(soft)
    hard_s, hard_b = _limit(hard)
    return {"soft": soft_s, "hard": hard_s, "soft_bytes": soft_b, "hard_bytes": hard_b}


# --------------------------------------------------------------------------
# collector
# --------------------------------------------------------------------------

def is_live_root(root):
    """True when ``root`` is this host's ``/`` (live probes describe it)."""
    return os.path.realpath(root or "/") == "/"


def acs_path_verdict(acs):
    """``{"acs_verdict", "acs_verdict_reason"}`` of one GPU/NIC path from its bridge entries:
    ``redirect`` when a bridge with a readable ACS capability redirects peer-to-peer traffic,
    else ``unknown`` when any bridge's ACS state cannot be known (never called clear), else
    ``clear``."""
    redirecting = [e for e in acs if e["readable"] and e["p2p_redirect"]]
    unknown = [e for e in acs if not e["readable"]]
    unknown_text = "; ".join("%s: %s" % (e["address"], e["reason"]) for e in unknown)
    if redirecting:
        reason = "ACS redirects peer-to-peer traffic on %s" % ", ".join(
            "%s (ACSCtl %s)" % (e["address"], e["acs_ctl_hex"]) for e in redirecting)
        if unknown:
            reason += "; ACS state unknown on %s" % unknown_text
        return {"acs_verdict": "redirect", "acs_verdict_reason": reason}
    if unknown:
        return {"acs_verdict": "unknown", "acs_verdict_reason": "ACS state unknown on %s" % unknown_text}
    return {"acs_verdict": "clear",
            "acs_verdict_reason": "no bridge on the path has ReqRedir, CmpltRedir or EgressCtrl set"}


class Collector(object):
    """Gathers the facts of one tree. ``runner`` provides ``get_bin_path(name)``
    and ``run_command(args, environ_update=...)`` (an AnsibleModule); None means
    no commands. ``live`` (default: root is ``/``) allows the probes that read
    the running system instead of the tree (nvidia-smi, dmesg, grubby)."""

    def __init__(self, root="/", runner=None, nvidia_smi=True, kernel_log=True, live=None):
        self.root = root or "/"
        self.runner = runner
        self.use_nvidia_smi = nvidia_smi
        self.use_kernel_log = kernel_log
        self.live = is_live_root(self.root) if live is None else live
        self.warnings = []
        self.functions = {}

    # helpers -----------------------------------------------------------
    def warn(self, message):
        self.warnings.append(message)

    def path(self, *parts):
        return root_path(self.root, *parts)

    def _bin(self, name):
        if self.runner is None:
            return None
        try:
            return self.runner.get_bin_path(name)
        except Exception:
            return None

    def _run(self, args):
        return self.runner.run_command(args, environ_update=dict(C_LOCALE))

    def section(self, name, func, default):
        try:
            return func()
        except Exception as exc:
            self.warn("%s: could not be read (%s: %s)" % (name, type(exc).__name__, exc))
            return default

    # PCI -----------------------------------------------------------------
    def load_pci(self):
        for address in list_pci_addresses(self.root):
            try:
                self.functions[address] = read_pci_function(self.root, address)
            except Exception as exc:
                self.warn("pci %s: skipped (%s: %s)" % (address, type(exc).__name__, exc))

    def _sorted_functions(self):
        return sorted(self.functions.values(), key=lambda fn: pci_address_key(fn.address))

    def function(self, address):
        if address is None:
            return None
        fn = self.functions.get(address)
        if fn is None and os.path.lexists(pci_device_dir(self.root, address)):
            try:
                fn = read_pci_function(self.root, address)
                self.functions[address] = fn
            except Exception as exc:
                self.warn("pci %s: skipped (%s: %s)" % (address, type(exc).__name__, exc))
        return fn

    def gpus(self):
        gpus = []
        for fn in self._sorted_functions():
            if fn.vendor != PCI_VENDOR_NVIDIA or fn.pci_class is None:
                continue
            if (fn.pci_class >> 8) not in GPU_CLASSES:
                continue
            entry = fn.to_dict()
            entry.pop("is_bridge", None)
            entry.update(ordinal=len(gpus), index=None, name=None, compute_cap=None, memory_total_mib=None)
            gpus.append(entry)
        return gpus

    def unbound_mellanox(self):
        out = []
        for fn in self._sorted_functions():
            if fn.vendor == PCI_VENDOR_MELLANOX and not fn.is_bridge and not fn.driver:
                if os.path.lexists(os.path.join(pci_device_dir(self.root, fn.address), "physfn")):
                    continue  # an SR-IOV VF left unbound on purpose (autoprobe off, VM pool)
                d = fn.to_dict()
                out.append({k: d[k] for k in ("address", "vendor_id", "device_id", "class", "numa_node")})
        return out

    # RDMA ----------------------------------------------------------------
    def rdma_devices(self):
        """module_utils/gpudirect_rdma_sysfs.py scans; the NUMA node and PCIe link come from the PCI function."""
        devices = scan_rdma_devices(self.root, self.warn)
        for device in devices:
            fn = self.function(device["pci_address"])
            device["numa_node"] = fn.numa_node if fn is not None else -1
            # the PCIe link of the NIC's function, for the degraded-link finding (null: no PCI function)
            device["link"] = fn.to_dict()["link"] if fn is not None else None
        return devices

    # pairs ---------------------------------------------------------------
    def bridge_acs(self, address, cache):
        if address in cache:
            return cache[address]
        fn = self.functions.get(address)
        info = acs_info(read_config(pci_device_dir(self.root, address)))
        entry = None
        if info["status"] != "absent":
            # unreadable (short read, not root) and unknown (extended space not readable, corrupt
            # capability list) are both "unknown" here: nothing is known about the bridge's ACS
            entry = {
                "address": address,
                "vendor_id": None if fn is None or fn.vendor is None else "0x%04x" % fn.vendor,
                "device_id": None if fn is None or fn.device is None else "0x%04x" % fn.device,
                "status": "present" if info["status"] == "present" else "unknown",
                "reason": info["reason"],
                "readable": info["status"] == "present",
                "acs_offset": info["offset"],
                "acs_ctl_offset": info["ctl_offset"],
                "acs_cap": info["cap"],
                "acs_cap_bits": info["cap_bits"],
                "acs_ctl": info["ctl"],
                "acs_ctl_hex": info["ctl_hex"],
                "enabled_bits": info["enabled_bits"],
                "p2p_redirect": info["p2p_redirect"],
            }
        cache[address] = entry
        return entry

    def pairs(self, gpus, nics):
        pairs = []
        cache = {}
        for gpu in gpus:
            gfn = self.functions.get(gpu["address"])
            for nic in nics:
                nfn = self.function(nic.get("pci_address"))
                if gfn is None or nfn is None:
                    continue
                try:
                    path = union_path(gfn, nfn)
                    acs = [e for e in (self.bridge_acs(b, cache) for b in path) if e is not None]
                    pairs.append({
                        "gpu": "GPU%d" % (gpu["index"] if gpu.get("index") is not None else gpu["ordinal"]),
                        "gpu_address": gpu["address"],
                        "nic": nic["name"],
                        "nic_address": nfn.address,
                        "distance": distance(gfn, nfn),
                        "common_ancestor": common_ancestor(gfn, nfn),
                        "path": path,
                        "acs_redirect": any(e["p2p_redirect"] for e in acs if e["readable"]),
                        "acs": acs,
                    })
                    pairs[-1].update(acs_path_verdict(acs))
                except Exception as exc:
                    self.warn("pair %s/%s: skipped (%s: %s)" % (gpu["address"], nic["name"],
                                                                type(exc).__name__, exc))
        return pairs

    # drivers, modules ------------------------------------------------------
    def nvidia_driver(self):
        info = parse_nvidia_version(read_text(self.path("proc/driver/nvidia/version")))
        if not info["loaded"] and os.path.isdir(self.path("sys/module/nvidia")):
            info["loaded"] = True
        if info["loaded"] and info["version"] is None:
            version = read_text(self.path("sys/module/nvidia/version"))
            info["version"] = version or None
        if info["loaded"] and (info["version"] is None or info["flavor"] is None):
            self.warn("nvidia driver: loaded but version/flavour not recognised in /proc/driver/nvidia/version")
        return info

    def peermem(self):
        return {name: os.path.isdir(self.path("sys/module", name)) for name in PEERMEM_MODULES}

    def kernel_config(self, release, option):
        if release:
            text = read_text(self.path("boot", "config-%s" % release))
            if text is not None:
                return parse_kernel_config(text, option)
        try:
            with gzip.open(self.path("proc/config.gz"), "rt") as handle:
                return parse_kernel_config(handle.read(), option)
        except (IOError, OSError, EOFError, ValueError):
            return None

    def dmabuf(self, kernel, driver):
        version = parse_kernel_version(kernel.get("running"))
        return {
            "kernel_ok": None if version is None else version >= (5, 12),
            "open_module": driver.get("flavor") == "open",
            "config_dma_shared_buffer": self.kernel_config(kernel.get("running"), "CONFIG_DMA_SHARED_BUFFER"),
        }

    # kernel ----------------------------------------------------------------
    def kernel(self):
        running = running_kernel(self.root, self.live)
        default, source, warnings = default_boot_kernel(self.root, self.runner, self.live)
        for warning in warnings:
            self.warn("kernel: %s" % warning)
        reasons = []
        if default and running and default != running:
            reasons.append("default boot kernel %s differs from running %s" % (default, running))
        for flag in ("var/run/reboot-required", "run/reboot-required"):
            if os.path.exists(self.path(flag)):
                pkgs = read_text(self.path(flag + ".pkgs"))
                pkgs = ", ".join(sorted(set((pkgs or "").split())))
                reasons.append("/%s exists%s" % (flag, " (packages: %s)" % pkgs if pkgs else ""))
                break
        return {"running": running, "default": default, "default_source": source,
                "reboot_pending": bool(reasons), "reboot_reasons": reasons}

    # memlock ---------------------------------------------------------------
    def memlock(self):
        """The module process's limit (``session``), what a new login gets (``login``) and what a
        unit started now gets (``service``); see module_utils/gpudirect_limits.py."""
        out = memlock_limits()
        out["session"] = dict(out, uid=os.getuid())
        out["login_reason"] = None
        try:
            base = parse_proc_limits(read_text(self.path("proc/1/limits")))
            base_source = None if base is None else "PID 1: %s/%s" % (show_limit(base[0]), show_limit(base[1]))
            out["login"] = login_memlock(read_limits(self.root), base or (None, None), base_source)
        except Exception as exc:
            out["login"], out["login_reason"] = None, "%s: %s" % (type(exc).__name__, exc)
            self.warn("memlock: limits.conf/limits.d could not be read (%s)" % out["login_reason"])
        out["service"], out["service_reason"] = self.service_memlock()
        return out

    def service_memlock(self):
        systemctl, why = self._probe_binary(True, "", "systemctl",
                                            "the systemd manager of this host does not describe the tree")
        if not systemctl:
            return None, why
        if not os.path.isdir(self.path("run/systemd/system")):
            return None, "systemd is not the init system (no /run/systemd/system)"
        rc, stdout, stderr = self._run([systemctl, "show", "-p", "DefaultLimitMEMLOCK",
                                        "-p", "DefaultLimitMEMLOCKSoft"])
        if rc != 0:
            return None, "systemctl show failed (rc=%s): %s" % (rc, " ".join((stderr or stdout or "").split())[:200])
        try:
            configured = configured_manager_memlock(read_systemd_conf(self.root))
            return service_memlock(parse_systemctl_show(stdout), configured), None
        except ValueError as exc:
            self.warn("memlock: %s" % exc)
            return None, str(exc)

    # live probes -------------------------------------------------------------
    def _probe_binary(self, enabled, option, name, what):
        """The path of a live probe's binary, or (None, why the probe does not run)."""
        if not enabled:
            return None, "disabled (%s=false)" % option
        if not self.live:
            return None, "root is not /: %s" % what
        path = self._bin(name)
        return (path, None) if path else (None, "%s not found" % name)

    def kernel_oops(self):
        out = {"available": False, "reason": None, "matches": 0, "lines": []}
        dmesg, out["reason"] = self._probe_binary(self.use_kernel_log, "kernel_log", "dmesg",
                                                  "the kernel log of this host does not describe the tree")
        if not dmesg:
            return out
        try:
            rc, stdout, stderr = self._run([dmesg])
        except Exception as exc:
            out["reason"] = "dmesg could not run: %s" % exc
            return out
        if rc != 0:
            out["reason"] = "dmesg failed (rc=%s): %s" % (rc, (stderr or stdout or "").strip()[:200])
            return out
        matches = [line.rstrip() for line in (stdout or "").splitlines() if OOPS_RE.search(line)]
        out.update(available=True, matches=len(matches), lines=matches[:MAX_OOPS_LINES])
        return out

    def nvidia_smi(self, gpus, driver):
        out = {"available": False, "reason": None, "gpus": []}
        smi, out["reason"] = self._probe_binary(self.use_nvidia_smi, "nvidia_smi", "nvidia-smi",
                                                "nvidia-smi would describe this host, not the tree")
        if not smi:
            return out
        rc, stdout, stderr = self._run([smi, "--query-gpu=%s" % NVIDIA_SMI_QUERY,
                                        "--format=csv,noheader,nounits"])
        if rc != 0:
            out["reason"] = "nvidia-smi failed (rc=%s): %s" % (rc, (stderr or stdout or "").strip()[:200])
            if gpus and driver.get("loaded"):
                self.warn(out["reason"])
            return out
        try:
            rows = parse_nvidia_smi_csv(stdout)
        except ValueError as exc:
            out["reason"] = str(exc)
            self.warn("nvidia-smi: %s" % exc)
            return out
        out.update(available=True, gpus=rows)
        by_bus = {row["pci_bus_id"]: row for row in rows}
        for gpu in gpus:
            row = by_bus.get(gpu["address"])
            if row:
                gpu.update(index=row["index"], name=row["name"], compute_cap=row["compute_cap"],
                           memory_total_mib=row["memory_total_mib"])
        return out

    # all -------------------------------------------------------------------
    def collect(self):
        self.section("pci", self.load_pci, None)
        gpus = self.section("gpus", self.gpus, [])
        driver = self.section("nvidia_driver", self.nvidia_driver,
                              {"loaded": False, "version": None, "flavor": None})
        smi = self.section("nvidia_smi", lambda: self.nvidia_smi(gpus, driver),
                           {"available": False, "reason": "error", "gpus": []})
        nics = self.section("rdma_devices", self.rdma_devices, [])
        kernel = self.section("kernel", self.kernel, {"running": None, "default": None, "default_source": None,
                                                      "reboot_pending": False, "reboot_reasons": []})
        facts = {
            "root": self.root,
            "gpus": gpus,
            "nvidia_driver": driver,
            "rdma_devices": nics,
            "unbound_mellanox_functions": self.section("unbound_mellanox_functions", self.unbound_mellanox, []),
            "pairs": self.section("pairs", lambda: self.pairs(gpus, nics), []),
            "iommu": self.section("iommu", lambda: iommu_info(self.root),
                                  {"enabled": False, "mode": "unknown", "groups": 0, "devices": [],
                                   "group_types": {}, "cmdline_flags": {}}),
            "peermem": self.section("peermem", self.peermem, {n: False for n in PEERMEM_MODULES}),
            "dmabuf": self.section("dmabuf", lambda: self.dmabuf(kernel, driver),
                                   {"kernel_ok": None, "open_module": False, "config_dma_shared_buffer": None}),
            "kernel": kernel,
            "memlock": self.section("memlock", self.memlock,
                                    {"soft": None, "hard": None, "soft_bytes": None, "hard_bytes": None,
                                     "session": None, "login": None, "service": None,
                                     "login_reason": "error", "service_reason": "error"}),
            "kernel_oops": self.section("kernel_oops", self.kernel_oops,
                                        {"available": False, "reason": "error", "matches": 0, "lines": []}),
            "nvidia_smi": smi,
        }
        facts["warnings"] = list(self.warnings)
        return facts


def gather_facts(root="/", runner=None, nvidia_smi=True, kernel_log=True, live=None):
    """The ``gpudirect`` facts dictionary of ``root``."""
    return Collector(root, runner, nvidia_smi, kernel_log, live).collect()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            nvidia_smi=dict(type="bool", default=True),
            kernel_log=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg="root %s is not a directory: leave root at / on a live host, or point it at "
                             "a captured tree that holds sys/ and proc/" % root)
    try:
        facts = gather_facts(root, module, module.params["nvidia_smi"], module.params["kernel_log"])
    except Exception as exc:
        module.fail_json(msg="gpudirect_facts could not survey %s: %s" % (root, exc),
                         exception=traceback.format_exc())
    for warning in facts["warnings"]:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"gpudirect": facts})


if __name__ == "__main__":
    main()
