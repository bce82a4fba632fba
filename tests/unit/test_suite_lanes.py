"""scripts/test.sh: the foreground lane's secureboot stage waits for the disk the
background lane's rdma scenario saves, not for the end of that scenario.

The function is cut out of the real script and run in bash with a stand-in
background lane (a sleeping process) and a stand-in rdma scenario that saves,
fails or has saved only in an earlier suite.
"""
import os
import subprocess
import sys
import textwrap

import pytest
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_bash(tmp_path, script, *prefix, **env):
    """Run ``script`` with bash in ``tmp_path`` (``prefix``: a command to run bash under, such
    as setsid), with TEST_SH naming the real scripts/test.sh and ``env`` added, on an
    environment without what scripts/test.sh gives its lanes: the unit tier runs inside the
    suite's own cpu lane, and a lane's LANE_* or GPUDIRECT_TEST_* would leak into the functions
    these tests run (a suite run found LANE_POOL="" emptying a test's pool)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LANE_", "GPUDIRECT_TEST_"))}
    base.update(env, TEST_SH=os.path.join(ROOT, "scripts", "test.sh"))
    return subprocess.run([*prefix, "bash", "-c", script], cwd=tmp_path, env=base, timeout=HANG_GUARD_S,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


HARNESS = textwrap.dedent("""\
    set -uo pipefail
    eval "$(sed -n '/^after_saved() {/,/^}/p' "$TEST_SH")"
    results=$PWD/results; : >"$results"
    export GPUDIRECT_CACHE=$PWD/cache
    t_all=$(date +%s)
    sleep 60 & GPUDIRECT_TEST_LANE_PID=$!
    case $MODE in
      save) (sleep 1; mkdir -p cache/vm/saved/rdma-converged; echo '{}' >cache/vm/saved/rdma-converged/saved.json) & ;;
      fail) (sleep 1; echo "@rdma FAILED" >>"$results") & ;;
      lane_dies) (sleep 1; kill "$GPUDIRECT_TEST_LANE_PID") & ;;
    esac
    sleep() { command sleep 0.2; }
    after_saved rdma rdma-converged; rc=$?
    kill "$GPUDIRECT_TEST_LANE_PID" 2>/dev/null
    exit $rc
""")


def run(tmp_path, mode, old_save=False):
    if old_save:
        d = tmp_path / "cache" / "vm" / "saved" / "rdma-converged"
        d.mkdir(parents=True)
        (d / "saved.json").write_text("{}")
        os.utime(d / "saved.json", (1, 1))
    return run_bash(tmp_path, HARNESS, MODE=mode)


def test_starts_once_the_disk_is_saved_while_the_scenario_goes_on(tmp_path):
    p = run(tmp_path, "save")
    assert p.returncode == 0, p.stdout
    assert "rdma saved its node (rdma-converged): starting" in p.stdout


def test_not_run_when_the_scenario_fails_before_saving(tmp_path):
    p = run(tmp_path, "fail")
    assert p.returncode == 1, p.stdout
    assert "the rdma scenario ended without saving its node (rdma-converged)" in p.stdout


def test_a_disk_saved_by_an_earlier_suite_is_not_taken_for_this_one(tmp_path):
    p = run(tmp_path, "fail", old_save=True)
    assert p.returncode == 1, p.stdout
    assert "starting" not in p.stdout


def test_not_run_when_the_background_lane_dies(tmp_path):
    p = run(tmp_path, "lane_dies")
    assert p.returncode == 1, p.stdout
    assert "ended without saving" in p.stdout


SAME_LANE = textwrap.dedent("""\
    set -uo pipefail
    eval "$(sed -n '/^after_saved() {/,/^}/p' "$TEST_SH")"
    results=$PWD/results; printf '%s' "$RESULTS" >"$results"
    export GPUDIRECT_CACHE=$PWD/cache
    t_all=$(date +%s)
    unset GPUDIRECT_TEST_LANE_PID
    if [[ $SAVED == yes ]]; then mkdir -p cache/vm/saved/rdma-converged; echo '{}' >cache/vm/saved/rdma-converged/saved.json; fi
    after_saved rdma rdma-converged
""")


def same_lane(tmp_path, results, saved):
    return run_bash(tmp_path, SAME_LANE, RESULTS=results, SAVED=saved)


def test_in_rdmas_own_lane_a_failed_rdma_without_a_save_stops_kernel_update(tmp_path):
    p = same_lane(tmp_path, "@rdma FAILED\n", "no")
    assert p.returncode == 1, p.stdout
    assert "the rdma scenario ended without saving its node (rdma-converged)" in p.stdout


def test_in_rdmas_own_lane_a_save_of_this_suite_lets_kernel_update_start(tmp_path):
    # rdma may fail in a later step, after its save: kernel_update still has its node
    p = same_lane(tmp_path, "@rdma FAILED\n", "yes")
    assert p.returncode == 0, p.stdout


def test_alone_kernel_update_starts_at_once(tmp_path):
    # scripts/test.sh kernel_update: no rdma in this suite; vm.py picks the saved or the pristine disk
    p = same_lane(tmp_path, "", "no")
    assert p.returncode == 0, p.stdout


POOL = textwrap.dedent("""\
    set -uo pipefail
    eval "$(sed -n '/^run_pool() {/,/^}/p' "$TEST_SH")"
    results=$PWD/results
    run_stages() { echo "$LANE $1" >>ran; command sleep 0.3; }
    LANE=a run_pool secureboot pair &
    LANE=b run_pool secureboot pair &
    wait
""")


def test_the_pool_runs_each_stage_once_in_whichever_lane_gets_to_it_first(tmp_path):
    p = run_bash(tmp_path, POOL)
    assert p.returncode == 0, p.stdout
    ran = (tmp_path / "ran").read_text().split("\n")
    stages = sorted(line.split()[1] for line in ran if line)
    assert stages == ["pair", "secureboot"], ran
    # both lanes worked: the one that took secureboot left pair to the other
    assert len({line.split()[0] for line in ran if line}) == 2, ran


def test_the_default_set_is_two_lanes_with_rdma_in_the_background_and_its_followers_pooled():
    """Two lanes for two cores, and the CPU-only tiers niced in a third (benchmarks/suite-time.md,
    2026-11-29); every stage of the default set is in one lane or the pool, and the table lists each."""
    text = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert "  lane vm rdma\n" in text
    # static and unit only in the CPU time the other lanes leave idle, no pool stage
    assert '  LANE_NICE=19 LANE_POOL="" lane cpu static unit\n' in text
    assert "  run_stages container slurm\n" in text
    assert 'export GPUDIRECT_TEST_POOL="kernel_update secureboot pair"' in text
    assert "order=(static unit container slurm rdma kernel_update secureboot pair)" in text
    # the foreground's kernel_update and secureboot (from the pool) know which lane saves rdma's node
    assert text.index("  lane vm rdma\n") < text.index('export GPUDIRECT_TEST_LANE_PID=${lane_pids[0]}')


REPORT = textwrap.dedent("""\
    set -uo pipefail
    eval "$(sed -n '/^report() {/,/^}/p' "$TEST_SH")"
    mkdir -p molecule/rdma
    results=$PWD/results
    printf '%s\\n' "$RESULTS" >"$results"
    order=(static unit container pair rdma kernel_update secureboot)
    t_all=$(( $(date +%s) - ELAPSED ))
    report
""")


def report(tmp_path, results, elapsed):
    return run_bash(tmp_path, REPORT, RESULTS="\n".join(results), ELAPSED=str(elapsed))


STAGES_OK = ["static ok 80", "unit ok 250", "container ok 900", "pair ok 500",
             "rdma ok 1100", "kernel_update ok 1300", "secureboot ok 1200"]


def test_report_gives_each_lane_and_the_total_against_60_and_90_minutes(tmp_path):
    p = report(tmp_path, STAGES_OK + ["lane vm 2710", "lane foreground 2995"], 3000)
    assert p.returncode == 0, p.stdout
    assert "lane vm               ended at  2710 s (45.2 min)" in p.stdout
    assert "lane foreground       ended at  2995 s (49.9 min)" in p.stdout
    assert "(50.0 min; aim 60 min: within; CI stops at 90 min: within)" in p.stdout
    assert p.stdout.rstrip().endswith("stages: 7 passed, 0 failed")


def test_report_says_over_and_fails_a_stage_that_left_no_result(tmp_path):
    # kernel_update's lane died before writing its line: a failure, and a suite over the aim
    p = report(tmp_path, [s for s in STAGES_OK if not s.startswith("kernel_update")] + ["lane foreground 3900"], 4000)
    assert p.returncode == 1, p.stdout
    assert "kernel_update  FAILED  (no result: the lane ended before it)" in p.stdout
    assert "aim 60 min: OVER; CI stops at 90 min: within" in p.stdout
    assert "stages: 6 passed, 1 failed" in p.stdout
    p = report(tmp_path, STAGES_OK, 5500)
    assert "CI stops at 90 min: OVER" in p.stdout


LANE = textwrap.dedent("""\\
    set -uo pipefail
    eval "$(sed -n '/^  lane() {/,/^  }/p' "$TEST_SH")"
    ROOT=$PWD; mkdir -p scripts .cache
    printf '#!/bin/bash\\necho "nice=$(nice) pool=[$GPUDIRECT_TEST_POOL] lane_vars=[${LANE_NICE-unset} ${LANE_POOL-unset}] args=$*"\\n' >scripts/test.sh
    chmod +x scripts/test.sh
    export GPUDIRECT_TEST_POOL="secureboot pair"
    lane_pids=() lane_names=()
    lane vm rdma kernel_update
    LANE_NICE=19 LANE_POOL="" lane cpu static unit
    wait
    cat .cache/lane-vm.log .cache/lane-cpu.log
""")


def test_a_lane_runs_at_its_niceness_with_its_pool(tmp_path):
    p = run_bash(tmp_path, LANE)
    assert p.returncode == 0, p.stdout
    base = int(subprocess.run(["nice"], stdout=subprocess.PIPE, text=True).stdout)
    # and neither lane inherits LANE_NICE or LANE_POOL: the cpu lane's unit tier runs this
    # very test, whose lane() would read them
    assert "nice=%d pool=[secureboot pair] lane_vars=[unset unset] args=--lane vm rdma kernel_update" % base in p.stdout
    assert "nice=%d pool=[] lane_vars=[unset unset] args=--lane cpu static unit" % min(base + 19, 19) in p.stdout


def test_the_lane_tests_hold_inside_the_suites_cpu_lane(tmp_path):
    """The unit tier runs in the cpu lane, at nice 19 and with the suite's variables set;
    this file's checks pass there too (the full run of 3e6d02d failed the one above)."""
    env = dict(os.environ, LANE_NICE="19", LANE_POOL="", GPUDIRECT_TEST_POOL="kernel_update secureboot pair",
               GPUDIRECT_TEST_LANE_PID="1", GPUDIRECT_TEST_RESULTS=str(tmp_path / "results"), PYTEST_ADDOPTS="")
    p = subprocess.run(["nice", "-n", "19", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist", __file__, "-k", "not inside_the_suites_cpu_lane"],
                       cwd=ROOT, env=env, timeout=HANG_GUARD_S, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout[-3000:]


AUTOGROUP = textwrap.dedent("""\
    set -uo pipefail
    lane_name=cpu
    eval "$(sed -n '/GPUDIRECT_TEST_NICE:-0/,/^  fi$/p' "$TEST_SH")"
    cat /proc/self/autogroup
""")


def test_a_niced_lane_nices_its_own_scheduling_group(tmp_path):
    """With autogroup scheduling each setsid session shares the CPU as one group whatever
    its processes' niceness; the cpu lane sets its group's niceness, not another's."""
    if not os.path.exists("/proc/self/autogroup"):
        pytest.skip("this kernel has no autogroup scheduling (/proc/self/autogroup): nothing to nice")
    mine = open("/proc/self/autogroup").read()
    p = run_bash(tmp_path, AUTOGROUP, "setsid", GPUDIRECT_TEST_NICE="19")
    assert p.returncode == 0, p.stdout
    assert p.stdout.rstrip().endswith(" nice 19"), p.stdout
    # the caller's group (this test's session) kept its niceness
    assert open("/proc/self/autogroup").read() == mine
