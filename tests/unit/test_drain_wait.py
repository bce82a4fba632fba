"""gpudirect_drain's drain entry point on this machine (issue #13, outcome 2; issue #43, outcome 3):
a wait that never sees the node idle skips the node at the timeout by default, back in service
(its resume command run) and untouched, the run going on; with gpudirect_drain_wait_timeout_action:
fail it fails the node, drained and untouched, with a message naming the knobs; the hooks' output
(a scheduler token, say) stays out of the log while gpudirect_drain_no_log is true, and shows
once it is false."""

import os
import uuid

from conftest import play_on_localhost

PLAY = """\
- name: Drain this machine with stand-in scheduler commands
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Drain and wait
      ansible.builtin.include_role:
        name: gpudirect_drain
        tasks_from: drain
"""

SECRET = "token-5f2d9c0e-not-for-logs"


def _drain(tmp_path, busy, no_log, timeout=3, interval=1, action="fail"):
    calls = tmp_path / "calls"
    # the stand-in scheduler: the drain prints a secret, the wait prints it and says busy
    # (exit 1) while `busy`, idle (exit 0) otherwise; each call is logged with its time
    wait = ("echo %s; echo wait >>%s; %s" % (SECRET, calls, "exit 1" if busy else "exit 0"))
    extra = {
        "gpudirect_drain_command": ["sh", "-c", "echo drain >>%s; echo %s" % (calls, SECRET)],
        "gpudirect_drain_wait_command": ["sh", "-c", wait],
        "gpudirect_drain_resume_command": ["sh", "-c", "echo resume >>%s" % calls],
        "gpudirect_drain_wait_timeout_action": action,
        "gpudirect_drain_wait_timeout": timeout,
        "gpudirect_drain_wait_interval": interval,
        "gpudirect_drain_no_log": no_log,
        # this test's own note, under the role's directory as it requires (removed below)
        "gpudirect_drain_left_drained_file": "/var/lib/gpudirect/unit-wait-%s.json" % uuid.uuid4().hex,
    }
    try:
        proc = play_on_localhost(tmp_path, PLAY, extra)
    finally:
        if os.path.exists(extra["gpudirect_drain_left_drained_file"]):
            os.remove(extra["gpudirect_drain_left_drained_file"])
    lines = calls.read_text().split() if calls.exists() else []
    return proc, lines


def test_a_node_that_never_becomes_idle_fails_at_the_timeout_with_the_knobs_named(tmp_path):
    proc, calls = _drain(tmp_path, busy=True, no_log=True)
    assert proc.returncode != 0
    out = proc.stdout
    assert "localhost is drained but did not become idle: gpudirect_drain_wait_command still exits 1 after" in out
    assert "(gpudirect_drain_wait_timeout=3 s, checked every 1 s)" in out
    assert "Nothing disruptive was done; the node stays drained." in out
    # drained once, then polled about timeout / interval times, not forever
    assert calls[0] == "drain" and 2 <= calls.count("wait") <= 4, calls
    # no_log: neither the hooks' output nor the last wait output reach the log
    assert SECRET not in out
    assert "Last output: hidden (gpudirect_drain_no_log is true; set it false to see it)." in out


def test_by_default_a_node_that_never_becomes_idle_is_skipped_back_in_service_and_untouched(tmp_path):
    proc, calls = _drain(tmp_path, busy=True, no_log=True, action="skip")
    out = proc.stdout
    # not a failure: the campaign goes on without it
    assert proc.returncode == 0, out[-3000:]
    assert ("localhost skipped: the jobs on it did not end within gpudirect_drain_wait_timeout=3 s "
            "(gpudirect_drain_wait_command still exits 1); resumed, not changed") in out
    # drained, polled, then resumed: the drain this run put on it is undone, nothing else ran
    assert calls[0] == "drain" and calls[-1] == "resume" and calls.count("resume") == 1, calls
    assert "Mark the node out of service and idle" not in out


def test_with_no_log_off_the_last_wait_output_is_shown(tmp_path):
    proc, _calls = _drain(tmp_path, busy=True, no_log=False)
    assert proc.returncode != 0
    assert "Last output: %s" % SECRET in proc.stdout


def test_a_node_that_is_idle_passes_at_the_first_check(tmp_path):
    proc, calls = _drain(tmp_path, busy=False, no_log=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert calls == ["drain", "wait"]
    assert SECRET not in proc.stdout
