#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Check (and, when asked, make) the GPUDirect DKMS chain signed by the toolkit's certificate (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_module_signing
short_description: Check that every module of the GPUDirect DKMS chain is signed by a certificate the node trusts; sign it
description:
  - With a kernel that refuses unsigned modules (UEFI Secure Boot with lockdown, or C(module.sig_enforce=Y)),
    a module DKMS built is loaded only when it is signed by a key in the kernel's keyrings (built-in,
    secondary, platform/db, machine/MOK). This module reads, per kernel, the kernel modules DKMS built for the
    I(chain) packages (C(<dkms_tree>/PACKAGE/VERSION/KERNEL/ARCH/module/)), asks C(modinfo -k KERNEL NAME) for
    the signature of the copy that kernel loads (C(signer), C(sig_key), C(sig_hashalgo)) and compares the
    C(sig_key) with the serial number and subject key identifier of I(certificate).
  - It also says whether the node trusts I(certificate) - enrolled as a MOK (C(mokutil --list-enrolled), by SHA1
    fingerprint), queued for enrolment (C(mokutil --list-new)), or already in a kernel keyring (C(/proc/keys),
    by subject key identifier).
  - C(action=check) (the default) changes nothing. C(action=sign) signs what is not signed by I(certificate) -
    with I(method=sign_file), the kernel's C(scripts/sign-file) on the built and the installed copy (an old
    signature is cut off first; a compressed copy fails, naming it); with I(method=dkms), C(dkms remove)
    and C(dkms install) of the package and every chain package after it for that kernel, so that DKMS signs them
    with the key of its C(framework.conf.d) drop-in (DKMS 3.0.4 and later); with I(method=auto), sign-file for a
    kernel whose copies are all uncompressed (no rebuild, since the module's code does not change and nothing after
    it in the chain needs building again), else the C(dkms) way for that kernel. It also writes the DER copy of
    I(certificate) to I(certificate_der) (what C(mokutil --import) reads).
  - All logic lives in C(module_utils/gpudirect_secure_boot.py).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  action:
    description: C(check) reads only; C(sign) signs what is not signed by I(certificate).
    type: str
    choices: [check, sign]
    default: check
  kernels:
    description:
      - Kernel releases to examine. Empty means the default boot kernel (the one the next reboot starts, read as the
        boot loader chooses it, C(module_utils/gpudirect_kernel.py)).
    type: list
    elements: str
    default: []
  chain:
    description: DKMS package names of the chain, in build order.
    type: list
    elements: str
    default: [mlnx-ofed-kernel, nvidia, nv_peer_mem, gdrdrv]
  certificate:
    description:
      - The signing certificate on the node (PEM or DER). Empty (C(action=check) only) reports the kernel's policy and
        every module as not signed by it - what the role asks before any signing knob is set.
    type: path
    default: ""
  certificate_der:
    description: With C(action=sign), where the DER copy of I(certificate) is written (C(0644)). Empty writes none.
    type: path
    default: ""
  key:
    description: The private key on the node (PEM); needed by C(action=sign) with I(method=sign_file) or C(auto).
    type: path
    default: ""
  method:
    description: How C(action=sign) signs - C(sign_file), C(dkms) or C(auto) (see above).
    type: str
    choices: [sign_file, dkms, auto]
    default: sign_file
  sign_file:
    description:
      - The kernel's C(sign-file). Empty looks, per kernel, in C(/lib/modules/KERNEL/build/scripts/),
        C(/usr/src/linux-headers-KERNEL/scripts/) and C(/usr/lib/linux-kbuild-MAJOR.MINOR/scripts/).
    type: path
    default: ""
  hash:
    description:
      - Digest for C(sign-file). Empty takes C(CONFIG_MODULE_SIG_HASH) from C(/boot/config-KERNEL), else sha256.
    type: str
    default: ""
  dkms_tree:
    description: DKMS's tree (C(dkms_tree) of C(/etc/dkms/framework.conf)).
    type: path
    default: /var/lib/dkms
attributes:
  check_mode:
    support: full
    description: C(action=sign) reports what it would sign or rebuild and changes nothing.
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.no_diff
requirements:
  - kmod's C(modinfo) built with openssl (it prints C(signer)/C(sig_key) of PKCS#7 signatures).
"""

EXAMPLES = r"""
- name: Check the chain of the kernel the next reboot starts
  gpudirect_module_signing:
    certificate: /etc/gpudirect/module-signing/signing-cert.der
  register: signing

- name: Sign the chain for two kernels with sign-file
  gpudirect_module_signing:
    action: sign
    kernels: [6.1.0-18-amd64, 6.1.0-20-amd64]
    certificate: /root/mok/MOK.pem
    key: /root/mok/MOK.priv
    certificate_der: /etc/gpudirect/module-signing/signing-cert.der
  become: true
"""

RETURN = r"""
secure_boot:
  description: The node's Secure Boot state and module-signature policy, as C(gpudirect_facts) reports it in
    C(ansible_facts.gpudirect.secure_boot) (C(signatures_required), C(enforcement), C(moks), ...).
  returned: always
  type: dict
dkms_version:
  description: What C(dkms --version) printed, parsed (C([3, 0, 10])); null without dkms.
  returned: always
  type: list
  elements: int
dkms_method:
  description: C(framework_conf) (DKMS 3.0.4 and later read mok_signing_key/mok_certificate from framework.conf.d),
    C(sign_tool) (DKMS 2.8.1 to 3.0.3 run the sign_tool of /etc/dkms/framework.conf after each build) or
    C(sign_file) (older DKMS, or none, where only this module's sign action signs).
  returned: always
  type: str
certificate:
  description: The certificate - C(serial), C(ski) (subject key identifier), C(subject_cn), C(issuer_cn), C(sha1), C(sha256).
  returned: always
  type: dict
trust:
  description: C(enrolled) (a MOK), C(pending) (queued with mokutil --import), C(in_keyring) (the running kernel holds it).
  returned: always
  type: dict
modules:
  description: Per kernel and module - C(module), C(kernel), C(filename), C(signer), C(sig_key), C(sig_hashalgo),
    C(status) (C(signed), C(unsigned), C(other_key), C(unreadable), C(not_found)), C(ok), C(message).
  returned: always
  type: list
  elements: dict
problems:
  description: The messages of the modules that are not signed by the certificate (after signing, for action=sign).
  returned: always
  type: list
  elements: str
actions:
  description: What action=sign did (would do in check mode) - C(kernel), C(module) or C(package), C(how), C(file).
  returned: always
  type: list
  elements: dict
kernels:
  description: The kernels examined.
  returned: always
  type: list
  elements: str
"""

import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_kernel import C_LOCALE, default_boot_kernel, invalid_releases
from ansible.module_utils.gpudirect_secure_boot import (
    cert_trust,
    collect as collect_secure_boot,
    dkms_signing_method,
    chain_built_modules,
    module_verdict,
    parse_certificate,
    parse_mokutil_list,
    parse_modinfo_signature,
    parse_proc_keys,
    pem_to_der,
    signed_by,
    strip_signature,
)
from ansible.module_utils.gpudirect_versions import parse_dkms_version

KNOB = "gpudirect_dkms_signing_cert_path/_content"



# kernel module compressions (CONFIG_MODULE_COMPRESS_*): sign-file cannot sign these in place
COMPRESSED = (".xz", ".gz", ".zst")

class Signing(object):

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.modinfo = module.get_bin_path("modinfo")
        self.actions = []

    def run(self, args, **kwargs):
        return self.module.run_command(args, environ_update=dict(C_LOCALE), **kwargs)

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def certificate(self):
        path = self.params["certificate"]
        if not path:
            if self.params["action"] == "sign":
                self.fail("action=sign needs certificate: set %s" % KNOB)
            return None, None
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            self.fail("cannot read the signing certificate %s (%s): set %s to a certificate on the node"
                      % (path, exc.strerror or exc, KNOB))
        try:
            return data, parse_certificate(data)
        except ValueError as exc:
            self.fail("the signing certificate %s is not usable: %s; set %s to an X.509 certificate (PEM or DER)"
                      % (path, exc, KNOB))

    def kernels(self):
        kernels = self.params["kernels"]
        bad = invalid_releases(kernels, "kernels")
        if bad:
            self.fail("kernels must be kernel releases as uname -r prints them: %s" % "; ".join(bad))
        if kernels:
            return list(kernels)
        default, source, _warnings = default_boot_kernel("/", self.module, True)
        if not default:
            self.fail("the default boot kernel could not be read (boot loader configuration); pass kernels")
        return [default]

    def signature(self, kernel, name_or_path):
        """``parse_modinfo_signature`` of what ``kernel`` loads as ``name_or_path``; None when modinfo finds none."""
        if not self.modinfo:
            self.fail("modinfo (kmod) is not installed: it is needed to read module signatures")
        rc, out, err = self.run([self.modinfo, "-k", kernel, name_or_path])
        if rc != 0:
            return None
        try:
            return parse_modinfo_signature(out)
        except ValueError as exc:
            self.fail("modinfo -k %s %s: %s" % (kernel, name_or_path, exc), stdout=out, stderr=err)

    def verdicts(self, kernels, cert):
        out = []
        for kernel in kernels:
            for built in chain_built_modules(self.params["dkms_tree"], self.params["chain"], kernel):
                sig = self.signature(kernel, built["module"]) or self.signature(kernel, built["built"])
                if sig is None:
                    verdict = {"module": built["module"], "kernel": kernel, "filename": built["built"],
                               "signer": None, "sig_key": None, "sig_hashalgo": None, "ok": False,
                               "status": "not_found", "message": "modinfo cannot read module %s for kernel %s (%s)"
                               % (built["module"], kernel, built["built"])}
                else:
                    verdict = module_verdict(built["module"], kernel, sig, cert, KNOB)
                verdict.update(package=built["package"], version=built["version"], built=built["built"])
                out.append(verdict)
        return out

    def policy(self):
        def run(args):
            path = self.module.get_bin_path(args[0])
            return self.run([path] + list(args[1:])) if path else None
        return collect_secure_boot("/", run, live=True)

    def dkms(self):
        dkms = self.module.get_bin_path("dkms")
        if not dkms:
            return None, "sign_file"
        rc, out, err = self.run([dkms, "--version"])
        try:
            version = parse_dkms_version(out or err)
        except ValueError:
            return None, "sign_file"
        return list(version), dkms_signing_method(version)

    def trust(self, cert):
        if cert is None:
            return {"enrolled": False, "in_keyring": False, "pending": False, "mokutil": None}
        moks = pending = None
        mokutil = self.module.get_bin_path("mokutil")
        if mokutil:
            for flag in ("--list-enrolled", "--list-new"):
                rc, out, err = self.run([mokutil, flag])
                try:
                    listed = parse_mokutil_list((out or "") + (err or ""))
                except ValueError:
                    listed = None
                if flag == "--list-enrolled":
                    moks = listed
                else:
                    pending = listed
        keys = []
        try:
            with open("/proc/keys") as handle:
                keys = parse_proc_keys(handle.read())
        except (IOError, OSError, ValueError):
            keys = []
        trust = cert_trust(cert, moks, keys, pending)
        trust["mokutil"] = bool(mokutil)
        return trust

    # signing -------------------------------------------------------------
    def sign_file_tool(self, kernel):
        if self.params["sign_file"]:
            return self.params["sign_file"]
        major_minor = ".".join(kernel.split(".")[:2])
        for candidate in ("/lib/modules/%s/build/scripts/sign-file" % kernel,
                          "/usr/src/linux-headers-%s/scripts/sign-file" % kernel,
                          "/usr/lib/linux-kbuild-%s/scripts/sign-file" % major_minor):
            if os.access(candidate, os.X_OK):
                return candidate
        self.fail("the kernel's sign-file was not found for %s (looked in its build/scripts, linux-headers and "
                  "linux-kbuild): install the kernel headers, or set gpudirect_dkms_signing_sign_file" % kernel)

    def hash_for(self, kernel):
        if self.params["hash"]:
            return self.params["hash"]
        try:
            with open("/boot/config-%s" % kernel) as handle:
                for line in handle:
                    match = re.match(r'^CONFIG_MODULE_SIG_HASH="?([A-Za-z0-9-]+)"?', line)
                    if match:
                        return match.group(1)
        except (IOError, OSError):
            pass
        return "sha256"

    def sign_one(self, kernel, path):
        if path.endswith(COMPRESSED):
            self.fail("module %s for kernel %s is compressed: sign-file cannot sign it in place; with DKMS 3.0.4 or "
                      "later the gpudirect_dkms role lets DKMS sign before it compresses (upgrade dkms)" % (path, kernel))
        self.actions.append({"kernel": kernel, "file": path, "how": "sign-file"})
        if self.module.check_mode:
            return
        with open(path, "rb") as handle:
            data = strip_signature(handle.read())
        directory = os.path.dirname(path)
        fd, tmp = tempfile.mkstemp(prefix=".gpudirect-sign-", suffix=".ko", dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
            argv = [self.sign_file_tool(kernel), self.hash_for(kernel), self.params["key"],
                    self.params["certificate"], tmp]
            rc, out, err = self.run(argv)
            if rc != 0:
                self.fail("sign-file failed on %s for kernel %s (rc=%s): %s" % (path, kernel, rc, (err or out).strip()),
                          cmd=argv)
            os.rename(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def copies(self, kernel, item):
        """The files of one built module that kernel can load: DKMS's built copy, and the copy
        installed under /lib/modules when modinfo finds one outside the kernel's own tree."""
        files = [item["built"]]
        rc, out, _err = self.run([self.modinfo, "-k", kernel, "-n", item["module"]])
        installed = (out or "").strip()
        if rc == 0 and installed.startswith("/") and installed != item["built"] and "/kernel/" not in installed:
            files.append(installed)
        return files

    def rebuild(self, dkms, kernel, built, first, why):
        """dkms remove + install of the package of built[first] and of every chain package after it,
        so that DKMS builds them again and signs them with its drop-in's key."""
        if not dkms:
            self.fail("module %s for kernel %s must be rebuilt for DKMS to sign it (%s), and dkms is not on "
                      "the node" % (built[first]["module"], kernel, why))
        packages = []
        for item in built[first:]:
            if (item["package"], item["version"]) not in packages:
                packages.append((item["package"], item["version"]))
        for package, version in packages:
            self.actions.append({"kernel": kernel, "package": package, "version": version,
                                 "how": "dkms remove + install (%s)" % why})
            if self.module.check_mode:
                continue
            for verb in ("remove", "install"):
                argv = [dkms, verb, "-m", package, "-v", version, "-k", kernel]
                rc, out, err = self.run(argv)
                if rc != 0:
                    self.fail("dkms %s of %s/%s for kernel %s failed (rc=%s): %s"
                              % (verb, package, version, kernel, rc, (err or out).strip()[-2000:]), cmd=argv)

    def sign(self, kernels, cert):
        method = self.params["method"]
        if method in ("sign_file", "auto") and not self.params["key"]:
            self.fail("action=sign with method=%s needs key (gpudirect_dkms_signing_key_path/_content)" % method)
        dkms = self.module.get_bin_path("dkms") if method in ("dkms", "auto") else None
        changed_kernels = set()
        for kernel in kernels:
            built = chain_built_modules(self.params["dkms_tree"], self.params["chain"], kernel)
            # (index in the chain, the copies of that module not signed by the certificate)
            unsigned = []
            for index, item in enumerate(built):
                files = [path for path in self.copies(kernel, item)
                         if not signed_by(self.signature(kernel, path), cert)]
                if files:
                    unsigned.append((index, files))
            if not unsigned:
                continue
            changed_kernels.add(kernel)
            compressed = [path for _index, files in unsigned for path in files if path.endswith(COMPRESSED)]
            if method == "dkms":
                self.rebuild(dkms, kernel, built, unsigned[0][0], "method dkms")
            elif method == "auto" and compressed:
                self.rebuild(dkms, kernel, built, unsigned[0][0],
                             "compressed, sign-file cannot sign it in place: %s" % ", ".join(compressed))
            else:
                for _index, files in unsigned:
                    for path in files:
                        self.sign_one(kernel, path)
        return changed_kernels

    def write_der(self, der):
        dest = self.params["certificate_der"]
        if not dest:
            return False
        try:
            with open(dest, "rb") as handle:
                if handle.read() == der:
                    return False
        except (IOError, OSError):
            pass
        self.actions.append({"file": dest, "how": "DER copy of the certificate"})
        if self.module.check_mode:
            return True
        directory = os.path.dirname(dest)
        fd, tmp = tempfile.mkstemp(prefix=".gpudirect-cert-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(der)
        os.chmod(tmp, 0o644)
        os.rename(tmp, dest)
        return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", default="check", choices=["check", "sign"]),
            kernels=dict(type="list", elements="str", default=[]),
            chain=dict(type="list", elements="str", default=["mlnx-ofed-kernel", "nvidia", "nv_peer_mem", "gdrdrv"]),
            certificate=dict(type="path", default=""),
            certificate_der=dict(type="path", default=""),
            key=dict(type="path", default="", no_log=False),
            method=dict(type="str", default="sign_file", choices=["sign_file", "dkms", "auto"]),
            sign_file=dict(type="path", default=""),
            hash=dict(type="str", default=""),
            dkms_tree=dict(type="path", default="/var/lib/dkms"),
        ),
        supports_check_mode=True,
    )
    signing = Signing(module)
    data, cert = signing.certificate()
    kernels = signing.kernels()
    changed = False
    if module.params["action"] == "sign":
        changed = signing.write_der(pem_to_der(data)) or changed
        changed = bool(signing.sign(kernels, cert)) or changed
    # in check mode after planned signing these are the modules as they are now, before it
    verdicts = signing.verdicts(kernels, cert)
    dkms_version, dkms_method = signing.dkms()
    module.exit_json(
        changed=changed,
        secure_boot=signing.policy(),
        dkms_version=dkms_version,
        dkms_method=dkms_method,
        certificate=cert,
        trust=signing.trust(cert),
        modules=verdicts,
        problems=[v["message"] for v in verdicts if not v["ok"]],
        actions=signing.actions,
        kernels=kernels,
    )


if __name__ == "__main__":
    main()
