"""A node a run leaves drained keeps a note of it on the node, and a later run that proves
it resumes it (gpudirect_drain's resume and resume_earlier entry points, issue #13 outcome
3): a node the admin repaired, or whose module signing certificate was enrolled at the
console, must not stay out of service because the run that proves it had nothing to drain
it for. Run on this machine with a stand-in scheduler."""

import json
import os
import time

import pytest

from conftest import play_on_localhost

LEAVE = """\
- name: A run drains the node, its verification fails, it stays drained
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - {name: Drain, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: drain}}
    - {name: The verdict, ansible.builtin.set_fact: {gpudirect_verify_status: failed}}
    - {name: Resume or not, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}}
"""

LATER = """\
- name: A later run that did not drain the node verifies it
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - {name: The verdict, ansible.builtin.set_fact: {gpudirect_verify_status: "{{ verdict }}"}}
    - {name: Resume what an earlier run left, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume_earlier}}
"""


@pytest.fixture
def site(tmp_path):
    note = "/var/lib/gpudirect/unit-left-drained-%d-%d.json" % (os.getpid(), time.monotonic_ns())
    log = tmp_path / "scheduler.log"
    extra = {
        "gpudirect_drain_command": ["sh", "-c", "echo drain >>%s" % log],
        "gpudirect_drain_resume_command": ["sh", "-c", "echo resume >>%s" % log],
        # the stand-in drain returns when the node is idle, as kubectl drain does
        "gpudirect_drain_command_waits": True,
        "gpudirect_drain_left_drained_file": note,
    }
    yield extra, note, log
    if os.path.exists(note):
        os.remove(note)


def _calls(log):
    return log.read_text().split() if log.exists() else []


def test_a_node_left_drained_is_resumed_by_the_next_run_that_proves_it(tmp_path, site):
    extra, note, log = site
    proc = play_on_localhost(tmp_path, LEAVE, extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _calls(log) == ["drain"]
    with open(note) as handle:
        kept = json.load(handle)
    assert kept["reason"].startswith("verification failed in this run")
    assert kept["resume_command"] == extra["gpudirect_drain_resume_command"] and kept["since"].endswith("Z")

    # a run that does not prove it leaves it drained and the note in place
    proc = play_on_localhost(tmp_path, LATER, dict(extra, verdict="not_proven"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "localhost stays drained: an earlier run left it drained (verification failed in this run" in proc.stdout
    assert _calls(log) == ["drain"] and os.path.exists(note)

    # the run that proves it resumes it and removes the note
    proc = play_on_localhost(tmp_path, LATER, dict(extra, verdict="passed"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _calls(log) == ["drain", "resume"]
    assert not os.path.exists(note)
    assert "localhost resumed: an earlier run left it drained (verification failed in this run" in proc.stdout

    # and the one after that has nothing to resume
    proc = play_on_localhost(tmp_path, LATER, dict(extra, verdict="passed"))
    assert proc.returncode == 0 and _calls(log) == ["drain", "resume"]


def test_a_resume_command_that_fails_keeps_the_node_drained_and_says_how_to_resume(tmp_path, site):
    extra, note, log = site
    assert play_on_localhost(tmp_path, LEAVE, extra).returncode == 0
    broken = dict(extra, gpudirect_drain_resume_command=["sh", "-c", "exit 7"], verdict="passed")
    proc = play_on_localhost(tmp_path, LATER, broken)
    assert proc.returncode != 0
    assert "localhost passed its verification, but gpudirect_drain_resume_command failed (rc 7)" in proc.stdout
    assert "Resume it by hand: sh -c 'exit 7'" in proc.stdout
    assert os.path.exists(note)


def test_check_mode_resumes_nothing(tmp_path, site):
    extra, note, log = site
    assert play_on_localhost(tmp_path, LEAVE, extra).returncode == 0
    proc = play_on_localhost(tmp_path, LATER, dict(extra, verdict="passed"), check=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _calls(log) == ["drain"] and os.path.exists(note)


# --- issue #30 outcome 2: intent before action

DRAIN_ONLY = """\
- name: A run drains the node and is lost before anything else (Ctrl-C, a killed controller)
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - {name: Drain, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: drain}}
"""

FIRST = """\
- name: The next run names first what earlier runs left behind
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - {name: Left behind, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: left_behind}}
"""


def test_the_note_is_written_before_the_drain_and_the_next_run_names_the_node_first(tmp_path, site):
    extra, note, log = site
    # the drain command checks that the note is already there when it runs
    extra = dict(extra, gpudirect_drain_command=["sh", "-c", "test -s %s && echo drain-after-note >>%s" % (note, log)])
    proc = play_on_localhost(tmp_path, DRAIN_ONLY, extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _calls(log) == ["drain-after-note"]
    with open(note) as handle:
        kept = json.load(handle)
    assert kept["intent"] is True and "did not resume it: that run was lost, interrupted or stopped" in kept["reason"]
    assert "play.yml" in kept["reason"]

    proc = play_on_localhost(tmp_path, FIRST, extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Nodes an earlier run left drained or lost (1)" in proc.stdout
    assert "localhost: lost in an earlier run after its drain since %s" % kept["since"] in proc.stdout
    assert "resume by hand: sh -c 'echo resume >>" in proc.stdout

    # a run that proves it resumes it and removes the note: the next run names nothing
    proc = play_on_localhost(tmp_path, LATER, dict(extra, verdict="passed"))
    assert proc.returncode == 0 and not os.path.exists(note), proc.stdout[-3000:]
    proc = play_on_localhost(tmp_path, FIRST, extra)
    assert proc.returncode == 0 and "Nodes an earlier run left" not in proc.stdout, proc.stdout[-3000:]


def test_a_check_mode_drain_writes_no_note(tmp_path, site):
    extra, note, log = site
    proc = play_on_localhost(tmp_path, DRAIN_ONLY, extra, check=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not os.path.exists(note) and _calls(log) == []


def test_a_note_the_toolkit_cannot_read_still_names_the_node():
    from ansible.module_utils import gpudirect_lock as lock

    assert "n1: a note the toolkit cannot read ('{garbage')" in lock.note("{garbage", "n1")["line"]
    left = lock.note(json.dumps({"reason": "verification failed", "since": "2026-11-27T03:00:00Z",
                                 "resume_command": ["scontrol", "update", "nodename=n1", "state=resume"]}), "n1")
    assert left["line"] == ("n1: left drained by an earlier run since 2026-11-27T03:00:00Z: verification failed; "
                            "resume by hand: scontrol update nodename=n1 state=resume")
