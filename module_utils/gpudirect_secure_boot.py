# -*- coding: utf-8 -*-
"""Secure Boot state and the kernel's module-signature policy, read from the node.

Three sources, each parsed here and nowhere else:

- ``mokutil --sb-state`` (shim's tool). Its lines, from mokutil's ``print_sb_state``:
  ``SecureBoot enabled`` / ``SecureBoot disabled`` / ``Cannot determine secure boot
  state.``, then ``SecureBoot validation is disabled in shim`` (MokSBStateRT exists) or
  ``Platform is in Setup Mode``. Some builds colour them with ANSI escapes even when
  not on a terminal; machines without EFI print ``EFI variables are not supported on
  this system`` or ``This system doesn't support Secure Boot`` (on stderr, exit 255:
  callers pass stdout and stderr together).
- The EFI variables themselves, when there is no mokutil:
  ``/sys/firmware/efi/efivars/<Name>-<GUID>`` holds 4 bytes of attributes and then
  the value; ``SecureBoot`` and ``SetupMode`` are one byte, 0 or 1 (a healthy enabled
  machine reads ``06 00 00 00 01`` and ``06 00 00 00 00``: lcp/mokutil#45).
  ``MokSBStateRT`` (shim's GUID) exists only when shim validation is disabled.
- The kernel's own view, which decides whether an unsigned module loads:
  ``/sys/kernel/security/lockdown`` (``[none] integrity confidentiality``; Debian and
  Ubuntu kernels lock down to ``integrity`` when booted with Secure Boot) and
  ``/sys/module/module/parameters/sig_enforce`` (``Y``/``N``). Either one enforcing
  means every module the toolkit builds must be signed by a key the kernel trusts.
  When neither can be read, Secure Boot stands in for them only when the kernel counts
  the boot as Secure Boot: not with shim's validation disabled (``SecureBoot validation
  is disabled in shim``), which the kernel's EFI stub reads as Secure Boot off
  (``efi_get_secureboot``: shim's ``MokSBState``/``MokSBStateRT`` = 1), so nothing of
  Secure Boot's locks it down (``signature_policy``).

The keys the kernel trusts for modules live in the ``.builtin_trusted_keys``,
``.secondary_trusted_keys``, ``.platform`` and (kernel 5.18+) ``.machine`` keyrings;
``keyctl list %:.platform`` prints them (``parse_keyctl_list``) and ``/proc/keys``
lists every asymmetric key the caller may view (``parse_proc_keys``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.module_utils.gpudirect_host import read_text
from ansible.module_utils.gpudirect_versions import strip_ansi

EFI_GLOBAL_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
# shim's own vendor GUID (shim's SHIM_LOCK_GUID): MokSBStateRT, MokListRT and the MOK
# requests live under it; the VM tier's enrolment writes MokList under the same GUID
# and the Debian 12 node's shim then trusted the certificate (tests/harness/vm/secure_boot.py)
SHIM_LOCK_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
MODULE_KEYRINGS = (".builtin_trusted_keys", ".secondary_trusted_keys", ".platform", ".machine")


def _lines(text):
    return [line.strip() for line in strip_ansi(text).splitlines() if line.strip()]


def parse_mokutil_sb_state(text):
    """``{"secure_boot": "enabled"|"disabled"|"unknown"|"unsupported", "setup_mode": bool,
    "shim_validation_disabled": bool, "source": "mokutil"}``. Raises ``ValueError`` naming the
    text when no line is one mokutil prints."""
    state = {"secure_boot": None, "setup_mode": False, "shim_validation_disabled": False, "source": "mokutil"}
    found = []
    for line in _lines(text):
        if line == "SecureBoot enabled":
            found.append("enabled")
        elif line == "SecureBoot disabled":
            found.append("disabled")
        elif line.startswith("Cannot determine secure boot state") or line == "SecureBoot unknown":
            # "SecureBoot unknown" (no newline): mokutil 0.2.0's sb_state
            found.append("unknown")
        elif line == "SecureBoot validation is disabled in shim":
            state["shim_validation_disabled"] = True
        elif line == "Platform is in Setup Mode":
            state["setup_mode"] = True
        elif ("EFI variables are not supported" in line or "doesn't support Secure Boot" in line
              or "does't support Secure Boot" in line):
            # "does't": mokutil 0.3.0's spelling (fixed upstream in 2016, still printed by older packages)
            found.append("unsupported")
    shown = (text or "")[:200]
    if not found:
        raise ValueError("mokutil --sb-state printed no Secure Boot state: %r" % shown)
    if len(set(found)) > 1:
        raise ValueError("mokutil --sb-state printed more than one Secure Boot state (%s): %r"
                         % (", ".join(found), shown))
    state["secure_boot"] = found[0]
    # mokutil's sb_state prints the shim line only after "SecureBoot enabled" and the Setup Mode
    # line only after "SecureBoot disabled"; anything else is not mokutil's output
    if state["shim_validation_disabled"] and state["secure_boot"] != "enabled":
        raise ValueError("mokutil --sb-state printed 'SecureBoot validation is disabled in shim' without "
                         "'SecureBoot enabled': %r" % shown)
    if state["setup_mode"] and state["secure_boot"] != "disabled":
        raise ValueError("mokutil --sb-state printed 'Platform is in Setup Mode' without 'SecureBoot disabled': %r"
                         % shown)
    return state


def parse_efivar_byte(data, name="variable"):
    """The one-byte value of an EFI variable file (4 attribute bytes, then the value).
    Raises ``ValueError`` naming the variable and its bytes when the file is not that."""
    data = bytes(data or b"")
    if len(data) != 5 or data[4] not in (0, 1):
        raise ValueError("EFI variable %s is not 4 attribute bytes and a 0/1 value: %s"
                         % (name, data[:16].hex(" ") if data else "empty"))
    return data[4]


def read_efivars(root="/sys/firmware/efi"):
    """Secure Boot state from the EFI variables (no mokutil needed). ``secure_boot`` is
    ``unsupported`` when the node did not boot through EFI, ``unknown`` when a variable
    could not be read or is malformed (``error`` says which)."""
    state = {"secure_boot": None, "setup_mode": False, "shim_validation_disabled": False,
             "source": "efivars", "error": None}
    efivars = os.path.join(root, "efivars")
    if not os.path.isdir(root):
        state["secure_boot"] = "unsupported"
        return state
    values = {}
    for name in ("SecureBoot", "SetupMode"):
        path = os.path.join(efivars, "%s-%s" % (name, EFI_GLOBAL_GUID))
        try:
            with open(path, "rb") as handle:
                values[name] = parse_efivar_byte(handle.read(), name)
        except (IOError, OSError) as exc:
            if name == "SecureBoot":
                state["error"] = "%s: %s" % (path, exc.strerror or exc)
        except ValueError as exc:
            state["error"] = str(exc)
    state["setup_mode"] = values.get("SetupMode") == 1
    state["shim_validation_disabled"] = os.path.exists(
        os.path.join(efivars, "MokSBStateRT-%s" % SHIM_LOCK_GUID))
    if state["error"]:
        state["secure_boot"] = "unknown"
    elif values.get("SecureBoot") == 1 and not state["setup_mode"]:
        state["secure_boot"] = "enabled"
    else:
        state["secure_boot"] = "disabled"
    return state


# the levels security/lockdown/lockdown.c lists in /sys/kernel/security/lockdown
LOCKDOWN_MODES = ("none", "integrity", "confidentiality")


def parse_lockdown(text):
    """The active lockdown mode from ``/sys/kernel/security/lockdown`` (the bracketed
    word). Raises ``ValueError`` when no word is bracketed."""
    match = re.search(r"\[(\w+)\]", text or "")
    if not match:
        raise ValueError("/sys/kernel/security/lockdown has no [mode]: %r" % (text or "")[:100])
    return match.group(1)


def module_signature_policy(lockdown=None, sig_enforce=None):
    """``{"required": bool|None, "why": str}``: whether the running kernel refuses
    unsigned modules. ``lockdown`` is the mode or None (file absent), ``sig_enforce`` the
    parameter's text or None. ``required`` is None when neither could be read."""
    enforce = (sig_enforce or "").strip().upper()
    # both are named when both hold: a Secure Boot kernel (Debian 12 under OVMF, the VM
    # tier's secureboot scenario) reads lockdown [integrity] and sig_enforce Y at once
    reasons = []
    if lockdown in ("integrity", "confidentiality"):
        reasons.append("kernel lockdown is %s" % lockdown)
    if enforce == "Y":
        reasons.append("module.sig_enforce=Y")
    if reasons:
        return {"required": True, "why": "; ".join(reasons)}
    if lockdown is None and not enforce:
        return {"required": None, "why": "neither /sys/kernel/security/lockdown nor module.sig_enforce is readable"}
    return {"required": False, "why": "lockdown %s, module.sig_enforce=%s" % (lockdown or "absent", enforce or "absent")}


def kernel_secure_boot_state(state):
    """Whether the running kernel counts its boot as Secure Boot, from a state that
    ``parse_mokutil_sb_state`` or ``read_efivars`` returned: ``enabled`` only when the
    firmware has Secure Boot on outside Setup Mode and shim's validation is on. With
    ``shim_validation_disabled`` the kernel's EFI stub returns Secure Boot disabled
    (``efi_get_secureboot``: shim's MokSBState, since the stable fix its mirror MokSBStateRT,
    = 1), so neither lockdown nor the IMA policy follows from Secure Boot. Otherwise the
    state's own word (``disabled``, ``unsupported``, ``unknown``; None when not read)."""
    sb = (state or {}).get("secure_boot")
    if sb == "enabled" and ((state or {}).get("shim_validation_disabled") or (state or {}).get("setup_mode")):
        return "disabled"
    return sb


def signature_policy(state, lockdown=None, sig_enforce=None):
    """``{"required": bool|None, "why": str}``: whether the running kernel refuses unsigned
    modules, decided from what the kernel itself shows (``lockdown``, ``sig_enforce``, see
    ``module_signature_policy``). Only when neither is readable does the Secure Boot state
    stand in: required when the kernel counts the boot as Secure Boot
    (``kernel_secure_boot_state``), unknown otherwise - also with Secure Boot enabled and
    shim's validation disabled, which the kernel counts as Secure Boot off."""
    policy = module_signature_policy(lockdown, sig_enforce)
    state = state or {}
    kernel_sb = kernel_secure_boot_state(state)
    shim_off = state.get("secure_boot") == "enabled" and bool(state.get("shim_validation_disabled"))
    shim_note = "Secure Boot is enabled with shim validation disabled, which the kernel counts as Secure Boot off"
    if policy["required"] is None:
        if kernel_sb == "enabled":
            return {"required": True, "why": "Secure Boot is enabled (the kernel's lockdown is not readable)"}
        if shim_off:
            return {"required": None, "why": "%s; %s" % (shim_note, policy["why"])}
        return policy
    if kernel_sb == "enabled" and policy["required"]:
        return {"required": True, "why": "Secure Boot is enabled: %s" % policy["why"]}
    if shim_off:
        return {"required": policy["required"], "why": "%s (%s%s)" % (
            policy["why"], shim_note, "; the kernel enforces signatures regardless" if policy["required"] else "")}
    return policy


_ASYM = re.compile(r"^(?P<subject>.*?): (?P<key_id>[0-9a-f]{8,}|[0-9a-f]{2}(?::[0-9a-f]{2})+)(?:: .*)?$")


def _asymmetric(serial, description):
    match = _ASYM.match(description)
    subject, key_id = (match.group("subject"), match.group("key_id")) if match else (description, None)
    return {"serial": serial, "subject": subject, "key_id": key_id}


def parse_keyctl_list(text):
    """Keys of ``keyctl list <keyring>``: ``[{"serial", "subject", "key_id"}]`` for the
    asymmetric ones (keyctl's line: ``<serial>: <perm> <uid> <gid> asymmetric: <desc>``).
    ``keyring is empty`` gives ``[]``; text that is neither raises ``ValueError``."""
    lines = _lines(text)
    if lines == ["keyring is empty"]:
        return []
    if not lines or not re.match(r"^\d+ keys? in keyring:$", lines[0]):
        raise ValueError("keyctl list printed no key list: %r" % (text or "")[:200])
    keys = []
    for line in lines[1:]:
        match = re.match(r"^(\d+): \S+\s+\S+\s+\S+\s+(\S+): (.*)$", line)
        if not match:
            raise ValueError("keyctl list: unreadable line %r" % line)
        if match.group(2) == "asymmetric":
            keys.append(_asymmetric(int(match.group(1)), match.group(3)))
    return keys


def parse_proc_keys(text):
    """Asymmetric keys in ``/proc/keys``: ``[{"serial", "subject", "key_id"}]`` (the type
    column is cut to nine characters, ``asymmetri``). Lines that are not keys raise
    ``ValueError``."""
    keys = []
    for line in _lines(text):
        fields = line.split(None, 8)
        if len(fields) < 9:
            raise ValueError("/proc/keys: unreadable line %r" % line)
        if fields[7] == "asymmetri":
            keys.append(_asymmetric(int(fields[0], 16), fields[8]))
    return keys


# --------------------------------------------------------------------------
# enrolled MOKs, module signatures, the signing certificate
# --------------------------------------------------------------------------

def _hex(text):
    """``AD:91:99`` / ``ad9199`` -> ``ad9199``; None for nothing."""
    text = re.sub(r"[\s:]", "", text or "").lower()
    return text or None


def _magnitude(hexstr):
    """An INTEGER's hex without leading zero bytes (how kmod and openssl print serials)."""
    if hexstr is None:
        return None
    stripped = hexstr
    while len(stripped) > 2 and stripped.startswith("00"):
        stripped = stripped[2:]
    return stripped


def parse_mokutil_list(text, variable="MokListRT"):
    """Keys printed by ``mokutil --list-enrolled`` / ``--list-new``: ``[{"index", "sha1",
    "serial", "subject", "ski"}]``, hex in lower case without colons. ``<Var> is empty``
    gives ``[]``. mokutil's format (src/mokutil.c ``[key %d]``, src/efi_x509.c
    ``SHA1 Fingerprint:``, then openssl's certificate text). Text without one ``[key N]``
    block raises ``ValueError``."""
    lines = [line.rstrip() for line in strip_ansi(text).splitlines()]
    stripped = [line.strip() for line in lines if line.strip()]
    # mokutil 0.6.0 (Debian 12) prints nothing at all, exit 0, for --list-new with no
    # request pending (tests/fixtures/secure_boot/debian12_ovmf/); older ones "MokNew is empty"
    if not stripped:
        return []
    if all(re.match(r"^\S+ is empty$", line) for line in stripped):
        return []
    keys = []
    current = None
    pending = None
    for line in lines:
        item = line.strip()
        head = re.match(r"^\[key (\d+)\]$", item)
        if head:
            current = {"index": int(head.group(1)), "sha1": None, "serial": None, "subject": None, "ski": None}
            keys.append(current)
            pending = None
            continue
        if current is None:
            if item:
                raise ValueError("mokutil --list-*: text before the first [key N]: %r" % item[:100])
            continue
        if pending and item:
            if pending == "serial":
                current["serial"] = _magnitude(_hex(item))
            elif pending == "ski":
                current["ski"] = _hex(item)
            pending = None
            continue
        match = re.match(r"^SHA1 Fingerprint: ([0-9a-fA-F:]+)$", item)
        if match:
            current["sha1"] = _hex(match.group(1))
            continue
        match = re.match(r"^Serial Number:\s*(.*)$", item)
        if match:
            value = match.group(1).strip()
            short = re.match(r"^\d+ \(0x([0-9a-fA-F]+)\)$", value)
            if short:
                hexval = short.group(1).lower()
                current["serial"] = _magnitude(hexval if len(hexval) % 2 == 0 else "0" + hexval)
            elif value:
                current["serial"] = _magnitude(_hex(value))
            else:
                pending = "serial"
            continue
        match = re.match(r"^Subject: (.*)$", item)
        if match and current["subject"] is None:
            current["subject"] = match.group(1).strip()
            continue
        if item == "X509v3 Subject Key Identifier:":
            pending = "ski"
    if not keys:
        raise ValueError("mokutil printed no [key N] block and no '%s is empty': %r" % (variable, (text or "")[:200]))
    for key in keys:
        if not key["sha1"]:
            raise ValueError("mokutil: [key %d] has no SHA1 Fingerprint line" % key["index"])
    return keys


_MODINFO_SIG_FIELDS = ("sig_id", "signer", "sig_key", "sig_hashalgo")


def parse_modinfo_signature(text):
    """The signature fields of ``modinfo <module>`` output: ``{"filename", "signed", "signer",
    "sig_key", "sig_hashalgo", "sig_id"}`` (sig_key in lower-case hex without colons).
    ``signed`` is False when modinfo printed no ``signer``/``sig_key`` line (an unsigned
    module); a ``signer:`` line that is empty (a kmod built without openssl reading a PKCS#7
    signature) leaves ``signed`` True and ``sig_key`` None. Text without a ``filename:`` or
    ``vermagic:`` line raises ``ValueError``."""
    fields = {}
    last = None
    for raw in (text or "").splitlines():
        if not raw.strip():
            last = None
            continue
        if raw[:1] in ("\t", " ") and last:
            if last in ("sig_key",):
                fields[last] = (fields.get(last) or "") + raw.strip()
            continue
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$", raw)
        if not match:
            last = None
            continue
        name, value = match.group(1), match.group(2).strip()
        if name == "signat":  # modinfo of Ubuntu 18.04's kmod cuts the field name
            name = "sig_id"
        last = name
        if name not in fields:
            fields[name] = value
    if "filename" not in fields and "vermagic" not in fields:
        raise ValueError("modinfo printed no filename/vermagic line: %r" % (text or "")[:200])
    signed = any(name in fields for name in ("signer", "sig_key", "sig_id"))
    return {
        "filename": fields.get("filename"),
        "signed": signed,
        "signer": fields.get("signer") or None,
        "sig_key": _hex(fields.get("sig_key")),
        "sig_hashalgo": fields.get("sig_hashalgo") or None,
        "sig_id": fields.get("sig_id") or None,
    }


# DER, only as far as a certificate's serial, names and subject key identifier go.

def _der_item(data, pos):
    if pos + 2 > len(data):
        raise ValueError("truncated DER at byte %d" % pos)
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("bad DER length at byte %d" % (pos - 1))
        length = int.from_bytes(bytes(data[pos:pos + count]), "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("DER item at byte %d runs past the end" % pos)
    return tag, pos, pos + length


def _der_children(data, start, end):
    items = []
    pos = start
    while pos < end:
        tag, body, after = _der_item(data, pos)
        items.append((tag, body, after))
        pos = after
    return items


_OID_CN = bytes([0x55, 0x04, 0x03])
_OID_SKI = bytes([0x55, 0x1D, 0x0E])


def _common_name(data, start, end):
    for _tag, set_body, set_end in _der_children(data, start, end):
        for _t, atv_body, atv_end in _der_children(data, set_body, set_end):
            parts = _der_children(data, atv_body, atv_end)
            if len(parts) == 2 and parts[0][0] == 0x06 and bytes(data[parts[0][1]:parts[0][2]]) == _OID_CN:
                return bytes(data[parts[1][1]:parts[1][2]]).decode("utf-8", "replace")
    return None


def pem_to_der(data):
    """The DER bytes of a PEM ``CERTIFICATE`` block, or ``data`` when it is DER already.
    Raises ``ValueError`` when it is neither."""
    data = bytes(data or b"")
    if data[:1] == b"\x30":
        return data
    match = re.search(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", data, re.S)
    if not match:
        raise ValueError("not a DER certificate and no PEM CERTIFICATE block")
    import base64
    import binascii
    try:
        return base64.b64decode(re.sub(rb"\s", b"", match.group(1)), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("PEM CERTIFICATE block is not base64: %s" % exc)


def parse_certificate(data):
    """``{"serial", "ski", "subject_cn", "issuer_cn", "sha1", "sha256"}`` of an X.509
    certificate (DER or PEM bytes); hex in lower case without colons, the serial without
    leading zero bytes. Raises ``ValueError`` saying what is wrong."""
    import hashlib
    der = pem_to_der(data)
    try:
        tag, body, end = _der_item(der, 0)
        if tag != 0x30:
            raise ValueError("does not start with a SEQUENCE")
        tbs_tag, tbs_body, tbs_end = _der_item(der, body)
        if tbs_tag != 0x30:
            raise ValueError("tbsCertificate is not a SEQUENCE")
        fields = _der_children(der, tbs_body, tbs_end)
        if fields and fields[0][0] == 0xA0:
            fields = fields[1:]
        if len(fields) < 6 or fields[0][0] != 0x02:
            raise ValueError("tbsCertificate lacks serial, issuer, validity, subject or key")
        serial = _magnitude(bytes(der[fields[0][1]:fields[0][2]]).hex())
        issuer_cn = _common_name(der, fields[2][1], fields[2][2])
        subject_cn = _common_name(der, fields[4][1], fields[4][2])
        ski = None
        for tag, start, stop in fields[6:]:
            if tag != 0xA3:
                continue
            for _t, seq_body, seq_end in _der_children(der, start, stop):
                for _e, ext_body, ext_end in _der_children(der, seq_body, seq_end):
                    parts = _der_children(der, ext_body, ext_end)
                    if parts and parts[0][0] == 0x06 and bytes(der[parts[0][1]:parts[0][2]]) == _OID_SKI:
                        octets = parts[-1]
                        inner = _der_item(der, octets[1])
                        ski = bytes(der[inner[1]:inner[2]]).hex()
    except (ValueError, IndexError) as exc:
        raise ValueError("not an X.509 certificate: %s" % exc)
    return {"serial": serial, "ski": ski, "subject_cn": subject_cn, "issuer_cn": issuer_cn,
            "sha1": hashlib.sha1(der).hexdigest(), "sha256": hashlib.sha256(der).hexdigest()}


def signed_by(signature, cert):
    """True when a module signature (``parse_modinfo_signature``) names ``cert``
    (``parse_certificate``): PKCS#7 signatures (sign-file since kernel 4.3) carry the
    signing certificate's serial, the older X.509-id ones its subject key identifier."""
    key = (signature or {}).get("sig_key")
    if not key or not cert:
        return False
    return _magnitude(key) == cert.get("serial") or key == cert.get("ski")


def cert_trust(cert, moks=None, keys=None, pending=None):
    """Where the node trusts ``cert``: ``{"enrolled": bool, "in_keyring": bool,
    "pending": bool}``. ``moks``/``pending``: ``parse_mokutil_list`` of ``--list-enrolled``
    and ``--list-new`` (SHA1 fingerprint); ``keys``: ``parse_proc_keys``/``parse_keyctl_list``
    (the kernel names an asymmetric key by its subject key identifier)."""
    sha1 = cert.get("sha1")
    ski = cert.get("ski")
    return {
        "enrolled": any(m.get("sha1") == sha1 for m in moks or []),
        "in_keyring": bool(ski) and any((k.get("key_id") or "").lower() == ski for k in keys or []),
        "pending": any(m.get("sha1") == sha1 for m in pending or []),
    }


# --------------------------------------------------------------------------
# the module signature trailer (scripts/sign-file appends it)
# --------------------------------------------------------------------------

SIGNATURE_MAGIC = b"~Module signature appended~\n"


def strip_signature(data):
    """``data`` without its appended signature (the kernel's struct module_signature: 12
    bytes, the signature length big-endian in the last four, then the magic string).
    Unsigned data comes back unchanged; a trailer that does not add up raises ``ValueError``."""
    data = bytes(data)
    if not data.endswith(SIGNATURE_MAGIC):
        return data
    info_end = len(data) - len(SIGNATURE_MAGIC)
    if info_end < 12:
        raise ValueError("module signature trailer is truncated")
    sig_len = int.from_bytes(data[info_end - 4:info_end], "big")
    start = info_end - 12 - sig_len
    if start < 0:
        raise ValueError("module signature length %d is larger than the module" % sig_len)
    return data[:start]


# --------------------------------------------------------------------------
# DKMS: which signing the installed version supports
# --------------------------------------------------------------------------

DKMS_SIGNING_CONF_VERSION = (3, 0, 4)
# dell/dkms v2.8.1 to v3.0.3 run the ``sign_tool`` set in /etc/dkms/framework.conf as
# ``sign_tool KERNELVER MODULE`` after each module they build, before compressing it
# (run_sign_tool; v2.7.1 has no such hook, v3.0.4 replaced it by mok_signing_key)
DKMS_SIGN_TOOL_VERSION = (2, 8, 1)


def dkms_signing_method(version):
    """How DKMS itself can sign what it builds, kernel updates included:
    ``framework_conf`` when it reads ``mok_signing_key``/``mok_certificate`` from
    /etc/dkms/framework.conf and framework.conf.d/*.conf (dkms 3.0.4, commit 3323033
    "Rework signing #162"); ``sign_tool`` when it runs the ``sign_tool`` of
    /etc/dkms/framework.conf after each build (2.8.1 to 3.0.3); else ``sign_file``: DKMS
    cannot, and only the role's own pass signs (the kernel's scripts/sign-file)."""
    version = tuple(version)
    if version >= DKMS_SIGNING_CONF_VERSION:
        return "framework_conf"
    if version >= DKMS_SIGN_TOOL_VERSION:
        return "sign_tool"
    return "sign_file"


# --------------------------------------------------------------------------
# the chain's built modules, and the verdict per module
# --------------------------------------------------------------------------

MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


def chain_built_modules(dkms_tree, chain, kernel):
    """``[{"package", "version", "module", "built"}]``: the kernel modules DKMS built for
    ``kernel`` of each chain package (``<dkms_tree>/<package>/<version>/<kernel>/<arch>/module``),
    in chain order."""
    out = []
    for package in chain:
        top = os.path.join(dkms_tree, package)
        if not os.path.isdir(top):
            continue
        for version in sorted(os.listdir(top)):
            kdir = os.path.join(top, version, kernel)
            if not os.path.isdir(kdir) or os.path.islink(os.path.join(top, version)):
                continue
            for arch in sorted(os.listdir(kdir)):
                mdir = os.path.join(kdir, arch, "module")
                if not os.path.isdir(mdir):
                    continue
                for name in sorted(os.listdir(mdir)):
                    suffix = next((s for s in MODULE_SUFFIXES if name.endswith(s)), None)
                    if suffix:
                        out.append({"package": package, "version": version, "module": name[:-len(suffix)],
                                    "built": os.path.join(mdir, name)})
    return out


def module_verdict(module, kernel, signature, cert, knob="gpudirect_dkms_signing_cert"):
    """``{"module", "kernel", "ok", "status", "message"}`` for one module: ``signed`` (by
    ``cert``), ``unsigned``, ``other_key`` or ``unreadable`` (modinfo printed a signature
    without its key id). ``cert`` None: no certificate is configured."""
    cert = cert or {}
    out = {"module": module, "kernel": kernel, "filename": (signature or {}).get("filename"),
           "signer": (signature or {}).get("signer"), "sig_key": (signature or {}).get("sig_key"),
           "sig_hashalgo": (signature or {}).get("sig_hashalgo")}
    if not signature or not signature.get("signed"):
        out.update(ok=False, status="unsigned", message=(
            "module %s for kernel %s (%s) is not signed: the kernel enforces signatures and will refuse it; "
            "set %s and its key so that the gpudirect_dkms role signs the chain"
            % (module, kernel, out["filename"], knob)))
    elif not signature.get("sig_key"):
        out.update(ok=False, status="unreadable", message=(
            "module %s for kernel %s (%s) carries a signature whose key modinfo cannot read (kmod without "
            "openssl): check it with a newer kmod, or re-sign it with the certificate of %s"
            % (module, kernel, out["filename"], knob)))
    elif signed_by(signature, cert):
        out.update(ok=True, status="signed", message="module %s for kernel %s is signed by %s"
                   % (module, kernel, cert.get("subject_cn") or cert.get("serial")))
    else:
        out.update(ok=False, status="other_key", message=(
            "module %s for kernel %s (%s) is signed by %r (key %s), not by the certificate of %s (serial %s, "
            "key id %s): re-run the gpudirect_dkms role so that it re-signs the chain"
            % (module, kernel, out["filename"], signature.get("signer"), signature.get("sig_key"), knob,
               cert.get("serial"), cert.get("ski"))))
    return out


ENROLL_STEPS = (
    "At the node's console (BMC/KVM or serial), at the next boot shim starts MokManager (blue screen, "
    "10 seconds to press a key): choose 'Enroll MOK', then 'Continue', then 'Yes', type the one-time "
    "password given to mokutil --import, then choose 'Reboot'. Then run site.yml again."
)


SIGNING_FIX = (
    "run site.yml (or playbooks/drivers.yml) with gpudirect_dkms_signing_key_path and "
    "gpudirect_dkms_signing_cert_path (or their _content forms) set: it signs the chain for every kernel "
    "and, while the certificate is not trusted yet, queues its enrolment and stops the host with the console steps"
)


def verification_check(result, cert_configured=True):
    """The ``module_signing`` check of gpudirect_verify, from gpudirect_module_signing's
    ``check`` result for the running kernel and the one that boots next: ``{"name",
    "status": passed|failed|skipped, "summary", "reason"}``. It passes only when the
    kernel refuses unsigned modules and every module of the chain built for those
    kernels is signed by the toolkit's certificate, which the kernel trusts (an enrolled
    MOK, or in its keyrings); so a node that passes loads its drivers after its next
    boot too. A kernel that loads unsigned modules skips it, saying so."""
    sb = (result or {}).get("secure_boot") or {}
    kernels = ", ".join((result or {}).get("kernels") or []) or "-"
    check = {"name": "module_signing", "status": "skipped", "summary": "", "reason": ""}
    required = sb.get("signatures_required")
    if required is None:
        check["reason"] = "whether the kernel refuses unsigned modules is unknown (%s)" % sb.get("enforcement")
    elif not required:
        check["reason"] = "the kernel loads unsigned modules (%s)" % sb.get("enforcement")
    elif not result.get("modules"):
        check["reason"] = "no module of the chain is built for %s" % kernels
    if check["reason"]:
        check["summary"] = "module signing: not checked: %s" % check["reason"]
        return check
    modules, cert, trust = result["modules"], result.get("certificate") or {}, result.get("trust") or {}
    if not cert_configured or not cert:
        problems = ["the kernel refuses unsigned modules (%s) and no signing certificate is configured, so the "
                    "chain built for %s cannot be checked against it" % (sb.get("enforcement"), kernels)]
    else:
        problems = list(result.get("problems") or [])
        if not problems and not (trust.get("enrolled") or trust.get("in_keyring")):
            problems.append("the chain for %s is signed by %s (serial %s), which the kernel does not trust: not an "
                            "enrolled MOK, not in its keyrings%s"
                            % (kernels, cert.get("subject_cn"), cert.get("serial"),
                               " (its enrolment is queued: " + ENROLL_STEPS + ")" if trust.get("pending") else ""))
    if problems:
        check.update(status="failed", reason="; ".join(problems),
                     summary="module signing: FAILED: %s; %s" % ("; ".join(problems), SIGNING_FIX))
        return check
    check.update(status="passed", summary="module signing: %d modules of the chain for %s signed by %s (serial %s), "
                 "which the kernel trusts (%s; %s)"
                 % (len(modules), kernels, cert.get("subject_cn"), cert.get("serial"),
                    "an enrolled MOK" if trust.get("enrolled") else "in its keyrings", sb.get("enforcement")))
    return check


# --------------------------------------------------------------------------
# the facts section, the preflight lines and finding
# --------------------------------------------------------------------------

def collect(root="/", run=None, live=False):
    """The ``secure_boot`` facts of a node. ``run(argv)`` returns ``(rc, out, err)`` or None
    when the binary is absent; it is used only when ``live``. Every source that fails leaves
    a line in ``errors``; nothing here writes."""
    def under(*parts):
        return os.path.join(root or "/", *parts)

    out = {"secure_boot": None, "setup_mode": False, "shim_validation_disabled": False, "source": None,
           "lockdown": None, "sig_enforce": None, "signatures_required": None, "enforcement": None,
           "trusted_keys": [], "moks": None, "moks_pending": None, "errors": []}
    state = None
    if live and run is not None:
        result = run(["mokutil", "--sb-state"])
        if result is not None:
            rc, stdout, stderr = result
            try:
                state = parse_mokutil_sb_state((stdout or "") + (stderr or ""))
            except ValueError as exc:
                out["errors"].append(str(exc))
    if state is None:
        state = read_efivars(under("sys", "firmware", "efi"))
        if state.get("error"):
            out["errors"].append(state["error"])
    for key in ("secure_boot", "setup_mode", "shim_validation_disabled", "source"):
        out[key] = state.get(key)

    lockdown_text = read_text(under("sys", "kernel", "security", "lockdown"))
    if lockdown_text is not None:
        try:
            out["lockdown"] = parse_lockdown(lockdown_text)
        except ValueError as exc:
            out["errors"].append(str(exc))
    enforce = read_text(under("sys", "module", "module", "parameters", "sig_enforce"))
    out["sig_enforce"] = enforce.strip() if enforce is not None else None
    policy = signature_policy(out, out["lockdown"], out["sig_enforce"])
    out["signatures_required"], out["enforcement"] = policy["required"], policy["why"]

    keys_text = read_text(under("proc", "keys"))
    if keys_text is not None:
        try:
            out["trusted_keys"] = [dict(k, keyring=None) for k in parse_proc_keys(keys_text)]
        except ValueError as exc:
            out["errors"].append(str(exc))
    if live and run is not None:
        by_id = {}
        for ring in MODULE_KEYRINGS:
            result = run(["keyctl", "list", "%:" + ring])
            if result is None:
                break
            rc, stdout, _stderr = result
            if rc != 0:
                continue
            try:
                for key in parse_keyctl_list(stdout):
                    by_id.setdefault(key["serial"], dict(key, keyring=ring))
            except ValueError as exc:
                out["errors"].append("keyctl list %s: %s" % (ring, exc))
        if by_id:
            seen = set(by_id)
            out["trusted_keys"] = sorted(by_id.values(), key=lambda k: (MODULE_KEYRINGS.index(k["keyring"]),
                                                                         k["serial"])) + \
                [k for k in out["trusted_keys"] if k["serial"] not in seen]
        if out["secure_boot"] not in ("unsupported", None):
            for flag, field, var in (("--list-enrolled", "moks", "MokListRT"), ("--list-new", "moks_pending", "MokNew")):
                result = run(["mokutil", flag])
                if result is None:
                    break
                rc, stdout, stderr = result
                try:
                    out[field] = parse_mokutil_list((stdout or "") + (stderr or ""), var)
                except ValueError as exc:
                    out["errors"].append(str(exc))
    return out


SIGNING_KNOBS = ("gpudirect_dkms_signing_key_path/gpudirect_dkms_signing_cert_path (files on the node) or "
                 "gpudirect_dkms_signing_key_content/gpudirect_dkms_signing_cert_content (pushed from the controller)")


def report_lines(facts):
    """The preflight table's Secure Boot lines."""
    sb = facts or {}
    if not sb:
        return ["secure boot: not read"]
    mode = sb.get("secure_boot") or "unknown"
    extras = []
    if sb.get("setup_mode"):
        extras.append("firmware in Setup Mode")
    if sb.get("shim_validation_disabled"):
        extras.append("shim validation disabled")
    lines = ["secure boot %s (from %s)%s" % (mode, sb.get("source") or "?",
                                           ", " + ", ".join(extras) if extras else "")]
    required = sb.get("signatures_required")
    lines.append("module signatures %s: %s (lockdown %s, module.sig_enforce %s)" % (
        "REQUIRED" if required else "not required" if required is False else "unknown",
        sb.get("enforcement") or "-", sb.get("lockdown") or "absent", sb.get("sig_enforce") or "absent"))
    keys = sb.get("trusted_keys") or []
    lines.append("kernel keys %s" % ("; ".join("%s%s %s" % (k.get("subject"), " [%s]" % k["keyring"]
                                                             if k.get("keyring") else "", k.get("key_id") or "")
                                               for k in keys) or "none visible"))
    moks = sb.get("moks")
    if moks is not None:
        lines.append("MOKs %s" % ("; ".join("%s sha1 %s" % (m.get("subject") or "?", m.get("sha1")) for m in moks)
                                  or "none enrolled"))
    if sb.get("moks_pending"):
        lines.append("MOKs queued for enrolment at the next boot: %s" % "; ".join(
            "%s sha1 %s" % (m.get("subject") or "?", m.get("sha1")) for m in sb["moks_pending"]))
    return lines


def findings(facts, signing_configured=None):
    """``[(severity, message)]`` about module signing. ``signing_configured``: whether the
    gpudirect_dkms signing knobs are set (None: not known to the caller, no finding)."""
    sb = facts or {}
    out = []
    if not sb:
        return out
    if sb.get("signatures_required") and signing_configured is False:
        out.append(("bad", "the kernel refuses unsigned modules (%s), and no module signing key is configured: "
                           "the DKMS chain (OFED, nvidia, peer memory, gdrdrv) would not load after the reboot; "
                           "set %s" % (sb.get("enforcement"), SIGNING_KNOBS)))
    if sb.get("signatures_required") is None:
        out.append(("warn", "whether the kernel refuses unsigned modules is unknown (%s)" % sb.get("enforcement")))
    for error in sb.get("errors") or []:
        out.append(("info", "secure boot: %s" % error))
    return out
