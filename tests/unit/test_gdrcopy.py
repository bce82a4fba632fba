"""GDRCopy output parsers (plugin_utils/gpudirect_gdrcopy.py) on NVIDIA's published outputs.

Fixtures and their sources: tests/fixtures/gdrcopy/README.md.
"""

import os

import pytest

from ansible.module_utils import gpudirect_gdrcopy as g

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gdrcopy")


def read(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def test_sanity_pass_readme_output():
    p = g.parse_sanity(read("sanity-pass-v100.txt"), 0)
    assert (p["total"], p["passed"], p["failed"], p["waived"]) == (28, 28, 0, 0)
    assert p["ok"] is True and p["format"] == "summary"
    assert len(p["passed_tests"]) == 28
    assert p["passed_tests"][0] == "basic_child_thread_pins_buffer_cumemalloc"
    assert p["failed_tests"] == [] and p["waived_tests"] == []
    assert g.sanity_summary(p) == "gdrcopy_sanity: 28 passed, 0 failed, 0 waived of 28"


def test_sanity_failure_lists_the_failed_and_waived_tests():
    p = g.parse_sanity(read("sanity-fail-format-v2.6.txt"), 1)
    assert (p["total"], p["passed"], p["failed"], p["waived"]) == (28, 26, 1, 1)
    assert p["failed_tests"] == ["invalidation_fork_after_gdr_map_cumemalloc"]
    assert p["waived_tests"] == ["basic_with_tokens"]
    assert p["ok"] is False
    assert "failed: invalidation_fork_after_gdr_map_cumemalloc" in g.sanity_summary(p)
    assert g.sanity_summary(p).endswith("exit status 1")


def test_sanity_nonzero_exit_fails_even_with_clean_counts():
    # NVIDIA/gdrcopy#156: the summary could read clean although tests failed
    p = g.parse_sanity(read("sanity-pass-v100.txt"), 1)
    assert p["ok"] is False


def test_sanity_old_libcheck_format():
    p = g.parse_sanity(read("sanity-pass-check-v2.2.txt"), 0)
    assert p["format"] == "libcheck" and (p["total"], p["passed"], p["failed"]) == (15, 15, 0)
    assert p["ok"] is True
    p = g.parse_sanity("57%: Checks: 7, Failures: 2, Errors: 1\n", 1)
    assert (p["passed"], p["failed"], p["ok"]) == (4, 3, False)


@pytest.mark.parametrize("text", ["", "gdr_open: error opening driver (errno=2/No such file or directory)\n",
                                  "Total: 28, Passed: x\n"])
def test_sanity_without_summary_raises_with_the_last_lines(text):
    with pytest.raises(g.GdrcopyOutputError) as exc:
        g.parse_sanity(text, 1)
    assert "no summary line" in str(exc.value)
    if text.strip():
        assert text.strip()[:20] in str(exc.value)


def test_copybw_readme_output():
    p = g.parse_copybw(read("copybw-v100.txt"), 0)
    assert p["write_mib_s"] == pytest.approx(9638.54) and p["read_mib_s"] == pytest.approx(530.135)
    # MB in copybw.cpp is bytes/1024/1024
    assert p["write_gbs"] == pytest.approx(9638.54 * 1048576 / 1e9, abs=0.001)
    assert p["read_gbs"] == pytest.approx(0.556, abs=0.001)
    assert (p["device"], p["gpu_name"], p["bus_id"], p["size"]) == (0, "Tesla V100-SXM2-32GB", "0000:06:00", 131072)
    assert g.copybw_summary(p) == ("gdrcopy_copybw on GPU 0 (Tesla V100-SXM2-32GB, 0000:06:00), 131072 bytes: "
                                   "write 10.11 GB/s, read 0.56 GB/s")


def test_copybw_other_size():
    p = g.parse_copybw(read("copybw-v100-64k.txt"), 0)
    assert p["size"] == 65536 and p["write_mib_s"] == pytest.approx(9768.3)


def test_copybw_without_bandwidth_lines_raises():
    text = read("copybw-v100.txt").split("writing test")[0]
    with pytest.raises(g.GdrcopyOutputError, match="write BW"):
        g.parse_copybw(text, 1)


def test_judge_pass_fail_and_skip():
    ok = g.judge({"stdout": read("sanity-pass-v100.txt"), "rc": 0}, {"stdout": read("copybw-v100.txt"), "rc": 0})
    assert ok["status"] == "passed" and ok["sanity"]["passed"] == 28 and ok["copybw"]["size"] == 131072
    assert "28 passed" in ok["summary"] and "write 10.11 GB/s" in ok["summary"]
    bad = g.judge({"stdout": read("sanity-fail-format-v2.6.txt"), "rc": 1},
                  {"stdout": read("copybw-v100.txt"), "rc": 0})
    assert bad["status"] == "failed" and "invalidation_fork_after_gdr_map_cumemalloc" in bad["reason"]
    broken = g.judge({"stdout": "", "stderr": "gdr_open failed", "rc": 1}, None)
    assert broken["status"] == "failed" and "gdr_open failed" in broken["reason"]
    # copybw stopping early fails the check too: it never measured anything
    nobw = g.judge({"stdout": read("sanity-pass-v100.txt"), "rc": 0}, {"stdout": "selecting device 0\n", "rc": 1})
    assert nobw["status"] == "failed" and "write BW" in nobw["reason"]
    skipped = g.judge(missing="gdrcopy_sanity and gdrcopy_copybw are not installed")
    assert skipped["status"] == "skipped" and "not installed" in skipped["summary"]


# ---- A node without GPU (the test nodes): what the real 2.5.1 tools print there ----

def no_gpu_runs():
    """The registered runs of both tools on a node with no GPU (the stand-in prints exactly these)."""
    return ({"stdout": read("sanity-no-gpu-v2.5.1.stdout"), "stderr": read("sanity-no-gpu-v2.5.1.stderr"), "rc": 1},
            {"stdout": "", "stderr": read("copybw-no-gpu-v2.5.1.stderr"), "rc": 1})


def test_no_gpu_outputs_are_the_real_formats():
    sanity, copybw = no_gpu_runs()
    p = g.parse_sanity(sanity["stdout"], 1)
    assert (p["total"], p["passed"], p["failed"], p["waived"], p["ok"]) == (36, 0, 36, 0, False)
    assert p["failed_tests"][0] == "attributes_sanity" and p["failed_tests"] == sorted(p["failed_tests"])
    # 35 tests stop in init_cuda's cuInit (sanity.cpp:68); attributes_sanity in gdr_open_safe
    assert g.tool_errors(sanity["stderr"]) == [("CUDA error: CUDA_ERROR_NO_DEVICE", 35),
                                               ("gdr_open error: Is gdrdrv driver installed and loaded?", 1)]
    assert sanity["stderr"].count('Assertion "CUDA_SUCCESS == result" failed at sanity.cpp:68') == 35
    with pytest.raises(g.GdrcopyOutputError, match="CUDA_ERROR_NO_DEVICE"):
        g.parse_copybw(copybw["stdout"] + copybw["stderr"], 1)


def test_no_gpu_node_is_not_measured_in_the_tools_own_words():
    sanity, copybw = no_gpu_runs()
    check = g.judge(sanity, copybw, None, gpu_count=0)
    assert check["status"] == "not_measured"
    assert check["summary"].startswith("GDRCopy not measured: no NVIDIA GPU on this node")
    assert check["summary"] == "GDRCopy not measured: " + check["reason"]
    assert ("gdrcopy_sanity exited 1 with 0 of 36 tests passed: 'CUDA error: CUDA_ERROR_NO_DEVICE' "
            "(no CUDA-capable device is detected) 35 times, 'gdr_open error: Is gdrdrv driver installed and loaded?'"
            ) in check["reason"]
    assert ("gdrcopy_copybw exited 1 before printing a bandwidth: 'CUDA error: CUDA_ERROR_NO_DEVICE' "
            "(no CUDA-capable device is detected)") in check["reason"]
    # nothing that reads as a measurement
    assert check["copybw"] is None and "GB/s" not in check["summary"] and "MB/s" not in check["summary"]
    assert check["sanity"]["total"] == 36 and check["sanity"]["passed"] == 0


def test_no_gpu_node_with_one_tool_only():
    sanity, copybw = no_gpu_runs()
    check = g.judge(None, copybw, None, gpu_count=0)
    assert check["status"] == "not_measured" and "gdrcopy_sanity" not in check["reason"]
    check = g.judge({"stdout": "", "stderr": "gdrcopy_sanity: error while loading shared libraries: libcuda.so.1: "
                     "cannot open shared object file: No such file or directory", "rc": 127}, None, None, 0)
    assert check["status"] == "not_measured"
    assert "exited 127 before its summary: 'gdrcopy_sanity: error while loading shared libraries" in check["reason"]


def test_a_gpu_node_whose_tools_fail_still_fails():
    sanity, copybw = no_gpu_runs()
    for gpus in (8, None):      # GPUs in the facts, or no facts: a failure is a failure
        check = g.judge(sanity, copybw, None, gpu_count=gpus)
        assert check["status"] == "failed"
        assert "0 passed, 36 failed" in check["reason"]
        assert "its errors: 'CUDA error: CUDA_ERROR_NO_DEVICE' (no CUDA-capable device is detected) 35 times" \
            in check["reason"]
        assert "copybw.cpp:240" in check["reason"]


def test_a_result_on_a_node_without_gpu_is_refused_and_shows_no_bandwidth():
    # what the old stand-in printed: NVIDIA's published V100 outputs, on a VM with no GPU
    check = g.judge({"stdout": read("sanity-pass-v100.txt"), "rc": 0}, {"stdout": read("copybw-v100.txt"), "rc": 0},
                    None, gpu_count=0)
    assert check["status"] == "failed"
    assert check["copybw"] is None and check["sanity"] is None
    assert "GB/s" not in check["summary"] and "Tesla" not in check["summary"]
    assert "no GPU to measure" in check["reason"] and "dpkg -S" in check["fix"]
    # a canned bandwidth beside a real failure: still refused
    sanity, _ = no_gpu_runs()
    check = g.judge(sanity, {"stdout": read("copybw-v100.txt"), "rc": 0}, None, gpu_count=0)
    assert check["status"] == "failed" and check["copybw"] is None
    assert check["reason"].startswith("gdrcopy_copybw reported a result")
