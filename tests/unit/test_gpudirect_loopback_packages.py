"""Which build packages of the loopback helper are missing (plugin_utils/gpudirect_loopback_packages.py),
read from the package database the way roles/gpudirect_verify/tasks/build_deps.yml asks it."""

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_loopback_packages as packages

import gpudirect_dpkg
import gpudirect_verify
from conftest import PROJECT_FIXTURES

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "gpudirect_verify")


# the order the capture below was taken in
CAPTURE_FIELDS = ("status", "package", "version")


def _vendor_dpkg():
    """The lent H100 node's dpkg-query output (tests/fixtures/gpu_node/h100/vendor.txt, taken with
    -f='${db:Status-Abbrev} ${Package} ${Version}\\n' and filtered to the GPU/RDMA packages)."""
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "vendor.txt")) as handle:
        text = handle.read()
    section = text.split("=== dpkg-query", 1)[1].split("\n", 1)[1].split("\n===", 1)[0]
    return section


def test_the_nodes_dpkg_output():
    text = _vendor_dpkg()
    installed = packages.installed_packages(text, "dpkg", CAPTURE_FIELDS)
    assert {"libibverbs-dev", "libibverbs1", "ibverbs-providers"} <= installed
    assert "libnccl2" in installed          # "hi": held, and installed
    assert packages.missing_packages(text, ["gcc", "libc6-dev", "libibverbs-dev"], "dpkg", CAPTURE_FIELDS) == [
        "gcc", "libc6-dev"]
    # the same lines in the order the role asks for (gpudirect_dpkg_query_argv) read the same
    reordered = "".join("%s %s %s\n" % (w[1], w[2] if len(w) > 2 else "", w[0])
                        for w in (line.split() for line in text.splitlines() if line.strip()))
    assert packages.installed_packages(reordered, "dpkg") == installed
    with pytest.raises(packages.PackageQueryError, match="line 1 of dpkg-query"):
        packages.installed_packages(text, "dpkg")   # status-first lines read in the role's order


def test_dpkg_states_that_are_not_installed():
    # dpkg-query(1): db:Status-Abbrev is desired action, package status, error flag
    text = "gcc 4:13.2.0-7ubuntu1 rc \nlibc6-dev  un \nlibibverbs-dev 50.0-2ubuntu0.2 ii \ncpp 4:13.2.0 iU \n"
    assert packages.missing_packages(text, ["gcc", "libc6-dev", "libibverbs-dev", "cpp"], "dpkg") == [
        "gcc", "libc6-dev", "cpp"]


def test_rpm_names():
    text = "gcc\nglibc-devel\nlibibverbs\n"
    assert packages.missing_packages(text, ["gcc", "glibc-devel", "rdma-core-devel"], "rpm") == ["rdma-core-devel"]
    assert packages.missing_packages(text, ["gcc"], "rpm") == []


def test_output_that_is_not_the_query_is_refused():
    with pytest.raises(packages.PackageQueryError, match="line 2 of dpkg-query"):
        packages.installed_packages("gcc 1 ii \ndpkg-query: error: something\n", "dpkg")
    with pytest.raises(packages.PackageQueryError, match="unknown package manager 'apt'"):
        packages.installed_packages("", "apt")
    with pytest.raises(AnsibleFilterError, match="gpudirect_verify_missing_packages: line 1"):
        gpudirect_verify.gpudirect_verify_missing_packages("garbage\n", ["gcc"], "dpkg")


def test_the_role_asks_each_manager_in_the_parsed_format():
    with open(os.path.join(ROLE, "vars", "main.yml")) as handle:
        query = yaml.safe_load(handle)["__gpudirect_verify_package_query"]
    assert query["dpkg"] == "{{ [] | gpudirect_dpkg_query_argv }}"
    assert gpudirect_dpkg.gpudirect_dpkg_query_argv([]) == ["dpkg-query", "-W",
                                                            "-f=${Package} ${Version} ${db:Status-Abbrev}\n"]
    assert query["rpm"] == ["rpm", "-qa", "--queryformat", "%{NAME}\n"]
    for family, manager in (("Debian", "dpkg"), ("RedHat", "rpm")):
        with open(os.path.join(ROLE, "vars", family + ".yml")) as handle:
            assert yaml.safe_load(handle)["__gpudirect_verify_package_manager"] == manager


def test_the_role_installs_only_missing_packages_and_reads_no_unchanged_flag():
    tasks_dir = os.path.join(ROLE, "tasks")
    text = "".join(open(os.path.join(tasks_dir, name)).read() for name in sorted(os.listdir(tasks_dir)))
    assert "gpudirect_state_unchanged" not in text
    with open(os.path.join(tasks_dir, "build_deps.yml")) as handle:
        tasks = yaml.safe_load(handle)
    install = [t for t in tasks if "ansible.builtin.package" in t]
    assert len(install) == 1 and install[0]["ansible.builtin.package"]["name"] == "{{ __gpudirect_verify_missing_packages }}"
    would = [t for t in tasks if "would install" in str(t.get("ansible.builtin.debug", {}).get("msg", ""))]
    assert len(would) == 1 and would[0]["changed_when"] is True
    # check mode is read in the role only where no module can answer (README: check mode):
    # build_deps.yml (apt cannot simulate without python3-apt), main.yml (the record), and
    # helper_copy.yml, which neither fetches nor copies a helper that check mode did not build
    # (and says so)
    counts = {name: open(os.path.join(tasks_dir, name)).read().count("ansible_check_mode")
              for name in sorted(os.listdir(tasks_dir))}
    assert {name: n for name, n in counts.items() if n} == {"build_deps.yml": 2, "helper_copy.yml": 2, "main.yml": 1}
