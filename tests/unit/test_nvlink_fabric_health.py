"""The whole Fabric section of nvidia-smi -q, Health sub-block included (issue #44, outcome 5):
module_utils/gpudirect_nvlink.py parse_fabric and judge_fabric, and the gpudirect_fabric_check
filter, on public outputs of real drivers (tests/fixtures/nvlink_fabric/README.md says where each
one comes from) and the lent H200 machines' own captures (tests/fixtures/gpu_node/*/capture).

A GPU registered on its fabric (State Completed, Status Success) can still report a faulty fabric:
GB200 trays print Health Summary Unhealthy beside Completed/Success (kubernetes-sigs/dra-driver-
nvidia-gpu#626). Before, only State and Status were read, and such a node passed. Variants built
here from a real output say so in their test.
"""
import json
import os
import xml.etree.ElementTree as ET

import pytest

from conftest import PROJECT_FIXTURES, read_fixture

from ansible.module_utils import gpudirect_nvlink as nvlink  # noqa: E402

import gpudirect_gpu_checks as checks  # noqa: E402  (filter_plugins/, on sys.path through conftest)
from gpudirect_verify import add_checks  # noqa: E402

FIX = os.path.join(PROJECT_FIXTURES, "nvlink_fabric")
H200X4_Q = ("gpu_node", "h200x4", "capture", "nvidia-smi-q.txt")
FIRST = "0000:00:06.0"


def read(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read()


def judge(text):
    fabric = nvlink.parse_fabric(text)
    return nvlink.judge_fabric([{"address": a, "fabric": f} for a, f in sorted(fabric.items())])


def facts_with(text):
    """The lent h200x4 node's facts with each GPU's fabric read again from ``text``."""
    data = json.loads(read_fixture("gpu_node", "h200x4", "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
    fabric = nvlink.parse_fabric(text)
    for gpu in data["gpus"]:
        gpu["fabric"] = fabric[gpu["address"]]
    return data


def first_block(text):
    """(start, end) of the first GPU's Fabric section in an nvidia-smi -q text: from its
    "    Fabric" line to the next line at that indentation."""
    start = text.index("\n    Fabric\n") + 1
    end = text.index("\n    Processes", start) + 1
    return start, end


def with_first_section(section):
    """CONSTRUCTED: the real h200x4 capture (580.159.04) with the first GPU's Fabric section replaced
    by ``section`` (lines of another real output, indented as a section of a GPU block)."""
    text = read_fixture(*H200X4_Q)
    start, end = first_block(text)
    return text[:start] + section + text[end:]


def with_row(label, value):
    """CONSTRUCTED: the real h200x4 capture with one row of the first GPU's Fabric section set to
    ``value`` (the row's label and column as the driver printed them)."""
    text = read_fixture(*H200X4_Q)
    start, end = first_block(text)
    block = text[start:end]
    lines = block.splitlines(True)
    for i, line in enumerate(lines):
        if line.strip().startswith(label + " ") or line.strip().startswith(label + ":"):
            lines[i] = line[:line.index(":") + 1] + " " + value + "\n"
            break
    else:
        raise AssertionError("no row %r in the capture's Fabric section" % label)
    return text[:start] + "".join(lines) + text[end:]


# --------------------------------------------------------------------------- real outputs

def test_h100x8_565_health_block_of_one_row_is_read_and_passes():
    fabric = nvlink.parse_fabric(read("nvidia-smi-q-h100x8-565.57.01.txt"))
    assert len(fabric) == 8
    for state in fabric.values():
        assert state == {"state": "Completed", "status": "Success", "clique_id": 0,
                         "cluster_uuid": "00000000-0000-0000-0000-000000000000", "health": {"bandwidth": None},
                         "unknown": {}}
    check = judge(read("nvidia-smi-q-h100x8-565.57.01.txt"))
    assert check["status"] == "passed"
    assert check["summary"] == "nvlink_fabric: passed (8 GPU(s) Completed/Success, clique 0)"


def test_h200x4_580_every_health_row_na_passes():
    fabric = nvlink.parse_fabric(read_fixture(*H200X4_Q))
    assert fabric[FIRST]["health"] == dict((k, None) for k in nvlink.HEALTH_LABELS)
    check = checks.gpudirect_fabric_check(facts_with(read_fixture(*H200X4_Q)))
    assert check["status"] == "passed"
    assert check["summary"] == "nvlink_fabric: passed (4 GPU(s) Completed/Success, clique 0)"
    assert check["gpus"][FIRST]["problems"] == []


def test_rtx5090_570_health_rows_on_no_fabric_are_skipped():
    text = read("nvidia-smi-q-rtx5090-570.124.06.txt")
    (state,) = nvlink.parse_fabric(text).values()
    assert state["health"] == {"bandwidth": None, "route_recovery_in_progress": None, "route_unhealthy": None,
                               "access_timeout_recovery": None}
    check = judge(text)
    assert check["status"] == "skipped" and "Fabric State N/A on 1 GPU(s)" in check["reason"]


def test_gb200_summary_unhealthy_beside_completed_success_fails():
    # CONSTRUCTED from real lines: dra-driver-nvidia-gpu#626's GB200 section in place of GPU 0's
    lines = [line for line in read("fabric-gb200-summary-unhealthy-dra-driver-626.txt").splitlines(True)
             if line.strip() != "--"]
    data = facts_with(with_first_section("".join(lines)))
    assert data["gpus"][0]["fabric"] == {"state": "Completed", "status": "Success", "clique_id": 2,
                                         "cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
                                         "health": {"summary": "Unhealthy", "bandwidth": "Full"}, "unknown": {}}
    check = checks.gpudirect_fabric_check(data)
    assert check["status"] == "failed"
    assert ("1 of 4 GPU(s) on the NVLink fabric report a fabric fault in nvidia-smi -q's Fabric Health: "
            "0000:00:06.0: Summary Unhealthy; ") in check["reason"]
    assert "are not Completed/Success" not in check["reason"]   # registered: State and Status are fine
    assert check["gpus"][FIRST]["problems"] == ["Summary Unhealthy"]
    record = add_checks({"status": "passed", "result": "PASSED", "notes": []}, [check])
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "nvlink_fabric_failed"
    assert "Summary Healthy" in record["diagnosis"]["fix"] and "gpudirect_verify_nvlink_fabric" in record["diagnosis"]["fix"]


def test_gb200_insufficient_resources_fails_naming_the_status():
    # CONSTRUCTED from real lines: Azure/azhpc-images#506's section, indented as a GPU block's section
    section = "".join("    " + line for line in read("fabric-gb200-insufficient-resources-azhpc-506.txt").splitlines(True))
    check = judge(with_first_section(section))
    assert check["status"] == "failed"
    assert check["reason"].startswith("1 of 4 GPU(s) on the NVLink fabric are not Completed/Success: "
                                      "0000:00:06.0: State Completed, Status Insufficient Resources")
    # the section has no Health sub-block: nothing about health is claimed or guessed
    assert check["gpus"][FIRST]["health"] is None and "Fabric Health" not in check["reason"]


# ---------------------------------------------------------------- real values, rendered as text

XML_ROWS = [("state", "State"), ("status", "Status"), ("cliqueId", "CliqueId"), ("clusterUuid", "ClusterUUID")]
XML_HEALTH = [("summary", "Summary"), ("bandwidth", "Bandwidth"), ("route_recovery_in_progress", "Route Recovery in progress"),
              ("route_unhealthy", "Route Unhealthy"), ("access_timeout_recovery", "Access Timeout Recovery"),
              ("incorrect_configuration", "Incorrect Configuration"), ("partition_assigned", "Partition Assigned")]


def render_xml(name):
    """CONSTRUCTED: the real ``nvidia-smi -q -x`` fabric values of an excerpt rendered in the text
    layout of the real 580.159.04 capture (same fields, same order, same labels)."""
    root = ET.fromstring(read(name).split("\n", 2)[2])   # past the declaration and DOCTYPE lines
    out = ["==============NVSMI LOG==============", "",
           "Driver Version                                         : %s" % root.findtext("driver_version"), ""]
    for gpu in root.findall("gpu"):
        out += ["GPU %s" % gpu.get("id"), "    Product Name                                       : %s"
                % gpu.findtext("product_name"), "    Fabric"]
        fabric = gpu.find("fabric")
        out += ["        %-47s: %s" % (label, fabric.findtext(tag)) for tag, label in XML_ROWS]
        health = fabric.find("health")
        out.append("        Health")
        out += ["            %-43s: %s" % (label, health.findtext(tag)) for tag, label in XML_HEALTH
                if health.find(tag) is not None]
        out.append("    Processes                                          : None")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name, gpus, healthy", [
    ("nvidia-smi-q-x-fabric-gb200-580.173.02.xml", 4, 4),
    ("nvidia-smi-q-x-fabric-gb300-580.173.02.xml", 4, 4),
    ("nvidia-smi-q-x-fabric-b200-580.105.08.xml", 8, 8),
    ("nvidia-smi-q-x-fabric-h100-580.105.08.xml", 8, 0),
])
def test_real_580_health_values_of_healthy_fabrics_pass(name, gpus, healthy):
    check = judge(render_xml(name))
    assert check["status"] == "passed", check["reason"]
    assert check["summary"].startswith("nvlink_fabric: passed (%d GPU(s) Completed/Success, clique " % gpus)
    assert ("Health Summary Healthy on %d" % healthy in check["summary"]) == bool(healthy)


def test_gb300_values_are_read_row_by_row():
    fabric = nvlink.parse_fabric(render_xml("nvidia-smi-q-x-fabric-gb300-580.173.02.xml"))
    assert sorted(fabric) == ["0008:06:00.0", "0009:06:00.0", "0018:06:00.0", "0019:06:00.0"]
    assert fabric["0008:06:00.0"]["health"] == {
        "summary": "Healthy", "bandwidth": "Full", "route_recovery_in_progress": "False", "route_unhealthy": "False",
        "access_timeout_recovery": "False", "incorrect_configuration": "None", "partition_assigned": None}
    assert fabric["0008:06:00.0"]["clique_id"] == 32766


def test_route_unhealthy_as_nvidia_smi_prints_it_fails_on_that_gpu_only():
    # the real nvidia-smi 580.65.06 binary over NVIDIA's mocked NVML (README): GPU 1's route unhealthy
    check = judge(render_xml("nvidia-smi-q-x-fabric-gb200-mock-route-unhealthy-580.65.06.xml"))
    assert check["status"] == "failed"
    assert ("1 of 2 GPU(s) on the NVLink fabric report a fabric fault in nvidia-smi -q's Fabric Health: "
            "0000:0b:00.0: Summary Unhealthy, Route Unhealthy True; ") in check["reason"]
    assert check["gpus"]["0000:0a:00.0"]["problems"] == []


# --------------------------------------------------------------------------- constructed variants

@pytest.mark.parametrize("label, value, problem", [
    ("Summary", "Limited Capacity", "Summary Limited Capacity"),
    ("Bandwidth", "Degraded", "Bandwidth Degraded"),
    ("Route Recovery in progress", "True", "Route Recovery in progress True"),
    ("Route Unhealthy", "True", "Route Unhealthy True"),
    ("Access Timeout Recovery", "True", "Access Timeout Recovery True"),
    ("Incorrect Configuration", "No Partition", "Incorrect Configuration No Partition"),
    ("Incorrect Configuration", "Insufficient NVLinks", "Incorrect Configuration Insufficient NVLinks"),
])
def test_each_health_fault_fails_naming_the_row(label, value, problem):
    # CONSTRUCTED: one row of the real h200x4 capture changed (the words: README, "What the words mean")
    check = checks.gpudirect_fabric_check(facts_with(with_row(label, value)))
    assert check["status"] == "failed"
    assert "0000:00:06.0: %s; " % problem in check["reason"]
    assert "keep the node out of service until Health shows Summary Healthy" in check["reason"]


@pytest.mark.parametrize("label, value, named", [
    ("Summary", "Mostly Healthy", "Health/Summary 'Mostly Healthy'"),
    ("Bandwidth", "Half", "Health/Bandwidth 'Half'"),
    ("Route Unhealthy", "Unknown", "Health/Route Unhealthy 'Unknown'"),
    ("Partition Assigned", "True", "Health/Partition Assigned 'True'"),
])
def test_an_unknown_health_value_fails_naming_field_value_and_what_to_do(label, value, named):
    # CONSTRUCTED: a word no driver is known to print, in one row of the real h200x4 capture
    check = checks.gpudirect_fabric_check(facts_with(with_row(label, value)))
    assert check["status"] == "failed"
    assert "printed Fabric fields or values this toolkit does not know on 1 GPU(s): 0000:00:06.0: %s; " % named \
        in check["reason"]
    assert "NVML_GPU_FABRIC_HEALTH_*" in check["reason"] and "gpudirect_verify_nvlink_fabric: false" in check["reason"]


def test_an_unknown_state_word_is_named_as_unknown():
    check = judge(with_row("State", "Degraded"))
    assert check["status"] == "failed"
    assert "0000:00:06.0: State Degraded, Status Success (a State nvidia-smi is not known to print: Completed, " \
        "In Progress, Not Started, Not Supported are)" in check["reason"]


def test_an_unknown_row_or_sub_block_fails_unless_na():
    # CONSTRUCTED: rows no driver here prints, added to the real h200x4 capture's first section
    text = read_fixture(*H200X4_Q)
    start, end = first_block(text)
    block = text[start:end]
    extra = block.replace("            Partition Assigned                         : N/A\n",
                          "            Partition Assigned                         : N/A\n"
                          "            GFM State                                  : Disconnected\n"
                          "            Future Row                                 : N/A\n"
                          "        Cliques\n"
                          "            Unicast Pointer                            : 5\n")
    assert extra != block
    fabric = nvlink.parse_fabric(text[:start] + extra + text[end:])[FIRST]
    assert fabric["unknown"] == {"Health/GFM State": "Disconnected", "Health/Future Row": None,
                                 "Cliques/Unicast Pointer": "5"}
    check = judge(text[:start] + extra + text[end:])
    assert check["status"] == "failed"
    assert "0000:00:06.0: Cliques/Unicast Pointer '5', Health/GFM State 'Disconnected'; " in check["reason"]
    assert "Future Row" not in check["reason"]


def test_a_section_without_health_stays_judged_on_state_and_status():
    # CONSTRUCTED: the 565 capture's Health sub-block removed, the layout of the 550 drivers
    text = read("nvidia-smi-q-h100x8-565.57.01.txt").replace(
        "        Health\n            Bandwidth                     : N/A\n", "")
    fabric = nvlink.parse_fabric(text)
    assert all(f["health"] is None for f in fabric.values())
    assert judge(text)["status"] == "passed"
    # and the facts of older runs, saved without health, are judged as before
    old = json.loads(read_fixture("gpu_node", "h200x2", "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
    assert "health" not in old["gpus"][0]["fabric"]
    assert checks.gpudirect_fabric_check(old)["status"] == "passed"


def test_several_kinds_of_failure_are_all_named():
    # CONSTRUCTED: GPU 0 not registered and unhealthy at once
    text = with_row("State", "In Progress")
    start, end = first_block(text)
    text = text[:start] + text[start:end].replace(
        "Bandwidth                                  : N/A", "Bandwidth                                  : Degraded") + text[end:]
    reason = judge(text)["reason"]
    assert reason.startswith("1 of 4 GPU(s) on the NVLink fabric are not Completed/Success: 0000:00:06.0: State "
                             "In Progress, Status Success; 1 of 4 GPU(s) on the NVLink fabric report a fabric fault")
    assert "0000:00:06.0: Bandwidth Degraded; " in reason
