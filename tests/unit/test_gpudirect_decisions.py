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
    assert not out["ok"] and "not supported by the open kernel module" in out["reasons"][0]


def test_peermem_nvidia_peermem_on_old_driver_refused():
    out = d.gpudirect_peermem_choice({}, "nvidia_peermem", {"version": "460.1"}, "", "MLNX_OFED_LINUX-5.4-3.6.8.1:")
    assert not out["ok"] and "R470" in out["reasons"][-1]


def test_peermem_bad_value():
    with pytest.raises(AnsibleFilterError, match="gpudirect_peermem_mechanism"):
        d.gpudirect_peermem_choice({}, "gdr")


def test_peermem_libibverbs_symbol_decides(h200):
    lib = {"path": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0", "version": "50.0", "dmabuf": True}
    out = d.gpudirect_peermem_choice(h200, "auto", None, "", "", lib)
    assert out["mechanism"] == "dmabuf" and out["ok"]
    assert "libibverbs.so.1.14.50.0 (rdma-core 50.0) exports ibv_reg_dmabuf_mr" in out["reasons"][0]
    # a library without the symbol wins over a package version that claims it
    out = d.gpudirect_peermem_choice(h200, "auto", None, "50.0-2", "", dict(lib, dmabuf=False))
    assert out["mechanism"] == "nvidia_peermem" and not out["ok"]
    assert "does not export ibv_reg_dmabuf_mr" in out["reasons"][0]
    # no library found: the package version decides, as before
    out = d.gpudirect_peermem_choice(h200, "auto", None, "", "", {"path": "", "version": "", "dmabuf": False})
    assert out["mechanism"] == "nvidia_peermem" and "rdma-core not installed" in out["reasons"][0]


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
    # DOCA 2.9.1 prints a build suffix: the same release, no change (issue 15)
    ("OFED-internal-24.10-1.1.4.0.200:", "doca", "24.10-1.1.4", "none"),
    ("OFED-internal-24.10-1.1.40:", "doca", "24.10-1.1.4", "downgrade"),
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
    assert {"gpudirect_peermem_choice", "mlnx_ofed_action"} <= set(names)
    # the nvidia_driver decisions are the plan module's (module_utils/gpudirect_nvidia_plan.py)
    assert not [name for name in names if name.startswith("nvidia_")]
