"""The effective module-signature policy (module_utils/gpudirect_secure_boot.py,
``kernel_secure_boot`` and ``effective_signature_policy``) over every combination of the inputs
the kernel honours. The rules come from the kernel's source (include/linux/efi.h
efi_get_secureboot_mode, drivers/firmware/efi/libstub/secureboot.c efi_get_secureboot with
shim's MokSBStateRT, kernel/module/signing.c sig_enforce / module_sig_check,
security/lockdown); the EFI byte layouts are the VM tier's Debian 12 captures
(tests/fixtures/secure_boot/debian12_ovmf/README.md)."""

import itertools
import os

import pytest

from ansible.module_utils import gpudirect_secure_boot as sb

VM = os.path.join(os.path.dirname(__file__), "..", "fixtures", "secure_boot", "debian12_ovmf")

EFI = (None, 0, 1)
LOCKDOWN = (None, "none", "integrity", "confidentiality")
ENFORCE = (None, "Y", "N")
CONFIG = (None, True, False)


def _oracle(secure_boot, setup_mode, moksb, lockdown, enforce, config):
    """The kernel's decision written out plainly, independent of the code under test."""
    if secure_boot is None and setup_mode is None:
        mode = "unsupported"
    elif secure_boot == 1 and setup_mode != 1 and moksb != 1:
        mode = "enabled"
    else:
        mode = "disabled"
    sig_enforce_on = enforce == "Y" or (enforce is None and config is True)
    locked = lockdown in ("integrity", "confidentiality")
    if sig_enforce_on or locked:
        required = True
    elif enforce is None and lockdown is None and config is None:
        required = None
    else:
        required = False
    return mode, required


COMBOS = [c for c in itertools.product(EFI, EFI, EFI, LOCKDOWN, ENFORCE, CONFIG)
          if not (c[5] is True and c[4] == "N")]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(str(x) for x in c))
def test_every_combination_matches_the_kernel(combo):
    policy = sb.effective_signature_policy(*combo)
    assert (policy["secure_boot"], policy["required"]) == _oracle(*combo)
    if policy["required"]:
        assert policy["why"]


def test_combination_table_is_complete():
    assert len(COMBOS) == 3 * 3 * 3 * 4 * (3 * 3 - 1)


@pytest.mark.parametrize("lockdown", LOCKDOWN)
def test_force_config_with_enforce_off_is_a_contradiction(lockdown):
    with pytest.raises(ValueError, match="CONFIG_MODULE_SIG_FORCE=y but module.sig_enforce reads N"):
        sb.effective_signature_policy(1, 0, None, lockdown, "N", True)


def _efi_byte(name):
    with open(os.path.join(VM, "efivar_%s.bin" % name), "rb") as handle:
        return sb.parse_efivar_byte(handle.read(), name)


def _text(name):
    with open(os.path.join(VM, name)) as handle:
        return handle.read()


def test_debian12_secure_boot_capture():
    secure_boot, setup_mode = _efi_byte("SecureBoot"), _efi_byte("SetupMode")
    assert (secure_boot, setup_mode) == (1, 0)
    policy = sb.effective_signature_policy(secure_boot, setup_mode, None, sb.parse_lockdown(_text("lockdown.txt")),
                                           _text("sig_enforce.txt"))
    assert policy["secure_boot"] == "enabled" and policy["required"] is True
    assert "lockdown is integrity" in policy["why"] and "module.sig_enforce=Y" in policy["why"]


def test_shim_validation_disabled_turns_secure_boot_off_for_the_kernel():
    # mokutil --disable-validation: shim then exposes MokSBStateRT=1 (mokutil_sb_state.yml has the
    # "SecureBoot validation is disabled in shim" line); the firmware still reports SecureBoot=1
    policy = sb.effective_signature_policy(1, 0, 1, "none", "N", False)
    assert policy["secure_boot"] == "disabled" and policy["required"] is False
    assert "shim validation disabled" in policy["notes"][0]
    assert sb.effective_signature_policy(1, 1, None, None, None)["notes"][0].endswith("(Setup Mode)")


def test_secure_boot_without_lockdown_does_not_enforce():
    policy = sb.effective_signature_policy(1, 0, None, "none", "N", False)
    assert policy["required"] is False and "neither locks down nor enforces" in policy["notes"][0]


@pytest.mark.parametrize("args, match", [
    ((2, 0, None, None, None), "SecureBoot has the value 2"),
    ((1, 0, None, "strict", None), "'strict' is none of"),
    ((1, 0, None, None, "1"), "reads '1', not Y or N"),
    ((1, 0, None, None, None, "y"), "CONFIG_MODULE_SIG_FORCE must be"),
])
def test_values_the_kernel_cannot_show_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        sb.effective_signature_policy(*args)
