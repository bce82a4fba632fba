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
    ("| memory                    | Fail    ", "| memory                    | Fail-ish", "none of"),
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



# --------------------------------------------------------------------------- issue #44, outcome 5
# Real DCGM 4.2.3, 4.4.1 and 4.4.2 tables from NVIDIA/DCGM issues #253 and #124 (README), and
# variants built from real tables for the layouts dcgmi/Diag.cpp prints that no public capture
# shows (each says so and from which real table).

def test_text_v4_4_1_wrapped_global_warning_then_gpu_rows():
    p = d.parse_diag(read("diag-text-v4.4.1-r2-b200-pcie-fail.txt"), 226)
    pcie = by_name(p)["pcie"]
    assert (p["dcgm_version"], p["driver_version"]) == ("4.4.1", "570.172.08")
    assert pcie["status"] == "Fail" and not p["ok"] and p["counts"] == {"Pass": 2, "Fail": 1, "Warn": 0, "Skip": 0}
    assert [(e["entity"], e["status"]) for e in pcie["entities"]] == [("GPU%d" % i, "Pass") for i in range(8)]
    (warning,) = pcie["details"]
    assert warning == {"kind": "warning", "entity": None, "text": (
        "There was an internal error during the test: 'Output of child process (11167) couldn't be parsed: '* Line 1, "
        "Column 1 Syntax error: value, object or array expected. '' Check DCGM and system logs for errors. Reset GPU. "
        "Restart DCGM. Rerun diagnostics.")}
    assert d.judge({"stdout": read("diag-text-v4.4.1-r2-b200-pcie-fail.txt"), "rc": 226}, 2)["reason"].startswith(
        "dcgmi diag -r 2: 2 Pass, 1 Fail, 0 Warn, 0 Skip (DCGM 4.4.1); pcie Fail: There was an internal error")


def test_text_v4_4_2_whole_pass_table():
    p = d.parse_diag(read("diag-text-v4.4.2-r2-pass.txt"), 0)
    assert p["ok"] and [t["name"] for t in p["tests"]] == ["software", "memory", "pcie"]
    assert [t["category"] for t in p["tests"]] == ["Deployment", "Hardware", "Integration"]


def test_text_v4_2_3_as_published_has_four_wrapped_warnings_and_no_footer():
    text = read("diag-text-v4.2.3-pcie-fail-published-without-footer.txt")
    p = d.parse_table(text)
    pcie = by_name(p)["pcie"]
    assert [x["text"][-40:] for x in pcie["details"]] == ["errors. Reset GPU. Restart DCGM. Rerun diagnostics."[-40:]] * 4
    assert "'A child process (153) exited with non-zero status 1'" in pcie["details"][1]["text"]
    assert [e["entity"] for e in pcie["entities"]] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    # the paste stops before the table's closing line: a cut-short table never passes
    assert p["complete"] is False
    with pytest.raises(d.DcgmOutputError, match="ends before its closing line.*last test read: 'pcie'"):
        d.parse_diag(text, 0)


def v442_pcie(cell, gpu_cell):
    """CONSTRUCTED from the real 4.4.2 table (NVIDIA/DCGM#124): its pcie rows set to ``cell`` and
    ``gpu_cell``."""
    text = read("diag-text-v4.4.2-r2-pass.txt")
    old = ("| pcie                      | Pass                                           |\n"
           "|                           | GPU0: Pass                                     |\n")
    assert old in text
    return text.replace(old, "| pcie                      | %-46s |\n|                           | %-46s |\n"
                        % (cell, gpu_cell))


@pytest.mark.parametrize("cell, gpu_cell", [("", "GPU0: "), ("Not Run", "GPU0: Not Run")])
def test_text_v4_not_run_is_skip_whether_empty_or_spelled(cell, gpu_cell):
    # DCGM 4.0-4.4 print DCGM_DIAG_RESULT_NOT_RUN as "", 4.5+ as "Not Run" (Diag.cpp HelperDisplayDiagResult)
    p = d.parse_diag(v442_pcie(cell, gpu_cell), 0)
    pcie = by_name(p)["pcie"]
    assert pcie["status"] == "Skip" and pcie["entities"] == [{"entity": "GPU0", "status": "Skip", "warnings": []}]
    assert p["ok"] and p["counts"]["Skip"] == 1


def test_text_v3_error_rows_of_a_deployment_test():
    # CONSTRUCTED from the real 3.3.8 table (nccl-tests#264): Persistence Mode failing with its message
    # as an "Error" row, as DCGM 2.x/3.x HelperDisplayDeploymentResult prints a Deployment test's errors
    text = read("diag-text-v3.3.8-r3-cuinit-fail.txt")
    old = ("| Persistence Mode          | Pass                                           |\n"
           "| Info                      | Persistence mode for GPU 0 is disabled. Enabl  |\n")
    assert old in text
    text = text.replace(old, "| Persistence Mode          | Fail                                           |\n"
                             "| Error                     | Persistence mode for GPU 0 is disabled. Enabl  |\n")
    p = d.parse_diag(text, 226)
    persistence = by_name(p)["Persistence Mode"]
    assert persistence["status"] == "Fail" and "Error" not in by_name(p)
    assert persistence["details"][0]["kind"] == "error" and persistence["details"][0]["entity"] is None
    assert persistence["details"][0]["text"].startswith('Persistence mode for GPU 0 is disabled. Enable persistence')
    assert "Persistence Mode Fail: Persistence mode for GPU 0 is disabled." in d.diag_summary(p, 3)


def test_text_continuation_that_looks_like_a_result_stays_a_continuation():
    # CONSTRUCTED from the real 4.4.1 table: its warning's 4th piece starting "GPU 5: ..." and "Link3: ..."
    text = read("diag-text-v4.4.1-r2-b200-pcie-fail.txt")
    old = "|                           | alue, object or array expected. '' Check DCGM  |\n"
    assert old in text
    for piece in ("GPU 5: value, object or array expected. '' Chec", "LINK3: bandwidth below the threshold of 4 GB/s"):
        p = d.parse_diag(text.replace(old, "|                           | %-46s |\n" % piece[:45]), 226)
        pcie = by_name(p)["pcie"]
        assert [e["entity"] for e in pcie["entities"]] == ["GPU%d" % i for i in range(8)]
        assert piece[:45] in pcie["details"][0]["text"]


def test_text_v3_gpu_list_cut_by_dcgmi_keeps_the_status_and_says_so():
    # CONSTRUCTED after the real 3.3.1 rows "Pass - GPU: 1" / "Fail - GPU: 0" (go-dcgm#52), for 16 GPUs:
    # a cell over 46 columns is cut to 43 characters and "..." (CommandOutputController::ReplaceTag)
    ids = ", ".join(str(i) for i in range(16)) + "   "
    cell = ("Fail - GPUs: " + ids)[:43] + "..."
    assert cell == "Fail - GPUs: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ..."
    text = read("diag-text-v2-r4-pass-gcm.txt")
    old = "| Memtest                   | Pass - All                                     |\n"
    assert old in text
    p = d.parse_diag(text.replace(old, "| Memtest                   | Pass - GPU: 15                                 |\n"
                                       "|                           | %s |\n" % cell), 226)
    memtest = by_name(p)["Memtest"]
    assert memtest["status"] == "Fail" and memtest["cut"] == [cell]
    assert [e["entity"] for e in memtest["entities"] if e["status"] == "Fail"] == ["GPU%d" % i for i in range(10)]
    assert "Memtest Fail [GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7, GPU8, GPU9, ... (dcgmi cut the GPU list " \
        "short)]" in d.diag_summary(p, 4)
    # cut inside a number ("..., 11, 1..."): that number is not taken for GPU 1
    inside = "Fail - GPUs: 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15   "[:43] + "..."
    assert inside == "Fail - GPUs: 3, 4, 5, 6, 7, 8, 9, 10, 11, 1..."
    p = d.parse_diag(text.replace(old, "| Memtest                   | %s |\n" % inside), 226)
    assert [e["entity"] for e in by_name(p)["Memtest"]["entities"]] == ["GPU%d" % i for i in range(3, 12)]


def test_text_v3_diagnostic_warn_all_and_its_code_row():
    # CONSTRUCTED from the real 2.x table (gcm): Diagnostic "Warn - All", a Warning, then the return code row
    # HelperDisplayGpuResults prints for it ("  Code: (%012d)")
    text = read("diag-text-v2-r4-pass-gcm.txt")
    old = "| Diagnostic                | Pass - All                                     |\n"
    assert old in text
    p = d.parse_diag(text.replace(old, "| Diagnostic                | Warn - All                                     |\n"
                                       "| Warning                   | GPU 0 Clocks are being throttled              |\n"
                                       "|                           |   Code: (000000000007)                         |\n"), 0)
    diagnostic = by_name(p)["Diagnostic"]
    assert diagnostic["status"] == "Warn" and p["ok"]
    assert [(x["kind"], x["text"]) for x in diagnostic["details"]] == [
        ("warning", "GPU 0 Clocks are being throttled"), ("code", "Code: (000000000007)")]


def test_text_iterations_one_table_per_run():
    # CONSTRUCTED from the real 4.4.2 table: `dcgmi diag --iterations 2` prints "Running iteration i of n..."
    # before each run's table and "Passed all n runs of the diagnostic" (Diag.cpp RunStartDiag)
    one = read("diag-text-v4.4.2-r2-pass.txt")
    text = "\nRunning iteration 1 of 2...\n" + one + "\nRunning iteration 2 of 2...\n" + one + \
        "Passed all 2 runs of the diagnostic\n"
    p = d.parse_diag(text, 0)
    assert p["ok"] and len(p["tests"]) == 6 and [t["iteration"] for t in p["tests"]] == [1, 1, 1, 2, 2, 2]
    failed = "\nRunning iteration 1 of 2...\n" + one + \
        "Aborting the iterative runs of the diagnostic due to failure: The diagnostic test failed\n"
    p = d.parse_diag(failed, 226)
    assert not p["ok"] and p["runtime_error"] == "the iterative runs stopped: The diagnostic test failed"
    cut = "\nRunning iteration 1 of 2...\n" + one.rsplit("+---", 1)[0] + "\nRunning iteration 2 of 2...\n" + one
    with pytest.raises(d.DcgmOutputError, match="a new table starts before the last one closed"):
        d.parse_diag(cut, 0)


def test_json_v4_test_not_run_is_its_name_alone():
    # CONSTRUCTED from the built DCGM 4 JSON: a test entry with only its name, as HelperJsonBuildOutput writes
    # one whose result is DCGM_DIAG_RESULT_NOT_RUN; and a test_summary carrying a global warning
    doc = json.loads(read("diag-json-v4-shape-memory-fail.json"))
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"].append({"name": "nvbandwidth"})
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"]["warnings"] = [
        {"warning": "There was an internal error during the test", "error_id": 85}]
    p = d.parse_diag(json.dumps(doc), 1)
    assert by_name(p)["nvbandwidth"] == {"category": doc["DCGM Diagnostic"]["test_categories"][0]["category"],
                                         "name": "nvbandwidth", "entities": [], "status": "Skip", "not_run": True}
    first = p["tests"][0]
    assert first["details"] == [{"kind": "warning", "entity": None, "text": "There was an internal error during the test"}]


def test_json_iterations_document():
    # CONSTRUCTED from the real DCGM 3 JSON (gcm): --iterations 2 -j writes {"iterations": [...], "Overall Result"}
    run = json.loads(read("diag-json-v3-pass.json"))
    p = d.parse_diag(json.dumps({"iterations": [run, run], "Overall Result": "Pass"}), 0)
    assert p["ok"] and p["iterations"] == 2 and p["counts"]["Pass"] == 18
    p = d.parse_diag(json.dumps({"iterations": [run], "Overall Result": "Fail", "warning": "Host engine error"}), 0)
    assert not p["ok"] and p["runtime_error"] == "the iterative runs stopped: Host engine error"
    with pytest.raises(d.DcgmOutputError, match="'iterations' is not a list of runs"):
        d.parse_diag(json.dumps({"iterations": "none"}), 0)
