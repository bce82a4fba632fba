"""Unit tests for library/gpudirect_loopback.py and module_utils/gpudirect_loopback_helper.py:
argument handling, device selection from real-shaped facts, RoCE GID choice, helper
output parsing, diagnoses, check mode and the helper build cache, end to end via main().

Real captures used: tests/fixtures/gpu_node/h200/gpudirect_facts.json (H200, no NIC) and
tests/fixtures/loopback/vm_rxe_*.json (soft-RoCE VM: facts, a passing and a corrupted run)."""

import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils import gpudirect_loopback_helper as lh

import gpudirect_facts
import gpudirect_loopback
import sysfs_tree
from conftest import PROJECT_FIXTURES

LOOPBACK = os.path.join(PROJECT_FIXTURES, "loopback")
H200_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")


def load_facts(path):
    with open(path) as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


def vm_facts():
    return load_facts(os.path.join(LOOPBACK, "vm_rxe_gpudirect_facts.json"))


def vm_result(name):
    with open(os.path.join(LOOPBACK, name)) as handle:
        return json.load(handle)


def rxe_sysfs(root, state="4: ACTIVE"):
    """/sys/class/infiniband/rxe0 as on the VM: GID 0 link-local, GID 1 IPv4-mapped, the rest zero."""
    pdir = os.path.join(str(root), "sys/class/infiniband/rxe0/ports/1")
    values = {"state": state, "phys_state": "5: LinkUp", "link_layer": "Ethernet", "rate": "2.5 Gb/sec (1X SDR)",
              "gid_attrs/ndevs/0": "enp1s0"}
    gids = {0: ("RoCE v2", "fe80:0000:0000:0000:5054:00ff:fe24:896e"),
            1: ("RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:020f")}
    for index in (2, 10, 100, 1000):
        gids[index] = (None, lh.ZERO_GID)
    for rel, text in values.items():
        os.makedirs(os.path.dirname(os.path.join(pdir, rel)), exist_ok=True)
        with open(os.path.join(pdir, rel), "w") as handle:
            handle.write(text + "\n")
    os.makedirs(os.path.join(pdir, "gids"), exist_ok=True)
    os.makedirs(os.path.join(pdir, "gid_attrs/types"), exist_ok=True)
    for index, (gid_type, gid) in gids.items():
        with open(os.path.join(pdir, "gids", str(index)), "w") as handle:
            handle.write(gid + "\n")
        with open(os.path.join(pdir, "gid_attrs/types", str(index)), "w") as handle:
            handle.write((gid_type or "") + "\n")   # sysfs gives EINVAL for unpopulated ones; empty here
    return str(root)


HELPER_OK = vm_result("vm_rxe_host_pass.json")["helper"]


def helper_line(**changes):
    data = dict(HELPER_OK)
    data.update(changes)
    return json.dumps(data) + "\n"


class Node(object):
    """Patches AnsibleModule.run_command/get_bin_path: records calls, 'builds' the helper
    by creating the output file, answers the helper with ``helper_stdout``."""

    def __init__(self, monkeypatch, helper_stdout=None, build_rc=0, build_stderr="", cc="/usr/bin/cc"):
        self.calls = []
        self.helper_stdout = helper_stdout if helper_stdout is not None else helper_line()
        self.build_rc = build_rc
        self.build_stderr = build_stderr
        node = self

        def run_command(module, args, environ_update=None, **kwargs):
            assert isinstance(args, list), "run_command must get an argument list"
            assert environ_update and environ_update["LANG"] == "C" and environ_update["LC_ALL"] == "C"
            node.calls.append(args)
            if args[0] == cc:
                if node.build_rc == 0:
                    with open(args[args.index("-o") + 1], "w") as handle:
                        handle.write("#!/bin/false\n")
                return node.build_rc, "", node.build_stderr
            return (0 if '"ok": 1' in node.helper_stdout else 1), node.helper_stdout, ""

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda module, name, required=False, opt_dirs=None: cc if name in ("cc", "gcc") and cc
                            else None)

    def builds(self):
        return [c for c in self.calls if "-libverbs" in c]

    def helpers(self):
        return [c for c in self.calls if "-libverbs" not in c]


@pytest.fixture
def env(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(gpudirect_loopback, "ROOT", str(root))
    return {"root": str(root), "helper_dir": str(tmp_path / "cache")}


# ---------------------------------------------------------------------------
# documentation and argument spec
# ---------------------------------------------------------------------------

def test_documentation_matches_argument_spec(monkeypatch):
    doc = yaml.safe_load(gpudirect_loopback.DOCUMENTATION)
    assert doc["module"] == "gpudirect_loopback"
    assert yaml.safe_load(gpudirect_loopback.EXAMPLES)
    ret = yaml.safe_load(gpudirect_loopback.RETURN)
    captured = {}

    class Stop(Exception):
        pass

    def fake_init(self, argument_spec, **kwargs):
        captured.update(argument_spec=argument_spec, **kwargs)
        raise Stop()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", fake_init)
    with pytest.raises(Stop):
        gpudirect_loopback.main()
    spec = captured["argument_spec"]
    assert captured["supports_check_mode"] is True
    assert set(spec) == set(doc["options"])
    for name, option in doc["options"].items():
        assert spec[name]["type"] == option["type"], name
        assert spec[name].get("default") == option.get("default"), name
        assert spec[name].get("choices") == option.get("choices"), name
    for field in ("changed", "mode", "rdma_device", "gpu", "bytes_compared", "mismatches", "first_mismatch",
                  "bandwidth_gbps", "port_rate_gbps", "ratio_port", "staged_bandwidth_gbps", "speedup",
                  "diagnosis", "helper_path", "helper_built"):
        assert field in ret, field


@pytest.mark.parametrize("args,fragment", [
    ({"size": 0}, "size must be 1.."),
    ({"size": (1 << 31) + 1}, "size must be 1.."),
    ({"iterations": 0}, "iterations must be >= 1"),
    ({"tx_depth": 0}, "tx_depth must be >= 1"),
    ({"selftest_gpu_only": True, "rdma_device": "rxe0"}, "leave rdma_device out"),
])
def test_bad_input_fails_before_anything_runs(env, monkeypatch, args, fragment, run_module):
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, dict(args, helper_dir=env["helper_dir"], mode="host"))
    assert result["failed"] is True and result["diagnosis"]["code"] == "bad_input"
    assert fragment in result["msg"]
    assert node.calls == [] and not os.path.exists(env["helper_dir"])


def test_unknown_mode_rejected_by_argument_spec(env, monkeypatch, run_module):
    result = run_module(gpudirect_loopback, {"mode": "cuda_magic"})
    assert result["failed"] is True and "cuda_magic" in result["msg"]


# ---------------------------------------------------------------------------
# device selection
# ---------------------------------------------------------------------------

def test_h200_without_nic_cuda_dmabuf_fails_no_rdma_device_with_facts(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    facts = load_facts(H200_FACTS)
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts,
                                              "helper_dir": env["helper_dir"]})
    assert result["failed"] is True
    assert result["diagnosis"]["code"] == "no_rdma_device"
    assert "No RDMA device" in result["msg"] and "0000:00:06.0" in result["msg"]
    assert "selftest_gpu_only" in result["diagnosis"]["fix"]
    seen = result["facts_seen"]
    assert seen["rdma_devices"] == [] and seen["gpus"] == ["0000:00:06.0"] and seen["source"] == "facts"
    assert seen["dmabuf"]["open_module"] is True and seen["peermem"]["nvidia_peermem"] is False
    assert node.calls == []


def test_h200_full_fact_result_is_accepted_too(env, monkeypatch, run_module):
    Node(monkeypatch)
    with open(H200_FACTS) as handle:
        whole = json.load(handle)
    result = run_module(gpudirect_loopback, {"facts": whole, "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "no_rdma_device"


def test_no_facts_and_no_sysfs_devices_lists_what_it_saw(env, monkeypatch, run_module):
    Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "no_rdma_device"
    assert result["facts_seen"]["source"] == "sysfs" and "no GPU either" in result["msg"]


def test_closest_pair_from_real_facts_module(tmp_path):
    facts = gpudirect_facts.gather_facts(sysfs_tree.gpu_server(tmp_path).root)
    assert {(p["nic"], p["distance"]) for p in facts["pairs"]} == {("mlx5_0", "PIX"), ("mlx5_1", "SYS")}
    dev, gpu, pair, reason = lh.select_devices(facts["rdma_devices"], facts["gpus"], facts["pairs"], "cuda_dmabuf")
    assert dev["name"] == "mlx5_0" and gpu["address"] == sysfs_tree.GPU and pair["distance"] == "PIX"
    assert reason.startswith("closest pair by topology (PIX")
    # naming the far NIC keeps it, and the path warning says why it is a poor choice
    dev, gpu, pair, _ = lh.select_devices(facts["rdma_devices"], facts["gpus"], facts["pairs"], "cuda_dmabuf",
                                          rdma_device="mlx5_1")
    assert dev["name"] == "mlx5_1" and pair["distance"] == "SYS"
    assert any("SYS apart" in w for w in lh.path_warnings(pair))


def test_selection_prefers_active_port_then_distance():
    devices = [{"name": "mlx5_0", "pci_address": "0000:04:00.0", "ports": {"1": {"state": "DOWN"}}},
               {"name": "mlx5_1", "pci_address": "0000:84:00.0", "ports": {"1": {"state": "ACTIVE"}}}]
    gpus = [{"address": "0000:03:00.0"}]
    pairs = [{"gpu_address": "0000:03:00.0", "nic": "mlx5_0", "distance": "PIX"},
             {"gpu_address": "0000:03:00.0", "nic": "mlx5_1", "distance": "SYS"}]
    dev, _gpu, pair, _ = lh.select_devices(devices, gpus, pairs, "cuda_peermem")
    assert dev["name"] == "mlx5_1"
    devices[0]["ports"]["1"]["state"] = "ACTIVE"
    dev, _gpu, pair, _ = lh.select_devices(devices, gpus, pairs, "cuda_peermem")
    assert dev["name"] == "mlx5_0" and pair["distance"] == "PIX"


def test_selection_by_name_and_pci_never_by_index():
    facts = vm_facts()
    devices = facts["rdma_devices"]
    assert lh.find_rdma_device(devices, "rxe0")["name"] == "rxe0"
    assert lh.find_rdma_device(devices, "01:00.0")["name"] == "rxe0"
    assert lh.find_rdma_device(devices, "0000:01:00.0")["name"] == "rxe0"
    for wanted in ("0", "mlx5_0", "0000:02:00.0"):
        with pytest.raises(lh.LoopbackError) as err:
            lh.find_rdma_device(devices, wanted)
        assert err.value.code == "unknown_rdma_device" and "rxe0 (0000:01:00.0)" in err.value.message
    gpus = load_facts(H200_FACTS)["gpus"]
    assert lh.find_gpu(gpus, "00000000:00:06.0")["address"] == "0000:00:06.0"
    with pytest.raises(lh.LoopbackError) as err:
        lh.find_gpu(gpus, "0")
    assert err.value.code == "unknown_gpu" and "never an index" in err.value.message
    with pytest.raises(lh.LoopbackError) as err:
        lh.find_gpu(gpus, "0000:1b:00.0")
    assert "present: 0000:00:06.0" in err.value.message


def test_host_mode_with_several_devices_needs_a_name():
    devices = [{"name": "mlx5_0", "ports": {"1": {"state": "ACTIVE"}}},
               {"name": "mlx5_1", "ports": {"1": {"state": "ACTIVE"}}}]
    with pytest.raises(lh.LoopbackError) as err:
        lh.select_devices(devices, [], [], "host")
    assert "name one with rdma_device" in err.value.message
    devices[1]["ports"]["1"]["state"] = "DOWN"
    assert lh.select_devices(devices, [], [], "host")[0]["name"] == "mlx5_0"


def test_resolve_mode_auto_from_facts():
    h200 = load_facts(H200_FACTS)
    assert lh.resolve_mode("auto", h200, h200["gpus"])[0] == "cuda_dmabuf"
    peer = dict(h200, dmabuf={"kernel_ok": False, "open_module": False}, peermem={"nvidia_peermem": True})
    assert lh.resolve_mode("auto", peer, peer["gpus"])[0] == "cuda_peermem"
    none = dict(peer, peermem={"nvidia_peermem": False})
    assert lh.resolve_mode("auto", none, none["gpus"])[0] == "host"
    assert lh.resolve_mode("auto", vm_facts(), [])[0] == "host"
    assert lh.resolve_mode("cuda_peermem", h200, h200["gpus"]) == ("cuda_peermem", "requested")


def test_mode_the_node_cannot_do_fails_early(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    facts = load_facts(H200_FACTS)
    facts["rdma_devices"] = vm_facts()["rdma_devices"]
    rxe_sysfs(env["root"])
    result = run_module(gpudirect_loopback, {"mode": "cuda_peermem", "facts": facts, "rdma_device": "rxe0",
                                              "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "peermem_not_loaded" and "nvidia_peermem=False" in result["msg"]
    facts["dmabuf"] = {"kernel_ok": False, "open_module": True}
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "rxe0",
                                              "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "dmabuf_unsupported"
    assert node.calls == []


def test_size_above_gpu_memory_fails_before_running(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    facts = load_facts(H200_FACTS)
    facts["rdma_devices"] = vm_facts()["rdma_devices"]
    rxe_sysfs(env["root"])
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "rxe0",
                                              "size": 143771 * (1 << 20) + 1, "helper_dir": env["helper_dir"]})
    assert result["failed"] is True
    assert result["diagnosis"]["code"] in ("size_exceeds_gpu_memory", "bad_input")
    assert node.calls == []


def test_port_down_from_live_sysfs(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    rxe_sysfs(env["root"], state="1: DOWN")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "port_down" and "is DOWN" in result["msg"]
    assert node.calls == []


# ---------------------------------------------------------------------------
# GID and rates
# ---------------------------------------------------------------------------

def test_gid_table_and_choice_from_rxe_layout(tmp_path):
    root = rxe_sysfs(tmp_path)
    table = lh.gid_table(root, "rxe0", 1)
    assert [entry[0] for entry in table] == [0, 1]   # numeric order, zero GIDs skipped
    assert lh.pick_gid_index(table) == (1, "RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:020f")
    assert lh.pick_gid_index([(0, "IB/RoCE v1", "fe80::1"), (3, "RoCE v2", "fe80::2")])[0] == 3
    assert lh.pick_gid_index([(0, "IB/RoCE v1", "fe80::1")])[0] == 0
    assert lh.pick_gid_index([]) is None


def test_pcie_gbps():
    assert lh.pcie_gbps(32.0, 16) == 504.12
    assert lh.pcie_gbps(5.0, 4) == 16.0        # the seed's ConnectX-3: 5 GT/s x4
    assert lh.pcie_gbps(None, 16) is None


# ---------------------------------------------------------------------------
# helper output and diagnoses
# ---------------------------------------------------------------------------

def test_parse_helper_output_real_and_malformed():
    assert lh.parse_helper_output(helper_line())["bandwidth_gbps"] == HELPER_OK["bandwidth_gbps"]
    assert lh.parse_helper_output("noise\n" + helper_line() + "\n")["ok"] == 1
    for bad in ("", "Segmentation fault\n", helper_line()[:40], '{"no_ok_key": 1}\n', "[1, 2]\n"):
        with pytest.raises(ValueError):
            lh.parse_helper_output(bad)


@pytest.mark.parametrize("code", sorted(lh.DIAGNOSES))
def test_every_code_has_a_message_and_a_fix(code):
    diag = lh.diagnose(code, "detail here", ["w"])
    assert diag["code"] == code and diag["message"].endswith("detail here") and diag["fix"]
    assert diag["related"] == ["w"]


HELPER_ERRORS = [
    ("peermem_not_loaded", "ibv_reg_mr_gpu", 14, "ibv_reg_mr on GPU memory failed: Bad address", "nvidia_peermem"),
    ("dmabuf_unsupported", "ibv_reg_dmabuf_mr", 95, "ibv_reg_dmabuf_mr failed: Operation not supported", "dma-buf"),
    ("port_down", "ibv_query_port", 0, "port 1 of rxe0 is PORT_DOWN, not ACTIVE", "subnet manager"),
    ("memlock_too_low", "ibv_reg_mr_host", 12, "registering the host source buffer: Cannot allocate memory",
     "limits.d"),
    ("pattern_not_overwritten", "compare", 0, "65536 of 65536 bytes differ, first at offset 0", "never pick by index"),
    ("data_mismatch", "compare", 0, "1 of 65536 bytes differ, first at offset 32769", "AER"),
    ("completion_error", "write_correctness", 0, "work completion status 12: transport retry counter exceeded",
     "Retry exceeded"),
    ("cuda_unavailable", "dlopen", 0, "cannot load libcuda.so.1", "nvidia_driver role"),
    ("size_exceeds_gpu_memory", "cuMemGetInfo", 0, "2 bytes asked, 1 free", "Lower size"),
    ("no_rdma_device", "ibv_get_device_list", 38, "libibverbs sees no RDMA device", "soft-RoCE"),
]


@pytest.mark.parametrize("code,stage,errnum,detail,fix", HELPER_ERRORS)
def test_helper_error_codes_become_diagnoses(env, monkeypatch, code, stage, errnum, detail, fix, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch, helper_line(ok=0, error=code, stage=stage, errno=errnum, detail=detail,
                                         bandwidth_gbps=None, mismatches=0))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["failed"] is True
    assert result["diagnosis"]["code"] == code
    assert detail in result["diagnosis"]["message"] and "stage %s" % stage in result["msg"]
    assert fix in result["diagnosis"]["fix"]
    assert len(node.helpers()) == 1


def test_pattern_not_overwritten_reports_first_offset(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, helper_line(ok=0, error="pattern_not_overwritten", stage="compare", mismatches=65536,
                                  old_pattern_bytes=65536, first_mismatch=0, detail="65536 of 65536 bytes differ"))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["mismatches"] == 65536 and result["first_mismatch"] == 0
    assert "still holds the pattern written before" in result["msg"]


def test_real_corrupted_vm_run_is_a_mismatch_at_the_flipped_byte():
    real = vm_result("vm_rxe_host_corrupt.json")
    assert real["failed"] is True and real["diagnosis"]["code"] == "data_mismatch"
    assert real["first_mismatch"] == 65536 // 2 + 1 and real["mismatches"] == 1
    assert real["bytes_compared"] == 65536 and "--corrupt" in real["command"]


def test_malformed_helper_output_fails_with_rc_and_output(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, "Segmentation fault (core dumped)\n")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "helper_output_malformed"
    assert result["stdout"].startswith("Segmentation fault") and "rc=1" in result["msg"]


# ---------------------------------------------------------------------------
# end to end: build cache, command line, check mode, results
# ---------------------------------------------------------------------------

def test_build_once_then_cached_and_command_line(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "size": 65536, "iterations": 200, "helper_dir": env["helper_dir"]}
    first = run_module(gpudirect_loopback, args)
    assert first.get("failed") is not True, first
    assert first["changed"] is True and first["helper_built"] is True
    directory = os.path.join(env["helper_dir"], lh.helper_digest())
    assert first["helper_path"] == os.path.join(directory, "gpudirect_loopback_helper")
    build = node.builds()[0]
    assert build[0] == "/usr/bin/cc" and build[-2:] == ["-libverbs", "-ldl"]
    with open(os.path.join(directory, "gpudirect_loopback_helper.c")) as handle:
        assert handle.read() == lh.HELPER_SOURCE
    assert node.helpers() == [[first["helper_path"], "--mode", "host", "--device", "rxe0", "--port", "1",
                               "--gid-index", "1", "--depth", "128", "--size", "65536", "--iters", "200",
                               "--timeout", "60"]]
    assert first["rdma_device"] == "rxe0" and first["gid_index"] == 1 and first["gpu"] is None
    assert first["bytes_compared"] == 65536 and first["mismatches"] == 0 and first["diagnosis"] is None
    assert first["port_rate_gbps"] == 2.5
    assert first["ratio_port"] == round(HELPER_OK["bandwidth_gbps"] / 2.5, 4)

    second = run_module(gpudirect_loopback, args)
    assert second["changed"] is False and second["helper_built"] is False
    assert len(node.builds()) == 1 and len(node.helpers()) == 2


def test_build_failure_says_what_to_install(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch, build_rc=1,
                build_stderr="x.c:14:10: fatal error: infiniband/verbs.h: No such file or directory\n")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "helper_build_failed"
    assert "libibverbs-dev" in result["msg"] and "rdma-core-devel" in result["msg"]
    assert node.helpers() == []
    assert not os.path.exists(result["helper_path"])
    assert [f for f in os.listdir(os.path.dirname(result["helper_path"])) if f.startswith(".build-")] == []


def test_no_compiler(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, cc=None)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "helper_build_failed" and "No C compiler" in result["msg"]


def test_check_mode_runs_nothing(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "_corrupt_one_byte": True}
    result = run_module(gpudirect_loopback, args, check_mode=True)
    assert node.calls == [] and not os.path.exists(env["helper_dir"])
    assert result["changed"] is True          # it would build the helper
    assert len(result["would_run"]) == 2 and "-libverbs" in result["would_run"][0]
    assert result["would_run"][1][-1] == "--corrupt" and "bytes_compared" not in result
    run_module(gpudirect_loopback, dict(args, _corrupt_one_byte=False))   # builds
    again = run_module(gpudirect_loopback, args, check_mode=True)
    assert again["changed"] is False and len(again["would_run"]) == 1


def test_gpu_mode_ratios_speedup_and_path_warnings(tmp_path, env, monkeypatch, run_module):
    facts = gpudirect_facts.gather_facts(sysfs_tree.gpu_server(tmp_path / "srv").root)
    facts["dmabuf"] = {"kernel_ok": True, "open_module": True, "config_dma_shared_buffer": "y"}
    monkeypatch.setattr(gpudirect_loopback, "ROOT", facts["root"])
    node = Node(monkeypatch, helper_line(mode="cuda_dmabuf", bandwidth_gbps=180.0, staged_bandwidth_gbps=60.0,
                                         gid_index=-1))
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts,
                                              "helper_dir": env["helper_dir"]})
    assert result.get("failed") is not True, result.get("msg")
    assert result["rdma_device"] == "mlx5_0" and result["gpu"] == sysfs_tree.GPU   # the PIX pair
    assert result["selection"]["distance"] == "PIX" and result["gid_index"] is None   # InfiniBand: no GRH
    assert result["speedup"] == 3.0
    assert result["port_rate_gbps"] == 200.0 and result["ratio_port"] == 0.9
    pair = [p for p in facts["pairs"] if p["nic"] == "mlx5_0"][0]
    assert any("ACS redirects" in w for w in result["path_warnings"]) == bool(pair["acs_redirect"])
    # the far NIC's port is DOWN: naming it fails with port_down before anything runs
    down = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "mlx5_1",
                                            "helper_dir": env["helper_dir"]})
    assert down["diagnosis"]["code"] == "port_down"
    assert any("SYS apart" in w for w in down["diagnosis"]["related"])
    cmd = node.helpers()[0]
    assert cmd[cmd.index("--gpu") + 1] == sysfs_tree.GPU and cmd[cmd.index("--mode") + 1] == "cuda_dmabuf"


def test_min_ratio_port(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "min_ratio_port": 0.5,
                                              "helper_dir": env["helper_dir"]})
    assert result["diagnosis"]["code"] == "bandwidth_below_minimum"


def test_selftest_gpu_only_on_h200_facts(env, monkeypatch, run_module):
    selftest = {"helper_version": 1, "mode": "selftest_gpu_only", "gpu": "0000:00:06.0", "gpu_name": "NVIDIA H200",
                "dmabuf_exported": 1, "bytes_compared": 1048576, "mismatches": 0, "h2d_bandwidth_gbps": 437.6,
                "d2h_bandwidth_gbps": 439.2, "ok": 1, "error": None}
    node = Node(monkeypatch, json.dumps(selftest) + "\n")
    result = run_module(gpudirect_loopback, {"selftest_gpu_only": True, "facts": load_facts(H200_FACTS),
                                              "helper_dir": env["helper_dir"]})
    assert result.get("failed") is not True, result
    assert result["mode"] == "selftest_gpu_only" and result["gpu"] == "0000:00:06.0" and result["rdma_device"] is None
    assert result["dmabuf_exported"] is True and result["h2d_bandwidth_gbps"] == 437.6
    assert node.helpers()[0][1:4] == ["--selftest-gpu-only", "--gpu", "0000:00:06.0"]


def test_vm_pass_fixture_is_consistent():
    real = vm_result("vm_rxe_host_pass.json")
    assert real["changed"] is False and real["diagnosis"] is None
    assert real["bytes_compared"] == 65536 and real["mismatches"] == 0 and real["bandwidth_gbps"] > 0


# ---------------------------------------------------------------------------
# the C source itself
# ---------------------------------------------------------------------------

VERBS_INCLUDE = os.environ.get("GPUDIRECT_VERBS_INCLUDE", "/usr/include")


@pytest.mark.skipif(not (shutil.which("cc") and os.path.exists(os.path.join(VERBS_INCLUDE, "infiniband/verbs.h"))),
                    reason="needs cc and infiniband/verbs.h: scripts/setup.sh installs gcc and libibverbs-dev")
def test_helper_source_compiles_cleanly(tmp_path):
    src = tmp_path / "h.c"
    src.write_text(lh.HELPER_SOURCE)
    proc = subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-std=gnu99", "-I" + VERBS_INCLUDE,
                           "-o", str(tmp_path / "helper"), str(src), "-libverbs", "-ldl"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(str(tmp_path / "helper"), os.X_OK)


def test_helper_source_has_the_safety_properties():
    src = lh.HELPER_SOURCE
    assert 'dlopen("libcuda.so.1"' in src and "#include <cuda.h>" not in src
    assert "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS" in src and "MemcpyDtoH(check_buf, dptr" in src
    assert "cuMemGetHandleForAddressRange" in src and "ibv_reg_dmabuf_mr" in src
    assert "pattern_not_overwritten" in src
