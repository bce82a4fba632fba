#!/usr/bin/env python3
"""A slim Debian bookworm repository for the VM test guests, served from the host.

Why: a guest that uses Debian's own mirror pays for all of Debian main (63,058
packages) in every apt step. Measured in a TCG guest (1 vCPU, Debian 12, 2026-11-29):
`apt-get update` with nothing new 31-35 s (bookworm's 151 kB InRelease again over
qemu's user-mode network, then the lists re-read), `apt-cache gencaches` 18.8 s,
python-apt's cache (every Ansible `apt` task opens one) 6-7 s, pkgcache.bin 36-39 MB;
in the rdma scenario's converge, apt tasks took 726 s of 1346 s. This repository holds
only what the guests can need: the dependency closure of a seed (below), so the
guest's apt has a few thousand packages to read, and fetches from the host.

What it is: once per upstream release (the upstream InRelease's Date) it downloads
bookworm's InRelease and main/binary-amd64/Packages.xz from $GPUDIRECT_DEBIAN_MIRROR
(default http://deb.debian.org/debian), checks the InRelease with Debian's archive
keyring ($GPUDIRECT_DEBIAN_KEYRING, default /usr/share/keyrings/debian-archive-keyring.gpg)
and Packages.xz against its SHA256, takes the subset, and writes a repository signed
with the harness's own key (generated once, cached):

    <cache>/debian-slim/repo/<upstream date>-<hash>/debian/dists/bookworm/
        InRelease Release Release.gpg main/binary-amd64/Packages{,.xz}

It serves it on 127.0.0.1:PORT (8767; a guest reaches it as http://10.0.2.2:8767/debian).
A pool/ file is fetched from the upstream mirror the first time a guest asks for it,
checked against the SHA256 of its Packages entry, kept under <cache>/debian-slim/pool/
and served from there afterwards: every VM after the first gets each .deb at local speed.
Package names, versions and files are upstream's, unchanged: the roles cannot tell.

The subset: the closure over Depends and Pre-Depends (every alternative of `a | b`;
a virtual name brings every package that Provides it; Recommends are left out, as the
image sets APT::Install-Recommends false) of
  * every package of Priority required, important or standard,
  * debian-slim-seed.txt next to this file (what the roles, the testbed and the
    scenarios may install; each entry says where it comes from) - a name that is not
    in bookworm main stops the build, naming the entry,
  * the image's packages (--image DIR: its packages.list, dpkg-query -W at build
    time, or packages.txt, dpkg -l), when given.
GPUDIRECT_DEBIAN_SLIM_ALL=1 serves all of main instead (the same key and URL): a way
out for a test that needs a package the seed misses, until the seed names it.

    debian_mirror.py start [--port P] [--image DIR]  # build if needed, serve (idempotent); prints variables
    debian_mirror.py stop [--port P]
    debian_mirror.py status [--port P]               # exit 0 when serving
    debian_mirror.py build [--image DIR]             # build or reuse; prints the repository dir
    debian_mirror.py key                             # make the signing key once; prints the keyring path

Python 3 standard library, plus gpg and gpgv on the host.
"""
from __future__ import annotations

import argparse
import email.utils
import fcntl
import glob
import hashlib
import http.server
import lzma
import os
import posixpath
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SEED_FILE = os.path.join(HERE, "debian-slim-seed.txt")
SUITE = "bookworm"
COMPONENT = "main"
ARCH = "amd64"
URL_PREFIX = "/debian/"
PRIORITIES = ("required", "important", "standard")
DEP_FIELDS = ("Pre-Depends", "Depends")
DEFAULT_PORT = 8767
FORMAT = 2   # bump when the repository's layout or the subset rule changes
KEY_UID = "gpudirect-rdma test harness Debian slim mirror <debian-slim@gpudirect-rdma.invalid>"
KEYRING_NAME = "gpudirect-debian-slim.gpg"
PACKAGES_PATH = "%s/binary-%s/Packages" % (COMPONENT, ARCH)


def mirror():
    return os.environ.get("GPUDIRECT_DEBIAN_MIRROR", "http://deb.debian.org/debian").rstrip("/")


def cache_root():
    base = os.environ.get("GPUDIRECT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gpudirect-rdma")
    return os.path.join(base, "debian-slim")


def log(msg):
    sys.stderr.write("[debian-slim] %s\n" % msg)
    sys.stderr.flush()


class SlimError(Exception):
    """A failure the caller reports in one line (no traceback)."""


# ---- Packages index and the subset -------------------------------------------------

def parse_stanzas(text):
    """The stanzas of a Packages file: dicts of field -> value (continuation lines kept,
    joined with newlines), with the stanza's own text under '_raw'."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip("\n")
        if not block.strip():
            continue
        fields, key = {}, None
        for line in block.split("\n"):
            if line[:1] in (" ", "\t"):
                if key is not None:
                    fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields:
            fields["_raw"] = block
            out.append(fields)
    return out


_REL_NAME = re.compile(r"^([a-z0-9][a-z0-9+.\-]*)(?::[a-z0-9\-]+)?")


def parse_relations(value):
    """A Depends-style field as a list of groups, each a list of the alternatives'
    package names: 'a (>= 1) | b:any, c' -> [['a', 'b'], ['c']]. Versions and
    architecture qualifiers are dropped: the subset takes every version it has of a name."""
    groups = []
    for group in (value or "").replace("\n", " ").split(","):
        names = []
        for alt in group.split("|"):
            match = _REL_NAME.match(alt.strip())
            if match:
                names.append(match.group(1))
        if names:
            groups.append(names)
    return groups


class Index:
    """Package name -> stanzas, and virtual name -> the packages that provide it."""

    def __init__(self, stanzas):
        self.stanzas = stanzas
        self.by_name = {}
        self.providers = {}
        for st in stanzas:
            self.by_name.setdefault(st["Package"], []).append(st)
            for group in parse_relations(st.get("Provides", "")):
                for name in group:
                    self.providers.setdefault(name, set()).add(st["Package"])

    def resolve(self, name):
        """The real packages a relation on NAME can be met by: the package of that name
        (if any) and every package that Provides it."""
        found = set(self.providers.get(name, ()))
        if name in self.by_name:
            found.add(name)
        return found


def closure(index, seeds):
    """Every package the seed names reach over Pre-Depends and Depends, every alternative
    and every provider taken. Returns (selected names, seeds that resolve to nothing,
    {package: [its dependency groups none of whose alternatives exists]})."""
    selected, missing_seeds, unmet = set(), [], {}
    todo = []
    for name in seeds:
        found = index.resolve(name)
        if not found:
            missing_seeds.append(name)
        todo.extend(found)
    while todo:
        name = todo.pop()
        if name in selected:
            continue
        selected.add(name)
        for st in index.by_name[name]:
            for field in DEP_FIELDS:
                for group in parse_relations(st.get(field, "")):
                    alternatives = set()
                    for alt in group:
                        alternatives |= index.resolve(alt)
                    if not alternatives:
                        unmet.setdefault(name, []).append(" | ".join(group))
                    todo.extend(alternatives - selected)
    return selected, missing_seeds, unmet


def priority_seeds(index, priorities=PRIORITIES):
    return sorted({st["Package"] for st in index.stanzas if st.get("Priority") in priorities})


def read_seed_file(path=SEED_FILE):
    """[(name, where it comes from)]: one or more names a line. The comment lines just
    above a group of names say where they come from; a comment after a name is its own.
    A blank line ends a group."""
    entries, block = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            text, _, comment = line.rstrip("\n").partition("#")
            text, comment = text.strip(), comment.strip()
            if not text:
                if comment:
                    block.append(comment)
                else:
                    block = []
                continue
            for name in text.split():
                entries.append((name, comment or " ".join(block)))
    return entries


def read_image_packages(image_dir):
    """Package names installed in a VM image: its packages.list (dpkg-query -W, one
    'name<TAB>version' a line) or, for older images, packages.txt (dpkg -l)."""
    names = set()
    listing = os.path.join(image_dir, "packages.list")
    if os.path.isfile(listing):
        with open(listing, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    names.add(line.split()[0].split(":")[0])
        return sorted(names)
    table = os.path.join(image_dir, "packages.txt")
    if os.path.isfile(table):
        with open(table, encoding="utf-8") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "ii":
                    names.add(parts[1].split(":")[0])
        return sorted(names)
    raise SlimError("no packages.list or packages.txt in the image dir %s" % image_dir)


def standin_debian_needs(standin_www):
    """Debian packages that the stand-in vendor packages (tests/harness/standin_repo)
    depend on or recommend: names that no stand-in package is called or provides."""
    stanzas = []
    for path in sorted(glob.glob(os.path.join(standin_www, "**", "Packages"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            stanzas.extend(parse_stanzas(handle.read()))
    own = Index(stanzas)
    needs = set()
    for st in stanzas:
        for field in DEP_FIELDS + ("Recommends",):
            for group in parse_relations(st.get(field, "")):
                for name in group:
                    if not own.resolve(name):
                        needs.add(name)
    return sorted(needs)


# ---- upstream -------------------------------------------------------------------

def fetch(url, dest=None, timeout=120, tries=3):
    """GET url into dest (atomically) or into memory; three tries."""
    last = None
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                if dest is None:
                    return resp.read()
                with open(dest + ".part", "wb") as out:
                    shutil.copyfileobj(resp, out, 1 << 20)
                os.replace(dest + ".part", dest)
                return None
        except OSError as exc:
            last = exc
            if attempt + 1 < tries:
                time.sleep(2)
    raise SlimError("cannot download %s: %s" % (url, last))


def verify_inrelease(data, keyring):
    """The signed text of an InRelease whose signature gpgv accepts with KEYRING."""
    if not os.path.isfile(keyring):
        raise SlimError("Debian's archive keyring %s is missing (apt-get install debian-archive-keyring, "
                        "or set GPUDIRECT_DEBIAN_KEYRING)" % keyring)
    with tempfile.TemporaryDirectory(prefix="dslim-gpgv.") as tmp:
        src, out = os.path.join(tmp, "InRelease"), os.path.join(tmp, "Release")
        with open(src, "wb") as handle:
            handle.write(data)
        proc = subprocess.run(["gpgv", "--status-fd", "1", "--keyring", keyring, "--output", out, src],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0 or "[GNUPG:] VALIDSIG" not in proc.stdout:
            raise SlimError("the upstream InRelease's signature does not check with %s: %s"
                            % (keyring, proc.stderr.strip().splitlines()[-1:] or proc.returncode))
        with open(out, encoding="utf-8") as handle:
            return handle.read()


def release_field(text, field):
    match = re.search(r"^%s:[ \t]*(.*)$" % re.escape(field), text, re.M)
    return match.group(1).strip() if match else None


def release_sha256(text, path):
    """(sha256, size) of PATH in a Release's SHA256 list."""
    block = re.search(r"^SHA256:\n((?:[ \t].*\n?)*)", text, re.M)
    for line in (block.group(1).splitlines() if block else []):
        parts = line.split()
        if len(parts) == 3 and parts[2] == path:
            return parts[0], int(parts[1])
    raise SlimError("the Release has no SHA256 for %s" % path)


def date_stamp(release_text):
    date = release_field(release_text, "Date")
    if not date:
        raise SlimError("the upstream Release has no Date")
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(email.utils.mktime_tz(email.utils.parsedate_tz(date))))


def upstream():
    """Download (or reuse) the verified upstream Release text and Packages text for
    the current upstream InRelease. Offline, the newest cached one, with a warning."""
    root = os.path.join(cache_root(), "upstream")
    os.makedirs(root, exist_ok=True)
    keyring = os.environ.get("GPUDIRECT_DEBIAN_KEYRING", "/usr/share/keyrings/debian-archive-keyring.gpg")
    base = "%s/dists/%s" % (mirror(), SUITE)
    try:
        inrelease = fetch(base + "/InRelease", timeout=60)
    except SlimError as exc:
        cached = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "Packages.xz")))
        if not cached:
            raise
        log("WARNING: %s; using the cached upstream index of %s" % (exc, cached[-1]))
        stamp = cached[-1]
        with open(os.path.join(root, stamp, "InRelease"), "rb") as handle:
            inrelease = handle.read()
    release = verify_inrelease(inrelease, keyring)
    stamp = date_stamp(release)
    want_sha, want_size = release_sha256(release, PACKAGES_PATH + ".xz")
    folder = os.path.join(root, stamp)
    xz_path = os.path.join(folder, "Packages.xz")
    if not os.path.isfile(xz_path):
        os.makedirs(folder, exist_ok=True)
        log("downloading %s/%s/%s.xz (upstream Date %s)" % (base, COMPONENT, PACKAGES_PATH[len(COMPONENT) + 1:], stamp))
        fetch("%s/%s.xz" % (base, PACKAGES_PATH), xz_path + ".new")
        with open(xz_path + ".new", "rb") as handle:
            data = handle.read()
        if hashlib.sha256(data).hexdigest() != want_sha or len(data) != want_size:
            os.unlink(xz_path + ".new")
            raise SlimError("upstream %s.xz does not match the InRelease's SHA256" % PACKAGES_PATH)
        with open(os.path.join(folder, "InRelease"), "wb") as handle:
            handle.write(inrelease)
        os.replace(xz_path + ".new", xz_path)
    with open(xz_path, "rb") as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != want_sha:
        raise SlimError("cached %s does not match the InRelease's SHA256: remove %s" % (xz_path, folder))
    return stamp, release, lzma.decompress(data).decode("utf-8")


# ---- the harness's signing key -----------------------------------------------------

def key_dir():
    return os.path.join(cache_root(), "key")


def _gpg(home, *args, **kw):
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", home] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


class _GnupgHome:
    """A throwaway GNUPGHOME with a short path (gpg-agent's socket name must stay
    under 108 bytes, which a deep GPUDIRECT_CACHE would pass)."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="dslim-gpg.", dir="/tmp")
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["gpgconf", "--homedir", self.path, "--kill", "gpg-agent"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self.path, ignore_errors=True)


def ensure_key():
    """Make the signing key once (kept in <cache>/debian-slim/key/); return the path of
    its binary public keyring (for signed-by=). The fingerprint is in the .fpr beside it."""
    folder = key_dir()
    keyring = os.path.join(folder, KEYRING_NAME)
    if os.path.isfile(keyring) and os.path.isfile(os.path.join(folder, "secret.asc")):
        return keyring
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(keyring) and os.path.isfile(os.path.join(folder, "secret.asc")):
            return keyring
        with _GnupgHome() as home:
            _gpg(home, "--passphrase", "", "--quick-gen-key", KEY_UID, "ed25519", "sign", "never")
            listing = _gpg(home, "--with-colons", "--list-keys", KEY_UID, text=True).stdout
            fpr = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
            secret = _gpg(home, "--armor", "--export-secret-keys", fpr).stdout
            public = _gpg(home, "--export", fpr).stdout
            armored = _gpg(home, "--armor", "--export", fpr).stdout
        old = os.umask(0o077)
        try:
            with open(os.path.join(folder, "secret.asc.new"), "wb") as handle:
                handle.write(secret)
        finally:
            os.umask(old)
        for name, data in ((KEYRING_NAME[:-4] + ".asc", armored), (KEYRING_NAME[:-4] + ".fpr", fpr.encode() + b"\n")):
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(data)
        with open(keyring + ".new", "wb") as handle:
            handle.write(public)
        os.replace(os.path.join(folder, "secret.asc.new"), os.path.join(folder, "secret.asc"))
        os.replace(keyring + ".new", keyring)
        log("made the signing key %s (%s)" % (fpr, keyring))
    return keyring


def key_fingerprint():
    with open(os.path.join(key_dir(), KEYRING_NAME[:-4] + ".fpr"), encoding="ascii") as handle:
        return handle.read().strip()


def sign_release(release_path):
    """InRelease (clearsigned) and Release.gpg (detached) next to RELEASE_PATH."""
    ensure_key()
    folder = os.path.dirname(release_path)
    with _GnupgHome() as home:
        _gpg(home, "--import", os.path.join(key_dir(), "secret.asc"))
        fpr = key_fingerprint()
        _gpg(home, "--yes", "--local-user", fpr, "--digest-algo", "SHA512", "--clearsign",
             "-o", os.path.join(folder, "InRelease"), release_path)
        _gpg(home, "--yes", "--local-user", fpr, "--digest-algo", "SHA512", "--armor", "--detach-sign",
             "-o", os.path.join(folder, "Release.gpg"), release_path)


# ---- building the repository ----------------------------------------------------

def seed_names(index, image_dir=None):
    """(names, problems): the seed of the closure, and the seed-file entries that
    bookworm main lacks (the build stops on those)."""
    names = set(priority_seeds(index))
    problems = []
    for name, origin in read_seed_file():
        if not index.resolve(name):
            problems.append("%s (%s)" % (name, origin or "no comment"))
        names.add(name)
    if image_dir:
        gone = []
        for name in read_image_packages(image_dir):
            if index.resolve(name):
                names.add(name)
            else:
                gone.append(name)
        if gone:
            log("note: %d package(s) of the image are no longer in upstream %s (a newer point release "
                "replaced them; the guest keeps what it has): %s" % (len(gone), SUITE, " ".join(gone)))
    return sorted(names), problems


# upstream Release fields copied as they are: apt pins (o=Debian, n=bookworm, a=oldstable)
# and apt-cache policy read them, so the guest sees Debian's own values
RELEASE_COPY = ("Origin", "Label", "Suite", "Version", "Codename", "Changelogs", "Date")


def write_release(dist, upstream_release, files):
    """dists/<suite>/Release: upstream's identifying fields, this repository's one
    architecture and component, and the SHA256 of FILES (paths under DIST)."""
    lines = []
    for field in RELEASE_COPY:
        value = release_field(upstream_release, field)
        if value is not None:
            lines.append("%s: %s" % (field, value))
    lines += [
        "Architectures: %s" % ARCH,
        "Components: %s" % COMPONENT,
        "Description: %s - slim: the dependency closure of the VM tests' seed "
        "(gpudirect-rdma tests/harness/vm/debian_mirror.py)" % (release_field(upstream_release, "Description") or
                                                                "Debian %s" % SUITE),
        "SHA256:",
    ]
    for rel in files:
        with open(os.path.join(dist, rel), "rb") as handle:
            data = handle.read()
        lines.append(" %s %16d %s" % (hashlib.sha256(data).hexdigest(), len(data), rel))
    path = os.path.join(dist, "Release")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def build(image_dir=None):
    """Build the repository for the current upstream (or reuse it); return its dir."""
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    ensure_key()
    with open(os.path.join(root, ".build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp, release, packages = upstream()
        everything = os.environ.get("GPUDIRECT_DEBIAN_SLIM_ALL", "") not in ("", "0")
        image_names = read_image_packages(image_dir) if image_dir else []
        with open(SEED_FILE, "rb") as handle:
            seed_text = handle.read()
        recipe = hashlib.sha256()
        for part in (str(FORMAT), mirror(), release_sha256(release, PACKAGES_PATH + ".xz")[0],
                     hashlib.sha256(seed_text).hexdigest(), " ".join(image_names), " ".join(PRIORITIES),
                     "all" if everything else "closure", key_fingerprint()):
            recipe.update(part.encode() + b"\0")
        name = "%s-%s%s" % (stamp, recipe.hexdigest()[:12], "-all" if everything else "")
        out = os.path.join(root, "repo", name)
        if os.path.isfile(os.path.join(out, "debian", "dists", SUITE, "InRelease")):
            log("repository cached: %s" % out)
            _point_current(root, name)
            return out
        started = time.time()
        index = Index(parse_stanzas(packages))
        seeds, problems = seed_names(index, image_dir)
        if problems:
            raise SlimError("seed entries not in Debian %s %s (%s): %s. Fix %s"
                            % (SUITE, COMPONENT, ARCH, "; ".join(problems), SEED_FILE))
        if everything:
            selected, unmet = set(index.by_name), {}
        else:
            selected, _, unmet = closure(index, seeds)
        chosen = [st for st in index.stanzas if st["Package"] in selected]
        os.makedirs(os.path.join(root, "repo"), exist_ok=True)
        work = tempfile.mkdtemp(prefix=".tmp-%s." % name, dir=os.path.join(root, "repo"))
        os.chmod(work, 0o755)
        try:
            dist = os.path.join(work, "debian", "dists", SUITE)
            os.makedirs(os.path.join(dist, os.path.dirname(PACKAGES_PATH)))
            text = "\n\n".join(st["_raw"] for st in chosen) + "\n"
            with open(os.path.join(dist, PACKAGES_PATH), "w", encoding="utf-8") as handle:
                handle.write(text)
            with lzma.open(os.path.join(dist, PACKAGES_PATH + ".xz"), "wb", preset=6) as handle:
                handle.write(text.encode("utf-8"))
            release_path = write_release(dist, release, [PACKAGES_PATH, PACKAGES_PATH + ".xz"])
            sign_release(release_path)
            with open(os.path.join(work, "subset.txt"), "w", encoding="utf-8") as handle:
                handle.write("".join("%s\n" % n for n in sorted(selected)))
            with open(os.path.join(work, "unmet.txt"), "w", encoding="utf-8") as handle:
                for pkg in sorted(unmet):
                    handle.write("%s: %s\n" % (pkg, ", ".join(unmet[pkg])))
            with open(os.path.join(work, "upstream.txt"), "w", encoding="utf-8") as handle:
                handle.write("mirror %s\nsuite %s\ndate %s\npackages %d\nsubset %d\n"
                             % (mirror(), SUITE, release_field(release, "Date"), len(index.by_name), len(selected)))
            shutil.rmtree(out, ignore_errors=True)
            os.rename(work, out)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        _point_current(root, name)
        log("built %s: %d of %d packages (%s%d seeds: priority %s, %s%s), %.1f MB of Packages, %.1f s"
            % (out, len(selected), len(index.by_name), "ALL of main; " if everything else "", len(seeds),
               "/".join(PRIORITIES), os.path.basename(SEED_FILE), ", the image's packages" if image_dir else "",
               len(text) / 1e6, time.time() - started))
        if unmet and not everything:
            log("note: %d package(s) of the subset have a dependency nothing in %s meets (as upstream; "
                "listed in %s/unmet.txt)" % (len(unmet), SUITE, out))
        _check_standin(out, index, selected)
        return out


def _point_current(root, name):
    tmp = os.path.join(root, ".current.tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.join("repo", name), tmp)
    os.replace(tmp, os.path.join(root, "current"))


def _check_standin(out, index, selected):
    """Loud when a Debian package the stand-in vendor packages need is outside the subset."""
    www = os.path.join(os.path.dirname(cache_root()), "standin-repo", "current", "www")
    if not os.path.isdir(www):
        return
    lacking = []
    for name in standin_debian_needs(www):
        if not (index.resolve(name) & selected):
            lacking.append(name)
    if lacking:
        log("WARNING: the stand-in vendor packages need %s, which the slim repository lacks: "
            "add to %s" % (" ".join(lacking), SEED_FILE))


# ---- the server ----------------------------------------------------------------

def pool_index(repo_dir, also=()):
    """Filename -> (size, sha256) of every package the repository lists. ALSO: other
    repository dirs whose files are served too (earlier subsets or upstream releases: a
    guest that read their lists still gets its .debs); REPO_DIR's entries win."""
    index = {}
    for folder in list(also) + [repo_dir]:
        path = os.path.join(folder, "debian", "dists", SUITE, PACKAGES_PATH)
        if folder != repo_dir and not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            stanzas = parse_stanzas(handle.read())
        index.update((st["Filename"], (int(st["Size"]), st["SHA256"])) for st in stanzas if "Filename" in st)
    return index


def safe_relpath(url_path):
    """The path under /debian/ a request names, or None when it is not a plain relative
    path there (.., ., empty segments, backslashes, NUL, another prefix)."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(url_path).path)
    if not path.startswith(URL_PREFIX):
        return None
    rel = path[len(URL_PREFIX):]
    if not rel or "\\" in rel or "\0" in rel or rel.startswith("/"):
        return None
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    if posixpath.normpath(rel) != rel:
        return None
    return rel


class PoolCache:
    """pool/ files fetched from upstream on first use, checked against their Packages
    SHA256 and kept content-addressed (<pool>/<sha256[:2]>/<sha256>/<basename>)."""

    def __init__(self, folder, upstream_base, index):
        self.folder = folder
        self.upstream = upstream_base.rstrip("/")
        self.index = index
        self._locks = {}
        self._guard = threading.Lock()
        self.fetched = 0

    def path(self, rel):
        size, sha = self.index[rel]
        return os.path.join(self.folder, sha[:2], sha, posixpath.basename(rel))

    def get(self, rel):
        """The local file of pool path REL, fetched first if needed; raises SlimError on a
        download or a checksum that fails (nothing is kept then)."""
        local = self.path(rel)
        size, sha = self.index[rel]
        if os.path.isfile(local) and os.path.getsize(local) == size:
            return local
        with self._guard:
            lock = self._locks.setdefault(rel, threading.Lock())
        with lock:
            if os.path.isfile(local) and os.path.getsize(local) == size:
                return local
            os.makedirs(os.path.dirname(local), exist_ok=True)
            part = "%s.part-%d-%d" % (local, os.getpid(), threading.get_ident())
            url = "%s/%s" % (self.upstream, urllib.parse.quote(rel))
            digest, got = hashlib.sha256(), 0
            try:
                with urllib.request.urlopen(url, timeout=120) as resp, open(part, "wb") as out:
                    while True:
                        chunk = resp.read(1 << 20)
                        if not chunk:
                            break
                        digest.update(chunk)
                        got += len(chunk)
                        out.write(chunk)
            except OSError as exc:
                _unlink(part)
                raise SlimError("cannot fetch %s: %s" % (url, exc))
            if got != size or digest.hexdigest() != sha:
                _unlink(part)
                raise SlimError("%s: %d bytes, SHA256 %s; the Packages entry says %d bytes, %s"
                                % (url, got, digest.hexdigest(), size, sha))
            os.replace(part, local)
            self.fetched += 1
            return local


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpudirect-debian-slim/1"
    # set on the server: repo_dir, pool (PoolCache), keyring
    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                         self.address_string(), fmt % args))

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _error(self, code, text, head):
        body = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head):
        srv = self.server
        if urllib.parse.urlsplit(self.path).path == "/keys/" + KEYRING_NAME:
            return self._file(srv.keyring, head, "application/octet-stream")
        rel = safe_relpath(self.path)
        if rel is None:
            return self._error(400 if self.path.startswith(URL_PREFIX) else 404, "not a path of this repository", head)
        if rel.startswith("dists/"):
            local = os.path.join(srv.repo_dir, "debian", rel)
            if not os.path.isfile(local):
                return self._error(404, "not found", head)
            return self._file(local, head)
        if rel.startswith("pool/"):
            if rel not in srv.pool.index:
                return self._error(404, "%s is not in the slim repository (tests/harness/vm/debian-slim-seed.txt)"
                                   % rel, head)
            try:
                local = srv.pool.get(rel)
            except SlimError as exc:
                self.log_message("ERROR %s", exc)
                return self._error(502, str(exc), head)
            return self._file(local, head, "application/vnd.debian.binary-package")
        return self._error(404, "not found", head)

    def _file(self, local, head, ctype="application/octet-stream"):
        stat = os.stat(local)
        mtime = int(stat.st_mtime)
        since = self.headers.get("If-Modified-Since")
        if since:
            try:
                when = email.utils.parsedate_to_datetime(since).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                when = None
            if when is not None and mtime <= when:
                self.send_response(304)
                self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(stat.st_size))
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        self.end_headers()
        if head:
            return
        with open(local, "rb") as handle:
            shutil.copyfileobj(handle, self.wfile, 1 << 20)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(repo_dir, port, bind="127.0.0.1", upstream_base=None, pool_dir=None, keyring=None):
    server = Server((bind, port), Handler)
    server.repo_dir = repo_dir
    server.keyring = keyring or os.path.join(key_dir(), KEYRING_NAME)
    others = sorted(glob.glob(os.path.join(os.path.dirname(repo_dir), "*")))
    server.pool = PoolCache(pool_dir or os.path.join(cache_root(), "pool"), upstream_base or mirror(),
                            pool_index(repo_dir, [d for d in others if d != repo_dir]))
    return server


# ---- start / stop / status ------------------------------------------------------

def _state(port, what):
    return os.path.join(cache_root(), "serve-%s.%s" % (port, what))


def running(port):
    try:
        with open(_state(port, "pid")) as handle:
            pid = int(handle.read())
        os.kill(pid, 0)
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    if b"_serve" in cmdline and any(arg.endswith(b"debian_mirror.py") for arg in cmdline):
        return pid
    return None


def stop(port):
    pid = running(port)
    if pid:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)
        log("stopped pid %d (port %s)" % (pid, port))
    else:
        log("not running on port %s" % port)
    for what in ("pid", "root"):
        _unlink(_state(port, what))


def print_env(repo, port):
    with open(os.path.join(repo, "upstream.txt"), encoding="utf-8") as handle:
        info = dict(line.rstrip("\n").split(" ", 1) for line in handle if " " in line)
    print("DEBIAN_SLIM_PORT=%s" % port)
    print("DEBIAN_SLIM_ROOT=%s" % repo)
    print("DEBIAN_SLIM_PACKAGES=%s" % info.get("subset", "?"))
    print("DEBIAN_SLIM_URL_HOST=http://127.0.0.1:%s/debian" % port)
    print("DEBIAN_SLIM_URL_VM=http://10.0.2.2:%s/debian" % port)
    print("DEBIAN_SLIM_KEYRING=%s" % os.path.join(key_dir(), KEYRING_NAME))
    print("DEBIAN_SLIM_KEY_URL_VM=http://10.0.2.2:%s/keys/%s" % (port, KEYRING_NAME))
    print("DEBIAN_SLIM_KEY_FPR=%s" % key_fingerprint())
    print("# in the guest: deb [signed-by=/etc/apt/keyrings/%s] http://10.0.2.2:%s/debian %s %s"
          % (KEYRING_NAME, port, SUITE, COMPONENT))


def _answers(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s%sdists/%s/InRelease" % (port, URL_PREFIX, SUITE),
                                    timeout=2) as resp:
            resp.read()
        return True
    except (OSError, urllib.error.URLError):
        return False


def start(port, image_dir=None):
    repo = build(image_dir)
    root = cache_root()
    with open(os.path.join(root, ".serve-%s.lock" % port), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pid = running(port)
        if pid:
            try:
                with open(_state(port, "root")) as handle:
                    served = handle.read().strip()
            except OSError:
                served = ""
            if served == repo:
                log("already serving %s on 127.0.0.1:%s (pid %d)" % (repo, port, pid))
                print_env(repo, port)
                return
            log("repository changed: restarting (was %s)" % served)
            stop(port)
        logf = open(_state(port, "log"), "ab")
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_serve", "--port", str(port), repo],
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                                close_fds=True)
        logf.close()
        with open(_state(port, "pid"), "w") as handle:
            handle.write("%d\n" % proc.pid)
        with open(_state(port, "root"), "w") as handle:
            handle.write(repo + "\n")
        for _ in range(100):
            if _answers(port):
                log("serving %s on http://127.0.0.1:%s/debian (pid %d)" % (repo, port, proc.pid))
                print_env(repo, port)
                return
            if proc.poll() is not None:
                for what in ("pid", "root"):
                    _unlink(_state(port, what))
                with open(_state(port, "log"), encoding="utf-8", errors="replace") as handle:
                    tail = handle.read()[-2000:]
                raise SlimError("the server did not start:\n%s" % tail)
            time.sleep(0.1)
        raise SlimError("the server did not answer on 127.0.0.1:%s in 10 s" % port)


def serve_forever(port, repo):
    server = make_server(repo, port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log("serving %s on 127.0.0.1:%s (%d pool files, earlier subsets' included)" % (repo, port, len(server.pool.index)))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    default_port = int(os.environ.get("GPUDIRECT_DEBIAN_SLIM_PORT", DEFAULT_PORT))
    for name in ("start", "stop", "status", "build", "key"):
        cmd = sub.add_parser(name)
        if name in ("start", "stop", "status"):
            cmd.add_argument("--port", type=int, default=default_port)
        if name in ("start", "build"):
            cmd.add_argument("--image", help="VM image dir: its packages join the seed")
    serve = sub.add_parser("_serve")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("repo")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "start":
            start(args.port, args.image)
        elif args.cmd == "stop":
            stop(args.port)
        elif args.cmd == "status":
            pid = running(args.port)
            if not pid:
                log("not running on port %s" % args.port)
                return 3
            with open(_state(args.port, "root")) as handle:
                log("serving %s on 127.0.0.1:%s (pid %d)" % (handle.read().strip(), args.port, pid))
        elif args.cmd == "build":
            print(build(args.image))
        elif args.cmd == "key":
            print(ensure_key())
        elif args.cmd == "_serve":
            serve_forever(args.port, args.repo)
    except SlimError as exc:
        log("ERROR: %s" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
