"""The one sysfs RDMA scan (module_utils/gpudirect_rdma_sysfs.py), which gpudirect_facts
and gpudirect_loopback both use.

The trees follow the kernel's layout (drivers/infiniband/core/sysfs.c): ``state`` and
``phys_state`` as "<number>: <NAME>", ``rate`` as "200 Gb/sec (4X HDR)"; the soft-RoCE
port is the one of the VM the molecule rdma scenario runs on (tests/unit/test_gpudirect_loopback.py
rxe_sysfs, values read there).
"""

from ansible.module_utils import gpudirect_rdma_sysfs as rdma

import gpudirect_facts
import gpudirect_loopback
import sysfs_tree
from test_gpudirect_loopback import rxe_sysfs


def test_hca_devices_of_a_gpu_server(tmp_path):
    tree = sysfs_tree.gpu_server(tmp_path)
    devices = dict((d["name"], d) for d in rdma.scan_rdma_devices(tree.root))
    assert sorted(devices) == ["mlx5_0", "mlx5_1"]
    ib = devices["mlx5_0"]
    assert ib["kind"] == "hca" and ib["pci_address"] == sysfs_tree.NIC0 and ib["parent_netdev"] is None
    assert ib["fw_ver"] == "20.39.1002" and ib["node_guid"] == "b859:9f03:00a1:b2c4" and ib["node_type"] == "CA"
    assert ib["netdevs"] == ["ib0"]
    assert ib["ports"] == {"1": {"state": "ACTIVE", "state_num": 4, "phys_state": "LinkUp",
                                 "link_layer": "InfiniBand", "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0,
                                 "netdev": None}}
    roce = devices["mlx5_1"]
    assert roce["pci_address"] == sysfs_tree.NIC1 and roce["netdevs"] == ["ens5f0"]
    assert roce["ports"]["1"]["state"] == "DOWN" and roce["ports"]["1"]["link_layer"] == "Ethernet"
    assert roce["ports"]["1"]["netdev"] == "ens5f0" and roce["ports"]["1"]["rate_gbps"] == 100.0


def test_soft_devices_and_odd_ones(tmp_path):
    tree = sysfs_tree.SysfsTree(tmp_path)
    tree.add_netdev("enp1s0")
    tree.add_ib("rxe0", parent="enp1s0", ports={1: {"state": "4: ACTIVE", "link_layer": "Ethernet",
                                                     "rate": "2.5 Gb/sec (1X SDR)", "ndev": "enp1s0"}})
    tree.add_ib("siw0", parent="enp1s0", node_type="4: RNIC")
    tree.add_ib("odd0")
    warnings = []
    devices = dict((d["name"], d) for d in rdma.scan_rdma_devices(tree.root, warnings.append))
    assert (devices["rxe0"]["kind"], devices["rxe0"]["driver"]) == ("soft-roce", "rdma_rxe")
    assert devices["rxe0"]["netdevs"] == ["enp1s0"] and devices["rxe0"]["parent_netdev"] == "enp1s0"
    assert devices["rxe0"]["ports"]["1"]["rate_gbps"] == 2.5
    assert (devices["siw0"]["kind"], devices["siw0"]["driver"]) == ("soft-iwarp", "siw")
    assert devices["odd0"]["kind"] == "unknown" and devices["odd0"]["pci_address"] is None
    assert "rdma rxe0: parent netdev enp1s0 has no PCI device; no GPU pair for it" in warnings
    assert "rdma odd0: neither a device link nor a parent netdev" in warnings


def test_no_infiniband_class_and_missing_port(tmp_path):
    assert rdma.scan_rdma_devices(str(tmp_path)) == []
    rxe_sysfs(tmp_path)
    assert rdma.scan_port(str(tmp_path), "rxe0", 2) is None
    port = rdma.scan_port(str(tmp_path), "rxe0", 1)
    assert port["state"] == "ACTIVE" and port["netdev"] == "enp1s0" and port["rate_gbps"] == 2.5


def test_facts_and_loopback_use_this_scan(tmp_path, monkeypatch):
    """One implementation: the facts' rdma_devices are the scan plus the PCI function's NUMA node
    and link and RDMA-CM's defaults (issue #44 outcome 4), and the loopback reads the same scan when
    it has no facts."""
    assert gpudirect_loopback.scan_rdma_devices is rdma.scan_rdma_devices
    assert gpudirect_loopback.scan_port is rdma.scan_port
    assert gpudirect_facts.parse_rate is rdma.parse_rate
    tree = sysfs_tree.gpu_server(tmp_path)
    facts = gpudirect_facts.gather_facts(tree.root)
    scanned = rdma.scan_rdma_devices(tree.root)
    for seen, scan in zip(facts["rdma_devices"], scanned):
        extra = dict((k, seen[k]) for k in ("numa_node", "link", "rdma_cm"))
        assert dict(scan, **extra) == seen
    assert [d["numa_node"] for d in facts["rdma_devices"]] == [0, 1]
    assert facts["rdma_devices"][0]["link"] is not None


def test_a_device_that_cannot_be_read_is_skipped_with_a_warning(tmp_path, monkeypatch):
    tree = sysfs_tree.gpu_server(tmp_path)
    real = rdma.scan_rdma_device

    def broken(root, name, warn=None):
        if name == "mlx5_1":
            raise OSError(5, "Input/output error")
        return real(root, name, warn)

    monkeypatch.setattr(rdma, "scan_rdma_device", broken)
    warnings = []
    assert [d["name"] for d in rdma.scan_rdma_devices(tree.root, warnings.append)] == ["mlx5_0"]
    assert warnings == ["rdma mlx5_1: skipped (OSError: [Errno 5] Input/output error)"]
