# -*- coding: utf-8 -*-
"""module_utils/gpudirect_nic_config.py on the public outputs in tests/fixtures/nic_config/ (issue #32)."""

import os

import pytest

from ansible.module_utils.gpudirect_nic_config import (
    PROFILES,
    parse_mlnx_qos,
    parse_mlxconfig_query,
    parse_value,
    plan_firmware,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "nic_config")


def fixture(name):
    with open(os.path.join(FIXTURES, name), "rb") as handle:
        return handle.read().decode("utf-8")


def with_row(text, row):
    """A real output with one row appended to its table (the card state a test needs)."""
    return text.rstrip("\n") + "\n" + row + "\n"


# --- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,name,value", [
    ("True(1)", "True", 1), ("False(0)", "False", 0), ("ETH(2)", "ETH", 2), ("IB(1)", "IB", 1),
    ("DEVICE_DEFAULT(0)", "DEVICE_DEFAULT", 0), ("4", None, 4), ("_256KB(1)", "_256KB", 1),
    ("ETH", "ETH", None), ("per_mkey(0)", "per_mkey", 0),
])
def test_value_keeps_name_and_number(raw, name, value):
    parsed = parse_value(raw)
    assert (parsed["raw"], parsed["name"], parsed["value"]) == (raw, name, value)


def test_array_value_is_a_range():
    assert parse_value("Array[0..15]")["array"] == [0, 15]


# --- mlxconfig / mstconfig query -----------------------------------------------------------

def test_mstconfig_single_next_boot_column_cx6dx():
    result = parse_mlxconfig_query(fixture("mstconfig-cx6dx-next-boot-only.txt"))
    assert result["errors"] == [] and len(result["devices"]) == 1
    dev = result["devices"][0]
    assert dev["type"] == "ConnectX6DX" and dev["name"] == "MCX623432AN-ADA_Ax"
    assert dev["device"] == "4b:00.0" and dev["description"].startswith("ConnectX-6 Dx EN")
    assert dev["columns"] == ["next_boot"]
    assert dev["params"]["ROCE_CONTROL"]["next_boot"]["name"] == "ROCE_ENABLE"
    assert dev["params"]["ROCE_CONTROL"]["next_boot"]["value"] == 2
    assert dev["params"]["PCI_WR_ORDERING"]["next_boot"] == {"raw": "per_mkey(0)", "name": "per_mkey", "value": 0}
    assert dev["params"]["PCI_ATOMIC_MODE"]["next_boot"]["name"] == "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED"
    assert dev["params"]["PF_TOTAL_SF"]["next_boot"]["value"] == 0
    assert dev["params"]["PCI_DOWNSTREAM_PORT_OWNER"]["array"] == [0, 15]
    assert dev["params"]["ATS_ENABLED"]["next_boot"]["value"] == 0
    # an EN card without the advanced PCI settings shown: no link type, no MAX_ACC_OUT_READ
    assert "LINK_TYPE_P1" not in dev["params"] and "MAX_ACC_OUT_READ" not in dev["params"]
    assert "current" not in dev["params"]["ATS_ENABLED"]


def test_three_columns_and_star_mark_cx4_operator_data():
    dev = parse_mlxconfig_query(fixture("mlxconfig-cx4-three-column-operator-test.txt"))["devices"][0]
    assert dev["columns"] == ["default", "current", "next_boot"]
    keep = dev["params"]["KEEP_IB_LINK_UP_P2"]
    assert (keep["default"]["value"], keep["current"]["value"], keep["next_boot"]["value"]) == (0, 1, 1)
    assert keep["modified"] is True and dev["params"]["KEEP_LINK_UP_ON_BOOT_P2"]["modified"] is False
    memic = dev["params"]["MEMIC_SIZE_LIMIT"]
    assert memic["current"]["name"] == "_256KB" and memic["next_boot"]["name"] == "DISABLED"
    assert sorted(dev["modified"]) == ["KEEP_IB_LINK_UP_P2", "MEMIC_SIZE_LIMIT"]
    assert dev["params"]["ESWITCH_HAIRPIN_DESCRIPTORS"]["array"] == [0, 7]


def test_three_columns_cx6lx_excerpt_without_device_header():
    result = parse_mlxconfig_query(fixture("mlxconfig-cx6lx-three-column-excerpt.txt"))
    dev = result["devices"][0]
    assert dev["columns"] == ["default", "current", "next_boot"] and dev["type"] is None
    assert dev["params"]["ROCE_NEXT_PROTOCOL"]["current"]["value"] == 254
    assert dev["params"]["HOST_CHAINING_MODE"]["next_boot"]["name"] == "DISABLED"
    assert len(dev["params"]) == 12


def test_array_elements_with_raw_current_values_cx9():
    dev = parse_mlxconfig_query(fixture("mlxconfig-cx9-array-elements-operator-test.txt"))["devices"][0]
    owner0 = dev["params"]["PCI_DOWNSTREAM_PORT_OWNER[0]"]
    assert owner0["current"] == {"raw": "148", "name": None, "value": 148}
    assert owner0["next_boot"]["name"] == "DEVICE_DEFAULT"
    assert dev["params"]["PCI_DOWNSTREAM_PORT_OWNER[1]"]["current"]["name"] == "HOST_0"
    assert "PCI_DOWNSTREAM_PORT_OWNER[3]" not in dev["params"]


def test_several_devices_in_one_output():
    result = parse_mlxconfig_query(fixture("mlxconfig-multi-device-assembled.txt"))
    assert [d["index"] for d in result["devices"]] == [1, 2]
    assert [d["type"] for d in result["devices"]] == ["ConnectX6DX", "ConnectX7"]
    assert "NUM_OF_VFS" not in result["devices"][0]["params"]
    assert result["devices"][1]["params"]["NUM_OF_VFS"]["next_boot"]["value"] == 16


def test_failed_open_is_reported_not_raised():
    result = parse_mlxconfig_query(fixture("mlxconfig-error-open-device-shape.txt"))
    assert result["devices"] == []
    assert result["errors"] == ["Failed to open device: 0000:99:00.0"]


def test_unknown_parameter_is_reported_on_its_device():
    result = parse_mlxconfig_query(fixture("mlxconfig-error-unknown-parameter-shape.txt"))
    dev = result["devices"][0]
    assert dev["columns"] is None and dev["unknown_parameters"] == ["LINK_TYPE_P1"]
    assert result["unknown_parameters"] == ["LINK_TYPE_P1"]
    plan = plan_firmware(result, {"LINK_TYPE_P1": "ETH"})["devices"][0]
    assert plan["skipped"][0]["param"] == "LINK_TYPE_P1" and "Unknown Parameter" in plan["skipped"][0]["reason"]
    assert plan["reset_needed"] is False


def test_truncated_output_names_the_row():
    with pytest.raises(ValueError, match=r"PCI_ATOMIC_MODE has 0 value\(s\)"):
        parse_mlxconfig_query(fixture("mstconfig-cx6dx-truncated.txt"))


def test_truncated_before_the_table_is_an_error():
    text = fixture("mstconfig-cx6dx-next-boot-only.txt")
    head = text[:text.index("Configurations:")]
    with pytest.raises(ValueError, match="no Configurations table"):
        parse_mlxconfig_query(head)


@pytest.mark.parametrize("text,message", [
    ("", "no device"),
    ("hello world\n", "could not read 'hello world'"),
    ("Configurations:      Later     Soon\n", "column titles"),
])
def test_malformed_input_names_what_it_could_not_read(text, message):
    with pytest.raises(ValueError, match=message):
        parse_mlxconfig_query(text)


def test_grepped_rows_without_header_are_refused():
    text = fixture("mstconfig-cx6dx-next-boot-only.txt")
    rows = "\n".join(line for line in text.splitlines() if "ROCE" in line)
    with pytest.raises(ValueError, match="could not read"):
        parse_mlxconfig_query(rows)


# --- firmware plan -------------------------------------------------------------------------

def cx6dx():
    return parse_mlxconfig_query(fixture("mstconfig-cx6dx-next-boot-only.txt"))


def test_gpudirect_profile_on_a_card_without_advanced_pci_settings():
    plan = plan_firmware(cx6dx(), {"profiles": ["gpudirect"]})
    dev = plan["devices"][0]
    set_names = [row["param"] for row in dev["to_set"]]
    assert set_names == ["ADVANCED_PCI_SETTINGS", "PCI_WR_ORDERING"]
    assert dev["set_args"] == ["ADVANCED_PCI_SETTINGS=1", "PCI_WR_ORDERING=1"]
    assert dev["to_set"][1]["next_boot"] == "per_mkey(0)"
    # ATS is already off (bare metal) for next boot
    assert [row["param"] for row in dev["in_place"]] == ["ATS_ENABLED"]
    # PCI_WR_ORDERING is shown on this card, MAX_ACC_OUT_READ is hidden until the advanced settings apply
    assert [row["param"] for row in dev["deferred"]] == ["MAX_ACC_OUT_READ"]
    assert dev["reset_needed"] is True and plan["reset_needed"] is True
    assert dev["current_known"] is False


def test_gpudirect_vm_profile_wants_ats():
    dev = plan_firmware(cx6dx(), {"profiles": ["gpudirect_vm"]})["devices"][0]
    ats = [row for row in dev["to_set"] if row["param"] == "ATS_ENABLED"][0]
    assert ats["next_boot"] == "False(0)" and ats["wanted"] == "1"
    assert "ATS_ENABLED=1" in dev["set_args"]


def test_pci_wr_ordering_relaxed_by_name_is_compared_by_number():
    text = fixture("mstconfig-cx6dx-next-boot-only.txt").replace("per_mkey(0)", "force_relax(1)")
    dev = plan_firmware(parse_mlxconfig_query(text), {"PCI_WR_ORDERING": "force_relax"})["devices"][0]
    assert [row["param"] for row in dev["in_place"]] == ["PCI_WR_ORDERING"] and not dev["reset_needed"]
    dev = plan_firmware(cx6dx(), {"PCI_WR_ORDERING": "force_relax"})["devices"][0]
    assert dev["set_args"] == ["PCI_WR_ORDERING=1"]


def test_roce_profile_on_a_dual_port_card_is_in_place():
    dev = plan_firmware(cx6dx(), {"profiles": ["roce"]})["devices"][0]
    # CNP_DSCP is 48 on this card: the profile wants 4
    assert sorted(r["param"] for r in dev["to_set"]) == ["CNP_DSCP_P1", "CNP_DSCP_P2"]
    assert sorted(r["param"] for r in dev["in_place"]) == [
        "CNP_802P_PRIO_P1", "CNP_802P_PRIO_P2", "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"]


def test_roce_profile_on_a_single_port_table_skips_port_two():
    query = parse_mlxconfig_query(fixture("mlxconfig-multi-device-assembled.txt"))
    dev = plan_firmware(query, {"profiles": ["roce"]})["devices"][1]
    assert all(row["param"].endswith("_P1") for row in dev["not_exposed"])
    assert sorted(row["param"] for row in dev["skipped"]) == ["CNP_802P_PRIO_P2", "CNP_DSCP_P2", "ROCE_CC_PRIO_MASK_P2"]


def test_raw_parameter_the_card_does_not_expose_is_reported():
    dev = plan_firmware(cx6dx(), {"LINK_TYPE_P1": "ETH", "SRIOV_EN": True, "NUM_OF_VFS": 8})["devices"][0]
    assert dev["not_exposed"] == [{"param": "LINK_TYPE_P1", "source": "raw"}]
    assert dev["set_args"] == ["NUM_OF_VFS=8", "SRIOV_EN=1"]


def test_next_boot_already_set_but_not_current_is_pending():
    query = parse_mlxconfig_query(fixture("mlxconfig-cx4-three-column-operator-test.txt"))
    plan = plan_firmware(query, {"KEEP_IB_LINK_UP_P2": False, "MEMIC_SIZE_LIMIT": "DISABLED"})
    dev = plan["devices"][0]
    assert [row["param"] for row in dev["pending"]] == ["MEMIC_SIZE_LIMIT"]
    assert dev["pending"][0]["current"] == "_256KB(1)" and dev["pending"][0]["next_boot"] == "DISABLED(0)"
    assert [row["param"] for row in dev["to_set"]] == ["KEEP_IB_LINK_UP_P2"]
    assert dev["set_args"] == ["KEEP_IB_LINK_UP_P2=0"]
    assert dev["reset_needed"] is True and dev["current_known"] is True


def test_everything_in_place_needs_no_reset():
    query = parse_mlxconfig_query(fixture("mlxconfig-cx4-three-column-operator-test.txt"))
    dev = plan_firmware(query, {"KEEP_LINK_UP_ON_BOOT_P2": "False"})["devices"][0]
    assert dev["in_place"][0]["param"] == "KEEP_LINK_UP_ON_BOOT_P2" and dev["reset_needed"] is False


def test_max_acc_out_read_auto_skipped_where_default_is_not_zero():
    text = with_row(fixture("mlxconfig-cx4-three-column-operator-test.txt").replace(
        "The '*' shows parameters with next value different from default/current value.\n", ""),
        "         MAX_ACC_OUT_READ                    44              44              44")
    dev = plan_firmware(parse_mlxconfig_query(text), {"MAX_ACC_OUT_READ": 0})["devices"][0]
    assert dev["skipped"][0]["param"] == "MAX_ACC_OUT_READ" and "44" in dev["skipped"][0]["reason"]
    dev = plan_firmware(parse_mlxconfig_query(text), {"MAX_ACC_OUT_READ": 128})["devices"][0]
    assert dev["set_args"] == ["MAX_ACC_OUT_READ=128"]


def test_array_parameter_must_name_an_element():
    with pytest.raises(ValueError, match=r"ESWITCH_HAIRPIN_DESCRIPTORS\[0\]"):
        plan_firmware(parse_mlxconfig_query(fixture("mlxconfig-cx4-three-column-operator-test.txt")),
                      {"ESWITCH_HAIRPIN_DESCRIPTORS": 128})


@pytest.mark.parametrize("wanted,knob", [
    ({"profiles": ["fast"]}, "profiles"),
    ({"profiles": ["gpudirect", "gpudirect_vm"]}, "profiles"),
    ({"ATS_ENABLED": "maybe"}, "ATS_ENABLED"),
    ({"ATS_ENABLED": 2}, "ATS_ENABLED"),
    ({"NUM_OF_VFS": "many"}, "NUM_OF_VFS"),
    ({"NUM_OF_VFS": -1}, "NUM_OF_VFS"),
    ({"NUM_OF_VFS": 1.5}, "NUM_OF_VFS"),
    ({"LINK_TYPE_P1": "FDDI"}, "LINK_TYPE_P1"),
    ({"LINK_TYPE_P1": True}, "LINK_TYPE_P1"),
    ({"LINK_TYPE_P1": "ETH(1)"}, "LINK_TYPE_P1"),
    ({"PCI_WR_ORDERING": "relaxed"}, "PCI_WR_ORDERING"),
    ({"CNP_DSCP_P1": 64}, "CNP_DSCP_P1"),
    ({"ats_enabled": 1}, "ats_enabled"),
    ({"SRIOV_EN": None}, "SRIOV_EN"),
])
def test_bad_wanted_input_names_the_knob(wanted, knob):
    with pytest.raises(ValueError, match=knob):
        plan_firmware(cx6dx(), wanted)


def test_profiles_are_overridden_by_raw_values():
    dev = plan_firmware(cx6dx(), {"profiles": ["gpudirect"], "ATS_ENABLED": True})["devices"][0]
    ats = [row for row in dev["to_set"] if row["param"] == "ATS_ENABLED"][0]
    assert ats["source"] == "raw"
    assert PROFILES["gpudirect"]["ATS_ENABLED"] == 0


# --- mlnx_qos ------------------------------------------------------------------------------

def test_mlnx_qos_pcp_trust():
    qos = parse_mlnx_qos(fixture("mlnx_qos-pcp-pfc3.txt"))
    assert qos["trust"] == "pcp" and qos["dcbx_mode"] == "OS controlled" and qos["dscp2prio"] is None
    assert qos["receive_buffer_sizes"] == [80256, 80256, 896, 80256, 896, 896, 896, 896]
    assert qos["cable_len"] == 7
    assert [p for p in range(8) if qos["pfc"]["enabled"][p]] == [3]
    assert qos["pfc"]["buffer"] == [0, 2, 5, 7, 1, 2, 3, 6]
    assert [(t["tc"], t["priorities"]) for t in qos["tcs"][:2]] == [(0, [1]), (1, [0])]
    assert all(t["tsa"] == "vendor" and t["bw"] is None for t in qos["tcs"])


def test_mlnx_qos_dscp_trust_with_mapping():
    qos = parse_mlnx_qos(fixture("mlnx_qos-dscp-pfc3-netarbiter.txt"))
    assert qos["trust"] == "dscp" and len(qos["dscp2prio"]) == 64
    assert qos["dscp2prio"][26] == 3 and qos["dscp2prio"][46] == 5 and qos["dscp2prio"][0] == 0
    assert qos["receive_buffer_sizes"] is None and qos["pfc"]["buffer"] is None
    assert qos["pfc"]["enabled"] == [False, False, False, True, False, False, False, False]
    assert len(qos["tcs"]) == 8


def test_mlnx_qos_dscp_trust_with_buffers_crlf():
    qos = parse_mlnx_qos(fixture("mlnx_qos-dscp-buffers.txt"))
    assert qos["trust"] == "dscp" and qos["dscp2prio"][63] == 7
    assert qos["receive_buffer_sizes"][0] == 524160 and not any(qos["pfc"]["enabled"])


def test_mlnx_qos_truncated_and_foreign_input():
    text = fixture("mlnx_qos-dscp-pfc3-netarbiter.txt")
    with pytest.raises(ValueError, match="PFC"):
        parse_mlnx_qos(text[:text.index("PFC configuration:")])
    with pytest.raises(ValueError, match="trust"):
        parse_mlnx_qos("Cable len: 7\n")
    with pytest.raises(ValueError, match="could not read"):
        parse_mlnx_qos(fixture("mstconfig-cx6dx-next-boot-only.txt"))
    cut = text.replace("        enabled     0   0   0   1   0   0   0   0   ", "        enabled     0   0   0")
    with pytest.raises(ValueError, match="PFC enabled has 3 entries"):
        parse_mlnx_qos(cut)
