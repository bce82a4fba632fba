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
