"""vm.py start --intel-iommu and the Secure Boot ESP's hand-over to the guest's GRUB menu
(tests/harness/vm/vm.py with_intel_iommu, tests/harness/vm/secure_boot.py grub_cfg).

The secureboot scenario alone starts its machine with an Intel IOMMU and intel_iommu=on, so
that the guest's kernel turns ACS on at the root port by itself under lockdown (issue #44
outcome 1); every other scenario's qemu command line must stay what it was. cmd_start runs
here with qemu-img, the supervisor and the image stubbed out, and the command line it would
hand qemu is read from the run directory.
"""

import json
import subprocess

import pytest

from conftest import load_vm_harness


@pytest.fixture
def vm(monkeypatch, tmp_path):
    mod = load_vm_harness("gpudirect_vm_intel_iommu")
    img = tmp_path / "img"
    img.mkdir()
    for name in ("vmlinuz", "initrd.img", "rootfs.img", "id_ed25519"):
        (img / name).write_text(name)
    monkeypatch.setattr(mod, "image_dir", lambda args: img)
    monkeypatch.setattr(mod, "choose_accel", lambda args, image: "tcg")
    monkeypatch.setattr(mod, "ensure_debian_slim", lambda image: None)
    monkeypatch.setattr(mod, "launch_supervisor", lambda rd, name, mode="w": True)
    real_run = subprocess.run

    def run(argv, *a, **kw):
        if argv[0] == "qemu-img":
            return subprocess.CompletedProcess(argv, 0)
        return real_run(argv, *a, **kw)

    monkeypatch.setattr(mod.subprocess, "run", run)
    monkeypatch.delenv("GPUDIRECT_VM_CPU", raising=False)
    monkeypatch.delenv("GPUDIRECT_VM_WARM_REBOOT", raising=False)
    return mod


def _start(vm, tmp_path, *extra):
    state = tmp_path / "state"
    assert vm.main(["--state-dir", str(state), "start", "node", "--ssh-port", "2299", "--smp", "1", *extra]) == 0
    rd = state / "node"
    return json.loads((rd / "qemu.argv.json").read_text()), json.loads((rd / "info.json").read_text())


def test_without_the_option_no_iommu_and_no_kernel_switch(vm, tmp_path):
    argv, info = _start(vm, tmp_path)
    assert "intel-iommu" not in argv
    assert "intel_iommu=on" not in argv[argv.index("-append") + 1].split()
    assert info["intel_iommu"] is False


def test_the_option_adds_the_iommu_first_and_intel_iommu_on_and_nothing_else(vm, tmp_path):
    plain, _ = _start(vm, tmp_path)
    argv, info = _start(vm, tmp_path, "--intel-iommu")
    first = argv.index("-device")
    assert argv[first:first + 2] == ["-device", "intel-iommu"]
    assert argv.count("intel-iommu") == 1
    append = argv[argv.index("-append") + 1]
    assert append == plain[plain.index("-append") + 1] + " intel_iommu=on"
    # the rest is the plain command line, word for word
    rest = argv[:first] + argv[first + 2:]
    rest[rest.index("-append") + 1] = plain[plain.index("-append") + 1]
    assert rest == plain
    assert info["intel_iommu"] is True


def test_under_secure_boot_the_esp_carries_intel_iommu_on(vm, tmp_path, monkeypatch):
    secure_boot = vm.sibling("secure_boot")
    seen = {}
    monkeypatch.setattr(secure_boot, "boot_chain", lambda cache: tmp_path / "chain")

    def qemu_args(rd, chain, append):
        seen["append"] = append
        return ["-drive", "if=pflash,stub"]

    monkeypatch.setattr(secure_boot, "qemu_args", qemu_args)
    argv, info = _start(vm, tmp_path, "--secure-boot", "--intel-iommu")
    assert "-kernel" not in argv and "-append" not in argv
    assert argv[argv.index("-device"):argv.index("-device") + 2] == ["-device", "intel-iommu"]
    assert seen["append"].split()[-1] == "intel_iommu=on"
    assert info["secure_boot"] is True and info["intel_iommu"] is True


def test_the_esp_hands_over_to_the_guests_grub_menu_before_its_own_entry():
    secure_boot = load_vm_harness("gpudirect_vm_intel_iommu_sb").sibling("secure_boot")
    cfg = secure_boot.grub_cfg("console=ttyS0,115200 root=/dev/vda rw intel_iommu=on").splitlines()
    search = cfg.index("search --no-floppy --file --set=root /vmlinuz")
    handover = cfg.index("if [ -f /boot/grub/grub.cfg ]; then")
    own = cfg.index("linux /vmlinuz console=ttyS0,115200 root=/dev/vda rw intel_iommu=on")
    assert search < handover < own
    # as Debian's ESP grub.cfg: the prefix the menu's load_env/save_env (grubenv) read
    assert cfg[handover + 1:handover + 4] == ["  set prefix=($root)/boot/grub", "  configfile $prefix/grub.cfg", "fi"]
    assert cfg[own + 1:own + 3] == ["initrd /initrd.img", "boot"]
