"""Unit tests for library/gpudirect_dkms.py.

Parsers and the planner are tested directly; the module runs end to end through
main() against a fake DKMS: a stub ``dkms`` executable on PATH that keeps its
state in a DKMS tree under tmp_path laid out as DKMS lays it out
(``NAME/VERSION/source``, ``NAME/VERSION/KERNEL/ARCH/module``, ``NAME/kernel-KERNEL-ARCH``),
prints ``dkms status`` in the 2.x or 3.x format, builds by creating the module
directory and fails a build on request, leaving ``NAME/VERSION/build/make.log``.
Every call is logged, so the tests see exactly which dkms commands ran.
"""

import json
import os
import sys
import textwrap

import pytest

from ansible.module_utils.basic import AnsibleModule

import gpudirect_dkms
from gpudirect_dkms import parse_status, parse_status_line, plan_kernel, registry
from conftest import argument_spec_of

OLD = "6.1.0-18-amd64"
NEW = "6.1.0-20-amd64"
OFED_V = "24.10.OFED.24.10.1.1.4.1"
NV_V = "580.95.05"
ARCH = "x86_64"

STUB = textwrap.dedent("""\
    #!{python}
    import json, os, shutil, sys
    tree = os.environ["FAKE_DKMS_TREE"]
    src = os.environ["FAKE_DKMS_SRC"]
    fmt = os.environ.get("FAKE_DKMS_FORMAT", "3")
    args = sys.argv[1:]
    with open(os.environ["FAKE_DKMS_LOG"], "a") as fh:
        fh.write(json.dumps({{"argv": args, "lc_all": os.environ.get("LC_ALL")}}) + "\\n")
    opts = dict(zip(args[1::2], args[2::2]))
    name, version, kernel = opts.get("-m"), opts.get("-v"), opts.get("-k")

    def kdirs(n, v):
        base = os.path.join(tree, n, v)
        out = []
        for k in sorted(os.listdir(base)):
            if k in ("source", "build") or not os.path.isdir(os.path.join(base, k)):
                continue
            for a in sorted(os.listdir(os.path.join(base, k))):
                if os.path.isdir(os.path.join(base, k, a, "module")):
                    out.append((k, a))
        return out

    def installed(n, v, k, a):
        link = os.path.join(tree, n, "kernel-%s-%s" % (k, a))
        return os.path.islink(link) and os.readlink(link) == "%s/%s/%s" % (v, k, a)

    if args[0] == "status":
        sep = "/" if fmt == "3" else ", "
        for n in sorted(os.listdir(tree)):
            for v in sorted(os.listdir(os.path.join(tree, n))):
                if v.startswith("kernel-") or not os.path.isdir(os.path.join(tree, n, v)):
                    continue
                if not os.path.isdir(os.path.join(tree, n, v, "source")):
                    print("%s%s%s: broken" % (n, sep, v))
                    sys.stderr.write("Error! %s/%s: Missing the module source directory.\\n" % (n, v))
                    continue
                built = kdirs(n, v)
                for k, a in built:
                    print("%s%s%s, %s, %s: %s" % (n, sep, v, k, a, "installed" if installed(n, v, k, a) else "built"))
                if not built:
                    print("%s%s%s: added" % (n, sep, v))
        sys.exit(0)
    if args[0] == "add":
        os.makedirs(os.path.join(tree, name, version), exist_ok=True)
        os.symlink(os.path.join(src, "%s-%s" % (name, version)), os.path.join(tree, name, version, "source"))
        sys.exit(0)
    if args[0] == "install":
        if not os.path.isdir(os.path.join(tree, name, version, "source")):
            if fmt != "3":
                print("Error! The module/version combo: %s-%s is not located in the DKMS tree." % (name, version))
                sys.exit(3)
            os.makedirs(os.path.join(tree, name, version), exist_ok=True)
            os.symlink(os.path.join(src, "%s-%s" % (name, version)), os.path.join(tree, name, version, "source"))
        if installed(name, version, kernel, "x86_64"):
            print("Error! This module/version combo is already installed for kernel %s" % kernel)
            sys.exit(5)
        moddir = os.path.join(tree, name, version, kernel, "x86_64", "module")
        if not os.path.isdir(moddir):
            if name in os.environ.get("FAKE_DKMS_EXCLUDE", "").split(","):
                sys.stderr.write("Warning: The %s/%s/source/dkms.conf for module %s/%s includes a BUILD_EXCLUSIVE directive\\n"
                                 % (tree, name, name, version))
                sys.exit(77)
            if name in os.environ.get("FAKE_DKMS_FAIL", "").split(","):
                os.makedirs(os.path.join(tree, name, version, "build"), exist_ok=True)
                with open(os.path.join(tree, name, version, "build", "make.log"), "w") as fh:
                    fh.write("".join("make line %d\\n" % i for i in range(1, 101)))
                print("Error! Bad return status for module build on kernel: %s (x86_64)" % kernel)
                sys.exit(10)
            os.makedirs(moddir)
            open(os.path.join(moddir, name + ".ko"), "w").close()
        link = os.path.join(tree, name, "kernel-%s-x86_64" % kernel)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink("%s/%s/x86_64" % (version, kernel), link)
        sys.exit(0)
    if args[0] == "remove":
        shutil.rmtree(os.path.join(tree, name, version, kernel))
        link = os.path.join(tree, name, "kernel-%s-x86_64" % kernel)
        if os.path.lexists(link):
            os.remove(link)
        if not kdirs(name, version):
            shutil.rmtree(os.path.join(tree, name, version))
        sys.exit(0)
    sys.exit(2)
    """)


class FakeHost(object):
    """A root tree (proc, boot, lib/modules, etc/os-release), a DKMS tree and the dkms stub."""

    def __init__(self, tmp_path, monkeypatch, running=OLD, default=NEW, headers=(OLD, NEW), fmt="3"):
        self.root = str(tmp_path / "root")
        self.tree = str(tmp_path / "dkms")
        self.src = str(tmp_path / "src")
        self.log = str(tmp_path / "dkms-calls.log")
        bindir = tmp_path / "bin"
        for path in (self.root, self.tree, self.src, str(bindir)):
            os.makedirs(path)
        self.write("proc/sys/kernel/osrelease", running + "\n")
        self.write("etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
        if default:
            self.write("boot/vmlinuz-%s" % default, "")
            os.symlink("vmlinuz-%s" % default, os.path.join(self.root, "boot", "vmlinuz"))
        for kernel in {running, default} - {None}:
            os.makedirs(os.path.join(self.root, "lib", "modules", kernel))
        for kernel in headers:
            os.makedirs(os.path.join(self.root, "lib", "modules", kernel, "build"), exist_ok=True)
        stub = bindir / "dkms"
        stub.write_text(STUB.format(python=sys.executable))
        stub.chmod(0o755)
        monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
        monkeypatch.setenv("FAKE_DKMS_TREE", self.tree)
        monkeypatch.setenv("FAKE_DKMS_SRC", self.src)
        monkeypatch.setenv("FAKE_DKMS_LOG", self.log)
        monkeypatch.setenv("FAKE_DKMS_FORMAT", fmt)
        monkeypatch.delenv("FAKE_DKMS_FAIL", raising=False)
        monkeypatch.delenv("FAKE_DKMS_EXCLUDE", raising=False)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)

    def register(self, name, version):
        os.makedirs(os.path.join(self.src, "%s-%s" % (name, version)), exist_ok=True)
        with open(os.path.join(self.src, "%s-%s" % (name, version), "dkms.conf"), "w") as handle:
            handle.write('PACKAGE_NAME="%s"\nPACKAGE_VERSION="%s"\nAUTOINSTALL="yes"\n' % (name, version))
        os.makedirs(os.path.join(self.tree, name, version), exist_ok=True)
        os.symlink(os.path.join(self.src, "%s-%s" % (name, version)), os.path.join(self.tree, name, version, "source"))

    def build(self, name, version, kernel, when, installed=True):
        """Register NAME/VERSION and build it for KERNEL at epoch time ``when``."""
        if not os.path.isdir(os.path.join(self.tree, name, version)):
            self.register(name, version)
        moddir = os.path.join(self.tree, name, version, kernel, ARCH, "module")
        os.makedirs(moddir)
        open(os.path.join(moddir, name + ".ko"), "w").close()
        os.utime(moddir, (when, when))
        if installed:
            os.symlink("%s/%s/%s" % (version, kernel, ARCH), os.path.join(self.tree, name, "kernel-%s-%s" % (kernel, ARCH)))

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as handle:
            return [json.loads(line) for line in handle]

    def commands(self):
        """The dkms calls other than status, as strings."""
        return [" ".join(c["argv"]) for c in self.calls() if c["argv"][0] != "status"]

    def args(self, **extra):
        # the build-order files have tests of their own (the end of this file)
        args = {"dkms_tree": self.tree, "root": self.root, "build_order": False}
        args.update(extra)
        return args


def healthy(host, kernels=(OLD, NEW)):
    """OFED, then nvidia, then nv_peer_mem built and installed, in order, for each kernel."""
    for kernel in kernels:
        host.build("mlnx-ofed-kernel", OFED_V, kernel, 1000)
        host.build("nvidia", NV_V, kernel, 2000)
        host.build("nv_peer_mem", "1.3", kernel, 3000)


# ---------------------------------------------------------------------------
# dkms status parsing
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("line,expected", [
    # dkms 3.x
    ("nvidia/580.95.05, 6.1.0-20-amd64, x86_64: installed",
     ("nvidia", "580.95.05", "6.1.0-20-amd64", "x86_64", "installed", None, 3)),
    ("mlnx-ofed-kernel/24.10.OFED.24.10.1.1.4.1, 6.1.0-18-amd64, x86_64: built",
     ("mlnx-ofed-kernel", "24.10.OFED.24.10.1.1.4.1", "6.1.0-18-amd64", "x86_64", "built", None, 3)),
    ("nvidia/580.95.05, 6.1.0-18-amd64, x86_64: installed (Original modules exist)",
     ("nvidia", "580.95.05", "6.1.0-18-amd64", "x86_64", "installed", "(Original modules exist)", 3)),
    ("gdrdrv/2.4.4: added", ("gdrdrv", "2.4.4", None, None, "added", None, 3)),
    ("nv_peer_mem/1.3: broken", ("nv_peer_mem", "1.3", None, None, "broken", None, 3)),
    # dkms 2.x
    ("nvidia, 535.104.05, 5.15.0-91-generic, x86_64: installed",
     ("nvidia", "535.104.05", "5.15.0-91-generic", "x86_64", "installed", None, 2)),
    ("nv_peer_mem, 1.3, 5.15.0-91-generic, x86_64: installed (WARNING! Diff between built and installed module!)",
     ("nv_peer_mem", "1.3", "5.15.0-91-generic", "x86_64", "installed",
      "(WARNING! Diff between built and installed module!)", 2)),
    ("gdrdrv, 2.4: added", ("gdrdrv", "2.4", None, None, "added", None, 2)),
    ("nvidia, 535.104.05, 5.15.0-92-generic, x86_64: built", ("nvidia", "535.104.05", "5.15.0-92-generic",
                                                               "x86_64", "built", None, 2)),
    # weak installs (EL), printed with commas by both
    ("nvidia, 550.54.15, 5.14.0-427.el9.x86_64, x86_64: installed-weak from 5.14.0-362.el9.x86_64",
     ("nvidia", "550.54.15", "5.14.0-427.el9.x86_64", "x86_64", "installed-weak", "from 5.14.0-362.el9.x86_64", 2)),
])
def test_status_lines_of_both_formats(line, expected):
    entry = parse_status_line(line)
    assert (entry["name"], entry["version"], entry["kernel"], entry["arch"], entry["state"], entry["note"],
            entry["format"]) == expected


@pytest.mark.parametrize("line", [
    "",
    "garbage",
    "Error! Could not locate dkms.conf file.",
    "Warning: The built and installed modules have different checksums",
    "Deprecated feature: REMAKE_INITRD (/var/lib/dkms/nvidia/580.95.05/source/dkms.conf)",
    "nvidia/580.95.05, 6.1.0-20-amd64, x86_64: exploded",       # unknown state
    "nvidia/580.95.05: installed",                              # installed without a kernel
    "nvidia, 580.95.05, 6.1.0-20-amd64: installed",             # three fields
    "nvidia/580.95.05, 6.1.0-20-amd64, x86_64: installed junk",  # trailing text that is no note
    "nvidia/580.95.05, 6.1.0-20-amd64, x86_64 installed",       # no colon
    "nv/idia/580, 6.1.0-20-amd64, x86_64: installed",           # slash in the name
    "nvidia/580.95.05, 6.1.0-20-amd64, x86_64: broken",         # broken is per module, not per kernel
])
def test_malformed_and_message_lines_are_not_status(line):
    assert parse_status_line(line) is None


def test_parse_status_separates_messages_and_builds_the_registry():
    text = textwrap.dedent("""\
        Deprecated feature: REMAKE_INITRD (/var/lib/dkms/nvidia/580.95.05/source/dkms.conf)
        mlnx-ofed-kernel/24.10.OFED.24.10.1.1.4.1, 6.1.0-18-amd64, x86_64: installed
        nvidia/535.104.05: broken
        Error! nvidia/535.104.05: Missing the module source directory or the symbolic link pointing to it.
        Manual intervention is required!
        nvidia/580.95.05, 6.1.0-18-amd64, x86_64: installed (Original modules exist)
        nvidia/580.95.05, 6.1.0-20-amd64, x86_64: built

        gdrdrv, 2.4, 6.1.0-18-amd64, x86_64: installed
        something odd
        """)
    entries, messages = parse_status(text)
    assert len(entries) == 5
    assert messages == [
        "Deprecated feature: REMAKE_INITRD (/var/lib/dkms/nvidia/580.95.05/source/dkms.conf)",
        "Error! nvidia/535.104.05: Missing the module source directory or the symbolic link pointing to it.",
        "Manual intervention is required!",
        "something odd",
    ]
    reg = registry(entries)
    assert reg["nvidia"]["535.104.05"] == {"broken": True, "kernels": {}}
    assert reg["nvidia"]["580.95.05"]["kernels"] == {
        OLD: {"state": "installed", "arch": "x86_64", "note": "(Original modules exist)"},
        NEW: {"state": "built", "arch": "x86_64", "note": None},
    }
    assert reg["gdrdrv"]["2.4"]["kernels"][OLD]["state"] == "installed"
    assert parse_status("") == ([], [])


def test_version_choice_prefers_what_the_kernel_has_then_the_highest():
    reg = registry(parse_status(textwrap.dedent("""\
        nvidia/580.95.05, 6.1.0-18-amd64, x86_64: installed
        nvidia/580.105.08: added
        nvidia/999.1: broken
        """))[0])["nvidia"]
    assert gpudirect_dkms.choose_version(reg, OLD) == "580.95.05"
    assert gpudirect_dkms.choose_version(reg, NEW) == "580.105.08"
    assert gpudirect_dkms.choose_version({"1.0": {"broken": True, "kernels": {}}}, NEW) is None


# ---------------------------------------------------------------------------
# planning (pure)
# ---------------------------------------------------------------------------

def row(name, state="installed", when=None, version="1"):
    return {"name": name, "version": version, "state": state, "arch": ARCH, "build_time": when,
            "built_at": gpudirect_dkms.iso(when)}


def plan(*rows):
    return [(a["module"], a["action"]) for a in plan_kernel(NEW, list(rows), "dkms")]


def test_plan_nothing_when_built_in_order():
    assert plan(row("mlnx-ofed-kernel", when=100), row("nvidia", when=200), row("gdrdrv", when=300)) == []
    # the same second is not "before"
    assert plan(row("mlnx-ofed-kernel", when=100), row("nvidia", when=100)) == []


def test_plan_missing_module_and_everything_after_it():
    assert plan(row("mlnx-ofed-kernel", state="missing"), row("nvidia", when=200), row("gdrdrv", when=300)) == [
        ("mlnx-ofed-kernel", "install"), ("nvidia", "rebuild"), ("gdrdrv", "rebuild")]
    assert plan(row("mlnx-ofed-kernel", when=100), row("nvidia", state="missing"), row("gdrdrv", when=300)) == [
        ("nvidia", "install"), ("gdrdrv", "rebuild")]


def test_plan_wrong_order_by_build_time_rebuilds_from_there_on():
    actions = plan_kernel(NEW, [row("mlnx-ofed-kernel", when=500), row("nvidia", when=200),
                                row("nv_peer_mem", when=600), row("gdrdrv", when=700)], "/usr/sbin/dkms")
    assert [(a["module"], a["action"]) for a in actions] == [
        ("nvidia", "rebuild"), ("nv_peer_mem", "rebuild"), ("gdrdrv", "rebuild")]
    assert actions[0]["reason"] == ("built for %s at 1970-01-01T00:03:20Z, before mlnx-ofed-kernel "
                                    "(1970-01-01T00:08:20Z)" % NEW)
    assert "nvidia is (re)built" in actions[1]["reason"]
    assert actions[0]["commands"] == [["/usr/sbin/dkms", "remove", "-m", "nvidia", "-v", "1", "-k", NEW],
                                      ["/usr/sbin/dkms", "install", "-m", "nvidia", "-v", "1", "-k", NEW]]


def test_plan_compares_with_every_earlier_module_not_only_the_previous_one():
    # gdrdrv is newer than nv_peer_mem but older than nvidia
    assert plan(row("mlnx-ofed-kernel", when=100), row("nvidia", when=400), row("nv_peer_mem", when=100),
                row("gdrdrv", when=300)) == [("nv_peer_mem", "rebuild"), ("gdrdrv", "rebuild")]


def test_plan_built_but_not_installed_is_installed_without_a_cascade():
    actions = plan_kernel(NEW, [row("mlnx-ofed-kernel", when=100), row("nvidia", state="built", when=200),
                                row("gdrdrv", when=300)], "dkms")
    assert [(a["module"], a["action"]) for a in actions] == [("nvidia", "install")]
    assert actions[0]["commands"] == [["dkms", "install", "-m", "nvidia", "-v", "1", "-k", NEW]]


def test_plan_weak_installs_left_alone_unless_something_before_is_rebuilt():
    assert plan(row("mlnx-ofed-kernel", when=100), row("nvidia", state="installed-weak")) == []
    actions = plan_kernel(NEW, [row("mlnx-ofed-kernel", state="missing"), row("nvidia", state="installed-weak")],
                          "dkms")
    assert actions[1]["action"] == "rebuild"
    assert actions[1]["commands"] == [["dkms", "install", "-m", "nvidia", "-v", "1", "-k", NEW]]


# ---------------------------------------------------------------------------
# the module, end to end against the fake DKMS
# ---------------------------------------------------------------------------

def test_new_default_kernel_gets_the_chain_in_order(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    for name, version, when in (("mlnx-ofed-kernel", OFED_V, 1000), ("nvidia", NV_V, 2000),
                                ("nv_peer_mem", "1.3", 3000)):
        host.build(name, version, OLD, when)
    result = run_module(gpudirect_dkms, host.args())
    assert result["changed"] is True
    assert result["kernels"] == [
        {"release": OLD, "running": True, "default": False, "headers": True, "headers_package": "linux-headers-" + OLD},
        {"release": NEW, "running": False, "default": True, "headers": True, "headers_package": "linux-headers-" + NEW},
    ]
    assert result["default_source"] == "/boot/vmlinuz"
    assert host.commands() == ["install -m mlnx-ofed-kernel -v %s -k %s" % (OFED_V, NEW),
                               "install -m nvidia -v %s -k %s" % (NV_V, NEW),
                               "install -m nv_peer_mem -v 1.3 -k %s" % NEW]
    assert all(c["lc_all"] == "C" for c in host.calls())
    assert [(a["module"], a["action"], a["kernel"]) for a in result["actions"]] == [
        ("mlnx-ofed-kernel", "install", NEW), ("nvidia", "install", NEW), ("nv_peer_mem", "install", NEW)]
    assert result["actions"][0]["reason"] == "not built for %s" % NEW
    assert result["summary"] == ["%s (default): install mlnx-ofed-kernel/%s - not built for %s" % (NEW, OFED_V, NEW),
                                 "%s (default): install nvidia/%s - not built for %s" % (NEW, NV_V, NEW),
                                 "%s (default): install nv_peer_mem/1.3 - not built for %s" % (NEW, NEW)]
    assert result["skipped_modules"] == [{"module": "gdrdrv", "reason": "not registered in DKMS (dkms status does not list it)"}]
    new = result["modules"][NEW]
    assert [new[m]["state"] for m in ("mlnx-ofed-kernel", "nvidia", "nv_peer_mem")] == ["installed"] * 3
    assert new["mlnx-ofed-kernel"]["build_time"] <= new["nvidia"]["build_time"] <= new["nv_peer_mem"]["build_time"]
    assert result["modules"][OLD]["nvidia"]["build_time"] == 2000

    # a second run has nothing to do
    again = run_module(gpudirect_dkms, host.args())
    assert again["changed"] is False and again["actions"] == []
    assert again["msg"] == "DKMS modules up to date for kernels %s, %s" % (OLD, NEW)
    assert again["summary"] == [again["msg"]]
    assert len(host.commands()) == 3


def test_module_built_before_ofed_is_rebuilt_with_everything_after_it(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, default=None, headers=(OLD,))
    host.build("mlnx-ofed-kernel", OFED_V, OLD, 5000)    # OFED rebuilt after nvidia (autoinstall order)
    host.build("nvidia", NV_V, OLD, 2000)
    host.build("nv_peer_mem", "1.3", OLD, 6000)
    host.build("gdrdrv", "2.4", OLD, 7000)
    result = run_module(gpudirect_dkms, host.args())
    assert result["changed"] is True
    assert [(a["module"], a["action"]) for a in result["actions"]] == [
        ("nvidia", "rebuild"), ("nv_peer_mem", "rebuild"), ("gdrdrv", "rebuild")]
    assert "before mlnx-ofed-kernel" in result["actions"][0]["reason"]
    # the fake, like dkms, drops NAME/VERSION when its last kernel is removed; the module adds it back
    assert host.commands() == [
        "remove -m nvidia -v %s -k %s" % (NV_V, OLD), "add -m nvidia -v %s" % NV_V,
        "install -m nvidia -v %s -k %s" % (NV_V, OLD),
        "remove -m nv_peer_mem -v 1.3 -k %s" % OLD, "add -m nv_peer_mem -v 1.3", "install -m nv_peer_mem -v 1.3 -k %s" % OLD,
        "remove -m gdrdrv -v 2.4 -k %s" % OLD, "add -m gdrdrv -v 2.4", "install -m gdrdrv -v 2.4 -k %s" % OLD,
    ]
    mods = result["modules"][OLD]
    assert mods["mlnx-ofed-kernel"]["build_time"] == 5000
    assert 5000 < mods["nvidia"]["build_time"] <= mods["nv_peer_mem"]["build_time"] <= mods["gdrdrv"]["build_time"]
    assert [k["release"] for k in result["kernels"]] == [OLD]


def test_dkms2_format_and_re_add_after_remove_drops_the_module(tmp_path, monkeypatch, run_module):
    # dkms 2.x: "name, version, kernel, arch: state"; removing the only kernel unregisters the
    # module and dkms 2 install does not add it back by itself
    host = FakeHost(tmp_path, monkeypatch, default=None, headers=(OLD,), fmt="2")
    host.build("mlnx-ofed-kernel", OFED_V, OLD, 5000)
    host.build("nvidia", NV_V, OLD, 2000)
    result = run_module(gpudirect_dkms, host.args())
    assert host.commands() == ["remove -m nvidia -v %s -k %s" % (NV_V, OLD),
                               "add -m nvidia -v %s" % NV_V,
                               "install -m nvidia -v %s -k %s" % (NV_V, OLD)]
    assert result["modules"][OLD]["nvidia"]["state"] == "installed"
    assert result["modules"][OLD]["nvidia"]["build_time"] > 5000


def wrong_order_on_new(tmp_path, monkeypatch):
    """OLD healthy; on NEW nvidia was built before OFED, nv_peer_mem after both."""
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host, kernels=(OLD,))
    host.build("mlnx-ofed-kernel", OFED_V, NEW, 9000)
    host.build("nvidia", NV_V, NEW, 8000)
    host.build("nv_peer_mem", "1.3", NEW, 9500)
    return host


def test_wrong_order_on_one_kernel_leaves_the_other_alone(tmp_path, monkeypatch, run_module):
    host = wrong_order_on_new(tmp_path, monkeypatch)
    result = run_module(gpudirect_dkms, host.args())
    # nvidia stays registered (built for OLD), so no add is needed
    assert host.commands() == ["remove -m nvidia -v %s -k %s" % (NV_V, NEW), "install -m nvidia -v %s -k %s" % (NV_V, NEW),
                               "remove -m nv_peer_mem -v 1.3 -k %s" % NEW, "install -m nv_peer_mem -v 1.3 -k %s" % NEW]
    assert result["modules"][OLD]["nvidia"]["build_time"] == 2000
    assert result["modules"][NEW]["nvidia"]["build_time"] > 9000


def test_nothing_to_do_is_not_changed(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    result = run_module(gpudirect_dkms, host.args())
    assert result["changed"] is False and result["actions"] == []
    assert host.commands() == []
    assert result["modules"][NEW]["nvidia"] == {"version": NV_V, "state": "installed", "arch": ARCH,
                                                "build_time": 2000, "built_at": "1970-01-01T00:33:20Z"}


def test_check_mode_plans_and_runs_nothing_but_status(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host, kernels=(OLD,))
    result = run_module(gpudirect_dkms, host.args(), check_mode=True)
    assert result["changed"] is True
    assert [(a["module"], a["action"], a["kernel"]) for a in result["actions"]] == [
        ("mlnx-ofed-kernel", "install", NEW), ("nvidia", "install", NEW), ("nv_peer_mem", "install", NEW)]
    assert [c["argv"] for c in host.calls()] == [["status"]]
    assert not os.path.exists(os.path.join(host.tree, "nvidia", NV_V, NEW))
    assert result["modules"][NEW]["nvidia"]["state"] == "missing"
    assert result["msg"].startswith("would run 3 DKMS module build(s)")


def test_explicit_kernels_and_chain(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host, kernels=(OLD,))
    host.register("gdrdrv", "2.4")
    result = run_module(gpudirect_dkms, host.args(kernels=[NEW], chain=["mlnx-ofed-kernel", "nvidia", "absent"]))
    assert [k["release"] for k in result["kernels"]] == [NEW]
    assert result["kernels"][0]["default"] is True and result["kernels"][0]["running"] is False
    assert host.commands() == ["install -m mlnx-ofed-kernel -v %s -k %s" % (OFED_V, NEW),
                               "install -m nvidia -v %s -k %s" % (NV_V, NEW)]
    assert [s["module"] for s in result["skipped_modules"]] == ["absent"]
    assert set(result["modules"][NEW]) == {"mlnx-ofed-kernel", "nvidia"}


def test_no_dkms_on_the_host_changes_nothing(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    real = AnsibleModule.get_bin_path
    monkeypatch.setattr(AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **k: None if name == "dkms" else real(self, name, *a, **k))
    result = run_module(gpudirect_dkms, host.args(), check_mode=True)
    assert result["changed"] is False and result["actions"] == []
    assert result["skipped_modules"] == [{"module": m, "reason": "dkms is not installed"}
                                 for m in gpudirect_dkms.DEFAULT_CHAIN]
    assert result["modules"] == {OLD: {}, NEW: {}}
    assert result["summary"] == ["No module of the chain is registered in DKMS: nothing to build for kernels %s, %s"
                                 % (OLD, NEW)]
    assert host.calls() == []


def test_broken_versions_are_skipped(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, default=None, headers=(OLD,))
    host.build("mlnx-ofed-kernel", OFED_V, OLD, 1000)
    os.makedirs(os.path.join(host.tree, "nvidia", "535.104.05"))    # no source: broken
    result = run_module(gpudirect_dkms, host.args())
    assert result["changed"] is False
    assert result["skipped_modules"][0]["module"] == "nvidia" and "broken" in result["skipped_modules"][0]["reason"]
    assert any(m.startswith("Error! nvidia/535.104.05") for m in result["dkms_messages"])


# ---------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------

def test_missing_headers_fail_before_anything_is_built(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, headers=(OLD,))
    healthy(host, kernels=(OLD,))
    result = run_module(gpudirect_dkms, host.args())
    assert result["failed"] is True
    assert ("The headers of kernel %s are missing (%s/lib/modules/%s/build is absent)" % (NEW, host.root, NEW)
            in result["msg"])
    assert "install linux-headers-%s" % NEW in result["msg"]
    assert result["headers_package"] == "linux-headers-" + NEW
    assert host.commands() == []


def test_missing_headers_name_the_el_package(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, headers=(OLD,))
    host.write("etc/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')
    healthy(host, kernels=(OLD,))
    result = run_module(gpudirect_dkms, host.args())
    assert "install kernel-devel-%s" % NEW in result["msg"]


def test_missing_headers_only_noted_in_check_mode_and_harmless_without_work(tmp_path, monkeypatch,
                                                                                      run_module):
    host = FakeHost(tmp_path, monkeypatch, headers=(OLD,))
    healthy(host, kernels=(OLD,))
    result = run_module(gpudirect_dkms, host.args(), check_mode=True)
    assert "failed" not in result and len(result["actions"]) == 3
    assert [a["reason"] for a in result["actions"]] == [
        "not built for %s; headers missing: install linux-headers-%s first" % (NEW, NEW)] * 3
    assert result["kernels"][1]["headers"] is False and "warnings" not in result

    host = FakeHost(tmp_path / "b", monkeypatch, headers=())
    healthy(host)
    result = run_module(gpudirect_dkms, host.args())
    assert result["changed"] is False and "failed" not in result


def test_build_failure_shows_the_make_log_tail(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host, kernels=(OLD,))
    monkeypatch.setenv("FAKE_DKMS_FAIL", "nvidia")
    result = run_module(gpudirect_dkms, host.args())
    assert result["failed"] is True
    assert host.commands() == ["install -m mlnx-ofed-kernel -v %s -k %s" % (OFED_V, NEW),
                               "install -m nvidia -v %s -k %s" % (NV_V, NEW)]
    msg = result["msg"]
    assert msg.startswith("DKMS could not build nvidia %s for kernel %s (rc=10)" % (NV_V, NEW))
    assert "install -m nvidia -v %s -k %s" % (NV_V, NEW) in msg
    assert "Not built for this kernel either: nv_peer_mem." in msg
    assert "dkms said:\nError! Bad return status for module build on kernel: %s (x86_64)\n" % NEW in msg
    log = os.path.join(host.tree, "nvidia", NV_V, "build", "make.log")
    assert "Last 40 lines of %s:" % log in msg
    assert "make line 61\n" in msg and msg.endswith("make line 100")
    assert "make line 60\n" not in msg
    assert result["make_log_tail"] == ["make line %d" % i for i in range(61, 101)]
    assert (result["module"], result["version"], result["kernel"], result["rc"]) == ("nvidia", NV_V, NEW, 10)
    assert result["cmd"][1:] == ["install", "-m", "nvidia", "-v", NV_V, "-k", NEW]
    assert [a["module"] for a in result["done"]] == ["mlnx-ofed-kernel"]


def test_build_failure_log_lines(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, default=None, headers=(OLD,))
    host.register("gdrdrv", "2.4")
    monkeypatch.setenv("FAKE_DKMS_FAIL", "gdrdrv")
    result = run_module(gpudirect_dkms, host.args(log_lines=3))
    assert result["make_log_tail"] == ["make line 98", "make line 99", "make line 100"]
    assert "Not built for this kernel either" not in result["msg"]


def test_build_excluded_by_dkms_conf_says_so(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch, default=None, headers=(OLD,))
    host.build("mlnx-ofed-kernel", OFED_V, OLD, 1000)
    host.register("nv_peer_mem", "1.3")
    monkeypatch.setenv("FAKE_DKMS_EXCLUDE", "nv_peer_mem")
    result = run_module(gpudirect_dkms, host.args())
    assert result["failed"] is True and result["rc"] == 77
    assert result["msg"].startswith("DKMS refuses to build nv_peer_mem 1.3 for kernel %s (rc=77: BUILD_EXCLUSIVE" % OLD)
    assert "take nv_peer_mem out of the chain (gpudirect_dkms_chain)" in result["msg"]
    assert "includes a BUILD_EXCLUSIVE directive" in result["msg"]


@pytest.mark.parametrize("args,text", [
    ({"chain": []}, "chain must be a non-empty list"),
    ({"chain": ["nvidia", "nvidia"]}, "distinct"),
    ({"chain": ["nv idia"]}, "chain must be"),
    ({"kernels": ["6.1 bad"]}, "kernels must be kernel releases"),
    ({"log_lines": -1}, "log_lines must be 0 or more"),
])
def test_bad_options_fail_before_dkms_runs(tmp_path, monkeypatch, run_module, args, text):
    host = FakeHost(tmp_path, monkeypatch)
    result = run_module(gpudirect_dkms, host.args(**args))
    assert result["failed"] is True and text in result["msg"]
    assert host.calls() == []


def test_documentation_parses_and_matches_the_argument_spec(monkeypatch):
    import yaml
    doc = yaml.safe_load(gpudirect_dkms.DOCUMENTATION)
    assert yaml.safe_load(gpudirect_dkms.EXAMPLES)
    returned = yaml.safe_load(gpudirect_dkms.RETURN)
    assert {"kernels", "modules", "actions", "skipped_modules", "summary", "msg"} <= set(returned)
    seen = argument_spec_of(gpudirect_dkms, monkeypatch)
    assert set(seen) == set(doc["options"])
    for name, spec in seen.items():
        assert spec.get("default") == doc["options"][name].get("default"), name
        assert spec["type"] == doc["options"][name]["type"], name


def test_plan_defers_an_out_of_order_build_when_asked():
    deferred = []
    rows = [row("mlnx-ofed-kernel", when=500), row("nvidia", when=200), row("gdrdrv", when=700)]
    assert plan_kernel(NEW, rows, "dkms", deferred) == []
    assert deferred == [{"kernel": NEW, "module": "nvidia",
                         "reason": "built for %s at 1970-01-01T00:03:20Z, before mlnx-ofed-kernel "
                                   "(1970-01-01T00:08:20Z)" % NEW}]


def test_plan_deferring_still_builds_what_is_missing_and_all_after_it():
    deferred = []
    rows = [row("mlnx-ofed-kernel", state="missing"), row("nvidia", when=200), row("gdrdrv", when=100)]
    assert [(a["module"], a["action"]) for a in plan_kernel(NEW, rows, "dkms", deferred)] == [
        ("mlnx-ofed-kernel", "install"), ("nvidia", "rebuild"), ("gdrdrv", "rebuild")]
    assert deferred == []


def test_rebuild_out_of_order_false_builds_nothing_and_names_the_module(tmp_path, monkeypatch, run_module):
    host = wrong_order_on_new(tmp_path, monkeypatch)
    args = dict(host.args(), rebuild_out_of_order=False)
    result = run_module(gpudirect_dkms, args)
    assert result["changed"] is False and host.commands() == []
    assert [(d["module"], d["kernel"]) for d in result["deferred"]] == [("nvidia", NEW)]
    assert result["summary"][-1].startswith("left for a later pass: nvidia for %s, built for %s at" % (NEW, NEW))


# ---------------------------------------------------------------------------
# DKMS's own build order: BUILD_DEPENDS in a block of each chain module's dkms.conf (issue #27)
#
# Debian 12's dkms 3.0.10 (/usr/sbin/dkms): autoinstall reads each module's
# <tree>/NAME/VERSION/source/dkms.conf and builds a module only once every module of its
# BUILD_DEPENDS is installed for the kernel; a dependency that is neither installed nor about
# to be makes autoinstall fail ("autoinstall failed due to missing dependencies"), so only
# registered chain modules are named. Its read_conf also sources /etc/dkms/$module.conf, but
# autoinstall never sets $module, so that file does not count there: the rdma scenario saw
# gdrdrv built first with the block in /etc/dkms/gdrdrv.conf (2026-11-27).
# ---------------------------------------------------------------------------

VERSIONS = {"mlnx-ofed-kernel": OFED_V, "nvidia": NV_V, "nv_peer_mem": "1.3", "gdrdrv": "2.5.1"}


def conf(host, name):
    with open(os.path.join(host.src, "%s-%s" % (name, VERSIONS[name]), "dkms.conf")) as handle:
        return handle.read()


def bash_array(host, name):
    """BUILD_DEPENDS as bash (and so DKMS's safe_source) reads the file."""
    import subprocess
    path = os.path.join(host.src, "%s-%s" % (name, VERSIONS[name]), "dkms.conf")
    out = subprocess.run(["bash", "-c", 'source "$1"; printf "%s\\n" "${BUILD_DEPENDS[@]}"; echo "R=$BUILD_DEPENDS_REBUILD"',
                          "-", path], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    lines = out.splitlines()
    return [line for line in lines[:-1] if line], lines[-1][2:]


def original(name):
    return 'PACKAGE_NAME="%s"\nPACKAGE_VERSION="%s"\nAUTOINSTALL="yes"\n' % (name, VERSIONS[name])


def test_build_order_names_the_registered_modules_before_each(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)   # mlnx-ofed-kernel, nvidia, nv_peer_mem; gdrdrv not registered
    args = host.args()
    del args["build_order"]   # the module's default
    result = run_module(gpudirect_dkms, args)
    assert result["changed"] is True and result["actions"] == []
    assert conf(host, "mlnx-ofed-kernel") == original("mlnx-ofed-kernel")
    assert conf(host, "nvidia").startswith(original("nvidia") + "# BEGIN gpudirect_dkms build order")
    assert bash_array(host, "nvidia") == (["mlnx-ofed-kernel"], "")
    assert bash_array(host, "nv_peer_mem") == (["mlnx-ofed-kernel", "nvidia"], "")
    assert [(r["module"], r["version"], r["depends"], r["changed"]) for r in result["build_order"]] == [
        ("mlnx-ofed-kernel", OFED_V, [], False), ("nvidia", NV_V, ["mlnx-ofed-kernel"], True),
        ("nv_peer_mem", "1.3", ["mlnx-ofed-kernel", "nvidia"], True)]
    assert result["build_order"][1]["path"] == os.path.join(host.src, "nvidia-%s" % NV_V, "dkms.conf")
    assert any(line.startswith("wrote %s: DKMS autoinstall builds nvidia after mlnx-ofed-kernel"
                               % result["build_order"][1]["path"]) for line in result["summary"])
    assert host.commands() == []
    again = run_module(gpudirect_dkms, args)
    assert again["changed"] is False and not any(r["changed"] for r in again["build_order"])


def test_build_order_in_check_mode_writes_nothing(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    result = run_module(gpudirect_dkms, host.args(build_order=True), check_mode=True)
    assert result["changed"] is True
    assert conf(host, "nvidia") == original("nvidia")
    assert any(line.startswith("would write") for line in result["summary"])


def test_build_order_keeps_the_packages_lines_and_replaces_only_its_block(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    run_module(gpudirect_dkms, host.args(build_order=True))
    assert bash_array(host, "nvidia") == (["mlnx-ofed-kernel"], "")
    # OFED leaves the chain: nvidia is first and needs no block, nv_peer_mem's names nvidia alone
    result = run_module(gpudirect_dkms, host.args(build_order=True, chain=["nvidia", "nv_peer_mem"]))
    assert conf(host, "nvidia") == original("nvidia")
    assert bash_array(host, "nv_peer_mem") == (["nvidia"], "")
    assert conf(host, "nv_peer_mem").startswith(original("nv_peer_mem"))
    assert [(r["module"], r["changed"]) for r in result["build_order"]] == [("nvidia", True), ("nv_peer_mem", True)]


def test_build_order_sets_rebuild_where_dkms_knows_it(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    stub = tmp_path / "bin" / "dkms"
    # DKMS 3.2 and later handle the directive; the module reads the dkms script, not a version
    stub.write_text(stub.read_text() + "# BUILD_DEPENDS_REBUILD\n")
    result = run_module(gpudirect_dkms, host.args(build_order=True))
    assert bash_array(host, "nvidia") == (["mlnx-ofed-kernel"], "yes")
    assert [r["rebuild"] for r in result["build_order"]] == [False, True, True]


def test_build_order_false_leaves_the_dkms_conf_files_alone(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    result = run_module(gpudirect_dkms, host.args(build_order=False))
    assert result["changed"] is False and result["build_order"] == []
    assert conf(host, "nvidia") == original("nvidia")


def test_build_order_skips_broken_and_unregistered_modules(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    host.build("mlnx-ofed-kernel", OFED_V, OLD, 1000)
    host.build("gdrdrv", "2.5.1", OLD, 3000)
    host.register("nvidia", NV_V)
    os.remove(os.path.join(host.tree, "nvidia", NV_V, "source"))   # broken: its source is gone
    result = run_module(gpudirect_dkms, host.args(build_order=True, kernels=[OLD]))
    assert bash_array(host, "gdrdrv") == (["mlnx-ofed-kernel"], "")
    assert [r["module"] for r in result["build_order"]] == ["mlnx-ofed-kernel", "gdrdrv"]


def test_an_unreadable_dkms_conf_names_the_path_and_the_knob(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path, monkeypatch)
    healthy(host)
    os.remove(os.path.join(host.src, "nvidia-%s" % NV_V, "dkms.conf"))
    result = run_module(gpudirect_dkms, host.args(build_order=True))
    assert result["failed"] is True
    assert "nvidia-%s/dkms.conf" % NV_V in result["msg"] and "gpudirect_dkms_build_order" in result["msg"]
