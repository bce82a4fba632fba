# -*- coding: utf-8 -*-
"""Aligned text tables for the run's reports: the one renderer (issue #31: four copies before).

``text_table(rows, indent="", rule=False)``
    ``rows[0]`` is the header. Every column is as wide as its widest cell (``str()`` of it),
    columns are two blanks apart, each line starts with ``indent`` and has no trailing blanks;
    ``rule`` puts a line of dashes under the header.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

GAP = "  "


def text_table(rows, indent="", rule=False):
    """The lines of ``rows`` (header first) aligned in columns; ``[]`` for no rows."""
    rows = [[str(cell) for cell in row] for row in rows or []]
    if not rows:
        return []
    count = max(len(row) for row in rows)
    rows = [row + [""] * (count - len(row)) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(count)]
    if rule:
        rows.insert(1, ["-" * width for width in widths])
    return [indent + GAP.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
