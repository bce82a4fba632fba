"""The VM harness's choice of accelerator (tests/harness/vm/vm.py kvm_boots, choose_accel).

On the CI machines /dev/kvm answers but the kernel behind it is kvm_pvm, under which
a stock Debian kernel stops in its decompressor (the console's last lines are the
ones in HANGS below, captured there on 2026-11-26); elsewhere KVM boots it. The
probe boots the image's kernel once under KVM with a stand-in qemu here, and the
harness must take KVM where the kernel reached its initramfs and TCG otherwise,
with the verdict cached per (kernel, qemu) pair.
"""

import argparse
import os

import pytest

from conftest import load_vm_harness

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the serial console of the probe under kvm_pvm (q35, -cpu host,-arch-capabilities,
# earlyprintk, nokaslr): nothing after the decompressor's own line
HANGS = "early console in setup code\nProbing EDD (edd=off to disable)... ok\n\n\nKASLR disabled: 'nokaslr' on cmdline.\n"
# a kernel that got through early boot under KVM: the probe's rdinit does not exist
BOOTS = ("Probing EDD (edd=off to disable)... ok\n[    0.000000] Linux version 6.1.0-50-amd64\n"
         "[    0.812345] Run /gpudirect-kvm-probe as init process\n"
         "[    0.813000] Kernel panic - not syncing: Requested init /gpudirect-kvm-probe failed (error -2).\n")


@pytest.fixture
def vm(tmp_path, monkeypatch):
    mod = load_vm_harness("gpudirect_vm_accel")
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(mod, "KVM_PROBE_TIMEOUT_S", 2)
    kvm = tmp_path / "kvm"
    kvm.write_text("")
    monkeypatch.setattr(mod, "KVM_DEVICE", str(kvm))
    monkeypatch.delenv("GPUDIRECT_VM_ACCEL", raising=False)
    img = tmp_path / "image"
    img.mkdir()
    (img / "kernel-release").write_text("6.1.0-50-amd64\n")
    mod.test_image = img
    return mod


def stand_in_qemu(vm, tmp_path, monkeypatch, console, hang):
    """A qemu that prints `console` on its serial line, then hangs or exits, and counts its boots."""
    q = tmp_path / "qemu-system-x86_64"
    q.write_text("#!/bin/sh\n"
                 "[ \"$1\" = --version ] && { echo 'QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)'; exit 0; }\n"
                 f"echo boot >>{tmp_path}/boots\n"
                 f"printf '%s' '{console}'\n" + ("exec sleep 30\n" if hang else "exit 0\n"))
    q.chmod(0o755)
    monkeypatch.setattr(vm, "QEMU", str(q))
    return tmp_path / "boots"


def accel(vm, want=None):
    return vm.choose_accel(argparse.Namespace(accel=want), vm.test_image)


def test_kernel_that_hangs_under_kvm_runs_under_tcg_and_the_verdict_is_kept(vm, tmp_path, monkeypatch):
    boots = stand_in_qemu(vm, tmp_path, monkeypatch, HANGS, hang=True)
    assert accel(vm) == "tcg"
    assert accel(vm) == "tcg"
    # one probe boot for the (kernel, qemu) pair: the second start read the cache
    assert boots.read_text().count("boot") == 1


def test_kernel_that_boots_under_kvm_runs_under_kvm(vm, tmp_path, monkeypatch):
    boots = stand_in_qemu(vm, tmp_path, monkeypatch, BOOTS, hang=False)
    assert accel(vm) == "kvm"
    assert boots.read_text().count("boot") == 1


def test_no_usable_kvm_device_means_tcg_without_a_probe(vm, tmp_path, monkeypatch):
    boots = stand_in_qemu(vm, tmp_path, monkeypatch, BOOTS, hang=False)
    monkeypatch.setattr(vm, "KVM_DEVICE", str(tmp_path / "no-such-device"))
    assert accel(vm) == "tcg"
    assert not boots.exists()


def test_forced_accelerator_wins_over_the_probe(vm, tmp_path, monkeypatch):
    boots = stand_in_qemu(vm, tmp_path, monkeypatch, HANGS, hang=True)
    assert accel(vm, "kvm") == "kvm"
    monkeypatch.setenv("GPUDIRECT_VM_ACCEL", "tcg")
    stand_in_qemu(vm, tmp_path, monkeypatch, BOOTS, hang=False)
    assert accel(vm) == "tcg"
    assert not boots.exists()
