#!/usr/bin/env python3
"""Derive the toolkit's NVIDIA GPU table from NVIDIA's own per-device lists and pci.ids.

Inputs, each named with its origin in a manifest (``sources.json``; the checked-in
copies are under tests/fixtures/nvidia_gpus/, see its README.md):

``supported-gpus``
    ``supported-gpus.json`` as shipped inside a Linux driver package (the ``.run``
    installer, Ubuntu's ``nvidia-graphics-drivers-<branch>``, NVIDIA's
    ``nvidia-driver-assistant``)::

        {"chips": [{"devid": "0x2330", "subdevid": "0x16C1", "subvendorid": "0x10DE",
                    "name": "NVIDIA H100 80GB HBM3",
                    "features": ["kernelopen", "gsp_proprietary_supported", ...],
                    "legacybranch": "470.xx"}, ...]}

    ``kernelopen`` marks the ids the open kernel modules support; from the 590 lists on,
    ``gsp_proprietary_supported`` marks those the proprietary modules support too (an id
    with ``kernelopen`` alone needs the open ones); ``legacybranch`` names the last branch
    supporting a chip dropped from the current one. Every id listed there is supported by
    that driver or by its legacy branch.

``supported-gpus-extract``
    The same facts, one line per device id, as ``--extract supported-gpus`` writes them
    from a supported-gpus.json: ``devid<TAB>legacy<TAB>flags<TAB>name[<TAB>name...]``
    (``legacy`` ``-`` for none, ``flags`` the comma-separated kernelopen /
    gsp_proprietary_supported the id's rows carry, ``-`` for none; the first name is that
    of the id's first row).

``open-readme``
    The "Compatible GPUs" section of NVIDIA/open-gpu-kernel-modules README.md at a
    release tag: a Markdown table ``| Product Name | PCI ID |``, the PCI ID being the
    device id, optionally followed by the subsystem vendor and device ids. Every id
    listed is supported by the open kernel modules of that release.

``pci-ids-extract``
    The device lines of vendor 10de of the PCI ID repository's pci.ids, as ``--extract
    pci-ids`` writes them: ``devid<TAB>text`` (``2330<TAB>GH100 [H100 SXM5 80GB]``). The
    text starts with the chip (``GH100``, ``GA102GL``, ``AD104M`` ...), which gives each id
    its chip and architecture.

``gpu-admin-tools-extract``
    NVIDIA/gpu-admin-tools' per-id product names (gpu/devid_names.py) and Blackwell chip
    ranges (gpu/devid_chips.py), as ``--extract gpu-admin-tools`` writes them:
    ``name<TAB>devid<TAB>product`` and ``chip<TAB>first<TAB>last<TAB>architecture<TAB>chip``.

Merge, per PCI device id (one row per id; the subsystem ids are not kept):

- ``name``: from the newest open-readme listing the id, else the newest supported-gpus.
- ``flavors``: ``open`` when the open modules support the id and NVIDIA supports only
  them on it (Blackwell and later, Grace Hopper: see OPEN_ONLY_*; where a list carries
  ``gsp_proprietary_supported`` it must agree), ``either`` when the open modules support
  it otherwise, ``proprietary`` when only a supported-gpus list names it. The open modules
  support an id when an open-readme lists it or a supported-gpus row without a
  ``legacybranch`` marks it ``kernelopen``: NVIDIA's 590 list marks every row of the
  580 legacy branch (Maxwell, Pascal, Volta) ``kernelopen`` and nothing else, while the
  open modules of 580 (their README's table) list none of them and need Turing or later.
- ``legacy``: the ``legacybranch`` of the newest supported-gpus listing the id.
- ``first``: the lowest branch whose inputs list the id as current (an open-readme, or a
  supported-gpus row without ``legacybranch``); ``""`` when the oldest branch of the
  manifest already does, or when the lists name the id only as a legacy-branch chip.

Then, by chip (pci.ids, checked against NVIDIA's gpu-admin-tools): every id of a chip
that NVIDIA's lists support (at least one of the chip's ids is listed) is given the row
the chip's listed ids share (flavors, legacy, and the lowest first branch), its
pci.ids / gpu-admin-tools name and the note that NVIDIA's lists do not name it
(``BY_CHIP``). Grace Hopper ids (named GH200) are a group of their own within GH100.
A chip whose listed ids disagree is not extended. Functions of a GPU chip that are not
the GPU (HD audio, USB, UCSI, NVSwitch, PCIe host or bridge) are not GPUs.

Usage::

    scripts/nvidia-supported-gpus-table.py --manifest tests/fixtures/nvidia_gpus/sources.json \\
        -o module_utils/gpudirect_nvidia_gpus.py
    scripts/nvidia-supported-gpus-table.py --manifest tests/fixtures/nvidia_gpus/sources.json --check
    scripts/nvidia-supported-gpus-table.py --extract supported-gpus supported-gpus.json > x.tsv
    scripts/nvidia-supported-gpus-table.py --extract pci-ids pci.ids > y.tsv
    scripts/nvidia-supported-gpus-table.py --extract gpu-admin-tools gpu-admin-tools/ > z.tsv

Inputs may be gzip-compressed (``.gz``). The table is written compactly but stays
readable: per group of (flavors, legacy, first), items ``<ids>=<name>`` (ids sharing a
name together), a few per line; the module builds the same ``GPUS`` dict on import.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import os
import re
import sys

_DEVID = re.compile(r"^0x([0-9a-fA-F]{4})$")
_HEX4 = re.compile(r"^[0-9a-f]{4}$")
_BRANCH = re.compile(r"^(\d+(?:\.\d+)?)\.xx$")
_README_ROW = re.compile(r"^\|\s*(?P<name>[^|]*?)\s*\|\s*(?P<id>[0-9A-Fa-f]{4})(?:\s+[0-9A-Fa-f]{4}\s+[0-9A-Fa-f]{4})?\s*\|\s*$")
_README_SKIP = re.compile(r"^\|\s*(Product Name\s*\|\s*PCI ID|-+\s*\|\s*-+)\s*\|\s*$")

# NVIDIA supports only the open kernel modules on Grace Hopper and Blackwell ("For
# cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the
# open-source GPU kernel modules. The proprietary drivers are unsupported on these
# platforms": NVIDIA Technical Blog, "NVIDIA Transitions Fully Towards Open-Source GPU
# Kernel Modules", 2024-07-17). Which ids those are:
# - Blackwell and later: device ids from 0x2900, the lowest Blackwell range in
#   NVIDIA/gpu-admin-tools gpu/devid_chips.py (tag v2025.10.20, commit 82422cc1811c:
#   GB100 0x2900-0x297F, GB102, GB110 0x3180-0x31FF, GB112, GB202-GB207 0x2B80-0x2FFF);
#   every earlier architecture's ids are lower (Ada AD10x ends below 0x2900).
# - Grace Hopper: the lists name those ids "NVIDIA GH200 ...".
# NVIDIA's 590 supported-gpus.json says the same per id: of its current ids, exactly those
# lack gsp_proprietary_supported; merge() checks every list that carries the flag.
OPEN_ONLY_FROM_ID = 0x2900
OPEN_ONLY_NAME = re.compile(r"\bGH200\b")
KINDS = ("supported-gpus", "supported-gpus-extract", "open-readme", "pci-ids-extract", "gpu-admin-tools-extract")
BRANCH_KINDS = ("supported-gpus", "supported-gpus-extract", "open-readme")
FLAVOR_ORDER = ("open", "either", "proprietary")
FLAGS = ("kernelopen", "gsp_proprietary_supported")

# Chip prefix -> architecture. NVIDIA/open-gpu-kernel-modules 595.45.04 files its chips'
# published headers by architecture (src/common/inc/swref/published/kepler/gk104,
# maxwell/gm107, pascal/gp100, volta/gv100, turing/tu102, ampere/ga100, ada/ad102,
# hopper/gh100, blackwell/gb100 ... gb20c; nv_arch.h: GPU_ARCHITECTURE_MAXWELL ...
# GPU_ARCHITECTURE_BLACKWELL_GB2XX with each chip's implementation id), and
# src/nvidia/generated/rmconfig.h lists the obsolete GF100-GF119 under FERMI.
ARCHITECTURE_BY_PREFIX = {"GF": "Fermi", "GK": "Kepler", "GM": "Maxwell", "GP": "Pascal", "GV": "Volta",
                          "TU": "Turing", "GA": "Ampere", "AD": "Ada", "GH": "Hopper", "GB": "Blackwell"}
# A pci.ids device text naming a chip: prefix, then 3 digits (GH100) or 2 digits and a
# letter (the integrated GB10B, GB20B), then pci.ids' variant letters (GL: professional,
# M: mobile, B: a later stepping), all of one chip.
_PCI_CHIP = re.compile(r"^(%s)(\d{3}|\d{2}[A-Z])(?:[A-Z]*)(?=[\s/\[(]|$)" % "|".join(ARCHITECTURE_BY_PREFIX))
# Functions of a GPU chip that are not its GPU.
_NOT_A_GPU = re.compile(r"\b(Audio|USB|UCSI|NVSwitch|PCIe host|PCI bridge|Bridge)\b", re.I)
_BRACKET = re.compile(r"\[([^\]]+)\]")
BY_CHIP_NOTE = "not in NVIDIA's lists"


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


def _supported_rows(data, label):
    """``{devid: (names, flags, legacy)}`` of a parsed supported-gpus.json, rows of an id merged."""
    rows = {}
    for chip in _chips(data, label):
        devid = _devid(chip, label)
        flags = tuple(flag for flag in FLAGS if flag in (chip.get("features") or []))
        name = str(chip.get("name") or "").strip()
        legacy = _legacy(chip, label)
        if devid in rows:
            names, known_flags, known_legacy = rows[devid]
            if (known_flags, known_legacy) != (flags, legacy):
                raise TableError("%s: entries of %s disagree (%r / %r)"
                                 % (label, devid, (names[0], known_flags, known_legacy), (name, flags, legacy)))
            if name and name not in names:
                names.append(name)
            continue
        rows[devid] = ([name], flags, legacy)
    return rows


def _row(names, flags, legacy):
    return (names[0] if names else "", "kernelopen" in flags, legacy, "gsp_proprietary_supported" in flags)


def read_supported_gpus(data, label="supported-gpus.json"):
    """``{devid: (name, kernelopen, legacy, gsp_proprietary_supported)}`` of one parsed supported-gpus.json.

    A device id may appear once per subsystem id; its rows must agree on
    ``kernelopen``, ``gsp_proprietary_supported`` and ``legacybranch`` (the first row's
    name is kept).
    """
    return {devid: _row(*value) for devid, value in _supported_rows(data, label).items()}


def extract_supported_gpus(data, label="supported-gpus.json"):
    """The ``supported-gpus-extract`` lines of one parsed supported-gpus.json."""
    out = []
    for devid, (names, flags, legacy) in sorted(_supported_rows(data, label).items()):
        out.append("\t".join([devid[2:], legacy or "-", ",".join(flags) or "-"] + names))
    return out


def read_supported_gpus_extract(text, label="supported-gpus extract"):
    """Like ``read_supported_gpus``, from the lines ``extract_supported_gpus`` writes."""
    rows = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if (len(parts) < 4 or not _HEX4.match(parts[0]) or not re.fullmatch(r"-|\d+(\.\d+)?", parts[1])
                or any(flag not in FLAGS for flag in parts[2].split(",") if parts[2] != "-")
                or not all(part.strip() for part in parts[3:])):
            raise TableError("%s: line %d is not devid<TAB>legacy<TAB>flags<TAB>name...: %r" % (label, number, line))
        devid = "0x" + parts[0]
        if devid in rows:
            raise TableError("%s: line %d repeats %s" % (label, number, devid))
        flags = () if parts[2] == "-" else tuple(parts[2].split(","))
        rows[devid] = _row(parts[3:], flags, "" if parts[1] == "-" else parts[1])
    if not rows:
        raise TableError("%s: no device id" % label)
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


def extract_pci_ids(text, vendor="10de"):
    """The ``pci-ids-extract`` lines: ``devid<TAB>text`` of each device of ``vendor`` in a pci.ids text,
    after its ``Version`` and ``Date`` header lines as comments."""
    out = [line.strip() for line in text.splitlines()[:40] if re.match(r"^#\s*(Version|Date):", line)]
    inside = False
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]{4}\s", line):
            inside = line.startswith(vendor + " ")
        elif re.match(r"^(C|#|$)", line):
            inside = inside and not line.startswith("C ")
        elif inside and re.match(r"^\t[0-9a-f]{4}\s", line):
            out.append("%s\t%s" % (line[1:5], line[5:].strip()))
    return out


def read_pci_ids_extract(text, label="pci.ids extract"):
    """``{devid: text}`` of the lines ``extract_pci_ids`` writes."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not _HEX4.match(parts[0]) or not parts[1].strip():
            raise TableError("%s: line %d is not devid<TAB>text: %r" % (label, number, line))
        out["0x" + parts[0]] = parts[1].strip()
    if not out:
        raise TableError("%s: no device id" % label)
    return out


def extract_gpu_admin_tools(names_text, chips_text):
    """The ``gpu-admin-tools-extract`` lines from gpu/devid_names.py and gpu/devid_chips.py (read as
    text, never run): each id's product name (a later entry of an id wins, as in the dict) and each
    chip range."""
    names = {}
    for match in re.finditer(r"^\s*0x([0-9A-Fa-f]{4})\s*:\s*'([^']+)'", names_text, re.M):
        names[match.group(1).lower()] = match.group(2)
    ranges = re.findall(r"\(\s*0x([0-9A-Fa-f]{4})\s*,\s*0x([0-9A-Fa-f]{4})\s*,\s*'(\w+)'\s*,\s*'(\w+)'\s*\)", chips_text)
    if not names or not ranges:
        raise TableError("gpu-admin-tools: no names or no chip ranges found")
    out = ["name\t%s\t%s" % (devid, name) for devid, name in sorted(names.items())]
    out += ["chip\t%s\t%s\t%s\t%s" % (lo.lower(), hi.lower(), arch, chip)
            for lo, hi, arch, chip in sorted(ranges, key=lambda r: r[0].lower())]
    return out


def read_gpu_admin_tools_extract(text, label="gpu-admin-tools extract"):
    """``({devid: product}, [(first, last, architecture, CHIP)])`` of the lines ``extract_gpu_admin_tools`` writes."""
    names, ranges = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == "name" and _HEX4.match(parts[1]) and parts[2].strip():
            names["0x" + parts[1]] = parts[2].strip()
        elif (len(parts) == 5 and parts[0] == "chip" and _HEX4.match(parts[1]) and _HEX4.match(parts[2])
              and int(parts[1], 16) <= int(parts[2], 16) and parts[3].isalpha() and parts[4].isalnum()):
            ranges.append((int(parts[1], 16), int(parts[2], 16), parts[3].capitalize(), parts[4].upper()))
        else:
            raise TableError("%s: line %d is neither name<TAB>devid<TAB>product nor "
                             "chip<TAB>first<TAB>last<TAB>architecture<TAB>chip: %r" % (label, number, line))
    return names, ranges


def pci_chip(text):
    """The chip a pci.ids device text names (``"GA102GL [RTX A6000]"`` -> ``"GA102"``), None for
    a text that names no GPU chip or a function that is not the GPU (audio, USB, NVSwitch ...)."""
    match = _PCI_CHIP.match(text or "")
    if not match or _NOT_A_GPU.search(text):
        return None
    return match.group(1) + match.group(2)


def architecture(chip):
    """``"GH100"`` -> ``"Hopper"``; ``""`` for a chip of no known architecture."""
    return ARCHITECTURE_BY_PREFIX.get(str(chip or "")[:2], "")


def open_only(devid, name):
    """Whether NVIDIA supports only the open kernel modules on this id (see OPEN_ONLY_*)."""
    return int(devid, 16) >= OPEN_ONLY_FROM_ID or bool(OPEN_ONLY_NAME.search(name))


def merge(supported, readmes):
    """Rows ``{devid: (name, flavors, legacy, first)}`` of all NVIDIA lists.

    :param supported: ``[(branch, read_supported_gpus(...)), ...]``.
    :param readmes: ``[(branch, read_open_readme(...)), ...]``.
    """
    listed, current = {}, {}
    for branch, rows in supported:
        listed.setdefault(int(branch), set()).update(rows)
        current.setdefault(int(branch), set()).update(devid for devid, row in rows.items() if not row[2])
    for branch, names in readmes:
        listed.setdefault(int(branch), set()).update(names)
        current.setdefault(int(branch), set()).update(names)
    if not listed:
        raise TableError("no input")
    oldest = min(listed)
    by_age = sorted(supported, key=lambda item: int(item[0]))
    out = {}
    for devid in sorted(set().union(*listed.values())):
        name = ""
        for _, names in sorted(readmes, key=lambda item: int(item[0])):
            name = names.get(devid, name)
        json_rows = [(branch, rows) for branch, rows in by_age if devid in rows]
        newest_json = json_rows[-1][1][devid] if json_rows else None
        if not name and newest_json:
            name = newest_json[0]
        if "=" in name or ";" in name or not name:
            raise TableError("GPU name %r of %s is empty or holds '=' or ';', which the packed table uses"
                             % (name, devid))
        kopen = (any(devid in names for _, names in readmes)
                 or any(rows[devid][1] and not rows[devid][2] for _, rows in json_rows))
        if kopen:
            flavors = "open" if open_only(devid, name) else "either"
            legacy = ""
            flagged = [(branch, rows[devid]) for branch, rows in json_rows
                       if rows[devid][1] and not rows[devid][2] and any(row[3] for row in rows.values())]
            if flagged and (not flagged[-1][1][3]) != (flavors == "open"):
                raise TableError("%s (%s): the %s list %s gsp_proprietary_supported, but the open-only rule says %s"
                                 % (devid, name, flagged[-1][0], "lacks" if not flagged[-1][1][3] else "carries",
                                    flavors))
        else:
            flavors, legacy = "proprietary", newest_json[2]
        firsts = [branch for branch, ids in current.items() if devid in ids]
        first = min(firsts) if firsts else oldest
        out[devid] = (name, flavors, legacy, "" if first == oldest else str(first))
    return out


def _product(devid, pci, admin_names):
    """An unlisted id's name from pci.ids' bracket and gpu-admin-tools' product name."""
    match = _BRACKET.search(pci.get(devid, ""))
    bracket = match.group(1).strip() if match else ""
    product = admin_names.get(devid, "")
    if product and bracket and product not in bracket:
        return "%s / %s" % (product, bracket)
    return bracket or product


def chips(rows, pci, admin_names=None, admin_ranges=()):
    """Chips of the ids, and rows for the ids NVIDIA's lists do not name of the chips they support.

    :param rows: ``merge(...)``.
    :param pci: ``read_pci_ids_extract(...)``.
    :param admin_names: gpu-admin-tools' ``{devid: product}``; an id pci.ids lacks takes the
        chip of the listed ids of the same product.
    :param admin_ranges: gpu-admin-tools' ``[(first, last, architecture, CHIP)]``; pci.ids'
        chip of an id in a range must be that range's.
    :returns: ``(chip_of, by_chip, skipped)``: ``{devid: chip}`` of every GPU id known to a
        source, ``{devid: (name, flavors, legacy, first)}`` of the added ids, and
        ``{chip: why}`` of the chips not extended.
    :raises TableError: when pci.ids and gpu-admin-tools disagree on a chip.
    """
    admin_names = admin_names or {}
    chip_of = {}
    for devid, text in pci.items():
        chip = pci_chip(text)
        if chip:
            chip_of[devid] = chip
    for lo, hi, arch, chip in admin_ranges:
        if architecture(chip) != arch:
            raise TableError("gpu-admin-tools range %04x-%04x: chip %s is %s, not %s"
                             % (lo, hi, chip, architecture(chip) or "of no known architecture", arch))
        for devid in [d for d in set(pci) | set(rows) | set(admin_names) if lo <= int(d, 16) <= hi]:
            if devid in pci and not pci_chip(pci[devid]):
                continue
            if chip_of.get(devid, chip) != chip:
                raise TableError("%s: pci.ids says chip %s, gpu-admin-tools %s" % (devid, chip_of[devid], chip))
            chip_of[devid] = chip
    by_product = {}
    for devid, product in admin_names.items():
        if devid in chip_of:
            by_product.setdefault(product, set()).add(chip_of[devid])
    for devid, product in admin_names.items():
        if devid not in chip_of and len(by_product.get(product, ())) == 1:
            chip_of[devid] = next(iter(by_product[product]))

    def group(devid):
        name = rows[devid][0] if devid in rows else "%s %s" % (pci.get(devid, ""), admin_names.get(devid, ""))
        return bool(OPEN_ONLY_NAME.search(name))

    members = {}
    for devid, chip in chip_of.items():
        members.setdefault((chip, group(devid)), []).append(devid)
    by_chip, skipped = {}, {}
    for (chip, gh200), ids in sorted(members.items()):
        listed = [rows[d] for d in ids if d in rows]
        unlisted = sorted(d for d in ids if d not in rows)
        if not listed or not unlisted:
            continue
        label = chip + (" (GH200)" if gh200 else "")
        shared = {(row[1], row[2]) for row in listed}
        if len(shared) != 1:
            skipped[label] = "its listed ids disagree: %s" % ", ".join("%s/%s" % s for s in sorted(shared))
            continue
        flavors, legacy = shared.pop()
        firsts = [row[3] for row in listed]
        first = "" if "" in firsts else min(firsts, key=int)
        for devid in unlisted:
            if open_only(devid, "") and flavors != "open":
                skipped[label] = "%s is Blackwell or later but the chip's listed ids are %s" % (devid, flavors)
                break
        else:
            for devid in unlisted:
                product = _product(devid, pci, admin_names)
                name = ("%s (%s, %s)" % (product, chip, BY_CHIP_NOTE) if product
                        else "%s (%s)" % (chip, BY_CHIP_NOTE))
                if "=" in name or ";" in name:
                    raise TableError("GPU name %r of %s holds '=' or ';', which the packed table uses" % (name, devid))
                by_chip[devid] = (name, flavors, legacy, first)
    return chip_of, by_chip, skipped


def _open(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_manifest(path):
    """Read the manifest and every input it names.

    :returns: ``(sources, supported, readmes, pci, admin)``: ``sources`` the manifest
        entries (each with ``file``, ``kind``, ``repository``, ``ref``, ``path``,
        ``commit``, ``date``, and ``branch`` for NVIDIA's lists), then the parsed lists
        as ``merge`` takes them, pci.ids' ``{devid: text}`` and gpu-admin-tools'
        ``(names, ranges)`` (empty when the manifest names none).
    """
    with open(path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    entries = manifest.get("inputs") if isinstance(manifest, dict) else None
    if not entries:
        raise TableError("%s: no \"inputs\" list" % path)
    base = os.path.dirname(os.path.abspath(path))
    supported, readmes, pci, admin = [], [], {}, ({}, [])
    for entry in entries:
        needed = ("file", "kind", "repository", "ref", "path", "commit", "date")
        needed += ("branch",) if entry.get("kind") in BRANCH_KINDS else ()
        missing = [key for key in needed if not str(entry.get(key) or "").strip()]
        if missing:
            raise TableError("%s: input %r does not say %s" % (path, entry.get("file"), ", ".join(missing)))
        if entry["kind"] not in KINDS:
            raise TableError("%s: input %s has kind %r, not one of %s" % (path, entry["file"], entry["kind"], KINDS))
        if entry["kind"] in BRANCH_KINDS and not re.fullmatch(r"\d{3}", str(entry["branch"])):
            raise TableError("%s: input %s wants a three-digit branch" % (path, entry["file"]))
        if not re.fullmatch(r"[0-9a-f]{40}", entry["commit"]):
            raise TableError("%s: input %s wants a 40-digit commit" % (path, entry["file"]))
        with _open(os.path.join(base, entry["file"])) as handle:
            kind = entry["kind"]
            if kind == "supported-gpus":
                supported.append((entry["branch"], read_supported_gpus(json.load(handle), entry["file"])))
            elif kind == "supported-gpus-extract":
                supported.append((entry["branch"], read_supported_gpus_extract(handle.read(), entry["file"])))
            elif kind == "open-readme":
                readmes.append((entry["branch"], read_open_readme(handle.read(), entry["file"])))
            elif kind == "pci-ids-extract":
                pci.update(read_pci_ids_extract(handle.read(), entry["file"]))
            else:
                names, ranges = read_gpu_admin_tools_extract(handle.read(), entry["file"])
                admin[0].update(names)
                admin[1].extend(ranges)
    return entries, supported, readmes, pci, admin


def describe_source(entry):
    """One line naming an input: what, repository, ref, path, commit, date."""
    what = {"supported-gpus": "%s supported-gpus.json" % entry.get("branch"),
            "supported-gpus-extract": "%s supported-gpus.json (extract)" % entry.get("branch"),
            "open-readme": "%s open modules' Compatible GPUs" % entry.get("branch"),
            "pci-ids-extract": "pci.ids (vendor 10de, extract)",
            "gpu-admin-tools-extract": "gpu-admin-tools product names and chip ranges (extract)"}[entry["kind"]]
    return "%s: %s %s %s, commit %s (%s)" % (what, entry["repository"], entry["ref"], entry["path"],
                                            entry["commit"], entry["date"])


def newest_release(entries):
    """The newest release named by the inputs: the highest open-readme tag (``595.45.04``), else the highest branch."""
    tags = [e["ref"].split()[-1] for e in entries if e["kind"] == "open-readme" and e["ref"].startswith("tag ")]
    if tags:
        return max(tags, key=lambda tag: [int(part) for part in re.findall(r"\d+", tag)])
    return str(max(int(e["branch"]) for e in entries if e["kind"] in BRANCH_KINDS))


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


def _lines(items, width=108, sep="; "):
    """Items joined by ``sep`` into string literals of at most ``width`` characters, never splitting an item."""
    out, line = [], ""
    for item in items:
        if line and len(line) + len(item) + len(sep) > width:
            out.append(line)
            line = ""
        line += item + sep
    return out + ([line] if line else [])


def _group_order(key):
    flavors, legacy, first = key
    return (FLAVOR_ORDER.index(flavors), int(first or 0), legacy)


def _packed_dict(name, rows):
    lines = ["%s = {" % name]
    packed = _packed(rows)
    for key in sorted(packed, key=_group_order):
        lines.append("    (%r, %r, %r): (" % key)
        lines.extend("        %r" % part for part in _lines(packed[key]))
        lines.append("    ),")
    return lines + ["}"]


def render(rows, driver, sources, command, chip_of=None, by_chip=None):
    """The Python text of the table module.

    :param driver: the newest release the inputs name (``DRIVER``).
    :param sources: one line per input (``describe_source``).
    :param chip_of: ``{devid: chip}`` (``chips``); ``CHIPS`` and ``ARCHITECTURES``.
    :param by_chip: rows of the ids added by chip (``chips``); in ``GPUS`` and ``BY_CHIP``.
    """
    chip_of, by_chip = chip_of or {}, by_chip or {}
    overlap = sorted(set(rows) & set(by_chip))
    if overlap:
        raise TableError("ids both listed and added by chip: %s" % ", ".join(overlap))
    lines = [
        '"""NVIDIA GPU table derived from NVIDIA\'s per-device lists and pci.ids. GENERATED: do not edit.',
        "",
        "Command: %s" % command,
        "Inputs (copies or extracts, and their README, under tests/fixtures/nvidia_gpus/):",
        *("  - " + source for source in sources),
        "",
        "GPUS maps a PCI device id (vendor 0x10de) to (name, flavors, legacy, first):",
        "  flavors -- kernel modules NVIDIA supports on the id: \"open\" (only the open modules:",
        "             Blackwell and later, Grace Hopper), \"either\", \"proprietary\" (not the open ones)",
        "  legacy  -- last driver branch supporting the id (\"470\"), \"\" when current branches do",
        "  first   -- first branch whose list names the id (\"570\"), \"\" when the oldest input",
        "             already did",
        "",
        "It is built from _PACKED (ids NVIDIA's lists name) and _BY_CHIP (the other ids of the chips",
        "those lists support, named by pci.ids or NVIDIA's gpu-admin-tools: each takes the row its",
        "chip's listed ids share, and BY_CHIP holds them): for each (flavors, legacy, first), items",
        "\"<ids>=<name>\" separated by \"; \", <ids> the device ids (4 hex digits, comma-separated)",
        "sharing that name. To find an id, search for its 4 digits (e.g. 2330).",
        "",
        "CHIPS maps every GPU id of pci.ids and of the lists to its chip (\"0x2330\": \"GH100\"), and",
        "ARCHITECTURES each chip to its architecture (\"GH100\": \"Hopper\"); built from _CHIP_IDS.",
        '"""',
        "",
        "DRIVER = %r" % str(driver),
        "SOURCES = (",
        *("    %r," % source for source in sources),
        ")",
        "",
    ]
    lines += _packed_dict("_PACKED", rows)
    lines.append("")
    lines += _packed_dict("_BY_CHIP", by_chip)
    lines += ["", "_CHIP_IDS = {"]
    ids_of = {}
    for devid in sorted(chip_of):
        ids_of.setdefault(chip_of[devid], []).append(devid[2:])
    for chip in sorted(ids_of):
        if not architecture(chip):
            raise TableError("chip %s has no known architecture (ARCHITECTURE_BY_PREFIX)" % chip)
        parts = _lines(ids_of[chip], width=96, sep=",")
        lines.append("    (%r, %r): (" % (chip, architecture(chip)))
        lines.extend("        %r" % part for part in parts)
        lines.append("    ),")
    lines += [
        "}",
        "",
        "GPUS = {}",
        "BY_CHIP = set()",
        "for _packed, _by_chip in ((_PACKED, False), (_BY_CHIP, True)):",
        "    for _key, _text in _packed.items():",
        "        for _item in _text.split(\"; \"):",
        "            if _item:",
        "                _ids, _name = _item.split(\"=\", 1)",
        "                for _id in _ids.split(\",\"):",
        "                    GPUS[\"0x\" + _id] = (_name,) + _key",
        "                    if _by_chip:",
        "                        BY_CHIP.add(\"0x\" + _id)",
        "",
        "CHIPS = {}",
        "ARCHITECTURES = {}",
        "for (_chip, _architecture), _text in _CHIP_IDS.items():",
        "    ARCHITECTURES[_chip] = _architecture",
        "    for _id in _text.split(\",\"):",
        "        if _id:",
        "            CHIPS[\"0x\" + _id] = _chip",
    ]
    return "\n".join(lines) + "\n"


def build(manifest, report=None):
    """The table module's text for a manifest path (relative to the repository root in the header).

    :param report: a list that receives one line per chip not extended, and why.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    entries, supported, readmes, pci, (admin_names, admin_ranges) = load_manifest(manifest)
    rows = merge(supported, readmes)
    chip_of, by_chip, skipped = chips(rows, pci, admin_names, admin_ranges) if pci else ({}, {}, {})
    if report is not None:
        report.extend("chip %s not extended: %s" % item for item in sorted(skipped.items()))
    shown = os.path.relpath(os.path.abspath(manifest), root)
    command = "scripts/nvidia-supported-gpus-table.py --manifest %s" % shown
    return render(rows, newest_release(entries), [describe_source(e) for e in entries], command, chip_of, by_chip)


EXTRACT_COLUMNS = {
    "supported-gpus": "devid<TAB>legacy branch or -<TAB>kernelopen,gsp_proprietary_supported or -<TAB>names",
    "pci-ids": "devid<TAB>pci.ids text (vendor 10de)",
    "gpu-admin-tools": "name<TAB>devid<TAB>product, chip<TAB>first<TAB>last<TAB>architecture<TAB>chip",
}


def extract(kind, source):
    """``--extract``: the lines of one extract from an original (a file, or gpu-admin-tools' tree),
    after two comment lines naming the command and the columns."""
    head = ["# scripts/nvidia-supported-gpus-table.py --extract %s %s" % (kind, os.path.basename(source.rstrip("/"))),
            "# " + EXTRACT_COLUMNS[kind]]
    if kind == "supported-gpus":
        with _open(source) as handle:
            return head + extract_supported_gpus(json.load(handle), source)
    if kind == "pci-ids":
        with _open(source) as handle:
            return head + extract_pci_ids(handle.read())
    with open(os.path.join(source, "gpu", "devid_names.py"), encoding="utf-8") as names, \
            open(os.path.join(source, "gpu", "devid_chips.py"), encoding="utf-8") as ranges:
        return head + extract_gpu_admin_tools(names.read(), ranges.read())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--manifest",
                        help="sources.json naming each input (file, kind, branch, repository, ref, path, commit, date)")
    parser.add_argument("-o", "--output", help="write here instead of stdout (with --check: the file to compare)")
    parser.add_argument("--check", action="store_true",
                        help="compare the table the manifest gives with --output (default "
                             "module_utils/gpudirect_nvidia_gpus.py); exit 1 when they differ")
    parser.add_argument("--extract", nargs=2, metavar=("KIND", "SOURCE"),
                        help="write an extract: supported-gpus FILE.json, pci-ids pci.ids, or gpu-admin-tools "
                             "DIRECTORY (a checkout of NVIDIA/gpu-admin-tools)")
    args = parser.parse_args(argv)
    if bool(args.manifest) == bool(args.extract):
        parser.error("give --manifest or --extract")
    if args.extract and args.extract[0] not in EXTRACT_COLUMNS:
        parser.error("--extract KIND: supported-gpus, pci-ids or gpu-admin-tools")
    report = []
    try:
        if args.extract:
            text = "\n".join(extract(*args.extract)) + "\n"
        else:
            text = build(args.manifest, report)
    except (OSError, ValueError) as exc:
        print("nvidia-supported-gpus-table: %s" % exc, file=sys.stderr)
        return 1
    for line in report:
        print("nvidia-supported-gpus-table: %s" % line, file=sys.stderr)
    if args.check:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        target = args.output or os.path.join(root, "module_utils", "gpudirect_nvidia_gpus.py")
        try:
            with open(target, encoding="utf-8") as handle:
                committed = handle.read()
        except OSError as exc:
            print("nvidia-supported-gpus-table: %s" % exc, file=sys.stderr)
            return 1
        if committed == text:
            print("%s is what the manifest gives" % target)
            return 0
        diff = list(difflib.unified_diff(committed.splitlines(), text.splitlines(), target, "generated", lineterm=""))
        print("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""))
        print("nvidia-supported-gpus-table: %s differs from what the manifest gives; regenerate it with -o"
              % target, file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
