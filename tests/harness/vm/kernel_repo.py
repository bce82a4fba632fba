#!/usr/bin/env python3
"""A second Debian kernel for the kernel-update test, as a local flat apt repository.

The VM image boots the kernel of Debian 12's main suite. The kernel-update test
needs another kernel ABI that a real node would get as an update: this takes the
newest ABI in bookworm-security other than the image's, downloads its image,
headers and build dependencies (and the linux-image-amd64 / linux-headers-amd64
metapackages that point at it) once into the cache, and writes a flat repository
(Packages, Packages.gz, an unsigned Release; VMs use it with [trusted=yes]).

    kernel_repo.py build IMAGE_KERNEL     # prints the repo dir; cached per ABI
    kernel_repo.py start IMAGE_KERNEL [PORT]   # build, serve on 127.0.0.1:PORT (8766)
    kernel_repo.py stop [PORT]

`start` prints KERNEL_REPO_DIR, KERNEL_REPO_ABI (the new `uname -r`) and
KERNEL_REPO_VM_URL (http://10.0.2.2:PORT/, the host as qemu user networking shows it).
Only Debian's mirror is used (GPUDIRECT_DEBIAN_SECURITY_MIRROR overrides it).
"""

import gzip
import hashlib
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

MIRROR = os.environ.get("GPUDIRECT_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
SUITE = "bookworm-security"
CACHE = os.path.join(os.environ.get("GPUDIRECT_CACHE", os.path.expanduser("~/.cache/gpudirect-rdma")), "kernel-repo")
ABI_RE = re.compile(r"^linux-image-(\d+\.\d+\.\d+-\d+)-amd64$")


def log(msg):
    sys.stderr.write("[kernel-repo] %s\n" % msg)


def fetch(url, dest=None):
    for attempt in range(3):
        try:
            with urllib.request.urlopen(url, timeout=120) as resp:
                data = resp.read()
            if dest:
                with open(dest + ".part", "wb") as out:
                    out.write(data)
                os.rename(dest + ".part", dest)
            return data
        except OSError as exc:
            log("fetch %s failed (%s), attempt %d" % (url, exc, attempt + 1))
            time.sleep(3)
    raise SystemExit("cannot download %s" % url)


def stanzas(text):
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields:
            fields["_raw"] = block.strip("\n")
            yield fields


def vkey(version):
    """dpkg --compare-versions is the truth; this order is enough for one source's versions."""
    return [int(p) if p.isdigit() else p for p in re.split(r"[.+~-]", version)]


def choose(image_kernel):
    index = lzma.decompress(fetch("%s/dists/%s/main/binary-amd64/Packages.xz" % (MIRROR, SUITE))).decode()
    pkgs = {}
    for st in stanzas(index):
        pkgs.setdefault(st["Package"], []).append(st)
    for name in pkgs:
        pkgs[name].sort(key=lambda s: vkey(s["Version"]), reverse=True)
    abis = sorted({m.group(1) for m in (ABI_RE.match(n) for n in pkgs) if m}, key=vkey, reverse=True)
    for abi in abis:
        release = abi + "-amd64"
        if release == image_kernel or "linux-headers-" + release not in pkgs:
            continue
        headers = pkgs["linux-headers-" + release][0]
        wanted = [pkgs["linux-image-" + release][0], headers]
        version = headers["Version"]
        for dep in re.split(r",\s*", headers.get("Depends", "")):
            name = dep.split()[0] if dep else ""
            if name.startswith(("linux-headers-", "linux-kbuild-", "linux-compiler-")) and name in pkgs:
                same = [s for s in pkgs[name] if s["Version"] == version] or pkgs[name][:1]
                wanted.append(same[0])
        for meta in ("linux-image-amd64", "linux-headers-amd64"):
            for st in pkgs.get(meta, []):
                if release in st.get("Depends", ""):
                    wanted.append(st)
                    break
        return release, wanted
    raise SystemExit("no kernel ABI in %s other than %s" % (SUITE, image_kernel))


def build(image_kernel):
    release, wanted = choose(image_kernel)
    repo = os.path.join(CACHE, release)
    if os.path.exists(os.path.join(repo, "Release")):
        log("reusing %s (kernel %s)" % (repo, release))
        return release, repo
    tmp = repo + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    started = time.time()
    entries = []
    for st in wanted:
        deb = os.path.basename(st["Filename"])
        fetch("%s/%s" % (MIRROR, st["Filename"]), os.path.join(tmp, deb))
        with open(os.path.join(tmp, deb), "rb") as handle:
            if hashlib.sha256(handle.read()).hexdigest() != st["SHA256"]:
                raise SystemExit("checksum mismatch for %s" % deb)
        entries.append(re.sub(r"(?m)^Filename: .*$", "Filename: ./" + deb, st["_raw"]))
    packages = ("\n\n".join(entries) + "\n").encode()
    with open(os.path.join(tmp, "Packages"), "wb") as out:
        out.write(packages)
    with gzip.open(os.path.join(tmp, "Packages.gz"), "wb") as out:
        out.write(packages)
    lines = ["Origin: gpudirect-test", "Label: kernel update test (Debian %s packages)" % SUITE,
             "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        with open(os.path.join(tmp, name), "rb") as handle:
            data = handle.read()
        lines.append(" %s %d %s" % (hashlib.sha256(data).hexdigest(), len(data), name))
    with open(os.path.join(tmp, "Release"), "w") as out:
        out.write("\n".join(lines) + "\n")
    with open(os.path.join(tmp, "kernel-release"), "w") as out:
        out.write(release + "\n")
    os.rename(tmp, repo)
    log("built %s: %d packages in %.0f s" % (repo, len(wanted), time.time() - started))
    return release, repo


def pidfile(port):
    return os.path.join(CACHE, "serve-%s.pid" % port)


def stop(port):
    try:
        with open(pidfile(port)) as handle:
            os.kill(int(handle.read()), signal.SIGTERM)
        log("stopped the server on port %s" % port)
    except (OSError, ValueError):
        pass
    if os.path.exists(pidfile(port)):
        os.unlink(pidfile(port))


def start(image_kernel, port):
    release, repo = build(image_kernel)
    stop(port)
    logf = open(os.path.join(CACHE, "serve-%s.log" % port), "ab")
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", repo, str(port)],
                            stdout=logf, stderr=logf, start_new_session=True)
    with open(pidfile(port), "w") as handle:
        handle.write(str(proc.pid))
    for _ in range(50):
        try:
            urllib.request.urlopen("http://127.0.0.1:%s/Release" % port, timeout=2).read()
            break
        except OSError:
            time.sleep(0.2)
    else:
        raise SystemExit("the kernel repository server did not answer on port %s" % port)
    print("KERNEL_REPO_DIR=%s" % repo)
    print("KERNEL_REPO_ABI=%s" % release)
    print("KERNEL_REPO_VM_URL=http://10.0.2.2:%s/" % port)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("build", "start", "stop"):
        raise SystemExit(__doc__)
    os.makedirs(CACHE, exist_ok=True)
    if argv[1] == "stop":
        stop(argv[2] if len(argv) > 2 else "8766")
    elif len(argv) < 3:
        raise SystemExit("usage: %s %s IMAGE_KERNEL [PORT]" % (argv[0], argv[1]))
    elif argv[1] == "build":
        print(build(argv[2])[1])
    else:
        start(argv[2], argv[3] if len(argv) > 3 else "8766")


if __name__ == "__main__":
    main(sys.argv)
