"""The facts the module returned on a real H200 node, and what the preflight makes of them."""

import json
import os

import gpudirect_report as report
from conftest import PROJECT_FIXTURES

CAPTURE = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200")


def _load():
    with open(os.path.join(CAPTURE, "gpudirect_facts.json")) as fh:
        return json.load(fh)


def test_module_result_on_the_h200_is_read_only():
    result = _load()
    assert result["changed"] is False
    assert "failed" not in result or result["failed"] is False


def test_h200_gpu_link_driver_and_no_rdma_device():
    facts = _load()["ansible_facts"]["gpudirect"]
    (gpu,) = facts["gpus"]
    assert (gpu["address"], gpu["vendor_id"], gpu["device_id"]) == ("0000:00:06.0", "0x10de", "0x2335")
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["link"] == {"current_speed_gts": 32.0, "current_width": 16, "max_speed_gts": 32.0, "max_width": 16}
    assert facts["nvidia_driver"] == {"loaded": True, "version": "580.159.04", "flavor": "open"}
    assert facts["rdma_devices"] == [] and facts["pairs"] == []
    assert facts["dmabuf"]["kernel_ok"] and facts["dmabuf"]["open_module"]
    assert facts["peermem"]["ib_core"] and not facts["peermem"]["nvidia_peermem"]


def test_report_on_the_h200_names_the_missing_nic():
    facts = _load()["ansible_facts"]["gpudirect"]
    text = "\n".join(report.gpudirect_preflight_report(facts, "h200"))
    assert "NVIDIA H200 32.0 GT/s x16 (max 32.0 GT/s x16)" in text
    assert "nvidia 580.159.04 (open kernel module)" in text
    assert "GPU/NIC pairs: none (no RDMA device)" in text
    assert "dma-buf prerequisites met" in text
    assert report.gpudirect_findings(facts) == []


def test_preflight_on_the_h200_stopped_on_the_missing_nic_and_changed_nothing():
    for name in ("preflight.log", "preflight-check.log"):
        with open(os.path.join(CAPTURE, name)) as fh:
            log = fh.read()
        assert "no RDMA device in /sys/class/infiniband" in log
        assert "changed=0" in log and "failed=1" in log
