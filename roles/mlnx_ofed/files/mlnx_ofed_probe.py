#!/usr/bin/python3
"""Read-only probe of the OFED stack for the mlnx_ofed role; prints one JSON object."""
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


def packages(names):
    """name -> installed version for the installed ones, plus the held ones."""
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
        if shutil.which("dnf"):
            _, out = run(["dnf", "-q", "versionlock", "list"])
            held = [n for n in names if any(line.startswith(n + "-") for line in out.splitlines())]
    return found, held


def main():
    names = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
    ofed_info = shutil.which("ofed_info") or ("/usr/bin/ofed_info" if os.path.exists("/usr/bin/ofed_info") else None)
    ofed = run([ofed_info, "-s"])[1] if ofed_info else ""
    found, held = packages(names)
    units = ["/etc/systemd/system/openibd.service", "/lib/systemd/system/openibd.service",
             "/usr/lib/systemd/system/openibd.service"]
    print(json.dumps({
        "ofed": ofed,
        "packages": found,
        "held": held,
        "loaded_peer_modules": [m for m in ("nvidia_peermem", "nv_peer_mem", "gdrdrv")
                                if os.path.isdir("/sys/module/" + m)],
        "openibd": any(os.path.exists(u) for u in units) or os.path.exists("/etc/init.d/openibd"),
        "uninstaller": next((p for p in ("/usr/sbin/ofed_uninstall.sh", "/usr/bin/ofed_uninstall.sh")
                             if os.path.exists(p)), ""),
        "kernel": os.uname()[2],
    }))


main()
