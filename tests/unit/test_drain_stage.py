"""The scheduler's reason and the note name the run and the stage (issue #30, outcomes 2 and 5): gpudirect_drain's
drain entry point gives the drain command gpudirect_drain_reason ("gpudirect run <id>: drain") and writes the run
into the note; the stage entry point writes each later stage into the note and runs
gpudirect_drain_reason_command with the new reason. On this machine, with stand-in scheduler commands."""

import json
import os
import uuid

from ansible.module_utils import gpudirect_lock as lock
from conftest import play_on_localhost, role_tasks_play

# drain, then two stages, as the rolling plays run them
PLAY = role_tasks_play("gpudirect_drain", "drain", then="".join(
    "    - name: Begin the stage %s\n      ansible.builtin.include_role:\n        name: gpudirect_drain\n"
    "        tasks_from: stage\n      vars:\n        gpudirect_drain_stage_next: %s\n" % (stage, stage)
    for stage in ("drivers", "reboot")))


def _run(tmp_path, reason_command_rc=0):
    calls = tmp_path / "calls"
    note = "/var/lib/gpudirect/unit-stage-%s.json" % uuid.uuid4().hex
    extra = {
        "gpudirect_drain_command": ["sh", "-c", 'echo "drain $1" >>%s' % calls, "_", "{{ gpudirect_drain_reason }}"],
        "gpudirect_drain_wait_command": ["true"],
        "gpudirect_drain_resume_command": ["true"],
        "gpudirect_drain_reason_command": ["sh", "-c", 'echo "reason $1" >>%s; exit %d' % (calls, reason_command_rc),
                                           "_", "{{ gpudirect_drain_reason }}"],
        "gpudirect_drain_no_log": False,
        "gpudirect_drain_left_drained_file": note,
    }
    try:
        proc = play_on_localhost(tmp_path, PLAY, extra)
        with open(note) as handle:
            written = handle.read()
    finally:
        if os.path.exists(note):
            os.remove(note)
    return proc, calls.read_text().splitlines() if calls.exists() else [], written


def test_the_drain_reason_and_each_stage_name_the_run(tmp_path):
    proc, calls, written = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [c.split(": ")[-1] for c in calls] == ["drain", "drivers", "reboot"]
    run = calls[0].split("gpudirect run ", 1)[1].split(":", 1)[0]
    assert calls == ["drain gpudirect run %s: drain" % run, "reason gpudirect run %s: drivers" % run,
                     "reason gpudirect run %s: reboot" % run]
    data = json.loads(written)
    assert (data["run"], data["stage"], data["intent"]) == (run, "reboot", True)
    # what the next run prints for a node this one lost at that stage
    assert "(run %s, last stage: reboot)" % run in lock.note(written, "localhost")["line"]


def test_a_reason_command_that_fails_is_said_not_fatal(tmp_path):
    proc, calls, _ = _run(tmp_path, reason_command_rc=3)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "gpudirect_drain_reason_command exited 3" in proc.stdout
    assert "the node stays drained, its reason in the scheduler still names an earlier stage" in proc.stdout
    assert len([c for c in calls if c.startswith("reason ")]) == 2
