"""roles/gpudirect_reboot/tasks/signing.yml on this machine, acting on a given check result.

The read-only check (gpudirect_module_signing) runs, but its registered result is replaced
by one given as an extra var (extra vars win over registered ones), so each case is what the
module reports on a node: a module signed by another key, a certificate not enrolled with or
without a one-time password, one already queued, one enrolled, and a kernel that enforces
signatures without Secure Boot. mokutil is a stand-in on PATH that logs its argv and stdin.
"""

import json
import os
import subprocess
import sys

from conftest import ROOT
from hang_guard import HANG_GUARD_S

HERE = os.path.join(ROOT, "tests", "fixtures", "secure_boot")
KERNEL = "6.1.0-20-amd64"

PLAYBOOK = """---
- name: gpudirect_reboot's signing check on a given result
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The signing check
      ansible.builtin.include_role:
        name: gpudirect_reboot
        tasks_from: signing
"""

CERT = {"serial": "2571ae35acc2022bca9feed7377332daa7516c8b", "ski": "a01ebef329476d91f6dbb7fd7e0f0b35238578fc",
        "subject_cn": "GPUDirect toolkit test module signing key", "issuer_cn": "GPUDirect toolkit test module signing key",
        "sha1": "1b4e16eb0cb93d594fdb8d8af46dd459ff232afa", "sha256": "x"}


def _result(secure_boot="enabled", enforcement="kernel lockdown is integrity", problems=(), **trust):
    module = {"module": "nvidia", "kernel": KERNEL, "ok": not problems, "status": "other_key" if problems else "signed",
              "message": problems[0] if problems else "signed"}
    return {"changed": False, "failed": False, "modules": [module], "problems": list(problems), "kernels": [KERNEL],
            "certificate": CERT, "actions": [], "dkms_version": [3, 0, 10], "dkms_method": "framework_conf",
            "secure_boot": {"secure_boot": secure_boot, "signatures_required": True, "enforcement": enforcement},
            "trust": dict({"enrolled": False, "in_keyring": False, "pending": False, "mokutil": True}, **trust)}


def _play(tmp_path, result, **extra_vars):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    log = tmp_path / "mokutil.log"
    # the real check module asks it too (--sb-state, --list-enrolled, --list-new): only --import is logged
    (fake_bin / "mokutil").write_text('#!/bin/sh\nif [ "$1" = --import ]; then echo "argv: $*" >> %s; cat >> %s; '
                                      'else echo "MokNew is empty"; fi\nexit 0\n' % (log, log))
    (fake_bin / "mokutil").chmod(0o755)
    extra = {"__gpudirect_reboot_signing": result, "__gpudirect_reboot_expected_kernel": KERNEL,
             "__gpudirect_reboot_signing_cert": os.path.join(HERE, "signing_cert.der")}
    extra.update(extra_vars)
    env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ.get("PATH", "")),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ROLES_PATH=os.path.join(ROOT, "roles"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               ANSIBLE_LOCALHOST_WARNING="False")
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-e", json.dumps(extra),
                           "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)
    mokutil = log.read_text() if log.exists() else ""
    return proc.returncode, " ".join(proc.stdout.split()), mokutil


def test_unenrolled_certificate_is_queued_and_the_host_stopped(tmp_path):
    rc, log, mokutil = _play(tmp_path, _result(), gpudirect_reboot_mok_password="s3cret-pw")
    assert rc != 0
    assert mokutil == "argv: --import %s\ns3cret-pw\ns3cret-pw\n" % os.path.join(HERE, "signing_cert.der")
    assert "s3cret-pw" not in log
    assert "not rebooting" in log and "The certificate is queued for enrolment" in log
    assert "Enroll MOK, Continue, Yes, type the one-time password, Reboot" in log


def test_without_a_password_the_host_is_stopped_with_the_command(tmp_path):
    rc, log, mokutil = _play(tmp_path, _result())
    assert rc != 0 and mokutil == ""
    assert "Queue it yourself: mokutil --import" in log and "gpudirect_reboot_mok_password" in log


def test_a_queued_certificate_is_not_queued_again(tmp_path):
    rc, log, mokutil = _play(tmp_path, _result(pending=True), gpudirect_reboot_mok_password="s3cret-pw")
    assert rc != 0 and mokutil == ""
    assert "The certificate is queued for enrolment" in log


def test_enrolled_certificate_lets_the_reboot_go_on(tmp_path):
    rc, log, mokutil = _play(tmp_path, _result(enrolled=True), gpudirect_reboot_mok_password="s3cret-pw")
    assert rc == 0, log
    assert mokutil == ""


def test_module_signed_by_another_key_fails_naming_it(tmp_path):
    problem = ("module nvidia for kernel %s (/lib/modules/%s/updates/dkms/nvidia.ko) is signed by 'Build time "
               "autogenerated kernel key' (key 7606c7), not by the certificate of gpudirect_dkms_signing_cert_path/_content"
               % (KERNEL, KERNEL))
    rc, log, mokutil = _play(tmp_path, _result(problems=[problem], enrolled=True))
    assert rc != 0 and mokutil == ""
    assert "will boot %s" % KERNEL in log and "module nvidia for kernel %s" % KERNEL in log


def test_enforcement_without_secure_boot_cannot_enrol(tmp_path):
    # the lent GPU node: module.sig_enforce=Y, no EFI
    rc, log, mokutil = _play(tmp_path, _result(secure_boot="unsupported", enforcement="module.sig_enforce=Y"),
                             gpudirect_reboot_mok_password="s3cret-pw")
    assert rc != 0 and mokutil == ""
    assert "a MOK cannot be enrolled here (Secure Boot unsupported)" in log
