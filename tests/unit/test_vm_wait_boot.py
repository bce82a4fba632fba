"""The VM harness waits for the guest's boot to be over, not only for sshd's first answer
(tests/harness/vm/vm.py boot_finished, used by wait-ssh).

Seen in the suite on 2026-11-27: gpudirect_kernel_update's node, booted from the saved disk,
answered `ssh true` 80 s after its start; 6 s later Ansible's first connection failed
with "kex_exchange_identification: Connection closed by remote host" and the scenario
stopped. The harness now also waits for `systemctl is-system-running --wait` and asks
again; a connection lost on the way means "not yet". Here ssh is a stand-in script.
"""

import os
import time

import pytest

from conftest import load_vm_harness

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def vm(tmp_path, monkeypatch):
    mod = load_vm_harness("gpudirect_vm_wait")
    return mod


def stand_in_ssh(vm, tmp_path, monkeypatch, state_rc, later_true_rc):
    """ssh stand-in: `systemctl is-system-running --wait` exits state_rc; the `true` after it exits later_true_rc."""
    calls = tmp_path / "calls"

    def ssh_cmd(info, *remote):
        rc = state_rc if remote[:1] == ("systemctl",) else later_true_rc
        return ["sh", "-c", "echo %s >>%s; exit %d" % ("-".join(remote), calls, rc)]

    monkeypatch.setattr(vm, "ssh_cmd", ssh_cmd)
    return calls


@pytest.mark.parametrize("state_rc, true_rc, finished", [
    (0, 0, True),      # running
    (1, 0, True),      # degraded: the boot is over; the scenario's checks judge the failed unit
    (255, 0, False),   # the connection closed while waiting: not yet
    (0, 255, False),   # over, but ssh does not answer again: not yet
])
def test_the_boot_is_over_only_when_systemd_says_so_and_ssh_answers_after_it(vm, tmp_path, monkeypatch, state_rc,
                                                                              true_rc, finished):
    calls = stand_in_ssh(vm, tmp_path, monkeypatch, state_rc, true_rc)
    assert vm.boot_finished({}, time.monotonic() + 30) is finished
    expected = ["systemctl-is-system-running---wait"] + ([] if state_rc == 255 else ["true"])
    assert calls.read_text().split() == expected


def test_a_boot_that_never_ends_costs_at_most_the_boot_wait_then_ssh_decides(vm, tmp_path, monkeypatch):
    calls = tmp_path / "calls"

    def ssh_cmd(info, *remote):
        if remote[:1] == ("systemctl",):
            return ["sleep", "30"]          # a unit that never finishes starting
        return ["sh", "-c", "echo true >>%s" % calls]

    monkeypatch.setattr(vm, "ssh_cmd", ssh_cmd)
    monkeypatch.setattr(vm, "BOOT_WAIT_S", 1)
    t0 = time.monotonic()
    assert vm.boot_finished({"name": "n1"}, time.monotonic() + 600) is True
    assert time.monotonic() - t0 < 10 and calls.read_text().split() == ["true"]
