"""Verify gpudirect_os_release_pin (absent state, against prepare's baseline and the
snapshot taken while pinned) and gpudirect_host_prereqs (still applied) on the live node."""

import json
import os
import re
import time

import testinfra.utils.ansible_runner

# the scenario's nodes, read through `podman exec` (testinfra's podman backend): through
# Ansible each command and file test was an `ansible` process of 2-4 s
testinfra_hosts = ["podman://" + name for name in testinfra.utils.ansible_runner.AnsibleRunner(
    os.environ["MOLECULE_INVENTORY_FILE"]
).get_hosts("gpu_nodes")]

SNAP = "/var/tmp/molecule-present"
BLACKLIST = "/etc/apt/apt.conf.d/51gpudirect-kernel-pin"
RECORD = "/etc/ansible/facts.d/os_release_pin.fact"
LIMITS = "/etc/security/limits.d/90-gpudirect-memlock.conf"
DROPINS = [
    "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf",
    "/etc/systemd/user.conf.d/90-gpudirect-memlock.conf",
]
GRUB_DROPIN = "/etc/default/grub.d/90-gpudirect-iommu.cfg"


def _selections(text):
    return dict(line.split() for line in text.splitlines() if line.strip())


def _held(text):
    return sorted(name for name, sel in _selections(text).items() if sel == "hold")


# --- present state, from the snapshot taken before absent.yml ---------------


def test_present_held_the_installed_kernel_packages(host):
    held = _held(host.file(f"{SNAP}/selections").content_string)
    assert "linux-image-cloud-amd64" in held
    assert [p for p in held if re.fullmatch(r"linux-image-\d.*-cloud-amd64", p)]
    assert all(p.startswith("linux-image-") for p in held), held
    assert "linux-base" not in held


def test_present_blacklist_is_read_by_apt(host):
    content = host.file(f"{SNAP}/blacklist").content_string
    assert "Unattended-Upgrade::Package-Blacklist {" in content
    dump = host.file(f"{SNAP}/apt-config").content_string
    for prefix in ("linux-", "nvidia-", "mlnx-", "doca-"):
        assert f'"{prefix}";' in content
        assert f'"{prefix}";' in dump


def test_present_record_lists_kernel_packages_and_holds(host):
    record = json.loads(host.file(f"{SNAP}/record.json").content_string)
    held = _held(host.file(f"{SNAP}/selections").content_string)
    assert record["managed_by"] == "os_release_pin"
    assert sorted(record["held_by_role"]) == held
    names = sorted(entry.split("=", 1)[0] for entry in record["kernel_packages"])
    assert names == held


# --- absent state: back to prepare's baseline --------------------------------


def test_absent_restores_the_baseline_selections(host):
    baseline = host.file("/var/tmp/molecule-baseline/selections").content_string
    now = host.check_output("dpkg --get-selections")
    assert _selections(now) == _selections(baseline)
    assert _held(now) == []


def test_absent_removes_the_files(host):
    assert not host.file(BLACKLIST).exists
    assert not host.file(RECORD).exists
    dump = host.run("apt-config dump Unattended-Upgrade::Package-Blacklist").stdout
    assert '"nvidia-"' not in dump


def test_kernel_packages_are_still_installed(host):
    # absent releases the pins; it never removes packages.
    assert host.package("linux-image-cloud-amd64").is_installed


# --- gpudirect_host_prereqs, still applied ---------------------------------------------


def test_limits_file(host):
    f = host.file(LIMITS)
    assert f.is_file and f.user == "root" and f.mode == 0o644
    rules = [line.split() for line in f.content_string.splitlines() if line and not line.startswith("#")]
    assert rules == [["*", "soft", "memlock", "unlimited"], ["*", "hard", "memlock", "unlimited"]]


def test_systemd_dropins(host):
    for path in DROPINS:
        f = host.file(path)
        assert f.is_file and f.mode == 0o644
        lines = [line for line in f.content_string.splitlines() if line and not line.startswith("#")]
        assert lines == ["[Manager]", "DefaultLimitMEMLOCK=infinity"]


def test_systemd_manager_was_reexecuted(host):
    # The handler re-executed PID 1, so the manager itself reports the new default.
    out = host.check_output("systemctl show --property DefaultLimitMEMLOCK")
    assert out.strip() == "DefaultLimitMEMLOCK=infinity"


def test_grub_dropin(host):
    f = host.file(GRUB_DROPIN)
    assert f.is_file
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt"' in f.content_string


def test_grub_config_rebuilt_with_the_arguments(host):
    # prepare.yml's stand-in update-grub ran through the role's handler
    assert "iommu=pt" in host.file("/boot/grub/grub.cfg").content_string.split()


def _has_cap_sys_resource(host):
    capbnd = host.check_output("awk '/^CapBnd/ {print $2}' /proc/self/status")
    return bool(int(capbnd, 16) & (1 << 24))


def test_new_login_session_gets_unlimited_memlock(host):
    """A new PAM session (runuser, as ssh or su would) asks for unlimited memlock.

    Where the node may raise its hard limit (VM, bare metal, a container with
    CAP_SYS_RESOURCE) the session must print "unlimited". An unprivileged
    container cannot raise it; pam_limits then logs exactly what it tried, which
    proves that it read our file for this user.
    """
    # `exec` keeps the shell's PID, so the journal lines of this very session
    # are those of that PID.
    out = host.check_output("sh -c 'echo $$; exec runuser -u nobody -- sh -c \"ulimit -l\"'")
    pid, limit = out.split()
    if _has_cap_sys_resource(host):
        assert limit == "unlimited"
        return
    pattern = "pam_limits(runuser:session): Could not set limit for 'memlock' to soft=-1, hard=-1"
    log = ""
    for _ in range(10):
        log = host.run(f"journalctl -q --no-pager _PID={pid}").stdout
        if pattern in log:
            break
        time.sleep(1)
    assert pattern in log, f"runuser printed {limit}; journal of PID {pid}: {log!r}"
