"""The gpudirect_nvidia_driver role's plan: what the host has (``probe``) and what the role does (``decide``).

Used by ``library/gpudirect_plan_nvidia_driver.py`` (the role's read-only plan module) and the unit
tests.  ``probe`` reads the host through a small interface (``host.read``, ``run``,
``glob``, ``isdir``, ``exists``, ``which``, ``release``) so the tests run it on captured
hosts; ``decide`` is a pure function of the probe and the role's variables.

Driver versions, package versions and ``/proc/driver/nvidia/version`` are read only by
``gpudirect_versions``; the GPU, branch and fabric-manager rules are ``gpudirect_nvidia``'s.
"""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.gpudirect_dpkg import dpkg_query_argv, installed_and_held
from ansible.module_utils.gpudirect_nvidia import (NvidiaDecisionError, check_branch, choose_flavor,
                                                   fabricmanager_package)
from ansible.module_utils.gpudirect_nvlink_plan import (LPF_VPD_MARK, NVLSM_PACKAGES, check_imex_nodes,
                                                        check_module_options, fabric_plan, imex_package,
                                                        module_options_line, parse_modprobe_options,
                                                        parse_proc_params, params_differ)
from ansible.module_utils.gpudirect_versions import (VersionError, parse_driver_version, parse_package_version,
                                                     parse_proc_driver_version)

__metaclass__ = type

STAMP = "/var/lib/gpudirect/nvidia-dkms.stamp"
PROC_VERSION = "/proc/driver/nvidia/version"
# DKMS package of each flavour (CUDA repository, Debian family); on EL the driver is nvidia-driver
DKMS_PACKAGES = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}
# metapackages the role installs per flavour (Debian family)
APT_PACKAGES = {"open": ["nvidia-open"], "proprietary": ["cuda-drivers", "nvidia-kernel-dkms"]}
# packages the probe reports on (the fabric manager's per-branch name is added)
QUERY_PACKAGES = ["nvidia-open", "cuda-drivers", "nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "nvidia-driver-cuda",
                  "nvidia-persistenced", "nvidia-smi", "nvidia-fabricmanager", "nvidia-fabric-manager",
                  "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms", "nvidia-driver",
                  "python3-dnf-plugin-versionlock", "nvidia-imex"] + NVLSM_PACKAGES
PROC_PARAMS = "/proc/driver/nvidia/params"
IMEX_NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
IMEX_CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
# modules unloaded, in this order, to load another driver version
UNLOAD_ORDER = ["nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]
_WATCHED_MODULES = ("nvidia", "nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nouveau")
_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


class PlanError(ValueError):
    """What the host reports or the role asks cannot be planned; the message names the value and the knob."""


# --------------------------------------------------------------------------
# Probe: read-only, through ``host``
# --------------------------------------------------------------------------

def query_packages(host, names):
    """Installed versions of ``names`` ({name: version}) and the held ones (dpkg only)."""
    if host.which("dpkg-query"):
        return installed_and_held(host.run(dpkg_query_argv(names))[1])
    found = {}
    if host.which("rpm"):
        for name in names:
            rc, out = host.run(["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\n", name])
            if rc == 0 and out:
                found[name] = out.splitlines()[0]
    return found, []


def _owner(host, path):
    """The package that owns a file, or "" (a runfile, an image, a DKMS build)."""
    if not path.startswith("/"):
        return ""
    if host.which("dpkg-query"):
        rc, out = host.run(["dpkg-query", "-S", path])
        return out.split(":")[0].split(",")[0].strip() if rc == 0 and out else ""
    if host.which("rpm"):
        rc, out = host.run(["rpm", "-qf", "--qf", "%{NAME}\n", path])
        return out.splitlines()[0] if rc == 0 and out else ""
    return ""


def _other_driver_packages(host):
    """NVIDIA kernel-module packages outside the role's list (the distribution's own, e.g. Ubuntu's)."""
    if host.which("dpkg-query"):
        return installed_and_held(host.run(dpkg_query_argv(
            ["nvidia-dkms-*", "linux-modules-nvidia-*", "nvidia-kernel-source-*"]))[1])[0]
    found = {}
    if host.which("rpm"):
        out = host.run(["rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\n", "kmod-nvidia*", "akmod-nvidia*"])[1]
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                found[parts[0]] = parts[1]
    return found


def _driver_version(text, where):
    """A driver version read on the host, checked by ``parse_driver_version``; "" for none."""
    text = str(text or "").strip()
    if not text:
        return ""
    try:
        return parse_driver_version(text)["version"]
    except VersionError as error:
        raise PlanError("%s: %s; the role cannot tell which NVIDIA driver is installed: check the driver on this "
                        "host (a damaged or unusual build) before running the gpudirect_nvidia_driver role" % (where, error))


def probe_module(host, kernel):
    """The nvidia module as the kernel runs it and as it lies on disk, whoever installed it.

    A driver from NVIDIA's .run installer or baked into an image has no package: only the
    loaded module (``/sys/module/nvidia/version``, ``/proc/driver/nvidia/version``) tells
    its version and flavour.  Without /lib/modules modinfo finds nothing and the loaded
    module is all there is.

    :raises PlanError: on a ``/proc/driver/nvidia/version`` or a module version that is not
        what the driver prints (the text is quoted).
    """
    proc_text = host.read(PROC_VERSION)
    proc = {}
    if proc_text.strip():
        try:
            proc = parse_proc_driver_version(proc_text)
        except VersionError as error:
            raise PlanError("%s; the role cannot tell the loaded driver's version and flavour: check the loaded "
                            "nvidia module (cat %s) before running the gpudirect_nvidia_driver role" % (error, PROC_VERSION))
    # /proc's version is read by its parser (which knows Jetson's 35.3.1 too); /sys alone must be a driver version
    sys_text = host.read("/sys/module/nvidia/version").strip()
    loaded = sys_text if sys_text and sys_text == proc.get("version") else \
        _driver_version(sys_text, "/sys/module/nvidia/version") or proc.get("version") or ""
    rc, path = host.run(["modinfo", "-k", kernel, "-n", "nvidia"])
    path = path if rc == 0 else ""
    disk = license_ = ""
    if path:
        disk = _driver_version(host.run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])[1],
                               "modinfo -F version nvidia (%s)" % path)
        license_ = host.run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])[1]
    # the flavour: from /proc while the loaded module is the one on disk, else from the licence
    if proc and (not disk or disk == loaded):
        flavor = proc["flavor"]
    elif license_:
        flavor = "open" if "MIT" in license_ else "proprietary"
    else:
        flavor = ""
    return {"loaded_version": loaded, "disk_version": disk, "path": path, "owner": _owner(host, path),
            "version": disk or loaded, "flavor": flavor}


def _nouveau_kernels(host, kernel):
    """Kernels (running first, then those under /lib/modules) that have a nouveau module."""
    out = []
    for k in [kernel] + sorted(p.rsplit("/", 1)[-1] for p in host.glob("/lib/modules/*")):
        if k in out:
            continue
        if host.run(["modinfo", "-k", k, "-n", "nouveau"])[0] == 0 \
                or host.glob("/lib/modules/%s/kernel/drivers/gpu/drm/nouveau/nouveau.ko*" % k):
            out.append(k)
    return out


def _switch_functions(host):
    """One pass over the PCI functions: ``(bridges, lpfs)``.

    ``bridges``: NVIDIA functions of class 0x0680: NVSwitches, but also a GH200's GPU (decided from
    the ids). ``lpfs``: the NVSwitch management functions of an NVLink-5 baseboard, Mellanox
    functions whose VPD carries ``SMDL=SW_MNG`` (module_utils/gpudirect_nvlink_plan.py); VPD is
    read only on Mellanox functions, and an unreadable VPD reads as empty (the GPUs' model then
    decides)."""
    bridges, lpfs = [], []
    for dev in host.glob("/sys/bus/pci/devices/*"):
        vendor = host.read(dev + "/vendor")
        if vendor == "0x10de" and host.read(dev + "/class").startswith("0x0680"):
            bridges.append({"address": dev.rsplit("/", 1)[-1], "device_id": host.read(dev + "/device")})
        elif vendor == "0x15b3" and host.exists(dev + "/vpd") and LPF_VPD_MARK in host.read(dev + "/vpd"):
            lpfs.append({"address": dev.rsplit("/", 1)[-1], "device_id": host.read(dev + "/device")})
    return bridges, lpfs


def _initramfs_without_blacklist(host, conf):
    """Kernels whose initramfs carries nouveau.ko but not the blacklist file ``conf``.

    Only those need rebuilding: an image without nouveau cannot load it, and one that holds
    the blacklist honours it.  Stateless, so a run that failed before the rebuild is completed
    by the next one.
    """
    if not conf:
        return []
    if host.which("lsinitramfs"):
        images, lister, prefix, suffix = host.glob("/boot/initrd.img-*"), ["lsinitramfs"], "/boot/initrd.img-", ""
    elif host.which("lsinitrd"):
        images, lister, prefix, suffix = host.glob("/boot/initramfs-*.img"), ["lsinitrd"], "/boot/initramfs-", ".img"
    else:
        return []
    stale = []
    for image in sorted(images):
        kernel = image[len(prefix):len(image) - len(suffix) if suffix else None]
        if kernel.endswith("kdump") or not host.isdir("/lib/modules/" + kernel):
            continue
        rc, out = host.run(lister + [image])
        files = out.splitlines() if rc == 0 else []
        if any("/nouveau.ko" in f for f in files) and not any(f.endswith(conf.lstrip("/")) for f in files):
            stale.append(kernel)
    return stale


def probe(host, branch, blacklist_conf="", stamp=STAMP, options_conf=""):
    """Everything the decision needs from the host, read-only.

    :returns: ``{"kernel", "packages", "held", "ofed", "module", "other_packages", "loaded",
        "peermem_built", "peermem_depends", "stamp", "nvswitches", "initramfs_nouveau_unblocked",
        "nouveau_kernels", "nouveau_conf_present", "persistenced": {"unit", "systemd", "running"}}``.
    """
    kernel = host.release()
    names = QUERY_PACKAGES + ["nvidia-fabricmanager-%s" % branch, "nvidia-imex-%s" % branch]
    found, held = query_packages(host, names)
    ofed = host.run(["ofed_info", "-s"])[1].strip() if host.which("ofed_info") else ""
    depends = host.run(["modinfo", "-k", kernel, "-F", "depends", "nvidia_peermem"])
    bridges, lpfs = _switch_functions(host)
    # the running processes' names, read once (comm is cut at 15 characters)
    comms = set(host.read(p) for p in host.glob("/proc/[0-9]*/comm"))
    return {
        "kernel": kernel,
        "packages": found,
        "held": held,
        "ofed": ofed,
        "module": probe_module(host, kernel),
        "other_packages": _other_driver_packages(host),
        "loaded": sorted(m for m in _WATCHED_MODULES if host.isdir("/sys/module/" + m)),
        "peermem_built": host.run(["modinfo", "-k", kernel, "-n", "nvidia_peermem"])[0] == 0,
        "peermem_depends": depends[1].strip() if depends[0] == 0 else "",
        "stamp": host.read(stamp).strip(),
        "nvswitches": bridges,
        "nvswitch_lpfs": lpfs,
        "module_options_file": parse_modprobe_options(host.read(options_conf)) if options_conf else {},
        "module_options_file_present": bool(options_conf) and host.exists(options_conf),
        "loaded_params": parse_proc_params(host.read(PROC_PARAMS)),
        "imex": {"nodes_config": host.read(IMEX_NODES_CONFIG), "channel0": host.exists(IMEX_CHANNEL0),
                 "running": "nvidia-imex" in comms},
        "initramfs_nouveau_unblocked": _initramfs_without_blacklist(host, blacklist_conf),
        "nouveau_kernels": _nouveau_kernels(host, kernel),
        "nouveau_conf_present": bool(blacklist_conf) and host.exists(blacklist_conf),
        "persistenced": {"unit": any(host.exists(d + "/nvidia-persistenced.service") for d in _UNIT_DIRS),
                         "systemd": host.isdir("/run/systemd/system"),
                         "running": "nvidia-persistenced"[:15] in comms},
    }


# --------------------------------------------------------------------------
# Decision: pure
# --------------------------------------------------------------------------

def _package_driver(text, where):
    """``"1:580.95.05-1ubuntu1"`` -> ``"580.95.05"``: the driver version in a package version; "" for none."""
    if not str(text or "").strip():
        return ""
    try:
        upstream = parse_package_version(str(text))["upstream"]
    except VersionError as error:
        raise PlanError("%s: %s" % (where, error))
    return _driver_version(upstream, where)


def _branch_of(version):
    """The branch of a driver version; "" when it has none (a Jetson driver such as 35.3.1)."""
    try:
        return parse_driver_version(version)["branch"]
    except VersionError:
        return ""


def _same_driver(installed, wanted):
    """``gpudirect_nvidia_driver_version`` is an exact pin (``<version>-*``): every number equal (580.95.05 == 580.95.5)."""
    try:
        return parse_driver_version(installed)["parts"] == parse_driver_version(wanted)["parts"]
    except VersionError:
        return False


def _differences(version, flavor, branch, wanted_version, wanted_flavor):
    """What differs between an installed driver and the wanted one (empty list: it matches)."""
    diffs = []
    found_branch = _branch_of(version)
    if found_branch != branch:
        diffs.append("branch %s installed, %s wanted" % (found_branch or "unknown (%s)" % version, branch))
    elif wanted_version and not _same_driver(version, wanted_version):
        diffs.append("version %s installed, %s wanted" % (version, wanted_version))
    if flavor != wanted_flavor:
        diffs.append("flavour %s installed, %s wanted" % (flavor or "unknown", wanted_flavor))
    return diffs


def driver_action(found, branch, version="", flavor="open"):
    """What the role does with the driver it finds.

    A driver from the CUDA repository (its DKMS package, or ``nvidia-driver`` on EL) is the
    role's to keep, upgrade or replace.  One without those packages but with an nvidia module
    loaded or on disk came from elsewhere (NVIDIA's .run installer, an image, another
    package): the role keeps it when it is what is wanted and refuses to touch it otherwise,
    since installing packages over it would break both.

    :param found: ``probe()``'s result (``packages``, ``module``, ``other_packages``).
    :returns: ``{"action", "managed", "source", "installed_version", "installed_flavor",
        "any_installed_version", "message"}``; ``action``: ``install`` (nothing installed),
        ``change`` (installed packages differ), ``none`` (packages match), ``keep`` (a matching
        foreign driver: no repository, packages, headers, DKMS, holds or reload), ``refuse``
        (a foreign driver that differs).  ``managed``: packages carry the driver.
    """
    packages = found.get("packages") or {}
    other = "proprietary" if flavor == "open" else "open"
    wanted = "%s (%s)" % (version or "branch " + branch, flavor)
    mine = _package_driver(packages.get(DKMS_PACKAGES[flavor]) or packages.get("nvidia-driver"),
                           "installed NVIDIA driver package version")
    any_version = _package_driver(packages.get(DKMS_PACKAGES[flavor]) or packages.get(DKMS_PACKAGES[other])
                                  or packages.get("nvidia-driver"), "installed NVIDIA driver package version")
    if any_version:
        installed_flavor = (flavor if DKMS_PACKAGES[flavor] in packages
                            else other if DKMS_PACKAGES[other] in packages else "")
        base = {"managed": True, "source": "package", "installed_version": mine,
                "installed_flavor": installed_flavor, "any_installed_version": any_version}
        if not mine or _branch_of(mine) != branch or (version and not _same_driver(mine, version)):
            return dict(base, action="change", message="installed driver %s (%s) differs from wanted %s: replacing it"
                        % (any_version, installed_flavor, wanted))
        return dict(base, action="none", message="installed driver %s (%s) matches: no change" % (mine, flavor))

    module = found.get("module") or {}
    version_found = str(module.get("version") or "")
    if not version_found:
        return {"action": "install", "managed": True, "source": "none", "installed_version": "",
                "installed_flavor": "", "any_installed_version": "",
                "message": "no NVIDIA driver installed: installing branch %s %s %s"
                % (branch, version or "(newest)", flavor)}

    found_flavor = module.get("flavor") or ""
    owners = sorted(set(filter(None, [module.get("owner")] + sorted(found.get("other_packages") or {}))))
    base = {"managed": False, "installed_version": version_found, "installed_flavor": found_flavor,
            "any_installed_version": version_found}
    if owners:
        source, how = "other package", "installed by %s, not from the CUDA repository" % ", ".join(owners)
        remove = "remove it (apt-get purge / dnf remove %s)" % " ".join(owners)
    else:
        source, how = "foreign", "installed outside the package manager (runfile or image)"
        remove = "remove it (nvidia-uninstall; on an image, rebuild the image without it)"
    where = "driver %s (%s) is %s" % (version_found, found_flavor or "flavour unknown", how)
    loaded = str(module.get("loaded_version") or "")
    if loaded and loaded != version_found:
        where += " (%s is loaded until a reboot)" % loaded
    diffs = _differences(version_found, found_flavor, branch, version, flavor)
    if not diffs:
        return dict(base, action="keep", source=source, message=where + ": kept, not managed by packages")
    found_branch = _branch_of(version_found)
    match = []
    if found_branch and found_branch != branch:
        match.append("gpudirect_nvidia_driver_branch: '%s'" % found_branch)
    if version and version != version_found:
        match.append("gpudirect_nvidia_driver_version: '%s' (or '')" % version_found)
    if found_flavor and found_flavor != flavor:
        match.append("gpudirect_nvidia_driver_flavor: %s" % found_flavor)
    keep = ("set %s to keep it" % ", ".join(match) if found_flavor
            else "load it (modprobe nvidia) so /proc/driver/nvidia/version tells its flavour, and run again")
    return dict(base, action="refuse", source=source,
                message="%s; wanted: %s (%s). The role does not replace a driver it did not install: "
                        "%s and run again to install %s from the CUDA repository, or %s"
                        % (where, wanted, "; ".join(diffs), remove, wanted, keep))


def _rebuild(found, managed, action, options):
    """Rebuild the nvidia DKMS module against OFED?  ``(bool, reason)``.

    Only for a packaged driver that this run does not install or replace anyway, with OFED
    present and nvidia-peermem built: when the gpudirect_mlnx_ofed stage changed OFED in this run, when
    nvidia-peermem lacks OFED's peer-memory symbols, or when the recorded build names another OFED.
    """
    ofed, stamp = found.get("ofed") or "", found.get("stamp") or ""
    if not (options.get("rebuild_on_ofed_change", True) and managed and action == "none" and ofed
            and found.get("peermem_built")):
        return False, ""
    if options.get("ofed_changed"):
        return True, "the gpudirect_mlnx_ofed stage changed OFED in this run"
    if not found.get("peermem_depends"):
        return True, "nvidia-peermem was built without OFED peer-memory symbols"
    if stamp and not stamp.endswith("ofed=" + ofed):
        return True, "it was built against %s" % stamp[stamp.find("ofed="):] if "ofed=" in stamp else stamp
    return False, ""


def decide(found, options):
    """The whole plan of the gpudirect_nvidia_driver role from the probe and the role's variables.

    :param found: ``probe()``'s result.
    :param options: ``branch``, ``branch_unlisted_ok``, ``version``, ``flavor``, ``flavor_fallback``,
        ``gpu_support`` (``gpudirect_nvidia_driver_gpu_support``), ``fabricmanager``, ``os_family``, ``gpus`` (``ansible_facts.gpudirect.gpus``), ``hold``,
        ``blacklist_nouveau``, ``persistenced``, ``rebuild_on_ofed_change``, ``ofed_changed``.
    :returns: the plan (see the module's RETURN); ``changes`` and ``disruption`` are sentences.
    :raises PlanError: on a request that cannot be served, naming the value and the knob.
    """
    try:
        support = options.get("gpu_support") or {}
        branch_check = check_branch(options.get("branch"), options.get("gpus"), options.get("branch_unlisted_ok"),
                                    support)
        flavor = choose_flavor(options.get("gpus"), options.get("flavor") or "auto",
                               options.get("flavor_fallback") or "open", support)
        branch = branch_check["branch"]
        version = str(options.get("version") or "").strip()
        if version:
            try:
                parsed = parse_driver_version(version)
            except VersionError as error:
                raise PlanError("gpudirect_nvidia_driver_version: %s" % error)
            if parsed["branch"] != branch:
                raise PlanError("gpudirect_nvidia_driver_version %s is not a version of gpudirect_nvidia_driver_branch %s: set one of "
                                "them to match (or gpudirect_nvidia_driver_version: '' for the newest of the branch)"
                                % (version, branch))
        fabric = fabric_plan(found.get("nvswitches"), found.get("nvswitch_lpfs"), options.get("gpus"),
                             options.get("fabricmanager", "auto"), options.get("nvlsm", "auto"),
                             options.get("imex", "auto"))
        fm = fabric["fabricmanager"]
        os_family = options.get("os_family") or ""
        fm_package = fabricmanager_package(branch, os_family) if fm["wanted"] else None
        imex_pkg = imex_package(branch, os_family) if fabric["imex"]["wanted"] else None
        imex_nodes = check_imex_nodes(options.get("imex_nodes"), options.get("own_addresses") or ())
        wanted_options = check_module_options(options.get("module_options"))
    except NvidiaDecisionError as error:
        raise PlanError(str(error))
    if imex_pkg and "NVreg_CreateImexChannel0" not in wanted_options:
        # CUDA processes import memory through IMEX channel 0; the driver creates its device
        # node at load time with this parameter (NVIDIA IMEX guide, "IMEX channels")
        wanted_options["NVreg_CreateImexChannel0"] = "1"
    driver = driver_action(found, branch, version, flavor["flavor"])
    action, managed = driver["action"], driver["managed"]
    module = found.get("module") or {}
    loaded = list(found.get("loaded") or [])
    packages = found.get("packages") or {}
    rebuild, rebuild_reason = _rebuild(found, managed, action, options)
    nouveau = bool(options.get("blacklist_nouveau", True)) and bool(found.get("nouveau_kernels"))
    wanted_text = version or "branch %s (newest)" % branch
    dkms = DKMS_PACKAGES[flavor["flavor"]]
    install = list(APT_PACKAGES[flavor["flavor"]]) if os_family == "Debian" else \
        ["@nvidia-driver:%s-%s" % (branch, "open" if flavor["flavor"] == "open" else "dkms")]
    persistenced_managed = managed or bool((found.get("persistenced") or {}).get("unit")
                                           and (found.get("persistenced") or {}).get("systemd"))

    changes, disruption = [], []
    if action == "install":
        changes.append("install the NVIDIA driver %s (%s) from the CUDA repository: %s"
                       % (wanted_text, flavor["flavor"], ", ".join(install)))
    elif action == "change":
        changes.append("replace driver %s (%s) with %s (%s)" % (driver["any_installed_version"],
                                                                driver["installed_flavor"] or "flavour unknown",
                                                                wanted_text, flavor["flavor"]))
    elif action == "refuse":
        changes.append("none: " + driver["message"])
    if rebuild:
        changes.append("rebuild the nvidia DKMS module %s for kernel %s against OFED %s: %s"
                       % (driver["installed_version"], found.get("kernel"), found.get("ofed"), rebuild_reason))
    if managed and options.get("hold", True) and os_family == "Debian" and action == "none":
        unheld = sorted(set(APT_PACKAGES[flavor["flavor"]] + [dkms]) & set(packages) - set(found.get("held") or []))
        if unheld:
            changes.append("hold %s" % ", ".join(unheld))
    if nouveau and not found.get("nouveau_conf_present"):
        changes.append("blacklist nouveau (kernels with a nouveau module: %s)" % ", ".join(found["nouveau_kernels"]))
    if nouveau and found.get("initramfs_nouveau_unblocked"):
        changes.append("rebuild the initramfs of %s (it carries nouveau.ko without the blacklist)"
                       % ", ".join(found["initramfs_nouveau_unblocked"]))
    if fm["wanted"] and managed and fm_package["name"] not in packages:
        changes.append("install and start the fabric manager %s at the driver version" % fm_package["name"])
    nvlsm_missing = [p for p in NVLSM_PACKAGES if p not in packages] if fabric["nvlsm"]["wanted"] else []
    if nvlsm_missing:
        changes.append("install NVLSM (%s) for the fabric manager and load ib_umad" % ", ".join(nvlsm_missing))
    imex_installed = bool(imex_pkg) and imex_pkg["name"] in packages
    imex_config = "".join(n + "\n" for n in imex_nodes)
    if imex_pkg and managed and not imex_installed:
        changes.append("install %s at the driver version" % imex_pkg["name"])
    imex_found = found.get("imex") or {}
    imex_rewrite = bool(imex_pkg) and bool(imex_nodes) and \
        imex_found.get("nodes_config", "").strip() != imex_config.strip()
    if imex_rewrite:
        changes.append("write the IMEX domain (%d nodes) to %s and %s nvidia-imex"
                       % (len(imex_nodes), IMEX_NODES_CONFIG, "restart" if imex_found.get("running") else "start"))
    options_file = found.get("module_options_file") or {}
    options_write = options_file != wanted_options or (bool(wanted_options) !=
                                                       bool(found.get("module_options_file_present")))
    options_stale = params_differ(wanted_options, found.get("loaded_params") or {}) if "nvidia" in loaded else []
    if options_write:
        changes.append("write the nvidia module options: %s" % (module_options_line(wanted_options)
                                                                 or "none (the file is removed)"))
    # without a GPU the module refuses to load (the role reports it, not a change)
    if "nvidia" not in loaded and "nouveau" not in loaded and action != "refuse" and options.get("gpus"):
        changes.append("load the nvidia module")
    if managed and action in ("none", "keep") and not rebuild and not found.get("stamp"):
        changes.append("record the DKMS build in %s" % STAMP)

    if "nvidia" in loaded and action in ("install", "change"):
        before = module.get("loaded_version") or "a driver of unknown version"
        disruption.append("nvidia modules reload: %s -> %s" % (before, wanted_text) if action == "change"
                          or module.get("loaded_version") else
                          "nvidia modules reload: fresh install of %s while nvidia modules are loaded" % wanted_text)
    elif "nvidia" in loaded and rebuild:
        disruption.append("nvidia modules reload: DKMS rebuild of %s against OFED %s"
                          % (driver["installed_version"], found.get("ofed")))
    # a reload for the driver itself loads the new options too
    driver_reload = "nvidia" in loaded and (action in ("install", "change") or bool(rebuild))
    options_reload = bool(options_stale) and not driver_reload
    if options_reload:
        disruption.append("nvidia modules reload: module options %s" % "; ".join(options_stale))
    if imex_rewrite and imex_found.get("running"):
        disruption.append("nvidia-imex restart: the IMEX domain changes (GPU memory shared across nodes is released)")
    if nouveau and "nouveau" in loaded:
        disruption.append("reboot: nouveau is loaded and gets blacklisted")
    else:
        # not a reboot, but what the next boot loads (issue #29, outcome 3): a power event
        # must not boot a node into a boot configuration no batch proved, so it changes only
        # in the node's drained batch, which reboots and verifies it
        boot_config = (["blacklist nouveau"] if nouveau and not found.get("nouveau_conf_present") else []) + \
            (["rebuild the initramfs of %s" % ", ".join(found["initramfs_nouveau_unblocked"])]
             if nouveau and found.get("initramfs_nouveau_unblocked") else [])
        if boot_config:
            disruption.append("boot configuration: %s (what the next boot loads)" % "; ".join(boot_config))

    return {
        "changed": False,
        "changes": changes,
        "disruption": disruption,
        "action": action,
        "managed": managed,
        "source": driver.get("source"),
        "message": driver["message"],
        "installed_version": driver["installed_version"],
        "installed_flavor": driver["installed_flavor"],
        "loaded_version": module.get("loaded_version") or "",
        "loaded": loaded,
        "branch": branch,
        "branch_reasons": branch_check["reasons"],
        "version": version,
        "flavor": flavor["flavor"],
        "flavor_reasons": flavor["reasons"],
        "dkms_package": dkms,
        "install_packages": install,
        "held": list(found.get("held") or []),
        "rebuild": rebuild,
        "rebuild_reason": rebuild_reason,
        "reload": driver_reload or options_reload,
        "unload_order": list(UNLOAD_ORDER),
        "kernel": found.get("kernel") or "",
        "ofed": found.get("ofed") or "",
        "stamp": found.get("stamp") or "",
        "nouveau": {"blacklist": nouveau, "kernels": list(found.get("nouveau_kernels") or []),
                    "initramfs": list(found.get("initramfs_nouveau_unblocked") or []), "loaded": "nouveau" in loaded},
        "persistenced": dict(found.get("persistenced") or {}, managed=persistenced_managed,
                             installed="nvidia-persistenced" in packages),
        "fabricmanager": dict(fm, package=fm_package["name"] if fm_package else "",
                              installed=bool(fm_package) and fm_package["name"] in packages),
        "nvlink_generation": fabric["generation"],
        "nvlsm": dict(fabric["nvlsm"], packages=list(NVLSM_PACKAGES) if fabric["nvlsm"]["wanted"] else [],
                      missing=nvlsm_missing),
        "imex": dict(fabric["imex"], package=imex_pkg["name"] if imex_pkg else "", installed=imex_installed,
                     nodes=imex_nodes, nodes_config=imex_config,
                     service="domain" if imex_nodes else "scheduler", rewrite=imex_rewrite,
                     running=bool(imex_found.get("running")),
                     channel0=bool((found.get("imex") or {}).get("channel0"))),
        "module_options": {"wanted": wanted_options, "file": options_file, "write": options_write,
                           "line": module_options_line(wanted_options), "stale": options_stale,
                           "reload": options_reload},
        "versionlock_plugin": "python3-dnf-plugin-versionlock" in packages,
    }
