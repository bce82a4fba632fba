"""library/gpudirect_rdma_addresses.py on a fake node: ``ip`` prints the links of a JSON state
file in ``ip -j addr show``'s shape (tests/fixtures/rdma_addresses/ip-j-addr-show.json, real, is
its starting point) and answers ``route get``; ``systemctl is-active`` answers from a list;
``networkctl reconfigure`` puts the ``Address=`` lines of the interface's networkd file on the
link, as networkd does. The files go under tmp_path (the module_utils' directories, patched).
"""

import json
import os
import sys
import textwrap

import pytest
from ansible.module_utils import gpudirect_rdma_addresses as addr

import gpudirect_rdma_addresses as module
from conftest import PROJECT_FIXTURES

SSH = "10.0.2.2 51234 10.0.2.15 22"

FAKE_IP = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    state = os.environ["FAKE_NODE"]
    links = json.load(open(state))
    args = sys.argv[1:]
    open(state + ".log", "a").write("ip " + " ".join(args) + "\\n")
    if args[:2] == ["-j", "addr"]:
        print(json.dumps(links))
    elif args[:3] == ["-o", "route", "get"]:
        print("%s via 10.0.2.2 dev %s src 10.0.2.15 uid 0 \\\\    cache" % (args[3], os.environ["FAKE_ROUTE_DEV"]))
    elif args[:2] == ["addr", "del"]:
        for link in links:
            if link.get("ifname") == args[4]:
                link["addr_info"] = [a for a in link["addr_info"]
                                     if "%s/%s" % (a["local"], a["prefixlen"]) != args[2]]
        json.dump(links, open(state, "w"))
    """)

FAKE_SYSTEMCTL = textwrap.dedent("""\
    #!{python}
    import os, sys
    active = os.environ.get("FAKE_ACTIVE", "").split()
    if sys.argv[1] == "is-active" and sys.argv[2] in active:
        print("active")
        sys.exit(0)
    print("inactive")
    sys.exit(3)
    """)

FAKE_NETWORKCTL = textwrap.dedent("""\
    #!{python}
    import glob, json, os, sys
    state = os.environ["FAKE_NODE"]
    open(state + ".log", "a").write("networkctl " + " ".join(sys.argv[1:]) + "\\n")
    if sys.argv[1] == "reconfigure":
        links = json.load(open(state))
        for name in sys.argv[2:]:
            wanted = []
            for path in glob.glob(os.path.join(os.environ["FAKE_NETWORKD"], "*.network")):
                text = open(path).read()
                if "Name=%s\\n" % name in text:
                    wanted += [l.split("=", 1)[1] for l in text.splitlines() if l.startswith("Address=")]
            for link in links:
                if link.get("ifname") == name:
                    link["addr_info"] = [{{"family": "inet", "local": w.split("/")[0], "prefixlen": int(w.split("/")[1]),
                                          "scope": "global"}} for w in wanted]
        json.dump(links, open(state, "w"))
    """)


@pytest.fixture
def node(tmp_path, monkeypatch):
    with open(os.path.join(PROJECT_FIXTURES, "rdma_addresses", "ip-j-addr-show.json"), encoding="utf-8") as handle:
        links = json.load(handle)
    # the pair NIC of the test VMs, with soft-RoCE rxe0 on it, no address yet
    links.append({"ifindex": 9, "ifname": "enp0s5", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                  "address": "52:54:00:eb:6f:32", "addr_info": []})
    state = tmp_path / "node.json"
    state.write_text(json.dumps(links))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("ip", FAKE_IP), ("systemctl", FAKE_SYSTEMCTL), ("networkctl", FAKE_NETWORKCTL)):
        (bindir / name).write_text(text.format(python=sys.executable))
        (bindir / name).chmod(0o755)
    sys_root = tmp_path / "sys"
    (sys_root / "class" / "infiniband" / "rxe0").mkdir(parents=True)
    (sys_root / "class" / "infiniband" / "rxe0" / "parent").write_text("enp0s5\n")
    networkd = tmp_path / "etc" / "systemd" / "network"
    monkeypatch.setattr(addr, "NETWORKD_DIR", str(networkd))
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("FAKE_NODE", str(state))
    monkeypatch.setenv("FAKE_NETWORKD", str(networkd))
    monkeypatch.setenv("FAKE_ROUTE_DEV", "eth0")
    monkeypatch.setenv("FAKE_ACTIVE", "systemd-networkd.service")

    class Node:
        root = str(sys_root)
        directory = networkd

        @staticmethod
        def log():
            path = str(state) + ".log"
            return open(path).read().splitlines() if os.path.exists(path) else []

        @staticmethod
        def addresses(name):
            return [a["local"] for link in json.loads(state.read_text()) if link.get("ifname") == name
                    for a in link.get("addr_info", []) if a.get("scope") == "global"]

    return Node


def args(node, **extra):
    base = {"addresses": {"rxe0": ["10.99.0.1/24"]}, "sys_root": node.root, "ssh_connection": SSH}
    base.update(extra)
    return base


def test_plan_adds_the_address_and_writes_nothing(node, run_module):
    result = run_module(module, args(node), check_mode=True)
    path = str(node.directory / "05-gpudirect-rdma-enp0s5.network")
    assert result["changed"] is False
    assert result["backend"] == "networkd"
    assert result["changes"] == ["enp0s5: add 10.99.0.1/24", "write %s (networkd)" % path]
    assert result["disruption"] == []
    assert result["interfaces"]["enp0s5"]["named"] == "rxe0"
    assert result["guarded_interface"] == "eth0"
    assert not node.directory.exists()
    assert not [line for line in node.log() if line.startswith("networkctl")]


def test_check_mode_of_applied_reports_the_change_and_writes_nothing(node, run_module):
    result = run_module(module, args(node, state="applied"), check_mode=True)
    assert result["changed"] is True
    assert not node.directory.exists()
    assert node.addresses("enp0s5") == []


def test_applied_writes_reloads_reconfigures_and_a_second_run_changes_nothing(node, run_module):
    result = run_module(module, args(node, state="applied", wait=2))
    assert result["changed"] is True
    text = (node.directory / "05-gpudirect-rdma-enp0s5.network").read_text()
    assert "Name=enp0s5\n" in text and "Address=10.99.0.1/24\n" in text
    assert [line for line in node.log() if line.startswith("networkctl")] == [
        "networkctl reload", "networkctl reconfigure enp0s5"]
    assert node.addresses("enp0s5") == ["10.99.0.1"]
    again = run_module(module, args(node, state="applied"))
    assert again["changed"] is False and again["changes"] == [] and again["disruption"] == []


def test_a_replaced_address_is_a_disruption_and_the_old_one_goes(node, run_module):
    run_module(module, args(node, state="applied", wait=2))
    result = run_module(module, args(node, addresses={"enp0s5": ["10.99.0.7/24"]}), check_mode=True)
    assert result["disruption"] == ["enp0s5: replace 10.99.0.1/24, which RDMA connections on it use (by 10.99.0.7/24)"]
    result = run_module(module, args(node, addresses={"enp0s5": ["10.99.0.7/24"]}, state="applied", wait=2))
    assert result["changed"] is True
    assert node.addresses("enp0s5") == ["10.99.0.7"]


def test_guard_refuses_the_interface_of_the_controllers_connection_before_any_change(node, run_module, monkeypatch):
    monkeypatch.setenv("FAKE_ROUTE_DEV", "enp0s5")
    result = run_module(module, args(node, state="applied", addresses_knob="gpudirect_rdma_addresses_pattern"))
    assert result["failed"] is True
    assert result["msg"].startswith("gpudirect_rdma_addresses_pattern names enp0s5 (as rxe0), the interface that "
                                    "carries the controller's connection")
    assert not node.directory.exists()


def test_an_interface_the_node_lacks_fails_naming_it(node, run_module):
    result = run_module(module, args(node, addresses={"mlx5_3": ["10.99.0.1/24"]}))
    assert result["failed"] is True
    assert "interface mlx5_3 does not exist on this node" in result["msg"]
    assert "RDMA devices: rxe0" in result["msg"]


def test_no_network_service_found_fails_naming_the_knob(node, run_module, monkeypatch):
    monkeypatch.setenv("FAKE_ACTIVE", "")
    result = run_module(module, args(node))
    assert result["failed"] is True
    assert result["msg"].endswith("set gpudirect_rdma_addresses_backend to the one this node uses")
    # the knob overrides the detection
    assert run_module(module, args(node, backend="networkd"), check_mode=True)["backend"] == "networkd"


def test_networkmanager_gets_its_connections_for_nmcli_and_the_module_changes_nothing(node, run_module, monkeypatch):
    monkeypatch.setenv("FAKE_ACTIVE", "NetworkManager.service systemd-networkd.service")
    result = run_module(module, args(node, state="applied"))
    assert result["backend"] == "networkmanager"
    assert result["changed"] is False
    assert result["nmcli"] == [{"conn_name": "gpudirect-rdma-enp0s5", "ifname": "enp0s5", "ip4": ["10.99.0.1/24"],
                                "ip6": []}]
    assert not node.directory.exists()


def test_empty_input_reads_nothing(node, run_module):
    result = run_module(module, args(node, addresses={}))
    assert result["changed"] is False and result["changes"] == [] and result["backend"] is None
    assert node.log() == []
