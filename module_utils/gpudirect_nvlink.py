# -*- coding: utf-8 -*-
"""NVLink links and NVLink fabric state of each GPU, from ``nvidia-smi``'s own text.

* ``parse_nvlink_status``: ``nvidia-smi nvlink -s`` -> ``{index: {"links": [...], ...}}``,
  one entry per ``GPU <index>: <name> (UUID: ...)`` block, each link up with its speed
  (``Link 3: 26.562 GB/s``) or down (``Link 3: <inactive>``).
* ``parse_fabric``: ``nvidia-smi -q`` -> ``{pci address: {"state", "status", "clique_id",
  "cluster_uuid"}}`` from each GPU's ``Fabric`` section (``GPU 00000000:00:06.0`` blocks).

Both are pure: the facts collector (module_utils/gpudirect_facts_collector.py) runs the
commands and attaches the result to each GPU. A line the parser does not expect inside a
block it reads raises ``NvlinkParseError`` naming the line, so a new driver's format is
reported instead of read wrongly. ``N/A`` becomes None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.gpudirect_pci import normalize_pci_address

_GPU_HEADER = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
_LINK = re.compile(r"^\s*Link (?P<link>\d+): (?P<value>.*?)\s*$")
_SPEED = re.compile(r"^(?P<speed>\d+(?:\.\d+)?) GB/s$")
_Q_GPU = re.compile(r"^GPU (?P<address>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_Q_FIELD = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s*(?::\s*(?P<value>.*?))?\s*$")
FABRIC_KEYS = {"State": "state", "Status": "status", "CliqueId": "clique_id", "ClusterUUID": "cluster_uuid"}


class NvlinkParseError(ValueError):
    """nvidia-smi printed something these parsers do not read; the message quotes the line."""


def _na(value):
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]") else value


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{index: {"index", "name", "uuid", "links": [{"link", "up",
    "speed_gbytes_s"}], "links_total", "links_up", "link_speed_gbytes_s", "total_gbytes_s"}}``.

    ``link_speed_gbytes_s`` is the speed every active link shares (None when they differ or none
    is up); ``total_gbytes_s`` their sum, one direction, as nvidia-smi prints GB/s (gigabytes).
    A GPU without NVLink prints its header and no link (``links_total`` 0). Text with no GPU
    header at all (an empty answer, an error line) gives ``{}``; the caller says why.
    """
    if not isinstance(text, str):
        raise NvlinkParseError("nvidia-smi nvlink -s: expected text, got %r" % (text,))
    gpus, current = {}, None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        header = _GPU_HEADER.match(line)
        if header:
            index = int(header.group("index"))
            if index in gpus:
                raise NvlinkParseError("nvidia-smi nvlink -s line %d: GPU %d listed twice: %r" % (number, index, line))
            current = gpus[index] = {"index": index, "name": header.group("name").strip(),
                                     "uuid": header.group("uuid"), "links": []}
            continue
        link = _LINK.match(line)
        if link and current is not None:
            value = link.group("value")
            speed = _SPEED.match(value)
            if speed:
                current["links"].append({"link": int(link.group("link")), "up": True,
                                         "speed_gbytes_s": float(speed.group("speed"))})
            elif value.strip("<>").lower() in ("inactive", "n/a", "disabled", "off"):
                current["links"].append({"link": int(link.group("link")), "up": False, "speed_gbytes_s": None})
            else:
                raise NvlinkParseError("nvidia-smi nvlink -s line %d: link state %r is neither 'N GB/s' nor "
                                       "<inactive>: %r" % (number, value, line))
            continue
        if current is None:
            continue   # text before the first GPU header (a warning nvidia-smi printed): not a link line
        raise NvlinkParseError("nvidia-smi nvlink -s line %d: expected 'Link N: ...' or 'GPU N: ...', got %r"
                               % (number, line))
    for gpu in gpus.values():
        up = [link["speed_gbytes_s"] for link in gpu["links"] if link["up"]]
        gpu["links_total"] = len(gpu["links"])
        gpu["links_up"] = len(up)
        gpu["link_speed_gbytes_s"] = up[0] if up and len(set(up)) == 1 else None
        gpu["total_gbytes_s"] = round(sum(up), 3) if up else 0.0
    return gpus


def parse_fabric(text):
    """``nvidia-smi -q`` -> ``{address: {"state", "status", "clique_id", "cluster_uuid"}}``.

    The ``Fabric`` section of each ``GPU 00000000:00:06.0`` block (drivers from r550); a GPU
    block without one is left out (an older driver: the caller reports it as not read). The
    ``GPU Fabric GUID`` line is another field and is not taken for the section. Values are as
    printed (``Completed``, ``Success``, ``0``, the UUID), ``N/A`` as None; ``clique_id`` an int
    when it is a number.
    """
    if not isinstance(text, str):
        raise NvlinkParseError("nvidia-smi -q: expected text, got %r" % (text,))
    out, address, fabric_indent, number = {}, None, None, 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        gpu = _Q_GPU.match(line)
        if gpu:
            address = normalize_pci_address(gpu.group("address"))
            if address is None:
                raise NvlinkParseError("nvidia-smi -q line %d: not a PCI address: %r" % (number, line))
            fabric_indent = None
            continue
        field = _Q_FIELD.match(line)
        if not field or address is None:
            continue
        indent = len(field.group("indent"))
        if field.group("key") == "Fabric" and field.group("value") is None:
            fabric_indent = indent
            out[address] = {"state": None, "status": None, "clique_id": None, "cluster_uuid": None}
            continue
        if fabric_indent is None:
            continue
        if indent <= fabric_indent:
            fabric_indent = None
            continue
        key = FABRIC_KEYS.get(field.group("key"))
        if key and indent == fabric_indent + 4:
            value = _na(field.group("value"))
            if key == "clique_id" and value is not None:
                if not value.isdigit():
                    raise NvlinkParseError("nvidia-smi -q line %d: CliqueId %r is not a number: %r"
                                           % (number, value, line))
                value = int(value)
            out[address][key] = value
    return out
