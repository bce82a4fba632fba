"""The kernel update plans first and pins its target (issue #29, outcome 2).

A read-only pass (library/gpudirect_plan_kernel_update.py) reads every node's kernel packages;
the campaign's one target is decided once per run (module_utils/gpudirect_kernel_update.py)
and only the nodes not at it are locked, drained and updated. Parsers on real
apt-cache outputs (tests/fixtures/kernel_update/README.md); the playbook on this
machine's own apt (Debian 12).
"""
import json
import os
import subprocess

import pytest

from conftest import kernel_update_on_localhost, read_fixture

from ansible.module_utils import gpudirect_kernel_update as ku  # noqa: E402
from ansible.module_utils import gpudirect_rolling as rolling  # noqa: E402

import gpudirect_plan_kernel_update as gpudirect_kernel_update_plan  # noqa: E402  (library/, on sys.path through conftest)

META = ["linux-image-amd64", "linux-headers-amd64"]


# --- parsers on real outputs

def test_apt_policy_of_packages_not_installed():
    found = ku.parse_apt_policy(read_fixture("kernel_update", "apt-cache-policy-bookworm-not-installed.txt"))
    assert sorted(found) == sorted(META)
    image = found["linux-image-amd64"]
    assert image["installed"] is None
    assert image["candidate"] == "6.1.192-2"
    # newest first, as apt orders its table: bookworm-security above bookworm
    assert image["versions"] == ["6.1.192-2", "6.1.176-1"]


def test_apt_policy_of_installed_packages_older_than_and_equal_to_the_candidate():
    found = ku.parse_apt_policy(read_fixture("kernel_update", "apt-cache-policy-bookworm-installed.txt"))
    assert found["bash"] == {"installed": "5.2.15-2+b8", "candidate": "5.2.15-2+b13",
                             "versions": ["5.2.15-2+b13", "5.2.15-2+b8"]}
    # one version under two origins (the mirror and /var/lib/dpkg/status) is listed once
    assert found["libc6"]["installed"] == found["libc6"]["candidate"] == "2.36-9+deb12u14"
    assert found["libc6"]["versions"] == ["2.36-9+deb12u14", "2.36-9+deb12u7"]


@pytest.mark.parametrize("text, match", [
    # a German locale: LC_ALL=C was not applied
    ("linux-image-amd64:\n  Installiert: (keine)\n  Installationskandidat: 6.1.192-2\n", "not what apt prints"),
    ("  Installed: 6.1.176-1\n", "not under a package name"),
    ("linux-image-amd64:\n  Installed: 6.1.176-1\n  Candidate: 6.1.176-1\n  Version table:\n", "not in its version table"),
    ("linux-image-amd64:\n  Installed: (none)\n  Candidate: 6.1.192-2\n  Version table:\n  garbage here\n",
     "not what apt prints"),
])
def test_apt_policy_that_apt_did_not_print_is_refused(text, match):
    with pytest.raises(ValueError, match=match):
        ku.parse_apt_policy(text)


def test_rpm_versions_keep_every_installed_kernel_and_name_a_missing_package():
    text = ("kernel 0:5.14.0-427.13.1.el9_4\nkernel 0:5.14.0-503.11.1.el9_5\n"
            "package kernel-devel is not installed\nkernel-core 1:5.14.0-503.11.1.el9_5\n\n")
    assert ku.parse_rpm_versions(text) == {"kernel": ["5.14.0-427.13.1.el9_4", "5.14.0-503.11.1.el9_5"],
                                           "kernel-devel": [], "kernel-core": ["1:5.14.0-503.11.1.el9_5"]}
    with pytest.raises(ValueError, match="line 1 is not 'NAME EPOCH:VERSION-RELEASE'"):
        ku.parse_rpm_versions("kernel-5.14.0-427.13.1.el9_4.x86_64\n")


# --- the campaign's decision

def node(installed, candidate, versions=None, running="6.1.0-40-amd64", default=None, hold=None, record=None):
    versions = versions or sorted({v for v in (installed, candidate) if v}, reverse=True)
    return {"packages": dict((name, {"installed": installed, "candidate": candidate, "versions": list(versions),
                                     "ordered": True}) for name in META),
            "running": running, "default": default or running, "hold": hold, "record": record}


def test_one_target_from_the_candidates_and_only_the_nodes_behind_it_are_pending():
    nodes = {"n1": node("6.1.176-1", "6.1.192-2"), "n2": node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64"),
             "n3": node(None, "6.1.192-2", ["6.1.192-2", "6.1.176-1"])}
    out = ku.campaign(nodes, "", META)
    assert out["errors"] == []
    assert out["target"] == {"linux-image-amd64": "6.1.192-2", "linux-headers-amd64": "6.1.192-2"}
    assert "resolved once at the start of this run" in out["source"]
    assert sorted(out["pending"]) == ["n1", "n3"] and sorted(out["done"]) == ["n2"]
    assert "linux-image-amd64 6.1.176-1 installed" in out["pending"]["n1"]
    assert "linux-image-amd64 not installed" in out["pending"]["n3"]
    assert ku.install_names(META, out["target"], "apt") == ["linux-image-amd64=6.1.192-2", "linux-headers-amd64=6.1.192-2"]
    assert ku.install_names(["kernel"], {"kernel": "5.14.0-503.11.1.el9_5"}, "dnf") == ["kernel-5.14.0-503.11.1.el9_5"]


def test_nodes_whose_repositories_disagree_are_refused_naming_the_knob():
    nodes = {"n1": node("6.1.176-1", "6.1.192-2"), "n2": node("6.1.176-1", "6.1.176-1")}
    out = ku.campaign(nodes, "", META)
    assert len(out["errors"]) == 1
    assert "offer different kernels" in out["errors"][0] and "on n1" in out["errors"][0] and "on n2" in out["errors"][0]
    assert "gpudirect_kernel_update_target" in out["errors"][0]
    assert out["pending"] == {} and out["done"] == {}


def test_the_knob_pins_the_target_and_a_node_that_does_not_offer_it_is_refused():
    nodes = {"n1": node("6.1.176-1", "6.1.192-2"), "n2": node("6.1.176-1", "6.1.176-1")}
    out = ku.campaign(nodes, "6.1.192-2", META)
    assert "(the gpudirect_kernel_update_target knob)" in out["source"]
    assert any("n2: no repository of the node offers linux-image-amd64 6.1.192-2 (it offers 6.1.176-1)" in e
               for e in out["errors"])
    # pinned to the older one that both offer: no node is refused, both are pending or done
    out = ku.campaign({"n1": node("6.1.176-1", "6.1.192-2"), "n2": node("6.1.176-1", "6.1.176-1")}, "6.1.176-1", META)
    assert out["errors"] == [] and sorted(out["done"]) == ["n1", "n2"]


def test_a_target_older_than_what_a_node_has_is_refused_it_never_downgrades():
    out = ku.campaign({"n1": node("6.1.192-2", "6.1.192-2", ["6.1.192-2", "6.1.176-1"])}, "6.1.176-1", META)
    assert any("newer than the campaign's 6.1.176-1" in e and "does not downgrade" in e for e in out["errors"])


def test_packages_at_the_target_with_an_unfinished_chain_are_pending():
    rebooting = node("6.1.192-2", "6.1.192-2", running="6.1.0-40-amd64", default="6.1.0-41-amd64")
    held = node("6.1.192-2", "6.1.192-2", hold={"kernel": "6.1.0-40-amd64", "instead_of": "6.1.0-41-amd64"})
    out = ku.campaign({"r": rebooting, "h": held}, "", META)
    assert sorted(out["pending"]) == ["h", "r"]
    assert "boots 6.1.0-41-amd64 next" in out["pending"]["r"]
    assert "held its default boot kernel" in out["pending"]["h"]


def test_a_node_whose_trial_failed_is_pending_naming_the_pinned_proven_kernel():
    """Boot once (issue #43, outcome 4): the node still runs the kernel it tried (6.1.0-41), its
    verification failed, and the pin keeps 6.1.0-40 the default: the reason names the pinned kernel."""
    tried = node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64", default="6.1.0-40-amd64",
                 hold={"kernel": "6.1.0-40-amd64", "boot_once": True, "trial": "6.1.0-41-amd64"})
    out = ku.campaign({"t": tried}, "", META)
    assert "held its default boot kernel on 6.1.0-40-amd64" in out["pending"]["t"]


def test_a_node_that_rebooted_into_the_target_is_done_only_once_verified_on_it():
    """Issue #43, outcome 7: an earlier run installed the target and rebooted the node, then stopped
    before its verification (the campaign's record says verified: null): still pending."""
    target = {"linux-image-amd64": "6.1.192-2", "linux-headers-amd64": "6.1.192-2"}
    stopped = node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64", default="6.1.0-41-amd64",
                   record={"target": target, "verified": None})
    proven = node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64", default="6.1.0-41-amd64",
                  record={"target": target, "verified": "6.1.0-41-amd64"})
    # verified on the kernel it ran before the update: not on this one
    older = node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64", default="6.1.0-41-amd64",
                 record={"target": target, "verified": "6.1.0-40-amd64"})
    # a record written before the toolkit recorded verifications counts as verified
    legacy = node("6.1.192-2", "6.1.192-2", running="6.1.0-41-amd64", default="6.1.0-41-amd64",
                  record={"target": target})
    out = ku.campaign({"s": stopped, "p": proven, "o": older, "l": legacy}, "", META)
    assert sorted(out["pending"]) == ["o", "s"] and sorted(out["done"]) == ["l", "p"]
    assert "was not verified on it" in out["pending"]["s"] and "resumed only when it passes" in out["pending"]["s"]
    assert out["done"]["p"].endswith("verified on it") and not out["done"]["l"].endswith("verified on it")


def test_a_campaign_an_earlier_run_recorded_is_finished_before_a_newer_kernel():
    # days later: the mirror now offers 6.1.199-1; n1 got the campaign's 6.1.192-2 and recorded it
    target = {"linux-image-amd64": "6.1.192-2", "linux-headers-amd64": "6.1.192-2"}
    newest = ["6.1.199-1", "6.1.192-2", "6.1.176-1"]
    nodes = {"n1": node("6.1.192-2", "6.1.199-1", newest, record={"target": target}),
             "n2": node("6.1.176-1", "6.1.199-1", newest)}
    out = ku.campaign(nodes, "", META)
    assert out["target"] == target and "recorded by an earlier run of this campaign on n1" in out["source"]
    assert sorted(out["pending"]) == ["n2"] and sorted(out["done"]) == ["n1"]
    # once every node is at it, the next campaign takes the newest
    nodes["n2"] = node("6.1.192-2", "6.1.199-1", newest, record={"target": target})
    assert ku.campaign(nodes, "", META)["target"]["linux-image-amd64"] == "6.1.199-1"
    # two unfinished campaigns: refused, naming the knob
    other = {"linux-image-amd64": "6.1.176-1", "linux-headers-amd64": "6.1.176-1"}
    nodes["n3"] = node("6.1.176-1", "6.1.199-1", newest, record={"target": other}, running="6.1.0-1-amd64",
                       default="6.1.0-2-amd64")
    out = ku.campaign(nodes, "", META)
    assert out["errors"] and "2 different kernel update campaigns" in out["errors"][0]


@pytest.mark.parametrize("value, match", [
    ("6.1.192-2 extra", "must be a package version"),
    ("linux-image-amd64=6.1.192-2", "must be a package version"),
    ({"linux-image-amd64": "6.1.192-2"}, "give a version for each of them"),
    (["6.1.192-2"], "not list"),
])
def test_a_bad_target_is_refused_naming_the_knob(value, match):
    with pytest.raises(ValueError, match=match) as err:
        ku.normalise_target(value, META)
    assert "gpudirect_kernel_update_target" in str(err.value)


def test_a_package_no_repository_has_is_named():
    out = ku.campaign({"n1": node(None, None, [])}, "", META)
    assert any("no repository of the node offers linux-image-amd64" in e and "gpudirect_kernel_update_packages" in e
               for e in out["errors"])


@pytest.mark.parametrize("value", [0, "0", "0%", "101%", -1, True, [], [1, 0]])
def test_kernel_update_serial_is_checked_by_site_yml_s_rules_under_its_own_name(value):
    with pytest.raises(ValueError, match="gpudirect_kernel_update_serial="):
        rolling.play_setting(["n1"], {"n1": {}}, "gpudirect_rolling_batch", value, "gpudirect_kernel_update_serial")


def test_kernel_update_max_fail_percentage_is_checked_under_its_own_name():
    with pytest.raises(ValueError, match="gpudirect_kernel_update_max_fail_percentage=101"):
        rolling.play_setting(["n1"], {"n1": {}}, "gpudirect_rolling_max_fail_percentage", 101,
                             "gpudirect_kernel_update_max_fail_percentage")
    assert rolling.play_setting(["n1"], {"n1": {}}, "gpudirect_rolling_batch", [1, "5", "10%"],
                                "gpudirect_kernel_update_serial") == [1, 5, "10%"]


# --- the module on this machine's own apt

needs_apt = pytest.mark.skipif(not os.path.exists("/usr/bin/apt-cache"), reason="needs apt-cache (a Debian machine)")


@pytest.fixture
def kernel_tree(tmp_path):
    """A root with a running kernel and no boot loader: the default boot kernel is unknown."""
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-40-amd64\n")
    return tmp_path


@needs_apt
def test_module_reads_this_machines_packages_in_check_mode_without_refreshing(run_module, kernel_tree):
    out = run_module(gpudirect_kernel_update_plan, {"packages": ["libc6", "no-such-package-gpudirect"], "root": str(kernel_tree)},
                     check_mode=True)
    assert out["changed"] is False and out["refreshed"] is False and out["method"] == "apt"
    assert out["packages"]["libc6"]["installed"] and out["packages"]["libc6"]["ordered"] is True
    assert out["packages"]["no-such-package-gpudirect"] == {"installed": None, "candidate": None, "versions": [],
                                                            "ordered": True}
    assert out["running"] == "6.1.0-40-amd64" and out["hold"] is None and out["record"] is None


@needs_apt
def test_module_judges_this_node_against_a_target(run_module, kernel_tree):
    libc = ku.parse_apt_policy(subprocess.run(["apt-cache", "policy", "libc6"], stdout=subprocess.PIPE,
                                              universal_newlines=True, env=dict(os.environ, LC_ALL="C")).stdout)["libc6"]
    (kernel_tree / "var" / "lib" / "gpudirect").mkdir(parents=True)
    (kernel_tree / "var" / "lib" / "gpudirect" / "boot-hold.json").write_text(
        json.dumps({"kernel": "6.1.0-40-amd64", "instead_of": "6.1.0-41-amd64"}))
    out = run_module(gpudirect_kernel_update_plan, {"packages": ["libc6"], "refresh": False, "root": str(kernel_tree),
                                          "target": libc["installed"]})
    assert out["pending"] is True and "held its default boot kernel" in out["reason"]


# --- the playbook: plan, refusal and batches on this machine as two local nodes
# (conftest.kernel_update_on_localhost)

@needs_apt
def test_nodes_already_at_the_target_are_neither_locked_nor_drained(tmp_path):
    """libc6 stands for the kernel package: installed at its candidate on this machine, so
    both nodes are at the target; no node has drain hooks, and none is needed."""
    p = kernel_update_on_localhost(tmp_path, {}, "-e", '{"gpudirect_kernel_update_packages": ["libc6"]}')
    assert p.returncode == 0, p.stdout
    assert "gpu-a: nothing to do, not locked or drained" in p.stdout
    assert "gpu-b: nothing to do, not locked or drained" in p.stdout
    assert "Refusing" not in p.stdout and "run lock" not in p.stdout
    # kernel_update_pending was never made: its plays skip without Ansible's pattern warning
    assert "Could not match supplied host pattern" not in p.stdout
    assert p.stdout.count("skipping: no hosts matched") == 3


@needs_apt
def test_a_bad_batch_knob_stops_the_run_before_the_plan(tmp_path):
    p = kernel_update_on_localhost(tmp_path, {}, "-e", "gpudirect_kernel_update_serial=0")
    assert p.returncode != 0
    assert "gpudirect_kernel_update_serial=0 must be 1 or more nodes" in p.stdout
    assert "Read the node's kernel packages" not in p.stdout


@needs_apt
def test_a_target_no_node_offers_is_refused_before_anything_changes(tmp_path):
    p = kernel_update_on_localhost(tmp_path, {}, "-e", "gpudirect_kernel_update_target=0.0.1-gpudirect")
    assert p.returncode != 0
    assert "Refusing to start the kernel update" in p.stdout
    assert "gpu-a: no repository of the node offers linux-image-amd64 0.0.1-gpudirect" in p.stdout
    assert "Nothing was locked, drained or changed on any node" in p.stdout
    assert "PLAY [Rolling kernel update]" not in p.stdout
