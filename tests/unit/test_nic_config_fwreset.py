"""A ConnectX card that a warm reboot does not reset (issue #44, outcome 2).

* module_utils/gpudirect_nic_config.py reads ``mlxfwreset -d <dev> query`` (a published capture, a card that
  offers only the warm reboot laid out with mstflint's format strings, malformed ones: the sources are in
  tests/fixtures/nic_config/README.md) and keys what a card waits for;
* the stand-in (tests/harness/standin_repo/src/mft/mlxconfig) answers as mlxfwreset/mstfwreset, and its boot
  hook leaves a card with ``"warm_reboot_resets": false`` waiting until a cold power cycle (the marker);
* library/gpudirect_nic_config.py, with the node's record of the reboots asked for pending changes: a card
  whose change still waits after that reboot gets no second reboot - level 3 where it offers it (state reset),
  else a failure naming the card and the cold power cycle.
"""

import json
import os
import subprocess
import sys

import pytest

import gpudirect_nic_config as module
from ansible.module_utils import gpudirect_nic_config as utils
from conftest import PROJECT_FIXTURES, ROOT
from sysfs_tree import SysfsTree

STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "mft", "mlxconfig")
FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CX7 = "0000:17:00.0"
CX7B = "0000:31:00.0"
OLD_BOOT = "11111111-2222-3333-4444-555555555555"
NEW_BOOT = "66666666-7777-8888-9999-000000000000"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ------------------------------------------------------------------ the parser on published outputs

def test_published_bluefield3_query_offers_level_3():
    parsed = utils.parse_fwreset_query(fixture("mlxfwreset-bf3-query-published.txt"))
    assert sorted(parsed["levels"]) == [0, 1, 3, 4]
    assert parsed["levels"][3] == {"description": "Driver restart and PCI reset", "supported": True, "default": False}
    assert parsed["levels"][0]["default"] and parsed["levels"][0]["supported"]
    assert not parsed["levels"][1]["supported"]
    assert parsed["levels"][1]["description"] == 'Only ARM side will not remain up ("Immediate reset").'
    assert sorted(parsed["types"]) == [0, 1, 2, 3, 4] and parsed["types"][0]["default"]
    # "Not supported" in lower case in the sync rows, as mstflint prints them
    assert parsed["syncs"] == {0: {"description": "Tool is the owner", "supported": False, "default": False},
                               1: {"description": "Driver is the owner", "supported": True, "default": True}}
    assert utils.pick_fwreset_level(parsed) == 3


def test_a_card_that_offers_only_the_warm_reboot_has_no_level_to_run():
    parsed = utils.parse_fwreset_query(fixture("mlxfwreset-query-warm-reboot-only-shape.txt"))
    assert [n for n, row in sorted(parsed["levels"].items()) if row["supported"]] == [4]
    assert utils.pick_fwreset_level(parsed) is None
    assert "3 Driver restart and PCI reset (not supported)" in utils.fwreset_levels_text(parsed)
    assert "4 Warm Reboot (supported)" in utils.fwreset_levels_text(parsed)


@pytest.mark.parametrize("name, words", [
    ("mlxfwreset-bf3-query-truncated.txt", "no 'Reset-levels:' rows"),
    ("mlxfwreset-bf3-query-cut-row.txt", "line 4: could not read a level row"),
    ("mlxfwreset-query-error-shape.txt", "the tool printed an error: Failed to open device"),
])
def test_malformed_queries_are_refused_naming_why(name, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        utils.parse_fwreset_query(fixture(name))


def test_the_key_names_the_values_and_under_update_the_firmware():
    rows = [{"param": "ATS_ENABLED", "wanted": "0"}, {"param": "ADVANCED_PCI_SETTINGS", "wanted": "1"}]
    fw = {"state": "pending_reset", "pinned": "28.43.1014"}
    assert utils.reset_key(rows[:1], rows[1:], fw, "update") == "ADVANCED_PCI_SETTINGS=1, ATS_ENABLED=0, firmware 28.43.1014"
    assert utils.reset_key(rows, [], fw, "report") == "ADVANCED_PCI_SETTINGS=1, ATS_ENABLED=0"
    assert utils.reset_key([], [], {"state": "in_place", "pinned": "28.43.1014"}, "update") == ""
    record = {"cards": {CX7: {"pending": "ATS_ENABLED=0", "boot_id": OLD_BOOT}}}
    assert utils.reboot_already_done(record, CX7, "ATS_ENABLED=0", NEW_BOOT)
    assert not utils.reboot_already_done(record, CX7, "ATS_ENABLED=0", OLD_BOOT)       # not booted since
    assert not utils.reboot_already_done(record, CX7, "ATS_ENABLED=1", NEW_BOOT)       # another change
    assert not utils.reboot_already_done(record, CX7B, "ATS_ENABLED=0", NEW_BOOT)
    assert not utils.reboot_already_done({}, CX7, "", NEW_BOOT)


# ------------------------------------------------------------------ the stand-in

@pytest.fixture
def standin(tmp_path, monkeypatch):
    """PATH holds the stand-in as mstconfig, mlxconfig and the reset tools (tests pick); its state under tmp_path;
    the module reads the boot id from a file the test writes."""
    state = tmp_path / "standin-state"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("STANDIN_MLXCONFIG_STATE", str(state))
    os.symlink(sys.executable, str(bindir / "python3"))
    monkeypatch.setenv("PATH", str(bindir))
    boot_id = tmp_path / "boot_id"
    boot_id.write_text(OLD_BOOT + "\n")
    monkeypatch.setattr(module, "BOOT_ID", str(boot_id))

    class Standin:
        state_dir = state
        record = str(tmp_path / "nic-config-reset.json")

        @staticmethod
        def install(*names):
            for name in names:
                os.symlink(STANDIN, str(bindir / name))

        @staticmethod
        def run(*args, check=True):
            done = subprocess.run([sys.executable, STANDIN] + list(args), capture_output=True, text=True,
                                  env=dict(os.environ))
            if check:
                assert done.returncode == 0, done.stdout + done.stderr
            return done

        @staticmethod
        def card(pci):
            with open(str(state / (pci + ".json"))) as handle:
                return json.load(handle)

        @staticmethod
        def boot(new_id):
            """A reboot of the node: a new boot id, the stand-in's boot hook."""
            boot_id.write_text(new_id + "\n")
            Standin.run("--standin-boot")

    Standin.install("mstconfig", "mstfwreset")
    return Standin


def test_standin_query_is_the_published_layout(standin):
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.run("--standin-set", CX7, "reset_levels=0,3,4")
    out = standin.run("--as", "mlxfwreset", "-d", CX7, "query").stdout
    published = fixture("mlxfwreset-bf3-query-published.txt")
    # the levels and types sections as the BlueField-3 printed them (the card offers 0, 3 and 4 like it); the
    # published page lost the blanks the real tool pads each row's last column with ("{3}" empty: "-Supported     ")
    assert [line.rstrip() for line in out.split("\n\nReset-sync")[0].splitlines()] == \
        published.split("\n\nReset-sync")[0].splitlines()
    assert utils.pick_fwreset_level(utils.parse_fwreset_query(out)) == 3


def test_standin_warm_reboot_leaves_the_card_waiting_until_a_cold_power_cycle(standin):
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.run("--standin-set", CX7, "warm_reboot_resets=false")
    standin.run("-d", CX7, "-y", "set", "ATS_ENABLED=1")
    said = standin.run("--standin-boot").stdout
    assert "a warm reboot does not reset this card" in said
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 0
    standin.run("--standin-power-cycle")
    assert os.path.exists(str(standin.state_dir / "power-cycled"))
    assert "(cold power cycle)" in standin.run("--standin-boot").stdout
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 1
    assert not os.path.exists(str(standin.state_dir / "power-cycled"))     # consumed: the next boot is warm again


def test_standin_reset_level_3_loads_and_an_unoffered_level_is_refused_in_the_real_words(standin):
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.run("--standin-set", CX7, "warm_reboot_resets=false", "reset_levels=4")
    standin.run("-d", CX7, "-y", "set", "ATS_ENABLED=1")
    refused = standin.run("--as", "mstfwreset", "-d", CX7, "--level", "3", "-y", "reset", check=False)
    assert refused.returncode == 1
    assert refused.stdout == "-E- Reset-level '3' is not supported in the current state of this device.\n"
    standin.run("--standin-set", CX7, "reset_levels=3,4")
    asked = standin.run("--as", "mlxfwreset", "-d", CX7, "-l", "3", "reset", check=False)
    assert asked.returncode == 1 and "-E- Aborted by user." in asked.stdout
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 0
    done = standin.run("--as", "mlxfwreset", "-d", CX7, "-l", "3", "-y", "reset").stdout
    assert "3: Driver restart and PCI reset" in done and done.endswith("-I- FW was loaded successfully.\n")
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 1


# ------------------------------------------------------------------ the module, with the record

def sysfs(tmp_path, cards=(CX7,)):
    tree = SysfsTree(tmp_path / "root")
    for card in cards:
        tree.add_nic(card, device=0x1021)
    return tree


def knobs(tree, standin, **extra):
    return dict({"root": tree.root, "params": {"ATS_ENABLED": True}, "reset_record": standin.record}, **extra)


def write_record(standin, result):
    """What the role does once it asked for the reboot: keep the module's reset_record on the node."""
    with open(standin.record, "w") as handle:
        json.dump(result["reset_record"], handle)


def card_of(result, pci=CX7):
    return [c for c in result["devices"] if c["pci"] == pci][0]


def set_and_reboot(tmp_path, standin, run_module, cards=(CX7,), levels="3,4"):
    """Set ATS_ENABLED=1 on cards a warm reboot does not reset, record the reboot asked for, reboot."""
    tree = sysfs(tmp_path, cards)
    for pci in cards:
        standin.run("--standin-add", pci, "ConnectX7")
        standin.run("--standin-set", pci, "warm_reboot_resets=false", "reset_levels=" + levels)
    applied = run_module(module, knobs(tree, standin, state="applied"))
    assert applied["reset_reason"].startswith(CX7 + " ATS_ENABLED=1")
    planned = run_module(module, knobs(tree, standin))          # the role reads the cards again, then keeps the record
    assert planned["reset_record"] == {"cards": dict((pci, {"pending": "ATS_ENABLED=1", "boot_id": OLD_BOOT})
                                                     for pci in cards)}
    write_record(standin, planned)
    standin.boot(NEW_BOOT)
    return tree


def test_a_change_a_reboot_did_not_load_gets_level_3_and_no_second_reboot(tmp_path, standin, run_module):
    tree = set_and_reboot(tmp_path, standin, run_module)
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 0          # the warm reboot did not reset it
    planned = run_module(module, knobs(tree, standin))
    card = card_of(planned)
    assert card["reset"]["rebooted"] and card["reset"]["level"] == 3 and card["reset"]["recorded_boot_id"] == OLD_BOOT
    assert planned["reset_due"] == [CX7] and planned["power_cycle"] == []
    assert planned["reset_reason"] == ""                                        # never a second reboot
    assert planned["disruption"] == ["%s (ConnectX7): firmware reset (mstfwreset level 3, Driver restart and PCI reset) "
                                     "to load ATS_ENABLED=1: the reboot asked for it (boot %s) did not reset the card; "
                                     "no second reboot" % (CX7, OLD_BOOT)]
    # the record keeps the boot of the reboot that happened
    assert planned["reset_record"]["cards"][CX7]["boot_id"] == OLD_BOOT

    checked = run_module(module, knobs(tree, standin, state="reset"), check_mode=True)
    assert checked["changed"] is True and checked["fwreset_done"] == []
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 0

    reset = run_module(module, knobs(tree, standin, state="reset"))
    assert reset["changed"] is True and reset["fwreset_done"] == [CX7]
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 1
    assert card_of(reset)["reset"]["done"] and card_of(reset)["reset"]["loaded"] == "ATS_ENABLED=1"
    assert reset["disruption"] == [] and reset["reset_reason"] == "" and reset["reset_record"] == {}

    after = run_module(module, knobs(tree, standin))
    assert after["changes"] == [] and after["disruption"] == [] and after["reset_record"] == {}


def test_a_card_without_level_3_fails_naming_the_cold_power_cycle(tmp_path, standin, run_module):
    tree = set_and_reboot(tmp_path, standin, run_module, cards=(CX7, CX7B), levels="4")
    standin.run("--standin-set", CX7, "reset_levels=3,4")       # the first card offers level 3, the second does not
    planned = run_module(module, knobs(tree, standin))
    assert planned["reset_due"] == [CX7] and planned["reset_reason"] == ""
    assert len(planned["power_cycle"]) == 1
    sentence = planned["power_cycle"][0]
    assert sentence.startswith("%s (ConnectX7): ATS_ENABLED=1 still waits for a firmware reset after the reboot asked for "
                               "it (boot %s): a warm reboot does not reset this card" % (CX7B, OLD_BOOT))
    assert "level 3, Driver restart and PCI reset, is needed; the card offers: 0 " in sentence
    assert "4 Warm Reboot (supported)" in sentence
    assert "It needs a cold power cycle" in sentence and "then run site.yml again" in sentence
    assert sentence in planned["disruption"]

    failed = run_module(module, knobs(tree, standin, state="reset"))
    assert failed["failed"] is True
    assert failed["msg"].startswith(sentence)
    assert "No reboot was asked for" in failed["msg"] and failed["fwreset_done"] == [CX7]
    # the card that offers level 3 was reset; the other still waits, and a second run plans no reboot for it
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 1
    assert standin.card(CX7B)["params"]["ATS_ENABLED"]["current"] == 0
    again = run_module(module, knobs(tree, standin))
    assert again["reset_reason"] == "" and again["power_cycle"] == planned["power_cycle"]
    # the cold power cycle loads it; the run after it finds nothing waiting
    standin.run("--standin-power-cycle")
    standin.boot("abababab-0000-0000-0000-000000000000")
    after = run_module(module, knobs(tree, standin))
    assert after["changes"] == [] and after["power_cycle"] == [] and after["reset_record"] == {}


def test_a_reboot_not_yet_done_or_another_change_asks_the_reboot_as_before(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    standin.run("-d", CX7, "-y", "set", "ATS_ENABLED=1")
    with open(standin.record, "w") as handle:
        json.dump({"cards": {CX7: {"pending": "ATS_ENABLED=1", "boot_id": OLD_BOOT}}}, handle)
    same_boot = run_module(module, knobs(tree, standin))          # the reboot asked for is still to come
    assert same_boot["reset_reason"] == CX7 + " ATS_ENABLED=1" and same_boot["reset_due"] == []
    with open(standin.record, "w") as handle:
        json.dump({"cards": {CX7: {"pending": "ATS_ENABLED=0", "boot_id": NEW_BOOT}}}, handle)
    other = run_module(module, knobs(tree, standin))              # the record is of another change
    assert other["reset_reason"] == CX7 + " ATS_ENABLED=1" and other["power_cycle"] == []
    assert other["reset_record"] == {"cards": {CX7: {"pending": "ATS_ENABLED=1", "boot_id": OLD_BOOT}}}


def test_no_reset_tool_or_the_knob_off_names_the_power_cycle(tmp_path, standin, run_module):
    tree = set_and_reboot(tmp_path, standin, run_module)
    off = run_module(module, knobs(tree, standin, fwreset=False))
    assert off["reset_due"] == [] and "gpudirect_nic_config_fwreset is false" in off["power_cycle"][0]
    os.remove(str(standin.state_dir.parent / "bin" / "mstfwreset"))
    missing = run_module(module, knobs(tree, standin))
    assert "neither mlxfwreset (package mft (NVIDIA Firmware Tools)) nor mstfwreset (package mstflint) is installed" \
        in missing["power_cycle"][0]
    assert missing["reset_reason"] == ""


def test_a_damaged_record_fails_naming_it(tmp_path, standin, run_module):
    tree = sysfs(tmp_path)
    standin.run("--standin-add", CX7, "ConnectX7")
    with open(standin.record, "w") as handle:
        handle.write('{"cards": ')
    result = run_module(module, knobs(tree, standin))
    assert result["failed"] is True
    assert result["msg"].startswith("the record of the reboots asked for pending ConnectX changes, %s, cannot be read"
                                    % standin.record)
    assert "Remove it" in result["msg"]


@pytest.mark.parametrize("name, rc, words", [
    ("mlxfwreset-bf3-query-truncated.txt", 0, "no 'Reset-levels:' rows"),
    ("mlxfwreset-query-error-shape.txt", 1, "the tool printed an error: Failed to open device"),
])
def test_a_reset_query_that_cannot_be_read_names_it_and_the_power_cycle(tmp_path, standin, run_module, name, rc, words):
    tree = set_and_reboot(tmp_path, standin, run_module)
    # mstfwreset prints a published output cut short, or an error, instead of the stand-in's query (shell
    # built-ins only: PATH holds the test's tools alone)
    tool = standin.state_dir.parent / "bin" / "mstfwreset"
    os.unlink(str(tool))
    tool.write_text("#!/bin/sh\nwhile IFS= read -r line; do printf '%%s\\n' \"$line\"; done < '%s'\nexit %d\n"
                    % (os.path.join(FIXTURES, name), rc))
    tool.chmod(0o755)
    planned = run_module(module, knobs(tree, standin))
    assert planned["reset_due"] == [] and planned["reset_reason"] == ""
    assert "its reset levels could not be read (mstfwreset -d %s query: %s" % (CX7, words) in planned["power_cycle"][0]
    failed = run_module(module, knobs(tree, standin, state="reset"))
    assert failed["failed"] is True and "It needs a cold power cycle" in failed["msg"]
    assert standin.card(CX7)["params"]["ATS_ENABLED"]["current"] == 0
