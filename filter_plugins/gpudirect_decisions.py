"""Pure decision functions of the driver stages (nvidia_driver, gpudirect_peermem).

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
``rdma_core_major``
    Upstream rdma-core major version from a package version (``"50.0-2"``,
    ``"2410mlnx54-1.2410068"`` -> 50, 54).
``gpudirect_peermem_choice``
    Choose the peer-memory mechanism (``dmabuf`` / ``nvidia_peermem`` /
    ``nv_peer_mem``) with reasons.

The OFED decision lives in module_utils/gpudirect_ofed.py (module mlnx_ofed_plan).
"""

from __future__ import annotations

import importlib.util
import os
import re
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


def rdma_core_major(version):
    """Upstream rdma-core major version from a package version.

    :param version: Debian/RPM version, e.g. ``"50.0-2ubuntu0.2"``, ``"1:50.0-1"``, or the
        MLNX/DOCA form ``"2410mlnx54-1.2410068"`` (based on upstream 54).
    :returns: int, or None when empty (not installed).
    :raises AnsibleFilterError: on text that is no package version.
    """
    if not str(version or "").strip():
        return None
    upstream = _parse(_versions.parse_package_version, str(version), "rdma-core package version")["upstream"]
    match = re.match(r"\d+mlnx(\d+)", upstream) or re.match(r"(\d+)", upstream)
    return int(match.group(1))


def _version_tuple(text):
    """The numbers of a version (driver, kernel) for ``>=`` checks; () for none."""
    return tuple(_versions.numbers(text or ""))


def gpudirect_peermem_choice(facts, requested="auto", driver=None, rdma_core=None, ofed=None, libibverbs=None):
    """Choose the GPUDirect RDMA peer-memory mechanism.

    dma-buf needs: a GPU (Turing or later), the open kernel module, driver >= 515
    (CUDA driver API >= 11.7), kernel >= 5.12 with CONFIG_DMA_SHARED_BUFFER, and
    rdma-core >= 34 (``ibv_reg_dmabuf_mr``).  Else nvidia-peermem (driver >= 470,
    needs OFED's peer-memory API), else nv_peer_mem (older drivers, OFED too).

    :param facts: ``ansible_facts.gpudirect``.
    :param requested: ``gpudirect_peermem_mechanism``: auto, dmabuf, nvidia_peermem, nv_peer_mem.
    :param driver: ``{"version": "580.95.05", "flavor": "open"}`` of the installed
        driver; falls back to ``facts.nvidia_driver``.
    :param rdma_core: installed rdma-core package version (any form ``rdma_core_major`` reads).
    :param ofed: ``ofed_info -s`` output, or a version, or "" when no OFED stack is installed.
    :param libibverbs: what the probe found of ``libibverbs.so.1``: ``{"path", "version"
        (rdma-core version from the file name, "50.0" of libibverbs.so.1.14.50.0),
        "dmabuf" (it exports ibv_reg_dmabuf_mr)}``.  When a library was found, whether it
        exports the symbol decides (no rdma-core package is needed: an image may carry
        only libibverbs1); otherwise the rdma-core package version does.
    :returns: ``{"mechanism", "reasons": [...], "dmabuf": {"ok": bool, "reasons": [...]}, "ok": bool}``;
        ``ok`` false means the mechanism cannot work and ``reasons`` say why.
    """
    if requested not in ("auto", "dmabuf", "nvidia_peermem", "nv_peer_mem"):
        raise AnsibleFilterError("gpudirect_peermem_mechanism must be auto, dmabuf, nvidia_peermem or nv_peer_mem, "
                                 "got %r" % (requested,))
    facts = facts or {}
    fdriver = facts.get("nvidia_driver") or {}
    driver = dict(driver or {})
    version = driver.get("version") or fdriver.get("version")
    flavor = driver.get("flavor") or fdriver.get("flavor")
    dver = _version_tuple(version)
    kernel = (facts.get("kernel") or {}).get("running")
    kver = _version_tuple(kernel)[:2]
    dmabuf_facts = facts.get("dmabuf") or {}
    infos = _NV.gpu_infos(facts.get("gpus"))
    rc_major = rdma_core_major(rdma_core)
    has_ofed = bool(str(ofed or "").strip())

    ok, no = [], []
    if infos:
        ok.append("%d GPU(s): %s" % (len(infos), ", ".join(map(_NV.describe, infos))))
        old = [i for i in infos if i["known"] and not i["open"]]
        if old:
            no.append("%s: not supported by the open kernel module (no dma-buf)" % ", ".join(map(_NV.describe, old)))
    else:
        no.append("no NVIDIA GPU in the facts: dma-buf cannot be proven")
    if flavor == "open":
        ok.append("open kernel module")
    else:
        no.append("kernel module flavour is %s, dma-buf needs the open one" % (flavor or "unknown (not loaded)"))
    if dver and dver[0] >= 515:
        ok.append("driver %s >= 515 (CUDA >= 11.7)" % version)
    else:
        no.append("driver %s < 515" % (version or "unknown"))
    if kver and kver >= (5, 12) and dmabuf_facts.get("kernel_ok", True) is not False:
        ok.append("kernel %s >= 5.12" % kernel)
    else:
        no.append("kernel %s < 5.12 or unknown" % (kernel or "unknown"))
    if dmabuf_facts.get("config_dma_shared_buffer") in ("n", False):
        no.append("kernel built without CONFIG_DMA_SHARED_BUFFER")
    lib = libibverbs or {}
    if lib.get("path"):
        lib_text = "%s (rdma-core %s)" % (lib["path"], rdma_core or lib.get("version") or "version unknown")
        if lib.get("dmabuf"):
            ok.append("%s exports ibv_reg_dmabuf_mr" % lib_text)
        else:
            no.append("%s does not export ibv_reg_dmabuf_mr (rdma-core >= 34 does)" % lib_text)
    elif rc_major is not None and rc_major >= 34:
        ok.append("rdma-core %s (upstream %d >= 34, ibv_reg_dmabuf_mr)" % (rdma_core, rc_major))
    else:
        no.append("rdma-core %s: ibv_reg_dmabuf_mr needs >= 34" % (rdma_core or "not installed"))
    dmabuf = {"ok": not no, "reasons": ok if not no else no}

    reasons = []
    if requested in ("auto", "dmabuf") and dmabuf["ok"]:
        reasons.append("dma-buf: " + "; ".join(ok))
        if (facts.get("peermem") or {}).get("nvidia_peermem"):
            reasons.append("nvidia_peermem is loaded but not needed with dma-buf (left as it is)")
        return {"mechanism": "dmabuf", "ok": True, "reasons": reasons, "dmabuf": dmabuf}
    if requested == "dmabuf":
        return {"mechanism": "dmabuf", "ok": False, "reasons": ["dma-buf not possible: " + "; ".join(no)],
                "dmabuf": dmabuf}
    if requested == "auto":
        reasons.append("no dma-buf: " + "; ".join(no))
    ofed_reason = ("OFED %s provides the peer-memory API" % str(ofed).strip().rstrip(":")) if has_ofed else None
    if requested == "nvidia_peermem" or (requested == "auto" and (not dver or dver[0] >= 470)):
        mech = "nvidia_peermem"
        if dver and dver[0] < 470:
            return {"mechanism": mech, "ok": False, "dmabuf": dmabuf,
                    "reasons": reasons + ["nvidia-peermem ships with driver R470 and later, installed %s" % version]}
        reasons.append("nvidia-peermem: driver %s" % (version or "not yet known (installed later)"))
    else:
        mech = "nv_peer_mem"
        reasons.append("nv_peer_mem: driver %s %s" % (version or "unknown",
                                                      "< R470" if dver and dver[0] < 470 else "(requested)"))
    if not has_ofed:
        return {"mechanism": mech, "ok": False, "dmabuf": dmabuf,
                "reasons": reasons + ["no MLNX_OFED/DOCA-OFED (ofed_info missing): the upstream kernel has no "
                                      "peer-memory API; install OFED (mlnx_ofed_method doca or "
                                      "mlnx_ofed_tarball) or use dma-buf"]}
    reasons.append(ofed_reason)
    return {"mechanism": mech, "ok": True, "reasons": reasons, "dmabuf": dmabuf}


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
            "rdma_core_major": rdma_core_major,
            "gpudirect_peermem_choice": gpudirect_peermem_choice,
        }
