"""Pure decision functions of the nvidia_driver stage (mlnx_ofed and gpudirect_peermem
decide in their plan modules: library/mlnx_ofed_plan.py, library/gpudirect_peermem_plan.py).

Every filter here is a pure function of its arguments: the roles pass in
``ansible_facts.gpudirect`` (published once by the preflight stage), their own
variables and what a read-only probe found on the host, and get back a record
with the decision and the reasons for it, which the role prints.  No filter
reads the host, so each decision is unit tested on real captured facts.

Filters
-------
``nvidia_gpu_info``
    What NVIDIA's supported-GPU data says about one PCI device id (open modules
    supported or required, first and last branch).
``nvidia_driver_flavor``
    Choose the kernel module flavour (``open`` / ``proprietary``) for the GPUs
    of a host, or refuse an impossible request with a message naming the knob.
``nvidia_driver_branch_check``
    Check a driver branch against the GPUs (before the first branch that lists
    them, after their last branch, not a known branch).
``nvidia_fabricmanager_package`` / ``nvidia_fabricmanager_plan``
    Fabric manager package per branch and distribution; whether the host has NVSwitches.
``nvidia_driver_version_parse``
    ``"580.95.05"`` -> ``{"branch": "580", "version": "580.95.05", "parts": [580, 95, 5]}``.
``nvidia_driver_plan``
    Compare the installed driver (packages, or a module installed outside the
    package manager) with the wanted one: ``none`` / ``install`` / ``change`` /
    ``keep`` (a matching foreign driver) / ``refuse`` (a foreign one that differs).
"""

from __future__ import annotations

import importlib.util
import os
import sys

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests always have ansible-core
    AnsibleFilterError = ValueError

# --------------------------------------------------------------------------
# NVIDIA GPUs: flavour and branch (decided in module_utils/gpudirect_nvidia.py from
# NVIDIA's supported-gpus.json; these filters only wrap it)
# --------------------------------------------------------------------------


def _load_module_util(name):
    """Import module_utils/<name>.py by path: Ansible loads filter files by path, not as a
    package. Kept in sys.modules, so every filter file shares one copy of each."""
    key = "_gpudirect_module_utils_" + name
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            key, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[key] = module
    return sys.modules[key]


_NV = _load_module_util("gpudirect_nvidia")
KNOWN_BRANCHES = _NV.KNOWN_BRANCHES


def _wrap(func, *args):
    try:
        return func(*args)
    except _NV.NvidiaDecisionError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def nvidia_gpu_info(device_id):
    """What NVIDIA's data says about one PCI device id (``known``, ``open``, ``min_branch``, ...)."""
    return _NV.gpu_info(device_id)


def nvidia_driver_flavor(gpus, requested="auto", fallback="open"):
    """Choose the kernel module flavour; see ``gpudirect_nvidia.choose_flavor``."""
    return _wrap(_NV.choose_flavor, gpus, requested, fallback)


def nvidia_driver_branch_check(branch, gpus=None, unlisted_ok=False):
    """Check a driver branch against the GPUs; see ``gpudirect_nvidia.check_branch``."""
    return _wrap(_NV.check_branch, branch, gpus, unlisted_ok)


def nvidia_fabricmanager_package(branch, os_family, version=""):
    """Fabric manager package name and install spec; see ``gpudirect_nvidia.fabricmanager_package``."""
    return _wrap(_NV.fabricmanager_package, branch, os_family, version)


def nvidia_fabricmanager_plan(bridges, wanted="auto"):
    """Install and start the fabric manager or not, and why; see ``gpudirect_nvidia.fabricmanager_plan``."""
    return _wrap(_NV.fabricmanager_plan, bridges, wanted)


_versions = _load_module_util("gpudirect_versions")


def _parse(parser, value, knob):
    """Run one gpudirect_versions parser; its error becomes an AnsibleFilterError naming ``knob``."""
    try:
        return parser(value)
    except _versions.VersionError as error:
        raise AnsibleFilterError("%s: %s" % (knob, error)) from None


def nvidia_driver_version_parse(version):
    """Parse a driver version (``gpudirect_versions.parse_driver_version``).

    :param version: ``"580.95.05"``, ``"550.54"``; None or "" for none.
    :returns: ``{"version", "branch", "parts"}`` or None for no version.
    :raises AnsibleFilterError: on text that is no driver version of two or three parts.
    """
    if version in (None, ""):
        return None
    return _parse(_versions.parse_driver_version, str(version).strip(), "nvidia_driver_version_parse")


# DKMS package of each flavour (Debian family); on EL the version comes from nvidia-driver
DKMS_PACKAGES = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}


def _package_version(text):
    """``"1:580.95.05-1ubuntu1"`` -> ``"580.95.05"``: the upstream part of a package version; "" for none."""
    if not str(text or "").strip():
        return ""
    return _parse(_versions.parse_package_version, str(text), "installed NVIDIA driver package version")["upstream"]


def _driver_matches(installed, wanted):
    """Is the installed driver the wanted one?  ``nvidia_driver_version`` is an exact version
    (the role pins ``<version>-*``), so every number must be equal (``580.95.05`` == ``580.95.5``)."""
    return _versions.numbers(installed) == _versions.numbers(wanted)


def _matches(version, flavor, branch, wanted_version, wanted_flavor):
    """What differs between an installed driver and the wanted one (empty list: it matches)."""
    diffs = []
    if str(version).split(".")[0] != branch:
        diffs.append("branch %s installed, %s wanted" % (str(version).split(".")[0] or "unknown", branch))
    elif wanted_version and not _driver_matches(version, wanted_version):
        diffs.append("version %s installed, %s wanted" % (version, wanted_version))
    if flavor != wanted_flavor:
        diffs.append("flavour %s installed, %s wanted" % (flavor or "unknown", wanted_flavor))
    return diffs


def nvidia_driver_plan(probe, branch, version="", flavor="open", dkms_packages=None):
    """Decide what the nvidia_driver role does with the driver it finds.

    A driver installed from the CUDA repository (its DKMS package, or ``nvidia-driver``
    on EL) is the role's to keep, upgrade or replace.  A driver without any of those
    packages but with an nvidia module loaded or on disk was installed outside the
    role (NVIDIA's .run installer, a machine image, another package): the role keeps
    it when it is what is wanted and refuses to touch it otherwise, since installing
    packages over it would break both.

    :param probe: the nvidia_driver probe's JSON: ``packages`` (name -> version of the
        installed driver packages), ``module`` (``version``, ``flavor``, ``loaded_version``,
        ``path``, ``owner``: the package owning the module file) and ``other_packages``
        (NVIDIA kernel-module packages outside the role's list, e.g. Ubuntu's).
    :param branch: ``nvidia_driver_branch``.
    :param version: ``nvidia_driver_version`` ("" for any of the branch).
    :param flavor: the chosen flavour (``nvidia_driver_flavor`` filter's ``flavor``).
    :param dkms_packages: flavour -> DKMS package name (default ``DKMS_PACKAGES``).
    :returns: ``{"action", "managed", "source", "installed_version", "installed_flavor",
        "any_installed_version", "message"}``.  ``action``: ``install`` (nothing installed),
        ``change`` (installed packages differ), ``none`` (packages match), ``keep`` (foreign
        driver matches: no repository, packages, headers, DKMS, holds or reload), ``refuse``
        (foreign driver differs: the role fails before any change with ``message``).
        ``managed`` is true when packages carry the driver (install, change, none).
        ``source``: ``package``, ``foreign``, ``other package`` or ``none``.
    """
    probe = probe or {}
    packages = probe.get("packages") or {}
    dkms = dict(DKMS_PACKAGES, **(dkms_packages or {}))
    branch = str(branch or "").strip()
    version = str(version or "").strip()
    other = "proprietary" if flavor == "open" else "open"
    wanted = "%s (%s)" % (version or "branch " + branch, flavor)

    mine = _package_version(packages.get(dkms.get(flavor)) or packages.get("nvidia-driver") or "")
    any_version = _package_version(packages.get(dkms.get(flavor)) or packages.get(dkms.get(other))
                                   or packages.get("nvidia-driver") or "")
    if any_version:
        installed_flavor = flavor if dkms.get(flavor) in packages else other if dkms.get(other) in packages else ""
        base = {"managed": True, "source": "package", "installed_version": mine,
                "installed_flavor": installed_flavor, "any_installed_version": any_version}
        if not mine or mine.split(".")[0] != branch or (version and mine != version):
            return dict(base, action="change",
                        message="installed driver %s (%s) differs from wanted %s: replacing it"
                        % (any_version, installed_flavor, wanted))
        return dict(base, action="none",
                    message="installed driver %s (%s) matches: no change" % (mine, flavor))

    module = probe.get("module") or {}
    found = str(module.get("version") or probe.get("loaded_version") or probe.get("module_version") or "").strip()
    if not found:
        return {"action": "install", "managed": True, "source": "none", "installed_version": "",
                "installed_flavor": "", "any_installed_version": "",
                "message": "no NVIDIA driver installed: installing branch %s %s %s"
                % (branch, version or "(newest)", flavor)}

    found_flavor = module.get("flavor") or ""
    owners = sorted(set(filter(None, [module.get("owner")] + sorted(probe.get("other_packages") or {}))))
    base = {"managed": False, "installed_version": found, "installed_flavor": found_flavor,
            "any_installed_version": found}
    if owners:
        source, how = "other package", "installed by %s, not from the CUDA repository" % ", ".join(owners)
        remove = "remove it (apt-get purge / dnf remove %s)" % " ".join(owners)
    else:
        source, how = "foreign", "installed outside the package manager (runfile or image)"
        remove = "remove it (nvidia-uninstall; on an image, rebuild the image without it)"
    where = "driver %s (%s) is %s" % (found, found_flavor or "flavour unknown", how)
    loaded = str(module.get("loaded_version") or "")
    if loaded and loaded != found:
        where += " (%s is loaded until a reboot)" % loaded
    diffs = _matches(found, found_flavor, branch, version, flavor)
    if not diffs:
        return dict(base, action="keep", source=source, message=where + ": kept, not managed by packages")
    match = []
    if found.split(".")[0] != branch:
        match.append("nvidia_driver_branch: '%s'" % found.split(".")[0])
    if version and version != found:
        match.append("nvidia_driver_version: '%s' (or '')" % found)
    if found_flavor and found_flavor != flavor:
        match.append("nvidia_driver_flavor: %s" % found_flavor)
    keep = ("set %s to keep it" % ", ".join(match) if found_flavor
            else "load it (modprobe nvidia) so /proc/driver/nvidia/version tells its flavour, and run again")
    return dict(base, action="refuse", source=source,
                message="%s; wanted: %s (%s). The role does not replace a driver it did not install: "
                        "%s and run again to install %s from the CUDA repository, or %s"
                        % (where, wanted, "; ".join(diffs), remove, wanted, keep))




class FilterModule:
    """Register the decision filters with Ansible."""

    def filters(self):
        """Return the filter name -> function mapping."""
        return {
            "nvidia_gpu_info": nvidia_gpu_info,
            "nvidia_driver_flavor": nvidia_driver_flavor,
            "nvidia_driver_branch_check": nvidia_driver_branch_check,
            "nvidia_fabricmanager_package": nvidia_fabricmanager_package,
            "nvidia_fabricmanager_plan": nvidia_fabricmanager_plan,
            "nvidia_driver_version_parse": nvidia_driver_version_parse,
            "nvidia_driver_plan": nvidia_driver_plan,
        }
