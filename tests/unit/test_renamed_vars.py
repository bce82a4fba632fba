"""The roles renamed in 1.0.0 (issue #31, outcome 4) still take their variables' old names,
with a deprecation warning, until 2.0.0: the table (plugin_utils/gpudirect_renamed.py),
the filter gpudirect_renamed_vars and the first task of each entry point
(roles/gpudirect_*/tasks/renamed.yml)."""

import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from conftest import ROOT
from hang_guard import HANG_GUARD_S

sys.path.insert(0, os.path.join(ROOT, "filter_plugins"))

import gpudirect_renamed as flt  # noqa: E402  (filter_plugins/, which puts plugin_utils/ on the path)
from ansible.module_utils import gpudirect_renamed as table  # noqa: E402

ROLES = sorted(table.RENAMED)
OLD_ROLES = ("host_prereqs", "kernel_update", "mlnx_ofed", "nic_config", "nvidia_driver", "os_release_pin", "pcie_acs")
# read by playbooks/kernel_update.yml (play keywords), not in the role's argument_specs
PLAYBOOK_KNOBS = {"kernel_update_serial", "kernel_update_max_fail_percentage"}
# kept under their names: the deprecated aliases of gpudirect_drain_command / _resume_command
DEPRECATED_ALIASES = {"kernel_update_drain_argv", "kernel_update_resume_argv"}
# variables added after the rename: they never had a bare name, so they have no old one
ADDED_AFTER_RENAME = {"gpudirect_nic_config_firmware", "gpudirect_nic_config_firmware_policy",
                      "gpudirect_nic_config_firmware_allow_psid_change",
                      "gpudirect_pcie_acs_route", "gpudirect_pcie_acs_clear"}


def _spec_options(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    return {name for entry in specs.values() for name in (entry.get("options") or {})}


def test_the_table_has_the_seven_renamed_roles():
    assert ROLES == sorted("gpudirect_" + r for r in OLD_ROLES)
    for role in ROLES:
        assert os.path.isdir(os.path.join(ROOT, "roles", role)), role
        assert not os.path.exists(os.path.join(ROOT, "roles", role[len("gpudirect_"):])), role


@pytest.mark.parametrize("role", ROLES)
def test_every_public_variable_has_its_old_name_in_the_table_and_back(role):
    old_prefix = role[len("gpudirect_"):] + "_"
    options = _spec_options(role) - DEPRECATED_ALIASES - ADDED_AFTER_RENAME
    assert all(o.startswith(role + "_") for o in options), sorted(options)
    olds = set(table.RENAMED[role])
    assert all(o.startswith(old_prefix) for o in olds), sorted(olds)
    assert {table.new_name(o) for o in olds - PLAYBOOK_KNOBS} == options
    assert len(olds) == len(table.RENAMED[role]), "a name twice in the table"


@pytest.mark.parametrize("role", ROLES)
def test_every_entry_point_takes_the_old_names_first(role):
    """Each entry point of argument_specs (main, plan, ...) starts with tasks/renamed.yml,
    before the role's checks (tasks/validate.yml) read a variable."""
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        entries = yaml.safe_load(handle)["argument_specs"]
    for entry in entries:
        with open(os.path.join(ROOT, "roles", role, "tasks", entry + ".yml"), encoding="utf-8") as handle:
            tasks = yaml.safe_load(handle)
        assert tasks[0].get("ansible.builtin.import_tasks") == "renamed.yml", (role, entry, tasks[0])
    with open(os.path.join(ROOT, "roles", role, "tasks", "renamed.yml"), encoding="utf-8") as handle:
        [task] = yaml.safe_load(handle)
    assert "gpudirect_renamed_vars('%s')" % role in task["loop"]


@pytest.fixture
def deprecations(monkeypatch):
    said = []
    monkeypatch.setattr(flt._DISPLAY, "deprecated", lambda msg, **kw: said.append((msg, kw)))
    return said


def test_old_name_only_is_taken_under_the_new_name_with_a_deprecation(deprecations):
    got = flt.gpudirect_renamed_vars({"nvidia_driver_branch": "570", "inventory_hostname": "n1"},
                                     "gpudirect_nvidia_driver")
    assert got == [{"old": "nvidia_driver_branch", "new": "gpudirect_nvidia_driver_branch", "value": "570"}]
    [(msg, kw)] = deprecations
    assert "nvidia_driver_branch" in msg and "gpudirect_nvidia_driver_branch" in msg and "2.0.0" in msg
    assert kw["version"] == "2.0.0"
    assert "ignored" not in msg


def test_new_name_only_is_left_alone(deprecations):
    assert flt.gpudirect_renamed_vars({"gpudirect_nvidia_driver_branch": "570"}, "gpudirect_nvidia_driver") == []
    assert deprecations == []


def test_both_names_the_new_one_wins_and_the_warning_says_so(deprecations):
    got = flt.gpudirect_renamed_vars({"nvidia_driver_branch": "550", "gpudirect_nvidia_driver_branch": "570"},
                                     "gpudirect_nvidia_driver")
    assert got == []
    [(msg, _)] = deprecations
    assert "gpudirect_nvidia_driver_branch is set as well" in msg and "nvidia_driver_branch is ignored" in msg
    assert "2.0.0" in msg


def test_a_value_an_earlier_entry_point_copied_is_not_copied_again_nor_called_ignored(deprecations):
    """main.yml includes plan.yml, and the plan pass runs before the stage: each starts with renamed.yml.
    After the first copied the old value (set_fact), the new name holds the same value: nothing to
    copy, and the old name was not ignored."""
    got = flt.gpudirect_renamed_vars({"nvidia_driver_branch": "570", "gpudirect_nvidia_driver_branch": "570"},
                                     "gpudirect_nvidia_driver")
    assert got == []
    [(msg, _)] = deprecations
    assert "rename it to gpudirect_nvidia_driver_branch" in msg and "ignored" not in msg


def test_none_set_and_other_roles_names_are_not_taken(deprecations):
    variables = {"pcie_acs_state": "enabled", "nvidia_driver_no_such_knob": 1, "inventory_hostname": "n1"}
    assert flt.gpudirect_renamed_vars(variables, "gpudirect_nvidia_driver") == []
    assert flt.gpudirect_renamed_vars({}, "gpudirect_pcie_acs") == []
    assert deprecations == []


def test_a_role_that_was_not_renamed_is_refused():
    with pytest.raises(Exception, match="gpudirect_renamed_vars: gpudirect_verify is not a renamed role"):
        flt.gpudirect_renamed_vars({}, "gpudirect_verify")


def test_an_old_inventory_variable_reaches_the_role_under_its_new_name(tmp_path):
    """The real role on this machine, entry point tasks_from: plan: n1 sets only the old name
    (a bad value, which the role's own check rejects under the new name), n2 sets both (the
    new one, good, wins). One deprecation warning each, naming old, new and 2.0.0."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(textwrap.dedent("""\
        all:
          hosts:
            n1:
              pcie_acs_direct_nic: bogus
            n2:
              pcie_acs_direct_nic: also-bogus
              gpudirect_pcie_acs_direct_nic: skip
          vars:
            ansible_connection: local
            ansible_python_interpreter: %s
        """ % sys.executable))
    playbook = tmp_path / "play.yml"
    playbook.write_text(textwrap.dedent("""\
        - name: A renamed role's entry point with old variable names
          hosts: all
          gather_facts: false
          tasks:
            - name: The plan entry point (renamed variables first, then the role's checks)
              ansible.builtin.include_role:
                name: gpudirect_pcie_acs
                tasks_from: plan
            - name: Say the value the role has
              ansible.builtin.debug:
                msg: "direct_nic={{ gpudirect_pcie_acs_direct_nic }}"
        """))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ROLES_PATH=os.path.join(ROOT, "roles"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_DEPRECATION_WARNINGS="True")
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inventory), "--check",
                           str(playbook)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)
    out = " ".join(proc.stdout.split())
    # n1: the old name reached the role's own check under the new name
    assert 'gpudirect_pcie_acs_direct_nic must be auto' in out and 'not "bogus"' in out, proc.stdout
    assert "also-bogus" not in out.replace("pcie_acs_direct_nic: also-bogus", ""), proc.stdout
    assert "[DEPRECATION WARNING]" in out, proc.stdout
    assert ("pcie_acs_direct_nic is the name of a variable of the role pcie_acs before 1.0.0 (now gpudirect_pcie_acs): "
            "it is accepted until 2.0.0, rename it to gpudirect_pcie_acs_direct_nic") in out, proc.stdout
    assert ("gpudirect_pcie_acs_direct_nic is set as well, so the value of gpudirect_pcie_acs_direct_nic is used "
            "and pcie_acs_direct_nic is ignored") in out, proc.stdout
    assert "n1 : ok=" in out and "failed=1" in out.split("n1 : ok=")[1][:80], proc.stdout
    # n2 passed the checks and ran the read-only plan with the new name's value
    assert "direct_nic=skip" in out and "n2 : ok=" in out and "failed=0" in out.split("n2 : ok=")[1][:80], proc.stdout
