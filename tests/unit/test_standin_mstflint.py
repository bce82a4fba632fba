"""The stand-in repository's mstflint (tests/harness/standin_repo/build.sh, src/mft/): the package
that brings mstconfig, the tool of roles/gpudirect_nic_config, in every OFED repository the stand-in builds.

What this proves: each DOCA-Host and MLNX_OFED tree lists mstflint at a version of the shape
build.sh documents; the package installs /usr/bin/mstconfig and /usr/bin/mstflint (the same stand-in,
which reads and burns firmware under that name) and no mlxconfig (MFT's name, which the
module would pick first), a boot script and a unit that both call /usr/bin/mstconfig, and a postinst
that enables the unit (so a reboot loads Next Boot as Current); the unpacked mstconfig runs as the
stand-in. What it does not prove: installing it on a node (molecule/default/prepare.yml does).
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("dpkg-deb", "apt-ftparchive", "gpg")),
    reason="needs dpkg-deb, apt-ftparchive (dpkg-dev, apt-utils) and gpg")

BUILD = os.path.join(ROOT, "tests", "harness", "standin_repo", "build.sh")
TREES = {
    "public/repo/doca/2.9.1/debian12/x86_64": ("4.16.1-2.2410114", "amd64"),
    "public/repo/doca/2.9.1/debian12/arm64-sbsa": ("4.16.1-2.2410114", "arm64"),
    "public/repo/doca/2.10.0/debian12/x86_64": ("4.16.1-2.2501060", "amd64"),
    "public/repo/doca/2.10.0/debian12/arm64-sbsa": ("4.16.1-2.2501060", "arm64"),
    "public/repo/mlnx_ofed/24.10-1.1.4.0/debian12.5/x86_64": ("4.16.1-2.2410114", "amd64"),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    done = subprocess.run(["bash", BUILD], env=dict(os.environ, GPUDIRECT_CACHE=str(cache)),
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_ofed_tree_lists_mstflint(repo, tree):
    version, arch = TREES[tree]
    with open(os.path.join(repo, "www", tree, "Packages")) as handle:
        stanzas = [s for s in handle.read().split("\n\n") if re.search(r"^Package: mstflint$", s, re.M)]
    assert len(stanzas) == 1
    assert re.search(r"^Version: %s$" % re.escape(version), stanzas[0], re.M)
    assert re.search(r"^Architecture: %s$" % arch, stanzas[0], re.M)
    assert re.search(r"^Depends: python3$", stanzas[0], re.M)


def test_the_package_brings_mstconfig_and_enables_the_boot_unit(repo, tmp_path):
    deb = os.path.join(repo, "www", "public/repo/doca/2.9.1/debian12/x86_64", "mstflint_4.16.1-2.2410114_amd64.deb")
    files = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    names = sorted(line.split()[-1] for line in files.splitlines() if not line.endswith("/"))
    assert names == ["./lib/systemd/system/standin-mlxconfig-boot.service", "./usr/bin/mstconfig",
                     "./usr/bin/mstflint", "./usr/bin/mstfwreset", "./usr/bin/standin-mlxconfig-boot"]
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-R", deb, str(root)], check=True)
    unit = (root / "lib/systemd/system/standin-mlxconfig-boot.service").read_text()
    assert "ExecStart=/usr/bin/mstconfig --standin-boot" in unit and "/usr/bin/mlxconfig" not in unit
    assert "exec /usr/bin/mstconfig --standin-boot" in (root / "usr/bin/standin-mlxconfig-boot").read_text()
    assert "deb-systemd-helper enable standin-mlxconfig-boot.service" in (root / "DEBIAN/postinst").read_text()
    assert "deb-systemd-helper purge standin-mlxconfig-boot.service" in (root / "DEBIAN/postrm").read_text()
    assert os.access(str(root / "usr/bin/mstconfig"), os.X_OK)

    # the unpacked tool is the stand-in: a card added, a value set for the next boot, the boot loads it
    env = dict(os.environ, STANDIN_MLXCONFIG_STATE=str(tmp_path / "state"))
    tool = str(root / "usr/bin/mstconfig")

    def run(*args):
        return subprocess.run([sys.executable, tool] + list(args), env=env, capture_output=True, text=True,
                              check=True).stdout

    run("--standin-add", "0000:17:00.0", "ConnectX7")
    assert "Please reboot machine" in run("-d", "17:00.0", "-y", "set", "PCI_WR_ORDERING=1")
    row = [line for line in run("-d", "0000:17:00.0", "-e", "query", "PCI_WR_ORDERING").splitlines()
           if "PCI_WR_ORDERING" in line][0]
    assert row.split()[-3:] == ["per_mkey(0)", "per_mkey(0)", "force_relax(1)"]
    run("--standin-boot")
    row = [line for line in run("-d", "0000:17:00.0", "-e", "query", "PCI_WR_ORDERING").splitlines()
           if "PCI_WR_ORDERING" in line][0]
    assert row.split()[-2:] == ["force_relax(1)", "force_relax(1)"]
