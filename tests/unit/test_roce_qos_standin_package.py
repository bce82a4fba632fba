"""The stand-in repository's mlnx-tools (tests/harness/standin_repo/build.sh, src/ofed/qos/): the package
that brings mlnx_qos, the tool of roles/gpudirect_roce_qos, in every OFED repository the stand-in builds,
and a dependency of the metapackages as the real one is.

What this proves: each DOCA-Host and MLNX_OFED tree lists mlnx-tools; the DOCA metapackages depend on it;
the package installs /usr/bin/mlnx_qos, and the unpacked tool runs as the stand-in. What it does not prove:
installing it on a node (the saved VM node predates the package; see roles/gpudirect_roce_qos/README.md).
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
    "public/repo/doca/2.9.1/debian12/x86_64": "24.10-1.1.4",
    "public/repo/doca/2.10.0/debian12/x86_64": "25.01-0.6.0",
    "public/repo/mlnx_ofed/24.10-1.1.4.0/debian12.5/x86_64": "24.10-1.1.4",
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    done = subprocess.run(["bash", BUILD], env=dict(os.environ, GPUDIRECT_CACHE=str(cache)),
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def stanza(repo, tree, package):
    with open(os.path.join(repo, "www", tree, "Packages")) as handle:
        found = [s for s in handle.read().split("\n\n") if re.search(r"^Package: %s$" % package, s, re.M)]
    assert len(found) == 1, package
    return found[0]


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_ofed_tree_lists_mlnx_tools(repo, tree):
    text = stanza(repo, tree, "mlnx-tools")
    assert re.search(r"^Version: %s$" % re.escape(TREES[tree]), text, re.M)
    assert re.search(r"^Depends: python3$", text, re.M)


def test_the_metapackage_depends_on_it_and_the_tool_runs(repo, tmp_path):
    tree = "public/repo/doca/2.9.1/debian12/x86_64"
    assert "mlnx-tools (= 24.10-1.1.4)" in stanza(repo, tree, "doca-ofed")
    deb = os.path.join(repo, "www", tree, "mlnx-tools_24.10-1.1.4_amd64.deb")
    files = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    assert sorted(line.split()[-1] for line in files.splitlines() if not line.endswith("/")) == ["./usr/bin/mlnx_qos"]
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-R", deb, str(root)], check=True)
    (tmp_path / "sys/sys/class/net/ens1f0np0").mkdir(parents=True)
    env = dict(os.environ, STANDIN_MLNX_QOS_STATE=str(tmp_path / "run"), STANDIN_MLNX_QOS_SYSROOT=str(tmp_path / "sys"))
    out = subprocess.run([sys.executable, str(root / "usr/bin/mlnx_qos"), "-i", "ens1f0np0", "--trust", "dscp"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "Priority trust state: dscp\n" in out
