"""Per-stage digests of the controller's inputs (filter_plugins/gpudirect_inputs.py gpudirect_stage_digests,
module_utils/gpudirect_state.py changed_stages / node_differences, roles/gpudirect_state): a toolkit update
or a knob of one role re-runs only the stages it touches (issue #30, outcome 6)."""

import json
import os
import re
import shutil

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_state as st
from gpudirect_inputs import stage_digests, stage_files  # filter_plugins/gpudirect_inputs.py

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(ROOT, "roles", "gpudirect_state", "vars", "main.yml")) as _fh:
    STAGES = yaml.safe_load(_fh)["__gpudirect_state_stages"]


@pytest.fixture(scope="module")
def toolkit(tmp_path_factory):
    """A copy of the toolkit's code to change files in."""
    root = tmp_path_factory.mktemp("toolkit")
    for part in ("playbooks", "roles", "library", "module_utils", "plugin_utils", "filter_plugins"):
        shutil.copytree(os.path.join(ROOT, part), str(root / part), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "site.yml"), str(root / "site.yml"))
    return root


def _touch(path):
    with open(path, "a") as handle:
        handle.write("\n# changed\n")


def test_each_stage_reaches_its_modules_and_their_module_utils():
    drivers = stage_files(ROOT, **STAGES["drivers"])
    assert "roles/gpudirect_nvidia_driver/tasks/main.yml" in drivers and "library/gpudirect_plan_nvidia_driver.py" in drivers
    # imported by gpudirect_nvidia_plan, which gpudirect_plan_nvidia_driver imports: reached transitively
    assert "module_utils/gpudirect_nvlink_plan.py" in drivers and "module_utils/gpudirect_nvidia_gpus.py" in drivers
    assert "library/gpudirect_pcie_acs.py" not in drivers and not any(f.startswith("roles/gpudirect_pcie_acs/") for f in drivers)
    acs = stage_files(ROOT, **STAGES["pcie_acs"])
    assert "library/gpudirect_pcie_acs.py" in acs and "module_utils/gpudirect_rdma_topo.py" in acs
    assert "library/gpudirect_plan_nvidia_driver.py" not in acs
    assert not any(f.endswith(".md") for f in drivers + acs)


def test_a_change_in_one_role_changes_only_its_stage(toolkit):
    before = stage_digests({}, str(toolkit), STAGES)
    _touch(str(toolkit / "roles" / "gpudirect_nvidia_driver" / "tasks" / "imex.yml"))
    after = stage_digests({}, str(toolkit), STAGES)
    assert [s for s in STAGES if before[s] != after[s]] == ["drivers"]
    _touch(str(toolkit / "library" / "gpudirect_pcie_acs.py"))
    again = stage_digests({}, str(toolkit), STAGES)
    assert [s for s in STAGES if after[s] != again[s]] == ["pcie_acs"]
    # a README is documentation: no stage
    _touch(str(toolkit / "roles" / "gpudirect_pcie_acs" / "README.md"))
    assert stage_digests({}, str(toolkit), STAGES) == again


def test_shared_module_utils_change_every_stage_that_reaches_them(toolkit):
    before = stage_digests({}, str(toolkit), STAGES)
    _touch(str(toolkit / "module_utils" / "gpudirect_pci.py"))
    after = stage_digests({}, str(toolkit), STAGES)
    reached = [s for s in STAGES if "module_utils/gpudirect_pci.py" in stage_files(str(toolkit), **STAGES[s])]
    assert reached and [s for s in STAGES if before[s] != after[s]] == reached


def test_variables_count_for_the_stage_of_their_role():
    base = stage_digests({"gpudirect_nvidia_driver_branch": "580", "gpudirect_pcie_acs_direct_nic": "auto"}, ROOT, STAGES)
    driver = stage_digests({"gpudirect_nvidia_driver_branch": "590", "gpudirect_pcie_acs_direct_nic": "auto"}, ROOT, STAGES)
    assert [s for s in STAGES if base[s] != driver[s]] == ["drivers"]
    shared = stage_digests({"gpudirect_nvidia_driver_branch": "580", "gpudirect_pcie_acs_direct_nic": "auto", "gpudirect_x": 1},
                           ROOT, STAGES)
    assert all(base[s] != shared[s] for s in STAGES)


def test_bad_input_is_named(tmp_path):
    with pytest.raises(AnsibleFilterError, match="expected a dict of variables"):
        stage_digests([], ROOT, STAGES)
    with pytest.raises(AnsibleFilterError, match="neither the toolkit.s checkout .site.yml at its top. nor the installed collection"):
        stage_digests({}, str(tmp_path), STAGES)
    with pytest.raises(AnsibleFilterError, match="no role 'nope'"):
        stage_digests({}, ROOT, {"x": {"roles": ["nope"], "playbooks": []}})
    with pytest.raises(AnsibleFilterError, match="expected the stages"):
        stage_digests({}, ROOT, {})


def test_every_role_a_stage_playbook_runs_belongs_to_that_stage():
    """The map in roles/gpudirect_state/vars/main.yml against what the stage task files import; the drain,
    reboot and state roles are the run's own machinery (lock, reboot requests, the record), not what converges
    the node."""
    machinery = {"gpudirect_drain", "gpudirect_reboot", "gpudirect_state"}
    for name, stage in STAGES.items():
        roles = set()
        for playbook in stage["playbooks"]:
            with open(os.path.join(ROOT, playbook)) as handle:
                roles.update(re.findall(r"^\s+name:\s+(\w+)\s*$", handle.read(), re.M))
        named = {r for r in roles if os.path.isdir(os.path.join(ROOT, "roles", r))} - machinery
        assert named and named <= set(stage["roles"]), (name, named)


# --- the comparison ---------------------------------------------------------------------

FP = {"format": 2, "kernel": {"running": "6.1.0-28-amd64"}}


def test_changed_stages_and_node_differences():
    old = json.dumps({"drivers": "a", "os_pin": "b", "pcie_acs": "c", "verify": "d"}, sort_keys=True)
    new = json.dumps({"drivers": "a2", "os_pin": "b", "pcie_acs": "c", "verify": "d"}, sort_keys=True)
    assert st.changed_stages(old, new) == ["drivers"]
    assert st.changed_stages(new, new) == []
    # a record of the one-digest toolkit: every stage counts as changed, once
    assert st.changed_stages("0" * 64, new) == ["drivers", "os_pin", "pcie_acs", "verify"]
    assert st.changed_stages(None, new) == ["drivers", "os_pin", "pcie_acs", "verify"]
    assert st.changed_stages(old, "0" * 64) == []
    recorded, current = {"inputs": old, "fingerprint": FP}, {"inputs": new, "fingerprint": FP}
    assert st.node_differences(recorded, current) == []
    assert st.differences(recorded, current) == [
        "the controller's inputs changed (inventory variables or toolkit files) of stage drivers"]
    moved = {"inputs": new, "fingerprint": dict(FP, kernel={"running": "6.1.0-30-amd64"})}
    assert st.node_differences(recorded, moved) == ["running kernel: 6.1.0-28-amd64 -> 6.1.0-30-amd64"]


@pytest.mark.parametrize("text", ["", "null", "[]", "{}", '{"drivers": 1}', "{not json"])
def test_inputs_that_are_not_stage_digests(text):
    assert st.stage_inputs(text) is None


def test_the_installed_collection_is_read_where_it_keeps_its_code(tmp_path):
    """Issue #45: from an installed collection (MANIFEST.json, playbooks/site.yml, plugins/ in
    Ansible's layout, imports by the collection's names) the digests follow the same references
    as in a checkout: the module a role names, the helpers it imports, the filter it uses."""
    root = tmp_path / "ansible_collections" / "gpudirect" / "rdma"
    for rel, text in {
        "MANIFEST.json": "{}",
        "playbooks/site.yml": "---\n",
        "playbooks/x.yml": "---\n",
        "roles/gpudirect_x/tasks/main.yml": "- gpudirect_x_mod: {}\n- debug: {msg: \"{{ 1 | gpudirect.rdma.gpudirect_x_f }}\"}\n",
        "plugins/modules/gpudirect_x_mod.py":
            "from ansible_collections.gpudirect.rdma.plugins.module_utils.gpudirect_x_util import f\n",
        "plugins/module_utils/gpudirect_x_util.py": "from ansible_collections.gpudirect.rdma.plugins.module_utils import gpudirect_x_deep\n",
        "plugins/module_utils/gpudirect_x_deep.py": "",
        "plugins/module_utils/gpudirect_unused.py": "",
        "plugins/filter/gpudirect_x_filters.py": "class FilterModule(object):\n    def filters(self):\n        return {'gpudirect_x_f': len}\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    files = stage_files(str(root), roles=["gpudirect_x"], playbooks=["playbooks/x.yml"])
    assert files == ["playbooks/x.yml", "plugins/filter/gpudirect_x_filters.py", "plugins/module_utils/gpudirect_x_deep.py",
                     "plugins/module_utils/gpudirect_x_util.py", "plugins/modules/gpudirect_x_mod.py",
                     "roles/gpudirect_x/tasks/main.yml"]
    digests = stage_digests({}, str(root), {"x": {"roles": ["gpudirect_x"], "playbooks": ["playbooks/x.yml"]}})
    (root / "plugins/module_utils/gpudirect_x_deep.py").write_text("# changed\n")
    assert stage_digests({}, str(root), {"x": {"roles": ["gpudirect_x"], "playbooks": ["playbooks/x.yml"]}}) != digests
