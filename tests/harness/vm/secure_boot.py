"""UEFI Secure Boot for the VM test tier: Debian's firmware and signed boot chain.

A node started with `vm.py start --secure-boot` boots as a Secure Boot server does:
OVMF's Secure Boot build (`OVMF_CODE_4M.secboot.fd`, SMM on) with a copy of the
variable store that has Microsoft's keys enrolled and Secure Boot on
(`OVMF_VARS_4M.ms.fd`, Debian package `ovmf`), then Debian's shim signed by
Microsoft (`shim-signed`), Debian's GRUB signed by Debian (`grub-efi-amd64-signed`,
verified by shim) and the guest's own Debian kernel (`linux-image-*-amd64`, signed,
verified by GRUB through shim). That kernel locks itself down ("Kernel is locked
down from EFI Secure Boot") and refuses every module not signed by a key it
trusts: its own build key, the firmware's db, and the MOKs shim hands over
(MokListRT, the machine keyring).

The three packages are fetched with `apt-get download` from Debian's mirror (the
only reachable one) and unpacked into the cache with `dpkg-deb -x`: nothing is
installed on the host, whose own boot loader stays untouched.

The EFI system partition is a FAT image made in the run directory with mtools
(mkfs.vfat, mmd, mcopy: no loop mount): shim as the removable-media path
EFI/BOOT/BOOTX64.EFI, GRUB and MokManager beside it, and a grub.cfg that hands
over to the guest's own /boot/grub/grub.cfg when the guest has one, as the grub.cfg
Debian's installer puts on the ESP does (`configfile` of the menu update-grub writes:
its entries, their command lines, grubenv's one-shot next_entry), and otherwise
boots the root file system's /vmlinuz and /initrd.img links (the guest's newest
kernel, as Debian's kernel packages keep them) with the harness's kernel command
line. The image, made for direct kernel boot, has no GRUB configuration; the
secureboot scenario writes one (its prepare.yml), with the harness's command line in
GRUB_CMDLINE_LINUX, so that kernel arguments the toolkit adds through update-grub
reach the kernel on this machine as they would on a server.

The "admin's enrolment" of a certificate is done into the VM's variable store
while it is off (`enrol_mok`): the certificate is added to MokList with
virt-firmware's virt-fw-vars (PyPI, requirements-test.txt), and a pending `mokutil
--import` request (MokNew, MokAuth) is dropped, as MokManager does once it has
enrolled. Shim mirrors MokList into MokListRT at the next boot.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# shim-helpers-amd64-signed: MokManager (mmx64.efi), signed by Debian
PACKAGES = ("ovmf", "shim-signed", "shim-helpers-amd64-signed", "grub-efi-amd64-signed")
# in the unpacked packages
FIRMWARE_CODE = "usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
FIRMWARE_VARS = "usr/share/OVMF/OVMF_VARS_4M.ms.fd"
SHIM = "usr/lib/shim/shimx64.efi.signed"
MOKMANAGER = "usr/lib/shim/mmx64.efi.signed"
GRUB = "usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
# shim's vendor GUID, the owner of MokList entries (shim's MokManager.c SHIM_LOCK_GUID)
SHIM_LOCK_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
ESP_KIB = 64 * 1024


class SecureBootError(RuntimeError):
    """What the harness cannot do, and what to do about it."""


def log(msg: str) -> None:
    print(f"[secure-boot] {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)
    except FileNotFoundError as e:
        raise SecureBootError(f"{argv[0]} not found: scripts/setup.sh installs it") from e
    except subprocess.CalledProcessError as e:
        raise SecureBootError(f"{' '.join(argv)} failed (rc {e.returncode}): {e.stderr.strip()[-600:]}") from e


def candidate_versions() -> dict[str, str]:
    """The versions `apt-get download` would fetch now (the cache key)."""
    out = _run(["apt-cache", "policy", *PACKAGES]).stdout
    versions, pkg = {}, None
    for line in out.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            pkg = line.rstrip()[:-1]
        elif pkg and line.strip().startswith("Candidate:"):
            versions[pkg] = line.split(":", 1)[1].strip()
    missing = [p for p in PACKAGES if versions.get(p) in (None, "(none)")]
    if missing:
        raise SecureBootError(f"apt knows no candidate for {missing}: run `apt-get update` (scripts/setup.sh does)")
    return versions


def boot_chain(cache: Path) -> Path:
    """The unpacked firmware and signed boot chain, fetched once per package versions."""
    versions = candidate_versions()
    key = hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]
    dest = cache / "secure-boot" / key
    if all((dest / f).is_file() for f in (FIRMWARE_CODE, FIRMWARE_VARS, SHIM, MOKMANAGER, GRUB)):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".tmp-") as tmp:
        debs, root = Path(tmp) / "debs", Path(tmp) / "root"
        debs.mkdir()
        _run(["apt-get", "download", *(f"{p}={v}" for p, v in versions.items())], cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(root)])
        lacking = [f for f in (FIRMWARE_CODE, FIRMWARE_VARS, SHIM, MOKMANAGER, GRUB) if not (root / f).is_file()]
        if lacking:
            raise SecureBootError(f"the packages {versions} do not hold {lacking}")
        (root / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        root.rename(dest)
    log(f"boot chain {versions} unpacked into {dest}")
    return dest


def grub_cfg(append: str) -> str:
    """GRUB's configuration on the ESP: the guest's own GRUB menu when it has one, else
    the root file system's newest kernel with the harness's command line."""
    return "\n".join([
        "# tests/harness/vm/secure_boot.py: the guest's /boot/grub/grub.cfg when there is one,",
        "# else the root file system's /vmlinuz and /initrd.img",
        "set timeout=0",
        "serial --unit=0 --speed=115200",
        "terminal_input serial console",
        "terminal_output serial console",
        # only the root file system has /vmlinuz (the ESP and the handoff disk do not)
        "search --no-floppy --file --set=root /vmlinuz",
        # what Debian's ESP grub.cfg does: the menu update-grub wrote, grubenv beside it
        "if [ -f /boot/grub/grub.cfg ]; then",
        "  set prefix=($root)/boot/grub",
        "  configfile $prefix/grub.cfg",
        "fi",
        f"linux /vmlinuz {append}",
        "initrd /initrd.img",
        "boot",
        "",
    ])


def make_esp(path: Path, chain: Path, append: str) -> None:
    """A FAT EFI system partition image: shim as the removable-media boot path, GRUB and MokManager beside it."""
    path.unlink(missing_ok=True)
    _run(["mkfs.vfat", "-C", "-n", "ESP", str(path), str(ESP_KIB)])
    img = ["-i", str(path)]
    _run(["mmd", *img, "::/EFI", "::/EFI/BOOT", "::/EFI/debian"])
    cfg = path.with_name("esp-grub.cfg")
    cfg.write_text(grub_cfg(append))
    for src, dst in ((chain / SHIM, "::/EFI/BOOT/BOOTX64.EFI"), (chain / GRUB, "::/EFI/BOOT/grubx64.efi"),
                     (chain / MOKMANAGER, "::/EFI/BOOT/mmx64.efi"),
                     # Debian's GRUB reads its configuration from its own directory or /EFI/debian
                     (cfg, "::/EFI/BOOT/grub.cfg"), (cfg, "::/EFI/debian/grub.cfg")):
        _run(["mcopy", *img, str(src), dst])


def qemu_args(rd: Path, chain: Path, append: str) -> list[str]:
    """Firmware, variable store and ESP for qemu; the variable store is the run's own
    copy (the machine's NVRAM: it keeps enrolled MOKs across reboots)."""
    vars_fd = rd / "efivars.fd"
    if not vars_fd.exists():
        shutil.copyfile(chain / FIRMWARE_VARS, vars_fd)
    esp = rd / "esp.img"
    make_esp(esp, chain, append)
    return [
        # Secure Boot's variable store is only writable from SMM
        "-global", "driver=cfi.pflash01,property=secure,value=on",
        "-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={chain / FIRMWARE_CODE}",
        "-drive", f"if=pflash,format=raw,unit=1,file={vars_fd}",
        "-drive", f"file={esp},if=none,id=esp0,format=raw,cache=unsafe",
        "-device", "virtio-blk-pci,drive=esp0,bus=pcie.0,addr=0x7,bootindex=0",
    ]


def virt_fw_vars() -> str:
    tool = Path(sys.executable).parent / "virt-fw-vars"
    if not tool.exists():
        found = shutil.which("virt-fw-vars")
        if not found:
            raise SecureBootError("virt-fw-vars not found: it comes with virt-firmware (requirements-test.txt, scripts/setup.sh)")
        return found
    return str(tool)


def variable_names(vars_fd: Path) -> list[str]:
    """The names of the variables in an edk2 variable store."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        _run([virt_fw_vars(), "--input", str(vars_fd), "--output-json", out.name])
        return [v.get("name", "") for v in json.loads(Path(out.name).read_text()).get("variables", [])]


def enrol_mok(vars_fd: Path, cert: Path) -> str:
    """Enrol CERT (PEM or DER) as a MOK in the (powered-off) machine's variable store and
    drop a pending `mokutil --import` request (MokNew, MokAuth), as MokManager does once
    it has enrolled at the console. Returns what was done, for the log."""
    pending = [n for n in ("MokNew", "MokAuth") if n in variable_names(vars_fd)]
    argv = [virt_fw_vars(), "--inplace", str(vars_fd), "--add-mok", SHIM_LOCK_GUID, str(cert)]
    for name in pending:
        argv += ["--delete", name]
    _run(argv)
    if "MokList" not in variable_names(vars_fd):
        raise SecureBootError(f"virt-fw-vars wrote no MokList into {vars_fd}")
    return f"{cert} added to MokList" + (f"; pending request {', '.join(pending)} dropped" if pending else "")
