"""Waits overlap (issue #30, outcome 4): plugin_utils/gpudirect_rolling.py drain_ahead, order, the budget
counting nodes drained ahead, and the final table naming a node drained ahead that a stopped run never
reached (module_utils/gpudirect_lock.py). The role's tasks run in the rolling Molecule scenario's "ahead"
run (molecule/rolling, real gpudirect_drain, a fake scheduler with jobs)."""

import pytest

from ansible.module_utils import gpudirect_lock as lock
from ansible.module_utils import gpudirect_rolling as rolling

NODES = ["n%02d" % i for i in range(1, 9)]


RENDERED = {"command": ["drain"], "state_command": [], "resume_command": ["resume"], "delegate_to": "localhost",
            "left_drained_file": "/var/lib/gpudirect/left-drained.json", "out_of_service_pattern": "drain"}


def hv(**per_node):
    out = {n: {"gpudirect_drain_rendered": RENDERED} for n in NODES}
    for node, variables in per_node.items():
        out[node].update(variables)
    return out


def test_the_next_nodes_after_the_batch_are_drained_ahead():
    out = rolling.drain_ahead(NODES, hv(), NODES, ["n01", "n02"], 2)
    assert out == {"drain": ["n03", "n04"], "held_back": [], "reason": ""}


def test_nodes_already_ahead_fill_the_window_and_are_not_drained_twice():
    variables = hv(n03={"gpudirect_drain_ahead": True})
    assert rolling.drain_ahead(NODES, variables, NODES, ["n02"], 2)["drain"] == ["n04"]
    assert rolling.drain_ahead(NODES, variables, NODES, ["n02"], 1)["drain"] == []


def test_started_lost_and_out_of_service_nodes_are_skipped():
    variables = hv(n03={"gpudirect_drain_stage": "verify"}, n05={"gpudirect_drain_out_before": True})
    alive = [n for n in NODES if n != "n04"]
    # n03 started (a batch of its own) and n04 is gone: not in the window; n05, out of service before the
    # run, takes its place in the window but is not drained (kept as the admin left it)
    assert rolling.drain_ahead(NODES, variables, alive, ["n02"], 3)["drain"] == ["n06", "n07"]


def test_zero_drains_nothing_and_the_last_batch_has_no_window():
    assert rolling.drain_ahead(NODES, hv(), NODES, ["n01"], 0)["drain"] == []
    assert rolling.drain_ahead(NODES, hv(), NODES, ["n08"], 3)["drain"] == []


def test_the_out_of_service_budget_holds_nodes_back_and_says_so():
    variables = hv(n05={"gpudirect_drain_out_before": True})
    out = rolling.drain_ahead(NODES, variables, NODES, ["n01"], 3, max_out=3)
    # out already: n05 (before the run) and n01 (the batch): room for one more
    assert out["drain"] == ["n02"] and out["held_back"] == ["n03", "n04"]
    assert "n03, n04 held back from draining ahead: 2 node(s) are out of service already" in out["reason"]
    assert "gpudirect_rolling_max_out_of_service=3 allows 3" in out["reason"]
    assert rolling.drain_ahead(NODES, variables, NODES, ["n01"], 3, max_out="25%")["drain"] == []


def test_the_budget_counts_nodes_drained_ahead():
    variables = hv(n03={"gpudirect_drain_ahead": True}, n04={"gpudirect_drain_ahead": True})
    out = rolling.budget(NODES, variables, NODES, ["n02"], max_out=2)
    assert out["stop"] and "2 drained ahead of their batch; 1 in this batch" in out["reason"]
    # at its own batch a node drained ahead counts once
    assert not rolling.budget(NODES, variables, NODES, ["n03", "n04"], max_out=2)["stop"]


@pytest.mark.parametrize("value", [-1, "x", True, 1.5])
def test_a_bad_lookahead_is_named(value):
    with pytest.raises(ValueError, match="gpudirect_rolling_lookahead"):
        rolling.drain_ahead(NODES, hv(), NODES, ["n01"], value)


def test_the_knobs_are_play_settings_the_nodes_agree_on():
    assert rolling.play_setting(NODES, hv(), "gpudirect_rolling_lookahead") == 0
    assert rolling.play_setting(NODES, {n: {"gpudirect_rolling_lookahead": "4"} for n in NODES},
                                "gpudirect_rolling_lookahead") == 4
    with pytest.raises(ValueError, match="gpudirect_rolling_idle_first differs between the nodes"):
        rolling.play_setting(NODES, hv(n01={"gpudirect_rolling_idle_first": True}), "gpudirect_rolling_idle_first")
    with pytest.raises(ValueError, match="gpudirect_rolling_idle_first='sometimes' must be true or false"):
        rolling.check("gpudirect_rolling_idle_first", "sometimes")


def test_order_by_name_or_idle_first():
    shuffled = ["n03", "n01", "n02", "n04"]
    variables = hv(n02={"gpudirect_drain_idle_now": True}, n04={"gpudirect_drain_idle_now": True})
    assert rolling.order(shuffled, variables) == ["n01", "n02", "n03", "n04"]
    both = {n: dict(v, gpudirect_rolling_idle_first=True) for n, v in variables.items()}
    assert rolling.order(shuffled, both) == ["n02", "n04", "n01", "n03"]
    with pytest.raises(ValueError, match="expected a list of host names"):
        rolling.order("n01", variables)


def test_a_node_drained_ahead_that_the_run_never_reached_is_named_with_its_resume_command():
    variables = hv(n01={"gpudirect_drain_stage": "verify", "gpudirect_drain_drained": True,
                        "__gpudirect_drain_batch_done": True},
                   n02={"gpudirect_drain_drained": True, "gpudirect_drain_ahead": True,
                        "__gpudirect_drain_resume_line": "scontrol update nodename=n02 state=resume"})
    hosts = ["n01", "n02", "n03"]
    rows = lock.report_rows(variables, hosts, hosts, final=True)
    assert rows == [{"node": "n02", "reason": "drained ahead of its batch, not reached: the run stopped before it "
                     "(nothing changed on the node); resume it by hand, or run the playbook again",
                     "resume_command": "scontrol update nodename=n02 state=resume"},
                    {"node": "n03", "reason": "not reached: the run stopped before its batch (not drained, not "
                     "changed); run the playbook again", "resume_command": "-"}]
    # between batches it is not a row: its batch is still to come
    assert lock.report_rows(variables, hosts, hosts, final=False) == []


def test_a_node_the_plan_pass_did_not_render_is_drained_at_its_own_batch_and_named():
    variables = hv()
    del variables["n03"]["gpudirect_drain_rendered"]
    out = rolling.drain_ahead(NODES, variables, NODES, ["n02"], 2)
    assert out["drain"] == ["n04"]
    assert out["reason"] == ("n03 drained at their own batch: this run's plan pass did not keep their drain settings "
                             "(gpudirect_drain_rendered)")
