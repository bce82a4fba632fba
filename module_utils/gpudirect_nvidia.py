"""NVIDIA driver decisions from NVIDIA's own per-device data.

Pure functions, used by the nvidia_driver plan (``module_utils/gpudirect_nvidia_plan.py``,
module ``library/nvidia_driver_plan.py``) and the unit tests.

GPU data, in this order:

1. ``gpudirect_nvidia_gpus.GPUS``: derived by ``scripts/nvidia-supported-gpus-table.py``
   from the ``supported-gpus.json`` shipped with the NVIDIA driver (see that file's
   header for the driver version): per device id the name, whether the open kernel
   modules support it (``kernelopen``), the last branch supporting it (``legacybranch``)
   and the first branch whose list names it.
2. ``LATER_GPUS`` below: data-centre ids that list does not carry (newer than it, or
   absent from it), each with its source.

An id in neither fails: the toolkit does not guess a flavour or a branch.
"""

from __future__ import annotations

import re

from ansible.module_utils.gpudirect_nvidia_gpus import DRIVER as TABLE_DRIVER, GPUS as TABLE_GPUS


class NvidiaDecisionError(ValueError):
    """A request the GPUs or the data cannot serve; the message names the knob."""


# Driver branches the toolkit knows (production, new-feature and LTS branches of the
# CUDA repository). A branch not listed needs nvidia_driver_branch_unlisted_ok.
KNOWN_BRANCHES = ("470", "525", "535", "545", "550", "555", "560", "565", "570", "575", "580")

# R580 is the last driver branch supporting Maxwell, Pascal and Volta
# (CUDA 12.8 release notes, "Deprecated architectures", and the R580 data-centre driver
# release notes, https://docs.nvidia.com/datacenter/tesla/tesla-release-notes-580-65-06/).
# Applied to ids the vendor list supports only with the proprietary modules and with no
# legacy branch of their own (in the 525 list: Maxwell, Pascal, Volta, a few Turing
# mining boards).
PROPRIETARY_ONLY_LAST_BRANCH = 580

# Open kernel modules required on Grace Hopper and Blackwell: NVIDIA, "NVIDIA transitions
# fully towards open-source GPU kernel modules" (2024-07-17,
# https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/).
# First branches (GH200 535, Blackwell 570) as stated in issue #15 / the project's task; not
# re-checked here against a release note.
_GH_SOURCE = ("GH200 superchip ids from Linux drivers/vfio/pci/nvgrace-gpu/main.c (0x2342 GH200 120GB, "
              "0x2345 GH200 480GB, 0x2348 GH200 SKU); open modules only; branch 535 or later")
_BW_SOURCE = ("Blackwell (0x2941 GB200 in Linux drivers/vfio/pci/nvgrace-gpu/main.c); open modules only; "
              "branch 570 or later")

# Ids missing from the vendor list in module_utils/gpudirect_nvidia_gpus.py:
# id -> (name, open supported, open required, first branch, last branch, source)
LATER_GPUS = {
    # Volta: absent from the 525 list; the open modules need Turing or later
    # (NVIDIA open-gpu-kernel-modules README, "supported GPUs: Turing and later").
    "0x1df5": ("Tesla V100 SXM2 16GB", False, False, "", "580",
               "pci.ids 2023.04.10: 1df5 GV100GL [Tesla V100 SXM2 16GB]"),
    "0x1dbd": ("Tesla V100 (GV100GL)", False, False, "", "580",
               "issue #15 (V100 id reported on a V100 system); GV100 chip: Volta"),
    # Turing / Ampere / Ada data-centre boards absent from the 525 list
    "0x1eb8": ("Tesla T4", True, False, "", "", "pci.ids 2023.04.10: 1eb8 TU104GL [Tesla T4]; Turing"),
    "0x2236": ("A10", True, False, "", "", "pci.ids 2023.04.10: 2236 GA102GL [A10]; Ampere"),
    "0x27b8": ("L4", True, False, "525", "", "pci.ids 2023.04.10: 27b8 AD104GL [L4]; Ada"),
    "0x26b9": ("L40S", True, False, "525", "", "lspci on L40S systems: AD102GL [L40S] [10de:26b9]; Ada"),
    # Hopper: 525 is the first branch whose list names an H100 (0x2330, 0x2331)
    "0x2321": ("H100 NVL", True, False, "525", "", "pci.ids 2023.04.10: 2321 GH100; Hopper"),
    "0x2322": ("H800 PCIe", True, False, "525", "", "pci.ids 2023.04.10: 2322 GH100 [H800 PCIe]; Hopper"),
    "0x2324": ("H800", True, False, "525", "", "pci.ids 2023.04.10: 2324 GH100 [H800]; Hopper"),
    "0x2339": ("H100", True, False, "525", "", "pci.ids 2023.04.10: 2339 GH100 [H100]; Hopper"),
    "0x2335": ("H200", True, False, "525", "",
               "captured on the lent H200 node (tests/fixtures/gpu_node/h200: 0x2335 'NVIDIA H200', open 580.159.04)"),
    # Grace Hopper
    "0x2342": ("GH200 120GB", True, True, "535", "", _GH_SOURCE),
    "0x2345": ("GH200 480GB", True, True, "535", "", _GH_SOURCE),
    "0x2348": ("GH200", True, True, "535", "", _GH_SOURCE),
    # Blackwell
    "0x2901": ("B200", True, True, "570", "", _BW_SOURCE),
    "0x2941": ("GB200", True, True, "570", "", _BW_SOURCE),
}

# NVSwitch devices (vendor 0x10de, PCI class 0x0680 "bridge"): these need the fabric
# manager. Sources: lspci -nn of HGX A100 and HGX H100 systems
# ("Bridge [0680]: NVIDIA Corporation GA100 [A100 NVSwitch] [10de:1af1]",
#  "Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3]"), pci.ids 2023.04.10.
# GH200 superchips also present class 0x0680 functions (lspci: "Bridge [0680]: ... GH100 [10de:2342]"):
# those are GPUs, not switches.
NVSWITCH_IDS = {"0x1af1": "A100 NVSwitch (3rd generation NVLink, HGX A100)",
                "0x22a3": "H100 NVSwitch (4th generation NVLink, HGX H100/H200)"}

_HEX_ID = re.compile(r"^(?:0x)?([0-9a-fA-F]{4})$")


def norm_id(device_id):
    """``"2335"`` / ``"0x2335"`` / ``0x2335`` -> ``"0x2335"``; None when not an id."""
    if isinstance(device_id, int) and not isinstance(device_id, bool):
        return "0x%04x" % device_id if 0 <= device_id <= 0xFFFF else None
    match = _HEX_ID.match(str(device_id or "").strip())
    return "0x" + match.group(1).lower() if match else None


def _major(branch):
    return int(str(branch).split(".", 1)[0]) if branch else None


def gpu_info(device_id, name=None, address=None):
    """What the data says about one NVIDIA PCI device id.

    :returns: ``{"device_id", "name", "address", "known", "open", "open_required",
        "min_branch", "max_branch", "source"}``; ``known`` False (and the rest None)
        for an id in neither table.
    """
    norm = norm_id(device_id)
    info = {"device_id": norm or str(device_id), "name": name, "address": address, "known": False,
            "open": None, "open_required": None, "min_branch": None, "max_branch": None, "source": "unknown"}
    if norm in TABLE_GPUS:
        vname, kopen, legacy, first = TABLE_GPUS[norm]
        last = _major(legacy) or (None if kopen else PROPRIETARY_ONLY_LAST_BRANCH)
        info.update(name=vname or name, known=True, open=kopen, open_required=False,
                    min_branch=_major(first), max_branch=last,
                    source="supported-gpus.json of driver %s" % TABLE_DRIVER)
        if norm in LATER_GPUS:  # a later fact (open required) refines the vendor row
            info["open_required"] = LATER_GPUS[norm][2]
    elif norm in LATER_GPUS:
        vname, kopen, required, first, last, source = LATER_GPUS[norm]
        info.update(name=vname or name, known=True, open=kopen, open_required=required,
                    min_branch=_major(first), max_branch=_major(last), source=source)
    return info


def describe(info, where=False):
    """``0x2330 (NVIDIA H100 80GB HBM3)``; with ``where`` `` at 0000:00:06.0`` when the address is known."""
    text = "%s (%s)" % (info["device_id"], info["name"] or "unknown id")
    return text + (" at %s" % info["address"] if where and info.get("address") else "")


def gpu_infos(gpus):
    """``gpu_info`` of each GPU of ``ansible_facts.gpudirect.gpus`` (dicts) or of each id."""
    out = []
    for gpu in gpus or []:
        if isinstance(gpu, dict):
            out.append(gpu_info(gpu.get("device_id"), gpu.get("name"), gpu.get("address")))
        else:
            out.append(gpu_info(gpu))
    return out


def _join(infos, where=False):
    return ", ".join(sorted({describe(info, where) for info in infos}))


def choose_flavor(gpus, requested="auto", fallback="open"):
    """Choose the kernel module flavour (``open`` / ``proprietary``).

    ``auto``: open when every GPU is marked open-capable, proprietary when any is not;
    an id in neither table fails (naming the id, its address and ``nvidia_driver_flavor``).
    ``open`` / ``proprietary``: checked against every known GPU; unknown ids are
    accepted as the admin's choice and reported.

    :param fallback: ``nvidia_driver_flavor_fallback``, used only when there is no GPU.
    :returns: ``{"flavor", "reasons", "gpus"}``.
    :raises NvidiaDecisionError: naming the knob.
    """
    if requested not in ("auto", "open", "proprietary"):
        raise NvidiaDecisionError("nvidia_driver_flavor must be auto, open or proprietary, got %r" % (requested,))
    if fallback not in ("open", "proprietary"):
        raise NvidiaDecisionError("nvidia_driver_flavor_fallback must be open or proprietary, got %r" % (fallback,))
    infos = gpu_infos(gpus)
    known = [i for i in infos if i["known"]]
    unknown = [i for i in infos if not i["known"]]
    need_open = [i for i in known if i["open_required"]]
    no_open = [i for i in known if not i["open"]]
    if need_open and no_open:
        raise NvidiaDecisionError(
            "no driver flavour serves these GPUs together: %s need the open kernel modules, %s are not supported by "
            "them (nvidia_driver_flavor cannot fix this; split the GPUs across hosts)"
            % (_join(need_open, True), _join(no_open, True)))
    if requested == "proprietary" and need_open:
        raise NvidiaDecisionError(
            "nvidia_driver_flavor: proprietary is not supported on %s: Grace Hopper and Blackwell GPUs need the "
            "open kernel modules; set nvidia_driver_flavor: open (or auto)" % _join(need_open, True))
    if requested == "open" and no_open:
        raise NvidiaDecisionError(
            "nvidia_driver_flavor: open does not support %s (NVIDIA's supported-GPU list does not mark them "
            "kernelopen); set nvidia_driver_flavor: proprietary (or auto)" % _join(no_open, True))
    if requested == "auto" and unknown:
        raise NvidiaDecisionError(
            "nvidia_driver_flavor: auto cannot choose for %s: the id is in neither NVIDIA's supported-GPU list "
            "(driver %s, module_utils/gpudirect_nvidia_gpus.py) nor the toolkit's later ids; check NVIDIA's "
            "supported-GPU list of the driver you install and set nvidia_driver_flavor: open or proprietary for "
            "this host (or regenerate the table with scripts/nvidia-supported-gpus-table.py)"
            % (_join(unknown, True), TABLE_DRIVER))
    reasons = []
    if requested != "auto":
        flavor = requested
        reasons.append("nvidia_driver_flavor is %s" % requested)
    elif need_open:
        flavor = "open"
        reasons.append("%s require the open kernel modules" % _join(need_open))
    elif no_open:
        flavor = "proprietary"
        reasons.append("%s: only the proprietary modules support them (not marked kernelopen)" % _join(no_open))
    elif known:
        flavor = "open"
        reasons.append("%s: supported by the open kernel modules, which NVIDIA recommends" % _join(known))
    else:
        flavor = fallback
        reasons.append("no NVIDIA GPU in ansible_facts.gpudirect.gpus: nvidia_driver_flavor_fallback %s" % fallback)
    if unknown:
        reasons.append("not in NVIDIA's supported-GPU data (flavour is the admin's choice): %s" % _join(unknown))
    return {"flavor": flavor, "reasons": reasons, "gpus": infos}


def check_branch(branch, gpus=None, unlisted_ok=False):
    """Check a driver branch against the toolkit's list and the GPUs' first and last branches.

    :returns: ``{"branch", "reasons"}``.
    :raises NvidiaDecisionError: naming ``nvidia_driver_branch``.
    """
    text = str(branch or "").strip()
    if not re.fullmatch(r"\d{3}", text):
        raise NvidiaDecisionError("nvidia_driver_branch must be a three-digit driver branch such as '580', got %r"
                                  % (branch,))
    if text not in KNOWN_BRANCHES and not unlisted_ok:
        raise NvidiaDecisionError(
            "nvidia_driver_branch %s is not a branch the toolkit knows (%s); check the CUDA repository and set "
            "nvidia_driver_branch_unlisted_ok: true to use it anyway" % (text, ", ".join(KNOWN_BRANCHES)))
    number = int(text)
    problems, unchecked = [], []
    for info in gpu_infos(gpus):
        if not info["known"]:
            unchecked.append(info)
            continue
        if info["min_branch"] and number < info["min_branch"]:
            problems.append("%s needs branch %d or later" % (describe(info, True), info["min_branch"]))
        if info["max_branch"] and number > info["max_branch"]:
            problems.append("%s is supported up to branch %d" % (describe(info, True), info["max_branch"]))
    if problems:
        raise NvidiaDecisionError("nvidia_driver_branch %s does not support this host's GPUs: %s"
                                  % (text, "; ".join(problems)))
    reasons = ["branch %s %s" % (text, "is known" if text in KNOWN_BRANCHES else "is not listed (accepted)")]
    if unchecked:
        reasons.append("branch not checked against %s (not in NVIDIA's supported-GPU data)" % _join(unchecked))
    return {"branch": text, "reasons": reasons}


# --------------------------------------------------------------------------
# Fabric manager
# --------------------------------------------------------------------------

# Package of the fabric manager per distribution family and branch. The fabric manager
# refuses to start unless its version equals the driver's, so it is installed at the
# driver's exact version and held/version-locked with it.
# - Debian/Ubuntu (CUDA repository): branches before 580 ship nvidia-fabricmanager-<branch>
#   (e.g. nvidia-fabricmanager-535 535.161.07-1, NVIDIA/apt-packaging-fabric-manager#3);
#   from 580 the real package is nvidia-fabricmanager (580.65.06-1) and
#   nvidia-fabricmanager-580 is only a virtual name it provides, which apt cannot install at a
#   version ("Package nvidia-fabricmanager-580 is a virtual package provided by:
#   nvidia-fabricmanager 580.65.06-1", NVIDIA/gpu-driver-container#451).
# - EL (CUDA repository): nvidia-fabric-manager since the 2021 rename of nvidia-fabricmanager-<branch>
#   (NVIDIA/yum-packaging-fabric-manager#1 and #2; aws/aws-parallelcluster#3066); from 580
#   nvidia-fabricmanager-<version> (NVIDIA/gpu-driver-container#898, rhel10/install.sh for R580+).
FABRICMANAGER_UNIFIED_BRANCH = 580


def fabricmanager_package(branch, os_family, version=""):
    """Fabric manager package for a driver branch on a distribution family.

    :param branch: ``"580"``.
    :param os_family: ``ansible_facts.os_family`` (``Debian`` or ``RedHat``).
    :param version: exact driver version (``"580.95.05"``); empty: no version in ``spec``.
    :returns: ``{"name", "spec", "source"}``: ``name`` to hold / version-lock and query,
        ``spec`` to install (``name=580.95.05-*`` for apt, ``name-580.95.05`` for dnf).
    :raises NvidiaDecisionError: on a branch that is not three digits or another family.
    """
    text = str(branch or "").strip()
    if not re.fullmatch(r"\d{3}", text):
        raise NvidiaDecisionError("nvidia_driver_branch must be a three-digit driver branch such as '580', got %r"
                                  % (branch,))
    unified = int(text) >= FABRICMANAGER_UNIFIED_BRANCH
    version = str(version or "").strip()
    if version and not re.fullmatch(r"%s(\.\d+){1,2}" % text, version):
        raise NvidiaDecisionError("driver version %r is not a version of branch %s" % (version, text))
    if os_family == "Debian":
        name = "nvidia-fabricmanager" if unified else "nvidia-fabricmanager-" + text
        spec = "%s=%s-*" % (name, version) if version else name
        source = ("branch %s: %s (nvidia-fabricmanager-%s is only a virtual name)" % (text, name, text) if unified
                  else "branch %s: %s" % (text, name))
    elif os_family == "RedHat":
        name = "nvidia-fabricmanager" if unified else "nvidia-fabric-manager"
        spec = "%s-%s" % (name, version) if version else name
        source = "branch %s on EL: %s" % (text, name)
    else:
        raise NvidiaDecisionError("no fabric manager package known for OS family %r (Debian and RedHat are)"
                                  % (os_family,))
    return {"name": name, "spec": spec, "source": source}


def _bridge(item):
    if isinstance(item, dict):
        return norm_id(item.get("device_id")) or str(item.get("device_id")), item.get("address")
    return None, str(item)


def fabricmanager_plan(bridges, wanted="auto"):
    """Decide whether the fabric manager is installed and started.

    :param bridges: NVIDIA PCI functions of class 0x0680 (``nvswitches`` of the role's probe):
        ``[{"address": "0000:07:00.0", "device_id": "0x22a3"}, ...]``.
    :param wanted: ``nvidia_driver_fabricmanager``: ``auto``, true or false.
    :returns: ``{"wanted": bool, "reason", "switches": [...], "other": [...]}``.
    :raises NvidiaDecisionError: ``auto`` with a class-0x0680 NVIDIA function whose id is
        neither a known NVSwitch nor a known GPU, naming the id, its address and the knob.
    """
    text = str(wanted).strip().lower()
    if text not in ("auto", "true", "false"):
        raise NvidiaDecisionError("nvidia_driver_fabricmanager must be auto, true or false, got %r" % (wanted,))
    switches, gpus, unknown = [], [], []
    for item in bridges or []:
        device_id, address = _bridge(item)
        label = "%s at %s" % (device_id or "unknown id", address)
        if device_id in NVSWITCH_IDS:
            switches.append("%s (%s)" % (label, NVSWITCH_IDS[device_id]))
        elif device_id and gpu_info(device_id)["known"]:
            gpus.append("%s (%s, a GPU)" % (label, gpu_info(device_id)["name"]))
        else:
            unknown.append(label)
    out = {"switches": switches, "other": gpus + unknown}
    if text == "true":
        return dict(out, wanted=True, reason="nvidia_driver_fabricmanager is true")
    if text == "false":
        return dict(out, wanted=False, reason="nvidia_driver_fabricmanager is false: fabric manager skipped")
    if unknown:
        raise NvidiaDecisionError(
            "nvidia_driver_fabricmanager: auto cannot tell whether %s (NVIDIA PCI class 0x0680) is an NVSwitch: "
            "the id is neither a known NVSwitch (%s) nor a known GPU; set nvidia_driver_fabricmanager: true on "
            "NVSwitch systems or false otherwise" % (", ".join(unknown), ", ".join(sorted(NVSWITCH_IDS))))
    if switches:
        return dict(out, wanted=True, reason="NVSwitch present: %s" % ", ".join(switches))
    reason = "no NVSwitch on this host (no NVIDIA PCI function of class 0x0680 with an NVSwitch id)"
    if gpus:
        reason += "; %s" % ", ".join(gpus)
    return dict(out, wanted=False, reason=reason + ": fabric manager skipped")
