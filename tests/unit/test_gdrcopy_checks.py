"""filter_plugins/gpudirect_gpu_checks.py: GDRCopy and DCGM checks in the verification record."""

import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_gpu_checks as f
from gpudirect_verify import add_checks, gpudirect_verify_fleet_table, gpudirect_verify_report_md

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def read(*parts):
    with open(os.path.join(FIX, *parts)) as fh:
        return fh.read()


def reg(stdout, rc=0, stderr=""):
    """What `register:` holds for an ansible.builtin.command task."""
    return {"changed": False, "rc": rc, "stdout": stdout, "stderr": stderr}


SKIPPED_TASK = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def test_gdrcopy_check_from_registered_runs():
    # NVIDIA's published V100 outputs: a pass where the node has GPUs (or the count is unknown)
    for gpus in (8, None):
        check = f.gpudirect_gdrcopy_check(reg(read("gdrcopy", "sanity-pass-v100.txt")),
                                          reg(read("gdrcopy", "copybw-v100.txt")), "", gpus)
        assert check["status"] == "passed" and check["copybw"]["write_gbs"] == pytest.approx(10.107)


def test_gdrcopy_check_on_a_node_without_gpu_is_not_measured():
    # what the stand-in (and the real 2.5.1 tools) print on the test nodes, and the facts' GPU count
    sanity = reg(read("gdrcopy", "sanity-no-gpu-v2.5.1.stdout"), 1, read("gdrcopy", "sanity-no-gpu-v2.5.1.stderr"))
    copybw = reg("", 1, read("gdrcopy", "copybw-no-gpu-v2.5.1.stderr"))
    check = f.gpudirect_gdrcopy_check(sanity, copybw, "", 0)
    assert check["status"] == "not_measured" and check["copybw"] is None
    assert check["summary"].startswith("GDRCopy not measured: no NVIDIA GPU on this node")
    assert "CUDA_ERROR_NO_DEVICE" in check["reason"]
    # the count as a template may hand it over; and unknown (no facts) keeps a failure a failure
    assert f.gpudirect_gdrcopy_check(sanity, copybw, "", "0")["status"] == "not_measured"
    assert f.gpudirect_gdrcopy_check(sanity, copybw, "", None)["status"] == "failed"
    assert f.gpudirect_gdrcopy_check(sanity, copybw, "", 2)["status"] == "failed"
    with pytest.raises(AnsibleFilterError, match="gpu_count"):
        f.gpudirect_gdrcopy_check(sanity, copybw, "", "eight")


def test_not_measured_changes_no_verdict_and_lands_in_the_record():
    sanity = reg(read("gdrcopy", "sanity-no-gpu-v2.5.1.stdout"), 1, read("gdrcopy", "sanity-no-gpu-v2.5.1.stderr"))
    copybw = reg("", 1, read("gdrcopy", "copybw-no-gpu-v2.5.1.stderr"))
    check = f.gpudirect_gdrcopy_check(sanity, copybw, "", 0)
    out = add_checks(record(), [check])
    assert out["status"] == "passed" and out["diagnosis"] is None
    assert out["checks"][0]["status"] == "not_measured"
    assert out["notes"][1].startswith("GDRCopy not measured: ")
    assert not any("GB/s" in n for n in out["notes"])


def test_a_refused_result_fails_the_host_with_the_checks_own_fix():
    check = f.gpudirect_gdrcopy_check(reg(read("gdrcopy", "sanity-pass-v100.txt")),
                                      reg(read("gdrcopy", "copybw-v100.txt")), "", 0)
    out = add_checks(record(), [check])
    assert out["status"] == "failed" and out["diagnosis"]["code"] == "gdrcopy_failed"
    assert "no GPU to measure" in out["diagnosis"]["message"] and "dpkg -S" in out["diagnosis"]["fix"]
    assert not any("GB/s" in n for n in out["notes"])


def test_gdrcopy_check_skipped_tasks_need_a_reason():
    check = f.gpudirect_gdrcopy_check(SKIPPED_TASK, SKIPPED_TASK, "gdrcopy_sanity and gdrcopy_copybw are not installed")
    assert check["status"] == "skipped" and "not installed" in check["summary"]
    with pytest.raises(AnsibleFilterError, match="no reason"):
        f.gpudirect_gdrcopy_check(SKIPPED_TASK, None, "")


def test_dcgm_check_from_registered_run():
    check = f.gpudirect_dcgm_check(reg(read("dcgm", "diag-json-v3-pass.json")), "1", "")
    assert check["status"] == "passed" and check["level"] == 1
    with pytest.raises(AnsibleFilterError, match="no reason"):
        f.gpudirect_dcgm_check(SKIPPED_TASK, 1, "")


def record(status="passed"):
    return {"status": status, "result": status, "notes": ["earlier note"], "diagnosis": None}


def test_failed_check_fails_a_passed_host_and_says_which():
    bad = f.gpudirect_gdrcopy_check(reg(read("gdrcopy", "sanity-fail-format-v2.6.txt"), 1), None, "")
    skipped = f.gpudirect_dcgm_check(None, 0, "gpudirect_verify_dcgm_diag_level: 0 (off)")
    out = add_checks(record(), [bad, skipped, None])
    assert out["status"] == "failed" and out["result"] == "FAILED"
    assert out["diagnosis"]["code"] == "gdrcopy_failed"
    assert "invalidation_fork_after_gdr_map_cumemalloc" in out["diagnosis"]["message"]
    assert "gdrdrv" in out["diagnosis"]["fix"]
    assert out["notes"][0] == "earlier note" and out["notes"][2] == "dcgm: not run: gpudirect_verify_dcgm_diag_level: 0 (off)"
    assert [c["name"] for c in out["checks"]] == ["gdrcopy", "dcgm"]


def test_checks_keep_an_earlier_failure_and_a_skip():
    bad = f.gpudirect_dcgm_check(reg(read("dcgm", "diag-json-v3-persistence-fail.json"), 226), 1, "")
    earlier = dict(record("not_proven"), diagnosis={"code": "host_memory_fallback"})
    out = add_checks(earlier, [bad])
    assert out["status"] == "not_proven" and out["diagnosis"]["code"] == "host_memory_fallback"
    assert any("Persistence Mode Fail" in n for n in out["notes"])
    out = add_checks(record("skipped"), [])
    assert out["status"] == "skipped" and out["checks"] == []


def test_add_checks_rejects_what_is_not_a_check():
    with pytest.raises(AnsibleFilterError, match="not a check"):
        add_checks(record(), [{"name": "x", "status": "odd"}])
    with pytest.raises(AnsibleFilterError, match="need a record with a status"):
        add_checks({}, [])


def test_check_mode_skip_passes_on_the_command_modules_words():
    # what `register:` holds for a command task in --check (ansible-core 2.19)
    would = {"changed": False, "skipped": True, "msg": "Command would have run if not in check mode"}
    check = f.gpudirect_dcgm_check(would, 1, "")
    assert check["status"] == "skipped" and "Command would have run if not in check mode" in check["summary"]
    check = f.gpudirect_gdrcopy_check(would, would, "")
    assert check["status"] == "skipped" and "would have run" in check["reason"]


def test_not_measured_reaches_the_markdown_and_the_fleet_table():
    sanity = reg(read("gdrcopy", "sanity-no-gpu-v2.5.1.stdout"), 1, read("gdrcopy", "sanity-no-gpu-v2.5.1.stderr"))
    copybw = reg("", 1, read("gdrcopy", "copybw-no-gpu-v2.5.1.stderr"))
    out = add_checks(dict(record(), host="vm1"), [f.gpudirect_gdrcopy_check(sanity, copybw, "", 0)])
    md = gpudirect_verify_report_md(out)
    assert "- GDRCopy not measured: no NVIDIA GPU on this node" in md and "GB/s" not in md
    table = "\n".join(gpudirect_verify_fleet_table([out], ["vm1"]))
    assert "vm1: GDRCopy not measured: no NVIDIA GPU on this node" in table and "GB/s" not in table
