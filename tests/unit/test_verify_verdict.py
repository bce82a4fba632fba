"""The verification verdict, decided once (issue #31 outcome 4): filter gpudirect_verify_verdict
(filter_plugins/gpudirect_verify.py) judges a host from everything the run measured on it, and
roles/gpudirect_verify/tasks/main.yml has that one judging task.

Loopback results are the module's own captures on the soft-RoCE VM
(tests/fixtures/loopback/vm_rxe_host_pass.json, vm_rxe_host_corrupt.json; see
test_gpudirect_verify_filters.py); the checks come from the check filters on their own
fixtures (DCGM's persistence-mode failure, tests/fixtures/dcgm).
"""

import json
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

import gpudirect_gpu_checks as checks
import gpudirect_verify as verify
from conftest import PROJECT_FIXTURES, ROOT


def _load(*parts):
    with open(os.path.join(PROJECT_FIXTURES, *parts)) as handle:
        return handle.read()


PASS = json.loads(_load("loopback", "vm_rxe_host_pass.json"))
CORRUPT = json.loads(_load("loopback", "vm_rxe_host_corrupt.json"))
DCGM_FAIL = checks.gpudirect_dcgm_check({"rc": 226, "stdout": _load("dcgm", "diag-json-v3-persistence-fail.json"),
                                         "stderr": ""}, 1, "")
BASE = {"host": "vm", "check_mode": False, "time": "2026-11-28T00:00:00Z", "gpu_count": 0, "coverage": "nearest"}


def verdict(**inputs):
    return verify.gpudirect_verify_verdict(dict(BASE, **inputs))


def test_a_pass_is_a_pass_with_every_part_of_the_record():
    record = verdict(result={"results": [PASS]}, notes=["topology note"], fabric={"mode": "none"}, checks=[None])
    assert record["status"] == "passed" and record["result"] == "passed"
    assert record["host"] == "vm" and record["coverage"] == "nearest" and record["checks"] == []
    assert record["notes"] == ["topology note"]
    assert record["fabric"]["mode"] == "none" and record["fabric"]["proven"] is False
    # the record is the loopback's judgment plus the later steps, nothing else
    alone = verify.gpudirect_verify_record({"results": [PASS]}, "vm", None, False, BASE["time"], 0, "nearest")
    assert {k: record[k] for k in alone if k != "notes"} == {k: v for k, v in alone.items() if k != "notes"}


def test_a_failed_check_fails_a_pass_and_nothing_makes_a_failure_pass():
    failed_check = verdict(result={"results": [PASS]}, checks=[DCGM_FAIL])
    assert failed_check["status"] == "failed" and failed_check["diagnosis"]["code"] == "dcgm_failed"
    corrupt = verdict(result={"results": [CORRUPT]}, checks=[dict(DCGM_FAIL, status="passed")],
                      crosscheck={"failed": False, "problems": []})
    assert corrupt["status"] == "failed" and corrupt["diagnosis"]["code"] == "data_mismatch"


def test_a_failed_crosscheck_fails_a_pass():
    record = verdict(result={"results": [PASS]}, crosscheck={"failed": True, "problems": ["nccl-tests: no GDRDMA"]})
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "crosscheck_failed"
    assert "nccl-tests: no GDRDMA" in record["diagnosis"]["message"]


def test_a_skip_reads_neither_the_result_nor_the_crosschecks():
    skip = {"code": "reboot_pending", "message": "reboot required first"}
    record = verdict(skip=skip, result={"results": [CORRUPT]}, crosscheck={"failed": True, "problems": ["x"]})
    assert record["status"] == "skipped" and record["diagnosis"]["code"] == "reboot_pending"
    assert "crosscheck" not in record and record["pairs"] == []


def test_a_ring_without_a_neighbour_is_not_proven():
    record = verdict(result={"results": [PASS]}, fabric={"mode": "ring", "edges": [], "pair_with": ""})
    assert record["status"] == "not_proven" and record["diagnosis"]["code"] == "ring_no_neighbour"


@pytest.mark.parametrize("inputs, words", [
    ("passed", "expects a mapping of the run's results"),
    ({"result": None, "reslt": 1}, "unknown input(s) reslt"),
    ({"fabric": {"mode": "none", "edge": []}}, "unknown input(s) fabric.edge"),
    ({"fabric": "ring"}, "fabric must be a mapping"),
    ({"fabric": {"mode": "mesh"}}, "fabric must be none or ring"),
    ({"checks": [{"name": "x", "status": "odd"}]}, "not a check"),
    ({"skip": {"message": "no code"}}, "skip must be {code, message}"),
])
def test_bad_inputs_are_named(inputs, words):
    with pytest.raises(AnsibleFilterError, match=__import__("re").escape(words)):
        verify.gpudirect_verify_verdict(inputs)


def test_the_role_judges_once():
    with open(os.path.join(ROOT, "roles", "gpudirect_verify", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    writers = [t["name"] for t in tasks if "__gpudirect_verify_record" in (t.get("ansible.builtin.set_fact") or {})]
    assert writers == ["Judge the result"]
    [judge] = [t for t in tasks if t["name"] == "Judge the result"]
    assert judge["ansible.builtin.set_fact"]["__gpudirect_verify_record"].strip() == \
        "{{ __gpudirect_verify_inputs | gpudirect_verify_verdict }}"
    assert set(judge["vars"]["__gpudirect_verify_inputs"]) == set(verify.VERDICT_INPUTS)
    assert set(judge["vars"]["__gpudirect_verify_inputs"]["fabric"]) == set(verify.FABRIC_INPUTS)
    # the status the role publishes and fails on is the record's
    published = [t for t in tasks if t["name"] == "Publish the verdict of this run"][0]["ansible.builtin.set_fact"]
    assert published["gpudirect_verify_status"] == "{{ __gpudirect_verify_record.status }}"
    # no other file of the role amends the record
    tasks_dir = os.path.join(ROOT, "roles", "gpudirect_verify", "tasks")
    for name in os.listdir(tasks_dir):
        if name != "main.yml":
            with open(os.path.join(tasks_dir, name)) as handle:
                assert "__gpudirect_verify_record:" not in handle.read(), name
