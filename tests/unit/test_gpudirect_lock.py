"""The per-node run lock and the drain/resume bookkeeping (issue #13, outcomes 3 and 6).

module_utils/gpudirect_lock.py decides; library/gpudirect_lock.py takes and releases the
lock file on the node; filter_plugins/gpudirect_drain.py builds the final table.
"""

import json
import os
import shlex
import time

import pytest

import gpudirect_drain as drain_filters
import gpudirect_lock as lock_module
from ansible.module_utils import gpudirect_lock as lock

BOOT = "fe264f03-8660-44a3-8199-8e786798c605"
OTHER_BOOT = "0b5c1e5e-2c7b-4a4c-9d0a-3c6a3c0c1f11"
NOW = 1795536000


def _lock(**over):
    data = {"token": "tok-other-run", "controller": "bob@ctl9", "playbook": "kernel_update.yml (play: x)",
            "pid": 77, "boot_id": BOOT, "since": NOW - 120}
    data.update(over)
    return data


# --- decisions -----------------------------------------------------------------------------------------------------

def test_no_lock_is_free():
    assert lock.decide(None, "mine", BOOT, NOW, 3600)[0] == "free"


def test_our_own_lock_is_reentrant():
    assert lock.decide(_lock(token="mine"), "mine", BOOT, NOW, 3600)[0] == "ours"


def test_fresh_lock_of_another_run_is_held_and_the_message_names_holder_and_since():
    verdict, _ = lock.decide(_lock(), "mine", BOOT, NOW, 3600)
    assert verdict == "held"
    message = lock.held_message("gpu07", "/run/lock/gpudirect-rdma.lock", _lock(), NOW, 3600)
    assert "gpu07 is locked" in message
    assert "bob@ctl9" in message and "pid 77" in message and "kernel_update.yml" in message
    assert lock.when(NOW - 120) in message and "120 s ago" in message
    assert "/run/lock/gpudirect-rdma.lock" in message and "gpudirect_drain_lock_stale_after=3600" in message


def test_a_lock_from_before_a_reboot_is_still_held():
    """The toolkit's own reboot keeps the lock for the run that rebooted the node (issue #30
    outcome 3): a second run arriving while the node boots must not take it over."""
    verdict, reason = lock.decide(_lock(boot_id=OTHER_BOOT), "mine", BOOT, NOW, 3600)
    assert verdict == "held" and "taken before the node's last reboot" in reason


def test_a_lock_not_renewed_is_stale_a_renewed_one_is_not():
    assert lock.decide(_lock(since=NOW - 3601), "mine", BOOT, NOW, 3600)[0] == "stale"
    assert lock.decide(_lock(since=NOW - 3599), "mine", BOOT, NOW, 3600)[0] == "held"
    # taken 10 hours ago, renewed a minute ago: the holder is still working on the node
    verdict, reason = lock.decide(_lock(since=NOW - 36000, renewed=NOW - 60), "mine", BOOT, NOW, 3600)
    assert verdict == "held" and "36000 s ago, renewed 60 s ago" in reason
    verdict, reason = lock.decide(_lock(since=NOW - 36000, renewed=NOW - 3601, boot_id=OTHER_BOOT), "mine", BOOT,
                                  NOW, 3600)
    assert verdict == "stale" and "was not renewed for more than gpudirect_drain_lock_stale_after=3600 s" in reason


@pytest.mark.parametrize("text,message", [
    ("pid=77\n", "not the JSON"),
    ("[1, 2]", "not the JSON object"),
    ('{"token": "x"}', "lacks controller"),
    (json.dumps(_lock(since="yesterday")), "'since' is not a number"),
    (json.dumps(_lock(renewed=True)), "'renewed' is not a number"),
])
def test_a_foreign_lock_file_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        lock.parse(text)


def test_render_parses_back():
    text = lock.render("tok", "alice@ctl1", "site.yml", 4242, BOOT, NOW + 0.7)
    assert text.endswith("\n") and "\n" not in text[:-1]
    assert lock.parse(text) == {"token": "tok", "controller": "alice@ctl1", "playbook": "site.yml", "pid": 4242,
                                "boot_id": BOOT, "since": NOW, "renewed": NOW}
    assert lock.parse(lock.render("tok", "a@c", "site.yml", 1, BOOT, NOW, NOW + 90))["renewed"] == NOW + 90


# --- resume only on proof ------------------------------------------------------------------------------------------

RESUME = ["scontrol", "update", "nodename=gpu07", "state=resume"]


def test_passed_verification_resumes():
    assert lock.left_drained_entry("passed", RESUME, True) is None


@pytest.mark.parametrize("status", ["failed", "not_proven", "skipped", "would_run", ""])
def test_anything_but_passed_leaves_the_node_drained_with_the_exact_command(status):
    entry = lock.left_drained_entry(status, RESUME, True)
    assert entry["resume_command"] == "scontrol update nodename=gpu07 state=resume"
    assert (status.replace("_", " ") or "did not run") in entry["reason"]


def test_a_node_this_run_did_not_drain_is_never_recorded():
    assert lock.left_drained_entry("failed", RESUME, False) is None


def test_passed_without_resume_command_is_left_drained():
    entry = lock.left_drained_entry("passed", [], True)
    assert "gpudirect_drain_resume_command is empty" in entry["reason"]


def test_a_failure_after_the_drain_names_the_task_and_first_line():
    entry = lock.left_drained_entry("", RESUME, True, {"task": "Reboot", "msg": "timed out\nmore detail"})
    assert entry["reason"] == "failed at 'Reboot': timed out"


def test_command_line_is_what_a_shell_splits_back():
    argv = ["sh", "-c", '! squeue -h -w "$1" | grep -q .', "_", "gpu07"]
    assert shlex.split(lock.command_line(argv)) == argv


# --- the final table -----------------------------------------------------------------------------------------------

def test_report_names_left_drained_failed_and_unreachable_nodes_but_not_later_batches():
    hostvars = {
        "gpu01": {"gpudirect_drain_drained": False},                                   # resumed
        "gpu02": {"gpudirect_drain_drained": True, "__gpudirect_drain_resume_line": "resume gpu02",
                  "gpudirect_drain_left_drained": {"reason": "verification failed in this run",
                                                   "resume_command": "resume gpu02"}},
        "gpu03": {"gpudirect_drain_drained": True, "__gpudirect_drain_resume_line": "resume gpu03"},  # unreachable
        "gpu04": {},                                                                  # failed before its drain
        "gpu05": {"__gpudirect_drain_failure": {"task": "Take the node's run lock", "msg": "gpu05 is locked"}},
        "gpu06": {},                                                                  # next batch, never ran
    }
    rows = lock.report_rows(hostvars, list(hostvars), ["gpu01", "gpu02", "gpu05", "gpu06"])
    by_node = {row["node"]: row for row in rows}
    assert set(by_node) == {"gpu02", "gpu03", "gpu04", "gpu05"}
    assert by_node["gpu02"]["resume_command"] == "resume gpu02"
    assert "after its drain" in by_node["gpu03"]["reason"] and by_node["gpu03"]["resume_command"] == "resume gpu03"
    assert "before any drain" in by_node["gpu04"]["reason"] and by_node["gpu04"]["resume_command"] == "-"
    assert "gpu05 is locked" in by_node["gpu05"]["reason"]
    lines = lock.table(rows)
    assert lines[0].split() == ["NODE", "WHY", "RESUME", "BY", "HAND"]
    assert len(lines) == 5 and lines[1].startswith("gpu02 ")


def test_empty_report_says_so():
    assert lock.table([]) == ["no node was left drained by this run"]


def test_filter_holder_names_user_host_pid_and_playbook(monkeypatch):
    monkeypatch.setattr("sys.argv", ["ansible-playbook", "-i", "inventory/site", "playbooks/kernel_update.yml"])
    holder = drain_filters.gpudirect_drain_holder("Rolling kernel update")
    assert holder["controller"].count("@") == 1
    assert holder["pid"] == os.getpid()        # templated in the main process here
    assert holder["playbook"] == "kernel_update.yml (play: Rolling kernel update)"


def test_filter_command_line_refuses_a_string():
    with pytest.raises(Exception, match="argv list"):
        drain_filters.gpudirect_drain_command_line("scontrol update")


# --- a holder this controller lost (Ctrl-C, killed ansible-playbook) ---------------------------------------------

HOLDER = {"controller": "alice@ctl1", "pid": 5000, "playbook": "site.yml (play: x)"}


def _text(**over):
    return lock.render(**dict({"token": "tok-lost", "controller": "alice@ctl1", "playbook": "site.yml", "pid": 4100,
                               "boot_id": BOOT, "since": NOW - 60}, **over))


@pytest.mark.parametrize("text, alive, expected", [
    (_text(), False, "tok-lost"),                                  # same controller, its ansible-playbook gone
    (_text(), True, ""),                                           # still running: held, as any live run
    (_text(controller="bob@ctl9"), False, ""),                     # another controller: its pids are not ours to see
    (_text(pid=5000), False, ""),                                  # this run's own pid: never "gone"
    ("", False, ""),                                               # no lock
    ("locked by hand\n", False, ""),                              # not this toolkit's: the module refuses it
    ('{"token": "x"}', False, ""),                                 # truncated: likewise
])
def test_gone_token_only_for_a_dead_run_of_this_controller(text, alive, expected):
    assert lock.gone_token(text, HOLDER, alive=lambda pid: alive) == expected


def test_gone_token_sees_a_real_dead_pid_and_a_live_ansible_process(tmp_path):
    import subprocess
    import sys
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert lock.gone_token(_text(pid=dead.pid), HOLDER) == "tok-lost"
    # a live process whose command line names ansible (as ansible-playbook's does)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "ansible-playbook"])
    try:
        # until it has exec'ed, the child's command line is still this test's
        deadline = time.time() + 10
        while b"ansible" not in open("/proc/%d/cmdline" % live.pid, "rb").read() and time.time() < deadline:
            time.sleep(0.05)
        assert lock.gone_token(_text(pid=live.pid), HOLDER) == ""
    finally:
        live.kill()
        live.wait()


def test_decide_takes_over_only_the_lock_the_controller_judged():
    verdict, reason = lock.decide(_lock(token="tok-lost"), "mine", BOOT, NOW, 3600, gone="tok-lost")
    assert verdict == "stale" and "no longer runs on this controller" in reason and "pid 77" in reason
    assert lock.decide(_lock(token="tok-newer"), "mine", BOOT, NOW, 3600, gone="tok-lost")[0] == "held"


def test_filter_lock_gone_refuses_a_holder_that_is_not_a_mapping():
    with pytest.raises(Exception, match="holder mapping"):
        drain_filters.gpudirect_drain_lock_gone("", "alice@ctl1")


# --- the module on a real file -------------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path, monkeypatch):
    boot = tmp_path / "boot_id"
    boot.write_text(BOOT + "\n")
    monkeypatch.setattr(lock_module, "BOOT_ID", str(boot))
    return tmp_path / "lock" / "gpudirect-rdma.lock"


def _args(path, **over):
    args = {"path": str(path), "token": "tok-this-run", "controller": "alice@ctl1", "playbook": "site.yml",
            "pid": 4242, "node": "gpu07"}
    args.update(over)
    return args


def test_module_takes_a_free_lock_atomically_and_releases_only_its_own(node, run_module):
    result = run_module(lock_module, _args(node))
    assert result["changed"] and result["verdict"] == "free"
    written = lock.parse(node.read_text())
    assert written["controller"] == "alice@ctl1" and written["boot_id"] == BOOT and written["pid"] == 4242
    assert abs(written["since"] - time.time()) < 60
    assert [p.name for p in node.parent.iterdir()] == [node.name]      # no temporary file left behind
    assert run_module(lock_module, _args(node))["verdict"] == "ours"
    other = run_module(lock_module, _args(node, token="tok-another-run", state="absent"))
    assert not other["changed"] and other["verdict"] == "other" and node.exists()
    mine = run_module(lock_module, _args(node, state="absent"))
    assert mine["changed"] and not node.exists()


def test_module_second_run_fails_naming_the_holder(node, run_module):
    node.parent.mkdir()
    node.write_text(lock.render("tok-first-run", "bob@ctl9", "kernel_update.yml", 77, BOOT, time.time() - 30))
    result = run_module(lock_module, _args(node))
    assert result["failed"] and result["verdict"] == "held"
    assert "gpu07 is locked by another run" in result["msg"] and "bob@ctl9" in result["msg"]
    assert lock.parse(node.read_text())["token"] == "tok-first-run"


def test_module_takes_over_a_stale_lock_with_a_warning(node, run_module, monkeypatch):
    warned = []
    monkeypatch.setattr(lock_module.AnsibleModule, "warn", lambda self, text: warned.append(text))
    node.parent.mkdir()
    node.write_text(lock.render("tok-first-run", "bob@ctl9", "kernel_update.yml", 77, OTHER_BOOT, time.time() - 30,
                                time.time() - 21601))
    result = run_module(lock_module, _args(node))
    assert result["changed"] and result["verdict"] == "stale"
    assert len(warned) == 1 and "stale run lock on gpu07" in warned[0] and "was not renewed" in warned[0]
    assert lock.parse(node.read_text())["token"] == "tok-this-run"


def test_module_takes_over_at_once_the_lock_of_a_run_this_controller_lost(node, run_module, monkeypatch):
    """Issue #30: after Ctrl-C (or a killed ansible-playbook) the next run from the same controller takes the
    lock over at once, with a warning naming the gone holder, instead of waiting 6 h; only the lock the
    controller judged (its token): a lock another run took meanwhile stays held."""
    warned = []
    monkeypatch.setattr(lock_module.AnsibleModule, "warn", lambda self, text: warned.append(text))
    node.parent.mkdir()
    node.write_text(lock.render("tok-lost-run", "alice@ctl1", "site.yml", 4100, BOOT, time.time() - 60))
    held = run_module(lock_module, _args(node, gone_token="tok-not-this-lock"))
    assert held["failed"] and held["verdict"] == "held" and not warned
    result = run_module(lock_module, _args(node, gone_token="tok-lost-run"))
    assert result["changed"] and result["verdict"] == "stale"
    assert len(warned) == 1 and "pid 4100" in warned[0] and "no longer runs on this controller" in warned[0]
    assert lock.parse(node.read_text())["token"] == "tok-this-run"


def test_module_keeps_a_lock_taken_before_the_nodes_reboot(node, run_module):
    node.parent.mkdir()
    node.write_text(lock.render("tok-first-run", "bob@ctl9", "site.yml", 77, OTHER_BOOT, time.time() - 900))
    result = run_module(lock_module, _args(node))
    assert result["failed"] and result["verdict"] == "held"
    assert "the lock survives reboots of the node" in result["msg"]
    assert lock.parse(node.read_text())["token"] == "tok-first-run"


def test_module_renews_its_own_lock_and_reports_no_change(node, run_module):
    """The heartbeat: the run that holds the lock calls the module again; 'renewed' moves,
    the rest of the lock (token, holder, since, the boot it was taken in) stays."""
    node.parent.mkdir()
    taken = time.time() - 7200
    node.write_text(lock.render("tok-this-run", "alice@ctl1", "site.yml", 4242, OTHER_BOOT, taken, taken))
    result = run_module(lock_module, _args(node))
    assert not result["changed"] and result["verdict"] == "ours"
    after = lock.parse(node.read_text())
    assert after["token"] == "tok-this-run" and after["since"] == int(taken) and after["boot_id"] == OTHER_BOOT
    assert abs(after["renewed"] - time.time()) < 60
    assert [p.name for p in node.parent.iterdir()] == [node.name]
    # check mode renews nothing
    node.write_text(lock.render("tok-this-run", "alice@ctl1", "site.yml", 4242, BOOT, taken, taken))
    assert run_module(lock_module, _args(node), check_mode=True)["verdict"] == "ours"
    assert lock.parse(node.read_text())["renewed"] == int(taken)


def test_module_check_mode_leaves_no_lock_but_still_fails_on_a_held_one(node, run_module):
    result = run_module(lock_module, _args(node), check_mode=True)
    assert result["changed"] and not node.exists()
    node.parent.mkdir(exist_ok=True)
    node.write_text(lock.render("tok-first-run", "bob@ctl9", "site.yml", 77, BOOT, time.time()))
    assert run_module(lock_module, _args(node), check_mode=True)["failed"]


def test_module_refuses_a_lock_file_it_did_not_write(node, run_module):
    node.parent.mkdir()
    node.write_text("locked by hand\n")
    result = run_module(lock_module, _args(node))
    assert result["failed"] and "not one this toolkit wrote" in result["msg"]
    assert node.read_text() == "locked by hand\n"


# --- the role's lock and unlock entry points, as the stage plays call them ------------------------

LOCK_PLAY = """\
- name: Take the lock in two stages of one run, release it, take it again
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - {name: First stage takes it, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: lock}}
    - {name: Read it, ansible.builtin.stat: {path: "{{ gpudirect_drain_lock_file }}"}, register: first}
    # gone by hand: a later stage of the same run must not take it again (nor look)
    - {name: Remove it, ansible.builtin.file: {path: "{{ gpudirect_drain_lock_file }}", state: absent}}
    - {name: Second stage, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: lock}}
    - {name: Read it again, ansible.builtin.stat: {path: "{{ gpudirect_drain_lock_file }}"}, register: second}
    - {name: Release it, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: unlock}}
    - {name: A later run of the same play takes it anew, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: lock}}
    - {name: Read it a third time, ansible.builtin.stat: {path: "{{ gpudirect_drain_lock_file }}"}, register: third}
    - {name: Release it again, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: unlock}}
    - {name: Read it at the end, ansible.builtin.stat: {path: "{{ gpudirect_drain_lock_file }}"}, register: last}
    - name: Report
      ansible.builtin.debug:
        msg: "LOCKS {{ [first, second, third, last] | map(attribute='stat.exists') | join(',') }}"
"""


def test_the_run_lock_is_taken_once_per_run_until_released(tmp_path):
    from conftest import play_on_localhost
    path = "/run/lock/gpudirect-test-%d-%d.lock" % (os.getpid(), time.monotonic_ns())
    try:
        proc = play_on_localhost(tmp_path, LOCK_PLAY, {"gpudirect_drain_lock_file": path})
    finally:
        if os.path.exists(path):
            os.remove(path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "LOCKS True,False,True,False" in proc.stdout
