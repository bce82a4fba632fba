"""Fabric manager: package per branch and distribution, NVSwitch detection (module_utils/gpudirect_nvidia.py).

Sources of the real names and ids:
- Debian/Ubuntu below 580: ``nvidia-fabricmanager-535`` at ``535.161.07-1`` in the CUDA repository
  (https://github.com/NVIDIA/apt-packaging-fabric-manager/issues/3).
- Debian/Ubuntu 580: "Package nvidia-fabricmanager-580 is a virtual package provided by:
  nvidia-fabricmanager 580.65.06-1" (https://github.com/NVIDIA/gpu-driver-container/pull/451).
- EL: ``nvidia-fabricmanager-XXX`` renamed ``nvidia-fabric-manager`` in 2021
  (https://github.com/NVIDIA/yum-packaging-fabric-manager/pull/2); R580+ ``nvidia-fabricmanager-<version>``
  (https://github.com/NVIDIA/gpu-driver-container/pull/898, rhel10/install.sh).
- NVSwitch ids in ``lspci -nn`` of HGX systems: ``Bridge [0680]: NVIDIA Corporation GA100 [A100 NVSwitch] [10de:1af1]``,
  ``Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3]``; a GH200 GPU also shows as
  ``Bridge [0680]: NVIDIA Corporation GH100 [10de:2342]``.
"""

import pytest
import gpu_node_sim as sim
from ansible.module_utils import gpudirect_nvidia as nv
from ansible.module_utils import gpudirect_nvidia_plan as plan


@pytest.mark.parametrize("branch,family,version,name,spec", [
    ("535", "Debian", "535.161.07", "nvidia-fabricmanager-535", "nvidia-fabricmanager-535=535.161.07-*"),
    ("550", "Debian", "550.54.14", "nvidia-fabricmanager-550", "nvidia-fabricmanager-550=550.54.14-*"),
    ("580", "Debian", "580.65.06", "nvidia-fabricmanager", "nvidia-fabricmanager=580.65.06-*"),
    ("580", "Debian", "", "nvidia-fabricmanager", "nvidia-fabricmanager"),
    ("550", "RedHat", "550.90.07", "nvidia-fabric-manager", "nvidia-fabric-manager-550.90.07"),
    ("570", "RedHat", "570.133.20", "nvidia-fabric-manager", "nvidia-fabric-manager-570.133.20"),
    ("580", "RedHat", "580.65.06", "nvidia-fabricmanager", "nvidia-fabricmanager-580.65.06"),
])
def test_package_per_branch_and_family(branch, family, version, name, spec):
    out = nv.fabricmanager_package(branch, family, version)
    assert (out["name"], out["spec"]) == (name, spec)


def test_580_debian_never_installs_the_virtual_name():
    out = nv.fabricmanager_package("580", "Debian", "580.95.05")
    assert "nvidia-fabricmanager-580" not in out["spec"] and "virtual" in out["source"]


@pytest.mark.parametrize("args,needle", [
    (("58", "Debian"), "three-digit"), (("580", "Suse"), "OS family"),
    (("580", "Debian", "570.86.15"), "not a version of branch 580"),
])
def test_package_bad_input(args, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        nv.fabricmanager_package(*args)


def bridge(device_id, address):
    return {"device_id": device_id, "address": address}


def test_hgx_h100_switches_want_the_fabric_manager():
    out = nv.fabricmanager_plan([bridge("0x22a3", "0000:07:00.0"), bridge("0x22a3", "0000:08:00.0")])
    assert out["wanted"] and len(out["switches"]) == 2
    assert "0x22a3 at 0000:07:00.0 (H100 NVSwitch" in out["reason"]


def test_a100_switch_is_known():
    assert nv.fabricmanager_plan([bridge("0x1af1", "0000:54:00.0")])["wanted"]


def test_non_nvswitch_node_skips_with_the_reason():
    out = nv.fabricmanager_plan([], "auto")
    assert not out["wanted"]
    assert out["reason"].startswith("no NVSwitch on this host") and out["reason"].endswith("fabric manager skipped")


def test_gh200_bridge_function_is_a_gpu_not_a_switch():
    out = nv.fabricmanager_plan([bridge("0x2342", "0009:01:00.0")])
    assert not out["wanted"] and "0x2342 at 0009:01:00.0 (NVIDIA GH200 120GB, a GPU)" in out["reason"]


def test_unknown_bridge_id_fails_naming_id_address_and_knob():
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.fabricmanager_plan([bridge("0x2b00", "0000:0a:00.0")], "auto")
    message = str(err.value)
    assert "0x2b00 at 0000:0a:00.0" in message and "gpudirect_nvidia_driver_fabricmanager: true" in message


@pytest.mark.parametrize("knob,wanted", [(True, True), ("true", True), (False, False), ("False", False)])
def test_knob_overrides_detection(knob, wanted):
    out = nv.fabricmanager_plan([bridge("0x2b00", "0000:0a:00.0")], knob)
    assert out["wanted"] is wanted and "gpudirect_nvidia_driver_fabricmanager is" in out["reason"]


def test_bad_knob():
    with pytest.raises(nv.NvidiaDecisionError, match="auto, true or false"):
        nv.fabricmanager_plan([], "yes please")


def _with_pci(host, functions):
    for address, device, pci_class in functions:
        base = "/sys/bus/pci/devices/" + address
        host.dirs.add(base)
        host.files.update({base + "/vendor": "0x10de\n", base + "/device": device + "\n",
                           base + "/class": pci_class + "\n"})
    return host


def test_probe_reports_nvidia_bridge_functions_with_ids():
    host = _with_pci(sim.gpu_node(), [("0000:00:06.0", "0x2330", "0x030200"),
                                      ("0000:07:00.0", "0x22a3", "0x068000")])
    out = plan.probe(host.plan_host(), "580")
    assert out["nvswitches"] == [{"address": "0000:07:00.0", "device_id": "0x22a3"}]
    assert nv.fabricmanager_plan(out["nvswitches"])["wanted"]


def test_probe_on_the_gpu_node_finds_no_switch():
    host = _with_pci(sim.gpu_node(), [("0000:00:06.0", "0x2330", "0x030200")])
    out = plan.probe(host.plan_host(), "580")
    assert out["nvswitches"] == []
    assert nv.fabricmanager_plan(out["nvswitches"])["wanted"] is False
