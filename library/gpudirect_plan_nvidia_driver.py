#!/usr/bin/python
"""Read-only plan of the gpudirect_nvidia_driver role: what is installed and what the role would change."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_plan_nvidia_driver
short_description: Probe the NVIDIA driver on a host and decide what the gpudirect_nvidia_driver role does
description:
  - Reads the installed driver packages, the nvidia module (loaded and on disk), OFED, the DKMS build
    record, NVIDIA class-0x0680 PCI functions, NVSwitch management functions (Mellanox functions whose
    VPD carries SMDL=SW_MNG), nouveau, nvidia-persistenced, the nvidia module options and the IMEX
    configuration, and decides the driver flavour, the branch check, install / change / none / keep, the
    DKMS rebuild against OFED, the fabric manager, NVLSM and IMEX, the module options, and what would
    interrupt running jobs.
  - Never changes anything; C(changed) is always false. The decision logic is in
    C(module_utils/gpudirect_nvidia_plan.py) and C(module_utils/gpudirect_nvidia.py).
  - Fails before any change, naming the value and the variable to set, on a request the GPUs or the
    installed driver cannot serve (unknown branch, flavour impossible for a GPU, a driver installed outside
    the package manager that differs from the wanted one, unreadable driver version text).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  branch:
    description: Driver branch (C(gpudirect_nvidia_driver_branch)), three digits.
    type: str
    required: true
  branch_unlisted_ok:
    description: Accept a well-formed branch the toolkit does not list (C(gpudirect_nvidia_driver_branch_unlisted_ok)).
    type: bool
    default: false
  version:
    description: Exact driver version of the branch (C(gpudirect_nvidia_driver_version)); empty for any.
    type: str
    default: ""
  flavor:
    description: C(gpudirect_nvidia_driver_flavor).
    type: str
    default: auto
    choices: [auto, open, proprietary]
  flavor_fallback:
    description: Flavour C(auto) uses without an NVIDIA GPU (C(gpudirect_nvidia_driver_flavor_fallback)).
    type: str
    default: open
    choices: [open, proprietary]
  gpu_support:
    description:
      - C(gpudirect_nvidia_driver_gpu_support) - per PCI device id the kernel modules NVIDIA supports on it
        (C(flavors) open, either or proprietary; optional C(first_branch), C(last_branch), C(name)).
      - Decides an id the toolkit's NVIDIA data does not know; without it such an id fails with C(auto) and
        C(proprietary).
    type: dict
    default: {}
  fabricmanager:
    description: C(gpudirect_nvidia_driver_fabricmanager) - auto, true or false.
    type: str
    default: auto
  nvlsm:
    description: C(gpudirect_nvidia_driver_nvlsm) - auto (on NVLink-5 HGX baseboards, beside the fabric manager), true or false.
    type: str
    default: auto
  imex:
    description: C(gpudirect_nvidia_driver_imex) - auto (on GB200/GB300 compute trays), true or false.
    type: str
    default: auto
  imex_nodes:
    description:
      - C(gpudirect_nvidia_driver_imex_nodes) - addresses of every node of the node's IMEX domain, in the same order
        on each; empty leaves the IMEX service to the scheduler (per job).
    type: list
    elements: str
    default: []
  own_addresses:
    description: The node's IP addresses; a non-empty C(imex_nodes) of IP addresses must contain one of them.
    type: list
    elements: str
    default: []
  module_options:
    description: C(gpudirect_nvidia_driver_module_options) - NVreg_* parameters of the nvidia module.
    type: dict
    default: {}
  module_options_conf:
    description: The modprobe.d file the role writes the nvidia module options to.
    type: path
    default: /etc/modprobe.d/gpudirect-nvidia.conf
  gpus:
    description: The NVIDIA GPUs, C(ansible_facts.gpudirect.gpus) (each with C(device_id), C(address), C(name)).
    type: list
    elements: dict
    default: []
  os_family:
    description: C(ansible_facts.os_family); the fabric manager package and the packages to install depend on it.
    type: str
    required: true
  hold:
    description: C(gpudirect_nvidia_driver_hold).
    type: bool
    default: true
  blacklist_nouveau:
    description: C(gpudirect_nvidia_driver_blacklist_nouveau).
    type: bool
    default: true
  nouveau_conf:
    description: The blacklist file looked for inside each initramfs.
    type: path
    default: /etc/modprobe.d/gpudirect-blacklist-nouveau.conf
  rebuild_on_ofed_change:
    description: C(gpudirect_nvidia_driver_rebuild_on_ofed_change).
    type: bool
    default: true
  ofed_changed:
    description: C(gpudirect_ofed_changed) from the gpudirect_mlnx_ofed stage in this run.
    type: bool
    default: false
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.read_only
notes:
  - Commands run in list form with C(LC_ALL=C); a missing command (no modinfo, no dpkg-query) reads as
    nothing found.
"""

EXAMPLES = r"""
- name: Plan the driver
  gpudirect_plan_nvidia_driver:
    branch: "{{ gpudirect_nvidia_driver_branch }}"
    version: "{{ gpudirect_nvidia_driver_version }}"
    flavor: "{{ gpudirect_nvidia_driver_flavor }}"
    gpus: "{{ ansible_facts.gpudirect.gpus | default([]) }}"
    os_family: "{{ ansible_facts['os_family'] }}"
  register: gpudirect_nvidia_driver_plan
"""

RETURN = r"""
changes:
  description: What the role would change, one short sentence each; empty when converged.
  returned: always
  type: list
  elements: str
  sample: ["install the NVIDIA driver branch 580 (newest) (open) from the CUDA repository: nvidia-open"]
disruption:
  description: What would interrupt running jobs (a module reload, a reboot); empty when nothing would.
  returned: always
  type: list
  elements: str
  sample: ["nvidia modules reload: 550.90.07 -> 570.86.15"]
action:
  description: >-
    none (packages match), install (nothing installed), change (packages differ), keep (a matching driver
    installed outside the package manager, left alone), refuse (never returned: the module fails instead).
  returned: always
  type: str
managed:
  description: Packages from the CUDA repository carry the driver (repository, packages, DKMS, holds are managed).
  returned: always
  type: bool
source:
  description: Where the driver comes from - package (CUDA repository), foreign (runfile, image), other package, none.
  returned: always
  type: str
message:
  description: The driver decision in one sentence.
  returned: always
  type: str
installed_version:
  description: Installed driver version of the wanted flavour (package) or of the foreign module; empty for none.
  returned: always
  type: str
installed_flavor:
  description: Flavour of the installed driver (open, proprietary); empty when unknown or none.
  returned: always
  type: str
loaded_version:
  description: Version of the loaded nvidia module; empty when not loaded.
  returned: always
  type: str
loaded:
  description: Which of nvidia, nvidia_peermem, nvidia_uvm, nvidia_drm, nvidia_modeset, nouveau are loaded.
  returned: always
  type: list
  elements: str
branch:
  description: The checked branch.
  returned: always
  type: str
branch_reasons:
  description: Why the branch is accepted (known, or unlisted and accepted; GPUs it was not checked against).
  returned: always
  type: list
  elements: str
version:
  description: The wanted exact version (C(gpudirect_nvidia_driver_version)); empty for the newest of the branch.
  returned: always
  type: str
flavor:
  description: The chosen flavour, open or proprietary.
  returned: always
  type: str
flavor_reasons:
  description: Why this flavour (the GPUs and what NVIDIA's data says of them, or the variable).
  returned: always
  type: list
  elements: str
held:
  description: Driver packages dpkg has on hold now (Debian family).
  returned: always
  type: list
  elements: str
dkms_package:
  description: DKMS package of the flavour (Debian family).
  returned: always
  type: str
install_packages:
  description: Packages (Debian) or the module stream (EL) the role installs.
  returned: always
  type: list
  elements: str
rebuild:
  description: Rebuild the nvidia DKMS module against OFED (C(rebuild_reason) says why).
  returned: always
  type: bool
rebuild_reason:
  description: Why the DKMS module is rebuilt; empty when it is not.
  returned: always
  type: str
reload:
  description: The loaded nvidia modules are unloaded and loaded again (new driver or rebuild).
  returned: always
  type: bool
unload_order:
  description: Modules unloaded, in this order, to load another driver.
  returned: always
  type: list
  elements: str
kernel:
  description: Running kernel release.
  returned: always
  type: str
ofed:
  description: C(ofed_info -s) output; empty without OFED.
  returned: always
  type: str
stamp:
  description: The DKMS build record (driver, kernel, OFED); empty when none.
  returned: always
  type: str
nouveau:
  description: "C(blacklist) (a kernel has nouveau and blacklisting is on), C(kernels), C(initramfs) (kernels whose
    image carries nouveau.ko without the blacklist), C(loaded)."
  returned: always
  type: dict
persistenced:
  description: C(unit), C(systemd), C(running), C(installed), and C(managed) (the role enables and starts it).
  returned: always
  type: dict
fabricmanager:
  description: C(wanted), C(reason), C(switches), C(other), C(package) (name for the branch and family), C(installed).
  returned: always
  type: dict
nvlink_generation:
  description: "What decided the NVLink services: C(nvswitch) (NVSwitch 3/4), C(nvlink5) (NVLink-5 HGX),
    C(multinode) (GB200/GB300 compute tray) or C(none)."
  returned: always
  type: str
nvlsm:
  description: C(wanted), C(reason), C(lpfs) (NVSwitch management functions), C(packages), C(missing).
  returned: always
  type: dict
imex:
  description: "C(wanted), C(reason), C(package), C(installed), C(nodes), C(nodes_config) (the file's wanted
    text), C(service) (C(domain) with nodes, else C(scheduler)), C(channel0) (its device node exists)."
  returned: always
  type: dict
module_options:
  description: "C(wanted) (NVreg_* to value), C(file) (what the file has), C(write), C(line), C(stale) (loaded
    values that differ), C(reload) (a module reload is planned for them)."
  returned: always
  type: dict
versionlock_plugin:
  description: The dnf versionlock plugin is installed (EL).
  returned: always
  type: bool
probe:
  description: What was read on the host (packages, module, held packages, NVIDIA bridges, ...), for debugging.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import Host, module_runner
from ansible.module_utils.gpudirect_nvidia_plan import PlanError, decide, probe


class _Host(Host):
    """The host (module_utils/gpudirect_host.py) as ``gpudirect_nvidia_plan.probe`` reads it: stripped
    file text, ``(rc, stdout)`` of commands run in list form, never through a shell."""

    def __init__(self, module):
        Host.__init__(self, module_runner(module))

    @staticmethod
    def read(path):
        return Host.read(path).strip()

    def run(self, argv):
        return Host.run(self, argv)[:2]


def main():
    module = AnsibleModule(
        argument_spec={
            "branch": {"type": "str", "required": True},
            "branch_unlisted_ok": {"type": "bool", "default": False},
            "version": {"type": "str", "default": ""},
            "flavor": {"type": "str", "default": "auto", "choices": ["auto", "open", "proprietary"]},
            "flavor_fallback": {"type": "str", "default": "open", "choices": ["open", "proprietary"]},
            "gpu_support": {"type": "dict", "default": {}},
            "fabricmanager": {"type": "str", "default": "auto"},
            "nvlsm": {"type": "str", "default": "auto"},
            "imex": {"type": "str", "default": "auto"},
            "imex_nodes": {"type": "list", "elements": "str", "default": []},
            "own_addresses": {"type": "list", "elements": "str", "default": []},
            "module_options": {"type": "dict", "default": {}},
            "module_options_conf": {"type": "path", "default": "/etc/modprobe.d/gpudirect-nvidia.conf"},
            "gpus": {"type": "list", "elements": "dict", "default": []},
            "os_family": {"type": "str", "required": True},
            "hold": {"type": "bool", "default": True},
            "blacklist_nouveau": {"type": "bool", "default": True},
            "nouveau_conf": {"type": "path", "default": "/etc/modprobe.d/gpudirect-blacklist-nouveau.conf"},
            "rebuild_on_ofed_change": {"type": "bool", "default": True},
            "ofed_changed": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        found = probe(_Host(module), params["branch"], params["nouveau_conf"],
                      options_conf=params["module_options_conf"])
        plan = decide(found, params)
    except PlanError as error:
        module.fail_json(msg="gpudirect_nvidia_driver: %s" % error)
    plan["probe"] = found
    if plan["action"] == "refuse":
        module.fail_json(msg="gpudirect_nvidia_driver: %s" % plan["message"], **plan)
    module.exit_json(**plan)


if __name__ == "__main__":
    main()
