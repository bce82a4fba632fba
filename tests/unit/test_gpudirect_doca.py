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
