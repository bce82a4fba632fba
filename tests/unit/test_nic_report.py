"""The NIC firmware section of the preflight table and of the per-host report (issue #32, outcome 4).

The data is what the project's own code produces from published tool outputs, never hand-written
plan dicts where the module can make them:

* the card's query: library/gpudirect_nic_config.py run (check mode, as roles/gpudirect_nic_config/tasks/plan.yml
  runs it) against an mstconfig that prints a capture of tests/fixtures/nic_config/ (sources in its
  README.md): the ConnectX-4 three-column table of NVIDIA's nic-configuration-operator tests
  (MEMIC_SIZE_LIMIT: Current _256KB(1), Next Boot DISABLED(0)) and the ConnectX-6 Dx mstconfig dump
  (Next Boot only, no LINK_TYPE_P1, MAX_ACC_OUT_READ hidden);
* the firmware version: library/gpudirect_facts.py on a fake sysfs tree whose RDMA device has
  ``fw_ver`` (28.40.1000 is the ConnectX-7 firmware named in the multi-device fixture's source);
* the plan record: the role's own tasks/plan.yml, run by ansible-playbook, for the Jinja side.
"""

import json
import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_facts
import gpudirect_nic_config as module
import gpudirect_report as report
import gpudirect_verify as verify
from conftest import PROJECT_FIXTURES, play_on_localhost
from sysfs_tree import SysfsTree

FIXTURES = os.path.join(PROJECT_FIXTURES, "nic_config")
CX = "0000:17:00.0"
CX6 = "0000:4b:00.0"
SYSTEM_PATH = os.environ["PATH"]    # before a test's fixture_tool narrows PATH to the fake tool


def tree_with(tmp_path, pci, fw_ver):
    """A GPU and one dual-port ConnectX card (two PFs, one RDMA device each)."""
    tree = SysfsTree(tmp_path / "root")
    tree.add_gpu("0000:03:00.0")
    second = pci[:-1] + "1"
    for n, function in enumerate((pci, second)):
        tree.add_nic(function, device=0x1021)
        tree.add_ib("mlx5_%d" % n, pci=function, fw_ver=fw_ver,
                    ports={1: {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "Ethernet",
                               "rate": "400 Gb/sec (4X NDR)"}})
    return tree


def facts_of(tree):
    return gpudirect_facts.gather_facts(tree.root, nvidia_smi=False, kernel_log=False)


@pytest.fixture
def fixture_tool(tmp_path, monkeypatch):
    """An mstconfig that prints one capture of tests/fixtures/nic_config/ for any query (no_e: it
    refuses -e, as older mstflint builds do)."""
    bindir = tmp_path / "fixture-bin"
    bindir.mkdir()
    script = bindir / "mstconfig"
    monkeypatch.setenv("PATH", str(bindir))

    def use(name, no_e=False):
        script.write_text("#!/bin/sh\n%s\n/bin/cat '%s'\n" % (
            "case \" $* \" in *' -e '*) echo '-E- Unknown option -e'; exit 1;; esac" if no_e else "",
            os.path.join(FIXTURES, name)))
        script.chmod(0o755)
    return use


def plan_record(result, wanted=True):
    """gpudirect_nic_config_plan as roles/gpudirect_nic_config/tasks/plan.yml records it from the module's result (the
    keys the filters read; the play test below checks the role's record itself)."""
    return {"wanted": wanted, "devices": result.get("devices", []), "changes": result.get("changes", []),
            "unsupported": result.get("unsupported", []), "tool_missing": result.get("tool_missing", ""),
            "skip_reason": result.get("skip_reason", "")}


def by_param(card):
    return dict((r["param"], r) for r in card["params"])


# ------------------------------------------------------------------ read from published captures

@pytest.fixture
def cx4(tmp_path, fixture_tool, run_module):
    """The ConnectX-4 three-column capture; wanted: one value in place, one whose Next Boot
    differs from Current (set earlier, waits for a reset), one to set, one the card lacks."""
    tree = tree_with(tmp_path, CX, "28.40.1000")
    fixture_tool("mlxconfig-cx4-three-column-operator-test.txt")
    result = run_module(module, {"root": tree.root, "params": {
        "KEEP_IB_LINK_UP_P2": True, "MEMIC_SIZE_LIMIT": 0, "KEEP_LINK_UP_ON_BOOT_P2": 1, "LINK_TYPE_P1": "ETH"}},
        check_mode=True)
    assert "failed" not in result, result
    return facts_of(tree), plan_record(result)


def test_each_managed_parameter_with_current_next_boot_and_a_marker(cx4):
    facts, plan = cx4
    [card] = report.gpudirect_nic_firmware(facts, plan)
    assert (card["pci"], card["rdma_devices"], card["type"], card["fw_ver"]) == \
        (CX, ["mlx5_0", "mlx5_1"], "ConnectX4", "28.40.1000")
    assert (card["status"], card["current_known"]) == ("read", True)
    rows = by_param(card)
    # Next Boot DISABLED(0) is wanted, the running _256KB(1) is not: differs, waits for the reset
    assert (rows["MEMIC_SIZE_LIMIT"]["state"], rows["MEMIC_SIZE_LIMIT"]["current"],
            rows["MEMIC_SIZE_LIMIT"]["next_boot"], rows["MEMIC_SIZE_LIMIT"]["differs"]) == \
        ("pending", "_256KB(1)", "DISABLED(0)", True)
    assert (rows["KEEP_LINK_UP_ON_BOOT_P2"]["state"], rows["KEEP_LINK_UP_ON_BOOT_P2"]["next_boot"]) == \
        ("to_set", "False(0)")
    assert (rows["KEEP_IB_LINK_UP_P2"]["state"], rows["KEEP_IB_LINK_UP_P2"]["current"],
            rows["KEEP_IB_LINK_UP_P2"]["differs"]) == ("in_place", "True(1)", False)
    # the card has no LINK_TYPE_P1: reported, not failed, and not counted as differing
    assert (rows["LINK_TYPE_P1"]["state"], rows["LINK_TYPE_P1"]["differs"]) == ("not_exposed", False)
    assert card["differs"] == ["KEEP_LINK_UP_ON_BOOT_P2", "MEMIC_SIZE_LIMIT"]
    assert card["not_exposed"] == ["LINK_TYPE_P1"]


def test_lines_mark_what_differs_and_what_the_card_lacks(cx4):
    facts, plan = cx4
    lines = report.gpudirect_nic_firmware_lines(facts, plan)
    assert lines[0] == "  NIC firmware: configuration read by gpudirect_nic_config; 2 parameter(s) differ from the knobs"
    assert lines[1] == "    %s mlx5_0,mlx5_1 ConnectX4 fw 28.40.1000" % CX
    line = dict((l.split()[0], l) for l in lines[2:])
    assert "current _256KB(1)" in line["MEMIC_SIZE_LIMIT"] and "next boot DISABLED(0)" in line["MEMIC_SIZE_LIMIT"]
    assert "DIFFERS from the knobs: running value" in line["MEMIC_SIZE_LIMIT"]
    assert "DIFFERS from the knobs: next boot is not the wanted value" in line["KEEP_LINK_UP_ON_BOOT_P2"]
    assert line["KEEP_IB_LINK_UP_P2"].endswith(" ok")
    assert "NOT EXPOSED by this card (reported, not failed" in line["LINK_TYPE_P1"]
    assert len(lines) == 6


def test_next_boot_only_tool_and_a_card_without_fw_ver(tmp_path, fixture_tool, run_module):
    """mstconfig without -e prints Next Boot alone: a pending value cannot be seen, and the section
    says so; MAX_ACC_OUT_READ is hidden by this firmware, LINK_TYPE_P1 absent on this EN card."""
    tree = tree_with(tmp_path, CX6, None)    # firmware version not published for this capture
    fixture_tool("mstconfig-cx6dx-next-boot-only.txt", no_e=True)
    result = run_module(module, {"root": tree.root, "profiles": ["gpudirect"], "params": {"LINK_TYPE_P1": "ETH"}},
                        check_mode=True)
    facts = facts_of(tree)
    [card] = report.gpudirect_nic_firmware(facts, plan_record(result))
    assert (card["fw_ver"], card["part"], card["current_known"]) == (None, "MCX623432AN-ADA_Ax", False)
    rows = by_param(card)
    assert (rows["PCI_WR_ORDERING"]["state"], rows["PCI_WR_ORDERING"]["current"],
            rows["PCI_WR_ORDERING"]["next_boot"]) == ("to_set", None, "per_mkey(0)")
    assert rows["MAX_ACC_OUT_READ"]["state"] == "deferred"
    assert rows["LINK_TYPE_P1"]["state"] == "not_exposed"
    assert card["differs"] == ["ADVANCED_PCI_SETTINGS", "PCI_WR_ORDERING"]
    lines = report.gpudirect_nic_firmware_lines(facts, plan_record(result))
    assert "fw unknown (no fw_ver in /sys/class/infiniband)" in lines[1]
    assert lines[2].strip().startswith("the tool printed Next Boot only")
    assert any(l.split()[0] == "PCI_WR_ORDERING" and "current ?" in l and "next boot per_mkey(0)" in l
               for l in lines)
    assert any(l.split()[0] == "MAX_ACC_OUT_READ" and "HIDDEN by the firmware" in l for l in lines)


def test_truncated_capture_never_reaches_the_report(tmp_path, fixture_tool, run_module):
    """A malformed query fails the module (the plan pass stops there): no half-read values exist
    to show as the card's configuration."""
    tree = tree_with(tmp_path, CX6, None)
    fixture_tool("mstconfig-cx6dx-truncated.txt")
    result = run_module(module, {"root": tree.root, "profiles": ["gpudirect"]}, check_mode=True)
    assert result["failed"] is True and "devices" not in result


# ------------------------------------------------------------------ not read, and why

@pytest.mark.parametrize("wanted", [False, "False"])   # "False": a record that went through text
def test_not_configured_says_so_and_still_shows_the_firmware_version(tmp_path, wanted):
    facts = facts_of(tree_with(tmp_path, CX, "28.40.1000"))
    lines = report.gpudirect_nic_firmware_lines(facts, {"wanted": wanted, "devices": [], "tool_missing": ""})
    assert lines[0].startswith("  NIC firmware: configuration not read (not configured): gpudirect_nic_config_profiles "
                               "and gpudirect_nic_config_params are empty")
    assert lines[1:] == ["    %s mlx5_0,mlx5_1  fw 28.40.1000" % CX]


def test_tool_missing_names_the_packages(tmp_path, monkeypatch, run_module):
    tree = tree_with(tmp_path, CX, "28.40.1000")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run_module(module, {"root": tree.root, "profiles": ["gpudirect"]}, check_mode=True)
    [card] = report.gpudirect_nic_firmware(facts_of(tree), plan_record(result))
    assert card["status"] == "tool_missing" and "package mstflint (mstconfig)" in card["reason"]
    assert (card["params"], card["fw_ver"]) == ([], "28.40.1000")
    assert "configuration not read (tool missing)" in report.gpudirect_nic_firmware_lines(
        facts_of(tree), plan_record(result))[0]


def test_no_card_gives_the_module_reason(tmp_path, run_module):
    tree = SysfsTree(tmp_path / "root")
    tree.add_gpu("0000:03:00.0")
    result = run_module(module, {"root": tree.root, "profiles": ["gpudirect"]}, check_mode=True)
    lines = report.gpudirect_nic_firmware_lines(facts_of(tree), plan_record(result))
    assert lines == ["  NIC firmware: configuration not read (no card): no NVIDIA/Mellanox ConnectX physical "
                     "function under %s/sys/bus/pci/devices" % tree.root.rstrip("/"),
                     "    no RDMA NIC with a PCI function in the facts"]


def test_absent_plan_says_it_was_not_read(tmp_path):
    [card] = report.gpudirect_nic_firmware(facts_of(tree_with(tmp_path, CX, "28.40.1000")), None)
    assert card["status"] == "not_read" and "did not run on this host" in card["reason"]
    # the verify role's report on the lent H100 node (no plan pass in that run) printed
    # "configuration not read (not read)" before this label
    title = report.gpudirect_nic_firmware_lines(facts_of(tree_with(tmp_path / "again", CX, "28.40.1000")), None)[0]
    assert title.startswith("  NIC firmware: configuration not read (no plan in this run): the gpudirect_nic_config plan")


@pytest.mark.parametrize("plan, words", [
    ("planned", "must be the gpudirect_nic_config_plan fact"),
    ({"devices": []}, "must be the gpudirect_nic_config_plan fact"),
    ({"wanted": True, "devices": "0000:17:00.0"}, "devices must be a list"),
    ({"wanted": True, "devices": [{"functions": [CX]}]}, "has no pci address"),
    ({"wanted": True, "devices": [{"pci": CX, "to_set": [{"wanted": "1"}], "in_place": []}]}, "without a param"),
])
def test_malformed_plan_is_refused_naming_it(plan, words):
    with pytest.raises(AnsibleFilterError, match=words):
        report.gpudirect_nic_firmware({}, plan)


def test_a_software_rdma_device_has_no_firmware_row():
    facts = {"rdma_devices": [{"name": "rxe0", "driver": "rdma_rxe", "pci_address": "0000:00:03.0", "fw_ver": None}]}
    assert report.gpudirect_nic_firmware(facts, None) == []


# ------------------------------------------------------------------ the preflight table

def test_preflight_table_has_the_section_only_when_given_the_plan(cx4):
    facts, plan = cx4
    without = report.gpudirect_preflight_report(facts, "node1")
    with_plan = report.gpudirect_preflight_report(facts, "node1", nic_config=plan)
    section = report.gpudirect_nic_firmware_lines(facts, plan)
    assert not any("NIC firmware" in l for l in without)
    start = with_plan.index(section[0])
    assert with_plan[start:start + len(section)] == section
    assert [l for l in with_plan if l not in section] == without


# ------------------------------------------------------------------ the roles' Jinja

PLAY = """---
- name: The gpudirect_nic_config plan and the report's NIC firmware section on a fake node
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpudirect_nic_config_sysfs_root: %(root)s
  tasks:
    - name: Facts as the preflight gathers them
      gpudirect_facts:
        root: %(root)s
        nvidia_smi: false
        kernel_log: false
    - name: The gpudirect_nic_config plan, as the gpudirect_nic_config stage leaves it
      ansible.builtin.include_role:
        name: gpudirect_nic_config
        tasks_from: plan
    - name: The verify role's report tasks (they read gpudirect_nic_config_plan as the run left it)
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: report
    - name: Show the plan
      ansible.builtin.debug:
        msg: "RESULT {{ gpudirect_nic_config_plan | to_json }}"
"""


def test_verify_report_writes_the_section_from_the_roles_plan(tmp_path, fixture_tool):
    tree = tree_with(tmp_path, CX, "28.40.1000")
    fixture_tool("mlxconfig-cx4-three-column-operator-test.txt")
    record = verify.gpudirect_verify_record(None, "localhost", {"code": "in_service", "message": "in service"}, False,
                                            "2026-11-28T00:00:00Z")
    reports = tmp_path / "reports"
    done = play_on_localhost(tmp_path, PLAY % {"root": tree.root}, {
        "__gpudirect_verify_record": record, "gpudirect_verify_report_dir": str(reports),
        "gpudirect_nic_config_params": {"MEMIC_SIZE_LIMIT": 0, "LINK_TYPE_P1": "ETH"}},
        env_extra={"PATH": "%s:%s" % (tmp_path / "fixture-bin", SYSTEM_PATH)})
    assert done.returncode == 0, done.stdout[-3000:]
    found = [l for l in done.stdout.splitlines() if '"msg": "RESULT ' in l]
    plan = json.loads(json.loads("{%s}" % found[-1].strip())["msg"][len("RESULT "):])
    assert (plan["wanted"], plan["skip_reason"], plan["tool_missing"]) == (True, "", "")
    written = json.loads((reports / "localhost.json").read_text())
    [card] = written["nic_firmware"]
    assert (card["fw_ver"], card["differs"], card["not_exposed"]) == ("28.40.1000", ["MEMIC_SIZE_LIMIT"],
                                                                      ["LINK_TYPE_P1"])
    assert dict((k, v) for k, v in written.items() if k != "nic_firmware") == record
    page = (reports / "localhost.md").read_text()
    assert page.startswith(verify.gpudirect_verify_report_md(record).rstrip("\n") + "\n\n## NIC firmware\n\n```\n")
    body = page.split("```\n")[1]
    assert body.splitlines()[0] == ("NIC firmware: configuration read by gpudirect_nic_config; 1 parameter(s) differ from "
                                    "the knobs")
    assert "DIFFERS from the knobs: running value" in body and "NOT EXPOSED by this card" in body
    assert page.endswith("\n```\n")


PREFLIGHT = """---
- name: The preflight role on a fake node
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpudirect_facts:
      root: %(root)s
  vars:
    gpudirect_nic_config_sysfs_root: %(root)s
  roles:
    - role: gpudirect_preflight
"""


@pytest.mark.parametrize("extra, first", [
    ({"gpudirect_nic_config_profiles": ["gpudirect"]},
     "NIC firmware: configuration read by gpudirect_nic_config; 2 parameter(s) differ from the knobs"),
    ({}, "NIC firmware: configuration not read (not configured): gpudirect_nic_config_profiles and gpudirect_nic_config_params are "
         "empty"),
])
def test_preflight_table_shows_the_section_from_the_roles_plan(tmp_path, fixture_tool, extra, first):
    tree = tree_with(tmp_path, CX6, "22.39.1002")
    fixture_tool("mstconfig-cx6dx-next-boot-only.txt", no_e=True)
    done = play_on_localhost(tmp_path, PREFLIGHT % {"root": tree.root}, dict(
        extra, gpudirect_preflight_nvidia_smi=False, gpudirect_preflight_kernel_log=False),
        env_extra={"PATH": "%s:%s" % (tmp_path / "fixture-bin", SYSTEM_PATH)})
    assert done.returncode == 0, done.stdout[-3000:]
    assert '"  %s' % first in done.stdout
    assert '"    %s mlx5_0,mlx5_1 ' % CX6 in done.stdout and ' fw 22.39.1002",' in done.stdout


# ------------------------------------------------------------------ RoCE QoS section (issue #32, outcome 2)
# The plan is library/gpudirect_roce_qos.py's own result (check mode, as roles/gpudirect_roce_qos/tasks/plan.yml
# runs it) on the fake host of test_roce_qos.py: an mlx5 RoCE port, an InfiniBand port and a soft-RoCE port,
# with the stand-in mlnx_qos printing the layout of the real captures.

from test_roce_qos import WANT, host  # noqa: E402,F401 (the fake host fixture)
import gpudirect_roce_qos as roce_module  # noqa: E402


def _roce_plan(result):
    keys = ("wanted", "changes", "disruption", "not_exposed", "ports", "ports_skipped", "tool_missing", "skip_reason",
            "rdma_cm")
    return {k: result[k] for k in keys}


def test_roce_qos_section_marks_what_differs_and_what_a_port_does_not_expose(host, run_module):  # noqa: F811
    plan = _roce_plan(run_module(roce_module, dict(WANT, root=str(host)), check_mode=True))
    lines = report.gpudirect_roce_qos_lines(plan, "")
    assert lines[0] == "RoCE QoS: read by gpudirect_roce_qos; 8 value(s) differ from the knobs"
    assert lines[1] == "  ens1f0np0 (mlx5_0 port 1)"
    assert "    trust          current pcp        wanted dscp       DIFFERS from the knobs (gpudirect_roce_qos sets " \
           "it; traffic on the port stops briefly)" in lines
    assert "    cnp_dscp       current 0          wanted 48         DIFFERS from the knobs (gpudirect_roce_qos sets " \
           "it)" in lines
    assert "  eth0 (rxe0 port 1)" in lines
    assert "    trust          wanted dscp     NOT EXPOSED by this port (left alone): mlnx_qos -i eth0 failed (rc 1): " \
           "ETS features are not supported on your system" in lines
    assert lines[-1].startswith("  skipped mlx5_1 port 1 (ib0): InfiniBand link layer")
    # in the preflight table, after the NIC firmware section
    table = report.gpudirect_preflight_report({}, "gpu-a", roce_qos=plan)
    assert table[table.index("  RoCE QoS: read by gpudirect_roce_qos; 8 value(s) differ from the knobs") + 1] == \
        "    ens1f0np0 (mlx5_0 port 1)"


def test_roce_qos_section_after_the_apply_reads_in_place(host, run_module):  # noqa: F811
    run_module(roce_module, dict(WANT, root=str(host), state="applied", interfaces=["mlx5_0"]))
    plan = _roce_plan(run_module(roce_module, dict(WANT, root=str(host), interfaces=["mlx5_0"]), check_mode=True))
    lines = report.gpudirect_roce_qos_lines(plan, "")
    assert lines[0] == "RoCE QoS: read by gpudirect_roce_qos; every wanted value in place"
    assert "    pfc            current 3          wanted 3          ok" in lines


# ------------------------------------------------------------------ RDMA-CM defaults (issue #44, outcome 4)
# the plan of test_roce_qos.py's fake host with its stand-in of the kernel's rdma_cm configfs

from test_roce_qos import rdma_cm, unload  # noqa: E402,F401 (the stand-in configfs fixture)


def test_roce_qos_section_shows_the_rdma_cm_defaults_against_the_profile(host, rdma_cm, run_module):  # noqa: F811
    plan = _roce_plan(run_module(roce_module, dict(root=str(host), dscp=26), check_mode=True))
    lines = report.gpudirect_roce_qos_lines(plan, "")
    assert lines[0] == "RoCE QoS: read by gpudirect_roce_qos; 3 value(s) differ from the knobs"
    assert lines[1:4] == [
        "  ens1f0np0 (mlx5_0 port 1)",
        "    rdma_cm_mode   current IB/RoCE v1 wanted RoCE v2    DIFFERS from the knobs (gpudirect_roce_qos sets it)",
        "    rdma_cm_tos    current 0          wanted 104        DIFFERS from the knobs (gpudirect_roce_qos sets it)"]
    assert "    rdma_cm_mode   current RoCE v2    wanted RoCE v2    ok" in lines
    run_module(roce_module, dict(root=str(host), dscp=26, state="applied"))
    after = report.gpudirect_roce_qos_lines(_roce_plan(run_module(roce_module, dict(root=str(host), dscp=26),
                                                                  check_mode=True)), "")
    assert after[0] == "RoCE QoS: read by gpudirect_roce_qos; every wanted value in place"
    assert "    rdma_cm_tos    current 104        wanted 104        ok" in after


def test_roce_qos_section_where_rdma_cm_is_still_to_load_or_cannot_be(host, rdma_cm, run_module):  # noqa: F811
    unload(rdma_cm, host)
    plan = _roce_plan(run_module(roce_module, dict(root=str(host), dscp=26), check_mode=True))
    lines = report.gpudirect_roce_qos_lines(plan, "")
    assert "    rdma_cm_tos    current ?          wanted 104        NOT READ YET (load rdma_cm: gpudirect_roce_qos " \
           "does that, then sets it)" in lines
    os.makedirs(str(host / "sys/module/rdma_cm"))                      # loaded, and still no configfs directory
    plan = _roce_plan(run_module(roce_module, dict(root=str(host), dscp=26), check_mode=True))
    lines = report.gpudirect_roce_qos_lines(plan, "")
    assert lines[0].endswith("(RDMA-CM: rdma_cm is loaded and configfs is mounted, but /sys/kernel/config/rdma_cm is "
                             "absent: this kernel was built without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS; the apply "
                             "fails: gpudirect_roce_qos_rdma_cm: false leaves RDMA-CM alone)")
    assert any(line.startswith("    rdma_cm_mode   wanted RoCE v2  NOT READ: rdma_cm is loaded") for line in lines)


def test_roce_qos_section_says_where_rdma_cm_traffic_lands(host, rdma_cm, run_module):  # noqa: F811
    knobs = dict(root=str(host), trust="dscp", pfc_priorities=[3], interfaces=["mlx5_0"])
    run_module(roce_module, dict(knobs, state="applied"))
    lines = report.gpudirect_roce_qos_lines(_roce_plan(run_module(roce_module, dict(knobs, dscp=26),
                                                                  check_mode=True)), "")
    assert "    rdma_cm class  ToS 104 is DSCP 26: priority 3 (the port's dscp2prio map), PFC on: lossless" in lines
    lines = report.gpudirect_roce_qos_lines(_roce_plan(run_module(roce_module, dict(knobs, dscp=8),
                                                                  check_mode=True)), "")
    assert ("    rdma_cm class  ToS 32 is DSCP 8: priority 1 (the port's dscp2prio map), NO PFC: RDMA-CM traffic is "
            "NOT in the lossless class (choose a DSCP of a PFC priority)") in lines


def test_roce_qos_section_shows_the_facts_rdma_cm_defaults_where_the_plan_does_not_manage_them(
        host, rdma_cm, run_module):  # noqa: F811
    # gpudirect_facts on the same host, live (its group made for the read and removed)
    facts = gpudirect_facts.gather_facts(str(host), None, nvidia_smi=False, kernel_log=False, live=True)
    extra = ["RDMA-CM defaults as gpudirect_facts read them (not managed by gpudirect_roce_qos: gpudirect_roce_qos_dscp "
             "unset or gpudirect_roce_qos_rdma_cm false)",
             "  mlx5_0 port 1: RoCE mode IB/RoCE v1, ToS 0 (DSCP 0)",
             "  rxe0 port 1: RoCE mode RoCE v2, ToS 0 (DSCP 0)"]
    assert report.gpudirect_roce_qos_lines(None, "", facts)[1:] == extra
    unset = {"wanted": False, "ports": [], "changes": [], "not_exposed": [], "ports_skipped": []}
    assert report.gpudirect_roce_qos_lines(unset, "", facts)[1:] == extra
    mtu_only = _roce_plan(run_module(roce_module, dict(root=str(host), mtu=1500), check_mode=True))
    assert report.gpudirect_roce_qos_lines(mtu_only, "", facts)[-3:] == extra
    managed = _roce_plan(run_module(roce_module, dict(root=str(host), dscp=26), check_mode=True))
    assert not [line for line in report.gpudirect_roce_qos_lines(managed, "", facts) if "gpudirect_facts" in line]
    # in the preflight table, from the same facts
    table = report.gpudirect_preflight_report(facts, "gpu-a", roce_qos=unset)
    assert "    mlx5_0 port 1: RoCE mode IB/RoCE v1, ToS 0 (DSCP 0)" in table
    with pytest.raises(AnsibleFilterError, match="facts must be ansible_facts.gpudirect"):
        report.gpudirect_roce_qos_lines(None, "", ["mlx5_0"])


def test_roce_qos_section_not_configured_no_plan_and_bad_input():
    assert report.gpudirect_roce_qos_lines(None, "") == [
        "RoCE QoS: not read (no plan in this run): the gpudirect_roce_qos plan (roles/gpudirect_roce_qos/tasks/"
        "plan.yml) did not run on this host in this run"]
    unset = {"wanted": False, "ports": [], "changes": [], "not_exposed": [], "ports_skipped": []}
    assert report.gpudirect_roce_qos_lines(unset, "")[0].startswith("RoCE QoS: not read (not configured)")
    with pytest.raises(AnsibleFilterError, match="roce_qos must be the gpudirect_roce_qos_plan fact"):
        report.gpudirect_roce_qos_lines({"wanted": True}, "")
    with pytest.raises(AnsibleFilterError, match=r"roce_qos.ports\[0\] must be a port"):
        report.gpudirect_roce_qos_lines(dict(unset, wanted=True, ports=["eth0"]), "")
    assert not any("RoCE QoS" in line for line in report.gpudirect_preflight_report({}, "gpu-a"))


# ------------------------------------------------------------------ firmware version against the pinned images
# (hand-written firmware reports in the shape library/gpudirect_nic_config.py returns, whose own tests
# (tests/unit/test_nic_firmware_version.py) produce them from the stand-in and the published queries)

@pytest.mark.parametrize("firmware, line", [
    ({"psid": "MT_0000000834", "running": "28.40.1000", "pending": None, "pinned": "28.43.1014", "state": "to_update"},
     "firmware PSID MT_0000000834 running 28.40.1000 pending - pinned 28.43.1014 DIFFERS from the pinned image"),
    ({"psid": "MT_0000000834", "running": "28.40.1000", "pending": "28.43.1014", "pinned": "28.43.1014",
      "state": "pending_reset"},
     "firmware PSID MT_0000000834 running 28.40.1000 pending 28.43.1014 pinned 28.43.1014 BURNED, waits for a "
     "firmware reset or reboot"),
    ({"psid": "MT_0000000228", "running": "20.35.1012", "pending": None, "pinned": None, "state": "no_image"},
     "firmware PSID MT_0000000228 running 20.35.1012 pending - pinned - NO PINNED IMAGE for this PSID"),
])
def test_firmware_version_line_per_card(firmware, line):
    facts = {"rdma_devices": [{"name": "mlx5_0", "driver": "mlx5_core", "pci_address": "0000:17:00.0",
                               "fw_ver": firmware["running"]}]}
    plan = {"wanted": True, "devices": [{"pci": "0000:17:00.0", "functions": ["0000:17:00.0"], "type": None,
                                         "to_set": [], "in_place": [], "pending": [], "firmware": firmware}]}
    cards = report.gpudirect_nic_firmware(facts, plan)
    assert cards[0]["firmware"]["state"] == firmware["state"]
    assert "    " + line in report.gpudirect_nic_firmware_lines(facts, plan, "")


def test_no_pinned_image_means_no_firmware_line_and_a_malformed_one_is_refused():
    facts = {"rdma_devices": [{"name": "mlx5_0", "driver": "mlx5_core", "pci_address": "0000:17:00.0", "fw_ver": "1.2.3"}]}
    plan = {"wanted": True, "devices": [{"pci": "0000:17:00.0", "to_set": [], "in_place": []}]}
    assert report.gpudirect_nic_firmware(facts, plan)[0]["firmware"] is None
    assert not any("firmware PSID" in line for line in report.gpudirect_nic_firmware_lines(facts, plan))
    plan["devices"][0]["firmware"] = "28.43.1014"
    with pytest.raises(AnsibleFilterError, match="firmware must be the module's firmware report"):
        report.gpudirect_nic_firmware(facts, plan)
