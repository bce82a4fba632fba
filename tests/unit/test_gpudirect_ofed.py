"""The gpudirect_mlnx_ofed decisions (module_utils/gpudirect_ofed.py) and the plan module, on real vendor strings.

``ofed_info -s`` strings come from tests/fixtures/vendor_strings/versions.yml (each with its
source); the DOCA release table is the role's own (roles/gpudirect_mlnx_ofed/vars/main.yml).
"""
import os

import pytest
import yaml
from ansible.module_utils import gpudirect_ofed as ofed
from ansible.module_utils import gpudirect_versions as v

import gpudirect_plan_mlnx_ofed
from conftest import PROJECT_FIXTURES, ROOT

with open(os.path.join(PROJECT_FIXTURES, "vendor_strings", "versions.yml"), encoding="utf-8") as _handle:
    STRINGS = yaml.safe_load(_handle)
with open(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "vars", "main.yml"), encoding="utf-8") as _handle:
    DOCA_TABLE = yaml.safe_load(_handle)["__gpudirect_mlnx_ofed_doca_ofed_versions"]
DOCA_ENTRIES = [e for e in STRINGS["ofed_info_s"] if e.get("doca")]
DOCA_291 = next(e["text"] for e in DOCA_ENTRIES if e["doca"] == "2.9.1")       # OFED-internal-24.10-1.1.4.0.200:
MLNX = next(e["text"] for e in STRINGS["ofed_info_s"] if e["text"].startswith("MLNX_OFED_LINUX-24.10"))

PARAMS = {"method": "doca", "wanted_version": "24.10-1.1.4", "profile": "doca-ofed",
          "core_packages": ["mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"], "inbox_packages": [],
          "hold": True, "restart_openibd": True, "allow_replace": True, "repo_key_changed": False,
          "repo_url": "https://m/doca/2.9.1/ubuntu24.04/x86_64/"}
HELD = ["doca-ofed", "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"]
# dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}' of a converged DOCA 2.9.1 node; the
# package versions are the real DOCA 2.9.1 ones (versions.yml package_versions)
DPKG_291 = ("doca-ofed 2.9.1-2 hi \nmlnx-ofed-kernel-dkms 24.10.OFED.24.10.1.1.4.1-1 hi \n"
            "mlnx-ofed-kernel-utils 24.10.OFED.24.10.1.1.4.1-1 hi \nrdma-core 2410mlnx54-1.2410068 ii \n"
            "doca-roce  un \n")


def probe(text=DOCA_291, **over):
    packages, held = ofed.parse_dpkg_query(DPKG_291)
    base = {"ofed": text, "packages": packages, "held": held, "loaded_peer_modules": [], "uninstaller": "",
            "openibd": True, "inbox_installed": [], "repo_configured": True}
    base.update(over)
    return base


def params(**over):
    return dict(PARAMS, **over)


# --- the action, on what the vendors print ------------------------------------------

@pytest.mark.parametrize("entry", DOCA_ENTRIES, ids=lambda e: e["doca"])
def test_doca_release_as_installed_needs_no_change(entry):
    out = ofed.decide_action(entry["text"], "doca", DOCA_TABLE[entry["doca"]])
    assert out["action"] == "none" and out["installed_version"] == entry["version"]


@pytest.mark.parametrize("installed,method,wanted,action", [
    ("", "doca", "24.10-1.1.4", "install"),
    (DOCA_291, "doca", "24.10-1.1.4", "none"),
    ("OFED-internal-24.10-1.1.40:", "doca", "24.10-1.1.4", "downgrade"),
    (DOCA_291, "doca", "25.01-0.6.0", "upgrade"),
    (DOCA_291, "doca", "24.10-1.1.3", "downgrade"),
    ("OFED-internal-25.01-0.6.0:\n", "doca", "24.10-1.1.4", "downgrade"),
    (MLNX, "doca", "24.10-1.1.4", "replace"),
    (MLNX, "mlnx_ofed_tarball", "24.10-1.1.4.0", "none"),
    (DOCA_291, "mlnx_ofed_tarball", "24.10-1.1.4.0", "replace"),
    (DOCA_291, "inbox", "", "remove"),
    ("", "inbox", "", "none"),
])
def test_action(installed, method, wanted, action):
    assert ofed.decide_action(installed, method, wanted)["action"] == action


@pytest.mark.parametrize("installed,wanted,knob", [
    ("", "", "gpudirect_mlnx_ofed_version: .*unknown"),
    ("", "24.10", "gpudirect_mlnx_ofed_version: .*'24.10'"),
    ("-bash: ofed_info: command not found", "24.10-1.1.4", "ofed_info -s on the host: .*command not found"),
    ("MLNX_OFED_LINUX-5.8:", "24.10-1.1.4", "ofed_info -s on the host: .*'MLNX_OFED_LINUX-5.8:'"),
])
def test_malformed_input_names_the_value_and_knob(installed, wanted, knob):
    with pytest.raises(ofed.OfedPlanError, match=knob):
        ofed.decide_action(installed, "doca", wanted)


def test_unknown_method_is_refused():
    with pytest.raises(ofed.OfedPlanError, match="gpudirect_mlnx_ofed_method"):
        ofed.decide_action("", "rpm", "24.10-1.1.4")


@pytest.mark.parametrize("rc,needle", [
    (172, "prerequisites are not met"), ("174", "another RDMA stack"), (171, "not applicable"),
    (0, "successfully"), (99, "unknown exit status"), ("x", "not a number"),
])
def test_installer_message(rc, needle):
    assert needle in ofed.installer_message(rc)


# --- package probes ------------------------------------------------------------------

def test_dpkg_query_reads_installed_and_held():
    packages, held = ofed.parse_dpkg_query(DPKG_291)
    assert packages["mlnx-ofed-kernel-dkms"] == "24.10.OFED.24.10.1.1.4.1-1"
    assert "doca-roce" not in packages and held == HELD


def test_dpkg_query_with_a_bad_version_names_the_package():
    with pytest.raises(ofed.OfedPlanError, match="dpkg-query: doca-ofed"):
        ofed.parse_dpkg_query("doca-ofed (none) ii \n")


def test_versionlock_list():
    text = ("Last metadata expiration check: 0:01:02 ago.\n"
            "mlnx-ofed-kernel-dkms-0:24.10-OFED.24.10.3.2.5.1.*\nmlnx-ofed-kernel-utils-0:24.10-OFED.24.10.3.2.5.1.*\n")
    assert ofed.parse_versionlock_list(text, ["mlnx-ofed-kernel", "mlnx-ofed-kernel-dkms", "doca-ofed"]) == [
        "mlnx-ofed-kernel-dkms"]


# --- the plan: changes and disruption --------------------------------------------------

def test_converged_node_has_no_changes_and_no_disruption():
    out = ofed.plan(probe(), params())
    assert out["action"] == "none" and out["changes"] == [] and out["disruption"] == []
    assert out["hold_missing"] == [] and not out["restart_openibd"]


def test_upgrade_restarts_openibd_and_unloads_peer_memory():
    out = ofed.plan(probe(loaded_peer_modules=["nvidia_peermem"]), params(wanted_version="25.01-0.6.0"))
    assert out["disruption"] == ["openibd restart: OFED 24.10-1.1.4.0.200 -> 25.01-0.6.0",
                                 "peer-memory modules unloaded around the OFED change: nvidia_peermem"]
    assert out["restart_openibd"] and not out["removal"] and out["reboot_reason"] == ""


def test_no_restart_turns_into_a_reboot_request():
    out = ofed.plan(probe(), params(wanted_version="25.01-0.6.0", restart_openibd=False))
    assert out["disruption"] == ["reboot requested: OFED 24.10-1.1.4.0.200 -> 25.01-0.6.0 "
                                 "(gpudirect_mlnx_ofed_restart_openibd: false)"]
    assert out["reboot_reason"].startswith("gpudirect_mlnx_ofed: OFED changed to 25.01-0.6.0")


def test_replace_removes_first_with_the_uninstaller():
    out = ofed.plan(probe(MLNX, uninstaller="/usr/sbin/ofed_uninstall.sh"), params())
    assert out["removal"] and "OFED removal: MLNX_OFED_LINUX 24.10-1.1.4.0" in out["disruption"]
    assert out["release_holds"] == HELD and out["remove_packages"] == []


# Gate (issue #31 outcome 6): plan() counts a downgrade as a removal (removal = action in
# replace/remove/downgrade), so the newer stack is removed first, its holds released, the removal
# listed as a disruption and refused without gpudirect_mlnx_ofed_allow_replace. Dropping "downgrade" from
# that list left every test green before these two tests.
def test_a_downgrade_removes_the_newer_stack_first():
    """DOCA 2.9.1 installed (OFED-internal-24.10-1.1.4.0.200), 24.10-1.1.3 wanted: packages of a
    newer stack do not downgrade in place, so the plan removes it first (its holds released,
    its packages removed through the package manager) and says so as a disruption."""
    out = ofed.plan(probe(loaded_peer_modules=["nvidia_peermem"]), params(wanted_version="24.10-1.1.3"))
    assert out["action"] == "downgrade" and out["removal"] and out["stack_change"]
    assert out["disruption"][0] == "OFED removal: OFED-internal 24.10-1.1.4.0.200"
    assert "OFED downgrade: OFED-internal 24.10-1.1.4.0.200 -> 24.10-1.1.3 (DOCA-OFED)" in out["changes"]
    assert out["release_holds"] == HELD
    assert out["remove_packages"] == ["doca-ofed", "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"]


def test_a_downgrade_is_refused_like_a_replace_naming_the_knob():
    with pytest.raises(ofed.OfedPlanError, match="gpudirect_mlnx_ofed_allow_replace is false: nothing was changed"):
        ofed.plan(probe(), params(wanted_version="24.10-1.1.3", allow_replace=False))


def test_replace_is_refused_naming_the_knob():
    with pytest.raises(ofed.OfedPlanError, match="gpudirect_mlnx_ofed_allow_replace is false"):
        ofed.plan(probe(MLNX), params(allow_replace=False))


def test_inbox_removal_and_inbox_installs():
    out = ofed.plan(probe(inbox_installed=["ibverbs-providers"]),
                    params(method="inbox", wanted_version="", inbox_packages=["rdma-core", "ibverbs-providers"]))
    assert out["action"] == "remove" and out["disruption"] == ["OFED removal: OFED-internal 24.10-1.1.4.0.200"]
    assert out["remove_packages"] == ["doca-ofed", "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"]
    assert out["inbox_missing"] == ["rdma-core"]


def test_inbox_package_installs_are_changes_not_disruption():
    out = ofed.plan(probe("", packages={}, held=[]),
                    params(method="inbox", wanted_version="", inbox_packages=["rdma-core", "ibverbs-utils"]))
    assert out["changes"] == ["install inbox RDMA packages: rdma-core, ibverbs-utils"] and out["disruption"] == []


def test_missing_profile_and_holds_are_changes_not_disruption():
    packages, _ = ofed.parse_dpkg_query(DPKG_291)
    del packages["doca-ofed"]
    out = ofed.plan(probe(packages=packages, held=[], repo_configured=False), params(repo_key_changed=True))
    assert out["disruption"] == [] and out["install_profile"]
    assert any(c.startswith("DOCA profile doca-ofed installed") for c in out["changes"])
    assert "hold doca-ofed, mlnx-ofed-kernel-dkms, mlnx-ofed-kernel-utils" in out["changes"]
    assert any(c.startswith("DOCA repository https://m/doca/2.9.1/") for c in out["changes"])


# --- the connection guard on the plan --------------------------------------------------

AT_RISK = {"at_risk": [{"what": "the controller's SSH connection", "interface": "bond0", "address": "10.0.0.1",
                        "why": "bond0 stacks on ens1f0np0 (mlx5_core)"}], "checked": []}


def test_guard_fails_a_disruptive_plan_naming_interface_address_and_knob():
    out = ofed.plan(probe(), params(wanted_version="25.01-0.6.0"))
    with pytest.raises(ofed.OfedPlanError) as error:
        ofed.guard(out, AT_RISK, allow=False)
    message = str(error.value)
    assert "bond0" in message and "10.0.0.1" in message and "mlx5_core" in message
    assert "gpudirect_mlnx_ofed_allow_disruption_over_rdma_netdev: true" in message


def test_guard_lets_a_converged_plan_pass_and_an_override_detach_the_restart():
    assert ofed.guard(ofed.plan(probe(), params()), AT_RISK, allow=False)["overridden"] is False
    out = ofed.guard(ofed.plan(probe(), params(wanted_version="25.01-0.6.0")), AT_RISK, allow=True)
    # an upgrade in place removes nothing
    assert out["overridden"] and out["detach_restart"] and not out["detach_removal"]


def test_an_override_detaches_the_removal_of_the_stack_in_the_way():
    # MLNX_OFED replaced by DOCA (its uninstaller first), and DOCA removed for the inbox stack
    replace = ofed.plan(probe(MLNX, uninstaller="/usr/sbin/ofed_uninstall.sh"), params())
    inbox = ofed.plan(probe(inbox_installed=["ibverbs-providers"]),
                      params(method="inbox", wanted_version="", inbox_packages=["rdma-core", "ibverbs-providers"]))
    for out in (replace, inbox):
        assert ofed.guard(out, AT_RISK, allow=True)["detach_removal"] is True


def test_guard_detaches_nothing_when_nothing_runs_over_a_connectx_netdev():
    out = ofed.guard(ofed.plan(probe(), params(wanted_version="25.01-0.6.0")), {"at_risk": [], "checked": []},
                     allow=False)
    assert (out["overridden"], out["detach_restart"], out["detach_removal"]) == (False, False, False)


# --- the module, as Ansible runs it -------------------------------------------------------

def test_module_plans_read_only_in_check_mode(run_module, monkeypatch, tmp_path):
    calls = []

    def fake_run(self, argv, **kwargs):
        calls.append(argv)
        if argv[-1] == "-s":
            return 0, DOCA_291, ""
        if "dpkg-query" in argv[0]:
            return 0, DPKG_291, ""
        return 1, "", ""

    monkeypatch.setattr(gpudirect_plan_mlnx_ofed.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    monkeypatch.setattr(gpudirect_plan_mlnx_ofed.AnsibleModule, "run_command", fake_run)
    repo = tmp_path / "doca.sources"
    repo.write_text("Types: deb\nURIs: https://m/doca/2.9.1/ubuntu24.04/x86_64/\nSuites: ./\n")
    result = run_module(gpudirect_plan_mlnx_ofed, dict(
        method="doca", wanted_version="24.10-1.1.4", profile="doca-ofed", core_packages=PARAMS["core_packages"],
        probe_packages=["doca-ofed", "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils", "rdma-core"],
        repo_url=PARAMS["repo_url"], repo_file=str(repo), sys_root=str(tmp_path), proc_root=str(tmp_path)),
        check_mode=True)
    assert result["changed"] is False and result["action"] == "none", result
    assert result["changes"] == [] and result["disruption"] == []
    assert all(isinstance(argv, list) for argv in calls)
    assert result["installer_messages"]["172"].startswith("mlnxofedinstall exited 172")


def test_module_fails_naming_the_knob(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(gpudirect_plan_mlnx_ofed.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: None)
    result = run_module(gpudirect_plan_mlnx_ofed, dict(method="doca", wanted_version="24.10", sys_root=str(tmp_path),
                                             proc_root=str(tmp_path), repo_file=str(tmp_path / "none")))
    assert result["failed"] and "gpudirect_mlnx_ofed_version" in result["msg"] and "'24.10'" in result["msg"]


def test_versions_are_parsed_only_through_gpudirect_versions():
    source = open(os.path.join(ROOT, "module_utils", "gpudirect_ofed.py"), encoding="utf-8").read()
    assert "versions.parse_ofed_info_s" in source and "import re" not in source
    assert v.parse_ofed_info_s(DOCA_291)["version"] == "24.10-1.1.4.0.200"


# --- the role's task order: the key is checked before anything changes ---------------------

def _tasks(name):
    """The tasks of one file of the role."""
    with open(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "tasks", name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_plan_checks_the_key_read_only_before_deciding_and_main_acts_on_the_plan():
    plan = _tasks("plan.yml")
    modules = [next(k for k in t if k not in ("name", "when", "register", "vars", "check_mode")) for t in plan]
    assert modules[:3] == ["ansible.builtin.include_tasks", "gpudirect_repo_key", "gpudirect_plan_mlnx_ofed"]
    assert plan[1]["check_mode"] is True and plan[2]["register"] == "gpudirect_mlnx_ofed_plan"
    main = _tasks("main.yml")
    # planned again in the stage even after the read-only pass: the pass only decided the drain
    assert main[0]["ansible.builtin.include_tasks"] == "plan.yml" and "when" not in main[0]


def test_nothing_is_unloaded_or_removed_before_the_plan():
    change = _tasks("change.yml")
    assert "community.general.modprobe" in change[0] and change[0]["loop"] == "{{ gpudirect_mlnx_ofed_plan.loaded_peer_modules }}"
    text = open(os.path.join(ROOT, "roles", "gpudirect_mlnx_ofed", "tasks", "change.yml"), encoding="utf-8").read()
    assert "gpudirect_repo_key" not in text
