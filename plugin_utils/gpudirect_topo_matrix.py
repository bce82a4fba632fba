"""``nvidia-smi topo -m``: the parser of its matrix, and the verdict on one of its distance classes.

``nvidia_topo_matrix(text)``
    The device list, the distance matrix, the CPU/NUMA affinity columns and the NIC legend.
``gpudirect_distance_verdict(cls)``
    ``good`` / ``warn`` / ``bad`` for GPUDirect RDMA of one class of that matrix (``PIX``,
    ``SYS``, ``NV18`` ...).

The one implementation: the verification's cross-check (filter_plugins/gpudirect_verify.py)
and the report (filter_plugins/gpudirect_report.py) call these. Input that cannot be understood raises
``TopoMatrixError``; where the problem sits on one line, the message gives the 1-based line
number and the line itself, quoted with ``repr()`` so that tabs and escape sequences stay visible.
"""

from __future__ import annotations

import re

from ansible.module_utils import gpudirect_topology as _topology
# CSI escape sequences, e.g. the underline nvidia-smi puts around its header ("\x1b[4m" ... "\x1b[0m")
# when it believes it writes to a terminal
from ansible.module_utils.gpudirect_versions import strip_ansi


class TopoMatrixError(ValueError):
    """Text or a class the parser cannot read; the message names the function, the line and what is wrong."""


# Column titles that may follow the device columns, with the key of the result
# dict that collects their values.
_ATTRIBUTE_COLUMNS = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}
_ATTRIBUTE_TITLE = re.compile(
    "|".join(re.escape(title) for title in _ATTRIBUTE_COLUMNS)
)

_GPU_NAME = re.compile(r"GPU\d+")
_NIC_NAME = re.compile(r"NIC\d+")
_DISTANCE_CELL = re.compile(r"[A-Z][A-Z0-9#/]*")
_NIC_LEGEND_TITLE = "NIC Legend:"
_NIC_LEGEND_ENTRY = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")
_NOT_AVAILABLE = "N/A"


# SOC: the name older drivers printed for SYS
_OLD_NAMES = {"SOC": "SYS"}
_NVLINK_CLASS = re.compile(r"NV\d+")


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def _line_error(filter_name, lineno, reason, raw_line):
    """Build the error raised for one bad input line.

    :param filter_name: name of the filter reporting the problem.
    :param lineno: 1-based number of the offending line in the input text.
    :param reason: what is wrong with the line.
    :param raw_line: the line as it appeared in the input (escapes included).
    :returns: a ``TopoMatrixError`` whose message names and quotes the line.
    """
    return TopoMatrixError(f"{filter_name}: line {lineno}: {reason}: {raw_line!r}")


def _require_text(filter_name, text):
    """Check that a filter received a non-blank string.

    :param filter_name: name of the filter, used in the error message.
    :param text: the filter's input.
    :raises TopoMatrixError: if ``text`` is not a string or holds only whitespace.
    """
    if not isinstance(text, str):
        raise TopoMatrixError(
            f"{filter_name}: expected the command output as a string, "
            f"got {type(text).__name__}"
        )
    if not text.strip():
        raise TopoMatrixError(
            f"{filter_name}: empty input, there is nothing to parse"
        )


def _value_or_none(value):
    """Turn the ``N/A`` placeholder of nvidia-smi into ``None``.

    :param value: a cell of an affinity column.
    :returns: ``None`` for ``N/A``, otherwise the value unchanged.
    """
    return None if value == _NOT_AVAILABLE else value


# --------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------


def _split_header(filter_name, lineno, raw_line, line):
    """Split the header line of the matrix into device columns and attribute columns.

    Device names never contain spaces, so they are whitespace separated; the
    attribute titles ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") do contain
    spaces and are recognised by name.

    :param filter_name: name of the calling filter, for error messages.
    :param lineno: 1-based line number of the header.
    :param raw_line: the header as it appeared in the input.
    :param line: the header with escape sequences removed.
    :returns: ``(devices, attribute_keys)``: the device column names in order,
        and for each attribute column the result key that collects it.
    :raises TopoMatrixError: if the line is not a topology header.
    """
    first_title = _ATTRIBUTE_TITLE.search(line)
    device_part = line[: first_title.start()] if first_title else line
    devices = device_part.split()
    if not devices or not _GPU_NAME.fullmatch(devices[0]):
        raise _line_error(
            filter_name,
            lineno,
            "matrix header missing (expected a header line starting with GPU0)",
            raw_line,
        )
    duplicates = sorted({name for name in devices if devices.count(name) > 1})
    if duplicates:
        raise _line_error(
            filter_name,
            lineno,
            f"duplicate column(s) {', '.join(duplicates)} in header",
            raw_line,
        )

    attribute_keys = []
    rest = line[first_title.start() :].strip() if first_title else ""
    while rest:
        title = _ATTRIBUTE_TITLE.match(rest)
        if not title:
            raise _line_error(
                filter_name,
                lineno,
                f"unknown column title at {rest!r} in header",
                raw_line,
            )
        attribute_keys.append(_ATTRIBUTE_COLUMNS[title.group(0)])
        rest = rest[title.end() :].strip()
    return devices, attribute_keys


def _split_row(filter_name, lineno, raw_line, line, devices, attribute_keys):
    """Split one matrix row into its distance cells and attribute values.

    GPU rows carry one cell per device column followed by the attribute
    columns; NIC rows carry the distance cells only (trailing empty cells
    vanish with the whitespace).

    :param filter_name: name of the calling filter, for error messages.
    :param lineno: 1-based line number of the row.
    :param raw_line: the row as it appeared in the input.
    :param line: the row with escape sequences removed.
    :param devices: device column names from the header.
    :param attribute_keys: result keys of the attribute columns from the header.
    :returns: ``(name, distances, attributes)``: the row's device name, a dict
        column name -> distance class, and a dict result key -> value (empty for
        rows without attribute values).
    :raises TopoMatrixError: on an unknown row name, a wrong number of
        cells, a cell that is not a distance class, or a diagonal cell other than X.
    """
    name, *cells = line.split()
    if name not in devices:
        raise _line_error(
            filter_name,
            lineno,
            f"unknown row name {name!r} (not a column of the header)",
            raw_line,
        )

    width = len(devices)
    allowed = sorted({width, width + len(attribute_keys)})
    if len(cells) not in allowed:
        expected = " or ".join(str(count) for count in allowed)
        raise _line_error(
            filter_name,
            lineno,
            f"row {name} has {len(cells)} cells, expected {expected}",
            raw_line,
        )

    distances = dict(zip(devices, cells[:width]))
    for column, cell in distances.items():
        if not _DISTANCE_CELL.fullmatch(cell):
            raise _line_error(
                filter_name,
                lineno,
                f"cell {column} of row {name} is {cell!r}, not a distance class",
                raw_line,
            )
    if distances[name] != "X":
        raise _line_error(
            filter_name,
            lineno,
            f"row {name} has {distances[name]!r} in its own column, expected 'X'",
            raw_line,
        )

    attributes = dict(zip(attribute_keys, cells[width:]))
    return name, distances, attributes


def _is_end_of_matrix(line):
    """Tell whether a line closes the matrix block.

    :param line: a line with escape sequences removed.
    :returns: ``True`` for a blank line or the start of the ``Legend:`` block.
    """
    stripped = line.strip()
    return not stripped or stripped.startswith("Legend")


def _read_nic_legend(numbered_lines):
    """Collect the ``NICn: device`` entries of the ``NIC Legend:`` section.

    The section runs from its title to the first line that is neither blank
    nor an entry; everything else in the trailing text is ignored.

    :param numbered_lines: ``(lineno, raw, clean)`` tuples following the matrix.
    :returns: dict NIC column name -> RDMA device name (empty without a section).
    """
    legend = {}
    inside = False
    for _lineno, _raw, line in numbered_lines:
        if not inside:
            inside = line.strip() == _NIC_LEGEND_TITLE
            continue
        if not line.strip():
            continue
        entry = _NIC_LEGEND_ENTRY.fullmatch(line)
        if not entry:
            break
        legend[entry.group(1)] = entry.group(2)
    return legend


def _nic_device_names(devices, legend):
    """Map every NIC column to its RDMA device name where that name is known.

    Current drivers name NIC columns ``NIC0``, ``NIC1`` ... and resolve them
    in the ``NIC Legend:`` section.  Older drivers name the columns after the
    device itself (``mlx5_0``), which then maps to itself.  A ``NICn`` column
    that the legend does not list is left out.

    :param devices: device column names from the header.
    :param legend: entries of the ``NIC Legend:`` section.
    :returns: dict column name -> RDMA device name.
    """
    names = dict(legend)
    for device in devices:
        if not _GPU_NAME.fullmatch(device) and not _NIC_NAME.fullmatch(device):
            names[device] = device
    return names


def nvidia_topo_matrix(text):
    """Parse the output of ``nvidia-smi topo -m``.

    Accepted variants: NIC columns named ``NICn`` with a ``NIC Legend:``
    section (current drivers); NIC columns named after the device such as
    ``mlx5_0`` (older drivers, no NIC legend); GPU-only output; with or without
    the ``NUMA Affinity`` and ``GPU NUMA ID`` columns; tab or space separated
    cells; ANSI escape sequences anywhere (they are removed first).  The
    ``Legend:`` block that explains the classes is ignored.

    The first non-blank line must be the header (so strip any shell prompt
    before calling the filter).  The matrix rows follow it up to the first
    blank line or the ``Legend:`` line.

    :param text: the command's standard output.
    :returns: a dict with

        ``devices``
            column names in header order, e.g. ``["GPU0", "GPU1", "NIC0"]``.
        ``matrix``
            ``{row: {column: class}}`` for every device pair; classes are kept
            as printed: ``X``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``,
            ``NV4``, ``NV18`` ...
        ``cpu_affinity``
            ``{gpu: "0-15,32-47"}`` from the ``CPU Affinity`` column.
        ``numa_affinity``
            ``{gpu: "0"}`` from the ``NUMA Affinity`` column.
        ``gpu_numa_id``
            ``{gpu: "2"}`` from the ``GPU NUMA ID`` column.
        ``nic_legend``
            ``{column: rdma_device}``, e.g. ``{"NIC0": "mlx5_0"}``.  Columns
            already named after the device (``mlx5_0``) map to themselves, so
            ``nic_legend[column]`` gives the RDMA device for every NIC column
            of either driver generation.

        The three affinity dicts only hold rows that print those columns
        (GPU rows); a column missing from the header gives an empty dict.
        Affinity values stay strings; ``N/A`` becomes ``None``.
    :raises TopoMatrixError: on empty input, a missing header, a duplicated
        column or an unknown column title in the header, a row with an unknown
        name or the wrong number of cells, a cell that is not a distance class,
        a diagonal cell other than ``X``, a duplicated or a missing row.  The
        message gives the offending line's number and quotes it (for a missing
        row, the header line).
    """
    name = "nvidia_topo_matrix"
    _require_text(name, text)
    numbered = [
        (number, raw, strip_ansi(raw))
        for number, raw in enumerate(text.splitlines(), start=1)
    ]
    content = [entry for entry in numbered if entry[2].strip()]
    if not content:
        raise TopoMatrixError(f"{name}: empty input, only escape sequences")
    header_no, header_raw, header = content[0]
    devices, attribute_keys = _split_header(name, header_no, header_raw, header)

    result = {
        "devices": devices,
        "matrix": {},
        "cpu_affinity": {},
        "numa_affinity": {},
        "gpu_numa_id": {},
        "nic_legend": {},
    }
    position = numbered.index(content[0]) + 1
    while position < len(numbered) and not _is_end_of_matrix(numbered[position][2]):
        lineno, raw, line = numbered[position]
        row, distances, attributes = _split_row(
            name, lineno, raw, line, devices, attribute_keys
        )
        if row in result["matrix"]:
            raise _line_error(name, lineno, f"second row for {row}", raw)
        result["matrix"][row] = distances
        for key, value in attributes.items():
            result[key][row] = _value_or_none(value)
        position += 1

    missing = [device for device in devices if device not in result["matrix"]]
    if missing:
        raise _line_error(
            name,
            header_no,
            f"no matrix row for column(s) {', '.join(missing)} of header",
            header_raw,
        )

    result["nic_legend"] = _nic_device_names(
        devices, _read_nic_legend(numbered[position:])
    )
    return result


def gpudirect_distance_verdict(cls):
    """Rate a distance class of ``nvidia-smi topo -m`` for GPUDirect RDMA.

    NVIDIA's guidance: GDR performance is good over PIX and PXB, likely good
    over PHB, and bad over NODE and SYS.  NVLink classes (``NV1`` ... ``NV18``)
    are GPU-to-GPU links and count as good; ``SOC``, the name older drivers
    used for ``SYS``, counts as bad.

    :param cls: a class as printed in the matrix, e.g. ``"PXB"`` or ``"NV12"``
        (surrounding whitespace and letter case are ignored).
    :returns: ``"good"`` (PIX, PXB, NV#), ``"warn"`` (PHB) or ``"bad"``
        (NODE, SYS, SOC).
    :raises TopoMatrixError: for ``X`` (a device and itself have no path)
        and for any class not listed above.
    """
    if not isinstance(cls, str):
        raise TopoMatrixError(
            f"gpudirect_distance_verdict: expected a class string, got {cls!r}"
        )
    normalized = cls.strip().upper()
    normalized = _OLD_NAMES.get(normalized, normalized)
    if _NVLINK_CLASS.fullmatch(normalized):
        return "good"
    if normalized in _topology.DISTANCE_ORDER:
        return _topology.distance_verdict(normalized)
    if normalized == _topology.SELF:
        raise TopoMatrixError(
            "gpudirect_distance_verdict: 'X' marks a device against itself, not a path"
        )
    raise TopoMatrixError(
        f"gpudirect_distance_verdict: unknown distance class {cls!r}"
    )
