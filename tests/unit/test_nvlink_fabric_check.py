"""gpudirect_verify's NVLink fabric check (issue #27, outcome 3): a GPU on an NVLink fabric
must be at State Completed, Status Success.

Real facts and nvidia-smi -q of the lent GPU nodes (tests/fixtures/gpu_node/*/README.md):
four and two H200 joined by NVLink (Completed/Success), one H100 (State N/A). The states a
fabric that did not come up shows (Not Started, In Progress; NVML's nvmlGpuFabricState_t)
are the real capture with that one line changed.
"""
import json

import pytest

from conftest import read_fixture

from ansible.module_utils import gpudirect_nvlink as nvlink  # noqa: E402

import gpudirect_gpu_checks as checks  # noqa: E402  (filter_plugins/, on sys.path through conftest)
from gpudirect_verify import add_checks  # noqa: E402


def facts(machine):
    data = json.loads(read_fixture("gpu_node", machine, "gpudirect_facts.json"))
    return data.get("ansible_facts", data).get("gpudirect", data)


@pytest.mark.parametrize("machine, gpus", [("h200x4", 4), ("h200x2", 2)])
def test_the_lent_nvlink_nodes_pass(machine, gpus):
    check = checks.gpudirect_fabric_check(facts(machine))
    assert check["status"] == "passed"
    assert check["summary"] == "nvlink_fabric: passed (%d GPU(s) Completed/Success, clique 0)" % gpus


def test_a_gpu_on_no_fabric_is_skipped_saying_so():
    check = checks.gpudirect_fabric_check(facts("h100x1"))
    assert check["status"] == "skipped"
    assert "no GPU of this node is on an NVLink fabric (Fabric State N/A on 1 GPU(s))" in check["reason"]


@pytest.mark.parametrize("state, status", [("In Progress", "N/A"), ("Not Started", "N/A"),
                                           ("Completed", "NVSwitch or NVLink failure")])
def test_a_fabric_that_did_not_come_up_fails_naming_the_gpu(state, status):
    text = read_fixture("gpu_node", "h200x4", "capture", "nvidia-smi-q.txt")
    first = text.index("        State                                          : Completed")
    line_end = text.index("\n", text.index("Status", first))
    broken = (text[:first] + "        State                                          : %s\n" % state
              + "        Status                                         : %s" % status + text[line_end:])
    fabric = nvlink.parse_fabric(broken)
    data = facts("h200x4")
    for gpu in data["gpus"]:
        gpu["fabric"] = fabric[gpu["address"]]
    check = checks.gpudirect_fabric_check(data)
    assert check["status"] == "failed"
    assert "1 of 4 GPU(s) on the NVLink fabric are not Completed/Success: 0000:00:06.0: State %s, Status %s" \
        % (state, status) in check["reason"]
    record = add_checks({"status": "passed", "result": "PASSED", "notes": []}, [check])
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "nvlink_fabric_failed"
    assert "nvidia-fabricmanager" in record["diagnosis"]["fix"] and "gpudirect_verify_nvlink_fabric" in record["diagnosis"]["fix"]


def test_a_fabric_not_read_is_skipped_with_the_reason_and_bad_input_is_named():
    data = facts("h200x2")
    data["nvlink"] = {"available": False, "fabric_available": False,
                      "fabric_reason": "nvidia-smi -q has no Fabric section (a driver older than r550)"}
    check = checks.gpudirect_fabric_check(data)
    assert check["status"] == "skipped" and "older than r550" in check["reason"]
    assert checks.gpudirect_fabric_check({"gpus": []})["reason"] == "no GPU"
    with pytest.raises(Exception, match="expects ansible_facts.gpudirect"):
        checks.gpudirect_fabric_check(None)
