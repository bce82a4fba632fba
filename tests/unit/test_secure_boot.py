"""Secure Boot state and module-signature policy (module_utils/gpudirect_secure_boot.py),
on mokutil output, EFI variable bytes and key listings that real machines printed
(tests/fixtures/secure_boot/*.yml name each source)."""

import os

import pytest
import yaml

from ansible.module_utils import gpudirect_secure_boot as sb

HERE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "secure_boot")


def _load(name):
    with open(os.path.join(HERE, name)) as handle:
        return yaml.safe_load(handle)


MOKUTIL = _load("mokutil_sb_state.yml")


def _text(name):
    with open(os.path.join(HERE, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("case", MOKUTIL, ids=[c["source"][:50] for c in MOKUTIL])
def test_mokutil_sb_state_real_outputs(case):
    state = sb.parse_mokutil_sb_state(case["text"])
    assert state["secure_boot"] == case["secure_boot"]
    assert state["setup_mode"] is case["setup_mode"]
    assert state["shim_validation_disabled"] is case["shim_validation_disabled"]


@pytest.mark.parametrize("text", ["", "Usage: mokutil [OPTIONS]\n", "SecureBoot maybe\n"])
def test_mokutil_text_without_a_state_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match="printed no Secure Boot state"):
        sb.parse_mokutil_sb_state(text)


# The file names efivarfs gives the variables, written out rather than built from the
# module's constants, so that a wrong GUID there fails here: the EFI global variables'
# GUID (UEFI spec), and shim's own GUID for its Mok* variables (shim's SHIM_LOCK_GUID; the
# VM tier enrols MokList under it and the Debian 12 node's shim then trusts the certificate).
EFIVAR_FILES = {
    "SecureBoot": "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c",
    "SetupMode": "SetupMode-8be4df61-93ca-11d2-aa0d-00e098032b8c",
    "MokSBStateRT": "MokSBStateRT-605dab50-e046-4300-abb6-3dd810dd8b23",
}


def _efivars(tmp_path, **variables):
    efivars = tmp_path / "efi" / "efivars"
    efivars.mkdir(parents=True)
    for name, data in variables.items():
        (efivars / EFIVAR_FILES[name]).write_bytes(data)
    return str(tmp_path / "efi")


def test_efivars_healthy_enabled_machine(tmp_path):
    # lcp/mokutil#45: "SecureBoot should be 06 00 00 00 01 and SetupMode 06 00 00 00 00"
    root = _efivars(tmp_path, SecureBoot=b"\x06\x00\x00\x00\x01", SetupMode=b"\x06\x00\x00\x00\x00")
    state = sb.read_efivars(root)
    assert (state["secure_boot"], state["setup_mode"], state["error"]) == ("enabled", False, None)


def test_efivars_disabled_as_reported_in_mokutil_45(tmp_path):
    # the reporter's hexdump in lcp/mokutil#45: SecureBoot 06 00 00 00 00
    root = _efivars(tmp_path, SecureBoot=b"\x06\x00\x00\x00\x00", SetupMode=b"\x06\x00\x00\x00\x00")
    assert sb.read_efivars(root)["secure_boot"] == "disabled"


def test_efivars_setup_mode_means_not_enforcing(tmp_path):
    root = _efivars(tmp_path, SecureBoot=b"\x06\x00\x00\x00\x01", SetupMode=b"\x06\x00\x00\x00\x01")
    state = sb.read_efivars(root)
    assert (state["secure_boot"], state["setup_mode"]) == ("disabled", True)


def test_efivars_shim_validation_disabled(tmp_path):
    root = _efivars(tmp_path, SecureBoot=b"\x06\x00\x00\x00\x01", SetupMode=b"\x06\x00\x00\x00\x00",
                    MokSBStateRT=b"\x06\x00\x00\x00\x01")
    assert sb.read_efivars(root)["shim_validation_disabled"] is True


def test_efivars_a_mok_variable_under_another_guid_is_not_shims(tmp_path):
    # the GUID this parser once used by mistake: a variable under it is not shim's state
    root = _efivars(tmp_path, SecureBoot=b"\x06\x00\x00\x00\x01", SetupMode=b"\x06\x00\x00\x00\x00")
    (tmp_path / "efi" / "efivars" / "MokSBStateRT-605dab50-e046-4293-a1e8-d8d8c04bd9b9").write_bytes(b"\x06\x00\x00\x00\x01")
    assert sb.read_efivars(root)["shim_validation_disabled"] is False


def test_no_efi_directory_is_unsupported(tmp_path):
    # the lent H100 node booted without EFI: /sys/firmware/efi does not exist
    assert sb.read_efivars(str(tmp_path / "absent"))["secure_boot"] == "unsupported"


@pytest.mark.parametrize("data", [b"", b"\x06\x00\x00\x00", b"\x06\x00\x00\x00\x07", b"\x06\x00\x00\x00\x01\x00"])
def test_malformed_efivar_is_unknown_with_the_bytes_named(tmp_path, data):
    root = _efivars(tmp_path, SecureBoot=data, SetupMode=b"\x06\x00\x00\x00\x00")
    state = sb.read_efivars(root)
    assert state["secure_boot"] == "unknown"
    assert "SecureBoot" in state["error"]


def test_unreadable_securebootvar_is_unknown(tmp_path):
    root = _efivars(tmp_path, SetupMode=b"\x06\x00\x00\x00\x00")
    state = sb.read_efivars(root)
    assert state["secure_boot"] == "unknown" and "SecureBoot-" in state["error"]


@pytest.mark.parametrize("text,mode", [
    ("[none] integrity confidentiality\n", "none"),
    ("none [integrity] confidentiality\n", "integrity"),
    ("none integrity [confidentiality]\n", "confidentiality"),
])
def test_lockdown_modes(text, mode):
    assert sb.parse_lockdown(text) == mode


def test_lockdown_without_a_bracket_is_an_error():
    with pytest.raises(ValueError, match="no \\[mode\\]"):
        sb.parse_lockdown("none integrity confidentiality")


@pytest.mark.parametrize("lockdown,enforce,required", [
    ("integrity", "N", True),       # Debian/Ubuntu kernel booted with Secure Boot
    ("none", "Y", True),            # module.sig_enforce=1 on the command line
    ("none", "N", False),           # Secure Boot off (the lent H100 node)
    (None, None, None),             # neither readable: the caller says it cannot know
    ("confidentiality", None, True),
])
def test_module_signature_policy(lockdown, enforce, required):
    policy = sb.module_signature_policy(lockdown, enforce)
    assert policy["required"] is required
    assert policy["why"]


def test_proc_keys_real_capture():
    keys = sb.parse_proc_keys(_text("proc_keys.txt"))
    assert [k["subject"] for k in keys] == ["Canonical Ltd. Master Certificate Authority", "Debian Secure Boot CA"]
    assert keys[1]["key_id"] == "6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1"
    assert keys[0]["serial"] == 0x15c78670


def test_keyctl_list_asymmetric_keys():
    keys = sb.parse_keyctl_list(_text("keyctl_list.txt"))
    assert [(k["subject"], k["key_id"]) for k in keys] == [
        ("Canonical Ltd. Master Certificate Authority", "ad91990bc22ab1f517048c23b6655a268e345a63"),
        ("Debian Secure Boot CA", "6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1"),
    ]


def test_keyctl_list_without_asymmetric_keys_and_empty():
    assert sb.parse_keyctl_list(_text("keyctl_list_session.txt")) == []
    assert sb.parse_keyctl_list("keyring is empty\n") == []


@pytest.mark.parametrize("text", ["", "keyctl_read_alloc: Permission denied\n",
                                  "1 key in keyring:\ngarbage line\n"])
def test_keyctl_list_malformed(text):
    with pytest.raises(ValueError):
        sb.parse_keyctl_list(text)


def test_proc_keys_malformed_line():
    with pytest.raises(ValueError, match="unreadable line"):
        sb.parse_proc_keys("15c78670 I------ 1 perm\n")


def _vendor_section(title):
    """A section of the lent H100 node's capture (tests/harness/gpu_node/capture_vendor.sh)."""
    path = os.path.join(HERE, "..", "gpu_node", "h100", "vendor.txt")
    with open(path) as handle:
        text = handle.read()
    return text.split("=== %s\n" % title, 1)[1].split("\n=== ", 1)[0]


def test_gpu_node_enforces_signatures_without_secure_boot(tmp_path):
    # The lent H100 node (Ubuntu 24.04 userland, kernel 6.18.44-fc-v657-gpu) booted without
    # EFI and without lockdown, yet module.sig_enforce is Y: every module the toolkit builds
    # there must be signed, Secure Boot or not.
    section = _vendor_section("kernel lockdown, module.sig_enforce").splitlines()
    assert section[0].endswith("/sys/kernel/security/lockdown: No such file or directory")
    policy = sb.module_signature_policy(None, section[1])
    assert policy == {"required": True, "why": "module.sig_enforce=Y"}
    assert sb.read_efivars(str(tmp_path / "no-efi"))["secure_boot"] == "unsupported"


def test_gpu_node_keyrings_from_proc_keys():
    keys = sb.parse_proc_keys(_vendor_section("keyrings"))
    # the keyring lines (.builtin_trusted_keys, .blacklist) are not keys; the one asymmetric
    # key is the kernel build's own, which signed the nvidia modules the node loads
    assert keys == [{"serial": 0x33ecad71, "subject": "Build time autogenerated kernel key",
                     "key_id": "6f10b6599c33c41bb00e50d68af8f0ab7e6b37ff"}]
