"""gpudirect_state: the converged-state record, its comparison, and the inputs digest."""

import json
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

import gpudirect_state as state_module  # library/gpudirect_state.py
from ansible.module_utils import gpudirect_state as fp
from conftest import H200_CAPTURE, ROOT
from gpudirect_inputs import stage_digests as inputs_digest  # filter_plugins/gpudirect_inputs.py
from gpudirect_state import read_record
from sysfs_tree import ACS_ALL_CTL, gpu_server, h200_capture

RECORD = "/var/lib/gpudirect/converged.json"
INPUTS = "0" * 64


def converged_node(base):
    """gpu_server's sysfs plus what a converged Debian node has on disk."""
    t = gpu_server(str(base))
    t.write("proc/modules", "nvidia_peermem 16384 0 - Live 0x0\nnvidia 56623104 1 nvidia_peermem, Live 0x0\n"
            "mlx5_ib 409600 0 - Live 0x0\nib_core 454656 2 mlx5_ib,nvidia_peermem, Live 0x0\n"
            "mlx5_core 2076672 1 mlx5_ib, Live 0x0\n")
    t.write("sys/module/nvidia/srcversion", "AAAA1111\n")
    t.write("sys/module/nvidia_peermem/srcversion", "BBBB2222\n")
    t.write("var/lib/dpkg/status", "Package: doca-ofed\nStatus: hold ok installed\nVersion: 2.10.0\n\n")
    t.write("etc/modprobe.d/gpudirect-blacklist-nouveau.conf", "blacklist nouveau\n")
    t.write("etc/modules-load.d/gpudirect-nvidia-peermem.conf", "nvidia_peermem\n")
    t.write("etc/apt/sources.list.d/doca.list", "deb [signed-by=/etc/apt/keyrings/mellanox-doca.asc] http://m/ ./\n")
    t.write("etc/security/limits.d/90-gpudirect-memlock.conf", "* - memlock unlimited\n")
    t.write("etc/dkms/framework.conf", "sign_tool=\"/etc/dkms/sign_helper.sh\"\n")
    t.write("var/lib/dkms/nvidia/570.1/6.1.0-18-amd64/x86_64/module/nvidia.ko.xz", "ko")
    t.write("var/lib/dkms/nvidia/570.1/build/make.log", "log")
    t.write("lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko.xz", "ko")
    return t


def run(run_module, root, check_mode=False, **args):
    params = {"inputs": INPUTS, "root": str(root)}
    params.update(args)
    return run_module(state_module, params, check_mode=check_mode)


@pytest.fixture
def node(tmp_path, run_module):
    t = converged_node(tmp_path)
    first = run(run_module, tmp_path, state="record")
    assert first["changed"] is True
    return t


def test_no_record_means_a_full_run(tmp_path, run_module):
    converged_node(tmp_path)
    result = run(run_module, tmp_path)
    assert result["unchanged"] is False
    assert result["differences"] == ["no record of a converged run at %s (first run, or the last one did not "
                                     "finish)" % RECORD]
    assert result["changed"] is False
    assert not os.path.exists(os.path.join(str(tmp_path), RECORD.lstrip("/")))


def test_record_then_query_matches_and_rerecord_changes_nothing(node, tmp_path, run_module):
    result = run(run_module, tmp_path)
    assert result["unchanged"] is True, result["differences"]
    assert result["differences"] == []
    assert result["recorded_at"].endswith("Z")
    # devices: the GPU, mlx5_0, mlx5_1 and the unbound Mellanox function 81:00.1
    assert result["summary"] == {"config_files": 5, "loaded_modules": 5, "acs_functions": 4, "units": 0, "devices": 4}
    again = run(run_module, tmp_path, state="record")
    assert again["changed"] is False
    record = json.load(open(os.path.join(str(tmp_path), RECORD.lstrip("/"))))
    assert record["inputs"] == INPUTS
    assert record["fingerprint"]["acs"]["0000:02:08.0"] == "0x%04x" % ACS_ALL_CTL
    assert record["fingerprint"]["loaded_modules"]["nvidia"] == "AAAA1111"
    assert oct(os.stat(os.path.join(str(tmp_path), RECORD.lstrip("/"))).st_mode & 0o777) == "0o600"


def _edit_config(t):
    t.write("etc/modprobe.d/gpudirect-blacklist-nouveau.conf", "# blacklist nouveau\n")


def _remove_config(t):
    os.remove(t.abs("etc/security/limits.d/90-gpudirect-memlock.conf"))


def _dkms_override_added(t):
    # an admin adds a per-module override (DKMS reads /etc/dkms/NAME.conf for every command
    # given -m NAME): configuration of the chain's builds, like framework.conf
    t.write("etc/dkms/nvidia.conf", "# site override\n")


def _new_kernel_running(t):
    t.write("proc/sys/kernel/osrelease", "6.1.0-20-amd64\n")


def _new_default_kernel(t):
    t.write("boot/vmlinuz-6.1.0-20-amd64", "kernel image\n")
    os.remove(t.abs("boot/vmlinuz"))
    os.symlink("vmlinuz-6.1.0-20-amd64", t.abs("boot/vmlinuz"))


def _package_change(t):
    t.write("var/lib/dpkg/status", "Package: doca-ofed\nStatus: install ok installed\nVersion: 2.10.0\n\n")


def _acs_back_on(t):
    path = t.abs("sys/bus/pci/devices/0000:02:08.0/config")
    data = bytearray(open(path, "rb").read())
    data[0x148 + 6:0x148 + 8] = b"\x00\x00"
    open(path, "wb").write(bytes(data))


def _module_rebuilt(t):
    t.write("sys/module/nvidia_peermem/srcversion", "CCCC3333\n")


def _module_unloaded(t):
    lines = open(t.abs("proc/modules")).read().splitlines()
    t.write("proc/modules", "\n".join(l for l in lines if not l.startswith("nvidia_peermem ")) + "\n")


def _reboot_flag(t):
    t.write("run/reboot-required", "*** System restart required ***\n")


def _dkms_built_more(t):
    t.write("var/lib/dkms/nvidia/570.1/6.1.0-20-amd64/x86_64/module/nvidia.ko.xz", "ko")


def _cmdline(t):
    t.cmdline("BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=x ro quiet")


def _gpu_fell_off_the_bus(t):
    os.unlink(t.abs("sys/bus/pci/devices/0000:03:00.0"))


def _nic_firmware_updated(t):
    t.write("sys/class/infiniband/mlx5_0/fw_ver", "20.40.1000\n")


def _gpu_link_trained_at_x8(t):
    t.write(os.path.join(t.pci_dirs["0000:03:00.0"], "current_link_width"), "8\n")


def _nic_link_trained_at_gen3(t):
    t.write(os.path.join(t.pci_dirs["0000:04:00.0"], "current_link_speed"), "8.0 GT/s PCIe\n")


def _peermem_path_gone(t):
    t.write("proc/modules", "nvidia 56623104 0 - Live 0x0\nmlx5_ib 409600 0 - Live 0x0\n"
            "ib_core 454656 1 mlx5_ib, Live 0x0\nmlx5_core 2076672 1 mlx5_ib, Live 0x0\n")


DRIFT = [
    (_edit_config, "configuration files changed: /etc/modprobe.d/gpudirect-blacklist-nouveau.conf"),
    (_remove_config, "configuration files changed: /etc/security/limits.d/90-gpudirect-memlock.conf"),
    (_dkms_override_added, "configuration files changed: /etc/dkms/nvidia.conf"),
    (_new_kernel_running, "running kernel: 6.1.0-18-amd64 -> 6.1.0-20-amd64"),
    (_new_default_kernel, "default boot kernel: 6.1.0-18-amd64 -> 6.1.0-20-amd64"),
    (_package_change, "installed packages (package database) changed"),
    (_acs_back_on, "ACS control of 0000:02:08.0: 0x005d -> 0x0000"),
    (_module_rebuilt, "loaded module nvidia_peermem: BBBB2222 -> CCCC3333"),
    (_module_unloaded, "loaded module nvidia_peermem: removed"),
    (_reboot_flag, "reboot-required flags: [] -> ['/run/reboot-required']"),
    (_dkms_built_more, "built kernel modules (DKMS tree, updates/extra directories) changed"),
    (_cmdline, "kernel command line: BOOT_IMAGE"),
    (_gpu_fell_off_the_bus, "GPU/NIC 0000:03:00.0: removed"),
    (_nic_firmware_updated, "NIC firmware of mlx5_0: 20.39.1002 -> 20.40.1000"),
    (_gpu_link_trained_at_x8, "GPU/NIC 0000:03:00.0: gpu 10de:2335 numa 0 link 32 GT/s x16 of 32 GT/s x16 -> "
                              "gpu 10de:2335 numa 0 link 32 GT/s x8 of 32 GT/s x16"),
    (_nic_link_trained_at_gen3, "GPU/NIC 0000:04:00.0: nic mlx5_0 15b3:101b numa 0 link 16 GT/s x16 of 16 GT/s x16 "
                                "-> nic mlx5_0 15b3:101b numa 0 link 8 GT/s x16 of 16 GT/s x16"),
    (_peermem_path_gone, "peer-memory path: nvidia_peermem -> none"),
]


@pytest.mark.parametrize("drift, reason", DRIFT, ids=[d[0].__name__.strip("_") for d in DRIFT])
def test_every_kind_of_drift_is_named(node, tmp_path, run_module, drift, reason):
    drift(node)
    result = run(run_module, tmp_path)
    assert result["unchanged"] is False
    assert any(d.startswith(reason) for d in result["differences"]), result["differences"]


def test_the_runs_own_lock_and_note_do_not_count(tmp_path, run_module):
    """The run lock is held while the record is written and the next run holds its own (another
    token, another time); the left-drained note comes and goes with drains. Neither is the node's
    configuration: a re-run that found them changed would never take the shortcut (the rdma
    scenario's idempotence step failed on exactly that once the lock moved to /var/lib/gpudirect)."""
    t = converged_node(tmp_path)
    t.write("var/lib/gpudirect/run.lock", '{"token": "run-1"}\n')
    t.write("var/lib/gpudirect/locks/custom.lock", '{"token": "run-1"}\n')
    assert run(run_module, tmp_path, state="record", exclude=["/var/lib/gpudirect/locks/custom.lock"])["changed"]
    t.write("var/lib/gpudirect/run.lock", '{"token": "run-2", "renewed": 1}\n')
    t.write("var/lib/gpudirect/left-drained.json", '{"reason": "drained", "intent": true}\n')
    t.write("var/lib/gpudirect/locks/custom.lock", '{"token": "run-2"}\n')
    result = run(run_module, tmp_path, exclude=["/var/lib/gpudirect/locks/custom.lock"])
    assert result["unchanged"] is True, result["differences"]
    # anything else the toolkit keeps there still counts
    t.write("var/lib/gpudirect/loopback/gpudirect_loopback_helper.sha256", "another build\n")
    result = run(run_module, tmp_path, exclude=["/var/lib/gpudirect/locks/custom.lock"])
    assert len(result["differences"]) == 1, result["differences"]
    assert result["differences"][0].startswith("configuration files changed: ")
    assert "/var/lib/gpudirect/loopback/gpudirect_loopback_helper.sha256" in result["differences"][0]
    assert "lock" not in result["differences"][0] and "left-drained" not in result["differences"][0]
    # without the exclude, the moved lock counts: the role passes gpudirect_drain_lock_file
    assert "/var/lib/gpudirect/locks/custom.lock" in run(run_module, tmp_path)["differences"][0]


def test_dkms_build_logs_do_not_count(node, tmp_path, run_module):
    node.write("var/lib/dkms/nvidia/570.1/build/make.log", "another build's log, longer than before")
    assert run(run_module, tmp_path)["unchanged"] is True


def test_changed_inputs_are_named(node, tmp_path, run_module):
    result = run(run_module, tmp_path, inputs="1" * 64)
    assert result["differences"] == ["the controller's inputs changed (inventory variables or toolkit files)"]


def test_units_are_read_as_unknown_off_host(node, tmp_path, run_module):
    result = run(run_module, tmp_path, units=["nvidia-persistenced.service"])
    assert result["differences"] == ["unit nvidia-persistenced.service: added"]
    assert result["summary"]["units"] == 1


@pytest.mark.parametrize("content, reason", [
    ("{not json", "is unreadable"),
    ("[1, 2]", "is not a JSON object"),
    ("{}", "the record holds no fingerprint"),
    ('{"inputs": "x", "fingerprint": {"format": 0}}', "the record was written by another toolkit version (format 0, now 2)"),
], ids=["not-json", "list", "no-fingerprint", "old-format"])
def test_malformed_record_means_a_full_run_never_a_crash(node, tmp_path, run_module, content, reason):
    node.write(RECORD.lstrip("/"), content)
    result = run(run_module, tmp_path, inputs="x")
    assert result["unchanged"] is False
    assert any(reason in d for d in result["differences"]), result["differences"]
    rewritten = run(run_module, tmp_path, inputs="x", state="record")
    assert rewritten["changed"] is True
    assert run(run_module, tmp_path, inputs="x")["unchanged"] is True


def test_check_mode_record_writes_nothing(tmp_path, run_module):
    converged_node(tmp_path)
    result = run(run_module, tmp_path, check_mode=True, state="record")
    assert result["changed"] is True
    assert not os.path.exists(os.path.join(str(tmp_path), RECORD.lstrip("/")))


@pytest.mark.parametrize("args, message", [
    ({"inputs": "  "}, "inputs is empty"),
    ({"root": "/nonexistent/tree"}, "is not a directory"),
])
def test_bad_input_fails_with_what_to_do(tmp_path, run_module, args, message):
    params = {"inputs": INPUTS, "root": str(tmp_path)}
    params.update(args)
    result = run_module(state_module, params)
    assert result["failed"] is True
    assert message in result["msg"]


def test_unwritable_record_says_what_to_do(tmp_path, run_module):
    converged_node(tmp_path)
    os.makedirs(os.path.join(str(tmp_path), "var/lib/gpudirect/converged.json/blocked"))
    result = run(run_module, tmp_path, state="record")
    assert result["failed"] is True
    assert "gpudirect_state_record_path" in result["msg"]


def test_read_record_of_a_missing_file():
    record, reason, mtime = read_record("/nonexistent/converged.json")
    assert record is None and mtime is None
    assert reason.startswith("no record of a converged run")


def test_h200_capture_fingerprint(tmp_path):
    h200_capture(str(tmp_path), H200_CAPTURE)
    first = fp.fingerprint(str(tmp_path))
    assert first["kernel"]["running"]
    assert "nvidia" in first["loaded_modules"]
    assert fp.differences({"inputs": "a", "fingerprint": first},
                          {"inputs": "a", "fingerprint": fp.fingerprint(str(tmp_path))}) == []


# --------------------------------------------------------------------------- inputs digest (per stage)

STAGE = {"s": {"roles": ["r"], "playbooks": ["playbooks/plan.yml"]}}


def _project(tmp_path):
    root = tmp_path / "toolkit"
    for part in ("roles/r/defaults", "library", "module_utils", "filter_plugins", "playbooks"):
        (root / part).mkdir(parents=True)
    (root / "site.yml").write_text("---\n")
    (root / "playbooks/plan.yml").write_text("---\n- hosts: all\n  tasks:\n    - m:\n")
    (root / "roles/r/defaults/main.yml").write_text("r_x: 1\n")
    (root / "library/m.py").write_text("# module\nfrom ansible.module_utils.gpudirect_u import X\n")
    (root / "module_utils/gpudirect_u.py").write_text("X = 1\n")
    return root


def digest(variables, root):
    return inputs_digest(variables, str(root), STAGE)["s"]


def test_inputs_digest_follows_variables_and_toolkit_files(tmp_path):
    root = _project(tmp_path)
    base = digest({"gpudirect_a": 1, "r_b": "570"}, root)
    assert base == digest({"r_b": "570", "gpudirect_a": 1}, root)
    assert base != digest({"gpudirect_a": 2, "r_b": "570"}, root)
    (root / "roles/r/defaults/main.yml").write_text("r_x: 2\n")
    assert base != digest({"gpudirect_a": 1, "r_b": "570"}, root)


def test_inputs_digest_ignores_bytecode(tmp_path):
    root = _project(tmp_path)
    base = digest({}, root)
    (root / "roles/r/__pycache__").mkdir()
    (root / "roles/r/__pycache__/m.cpython-311.pyc").write_bytes(b"\x00")
    assert digest({}, root) == base


def test_inputs_digest_covers_code_and_templates_not_readmes(tmp_path):
    """Issue #16 outcome 3: a README edit must not turn the next run into a full one; the module the
    playbook names and the module_utils it imports count."""
    root = _project(tmp_path)
    (root / "roles/r/templates").mkdir()
    (root / "roles/r/templates/unit.service.j2").write_text("[Unit]\n")
    (root / "roles/r/README.md").write_text("# r\n")
    base = digest({}, root)
    (root / "roles/r/README.md").write_text("# r\n\nmore prose\n")
    (root / "playbooks/README.md").write_text("a new README\n")
    assert digest({}, root) == base
    (root / "roles/r/templates/unit.service.j2").write_text("[Unit]\nBefore=x.service\n")
    templated = digest({}, root)
    assert templated != base
    (root / "playbooks/plan.yml").write_text("---\n- hosts: all\n  tasks:\n    - m: {}\n")
    planned = digest({}, root)
    assert planned != templated
    (root / "module_utils/gpudirect_u.py").write_text("X = 2\n")
    assert digest({}, root) not in (base, templated, planned)
    (root / "module_utils/gpudirect_other.py").write_text("Y = 1\n")  # reached by nothing of the stage
    assert digest({}, root) == digest({}, root)


def test_inputs_digest_leaves_out_the_filters_ansible_doc_files(tmp_path):
    """filter_plugins/NAME.yml documents a filter for ansible-doc: editing it changes no node."""
    root = _project(tmp_path)
    (root / "filter_plugins/f.py").write_text("class FilterModule(object):\n    def filters(self):\n"
                                              "        return {'my_filter': len}\n")
    (root / "filter_plugins/f.yml").write_text("DOCUMENTATION:\n  name: f\n")
    (root / "roles/r/defaults/main.yml").write_text("r_x: \"{{ [1] | my_filter }}\"\n")
    base = digest({}, root)
    (root / "filter_plugins/f.yml").write_text("DOCUMENTATION:\n  name: f\n  short_description: more\n")
    assert digest({}, root) == base
    (root / "filter_plugins/f.py").write_text("class FilterModule(object):\n    def filters(self):\n"
                                              "        return {'my_filter': sorted}\n")
    assert digest({}, root) != base


def test_inputs_digest_of_the_real_toolkit_is_stable():
    stages = yaml.safe_load(open(os.path.join(ROOT, "roles/gpudirect_state/vars/main.yml")))["__gpudirect_state_stages"]
    assert inputs_digest({"a": 1}, ROOT, stages) == inputs_digest({"a": 1}, ROOT, stages)


@pytest.mark.parametrize("variables, root, message", [
    (["gpudirect_a"], None, "expected a dict"),
    ({}, "/nonexistent", "is neither the toolkit's checkout"),
])
def test_inputs_digest_rejects_bad_input(tmp_path, variables, root, message):
    with pytest.raises(AnsibleFilterError, match=message):
        inputs_digest(variables, root or str(_project(tmp_path)), STAGE)


def test_every_config_tree_the_roles_write_is_watched():
    """Each absolute path in the roles' vars/defaults that the roles write lies in a watched tree."""
    written = []
    for role in os.listdir(os.path.join(ROOT, "roles")):
        for sub in ("vars/main.yml", "defaults/main.yml"):
            path = os.path.join(ROOT, "roles", role, sub)
            if os.path.exists(path):
                for name, value in (yaml.safe_load(open(path)) or {}).items():
                    if isinstance(value, str) and value.startswith("/etc/") and "grubby" not in value:
                        written.append((name, value))
    assert written
    watched = tuple("/" + t + "/" for t in fp.CONFIG_TREES) + tuple("/" + f for f in fp.CONFIG_FILES)
    missing = [(n, v) for n, v in written if not (v + "/").startswith(watched) and v not in watched]
    assert not missing, missing


# --------------------------------------------------------------------------- a real H100 node

def _h100_capture():
    from conftest import PROJECT_FIXTURES
    with open(os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "gpudirect_state.json")) as handle:
        return json.load(handle)


def test_h100_capture_matched_itself_and_named_the_added_file():
    capture = _h100_capture()
    assert capture["same"]["unchanged"] is True and capture["same"]["differences"] == []
    assert capture["drifted"]["differences"] == ["configuration files changed: /usr/local/sbin/gpudirect-state-test"]
    record = capture["record"]
    assert record["fingerprint"]["loaded_modules"]["nvidia"]
    assert fp.differences(record, json.loads(json.dumps(record))) == []


def test_h100_record_against_a_rebuilt_driver_and_a_new_kernel():
    record = _h100_capture()["record"]
    now = json.loads(json.dumps(record))
    old_src = record["fingerprint"]["loaded_modules"]["nvidia"]
    now["fingerprint"]["loaded_modules"]["nvidia"] = "0" * len(old_src)
    now["fingerprint"]["kernel"]["running"] = "6.18.45-fc-v658-gpu"
    assert fp.differences(record, now) == [
        "running kernel: %s -> 6.18.45-fc-v658-gpu" % record["fingerprint"]["kernel"]["running"],
        "loaded module nvidia: %s -> %s" % (old_src, "0" * len(old_src))]


# --------------------------------------------------------------------------- inventory, own units, removal

def test_fingerprint_lists_the_gpu_and_nic_inventory_firmware_and_peer_memory(node, tmp_path):
    current = fp.fingerprint(str(tmp_path))
    assert current["devices"] == {
        "0000:03:00.0": "gpu 10de:2335 numa 0 link 32 GT/s x16 of 32 GT/s x16",
        "0000:04:00.0": "nic mlx5_0 15b3:101b numa 0 link 16 GT/s x16 of 16 GT/s x16",
        "0000:81:00.0": "nic mlx5_1 15b3:101b numa 1 link 16 GT/s x16 of 16 GT/s x16",
        "0000:81:00.1": "nic (no RDMA device) 15b3:101b numa 1 link ? GT/s x? of ? GT/s x?",
    }
    assert current["firmware"] == {"mlx5_0": "20.39.1002", "mlx5_1": "20.39.1002"}
    assert current["peer_memory"] == "nvidia_peermem"   # a proprietary 535 driver: no dma-buf


def test_a_format_1_record_means_one_full_run(node, tmp_path, run_module):
    path = os.path.join(str(tmp_path), RECORD.lstrip("/"))
    record = json.load(open(path))
    record["fingerprint"]["format"] = 1
    with open(path, "w") as handle:
        json.dump(record, handle)
    assert "written by another toolkit version (format 1, now 2)" in run(run_module, tmp_path)["differences"][0]


def test_own_units_are_watched_without_being_listed(node, tmp_path, run_module):
    node.write("etc/systemd/system/gpudirect-pcie-acs.service", "[Service]\nType=oneshot\n")
    node.write("etc/systemd/system/nvidia-persistenced.service", "[Service]\n")
    assert fp.own_units(str(tmp_path)) == ["gpudirect-pcie-acs.service"]
    run(run_module, tmp_path, state="record")
    record = json.load(open(os.path.join(str(tmp_path), RECORD.lstrip("/"))))
    assert record["fingerprint"]["units"] == {"gpudirect-pcie-acs.service": "unknown"}   # off-host: not read


def test_absent_removes_the_record_and_check_mode_keeps_it(node, tmp_path, run_module):
    path = os.path.join(str(tmp_path), RECORD.lstrip("/"))
    checked = run(run_module, tmp_path, check_mode=True, state="absent")
    assert checked["changed"] is True and os.path.exists(path)
    removed = run(run_module, tmp_path, state="absent")
    assert removed["changed"] is True and not os.path.exists(path)
    assert removed["differences"] == ["the record was removed"]
    again = run(run_module, tmp_path, state="absent")
    assert again["changed"] is False and again["differences"] == ["there was no record"]
    assert run(run_module, tmp_path)["unchanged"] is False   # the next run is a full one


# --- files the inventory names but no stage writes (issue #17: a key rotation in place) ----------

CERT = "/root/mok/signing-cert.der"


def _signing_cert_der():
    with open(os.path.join(ROOT, "tests", "fixtures", "secure_boot", "signing_cert.der"), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("rotate, reason", [
    # the admin replaces the certificate at the same path: no inventory variable changes
    (lambda t: t.write(CERT, _signing_cert_der()[:-1] + b"\x00", binary=True),
     "watched files changed: /root/mok/signing-cert.der (content)"),
    (lambda t: os.remove(os.path.join(t.root, CERT.lstrip("/"))),
     "watched files changed: /root/mok/signing-cert.der (now missing)"),
])
def test_a_watched_file_replaced_in_place_is_a_difference(tmp_path, run_module, rotate, reason):
    t = converged_node(tmp_path)
    t.write(CERT, _signing_cert_der(), binary=True)
    assert run(run_module, tmp_path, state="record", files=[CERT])["changed"] is True
    assert run(run_module, tmp_path, files=[CERT])["unchanged"] is True
    rotate(t)
    assert run(run_module, tmp_path, files=[CERT])["differences"] == [reason]


def test_a_watched_file_that_appears_is_a_difference_and_no_watch_list_matches_an_older_record(node, tmp_path,
                                                                                               run_module):
    # a record written before the node watched anything (or by a run that watched nothing)
    assert run(run_module, tmp_path)["unchanged"] is True
    # a path that names no file is no difference while it stays missing
    assert run(run_module, tmp_path, files=[CERT])["unchanged"] is True
    node.write(CERT, _signing_cert_der(), binary=True)
    assert run(run_module, tmp_path, files=[CERT])["differences"] == [
        "watched files changed: /root/mok/signing-cert.der (new)"]
