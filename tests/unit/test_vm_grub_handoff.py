"""vm.py boot_entry(): the boot loader stand-in boots what the guest handed over at
shutdown, and GRUB's choice when the archive carries the guest's grub.cfg.

The archives are written with tar as the guest's gpudirect-boot-handoff writes them
(tests/harness/vm/build-image.sh): `tar -ch` of the default kernel's links, then the
GRUB files and /boot's kernels; tar stores a kernel it already wrote through the
vmlinuz link as a hard link to it. grub.cfg texts: tests/fixtures/grub/.
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import PROJECT_FIXTURES, ROOT, load_vm_harness

FIX = os.path.join(PROJECT_FIXTURES, "grub")
NEW, OLD = "6.1.0-56-amd64", "6.1.0-50-amd64"
HARNESS_APPEND = "console=ttyS0,115200 root=/dev/vda rw mitigations=off panic=-1"


@pytest.fixture
def vm():
    mod = load_vm_harness("gpudirect_vm_grub")
    return mod


def _qemu(rd):
    return ["qemu-system-x86_64", "-kernel", "/img/vmlinuz", "-initrd", "/img/initrd.img",
            "-append", HARNESS_APPEND, "-drive", f"file={rd / 'bootdisk.raw'}"]


def _handoff(rd, tmp_path, grub_cfg=None, grubenv=None, kernels=(OLD, NEW), default=NEW):
    """Write bootdisk.raw the way the guest's handoff does."""
    root = tmp_path / "guest"
    shutil.rmtree(root, ignore_errors=True)
    (root / "boot" / "grub").mkdir(parents=True)
    for v in kernels:
        (root / "boot" / f"vmlinuz-{v}").write_text(f"kernel {v}\n")
        (root / "boot" / f"initrd.img-{v}").write_text(f"initrd {v}\n")
    d = tmp_path / "handoff"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    os.symlink(root / "boot" / f"vmlinuz-{default}", d / "vmlinuz")
    os.symlink(root / "boot" / f"initrd.img-{default}", d / "initrd.img")
    (d / "kernel-release").write_text(default + "\n")
    extra = []
    if grub_cfg is not None:
        (root / "boot" / "grub" / "grub.cfg").write_text(grub_cfg)
        extra = ["-C", str(root), "boot/grub/grub.cfg"]
        if grubenv is not None:
            (root / "boot" / "grub" / "grubenv").write_text(grubenv)
            extra.append("boot/grub/grubenv")
        extra += sorted(f"boot/{p.name}" for p in (root / "boot").iterdir() if p.is_file())
    subprocess.run(["tar", "-chf", str(rd / "bootdisk.raw"), "-C", str(d), "vmlinuz", "initrd.img",
                    "kernel-release", *extra], check=True)


def _fixture(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as handle:
        return handle.read()


def _arg(argv, opt):
    return argv[argv.index(opt) + 1]


def test_without_grub_the_handed_over_default_kernel_boots_with_the_harness_line(vm, tmp_path, capsys):
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path)
    new = vm.boot_entry(rd, _qemu(rd))
    assert _arg(new, "-kernel") == str(rd / "boot" / "vmlinuz")
    assert (rd / "boot" / "vmlinuz").read_text() == f"kernel {NEW}\n"
    assert _arg(new, "-initrd") == str(rd / "boot" / "initrd.img")
    assert _arg(new, "-append") == HARNESS_APPEND
    assert json.loads((rd / "qemu.argv.json").read_text()) == new
    assert f"booting the guest's default kernel {NEW}" in capsys.readouterr().err


def test_grub_saved_entry_boots_the_pinned_older_kernel_with_its_arguments(vm, tmp_path, capsys):
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path, _fixture("debian12-grub-saved-iommu.cfg"), _fixture("debian12-grubenv-saved"))
    new = vm.boot_entry(rd, _qemu(rd))
    assert (rd / "boot" / "grub-vmlinuz").read_text() == f"kernel {OLD}\n"
    assert (rd / "boot" / "grub-initrd.img").read_text() == f"initrd {OLD}\n"
    assert _arg(new, "-kernel") == str(rd / "boot" / "grub-vmlinuz")
    assert _arg(new, "-initrd") == str(rd / "boot" / "grub-initrd.img")
    # GRUB's BOOT_IMAGE, the entry's words (less quiet), then the harness's, which win (rw after ro)
    assert _arg(new, "-append") == f"BOOT_IMAGE=/boot/vmlinuz-{OLD} root=/dev/vda ro iommu=pt {HARNESS_APPEND}"
    err = capsys.readouterr().err
    assert f"booting the guest's default kernel {OLD}" in err
    assert "Advanced options for Debian GNU/Linux > Debian GNU/Linux, with Linux " + OLD in err


def test_the_newest_kernel_through_grub_reads_it_through_the_hard_link_tar_wrote(vm, tmp_path):
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path, _fixture("debian12-grub.cfg"))
    listing = subprocess.run(["tar", "-tvf", str(rd / "bootdisk.raw")], capture_output=True, text=True).stdout
    assert f"boot/vmlinuz-{NEW} link to vmlinuz" in listing   # what the test pins: tar -h dedupes
    new = vm.boot_entry(rd, _qemu(rd))
    assert (rd / "boot" / "grub-vmlinuz").read_text() == f"kernel {NEW}\n"
    assert (rd / "boot" / "grub-initrd.img").read_text() == f"initrd {NEW}\n"
    assert _arg(new, "-append") == f"BOOT_IMAGE=/boot/vmlinuz-{NEW} root=/dev/vda ro {HARNESS_APPEND}"


def test_reboots_do_not_pile_up_entry_arguments_and_a_removed_grub_restores_the_line(vm, tmp_path):
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path, _fixture("debian12-grub-saved-iommu.cfg"), _fixture("debian12-grubenv-saved"))
    first = vm.boot_entry(rd, _qemu(rd))
    second = vm.boot_entry(rd, first)           # the supervisor passes the argv it booted last
    assert _arg(second, "-append") == _arg(first, "-append")
    assert _arg(second, "-append").count("iommu=pt") == 1
    _handoff(rd, tmp_path)                       # the guest's GRUB config is gone
    third = vm.boot_entry(rd, second)
    assert _arg(third, "-append") == HARNESS_APPEND
    assert _arg(third, "-kernel") == str(rd / "boot" / "vmlinuz")


def test_grub_variables_and_quiet_stay_off_the_command_line(vm, tmp_path):
    """`$vt_handoff` (Ubuntu's 10_linux) is GRUB's to expand; quiet would blind the stall watch."""
    cfg = _fixture("debian12-grub.cfg").replace("ro  quiet\n", "ro  quiet splash $vt_handoff\n", 1)
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path, cfg)
    new = vm.boot_entry(rd, _qemu(rd))
    assert _arg(new, "-append") == f"BOOT_IMAGE=/boot/vmlinuz-{NEW} root=/dev/vda ro splash {HARNESS_APPEND}"


@pytest.mark.parametrize("cfg,why", [
    ("menuentry 'Debian GNU/Linux' {\n\tlinux\t/boot/vmlinuz-%s root=/dev/vda ro\n" % OLD, "unbalanced braces"),
    ("# nothing generated\n", "no menuentry"),
    ("menuentry 'a' {\n\tlinux\t/boot/vmlinuz-6.1.0-99-amd64 ro\n\tinitrd\t/boot/initrd.img-6.1.0-99-amd64\n}\n",
     "not in the handed-over archive"),
    ("menuentry 'a' {\n\tlinux\t/boot/vmlinuz-%s ro\n}\n" % OLD, "has no initrd line"),
])
def test_a_config_that_cannot_be_booted_falls_back_and_says_why(vm, tmp_path, capsys, cfg, why):
    rd = tmp_path / "run"
    rd.mkdir()
    _handoff(rd, tmp_path, cfg)
    new = vm.boot_entry(rd, _qemu(rd))
    assert _arg(new, "-kernel") == str(rd / "boot" / "vmlinuz")
    assert (rd / "boot" / "vmlinuz").read_text() == f"kernel {NEW}\n"
    assert _arg(new, "-append") == HARNESS_APPEND
    err = capsys.readouterr().err
    assert "guest grub.cfg not used" in err and why in err
    assert f"booting the guest's default kernel {NEW}" in err


def test_no_archive_boots_the_same_kernel_again(vm, tmp_path, capsys):
    rd = tmp_path / "run"
    rd.mkdir()
    with open(rd / "bootdisk.raw", "wb") as f:
        f.truncate(1 << 20)
    qemu = _qemu(rd)
    assert vm.boot_entry(rd, qemu) == qemu
    assert "no kernel handed over at shutdown" in capsys.readouterr().err
