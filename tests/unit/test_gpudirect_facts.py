"""Unit tests for library/gpudirect_facts.py: parsers, facts on fabricated and
captured trees, and the module end to end through main()."""

import os
import resource

import pytest
import yaml

from ansible.module_utils import basic

from ansible.module_utils import gpudirect_facts_collector as collector
from ansible.module_utils.gpudirect_limits import memlock_limits

import gpudirect_facts
import sysfs_tree
from conftest import H200_CAPTURE as H200  # the node's raw outputs
from sysfs_tree import ConfigSpace, SysfsTree, bridge_config, distance_tree, gpu_server, h200_capture


class FakeRunner(object):
    """Stands in for AnsibleModule: get_bin_path / run_command, recording calls."""

    def __init__(self, bins=None, outputs=None):
        self.bins = bins or {}
        self.outputs = outputs or {}
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.bins.get(name)

    def run_command(self, args, environ_update=None, **kwargs):
        assert isinstance(args, list), "run_command must get a list"
        assert environ_update and environ_update.get("LANG") == "C" and environ_update.get("LC_ALL") == "C"
        self.calls.append(args)
        result = self.outputs[os.path.basename(args[0])]
        if isinstance(result, Exception):
            raise result
        return result


def facts_of(tree, **kwargs):
    return gpudirect_facts.gather_facts(tree.root if hasattr(tree, "root") else str(tree), **kwargs)


# ---------------------------------------------------------------------------
# parsers
# ---------------------------------------------------------------------------

def test_parse_nvidia_version_real_open_module():
    with open(os.path.join(H200, "system.txt")) as handle:
        text = "\n".join(handle.read().splitlines()[-2:])
    assert collector.parse_nvidia_version(text) == {"loaded": True, "version": "580.159.04", "flavor": "open"}


def test_parse_nvidia_version_proprietary_and_absent():
    text = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    assert collector.parse_nvidia_version(text) == {"loaded": True, "version": "535.104.05",
                                                          "flavor": "proprietary"}
    assert collector.parse_nvidia_version(None) == {"loaded": False, "version": None, "flavor": None}
    assert collector.parse_nvidia_version("garbage")["version"] is None


def test_parse_nvidia_smi_real_csv_with_header_and_units():
    with open(os.path.join(H200, "nvidia-smi-query.csv")) as handle:
        rows = collector.parse_nvidia_smi_csv(handle.read())
    assert rows == [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0",
                     "driver_version": "580.159.04", "compute_cap": "9.0", "memory_total_mib": 143771}]


def test_parse_nvidia_smi_noheader_nounits():
    text = "0, NVIDIA H200, 00000000:00:06.0, 580.159.04, 9.0, 143771\n1, NVIDIA H200, 00000000:1B:00.0, " \
           "580.159.04, 9.0, 143771\n"
    rows = collector.parse_nvidia_smi_csv(text)
    assert [r["pci_bus_id"] for r in rows] == ["0000:00:06.0", "0000:1b:00.0"]
    with pytest.raises(ValueError):
        collector.parse_nvidia_smi_csv("0, NVIDIA H200\n")


@pytest.mark.parametrize("text,expected", [("100 Gb/sec (4X EDR)", 100.0), ("200 Gb/sec (2X NDR)", 200.0),
                                           ("2.5 Gb/sec (1X SDR)", 2.5), ("", None), (None, None)])
def test_parse_rate(text, expected):
    assert gpudirect_facts.parse_rate(text) == expected


def test_parse_sysfs_state_and_kernel_helpers():
    assert gpudirect_facts.parse_sysfs_state("4: ACTIVE") == (4, "ACTIVE")
    assert gpudirect_facts.parse_sysfs_state("5: LinkUp") == (5, "LinkUp")
    assert gpudirect_facts.parse_sysfs_state(None) == (None, None)
    assert collector.parse_kernel_version("6.18.44-fc-v657-gpu") == (6, 18)
    assert collector.parse_kernel_version("garbage") is None
    assert collector.parse_kernel_config("# CONFIG_X is not set\n", "CONFIG_X") == "n"
    assert collector.parse_kernel_config("CONFIG_X=m\n", "CONFIG_X") == "m"
    assert collector.parse_kernel_config("CONFIG_XY=m\n", "CONFIG_X") is None


def test_memlock_limits():
    inf = resource.RLIM_INFINITY
    assert memlock_limits(lambda _r: (inf, inf)) == {
        "soft": "unlimited", "hard": "unlimited", "soft_bytes": None, "hard_bytes": None}
    assert memlock_limits(lambda _r: (8388608, inf)) == {
        "soft": "8388608", "hard": "unlimited", "soft_bytes": 8388608, "hard_bytes": None}
    real = memlock_limits()
    assert set(real) == {"soft", "hard", "soft_bytes", "hard_bytes"}


# Issue 19: the memlock facts describe what jobs get (new logins, new services), not the
# module process. The limits files and systemctl output are the VM node's (tests/unit/test_limits.py
# names their sources); the session is whatever this test process has.
LIMITS_PROJECT = "# Ansible managed (role host_prereqs)\n*\tsoft\tmemlock\tunlimited\n*\thard\tmemlock\tunlimited\n"
PID1_LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
               "Max locked memory         257548288            257548288            bytes     \n")


def _memlock_tree(tmp_path, limits=True):
    tree = gpu_server(tmp_path)
    tree.write("proc/1/limits", PID1_LIMITS)
    if limits:
        tree.write("etc/security/limits.d/90-gpudirect-memlock.conf", LIMITS_PROJECT)
    tree.write("etc/systemd/system.conf.d/90-gpudirect-memlock.conf", "[Manager]\nDefaultLimitMEMLOCK=infinity\n")
    tree.mkdir("run/systemd/system")
    return tree


def test_memlock_login_and_service_after_host_prereqs(tmp_path):
    tree = _memlock_tree(tmp_path)
    runner = FakeRunner({"systemctl": "/usr/bin/systemctl"},
                        {"systemctl": (0, "DefaultLimitMEMLOCK=infinity\nDefaultLimitMEMLOCKSoft=infinity\n", "")})
    memlock = facts_of(tree, runner=runner, nvidia_smi=False, kernel_log=False, live=True)["memlock"]
    assert runner.calls == [["/usr/bin/systemctl", "show", "-p", "DefaultLimitMEMLOCK", "-p", "DefaultLimitMEMLOCKSoft"]]
    assert memlock["login"]["soft"] == "unlimited" and memlock["login"]["hard"] == "unlimited"
    assert memlock["login"]["soft_source"] == "/etc/security/limits.d/90-gpudirect-memlock.conf:2 *"
    assert memlock["service"]["soft"] == "unlimited" and memlock["service"]["pending_reexec"] is False
    assert memlock["session"]["uid"] == os.getuid()
    assert memlock["soft"] == memlock["session"]["soft"]  # the old keys still describe the process


def test_memlock_without_limits_file_keeps_pid1_limit_and_flags_a_pending_reexec(tmp_path):
    tree = _memlock_tree(tmp_path, limits=False)
    runner = FakeRunner({"systemctl": "/usr/bin/systemctl"},
                        {"systemctl": (0, "DefaultLimitMEMLOCK=8388608\nDefaultLimitMEMLOCKSoft=8388608\n", "")})
    memlock = facts_of(tree, runner=runner, nvidia_smi=False, kernel_log=False, live=True)["memlock"]
    assert (memlock["login"]["soft"], memlock["login"]["soft_source"]) == ("257548288", None)
    assert memlock["login"]["base_source"] == "PID 1: 257548288/257548288"
    assert memlock["service"]["soft"] == "8388608" and memlock["service"]["pending_reexec"] is True
    assert memlock["service"]["configured"]["source"] == "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf:2"


def test_memlock_service_not_probed_off_a_live_root_or_without_systemd(tmp_path):
    tree = _memlock_tree(tmp_path)
    memlock = facts_of(tree, runner=FakeRunner({"systemctl": "/usr/bin/systemctl"}), nvidia_smi=False,
                       kernel_log=False)["memlock"]
    assert memlock["service"] is None and memlock["service_reason"].startswith("root is not /")
    assert memlock["login"]["soft"] == "unlimited"  # the captured tree's files still count
    os.rmdir(tree.abs("run/systemd/system"))
    memlock = facts_of(tree, runner=FakeRunner({"systemctl": "/usr/bin/systemctl"}), nvidia_smi=False,
                       kernel_log=False, live=True)["memlock"]
    assert memlock["service"] is None and "not the init system" in memlock["service_reason"]
    failing = FakeRunner({"systemctl": "/usr/bin/systemctl"},
                         {"systemctl": (1, "", "Failed to connect to bus:\nHost is down\n")})
    tree.mkdir("run/systemd/system")
    memlock = facts_of(tree, runner=failing, nvidia_smi=False, kernel_log=False, live=True)["memlock"]
    assert memlock["service_reason"] == "systemctl show failed (rc=1): Failed to connect to bus: Host is down"


# ---------------------------------------------------------------------------
# facts on the GPU server tree
# ---------------------------------------------------------------------------

def test_gpu_server_facts(tmp_path):
    facts = facts_of(gpu_server(tmp_path))
    assert facts["warnings"] == []

    assert len(facts["gpus"]) == 1
    gpu = facts["gpus"][0]
    assert gpu["address"] == sysfs_tree.GPU
    assert (gpu["vendor_id"], gpu["device_id"], gpu["numa_node"], gpu["driver"]) == ("0x10de", "0x2335", 0, "nvidia")
    assert gpu["link"] == {"current_speed_gts": 32.0, "current_width": 16, "max_speed_gts": 32.0, "max_width": 16}
    assert gpu["path"] == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
    assert gpu["root_complex"] == "pci0000:00"
    assert gpu["ordinal"] == 0 and gpu["name"] is None and gpu["index"] is None

    assert facts["nvidia_driver"] == {"loaded": True, "version": "535.104.05", "flavor": "proprietary"}

    names = [d["name"] for d in facts["rdma_devices"]]
    assert names == ["mlx5_0", "mlx5_1"]
    mlx0, mlx1 = facts["rdma_devices"]
    assert mlx0["pci_address"] == sysfs_tree.NIC0 and mlx0["kind"] == "hca" and mlx0["driver"] == "mlx5_core"
    assert mlx0["node_type"] == "CA" and mlx0["fw_ver"] == "20.39.1002" and mlx0["netdevs"] == ["ib0"]
    assert mlx0["numa_node"] == 0 and mlx0["parent_netdev"] is None
    assert mlx0["ports"] == {"1": {"state": "ACTIVE", "state_num": 4, "phys_state": "LinkUp",
                                   "link_layer": "InfiniBand", "rate": "200 Gb/sec (4X HDR)",
                                   "rate_gbps": 200.0, "netdev": None}}
    assert mlx1["pci_address"] == sysfs_tree.NIC1 and mlx1["numa_node"] == 1
    assert mlx1["ports"]["1"]["state"] == "DOWN" and mlx1["ports"]["1"]["phys_state"] == "Disabled"
    assert mlx1["ports"]["1"]["netdev"] == "ens5f0" and mlx1["netdevs"] == ["ens5f0"]
    assert mlx1["fw_ver"] == "20.39.1002" and mlx1["ports"]["1"]["rate_gbps"] == 100.0

    assert facts["unbound_mellanox_functions"] == [
        {"address": sysfs_tree.UNBOUND, "vendor_id": "0x15b3", "device_id": "0x101b", "class": "0x020000",
         "numa_node": 1}]

    pairs = {p["nic"]: p for p in facts["pairs"]}
    assert set(pairs) == {"mlx5_0", "mlx5_1"}
    pix = pairs["mlx5_0"]
    assert (pix["gpu"], pix["gpu_address"], pix["nic_address"], pix["distance"]) == \
        ("GPU0", sysfs_tree.GPU, sysfs_tree.NIC0, "PIX")
    assert pix["common_ancestor"] == "0000:01:00.0"
    assert pix["path"] == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]
    acs = {e["address"]: e for e in pix["acs"]}
    assert list(acs) == ["0000:00:01.0", "0000:02:08.0", "0000:02:10.0"]  # the upstream port has no ACS
    down = acs["0000:02:08.0"]
    assert down == {"address": "0000:02:08.0", "vendor_id": "0x10b5", "device_id": "0x8747", "readable": True,
                    "status": "present", "reason": None,
                    "acs_offset": 0x148, "acs_ctl_offset": 0x14E, "acs_cap": 0x005F,
                    "acs_cap_bits": ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                     "DirectTrans"],
                    "acs_ctl": 0x005D, "acs_ctl_hex": "0x005d",
                    "enabled_bits": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"],
                    "p2p_redirect": True}
    assert acs["0000:00:01.0"]["acs_ctl"] == 0x001D
    assert pix["acs_redirect"] is True
    assert pix["acs_verdict"] == "redirect"
    assert pix["acs_verdict_reason"] == ("ACS redirects peer-to-peer traffic on 0000:00:01.0 (ACSCtl 0x001d), "
                                         "0000:02:08.0 (ACSCtl 0x005d), 0000:02:10.0 (ACSCtl 0x005d)")

    sys_pair = pairs["mlx5_1"]
    assert sys_pair["distance"] == "SYS" and sys_pair["common_ancestor"] is None
    rp1 = [e for e in sys_pair["acs"] if e["address"] == "0000:80:01.0"][0]
    assert rp1["acs_ctl"] == 0 and rp1["enabled_bits"] == [] and rp1["readable"] is True

    assert facts["iommu"]["mode"] == "pt" and facts["iommu"]["enabled"] is True
    assert facts["peermem"] == {"nvidia_peermem": True, "nv_peer_mem": False, "gdrdrv": False, "ib_core": True}
    assert facts["dmabuf"] == {"kernel_ok": True, "open_module": False, "config_dma_shared_buffer": "y"}
    assert facts["kernel"] == {"running": "6.1.0-18-amd64", "default": "6.1.0-18-amd64",
                               "default_source": "/boot/vmlinuz", "reboot_pending": False, "reboot_reasons": []}
    # not live (root is a tmp tree): no live probes
    assert facts["nvidia_smi"]["available"] is False and "root is not /" in facts["nvidia_smi"]["reason"]
    assert facts["kernel_oops"]["available"] is False and facts["kernel_oops"]["lines"] == []


def test_acs_cleared_gives_no_redirect(tmp_path):
    facts = facts_of(gpu_server(tmp_path, downstream_acs=0x0000))
    pix = [p for p in facts["pairs"] if p["nic"] == "mlx5_0"][0]
    down = [e for e in pix["acs"] if e["address"] == "0000:02:10.0"][0]
    assert down["acs_ctl"] == 0 and down["acs_ctl_hex"] == "0x0000" and down["enabled_bits"] == []
    assert pix["acs_redirect"] is True  # the root port still has ReqRedir/CmpltRedir


def test_acs_cleared_everywhere_is_clear(tmp_path):
    tree = distance_tree(tmp_path, "PIX")[0]
    for address in ("0000:00:01.0", "0000:02:08.0", "0000:02:10.0"):
        raw = bytearray(bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x0000).build())
        with open(tree.abs("sys/bus/pci/devices/%s/config" % address), "wb") as handle:
            handle.write(bytes(raw))
    pair = facts_of(tree)["pairs"][0]
    assert (pair["acs_verdict"], pair["acs_redirect"]) == ("clear", False)
    assert [e["status"] for e in pair["acs"]] == ["present"] * 3


def unknown_bridge_config(kind):
    """A PLX downstream port whose ACS state cannot be known, and the reason's start."""
    if kind == "256":
        return (bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x0000).build(256),
                "extended configuration space not readable: the config file has 256 bytes")
    if kind == "loop":
        return (ConfigSpace(0x10B5, 0x8747, 0x060400).add_pcie(0x68, 6).add_aer(0x100)
                .add_acs(0x148, ctl=0).add_ext(0x200, 0x000B, next=0x148).build(),
                "extended capability list loops: 0x200 points back to 0x148")
    if kind == "below":
        return (ConfigSpace(0x10B5, 0x8747, 0x060400).add_pcie(0x68, 6).add_aer(0x100, next=0x80).build(),
                "extended capability at 0x100 points to 0x80, below 0x100")
    raw = bytearray(bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x0000).build())
    raw[0x148:0x14C] = b"\xff\xff\xff\xff"
    return bytes(raw), "extended capability header at 0x148 reads 0xffffffff"


@pytest.mark.parametrize("kind", ["256", "loop", "below", "all-ones"])
def test_path_through_an_unknown_bridge_is_never_clear(tmp_path, kind):
    """Every other bridge reads ACSCtl 0: the one unknown bridge decides the verdict."""
    tree = distance_tree(tmp_path, "PIX")[0]
    for address in ("0000:00:01.0", "0000:02:08.0", "0000:02:10.0"):
        with open(tree.abs("sys/bus/pci/devices/%s/config" % address), "wb") as handle:
            handle.write(bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x0000).build())
    raw, reason = unknown_bridge_config(kind)
    with open(tree.abs("sys/bus/pci/devices/0000:02:10.0/config"), "wb") as handle:
        handle.write(raw)
    pair = facts_of(tree)["pairs"][0]
    acs = dict((e["address"], e) for e in pair["acs"])
    assert acs["0000:02:10.0"]["status"] == "unknown" and acs["0000:02:10.0"]["reason"].startswith(reason)
    assert acs["0000:02:10.0"]["readable"] is False and acs["0000:02:10.0"]["acs_ctl"] is None
    assert pair["acs_redirect"] is False
    assert pair["acs_verdict"] == "unknown"
    assert pair["acs_verdict_reason"].startswith("ACS state unknown on 0000:02:10.0: " + reason)
    # a redirecting bridge elsewhere on the path still makes it "redirect", naming the unknown one too
    with open(tree.abs("sys/bus/pci/devices/0000:02:08.0/config"), "wb") as handle:
        handle.write(bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x005D).build())
    pair = facts_of(tree)["pairs"][0]
    assert pair["acs_verdict"] == "redirect" and "ACS state unknown on 0000:02:10.0" in pair["acs_verdict_reason"]


def test_unprivileged_config_reads_mark_bridges_unreadable(tmp_path):
    tree = gpu_server(tmp_path)
    for dirpath, _dirs, files in os.walk(tree.abs("sys/devices")):
        if "config" in files:
            with open(os.path.join(dirpath, "config"), "r+b") as handle:
                handle.truncate(64)
    facts = facts_of(tree)
    pix = [p for p in facts["pairs"] if p["nic"] == "mlx5_0"][0]
    assert [e["address"] for e in pix["acs"]] == pix["path"]  # nothing known: every bridge listed
    assert all(e["readable"] is False and e["acs_ctl"] is None and e["enabled_bits"] == [] for e in pix["acs"])
    assert all(e["status"] == "unknown" and "become" in e["reason"] for e in pix["acs"])
    assert pix["acs_redirect"] is False
    assert pix["acs_verdict"] == "unknown"  # nothing read: never "clear"
    assert all(a in pix["acs_verdict_reason"] for a in pix["path"])
    assert pix["distance"] == "PIX"  # the topology does not need config space
    assert facts["gpus"][0]["port_type"] is None


@pytest.mark.parametrize("kind,expected", [("PIX", "PIX"), ("PXB", "PXB"), ("PHB", "PHB"),
                                           ("PHB-rootbus", "PHB"), ("NODE", "NODE"), ("SYS", "SYS")])
def test_pair_distance_per_tree(tmp_path, kind, expected):
    tree, gpu, nic = distance_tree(tmp_path, kind)
    facts = facts_of(tree)
    assert [(p["gpu_address"], p["nic_address"], p["distance"]) for p in facts["pairs"]] == [(gpu, nic, expected)]


# ---------------------------------------------------------------------------
# the real H200 capture
# ---------------------------------------------------------------------------

def test_h200_capture(tmp_path):
    facts = facts_of(h200_capture(tmp_path, H200))
    assert facts["warnings"] == []
    assert len(facts["gpus"]) == 1
    gpu = facts["gpus"][0]
    assert gpu["address"] == "0000:00:06.0" and gpu["device_id"] == "0x2335" and gpu["driver"] == "nvidia"
    assert gpu["link"]["current_speed_gts"] == 32.0 and gpu["link"]["current_width"] == 16
    assert gpu["link"]["max_speed_gts"] is None  # not in the capture
    assert gpu["numa_node"] == -1 and gpu["path"] == [] and gpu["root_complex"] == "pci0000:00"
    assert facts["nvidia_driver"] == {"loaded": True, "version": "580.159.04", "flavor": "open"}
    assert facts["rdma_devices"] == []
    assert facts["pairs"] == []
    assert facts["unbound_mellanox_functions"] == []
    assert facts["peermem"] == {"nvidia_peermem": False, "nv_peer_mem": False, "gdrdrv": False, "ib_core": True}
    assert facts["dmabuf"] == {"kernel_ok": True, "open_module": True, "config_dma_shared_buffer": "y"}
    assert facts["kernel"]["running"] == "6.18.44-fc-v657-gpu"
    assert facts["kernel"]["default"] is None and facts["kernel"]["reboot_pending"] is False


def test_h200_nvidia_smi_enrichment(tmp_path):
    with open(os.path.join(H200, "nvidia-smi-query.csv")) as handle:
        csv = handle.read()
    runner = FakeRunner({"nvidia-smi": "/usr/bin/nvidia-smi"}, {"nvidia-smi": (0, csv, "")})
    facts = facts_of(h200_capture(tmp_path, H200), runner=runner, kernel_log=False, live=True)
    gpu = facts["gpus"][0]
    assert (gpu["index"], gpu["name"], gpu["compute_cap"], gpu["memory_total_mib"]) == (0, "NVIDIA H200", "9.0",
                                                                                        143771)
    assert facts["nvidia_smi"]["available"] is True and facts["nvidia_smi"]["reason"] is None
    assert runner.calls[0] == ["/usr/bin/nvidia-smi",
                               "--query-gpu=index,name,pci.bus_id,driver_version,compute_cap,memory.total",
                               "--format=csv,noheader,nounits"]
    # then the NVLink links and the fabric state (this runner answers them with the CSV: read as nothing)
    assert runner.calls[1:] == [["/usr/bin/nvidia-smi", "nvlink", "-s"], ["/usr/bin/nvidia-smi", "-q"]]
    assert gpu["nvlink"] is None and gpu["fabric"] is None
    assert facts["nvlink"]["available"] is False and "listed no GPU" in facts["nvlink"]["reason"]
    assert facts["nvlink"]["fabric_reason"] == "nvidia-smi -q has no Fabric section (a driver older than r550)"


def test_nvidia_smi_absent_mismatch_and_failure(tmp_path):
    tree = gpu_server(tmp_path)
    facts = facts_of(tree, runner=FakeRunner(), kernel_log=False, live=True)
    assert facts["nvidia_smi"] == {"available": False, "reason": "nvidia-smi not found", "gpus": []}
    assert len(facts["gpus"]) == 1  # still reported from sysfs

    other = "0, NVIDIA H100 80GB HBM3, 00000000:1B:00.0, 535.104.05, 9.0, 81559\n"
    facts = facts_of(tree, runner=FakeRunner({"nvidia-smi": "/x/nvidia-smi"}, {"nvidia-smi": (0, other, "")}),
                     kernel_log=False, live=True)
    assert facts["gpus"][0]["name"] is None and facts["nvidia_smi"]["gpus"][0]["pci_bus_id"] == "0000:1b:00.0"

    failing = FakeRunner({"nvidia-smi": "/x/nvidia-smi"},
                         {"nvidia-smi": (9, "NVIDIA-SMI has failed because it couldn't communicate", "")})
    facts = facts_of(tree, runner=failing, kernel_log=False, live=True)
    assert facts["nvidia_smi"]["available"] is False and "rc=9" in facts["nvidia_smi"]["reason"]
    assert any("nvidia-smi failed" in w for w in facts["warnings"])

    facts = facts_of(tree, runner=failing, nvidia_smi=False, kernel_log=False, live=True)
    assert facts["nvidia_smi"]["reason"].startswith("disabled") and failing.calls == [failing.calls[0]]


# ---------------------------------------------------------------------------
# soft-RoCE, unbound functions, faults, empty hosts
# ---------------------------------------------------------------------------

def _vm_with_rxe(tmp_path, netdev_on_pci=True):
    tree = SysfsTree(tmp_path)
    tree.add_pci("0000:00:00.0", vendor=0x8086, device=0x29C0, pci_class=0x060000)
    tree.add_pci("0000:00:03.0", vendor=0x1AF4, device=0x1041, pci_class=0x020000, driver="virtio-pci")
    tree.add_gpu("0000:00:06.0")
    tree.add_netdev("ens3", pci="0000:00:03.0" if netdev_on_pci else None)
    tree.add_ib("rxe0", parent="ens3", node_type="1: CA",
                ports={1: {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "Ethernet",
                           "rate": "10 Gb/sec (1X QDR)", "ndev": "ens3"}})
    tree.write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    return tree


def test_rxe_resolved_to_parent_netdev_pci_address(tmp_path):
    facts = facts_of(_vm_with_rxe(tmp_path))
    rxe = facts["rdma_devices"][0]
    assert rxe["name"] == "rxe0" and rxe["kind"] == "soft-roce" and rxe["driver"] == "rdma_rxe"
    assert rxe["pci_address"] == "0000:00:03.0" and rxe["parent_netdev"] == "ens3"
    assert rxe["netdevs"] == ["ens3"] and rxe["fw_ver"] is None
    assert rxe["ports"]["1"]["link_layer"] == "Ethernet" and rxe["ports"]["1"]["rate_gbps"] == 10.0
    assert [(p["nic"], p["nic_address"], p["distance"]) for p in facts["pairs"]] == [
        ("rxe0", "0000:00:03.0", "PHB")]  # both on the VM's root bus
    assert facts["warnings"] == []


def test_rxe_on_virtual_netdev_has_no_pair(tmp_path):
    facts = facts_of(_vm_with_rxe(tmp_path, netdev_on_pci=False))
    assert facts["rdma_devices"][0]["pci_address"] is None
    assert facts["pairs"] == []
    assert any("rxe0" in w for w in facts["warnings"])


def test_broken_devices_are_warnings_not_failures(tmp_path):
    tree = gpu_server(tmp_path)
    os.symlink("0000:09:00.0", tree.abs("sys/bus/pci/devices/0000:09:00.0"))
    os.symlink("bad", tree.abs("sys/class/infiniband/bad"))
    facts = facts_of(tree)
    assert len(facts["gpus"]) == 1 and len(facts["pairs"]) == 2
    assert any(w.startswith("pci 0000:09:00.0") for w in facts["warnings"])
    assert any(w.startswith("rdma bad") for w in facts["warnings"])


def test_section_fault_is_contained(tmp_path, monkeypatch):
    def boom(root):
        raise RuntimeError("iommu sysfs exploded")
    monkeypatch.setattr(collector, "iommu_info", boom)
    facts = facts_of(gpu_server(tmp_path))
    assert facts["iommu"]["mode"] == "unknown"
    assert facts["warnings"] == ["iommu: could not be read (RuntimeError: iommu sysfs exploded)"]
    assert len(facts["pairs"]) == 2


def test_empty_host_no_gpu_no_nic(tmp_path):
    facts = facts_of(SysfsTree(tmp_path))
    assert facts["gpus"] == [] and facts["rdma_devices"] == [] and facts["pairs"] == []
    assert facts["unbound_mellanox_functions"] == []
    assert facts["nvidia_driver"] == {"loaded": False, "version": None, "flavor": None}
    assert facts["dmabuf"]["kernel_ok"] is None and facts["dmabuf"]["open_module"] is False
    assert facts["kernel"]["running"] is None and facts["warnings"] == []
    # a directory with nothing at all
    bare = tmp_path / "bare"
    bare.mkdir()
    assert facts_of(bare)["gpus"] == []


def test_gpu_without_nic_and_nic_without_gpu(tmp_path):
    tree = gpu_server(tmp_path / "a")
    for name in ("mlx5_0", "mlx5_1"):
        os.unlink(tree.abs("sys/class/infiniband/%s" % name))
    facts = facts_of(tree)
    assert len(facts["gpus"]) == 1 and facts["rdma_devices"] == [] and facts["pairs"] == []

    tree = SysfsTree(tmp_path / "b")
    tree.add_bridge("0000:00:01.0")
    tree.add_nic("0000:01:00.0", "0000:00:01.0")
    tree.add_ib("mlx5_0", pci="0000:01:00.0")
    facts = facts_of(tree)
    assert facts["gpus"] == [] and [d["name"] for d in facts["rdma_devices"]] == ["mlx5_0"] and facts["pairs"] == []


def test_unbound_vf_is_not_reported(tmp_path):
    tree = gpu_server(tmp_path)
    vf = "0000:81:00.2"
    tree.add_pci(vf, parent="0000:80:01.0", vendor=0x15B3, device=0x101C, pci_class=0x020000, numa_node=1)
    tree.link(tree.rel(os.path.join(tree.pci_dirs[vf], "physfn")), tree.pci_dirs[sysfs_tree.NIC1])
    facts = facts_of(tree)
    assert [f["address"] for f in facts["unbound_mellanox_functions"]] == [sysfs_tree.UNBOUND]


def test_nvswitch_and_non_gpu_nvidia_functions_are_not_gpus(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.add_gpu("0000:00:06.0", pci_class=0x030000)
    tree.add_pci("0000:00:07.0", vendor=0x10DE, device=0x22A3, pci_class=0x068000)  # NVSwitch
    tree.add_pci("0000:00:06.1", vendor=0x10DE, device=0x10F0, pci_class=0x040300)  # HDMI audio
    facts = facts_of(tree)
    assert [g["address"] for g in facts["gpus"]] == ["0000:00:06.0"]


# ---------------------------------------------------------------------------
# kernel: running vs default, reboot pending
# ---------------------------------------------------------------------------

def test_reboot_pending_when_default_differs(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.kernel("6.1.0-18-amd64", default="6.1.0-20-amd64")
    kernel = facts_of(tree)["kernel"]
    assert kernel["default"] == "6.1.0-20-amd64" and kernel["default_source"] == "/boot/vmlinuz"
    assert kernel["reboot_pending"] is True
    assert kernel["reboot_reasons"] == ["default boot kernel 6.1.0-20-amd64 differs from running 6.1.0-18-amd64"]


def test_reboot_pending_from_flag_file_and_root_vmlinuz(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.kernel("6.1.0-18-amd64", default="6.1.0-18-amd64", link="vmlinuz",
                reboot_required=["linux-image-6.1.0-20-amd64", "libc6", "libc6"])
    kernel = facts_of(tree)["kernel"]
    assert kernel["default"] == "6.1.0-18-amd64" and kernel["default_source"] == "/vmlinuz"
    assert kernel["reboot_pending"] is True
    assert kernel["reboot_reasons"] == ["/var/run/reboot-required exists (packages: libc6, linux-image-6.1.0-20-amd64)"]


def test_default_kernel_from_grubby_only_when_live(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.kernel("5.14.0-362.el9.x86_64")
    runner = FakeRunner({"grubby": "/usr/sbin/grubby"},
                        {"grubby": (0, "/boot/vmlinuz-5.14.0-427.el9.x86_64\n", "")})
    kernel = facts_of(tree, runner=runner, live=True, nvidia_smi=False, kernel_log=False)["kernel"]
    assert kernel["default"] == "5.14.0-427.el9.x86_64" and kernel["default_source"] == "grubby"
    assert kernel["reboot_pending"] is True
    assert runner.calls == [["/usr/sbin/grubby", "--default-kernel"]]

    runner = FakeRunner({"grubby": "/usr/sbin/grubby"}, {"grubby": (0, "/boot/vmlinuz-x\n", "")})
    kernel = facts_of(tree, runner=runner)["kernel"]
    assert kernel["default"] is None and kernel["reboot_pending"] is False and runner.calls == []


def test_no_default_kernel_known(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.kernel("6.1.0-18-amd64")
    kernel = facts_of(tree, runner=FakeRunner(), live=True, nvidia_smi=False, kernel_log=False)["kernel"]
    assert kernel == {"running": "6.1.0-18-amd64", "default": None, "default_source": None,
                      "reboot_pending": False, "reboot_reasons": []}


# ---------------------------------------------------------------------------
# kernel log
# ---------------------------------------------------------------------------

DMESG = """[    0.000000] Linux version 6.1.0-18-amd64
[    5.100000] nvidia: loading out-of-tree module taints kernel.
[   12.000000] NVRM: GPU 0000:03:00.0: RmInitAdapter failed! (0x22:0x56:742)
[   12.100000] NVRM: Xid (PCI:0000:03:00): 79, pid=1234, GPU has fallen off the bus.
[   13.000000] BUG: unable to handle page fault for address: ffff
[   13.000001] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   14.000000] mlx5_core 0000:04:00.0: firmware version 20.39.1002
"""


def test_kernel_oops_lines(tmp_path):
    runner = FakeRunner({"dmesg": "/usr/bin/dmesg"}, {"dmesg": (0, DMESG, "")})
    oops = facts_of(SysfsTree(tmp_path), runner=runner, live=True, nvidia_smi=False)["kernel_oops"]
    assert oops["available"] is True and oops["reason"] is None and oops["matches"] == 3
    assert oops["lines"] == DMESG.splitlines()[2:4] + [DMESG.splitlines()[5]]
    assert runner.calls == [["/usr/bin/dmesg"]]


def test_kernel_oops_capped_at_20(tmp_path):
    text = "\n".join("[ %d.0] NVRM: Xid (PCI:0000:03:00): 13, pid=%d" % (i, i) for i in range(30))
    runner = FakeRunner({"dmesg": "/usr/bin/dmesg"}, {"dmesg": (0, text, "")})
    oops = facts_of(SysfsTree(tmp_path), runner=runner, live=True, nvidia_smi=False)["kernel_oops"]
    assert oops["matches"] == 30 and len(oops["lines"]) == 20 and oops["lines"][0].startswith("[ 0.0]")


def test_kernel_oops_unavailable(tmp_path):
    tree = SysfsTree(tmp_path)
    denied = FakeRunner({"dmesg": "/usr/bin/dmesg"},
                        {"dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")})
    oops = facts_of(tree, runner=denied, live=True, nvidia_smi=False)["kernel_oops"]
    assert oops["available"] is False and "Operation not permitted" in oops["reason"] and oops["lines"] == []

    oops = facts_of(tree, runner=FakeRunner(), live=True, nvidia_smi=False)["kernel_oops"]
    assert oops == {"available": False, "reason": "dmesg not found", "matches": 0, "lines": []}

    crashing = FakeRunner({"dmesg": "/usr/bin/dmesg"}, {"dmesg": OSError("exec format error")})
    oops = facts_of(tree, runner=crashing, live=True, nvidia_smi=False)["kernel_oops"]
    assert oops["available"] is False and "exec format error" in oops["reason"]

    oops = facts_of(tree, runner=denied, live=True, nvidia_smi=False, kernel_log=False)["kernel_oops"]
    assert oops["reason"].startswith("disabled")


# ---------------------------------------------------------------------------
# documentation
# ---------------------------------------------------------------------------

def _check_documented(value, doc, where):
    """Every key returned is in the RETURN ``contains`` tree."""
    contains = doc.get("contains")
    if not contains:
        return
    if doc.get("type") == "list":
        for item in value or []:
            _check_documented(item, {"type": "dict", "contains": contains}, where + "[]")
        return
    if where.endswith(".ports"):
        for num, port in (value or {}).items():
            _check_documented(port, {"type": "dict", "contains": contains}, "%s.%s" % (where, num))
        return
    if value is None and "null" in str(doc.get("description")):
        return   # a dict the documentation says may be null (gpus[].nvlink without nvidia-smi)
    assert isinstance(value, dict), where
    undocumented = set(value) - set(contains)
    assert not undocumented, "%s: undocumented keys %s" % (where, sorted(undocumented))
    for key, sub in contains.items():
        if key in value:
            _check_documented(value[key], sub, "%s.%s" % (where, key))


def test_documentation_is_valid_yaml_and_complete(tmp_path):
    doc = yaml.safe_load(gpudirect_facts.DOCUMENTATION)
    assert doc["module"] == "gpudirect_facts"
    assert set(doc["options"]) == {"root", "nvidia_smi", "kernel_log", "rdma_cm"}
    assert yaml.safe_load(gpudirect_facts.EXAMPLES)
    ret = yaml.safe_load(gpudirect_facts.RETURN)
    gpudirect_doc = ret["ansible_facts"]["contains"]["gpudirect"]
    tree = gpu_server(tmp_path / "server")
    rxe = _vm_with_rxe(tmp_path / "vm")
    runner = FakeRunner({"nvidia-smi": "/x/nvidia-smi", "dmesg": "/x/dmesg"},
                        {"nvidia-smi": (0, "0, NVIDIA H100, 00000000:03:00.0, 535.104.05, 9.0, 81559\n", ""),
                         "dmesg": (0, DMESG, "")})
    for facts in (facts_of(tree), facts_of(rxe), facts_of(tree, runner=runner, live=True)):
        assert set(facts) == set(gpudirect_doc["contains"])
        _check_documented(facts, gpudirect_doc, "gpudirect")


# ---------------------------------------------------------------------------
# the module end to end
# ---------------------------------------------------------------------------



def test_main_end_to_end_and_check_mode(tmp_path, monkeypatch, run_module):
    tree = gpu_server(tmp_path)
    result = run_module(gpudirect_facts, {"root": tree.root})
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpudirect"]
    assert facts["gpus"][0]["address"] == sysfs_tree.GPU
    assert {(p["nic"], p["distance"]) for p in facts["pairs"]} == {("mlx5_0", "PIX"), ("mlx5_1", "SYS")}
    assert facts["unbound_mellanox_functions"][0]["address"] == sysfs_tree.UNBOUND

    checked = run_module(gpudirect_facts, {"root": tree.root}, check_mode=True)
    assert checked["changed"] is False
    assert checked["ansible_facts"] == result["ansible_facts"]


def test_main_live_probes_via_patched_module(tmp_path, monkeypatch, run_module):
    tree = h200_capture(tmp_path, H200)
    with open(os.path.join(H200, "nvidia-smi-query.csv")) as handle:
        csv = handle.read()
    calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {"nvidia-smi": "/usr/bin/nvidia-smi", "dmesg": "/usr/bin/dmesg"}.get(name)

    def run_command(self, args, **kwargs):
        calls.append((args, kwargs.get("environ_update")))
        return (0, csv, "") if args[0].endswith("nvidia-smi") else (0, DMESG, "")

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(collector, "is_live_root", lambda root: True)
    result = run_module(gpudirect_facts, {"root": tree.root})
    facts = result["ansible_facts"]["gpudirect"]
    assert facts["gpus"][0]["name"] == "NVIDIA H200" and facts["gpus"][0]["compute_cap"] == "9.0"
    assert facts["kernel_oops"]["matches"] == 3
    assert all(isinstance(args, list) and env["LANG"] == "C" for args, env in calls)

    off = run_module(gpudirect_facts, {"root": tree.root, "nvidia_smi": False, "kernel_log": False})
    off_facts = off["ansible_facts"]["gpudirect"]
    assert off_facts["gpus"][0]["name"] is None
    assert off_facts["nvidia_smi"]["reason"].startswith("disabled")


def test_main_warnings_are_emitted(tmp_path, monkeypatch, run_module):
    # Record module.warn calls: once controller code is imported in the same test
    # process (the filter tests do), ansible-core 2.19 sends module warnings to the
    # controller's Display instead of the result.
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg, **kw: warned.append(msg))
    tree = gpu_server(tmp_path)
    os.symlink("0000:09:00.0", tree.abs("sys/bus/pci/devices/0000:09:00.0"))
    result = run_module(gpudirect_facts, {"root": tree.root})
    assert result["changed"] is False
    assert len(warned) == 1 and warned[0].startswith("pci 0000:09:00.0: skipped")
    assert result["ansible_facts"]["gpudirect"]["warnings"] == warned


def test_main_missing_root_fails_with_hint(tmp_path, monkeypatch, run_module):
    result = run_module(gpudirect_facts, {"root": str(tmp_path / "missing")})
    assert result["failed"] is True
    assert "not a directory" in result["msg"] and "captured tree" in result["msg"]


# ---------------------------------------------------------------------------
# RDMA-CM's defaults read back (issue #44, outcome 4)
# ---------------------------------------------------------------------------

from rdma_cm_configfs import V1, V2, FakeRdmaCm, port as cm_port  # noqa: E402


def test_rdma_cm_defaults_read_on_a_live_host_in_a_group_made_for_the_read(tmp_path, monkeypatch):
    tree = _vm_with_rxe(tmp_path)
    fake = FakeRdmaCm(tree.root, monkeypatch, {"rxe0": {1: cm_port(V2, 104, modes=(V2,))}})
    facts = gpudirect_facts.gather_facts(tree.root, None, nvidia_smi=False, kernel_log=False, live=True)
    assert facts["rdma_devices"][0]["rdma_cm"] == {
        "read": True, "reason": "", "errors": {},
        "ports": {"1": {"default_roce_mode": "RoCE v2", "default_roce_tos": 104, "dscp": 26, "ecn": 0}}}
    assert fake.log == [("mkdir", "rxe0"), ("rmdir", "rxe0")] and os.listdir(fake.base) == []


def test_rdma_cm_defaults_of_a_captured_tree_only_from_a_group_that_is_there(tmp_path, monkeypatch):
    tree = _vm_with_rxe(tmp_path)
    fake = FakeRdmaCm(tree.root, monkeypatch, {"rxe0": {1: cm_port(V2, 106, modes=(V2,))}})
    facts = facts_of(tree)
    cm = facts["rdma_devices"][0]["rdma_cm"]
    assert cm["read"] is False and fake.log == []
    assert cm["reason"] == ("no configfs group /sys/kernel/config/rdma_cm/rxe0 (reading it needs a mkdir there)")
    fake.mkdir(fake.group("rxe0"))                                    # as the capture holds it
    cm = facts_of(tree)["rdma_devices"][0]["rdma_cm"]
    assert cm["ports"]["1"] == {"default_roce_mode": "RoCE v2", "default_roce_tos": 106, "dscp": 26, "ecn": 2}
    assert os.path.isdir(fake.group("rxe0"))


def test_rdma_cm_defaults_say_what_is_missing(tmp_path, monkeypatch):
    tree = _vm_with_rxe(tmp_path)
    FakeRdmaCm(tree.root, monkeypatch, {"rxe0": {1: cm_port()}}, loaded=False).mounts(True)
    cm = gpudirect_facts.gather_facts(tree.root, None, nvidia_smi=False, kernel_log=False,
                                      live=True)["rdma_devices"][0]["rdma_cm"]
    assert cm == {"read": False, "ports": {}, "errors": {},
                  "reason": "the kernel module rdma_cm is not loaded (no /sys/kernel/config/rdma_cm)"}
    off = gpudirect_facts.gather_facts(tree.root, None, nvidia_smi=False, kernel_log=False, live=True,
                                       rdma_cm=False)["rdma_devices"][0]["rdma_cm"]
    assert off["read"] is False and off["reason"] == "not asked for (rdma_cm: false)"


def test_rdma_cm_defaults_of_an_infiniband_device_are_not_read(tmp_path, monkeypatch):
    tree = gpu_server(tmp_path)
    fake = FakeRdmaCm(tree.root, monkeypatch, {"mlx5_0": {1: cm_port(V1, 0, modes=(V1,))},
                                               "mlx5_1": {1: cm_port(V1, 0, modes=(V1,))}})
    devices = gpudirect_facts.gather_facts(tree.root, None, nvidia_smi=False, kernel_log=False,
                                           live=True)["rdma_devices"]
    mlx0 = [d for d in devices if d["name"] == "mlx5_0"][0]
    assert mlx0["rdma_cm"]["read"] is False
    assert mlx0["rdma_cm"]["reason"] == "no RoCE (Ethernet) port: RDMA-CM's RoCE defaults do not apply"
    assert ("mkdir", "mlx5_0") not in fake.log


def test_a_malformed_rdma_cm_value_is_an_error_not_a_value(tmp_path, monkeypatch):
    tree = _vm_with_rxe(tmp_path)
    fake = FakeRdmaCm(tree.root, monkeypatch, {"rxe0": {1: cm_port(V2, 0, modes=(V2,))}})
    fake.mkdir(fake.group("rxe0"))
    with open(os.path.join(fake.group("rxe0"), "ports", "1", "default_roce_tos"), "w") as handle:
        handle.write("0x68\n")
    cm = facts_of(tree)["rdma_devices"][0]["rdma_cm"]
    assert cm["read"] is True and cm["ports"]["1"] == {"default_roce_mode": "RoCE v2", "default_roce_tos": None,
                                                       "dscp": None, "ecn": None}
    assert cm["errors"]["1"]["default_roce_tos"] == ("default_roce_tos reads '0x68\\n', not a ToS 0-255 as the kernel "
                                                     "prints it")
