"""Every condition in the project's YAML is a string (or a plain boolean).

A condition written as a plain YAML scalar that holds ': ' (a message quoted inside a
`search` test, say) is read by YAML as a one-key mapping, not as a string. yamllint and
ansible-lint accept it; Ansible fails the task only when it runs, with "Conditional
expressions must be strings" and nothing about which check it was. The Secure Boot VM
scenario lost a 40-minute run to two such assertions. This reads every playbook, role,
scenario and inventory file and names each condition that is not a string."""

import os

import pytest
import yaml

from conftest import ROOT

CONDITION_KEYS = ("that", "when", "failed_when", "changed_when", "until")
TREES = ("site.yml", "playbooks", "roles", "molecule", "inventory")


def _yaml_files():
    for top in TREES:
        path = os.path.join(ROOT, top)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, _dirs, files in os.walk(path):
            for name in sorted(files):
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(dirpath, name)


def _bad_conditions(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITION_KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, (str, bool)):
                        yield key, item
            yield from _bad_conditions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _bad_conditions(item)


def test_the_check_finds_a_condition_that_yaml_read_as_a_mapping():
    doc = yaml.safe_load("- assert:\n    that:\n      - x is search('a: b')\n")
    assert list(_bad_conditions(doc)) == [("that", {"x is search('a": "b')"})]


@pytest.mark.parametrize("path", sorted(_yaml_files()), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_condition_is_a_string(path):
    with open(path) as handle:
        try:
            docs = list(yaml.safe_load_all(handle))
        except yaml.YAMLError:
            pytest.skip("not plain YAML (a Jinja template); yamllint reads it")
    bad = [item for doc in docs for item in _bad_conditions(doc)]
    assert not bad, "quote these conditions (YAML read each as a mapping): %s" % bad
