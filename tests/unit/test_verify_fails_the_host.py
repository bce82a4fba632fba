"""roles/gpudirect_verify fails the host on what its record says (issue #31 outcome 6: breaking
the last task's condition left every test green).

The real role runs on this machine, copied with one task file replaced: tasks/loopback.yml
(which builds the helper and runs gpudirect_loopback on the node's NIC) becomes the
registered result of a real module run, the soft-RoCE VM's host-memory loopback
(tests/fixtures/loopback/vm_rxe_host_pass.json). Everything after it is the role's own:
the judgment, the reports, the fleet table and the failing task.

* on the VM's own facts (no GPU) the run passes;
* the same run on a node whose facts list GPUs, with the module's auto fallback to host
  memory, is not_proven and the host fails, naming the fix;
* a run whose compare found a flipped byte fails the host.
"""

import json
import os
import shutil
import textwrap

from conftest import ROOT, play_on_localhost, read_fixture

VM_FACTS = json.loads(read_fixture("loopback", "vm_rxe_gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
H200_FACTS = json.loads(read_fixture("gpu_node", "h200x2", "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
HOST_PASS = json.loads(read_fixture("loopback", "vm_rxe_host_pass.json"))

PLAY = textwrap.dedent("""\
    ---
    - name: Verify
      hosts: localhost
      connection: local
      gather_facts: false
      tasks:
        - name: The node's facts, as gpudirect_facts returned them
          ansible.builtin.set_fact:
            ansible_facts:
              gpudirect: "{{ node_facts }}"
        - name: The role
          ansible.builtin.include_role:
            name: gpudirect_verify
    """)

# replaces tasks/loopback.yml: the pairs and the registered loop, as that file leaves them
STANDIN_LOOPBACK = textwrap.dedent("""\
    ---
    - name: The registered loopback of one pair (a captured module result)
      ansible.builtin.set_fact:
        __gpudirect_verify_pairs: [{gpu: null, nic: rxe0, distance: null}]
        __gpudirect_verify_result: {results: "{{ [loopback_result] }}"}
    """)


def _run(tmp_path, facts, result):
    roles = tmp_path / "roles"
    shutil.copytree(os.path.join(ROOT, "roles", "gpudirect_verify"), roles / "gpudirect_verify")
    (roles / "gpudirect_verify" / "tasks" / "loopback.yml").write_text(STANDIN_LOOPBACK)
    variables = {"node_facts": facts, "loopback_result": result, "gpudirect_verify_scope": "full",
                 "gpudirect_verify_refresh_facts": False, "gpudirect_verify_report_dir": str(tmp_path / "reports"),
                 "gpudirect_verify_perftest": "off", "gpudirect_verify_gdrcopy": False,
                 "gpudirect_verify_signing": False}
    proc = play_on_localhost(tmp_path, PLAY, variables, env_extra={"ANSIBLE_ROLES_PATH": str(roles)})
    report = tmp_path / "reports" / "localhost.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def test_a_host_memory_pass_on_a_node_without_gpu_passes(tmp_path):
    proc, report = _run(tmp_path, VM_FACTS, HOST_PASS)
    assert proc.returncode == 0, proc.stdout
    assert report["status"] == "passed"


def test_an_auto_fallback_to_host_memory_on_a_gpu_node_fails_the_host_as_not_proven(tmp_path):
    fell_back = dict(HOST_PASS, mode_reason="auto: neither dma-buf nor a peer-memory module available; host memory only")
    proc, report = _run(tmp_path, H200_FACTS, fell_back)
    assert proc.returncode == 2, proc.stdout
    assert report["status"] == "not_proven"
    assert "GPUDirect RDMA not proven on localhost" in proc.stdout
    assert "What to do: Make a GPU memory path usable" in proc.stdout


def test_a_corrupted_compare_fails_the_host(tmp_path):
    corrupt = dict(HOST_PASS, mismatches=1, first_mismatch=524289)
    proc, report = _run(tmp_path, VM_FACTS, corrupt)
    assert proc.returncode == 2, proc.stdout
    assert report["status"] == "failed" and report["diagnosis"]["code"] == "data_mismatch"
    assert "GPUDirect RDMA verification failed on localhost" in proc.stdout
