"""gpudirect_verify on a node in service (issue #29 outcome 4): read-only by default on a
node this run did not drain, the full loopback on a drained one.

The judgment (plugin_utils/gpudirect_in_service.py) is checked on real facts: the soft-RoCE
VM of the VM tier (no GPU, rxe0 ACTIVE: tests/fixtures/loopback/) and the lent 2x H200 node
(two GPUs on NVLink, the open module, no RDMA NIC: tests/fixtures/gpu_node/h200x2/), and on
those facts with one part taken away. The role is then run on this machine with a stand-in
for gpudirect_facts that returns those captured facts: a node in service gets no loopback,
no package and no GPU memory, and its record says why; a failing read-only check fails it.
"""

import copy
import json
import textwrap

import pytest
from ansible.errors import AnsibleFilterError

from ansible.module_utils import gpudirect_in_service as in_service
from conftest import play_on_localhost, read_fixture
from gpudirect_gpu_checks import gpudirect_in_service_check
from gpudirect_verify import add_checks as gpudirect_verify_add_checks, gpudirect_verify_record

VM = json.loads(read_fixture("loopback", "vm_rxe_gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
H200X2 = json.loads(read_fixture("gpu_node", "h200x2", "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]


def _with_nic(facts, state="ACTIVE"):
    """The H200 node's facts with the VM's rxe0 (its port in ``state``): a GPU node with a NIC."""
    out = copy.deepcopy(facts)
    nic = copy.deepcopy(VM["rdma_devices"][0])
    nic["ports"]["1"]["state"] = state
    out["rdma_devices"] = [nic]
    return out


def test_the_vm_in_service_passes_naming_what_it_read():
    check = in_service.judge(VM)
    assert check["status"] == "passed", check
    assert check["summary"] == ("in_service: passed (read-only, the node in service; the data path was not "
                                "exercised): no GPU; RDMA rxe0 port 1 ACTIVE")


def test_the_h200_node_without_a_nic_fails_naming_it():
    check = in_service.judge(H200X2)
    assert check["status"] == "failed"
    assert check["reason"] == "no RDMA device"


def test_a_gpu_node_with_an_active_nic_and_dma_buf_passes():
    check = in_service.judge(_with_nic(H200X2))
    assert check["status"] == "passed", check
    assert "2 GPU(s), NVIDIA driver 580.159.04 loaded" in check["summary"]
    assert "dma-buf (open kernel module, no peer-memory module loaded)" in check["summary"]


@pytest.mark.parametrize("change, reason", [
    (lambda f: f["rdma_devices"][0]["ports"]["1"].update(state="DOWN"), "no RDMA port is ACTIVE (rxe0 port 1 DOWN)"),
    (lambda f: f["nvidia_driver"].update(loaded=False), "the node lists 2 GPU(s) but the NVIDIA driver is not loaded"),
    (lambda f: f["dmabuf"].update(open_module=False),
     "no peer-memory path: neither nvidia_peermem nor nv_peer_mem is loaded and dma-buf is not available "
     "(the proprietary kernel module has no dma-buf export)"),
])
def test_a_missing_part_fails_naming_it(change, reason):
    facts = _with_nic(H200X2)
    change(facts)
    check = in_service.judge(facts)
    assert check["status"] == "failed" and check["reason"] == reason


def test_a_loaded_peer_memory_module_is_a_path_without_dma_buf():
    facts = _with_nic(H200X2)
    facts["dmabuf"]["open_module"] = False
    facts["peermem"]["nvidia_peermem"] = True
    assert "nvidia_peermem loaded" in in_service.judge(facts)["summary"]


@pytest.mark.parametrize("facts", [None, [], {"gpus": "0000:00:06.0"}, {"rdma_devices": {"rxe0": {}}}])
def test_something_other_than_the_facts_is_refused(facts):
    with pytest.raises(AnsibleFilterError, match="gpudirect_in_service_check: expected ansible_facts.gpudirect"):
        gpudirect_in_service_check(facts)


def _in_service_record():
    return gpudirect_verify_record(None, "gpu-a", {"code": "in_service", "message": "in service: ..."})


def test_a_failed_read_only_check_fails_the_node_in_service():
    out = gpudirect_verify_add_checks(_in_service_record(), [in_service.judge(H200X2)])
    assert out["status"] == "failed" and out["diagnosis"]["code"] == "in_service_failed"
    assert out["diagnosis"]["message"] == ("in_service: no RDMA device "
                                           "(the node is in service: its data path was not exercised)")
    assert "gpudirect_verify_scope: full" in out["diagnosis"]["fix"]


def test_passed_read_only_checks_leave_the_node_skipped_not_passed():
    out = gpudirect_verify_add_checks(_in_service_record(), [in_service.judge(VM)])
    assert out["status"] == "skipped" and out["diagnosis"]["code"] == "in_service"
    assert out["notes"][-1].startswith("in_service: passed (read-only")


def test_a_failed_check_does_not_fail_a_node_skipped_for_another_reason():
    skipped = gpudirect_verify_record(None, "gpu-a", {"code": "reboot_pending", "message": "reboot required"})
    assert gpudirect_verify_add_checks(skipped, [in_service.judge(H200X2)])["status"] == "skipped"


# --- the role on this machine, gpudirect_facts replaced by the captured facts ------------

FACTS_STANDIN = textwrap.dedent('''\
    #!/usr/bin/python
    from ansible.module_utils.basic import AnsibleModule
    import json


    def main():
        module = AnsibleModule(argument_spec=dict(kernel_log=dict(type="bool", default=True)),
                               supports_check_mode=True)
        with open(%r) as handle:
            module.exit_json(changed=False, ansible_facts={"gpudirect": json.load(handle)})


    main()
    ''')

PLAY = textwrap.dedent("""\
    ---
    - name: Verify
      hosts: localhost
      connection: local
      gather_facts: false
      tasks:
        - name: The role
          ansible.builtin.include_role:
            name: gpudirect_verify
            public: true
        - name: Show what the role decided
          ansible.builtin.debug:
            msg: "SCOPE={{ __gpudirect_verify_scope }} STATUS={{ gpudirect_verify_status }} IN_SERVICE_PASSED={{ gpudirect_verify_in_service_passed }}"
    """)


def _run(tmp_path, facts, **extra):
    library = tmp_path / "library"
    library.mkdir()
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts))
    (library / "gpudirect_facts.py").write_text(FACTS_STANDIN % str(facts_file))
    from conftest import ROOT
    variables = dict({"gpudirect_verify_report_dir": str(tmp_path / "reports"), "gpudirect_verify_signing": False},
                     **extra)
    return play_on_localhost(tmp_path, PLAY, variables,
                             env_extra={"ANSIBLE_LIBRARY": "%s:%s/library" % (library, ROOT)})


def test_a_node_in_service_is_only_read_and_its_record_says_why(tmp_path):
    proc = _run(tmp_path, VM)
    assert proc.returncode == 0, proc.stdout
    assert "SCOPE=in_service STATUS=skipped IN_SERVICE_PASSED=True" in proc.stdout
    # no helper, no build package, no GPU memory, no traffic: the loopback tasks never ran
    assert "Write a pattern through the NIC" not in proc.stdout
    assert "Install the missing compiler" not in proc.stdout
    assert "TASK [gpudirect_verify : Put the loopback helper" not in proc.stdout
    assert "TASK [gpudirect_verify : Run the loopback on the node] ****" in proc.stdout
    assert "TASK [gpudirect_verify : Check the node in service from its facts" in proc.stdout
    report = json.loads((tmp_path / "reports" / "localhost.json").read_text())
    assert report["diagnosis"]["code"] == "in_service"
    assert "this run did not drain the node" in report["diagnosis"]["message"]
    assert any(n.startswith("in_service: passed (read-only") for n in report["notes"])


def test_a_node_in_service_runs_no_cross_check_and_reports_none_as_failed(tmp_path):
    """With an nccl-tests command set, a node in service runs it not (it would load the GPUs
    under jobs) and says nothing about it: before, the cross-check read the skipped task and
    printed "nccl-tests ... failed ... did not run: no result" for every such node."""
    proc = _run(tmp_path, VM, gpudirect_verify_nccl_tests_command=["/bin/false"])
    assert proc.returncode == 0, proc.stdout
    assert "SCOPE=in_service STATUS=skipped" in proc.stdout
    assert "TASK [gpudirect_verify : Run the nccl-tests command" not in proc.stdout
    assert [line for line in proc.stdout.splitlines() if "nccl-tests" in line and ("fail" in line or "no result" in line)
            ] == [], proc.stdout
    assert "TASK [gpudirect_verify : Say what the cross-checks found]" not in proc.stdout
    report = json.loads((tmp_path / "reports" / "localhost.json").read_text())
    assert report.get("crosscheck") in (None, {}), report.get("crosscheck")


def test_a_node_in_service_missing_its_nic_fails(tmp_path):
    proc = _run(tmp_path, H200X2)
    assert proc.returncode != 0
    assert "[in_service_failed] in_service: no RDMA device (the node is in service" in proc.stdout
    assert "Write a pattern through the NIC" not in proc.stdout


@pytest.mark.parametrize("extra, scope", [
    ({}, "in_service"),
    ({"gpudirect_drain_idle": True}, "full"),
    ({"gpudirect_drain_nodes_run_no_jobs": True}, "full"),
    ({"gpudirect_verify_scope": "full"}, "full"),
    ({"gpudirect_verify_scope": "in_service", "gpudirect_drain_idle": True}, "in_service"),
])
def test_the_scope_follows_the_drain(tmp_path, extra, scope):
    """Resolved without running anything: gpudirect_verify_enabled false stops the role
    before any task touches the node, and the scope is a role variable."""
    proc = _run(tmp_path, VM, gpudirect_verify_enabled=False, **extra)
    assert proc.returncode == 0, proc.stdout
    assert "SCOPE=%s STATUS=skipped" % scope in proc.stdout


def test_a_scope_that_is_not_a_choice_is_refused_before_anything_runs(tmp_path):
    proc = _run(tmp_path, VM, gpudirect_verify_scope="partial")
    assert proc.returncode != 0
    assert "gpudirect_verify_scope" in proc.stdout and "partial" in proc.stdout


def test_the_real_h100_node_in_service_was_only_read_and_failed_for_its_missing_nic():
    """The role's own record from a lent H100 (tests/fixtures/gpu_node/h100x1/README.md, 2026-11-27):
    scope in_service, no NIC on the node. The read-only checks are the only ones in the record."""
    report = json.loads(read_fixture("gpu_node", "h100x1", "verify-in_service", "vm.json"))
    assert report["status"] == "failed" and report["diagnosis"]["code"] == "in_service_failed"
    assert report["diagnosis"]["message"] == ("in_service: no RDMA device "
                                              "(the node is in service: its data path was not exercised)")
    assert [c["name"] for c in report["checks"]] == ["module_signing", "nvlink_fabric", "in_service"]
    assert report["pairs"] == [] and report["bytes_compared"] is None
    # the same judgment from the node's facts, as the harness captured them on that machine
    facts = json.loads(read_fixture("gpu_node", "h100x1", "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
    assert in_service.judge(facts)["reason"] == "no RDMA device"
    assert in_service.judge(_with_nic(facts))["summary"].endswith(
        "1 GPU(s), NVIDIA driver 580.159.04 loaded; RDMA rxe0 port 1 ACTIVE; "
        "dma-buf (open kernel module, no peer-memory module loaded)")
