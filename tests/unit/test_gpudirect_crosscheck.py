"""Parsers and judgment of the cross-checks (module_utils/gpudirect_crosscheck.py), on real outputs.

Every fixture's source is in tests/fixtures/crosscheck/README.md.
"""

import os

import pytest

from ansible.module_utils import gpudirect_crosscheck as xc

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "crosscheck")


def fixture(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read()


# --------------------------------------------------------------------------- ib_write_bw --help

def test_help_of_a_cuda_build_lists_every_gpu_option():
    caps = xc.perftest_help(fixture("ib_write_bw_help_cuda_h100.txt"))
    assert caps == {"cuda": True, "cuda_bus_id": True, "cuda_dmabuf": True, "report_gbits": True}
    for mode in xc.PERFTEST_MODES:
        assert xc.perftest_skip_reason(caps, mode) is None


def test_help_of_debian_perftest_has_no_cuda_and_says_so_for_gpu_modes():
    caps = xc.perftest_help(fixture("ib_write_bw_help_debian12.txt"))
    assert caps["cuda"] is False and caps["cuda_dmabuf"] is False and caps["report_gbits"] is True
    assert xc.perftest_skip_reason(caps, "host") is None
    reason = xc.perftest_skip_reason(caps, "cuda_peermem", "/usr/bin/ib_write_bw")
    assert reason.startswith("/usr/bin/ib_write_bw built without CUDA: no --use_cuda in its help")
    assert "cuda_dmabuf" in xc.perftest_skip_reason(caps, "cuda_dmabuf")


def test_a_cuda_build_without_dmabuf_skips_only_the_dmabuf_mode():
    text = "\n".join(line for line in fixture("ib_write_bw_help_cuda_h100.txt").splitlines()
                     if "dmabuf" not in line.lower() and "DMA-BUF" not in line)
    caps = xc.perftest_help(text)
    assert caps["cuda"] and not caps["cuda_dmabuf"]
    assert xc.perftest_skip_reason(caps, "cuda_peermem") is None
    assert "without CUDA DMA-BUF: no --use_cuda_dmabuf" in xc.perftest_skip_reason(caps, "cuda_dmabuf")


@pytest.mark.parametrize("text", ["", "ib_write_bw: command not found", None])
def test_text_that_is_not_the_help_is_refused(text):
    with pytest.raises(xc.CrosscheckError):
        xc.perftest_help(text)


# --------------------------------------------------------------------------- ib_write_bw output

def test_dmabuf_run_on_h200_reads_the_last_row_in_gbits_and_the_gpu_it_used():
    parsed = xc.parse_perftest(fixture("perftest_dmabuf_h200_dranet.txt"))
    assert parsed["bytes"] == 8388608 and parsed["iterations"] == 5000
    assert parsed["bw_average_gbps"] == pytest.approx(140.40)
    assert parsed["bw_peak_gbps"] == pytest.approx(140.55)
    assert (parsed["device"], parsed["gid_index"], parsed["link_type"]) == ("mlx5_3", 3, "Ethernet")
    assert parsed["cuda_devices"] == {0: "8F:00"} and parsed["cuda_picked"] == 0
    assert parsed["dmabuf"] is True
    assert xc.perftest_gpu_problem(parsed, "0000:8f:00.0") is None
    problem = xc.perftest_gpu_problem(parsed, "0000:90:00.0")
    assert "picked CUDA device 0 at PCIe 8F:00, not the GPU 0000:90:00.0" in problem


def test_host_memory_run_with_tabs_in_the_row():
    parsed = xc.parse_perftest(fixture("perftest_host_gbits_issue273.txt"))
    assert (parsed["bytes"], parsed["iterations"]) == (8, 224958464)
    assert parsed["bw_average_gbps"] == pytest.approx(0.48)
    assert (parsed["device"], parsed["gid_index"]) == ("ib0", 2)
    assert parsed["cuda_picked"] is None and parsed["dmabuf"] is False


def test_mib_per_second_is_converted_to_gbits():
    # the header perftest prints without --report_gbits (src/perftest_parameters.h RESULT_FMT), 2^20 bytes
    text = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
            " 65536      1000             1000.00            1000.00              0.016000\n")
    assert xc.parse_perftest(text)["bw_average_gbps"] == pytest.approx(1000 * 1048576 * 8 / 1e9)


@pytest.mark.parametrize("name", ["ib_write_bw_cuda_no_device_h100.txt", "ib_write_bw_dmabuf_no_device_h100.txt",
                                  "ib_write_bw_no_device_debian12.txt"])
def test_a_run_without_rdma_device_has_no_result_and_says_why(name):
    with pytest.raises(xc.CrosscheckError, match="Unable to find the Infiniband/RoCE device"):
        xc.parse_perftest(fixture(name))


def test_output_truncated_before_the_result_row_is_refused():
    text = fixture("perftest_dmabuf_h200_dranet.txt")
    cut = text[:text.index(" 2          5000")]
    with pytest.raises(xc.CrosscheckError, match="missing or empty"):
        xc.parse_perftest(cut)


def test_a_row_cut_in_the_middle_is_not_a_result():
    with pytest.raises(xc.CrosscheckError):
        xc.parse_perftest(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                          " 65536      664644")


def test_bus_id_run_is_checked_against_the_address_it_was_given():
    parsed = {"cuda_bus_id": "0000:00:06.0", "cuda_picked": None, "cuda_devices": {}}
    assert xc.perftest_gpu_problem(parsed, "0000:00:06.0") is None
    assert "used the GPU at 0000:00:06.0, not 0000:1b:00.0" in xc.perftest_gpu_problem(parsed, "0000:1b:00.0")


def test_old_perftest_that_does_not_name_the_gpu_does_not_prove_it():
    # perftest before --use_cuda=<id> (linux-rdma/perftest PR 21): "There are 4 devices supporting CUDA, picking first..."
    parsed = {"cuda_bus_id": None, "cuda_picked": None, "cuda_devices": {}}
    assert "did not say which GPU" in xc.perftest_gpu_problem(parsed, "0000:1b:00.0")


def test_cuda_index_follows_pci_order():
    gpus = ["0000:ca:00.0", "0000:17:00.0", "0000:e3:00.0", "0000:65:00.0"]
    assert [xc.cuda_index(g, gpus) for g in ("0000:17:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0")] \
        == [0, 1, 2, 3]
    with pytest.raises(xc.CrosscheckError, match="not among the node's GPUs"):
        xc.cuda_index("0000:1b:00.0", gpus)
    with pytest.raises(xc.CrosscheckError, match="not a PCI address"):
        xc.cuda_index("0", gpus)


def test_argv_uses_bus_id_when_the_binary_has_it_else_the_cuda_number():
    caps = {"cuda": True, "cuda_bus_id": True, "cuda_dmabuf": True}
    server = xc.perftest_argv("ib_write_bw", "cuda_dmabuf", "mlx5_0", 1, 3, 1048576, 100, 18515, "0000:1b:00.0", caps)
    assert server == ["ib_write_bw", "-d", "mlx5_0", "-i", "1", "-s", "1048576", "-n", "100", "-p", "18515", "-F",
                      "--report_gbits", "-x", "3", "--use_cuda_bus_id=0000:1b:00.0", "--use_cuda_dmabuf"]
    client = xc.perftest_argv("ib_write_bw", "cuda_peermem", "mlx5_0", gpu="0000:1b:00.0",
                              caps={"cuda": True}, cuda_device=2, server="127.0.0.1")
    assert "--use_cuda=2" in client and client[-1] == "127.0.0.1" and "-x" not in client
    host = xc.perftest_argv("ib_write_bw", "host", "rxe0", gid_index=1)
    assert not [a for a in host if "cuda" in a]
    with pytest.raises(xc.CrosscheckError):
        xc.perftest_argv("ib_write_bw", "cuda_peermem", "mlx5_0", caps={"cuda": True})
    with pytest.raises(xc.CrosscheckError):
        xc.perftest_argv("ib_write_bw", "host", "mlx5_0; reboot")


def test_ratio_reports_both_figures_and_names_the_knob_below_the_minimum():
    ok = xc.perftest_ratio(180.0, 190.0)
    assert ok["ok"] and ok["ratio"] == pytest.approx(0.9474, abs=1e-4)
    low = xc.perftest_ratio(90.0, 190.0, 0.8)
    assert not low["ok"]
    assert "module 90.00 Gbit/s / ib_write_bw 190.00 Gbit/s" in low["message"]
    assert "gpudirect_verify_perftest_min_ratio 0.800" in low["message"]
    assert xc.perftest_ratio(90.0, 0.0)["ratio"] is None
    with pytest.raises(xc.CrosscheckError):
        xc.perftest_ratio(None, 10.0)
    with pytest.raises(xc.CrosscheckError):
        xc.perftest_ratio(1.0, 10.0, -1)


# --------------------------------------------------------------------------- NCCL logs

def test_gdrdma_channels_of_an_a100_log():
    parsed = xc.parse_nccl_log(fixture("nccl_gdrdma_a100_issue707.txt"))
    nets = [c for c in parsed["channels"] if c["net"]]
    assert len(nets) == 12 and all(c["net"]["gdr"] for c in nets)
    first = parsed["channels"][0]
    assert (first["host"], first["channel"], first["src"], first["dst"], first["direction"]) == \
        ("10-90-43-152", 1, 2, 0, "receive")
    assert first["net"] == {"plugin": "IB", "net_dev": 5, "proxy_rank": None, "gdr": True, "shared": False}


def test_channels_without_gdrdma_fail_and_are_named():
    parsed = xc.parse_nccl_log(fixture("nccl_no_gdrdma_issue899.txt") + fixture("nccl_tests_summary_issue119.txt"))
    verdict = xc.judge_nccl(parsed, 0)
    assert verdict["status"] == "failed"
    assert len(verdict["problems"]) == 1
    assert verdict["problems"][0].startswith("11 of 11 NET channels did not use GPUDirect RDMA")
    assert "21346d5cefce channel 00 0->1 [receive] via NET/IB/0" in verdict["problems"][0]
    assert "6a5a91752e39" in verdict["problems"][0] and "and 3 more" in verdict["problems"][0]


def test_gdrdma_log_with_a_clean_summary_passes():
    parsed = xc.parse_nccl_log(fixture("nccl_gdrdma_a100_issue707.txt") + fixture("nccl_tests_summary_issue119.txt"))
    verdict = xc.judge_nccl(parsed, 0)
    assert verdict["status"] == "passed", verdict["problems"]
    assert verdict["gdr_channels"] == 12 and verdict["avg_bus_bandwidth"] == pytest.approx(84.8558)
    assert verdict["nics_used"] == ["NET/IB/0", "NET/IB/2", "NET/IB/4", "NET/IB/5"]


def test_exit_code_alone_never_passes():
    parsed = xc.parse_nccl_log(fixture("nccl_gdrdma_a100_issue707.txt") + fixture("nccl_tests_summary_issue119.txt"))
    assert "the command exited 1" in xc.judge_nccl(parsed, 1)["problems"]
    truncated = xc.parse_nccl_log(fixture("nccl_gdrdma_a100_issue707.txt"))
    problems = xc.judge_nccl(truncated, 0)["problems"]
    assert problems == ["nccl-tests printed no '# Out of bounds values' summary: the run did not finish or the "
                        "output is truncated"]


def test_p2p_only_on_one_node_proves_nothing():
    parsed = xc.parse_nccl_log(fixture("nccl_p2p_only_issue1773.txt") + fixture("nccl_tests_summary_issue119.txt"))
    verdict = xc.judge_nccl(parsed, 0)
    assert verdict["status"] == "failed"
    assert "no channel used the NET transport (only P2P)" in verdict["problems"][0]
    assert "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" in verdict["problems"][0]
    assert parsed["channels"][0]["transport"] == "P2P/direct pointer"


def test_two_node_run_without_nccl_debug_lines_is_not_proof():
    parsed = xc.parse_nccl_log(fixture("nccl_tests_2node_b200_dranet.txt"))
    assert parsed["hosts"] == ["nccl-gib-test-0", "nccl-gib-test-1"] and len(parsed["ranks"]) == 16
    assert parsed["out_of_bounds_ok"] and parsed["validated"] and parsed["rows"] == 6
    verdict = xc.judge_nccl(parsed, 0)
    assert verdict["status"] == "failed"
    assert verdict["problems"][0].startswith("ranks ran on 2 hosts (nccl-gib-test-0, nccl-gib-test-1), but NCCL "
                                             "printed no transport line")


def test_two_nodes_with_only_intra_node_channels_say_what_it_means():
    log = ("a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
           "b:2:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 9[1] via SHM/direct/direct\n")
    verdict = xc.judge_nccl(xc.parse_nccl_log(log + fixture("nccl_tests_summary_issue119.txt")), 0)
    assert "no channel used the NET transport" in verdict["problems"][0]
    parsed = xc.parse_nccl_log(log + fixture("nccl_tests_2node_b200_dranet.txt"))
    assert "ranks ran on 2 hosts" in xc.judge_nccl(parsed, 0)["problems"][0]
    assert "connections between the nodes are missing" in xc.judge_nccl(parsed, 0)["problems"][0]


def test_real_single_gpu_run_on_h100_connects_nothing():
    parsed = xc.parse_nccl_log(fixture("nccl_all_reduce_1gpu_h100.txt"))
    assert parsed["nccl_version"] == "2.28.3+cuda13.0"
    assert parsed["channels"] == []          # "Channel 00/64 : 0" lists a ring, not a connection
    assert parsed["nics"] == {"vm": {0: "eth0"}}
    assert parsed["out_of_bounds_ok"] and parsed["rows"] == 11 and parsed["validated"]
    verdict = xc.judge_nccl(parsed, 0)
    assert verdict["problems"] == ["the run had one rank (vm device 0): NCCL connected nothing, so no transport "
                                   "carried data and GPUDirect RDMA is not proven; run the test with ranks on "
                                   "several nodes"]


def test_unchecked_data_is_not_proof():
    parsed = xc.parse_nccl_log(fixture("nccl_all_reduce_1gpu_c0_h100.txt"))
    assert parsed["rows"] > 0 and not parsed["validated"]
    assert "did not check the data (#wrong is N/A: run without -c 0)" in " ".join(xc.judge_nccl(parsed, 0)["problems"])


def test_a_failed_test_run_is_named():
    parsed = xc.parse_nccl_log(fixture("nccl_sendrecv_g2_one_gpu_h100.txt"))
    problems = xc.judge_nccl(parsed, 5)["problems"]
    assert problems[0] == "the command exited 5" and "no '# Out of bounds values' summary" in problems[1]


def test_wrong_values_and_out_of_bounds_fail():
    summary = fixture("nccl_tests_summary_issue119.txt")
    bad = summary.replace("95.74      0   2660.4   50.06   95.94      0", "95.74      0   2660.4   50.06   95.94      3")
    bad = bad.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")
    parsed = xc.parse_nccl_log(fixture("nccl_gdrdma_a100_issue707.txt") + bad)
    problems = xc.judge_nccl(parsed, 0)["problems"]
    assert "nccl-tests found 3 out-of-bounds values" in problems
    assert "nccl-tests found wrong values (size 133169160: #wrong 3)" in problems


def test_current_nccl_lines_socket_pxn_and_nic_names():
    # the format of src/transport/net.cc (NCCL >= 2.12): "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d..."
    log = ("h1:10:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"
           "h1:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/1(1)/GDRDMA/Shared\n"
           "h1:10:11 [0] NCCL INFO Channel 01/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA(PCI)\n"
           "h1:10:11 [0] NCCL INFO Channel 02/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n")
    parsed = xc.parse_nccl_log(log)
    assert parsed["nics"] == {"h1": {0: "mlx5_0:1", 1: "mlx5_1:1"}}
    nets = [c["net"] for c in parsed["channels"]]
    assert nets[0] == {"plugin": "IB", "net_dev": 1, "proxy_rank": 1, "gdr": True, "shared": True}
    assert nets[1]["gdr"] and not nets[2]["gdr"] and nets[2]["plugin"] == "Socket"
    problem = xc.judge_nccl(parsed, 0)["problems"][-1]
    assert problem.startswith("1 of 3 NET channels did not use GPUDirect RDMA (no GDRDMA; TCP sockets)")
    assert "h1 channel 02 0->8 [send] via NET/Socket/0" in problem


def test_garbage_and_truncated_logs_give_no_proof():
    for text in ("", "\x00\x01 binary", "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via",
                 fixture("nccl_gdrdma_a100_issue707.txt")[:150]):
        assert xc.judge_nccl(xc.parse_nccl_log(text), 0)["status"] == "failed"
    with pytest.raises(xc.CrosscheckError):
        xc.parse_nccl_log(None)


# --------------------------------------------------------------------------- the role's record

def _pair(status, **kw):
    item = {"gpu": "0000:1b:00.0", "rdma_device": "mlx5_0", "mode": "cuda_dmabuf", "bandwidth_gbps": 180.0}
    return dict({"item": item, "status": status}, **kw)


def test_record_measured_pair_passes_and_reports_the_ratio():
    rec = xc.crosscheck_record({"results": [_pair("measured", bandwidth_gbps=190.0, ratio=0.9474, ratio_ok=True,
                                                  message="module 180.00 Gbit/s / ib_write_bw 190.00 Gbit/s = 0.947")]})
    assert not rec["failed"] and rec["perftest"]["status"] == "passed"
    assert rec["perftest"]["pairs"][0]["ratio"] == 0.9474
    assert rec["nccl_tests"]["reason"] == "no nccl-tests command set: gpudirect_verify_nccl_tests_command"
    assert "perftest 0000:1b:00.0 <-> mlx5_0: measured - module 180.00" in xc.crosscheck_lines(rec)[0]


def test_record_skip_is_a_reason_in_auto_and_a_failure_when_required():
    skipped = {"results": [_pair("skipped", reason="ib_write_bw built without CUDA: no --use_cuda in its help")]}
    auto = xc.crosscheck_record(skipped, "auto")
    assert not auto["failed"] and auto["perftest"]["status"] == "skipped"
    assert auto["perftest"]["reason"] == "ib_write_bw built without CUDA: no --use_cuda in its help"
    required = xc.crosscheck_record(skipped, "required")
    assert required["failed"]
    assert "gpudirect_verify_perftest is required, but ib_write_bw built without CUDA" in required["problems"][0]


def test_record_error_and_low_ratio_fail():
    err = xc.crosscheck_record({"results": [_pair("error", msg="gpudirect_perftest: no measurement within 120s")]})
    assert err["failed"] and "no measurement within 120s" in err["problems"][0]
    low = xc.crosscheck_record({"results": [_pair("measured", ratio=0.4, ratio_ok=False, message="... below "
                                                  "gpudirect_verify_perftest_min_ratio 0.800 ...")]}, "auto", 0.8)
    assert low["failed"] and low["perftest"]["pairs"][0]["status"] == "below_minimum"


def test_record_off_pair_mode_and_check_mode():
    assert xc.crosscheck_record(None, "off")["perftest"]["status"] == "off"
    assert "pair mode" in xc.crosscheck_record(None, "auto", pair_mode=True)["perftest"]["reason"]
    check = xc.crosscheck_record({"results": [_pair("would_run", message="check mode: would read ...")]}, "auto",
                                 nccl_command=["all_reduce_perf"], check_mode=True)
    assert check["perftest"]["status"] == "would_run" and check["nccl_tests"]["status"] == "would_run"
    assert not check["failed"]
    from_command = xc.crosscheck_record(None, "off", nccl_result={"skipped": True, "changed": False,
                                                                  "msg": "Command would have run if not in check mode"},
                                        nccl_command=["all_reduce_perf"])
    assert from_command["nccl_tests"]["status"] == "would_run"
    unmeasured = xc.crosscheck_record({"results": [{"skipped": True, "item": {"rdma_device": "mlx5_0"}}]})
    assert unmeasured["perftest"]["pairs"][0]["status"] == "not_run" and not unmeasured["failed"]


def test_record_nccl_result_is_judged_from_its_output():
    out = fixture("nccl_no_gdrdma_issue899.txt") + fixture("nccl_tests_summary_issue119.txt")
    rec = xc.crosscheck_record(None, "off", nccl_result={"rc": 0, "stdout": out, "stderr": ""},
                               nccl_command=["all_reduce_perf", "-g", "1"])
    assert rec["failed"] and rec["nccl_tests"]["status"] == "failed"
    assert rec["problems"][0].startswith("nccl-tests: 11 of 11 NET channels did not use GPUDirect RDMA")
    timed_out = xc.crosscheck_record(None, "off", nccl_result={"failed": True, "msg": "timed out"},
                                     nccl_command=["x"])
    assert timed_out["problems"] == ["nccl-tests: the nccl-tests command did not run: timed out"]


def test_record_refuses_bad_knobs():
    with pytest.raises(xc.CrosscheckError, match="auto, off, required"):
        xc.crosscheck_record(None, False)
    with pytest.raises(xc.CrosscheckError, match="list of strings"):
        xc.crosscheck_record(None, "auto", nccl_command="mpirun -np 2 all_reduce_perf")
    with pytest.raises(xc.CrosscheckError, match=">= 0"):
        xc.crosscheck_record(None, "auto", -0.5)


def test_merge_fails_a_passed_host_only():
    failed = {"failed": True, "problems": ["nccl-tests: 2 of 2 NET channels did not use GPUDirect RDMA"]}
    merged = xc.merge_into_record({"status": "passed", "result": "passed", "diagnosis": None}, failed)
    assert merged["status"] == "failed" and merged["diagnosis"]["code"] == "crosscheck_failed"
    assert merged["crosscheck"] is failed
    kept = xc.merge_into_record({"status": "not_proven", "diagnosis": {"code": "x"}}, failed)
    assert kept["status"] == "not_proven" and kept["diagnosis"] == {"code": "x"}
    assert xc.merge_into_record({"status": "passed"}, None) == {"status": "passed"}
    with pytest.raises(xc.CrosscheckError):
        xc.merge_into_record(None, failed)


def test_report_and_fleet_table_show_the_cross_checks():
    from ansible.errors import AnsibleFilterError
    import gpudirect_crosscheck as filters
    import gpudirect_verify as verify

    loopback = {"mode": "host", "mode_reason": "requested", "rdma_device": "ib0", "port": 1, "bytes_compared": 8,
                "mismatches": 0, "bandwidth_gbps": 0.45, "diagnosis": None, "selection": {}}
    inputs = {"result": {"results": [loopback]}, "host": "node1", "time": "t", "gpu_count": 0, "coverage": "nearest"}
    assert verify.gpudirect_verify_verdict(inputs)["status"] == "passed"
    cross = filters.gpudirect_verify_crosscheck(
        {"results": [{"item": loopback, "status": "measured", "bandwidth_gbps": 0.48, "ratio": 0.9375,
                      "ratio_ok": True, "message": "module 0.45 Gbit/s / ib_write_bw 0.48 Gbit/s = 0.938"}]},
        "auto", 0, {"rc": 0, "stdout": fixture("nccl_no_gdrdma_issue899.txt") + fixture("nccl_tests_summary_issue119.txt")},
        ["all_reduce_perf"], False, False)
    merged = verify.gpudirect_verify_verdict(dict(inputs, crosscheck=cross))
    assert merged["status"] == "failed" and merged["diagnosis"]["code"] == "crosscheck_failed"
    page = verify.gpudirect_verify_report_md(merged)
    assert "## Cross-checks (perftest, nccl-tests)" in page
    assert "- perftest host memory <-> ib0: measured - module 0.45 Gbit/s / ib_write_bw 0.48 Gbit/s = 0.938" in page
    assert "- nccl-tests: failed - 11 of 11 NET channels did not use GPUDirect RDMA" in page
    table = verify.gpudirect_verify_fleet_table([merged], ["node1"])
    assert "  node1: perftest host memory <-> ib0: measured - module 0.45 Gbit/s / ib_write_bw 0.48 Gbit/s = 0.938" \
        in table
    assert any(line.startswith("  node1: nccl-tests: failed - 11 of 11 NET channels") for line in table)
    with pytest.raises(AnsibleFilterError, match="gpudirect_verify_nccl_tests_command must be a list"):
        filters.gpudirect_verify_crosscheck(None, "auto", 0, None, "all_reduce_perf -g 1")
