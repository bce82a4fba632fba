"""Every name a user-facing README puts in backticks exists (issue #31 outcome 5).

The READMEs drifted: a handler that did not exist, an include condition main.yml did not have,
a layout that listed 5 of 14 modules. This test reads each Markdown file the project ships to
users and checks the backticked names that can be checked against the tree:

* a path under a top-level folder of the project (``roles/x/tasks/y.yml``, ``library/``,
  ``tests/harness/vm/``) or a top-level file (``site.yml``): it exists (a ``*`` is a glob);
* ``roles/<name>``: the role exists;
* a ``<role>_<knob>`` name (the prefix is a role's name): a knob of that role (defaults/main.yml,
  meta/argument_specs.yml of any entry point, vars/main.yml), or a fact or result the project
  sets (``set_fact``, ``register``), or a module in library/;
* any other ``gpudirect_<x>`` name: a module in library/, a filter plugin, a role, or a
  variable or fact the project defines.

Names inside fenced code blocks are not read: they are examples, often of a site's own values.
"""

import glob
import os
import re

import pytest
import yaml

from conftest import ROOT

# Markdown files the project ships to users. Fixture and harness READMEs describe captures and
# test machinery for contributors and are not checked here.
DOCS = sorted(
    [p for p in ("README.md", "benchmarks/README.md", "molecule/README.md") if os.path.isfile(os.path.join(ROOT, p))]
    + [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))]
    + [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "playbooks", "**", "*.md"), recursive=True)]
    + [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "inventory", "**", "*.md"), recursive=True)]
)

TOP_DIRS = ("roles", "library", "module_utils", "plugin_utils", "filter_plugins", "playbooks", "molecule", "tests",
            "benchmarks", "scripts", "inventory", "callback_plugins", "doc_fragments", "meta")
TOP_FILES = ("site.yml", "galaxy.yml", "ansible.cfg", "requirements.yml", "requirements.txt",
             "requirements-test.txt", "bindep.txt", "execution-environment.yml", "CHANGELOG.md", "LICENSE")

# name -> why it is named although the tree does not define it
ALLOWED_PREFIXES = {
    "inventory/mysite/": "the README's example of a site's own inventory, which the admin creates",
}

ROLES = sorted(os.listdir(os.path.join(ROOT, "roles")))
MODULES = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "library")) if f.endswith(".py"))
FILTER_FILES = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "filter_plugins"))
                      if f.endswith((".py", ".yml")))

_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_IDENT = re.compile(r"^([a-z][a-z0-9_]*)(?:$|[.=:\[ ])")
_PATH = re.compile(r"^(?:\./)?((?:%s)/[\w.*/+-]*|%s)(?::\d+)?$" % (
    "|".join(TOP_DIRS), "|".join(re.escape(f) for f in TOP_FILES)))


def _yaml_files(*parts):
    found = []
    for part in parts:
        base = os.path.join(ROOT, part)
        if os.path.isfile(base):
            found.append(base)
        found += glob.glob(os.path.join(base, "**", "*.yml"), recursive=True)
    return found


def _keys(path):
    """Top-level keys of a YAML mapping file (a vars or defaults file)."""
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    return set(data) if isinstance(data, dict) else set()


def _role_knobs(role):
    base = os.path.join(ROOT, "roles", role)
    knobs = set()
    for sub in ("defaults/main.yml", "vars/main.yml"):
        if os.path.isfile(os.path.join(base, sub)):
            knobs |= _keys(os.path.join(base, sub))
    specs = os.path.join(base, "meta", "argument_specs.yml")
    if os.path.isfile(specs):
        with open(specs) as handle:
            for entry in (yaml.safe_load(handle) or {}).get("argument_specs", {}).values():
                knobs |= set((entry or {}).get("options") or {})
    return knobs


def _set_names():
    """Names the project sets at run time: set_fact keys, register names, group/host vars."""
    names = set()
    set_fact = re.compile(r"^(\s*)(?:ansible\.builtin\.)?set_fact:\s*\n((?:\1\s+.*\n|\s*\n)*)", re.M)
    for path in _yaml_files("roles", "playbooks", "site.yml", "inventory"):
        with open(path) as handle:
            text = handle.read()
        names |= set(re.findall(r"^\s*register:\s*([A-Za-z_]\w*)", text, re.M))
        for _indent, body in set_fact.findall(text):
            names |= set(re.findall(r"^\s+([A-Za-z_]\w*):", body, re.M))
        if "/inventory/" in path and "/group_vars/" in path or "/host_vars/" in path:
            names |= _keys(path)
    return names


def _code_names():
    """Identifiers the code uses outside comments: variables read with a default, tags,
    playbook vars, module_utils, callback and filter names."""
    names = set()
    for pattern in ("roles/**/*.yml", "playbooks/**/*.yml", "site.yml", "inventory/**/*.yml",
                    "filter_plugins/*", "library/*.py", "module_utils/*.py", "plugin_utils/*.py",
                    "callback_plugins/*.py"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            with open(path) as handle:
                text = "\n".join(line for line in handle.read().splitlines()
                                 if not line.lstrip().startswith("#"))
            names |= set(re.findall(r"[A-Za-z_]\w*", text))
    for folder in ("module_utils", "plugin_utils", "callback_plugins"):
        names |= {os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, folder))}
    return names


KNOBS = {role: _role_knobs(role) for role in ROLES}
SET_NAMES = _set_names() | _code_names()


def _role_of(name):
    """The role whose name prefixes ``name`` (the longest), or None."""
    owners = [r for r in ROLES if name.startswith(r + "_")]
    return max(owners, key=len) if owners else None


def problem(name, doc=""):
    """Why a backticked ``name`` (read in ``doc``) does not exist in the tree, or None."""
    name = name.strip()
    role_dir = os.path.dirname(doc) if re.match(r"^roles/[^/]+/README\.md$", doc) else None
    relative = re.match(r"^((?:tasks|defaults|meta|vars|handlers|templates|files)/[\w.*/-]+)$", name)
    if relative and role_dir:
        if not glob.glob(os.path.join(ROOT, role_dir, relative.group(1).rstrip("/"))):
            return "no such path in %s: %s" % (role_dir, relative.group(1))
        return None
    if any(name.startswith(p) for p in ALLOWED_PREFIXES):
        return None
    path = _PATH.match(name)
    if path:
        rel = path.group(1).rstrip("/")
        if "<" in rel:
            return None
        hits = glob.glob(os.path.join(ROOT, rel)) if "*" in rel else [os.path.join(ROOT, rel)]
        if not any(os.path.exists(h) for h in hits):
            return "no such path: %s" % rel
        if rel.startswith("roles/") and rel.count("/") >= 1:
            role = rel.split("/")[1]
            if role not in ROLES and "*" not in role:
                return "no such role: %s" % role
        return None
    ident = _IDENT.match(name)
    if not ident or ident.group(1).startswith("__"):
        return None
    word = ident.group(1)
    if word in ROLES or word in MODULES:
        return None
    role = _role_of(word)
    if role:
        if word in KNOBS[role] or word in SET_NAMES:
            return None
        return "%s is no knob of roles/%s (defaults, argument specs, vars), no fact the project sets and no module" % (
            word, role)
    if word.startswith("gpudirect_"):
        if word in FILTER_FILES or word in SET_NAMES:
            return None
        return "%s is no module in library/, no filter plugin, no role and no variable the project defines" % word
    return None


def _names(text):
    return _SPAN.findall(_FENCE.sub("", text))


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_the_readme_mentions_exists(doc):
    with open(os.path.join(ROOT, doc)) as handle:
        names = _names(handle.read())
    wrong = sorted({"`%s`: %s" % (n, problem(n, doc)) for n in names if problem(n, doc)})
    assert not wrong, "%s names what does not exist:\n%s" % (doc, "\n".join(wrong))


def test_the_documents_are_found():
    assert "README.md" in DOCS and "roles/gpudirect_pcie_acs/README.md" in DOCS
    assert len([d for d in DOCS if d.startswith("roles/")]) >= 10


@pytest.mark.parametrize("name", [
    "roles/no_such_role",
    "roles/gpudirect_pcie_acs/handlers/no_such.yml",
    "library/gpudirect_nothing.py",
    "gpudirect_pcie_acs_no_such_knob",
    "gpudirect_nvidia_driver_no_such_knob: true",
    "gpudirect_no_such_module",
    "tests/harness/no_such_dir/",
    "gpudirect_rolling_no_such_setting",
])
def test_a_wrong_name_is_caught(name):
    assert problem(name), name


@pytest.mark.parametrize("name", [
    "roles/gpudirect_pcie_acs", "roles/gpudirect_pcie_acs/tasks/kernel_param.yml", "library/", "site.yml",
    "gpudirect_pcie_acs_mode: gpu_nic_path", "gpudirect_state_skip_unchanged=false", "gpudirect_loopback",
    "gpudirect_pcie_acs", "gpudirect_nvidia_driver_plan", "gpudirect_reboot_reasons", "playbooks/*.yml",
    "ansible_facts.gpudirect.pairs", "rdma_rxe",
])
def test_a_right_name_passes(name):
    assert problem(name) is None, problem(name)
