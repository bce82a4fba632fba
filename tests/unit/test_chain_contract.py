"""One DKMS chain: what gpudirect_dkms builds and signs is what gpudirect_reboot checks before a reboot.

The gpudirect_dkms role builds and signs ``gpudirect_dkms_chain``; the gpudirect_reboot role checks,
before it reboots a node that refuses unsigned modules, that ``gpudirect_reboot_signing_chain`` is
signed. Its README says to keep the two equal. If the defaults drifted apart, a module the dkms
role signs would go unchecked, or the reboot role would stop a node over a package the dkms role
never built. The modules' own defaults (``chain`` of gpudirect_module_signing and gpudirect_dkms)
and every place that writes the default down must say the same list.
"""

import os
import re

import pytest
import yaml
from ansible.module_utils.basic import AnsibleModule

import gpudirect_dkms
import gpudirect_module_signing
from conftest import ROOT, argument_spec_of


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _text(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def _module_spec_default(module, monkeypatch):
    """The ``chain`` default of a module's AnsibleModule argument_spec, as main() builds it."""
    return argument_spec_of(module, monkeypatch)["chain"]["default"]


def _readme_default(role, knob):
    """The default column of ``knob`` in roles/<role>/README.md's variable table, as a list."""
    rows = [line for line in _text("roles", role, "README.md").splitlines()
            if line.startswith("| `%s` |" % knob)]
    assert len(rows) == 1, "roles/%s/README.md: %d table rows for %s" % (role, len(rows), knob)
    cell = rows[0].split("|")[2].strip().strip("`")
    return yaml.safe_load(cell)


def _inventory_default(knob):
    """The commented-out default of ``knob`` in the example inventory, flow or block list."""
    lines = _text("inventory", "example", "group_vars", "gpu_nodes.yml").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("# %s:" % knob)]
    assert len(starts) == 1, "example inventory: %d commented defaults for %s" % (len(starts), knob)
    block = [lines[starts[0]][2:]]
    for line in lines[starts[0] + 1:]:
        if not re.match(r"^#   ", line):
            break
        block.append(line[2:])
    return yaml.safe_load("\n".join(block))[knob]


def test_the_chain_the_reboot_role_checks_is_the_chain_the_dkms_role_builds_and_signs(monkeypatch):
    dkms_chain = _load("roles", "gpudirect_dkms", "defaults", "main.yml")["gpudirect_dkms_chain"]
    assert dkms_chain and len(set(dkms_chain)) == len(dkms_chain), dkms_chain
    signing_doc = yaml.safe_load(gpudirect_module_signing.DOCUMENTATION)["options"]["chain"]["default"]
    dkms_doc = yaml.safe_load(gpudirect_dkms.DOCUMENTATION)["options"]["chain"]["default"]
    found = {
        "roles/gpudirect_reboot/defaults/main.yml gpudirect_reboot_signing_chain":
            _load("roles", "gpudirect_reboot", "defaults", "main.yml")["gpudirect_reboot_signing_chain"],
        "roles/gpudirect_reboot/meta/argument_specs.yml gpudirect_reboot_signing_chain":
            _load("roles", "gpudirect_reboot", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
            ["gpudirect_reboot_signing_chain"]["default"],
        "roles/gpudirect_dkms/meta/argument_specs.yml gpudirect_dkms_chain":
            _load("roles", "gpudirect_dkms", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
            ["gpudirect_dkms_chain"]["default"],
        "library/gpudirect_module_signing.py DOCUMENTATION chain": signing_doc,
        "library/gpudirect_module_signing.py argument_spec chain":
            _module_spec_default(gpudirect_module_signing, monkeypatch),
        "library/gpudirect_dkms.py DOCUMENTATION chain": dkms_doc,
        "library/gpudirect_dkms.py DEFAULT_CHAIN": list(gpudirect_dkms.DEFAULT_CHAIN),
        "roles/gpudirect_reboot/README.md gpudirect_reboot_signing_chain":
            _readme_default("gpudirect_reboot", "gpudirect_reboot_signing_chain"),
        "roles/gpudirect_dkms/README.md gpudirect_dkms_chain": _readme_default("gpudirect_dkms", "gpudirect_dkms_chain"),
        "inventory/example gpudirect_reboot_signing_chain": _inventory_default("gpudirect_reboot_signing_chain"),
        "inventory/example gpudirect_dkms_chain": _inventory_default("gpudirect_dkms_chain"),
    }
    drifted = {where: chain for where, chain in found.items() if chain != dkms_chain}
    assert not drifted, "differs from roles/gpudirect_dkms/defaults/main.yml gpudirect_dkms_chain %s: %s" % (
        dkms_chain, drifted)


def test_each_role_passes_its_chain_knob_to_the_signing_module():
    """The knobs compared above are the ones the roles hand to gpudirect_module_signing."""
    def chains(tasks):
        found = []
        for task in tasks:
            if "gpudirect_module_signing" in task:
                found.append(task["gpudirect_module_signing"]["chain"])
            for key in ("block", "rescue", "always"):
                found += chains(task.get(key, []))
        return found

    # the dkms role reads the chain's signatures, then signs it; the reboot role checks it
    assert chains(_load("roles", "gpudirect_dkms", "tasks", "sign.yml")) == ["{{ gpudirect_dkms_chain }}"] * 2
    assert chains(_load("roles", "gpudirect_reboot", "tasks", "signing.yml")) == [
        "{{ gpudirect_reboot_signing_chain }}"]
