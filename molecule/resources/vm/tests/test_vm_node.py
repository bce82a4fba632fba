"""VM tier checks: a real kernel with soft-RoCE and a PCIe root port with ACS.

Run by molecule's testinfra verifier in the one-node VM scenarios: in `rdma`
after converge (which repaired a wrong-order install and switched OFED versions)
and a power cycle; in `gpudirect_kernel_update` after the kernel update
(kernel_update.yml) and the site.yml run that follows it. Each command is one
ssh round trip; under TCG those cost about a second, so the checks bundle their
shell.
"""
import json
import os
import re
import subprocess
import sys

import pytest

RXE = "rxe0"
# the ansible CLI of the venv that runs the verifier, for checks driven from the controller
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


@pytest.fixture(scope="module")
def rxe_netdev(host):
    out = host.check_output("rdma link show")
    m = re.search(rf"^link {RXE}/\d+ .*\bnetdev (\S+)", out, re.M)
    assert m, f"{RXE} missing from `rdma link show`:\n{out}"
    return m.group(1)


@pytest.fixture(scope="module")
def root_port(host, rxe_netdev):
    # climb sysfs from the netdev to its PCI function, then to the bridge above it
    bdf = host.check_output(
        "d=$(readlink -f /sys/class/net/%s/device); "
        'while [ "$d" != / ] && [ ! -e "$d/config" ]; do d=$(dirname "$d"); done; '
        'basename "$(dirname "$d")"',
        rxe_netdev,
    )
    assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bdf), bdf
    return bdf


def test_rdma_rxe_module_loaded_for_running_kernel(host):
    release = host.check_output("uname -r")
    assert host.file("/sys/module/rdma_rxe").is_directory, "rdma_rxe not loaded"
    path = host.check_output("modinfo -k %s -n rdma_rxe", release)
    assert path.startswith(f"/lib/modules/{release}/") or path.startswith(f"/usr/lib/modules/{release}/"), path


def test_rxe0_exists_and_ports_active(host, rxe_netdev):
    out = host.check_output("rdma link show; ibv_devinfo -d %s", RXE)
    links = re.findall(rf"^link {RXE}/(\d+) state (\S+)", out, re.M)
    assert links, out
    assert all(state == "ACTIVE" for _, state in links), out
    ports = re.findall(r"state:\s+(PORT_\w+)", out)
    assert ports and all(p == "PORT_ACTIVE" for p in ports), out
    assert host.interface(rxe_netdev).exists


def test_acs_capability_readable_on_root_port(host, root_port):
    out = host.check_output("lspci -vvv -s %s", root_port)
    assert "Access Control Services" in out, out
    assert re.search(r"ACSCap:.*SrcValid", out), out
    assert re.search(r"ACSCtl:\s+SrcValid[+-]", out), out
    ctl = host.check_output("setpci -s %s ECAP_ACS+0x6.w", root_port)
    assert re.fullmatch(r"[0-9a-f]{4}", ctl), ctl


def test_ib_write_bw_loopback_moves_data(host, rxe_netdev):
    ip = host.check_output("ip -4 -o addr show dev %s | awk '{print $4}' | cut -d/ -f1 | head -n1", rxe_netdev)
    assert ip, f"no IPv4 address on {rxe_netdev}"
    # RoCE v2 GID of that IPv4 address (::ffff:a.b.c.d), from sysfs
    gid_index = host.check_output(
        "for f in /sys/class/infiniband/%s/ports/1/gids/*; do "
        "i=${f##*/}; g=$(cat $f); t=$(cat /sys/class/infiniband/%s/ports/1/gid_attrs/types/$i 2>/dev/null); "
        'case "$g" in 0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { echo $i; break; };; esac; done',
        RXE, RXE,
    )
    assert gid_index.isdigit(), f"no RoCE v2 IPv4 GID on {RXE}"
    common = f"ib_write_bw -d {RXE} -x {gid_index} -s 65536 -n 200 -F --report_gbits"
    cmd = (
        f"timeout 120 {common} >/tmp/ib_write_bw.server.log 2>&1 & srv=$!; sleep 2; "
        f"timeout 120 {common} {ip}; rc=$?; wait $srv; src=$?; "
        'echo "client_rc=$rc server_rc=$src"; exit $rc'
    )
    res = host.run(cmd)
    server_log = host.run("cat /tmp/ib_write_bw.server.log").stdout
    assert res.rc == 0, f"client:\n{res.stdout}\n{res.stderr}\nserver:\n{server_log}"
    assert "server_rc=0" in res.stdout, f"{res.stdout}\nserver:\n{server_log}"
    # " 65536      200      0.52      0.51      0.000980" : #bytes #iterations BW peak BW average MsgRate
    m = re.search(r"^\s*65536\s+200\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", res.stdout, re.M)
    assert m, res.stdout
    bw_average = float(m.group(2))
    print(f"ib_write_bw rxe0 loopback to {ip}: BW average {bw_average} Gb/s")
    assert bw_average > 0, res.stdout


# PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC: what pci=disable_acs_redir= clears (drivers/pci/pci.c)
ACS_REDIRECT_BITS = 0x002C


def test_acs_cleared_on_included_root_port(host, root_port):
    """gpudirect_pcie_acs (via site.yml) clears ACS on the bridges it is told to; the
    testbed's "firmware" sets it again at every boot, so after a reboot or
    power cycle this also proves the role's boot-time unit.

    Under kernel lockdown (the secureboot scenario) user space cannot write ACS: the role
    takes the kernel_args route and the kernel clears it at boot from its command line.
    With pci=config_acs= (Linux 6.11+) every bit is off; with pci=disable_acs_redir= (the
    VM's Debian 12 6.1 kernel) ReqRedir, CmpltRedir and EgressCtrl are, the only bits that
    parameter clears (test_secure_boot_node.py checks the whole register there)."""
    hv = host.ansible.get_variables()
    include = ["0000:" + b if b.count(":") == 1 else b for b in hv.get("gpudirect_pcie_acs_include", [])]
    if hv.get("gpudirect_pcie_acs_state", "disabled") != "disabled" or root_port not in include:
        pytest.skip(f"{root_port} is not in gpudirect_pcie_acs_include with gpudirect_pcie_acs_state disabled")
    out = host.check_output("setpci -s %s ECAP_ACS+0x6.w; cat /proc/cmdline; cat /sys/kernel/security/lockdown "
                            "2>/dev/null || true", root_port)
    ctl, cmdline, lockdown = (out.splitlines() + ["", ""])[:3]
    if not re.search(r"\[(integrity|confidentiality)\]", lockdown):
        assert ctl == "0000", f"ACS Control on {root_port} is {ctl}, expected cleared"
    elif "pci=config_acs=" in cmdline:
        assert ctl == "0000", f"ACS Control on {root_port} is {ctl} under lockdown ({lockdown}) with {cmdline}"
    else:
        assert f"pci=disable_acs_redir={root_port}" in cmdline.split(), f"lockdown {lockdown}, cmdline {cmdline}"
        assert int(ctl, 16) & ACS_REDIRECT_BITS == 0, \
            f"ACS Control on {root_port} is {ctl}: redirect bits still on under lockdown ({lockdown}), {cmdline}"


def test_acs_boot_applier_refuses_an_address_whose_ids_differ(host, root_port):
    """The boot applier addresses bridges by domain:bus:device.function and checks the ids
    found there before writing: a list whose ids do not match (what a bus renumbering
    leaves) writes nothing, logs at priority err and exits 1. Run on the real kernel with
    the real setpci; the script is run directly (as the verifier user, root), with a scratch list."""
    script = "/usr/local/sbin/gpudirect-pcie-acs"
    if not host.file(script).exists:
        pytest.skip("the boot applier is not installed (gpudirect_pcie_acs_persist off?)")
    res = host.run(
        "set -u; before=$(setpci -s %s ECAP_ACS+0x6.w); conf=$(mktemp); "
        "printf '%%s ffff:0001\\n' %s > \"$conf\"; %s \"$conf\"; rc=$?; rm -f \"$conf\"; "
        "echo \"rc=$rc before=$before after=$(setpci -s %s ECAP_ACS+0x6.w)\"",
        root_port, root_port, script, root_port)
    out = res.stdout
    assert "<3>gpudirect-pcie-acs: %s: expected the bridge ffff:0001, found " % root_port in out, out
    assert "nothing was written" in out, out
    status = re.search(r"rc=(\d+) before=(\w+) after=(\w+)", out)
    assert status and status.group(1) == "1" and status.group(2) == status.group(3), out


def test_rdma_cm_defaults_follow_the_roce_qos_profile_after_the_power_cycle(host, rxe_netdev):
    """gpudirect_roce_qos with gpudirect_roce_qos_dscp (issue #44 outcome 4): RDMA-CM's defaults of rxe0 port 1
    are RoCE v2 and ToS dscp << 2. configfs forgets them at every boot (they live in the kernel's cma_device), so
    after the power cycle (or the kernel update's reboot) they are there only because gpudirect-roce-qos.service
    wrote them again in this boot, which its journal says. Read as NVIDIA's cma_roce_tos reads them: the
    device's configfs group made for the read and removed again; the role leaves none behind (a group pins the
    rdma_cm module)."""
    hv = host.ansible.get_variables()
    dscp = hv.get("gpudirect_roce_qos_dscp")
    if dscp is None or str(hv.get("gpudirect_roce_qos_rdma_cm", True)).lower() in ("false", "no", "off", "0"):
        pytest.skip("gpudirect_roce_qos_dscp is unset or gpudirect_roce_qos_rdma_cm false in this scenario")
    tos = int(dscp) << 2
    res = host.run(
        "set -u; g=/sys/kernel/config/rdma_cm/%s; made=0; "
        "if [ -d \"$g\" ]; then echo left=yes; else echo left=no; mkdir \"$g\" || exit 1; made=1; fi; "
        "echo \"mode=$(cat \"$g/ports/1/default_roce_mode\")\"; echo \"tos=$(cat \"$g/ports/1/default_roce_tos\")\"; "
        "if [ $made = 1 ]; then rmdir \"$g\"; fi; echo \"unit=$(systemctl is-active gpudirect-roce-qos.service)\"; "
        "grep -E '^%s .*rdma_cm_mode=%s:1:v2 .*rdma_cm_tos=%s:1:%s' /etc/gpudirect/roce-qos.conf | sed 's/^/conf=/'; "
        "journalctl -b -u gpudirect-roce-qos.service --no-pager -o cat | sed 's/^/journal=/'",
        RXE, rxe_netdev, RXE, RXE, str(tos))
    out = res.stdout
    assert res.rc == 0, out + res.stderr
    assert "left=no" in out, "a configfs group rdma_cm/%s was left behind (it pins rdma_cm):\n%s" % (RXE, out)
    assert "mode=RoCE v2" in out and ("tos=%d" % tos) in out, out
    assert "unit=active" in out and "conf=%s " % rxe_netdev in out, out
    assert ("journal=gpudirect-roce-qos: %s: rdma_cm_tos=%s:1:%d set" % (rxe_netdev, RXE, tos)) in out, out


# DOCA release -> exactly what its ofed_info -s prints (the stand-in repository prints the
# real strings: 2.9.1 with its build suffix .0.200). The role wants 24.10-1.1.4 for 2.9.1
# and must see this suffixed string as a match (the idempotence step then changes nothing).
DOCA_OFED = {"2.9.1": "OFED-internal-24.10-1.1.4.0.200:", "2.10.0": "OFED-internal-25.01-0.6.0:"}


def test_ofed_stack_installed_at_the_wanted_version_and_held(host):
    """gpudirect_mlnx_ofed switched the hand-installed DOCA 2.9.1 to the inventory's version and holds it."""
    doca = host.ansible.get_variables().get("gpudirect_mlnx_ofed_doca_version", "2.9.1")
    assert host.check_output("ofed_info -s") == DOCA_OFED[doca]
    held = host.check_output("apt-mark showhold").split()
    assert "doca-ofed" in held and "mlnx-ofed-kernel-dkms" in held


def test_doca_repository_is_one_deb822_source_signed_by_the_checked_key(host):
    """gpudirect_mlnx_ofed writes the repository with deb822_repository and removes the one-line list
    that check_in_vm.sh (and earlier releases of the role) wrote: one definition, signed-by."""
    assert not host.file("/etc/apt/sources.list.d/doca.list").exists
    sources = host.file("/etc/apt/sources.list.d/doca.sources").content_string
    assert "Suites: ./" in sources and "Signed-By: /etc/apt/keyrings/mellanox-doca.asc" in sources


def test_nvidia_peermem_loaded_for_the_running_kernel_and_linked_against_ofed(host):
    """Loaded (checked through /sys/module, as the role does) and built against
    OFED's peer-memory symbols, and back after the power cycle before this verify."""
    kernel = host.check_output("uname -r")
    assert host.file("/sys/module/nvidia_peermem").is_directory
    assert host.file("/sys/module/nvidia").is_directory
    depends = host.check_output("modinfo -k %s -F depends nvidia_peermem", kernel).split(",")
    assert "ib_peer_mem" in depends, depends
    status = host.check_output("dkms status -k %s", kernel)
    assert "installed" in status and "nvidia" in status


def test_driver_services_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled
    assert host.service("nvidia-persistenced").is_running


def test_nvidia_module_built_after_ofed_for_every_kernel(host):
    """rdma's prepare.yml installed NVIDIA before OFED (nvidia_peermem failed with EINVAL);
    converge rebuilt it after OFED, and after an OFED switch and a kernel update
    too: for every kernel with both modules, the nvidia build is the newer one."""
    out = host.check_output(
        "for d in /var/lib/dkms/mlnx-ofed-kernel/*/*/x86_64/module; do k=$(echo $d | cut -d/ -f7); "
        "n=$(ls -d /var/lib/dkms/nvidia/*/$k/x86_64/module 2>/dev/null | head -n1); "
        '[ -n "$n" ] && echo "$k $(stat -c %Y $d) $(stat -c %Y $n)"; done; true'
    )
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert rows, "no kernel has both the OFED and the NVIDIA DKMS modules built"
    for kernel, ofed_t, nvidia_t in rows:
        assert int(nvidia_t) >= int(ofed_t), f"{kernel}: nvidia built before mlnx-ofed-kernel"
    assert host.check_output("uname -r") in [r[0] for r in rows]


def test_running_the_kernel_the_update_installed(host):
    """After the kernel-update step the node runs the new ABI (boot loader stand-in:
    tests/harness/vm/vm.py boots the guest's default kernel)."""
    marker = host.file("/var/lib/gpudirect-test-expected-kernel")
    if not marker.exists:
        pytest.skip("no kernel update yet in this sequence (kernel_update.yml writes the marker)")
    assert host.check_output("uname -r") == marker.content_string.strip()
    assert host.file("/sys/module/nvidia_peermem").is_directory


def _molecule_env():
    """(project dir, inventory file, environment for ansible on the controller); skips
    outside `molecule verify`, which sets both variables."""
    project = os.environ.get("MOLECULE_PROJECT_DIRECTORY")
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE")
    if not project or not inventory:
        pytest.skip("runs under molecule verify only (needs MOLECULE_PROJECT_DIRECTORY and MOLECULE_INVENTORY_FILE)")
    return project, inventory, dict(os.environ, ANSIBLE_CONFIG=os.path.join(project, "ansible.cfg"))


def test_verification_report_says_passed_with_every_byte_compared(host):
    """site.yml's last stage (gpudirect_verify) ran the loopback over rxe0 in host
    memory (no GPU here) and wrote <inventory dir>/.reports/<host>.json and .md."""
    _, inventory, _ = _molecule_env()
    reports = os.path.join(os.path.dirname(inventory), ".reports")
    name = host.backend.host
    with open(os.path.join(reports, name + ".json")) as f:
        record = json.load(f)
    assert record["status"] == "passed", record
    assert record["mode"] == "host" and record["rdma_device"] == RXE, record
    assert record["bytes_compared"] == host.ansible.get_variables().get("gpudirect_verify_size", 1048576), record
    assert record["mismatches"] == 0 and record["diagnosis"] is None, record
    assert record["bandwidth_gbps"] > 0, record
    # no GPU here: host memory passes, labelled as such (a GPU node would be not_proven)
    assert record["mode_reason"] == "auto: no GPU", record
    assert record["memory"] == "no GPU: RDMA path proven with host memory", record
    assert [(p["rdma_device"], p["status"]) for p in record["pairs"]] == [(RXE, "passed")], record
    # tasks/crosscheck.yml: ib_write_bw (perftest is in the image) on the same pair, reported as a ratio
    assert isinstance(record["crosscheck"]["perftest"]["pairs"][0]["ratio"], float), record["crosscheck"]
    with open(os.path.join(reports, name + ".md")) as f:
        assert "passed" in f.read()


def test_verification_module_fails_when_one_byte_is_corrupted(host):
    """The comparison can fail: the hidden self-test flips one destination byte after
    the RDMA WRITE over rxe0; the module must fail with data_mismatch at that byte."""
    _, inventory, env = _molecule_env()
    # JSON on stdout alone: the project's profile_tasks callback would print timings around it
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default")
    res = subprocess.run(
        [ANSIBLE, host.backend.host, "-i", inventory, "-b", "-m", "gpudirect_loopback",
         "-a", f"mode=host rdma_device={RXE} size=65536 iterations=10 _corrupt_one_byte=true "
               "source=/var/lib/gpudirect/loopback/src"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    result = list(json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"].values())[0]
    assert res.returncode != 0 and result.get("failed"), result
    assert result["diagnosis"]["code"] == "data_mismatch", result
    assert result["bytes_compared"] == 65536 and result["mismatches"] == 1, result
    assert result["first_mismatch"] == 65536 // 2 + 1, result


def _after_run_table(project, inventory, env, name):
    """The lines playbooks/report.yml (site.yml's after-the-run table) prints for this node now."""
    env = dict(env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default")
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    res = subprocess.run([playbook, "-i", inventory, "-l", name, os.path.join(project, "playbooks", "report.yml")],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    tasks = json.loads(res.stdout)["plays"][0]["tasks"]
    shown = [t["hosts"][name]["msg"] for t in tasks if t["task"]["name"] == "Show the final table"]
    assert shown and isinstance(shown[0], list), res.stdout[-3000:]
    return shown[0]


def test_after_run_table_has_no_finding_about_what_the_run_fixed(host, root_port):
    """Issue 19: after site.yml the final table still said "WARN memlock ... 257548288"
    although gpudirect_host_prereqs had set unlimited: it read the limit of Ansible's own root
    session. The table must judge what jobs get (a new login, a new systemd unit),
    agree with those processes on the node, and carry no finding about what the run
    fixed: memlock, ACS on the included root port, a pending reboot."""
    project, inventory, env = _molecule_env()
    hv = host.ansible.get_variables()
    lines = _after_run_table(project, inventory, env, host.backend.host)
    print("\n".join(lines))
    text = "\n".join(lines)
    findings = [line.split(None, 2) for line in lines[next(i for i, l in enumerate(lines)
                                                           if l.startswith("  findings ")) + 1:]]
    checks = {f[1] for f in findings if len(f) > 1}
    assert "memlock" not in checks, text
    include = ["0000:" + b if b.count(":") == 1 else b for b in hv.get("gpudirect_pcie_acs_include", [])]
    if hv.get("gpudirect_pcie_acs_state", "disabled") == "disabled" and root_port in include:
        assert "acs" not in checks, text
    if hv.get("gpudirect_reboot_allowed", True):
        assert "kernel" not in checks and "REBOOT PENDING" not in text, text
    # what the table says is what those processes get on the node
    login = host.check_output("runuser -u nobody -- sh -c 'ulimit -l'")
    service = host.check_output("systemd-run --quiet --pipe --wait sh -c 'ulimit -l'")
    assert (login, service) == ("unlimited", "unlimited")
    assert "  memlock    new logins: soft unlimited, hard unlimited (" in text, text
    assert "new services: soft unlimited, hard unlimited (systemd DefaultLimitMEMLOCK)" in text, text


# The target (module >= 0.9 x ib_write_bw) is the benchmark's: benchmarks/run.sh
# loopback prints it with its verdict (1.077 on 2026-11-23). Under TCG the median of
# five rounds was 0.906-1.054 across four runs on the same code (single rounds
# 0.68-1.25), so a 0.9 gate here failed CI on noise. This gate catches a real
# regression (an unpipelined or otherwise slower data path) without that flake.
LOOPBACK_RATIO_FLOOR = 0.75


def test_verification_module_bandwidth_close_to_perftest(host):
    """gpudirect_loopback (host memory over rxe0) against ib_write_bw on the same
    device, message size and iterations, in one run (benchmarks/loopback_vs_perftest.sh:
    5 rounds, the two tools back to back in alternating order, median of the rounds'
    ratios). Measured once per scenario run, in the verify after the kernel update
    (a freshly booted node, as a real one is verified after its one reboot)."""
    project, inventory, env = _molecule_env()
    if not host.file("/var/lib/gpudirect-test-expected-kernel").exists:
        pytest.skip("measured in the verify after the kernel update (kernel_update.yml writes its marker)")
    env.update(SIZE="65536", ITERS="1000", RUNS="5", ANSIBLE=ANSIBLE, PYTHON=sys.executable)
    res = subprocess.run([os.path.join(project, "benchmarks", "loopback_vs_perftest.sh"), host.backend.host, "-i", inventory],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900)
    print(res.stdout)
    assert res.returncode == 0, res.stdout
    m = re.search(r"^module_bw=.*module_bw/perftest_bw=([\d.]+)", res.stdout, re.M)
    assert m, res.stdout
    assert float(m.group(1)) >= LOOPBACK_RATIO_FLOOR, res.stdout


def _gdrcopy_installed(host):
    if not host.package("gdrdrv-dkms").is_installed:
        pytest.skip("gdrdrv-dkms not installed on this node (gpudirect_nvidia_driver_gdrcopy is false in this scenario)")


def test_gdrdrv_built_after_nvidia_for_every_kernel_and_loaded(host):
    """rdma sets gpudirect_nvidia_driver_gdrcopy: true: the stand-in gdrdrv-dkms is installed from the
    CUDA repository stand-in, held, built by DKMS after nvidia for every kernel that has both
    (the gpudirect_dkms chain), links against nvidia, and is loaded with /dev/gdrdrv."""
    _gdrcopy_installed(host)
    kernel = host.check_output("uname -r")
    out = host.check_output(
        "for d in /var/lib/dkms/nvidia/*/*/x86_64/module; do k=$(echo $d | cut -d/ -f7); "
        "g=$(ls -d /var/lib/dkms/gdrdrv/*/$k/x86_64/module 2>/dev/null | head -n1); "
        '[ -n "$g" ] && echo "$k $(stat -c %Y $d) $(stat -c %Y $g)"; done; true'
    )
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert kernel in [r[0] for r in rows], f"gdrdrv not built by DKMS for the running kernel {kernel}: {rows}"
    for k, nvidia_t, gdrdrv_t in rows:
        assert int(gdrdrv_t) >= int(nvidia_t), f"{k}: gdrdrv built before nvidia"
    assert host.check_output("modinfo -k %s -F depends gdrdrv", kernel) == "nvidia"
    assert host.file("/sys/module/gdrdrv").is_directory
    assert host.file("/dev/gdrdrv").exists
    assert "gdrdrv" in host.file("/etc/modules-load.d/gpudirect-gdrdrv.conf").content_string
    held = host.check_output("apt-mark showhold").split()
    assert {"gdrdrv-dkms", "libgdrapi", "gdrcopy-tests"} <= set(held), held


def test_verification_report_has_the_gdrcopy_and_dcgm_checks(host):
    """gpudirect_verify ran the stand-in's gdrcopy_sanity and gdrcopy_copybw, which answer as the
    real 2.5.1 tools do on this VM with no GPU (cuInit: CUDA_ERROR_NO_DEVICE, exit 1): the check
    is not_measured with the tools' own error, nothing about GDRCopy in the JSON or Markdown
    report reads as a bandwidth, and the host's verdict is untouched. The DCGM diagnostic is
    skipped: no dcgmi on the VM."""
    _gdrcopy_installed(host)
    _, inventory, _ = _molecule_env()
    reports = os.path.join(os.path.dirname(inventory), ".reports")
    with open(os.path.join(reports, host.backend.host + ".json")) as f:
        record = json.load(f)
    with open(os.path.join(reports, host.backend.host + ".md")) as f:
        markdown = f.read()
    checks = {c["name"]: c for c in record.get("checks") or []}
    gdrcopy = checks["gdrcopy"]
    assert gdrcopy["status"] == "not_measured", gdrcopy
    assert gdrcopy["summary"].startswith("GDRCopy not measured: no NVIDIA GPU on this node"), gdrcopy
    reason = gdrcopy["reason"]
    assert "gdrcopy_sanity exited 1 with 0 of 36 tests passed: 'CUDA error: CUDA_ERROR_NO_DEVICE'" in reason
    assert "gdrcopy_copybw exited 1 before printing a bandwidth: 'CUDA error: CUDA_ERROR_NO_DEVICE'" in reason
    assert gdrcopy["copybw"] is None and gdrcopy["sanity"]["passed"] == 0, gdrcopy
    assert gdrcopy["summary"] in record["notes"], record["notes"]
    assert "- " + gdrcopy["summary"] in markdown, markdown
    # nothing about GDRCopy reads as a measurement (NVIDIA's published V100 figures were shown here once)
    gdrcopy_lines = [line for line in markdown.splitlines() if "gdrcopy" in line.lower()]
    for text in [json.dumps(gdrcopy)] + gdrcopy_lines + [n for n in record["notes"] if "gdrcopy" in n.lower()]:
        assert "GB/s" not in text and "MB/s" not in text and "Tesla V100" not in text, text
    assert record["status"] == "passed" and (record.get("diagnosis") or {}).get("code") != "gdrcopy_failed", record
    assert checks["dcgm"]["status"] == "skipped" and "dcgmi is not installed" in checks["dcgm"]["reason"]
