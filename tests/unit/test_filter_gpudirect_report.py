"""Findings and the preflight table, on facts shaped as gpudirect_facts returns them."""

import copy

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_report as report

ACS_ON = {"address": "0000:02:08.0", "vendor_id": "0x10b5", "device_id": "0x8747", "acs_offset": 0x148,
          "acs_cap": 0x007F, "acs_ctl": 0x005D, "acs_ctl_hex": "0x005d", "readable": True,
          "enabled_bits": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]}

BASE = {
    "gpus": [{"address": "0000:03:00.0", "vendor_id": "0x10de", "device_id": "0x2335", "numa_node": 0,
              "driver": "nvidia", "name": "NVIDIA H200",
              "link": {"current_speed_gts": 32.0, "current_width": 16, "max_speed_gts": 32.0, "max_width": 16}}],
    "rdma_devices": [{"name": "mlx5_0", "pci_address": "0000:04:00.0", "netdevs": ["ens1f0np0"],
                      "ports": {"1": {"state": "ACTIVE", "phys_state": "LinkUp", "link_layer": "Ethernet",
                                      "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0}}},
                     {"name": "mlx5_1", "pci_address": "0000:81:00.0", "netdevs": [],
                      "ports": {"1": {"state": "DOWN", "phys_state": "Disabled", "link_layer": "InfiniBand",
                                      "rate": "10 Gb/sec (4X SDR)"}}}],
    "pairs": [
        {"gpu": "0000:03:00.0", "gpu_address": "0000:03:00.0", "nic": "mlx5_1", "nic_address": "0000:81:00.0",
         "distance": "SYS", "acs": []},
        {"gpu": "0000:03:00.0", "gpu_address": "0000:03:00.0", "nic": "mlx5_0", "nic_address": "0000:04:00.0",
         "distance": "PIX", "acs": [ACS_ON]},
    ],
    "unbound_mellanox_functions": [],
    "nvidia_driver": {"loaded": True, "version": "580.159.04", "flavor": "open"},
    "peermem": {"nvidia_peermem": False, "nv_peer_mem": False, "gdrdrv": False, "ib_core": True},
    "dmabuf": {"kernel_ok": True, "open_module": True},
    "iommu": {"enabled": True, "mode": "translated", "groups": 40},
    "kernel": {"running": "6.1.0-28-amd64", "default": "6.1.0-28-amd64", "reboot_pending": False,
               "reboot_reasons": []},
    "memlock": {"soft": "unlimited", "hard": "unlimited"},
    "kernel_oops": {"available": True, "lines": []},
    "warnings": [],
}


def facts(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def test_best_pair_is_the_closest_not_the_first():
    assert report.gpudirect_best_pair(facts())["nic"] == "mlx5_0"
    assert report.gpudirect_best_pair(facts(pairs=[])) is None


def test_acs_on_the_best_path_and_down_port_are_reported():
    found = report.gpudirect_findings(facts())
    checks = [(f["severity"], f["check"]) for f in found]
    assert ("warn", "acs") in checks
    assert ("warn", "port_state") in checks
    acs = [f for f in found if f["check"] == "acs"][0]["message"]
    assert "0000:02:08.0" in acs and "0x005d" in acs and "ReqRedir" in acs


def test_healthy_node_has_no_findings():
    pair = dict(BASE["pairs"][1], acs=[dict(ACS_ON, acs_ctl=0, acs_ctl_hex="0x0000", enabled_bits=[])])
    nic = BASE["rdma_devices"][0]
    assert report.gpudirect_findings(facts(pairs=[pair], rdma_devices=[nic])) == []


@pytest.mark.parametrize("distance,severity", [("PHB", "warn"), ("NODE", "bad"), ("SYS", "bad")])
def test_distance_verdicts(distance, severity):
    pair = dict(BASE["pairs"][0], distance=distance)
    found = [f for f in report.gpudirect_findings(facts(pairs=[pair])) if f["check"] == "topology"]
    assert [f["severity"] for f in found] == [severity]
    assert distance in found[0]["message"]


def test_max_distance_makes_a_far_topology_fatal():
    pair = dict(BASE["pairs"][0], distance="NODE")
    fatal = [f for f in report.gpudirect_findings(facts(pairs=[pair]), "PXB") if f["severity"] == "fatal"]
    assert len(fatal) == 1 and "NODE" in fatal[0]["message"] and "PXB" in fatal[0]["message"]
    assert not [f for f in report.gpudirect_findings(facts(pairs=[pair]), "SYS") if f["severity"] == "fatal"]


def test_unknown_distance_is_an_error():
    with pytest.raises(AnsibleFilterError, match="FAR"):
        report.gpudirect_findings(facts(), "FAR")
    with pytest.raises(AnsibleFilterError, match="NV4"):
        report.gpudirect_best_pair(facts(pairs=[dict(BASE["pairs"][0], distance="NV4")]))


def test_unbound_mellanox_memlock_reboot_and_oops():
    data = facts(unbound_mellanox_functions=[{"address": "0000:03:00.0", "vendor_id": "0x15b3",
                                              "device_id": "0x1003"}],
                 memlock={"soft": 65536, "hard": 65536},
                 kernel={"running": "a", "default": "b", "reboot_pending": True,
                         "reboot_reasons": ["default boot kernel b differs from running a"]},
                 kernel_oops={"available": True, "lines": ["BUG: unable to handle page fault ... Oops: 0002"]})
    by_check = {f["check"]: f for f in report.gpudirect_findings(data)}
    assert "/sys/bus/pci/devices/0000:03:00.0/remove" in by_check["nic_driver"]["message"]
    assert "65536" in by_check["memlock"]["message"]
    assert "b differs from running a" in by_check["kernel"]["message"]
    assert by_check["kernel_log"]["severity"] == "bad"


def test_report_table_lists_pairs_closest_first_with_acs():
    lines = report.gpudirect_preflight_report(facts(), "node1")
    text = "\n".join(lines)
    assert lines[0] == "GPUDirect RDMA: node1"
    assert "nvidia 580.159.04 (open kernel module)" in text
    assert "32.0 GT/s x16 (max 32.0 GT/s x16)" in text
    pix = next(i for i, line in enumerate(lines) if " PIX " in line)
    sys_ = next(i for i, line in enumerate(lines) if " SYS " in line)
    assert pix < sys_
    assert "0000:02:08.0 0x005d" in lines[pix] and "good" in lines[pix]
    assert "clear" in lines[sys_] and "bad" in lines[sys_]


def test_report_on_a_node_without_gpu_or_nic():
    lines = report.gpudirect_preflight_report(facts(gpus=[], rdma_devices=[], pairs=[],
                                                    nvidia_driver={"loaded": False}), "ct1")
    text = "\n".join(lines)
    assert "GPUs       0" in text and "RDMA NICs  0" in text
    assert "GPU/NIC pairs: none (no GPU)" in text
    assert "nvidia kernel module not loaded" in text


# Issue 19: the after-run table said "WARN memlock ... 257548288" right after gpudirect_host_prereqs
# set unlimited. The facts below are the VM node's after gpudirect_host_prereqs (captures and their
# sources in tests/unit/test_limits.py): the root session keeps 257548288, new logins and
# new services get unlimited.
SESSION_ROOT = {"soft": "257548288", "hard": "257548288", "soft_bytes": 257548288, "hard_bytes": 257548288,
                "uid": 0}
LOGIN_UNLIMITED = {"soft": "unlimited", "hard": "unlimited", "soft_bytes": None, "hard_bytes": None,
                   "soft_source": "/etc/security/limits.d/90-gpudirect-memlock.conf:5 *",
                   "hard_source": "/etc/security/limits.d/90-gpudirect-memlock.conf:6 *", "stopped_by": None,
                   "base_source": "PID 1: 257548288/257548288", "domains": []}
SERVICE_UNLIMITED = {"soft": "unlimited", "hard": "unlimited", "soft_bytes": None, "hard_bytes": None,
                     "source": "systemctl show DefaultLimitMEMLOCK", "pending_reexec": False,
                     "configured": {"soft": "unlimited", "hard": "unlimited",
                                    "source": "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf:5"}}
AFTER_HOST_PREREQS = dict(SESSION_ROOT, session=SESSION_ROOT, login=LOGIN_UNLIMITED, service=SERVICE_UNLIMITED)


def test_after_host_prereqs_the_root_session_limit_is_labelled_not_a_finding():
    data = facts(memlock=AFTER_HOST_PREREQS)
    assert [f for f in report.gpudirect_findings(data) if f["check"] == "memlock"] == []
    lines = report.gpudirect_preflight_report(data, "rdma-node1 (after the run)")
    at = next(i for i, line in enumerate(lines) if line.startswith("  memlock "))
    assert lines[at] == ("  memlock    new logins: soft unlimited, hard unlimited "
                         "(/etc/security/limits.d/90-gpudirect-memlock.conf:5 *)")
    assert lines[at + 1] == "             new services: soft unlimited, hard unlimited (systemd DefaultLimitMEMLOCK)"
    assert lines[at + 2].startswith("             this Ansible session: soft 257548288, hard 257548288 (uid 0: root")
    assert not any("WARN  memlock" in line for line in lines)


def test_before_host_prereqs_new_logins_and_services_are_the_findings():
    login = dict(LOGIN_UNLIMITED, soft="257548288", hard="257548288", soft_bytes=257548288, hard_bytes=257548288,
                 soft_source=None, hard_source=None)
    service = dict(SERVICE_UNLIMITED, soft="8388608", hard="8388608", soft_bytes=8388608, hard_bytes=8388608,
                   configured=None)
    data = facts(memlock=dict(SESSION_ROOT, session=SESSION_ROOT, login=login, service=service))
    memlock = [f for f in report.gpudirect_findings(data) if f["check"] == "memlock"]
    assert [f["severity"] for f in memlock] == ["warn", "warn"]
    assert "new logins get memlock soft 257548288 (not set in limits.conf/limits.d: PID 1" in memlock[0]["message"]
    assert memlock[1]["message"].startswith("services started from now on get memlock soft 8388608")
    lines = report.gpudirect_preflight_report(data, "n")
    # the session equals what new logins get, but not what services get: still shown, labelled
    assert any(line.strip().startswith("this Ansible session: soft 257548288") for line in lines)


def test_service_limit_waiting_for_daemon_reexec_is_said():
    service = dict(SERVICE_UNLIMITED, soft="8388608", hard="8388608", soft_bytes=8388608, hard_bytes=8388608,
                   pending_reexec=True)
    data = facts(memlock=dict(SESSION_ROOT, session=SESSION_ROOT, login=LOGIN_UNLIMITED, service=service))
    (finding,) = [f for f in report.gpudirect_findings(data) if f["check"] == "memlock"]
    assert "90-gpudirect-memlock.conf:5 sets unlimited, which the manager reads at its next daemon-reexec" \
        in finding["message"]
    text = "\n".join(report.gpudirect_preflight_report(data, "n"))
    assert "new services: soft 8388608, hard 8388608 (systemd DefaultLimitMEMLOCK); soft unlimited, hard " \
           "unlimited after daemon-reexec" in text


def test_unknown_login_and_service_say_why():
    data = facts(memlock=dict(SESSION_ROOT, session=SESSION_ROOT, login=LOGIN_UNLIMITED, service=None,
                              service_reason="systemd is not the init system (no /run/systemd/system)"))
    text = "\n".join(report.gpudirect_preflight_report(data, "ct1"))
    assert "new services: unknown (systemd is not the init system (no /run/systemd/system))" in text
    assert [f for f in report.gpudirect_findings(data) if f["check"] == "memlock"] == []


def test_reboot_this_run_asked_for_labels_the_lines_a_reboot_changes():
    reasons = ["gpudirect_host_prereqs: kernel command line lacks iommu=pt"]
    lines = report.gpudirect_preflight_report(facts(), "n (after the run)", "SYS", reasons)
    text = "\n".join(lines)
    assert "  kernel     running 6.1.0-28-amd64, default boot 6.1.0-28-amd64, REBOOT PENDING" in text
    assert "  reboot     asked for by this run, not done: gpudirect_host_prereqs: kernel command line lacks iommu=pt" in text
    assert "  iommu      translated (as booted; the command line changes at the pending reboot)" in text
    assert "loaded nvidia 580.159.04 (open kernel module) (before the pending reboot)" in text
    kernel = [f for f in report.gpudirect_findings(facts(), "SYS", reasons) if f["check"] == "kernel"]
    assert len(kernel) == 1 and "iommu=pt" in kernel[0]["message"]
    # nothing pending: no label, no reboot line
    plain = "\n".join(report.gpudirect_preflight_report(facts(), "n", "SYS", []))
    assert "REBOOT PENDING" not in plain and "  reboot " not in plain and "pending reboot" not in plain


def test_reboot_reasons_of_the_os_and_the_run_are_not_repeated():
    kernel = {"running": "a", "default": "b", "reboot_pending": True,
              "reboot_reasons": ["default boot kernel b differs from running a"]}
    found = report.gpudirect_findings(facts(kernel=kernel), "SYS", ["default boot kernel b differs from running a"])
    (finding,) = [f for f in found if f["check"] == "kernel"]
    assert finding["message"].count("differs from running a") == 1


def test_reboot_reasons_must_be_a_list():
    with pytest.raises(AnsibleFilterError, match="gpudirect_reboot_reasons"):
        report.gpudirect_preflight_report(facts(), "n", "SYS", "gpudirect_host_prereqs: iommu=pt")


def test_unknown_acs_on_the_path_is_never_shown_as_clear():
    """gpudirect_facts marks a bridge whose ACS state cannot be known (256-byte config of a PCIe
    function, corrupt capability list) status=unknown and the pair acs_verdict=unknown."""
    reason = "extended configuration space not readable: the config file has 256 bytes"
    unknown = {"address": "0000:02:10.0", "vendor_id": "0x10b5", "device_id": "0x8747", "status": "unknown",
               "reason": reason, "readable": False, "acs_ctl": None, "acs_ctl_hex": None, "enabled_bits": []}
    pair = dict(BASE["pairs"][1], acs=[dict(ACS_ON, acs_ctl=0, acs_ctl_hex="0x0000", enabled_bits=[]), unknown],
                acs_verdict="unknown", acs_verdict_reason="ACS state unknown on 0000:02:10.0: " + reason)
    data = facts(pairs=[pair], rdma_devices=[BASE["rdma_devices"][0]])
    found = report.gpudirect_findings(data)
    assert [(f["severity"], f["check"]) for f in found] == [("warn", "acs")]
    assert "0000:02:10.0" in found[0]["message"] and reason in found[0]["message"]
    line = next(line for line in report.gpudirect_preflight_report(data, "node1") if " PIX " in line)
    assert "UNKNOWN (ACS state unknown on 0000:02:10.0: %s)" % reason in line and "clear" not in line


def _h200x2_facts():
    """The facts the role read on the lent 2x H200 machine (tests/fixtures/gpu_node/h200x2): both GPUs on an
    NVLink fabric at Completed/Success."""
    import json
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gpu_node", "h200x2", "gpudirect_facts.json")
    with open(path) as handle:
        data = json.load(handle)
    return data.get("ansible_facts", {}).get("gpudirect", data.get("gpudirect", data))


def test_a_gpu_off_its_nvlink_fabric_is_a_preflight_finding_with_the_fix():
    real = _h200x2_facts()
    assert not [f for f in report.gpudirect_findings(real) if f["check"] == "nvlink_fabric"]
    broken = copy.deepcopy(real)
    # what a GPU whose fabric manager is missing reports (siderolabs/extensions pull request 717: "An `In
    # Progress` state indicates that the GPU is being registered and FabricManager is likely not running")
    broken["gpus"][1]["fabric"]["state"] = "In Progress"
    broken["gpus"][1]["fabric"]["status"] = "N/A"
    found = [f for f in report.gpudirect_findings(broken) if f["check"] == "nvlink_fabric"]
    assert [f["severity"] for f in found] == ["bad"]
    assert "1 of 2 GPU(s) on the NVLink fabric are not Completed/Success: 0000:00:07.0: State In Progress" \
        in found[0]["message"]
    assert "nvidia-fabricmanager" in found[0]["message"] and "nvlsm" in found[0]["message"]


def test_an_imex_domain_that_is_not_whole_is_a_warning_and_shown():
    imex = {"installed": True, "reason": None, "domain_state": "DOWN",
            "nodes": [{"index": 0, "address": "10.0.0.1", "state": "READY", "version": ""},
                      {"index": 1, "address": "10.0.0.2", "state": "UNAVAILABLE", "version": ""}],
            "problems": ["Domain State DOWN (UP wanted)", "node #1 10.0.0.2 is UNAVAILABLE"]}
    found = [f for f in report.gpudirect_findings(facts(imex=imex)) if f["check"] == "imex"]
    assert [f["severity"] for f in found] == ["warn"] and "node #1 10.0.0.2 is UNAVAILABLE" in found[0]["message"]
    lines = report.gpudirect_preflight_report(facts(imex=imex), "node1")
    assert "  IMEX       domain DOWN, 1/2 nodes READY: Domain State DOWN (UP wanted); node #1 10.0.0.2 is UNAVAILABLE" \
        in lines


def test_the_real_2x_h200_node_of_2026_11_27_has_no_fabric_or_imex_finding():
    """tests/fixtures/gpu_node/h200x2-20261127: the facts of this session's code on the lent 2x H200 machine."""
    import json
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gpu_node", "h200x2-20261127",
                        "gpudirect_facts.json")
    with open(path) as handle:
        data = json.load(handle)
    real = data.get("ansible_facts", {}).get("gpudirect", data)
    assert real["imex"] == {"installed": False, "reason": "nvidia-imex-ctl is not installed (no IMEX on this node)",
                            "domain_state": None, "nodes": [], "problems": []}
    assert [g["fabric"]["state"] for g in real["gpus"]] == ["Completed", "Completed"]
    assert not [f for f in report.gpudirect_findings(real) if f["check"] in ("nvlink_fabric", "imex")]
    assert not [line for line in report.gpudirect_preflight_report(real, "h200x2") if "IMEX" in line]
