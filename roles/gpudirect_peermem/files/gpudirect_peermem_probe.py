#!/usr/bin/python3
"""Read-only probe for the gpudirect_peermem role; prints one JSON object."""
import json
import os
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
    _, license_ = run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])
    _, version = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
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
        "driver": {"version": version, "flavor": ("open" if "MIT" in license_ else "proprietary") if version else None},
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


main()
