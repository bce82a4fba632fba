"""The caller of nvidia_topo_matrix: gpudirect_verify cross-checks the distance class from
sysfs of each tested pair against ``nvidia-smi topo -m`` (module_utils/gpudirect_topology.py
cross_check, filter gpudirect_verify_topo_notes, roles/gpudirect_verify/tasks/loopback.yml).

Inputs: the real outputs in tests/fixtures/topo (sources in its README) and the H200 node's
capture in tests/fixtures/gpu_node/h200/capture/ (GPU only, with its ANSI underline)."""

import json
import os

import yaml

from ansible.module_utils import gpudirect_topology as topo
from ansible.module_utils.gpudirect_topo_matrix import nvidia_topo_matrix

import gpudirect_verify
from conftest import H200_CAPTURE, PROJECT_FIXTURES

TOPO = os.path.join(PROJECT_FIXTURES, "topo")
ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "gpudirect_verify")


def _text(path):
    with open(path) as handle:
        return handle.read()


def _gpus(count):
    return [{"address": "0000:%02x:00.0" % (0x18 + 0x10 * i), "index": i} for i in range(count)]


def test_h100_sxm_one_pix_nic_per_gpu_agrees_and_a_wrong_class_is_named():
    matrix = nvidia_topo_matrix(_text(os.path.join(TOPO, "h100_sxm_8gpu_8nic_nv18.txt")))
    gpus = _gpus(8)
    nearest = [{"gpu": g["address"], "nic": "mlx5_%d" % g["index"], "distance": "PIX"} for g in gpus]
    assert topo.cross_check(matrix, gpus, nearest) == []
    far = [{"gpu": gpus[0]["address"], "nic": "mlx5_4", "distance": "SYS"},      # GPU0/NIC4 SYS: agrees
           {"gpu": gpus[1]["address"], "nic": "mlx5_0", "distance": "PXB"}]      # GPU1/NIC0 is NODE there
    notes = topo.cross_check(matrix, gpus, far)
    assert notes == ["GPU 0000:28:00.0 (GPU1) and mlx5_0 (NIC0): the distance from sysfs is PXB, nvidia-smi topo -m "
                     "says NODE; the pair choice and path warnings used PXB (check the PCIe path with lspci -t)"]


def test_kvm_guest_phb_and_older_drivers_mlx5_columns():
    matrix = nvidia_topo_matrix(_text(os.path.join(TOPO, "h100_pcie_1gpu_1nic.txt")))
    gpus = _gpus(1)
    assert topo.cross_check(matrix, gpus, [{"gpu": gpus[0]["address"], "nic": "mlx5_0", "distance": "PHB"}]) == []
    assert len(topo.cross_check(matrix, gpus, [{"gpu": gpus[0]["address"], "nic": "mlx5_0", "distance": "PIX"}])) == 1
    old = nvidia_topo_matrix(_text(os.path.join(TOPO, "v100_traverse_4gpu_mlx5_columns.txt")))
    row = old["matrix"]["GPU0"]
    nic = sorted(c for c in row if c.startswith("mlx5"))[0]
    gpus = _gpus(4)
    same = [{"gpu": gpus[0]["address"], "nic": nic, "distance": row[nic]}]
    assert topo.cross_check(old, gpus, same) == []


def test_pairs_nvidia_smi_does_not_show_are_not_compared():
    h200 = nvidia_topo_matrix(_text(os.path.join(H200_CAPTURE, "nvidia-smi-topo.txt")))
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")) as handle:
        facts = json.load(handle)["ansible_facts"]["gpudirect"]
    pairs = [{"gpu": facts["gpus"][0]["address"], "nic": "rxe0", "distance": "PIX"},   # soft-RoCE: no NIC column
             {"gpu": None, "nic": "mlx5_0", "distance": None},                         # host memory
             {"gpu": "0000:99:00.0", "nic": "mlx5_0", "distance": "PIX"}]              # no nvidia-smi index
    assert topo.cross_check(h200, facts["gpus"], pairs) == []


def test_the_filter_notes_a_failed_or_unreadable_command_and_ignores_a_skipped_one():
    facts = {"gpus": _gpus(1)}
    pairs = [{"gpu": facts["gpus"][0]["address"], "nic": "mlx5_0", "distance": "PIX"}]
    text = _text(os.path.join(TOPO, "h100_pcie_1gpu_1nic.txt"))
    notes = gpudirect_verify.gpudirect_verify_topo_notes({"rc": 0, "stdout": text}, facts, pairs)
    assert len(notes) == 1 and "nvidia-smi topo -m says PHB" in notes[0]
    assert gpudirect_verify.gpudirect_verify_topo_notes({"skipped": True, "changed": False}, facts, pairs) == []
    assert gpudirect_verify.gpudirect_verify_topo_notes(None, facts, pairs) == []
    failed = gpudirect_verify.gpudirect_verify_topo_notes(
        {"rc": 9, "stdout": "", "stderr": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                          "driver."}, facts, pairs)
    assert failed[0].startswith("nvidia-smi topo -m exited 9 (NVIDIA-SMI has failed")
    unreadable = gpudirect_verify.gpudirect_verify_topo_notes({"rc": 0, "stdout": "No devices were found\n"},
                                                               facts, pairs)
    assert "cannot read" in unreadable[0] and "not cross-checked" in unreadable[0]


def test_the_role_runs_it_read_only_and_keeps_the_notes_in_the_record():
    with open(os.path.join(ROLE, "tasks", "loopback.yml")) as handle:
        tasks = yaml.safe_load(handle)
    task = [t for t in tasks if t.get("register") == "__gpudirect_verify_topo"][0]
    assert task["ansible.builtin.command"]["argv"] == ["nvidia-smi", "topo", "-m"]
    assert task["check_mode"] is False and task["changed_when"] is False
    assert any("nvidia_smi.available" in w for w in task["when"])
    with open(os.path.join(ROLE, "tasks", "main.yml")) as handle:
        judge = [t for t in yaml.safe_load(handle) if t.get("name") == "Judge the result"][0]
    assert "gpudirect_verify_topo_notes" in json.dumps(judge)
