"""gpudirect_loopback on a real H100 without RDMA NIC: the CUDA half and the failures.

The files come from tests/harness/gpu_node/loopback.yml (README next to them).
Where the module can run here (no GPU, no NIC), the same input must give the
same verdict as on the node.
"""

import json
import os

import gpudirect_loopback
import gpudirect_verify
from conftest import PROJECT_FIXTURES
from test_gpudirect_loopback import HELPER_SOURCES

CAPTURE = os.path.join(PROJECT_FIXTURES, "gpu_node", "h100")


def _load(name):
    with open(os.path.join(CAPTURE, name)) as fh:
        return json.load(fh)


def _facts():
    return _load("gpudirect_facts.json")["ansible_facts"]["gpudirect"]


def test_selftest_moved_the_pattern_through_gpu_memory_and_exported_a_dmabuf():
    res = _load("loopback_selftest.json")
    assert res["diagnosis"] is None
    assert res["mode"] == "selftest_gpu_only" and res["gpu"] == _facts()["gpus"][0]["address"]
    assert res["bytes_compared"] == 64 * 1024 * 1024 and res["mismatches"] == 0 and res["first_mismatch"] is None
    assert res["dmabuf_exported"] is True
    # pinned copies on a Gen5 x16 link: well above zero, below the link's 512 Gbit/s
    assert 50 < res["h2d_bandwidth_gbps"] < 512 and 50 < res["d2h_bandwidth_gbps"] < 512


def test_check_mode_on_the_node_chose_the_gpu_and_moved_nothing():
    res = _load("loopback_check.json")
    assert res["diagnosis"] is None and res["bandwidth_gbps"] is None and "bytes_compared" not in res
    # the helper was already built on that node (an earlier call): only the run is planned,
    # and check mode reports no change; a compile would come first and count as one
    *compile_cmd, run_cmd = res["would_run"]
    assert res["changed"] is bool(compile_cmd)
    assert run_cmd[0] == res["helper_path"]
    assert run_cmd[1:4] == ["--selftest-gpu-only", "--gpu", "0000:00:06.0"]


def test_no_nic_failure_on_the_node_names_what_it_saw():
    res = _load("loopback_no_rdma.json")
    assert res["diagnosis"]["code"] == "no_rdma_device"
    assert "0000:00:06.0" in res["diagnosis"]["message"]
    assert res["facts_seen"]["rdma_devices"] == [] and res["facts_seen"]["gpus"] == ["0000:00:06.0"]


def test_the_same_facts_give_the_same_no_nic_verdict_here(tmp_path, run_module):
    res = run_module(gpudirect_loopback, {"mode": "auto", "facts": _facts(), "helper_dir": str(tmp_path / "h"),
                                             "source": HELPER_SOURCES})
    captured = _load("loopback_no_rdma.json")
    assert res["failed"] is True
    assert res["diagnosis"]["code"] == captured["diagnosis"]["code"]
    assert res["facts_seen"]["gpus"] == captured["facts_seen"]["gpus"]
    assert not (tmp_path / "h").exists()


def test_bad_input_on_the_node_failed_before_running_anything():
    gpu = _load("loopback_bad_gpu.json")
    assert gpu["diagnosis"]["code"] == "unknown_gpu"
    assert "present: 0000:00:06.0" in gpu["diagnosis"]["message"]
    size = _load("loopback_bad_size.json")
    assert size["diagnosis"]["code"] == "bad_input" and "size must be 1.." in size["diagnosis"]["message"]
    for res in (gpu, size):
        assert res.get("bytes_compared") is None and res["helper_built"] is False


def test_the_verify_report_fails_the_node_with_the_module_diagnosis():
    record = gpudirect_verify.gpudirect_verify_record(_load("loopback_no_rdma.json"), "h100")
    table = "\n".join(gpudirect_verify.gpudirect_verify_fleet_table([record], ["h100"]))
    assert "no_rdma_device" in table and "h100" in table
    row = table.split("h100", 1)[1].splitlines()[0]
    assert "FAILED" in row and "passed" not in row


def test_corrupt_byte_in_gpu_memory_was_caught_on_the_node():
    res = _load("loopback_selftest_corrupt.json")
    assert res["diagnosis"]["code"] == "data_mismatch"
    assert (res["bytes_compared"], res["mismatches"], res["first_mismatch"]) == (1048576, 1, 1048576 // 2 + 1)


def _log(name):
    with open(os.path.join(CAPTURE, name)) as fh:
        return fh.read()


def _recap(text):
    (line,) = [ln for ln in text.splitlines() if ln.startswith("vm ") and "changed=" in ln]
    return dict(kv.split("=") for kv in line.split()[2:])


def test_driver_roles_on_the_node_changed_nothing_in_check_and_two_real_runs():
    for name in ("roles-check.log", "roles-run1.log", "roles-run2.log"):
        text = _log(name)
        recap = _recap(text)
        assert (recap["changed"], recap["failed"]) == ("0", "0"), name
        assert "580.159.04 (open) is installed outside the package manager" in text, name
        assert "peer memory: dmabuf" in text, name
        # the dma-buf reasons are the node's own: open module, driver, kernel, libibverbs
        assert "open kernel module; driver 580.159.04 >= 515" in text and "exports ibv_reg_dmabuf_mr" in text, name
        assert "nouveau: no module for 6.18.44-fc-v657-gpu, nothing to blacklist" in text, name


def test_another_branch_on_the_node_is_refused_before_any_change():
    text = _log("roles-other-branch.log")
    recap = _recap(text)
    assert (recap["changed"], recap["failed"]) == ("0", "1")
    assert "wanted: branch 570 (open)" in text and "nvidia-uninstall" in text
