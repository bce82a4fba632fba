# -*- coding: utf-8 -*-
"""What the ``gpudirect_facts`` module collects, section by section (``ansible_facts.gpudirect``):
PCI functions and GPUs, unbound Mellanox functions, GPU<->NIC pairs
(module_utils/gpudirect_gpu_nic_pairs.py), IOMMU, the NVIDIA driver and peer-memory modules,
dma-buf support, running and default boot kernel, memlock limits, and the live probes
(nvidia-smi, dmesg) that only run when the tree is this host's ``/``.

Every section is read on its own: one that fails becomes a warning and its default value,
never a failed survey. The sysfs RDMA device scan (``rdma_devices``) and the default boot kernel reading
(``boot_kernel``) are supplied by the module's subclass (library/gpudirect_facts.py). Nothing here writes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import os
import re

from ansible.module_utils.gpudirect_gpu_nic_pairs import gpu_nic_pairs
from ansible.module_utils.gpudirect_host import read_attr
from ansible.module_utils.gpudirect_kernel import C_LOCALE, running_kernel
from ansible.module_utils.gpudirect_limits import (
    configured_manager_memlock,
    login_memlock,
    memlock_limits,
    parse_proc_limits,
    parse_systemctl_show,
    read_limits,
    read_systemd_conf,
    service_memlock,
    show_limit,
)
from ansible.module_utils.gpudirect_nvlink import NvlinkParseError, parse_fabric, parse_nvlink_status
from ansible.module_utils.gpudirect_nvlink_plan import imex_verdict, parse_imex_ctl
from ansible.module_utils.gpudirect_secure_boot import collect as collect_secure_boot
from ansible.module_utils.gpudirect_pci import (
    PCI_VENDOR_MELLANOX,
    PCI_VENDOR_NVIDIA,
    iommu_info,
    list_pci_functions,
    normalize_pci_address,
    pci_address_key,
    pci_device_dir,
    read_pci_function,
    root_path,
)
from ansible.module_utils.gpudirect_versions import VersionError, parse_kernel_version, parse_proc_driver_version

MAX_OOPS_LINES = 20
OOPS_RE = re.compile(r"Oops|Xid|NVRM:.*failed")
NVIDIA_SMI_QUERY = "index,name,pci.bus_id,driver_version,compute_cap,memory.total"
GPU_CLASSES = (0x0300, 0x0302)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem", "gdrdrv", "ib_core")


# --------------------------------------------------------------------------
# pure parsers
# --------------------------------------------------------------------------

def parse_nvidia_version(text):
    """``/proc/driver/nvidia/version`` -> ``{loaded, version, flavor}`` (gpudirect_versions' parser).

    A file that exists but has no recognised ``NVRM version:`` line is loaded with
    version and flavour None (the caller warns).
    """
    if text is None:
        return {"loaded": False, "version": None, "flavor": None}
    try:
        found = parse_proc_driver_version(text)
    except VersionError:
        return {"loaded": True, "version": None, "flavor": None}
    return {"loaded": True, "version": found["version"], "flavor": found["flavor"]}

def parse_kernel_config(text, option):
    """Value of ``option`` in a kernel config: ``y``/``m``/string, ``n`` when
    "is not set", None when absent."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith(option + "="):
            return line.split("=", 1)[1].strip('"')
        if line == "# %s is not set" % option:
            return "n"
    return None


def parse_nvidia_smi_csv(text):
    """Rows of ``nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,
    compute_cap,memory.total --format=csv[,noheader,nounits]``."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip() or line.lower().startswith("index"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 6:
            raise ValueError("unexpected nvidia-smi line: %r" % line)
        index, name, bus_id, driver_version, compute_cap, memory = fields[:6]
        mem = re.match(r"^(\d+)", memory)
        rows.append({
            "index": int(index) if index.isdigit() else None,
            "name": name,
            "pci_bus_id": normalize_pci_address(bus_id),
            "driver_version": driver_version,
            "compute_cap": compute_cap,
            "memory_total_mib": int(mem.group(1)) if mem else None,
        })
    return rows


# --------------------------------------------------------------------------
# collector
# --------------------------------------------------------------------------

def is_live_root(root):
    """True when ``root`` is this host's ``/`` (live probes describe it)."""
    return os.path.realpath(root or "/") == "/"

class FactsCollector(object):
    """Gathers the facts of one tree. ``runner`` provides ``get_bin_path(name)``
    and ``run_command(args, environ_update=...)`` (an AnsibleModule); None means
    no commands. ``live`` (default: root is ``/``) allows the probes that read
    the running system instead of the tree (nvidia-smi, dmesg, grubby)."""

    def __init__(self, root="/", runner=None, nvidia_smi=True, kernel_log=True, live=None):
        self.root = root or "/"
        self.runner = runner
        self.use_nvidia_smi = nvidia_smi
        self.use_kernel_log = kernel_log
        self.live = is_live_root(self.root) if live is None else live
        self.warnings = []
        self.functions = {}

    # helpers -----------------------------------------------------------
    def warn(self, message):
        self.warnings.append(message)

    def path(self, *parts):
        return root_path(self.root, *parts)

    def _bin(self, name):
        if self.runner is None:
            return None
        try:
            return self.runner.get_bin_path(name)
        except Exception:
            return None

    def _run(self, args):
        return self.runner.run_command(args, environ_update=dict(C_LOCALE))

    def _tool_output(self, argv, what=None):
        """``(stdout, None)`` of a command that succeeded, ``(None, reason)`` of one that did not: the reason
        names it (``what``, else the command without its path), its exit status and the start of its output."""
        rc, stdout, stderr = self._run(argv)
        if rc == 0:
            return stdout, None
        what = what or " ".join([os.path.basename(argv[0])] + list(argv[1:]))
        return None, "%s failed (rc=%s): %s" % (what, rc, " ".join((stderr or stdout or "").split())[:200])

    def _parsed(self, label, parse, text, errors):
        """``(parse(text), None)``, or ``(None, reason)`` for output ``parse`` cannot read, also kept as a
        warning of the facts (``<label>: <reason>``)."""
        try:
            return parse(text), None
        except errors as exc:
            self.warn("%s: %s" % (label, exc))
            return None, str(exc)

    def section(self, name, func, default):
        try:
            return func()
        except Exception as exc:
            self.warn("%s: could not be read (%s: %s)" % (name, type(exc).__name__, exc))
            return default

    # PCI -----------------------------------------------------------------
    def load_pci(self):
        errors = []
        for fn in list_pci_functions(self.root, errors):
            self.functions[fn.address] = fn
        for address, message in errors:
            self.warn("pci %s: skipped (%s)" % (address, message))

    def _sorted_functions(self):
        return sorted(self.functions.values(), key=lambda fn: pci_address_key(fn.address))

    def function(self, address):
        if address is None:
            return None
        fn = self.functions.get(address)
        if fn is None and os.path.lexists(pci_device_dir(self.root, address)):
            try:
                fn = read_pci_function(self.root, address)
                self.functions[address] = fn
            except Exception as exc:
                self.warn("pci %s: skipped (%s: %s)" % (address, type(exc).__name__, exc))
        return fn

    def gpus(self):
        gpus = []
        for fn in self._sorted_functions():
            if fn.vendor != PCI_VENDOR_NVIDIA or fn.pci_class is None:
                continue
            if (fn.pci_class >> 8) not in GPU_CLASSES:
                continue
            entry = fn.to_dict()
            entry.pop("is_bridge", None)
            entry.update(ordinal=len(gpus), index=None, name=None, compute_cap=None, memory_total_mib=None,
                         nvlink=None, fabric=None)
            gpus.append(entry)
        return gpus

    def unbound_mellanox(self):
        out = []
        for fn in self._sorted_functions():
            if fn.vendor == PCI_VENDOR_MELLANOX and not fn.is_bridge and not fn.driver:
                if os.path.lexists(os.path.join(pci_device_dir(self.root, fn.address), "physfn")):
                    continue  # an SR-IOV VF left unbound on purpose (autoprobe off, VM pool)
                d = fn.to_dict()
                out.append({k: d[k] for k in ("address", "vendor_id", "device_id", "class", "numa_node")})
        return out
    # pairs ---------------------------------------------------------------
    def pairs(self, gpus, nics):
        return gpu_nic_pairs(self.root, gpus, nics, self.functions, self.function, self.warn)

    # drivers, modules ------------------------------------------------------
    def nvidia_driver(self):
        info = parse_nvidia_version(read_attr(self.path("proc/driver/nvidia/version")))
        if not info["loaded"] and os.path.isdir(self.path("sys/module/nvidia")):
            info["loaded"] = True
        if info["loaded"] and info["version"] is None:
            version = read_attr(self.path("sys/module/nvidia/version"))
            info["version"] = version or None
        if info["loaded"] and (info["version"] is None or info["flavor"] is None):
            self.warn("nvidia driver: loaded but version/flavour not recognised in /proc/driver/nvidia/version")
        return info

    def peermem(self):
        return {name: os.path.isdir(self.path("sys/module", name)) for name in PEERMEM_MODULES}

    def kernel_config(self, release, option):
        if release:
            text = read_attr(self.path("boot", "config-%s" % release))
            if text is not None:
                return parse_kernel_config(text, option)
        try:
            with gzip.open(self.path("proc/config.gz"), "rt") as handle:
                return parse_kernel_config(handle.read(), option)
        except (IOError, OSError, EOFError, ValueError):
            return None

    def dmabuf(self, kernel, driver):
        version = parse_kernel_version(kernel.get("running"))
        return {
            "kernel_ok": None if version is None else version >= (5, 12),
            "open_module": driver.get("flavor") == "open",
            "config_dma_shared_buffer": self.kernel_config(kernel.get("running"), "CONFIG_DMA_SHARED_BUFFER"),
        }
    # kernel ----------------------------------------------------------------
    def kernel(self):
        running = running_kernel(self.root, self.live)
        default, source, warnings = self.boot_kernel()
        for warning in warnings:
            self.warn("kernel: %s" % warning)
        reasons = []
        if default and running and default != running:
            reasons.append("default boot kernel %s differs from running %s" % (default, running))
        for flag in ("var/run/reboot-required", "run/reboot-required"):
            if os.path.exists(self.path(flag)):
                pkgs = read_attr(self.path(flag + ".pkgs"))
                pkgs = ", ".join(sorted(set((pkgs or "").split())))
                reasons.append("/%s exists%s" % (flag, " (packages: %s)" % pkgs if pkgs else ""))
                break
        return {"running": running, "default": default, "default_source": source,
                "reboot_pending": bool(reasons), "reboot_reasons": reasons}

    def boot_kernel(self):
        """``(default boot kernel, where it was read, warnings)``; the module's subclass reads it."""
        raise NotImplementedError("the default boot kernel is read in library/gpudirect_facts.py")

    # memlock ---------------------------------------------------------------
    def memlock(self):
        """The module process's limit (``session``), what a new login gets (``login``) and what a
        unit started now gets (``service``); see module_utils/gpudirect_limits.py."""
        out = memlock_limits()
        out["session"] = dict(out, uid=os.getuid())
        out["login_reason"] = None
        try:
            base = parse_proc_limits(read_attr(self.path("proc/1/limits")))
            base_source = None if base is None else "PID 1: %s/%s" % (show_limit(base[0]), show_limit(base[1]))
            out["login"] = login_memlock(read_limits(self.root), base or (None, None), base_source)
        except Exception as exc:
            out["login"], out["login_reason"] = None, "%s: %s" % (type(exc).__name__, exc)
            self.warn("memlock: limits.conf/limits.d could not be read (%s)" % out["login_reason"])
        out["service"], out["service_reason"] = self.service_memlock()
        return out

    def service_memlock(self):
        systemctl, why = self._probe_binary(True, "", "systemctl",
                                            "the systemd manager of this host does not describe the tree")
        if not systemctl:
            return None, why
        if not os.path.isdir(self.path("run/systemd/system")):
            return None, "systemd is not the init system (no /run/systemd/system)"
        rc, stdout, stderr = self._run([systemctl, "show", "-p", "DefaultLimitMEMLOCK",
                                        "-p", "DefaultLimitMEMLOCKSoft"])
        if rc != 0:
            return None, "systemctl show failed (rc=%s): %s" % (rc, " ".join((stderr or stdout or "").split())[:200])
        try:
            configured = configured_manager_memlock(read_systemd_conf(self.root))
            return service_memlock(parse_systemctl_show(stdout), configured), None
        except ValueError as exc:
            self.warn("memlock: %s" % exc)
            return None, str(exc)

    # live probes -------------------------------------------------------------
    def _probe_binary(self, enabled, option, name, what):
        """The path of a live probe's binary, or (None, why the probe does not run)."""
        if not enabled:
            return None, "disabled (%s=false)" % option
        if not self.live:
            return None, "root is not /: %s" % what
        path = self._bin(name)
        return (path, None) if path else (None, "%s not found" % name)

    def kernel_oops(self):
        out = {"available": False, "reason": None, "matches": 0, "lines": []}
        dmesg, out["reason"] = self._probe_binary(self.use_kernel_log, "kernel_log", "dmesg",
                                                  "the kernel log of this host does not describe the tree")
        if not dmesg:
            return out
        try:
            rc, stdout, stderr = self._run([dmesg])
        except Exception as exc:
            out["reason"] = "dmesg could not run: %s" % exc
            return out
        if rc != 0:
            out["reason"] = "dmesg failed (rc=%s): %s" % (rc, (stderr or stdout or "").strip()[:200])
            return out
        matches = [line.rstrip() for line in (stdout or "").splitlines() if OOPS_RE.search(line)]
        out.update(available=True, matches=len(matches), lines=matches[:MAX_OOPS_LINES])
        return out

    def nvidia_smi(self, gpus, driver):
        out = {"available": False, "reason": None, "gpus": []}
        smi, out["reason"] = self._probe_binary(self.use_nvidia_smi, "nvidia_smi", "nvidia-smi",
                                                "nvidia-smi would describe this host, not the tree")
        if not smi:
            return out
        rc, stdout, stderr = self._run([smi, "--query-gpu=%s" % NVIDIA_SMI_QUERY,
                                        "--format=csv,noheader,nounits"])
        if rc != 0:
            out["reason"] = "nvidia-smi failed (rc=%s): %s" % (rc, (stderr or stdout or "").strip()[:200])
            if gpus and driver.get("loaded"):
                self.warn(out["reason"])
            return out
        try:
            rows = parse_nvidia_smi_csv(stdout)
        except ValueError as exc:
            out["reason"] = str(exc)
            self.warn("nvidia-smi: %s" % exc)
            return out
        out.update(available=True, gpus=rows)
        by_bus = {row["pci_bus_id"]: row for row in rows}
        for gpu in gpus:
            row = by_bus.get(gpu["address"])
            if row:
                gpu.update(index=row["index"], name=row["name"], compute_cap=row["compute_cap"],
                           memory_total_mib=row["memory_total_mib"])
        return out

    def nvlink(self, gpus, smi):
        """Each GPU's NVLink links (``nvidia-smi nvlink -s``) and NVLink fabric state (``nvidia-smi -q``,
        module_utils/gpudirect_nvlink.py), set on the GPU as ``nvlink`` and ``fabric``. Only where
        nvidia-smi answered the GPU query (its index names the ``nvlink -s`` block); otherwise both stay
        None and ``reason``/``fabric_reason`` say why. Never a failure: a node without NVLink, or a
        driver that prints no Fabric section, is a reason, not a warning."""
        out = {"available": False, "reason": None, "fabric_available": False, "fabric_reason": None}
        if not smi.get("available"):
            out["reason"] = out["fabric_reason"] = "nvidia-smi did not answer: %s" % (smi.get("reason") or "unknown")
            return out
        smi_path = self._bin("nvidia-smi")
        by_index = dict((g["index"], g) for g in gpus if g.get("index") is not None)

        stdout, out["reason"] = self._tool_output([smi_path, "nvlink", "-s"])
        if stdout is not None:
            links, out["reason"] = self._parsed("nvlink", parse_nvlink_status, stdout, NvlinkParseError)
            if links:
                out["available"] = True
                for index, state in links.items():
                    gpu = by_index.get(index)
                    if gpu is not None:
                        gpu["nvlink"] = dict((k, state[k]) for k in (
                            "links_total", "links_up", "link_speed_gbytes_s", "total_gbytes_s", "links"))
            elif out["reason"] is None:
                out["reason"] = "nvidia-smi nvlink -s listed no GPU: %s" % (" ".join((stdout or "").split())[:200]
                                                                           or "empty output")

        stdout, out["fabric_reason"] = self._tool_output([smi_path, "-q"])
        if stdout is None:
            return out
        fabric, out["fabric_reason"] = self._parsed("fabric", parse_fabric, stdout, NvlinkParseError)
        if out["fabric_reason"]:
            return out
        if not fabric:
            out["fabric_reason"] = "nvidia-smi -q has no Fabric section (a driver older than r550)"
            return out
        out["fabric_available"] = True
        for gpu in gpus:
            if gpu["address"] in fabric:
                gpu["fabric"] = fabric[gpu["address"]]
        return out

    # IMEX --------------------------------------------------------------------
    def imex(self):
        """The IMEX domain as this node's daemon sees it (``nvidia-imex-ctl -N``, parsed and judged by
        module_utils/gpudirect_nvlink_plan.py): ``installed``, ``domain_state``, ``nodes``, ``problems``;
        ``reason`` says why nothing was read. Never a failure: most nodes have no IMEX."""
        out = {"installed": False, "reason": None, "domain_state": None, "nodes": [], "problems": []}
        path = self._bin("nvidia-imex-ctl")
        if not path:
            out["reason"] = "nvidia-imex-ctl is not installed (no IMEX on this node)"
            return out
        out["installed"] = True
        stdout, out["reason"] = self._tool_output([path, "-N"], "nvidia-imex-ctl -N")
        if stdout is None:
            return out
        status, out["reason"] = self._parsed("imex", parse_imex_ctl, stdout, ValueError)
        if out["reason"]:
            return out
        out.update(domain_state=status["domain_state"], nodes=status["nodes"],
                   problems=imex_verdict(status)["problems"])
        return out

    # secure boot -------------------------------------------------------------
    def secure_boot(self):
        """Secure Boot, the kernel's module-signature policy and the keys it trusts
        (module_utils/gpudirect_secure_boot.py); mokutil and keyctl only on a live host."""
        def run(args):
            path = self._bin(args[0])
            if not path:
                return None
            return self._run([path] + list(args[1:]))
        return collect_secure_boot(self.root, run if self.runner is not None else None, self.live)

    # all -------------------------------------------------------------------
    def rdma_devices(self):
        """The RDMA devices of ``sys/class/infiniband``; the module's subclass scans them."""
        raise NotImplementedError("the sysfs RDMA device scan lives in library/gpudirect_facts.py")

    def collect(self):
        self.section("pci", self.load_pci, None)
        gpus = self.section("gpus", self.gpus, [])
        driver = self.section("nvidia_driver", self.nvidia_driver,
                              {"loaded": False, "version": None, "flavor": None})
        smi = self.section("nvidia_smi", lambda: self.nvidia_smi(gpus, driver),
                           {"available": False, "reason": "error", "gpus": []})
        nvlink = self.section("nvlink", lambda: self.nvlink(gpus, smi),
                              {"available": False, "reason": "error", "fabric_available": False, "fabric_reason": "error"})
        nics = self.section("rdma_devices", self.rdma_devices, [])
        kernel = self.section("kernel", self.kernel, {"running": None, "default": None, "default_source": None,
                                                      "reboot_pending": False, "reboot_reasons": []})
        facts = {
            "root": self.root,
            "gpus": gpus,
            "nvidia_driver": driver,
            "rdma_devices": nics,
            "unbound_mellanox_functions": self.section("unbound_mellanox_functions", self.unbound_mellanox, []),
            "pairs": self.section("pairs", lambda: self.pairs(gpus, nics), []),
            "iommu": self.section("iommu", lambda: iommu_info(self.root),
                                  {"enabled": False, "mode": "unknown", "groups": 0, "devices": [],
                                   "group_types": {}, "cmdline_flags": {}}),
            "peermem": self.section("peermem", self.peermem, {n: False for n in PEERMEM_MODULES}),
            "dmabuf": self.section("dmabuf", lambda: self.dmabuf(kernel, driver),
                                   {"kernel_ok": None, "open_module": False, "config_dma_shared_buffer": None}),
            "kernel": kernel,
            "memlock": self.section("memlock", self.memlock,
                                    {"soft": None, "hard": None, "soft_bytes": None, "hard_bytes": None,
                                     "session": None, "login": None, "service": None,
                                     "login_reason": "error", "service_reason": "error"}),
            "kernel_oops": self.section("kernel_oops", self.kernel_oops,
                                        {"available": False, "reason": "error", "matches": 0, "lines": []}),
            "nvidia_smi": smi,
            "nvlink": nvlink,
            "imex": self.section("imex", self.imex, {"installed": False, "reason": "error", "domain_state": None,
                                                     "nodes": [], "problems": []}),
            "secure_boot": self.section("secure_boot", self.secure_boot,
                                        {"secure_boot": None, "signatures_required": None, "enforcement": "error",
                                         "trusted_keys": [], "moks": None, "moks_pending": None, "errors": []}),
        }
        facts["warnings"] = list(self.warnings)
        return facts
