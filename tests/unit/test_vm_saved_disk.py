"""The VM harness's saved disks (tests/harness/vm/vm.py save / start --from-saved).

The kernel_update scenario boots the disk the rdma scenario saved instead of
converging a node of its own. That is only sound while the saved node is what
the current code would converge: these tests pin which edits invalidate a saved
disk (code, the test node's recipe, another image) and which do not (docs, test
code), and that start falls back to the pristine image with the reason.
"""

import argparse
import json
import os
import subprocess

import pytest

from conftest import load_vm_harness

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def vm(tmp_path, monkeypatch):
    mod = load_vm_harness("gpudirect_vm")
    project = tmp_path / "project"
    (project / "roles" / "r" / "tasks").mkdir(parents=True)
    (project / "roles" / "r" / "tasks" / "main.yml").write_text("- name: t\n")
    (project / "roles" / "r" / "README.md").write_text("docs\n")
    (project / "molecule" / "rdma").mkdir(parents=True)
    (project / "molecule" / "rdma" / "prepare.yml").write_text("---\n")
    (project / "molecule" / "resources" / "vm" / "tests").mkdir(parents=True)
    (project / "molecule" / "resources" / "vm" / "tests" / "test_x.py").write_text("def test(): pass\n")
    (project / "site.yml").write_text("---\n")
    (project / "benchmarks").mkdir()
    (project / "benchmarks" / "run.sh").write_text("#!/bin/sh\n")
    monkeypatch.setattr(mod, "PROJECT", project)
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(mod, "CONVERGE_INPUTS", ("site.yml", "roles", "molecule/rdma", "molecule/resources"))
    return mod


def save(vm, name, image, stamp=None):
    d = vm.saved_dir(name)
    d.mkdir(parents=True)
    (d / "saved.json").write_text(json.dumps({"image": str(image), "code_stamp": stamp or vm.code_stamp()}))
    return d


def test_stamp_changes_with_code_and_recipe_files(vm):
    before = vm.code_stamp()
    (vm.PROJECT / "roles" / "r" / "tasks" / "main.yml").write_text("- name: t2\n")
    after_role = vm.code_stamp()
    assert after_role != before
    (vm.PROJECT / "molecule" / "rdma" / "prepare.yml").write_text("--- # changed\n")
    assert vm.code_stamp() != after_role
    # a new file counts too, as does a renamed one
    stamp = vm.code_stamp()
    (vm.PROJECT / "roles" / "r" / "tasks" / "extra.yml").write_text("")
    assert vm.code_stamp() != stamp


def test_stamp_ignores_docs_tests_caches_and_files_outside_the_inputs(vm):
    before = vm.code_stamp()
    (vm.PROJECT / "roles" / "r" / "README.md").write_text("more docs\n")
    (vm.PROJECT / "molecule" / "resources" / "vm" / "tests" / "test_x.py").write_text("def test(): assert 1\n")
    (vm.PROJECT / "roles" / "r" / "__pycache__").mkdir()
    (vm.PROJECT / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (vm.PROJECT / "benchmarks" / "run.sh").write_text("#!/bin/sh\necho\n")
    assert vm.code_stamp() == before


def test_saved_disk_valid_only_for_the_same_code_and_image(vm, tmp_path):
    image = tmp_path / "image-a"
    saved = save(vm, "rdma-converged", image)
    assert vm.saved_disk_problem(saved, image) is None

    problem = vm.saved_disk_problem(saved, tmp_path / "image-b")
    assert problem.startswith("saved on image ") and "image-b" in problem

    (vm.PROJECT / "site.yml").write_text("--- # edited\n")
    assert vm.saved_disk_problem(saved, image).startswith("saved for other code")


def test_developer_knob_takes_a_disk_of_other_code_but_never_of_another_image(vm, tmp_path, monkeypatch, capsys):
    image = tmp_path / "image-a"
    saved = save(vm, "rdma-converged", image)
    (vm.PROJECT / "site.yml").write_text("--- # edited\n")
    monkeypatch.setenv("GPUDIRECT_VM_SAVED_ANY_CODE", "1")
    assert vm.saved_disk_problem(saved, image) is None
    # the run says whose disk it took
    assert "saved for other code" in capsys.readouterr().err
    assert vm.saved_disk_problem(saved, tmp_path / "image-b").startswith("saved on image ")
    monkeypatch.setenv("GPUDIRECT_VM_SAVED_ANY_CODE", "yes")
    assert vm.saved_disk_problem(saved, image).startswith("saved for other code")


def test_missing_or_corrupt_saved_disk_is_reported_not_used(vm, tmp_path):
    image = tmp_path / "image-a"
    assert vm.saved_disk_problem(vm.saved_dir("nothing"), image).startswith("no saved disk at ")
    d = save(vm, "corrupt", image)
    (d / "saved.json").write_text("{not json")
    assert vm.saved_disk_problem(d, image).startswith("no saved disk at ")


def start_until_overlay(vm, tmp_path, monkeypatch):
    """Run `vm.py start n1 --from-saved rdma-converged` up to its first command (the
    overlay's qemu-img create) and return that command."""
    created = []

    def fake_run(cmd, **kw):
        created.append(cmd)
        raise SystemExit(0)  # stop right after the overlay is made: nothing else to see here

    monkeypatch.setattr(vm.subprocess, "run", fake_run)
    monkeypatch.setattr(vm, "choose_accel", lambda args, img: "tcg")
    args = argparse.Namespace(name="n1", state_dir=str(tmp_path / "runs"), image=str(tmp_path / "image-a"),
                              from_saved="rdma-converged")
    with pytest.raises(SystemExit):
        vm.cmd_start(args)
    return created[0]


def test_start_falls_back_to_the_pristine_image_and_says_why(vm, tmp_path, monkeypatch, capsys):
    """start --from-saved with a stale disk: the pristine image's overlay, the reason logged."""
    image = tmp_path / "image-a"
    image.mkdir()
    save(vm, "rdma-converged", image, stamp="0" * 64)
    cmd = start_until_overlay(vm, tmp_path, monkeypatch)
    assert cmd[:6] == ["qemu-img", "create", "-q", "-f", "qcow2", "-F"]
    assert cmd[6] == "raw" and cmd[8] == str(image / "rootfs.img")
    assert "not starting from saved disk rdma-converged: saved for other code" in capsys.readouterr().err


def test_start_boots_an_overlay_on_a_valid_saved_disk(vm, tmp_path, monkeypatch):
    image = tmp_path / "image-a"
    image.mkdir()
    saved = save(vm, "rdma-converged", image)
    # the saved disk is the backing file of a new overlay: it stays as saved for the next run
    assert start_until_overlay(vm, tmp_path, monkeypatch)[5:9] == ["-F", "qcow2", "-b", str(saved / "disk.qcow2")]


def test_save_and_start_options_parse():
    out = subprocess.run(["python3", os.path.join(ROOT, "tests", "harness", "vm", "vm.py"), "save", "--help"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=True).stdout
    assert "--to SAVED" in out and "--boot" in out


def running_vm_info(vm, tmp_path, **over):
    """A run dir as `vm.py start` leaves it, with its info.json and a disk."""
    rd = tmp_path / "runs" / "n1"
    rd.mkdir(parents=True)
    info = {"name": "n1", "ssh_port": 2231, "accel": "tcg", "image": str(tmp_path / "image-a"),
            "identity_file": "k", "main_mac": "52:54:00:00:00:01", "pair_mac": None, "pair_ip": None,
            "pair_net": None, "pair_role": "listen", "started_at": 0, "mem": 2048, "smp": 2,
            "reboot": "cold", "from_saved": None, "secure_boot": False}
    info.update(over)
    (rd / "info.json").write_text(json.dumps(info))
    for f in ("disk.qcow2", "bootdisk.raw"):
        (rd / f).write_bytes(b"x")
    return rd, info


def test_save_boot_starts_the_same_machine_from_the_disk_it_saved(vm, tmp_path, monkeypatch):
    """save --boot (the rdma scenario's power cycle): the disk is saved first, then the
    machine boots a copy of it with its own name, ports, memory and reboot mode."""
    rd, info = running_vm_info(vm, tmp_path, ssh_port=2299, mem=3072, reboot="warm")
    monkeypatch.setattr(vm, "power_off", lambda rd, info, timeout: True)
    started = []
    monkeypatch.setattr(vm, "cmd_start", lambda a: started.append(a) or 0)
    args = argparse.Namespace(name="n1", state_dir=str(tmp_path / "runs"), to="rdma-converged", timeout=5, boot=True)
    assert vm.cmd_save(args) == 0
    saved = vm.saved_dir("rdma-converged")
    assert (saved / "disk.qcow2").exists() and json.loads((saved / "saved.json").read_text())["image"] == info["image"]
    (again,) = started
    assert (again.name, again.ssh_port, again.mem, again.image, again.from_saved, again.warm_reboot) == \
        ("n1", 2299, 3072, info["image"], "rdma-converged", True)
    assert again.mac == info["main_mac"] and not again.secure_boot


def test_save_without_boot_leaves_the_machine_off(vm, tmp_path, monkeypatch):
    running_vm_info(vm, tmp_path)
    monkeypatch.setattr(vm, "power_off", lambda rd, info, timeout: True)
    monkeypatch.setattr(vm, "cmd_start", lambda a: pytest.fail("started again"))
    args = argparse.Namespace(name="n1", state_dir=str(tmp_path / "runs"), to="s", timeout=5, boot=False)
    assert vm.cmd_save(args) == 0


def test_save_boot_refuses_a_secure_boot_machine_before_powering_it_off(vm, tmp_path, monkeypatch, capsys):
    """Its variable store (the enrolled MOKs) is not part of a saved disk: booting the copy
    would be another machine, so nothing is done and the log says why."""
    running_vm_info(vm, tmp_path, secure_boot=True)
    monkeypatch.setattr(vm, "power_off", lambda rd, info, timeout: pytest.fail("powered off"))
    args = argparse.Namespace(name="n1", state_dir=str(tmp_path / "runs"), to="s", timeout=5, boot=True)
    assert vm.cmd_save(args) == 1
    assert "no firmware variable store" in capsys.readouterr().err
    assert not vm.saved_dir("s").exists()


class FakeQemu:
    """A qemu child for the supervisor's stall watch: runs until `exits_after`
    polls (None: until killed), appending `lines` to the serial log, one a poll."""

    def __init__(self, serial, lines, exits_after=None, rc=0):
        self.serial, self.lines, self.exits_after, self.rc, self.polls = serial, list(lines), exits_after, rc, 0

    def wait(self, timeout=None):
        if timeout is None:
            return self.rc
        self.polls += 1
        if self.exits_after is not None and self.polls >= self.exits_after:
            return self.rc
        if self.lines:
            with open(self.serial, "ab") as f:
                f.write(self.lines.pop(0) + b"\n")
        raise subprocess.TimeoutExpired("qemu", timeout)


@pytest.fixture
def fast_watch(vm, monkeypatch):
    monkeypatch.setattr(vm, "STALL_POLL_S", 0)
    monkeypatch.setattr(vm, "EARLY_BOOT_STALL_S", 0.05)
    return vm


def test_a_boot_silent_before_userspace_is_reported_as_stalled(fast_watch, tmp_path):
    serial = tmp_path / "serial.log"
    serial.write_bytes(b"[ 0.0] previous boot\nRun /init as init process\n")  # an earlier boot's marker
    child = FakeQemu(serial, [b"[ 1.1] NET: Registered PF_INET", b"[ 1.2] IP idents hash table entries"])
    assert fast_watch.wait_past_early_boot(child, serial, serial.stat().st_size) is None
    assert child.polls >= 3  # it watched the two lines arrive before it gave up


def test_a_boot_that_reaches_userspace_is_waited_for_to_the_end(fast_watch, tmp_path):
    serial = tmp_path / "serial.log"
    serial.write_bytes(b"")
    child = FakeQemu(serial, [b"[ 1.0] Freeing unused kernel image", b"[ 2.0] Run /init as init process"], rc=0)
    # after the marker the watch ends: a quiet userspace is no stall
    assert fast_watch.wait_past_early_boot(child, serial, 0) == 0


def test_qemu_exiting_in_early_boot_returns_its_code(fast_watch, tmp_path):
    serial = tmp_path / "serial.log"
    serial.write_bytes(b"")
    child = FakeQemu(serial, [b"[ 0.5] early"], exits_after=2, rc=1)
    assert fast_watch.wait_past_early_boot(child, serial, 0) == 1
