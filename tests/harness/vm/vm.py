#!/usr/bin/env python3
"""Start, wait for, stop and list the qemu test nodes of the VM test tier.

Python 3 standard library only. One run directory per VM holds its qcow2
overlay (backed by the pristine image from build-image.sh), the serial log,
qemu's own log, the pidfiles, the monitor socket and info.json.

Reboots are cold by default: qemu runs with -no-reboot under a small
supervisor process (`vm.py _supervise`), and when the guest asks for a reboot
("reboot: Restarting system" on the serial console) the supervisor starts a
fresh qemu on the same overlay. Under TCG a fresh qemu boots the guest 2-3x
faster than qemu's in-process reset (measured: 105 s vs 249 s to ssh on a
loaded 2-core host). A guest power-off or panic ends the VM. --warm-reboot
keeps qemu's own reset.

    vm.py start NAME --ssh-port P [--pair-net PORT --pair-role listen|connect|mcast
                                   --pair-mac MAC [--pair-ip ADDR/PREFIX]] [--mem 2048]
    vm.py wait-ssh NAME [--timeout 600]
    vm.py info NAME           # molecule instance_config entry as JSON
    vm.py ssh NAME [CMD...]
    vm.py stop NAME [--keep]  # --keep leaves the run dir (serial log) behind
    vm.py save NAME --to SAVED [--boot]  # power the guest off, keep its disk as
                              # <cache>/vm/saved/SAVED; --boot: then boot a copy of it
    vm.py start NAME ... --from-saved SAVED   # boot a copy of it (when still valid)
    vm.py start NAME ... --secure-boot   # UEFI Secure Boot: OVMF, shim, GRUB (secure_boot.py)
    vm.py start NAME ... --intel-iommu   # an emulated Intel IOMMU, intel_iommu=on: Linux turns ACS on
    vm.py enrol-mok NAME --cert FILE     # power off, enrol FILE as a MOK in the firmware, boot
    vm.py status

Saved disks let one converge serve two scenarios: the `rdma` scenario saves its
converged, verified node and the `kernel_update` scenario starts from it instead
of converging again. A saved disk is used only while the toolkit's code and the
test node's recipe (CONVERGE_INPUTS) and the image are what they were when it
was saved; otherwise `start` says why and boots the pristine image.

Secure Boot (--secure-boot) replaces the direct kernel boot with the firmware
chain of a Secure Boot server: Debian's OVMF with Microsoft's keys, shim, GRUB,
then the root file system's /vmlinuz with the harness's command line; see
secure_boot.py. Reboots stay cold restarts of qemu on the same disk and the same
variable store, which `enrol-mok` edits while the guest is off (the console
enrolment an admin does in MokManager).

An IOMMU (--intel-iommu, the secureboot scenario only) puts qemu's emulated Intel
IOMMU (-device intel-iommu, before every other device, as qemu wants it) in the
machine and intel_iommu=on on the harness's command line. Linux then turns ACS on
at the PCIe root ports itself, at enumeration, with no user-space write (which
kernel lockdown would refuse): see with_intel_iommu. Without the option the qemu
command line is what it was.

Acceleration: --accel auto|tcg|kvm (or GPUDIRECT_VM_ACCEL). auto runs a short
probe boot under KVM once per (kernel, qemu) pair and caches the verdict; on
the CI machines KVM hangs a stock Debian kernel, so auto ends up on TCG.
Under TCG the guest CPU is qemu64 (GPUDIRECT_VM_CPU names another model):
with `max`, qemu emulates every feature it knows and the guest's kernel and
libraries use them; the same saved node, 1 vCPU, nothing else running
(2026-11-29): boot to ssh 41 s with max, 35 s with qemu64; 300 fork+exec of
/bin/true 10.0-11.1 s against 8.2 s; python-apt's cache 4.9-5.3 s against 4.4 s;
update-initramfs 55-58 s against 53 s. Under KVM it is the host's CPU.

Environment: GPUDIRECT_CACHE (cache root), GPUDIRECT_VM_STATE (run dirs,
default <cache>/vm/runs), GPUDIRECT_VM_IMAGE (image dir; default: whatever
build-image.sh prints, building it if needed), GPUDIRECT_VM_SAVED_ANY_CODE=1
(start --from-saved takes a saved disk that other toolkit code converged, and
says so: a developer re-runs the later steps of a scenario in minutes),
GPUDIRECT_VM_SMP (vCPUs of a VM started without --smp; default 2). Under TCG a
guest with more vCPUs than the host has cores to spare loses time: a vCPU that
waits on another one (a TLB shootdown, a spinlock) spins while the host runs
something else. scripts/test.sh starts every VM with 1 vCPU
(benchmarks/suite-time.md has the measurement).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import shlex
import signal
import tarfile
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("GPUDIRECT_CACHE") or Path.home() / ".cache" / "gpudirect-rdma") / "vm"
QEMU = os.environ.get("GPUDIRECT_QEMU", "qemu-system-x86_64")
# multicast group of --pair-role mcast (the port, --pair-net, tells segments apart)
PAIR_MCAST_GROUP = "230.0.0.1"
PROJECT = HERE.parents[2]
# What a converged test node is made of: a saved disk is valid only while these
# files are unchanged (their content is hashed; see code_stamp).
CONVERGE_INPUTS = ("site.yml", "ansible.cfg", "playbooks", "roles", "library", "module_utils", "plugin_utils",
                   "filter_plugins", "inventory/testnode", "molecule/rdma", "molecule/resources",
                   "tests/harness/standin_repo", "tests/harness/vm")
# how long wait-ssh waits for the guest's boot to be over once ssh answers (boot_finished)
BOOT_WAIT_S = 180
BOOTDISK_BYTES = 256 * 1024 * 1024  # sparse; holds one kernel + initramfs as a tar archive
SSH_OPTS = [
    "-o", "BatchMode=yes",
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR",
    "-o", "ConnectTimeout=10",
]


def sibling(name: str):
    """A module of this directory (grub_menu.py, secure_boot.py), imported on first use."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return importlib.import_module(name)


def log(msg: str) -> None:
    print(f"[vm] {msg}", file=sys.stderr, flush=True)


def ensure_debian_slim(img: Path) -> None:
    """An image whose apt source is the harness's slim Debian repository (build-image.sh
    writes its port to debian-slim-port) boots guests whose apt needs it served: start
    debian_mirror.py when nothing serves that port yet (create.yml starts it first; this
    covers a VM started by hand or by a script)."""
    marker = img / "debian-slim-port"
    if not marker.is_file():
        return
    port = marker.read_text().strip()
    tool = [sys.executable, str(HERE / "debian_mirror.py")]
    if subprocess.call(tool + ["status", "--port", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        return
    log(f"starting the slim Debian repository on 127.0.0.1:{port}, the image's apt source (debian_mirror.py)")
    if subprocess.call(tool + ["start", "--port", port, "--image", str(img)], stdout=subprocess.DEVNULL) != 0:
        log(f"WARNING: the slim Debian repository did not start: apt in the guest will fail "
            f"(python3 {HERE / 'debian_mirror.py'} start --port {port})")


def default_smp() -> int:
    """vCPUs of a VM started without --smp: GPUDIRECT_VM_SMP, else 2."""
    raw = os.environ.get("GPUDIRECT_VM_SMP", "").strip()
    if not raw:
        return 2
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise SystemExit(f"GPUDIRECT_VM_SMP={raw!r}: give the number of vCPUs per VM, 1 to 64 "
                         "(unset it for the default, 2)")
    return int(raw)


def state_root(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or os.environ.get("GPUDIRECT_VM_STATE") or CACHE / "runs")


def run_dir(args: argparse.Namespace, name: str) -> Path:
    return state_root(args) / name


def image_dir(args: argparse.Namespace) -> Path:
    explicit = args.image or os.environ.get("GPUDIRECT_VM_IMAGE")
    if explicit:
        return Path(explicit)
    out = subprocess.run([str(HERE / "build-image.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def read_pid(rd: Path, which: str = "qemu") -> int | None:
    try:
        return int((rd / f"{which}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def vm_alive(rd: Path) -> bool:
    """The VM runs while its supervisor (or, with --warm-reboot, its qemu) does."""
    return pid_alive(read_pid(rd, "supervisor")) or pid_alive(read_pid(rd))


def load_info(rd: Path) -> dict:
    return json.loads((rd / "info.json").read_text())


def mac_for(name: str, salt: str) -> str:
    h = hashlib.sha256(f"{salt}:{name}".encode()).digest()
    return "52:54:00:%02x:%02x:%02x" % (h[0], h[1], h[2])


# ---------------------------------------------------------------- accel probe
KVM_DEVICE = "/dev/kvm"
# a kernel that boots under KVM reaches its initramfs in 1-2 s; one that hangs in its
# decompressor (kvm_pvm with a stock Debian kernel) prints nothing more
KVM_PROBE_TIMEOUT_S = 20


def kvm_boots(img: Path) -> bool:
    """Boot the image's kernel under KVM for a few seconds: does it reach userspace?"""
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return False
    kver = (img / "kernel-release").read_text().strip()
    qver = subprocess.run([QEMU, "--version"], stdout=subprocess.PIPE, text=True).stdout.splitlines()[0]
    verdict_file = CACHE / "kvm-probe.json"
    key = f"{kver}|{qver}"
    try:
        cached = json.loads(verdict_file.read_text())
        if key in cached:
            return bool(cached[key])
    except (OSError, ValueError):
        cached = {}
    t0 = time.monotonic()
    # rdinit that does not exist -> kernel panics right after "Run /init"-stage: that line
    # (or the panic) proves the kernel got through early boot under KVM.
    cmd = [QEMU, "-machine", "q35", "-accel", "kvm", "-cpu", "host", "-smp", "1", "-m", "512",
           "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
           "-kernel", str(img / "vmlinuz"), "-initrd", str(img / "initrd.img"),
           "-append", "console=ttyS0 panic=-1 rdinit=/gpudirect-kvm-probe"]
    ok = False
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=KVM_PROBE_TIMEOUT_S)
        text = p.stdout.decode(errors="replace")
        ok = "Kernel panic" in text or "Run /" in text or "Freeing unused kernel" in text
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace")
        ok = "Freeing unused kernel" in text
    log(f"kvm probe: {'boots' if ok else 'does not boot'} ({time.monotonic() - t0:.0f} s, cached in {verdict_file})")
    cached[key] = ok
    verdict_file.parent.mkdir(parents=True, exist_ok=True)
    verdict_file.write_text(json.dumps(cached, indent=1))
    return ok


def choose_accel(args: argparse.Namespace, img: Path) -> str:
    want = args.accel or os.environ.get("GPUDIRECT_VM_ACCEL", "auto")
    if want in ("tcg", "kvm"):
        return want
    return "kvm" if kvm_boots(img) else "tcg"


# ---------------------------------------------------------------- saved disks
def code_stamp() -> str:
    """sha256 over the path and content of every file in CONVERGE_INPUTS, less
    what cannot change a node: documentation (*.md), test code (tests/ below
    an input) and Python caches."""
    h = hashlib.sha256()
    for top in CONVERGE_INPUTS:
        base = PROJECT / top
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*")
            if p.is_file() and p.suffix != ".md"
            and not {"tests", "__pycache__", ".pytest_cache"} & set(p.relative_to(base).parts))
        for f in files:
            h.update(str(f.relative_to(PROJECT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def saved_dir(name: str) -> Path:
    return CACHE / "saved" / name


def saved_disk_problem(saved: Path, img: Path) -> str | None:
    """Why the saved disk cannot be used now, or None when it can."""
    try:
        meta = json.loads((saved / "saved.json").read_text())
    except (OSError, ValueError):
        return f"no saved disk at {saved}"
    if meta.get("image") != str(img):
        return f"saved on image {meta.get('image')}, now {img}"
    now = code_stamp()
    if meta.get("code_stamp") != now:
        why = f"saved for other code (stamp {str(meta.get('code_stamp'))[:12]}, now {now[:12]})"
        if os.environ.get("GPUDIRECT_VM_SAVED_ANY_CODE") == "1":
            # a developer trying a change to a later step of a scenario: the node was
            # converged by the code before the change, which is said, never hidden
            log(f"using saved disk {saved.name} although it was {why}: GPUDIRECT_VM_SAVED_ANY_CODE=1")
            return None
        return why
    return None


# ---------------------------------------------------------------- commands
def pair_netdev(role: str, port: int) -> str:
    """qemu -netdev of the pair NIC: listen/connect link two VMs over TCP on 127.0.0.1:PORT;
    mcast puts every VM started with PORT on one L2 segment (each qemu joins the multicast
    group on the host's loopback interface)."""
    if role == "mcast":
        return f"socket,id=net1,mcast={PAIR_MCAST_GROUP}:{port},localaddr=127.0.0.1"
    return f"socket,id=net1,{'listen' if role == 'listen' else 'connect'}=127.0.0.1:{port}"


def cmd_start(args: argparse.Namespace) -> int:
    rd = run_dir(args, args.name)
    if rd.exists() and vm_alive(rd):
        log(f"{args.name}: already running (pid {read_pid(rd)})")
        print(json.dumps(instance_config(args.name, load_info(rd))))
        return 0
    t0 = time.monotonic()
    if getattr(args, "smp", None) is None:
        args.smp = default_smp()
    img = image_dir(args)
    if rd.exists():
        shutil.rmtree(rd)   # stale run: a fresh overlay, as every run starts from the pristine image
    rd.mkdir(parents=True)
    accel = choose_accel(args, img)
    ensure_debian_slim(img)

    overlay = rd / "disk.qcow2"
    from_saved = None
    if args.from_saved:
        saved = saved_dir(args.from_saved)
        problem = saved_disk_problem(saved, img)
        if problem:
            log(f"{args.name}: not starting from saved disk {args.from_saved}: {problem}; booting the pristine image")
        else:
            from_saved = saved
    # the overlay's backing file: the saved disk (which stays as it was for the
    # next run) or the pristine image
    backing_fmt, backing = ("qcow2", from_saved / "disk.qcow2") if from_saved else ("raw", img / "rootfs.img")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", backing_fmt,
                    "-b", str(backing), str(overlay)], check=True)
    if from_saved:
        shutil.copyfile(from_saved / "bootdisk.raw", rd / "bootdisk.raw")
    else:
        # boot loader stand-in: the guest writes its default kernel here at shutdown
        # (gpudirect-boot-handoff in build-image.sh); the supervisor boots from it
        with open(rd / "bootdisk.raw", "wb") as f:
            f.truncate(BOOTDISK_BYTES)

    append = ["console=ttyS0,115200", "root=/dev/vda", "rw", "mitigations=off",
              f"systemd.hostname={args.name}", "net.ifnames=1", "panic=-1",
              # drivers for emulated odds and ends nobody tests; each costs seconds under TCG
              "modprobe.blacklist=kvm,kvm_amd,kvm_intel,iTCO_wdt,iTCO_vendor_support,pcspkr,"
              "psmouse,ccp,powernow_k8,acpi_cpufreq,intel_pmc_bxt"]
    if args.pair_net:
        if not args.pair_mac:
            args.pair_mac = mac_for(args.name, "pair")
        if args.pair_ip:
            append.append(f"gpudirect.pairnet={args.pair_mac},{args.pair_ip}")
    if args.intel_iommu:
        append.append(INTEL_IOMMU_ARG)
    append += args.append or []

    accel_opt = "kvm" if accel == "kvm" else "tcg,thread=multi"
    cpu = "host" if accel == "kvm" else os.environ.get("GPUDIRECT_VM_CPU", "qemu64")
    main_mac = args.mac or mac_for(args.name, "main")
    qemu = [
        QEMU, "-name", args.name, "-no-user-config", "-nodefaults",
        "-machine", "q35", "-accel", accel_opt, "-cpu", cpu,
        "-smp", str(args.smp), "-m", str(args.mem),
        "-display", "none", "-vga", "none",
        "-kernel", str(img / "vmlinuz"), "-initrd", str(img / "initrd.img"),
        "-append", " ".join(append),
        "-drive", f"file={overlay},if=none,id=disk0,format=qcow2,cache=unsafe,discard=unmap",
        "-device", "virtio-blk-pci,drive=disk0,bus=pcie.0,addr=0x3",
        "-drive", f"file={rd / 'bootdisk.raw'},if=none,id=boot0,format=raw,cache=unsafe",
        "-device", "virtio-blk-pci,drive=boot0,bus=pcie.0,addr=0x6,serial=gpudirect-boot",
        # main NIC behind its own PCIe root port: the port carries an ACS capability,
        # so the NIC's upstream path looks like a server's GPU/NIC path
        "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x4",
        "-netdev", f"user,id=net0,hostfwd=tcp:127.0.0.1:{args.ssh_port}-:22",
        "-device", f"virtio-net-pci,netdev=net0,bus=rp1,mac={main_mac}",
        # append: a cold reboot starts a new qemu and must not truncate the log
        "-chardev", f"file,id=serial0,path={rd / 'serial.log'},append=on",
        "-serial", "chardev:serial0",
        "-monitor", f"unix:{rd / 'monitor.sock'},server=on,wait=off",
        "-pidfile", str(rd / "qemu.pid"),
    ]
    if args.warm_reboot:
        qemu += ["-daemonize"]
    else:
        qemu += ["-no-reboot"]
    if args.pair_net:
        qemu += [
            "-device", "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2,addr=0x5",
            "-netdev", pair_netdev(args.pair_role, args.pair_net),
            "-device", f"virtio-net-pci,netdev=net1,bus=rp2,mac={args.pair_mac}",
        ]
    if args.intel_iommu:
        qemu = with_intel_iommu(qemu)
    if args.secure_boot:
        if args.warm_reboot:
            log(f"{args.name}: --secure-boot runs with cold reboots only (enrol-mok restarts qemu)")
            return 1
        qemu = secure_boot_qemu(rd, qemu)
    (rd / "qemu.argv.json").write_text(json.dumps(qemu))
    if from_saved:
        # the saved guest's default boot kernel, as it handed it over at power-off
        qemu = boot_entry(rd, qemu)
        log(f"{args.name}: starting from saved disk {from_saved}")
    (rd / "qemu.cmdline").write_text(shlex.join(qemu) + "\n")
    if args.warm_reboot:
        with open(rd / "qemu.log", "w") as qlog:
            p = subprocess.run(qemu, stdout=qlog, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            log(f"{args.name}: qemu failed to start (rc {p.returncode}):\n{(rd / 'qemu.log').read_text()}")
            return 1
    elif not launch_supervisor(rd, args.name):
        return 1
    info = {
        "name": args.name, "ssh_port": args.ssh_port, "accel": accel,
        "image": str(img), "identity_file": str(img / "id_ed25519"),
        "main_mac": main_mac, "pair_mac": args.pair_mac, "pair_ip": args.pair_ip,
        "pair_net": args.pair_net, "pair_role": args.pair_role,
        "started_at": time.time(), "mem": args.mem, "smp": args.smp,
        "reboot": "warm" if args.warm_reboot else "cold",
        "from_saved": str(from_saved) if from_saved else None,
        "secure_boot": bool(args.secure_boot),
        "intel_iommu": bool(args.intel_iommu),
    }
    (rd / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"{args.name}: started pid {read_pid(rd)} accel={accel} smp={args.smp} ssh=127.0.0.1:{args.ssh_port} "
        f"run dir {rd} ({time.monotonic() - t0:.1f} s)")
    print(json.dumps(instance_config(args.name, info)))
    return 0


def launch_supervisor(rd: Path, name: str, mode: str = "w") -> bool:
    """Start `vm.py _supervise` (which runs qemu.argv.json) detached; False when qemu died at once."""
    with open(rd / "qemu.log", mode) as qlog:
        sup = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "_supervise", str(rd)],
            stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)
    (rd / "supervisor.pid").write_text(f"{sup.pid}\n")
    # qemu fails fast on bad options: give it a moment, then look
    for _ in range(30):
        time.sleep(0.1)
        if sup.poll() is not None:
            log(f"{name}: qemu failed to start:\n{(rd / 'qemu.log').read_text()}")
            return False
        if pid_alive(read_pid(rd)):
            break
    return True


# the kernel's switch for the Intel IOMMU (drivers/iommu/intel/iommu.c intel_iommu_setup)
INTEL_IOMMU_ARG = "intel_iommu=on"


def with_intel_iommu(qemu: list[str]) -> list[str]:
    """The qemu command line with an emulated Intel IOMMU, placed before the first -device
    (qemu wants it before the devices it serves: a device's DMA address space is set when
    the device is created); the caller puts INTEL_IOMMU_ARG on the kernel command line.

    Why this turns ACS on (Debian's linux-source-6.1 6.1.192-3, the VM's 6.1 kernel): at boot
    arch/x86/kernel/pci-dma.c pci_iommu_alloc calls drivers/iommu/intel/dmar.c
    detect_intel_iommu, which finds the DMAR table and, with the IOMMU wanted (intel_iommu=on
    clears dmar_disabled: iommu.c intel_iommu_setup; dmar.c dmar_required), calls
    pci_request_acs ("Make sure ACS will be enabled"). PCI enumeration comes later:
    drivers/pci/probe.c pci_init_capabilities -> drivers/pci/pci.c pci_acs_init ->
    pci_enable_acs -> pci_std_enable_acs sets SrcValid, ReqRedir, CmpltRedir and UpstreamFwd
    where ACSCap has them (TransBlk only on external-facing or untrusted ports), then
    pci_disable_acs_redir clears ReqRedir, CmpltRedir and EgressCtrl on the devices named in
    pci=disable_acs_redir=. These are the kernel's own configuration writes, which lockdown
    (LOCKDOWN_PCI_ACCESS, user space only) does not refuse. qemu's pcie-root-port implements
    SrcValid TransBlk ReqRedir CmpltRedir UpstreamFwd DirectTrans, so its ACSCtl reads 0x001d."""
    first = qemu.index("-device")
    return qemu[:first] + ["-device", "intel-iommu"] + qemu[first:]


def secure_boot_qemu(rd: Path, qemu: list[str]) -> list[str]:
    """The qemu command line of a Secure Boot machine: SMM on, the firmware, its variable
    store and the ESP (secure_boot.py) in place of -kernel/-initrd/-append, whose
    command line goes into the ESP's grub.cfg; the root disk second in the boot order."""
    secure_boot = sibling("secure_boot")

    append = qemu[qemu.index("-append") + 1]
    new = []
    skip = False
    for i, a in enumerate(qemu):
        if skip:
            skip = False
            continue
        if a in ("-kernel", "-initrd", "-append"):
            skip = True
            continue
        if i and qemu[i - 1] == "-machine":
            a += ",smm=on"
        if a.startswith("virtio-blk-pci,drive=disk0,"):
            a += ",bootindex=1"
        new.append(a)
    try:
        chain = secure_boot.boot_chain(CACHE)
        return new + secure_boot.qemu_args(rd, chain, append)
    except secure_boot.SecureBootError as e:
        log(f"secure boot: {e}")
        raise SystemExit(1) from e


def power_off(rd: Path, info: dict, timeout: int) -> bool:
    """Ask a running guest to power off and wait until qemu (and its supervisor) are
    gone; False, saying why, when it is not running or does not go."""
    if not vm_alive(rd):
        log(f"{info['name']}: not running")
        return False
    t0 = time.monotonic()
    subprocess.run(ssh_cmd(info, "systemctl", "poweroff"), stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
    while vm_alive(rd) or pid_alive(read_pid(rd, "supervisor")):
        if time.monotonic() - t0 > timeout:
            log(f"{info['name']}: still running {timeout} s after poweroff; serial log tail:\n{tail(rd / 'serial.log')}")
            return False
        time.sleep(1)
    return True


def cmd_enrol_mok(args: argparse.Namespace) -> int:
    """The admin's MOK enrolment at the console, done into the firmware's variable store:
    power the guest off, add the certificate to MokList, boot again."""
    rd = run_dir(args, args.name)
    info = load_info(rd)
    if not info.get("secure_boot"):
        log(f"{args.name}: not started with --secure-boot: no firmware variable store to enrol into")
        return 1
    t0 = time.monotonic()
    if not power_off(rd, info, args.timeout):
        return 1
    secure_boot = sibling("secure_boot")
    try:
        done = secure_boot.enrol_mok(rd / "efivars.fd", Path(args.cert))
    except secure_boot.SecureBootError as e:
        log(f"{args.name}: enrolment failed: {e}")
        return 1
    log(f"{args.name}: powered off after {time.monotonic() - t0:.0f} s; {done}")
    info["started_at"] = time.time()
    (rd / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    if not launch_supervisor(rd, args.name, mode="a"):
        return 1
    log(f"{args.name}: booting again (pid {read_pid(rd)})")
    return 0


def instance_config(name: str, info: dict) -> dict:
    return {"instance": name, "address": "127.0.0.1", "user": "root",
            "port": str(info["ssh_port"]), "identity_file": info["identity_file"]}


def ssh_cmd(info: dict, *remote: str) -> list[str]:
    return ["ssh", *SSH_OPTS, "-i", info["identity_file"], "-p", str(info["ssh_port"]),
            "root@127.0.0.1", *remote]


def boot_finished(info: dict, deadline: float) -> bool:
    """True once the guest's systemd says its boot is over (``systemctl is-system-running
    --wait`` returns: running, or degraded when a unit failed, which the scenario's own
    checks judge) and ssh still answers after it. False when a connection failed on the
    way: the caller tries again until its deadline."""
    # a unit that never finishes starting must not cost the whole deadline: after
    # BOOT_WAIT_S the boot counts as over if ssh still answers
    wait = max(5, min(BOOT_WAIT_S, int(deadline - time.monotonic())))
    try:
        r = subprocess.run(ssh_cmd(info, "systemctl", "is-system-running", "--wait"), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=wait)
        if r.returncode == 255:  # ssh itself failed: the connection, not the state
            return False
    except subprocess.TimeoutExpired:
        log(f"{info.get('name', 'the VM')}: its boot was not over after {wait} s (systemctl is-system-running "
            "--wait); going on while ssh answers")
    try:
        again = subprocess.run(ssh_cmd(info, "true"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return again.returncode == 0


def cmd_wait_ssh(args: argparse.Namespace) -> int:
    rd = run_dir(args, args.name)
    info = load_info(rd)
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    while time.monotonic() < deadline:
        if not vm_alive(rd):
            log(f"{args.name}: qemu is gone; serial log tail:\n{tail(rd / 'serial.log')}")
            return 1
        try:
            with socket.create_connection(("127.0.0.1", info["ssh_port"]), timeout=3):
                pass
            r = subprocess.run(ssh_cmd(info, "true"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30)
            if r.returncode == 0 and not boot_finished(info, deadline):
                # sshd answered before the boot was over, and a unit started later closed
                # the next connection: seen as "kex_exchange_identification: Connection
                # closed by remote host" on the first task after a boot from a saved disk
                time.sleep(2)
                continue
            if r.returncode == 0:
                since_start = time.time() - info["started_at"]
                log(f"{args.name}: ssh answers after {since_start:.0f} s from start "
                    f"(waited {time.monotonic() - t0:.0f} s, accel={info['accel']})")
                return 0
        except (OSError, subprocess.TimeoutExpired):
            pass
        time.sleep(2)
    log(f"{args.name}: no ssh after {args.timeout} s; serial log tail:\n{tail(rd / 'serial.log')}")
    return 1


def tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no serial log)"


def cmd_stop(args: argparse.Namespace) -> int:
    rd = run_dir(args, args.name)
    stopped = []
    # supervisor first, so that it does not start a new qemu; then qemu itself
    for which in ("supervisor", "qemu"):
        pid = read_pid(rd, which)
        if pid_alive(pid):
            terminate(pid)
            stopped.append(f"{which} {pid}")
    if stopped:
        log(f"{args.name}: stopped pid {', '.join(stopped)}")
    else:
        log(f"{args.name}: not running")
    if rd.exists():
        if args.keep:
            (rd / "qemu.pid").unlink(missing_ok=True)
            (rd / "supervisor.pid").unlink(missing_ok=True)
            (rd / "disk.qcow2").unlink(missing_ok=True)
        else:
            shutil.rmtree(rd)
    return 0


def cmd_save(args: argparse.Namespace) -> int:
    """Power the guest off (so it hands over its boot kernel and its disk is
    consistent) and keep disk and boot disk as a saved disk for `start --from-saved`."""
    rd = run_dir(args, args.name)
    info = load_info(rd)
    if args.boot and info.get("secure_boot"):
        log(f"{args.name}: the saved disk has no firmware variable store (enrolled MOKs), so "
            "--boot would not boot the same Secure Boot machine; save it without --boot")
        return 1
    t0 = time.monotonic()
    if not power_off(rd, info, args.timeout):
        return 1
    dest = saved_dir(args.to)
    tmp = dest.parent / f".tmp-{args.to}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in ("disk.qcow2", "bootdisk.raw"):
        shutil.move(str(rd / f), str(tmp / f))
    (tmp / "saved.json").write_text(json.dumps({
        "name": args.name, "image": info["image"], "code_stamp": code_stamp(),
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    log(f"{args.name}: powered off after {time.monotonic() - t0:.0f} s, disk saved as {dest}")
    if not args.boot:
        return 0
    # a power cycle: the same machine (name, ports, memory, NICs, firmware) boots a
    # copy of the disk just saved, which stays as it was for the scenarios after it
    again = argparse.Namespace(
        state_dir=args.state_dir, name=args.name, ssh_port=info["ssh_port"], mem=info["mem"],
        smp=info["smp"], accel=info["accel"], image=info["image"], mac=info["main_mac"],
        pair_net=info["pair_net"], pair_role=info["pair_role"], pair_mac=info["pair_mac"],
        pair_ip=info["pair_ip"], append=None, from_saved=args.to,
        secure_boot=info.get("secure_boot", False), intel_iommu=info.get("intel_iommu", False),
        warm_reboot=info["reboot"] == "warm")
    return cmd_start(again)


def terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        if not pid_alive(pid):
            return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def boot_entry(rd: Path, qemu: list[str]) -> list[str]:
    """The boot loader stand-in: boot the kernel the guest handed over at shutdown.

    The guest's gpudirect-boot-handoff writes a tar (vmlinuz, initrd.img,
    kernel-release) of its default boot kernel onto bootdisk.raw. Without a valid
    archive (first boot, guest crashed) the previous kernel boots again.

    When the archive also holds boot/grub/grub.cfg (the guest has a GRUB
    configuration), the entry GRUB would boot is booted instead: its `linux`
    image and `initrd` from the archive, its `linux` arguments first on the
    command line, then the harness's own words (console, root=/dev/vda rw, ...),
    which win where both set the same thing. The entry's `quiet` is left out:
    the supervisor watches the console for early-boot stalls. A grub.cfg that
    cannot be read, or an entry whose files are not in the archive, falls back
    to the handed-over default kernel with the harness's command line, saying why.
    """
    if "-kernel" not in qemu:
        # --secure-boot: the firmware boots the guest's chain itself
        return qemu
    grub_menu = sibling("grub_menu")

    def say(msg: str) -> None:
        # stderr: `start --from-saved` calls this too, and its stdout is the instance config
        print(f"[supervise] {msg}", file=sys.stderr, flush=True)

    boot = rd / "boot"
    # the harness's own command line, as cmd_start built it (before any entry's arguments)
    base_file = rd / "append.harness"
    if not base_file.exists():
        base_file.write_text(qemu[qemu.index("-append") + 1])
    harness_append = base_file.read_text()
    grub = None
    try:
        with tarfile.open(rd / "bootdisk.raw", "r:") as tar:
            names = set(tar.getnames())
            if not {"vmlinuz", "initrd.img", "kernel-release"} <= names:
                raise tarfile.TarError(f"archive holds {sorted(names)}")
            shutil.rmtree(boot, ignore_errors=True)
            boot.mkdir()

            def copy_out(member: str, dest: str) -> None:
                src = tar.extractfile(tar.getmember(member))
                if src is None:
                    raise tarfile.TarError(f"{member} is not a regular file in the archive")
                with src, open(boot / dest, "wb") as dst:
                    shutil.copyfileobj(src, dst)

            for name in ("vmlinuz", "initrd.img", "kernel-release"):
                copy_out(name, name)
            if "boot/grub/grub.cfg" in names:
                try:
                    cfg = tar.extractfile("boot/grub/grub.cfg").read().decode(errors="replace")
                    env = (tar.extractfile("boot/grub/grubenv").read().decode(errors="replace")
                           if "boot/grub/grubenv" in names else None)
                    choice = grub_menu.choose(cfg, env)
                    # GRUB resolves paths on the root file system here (/boot is not a partition of its own)
                    files = [p.lstrip("/") for p in [choice.kernel, *choice.initrd[:1]]]
                    lacking = [p for p in files if p not in names]
                    if not choice.initrd:
                        raise grub_menu.GrubCfgError(f"entry {' > '.join(choice.path)!r} has no initrd line")
                    if lacking:
                        raise grub_menu.GrubCfgError(f"entry {' > '.join(choice.path)!r} names {lacking}, "
                                                     "not in the handed-over archive")
                    copy_out(files[0], "grub-vmlinuz")
                    copy_out(files[1], "grub-initrd.img")
                    grub = choice
                except (grub_menu.GrubCfgError, OSError, tarfile.TarError, AttributeError) as e:
                    say(f"guest grub.cfg not used ({e}): booting the handed-over default kernel "
                        "with the harness's command line")
    except (OSError, tarfile.TarError) as e:
        say(f"no kernel handed over at shutdown ({e}): booting the same kernel again")
        return qemu
    new = list(qemu)
    if grub is not None:
        release = Path(grub.kernel).name.removeprefix("vmlinuz-")
        kernel, initrd = boot / "grub-vmlinuz", boot / "grub-initrd.img"
        own = [a for a in grub.args if a != "quiet" and "$" not in a]
        append = " ".join([f"BOOT_IMAGE={grub.kernel}", *own, harness_append])
        for note in grub.notes:
            say(f"grub.cfg: {note}")
        say(f"GRUB's entry {' > '.join(grub.path)} (default {grub.spec!r}): {grub.kernel} {' '.join(grub.args)}")
    else:
        release = (boot / "kernel-release").read_text().strip()
        kernel, initrd, append = boot / "vmlinuz", boot / "initrd.img", harness_append
    new[new.index("-kernel") + 1] = str(kernel)
    new[new.index("-initrd") + 1] = str(initrd)
    new[new.index("-append") + 1] = append
    (rd / "qemu.argv.json").write_text(json.dumps(new))
    say(f"booting the guest's default kernel {release}")
    return new


# Under TCG a guest kernel has, rarely, hung for good in early boot (seen once:
# 6.1.0-56 stopped after "IP idents hash table entries", qemu spinning at 190 %
# CPU for 11 min), where a healthy boot prints a line every few seconds. A boot
# that prints nothing for this long before userspace starts is cold-started again.
EARLY_BOOT_STALL_S = 180
STALL_POLL_S = 2
USERSPACE_MARKERS = (b"Run /init as init process", b"Run /sbin/init as init process", b"systemd[1]:")


def wait_past_early_boot(child: subprocess.Popen, serial: Path, offset: int) -> int | None:
    """Wait for qemu to exit and return its code; None when the boot stalled
    before userspace (no new console output for EARLY_BOOT_STALL_S)."""
    size, changed = offset, time.monotonic()
    while True:
        try:
            return child.wait(timeout=STALL_POLL_S)
        except subprocess.TimeoutExpired:
            pass
        try:
            now = serial.stat().st_size
        except OSError:
            now = size
        if now != size:
            size, changed = now, time.monotonic()
            with open(serial, "rb") as f:
                f.seek(offset)
                if any(m in f.read() for m in USERSPACE_MARKERS):
                    return child.wait()
        elif time.monotonic() - changed > EARLY_BOOT_STALL_S:
            return None


def cmd_supervise(args: argparse.Namespace) -> int:
    """Run qemu (-no-reboot) in the foreground; start it again when the guest rebooted."""
    rd = Path(args.run_dir)
    qemu = json.loads((rd / "qemu.argv.json").read_text())
    serial = rd / "serial.log"
    child: subprocess.Popen | None = None

    def on_term(signum, frame):  # noqa: ARG001
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        (rd / "qemu.pid").unlink(missing_ok=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    boots = stalls = 0
    while True:
        offset = serial.stat().st_size if serial.exists() else 0
        boots += 1
        t0 = time.monotonic()
        child = subprocess.Popen(qemu, stdin=subprocess.DEVNULL)
        rc = wait_past_early_boot(child, serial, offset)
        if rc is None:
            stalls += 1
            print(f"[supervise] qemu boot {boots}: no console output for {EARLY_BOOT_STALL_S} s before the "
                  f"kernel reached userspace (a TCG hang); {'cold start again' if stalls <= 3 else 'giving up'}",
                  file=sys.stderr, flush=True)
            child.kill()
            child.wait()
            if stalls <= 3:
                continue
            (rd / "qemu.pid").unlink(missing_ok=True)
            return 1
        try:
            with open(serial, "rb") as f:
                f.seek(offset)
                tail_text = f.read()[-4096:].decode(errors="replace")
        except OSError:
            tail_text = ""
        print(f"[supervise] qemu boot {boots} exited rc={rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc == 0 and "reboot: Restarting system" in tail_text:
            print("[supervise] guest rebooted: cold start of a new qemu on the same disk", flush=True)
            qemu = boot_entry(rd, qemu)
            continue
        (rd / "qemu.pid").unlink(missing_ok=True)
        return rc


def cmd_status(args: argparse.Namespace) -> int:
    root = state_root(args)
    rows = []
    for rd in sorted(root.glob("*/info.json")) if root.exists() else []:
        info = json.loads(rd.read_text())
        pid = read_pid(rd.parent)
        rows.append({"name": info["name"], "running": vm_alive(rd.parent), "pid": pid,
                     "ssh_port": info["ssh_port"], "accel": info["accel"],
                     "up_s": int(time.time() - info["started_at"]) if vm_alive(rd.parent) else None,
                     "run_dir": str(rd.parent)})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['name']:20} {'running' if r['running'] else 'stopped':8} pid={r['pid']} "
                  f"ssh=127.0.0.1:{r['ssh_port']} accel={r['accel']} up={r['up_s']}s {r['run_dir']}")
        if not rows:
            print(f"no VMs under {root}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    print(json.dumps(instance_config(args.name, load_info(run_dir(args, args.name)))))
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    info = load_info(run_dir(args, args.name))
    return subprocess.call(ssh_cmd(info, *args.command))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state-dir", help="run dirs live here (default $GPUDIRECT_VM_STATE or <cache>/vm/runs)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("start")
    s.add_argument("name")
    s.add_argument("--ssh-port", type=int, required=True)
    s.add_argument("--mem", type=int, default=2048)
    s.add_argument("--smp", type=int, default=None,
                   help="vCPUs (default: GPUDIRECT_VM_SMP, else 2)")
    s.add_argument("--accel", choices=["auto", "tcg", "kvm"])
    s.add_argument("--image", help="image dir (default: build-image.sh output)")
    s.add_argument("--mac", help="main NIC MAC (default: derived from the name)")
    s.add_argument("--pair-net", type=int, metavar="SOCKETPORT", help="second NIC: qemu socket netdev on 127.0.0.1:PORT")
    s.add_argument("--pair-role", choices=["listen", "connect", "mcast"], default="listen",
                   help="listen/connect: a link between two VMs; mcast: a segment shared by every VM on PORT")
    s.add_argument("--pair-mac")
    s.add_argument("--pair-ip", metavar="ADDR/PREFIX", help="static address of the pair NIC in the guest")
    s.add_argument("--append", action="append", help="extra kernel command line word (repeatable)")
    s.add_argument("--from-saved", metavar="SAVED",
                   help="boot a copy of saved disk SAVED (vm.py save) when it is still valid")
    s.add_argument("--secure-boot", action="store_true",
                   help="boot through UEFI Secure Boot firmware, shim and GRUB (secure_boot.py)")
    s.add_argument("--intel-iommu", action="store_true",
                   help="an emulated Intel IOMMU and intel_iommu=on: Linux turns ACS on at the root ports")
    s.add_argument("--warm-reboot", action="store_true",
                   default=os.environ.get("GPUDIRECT_VM_WARM_REBOOT", "") not in ("", "0"),
                   help="let qemu reset the machine in-process on guest reboot (default: cold restart)")
    s.set_defaults(fn=cmd_start)

    w = sub.add_parser("wait-ssh")
    w.add_argument("name")
    w.add_argument("--timeout", type=int, default=600)
    w.set_defaults(fn=cmd_wait_ssh)

    t = sub.add_parser("stop")
    t.add_argument("name")
    t.add_argument("--keep", action="store_true", help="keep the run dir (logs), drop disk and pidfile")
    t.set_defaults(fn=cmd_stop)

    sa = sub.add_parser("save")
    sa.add_argument("name")
    sa.add_argument("--to", required=True, metavar="SAVED", help="saved disk name (<cache>/vm/saved/SAVED)")
    sa.add_argument("--timeout", type=int, default=300, help="seconds to wait for the power-off")
    sa.add_argument("--boot", action="store_true",
                    help="then boot the machine again from the saved disk (a power cycle)")
    sa.set_defaults(fn=cmd_save)

    em = sub.add_parser("enrol-mok")
    em.add_argument("name")
    em.add_argument("--cert", required=True, help="certificate (PEM or DER) to enrol as a MOK")
    em.add_argument("--timeout", type=int, default=300, help="seconds to wait for the power-off")
    em.set_defaults(fn=cmd_enrol_mok)

    st = sub.add_parser("status")
    st.add_argument("--json", action="store_true")
    st.set_defaults(fn=cmd_status)

    i = sub.add_parser("info")
    i.add_argument("name")
    i.set_defaults(fn=cmd_info)

    sh = sub.add_parser("ssh")
    sh.add_argument("name")
    sh.add_argument("command", nargs=argparse.REMAINDER)
    sh.set_defaults(fn=cmd_ssh)

    sv = sub.add_parser("_supervise", help=argparse.SUPPRESS)
    sv.add_argument("run_dir")
    sv.set_defaults(fn=cmd_supervise)

    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
