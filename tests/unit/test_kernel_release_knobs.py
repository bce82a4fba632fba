"""Every role knob that takes a kernel release or the kernel packages' version is checked by the
role's tasks/validate.yml, before anything changes, so that a value with path components,
blanks or shell characters fails naming the knob and the value (issue #44 outcome 5).

The knobs are found by reading every role's meta/argument_specs.yml; the checks are the
shared input rules (plugin_utils/gpudirect_input_rules.py: kernel_release, kernel_releases,
package_version, built on module_utils/gpudirect_kernel.py release_problem and
package_version_problem), run here through ansible-core's templar and the role's own
filter plugin exactly as validate.yml runs them. Real values come from
tests/fixtures/kernel/releases.yml (uname -r as machines printed it),
tests/fixtures/kernel_update/*.txt (apt-cache policy) and
tests/fixtures/vendor_strings/versions.yml (dpkg-query and rpm versions), each with its source."""

import glob
import os
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs
from ansible.template import Templar, trust_as_template

from ansible.module_utils import gpudirect_input_rules as rules
from ansible.module_utils import gpudirect_kernel as k
from conftest import ROOT

KERNEL_KINDS = {"kernel_release", "kernel_releases", "package_version"}
# what a knob's description says when it takes a kernel release or the kernel packages' version
TAKES_A_KERNEL = re.compile(r"uname -r|kernel release|kernel to roll out|boot kernel release", re.I)


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _knobs():
    """(role, knob) for every option whose description says it takes a kernel release."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry in (_load(path)["argument_specs"] or {}).values():
            for name, option in (entry.get("options") or {}).items():
                text = " ".join(option.get("description") or []) if isinstance(option.get("description"), list) \
                    else str(option.get("description") or "")
                if TAKES_A_KERNEL.search(text) and (role, name) not in found:
                    found.append((role, name))
    return found


def _rule_task(role, knob):
    """The validate.yml task whose *_input_rules list has a rule for ``knob``, and that rule."""
    for task in _load(os.path.join(ROOT, "roles", role, "tasks", "validate.yml")) or []:
        for key, value in (task.get("vars") or {}).items():
            if key.endswith("_input_rules"):
                for rule in value:
                    if rule["knob"] == knob:
                        return task, rule
    return None, None


def test_the_audit_finds_the_kernel_knobs():
    # gpudirect_dkms_kernels: uname -r releases; gpudirect_kernel_update_target: the kernel to roll out.
    # gpudirect_os_release_pin takes an OS release (8.4, 22.04), not a kernel; it records the kernel
    # packages it finds, it takes none.
    assert set(_knobs()) == {("gpudirect_dkms", "gpudirect_dkms_kernels"),
                             ("gpudirect_kernel_update", "gpudirect_kernel_update_target")}


@pytest.mark.parametrize("role, knob", _knobs())
def test_each_kernel_knob_has_a_kernel_rule_in_validate(role, knob):
    task, rule = _rule_task(role, knob)
    assert rule is not None, "roles/%s/tasks/validate.yml has no input rule for %s" % (role, knob)
    assert rule["rule"] in KERNEL_KINDS, (role, knob, rule["rule"])
    assert "{{ %s }}" % knob == rule["value"].strip()


def _trusted(value):
    """Strings as templates, inside lists and dicts too (the task's vars hold a list of rule dicts)."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {name: _trusted(v) for name, v in value.items()}
    return value


def _render(role, knob, value):
    """Run the validate.yml task that checks ``knob`` with ``value``: (passed, message)."""
    task, _rule = _rule_task(role, knob)
    add_all_plugin_dirs(ROOT)           # filter_plugins/gpudirect_input_rules.py
    loader = DataLoader()
    variables = dict(loader.load_from_file(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) or {})
    trusted = {name: _trusted(v) for name, v in variables.items()}
    trusted.update({name: _trusted(v) for name, v in (task.get("vars") or {}).items()})
    trusted[knob] = value               # the operator's value, as it reaches the role: data, not a template
    templar = Templar(loader=loader, variables=trusted)
    check = task["ansible.builtin.assert"]
    that = check["that"] if isinstance(check["that"], list) else [check["that"]]
    passed = all(templar.template(trust_as_template("{{ %s }}" % cond)) for cond in that)
    return passed, (None if passed else templar.template(trust_as_template(check["fail_msg"])))


BAD_RELEASES = ["../../etc", "6.1.0-50-amd64/../x", " 6.1.0", "6.1.0-50-amd64 ", "..", ".", "6.1.0-50-amd64\n",
                "$(reboot)", "6.1.0-50-amd64;reboot", "/lib/modules/6.1.0-50-amd64", "6.1.0*", ""]


@pytest.mark.parametrize("value", BAD_RELEASES, ids=repr)
def test_dkms_kernels_with_a_bad_release_fail_naming_the_knob_and_the_value(value):
    passed, message = _render("gpudirect_dkms", "gpudirect_dkms_kernels", ["6.1.0-50-amd64", value])
    assert not passed
    assert "gpudirect_dkms_kernels[1]=%r is not a kernel release as uname -r prints it" % value in message


RELEASES = _load(os.path.join(ROOT, "tests", "fixtures", "kernel", "releases.yml"))


def test_dkms_kernels_accept_the_releases_machines_printed_and_the_default():
    real = [entry["release"] for entry in RELEASES["valid"]]
    assert _render("gpudirect_dkms", "gpudirect_dkms_kernels", real) == (True, None)
    assert _render("gpudirect_dkms", "gpudirect_dkms_kernels", []) == (True, None)


@pytest.mark.parametrize("value", [v for v in RELEASES["invalid"]], ids=repr)
def test_dkms_kernels_refuse_every_invalid_release_of_the_fixture(value):
    passed, message = _render("gpudirect_dkms", "gpudirect_dkms_kernels", [value])
    assert not passed and "gpudirect_dkms_kernels[0]=%r" % value in message


BAD_TARGETS = ["../../etc", "6.1.0-50-amd64/../x", " 6.1.0", "6.1.192-2 ", "6.1.192-2 extra",
               "linux-image-amd64=6.1.192-2", "6.1.192-2;reboot", "$(reboot)", "amd64", "6.1.192-2\n"]


@pytest.mark.parametrize("value", BAD_TARGETS, ids=repr)
def test_kernel_update_target_with_a_bad_version_fails_naming_the_knob_and_the_value(value):
    passed, message = _render("gpudirect_kernel_update", "gpudirect_kernel_update_target", value)
    assert not passed
    assert "gpudirect_kernel_update_target=%r is not a package version" % value in message


def test_kernel_update_target_mapping_names_the_package_and_the_value():
    passed, message = _render("gpudirect_kernel_update", "gpudirect_kernel_update_target",
                              {"linux-image-amd64": "6.1.192-2", "linux-headers-amd64": "../../etc"})
    assert not passed
    assert "gpudirect_kernel_update_target[linux-headers-amd64]='../../etc' is not a package version" in message
    passed, message = _render("gpudirect_kernel_update", "gpudirect_kernel_update_target", {"../x": "6.1.192-2"})
    assert not passed and "gpudirect_kernel_update_target: '../x' is not a package name" in message


def _apt_versions():
    """Every version apt-cache policy printed in tests/fixtures/kernel_update/*.txt."""
    found = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "fixtures", "kernel_update", "apt-cache-policy-*.txt")):
        with open(path) as handle:
            for line in handle:
                match = re.match(r"^\s+(?:Installed|Candidate): (\S+)$", line) or \
                    re.match(r"^\s+(?:\*\*\* )?(\S+) [0-9]+$", line)
                if match and match.group(1) != "(none)":
                    found.add(match.group(1))
    return sorted(found)


def _package_versions():
    data = _load(os.path.join(ROOT, "tests", "fixtures", "vendor_strings", "versions.yml"))
    return [entry["text"] for entry in data["package_versions"]]


REAL_VERSIONS = _apt_versions() + _package_versions()


def test_the_fixtures_give_real_versions():
    assert "6.1.192-2" in REAL_VERSIONS and "6.1.176-1" in REAL_VERSIONS and "3:580.95.05-1.fc44" in REAL_VERSIONS


@pytest.mark.parametrize("value", REAL_VERSIONS)
def test_kernel_update_target_accepts_the_versions_package_tools_printed(value):
    assert k.package_version_problem(value) is None
    assert _render("gpudirect_kernel_update", "gpudirect_kernel_update_target", value) == (True, None)


def test_kernel_update_target_accepts_its_default_a_mapping_and_the_el_kernels_version():
    assert _render("gpudirect_kernel_update", "gpudirect_kernel_update_target", "") == (True, None)
    assert _render("gpudirect_kernel_update", "gpudirect_kernel_update_target",
                   {"linux-image-amd64": "6.1.192-2", "linux-headers-amd64": "6.1.192-2"}) == (True, None)
    # the RHEL 9.4 GA kernel package, kernel-5.14.0-427.13.1.el9_4 (tests/fixtures/kernel/README.md)
    assert _render("gpudirect_kernel_update", "gpudirect_kernel_update_target", "5.14.0-427.13.1.el9_4") == (True, None)


@pytest.mark.parametrize("value, reason", [
    ("", "it is empty"), ("../../etc", "it contains '/'"), (" 6.1.0", "it contains ' '"),
    ("6.1.0=1", "it contains '='"), ("amd64", "does not start with a digit"), (":6.1", "does not start with a digit"),
    ("6" * 129, "longer than 128"), (6.1, "not a string"),
])
def test_package_version_problem_says_why(value, reason):
    assert reason in k.package_version_problem(value)


def test_the_rules_and_the_module_agree_on_releases():
    """The role's check and the gpudirect_dkms module's (invalid_releases) refuse the same values."""
    for value in BAD_RELEASES + RELEASES["invalid"]:
        assert rules.check({"knob": "x", "value": [value], "rule": "kernel_releases"})
        assert k.invalid_releases([value], "x")
    for entry in RELEASES["valid"]:
        assert rules.check({"knob": "x", "value": [entry["release"]], "rule": "kernel_releases"}) == []
        assert k.invalid_releases([entry["release"]], "x") == []
