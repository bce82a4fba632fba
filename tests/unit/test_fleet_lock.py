"""The fleet lock: one campaign at a time on a set of nodes (issue #30, outcome 3).

library/gpudirect_fleet_lock.py keeps one entry per campaign on the controller; the first
play of site.yml and playbooks/kernel_update.yml takes it (roles/gpudirect_drain
tasks/fleet_lock.yml), the last releases it. The live "other campaign" in these tests is a
real process that looks like ansible-playbook (``exec -a ansible-playbook sleep``), the
same check a real controller makes (/proc/PID/cmdline), and a dead one is a finished
process's pid.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

import gpudirect_fleet_lock as fleet
from conftest import ROOT, argument_spec_of, playbook_env
from hang_guard import HANG_GUARD_S

HERE = socket.gethostname()


@pytest.fixture
def other_campaign():
    """A running process whose command line says ansible-playbook: a live campaign's pid."""
    proc = subprocess.Popen(["bash", "-c", "exec -a ansible-playbook sleep 300"])
    time.sleep(0.2)
    yield proc.pid
    proc.kill()
    proc.wait()


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def entry(directory, run_id, hosts, pid, controller="alice@" + HERE, started=None):
    os.makedirs(str(directory), exist_ok=True)
    data = {"run_id": run_id, "hosts": hosts, "controller": controller, "pid": pid,
            "playbook": "site.yml (play: Take the fleet lock)", "started": started or time.time() - 60}
    (directory / (run_id + ".json")).write_text(json.dumps(data))


def take(run_module, directory, hosts, run_id="20261127T101500Z-1", check_mode=False, **extra):
    args = {"dir": str(directory), "run_id": run_id, "hosts": hosts, "controller": "bob@" + HERE, "pid": os.getpid(),
            "playbook": "site.yml"}
    args.update(extra)
    return run_module(fleet, args, check_mode=check_mode)


def test_a_free_fleet_takes_and_releases(tmp_path, run_module):
    locks = tmp_path / "locks"
    result = take(run_module, locks, ["gpu1", "gpu2"])
    assert result.get("failed") is not True and result["changed"] is False
    written = json.loads((locks / "20261127T101500Z-1.json").read_text())
    assert written["hosts"] == ["gpu1", "gpu2"] and written["pid"] == os.getpid()
    released = run_module(fleet, {"dir": str(locks), "run_id": "20261127T101500Z-1", "state": "absent"})
    assert released.get("failed") is not True and not os.listdir(str(locks))


def test_a_live_campaign_on_a_common_node_refuses_naming_it(tmp_path, run_module, other_campaign):
    locks = tmp_path / "locks"
    entry(locks, "20261127T090000Z-77", ["gpu2", "gpu3"], other_campaign)
    result = take(run_module, locks, ["gpu1", "gpu2"])
    assert result["failed"] is True and result["conflicts"] == ["20261127T090000Z-77"]
    msg = result["msg"]
    assert "20261127T090000Z-77 by alice@%s (pid %d" % (HERE, other_campaign) in msg
    assert "holds 1 of this run's 2 nodes: gpu2" in msg and "--limit" in msg and str(locks) in msg
    assert sorted(os.listdir(str(locks))) == ["20261127T090000Z-77.json"]
    # check mode says the same and writes nothing
    check = take(run_module, locks, ["gpu1", "gpu2"], check_mode=True)
    assert check["failed"] is True and sorted(os.listdir(str(locks))) == ["20261127T090000Z-77.json"]


def test_campaigns_on_other_nodes_run_side_by_side(tmp_path, run_module, other_campaign):
    locks = tmp_path / "locks"
    entry(locks, "20261127T090000Z-77", ["gpu7"], other_campaign)
    result = take(run_module, locks, ["gpu1", "gpu2"])
    assert result.get("failed") is not True and result["others"] == ["20261127T090000Z-77"]
    assert sorted(os.listdir(str(locks))) == ["20261127T090000Z-77.json", "20261127T101500Z-1.json"]


def test_a_dead_campaigns_entry_is_removed_with_a_warning(tmp_path, run_module):
    locks = tmp_path / "locks"
    gone = dead_pid()
    entry(locks, "20261126T220000Z-%d" % gone, ["gpu1"], gone)
    result = take(run_module, locks, ["gpu1"])
    assert result.get("failed") is not True
    assert result["removed_stale"] == ["20261126T220000Z-%d (alice@%s, pid %d is gone)" % (gone, HERE, gone)]
    assert sorted(os.listdir(str(locks))) == ["20261127T101500Z-1.json"]


def test_a_reused_pid_that_is_no_ansible_process_is_dead(tmp_path, run_module):
    locks = tmp_path / "locks"
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        entry(locks, "20261126T220000Z-9", ["gpu1"], sleeper.pid)
        assert take(run_module, locks, ["gpu1"]).get("failed") is not True
    finally:
        sleeper.kill()
        sleeper.wait()


def test_another_controllers_entry_counts_until_stale_after(tmp_path, run_module):
    locks = tmp_path / "locks"
    entry(locks, "20261127T080000Z-5", ["gpu1"], 5, controller="carol@bastion-2", started=time.time() - 3 * 3600)
    refused = take(run_module, locks, ["gpu1"])
    assert refused["failed"] is True and "carol@bastion-2" in refused["msg"]
    taken = take(run_module, locks, ["gpu1"], stale_after=2)
    assert taken.get("failed") is not True and "on another controller, not renewed for 3 h" in taken["removed_stale"][0]


def test_the_older_of_two_racing_campaigns_keeps_the_lock(tmp_path, run_module, other_campaign):
    """Both wrote before either read: the one that started first keeps it."""
    locks = tmp_path / "locks"
    entry(locks, "20261127T101500Z-2", ["gpu1"], other_campaign, started=time.time() + 5)   # younger than us
    # the younger one is a live conflict at the first read; written after the race check it would lose
    first = take(run_module, locks, ["gpu1"])
    assert first["failed"] is True
    # the race check itself: with our own start known, a younger entry is not a conflict
    conflicts, _stale, _others = fleet._conflicts(type("M", (), {"params": {"stale_after": 24}})(), str(locks),
                                                  "20261127T101500Z-1", ["gpu1"], HERE, time.time(), time.time())
    assert conflicts == []


@pytest.mark.parametrize("args, text", [
    ({"run_id": "../x"}, "run_id"),
    ({"stale_after": 0}, "gpudirect_drain_fleet_lock_stale_after"),
    ({"hosts": []}, "hosts is empty"),
])
def test_bad_input_fails_before_anything_is_written(tmp_path, run_module, args, text):
    locks = tmp_path / "locks"
    base = {"dir": str(locks), "run_id": "r1", "hosts": ["gpu1"]}
    base.update(args)
    result = run_module(fleet, base)
    assert result["failed"] is True and text in result["msg"]
    assert not locks.exists() or not os.listdir(str(locks))


def test_documentation_matches_the_argument_spec(monkeypatch):
    import yaml
    spec = argument_spec_of(fleet, monkeypatch)
    doc = yaml.safe_load(fleet.DOCUMENTATION)
    assert sorted(doc["options"]) == sorted(spec)


SITE_HOSTS = """gpu_nodes:
  hosts:
    gpu-a: {}
    gpu-b: {}
  vars:
    ansible_connection: local
    ansible_python_interpreter: %s
"""


def test_site_yml_stops_at_its_first_play_when_another_campaign_holds_a_node(tmp_path, other_campaign):
    """The real site.yml: a live campaign on gpu-b stops the run in its first play, before any
    node is read or changed, naming the campaign and the node."""
    (tmp_path / "inv").mkdir()
    inv = tmp_path / "inv" / "hosts.yml"
    inv.write_text(SITE_HOSTS % sys.executable)
    entry(tmp_path / "inv" / ".fleet-lock", "20261127T090000Z-77", ["gpu-b", "gpu-z"], other_campaign)
    env = playbook_env(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inv),
                           os.path.join(ROOT, "site.yml")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode != 0
    assert "Another campaign of the toolkit works on these nodes: 20261127T090000Z-77" in proc.stdout
    assert "holds 1 of this run's 2 nodes: gpu-b" in proc.stdout
    plays = [line for line in proc.stdout.splitlines() if line.startswith("PLAY [")]
    assert len(plays) == 1 and plays[0].startswith("PLAY [Take the fleet lock for the nodes of this run]"), plays
    assert sorted(os.listdir(str(tmp_path / "inv" / ".fleet-lock"))) == ["20261127T090000Z-77.json"]


def test_a_renewed_campaign_of_another_controller_stays_live_past_stale_after(tmp_path, run_module):
    """The heartbeat (issue #43, outcome 6): started 30 h ago, renewed 1 h ago, it still holds its nodes."""
    locks = tmp_path / "locks"
    entry(locks, "20261126T080000Z-5", ["gpu1"], 5, controller="carol@bastion-2", started=time.time() - 30 * 3600)
    data = json.loads((locks / "20261126T080000Z-5.json").read_text())
    data["renewed"] = time.time() - 3600
    (locks / "20261126T080000Z-5.json").write_text(json.dumps(data))
    refused = take(run_module, locks, ["gpu1"], stale_after=6)
    assert refused["failed"] is True and "carol@bastion-2" in refused["msg"]
    # seven hours without a renewal: stale, however recent its start
    data["renewed"], data["started"] = time.time() - 7 * 3600, time.time() - 8 * 3600
    (locks / "20261126T080000Z-5.json").write_text(json.dumps(data))
    taken = take(run_module, locks, ["gpu1"], stale_after=6)
    assert taken.get("failed") is not True
    assert "on another controller, not renewed for 7 h (stale_after 6 h)" in taken["removed_stale"][0]


def test_renewal_writes_the_time_and_takes_a_lost_entry_again(tmp_path, run_module):
    locks = tmp_path / "locks"
    take(run_module, locks, ["gpu1"])
    before = time.time()
    assert take(run_module, locks, ["gpu1"], state="renewed").get("failed") is not True
    written = json.loads((locks / "20261127T101500Z-1.json").read_text())
    assert written["renewed"] >= before and written["started"] <= written["renewed"]
    # check mode writes nothing
    (locks / "20261127T101500Z-1.json").write_text(json.dumps(dict(written, renewed=1.0)))
    take(run_module, locks, ["gpu1"], state="renewed", check_mode=True)
    assert json.loads((locks / "20261127T101500Z-1.json").read_text())["renewed"] == 1.0
    # another controller removed it as stale: taken again, with a warning
    os.unlink(str(locks / "20261127T101500Z-1.json"))
    again = take(run_module, locks, ["gpu1"], state="renewed")
    assert again.get("failed") is not True and any("was gone" in str(w) for w in again.get("warnings", []))
    assert (locks / "20261127T101500Z-1.json").exists()
