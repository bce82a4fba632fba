"""module_utils/gpudirect_dpkg.py: the one reader of dpkg-query's package lines (issue #31,
outcome 4), used by gpudirect_plan_mlnx_ofed/gpudirect_ofed, gpudirect_nvidia_plan, gpudirect_peermem and
gpudirect_loopback_packages (the gpudirect_verify role's missing-packages filter)."""

import os

import pytest

from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_dpkg as dpkg

import gpudirect_dpkg
from conftest import PROJECT_FIXTURES

# -f='${Package} ${Version} ${db:Status-Abbrev}\n': dpkg prints the error flag as a blank
# and an empty version for a package it knows but has not installed
OUTPUT = ("nvidia-open 580.95.05-0ubuntu1 hi \n"
          "nvidia-kernel-open-dkms 580.95.05-0ubuntu1 ii \n"
          "nvidia-smi 580.95.05-0ubuntu1 rc \n"
          "doca-ofed  un \n"
          "\n")


def test_argv_asks_for_the_format_the_parser_reads():
    assert dpkg.dpkg_query_argv(["a", "b*"]) == ["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n",
                                                 "a", "b*"]
    assert dpkg.dpkg_query_argv(("rdma-core",), "/usr/bin/dpkg-query")[0] == "/usr/bin/dpkg-query"


def test_records_in_order_with_installed_and_held():
    records = dpkg.parse_dpkg_query(OUTPUT)
    assert [(r["package"], r["version"], r["status"], r["installed"], r["held"]) for r in records] == [
        ("nvidia-open", "580.95.05-0ubuntu1", "hi", True, True),
        ("nvidia-kernel-open-dkms", "580.95.05-0ubuntu1", "ii", True, False),
        ("nvidia-smi", "580.95.05-0ubuntu1", "rc", False, False),
        ("doca-ofed", "", "un", False, False),
    ]


def test_installed_and_held():
    assert dpkg.installed_and_held(OUTPUT) == (
        {"nvidia-open": "580.95.05-0ubuntu1", "nvidia-kernel-open-dkms": "580.95.05-0ubuntu1"}, ["nvidia-open"])
    assert dpkg.installed_and_held("") == ({}, [])
    assert dpkg.installed_and_held(None) == ({}, [])


def test_status_first_order_of_the_roles_own_query():
    """roles/gpudirect_verify asks --showformat='${db:Status-Abbrev} ${Package} ${Version}\\n'."""
    text = "ii  gcc 4:13.2.0-7ubuntu1\nhi  libnccl2 2.28.3-1+cuda13.0\nun  make \nrc  old 1.0\n"
    assert dpkg.installed_and_held(text, ("status", "package", "version"), strict=True) == (
        {"gcc": "4:13.2.0-7ubuntu1", "libnccl2": "2.28.3-1+cuda13.0"}, ["libnccl2"])


@pytest.mark.parametrize("line", [
    "dpkg-query: no packages found matching nvidia-dkms-*",   # too many fields
    "nvidia-open",                                            # one field
    "nvidia-open 580.95.05-0ubuntu1 iiii",                    # a status that is not 2-3 letters
    "nvidia-open 580.95.05-0ubuntu1 gcc",                     # letters dpkg-query(1) does not print
    "ii  nvidia-open 580.95.05-0ubuntu1",                     # status first, read in the modules' order
    "nvidia-open ii",                                         # installed without a version
    "nvidia-open 580.95.05-0ubuntu1 ii extra",
])
def test_a_line_that_is_not_a_package_line(line):
    """Skipped by default (the modules hand dpkg's stdout over as it came), named when strict."""
    assert dpkg.parse_dpkg_query("gcc 1 ii \n" + line + "\n") == dpkg.parse_dpkg_query("gcc 1 ii \n")
    with pytest.raises(dpkg.DpkgQueryError, match=r"line 2 of dpkg-query is not '<package> <version> <status>'"):
        dpkg.parse_dpkg_query("gcc 1 ii \n" + line + "\n", strict=True)


def test_bytes_that_were_not_utf8_do_not_break_a_line():
    """run_command decodes with surrogate escapes or replacement; such a version is still one field."""
    assert dpkg.installed_and_held("odd 1.0\ufffd-1 ii \n") == ({"odd": "1.0\ufffd-1"}, [])


def test_fields_must_name_package_version_and_status():
    with pytest.raises(dpkg.DpkgQueryError, match="fields"):
        dpkg.parse_dpkg_query("", ("package", "status"))


def _fixture(name):
    with open(os.path.join(PROJECT_FIXTURES, "dpkg", name), encoding="utf-8") as handle:
        return handle.read()


def test_architecture_last_on_a_real_debian_node():
    """tests/fixtures/dpkg/bookworm-arch.txt: the query gpudirect_dpkg_query_argv(arch=true) runs
    (tests/fixtures/dpkg/README.md); an unmatched pattern leaves stdout as it is (rc 1)."""
    assert gpudirect_dpkg.gpudirect_dpkg_query_argv(["libc6"], arch=True)[2] == "-f=" + dpkg.DPKG_QUERY_FORMAT_ARCH
    records = dpkg.parse_dpkg_query(_fixture("bookworm-arch.txt"), dpkg.FIELDS_ARCH, strict=True)
    assert [(r["package"], r["version"], r["arch"], r["installed"]) for r in records] == [
        ("bash", "5.2.15-2+b8", "amd64", True), ("libc6", "2.36-9+deb12u14", "amd64", True),
        ("libgcc-s1", "12.2.0-14+deb12u1", "amd64", True), ("podman", "4.3.1+ds1-8+deb12u1+b3", "amd64", True)]
    # read without the architecture, the same lines are not package lines: named, not misread
    with pytest.raises(dpkg.DpkgQueryError, match="line 1 of dpkg-query"):
        dpkg.parse_dpkg_query(_fixture("bookworm-arch.txt"), strict=True)


def test_installed_filter_gives_package_facts_shape():
    text = _fixture("bookworm-arch.txt") + "linux-image-6.1.0-40-amd64 6.1.153-1 rc  amd64\nlibc6 2.36-9+deb12u14 ii  i386\n" \
        "linux-headers-amd64  un  amd64\n"
    installed = gpudirect_dpkg.gpudirect_dpkg_installed(text, arch=True)
    assert installed["libc6"] == [{"version": "2.36-9+deb12u14", "arch": "amd64"},
                                  {"version": "2.36-9+deb12u14", "arch": "i386"}]
    assert "linux-image-6.1.0-40-amd64" not in installed and "linux-headers-amd64" not in installed
    assert gpudirect_dpkg.gpudirect_dpkg_installed(OUTPUT) == {
        "nvidia-open": [{"version": "580.95.05-0ubuntu1", "arch": ""}],
        "nvidia-kernel-open-dkms": [{"version": "580.95.05-0ubuntu1", "arch": ""}]}
    assert gpudirect_dpkg.gpudirect_dpkg_installed("") == {}


def test_installed_filter_names_what_it_cannot_read():
    with pytest.raises(AnsibleFilterError, match=r"gpudirect_dpkg_installed: line 1 of dpkg-query .*arch=true"):
        gpudirect_dpkg.gpudirect_dpkg_installed("ii  gcc 4:12.2.0-3\n", arch=True)
    with pytest.raises(AnsibleFilterError, match="line 2 of dpkg-query"):
        gpudirect_dpkg.gpudirect_dpkg_installed("gcc 1 ii \ndpkg-query: no packages found matching x\n")


def test_held_filter_on_a_converged_vm_node():
    """tests/fixtures/dpkg/vm-node-held.txt: the rdma VM node after converge holds what the roles
    installed; the roles hold only what this filter does not list, so the loop is empty there."""
    held = gpudirect_dpkg.gpudirect_dpkg_held(_fixture("vm-node-held.txt"))
    assert held == ["doca-ofed", "gdrcopy-tests", "gdrdrv-dkms", "libgdrapi", "linux-image-6.1.0-50-amd64",
                    "linux-image-amd64", "nvidia-driver-cuda", "nvidia-persistenced", "nvidia-smi"]
    # the driver role's hold list on that node: nothing left to hold but what dpkg does not know
    wanted = ["nvidia-kernel-dkms", "nvidia-driver-cuda", "nvidia-persistenced", "nvidia-smi"]
    assert [p for p in wanted if p not in held] == ["nvidia-kernel-dkms"]
    assert "nvidia-kernel-dkms" not in gpudirect_dpkg.gpudirect_dpkg_installed(_fixture("vm-node-held.txt"))


def test_held_filter_reads_only_the_wanted_action():
    # hi: held and installed; ii installed, rc removed, un unknown: none held
    assert gpudirect_dpkg.gpudirect_dpkg_held(OUTPUT) == ["nvidia-open"]
    assert gpudirect_dpkg.gpudirect_dpkg_held("linux-image-amd64  hn \n") == ["linux-image-amd64"]
    assert gpudirect_dpkg.gpudirect_dpkg_held("") == []


def test_held_filter_names_what_it_cannot_read():
    with pytest.raises(AnsibleFilterError, match=r"gpudirect_dpkg_held: line 1 of dpkg-query"):
        gpudirect_dpkg.gpudirect_dpkg_held("Desired=Unknown/Install/Remove/Purge/Hold\n")
