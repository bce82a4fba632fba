"""Degraded PCIe links (plugin_utils/gpudirect_links.py, filter_plugins/gpudirect_links.py).

The healthy inputs are real: the facts module's whole result on the lent H100 node
(tests/fixtures/gpu_node/h100/gpudirect_facts.json: H100 at 32 GT/s x16 of 32 GT/s x16)
and on the H200 node (tests/fixtures/gpu_node/h200/). The degraded ones are those
captures with one value changed, and the facts module run on the fake sysfs server of
sysfs_tree.py with a NIC's link narrowed.
"""

import copy
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

import gpudirect_facts
from ansible.module_utils import gpudirect_links as links
from conftest import PROJECT_FIXTURES
from gpudirect_links import gpudirect_degraded_links  # filter_plugins/gpudirect_links.py
from sysfs_tree import GPU, NIC0, gpu_server


def captured(node):
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", node, "gpudirect_facts.json")) as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


@pytest.mark.parametrize("node", ["h100", "h200"])
def test_the_real_gpu_nodes_have_no_degraded_link(node):
    facts = captured(node)
    assert facts["gpus"][0]["link"]["current_width"] == facts["gpus"][0]["link"]["max_width"] == 16
    assert links.degraded_links(facts) == []
    assert gpudirect_degraded_links(facts, "fail") == []


def test_a_gpu_at_x8_is_a_finding_with_both_values_that_fail_stops():
    facts = copy.deepcopy(captured("h100"))
    facts["gpus"][0]["link"]["current_width"] = 8
    found = links.degraded_links(facts)
    assert len(found) == 1
    f = found[0]
    assert (f["kind"], f["device"], f["reason"]) == ("GPU", "0000:00:06.0", "width")
    assert (f["current"], f["max"]) == ("32 GT/s x8", "32 GT/s x16")
    assert "GPU 0000:00:06.0: PCIe link trained at 32 GT/s x8, below its maximum 32 GT/s x16 (narrower)" in f["message"]
    assert [x["stops"] for x in gpudirect_degraded_links(facts, "fail")] == [True]
    assert [x["stops"] for x in gpudirect_degraded_links(facts, "warn")] == [False]
    assert [x["stops"] for x in gpudirect_degraded_links(facts, "ignore")] == [False]


def test_an_idle_gpu_below_its_maximum_speed_is_reported_and_never_stops():
    facts = copy.deepcopy(captured("h200"))
    facts["gpus"][0]["link"]["current_speed_gts"] = 2.5
    found = gpudirect_degraded_links(facts, "fail")
    assert [(f["reason"], f["current"], f["max"], f["stops"]) for f in found] == [
        ("speed_idle", "2.5 GT/s x16", "32 GT/s x16", False)]
    assert "idle NVIDIA GPU lowers its link speed" in found[0]["message"]


def _server_facts(tmp_path, **nic_link):
    t = gpu_server(str(tmp_path))
    for name, value in nic_link.items():
        t.write(os.path.join(t.pci_dirs[NIC0], name), "%s\n" % value)
    return gpudirect_facts.gather_facts(root=t.root, nvidia_smi=False, kernel_log=False, live=False)


def test_the_facts_carry_each_nic_link_and_a_healthy_server_has_no_finding(tmp_path):
    facts = _server_facts(tmp_path)
    mlx5_0 = [d for d in facts["rdma_devices"] if d["name"] == "mlx5_0"][0]
    assert mlx5_0["link"] == {"current_speed_gts": 16.0, "current_width": 16, "max_speed_gts": 16.0, "max_width": 16}
    assert links.degraded_links(facts) == []


@pytest.mark.parametrize("change, reason, current", [
    (dict(current_link_width="8"), "width", "16 GT/s x8"),
    (dict(current_link_speed="8.0 GT/s PCIe"), "speed", "8 GT/s x16"),
])
def test_a_nic_below_its_maximum_is_a_finding_that_fail_stops(tmp_path, change, reason, current):
    found = gpudirect_degraded_links(_server_facts(tmp_path, **change), "fail")
    assert [(f["kind"], f["device"], f["reason"], f["current"], f["max"], f["stops"]) for f in found] == [
        ("NIC", "mlx5_0 (%s)" % NIC0, reason, current, "16 GT/s x16", True)]
    assert GPU not in [f["address"] for f in found]


def test_a_bad_knob_value_is_named():
    facts = copy.deepcopy(captured("h100"))
    facts["gpus"][0]["link"]["current_width"] = 4
    with pytest.raises(AnsibleFilterError, match="gpudirect_preflight_degraded_link must be one of warn, fail, ignore"):
        gpudirect_degraded_links(facts, "stop")


def test_a_bad_knob_value_is_named_on_a_healthy_node_too():
    """Before, the value was read only for a degraded link: a typo passed on every healthy node."""
    with pytest.raises(AnsibleFilterError, match="gpudirect_preflight_degraded_link must be one of warn, fail, ignore"):
        gpudirect_degraded_links(captured("h100"), "stop")


def test_links_sysfs_does_not_report_are_not_findings():
    facts = {"gpus": [{"address": "0000:00:06.0", "link": {"current_speed_gts": None, "current_width": None,
                                                            "max_speed_gts": 32.0, "max_width": 16}}],
             "rdma_devices": [{"name": "rxe0", "pci_address": None, "link": None}]}
    assert links.degraded_links(facts) == []
