# -*- coding: utf-8 -*-
"""The NIC side of GPUDirect (issue #32): pure parsing and planning, no I/O.

* :func:`parse_mlxconfig_query` reads ``mlxconfig -d <dev> query [PARAM...]`` (NVIDIA MFT) and
  ``mstconfig -d <pci> query`` (mstflint) output: per device the header and, per parameter, every
  column the tool printed (``Default`` / ``Current`` / ``Next Boot``, or ``Next Boot`` alone, or the
  ``Next Boot`` / ``New`` table of a ``set``), the ``*`` (differs) and ``RO`` marks, ``-E-`` errors.
* :func:`plan_firmware` compares that with a validated knob map (raw parameters and the named
  profiles ``gpudirect``, ``gpudirect_vm``, ``roce``) and says per device what is in place, what to
  set, what only waits for a firmware reset, what the card does not expose, and whether a reset is
  needed.
* :func:`parse_flint_query` reads ``flint``/``mstflint -d <pci> query`` (PSID, the flash's and the
  running firmware version) and ``-i <image> query`` (the image's); :func:`validate_firmware_pins` checks
  the pinned images of ``gpudirect_nic_config_firmware`` and :func:`plan_firmware_version` says per card
  whether its firmware is in place, to update, waiting for a reset, or has no pinned image, and whether
  the burn changes the card's PSID; :func:`pick_firmware_member` picks the one ``.bin`` of a downloaded
  ``.zip`` as NVIDIA ships it; :func:`check_image_query` compares an image with its pin and the card.
* :func:`parse_mlnx_qos` reads ``mlnx_qos -i <netdev>`` (DOCA/MLNX_OFED mlnx-tools) output; the
  RoCE QoS plan is module_utils/gpudirect_roce_qos.py's.

Output shapes (what the tools print) were taken from the tools' sources and from public captures,
named in tests/fixtures/nic_config/README.md:
- mstflint ``mlxconfig/mlxcfg_ui.cpp`` (commit b9d9e844a14ae1c85cb90c76ccd4a56a0eccd599): a row is
  ``<'*' or ' '><'RO' or ''>     <name padded to 48>`` then one value per column; errors are printed
  as ``-E- <message>``; the trailer ``The '*' shows parameters with next value different from
  default/current value.``; ``Unknown Parameter <name>`` (``mlxcfg_generic_commander.cpp``).
- mlnx-tools ``python/mlnx_qos`` ``pretty_print`` (Mellanox/mlnx-tools commit
  8fbfd9cfff34e2d32f1dd5a115c42eb8bd3b66c8) and ``python/Python/dcbnetlink.py`` ``printAppSelector``
  (dscp2prio rows, 8 code points a row, a priority may span rows).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.gpudirect_versions import FIRMWARE_VERSION_RE, parse_firmware_version

# --------------------------------------------------------------------------------------------
# mlxconfig / mstconfig query
# --------------------------------------------------------------------------------------------

# Column titles mlxconfig prints after "Configurations:", in the order it prints them.
_COLUMN_TITLES = (("Default", "default"), ("Current", "current"), ("Next Boot", "next_boot"), ("New", "new"))
_HEADER_KEYS = {
    "device type": "type",
    "name": "name",
    "description": "description",
    "device": "device",
    "pci device": "pci_device",
}
_VALUE_RE = re.compile(r"^(?P<name>.*?)\((?P<num>-?(?:0x[0-9a-fA-F]+|\d+))\)$")
_INT_RE = re.compile(r"^-?(?:0x[0-9a-fA-F]+|\d+)$")
_ARRAY_RE = re.compile(r"^Array\[(\d+)\.\.(\d+)\]$")
_PARAM_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\[\d+(\.\.\d+)?\])?$")
_DEVICE_RE = re.compile(r"^Device #(\d+):\s*$")
_UNKNOWN_PARAM_RE = re.compile(r"Unknown Parameter:?\s+(\S+)", re.IGNORECASE)
_NOISE_PREFIXES = (
    "The '*' shows",
    "The 'RO' shows",
    "Apply new Configuration?",
    "Applying...",
    "-I-",
    "-W-",
)


def parse_value(text):
    """One printed value: ``True(1)`` -> name True, value 1; ``4`` -> value 4; ``ETH`` (older
    tools) -> name ETH, value None; ``Array[0..7]`` -> the array range. Raw text always kept."""
    raw = text.strip()
    out = {"raw": raw, "name": None, "value": None}
    match = _ARRAY_RE.match(raw)
    if match:
        out["array"] = [int(match.group(1)), int(match.group(2))]
        return out
    match = _VALUE_RE.match(raw)
    if match:
        out["name"] = match.group("name") or None
        out["value"] = int(match.group("num"), 0)
        return out
    if _INT_RE.match(raw):
        out["value"] = int(raw, 0)
        return out
    out["name"] = raw
    return out


def _columns_from_header(rest, lineno):
    columns = []
    position = 0
    for title, key in _COLUMN_TITLES:
        found = rest.find(title, position)
        if found >= 0:
            columns.append(key)
            position = found + len(title)
    leftover = rest
    for title, _key in _COLUMN_TITLES:
        leftover = leftover.replace(title, "")
    if leftover.strip() or not columns or "next_boot" not in columns:
        raise ValueError("line %d: could not read the column titles of the Configurations header: %r"
                         % (lineno, rest.strip()))
    return columns


def _new_device(index):
    return {
        "index": index,
        "type": None,
        "name": None,
        "description": None,
        "device": None,
        "columns": None,
        "params": {},
        "errors": [],
        "unknown_parameters": [],
        "modified": [],
    }


def _add_error(target, message):
    target["errors"].append(message)
    match = _UNKNOWN_PARAM_RE.search(message)
    if match:
        target["unknown_parameters"].append(match.group(1).rstrip(".:,"))


def _parse_row(line, columns, lineno):
    tokens = line.split()
    modified = read_only = False
    while tokens and tokens[0] in ("*", "RO", "*RO"):
        modified = modified or tokens[0].startswith("*")
        read_only = read_only or tokens[0].endswith("RO")
        tokens.pop(0)
    if tokens and tokens[0].startswith("*") and len(tokens[0]) > 1:
        modified = True
        tokens[0] = tokens[0][1:]
    if not tokens or not _PARAM_RE.match(tokens[0]):
        raise ValueError("line %d: could not read a parameter row: %r" % (lineno, line.strip()))
    name = tokens[0]
    values = tokens[1:]
    if len(values) != len(columns):
        raise ValueError("line %d: parameter %s has %d value(s) where the header names %d column(s) (%s): %r"
                         % (lineno, name, len(values), len(columns), ", ".join(columns), line.strip()))
    entry = {"modified": modified, "read_only": read_only}
    for key, value in zip(columns, values):
        entry[key] = parse_value(value)
    array = [entry[key].get("array") for key in columns if entry[key].get("array")]
    entry["array"] = array[0] if array else None
    return name, entry


def parse_mlxconfig_query(text):
    """Parse mlxconfig/mstconfig query output (one or several devices).

    Returns ``{"devices": [...], "errors": [...], "unknown_parameters": [...]}``; errors printed
    before any device header (``-E- Failed to open device``, ``-E- No devices found``) are top level.
    Each device: ``index``, ``type``, ``name``, ``description``, ``device``, ``columns`` (keys of the
    printed columns, e.g. ``["default", "current", "next_boot"]``), ``params`` (name -> ``{column:
    {raw, name, value}, modified, read_only, array}``), ``errors``, ``unknown_parameters``,
    ``modified`` (names marked ``*``). Raises ValueError naming the line it could not read."""
    if not isinstance(text, str):
        raise ValueError("mlxconfig query output must be text, got %s" % type(text).__name__)
    result = {"devices": [], "errors": [], "unknown_parameters": []}
    device = None
    columns = None
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.rstrip("\r").rstrip()
        stripped = line.strip()
        if not stripped or set(stripped) == {"-"}:
            continue
        if stripped.startswith("-E-"):
            _add_error(device if device is not None else result, stripped[3:].strip())
            continue
        if stripped.startswith(_NOISE_PREFIXES):
            continue
        match = _DEVICE_RE.match(stripped)
        if match:
            device = _new_device(int(match.group(1)))
            result["devices"].append(device)
            columns = None
            continue
        if stripped.startswith("Configurations:"):
            if device is None:
                # a query of named parameters on one device may print the table alone
                device = _new_device(1)
                result["devices"].append(device)
            columns = _columns_from_header(stripped[len("Configurations:"):], lineno)
            device["columns"] = columns
            continue
        if columns is None:
            key, sep, value = stripped.partition(":")
            header_key = _HEADER_KEYS.get(key.strip().lower())
            if sep and header_key and device is not None:
                device[header_key] = value.strip() or None
                continue
            raise ValueError("line %d: could not read %r (expected a 'Device #N:' header, a device field "
                             "or a 'Configurations:' header)" % (lineno, stripped))
        name, entry = _parse_row(line, columns, lineno)
        device["params"][name] = entry
        if entry["modified"]:
            device["modified"].append(name)
    if not result["devices"] and not result["errors"]:
        raise ValueError("no device and no -E- error in the mlxconfig output (empty or not a query output)")
    for dev in result["devices"]:
        if dev["columns"] is None and not dev["errors"]:
            raise ValueError("device #%d (%s) has no Configurations table and no -E- error: the output "
                             "looks truncated" % (dev["index"], dev["device"] or dev["type"] or "?"))
    result["unknown_parameters"] = sorted(set(result["unknown_parameters"]).union(
        *[set(d["unknown_parameters"]) for d in result["devices"]]))
    return result


# --------------------------------------------------------------------------------------------
# Firmware knobs and profiles
# --------------------------------------------------------------------------------------------

BOOL_NAMES = {"true": 1, "false": 0, "enabled": 1, "disabled": 0}
# Names whose number is fixed whatever the card prints, so a wanted name can be compared with a
# card that prints only a number (older tools print LINK_TYPE_P1 as a bare "ETH"/"IB" instead).
# LINK_TYPE: IB=1, ETH=2 (nic-configuration-operator pkg/consts/consts.go NvParamLinkTypeInfiniband /
# NvParamLinkTypeEthernet), VPI=3 (MFT user manual, mlxconfig LINK_TYPE). PCI_WR_ORDERING:
# per_mkey=0x0, force_relax=0x1 (mstflint mlxconfig/mlxconfig_dbs/mlxconfig_host.db, textual_values).
ENUM_NAMES = {
    "LINK_TYPE": {"ib": 1, "eth": 2, "vpi": 3},
    "PCI_WR_ORDERING": {"per_mkey": 0, "force_relax": 1},
}
BOOL_PARAMS = ("ATS_ENABLED", "ADVANCED_PCI_SETTINGS", "SRIOV_EN")
UINT_PARAMS = ("NUM_OF_VFS", "MAX_ACC_OUT_READ", "PF_TOTAL_SF", "CNP_DSCP", "CNP_802P_PRIO", "ROCE_CC_PRIO_MASK")
UINT_LIMITS = {"CNP_DSCP": 63, "CNP_802P_PRIO": 7, "ROCE_CC_PRIO_MASK": 255}

# Profiles. Sources:
# - gpudirect: NVIDIA nic-configuration-operator (Mellanox/nic-configuration-operator commit
#   8bfbeb34ba25215dd06402cd01bae0108341a8d4) README "gpuDirectOptimized": "Set nvconfig
#   ATS_ENABLED=0" on bare metal, and only together with pciPerformanceOptimized; its
#   pkg/configuration/configvalidation.go sets MAX_ACC_OUT_READ to 0 ("According to the PRM, setting
#   MAX_ACC_OUT_READ to zero enables the auto mode") and skips it with a warning where the firmware's
#   default is not 0. mstflint's mlxconfig_host.db describes MAX_ACC_OUT_READ as "Configuration is
#   available only when NV_PCI_CONF.ADVANCED_PCI_SETTINGS is TRUE" and PCI_WR_ORDERING likewise
#   ("show this setting only when NV_PCI_CONF.advanced_pci_settings is true"), hence
#   ADVANCED_PCI_SETTINGS=1 here (the operator's API docs: "Mstconfig -d <device> set
#   ADVANCED_PCI_SETTINGS=1"). PCI_WR_ORDERING=force_relax(1): "All MKeys will be set to use Relaxed
#   Ordering at creation time" (same db), the relaxed ordering users of GPUDirect ask for (issue #32).
# - gpudirect_vm: as gpudirect, but ATS_ENABLED=1: ATS is what GPUDirect RDMA in a VM (PCIe
#   pass-through behind an IOMMU) needs, the case the operator leaves out ("ATM only optimizations for
#   Baremetal environment are supported").
# - roce: the operator's README "roceOptimized": ROCE_CC_PRIO_MASK_P1/P2=255, CNP_DSCP_P1/P2=4,
#   CNP_802P_PRIO_P1/P2=6 (the _P2 ones only where the card has a second port); trust dscp, PFC on
#   priority 3 are runtime settings (role gpudirect_roce_qos).
PROFILES = {
    "gpudirect": {
        "ADVANCED_PCI_SETTINGS": 1,
        "ATS_ENABLED": 0,
        "MAX_ACC_OUT_READ": 0,
        "PCI_WR_ORDERING": 1,
    },
    "gpudirect_vm": {
        "ADVANCED_PCI_SETTINGS": 1,
        "ATS_ENABLED": 1,
        "MAX_ACC_OUT_READ": 0,
        "PCI_WR_ORDERING": 1,
    },
    "roce": {
        "ROCE_CC_PRIO_MASK_P1": 255,
        "ROCE_CC_PRIO_MASK_P2": 255,
        "CNP_DSCP_P1": 4,
        "CNP_DSCP_P2": 4,
        "CNP_802P_PRIO_P1": 6,
        "CNP_802P_PRIO_P2": 6,
    },
}
# Parameters a profile asks for only where the card has them (second port): absent -> skipped.
_PORT2_RE = re.compile(r"_P2$")
# Parameters the firmware hides until ADVANCED_PCI_SETTINGS is in effect (mlxconfig_host.db).
HIDDEN_UNTIL_ADVANCED_PCI = ("MAX_ACC_OUT_READ", "PCI_WR_ORDERING")


def _base_name(param):
    base = re.sub(r"\[\d+\]$", "", param)
    return re.sub(r"_P\d+$", "", base)


def normalize_wanted_value(param, value):
    """A wanted value as ``{"name": str|None, "value": int|None}``; ValueError naming the knob when
    the value is of the wrong kind for the parameter."""
    base = _base_name(param)
    if isinstance(value, bool):
        if base in ENUM_NAMES:
            raise ValueError("%s: a true/false value does not fit this parameter (one of %s)"
                             % (param, ", ".join(sorted(ENUM_NAMES[base]))))
        return {"name": None, "value": int(value)}
    if isinstance(value, int):
        number = value
        name = None
    elif isinstance(value, str) and value.strip():
        parsed = parse_value(value.strip())
        if parsed.get("array"):
            raise ValueError("%s: an Array[..] value cannot be set; name an element, e.g. %s[0]" % (param, param))
        name, number = parsed["name"], parsed["value"]
    else:
        raise ValueError("%s: wanted value must be a number, true/false or a value name, got %r" % (param, value))
    if name is not None:
        lowered = name.lower()
        if base in ENUM_NAMES:
            if lowered not in ENUM_NAMES[base]:
                raise ValueError("%s: unknown value %r (one of %s)" % (param, name, ", ".join(sorted(ENUM_NAMES[base]))))
            known = ENUM_NAMES[base][lowered]
            if number is not None and number != known:
                raise ValueError("%s: %s is %d, not %d" % (param, name, known, number))
            number = known
        elif lowered in BOOL_NAMES:
            known = BOOL_NAMES[lowered]
            if number is not None and number != known:
                raise ValueError("%s: %s is %d, not %d" % (param, name, known, number))
            number = known
        elif base in BOOL_PARAMS or base in UINT_PARAMS:
            raise ValueError("%s: wanted a %s, got %r" % (param, "true/false" if base in BOOL_PARAMS else "number", value))
    if number is not None:
        if base in BOOL_PARAMS and number not in (0, 1):
            raise ValueError("%s: wanted true/false (1/0), got %r" % (param, value))
        if base in UINT_PARAMS and number < 0:
            raise ValueError("%s: wanted a number >= 0, got %r" % (param, value))
        if base in UINT_LIMITS and number > UINT_LIMITS[base]:
            raise ValueError("%s: %d is above the largest value, %d" % (param, number, UINT_LIMITS[base]))
        if base in ENUM_NAMES and number not in ENUM_NAMES[base].values():
            raise ValueError("%s: %d is not one of %s" % (param, number, sorted(ENUM_NAMES[base].values())))
    return {"name": name, "value": number}


def resolve_wanted(wanted):
    """Validate ``wanted`` and expand its profiles. ``wanted`` maps parameter -> value; the key
    ``profiles`` (a list of names) pulls in :data:`PROFILES`, raw parameters override profile values.
    Returns ``{param: {"name", "value", "source"}}``."""
    if not isinstance(wanted, dict):
        raise ValueError("nic firmware knobs must be a map of parameter -> value, got %s" % type(wanted).__name__)
    resolved = {}
    profiles = wanted.get("profiles") or []
    if isinstance(profiles, str):
        profiles = [profiles]
    if not isinstance(profiles, list):
        raise ValueError("profiles: wanted a list of profile names, got %r" % (profiles,))
    for profile in profiles:
        if profile not in PROFILES:
            raise ValueError("profiles: unknown profile %r (known: %s)" % (profile, ", ".join(sorted(PROFILES))))
        for param, value in PROFILES[profile].items():
            entry = normalize_wanted_value(param, value)
            entry["source"] = "profile " + profile
            resolved[param] = entry
    if "gpudirect" in profiles and "gpudirect_vm" in profiles:
        raise ValueError("profiles: gpudirect and gpudirect_vm disagree on ATS_ENABLED; name one")
    for param, value in wanted.items():
        if param == "profiles":
            continue
        if not isinstance(param, str) or not _PARAM_RE.match(param) or param != param.upper():
            raise ValueError("%r: not an mlxconfig parameter name (upper case, e.g. ATS_ENABLED)" % (param,))
        if ".." in param:
            raise ValueError("%s: name one array element, not a range" % param)
        entry = normalize_wanted_value(param, value)
        entry["source"] = "raw"
        resolved[param] = entry
    return resolved


def _value_matches(wanted, shown, param_values):
    """True/False when comparable, None when the card's value cannot be compared (name only on
    one side and no printed number for it)."""
    if shown is None:
        return None
    if wanted["value"] is not None and shown["value"] is not None:
        return wanted["value"] == shown["value"]
    if wanted["name"] is not None and shown["name"] is not None:
        return wanted["name"].lower() == shown["name"].lower()
    # wanted name, card number (or the reverse): look the name up in what the card printed
    if wanted["value"] is None and wanted["name"] is not None:
        for other in param_values:
            if other and other["name"] and other["name"].lower() == wanted["name"].lower() and other["value"] is not None:
                return other["value"] == shown["value"]
    return None


def _set_text(param, wanted):
    if wanted["value"] is not None:
        return "%s=%d" % (param, wanted["value"])
    return "%s=%s" % (param, wanted["name"])


def _label(shown):
    return None if shown is None else shown["raw"]


def plan_firmware(query, wanted):
    """Plan the firmware (NV config) change per device.

    ``query``: the result of :func:`parse_mlxconfig_query`; ``wanted``: see :func:`resolve_wanted`.
    Per device: ``in_place`` (next boot already wanted and, where printed, current too), ``to_set``
    (``param``, ``wanted``, ``current``, ``next_boot``, ``source``), ``pending`` (next boot is already
    wanted but the running value differs: no set, only a reset), ``not_exposed`` (the card does not
    show the parameter), ``deferred`` (hidden until ADVANCED_PCI_SETTINGS=1 takes effect: query again
    after the reset), ``skipped`` (with the reason), ``set_args`` (``PARAM=value`` for
    ``mlxconfig -d <dev> -y set``), ``reset_needed``, ``current_known`` (False for tools that print no
    Current column: a pending change cannot be seen then), ``errors``."""
    if not isinstance(query, dict) or "devices" not in query:
        raise ValueError("query: wanted the result of parse_mlxconfig_query")
    knobs = resolve_wanted(wanted)
    plans = []
    for device in query["devices"]:
        plan = {
            "index": device["index"],
            "device": device.get("device"),
            "type": device.get("type"),
            "name": device.get("name"),
            "in_place": [],
            "to_set": [],
            "pending": [],
            "not_exposed": [],
            "deferred": [],
            "skipped": [],
            "set_args": [],
            "reset_needed": False,
            "current_known": bool(device.get("columns")) and "current" in device["columns"],
            "errors": list(device.get("errors", [])),
        }
        params = device.get("params", {})
        if device.get("columns") is None:
            plan["skipped"].extend({"param": p, "reason": "the query failed: " + "; ".join(plan["errors"])}
                                   for p in sorted(knobs))
            plans.append(plan)
            continue
        advanced_wanted = knobs.get("ADVANCED_PCI_SETTINGS", {}).get("value") == 1
        advanced_shown = params.get("ADVANCED_PCI_SETTINGS", {})
        advanced_now = (advanced_shown.get("current") or advanced_shown.get("next_boot") or {}).get("value")
        for param in sorted(knobs):
            want = knobs[param]
            shown = params.get(param)
            if shown is None:
                if param in HIDDEN_UNTIL_ADVANCED_PCI and advanced_wanted and advanced_now != 1:
                    plan["deferred"].append({"param": param, "wanted": _set_text(param, want).split("=", 1)[1],
                                             "reason": "hidden until ADVANCED_PCI_SETTINGS=1 is in effect; "
                                                       "query again after the firmware reset",
                                             "source": want["source"]})
                elif want["source"].startswith("profile") and _PORT2_RE.search(param):
                    plan["skipped"].append({"param": param, "reason": "single-port card (no second port parameter)",
                                            "source": want["source"]})
                else:
                    plan["not_exposed"].append({"param": param, "source": want["source"]})
                continue
            if shown.get("array"):
                raise ValueError("%s: the card shows an array (%s); name one element, e.g. %s[%d]"
                                 % (param, shown["next_boot"]["raw"], param, shown["array"][0]))
            if shown.get("read_only"):
                plan["skipped"].append({"param": param, "reason": "read only on this card", "source": want["source"]})
                continue
            if (param == "MAX_ACC_OUT_READ" and want["value"] == 0 and "default" in shown
                    and shown["default"]["value"] not in (None, 0)):
                # nic-configuration-operator configvalidation.go: firmware whose default is not 0 does
                # not take the auto value; skip with a warning rather than write a value it rejects.
                plan["skipped"].append({"param": param, "source": want["source"],
                                        "reason": "auto (0) is not offered by this firmware (default %s)"
                                                  % shown["default"]["raw"]})
                continue
            columns_seen = [shown.get(key) for key in ("default", "current", "next_boot", "new")]
            next_boot = shown.get("new") or shown.get("next_boot")
            current = shown.get("current")
            next_ok = _value_matches(want, next_boot, columns_seen)
            current_ok = _value_matches(want, current, columns_seen) if current is not None else None
            row = {"param": param, "wanted": _set_text(param, want).split("=", 1)[1],
                   "current": _label(current), "next_boot": _label(next_boot), "source": want["source"]}
            if next_ok is None:
                plan["to_set"].append(dict(row, note="value not comparable with what the card prints; set by name"))
                plan["set_args"].append(_set_text(param, want))
            elif not next_ok:
                plan["to_set"].append(row)
                plan["set_args"].append(_set_text(param, want))
            elif current is not None and current_ok is False:
                plan["pending"].append(row)
            else:
                plan["in_place"].append(row)
        plan["reset_needed"] = bool(plan["to_set"] or plan["pending"])
        plans.append(plan)
    return {"devices": plans, "errors": list(query.get("errors", [])),
            "reset_needed": any(p["reset_needed"] for p in plans)}


# --------------------------------------------------------------------------------------------
# Firmware version policy: flint / mstflint query, pinned images
# --------------------------------------------------------------------------------------------

# flint/mstflint query: "Key:" padded to column 24, then the value. "FW Version" is the image on the
# flash (what the next firmware reset loads); "FW Version(Running)" is printed only while the running
# firmware differs from it (after a burn, before the reset). Samples: tests/fixtures/nic_config/.
_FLINT_LINE_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ._()/-]*?):\s*(?P<value>.*)$")
# MT_0000000834 (NVIDIA), LNV0000000025, IBM0030000009, NVD0000000079: letters, an optional "_",
# then digits/letters; at most 16 characters (the firmware's PSID field)
PSID_RE = re.compile(r"^[A-Z]{2,4}_?[A-Z0-9]{6,12}$")
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
FIRMWARE_POLICIES = ("report", "update")
FIRMWARE_KNOB = "gpudirect_nic_config_firmware"
ALLOW_PSID_CHANGE_KNOB = "gpudirect_nic_config_firmware_allow_psid_change"
PIN_KEYS = ("psid", "version", "image", "sha256")
PIN_OPTIONAL_KEYS = ("image_psid",)


def parse_flint_query(text):
    """Parse ``mstflint -d <pci> query`` / ``flint -d <pci> query [full]``.

    Returns ``psid``, ``flash`` (``FW Version``: the image on the flash, loaded at the next firmware
    reset), ``running`` (``FW Version(Running)`` where printed, else the flash version: they agree),
    ``pending`` (the flash version while it differs from the running one, else None), ``image_type``,
    ``product_version``, ``fields`` (every ``Key: value`` as printed). Extra lines, continuation lines
    (``Rom Info``), build suffixes after the version are tolerated. Raises ValueError on a ``-E-`` error,
    or when ``PSID`` or ``FW Version`` is missing or unreadable (a truncated output)."""
    if not isinstance(text, str):
        raise ValueError("flint query output must be text, got %s" % type(text).__name__)
    fields = {}
    errors = []
    for raw_line in text.splitlines():
        line = raw_line.rstrip("\r").rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("-E-"):
            errors.append(stripped[3:].strip())
            continue
        if line[:1].isspace():
            continue  # continuation of the field above (a second Rom Info line, a GUID column)
        match = _FLINT_LINE_RE.match(stripped)
        if match:
            fields.setdefault(match.group("key").strip(), match.group("value").strip())
    if errors:
        raise ValueError("the tool printed an error: %s" % "; ".join(errors))
    psid = fields.get("PSID")
    if not psid:
        raise ValueError("no 'PSID:' line (the output looks truncated, or is not a flint query)")
    if "FW Version" not in fields and "FW Version(Running)" not in fields:
        raise ValueError("no 'FW Version:' line (the output looks truncated, or is not a flint query)")
    flash = parse_firmware_version(fields.get("FW Version") or fields.get("FW Version(Running)"))
    if flash is None:
        raise ValueError("could not read a version N.N.N in 'FW Version: %s'" % fields.get("FW Version"))
    running = flash
    if "FW Version(Running)" in fields:
        running = parse_firmware_version(fields["FW Version(Running)"])
        if running is None:
            raise ValueError("could not read a version N.N.N in 'FW Version(Running): %s'"
                             % fields["FW Version(Running)"])
    return {
        "psid": psid.split()[0],
        "flash": flash,
        "running": running,
        "pending": flash if flash != running else None,
        "image_type": fields.get("Image type"),
        "product_version": fields.get("Product Version"),
        "fields": fields,
    }


def validate_firmware_pins(pins, knob=FIRMWARE_KNOB):
    """The pinned images by PSID, each ``{psid, version, image, sha256}`` and optionally ``image_psid``;
    ValueError naming the entry and the knob on a wrong shape, a relative path, a PSID listed twice.

    ``sha256`` is the sum of the file ``image`` names, as downloaded: the ``.zip`` NVIDIA ships, or a
    ``.bin``. ``image_psid`` is the PSID inside the image where it is not ``psid`` (an OEM card, such as
    a Dell ``DEL0000000027``, given NVIDIA's own image): the burn then changes the card's PSID, which
    ``gpudirect_nic_config_firmware_allow_psid_change`` must allow, and later runs find the card under
    ``image_psid``. Two entries that name one PSID (as ``psid`` or ``image_psid``) must pin one version."""
    if pins is None:
        return {}
    if not isinstance(pins, list):
        raise ValueError("%s must be a list of {psid, version, image, sha256}, got %s" % (knob, type(pins).__name__))
    by_psid = {}
    for index, entry in enumerate(pins):
        where = "%s[%d]" % (knob, index)
        if not isinstance(entry, dict):
            raise ValueError("%s must be a map {psid, version, image, sha256}, got %r" % (where, entry))
        unknown = sorted(set(entry) - set(PIN_KEYS + PIN_OPTIONAL_KEYS))
        missing = [k for k in PIN_KEYS if not entry.get(k)]
        if unknown or missing:
            raise ValueError("%s: %s (an entry is {psid, version, image, sha256}, optionally image_psid)" % (
                where, "; ".join(filter(None, ["unknown key(s) " + ", ".join(unknown) if unknown else "",
                                               "missing " + ", ".join(missing) if missing else ""]))))
        psid, version, image, sha = (str(entry[k]).strip() for k in PIN_KEYS)
        if not PSID_RE.match(psid):
            raise ValueError("%s: psid %r is not a PSID such as MT_0000000834 (flint -d <pci> query prints it)"
                             % (where, entry["psid"]))
        image_psid = str(entry.get("image_psid") or psid).strip()
        if not PSID_RE.match(image_psid):
            raise ValueError("%s (psid %s): image_psid %r is not a PSID such as MT_0000000834 (flint -i <image> "
                             "query prints it)" % (where, psid, entry["image_psid"]))
        if not FIRMWARE_VERSION_RE.match(version):
            raise ValueError("%s (psid %s): version %r is not a firmware version N.N.N such as 28.43.1014"
                             % (where, psid, entry["version"]))
        if not SHA256_RE.match(sha):
            raise ValueError("%s (psid %s): sha256 %r is not 64 hexadecimal digits (sha256sum <image>)"
                             % (where, psid, entry["sha256"]))
        if not (image.startswith("/") or re.match(r"^https?://[^/\s]+/\S+$", image)):
            raise ValueError("%s (psid %s): image %r must be an absolute path on the node or an http(s) URL"
                             % (where, psid, entry["image"]))
        if psid in by_psid:
            raise ValueError("%s: psid %s is pinned twice (%s[%d] too); one image per PSID"
                             % (where, psid, knob, by_psid[psid]["index"]))
        by_psid[psid] = {"index": index, "psid": psid, "version": version, "image": image, "sha256": sha.lower(),
                         "image_psid": image_psid}
    # a PSID named by two entries (a card crossflashed to image_psid, and cards born with that PSID) must
    # be held to one version, or each run would burn the other entry's image
    named = {}
    for pin in sorted(by_psid.values(), key=lambda p: p["index"]):
        for name in sorted({pin["psid"], pin["image_psid"]}):
            other = named.setdefault(name, pin)
            if other is not pin and other["version"] != pin["version"]:
                raise ValueError("%s[%d] and %s[%d] both name PSID %s (as psid or image_psid) with versions %s and %s: "
                                 "a card with that PSID would be burned back and forth; pin one version"
                                 % (knob, other["index"], knob, pin["index"], name, other["version"], pin["version"]))
    return by_psid


def find_pin(pins, psid):
    """The pin for a card of this PSID: the entry whose ``psid`` it is, else the entry whose image carries
    it (``image_psid``: a card whose PSID an earlier burn changed). None when no entry names it."""
    if psid in pins:
        return pins[psid]
    for pin in sorted(pins.values(), key=lambda p: p["index"]):
        if pin["image_psid"] == psid:
            return pin
    return None


def plan_firmware_version(query, pins, policy="report"):
    """One card's firmware against the pinned images (see :func:`validate_firmware_pins`).

    ``query``: :func:`parse_flint_query`'s result, or None (not read). Returns ``psid``, ``running``,
    ``pending``, ``pinned``, ``image``, ``sha256``, ``pin_psid`` (the entry's ``psid``), ``image_psid``
    (the PSID the pinned image carries), ``psid_change`` (burning it changes the card's PSID: an OEM card
    given another vendor's image), ``state`` and ``burn`` (True where policy update burns the pinned
    image). States: ``in_place`` (running the pinned version, nothing else on the flash), ``to_update``
    (the flash does not hold the pinned version), ``pending_reset`` (the flash holds it, the card runs
    another one: only the firmware reset is owed), ``no_image`` (no image pinned for this PSID),
    ``not_read``."""
    if policy not in FIRMWARE_POLICIES:
        raise ValueError("gpudirect_nic_config_firmware_policy must be one of %s, got %r"
                         % (", ".join(FIRMWARE_POLICIES), policy))
    out = {"psid": None, "running": None, "pending": None, "pinned": None, "image": None, "sha256": None,
           "pin_psid": None, "image_psid": None, "psid_change": False, "state": "not_read", "burn": False}
    if query is None:
        return out
    out.update(psid=query["psid"], running=query["running"], pending=query["pending"])
    pin = find_pin(pins, query["psid"])
    if pin is None:
        out["state"] = "no_image"
        return out
    out.update(pinned=pin["version"], image=pin["image"], sha256=pin["sha256"], pin_psid=pin["psid"],
               image_psid=pin["image_psid"])
    if query["flash"] != pin["version"]:
        out["state"] = "to_update"
    elif query["running"] != pin["version"]:
        out["state"] = "pending_reset"
    else:
        out["state"] = "in_place"
    out["psid_change"] = out["state"] == "to_update" and pin["image_psid"] != query["psid"]
    out["burn"] = policy == "update" and out["state"] == "to_update"
    return out


def psid_change_refusal(pci, card_psid, image_psid, image, declared):
    """The sentence that refuses to burn an image of another PSID while
    gpudirect_nic_config_firmware_allow_psid_change is false: the card's PSID, the image's, the knob first
    (the drain report keeps the first 400 characters of a failure)."""
    return ("%s: card PSID %s, image PSID %s: burning it changes the card's PSID, refused while %s is false (image "
            "%s). flint refuses it too (-E- PSID mismatch) unless given -allow_psid_change. An OEM card (Dell DEL..., "
            "HPE HP_/HPE..., Lenovo LNV...) may lose its vendor's settings: to change it anyway set %s: true%s; else "
            "pin an image made for PSID %s in %s. Nothing was burned."
            % (pci, card_psid, image_psid, ALLOW_PSID_CHANGE_KNOB, image, ALLOW_PSID_CHANGE_KNOB,
               "" if declared else " and add image_psid: %s to the pin of %s, so that later runs find the card under "
                                   "its new PSID" % (image_psid, card_psid), card_psid, FIRMWARE_KNOB))


def cached_image_name(psid, version, image):
    """The file a pinned http(s) image is downloaded to in the role's cache folder: ``<psid>-<version>.zip``
    for a URL whose path ends in ``.zip`` (as NVIDIA's downloads do), else ``<psid>-<version>.bin``. The
    role (tasks/main.yml) and the module name it alike; the module reads the file's content, not its name,
    to tell a zip from an image."""
    path = re.sub(r"[?#].*$", "", str(image))
    return "%s-%s%s" % (psid, version, ".zip" if path.lower().endswith(".zip") else ".bin")


def pick_firmware_member(names, archive, knob=FIRMWARE_KNOB):
    """The one ``.bin`` member of a firmware ``.zip`` (``names``: every member name, as ``zipfile`` lists
    them). NVIDIA ships ``fw-<Device>-rel-<version>-<OPN>-....signed.bin.zip`` holding that ``.bin``,
    newer ones also a ``.signed.cbor`` (tests/fixtures/nic_config/README.md); members other than ``.bin``
    files are left alone. ValueError naming the archive, the members and the knob on none or several."""
    bins = [n for n in names if not n.endswith("/") and n.rsplit("/", 1)[-1].lower().endswith(".bin")]
    if len(bins) == 1:
        return bins[0]
    shown = ", ".join(names[:20]) + (" ... (%d members)" % len(names) if len(names) > 20 else "")
    if not bins:
        raise ValueError("the archive %s holds no .bin firmware image (members: %s): not a ConnectX firmware "
                         "download. Pin the right file in %s. Nothing was burned." % (archive, shown or "none", knob))
    raise ValueError("the archive %s holds %d .bin images (%s): the role burns an archive only when it holds one. "
                     "Unpack it, and pin the .bin for this card (its path and its sha256) in %s. Nothing was burned."
                     % (archive, len(bins), ", ".join(bins), knob))


def check_image_query(image_query, firmware, card_psid, allow_psid_change, pci, image_name):
    """Compare ``flint -i <image> query`` (:func:`parse_flint_query`) with the card's plan (``firmware``, of
    :func:`plan_firmware_version`) before a burn. Returns True when the burn changes the card's PSID (and
    is allowed); ValueError with the sentence that refuses it: the image holds another version than the
    pin, or another PSID than the pin declares, or a PSID change that is not allowed."""
    version, psid = image_query["flash"], image_query["psid"]
    if version != firmware["pinned"]:
        raise ValueError("%s: the image %s holds firmware %s (flint -i <image> query), but %s pins version %s for "
                         "PSID %s: a wrong file or a wrong version in the pin. Nothing was burned."
                         % (pci, image_name, version, FIRMWARE_KNOB, firmware["pinned"], firmware["pin_psid"]))
    declared = firmware["image_psid"] != firmware["pin_psid"]
    if declared and psid != firmware["image_psid"]:
        raise ValueError("%s: the image %s carries PSID %s, but its pin (psid %s in %s) says image_psid %s: a wrong "
                         "file or a wrong image_psid. Nothing was burned."
                         % (pci, image_name, psid, firmware["pin_psid"], FIRMWARE_KNOB, firmware["image_psid"]))
    if psid == card_psid:
        return False
    if not allow_psid_change:
        raise ValueError(psid_change_refusal(pci, card_psid, psid, image_name, declared))
    return True


# --------------------------------------------------------------------------------------------
# mlxfwreset / mstfwreset: the firmware reset that loads what waits on Next Boot and the flash
# --------------------------------------------------------------------------------------------

# NVIDIA's MFT documentation, "mlxfwreset - Loading Firmware on 5th Generation Devices Tool"
# (https://docs.nvidia.com/networking/display/mftv4330/mlxfwreset+%E2%80%93+loading+firmware+on+5th+generation+devices+tool,
# https://docs.nvidia.com/networking/display/mftv4221lts/mlxfwreset+%E2%80%93+loading+firmware+on+5th+generation+devices+tool):
# "mlxfwreset -d <device> query" lists the reset levels "that will ensure the loading of the new firmware",
# "mlxfwreset -d <device> reset [-y] [--level <0,3,4>] [--type <0..2>] [--sync <0,1,2>]" runs one. Levels:
#   0  Driver, PCI link, network link will remain up ("live-Patch"): a firmware live patch; it does not load
#      the NV configuration
#   1  Only ARM side will not remain up ("Immediate reset"): BlueField's embedded CPU side
#   3  Driver restart and PCI reset: the card's firmware restarts, loading its flash image and Next Boot
#   4  Warm Reboot: the tool reboots the machine (what already failed to reset the card here)
#   5  Cold Reboot (older tools, mstflint 4.13-4.26 man pages): performed by the user
# Reset types (levels 1, 3, 4): 0 full chip reset, 1 phy-less, 2 NIC only, 3 ARM only, 4 ARM OS shut down.
# Reset sync (level 3 only): 0 tool is the owner, 1 driver is the owner, 2 (newer) synced tool flow.
# The printed layout is mstflint's small_utils/mlxfwresetlib/cmd_reg_mfrl.py query_text and cmd_reg_mcam.py
# reset_sync_query_text (Mellanox/mstflint commit b9d9e844a14ae1c85cb90c76ccd4a56a0eccd599), one row per entry,
# "{n}: {description:<62}-{Supported|Not Supported:<14}{(default)}", the sync rows say "Not supported"; the
# refusal of a level is small_utils/mstfwreset.py's "-E- Reset-level '3' is not supported in the current state
# of this device." (exit 1). Captures: tests/fixtures/nic_config/README.md. Level 3 is what loads NV values
# without a reboot: NVIDIA's nic-configuration-operator resets the firmware after setting ADVANCED_PCI_SETTINGS
# "to softly reset the device's fw and enable the hidden mstconfig parameters" instead of rebooting
# (github.com/Mellanox/nic-configuration-operator pull request #40), and the MFT page's levels 0/3/4 are those
# "that will ensure the loading of the new firmware".
FWRESET_TOOLS = ("mlxfwreset", "mstfwreset")
# the one level the role runs: it loads Next Boot and the flash's image without a reboot. Never 0 (a live
# patch loads no NV value), never 4 (a reboot: the one this run or an earlier one did already, which did not
# reset the card), never 5 (a cold reboot is the admin's, with the BMC).
FWRESET_LOAD_LEVEL = 3
_FWRESET_SECTION_RE = re.compile(r"^(?P<what>Reset[- ](?:levels|types|sync|request method))\b.*:\s*$", re.IGNORECASE)
_FWRESET_ROW_RE = re.compile(r"^(?P<num>\d+):\s+(?P<desc>.*?)\s*-(?P<support>Supported|Not Supported)\s*"
                             r"(?P<default>\(default\))?\s*$", re.IGNORECASE)
_FWRESET_SECTIONS = {"reset-levels": "levels", "reset levels": "levels", "reset-types": "types",
                     "reset types": "types", "reset-sync": "syncs", "reset sync": "syncs",
                     "reset-request method": "methods", "reset request method": "methods"}


def parse_fwreset_query(text):
    """Parse ``mlxfwreset|mstfwreset -d <dev> query``.

    Returns ``levels``, ``types``, ``syncs``, ``methods``: each ``{number: {"description", "supported",
    "default"}}`` as printed (an absent section is ``{}``). Lines outside a section (``The following query is
    relevant only for reset-type 0:``, a ``-I-`` note) are skipped. ValueError on a ``-E-`` error (its words), a
    row that is not ``N: description -Supported|-Not Supported [(default)]``, or no ``Reset-levels`` row (a
    truncated or foreign output)."""
    if not isinstance(text, str):
        raise ValueError("mlxfwreset query output must be text, got %s" % type(text).__name__)
    out = {"levels": {}, "types": {}, "syncs": {}, "methods": {}}
    errors = []
    section = None
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("-E-"):
            errors.append(line[3:].strip())
            continue
        match = _FWRESET_SECTION_RE.match(line)
        if match:
            section = _FWRESET_SECTIONS[match.group("what").lower()]
            continue
        if section is None or line.startswith(("-I-", "-W-")):
            continue
        match = _FWRESET_ROW_RE.match(line)
        if not match:
            if re.match(r"^\d+:", line):
                raise ValueError("line %d: could not read a %s row (expected 'N: <description> -Supported' or "
                                 "'-Not Supported'): %r" % (lineno, section[:-1], line))
            section = None   # a line of another kind ends the section
            continue
        out[section][int(match.group("num"))] = {
            "description": match.group("desc").strip(),
            "supported": match.group("support").lower() == "supported",
            "default": bool(match.group("default")),
        }
    if errors:
        raise ValueError("the tool printed an error: %s" % "; ".join(errors))
    if not out["levels"]:
        raise ValueError("no 'Reset-levels:' rows (the output looks truncated, or is not an mlxfwreset query)")
    return out


def fwreset_levels_text(parsed):
    """The levels as an admin reads them: ``3 Driver restart and PCI reset (supported), 4 Warm Reboot (not
    supported)``."""
    return ", ".join("%d %s (%s)" % (n, row["description"], "supported" if row["supported"] else "not supported")
                     for n, row in sorted(parsed["levels"].items()))


def pick_fwreset_level(parsed):
    """The reset level that loads the pending NV values and flash image without a reboot: FWRESET_LOAD_LEVEL
    when the query says it is supported, else None (the card needs a cold power cycle)."""
    row = parsed["levels"].get(FWRESET_LOAD_LEVEL)
    return FWRESET_LOAD_LEVEL if row and row["supported"] else None


def reset_key(to_set, pending, firmware, policy="report"):
    """What one card waits for, as a stable string (the record of the reboot asked for it compares it): the NV
    values written, or to be written, for the next boot (``PARAM=wanted``, sorted), and under policy update the
    pinned firmware the card does not run yet (``firmware <version>``: burned and waiting, or to be burned).
    Empty when nothing waits for a reset."""
    items = sorted(set("%s=%s" % (row["param"], row["wanted"]) for row in list(to_set) + list(pending)))
    fw = firmware or {}
    if policy == "update" and fw.get("state") in ("pending_reset", "to_update") and fw.get("pinned"):
        items.append("firmware %s" % fw["pinned"])
    return ", ".join(items)


def reboot_already_done(record, pci, key, boot_id):
    """True when ``record`` (the node's record of the reboots asked for pending changes, ``{"cards": {pci:
    {"pending": key, "boot_id": id}}}``) says a reboot was asked for exactly this card's ``key`` in another boot
    than ``boot_id``: the machine has booted since, and the change still waits."""
    if not key or not isinstance(record, dict):
        return False
    entry = (record.get("cards") or {}).get(pci)
    if not isinstance(entry, dict):
        return False
    return entry.get("pending") == key and bool(entry.get("boot_id")) and entry.get("boot_id") != boot_id


# --------------------------------------------------------------------------------------------
# mlnx_qos
# --------------------------------------------------------------------------------------------

_TC_RE = re.compile(r"^tc:\s*(\d+)\s+ratelimit:\s*([^,]+),\s*tsa:\s*(\w+)(?:,\s*bw:\s*(\d+)%)?\s*$")
_DSCP_ROW_RE = re.compile(r"^prio:\s*(\d)\s+dscp:\s*([\d,\s]*)$")


def _eight(values, what, lineno):
    if len(values) != 8:
        raise ValueError("line %d: %s has %d entries, not 8" % (lineno, what, len(values)))
    return values


def parse_mlnx_qos(text):
    """Parse ``mlnx_qos -i <netdev>`` output. Returns ``dcbx_mode``, ``trust`` (pcp/dscp),
    ``dscp2prio`` (dscp -> priority, None when not printed), ``default_priority``,
    ``receive_buffer_sizes`` / ``max_buffer_size``, ``cable_len``, ``pfc`` (``enabled``: 8 bools,
    ``buffer``: 8 ints or None), ``tcs`` (``tc``, ``ratelimit``, ``tsa``, ``bw``, ``priorities``).
    ValueError names the line it could not read or the part that is missing."""
    if not isinstance(text, str):
        raise ValueError("mlnx_qos output must be text, got %s" % type(text).__name__)
    out = {"dcbx_mode": None, "trust": None, "dscp2prio": None, "default_priority": None,
           "receive_buffer_sizes": None, "max_buffer_size": None, "cable_len": None,
           "pfc": None, "tcs": []}
    section = None
    current_tc = None
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        stripped = raw_line.strip()
        if not stripped:
            continue
        if stripped.startswith("DCBX mode:"):
            out["dcbx_mode"] = stripped.split(":", 1)[1].strip()
            section = None
        elif stripped.startswith("Priority trust state:"):
            out["trust"] = stripped.split(":", 1)[1].strip() or None
            section = None
        elif stripped.startswith("dscp2prio mapping:"):
            out["dscp2prio"] = {}
            section = "dscp"
        elif stripped.startswith("default priority:"):
            value = stripped.split(":", 1)[1].strip()
            out["default_priority"] = int(value) if value.isdigit() else None
            section = None
        elif stripped.startswith("Receive buffer size (bytes):"):
            items = [i.strip() for i in stripped.split(":", 1)[1].split(",") if i.strip()]
            sizes = []
            for item in items:
                if item.startswith("max_buffer_size="):
                    out["max_buffer_size"] = int(item.split("=", 1)[1])
                elif item.isdigit():
                    sizes.append(int(item))
                else:
                    raise ValueError("line %d: could not read receive buffer size %r" % (lineno, item))
            out["receive_buffer_sizes"] = _eight(sizes, "Receive buffer size", lineno)
            section = None
        elif stripped.startswith("Cable len:"):
            out["cable_len"] = int(stripped.split(":", 1)[1].strip())
            section = None
        elif stripped.startswith("PFC configuration:"):
            out["pfc"] = {"enabled": None, "buffer": None}
            section = "pfc"
        elif section == "dscp" and _DSCP_ROW_RE.match(stripped):
            match = _DSCP_ROW_RE.match(stripped)
            prio = int(match.group(1))
            for code in [c.strip() for c in match.group(2).split(",") if c.strip()]:
                out["dscp2prio"][int(code)] = prio
        elif section == "pfc" and stripped.split()[0] in ("priority", "enabled", "buffer"):
            words = stripped.split()
            if words[0] == "priority":
                if words[1:] != [str(i) for i in range(8)]:
                    raise ValueError("line %d: PFC priority header is not 0..7: %r" % (lineno, stripped))
            elif words[0] == "enabled":
                flags = _eight(words[1:], "PFC enabled", lineno)
                if any(f not in ("0", "1") for f in flags):
                    raise ValueError("line %d: PFC enabled flags must be 0/1: %r" % (lineno, stripped))
                out["pfc"]["enabled"] = [f == "1" for f in flags]
            else:
                out["pfc"]["buffer"] = [int(b) for b in _eight(words[1:], "PFC buffer", lineno)]
        elif _TC_RE.match(stripped):
            match = _TC_RE.match(stripped)
            current_tc = {"tc": int(match.group(1)), "ratelimit": match.group(2).strip(),
                          "tsa": match.group(3), "bw": int(match.group(4)) if match.group(4) else None,
                          "priorities": []}
            out["tcs"].append(current_tc)
            section = "tc"
        elif stripped.startswith("priority:") and section == "tc" and current_tc is not None:
            value = stripped.split(":", 1)[1].strip()
            if not value.isdigit() or int(value) > 7:
                raise ValueError("line %d: could not read the priority of tc %d: %r" % (lineno, current_tc["tc"], stripped))
            current_tc["priorities"].append(int(value))
        elif stripped.startswith("****** WARNING"):
            continue
        else:
            raise ValueError("line %d: could not read %r" % (lineno, stripped))
    if out["trust"] is None:
        raise ValueError("no 'Priority trust state:' line: not mlnx_qos -i output, or trust is not supported here")
    if out["pfc"] is None or out["pfc"]["enabled"] is None:
        raise ValueError("no PFC configuration table (priority/enabled rows): the output looks truncated")
    if out["trust"] == "dscp" and out["dscp2prio"] is not None and not out["dscp2prio"]:
        raise ValueError("dscp2prio mapping: header without rows: the output looks truncated")
    return out
