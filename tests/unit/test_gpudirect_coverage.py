"""Which GPU/NIC pairs the verification tests (plugin_utils/gpudirect_coverage.py).

The topologies are real `nvidia-smi topo -m` outputs (tests/fixtures/topo/, sources in
its README), read with the project's own parser (plugin_utils/gpudirect_topo_matrix.py) and turned
into the ``pairs`` of ``ansible_facts.gpudirect``: the same distance classes the facts
module computes from sysfs. The GPU PCI addresses are made up (the topology tables do
not print them), in the order of the GPU indices.
"""

import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_verify as verify  # filter_plugins/gpudirect_verify.py
from ansible.module_utils import gpudirect_coverage as coverage
from ansible.module_utils.gpudirect_topo_matrix import nvidia_topo_matrix
from ansible.module_utils.gpudirect_topology import DISTANCE_CLASSES
from conftest import H200_CAPTURE, PROJECT_FIXTURES


def facts_from_topo(name, nics=None, directory=None):
    """``{gpus, rdma_devices, pairs}`` from a topology fixture; ``nics`` keeps only those NICs."""
    with open(os.path.join(directory or os.path.join(PROJECT_FIXTURES, "topo"), name)) as handle:
        topo = nvidia_topo_matrix(handle.read())
    legend = topo.get("nic_legend") or {}
    gpu_ids = [d for d in topo["devices"] if d.startswith("GPU")]
    nic_ids = [d for d in topo["devices"] if not d.startswith("GPU")]
    address = dict((g, "0000:%02x:00.0" % (0x18 + 0x10 * i)) for i, g in enumerate(gpu_ids))
    nic_name = dict((n, legend.get(n, n)) for n in nic_ids)
    keep = [n for n in nic_ids if nics is None or nic_name[n] in nics]
    return {
        "gpus": [{"address": address[g], "index": i} for i, g in enumerate(gpu_ids)],
        "rdma_devices": [{"name": nic_name[n], "pci_address": None} for n in keep],
        "pairs": [{"gpu_address": address[g], "nic": nic_name[n], "distance": topo["matrix"][g][n]}
                  for g in gpu_ids for n in keep],
    }


def as_tuples(pairs):
    return [(p["gpu"], p["nic"], p["distance"]) for p in pairs]


# Princeton Traverse: 4x V100, two dual-port HCAs (mlx5_0/1 on socket 0, mlx5_2/3 on
# socket 1), every GPU at NODE from the HCA of its socket. One port of each HCA: 4 GPUs, 2 NICs.
TRAVERSE = "v100_traverse_4gpu_mlx5_columns.txt"
G = ["0000:18:00.0", "0000:28:00.0", "0000:38:00.0", "0000:48:00.0"]


def test_nearest_on_4_gpus_and_2_nics_tests_4_pairs_covering_both_nics():
    facts = facts_from_topo(TRAVERSE, nics=("mlx5_0", "mlx5_2"))
    pairs = coverage.plan_pairs(facts, "nearest")
    assert as_tuples(pairs) == [(G[0], "mlx5_0", "NODE"), (G[1], "mlx5_0", "NODE"),
                                (G[2], "mlx5_2", "NODE"), (G[3], "mlx5_2", "NODE")]
    assert {p["nic"] for p in pairs} == {"mlx5_0", "mlx5_2"} and {p["gpu"] for p in pairs} == set(G)


def test_all_on_4_gpus_and_2_nics_tests_8_pairs_and_one_tests_1():
    facts = facts_from_topo(TRAVERSE, nics=("mlx5_0", "mlx5_2"))
    every = coverage.plan_pairs(facts, "all")
    assert len(every) == 8 and len(set((p["gpu"], p["nic"]) for p in every)) == 8
    assert [p["distance"] for p in every if p["gpu"] == G[0]] == ["NODE", "SYS"]
    assert as_tuples(coverage.plan_pairs(facts, "one")) == [(G[0], "mlx5_0", "NODE")]


def test_nearest_spreads_gpus_over_ports_at_the_same_distance():
    # all four ports: each GPU gets its own port on its socket, and every port is covered
    pairs = coverage.plan_pairs(facts_from_topo(TRAVERSE), "nearest")
    assert as_tuples(pairs) == [(G[0], "mlx5_0", "NODE"), (G[1], "mlx5_1", "NODE"),
                                (G[2], "mlx5_2", "NODE"), (G[3], "mlx5_3", "NODE")]


def test_nearest_on_the_8_gpu_8_nic_h100_is_the_8_pix_pairs():
    facts = facts_from_topo("h100_sxm_8gpu_8nic_nv18.txt")
    pairs = coverage.plan_pairs(facts, "nearest")
    assert len(pairs) == 8 and {p["distance"] for p in pairs} == {"PIX"}
    assert sorted(p["nic"] for p in pairs) == ["mlx5_%d" % i for i in range(8)]
    assert len(coverage.plan_pairs(facts, "all")) == 64


def test_nearest_adds_the_nics_no_gpu_chose_with_their_nearest_gpu():
    # 8x A100 SXM with 10 NICs: the NICs no GPU chose are added, each with its nearest GPU
    facts = facts_from_topo("a100_sxm_8gpu_10nic_nv12_tabs.txt")
    pairs = coverage.plan_pairs(facts, "nearest")
    nics = [d["name"] for d in facts["rdma_devices"]]
    assert len(nics) == 10 and len(pairs) >= 10
    assert {p["nic"] for p in pairs} == set(nics) and {p["gpu"] for p in pairs} == {g["address"] for g in facts["gpus"]}
    by_key = dict(((p["gpu_address"], p["nic"]), p["distance"]) for p in facts["pairs"])
    for p in pairs:   # never a farther class than the nearest one of that NIC or GPU
        best_for_nic = min(coverage.distance_rank(by_key[(g["address"], p["nic"])]) for g in facts["gpus"])
        best_for_gpu = min(coverage.distance_rank(by_key[(p["gpu"], n)]) for n in nics)
        assert coverage.distance_rank(p["distance"]) in (best_for_nic, best_for_gpu), p


def test_named_gpu_or_nic_restricts_the_sets():
    facts = facts_from_topo(TRAVERSE, nics=("mlx5_0", "mlx5_2"))
    # one GPU: its nearest NIC, then the other NIC (every NIC of the restricted set is covered)
    assert as_tuples(coverage.plan_pairs(facts, "nearest", gpu="38:00.0")) == [
        (G[2], "mlx5_2", "NODE"), (G[2], "mlx5_0", "SYS")]
    assert as_tuples(coverage.plan_pairs(facts, "one", gpu="0000:38:00.0")) == [(G[2], "mlx5_2", "NODE")]
    assert [p["gpu"] for p in coverage.plan_pairs(facts, "nearest", rdma_device="mlx5_0")] == G
    # what the facts do not know goes to the module, which names what exists
    assert coverage.plan_pairs(facts, "nearest", gpu="0000:ff:00.0") == [
        {"gpu": "0000:ff:00.0", "nic": None, "distance": None}]
    assert coverage.plan_pairs(facts, "nearest", rdma_device="mlx5_9") == [
        {"gpu": None, "nic": "mlx5_9", "distance": None}]


def test_host_memory_and_nodes_without_gpu_test_the_nics_alone():
    facts = facts_from_topo(TRAVERSE)
    assert as_tuples(coverage.plan_pairs(facts, "nearest", host_memory=True)) == [
        (None, "mlx5_%d" % i, None) for i in range(4)]
    assert len(coverage.plan_pairs(facts, "one", host_memory=True)) == 1
    # the VM test node: soft-RoCE, no GPU (the captured facts)
    import json
    with open(os.path.join(PROJECT_FIXTURES, "loopback", "vm_rxe_gpudirect_facts.json")) as handle:
        vm = json.load(handle)
    vm = vm.get("ansible_facts", {}).get("gpudirect", vm)
    assert coverage.plan_pairs(vm, "nearest") == [{"gpu": None, "nic": "rxe0", "distance": None}]
    # no RDMA device at all: the module runs once per GPU and says so for each (no_rdma_device)
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "gpudirect_facts.json")) as handle:
        h100 = json.load(handle)["ansible_facts"]["gpudirect"]
    assert coverage.plan_pairs(h100, "all") == [{"gpu": "0000:00:06.0", "nic": None, "distance": None}]
    # ... and once in host memory, or on a node with neither GPU nor NIC
    assert coverage.plan_pairs(h100, "all", host_memory=True) == [{"gpu": None, "nic": None, "distance": None}]
    assert coverage.plan_pairs({"gpus": [], "rdma_devices": []}) == [{"gpu": None, "nic": None, "distance": None}]


def test_the_two_gpu_node_without_nic_plans_one_run_per_gpu():
    # the lent 2x H200 machine (tests/fixtures/gpu_node/h200x2): NVLink between the GPUs, no RDMA NIC
    import json
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", "h200x2", "gpudirect_facts.json")) as handle:
        facts = json.load(handle)["ansible_facts"]["gpudirect"]
    per_gpu = [{"gpu": "0000:00:06.0", "nic": None, "distance": None},
               {"gpu": "0000:00:07.0", "nic": None, "distance": None}]
    assert coverage.plan_pairs(facts, "nearest") == per_gpu
    assert coverage.plan_pairs(facts, "all") == per_gpu
    assert coverage.plan_pairs(facts, "one") == per_gpu[:1]
    assert coverage.plan_pairs(facts, "nearest", gpu="00:07.0") == per_gpu[1:]


def test_gpus_and_nics_without_topology_pair_are_still_all_covered():
    # a GPU node with soft-RoCE on a virtual netdev: no pairs in the facts, distance unknown
    facts = {"gpus": [{"address": a} for a in G[:2]], "rdma_devices": [{"name": "rxe0"}], "pairs": []}
    assert as_tuples(coverage.plan_pairs(facts, "nearest")) == [(G[0], "rxe0", None), (G[1], "rxe0", None)]


def test_the_one_distance_order_is_the_facts_modules():
    assert [coverage.distance_rank(c) for c in DISTANCE_CLASSES] == list(range(len(DISTANCE_CLASSES)))
    assert coverage.distance_rank(None) == len(DISTANCE_CLASSES)
    with pytest.raises(coverage.CoverageError, match="NV18"):
        coverage.distance_rank("NV18")


@pytest.mark.parametrize("bad, message", [
    (dict(coverage="every"), "gpudirect_verify_coverage must be one of nearest, all, one"),
    (dict(gpu="GPU0"), "gpudirect_verify_gpu must be a PCI address"),
])
def test_bad_knobs_are_named(bad, message):
    facts = facts_from_topo(TRAVERSE)
    args = dict(coverage="nearest", gpu="")
    args.update(bad)
    with pytest.raises(coverage.CoverageError, match=message):
        coverage.plan_pairs(facts, args["coverage"], gpu=args["gpu"])
    with pytest.raises(AnsibleFilterError, match=message):
        verify.gpudirect_verify_pairs(facts, args["coverage"], args["gpu"])


def test_the_filter_plans_what_the_module_utils_plan():
    facts = facts_from_topo(TRAVERSE, nics=("mlx5_0", "mlx5_2"))
    assert verify.gpudirect_verify_pairs(facts, "nearest") == coverage.plan_pairs(facts, "nearest")
    assert len(verify.gpudirect_verify_pairs(facts, "all", "", "", "host")) == 2


def test_the_h200_topology_has_no_nic_and_plans_one_module_run_per_gpu():
    facts = facts_from_topo("nvidia-smi-topo.txt", directory=H200_CAPTURE)
    assert facts["rdma_devices"] == [] and len(facts["gpus"]) >= 1
    assert coverage.plan_pairs(facts, "nearest") == [{"gpu": g["address"], "nic": None, "distance": None}
                                                     for g in facts["gpus"]]
