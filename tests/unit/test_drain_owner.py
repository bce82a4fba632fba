"""Whose drain it is, and what a run does with it (issue #43, outcomes 1-3).

A node's scheduler state before the run is read once (roles/gpudirect_drain tasks/state.yml)
and judged by plugin_utils/gpudirect_rolling.py scheduler_state: an admin's drain or the
scheduler's own DOWN ("other") holds the node out of the run by default (group
gpudirect_held, left out of every play by filter_plugins/gpudirect_hosts.py); a drain of an
earlier run of this toolkit ("toolkit": its reason starts "gpudirect run ", or, where the
scheduler says no reason, its note on the node) is taken over. A wait that times out skips
the node (module_utils/gpudirect_lock.py report_rows names it; the run summary's verdict is
"skipped"). Slurm's results here are the module gpudirect_slurm_node's, whose node status
comes from module_utils/gpudirect_slurm.py on real scontrol outputs (tests/fixtures/slurm/).
"""

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_lock as lock
from ansible.module_utils import gpudirect_rolling as rolling
from ansible.module_utils import gpudirect_run_summary as rs

from gpudirect_hosts import gpudirect_hosts
from gpudirect_rolling import FilterModule

STATE = FilterModule().filters()["gpudirect_drain_state"]
PATTERN = r"(?i)\b(drain\w*|drng|down\w*|maint\w*|fail\w*|true)\b"
NOTE = {"line": "gpu07: drained for a disruptive change by site.yml ...", "reason": "drained ..."}


def _slurm(state, reason=None, owner=None, out=True):
    return {"changed": False, "owner": owner,
            "node": {"name": "gpu07", "state": state, "reason": reason, "out_of_service": out, "owner": owner}}


# --- the Slurm module's status ------------------------------------------------------------------

def test_an_admins_slurm_drain_is_someone_elses_and_keeps_its_reason_in_the_text():
    read = _slurm("IDLE+DRAIN", "Bad DIMM", "other")
    assert STATE(read, "slurm") == {"text": 'IDLE+DRAIN, reason "Bad DIMM"', "out_of_service": True, "owner": "other"}


def test_a_slurm_drain_named_by_an_earlier_run_is_the_toolkits_own():
    read = _slurm("IDLE+DRAIN", "gpudirect run 20261129T031500Z-4711: drivers", "toolkit")
    assert STATE(read, "slurm")["owner"] == "toolkit"


def test_a_node_in_service_has_no_owner_whatever_the_module_says():
    assert STATE(_slurm("MIXED", None, "other", out=False), "slurm") == \
        {"text": "MIXED", "out_of_service": False, "owner": None}


def test_an_out_of_service_slurm_node_without_a_known_owner_is_an_error_not_a_guess():
    with pytest.raises(AnsibleFilterError, match="gpudirect_drain_state: .*unknown owner None"):
        STATE(_slurm("DOWN+DRAIN", "Not responding", None), "slurm")


def test_a_module_result_without_a_node_status_is_an_error():
    with pytest.raises(AnsibleFilterError, match="returned no node status"):
        STATE({"changed": False}, "slurm")


# --- a state command's output ---------------------------------------------------------------------

@pytest.mark.parametrize("stdout", ["drained Bad DIMM", "draining Kill task failed", "down* Not responding"])
def test_a_command_says_out_of_service_and_only_a_note_makes_it_the_toolkits(stdout):
    read = {"rc": 0, "stdout": stdout + "\n"}
    assert STATE(read, "command", PATTERN) == {"text": stdout, "out_of_service": True, "owner": "other"}
    assert STATE(read, "command", PATTERN, NOTE)["owner"] == "toolkit"


def test_a_command_that_says_in_service_ignores_an_old_note():
    assert STATE({"rc": 0, "stdout": "idle none"}, "command", PATTERN, NOTE) == \
        {"text": "idle none", "out_of_service": False, "owner": None}


def test_nothing_read_is_none_and_bad_input_is_named():
    assert STATE({"skipped": True, "changed": False}, "command", PATTERN) is None
    with pytest.raises(AnsibleFilterError, match="not one of command, slurm"):
        STATE({"stdout": ""}, "pbs")
    with pytest.raises(AnsibleFilterError, match="gpudirect_drain_state_out_of_service_pattern: '\\(' is not"):
        STATE({"stdout": "drained"}, "command", "(")


# --- built-in Slurm needs no hooks ------------------------------------------------------------------

def test_slurm_needs_no_hand_written_commands_but_command_still_needs_all_three():
    assert rolling.protection({"gpudirect_drain_scheduler": "slurm"}) == []
    assert len(rolling.protection({"gpudirect_drain_scheduler": "command"})) == 3
    assert rolling.unprotected(["a", "b"], {"a": {"gpudirect_drain_scheduler": "slurm"}, "b": {}}).keys() == {"b"}


# --- held nodes: in no later play, counted as out of service ---------------------------------------

GROUPS = {"all": ["n1", "n2", "n3", "n4"], "gpu_nodes": ["n1", "n2", "n3", "n4"], "gpudirect_held": ["n2"],
          "gpudirect_disrupt": ["n2", "n3"], "gpudirect_unchanged": []}


@pytest.mark.parametrize("pattern, hosts", [
    ("gpu_nodes:!gpudirect_unchanged", ["n1", "n3", "n4"]),
    ("gpudirect_disrupt", ["n3"]),
    ("gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt", ["n1", "n4"]),
    # a pattern that names the group itself gets it
    ("gpudirect_held", ["n2"]),
    ("gpu_nodes:&gpudirect_held", ["n2"]),
])
def test_every_play_leaves_the_held_nodes_out_unless_it_names_them(pattern, hosts):
    assert gpudirect_hosts(GROUPS, pattern) == hosts


def test_the_out_of_service_budget_counts_held_nodes_and_earlier_runs_drains():
    nodes = ["n1", "n3", "n4"]
    hostvars = {"n1": {}, "n3": {"gpudirect_drain_own_before": True}, "n4": {}}
    # with one held node and n3 still drained by a killed run, a batch of n1 makes 3 out of service
    out = rolling.budget(nodes, hostvars, nodes, ["n1"], max_out=2, held=["n2"])
    assert out["stop"] and out["out_before"] == ["n3", "n2"]
    assert "n2" in out["reason"] and "n3" in out["reason"]
    assert not rolling.budget(nodes, hostvars, nodes, ["n1"], max_out=3, held=["n2"])["stop"]
    assert not rolling.budget(nodes, hostvars, nodes, ["n1"], max_out=2)["stop"]


# --- a skip is named, not failed -------------------------------------------------------------------

SKIPPED = ("skipped: the jobs on it did not end within gpudirect_drain_wait_timeout=30 s (Slurm still says "
           "MIXED+DRAIN); resumed, not changed (gpudirect_drain_wait_timeout_action: skip); the next run tries it again")


def test_the_table_names_a_skipped_node_without_a_resume_command_and_no_other_as_lost():
    hostvars = {"n1": {"gpudirect_drain_stage": "drain", "gpudirect_drain_drained": False,
                       "gpudirect_drain_skipped": SKIPPED, "__gpudirect_drain_batch_done": True},
                "n3": {"gpudirect_drain_stage": "verify", "__gpudirect_drain_batch_done": True}}
    rows = lock.report_rows(hostvars, ["n1", "n3"], ["n1", "n3"], final=True)
    assert rows == [{"node": "n1", "reason": SKIPPED, "resume_command": "-"}]


def test_the_run_summary_says_held_and_skipped_and_the_run_is_not_failed_for_them():
    s = rs.Summary(started=1795746000.0, controller="ops@ctl", ansible_version="2.19.14")
    s.playbook("site.yml")
    s.result("n1", "ok", facts={"gpudirect_drain_skipped": SKIPPED}, now=1795746001.0)
    s.result("n2", "ok", facts={"gpudirect_drain_out_before": True,
                                "gpudirect_drain_held": "out of service before this run by another hand\n  (IDLE+DRAIN)"},
             now=1795746002.0)
    s.result("n3", "ok", facts={"gpudirect_drain_stage": "verify"}, now=1795746003.0)
    s.finish({}, now=1795746004.0)
    d = s.as_dict()
    assert [d["nodes"][n]["verdict"] for n in ("n1", "n2", "n3")] == ["skipped", "held", "ok"]
    assert d["nodes"]["n2"]["held"] == "out of service before this run by another hand (IDLE+DRAIN)"
    assert d["totals"]["held"] == 1 and d["totals"]["skipped"] == 1 and d["result"] == "ok"
    assert 'gpudirect_run_nodes{playbook="site.yml",verdict="held"} 1' in rs.render_prometheus(d)


# --- the OS's reboot-required flag: reported, acted on only when asked --------------------------------

# the sentences gpudirect_facts publishes (module_utils/gpudirect_facts_collector.py kernel())
KERNEL = "default boot kernel 6.1.0-28-amd64 differs from running 6.1.0-27-amd64"
FLAG = "/run/reboot-required exists (packages: libc6, linux-image-6.1.0-28-amd64)"
REBOOT_REASONS = FilterModule().filters()["gpudirect_os_reboot_reasons"]


def test_the_flag_alone_is_reported_and_a_new_default_kernel_is_acted_on():
    assert rolling.os_reboot_reasons([KERNEL, FLAG]) == [KERNEL]
    assert rolling.reboot_flag_only([KERNEL, FLAG]) == [FLAG]
    assert rolling.os_reboot_reasons(["/var/run/reboot-required exists"]) == []
    assert rolling.disruption({r: {"changes": [], "disruption": []} for r in rolling.PLANNED_ROLES}, [],
                              rolling.os_reboot_reasons([FLAG])) == []


def test_the_knob_makes_the_flag_a_reason_and_a_bad_value_is_named():
    assert REBOOT_REASONS([KERNEL, FLAG], "reboot") == [KERNEL, FLAG]
    assert REBOOT_REASONS([KERNEL, FLAG], "reboot", True) == []
    with pytest.raises(AnsibleFilterError, match="gpudirect_reboot_required_flag: 'always' is not one of report, reboot"):
        REBOOT_REASONS([FLAG], "always")


def test_a_skipped_node_gone_from_the_play_is_no_failure_for_the_budget():
    # tasks/wait_skip.yml ends the play for the node: Ansible no longer counts it among the play's hosts
    nodes = ["n1", "n3", "n4"]
    hostvars = {"n1": {"gpudirect_drain_stage": "verify"},
                "n3": {"gpudirect_drain_stage": "drain", "gpudirect_drain_skipped": SKIPPED},
                "n4": {}}
    out = rolling.budget(nodes, hostvars, ["n1", "n4"], ["n4"], max_failed=0, max_out=1)
    assert out == {"stop": False, "reason": "", "failed": [], "out_before": []}
    # the same node lost without a skip is a failure
    del hostvars["n3"]["gpudirect_drain_skipped"]
    assert rolling.budget(nodes, hostvars, ["n1", "n4"], ["n4"], max_failed=0)["failed"] == ["n3"]
