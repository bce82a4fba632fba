"""Firmware images as NVIDIA ships them (issue #44, outcome 3): a .zip holding the .bin, and OEM cards whose
PSID is not the image's. module_utils/gpudirect_nic_config.py on the published layouts of
tests/fixtures/nic_config/ (sources in its README.md: unzip of a ConnectX-7 and a ConnectX-4 download, a Dell
card's refused and allowed burns), and library/gpudirect_nic_config.py against the stand-in flint
(tests/harness/standin_repo/src/mft/mlxconfig answering as mstflint), run in place.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile

import pytest

import gpudirect_nic_config as module
from ansible.module_utils import gpudirect_nic_config as nic
from conftest import PROJECT_FIXTURES
from standin_mft import STANDIN, standin_on_path
from sysfs_tree import SysfsTree

FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CX7 = "0000:17:00.0"
NVIDIA = "MT_0000000834"
DELL = "DEL0000000027"      # a Dell PSID's shape (the Dell capture is DEL2420110034, a ConnectX-4 Lx)
SHA_A = "a" * 64
KNOB = "gpudirect_nic_config_firmware_allow_psid_change"


def members_of(listing):
    """The member names an unzip capture shows (its ``inflating:`` lines)."""
    with open(os.path.join(FIXTURES, listing)) as handle:
        return [line.split("inflating:", 1)[1].strip() for line in handle if "inflating:" in line]


# ------------------------------------------------------------------ the archive as NVIDIA ships it

def test_the_one_bin_of_a_signed_connectx7_download_is_picked():
    names = members_of("unzip-cx7-signed-bin-zip.txt")
    assert [n.rsplit(".", 1)[-1] for n in names] == ["cbor", "bin"]
    assert nic.pick_firmware_member(names, "fw.zip") == \
        "fw-ConnectX7-rel-28_39_3560-MCX755106AS-HEA_Ax-UEFI-14.32.17-FlexBoot-3.7.300.signed.bin"


def test_the_one_bin_of_an_older_download_is_picked():
    assert nic.pick_firmware_member(members_of("unzip-cx4-bin-zip.txt"), "fw.zip") == \
        "fw-ConnectX4-rel-12_28_2302-MCX416A-CCA_Ax-UEFI-14.21.17-FlexBoot-3.6.102.bin"


@pytest.mark.parametrize("names, words", [
    ([], "the archive /srv/fw.zip holds no .bin firmware image (members: none)"),
    (["README.txt", "fw/"], "holds no .bin firmware image (members: README.txt, fw/)"),
    (["fw/"] + ["a.bin", "b/B.BIN"], "holds 2 .bin images (a.bin, b/B.BIN): the role burns an archive only when it "
                                     "holds one"),
])
def test_an_archive_without_exactly_one_bin_is_refused_naming_its_members_and_the_knob(names, words):
    with pytest.raises(ValueError) as caught:
        nic.pick_firmware_member(names, "/srv/fw.zip")
    assert words in str(caught.value) and "gpudirect_nic_config_firmware" in str(caught.value)
    assert "Nothing was burned." in str(caught.value)


@pytest.mark.parametrize("image, name", [
    ("https://content.mellanox.com/firmware/fw-ConnectX7-rel-28_39_3560-MCX755106AS-HEA_Ax-UEFI-14.32.17-FlexBoot-"
     "3.7.300.signed.bin.zip", "MT_0000000834-28.39.3560.zip"),
    ("https://fw.example/fw.ZIP?token=1", "MT_0000000834-28.39.3560.zip"),
    ("https://fw.example/fw.bin", "MT_0000000834-28.39.3560.bin"),
])
def test_a_download_keeps_the_kind_its_url_says(image, name):
    assert nic.cached_image_name(NVIDIA, "28.39.3560", image) == name


# ------------------------------------------------------------------ the pin: image_psid, an OEM card's change

def pin(**extra):
    return dict({"psid": DELL, "version": "28.43.1014", "image": "/srv/fw/cx7.bin.zip", "sha256": SHA_A}, **extra)


def test_image_psid_defaults_to_the_psid_and_finds_a_card_already_changed():
    pins = nic.validate_firmware_pins([pin(image_psid=NVIDIA), pin(psid="MT_0000000228", image="/srv/cx6.bin")])
    assert pins[DELL]["image_psid"] == NVIDIA and pins["MT_0000000228"]["image_psid"] == "MT_0000000228"
    assert nic.find_pin(pins, NVIDIA) is pins[DELL] and nic.find_pin(pins, "MT_0000000999") is None


@pytest.mark.parametrize("entries, words", [
    ([pin(image_psid="nvidia")], "gpudirect_nic_config_firmware[0] (psid DEL0000000027): image_psid 'nvidia' is not "
                                 "a PSID"),
    ([pin(image_psid=NVIDIA), pin(psid=NVIDIA, version="28.42.1000")],
     "gpudirect_nic_config_firmware[0] and gpudirect_nic_config_firmware[1] both name PSID MT_0000000834 (as psid or "
     "image_psid) with versions 28.43.1014 and 28.42.1000"),
    ([pin(image_sha256=SHA_A)], "unknown key(s) image_sha256"),
])
def test_bad_image_psids_name_the_entry(entries, words):
    with pytest.raises(ValueError) as caught:
        nic.validate_firmware_pins(entries)
    assert words in str(caught.value)


def card(psid, flash="28.40.1000", running=None):
    running = running or flash
    return {"psid": psid, "flash": flash, "running": running, "pending": flash if flash != running else None}


@pytest.mark.parametrize("read, state, change", [
    (card(DELL), "to_update", True),                                          # the OEM card, before
    (card(NVIDIA, flash="28.43.1014", running="28.40.1000"), "pending_reset", False),   # burned, waits
    (card(NVIDIA, flash="28.43.1014"), "in_place", False),                    # after the reset: held to the pin
])
def test_a_declared_psid_change_is_planned_and_the_changed_card_found(read, state, change):
    planned = nic.plan_firmware_version(read, nic.validate_firmware_pins([pin(image_psid=NVIDIA)]), "update")
    assert (planned["state"], planned["psid_change"], planned["pin_psid"], planned["image_psid"]) == (
        state, change, DELL, NVIDIA)


def image_query(psid=NVIDIA, version="28.43.1014"):
    return {"psid": psid, "flash": version, "running": version, "pending": None}


def test_the_image_is_held_to_its_pin_and_the_knob():
    undeclared = nic.plan_firmware_version(card(DELL), nic.validate_firmware_pins([pin()]), "update")
    declared = nic.plan_firmware_version(card(DELL), nic.validate_firmware_pins([pin(image_psid=NVIDIA)]), "update")
    # same PSID as the card: no change
    assert nic.check_image_query(image_query(DELL), undeclared, DELL, False, CX7, "fw.bin") is False
    # another PSID: refused unless allowed, naming both PSIDs and the knob first
    for firmware, hint in ((undeclared, True), (declared, False)):
        with pytest.raises(ValueError) as caught:
            nic.check_image_query(image_query(), firmware, DELL, False, CX7, "fw.bin")
        said = str(caught.value)
        assert said.startswith("0000:17:00.0: card PSID DEL0000000027, image PSID MT_0000000834: burning it "
                               "changes the card's PSID, refused while %s is false (image fw.bin)." % KNOB)
        assert ("add image_psid: MT_0000000834 to the pin of DEL0000000027" in said) is hint
        assert nic.check_image_query(image_query(), firmware, DELL, True, CX7, "fw.bin") is True
    # the pin declares another PSID than the image carries
    with pytest.raises(ValueError) as caught:
        nic.check_image_query(image_query("MT_0000000999"), declared, DELL, True, CX7, "fw.bin")
    assert "carries PSID MT_0000000999, but its pin (psid DEL0000000027 in gpudirect_nic_config_firmware) says " \
           "image_psid MT_0000000834" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        nic.check_image_query(image_query(version="28.39.1002"), declared, DELL, True, CX7, "fw.bin")
    assert "holds firmware 28.39.1002" in str(caught.value)


# ------------------------------------------------------------------ the module, on the stand-in

@pytest.fixture
def node(tmp_path, monkeypatch):
    tree = SysfsTree(tmp_path / "root")
    tree.add_nic(CX7, device=0x1021)
    bindir, state = standin_on_path(tmp_path, monkeypatch)

    class Node:
        root = tree.root
        bin = bindir

        @staticmethod
        def add(psid=NVIDIA):
            subprocess.run([sys.executable, STANDIN, "--standin-add", CX7, "ConnectX7", "--psid", psid], check=True)

        @staticmethod
        def body(psid=NVIDIA, version="28.43.1014"):
            return json.dumps({"standin_firmware_image": 1, "psid": psid, "version": version})

        @staticmethod
        def archive(members, name="fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax.signed.bin.zip"):
            path = tmp_path / "srv" / name
            path.parent.mkdir(exist_ok=True)
            with zipfile.ZipFile(str(path), "w", zipfile.ZIP_DEFLATED) as handle:
                for member, text in members.items():
                    handle.writestr(member, text)
            return str(path), hashlib.sha256(path.read_bytes()).hexdigest()

        @staticmethod
        def shipped(psid=NVIDIA, version="28.43.1014", body=None):
            """A download as NVIDIA ships it: the signed .bin and a .cbor beside it."""
            stem = "fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax-UEFI-14.37.14-FlexBoot-3.7.500.signed"
            return Node.archive({stem + ".cbor": "not an image", stem + ".bin": body or Node.body(psid, version)})

        @staticmethod
        def card():
            with open(str(state / (CX7 + ".json"))) as handle:
                data = json.load(handle)
            return data["psid"], data["fw_running"], data["fw_next"]

        @staticmethod
        def boot():
            subprocess.run([sys.executable, STANDIN, "--standin-boot"], check=True, capture_output=True)

    return Node


def update(node, firmware, **extra):
    return dict({"root": node.root, "firmware": firmware, "firmware_policy": "update", "state": "applied"}, **extra)


def test_a_shipped_zip_is_checked_extracted_burned_and_reported_then_nothing_more(node, run_module):
    node.add()
    archive, sha = node.shipped()
    entry = {"psid": NVIDIA, "version": "28.43.1014", "image": archive, "sha256": sha}

    checked = run_module(module, update(node, [entry]), check_mode=True)
    assert checked["changed"] is True and checked["firmware_burned"] == [] and node.card() == (
        NVIDIA, "28.40.1000", "28.40.1000")

    applied = run_module(module, update(node, [entry]))
    assert applied["changed"] is True and node.card() == (NVIDIA, "28.40.1000", "28.43.1014")
    member = "fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax-UEFI-14.37.14-FlexBoot-3.7.500.signed.bin"
    burned = applied["firmware_burned"]
    assert burned == [{"pci": CX7, "psid": NVIDIA, "psid_after": NVIDIA, "version": "28.43.1014",
                       "image": "%s (from %s)" % (member, archive),
                       "sha256": hashlib.sha256(node.body().encode()).hexdigest(),
                       "downloaded": archive, "downloaded_sha256": sha}]
    assert applied["changes"] == ["0000:17:00.0 (ConnectX): firmware 28.40.1000 -> 28.43.1014 (%s (from %s)), burned; "
                                  "runs after the next firmware reset or reboot" % (member, archive)]
    assert sorted(os.listdir(os.path.dirname(archive))) == [os.path.basename(archive)]   # extracted elsewhere

    # the card waits for its reset, then runs the image: no burn, no extraction (the archive is not even read)
    os.unlink(archive)
    waiting = run_module(module, update(node, [entry]))
    assert waiting["changed"] is False and waiting["firmware_burned"] == []
    node.boot()
    converged = run_module(module, update(node, [entry]))
    assert converged["changed"] is False and converged["devices"][0]["firmware"]["state"] == "in_place"


def test_the_pinned_sum_is_the_downloaded_files(node, run_module):
    node.add()
    archive, _sha = node.shipped()
    bin_sha = hashlib.sha256(node.body().encode()).hexdigest()      # the .bin's sum pinned for the .zip
    result = run_module(module, update(node, [{"psid": NVIDIA, "version": "28.43.1014", "image": archive,
                                               "sha256": bin_sha}]))
    assert result["failed"] is True and node.card() == (NVIDIA, "28.40.1000", "28.40.1000")
    assert "gpudirect_nic_config_firmware pins %s for PSID MT_0000000834 (the sum of the file as downloaded, the .zip " \
           "when it is one)" % bin_sha in result["msg"]


@pytest.mark.parametrize("members, words", [
    ({"README.txt": "release notes"}, "holds no .bin firmware image (members: README.txt)"),
    ({"a/fw-1.bin": "x", "b/fw-2.bin": "y"}, "holds 2 .bin images (a/fw-1.bin, b/fw-2.bin)"),
])
def test_an_archive_without_exactly_one_bin_burns_nothing(node, run_module, members, words):
    node.add()
    archive, sha = node.archive(members)
    result = run_module(module, update(node, [{"psid": NVIDIA, "version": "28.43.1014", "image": archive,
                                               "sha256": sha}]))
    assert result["failed"] is True and words in result["msg"], result["msg"]
    assert result["msg"].startswith("PSID MT_0000000834: the archive %s" % archive)
    assert node.card() == (NVIDIA, "28.40.1000", "28.40.1000")


def test_a_damaged_archive_or_image_burns_nothing(node, tmp_path, run_module):
    node.add()
    archive, _sha = node.shipped()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(open(archive, "rb").read()[:-40])              # the central directory cut off
    result = run_module(module, update(node, [{"psid": NVIDIA, "version": "28.43.1014", "image": str(cut),
                                               "sha256": hashlib.sha256(cut.read_bytes()).hexdigest()}]))
    assert result["failed"] is True and node.card() == (NVIDIA, "28.40.1000", "28.40.1000")
    assert result["msg"].startswith("cannot take the firmware image out of the archive %s, pinned for PSID "
                                    "MT_0000000834 in gpudirect_nic_config_firmware: " % cut), result["msg"]

    damaged, sha = node.shipped(body=node.body()[:30])
    result = run_module(module, update(node, [{"psid": NVIDIA, "version": "28.43.1014", "image": damaged,
                                               "sha256": sha}]))
    assert result["failed"] is True and node.card() == (NVIDIA, "28.40.1000", "28.40.1000")
    assert "verify failed (rc 1): -E- FW image verification failed: No valid ITOC Header was found.. AN HCA DEVICE " \
           "CAN NOT BOOT FROM THIS IMAGE.. The image is damaged" in result["msg"]


def test_an_oem_card_is_refused_by_default_naming_both_psids_and_the_knob(node, run_module):
    node.add(psid=DELL)
    archive, sha = node.shipped()
    # the pin does not say the image is for another PSID: found in the image, before the burn
    result = run_module(module, update(node, [{"psid": DELL, "version": "28.43.1014", "image": archive,
                                               "sha256": sha}]))
    assert result["failed"] is True and node.card() == (DELL, "28.40.1000", "28.40.1000")
    assert result["msg"].startswith("0000:17:00.0: card PSID DEL0000000027, image PSID MT_0000000834: burning it "
                                    "changes the card's PSID, refused while %s is false (image " % KNOB)
    assert "add image_psid: MT_0000000834" in result["msg"]

    # the pin says it (image_psid): refused by the read-only plan already, before any drain
    declared = {"psid": DELL, "image_psid": NVIDIA, "version": "28.43.1014", "image": archive, "sha256": sha}
    planned = run_module(module, dict(update(node, [declared]), state="planned"), check_mode=True)
    assert planned["failed"] is True and planned["msg"].startswith(
        "0000:17:00.0: card PSID DEL0000000027, image PSID MT_0000000834: burning it changes the card's PSID, "
        "refused while %s is false (image %s)." % (KNOB, archive))
    # under policy report it is only reported
    reported = run_module(module, {"root": node.root, "firmware": [declared]})
    assert reported["firmware_report"] == [
        "0000:17:00.0 (ConnectX): firmware 28.40.1000, pinned 28.43.1014 for PSID DEL0000000027 (to_update; the image "
        "changes the PSID to MT_0000000834; policy report: not updated)"]


def test_the_knob_burns_with_allow_psid_change_and_later_runs_find_the_card(node, tmp_path, run_module):
    node.add(psid=DELL)
    archive, sha = node.shipped()
    log = tmp_path / "argv.log"
    spy = node.bin / "mstflint"
    os.unlink(str(spy))
    spy.write_text("#!/bin/sh\necho \"$@\" >> '%s'\nexec '%s' '%s' --as mstflint \"$@\"\n"
                   % (log, sys.executable, STANDIN))
    spy.chmod(0o755)
    declared = [{"psid": DELL, "image_psid": NVIDIA, "version": "28.43.1014", "image": archive, "sha256": sha}]
    args = update(node, declared, firmware_allow_psid_change=True)

    applied = run_module(module, args)
    assert applied["changed"] is True and node.card() == (NVIDIA, "28.40.1000", "28.43.1014")
    burns = [line.split() for line in log.read_text().splitlines() if line.endswith(" burn")]
    assert len(burns) == 1 and burns[0][:2] == ["-d", CX7] and burns[0][-3:] == ["-y", "-allow_psid_change", "burn"]
    assert applied["firmware_burned"][0]["psid_after"] == NVIDIA
    assert "PSID DEL0000000027 -> MT_0000000834, burned" in applied["changes"][0]

    node.boot()
    converged = run_module(module, args)
    assert converged["changed"] is False and converged["changes"] == [] and converged["disruption"] == []
    fw = converged["devices"][0]["firmware"]
    assert (fw["psid"], fw["pin_psid"], fw["state"]) == (NVIDIA, DELL, "in_place")


def test_the_knob_alone_burns_and_warns_that_later_runs_need_image_psid(node, run_module):
    node.add(psid=DELL)
    archive, sha = node.shipped()
    result = run_module(module, update(node, [{"psid": DELL, "version": "28.43.1014", "image": archive,
                                               "sha256": sha}], firmware_allow_psid_change=True))
    assert result["changed"] is True and node.card()[0] == NVIDIA
    said = [w["event"]["msg"] if isinstance(w, dict) else w for w in result["warnings"]]
    assert any("changes the card's PSID DEL0000000027 to MT_0000000834" in w and "image_psid: MT_0000000834" in w
               for w in said), said


def test_a_burn_flint_fails_names_the_card_the_image_and_flints_error(node, run_module):
    node.add()
    archive, sha = node.shipped()
    broken = node.bin / "mstflint"
    os.unlink(str(broken))
    broken.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = burn ] && { echo '-E- Burning FS4 image failed: "
                      "Flash write failed'; exit 1; }; done\nexec '%s' '%s' --as mstflint \"$@\"\n"
                      % (sys.executable, STANDIN))
    broken.chmod(0o755)
    result = run_module(module, update(node, [{"psid": NVIDIA, "version": "28.43.1014", "image": archive,
                                               "sha256": sha}]))
    assert result["failed"] is True and result["rc"] == 1
    member = "fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax-UEFI-14.37.14-FlexBoot-3.7.500.signed.bin"
    assert result["msg"].startswith(
        "firmware burn failed on card 0000:17:00.0 (PSID MT_0000000834): -E- Burning FS4 image failed: Flash write "
        "failed. Image %s (from %s), sha256 %s (gpudirect_nic_config_firmware); mstflint -d 0000:17:00.0 -i "
        % (member, archive, hashlib.sha256(node.body().encode()).hexdigest())), result["msg"]
    assert result["cmd"][-2:] == ["-y", "burn"] and " exited 1. " in result["msg"]
    assert node.card() == (NVIDIA, "28.40.1000", "28.40.1000")
