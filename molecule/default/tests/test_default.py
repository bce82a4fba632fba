"""Container tier: what site.yml leaves on a systemd node, checked from outside the play.

The node's commands and files are read through `podman exec` (testinfra's podman backend):
through Ansible each one was an `ansible` process of 2-4 s. The facts module, which only
Ansible can run, goes through the scenario's inventory as before.
"""

import json
import os

import testinfra
import testinfra.utils.ansible_runner

testinfra_hosts = ["podman://" + name for name in testinfra.utils.ansible_runner.AnsibleRunner(
    os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("gpu_nodes")]

_RESULTS = {}


def _run_facts(host):
    """Run the facts module once per host, through Ansible: each ansible call costs seconds."""
    key = host.backend.get_hostname()
    if key not in _RESULTS:
        # the inventory directory, with the scenario's group_vars and host_vars, as Molecule gives it
        inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
        node = testinfra.get_host("ansible://" + key, ansible_inventory=inventory)
        _RESULTS[key] = node.ansible("gpudirect_facts", "kernel_log=false", check=False, become=True)
    return _RESULTS[key]


def _facts(host):
    return _run_facts(host)["ansible_facts"]["gpudirect"]


def test_facts_module_reports_the_node_as_sysfs_shows_it(host):
    facts = _facts(host)
    assert facts["kernel"]["running"] == host.check_output("uname -r")
    vendors = host.check_output("cat /sys/bus/pci/devices/*/vendor || true").split()
    assert len(facts["gpus"]) == sum(1 for v in vendors if v == "0x10de")
    assert facts["rdma_devices"] == [] or host.file("/sys/class/infiniband").is_directory
    assert facts["pairs"] == []
    soft_kib = host.check_output("sh -c 'ulimit -l'")
    if soft_kib == "unlimited":
        assert facts["memlock"]["soft"] == "unlimited"
    else:
        assert facts["memlock"]["soft_bytes"] == int(soft_kib) * 1024


def test_facts_module_is_read_only(host):
    result = _run_facts(host)
    assert result["changed"] is False
    json.dumps(result)


def test_systemd_is_healthy_after_converge(host):
    state = host.run("systemctl is-system-running")
    assert state.stdout.strip() in ("running", "degraded")
    assert host.run("systemctl --failed --no-legend --plain").stdout.strip() == ""


def _plx_bridges(host):
    # from sysfs, which the container shares with its host (pciutils may not be installed)
    return host.check_output(
        "for d in /sys/bus/pci/devices/*; do [ \"$(cat $d/vendor)\" = 0x10b5 ] && "
        "case $(cat $d/class) in 0x0604*) echo ${d##*/};; esac; done; true").split()


def test_acs_boot_unit_only_where_a_bridge_needs_it(host):
    """gpudirect_pcie_acs installs its boot-time applier (and pciutils for it) only where a selected
    bridge has ACS to clear; a node without one (this container's host, the GPU node) gets
    none, and the role says so."""
    unit = host.service("gpudirect-pcie-acs.service")
    if not _plx_bridges(host):
        assert not host.file("/etc/systemd/system/gpudirect-pcie-acs.service").exists
        assert not host.file("/etc/gpudirect/pcie-acs.conf").exists
        assert not host.file("/usr/local/sbin/gpudirect-pcie-acs").exists
        return
    assert unit.is_enabled
    result = host.run("systemctl show -p Result -p ExecMainStatus --value gpudirect-pcie-acs.service")
    assert result.stdout.split() == ["success", "0"]
    assert host.file("/usr/local/sbin/gpudirect-pcie-acs").mode & 0o111
    ordering = host.check_output("systemctl show -p Before --value gpudirect-pcie-acs.service")
    assert "nvidia-persistenced.service" in ordering.split()
    conf = host.file("/etc/gpudirect/pcie-acs.conf").content_string
    listed = [line.split()[0] for line in conf.splitlines() if line and not line.startswith(("#", "force="))]
    assert set(listed) <= set(_plx_bridges(host))
    assert "force=no" in conf.splitlines()


def test_nic_config_left_the_profile_values_on_the_fake_card(host):
    """prepare.yml installed the stand-in repository's mstflint (its postinst enables the boot unit
    that loads Next Boot as Current) and added a fake ConnectX-7; converge's gpudirect_nic_config set the
    gpudirect profile for the card's next boot (nic_config_reset.yml checks the reset itself)."""
    if host.system_info.type == "linux" and host.exists("dpkg"):
        assert host.package("mstflint").is_installed
    assert host.file("/usr/bin/mstconfig").is_file
    assert host.run("systemctl is-enabled standin-mlxconfig-boot.service").stdout.strip() == "enabled"
    params = json.loads(host.file("/var/lib/standin-mlxconfig/0000:17:00.0.json").content_string)["params"]
    assert params["ADVANCED_PCI_SETTINGS"]["next_boot"] == 1
    assert params["PCI_WR_ORDERING"]["next_boot"] == 1
    assert params["ATS_ENABLED"]["next_boot"] == 0
    out = host.run("mstconfig -d 0000:17:00.0 -e query ADVANCED_PCI_SETTINGS")
    assert out.rc == 0 and "ADVANCED_PCI_SETTINGS" in out.stdout
