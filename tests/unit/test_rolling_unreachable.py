"""A node lost mid-run (issue #13 outcome 3): named in the tables with its last stage, the
run stops before the next batch, and the nodes never reached are named.

Runs the rolling scenario's own playbook (molecule/rolling/rolling.yml: the real
gpudirect_drain role, the fake scheduler) over four local-connection nodes, batch size 2,
with roll1 made unreachable right after its disruptive step (its connection pointed at a
closed port, scenario knob rolling_lose) and every verification passing. The Molecule
scenario runs the same on containers (molecule/rolling/converge.yml, the "lose" run).
"""

import glob
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from conftest import ROOT
from hang_guard import HANG_GUARD_S

# the three tests read one ansible-playbook run (the module-scoped fixture): one xdist worker makes it
pytestmark = pytest.mark.xdist_group("rolling_unreachable")

NODES = ("gpudirect-roll1", "gpudirect-roll2", "gpudirect-roll3", "gpudirect-roll4")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lose")
    state = tmp / "state"
    state.mkdir()
    # the nodes' left-drained notes: under the role's directory, as it requires, removed after
    notes = "/var/lib/gpudirect/unit-notes-%s" % uuid.uuid4().hex
    prefix = "/run/lock/gpudirect-unit-%d-" % os.getpid()
    hosts = ["all:", "  children:", "    gpu_nodes:", "      hosts:"]
    for node in NODES:
        hosts.append("        %s: {ansible_connection: local, ansible_python_interpreter: %s, "
                     "gpudirect_drain_lock_file: '%s%s.lock', gpudirect_drain_left_drained_file: '%s/%s.json'}"
                     % (node, sys.executable, prefix, node, notes, node))
    (tmp / "hosts.yml").write_text("\n".join(hosts) + "\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp / "hosts.yml"),
            os.path.join(ROOT, "molecule", "rolling", "rolling.yml"),
            "-e", "rolling_state=%s" % state, "-e", "gpudirect_rolling_batch=2", "-e", "rolling_fail=none",
            "-e", "rolling_lose=gpudirect-roll1", "-e", "rolling_disrupted_file=%s" % (tmp / "disrupted")]
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        log = (state / "log").read_text() if (state / "log").exists() else ""
        locks = sorted(os.path.basename(p) for p in glob.glob(prefix + "*"))
    finally:
        shutil.rmtree(notes, ignore_errors=True)
        for path in glob.glob(prefix + "*"):
            os.remove(path)
    return proc, log, locks


def _table_lines(output, node):
    """The rows of the printed tables (debug prints each line as a quoted list item)."""
    return [line for line in output.splitlines() if line.strip().startswith('"%s  ' % node)]


def test_the_lost_node_is_named_with_its_stage_drain_and_resume_command(run):
    proc, _log, _locks = run
    assert proc.returncode == 4, proc.stdout[-4000:] + proc.stderr[-2000:]   # 4: a host was unreachable
    lost = _table_lines(proc.stdout, "gpudirect-roll1")
    assert len(lost) == 2, proc.stdout[-4000:]      # the batch's table and the run's
    assert all("unreachable in this run after its drain (last stage: disrupt)" in line for line in lost)
    assert all("fake_scheduler.py" in line and "resume gpudirect-roll1" in line for line in lost)


def test_the_run_stops_before_the_next_batch_and_names_the_node_not_reached(run):
    proc, log, _locks = run
    assert "gpudirect-roll4" not in log          # never drained, never touched
    later = _table_lines(proc.stdout, "gpudirect-roll4")
    assert len(later) == 1 and all("not reached: the run stopped before its batch" in line for line in later)
    assert "Not reached yet (1): gpudirect-roll4." in proc.stdout


def test_the_other_node_of_the_batch_is_resumed_and_the_lost_one_is_not(run):
    _proc, log, locks = run
    events = [line.split()[1:3] for line in log.splitlines()]
    assert ["resume", "gpudirect-roll3"] in events and ["resume", "gpudirect-roll1"] not in events
    # the lost node keeps its lock (nothing could release it): stale after its reboot or the timeout
    assert len(locks) == 1 and locks[0].endswith("gpudirect-roll1.lock")
