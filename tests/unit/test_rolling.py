"""The rolling re-run's decisions (plugin_utils/gpudirect_rolling.py) and their filters.

The plan results follow the shared contract of issue #16 (``<role>_plan`` with
``changes`` and ``disruption`` lists); the sentences are the contract's own examples.
The OS reboot reasons are the ones gpudirect_facts publishes
(``ansible_facts.gpudirect.kernel.reboot_reasons``, library/gpudirect_facts.py
kernel(): "default boot kernel X differs from running Y", "/run/reboot-required exists ...").
"""

import os
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils import gpudirect_rolling as rolling

from gpudirect_rolling import FilterModule
from conftest import host_pattern

FILTERS = FilterModule().filters()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CONVERGED = {"changes": [], "disruption": []}
OFED_UPGRADE = {
    "changes": ["install DOCA-OFED 25.01-0.6.0"],
    "disruption": ["openibd restart: OFED 24.10-1.1.4 -> 25.01-0.6.0"],
}
DRIVER_RELOAD = {
    "changes": ["install nvidia-driver 570.86.15"],
    "disruption": ["nvidia modules reload: 550.90.07 -> 570.86.15"],
}
PEERMEM_ENABLE = {"changes": ["enable gpudirect-nvidia-peermem.service"], "disruption": []}


def _all(**plans):
    base = {role: CONVERGED for role in rolling.PLANNED_ROLES}
    base.update(plans)
    return base


def test_a_converged_node_needs_no_disruption():
    assert rolling.disruption(_all()) == []
    assert rolling.disruption(_all(), [], []) == []


def test_changes_without_disruption_do_not_drain():
    assert rolling.disruption(_all(gpudirect_peermem=PEERMEM_ENABLE)) == []


def test_each_disruption_names_its_role_in_stage_order():
    # the mapping's order must not matter: reasons follow the install stages
    firmware = {"changes": ["0000:17:00.0 (ConnectX7): set ATS_ENABLED=1"],
                "disruption": ["0000:17:00.0 (ConnectX7): firmware reset or reboot to load ATS_ENABLED=1"]}
    cmdline = {"changes": [], "disruption": ["reboot: the running kernel command line lacks iommu=pt"]}
    readdress = {"changes": ["ens1f0np0: replace 10.10.0.7/24, which RDMA connections on it use"],
                 "disruption": ["ens1f0np0: replace 10.10.0.7/24, which RDMA connections on it use (by 10.10.0.8/24)"]}
    plans = {"gpudirect_nvidia_driver": DRIVER_RELOAD, "gpudirect_pcie_acs": CONVERGED, "gpudirect_nic_config": firmware,
             "gpudirect_mlnx_ofed": OFED_UPGRADE, "gpudirect_peermem": CONVERGED, "gpudirect_host_prereqs": cmdline,
             "gpudirect_rdma_addresses": readdress,
             "gpudirect_roce_qos": {"changes": ["ens1f0np0 (mlx5_0 port 1): set trust dscp"],
                                    "disruption": ["ens1f0np0 (mlx5_0 port 1): trust dscp changes while the port "
                                                   "may carry traffic"]}}
    assert rolling.disruption(plans) == [
        "gpudirect_host_prereqs: reboot: the running kernel command line lacks iommu=pt",
        "gpudirect_mlnx_ofed: openibd restart: OFED 24.10-1.1.4 -> 25.01-0.6.0",
        "gpudirect_nic_config: 0000:17:00.0 (ConnectX7): firmware reset or reboot to load ATS_ENABLED=1",
        "gpudirect_rdma_addresses: ens1f0np0: replace 10.10.0.7/24, which RDMA connections on it use (by 10.10.0.8/24)",
        "gpudirect_roce_qos: ens1f0np0 (mlx5_0 port 1): trust dscp changes while the port may carry traffic",
        "gpudirect_nvidia_driver: nvidia modules reload: 550.90.07 -> 570.86.15",
    ]


def test_pending_and_os_reboot_reasons_disrupt():
    reasons = rolling.disruption(
        _all(),
        ["gpudirect_host_prereqs: kernel command line lacks iommu=pt"],
        ["default boot kernel 6.1.0-56-amd64 differs from running 6.1.0-50-amd64"])
    assert reasons == [
        "reboot requested: gpudirect_host_prereqs: kernel command line lacks iommu=pt",
        "reboot (operating system): default boot kernel 6.1.0-56-amd64 differs from running 6.1.0-50-amd64",
    ]


def test_reboot_disruption_alone_for_the_gate_after_the_undrained_stages():
    assert rolling.reboot_disruption([], []) == []
    assert rolling.reboot_disruption(None, None) == []
    assert rolling.reboot_disruption(["gpudirect_nvidia_driver: nouveau is loaded and now blacklisted (initramfs rebuilt)"], None) == [
        "reboot requested: gpudirect_nvidia_driver: nouveau is loaded and now blacklisted (initramfs rebuilt)"]
    assert FILTERS["gpudirect_reboot_disruption"]([], ["/run/reboot-required exists (packages: libc6)"]) == [
        "reboot (operating system): /run/reboot-required exists (packages: libc6)"]
    with pytest.raises(AnsibleFilterError, match="the OS reboot reasons must be a list"):
        FILTERS["gpudirect_reboot_disruption"]([], "/run/reboot-required exists")


def test_repeated_reasons_are_listed_once():
    assert rolling.disruption(_all(), ["x: y", "x: y"]) == ["reboot requested: x: y"]


def test_a_planned_role_that_registered_nothing_is_an_error_naming_it():
    plans = _all()
    plans["gpudirect_pcie_acs"] = None
    with pytest.raises(ValueError, match=r"gpudirect_pcie_acs_plan is missing: roles/gpudirect_pcie_acs/tasks/plan.yml must register"):
        rolling.disruption(plans)


@pytest.mark.parametrize("plan, message", [
    ({"changes": []}, "gpudirect_nvidia_driver_plan has no 'disruption' list"),
    ({"changes": [], "disruption": "openibd restart"}, r"gpudirect_nvidia_driver_plan.disruption must be a list of sentences"),
    ({"changes": [], "disruption": [""]}, r"gpudirect_nvidia_driver_plan.disruption\[0\] must be a non-empty sentence"),
    ({"changes": [], "disruption": [3]}, r"gpudirect_nvidia_driver_plan.disruption\[0\] must be a non-empty sentence"),
    ("yes", "gpudirect_nvidia_driver_plan is a str"),
])
def test_a_malformed_plan_is_an_error_not_a_silent_no(plan, message):
    with pytest.raises(ValueError, match=message):
        rolling.disruption(_all(gpudirect_nvidia_driver=plan))


def test_a_plan_of_an_unknown_role_is_an_error():
    with pytest.raises(ValueError, match="no plan is expected from gpudirect_os_release_pin"):
        rolling.disruption(_all(gpudirect_os_release_pin=CONVERGED))


def test_a_planned_role_left_out_of_the_pass_is_an_error():
    plans = _all()
    del plans["gpudirect_peermem"]
    with pytest.raises(ValueError, match="gpudirect_peermem_plan is missing"):
        rolling.disruption(plans)


def test_changes_name_their_role_in_stage_order():
    plans = _all(gpudirect_peermem=PEERMEM_ENABLE, gpudirect_mlnx_ofed=OFED_UPGRADE)
    assert rolling.changes(plans) == [
        "gpudirect_mlnx_ofed: install DOCA-OFED 25.01-0.6.0",
        "gpudirect_peermem: enable gpudirect-nvidia-peermem.service",
    ]
    assert rolling.changes(_all()) == []


def test_a_plan_without_changes_is_an_error():
    with pytest.raises(ValueError, match="gpudirect_pcie_acs_plan has no 'changes' list"):
        rolling.changes(_all(gpudirect_pcie_acs={"disruption": []}))


def test_the_plan_pass_plans_every_role_the_decision_expects():
    """playbooks/plan.yml loops over the roles of PLANNED_ROLES and passes each plan, no more, no less."""
    with open(os.path.join(ROOT, "playbooks", "plan.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    tasks = {task["name"]: task for task in play["tasks"]}
    include = next(t for t in play["tasks"] if "ansible.builtin.include_role" in t and "loop" in t)
    assert include["ansible.builtin.include_role"]["tasks_from"] == "plan"
    # the loop is the planned roles less those of a stage the run skips on the node (issue #30 outcome 6)
    assert re.findall(r"'(\w+)'", include["loop"].split("]", 1)[0]) == list(rolling.PLANNED_ROLES)
    assert "gpudirect_state_skipped_roles" in include["loop"]
    decide = tasks["Decide whether the node needs a disruptive change"]
    assert tuple(decide["vars"]["__gpudirect_plans_run"]) == rolling.PLANNED_ROLES
    assert host_pattern(play["hosts"]) == "gpu_nodes:!gpudirect_unchanged"


def test_reboot_reasons_must_be_a_list():
    with pytest.raises(ValueError, match="gpudirect_reboot_reasons must be a list"):
        rolling.disruption(_all(), "gpudirect_nvidia_driver: nouveau blacklisted")


@pytest.mark.parametrize("value, expected", [
    (1, 1), (4, 4), ("4", 4), ("10%", "10%"), (" 25 % ", "25%"), ("100%", "100%"),
])
def test_batch_accepts_a_count_or_a_percentage(value, expected):
    assert rolling.batch(value) == expected


@pytest.mark.parametrize("value, message", [
    (0, "must be 1 or more nodes"),
    (-2, "must be 1 or more nodes"),
    ("0%", "from 1% to 100%"),
    ("150%", "from 1% to 100%"),
    ("ten", "must be a number of nodes"),
    (True, "not a boolean"),
    (2.5, "must be a number of nodes"),
    ([], "must list at least one batch size"),
    ([1, 0], r"item 0 must be 1 or more nodes"),
    ([1, "150%"], r"item '150%' must be a percentage from 1% to 100%"),
    ([1, [2]], "not list"),
    ("1, many", r"item 'many' must be a number of nodes"),
])
def test_bad_batch_names_the_knob(value, message):
    with pytest.raises(ValueError, match="gpudirect_rolling_batch=.*" + message):
        rolling.batch(value)


def test_batch_list_is_a_canary_as_ansibles_serial_takes_it():
    """issue #30: one node, then five, then 10% of the nodes at a time."""
    assert rolling.batch([1, 5, "10%"]) == [1, 5, "10%"]
    assert rolling.batch(["1", " 5 ", "10 %"]) == [1, 5, "10%"]
    # -e gpudirect_rolling_batch=1,5,10% arrives as a string
    assert rolling.batch("1,5,10%") == [1, 5, "10%"]
    hostvars = {"n1": {"gpudirect_rolling_batch": [1, "10%"]}, "n2": {"gpudirect_rolling_batch": "1, 10%"}}
    assert rolling.play_setting(["n1", "n2"], hostvars, "gpudirect_rolling_batch") == [1, "10%"]
    hostvars["n2"]["gpudirect_rolling_batch"] = [1, "20%"]
    with pytest.raises(ValueError, match=r"differs .*\[1, '10%'\] on n1; \[1, '20%'\] on n2"):
        rolling.play_setting(["n1", "n2"], hostvars, "gpudirect_rolling_batch")


@pytest.mark.parametrize("value, expected", [(0, 0), ("25", 25), (100, 100)])
def test_max_fail_percentage(value, expected):
    assert rolling.max_fail_percentage(value) == expected


@pytest.mark.parametrize("value", [-1, 101, "10%", False, 12.5, None])
def test_bad_max_fail_percentage_names_the_knob(value):
    with pytest.raises(ValueError, match="gpudirect_rolling_max_fail_percentage=.* from 0 to 100"):
        rolling.max_fail_percentage(value)


def test_play_setting_defaults_when_no_node_sets_it():
    hostvars = {"n1": {}, "n2": {}}
    assert rolling.play_setting(["n1", "n2"], hostvars, "gpudirect_rolling_batch") == 1
    assert rolling.play_setting(["n1", "n2"], hostvars, "gpudirect_rolling_max_fail_percentage") == 0
    # no node to disrupt: the play matches nothing, its serial must still template
    assert rolling.play_setting([], {}, "gpudirect_rolling_batch") == 1


def test_play_setting_normalises_an_agreed_value():
    hostvars = {"n1": {"gpudirect_rolling_batch": "10%"}, "n2": {"gpudirect_rolling_batch": " 10 %"}}
    assert rolling.play_setting(["n1", "n2"], hostvars, "gpudirect_rolling_batch") == "10%"


def test_play_setting_refuses_nodes_that_disagree():
    hostvars = {"n1": {"gpudirect_rolling_batch": 2}, "n2": {}, "n3": {"gpudirect_rolling_batch": "2"}}
    with pytest.raises(ValueError, match=r"gpudirect_rolling_batch differs .*2 on n1, n3; 1 on n2"):
        rolling.play_setting(["n1", "n2", "n3"], hostvars, "gpudirect_rolling_batch")


def test_play_setting_checks_the_value_and_the_knob():
    with pytest.raises(ValueError, match="gpudirect_rolling_batch=0"):
        rolling.play_setting(["n1"], {"n1": {"gpudirect_rolling_batch": 0}}, "gpudirect_rolling_batch")
    with pytest.raises(ValueError, match="'gpudirect_kernel_update_serial' is not a batch knob"):
        rolling.play_setting(["n1"], {"n1": {}}, "gpudirect_kernel_update_serial")
    with pytest.raises(ValueError, match="expected a list of host names"):
        rolling.play_setting("n1", {"n1": {}}, "gpudirect_rolling_batch")


def test_filters_wrap_the_decisions_with_filter_errors():
    assert FILTERS["gpudirect_plan_disruption"](_all(gpudirect_mlnx_ofed=OFED_UPGRADE), [], None) == [
        "gpudirect_mlnx_ofed: openibd restart: OFED 24.10-1.1.4 -> 25.01-0.6.0"]
    assert FILTERS["gpudirect_rolling_setting"](["n1"], {"n1": {"gpudirect_rolling_batch": "4"}},
                                                "gpudirect_rolling_batch") == 4
    with pytest.raises(AnsibleFilterError, match="gpudirect_plan_disruption: gpudirect_mlnx_ofed_plan is missing"):
        FILTERS["gpudirect_plan_disruption"](_all(gpudirect_mlnx_ofed=None))
    with pytest.raises(AnsibleFilterError, match="gpudirect_rolling_setting: gpudirect_rolling_max_fail_percentage=101"):
        FILTERS["gpudirect_rolling_setting"](["n1"], {"n1": {"gpudirect_rolling_max_fail_percentage": 101}},
                                             "gpudirect_rolling_max_fail_percentage")


# The stage plays and what each leaves out (issue #16 outcome 3: one mechanism, the host
# pattern; issue #13: only gpudirect_disrupt is drained and batched).
STAGE_HOSTS = {
    "state_check.yml": ["gpu_nodes"],
    "preflight.yml": ["gpu_nodes:!gpudirect_unchanged"],
    "plan.yml": ["gpu_nodes:!gpudirect_unchanged"],
    # an install stage also leaves out the nodes where only other stages' inputs changed (issue #30 outcome 6)
    "os_pin.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt:!gpudirect_skip_os_pin"],
    "drivers.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt:!gpudirect_skip_drivers"],
    "pcie_acs.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt:!gpudirect_skip_pcie_acs"],
    "reboot_gate.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt"],
    "reboot.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt"],
    "report.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt"],
    # verification is the proof: every node, the unchanged ones included
    "verify.yml": ["gpu_nodes:!gpudirect_disrupt"],
    "state_record.yml": ["gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt"],
    "rolling.yml": ["gpudirect_disrupt", "gpudirect_disrupt"],
}

# Read by roles/gpudirect_verify until the loopback rework removes it (issue #16);
# nothing else may read the retired fact.
RETIRED_FACT_READERS = set()


def test_each_stage_play_targets_its_groups_and_no_copied_shortcut_is_left():
    playbooks = os.path.join(ROOT, "playbooks")
    for name, hosts in STAGE_HOSTS.items():
        with open(os.path.join(playbooks, name)) as handle:
            text = handle.read()
        assert [host_pattern(play["hosts"]) for play in yaml.safe_load(text)] == hosts, name
    for current, _, files in os.walk(playbooks):
        for name in files:
            with open(os.path.join(current, name)) as handle:
                text = handle.read()
            assert "end_host" not in text, name
            assert "gpudirect_state_unchanged" not in text, name


def test_no_role_reads_the_retired_unchanged_fact():
    readers = set()
    for current, _, files in os.walk(os.path.join(ROOT, "roles")):
        for name in files:
            if name.endswith((".yml", ".j2", ".py")):
                path = os.path.join(current, name)
                with open(path) as handle:
                    if "gpudirect_state_unchanged" in handle.read():
                        readers.add(os.path.relpath(path, ROOT))
    assert readers <= RETIRED_FACT_READERS


def test_the_rolling_play_batches_by_the_knobs_and_the_site_ends_with_it():
    with open(os.path.join(ROOT, "playbooks", "rolling.yml")) as handle:
        rolling_play = yaml.safe_load(handle)[0]
    assert "gpudirect_rolling_batch" in rolling_play["serial"]
    assert "gpudirect_rolling_max_fail_percentage" in rolling_play["max_fail_percentage"]
    with open(os.path.join(ROOT, "site.yml")) as handle:
        site = yaml.safe_load(handle)
    imported = [entry["ansible.builtin.import_playbook"] for entry in site]
    # the fleet lock first and last (one campaign at a time on these nodes), the rolling play before its release
    assert imported[:4] == ["playbooks/fleet_lock.yml", "playbooks/state_check.yml", "playbooks/preflight.yml",
                            "playbooks/plan.yml"]
    assert imported[-2:] == ["playbooks/rolling.yml", "playbooks/fleet_release.yml"]
    # site.yml reboots only in the rolling play, drained
    assert "playbooks/reboot.yml" not in imported


def test_every_planned_role_has_its_plan_entry_point():
    # playbooks/plan.yml includes tasks_from: plan of each; argument specs validate it
    for role in rolling.PLANNED_ROLES:
        assert os.path.isfile(os.path.join(ROOT, "roles", role, "tasks", "plan.yml")), role
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as handle:
            assert "plan" in yaml.safe_load(handle)["argument_specs"], role
