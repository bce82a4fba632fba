"""module_utils/gpudirect_versions.py and the decisions built on it, on real vendor strings.

Every string comes from tests/fixtures/vendor_strings/versions.yml, which names where
each was seen (a public issue, a page, or a capture on the lent GPU node).
"""
import importlib.util
import os

import pytest
import yaml
from ansible.module_utils import gpudirect_nvidia_plan as nvplan
from ansible.module_utils import gpudirect_ofed as ofed
from ansible.module_utils import gpudirect_versions as v

from ansible.module_utils import gpudirect_facts_collector as collector
from ansible.module_utils import gpudirect_peermem as peermem
import gpu_node_sim as sim
from conftest import PROJECT_FIXTURES, ROOT

with open(os.path.join(PROJECT_FIXTURES, "vendor_strings", "versions.yml"), encoding="utf-8") as _handle:
    STRINGS = yaml.safe_load(_handle)

with open(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "vars", "main.yml"), encoding="utf-8") as _handle:
    DOCA_TABLE = yaml.safe_load(_handle)["__gpudirect_mlnx_ofed_doca_ofed_versions"]


def entries(section):
    return pytest.mark.parametrize("entry", STRINGS[section], ids=lambda e: e["text"].splitlines()[0][:60])


def test_every_fixture_names_its_source():
    for section, items in STRINGS.items():
        assert items, section
        for entry in items:
            assert str(entry.get("source") or "").strip(), (section, entry["text"])


# --- the parsers on real strings ------------------------------------------------

@entries("ofed_info_s")
def test_ofed_info_s(entry):
    expected = {"flavor": entry["flavor"], "version": entry["version"], "parts": entry["parts"]}
    assert v.parse_ofed_info_s(entry["text"]) == expected


@entries("ofed_info_s")
def test_ofed_info_s_with_colour_and_blank_lines(entry):
    coloured = "\n  \n\x1b[1m" + entry["text"].splitlines()[0] + "\x1b[0m\n"
    assert v.parse_ofed_info_s(coloured)["version"] == entry["version"]


@entries("ofed_info_n")
def test_ofed_info_n(entry):
    assert v.parse_ofed_info_n(entry["text"]) == {"version": entry["version"], "parts": entry["parts"]}


@entries("package_versions")
def test_package_version(entry):
    assert v.parse_package_version(entry["text"]) == {
        "epoch": entry["epoch"], "upstream": entry["upstream"], "revision": entry["revision"],
        "version": entry["text"]}
    if "rdma_core_major" in entry:
        assert v.parse_rdma_core_version(entry["text"])["major"] == entry["rdma_core_major"]
        assert peermem.rdma_core_major(entry["text"]) == entry["rdma_core_major"]


@entries("driver_versions")
def test_driver_version(entry):
    expected = {"version": entry["text"], "branch": entry["branch"], "parts": entry["parts"]}
    assert v.parse_driver_version(entry["text"]) == expected


@entries("proc_driver_nvidia_version")
def test_proc_driver_version(entry):
    assert v.parse_proc_driver_version(entry["text"]) == {
        "version": entry["version"], "flavor": entry["flavor"], "arch": entry["arch"]}
    assert collector.parse_nvidia_version(entry["text"]) == {
        "loaded": True, "version": entry["version"], "flavor": entry["flavor"]}


def test_driver_package_versions_give_the_driver_version():
    # dpkg (Ubuntu revision) and rpm (epoch 3, EL release) forms of one driver
    assert nvplan._package_driver("580.95.05-0ubuntu1", "t") == "580.95.05"
    assert nvplan._package_driver("3:580.95.05-1.fc44", "t") == "580.95.05"
    assert nvplan._package_driver("", "t") == ""


def test_driver_version_is_exact_for_nvidia_driver_version():
    # gpudirect_nvidia_driver_version pins an exact version: numbers equal, leading zeros aside
    assert nvplan._differences("580.95.05", "open", "580", "580.95.5", "open") == []
    assert nvplan._differences("580.95.05", "open", "580", "580.105.08", "open") == [
        "version 580.95.05 installed, 580.105.08 wanted"]
    assert nvplan._differences("550.54.15", "open", "550", "550.54", "open") == ["version 550.54.15 installed, 550.54 wanted"]


# --- the matching rule ------------------------------------------------------------

@pytest.mark.parametrize("installed,wanted,expected", [
    ("24.10-1.1.4.0.200", "24.10-1.1.4", 0),      # DOCA 2.9.1's build suffix
    ("24.10-1.1.4", "24.10-1.1.4.0", 0),          # a missing trailing number counts as 0
    ("24.10-1.1.40", "24.10-1.1.4", 1),           # numbers, not text
    ("24.10-1.1.4.0.200", "24.10-1.1.5", -1),
    ("24.10-1.1.4.0.200", "24.10-1.1.4.0.201", -1),
    ("25.01-0.6.0", "24.10-1.1.4", 1),
    ("24.10-1.1.4", "25.01-0.6.0", -1),
    ("580.95.05", "580.95", 0),
    ("580.95.05", "580", 0),
    ("580.95.05", "580.95.5.1", -1),
    ("550.54", "550.54.15", -1),
])
def test_compare_wanted(installed, wanted, expected):
    assert v.compare_wanted(v.numbers(installed), v.numbers(wanted)) == expected


def test_compare_wanted_needs_a_wanted_version():
    with pytest.raises(v.VersionError):
        v.compare_wanted([24, 10], [])


# --- malformed input: a clear error naming the text ---------------------------------

@pytest.mark.parametrize("parser,text", [
    (v.parse_ofed_info_s, "-bash: ofed_info: command not found"),
    (v.parse_ofed_info_s, "MLNX_OFED_LINUX-5.8:"),
    (v.parse_ofed_info_s, "24.10-1.1.4"),
    (v.parse_ofed_info_n, "OFED-internal-24.10-1.1.4:"),
    (v.parse_ofed_info_n, "24.10"),
    (v.parse_package_version, "ii  libnccl2 2.28.3-1+cuda13.0"),
    (v.parse_package_version, "(none)"),
    (v.parse_driver_version, "580"),
    (v.parse_driver_version, "580.95.05.1"),
    (v.parse_driver_version, "v580.95.05"),
    (v.parse_proc_driver_version, "GCC version:  gcc version 15.3.0 (GCC)"),
])
def test_malformed_text_names_the_text(parser, text):
    with pytest.raises(v.VersionError) as error:
        parser(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("parser", [v.parse_ofed_info_s, v.parse_ofed_info_n, v.parse_package_version,
                                    v.parse_driver_version, v.parse_proc_driver_version])
@pytest.mark.parametrize("text", [None, "", " \n\n", 580])
def test_empty_or_no_text_is_an_error(parser, text):
    with pytest.raises(v.VersionError):
        parser(text)


def test_filters_turn_parser_errors_into_filter_errors_naming_the_knob():
    with pytest.raises(nvplan.PlanError, match="gpudirect_nvidia_driver_version: .*'abc'"):
        nvplan.decide({}, {"branch": "580", "version": "abc", "os_family": "Debian"})


# --- the probes that run as plain scripts on the host agree with the parser -------------

def _load_probe(role, name):
    path = os.path.join(ROOT, "roles", role, "files", name)
    spec = importlib.util.spec_from_file_location("_probe_" + role, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@entries("proc_driver_nvidia_version")
def test_probes_read_proc_version_like_the_parser(entry, monkeypatch):
    """Without modinfo the version and flavour come from /proc/driver/nvidia/version alone:
    the gpudirect_nvidia_driver plan reads it through gpudirect_versions; the peer-memory probe, copied
    to the host alone (ansible.builtin.script), must read it the same way."""
    files = {"/proc/driver/nvidia/version": entry["text"], "/sys/module/nvidia/version": ""}
    host = sim.Host("6.8.0-90-generic", files=files).plan_host()
    found = nvplan.probe_module(host, "6.8.0-90-generic")
    assert (found["loaded_version"], found["flavor"]) == (entry["version"], entry["flavor"])


# --- the stand-in repository prints what the real releases print ----------------------

def test_standin_doca_releases_print_the_real_strings():
    """tests/harness/standin_repo/build.sh's DOCA_RELEASES (what its ofed_info -s prints) agree
    with the real strings of the fixtures, and the role's table matches each of them."""
    import re
    with open(os.path.join(ROOT, "tests", "harness", "standin_repo", "build.sh"), encoding="utf-8") as handle:
        releases = re.search(r"^DOCA_RELEASES=\((.*)\)$", handle.read(), re.M).group(1)
    printed = dict(pair.split() for pair in re.findall(r'"([^"]+)"', releases))
    real = {e["doca"]: e["version"] for e in STRINGS["ofed_info_s"] if e.get("doca")}
    assert printed == real
    for doca, version in printed.items():
        assert ofed.decide_action("OFED-internal-%s:" % version, "doca", DOCA_TABLE[doca])["action"] == "none"


# --------------------------------------------------------------------------
# strip_ansi: the one ANSI pattern (issue #31, outcome 4)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("text, plain", [
    ("\x1b[1;31mMLNX_OFED_LINUX-5.8-3.0.7.0:\x1b[0m", "MLNX_OFED_LINUX-5.8-3.0.7.0:"),
    ("\x1b[4mGPU0\x1b[0m\tNIC0", "GPU0\tNIC0"),          # nvidia-smi's underlined header
    ("\x1b[?25l\x1b[2Kdkms-3.0.10", "dkms-3.0.10"),     # private parameter, erase line
    ("\x1b[38:5:1mred\x1b[m", "red"),                   # colon sub-parameters: ECMA-48 0x30-0x3F
    ("\x1b[>0c\x1b[=1h", ""),                           # the other private-parameter bytes
    ("\x1b[1 q580.95.05", "580.95.05"),                 # an intermediate byte before the final one
    ("no escapes: [0m stays", "no escapes: [0m stays"),
    ("", ""),
    (None, ""),
])
def test_strip_ansi_removes_every_csi_sequence_and_nothing_else(text, plain):
    assert v.strip_ansi(text) == plain


def test_strip_ansi_covers_what_both_old_patterns_removed():
    """The secure-boot copy (\\x1b[ digits/; letter) and the versions copy (\\x1b[ digits/;/? any final
    byte, intermediates) were both subsets of the ECMA-48 CSI pattern the one helper uses."""
    import re
    narrow = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
    broad = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
    for sample in ("\x1b[0m", "\x1b[1;32m", "\x1b[?25h", "\x1b[2 q", "\x1b[5~", "\x1b[38;5;1m"):
        assert v.strip_ansi("a" + sample + "b") == "ab"
        assert narrow.sub("", sample) == "" or broad.sub("", sample) == ""


# --------------------------------------------------------------------------
# the version patterns that lived in other modules (issue #31, outcome 4)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("text, version", [
    ("dkms-3.0.10\n", (3, 0, 10)), ("dkms-2.8\n", (2, 8, 0)), ("\x1b[1mdkms-2.8.7\x1b[0m", (2, 8, 7)),
])
def test_parse_dkms_version(text, version):
    assert v.parse_dkms_version(text) == version


@pytest.mark.parametrize("text", ["dkms: command not found\n", "", None, "dkms-three"])
def test_parse_dkms_version_malformed(text):
    with pytest.raises(v.VersionError, match="dkms --version printed no version"):
        v.parse_dkms_version(text)


@pytest.mark.parametrize("release, parts", [
    ("6.18.44-fc-v657-gpu", (6, 18)), ("5.14.0-427.13.1.el9_4.x86_64", (5, 14)), ("garbage", None),
    ("", None), (None, None), ("6", None),
])
def test_parse_kernel_version(release, parts):
    assert v.parse_kernel_version(release) == parts


@pytest.mark.parametrize("release, ok", [
    ("6.1.0-50-amd64", True), ("6.8.0-1013-nvidia-64k", True), ("6.18.44-fc-v657-gpu", True),
    ("6.8", True), ("6", False), ("6.8.0--x", False), ("../6.8", False),
])
def test_kernel_release_pattern(release, ok):
    assert bool(v.KERNEL_RELEASE_RE.match(release)) is ok


def test_find_nccl_version():
    assert v.find_nccl_version("# NCCL version 2.21.5+cuda12.4") == "2.21.5+cuda12.4"
    assert v.find_nccl_version("#  Rank  0 Group  0 Pid 1 on gpu01") is None
    assert v.find_nccl_version(None) is None


# ConnectX firmware versions (gpudirect_nic_config_firmware): flint/mstflint print "FW Version:" with
# the version alone (tests/fixtures/nic_config/mstflint-cx6-query-ironic-test.txt, openstack/ironic-
# python-agent's test capture) or followed by more; an admin pins N.N.N.
@pytest.mark.parametrize("text, version", [
    ("20.35.1012", "20.35.1012"),
    ("2.42.5000 (build 12)", "2.42.5000"),
    ("28.043.1014", "28.43.1014"),
    ("", None),
    ("N/A", None),
    ("28.43", None),
])
def test_firmware_version_from_what_flint_prints(text, version):
    assert v.parse_firmware_version(text) == version


@pytest.mark.parametrize("pin, ok", [("28.43.1014", True), ("28.43", False), ("28.43.1014 ", False),
                                     ("latest", False), ("rel-28_43_1014", False)])
def test_a_pinned_firmware_version_is_n_n_n(pin, ok):
    assert bool(v.FIRMWARE_VERSION_RE.match(pin)) is ok
