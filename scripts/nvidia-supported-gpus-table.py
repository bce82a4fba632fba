#!/usr/bin/env python3
"""Derive the toolkit's NVIDIA GPU table from the driver's own ``supported-gpus.json``.

NVIDIA ships ``supported-gpus.json`` inside every Linux driver package (the
``.run`` installer, and the Ubuntu ``nvidia-graphics-drivers-<branch>`` source
package that unpacks it). Its shape::

    {"chips": [{"devid": "0x2330", "subdevid": "0x16C1", "subvendorid": "0x10DE",
                "name": "NVIDIA H100 80GB HBM3",
                "features": ["kernelopen", ...], "legacybranch": "470.xx"}, ...]}

``kernelopen`` marks the ids the open kernel modules support; ``legacybranch``
names the last driver branch that supports a chip dropped from the current one.
A device id may appear several times (one entry per subsystem id); the table
keeps one row per device id and refuses input where the rows of one id disagree.

The committed table ``module_utils/gpudirect_nvidia_gpus.py`` was made from the
``supported-gpus.json`` of the NVIDIA 525 driver as packaged by Ubuntu 20.04
(nvidia-graphics-drivers-525, the copy published on 2023-03-22 by
https://github.com/alex-tu-cc/get-nvidia-supported-gpus-json, gh-pages branch,
``focal-nvidia-driver-525-supported-gpus.json``; the copy does not record the
patch release, 525.85 to 525.89 at that date). ``--earlier`` copies of the 510
and 515 packages from the same place give each id the first branch whose list
names it (``first``); ids already in the oldest copy get none.

Usage::

    scripts/nvidia-supported-gpus-table.py supported-gpus.json --driver 525 \\
        --source "where the file came from" [--earlier 515=old.json ...] \\
        [-o module_utils/gpudirect_nvidia_gpus.py]

The table is written compactly but stays readable: per group of (open, legacy, first),
items ``<ids>=<name>`` (ids sharing a name together), a few per line; the module builds the
same ``GPUS`` dict from them on import. Only the derived table is committed, never the
vendor file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

_DEVID = re.compile(r"^0x([0-9a-fA-F]{4})$")
_BRANCH = re.compile(r"^(\d+(?:\.\d+)?)\.xx$")


class TableError(ValueError):
    """The input is not a supported-gpus.json this script understands."""


def _chips(data, label):
    if not isinstance(data, dict) or not isinstance(data.get("chips"), list):
        raise TableError("%s: not a supported-gpus.json (no top-level \"chips\" list)" % label)
    return data["chips"]


def _devid(chip, label):
    match = _DEVID.match(str(chip.get("devid", "")))
    if not match:
        raise TableError("%s: chip %r has no 4-digit hex devid" % (label, chip))
    return "0x" + match.group(1).lower()


def _legacy(chip, label):
    text = chip.get("legacybranch")
    if text in (None, ""):
        return ""
    match = _BRANCH.match(str(text))
    if not match:
        raise TableError("%s: chip %s has legacybranch %r, not of the form 470.xx" % (label, chip.get("devid"), text))
    return match.group(1)


def derive(data, earlier=None, label="input", branch=""):
    """Rows ``{devid: (name, kernelopen, legacy, first)}`` of one supported-gpus.json.

    :param data: the parsed JSON.
    :param earlier: ``[(branch, parsed JSON), ...]`` older lists, for ``first``.
    :param branch: the input's own branch, ``first`` of ids no earlier list names.
    :returns: dict, device ids as ``"0x2330"``; ``kernelopen`` bool; ``legacy``
        ``"470"`` or ``""``; ``first`` the first earlier branch whose list names
        the id (``branch`` when none does), ``""`` when the oldest already does.
    """
    rows = {}
    for chip in _chips(data, label):
        devid = _devid(chip, label)
        name = str(chip.get("name") or "").strip()
        features = chip.get("features") or []
        row = (name, "kernelopen" in features, _legacy(chip, label))
        if devid in rows:
            old = rows[devid]
            if old[1:] != row[1:]:
                raise TableError("%s: entries of %s disagree (%r / %r)" % (label, devid, old, row))
            continue
        rows[devid] = row
    listed = []
    for older_branch, older in sorted(earlier or [], key=lambda item: int(item[0])):
        listed.append((older_branch, {_devid(c, older_branch) for c in _chips(older, older_branch)}))
    out = {}
    for devid, (name, kopen, legacy) in rows.items():
        first = ""
        if listed and devid not in listed[0][1]:
            first = next((b for b, ids in listed[1:] if devid in ids), "")
            first = first or branch
        out[devid] = (name, kopen, legacy, first)
    return out


def _wrap(text, width=90):
    words, parts, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + len(word) + 1 > width:
            parts.append(line + " ")
            line = word
        else:
            line = (line + " " + word) if line else word
    return parts + [line]


def _packed(rows):
    """``{(open, legacy, first): ["2330=NVIDIA H100 80GB HBM3", "20b0,20b1=...", ...]}``: ids sharing a
    name and a group on one item, in id order."""
    groups = {}
    for devid in sorted(rows):
        name, kopen, legacy, first = rows[devid]
        if "=" in name or ";" in name:
            raise TableError("GPU name %r of %s holds '=' or ';', which the packed table uses" % (name, devid))
        names = groups.setdefault((kopen, legacy, first), {})
        names.setdefault(name, []).append(devid[2:])
    return {key: ["%s=%s" % (",".join(ids), name) for name, ids in names.items()] for key, names in groups.items()}


def _lines(items, width=108):
    """Items joined by "; " into string literals of at most ``width`` characters, never splitting an item."""
    out, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > width:
            out.append(line)
            line = ""
        line += item + "; "
    return out + ([line] if line else [])


def render(rows, driver, source, command):
    """The Python text of the table module: per group of (open, legacy, first), items ``ids=name``."""
    lines = [
        '"""NVIDIA GPU table derived from the driver\'s supported-gpus.json. GENERATED: do not edit.',
        "",
        "Source file: supported-gpus.json of NVIDIA driver %s" % driver,
        *("  " + part.strip() for part in _wrap("(%s)" % source)),
        "Command: %s" % command,
        "",
        "GPUS maps a PCI device id (vendor 0x10de) to (name, open, legacy, first):",
        "  open   -- the list marks the id \"kernelopen\": the open kernel modules support it",
        "  legacy -- last driver branch supporting the id (\"470\"), \"\" when the current one does",
        "  first  -- first branch whose list names the id (\"525\"), \"\" when the oldest list",
        "            compared already did",
        "",
        "It is built from _PACKED: for each (open, legacy, first), items \"<ids>=<name>\" separated by",
        "\"; \", <ids> the device ids (4 hex digits, comma-separated) sharing that name. To find an id,",
        "search for its 4 digits (e.g. 2330).",
        '"""',
        "",
        "DRIVER = %r" % str(driver),
        "SOURCE = (",
        *("    %r" % part for part in _wrap(source)),
        ")",
        "",
        "_PACKED = {",
    ]
    packed = _packed(rows)
    for key in sorted(packed, key=lambda k: (not k[0], k[2], k[1])):
        lines.append("    (%s, %r, %r): (" % key)
        lines.extend("        %r" % part for part in _lines(packed[key]))
        lines.append("    ),")
    lines += [
        "}",
        "",
        "GPUS = {}",
        "for _key, _text in _PACKED.items():",
        "    for _item in _text.split(\"; \"):",
        "        if _item:",
        "            _ids, _name = _item.split(\"=\", 1)",
        "            for _id in _ids.split(\",\"):",
        "                GPUS[\"0x\" + _id] = (_name,) + _key",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("json", help="supported-gpus.json of one driver")
    parser.add_argument("--driver", required=True, help="driver version (or branch) the file came from")
    parser.add_argument("--source", required=True, help="where the file came from (package, URL)")
    parser.add_argument("--earlier", action="append", default=[], metavar="BRANCH=FILE",
                        help="an older branch's supported-gpus.json, to record the first branch listing each id")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        with open(args.json, encoding="utf-8") as handle:
            data = json.load(handle)
        earlier = []
        for item in args.earlier:
            branch, _, path = item.partition("=")
            if not re.fullmatch(r"\d{3}", branch) or not path:
                raise TableError("--earlier wants BRANCH=FILE with a three-digit branch, got %r" % item)
            with open(path, encoding="utf-8") as handle:
                earlier.append((branch, json.load(handle)))
        rows = derive(data, earlier, args.json, args.driver.split(".")[0])
    except (OSError, ValueError) as exc:
        print("nvidia-supported-gpus-table: %s" % exc, file=sys.stderr)
        return 1
    command = "scripts/nvidia-supported-gpus-table.py supported-gpus.json --driver %s" % args.driver
    command += "".join(" --earlier %s=..." % item.partition("=")[0] for item in args.earlier)
    text = render(rows, args.driver, args.source, command)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
