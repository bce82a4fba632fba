"""The project builds, installs and runs as the collection gpudirect.rdma (issue #31).

scripts/build-collection.sh stages the repository in a collection's shape (library/ ->
plugins/modules/, module_utils/ -> plugins/module_utils/, filter_plugins/ -> plugins/filter/,
callback_plugins/ -> plugins/callback/, doc_fragments/ -> plugins/doc_fragments/, and
tests/sanity/'s ansible-test ignore files) with the imports of the project's module_utils, the
modules' doc fragment names and the roles' short filter names rewritten to the collection's names,
and runs
``ansible-galaxy collection build`` there. This test:

* builds the tarball into a temporary folder and checks what it holds (and that the
  repository's own files were not rewritten);
* installs it with ``ansible-galaxy collection install TARBALL -p TMP/collections``;
* reads a module's documentation from the installed collection with ansible-doc (its doc fragments
  resolve by the collection's names);
* runs, from TMP (not the repository: no project ansible.cfg, an empty ANSIBLE_CONFIG, no
  ANSIBLE_LIBRARY/ROLES_PATH/FILTER_PLUGINS...), a play on localhost that uses FQCN names only:
  the module gpudirect.rdma.gpudirect_facts (it only reads, and works without GPUs), the
  filter gpudirect.rdma.gpudirect_input_errors, and the read-only plan entry point of the role
  gpudirect.rdma.gpudirect_pcie_acs (its validate step runs the collection's filter, its plan step the
  collection's gpudirect_pcie_acs module by its short name, in check mode), and the converged-state
  check gpudirect.rdma.gpudirect_state, whose digests read the collection's own files;

and fails when the build, the install or any task of the play fails.
"""

import hashlib
import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT
from hang_guard import HANG_GUARD_S

NAMESPACE, NAME = "gpudirect", "rdma"
FQCN = NAMESPACE + "." + NAME
BIN = os.path.dirname(sys.executable)

PLAY = """\
---
- name: The collection, by FQCN names only
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Module
      gpudirect.rdma.gpudirect_facts:
      register: facts

    - name: Filter
      ansible.builtin.set_fact:
        input_errors_bad: "{{ [{'knob': 'k', 'value': '/etc/../x', 'rule': 'path', 'under': ['/etc']}] | gpudirect.rdma.gpudirect_input_errors }}"
        input_errors_good: "{{ [{'knob': 'k', 'value': '/etc/x', 'rule': 'path', 'under': ['/etc']}] | gpudirect.rdma.gpudirect_input_errors }}"

    - name: Role
      ansible.builtin.include_role:
        name: gpudirect.rdma.gpudirect_pcie_acs
        tasks_from: plan

    # the converged-state check (site.yml's second play) digests the toolkit's own files, which
    # the installed collection keeps under plugins/ (issue #45: it failed "not the toolkit's directory")
    - name: State check
      ansible.builtin.include_role:
        name: gpudirect.rdma.gpudirect_state

    - name: Results
      ansible.builtin.debug:
        msg:
          state_inputs: "{{ gpudirect_state_inputs | from_json }}"
          facts_keys: "{{ facts.ansible_facts.gpudirect.keys() | list }}"
          gpus: "{{ facts.ansible_facts.gpudirect.gpus }}"
          input_errors_bad: "{{ input_errors_bad }}"
          input_errors_good: "{{ input_errors_good }}"
          gpudirect_pcie_acs_plan: "{{ gpudirect_pcie_acs_plan }}"
"""


def _clean_env(tmp, **extra):
    """The environment of a user outside the repository: no ANSIBLE_* of the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    cfg = tmp / "cfg" / "empty.cfg"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text("[defaults]\n")
    env["ANSIBLE_CONFIG"] = str(cfg)
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp / "ansible-local")
    env["ANSIBLE_HOME"] = str(tmp / "ansible-home")
    env.update(extra)
    return env


def _run(cmd, cwd, env, what):
    proc = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, "%s failed (rc %d):\n%s\n%s" % (what, proc.returncode, proc.stdout[-6000:],
                                                                proc.stderr[-6000:])
    return proc


def _digest(folder):
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("collection")
    before = {d: _digest(os.path.join(ROOT, d)) for d in ("library", "module_utils", "plugin_utils", "filter_plugins")}
    proc = _run(["bash", os.path.join(ROOT, "scripts", "build-collection.sh"), str(tmp / "dist")], tmp,
                _clean_env(tmp), "scripts/build-collection.sh")
    tarball = proc.stdout.strip().splitlines()[-1]
    after = {d: _digest(os.path.join(ROOT, d)) for d in before}
    return tmp, tarball, before, after


@pytest.fixture(scope="module")
def installed(built):
    tmp, tarball, _, _ = built
    collections = tmp / "collections"
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", tarball, "-p", str(collections)],
         tmp, _clean_env(tmp), "ansible-galaxy collection install")
    return tmp, collections


def test_tarball_holds_roles_playbooks_and_plugins(built):
    _, tarball, before, after = built
    assert os.path.basename(tarball) == "%s-%s-" % (NAMESPACE, NAME) + tarball.rsplit("-", 1)[1]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))
        modules = {n: tar.extractfile(n).read().decode() for n in names
                   if n.startswith("plugins/modules/") and n.endswith(".py")}
    assert manifest["collection_info"]["namespace"] == NAMESPACE
    assert manifest["collection_info"]["name"] == NAME
    for required in ("LICENSE", "README.md", "meta/runtime.yml", "playbooks/site.yml",
                     "roles/gpudirect_pcie_acs/tasks/plan.yml", "plugins/modules/gpudirect_facts.py",
                     "plugins/module_utils/gpudirect_pcie_acs.py", "plugins/filter/gpudirect_input_rules.py",
                     "plugins/plugin_utils/gpudirect_input_rules.py",
                     "plugins/callback/gpudirect_left_behind.py", "plugins/doc_fragments/gpudirect_attributes.py"):
        assert required in names, required
    assert any(n.startswith("tests/sanity/ignore-") for n in names), sorted(n for n in names if n.startswith("tests"))
    library = sorted(f for f in os.listdir(os.path.join(ROOT, "library")) if f.endswith(".py"))
    assert sorted(os.path.basename(n) for n in modules) == library
    # the controller-only helpers are not among the module_utils a module could be shipped with
    assert not any(n.startswith("plugins/module_utils/") and n.endswith("/gpudirect_input_rules.py") for n in names)
    assert not any(n.startswith(("molecule/", "inventory/", "scripts/", ".venv/", "library/", "module_utils/",
                                 "plugin_utils/", "filter_plugins/", "doc_fragments/")) for n in names), sorted(names)[:20]
    assert not any(n.startswith("tests/") and not n.startswith("tests/sanity") for n in names), \
        sorted(n for n in names if n.startswith("tests/"))
    # the staged modules import the collection's module_utils, none the playbook-repo names
    for n, text in modules.items():
        assert "from ansible.module_utils.gpudirect_" not in text, n
        assert "from ansible.module_utils import gpudirect_" not in text, n
    assert "from ansible_collections.gpudirect.rdma.plugins.module_utils.gpudirect_pcie_acs import" in \
        modules["plugins/modules/gpudirect_pcie_acs.py"]
    # the doc fragments of the project, by the collection's names
    assert "  - gpudirect.rdma.gpudirect_attributes.read_only\n" in modules["plugins/modules/gpudirect_plan_nvidia_driver.py"]
    for n, text in modules.items():
        assert "  - gpudirect_attributes" not in text, n
    # ... and the repository's own files stay as they are
    assert before == after


def test_ansible_doc_resolves_the_doc_fragments_of_the_installed_collection(installed):
    tmp, collections = installed
    env = _clean_env(tmp, ANSIBLE_COLLECTIONS_PATH=str(collections))
    proc = _run([os.path.join(BIN, "ansible-doc"), "-t", "module", "--json", FQCN + ".gpudirect_plan_nvidia_driver"],
                tmp, env, "ansible-doc of the installed collection's module")
    attributes = json.loads(proc.stdout)[FQCN + ".gpudirect_plan_nvidia_driver"]["doc"]["attributes"]
    assert attributes["check_mode"]["support"] == "full", attributes
    assert attributes["diff_mode"]["support"] == "none", attributes
    assert attributes["platform"]["platforms"] == "linux", attributes


def test_fqcn_play_runs_module_filter_and_role_from_the_installed_collection(installed):
    tmp, collections = installed
    assert (collections / "ansible_collections" / NAMESPACE / NAME / "MANIFEST.json").is_file()
    assert not (tmp / "ansible.cfg").exists()
    play = tmp / "play.yml"
    play.write_text(PLAY)
    env = _clean_env(tmp, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = _run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "--check",
                 "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                tmp, env, "the FQCN play")
    out = json.loads(proc.stdout)
    assert out["stats"]["localhost"]["failures"] == 0
    assert out["stats"]["localhost"]["unreachable"] == 0
    tasks = {t["task"]["name"]: t["hosts"].get("localhost", {}) for play_ in out["plays"] for t in play_["tasks"]}
    role_tasks = [name for name in tasks if name.startswith(FQCN + ".gpudirect_pcie_acs : ")]
    assert any("Read ACS" in name for name in role_tasks), sorted(tasks)

    result = tasks["Results"]["msg"]
    assert {"gpus", "kernel", "iommu"} <= set(result["facts_keys"]), result["facts_keys"]
    assert isinstance(result["gpus"], list)
    assert len(result["input_errors_bad"]) == 1 and "k=" in result["input_errors_bad"][0], result["input_errors_bad"]
    assert result["input_errors_good"] == []
    # one digest per install stage, each over files of the installed collection (plugins/ included)
    assert sorted(result["state_inputs"]) == ["drivers", "os_pin", "pcie_acs", "verify"], result["state_inputs"]
    assert all(len(d) == 64 for d in result["state_inputs"].values()), result["state_inputs"]
    plan = result["gpudirect_pcie_acs_plan"]
    assert {"acs", "changes", "disruption", "bridges"} <= set(plan), plan
    assert plan["acs"]["failed"] is False
