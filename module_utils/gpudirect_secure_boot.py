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

The keys the kernel trusts for modules live in the ``.builtin_trusted_keys``,
``.secondary_trusted_keys``, ``.platform`` and (kernel 5.18+) ``.machine`` keyrings;
``keyctl list %:.platform`` prints them (``parse_keyctl_list``) and ``/proc/keys``
lists every asymmetric key the caller may view (``parse_proc_keys``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

EFI_GLOBAL_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
SHIM_LOCK_GUID = "605dab50-e046-4293-a1e8-d8d8c04bd9b9"
MODULE_KEYRINGS = (".builtin_trusted_keys", ".secondary_trusted_keys", ".platform", ".machine")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _lines(text):
    return [_ANSI.sub("", line).strip() for line in (text or "").splitlines() if _ANSI.sub("", line).strip()]


def parse_mokutil_sb_state(text):
    """``{"secure_boot": "enabled"|"disabled"|"unknown"|"unsupported", "setup_mode": bool,
    "shim_validation_disabled": bool, "source": "mokutil"}``. Raises ``ValueError`` naming the
    text when no line is one mokutil prints."""
    state = {"secure_boot": None, "setup_mode": False, "shim_validation_disabled": False, "source": "mokutil"}
    for line in _lines(text):
        if line == "SecureBoot enabled":
            state["secure_boot"] = "enabled"
        elif line == "SecureBoot disabled":
            state["secure_boot"] = "disabled"
        elif line.startswith("Cannot determine secure boot state"):
            state["secure_boot"] = "unknown"
        elif line == "SecureBoot validation is disabled in shim":
            state["shim_validation_disabled"] = True
        elif line == "Platform is in Setup Mode":
            state["setup_mode"] = True
        elif "EFI variables are not supported" in line or "doesn't support Secure Boot" in line:
            state["secure_boot"] = "unsupported"
    if state["secure_boot"] is None:
        raise ValueError("mokutil --sb-state printed no Secure Boot state: %r" % (text or "")[:200])
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
    if enforce == "Y":
        return {"required": True, "why": "module.sig_enforce=Y"}
    if lockdown in ("integrity", "confidentiality"):
        return {"required": True, "why": "kernel lockdown is %s" % lockdown}
    if lockdown is None and not enforce:
        return {"required": None, "why": "neither /sys/kernel/security/lockdown nor module.sig_enforce is readable"}
    return {"required": False, "why": "lockdown %s, module.sig_enforce=%s" % (lockdown or "absent", enforce or "absent")}


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
