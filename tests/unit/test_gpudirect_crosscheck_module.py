"""library/gpudirect_perftest.py end to end, with a stand-in ib_write_bw that replays real outputs.

The stand-in prints a fixture of tests/fixtures/crosscheck/ (sources in its README) for --help and
for the client, behaves as a server that waits, and logs every command line it was given.
"""

import json
import os
import stat
import sys
import time

import pytest

import gpudirect_perftest

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "crosscheck")

STAND_IN = r'''#!%(python)s
import json, os, sys, time
log = os.environ["FAKE_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "order": os.environ.get("CUDA_DEVICE_ORDER"),
                        "pid": os.getpid()}) + "\n")
if sys.argv[1:] == ["--help"]:
    sys.stdout.write(open(os.environ["FAKE_HELP"]).read())
    sys.exit(1)
ready = log + ".listening"
if sys.argv[-1] != "127.0.0.1":                      # the server
    for stale in (ready, log + ".done"):
        if os.path.exists(stale):
            os.remove(stale)
    time.sleep(float(os.environ.get("FAKE_LISTEN_AFTER", "0")))
    open(ready, "w").close()
    end = time.time() + float(os.environ.get("FAKE_SERVER_SLEEP", "20"))
    while time.time() < end and not os.path.exists(log + ".done"):   # like perftest: until the client is done
        time.sleep(0.05)
    sys.exit(0)
if not os.path.exists(ready):
    sys.stdout.write("Couldn't connect to 127.0.0.1:18515\n")
    sys.exit(1)
time.sleep(float(os.environ.get("FAKE_CLIENT_SLEEP", "0")))
sys.stdout.write(open(os.environ["FAKE_CLIENT"]).read())
open(log + ".done", "w").close()
sys.exit(int(os.environ.get("FAKE_CLIENT_RC", "0")))
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    path = tmp_path / "ib_write_bw"
    path.write_text(STAND_IN % {"python": sys.executable})
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_HELP", os.path.join(FIX, "ib_write_bw_help_cuda_h100.txt"))
    monkeypatch.setenv("FAKE_CLIENT", os.path.join(FIX, "perftest_host_gbits_issue273.txt"))

    def calls():
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]
    return str(path), calls


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:            # a zombie left for its parent counts as gone
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_check_mode_runs_nothing(run_module, stand_in):
    exe, calls = stand_in
    res = run_module(gpudirect_perftest, {"mode": "cuda_dmabuf", "rdma_device": "mlx5_0", "gpu": "0000:1b:00.0",
                                          "executable": exe}, check_mode=True)
    assert res["status"] == "would_run" and not res["changed"]
    assert res["would_run"][0] == [exe, "--help"]
    assert "--use_cuda_bus_id=0000:1b:00.0" in res["would_run"][1]
    assert calls() == []


def test_no_binary_is_a_stated_skip(run_module, tmp_path):
    res = run_module(gpudirect_perftest, {"mode": "host", "rdma_device": "rxe0",
                                          "executable": str(tmp_path / "ib_write_bw")})
    assert res["status"] == "skipped" and not res.get("failed")
    assert res["reason"].startswith("%s not found on the node (install perftest" % (tmp_path / "ib_write_bw"))


def test_build_without_cuda_skips_the_gpu_mode_and_runs_nothing_else(run_module, stand_in, monkeypatch):
    exe, calls = stand_in
    monkeypatch.setenv("FAKE_HELP", os.path.join(FIX, "ib_write_bw_help_debian12.txt"))
    res = run_module(gpudirect_perftest, {"mode": "cuda_peermem", "rdma_device": "mlx5_0", "gpu": "0000:1b:00.0",
                                          "executable": exe})
    assert res["status"] == "skipped"
    assert res["reason"].startswith("%s built without CUDA: no --use_cuda in its help" % exe)
    assert [c["argv"] for c in calls()] == [["--help"]]


def test_host_mode_measures_and_reports_the_ratio(run_module, stand_in):
    exe, calls = stand_in
    res = run_module(gpudirect_perftest, {"mode": "host", "rdma_device": "ib0", "gid_index": 2, "size": 8,
                                          "iterations": 1000, "executable": exe, "module_bandwidth_gbps": 0.45})
    assert res["status"] == "measured", res
    assert res["bandwidth_gbps"] == pytest.approx(0.48) and res["ratio"] == pytest.approx(0.9375)
    assert res["ratio_ok"] is True
    assert res["message"] == "module 0.45 Gbit/s / ib_write_bw 0.48 Gbit/s = 0.938"
    argvs = [c["argv"] for c in calls()]
    assert argvs[0] == ["--help"]
    assert ["-d", "ib0", "-i", "1", "-s", "8", "-n", "1000", "-p", "18515", "-F", "--report_gbits", "-x", "2"] \
        in [a for a in argvs[1:]] and argvs[-1][-1] == "127.0.0.1"
    assert not any(_alive(c["pid"]) for c in calls())


def test_dmabuf_mode_uses_the_bus_id_and_checks_the_gpu(run_module, stand_in, monkeypatch):
    exe, calls = stand_in
    monkeypatch.setenv("FAKE_CLIENT", os.path.join(FIX, "perftest_dmabuf_h200_dranet.txt"))
    args = {"mode": "cuda_dmabuf", "rdma_device": "mlx5_3", "gid_index": 3, "gpu": "0000:8f:00.0",
            "executable": exe, "module_bandwidth_gbps": 133.38, "min_ratio": 0.9}
    res = run_module(gpudirect_perftest, args)
    assert res["status"] == "measured", res
    assert res["ratio"] == pytest.approx(0.95) and res["ratio_ok"]
    assert res["client_argv"][-3:] == ["--use_cuda_bus_id=0000:8f:00.0", "--use_cuda_dmabuf", "127.0.0.1"]
    assert res["environment"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    low = run_module(gpudirect_perftest, dict(args, module_bandwidth_gbps=70.0))
    assert low["ratio_ok"] is False and "below gpudirect_verify_perftest_min_ratio 0.900" in low["message"]
    wrong = run_module(gpudirect_perftest, dict(args, gpu="0000:1b:00.0"))
    assert wrong["failed"] and wrong["status"] == "error"
    assert "picked CUDA device 0 at PCIe 8F:00, not the GPU 0000:1b:00.0" in wrong["msg"]


def test_without_bus_id_the_cuda_number_comes_from_pci_order(run_module, stand_in, monkeypatch, tmp_path):
    exe, calls = stand_in
    help_text = open(os.path.join(FIX, "ib_write_bw_help_cuda_h100.txt")).read()
    no_bus = tmp_path / "help.txt"
    no_bus.write_text("\n".join(line for line in help_text.splitlines() if "use_cuda_bus_id" not in line))
    monkeypatch.setenv("FAKE_HELP", str(no_bus))
    monkeypatch.setenv("FAKE_CLIENT", os.path.join(FIX, "perftest_dmabuf_h200_dranet.txt"))
    res = run_module(gpudirect_perftest, {"mode": "cuda_peermem", "rdma_device": "mlx5_3", "gpu": "0000:8f:00.0",
                                          "gpus": ["0000:cc:00.0", "0000:8f:00.0"], "executable": exe})
    assert res["status"] == "measured", res
    assert "--use_cuda=0" in res["client_argv"] and "--use_cuda_dmabuf" not in res["client_argv"]
    assert {c["order"] for c in calls() if c["argv"] != ["--help"]} == {"PCI_BUS_ID"}
    missing = run_module(gpudirect_perftest, {"mode": "cuda_peermem", "rdma_device": "mlx5_3", "gpu": "0000:8f:00.0",
                                              "gpus": ["0000:cc:00.0"], "executable": exe})
    assert missing["failed"] and "is not among the node's GPUs" in missing["msg"]


def test_client_retries_until_the_server_listens(run_module, stand_in, monkeypatch):
    exe, calls = stand_in
    monkeypatch.setenv("FAKE_LISTEN_AFTER", "1.5")
    res = run_module(gpudirect_perftest, {"mode": "host", "rdma_device": "ib0", "executable": exe, "timeout": 30})
    assert res["status"] == "measured", res
    assert sum(1 for c in calls() if c["argv"][-1] == "127.0.0.1") >= 2


def test_a_failed_client_fails_with_perftests_words_and_the_server_is_killed(run_module, stand_in, monkeypatch):
    exe, calls = stand_in
    monkeypatch.setenv("FAKE_CLIENT", os.path.join(FIX, "ib_write_bw_no_device_debian12.txt"))
    monkeypatch.setenv("FAKE_CLIENT_RC", "1")
    monkeypatch.setenv("FAKE_SERVER_SLEEP", "60")
    started = time.monotonic()
    res = run_module(gpudirect_perftest, {"mode": "host", "rdma_device": "mlx5_0", "executable": exe, "timeout": 20})
    assert res["failed"] and res["status"] == "error"
    assert "Unable to find the Infiniband/RoCE device" in res["msg"]
    assert time.monotonic() - started < 50
    assert not any(_alive(c["pid"]) for c in calls())


def test_a_hanging_client_times_out_and_nothing_is_left_running(run_module, stand_in, monkeypatch):
    exe, calls = stand_in
    monkeypatch.setenv("FAKE_CLIENT_SLEEP", "60")
    monkeypatch.setenv("FAKE_SERVER_SLEEP", "60")
    res = run_module(gpudirect_perftest, {"mode": "host", "rdma_device": "mlx5_0", "executable": exe, "timeout": 3})
    assert res["failed"] and "did not finish within 3s (timeout)" in res["msg"]
    time.sleep(0.2)
    assert not any(_alive(c["pid"]) for c in calls() if c["argv"][-1] != "127.0.0.1")


@pytest.mark.parametrize("args, words", [
    ({"size": 0}, "size must be 1..2147483648 bytes"),
    ({"mode": "cuda_dmabuf"}, "mode cuda_dmabuf needs gpu"),
    ({"gpu": "1"}, "gpu: not a PCI address"),
    ({"rdma_device": "mlx5_0 -x 9"}, "rdma_device must be an RDMA device name"),
    ({"min_ratio": -1.0}, "min_ratio must be >= 0"),
])
def test_bad_input_fails_before_anything_runs(run_module, stand_in, args, words):
    exe, calls = stand_in
    res = run_module(gpudirect_perftest, dict({"mode": "host", "rdma_device": "mlx5_0", "executable": exe}, **args))
    assert res["failed"] and words in res["msg"]
    assert calls() == []
