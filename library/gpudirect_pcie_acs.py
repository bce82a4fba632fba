#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Clear, restore or report the PCIe ACS Control register of selected bridges (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_pcie_acs
short_description: Clear, restore or report PCIe Access Control Services (ACS) on selected PCI bridges
description:
  - Selects PCI bridges (PLX/Broadcom PEX switch ports, the bridges between GPUs and RDMA NICs,
    every bridge, or an explicit list), finds the ACS extended capability of each one by walking
    its extended capability list from offset 0x100, and writes the 16-bit ACS Control register
    (ACSCtl, capability offset + 6) through C(/sys/bus/pci/devices/<address>/config).
  - The register offset is always computed from the capability list, never assumed. Old scripts
    write C(setpci -s <bdf> f2a.w=0000), which is the ACS Control register of one PLX part only
    and an unrelated register on every other bridge; this module never does that.
  - Every write is read back and compared; a mismatch fails the task with the before, written and
    read-back values.
  - Reports, per bridge, the address, vendor/device, ACS offset, the value before and after (hex and
    decoded bit names) and whether it changed. C(changed) is true only when a register changed (or
    would change, in check mode).
  - A selected bridge without an ACS capability is listed in C(skipped_bridges) with the reason C(no ACS capability);
    that is not an error. A conventional PCI bridge (no PCI Express capability, 256-byte config file)
    has no extended configuration space and so no ACS; it is skipped the same way.
  - A selected bridge whose ACS state cannot be known is listed in C(unknown_bridges) with the reason
    (never as "no ACS capability"). That is a PCI Express bridge whose config file has only 256 bytes
    (C(extended configuration space not readable), no usable MMCONFIG/ECAM), or an extended capability
    list that loops, has a next pointer below 0x100 or beyond the bytes read, or a header reading
    0xffffffff (device gone, read failed). The whole list is walked before any of it is trusted.
    I(state=query) reports them; I(state=disabled) and I(state=enabled) fail naming each bridge, its
    reason and what to do, and write nothing to any bridge (leave them out with I(exclude) to go on).
  - Clearing ACS weakens IOMMU isolation (peer-to-peer requests no longer pass the IOMMU). With
    I(state=disabled) the module refuses to run while any PCI function is bound to a vfio driver
    (C(vfio-pci) and its variants C(mlx5_vfio_pci), C(nvgrace_gpu_vfio_pci), C(hisi_acc_vfio_pci),
    C(virtio_vfio_pci), in short any driver whose name contains C(vfio); devices passed to virtual machines
    or user space) unless I(force=true).
  - The change lasts until the next reboot, when the kernel programs ACS again. The C(gpudirect_pcie_acs) role
    installs a boot-time unit that re-applies the same selection.
  - Direct-NIC platforms (ConnectX-8 built-in PCIe switch ports 15b3:197c/15b3:1979, the ConnectX-8 DMA Direct
    function 15b3:2100, NVIDIA Grace root ports 10de:22b1/22b2/22b8, Vera root ports 10de:2f95/2f96; the ids
    of rdma-core's C(kernel-boot/rdma_topo)) need asymmetric ACS per bridge, not 0. With I(direct_nic=auto)
    the module finds them, runs rdma-core's C(rdma_topo check) and C(rdma_topo write-grub-acs --dry-run)
    (read-only, also in check mode), returns the C(pci=config_acs=) value rdma_topo computes in
    C(direct_nic.config_acs) and C(kernel_param.direct_nic_config_acs), and leaves the bridges rdma_topo
    sets out of its own selection. It never writes their registers; the kernel sets them at boot.
  - With I(state=disabled), a direct-NIC platform without rdma_topo fails before any change, naming the
    devices and the rdma-core release needed (rdma_topo first shipped in rdma-core 61.0).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  mode:
    description:
      - Which bridges to select, before I(include) and I(exclude) are applied.
      - C(plx) PCI-to-PCI bridges (class 0x0604) of PLX Technology (vendor 0x10b5) and of Broadcom
        PEX 88000/89000 switches (vendor 0x1000, device ids 0xc0xx, that is c010 and c012 PEX880xx Gen 4,
        c030 and c034 PEX890xx Gen 5 in pci.ids).
      - C(gpu_nic_path) the bridges on the PCIe paths between GPUs and RDMA NICs, read from
        I(pairs) (C(ansible_facts.gpudirect.pairs)), limited to pairs whose distance is in
        I(pair_distances).
      - C(all) every PCI-to-PCI bridge (class 0x0604).
      - C(none) nothing; only the addresses in I(include).
    type: str
    choices: [plx, gpu_nic_path, all, none]
    default: plx
  include:
    description:
      - PCI addresses added to the selection, as C(DDDD:BB:DD.F) or C(BB:DD.F) (domain 0000).
      - Every address must exist under C(<root>/sys/bus/pci/devices); a malformed or unknown
        address fails the task before anything is written.
    type: list
    elements: str
    default: []
  exclude:
    description:
      - PCI addresses removed from the selection (same formats as I(include)). Excluded addresses
        are reported in C(skipped_bridges). An address that does not exist is ignored.
    type: list
    elements: str
    default: []
  pairs:
    description:
      - For I(mode=gpu_nic_path) the list C(ansible_facts.gpudirect.pairs) published by the
        C(gpudirect_facts) module. Each item needs C(path), the list of bridge addresses between
        the GPU and the NIC; C(distance), C(gpu) and C(nic) are used when present.
    type: list
    elements: dict
    default: []
  pair_distances:
    description:
      - For I(mode=gpu_nic_path) the distance classes whose pairs are used. NODE and SYS pairs
        cross host bridges or sockets, where peer-to-peer traffic is not switched by these
        bridges, so they are left out by default. A pair without C(distance) is always used.
    type: list
    elements: str
    choices: [PIX, PXB, PHB, NODE, SYS]
    default: [PIX, PXB, PHB]
  state:
    description:
      - C(disabled) writes 0x0000 to ACSCtl (every ACS feature off).
      - C(enabled) writes I(acs_ctl), limited to the bits the bridge implements (ACSCap).
      - C(query) only reports.
    type: str
    choices: [disabled, enabled, query]
    default: disabled
  acs_ctl:
    description:
      - ACSCtl value written with I(state=enabled). Bits 0-6 are SrcValid, TransBlk, ReqRedir,
        CmpltRedir, UpstreamFwd, EgressCtrl, DirectTrans.
      - The default 0x001d (SrcValid, ReqRedir, CmpltRedir, UpstreamFwd) is what Linux programs on
        a downstream port at enumeration (C(pci_std_enable_acs)); the kernel sets TransBlk only for
        untrusted/external ports and never sets EgressCtrl or DirectTrans. 0x005d, seen in some
        BIOS defaults, adds DirectTrans (direct translated peer-to-peer), which the kernel does not
        enable, so it is not the restore value.
      - The value is masked with the bridge's ACSCap before writing, because unimplemented bits
        are hardwired to 0 and would read back different.
    type: int
    default: 0x001d
  force:
    description:
      - Clear ACS even when PCI functions are bound to a vfio driver (C(vfio-pci), C(mlx5_vfio_pci), any
        driver whose name contains C(vfio)). Only for hosts that pass
        devices to virtual machines and accept that those devices lose IOMMU isolation from their
        peers behind the same bridges.
    type: bool
    default: false
  direct_nic:
    description:
      - C(auto) where a device rdma_topo knows as direct-NIC is present, ask rdma_topo (see the description);
        elsewhere nothing changes.
      - C(rdma_topo) ask rdma_topo on every host; fail when it is missing or finds no supported topology.
      - C(skip) never run rdma_topo; direct-NIC devices are only reported (with a warning), and bridges of
        the selection are cleared to 0 as on any other platform.
    type: str
    choices: [auto, rdma_topo, skip]
    default: auto
  rdma_topo:
    description:
      - Path of rdma-core's C(rdma_topo). Unset, C(/usr/sbin/rdma_topo) (where rdma-core's packages install it),
        C(/sbin/rdma_topo), C(/usr/local/sbin/rdma_topo) and then PATH are tried.
    type: path
  route:
    description:
      - How ACS Control gets its value.
      - C(runtime) writes it now through C(/sys/bus/pci/devices/<address>/config). Kernel lockdown (integrity or
        confidentiality, the bracketed word of C(/sys/kernel/security/lockdown)) refuses user-space writes to PCI
        configuration space; with I(state=disabled) or I(state=enabled) the module then fails before any write,
        naming lockdown.
      - C(kernel_args) writes nothing at run time; the kernel sets ACS at boot from its command line. The module
        reports in C(kernel_param.boot_argument) the argument the boot kernel I(boot_kernel) takes (with
        I(state=disabled)), in C(boot_check) the bridges whose bits are still on, and C(changed) is false.
      - C(auto) is C(kernel_args) where lockdown refuses the writes, C(runtime) elsewhere; a lockdown file that is
        not the kernel's format fails before any change with I(state=disabled) or I(state=enabled).
    type: str
    choices: [auto, runtime, kernel_args]
    default: auto
  clear:
    description:
      - With I(route=kernel_args) and I(state=disabled), the ACS Control bits the kernel must clear at boot.
      - C(all) every bit the bridge implements (ACS Control 0x0000). Needs C(pci=config_acs=) (Linux 6.11 and
        later); on an older boot kernel, for a bridge that implements bits other than ReqRedir, CmpltRedir and
        EgressCtrl, the module fails naming the bits, the release and this option.
      - C(redirect) only ReqRedir, CmpltRedir and EgressCtrl, what C(pci=disable_acs_redir=) (Linux 4.19 and later)
        clears; the other bits keep what the kernel and firmware set.
      - The run-time route always clears every bit.
    type: str
    choices: [all, redirect]
    default: all
  boot_kernel:
    description:
      - Release of the kernel that boots next (C(6.1.0-50-amd64)), which decides the kernel parameter of
        I(route=kernel_args), C(pci=config_acs=) from 6.11 and C(pci=disable_acs_redir=) from 4.19.
    type: str
  boot_argument:
    description:
      - With I(route=kernel_args), the whole kernel argument to use instead of the one the module builds
        (C(pci=config_acs="..."), C(pci=disable_acs_redir="...")); C(boot_check) still reads the registers.
    type: str
  root:
    description:
      - Directory holding the C(sys/) tree. Leave at C(/) on a live host; point it at a captured
        or fabricated tree for tests.
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Computes the same report, with C(after) the value that would be written, and writes nothing.
  diff_mode:
    support: full
    description: Returns C(diff) with one line per selected bridge, C(<address> <vendor>:<device> ACSCtl <value>
      (<bits>)), before and after (in check mode, the value that would be written); bridges whose ACS state
      is unknown appear on both sides as C(ACSCtl unknown (<reason>)).
  platform:
    support: full
    platforms: linux
    description: Linux sysfs.
notes:
  - Needs root (C(become)) on a live host; unprivileged reads of the configuration space stop
    after 64 bytes, before the extended capabilities, and the module fails saying so.
  - Under kernel lockdown (Secure Boot on Debian, Ubuntu and EL kernels) a write refused with EPERM is reported with
    lockdown as its cause, never as a missing C(become); I(route=auto) does not try it.
  - ACS is set again by the kernel at every boot; pair this module with a boot-time applier
    (the C(gpudirect_pcie_acs) role installs C(gpudirect-pcie-acs.service)) or a kernel parameter.
  - Changing ACS at run time does not rebuild IOMMU groups, which the kernel forms at boot.
requirements:
  - Linux with sysfs mounted at C(<root>/sys).
"""

EXAMPLES = r"""
- name: Clear ACS on the PLX / Broadcom PEX switch ports
  gpudirect_pcie_acs:
  become: true

- name: Clear ACS only on the bridges between GPUs and RDMA NICs
  gpudirect_pcie_acs:
    mode: gpu_nic_path
    pairs: "{{ ansible_facts.gpudirect.pairs }}"
  become: true

- name: Clear ACS on two named bridges only
  gpudirect_pcie_acs:
    mode: none
    include: ["0000:02:08.0", "02:10.0"]
  become: true

- name: Restore the kernel's default ACS on the PLX ports
  gpudirect_pcie_acs:
    state: enabled
  become: true

- name: On a ConnectX-8 / Grace direct-NIC host, get the pci=config_acs value rdma_topo computes
  gpudirect_pcie_acs:
    mode: plx
    direct_nic: auto
  become: true
  register: acs

- name: Report ACS on every bridge, change nothing
  gpudirect_pcie_acs:
    mode: all
    state: query
  become: true
"""

RETURN = r"""
bridges:
  description: Selected bridges that have an ACS capability, sorted by address.
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
      sample: "0000:02:08.0"
    vendor_id:
      description: PCI vendor id.
      type: str
      sample: "0x10b5"
    device_id:
      description: PCI device id.
      type: str
      sample: "0x8747"
    reason:
      description: Why the bridge was selected (C(plx), C(all), C(include), C(gpu_nic_path GPU0/mlx5_0), ...).
      type: str
      sample: plx
    acs_offset:
      description: Configuration-space offset of the ACS extended capability, found by walking the list.
      type: int
      sample: 328
    acs_offset_hex:
      description: I(acs_offset) in hex.
      type: str
      sample: "0x148"
    acs_ctl_offset:
      description: Absolute offset of the ACS Control register that is read and written (I(acs_offset) + 6).
      type: int
      sample: 334
    acs_cap:
      description: ACS Capability register.
      type: str
      sample: "0x005f"
    acs_cap_bits:
      description: ACS features the bridge implements.
      type: list
      elements: str
      sample: [SrcValid, TransBlk, ReqRedir, CmpltRedir, UpstreamFwd, DirectTrans]
    topology:
      description: Where the bridge sits, its sysfs device path below C(/sys/devices) (host bridge, then every
        PCI function from the root port down to the bridge); null when it cannot be read. The boot-time
        applier checks it, so that an identical switch port moved to this address by a renumbering is
        not written.
      type: str
      sample: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0"
    config_acs:
      description: This bridge's entry for the kernel parameter C(pci=config_acs=) (Linux 6.11 and later)
        that clears at boot every ACS feature the bridge implements; flags from bit 6 down to bit 0,
        C(0) = force off, C(x) = leave (not implemented).
      type: str
      sample: "0x00000@0000:02:08.0"
    before:
      description: ACSCtl before the task.
      type: str
      sample: "0x005d"
    before_bits:
      description: Bits set in I(before).
      type: list
      elements: str
      sample: [SrcValid, ReqRedir, CmpltRedir, UpstreamFwd, DirectTrans]
    after:
      description: ACSCtl after the task (read back), or the value that would be written in check mode.
      type: str
      sample: "0x0000"
    after_bits:
      description: Bits set in I(after).
      type: list
      elements: str
      sample: []
    changed:
      description: Whether this register changed (would change in check mode).
      type: bool
      sample: true
    log:
      description: One line for the change log.
      type: str
      sample: "0000:02:08.0 10b5:8747 ACS@0x148 ACSCtl@0x14e 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans) -> 0x0000 (none)"
selected:
  description: Addresses selected by I(mode) and I(include), minus I(exclude).
  returned: always
  type: list
  elements: str
  sample: ["0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]
skipped_bridges:
  description:
    - Selected or excluded addresses that were not touched, with the reason.
    - Not called C(skipped), because a true C(skipped) key in a result makes Ansible mark the
      whole task as skipped (and hide C(changed)).
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
    reason:
      description: C(no ACS capability) (followed by C((conventional PCI function ...)) for a bridge without a
        PCI Express capability), C(excluded), or C(not present in sysfs).
      type: str
  sample: [{"address": "0000:01:00.0", "reason": "no ACS capability"}]
unknown_bridges:
  description: Selected bridges whose ACS state cannot be known; only I(state=query) returns them
    without failing (the other states fail, listing them in the failure result).
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
    vendor_id:
      description: PCI vendor id.
      type: str
    device_id:
      description: PCI device id.
      type: str
    reason:
      description: What was found where.
      type: str
  sample: [{"address": "0000:02:08.0", "vendor_id": "0x10b5", "device_id": "0x8747",
            "reason": "extended capability list loops: 0x200 points back to 0x100"}]
diff:
  description: ACSCtl per selected bridge before and after, one line each (see I(diff_mode)).
  returned: with C(--diff)
  type: dict
  contains:
    before:
      description: Lines before the task.
      type: str
      sample: "0000:02:08.0 10b5:8747 ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd DirectTrans)\n"
    after:
      description: Lines after the task, or as they would be in check mode.
      type: str
      sample: "0000:02:08.0 10b5:8747 ACSCtl 0x0000 (none)\n"
vfio_devices:
  description: PCI functions bound to a vfio driver (any driver whose name contains C(vfio)).
  returned: always
  type: list
  elements: str
  sample: []
kernel_param:
  description: Values for the optional kernel-parameter mode, built from the bridges in C(bridges);
    empty strings when there are none. The entries are joined with C(;), which GRUB treats as a
    command separator, so quote the value (C(pci=config_acs="...")) in boot-loader configuration.
  returned: always
  type: dict
  contains:
    config_acs:
      description: Value of C(pci=config_acs=) (Linux 6.11 and later).
      type: str
      sample: "0x00000@0000:02:08.0;0x00000@0000:02:10.0"
    disable_acs_redir:
      description: Value of C(pci=disable_acs_redir=) (kernels before 6.11; clears only ReqRedir,
        CmpltRedir and EgressCtrl).
      type: str
      sample: "0000:02:08.0;0000:02:10.0"
    boot_argument:
      description: With I(route=kernel_args) and I(state=disabled), the whole argument the boot kernel takes
        (joined with rdma_topo's value on a direct-NIC platform), or I(boot_argument); empty otherwise.
      type: str
      sample: 'pci=disable_acs_redir="0000:00:04.0"'
    boot_parameter:
      description: The C(pci=) option of I(boot_argument) (C(config_acs), C(disable_acs_redir)); null without one.
      type: str
      sample: disable_acs_redir
    boot_since:
      description: The first mainline release with that option; null for an I(boot_argument) given.
      type: str
      sample: "4.19"
    boot_kernel:
      description: I(boot_kernel).
      type: str
      sample: 6.1.0-50-amd64
    clear:
      description: I(clear).
      type: str
      sample: redirect
    direct_nic_config_acs:
      description: The C(pci=config_acs=) value rdma_topo computes for a direct-NIC platform (C(direct_nic.config_acs));
        empty when there is none or rdma_topo wants only the kernel's default ACS.
      type: str
      sample: "xx111x0@0008:00:00.0;xx110x1@0008:02:00.0;xx101x1@0008:02:01.0"
route:
  description: The route taken (I(route)) and why.
  returned: always
  type: dict
  contains:
    choice:
      description: I(route).
      type: str
      sample: auto
    route:
      description: C(runtime) or C(kernel_args).
      type: str
      sample: kernel_args
    why:
      description: Why, in a sentence.
      type: str
      sample: "kernel lockdown is integrity (/sys/kernel/security/lockdown: none [integrity] confidentiality), ..."
    reason:
      description: Why, in a few words.
      type: str
      sample: kernel lockdown is integrity
    lockdown:
      description: The lockdown as read (C(mode), C(text), C(error), C(refuses_pci_writes), C(source)).
      type: dict
      sample: {"mode": "integrity", "text": "none [integrity] confidentiality", "error": null,
               "refuses_pci_writes": true, "source": "/sys/kernel/security/lockdown"}
boot_check:
  description: With I(route) C(kernel_args) and I(state=disabled), one line per bridge whose bits that I(clear)
    wants off are still on (C(<address> (<ids>) ACSCtl <value> (<bits>) <bits> still on)); empty once the kernel
    cleared them at boot, and on the run-time route.
  returned: always
  type: list
  elements: str
  sample: ["0000:00:04.0 (1b36:000c): ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd): ReqRedir CmpltRedir
    still on"]
direct_nic:
  description: Direct-NIC platform handling (I(direct_nic)).
  returned: always
  type: dict
  contains:
    choice:
      description: I(direct_nic).
      type: str
      sample: auto
    platform:
      description: Whether a device rdma_topo knows as direct-NIC was found.
      type: bool
      sample: true
    devices:
      description: Those devices (C(address), C(ids), C(type) as rdma_topo names it, C(name), C(since) the first
        rdma-core release whose rdma_topo knows the id).
      type: list
      elements: dict
      sample: [{"address": "0008:02:00.0", "ids": "15b3:197c", "type": "cx_switch",
                "name": "ConnectX built-in PCIe switch port", "since": "61.0"}]
    ids_source:
      description: Where the device ids come from.
      type: str
      sample: rdma-core kernel-boot/rdma_topo (pci_device_types)
    rdma_topo:
      description: Path of the rdma_topo that ran; null when it did not run.
      type: str
      sample: /usr/sbin/rdma_topo
    supported:
      description: Whether rdma_topo found a topology it supports; null when it did not run.
      type: bool
      sample: true
    config_acs:
      description: The C(pci=config_acs=) value of C(rdma_topo write-grub-acs --dry-run), without quotes.
      type: str
      sample: "xx111x0@0008:00:00.0;xx110x1@0008:02:00.0;xx101x1@0008:02:01.0"
    entries:
      description: Its entries, C(flags) (bit 6 first; 0/1 force, x leave) and C(address).
      type: list
      elements: dict
      sample: [{"flags": "xx110x1", "address": "0008:02:00.0"}]
    managed:
      description: Bridges whose ACS rdma_topo decides; left out of this module's selection (C(skipped_bridges)
        reason C(ACS set by rdma_topo at boot (direct-NIC platform))).
      type: list
      elements: str
      sample: ["0008:00:00.0", "0008:02:00.0", "0008:02:01.0"]
    check:
      description: C(rdma_topo check) read back (C(supported), C(topology), C(acs) per bridge with C(ok), C(current),
        C(required), C(checks), C(failed), C(errors)); null when it did not run. C(failed) is not empty until the
        host has booted with the kernel argument.
      type: dict
      sample: {"topology": "ConnectX DMA functions", "failed": ["ACS for cx_switch 0008:02:00.0 has incorrect values
        0011101 != xx110x1, (0x1d != 0x19)"]}
changes:
  description: One sentence per bridge whose ACS Control changed (in check mode, would change), with the
    before and after values; empty when every selected bridge already holds its target value. The
    C(gpudirect_pcie_acs) role's plan (C(gpudirect_pcie_acs_plan.changes)) is built from it.
  returned: always
  type: list
  elements: str
  sample: ["ACS on bridge 0000:02:08.0 (10b5:8747): ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir UpstreamFwd
    DirectTrans) -> 0x0000 (none)"]
disruption:
  description: One sentence per bridge of C(changes) that has a GPU (PCI class 0x0300/0x0302) or a network
    controller (class 0x02xx) with a bound driver below it, naming the bridge and those devices; their
    peer-to-peer and DMA traffic is routed differently from the moment the register changes, so running
    jobs should be drained first. A bound GPU/NIC whose place in the PCI tree cannot be read is named too.
  returned: always
  type: list
  elements: str
  sample: ["ACS change on bridge 0000:02:08.0 (10b5:8747, ACSCtl 0x005d (SrcValid ReqRedir CmpltRedir
    UpstreamFwd DirectTrans) -> 0x0000 (none)) with bound GPU 0000:03:00.0 (driver nvidia) below it"]
setpci:
  description: Path of C(setpci) (pciutils) on this host, which the boot-time applier needs; null when it is
    not in the PATH.
  returned: always
  type: str
  sample: /usr/bin/setpci
state:
  description: The requested state.
  returned: always
  type: str
  sample: disabled
msg:
  description: Summary.
  returned: always
  type: str
  sample: "ACS cleared on 3 of 3 bridges with ACS (4 selected); 1 without ACS capability"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_pcie_acs import DEFAULT_ACS_CTL, DIRECT_NIC_CHOICES, AcsError, run
from ansible.module_utils.gpudirect_pcie_acs_boot import CLEAR_CHOICES, ROUTES
from ansible.module_utils.gpudirect_rdma_topo import RDMA_TOPO_PATHS


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="plx", choices=["plx", "gpu_nic_path", "all", "none"]),
            include=dict(type="list", elements="str", default=[]),
            exclude=dict(type="list", elements="str", default=[]),
            pairs=dict(type="list", elements="dict", default=[]),
            pair_distances=dict(type="list", elements="str", default=["PIX", "PXB", "PHB"],
                                choices=["PIX", "PXB", "PHB", "NODE", "SYS"]),
            state=dict(type="str", default="disabled", choices=["disabled", "enabled", "query"]),
            acs_ctl=dict(type="int", default=DEFAULT_ACS_CTL),
            force=dict(type="bool", default=False),
            direct_nic=dict(type="str", default="auto", choices=list(DIRECT_NIC_CHOICES)),
            rdma_topo=dict(type="path"),
            route=dict(type="str", default="auto", choices=list(ROUTES)),
            clear=dict(type="str", default="all", choices=list(CLEAR_CHOICES)),
            boot_kernel=dict(type="str"),
            boot_argument=dict(type="str"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )

    def run_command(argv, environ_update):
        # read-only rdma_topo subcommands, list form, no shell
        return module.run_command(argv, environ_update=environ_update, check_rc=False)

    def find_tool():
        for path in RDMA_TOPO_PATHS:
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        return module.get_bin_path("rdma_topo")

    try:
        result = run(module.params, module.check_mode, module.warn, diff=module._diff, run_command=run_command,
                     find_tool=find_tool)
    except AcsError as exc:
        details = dict(exc.details)
        details.setdefault("changed", False)
        module.fail_json(msg=exc.msg, **details)
    # the boot-time applier runs setpci (pciutils): the role's plan installs pciutils when it is missing
    result["setpci"] = module.get_bin_path("setpci")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
