"""The connection guard (module_utils/gpudirect_netguard.py) on fake sysfs/procfs trees and real text.

The procfs/iproute2 text comes from tests/fixtures/netguard/procfs.yml, which names where
each was seen; the sysfs trees are built in tmp_path the way the kernel lays them out
(/sys/class/net/<if>/device/driver -> .../drivers/mlx5_core, bond lower_* links).
"""
import os

import pytest
import yaml
from ansible.module_utils import gpudirect_netguard as g

from conftest import PROJECT_FIXTURES

with open(os.path.join(PROJECT_FIXTURES, "netguard", "procfs.yml"), encoding="utf-8") as _handle:
    REAL = yaml.safe_load(_handle)


def test_every_fixture_names_its_source():
    for section, items in REAL.items():
        for entry in items:
            assert str(entry.get("source") or "").strip(), (section, entry)


# --- fake sysfs ---------------------------------------------------------------------

def netdev(root, name, driver=None, lowers=(), slaves=None):
    base = root / "class" / "net" / name
    base.mkdir(parents=True)
    if driver:
        drv = root / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (base / "device").mkdir()
        os.symlink(str(drv), str(base / "device" / "driver"))
    for lower in lowers:
        os.symlink(str(root / "class" / "net" / lower), str(base / ("lower_" + lower)))
    if slaves is not None:
        (base / "bonding").mkdir()
        (base / "bonding" / "slaves").write_text(" ".join(slaves) + "\n")
    return base


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "sys"
    netdev(root, "eno1", "igb")
    netdev(root, "ens1f0np0", "mlx5_core")
    netdev(root, "ens1f1np1", "mlx5_core")
    netdev(root, "bond0", lowers=["ens1f0np0", "ens1f1np1"], slaves=["ens1f0np0", "ens1f1np1"])
    netdev(root, "bond0.100", lowers=["bond0"])
    netdev(root, "ib0", "mlx5_core")
    netdev(root, "lo")
    return str(root)


def routes(table):
    return lambda address: table.get(address)


def test_bond_over_mlx5_is_found_through_its_lower_devices(sysfs):
    assert g.rdma_netdevs_below(sysfs, "bond0") == [("ens1f0np0", "mlx5_core"), ("ens1f1np1", "mlx5_core")]
    assert g.rdma_netdevs_below(sysfs, "bond0.100") == [("ens1f0np0", "mlx5_core"), ("ens1f1np1", "mlx5_core")]
    assert g.rdma_netdevs_below(sysfs, "eno1") == []
    assert g.netdev_driver(sysfs, "lo") is None


def test_ssh_over_a_vlan_on_a_bond_of_mlx5_is_at_risk(sysfs):
    out = g.assess(sysfs, "10.0.0.1 51234 10.0.0.9 22", "", routes({"10.0.0.1": "bond0.100"}))
    [item] = out["at_risk"]
    assert item["interface"] == "bond0.100" and item["address"] == "10.0.0.1"
    assert "ens1f0np0 (mlx5_core)" in item["why"]
    assert "bond0.100" in g.describe(item) and "10.0.0.1" in g.describe(item)


def test_ssh_over_a_management_nic_is_safe(sysfs):
    out = g.assess(sysfs, "10.0.0.1 51234 10.0.0.9 22", "", routes({"10.0.0.1": "eno1"}))
    assert out["at_risk"] == [] and "eno1, not a ConnectX netdev" in out["checked"][0]


def test_ipoib_is_at_risk(sysfs):
    out = g.assess(sysfs, "192.168.100.1 40000 192.168.100.5 22", "", routes({"192.168.100.1": "ib0"}))
    assert out["at_risk"][0]["why"] == "ib0 is driven by mlx5_core"


def test_without_ssh_connection_the_default_route_is_checked(sysfs):
    out = g.assess(sysfs, None, "", routes({"0.0.0.0": "ens1f0np0"}))
    assert out["at_risk"][0]["what"].startswith("the default route")


def test_unknown_route_on_a_node_with_connectx_is_at_risk_not_guessed(sysfs):
    out = g.assess(sysfs, "fe80::1 40000 fe80::2 22", "", routes({}))
    assert out["at_risk"] and "no route to fe80::1 could be read" in out["at_risk"][0]["why"]


def test_unknown_route_without_connectx_is_fine(tmp_path):
    root = tmp_path / "sys"
    netdev(root, "eno1", "igb")
    out = g.assess(str(root), "10.0.0.1 1 10.0.0.9 22", "", routes({}))
    assert out["at_risk"] == []


def test_nfs_mount_over_mlx5_is_at_risk(sysfs):
    line = REAL["proc_mounts"][0]["line"]
    out = g.assess(sysfs, "10.0.0.1 1 10.0.0.9 22", line + "\n", routes({"10.0.0.1": "eno1",
                                                                       "192.168.1.17": "ens1f1np1"}))
    [item] = out["at_risk"]
    assert item["what"].startswith("nfs4 mount 192.168.1.17:/home/nfsshare on /mnt")
    assert item["interface"] == "ens1f1np1" and item["address"] == "192.168.1.17"


def test_lustre_over_o2ib_and_beegfs_are_at_risk_without_a_route(sysfs):
    text = "\n".join(e["line"] for e in REAL["proc_mounts"][3:]) + "\n"
    out = g.assess(sysfs, "10.0.0.1 1 10.0.0.9 22", text, routes({"10.0.0.1": "eno1"}))
    whys = [i["why"] for i in out["at_risk"]]
    assert "LNet over RDMA" in whys[0]
    assert all("not named by an address" in w for w in whys[1:]) and len(whys) == 3


@pytest.mark.parametrize("entry", REAL["proc_mounts"], ids=lambda e: e["line"][:40])
def test_mounts_on_real_lines(entry):
    [mount] = g.parse_mounts(entry["line"] + "\n/dev/sda1 / ext4 rw,relatime 0 0\n")
    assert mount["server"] == entry["server"]
    assert bool(mount["rdma"]) == bool(entry.get("rdma"))


def test_nfs_over_rdma_and_cifs():
    text = ("10.0.0.5:/export /data nfs4 rw,vers=4.2,proto=rdma,port=20049,addr=10.0.0.5 0 0\n"
            "//10.0.0.6/share /smb cifs rw,vers=3.1.1,addr=10.0.0.6 0 0\n"
            "/dev/sdb1 /data\\040disk xfs rw 0 0\n")
    nfs, cifs = g.parse_mounts(text)
    assert nfs["rdma"].startswith("proto=rdma") and cifs["server"] == "10.0.0.6"


@pytest.mark.parametrize("entry", REAL["proc_net_route"], ids=lambda e: e["default_gateway"])
def test_proc_net_route_on_real_tables(entry):
    table = g.parse_proc_route(entry["text"])
    default = [r for r in table if r["destination"] == "0.0.0.0"][0]
    assert default["gateway"] == entry["default_gateway"]
    iface = table[0]["iface"]
    assert g.route_dev_from_proc(entry["text"], "0.0.0.0") == iface
    assert g.route_dev_from_proc(entry["text"], "8.8.8.8") == iface


def test_proc_net_route_longest_prefix_wins():
    text = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
            "eno1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
            "bond0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
            "down0\t0000000A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    assert g.route_dev_from_proc(text, "10.0.3.4") == "bond0"
    assert g.route_dev_from_proc(text, "10.1.0.1") == "eno1"
    assert g.route_dev_from_proc(text, "fe80::1") is None


@pytest.mark.parametrize("entry", REAL["ip_route_get"], ids=lambda e: e["dev"])
def test_ip_route_get_on_real_output(entry):
    assert g.parse_ip_route_get(entry["text"]) == entry["dev"]
    assert g.parse_ip_route_get("RTNETLINK answers: Network is unreachable") is None


def test_ssh_connection_is_read_from_an_ancestor_when_sudo_dropped_it(tmp_path):
    proc = tmp_path / "proc"
    for pid, ppid, env in ((300, 200, b"PATH=/usr/bin\0"), (200, 100, b"SUDO_USER=admin\0"),
                           (100, 1, b"HOME=/root\0SSH_CONNECTION=10.0.0.1 51234 10.0.0.9 22\0")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "environ").write_bytes(env)
        (proc / str(pid) / "status").write_text("Name:\tx\nPPid:\t%d\n" % ppid)
    assert g.ssh_connection_from_proc(str(proc), 300) == "10.0.0.1 51234 10.0.0.9 22"
    (proc / "100" / "environ").write_bytes(b"HOME=/root\0")
    assert g.ssh_connection_from_proc(str(proc), 300) is None


@pytest.mark.parametrize("text", ["", "10.0.0.1 22", "host 1 10.0.0.9 22", "10.0.0.1 x 10.0.0.9 22"])
def test_malformed_ssh_connection_names_the_text(text):
    with pytest.raises(g.GuardError) as error:
        g.parse_ssh_connection(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("text", ["", "eth0 00000000", "Iface\tDestination\neth0\tzz\t00\t0003\t0\t0\t0\t00\n"])
def test_malformed_proc_route_is_an_error(text):
    with pytest.raises(g.GuardError):
        g.parse_proc_route(text)


def test_malformed_mounts_line_is_an_error():
    with pytest.raises(g.GuardError, match="line 1"):
        g.parse_mounts("10.0.0.5:/export /data\n")
