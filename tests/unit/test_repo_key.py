"""The repository-key check: OpenPGP fingerprints as GnuPG computes them, and the
gpudirect_repo_key module that installs a key only when it is pinned (issue #15, outcome 6).

Fixtures: tests/fixtures/openpgp/README.md (throwaway keys; fingerprints printed by
``gpg --show-keys --with-colons``, GnuPG 2.2.40).
"""

import os
import stat

import pytest

import gpudirect_repo_key
from ansible.module_utils import gpudirect_openpgp as pgp

from conftest import PROJECT_FIXTURES

KEYS = os.path.join(PROJECT_FIXTURES, "openpgp")
A = "8E06DC4651F9081E0059621FE9AEE882C1904D23"
B = "B9397609B837E3643B916468665F7BF46C358BA2"
# NVIDIA's published CUDA repository key fingerprints (roles/gpudirect_nvidia_driver/defaults/main.yml)
CUDA_DEB = "EB693B3035CD5710E231E123A4B469963BF863CC"


def _read(name):
    with open(os.path.join(KEYS, name), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("name,expected", [
    ("key-a-ed25519.asc", [A]),
    ("key-b-rsa3072.gpg", [B]),
    ("key-b-rsa3072-comment.asc", [B]),
    ("keys-a-b.asc", [A, B]),
])
def test_fingerprints_match_gnupg(name, expected):
    assert pgp.primary_fingerprints(_read(name)) == expected


def test_crlf_armour_is_read():
    assert pgp.primary_fingerprints(_read("key-a-ed25519.asc").replace(b"\n", b"\r\n")) == [A]


@pytest.mark.parametrize("data,message", [
    (b"<html>404 Not Found</html>", "BEGIN PGP PUBLIC KEY BLOCK"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF\n", "END line"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "base64"),
])
def test_garbage_is_refused_with_a_reason(data, message):
    with pytest.raises(ValueError, match=message):
        pgp.primary_fingerprints(data)


def test_truncated_binary_key_is_refused():
    with pytest.raises(ValueError):
        pgp.primary_fingerprints(_read("key-b-rsa3072.gpg")[:100])


def test_normalise_accepts_grouped_fingerprints():
    assert pgp.normalise("eb69 3b30 35cd 5710 e231  e123 a4b4 6996 3bf8 63cc") == CUDA_DEB


def _args(tmp_path, key="key-a-ed25519.asc", fingerprints=(A,), **extra):
    args = {"url": "file://" + os.path.join(KEYS, key), "dest": str(tmp_path / "keyrings" / "vendor.asc"),
            "fingerprints": list(fingerprints), "knob": "gpudirect_mlnx_ofed_repo_key_fingerprints",
            "url_knob": "gpudirect_mlnx_ofed_repo_key_url", "http_knob": "gpudirect_mlnx_ofed_allow_insecure_http"}
    args.update(extra)
    return args


def test_wrong_fingerprint_writes_nothing(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path, fingerprints=[CUDA_DEB]))
    assert result["failed"] and not (tmp_path / "keyrings").exists()
    assert A in result["msg"] and "gpudirect_mlnx_ofed_repo_key_fingerprints" in result["msg"]
    assert "nothing was installed" in result["msg"]


def test_one_unpinned_key_in_the_file_is_enough_to_refuse(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path, key="keys-a-b.asc", fingerprints=[A]))
    assert result["failed"] and B in result["msg"]


def test_pinned_key_is_installed_once_then_unchanged(run_module, tmp_path):
    first = run_module(gpudirect_repo_key, _args(tmp_path))
    dest = tmp_path / "keyrings" / "vendor.asc"
    assert first["changed"] and first["fingerprints"] == [A]
    assert dest.read_bytes() == _read("key-a-ed25519.asc")
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o644
    second = run_module(gpudirect_repo_key, _args(tmp_path))
    assert not second["changed"]


def test_rotated_key_on_the_server_is_checked_again(run_module, tmp_path):
    run_module(gpudirect_repo_key, _args(tmp_path))
    # the server now serves another key: refused, and the installed one is left as it was
    result = run_module(gpudirect_repo_key, _args(tmp_path, key="key-b-rsa3072-comment.asc"))
    assert result["failed"] and B in result["msg"]
    assert (tmp_path / "keyrings" / "vendor.asc").read_bytes() == _read("key-a-ed25519.asc")
    # pinned: replaced
    result = run_module(gpudirect_repo_key, _args(tmp_path, key="key-b-rsa3072-comment.asc", fingerprints=[A, B]))
    assert result["changed"]
    assert (tmp_path / "keyrings" / "vendor.asc").read_bytes() == _read("key-b-rsa3072-comment.asc")


def test_check_mode_reports_and_writes_nothing(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path), check_mode=True)
    assert result["changed"] and not (tmp_path / "keyrings").exists()


def test_plain_http_needs_the_knob(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path, url="http://127.0.0.1:9/key.asc"))
    assert result["failed"] and "gpudirect_mlnx_ofed_allow_insecure_http: true" in result["msg"]


def test_short_key_id_is_not_a_pin(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path, fingerprints=["A4B469963BF863CC"]))
    assert result["failed"] and "40 or 64 hex digits" in result["msg"]
    assert not (tmp_path / "keyrings").exists()


def test_armour_round_trip_matches_gnupg_armour():
    binary = _read("key-b-rsa3072.gpg")
    armoured = pgp.armor(binary)
    assert pgp.dearmor(armoured) == binary
    assert pgp.primary_fingerprints(armoured) == [B]
    # the checksum line is the one GnuPG writes for the same packets
    gnupg_checksum = [ln for ln in _read("key-b-rsa3072-comment.asc").splitlines() if ln.startswith(b"=")]
    assert pgp.dearmor(_read("key-b-rsa3072-comment.asc")) == binary
    assert [ln for ln in armoured.splitlines() if ln.startswith(b"=")] == gnupg_checksum


def test_binary_key_is_armoured_for_an_asc_keyring(run_module, tmp_path):
    result = run_module(gpudirect_repo_key, _args(tmp_path, key="key-b-rsa3072.gpg", fingerprints=[B]))
    written = (tmp_path / "keyrings" / "vendor.asc").read_bytes()
    assert result["changed"] and written.startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert pgp.primary_fingerprints(written) == [B]
    assert not run_module(gpudirect_repo_key, _args(tmp_path, key="key-b-rsa3072.gpg", fingerprints=[B]))["changed"]
