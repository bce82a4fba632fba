"""The stand-in flint / mstflint (tests/harness/standin_repo/src/mft/mlxconfig, run in place) refuses what the
real tools refuse, in their words (issue #44): an image given as NVIDIA ships it (a .zip), a damaged image, a
file that is not there, and a PSID mismatch without -allow_psid_change; with it, the burn changes the card's
PSID. The real outputs it is held to are in tests/fixtures/nic_config/ (sources in its README.md); the texts
read in mstflint's sources are named in the stand-in's comments.
"""

import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

from ansible.module_utils import gpudirect_nic_config as nic
from conftest import PROJECT_FIXTURES, ROOT

STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "mft", "mlxconfig")
FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CARD = "0000:17:00.0"
DELL = "DEL0000000027"
NVIDIA = "MT_0000000834"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_MLXCONFIG_STATE", str(tmp_path / "state"))

    class Bench:
        @staticmethod
        def tool(prog, *args):
            done = subprocess.run([sys.executable, STANDIN, "--as", prog] + list(args), capture_output=True,
                                  text=True, check=False)
            return done.returncode, done.stdout

        @staticmethod
        def add(psid=NVIDIA):
            subprocess.run([sys.executable, STANDIN, "--standin-add", CARD, "ConnectX7", "--psid", psid], check=True)

        @staticmethod
        def card():
            with open(str(tmp_path / "state" / (CARD + ".json"))) as handle:
                data = json.load(handle)
            return data["psid"], data["fw_running"], data["fw_next"]

        @staticmethod
        def image(psid=NVIDIA, version="28.43.1014", name="fw.signed.bin", body=None):
            path = tmp_path / name
            path.write_text(body if body is not None else json.dumps(
                {"standin_firmware_image": 1, "psid": psid, "version": version}))
            return str(path)

        @staticmethod
        def archive(members, name="fw.signed.bin.zip"):
            path = tmp_path / name
            with zipfile.ZipFile(str(path), "w", zipfile.ZIP_DEFLATED) as handle:
                for member, text in members.items():
                    handle.writestr(member, text)
            return str(path)

    return Bench


def test_the_image_alone_is_queried_and_verified(bench):
    image = bench.image()
    rc, out = bench.tool("flint", "-i", image, "query")
    parsed = nic.parse_flint_query(out)
    assert rc == 0 and (parsed["psid"], parsed["flash"], parsed["pending"]) == (NVIDIA, "28.43.1014", None)
    rc, out = bench.tool("mstflint", "-i", image, "verify")
    assert rc == 0 and "-I- FW image verification succeeded. Image is bootable." in out


@pytest.mark.parametrize("prog, reason", [
    ("flint", "Invalid Image signature."),                       # MFT: getFileSignature finds no image signature
    ("mstflint", "Invalid Firmware Format (found FS Gen 1)"),    # mstflint without MFA support: no image layout
])
def test_a_zip_as_downloaded_is_refused_as_the_real_tool_refuses_it(bench, prog, reason):
    bench.add()
    archive = bench.archive({"fw.signed.bin": json.dumps({"standin_firmware_image": 1, "psid": NVIDIA,
                                                          "version": "28.43.1014"})})
    for args in (["-i", archive, "query"], ["-i", archive, "verify"], ["-d", CARD, "-i", archive, "-y", "burn"]):
        rc, out = bench.tool(prog, *args)
        assert (rc, out) == (1, "-E- Cannot open Image: %s. %s\n" % (archive, reason)), args
    assert bench.card() == (NVIDIA, "28.40.1000", "28.40.1000")


def test_a_damaged_image_is_refused_and_burns_nothing(bench):
    bench.add()
    whole = json.dumps({"standin_firmware_image": 1, "psid": NVIDIA, "version": "28.43.1014"})
    damaged = bench.image(body=whole[:30])                        # a download cut short
    assert bench.tool("flint", "-i", damaged, "query") == (
        1, "-E- Failed to query image: %s. No valid ITOC Header was found.\n" % damaged)
    assert bench.tool("flint", "-i", damaged, "verify") == (
        1, "-E- FW image verification failed: No valid ITOC Header was found.. AN HCA DEVICE CAN NOT BOOT FROM "
           "THIS IMAGE.\n")
    assert bench.tool("flint", "-d", CARD, "-i", damaged, "-y", "burn") == (
        1, "-E- Cannot open Image: %s. \n" % damaged)
    assert bench.card() == (NVIDIA, "28.40.1000", "28.40.1000")


def test_a_missing_image_says_why(bench, tmp_path):
    missing = str(tmp_path / "nowhere.bin")
    assert bench.tool("flint", "-i", missing, "verify") == (
        1, "-E- Cannot open Image: %s. No such file or directory\n" % missing)


def test_psid_mismatch_is_refused_in_the_real_tools_words(bench):
    """An OEM card (a Dell PSID) and NVIDIA's image: the refusal a real mstflint printed on a Dell ConnectX-4 Lx
    (mstflint-cx4lx-dell-burn-psid-mismatch.txt), the version lines before it."""
    bench.add(psid=DELL)
    rc, out = bench.tool("mstflint", "-d", CARD, "-i", bench.image(), "-y", "burn")
    real = fixture("mstflint-cx4lx-dell-burn-psid-mismatch.txt")
    shape = re.escape(real.splitlines()[-1]).replace("DEL2420110034", "(?P<card>[A-Z_0-9]+)") \
        .replace("MT_2420110034", "(?P<image>[A-Z_0-9]+)")
    said = out.strip().splitlines()
    assert rc == 1 and re.fullmatch(shape, said[-1]).groupdict() == {"card": DELL, "image": NVIDIA}
    assert [ln.split(":")[0] for ln in out.splitlines() if "FW version" in ln] == \
        [ln.split(":")[0] for ln in real.splitlines() if "FW version" in ln]
    assert bench.card() == (DELL, "28.40.1000", "28.40.1000")


def test_allow_psid_change_asks_as_the_real_tool_and_changes_the_psid(bench):
    bench.add(psid=DELL)
    image = bench.image()
    rc, out = bench.tool("flint", "-d", CARD, "-i", image, "-allow_psid_change", "burn")    # no -y: answers no
    assert rc == 1 and out.rstrip().endswith("-E- Aborted by user") and bench.card()[0] == DELL

    rc, out = bench.tool("flint", "-d", CARD, "-i", image, "-y", "-allow_psid_change", "burn")
    real = fixture("mstflint-cx4lx-dell-burn-allow-psid-change.txt").replace("DEL2420110034", DELL) \
        .replace("MT_2420110034", NVIDIA).splitlines()
    asked = [ln for ln in real if "replace current PSID" in ln or "highly recommended" in ln]
    assert rc == 0 and len(asked) == 2 and all(line in out.splitlines() for line in asked)
    assert "-I- To load new FW run mlxfwreset or reboot machine." in out
    assert bench.card() == (NVIDIA, "28.40.1000", "28.43.1014")
    parsed = nic.parse_flint_query(bench.tool("flint", "-d", CARD, "query")[1])
    assert (parsed["psid"], parsed["flash"], parsed["running"]) == (NVIDIA, "28.43.1014", "28.40.1000")


def test_an_oem_card_queries_like_the_published_oem_cards(bench):
    bench.add(psid=DELL)
    ours = nic.parse_flint_query(bench.tool("mstflint", "-d", CARD, "query")[1])
    dell = nic.parse_flint_query(fixture("mstflint-cx4lx-dell-oem-query.txt"))
    lenovo = nic.parse_flint_query(fixture("flint-cx4-lenovo-oem-query.txt"))
    assert (ours["psid"], dell["psid"], lenovo["psid"]) == (DELL, "DEL2420110034", "LNV2180110032")
    assert sorted(set(dell["fields"]) - {"Rom Info"}) == sorted(set(ours["fields"]) - {"Rom Info"})

