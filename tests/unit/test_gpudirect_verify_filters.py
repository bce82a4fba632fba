"""Verification records, per-host Markdown and the fleet table (filter_plugins/gpudirect_verify.py).

Results are the module's own: tests/fixtures/loopback/vm_rxe_host_pass.json and
vm_rxe_host_corrupt.json are gpudirect_loopback results captured on the soft-RoCE VM
(a passing host-memory run, and a run with _corrupt_one_byte). The role registers the
module with ``failed_when: false``; ``as_registered`` reproduces what ansible-core
2.19 then stores (``failed`` false, ``failed_when_result``, and for a failed module
``failed_when_suppressed_exception``), so the judgment is tested on that shape too.
The GPU-mode result is the captured pass with the fields a GPU mode adds (RETURN:
gpu, staged_bandwidth_gbps, speedup, selection distance) filled in, marked as such.
"""

import copy
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_verify as verify
from conftest import PROJECT_FIXTURES


def load(name):
    with open(os.path.join(PROJECT_FIXTURES, "loopback", name)) as handle:
        return json.load(handle)


PASS = load("vm_rxe_host_pass.json")
CORRUPT = load("vm_rxe_host_corrupt.json")


def as_registered(result):
    """What ``register`` holds for a task with ``failed_when: false`` (ansible-core 2.19)."""
    registered = copy.deepcopy(result)
    if registered.get("failed"):
        registered["failed_when_suppressed_exception"] = "(traceback unavailable)"
    registered["failed"] = False
    registered["failed_when_result"] = False
    return registered


def gpu_pass():
    """The captured pass with the fields of a GPU mode filled in (not a capture)."""
    result = copy.deepcopy(PASS)
    result.update(mode="cuda_dmabuf", mode_reason="auto: dma-buf (open NVIDIA module, kernel support)",
                  rdma_device="mlx5_0", gpu="0000:1b:00.0", gpu_name="NVIDIA H200", gid_index=3,
                  bandwidth_gbps=361.42, port_rate_gbps=400.0, ratio_port=0.9036, pcie_gbps=504.1,
                  ratio_pcie=0.717, staged_bandwidth_gbps=141.7, speedup=2.551, bytes_compared=1048576,
                  selection={"reason": "closest pair by topology (PIX) among 8", "distance": "PIX",
                             "rdma_pci_address": "0000:1a:00.0"},
                  path_warnings=[])
    return result


# ---------------------------------------------------------------- passed

@pytest.mark.parametrize("shape", [lambda r: r, as_registered], ids=["raw", "registered_failed_when_false"])
def test_captured_pass_is_passed_with_its_figures(shape):
    record = verify.gpudirect_verify_record(shape(PASS), "node1", None, False, "2026-11-22T07:00:00Z")
    assert record["status"] == "passed" and record["result"] == "passed"
    assert record["diagnosis"] is None
    assert record["host"] == "node1" and record["time"] == "2026-11-22T07:00:00Z"
    assert record["mode"] == "host" and record["rdma_device"] == "rxe0" and record["port"] == 1
    assert record["bytes_compared"] == 65536 and record["mismatches"] == 0
    assert record["bandwidth_gbps"] == 0.1393 and record["ratio_port"] == 0.0557 and record["ratio_pcie"] == 0.0697
    assert record["pair"] == "rxe0 port 1 <-> host memory"
    assert record["selection_reason"] == "the only RDMA device"
    assert record["rdma_pci_address"] == "0000:01:00.0"
    assert record["notes"] == []      # mode host was requested, not a fallback


def test_record_is_json_and_keeps_the_module_result_without_the_facts():
    result = copy.deepcopy(PASS)
    result["invocation"]["module_args"]["facts"] = {"gpus": ["big"]}
    record = verify.gpudirect_verify_record(result, "node1")
    text = json.dumps(record, sort_keys=True)
    assert '"big"' not in text
    module = record["module_result"]
    assert "invocation" not in module and not [k for k in module if k.startswith("_ansible")]
    assert module["module_args"]["size"] == 65536 and "facts" not in module["module_args"]
    assert module["helper"]["ok"] == 1


def test_gpu_mode_pair_staged_path_and_speedup():
    record = verify.gpudirect_verify_record(gpu_pass(), "gpu1")
    assert record["status"] == "passed"
    assert record["pair"] == "mlx5_0 port 1 <-> GPU 0000:1b:00.0 (PIX)"
    page = verify.gpudirect_verify_report_md(record)
    assert "| staged path (host memory, then copy) | 141.70 Gbit/s |" in page
    assert "| GPUDirect speedup over staged | 2.55x |" in page
    assert "| bandwidth | 361.42 Gbit/s |" in page
    assert "| ratio of port rate | 0.904 |" in page
    assert "| GPU | 0000:1b:00.0 NVIDIA H200 |" in page


def test_host_mode_without_staged_fields_has_no_staged_rows():
    page = verify.gpudirect_verify_report_md(verify.gpudirect_verify_record(PASS, "node1"))
    assert "staged" not in page and "speedup" not in page
    assert page.startswith("# GPUDirect RDMA verification: node1\n")
    assert "| result | **passed** |" in page and "| diagnosis | none |" in page
    assert "| bytes compared | 65536 |" in page and "| mismatches | 0 |" in page


FALLBACK = "auto: neither dma-buf nor a peer-memory module available; host memory only"   # resolve_mode's words


@pytest.mark.parametrize("check_mode, status", [(False, "not_proven"), (True, "would_fail")])
def test_auto_falling_back_to_host_memory_on_a_gpu_node_is_not_proven_and_fails(check_mode, status):
    """The captured host-memory pass, as mode auto reports it on a node with GPUs but
    neither dma-buf nor a peer-memory module: every byte matched, yet GPUDirect is not proven."""
    result = copy.deepcopy(PASS)
    result["mode_reason"] = FALLBACK
    if check_mode:
        result = {"changed": False, "mode": "host", "mode_reason": FALLBACK, "rdma_device": "rxe0", "port": 1,
                  "diagnosis": None, "would_run": [PASS["command"]], "selection": {}}
    record = verify.gpudirect_verify_record(result, "gpu2", None, check_mode, None, 8)
    assert record["status"] == status and status in verify.FAILING + (verify.WOULD_FAIL,)
    diag = record["diagnosis"]
    assert diag["code"] == "not_proven" and "GPU memory was not tested" in diag["message"]
    assert "8 GPUs" in diag["message"] and FALLBACK in diag["message"]
    assert "nvidia_peermem" in diag["fix"] and "gpudirect_verify_mode: host" in diag["fix"]
    assert record["memory"] == "host memory (GPU memory not tested)"
    if not check_mode:
        table = verify.gpudirect_verify_fleet_table([record])
        assert table[3].split()[:2] == ["gpu2", "NOT"] and table[3].split()[-1] == "not_proven"
        assert table[4] == "  1 NOT PROVEN"
        assert "## Diagnosis: not_proven" in verify.gpudirect_verify_report_md(record)


def test_host_memory_requested_passes_labelled_as_such():
    result = copy.deepcopy(PASS)
    assert result["mode"] == "host" and result["mode_reason"] == "requested"   # the VM capture asked for host
    record = verify.gpudirect_verify_record(result, "gpu2", None, False, None, 8)
    assert record["status"] == "passed" and record["diagnosis"] is None
    assert record["memory"] == "host memory only (requested)"
    assert "| memory written by the NIC | host memory only (requested) |" in verify.gpudirect_verify_report_md(record)
    assert "host memory (requested)" in verify.gpudirect_verify_fleet_table([record])[3]


@pytest.mark.parametrize("reason, gpus", [("auto: no GPU", 0), ("auto: no GPU", None), ("requested", 0)])
def test_a_node_without_gpu_passes_in_host_memory_labelled_no_gpu(reason, gpus):
    """The VM test node: no GPU in the facts, soft-RoCE; host memory is all there is to prove."""
    result = copy.deepcopy(PASS)
    result["mode_reason"] = reason
    record = verify.gpudirect_verify_record(result, "vm", None, False, None, gpus)
    assert record["status"] == "passed" and record["notes"] == []
    assert record["memory"] == "no GPU: RDMA path proven with host memory"
    assert "no GPU (host memory)" in verify.gpudirect_verify_fleet_table([record])[3]


# ---------------------------------------------------------------- failed

@pytest.mark.parametrize("shape", [lambda r: r, as_registered], ids=["raw", "registered_failed_when_false"])
def test_captured_corruption_fails_with_the_module_diagnosis(shape):
    record = verify.gpudirect_verify_record(shape(CORRUPT), "node1")
    assert record["status"] == "failed" and record["result"] == "FAILED"
    diag = record["diagnosis"]
    assert diag["code"] == "data_mismatch"
    assert diag["message"] == CORRUPT["diagnosis"]["message"] and diag["fix"] == CORRUPT["diagnosis"]["fix"]
    assert record["mismatches"] == 1 and record["first_mismatch"] == 32769
    page = verify.gpudirect_verify_report_md(record)
    assert "| result | **FAILED** |" in page
    assert "| mismatches | 1 (first at offset 32769) |" in page
    assert "## Diagnosis: data_mismatch" in page
    assert "**What to do:** Data was corrupted on the path" in page


def test_failure_with_path_warnings_and_related_lines_in_the_page():
    result = as_registered(CORRUPT)
    result["path_warnings"] = ["GPU 0000:1b:00.0 and mlx5_0 are SYS apart"]
    result["diagnosis"]["related"] = ["ACS ReqRedir on 0000:17:02.0"]
    page = verify.gpudirect_verify_report_md(verify.gpudirect_verify_record(result, "n"))
    assert "## Path warnings\n\n- GPU 0000:1b:00.0 and mlx5_0 are SYS apart" in page
    assert "- ACS ReqRedir on 0000:17:02.0" in page


def test_bandwidth_below_minimum_is_a_failure_even_with_intact_data():
    result = copy.deepcopy(PASS)
    result.update(failed=True, diagnosis={"code": "bandwidth_below_minimum", "message": "0.139 Gbit/s is 0.056 of",
                                          "fix": "Check the path warnings", "related": []})
    record = verify.gpudirect_verify_record(as_registered(result), "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "bandwidth_below_minimum"
    assert record["bandwidth_gbps"] == 0.1393


# ---------------------------------------------------------------- skipped

def test_skip_for_a_pending_reboot_carries_the_message():
    skip = {"code": "reboot_pending", "message": "reboot required: gpudirect_nvidia_driver: x; verification skipped until "
            "the node has rebooted", "fix": "reboot the node"}
    record = verify.gpudirect_verify_record(PASS, "node3", skip)    # the result is ignored when skipping
    assert record["status"] == "skipped" and record["result"] == "skipped"
    assert record["diagnosis"]["code"] == "reboot_pending"
    assert record["bytes_compared"] is None and record["module_result"] is None and record["pair"] == "-"
    page = verify.gpudirect_verify_report_md(record)
    assert "## Why it was skipped" in page and "reboot required: gpudirect_nvidia_driver: x" in page
    assert "| bytes compared |" not in page     # a skipped page shows no empty figures


def test_empty_skip_means_run():
    assert verify.gpudirect_verify_record(PASS, "n", {})["status"] == "passed"


def test_skip_without_code_is_rejected():
    with pytest.raises(AnsibleFilterError, match="skip must be"):
        verify.gpudirect_verify_record(None, "n", {"message": "why"})


def test_a_skipped_task_result_is_skipped():
    record = verify.gpudirect_verify_record({"changed": False, "skipped": True, "skip_reason": "Conditional result "
                                             "was False"}, "n")
    assert record["status"] == "skipped" and record["diagnosis"]["code"] == "task_skipped"


# ---------------------------------------------------------------- check mode

def test_check_mode_reports_what_would_run():
    would = [["cc", "-O2", "-o", "/var/lib/gpudirect/loopback/x/helper"], PASS["command"]]
    result = {"changed": True, "mode": "host", "mode_reason": "requested", "rdma_device": "rxe0", "port": 1,
              "gpu": None, "selection": PASS["selection"], "diagnosis": None, "path_warnings": [],
              "helper_built": False, "would_run": would}
    record = verify.gpudirect_verify_record(result, "n", None, True)
    assert record["status"] == "would_run" and record["result"] == "check: would run"
    assert record["would_run"] == would and record["check_mode"] is True
    assert "## Would run (check mode)" in verify.gpudirect_verify_report_md(record)


def test_check_mode_failure_would_fail_and_is_not_failed():
    record = verify.gpudirect_verify_record(as_registered(CORRUPT), "n", None, True)
    assert record["status"] == "would_fail" and record["diagnosis"]["code"] == "data_mismatch"


# ---------------------------------------------------------------- malformed and missing

@pytest.mark.parametrize("result", [None, {}, "text", []], ids=["none", "empty", "string", "list"])
def test_no_result_is_a_failure(result):
    record = verify.gpudirect_verify_record(result, "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "no_result"


@pytest.mark.parametrize("drop", ["bytes_compared", "mismatches"])
def test_success_without_evidence_is_not_passed(drop):
    result = copy.deepcopy(PASS)
    del result[drop]
    record = verify.gpudirect_verify_record(result, "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "result_malformed"


@pytest.mark.parametrize("compared", [0, True, "65536", None])
def test_bytes_compared_must_be_a_positive_integer(compared):
    result = copy.deepcopy(PASS)
    result["bytes_compared"] = compared
    assert verify.gpudirect_verify_record(result, "n")["diagnosis"]["code"] == "result_malformed"


def test_mismatches_without_a_diagnosis_still_fail():
    result = copy.deepcopy(PASS)
    result.update(mismatches=3, first_mismatch=17)
    record = verify.gpudirect_verify_record(result, "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "data_mismatch"
    assert "3 of 65536 bytes" in record["diagnosis"]["message"]


def test_diagnosis_with_missing_fields_is_completed():
    result = as_registered(CORRUPT)
    result["diagnosis"] = {"message": None}
    diag = verify.gpudirect_verify_record(result, "n")["diagnosis"]
    assert diag["code"] == "unknown" and diag["message"] == CORRUPT["msg"] and diag["fix"] == "" \
        and diag["related"] == []


def test_undiagnosed_module_error_keeps_the_message():
    # the shape ansible-core 2.19 registers for an argument error under failed_when: false
    result = {"changed": False, "failed": False, "failed_when_result": False,
              "failed_when_suppressed_exception": "(traceback unavailable)",
              "msg": "Unsupported parameters for (gpudirect_loopback) module: bogus."}
    record = verify.gpudirect_verify_record(result, "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "module_error"
    assert record["diagnosis"]["message"].startswith("Unsupported parameters")


def test_crash_without_message_is_a_module_error():
    # a module that raised: 2.19 keeps only these keys under failed_when: false
    result = {"changed": False, "failed": False, "failed_when_result": False,
              "failed_when_suppressed_exception": "(traceback unavailable)"}
    record = verify.gpudirect_verify_record(result, "n")
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "module_error"


def test_unreachable_is_a_failure():
    record = verify.gpudirect_verify_record({"unreachable": True, "msg": "ssh: timed out"}, "n")
    assert record["diagnosis"]["code"] == "module_error" and record["diagnosis"]["message"] == "ssh: timed out"


def test_markdown_cells_are_escaped():
    result = copy.deepcopy(PASS)
    result["selection"]["reason"] = "a | b\nc"
    page = verify.gpudirect_verify_report_md(verify.gpudirect_verify_record(result, "n"))
    assert "| selected because | a \\| b c |" in page


@pytest.mark.parametrize("bad", [None, {}, {"host": "n"}, "passed"])
def test_report_md_rejects_what_is_not_a_record(bad):
    with pytest.raises(AnsibleFilterError, match="expects a record"):
        verify.gpudirect_verify_report_md(bad)


# ---------------------------------------------------------------- fleet table

def fleet():
    return [
        verify.gpudirect_verify_record(PASS, "node1"),
        verify.gpudirect_verify_record(as_registered(CORRUPT), "node2"),
        verify.gpudirect_verify_record(None, "node3", {"code": "reboot_pending", "message": "reboot required: x"}),
        verify.gpudirect_verify_record(gpu_pass(), "gpu-node-with-a-long-name"),
    ]


def test_fleet_table_one_line_per_host_in_play_order():
    hosts = ["gpu-node-with-a-long-name", "node1", "node2", "node3", "node4"]
    lines = verify.gpudirect_verify_fleet_table(fleet(), hosts)
    assert lines[0] == "GPUDirect RDMA verification: 5 hosts"
    assert lines[1].split() == ["host", "result", "mode", "GPU", "NIC", "distance", "bytes", "Gbit/s", "of", "port",
                                "verdict", "diagnosis"]
    rows = lines[3:8]
    assert [r.split()[0] for r in rows] == hosts
    assert rows[0].split() == ["gpu-node-with-a-long-name", "passed", "cuda_dmabuf", "0000:1b:00.0", "mlx5_0/1",
                               "PIX", "1048576", "361.42", "0.904", "passed", "-"]
    assert rows[1].split() == ["node1", "passed", "host", "host", "memory", "(requested)", "rxe0/1", "-", "65536",
                               "0.14", "0.056", "passed", "-"]
    assert rows[2].split()[:3] == ["node2", "FAILED", "host"] and rows[2].split()[-1] == "data_mismatch"
    assert rows[3].split()[:2] == ["node3", "skipped"] and rows[3].split()[-1] == "reboot_pending"
    assert rows[4].split()[:3] == ["node4", "not", "run"]
    assert lines[8] == "  2 passed, 1 FAILED, 1 skipped, 1 not run"
    # the message of every host that did not pass follows the table
    assert lines[9].startswith("  node2: The destination differs") and "What to do:" in lines[9]
    assert lines[10] == "  node3: reboot required: x"


def test_fleet_table_columns_line_up():
    lines = verify.gpudirect_verify_fleet_table(fleet(), ["node1"])
    header, rule, rows = lines[1], lines[2], lines[3:7]
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    assert len(starts) == len(verify.TABLE_COLUMNS)
    for row in [header] + rows:
        for start in starts:
            assert row[start - 1] == " " and row[start] != " "


def test_fleet_table_lists_hosts_not_in_the_host_list_after_it_and_ignores_none():
    lines = verify.gpudirect_verify_fleet_table([None] + fleet()[:2], ["node2"])
    assert [line.split()[0] for line in lines[3:5]] == ["node2", "node1"]


def test_fleet_table_without_hosts():
    assert verify.gpudirect_verify_fleet_table([], []) == ["GPUDirect RDMA verification: 0 hosts", "  no hosts"]
    assert verify.gpudirect_verify_fleet_table(None)[0] == "GPUDirect RDMA verification: 0 hosts"


def test_fleet_table_accepts_a_single_record():
    assert verify.gpudirect_verify_fleet_table(fleet()[0])[3].split()[:2] == ["node1", "passed"]


@pytest.mark.parametrize("bad", [[{"host": "x"}], ["passed"], "node1", 3])
def test_fleet_table_rejects_what_is_not_records(bad):
    with pytest.raises(AnsibleFilterError):
        verify.gpudirect_verify_fleet_table(bad)


def test_check_mode_rows_say_so():
    result = {"changed": False, "mode": "host", "rdma_device": "rxe0", "port": 1, "diagnosis": None,
              "would_run": [PASS["command"]], "selection": {}}
    lines = verify.gpudirect_verify_fleet_table([verify.gpudirect_verify_record(result, "n", None, True)])
    assert lines[3].split()[1:4] == ["check:", "would", "run"]
    assert lines[4] == "  1 check: would run"


def test_filters_are_registered():
    names = verify.FilterModule().filters()
    assert set(names) == {"gpudirect_verify_verdict", "gpudirect_verify_report_md",
                          "gpudirect_verify_fleet_table", "gpudirect_verify_pairs", "gpudirect_verify_missing_packages",
                          "gpudirect_verify_topo_notes",
                          "gpudirect_verify_ring_plan"}


# ---------------------------------------------------------------- several pairs (coverage)

def loop_of(*results):
    """What ``register`` holds for the module task looped over the planned pairs."""
    items = [{"gpu": "0000:1b:00.0", "nic": "mlx5_0", "distance": "PIX"},
             {"gpu": "0000:2b:00.0", "nic": "mlx5_1", "distance": "PIX"}]
    out = []
    for result, item in zip(results, items):
        registered = as_registered(result)
        registered.update(item=item, ansible_loop_var="item")
        out.append(registered)
    return {"changed": False, "msg": "All items completed", "results": out}


def second_gpu(result):
    result = copy.deepcopy(result)
    result.update(mode="cuda_dmabuf", mode_reason="auto: dma-buf (open NVIDIA module, kernel support)",
                  rdma_device="mlx5_1", gpu="0000:2b:00.0", gpu_name="NVIDIA H200",
                  selection={"reason": "named rdma_device and gpu", "distance": "PIX", "rdma_pci_address": "0000:2a:00.0"})
    return result


def test_every_pair_passing_passes_the_host_and_lists_each_pair():
    record = verify.gpudirect_verify_record(loop_of(gpu_pass(), second_gpu(gpu_pass())), "gpu1", None, False,
                                            "t", 2, "nearest")
    assert record["status"] == "passed" and record["coverage"] == "nearest"
    assert [(p["gpu"], p["rdma_device"], p["distance"], p["status"]) for p in record["pairs"]] == [
        ("0000:1b:00.0", "mlx5_0", "PIX", "passed"), ("0000:2b:00.0", "mlx5_1", "PIX", "passed")]
    page = verify.gpudirect_verify_report_md(record)
    assert "| pairs tested | 2 (coverage nearest) |" in page
    assert "| 0000:2b:00.0 | mlx5_1/1 | PIX | 1048576 | 361.42 | 0.904 | passed | - |" in page
    table = verify.gpudirect_verify_fleet_table([record])
    assert [row.split()[3:6] for row in table[3:5]] == [["0000:1b:00.0", "mlx5_0/1", "PIX"],
                                                        ["0000:2b:00.0", "mlx5_1/1", "PIX"]]
    assert table[5] == "  1 passed"   # hosts are counted, not pairs


def test_one_corrupted_pair_fails_the_host_and_is_named():
    corrupt = second_gpu(CORRUPT)
    record = verify.gpudirect_verify_record(loop_of(gpu_pass(), corrupt), "gpu1", None, False, "t", 2, "nearest")
    assert record["status"] == "failed"
    assert [p["status"] for p in record["pairs"]] == ["passed", "failed"]
    assert record["diagnosis"]["code"] == "data_mismatch"
    assert record["diagnosis"]["message"].startswith("mlx5_1 port 1 <-> GPU 0000:2b:00.0 (PIX) (1 of 2 pairs did "
                                                     "not pass): ")
    assert record["mismatches"] == CORRUPT["mismatches"]   # the top-level figures are the failing pair's
    rows = verify.gpudirect_verify_fleet_table([record])[3:5]
    assert rows[0].split()[-2:] == ["passed", "-"] and rows[1].split()[-2:] == ["FAILED", "data_mismatch"]
