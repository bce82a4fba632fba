"""NVLink fabric services a node needs: fabric manager, NVLSM, IMEX; and NVreg_* module options.

Pure functions, used by the gpudirect_nvidia_driver plan (``module_utils/gpudirect_nvidia_plan.py``) and
the unit tests. What a node needs is decided from what the node really has, strongest
evidence first:

1. NVIDIA NVSwitch PCI functions (class 0x0680, ``gpudirect_nvidia.NVSWITCH_IDS``): HGX A100 /
   H100 / H200 baseboards, NVSwitch generations 3 and 4: the fabric manager alone.
2. NVSwitch management functions of an NVLink-5 HGX baseboard (B200, B300): the baseboard's
   ConnectX-7 bridge exposes per port a "limited physical function" (LPF) whose PCI VPD carries
   the vendor field ``SMDL=SW_MNG``. The fabric manager then needs the NVLink Subnet Manager
   (NVLSM) beside it, which talks to the switches through ``ib_umad`` on those functions.
   (NVIDIA Fabric Manager User Guide, "Systems Using Fourth Generation NVSwitches" and the
   CX7 bridge section; NVIDIA's nvidia-fabricmanager-start.sh selects the LPF the same way.
   Without NVLSM the fabric manager stops with NV_WARN_NOTHING_TO_DO and CUDA fails with
   CUDA_ERROR_SYSTEM_NOT_READY: siderolabs/extensions pull request 717.)
3. The GPUs' own model where no switch function is visible (a kernel without VPD access, a
   BMC-managed baseboard): several B200 / B300 GPUs are an NVLink-5 HGX baseboard (fabric
   manager and NVLSM); GB200 / GB300 are compute trays of a multi-node NVLink rack (NVL72)
   whose switch trays are managed outside the node (no fabric manager on the tray:
   aws/aws-parallelcluster-cookbook pull request 3098), and whose GPU memory is shared across
   trays through IMEX (NVIDIA IMEX guide, "Deployment Models").

Package names (NVIDIA's own install scripts, NVIDIA/gpu-driver-container ubuntu24.04/install.sh
and rhel9/install.sh, rhel9/precompiled/Dockerfile): ``nvlsm`` and ``infiniband-diags`` (not
locked to the driver: NVLSM has versions of its own); ``nvidia-imex`` at the driver version from
branch 580, ``nvidia-imex-<branch>`` for 550-575 (IMEX first shipped with R550).
"""

from __future__ import annotations

import ipaddress
import re

from ansible.module_utils.gpudirect_nvidia import (NVSWITCH_IDS, NvidiaDecisionError, branch_digits,
                                                   fabricmanager_plan, gpu_info, norm_id, package_spec)

# vendor field of the NVSwitch management function's VPD (Fabric Manager User Guide, CX7 bridge)
LPF_VPD_MARK = "SMDL=SW_MNG"

# GPU ids whose model decides when no switch function is visible; names as NVIDIA's
# supported-GPU data prints them (module_utils/gpudirect_nvidia_gpus.py)
NVLINK5_HGX_GPUS = {"0x2901": "NVIDIA B200", "0x3182": "NVIDIA B300 SXM6 AC"}
MULTINODE_NVLINK_GPUS = {"0x2941": "NVIDIA GB200", "0x31c2": "NVIDIA GB300"}

NVLSM_PACKAGES = ["nvlsm", "infiniband-diags"]
IMEX_UNIFIED_BRANCH = 580
IMEX_FIRST_BRANCH = 550
IMEX_NODES_KNOB = "gpudirect_nvidia_driver_imex_nodes"
MODULE_OPTIONS_KNOB = "gpudirect_nvidia_driver_module_options"

_NVREG_NAME = re.compile(r"^NVreg_[A-Za-z0-9_]+$")
_NVREG_VALUE = re.compile(r"^[A-Za-z0-9_.,:;=/+-]+$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _tristate(value, knob):
    text = str(value).strip().lower()
    if text in ("yes", "on", "1"):
        text = "true"
    if text in ("no", "off", "0"):
        text = "false"
    if text not in ("auto", "true", "false"):
        raise NvidiaDecisionError("%s must be auto, true or false, got %r" % (knob, value))
    return text


def _gpu_ids(gpus):
    out = []
    for gpu in gpus or []:
        norm = norm_id(gpu.get("device_id") if isinstance(gpu, dict) else gpu)
        if norm:
            out.append(norm)
    return out


def fabric_plan(bridges, lpfs, gpus, fabricmanager="auto", nvlsm="auto", imex="auto"):
    """Which NVLink fabric services the node needs.

    :param bridges: NVIDIA class-0x0680 PCI functions (``[{"address", "device_id"}]``).
    :param lpfs: NVSwitch management functions: Mellanox PCI functions whose VPD carries
        ``SMDL=SW_MNG`` (``[{"address", "device_id"}]``).
    :param gpus: ``ansible_facts.gpudirect.gpus`` (dicts with ``device_id``) or ids.
    :param fabricmanager: ``gpudirect_nvidia_driver_fabricmanager``; ``nvlsm``: ``gpudirect_nvidia_driver_nvlsm``;
        ``imex``: ``gpudirect_nvidia_driver_imex`` (each auto, true or false).
    :returns: ``{"generation", "fabricmanager": {...}, "nvlsm": {"wanted", "reason", "lpfs"},
        "imex": {"wanted", "reason"}}``; ``generation`` is ``nvswitch`` (NVSwitch 3/4),
        ``nvlink5`` (NVLink-5 HGX), ``multinode`` (GB200/GB300 tray) or ``none``.
    :raises NvidiaDecisionError: a bad knob, or an unknown NVIDIA class-0x0680 id under auto.
    """
    fm_knob = _tristate(fabricmanager, "gpudirect_nvidia_driver_fabricmanager")
    nvlsm_knob = _tristate(nvlsm, "gpudirect_nvidia_driver_nvlsm")
    imex_knob = _tristate(imex, "gpudirect_nvidia_driver_imex")
    ids = _gpu_ids(gpus)
    hgx5 = [i for i in ids if i in NVLINK5_HGX_GPUS]
    multinode = [i for i in ids if i in MULTINODE_NVLINK_GPUS]
    lpf_labels = ["%s at %s" % (norm_id(item.get("device_id")) or "unknown id", item.get("address", "?"))
                  for item in lpfs or []]
    # the NVSwitch 3/4 decision (and its refusal of an unknown class-0x0680 id) as before
    fm = fabricmanager_plan(bridges, "auto" if fm_knob == "auto" else fm_knob)

    if fm["switches"]:
        generation = "nvswitch"
    elif lpf_labels:
        generation = "nvlink5"
    elif len(hgx5) > 1:
        generation = "nvlink5"
    elif multinode:
        generation = "multinode"
    else:
        generation = "none"

    def _model(found):
        names = sorted({gpu_info(i)["name"] or i for i in found})
        return "%d x %s" % (len(found), " / ".join(names))

    if generation == "nvlink5":
        evidence = ("NVSwitch management functions (VPD %s): %s" % (LPF_VPD_MARK, ", ".join(lpf_labels))
                    if lpf_labels else
                    "no NVSwitch management function visible (VPD %s), decided from the GPUs: %s, an NVLink-5 HGX "
                    "baseboard" % (LPF_VPD_MARK, _model(hgx5)))
    elif generation == "multinode":
        evidence = ("%s: a compute tray of a multi-node NVLink rack; its NVLink switches are managed on the switch "
                    "trays, not on this node" % _model(multinode))
    else:
        evidence = ""

    if fm_knob == "auto" and generation in ("nvlink5", "multinode"):
        wanted = generation == "nvlink5"
        fm = dict(fm, wanted=wanted, reason=evidence + (": fabric manager with NVLSM" if wanted
                                                        else ": fabric manager skipped"))
    elif fm_knob == "auto" and generation == "none" and len(hgx5) == 1:
        fm = dict(fm, reason=fm["reason"] + "; one %s only (no NVLink baseboard in view, e.g. a VM with one GPU "
                                            "passed through)" % NVLINK5_HGX_GPUS[hgx5[0]])

    if nvlsm_knob == "true":
        nvlsm_out = {"wanted": True, "reason": "gpudirect_nvidia_driver_nvlsm is true"}
    elif nvlsm_knob == "false":
        nvlsm_out = {"wanted": False, "reason": "gpudirect_nvidia_driver_nvlsm is false: NVLSM skipped"}
    elif generation == "nvlink5" and fm["wanted"]:
        nvlsm_out = {"wanted": True, "reason": evidence + ": the fabric manager needs NVLSM on NVLink-5 switches"}
    elif generation == "nvlink5":
        nvlsm_out = {"wanted": False, "reason": "NVLink-5 baseboard, but the fabric manager is off "
                                                "(gpudirect_nvidia_driver_fabricmanager: false): NVLSM skipped"}
    else:
        nvlsm_out = {"wanted": False, "reason": "no NVLink-5 switch on this node (%s): NVLSM skipped"
                                                % ("NVSwitch generation 3/4 needs the fabric manager alone"
                                                   if generation == "nvswitch" else
                                                   "switches managed outside the node" if generation == "multinode"
                                                   else "no NVLink switch in view")}
    nvlsm_out["lpfs"] = lpf_labels

    if imex_knob == "true":
        imex_out = {"wanted": True, "reason": "gpudirect_nvidia_driver_imex is true"}
    elif imex_knob == "false":
        imex_out = {"wanted": False, "reason": "gpudirect_nvidia_driver_imex is false: IMEX skipped"}
    elif generation == "multinode":
        imex_out = {"wanted": True, "reason": evidence + ": GPU memory is shared across trays through IMEX"}
    else:
        imex_out = {"wanted": False, "reason": "no multi-node NVLink GPU (%s) on this node: IMEX skipped (a GH200 "
                                               "NVL32 node needs gpudirect_nvidia_driver_imex: true)"
                                               % ", ".join(sorted(set(MULTINODE_NVLINK_GPUS.values())))}
    return {"generation": generation, "fabricmanager": fm, "nvlsm": nvlsm_out, "imex": imex_out}


def imex_package(branch, os_family, version=""):
    """IMEX package for a driver branch: ``nvidia-imex`` from 580, ``nvidia-imex-<branch>`` before.

    :returns: ``{"name", "spec"}`` (``spec`` with the exact driver version when given).
    :raises NvidiaDecisionError: a branch before 550 (no IMEX) or another OS family.
    """
    text = branch_digits(branch)
    if int(text) < IMEX_FIRST_BRANCH:
        raise NvidiaDecisionError("IMEX ships with driver branch %d and later, gpudirect_nvidia_driver_branch is %s: choose a "
                                  "newer branch or set gpudirect_nvidia_driver_imex: false" % (IMEX_FIRST_BRANCH, text))
    if os_family not in ("Debian", "RedHat"):
        raise NvidiaDecisionError("no IMEX package known for OS family %r (Debian and RedHat are)" % (os_family,))
    name = "nvidia-imex" if int(text) >= IMEX_UNIFIED_BRANCH else "nvidia-imex-" + text
    return {"name": name, "spec": package_spec(name, str(version or "").strip(), os_family)}


def check_imex_nodes(nodes, own_addresses=()):
    """Validate ``gpudirect_nvidia_driver_imex_nodes``: the IMEX domain's addresses, written one per line
    to /etc/nvidia-imex/nodes_config.cfg in this order on every node of the domain.

    :param nodes: list of IP addresses (or host names) of every node of the IMEX domain; empty:
        the service is left to the scheduler (per job), only package and channel are set up.
    :param own_addresses: the node's own IP addresses (``ansible_facts.all_ipv4_addresses`` +
        ipv6); when given, one of them must be in a non-empty list, since the IMEX daemon refuses
        to start otherwise ("No matching network interface found for any IP addresses in the node
        configuration file").
    :returns: the list, stripped.
    :raises NvidiaDecisionError: naming the bad entry and the knob.
    """
    if nodes in (None, ""):
        return []
    if not isinstance(nodes, (list, tuple)):
        raise NvidiaDecisionError("%s must be a list of IP addresses or host names, got %r" % (IMEX_NODES_KNOB, nodes))
    out, seen = [], set()
    for item in nodes:
        text = str(item).strip()
        if not _is_ip(text) and not _HOSTNAME.match(text):
            raise NvidiaDecisionError("%s: %r is neither an IP address nor a host name" % (IMEX_NODES_KNOB, item))
        if text in seen:
            raise NvidiaDecisionError("%s lists %s twice: each node of the IMEX domain once" % (IMEX_NODES_KNOB, text))
        seen.add(text)
        out.append(text)
    if len(out) > 2048:
        raise NvidiaDecisionError("%s lists %d nodes; an IMEX domain has at most 2048" % (IMEX_NODES_KNOB, len(out)))
    own = {str(a).strip() for a in own_addresses or () if str(a).strip()}
    listed_ips = {t for t in out if _is_ip(t)}
    if out and own and listed_ips == set(out) and not own & listed_ips:
        raise NvidiaDecisionError("%s does not list any address of this node (%s): the IMEX daemon would refuse to "
                                  "start; list the address the node uses on the IMEX network"
                                  % (IMEX_NODES_KNOB, ", ".join(sorted(own))))
    return out


def _is_ip(text):
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def check_module_options(options):
    """Validate ``gpudirect_nvidia_driver_module_options``: NVreg_* parameters of the nvidia module.

    :param options: ``{"NVreg_EnableGpuFirmware": 1, ...}``; values are integers or simple strings
        (no spaces, quotes or shell characters: modprobe.d takes them as they are).
    :returns: ``{name: text}`` sorted by name.
    :raises NvidiaDecisionError: a name that is not NVreg_*, or a value modprobe cannot carry.
    """
    if options in (None, ""):
        return {}
    if not isinstance(options, dict):
        raise NvidiaDecisionError("%s must be a mapping of NVreg_* names to values, got %r"
                                  % (MODULE_OPTIONS_KNOB, options))
    out = {}
    for name in sorted(options, key=str):
        value = options[name]
        if not _NVREG_NAME.match(str(name)):
            raise NvidiaDecisionError("%s: %r is not an nvidia module parameter (NVreg_<Name>, as `modinfo -p nvidia` "
                                      "lists them)" % (MODULE_OPTIONS_KNOB, name))
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, (int, float)):
            text = str(value)
        else:
            text = str(value).strip()
        if not text or not _NVREG_VALUE.match(text):
            raise NvidiaDecisionError("%s: %s=%r cannot be written to modprobe.d (letters, digits and _ . , : ; = / + - "
                                      "only)" % (MODULE_OPTIONS_KNOB, name, value))
        out[str(name)] = text
    return out


def module_options_line(options):
    """The modprobe.d line for the options (``""`` for none)."""
    if not options:
        return ""
    return "options nvidia " + " ".join("%s=%s" % (k, options[k]) for k in sorted(options))


def parse_modprobe_options(text):
    """``{name: value}`` of every ``options nvidia`` line of a modprobe.d file's text."""
    out = {}
    for line in (text or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "options" and words[1] == "nvidia":
            for word in words[2:]:
                name, _, value = word.partition("=")
                out[name] = value
    return out


def parse_proc_params(text):
    """``/proc/driver/nvidia/params`` (the loaded module's values: ``EnableGpuFirmware: 18``,
    strings quoted: ``RegistryDwords: ""``) -> ``{"NVreg_EnableGpuFirmware": "18", ...}``."""
    out = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition(":")
        name = name.strip()
        if not sep or not re.match(r"^[A-Za-z0-9_]+$", name):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out["NVreg_" + name] = value
    return out


def _same_value(wanted, loaded):
    try:
        return int(wanted, 0) == int(loaded, 0)
    except ValueError:
        return wanted == loaded


def params_differ(wanted, loaded):
    """Options whose loaded value differs from the wanted one: ``["NVreg_X=1 (loaded: 0)"]``.
    A parameter the loaded module does not list (another driver version) counts as differing."""
    out = []
    for name in sorted(wanted):
        if name not in loaded:
            out.append("%s=%s (the loaded module has no such parameter)" % (name, wanted[name]))
        elif not _same_value(wanted[name], loaded[name]):
            out.append("%s=%s (loaded: %s)" % (name, wanted[name], loaded[name] or '""'))
    return out


def parse_imex_ctl(text):
    """``nvidia-imex-ctl -N`` output -> ``{"nodes": [{"index", "address", "state", "version"}],
    "matrix": {from: {to: cell}}, "domain_state", "timestamp"}``.

    :raises ValueError: text without a ``Nodes:`` block or a ``Domain State:`` line, naming what is missing.
    """
    lines = (text or "").splitlines()
    nodes, matrix, domain, stamp, header = [], {}, None, "", None
    in_nodes = False
    for raw in lines:
        line = raw.rstrip()
        stripped = line.strip()
        if stripped == "Nodes:":
            in_nodes = True
            continue
        match = re.match(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)(?:\s+-\s+Version:\s*(\S+))?\s*$", stripped)
        if match and in_nodes:
            nodes.append({"index": int(match.group(1)), "address": match.group(2), "state": match.group(3),
                          "version": match.group(4) or ""})
            continue
        if stripped.startswith("Nodes From\\To"):
            header = [int(x) for x in stripped[len("Nodes From\\To"):].split()]
            in_nodes = False
            continue
        if header is not None and re.match(r"^\d+\s", stripped):
            cells = stripped.split()
            row = int(cells[0])
            if len(cells) - 1 != len(header):
                raise ValueError("nvidia-imex-ctl -N: row %d has %d cells for %d columns" % (row, len(cells) - 1,
                                                                                             len(header)))
            matrix[row] = dict(zip(header, cells[1:]))
            continue
        match = re.match(r"^Domain State:\s*(\S+)\s*$", stripped)
        if match:
            domain = match.group(1)
            header = None
            continue
        if re.match(r"^\d{1,2}/\d{1,2}/\d{4} \d", stripped):
            stamp = stripped
    if not nodes:
        raise ValueError("nvidia-imex-ctl -N: no 'Nodes:' block with 'Node #N - <address> - <state>' rows")
    if domain is None:
        raise ValueError("nvidia-imex-ctl -N: no 'Domain State:' line")
    return {"nodes": nodes, "matrix": matrix, "domain_state": domain, "timestamp": stamp}


def imex_verdict(status, expected=()):
    """Judge a parsed ``nvidia-imex-ctl -N``: every node READY, every pair C, the domain UP, and
    the node list equal to ``expected`` (``gpudirect_nvidia_driver_imex_nodes``) when given.

    :returns: ``{"ok": bool, "problems": [sentences]}``.
    """
    problems = []
    if status["domain_state"] != "UP":
        problems.append("Domain State %s (UP wanted)" % status["domain_state"])
    for node in status["nodes"]:
        if node["state"] != "READY":
            problems.append("node #%d %s is %s" % (node["index"], node["address"], node["state"]))
    index = {n["index"]: n["address"] for n in status["nodes"]}
    for row in sorted(status["matrix"]):
        for col in sorted(status["matrix"][row]):
            cell = status["matrix"][row][col]
            if cell != "C":
                problems.append("%s -> %s is %s (C, connected, wanted)" % (index.get(row, row), index.get(col, col),
                                                                            cell))
    missing_rows = sorted(set(index) - set(status["matrix"]))
    if status["matrix"] and missing_rows:
        problems.append("no connectivity row for node(s) %s" % ", ".join(str(i) for i in missing_rows))
    if expected:
        listed = [n["address"] for n in status["nodes"]]
        if sorted(listed) != sorted(expected):
            problems.append("the daemon's nodes (%s) differ from %s (%s)" % (", ".join(listed), IMEX_NODES_KNOB,
                                                                          ", ".join(expected)))
    return {"ok": not problems, "problems": problems}


__all__ = ["LPF_VPD_MARK", "NVLINK5_HGX_GPUS", "MULTINODE_NVLINK_GPUS", "NVLSM_PACKAGES", "NVSWITCH_IDS",
           "fabric_plan", "imex_package", "check_imex_nodes", "check_module_options", "module_options_line",
           "parse_modprobe_options", "parse_proc_params", "params_differ", "parse_imex_ctl", "imex_verdict"]
