#!/usr/bin/python
"""Read-only plan of the gpudirect_mlnx_ofed role: probe the OFED stack and decide what the role would do."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_plan_mlnx_ofed
short_description: Decide what the gpudirect_mlnx_ofed role would change on this node, and what that would disrupt
description:
  - Reads the installed OFED stack (C(ofed_info -s)), the installed and held OFED packages (dpkg-query, or rpm and
    C(dnf versionlock list)), the loaded peer-memory modules, the stack's uninstaller, the DOCA repository file and,
    for C(inbox), the distribution's RDMA packages. Changes nothing, in check mode or not.
  - Decides the action (none, install, upgrade, downgrade, replace, remove) by the toolkit's one version rule
    (module_utils/gpudirect_versions.py) and returns C(changes) and C(disruption), the lists every plan of the toolkit
    returns.
  - Connection guard. When the plan has disruption (an openibd restart or an OFED removal resets every ConnectX netdev),
    it finds out whether the controller's SSH connection (C(SSH_CONNECTION) of the module's process or an ancestor,
    else the default route) or a mounted network filesystem (nfs, nfs4, cifs, smb3, lustre, beegfs, gpfs) runs over a
    netdev driven by mlx5_core/mlx4 (directly, or through a bond, team or VLAN on one). If so, it fails naming the
    interface, the address and why, unless O(allow_disruption_over_rdma_netdev) is true.
  - Fails, before anything is changed, when the installed version text cannot be read, when O(wanted_version) is no OFED
    version, and when another stack is in the way and O(allow_replace) is false; each message names the knob.
options:
  method:
    description: C(gpudirect_mlnx_ofed_method).
    type: str
    required: true
    choices: [doca, mlnx_ofed_tarball, inbox]
  wanted_version:
    description: The OFED version C(ofed_info -s) must report (C(24.10-1.1.4)); empty for C(inbox).
    type: str
    default: ""
  profile:
    description: DOCA profile metapackage (C(gpudirect_mlnx_ofed_profile)).
    type: str
    default: doca-ofed
  core_packages:
    description: Packages the role holds (the profile is added for C(doca)).
    type: list
    elements: str
    default: []
  probe_packages:
    description: OFED packages whose installed version and hold are read.
    type: list
    elements: str
    default: []
  peer_modules:
    description: Peer-memory modules that hold references to ib_core (unloaded around a change).
    type: list
    elements: str
    default: [nvidia_peermem, nv_peer_mem, gdrdrv]
  inbox_packages:
    description: The distribution's RDMA packages wanted with C(inbox).
    type: list
    elements: str
    default: []
  hold:
    description: C(gpudirect_mlnx_ofed_hold).
    type: bool
    default: true
  restart_openibd:
    description: C(gpudirect_mlnx_ofed_restart_openibd); false turns the restart into a reboot request.
    type: bool
    default: true
  allow_replace:
    description: C(gpudirect_mlnx_ofed_allow_replace); false fails when another stack or version must be removed.
    type: bool
    default: true
  allow_disruption_over_rdma_netdev:
    description: C(gpudirect_mlnx_ofed_allow_disruption_over_rdma_netdev); true lets a disruptive plan go ahead although the
      controller's connection or a network filesystem runs over a ConnectX netdev.
    type: bool
    default: false
  repo_url:
    description: The DOCA repository URL the role configures.
    type: str
    default: ""
  repo_file:
    description: The repository definition file; the repository counts as configured when it names O(repo_url).
    type: path
    default: /etc/apt/sources.list.d/doca.sources
  repo_key_changed:
    description: Whether the key check (gpudirect_repo_key in check mode) found the keyring to be written.
    type: bool
    default: false
  repo_key_dest:
    description: The keyring file, for the change sentence.
    type: str
    default: ""
  ssh_connection:
    description: C(SSH_CONNECTION) text to use instead of reading it from the process and its ancestors.
    type: str
  sys_root:
    description: Where sysfs is (tests).
    type: path
    default: /sys
  proc_root:
    description: Where procfs is (tests).
    type: path
    default: /proc
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.read_only
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the OFED stage
  gpudirect_plan_mlnx_ofed:
    method: doca
    wanted_version: 24.10-1.1.4
    profile: doca-ofed
    core_packages: [mlnx-ofed-kernel-dkms, mlnx-ofed-kernel-utils]
    probe_packages: [mlnx-ofed-kernel-dkms, mlnx-ofed-kernel-utils, doca-ofed, rdma-core]
    repo_url: https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu24.04/x86_64/
  register: gpudirect_mlnx_ofed_plan
"""

RETURN = r"""
action:
  description: none, install, upgrade, downgrade, replace (other flavour) or remove (inbox wanted, OFED present).
  returned: always
  type: str
message:
  description: The decision in one sentence.
  returned: always
  type: str
changes:
  description: What the role would change (empty when converged).
  returned: always
  type: list
  elements: str
  sample: ["OFED upgrade: OFED-internal 24.10-1.1.4.0.200 -> 25.01-0.6.0 (DOCA-OFED)"]
disruption:
  description: What would interrupt running jobs (openibd restart, OFED removal, peer-memory unload, reboot request).
  returned: always
  type: list
  elements: str
  sample: ["openibd restart: OFED 24.10-1.1.4.0.200 -> 25.01-0.6.0"]
installed_flavor:
  description: MLNX_OFED_LINUX or OFED-internal; null without OFED.
  returned: always
  type: str
installed_version:
  description: The installed OFED version (C(24.10-1.1.4.0.200)); null without OFED.
  returned: always
  type: str
wanted_version:
  description: The wanted OFED version; null for inbox.
  returned: always
  type: str
stack_change:
  description: The OFED stack itself changes (action is not none).
  returned: always
  type: bool
removal:
  description: The installed stack is removed first (downgrade, replace, remove).
  returned: always
  type: bool
install_profile:
  description: The DOCA profile metapackage is missing while the stack matches; installed without a restart.
  returned: always
  type: bool
packages:
  description: Installed OFED packages (name -> version).
  returned: always
  type: dict
held:
  description: OFED packages held (apt) or version-locked (dnf).
  returned: always
  type: list
  elements: str
hold_packages:
  description: The packages the role holds.
  returned: always
  type: list
  elements: str
hold_missing:
  description: Of those, the ones not held yet.
  returned: always
  type: list
  elements: str
release_holds:
  description: Held packages to release before a removal.
  returned: always
  type: list
  elements: str
remove_packages:
  description: Packages the package manager removes (a removal without an uninstaller).
  returned: always
  type: list
  elements: str
uninstaller:
  description: The stack's uninstaller (C(/usr/sbin/ofed_uninstall.sh)), or "".
  returned: always
  type: str
loaded_peer_modules:
  description: Peer-memory modules loaded now (unloaded around a stack change, loaded again after).
  returned: always
  type: list
  elements: str
restart_openibd:
  description: The role restarts openibd after the change.
  returned: always
  type: bool
reboot_reason:
  description: The reboot request the role makes instead of a restart, or "".
  returned: always
  type: str
inbox_missing:
  description: Inbox RDMA packages not installed (inbox method).
  returned: always
  type: list
  elements: str
apt_can_simulate:
  description: python3-apt is importable here, so the apt module can run in check mode.
  returned: always
  type: bool
python_debian:
  description: python3-debian is importable here (ansible.builtin.deb822_repository needs it).
  returned: always
  type: bool
repo_configured:
  description: The repository file already names the repository URL.
  returned: always
  type: bool
check_mode_blind:
  description: Why check mode cannot simulate the DOCA repository tasks here (new repository, no python3-apt ...);
    empty when it can. The role reports the plan's changes instead in that case.
  returned: always
  type: list
  elements: str
installer_messages:
  description: What each documented exit status of mlnxofedinstall means and what to do (status as text -> sentence).
  returned: always
  type: dict
kernel:
  description: The running kernel release.
  returned: always
  type: str
connection_guard:
  description: The connection guard's findings.
  returned: always
  type: dict
  contains:
    at_risk:
      description: Sentences naming what runs over a ConnectX netdev (interface, address, why).
      type: list
      elements: str
    checked:
      description: What was checked and found not to.
      type: list
      elements: str
    overridden:
      description: The plan disrupts something at risk and gpudirect_mlnx_ofed_allow_disruption_over_rdma_netdev let it go ahead.
      type: bool
    detach_restart:
      description: The openibd restart runs detached (async) and the role waits for the connection.
      type: bool
    detach_removal:
      description: The removal of the OFED stack in the way (uninstaller or packages) runs detached (async) and the
        role waits for the connection.
      type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_dpkg import dpkg_query_argv
from ansible.module_utils.gpudirect_host import C_LOCALE, read_text, run_or_fail
from ansible.module_utils.gpudirect_netguard import GuardError, assess, parse_ip_route_get, route_dev_from_proc
from ansible.module_utils.gpudirect_netguard import ssh_connection_from_proc
from ansible.module_utils.gpudirect_ofed import INSTALLER_CODES, OfedPlanError, guard, installer_message, plan
from ansible.module_utils.gpudirect_ofed import parse_dpkg_query, parse_versionlock_list

UNINSTALLERS = ("/usr/sbin/ofed_uninstall.sh", "/usr/bin/ofed_uninstall.sh")
OPENIBD_UNITS = ("/etc/systemd/system/openibd.service", "/lib/systemd/system/openibd.service",
                 "/usr/lib/systemd/system/openibd.service", "/etc/init.d/openibd")


def probe_packages(module, names):
    """(installed {name: version}, held [names]) of the given packages."""
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg:
        # rc 1: some of the names are unknown to dpkg; the others are still printed
        out = run_or_fail(module, dpkg_query_argv(names, dpkg), ok=(0, 1))
        return parse_dpkg_query(out)
    rpm = module.get_bin_path("rpm")
    installed, held = {}, []
    if rpm:
        for name in names:
            rc, out, _ = module.run_command([rpm, "-q", "--qf", "%{VERSION}-%{RELEASE}\n", name],
                                            environ_update=dict(C_LOCALE))
            if rc == 0 and out.strip():
                installed[name] = out.splitlines()[0].strip()
        dnf = module.get_bin_path("dnf")
        if dnf:
            rc, out, _ = module.run_command([dnf, "-q", "versionlock", "list"], environ_update=dict(C_LOCALE))
            held = parse_versionlock_list(out if rc == 0 else "", names)
    return installed, held


def probe(module):
    params = module.params
    ofed_info = module.get_bin_path("ofed_info", opt_dirs=["/usr/bin", "/usr/sbin"])
    ofed = run_or_fail(module, [ofed_info, "-s"]) if ofed_info else ""
    names = list(dict.fromkeys(params["probe_packages"] + params["inbox_packages"]))
    installed, held = probe_packages(module, names) if names else ({}, [])
    repo_text = read_text(params["repo_file"]) or ""
    return {
        "ofed": ofed,
        "packages": dict((k, v) for k, v in installed.items() if k in params["probe_packages"]),
        "held": [h for h in held if h in params["probe_packages"]],
        "inbox_installed": [p for p in params["inbox_packages"] if p in installed],
        "loaded_peer_modules": [m for m in params["peer_modules"]
                                if os.path.isdir(os.path.join(params["sys_root"], "module", m))],
        "openibd": any(os.path.exists(u) for u in OPENIBD_UNITS),
        "uninstaller": next((p for p in UNINSTALLERS if os.path.exists(p)), ""),
        "repo_configured": bool(params["repo_url"]) and params["repo_url"].strip() in repo_text,
    }


def route_dev(module, address):
    """The interface traffic to ``address`` leaves by ("0.0.0.0": the default route)."""
    ip = module.get_bin_path("ip")
    if ip:
        argv = [ip, "-o", "route", "show", "default"] if address == "0.0.0.0" else [ip, "-o", "route", "get", address]
        rc, out, _ = module.run_command(argv, environ_update=dict(C_LOCALE))
        dev = parse_ip_route_get(out) if rc == 0 else None
        if dev:
            return dev
    text = read_text(os.path.join(module.params["proc_root"], "net", "route"))
    return route_dev_from_proc(text, address) if text else None


def apt_can_simulate(module):
    if not module.get_bin_path("dpkg-query"):
        return True
    try:
        import apt_pkg  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        return False
    return True


def python_debian():
    """deb822_repository needs python3-debian in the interpreter that runs the modules."""
    try:
        import debian.deb822  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        return False
    return True


def check_mode_blind(result, params, debian):
    """Why a check-mode run cannot simulate the DOCA repository tasks here ([] when it can)."""
    if params["method"] != "doca":
        return []
    reasons = []
    if not result["repo_configured"]:
        reasons.append("the DOCA repository is not configured yet, so the package manager cannot resolve %s"
                       % ", ".join(result["hold_packages"]))
    if params["repo_key_changed"]:
        reasons.append("the repository key is not written yet")
    if debian and not result["apt_can_simulate"]:
        reasons.append("python3-apt is missing, so apt cannot simulate")
    if debian and not result["python_debian"]:
        reasons.append("python3-debian is missing, so deb822_repository cannot run")
    return reasons


def main():
    module = AnsibleModule(
        argument_spec=dict(
            method=dict(type="str", required=True, choices=["doca", "mlnx_ofed_tarball", "inbox"]),
            wanted_version=dict(type="str", default=""),
            profile=dict(type="str", default="doca-ofed"),
            core_packages=dict(type="list", elements="str", default=[]),
            probe_packages=dict(type="list", elements="str", default=[]),
            peer_modules=dict(type="list", elements="str", default=["nvidia_peermem", "nv_peer_mem", "gdrdrv"]),
            inbox_packages=dict(type="list", elements="str", default=[]),
            hold=dict(type="bool", default=True),
            restart_openibd=dict(type="bool", default=True),
            allow_replace=dict(type="bool", default=True),
            allow_disruption_over_rdma_netdev=dict(type="bool", default=False),
            repo_url=dict(type="str", default=""),
            repo_file=dict(type="path", default="/etc/apt/sources.list.d/doca.sources"),
            repo_key_changed=dict(type="bool", default=False),
            # a keyring path, shown in the change sentence; not a secret
            repo_key_dest=dict(type="str", default="", no_log=False),
            ssh_connection=dict(type="str"),
            sys_root=dict(type="path", default="/sys"),
            proc_root=dict(type="path", default="/proc"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    found = probe(module)
    try:
        result = plan(found, params)
    except OfedPlanError as error:
        module.fail_json(msg=str(error), ofed_info=found["ofed"])
    result["connection_guard"] = {"at_risk": [], "checked": ["not checked: the plan disrupts nothing"],
                                  "overridden": False, "detach_restart": False,
                                  "detach_removal": False}
    if result["disruption"]:
        ssh = params["ssh_connection"]
        if ssh is None:
            ssh = os.environ.get("SSH_CONNECTION") or ssh_connection_from_proc(params["proc_root"], os.getpid())
        mounts = read_text(os.path.join(params["proc_root"], "mounts")) or ""
        try:
            assessment = assess(params["sys_root"], ssh, mounts, lambda address: route_dev(module, address))
            result["connection_guard"] = guard(result, assessment, params["allow_disruption_over_rdma_netdev"])
        except (GuardError, OfedPlanError) as error:
            module.fail_json(msg=str(error), disruption=result["disruption"], changes=result["changes"])
    result["apt_can_simulate"] = apt_can_simulate(module)
    result["python_debian"] = python_debian()
    result["repo_configured"] = found["repo_configured"]
    result["check_mode_blind"] = check_mode_blind(result, params, debian=bool(module.get_bin_path("dpkg-query")))
    result["kernel"] = os.uname()[2]
    result["installer_messages"] = dict((str(code), installer_message(code)) for code in INSTALLER_CODES)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
