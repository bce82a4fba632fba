"""roles/gpudirect_nic_config (issue #32, outcome 1) run by ansible-playbook on this machine, against a fake
sysfs tree (the role's gpudirect_nic_config_sysfs_root points the module at it) and the stand-in mlxconfig/mstconfig
(tests/harness/standin_repo/src/mft/mlxconfig), whose state keeps Default / Current / Next Boot
per fake card: plan, set, the reboot request, the value waiting for the reset, the boot, converged.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils import gpudirect_nic_config as nic
from conftest import ROOT, play_on_localhost
from sysfs_tree import SysfsTree

STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "mft", "mlxconfig")
ROLE = os.path.join(ROOT, "roles", "gpudirect_nic_config")
CX7 = "0000:17:00.0"

PLAY = """---
- name: gpudirect_nic_config on a fake node
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpudirect_nic_config_sysfs_root: %s
  tasks:
    - name: The role
      ansible.builtin.include_role:
        name: gpudirect_nic_config
    - name: Show the plan and the reboot reasons
      ansible.builtin.debug:
        msg: "RESULT {{ {'plan': gpudirect_nic_config_plan, 'reasons': gpudirect_reboot_reasons | default([])} | to_json }}"
"""


def _load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_role_knows_the_profiles_the_module_knows():
    assert sorted(_load("vars", "main.yml")["__gpudirect_nic_config_known_profiles"]) == sorted(nic.PROFILES)
    for entry in _load("meta", "argument_specs.yml")["argument_specs"].values():
        assert sorted(entry["options"]["gpudirect_nic_config_profiles"]["choices"]) == sorted(nic.PROFILES)


@pytest.fixture
def node(tmp_path):
    tree = SysfsTree(tmp_path / "root")
    tree.add_nic(CX7, device=0x1021)
    tree.add_nic("0000:17:00.1", device=0x1021)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(STANDIN, str(bindir / "mstconfig"))
    state = tmp_path / "standin-state"
    env = {"PATH": "%s:%s" % (bindir, os.environ["PATH"]), "STANDIN_MLXCONFIG_STATE": str(state)}
    # the node's record of the reboots asked for (tasks/record.yml), in a folder of the mode the role gives
    # /var/lib/gpudirect, not this machine's
    record_dir = tmp_path / "gpudirect"
    record_dir.mkdir()
    os.chmod(str(record_dir), 0o755)
    subprocess.run([sys.executable, STANDIN, "--standin-add", CX7, "ConnectX7"], check=True,
                   env=dict(os.environ, **env))

    class Node:
        root = tree.root
        record = record_dir / "nic-config-reset.json"

        @staticmethod
        def play(extra, check=False, entry="main"):
            # the role alone on a node in service refuses its disruption (gpudirect_drain disrupt): this
            # test node runs no jobs, as a server not yet in service
            extra = dict({"gpudirect_drain_nodes_run_no_jobs": True,
                          "__gpudirect_nic_config_reset_record": str(record_dir / "nic-config-reset.json")}, **extra)
            # entry after_reboot: what the reboot stage's after-boot checks run when the role asked for the reboot
            text = (PLAY % tree.root).replace("        name: gpudirect_nic_config\n", "        name: gpudirect_nic_config\n"
                                              "        tasks_from: %s\n" % entry)
            done = play_on_localhost(tmp_path, text, extra, check=check, env_extra=env)
            found = [line for line in done.stdout.splitlines() if '"msg": "RESULT ' in line]
            result = json.loads(json.loads("{%s}" % found[-1].strip())["msg"][len("RESULT "):]) if found else None
            return done, result

        @staticmethod
        def boot():
            subprocess.run([sys.executable, STANDIN, "--standin-boot"], check=True, env=dict(os.environ, **env),
                           capture_output=True)

        @staticmethod
        def params():
            with open(str(state / (CX7 + ".json"))) as handle:
                return json.load(handle)["params"]

    return Node


def test_nothing_wanted_says_so_and_changes_nothing(node):
    done, result = node.play({})
    assert done.returncode == 0, done.stdout
    assert "no ConnectX firmware value is wanted, the cards are neither queried nor changed" in done.stdout
    assert result["plan"]["changes"] == [] and result["plan"]["wanted"] is False and result["reasons"] == []


def test_set_then_reboot_request_then_converged_after_the_boot(node):
    wanted = {"gpudirect_nic_config_params": {"ATS_ENABLED": True, "NUM_OF_VFS": 8}}
    checked, result = node.play(wanted, check=True)
    assert checked.returncode == 0, checked.stdout
    assert node.params()["ATS_ENABLED"]["next_boot"] == 0                      # --check wrote nothing
    assert result["plan"]["disruption"] == ["0000:17:00.0 (ConnectX7): firmware reset or reboot to load "
                                            "ATS_ENABLED=1, NUM_OF_VFS=8"]

    done, result = node.play(wanted)
    assert done.returncode == 0, done.stdout
    assert " changed=2 " in done.stdout                                 # the set, and the record of the reboot asked for
    # the plan is read again after the set: the cards as the stage left them, for the reports
    assert result["plan"]["set"] == [] and result["plan"]["changes"] == [
        "0000:17:00.0 (ConnectX7): ATS_ENABLED=1, NUM_OF_VFS=8 already set for the next boot (running ATS_ENABLED "
        "False(0), NUM_OF_VFS 0); waits for a firmware reset or reboot"]
    assert result["reasons"] == ["gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: "
                                 "0000:17:00.0 ATS_ENABLED=1, NUM_OF_VFS=8"]
    params = node.params()
    assert (params["ATS_ENABLED"]["current"], params["ATS_ENABLED"]["next_boot"]) == (0, 1)
    assert (params["NUM_OF_VFS"]["current"], params["NUM_OF_VFS"]["next_boot"]) == (0, 8)

    # not rebooted yet: nothing to set, the reboot is still owed
    again, result = node.play(wanted)
    assert again.returncode == 0, again.stdout
    assert result["plan"]["set"] == [] and result["reasons"] == [
        "gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: 0000:17:00.0 ATS_ENABLED=1, NUM_OF_VFS=8"]
    assert " changed=0 " in again.stdout                                     # no set ran

    node.boot()
    # the reboot stage's after-boot step: the reboot loaded it (the stand-in's card resets at a reboot); the
    # record of the reboot asked for is removed
    after, result = node.play(wanted, entry="after_reboot")
    assert after.returncode == 0, after.stdout
    assert "after the reboot nothing waits on 0000:17:00.0: the reboot loaded it" in after.stdout
    assert " changed=1 " in after.stdout and not os.path.exists(str(node.record))
    converged, result = node.play(wanted)
    assert converged.returncode == 0, converged.stdout
    assert result["plan"]["changes"] == [] and result["plan"]["disruption"] == [] and result["reasons"] == []
    assert "ConnectX firmware configuration in place on 0000:17:00.0" in converged.stdout
    assert " changed=0 " in converged.stdout


@pytest.mark.parametrize("extra, words", [
    ({"gpudirect_nic_config_params": {"ats_enabled": 1}}, "gpudirect_nic_config_params: ats_enabled is not an mlxconfig parameter name"),
    ({"gpudirect_nic_config_params": {"NUM_OF_VFS": [8]}}, "gpudirect_nic_config_params: NUM_OF_VFS must be a number"),
    ({"gpudirect_nic_config_profiles": ["gpudirect", "gpudirect_vm"]}, "not both gpudirect and gpudirect_vm"),
    ({"gpudirect_nic_config_devices": ["17:00"]}, "gpudirect_nic_config_devices: 17:00 is not a PCI address"),
    # the value check of module_utils (resolve_wanted), before any query
    ({"gpudirect_nic_config_params": {"ATS_ENABLED": 5}}, "gpudirect_nic_config_profiles / gpudirect_nic_config_params: ATS_ENABLED: wanted true/false"),
])
def test_bad_knobs_fail_before_any_change(node, extra, words):
    before = node.params()
    done, _result = node.play(extra)
    assert done.returncode != 0
    assert words in done.stdout, done.stdout
    assert "Nothing was changed" in done.stdout
    assert node.params() == before


PLAY_ROOT_KNOB = """---
- name: gpudirect_nic_config on a fake node, pointed at the tree by its own knob
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role
      ansible.builtin.include_role:
        name: gpudirect_nic_config
    - name: Show the plan and the reboot reasons
      ansible.builtin.debug:
        msg: "RESULT {{ {'plan': gpudirect_nic_config_plan, 'reasons': gpudirect_reboot_reasons | default([])} | to_json }}"
"""


def _play_root_knob(tmp_path, extra, env, check=False):
    extra = dict({"__gpudirect_nic_config_reset_record": str(tmp_path / "nic-config-reset.json")}, **extra)
    done = play_on_localhost(tmp_path, PLAY_ROOT_KNOB, extra, check=check, env_extra=env)
    found = [line for line in done.stdout.splitlines() if '"msg": "RESULT ' in line]
    return done, (json.loads(json.loads("{%s}" % found[-1].strip())["msg"][len("RESULT "):]) if found else None)


def test_sysfs_root_knob_reaches_the_plan_and_the_set(tmp_path):
    """gpudirect_nic_config_sysfs_root, with no module_defaults: the plan reads the recorded tree and the set acts on it;
    another root (a tree without the card) finds no card and says under which folder it looked."""
    tree = SysfsTree(tmp_path / "root")
    tree.add_nic(CX7, device=0x1021)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(STANDIN, str(bindir / "mstconfig"))
    state = tmp_path / "standin-state"
    env = {"PATH": "%s:%s" % (bindir, os.environ["PATH"]), "STANDIN_MLXCONFIG_STATE": str(state)}
    subprocess.run([sys.executable, STANDIN, "--standin-add", CX7, "ConnectX7"], check=True, env=dict(os.environ, **env))
    # a test node that runs no jobs: the role alone sets values that wait for a reset (a disruption)
    wanted = {"gpudirect_nic_config_params": {"ATS_ENABLED": True}, "gpudirect_nic_config_sysfs_root": str(tree.root),
              "gpudirect_drain_nodes_run_no_jobs": True}

    done, result = _play_root_knob(tmp_path, wanted, env)
    assert done.returncode == 0, done.stdout
    assert result["plan"]["devices"][0]["pci"] == CX7
    assert result["reasons"] == ["gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: "
                                 "0000:17:00.0 ATS_ENABLED=1"]
    with open(str(state / (CX7 + ".json"))) as handle:
        assert json.load(handle)["params"]["ATS_ENABLED"]["next_boot"] == 1

    empty = tmp_path / "empty"
    empty.mkdir()
    done, result = _play_root_knob(tmp_path, dict(wanted, gpudirect_nic_config_sysfs_root=str(empty)), env)
    assert done.returncode == 0, done.stdout
    assert result["plan"]["devices"] == [] and result["plan"]["changes"] == []
    assert result["plan"]["skip_reason"] == ("no NVIDIA/Mellanox ConnectX physical function under %s"
                                            % os.path.join(str(empty), "sys/bus/pci/devices"))


def test_relative_sysfs_root_fails_before_any_change(node):
    before = node.params()
    done, _result = node.play({"gpudirect_nic_config_profiles": ["gpudirect"], "gpudirect_nic_config_sysfs_root": "var/lib/sysfs"})
    assert done.returncode != 0
    assert 'gpudirect_nic_config_sysfs_root must be an absolute path' in done.stdout, done.stdout
    assert "Nothing was changed" in done.stdout
    assert node.params() == before


@pytest.fixture
def toolless_node(node, tmp_path):
    """The node fixture without its mstconfig: neither tool on PATH (nor in the sbin folders the module also
    searches)."""
    os.unlink(str(tmp_path / "bin" / "mstconfig"))
    for name in ("mlxconfig", "mstconfig"):
        for folder in os.environ["PATH"].split(os.pathsep) + ["/sbin", "/usr/sbin", "/usr/local/sbin"]:
            if os.path.exists(os.path.join(folder, name)):
                pytest.skip("%s is installed on this machine (%s): the missing-tool path cannot be shown"
                            % (name, folder))
    return node


@pytest.mark.parametrize("tool, package", [("auto", "mstflint"), ("mstconfig", "mstflint"), ("mlxconfig", "mft")])
def test_missing_tool_check_mode_says_which_package_it_would_install(toolless_node, tool, package):
    before = toolless_node.params()
    done, result = toolless_node.play({"gpudirect_nic_config_profiles": ["gpudirect"], "gpudirect_nic_config_tool": tool}, check=True)
    assert done.returncode == 0, done.stdout
    assert "gpudirect_nic_config: check mode: would install package %s (gpudirect_nic_config_install_tool), then read the cards " \
           "0000:17:00.0 and set what differs" % package in done.stdout
    # the plan counts the reset the values may need, and nothing was installed or set
    assert result["plan"]["tool_missing"] and result["plan"]["disruption"]
    assert "skipping: [localhost]" in done.stdout.split("TASK [gpudirect_nic_config : Install the package of the firmware tool]")[1] \
        .split("TASK [")[0]
    assert toolless_node.params() == before


def test_missing_tool_without_the_install_knob_fails_naming_the_package(toolless_node):
    before = toolless_node.params()
    done, _result = toolless_node.play({"gpudirect_nic_config_profiles": ["gpudirect"], "gpudirect_nic_config_install_tool": False})
    assert done.returncode != 0
    assert "is not installed: install package mft (NVIDIA Firmware Tools) (mlxconfig) or package mstflint " \
           "(mstconfig)" in done.stdout, done.stdout
    assert "(gpudirect_nic_config_install_tool is false: the role installs nothing)" in done.stdout
    assert toolless_node.params() == before


# ------------------------------------------------------------------ firmware version policy (gpudirect_nic_config_firmware)

@pytest.fixture
def fw_node(node, tmp_path):
    """The node with the stand-in also installed as mstflint, and a stand-in image of the pinned version."""
    import hashlib

    os.symlink(STANDIN, str(tmp_path / "bin" / "mstflint"))
    image = tmp_path / "fw-ConnectX7-28.43.1014.bin"
    image.write_text(json.dumps({"standin_firmware_image": 1, "psid": "MT_0000000834", "version": "28.43.1014"}))
    node.pin = {"psid": "MT_0000000834", "version": "28.43.1014", "image": str(image),
                "sha256": hashlib.sha256(image.read_bytes()).hexdigest()}

    def firmware():
        with open(str(tmp_path / "standin-state" / (CX7 + ".json"))) as handle:
            data = json.load(handle)
        return data["fw_running"], data["fw_next"]
    node.firmware = staticmethod(firmware)
    return node


def test_firmware_report_policy_reports_and_changes_nothing(fw_node):
    done, result = fw_node.play({"gpudirect_nic_config_firmware": [fw_node.pin]})
    assert done.returncode == 0, done.stdout
    assert result["plan"]["wanted"] is True and result["plan"]["firmware_update"] == []
    assert result["plan"]["changes"] == [] and result["plan"]["disruption"] == [] and result["reasons"] == []
    assert "firmware version: 0000:17:00.0 (ConnectX): firmware 28.40.1000, pinned 28.43.1014 for PSID MT_0000000834 " \
           "(to_update; policy report: not updated)" in done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")


def test_firmware_update_burns_asks_for_the_one_reboot_then_converges(fw_node):
    wanted = {"gpudirect_nic_config_firmware": [fw_node.pin], "gpudirect_nic_config_firmware_policy": "update",
              "gpudirect_nic_config_params": {"SRIOV_EN": True}}
    checked, result = fw_node.play(wanted, check=True)
    assert checked.returncode == 0, checked.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")                    # --check burned nothing
    assert result["plan"]["firmware_update"] == [CX7]
    assert "0000:17:00.0 (ConnectX7): firmware update 28.40.1000 -> 28.43.1014 needs a firmware reset or reboot" \
        in result["plan"]["disruption"]

    done, result = fw_node.play(wanted)
    assert done.returncode == 0, done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.43.1014")
    # one reboot request for both the NV value and the image
    assert result["reasons"] == ["gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: "
                                 "0000:17:00.0 SRIOV_EN=1, firmware 28.43.1014"]
    assert result["plan"]["firmware_update"] == [] and result["plan"]["devices"][0]["firmware"]["state"] == "pending_reset"

    fw_node.boot()
    after, result = fw_node.play(wanted, entry="after_reboot")               # the reboot stage's after-boot step
    assert after.returncode == 0 and "the reboot loaded it" in after.stdout, after.stdout
    converged, result = fw_node.play(wanted)
    assert converged.returncode == 0, converged.stdout
    assert result["plan"]["changes"] == [] and result["plan"]["disruption"] == [] and result["reasons"] == []
    assert result["plan"]["devices"][0]["firmware"]["state"] == "in_place" and " changed=0 " in converged.stdout


def test_firmware_image_with_another_sum_is_never_burned(fw_node):
    bad = dict(fw_node.pin, sha256="b" * 64)
    done, _result = fw_node.play({"gpudirect_nic_config_firmware": [bad], "gpudirect_nic_config_firmware_policy": "update"})
    assert done.returncode != 0
    assert "gpudirect_nic_config_firmware: the image %s for PSID MT_0000000834 has sha256 %s, expected %s" % (
        fw_node.pin["image"], fw_node.pin["sha256"], "b" * 64) in done.stdout, done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")


@pytest.mark.parametrize("entry, words", [
    ({"psid": "cx7"}, "gpudirect_nic_config_firmware[0]: psid 'cx7' is not a PSID such as MT_0000000834"),
    ({"version": "latest"}, "gpudirect_nic_config_firmware[0] (psid MT_0000000834): version 'latest' is not a "
                            "firmware version N.N.N"),
    ({"sha256": "abc"}, "gpudirect_nic_config_firmware[0] (psid MT_0000000834): sha256 'abc' is not 64 hexadecimal "
                        "digits"),
    ({"image": "fw.bin"}, "gpudirect_nic_config_firmware[0] (psid MT_0000000834): image 'fw.bin' must be an absolute "
                          "path on the node or an http(s) URL"),
])
def test_bad_firmware_pins_fail_before_any_change(fw_node, entry, words):
    done, _result = fw_node.play({"gpudirect_nic_config_firmware": [dict(fw_node.pin, **entry)],
                                  "gpudirect_nic_config_firmware_policy": "update"})
    assert done.returncode != 0
    assert words in done.stdout and "Nothing was changed" in done.stdout, done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")


def test_a_psid_pinned_twice_fails_before_any_change(fw_node):
    done, _result = fw_node.play({"gpudirect_nic_config_firmware": [fw_node.pin, fw_node.pin]})
    assert done.returncode != 0
    assert "gpudirect_nic_config_firmware[1]: psid MT_0000000834 is pinned twice (gpudirect_nic_config_firmware[0] too)" in done.stdout, done.stdout


# ------------------------------------------------------------------ firmware as NVIDIA ships it (issue #44, outcome 3)

SIGNED = "fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax-UEFI-14.37.14-FlexBoot-3.7.500.signed"
KNOB = "gpudirect_nic_config_firmware_allow_psid_change"


def shipped_zip(folder, psid="MT_0000000834", version="28.43.1014"):
    """A download as NVIDIA ships it (tests/fixtures/nic_config/unzip-cx7-signed-bin-zip.txt): the .signed.bin
    and a .signed.cbor in a .zip; the stand-in image inside. The .zip's path and sha256, the .bin's sha256."""
    import hashlib
    import zipfile

    body = json.dumps({"standin_firmware_image": 1, "psid": psid, "version": version})
    path = folder / (SIGNED + ".bin.zip")
    with zipfile.ZipFile(str(path), "w", zipfile.ZIP_DEFLATED) as handle:
        handle.writestr(SIGNED + ".cbor", "not an image")
        handle.writestr(SIGNED + ".bin", body)
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(body.encode()).hexdigest()


def test_a_zip_pinned_on_the_node_is_burned_once_and_its_sums_reported(fw_node, tmp_path):
    archive, zip_sha, bin_sha = shipped_zip(tmp_path)
    wanted = {"gpudirect_nic_config_firmware": [dict(fw_node.pin, image=archive, sha256=zip_sha)],
              "gpudirect_nic_config_firmware_policy": "update"}
    checked, _result = fw_node.play(wanted, check=True)
    assert checked.returncode == 0, checked.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000") and os.listdir(str(tmp_path)).count(SIGNED + ".bin") == 0

    done, result = fw_node.play(wanted)
    assert done.returncode == 0, done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.43.1014")
    assert "gpudirect_nic_config: burned %s.bin (from %s) (sha256 %s, firmware 28.43.1014) on 0000:17:00.0, PSID " \
           "MT_0000000834; the pinned file %s has sha256 %s" % (SIGNED, archive, bin_sha, archive, zip_sha) in done.stdout
    assert result["reasons"] == ["gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: "
                                 "0000:17:00.0 firmware 28.43.1014"]
    assert not os.path.exists(str(tmp_path / (SIGNED + ".bin")))               # taken out elsewhere, not kept

    fw_node.boot()
    after, result = fw_node.play(wanted, entry="after_reboot")               # the reboot stage's after-boot step
    assert after.returncode == 0 and "the reboot loaded it" in after.stdout, after.stdout
    again, result = fw_node.play(wanted)
    assert again.returncode == 0 and " changed=0 " in again.stdout, again.stdout
    assert result["plan"]["devices"][0]["firmware"]["state"] == "in_place"
    assert "skipping: [localhost]" in again.stdout.split(
        "TASK [gpudirect_nic_config : Burn the pinned firmware images on the cards whose flash differs]")[1].split("TASK [")[0]


def test_a_zip_url_is_downloaded_as_a_zip_and_burned(fw_node, tmp_path):
    import functools
    import http.server
    import threading

    served = tmp_path / "mirror"
    served.mkdir()
    _archive, zip_sha, _bin_sha = shipped_zip(served)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cache = tmp_path / "cache"
    try:
        url = "http://127.0.0.1:%d/%s.bin.zip" % (server.server_address[1], SIGNED)
        done, _result = fw_node.play({
            "gpudirect_nic_config_firmware": [dict(fw_node.pin, image=url, sha256=zip_sha)],
            "gpudirect_nic_config_firmware_policy": "update", "__gpudirect_nic_config_firmware_cache": str(cache),
            "no_proxy": "127.0.0.1"})
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout
    assert os.listdir(str(cache)) == ["MT_0000000834-28.43.1014.zip"]
    assert fw_node.firmware() == ("28.40.1000", "28.43.1014")


def test_an_oem_card_is_refused_in_the_plan_unless_the_knob_allows_it(fw_node, tmp_path):
    subprocess.run([sys.executable, STANDIN, "--standin-add", CX7, "ConnectX7", "--psid", "DEL0000000027"], check=True,
                   env=dict(os.environ, STANDIN_MLXCONFIG_STATE=str(tmp_path / "standin-state")))
    archive, zip_sha, _bin_sha = shipped_zip(tmp_path)
    dell = {"psid": "DEL0000000027", "image_psid": "MT_0000000834", "version": "28.43.1014", "image": archive,
            "sha256": zip_sha}
    wanted = {"gpudirect_nic_config_firmware": [dell], "gpudirect_nic_config_firmware_policy": "update"}
    refused, _result = fw_node.play(wanted)
    assert refused.returncode != 0
    assert "0000:17:00.0: card PSID DEL0000000027, image PSID MT_0000000834: burning it changes the card's PSID, " \
           "refused while %s is false" % KNOB in refused.stdout, refused.stdout
    assert "TASK [gpudirect_nic_config : Burn the pinned firmware images" not in refused.stdout   # the plan refused it
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")

    allowed, result = fw_node.play(dict(wanted, **{KNOB: True}))
    assert allowed.returncode == 0, allowed.stdout
    assert "on 0000:17:00.0, PSID DEL0000000027 -> MT_0000000834" in allowed.stdout
    fw_node.boot()
    after, result = fw_node.play(dict(wanted, **{KNOB: True}), entry="after_reboot")
    assert after.returncode == 0 and "the reboot loaded it" in after.stdout, after.stdout
    again, result = fw_node.play(dict(wanted, **{KNOB: True}))
    assert again.returncode == 0 and " changed=0 " in again.stdout, again.stdout
    fw = result["plan"]["devices"][0]["firmware"]
    assert (fw["psid"], fw["state"]) == ("MT_0000000834", "in_place")


@pytest.mark.parametrize("value", ["maybe", [True]])
def test_the_psid_change_knob_is_a_boolean(fw_node, value):
    done, _result = fw_node.play({"gpudirect_nic_config_firmware": [fw_node.pin], KNOB: value})
    assert done.returncode != 0 and KNOB in done.stdout, done.stdout
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")


ROLLING_BATCH = """---
- name: A rolling batch of one node whose firmware burn fails (playbooks/rolling.yml's shape)
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpudirect_nic_config_sysfs_root: %s
  tasks:
    - name: Drain and change the node
      block:
        - {name: Drain, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: drain}}
        - {name: The firmware stage, ansible.builtin.include_role: {name: gpudirect_nic_config}}
        - {name: Verified, ansible.builtin.set_fact: {gpudirect_verify_status: passed}}
      rescue:
        - {name: Record the failure, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: failed}}
    - {name: Resume the node or leave it drained, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}}
    - {name: Table of the nodes left drained, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: report}}
"""


def test_a_burn_that_fails_leaves_the_node_drained_and_named(fw_node, tmp_path):
    import time

    archive, zip_sha, _bin_sha = shipped_zip(tmp_path)
    # flint fails the burn itself (the image passed its checks)
    flint = tmp_path / "bin" / "mstflint"
    os.unlink(str(flint))
    flint.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = burn ] && { echo '-E- Burning FS4 image failed: "
                     "Flash write failed'; exit 1; }; done\nexec '%s' '%s' --as mstflint \"$@\"\n"
                     % (sys.executable, STANDIN))
    flint.chmod(0o755)
    log = tmp_path / "scheduler.log"
    note = "/var/lib/gpudirect/unit-left-drained-%d-%d.json" % (os.getpid(), time.monotonic_ns())
    extra = {"gpudirect_nic_config_firmware": [dict(fw_node.pin, image=archive, sha256=zip_sha)],
             "gpudirect_nic_config_firmware_policy": "update",
             "gpudirect_drain_command": ["sh", "-c", "echo drain >>%s" % log],
             "gpudirect_drain_resume_command": ["sh", "-c", "echo resume >>%s" % log],
             "gpudirect_drain_command_waits": True, "gpudirect_drain_left_drained_file": note,
             "__gpudirect_nic_config_reset_record": str(tmp_path / "nic-config-reset.json")}
    env = {"PATH": "%s:%s" % (tmp_path / "bin", os.environ["PATH"]),
           "STANDIN_MLXCONFIG_STATE": str(tmp_path / "standin-state")}
    try:
        done = play_on_localhost(tmp_path, ROLLING_BATCH % fw_node.root, extra, env_extra=env)
        assert os.path.exists(note)
    finally:
        if os.path.exists(note):
            os.remove(note)
    assert done.returncode != 0, done.stdout
    assert log.read_text().split() == ["drain"]                                   # never resumed
    assert fw_node.firmware() == ("28.40.1000", "28.40.1000")
    # the failure names the node, the card, flint's error and the image; the table names the node, left drained
    said = "localhost: firmware burn failed on card 0000:17:00.0 (PSID MT_0000000834): -E- Burning FS4 image failed: " \
           "Flash write failed. Image %s.bin (from %s)" % (SIGNED, archive)
    assert said in done.stdout, done.stdout
    table = done.stdout.split("TASK [gpudirect_drain : Print the nodes left drained]")[1].split("TASK [")[0]
    assert "localhost" in table and "Fail the node whose ConnectX firmware burn failed" in table, table
    assert "echo resume" in table
    assert "failed at 'Fail the node whose ConnectX firmware burn failed': localhost: firmware burn failed on card " \
           "0000:17:00.0" in done.stdout


# ------------------------------------------------------------------ a card a warm reboot does not reset (issue #44)

def _rebooted_without_reset(node, tmp_path, levels):
    """The role set ATS_ENABLED=1 and asked for the reboot, which happened (the record's boot id is now another
    boot's) and did not reset the card (the stand-in's warm_reboot_resets: false)."""
    env = dict(os.environ, STANDIN_MLXCONFIG_STATE=str(tmp_path / "standin-state"))
    os.symlink(STANDIN, str(tmp_path / "bin" / "mstfwreset"))
    subprocess.run([sys.executable, STANDIN, "--standin-set", CX7, "warm_reboot_resets=false", "reset_levels=" + levels],
                   check=True, env=env)
    wanted = {"gpudirect_nic_config_params": {"ATS_ENABLED": True}}
    done, result = node.play(wanted)
    assert done.returncode == 0, done.stdout
    assert result["reasons"] == ["gpudirect_nic_config: ConnectX firmware values wait for a firmware reset or reboot: "
                                 "0000:17:00.0 ATS_ENABLED=1"]
    record_path = node.record
    record = json.loads(record_path.read_text())
    assert list(record["cards"]) == [CX7] and record["cards"][CX7]["pending"] == "ATS_ENABLED=1"
    # the reboot: the stand-in's boot hook (which leaves this card as it is) and another boot id in the record's past
    node.boot()
    record["cards"][CX7]["boot_id"] = "00000000-1111-2222-3333-444444444444"
    record_path.write_text(json.dumps(record))
    assert node.params()["ATS_ENABLED"]["current"] == 0
    return wanted, record_path


def test_a_reboot_that_did_not_reset_the_card_gets_mlxfwreset_not_a_second_reboot(node, tmp_path):
    wanted, record_path = _rebooted_without_reset(node, tmp_path, "3,4")
    checked, result = node.play(wanted, check=True)
    assert checked.returncode == 0, checked.stdout
    assert result["reasons"] == [] and result["plan"]["reset_due"] == [CX7]
    assert result["plan"]["disruption"][0].startswith("0000:17:00.0 (ConnectX7): firmware reset (mstfwreset level 3, "
                                                      "Driver restart and PCI reset) to load ATS_ENABLED=1")
    assert node.params()["ATS_ENABLED"]["current"] == 0 and record_path.exists()          # --check reset nothing

    done, result = node.play(wanted)
    assert done.returncode == 0, done.stdout
    assert "0000:17:00.0 reset with mlxfwreset level 3 (Driver restart and PCI reset)" in done.stdout
    assert result["reasons"] == []                                                        # no second reboot
    assert result["plan"]["changes"] == [] and result["plan"]["disruption"] == []
    assert node.params()["ATS_ENABLED"]["current"] == 1
    assert not record_path.exists()                                                       # nothing waits


AFTER_REBOOT_BATCH = """---
- name: A rolling batch of one node, from the reboot stage's after-boot step on (playbooks/rolling.yml's shape)
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpudirect_nic_config_sysfs_root: %s
  tasks:
    - name: Drain and change the node
      block:
        - {name: Drain, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: drain}}
        - {name: After the reboot, ansible.builtin.include_role: {name: gpudirect_nic_config, tasks_from: after_reboot}}
        - {name: Verified, ansible.builtin.set_fact: {gpudirect_verify_status: passed}}
      rescue:
        - {name: Record the failure, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: failed}}
    - {name: Resume the node or leave it drained, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}}
    - {name: Table of the nodes left drained, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: report}}
"""


def test_a_card_without_level_3_leaves_the_node_drained_named_with_the_cold_power_cycle(node, tmp_path):
    import time

    wanted, record_path = _rebooted_without_reset(node, tmp_path, "4")
    log = tmp_path / "scheduler.log"
    note = "/var/lib/gpudirect/unit-left-drained-%d-%d.json" % (os.getpid(), time.monotonic_ns())
    extra = dict(wanted, gpudirect_drain_command=["sh", "-c", "echo drain >>%s" % log],
                 gpudirect_drain_resume_command=["sh", "-c", "echo resume >>%s" % log],
                 gpudirect_drain_command_waits=True, gpudirect_drain_left_drained_file=note,
                 __gpudirect_nic_config_reset_record=str(record_path))
    env = {"PATH": "%s:%s" % (tmp_path / "bin", os.environ["PATH"]),
           "STANDIN_MLXCONFIG_STATE": str(tmp_path / "standin-state")}
    try:
        done = play_on_localhost(tmp_path, AFTER_REBOOT_BATCH % node.root, extra, env_extra=env)
        assert os.path.exists(note)
    finally:
        if os.path.exists(note):
            os.remove(note)
    assert done.returncode != 0, done.stdout
    assert log.read_text().split() == ["drain"]                                           # never resumed
    said = ("localhost: 0000:17:00.0 (ConnectX7): ATS_ENABLED=1 still waits for a firmware reset after the reboot asked "
            "for it (boot 00000000-1111-2222-3333-444444444444): a warm reboot does not reset this card, and mstfwreset "
            "-d 0000:17:00.0 query offers no level that loads it without a reboot")
    assert said in done.stdout, done.stdout
    assert "It needs a cold power cycle" in done.stdout and "is not resumed" in done.stdout
    table = done.stdout.split("TASK [gpudirect_drain : Print the nodes left drained]")[1].split("TASK [")[0]
    assert "localhost" in table and "Fail the node whose ConnectX card needs a cold power cycle" in table, table
    assert "echo resume" in table
    assert "Reboot requested" not in done.stdout                                          # no second reboot asked
    assert node.params()["ATS_ENABLED"]["current"] == 0 and record_path.exists()          # the record is kept
