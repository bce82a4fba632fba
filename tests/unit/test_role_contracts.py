"""Contracts every role keeps: documented knobs, validated knobs, prefixed names."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

ROLES = sorted(r for r in os.listdir(os.path.join(ROOT, "roles"))
               if os.path.isdir(os.path.join(ROOT, "roles", r)))


def _yaml(role, *parts):
    path = os.path.join(ROOT, "roles", role, *parts)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return yaml.safe_load(fh) or {}


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_in_the_argument_spec_and_back(role):
    defaults = _yaml(role, "defaults", "main.yml") or {}
    specs = _yaml(role, "meta", "argument_specs.yml")
    assert specs, "roles/%s has no meta/argument_specs.yml" % role
    options = specs["argument_specs"]["main"].get("options", {})
    assert set(defaults) <= set(options), "defaults missing from argument_specs: %s" % (set(defaults) - set(options))
    undocumented = {k for k, v in options.items() if not v.get("description")}
    assert not undocumented, "options without a description: %s" % undocumented
    for name, value in defaults.items():
        if "default" in options[name]:
            assert options[name]["default"] == value, "%s: argument_specs default differs from defaults/main.yml" % name


@pytest.mark.parametrize("role", ROLES)
def test_public_variables_carry_the_role_prefix(role):
    defaults = _yaml(role, "defaults", "main.yml") or {}
    specs = _yaml(role, "meta", "argument_specs.yml") or {"argument_specs": {}}
    names = set(defaults)
    for entry in specs["argument_specs"].values():
        names |= set(entry.get("options", {}))
    assert not [n for n in names if not n.startswith(role + "_")]
    internal = _yaml(role, "vars", "main.yml") or {}
    assert not [n for n in internal if not n.startswith("__" + role + "_")]


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_commented(role):
    path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
    if not os.path.exists(path):
        pytest.skip("roles/%s has no defaults (no public knobs)" % role)
    with open(path) as fh:
        lines = fh.read().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z_0-9]+:", line):
            block = []
            for above in reversed(lines[:i]):
                if not above.strip():
                    break
                block.append(above)
            assert any(b.startswith("#") for b in block), "%s has no comment in its block" % line.split(":")[0]


def test_example_inventory_documents_every_knob():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "document-knobs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
