"""site.yml's play wiring (issue #13, #16): which nodes are left out, drained, rolled.

The real playbooks (site.yml, playbooks/), filters and module_utils run with
ansible-playbook over four local-connection nodes; the roles are stand-ins that
log what they were asked to do (the roles themselves have their own tests), so
these tests read the order of events: unchanged nodes are never staged, drained
nor serialised; nodes whose plan disrupts nothing are staged undrained; the
disruptive ones are drained and rolled one batch after the other and resumed only
on a passed verification; a failed batch stops the run with the table of nodes
left drained; a bad batch knob stops the run before any stage.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NODES = ("n1", "n2", "n3", "n4")

LOG_TASK = """\
- name: Log {event}
  ansible.builtin.debug:
    msg: "EVENT {{{{ inventory_hostname }}}} {event}"
"""


def _log(event):
    return LOG_TASK.format(event=event)


def _role(root, name, files):
    for rel, text in files.items():
        path = root / "roles" / name / "tasks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("---\n" + textwrap.dedent(text))


def _real_tasks(role, name, first, stop=None):
    """A real task file of the project, from the task named ``first`` to the one named ``stop``
    (to its end without ``stop``)."""
    with open(os.path.join(ROOT, "roles", role, "tasks", name)) as handle:
        text = handle.read()
    assert "- name: %s\n" % first in text and (stop is None or "- name: %s\n" % stop in text), (role, name, first, stop)
    body = text.split("- name: %s\n" % first, 1)[1]
    if stop is not None:
        body = body.split("- name: %s\n" % stop, 1)[0]
    return "- name: %s\n%s" % (first, body)


def _project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(os.path.join(ROOT, "site.yml"), root / "site.yml")
    for part in ("playbooks", "filter_plugins", "module_utils", "plugin_utils"):
        shutil.copytree(os.path.join(ROOT, part), root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "action_plugins").mkdir()
    (root / "action_plugins" / "gpudirect_facts.py").write_text(textwrap.dedent("""\
        # stand-in for library/gpudirect_facts.py: the OS reboot reasons the inventory gives the node
        from ansible.plugins.action import ActionBase


        class ActionModule(ActionBase):
            def run(self, tmp=None, task_vars=None):
                reasons = list((task_vars or {}).get("stub_os_reasons", []))
                return {"changed": False, "ansible_facts": {"gpudirect": {"kernel": {"reboot_reasons": reasons}}}}
        """))
    _role(root, "gpudirect_state", {
        "main.yml": _log("state_check") + textwrap.dedent("""\
            - name: Group an unchanged node
              ansible.builtin.group_by:
                key: gpudirect_unchanged
              changed_when: false
              when: stub_unchanged | default(false)
            - name: Group the stages a toolkit change left alone, as the role does on a node otherwise unchanged
              ansible.builtin.group_by:
                key: "gpudirect_skip_{{ item }}"
              loop: "{{ stub_skip_stages | default([]) }}"
              changed_when: false
            - name: And their roles
              ansible.builtin.set_fact:
                gpudirect_state_skipped_roles: "{{ stub_skip_roles | default([]) }}"
            - name: The inputs compared, which the record step needs (the real role's defaults)
              ansible.builtin.set_fact:
                gpudirect_state_inputs: {}
                gpudirect_state_record_requires_verification: true
            """),
        # the real entry point's decision (verification passed, no reboot pending, no stage left
        # out by the run's tags), with the record's write logged instead of made
        "record.yml": _real_tasks("gpudirect_state", "record.yml", "Decide whether this run may write the record",
                                  "Record the converged state for the next run's comparison")
        + _log("record") + "  when: __gpudirect_state_no_record | length == 0\n",
        "forget.yml": _log("forget"),
    })
    _role(root, "gpudirect_preflight", {"main.yml": _log("preflight")})
    for name in ("gpudirect_host_prereqs", "gpudirect_mlnx_ofed", "gpudirect_nic_config", "gpudirect_rdma_addresses", "gpudirect_roce_qos",
                 "gpudirect_nvidia_driver", "gpudirect_peermem", "gpudirect_pcie_acs"):
        _role(root, name, {
            "plan.yml": _log("plan " + name) + textwrap.dedent("""\
                - name: Register the plan
                  ansible.builtin.set_fact:
                    {name}_plan:
                      changes: "{{{{ stub_changes | default({{}}) | dict2items | selectattr('key', 'eq', '{name}') | map(attribute='value') | first | default([]) }}}}"
                      disruption: "{{{{ stub_disrupt | default({{}}) | dict2items | selectattr('key', 'eq', '{name}') | map(attribute='value') | first | default([]) }}}}"
                """).format(name=name),
            "main.yml": _log(name) + textwrap.dedent("""\
                - name: Fail as the role would on this node
                  ansible.builtin.fail:
                    msg: "stub {name} failed"
                  when: stub_fail | default('') == '{name}'
                - name: Hand a disruption the plan pass did not foresee to the drain owner, as the role does
                  ansible.builtin.include_role:
                    name: gpudirect_drain
                    tasks_from: disrupt
                  vars:
                    gpudirect_drain_disruption: ["{name}: reload after an earlier stage changed its input"]
                    gpudirect_drain_disruption_role: {name}
                  when: stub_late_disrupt | default('') == '{name}'
                """).format(name=name),
        })
    for name in ("gpudirect_os_release_pin", "gpudirect_dkms"):
        _role(root, name, {"main.yml": _log(name)})
    _role(root, "gpudirect_host_prereqs", {"main.yml": _log("gpudirect_host_prereqs") + textwrap.dedent("""\
        - name: Ask for a reboot, as the iommu=pt knob does
          ansible.builtin.set_fact:
            gpudirect_reboot_reasons: ["gpudirect_host_prereqs: the running kernel lacks iommu=pt"]
          when: stub_stage_reboot | default(false)
        """)})
    _role(root, "gpudirect_reboot", {"main.yml": _log("reboot") + textwrap.dedent("""\
        - name: A reboot satisfies every reason
          ansible.builtin.set_fact:
            gpudirect_reboot_reasons: []
        """)})
    _role(root, "gpudirect_verify", {
        # the campaign's verification table, printed once by the rolling play's last play: not a node's event
        "summary.yml": "- name: Verification table stub\n  ansible.builtin.debug:\n    msg: verification table\n",
        "main.yml": _log("verify") + textwrap.dedent("""\
        - name: The verdict
          ansible.builtin.set_fact:
            gpudirect_verify_status: "{{ stub_verify | default('passed') }}"
        - name: Fail when it did not pass
          ansible.builtin.fail:
            msg: "stub verification {{ gpudirect_verify_status }}"
          when: gpudirect_verify_status != 'passed'
        """)})
    _role(root, "gpudirect_drain", {
        # the fleet lock, first and last play (tests/unit/test_fleet_lock.py runs the real one);
        # not an event of the node: the tests below compare each node's events
        "fleet_lock.yml": "- name: Fleet lock stub\n  ansible.builtin.debug:\n    msg: fleet lock\n",
        "fleet_release.yml": "- name: Fleet release stub\n  ansible.builtin.debug:\n    msg: fleet release\n",
        # the real entry points' contract: taken once per run, a no-op while this run holds it
        "lock.yml": textwrap.dedent("""\
            - name: Take the lock once per run
              when: not __stub_locked | default(false)
              block:
            """) + textwrap.indent(_log("lock"), "    ") + textwrap.dedent("""\
                - name: Hold it
                  ansible.builtin.set_fact:
                    __stub_locked: true
            """),
        "unlock.yml": textwrap.dedent("""\
            - name: Release the lock this run holds
              when: __stub_locked | default(false)
              block:
            """) + textwrap.indent(_log("unlock"), "    ") + textwrap.dedent("""\
                - name: Hold it no more
                  ansible.builtin.set_fact:
                    __stub_locked: false
            """),
        # the real entry point's contract: from here on the node is drained and idle (the stage roles'
        # disruptions go ahead, gpudirect_drain disrupt)
        "drain.yml": _log("drain") + "- name: Drained and idle\n  ansible.builtin.set_fact:\n    gpudirect_drain_idle: true\n",
        # the real entry point notes the stage (and writes it into the note and the scheduler's reason)
        "stage.yml": "- name: Note the stage\n  ansible.builtin.set_fact:\n"
                     "    gpudirect_drain_stage: \"{{ gpudirect_drain_stage_next }}\"\n",
        # what earlier runs left behind (tests/unit/test_drain_left_drained_note.py tests the real one)
        "left_behind.yml": "- name: No node left behind\n  ansible.builtin.debug:\n    msg: no note\n",
        # the real entry point's decision (its scheduler reads need the role's defaults)
        "budget.yml": _real_tasks("gpudirect_drain", "budget.yml", "Weigh this batch against the campaign's budgets"),
        # the real entry point: what it does is what these tests are about
        "disrupt.yml": open(os.path.join(ROOT, "roles", "gpudirect_drain", "tasks", "disrupt.yml")).read().split("\n", 1)[1],
        "failed.yml": _log("failed") + textwrap.dedent("""\
            - name: Record the failure
              ansible.builtin.set_fact:
                stub_failure: "{{ ansible_failed_result.msg | default('?') }}"
            """),
        "resume.yml": """\
            - name: Resume on proof only
              ansible.builtin.include_tasks:
                file: "{{ 'resume_passed.yml' if gpudirect_verify_status | default('') == 'passed'
                          and stub_failure is not defined else 'keep.yml' }}"
            """,
        "resume_passed.yml": _log("resume"),
        "resume_earlier.yml": "- name: Nothing left drained by an earlier run here\n  ansible.builtin.meta: noop\n",
        "keep.yml": _log("left_drained") + textwrap.dedent("""\
            - name: Record the node left drained
              ansible.builtin.set_fact:
                gpudirect_drain_left_drained: {reason: "verification {{ gpudirect_verify_status | default('did not run') }}",
                                               resume_command: "scontrol update nodename={{ inventory_hostname }} state=resume"}
            """),
        "report.yml": """\
            - name: Log the table
              ansible.builtin.debug:
                msg: "EVENT report {{ __left | join(',') }}"
              run_once: true
              vars:
                __left: "{{ groups['gpu_nodes'] | select('in', hostvars) | map('extract', hostvars)
                            | selectattr('gpudirect_drain_left_drained', 'defined') | map(attribute='inventory_hostname') | list }}"
            - name: Fail a node left drained or failed
              ansible.builtin.fail:
                msg: "left drained"
              when: gpudirect_drain_left_drained is defined or stub_failure is defined
            """,
    })
    (root / "ansible.cfg").write_text(textwrap.dedent("""\
        [defaults]
        roles_path = roles
        action_plugins = action_plugins
        module_utils = module_utils
        filter_plugins = filter_plugins
        forks = 4
        gathering = explicit
        retry_files_enabled = false
        """))
    return root


def _run(root, hostvars, extra=None, args=()):
    lines = ["all:", "  children:", "    gpu_nodes:", "      hosts:"]
    for node in NODES:
        # drain hooks as a cluster sets them (the stand-in drain role runs none): the refusal
        # of an undrained disruption is tests/unit/test_drain_protection.py's
        hooks = {k: ["true"] for k in ("gpudirect_drain_command", "gpudirect_drain_wait_command",
                                       "gpudirect_drain_resume_command")}
        lines.append("        %s: %s" % (node, dict(hooks, **hostvars.get(node, {}),
                                                   ansible_connection="local",
                                                   ansible_python_interpreter=sys.executable, ansible_become=False)))
    (root / "hosts.yml").write_text("\n".join(lines) + "\n")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "hosts.yml", "site.yml"]
    for key, value in (extra or {}).items():
        argv += ["-e", "%s=%s" % (key, value)]
    argv += list(args)
    env = dict(os.environ, ANSIBLE_CONFIG=str(root / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    events = [(m.group(1), m.group(2)) for m in re.finditer(r'"msg": "EVENT (\S+) ?(.*)"', proc.stdout)]
    return proc, events


def _of(events, node):
    return [event for host, event in events if host == node]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return _project(tmp_path_factory.mktemp("site"))


FLEET = {
    "n1": {"stub_unchanged": True},
    "n2": {"stub_changes": {"gpudirect_peermem": ["enable gpudirect-nvidia-peermem.service"]}},
    "n3": {"stub_disrupt": {"gpudirect_mlnx_ofed": ["openibd restart: OFED 24.10-1.1.4 -> 25.01-0.6.0"]}},
    "n4": {"stub_os_reasons": ["default boot kernel 6.1.0-28-amd64 differs from running 6.1.0-27-amd64"]},
}


def test_unchanged_nodes_are_only_verified_and_disruptive_ones_rolled_one_at_a_time(project):
    proc, events = _run(project, FLEET)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # unchanged: the state check and the proof, nothing else; never drained
    assert _of(events, "n1") == ["state_check", "verify"]
    # changed, nothing disruptive: every stage at once, undrained, verified and recorded, under
    # the node's run lock from its first stage to its record (issue #13, outcome 6)
    n2 = _of(events, "n2")
    assert "drain" not in n2 and "reboot" not in n2
    assert n2[n2.index("plan gpudirect_pcie_acs") + 1:n2.index("plan gpudirect_pcie_acs") + 3] == ["lock", "gpudirect_os_release_pin"]
    assert n2.count("lock") == 1 and n2[-3:] == ["verify", "record", "unlock"]
    assert "gpudirect_mlnx_ofed" in n2 and "gpudirect_pcie_acs" in n2
    # disruptive: lock, drain, stages, reboot, verify, resume, record, unlock, in that order
    for node in ("n3", "n4"):
        mine = _of(events, node)
        staged = mine[mine.index("lock"):]
        assert staged[:2] == ["lock", "drain"], mine
        assert staged.index("gpudirect_mlnx_ofed") < staged.index("gpudirect_pcie_acs") < staged.index("reboot") < staged.index("verify")
        assert staged[staged.index("verify"):] == ["verify", "resume", "record", "unlock"]
    # batches of one, in the order of the node names: n4's batch starts after n3's ended
    order = [host + " " + event for host, event in events]
    assert order.index("n3 unlock") < order.index("n4 lock")
    # every other node was done before the first drain
    assert order.index("n2 record") < order.index("n3 lock")
    assert "n3: disruptive, so drained and rolled in batches" in proc.stdout
    assert "reboot (operating system): default boot kernel 6.1.0-28-amd64 differs from running 6.1.0-27-amd64" in proc.stdout
    # the table of nodes left drained ends the run: none
    assert events[-1] == ("report", "")


def test_the_reboot_required_flag_alone_is_reported_not_drained_nor_rebooted(project):
    """Issue #43, outcome 3: /run/reboot-required (any package update may set it) is reported; with
    gpudirect_reboot_required_flag: reboot it is a reason to drain and reboot."""
    flag = {"stub_os_reasons": ["/run/reboot-required exists (packages: libc6)"]}
    proc, events = _run(project, {"n4": flag})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    n4 = _of(events, "n4")
    assert "drain" not in n4 and "reboot" not in n4 and n4[-3:] == ["verify", "record", "unlock"]
    assert ("n4: the operating system asks for a reboot (/run/reboot-required exists (packages: libc6)); reported only, "
            "no drain or reboot for it (gpudirect_reboot_required_flag: reboot acts on it)") in proc.stdout
    proc, events = _run(project, {"n4": dict(flag, gpudirect_reboot_required_flag="reboot")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _of(events, "n4")[_of(events, "n4").index("lock"):][:2] == ["lock", "drain"]


def test_a_failed_verification_leaves_the_node_drained_and_stops_before_the_next_batch(project):
    fleet = dict(FLEET, n3=dict(FLEET["n3"], stub_verify="failed"))
    proc, events = _run(project, fleet)
    assert proc.returncode != 0
    n3 = _of(events, "n3")
    assert "resume" not in n3 and "record" not in n3
    assert n3[n3.index("verify"):] == ["verify", "forget", "failed", "left_drained", "unlock"]
    assert ("report", "n3") in events
    # max_fail_percentage 0: n4's batch never started
    assert "lock" not in _of(events, "n4") and "drain" not in _of(events, "n4")
    # the nodes outside the rolling play were done before it
    assert _of(events, "n2")[-2:] == ["record", "unlock"]


def test_a_batch_knob_lets_the_run_go_on_and_the_table_ends_it(project):
    fleet = dict(FLEET, n3=dict(FLEET["n3"], stub_verify="not_proven"))
    proc, events = _run(project, fleet, {"gpudirect_rolling_max_fail_percentage": 50,
                                         "gpudirect_rolling_batch": "100%"})
    assert proc.returncode != 0
    # one batch of two (100% of the two nodes to disrupt): both drained before either is verified;
    # one failed node of two is not more than 50%, so the run goes on to its end
    order = [host + " " + event for host, event in events]
    assert max(order.index("n3 drain"), order.index("n4 drain")) < min(order.index("n3 verify"), order.index("n4 verify"))
    assert "resume" in _of(events, "n4") and "left_drained" in _of(events, "n3")
    assert events[-1] == ("report", "n3")


@pytest.mark.parametrize("stage, failed", [("gpudirect_nvidia_driver", "stub gpudirect_nvidia_driver failed"),
                                           ("verify", "stub verification failed")])
def test_an_undrained_node_that_fails_releases_its_run_lock(project, stage, failed):
    fleet = dict(FLEET, n2=dict(FLEET["n2"], **({"stub_fail": stage} if stage != "verify" else {"stub_verify": "failed"})))
    proc, events = _run(project, fleet)
    assert proc.returncode != 0
    n2 = _of(events, "n2")
    assert n2.count("lock") == 1 and n2[-1] == "unlock" and "record" not in n2, n2
    assert n2.index(stage) < n2.index("unlock")
    assert failed in proc.stdout
    if stage == "verify":
        # the verify play has the unchanged n1 too, so the run went on to the rolling batches
        assert _of(events, "n3")[-3:] == ["resume", "record", "unlock"]
    else:
        # n2 was the only node of the undrained stage plays, so Ansible ended the run
        # there: the nodes to disrupt were never drained
        assert "drain" not in _of(events, "n3") + _of(events, "n4")


def test_a_disruption_the_plan_pass_did_not_foresee_is_done_drained_in_the_rolling_play(project):
    fleet = dict(FLEET, n2=dict(FLEET["n2"], stub_late_disrupt="gpudirect_nvidia_driver"))
    proc, events = _run(project, fleet)
    assert proc.returncode == 0, proc.stdout[-3000:]
    n2 = _of(events, "n2")
    # the undrained stages end at the role that found it; nothing after it ran undrained
    undrained = n2[:n2.index("drain")]
    assert undrained[-1] == "gpudirect_nvidia_driver" and "gpudirect_peermem" not in undrained and "verify" not in undrained
    # then drained in its batch: every stage again, verified, resumed, recorded, one lock throughout
    rolled = n2[n2.index("drain"):]
    assert rolled.index("gpudirect_mlnx_ofed") < rolled.index("gpudirect_nic_config") < rolled.index("gpudirect_nvidia_driver") \
        < rolled.index("gpudirect_peermem") < rolled.index("reboot") < rolled.index("verify")
    assert rolled[-3:] == ["resume", "record", "unlock"] and n2.count("lock") == 1
    assert "n2: gpudirect_nvidia_driver would interrupt the node, which the read-only plan pass did not foresee" in proc.stdout
    # the other undrained node is not held up by it
    assert _of(events, "n1") == ["state_check", "verify"]


def test_a_node_whose_stage_asked_for_a_reboot_is_rebooted_only_in_the_rolling_play(project):
    fleet = dict(FLEET, n2=dict(FLEET["n2"], stub_stage_reboot=True))
    proc, events = _run(project, fleet)
    assert proc.returncode == 0, proc.stdout[-3000:]
    n2 = _of(events, "n2")
    first_verify = n2.index("verify")
    # its lock, taken by its first undrained stage, is held on into the rolling play
    assert n2.index("lock") < n2.index("gpudirect_host_prereqs") < n2.index("drain") < n2.index("reboot") < first_verify
    assert n2.count("lock") == 1 and n2.count("verify") == 1 and n2[-3:] == ["resume", "record", "unlock"]
    assert "its stages asked for a reboot" in proc.stdout
    # its stages ran to their end undrained: the rolling play drains and reboots it without running them again
    rolled = n2[n2.index("drain"):]
    assert not {"gpudirect_os_release_pin", "gpudirect_host_prereqs", "gpudirect_mlnx_ofed", "gpudirect_nvidia_driver", "gpudirect_peermem", "gpudirect_pcie_acs"} & set(rolled), rolled
    assert n2.count("gpudirect_host_prereqs") == 1 and n2.count("gpudirect_nvidia_driver") == 1, n2
    assert "n2: os_pin, drivers and pcie_acs ran to their end undrained earlier in this run" in proc.stdout


@pytest.mark.parametrize("knob, value, message", [
    ("gpudirect_rolling_batch", 0, "gpudirect_rolling_batch=0 must be 1 or more nodes"),
    ("gpudirect_rolling_max_fail_percentage", 101, "gpudirect_rolling_max_fail_percentage='101' must be a whole number"),
])
def test_a_bad_batch_knob_stops_the_run_before_any_stage(project, knob, value, message):
    proc, events = _run(project, FLEET, {knob: value})
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, proc.stdout[-3000:]
    staged = {event for _, event in events} - {"state_check", "preflight"}
    assert staged == set(), events


def test_a_canary_batch_list_rolls_one_node_then_the_rest_together(project):
    """issue #30: gpudirect_rolling_batch as a list, as Ansible's serial takes it: the first
    node alone (the canary), proven, then the others in one batch."""
    fleet = dict(FLEET, n2={"stub_disrupt": {"gpudirect_nvidia_driver": ["driver reload: 570 -> 580"]}})
    proc, events = _run(project, fleet, {"gpudirect_rolling_batch": "1,100%"})
    assert proc.returncode == 0, proc.stdout
    order = [host + " " + event for host, event in events]
    # the canary n2 is verified and resumed before n3 or n4 is drained
    assert order.index("n2 resume") < min(order.index("n3 drain"), order.index("n4 drain"))
    # then n3 and n4 in one batch: both drained before either is verified
    assert max(order.index("n3 drain"), order.index("n4 drain")) < min(order.index("n3 verify"), order.index("n4 verify"))


def test_a_toolkit_change_of_one_stage_runs_only_that_stage(project):
    """Issue #30 outcome 6: on a node whose own state matches its record, where only the drivers stage's inputs
    changed (roles/gpudirect_state puts it into gpudirect_skip_os_pin, _pcie_acs and _verify), the drivers stage
    and its roles' plans run; os_pin and pcie_acs (and pcie_acs's plan) leave it out; verification runs."""
    fleet = {"n1": {"stub_skip_stages": ["os_pin", "pcie_acs", "verify"],
                    "stub_skip_roles": ["gpudirect_host_prereqs", "gpudirect_os_release_pin", "gpudirect_pcie_acs", "gpudirect_verify"]},
             "n2": {"stub_unchanged": True}, "n3": {"stub_unchanged": True}, "n4": {"stub_unchanged": True}}
    proc, events = _run(project, fleet)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    n1 = _of(events, "n1")
    assert [e for e in n1 if e.startswith("plan ")] == ["plan gpudirect_mlnx_ofed", "plan gpudirect_nic_config",
                                                        "plan gpudirect_rdma_addresses", "plan gpudirect_roce_qos",
                                                        "plan gpudirect_nvidia_driver",
                                                        "plan gpudirect_peermem"]
    assert "gpudirect_mlnx_ofed" in n1 and "gpudirect_nic_config" in n1 and "gpudirect_nvidia_driver" in n1 and "gpudirect_peermem" in n1 and "gpudirect_dkms" in n1
    assert not {"gpudirect_os_release_pin", "gpudirect_host_prereqs", "gpudirect_pcie_acs", "drain", "reboot"} & set(n1)
    assert n1[-3:] == ["verify", "record", "unlock"]


def test_a_rolled_node_runs_only_the_stages_whose_inputs_changed(project):
    """A node that matches its record, where only the drivers stage's inputs changed and that change
    disrupts (a driver reload): rolled, drained, but os_pin and pcie_acs are left out there too, as
    in the undrained stage plays (gpudirect_skip_<stage>); the reboot and verification still run."""
    fleet = dict(FLEET, n2={"stub_skip_stages": ["os_pin", "pcie_acs", "verify"],
                            "stub_skip_roles": ["gpudirect_host_prereqs", "gpudirect_os_release_pin", "gpudirect_pcie_acs", "gpudirect_verify"],
                            "stub_disrupt": {"gpudirect_nvidia_driver": ["driver reload: 570 -> 580"]}})
    proc, events = _run(project, fleet)
    assert proc.returncode == 0, proc.stdout[-3000:]
    n2 = _of(events, "n2")
    rolled = n2[n2.index("drain"):]
    assert rolled.index("gpudirect_mlnx_ofed") < rolled.index("gpudirect_nvidia_driver") < rolled.index("gpudirect_peermem") \
        < rolled.index("reboot") < rolled.index("verify"), rolled
    assert not {"gpudirect_os_release_pin", "gpudirect_host_prereqs", "gpudirect_pcie_acs"} & set(n2), n2
    assert rolled[-3:] == ["resume", "record", "unlock"]
    assert "n2: the stages os_pin, pcie_acs are left out: the node matches its converged-state record" in proc.stdout
