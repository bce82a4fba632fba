#!/usr/bin/env python3
"""Derive the toolkit's NVIDIA GPU table from NVIDIA's own per-device lists.

Two kinds of input, each named with its origin in a manifest (``sources.json``;
the checked-in copy is tests/fixtures/nvidia_gpus/, see its README.md):

``supported-gpus``
    ``supported-gpus.json`` as shipped inside a Linux driver package (the ``.run``
    installer, Ubuntu's ``nvidia-graphics-drivers-<branch>``)::

        {"chips": [{"devid": "0x2330", "subdevid": "0x16C1", "subvendorid": "0x10DE",
                    "name": "NVIDIA H100 80GB HBM3",
                    "features": ["kernelopen", ...], "legacybranch": "470.xx"}, ...]}

    ``kernelopen`` marks the ids the open kernel modules support; ``legacybranch``
    names the last branch supporting a chip dropped from the current one. Every id
    listed there is supported by the proprietary modules of that driver.

``open-readme``
    The "Compatible GPUs" section of NVIDIA/open-gpu-kernel-modules README.md at a
    release tag: a Markdown table ``| Product Name | PCI ID |``, the PCI ID being the
    device id, optionally followed by the subsystem vendor and device ids. Every id
    listed is supported by the open kernel modules of that release.

Merge, per PCI device id (one row per id; the subsystem ids are not kept):

- ``name``: from the newest input (highest branch) listing the id.
- ``flavors``: ``open`` when the open modules support the id (an open-readme lists it,
  or a supported-gpus.json marks it ``kernelopen``) and NVIDIA supports only them on it
  (Blackwell and later, Grace Hopper: see OPEN_ONLY_*); ``either`` when the open
  modules support it otherwise; ``proprietary`` when only a supported-gpus.json lists it,
  without ``kernelopen``.
- ``legacy``: the ``legacybranch`` of the newest supported-gpus.json listing the id.
- ``first``: the lowest branch whose inputs list the id; ``""`` when the oldest branch
  of the manifest already does.

Usage::

    scripts/nvidia-supported-gpus-table.py --manifest tests/fixtures/nvidia_gpus/sources.json \\
        -o module_utils/gpudirect_nvidia_gpus.py

Inputs may be gzip-compressed (``.gz``). The table is written compactly but stays
readable: per group of (flavors, legacy, first), items ``<ids>=<name>`` (ids sharing a
name together), a few per line; the module builds the same ``GPUS`` dict on import.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys

_DEVID = re.compile(r"^0x([0-9a-fA-F]{4})$")
_BRANCH = re.compile(r"^(\d+(?:\.\d+)?)\.xx$")
_README_ROW = re.compile(r"^\|\s*(?P<name>[^|]*?)\s*\|\s*(?P<id>[0-9A-Fa-f]{4})(?:\s+[0-9A-Fa-f]{4}\s+[0-9A-Fa-f]{4})?\s*\|\s*$")
_README_SKIP = re.compile(r"^\|\s*(Product Name\s*\|\s*PCI ID|-+\s*\|\s*-+)\s*\|\s*$")

# NVIDIA supports only the open kernel modules on Grace Hopper and Blackwell ("For
# cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the
# open-source GPU kernel modules. The proprietary drivers are unsupported on these
# platforms": NVIDIA Technical Blog, "NVIDIA Transitions Fully Towards Open-Source GPU
# Kernel Modules", 2024-07-17). The lists above do not say which ids those are:
# - Blackwell and later: device ids from 0x2900, the lowest Blackwell range in
#   NVIDIA/gpu-admin-tools gpu/devid_chips.py (tag v2025.10.20, commit 82422cc1811c:
#   GB100 0x2900-0x297F, GB102, GB110 0x3180-0x31FF, GB112, GB202-GB207 0x2B80-0x2FFF);
#   every earlier architecture's ids are lower (Ada AD10x ends below 0x2900).
# - Grace Hopper: the open-readme names those ids "NVIDIA GH200 ...".
OPEN_ONLY_FROM_ID = 0x2900
OPEN_ONLY_NAME = re.compile(r"\bGH200\b")
KINDS = ("supported-gpus", "open-readme")
FLAVOR_ORDER = ("open", "either", "proprietary")


class TableError(ValueError):
    """An input this script does not understand, or a manifest that does not say where it came from."""


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


def read_supported_gpus(data, label="supported-gpus.json"):
    """``{devid: (name, kernelopen, legacy)}`` of one parsed supported-gpus.json.

    A device id may appear once per subsystem id; its rows must agree on
    ``kernelopen`` and ``legacybranch`` (the first row's name is kept).
    """
    rows = {}
    for chip in _chips(data, label):
        devid = _devid(chip, label)
        row = (str(chip.get("name") or "").strip(), "kernelopen" in (chip.get("features") or []), _legacy(chip, label))
        if devid in rows:
            if rows[devid][1:] != row[1:]:
                raise TableError("%s: entries of %s disagree (%r / %r)" % (label, devid, rows[devid], row))
            continue
        rows[devid] = row
    return rows


def read_open_readme(text, label="README.md"):
    """``{devid: name}`` of the "Compatible GPUs" table of an open-gpu-kernel-modules README.

    The first row of an id gives its name. A table row that is neither the header, the
    separator nor ``| name | ID [SUBVENDOR SUBDEVICE] |`` is an error, and so is a text
    with no row at all.
    """
    if "## Compatible GPUs" not in text:
        raise TableError("%s: no \"## Compatible GPUs\" section" % label)
    names = {}
    for number, line in enumerate(text.split("## Compatible GPUs", 1)[1].splitlines(), 1):
        if not line.startswith("|") or _README_SKIP.match(line):
            continue
        match = _README_ROW.match(line)
        if not match or not match.group("name"):
            raise TableError("%s: line %d of the Compatible GPUs section is not a table row: %r" % (label, number, line))
        names.setdefault("0x" + match.group("id").lower(), match.group("name"))
    if not names:
        raise TableError("%s: the Compatible GPUs section lists no GPU" % label)
    return names


def open_only(devid, name):
    """Whether NVIDIA supports only the open kernel modules on this id (see OPEN_ONLY_*)."""
    return int(devid, 16) >= OPEN_ONLY_FROM_ID or bool(OPEN_ONLY_NAME.search(name))


def merge(supported, readmes):
    """Rows ``{devid: (name, flavors, legacy, first)}`` of all inputs.

    :param supported: ``[(branch, read_supported_gpus(...)), ...]``.
    :param readmes: ``[(branch, read_open_readme(...)), ...]``.
    """
    listed = {}
    for branch, rows in supported:
        listed.setdefault(int(branch), set()).update(rows)
    for branch, names in readmes:
        listed.setdefault(int(branch), set()).update(names)
    if not listed:
        raise TableError("no input")
    oldest = min(listed)
    by_age = sorted(supported, key=lambda item: int(item[0]))
    out = {}
    for devid in sorted(set().union(*listed.values())):
        name = ""
        for _, names in sorted(readmes, key=lambda item: int(item[0])):
            name = names.get(devid, name)
        json_rows = [rows[devid] for _, rows in by_age if devid in rows]
        newest_json = json_rows[-1] if json_rows else None
        if not name and newest_json:
            name = newest_json[0]
        kopen = any(devid in names for _, names in readmes) or any(row[1] for row in json_rows)
        if kopen:
            flavors = "open" if open_only(devid, name) else "either"
            legacy = ""
        else:
            flavors, legacy = "proprietary", newest_json[2]
        first = min(branch for branch, ids in listed.items() if devid in ids)
        if "=" in name or ";" in name or not name:
            raise TableError("GPU name %r of %s is empty or holds '=' or ';', which the packed table uses"
                             % (name, devid))
        out[devid] = (name, flavors, legacy, "" if first == oldest else str(first))
    return out


def _open(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_manifest(path):
    """Read the manifest and every input it names.

    :returns: ``(sources, supported, readmes)``: ``sources`` the manifest entries (each
        with ``file``, ``kind``, ``branch``, ``repository``, ``ref``, ``path``, ``commit``,
        ``date``), then the parsed inputs as ``merge`` takes them.
    """
    with open(path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    entries = manifest.get("inputs") if isinstance(manifest, dict) else None
    if not entries:
        raise TableError("%s: no \"inputs\" list" % path)
    base = os.path.dirname(os.path.abspath(path))
    supported, readmes = [], []
    for entry in entries:
        missing = [key for key in ("file", "kind", "branch", "repository", "ref", "path", "commit", "date")
                   if not str(entry.get(key) or "").strip()]
        if missing:
            raise TableError("%s: input %r does not say %s" % (path, entry.get("file"), ", ".join(missing)))
        if entry["kind"] not in KINDS:
            raise TableError("%s: input %s has kind %r, not one of %s" % (path, entry["file"], entry["kind"], KINDS))
        if not re.fullmatch(r"\d{3}", str(entry["branch"])) or not re.fullmatch(r"[0-9a-f]{40}", entry["commit"]):
            raise TableError("%s: input %s wants a three-digit branch and a 40-digit commit" % (path, entry["file"]))
        with _open(os.path.join(base, entry["file"])) as handle:
            if entry["kind"] == "supported-gpus":
                supported.append((entry["branch"], read_supported_gpus(json.load(handle), entry["file"])))
            else:
                readmes.append((entry["branch"], read_open_readme(handle.read(), entry["file"])))
    return entries, supported, readmes


def describe_source(entry):
    """One line naming an input: what, repository, ref, path, commit, date."""
    what = "supported-gpus.json" if entry["kind"] == "supported-gpus" else "open modules' Compatible GPUs"
    return "%s %s: %s %s %s, commit %s (%s)" % (entry["branch"], what, entry["repository"], entry["ref"],
                                               entry["path"], entry["commit"], entry["date"])


def newest_release(entries):
    """The newest release named by the inputs: the highest open-readme tag (``595.45.04``), else the highest branch."""
    tags = [e["ref"].split()[-1] for e in entries if e["kind"] == "open-readme" and e["ref"].startswith("tag ")]
    if tags:
        return max(tags, key=lambda tag: [int(part) for part in re.findall(r"\d+", tag)])
    return str(max(int(e["branch"]) for e in entries))


def _packed(rows):
    """``{(flavors, legacy, first): ["2330=NVIDIA H100 80GB HBM3", "20b0,20b1=...", ...]}``: ids sharing a
    name and a group on one item, in id order."""
    groups = {}
    for devid in sorted(rows):
        name, flavors, legacy, first = rows[devid]
        if flavors not in FLAVOR_ORDER:
            raise TableError("%s: flavors %r, not one of %s" % (devid, flavors, FLAVOR_ORDER))
        if "=" in name or ";" in name:
            raise TableError("GPU name %r of %s holds '=' or ';', which the packed table uses" % (name, devid))
        groups.setdefault((flavors, legacy, first), {}).setdefault(name, []).append(devid[2:])
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


def _group_order(key):
    flavors, legacy, first = key
    return (FLAVOR_ORDER.index(flavors), int(first or 0), legacy)


def render(rows, driver, sources, command):
    """The Python text of the table module.

    :param driver: the newest release the inputs name (``DRIVER``).
    :param sources: one line per input (``describe_source``).
    """
    lines = [
        '"""NVIDIA GPU table derived from NVIDIA\'s per-device lists. GENERATED: do not edit.',
        "",
        "Command: %s" % command,
        "Inputs (copies and their README under tests/fixtures/nvidia_gpus/):",
        *("  - " + source for source in sources),
        "",
        "GPUS maps a PCI device id (vendor 0x10de) to (name, flavors, legacy, first):",
        "  flavors -- kernel modules NVIDIA supports on the id: \"open\" (only the open modules:",
        "             Blackwell and later, Grace Hopper), \"either\", \"proprietary\" (not the open ones)",
        "  legacy  -- last driver branch supporting the id (\"470\"), \"\" when current branches do",
        "  first   -- first branch whose list names the id (\"570\"), \"\" when the oldest input",
        "             already did",
        "",
        "It is built from _PACKED: for each (flavors, legacy, first), items \"<ids>=<name>\" separated",
        "by \"; \", <ids> the device ids (4 hex digits, comma-separated) sharing that name. To find an",
        "id, search for its 4 digits (e.g. 2330).",
        '"""',
        "",
        "DRIVER = %r" % str(driver),
        "SOURCES = (",
        *("    %r," % source for source in sources),
        ")",
        "",
        "_PACKED = {",
    ]
    packed = _packed(rows)
    for key in sorted(packed, key=_group_order):
        lines.append("    (%r, %r, %r): (" % key)
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


def build(manifest):
    """The table module's text for a manifest path (relative to the repository root in the header)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    entries, supported, readmes = load_manifest(manifest)
    rows = merge(supported, readmes)
    shown = os.path.relpath(os.path.abspath(manifest), root)
    command = "scripts/nvidia-supported-gpus-table.py --manifest %s" % shown
    return render(rows, newest_release(entries), [describe_source(e) for e in entries], command)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--manifest", required=True,
                        help="sources.json naming each input (file, kind, branch, repository, ref, path, commit, date)")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        text = build(args.manifest)
    except (OSError, ValueError) as exc:
        print("nvidia-supported-gpus-table: %s" % exc, file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
