"""Role-internal variables that are Jinja templates, rendered by ansible-core's own
templar from the role's defaults/ and vars/ files, as a play renders them.

YAML and Jinja escapes stack here (a backslash in a folded scalar reaches Jinja
as it is written), so a wrong escape only shows when the template is rendered.
"""
import os

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from conftest import ROOT


def render(role, name, **overrides):
    loader = DataLoader()
    variables = {}
    for sub in ("defaults", "vars"):
        data = loader.load_from_file(os.path.join(ROOT, "roles", role, sub, "main.yml"))
        variables.update(data)
    variables.update(overrides)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    return Templar(loader=loader, variables=trusted).template(trusted[name])


@pytest.mark.parametrize(
    "overrides, wanted",
    [
        # DOCA: the OFED version comes from the role's DOCA table
        ({"mlnx_ofed_method": "doca", "mlnx_ofed_doca_version": "2.9.1"}, "24.10-1.1.4"),
        ({"mlnx_ofed_method": "doca", "mlnx_ofed_doca_version": "2.10.0"}, "25.01-0.6.0"),
        ({"mlnx_ofed_method": "doca", "mlnx_ofed_doca_version": "9.9.9"}, ""),
        # tarball or ISO: from the file name NVIDIA gives it
        ({"mlnx_ofed_method": "mlnx_ofed_tarball",
          "mlnx_ofed_tarball_src": "http://mirror.example/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz"},
         "24.10-1.1.4.0"),
        ({"mlnx_ofed_method": "mlnx_ofed_tarball",
          "mlnx_ofed_tarball_src": "/srv/iso/MLNX_OFED_LINUX-23.10-3.2.2.0-rhel9.4-x86_64.iso"},
         "23.10-3.2.2.0"),
        # a name without the version: empty, which the role's check turns into a message
        ({"mlnx_ofed_method": "mlnx_ofed_tarball", "mlnx_ofed_tarball_src": "http://mirror.example/ofed.tgz"}, ""),
        # set explicitly: wins over both
        ({"mlnx_ofed_method": "mlnx_ofed_tarball", "mlnx_ofed_version": "24.04-0.7.0.0",
          "mlnx_ofed_tarball_src": "http://mirror.example/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz"},
         "24.04-0.7.0.0"),
        ({"mlnx_ofed_method": "inbox"}, ""),
    ],
)
def test_mlnx_ofed_wanted_version(overrides, wanted):
    assert render("mlnx_ofed", "__mlnx_ofed_wanted_version", **overrides) == wanted


def test_mlnx_ofed_tarball_tree_drops_the_extension():
    tree = render("mlnx_ofed", "__mlnx_ofed_tree",
                  mlnx_ofed_tarball_src="http://m/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz")
    assert tree.endswith("/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64"), tree
