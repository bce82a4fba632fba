"""The GPU-node tier on the lent 1-, 2- and 4-GPU machines (tests/fixtures/gpu_node/<kind>/, README.md
in each): every GPU proven by the CUDA half, the verification role's verdict for every GPU, the facts'
NVLink and fabric state against nvidia-smi topo -m, and two real NCCL all-reduces judged by the
verification's NCCL judgement. The harness's own checkers (tests/harness/gpu_node/*.py) run here on
the captured outputs, and on altered copies they must reject."""

import copy
import csv
import json
import os
import sys

import pytest

from ansible.module_utils import gpudirect_crosscheck as xc

import gpudirect_report as report
import gpudirect_verify as verify
from conftest import PROJECT_FIXTURES, ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "harness", "gpu_node"))
import check_topology  # noqa: E402
import check_verify  # noqa: E402
import judge_nccl  # noqa: E402

GPU_NODE = os.path.join(PROJECT_FIXTURES, "gpu_node")
KINDS = {"h200x2": ("NVIDIA H200", 2), "h200x4": ("NVIDIA H200", 4), "h100x1": ("NVIDIA H100 80GB HBM3", 1)}
MULTI = ("h200x2", "h200x4")


def path(kind, *parts):
    return os.path.join(GPU_NODE, kind, *parts)


def read(kind, *parts):
    with open(path(kind, *parts)) as handle:
        return handle.read()


def facts(kind):
    return json.loads(read(kind, "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]


def tsv(kind, name):
    with open(path(kind, name)) as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


# --------------------------------------------------------------------------- facts

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_facts_list_every_gpu_without_rdma_nic(kind):
    name, count = KINDS[kind]
    f = facts(kind)
    assert [g["name"] for g in f["gpus"]] == [name] * count
    assert [g["index"] for g in f["gpus"]] == list(range(count))
    assert f["rdma_devices"] == [] and f["pairs"] == []
    assert f["nvidia_driver"] == {"loaded": True, "version": "580.159.04", "flavor": "open"}


@pytest.mark.parametrize("kind", MULTI)
def test_facts_of_the_nvlink_machines_carry_links_and_fabric(kind):
    f = facts(kind)
    assert f["nvlink"] == {"available": True, "reason": None, "fabric_available": True, "fabric_reason": None}
    for gpu in f["gpus"]:
        assert (gpu["nvlink"]["links_total"], gpu["nvlink"]["links_up"]) == (18, 18)
        assert gpu["nvlink"]["link_speed_gbytes_s"] == 26.562 and gpu["nvlink"]["total_gbytes_s"] == 478.116
        assert gpu["fabric"] == {"state": "Completed", "status": "Success", "clique_id": 0,
                                 "cluster_uuid": "00000000-0000-0000-0000-000000000000"}
    text = "\n".join(report.gpudirect_preflight_report(f, kind))
    assert text.count("NVLink 18/18 links up, 26.562 GB/s each (478.116 GB/s); fabric Completed/Success") == len(
        f["gpus"])


def test_facts_of_the_one_gpu_h100_say_why_there_is_no_nvlink():
    f = facts("h100x1")
    # nvidia-smi nvlink -s printed nothing there; the Fabric section is all N/A
    assert read("h100x1", "capture", "nvidia-smi-nvlink-s.txt") == ""
    assert f["nvlink"]["available"] is False
    assert f["nvlink"]["reason"] == "nvidia-smi nvlink -s listed no GPU: empty output"
    (gpu,) = f["gpus"]
    assert gpu["nvlink"] is None
    assert gpu["fabric"] == {"state": None, "status": None, "clique_id": None, "cluster_uuid": None}
    text = "\n".join(report.gpudirect_preflight_report(f, "h100x1"))
    assert "NVLink not read (nvidia-smi nvlink -s listed no GPU: empty output); fabric N/A/N/A, clique N/A" in text


# --------------------------------------------------------------------------- the CUDA half on every GPU

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_cuda_half_passed_on_every_gpu(kind):
    rows = tsv(kind, "gpus.tsv")
    assert [r["GPU"] for r in rows] == [g["address"] for g in facts(kind)["gpus"]]
    for row in rows:
        assert row["result"] == "passed" and row["bytes compared"] == "67108864" and row["mismatches"] == "0"
        assert row["corruption caught"] == "yes (offset 524289)"
        assert 300 < float(row["H2D Gbit/s"]) < 600 and 300 < float(row["D2H Gbit/s"]) < 600
        assert 0 < float(row["seconds"]) < 5
        address = row["GPU"].replace(":", "_")
        good = json.loads(read(kind, "loopback_selftest-%s.json" % address))
        bad = json.loads(read(kind, "loopback_selftest_corrupt-%s.json" % address))
        assert good["gpu"] == bad["gpu"] == row["GPU"] and good["command"][3] == row["GPU"]
        assert good["diagnosis"] is None and good["bytes_compared"] == 67108864 and good["dmabuf_exported"]
        assert good["helper_wall_s"] == float(row["seconds"])
        assert bad["diagnosis"]["code"] == "data_mismatch" and bad["first_mismatch"] == 524289


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_check_of_the_run_passed(kind):
    checks = tsv(kind, "checks.tsv")
    assert checks and all(c["result"] == "ok" for c in checks), [c for c in checks if c["result"] != "ok"]
    names = set(c["check"] for c in checks)
    assert {"loopback (every GPU)", "gpudirect_verify verdict per GPU, mode auto",
            "gpudirect_verify verdict per GPU, mode host", "coverage plan, topology vs nvidia-smi topo -m"} <= names
    if kind in MULTI:
        assert "NCCL judgement (expect no-gdr)" in names
    run = read(kind, "run.txt")
    assert "GPU-node tier: %d checks, 0 failed" % len(checks) in run and "run.sh rc=0 " in run


# --------------------------------------------------------------------------- the role's verdict per GPU

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_role_failed_every_gpu_for_want_of_a_nic_with_the_fix(kind):
    record = json.loads(read(kind, "verify-auto", "vm.json"))
    gpus = [g["address"] for g in facts(kind)["gpus"]]
    assert check_verify.check(record, facts(kind), "auto") == []
    assert record["status"] == "failed" and record["diagnosis"]["code"] == "no_rdma_device"
    assert "Attach an RDMA NIC" in record["diagnosis"]["fix"]
    assert [p["gpu"] for p in record["pairs"]] == gpus
    assert all(p["memory"] == "GPU memory (dma-buf)" for p in record["pairs"])
    page = read(kind, "verify-auto", "vm.md")
    assert all("| %s | - | - | - | - | - | FAILED | no_rdma_device |" % g in page for g in gpus)
    host = json.loads(read(kind, "verify-host", "vm.json"))
    assert check_verify.check(host, facts(kind), "host") == []
    assert host["memory"] == "host memory only (requested)" and host["mode"] == "host"
    # the fleet table has a row per GPU, each with its verdict
    table = "\n".join(verify.gpudirect_verify_fleet_table([record]))
    assert all(" %s " % g in table for g in gpus) and table.count("no_rdma_device") >= len(gpus)


def test_check_verify_rejects_what_must_not_pass():
    f = facts("h200x2")
    record = json.loads(read("h200x2", "verify-auto", "vm.json"))
    passed = dict(copy.deepcopy(record), status="passed")
    assert "status 'passed': a node without RDMA NIC must fail verification" in check_verify.check(passed, f, "auto")
    one = dict(copy.deepcopy(record), pairs=record["pairs"][:1])
    assert any(p.startswith("pairs cover GPUs") for p in check_verify.check(one, f, "auto"))
    auto_as_host = check_verify.check(record, f, "host")
    assert any("host memory only (requested)" in p for p in auto_as_host)


# --------------------------------------------------------------------------- topology and coverage plan

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_facts_agree_with_nvidia_smi_topo_and_the_plan_covers_every_gpu(kind):
    lines, problems = check_topology.check(facts(kind), read(kind, "capture", "nvidia-smi-topo-m.txt"))
    assert problems == []
    assert lines == read(kind, "topology.txt").splitlines()
    count = KINDS[kind][1]
    assert lines[0] == "plan nearest %d run%s: %s" % (count, "" if count == 1 else "s", ", ".join(
        "%s<->no NIC" % g["address"] for g in facts(kind)["gpus"]))
    if kind in MULTI:
        assert all("NV18 to GPU" in line for line in lines[3:])


def test_topology_check_names_disagreements():
    f = facts("h200x4")
    topo = read("h200x4", "capture", "nvidia-smi-topo-m.txt")
    fewer = copy.deepcopy(f)
    fewer["gpus"][2]["nvlink"]["links_up"] = 6
    assert check_topology.check(fewer, topo)[1] == ["GPU2 0000:00:08.0: topo -m says NV18 to GPU%d, the facts have 6 "
                                                   "links up" % n for n in (0, 1, 3)]
    unread = copy.deepcopy(f)
    unread["gpus"][0]["nvlink"] = None
    assert "the facts hold no NVLink links" in check_topology.check(unread, topo)[1][0]
    three = copy.deepcopy(f)
    del three["gpus"][3]
    assert "nvidia-smi topo -m has GPU rows ['GPU0', 'GPU1', 'GPU2', 'GPU3']" in check_topology.check(three, topo)[1][0]
    without_row = "\n".join(line for line in topo.splitlines() if not line.startswith("GPU3\t"))
    with pytest.raises(check_topology.matrix.TopoMatrixError, match="no matrix row for column"):
        check_topology.check(f, without_row)
    assert check_topology.main(["check_topology.py", path("h200x4", "gpudirect_facts.json"),
                                path("h200x2", "capture", "nvidia-smi-topo-m.txt")]) == 1


# --------------------------------------------------------------------------- NCCL, for real

@pytest.mark.parametrize("kind", MULTI)
def test_nccl_on_nvlink_without_nic_is_not_gpudirect_rdma(kind):
    count = KINDS[kind][1]
    parsed = xc.parse_nccl_log(read(kind, "nccl-allreduce.log"))
    assert parsed["nccl_version"] == "2.28.9+cuda13.0" and parsed["network"] == "Socket"
    assert set(c["type"] for c in parsed["channels"]) == {"P2P"}
    assert "NET/IB : No device found." in parsed["net_notes"] and "Using network Socket" in parsed["net_notes"]
    verdict = xc.judge_nccl(parsed, 0, nccl_tests=False)
    assert verdict["status"] == "failed" and verdict["net_channels"] == 0
    (problem,) = verdict["problems"]
    assert problem.startswith("no channel used the NET transport (only P2P): NCCL kept the data inside the node")
    assert "NCCL's own lines: 'NET/IB : No device found.'" in problem

    net = xc.parse_nccl_log(read(kind, "nccl-allreduce-net.log"))
    verdict = xc.judge_nccl(net, 0, nccl_tests=False)
    assert verdict["status"] == "failed" and verdict["gdr_channels"] == 0
    assert verdict["net_channels"] == 4 * count and verdict["nics_used"] == ["NET/Socket/0 (eth0)"]
    assert verdict["problems"][0].startswith("%d of %d NET channels did not use GPUDirect RDMA (no GDRDMA; TCP "
                                             "sockets)" % (4 * count, 4 * count))
    assert "'NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0''" in verdict["problems"][0]
    # as an nccl-tests run it fails for want of the nccl-tests summary as well
    assert any("no '# Out of bounds values' summary" in p for p in xc.judge_nccl(net, 0)["problems"])


@pytest.mark.parametrize("kind", MULTI)
def test_the_harness_judge_on_the_real_logs(kind, capsys, tmp_path):
    logs = [path(kind, "nccl-allreduce.log"), path(kind, "nccl-allreduce-net.log")]
    assert judge_nccl.main(["--expect", "no-gdr"] + logs) == 0
    out = capsys.readouterr().out
    assert out.count("not GPUDirect RDMA: ") == 2 and "(data compared ok)" in out and "PROBLEM" not in out
    # the same log as NCCL would print it over NICs with GPUDirect RDMA: passed, so the harness refuses it
    gdr = tmp_path / "gdr.log"
    gdr.write_text(read(kind, "nccl-allreduce-net.log").replace("via NET/Socket/0", "via NET/IB/0/GDRDMA"))
    assert judge_nccl.main(["--expect", "no-gdr", str(gdr)]) == 1
    assert "judged GPUDirect RDMA on a node without RDMA NIC" in capsys.readouterr().out
    assert judge_nccl.main(["--expect", "any", str(gdr)]) == 0
    assert "GPUDirect RDMA (%d NET channels with GDRDMA" % (4 * KINDS[kind][1]) in capsys.readouterr().out


def test_the_harness_judge_rejects_broken_runs(capsys, tmp_path):
    text = read("h200x2", "nccl-allreduce-net.log")
    cases = {
        "rank_failed.log": (text.replace("ok=True", "ok=False", 1), "did not run and compare its data on every rank"),
        "rank_missing.log": ("\n".join(l for l in text.splitlines() if not l.startswith("rank 1:")) + "\n",
                             "did not run and compare its data on every rank"),
        "crashed.log": (text.replace("rc=0", "rc=1"), "rc=1"),
        "no_transport.log": ("\n".join(l for l in text.splitlines() if " via " not in l) + "\n",
                             "NCCL printed no transport line"),
        "truncated.log": (text[:200], "did not run"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_text(content)
        assert judge_nccl.main(["--expect", "no-gdr", str(tmp_path / name)]) == 1, name
        assert message in capsys.readouterr().out, name
