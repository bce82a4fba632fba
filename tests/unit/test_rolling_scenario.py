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
