"""roles/gpudirect_dkms/tasks/sign.yml on this machine, on a given policy.

The read-only probe (gpudirect_module_signing, action check) runs, but its registered
result is replaced by one given as an extra var (extra vars win), so the kernel "enforces"
signatures; the role's paths point into a temporary directory. The signing run itself is
real: with nothing of the chain built on this machine it only writes the certificate's DER
copy, and the tasks write the pushed key and certificate and the DKMS drop-in.
"""

import os
import stat
import subprocess

from conftest import ROOT, play_on_localhost, role_tasks_play

HERE = os.path.join(ROOT, "tests", "fixtures", "secure_boot")
KERNEL = "6.1.0-20-amd64"
# not a key: the tasks only check the PEM armour; nothing signs with it here
KEY_TEXT = "-----BEGIN PRIVATE KEY-----\nTUFERS1VUC1GT1ItVEhFLVRFU1Q=\n-----END PRIVATE KEY-----\n"

PLAYBOOK = role_tasks_play("gpudirect_dkms", "sign")


def _probe(required=True, modules=1, method="framework_conf"):
    return {"changed": False, "secure_boot": {"signatures_required": required, "enforcement": "module.sig_enforce=Y"},
            # as module_verdict reports a module DKMS 3.0.10 signed with its own key
            # (tests/fixtures/secure_boot/debian12_ovmf/modinfo_gdrdrv_dkms_autokey.txt)
            "modules": [{"module": "nvidia", "kernel": KERNEL, "status": "other_key", "signer": "DKMS module signing key",
                         "sig_key": "3E:4B:64:13:44:76:96:15:33:EA:5B:6D:09:6E:F9:1D:1F:88:3D:3E"}] * modules, "problems": [], "dkms_method": method,
            "dkms_version": [3, 0, 10], "trust": {}, "certificate": None, "actions": [], "kernels": [KERNEL]}


def _play(tmp_path, probe, check=False, **knobs):
    signing = tmp_path / "module-signing"
    extra = {"__gpudirect_dkms_signing_probe": probe, "__gpudirect_dkms_signing_kernels": [KERNEL],
             "__gpudirect_dkms_signing_dir": str(signing),
             "__gpudirect_dkms_signing_cert_der": str(signing / "signing-cert.der"),
             "__gpudirect_dkms_signing_dropin": str(tmp_path / "framework.conf.d" / "90-gpudirect-signing.conf"),
             "__gpudirect_dkms_result": {"kernels": [{"release": KERNEL}]}}
    extra.update(knobs)
    proc = play_on_localhost(tmp_path, PLAYBOOK, extra, check=check)
    return proc.returncode, proc.stdout, signing


def test_enforcing_kernel_without_a_key_fails_naming_the_knobs(tmp_path):
    rc, log, _signing = _play(tmp_path, _probe())
    assert rc != 0
    flat = " ".join(log.split())
    assert "refuses unsigned modules (module.sig_enforce=Y)" in flat
    assert "Built now: nvidia for %s (signed by DKMS module signing key, key 3E:4B:64" % KERNEL in flat
    for knob in ("gpudirect_dkms_signing_key_path", "gpudirect_dkms_signing_cert_content"):
        assert knob in flat


def test_nothing_built_and_no_key_is_no_failure(tmp_path):
    rc, log, _signing = _play(tmp_path, _probe(modules=0))
    assert rc == 0, log


def test_pushed_key_and_dkms_drop_in_then_nothing_changes(tmp_path):
    with open(os.path.join(HERE, "signing_cert.pem")) as handle:
        cert_text = handle.read()
    knobs = {"gpudirect_dkms_signing_key_content": KEY_TEXT, "gpudirect_dkms_signing_cert_content": cert_text}
    rc, log, signing = _play(tmp_path, _probe(), check=True, **knobs)
    assert rc == 0, log
    assert not signing.exists()
    rc, log, signing = _play(tmp_path, _probe(), **knobs)
    assert rc == 0, log
    assert "TUFERS1VUC1GT1ItVEhFLVRFU1Q" not in log
    key = signing / "signing-key.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.read_text() == KEY_TEXT
    assert stat.S_IMODE(signing.stat().st_mode) == 0o700
    with open(os.path.join(HERE, "signing_cert.der"), "rb") as handle:
        assert (signing / "signing-cert.der").read_bytes() == handle.read()
    dropin = (tmp_path / "framework.conf.d" / "90-gpudirect-signing.conf").read_text()
    assert 'mok_signing_key="%s"\n' % key in dropin
    assert 'mok_certificate="%s"\n' % (signing / "signing-cert.pem") in dropin
    # this machine does not trust the test certificate (no MOK, not in its keyrings): the
    # chain waits for the enrolment, and the role asks for the boot that follows it
    flat = " ".join(log.split())
    assert ("Reboot requested (the reboot stage acts on it): gpudirect_dkms: the chain is signed by GPUDirect toolkit "
            "test module signing key, which the running kernel does not trust yet") in flat
    rc, log, _signing = _play(tmp_path, _probe(), **knobs)
    assert rc == 0, log
    assert "changed=0" in log.split("PLAY RECAP")[1]


# DKMS 2.8.1 to 3.0.3 read sign_tool from /etc/dkms/framework.conf (sourced as shell) and
# run it as `"$sign_tool" "$kernelver" "$module"` after each build, before compressing
# (dell/dkms v2.8.1..v3.0.3, run_sign_tool); Ubuntu 22.04 ships 2.8.7.
FRAMEWORK_CONF = '''## This configuration file modifies the behavior of DKMS.
# sign_tool="/etc/dkms/sign_helper.sh"
sign_tool="/etc/dkms/sign_helper.sh"
'''


def _sign_tool_play(tmp_path, check=False, **knobs):
    with open(os.path.join(HERE, "signing_cert.pem")) as handle:
        cert_text = handle.read()
    conf = tmp_path / "framework.conf"
    if not conf.exists():
        conf.write_text(FRAMEWORK_CONF)
    knobs = dict({"gpudirect_dkms_signing_key_content": KEY_TEXT, "gpudirect_dkms_signing_cert_content": cert_text,
                  "__gpudirect_dkms_signing_sign_tool": str(tmp_path / "module-signing" / "dkms-sign-tool"),
                  "__gpudirect_dkms_framework_conf": str(conf)}, **knobs)
    probe = _probe(method="sign_tool")
    probe["dkms_version"] = [2, 8, 7]
    return _play(tmp_path, probe, check=check, **knobs) + (conf,)


def _as_dkms_runs_it(conf, kernel, module):
    """Source framework.conf as DKMS does, then run its sign_tool on one built module."""
    return subprocess.run(["bash", "-c", '. "$1"; "$sign_tool" "$2" "$3"', "dkms", str(conf), kernel, str(module)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


def test_older_dkms_gets_a_sign_tool_that_signs_what_it_builds_later(tmp_path):
    fake = tmp_path / "sign-file"
    fake.write_text('#!/bin/sh\necho "$@" >"%s"\n' % (tmp_path / "signed"))
    fake.chmod(0o755)
    rc, log, signing, conf = _sign_tool_play(tmp_path, check=True, gpudirect_dkms_signing_sign_file=str(fake))
    assert rc == 0, log
    assert conf.read_text() == FRAMEWORK_CONF and not signing.exists()   # check mode wrote nothing
    rc, log, signing, conf = _sign_tool_play(tmp_path, gpudirect_dkms_signing_sign_file=str(fake),
                                             gpudirect_dkms_signing_hash="sha512")
    assert rc == 0, log
    text = conf.read_text()
    assert text.startswith(FRAMEWORK_CONF)   # the distribution's lines stay; the block comes last
    assert text.rstrip().endswith('sign_tool="%s"\n# END GPUDirect RDMA toolkit (roles/gpudirect_dkms): '
                                  'DKMS signs every module it builds' % (signing / "dkms-sign-tool"))
    assert not (tmp_path / "framework.conf.d").exists()   # no drop-in: this DKMS would not read it
    # DKMS builds nvidia.ko for a new kernel and runs the sign tool on it
    proc = _as_dkms_runs_it(conf, "6.8.0-90-generic", tmp_path / "build" / "nvidia.ko")
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "signed").read_text().split() == [
        "sha512", str(signing / "signing-key.pem"), str(signing / "signing-cert.pem"), str(tmp_path / "build" / "nvidia.ko")]
    rc, log, _signing, _conf = _sign_tool_play(tmp_path, gpudirect_dkms_signing_sign_file=str(fake),
                                               gpudirect_dkms_signing_hash="sha512")
    assert rc == 0, log
    assert "changed=0" in log.split("PLAY RECAP")[1]


def test_the_sign_tool_fails_the_build_naming_the_knob_when_sign_file_is_missing(tmp_path):
    rc, log, _signing, conf = _sign_tool_play(tmp_path)
    assert rc == 0, log
    # no kernel tree for this release on this machine: DKMS would report "Bad exit status"
    proc = _as_dkms_runs_it(conf, "0.0.0-gpudirect-test", tmp_path / "nvidia.ko")
    assert proc.returncode == 1
    assert "sign-file was not found for 0.0.0-gpudirect-test" in proc.stdout
    assert "gpudirect_dkms_signing_sign_file" in proc.stdout
