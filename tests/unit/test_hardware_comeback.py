"""A node comes back with what it had (plugin_utils/gpudirect_hardware.py, issue #29 outcome 6).

The inventories come from real facts: the lent H100 node (tests/fixtures/gpu_node/h100/
gpudirect_facts.json: one H100 at 32 GT/s x16, no RDMA NIC) and the VM node with
soft-RoCE (tests/fixtures/loopback/vm_rxe_gpudirect_facts.json: rxe0 on 0000:01:00.0,
port 1 ACTIVE at 2.5 Gb/s). The "after" side is the same facts with one thing taken
away or degraded, as a node that lost a GPU, trained a link narrower or came back with
a port down would report it.
"""
import copy
import json

import pytest

from ansible.module_utils import gpudirect_hardware as hw
from conftest import read_fixture


def facts(*parts):
    data = json.loads(read_fixture(*parts))
    return data["ansible_facts"]["gpudirect"] if "ansible_facts" in data else data.get("gpudirect", data)


def node():
    """The H100's GPU and the VM's RDMA device on one node, as a GPU server has both."""
    merged = copy.deepcopy(facts("gpu_node", "h100", "gpudirect_facts.json"))
    merged["rdma_devices"] = copy.deepcopy(facts("loopback", "vm_rxe_gpudirect_facts.json")["rdma_devices"])
    return merged


def judge(after, accept=None):
    return hw.judge(hw.inventory(node()), hw.inventory(after), accept)


def test_the_same_node_has_no_finding():
    assert judge(node()) == {"findings": [], "accepted": []}


def test_a_missing_gpu_is_named_with_its_address_and_model():
    after = node()
    after["gpus"] = []
    rows = judge(after)["findings"]
    assert rows == [{"what": "GPU 0000:00:06.0 (NVIDIA H100 80GB HBM3)", "before": "present", "after": "missing"}]


def test_a_link_that_trained_narrower_is_a_finding_an_idle_gpus_lower_speed_is_not():
    after = node()
    after["gpus"][0]["link"]["current_width"] = 8
    rows = judge(after)["findings"]
    assert rows[0]["what"].endswith("PCIe link") and rows[0]["before"] == "x16 (up to 32.0 GT/s)"
    assert rows[0]["after"] == "x8 (up to 32.0 GT/s)"
    # an idle GPU's link runs at 2.5 GT/s until it has work: not a finding
    idle = node()
    idle["gpus"][0]["link"]["current_speed_gts"] = 2.5
    assert judge(idle)["findings"] == []
    # a slot that now trains at most Gen4 is
    gen4 = node()
    gen4["gpus"][0]["link"]["max_speed_gts"] = 16.0
    assert judge(gen4)["findings"][0]["after"] == "x16 (up to 16.0 GT/s)"
    # narrower before, full width after: nothing lost
    before_narrow = node()
    before_narrow["gpus"][0]["link"]["current_width"] = 8
    assert hw.findings(hw.inventory(before_narrow), hw.inventory(node())) == []


def test_a_missing_rdma_device_a_port_down_and_a_lower_rate_are_findings():
    gone = node()
    gone["rdma_devices"] = []
    assert judge(gone)["findings"][0]["what"] == "RDMA device rxe0 (0000:01:00.0)"
    down = node()
    down["rdma_devices"][0]["ports"]["1"].update(state="DOWN", rate_gbps=2.5)
    assert [r["what"] for r in judge(down)["findings"]] == ["RDMA device rxe0 (0000:01:00.0) port 1 state"]
    slow = node()
    slow["rdma_devices"][0]["ports"]["1"]["rate_gbps"] = 1.0
    assert judge(slow)["findings"][0]["before"] == "2.5 Gb/s" and judge(slow)["findings"][0]["after"] == "1 Gb/s"


def test_changed_firmware_and_iommu_mode_are_findings_the_admin_can_accept():
    before = node()
    before["rdma_devices"][0]["fw_ver"] = "20.39.1002"
    after = copy.deepcopy(before)
    after["rdma_devices"][0]["fw_ver"] = "20.41.1000"
    before["iommu"]["mode"] = "translated"
    after["iommu"]["mode"] = "off"
    verdict = hw.judge(hw.inventory(before), hw.inventory(after), [r"firmware: 20\.39\.1002 -> 20\.41\.1000"])
    assert [r["what"] for r in verdict["findings"]] == ["IOMMU mode"]
    assert [r["what"] for r in verdict["accepted"]] == ["RDMA device rxe0 (0000:01:00.0) firmware"]
    # the toolkit's own iommu=pt (off -> pt, translated -> pt) is not a loss
    for was, now in (("off", "pt"), ("translated", "pt")):
        before["iommu"]["mode"], after["iommu"]["mode"] = was, now
        assert [r["what"] for r in hw.judge(hw.inventory(before), hw.inventory(after))["findings"]] == [
            "RDMA device rxe0 (0000:01:00.0) firmware"]


def test_nvlink_links_up_fewer_after():
    before = node()
    before["gpus"][0]["nvlink"] = {"links_up": 18}
    after = copy.deepcopy(before)
    after["gpus"][0]["nvlink"] = {"links_up": 17}
    rows = hw.findings(hw.inventory(before), hw.inventory(after))
    assert rows == [{"what": "GPU 0000:00:06.0 (NVIDIA H100 80GB HBM3) NVLink links up", "before": "18", "after": "17"}]


def test_table_lines_are_aligned():
    after = node()
    after["gpus"] = []
    lines = hw.table(judge(after)["findings"])
    assert lines[0].startswith("what") and "before the disruption" in lines[0]
    assert lines[1].split("  ")[0] == "GPU 0000:00:06.0 (NVIDIA H100 80GB HBM3)"


@pytest.mark.parametrize("accept, message", [
    ("firmware", "must be a list of regular expressions"),
    ([""], "is not a regular expression"),
    (["(unclosed"], "is not a valid regular expression"),
])
def test_bad_accept_knob_is_named(accept, message):
    with pytest.raises(ValueError, match="gpudirect_drain_hardware_accept.*" + message.split(" ")[0]):
        judge(node(), accept)


@pytest.mark.parametrize("bad", [None, [], {"gpus": [{"name": "no address"}]}, {"rdma_devices": [{}]}])
def test_malformed_facts_are_refused(bad):
    with pytest.raises(ValueError):
        hw.inventory(bad)


# --- the drain role: kept before the disruption, compared before the resume

STAND_IN_FACTS = '''#!/usr/bin/python
import json
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec={"path": {"type": "str", "required": True}})
with open(m.params["path"]) as f:
    m.exit_json(changed=False, ansible_facts={"gpudirect": json.load(f)})
'''


def cycle(tmp_path, after, extra):
    """gpudirect_drain's drain, the facts read again (a reboot's worth of change: `after`),
    a passed verification, then its resume: the finished ansible-playbook process."""
    import os
    import uuid
    from conftest import ROOT, play_on_localhost, role_tasks_play
    lib = tmp_path / "library"
    lib.mkdir()
    (lib / "stand_in_facts.py").write_text(STAND_IN_FACTS)
    (tmp_path / "before.json").write_text(json.dumps(node()))
    (tmp_path / "after.json").write_text(json.dumps(after))
    log = tmp_path / "scheduler.log"
    hook = lambda word: ["sh", "-c", "echo %s >>%s" % (word, log)]  # noqa: E731
    note = "/var/lib/gpudirect/test-hardware-%s.json" % uuid.uuid4().hex
    play = ("---\n- name: Facts before\n  hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
            "    - {name: Facts before, stand_in_facts: {path: '%s'}}\n" % (tmp_path / "before.json"))
    play += role_tasks_play("gpudirect_drain", "drain", then=(
        "    - {name: Facts after the disruption, stand_in_facts: {path: '%s'}}\n"
        "    - {name: A verification that passed, ansible.builtin.set_fact: {gpudirect_verify_status: passed}}\n"
        "    - {name: Resume or not, ansible.builtin.include_role: {name: gpudirect_drain, tasks_from: resume}}\n"
        % (tmp_path / "after.json"))).split("---\n", 1)[1]
    try:
        proc = play_on_localhost(tmp_path, play, dict({
            "gpudirect_drain_command": hook("drain"), "gpudirect_drain_wait_command": hook("idle"),
            "gpudirect_drain_resume_command": hook("resume"), "gpudirect_drain_left_drained_file": note,
            "gpudirect_drain_no_log": False}, **extra),
            env_extra={"ANSIBLE_LIBRARY": "%s:%s" % (lib, os.path.join(ROOT, "library"))})
    finally:
        if os.path.exists(note):
            os.unlink(note)
    return proc, log.read_text().split()


def test_a_node_that_came_back_with_a_gpu_missing_stays_drained_with_the_table(tmp_path):
    after = node()
    after["gpus"] = []
    proc, calls = cycle(tmp_path, after, {})
    assert calls == ["drain", "idle"], proc.stdout  # never resumed
    assert "GPU 0000:00:06.0 (NVIDIA H100 80GB HBM3)  present                missing" in proc.stdout
    assert "it stays drained: 1 finding(s) not accepted" in proc.stdout


def test_a_node_that_came_back_whole_or_with_an_accepted_change_is_resumed(tmp_path):
    proc, calls = cycle(tmp_path, node(), {})
    assert calls == ["drain", "idle", "resume"], proc.stdout
    after = node()
    after["rdma_devices"][0]["ports"]["1"]["rate_gbps"] = 1.0
    (tmp_path / "again").mkdir()
    proc, calls = cycle(tmp_path / "again", after, {"gpudirect_drain_hardware_accept": [r"port 1 rate: 2\.5 Gb/s -> 1 Gb/s"]})
    assert calls == ["drain", "idle", "resume"], proc.stdout
    assert "every change accepted by gpudirect_drain_hardware_accept" in proc.stdout
