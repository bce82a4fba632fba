"""The VM guests' slim Debian repository (tests/harness/vm/debian_mirror.py): the subset
it keeps of Debian main, the seed that says what the tests install, and the server's
path handling (pool files fetched once and checked, bad paths refused).

Stanzas: tests/fixtures/debian_packages/ (real bookworm stanzas; README there gives the
source). No network: the "upstream mirror" of the server tests is a local http.server.
"""

import hashlib
import http.client
import http.server
import importlib.util
import os
import re
import sys
import threading

import pytest
import yaml

from conftest import PROJECT_FIXTURES, ROOT


def _load():
    path = os.path.join(ROOT, "tests", "harness", "vm", "debian_mirror.py")
    spec = importlib.util.spec_from_file_location("debian_mirror", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["debian_mirror"] = mod
    spec.loader.exec_module(mod)
    return mod


dm = _load()
FIX = os.path.join(PROJECT_FIXTURES, "debian_packages", "bookworm-main-amd64-Packages")


@pytest.fixture(scope="module")
def index():
    with open(FIX, encoding="utf-8") as handle:
        return dm.Index(dm.parse_stanzas(handle.read()))


# ---- parsing -------------------------------------------------------------------

def test_the_real_stanzas_parse_whole(index):
    assert sorted(index.by_name) == sorted(["dkms", "kmod", "gcc", "gcc-12", "tcc", "make", "make-guile",
                                            "build-essential", "patch", "dpkg-dev", "lsb-release", "mawk",
                                            "mokutil"])
    dkms = index.by_name["dkms"][0]
    assert dkms["Version"] == "3.0.10-8+deb12u1"
    assert dkms["Pre-Depends"] == "lsb-release"
    # the slim Packages copies each stanza's own text
    assert dkms["_raw"].startswith("Package: dkms\n") and dkms["_raw"].endswith(dkms["SHA256"])
    assert dkms["SHA256"] == re.search(r"^SHA256: (\S+)$", dkms["_raw"], re.M).group(1)


def test_relations_keep_every_alternative_and_drop_versions_and_qualifiers(index):
    assert dm.parse_relations(index.by_name["dkms"][0]["Depends"]) == [
        ["kmod", "kldutils"], ["gcc", "c-compiler"], ["dpkg-dev"], ["make", "build-essential"], ["patch"]]
    # perl:any (an architecture qualifier) names perl
    assert dm.parse_relations(index.by_name["dpkg-dev"][0]["Depends"])[0] == ["perl"]
    assert dm.parse_relations("") == []


def test_virtual_names_resolve_to_every_provider(index):
    assert index.resolve("c-compiler") == {"gcc", "gcc-12", "tcc"}
    assert index.resolve("awk") == {"mawk"}
    # a real package that another one also provides (make-guile: Provides make (= 4.3-4.1))
    assert index.resolve("make") == {"make", "make-guile"}
    assert index.resolve("kldutils") == set()


# ---- the closure ---------------------------------------------------------------

def test_dkms_closure_takes_pre_depends_every_alternative_and_every_provider(index):
    selected, missing, unmet = dm.closure(index, ["dkms"])
    assert selected == {"dkms", "lsb-release", "kmod", "gcc", "gcc-12", "tcc", "dpkg-dev", "make", "make-guile",
                        "build-essential", "patch"}
    assert missing == []
    # kmod | kldutils is met by kmod: only groups with no alternative at all are unmet
    assert "dkms" not in unmet
    assert "libc6 | libc-dev" not in unmet["build-essential"]
    assert "libc6-dev | libc-dev" in unmet["build-essential"]
    assert "guile-3.0-libs" in unmet["make-guile"]
    assert "mokutil" not in selected and "mawk" not in selected


def test_a_virtual_seed_brings_its_providers_and_an_unknown_seed_is_reported(index):
    selected, missing, _ = dm.closure(index, ["awk", "no-such-package"])
    assert selected == {"mawk"}
    assert missing == ["no-such-package"]


def test_priority_seeds(index):
    # mawk is Priority: required, kmod important; the rest optional
    assert dm.priority_seeds(index) == ["kmod", "mawk"]
    assert dm.priority_seeds(index, ("optional",)) == sorted(set(index.by_name) - {"kmod", "mawk"})


# ---- the seed --------------------------------------------------------------------

def test_every_seed_entry_says_where_it_comes_from():
    entries = dm.read_seed_file()
    assert entries
    for name, origin in entries:
        assert re.fullmatch(r"[a-z0-9][a-z0-9+.\-]*", name), name
        assert origin, "%s has no comment saying where it comes from" % name


def _literal_apt_names(node, found):
    """Package names of ansible.builtin.apt tasks that name them literally (no template)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.apt", "apt") and isinstance(value, dict):
                names = value.get("name", value.get("pkg"))
                for name in names if isinstance(names, list) else [names]:
                    if isinstance(name, str) and "{{" not in name:
                        found.add(name.split("=")[0])
            else:
                _literal_apt_names(value, found)
    elif isinstance(node, list):
        for item in node:
            _literal_apt_names(item, found)


def _vars(path, key):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)[key]


def test_the_seed_names_what_the_roles_scenarios_and_stand_ins_install():
    """A Debian package a role, a VM scenario or a stand-in vendor package installs must be in
    the seed, or the guest's apt cannot find it: add it to debian-slim-seed.txt."""
    seed = {name for name, _ in dm.read_seed_file()}
    wanted = set()
    wanted |= set(_vars("roles/gpudirect_verify/vars/Debian.yml", "__gpudirect_verify_build_packages"))
    wanted |= set(_vars("roles/gpudirect_mlnx_ofed/vars/Debian-12.yml", "__gpudirect_mlnx_ofed_inbox_packages"))
    wanted |= set(_vars("roles/gpudirect_pcie_acs/vars/main.yml", "__gpudirect_pcie_acs_packages"))
    wanted |= set(_vars("roles/gpudirect_kernel_update/vars/Debian.yml",
                        "__gpudirect_kernel_update_default_packages"))
    wanted.add("mstflint")   # roles/gpudirect_nic_config/vars/main.yml (templated: mft or mstflint)
    files = []
    for top in ("roles", "playbooks", "molecule/rdma", "molecule/kernel_update", "molecule/secureboot",
                "molecule/pair", "molecule/resources/vm"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            files += [os.path.join(dirpath, n) for n in names if n.endswith((".yml", ".yaml"))]
    for path in files:
        with open(path, encoding="utf-8") as handle:
            try:
                data = yaml.safe_load(handle)
            except yaml.YAMLError:
                continue
        _literal_apt_names(data, wanted)
    with open(os.path.join(ROOT, "tests", "harness", "standin_repo", "build.sh"), encoding="utf-8") as handle:
        build = handle.read()
    for field in re.findall(r"(?:Pre-Depends|Depends|Recommends): ([^\"\n]*)", build):
        for group in field.split(","):
            for alt in group.split("|"):
                if "$" not in alt and alt.strip():   # $-versioned: another stand-in package
                    wanted.add(alt.split()[0])
    assert {"python3-debian", "grub2-common", "mokutil", "libibverbs-dev", "dkms", "python3"} <= wanted
    assert sorted(wanted - seed) == []


def test_image_packages_from_dpkg_query_or_dpkg_l(tmp_path):
    (tmp_path / "packages.txt").write_text(
        "Desired=Unknown/Install/Remove/Purge/Hold\n"
        "||/ Name           Version      Architecture Description\n"
        "+++-==============-============-============-=================\n"
        "ii  adduser        3.134        all          add and remove users and groups\n"
        "ii  libc6:amd64    2.36-9       amd64        GNU C Library\n"
        "rc  oldpkg         1.0          amd64        removed, config left\n")
    assert dm.read_image_packages(str(tmp_path)) == ["adduser", "libc6"]
    (tmp_path / "packages.list").write_text("adduser\t3.134\nzstd\t1.5.4\n")
    assert dm.read_image_packages(str(tmp_path)) == ["adduser", "zstd"]
    with pytest.raises(dm.SlimError):
        dm.read_image_packages(str(tmp_path / "nothing"))


def test_upstream_release_checks():
    release = ("Origin: Debian\nSuite: oldstable\nCodename: bookworm\nDate: Sat, 11 Jul 2026 10:16:37 UTC\n"
               "SHA256:\n 9e0b5aabb2465b3d2e7a7fe27f9913846277833f7a2826e7767acccff5b588c5  8790396 "
               "main/binary-amd64/Packages.xz\n abc 12 main/binary-amd64/Packages\n")
    assert dm.release_sha256(release, "main/binary-amd64/Packages.xz") == (
        "9e0b5aabb2465b3d2e7a7fe27f9913846277833f7a2826e7767acccff5b588c5", 8790396)
    assert dm.date_stamp(release) == "20260711T101637Z"
    with pytest.raises(dm.SlimError):
        dm.release_sha256(release, "contrib/binary-amd64/Packages.xz")


# ---- the server ------------------------------------------------------------------

@pytest.mark.parametrize("path,rel", [
    ("/debian/pool/main/m/mokutil/mokutil_0.6.0-2_amd64.deb", "pool/main/m/mokutil/mokutil_0.6.0-2_amd64.deb"),
    ("/debian/dists/bookworm/InRelease?x=1", "dists/bookworm/InRelease"),
    ("/debian/pool/main/g/gcc-12/g%2B%2B-12_12.2.0_amd64.deb", "pool/main/g/gcc-12/g++-12_12.2.0_amd64.deb"),
    ("/debian/pool/../dists/bookworm/Release", None),
    ("/debian/pool/main/%2e%2e/%2e%2e/etc/passwd", None),
    ("/debian/pool/main//x.deb", None),
    ("/debian/pool/./x.deb", None),
    ("/debian/pool/main\\x.deb", None),
    ("/debian//etc/passwd", None),
    ("/debian/", None),
    ("/etc/passwd", None),
])
def test_safe_relpath(path, rel):
    assert dm.safe_relpath(path) == rel


class _Upstream:
    """A local stand-in for Debian's mirror that counts what it is asked for."""

    def __init__(self, root):
        self.requests = []
        outer = self

        class H(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(root), **kw)

            def do_GET(self):
                outer.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/debian" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


GOOD = b"!<arch>\nthe good package\n" * 100
BAD_UPSTREAM = b"!<arch>\nnot what Packages says\n"


@pytest.fixture()
def slim(tmp_path):
    """A slim repository with two packages, its upstream, and a running server."""
    up = tmp_path / "upstream" / "debian" / "pool" / "main" / "g"
    up.mkdir(parents=True)
    (up / "good_1_amd64.deb").write_bytes(GOOD)
    (up / "bad_1_amd64.deb").write_bytes(BAD_UPSTREAM)
    repo = tmp_path / "repo" / "20260711T101637Z-test"
    dist = repo / "debian" / "dists" / "bookworm"
    (dist / "main" / "binary-amd64").mkdir(parents=True)
    stanzas = [
        "Package: good\nVersion: 1\nArchitecture: amd64\nFilename: pool/main/g/good_1_amd64.deb\n"
        "Size: %d\nSHA256: %s\n" % (len(GOOD), hashlib.sha256(GOOD).hexdigest()),
        "Package: bad\nVersion: 1\nArchitecture: amd64\nFilename: pool/main/g/bad_1_amd64.deb\n"
        "Size: 27\nSHA256: %s\n" % hashlib.sha256(b"what the Packages entry says").hexdigest(),
    ]
    (dist / "main" / "binary-amd64" / "Packages").write_text("\n".join(stanzas))
    (dist / "Release").write_text("Origin: Debian\n")
    (dist / "InRelease").write_text("signed Origin: Debian\n")
    upstream = _Upstream(tmp_path / "upstream")
    keyring = tmp_path / "key.gpg"
    keyring.write_bytes(b"public key")
    server = dm.make_server(str(repo), 0, upstream_base=upstream.url, pool_dir=str(tmp_path / "pool"),
                            keyring=str(keyring))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server, upstream, tmp_path
    server.shutdown()
    server.server_close()
    upstream.close()


def _get(server, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def test_a_pool_file_is_fetched_once_checked_and_then_served_from_the_cache(slim):
    server, upstream, tmp = slim
    status, body, _ = _get(server, "/debian/pool/main/g/good_1_amd64.deb")
    assert (status, body) == (200, GOOD)
    assert upstream.requests == ["/debian/pool/main/g/good_1_amd64.deb"]
    sha = hashlib.sha256(GOOD).hexdigest()
    assert (tmp / "pool" / sha[:2] / sha / "good_1_amd64.deb").read_bytes() == GOOD
    upstream.close()   # from now on only the cache can answer
    status, body, headers = _get(server, "/debian/pool/main/g/good_1_amd64.deb")
    assert (status, body) == (200, GOOD)
    assert headers["Content-Length"] == str(len(GOOD))
    assert upstream.requests == ["/debian/pool/main/g/good_1_amd64.deb"]


def test_a_pool_file_whose_hash_differs_is_refused_and_not_kept(slim):
    server, upstream, tmp = slim
    status, body, _ = _get(server, "/debian/pool/main/g/bad_1_amd64.deb")
    assert status == 502
    assert b"SHA256" in body and b"the Packages entry says" in body
    assert [p for p in (tmp / "pool").rglob("*") if p.is_file()] == []
    # asked again, it tries upstream again (nothing bad was cached)
    assert _get(server, "/debian/pool/main/g/bad_1_amd64.deb")[0] == 502
    assert upstream.requests.count("/debian/pool/main/g/bad_1_amd64.deb") == 2


@pytest.mark.parametrize("path,status", [
    ("/debian/pool/main/g/other_1_amd64.deb", 404),          # not in the slim Packages
    ("/debian/pool/main/g/../g/good_1_amd64.deb", 400),
    ("/debian/pool/main/%2e%2e/%2e%2e/dists/bookworm/Release", 400),
    ("/debian/dists/bookworm/../../../../etc/passwd", 400),
    ("/debian/dists/bookworm/nothing", 404),
    ("/etc/passwd", 404),
    ("/debian/other/file", 404),
])
def test_bad_paths_are_refused_without_asking_upstream(slim, path, status):
    server, upstream, _ = slim
    assert _get(server, path)[0] == status
    assert upstream.requests == []


def test_dists_files_answer_if_modified_since_and_the_key_is_served(slim):
    server, _, _ = slim
    status, body, headers = _get(server, "/debian/dists/bookworm/InRelease")
    assert (status, body) == (200, b"signed Origin: Debian\n")
    assert _get(server, "/debian/dists/bookworm/InRelease",
                {"If-Modified-Since": headers["Last-Modified"]})[0] == 304
    assert _get(server, "/debian/dists/bookworm/InRelease",
                {"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})[0] == 200
    assert _get(server, "/keys/gpudirect-debian-slim.gpg")[:2] == (200, b"public key")


def test_files_of_an_earlier_subset_are_still_served(tmp_path):
    """A guest that read an earlier subset's lists (the upstream moved on mid-suite) still
    gets its .debs: the server's pool index covers the repositories kept beside it."""
    for name, pkg in (("20260101T000000Z-old", "old"), ("20260711T101637Z-new", "new")):
        dist = tmp_path / name / "debian" / "dists" / "bookworm" / "main" / "binary-amd64"
        dist.mkdir(parents=True)
        (dist / "Packages").write_text("Package: %s\nFilename: pool/main/%s.deb\nSize: 1\nSHA256: %s\n"
                                       % (pkg, pkg, pkg * 8))
    index = dm.pool_index(str(tmp_path / "20260711T101637Z-new"), [str(tmp_path / "20260101T000000Z-old")])
    assert set(index) == {"pool/main/old.deb", "pool/main/new.deb"}


# ---- vm.py starts it for an image that needs it -------------------------------------

def test_vm_start_serves_the_slim_repository_an_image_names(tmp_path, monkeypatch):
    from conftest import load_vm_harness
    vm = load_vm_harness("gpudirect_vm")
    calls = []
    serving = {"rc": 3}

    def fake_call(argv, **kw):
        calls.append(argv[2:])
        return serving["rc"] if argv[2] == "status" else 0

    monkeypatch.setattr(vm.subprocess, "call", fake_call)
    old = tmp_path / "old-image"
    old.mkdir()
    vm.ensure_debian_slim(old)             # an image from before: Debian's mirror, nothing to start
    assert calls == []
    new = tmp_path / "new-image"
    new.mkdir()
    (new / "debian-slim-port").write_text("8767\n")
    vm.ensure_debian_slim(new)
    assert calls == [["status", "--port", "8767"], ["start", "--port", "8767", "--image", str(new)]]
    calls.clear()
    serving["rc"] = 0                      # already served: only asked
    vm.ensure_debian_slim(new)
    assert calls == [["status", "--port", "8767"]]
