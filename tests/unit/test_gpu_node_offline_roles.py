"""The roles that can run offline, run on the real Ubuntu 24.04 GPU node.

tests/harness/gpu_node/offline_roles.sh ran each role over a local connection on the
lent H100 node (no network, no systemd as PID 1, no GRUB, no python3-apt, no PCI
bridge, no kernel package: its kernel came with the VM image) and kept what it printed
in tests/fixtures/gpu_node/h100/offline/ (README there). These tests read that capture:
they check what each role did on a real non-Debian node, not what a stand-in says.
"""

import csv
import os
import re

import pytest

from conftest import PROJECT_FIXTURES

HERE = os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "offline")


def _read(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as handle:
        return handle.read()


def _summary():
    with open(os.path.join(HERE, "summary.tsv"), encoding="utf-8") as handle:
        return {(row["stage"], row["mode"]): row for row in csv.DictReader(handle, delimiter="\t")}


def _messages(name):
    return re.findall(r'"msg": "(.*)"', _read(name))


def test_every_stage_ended_as_the_harness_expected():
    rows = _summary()
    assert len(rows) == 12
    bad = {key: row["result"] for key, row in rows.items() if not row["result"].startswith("ok")}
    assert bad == {}


@pytest.mark.parametrize("stage, mode", [("os_release_pin", "check"), ("host_prereqs", "again"),
                                         ("host_prereqs", "check"), ("pcie_acs", "query"), ("pcie_acs", "check")])
def test_converged_or_read_only_runs_change_nothing(stage, mode):
    row = _summary()[(stage, mode)]
    assert (row["rc"], row["changed"], row["failed"]) == ("0", "0", "0")


def test_pin_then_unpin_leaves_holds_and_apt_configuration_as_they_were():
    before, after = _read("pin-before.txt"), _read("pin-after.txt")
    assert before == after
    # the node's own holds (CUDA libraries) were there and stayed
    holds = before.split("# apt-mark showhold\n")[1].split("#")[0].split()
    assert {"libnccl2", "libcudnn9-cuda-13"} <= set(holds)
    rows = _summary()
    assert int(rows[("os_release_pin", "apply")]["changed"]) > 0
    assert int(rows[("os_release_pin", "unpin")]["changed"]) > 0


def test_pin_reads_packages_without_python3_apt_and_finds_no_kernel_package():
    messages = _messages("os_release_pin-apply.log")
    assert any(m.startswith("No installed package matches ^(linux-image-") for m in messages)
    assert "Could not detect a supported package manager" not in _read("os_release_pin-apply.log")


def test_host_prereqs_without_systemd_writes_limits_and_says_no_reexec():
    messages = _messages("host_prereqs-apply.log")
    assert any(m.startswith("The service manager here is process_api, not systemd") for m in messages)
    assert _summary()[("host_prereqs", "apply")]["changed"] == "3"


def test_iommu_passthrough_without_grub_leaves_the_command_line_and_asks_no_reboot():
    log = _read("host_prereqs-iommu-check.log")
    assert "/usr/sbin/update-grub is missing" in log and "no reboot is asked for" in log
    assert "Reboot requested" not in log and "gpudirect_reboot_reasons" not in log


def test_pcie_acs_on_a_node_without_bridges_installs_no_boot_applier():
    assert any(m.startswith("No selected bridge has an ACS capability") for m in _messages("pcie_acs-check.log"))
    log = _read("pcie_acs-check.log")
    assert "TASK [pcie_acs : Install pciutils" not in log
    assert re.search(r"TASK \[pcie_acs : Install the boot-time applier\][^\n]*\nskipping:", log)


def test_mlnx_ofed_detects_the_inbox_stack_and_says_what_it_would_install():
    messages = _messages("mlnx_ofed-check.log")
    assert "no OFED stack installed; inbox rdma-core wanted; loaded peer-memory modules: none" in messages
    would = [m for m in messages if m.startswith("would install ")]
    assert len(would) == 1 and "rdma-core" in would[0]
    # ibverbs-providers came with the image: not reinstalled
    assert "ibverbs-providers" not in would[0]


def test_site_check_runs_every_stage_and_the_verification_says_it_would_fail():
    log = _read("site.yml-check.log")
    for stage in ("gpudirect_state : Say what this run does", "gpudirect_preflight : Show the preflight table",
                  "Plan what each deciding role would change (read-only)",
                  "os_release_pin : ", "host_prereqs : ", "mlnx_ofed : ", "nvidia_driver : ", "gpudirect_peermem : ",
                  "pcie_acs : ", "gpudirect_verify : "):
        assert "TASK [" + stage in log, stage
    # the read-only pass found nothing disruptive: the node was staged undrained
    assert "vm: no disruption: mlnx_ofed: install inbox RDMA packages" in log
    # no NIC on the node: check mode names the verdict it would reach, and no record is written
    assert "check: would FAIL  no_rdma_device" in log
    assert "no converged-state record written: verification did not pass in this run (would_fail)" in log
