"""The table of nodes left behind when Ansible ends a rolling run early (issue #13, outcome 3):
callback_plugins/gpudirect_left_behind.py, fed Ansible's own objects (Play, Host, Task,
CallbackTaskResult, AggregateStats) in the order Ansible reports a run's events.

The unreachable message is the one ansible-core 2.19.14 gave on this controller for a node whose
connection points at a closed port (molecule/rolling/rolling.yml, rolling_lose), see
test_a_real_run_whose_only_batch_is_lost_prints_the_table below, which runs that playbook.
"""

import configparser
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

from ansible.executor.stats import AggregateStats
from ansible.executor.task_result import CallbackTaskResult
from ansible.inventory.manager import InventoryManager
from ansible.module_utils import gpudirect_left_behind as left
from ansible.module_utils import gpudirect_lock as lock
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.playbook.task import Task
from ansible.vars.manager import VariableManager

from conftest import ROOT
from hang_guard import HANG_GUARD_S

UNREACHABLE = ('Task failed: Data could not be sent to remote host "127.0.0.1". Make sure this host can be '
               'reached over ssh: ssh: connect to host 127.0.0.1 port 9: Connection refused')
NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
ROLLING = "Disruptive changes, a drained batch at a time, resumed only on proof"


def _resume(node):
    return "scontrol update nodename=%s state=resume" % node


def _load_plugin():
    path = os.path.join(ROOT, "callback_plugins", "gpudirect_left_behind.py")
    spec = importlib.util.spec_from_file_location("gpudirect_left_behind_callback", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Display:
    """Records what the callback prints (the calls CallbackBase's display gets)."""

    verbosity = 0

    def __init__(self):
        self.lines = []

    def banner(self, msg, color=None, cows=True):
        self.lines.append("BANNER " + msg)

    def display(self, msg, color=None, stderr=False, screen_only=False, log_only=False, newline=True):
        self.lines.append(msg)

    def __getattr__(self, name):          # v/vv/warning...: not used by the table
        return lambda *args, **kwargs: None


class Run:
    """A playbook run as the callback sees it: real inventory, plays, tasks and results."""

    def __init__(self, tmp_path):
        inventory_file = tmp_path / "hosts.yml"
        inventory_file.write_text(yaml.safe_dump({"all": {"children": {"gpudirect_disrupt": {
            "hosts": {node: {"ansible_connection": "local"} for node in NODES}}}}}))
        self.loader = DataLoader()
        self.inventory = InventoryManager(loader=self.loader, sources=[str(inventory_file)])
        self.variables = VariableManager(loader=self.loader, inventory=self.inventory)
        self.display = _Display()
        self.callback = _load_plugin().CallbackModule(display=self.display)
        self.stats = AggregateStats()
        self.play = None

    def play_start(self, name=ROLLING, rolling=True, batch=None):
        data = {"name": name, "hosts": "gpudirect_disrupt", "gather_facts": False, "tasks": []}
        if rolling:
            data["vars"] = {left.MARKER: True}
        if self.play is None or self.play.get_name() != name:
            self.play = Play.load(data, variable_manager=self.variables, loader=self.loader)
        # Ansible sends play_start again for each batch, with the inventory restricted to it
        self.inventory.restrict_to_hosts([self.inventory.get_host(node) for node in batch or NODES])
        self.callback.v2_playbook_on_play_start(self.play.copy())
        self.inventory.remove_restriction()

    def _result(self, node, name, action, data):
        # a parsed task, without the module lookup that needs ansible-playbook's collection loader
        task = Task()
        task.name, task.action, task.args = name, action, {}
        return CallbackTaskResult(self.inventory.get_host(node), task, data, {"name": name})

    def set_fact(self, node, name, **facts):
        self.stats.increment("ok", node)
        self.callback.v2_runner_on_ok(self._result(node, name, "ansible.builtin.set_fact",
                                                   {"ansible_facts": facts, "changed": False}))

    def table(self, node, rows):
        self.stats.increment("ok", node)
        self.callback.v2_runner_on_ok(self._result(node, "Print the nodes left drained", "ansible.builtin.debug",
                                                   {"msg": lock.table(rows), "_ansible_verbose_always": True}))

    def unreachable(self, node, name, msg=UNREACHABLE):
        self.stats.increment("dark", node)
        self.callback.v2_runner_on_unreachable(self._result(node, name, "ansible.builtin.stat",
                                                            {"msg": msg, "unreachable": True, "changed": False}))

    def failed(self, node, name, msg, rescued=False):
        self.stats.increment("rescued" if rescued else "failures", node)
        self.callback.v2_runner_on_failed(self._result(node, name, "ansible.builtin.command",
                                                       {"msg": msg, "rc": 1, "changed": True}))

    def drained(self, node, stage):
        """The facts the playbook and the drain role set up to and including the drain."""
        self.set_fact(node, "Note the stage (lock) for the final table", gpudirect_drain_stage="lock")
        self.set_fact(node, "Note the stage (drain) for the final table", gpudirect_drain_stage="drain")
        self.set_fact(node, "Record the drain (before the command, so that a drain that fails half way is still named)",
                      gpudirect_drain_drained=True, __gpudirect_drain_resume_line=_resume(node),
                      gpudirect_verify_status="")
        self.set_fact(node, "Note the stage (%s) for the final table" % stage, gpudirect_drain_stage=stage)

    def finished(self, node):
        """A node that passed: resumed, batch reported."""
        self.drained(node, "verify")
        self.set_fact(node, "Mark the node as back in service", gpudirect_drain_drained=False)

    def end(self):
        self.callback.v2_playbook_on_stats(self.stats)
        return self.display.lines


def _rows(lines):
    """{node: line} of the printed table (after the banner and the sentence)."""
    return {line.split()[0]: line for line in lines[3:]}


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)


def test_every_node_of_batch_1_unreachable_prints_the_table(run):
    run.play_start(batch=["gpu01", "gpu02"])
    run.drained("gpu01", "reboot")
    run.set_fact("gpu02", "Note the stage (lock) for the final table", gpudirect_drain_stage="lock")
    run.unreachable("gpu02", "gpudirect_drain : Take the node's run lock")
    run.unreachable("gpu01", "gpudirect_reboot : Reboot the node")
    lines = run.end()
    assert lines[0] == "BANNER NODES LEFT BEHIND"
    assert "'%s'" % ROLLING in lines[1] and "before the drain report could name these nodes" in lines[1]
    assert lines[2].split() == ["NODE", "WHY", "RESUME", "BY", "HAND"]
    rows = _rows(lines)
    assert list(rows) == list(NODES)
    assert ("gpu01  unreachable in this run after its drain (last stage: reboot); unreachable at "
            "'gpudirect_reboot : Reboot the node': " + UNREACHABLE) in rows["gpu01"]
    assert rows["gpu01"].endswith("  " + _resume("gpu01"))
    assert ("unreachable in this run before any drain (not drained by this run) (last stage: lock): check it; "
            "unreachable at 'gpudirect_drain : Take the node's run lock'") in rows["gpu02"]
    assert rows["gpu02"].endswith("  -")
    for node in ("gpu03", "gpu04"):
        assert "not reached: the run stopped before its batch" in rows[node] and rows[node].endswith("  -")


def test_a_later_batch_lost_after_earlier_tables_is_named_with_the_nodes_never_reached(run):
    run.play_start(batch=["gpu01"])
    run.finished("gpu01")
    run.table("gpu01", [])
    run.set_fact("gpu01", "Mark the node's batch as reported", __gpudirect_drain_batch_done=True)
    run.play_start(batch=["gpu02"])
    run.drained("gpu02", "drivers")
    run.unreachable("gpu02", "OFED, NVIDIA driver and peer memory")
    rows = _rows(run.end())
    assert list(rows) == ["gpu02", "gpu03", "gpu04"]      # gpu01 passed and was resumed: not named
    assert "after its drain (last stage: drivers)" in rows["gpu02"] and rows["gpu02"].endswith(_resume("gpu02"))


def test_a_mix_of_failed_and_unreachable_nodes(run):
    run.play_start(name="Rolling kernel update", batch=["gpu01", "gpu02", "gpu03"])
    run.unreachable("gpu01", "Gathering Facts")
    run.failed("gpu02", "Gathering Facts", "/usr/bin/python3: not found\nmore lines")
    run.drained("gpu03", "verify")
    # gpu03's verification failed: the rescue recorded it, the resume left it drained
    run.failed("gpu03", "gpudirect_verify : Prove GPUDirect RDMA", "loopback: data mismatch", rescued=True)
    failure = {"task": "gpudirect_verify : Prove GPUDirect RDMA", "msg": "loopback: data mismatch"}
    run.set_fact("gpu03", "Record the failure of the node", __gpudirect_drain_failure=failure)
    run.set_fact("gpu03", "Leave the node drained when it was drained, and say why",
                 gpudirect_drain_left_drained=lock.left_drained_entry("", ["scontrol", "update", "nodename=gpu03",
                                                                           "state=resume"], True, failure))
    run.unreachable("gpu03", "gpudirect_drain : Release the node's run lock")
    lines = run.end()
    assert "'Rolling kernel update'" in lines[1]
    rows = _rows(lines)
    assert list(rows) == list(NODES)
    assert ("unreachable in this run before any drain (not drained by this run): check it; "
            "unreachable at 'Gathering Facts': ") in rows["gpu01"]
    assert ("failed in this run before any drain (not drained by this run): check it; "
            "failed at 'Gathering Facts': /usr/bin/python3: not found ") in rows["gpu02"]
    assert "more lines" not in rows["gpu02"] and rows["gpu02"].endswith("  -")
    # the rescue's record says where and why, then what became of the node
    assert rows["gpu03"].startswith(
        "gpu03  failed in this run; failed at 'gpudirect_verify : Prove GPUDirect RDMA': loopback: data mismatch; "
        "unreachable at 'gpudirect_drain : Release the node's run lock': " + UNREACHABLE)
    assert rows["gpu03"].count("loopback") == 1 and rows["gpu03"].endswith("  " + _resume("gpu03"))
    assert "not reached" in rows["gpu04"]


def test_a_node_still_in_the_run_when_ansible_ended_it_is_stopped_not_lost(run):
    # gpu01 fails outside the rescued steps: max_fail_percentage ends the run while gpu02 works
    run.play_start(batch=["gpu01", "gpu02"])
    run.finished("gpu01")
    run.failed("gpu01", "Record", "Destination /var/lib/gpudirect not writable")
    run.drained("gpu02", "verify")
    rows = _rows(run.end())
    assert "gpu02  stopped mid-batch in this run after its drain (last stage: verify)" in rows["gpu02"]
    assert rows["gpu02"].endswith(_resume("gpu02"))
    assert "failed at 'Record': Destination /var/lib/gpudirect not writable" in rows["gpu01"]


def test_a_normal_run_whose_report_printed_its_table_prints_nothing_more(run):
    # batch 1: gpu01's verification failed (rescued), the batch's table names it, then the
    # report fails it and max_fail_percentage stops the run: that table was the last word
    run.play_start(batch=["gpu01"])
    run.drained("gpu01", "verify")
    run.failed("gpu01", "Verify", "verification failed", rescued=True)
    entry = lock.left_drained_entry("failed", ["scontrol"], True)
    run.set_fact("gpu01", "Leave the node drained and say why", gpudirect_drain_left_drained=entry)
    run.table("gpu01", lock.report_rows({"gpu01": {"gpudirect_drain_left_drained": entry}}, ["gpu01"], ["gpu01"]))
    run.set_fact("gpu01", "Mark the node's batch as reported", __gpudirect_drain_batch_done=True)
    run.failed("gpu01", "gpudirect_drain : Fail the node this run left drained or that failed", "gpu01 was left drained")
    assert run.end() == []


def test_a_loss_the_batch_table_named_prints_nothing_more(run):
    run.play_start(batch=["gpu01", "gpu02"])
    run.drained("gpu01", "reboot")
    run.unreachable("gpu01", "Reboot")
    run.finished("gpu02")
    run.table("gpu02", lock.report_rows({"gpu01": {"gpudirect_drain_drained": True}}, ["gpu01", "gpu02"], ["gpu02"]))
    run.set_fact("gpu02", "Mark the node's batch as reported", __gpudirect_drain_batch_done=True)
    run.play_start(name="Report the nodes left drained", rolling=False)
    run.table("gpu02", [{"node": "gpu01", "reason": "unreachable", "resume_command": "-"}])
    assert run.end() == []


def test_a_run_with_no_rolling_play_prints_nothing(run):
    run.play_start(name="Preflight", rolling=False)
    for node in NODES:
        run.unreachable(node, "Gathering Facts")
    assert run.end() == []


def test_a_run_that_lost_nothing_prints_nothing(run):
    run.play_start()
    for node in NODES:
        run.finished(node)
    assert run.end() == []


def test_the_table_of_the_role_is_recognised_and_other_messages_are_not():
    assert left.is_table(lock.table([]))
    assert left.is_table(lock.table([{"node": "gpu01", "reason": "x", "resume_command": "-"}]))
    assert left.is_table("\n".join(lock.table([{"node": "gpu-long-name-01", "reason": "x", "resume_command": "-"}])))
    assert not left.is_table("Not reached yet (1): gpu04.")
    assert not left.is_table(["NODE is fine"])
    assert not left.is_table(None)


@pytest.mark.parametrize("value,expected", [(True, True), ("true", True), ("yes", True), (False, False),
                                            (None, False), ("no", False)])
def test_the_marker(value, expected):
    assert left.rolling_marker({left.MARKER: value}) is expected
    assert left.rolling_marker({}) is False


def _plays(path):
    with open(path) as handle:
        return [play for play in yaml.safe_load(handle) if isinstance(play, dict) and "hosts" in play]


def _drains(node):
    """A play's tasks call a drain entry point (gpudirect_drain's, or gpudirect_kernel_update's that
    wraps it); the stage plays of site.yml's undrained path take the run lock too, but
    drain nothing."""
    if isinstance(node, dict):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            role = node.get(key)
            if isinstance(role, dict) and role.get("tasks_from") == "drain":
                return True
        return any(_drains(value) for value in node.values())
    if isinstance(node, list):
        return any(_drains(item) for item in node)
    return False


def test_every_play_that_drains_nodes_is_marked_for_the_callback():
    paths = glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + [os.path.join(ROOT, "molecule", "rolling", "rolling.yml")]
    marked = []
    for path in paths:
        for play in _plays(path):
            if _drains(play.get("tasks")):
                assert (play.get("vars") or {}).get(left.MARKER) is True, "%s: play %r" % (path, play.get("name"))
                marked.append(os.path.basename(path))
    assert sorted(marked) == ["kernel_update.yml", "rolling.yml", "rolling.yml"]


def test_ansible_cfg_enables_the_callback_from_the_project():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "ansible.cfg"))
    assert config["defaults"]["callback_plugins"] == "callback_plugins"
    assert "gpudirect_left_behind" in [c.strip() for c in config["defaults"]["callbacks_enabled"].split(",")]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """molecule/rolling/rolling.yml over four local nodes, batches of 1, roll1 made unreachable
    after its disruptive step: its batch is lost whole and Ansible ends the run there."""
    tmp = tmp_path_factory.mktemp("left_behind")
    state = tmp / "state"
    state.mkdir()
    prefix = "/run/lock/gpudirect-unit-lb-%d-" % os.getpid()
    # the nodes' left-drained notes: under the role's directory, as it requires, removed after
    notes = "/var/lib/gpudirect/unit-notes-%s" % uuid.uuid4().hex
    nodes = ["gpudirect-roll%d" % i for i in range(1, 5)]
    hosts = {"all": {"children": {"gpu_nodes": {"hosts": {
        node: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
               "gpudirect_drain_lock_file": "%s%s.lock" % (prefix, node),
               "gpudirect_drain_left_drained_file": "%s/%s.json" % (notes, node)} for node in nodes}}}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(hosts))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp / "hosts.yml"),
            os.path.join(ROOT, "molecule", "rolling", "rolling.yml"),
            "-e", "rolling_state=%s" % state, "-e", "rolling_fail=none", "-e", "rolling_lose=gpudirect-roll1",
            "-e", "rolling_disrupted_file=%s" % (tmp / "disrupted")]
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    finally:
        shutil.rmtree(notes, ignore_errors=True)
        for path in glob.glob(prefix + "*"):
            os.remove(path)
    return proc, state


def test_a_real_run_whose_only_batch_is_lost_prints_the_table(real_run):
    real_run, state = real_run
    out = real_run.stdout
    assert real_run.returncode == 4, out[-4000:] + real_run.stderr[-2000:]
    assert '"NODE ' not in out                      # the role printed no table: Ansible ended the run first
    after = out.split("NODES LEFT BEHIND", 1)[1].splitlines()
    rows = {line.split()[0]: line for line in after if line.startswith("gpudirect-roll")}
    assert list(rows) == ["gpudirect-roll1", "gpudirect-roll3", "gpudirect-roll4"], out[-4000:]
    assert ("unreachable in this run after its drain (last stage: disrupt); unreachable at "
            "'Stand-in check on the node after its disruption': ") in rows["gpudirect-roll1"]
    assert "port 9" in rows["gpudirect-roll1"]
    # the resume command the role would print: gpudirect_drain_resume_command, shell-quoted
    assert rows["gpudirect-roll1"].endswith("  python3 %s %s resume gpudirect-roll1" % (
        os.path.join(ROOT, "molecule", "rolling", "files", "fake_scheduler.py"), state))
    for node in ("gpudirect-roll3", "gpudirect-roll4"):
        assert "not reached: the run stopped before its batch" in rows[node]


def test_a_second_rolling_play_counts_its_own_losses(run):
    # site.yml then kernel_update.yml in one ansible-playbook command: gpu01's batch was
    # reported in the first rolling play; losing it in the second one still counts
    run.play_start(batch=["gpu01"])
    run.finished("gpu01")
    run.table("gpu01", [])
    run.set_fact("gpu01", "Mark the node's batch as reported", __gpudirect_drain_batch_done=True)
    run.play_start(name="Rolling kernel update", batch=["gpu01"])
    run.unreachable("gpu01", "Gathering Facts")
    lines = run.end()
    assert "'Rolling kernel update'" in lines[1]
    assert "unreachable at 'Gathering Facts'" in _rows(lines)["gpu01"]


def test_the_table_is_in_node_name_order_whatever_order_the_play_listed_them():
    # a rolling play's hosts come from a group built at run time (group_by / add_host): their
    # order is the order the nodes finished that task, which changed from one CI run to the next
    recorder = left.Recorder()
    recorder.play_start("k", ROLLING, True, ["gpu10", "gpu4", "gpu3", "gpu1"])
    recorder.facts("gpu1", {"gpudirect_drain_stage": "disrupt", "gpudirect_drain_drained": True})
    recorder.lost("gpu1", "unreachable", "Stand-in check", UNREACHABLE)
    lines = left.render(recorder.left_behind(["gpu1"]))
    assert [line.split()[0] for line in lines if line.startswith("gpu")] == ["gpu1", "gpu3", "gpu4", "gpu10"], lines
