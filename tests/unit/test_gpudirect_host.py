"""module_utils/gpudirect_host.py: the host adapter, the file reader and the atomic write
that the plan modules, gpudirect_lock and gpudirect_repo_key share."""

import os
import stat
import types

import pytest

from ansible.module_utils import gpudirect_host as host_utils


def test_read_text_keeps_the_text_and_answers_default_when_missing(tmp_path):
    path = tmp_path / "version"
    path.write_bytes(b"580.95.05\n")
    assert host_utils.read_text(str(path)) == "580.95.05\n"
    assert host_utils.read_text(str(tmp_path / "absent")) is None
    assert host_utils.read_text(str(tmp_path / "absent"), "") == ""
    # a directory is unreadable as a file: the default, not an exception
    assert host_utils.read_text(str(tmp_path), "") == ""


def test_read_text_reads_a_byte_that_is_not_utf8_as_a_replacement(tmp_path):
    """A Latin-1 comment in a limits.conf must not end the module with UnicodeDecodeError."""
    path = tmp_path / "limits.conf"
    path.write_bytes(b"# Andr\xe9\n*  hard  memlock  unlimited\n")
    assert host_utils.read_text(str(path)) == "# Andr\ufffd\n*  hard  memlock  unlimited\n"


def test_read_attr_is_read_text_stripped(tmp_path):
    """The sysfs reader gpudirect_pci had as its own read_text: same answers, now one implementation."""
    path = tmp_path / "current_link_speed"
    path.write_bytes(b"  16.0 GT/s PCIe\n")
    assert host_utils.read_attr(str(path)) == "16.0 GT/s PCIe"
    (tmp_path / "empty").write_bytes(b"\n")
    assert host_utils.read_attr(str(tmp_path / "empty")) == ""
    assert host_utils.read_attr(str(tmp_path / "absent")) is None
    assert host_utils.read_attr(str(tmp_path / "absent"), "none") == "none"
    assert host_utils.read_attr(str(tmp_path), "dir") == "dir"


def test_read_attr_reads_a_byte_that_is_not_utf8_as_a_replacement(tmp_path):
    """gpudirect_pci's copy answered the default for such a file (and, under LANG=C on Python 3.6,
    for any non-ASCII byte): the one helper keeps the rest of the text whatever the locale."""
    path = tmp_path / "fw_ver"
    path.write_bytes(b"16.35.\xff4030\n")
    assert host_utils.read_attr(str(path)) == "16.35.\ufffd4030"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a mode-000 file")
def test_readers_answer_the_default_for_an_unreadable_file(tmp_path):
    path = tmp_path / "secret"
    path.write_bytes(b"x\n")
    path.chmod(0)
    try:
        assert host_utils.read_text(str(path), "d") == "d"
        assert host_utils.read_attr(str(path), "d") == "d"
        assert host_utils.read_bytes(str(path), b"d") == b"d"
    finally:
        path.chmod(0o600)


def test_read_bytes_keeps_every_byte(tmp_path):
    """/proc/<pid>/environ: NUL-separated, not text."""
    path = tmp_path / "environ"
    path.write_bytes(b"SSH_CONNECTION=10.0.0.1 5 10.0.0.2 22\0LANG=\xe9\0")
    assert host_utils.read_bytes(str(path)) == b"SSH_CONNECTION=10.0.0.1 5 10.0.0.2 22\0LANG=\xe9\0"
    assert host_utils.read_bytes(str(tmp_path / "absent")) is None
    assert host_utils.read_bytes(str(tmp_path), b"") == b""


def test_host_read_and_run_strip_nothing_but_command_output(tmp_path):
    path = tmp_path / "class"
    path.write_text("0x068000\n")
    host = host_utils.Host(lambda argv: (0, " x \n", None))
    assert host.read(str(path)) == "0x068000\n"
    assert host.read(str(tmp_path / "absent")) == ""
    assert host.run(["true"]) == (0, "x", "")
    assert host.release() == os.uname()[2]


def test_module_runner_runs_list_form_in_the_c_locale_and_answers_127_for_a_missing_tool():
    calls = []
    module = types.SimpleNamespace(
        get_bin_path=lambda name: "/usr/sbin/" + name if name == "modinfo" else None,
        run_command=lambda argv, environ_update: calls.append((argv, environ_update)) or (0, "ok\n", ""))
    run = host_utils.module_runner(module)
    assert run(["modinfo", "-n", "nvidia"]) == (0, "ok\n", "")
    assert run(["ofed_info", "-s"]) == (127, "", "ofed_info: not found on this node")
    assert calls == [(["modinfo", "-n", "nvidia"], {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"})]


class _Failed(Exception):
    pass


def _failing_module(answer):
    calls = []

    def fail_json(**kwargs):
        raise _Failed(kwargs)
    return calls, types.SimpleNamespace(
        run_command=lambda argv, environ_update: calls.append((argv, environ_update)) or answer,
        fail_json=fail_json)


def test_run_or_fail_gives_stdout_for_an_accepted_status_in_the_c_locale():
    calls, module = _failing_module((1, "doca-ofed 2.10.0 hi \n", "dpkg-query: no packages found matching x\n"))
    assert host_utils.run_or_fail(module, ["dpkg-query", "-W", "doca-ofed", "x"], ok=(0, 1)) == "doca-ofed 2.10.0 hi \n"
    assert calls == [(["dpkg-query", "-W", "doca-ofed", "x"], {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"})]


def test_run_or_fail_names_the_command_its_status_and_what_it_printed():
    # a message in the shape networkctl prints when systemd-networkd is not running (composed)
    _, module = _failing_module((1, "", "Failed to reload network settings: Unit dbus-org.freedesktop.network1.service not found.\n"))
    with pytest.raises(_Failed) as failed:
        host_utils.run_or_fail(module, ["/usr/bin/networkctl", "reload"])
    result = failed.value.args[0]
    assert result["msg"] == ("/usr/bin/networkctl reload failed (rc 1): Failed to reload network settings: "
                             "Unit dbus-org.freedesktop.network1.service not found.")
    assert result["rc"] == 1
    # nothing on stderr: stdout is what it printed
    _, module = _failing_module((2, "ofed_info: unknown option\n", ""))
    with pytest.raises(_Failed, match="rc 2"):
        host_utils.run_or_fail(module, ["ofed_info", "-z"])


def test_write_beside_places_the_whole_file_with_its_mode_in_a_new_directory(tmp_path):
    dest = tmp_path / "keyrings" / "cuda.asc"
    placed = host_utils.write_beside(str(dest), b"key\n", 0o640, ".test-", lambda tmp: os.rename(tmp, str(dest))
                                     or "placed")
    assert placed == "placed"
    assert dest.read_bytes() == b"key\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "keyrings").stat().st_mode) & 0o755 == 0o755
    assert os.listdir(str(tmp_path / "keyrings")) == ["cuda.asc"]


def test_write_beside_leaves_no_temporary_file_when_place_refuses_or_fails(tmp_path):
    dest = tmp_path / "run.lock"
    dest.write_text("held by another run\n")
    assert host_utils.write_beside(str(dest), "ours\n", 0o644, ".test-", lambda tmp: False) is False

    def fail(tmp):
        raise OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        host_utils.write_beside(str(dest), "ours\n", 0o644, ".test-", fail)
    assert dest.read_text() == "held by another run\n"
    assert os.listdir(str(tmp_path)) == ["run.lock"]
