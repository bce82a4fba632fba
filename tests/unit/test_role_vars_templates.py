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
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "2.9.1"}, "24.10-1.1.4"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "2.10.0"}, "25.01-0.6.0"),
        # releases after 3.0.0, each with its source in the role's vars/main.yml
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "2.9.3"}, "24.10-3.2.5"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.1.0"}, "25.07-0.9.7"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.2.0"}, "25.10-1.2.8"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.2.1"}, "25.10-1.7.1"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.2.2"}, "25.10-2.4.1"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.3.0"}, "26.01-1.0.0"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.4.0"}, "26.04-0.8.6"),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.4.1"}, "26.04-1.1.0"),
        # not in the table: empty, which validate.yml turns into a message naming gpudirect_mlnx_ofed_version
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "9.9.9"}, ""),
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.5.0"}, ""),
        # stated explicitly: wins over the table
        ({"gpudirect_mlnx_ofed_method": "doca", "gpudirect_mlnx_ofed_doca_version": "3.5.0", "gpudirect_mlnx_ofed_version": "26.07-0.7.7"},
         "26.07-0.7.7"),
        # tarball or ISO: from the file name NVIDIA gives it
        ({"gpudirect_mlnx_ofed_method": "mlnx_ofed_tarball",
          "gpudirect_mlnx_ofed_tarball_src": "http://mirror.example/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz"},
         "24.10-1.1.4.0"),
        ({"gpudirect_mlnx_ofed_method": "mlnx_ofed_tarball",
          "gpudirect_mlnx_ofed_tarball_src": "/srv/iso/MLNX_OFED_LINUX-23.10-3.2.2.0-rhel9.4-x86_64.iso"},
         "23.10-3.2.2.0"),
        # a name without the version: empty, which the role's check turns into a message
        ({"gpudirect_mlnx_ofed_method": "mlnx_ofed_tarball", "gpudirect_mlnx_ofed_tarball_src": "http://mirror.example/ofed.tgz"}, ""),
        # set explicitly: wins over both
        ({"gpudirect_mlnx_ofed_method": "mlnx_ofed_tarball", "gpudirect_mlnx_ofed_version": "24.04-0.7.0.0",
          "gpudirect_mlnx_ofed_tarball_src": "http://mirror.example/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz"},
         "24.04-0.7.0.0"),
        ({"gpudirect_mlnx_ofed_method": "inbox"}, ""),
    ],
)
def test_mlnx_ofed_wanted_version(overrides, wanted):
    assert render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_wanted_version", **overrides) == wanted


def test_mlnx_ofed_tarball_tree_drops_the_extension():
    tree = render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_tree",
                  gpudirect_mlnx_ofed_tarball_src="http://m/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz")
    assert tree.endswith("/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64"), tree


# Repository architecture directories, from NVIDIA's published layouts:
# CUDA https://developer.download.nvidia.com/compute/cuda/repos/<distro>/{x86_64,sbsa}/ and
# DOCA https://linux.mellanox.com/public/repo/doca/<release>/<distro>/{x86_64,arm64-sbsa}/
# (role vars/main.yml comments). Facts: ansible_facts['architecture'] as the setup module
# reports it on an x86 server and on an Arm server (Grace: uname -m aarch64).
NODE = {"x86_64": {"architecture": "x86_64"}, "aarch64": {"architecture": "aarch64"}}


@pytest.mark.parametrize("machine, wanted", [
    ("x86_64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"),
    ("aarch64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/"),
])
def test_cuda_repository_directory_per_architecture(machine, wanted):
    facts = dict(NODE[machine], os_family="Debian")
    url = render("gpudirect_nvidia_driver", "__gpudirect_nvidia_driver_repo_url", ansible_facts=facts, __gpudirect_nvidia_driver_distro="ubuntu2404")
    assert url.strip() == wanted
    key = render("gpudirect_nvidia_driver", "__gpudirect_nvidia_driver_key_url", ansible_facts=facts, __gpudirect_nvidia_driver_distro="ubuntu2404",
                 __gpudirect_nvidia_driver_key_id="3bf863cc")
    assert key == wanted + "3bf863cc.pub"


@pytest.mark.parametrize("machine, distro, wanted", [
    ("x86_64", "ubuntu24.04", "https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu24.04/x86_64/"),
    ("aarch64", "ubuntu24.04", "https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu24.04/arm64-sbsa/"),
    ("aarch64", "rhel9.4", "https://linux.mellanox.com/public/repo/doca/2.9.1/rhel9.4/arm64-sbsa/"),
])
def test_doca_repository_directory_per_architecture(machine, distro, wanted):
    url = render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_repo_url", ansible_facts=NODE[machine], __gpudirect_mlnx_ofed_distro=distro)
    assert url.strip() == wanted


def test_unknown_architecture_renders_no_directory_and_the_knob_overrides():
    facts = {"architecture": "ppc64le"}
    assert render("gpudirect_nvidia_driver", "__gpudirect_nvidia_driver_repo_arch", ansible_facts=facts).strip() == ""
    assert render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_repo_arch", ansible_facts=facts).strip() == ""
    assert render("gpudirect_nvidia_driver", "__gpudirect_nvidia_driver_repo_arch", ansible_facts=facts,
                  gpudirect_nvidia_driver_repo_arch="ppc64le").strip() == "ppc64le"
    assert render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_repo_url", ansible_facts=facts, __gpudirect_mlnx_ofed_distro="rhel9.4",
                  gpudirect_mlnx_ofed_repo_arch="ppc64le").strip().endswith("/rhel9.4/ppc64le/")


# EL repository directories follow the DOCA release (tests/fixtures/doca/repo_layouts.yml has
# the source of each layout): per minor release up to 3.1.x, per major release from 3.2.0.
@pytest.mark.parametrize("machine, release, version, wanted", [
    ("x86_64", "2.9.1", "9.4", "https://linux.mellanox.com/public/repo/doca/2.9.1/rhel9.4/x86_64/"),
    ("aarch64", "3.1.0", "10.0", "https://linux.mellanox.com/public/repo/doca/3.1.0/rhel10.0/arm64-sbsa/"),
    ("x86_64", "3.2.0", "9.7", "https://linux.mellanox.com/public/repo/doca/3.2.0/rhel9/x86_64/"),
    ("aarch64", "3.2.1", "10.1", "https://linux.mellanox.com/public/repo/doca/3.2.1/rhel10/arm64-sbsa/"),
    ("x86_64", "3.4.0", "8.10", "https://linux.mellanox.com/public/repo/doca/3.4.0/rhel8/x86_64/"),
])
def test_doca_el_directory_follows_the_release(machine, release, version, wanted):
    from ansible.plugins.loader import add_all_plugin_dirs
    add_all_plugin_dirs(ROOT)  # filter_plugins/gpudirect_doca.py
    major = version.split(".")[0]
    facts = dict(NODE[machine], os_family="RedHat", distribution="Rocky", distribution_version=version,
                 distribution_major_version=major)
    el = DataLoader().load_from_file(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "vars", "RedHat-%s.yml" % major))
    url = render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_repo_url", ansible_facts=facts, gpudirect_mlnx_ofed_doca_version=release,
                 __gpudirect_mlnx_ofed_distro=trust_as_template(el["__gpudirect_mlnx_ofed_distro"]))
    assert url.strip() == wanted
    # the override still wins
    url = render("gpudirect_mlnx_ofed", "__gpudirect_mlnx_ofed_repo_url", ansible_facts=facts, gpudirect_mlnx_ofed_doca_version=release,
                 __gpudirect_mlnx_ofed_distro=trust_as_template(el["__gpudirect_mlnx_ofed_distro"]), gpudirect_mlnx_ofed_repo_distro="rhel9.6")
    assert url.strip().endswith("/%s/rhel9.6/%s/" % (release, url.strip().rstrip("/").rsplit("/", 1)[1]))


def _validate_task(name):
    tasks = DataLoader().load_from_file(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "tasks", "validate.yml"))
    return next(t for t in tasks if t["name"] == name)


@pytest.mark.parametrize("release, version, distro_override, wanted", [
    # a release the table does not know: the value and the knob that states the OFED version
    ("3.5.0", "9.6", "", "gpudirect_mlnx_ofed_version: DOCA 3.5.0 is not in the role table"),
    ("9.9.9", "9.6", "", "gpudirect_mlnx_ofed_version: DOCA 9.9.9 is not in the role table"),
    # a release whose EL directory cannot be decided: the value and gpudirect_mlnx_ofed_repo_distro
    ("latest", "9.6", "", 'no DOCA repository directory known for DOCA "latest" on Rocky 9.6; set gpudirect_mlnx_ofed_repo_distro'),
])
def test_unknown_doca_release_fails_naming_the_value_and_the_knob(release, version, distro_override, wanted):
    from ansible.plugins.loader import add_all_plugin_dirs
    add_all_plugin_dirs(ROOT)  # filter_plugins/gpudirect_doca.py
    task = _validate_task("Check the OFED variables")
    major = version.split(".")[0]
    facts = dict(NODE["x86_64"], os_family="RedHat", distribution="Rocky", distribution_version=version,
                 distribution_major_version=major)
    el = DataLoader().load_from_file(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "vars", "RedHat-%s.yml" % major))
    loader = DataLoader()
    variables = {}
    for sub in ("defaults", "vars"):
        variables.update(loader.load_from_file(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", sub, "main.yml")))
    variables.update(el, ansible_facts=facts, gpudirect_mlnx_ofed_doca_version=release, gpudirect_mlnx_ofed_repo_distro=distro_override)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    templar = Templar(loader=loader, variables=trusted)
    results = [templar.template(trust_as_template("{{ %s }}" % cond)) for cond in task["ansible.builtin.assert"]["that"]]
    assert not all(results)
    message = templar.template(trust_as_template(task["ansible.builtin.assert"]["fail_msg"]))
    assert wanted in message, message
