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


# ------------------------------------------------------------------ RDMA-CM defaults (issue #44, outcome 4)
# The kernel's rdma_cm configfs below the fake root is tests/unit/rdma_cm_configfs.py's stand-in: mlx5_0 port 1
# starts as MLNX_OFED leaves a ConnectX-3-era port (IB/RoCE v1, ToS 0), soft-RoCE supports RoCE v2 only, the
# InfiniBand port IB/RoCE v1 only (cma.c's defaults for each).

from rdma_cm_configfs import V1, V2, FakeRdmaCm, port as cm_port  # noqa: E402

CM_DEVICES = {"mlx5_0": {1: cm_port(V1, 0)}, "mlx5_1": {1: cm_port(V1, 0, modes=(V1,))},
              "rxe0": {1: cm_port(V2, 0, modes=(V2,))}}


@pytest.fixture
def rdma_cm(host, monkeypatch, tmp_path):
    """The host with rdma_cm's configfs; PATH gains a mount and a modprobe that do to the fake root what the real
    ones do to a host (mount: a configfs line in proc/mounts; modprobe rdma_cm: the module and its directory),
    each call logged in tmp_path/calls."""
    fake = FakeRdmaCm(host, monkeypatch, {d: dict((n, dict(p)) for n, p in ports.items())
                                         for d, ports in CM_DEVICES.items()})
    bindir = tmp_path / "bin"
    calls = tmp_path / "calls"
    (bindir / "mount").write_text(
        "#!/bin/sh\necho \"mount $*\" >> %s\n[ -n \"$FAKE_MOUNT_FAILS\" ] && { echo 'mount: permission denied' >&2; "
        "exit 32; }\necho 'configfs /sys/kernel/config configfs rw 0 0' >> %s/proc/mounts\n" % (calls, host))
    (bindir / "modprobe").write_text(
        "#!/bin/sh\necho \"modprobe $*\" >> %s\n[ -n \"$FAKE_MODPROBE_FAILS\" ] && { echo \"modprobe: FATAL: Module $1 "
        "not found in directory /lib/modules/6.1.0-28-amd64\" >&2; exit 1; }\nmkdir -p %s/sys/module/rdma_cm\n"
        "[ -n \"$FAKE_NO_CONFIGFS_OPTION\" ] || mkdir -p %s/sys/kernel/config/rdma_cm\n" % (calls, host, host))
    for name in ("mount", "modprobe"):
        (bindir / name).chmod(0o755)
    fake.calls = calls
    return fake


def unload(fake, host, mounted=True):
    """rdma_cm not loaded (and configfs not mounted unless ``mounted``), as a fresh boot without RDMA users."""
    import shutil
    shutil.rmtree(str(host / "sys/kernel/config/rdma_cm"))
    shutil.rmtree(str(host / "sys/module/rdma_cm"))
    fake.mounts(mounted)


def test_rdma_cm_plan_reads_each_roce_port_and_leaves_no_group(host, rdma_cm, run_module):
    planned = run_module(module, {"root": str(host), "dscp": 26}, check_mode=True)
    assert planned["changed"] is False and planned["wanted"] is True
    assert planned["rdma_cm"] == {"wanted": {"rdma_cm_mode": V2, "rdma_cm_tos": 104}, "ready": True, "steps": [],
                                  "done": [], "problem": ""}
    mlx, rxe = planned["ports"]
    assert mlx["current"] == {"rdma_cm_mode": V1, "rdma_cm_tos": 0}
    assert mlx["wanted"] == {"dscp": 26, "rdma_cm_mode": V2, "rdma_cm_tos": 104}
    assert mlx["to_set"] == {"rdma_cm_mode": V2, "rdma_cm_tos": 104}
    assert rxe["to_set"] == {"rdma_cm_tos": 104}                     # soft-RoCE already runs RoCE v2
    assert planned["changes"] == [
        "ens1f0np0 (mlx5_0 port 1): set RDMA-CM default RoCE mode RoCE v2, RDMA-CM default ToS 104 (DSCP 26)",
        "eth0 (rxe0 port 1): set RDMA-CM default ToS 104 (DSCP 26)"]
    assert planned["disruption"] == []                                # new connections only
    # read in a group made for it and removed again; nothing written; the InfiniBand port not touched
    assert rdma_cm.log == [("mkdir", "mlx5_0"), ("rmdir", "mlx5_0"), ("mkdir", "rxe0"), ("rmdir", "rxe0")]
    assert os.listdir(rdma_cm.base) == []


def test_rdma_cm_apply_sets_what_differs_then_nothing(host, rdma_cm, run_module):
    applied = run_module(module, {"root": str(host), "dscp": 26, "state": "applied"})
    assert applied["changed"] is True
    assert [p["current"] for p in applied["ports"]] == [{"rdma_cm_mode": V2, "rdma_cm_tos": 104}] * 2
    writes = [entry for entry in rdma_cm.log if entry[0] == "write"]
    assert writes == [("write", "mlx5_0", 1, "default_roce_mode", V2), ("write", "mlx5_0", 1, "default_roce_tos", "104"),
                      ("write", "rxe0", 1, "default_roce_tos", "104")]
    assert rdma_cm.devices["mlx5_1"][1] == cm_port(V1, 0, modes=(V1,))
    assert os.listdir(rdma_cm.base) == []
    again = run_module(module, {"root": str(host), "dscp": 26, "state": "applied"})
    assert again["changed"] is False and again["changes"] == []
    assert [entry for entry in rdma_cm.log if entry[0] == "write"] == writes


def test_rdma_cm_off_reads_nothing_of_it(host, rdma_cm, run_module):
    result = run_module(module, {"root": str(host), "dscp": 26, "rdma_cm": False, "mtu": 1500}, check_mode=True)
    assert result["rdma_cm"] == {} and rdma_cm.log == [] and result["changes"] == []
    assert run_module(module, {"root": str(host), "dscp": 26, "rdma_cm": False})["wanted"] is False


def test_rdma_cm_not_loaded_is_planned_then_loaded(host, rdma_cm, run_module):
    unload(rdma_cm, host, mounted=False)
    planned = run_module(module, {"root": str(host), "dscp": 26}, check_mode=True)
    assert planned["rdma_cm"]["steps"] == ["mount configfs", "load rdma_cm"]
    assert planned["changes"][0] == (
        "RDMA-CM: mount configfs and load rdma_cm first (configfs is not mounted on /sys/kernel/config and the kernel "
        "module rdma_cm is not loaded (no /sys/kernel/config/rdma_cm); the defaults are read after it)")
    assert planned["ports"][0]["current"] == {} and planned["ports"][0]["to_set"] == {"rdma_cm_mode": V2,
                                                                                      "rdma_cm_tos": 104}
    assert not rdma_cm.calls.exists()                                 # check mode: no mount, no modprobe
    applied = run_module(module, {"root": str(host), "dscp": 26, "state": "applied"})
    assert applied["changed"] is True and applied["rdma_cm"]["done"] == ["mount configfs", "load rdma_cm"]
    assert rdma_cm.calls.read_text().splitlines() == [
        "mount -t configfs configfs %s/sys/kernel/config" % host, "modprobe rdma_cm"]
    # read after the load: soft-RoCE already at RoCE v2, so only its ToS was written
    assert applied["ports"][1]["to_set"] == {"rdma_cm_tos": 104}
    assert rdma_cm.devices["rxe0"][1]["tos"] == 104 and rdma_cm.devices["mlx5_0"][1]["mode"] == V2
    again = run_module(module, {"root": str(host), "dscp": 26, "state": "applied"})
    assert again["changed"] is False and again["rdma_cm"]["steps"] == []


def test_a_kernel_without_rdma_cm_configfs_fails_before_any_change(host, rdma_cm, run_module, monkeypatch):
    import shutil
    shutil.rmtree(str(host / "sys/kernel/config/rdma_cm"))           # loaded, mounted, no directory
    planned = run_module(module, {"root": str(host), "dscp": 26, "mtu": 9000}, check_mode=True)
    assert planned["rdma_cm"]["steps"] == [] and "CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS" in planned["rdma_cm"]["problem"]
    assert any(line.startswith("ens1f0np0: rdma_cm_tos: rdma_cm is loaded and configfs is mounted, but "
                               "/sys/kernel/config/rdma_cm is absent") for line in planned["not_exposed"])
    result = run_module(module, {"root": str(host), "dscp": 26, "mtu": 9000, "state": "applied"})
    assert result["failed"] is True
    assert result["msg"] == (
        "gpudirect_roce_qos: the RDMA-CM defaults cannot be set: rdma_cm is loaded and configfs is mounted, but "
        "/sys/kernel/config/rdma_cm is absent: this kernel was built without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS. "
        "Set rdma_cm: false (the role's gpudirect_roce_qos_rdma_cm) to leave the RDMA-CM defaults alone, or unset dscp "
        "(gpudirect_roce_qos_dscp); nothing was changed.")
    assert (host / "sys/class/net/ens1f0np0/mtu").read_text().strip() == "1500"


def test_rdma_cm_that_will_not_load_fails_naming_the_step_and_the_knob(host, rdma_cm, run_module, monkeypatch):
    unload(rdma_cm, host)
    monkeypatch.setenv("FAKE_MODPROBE_FAILS", "1")
    result = run_module(module, {"root": str(host), "dscp": 26, "mtu": 9000, "state": "applied"})
    assert result["failed"] is True
    assert result["msg"].startswith("gpudirect_roce_qos: load rdma_cm (modprobe rdma_cm) failed (rc 1): modprobe: "
                                    "FATAL: Module rdma_cm not found")
    assert "gpudirect_roce_qos_rdma_cm" in result["msg"] and result["msg"].endswith("Nothing else was changed.")
    assert (host / "sys/class/net/ens1f0np0/mtu").read_text().strip() == "1500"
    # loaded, but the kernel has no rdma_cm configfs: named once modprobe ran
    monkeypatch.delenv("FAKE_MODPROBE_FAILS")
    monkeypatch.setenv("FAKE_NO_CONFIGFS_OPTION", "1")
    result = run_module(module, {"root": str(host), "dscp": 26, "state": "applied"})
    assert "built without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS" in result["msg"]
    assert "gpudirect_roce_qos_rdma_cm" in result["msg"]


def test_a_bad_dscp_fails_before_reading(host, rdma_cm, run_module):
    result = run_module(module, {"root": str(host), "dscp": 64})
    assert result["failed"] is True and rdma_cm.log == []
    assert result["msg"].startswith("gpudirect_roce_qos: dscp must be a number 0-63")


def test_rdma_cm_traffic_outside_the_pfc_priorities_is_warned(host, rdma_cm, run_module):
    # mlnx_qos prints the dscp2prio map under DSCP trust only: before trust is dscp, where traffic lands is unknown
    before = run_module(module, dict(root=str(host), trust="dscp", pfc_priorities=[3], dscp=26), check_mode=True)
    assert before["ports"][0]["rdma_cm_class"] is None
    run_module(module, dict(root=str(host), trust="dscp", pfc_priorities=[3], interfaces=["mlx5_0"], state="applied"))
    lossless = run_module(module, dict(root=str(host), trust="dscp", pfc_priorities=[3], dscp=26), check_mode=True)
    assert lossless["ports"][0]["rdma_cm_class"] == {"dscp": 26, "priority": 3, "pfc": True}
    assert not [w for w in lossless.get("warnings", []) if "lossless" in str(w)]
    lossy = run_module(module, dict(root=str(host), trust="dscp", pfc_priorities=[3], dscp=0), check_mode=True)
    assert lossy["ports"][0]["rdma_cm_class"] == {"dscp": 0, "priority": 0, "pfc": False}
    said = ("ens1f0np0 (mlx5_0 port 1): RDMA-CM traffic at ToS 0 (DSCP 0) maps to priority 0 (mlnx_qos dscp2prio), "
            "which has no PFC: it is not in the lossless class; make gpudirect_roce_qos_dscp a DSCP of a PFC priority")
    assert [w for w in lossy["warnings"] if said in str(w)]           # module.warn (a structured warning in 2.19+)
    # soft-RoCE's parent has no DCB: no map read, no class
    assert lossy["ports"][1]["rdma_cm_class"] is None


def test_a_named_port_whose_rdma_cm_defaults_cannot_be_read_fails(host, rdma_cm, run_module):
    del rdma_cm.devices["rxe0"]                                        # rdma_cm does not know it: mkdir ENODEV
    result = run_module(module, {"root": str(host), "dscp": 26, "interfaces": ["rxe0"], "state": "applied"})
    assert result["failed"] is True
    assert ("eth0: rdma_cm_mode: mkdir /sys/kernel/config/rdma_cm/rxe0 failed: no RDMA device of that name known to "
            "rdma_cm") in result["msg"]
