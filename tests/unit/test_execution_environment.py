"""execution-environment.yml (issue #31 outcome 3): an ansible-builder v3 definition whose
files exist, that installs what runs the toolkit and nothing that only tests it.

Not built here (no container build in the unit tier): the checks read the files.
"""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# what tests and lints the toolkit; none of it runs a playbook
TEST_ONLY = {"molecule", "molecule-plugins", "pytest", "pytest-testinfra", "pytest-xdist", "ansible-lint", "yamllint",
             "virt-firmware", "voluptuous", "antsibull-docs-parser"}


def _load(name):
    with open(os.path.join(ROOT, name)) as handle:
        return yaml.safe_load(handle)


def _pins(name):
    pins = {}
    with open(os.path.join(ROOT, name)) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-r"):
                continue
            found = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)", line)
            assert found, "%s: %r is not an exact pin" % (name, line)
            pins[found.group(1).lower()] = found.group(3)
    return pins


def test_it_is_a_v3_definition_whose_files_exist():
    ee = _load("execution-environment.yml")
    assert ee["version"] == 3
    assert ee["images"]["base_image"]["name"]
    deps = ee["dependencies"]
    assert deps["python"] == "requirements.txt"
    for key in ("python", "system"):
        assert os.path.isfile(os.path.join(ROOT, deps[key])), deps[key]
    assert "galaxy" not in deps or os.path.isfile(os.path.join(ROOT, deps["galaxy"]))
    # the same ansible-core as the run set
    assert deps["ansible_core"]["package_pip"] == "ansible-core==" + _pins("requirements.txt")["ansible-core"]
    assert deps["ansible_runner"]["package_pip"].startswith("ansible-runner")


def test_the_run_set_holds_only_what_runs_the_toolkit():
    run = _pins("requirements.txt")
    assert set(run) == {"ansible", "ansible-core"}, run
    assert not TEST_ONLY & set(run)
    with open(os.path.join(ROOT, "requirements-test.txt")) as handle:
        assert "-r requirements.txt" in handle.read()
    assert TEST_ONLY >= set(_pins("requirements-test.txt")), _pins("requirements-test.txt")


def test_the_system_packages_are_an_ssh_client_for_each_platform():
    with open(os.path.join(ROOT, "bindep.txt")) as handle:
        lines = [line.split("#", 1)[0].strip() for line in handle]
    lines = [line for line in lines if line]
    assert lines and all(re.fullmatch(r"[a-z0-9.+\-]+ \[platform:(rpm|dpkg)\]", line) for line in lines), lines
    assert {line.split()[0] for line in lines} == {"openssh-clients", "openssh-client"}


def test_the_pinned_ansible_package_holds_the_collections_requirements_yml_lists():
    """No Galaxy step in the image: the `ansible` package of requirements.txt bundles them."""
    import ansible_collections

    base = list(ansible_collections.__path__)[0]
    for collection in _load("requirements.yml")["collections"]:
        namespace, name = collection["name"].split(".")
        assert os.path.isfile(os.path.join(base, namespace, name, "MANIFEST.json")), collection["name"]
