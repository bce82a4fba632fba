"""The Molecule scenario `rolling` proves the drain protocol on four container nodes with
a fake scheduler, through a lean copy of the rolling play (molecule/rolling/rolling.yml:
stand-in stages, the real gpudirect_drain role). That proof holds for site.yml only while
the copy calls the drain role as playbooks/rolling.yml does: the same entry points in the
same order (in the block, in its rescue, after it), the same batch keywords, the same
final table play. This test fails when the two drift apart."""

import os
import re

import yaml

from conftest import ROOT, host_pattern


def _plays(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _drain_calls(tasks):
    """The gpudirect_drain entry points a task list calls, in order, by where they sit."""
    calls = []
    for task in tasks or []:
        role = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role") or {}
        if role.get("name") == "gpudirect_drain":
            calls.append(role.get("tasks_from", "main"))
        for part in ("block", "rescue", "always"):
            if part in task:
                calls.append((part, _drain_calls(task[part])))
    return calls


def _flatten(calls):
    """Each call with the part it sits in; a block nested in a block (a stage that runs only on some
    nodes) counts as the block around it."""
    out = []
    for call in calls:
        out.extend([call[0] + ":" + c for c in _flatten(call[1])] if isinstance(call, tuple) else [call])
    return [re.sub(r"^(block:)+", "block:", c) for c in out]


def _rolling_play(plays):
    return [p for p in plays if p.get("vars", {}).get("__gpudirect_drain_rolling_play")][0]


def test_the_scenario_calls_the_drain_role_as_the_rolling_play_does():
    real = _rolling_play(_plays("playbooks", "rolling.yml"))
    lean = _rolling_play(_plays("molecule", "rolling", "rolling.yml"))
    real_calls, lean_calls = _flatten(_drain_calls(real["tasks"])), _flatten(_drain_calls(lean["tasks"]))
    # the stages differ (the scenario's are stand-ins): each begins with the stage entry point, and the
    # lock and the drain are stages of both
    assert real_calls[:6] == lean_calls[:6] == ["block:budget", "block:drain_ahead", "block:stage", "block:lock",
                                                "block:stage", "block:drain"]
    assert [c for c in real_calls if c != "block:stage"] == ["block:budget", "block:drain_ahead", "block:lock",
                                                             "block:drain", "rescue:failed", "resume", "unlock",
                                                             "report"]
    assert [c for c in lean_calls if c != "block:stage"] == [c for c in real_calls if c != "block:stage"]
    assert real_calls.count("block:stage") == 7 and lean_calls.count("block:stage") == 4


def test_the_scenario_batches_as_the_rolling_play_does():
    real = _rolling_play(_plays("playbooks", "rolling.yml"))
    lean = _rolling_play(_plays("molecule", "rolling", "rolling.yml"))
    for keyword in ("hosts", "order", "gather_facts"):
        assert lean.get(keyword) == real.get(keyword), keyword
    # serial and max_fail_percentage come from the same two knobs
    assert "gpudirect_rolling_batch" in real["serial"] and "gpudirect_rolling_batch" in lean["serial"]
    assert "gpudirect_rolling_max_fail_percentage" in real["max_fail_percentage"]
    assert "gpudirect_rolling_max_fail_percentage" in lean["max_fail_percentage"]


def test_both_end_with_the_table_of_the_whole_run():
    for parts in (("playbooks", "rolling.yml"), ("molecule", "rolling", "rolling.yml")):
        # the last play with hosts (the scenario's playbook then imports the fleet release, as site.yml does)
        last = [play for play in _plays(*parts) if "hosts" in play][-1]
        assert host_pattern(last["hosts"]) == "gpudirect_disrupt"
        task = last["tasks"][-1]
        assert task["ansible.builtin.include_role"] == {"name": "gpudirect_drain", "tasks_from": "report"}
        assert task["vars"] == {"gpudirect_drain_report_final": True}


def test_the_scenario_takes_and_releases_the_fleet_lock_as_site_yml_does():
    """The lean playbook is framed by the same two playbooks as site.yml: the fleet lock first, its release last
    (the "stop" run's second controller is refused by the first)."""
    def imports(plays):
        return [os.path.basename(p["ansible.builtin.import_playbook"]) for p in plays if "ansible.builtin.import_playbook" in p]
    site, lean = imports(_plays("site.yml")), imports(_plays("molecule", "rolling", "rolling.yml"))
    assert site[0] == lean[0] == "fleet_lock.yml"
    assert site[-1] == lean[-1] == "fleet_release.yml"
    assert lean == ["fleet_lock.yml", "fleet_release.yml"]
