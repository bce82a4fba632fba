"""gpudirect_verify's module signing check (module_utils/gpudirect_secure_boot.py
verification_check, filter gpudirect_signing_check) on what real nodes printed.

Inputs are assembled as gpudirect_module_signing's check action returns them, from
captures: the Debian 12 Secure Boot VM's lockdown, sig_enforce and a gdrdrv DKMS
signed with its own key (tests/fixtures/secure_boot/debian12_ovmf/), mokutil
--list-enrolled with the toolkit's certificate enrolled, and a module signed by that
certificate (modinfo of a real signed module with the certificate's serial as key).
"""
import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_gpu_checks as checks
from gpudirect_verify import add_checks
from ansible.module_utils import gpudirect_secure_boot as sb
from conftest import read_fixture, role_tasks_play

CERT = sb.parse_certificate(read_fixture("secure_boot", "signing_cert.pem", binary=True))
SERIAL = ":".join(CERT["serial"][i:i + 2] for i in range(0, len(CERT["serial"]), 2)).upper()
KERNELS = ["6.1.0-50-amd64", "6.1.0-56-amd64"]


def _policy(lockdown_text, sig_enforce):
    """The secure_boot section's two fields the check reads, from the kernel's own files."""
    policy = sb.module_signature_policy(sb.parse_lockdown(lockdown_text), sig_enforce)
    return {"signatures_required": policy["required"], "enforcement": policy["why"]}


SECURE_BOOT_VM = _policy(read_fixture("secure_boot", "debian12_ovmf", "lockdown.txt"),
                         read_fixture("secure_boot", "debian12_ovmf", "sig_enforce.txt"))


def _ours():
    text = read_fixture("secure_boot", "modinfo_signed_arch_ast.txt").replace(
        "76:06:C7:84:BC:2F:C6:38:38:61:C1:6F:32:D5:6A:03:88:22:68:1C", SERIAL)
    return sb.parse_modinfo_signature(text)


def _result(verdicts, trust, secure_boot=SECURE_BOOT_VM, cert=CERT):
    return {"secure_boot": secure_boot, "kernels": KERNELS, "certificate": cert, "trust": trust,
            "modules": verdicts, "problems": [v["message"] for v in verdicts if not v["ok"]]}


ENROLLED = sb.cert_trust(CERT, moks=sb.parse_mokutil_list(
    read_fixture("secure_boot", "mokutil_list_enrolled_toolkit_cert.txt")))
NOT_TRUSTED = sb.cert_trust(CERT, moks=[], keys=sb.parse_proc_keys(
    read_fixture("secure_boot", "debian12_ovmf", "proc_keys_asymmetric.txt")))


def test_the_vm_capture_is_a_kernel_that_refuses_unsigned_modules():
    assert SECURE_BOOT_VM["signatures_required"] is True
    assert "module.sig_enforce=Y" in SECURE_BOOT_VM["enforcement"]


def test_passes_when_every_module_for_both_kernels_is_signed_by_the_enrolled_certificate():
    verdicts = [sb.module_verdict(m, k, _ours(), CERT) for k in KERNELS for m in ("nvidia", "nvidia_peermem", "gdrdrv")]
    check = sb.verification_check(_result(verdicts, ENROLLED))
    assert check["status"] == "passed", check
    assert "6 modules of the chain for 6.1.0-50-amd64, 6.1.0-56-amd64 signed by" in check["summary"]
    assert "an enrolled MOK" in check["summary"]


def test_a_module_dkms_signed_with_its_own_key_fails_naming_it_and_the_kernel():
    theirs = sb.parse_modinfo_signature(read_fixture("secure_boot", "debian12_ovmf", "modinfo_gdrdrv_dkms_autokey.txt"))
    verdicts = [sb.module_verdict("nvidia", KERNELS[1], _ours(), CERT),
                sb.module_verdict("gdrdrv", KERNELS[1], theirs, CERT)]
    check = sb.verification_check(_result(verdicts, ENROLLED))
    assert check["status"] == "failed"
    assert "module gdrdrv for kernel 6.1.0-56-amd64" in check["reason"] and "'DKMS module signing key'" in check["reason"]
    assert "nvidia" not in check["reason"]
    assert "gpudirect_dkms_signing_key_path" in check["summary"]


def test_signed_but_not_trusted_fails_and_says_when_the_enrolment_is_queued():
    verdicts = [sb.module_verdict("nvidia", KERNELS[0], _ours(), CERT)]
    check = sb.verification_check(_result(verdicts, NOT_TRUSTED))
    assert check["status"] == "failed"
    assert "which the kernel does not trust: not an enrolled MOK, not in its keyrings" in check["reason"]
    assert "Enroll MOK" not in check["reason"]
    queued = sb.verification_check(_result(verdicts, dict(NOT_TRUSTED, pending=True)))
    assert "its enrolment is queued" in queued["reason"] and "'Enroll MOK'" in queued["reason"]


def test_no_certificate_configured_fails_naming_the_knobs():
    theirs = sb.parse_modinfo_signature(read_fixture("secure_boot", "debian12_ovmf", "modinfo_gdrdrv_dkms_autokey.txt"))
    verdicts = [sb.module_verdict("gdrdrv", KERNELS[0], theirs, None)]
    check = sb.verification_check(_result(verdicts, {"enrolled": False, "in_keyring": False}, cert=None),
                                  cert_configured=False)
    assert check["status"] == "failed"
    assert "no signing certificate is configured" in check["reason"]
    assert "gpudirect_dkms_signing_cert_path" in check["summary"]


@pytest.mark.parametrize("lockdown,sig_enforce,words", [
    ("[none] integrity confidentiality\n", "N\n", "the kernel loads unsigned modules (lockdown none, module.sig_enforce=N)"),
    (None, None, "whether the kernel refuses unsigned modules is unknown"),
])
def test_a_kernel_that_loads_unsigned_modules_or_cannot_say_skips_it(lockdown, sig_enforce, words):
    secure_boot = _policy(lockdown, sig_enforce) if lockdown else {"signatures_required": None,
                                                                     "enforcement": "neither is readable"}
    check = sb.verification_check(_result([sb.module_verdict("nvidia", KERNELS[0], None, CERT)], {}, secure_boot))
    assert check["status"] == "skipped"
    assert words in check["summary"]


def test_nothing_of_the_chain_built_skips_it():
    check = sb.verification_check(_result([], ENROLLED))
    assert check["status"] == "skipped" and "no module of the chain is built for 6.1.0-50-amd64" in check["reason"]


def test_the_filter_refuses_what_is_not_the_modules_result():
    with pytest.raises(AnsibleFilterError, match="gpudirect_module_signing's check result"):
        checks.gpudirect_signing_check({"skipped": True, "skip_reason": "Conditional result was False"})
    with pytest.raises(AnsibleFilterError):
        checks.gpudirect_signing_check("not a dict")


def test_a_failed_signing_check_fails_a_passed_host_with_the_fix():
    check = sb.verification_check(_result([sb.module_verdict("nvidia", KERNELS[1], None, CERT)], ENROLLED))
    record = add_checks({"status": "passed", "result": "PASSED", "notes": []}, [check])
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "module_signing_failed"
    assert "module nvidia for kernel 6.1.0-56-amd64" in record["diagnosis"]["message"]
    assert "gpudirect_verify_signing: false" in record["diagnosis"]["fix"]
    assert check["summary"] in record["notes"]


# --- the role's tasks (roles/gpudirect_verify/tasks/signing.yml) on this machine ---------------

PLAYBOOK = role_tasks_play("gpudirect_verify", "signing", """\
    - name: Show the check
      ansible.builtin.debug:
        msg: "CHECK {{ __gpudirect_verify_check_signing | to_json }}"
""")


def _tasks(tmp_path, extra, check=False):
    import json
    from conftest import play_on_localhost

    extra = dict({"__gpudirect_verify_signing_cert": str(tmp_path / "signing-cert.der"),
                  "ansible_facts": {"gpudirect": {"kernel": {"running": KERNELS[0], "default": KERNELS[1]}}}}, **extra)
    proc = play_on_localhost(tmp_path, PLAYBOOK, extra, check=check)
    assert proc.returncode == 0, proc.stdout
    line = [l for l in proc.stdout.splitlines() if '"msg": "CHECK ' in l][0]
    return json.loads(line.split('"msg": "CHECK ', 1)[1].rstrip('"').encode().decode("unicode_escape")), proc.stdout


def test_the_tasks_read_this_machine_and_judge_what_they_read(tmp_path):
    """The module really runs here (read-only, in check mode too); whatever this machine's
    kernel says, the check is judged and printed, never left out."""
    check, log = _tasks(tmp_path, {}, check=True)
    assert check["name"] == "module_signing" and check["status"] in ("passed", "failed", "skipped")
    assert "module signing: " in log


def test_the_tasks_fail_the_check_on_a_module_signed_by_another_key(tmp_path):
    # the registered probe replaced by what the Secure Boot VM returned (extra vars win)
    (tmp_path / "signing-cert.der").write_bytes(read_fixture("secure_boot", "signing_cert.der", binary=True))
    theirs = sb.parse_modinfo_signature(read_fixture("secure_boot", "debian12_ovmf", "modinfo_gdrdrv_dkms_autokey.txt"))
    probe = _result([sb.module_verdict("gdrdrv", KERNELS[1], theirs, CERT)], ENROLLED)
    check, log = _tasks(tmp_path, {"__gpudirect_verify_signing_run": probe})
    assert check["status"] == "failed", check
    assert "module signing: FAILED: module gdrdrv for kernel 6.1.0-56-amd64" in " ".join(log.split())


def test_switched_off_it_is_skipped_saying_so(tmp_path):
    check, _log = _tasks(tmp_path, {"gpudirect_verify_signing": False})
    assert check == {"name": "module_signing", "status": "skipped", "reason": "gpudirect_verify_signing is false",
                     "summary": "module signing: not checked: gpudirect_verify_signing is false"}


def test_the_real_gpu_node_enforces_signatures_and_the_check_says_why_it_did_not_check():
    """site.yml --check on the lent H100 node (tests/fixtures/gpu_node/h100/offline/README.md):
    its kernel has module.sig_enforce=Y, but the image's driver is outside DKMS, so nothing
    of the chain is built there and the check says so instead of passing."""
    log = read_fixture("gpu_node", "h100", "offline", "site.yml-check.log")
    assert "module.sig_enforce=Y" in log
    assert '"msg": "module signing: not checked: no module of the chain is built for 6.18.44-fc-v657-gpu"' in log
    assert "module signing: not checked: no module of the chain is built for 6.18.44-fc-v657-gpu" in \
        sb.verification_check({"secure_boot": {"signatures_required": True, "enforcement": "module.sig_enforce=Y"},
                               "kernels": ["6.18.44-fc-v657-gpu"], "modules": [], "problems": []})["summary"]
