"""site.yml's stage tags (issue #31 outcome 3): a run limited by --tags / --skip-tags.

The real site.yml and playbooks run over four local nodes with the stand-in roles of
tests/unit/test_site_rolling.py. A run whose tags leave out an install stage says so at
its start, runs what its tags select and the plays tagged always (locks, state check,
plan, record step, rolling machinery), writes no converged-state record (saying which
stages the tags left out), and drains no node. The filter gpudirect_tags_left_out
follows Ansible's tag rules, and site.yml tags each stage with the name the filter uses.
"""

import os
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "filter_plugins"))

from gpudirect_tags import STAGES, gpudirect_tags_left_out  # noqa: E402
from test_site_rolling import FLEET, ROOT, _of, _project, _run  # noqa: E402

INSTALL_EVENTS = {"gpudirect_os_release_pin", "gpudirect_host_prereqs", "gpudirect_mlnx_ofed", "gpudirect_nic_config", "gpudirect_rdma_addresses",
                  "gpudirect_roce_qos", "gpudirect_nvidia_driver", "gpudirect_peermem", "gpudirect_dkms", "gpudirect_pcie_acs", "reboot", "drain", "resume", "record"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return _project(tmp_path_factory.mktemp("site_tags"))


def test_a_verify_run_verifies_installs_nothing_and_writes_no_record(project):
    proc, events = _run(project, FLEET, args=["--tags", "verify"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # said at the start, before any plan
    start = proc.stdout.index("This run's tags (--tags / --skip-tags) leave out the stage(s) os_pin, drivers, pcie_acs")
    assert start < proc.stdout.index("plan gpudirect_mlnx_ofed")
    # the nodes not rolled are verified; nothing is installed, drained or recorded
    for node in ("n1", "n2"):
        assert "verify" in _of(events, node), _of(events, node)
    assert not INSTALL_EVENTS & {event for _, event in events}, events
    # the plan pass still ran (it is what refuses an undrained disruption)
    assert "plan gpudirect_mlnx_ofed" in _of(events, "n2")
    # the record step says why it writes nothing
    assert ("n2: no converged-state record written: the run's tags (--tags / --skip-tags) left out the stage(s) "
            "os_pin, drivers, pcie_acs, so this run did not converge the node") in proc.stdout
    # the nodes to disrupt are named and left alone
    assert "not rolled, not drained and not changed: n3, n4 need a drained, disruptive change" in proc.stdout


def test_skipping_one_install_stage_runs_the_others_and_writes_no_record(project):
    proc, events = _run(project, FLEET, args=["--skip-tags", "pcie_acs"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    n2 = _of(events, "n2")
    assert "gpudirect_nvidia_driver" in n2 and "gpudirect_os_release_pin" in n2 and "verify" in n2
    assert "gpudirect_pcie_acs" not in n2 and "record" not in n2
    # the run lock the first stage took is still released by the record play (tagged always)
    assert n2[-1] == "unlock"
    assert "left out the stage(s) pcie_acs, so this run did not converge the node" in proc.stdout
    assert "drain" not in _of(events, "n3") + _of(events, "n4")


def test_tags_no_stage_carries_leave_the_run_whole(project):
    # molecule passes --skip-tags molecule-notest,notest
    proc, events = _run(project, FLEET, args=["--skip-tags", "molecule-notest,notest"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _of(events, "n2")[-3:] == ["verify", "record", "unlock"]
    assert "resume" in _of(events, "n3") and "record" in _of(events, "n4")
    assert "leave out the stage(s)" not in proc.stdout


@pytest.mark.parametrize("run_tags, skip_tags, left", [
    (["all"], [], []),
    (["all"], ["molecule-notest", "notest"], []),
    (["verify"], [], ["os_pin", "drivers", "pcie_acs"]),
    (["verify", "report"], [], ["os_pin", "drivers", "pcie_acs"]),
    (["tagged"], [], []),
    (["untagged"], [], list(STAGES)),
    (["all"], ["drivers"], ["drivers"]),
    (["all"], ["tagged"], list(STAGES)),
    (["drivers"], ["drivers"], list(STAGES)),
    (["all"], ["verify"], ["verify"]),
])
def test_the_filter_follows_ansibles_tag_rules(run_tags, skip_tags, left):
    assert gpudirect_tags_left_out(run_tags, skip_tags) == left


def test_the_filter_refuses_what_is_not_a_list_of_tags():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="list of tag names"):
        gpudirect_tags_left_out("verify", [])


def test_site_tags_each_stage_with_the_filters_name_and_the_safety_plays_always():
    with open(os.path.join(ROOT, "site.yml")) as handle:
        site = yaml.safe_load(handle)
    tags = {entry["ansible.builtin.import_playbook"]: entry.get("tags") for entry in site}
    for stage in STAGES:
        assert tags["playbooks/%s.yml" % stage] == [stage]
    for always in ("fleet_lock", "state_check", "plan", "reboot_gate", "state_record", "rolling", "fleet_release"):
        assert tags["playbooks/%s.yml" % always] == ["always"], always
    # every import is tagged: an untagged play would run only in untagged runs
    assert all(tags.values()), tags


def _plays(path):
    with open(path) as handle:
        return [play for play in yaml.safe_load(handle) if "hosts" in play]


def test_every_play_passes_the_proxy_knob_as_its_environment():
    """gpudirect_proxy_env reaches every play of the playbooks; the fleet lock play checks it instead."""
    for name in sorted(os.listdir(os.path.join(ROOT, "playbooks"))):
        if not name.endswith(".yml"):
            continue
        for play in _plays(os.path.join(ROOT, "playbooks", name)):
            if name == "fleet_lock.yml":
                assert "environment" not in play
            else:
                assert play.get("environment") == "{{ gpudirect_proxy_env | default({}) }}", (name, play["name"])


@pytest.mark.parametrize("value", ['"http://proxy.example:3128"', '{"http_proxy": 3128}'])
def test_a_bad_proxy_knob_stops_the_run_before_anything(project, value):
    proc, events = _run(project, FLEET, args=["-e", '{"gpudirect_proxy_env": %s}' % value])
    assert proc.returncode != 0
    assert "gpudirect_proxy_env must be a mapping of environment variable names to strings" in proc.stdout
    assert events == [], events


def test_a_proxy_mapping_runs(project):
    proc, events = _run(project, FLEET, args=["-e", '{"gpudirect_proxy_env": {"https_proxy": "http://proxy.example:3128"}}'])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _of(events, "n2")[-3:] == ["verify", "record", "unlock"]
