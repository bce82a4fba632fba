#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Plan the GPUDirect RDMA peer-memory path of a host, read-only (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_plan_peermem
short_description: Choose the GPUDirect RDMA peer-memory path (dma-buf, nvidia-peermem, nv_peer_mem) and plan it, read-only
description:
  - Reads the host (never changes it) and decides how the NIC reaches GPU memory, for the
    C(gpudirect_peermem) role, which acts only on the result.
  - "Reads: the nvidia module's version and licence (C(modinfo) for the running kernel, else the loaded
    module's C(/sys/module/nvidia/version) and C(/proc/driver/nvidia/version), for a driver from a runfile
    or an image or a kernel without C(/lib/modules)); the rdma-core package; C(libibverbs.so.1) as the
    dynamic loader finds it, the rdma-core version in its file name and whether it exports
    C(ibv_reg_dmabuf_mr); C(ofed_info -s); the peer-memory modules loaded and built; openibd; the role's
    boot-time files and units; the nv_peer_mem service and C(ONBOOT) setting."
  - C(dmabuf) when all hold - an NVIDIA GPU in O(facts), Turing or later, the open kernel module, driver
    >= 515, running kernel >= 5.12 with C(CONFIG_DMA_SHARED_BUFFER), and a libibverbs exporting
    C(ibv_reg_dmabuf_mr) (rdma-core >= 34). Else C(nvidia_peermem) (driver >= R470), else C(nv_peer_mem).
    Both modules need the peer-memory API of MLNX_OFED/DOCA-OFED.
  - C(changes) lists what the role would change, C(disruption) what would interrupt running jobs
    (unloading a loaded peer-memory module to load the other one). Loading a module that is not loaded is
    a change, not a disruption.
  - Versions are read by C(module_utils/gpudirect_versions.py); output it cannot read fails the module
    naming the text, never a guess.
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  mechanism:
    description:
      - The wanted path, the role's C(gpudirect_peermem_mechanism). C(auto) chooses as described above.
      - One of C(auto), C(dmabuf), C(nvidia_peermem), C(nv_peer_mem) (checked by the module so that the
        message names the role's knob).
    type: str
    default: auto
  facts:
    description:
      - C(ansible_facts.gpudirect) of the host (the C(gpudirect_facts) module); its GPUs, running kernel,
        dma-buf kernel support and driver decide whether dma-buf is possible.
    type: dict
    default: {}
  unit_name:
    description: Name of the role's boot-time loader unit (used after openibd).
    type: str
    default: gpudirect-nvidia-peermem.service
  unit_path:
    description: Path of that unit file.
    type: path
    default: /etc/systemd/system/gpudirect-nvidia-peermem.service
  modules_load_path:
    description: The role's C(modules-load.d) entry (used without openibd).
    type: path
    default: /etc/modules-load.d/gpudirect-nvidia-peermem.conf
  nv_conf_path:
    description: nv_peer_mem's configuration file (C(ONBOOT=yes)).
    type: path
    default: /etc/infiniband/nv_peer_mem.conf
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.read_only
notes:
  - C(changed) is always false; what a run of the role would change is in C(changes).
  - Whether the contents of the role's unit or modules-load.d file match is left to the role's
    C(template)/C(copy) tasks (shown by C(--check --diff)); the plan lists a file that is missing.
"""

EXAMPLES = r"""
- name: Plan the peer-memory path
  gpudirect_plan_peermem:
    mechanism: "{{ gpudirect_peermem_mechanism }}"
    facts: "{{ ansible_facts.gpudirect | default({}) }}"
  register: gpudirect_peermem_plan

- name: Show what would interrupt running jobs
  ansible.builtin.debug:
    var: gpudirect_peermem_plan.disruption
"""

RETURN = r"""
path:
  description: The chosen peer-memory path (the same as C(mechanism)).
  returned: always
  type: str
  sample: nvidia_peermem
mechanism:
  description: C(dmabuf), C(nvidia_peermem) or C(nv_peer_mem).
  returned: always
  type: str
  sample: dmabuf
ok:
  description: The chosen path can work on this host now; false with the reason last in C(reasons).
  returned: always
  type: bool
  sample: true
reasons:
  description: Why this path, in words.
  returned: always
  type: list
  elements: str
  sample: ["dma-buf: 1 GPU(s): 0x2330 (NVIDIA H100 80GB HBM3); open kernel module; driver 580.159.04 >= 515 (CUDA >= 11.7);
            kernel 6.18.44-fc-v657-gpu >= 5.12; /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0 (rdma-core 50.0)
            exports ibv_reg_dmabuf_mr"]
dmabuf:
  description: Whether dma-buf is possible (C(ok)) and the conditions that hold, or the ones that do not (C(reasons)).
  returned: always
  type: dict
  sample: {ok: false, reasons: ["no NVIDIA GPU in the facts: dma-buf cannot be proven"]}
changes:
  description: What the role would change, one short sentence each; empty when converged.
  returned: always
  type: list
  elements: str
  sample: ["unload nv_peer_mem", "load nvidia_peermem", "write /etc/systemd/system/gpudirect-nvidia-peermem.service
            (load nvidia_peermem after openibd at boot)"]
disruption:
  description: What would interrupt running jobs; empty when nothing would.
  returned: always
  type: list
  elements: str
  sample: ["nv_peer_mem unload -> nvidia-peermem load"]
provisional:
  description: The decision may change once earlier stages have run (no driver installed yet, or the path is
    not possible yet); the role plans again before acting on it.
  returned: always
  type: bool
  sample: false
load:
  description: The peer-memory module that is not loaded now; null when none. (The role asks modprobe for the
    path's module in any case, since an earlier stage may unload it after the plan was made.)
  returned: always
  type: str
  sample: nvidia_peermem
unload:
  description: Loaded peer-memory modules to unload first (the other client of the same API).
  returned: always
  type: list
  elements: str
  sample: [nv_peer_mem]
boot:
  description: How the module is loaded at boot - C(unit) (after openibd), C(modules_load), C(service)
    (nv_peer_mem's own), or null (dma-buf, or not possible).
  returned: always
  type: str
  sample: unit
remove_files:
  description: The role's boot-time files that exist and are not wanted for this path.
  returned: always
  type: list
  elements: str
  sample: [/etc/modules-load.d/gpudirect-nvidia-peermem.conf]
stop_nv_peer_mem_service:
  description: nv_peer_mem.service exists and is enabled or running and must be stopped and disabled.
  returned: always
  type: bool
  sample: false
build_nv_peer_mem:
  description: nv_peer_mem is the path and no nv_peer_mem module is built for the running kernel.
  returned: always
  type: bool
  sample: false
found:
  description:
    - What was read from the host - C(kernel), C(driver) (C(version), C(flavor), C(source)), C(rdma_core),
      C(ofed), C(libibverbs) (C(path), C(version), C(dmabuf)), C(loaded), C(loaded_version),
      C(nvidia_peermem_built), C(nvidia_peermem_depends), C(nv_peer_mem_built), C(nv_peer_mem_service),
      C(nv_peer_mem_onboot), C(ib_core_path), C(openibd), C(ofa_symvers), C(files), C(unit).
  returned: always
  type: dict
  sample:
    kernel: 6.18.44-fc-v657-gpu
    driver: {version: 580.159.04, flavor: open, source: loaded module}
    rdma_core: ""
    ofed: ""
    libibverbs: {path: /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0, version: "50.0", dmabuf: true}
    loaded: [ib_core, nvidia]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import module_runner
from ansible.module_utils.gpudirect_peermem import Host, PeermemError, plan, probe


def make_host(module):
    """The live host, its commands run list-form in the C locale (a tool the node lacks answers rc 127)."""
    return Host(module_runner(module))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mechanism=dict(type="str", default="auto"),
            facts=dict(type="dict", default={}),
            unit_name=dict(type="str", default="gpudirect-nvidia-peermem.service"),
            unit_path=dict(type="path", default="/etc/systemd/system/gpudirect-nvidia-peermem.service"),
            modules_load_path=dict(type="path", default="/etc/modules-load.d/gpudirect-nvidia-peermem.conf"),
            nv_conf_path=dict(type="path", default="/etc/infiniband/nv_peer_mem.conf"),
        ),
        supports_check_mode=True,
    )
    paths = {key: module.params[key] for key in ("unit_name", "unit_path", "modules_load_path", "nv_conf_path")}
    try:
        found = probe(make_host(module), paths)
        result = plan(module.params["facts"], module.params["mechanism"], found, paths)
    except PeermemError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
