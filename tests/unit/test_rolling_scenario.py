"""The rolling scenario's fake scheduler and log checker (molecule/rolling/files).

GOOD is the fake scheduler's log of a run of molecule/rolling/rolling.yml (local
connection, 2026-11-24); each test breaks one promise of issue #13 and expects
check_rolling.py to name it.
"""

import importlib.util
import os

import pytest

from conftest import ROOT

FILES = os.path.join(ROOT, "molecule", "rolling", "files")


def _load(name):
    spec = importlib.util.spec_from_file_location("_rolling_" + name, os.path.join(FILES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load("check_rolling")
scheduler = _load("fake_scheduler")

GOOD = """\
1795538950.965 job gpudirect-roll1 4
1795538950.987 job gpudirect-roll3 4
1795538952.186 start gpudirect-roll1
1795538953.563 drain gpudirect-roll1
1795538954.172 busy gpudirect-roll1
1795538958.130 idle gpudirect-roll1
1795538958.549 disrupt gpudirect-roll1 job=no
1795538960.208 resume gpudirect-roll1
1795538961.195 end gpudirect-roll1
1795538961.826 start gpudirect-roll3
1795538963.167 drain gpudirect-roll3
1795538963.710 busy gpudirect-roll3
1795538967.753 idle gpudirect-roll3
1795538968.189 disrupt gpudirect-roll3 job=no
1795538970.302 end gpudirect-roll3
"""
TABLE = ('        "gpudirect-roll3  failed at \'Fail the node\': verification failed  '
         'python3 /x/molecule/rolling/files/fake_scheduler.py /s/real resume gpudirect-roll3"\n')


def test_the_good_run_passes():
    assert check.problems(GOOD, TABLE, "") == []


@pytest.mark.parametrize("log,output,check_log,expected", [
    (GOOD.replace("1795538961.826 start gpudirect-roll3", "1795538960.000 start gpudirect-roll3"), TABLE, "",
     "batches overlap"),
    (GOOD.replace("disrupt gpudirect-roll1 job=no", "disrupt gpudirect-roll1 job=yes"), TABLE, "", "while its job ran"),
    (GOOD.replace("1795538958.130 idle gpudirect-roll1\n", ""), TABLE, "", "before it was drained and idle"),
    (GOOD + "1795538971.000 resume gpudirect-roll3\n", TABLE, "", "failed verification but was resumed"),
    (GOOD, "", "", "not named in the table"),
    (GOOD + "1795538959.000 drain gpudirect-roll2\n", TABLE, "", "needed nothing"),
    (GOOD + "1795538972.000 start gpudirect-roll4\n", TABLE, "", "max_fail_percentage 0"),
    (GOOD.replace("1795538960.208 resume gpudirect-roll1\n", ""), TABLE, "", "not resumed"),
    (GOOD, TABLE, "1795538900.000 drain gpudirect-roll1\n", "--check run called the scheduler"),
])
def test_each_broken_promise_is_named(log, output, check_log, expected):
    found = check.problems(log, output, check_log)
    assert any(expected in line for line in found), found


def test_a_job_runs_until_seconds_after_the_drain(tmp_path, monkeypatch):
    state = str(tmp_path)
    clock = [1000.0]
    monkeypatch.setattr(scheduler.time, "time", lambda: clock[0])
    assert scheduler.main(["x", state, "job", "n1", "4"]) == 0
    clock[0] = 2000.0                       # long before the drain: still running
    assert scheduler.main(["x", state, "idle", "n1"]) == 1
    assert scheduler.main(["x", state, "drain", "n1"]) == 0
    clock[0] = 2003.0
    assert scheduler.main(["x", state, "idle", "n1"]) == 1
    clock[0] = 2004.5
    assert scheduler.main(["x", state, "idle", "n1"]) == 0
    assert scheduler.main(["x", state, "disrupt", "n1"]) == 0
    with open(os.path.join(state, "log")) as handle:
        events = [line.split()[1:] for line in handle]
    assert events == [["job", "n1", "4"], ["busy", "n1"], ["drain", "n1"], ["busy", "n1"], ["idle", "n1"],
                      ["disrupt", "n1", "job=no"]]


# The "lose" run (batches of 2, roll1 unreachable after its disruptive step): the fake
# scheduler's log and the two tables of a run of molecule/rolling/rolling.yml with
# local-connection nodes (2026-11-24, tests/unit/test_rolling_unreachable.py's setup).
LOSE_LOG = """\
1795552117.287 start gpudirect-roll1
1795552117.463 start gpudirect-roll3
1795552126.986 drain gpudirect-roll1
1795552127.178 drain gpudirect-roll3
1795552130.288 idle gpudirect-roll1
1795552130.430 idle gpudirect-roll3
1795552132.700 disrupt gpudirect-roll3 job=no
1795552132.731 disrupt gpudirect-roll1 job=no
1795552143.873 resume gpudirect-roll3
1795552149.337 end gpudirect-roll3
"""
LOSE_OUTPUT = """\
        "NODE             WHY                                                            RESUME BY HAND",
        "gpudirect-roll1  unreachable in this run after its drain (last stage: disrupt)  \
python3 /x/molecule/rolling/files/fake_scheduler.py /s/lose resume gpudirect-roll1"
        "NODE             WHY                                                             RESUME BY HAND",
        "gpudirect-roll1  unreachable in this run after its drain (last stage: disrupt)  \
python3 /x/molecule/rolling/files/fake_scheduler.py /s/lose resume gpudirect-roll1",
        "gpudirect-roll4  not reached: the run stopped before its batch (not drained, not changed); \
run the playbook again  -"
"""


def test_the_good_lose_run_passes():
    assert check.lose_problems(LOSE_LOG, LOSE_OUTPUT) == []


@pytest.mark.parametrize("log,output,expected", [
    (LOSE_LOG, LOSE_OUTPUT.replace("gpudirect-roll1  unreachable", "gpudirect-roll9  unreachable"),
     "not named in any table"),
    (LOSE_LOG, LOSE_OUTPUT.replace("(last stage: disrupt)", ""), "last stage disrupt"),
    (LOSE_LOG, LOSE_OUTPUT.replace("resume gpudirect-roll1", "-"), "lacks its resume command"),
    (LOSE_LOG + "1795552144.000 resume gpudirect-roll1\n", LOSE_OUTPUT, "unreachable gpudirect-roll1 was resumed"),
    (LOSE_LOG.replace("1795552143.873 resume gpudirect-roll3\n", ""), LOSE_OUTPUT, "passed but was not resumed"),
    (LOSE_LOG + "1795552150.000 start gpudirect-roll4\n", LOSE_OUTPUT, "ran after a node of the batch"),
    (LOSE_LOG, LOSE_OUTPUT.replace("not reached", "skipped"), "not named as not reached"),
])
def test_each_broken_lose_promise_is_named(log, output, expected):
    found = check.lose_problems(log, output)
    assert any(expected in line for line in found), found


# The "unreach" run (batches of 1, roll3 made unreachable after its disruptive step): the fake
# scheduler's log and the end of the output of molecule/rolling/rolling.yml run over local-connection
# nodes on 2026-11-25 (ansible-core 2.19.14), paths shortened to /x and /s; the table's padding is kept.
UNREACH_LOG = """\
1795567191.230 start gpudirect-roll1
1795567194.402 drain gpudirect-roll1
1795567195.567 idle gpudirect-roll1
1795567196.313 disrupt gpudirect-roll1 job=no
1795567200.569 resume gpudirect-roll1
1795567203.020 end gpudirect-roll1
1795567204.706 start gpudirect-roll3
1795567206.387 drain gpudirect-roll3
1795567206.789 idle gpudirect-roll3
1795567207.165 disrupt gpudirect-roll3 job=no
"""
_PAD = " " * 40
UNREACH_OUTPUT = """\
ok: [gpudirect-roll1] => {
    "msg": [
        "no node was left drained by this run"
    ]
}

NODES LEFT BEHIND **************************************************************
Ansible ended the run in play 'Rolling batches' before the drain report could name these nodes (every node of a \
batch failed or became unreachable, or a failure outside the rescued steps went past max_fail_percentage). Nodes left \
drained, failed, unreachable, stopped or not reached:
NODE             WHY""" + _PAD + """RESUME BY HAND
gpudirect-roll3  unreachable in this run after its drain (last stage: disrupt); unreachable at 'Stand-in check on \
the node after its disruption': Task failed: Data could not be sent to remote host "127.0.0.1". Make sure this host \
can be reached over ssh: ssh: connect to host 127.0.0.1 port 9: Connection refused  \
python3 /x/molecule/rolling/files/fake_scheduler.py /s/unreach resume gpudirect-roll3
gpudirect-roll4  not reached: the run stopped before its batch (not drained, not changed); run the playbook again\
""" + _PAD + """-
"""


def test_the_good_unreach_run_passes():
    assert check.unreach_problems(UNREACH_LOG, UNREACH_OUTPUT) == []


@pytest.mark.parametrize("log,output,expected", [
    (UNREACH_LOG, UNREACH_OUTPUT.replace("NODES LEFT BEHIND", "PLAY RECAP"), "no NODES LEFT BEHIND table"),
    (UNREACH_LOG, UNREACH_OUTPUT.replace("gpudirect-roll3  unreachable", "gpudirect-roll9  unreachable"),
     "named 0 times"),
    (UNREACH_LOG, UNREACH_OUTPUT.replace("(last stage: disrupt)", ""), "last stage disrupt"),
    (UNREACH_LOG, UNREACH_OUTPUT.replace("resume gpudirect-roll3", "-"), "lacks its resume command"),
    (UNREACH_LOG, UNREACH_OUTPUT.replace("not reached", "skipped"), "not named as not reached"),
    (UNREACH_LOG, UNREACH_OUTPUT + "gpudirect-roll1  unreachable  -\n", "yet the NODES LEFT BEHIND table names it"),
    (UNREACH_LOG, UNREACH_OUTPUT.replace('"no node was left drained by this run"',
                                         '"gpudirect-roll3  unreachable in this run  -"'), "does not test the callback"),
    (UNREACH_LOG.replace("1795567200.569 resume gpudirect-roll1\n", ""), UNREACH_OUTPUT, "passed but was not resumed"),
    (UNREACH_LOG + "1795567210.000 resume gpudirect-roll3\n", UNREACH_OUTPUT, "unreachable gpudirect-roll3 was resumed"),
    (UNREACH_LOG + "1795567210.000 start gpudirect-roll4\n", UNREACH_OUTPUT, "ran after the batch before it was lost"),
])
def test_each_broken_unreach_promise_is_named(log, output, expected):
    found = check.unreach_problems(log, output)
    assert any(expected in line for line in found), found
