"""The gpudirect_nvidia_driver plan: module_utils/gpudirect_nvidia.py (flavour, branch), module_utils/gpudirect_nvidia_plan.py
(probe and decision) and library/gpudirect_plan_nvidia_driver.py, on real captures.

Captures: the lent GPU nodes, H200 (tests/fixtures/gpu_node/h200 and its capture/) and H100
(tests/fixtures/gpu_node/h100: vendor.txt has /proc/driver/nvidia/version, the dpkg names and holds,
no modinfo, no systemd; gpudirect_facts.json the GPU 0x2330 at 0000:00:06.0). Both run the open
module 580.159.04 from their image, with no driver package. The proprietary /proc line is the
Debian 12 form in tests/fixtures/vendor_strings/versions.yml.
"""

import json
import os
import re
import types

import pytest
from ansible.module_utils import gpudirect_nvidia as nv
from ansible.module_utils import gpudirect_nvidia_plan as plan

import gpu_node_sim as sim
import gpudirect_plan_nvidia_driver as module
from conftest import H200_CAPTURE, PROJECT_FIXTURES

H100 = os.path.join(PROJECT_FIXTURES, "gpu_node", "h100")
H200_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")


def _facts(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


def _section(path, title):
    """One ``=== title`` section of a capture_vendor.sh capture."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return text.split("=== %s\n" % title, 1)[1].split("\n=== ", 1)[0]


@pytest.fixture(name="h200")
def fixture_h200():
    return _facts(H200_FACTS)


@pytest.fixture(name="h100")
def fixture_h100():
    return _facts(os.path.join(H100, "gpudirect_facts.json"))


def gpu(device_id):
    return {"device_id": device_id, "vendor_id": "0x10de"}


def options(**kw):
    out = {"branch": "580", "version": "", "flavor": "auto", "flavor_fallback": "open", "fabricmanager": "auto",
           "os_family": "Debian", "gpus": [], "hold": True, "blacklist_nouveau": True,
           "rebuild_on_ofed_change": True, "ofed_changed": False}
    out.update(kw)
    return out


# --- GPU data and flavour (module_utils/gpudirect_nvidia.py; the table in test_nvidia_gpus.py) ---

def test_gpu_info_reads_the_table():
    info = nv.gpu_info("2330")
    assert info["known"] and info["open"] and info["min_branch"] == 525
    assert nv.gpu_info("junk")["known"] is False


def test_flavor_auto_h200_facts(h200):
    out = nv.choose_flavor(h200["gpus"], "auto", "open")
    assert out["flavor"] == "open"
    assert "0x2335 (NVIDIA H200)" in out["reasons"][0]


def test_flavor_auto_h100_facts(h100):
    out = nv.choose_flavor(h100["gpus"], "auto", "open")
    assert out["flavor"] == "open" and "0x2330 (NVIDIA H100 80GB HBM3)" in out["reasons"][0]


@pytest.mark.parametrize("ids,flavor", [
    (["0x2330"], "open"), (["0x2901"], "open"), (["0x2342"], "open"), (["0x1eb8"], "open"),
    (["0x1db4"], "proprietary"), (["0x15f9", "0x15f9"], "proprietary"), (["0x20b0", "0x20b5"], "open"),
])
def test_flavor_auto(ids, flavor):
    assert nv.choose_flavor([gpu(i) for i in ids], "auto")["flavor"] == flavor


def test_flavor_no_gpu_uses_fallback():
    out = nv.choose_flavor([], "auto", "proprietary")
    assert out["flavor"] == "proprietary"
    assert "gpudirect_nvidia_driver_flavor_fallback" in out["reasons"][0]
    assert nv.choose_flavor([], "auto", "open")["flavor"] == "open"


def test_flavor_unknown_id_is_refused_not_guessed():
    with pytest.raises(nv.NvidiaDecisionError, match="0x1d99.*gpudirect_nvidia_driver_gpu_support.*set gpudirect_nvidia_driver_flavor: open"):
        nv.choose_flavor([gpu("0x1d99")], "auto", "open")


def test_flavor_explicit():
    assert nv.choose_flavor([gpu("0x2330")], "proprietary")["flavor"] == "proprietary"
    assert nv.choose_flavor([], "open")["flavor"] == "open"


@pytest.mark.parametrize("ids,requested,needle", [
    (["0x2901"], "proprietary", "gpudirect_nvidia_driver_flavor: proprietary"),
    (["0x2342"], "proprietary", "Grace Hopper, Blackwell and later"),
    (["0x1db4"], "open", "gpudirect_nvidia_driver_flavor: open"),
    (["0x2901", "0x1db4"], "auto", "no driver flavour"),
])
def test_flavor_refused(ids, requested, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        nv.choose_flavor([gpu(i) for i in ids], requested)


def test_flavor_bad_values():
    with pytest.raises(nv.NvidiaDecisionError, match="gpudirect_nvidia_driver_flavor must"):
        nv.choose_flavor([], "closed")
    with pytest.raises(nv.NvidiaDecisionError, match="gpudirect_nvidia_driver_flavor_fallback"):
        nv.choose_flavor([], "auto", "auto")


# --- branch ------------------------------------------------------------------

def test_branch_ok(h200, h100):
    assert nv.check_branch("580", h200["gpus"])["branch"] == "580"
    assert nv.check_branch("580", h100["gpus"])["branch"] == "580"
    assert nv.check_branch(580)["branch"] == "580"


@pytest.mark.parametrize("branch,ids,needle", [
    ("58", [], "three-digit"), ("latest", [], "three-digit"), ("999", [], "not a branch the toolkit knows"),
    ("535", ["0x2901"], "needs branch 570"), ("590", ["0x1db4"], "supported up to branch 580"), ("600", [], "not a branch"),
])
def test_branch_refused(branch, ids, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        nv.check_branch(branch, [gpu(i) for i in ids])


def test_branch_unlisted_ok_still_checks_gpus():
    assert nv.check_branch("590", [], True)["branch"] == "590"
    with pytest.raises(nv.NvidiaDecisionError, match="up to branch 580"):
        nv.check_branch("590", [gpu("0x1db4")], True)


def test_h100_branch_before_its_first_is_refused(h100):
    with pytest.raises(nv.NvidiaDecisionError, match="0x2330 .* at 0000:00:06.0 needs branch 525 or later"):
        nv.check_branch("470", h100["gpus"])


# --- the installed driver: packages, foreign, nothing (driver_action) --------------------

FOREIGN_580_OPEN = {"loaded_version": "580.159.04", "version": "580.159.04", "flavor": "open", "path": "",
                    "owner": "", "disk_version": ""}


def found(packages=None, module=None, other=None, **kw):
    out = {"packages": packages or {}, "module": dict(module or {}), "other_packages": other or {}, "loaded": []}
    out.update(kw)
    return out


# (found, branch, version, flavour) -> action, managed, a needle of the message
ACTION_TABLE = [
    pytest.param(found({"nvidia-kernel-open-dkms": "580.95.05-1", "nvidia-open": "580.95.05-1"}), "580", "", "open",
                 "none", True, "installed driver 580.95.05 (open) matches: no change", id="package-installed"),
    pytest.param(found({"nvidia-kernel-open-dkms": "1:580.95.05-1ubuntu1"}), "580", "580.95.05", "open",
                 "none", True, "installed driver 580.95.05 (open) matches", id="package-exact-version"),
    # cuda-compat-13-0 580.95.05-0ubuntu1 on the H100 node (vendor.txt): the same version form
    pytest.param(found({"nvidia-kernel-open-dkms": "580.95.05-0ubuntu1"}), "580", "580.95.5", "open",
                 "none", True, "matches", id="package-exact-version-leading-zero"),
    pytest.param(found({"nvidia-kernel-open-dkms": "570.86.15-1"}), "580", "", "open",
                 "change", True, "installed driver 570.86.15 (open) differs from wanted branch 580 (open): replacing it",
                 id="package-other-branch"),
    pytest.param(found({"nvidia-kernel-dkms": "580.95.05-1"}), "580", "", "open",
                 "change", True, "installed driver 580.95.05 (proprietary) differs from wanted branch 580 (open)",
                 id="package-other-flavour"),
    pytest.param(found({"nvidia-driver": "3:580.95.05-1.el9"}), "580", "", "open",
                 "none", True, "installed driver 580.95.05 (open) matches", id="package-el"),
    # a package-installed driver wins over what the loaded module says (it is the role's)
    pytest.param(found({"nvidia-kernel-open-dkms": "580.95.05-1"}, FOREIGN_580_OPEN), "580", "", "open",
                 "none", True, "matches: no change", id="package-and-loaded"),
    pytest.param(found(module=FOREIGN_580_OPEN), "580", "", "open", "keep", False,
                 "driver 580.159.04 (open) is installed outside the package manager (runfile or image): kept, "
                 "not managed by packages", id="foreign-matching"),
    pytest.param(found(module=FOREIGN_580_OPEN), "580", "580.159.04", "open", "keep", False,
                 "kept, not managed by packages", id="foreign-matching-exact-version"),
    pytest.param(found(module=FOREIGN_580_OPEN), "580", "580.95.05", "open", "refuse", False,
                 "version 580.159.04 installed, 580.95.05 wanted", id="foreign-other-version"),
    pytest.param(found(module=FOREIGN_580_OPEN), "570", "", "open", "refuse", False,
                 "branch 580 installed, 570 wanted", id="foreign-other-branch"),
    pytest.param(found(module=dict(FOREIGN_580_OPEN, flavor="proprietary")), "580", "", "open", "refuse", False,
                 "flavour proprietary installed, open wanted", id="foreign-proprietary-vs-open"),
    pytest.param(found(module=FOREIGN_580_OPEN), "580", "", "proprietary", "refuse", False,
                 "flavour open installed, proprietary wanted", id="foreign-open-vs-proprietary"),
    # runfile installed, not loaded (after a reboot into a kernel it was built for): modinfo tells
    pytest.param(found(module={"disk_version": "580.159.04", "version": "580.159.04", "flavor": "open",
                               "path": "/lib/modules/6.8.0-49-generic/kernel/drivers/video/nvidia.ko", "owner": ""}),
                 "580", "", "open", "keep", False, "installed outside the package manager", id="foreign-on-disk"),
    pytest.param(found(module=dict(FOREIGN_580_OPEN, owner="linux-modules-nvidia-580-open-6.8.0-49-generic"),
                       other={"nvidia-dkms-580-open": "580.95.05-0ubuntu1"}), "580", "", "open", "keep", False,
                 "installed by linux-modules-nvidia-580-open-6.8.0-49-generic, nvidia-dkms-580-open, not from the CUDA "
                 "repository: kept", id="other-package-matching"),
    pytest.param(found(), "580", "", "open", "install", True,
                 "no NVIDIA driver installed: installing branch 580 (newest) open", id="nothing-installed"),
    pytest.param(found(), "580", "580.95.05", "proprietary", "install", True,
                 "installing branch 580 580.95.05 proprietary", id="nothing-installed-exact"),
]


@pytest.mark.parametrize("probe,branch,version,flavor,action,managed,needle", ACTION_TABLE)
def test_driver_action_table(probe, branch, version, flavor, action, managed, needle):
    out = plan.driver_action(probe, branch, version, flavor)
    assert (out["action"], out["managed"]) == (action, managed), out["message"]
    assert needle in out["message"]


def test_refusal_names_both_and_the_fix():
    out = plan.driver_action(found(module=FOREIGN_580_OPEN), "570", "570.86.15", "proprietary")
    for needle in ("driver 580.159.04 (open) is installed outside the package manager",
                   "wanted: 570.86.15 (proprietary)", "branch 580 installed, 570 wanted",
                   "flavour open installed, proprietary wanted", "nvidia-uninstall",
                   "gpudirect_nvidia_driver_branch: '580'", "gpudirect_nvidia_driver_version: '580.159.04' (or '')",
                   "gpudirect_nvidia_driver_flavor: open"):
        assert needle in out["message"], needle
    # a knob that already matches is not suggested
    out = plan.driver_action(found(module=dict(FOREIGN_580_OPEN, flavor="proprietary")), "580", "", "open")
    assert "gpudirect_nvidia_driver_branch" not in out["message"] and "gpudirect_nvidia_driver_flavor: proprietary" in out["message"]


def test_other_package_refusal_says_which_package():
    out = plan.driver_action(found(module=FOREIGN_580_OPEN, other={"nvidia-dkms-570-open": "570.86.15-0ubuntu1"}),
                             "570", "", "open")
    assert out["action"] == "refuse" and out["source"] == "other package"
    assert "apt-get purge / dnf remove nvidia-dkms-570-open" in out["message"]


def test_unknown_flavour_is_refused_with_a_way_out():
    out = plan.driver_action(found(module={"disk_version": "580.159.04", "version": "580.159.04", "flavor": ""}),
                             "580", "", "open")
    assert out["action"] == "refuse" and "modprobe nvidia" in out["message"]


def test_reload_pending_is_said():
    module_ = dict(FOREIGN_580_OPEN, disk_version="580.126.09", version="580.126.09")
    out = plan.driver_action(found(module=module_), "580", "", "open")
    assert out["action"] == "keep" and "(580.159.04 is loaded until a reboot)" in out["message"]


# --- probe on the captured nodes ------------------------------------------------------

def h100_node(**kw):
    """The H100 node of vendor.txt: its /proc line, no modinfo, no systemd, no driver package."""
    proc = _section(os.path.join(H100, "vendor.txt"), "cat /proc/driver/nvidia/version")
    host = sim.gpu_node(proc=proc, systemd=False, **kw)
    return host


def test_probe_h100_capture_keeps_the_image_driver(h100):
    found_ = plan.probe(h100_node().plan_host(), "580", plan.STAMP)
    assert found_["module"] == {"loaded_version": "580.159.04", "disk_version": "", "path": "", "owner": "",
                                "version": "580.159.04", "flavor": "open"}
    assert found_["packages"] == {} and found_["persistenced"]["systemd"] is False
    out = plan.decide(found_, options(gpus=h100["gpus"]))
    assert out["action"] == "keep" and not out["managed"]
    assert out["changes"] == [] and out["disruption"] == []
    assert not out["persistenced"]["managed"] and not out["fabricmanager"]["wanted"]


def test_probe_h200_reads_the_captured_proc_version(h200):
    with open(os.path.join(H200_CAPTURE, "system.txt"), encoding="utf-8") as handle:
        proc = "".join(line for line in handle.read().splitlines(True)
                       if line.startswith(("NVRM version:", "GCC version:")))
    found_ = plan.probe(sim.gpu_node(proc=proc, sys_version="").plan_host(), "580")
    assert (found_["module"]["version"], found_["module"]["flavor"]) == ("580.159.04", "open")
    assert plan.decide(found_, options(gpus=h200["gpus"]))["message"] == (
        "driver 580.159.04 (open) is installed outside the package manager (runfile or image): kept, "
        "not managed by packages")


def test_probe_reads_held_packages_from_dpkg_status():
    """``hi`` as in vendor.txt (``hi  libnccl2 2.28.3-1+cuda13.0``): installed and held."""
    def commands(argv):
        if argv[:2] == ["dpkg-query", "-W"] and "nvidia-open" in argv:
            return 0, ("nvidia-open 580.95.05-0ubuntu1 hi \nnvidia-kernel-open-dkms 580.95.05-0ubuntu1 ii \n"
                       "nvidia-smi 580.95.05-0ubuntu1 rc ")
        return 1, ""

    host = sim.Host("6.8.0-90-generic", which={"dpkg-query"}, commands=commands)
    found_ = plan.probe(host.plan_host(), "580")
    assert found_["packages"] == {"nvidia-open": "580.95.05-0ubuntu1", "nvidia-kernel-open-dkms": "580.95.05-0ubuntu1"}
    assert found_["held"] == ["nvidia-open"]
    out = plan.decide(dict(found_, loaded=["nvidia"], stamp="driver=580.95.05 kernel=6.8.0-90-generic ofed="),
                      options(gpus=[gpu("0x2330")]))
    assert out["action"] == "none" and out["changes"] == ["hold nvidia-kernel-open-dkms"]


# --- malformed input fails, naming the text and what to do ----------------------------

@pytest.mark.parametrize("node,needle", [
    ({"proc": "NVRM version: something else entirely\n", "sys_version": ""},
     r"/proc/driver/nvidia/version: no 'NVRM version: NVIDIA UNIX \.\.\. Kernel Module <version>' line"),
    ({"sys_version": "garbage"}, r"/sys/module/nvidia/version: NVIDIA driver version: 'garbage'"),
])
def test_malformed_driver_text_fails(node, needle):
    with pytest.raises(plan.PlanError, match=needle):
        plan.probe(sim.gpu_node(**node).plan_host(), "580")


@pytest.mark.parametrize("opts,needle", [
    ({"version": "570.86.15"}, "gpudirect_nvidia_driver_version 570.86.15 is not a version of gpudirect_nvidia_driver_branch 580"),
    ({"version": "580"}, r"gpudirect_nvidia_driver_version: NVIDIA driver version: '580'"),
    ({"branch": "58O"}, "gpudirect_nvidia_driver_branch must be a three-digit"),
    ({"flavor": "proprietary", "gpus": [gpu("0x2901")]}, "gpudirect_nvidia_driver_flavor: proprietary is not supported"),
    ({"fabricmanager": "maybe"}, "gpudirect_nvidia_driver_fabricmanager must be auto, true or false"),
])
def test_bad_options_fail_naming_the_knob(opts, needle):
    with pytest.raises(plan.PlanError, match=needle):
        plan.decide(found(), options(**opts))


def test_unreadable_package_version_fails():
    with pytest.raises(plan.PlanError, match="installed NVIDIA driver package version: .*'\\(none\\)'"):
        plan.decide(found({"nvidia-kernel-open-dkms": "(none)"}), options())


def test_unknown_bridge_fails_under_auto():
    with pytest.raises(plan.PlanError, match="0x2b00 at 0000:0a:00.0.*gpudirect_nvidia_driver_fabricmanager: true"):
        plan.decide(found(nvswitches=[{"device_id": "0x2b00", "address": "0000:0a:00.0"}]), options())


# --- changes and disruption ------------------------------------------------------------

def test_fresh_install_on_a_bare_node_changes_without_disruption():
    out = plan.decide(found(), options(gpus=[gpu("0x2330")]))
    assert out["action"] == "install" and out["install_packages"] == ["nvidia-open"]
    assert out["changes"][0] == ("install the NVIDIA driver branch 580 (newest) (open) from the CUDA repository: "
                                 "nvidia-open")
    assert "load the nvidia module" in out["changes"] and out["disruption"] == []
    # a node without a GPU (a test VM): the module cannot load there, so it is no change to make
    assert "load the nvidia module" not in plan.decide(found(), options())["changes"]


def test_el_installs_the_module_stream():
    out = plan.decide(found(), options(os_family="RedHat", branch="570", flavor="proprietary"))
    assert out["install_packages"] == ["@nvidia-driver:570-dkms"]


def test_version_change_while_loaded_is_a_reload():
    probe = found({"nvidia-kernel-open-dkms": "550.90.07-1"}, {"loaded_version": "550.90.07", "version": "550.90.07",
                                                               "flavor": "open"}, loaded=["nvidia", "nvidia_uvm"])
    out = plan.decide(probe, options(branch="570", version="570.86.15"))
    assert out["action"] == "change" and out["reload"]
    assert out["disruption"] == ["nvidia modules reload: 550.90.07 -> 570.86.15"]
    assert out["changes"] == ["replace driver 550.90.07 (open) with 570.86.15 (open)"]


def test_fresh_install_while_modules_are_loaded_is_a_reload():
    """/sys/module/nvidia exists but neither it nor /proc tells a version (a half-unloaded driver)."""
    out = plan.decide(found(loaded=["nvidia"]), options())
    assert out["action"] == "install"
    assert out["disruption"] == ["nvidia modules reload: fresh install of branch 580 (newest) while nvidia modules "
                                 "are loaded"]


def test_ofed_change_rebuilds_and_reloads():
    base = found({"nvidia-kernel-open-dkms": "580.95.05-1"}, loaded=["nvidia", "nvidia_peermem"], kernel="6.8.0-90-generic",
                 ofed="OFED-internal-25.01-0.6.0:", peermem_built=True, peermem_depends="ib_core,nvidia",
                 stamp="driver=580.95.05 kernel=6.8.0-90-generic ofed=OFED-internal-24.10-1.1.4:")
    out = plan.decide(base, options())
    assert out["rebuild"] and out["rebuild_reason"] == "it was built against ofed=OFED-internal-24.10-1.1.4:"
    assert out["disruption"] == ["nvidia modules reload: DKMS rebuild of 580.95.05 against OFED "
                                 "OFED-internal-25.01-0.6.0:"]
    converged = dict(base, stamp="driver=580.95.05 kernel=6.8.0-90-generic ofed=OFED-internal-25.01-0.6.0:")
    out = plan.decide(converged, options())
    assert not out["rebuild"] and out["disruption"] == [] and out["changes"] == ["hold nvidia-kernel-open-dkms"]
    assert plan.decide(converged, options(hold=False))["changes"] == []
    assert plan.decide(converged, options(ofed_changed=True))["rebuild_reason"] == \
        "the gpudirect_mlnx_ofed stage changed OFED in this run"
    assert not plan.decide(base, options(rebuild_on_ofed_change=False))["rebuild"]


def test_loaded_nouveau_is_a_reboot():
    probe = found(loaded=["nouveau"], nouveau_kernels=["6.1.0-41-amd64"],
                  initramfs_nouveau_unblocked=["6.1.0-41-amd64"])
    out = plan.decide(probe, options())
    assert out["disruption"] == ["reboot: nouveau is loaded and gets blacklisted"]
    assert "blacklist nouveau (kernels with a nouveau module: 6.1.0-41-amd64)" in out["changes"]
    assert "rebuild the initramfs of 6.1.0-41-amd64 (it carries nouveau.ko without the blacklist)" in out["changes"]
    assert "load the nvidia module" not in out["changes"]
    assert plan.decide(probe, options(blacklist_nouveau=False))["disruption"] == []


def test_nouveau_blacklist_and_initramfs_change_only_in_the_drained_batch():
    # issue #29 outcome 3: not loaded, so no reboot, but what the next boot loads changes
    probe = found(nouveau_kernels=["6.1.0-41-amd64"], initramfs_nouveau_unblocked=["6.1.0-41-amd64"])
    out = plan.decide(probe, options())
    assert out["disruption"] == ["boot configuration: blacklist nouveau; rebuild the initramfs of 6.1.0-41-amd64 "
                                 "(what the next boot loads)"]
    # blacklisted already, an initramfs built before the blacklist still carries nouveau.ko
    out = plan.decide(dict(probe, nouveau_conf_present=True), options())
    assert out["disruption"] == ["boot configuration: rebuild the initramfs of 6.1.0-41-amd64 (what the next boot loads)"]
    converged = dict(probe, nouveau_conf_present=True, initramfs_nouveau_unblocked=[])
    assert plan.decide(converged, options())["disruption"] == []
    assert plan.decide(probe, options(blacklist_nouveau=False))["disruption"] == []


def test_nvswitch_node_plans_the_fabric_manager():
    probe = found({"nvidia-kernel-open-dkms": "580.95.05-1"}, loaded=["nvidia"], stamp="driver=580.95.05",
                  nvswitches=[{"device_id": "0x22a3", "address": "0000:07:00.0"}])
    out = plan.decide(probe, options(hold=False))
    assert out["fabricmanager"]["wanted"] and out["fabricmanager"]["package"] == "nvidia-fabricmanager"
    assert out["changes"] == ["install and start the fabric manager nvidia-fabricmanager at the driver version"]
    probe["packages"]["nvidia-fabricmanager"] = "580.95.05-1"
    assert plan.decide(probe, options(hold=False))["changes"] == []


# --- the module --------------------------------------------------------------------------

@pytest.fixture(name="on_host")
def fixture_on_host(monkeypatch):
    def use(host):
        monkeypatch.setattr(module, "_Host", lambda _module: host.plan_host())
    return use


def test_module_on_the_h100_capture_changes_nothing(run_module, on_host, h100):
    on_host(h100_node())
    out = run_module(module, {"branch": "580", "os_family": "Debian", "gpus": h100["gpus"]}, check_mode=True)
    assert not out["changed"] and "failed" not in out
    assert out["action"] == "keep" and out["changes"] == [] and out["disruption"] == []
    assert out["probe"]["module"]["version"] == "580.159.04"


def test_module_refuses_another_branch_with_the_fix(run_module, on_host, h100):
    on_host(h100_node())
    out = run_module(module, {"branch": "570", "os_family": "Debian", "gpus": h100["gpus"]})
    assert out["failed"] and not out["changed"]
    assert "branch 580 installed, 570 wanted" in out["msg"] and "nvidia-uninstall" in out["msg"]


def test_module_fails_on_malformed_proc_text(run_module, on_host):
    on_host(sim.gpu_node(proc="NVRM version: garbled\n", sys_version=""))
    out = run_module(module, {"branch": "580", "os_family": "Debian"})
    assert out["failed"] and out["msg"].startswith("gpudirect_nvidia_driver: /proc/driver/nvidia/version:")


def test_module_host_runs_commands_in_list_form():
    calls = []
    fake = types.SimpleNamespace(get_bin_path=lambda name: "/usr/bin/" + name if name == "modinfo" else None,
                                 run_command=lambda argv, environ_update: calls.append((argv, environ_update))
                                 or (0, "x\n", ""))
    host = module._Host(fake)
    assert host.run(["modinfo", "-k", "6.8.0", "-n", "nvidia"]) == (0, "x")
    assert host.run(["dpkg-query", "-W"]) == (127, "")
    # the C locale of every module's commands (module_utils/gpudirect_host.py), LC_ALL=C among it
    assert calls == [(["modinfo", "-k", "6.8.0", "-n", "nvidia"], {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"})]


def test_module_documents_every_returned_key():
    import yaml
    documented = set(yaml.safe_load(module.RETURN))
    out = plan.decide(found(), options())
    assert set(out) - {"changed"} <= documented and "probe" in documented
    assert re.search(r"supports_check_mode=True", open(module.__file__, encoding="utf-8").read())


def test_jetson_driver_is_read_and_refused_not_misread():
    """/proc of an L4T (Jetson) driver, version 35.3.1 with no branch (versions.yml, nixGL issue 139)."""
    import yaml
    with open(os.path.join(PROJECT_FIXTURES, "vendor_strings", "versions.yml"), encoding="utf-8") as handle:
        entry = [e for e in yaml.safe_load(handle)["proc_driver_nvidia_version"] if e["version"] == "35.3.1"][0]
    found_ = plan.probe(sim.gpu_node(proc=entry["text"], sys_version="35.3.1").plan_host(), "580")
    assert (found_["module"]["version"], found_["module"]["flavor"]) == ("35.3.1", "open")
    out = plan.driver_action(found_, "580", "", "open")
    assert out["action"] == "refuse" and "branch unknown (35.3.1) installed, 580 wanted" in out["message"]
