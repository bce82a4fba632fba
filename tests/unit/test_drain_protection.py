"""No disruption without a drain (issue #29, outcome 1).

A node that needs a disruptive change (OFED restart, driver reload, reboot) is
drained first: drain, wait until idle and resume hooks, or the inventory says the
node runs no jobs. Otherwise the run is refused before any change on any node
(playbooks/plan.yml for site.yml, the first play of playbooks/kernel_update.yml),
and gpudirect_drain's drain entry point refuses the node on every other way in.
Each refusal names the node and the knobs.
"""
import json
import os
import textwrap

import pytest

from conftest import kernel_update_on_localhost, play_on_localhost, role_tasks_play

from ansible.module_utils import gpudirect_rolling as rolling  # noqa: E402  (conftest puts module_utils there)

SLURM = {
    "gpudirect_drain_command": ["scontrol", "update", "nodename=n1", "state=drain", "reason=gpudirect"],
    "gpudirect_drain_wait_command": ["sh", "-c", "! squeue -h -w n1 | grep -q ."],
    "gpudirect_drain_resume_command": ["scontrol", "update", "nodename=n1", "state=resume"],
}


def test_no_hooks_misses_all_three_knobs():
    missing = rolling.protection({})
    assert len(missing) == 3
    assert "gpudirect_drain_command" in missing[0]
    assert "gpudirect_drain_wait_command" in missing[1] and "gpudirect_drain_command_waits" in missing[1]
    assert "gpudirect_drain_resume_command" in missing[2]


def test_a_drain_without_a_wait_is_refused_unless_the_drain_command_waits():
    no_wait = dict(SLURM, gpudirect_drain_wait_command=[])
    missing = rolling.protection(no_wait)
    assert len(missing) == 1 and "returns at once" in missing[0]
    assert rolling.protection(dict(no_wait, gpudirect_drain_command_waits=True)) == []
    assert rolling.protection(SLURM) == []


def test_nodes_that_run_no_jobs_need_no_hooks_and_a_bad_flag_is_named():
    assert rolling.protection({"gpudirect_drain_nodes_run_no_jobs": True}) == []
    assert rolling.protection({"gpudirect_drain_nodes_run_no_jobs": "yes"}) == []
    assert len(rolling.protection({"gpudirect_drain_nodes_run_no_jobs": "false"})) == 3
    with pytest.raises(ValueError, match="gpudirect_drain_nodes_run_no_jobs='maybe'"):
        rolling.protection({"gpudirect_drain_nodes_run_no_jobs": "maybe"})


def test_the_refusal_names_every_unprotected_node_and_nothing_else():
    hostvars = {"gpu1": {}, "gpu2": SLURM, "gpu3": {"gpudirect_drain_nodes_run_no_jobs": True},
                "gpu4": dict(SLURM, gpudirect_drain_resume_command=[])}
    found = rolling.unprotected(["gpu1", "gpu2", "gpu3", "gpu4"], hostvars)
    assert sorted(found) == ["gpu1", "gpu4"]
    msg = rolling.unprotected_message(found)
    assert msg.startswith("Refusing to start: 2 node(s) need a disruptive change")
    assert "Nothing was changed on any node" in msg
    assert "gpu4: no resume (gpudirect_drain_resume_command is empty)" in msg
    assert "gpudirect_drain_nodes_run_no_jobs: true" in msg
    assert rolling.unprotected_message({}) == ""


def test_kernel_update_is_refused_on_every_node_before_any_lock(tmp_path):
    """The real playbooks/kernel_update.yml on two local nodes, one without hooks: both
    stop in the first play; the rolling play (lock, drain, kernel) never starts."""
    # neither kernel package is installed on this machine: both nodes need the update
    p = kernel_update_on_localhost(tmp_path, {"gpudirect_drain_command": ["true"], "gpudirect_drain_wait_command": ["true"],
                                              "gpudirect_drain_resume_command": ["true"]})
    assert p.returncode != 0, p.stdout
    assert "Refusing to start: 1 node(s) need a kernel update and its reboot" in p.stdout
    assert "gpu-a: no drain (gpudirect_drain_command is empty)" in p.stdout
    # both nodes stop, the protected one too: nothing starts anywhere
    assert "fatal: [gpu-a]" in p.stdout and "fatal: [gpu-b]" in p.stdout, p.stdout
    assert "run lock" not in p.stdout and "PLAY [Rolling kernel update]" not in p.stdout


@pytest.mark.parametrize("extra, missing", [
    ({}, "gpudirect_drain_command is empty"),
    ({"gpudirect_drain_command": ["true"], "gpudirect_drain_resume_command": ["true"]}, "gpudirect_drain_wait_command is empty"),
])
def test_drain_entry_point_refuses_an_unprotected_node(tmp_path, extra, missing):
    p = play_on_localhost(tmp_path, role_tasks_play("gpudirect_drain", "drain"), extra)
    assert p.returncode != 0, p.stdout
    assert "localhost needs a disruptive change and" in p.stdout and missing in p.stdout
    assert "Nothing disruptive was done" in p.stdout


def test_drain_entry_point_says_why_a_node_that_runs_no_jobs_is_not_drained(tmp_path):
    p = play_on_localhost(tmp_path, role_tasks_play("gpudirect_drain", "drain"),
                          {"gpudirect_drain_nodes_run_no_jobs": True})
    assert p.returncode == 0, p.stdout
    assert "no drain: the inventory says localhost runs no jobs (gpudirect_drain_nodes_run_no_jobs: true)" in p.stdout


# --- issue #29 outcome 5: the scheduler's state is respected

CYCLE = role_tasks_play("gpudirect_drain", "drain", then=textwrap.indent(textwrap.dedent("""\
    - name: Stand in for a verification that passed
      ansible.builtin.set_fact:
        gpudirect_verify_status: passed
    - name: Resume or not
      ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}
    """), "    "))


@pytest.fixture
def note():
    """The left-drained note's path: under /var/lib/gpudirect (the role's own directory), one per test."""
    import uuid

    path = "/var/lib/gpudirect/test-protection-%s.json" % uuid.uuid4().hex
    yield path
    if os.path.exists(path):
        os.unlink(path)


def scheduler(tmp_path, state, note):
    """Hooks of a stand-in scheduler that logs every call; `state` is what its state command prints
    (Slurm's `sinfo -h -N -o "%T %E"`: the state, then the admin's reason)."""
    log = tmp_path / "scheduler.log"
    hook = lambda word: ["sh", "-c", "echo %s >>%s" % (word, log)]  # noqa: E731
    return log, {
        "gpudirect_drain_command": hook("drain"), "gpudirect_drain_wait_command": hook("idle"),
        "gpudirect_drain_resume_command": hook("resume"),
        "gpudirect_drain_state_command": ["sh", "-c", "echo state >>%s; printf '%%s\\n' '%s'" % (log, state)],
        "gpudirect_drain_no_log": False, "gpudirect_drain_left_drained_file": note,
    }


@pytest.mark.parametrize("state", ["drained Bad DIMM [admin@2026-11-20T10:00:00]", "down* Not responding",
                                   "maint reservation", "true"])
def test_a_node_someone_else_took_out_of_service_is_held_out_untouched_by_default(tmp_path, state, note):
    """Issue #43, outcome 3: gpudirect_drain_admin_drained: skip (the default) leaves it exactly as it is."""
    log, extra = scheduler(tmp_path, state, note)
    p = play_on_localhost(tmp_path, CYCLE, extra)
    assert p.returncode == 0, p.stdout
    # its state was read, and nothing else: no drain, no wait, no resume
    assert log.read_text().split() == ["state"]
    assert "localhost: out of service before this run by another hand (%s)" % state in p.stdout
    assert "gpudirect_drain_admin_drained: skip" in p.stdout
    assert "Resume or not" not in p.stdout and not os.path.exists(note)


def test_an_earlier_runs_drain_with_its_note_on_the_node_is_taken_over_and_resumed(tmp_path, note):
    """Issue #43, outcome 2: the node a killed run drained reads as out of service, but its note says whose."""
    with open(note, "w") as handle:
        json.dump({"reason": "drained for a disruptive change by site.yml ...", "resume_command": ["true"],
                   "intent": True, "since": "2026-11-29T03:00:00Z", "run": "20261129T030000Z-1", "stage": "drivers"},
                  handle)
    log, extra = scheduler(tmp_path, "drained gpudirect run 20261129T030000Z-1: drivers", note)
    left_behind = role_tasks_play("gpudirect_drain", "left_behind", then=textwrap.indent(textwrap.dedent("""\
        - name: The drain tasks
          ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: drain}
        - name: Stand in for a verification that passed
          ansible.builtin.set_fact:
            gpudirect_verify_status: passed
        - name: Resume or not
          ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}
        """), "    "))
    p = play_on_localhost(tmp_path, left_behind, extra)
    assert p.returncode == 0, p.stdout
    assert "localhost is drained by an earlier run of this toolkit" in p.stdout
    # drained again under this run's reason, waited for, resumed after the passed verification
    assert log.read_text().split() == ["state", "drain", "idle", "resume"]
    assert not os.path.exists(note)


@pytest.mark.parametrize("state", ["drained Bad DIMM [admin@2026-11-20T10:00:00]", "down* Not responding",
                                   "maint reservation", "true"])
def test_a_node_out_of_service_before_the_run_keeps_its_state_and_reason(tmp_path, state, note):
    log, extra = scheduler(tmp_path, state, note)
    p = play_on_localhost(tmp_path, CYCLE, dict(extra, gpudirect_drain_admin_drained="include"))
    assert p.returncode == 0, p.stdout
    # its state was read, it was waited for, but neither drained again nor resumed
    assert log.read_text().split() == ["state", "idle"]
    assert "localhost was out of service before this run (%s)" % state in p.stdout
    assert "localhost: not resumed, it was out of service before this run" in p.stdout
    assert not os.path.exists(note)


@pytest.mark.parametrize("state", ["idle", "mixed", "allocated", "false"])
def test_a_node_in_service_is_drained_and_resumed_after_a_passed_verification(tmp_path, state, note):
    log, extra = scheduler(tmp_path, state, note)
    p = play_on_localhost(tmp_path, CYCLE, extra)
    assert p.returncode == 0, p.stdout
    assert log.read_text().split() == ["state", "drain", "idle", "resume"]
    assert "was out of service before this run (" not in p.stdout and "not resumed, it was" not in p.stdout


# --- issue #30 outcome 1: the campaign's budgets, counted over the whole run

def test_budget_counts_failed_lost_and_left_drained_nodes_of_earlier_batches_only():
    hostvars = {"n1": {"gpudirect_drain_stage": "verify"},                       # passed, alive
                "n2": {"gpudirect_drain_stage": "dkms", "__gpudirect_drain_failure": {"task": "x"}},
                "n3": {"gpudirect_drain_stage": "reboot"},                       # lost (not alive)
                "n4": {"gpudirect_drain_stage": "verify", "gpudirect_drain_left_drained": {"reason": "r"}},
                "n5": {}, "n6": {}}
    alive = ["n1", "n2", "n4", "n5", "n6"]
    out = rolling.budget(list(hostvars), hostvars, alive, ["n5"], max_failed=3)
    assert out["failed"] == ["n2", "n3", "n4"] and out["stop"] is False
    out = rolling.budget(list(hostvars), hostvars, alive, ["n5"], max_failed=2)
    assert out["stop"] and "3 node(s) failed or were left drained by this run (n2, n3, n4)" in out["reason"]
    assert "gpudirect_rolling_max_failed_nodes=2" in out["reason"] and "Nothing was drained or changed on n5" in out["reason"]
    # a percentage of the play's nodes: 50% of 6 = 3
    assert rolling.budget(list(hostvars), hostvars, alive, ["n5"], max_failed="50%")["stop"] is False


def test_out_of_service_budget_counts_nodes_out_before_the_run_and_the_next_batch():
    hostvars = {"n1": {"gpudirect_drain_out_before": True}, "n2": {"gpudirect_drain_out_before": "True"},
                "n3": {}, "n4": {}, "n5": {}}
    hosts = list(hostvars)
    # out before: n1, n2; the batch n3, n4 -> 4 nodes out at once
    out = rolling.budget(hosts, hostvars, hosts, ["n3", "n4"], max_out=3)
    assert out["stop"] and "4 node(s) would be out of service" in out["reason"]
    assert "out of service before it: n1, n2" in out["reason"] and "gpudirect_rolling_max_out_of_service=3" in out["reason"]
    assert rolling.budget(hosts, hostvars, hosts, ["n3", "n4"], max_out=4)["stop"] is False
    # a node of the batch that was out before counts once
    assert rolling.budget(hosts, hostvars, hosts, ["n1", "n3"], max_out=3)["stop"] is False


@pytest.mark.parametrize("value", [-1, True, "x", "101%", 1.5])
def test_a_bad_budget_is_refused_naming_the_knob(value):
    with pytest.raises(ValueError, match="gpudirect_rolling_max_failed_nodes="):
        rolling.play_setting(["n1"], {"n1": {"gpudirect_rolling_max_failed_nodes": value}},
                             "gpudirect_rolling_max_failed_nodes")
    assert rolling.play_setting(["n1"], {"n1": {}}, "gpudirect_rolling_max_out_of_service") is None
