"""The final table of a rolling run (issue #13 outcome 3): failed and unreachable nodes with
their last stage and drain state, notes such as a held boot kernel, and the nodes a stopped
run never reached (module_utils/gpudirect_lock.py report_rows)."""

from ansible.module_utils import gpudirect_lock as lock

RESUME = "scontrol update nodename=gpu02 state=resume"


def _rows(hostvars, alive, final=False):
    return {row["node"]: row for row in lock.report_rows(hostvars, list(hostvars), alive, final)}


def test_unreachable_drained_node_names_its_last_stage_and_resume_command():
    rows = _rows({"gpu01": {"gpudirect_drain_drained": False, "gpudirect_drain_stage": "verify"},
                  "gpu02": {"gpudirect_drain_drained": True, "gpudirect_drain_stage": "reboot",
                            "__gpudirect_drain_resume_line": RESUME}}, ["gpu01"])
    assert set(rows) == {"gpu02"}
    assert rows["gpu02"]["reason"] == "unreachable in this run after its drain (last stage: reboot)"
    assert rows["gpu02"]["resume_command"] == RESUME


def test_a_recorded_failure_is_not_called_unreachable():
    rows = _rows({"gpu03": {"gpudirect_drain_drained": True, "gpudirect_drain_stage": "dkms",
                            "__gpudirect_drain_failure": {"task": "Build", "msg": "make: *** Error 2"}}}, [])
    assert rows["gpu03"]["reason"].startswith("failed in this run after its drain (last stage: dkms)")


def test_unreachable_before_the_drain_is_not_drained():
    rows = _rows({"gpu04": {"gpudirect_drain_stage": "lock"}}, [])
    assert "unreachable in this run before any drain (not drained by this run) (last stage: lock)" \
        in rows["gpu04"]["reason"]
    assert rows["gpu04"]["resume_command"] == "-"


def test_notes_follow_the_reason():
    note = "default boot kernel held on 6.1.0-20-amd64 instead of 6.1.0-21-amd64"
    rows = _rows({"gpu05": {"gpudirect_drain_drained": True, "gpudirect_drain_stage": "dkms",
                            "gpudirect_drain_notes": [note],
                            "gpudirect_drain_left_drained": {"reason": "failed at 'Build': Error 2",
                                                             "resume_command": RESUME}}}, ["gpu05"])
    assert rows["gpu05"]["reason"] == "failed at 'Build': Error 2; " + note


def test_final_table_of_a_stopped_run_names_the_nodes_never_reached():
    hostvars = {"gpu01": {"gpudirect_drain_drained": False, "gpudirect_drain_stage": "verify",
                          "__gpudirect_drain_batch_done": True},
                "gpu02": {"gpudirect_drain_drained": True, "gpudirect_drain_stage": "reboot"},
                "gpu03": {}, "gpu04": {}}
    rows = _rows(hostvars, ["gpu01", "gpu03", "gpu04"], final=True)
    assert set(rows) == {"gpu02", "gpu03", "gpu04"}
    assert rows["gpu03"]["reason"].startswith("not reached: the run stopped before its batch")
    # a batch's own table does not call the later batches unreached
    assert set(_rows(hostvars, ["gpu01", "gpu03", "gpu04"], final=False)) == {"gpu02"}


def test_a_run_that_left_nothing_drained_names_no_unreached_node():
    hostvars = {"gpu01": {"gpudirect_drain_drained": False, "gpudirect_drain_stage": "verify",
                          "__gpudirect_drain_batch_done": True}, "gpu02": {}}
    assert lock.report_rows(hostvars, list(hostvars), list(hostvars), True) == []


def test_final_table_in_a_later_play_finds_the_nodes_lost_in_their_batch():
    # a later play's ansible_play_hosts lists every node again: the batch-done mark tells
    hostvars = {"gpu01": {"gpudirect_drain_stage": "verify", "__gpudirect_drain_batch_done": True},
                "gpu02": {"gpudirect_drain_drained": True, "gpudirect_drain_stage": "reboot",
                          "__gpudirect_drain_resume_line": RESUME},
                "gpu03": {}}
    rows = _rows(hostvars, list(hostvars), final=True)
    assert rows["gpu02"]["reason"] == "unreachable in this run after its drain (last stage: reboot)"
    assert rows["gpu03"]["reason"].startswith("not reached")
    assert "gpu01" not in rows
