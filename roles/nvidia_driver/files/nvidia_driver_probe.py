#!/usr/bin/python3
"""Read-only probe of the NVIDIA driver for the nvidia_driver role; prints one JSON object."""
import glob
import json
import os
import shutil
import subprocess
import sys


def run(argv):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=dict(os.environ, LC_ALL="C"), check=False)
        return proc.returncode, proc.stdout.strip()
    except OSError:
        return 127, ""


def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return ""


def packages(names):
    found, held = {}, []
    if shutil.which("dpkg-query"):
        _, out = run(["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n"] + names)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2][1:2] == "i":
                found[parts[0]] = parts[1]
                if parts[2][0] == "h":
                    held.append(parts[0])
    elif shutil.which("rpm"):
        for name in names:
            rc, out = run(["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\n", name])
            if rc == 0:
                found[name] = out.splitlines()[0]
    return found, held


def owner(path):
    """The package that owns a file, or "" (a runfile, an image, a DKMS build)."""
    if not path.startswith("/"):
        return ""
    if shutil.which("dpkg-query"):
        rc, out = run(["dpkg-query", "-S", path])
        return out.split(":")[0].split(",")[0].strip() if rc == 0 and out else ""
    if shutil.which("rpm"):
        rc, out = run(["rpm", "-qf", "--qf", "%{NAME}\n", path])
        return out.splitlines()[0] if rc == 0 and out else ""
    return ""


def other_driver_packages():
    """NVIDIA kernel-module packages outside the role's list (the distribution's own, e.g. Ubuntu's)."""
    found = {}
    if shutil.which("dpkg-query"):
        _, out = run(["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n",
                      "nvidia-dkms-*", "linux-modules-nvidia-*", "nvidia-kernel-source-*"])
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2][1:2] == "i":
                found[parts[0]] = parts[1]
    elif shutil.which("rpm"):
        _, out = run(["rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\n", "kmod-nvidia*", "akmod-nvidia*"])
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                found[parts[0]] = parts[1]
    return found


def flavor_of(proc_line, license_):
    """open / proprietary from /proc/driver/nvidia/version, else from the module's licence; "" unknown."""
    if proc_line:
        return "open" if "Open Kernel Module" in proc_line else "proprietary"
    if license_:
        return "open" if "MIT" in license_ else "proprietary"
    return ""


def module(kernel):
    """The nvidia module as the kernel runs it and as it lies on disk, whoever installed it.

    A driver from NVIDIA's .run installer or baked into an image has no package: only the
    loaded module (/sys/module/nvidia/version, /proc/driver/nvidia/version) tells its
    version and flavour. Without /lib/modules (a built-in or image kernel) modinfo finds
    nothing and the loaded module is all there is.
    """
    proc = read("/proc/driver/nvidia/version").splitlines()
    proc_line = proc[0].strip() if proc and proc[0].startswith("NVRM version:") else ""
    loaded = read("/sys/module/nvidia/version")
    if not loaded and proc_line:
        words = [w for w in proc_line.split() if w[:1].isdigit() and "." in w]
        loaded = words[0] if words else ""
    rc, path = run(["modinfo", "-k", kernel, "-n", "nvidia"])
    path = path if rc == 0 else ""
    disk = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])[1] if path else ""
    license_ = run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])[1] if path else ""
    return {
        "loaded_version": loaded,
        "proc_version": proc_line,
        "disk_version": disk,
        "path": path,
        "owner": owner(path),
        # what will run: the module on disk when there is one, else the loaded one
        "version": disk or loaded,
        "flavor": flavor_of(proc_line if not disk or disk == loaded else "", license_),
    }


def nouveau_kernels(kernel):
    """Kernels (running first, then those under /lib/modules) that have a nouveau module."""
    out = []
    for k in [kernel] + sorted(os.path.basename(p) for p in glob.glob("/lib/modules/*")):
        if k in out:
            continue
        rc, _ = run(["modinfo", "-k", k, "-n", "nouveau"])
        if rc == 0 or glob.glob("/lib/modules/%s/kernel/drivers/gpu/drm/nouveau/nouveau.ko*" % k):
            out.append(k)
    return out


def unit_exists(name):
    return any(os.path.exists(d + "/" + name) for d in ("/etc/systemd/system", "/run/systemd/system",
                                                         "/usr/lib/systemd/system", "/lib/systemd/system"))


def process_running(comm):
    """A process whose name (/proc/<pid>/comm, 15 characters at most) is comm."""
    for path in glob.glob("/proc/[0-9]*/comm"):
        if read(path) == comm[:15]:
            return True
    return False


def nvswitches():
    """NVIDIA PCI functions of class 0x0680 (bridge), with their device ids.

    NVSwitches are such functions, but so is a GH200 superchip's GPU; the role decides
    which are switches from the ids (filter nvidia_fabricmanager_plan).
    """
    out = []
    for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
        if read(dev + "/vendor") == "0x10de" and read(dev + "/class").startswith("0x0680"):
            out.append({"address": os.path.basename(dev), "device_id": read(dev + "/device")})
    return out


def initramfs_without_blacklist(conf):
    """Kernels whose initramfs carries nouveau.ko but not the blacklist file `conf`.

    Only those need rebuilding: an initramfs without nouveau cannot load it, and one that
    already holds the blacklist honours it. Stateless, so a run that failed before the
    rebuild is completed by the next one.
    """
    if not conf:
        return []
    if shutil.which("lsinitramfs"):
        images, lister = glob.glob("/boot/initrd.img-*"), ["lsinitramfs"]
        prefix, suffix = "/boot/initrd.img-", ""
    elif shutil.which("lsinitrd"):
        images, lister = glob.glob("/boot/initramfs-*.img"), ["lsinitrd"]
        prefix, suffix = "/boot/initramfs-", ".img"
    else:
        return []
    stale = []
    for image in sorted(images):
        kernel = image[len(prefix):len(image) - len(suffix) if suffix else None]
        if kernel.endswith("kdump") or not os.path.isdir("/lib/modules/" + kernel):
            continue
        rc, out = run(lister + [image])
        files = out.splitlines() if rc == 0 else []
        if any("/nouveau.ko" in f for f in files) and not any(f.endswith(conf.lstrip("/")) for f in files):
            stale.append(kernel)
    return stale


def main():
    names = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
    blacklist_conf = sys.argv[2] if len(sys.argv) > 2 else ""
    found, held = packages(names)
    kernel = os.uname()[2]
    _, dkms = run(["dkms", "status", "nvidia"]) if shutil.which("dkms") else (1, "")
    ofed = run(["ofed_info", "-s"])[1] if shutil.which("ofed_info") else ""
    _, depends = run(["modinfo", "-k", kernel, "-F", "depends", "nvidia_peermem"])
    rc_pm, _ = run(["modinfo", "-k", kernel, "-n", "nvidia_peermem"])
    nvidia = module(kernel)
    print(json.dumps({
        "kernel": kernel,
        "packages": found,
        "held": held,
        "dkms": dkms,
        "ofed": ofed,
        "module_version": nvidia["disk_version"],
        "loaded_version": nvidia["loaded_version"],
        "module": nvidia,
        "other_packages": other_driver_packages(),
        "loaded": sorted(m for m in ("nvidia", "nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset",
                                     "nouveau") if os.path.isdir("/sys/module/" + m)),
        "peermem_built": rc_pm == 0,
        "peermem_depends": depends,
        "stamp": read("/var/lib/gpudirect/nvidia-dkms.stamp"),
        "nvswitches": nvswitches(),
        "initramfs_nouveau_unblocked": initramfs_without_blacklist(blacklist_conf),
        "nouveau_kernels": nouveau_kernels(kernel),
        "persistenced": {"unit": unit_exists("nvidia-persistenced.service"),
                         "systemd": os.path.isdir("/run/systemd/system"),
                         "running": process_running("nvidia-persistenced")},
        "headers": sorted(os.path.basename(p) for p in glob.glob("/lib/modules/*/build") if os.path.exists(p)),
    }))


if __name__ == "__main__":
    main()
