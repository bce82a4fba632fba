"""module_utils/gpudirect_table.py: the one text-table renderer (issue #31, outcome 4), used by
gpudirect_hardware.table (the drain's before/after table) and the gpudirect_verify fleet and
fabric-ring tables."""

from ansible.module_utils import gpudirect_hardware as hardware
from ansible.module_utils.gpudirect_table import text_table


def test_columns_as_wide_as_their_widest_cell_two_blanks_apart_no_trailing_blanks():
    assert text_table([("host", "result", "note"), ("gpu-node-01", "passed", ""), ("g2", "failed", "x")]) == [
        "host         result  note",
        "gpu-node-01  passed",
        "g2           failed  x",
    ]


def test_indent_and_rule_under_the_header():
    assert text_table([("a", "bb"), (1, 2.5)], indent="  ", rule=True) == [
        "  a  bb",
        "  -  ---",
        "  1  2.5",
    ]


def test_no_rows_and_ragged_rows():
    assert text_table([]) == [] and text_table(None) == []
    assert text_table([("a", "b", "c"), ("x",)]) == ["a  b  c", "x"]


def test_the_drain_hardware_table_reads_as_before():
    rows = [{"what": "GPU 0000:17:00.0 link", "before": "x16 16.0 GT/s", "after": "x8 16.0 GT/s"}]
    assert hardware.table(rows) == [
        "what                   before the disruption  after it",
        "GPU 0000:17:00.0 link  x16 16.0 GT/s          x8 16.0 GT/s",
    ]
