"""filter_plugins/gpudirect_hosts.py: a play's hosts from groups made at run time,
selected as Ansible's own host pattern would select them, without its warning for a
group that does not exist (issue #31 outcome 3)."""

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from conftest import ROOT, host_pattern
from gpudirect_hosts import gpudirect_hosts

GROUPS = {
    "all": ["n1", "n2", "n3", "n4", "other"],
    "ungrouped": ["other"],
    "gpu_nodes": ["n1", "n2", "n3", "n4"],
    "gpudirect_unchanged": ["n2"],
    "gpudirect_disrupt": ["n4"],
    "rack_a": ["n3", "n1"],
}


@pytest.mark.parametrize("pattern, hosts", [
    ("gpu_nodes", ["n1", "n2", "n3", "n4"]),
    ("gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt", ["n1", "n3"]),
    ("gpu_nodes:!gpudirect_disrupt", ["n1", "n2", "n3"]),
    # exclusions apply after unions wherever they are written, as in Ansible
    ("!gpudirect_unchanged:gpu_nodes", ["n1", "n3", "n4"]),
    ("gpu_nodes:&rack_a", ["n1", "n3"]),
    # inventory order, not the order of the groups' members
    ("rack_a:gpudirect_disrupt", ["n1", "n3", "n4"]),
    ("gpudirect_disrupt:rack_a", ["n1", "n3", "n4"]),
    ("gpudirect_disrupt,other", ["n4", "other"]),
    ("n2", ["n2"]),
])
def test_selects_as_ansibles_host_pattern(pattern, hosts):
    assert gpudirect_hosts(GROUPS, pattern) == hosts


def test_a_group_not_made_yet_selects_nothing():
    groups = {k: v for k, v in GROUPS.items() if k not in ("gpudirect_unchanged", "gpudirect_disrupt")}
    assert gpudirect_hosts(groups, "gpudirect_disrupt") == []
    assert gpudirect_hosts(groups, "kernel_update_pending") == []
    assert gpudirect_hosts(groups, "gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt") == ["n1", "n2", "n3", "n4"]


@pytest.mark.parametrize("pattern", ["gpu*", "~gpu.*", "gpu_nodes[0:1]", "", ":", "!", 3])
def test_patterns_it_would_read_unlike_ansible_are_refused(pattern):
    with pytest.raises(AnsibleFilterError, match="gpudirect_hosts"):
        gpudirect_hosts(GROUPS, pattern)


def test_something_other_than_the_groups_variable_is_refused():
    with pytest.raises(AnsibleFilterError, match="groups magic variable"):
        gpudirect_hosts(["n1"], "gpu_nodes")


def test_every_play_on_a_run_time_group_selects_through_the_filter():
    """A plain ``hosts:`` naming gpudirect_unchanged, gpudirect_disrupt or
    kernel_update_pending would bring Ansible's warning back when the group is empty."""
    made_at_run_time = ("gpudirect_unchanged", "gpudirect_disrupt", "kernel_update_pending")
    found = 0
    for folder in ("playbooks", os.path.join("molecule", "rolling"), os.path.join("molecule", "default")):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".yml"):
                continue
            with open(os.path.join(ROOT, folder, name)) as handle:
                plays = yaml.safe_load(handle) or []
            for play in plays if isinstance(plays, list) else []:
                hosts = play.get("hosts") if isinstance(play, dict) else None
                if isinstance(hosts, str) and any(g in hosts for g in made_at_run_time):
                    found += 1
                    assert host_pattern(hosts) != hosts, "%s/%s: %s" % (folder, name, hosts)
    assert found >= 18
