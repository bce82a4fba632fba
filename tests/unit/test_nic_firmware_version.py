"""The firmware version policy of gpudirect_nic_config (issue #32, outcome 1): flint/mstflint query
parsing on the published outputs of tests/fixtures/nic_config/ (sources in its README.md), the
pinned-image knob's checks, the per-card decision, and the module's burn path against the stand-in
(tests/harness/standin_repo/src/mft/mlxconfig answering as mstflint/flint), run in place.
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest

import gpudirect_nic_config as module
from ansible.module_utils import gpudirect_nic_config as nic
from conftest import PROJECT_FIXTURES
from standin_mft import STANDIN, standin_on_path
from sysfs_tree import SysfsTree

FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CX7 = "0000:17:00.0"
CX7_PSID = "MT_0000000834"
SHA_A = "a" * 64


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ------------------------------------------------------------------ parser

@pytest.mark.parametrize("name, psid, flash, running, pending", [
    ("mstflint-cx6-query-ironic-test.txt", "MT_0000000228", "20.35.1012", "20.35.1012", None),
    ("mstflint-cx6-query-running-ironic-test.txt", "MT_0000000228", "20.35.1012", "20.34.1002", "20.35.1012"),
    ("flint-cx3-query-full-pending.txt", "MT_1170110023", "2.42.5000", "2.35.5100", "2.42.5000"),
])
def test_parse_published_queries(name, psid, flash, running, pending):
    parsed = nic.parse_flint_query(fixture(name))
    assert (parsed["psid"], parsed["flash"], parsed["running"], parsed["pending"]) == (psid, flash, running, pending)


def test_parse_keeps_the_other_fields_and_skips_continuation_lines():
    parsed = nic.parse_flint_query(fixture("flint-cx3-query-full-pending.txt"))
    assert parsed["image_type"] == "FS2" and parsed["product_version"] == "02.42.50.00"
    assert parsed["fields"]["PRS Name"] == "cx3-1_MCX311A.prs" and parsed["fields"]["VSD"] == ""
    assert nic.parse_flint_query(fixture("mstflint-cx6-query-ironic-test.txt"))["fields"]["Rom Info"].startswith(
        "type=UEFI")


def test_parse_tolerates_build_suffixes_and_extra_lines():
    text = ("-W- a warning line\nImage type:            FS4\nFW Version:            28.43.1014 (build 7)\n"
            "Some New Field:        x\nPSID:                  MT_0000000834\n")
    parsed = nic.parse_flint_query(text)
    assert (parsed["flash"], parsed["running"], parsed["pending"]) == ("28.43.1014", "28.43.1014", None)


@pytest.mark.parametrize("text, words", [
    (fixture("mstflint-cx6-query-truncated.txt"), "no 'PSID:' line"),
    (fixture("mstflint-query-error-open-shape.txt"), "the tool printed an error: Cannot open Device"),
    ("PSID:                  MT_0000000834\n", "no 'FW Version:' line"),
    ("FW Version:            N/A\nPSID:                  MT_0000000834\n", "could not read a version"),
    ("", "no 'PSID:' line"),
])
def test_parse_refuses_what_it_cannot_read(text, words):
    with pytest.raises(ValueError) as caught:
        nic.parse_flint_query(text)
    assert words in str(caught.value)


# ------------------------------------------------------------------ the knob

def pin(**extra):
    return dict({"psid": CX7_PSID, "version": "28.43.1014", "image": "/srv/fw/cx7.bin", "sha256": SHA_A}, **extra)


def test_pins_by_psid():
    pins = nic.validate_firmware_pins([pin(), pin(psid="MT_0000000228", image="https://fw.example/cx6.bin")])
    assert sorted(pins) == ["MT_0000000228", CX7_PSID] and pins[CX7_PSID]["version"] == "28.43.1014"


@pytest.mark.parametrize("entries, words", [
    ([pin(psid="cx7")], "gpudirect_nic_config_firmware[0]: psid 'cx7' is not a PSID"),
    ([pin(version="28.43")], "gpudirect_nic_config_firmware[0] (psid MT_0000000834): version '28.43' is not"),
    ([pin(sha256="abc")], "sha256 'abc' is not 64 hexadecimal digits"),
    ([pin(image="fw/cx7.bin")], "must be an absolute path on the node or an http(s) URL"),
    ([pin(), pin(image="/other.bin")], "gpudirect_nic_config_firmware[1]: psid MT_0000000834 is pinned twice"),
    ([{"psid": CX7_PSID}], "missing version, image, sha256"),
    ([pin(url="x")], "unknown key(s) url"),
])
def test_bad_pins_name_the_entry_and_the_knob(entries, words):
    with pytest.raises(ValueError) as caught:
        nic.validate_firmware_pins(entries)
    assert words in str(caught.value)


# ------------------------------------------------------------------ the decision

def query(flash, running=None, psid=CX7_PSID):
    running = running or flash
    return {"psid": psid, "flash": flash, "running": running, "pending": flash if flash != running else None}


@pytest.mark.parametrize("read, policy, state, burn", [
    (query("28.43.1014"), "update", "in_place", False),
    (query("28.40.1000"), "update", "to_update", True),
    (query("28.40.1000"), "report", "to_update", False),
    (query("28.43.1014", running="28.40.1000"), "update", "pending_reset", False),
    (query("28.42.1000", running="28.40.1000"), "update", "to_update", True),     # another image waits
    (query("28.40.1000", psid="MT_0000000228"), "update", "no_image", False),
    (None, "update", "not_read", False),
])
def test_plan_states(read, policy, state, burn):
    planned = nic.plan_firmware_version(read, nic.validate_firmware_pins([pin()]), policy)
    assert (planned["state"], planned["burn"]) == (state, burn)


# ------------------------------------------------------------------ the module, on the stand-in

@pytest.fixture
def node(tmp_path, monkeypatch):
    tree = SysfsTree(tmp_path / "root")
    tree.add_nic(CX7, device=0x1021)
    tree.add_nic("0000:17:00.1", device=0x1021)
    _bindir, state = standin_on_path(tmp_path, monkeypatch)
    subprocess.run([sys.executable, STANDIN, "--standin-add", CX7, "ConnectX7"], check=True)

    class Node:
        root = tree.root

        @staticmethod
        def image(version="28.43.1014", psid=CX7_PSID):
            path = tmp_path / ("fw-%s-%s.bin" % (psid, version))
            path.write_text(json.dumps({"standin_firmware_image": 1, "psid": psid, "version": version}))
            return str(path), hashlib.sha256(path.read_bytes()).hexdigest()

        @staticmethod
        def card():
            with open(str(state / (CX7 + ".json"))) as handle:
                data = json.load(handle)
            return data["fw_running"], data["fw_next"]

        @staticmethod
        def boot():
            subprocess.run([sys.executable, STANDIN, "--standin-boot"], check=True, capture_output=True)

    return Node


def pinned(node, **extra):
    path, sha = node.image()
    return [dict({"psid": CX7_PSID, "version": "28.43.1014", "image": path, "sha256": sha}, **extra)]


def test_empty_list_reads_no_firmware(node, run_module):
    result = run_module(module, {"root": node.root, "params": {"SRIOV_EN": True}})
    assert "firmware" not in result["devices"][0] and result["flash_tool"] is None


def test_report_policy_reports_and_changes_nothing(node, run_module):
    result = run_module(module, {"root": node.root, "firmware": pinned(node), "state": "applied"})
    assert result["changed"] is False and result["changes"] == [] and result["disruption"] == []
    assert result["reset_reason"] == "" and result["flash_tool"].endswith("/mstflint")
    fw = result["devices"][0]["firmware"]
    assert (fw["psid"], fw["running"], fw["pending"], fw["pinned"], fw["state"]) == (
        CX7_PSID, "28.40.1000", None, "28.43.1014", "to_update")
    assert result["firmware_report"] == ["0000:17:00.0 (ConnectX): firmware 28.40.1000, pinned 28.43.1014 for PSID "
                                         "MT_0000000834 (to_update; policy report: not updated)"]
    assert node.card() == ("28.40.1000", "28.40.1000")


def test_unpinned_psid_is_reported(node, run_module):
    result = run_module(module, {"root": node.root, "firmware": pinned(node, psid="MT_0000000228"),
                                 "firmware_policy": "update"})
    assert result["devices"][0]["firmware"]["state"] == "no_image" and result["disruption"] == []
    assert "PSID MT_0000000834 has no pinned image in gpudirect_nic_config_firmware" in result["firmware_report"][0]


def test_update_plans_burns_waits_for_the_reset_then_converges(node, run_module):
    args = {"root": node.root, "firmware": pinned(node), "firmware_policy": "update"}
    planned = run_module(module, args)
    assert planned["changed"] is False and node.card() == ("28.40.1000", "28.40.1000")
    assert planned["changes"] == ["0000:17:00.0 (ConnectX): firmware 28.40.1000 -> 28.43.1014 (%s); runs after the "
                                  "next firmware reset or reboot" % args["firmware"][0]["image"]]
    assert planned["disruption"] == ["0000:17:00.0 (ConnectX): firmware update 28.40.1000 -> 28.43.1014 needs a "
                                     "firmware reset or reboot"]
    assert planned["reset_reason"] == "0000:17:00.0 firmware 28.43.1014"

    checked = run_module(module, dict(args, state="applied"), check_mode=True)
    assert checked["changed"] is True and node.card() == ("28.40.1000", "28.40.1000")

    applied = run_module(module, dict(args, state="applied"))
    assert applied["changed"] is True and node.card() == ("28.40.1000", "28.43.1014")
    fw = applied["devices"][0]["firmware"]
    assert (fw["burned"], fw["state"], fw["pending"]) == (True, "pending_reset", "28.43.1014")
    assert applied["changes"][0].endswith(" burned; runs after the next firmware reset or reboot")

    waiting = run_module(module, dict(args, state="applied"))
    assert waiting["changed"] is False and waiting["changes"] == []
    assert waiting["devices"][0]["firmware"]["state"] == "pending_reset"
    assert waiting["disruption"] == ["0000:17:00.0 (ConnectX): firmware reset or reboot to run firmware 28.43.1014 "
                                     "(burned, running 28.40.1000)"]
    assert waiting["reset_reason"] == "0000:17:00.0 firmware 28.43.1014"

    node.boot()
    converged = run_module(module, dict(args, state="applied"))
    assert converged["devices"][0]["firmware"]["state"] == "in_place"
    assert converged["changes"] == converged["disruption"] == converged["firmware_report"] == []
    assert converged["reset_reason"] == "" and converged["changed"] is False


def test_nv_values_and_firmware_share_one_reset_reason(node, run_module):
    result = run_module(module, {"root": node.root, "params": {"SRIOV_EN": True}, "firmware": pinned(node),
                                 "firmware_policy": "update"})
    assert result["reset_reason"] == "0000:17:00.0 SRIOV_EN=1, firmware 28.43.1014"


def test_checksum_mismatch_fails_before_the_burn(node, run_module):
    result = run_module(module, {"root": node.root, "firmware": pinned(node, sha256=SHA_A),
                                 "firmware_policy": "update", "state": "applied"})
    assert result["failed"] is True
    assert "has sha256" in result["msg"] and "gpudirect_nic_config_firmware pins %s" % SHA_A in result["msg"]
    assert "Nothing was burned" in result["msg"] and node.card() == ("28.40.1000", "28.40.1000")


def test_psid_mismatch_of_the_image_is_refused_before_the_burn(node, run_module):
    path, sha = node.image(psid="MT_0000000999")
    result = run_module(module, {"root": node.root, "firmware_policy": "update", "state": "applied", "firmware": [
        {"psid": CX7_PSID, "version": "28.43.1014", "image": path, "sha256": sha}]})
    assert result["failed"] is True
    assert result["msg"].startswith("0000:17:00.0: card PSID MT_0000000834, image PSID MT_0000000999: burning it "
                                    "changes the card's PSID, refused while gpudirect_nic_config_firmware_allow_psid_"
                                    "change is false (image %s)." % path)
    assert "add image_psid: MT_0000000999 to the pin of MT_0000000834" in result["msg"]
    assert "Nothing was burned." in result["msg"] and node.card() == ("28.40.1000", "28.40.1000")


def test_an_image_of_another_version_is_refused_before_the_burn(node, run_module):
    path, sha = node.image(version="28.39.1002")   # the image is not the pinned version
    result = run_module(module, {"root": node.root, "firmware_policy": "update", "state": "applied", "firmware": [
        {"psid": CX7_PSID, "version": "28.43.1014", "image": path, "sha256": sha}]})
    assert result["failed"] is True and node.card() == ("28.40.1000", "28.40.1000")
    assert result["msg"] == ("0000:17:00.0: the image %s holds firmware 28.39.1002 (flint -i <image> query), but "
                             "gpudirect_nic_config_firmware pins version 28.43.1014 for PSID MT_0000000834: a wrong file "
                             "or a wrong version in the pin. Nothing was burned." % path)


def test_a_burn_the_flash_does_not_show_fails(node, tmp_path, run_module):
    # a flint that says the burn went well and writes nothing
    lazy = tmp_path / "bin" / "flint"
    lazy.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = burn ] && exit 0; done\nexec '%s' '%s' --as flint \"$@\"\n"
                    % (sys.executable, STANDIN))
    lazy.chmod(0o755)
    result = run_module(module, {"root": node.root, "firmware": pinned(node), "firmware_policy": "update",
                                 "state": "applied"})
    assert result["failed"] is True
    assert "but flint -d 0000:17:00.0 query then reads FW Version 28.40.1000" in result["msg"]


def test_url_image_is_not_burned_by_the_module(node, run_module):
    result = run_module(module, {"root": node.root, "firmware_policy": "update", "state": "applied",
                                 "firmware": pinned(node, image="https://fw.example/cx7.bin")})
    assert result["failed"] is True and "is not a path on the node; download it first" in result["msg"]


def test_flint_is_preferred_and_an_unreadable_query_names_the_device(node, tmp_path, run_module):
    bad = tmp_path / "bin" / "flint"
    bad.write_text("#!/bin/sh\n/bin/cat '%s'\n" % os.path.join(FIXTURES, "mstflint-cx6-query-truncated.txt"))
    bad.chmod(0o755)
    result = run_module(module, {"root": node.root, "firmware": pinned(node)})
    assert result["failed"] is True
    assert result["msg"].startswith("flint -d 0000:17:00.0 query could not be read (no 'PSID:' line")
    assert "Nothing was changed on 0000:17:00.0" in result["msg"]


def test_bad_pins_fail_before_any_query(node, run_module):
    result = run_module(module, {"root": node.root, "firmware": [pin(version="latest")]})
    assert result["failed"] is True and "version 'latest' is not a firmware version" in result["msg"]
    assert "Nothing was changed" in result["msg"]


def test_missing_flash_tool_in_a_plan_says_which_package(node, tmp_path, monkeypatch, run_module):
    os.unlink(str(tmp_path / "bin" / "mstflint"))
    planned = run_module(module, {"root": node.root, "firmware": pinned(node), "firmware_policy": "update",
                                  "tool": "mstconfig"})
    assert "mstflint" in planned["tool_missing"] and planned["disruption"]


def test_url_image_is_burned_from_the_cache_the_role_downloaded_it_to(node, tmp_path, run_module):
    path, sha = node.image()
    cache = tmp_path / "cache"
    cache.mkdir()
    os.rename(path, str(cache / ("%s-28.43.1014.bin" % CX7_PSID)))
    result = run_module(module, {"root": node.root, "firmware_policy": "update", "state": "applied",
                                 "firmware_cache": str(cache), "firmware": pinned(node, image="https://fw.example/cx7.bin",
                                                                                  sha256=sha)})
    assert result["changed"] is True and node.card() == ("28.40.1000", "28.43.1014")
