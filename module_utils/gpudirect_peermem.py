"""The GPUDirect RDMA peer-memory path: what the host has (probe) and what to do (decision).

Used by ``library/gpudirect_plan_peermem.py``; the unit tests import it directly.

``probe(host)``
    Read-only look at the host through a ``Host`` (files, commands, the dynamic
    loader): the nvidia module's version and flavour (on disk, else loaded), rdma-core,
    ``libibverbs.so.1`` and whether it exports ``ibv_reg_dmabuf_mr``, ``ofed_info -s``,
    the loaded peer-memory modules, the role's boot-time files and the nv_peer_mem service.
``choose(facts, requested, driver, rdma_core, ofed, libibverbs)``
    dma-buf, nvidia-peermem or nv_peer_mem, with the reasons.
``plan(facts, requested, found, paths)``
    ``choose`` plus what the role would change (``changes``) and what would interrupt
    running jobs (``disruption``: unloading a loaded peer-memory module), and what the
    tasks act on (``load``, ``unload``, ``boot``, ``remove_files``, ``build_nv_peer_mem``).

Every version is read by ``gpudirect_versions``; text it cannot read raises
``PeermemError`` naming the text and where it came from, never a guess.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import os

from ansible.module_utils import gpudirect_host
from ansible.module_utils.gpudirect_dpkg import dpkg_query_argv, installed_and_held
from ansible.module_utils.gpudirect_nvidia import describe, gpu_infos
from ansible.module_utils import gpudirect_versions as versions

__metaclass__ = type

MECHANISMS = ("auto", "dmabuf", "nvidia_peermem", "nv_peer_mem")
# modules whose presence in /sys/module the decision and the diagnosis read
WATCHED_MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "ib_core", "ib_peer_mem")
OPENIBD_UNITS = ("/etc/systemd/system/openibd.service", "/lib/systemd/system/openibd.service",
                 "/usr/lib/systemd/system/openibd.service")
NV_PEER_MEM_UNITS = ("/etc/systemd/system/nv_peer_mem.service", "/lib/systemd/system/nv_peer_mem.service",
                     "/usr/lib/systemd/system/nv_peer_mem.service", "/etc/init.d/nv_peer_mem")
LIBIBVERBS_GLOBS = ("/usr/lib/*-linux-gnu/libibverbs.so.1", "/usr/lib64/libibverbs.so.1", "/lib64/libibverbs.so.1",
                    "/usr/lib/libibverbs.so.1")
# the names used in plan sentences (the issue's and NVIDIA's spelling)
SPOKEN = {"nvidia_peermem": "nvidia-peermem", "nv_peer_mem": "nv_peer_mem"}


class PeermemError(ValueError):
    """Input or host output the decision cannot read; the message names it and what to do."""


class Host(gpudirect_host.Host):
    """The live host (module_utils/gpudirect_host.py), and the symbols its libraries export.
    Tests pass an object with the same methods answering for a captured one.

    :param run: ``run(argv) -> (rc, stdout, stderr)``, list-form, C locale (``gpudirect_host.module_runner``).
    """

    @staticmethod
    def exports(path, symbol):
        """Whether the shared library at ``path`` exports ``symbol``: the dynamic loader, else the raw bytes
        (a library of another architecture cannot be loaded)."""
        try:
            return hasattr(ctypes.CDLL(path), symbol)
        except OSError:
            try:
                with open(path, "rb") as handle:
                    return b"\0" + symbol.encode() + b"\0" in handle.read()
            except (IOError, OSError):
                return False


# --------------------------------------------------------------------------
# probe
# --------------------------------------------------------------------------

def _version(parser, text, where):
    try:
        return parser(text)
    except versions.VersionError as exc:
        raise PeermemError("%s: %s" % (where, exc))


def driver_of(host, kernel):
    """Version and flavour of the nvidia module on disk (modinfo), else of the loaded one.

    A driver from the .run installer or an image, or a kernel without /lib/modules, leaves
    modinfo nothing to find: ``/sys/module/nvidia/version`` and ``/proc/driver/nvidia/version``
    still tell.  ``{"version": "", ...}`` when there is no driver at all.
    """
    rc, version, _ = host.run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    if rc == 0 and version:
        _version(versions.parse_driver_version, version, "modinfo -F version nvidia (kernel %s)" % kernel)
        _, license_, _ = host.run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])
        return {"version": version, "flavor": "open" if "MIT" in license_ else "proprietary", "source": "modinfo"}
    proc = host.read("/proc/driver/nvidia/version")
    sys_version = host.read("/sys/module/nvidia/version").strip()
    found = _version(versions.parse_proc_driver_version, proc, "/proc/driver/nvidia/version") if proc.strip() else {}
    if sys_version:
        _version(versions.parse_driver_version, sys_version, "/sys/module/nvidia/version")
    version = sys_version or found.get("version", "")
    if not version:
        return {"version": "", "flavor": None, "source": None}
    return {"version": version, "flavor": found.get("flavor"), "source": "loaded module"}


def libibverbs_of(host):
    """``libibverbs.so.1`` as the dynamic loader finds it: real path, rdma-core version in its name,
    whether it exports ``ibv_reg_dmabuf_mr``.  Works where only the library is installed
    (libibverbs1 without the rdma-core package)."""
    paths = []
    _, out, _ = host.run(["ldconfig", "-p"])
    for line in out.splitlines():
        if line.strip().startswith("libibverbs.so.1 ") and "=>" in line:
            paths.append(line.split("=>", 1)[1].strip())
    for pattern in LIBIBVERBS_GLOBS:
        paths.extend(host.glob(pattern))
    path = next((p for p in paths if host.exists(p)), "")
    if not path:
        return {"path": "", "version": "", "dmabuf": False}
    real = host.realpath(path)
    try:
        version = versions.parse_libibverbs_file(os.path.basename(real))["version"]
    except versions.VersionError:
        version = ""  # a distribution may name it otherwise; the exported symbol still decides
    return {"path": real, "version": version, "dmabuf": host.exports(real, "ibv_reg_dmabuf_mr")}


def rdma_core_of(host):
    """The installed rdma-core package version, "" when not installed."""
    if host.which("dpkg-query"):
        rc, out, _ = host.run(dpkg_query_argv(["rdma-core"]))
        return installed_and_held(out)[0].get("rdma-core", "") if rc == 0 else ""
    if host.which("rpm"):
        rc, out, _ = host.run(["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"])
        return out if rc == 0 else ""
    return ""


def ofed_of(host):
    """``ofed_info -s`` ("" without ofed_info); a failing ofed_info is an error, not "no OFED"."""
    if not host.which("ofed_info"):
        return ""
    rc, out, err = host.run(["ofed_info", "-s"])
    if rc != 0:
        raise PeermemError("ofed_info -s failed (rc=%s): %s. The OFED installation is broken: reinstall it (the "
                           "gpudirect_mlnx_ofed stage), then run again" % (rc, err or out or "no output"))
    return out


def _unit_state(host, unit):
    if not host.which("systemctl"):
        return {"enabled": None, "active": None}
    _, enabled, _ = host.run(["systemctl", "is-enabled", unit])
    _, active, _ = host.run(["systemctl", "is-active", unit])
    return {"enabled": enabled == "enabled", "active": active == "active"}


def probe(host, paths):
    """Everything the decision and the tasks read from the host, as one dict (the plan's ``found``).

    :param paths: ``{"unit_name", "unit_path", "modules_load_path", "nv_conf_path"}`` of the role.
    """
    uname = host.uname()
    kernel, machine = uname[2], uname[4]
    rc_pm, _, _ = host.run(["modinfo", "-k", kernel, "-n", "nvidia_peermem"])
    _, depends, _ = host.run(["modinfo", "-k", kernel, "-F", "depends", "nvidia_peermem"])
    rc_nv, _, _ = host.run(["modinfo", "-k", kernel, "-n", "nv_peer_mem"])
    _, ib_core, _ = host.run(["modinfo", "-k", kernel, "-n", "ib_core"])
    nv_conf = host.read(paths["nv_conf_path"])
    nv_service = any(host.exists(u) for u in NV_PEER_MEM_UNITS)
    return {
        "kernel": kernel,
        "rdma_core": rdma_core_of(host),
        "ofed": ofed_of(host),
        "driver": driver_of(host, kernel),
        "libibverbs": libibverbs_of(host),
        "loaded": sorted(m for m in WATCHED_MODULES if host.isdir("/sys/module/" + m)),
        "loaded_version": host.read("/sys/module/nvidia/version").strip(),
        "nvidia_peermem_built": rc_pm == 0,
        "nvidia_peermem_depends": depends if rc_pm == 0 else "",
        "nv_peer_mem_built": rc_nv == 0,
        "nv_peer_mem_service": dict(_unit_state(host, "nv_peer_mem.service") if nv_service
                                    else {"enabled": False, "active": False}, exists=nv_service),
        "nv_peer_mem_onboot": any(line.strip() == "ONBOOT=yes" for line in nv_conf.splitlines()),
        "ib_core_path": ib_core,
        "openibd": any(host.exists(u) for u in OPENIBD_UNITS),
        "ofa_symvers": host.exists("/usr/src/ofa_kernel/%s/%s/Module.symvers" % (machine, kernel))
        or host.exists("/usr/src/ofa_kernel/default/Module.symvers"),
        "files": {key: host.exists(paths[key]) for key in ("unit_path", "modules_load_path")},
        "unit": _unit_state(host, paths["unit_name"]) if host.exists(paths["unit_path"])
        else {"enabled": False, "active": False},
    }


# --------------------------------------------------------------------------
# decision
# --------------------------------------------------------------------------

def _numbers(text):
    """The numbers of a version (driver, kernel) for ``>=`` checks; () for none."""
    return tuple(versions.numbers(text or ""))


def rdma_core_major(version):
    """Upstream rdma-core major version of a package version; None when "" (not installed)."""
    if not str(version or "").strip():
        return None
    return _version(versions.parse_rdma_core_version, str(version), "rdma-core package version")["major"]


def _dmabuf(facts, version, flavor, rdma_core, libibverbs):
    """``(ok, why, why_not)``: the conditions of dma-buf that hold and those that do not."""
    dver = _numbers(version)
    kernel = (facts.get("kernel") or {}).get("running")
    kver = _numbers(kernel)[:2]
    dmabuf_facts = facts.get("dmabuf") or {}
    infos = gpu_infos(facts.get("gpus"))
    rc_major = rdma_core_major(rdma_core)
    yes, no = [], []
    if infos:
        yes.append("%d GPU(s): %s" % (len(infos), ", ".join(map(describe, infos))))
        old = [i for i in infos if i["known"] and not i["open"]]
        if old:
            no.append("%s: not supported by the open kernel module (no dma-buf)" % ", ".join(map(describe, old)))
    else:
        no.append("no NVIDIA GPU in the facts: dma-buf cannot be proven")
    if flavor == "open":
        yes.append("open kernel module")
    else:
        no.append("kernel module flavour is %s, dma-buf needs the open one" % (flavor or "unknown (not loaded)"))
    if dver and dver[0] >= 515:
        yes.append("driver %s >= 515 (CUDA >= 11.7)" % version)
    else:
        no.append("driver %s < 515" % (version or "unknown"))
    if kver and kver >= (5, 12) and dmabuf_facts.get("kernel_ok", True) is not False:
        yes.append("kernel %s >= 5.12" % kernel)
    else:
        no.append("kernel %s < 5.12 or unknown" % (kernel or "unknown"))
    if dmabuf_facts.get("config_dma_shared_buffer") in ("n", False):
        no.append("kernel built without CONFIG_DMA_SHARED_BUFFER")
    lib = libibverbs or {}
    if lib.get("path"):
        lib_text = "%s (rdma-core %s)" % (lib["path"], rdma_core or lib.get("version") or "version unknown")
        if lib.get("dmabuf"):
            yes.append("%s exports ibv_reg_dmabuf_mr" % lib_text)
        else:
            no.append("%s does not export ibv_reg_dmabuf_mr (rdma-core >= 34 does)" % lib_text)
    elif rc_major is not None and rc_major >= 34:
        yes.append("rdma-core %s (upstream %d >= 34, ibv_reg_dmabuf_mr)" % (rdma_core, rc_major))
    else:
        no.append("rdma-core %s: ibv_reg_dmabuf_mr needs >= 34" % (rdma_core or "not installed"))
    return not no, yes, no


def choose(facts, requested="auto", driver=None, rdma_core=None, ofed=None, libibverbs=None):
    """Choose the GPUDirect RDMA peer-memory mechanism.

    dma-buf needs: a GPU (Turing or later), the open kernel module, driver >= 515
    (CUDA driver API >= 11.7), kernel >= 5.12 with CONFIG_DMA_SHARED_BUFFER, and
    rdma-core >= 34 (``ibv_reg_dmabuf_mr``).  Else nvidia-peermem (driver >= 470,
    needs OFED's peer-memory API), else nv_peer_mem (older drivers, OFED too).

    :param facts: ``ansible_facts.gpudirect``.
    :param requested: ``gpudirect_peermem_mechanism``.
    :param driver: ``{"version", "flavor"}`` of the installed driver; falls back to ``facts.nvidia_driver``.
    :param rdma_core: installed rdma-core package version ("" when not installed).
    :param ofed: ``ofed_info -s`` output, "" when no OFED stack is installed.
    :param libibverbs: ``{"path", "version", "dmabuf"}`` of ``libibverbs.so.1``; when a library was
        found, whether it exports the symbol decides, else the rdma-core package version does.
    :returns: ``{"mechanism", "ok", "reasons", "dmabuf": {"ok", "reasons"}}``; ``ok`` false means the
        mechanism cannot work and ``reasons`` say why.
    :raises PeermemError: on an unknown ``requested``, facts that are no dict, unreadable versions.
    """
    if requested not in MECHANISMS:
        raise PeermemError("gpudirect_peermem_mechanism must be one of %s, got %r"
                           % (", ".join(MECHANISMS), requested))
    if facts is None:
        facts = {}
    if not isinstance(facts, dict) or not isinstance(facts.get("gpus") or [], list):
        raise PeermemError("facts: expected ansible_facts.gpudirect (a dict with a list 'gpus'), got %r; run the "
                           "gpudirect_facts module (preflight stage) first" % (facts,))
    fdriver = facts.get("nvidia_driver") or {}
    driver = dict(driver or {})
    version = driver.get("version") or fdriver.get("version")
    flavor = driver.get("flavor") or fdriver.get("flavor")
    if version:
        _version(versions.parse_driver_version, version, "NVIDIA driver version")
    ofed_text = str(ofed or "").strip()
    ofed_found = _version(versions.parse_ofed_info_s, ofed_text, "ofed_info -s on the host") if ofed_text else None
    dver = _numbers(version)
    ok, yes, no = _dmabuf(facts, version, flavor, rdma_core, libibverbs)
    dmabuf = {"ok": ok, "reasons": yes if ok else no}

    def result(mech, good, reasons):
        return {"mechanism": mech, "ok": good, "reasons": reasons, "dmabuf": dmabuf}

    reasons = []
    if requested in ("auto", "dmabuf") and ok:
        reasons.append("dma-buf: " + "; ".join(yes))
        if (facts.get("peermem") or {}).get("nvidia_peermem"):
            reasons.append("nvidia_peermem is loaded but not needed with dma-buf (left as it is)")
        return result("dmabuf", True, reasons)
    if requested == "dmabuf":
        return result("dmabuf", False, ["dma-buf not possible: " + "; ".join(no)])
    if requested == "auto":
        reasons.append("no dma-buf: " + "; ".join(no))
    if requested == "nvidia_peermem" or (requested == "auto" and (not dver or dver[0] >= 470)):
        mech = "nvidia_peermem"
        if dver and dver[0] < 470:
            return result(mech, False, reasons + ["nvidia-peermem ships with driver R470 and later, installed %s"
                                                  % version])
        reasons.append("nvidia-peermem: driver %s" % (version or "not yet known (installed later)"))
    else:
        mech = "nv_peer_mem"
        reasons.append("nv_peer_mem: driver %s %s" % (version or "unknown",
                                                      "< R470" if dver and dver[0] < 470 else "(requested)"))
    if not ofed_found:
        return result(mech, False, reasons + [
            "no MLNX_OFED/DOCA-OFED (ofed_info missing): the upstream kernel has no peer-memory API; install OFED "
            "(gpudirect_mlnx_ofed_method doca or mlnx_ofed_tarball) or use dma-buf"])
    reasons.append("%s-%s provides the peer-memory API" % (ofed_found["flavor"], ofed_found["version"]))
    return result(mech, True, reasons)


def _boot_changes(found, paths, changes):
    """nvidia-peermem at boot: a unit after openibd when openibd exists, else modules-load.d."""
    files = found["files"]
    if found["openibd"]:
        if not files["unit_path"]:
            changes.append("write %s (load nvidia_peermem after openibd at boot)" % paths["unit_path"])
        if not found["unit"]["enabled"]:
            changes.append("enable %s" % paths["unit_name"])
        if files["modules_load_path"]:
            changes.append("remove %s (boot loading moves to %s)" % (paths["modules_load_path"], paths["unit_name"]))
        return "unit"
    if not files["modules_load_path"]:
        changes.append("write %s (load nvidia_peermem at boot)" % paths["modules_load_path"])
    if files["unit_path"]:
        changes.append("remove %s (no openibd: boot loading moves to %s)" % (paths["unit_path"],
                                                                            paths["modules_load_path"]))
    return "modules_load"


def plan(facts, requested, found, paths):
    """The role's plan: ``choose`` on what ``probe`` found, and what acting on it would change.

    :returns: ``choose``'s record plus ``path`` (= mechanism), ``changes``, ``disruption``,
        ``load`` (module to load, or None), ``unload`` (loaded modules to unload first),
        ``boot`` (``unit`` / ``modules_load`` / ``service`` / None), ``remove_files``,
        ``stop_nv_peer_mem_service``, ``build_nv_peer_mem``, ``provisional`` and ``found``.
    """
    decision = choose(facts, requested, found.get("driver"), found.get("rdma_core"), found.get("ofed"),
                      found.get("libibverbs"))
    mech = decision["mechanism"]
    loaded = set(found.get("loaded") or [])
    changes, disruption, unload, remove = [], [], [], []
    load = boot = None
    stop_service = build = False
    role_files = [(paths[k], found["files"][k]) for k in ("modules_load_path", "unit_path")]
    if not decision["ok"]:
        changes.append("peer memory cannot be enabled yet (%s): %s" % (mech, decision["reasons"][-1]))
    elif mech == "dmabuf":
        remove = [path for path, there in role_files if there]
        changes.extend("remove %s (dma-buf needs no nvidia_peermem at boot)" % path for path in remove)
    else:
        other = "nv_peer_mem" if mech == "nvidia_peermem" else "nvidia_peermem"
        if other in loaded:
            unload.append(other)
            disruption.append("%s unload -> %s load" % (SPOKEN[other], SPOKEN[mech]))
        if mech not in loaded:
            load = mech
            changes.append("load %s" % mech)
        if mech == "nvidia_peermem":
            service = found["nv_peer_mem_service"]
            stop_service = bool(service["exists"] and (service["enabled"] or service["active"]))
            if stop_service:
                changes.append("stop and disable nv_peer_mem.service (never both peer-memory clients)")
            boot = _boot_changes(found, paths, changes)
            keep = paths["unit_path"] if boot == "unit" else paths["modules_load_path"]
            remove = [path for path, there in role_files if there and path != keep]
        else:
            boot = "service"
            build = not found["nv_peer_mem_built"]
            if build:
                changes.append("build and install the nv_peer_mem packages from gpudirect_peermem_nv_peer_mem_src")
            remove = [path for path, there in role_files if there]
            changes.extend("remove %s (nvidia_peermem boot loading)" % path for path in remove)
            if not found["nv_peer_mem_onboot"]:
                changes.append("set ONBOOT=yes in %s" % paths["nv_conf_path"])
            if not found["nv_peer_mem_service"]["enabled"]:
                changes.append("enable nv_peer_mem.service")
    # changes and disruption name each module once, in the order the tasks act
    for module in unload:
        changes.insert(0, "unload %s" % module)
    provisional = not decision["ok"] or not (found.get("driver") or {}).get("version")
    return dict(decision, path=mech, changes=changes, disruption=disruption, load=load, unload=unload,
                boot=boot, remove_files=remove, stop_nv_peer_mem_service=stop_service, build_nv_peer_mem=build,
                provisional=provisional, found=found)
