"""library/gpudirect_nic_config.py (issue #32, outcome 1) on a fake sysfs tree, against

* the stand-in mlxconfig/mstconfig (tests/harness/standin_repo/src/mft/mlxconfig), which keeps
  each fake card's Default / Current / Next Boot in a JSON file and loads Next Boot as Current
  when its boot hook runs, as a firmware reset does;
* a tool that prints the published outputs of tests/fixtures/nic_config/ (sources named in its
  README.md): mstconfig's Next Boot column alone, the three-column tables, a truncated one.
"""

import json
import os
import subprocess
import sys

import pytest

import gpudirect_nic_config as module
from conftest import PROJECT_FIXTURES, ROOT
from sysfs_tree import SysfsTree

STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "mft", "mlxconfig")
FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CX7 = "0000:17:00.0"
CX6 = "0000:4b:00.0"


def sysfs(tmp_path, cards=(CX7,)):
    """ConnectX PFs (and, for the first card, its second PF and a VF), an H100, a ConnectX-8
    switch port (a bridge: not a card)."""
    tree = SysfsTree(tmp_path / "root")
    tree.add_gpu("0000:03:00.0")
    tree.add_pci("0000:20:00.0", vendor=0x15B3, device=0x197C, pci_class=0x060400)
    for index, card in enumerate(cards):
        tree.add_nic(card, device=0x1021)
        if index == 0:
            tree.add_nic(card[:-1] + "1", device=0x1021)
            vf = card[:-4] + "00.2"
            tree.add_nic(vf, device=0x101E)
            tree.link(tree.rel(os.path.join(tree.pci_dirs[vf], "physfn")), tree.pci_dirs[card])
    return tree


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """PATH holds only the stand-in (as mstconfig, or mlxconfig too); its state under tmp_path."""
    state = tmp_path / "standin-state"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("STANDIN_MLXCONFIG_STATE", str(state))
    os.symlink(sys.executable, str(bindir / "python3"))               # the stand-in's interpreter
    monkeypatch.setenv("PATH", str(bindir))

    class Standin:
        state_dir = state

        @staticmethod
        def install(*names):
            for name in names:
                os.symlink(STANDIN, str(bindir / name))

        @staticmethod
        def run(*args):
            return subprocess.run([sys.executable, STANDIN] + list(args), check=True, capture_output=True, text=True,
                                  env=dict(os.environ)).stdout

        @staticmethod
        def card(pci):
            with open(str(state / (pci + ".json"))) as handle:
                return json.load(handle)

    Standin.install("mstconfig")
    return Standin


def args(tree, **extra):
    return dict({"root": tree.root}, **extra)


def card_of(result, pci=CX7):
    return [c for c in result["devices"] if c["pci"] == pci][0]


# ------------------------------------------------------------------ the stand-in tool itself

def test_standin_keeps_next_boot_until_the_boot_hook_runs(standin):
    standin.run("--standin-add", CX7, "ConnectX7")
    assert "ATS_ENABLED                         False(0)        False(0)        False(0)" in \
        standin.run("-d", CX7, "-e", "query")
    out = standin.run("-d", CX7, "-y", "set", "ATS_ENABLED=1")
    assert "Please reboot machine to load new configurations." in out
    after_set = standin.run("-d", CX7, "-e", "q")
    assert "*        ATS_ENABLED                         False(0)        False(0)        True(1)" in after_set
    standin.run("--standin-boot")
    after_boot = standin.run("-d", CX7, "-e", "q")
    assert "*        ATS_ENABLED                         False(0)        True(1)         True(1)" in after_boot
    # the module's parser reads what the stand-in prints, in both layouts
    parsed = module.parse_mlxconfig_query(after_boot)["devices"][0]
    assert parsed["params"]["ATS_ENABLED"]["current"]["value"] == 1
    assert module.parse_mlxconfig_query(standin.run("-d", CX7, "q"))["devices"][0]["columns"] == ["next_boot"]


def test_standin_knows_only_the_devices_of_its_state_dir(standin):
    result = subprocess.run([sys.executable, STANDIN, "-d", "0000:99:00.0", "q"], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout == "-E- Failed to open device: 0000:99:00.0\n"


# ------------------------------------------------------------------ the module on the stand-in

def test_nothing_wanted_queries_nothing(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    result = run_module(module, args(tree))
    assert result["changed"] is False
    assert result["changes"] == [] and result["disruption"] == []
    assert "nothing queried" in result["skip_reason"]
    # one card, both PFs, never the VF, the bridge or the GPU
    assert result["devices"] == [{"pci": CX7, "functions": [CX7, "0000:17:00.1"]}]


def test_no_card_returns_empty_with_a_reason(tmp_path, standin, run_module):
    tree = SysfsTree(tmp_path / "root")
    tree.add_gpu("0000:03:00.0")
    result = run_module(module, args(tree, profiles=["gpudirect"]))
    assert result["devices"] == [] and result["changed"] is False
    assert "no NVIDIA/Mellanox ConnectX physical function" in result["skip_reason"]


def test_profile_in_place_is_no_change_and_no_disruption(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    # the card's CNP_DSCP is 48, the profile's 4: set earlier and booted
    standin.run("-d", CX7, "-y", "set", "CNP_DSCP_P1=4", "CNP_DSCP_P2=4")
    standin.run("--standin-boot")
    before = standin.card(CX7)
    result = run_module(module, args(tree, profiles=["roce"], state="applied"))
    assert result["changed"] is False
    assert result["changes"] == [] and result["disruption"] == [] and result["needs_reset"] is False
    card = card_of(result)
    assert card["set_args"] == [] and card["pending"] == [] and card["set"] is False
    assert [r["param"] for r in card["in_place"]] == [
        "CNP_802P_PRIO_P1", "CNP_802P_PRIO_P2", "CNP_DSCP_P1", "CNP_DSCP_P2", "ROCE_CC_PRIO_MASK_P1",
        "ROCE_CC_PRIO_MASK_P2"]
    assert standin.card(CX7) == before


def test_param_planned_then_applied_waits_for_the_reset(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    wanted = {"params": {"ATS_ENABLED": True, "NUM_OF_VFS": 8}}
    planned = run_module(module, args(tree, **wanted))
    assert planned["changed"] is False
    assert planned["changes"] == ["0000:17:00.0 (ConnectX7): set ATS_ENABLED=1, NUM_OF_VFS=8; takes effect at "
                                  "the next firmware reset or reboot"]
    assert planned["disruption"] == ["0000:17:00.0 (ConnectX7): firmware reset or reboot to load ATS_ENABLED=1, "
                                     "NUM_OF_VFS=8"]
    assert card_of(planned)["set_args"] == ["ATS_ENABLED=1", "NUM_OF_VFS=8"]
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["next_boot"] == 0     # planned wrote nothing

    applied = run_module(module, args(tree, state="applied", **wanted))
    assert applied["changed"] is True and applied["needs_reset"] is True
    card = card_of(applied)
    assert card["set"] is True
    assert card["next_boot"] == {"ATS_ENABLED": "True(1)", "NUM_OF_VFS": "8"}
    assert card["current"] == {"ATS_ENABLED": "False(0)", "NUM_OF_VFS": "0"}
    assert applied["reset_reason"] == "0000:17:00.0 ATS_ENABLED=1, NUM_OF_VFS=8"
    params = standin.card(CX7)["params"]
    assert (params["ATS_ENABLED"]["current"], params["ATS_ENABLED"]["next_boot"]) == (0, 1)

    # before the reset: nothing to set, the values wait (still a disruption: the reboot is owed)
    waiting = run_module(module, args(tree, state="applied", **wanted))
    assert waiting["changed"] is False
    assert [r["param"] for r in card_of(waiting)["pending"]] == ["ATS_ENABLED", "NUM_OF_VFS"]
    assert waiting["changes"] == ["0000:17:00.0 (ConnectX7): ATS_ENABLED=1, NUM_OF_VFS=8 already set for the next "
                                  "boot (running ATS_ENABLED False(0), NUM_OF_VFS 0); waits for a firmware reset or "
                                  "reboot"]
    assert waiting["disruption"] == planned["disruption"]

    # after it: converged
    standin.run("--standin-boot")
    converged = run_module(module, args(tree, state="applied", **wanted))
    assert converged["changed"] is False and converged["changes"] == [] and converged["disruption"] == []
    assert card_of(converged)["current"] == {"ATS_ENABLED": "True(1)", "NUM_OF_VFS": "8"}


def test_gpudirect_profile_defers_what_the_firmware_hides(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    first = run_module(module, args(tree, profiles=["gpudirect"], state="applied"))
    card = card_of(first)
    assert card["set_args"] == ["ADVANCED_PCI_SETTINGS=1", "PCI_WR_ORDERING=1"]
    assert [r["param"] for r in card["deferred"]] == ["MAX_ACC_OUT_READ"]
    assert any("MAX_ACC_OUT_READ=0 shown by the firmware only once ADVANCED_PCI_SETTINGS=1" in c
               for c in first["changes"])
    standin.run("--standin-boot")
    second = run_module(module, args(tree, profiles=["gpudirect"], state="applied"))
    assert card_of(second)["deferred"] == []
    assert [r["param"] for r in card_of(second)["in_place"]] == [
        "ADVANCED_PCI_SETTINGS", "ATS_ENABLED", "MAX_ACC_OUT_READ", "PCI_WR_ORDERING"]
    assert second["changed"] is False and second["disruption"] == []


def test_card_without_a_parameter_is_reported_not_failed(tmp_path, standin, run_module):
    tree = sysfs(tmp_path, cards=(CX7, CX6))
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.run("--standin-add", CX6, "ConnectX6DX")                   # an EN card: no LINK_TYPE_P1
    result = run_module(module, args(tree, params={"LINK_TYPE_P1": "IB"}, state="applied"))
    assert result["unsupported"] == ["0000:4b:00.0: LINK_TYPE_P1"]
    assert card_of(result, CX6)["unsupported"] == [{"param": "LINK_TYPE_P1", "source": "raw"}]
    assert card_of(result, CX6)["needs_reset"] is False
    assert card_of(result, CX7)["set_args"] == ["LINK_TYPE_P1=1"]
    assert result["changed"] is True


def test_devices_restricts_and_refuses_an_unknown_address(tmp_path, standin, run_module):
    tree = sysfs(tmp_path, cards=(CX7, CX6))
    standin.run("--standin-add", CX6, "ConnectX6DX")
    result = run_module(module, args(tree, params={"ATS_ENABLED": 1}, devices=["4b:00.0"]))
    assert [c["pci"] for c in result["devices"]] == [CX6]
    bad = run_module(module, args(tree, params={"ATS_ENABLED": 1}, devices=["0000:17:00.2"]))
    assert bad["failed"] is True
    assert "0000:17:00.2 is not a ConnectX physical function" in bad["msg"]


def test_check_mode_changes_nothing(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    before = standin.card(CX7)
    result = run_module(module, args(tree, params={"SRIOV_EN": True}, state="applied"), check_mode=True)
    assert result["changed"] is True
    assert card_of(result)["set"] is False
    assert standin.card(CX7) == before


def test_mlxconfig_is_preferred_and_tool_can_be_forced(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.install("mlxconfig")
    assert run_module(module, args(tree, params={"SRIOV_EN": 1}))["tool"].endswith("/mlxconfig")
    assert run_module(module, args(tree, params={"SRIOV_EN": 1}, tool="mstconfig"))["tool"].endswith("/mstconfig")


def test_no_tool_names_the_packages_and_the_knob(tmp_path, monkeypatch, run_module):
    tree = sysfs(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = run_module(module, args(tree, profiles=["gpudirect"], state="applied"))
    assert result["failed"] is True
    for word in ("profiles gpudirect", "mft", "mstflint", "mlxconfig / mstconfig", CX7):
        assert word in result["msg"]


def test_a_plan_before_the_tool_is_installed_counts_the_reset_and_says_why(tmp_path, monkeypatch, run_module):
    """The plan pass on a new node runs before the OFED stage brings mstflint: the cards cannot be read, so the
    plan names the tool to install and counts the firmware reset the wanted values may need (the node is rolled,
    drained), instead of failing the plan pass or planning nothing."""
    tree = sysfs(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = run_module(module, args(tree, profiles=["gpudirect"]))
    assert not result.get("failed") and not result["changed"]
    assert "mstflint" in result["tool_missing"] and "profiles gpudirect" in result["tool_missing"]
    assert len(result["disruption"]) == 1 and CX7 in result["disruption"][0]
    assert "firmware reset or reboot" in result["disruption"][0]
    assert result["changes"] and "once mlxconfig / mstconfig is installed" in result["changes"][0]


@pytest.mark.parametrize("wanted, words", [
    ({"profiles": ["rdma"]}, "unknown profile 'rdma'"),
    ({"params": {"ats_enabled": 1}}, "not an mlxconfig parameter name"),
    ({"params": {"ATS_ENABLED": 2}}, "ATS_ENABLED: wanted true/false"),
    ({"profiles": ["gpudirect", "gpudirect_vm"]}, "disagree on ATS_ENABLED"),
])
def test_bad_knobs_fail_before_any_query(tmp_path, monkeypatch, run_module, wanted, words):
    tree = sysfs(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))                          # no tool: the knob check comes first
    result = run_module(module, args(tree, **wanted))
    assert result["failed"] is True and words in result["msg"] and "Nothing was changed" in result["msg"]


# ------------------------------------------------------------------ published outputs

@pytest.fixture
def fixture_tool(tmp_path, monkeypatch):
    """An mstconfig that prints one file of tests/fixtures/nic_config/ for any query (and,
    with no_e, refuses -e the way an older build rejects an option it lacks)."""
    bindir = tmp_path / "fixture-bin"
    bindir.mkdir()
    script = bindir / "mstconfig"
    monkeypatch.setenv("PATH", str(bindir))

    def use(name, no_e=False, set_rc=3):
        script.write_text("#!/bin/sh\n%s\ncase \" $* \" in *' set '*) echo '-E- set refused'; exit %d;; esac\n"
                          "/bin/cat '%s'\n" % (
                              "case \" $* \" in *' -e '*) echo '-E- Unknown option -e'; exit 1;; esac" if no_e else "",
                              set_rc, os.path.join(FIXTURES, name)))
        script.chmod(0o755)
    return use


def test_mstconfig_next_boot_only_published_output(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path, cards=(CX6,))
    fixture_tool("mstconfig-cx6dx-next-boot-only.txt", no_e=True)
    result = run_module(module, args(tree, profiles=["gpudirect"], params={"LINK_TYPE_P1": "ETH"}))
    card = card_of(result, CX6)
    assert (card["type"], card["part"]) == ("ConnectX6DX", "MCX623432AN-ADA_Ax")
    assert card["current_known"] is False and card["current"] == {}
    assert card["next_boot"]["PCI_WR_ORDERING"] == "per_mkey(0)"
    assert card["set_args"] == ["ADVANCED_PCI_SETTINGS=1", "PCI_WR_ORDERING=1"]
    assert [r["param"] for r in card["in_place"]] == ["ATS_ENABLED"]
    assert [r["param"] for r in card["deferred"]] == ["MAX_ACC_OUT_READ"]
    assert result["unsupported"] == ["0000:4b:00.0: LINK_TYPE_P1"]
    assert result["disruption"] == ["0000:4b:00.0 (ConnectX6DX): firmware reset or reboot to load "
                                    "ADVANCED_PCI_SETTINGS=1, PCI_WR_ORDERING=1"]


def test_three_column_published_output_sees_the_pending_value(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path)
    fixture_tool("mlxconfig-cx4-three-column-operator-test.txt")
    result = run_module(module, args(tree, params={"KEEP_IB_LINK_UP_P2": True, "MEMIC_SIZE_LIMIT": 0,
                                                   "KEEP_LINK_UP_ON_BOOT_P2": 1}))
    card = card_of(result)
    assert card["current_known"] is True
    assert [r["param"] for r in card["in_place"]] == ["KEEP_IB_LINK_UP_P2"]
    # Next Boot DISABLED(0) already, Current _256KB(1): set earlier, waits for the reset
    assert card["pending"] == [{"param": "MEMIC_SIZE_LIMIT", "wanted": "0", "current": "_256KB(1)",
                                "next_boot": "DISABLED(0)", "source": "raw"}]
    assert card["set_args"] == ["KEEP_LINK_UP_ON_BOOT_P2=1"]
    assert card["needs_reset"] is True


def test_three_column_table_without_a_device_header(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path)
    fixture_tool("mlxconfig-cx6lx-three-column-excerpt.txt")
    result = run_module(module, args(tree, params={"ROCE_NEXT_PROTOCOL": 254, "PROG_PARSE_GRAPH": True}))
    assert result["changes"] == ["0000:17:00.0 (ConnectX): set PROG_PARSE_GRAPH=1; takes effect at the next "
                                 "firmware reset or reboot"]


def test_truncated_output_fails_naming_the_device(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path, cards=(CX6,))
    fixture_tool("mstconfig-cx6dx-truncated.txt")
    result = run_module(module, args(tree, profiles=["gpudirect"]))
    assert result["failed"] is True
    assert result["msg"].startswith("mstconfig -d 0000:4b:00.0 query printed output this module cannot read")
    assert "PCI_ATOMIC_MODE" in result["msg"] and "nothing was changed" in result["msg"]


def test_device_the_tool_cannot_open_fails_naming_it(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path)
    fixture_tool("mlxconfig-error-open-device-shape.txt")
    result = run_module(module, args(tree, profiles=["roce"]))
    assert result["failed"] is True
    assert "mstconfig -d 0000:17:00.0 query failed" in result["msg"]
    assert "Failed to open device: 0000:99:00.0" in result["msg"] and "become" in result["msg"]


def test_a_set_the_tool_refuses_fails_naming_the_card(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path)
    fixture_tool("mlxconfig-cx4-three-column-operator-test.txt")
    result = run_module(module, args(tree, params={"KEEP_LINK_UP_ON_BOOT_P2": 1}, state="applied"))
    assert result["failed"] is True
    assert result["msg"].startswith("mstconfig -y -d 0000:17:00.0 set KEEP_LINK_UP_ON_BOOT_P2=1 failed (rc 3): "
                                    "-E- set refused")


def test_a_value_next_boot_does_not_hold_after_the_set_fails_naming_it(tmp_path, fixture_tool, run_module):
    tree = sysfs(tmp_path)
    fixture_tool("mlxconfig-cx4-three-column-operator-test.txt", set_rc=0)   # "sets", changes nothing
    result = run_module(module, args(tree, params={"KEEP_LINK_UP_ON_BOOT_P2": 1}, state="applied"))
    assert result["failed"] is True
    assert result["msg"].startswith("0000:17:00.0: KEEP_LINK_UP_ON_BOOT_P2 was set to 1, but the card's Next Boot "
                                    "reads False(0) after the set")
