"""Unit tests of filter_plugins/gpudirect_decisions.py (pure decision functions)."""

import json
import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_decisions as d
from conftest import PROJECT_FIXTURES

H200_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")


@pytest.fixture(name="h200")
def fixture_h200():
    with open(H200_FACTS, encoding="utf-8") as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


def gpu(device_id):
    return {"device_id": device_id, "vendor_id": "0x10de"}


# --- architectures ---------------------------------------------------------

@pytest.mark.parametrize("device_id,arch", [
    ("0x2330", "hopper"), ("0x2335", "hopper"), ("0x2342", "grace_hopper"),
    ("0x20b0", "ampere"), ("0x20b5", "ampere"), ("0x1db4", "volta"), ("0x1db6", "volta"),
    ("0x2901", "blackwell"), ("0x2941", "blackwell"), ("0x1eb8", "turing"), ("0x26b9", "ada"),
    ("0x15f8", "pascal"), ("2335", "hopper"), (0x2330, "hopper"), ("0x2BB1", "blackwell"),
])
def test_arch_table(device_id, arch):
    assert d.nvidia_gpu_arch(device_id)["arch"] == arch


def test_arch_prefix_and_unknown():
    info = d.nvidia_gpu_arch("0x2999")
    assert info["arch"] == "blackwell" and info["source"] == "id prefix 0x29xx"
    assert d.nvidia_gpu_arch("0x1d99")["arch"] is None  # 0x1d is mixed (GP108 / GV100)
    assert d.nvidia_gpu_arch("junk")["source"] == "unknown"


# --- flavour ---------------------------------------------------------------

def test_flavor_auto_h200_facts(h200):
    out = d.nvidia_driver_flavor(h200["gpus"], "auto", "open")
    assert out["flavor"] == "open"
    assert "0x2335 (H200)" in out["reasons"][0]


@pytest.mark.parametrize("ids,flavor", [
    (["0x2330"], "open"), (["0x2901"], "open"), (["0x2342"], "open"), (["0x1eb8"], "open"),
    (["0x1db4"], "proprietary"), (["0x15f9", "0x15f9"], "proprietary"), (["0x20b0", "0x20b5"], "open"),
])
def test_flavor_auto(ids, flavor):
    assert d.nvidia_driver_flavor([gpu(i) for i in ids], "auto")["flavor"] == flavor


def test_flavor_no_gpu_uses_fallback():
    out = d.nvidia_driver_flavor([], "auto", "proprietary")
    assert out["flavor"] == "proprietary"
    assert "nvidia_driver_flavor_fallback" in out["reasons"][0]
    assert d.nvidia_driver_flavor([], "auto", "open")["flavor"] == "open"


def test_flavor_unknown_id_uses_fallback():
    out = d.nvidia_driver_flavor([gpu("0x1d99")], "auto", "open")
    assert out["flavor"] == "open" and "unknown" in out["reasons"][0]


def test_flavor_explicit():
    assert d.nvidia_driver_flavor([gpu("0x2330")], "proprietary")["flavor"] == "proprietary"
    assert d.nvidia_driver_flavor([], "open")["flavor"] == "open"


@pytest.mark.parametrize("ids,requested,needle", [
    (["0x2901"], "proprietary", "nvidia_driver_flavor: proprietary"),
    (["0x2342"], "proprietary", "Grace Hopper and Blackwell"),
    (["0x1db4"], "open", "nvidia_driver_flavor: open"),
    (["0x2901", "0x1db4"], "auto", "no driver flavour"),
])
def test_flavor_refused(ids, requested, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        d.nvidia_driver_flavor([gpu(i) for i in ids], requested)


def test_flavor_bad_values():
    with pytest.raises(AnsibleFilterError, match="nvidia_driver_flavor must"):
        d.nvidia_driver_flavor([], "closed")
    with pytest.raises(AnsibleFilterError, match="nvidia_driver_flavor_fallback"):
        d.nvidia_driver_flavor([], "auto", "auto")


# --- branch ------------------------------------------------------------------

def test_branch_ok(h200):
    assert d.nvidia_driver_branch_check("580", h200["gpus"])["branch"] == "580"
    assert d.nvidia_driver_branch_check(580)["branch"] == "580"


@pytest.mark.parametrize("branch,ids,needle", [
    ("58", [], "three-digit"), ("latest", [], "three-digit"), ("999", [], "not a branch the toolkit knows"),
    ("535", ["0x2901"], "needs branch 570"), ("590", ["0x1db4"], "not a branch"),
])
def test_branch_refused(branch, ids, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        d.nvidia_driver_branch_check(branch, [gpu(i) for i in ids])


def test_branch_unlisted_ok_still_checks_gpus():
    assert d.nvidia_driver_branch_check("590", [], True)["branch"] == "590"
    with pytest.raises(AnsibleFilterError, match="up to branch 580"):
        d.nvidia_driver_branch_check("590", [gpu("0x1db4")], True)


def test_driver_version_parse():
    assert d.nvidia_driver_version_parse("580.95.05") == {"version": "580.95.05", "branch": "580",
                                                          "parts": [580, 95, 5]}
    assert d.nvidia_driver_version_parse("") is None
    with pytest.raises(AnsibleFilterError):
        d.nvidia_driver_version_parse("abc")


# --- rdma-core -----------------------------------------------------------------

@pytest.mark.parametrize("version,major", [
    ("44.0-2", 44), ("1:50.0-1", 50), ("2410mlnx54-1.2410068", 54), ("33.1", 33), ("", None), (None, None),
    ("50.0-2ubuntu0.2", 50),
])
def test_rdma_core_major(version, major):
    assert d.rdma_core_major(version) == major


# --- peer memory -----------------------------------------------------------------

def test_peermem_h200_auto_dmabuf(h200):
    out = d.gpudirect_peermem_choice(h200, "auto", None, "50.0-2", "")
    assert out["mechanism"] == "dmabuf" and out["ok"]
    text = out["reasons"][0]
    for needle in ("0x2335 (H200)", "open kernel module", "driver 580.159.04 >= 515", "kernel 6.18.44",
                   "rdma-core 50.0-2"):
        assert needle in text


def test_peermem_h200_old_rdma_core_falls_back(h200):
    out = d.gpudirect_peermem_choice(h200, "auto", None, "33.0-1", "OFED-internal-24.10-1.1.4:")
    assert out["mechanism"] == "nvidia_peermem" and out["ok"]
    assert "ibv_reg_dmabuf_mr needs >= 34" in out["reasons"][0]


def test_peermem_vm_no_gpu_picks_nvidia_peermem():
    facts = {"gpus": [], "nvidia_driver": {"loaded": True, "version": "580.95.05", "flavor": "open"},
             "kernel": {"running": "6.1.0-41-amd64"}, "dmabuf": {"kernel_ok": True, "open_module": True},
             "peermem": {}}
    out = d.gpudirect_peermem_choice(facts, "auto", {"version": "580.95.05", "flavor": "open"}, "44.0-2",
                                     "OFED-internal-24.10-1.1.4:")
    assert out["mechanism"] == "nvidia_peermem" and out["ok"]
    assert "no NVIDIA GPU" in out["reasons"][0]
    assert "OFED-internal-24.10-1.1.4 provides" in out["reasons"][-1]


def test_peermem_needs_ofed():
    out = d.gpudirect_peermem_choice({"gpus": []}, "auto", {"version": "580.95.05", "flavor": "open"}, "44.0", "")
    assert out["mechanism"] == "nvidia_peermem" and not out["ok"]
    assert "peer-memory API" in out["reasons"][-1]


def test_peermem_old_driver_nv_peer_mem():
    out = d.gpudirect_peermem_choice({"gpus": [gpu("0x1db4")], "kernel": {"running": "4.18.0"}}, "auto",
                                     {"version": "460.106.00", "flavor": "proprietary"}, "", "MLNX_OFED_LINUX-5.4-3.6.8.1:")
    assert out["mechanism"] == "nv_peer_mem" and out["ok"]


def test_peermem_explicit_dmabuf_refused_with_reasons():
    out = d.gpudirect_peermem_choice({"gpus": [gpu("0x1db4")], "kernel": {"running": "6.1.0"}}, "dmabuf",
                                     {"version": "535.1", "flavor": "proprietary"}, "44.0", "")
    assert not out["ok"] and "predate Turing" in out["reasons"][0]


def test_peermem_nvidia_peermem_on_old_driver_refused():
    out = d.gpudirect_peermem_choice({}, "nvidia_peermem", {"version": "460.1"}, "", "MLNX_OFED_LINUX-5.4-3.6.8.1:")
    assert not out["ok"] and "R470" in out["reasons"][-1]


def test_peermem_bad_value():
    with pytest.raises(AnsibleFilterError, match="gpudirect_peermem_mechanism"):
        d.gpudirect_peermem_choice({}, "gdr")


# --- OFED ------------------------------------------------------------------------

@pytest.mark.parametrize("rc,needle", [
    (172, "prerequisites are not met"), ("174", "another RDMA stack"), (171, "not applicable"),
    (0, "successfully"), (99, "unknown exit status"), ("x", "not a number"),
])
def test_installer_message(rc, needle):
    assert needle in d.mlnx_ofed_installer_message(rc)


@pytest.mark.parametrize("installed,method,wanted,action", [
    ("", "doca", "24.10-1.1.4", "install"),
    ("OFED-internal-24.10-1.1.4:", "doca", "24.10-1.1.4", "none"),
    ("OFED-internal-24.10-1.1.4:", "doca", "24.10-1.1.4.0", "none"),
    ("OFED-internal-24.10-1.1.4:", "doca", "25.01-0.6.0", "upgrade"),
    ("OFED-internal-25.01-0.6.0:", "doca", "24.10-1.1.4", "downgrade"),
    ("MLNX_OFED_LINUX-24.10-1.1.4.0:", "doca", "24.10-1.1.4", "replace"),
    ("MLNX_OFED_LINUX-24.10-1.1.4.0:", "mlnx_ofed_tarball", "24.10-1.1.4.0", "none"),
    ("OFED-internal-24.10-1.1.4:", "inbox", "", "remove"),
    ("", "inbox", "", "none"),
])
def test_ofed_action(installed, method, wanted, action):
    assert d.mlnx_ofed_action(installed, method, wanted)["action"] == action


def test_ofed_action_needs_version():
    with pytest.raises(AnsibleFilterError, match="mlnx_ofed_version"):
        d.mlnx_ofed_action("", "doca", "")


def test_filters_registered():
    names = d.FilterModule().filters()
    assert {"nvidia_driver_flavor", "gpudirect_peermem_choice", "mlnx_ofed_action"} <= set(names)
