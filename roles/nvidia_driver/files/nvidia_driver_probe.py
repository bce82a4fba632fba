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


def nvswitches():
    out = []
    for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
        if read(dev + "/vendor") == "0x10de" and read(dev + "/class").startswith("0x0680"):
            out.append(os.path.basename(dev))
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
    _, mod_version = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    print(json.dumps({
        "kernel": kernel,
        "packages": found,
        "held": held,
        "dkms": dkms,
        "ofed": ofed,
        "module_version": mod_version,
        "loaded_version": read("/sys/module/nvidia/version"),
        "loaded": sorted(m for m in ("nvidia", "nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset",
                                     "nouveau") if os.path.isdir("/sys/module/" + m)),
        "peermem_built": rc_pm == 0,
        "peermem_depends": depends,
        "stamp": read("/var/lib/gpudirect/nvidia-dkms.stamp"),
        "nvswitches": nvswitches(),
        "initramfs_nouveau_unblocked": initramfs_without_blacklist(blacklist_conf),
        "headers": sorted(os.path.basename(p) for p in glob.glob("/lib/modules/*/build") if os.path.exists(p)),
    }))


main()
