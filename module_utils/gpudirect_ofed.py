"""The gpudirect_mlnx_ofed role's decisions: what to do with the OFED stack, and what that would disrupt.

Inputs are what ``library/gpudirect_plan_mlnx_ofed.py`` reads on the node (``ofed_info -s``,
installed and held packages, loaded peer-memory modules, the uninstaller, the
repository file) and the role's variables.  Versions are read ONLY through
``gpudirect_versions`` (one OFED parser in the tree); its matching rule decides
whether the installed stack is the wanted one (``OFED-internal-24.10-1.1.4.0.200:``
IS ``24.10-1.1.4``).

``decide_action``
    ``none``, ``install``, ``upgrade``, ``downgrade``, ``replace`` (the other flavour,
    MLNX_OFED <-> DOCA) or ``remove`` (inbox wanted, OFED present).
``plan``
    The whole plan: the action plus ``changes`` (what would change) and ``disruption``
    (what would interrupt running jobs: the openibd restart that reloads mlx5_core,
    the removal of OFED, unloading peer-memory modules, a reboot instead of the restart).
    Installing packages that restart nothing (an inbox package, a missing DOCA profile
    metapackage of the installed release, a hold) is a change, not a disruption.
``installer_message``
    What an exit status of ``mlnxofedinstall`` means and what to do.

Every error is ``OfedPlanError`` (a ``ValueError``) naming the value and the knob.
"""

from __future__ import absolute_import, division, print_function

from ansible.module_utils import gpudirect_versions as versions
from ansible.module_utils.gpudirect_dpkg import installed_and_held

__metaclass__ = type

WANT_FLAVOR = {"doca": "OFED-internal", "mlnx_ofed_tarball": "MLNX_OFED_LINUX"}
STACK_NAMES = {"doca": "DOCA-OFED", "mlnx_ofed_tarball": "MLNX_OFED"}

# mlnxofedinstall exit statuses (MLNX_OFED user manual, "mlnxofedinstall Return Codes").
INSTALLER_CODES = {
    0: "installation ended successfully",
    1: "the installation failed: read the log named in the output (/tmp/MLNX_OFED_LINUX.*.logs/)",
    2: "no firmware was found for the adapter device: set gpudirect_mlnx_ofed_fw_update: false (the default) or get the "
       "firmware for this PSID from NVIDIA",
    22: "invalid parameter: check gpudirect_mlnx_ofed_installer_extra_args",
    28: "not enough free space: free space in /tmp and / (the installer unpacks and builds there)",
    171: "not applicable to this system configuration (required hardware not present): check that a "
         "ConnectX/BlueField device is installed, or use gpudirect_mlnx_ofed_method: inbox",
    172: "prerequisites are not met: the installer lists the missing packages in its output; install them "
         "(kernel headers for the running kernel, build tools) or add --skip-distro-check only for an "
         "unsupported OS minor release, then run again",
    173: "failed to start the mst driver: check that the kernel headers match the running kernel and that the "
         "mst service is not in use",
    174: "packages from another RDMA stack conflict with MLNX_OFED (foreign or inbox rdma packages): remove "
         "them (the installer output names them) or run with --force, then run again",
}


class OfedPlanError(ValueError):
    """A value the plan cannot use; the message names it and the knob to set."""


def installer_message(rc):
    """What an exit status of mlnxofedinstall means and what to do (one line)."""
    try:
        code = int(rc)
    except (TypeError, ValueError):
        return "mlnxofedinstall exit status %r is not a number" % (rc,)
    return "mlnxofedinstall exited %d: %s" % (
        code, INSTALLER_CODES.get(code, "unknown exit status; read the installer output and its log directory"))


def _parse(parser, value, what):
    try:
        return parser(value)
    except versions.VersionError as error:
        raise OfedPlanError("%s: %s" % (what, error))


def decide_action(installed, method, wanted_version=""):
    """What to do with the OFED stack.

    :param installed: ``ofed_info -s`` output ("" when ofed_info is missing).
    :param method: ``gpudirect_mlnx_ofed_method``: doca, mlnx_ofed_tarball, inbox.
    :param wanted_version: the OFED version wanted (``24.10-1.1.4``); "" for inbox.
    :returns: ``{"action", "installed_flavor", "installed_version", "wanted_version", "message"}``.
    :raises OfedPlanError: when ``installed`` is not ``ofed_info -s`` output, or ``wanted_version``
        is no OFED version (naming ``gpudirect_mlnx_ofed_version``).
    """
    if method not in ("doca", "mlnx_ofed_tarball", "inbox"):
        raise OfedPlanError("gpudirect_mlnx_ofed_method=%r: expected doca, mlnx_ofed_tarball or inbox" % (method,))
    flavor = version = None
    parts = []
    if str(installed or "").strip():
        found = _parse(versions.parse_ofed_info_s, str(installed), "ofed_info -s on the host")
        flavor, version, parts = found["flavor"], found["version"], found["parts"]
    wanted = str(wanted_version or "").strip()
    base = {"installed_flavor": flavor, "installed_version": version, "wanted_version": wanted or None}
    if method == "inbox":
        if version:
            return dict(base, action="remove",
                        message="%s %s installed; inbox rdma-core wanted: OFED is removed" % (flavor, version))
        return dict(base, action="none", message="no OFED stack installed; inbox rdma-core wanted")
    if not wanted:
        raise OfedPlanError("gpudirect_mlnx_ofed_version: the OFED version to expect from ofed_info -s is unknown for this "
                            "release; set it (e.g. 24.10-1.1.4)")
    wanted_parts = _parse(versions.parse_ofed_info_n, wanted, "gpudirect_mlnx_ofed_version")["parts"]
    if not version:
        return dict(base, action="install", message="no OFED stack installed; installing %s" % wanted)
    want_flavor = WANT_FLAVOR[method]
    if flavor != want_flavor and flavor in WANT_FLAVOR.values():
        return dict(base, action="replace",
                    message="%s %s installed, %s %s wanted (%s): the old stack is removed first"
                    % (flavor, version, want_flavor, wanted, method))
    cmp = versions.compare_wanted(parts, wanted_parts)
    if cmp == 0:
        return dict(base, action="none", message="%s %s installed, matches %s" % (flavor, version, wanted))
    action = "upgrade" if cmp < 0 else "downgrade"
    return dict(base, action=action, message="%s %s installed, %s wanted: %s" % (flavor, version, wanted, action))


def parse_dpkg_query(text):
    """``dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'`` -> ``(installed, held)``.

    ``installed`` maps package -> version for packages whose status is installed (second letter
    ``i``); ``held`` lists those whose selection is ``hold`` (first letter ``h``).  Lines of
    packages dpkg knows but has not installed (``un``, ``rc``) are skipped; the lines are read by
    ``gpudirect_dpkg.installed_and_held``, the versions checked here.
    """
    installed, held = installed_and_held(text)
    for name, version in installed.items():
        installed[name] = _parse(versions.parse_package_version, version, "dpkg-query: %s" % name)["version"]
    return installed, held


def parse_versionlock_list(text, names):
    """``dnf versionlock list`` -> the names among ``names`` that are locked.

    Entries read ``<name>-<epoch>:<version>-<release>.*`` (``mlnx-ofed-kernel-dkms-0:24.10-...``): a
    name matches when the entry starts with it, a hyphen and a digit (so ``mlnx-ofed-kernel`` does
    not match ``mlnx-ofed-kernel-dkms-0:...``).  Other lines (metadata notices) are ignored.
    """
    held = []
    for line in str(text or "").splitlines():
        entry = line.strip()
        for name in names:
            if entry.startswith(name + "-") and entry[len(name) + 1:][:1].isdigit() and name not in held:
                held.append(name)
    return held


def plan(probe, params):
    """The gpudirect_mlnx_ofed plan.

    :param probe: ``{"ofed": ofed_info -s text, "packages": {name: version}, "held": [...],
        "loaded_peer_modules": [...], "uninstaller": path or "", "openibd": bool,
        "inbox_installed": [...], "repo_configured": bool}``.
    :param params: the module's parameters (method, wanted_version, profile, core_packages,
        inbox_packages, hold, restart_openibd, allow_replace, repo_key_changed, repo_url).
    :returns: the plan dict (see library/gpudirect_plan_mlnx_ofed.py RETURN).
    :raises OfedPlanError: on bad text or a change the variables forbid (naming the knob).
    """
    method = params["method"]
    decision = decide_action(probe.get("ofed", ""), method, params.get("wanted_version", ""))
    action = decision["action"]
    packages = dict(probe.get("packages") or {})
    held = list(probe.get("held") or [])
    peers = list(probe.get("loaded_peer_modules") or [])
    installed_text = ("%s %s" % (decision["installed_flavor"], decision["installed_version"])
                      if decision["installed_version"] else "none")
    wanted = decision["wanted_version"]
    stack_change = action != "none"
    removal = action in ("replace", "remove", "downgrade")
    if removal and not params.get("allow_replace", True):
        raise OfedPlanError("%s, and gpudirect_mlnx_ofed_allow_replace is false: nothing was changed. Remove the stack yourself "
                            "(%s) or set gpudirect_mlnx_ofed_allow_replace: true"
                            % (decision["message"], probe.get("uninstaller") or "apt/dnf remove of its packages"))
    profile = params.get("profile") or ""
    hold_packages = list(params.get("core_packages") or [])
    if method == "doca":
        hold_packages = [profile] + hold_packages
    install_profile = method == "doca" and not stack_change and profile not in packages
    changes, disruption = [], []
    if method != "inbox":
        if params.get("repo_key_changed"):
            changes.append("repository signing key written (%s)" % params.get("repo_key_dest", "keyring"))
        if method == "doca" and params.get("repo_url") and not probe.get("repo_configured", False):
            changes.append("DOCA repository %s configured" % params.get("repo_url", ""))
    if removal:
        changes.append("OFED removal: %s (%s)" % (installed_text, "uninstaller " + probe["uninstaller"]
                                                  if probe.get("uninstaller") else "package manager"))
        disruption.append("OFED removal: %s" % installed_text)
    if stack_change and method != "inbox":
        changes.append("OFED %s: %s -> %s (%s)" % (action, installed_text, wanted, STACK_NAMES[method]))
        transition = "OFED %s -> %s" % (decision["installed_version"] or "none", wanted)
        if params.get("restart_openibd", True):
            disruption.append("openibd restart: %s" % transition)
        else:
            disruption.append("reboot requested: %s (gpudirect_mlnx_ofed_restart_openibd: false)" % transition)
    if install_profile:
        changes.append("DOCA profile %s installed (OFED %s unchanged, nothing restarted)" % (profile, installed_text))
    if stack_change and peers:
        disruption.append("peer-memory modules unloaded around the OFED change: %s" % ", ".join(peers))
    hold_missing = []
    if params.get("hold", True) and method != "inbox":
        hold_missing = [p for p in hold_packages if p not in held]
        if hold_missing and not stack_change:
            changes.append("hold %s" % ", ".join(hold_missing))
    inbox_missing = []
    if method == "inbox":
        have = set(probe.get("inbox_installed") or [])
        inbox_missing = [p for p in params.get("inbox_packages") or [] if p not in have]
        if inbox_missing:
            changes.append("install inbox RDMA packages: %s" % ", ".join(inbox_missing))
    removable = sorted(p for p in packages if p != "rdma-core")
    message = decision["message"]
    if install_profile:
        message += " (profile %s missing: installing it)" % profile
    return dict(
        decision,
        message=message,
        changes=changes,
        disruption=disruption,
        stack_change=stack_change,
        removal=removal,
        install_profile=install_profile,
        packages=packages,
        held=held,
        hold_packages=hold_packages,
        hold_missing=hold_missing,
        release_holds=[p for p in held if removal],
        remove_packages=removable if removal and not probe.get("uninstaller") else [],
        uninstaller=probe.get("uninstaller") or "",
        loaded_peer_modules=peers,
        openibd=bool(probe.get("openibd")),
        restart_openibd=stack_change and method != "inbox" and bool(params.get("restart_openibd", True)),
        reboot_reason=("gpudirect_mlnx_ofed: OFED changed to %s and openibd was not restarted "
                       "(gpudirect_mlnx_ofed_restart_openibd: false)" % wanted)
        if stack_change and method != "inbox" and not params.get("restart_openibd", True) else "",
        inbox_missing=inbox_missing,
    )


def guard(plan_result, assessment, allow):
    """Apply the connection guard to a plan.

    :param plan_result: what ``plan`` returned.
    :param assessment: what ``gpudirect_netguard.assess`` returned.
    :param allow: ``gpudirect_mlnx_ofed_allow_disruption_over_rdma_netdev``.
    :returns: ``{"at_risk": [sentences], "checked": [...], "overridden": bool, "detach_restart": bool,
        "detach_removal": bool}``: with the override, the openibd restart and the removal of the
        stack in the way run detached on the node, and the role waits for the connection.
    :raises OfedPlanError: when the plan disrupts, something runs over a ConnectX netdev, and
        ``allow`` is false (the message names the interface, the address and why).
    """
    from ansible.module_utils.gpudirect_netguard import describe

    at_risk = [describe(item) for item in assessment["at_risk"]]
    cuts = bool(plan_result["disruption"]) and bool(at_risk)
    if cuts and not allow:
        raise OfedPlanError(
            "the OFED change (%s) resets the ConnectX netdevs, and %s: nothing was changed. Move the connection or "
            "the mount off the ConnectX netdev (run from a management network, unmount), or set "
            "gpudirect_mlnx_ofed_allow_disruption_over_rdma_netdev: true to go ahead (the restart and the removal then run detached and the "
            "role waits for the connection to come back)" % ("; ".join(plan_result["disruption"]), "; ".join(at_risk)))
    return {"at_risk": at_risk, "checked": assessment["checked"], "overridden": cuts,
            "detach_restart": cuts and plan_result["restart_openibd"],
            "detach_removal": cuts and plan_result["removal"]}
