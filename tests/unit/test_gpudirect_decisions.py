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


# --- GPU data (module_utils/gpudirect_nvidia.py; more in test_nvidia_gpus.py) ---

def test_gpu_info_filter_wraps_the_table():
    info = d.nvidia_gpu_info("2330")
    assert info["known"] and info["open"] and info["min_branch"] == 525
    assert d.nvidia_gpu_info("junk")["known"] is False


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


def test_flavor_unknown_id_is_refused_not_guessed():
    with pytest.raises(AnsibleFilterError, match="0x1d99.*nvidia_driver_flavor: open or proprietary"):
        d.nvidia_driver_flavor([gpu("0x1d99")], "auto", "open")


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


# --- the installed driver: packages, foreign, nothing --------------------------------

FOREIGN_580_OPEN = {"loaded_version": "580.159.04", "version": "580.159.04", "flavor": "open", "path": "",
                    "owner": "", "disk_version": "",
                    "proc_version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build"}


def probe(packages=None, module=None, other=None):
    module = dict(module or {})
    return {"packages": packages or {}, "module": module, "other_packages": other or {},
            "loaded_version": module.get("loaded_version", ""), "module_version": module.get("disk_version", "")}


# (probe, branch, version, flavour) -> action, managed, a needle of the message
PLAN_TABLE = [
    pytest.param(probe({"nvidia-kernel-open-dkms": "580.95.05-1", "nvidia-open": "580.95.05-1"}), "580", "", "open",
                 "none", True, "installed driver 580.95.05 (open) matches: no change", id="package-installed"),
    pytest.param(probe({"nvidia-kernel-open-dkms": "1:580.95.05-1ubuntu1"}), "580", "580.95.05", "open",
                 "none", True, "installed driver 580.95.05 (open) matches", id="package-exact-version"),
    pytest.param(probe({"nvidia-kernel-open-dkms": "570.86.15-1"}), "580", "", "open",
                 "change", True, "installed driver 570.86.15 (open) differs from wanted branch 580 (open): replacing it",
                 id="package-other-branch"),
    pytest.param(probe({"nvidia-kernel-dkms": "580.95.05-1"}), "580", "", "open",
                 "change", True, "installed driver 580.95.05 (proprietary) differs from wanted branch 580 (open)",
                 id="package-other-flavour"),
    pytest.param(probe({"nvidia-driver": "3:580.95.05-1.el9"}), "580", "", "open",
                 "none", True, "installed driver 580.95.05 (open) matches", id="package-el"),
    # a package-installed driver wins over what the loaded module says (it is the role's)
    pytest.param(probe({"nvidia-kernel-open-dkms": "580.95.05-1"}, FOREIGN_580_OPEN), "580", "", "open",
                 "none", True, "matches: no change", id="package-and-loaded"),
    pytest.param(probe(module=FOREIGN_580_OPEN), "580", "", "open", "keep", False,
                 "driver 580.159.04 (open) is installed outside the package manager (runfile or image): kept, "
                 "not managed by packages", id="foreign-matching"),
    pytest.param(probe(module=FOREIGN_580_OPEN), "580", "580.159.04", "open", "keep", False,
                 "kept, not managed by packages", id="foreign-matching-exact-version"),
    pytest.param(probe(module=FOREIGN_580_OPEN), "580", "580.95.05", "open", "refuse", False,
                 "version 580.159.04 installed, 580.95.05 wanted", id="foreign-other-version"),
    pytest.param(probe(module=FOREIGN_580_OPEN), "570", "", "open", "refuse", False,
                 "branch 580 installed, 570 wanted", id="foreign-other-branch"),
    pytest.param(probe(module=dict(FOREIGN_580_OPEN, flavor="proprietary")), "580", "", "open", "refuse", False,
                 "flavour proprietary installed, open wanted", id="foreign-proprietary-vs-open"),
    pytest.param(probe(module=FOREIGN_580_OPEN), "580", "", "proprietary", "refuse", False,
                 "flavour open installed, proprietary wanted", id="foreign-open-vs-proprietary"),
    # runfile installed, not loaded (after a reboot into a kernel it was built for): modinfo tells
    pytest.param(probe(module={"disk_version": "580.159.04", "version": "580.159.04", "flavor": "open",
                               "path": "/lib/modules/6.8.0-49-generic/kernel/drivers/video/nvidia.ko", "owner": ""}),
                 "580", "", "open", "keep", False, "installed outside the package manager", id="foreign-on-disk"),
    pytest.param(probe(module=dict(FOREIGN_580_OPEN, owner="linux-modules-nvidia-580-open-6.8.0-49-generic"),
                       other={"nvidia-dkms-580-open": "580.95.05-0ubuntu1"}), "580", "", "open", "keep", False,
                 "installed by linux-modules-nvidia-580-open-6.8.0-49-generic, nvidia-dkms-580-open, not from the CUDA "
                 "repository: kept", id="other-package-matching"),
    pytest.param(probe(), "580", "", "open", "install", True,
                 "no NVIDIA driver installed: installing branch 580 (newest) open", id="nothing-installed"),
    pytest.param(probe(), "580", "580.95.05", "proprietary", "install", True,
                 "installing branch 580 580.95.05 proprietary", id="nothing-installed-exact"),
]


@pytest.mark.parametrize("found,branch,version,flavor,action,managed,needle", PLAN_TABLE)
def test_driver_plan_table(found, branch, version, flavor, action, managed, needle):
    out = d.nvidia_driver_plan(found, branch, version, flavor)
    assert (out["action"], out["managed"]) == (action, managed), out["message"]
    assert needle in out["message"]


def test_driver_plan_refusal_names_both_and_the_fix():
    out = d.nvidia_driver_plan(probe(module=FOREIGN_580_OPEN), "570", "570.86.15", "proprietary")
    text = out["message"]
    for needle in ("driver 580.159.04 (open) is installed outside the package manager",
                   "wanted: 570.86.15 (proprietary)", "branch 580 installed, 570 wanted",
                   "flavour open installed, proprietary wanted", "nvidia-uninstall",
                   "nvidia_driver_branch: '580'", "nvidia_driver_version: '580.159.04' (or '')",
                   "nvidia_driver_flavor: open"):
        assert needle in text, needle
    # a knob that already matches is not suggested
    out = d.nvidia_driver_plan(probe(module=dict(FOREIGN_580_OPEN, flavor="proprietary")), "580", "", "open")
    assert "nvidia_driver_branch" not in out["message"] and "nvidia_driver_flavor: proprietary" in out["message"]


def test_driver_plan_other_package_refusal_says_which_package():
    out = d.nvidia_driver_plan(probe(module=FOREIGN_580_OPEN, other={"nvidia-dkms-570-open": "570.86.15-0ubuntu1"}),
                               "570", "", "open")
    assert out["action"] == "refuse" and out["source"] == "other package"
    assert "apt-get purge / dnf remove nvidia-dkms-570-open" in out["message"]


def test_driver_plan_unknown_flavour_is_refused_with_a_way_out():
    out = d.nvidia_driver_plan(probe(module={"disk_version": "580.159.04", "version": "580.159.04", "flavor": ""}),
                               "580", "", "open")
    assert out["action"] == "refuse" and "modprobe nvidia" in out["message"]


def test_driver_plan_reload_pending_is_said():
    module = dict(FOREIGN_580_OPEN, disk_version="580.126.09", version="580.126.09")
    out = d.nvidia_driver_plan(probe(module=module), "580", "", "open")
    assert out["action"] == "keep" and "(580.159.04 is loaded until a reboot)" in out["message"]


def test_filters_registered():
    names = d.FilterModule().filters()
    assert {"nvidia_driver_flavor", "nvidia_driver_plan"} <= set(names)
    # module_utils/gpudirect_ofed.py and module_utils/gpudirect_peermem.py decide those now
    assert not {"mlnx_ofed_action", "mlnx_ofed_installer_message", "gpudirect_peermem_choice",
                "rdma_core_major"} & set(names)
