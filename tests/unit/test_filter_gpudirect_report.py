"""Findings and the preflight table, on facts shaped as gpudirect_facts returns them."""

import copy

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_report as report

ACS_ON = {"address": "0000:02:08.0", "vendor_id": "0x10b5", "device_id": "0x8747", "acs_offset": 0x148,
          "acs_cap": 0x007F, "acs_ctl": 0x005D, "acs_ctl_hex": "0x005d", "readable": True,
          "enabled_bits": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]}

BASE = {
    "gpus": [{"address": "0000:03:00.0", "vendor_id": "0x10de", "device_id": "0x2335", "numa_node": 0,
              "driver": "nvidia", "name": "NVIDIA H200",
              "link": {"current_speed_gts": 32.0, "current_width": 16, "max_speed_gts": 32.0, "max_width": 16}}],
    "rdma_devices": [{"name": "mlx5_0", "pci_address": "0000:04:00.0", "netdevs": ["ens1f0np0"],
                      "ports": {"1": {"state": "ACTIVE", "phys_state": "LinkUp", "link_layer": "Ethernet",
                                      "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0}}},
                     {"name": "mlx5_1", "pci_address": "0000:81:00.0", "netdevs": [],
                      "ports": {"1": {"state": "DOWN", "phys_state": "Disabled", "link_layer": "InfiniBand",
                                      "rate": "10 Gb/sec (4X SDR)"}}}],
    "pairs": [
        {"gpu": "0000:03:00.0", "gpu_address": "0000:03:00.0", "nic": "mlx5_1", "nic_address": "0000:81:00.0",
         "distance": "SYS", "acs": []},
        {"gpu": "0000:03:00.0", "gpu_address": "0000:03:00.0", "nic": "mlx5_0", "nic_address": "0000:04:00.0",
         "distance": "PIX", "acs": [ACS_ON]},
    ],
    "unbound_mellanox_functions": [],
    "nvidia_driver": {"loaded": True, "version": "580.159.04", "flavor": "open"},
    "peermem": {"nvidia_peermem": False, "nv_peer_mem": False, "gdrdrv": False, "ib_core": True},
    "dmabuf": {"kernel_ok": True, "open_module": True},
    "iommu": {"enabled": True, "mode": "translated", "groups": 40},
    "kernel": {"running": "6.1.0-28-amd64", "default": "6.1.0-28-amd64", "reboot_pending": False,
               "reboot_reasons": []},
    "memlock": {"soft": "unlimited", "hard": "unlimited"},
    "kernel_oops": {"available": True, "lines": []},
    "warnings": [],
}


def facts(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def test_best_pair_is_the_closest_not_the_first():
    assert report.gpudirect_best_pair(facts())["nic"] == "mlx5_0"
    assert report.gpudirect_best_pair(facts(pairs=[])) is None


def test_acs_on_the_best_path_and_down_port_are_reported():
    found = report.gpudirect_findings(facts())
    checks = [(f["severity"], f["check"]) for f in found]
    assert ("warn", "acs") in checks
    assert ("warn", "port_state") in checks
    acs = [f for f in found if f["check"] == "acs"][0]["message"]
    assert "0000:02:08.0" in acs and "0x005d" in acs and "ReqRedir" in acs


def test_healthy_node_has_no_findings():
    pair = dict(BASE["pairs"][1], acs=[dict(ACS_ON, acs_ctl=0, acs_ctl_hex="0x0000", enabled_bits=[])])
    nic = BASE["rdma_devices"][0]
    assert report.gpudirect_findings(facts(pairs=[pair], rdma_devices=[nic])) == []


@pytest.mark.parametrize("distance,severity", [("PHB", "warn"), ("NODE", "bad"), ("SYS", "bad")])
def test_distance_verdicts(distance, severity):
    pair = dict(BASE["pairs"][0], distance=distance)
    found = [f for f in report.gpudirect_findings(facts(pairs=[pair])) if f["check"] == "topology"]
    assert [f["severity"] for f in found] == [severity]
    assert distance in found[0]["message"]


def test_max_distance_makes_a_far_topology_fatal():
    pair = dict(BASE["pairs"][0], distance="NODE")
    fatal = [f for f in report.gpudirect_findings(facts(pairs=[pair]), "PXB") if f["severity"] == "fatal"]
    assert len(fatal) == 1 and "NODE" in fatal[0]["message"] and "PXB" in fatal[0]["message"]
    assert not [f for f in report.gpudirect_findings(facts(pairs=[pair]), "SYS") if f["severity"] == "fatal"]


def test_unknown_distance_is_an_error():
    with pytest.raises(AnsibleFilterError, match="FAR"):
        report.gpudirect_findings(facts(), "FAR")
    with pytest.raises(AnsibleFilterError, match="NV4"):
        report.gpudirect_best_pair(facts(pairs=[dict(BASE["pairs"][0], distance="NV4")]))


def test_unbound_mellanox_memlock_reboot_and_oops():
    data = facts(unbound_mellanox_functions=[{"address": "0000:03:00.0", "vendor_id": "0x15b3",
                                              "device_id": "0x1003"}],
                 memlock={"soft": 65536, "hard": 65536},
                 kernel={"running": "a", "default": "b", "reboot_pending": True,
                         "reboot_reasons": ["default boot kernel b differs from running a"]},
                 kernel_oops={"available": True, "lines": ["BUG: unable to handle page fault ... Oops: 0002"]})
    by_check = {f["check"]: f for f in report.gpudirect_findings(data)}
    assert "/sys/bus/pci/devices/0000:03:00.0/remove" in by_check["nic_driver"]["message"]
    assert "65536" in by_check["memlock"]["message"]
    assert "b differs from running a" in by_check["kernel"]["message"]
    assert by_check["kernel_log"]["severity"] == "bad"


def test_report_table_lists_pairs_closest_first_with_acs():
    lines = report.gpudirect_preflight_report(facts(), "node1")
    text = "\n".join(lines)
    assert lines[0] == "GPUDirect RDMA: node1"
    assert "nvidia 580.159.04 (open kernel module)" in text
    assert "32.0 GT/s x16 (max 32.0 GT/s x16)" in text
    pix = next(i for i, line in enumerate(lines) if " PIX " in line)
    sys_ = next(i for i, line in enumerate(lines) if " SYS " in line)
    assert pix < sys_
    assert "0000:02:08.0 0x005d" in lines[pix] and "good" in lines[pix]
    assert "clear" in lines[sys_] and "bad" in lines[sys_]


def test_report_on_a_node_without_gpu_or_nic():
    lines = report.gpudirect_preflight_report(facts(gpus=[], rdma_devices=[], pairs=[],
                                                    nvidia_driver={"loaded": False}), "ct1")
    text = "\n".join(lines)
    assert "GPUs       0" in text and "RDMA NICs  0" in text
    assert "GPU/NIC pairs: none (no GPU)" in text
    assert "nvidia kernel module not loaded" in text
