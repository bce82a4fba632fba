"""Unit tests for plugin_utils/gpudirect_topo_matrix.py (the parser and the verdict), which the verify and
report filters call.

The topology tests run on real ``nvidia-smi topo -m`` captures: the one from the
project's H200 node (tests/fixtures/gpu_node/h200/capture/), and public outputs stored under
tests/fixtures/topo/ (their sources are listed in the README.md there).  The
OFED parser is tested in test_gpudirect_ofed.py and test_versions.py (module_utils/gpudirect_versions.py).
"""

import os

import pytest
from ansible.module_utils.gpudirect_topo_matrix import (
    TopoMatrixError,
    gpudirect_distance_verdict,
    nvidia_topo_matrix,
)
from conftest import H200_CAPTURE, PROJECT_FIXTURES

TOPO_DIR = os.path.join(PROJECT_FIXTURES, "topo")
H200_TOPO = os.path.join(H200_CAPTURE, "nvidia-smi-topo.txt")

PUBLIC_TOPO_FIXTURES = [
    "rtx6000ada_4gpu_4nic_spaces.txt",
    "h100_sxm_8gpu_8nic_nv18.txt",
    "a100_sxm_8gpu_10nic_nv12_tabs.txt",
    "h100_pcie_1gpu_1nic.txt",
    "v100_traverse_4gpu_mlx5_columns.txt",
    "a100_della_2gpu_mlx5_columns.txt",
    "rtx4090_8gpu_2nic_no_legend.txt",
]


def read_topo(name):
    """Return the text of one fixture under tests/fixtures/topo/."""
    with open(os.path.join(TOPO_DIR, name), encoding="utf-8") as handle:
        return handle.read()


def replace_line(text, lineno, new_line):
    """Return ``text`` with its 1-based line ``lineno`` replaced."""
    lines = text.split("\n")
    lines[lineno - 1] = new_line
    return "\n".join(lines)


def delete_line(text, lineno):
    """Return ``text`` without its 1-based line ``lineno``."""
    lines = text.split("\n")
    del lines[lineno - 1]
    return "\n".join(lines)


def line_of(text, lineno):
    """Return the 1-based line ``lineno`` of ``text``."""
    return text.split("\n")[lineno - 1]


@pytest.fixture(scope="module")
def h200_text():
    with open(H200_TOPO, encoding="utf-8") as handle:
        return handle.read()


# --------------------------------------------------------------------------
# nvidia_topo_matrix on real captures
# --------------------------------------------------------------------------


def test_h200_gpu_only_capture_with_ansi_header(h200_text):
    assert (
        "\x1b[4m" in h200_text
    ), "the H200 capture is expected to carry the ANSI underline"
    topo = nvidia_topo_matrix(h200_text)
    assert topo == {
        "devices": ["GPU0"],
        "matrix": {"GPU0": {"GPU0": "X"}},
        "cpu_affinity": {"GPU0": "0-15"},
        "numa_affinity": {"GPU0": "0"},
        "gpu_numa_id": {"GPU0": None},
        "nic_legend": {},
    }


def test_rtx6000ada_space_separated_with_nic_legend():
    topo = nvidia_topo_matrix(read_topo("rtx6000ada_4gpu_4nic_spaces.txt"))
    assert topo["devices"] == [
        "GPU0",
        "GPU1",
        "GPU2",
        "GPU3",
        "NIC0",
        "NIC1",
        "NIC2",
        "NIC3",
    ]
    assert topo["matrix"]["GPU0"]["NIC0"] == "NODE"
    assert topo["matrix"]["GPU0"]["NIC2"] == "SYS"
    assert topo["matrix"]["GPU2"]["NIC3"] == "NODE"
    assert topo["matrix"]["GPU1"]["GPU0"] == "NODE"
    assert topo["matrix"]["NIC0"]["NIC1"] == "PIX"
    assert topo["matrix"]["NIC3"]["GPU3"] == "NODE"
    assert topo["cpu_affinity"] == {
        "GPU0": "0-31",
        "GPU1": "0-31",
        "GPU2": "32-63",
        "GPU3": "32-63",
    }
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    assert topo["gpu_numa_id"] == {
        "GPU0": None,
        "GPU1": None,
        "GPU2": None,
        "GPU3": None,
    }
    assert topo["nic_legend"] == {
        "NIC0": "mlx5_0",
        "NIC1": "mlx5_1",
        "NIC2": "mlx5_2",
        "NIC3": "mlx5_3",
    }


def test_h100_sxm_nvlink_and_one_pix_nic_per_gpu():
    topo = nvidia_topo_matrix(read_topo("h100_sxm_8gpu_8nic_nv18.txt"))
    gpus = [f"GPU{i}" for i in range(8)]
    nics = [f"NIC{i}" for i in range(8)]
    assert topo["devices"] == gpus + nics
    assert topo["matrix"]["GPU0"]["GPU7"] == "NV18"
    assert topo["matrix"]["GPU3"]["NIC3"] == "PIX"
    assert topo["matrix"]["GPU4"]["NIC0"] == "SYS"
    assert topo["matrix"]["GPU4"]["NIC5"] == "NODE"
    assert topo["matrix"]["NIC6"]["NIC4"] == "NODE"
    for index, gpu in enumerate(gpus):
        pix = [nic for nic in nics if topo["matrix"][gpu][nic] == "PIX"]
        assert pix == [f"NIC{index}"]
        assert all(
            topo["matrix"][gpu][other] == "NV18" for other in gpus if other != gpu
        )
    assert topo["cpu_affinity"]["GPU0"] == "0-47,96-143"
    assert topo["cpu_affinity"]["GPU5"] == "48-95,144-191"
    assert topo["numa_affinity"]["GPU7"] == "1"
    assert set(topo["gpu_numa_id"]) == set(gpus)
    assert topo["nic_legend"]["NIC7"] == "mlx5_7"
    assert len(topo["nic_legend"]) == 8


def test_a100_tab_separated_without_gpu_numa_id_column():
    topo = nvidia_topo_matrix(read_topo("a100_sxm_8gpu_10nic_nv12_tabs.txt"))
    assert len(topo["devices"]) == 18
    assert topo["devices"][-1] == "NIC9"
    assert topo["matrix"]["GPU0"]["NIC1"] == "PXB"
    assert topo["matrix"]["GPU0"]["NIC2"] == "SYS"
    assert topo["matrix"]["GPU6"]["NIC7"] == "PXB"
    assert topo["matrix"]["GPU1"]["GPU6"] == "NV12"
    assert topo["matrix"]["NIC8"]["NIC9"] == "PIX"
    assert topo["cpu_affinity"]["GPU0"] == "48-63,176-191"
    assert topo["cpu_affinity"]["GPU4"] == "112-127,240-255"
    assert topo["numa_affinity"] == {
        "GPU0": "3",
        "GPU1": "3",
        "GPU2": "1",
        "GPU3": "1",
        "GPU4": "7",
        "GPU5": "7",
        "GPU6": "5",
        "GPU7": "5",
    }
    assert topo["gpu_numa_id"] == {}
    assert topo["nic_legend"]["NIC0"] == "mlx5_0"
    assert topo["nic_legend"]["NIC9"] == "mlx5_9"


def test_h100_pcie_single_gpu_single_nic():
    topo = nvidia_topo_matrix(read_topo("h100_pcie_1gpu_1nic.txt"))
    assert topo["devices"] == ["GPU0", "NIC0"]
    assert topo["matrix"] == {
        "GPU0": {"GPU0": "X", "NIC0": "PHB"},
        "NIC0": {"GPU0": "PHB", "NIC0": "X"},
    }
    assert topo["cpu_affinity"] == {"GPU0": "0-251"}
    assert topo["numa_affinity"] == {"GPU0": "0"}
    assert topo["gpu_numa_id"] == {"GPU0": None}
    assert topo["nic_legend"] == {"NIC0": "mlx5_0"}


def test_traverse_old_driver_mlx5_columns_map_to_themselves():
    topo = nvidia_topo_matrix(read_topo("v100_traverse_4gpu_mlx5_columns.txt"))
    assert topo["devices"] == [
        "GPU0",
        "GPU1",
        "GPU2",
        "GPU3",
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
    ]
    assert topo["matrix"]["GPU0"]["GPU1"] == "NV3"
    assert topo["matrix"]["GPU0"]["GPU2"] == "SYS"
    assert topo["matrix"]["GPU2"]["mlx5_2"] == "NODE"
    assert topo["matrix"]["mlx5_0"]["mlx5_1"] == "PIX"
    assert topo["matrix"]["mlx5_3"]["GPU0"] == "SYS"
    assert topo["cpu_affinity"]["GPU3"] == "64-127"
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "8", "GPU3": "8"}
    assert topo["gpu_numa_id"] == {}
    assert topo["nic_legend"] == {f"mlx5_{i}": f"mlx5_{i}" for i in range(4)}


def test_della_old_driver_two_gpus_two_mlx5():
    topo = nvidia_topo_matrix(read_topo("a100_della_2gpu_mlx5_columns.txt"))
    assert topo["devices"] == ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]
    assert topo["matrix"]["GPU0"]["mlx5_0"] == "NODE"
    assert topo["matrix"]["GPU1"]["mlx5_0"] == "SYS"
    assert topo["matrix"]["GPU1"]["mlx5_1"] == "NODE"
    assert topo["cpu_affinity"] == {"GPU0": "0-63", "GPU1": "64-127"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    assert "mlx5_0" not in topo["cpu_affinity"]
    assert topo["nic_legend"] == {"mlx5_0": "mlx5_0", "mlx5_1": "mlx5_1"}


def test_rtx4090_nic_columns_without_legend_section():
    topo = nvidia_topo_matrix(read_topo("rtx4090_8gpu_2nic_no_legend.txt"))
    assert topo["devices"][-2:] == ["NIC0", "NIC1"]
    assert topo["matrix"]["GPU6"]["NIC0"] == "PHB"
    assert topo["matrix"]["GPU6"]["NIC1"] == "PHB"
    assert topo["matrix"]["GPU7"]["NIC0"] == "SYS"
    assert topo["matrix"]["NIC1"]["NIC0"] == "PIX"
    assert topo["cpu_affinity"]["GPU3"] == "0-55,112-167"
    assert topo["cpu_affinity"]["GPU4"] == "56-111,168-223"
    assert topo["numa_affinity"]["GPU4"] == "1"
    assert topo["gpu_numa_id"]["GPU7"] is None
    assert topo["nic_legend"] == {}


@pytest.mark.parametrize("name", PUBLIC_TOPO_FIXTURES)
def test_every_public_capture_is_square_symmetric_with_x_diagonal(name):
    topo = nvidia_topo_matrix(read_topo(name))
    devices = topo["devices"]
    assert list(topo["matrix"]) == devices
    for row in devices:
        assert list(topo["matrix"][row]) == devices
        assert topo["matrix"][row][row] == "X"
        for column in devices:
            assert topo["matrix"][row][column] == topo["matrix"][column][row]
    gpus = [device for device in devices if device.startswith("GPU")]
    assert sorted(topo["cpu_affinity"]) == sorted(gpus)


# --------------------------------------------------------------------------
# nvidia_topo_matrix: formatting variants
# --------------------------------------------------------------------------


def test_ansi_escapes_anywhere_are_ignored():
    text = read_topo("rtx6000ada_4gpu_4nic_spaces.txt")
    header = line_of(text, 1)
    decorated = replace_line(text, 1, "\x1b[4m" + header + "\x1b[0m")
    decorated = decorated.replace("PIX", "\x1b[1mPIX\x1b[0m", 1)
    assert nvidia_topo_matrix(decorated) == nvidia_topo_matrix(text)


def test_tabs_and_spaces_give_the_same_result():
    text = read_topo("a100_sxm_8gpu_10nic_nv12_tabs.txt")
    assert nvidia_topo_matrix(text.expandtabs(8)) == nvidia_topo_matrix(text)


def test_crlf_line_endings_and_surrounding_blank_lines():
    text = read_topo("h100_pcie_1gpu_1nic.txt")
    assert nvidia_topo_matrix(
        "\n\n" + text.replace("\n", "\r\n")
    ) == nvidia_topo_matrix(text)


def test_legend_block_is_not_read_as_rows():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    matrix_only = text.split("\n\nLegend:")[0] + "\n"
    assert nvidia_topo_matrix(matrix_only) == nvidia_topo_matrix(text)


def test_header_with_cpu_affinity_only():
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tPIX\tPHB\t0-9,20-29\n"
        "GPU1\tPIX\t X \tPHB\t0-9,20-29\n"
        "mlx5_0\tPHB\tPHB\t X \n"
    )
    topo = nvidia_topo_matrix(text)
    assert topo["cpu_affinity"] == {"GPU0": "0-9,20-29", "GPU1": "0-9,20-29"}
    assert topo["numa_affinity"] == {}
    assert topo["nic_legend"] == {"mlx5_0": "mlx5_0"}


# --------------------------------------------------------------------------
# nvidia_topo_matrix: malformed input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty_input_is_rejected(text):
    with pytest.raises(TopoMatrixError, match="empty input"):
        nvidia_topo_matrix(text)


def test_escape_sequences_only_count_as_empty():
    with pytest.raises(TopoMatrixError, match="empty input"):
        nvidia_topo_matrix("\x1b[4m\x1b[0m\n")


@pytest.mark.parametrize("value", [None, 42, ["GPU0"]])
def test_non_string_input_is_rejected(value):
    with pytest.raises(
        TopoMatrixError, match="expected the command output as a string"
    ):
        nvidia_topo_matrix(value)


def test_missing_header_names_the_first_line():
    text = "$ nvidia-smi topo -m\n" + read_topo("h100_pcie_1gpu_1nic.txt")
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(text)
    message = str(error.value)
    assert "header missing" in message
    assert "line 1:" in message
    assert repr("$ nvidia-smi topo -m") in message


def test_legend_without_matrix_reports_missing_header():
    text = "\nLegend:\n\n  X    = Self\n"
    with pytest.raises(
        TopoMatrixError, match=r"line 2: matrix header missing.*'Legend:'"
    ):
        nvidia_topo_matrix(text)


def test_row_with_a_missing_cell_names_the_line():
    text = read_topo("rtx6000ada_4gpu_4nic_spaces.txt")
    broken_row = (
        "GPU1    NODE     X      SYS     SYS     NODE    NODE    SYS     "
        "0-31    0               N/A"
    )
    broken = replace_line(text, 3, broken_row)
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(broken)
    message = str(error.value)
    assert "line 3:" in message
    assert "row GPU1 has 10 cells, expected 8 or 11" in message
    assert repr(broken_row) in message


def test_nic_row_with_an_extra_cell_names_the_line():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    broken_row = "mlx5_1\tSYS\tNODE\tSYS\t X \tSYS"
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(replace_line(text, 5, broken_row))
    assert "line 5:" in str(error.value)
    assert repr(broken_row) in str(error.value)


def test_unknown_row_name_names_the_line():
    text = read_topo("h100_sxm_8gpu_8nic_nv18.txt")
    original = line_of(text, 12)
    assert original.startswith("NIC2 ")
    renamed = "NIC9" + original[4:]
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(replace_line(text, 12, renamed))
    message = str(error.value)
    assert "line 12:" in message
    assert "unknown row name 'NIC9'" in message
    assert repr(renamed) in message


def test_duplicated_row_names_the_second_one():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    gpu0 = line_of(text, 2)
    broken = replace_line(text, 3, gpu0)
    with pytest.raises(TopoMatrixError, match=r"line 3: second row for GPU0"):
        nvidia_topo_matrix(broken)


def test_missing_row_names_the_header_line():
    text = read_topo("rtx6000ada_4gpu_4nic_spaces.txt")
    broken = delete_line(text, 9)
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(broken)
    message = str(error.value)
    assert "line 1:" in message
    assert "no matrix row for column(s) NIC3" in message
    assert repr(line_of(text, 1)) in message


def test_unknown_attribute_column_title_names_the_header():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    header = line_of(text, 1) + "\tFoo Bar"
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(replace_line(text, 1, header))
    assert "line 1: unknown column title at 'Foo Bar'" in str(error.value)
    assert repr(header) in str(error.value)


def test_value_in_place_of_a_distance_class_names_the_line():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    broken_row = "GPU0\t X \tSYS\tNODE\t0-63\t0\t0"
    with pytest.raises(
        TopoMatrixError, match=r"line 2: cell mlx5_1 of row GPU0 is '0-63'"
    ):
        nvidia_topo_matrix(replace_line(text, 2, broken_row))


def test_diagonal_other_than_x_names_the_line():
    text = read_topo("a100_della_2gpu_mlx5_columns.txt")
    broken_row = "GPU1\t X \tSYS\tSYS\tNODE\t64-127\t1"
    with pytest.raises(
        TopoMatrixError, match=r"line 3: row GPU1 has 'SYS' in its own column"
    ):
        nvidia_topo_matrix(replace_line(text, 3, broken_row))


def test_error_quotes_ansi_header_verbatim(h200_text):
    broken = h200_text.replace("GPU0\tCPU Affinity", "GPU0\tCPU Affinity\tWhatever", 1)
    with pytest.raises(TopoMatrixError) as error:
        nvidia_topo_matrix(broken)
    message = str(error.value)
    assert "line 1:" in message
    assert "\\x1b[4m" in message


# --------------------------------------------------------------------------
# gpudirect_distance_verdict
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "verdict"),
    [
        ("PIX", "good"),
        ("PXB", "good"),
        ("NV1", "good"),
        ("NV4", "good"),
        ("NV12", "good"),
        ("NV18", "good"),
        ("PHB", "warn"),
        ("NODE", "bad"),
        ("SYS", "bad"),
        ("SOC", "bad"),
        (" pix ", "good"),
    ],
)
def test_verdict_mapping(cls, verdict):
    assert gpudirect_distance_verdict(cls) == verdict


@pytest.mark.parametrize("cls", ["X", "N/A", "NV", "NVX", "PCIE", "", None, 3])
def test_verdict_rejects_unknown_classes(cls):
    with pytest.raises(TopoMatrixError):
        gpudirect_distance_verdict(cls)


def test_verdict_on_real_matrices():
    h100 = nvidia_topo_matrix(read_topo("h100_sxm_8gpu_8nic_nv18.txt"))
    assert gpudirect_distance_verdict(h100["matrix"]["GPU2"]["NIC2"]) == "good"
    assert gpudirect_distance_verdict(h100["matrix"]["GPU2"]["NIC1"]) == "bad"
    rtx4090 = nvidia_topo_matrix(read_topo("rtx4090_8gpu_2nic_no_legend.txt"))
    assert gpudirect_distance_verdict(rtx4090["matrix"]["GPU6"]["NIC0"]) == "warn"
    della = nvidia_topo_matrix(read_topo("a100_della_2gpu_mlx5_columns.txt"))
    best = {
        gpudirect_distance_verdict(della["matrix"]["GPU0"][nic])
        for nic in ("mlx5_0", "mlx5_1")
    }
    assert best == {"bad"}
