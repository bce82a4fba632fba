"""Every conditional in the project's YAML is a string, as Ansible requires.

A plain YAML scalar that holds ": " is a mapping, not a string: the conditional
``- reasons | select('search', 'role: text') | list`` became {"reasons | ...'role":
"text') | list"} and Ansible 2.19 failed the task with "Conditional expressions must
be strings" (molecule/rdma/nic_firmware.yml, full run of 2026-11-29, after 600 s of
the scenario's last step). yamllint and ansible-lint accept such a file.
"""
import os

import pytest
import yaml

from conftest import ROOT

KEYS = ("that", "when", "failed_when", "changed_when", "until")
SKIP = {".venv", ".cache", ".git", "logs", "node_modules"}


def _yaml_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
        for name in files:
            if name.endswith((".yml", ".yaml")):
                yield os.path.join(top, name)


def _conditionals(node, where):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS:
                for item in value if isinstance(value, list) else [value]:
                    yield where + [key], item
            yield from _conditionals(value, where + [str(key)])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _conditionals(value, where + [str(i)])


def _non_strings(text, name):
    docs = list(yaml.safe_load_all(text))
    return ["%s %s: %r" % (name, "/".join(path), item) for doc in docs for path, item in _conditionals(doc, [])
            if not isinstance(item, (str, bool))]


def test_every_conditional_is_a_string():
    bad = []
    for path in _yaml_files():
        with open(path, encoding="utf-8") as f:
            try:
                bad.extend(_non_strings(f.read(), os.path.relpath(path, ROOT)))
            except yaml.YAMLError:
                continue  # not YAML Ansible reads (templates with Jinja blocks); yamllint judges those
    assert not bad, "conditionals that YAML read as something else than a string:\n" + "\n".join(bad)


@pytest.mark.parametrize("text, found", [
    ("- assert:\n    that:\n      - x | select('search', 'role: text') | list | length == 1\n", 1),
    ("- assert:\n    that:\n      - \"x | select('search', 'role: text') | list | length == 1\"\n", 0),
    ("- debug: {}\n  when: true\n", 0),
    ("- debug: {}\n  when:\n    - a: b\n", 1),
])
def test_the_check_sees_a_mapping_where_a_string_was_meant(text, found):
    assert len(_non_strings(text, "t.yml")) == found
