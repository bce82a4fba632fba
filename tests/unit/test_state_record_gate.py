"""roles/gpudirect_state tasks/record.yml writes the converged-state record only after a
verification that passed in the same run (issue #31 outcome 6: breaking this gate left
every test green). A record written after a failed, unproven or skipped verification would
make the next run skip the node as converged, with nothing proven.

The role keeps its record under /var/lib/gpudirect/ (its validation refuses other paths), so
these runs are in check mode, which writes nothing: the record task reports ``changed`` (it
would write) or is skipped, and the role says why no record is written."""

import os
import re
import shutil
import uuid

import pytest

from conftest import play_on_localhost, role_tasks_play


RECORD_TASK = "Record the converged state for the next run's comparison"


def _record(tmp_path, **facts):
    """(what the record task did: changed/ok/skipping, the run's output)"""
    extra = dict({"gpudirect_state_inputs": {"digest": "0" * 64},
                  "gpudirect_state_record_path": "/var/lib/gpudirect/gate-test-never-written.json",
                  "gpudirect_state_units": []}, **facts)
    proc = play_on_localhost(tmp_path, role_tasks_play("gpudirect_state", "record"), extra, check=True)
    assert proc.returncode == 0, proc.stdout
    found = re.search(r"TASK \[gpudirect_state : %s\] \**\n(changed|ok|skipping): \[localhost\]"
                      % re.escape(RECORD_TASK), proc.stdout)
    assert found, proc.stdout
    return found.group(1), proc.stdout


def test_a_passed_verification_writes_the_record(tmp_path):
    did, out = _record(tmp_path, gpudirect_verify_status="passed")
    assert did == "changed", out
    assert "no converged-state record written" not in out


@pytest.mark.parametrize("status", ["failed", "not_proven", "skipped", "would_run", ""])
def test_no_record_without_a_passed_verification(tmp_path, status):
    did, out = _record(tmp_path, gpudirect_verify_status=status)
    assert did == "skipping"
    assert "no converged-state record written: verification did not pass in this run" in out
    assert "the record is written only after a verification that passed" in out


def test_no_record_when_verification_did_not_run(tmp_path):
    did, out = _record(tmp_path)
    assert did == "skipping"
    assert "verification did not pass in this run (it did not run)" in out


def test_a_pending_reboot_writes_no_record_even_after_a_pass(tmp_path):
    did, out = _record(tmp_path, gpudirect_verify_status="passed", gpudirect_reboot_pending=True,
                        gpudirect_reboot_reasons=["gpudirect_nvidia_driver: nouveau blacklisted"])
    assert did == "skipping"
    assert "a reboot is pending (gpudirect_nvidia_driver: nouveau blacklisted)" in out


def test_an_in_service_pass_renews_a_record_a_full_verification_began(tmp_path):
    did, out = _record(tmp_path, gpudirect_verify_status="skipped", gpudirect_verify_in_service_passed=True,
                       gpudirect_state_recorded_at="2026-11-20T10:00:00Z")
    assert did == "changed", out


def test_an_in_service_pass_on_a_node_never_recorded_writes_nothing(tmp_path):
    did, out = _record(tmp_path, gpudirect_verify_status="skipped", gpudirect_verify_in_service_passed=True,
                       gpudirect_state_recorded_at=None)
    assert did == "skipping"
    assert "the node is in service, so verification only read it (gpudirect_verify_scope)" in out
    assert "the record waits for the loopback of a drained run" in out


def test_a_failed_in_service_check_writes_nothing_even_with_an_earlier_record(tmp_path):
    did, out = _record(tmp_path, gpudirect_verify_status="failed", gpudirect_verify_in_service_passed=False,
                       gpudirect_state_recorded_at="2026-11-20T10:00:00Z")
    assert did == "skipping"
    assert "verification did not pass in this run (failed)" in out


# The same gate with the record really written (this machine runs the tests as root): a path
# of the test's own under /var/lib/gpudirect/, as the role requires, removed after the run.
@pytest.fixture
def own_record_path():
    folder = "/var/lib/gpudirect/unit-record-%s" % uuid.uuid4().hex
    try:
        yield os.path.join(folder, "converged.json")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert not os.path.exists(folder)


def _record_for_real(tmp_path, path, **facts):
    extra = dict({"gpudirect_state_inputs": {"digest": "0" * 64}, "gpudirect_state_record_path": path,
                  "gpudirect_state_units": []}, **facts)
    proc = play_on_localhost(tmp_path, role_tasks_play("gpudirect_state", "record"), extra)
    assert proc.returncode == 0, proc.stdout
    return proc.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the role writes its record under /var/lib/gpudirect/ (root)")
def test_a_passed_verification_writes_the_record_on_disk(tmp_path, own_record_path):
    out = _record_for_real(tmp_path, own_record_path, gpudirect_verify_status="passed")
    assert os.path.isfile(own_record_path), out
    with open(own_record_path) as handle:
        assert "0" * 64 in handle.read()


@pytest.mark.skipif(os.geteuid() != 0, reason="the role writes its record under /var/lib/gpudirect/ (root)")
@pytest.mark.parametrize("status", ["not_proven", "failed"])
def test_an_unpassed_verification_writes_nothing_on_disk(tmp_path, own_record_path, status):
    out = _record_for_real(tmp_path, own_record_path, gpudirect_verify_status=status)
    assert not os.path.exists(own_record_path), out
    assert "no converged-state record written: verification did not pass in this run (%s)" % status in out
