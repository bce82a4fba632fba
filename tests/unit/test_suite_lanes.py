"""scripts/test.sh: the foreground lane's secureboot stage waits for the disk the
background lane's rdma scenario saves, not for the end of that scenario.

The function is cut out of the real script and run in bash with a stand-in
background lane (a sleeping process) and a stand-in rdma scenario that saves,
fails or has saved only in an earlier suite.
"""
import os
import subprocess
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

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
    env = dict(os.environ, MODE=mode, TEST_SH=os.path.join(ROOT, "scripts", "test.sh"))
    return subprocess.run(["bash", "-c", HARNESS], cwd=tmp_path, env=env, timeout=30,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


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


def test_the_default_set_runs_the_vm_scenarios_in_their_own_lanes_beside_the_niced_stages():
    text = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    niced = 'renice -n 10 -p "$BASHPID" >/dev/null; run_stages static unit container pair )'
    assert niced in text
    # every VM lane starts before the niced foreground stages
    for lane in ("  lane rdma rdma slurm\n", "  lane kernel_update kernel_update\n", "  lane secureboot secureboot\n"):
        assert text.index(lane) < text.index(niced), lane
    assert "order=(static unit container pair rdma slurm kernel_update secureboot)" in text


def test_the_default_set_starts_kernel_update_in_its_own_lane_after_rdma_saves():
    """kernel_update's lane waits for rdma's save (after_saved), not for rdma's end:
    the two VM scenarios overlap while rdma runs its later checks."""
    text = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert 'stage_kernel_update() { after_saved rdma rdma-converged && scenarios kernel_update; }' in text
    # secureboot, started at the same save, runs at nice 5: kernel_update ends the suite
    assert ('stage_secureboot() { after_saved rdma rdma-converged && { renice -n 5 -p "$BASHPID" >/dev/null || true; '
            'scenarios secureboot; }; }') in text
    rdma_lane, ku_lane = text.index("  lane rdma rdma slurm\n"), text.index("  lane kernel_update kernel_update\n")
    # the kernel_update and secureboot lanes know which lane to wait for
    assert rdma_lane < text.index('export GPUDIRECT_TEST_LANE_PID=${lane_pids[0]}') < ku_lane
    assert ku_lane < text.index("  lane secureboot secureboot\n")


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
    env = dict(os.environ, TEST_SH=os.path.join(ROOT, "scripts", "test.sh"),
               RESULTS="\n".join(results), ELAPSED=str(elapsed))
    return subprocess.run(["bash", "-c", REPORT], cwd=tmp_path, env=env, timeout=30,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


STAGES_OK = ["static ok 80", "unit ok 250", "container ok 900", "pair ok 500",
             "rdma ok 1100", "kernel_update ok 1300", "secureboot ok 1200"]


def test_report_gives_each_lane_and_the_total_against_60_and_90_minutes(tmp_path):
    p = report(tmp_path, STAGES_OK + ["lane rdma 1130", "lane kernel_update 2710", "lane foreground 2995"], 3000)
    assert p.returncode == 0, p.stdout
    assert "lane kernel_update    ended at  2710 s (45.2 min)" in p.stdout
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
