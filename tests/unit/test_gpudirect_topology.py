"""The one definition of the GPU/NIC distance order (module_utils/gpudirect_topology.py),
and every place that orders, rates or lists the classes agreeing with it."""

import glob
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_coverage as coverage
from ansible.module_utils import gpudirect_loopback_helper as lh
from ansible.module_utils import gpudirect_topo_matrix as matrix
from ansible.module_utils import gpudirect_topology as topo

import gpudirect_report as report

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _distance_choices():
    """Every choices: list of a role argument spec or a module DOCUMENTATION that names distance classes."""
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            choices = node.get("choices")
            if isinstance(choices, list) and set(choices) & set(topo.DISTANCE_CLASSES):
                found.append((where, choices))
            for key, value in node.items():
                walk(value, "%s.%s" % (where, key))
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            walk(yaml.safe_load(handle), os.path.relpath(path, ROOT))
    for path in sorted(glob.glob(os.path.join(ROOT, "library", "*.py"))):
        with open(path) as handle:
            text = handle.read()
        if 'DOCUMENTATION = r"""' in text:
            doc = text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]
            walk(yaml.safe_load(doc), os.path.relpath(path, ROOT))
    return found


def test_yaml_choices_are_the_modules_order():
    """YAML cannot import the order: each list of distance classes must BE it, in its order."""
    found = _distance_choices()
    where = [w for w, _c in found]
    assert any(w.startswith("roles/gpudirect_preflight/") for w in where), where
    assert any(w.startswith("roles/gpudirect_pcie_acs/") for w in where), where
    for place, choices in found:
        assert tuple(choices) == topo.DISTANCE_ORDER, place


def test_order_and_rank():
    assert topo.DISTANCE_ORDER == ("PIX", "PXB", "PHB", "NODE", "SYS")
    assert topo.DISTANCE_CLASSES == ("X",) + topo.DISTANCE_ORDER
    ranks = [topo.distance_rank(c) for c in topo.DISTANCE_CLASSES]
    assert ranks == sorted(ranks) == list(range(6))
    assert topo.distance_rank(None, unknown=6) == 6
    for bad in (None, "SOC", "pix", "NV12", ""):
        with pytest.raises(topo.DistanceError, match="expected one of X, PIX, PXB, PHB, NODE, SYS"):
            topo.distance_rank(bad)


def test_verdicts_cover_the_order_once():
    assert set(topo.GOOD) | set(topo.WARN) | set(topo.BAD) == set(topo.DISTANCE_ORDER)
    assert not (set(topo.GOOD) & set(topo.WARN) or set(topo.GOOD) & set(topo.BAD) or set(topo.WARN) & set(topo.BAD))
    assert [topo.distance_verdict(c) for c in topo.DISTANCE_ORDER] == ["good", "good", "warn", "bad", "bad"]
    assert set(topo.CROSSES) == set(topo.WARN) | set(topo.BAD)
    with pytest.raises(topo.DistanceError, match="itself"):
        topo.distance_verdict("X")


def test_the_topology_matrix_rates_every_class_as_the_module_does():
    for cls in topo.DISTANCE_ORDER:
        assert matrix.gpudirect_distance_verdict(cls) == topo.distance_verdict(cls)
        assert matrix.gpudirect_distance_verdict(" %s " % cls.lower()) == topo.distance_verdict(cls)
    assert matrix.gpudirect_distance_verdict("SOC") == topo.distance_verdict("SYS")   # older drivers' name
    assert matrix.gpudirect_distance_verdict("NV18") == "good"
    with pytest.raises(matrix.TopoMatrixError, match="itself"):
        matrix.gpudirect_distance_verdict("X")


def test_report_coverage_and_loopback_order_pairs_the_same_way():
    pairs = [{"gpu_address": "0000:%02x:00.0" % (0x10 + i), "nic": "mlx5_%d" % i, "distance": d}
             for i, d in enumerate(reversed(topo.DISTANCE_ORDER))]
    best = report.gpudirect_best_pair({"pairs": pairs})
    assert best["distance"] == "PIX"
    assert sorted(pairs, key=lambda p: coverage.distance_rank(p["distance"]))[0] is best
    devices = dict((p["nic"], {"ports": {"1": {"state": "ACTIVE"}}}) for p in pairs)
    assert sorted(pairs, key=lambda p: lh.pair_key(p, devices, 1))[0] is best
    assert [p["distance"] for p in sorted(pairs, key=lambda p: lh.pair_key(p, devices, 1))] == list(topo.DISTANCE_ORDER)
    # an unknown distance (soft-RoCE on a virtual netdev) ranks after SYS everywhere
    unknown = {"gpu_address": "0000:99:00.0", "nic": "rxe0", "distance": None}
    devices["rxe0"] = {"ports": {"1": {"state": "ACTIVE"}}}
    assert sorted(pairs + [unknown], key=lambda p: lh.pair_key(p, devices, 1))[-1] is unknown
    assert coverage.distance_rank(None) > coverage.distance_rank("SYS")
    with pytest.raises(AnsibleFilterError, match="unknown GPU/NIC distance class 'SOC'"):
        report.gpudirect_best_pair({"pairs": [dict(pairs[0], distance="SOC")]})


def test_path_warnings_name_what_each_far_class_crosses():
    for cls in topo.DISTANCE_ORDER:
        warnings = lh.path_warnings({"gpu_address": "0000:1b:00.0", "nic": "mlx5_0", "distance": cls})
        if cls in topo.GOOD:
            assert warnings == []
        else:
            assert len(warnings) == 1 and topo.CROSSES[cls] in warnings[0] and "(PIX/PXB)" in warnings[0]
