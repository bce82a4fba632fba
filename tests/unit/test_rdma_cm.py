"""RDMA-CM's per-port defaults (issue #44, outcome 4): module_utils/gpudirect_rdma_cm.py's parsers on the
captures of tests/fixtures/rdma_cm/ (README.md names each source) and on what no kernel prints, the ToS of a
DSCP, what stands between a host and rdma_cm's configfs, and the configfs group's life (made to read or write,
removed again only when made here) on the kernel's stand-in (tests/unit/rdma_cm_configfs.py).
"""

import os

import pytest

from ansible.module_utils import gpudirect_rdma_cm as rdma_cm
from ansible.module_utils import gpudirect_roce_qos as qos
from conftest import PROJECT_FIXTURES
from rdma_cm_configfs import V1, V2, FakeRdmaCm, port

FIXTURES = os.path.join(PROJECT_FIXTURES, "rdma_cm")


def fixture(name):
    with open(os.path.join(FIXTURES, name), newline="") as handle:
        return handle.read()


# ------------------------------------------------------------------ parsers, real outputs

def test_reads_the_roce_modes_the_captures_print():
    assert rdma_cm.parse_roce_mode(fixture("default_roce_mode-roce_v2-rhel7-mlx5.txt")) == "RoCE v2"
    assert rdma_cm.parse_roce_mode(fixture("default_roce_mode-roce_v2-nvidia-mlx4.txt")) == "RoCE v2"
    assert rdma_cm.parse_roce_mode(fixture("default_roce_mode-ib_roce_v1-nvidia-mlx4.txt")) == "IB/RoCE v1"


def test_reads_the_tos_cma_roce_tos_printed():
    tos = rdma_cm.parse_roce_tos(fixture("default_roce_tos-106-netarbiter.txt"))
    assert tos == 106 and rdma_cm.split_tos(tos) == {"dscp": 26, "ecn": 2}


@pytest.mark.parametrize("name", ["default_roce_mode-roce_v1-rhel7-doc.not-kernel.txt",
                                  "default_roce_mode-iboe_v2-rxe_cfg.not-kernel.txt"])
def test_a_mode_no_kernel_prints_is_refused(name):
    with pytest.raises(ValueError, match="not one of the RoCE types the kernel prints"):
        rdma_cm.parse_roce_mode(fixture(name))


@pytest.mark.parametrize("text", [
    "RoCE V2\n",            # what a site script writes (the kernel's strncmp is case-sensitive: EINVAL)
    " RoCE v2\n", "RoCE v2 \n", "RoCE v2\n\n", "RoCE v2\r\n", "", "\n",
    "Invalid GID type\n",   # ib_cache_gid_type_str of a type it has no name for
    "RoCE v2\nIB/RoCE v1\n",
])
def test_malformed_modes_are_refused(text):
    with pytest.raises(ValueError) as raised:
        rdma_cm.parse_roce_mode(text)
    assert repr(text) in str(raised.value)


def test_a_mode_without_its_newline_still_reads():
    assert rdma_cm.parse_roce_mode("RoCE v2") == "RoCE v2"


@pytest.mark.parametrize("text", ["256\n", "-1\n", "0x68\n", " 104\n", "104 \n", "1e2\n", "", "\n", "104\n\n",
                                  "1040\n", "+104\n"])
def test_malformed_tos_is_refused(text):
    with pytest.raises(ValueError, match="not a ToS 0-255 as the kernel prints it"):
        rdma_cm.parse_roce_tos(text)


def test_tos_bounds_and_types():
    assert [rdma_cm.parse_roce_tos(t) for t in ("0\n", "255\n", "104")] == [0, 255, 104]
    with pytest.raises(TypeError):
        rdma_cm.parse_roce_tos(None)
    with pytest.raises(TypeError):
        rdma_cm.parse_roce_mode(b"RoCE v2\n")


# ------------------------------------------------------------------ decisions

def test_the_profiles_dscp_gives_roce_v2_and_its_tos():
    assert rdma_cm.tos_of_dscp(26) == 104 and rdma_cm.tos_of_dscp(0) == 0 and rdma_cm.tos_of_dscp(63) == 252
    assert rdma_cm.wanted(26) == {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104}
    assert rdma_cm.wanted(26, enabled=False) == {} and rdma_cm.wanted(None) == {}
    for bad in (64, -1, True, "26", 26.0, None):
        with pytest.raises(ValueError):
            rdma_cm.tos_of_dscp(bad)


@pytest.mark.parametrize("wanted, message", [
    ({"dscp": 64}, "dscp must be a number 0-63"),
    ({"dscp": -1}, "dscp must be a number 0-63"),
    ({"dscp": True}, "dscp must be a number 0-63"),
    ({"dscp": "26"}, "dscp must be a number 0-63"),
    ({"dscp": 26, "rdma_cm": "yes"}, "rdma_cm must be true or false"),
])
def test_bad_rdma_cm_values_are_named(wanted, message):
    errors = qos.validate_wanted(wanted)
    assert len(errors) == 1 and errors[0].startswith(message)


def test_what_differs_on_a_port():
    want = {"dscp": 26, "rdma_cm": True}
    assert qos.compare({"rdma_cm_mode": V1, "rdma_cm_tos": 0}, want) == {"rdma_cm_mode": V2, "rdma_cm_tos": 104}
    assert qos.compare({"rdma_cm_mode": V2, "rdma_cm_tos": 104}, want) == {}
    # an admin's 106 (DSCP 26 with ECN bits 10) is not the profile's 104: set
    assert qos.compare({"rdma_cm_mode": V2, "rdma_cm_tos": 106}, want) == {"rdma_cm_tos": 104}
    # not read: not compared (the plan says why elsewhere)
    assert qos.compare({}, want) == {}
    assert qos.compare({"rdma_cm_mode": V1, "rdma_cm_tos": 0}, dict(want, rdma_cm=False)) == {}
    assert qos.describe("rdma_cm_tos", 104) == "RDMA-CM default ToS 104 (DSCP 26)"
    assert qos.describe("rdma_cm_mode", V2) == "RDMA-CM default RoCE mode RoCE v2"


def test_where_rdma_cm_traffic_lands():
    # the dscp2prio map of the real capture (mlnx_qos, DSCP trust): DSCP 24-31 on priority 3
    dscp2prio = dict((d, d >> 3) for d in range(64))
    assert qos.rdma_cm_class(104, "dscp", dscp2prio, [3]) == {"dscp": 26, "priority": 3, "pfc": True}
    assert qos.rdma_cm_class(0, "dscp", dscp2prio, [3]) == {"dscp": 0, "priority": 0, "pfc": False}
    assert qos.rdma_cm_class(104, "pcp", dscp2prio, [3]) is None
    assert qos.rdma_cm_class(104, "dscp", None, [3]) is None
    assert qos.rdma_cm_class(104, "dscp", dscp2prio, None) is None


# ------------------------------------------------------------------ what configfs needs

def test_availability_names_what_is_missing(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {}, loaded=False)
    fake.mounts(False)
    found = rdma_cm.availability(str(tmp_path))
    assert found["ready"] is False and found["steps"] == ["mount configfs", "load rdma_cm"]
    assert found["problem"] == ("configfs is not mounted on /sys/kernel/config and the kernel module rdma_cm is not "
                                "loaded (no /sys/kernel/config/rdma_cm)")
    fake.mounts(True)
    found = rdma_cm.availability(str(tmp_path))
    assert found["steps"] == ["load rdma_cm"] and found["problem"].startswith("the kernel module rdma_cm is not loaded")
    # loaded on a mounted configfs, and still no directory: the kernel lacks the option; nothing to do about it
    os.makedirs(str(tmp_path / "sys/module/rdma_cm"))
    found = rdma_cm.availability(str(tmp_path))
    assert found["steps"] == [] and "built without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS" in found["problem"]
    fake.load()
    assert rdma_cm.availability(str(tmp_path)) == {"ready": True, "mounted": True, "loaded": True, "steps": [],
                                                   "problem": ""}


def test_an_unreadable_proc_mounts_is_unknown_not_unmounted(tmp_path):
    assert rdma_cm.configfs_mounted(str(tmp_path)) is None
    assert rdma_cm.availability(str(tmp_path))["steps"] == ["mount configfs", "load rdma_cm"]


# ------------------------------------------------------------------ the group's life

def test_reading_makes_the_group_and_removes_it_again(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {"mlx5_0": {1: port(V1, 0), 2: port(V2, 106)}})
    read = rdma_cm.read_defaults(str(tmp_path), "mlx5_0", [1, 2])
    assert read == {"ports": {"1": {"roce_mode": V1, "roce_tos": 0}, "2": {"roce_mode": V2, "roce_tos": 106}},
                    "errors": {}, "group": ""}
    assert fake.log == [("mkdir", "mlx5_0"), ("rmdir", "mlx5_0")]
    assert not os.path.exists(fake.group("mlx5_0"))


def test_a_group_someone_else_made_is_left_in_place(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {"mlx5_0": {1: port()}})
    rdma_cm._mkdir(fake.group("mlx5_0"))
    assert rdma_cm.write_defaults(str(tmp_path), "mlx5_0", 1, {"roce_tos": 104}) == ""
    assert rdma_cm.read_defaults(str(tmp_path), "mlx5_0", [1])["ports"]["1"] == {"roce_mode": V2, "roce_tos": 104}
    assert os.path.isdir(fake.group("mlx5_0")) and fake.log.count(("rmdir", "mlx5_0")) == 0


def test_a_read_only_caller_makes_no_group(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {"mlx5_0": {1: port()}})
    read = rdma_cm.read_defaults(str(tmp_path), "mlx5_0", [1], create=False)
    assert read["ports"] == {"1": {}} and fake.log == []
    assert read["errors"]["1"]["default_roce_tos"] == ("no configfs group /sys/kernel/config/rdma_cm/mlx5_0 (reading "
                                                        "it needs a mkdir there)")


def test_values_outlive_the_group(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {"rxe0": {1: port(V2, 0, modes=(V2,))}})
    assert rdma_cm.write_defaults(str(tmp_path), "rxe0", 1, {"roce_mode": V2, "roce_tos": 104}) == ""
    assert fake.log[-1] == ("rmdir", "rxe0") and fake.devices["rxe0"][1]["tos"] == 104
    assert rdma_cm.read_defaults(str(tmp_path), "rxe0", [1])["ports"]["1"] == {"roce_mode": V2, "roce_tos": 104}


def test_the_kernels_refusals_are_named(tmp_path, monkeypatch):
    FakeRdmaCm(tmp_path, monkeypatch, {"rxe0": {1: port(V2, 0, modes=(V2,))}})
    problem = rdma_cm.write_defaults(str(tmp_path), "rxe0", 1, {"roce_mode": V1})
    assert problem == ("writing 'IB/RoCE v1' to /sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_mode failed: "
                       "Invalid argument (the port does not support IB/RoCE v1)")
    problem = rdma_cm.write_defaults(str(tmp_path), "mlx5_9", 1, {"roce_tos": 104})
    assert problem == ("mkdir /sys/kernel/config/rdma_cm/mlx5_9 failed: no RDMA device of that name known to "
                       "rdma_cm")


def test_a_malformed_value_in_the_group_is_an_error_of_that_port(tmp_path, monkeypatch):
    fake = FakeRdmaCm(tmp_path, monkeypatch, {"mlx5_0": {1: port()}})
    rdma_cm._mkdir(fake.group("mlx5_0"))
    with open(os.path.join(fake.group("mlx5_0"), "ports", "1", "default_roce_mode"), "w") as handle:
        handle.write(fixture("default_roce_mode-iboe_v2-rxe_cfg.not-kernel.txt"))
    read = rdma_cm.read_defaults(str(tmp_path), "mlx5_0", [1, 2])
    assert read["ports"]["1"] == {"roce_tos": 0}
    assert "not one of the RoCE types the kernel prints" in read["errors"]["1"]["default_roce_mode"]
    assert read["errors"]["2"]["default_roce_mode"].startswith(
        "cannot read /sys/kernel/config/rdma_cm/mlx5_0/ports/2/default_roce_mode: No such file")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "mlx5_0\n", None])
def test_a_device_name_that_is_no_name_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="is no RDMA device name"):
        rdma_cm.read_defaults(str(tmp_path), name, [1])
