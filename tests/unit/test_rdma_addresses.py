"""The gpudirect_rdma_addresses role's decisions (module_utils/gpudirect_rdma_addresses.py and its
filters): the map and the pattern, duplicates across hosts, the interfaces named by netdev, RDMA
device or MAC, the connection guard, the backend detection, the plan and the files.

``ip -j addr show`` text is real (tests/fixtures/rdma_addresses/, README.md there says where it was
captured); the sysfs trees are built in tmp_path the way the kernel lays them out
(/sys/class/infiniband/rxe0/parent, /sys/class/infiniband/mlx5_0/device/net/<netdev>).
"""
import os

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_rdma_addresses as a

from conftest import PROJECT_FIXTURES, ROOT

import importlib.util

_SPEC = importlib.util.spec_from_file_location(
    "gpudirect_rdma_addresses_filters", os.path.join(ROOT, "filter_plugins", "gpudirect_rdma_addresses_filters.py"))
FILTERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(FILTERS)

with open(os.path.join(PROJECT_FIXTURES, "rdma_addresses", "ip-j-addr-show.json"), encoding="utf-8") as _handle:
    IP_J_ADDR = _handle.read()

MAC_A = "52:54:00:3a:91:0c"


# --- map and pattern ----------------------------------------------------------------

def test_map_accepts_one_address_or_a_list_and_writes_them_canonically():
    assert a.normalize_map({"mlx5_0": "10.10.0.7/24", "ens1f1": ["10.11.0.7/24", "fd00:0::7/64"]}, "k") == {
        "mlx5_0": ["10.10.0.7/24"], "ens1f1": ["10.11.0.7/24", "fd00::7/64"]}


def test_map_lowercases_a_mac_and_keeps_other_names():
    assert a.normalize_map({"52:54:00:3A:91:0C": "10.0.0.1/24", "MLX5_0": "10.0.1.1/24"}, "k") == {
        MAC_A: ["10.0.0.1/24"], "MLX5_0": ["10.0.1.1/24"]}


@pytest.mark.parametrize("value, why", [
    ("10.0.0.1", "no prefix length"),
    ("10.0.0.300/24", "10.0.0.300"),
    ("10.0.0.1/33", "10.0.0.1/33"),
    ("10.0.0.0/24", "network address"),
    ("10.0.0.255/24", "broadcast address"),
    ("mlx5_0", "no prefix length"),
])
def test_map_rejects_what_is_no_host_address_naming_knob_interface_and_value(value, why):
    with pytest.raises(a.AddressError) as error:
        a.normalize_map({"mlx5_0": value}, "gpudirect_rdma_addresses_map")
    message = str(error.value)
    assert message.startswith("gpudirect_rdma_addresses_map[mlx5_0]: %r is not a valid address/prefix" % value)
    assert why in message


def test_map_that_is_no_mapping_is_refused():
    with pytest.raises(a.AddressError, match="gpudirect_rdma_addresses_map must be a mapping"):
        a.normalize_map(["10.0.0.1/24"], "gpudirect_rdma_addresses_map")
    with pytest.raises(a.AddressError, match=r"\[mlx5_0\]: no address"):
        a.normalize_map({"mlx5_0": []}, "gpudirect_rdma_addresses_map")


def test_a_31_and_32_prefix_take_every_address():
    assert a.normalize_map({"x": "10.0.0.0/31", "y": "10.0.0.5/32"}, "k") == {"x": ["10.0.0.0/31"], "y": ["10.0.0.5/32"]}


def test_pattern_gives_each_host_the_network_plus_offset_plus_index():
    pattern = {"mlx5_0": "10.10.0.0/24", "mlx5_1": "10.11.0.0/16"}
    assert a.expand_pattern(pattern, 0, 1) == {"mlx5_0": ["10.10.0.1/24"], "mlx5_1": ["10.11.0.1/16"]}
    assert a.expand_pattern({"mlx5_1": "10.11.0.0/16"}, 299, 1) == {"mlx5_1": ["10.11.1.44/16"]}
    assert a.expand_pattern({"e": "fd00::/64"}, 6, 10) == {"e": ["fd00::10/64"]}


@pytest.mark.parametrize("pattern, index, offset, match", [
    ({"mlx5_0": "10.10.0.0/24"}, 254, 1, r"host number 255 \(offset 1 \+ index 254\) is outside 10.10.0.0/24 \(1..254\)"),
    ({"mlx5_0": "10.10.0.0/24"}, 0, 0, r"host number 0 .* is outside"),
    ({"mlx5_0": "10.10.0.1/24"}, 0, 1, r"\[mlx5_0\]: '10.10.0.1/24' is not a network in CIDR form"),
    ({"mlx5_0": "10.10.0.0"}, 0, 1, None),
    ({"mlx5_0": "10.10.0.0/24"}, -1, 1, "must not be negative"),
    ({"mlx5_0": "10.10.0.0/24"}, "x", 1, "must be integers"),
    (["10.10.0.0/24"], 0, 1, "must be a mapping of interface to network"),
])
def test_pattern_refuses_bad_networks_and_hosts_outside_them(pattern, index, offset, match):
    if match is None:
        # a bare address is a /32 network: host 1 is outside it
        match = r"is outside 10.10.0.0/32"
    with pytest.raises(a.AddressError, match=match) as error:
        a.expand_pattern(pattern, index, offset)
    assert str(error.value).startswith("gpudirect_rdma_addresses_pattern")


def test_map_entry_replaces_the_pattern_entry_of_the_same_interface():
    wanted = a.wanted({"mlx5_1": "192.168.7.7/24"}, {"mlx5_0": "10.10.0.0/24", "mlx5_1": "10.11.0.0/24"}, 4, 1)
    assert wanted == {"mlx5_0": ["10.10.0.5/24"], "mlx5_1": ["192.168.7.7/24"]}


def test_empty_input_wants_nothing():
    assert a.wanted({}, {}, 0, 1) == {}
    assert a.wanted(None, None, 0, 1) == {}


def test_duplicates_across_hosts_and_within_a_host_name_both_places():
    by_host = {
        "gpu-02": {"mlx5_0": ["10.10.0.1/24"]},
        "gpu-01": {"mlx5_0": ["10.10.0.1/16"], "mlx5_1": ["10.11.0.1/24"]},
        "gpu-03": {"mlx5_0": ["10.10.0.3/24"], "mlx5_1": ["10.10.0.3/24"]},
    }
    assert a.duplicates(by_host) == [
        "10.10.0.1 is wanted on gpu-01 mlx5_0 and on gpu-02 mlx5_0",
        "10.10.0.3 is wanted on gpu-03 mlx5_0 and on gpu-03 mlx5_1",
    ]
    assert a.duplicates({"gpu-01": {"mlx5_0": ["10.10.0.1/24"]}, "gpu-02": {"mlx5_0": ["10.10.0.2/24"]}}) == []


def test_filters_wrap_the_module_utils_and_fail_as_ansible_filter_errors():
    assert FILTERS.gpudirect_rdma_addresses_wanted({}, {"rxe0": "10.99.0.0/24"}, 2, 1) == {"rxe0": ["10.99.0.3/24"]}
    with pytest.raises(AnsibleFilterError, match="^gpudirect_rdma_addresses: gpudirect_rdma_addresses_map"):
        FILTERS.gpudirect_rdma_addresses_wanted({"rxe0": "10.99.0.1"}, {}, 0, 1)
    assert FILTERS.gpudirect_rdma_addresses_duplicates({"a": {"x": ["10.0.0.1/24"]}, "b": {"y": ["10.0.0.1/24"]}}) == [
        "10.0.0.1 is wanted on a x and on b y"]
    with pytest.raises(AnsibleFilterError, match="expects"):
        FILTERS.gpudirect_rdma_addresses_duplicates(["a"])


# --- node state ---------------------------------------------------------------------

def test_ip_j_addr_show_keeps_global_addresses_per_link():
    links = a.parse_ip_addr_json(IP_J_ADDR)
    assert sorted(links) == ["cni-podman0", "eth0", "ifb0", "ifb1", "lo"]
    assert links["eth0"] == {"mac": "02:fc:00:00:00:01", "addresses": ["192.0.2.2/24", "fd00::2/64"], "up": True}
    assert links["cni-podman0"]["addresses"] == ["10.88.0.1/16"]
    assert links["lo"]["addresses"] == []  # scope host
    assert links["ifb0"] == {"mac": "fa:c9:c3:5b:56:f3", "addresses": [], "up": False}


@pytest.mark.parametrize("text, match", [
    ("", "printed no JSON"),
    ("1: lo: <LOOPBACK,UP> mtu 65536", "printed no JSON"),
    ('{"ifname": "lo"}', "not a list of links"),
])
def test_ip_output_that_is_no_json_list_is_refused(text, match):
    with pytest.raises(a.AddressError, match=match):
        a.parse_ip_addr_json(text)


def test_a_vanished_link_printed_as_empty_object_is_skipped():
    assert a.parse_ip_addr_json('[{}, {"ifname": "x", "addr_info": []}]') == {
        "x": {"mac": "", "addresses": [], "up": False}}


def sysfs(tmp_path):
    root = tmp_path / "sys"
    rxe = root / "class" / "infiniband" / "rxe0"
    rxe.mkdir(parents=True)
    (rxe / "parent").write_text("enp0s5\n")
    mlx = root / "class" / "infiniband" / "mlx5_0" / "device" / "net" / "eth0"
    mlx.mkdir(parents=True)
    gid = root / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "gid_attrs" / "ndevs"
    gid.mkdir(parents=True)
    (gid / "0").write_text("cni-podman0\n")
    return str(root)


LINKS = {
    "eth0": {"mac": "02:fc:00:00:00:01", "addresses": ["192.0.2.2/24"], "up": True},
    "enp0s5": {"mac": MAC_A, "addresses": [], "up": True},
    "cni-podman0": {"mac": "f6:76:6e:57:f1:11", "addresses": ["10.88.0.1/16"], "up": True},
}


def test_rdma_device_resolves_through_parent_device_net_and_the_gid_table(tmp_path):
    root = sysfs(tmp_path)
    assert a.rdma_netdev(root, "rxe0") == "enp0s5"
    assert a.rdma_netdev(root, "mlx5_0") == "eth0"
    assert a.rdma_netdev(root, "mlx5_1") == "cni-podman0"
    assert a.rdma_netdev(root, "mlx5_9") is None


def test_interfaces_resolve_by_netdev_rdma_device_and_mac(tmp_path):
    resolved = a.resolve({"rxe0": ["10.99.0.1/24"], "f6:76:6e:57:f1:11": ["10.88.0.1/16"], "eth0": ["10.0.0.2/24"]},
                         LINKS, sysfs(tmp_path))
    assert resolved == {
        "enp0s5": {"addresses": ["10.99.0.1/24"], "named": "rxe0", "mac": MAC_A},
        "cni-podman0": {"addresses": ["10.88.0.1/16"], "named": "f6:76:6e:57:f1:11", "mac": "f6:76:6e:57:f1:11"},
        "eth0": {"addresses": ["10.0.0.2/24"], "named": "eth0", "mac": "02:fc:00:00:00:01"},
    }


def test_an_interface_that_does_not_exist_is_named_with_what_exists(tmp_path):
    root = sysfs(tmp_path)
    with pytest.raises(a.AddressError) as error:
        a.resolve({"mlx5_7": ["10.0.0.1/24"]}, LINKS, root, "gpudirect_rdma_addresses_map")
    assert str(error.value) == (
        "gpudirect_rdma_addresses_map: interface mlx5_7 does not exist on this node (netdevs: cni-podman0, enp0s5, "
        "eth0; RDMA devices: mlx5_0, mlx5_1, rxe0)")
    with pytest.raises(a.AddressError, match="interface 52:54:00:00:00:99 does not exist"):
        a.resolve({"52:54:00:00:00:99": ["10.0.0.1/24"]}, LINKS, root)


def test_two_names_of_one_interface_and_a_shared_mac_are_refused(tmp_path):
    root = sysfs(tmp_path)
    with pytest.raises(a.AddressError, match="enp0s5 and rxe0 name the same interface enp0s5; give its addresses once"):
        a.resolve({"rxe0": ["10.99.0.1/24"], "enp0s5": ["10.99.0.2/24"]}, LINKS, root)
    bond = dict(LINKS, bond0={"mac": MAC_A, "addresses": [], "up": True})
    with pytest.raises(a.AddressError, match="MAC %s is the address of bond0, enp0s5; name the interface" % MAC_A):
        a.resolve({MAC_A: ["10.99.0.1/24"]}, bond, root)


def test_guard_refuses_the_controllers_interface_naming_it_and_the_knob(tmp_path):
    resolved = a.resolve({"mlx5_0": ["10.0.0.2/24"], "rxe0": ["10.99.0.1/24"]}, LINKS, sysfs(tmp_path))
    refusal = a.guard(resolved, "eth0", "gpudirect_rdma_addresses_map")
    assert refusal.startswith("gpudirect_rdma_addresses_map names eth0 (as mlx5_0), the interface that carries the "
                              "controller's connection")
    assert "Remove it from gpudirect_rdma_addresses_map" in refusal
    assert a.guard(resolved, "lo", "k") == ""
    assert a.guard(resolved, None, "k") == ""


@pytest.mark.parametrize("probe, backend", [
    # Ubuntu server: netplan renders for networkd, which runs too
    ({"netplan": True, "networkmanager": False, "ifupdown": False, "networkd": True}, "netplan"),
    # Ubuntu desktop / EL: NetworkManager
    ({"netplan": False, "networkmanager": True, "ifupdown": False, "networkd": False}, "networkmanager"),
    # Debian with ifupdown (networkd may be installed and idle)
    ({"netplan": False, "networkmanager": False, "ifupdown": True, "networkd": False}, "ifupdown"),
    # the VM image of the tests: networkd alone
    ({"netplan": False, "networkmanager": False, "ifupdown": False, "networkd": True}, "networkd"),
    ({"netplan": False, "networkmanager": False, "ifupdown": False, "networkd": False}, None),
])
def test_backend_detection_order(probe, backend):
    assert a.detect_backend(probe) == backend


# --- plan and files -------------------------------------------------------------------

def resolved_one(addresses, netdev="enp0s5"):
    return {netdev: {"addresses": addresses, "named": "rxe0", "mac": MAC_A}}


def test_adding_an_address_is_a_change_and_no_disruption():
    planned = a.plan(resolved_one(["10.99.0.1/24"]), LINKS, "networkd", {})
    path = "/etc/systemd/network/05-gpudirect-rdma-enp0s5.network"
    assert planned == {"changes": ["enp0s5: add 10.99.0.1/24", "write %s (networkd)" % path], "disruption": [],
                       "interfaces": {"enp0s5": {"add": ["10.99.0.1/24"], "remove": [], "keep": []}},
                       "files": [path]}


def test_replacing_or_removing_an_address_an_interface_has_is_a_disruption():
    planned = a.plan({"cni-podman0": {"addresses": ["10.88.0.2/16"], "named": "x", "mac": ""}}, LINKS, "networkd", {})
    assert planned["disruption"] == ["cni-podman0: replace 10.88.0.1/16, which RDMA connections on it use "
                                     "(by 10.88.0.2/16)"]
    links = dict(LINKS, enp0s5={"mac": MAC_A, "addresses": ["10.99.0.1/24", "10.98.0.1/24"], "up": True})
    planned = a.plan(resolved_one(["10.99.0.1/24"]), links, "networkd", {})
    assert planned["disruption"] == ["enp0s5: remove 10.98.0.1/24, which RDMA connections on it use"]
    # a new prefix on the same address is a replacement too
    links = dict(LINKS, enp0s5={"mac": MAC_A, "addresses": ["10.99.0.1/16"], "up": True})
    assert a.plan(resolved_one(["10.99.0.1/24"]), links, "networkd", {})["interfaces"]["enp0s5"]["remove"] == [
        "10.99.0.1/16"]


def test_in_place_and_persisted_is_no_change():
    links = dict(LINKS, enp0s5={"mac": MAC_A, "addresses": ["10.99.0.1/24"], "up": True})
    files = a.files_for("networkd", resolved_one(["10.99.0.1/24"]))
    planned = a.plan(resolved_one(["10.99.0.1/24"]), links, "networkd", files)
    assert planned["changes"] == [] and planned["disruption"] == [] and planned["files"] == []


def test_address_in_place_but_not_persisted_is_a_change_to_write_the_file():
    links = dict(LINKS, enp0s5={"mac": MAC_A, "addresses": ["10.99.0.1/24"], "up": True})
    planned = a.plan(resolved_one(["10.99.0.1/24"]), links, "ifupdown", {"/etc/network/interfaces.d/gpudirect-rdma-enp0s5":
                                                                          "auto enp0s5\n"})
    assert planned["changes"] == ["write /etc/network/interfaces.d/gpudirect-rdma-enp0s5 (ifupdown)"]
    assert planned["disruption"] == []


def test_networkmanager_writes_no_file():
    assert a.files_for("networkmanager", resolved_one(["10.99.0.1/24"])) == {}
    assert a.plan(resolved_one(["10.99.0.1/24"]), LINKS, "networkmanager", {})["changes"] == ["enp0s5: add 10.99.0.1/24"]


def test_networkd_file_matches_the_interface_by_name_with_every_address():
    text = a.render_networkd("enp0s5", ["10.99.0.1/24", "fd00::1/64"])
    assert text.splitlines()[1:] == ["[Match]", "Name=enp0s5", "", "[Network]", "Address=10.99.0.1/24",
                                     "Address=fd00::1/64", "LinkLocalAddressing=no", "IPv6AcceptRA=no"]
    # before the distribution's and the test image's own files (20-dhcp.network)
    assert os.path.basename(a.networkd_path("enp0s5")) < "10-pairnet.network"


def test_netplan_file_is_yaml_netplan_reads():
    import yaml
    text = a.render_netplan({"ens1f0np0": {"addresses": ["10.10.0.7/24"]}, "ens1f1np1": {"addresses": ["10.11.0.7/24",
                                                                                                    "fd00::7/64"]}})
    assert yaml.safe_load(text) == {"network": {"version": 2, "ethernets": {
        "ens1f0np0": {"addresses": ["10.10.0.7/24"]}, "ens1f1np1": {"addresses": ["10.11.0.7/24", "fd00::7/64"]}}}}


def test_ifupdown_stanza_has_the_first_address_static_and_adds_the_others():
    assert a.render_ifupdown("ens1f0np0", ["10.10.0.7/24", "10.10.1.7/24"]).splitlines()[1:] == [
        "auto ens1f0np0", "iface ens1f0np0 inet static", "    address 10.10.0.7/24",
        "    up ip addr add 10.10.1.7/24 dev ens1f0np0"]
    assert "iface x inet6 static" in a.render_ifupdown("x", ["fd00::7/64"])
