"""DOCA-Host repository layout (plugin_utils/gpudirect_doca.py) against the published
layouts in tests/fixtures/doca/repo_layouts.yml (each case names its public source), and
the gpudirect_mlnx_ofed role's EL vars files, rendered by ansible-core's templar with the role's
filter plugin, against the same cases."""
import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs
from ansible.template import Templar, trust_as_template

from conftest import ROOT

from ansible.module_utils import gpudirect_doca as doca

CASES = yaml.safe_load(open(os.path.join(ROOT, "tests", "fixtures", "doca", "repo_layouts.yml")))["cases"]
IDS = ["%s-%s-%s" % (c["release"], c["distribution"], c["version"]) for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_repo_distro_follows_the_published_layout(case):
    assert case["source"]
    got = doca.repo_distro(case["release"], case["os_family"], case["distribution"], case["version"])
    assert got == case["distro"], case["source"]


@pytest.mark.parametrize("release, layout", [
    ("2.9.1", "minor"), ("2.10.0", "minor"), ("3.0.0", "minor"), ("3.1.0", "minor"), ("3.1", "minor"),
    ("3.2.0", "major"), ("3.2", "major"), ("3.2.3", "major"), ("3.10.0", "major"), ("4.0.0", "major"),
    ("latest", None), ("3.2.0-rc1", None), ("", None),
])
def test_el_layout_changes_at_doca_3_2_0(release, layout):
    assert doca.el_layout(release) == layout


def _render_vars_file(path, variables):
    add_all_plugin_dirs(ROOT)  # filter_plugins/gpudirect_doca.py
    loader = DataLoader()
    data = loader.load_from_file(path)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in dict(variables, **data).items()}
    return Templar(loader=loader, variables=trusted).template(trusted["__gpudirect_mlnx_ofed_distro"])


@pytest.mark.parametrize("case", [c for c in CASES if c["os_family"] in ("RedHat", "Debian")], ids=lambda c: "%s-%s-%s" % (
    c["release"], c["distribution"], c["version"]))
def test_role_vars_file_renders_the_same_directory(case):
    major = case["version"].split(".")[0]
    name = ("RedHat-%s.yml" % major if case["os_family"] == "RedHat"
            else "Ubuntu-%s.yml" % major if case["distribution"] == "Ubuntu" else "Debian-%s.yml" % major)
    path = os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "vars", name)
    if not os.path.exists(path):
        pytest.skip("no vars file %s" % name)
    facts = {"os_family": case["os_family"], "distribution": case["distribution"],
             "distribution_version": case["version"], "distribution_major_version": major}
    got = _render_vars_file(path, {"ansible_facts": facts, "gpudirect_mlnx_ofed_doca_version": case["release"]})
    assert got.strip() == case["distro"], case["source"]


# --- the DOCA release -> OFED version table (roles/gpudirect_mlnx_ofed/vars/main.yml) ------------
# tests/fixtures/doca/ofed_versions.yml lists every DOCA 2.x and 3.x release NVIDIA lists, with
# the OFED version each installs where a public source says it (sources: README.md there).

RELEASES = yaml.safe_load(open(os.path.join(ROOT, "tests", "fixtures", "doca", "ofed_versions.yml")))["releases"]
ROLE = os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed")
TABLE = yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml")))["__gpudirect_mlnx_ofed_doca_ofed_versions"]
OFED_RE = r"^[0-9]{2}\.[0-9]{2}-[0-9]+\.[0-9]+\.[0-9]+$"


def test_every_release_names_its_sources_and_why_it_is_left_out():
    import re
    seen = [r["doca"] for r in RELEASES]
    assert len(seen) == len(set(seen))
    for release in RELEASES:
        assert re.match(r"^[23]\.[0-9]+\.[0-9]+$", release["doca"]), release
        assert release["sources"] and all(str(s).strip() for s in release["sources"]), release["doca"]
        if release["ofed"] is not None:
            assert re.match(OFED_RE, release["ofed"]), release
        if not release["in_role"]:
            assert str(release.get("why") or "").strip(), release["doca"]
        else:
            assert release["ofed"] is not None, release["doca"]


def test_every_release_of_nvidias_archive_is_listed():
    # the DOCA archive pages (README.md) list these 2.x/3.x releases; none may go missing here
    listed = {r["doca"] for r in RELEASES}
    assert {"2.0.2", "2.2.0", "2.2.1", "2.5.0", "2.5.1", "2.5.2", "2.5.3", "2.5.4", "2.5.5", "2.5.6", "2.6.0",
            "2.7.0", "2.8.0", "2.9.0", "2.9.1", "2.9.2", "2.9.3", "2.9.4", "2.10.0", "3.0.0", "3.1.0", "3.2.0",
            "3.2.1", "3.2.2", "3.3.0", "3.4.0", "3.4.1"} <= listed


def test_role_table_is_exactly_the_sourced_releases():
    wanted = {r["doca"]: r["ofed"] for r in RELEASES if r["in_role"]}
    assert TABLE == wanted
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in TABLE.items())


def test_the_brief_example_is_doca_2_6_0_not_2_5_0():
    # MLNX_OFED 24.01-0.3.3.1 is what DOCA 2.6.0's host repository packages name (BSP v4.6.0);
    # DOCA 2.5.0's name 23.10-1.1.9.0 (BSP v4.5.0)
    assert TABLE["2.6.0"] == "24.01-0.3.3" and TABLE["2.5.0"] == "23.10-1.1.9"


def _wanted(release, **over):
    from ansible.template import Templar, trust_as_template
    loader = DataLoader()
    variables = {}
    for sub in ("defaults", "vars"):
        variables.update(loader.load_from_file(os.path.join(ROLE, sub, "main.yml")))
    variables.update({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": release}, **over)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    return Templar(loader=loader, variables=trusted).template(trusted["__gpudirect_mlnx_ofed_wanted_version"])


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r["doca"])
def test_role_wants_the_sourced_version_or_nothing(release):
    assert _wanted(release["doca"]) == (release["ofed"] if release["in_role"] else "")


@pytest.mark.parametrize("value", ["2.9", "2.9.1-2", "latest", "v2.9.1", "2.9.1 ", "2.09.1", "9.9.9", "3.5.0"])
def test_role_does_not_guess_for_a_release_it_does_not_know(value):
    # a repository directory such as doca/2.9.1-2/ is real, but not a release the table knows:
    # nothing is derived from a neighbour; validate.yml then names the value and the knob
    assert _wanted(value) == ""


def _validate_message(release, version="9.6"):
    from ansible.template import Templar, trust_as_template
    loader = DataLoader()
    tasks = loader.load_from_file(os.path.join(ROLE, "tasks", "validate.yml"))
    task = next(t for t in tasks if t["name"] == "Check the OFED variables")
    variables = {}
    for sub in ("defaults", "vars"):
        variables.update(loader.load_from_file(os.path.join(ROLE, sub, "main.yml")))
    variables.update(loader.load_from_file(os.path.join(ROLE, "vars", "RedHat-9.yml")))
    variables.update(ansible_facts={"os_family": "RedHat", "distribution": "Rocky", "distribution_version": version,
                                    "distribution_major_version": "9", "architecture": "x86_64"},
                     gpudirect_mlnx_ofed_doca_version=release)
    add_all_plugin_dirs(ROOT)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    templar = Templar(loader=loader, variables=trusted)
    passed = all(templar.template(trust_as_template("{{ %s }}" % c)) for c in task["ansible.builtin.assert"]["that"])
    return passed, templar.template(trust_as_template(task["ansible.builtin.assert"]["fail_msg"]))


@pytest.mark.parametrize("release", [r for r in RELEASES if not r["in_role"]], ids=lambda r: r["doca"])
def test_a_release_left_out_fails_validation_naming_it_and_the_knob(release):
    passed, message = _validate_message(release["doca"])
    assert not passed
    assert "gpudirect_mlnx_ofed_version: DOCA %s is not in the role table" % release["doca"] in message


@pytest.mark.parametrize("release", [r for r in RELEASES if r["in_role"]], ids=lambda r: r["doca"])
def test_a_release_in_the_table_passes_the_ofed_check(release):
    passed, message = _validate_message(release["doca"])
    assert passed, message
