"""Pure decision functions of the driver stages (mlnx_ofed, gpudirect_peermem).

The nvidia_driver decisions live in module_utils/gpudirect_nvidia_plan.py (its plan module).

Every filter here is a pure function of its arguments: the roles pass in
``ansible_facts.gpudirect`` (published once by the preflight stage), their own
variables and what a read-only probe found on the host, and get back a record
with the decision and the reasons for it, which the role prints.  No filter
reads the host, so each decision is unit tested on real captured facts.

Filters
-------
``rdma_core_major``
    Upstream rdma-core major version from a package version (``"50.0-2"``,
    ``"2410mlnx54-1.2410068"`` -> 50, 54).
``gpudirect_peermem_choice``
    Choose the peer-memory mechanism (``dmabuf`` / ``nvidia_peermem`` /
    ``nv_peer_mem``) with reasons.
``mlnx_ofed_installer_message``
    Turn an exit status of ``mlnxofedinstall`` into what the admin should do.
``mlnx_ofed_action``
    Compare the installed OFED stack with the wanted one: ``none`` /
    ``install`` / ``upgrade`` / ``downgrade`` / ``replace`` / ``remove``.
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
# Shared code from module_utils (GPU data in gpudirect_nvidia.py, version parsers)
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
_versions = _load_module_util("gpudirect_versions")


def _parse(parser, value, knob):
    """Run one gpudirect_versions parser; its error becomes an AnsibleFilterError naming ``knob``."""
    try:
        return parser(value)
    except _versions.VersionError as error:
        raise AnsibleFilterError("%s: %s" % (knob, error)) from None


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


# --------------------------------------------------------------------------
# MLNX_OFED / DOCA-OFED
# --------------------------------------------------------------------------

# mlnxofedinstall exit statuses (MLNX_OFED user manual, "mlnxofedinstall Return Codes").
INSTALLER_CODES = {
    0: "installation ended successfully",
    1: "the installation failed: read the log named in the output (/tmp/MLNX_OFED_LINUX.*.logs/)",
    2: "no firmware was found for the adapter device: set mlnx_ofed_fw_update: false (the default) or get the "
       "firmware for this PSID from NVIDIA",
    22: "invalid parameter: check mlnx_ofed_installer_extra_args",
    28: "not enough free space: free space in /tmp and / (the installer unpacks and builds there)",
    171: "not applicable to this system configuration (required hardware not present): check that a "
         "ConnectX/BlueField device is installed, or use mlnx_ofed_method: inbox",
    172: "prerequisites are not met: the installer lists the missing packages in its output; install them "
         "(kernel headers for the running kernel, build tools) or add --skip-distro-check only for an "
         "unsupported OS minor release, then run again",
    173: "failed to start the mst driver: check that the kernel headers match the running kernel and that the "
         "mst service is not in use",
    174: "packages from another RDMA stack conflict with MLNX_OFED (foreign or inbox rdma packages): remove "
         "them (the installer output names them) or run with --force, then run again",
}


def mlnx_ofed_installer_message(rc):
    """What an exit status of mlnxofedinstall means and what to do.

    :param rc: the exit status (int or numeric string).
    :returns: one line of text.
    """
    try:
        code = int(rc)
    except (TypeError, ValueError):
        return "mlnxofedinstall exit status %r is not a number" % (rc,)
    return "mlnxofedinstall exited %d: %s" % (
        code, INSTALLER_CODES.get(code, "unknown exit status; read the installer output and its log directory"))


def mlnx_ofed_action(installed, method, wanted_version=""):
    """What to do with the OFED stack.

    The installed version matches the wanted one by ``gpudirect_versions.compare_wanted``:
    the installed numbers cut to the wanted ones' length, so DOCA-OFED's build suffix
    (``OFED-internal-24.10-1.1.4.0.200:`` for ``24.10-1.1.4``) matches, while
    ``24.10-1.1.40`` does not.  The role's post-install check calls this filter on
    ``ofed_info -s`` again and requires ``none``: one rule for both.

    :param installed: ``ofed_info -s`` output ("" when ofed_info is missing).
    :param method: ``mlnx_ofed_method``: doca, mlnx_ofed_tarball, inbox.
    :param wanted_version: the OFED version wanted (``24.10-1.1.4``); "" for inbox.
    :returns: ``{"action", "installed_flavor", "installed_version", "wanted_version", "message"}``;
        ``action`` is ``none``, ``install``, ``upgrade``, ``downgrade``, ``replace`` (other stack
        flavour) or ``remove`` (inbox wanted, OFED present).
    :raises AnsibleFilterError: when ``installed`` is not ``ofed_info -s`` output, or
        ``wanted_version`` is no OFED version (naming ``mlnx_ofed_version``).
    """
    flavor = version = None
    parts = []
    if str(installed or "").strip():
        found = _parse(_versions.parse_ofed_info_s, str(installed), "ofed_info -s on the host")
        flavor, version, parts = found["flavor"], found["version"], found["parts"]
    wanted = str(wanted_version or "").strip()
    base = {"installed_flavor": flavor, "installed_version": version, "wanted_version": wanted or None}
    if method == "inbox":
        if version:
            return dict(base, action="remove",
                        message="%s %s installed; inbox rdma-core wanted: OFED is removed" % (flavor, version))
        return dict(base, action="none", message="no OFED stack installed; inbox rdma-core wanted")
    if not wanted:
        raise AnsibleFilterError("mlnx_ofed_version: the OFED version to expect from ofed_info -s is unknown for "
                                 "this release; set it (e.g. 24.10-1.1.4)")
    wanted_parts = _parse(_versions.parse_ofed_info_n, wanted, "mlnx_ofed_version")["parts"]
    if not version:
        return dict(base, action="install", message="no OFED stack installed; installing %s" % wanted)
    want_flavor = "OFED-internal" if method == "doca" else "MLNX_OFED_LINUX"
    if flavor != want_flavor and flavor in ("OFED-internal", "MLNX_OFED_LINUX"):
        return dict(base, action="replace",
                    message="%s %s installed, %s %s wanted (%s): the old stack is removed first"
                    % (flavor, version, want_flavor, wanted, method))
    cmp = _versions.compare_wanted(parts, wanted_parts)
    if cmp == 0:
        return dict(base, action="none", message="%s %s installed, matches %s" % (flavor, version, wanted))
    action = "upgrade" if cmp < 0 else "downgrade"
    return dict(base, action=action, message="%s %s installed, %s wanted: %s" % (flavor, version, wanted, action))


class FilterModule:
    """Register the decision filters with Ansible."""

    def filters(self):
        """Return the filter name -> function mapping."""
        return {
            "rdma_core_major": rdma_core_major,
            "gpudirect_peermem_choice": gpudirect_peermem_choice,
            "mlnx_ofed_installer_message": mlnx_ofed_installer_message,
            "mlnx_ofed_action": mlnx_ofed_action,
        }
