#!/usr/bin/python3
"""Read-only probe for the gpudirect_peermem role; prints one JSON object."""
import ctypes
import glob
import json
import os
import re
import shutil
import subprocess


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


def libibverbs():
    """libibverbs.so.1 as the dynamic loader finds it, and whether it exports ibv_reg_dmabuf_mr.

    The file name carries the rdma-core version (libibverbs.so.1.14.50.0: rdma-core 50.0),
    so this works where only the library is installed (libibverbs1 without rdma-core).
    """
    paths = []
    _, out = run(["ldconfig", "-p"])
    for line in out.splitlines():
        if line.strip().startswith("libibverbs.so.1 ") and "=>" in line:
            paths.append(line.split("=>", 1)[1].strip())
    for pattern in ("/usr/lib/*-linux-gnu/libibverbs.so.1", "/usr/lib64/libibverbs.so.1", "/lib64/libibverbs.so.1",
                    "/usr/lib/libibverbs.so.1"):
        paths.extend(sorted(glob.glob(pattern)))
    path = next((p for p in paths if os.path.exists(p)), "")
    if not path:
        return {"path": "", "version": "", "dmabuf": False}
    real = os.path.realpath(path)
    match = re.search(r"libibverbs\.so\.1\.\d+\.(\d+(?:\.\d+)*)$", real)
    try:
        dmabuf = hasattr(ctypes.CDLL(real), "ibv_reg_dmabuf_mr")
    except OSError:  # another architecture, or unloadable: look for the name in the symbol table
        try:
            with open(real, "rb") as handle:
                dmabuf = b"\0ibv_reg_dmabuf_mr\0" in handle.read()
        except (IOError, OSError):
            dmabuf = False
    return {"path": real, "version": match.group(1) if match else "", "dmabuf": dmabuf}


def nvidia_driver(kernel):
    """Version and flavour of the nvidia module on disk, else of the loaded one.

    A driver from the .run installer or an image, or a kernel without /lib/modules, leaves
    modinfo nothing to find: /sys/module/nvidia/version and /proc/driver/nvidia/version
    ("NVIDIA UNIX Open Kernel Module ...") still tell.
    """
    _, license_ = run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])
    _, version = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    if version:
        return {"version": version, "flavor": "open" if "MIT" in license_ else "proprietary", "source": "modinfo"}
    proc = read("/proc/driver/nvidia/version").splitlines()
    proc_line = proc[0] if proc and proc[0].startswith("NVRM version:") else ""
    version = read("/sys/module/nvidia/version")
    if not version and proc_line:
        version = next((w for w in proc_line.split() if w[:1].isdigit() and "." in w), "")
    if not version:
        return {"version": "", "flavor": None, "source": None}
    flavor = ("open" if "Open Kernel Module" in proc_line else "proprietary") if proc_line else None
    return {"version": version, "flavor": flavor, "source": "loaded module"}


def main():
    kernel = os.uname()[2]
    rdma_core = ""
    if shutil.which("dpkg-query"):
        rc, out = run(["dpkg-query", "-W", "-f=${Version} ${db:Status-Abbrev}", "rdma-core"])
        if rc == 0 and out.split()[1:2] and out.split()[1][1:2] == "i":
            rdma_core = out.split()[0]
    elif shutil.which("rpm"):
        rc, out = run(["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"])
        rdma_core = out if rc == 0 else ""
    _, depends = run(["modinfo", "-k", kernel, "-F", "depends", "nvidia_peermem"])
    rc_pm, _ = run(["modinfo", "-k", kernel, "-n", "nvidia_peermem"])
    rc_nv, _ = run(["modinfo", "-k", kernel, "-n", "nv_peer_mem"])
    _, ib_core = run(["modinfo", "-k", kernel, "-n", "ib_core"])
    units = ("/etc/systemd/system/openibd.service", "/lib/systemd/system/openibd.service",
             "/usr/lib/systemd/system/openibd.service")
    print(json.dumps({
        "kernel": kernel,
        "rdma_core": rdma_core,
        "ofed": run(["ofed_info", "-s"])[1] if shutil.which("ofed_info") else "",
        "driver": nvidia_driver(kernel),
        "libibverbs": libibverbs(),
        "loaded": sorted(m for m in ("nvidia", "nvidia_peermem", "nv_peer_mem", "ib_core", "ib_peer_mem")
                         if os.path.isdir("/sys/module/" + m)),
        "loaded_version": read("/sys/module/nvidia/version"),
        "nvidia_peermem_built": rc_pm == 0,
        "nvidia_peermem_depends": depends,
        "nv_peer_mem_built": rc_nv == 0,
        "ib_core_path": ib_core,
        "openibd": any(os.path.exists(u) for u in units),
        "ofa_symvers": os.path.exists("/usr/src/ofa_kernel/%s/%s/Module.symvers" % (os.uname()[4], kernel))
        or os.path.exists("/usr/src/ofa_kernel/default/Module.symvers"),
    }))


if __name__ == "__main__":
    main()
