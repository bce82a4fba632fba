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
  - Reads sysfs and procfs (never writes) and returns C(ansible_facts.gpudirect). The one exception is the read of
    RDMA-CM's per-port defaults (O(rdma_cm)) - the kernel shows them only in a configfs group, which the module makes
    for the read and removes right after, setting nothing.
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
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
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
      - Also read each GPU's NVLink links (C(nvidia-smi nvlink -s)) and NVLink fabric state
        (C(nvidia-smi -q)).
      - Without C(nvidia-smi) the GPUs are still reported from sysfs; C(nvlink) then says why
        the links and fabric were not read.
    type: bool
    default: true
  kernel_log:
    description:
      - Read the kernel log with C(dmesg) for Oops, NVIDIA Xid and C(NVRM ... failed) lines.
      - Most hosts restrict C(dmesg) to root; a failure is reported in
        C(kernel_oops.reason), never as a module failure.
    type: bool
    default: true
  rdma_cm:
    description:
      - Read RDMA-CM's defaults of each RoCE port (C(rdma_devices[].rdma_cm)) from the kernel's configfs,
        C(/sys/kernel/config/rdma_cm/<device>/ports/<port>/default_roce_mode) and C(default_roce_tos).
      - On a live host the device's configfs group is made for the read (C(mkdir), which needs root) and removed
        again when the module made it, as NVIDIA's C(cma_roce_tos) does; nothing is set, configfs is not mounted
        and rdma_cm not loaded (C(rdma_cm.reason) then says which is missing). On a captured tree only a group
        that is there is read.
    type: bool
    default: true
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux sysfs and procfs.
extends_documentation_fragment:
  - gpudirect_attributes.read_only
notes:
  - C(changed) is always false.
  - C(memlock) reports what RDMA jobs get, not the limit of the module process.
    C(memlock.login) is what pam_limits gives a new login session of an ordinary user
    (limits.conf and limits.d with pam_limits' precedence), C(memlock.service) what a
    unit started now gets (C(systemctl show DefaultLimitMEMLOCK)). The module
    process (the Ansible session, usually root, which C(*) does not cover) is
    C(memlock.session).
  - Distance classes follow the C(nvidia-smi topo -m) legend; NVLink is not considered for them.
    Each GPU's NVLink links and NVLink fabric state are reported on their own (C(gpus[].nvlink),
    C(gpus[].fabric)), read with C(nvidia-smi nvlink -s) and C(nvidia-smi -q) when C(nvidia_smi) is on.
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
            nvlink:
              description:
                - NVLink links of the GPU from C(nvidia-smi nvlink -s) (module_utils/gpudirect_nvlink.py);
                  null without nvidia-smi, or when it listed no links (C(nvlink.reason) says why).
                - Speeds are as nvidia-smi prints them, in GB/s (gigabytes per second), one direction.
              type: dict
              contains:
                links_total:
                  description: Links nvidia-smi lists for the GPU (0 on a GPU without NVLink).
                  type: int
                  sample: 18
                links_up:
                  description: Links with a speed (the others are C(<inactive>)).
                  type: int
                  sample: 18
                link_speed_gbytes_s:
                  description: The speed every active link shares, GB/s; null when they differ or none is up.
                  type: float
                  sample: 26.562
                total_gbytes_s:
                  description: Sum of the active links' speeds, GB/s.
                  type: float
                  sample: 478.116
                links:
                  description: Each link - C(link) (number), C(up), C(speed_gbytes_s) (null when down).
                  type: list
                  elements: dict
            fabric:
              description:
                - NVLink fabric state of the GPU, the C(Fabric) section of C(nvidia-smi -q) (drivers from r550);
                  null without nvidia-smi or without that section (C(nvlink.fabric_reason) says why).
                - Values as printed; C(N/A) becomes null.
              type: dict
              contains:
                state:
                  description: C(Completed), C(In Progress), C(Not Started) or null (N/A, no fabric).
                  type: str
                  sample: Completed
                status:
                  description: C(Success) or the error nvidia-smi names; null when N/A.
                  type: str
                  sample: Success
                clique_id:
                  description: The NVLink clique the GPU belongs to; null when N/A.
                  type: int
                  sample: 0
                cluster_uuid:
                  description: The NVLink cluster's UUID; null when N/A.
                  type: str
                  sample: 00000000-0000-0000-0000-000000000000
                health:
                  description:
                    - The C(Health) sub-block of the section (drivers from about r565; GB200 and newer print every
                      row), null when the driver prints none. Values as printed, C(N/A) as null.
                    - Keys C(summary) (C(Healthy), C(Unhealthy), C(Limited Capacity)), C(bandwidth) (C(Full),
                      C(Degraded)), C(route_recovery_in_progress), C(route_unhealthy), C(access_timeout_recovery)
                      (C(True)/C(False)), C(incorrect_configuration) (C(None) or the fault) and C(partition_assigned).
                  type: dict
                  sample: {"summary": "Healthy", "bandwidth": "Full", "route_recovery_in_progress": "False"}
                unknown:
                  description: "Every other line of the section, as C({path: value}); the fabric check fails naming each."
                  type: dict
                  sample: {}
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
            rdma_cm:
              description:
                - RDMA-CM's defaults of the device's RoCE (Ethernet) ports, what the kernel gives an RDMA-CM connection
                  whose application sets no ToS (configfs C(rdma_cm), see O(rdma_cm)).
                - C(read) (false when nothing was read), C(reason) (why not, else empty), C(ports) keyed by port
                  number (a string), each C(default_roce_mode) (C(RoCE v2) or C(IB/RoCE v1)), C(default_roce_tos)
                  (0-255), C(dscp) and C(ecn) (the ToS's two parts); C(errors), per port, the attribute that could not
                  be read or was malformed and why.
              type: dict
              sample:
                read: true
                reason: ""
                ports: {"1": {"default_roce_mode": "RoCE v2", "default_roce_tos": 104, "dscp": 26, "ecn": 0}}
                errors: {}
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
        nvlink:
          description: Whether the NVLink links and the fabric state of the GPUs were read (C(gpus[].nvlink), C(gpus[].fabric)).
          returned: always
          type: dict
          contains:
            available:
              description: C(nvidia-smi nvlink -s) ran and listed the GPUs.
              type: bool
            reason:
              description: Why not (nvidia-smi absent or failing, no GPU listed); null when it did.
              type: str
            fabric_available:
              description: C(nvidia-smi -q) ran and printed a C(Fabric) section.
              type: bool
            fabric_reason:
              description: Why not; null when it did.
              type: str
        imex:
          description:
            - The IMEX domain as this node's daemon sees it, from C(nvidia-imex-ctl -N) where IMEX is installed
              (module_utils/gpudirect_nvlink_plan.py). Never a failure.
          returned: always
          type: dict
          contains:
            installed:
              description: C(nvidia-imex-ctl) is on the node.
              type: bool
            reason:
              description: Why the domain was not read (not installed, the command failed, unreadable output).
              type: str
            domain_state:
              description: C(Domain State) as printed (C(UP) when every node is connected); null when not read.
              type: str
            nodes:
              description: Each node of the domain (C(index), C(address), C(state), C(version)).
              type: list
              elements: dict
            problems:
              description: What keeps the domain from being whole (a node not READY, a pair not connected, not UP).
              type: list
              elements: str
        secure_boot:
          description:
            - UEFI Secure Boot and the kernel's module-signature policy (module_utils/gpudirect_secure_boot.py).
            - C(mokutil --sb-state) on a live host, else the EFI variables C(SecureBoot)/C(SetupMode); the lockdown
              mode and C(module.sig_enforce); the asymmetric keys the kernel holds (C(/proc/keys), and per keyring
              with C(keyctl list) when keyctl is installed); the enrolled and queued MOKs (C(mokutil --list-enrolled),
              C(--list-new)) on a live EFI host.
          returned: always
          type: dict
          contains:
            secure_boot:
              description: C(enabled), C(disabled), C(unknown), or C(unsupported) (no EFI).
              type: str
            setup_mode:
              description: The firmware is in Setup Mode (no platform key; nothing is enforced).
              type: bool
            shim_validation_disabled:
              description: shim's validation is off (C(mokutil --disable-validation)).
              type: bool
            source:
              description: C(mokutil) or C(efivars).
              type: str
            lockdown:
              description: The kernel's lockdown mode; null when the file is absent.
              type: str
            sig_enforce:
              description: C(module.sig_enforce) (C(Y)/C(N)); null when absent.
              type: str
            signatures_required:
              description: The kernel refuses unsigned modules; null when it cannot be told.
              type: bool
            enforcement:
              description: Why (C(module.sig_enforce=Y), C(kernel lockdown is integrity), ...).
              type: str
            trusted_keys:
              description: Asymmetric keys - C(subject), C(key_id) (subject key identifier, hex), C(serial), C(keyring).
              type: list
              elements: dict
            moks:
              description: Enrolled MOKs - C(index), C(sha1), C(serial), C(subject), C(ski); null when not read.
              type: list
              elements: dict
            moks_pending:
              description: MOKs queued for enrolment at the next boot (same keys); null when not read.
              type: list
              elements: dict
            errors:
              description: Sources that could not be read or parsed.
              type: list
              elements: str
        warnings:
          description: Parsing faults that were skipped (also emitted as module warnings).
          returned: always
          type: list
          elements: str
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import gpudirect_rdma_cm as rdma_cm
from ansible.module_utils.gpudirect_facts_collector import FactsCollector
from ansible.module_utils.gpudirect_kernel import default_boot_kernel
from ansible.module_utils.gpudirect_rdma_sysfs import parse_rate, parse_sysfs_state, scan_rdma_devices  # noqa: F401


def rdma_cm_defaults(root, device, create):
    """RDMA-CM's defaults of the RoCE ports of one scanned device (see RETURN rdma_devices[].rdma_cm); ``create``:
    make the configfs group for the read (a live host) or read only one that is there (a captured tree)."""
    ports = sorted((number for number, port in (device.get("ports") or {}).items()
                    if port and port.get("link_layer") == "Ethernet"), key=lambda n: int(n) if n.isdigit() else 0)
    out = {"read": False, "reason": "", "ports": {}, "errors": {}}
    if not ports:
        out["reason"] = "no RoCE (Ethernet) port: RDMA-CM's RoCE defaults do not apply"
        return out
    found = rdma_cm.availability(root)
    if not found["ready"]:
        out["reason"] = found["problem"]
        return out
    read = rdma_cm.read_defaults(root, device["name"], ports, create=create)
    for number in ports:
        values = read["ports"].get(number, {})
        port = {"default_roce_mode": values.get("roce_mode"), "default_roce_tos": values.get("roce_tos"),
                "dscp": None, "ecn": None}
        if port["default_roce_tos"] is not None:
            port.update(rdma_cm.split_tos(port["default_roce_tos"]))
        out["ports"][number] = port
    out["errors"] = read["errors"]
    out["read"] = any(v is not None for p in out["ports"].values() for v in p.values())
    out["reason"] = "" if out["read"] else (read["group"] or "nothing readable")
    return out


class Collector(FactsCollector):
    """The facts collector (module_utils/gpudirect_facts_collector.py) with the sysfs RDMA device
    scan, RDMA-CM's defaults (module_utils/gpudirect_rdma_cm.py) and the default boot kernel reading
    (module_utils/gpudirect_kernel.py)."""

    def __init__(self, root="/", runner=None, nvidia_smi=True, kernel_log=True, live=None, rdma_cm=True):
        super(Collector, self).__init__(root, runner, nvidia_smi, kernel_log, live)
        self.use_rdma_cm = rdma_cm

    def boot_kernel(self):
        default, source, warnings = default_boot_kernel(self.root, self.runner, self.live)
        return default, source, warnings

    # RDMA ----------------------------------------------------------------
    def rdma_devices(self):
        """module_utils/gpudirect_rdma_sysfs.py scans; the NUMA node and PCIe link come from the PCI function."""
        devices = scan_rdma_devices(self.root, self.warn)
        for device in devices:
            fn = self.function(device["pci_address"])
            device["numa_node"] = fn.numa_node if fn is not None else -1
            # the PCIe link of the NIC's function, for the degraded-link finding (null: no PCI function)
            device["link"] = fn.to_dict()["link"] if fn is not None else None
            if self.use_rdma_cm:
                try:
                    device["rdma_cm"] = rdma_cm_defaults(self.root, device, create=self.live)
                except (ValueError, OSError) as exc:   # one odd device must not hide the others
                    device["rdma_cm"] = {"read": False, "reason": str(exc), "ports": {}, "errors": {}}
                    self.warn("rdma %s: RDMA-CM defaults not read (%s)" % (device["name"], exc))
            else:
                device["rdma_cm"] = {"read": False, "reason": "not asked for (rdma_cm: false)", "ports": {},
                                     "errors": {}}
        return devices


def gather_facts(root="/", runner=None, nvidia_smi=True, kernel_log=True, live=None, rdma_cm=True):
    """The ``gpudirect`` facts dictionary of ``root``."""
    return Collector(root, runner, nvidia_smi, kernel_log, live, rdma_cm).collect()

def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            nvidia_smi=dict(type="bool", default=True),
            kernel_log=dict(type="bool", default=True),
            rdma_cm=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg="root %s is not a directory: leave root at / on a live host, or point it at "
                             "a captured tree that holds sys/ and proc/" % root)
    try:
        facts = gather_facts(root, module, module.params["nvidia_smi"], module.params["kernel_log"],
                             rdma_cm=module.params["rdma_cm"])
    except Exception as exc:
        module.fail_json(msg="gpudirect_facts could not survey %s: %s" % (root, exc),
                         exception=traceback.format_exc())
    for warning in facts["warnings"]:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"gpudirect": facts})


if __name__ == "__main__":
    main()
