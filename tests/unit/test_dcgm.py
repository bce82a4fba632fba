"""dcgmi diag parser (plugin_utils/gpudirect_dcgm.py).

Fixtures and their sources: tests/fixtures/dcgm/README.md (the text tables and the DCGM 3
JSON are published outputs; the DCGM 4 JSON files are built to NVIDIA's schema and say so).
"""

import json
import os

import pytest

from ansible.module_utils import gpudirect_dcgm as d

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "dcgm")


def read(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def by_name(parsed):
    return {t["name"]: t for t in parsed["tests"]}


def test_text_v3_metadata_and_rows():
    p = d.parse_table(read("diag-text-v3.3.1-r2-excerpt.txt"))
    p["counts"] = {s: sum(t["status"] == s for t in p["tests"]) for s in d.STATUSES}
    p["ok"] = p["counts"]["Fail"] == 0
    assert p["format"] == "text"
    assert (p["dcgm_version"], p["driver_version"]) == ("3.3.1", "535.129.03")
    assert [t["name"] for t in p["tests"]][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert all(t["category"] == "Deployment" and t["status"] == "Pass" for t in p["tests"])
    assert p["counts"] == {"Pass": 7, "Fail": 0, "Warn": 0, "Skip": 0} and p["ok"] is True


def test_text_v3_categories_without_metadata():
    p = d.parse_table(read("diag-text-v3.0.4-r3-excerpt.txt"))
    assert p["complete"] is False and p["dcgm_version"] is None and len(p["tests"]) == 9 and by_name(p)["Inforom"]["status"] == "Pass"


def test_text_v4_entity_rows():
    p = d.parse_table(read("diag-text-v4.2.3-excerpt.txt"))
    software = by_name(p)["software"]
    assert software["status"] == "Pass" and software["category"] == "Deployment"
    assert [e["entity"] for e in software["entities"]] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert p["dcgm_version"] == "4.2.3" and [t["name"] for t in p["tests"]] == ["software"]


def test_text_fail_row_and_old_pass_all_wording():
    text = read("diag-text-v3.0.4-r3-excerpt.txt").replace(
        "| Persistence Mode          | Pass  ", "| Persistence Mode          | Fail  ") + (
        "| PCIe                      | Pass - All                                     |\n"
        "+---------------------------+------------------------------------------------+\n")
    p = d.parse_diag(text, 226)
    assert by_name(p)["Persistence Mode"]["status"] == "Fail" and by_name(p)["PCIe"]["status"] == "Pass"
    assert by_name(p)["PCIe"]["category"] == "Integration"
    assert p["ok"] is False and p["rc"] == 226


def test_json_v3_pass_and_fail():
    ok = d.parse_diag(read("diag-json-v3-pass.json"), 0)
    assert ok["format"] == "json-v3" and ok["ok"] and ok["counts"]["Pass"] == 9
    bad = d.parse_diag(read("diag-json-v3-persistence-fail.json"), 0)
    assert by_name(bad)["Persistence Mode"]["status"] == "Fail"
    assert by_name(bad)["Environment Variables"]["status"] == "Warn"
    assert bad["ok"] is False
    line = d.diag_summary(bad, 1)
    assert line.startswith("dcgmi diag -r 1: 7 Pass, 1 Fail, 1 Warn, 0 Skip")
    assert line.endswith("; Persistence Mode Fail; Environment Variables Warn")   # no entity named in this shape
    assert by_name(bad)["Persistence Mode"]["entities"] == [{"entity": None, "status": "Fail", "warnings": []}]


def test_json_v3_per_gpu_upper_case_worst_status():
    p = d.parse_diag(read("diag-json-v3-per-gpu-sm-stress-fail.json"), 0)
    tests = by_name(p)
    assert tests["sm_stress"]["status"] == "Fail"
    assert [e["status"] for e in tests["sm_stress"]["entities"]] == ["Fail", "Pass", "Fail", "Fail"]
    assert tests["memory"]["status"] == "Pass"          # one SKIP and three PASS
    assert tests["diagnostic"]["status"] == "Skip"
    assert p["dcgm_version"] is None and p["ok"] is False   # "1.7" is the result format's version


def test_json_v4_test_summary_and_entities():
    p = d.parse_diag(read("diag-json-v4-shape-memory-fail.json"), 1)
    assert p["format"] == "json-v4" and (p["dcgm_version"], p["driver_version"]) == ("4.2.3", "570.148.08")
    memory = by_name(p)["memory"]
    assert memory["status"] == "Fail" and memory["entities"][1]["entity"] == "GPU1"
    assert "memory mismatch" in memory["entities"][1]["warnings"][0]
    assert by_name(p)["pcie"]["status"] == "Skip"
    assert "memory Fail [GPU1]" in d.diag_summary(p, 3)


def test_json_v4_runtime_error_fails():
    p = d.parse_diag(read("diag-json-v4-shape-runtime-error.json"), 1)
    assert p["tests"] == [] and p["runtime_error"] and p["ok"] is False


@pytest.mark.parametrize("text", [
    "",
    "Error: unable to establish a connection to the specified host: localhost\n",
    "+---+\n| Diagnostic | Result |\n",
])
def test_no_result_raises_with_output(text):
    with pytest.raises(d.DcgmOutputError, match="no test result"):
        d.parse_diag(text, 255)


def test_malformed_json_shapes():
    with pytest.raises(d.DcgmOutputError, match="neither 'DCGM Diagnostic'"):
        d.parse_diag(json.dumps({"something": {}}), 0)
    with pytest.raises(d.DcgmOutputError, match="none of Fail/Warn/Pass/Skip"):
        d.parse_diag(json.dumps({"DCGM Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": [{"name": "memory", "results": [], "test_summary": {"status": "Odd"}}]}]}}), 0)
    with pytest.raises(d.DcgmOutputError, match="neither a test_summary nor results"):
        d.parse_diag(json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": [{"name": "memory"}]}]}}), 0)
    # truncated JSON is not read as a table either
    with pytest.raises(d.DcgmOutputError):
        d.parse_diag(read("diag-json-v3-pass.json")[:200], 0)


def test_judge():
    ok = d.judge({"stdout": read("diag-json-v3-pass.json"), "rc": 0}, level=1)
    assert ok["status"] == "passed" and ok["level"] == 1 and ok["diag"]["counts"]["Pass"] == 9
    bad = d.judge({"stdout": read("diag-json-v3-per-gpu-sm-stress-fail.json"), "rc": 226}, level=3)
    assert bad["status"] == "failed" and "sm_stress Fail [GPU0, GPU2, GPU3]" in bad["reason"]
    broken = d.judge({"stdout": "", "stderr": "Error: unable to connect to host engine", "rc": 255}, level=1)
    assert broken["status"] == "failed" and "host engine" in broken["reason"]
    skipped = d.judge(level=1, missing="dcgmi is not installed")
    assert skipped["status"] == "skipped" and skipped["summary"] == "dcgm: not run: dcgmi is not installed"


@pytest.mark.parametrize("name", ["diag-text-v3.3.1-r2-excerpt.txt", "diag-text-v3.0.4-r3-excerpt.txt",
                                  "diag-text-v4.2.3-excerpt.txt", "diag-text-v3.3.1-r2-hardware-excerpt.txt"])
def test_truncated_tables_never_pass(name):
    assert d.parse_table(read(name))["complete"] is False
    with pytest.raises(d.DcgmOutputError, match="ends before its closing line"):
        d.parse_diag(read(name), 0)
    assert d.judge({"stdout": read(name), "rc": 0}, level=1)["status"] == "failed"


def test_text_v2_blacklist_era_full_table():
    p = d.parse_diag(read("diag-text-v2-r4-pass-gcm.txt"), 0)
    assert p["ok"] and p["counts"] == {"Pass": 18, "Fail": 0, "Warn": 0, "Skip": 0}
    assert by_name(p)["Blacklist"]["category"] == "Deployment" and by_name(p)["Memtest"]["category"] == "Stress"


def test_text_v3_fail_all_with_warning_and_info_rows():
    p = d.parse_diag(read("diag-text-v3.3.8-r3-cuinit-fail.txt"), 226)
    t = by_name(p)
    assert (p["dcgm_version"], p["driver_version"]) == ("3.3.8", "560.35.03")
    assert t["GPU Memory"]["status"] == "Fail" and t["PCIe"]["status"] == "Skip" and not p["ok"]
    warnings = [x for x in t["GPU Memory"]["details"] if x["kind"] == "warning"]
    assert [w["entity"] for w in warnings] == ["GPU%d" % i for i in range(8)]
    assert warnings[0]["text"].startswith("GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors.")
    assert "Unable to initialize CUDA library: 'system not yet initialized'" in warnings[3]["text"]
    info = t["Persistence Mode"]["details"][0]
    assert info["kind"] == "info" and t["Persistence Mode"]["status"] == "Pass"
    assert 'Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.' in info["text"]
    line = d.diag_summary(p, 3)
    assert "GPU Memory Fail: GPU 0 Error using CUDA API cuInit" in line and line.startswith(
        "dcgmi diag -r 3: 9 Pass, 1 Fail, 0 Warn, 3 Skip (DCGM 3.3.8)")


def test_text_v3_per_gpu_result_rows():
    p = d.parse_table(read("diag-text-v3.3.1-r2-hardware-excerpt.txt"))
    memory = by_name(p)["GPU Memory"]
    assert memory["status"] == "Fail"   # "Pass - GPU: 1" first, then "Fail - GPU: 0": never a pass
    assert [(e["entity"], e["status"]) for e in memory["entities"]] == [("GPU1", "Pass"), ("GPU0", "Fail")]
    assert memory["entities"][1]["warnings"][0].endswith("'CUDA-capable device(s) is/are busy or unavailable'.")
    assert by_name(p)["Diagnostic"]["details"][0]["text"].startswith("GPU 0 API call cuMemGetInfo failed: 'context is destroyed'")
    assert by_name(p)["Targeted Stress"]["status"] == "Fail"


def test_text_v4_entity_warning_rows():
    p = d.parse_diag(read("diag-text-v4-shape-memory-fail.txt"), 0)
    memory = by_name(p)["memory"]
    assert memory["status"] == "Fail" and not p["ok"]
    assert [(e["entity"], e["status"]) for e in memory["entities"]] == [("GPU0", "Pass"), ("GPU1", "Fail")]
    assert memory["entities"][1]["warnings"] == [
        "Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."]
    assert by_name(p)["pcie"]["status"] == "Skip"   # "Not Run"
    assert "memory Fail [GPU1]: Error using CUDA API cuInit" in d.diag_summary(p, 2)


@pytest.mark.parametrize("old, new, match", [
    ("| memory                    | Fail    ", "| memory                    | Broken  ", "'Broken'"),
    ("|                           | GPU1: Fail ", "|                           | GPU1: Odd  ", "'GPU1: Odd'"),
    ("| memory                    | Fail    ", "| memory                    |         ", "none of"),
    ("|                           | GPU1: Fail ", "|                           | whatever   ", "neither a per-GPU result"),
])
def test_text_unknown_words_are_errors_not_passes(old, new, match):
    text = read("diag-text-v4-shape-memory-fail.txt")
    assert old in text
    with pytest.raises(d.DcgmOutputError, match=match):
        d.parse_diag(text.replace(old, new), 0)


def test_text_rows_after_the_closing_line_are_refused():
    text = read("diag-text-v2-r4-pass-gcm.txt") + "| PCIe                      | Fail - All                                     |\n"
    with pytest.raises(d.DcgmOutputError, match="after its closing line"):
        d.parse_diag(text, 0)
