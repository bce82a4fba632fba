"""benchmarks/rollout_estimate.py: the campaign model behind issue #30's before/after estimate."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location("rollout_estimate", os.path.join(ROOT, "benchmarks", "rollout_estimate.py"))
est = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(est)


def test_without_look_ahead_the_waits_add_up():
    # two nodes, one at a time, each job 5 s past its drain, 10 s of work each
    assert est.simulate([5, 5], 10, 1) == (30, 10)


def test_look_ahead_overlaps_the_next_wait_with_this_batch_s_work():
    assert est.simulate([5, 5], 10, 1, lookahead=1) == (25, 5)
    # a job longer than the batch before it still waits for the rest
    assert est.simulate([5, 18], 10, 1, lookahead=1) == (28, 8)


def test_idle_first_moves_the_waiting_nodes_behind():
    # node 0 busy 20 s, node 1 idle; look-ahead 1: idle first lets node 0's job run out meanwhile
    assert est.simulate([20, 0], 10, 1, lookahead=1) == (40, 20)
    assert est.simulate([20, 0], 10, 1, lookahead=1, idle_first=True) == (30, 10)


def test_work_from_a_run_summary(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run_id": "r1", "playbooks": ["kernel_update.yml"], "nodes": {
        "a": {"duration_s": 100.0, "stages": ["lock", "verify"]},
        "b": {"duration_s": 300.0, "stages": ["lock", "verify"]},
        "c": {"duration_s": 5.0, "stages": []}}}))
    assert est.work_from_summary(str(path)) == (200.0, "r1", ["kernel_update.yml"])
    path.write_text(json.dumps({"nodes": {"c": {"duration_s": 5.0, "stages": []}}}))
    with pytest.raises(SystemExit, match="not a rolling run's summary"):
        est.work_from_summary(str(path))


def test_the_script_prints_the_four_policies(capsys):
    assert est.main(["--work-s", "1000", "--nodes", "20", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "drained at its batch (before)" in out and "look-ahead 2, idle first" in out
