"""Every module in library/ has documentation ansible-doc can read (issue #31).

``ansible-doc gpudirect_module_signing`` failed with "mapping values are not
allowed in this context": a plain YAML scalar in RETURN held ``: ``. Nothing
read the docs, so nothing noticed. Two checks per module:

* ``ansible-doc -M library -t module --json NAME`` exits 0 and returns the
  module's DOCUMENTATION, EXAMPLES and RETURN; it runs from a folder that is not
  the repository, so the project's ansible.cfg plays no part;
* DOCUMENTATION, EXAMPLES and RETURN each load with ``yaml.safe_load`` and hold
  what ansible-doc and ``ansible-test sanity`` (validate-modules) want: module
  name, short_description, description, author, options with description and
  type, RETURN entries with description, returned and type (nested entries
  under ``contains`` with description and type), EXAMPLES a list of tasks.
"""

import ast
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from hang_guard import HANG_GUARD_S

LIBRARY = os.path.join(ROOT, "library")
MODULES = sorted(f[:-3] for f in os.listdir(LIBRARY) if f.endswith(".py") and not f.startswith("_"))
ANSIBLE_DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")


def doc_strings(name):
    """The module's DOCUMENTATION, EXAMPLES and RETURN strings, read without importing it."""
    with open(os.path.join(LIBRARY, name + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")):
            found[node.targets[0].id] = node.value.value
    return found


def return_problems(entries, where, top):
    problems = []
    for key, entry in entries.items():
        if not isinstance(entry, dict):
            problems.append("RETURN %s%s is not a mapping" % (where, key))
            continue
        for field in ("description", "returned", "type") if top else ("description", "type"):
            if field not in entry:
                problems.append("RETURN %s%s has no %s" % (where, key, field))
        if isinstance(entry.get("contains"), dict):
            problems += return_problems(entry["contains"], where + key + ".", False)
    return problems


def test_every_module_is_listed():
    # a guard against a parametrization over nothing
    assert len(MODULES) >= 14, MODULES
    assert "gpudirect_module_signing" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doc_strings_load_and_hold_what_ansible_doc_needs(name):
    strings = doc_strings(name)
    assert set(strings) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, "%s lacks %s" % (
        name, {"DOCUMENTATION", "EXAMPLES", "RETURN"} - set(strings))
    loaded = {}
    for var, text in strings.items():
        try:
            loaded[var] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            pytest.fail("%s %s is not valid YAML: %s" % (name, var, e))
    doc = loaded["DOCUMENTATION"]
    problems = []
    if doc.get("module") != name:
        problems.append("DOCUMENTATION module is %r" % doc.get("module"))
    for field in ("short_description", "description", "author"):
        if not doc.get(field):
            problems.append("DOCUMENTATION has no %s" % field)
    for opt, spec in (doc.get("options") or {}).items():
        for field in ("description", "type"):
            if not (isinstance(spec, dict) and spec.get(field)):
                problems.append("option %s has no %s" % (opt, field))
    if not isinstance(loaded["RETURN"], dict) or not loaded["RETURN"]:
        problems.append("RETURN documents no value")
    else:
        problems += return_problems(loaded["RETURN"], "", True)
    examples = loaded["EXAMPLES"]
    if not (isinstance(examples, list) and examples and all(isinstance(t, dict) and t.get("name") for t in examples)):
        problems.append("EXAMPLES is not a list of named tasks")
    assert not problems, "%s: %s" % (name, "; ".join(problems))


@pytest.mark.parametrize("name", MODULES)
def test_ansible_doc_reads_the_module(name, tmp_path):
    env = dict(os.environ)
    for var in ("ANSIBLE_CONFIG", "ANSIBLE_LIBRARY", "ANSIBLE_DOC_FRAGMENT_PLUGINS"):
        env.pop(var, None)
    # the shared attribute blocks (extends_documentation_fragment: gpudirect_attributes...), which
    # ./ansible.cfg's doc_fragment_plugins names for runs from the checkout
    env["ANSIBLE_DOC_FRAGMENT_PLUGINS"] = os.path.join(ROOT, "doc_fragments")
    env["ANSIBLE_NOCOLOR"] = "1"
    proc = subprocess.run([ANSIBLE_DOC, "-M", LIBRARY, "-t", "module", "--json", name],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, "ansible-doc %s failed:\n%s" % (name, proc.stderr)
    data = json.loads(proc.stdout)
    assert name in data, sorted(data)
    entry = data[name]
    assert entry["doc"]["module"] == name
    assert entry["doc"]["short_description"]
    assert entry["examples"] and entry["examples"].strip()
    assert entry["return"], "%s: ansible-doc shows no RETURN values" % name
