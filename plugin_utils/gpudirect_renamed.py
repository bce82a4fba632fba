"""The variables of the roles renamed in 1.0.0 (issue #31, outcome 4), and the values a node
still sets under their old names.

Seven roles had bare names (host_prereqs, kernel_update, mlnx_ofed, nic_config,
nvidia_driver, os_release_pin, pcie_acs); they are gpudirect_<old> now, and so is every
variable: ``<old>_<rest>`` is ``gpudirect_<old>_<rest>``. The old names are still taken,
with a deprecation warning, until REMOVED_IN: each renamed role's entry points start
with a task that sets, for each old name a node sets (inventory, group_vars, host_vars,
-e, set_fact) while the new name is not set, the new name to its value (filter
``gpudirect_renamed_vars``). When both are set, the new name wins and the warning says so.

RENAMED lists every public variable of each renamed role (its defaults and
meta/argument_specs.yml, generated from the roles before the rename; a unit test checks
the table against argument_specs both ways), under the new role name, by old name.
kernel_update_serial and kernel_update_max_fail_percentage are read by
playbooks/kernel_update.yml itself (play keywords), not by the role: the playbook reads
the old names as fallbacks too. kernel_update_drain_argv and kernel_update_resume_argv
keep their names: they are the deprecated aliases of gpudirect_drain_command and
gpudirect_drain_resume_command.
"""

from __future__ import annotations

REMOVED_IN = "2.0.0"
RENAMED_IN = "1.0.0"
PREFIX = "gpudirect_"

RENAMED = {
    "gpudirect_host_prereqs": (
        "host_prereqs_grub_dropin_file", "host_prereqs_iommu_kernel_args", "host_prereqs_iommu_passthrough",
        "host_prereqs_limits_file", "host_prereqs_memlock_domains", "host_prereqs_memlock_enabled",
        "host_prereqs_memlock_limit", "host_prereqs_systemd_dropin_name", "host_prereqs_systemd_memlock",
    ),
    "gpudirect_kernel_update": (
        "kernel_update_campaign_record", "kernel_update_max_fail_percentage", "kernel_update_packages",
        "kernel_update_refresh_cache", "kernel_update_serial", "kernel_update_target",
    ),
    "gpudirect_mlnx_ofed": (
        "mlnx_ofed_add_kernel_support", "mlnx_ofed_allow_disruption_over_rdma_netdev",
        "mlnx_ofed_allow_insecure_http", "mlnx_ofed_allow_replace", "mlnx_ofed_doca_version",
        "mlnx_ofed_fw_update", "mlnx_ofed_hold", "mlnx_ofed_installer_extra_args", "mlnx_ofed_method",
        "mlnx_ofed_profile", "mlnx_ofed_repo_arch", "mlnx_ofed_repo_base_url", "mlnx_ofed_repo_distro",
        "mlnx_ofed_repo_key_fingerprints", "mlnx_ofed_repo_key_url", "mlnx_ofed_restart_openibd",
        "mlnx_ofed_tarball_checksum", "mlnx_ofed_tarball_src", "mlnx_ofed_version",
    ),
    "gpudirect_nic_config": (
        "nic_config_devices", "nic_config_install_tool", "nic_config_params", "nic_config_profiles",
        "nic_config_sysfs_root", "nic_config_tool",
    ),
    "gpudirect_nvidia_driver": (
        "nvidia_driver_allow_insecure_http", "nvidia_driver_blacklist_nouveau", "nvidia_driver_branch",
        "nvidia_driver_branch_unlisted_ok", "nvidia_driver_fabricmanager", "nvidia_driver_flavor",
        "nvidia_driver_flavor_fallback", "nvidia_driver_gdrcopy", "nvidia_driver_gdrcopy_version",
        "nvidia_driver_gpu_support", "nvidia_driver_hold", "nvidia_driver_imex", "nvidia_driver_imex_nodes",
        "nvidia_driver_kernel_headers", "nvidia_driver_module_options", "nvidia_driver_nvlsm",
        "nvidia_driver_persistenced", "nvidia_driver_rebuild_on_ofed_change", "nvidia_driver_repo_arch",
        "nvidia_driver_repo_base_url", "nvidia_driver_repo_key_fingerprints", "nvidia_driver_repo_key_url",
        "nvidia_driver_version",
    ),
    "gpudirect_os_release_pin": (
        "os_release_pin_allow_insecure_http", "os_release_pin_allow_kernel_change",
        "os_release_pin_kernel_lock", "os_release_pin_kernel_package_patterns", "os_release_pin_record_file",
        "os_release_pin_release", "os_release_pin_rhel_eus", "os_release_pin_rhel_eus_repositories",
        "os_release_pin_rhel_standard_repositories", "os_release_pin_state",
        "os_release_pin_unattended_blacklist", "os_release_pin_unattended_blacklist_file",
        "os_release_pin_vault_baseurl", "os_release_pin_vault_repositories",
    ),
    "gpudirect_pcie_acs": (
        "pcie_acs_ctl", "pcie_acs_direct_nic", "pcie_acs_exclude", "pcie_acs_force", "pcie_acs_include",
        "pcie_acs_kernel_param", "pcie_acs_kernel_param_value", "pcie_acs_mode", "pcie_acs_pair_distances",
        "pcie_acs_persist", "pcie_acs_state", "pcie_acs_unit_before",
    ),
}


def new_name(old):
    """The name of the old variable ``old`` now."""
    return PREFIX + old


def renamed(variables, role):
    """``[{"old", "new", "value", "message"}, ...]`` for the renamed variables of ``role``
    (its new name) that ``variables`` (a node's host variables: inventory, extra vars,
    facts; not role defaults) sets under the old name. ``value`` is None (and the entry
    only a warning) where the new name is set as well: the new name wins. ``taken`` is true
    where the new name already holds the old one's value: an earlier entry point of the
    run copied it (set_fact), or both are set alike; nothing is left to copy and nothing
    is ignored."""
    if role not in RENAMED:
        raise ValueError("%s is not a renamed role (renamed roles: %s)" % (role, ", ".join(sorted(RENAMED))))
    if not hasattr(variables, "keys") or not hasattr(variables, "__getitem__"):
        raise ValueError("expected a node's host variables (hostvars[inventory_hostname]), got %s"
                         % type(variables).__name__)
    out = []
    for old in RENAMED[role]:
        if old not in variables:
            continue
        new = new_name(old)
        taken = new in variables and variables[new] == variables[old]
        both = new in variables and not taken
        message = ("%s is the name of a variable of the role %s before %s (now %s): it is accepted until %s, "
                   "rename it to %s in your inventory or extra vars" % (old, role[len(PREFIX):], RENAMED_IN, role,
                                                                       REMOVED_IN, new))
        if both:
            message += "; %s is set as well, so the value of %s is used and %s is ignored" % (new, new, old)
        out.append({"old": old, "new": new, "value": None if both else variables[old], "both": both,
                    "taken": taken, "message": message})
    return out
