"""RoCE QoS (issue #32, outcome 2): the mlnx_qos parser on the real outputs of
tests/fixtures/roce_qos/ (sources in its README.md), and library/gpudirect_roce_qos.py on a fake
/sys tree against the stand-in mlnx_qos (tests/harness/standin_repo/src/ofed/qos/mlnx_qos), whose
output the parser must read the same way as the real captures.
"""

import os
import subprocess
import sys

import pytest

import gpudirect_roce_qos as module
from ansible.module_utils import gpudirect_roce_qos as qos
from conftest import PROJECT_FIXTURES, ROOT

FIXTURES = os.path.join(PROJECT_FIXTURES, "roce_qos")
STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "ofed", "qos", "mlnx_qos")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ------------------------------------------------------------------ parser, real outputs

def nic_fixture(name):
    with open(os.path.join(PROJECT_FIXTURES, "nic_config", name), newline="") as handle:
        return handle.read()


def test_parses_dscp_trust_and_pfc_priority_3_of_a_connectx_capture():
    parsed = qos.parse_mlnx_qos(nic_fixture("mlnx_qos-dscp-pfc3-netarbiter.txt"))
    assert parsed["trust"] == "dscp"
    assert parsed["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert qos.priorities_of(parsed["pfc"]) == [3]
    assert parsed["dcbx"] == "OS controlled" and parsed["cable_len"] == 7 and parsed["errors"] == []


def test_parses_pcp_trust_with_buffers_and_crlf():
    parsed = qos.parse_mlnx_qos(nic_fixture("mlnx_qos-pcp-pfc3.txt"))
    assert (parsed["trust"], qos.priorities_of(parsed["pfc"]), parsed["errors"]) == ("pcp", [3], [])


def test_parses_the_mlnx_ofed_4_2_layout_without_indent():
    parsed = qos.parse_mlnx_qos(fixture("mlnx_qos_dscp_mlnx_ofed_4_2.txt"))
    assert parsed["trust"] == "dscp"
    assert qos.priorities_of(parsed["pfc"]) == [0, 2, 6, 7]
    assert parsed["cable_len"] == 10 and parsed["errors"] == []


def test_truncated_output_is_not_read():
    parsed = qos.parse_mlnx_qos(fixture("mlnx_qos_truncated.txt"))
    assert parsed["trust"] is None and parsed["pfc"] is None
    assert parsed["errors"] == ["could not read mlnx_qos output (no PFC configuration table (priority/enabled rows): "
                                "the output looks truncated)"]


def test_a_pfc_row_of_seven_values_is_not_read():
    parsed = qos.parse_mlnx_qos(fixture("mlnx_qos_pfc_row_short.txt"))
    assert parsed["pfc"] is None and parsed["trust"] is None
    assert parsed["errors"] == ["could not read mlnx_qos output (line 15: PFC enabled has 7 entries, not 8)"]


def test_trust_none_and_no_ets_are_reported_with_the_tools_words():
    parsed = qos.parse_mlnx_qos(fixture("mlnx_qos_trust_unsupported.composed.txt"))
    assert parsed["trust"] is None and parsed["pfc"] == [0] * 8
    assert parsed["errors"] == ["mlnx_qos reads the trust state as none: Priority trust state is not supported on "
                                "your system"]
    parsed = qos.parse_mlnx_qos(fixture("mlnx_qos_ets_unsupported.composed.txt"))
    assert parsed["trust"] is None and parsed["pfc"] is None
    assert parsed["errors"] == ["Priority trust state is not supported on your system; Buffers commands are not "
                                "supported on your system; ETS features are not supported on your system"]


def test_garbage_is_not_read_as_values():
    parsed = qos.parse_mlnx_qos("Traceback (most recent call last):\n  File \"/usr/bin/mlnx_qos\"\nOSError: x\n")
    assert parsed["trust"] is None and parsed["pfc"] is None
    assert parsed["errors"][0].startswith("could not read mlnx_qos output (line 1: could not read 'Traceback")
    with pytest.raises(TypeError):
        qos.parse_mlnx_qos(None)


@pytest.mark.parametrize("wanted, message", [
    ({"trust": "vlan"}, "trust must be pcp or dscp"),
    ({"pfc_priorities": [3, 8]}, "pfc_priorities must be a list of distinct priorities 0-7"),
    ({"ecn_priorities": [3, 3]}, "ecn_priorities must be a list of distinct priorities 0-7"),
    ({"cnp_dscp": 64}, "cnp_dscp must be a number 0-63"),
    ({"cnp_802p_prio": True}, "cnp_802p_prio must be a number 0-7"),
    ({"mtu": 10000}, "mtu must be a number 68-9978"),
])
def test_bad_wanted_values_are_named(wanted, message):
    errors = qos.validate_wanted(wanted)
    assert len(errors) == 1 and errors[0].startswith(message)


def test_good_wanted_values_pass():
    assert qos.validate_wanted({"trust": "dscp", "pfc_priorities": [], "ecn_priorities": [3], "cnp_dscp": 48,
                                "cnp_802p_prio": 6, "mtu": 9000}) == []
    assert qos.pfc_arg([3]) == "0,0,0,1,0,0,0,0"


# ------------------------------------------------------------------ fake host

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@pytest.fixture
def host(tmp_path, monkeypatch):
    """mlx5_0 (RoCE, netdev ens1f0np0 with the mlx5 ECN files), mlx5_1 (InfiniBand, ib0), rxe0 (soft-RoCE on
    eth0: no ECN folder, netdev from its parent file). PATH: the stand-in mlnx_qos and a fake ip."""
    root = tmp_path / "root"
    ib = str(root / "sys/class/infiniband")
    net = str(root / "sys/class/net")
    write(ib + "/mlx5_0/ports/1/link_layer", "Ethernet\n")
    write(ib + "/mlx5_0/ports/1/gid_attrs/ndevs/0", "ens1f0np0\n")
    write(ib + "/mlx5_1/ports/1/link_layer", "InfiniBand\n")
    os.makedirs(ib + "/mlx5_1/device/net/ib0")
    write(ib + "/rxe0/ports/1/link_layer", "Ethernet\n")
    write(ib + "/rxe0/parent", "eth0\n")
    for netdev in ("ens1f0np0", "eth0", "ib0"):
        write(net + "/%s/mtu" % netdev, "1500\n")
    for point in ("roce_np", "roce_rp"):
        for prio in range(8):
            write(net + "/ens1f0np0/ecn/%s/enable/%d" % (point, prio), "0\n")
    write(net + "/ens1f0np0/ecn/roce_np/cnp_dscp", "0\n")
    write(net + "/ens1f0np0/ecn/roce_np/cnp_802p_prio", "0\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(STANDIN, str(bindir / "mlnx_qos"))
    os.symlink(sys.executable, str(bindir / "python3"))
    (bindir / "ip").write_text("#!/bin/sh\n# ip link set dev NAME mtu N\necho \"$6\" > \"%s/$4/mtu\"\n" % net)
    (bindir / "ip").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir) + ":/usr/bin:/bin")
    monkeypatch.setenv("STANDIN_MLNX_QOS_STATE", str(tmp_path / "run"))
    monkeypatch.setenv("STANDIN_MLNX_QOS_SYSROOT", str(root))
    # soft-RoCE's parent is a virtio netdev: no DCB, as the real tool finds it
    subprocess.run([sys.executable, STANDIN, "-i", "eth0", "--standin-nodcb"], check=True)
    return root


WANT = {"trust": "dscp", "pfc_priorities": [3], "ecn_priorities": [3], "cnp_dscp": 48, "cnp_802p_prio": 6,
        "mtu": 9000}


def test_standin_prints_what_the_parser_reads_like_the_captures(host):
    out = subprocess.run([sys.executable, STANDIN, "-i", "ens1f0np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0"],
                         check=True, capture_output=True, text=True).stdout
    parsed = qos.parse_mlnx_qos(out)
    assert (parsed["trust"], qos.priorities_of(parsed["pfc"]), parsed["errors"]) == ("dscp", [3], [])
    real = nic_fixture("mlnx_qos-dscp-pfc3-netarbiter.txt")
    # the same dscp2prio and PFC lines as the capture (which indents with spaces where the tool prints tabs)
    for line in ("Priority trust state: dscp", "prio:3 dscp:31,30,29,28,27,26,25,24,",
                 "priority    0   1   2   3   4   5   6   7", "enabled     0   0   0   1   0   0   0   0"):
        assert line in out and line in real
    bad = subprocess.run([sys.executable, STANDIN, "-i", "ens1f0np0", "--pfc", "0,0,1"], capture_output=True,
                         text=True)
    assert (bad.returncode, bad.stdout) == (1, "pfc list must have 8 items\n")


def test_nothing_wanted_reads_nothing(host, run_module):
    result = run_module(module, {"root": str(host)})
    assert result["wanted"] is False and result["ports"] == [] and result["changes"] == []
    assert result["skip_reason"] == "no RoCE QoS value is wanted: no port read, nothing changed"


def test_plan_apply_and_plan_again(host, run_module):
    planned = run_module(module, dict(WANT, root=str(host)), check_mode=True)
    assert planned["changed"] is False
    assert [p["netdev"] for p in planned["ports"]] == ["ens1f0np0", "eth0"]
    mlx = planned["ports"][0]
    assert mlx["current"] == {"trust": "pcp", "pfc": [], "mtu": 1500, "ecn_np": [], "ecn_rp": [], "cnp_dscp": 0,
                              "cnp_802p_prio": 0}
    assert planned["changes"][0] == ("ens1f0np0 (mlx5_0 port 1): set cnp_802p_prio 6, cnp_dscp 48, ECN notification "
                                     "point on priorities 3, ECN reaction point on priorities 3, mtu 9000, PFC on "
                                     "priorities 3, trust dscp")
    assert planned["disruption"][0] == ("ens1f0np0 (mlx5_0 port 1): mtu 9000, PFC on priorities 3, trust dscp changes "
                                        "while the port may carry traffic")
    # soft-RoCE: the MTU is real, the rest is not exposed and left alone
    rxe = planned["ports"][1]
    assert rxe["netdev_from"] == "parent" and rxe["to_set"] == {"mtu": 9000}
    assert sorted(rxe["not_exposed"]) == ["cnp_802p_prio", "cnp_dscp", "ecn_np", "ecn_rp", "pfc", "trust"]
    assert "eth0: trust: mlnx_qos -i eth0 failed (rc 1): ETS features are not supported on your system" \
        in planned["not_exposed"]
    ib = [s for s in planned["ports_skipped"] if s["device"] == "mlx5_1"][0]
    assert ib["netdev"] == "ib0" and ib["reason"].startswith("InfiniBand link layer: RoCE QoS")
    assert not os.path.exists(os.environ["STANDIN_MLNX_QOS_STATE"] + "/ens1f0np0.json")   # check mode wrote nothing

    applied = run_module(module, dict(WANT, root=str(host), state="applied"))
    assert applied["changed"] is True
    assert applied["ports"][0]["current"] == {"trust": "dscp", "pfc": [3], "mtu": 9000, "ecn_np": [3],
                                              "ecn_rp": [3], "cnp_dscp": 48, "cnp_802p_prio": 6}
    assert (host / "sys/class/net/eth0/mtu").read_text().strip() == "9000"
    assert (host / "sys/class/net/ens1f0np0/ecn/roce_rp/enable/3").read_text().strip() == "1"

    again = run_module(module, dict(WANT, root=str(host), state="applied"))
    assert again["changed"] is False and again["changes"] == [] and again["disruption"] == []


def test_a_boot_loses_trust_and_pfc_and_the_plan_sees_it(host, run_module, tmp_path):
    run_module(module, dict(WANT, root=str(host), state="applied"))
    for name in os.listdir(str(tmp_path / "run")):          # /run emptied by the reboot
        if name.endswith(".json"):
            os.remove(str(tmp_path / "run" / name))
    planned = run_module(module, dict(WANT, root=str(host)), check_mode=True)
    assert planned["ports"][0]["to_set"] == {"trust": "dscp", "pfc": [3]}


def test_interfaces_limits_the_ports(host, run_module):
    result = run_module(module, {"root": str(host), "mtu": 9000, "interfaces": ["mlx5_0"]}, check_mode=True)
    assert [p["netdev"] for p in result["ports"]] == ["ens1f0np0"]
    assert {s["device"]: s["reason"] for s in result["ports_skipped"]}["rxe0"] == "not named in interfaces"


def test_a_named_port_that_does_not_expose_a_value_fails_before_any_change(host, run_module):
    result = run_module(module, dict(WANT, root=str(host), state="applied", interfaces=["eth0"]))
    assert result["failed"] is True
    assert "the ports named in interfaces do not expose what is wanted: eth0: cnp_802p_prio" in result["msg"]
    assert (host / "sys/class/net/eth0/mtu").read_text().strip() == "1500"
    unknown = run_module(module, {"root": str(host), "mtu": 9000, "interfaces": ["ens9"], "state": "applied"})
    assert "ens9: port: no RDMA port of that netdev or device name on the host" in unknown["msg"]


def test_without_the_tool_trust_and_pfc_are_reported_not_failed(host, run_module, monkeypatch, tmp_path):
    os.remove(str(tmp_path / "bin" / "mlnx_qos"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    result = run_module(module, {"root": str(host), "trust": "dscp", "mtu": 1500, "state": "applied"})
    assert result["changed"] is False and result["changes"] == []
    assert result["tool_missing"].startswith("mlnx_qos is not installed (package mlnx-tools")
    assert "ens1f0np0: trust: mlnx_qos is not installed" in result["not_exposed"][0]


def test_bad_values_fail_before_reading(host, run_module):
    result = run_module(module, {"root": str(host), "pfc_priorities": [9]})
    assert result["failed"] is True
    assert result["msg"].startswith("gpudirect_roce_qos: pfc_priorities must be a list of distinct priorities 0-7")
