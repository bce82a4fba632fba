"""module_utils/gpudirect_dpkg.py: the one reader of dpkg-query's package lines (issue #31,
outcome 4), used by mlnx_ofed_plan/gpudirect_ofed, gpudirect_nvidia_plan, gpudirect_peermem and
gpudirect_loopback_packages (the gpudirect_verify role's missing-packages filter)."""

import pytest

from ansible.module_utils import gpudirect_dpkg as dpkg

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
