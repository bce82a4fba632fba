"""library/gpudirect_module_signing.py end to end through main(), against a DKMS tree under
tmp_path. modinfo and sign-file are stood in for by run_command: modinfo prints the field
layout of the real captures (tests/fixtures/secure_boot/modinfo_*.txt) for what the file
holds, and sign-file appends the kernel's signature trailer (struct module_signature, then
the magic string) whose PKCS#7 part names the certificate's serial."""

import os

from ansible.module_utils import basic
from ansible.module_utils import gpudirect_secure_boot as sb

import gpudirect_module_signing

HERE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "secure_boot")
KERNEL = "6.1.0-20-amd64"
CERT_PEM = os.path.join(HERE, "signing_cert.pem")
with open(CERT_PEM, "rb") as _handle:
    CERT = sb.parse_certificate(_handle.read())


def _trailer(key_id):
    sig = key_id.encode()
    return sig + b"\x00\x00\x02\x00\x00\x00\x00\x00" + len(sig).to_bytes(4, "big") + sb.SIGNATURE_MAGIC


def _modinfo_text(path):
    with open(path, "rb") as handle:
        data = handle.read()
    lines = ["filename:       %s" % path, "vermagic:       %s SMP preempt mod_unload modversions " % KERNEL]
    if data.endswith(sb.SIGNATURE_MAGIC):
        body = sb.strip_signature(data)
        key = data[len(body):len(data) - len(sb.SIGNATURE_MAGIC) - 12].decode()
        lines += ["sig_id:         PKCS#7", "signer:         test signer",
                  "sig_key:        %s" % ":".join(key[i:i + 2] for i in range(0, len(key), 2)).upper(),
                  "sig_hashalgo:   sha256"]
    return "\n".join(lines) + "\n"


def _setup(tmp_path, monkeypatch, modules, suffix=".ko", dkms=None):
    """modules: (package, module name, content) in chain order; suffix: the file name ending of
    both copies (".ko.xz" as a kernel with CONFIG_MODULE_COMPRESS_XZ installs them); dkms: the
    path get_bin_path gives for dkms (None: not on the node), whose calls succeed."""
    tree = tmp_path / "dkms"
    installed = {}
    calls = []
    for package, name, content in modules:
        mdir = tree / package / "1.0" / KERNEL / "x86_64" / "module"
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / (name + suffix)).write_bytes(content)
        dest = tmp_path / "lib" / (name + suffix)
        dest.parent.mkdir(exist_ok=True)
        dest.write_bytes(content)
        installed[name] = str(dest)

    def run_command(self, args, **kwargs):
        calls.append(list(args))
        if args[0] == "/usr/bin/modinfo":
            target = args[-1]
            if args[3:4] == ["-n"]:
                return 0, installed[target] + "\n", ""
            path = installed.get(target, target)
            if not os.path.exists(path):
                return 1, "", "modinfo: ERROR: Module %s not found.\n" % target
            return 0, _modinfo_text(path), ""
        if args[0] == "/fake/sign-file":
            _hash, _key, _cert, path = args[1:]
            with open(path, "ab") as handle:
                handle.write(_trailer(CERT["serial"]))
            return 0, "", ""
        if dkms and args[0] == dkms:
            return 0, "", ""
        return 1, "", "unexpected %s" % args

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {"modinfo": "/usr/bin/modinfo", "dkms": dkms}.get(name)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    return str(tree), installed, calls


def _args(tree, **extra):
    args = {"kernels": [KERNEL], "chain": ["mlnx-ofed-kernel", "nvidia", "gdrdrv"], "certificate": CERT_PEM,
            "dkms_tree": tree}
    args.update(extra)
    return args


def test_check_names_unsigned_and_foreign_modules(tmp_path, monkeypatch, run_module):
    tree, _installed, calls = _setup(tmp_path, monkeypatch, [
        ("nvidia", "nvidia", b"\x7fELF" + _trailer(CERT["serial"])),
        ("nvidia", "nvidia-peermem", b"\x7fELF" + _trailer("7606c784bc2fc6383861c16f32d56a038822681c")),
        ("gdrdrv", "gdrdrv", b"\x7fELF"),
    ])
    result = run_module(gpudirect_module_signing, _args(tree), check_mode=True)
    assert result["changed"] is False
    status = {m["module"]: m["status"] for m in result["modules"]}
    assert status == {"nvidia": "signed", "nvidia-peermem": "other_key", "gdrdrv": "unsigned"}
    assert len(result["problems"]) == 2
    assert all(KERNEL in p and "gpudirect_dkms_signing_cert" in p for p in result["problems"])
    assert not [c for c in calls if c[0] != "/usr/bin/modinfo"]


def test_sign_with_sign_file_is_idempotent(tmp_path, monkeypatch, run_module):
    tree, installed, calls = _setup(tmp_path, monkeypatch, [
        ("nvidia", "nvidia", b"\x7fELF-nvidia" + _trailer("7606c784bc2fc6383861c16f32d56a038822681c")),
        ("gdrdrv", "gdrdrv", b"\x7fELF-gdrdrv"),
    ])
    der = str(tmp_path / "signing-cert.der")
    args = _args(tree, action="sign", key="/etc/key.pem", sign_file="/fake/sign-file", certificate_der=der)
    planned = run_module(gpudirect_module_signing, args, check_mode=True)
    assert planned["changed"] is True and not os.path.exists(der)
    assert not [c for c in calls if c[0] == "/fake/sign-file"]

    done = run_module(gpudirect_module_signing, args)
    assert done["changed"] is True and done["problems"] == []
    signed_files = sorted(a["file"] for a in done["actions"] if a.get("how") == "sign-file")
    assert len(signed_files) == 4   # built and installed copy of each module
    with open(installed["nvidia"], "rb") as handle:
        data = handle.read()
    # the foreign signature was cut off before signing: one trailer, ours
    assert data == b"\x7fELF-nvidia" + _trailer(CERT["serial"])
    with open(der, "rb") as handle, open(os.path.join(HERE, "signing_cert.der"), "rb") as want:
        assert handle.read() == want.read()

    again = run_module(gpudirect_module_signing, args)
    assert again["changed"] is False and again["actions"] == []


def test_sign_without_key_fails_naming_the_knob(tmp_path, monkeypatch, run_module):
    tree, _installed, _calls = _setup(tmp_path, monkeypatch, [("gdrdrv", "gdrdrv", b"\x7fELF")])
    result = run_module(gpudirect_module_signing, _args(tree, action="sign"))
    assert result["failed"] and "gpudirect_dkms_signing_key_path" in result["msg"]


def test_unreadable_certificate_fails_naming_the_knob(tmp_path, monkeypatch, run_module):
    tree, _installed, _calls = _setup(tmp_path, monkeypatch, [("gdrdrv", "gdrdrv", b"\x7fELF")])
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    result = run_module(gpudirect_module_signing, _args(tree, certificate=str(bad)))
    assert result["failed"] and "gpudirect_dkms_signing_cert" in result["msg"]


# method=auto (the role's choice with DKMS 3.0.4+): modules already built are signed where they
# lie, no rebuild; Debian 12's kernel installs .ko files (the Secure Boot VM's chain under
# /lib/modules/6.1.0-50-amd64/updates/dkms/, tests/fixtures/secure_boot/debian12_ovmf/).
def test_auto_signs_uncompressed_modules_in_place_without_dkms(tmp_path, monkeypatch, run_module):
    tree, installed, calls = _setup(tmp_path, monkeypatch, [
        ("nvidia", "nvidia", b"\x7fELF-nvidia" + _trailer("3e4b64134476961533ea5b6d096ef91d1f883d3e")),
        ("gdrdrv", "gdrdrv", b"\x7fELF-gdrdrv"),
    ], dkms="/usr/sbin/dkms")
    args = _args(tree, action="sign", method="auto", key="/etc/key.pem", sign_file="/fake/sign-file")
    done = run_module(gpudirect_module_signing, args)
    assert done["changed"] is True and done["problems"] == []
    assert sorted(a["how"] for a in done["actions"]) == ["sign-file"] * 4
    assert not [c for c in calls if c[0] == "/usr/sbin/dkms" and c[1] != "--version"]
    with open(installed["gdrdrv"], "rb") as handle:
        assert handle.read() == b"\x7fELF-gdrdrv" + _trailer(CERT["serial"])
    again = run_module(gpudirect_module_signing, args)
    assert again["changed"] is False and again["actions"] == []


def test_auto_rebuilds_from_the_first_unsigned_compressed_module(tmp_path, monkeypatch, run_module):
    tree, _installed, calls = _setup(tmp_path, monkeypatch, [
        ("mlnx-ofed-kernel", "mlx5_ib", b"\x7fELF-ofed" + _trailer(CERT["serial"])),
        ("nvidia", "nvidia", b"\x7fELF-nvidia"),
        ("gdrdrv", "gdrdrv", b"\x7fELF-gdrdrv"),
    ], suffix=".ko.xz", dkms="/usr/sbin/dkms")
    args = _args(tree, action="sign", method="auto", key="/etc/key.pem", sign_file="/fake/sign-file")
    planned = run_module(gpudirect_module_signing, args, check_mode=True)
    assert planned["changed"] is True
    assert [(a["package"], a["how"].split(" (")[0]) for a in planned["actions"] if "package" in a] == [
        ("nvidia", "dkms remove + install"), ("gdrdrv", "dkms remove + install")]
    assert "nvidia.ko.xz" in planned["actions"][0]["how"]
    assert not [c for c in calls if c[0] == "/fake/sign-file" or c[0] == "/usr/sbin/dkms" and c[1] != "--version"]

    run_module(gpudirect_module_signing, args)
    # OFED's module is signed already: the rebuild starts at nvidia and keeps the chain order
    assert [c[1:4] for c in calls if c[0] == "/usr/sbin/dkms" and c[1] != "--version"] == [
        ["remove", "-m", "nvidia"], ["install", "-m", "nvidia"], ["remove", "-m", "gdrdrv"], ["install", "-m", "gdrdrv"]]
    assert not [c for c in calls if c[0] == "/fake/sign-file"]


def test_sign_file_fails_on_a_compressed_module_naming_it(tmp_path, monkeypatch, run_module):
    tree, _installed, _calls = _setup(tmp_path, monkeypatch, [("gdrdrv", "gdrdrv", b"\x7fELF")], suffix=".ko.zst")
    args = _args(tree, action="sign", method="sign_file", key="/etc/key.pem", sign_file="/fake/sign-file")
    result = run_module(gpudirect_module_signing, args)
    assert result["failed"] and "gdrdrv.ko.zst" in result["msg"] and "compressed" in result["msg"]


def test_auto_without_dkms_fails_naming_the_compressed_module(tmp_path, monkeypatch, run_module):
    tree, _installed, _calls = _setup(tmp_path, monkeypatch, [("gdrdrv", "gdrdrv", b"\x7fELF")], suffix=".ko.zst")
    args = _args(tree, action="sign", method="auto", key="/etc/key.pem", sign_file="/fake/sign-file")
    result = run_module(gpudirect_module_signing, args)
    assert result["failed"] and "dkms is not on the node" in result["msg"] and "gdrdrv.ko.zst" in result["msg"]
