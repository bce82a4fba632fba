"""Whether the kernel refuses unsigned modules, for every Secure Boot state mokutil prints
(module_utils/gpudirect_secure_boot.py: parse_mokutil_sb_state, kernel_secure_boot_state,
signature_policy and collect), on the published outputs of tests/fixtures/secure_boot/
mokutil_sb_state.yml and mokutil_sb_state_shim.yml combined with the kernel's own readings
of the latter (sources: tests/fixtures/secure_boot/README.md).

The rule, from the kernel's source: what the kernel shows decides (lockdown integrity or
confidentiality, or module.sig_enforce=Y: required; lockdown none and sig_enforce N: not).
Only when neither is readable does Secure Boot stand in, and only when the kernel counts the
boot as Secure Boot: drivers/firmware/efi/libstub/secureboot.c efi_get_secureboot returns
Secure Boot off for shim's MokSBState(RT)=1, the state mokutil reports as "SecureBoot validation
is disabled in shim", so such a node is not "signatures required" on Secure Boot's word."""

import os

import pytest
import yaml

from ansible.module_utils import gpudirect_secure_boot as sb

HERE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "secure_boot")


def _load(name):
    with open(os.path.join(HERE, name)) as handle:
        return yaml.safe_load(handle)


SHIM = _load("mokutil_sb_state_shim.yml")
KERNEL = SHIM["kernel"]
# every published output; the first file's entries get the kernel's view from the same rule
# the fixture states in words (the kernel's Secure Boot is on only outside Setup Mode and with
# shim validating)
STATES = list(SHIM["sb_state"])
for _case in _load("mokutil_sb_state.yml"):
    _kernel = _case["secure_boot"]
    if _kernel == "enabled" and (_case["shim_validation_disabled"] or _case["setup_mode"]):
        _kernel = "disabled"
    STATES.append(dict(_case, kernel_secure_boot=_kernel))


def _expected(state, reading):
    if reading["required"] is not None:
        return reading["required"]
    return True if state["kernel_secure_boot"] == "enabled" else None


def _ids(case):
    return "%s:%s" % (case["text"].strip().splitlines()[0][:40] if case["text"].strip() else "empty",
                      case["source"][:30])


def test_every_case_names_its_source():
    for case in STATES + KERNEL:
        assert str(case.get("source") or "").strip(), case


@pytest.mark.parametrize("case", SHIM["sb_state"], ids=_ids)
def test_published_outputs_parse(case):
    state = sb.parse_mokutil_sb_state(case["text"])
    assert (state["secure_boot"], state["setup_mode"], state["shim_validation_disabled"]) == (
        case["secure_boot"], case["setup_mode"], case["shim_validation_disabled"])


@pytest.mark.parametrize("case", STATES, ids=_ids)
def test_the_kernels_view_of_each_state(case):
    assert sb.kernel_secure_boot_state(sb.parse_mokutil_sb_state(case["text"])) == case["kernel_secure_boot"]


def _root(tmp_path, reading):
    root = tmp_path / "root"
    root.mkdir()
    if reading["lockdown"] is not None:
        (root / "sys/kernel/security").mkdir(parents=True)
        (root / "sys/kernel/security/lockdown").write_text(reading["lockdown"])
    if reading["sig_enforce"] is not None:
        (root / "sys/module/module/parameters").mkdir(parents=True)
        (root / "sys/module/module/parameters/sig_enforce").write_text(reading["sig_enforce"])
    return str(root)


@pytest.mark.parametrize("reading", KERNEL, ids=lambda r: r["name"])
@pytest.mark.parametrize("case", STATES, ids=_ids)
def test_collect_decides_from_what_the_kernel_enforces(tmp_path, case, reading):
    """mokutil's output (stdout and stderr together, as collect passes them) with each reading."""
    def run(argv):
        if argv == ["mokutil", "--sb-state"]:
            return (0, case["text"], "")
        return None
    facts = sb.collect(_root(tmp_path, reading), run, live=True)
    assert facts["source"] == "mokutil" and facts["errors"] == []
    assert facts["secure_boot"] == case["secure_boot"]
    assert facts["signatures_required"] is _expected(case, reading), facts["enforcement"]
    if case["secure_boot"] == "enabled" and case["shim_validation_disabled"]:
        # the reason says shim validation is off and that the kernel counts Secure Boot off
        assert "shim validation disabled, which the kernel counts as Secure Boot off" in facts["enforcement"]
        assert not facts["enforcement"].startswith("Secure Boot is enabled:")
    if case["kernel_secure_boot"] == "enabled" and reading["required"] is None:
        assert facts["enforcement"] == "Secure Boot is enabled (the kernel's lockdown is not readable)"


def test_shim_validation_disabled_is_not_signatures_required_on_secure_boots_word(tmp_path):
    """The issue's case: 'SecureBoot enabled' then 'SecureBoot validation is disabled in shim',
    kernel files unreadable. Before, this read as signatures required; the kernel counts
    Secure Boot off, so only its own files could say, and they cannot: unknown, which the
    preflight reports as a warning rather than demanding a signing key."""
    text = next(c["text"] for c in SHIM["sb_state"] if c["shim_validation_disabled"])
    facts = sb.collect(_root(tmp_path, {"lockdown": None, "sig_enforce": None}),
                       lambda argv: (0, text, "") if argv == ["mokutil", "--sb-state"] else None, live=True)
    assert facts["signatures_required"] is None
    assert sb.findings(facts, signing_configured=False)[0][0] == "warn"
    assert not [f for f in sb.findings(facts, signing_configured=False) if f[0] == "bad"]
    lines = sb.report_lines(facts)
    assert lines[0] == "secure boot enabled (from mokutil), shim validation disabled"
    assert lines[1].startswith("module signatures unknown: Secure Boot is enabled with shim validation disabled")


def test_shim_validation_disabled_on_a_kernel_that_still_locks_down(tmp_path):
    """A kernel may lock down on its own (lockdown= on the command line, a forced lockdown
    config, a kernel older than the MokSBStateRT check whose stub did not honour the state):
    its lockdown file decides, whatever mokutil says about shim."""
    reading = next(r for r in KERNEL if r["name"] == "lockdown-integrity-sig_enforce-Y")
    text = "SecureBoot enabled\nSecureBoot validation is disabled in shim\n"
    facts = sb.collect(_root(tmp_path, reading),
                       lambda argv: (0, text, "") if argv == ["mokutil", "--sb-state"] else None, live=True)
    assert facts["signatures_required"] is True
    assert facts["enforcement"] == ("kernel lockdown is integrity; module.sig_enforce=Y (Secure Boot is enabled with "
                                    "shim validation disabled, which the kernel counts as Secure Boot off; the kernel "
                                    "enforces signatures regardless)")
    assert sb.findings(facts, signing_configured=False)[0][0] == "bad"


def test_efivars_with_shims_state_decide_the_same(tmp_path):
    """Without mokutil, the EFI variables: SecureBoot 1, SetupMode 0 (the Debian 12 node's bytes)
    and shim's MokSBStateRT present."""
    root = tmp_path / "root"
    efivars = root / "sys/firmware/efi/efivars"
    efivars.mkdir(parents=True)
    vm = os.path.join(HERE, "debian12_ovmf")
    for name in ("SecureBoot", "SetupMode"):
        with open(os.path.join(vm, "efivar_%s.bin" % name), "rb") as handle:
            (efivars / ("%s-8be4df61-93ca-11d2-aa0d-00e098032b8c" % name)).write_bytes(handle.read())
    facts = sb.collect(str(root))
    assert (facts["secure_boot"], facts["signatures_required"]) == ("enabled", True)
    (efivars / "MokSBStateRT-605dab50-e046-4300-abb6-3dd810dd8b23").write_bytes(b"\x06\x00\x00\x00\x01")
    facts = sb.collect(str(root))
    assert (facts["secure_boot"], facts["shim_validation_disabled"], facts["signatures_required"]) == (
        "enabled", True, None)


@pytest.mark.parametrize("text, message", [
    # the shim line comes only after "SecureBoot enabled" in mokutil's sb_state
    ("SecureBoot validation is disabled in shim\n", "printed no Secure Boot state"),
    ("SecureBoot disabled\nSecureBoot validation is disabled in shim\n", "without 'SecureBoot enabled'"),
    # and the Setup Mode line only after "SecureBoot disabled"
    ("SecureBoot enabled\nPlatform is in Setup Mode\n", "without 'SecureBoot disabled'"),
    ("SecureBoot enabled\nSecureBoot disabled\n", "more than one Secure Boot state"),
    ("SecureBoot enabled\nThis system doesn't support Secure Boot\n", "more than one Secure Boot state"),
    # sb_state's error when SetupMode cannot be read: no state at all (the format string, %m as ENOENT)
    ("Failed to read \"SetupMode\" variable: No such file or directory\n", "printed no Secure Boot state"),
    ("SecureBoot enab", "printed no Secure Boot state"),
    ("secureboot enabled\n", "printed no Secure Boot state"),
])
def test_malformed_outputs_are_errors_naming_the_text(text, message):
    with pytest.raises(ValueError, match=message) as err:
        sb.parse_mokutil_sb_state(text)
    assert repr(text[:200]) in str(err.value)


def test_malformed_output_falls_back_to_the_efi_variables_and_says_so(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    text = "SecureBoot disabled\nSecureBoot validation is disabled in shim\n"
    facts = sb.collect(str(root), lambda argv: (0, text, "") if argv == ["mokutil", "--sb-state"] else None, live=True)
    assert facts["source"] == "efivars" and facts["secure_boot"] == "unsupported"
    assert any("without 'SecureBoot enabled'" in e for e in facts["errors"])
