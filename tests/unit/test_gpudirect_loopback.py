"""Unit tests for library/gpudirect_loopback.py and module_utils/gpudirect_loopback_helper.py:
argument handling, device selection from real-shaped facts, RoCE GID choice, helper
output parsing, diagnoses, check mode and the helper build cache, end to end via main().

Real captures used: tests/fixtures/gpu_node/h200/gpudirect_facts.json (H200, no NIC) and
tests/fixtures/loopback/vm_rxe_*.json (soft-RoCE VM: facts, a passing and a corrupted run)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils import gpudirect_loopback_build as lb
from ansible.module_utils import gpudirect_loopback_helper as lh

import gpudirect_facts
import gpudirect_loopback
import sysfs_tree
from conftest import PROJECT_FIXTURES
from hang_guard import HANG_GUARD_S

LOOPBACK = os.path.join(PROJECT_FIXTURES, "loopback")
ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "gpudirect_verify")
with open(os.path.join(ROLE, "vars", "main.yml")) as _handle:
    HELPER_FILES = yaml.safe_load(_handle)["__gpudirect_verify_helper_files"]
# the helper's source files as the role ships them, in the role's order
HELPER_SOURCES = [os.path.join(ROLE, "files", name) for name in HELPER_FILES]
HELPER_C_FILES = [p for p in HELPER_SOURCES if p.endswith(".c")]
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
    return {"root": str(root), "helper_dir": str(tmp_path / "cache"), "source": list(HELPER_SOURCES)}


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
                  "diagnosis", "helper_path", "helper_built", "pair_role", "peer", "peer_address", "pair_port",
                  "local_address", "gid", "remote_gid", "peer_mode", "peer_error"):
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
    result = run_module(gpudirect_loopback, dict(args, helper_dir=env["helper_dir"], source=env["source"], mode="host"))
    assert result["failed"] is True and result["diagnosis"]["code"] == "bad_input"
    assert fragment in result["msg"]
    assert node.calls == [] and not os.path.exists(env["helper_dir"])


@pytest.mark.parametrize("source", [[], ["/var/lib/gpudirect/loopback/src/gpudirect_loopback.h"]])
def test_a_source_list_without_c_file_fails_before_anything_runs(env, monkeypatch, source, run_module):
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "helper_dir": env["helper_dir"], "source": source})
    assert result["diagnosis"]["code"] == "bad_input" and "source lists no .c file" in result["msg"]
    assert node.calls == [] and not os.path.exists(env["helper_dir"])


def test_unknown_mode_rejected_by_argument_spec(env, monkeypatch, run_module):
    result = run_module(gpudirect_loopback, {"mode": "cuda_magic", "source": env["source"]})
    assert result["failed"] is True and "cuda_magic" in result["msg"]


# ---------------------------------------------------------------------------
# device selection
# ---------------------------------------------------------------------------

def test_h200_without_nic_cuda_dmabuf_fails_no_rdma_device_with_facts(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    facts = load_facts(H200_FACTS)
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
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
    result = run_module(gpudirect_loopback, {"facts": whole, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "no_rdma_device"


def test_two_gpus_without_nic_each_named_gpu_fails_no_rdma_device_for_that_gpu(env, monkeypatch, run_module):
    # the lent 2x H200 machine's facts: the role runs the module once per GPU (no NIC to pair with);
    # each result names its GPU and the memory it would have tested, for the per-GPU verdicts
    node = Node(monkeypatch)
    facts = load_facts(os.path.join(PROJECT_FIXTURES, "gpu_node", "h200x2", "gpudirect_facts.json"))
    for gpu in ("0000:00:06.0", "0000:00:07.0"):
        result = run_module(gpudirect_loopback, {"facts": facts, "gpu": gpu[5:], "helper_dir": env["helper_dir"],
                                                  "source": env["source"]})
        assert result["diagnosis"]["code"] == "no_rdma_device" and result["gpu"] == gpu
        assert result["mode"] == "cuda_dmabuf" and result["mode_reason"].startswith("auto: dma-buf")
        assert "GPUs 0000:00:06.0, 0000:00:07.0" in result["msg"]
    host = run_module(gpudirect_loopback, {"facts": facts, "mode": "host", "helper_dir": env["helper_dir"],
                                            "source": env["source"]})
    assert (host["mode"], host["mode_reason"], host["gpu"]) == ("host", "requested", None)
    assert host["diagnosis"]["code"] == "no_rdma_device"
    # a GPU the node does not have is named as such, not as a missing NIC
    wrong = run_module(gpudirect_loopback, {"facts": facts, "gpu": "0000:00:08.0", "helper_dir": env["helper_dir"],
                                             "source": env["source"]})
    assert wrong["diagnosis"]["code"] == "unknown_gpu" and "present: 0000:00:06.0, 0000:00:07.0" in wrong["msg"]
    assert node.calls == []


def test_no_facts_and_no_sysfs_devices_lists_what_it_saw(env, monkeypatch, run_module):
    Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "helper_dir": env["helper_dir"], "source": env["source"]})
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
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "peermem_not_loaded" and "nvidia_peermem=False" in result["msg"]
    facts["dmabuf"] = {"kernel_ok": False, "open_module": True}
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "rxe0",
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "dmabuf_unsupported"
    assert node.calls == []


def _board_of_1024_mib(env):
    """The H200's facts with its memory reported as 1024 MiB (a small board), over rxe0."""
    facts = load_facts(H200_FACTS)
    facts["rdma_devices"] = vm_facts()["rdma_devices"]
    for gpu in facts["gpus"]:
        gpu["memory_total_mib"] = 1024
    rxe_sysfs(env["root"])
    return facts


def test_size_above_gpu_memory_fails_before_running(env, monkeypatch, run_module):
    """Gate (issue #31 outcome 6): the GPU-memory size guard. The H200's facts with its
    memory reported as 1024 MiB (a small board): a size of 1 GiB + 1 byte is inside the
    module's generic bound (2 GiB), so only the GPU-memory guard can refuse it, before
    anything runs."""
    node = Node(monkeypatch)
    facts = _board_of_1024_mib(env)
    size = 1024 * (1 << 20) + 1
    assert size < gpudirect_loopback.MAX_SIZE
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "rxe0",
                                              "size": size, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["failed"] is True
    assert result["diagnosis"]["code"] == "size_exceeds_gpu_memory"
    assert "size 1073741825 bytes is larger than the 1024 MiB of GPU 0000:00:06.0" in result["diagnosis"]["message"]
    assert node.calls == []


def test_size_of_the_whole_gpu_memory_passes_the_guard(env, monkeypatch, run_module):
    """The other side of the guard above: exactly the board's 1024 MiB is not refused, the
    helper is built and run with that size (a guard off by one, or one that refused every
    size near the memory, would fail here)."""
    node = Node(monkeypatch)
    facts = _board_of_1024_mib(env)
    size = 1024 * (1 << 20)
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "rxe0",
                                              "size": size, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert (result.get("diagnosis") or {}).get("code") != "size_exceeds_gpu_memory", result
    assert node.helpers() and any(str(size) in arg for arg in node.helpers()[0]), node.calls


def test_port_down_from_live_sysfs(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    rxe_sysfs(env["root"], state="1: DOWN")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
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
    ("cuda_unavailable", "dlopen", 0, "cannot load libcuda.so.1", "gpudirect_nvidia_driver role"),
    ("size_exceeds_gpu_memory", "cuMemGetInfo", 0, "2 bytes asked, 1 free", "Lower size"),
    ("no_rdma_device", "ibv_get_device_list", 38, "libibverbs sees no RDMA device", "soft-RoCE"),
]


@pytest.mark.parametrize("code,stage,errnum,detail,fix", HELPER_ERRORS)
def test_helper_error_codes_become_diagnoses(env, monkeypatch, code, stage, errnum, detail, fix, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch, helper_line(ok=0, error=code, stage=stage, errno=errnum, detail=detail,
                                         bandwidth_gbps=None, mismatches=0))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["failed"] is True
    assert result["diagnosis"]["code"] == code
    assert detail in result["diagnosis"]["message"] and "stage %s" % stage in result["msg"]
    assert fix in result["diagnosis"]["fix"]
    assert len(node.helpers()) == 1


def test_pattern_not_overwritten_reports_first_offset(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, helper_line(ok=0, error="pattern_not_overwritten", stage="compare", mismatches=65536,
                                  old_pattern_bytes=65536, first_mismatch=0, detail="65536 of 65536 bytes differ"))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
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
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "helper_output_malformed"
    assert result["stdout"].startswith("Segmentation fault") and "rc=1" in result["msg"]


# ---------------------------------------------------------------------------
# end to end: build cache, command line, check mode, results
# ---------------------------------------------------------------------------

def test_build_once_then_cached_and_command_line(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "size": 65536, "iterations": 200, "helper_dir": env["helper_dir"],
            "source": env["source"]}
    first = run_module(gpudirect_loopback, args)
    assert first.get("failed") is not True, first
    assert first["changed"] is True and first["helper_built"] is True
    digest = lb.helper_digest([(os.path.basename(p), open(p, "rb").read()) for p in env["source"]])
    assert first["helper_path"] == os.path.join(env["helper_dir"], "gpudirect_loopback_helper")
    assert first["helper_sha256"] == digest
    with open(first["helper_path"] + ".sha256") as handle:
        assert handle.read() == digest + "\n"
    build = node.builds()[0]
    assert build[0] == "/usr/bin/cc" and build[-2:] == ["-libverbs", "-ldl"]
    # compiled from the shipped .c files, no copy of them; the header is found next to them
    assert build[build.index("-o") + 2:-2] == HELPER_C_FILES
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


def test_build_only_builds_without_devices_and_a_copied_helper_is_current(env, tmp_path, monkeypatch, run_module):
    """The role builds the helper once per platform (build_only, on one node) and copies the
    binary and its stamp to the others: there the module finds it current and builds nothing."""
    node = Node(monkeypatch)
    # no RDMA device, no facts: build_only chooses nothing
    built = run_module(gpudirect_loopback, {"build_only": True, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert built.get("failed") is not True, built
    assert built["changed"] is True and built["helper_built"] is True and len(node.builds()) == 1
    assert node.helpers() == []
    again = run_module(gpudirect_loopback, {"build_only": True, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert again["changed"] is False and again["helper_built"] is False and len(node.builds()) == 1
    # the copy on another node of the platform: the same source, the binary and stamp copied
    other = tmp_path / "other-node"
    other.mkdir()
    for name in ("gpudirect_loopback_helper", "gpudirect_loopback_helper.sha256"):
        shutil.copy2(os.path.join(env["helper_dir"], name), str(other / name))
    rxe_sysfs(env["root"])
    run = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": str(other),
                                          "source": env["source"]})
    assert run.get("failed") is not True, run
    assert run["helper_built"] is False and run["helper_sha256"] == built["helper_sha256"]
    assert len(node.builds()) == 1 and node.helpers()[0][0] == str(other / "gpudirect_loopback_helper")


def test_build_only_in_check_mode_plans_the_build(env, monkeypatch, run_module):
    node = Node(monkeypatch)
    check = run_module(gpudirect_loopback, {"build_only": True, "helper_dir": env["helper_dir"], "source": env["source"]},
                       check_mode=True)
    assert check["changed"] is True and "-libverbs" in check["would_run"][0] and node.calls == []
    assert not os.path.exists(os.path.join(env["helper_dir"], "gpudirect_loopback_helper"))


@pytest.fixture
def own_source(env, tmp_path):
    """A copy of the helper's source files that a test may change, as a new role version would;
    returns the header's path."""
    (tmp_path / "src").mkdir()
    env["source"] = [shutil.copy(p, str(tmp_path / "src" / os.path.basename(p))) for p in HELPER_SOURCES]
    return tmp_path / "src" / "gpudirect_loopback.h"


def test_changed_source_rebuilds_and_check_mode_says_so(env, own_source, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]}
    assert run_module(gpudirect_loopback, args)["helper_built"] is True
    own_source.write_text(own_source.read_text() + "/* a new version of the header alone */\n")
    check = run_module(gpudirect_loopback, args, check_mode=True)
    assert check["changed"] is True and "-libverbs" in check["would_run"][0] and len(node.builds()) == 1
    again = run_module(gpudirect_loopback, args)
    assert again["changed"] is True and again["helper_built"] is True and len(node.builds()) == 2
    assert again["helper_sha256"] == lb.helper_digest([(os.path.basename(p), open(p, "rb").read())
                                                       for p in env["source"]])
    settled = run_module(gpudirect_loopback, args)
    assert settled["changed"] is False and len(node.builds()) == 2


def test_a_stamp_that_does_not_match_rebuilds(env, monkeypatch, run_module):
    """A binary without its stamp, or with another source's stamp, is not trusted."""
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]}
    binary = run_module(gpudirect_loopback, args)["helper_path"]
    with open(binary + ".sha256", "w") as handle:
        handle.write("0" * 64 + "\n")
    assert run_module(gpudirect_loopback, args)["helper_built"] is True
    os.unlink(binary + ".sha256")
    assert run_module(gpudirect_loopback, args)["helper_built"] is True
    assert len(node.builds()) == 3 and os.path.exists(binary + ".sha256")


def test_the_role_ships_every_source_file_and_only_those():
    """A file added to files/ and not to the list would be missing on the node (and the reverse)."""
    assert sorted(HELPER_FILES) == sorted(os.listdir(os.path.join(ROLE, "files")))
    assert [lb.build_command("cc", ["/s/a.h", "/s/b.c", "/s/c.c"], "/o/h")] == [
        ["cc"] + lb.COMPILE_FLAGS + ["-o", "/o/h", "/s/b.c", "/s/c.c"] + lb.LINK_FLAGS]


def test_a_source_directory_is_its_c_and_h_files(env, own_source, monkeypatch, run_module):
    """Ad hoc (ansible -m gpudirect_loopback -a source=/var/lib/gpudirect/loopback/src): the same files,
    the same stamp as the role's list; other files in the directory are not part of the helper."""
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    listed = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"],
                                             "source": env["source"]})
    (own_source.parent / "README.txt").write_text("not C\n")
    whole = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"],
                                            "source": [str(own_source.parent)]})
    assert whole["helper_sha256"] == listed["helper_sha256"] and whole["changed"] is False
    assert sorted(node.builds()[0][node.builds()[0].index("-o") + 2:-2]) == sorted(
        p for p in env["source"] if p.endswith(".c"))


def test_every_source_file_stays_readable_in_one_sitting():
    for path in HELPER_SOURCES:
        with open(path) as handle:
            assert len(handle.read().splitlines()) <= 800, path


def test_check_mode_before_the_source_is_shipped_would_build(env, tmp_path, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    missing = str(tmp_path / "not-yet" / "gpudirect_loopback.c")
    args = {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": [missing]}
    check = run_module(gpudirect_loopback, args, check_mode=True)
    assert check.get("failed") is not True and check["changed"] is True and check["helper_sha256"] is None
    assert check["would_run"][0][check["would_run"][0].index("-o") + 2:-2] == [missing] and node.calls == []
    real = run_module(gpudirect_loopback, args)
    assert real["failed"] is True and real["diagnosis"]["code"] == "bad_input"
    assert missing in real["msg"] and "tasks_from=helper" in real["msg"] and node.calls == []


def test_build_failure_says_what_to_install(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch, build_rc=1,
                build_stderr="x.c:14:10: fatal error: infiniband/verbs.h: No such file or directory\n")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "helper_build_failed"
    assert "libibverbs-dev" in result["msg"] and "rdma-core-devel" in result["msg"]
    assert node.helpers() == []
    assert not os.path.exists(result["helper_path"])
    assert [f for f in os.listdir(os.path.dirname(result["helper_path"])) if f.startswith(".build-")] == []


def test_no_compiler(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, cc=None)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "helper_build_failed" and "No C compiler" in result["msg"]


def test_check_mode_runs_nothing(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    args = {"mode": "host", "facts": vm_facts(), "helper_dir": env["helper_dir"], "source": env["source"], "_corrupt_one_byte": True}
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
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    assert result["rdma_device"] == "mlx5_0" and result["gpu"] == sysfs_tree.GPU   # the PIX pair
    assert result["selection"]["distance"] == "PIX" and result["gid_index"] is None   # InfiniBand: no GRH
    assert result["speedup"] == 3.0
    assert result["port_rate_gbps"] == 200.0 and result["ratio_port"] == 0.9
    pair = [p for p in facts["pairs"] if p["nic"] == "mlx5_0"][0]
    assert any("ACS redirects" in w for w in result["path_warnings"]) == bool(pair["acs_redirect"])
    # the far NIC's port is DOWN: naming it fails with port_down before anything runs
    down = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "rdma_device": "mlx5_1",
                                            "helper_dir": env["helper_dir"], "source": env["source"]})
    assert down["diagnosis"]["code"] == "port_down"
    assert any("SYS apart" in w for w in down["diagnosis"]["related"])
    cmd = node.helpers()[0]
    assert cmd[cmd.index("--gpu") + 1] == sysfs_tree.GPU and cmd[cmd.index("--mode") + 1] == "cuda_dmabuf"


def test_min_ratio_port(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "min_ratio_port": 0.5,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "bandwidth_below_minimum"


def test_selftest_gpu_only_on_h200_facts(env, monkeypatch, run_module):
    selftest = {"helper_version": 1, "mode": "selftest_gpu_only", "gpu": "0000:00:06.0", "gpu_name": "NVIDIA H200",
                "dmabuf_exported": 1, "bytes_compared": 1048576, "mismatches": 0, "h2d_bandwidth_gbps": 437.6,
                "d2h_bandwidth_gbps": 439.2, "ok": 1, "error": None}
    node = Node(monkeypatch, json.dumps(selftest) + "\n")
    result = run_module(gpudirect_loopback, {"selftest_gpu_only": True, "facts": load_facts(H200_FACTS),
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
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
    proc = subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-std=gnu99", "-I" + VERBS_INCLUDE,
                           "-o", str(tmp_path / "helper")] + HELPER_C_FILES + ["-libverbs", "-ldl"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(str(tmp_path / "helper"), os.X_OK)


def test_helper_source_has_the_safety_properties():
    src = "".join(open(p).read() for p in HELPER_SOURCES)
    assert 'dlopen("libcuda.so.1"' in src and "#include <cuda.h>" not in src
    assert "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS" in src and "MemcpyDtoH(check_buf, dptr" in src
    assert "cuMemGetHandleForAddressRange" in src and "ibv_reg_dmabuf_mr" in src
    assert "pattern_not_overwritten" in src


# ---------------------------------------------------------------------------
# pair mode: arguments, commands, results (module side)
# ---------------------------------------------------------------------------

def roce_sysfs(root, name, ipv4_hex, netdev):
    """Another soft-RoCE device: GID 0 link-local, GID 1 the IPv4-mapped address (hex 'aabb:ccdd')."""
    pdir = os.path.join(str(root), "sys/class/infiniband", name, "ports/1")
    files = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "Ethernet", "rate": "2.5 Gb/sec (1X SDR)",
             "gid_attrs/ndevs/0": netdev, "gids/0": "fe80:0000:0000:0000:5054:00ff:fe00:0002",
             "gid_attrs/types/0": "RoCE v2", "gids/1": "0000:0000:0000:0000:0000:ffff:" + ipv4_hex,
             "gid_attrs/types/1": "RoCE v2"}
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(pdir, rel)), exist_ok=True)
        with open(os.path.join(pdir, rel), "w") as handle:
            handle.write(text + "\n")
    return str(root)


PAIR_SERVER_OUT = dict(HELPER_OK, helper_version=2, iterations=50, bandwidth_gbps=0.1212, pair_role="server",
                       peer="10.99.0.2", pair_port=18516, local_address="10.99.0.1",
                       gid="0000:0000:0000:0000:0000:ffff:0a00:020f",
                       remote_gid="0000:0000:0000:0000:0000:ffff:0a63:0002", peer_mode="host", peer_error=None)


@pytest.fixture
def route(monkeypatch):
    """The client's route to its peer: resolve_peer and route_source without DNS or a routing table."""
    seen = {"source": "10.0.2.15"}

    def resolve(peer, port):
        if peer.endswith(".invalid"):
            raise lh.LoopbackError("peer_unreachable", "cannot resolve peer %r: [Errno -2] Name or service not known."
                                   % peer)
        return {"server-a": "10.0.2.2"}.get(peer, peer)

    def source(address, port):
        if address == "192.0.2.99":
            raise lh.LoopbackError("peer_unreachable", "no route from this host to peer %s: [Errno 101] Network is "
                                   "unreachable." % address)
        seen["asked"] = (address, port)
        return seen["source"]

    monkeypatch.setattr(gpudirect_loopback, "resolve_peer", resolve)
    monkeypatch.setattr(gpudirect_loopback, "route_source", source)
    return seen


@pytest.mark.parametrize("args,fragment", [
    ({"listen": True, "peer": "10.0.2.2"}, "exclude each other"),
    ({"listen": True, "pair_port": 0}, "pair_port must be 1..65535"),
    ({"peer": "10.0.2.2", "pair_port": 65536}, "pair_port must be 1..65535"),
    ({"listen": True, "pair_timeout": 0}, "pair_timeout must be >= 1"),
    ({"listen": True, "selftest_gpu_only": True}, "leave listen and peer out"),
    ({"peer": "10.0.2.2", "_corrupt_one_byte": True}, "set it on the listen side"),
    ({"peer": "  "}, "peer is empty"),
])
def test_pair_bad_input_fails_before_anything_runs(env, monkeypatch, args, fragment, run_module):
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, dict(args, helper_dir=env["helper_dir"], source=env["source"], mode="host"))
    assert result["failed"] is True and result["diagnosis"]["code"] == "bad_input"
    assert fragment in result["msg"] and "What to do" in result["msg"]
    assert node.calls == [] and not os.path.exists(env["helper_dir"])


def test_listen_false_without_peer_is_the_loopback(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "listen": False,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["pair_role"] is None and "peer" not in result
    assert not [a for a in node.helpers()[0] if a.startswith("--pair")]


def test_pair_server_command_and_result(env, monkeypatch, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch, json.dumps(PAIR_SERVER_OUT) + "\n")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "listen": True, "size": 65536,
                                              "iterations": 50, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    assert node.helpers() == [[result["helper_path"], "--mode", "host", "--device", "rxe0", "--port", "1",
                               "--gid-index", "auto", "--depth", "128", "--size", "65536", "--iters", "50",
                               "--timeout", "60", "--pair-listen", "--pair-port", "18516", "--pair-timeout", "120"]]
    assert result["pair_role"] == "server" and result["peer"] == "10.99.0.2" and result["pair_port"] == 18516
    assert result["local_address"] == "10.99.0.1" and result["peer_mode"] == "host"
    assert result["remote_gid"].endswith("0a63:0002")
    # the GID the helper chose, with its type from sysfs
    assert result["gid_index"] == 1
    assert result["gid"] == {"index": 1, "type": "RoCE v2", "gid": "0000:0000:0000:0000:0000:ffff:0a00:020f"}
    assert result["bytes_compared"] == 65536 and result["mismatches"] == 0 and result["bandwidth_gbps"] == 0.1212
    assert result["ratio_port"] == round(0.1212 / 2.5, 4) and result["diagnosis"] is None


def test_pair_client_command_gid_from_the_route(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    out = dict(PAIR_SERVER_OUT, pair_role="client", peer="10.0.2.2", local_address="10.0.2.15")
    node = Node(monkeypatch, json.dumps(out) + "\n")
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": "server-a",
                                              "pair_port": 19000, "pair_timeout": 30, "size": 65536,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    assert route["asked"] == ("10.0.2.2", 19000)
    cmd = node.helpers()[0]
    assert cmd[cmd.index("--gid-index") + 1] == "auto"
    assert cmd[-6:] == ["--pair-peer", "10.0.2.2", "--pair-port", "19000", "--pair-timeout", "30"]
    assert "--pair-listen" not in cmd and "--corrupt" not in cmd
    assert result["pair_role"] == "client" and result["peer_address"] == "10.0.2.2"
    assert result["gid"]["gid"].endswith("0a00:020f") and result["gid_index"] == 1


def test_pair_client_gid_not_on_the_peers_subnet_fails_early(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    route["source"] = "192.168.7.5"     # the route to the peer leaves through another NIC
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": "192.168.7.1",
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "no_gid"
    assert "carries 192.168.7.5" in result["msg"] and "not on the peer's subnet" in result["msg"]
    assert "its GIDs carry 10.0.2.15" in result["msg"] and "set gid_index" in result["msg"]
    assert node.calls == []


def test_pair_client_explicit_gid_index_skips_the_route_check(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    route["source"] = "192.168.7.5"
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": "192.168.7.1",
                                              "gid_index": 1, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    cmd = node.helpers()[0]
    assert cmd[cmd.index("--gid-index") + 1] == "1"


@pytest.mark.parametrize("peer,fragment", [("nowhere.invalid", "cannot resolve peer 'nowhere.invalid'"),
                                           ("192.0.2.99", "no route from this host to peer 192.0.2.99")])
def test_pair_client_peer_unreachable_before_running(env, monkeypatch, route, peer, fragment, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": peer,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "peer_unreachable" and fragment in result["msg"]
    assert "Start the server side" in result["msg"]
    assert node.calls == []


def test_pair_client_picks_the_device_on_the_route(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])                                         # rxe0: 10.0.2.15 (management)
    roce_sysfs(env["root"], "rxe1", "0a63:0002", "enp2s0")         # rxe1: 10.99.0.2 (the pair link)
    route["source"] = "10.99.0.2"
    node = Node(monkeypatch)
    result = run_module(gpudirect_loopback, {"mode": "host", "peer": "10.99.0.1", "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    assert result["rdma_device"] == "rxe1" and "carry 10.99.0.2" in result["selection"]["reason"]
    assert node.helpers()[0][node.helpers()[0].index("--device") + 1] == "rxe1"
    # the server cannot know the client's network: with two devices it needs a name
    server = run_module(gpudirect_loopback, {"mode": "host", "listen": True, "helper_dir": env["helper_dir"], "source": env["source"]})
    assert server["diagnosis"]["code"] == "unknown_rdma_device" and "name one with rdma_device" in server["msg"]


def test_pair_gpu_mode_passes_the_gpu_and_no_staged(tmp_path, env, monkeypatch, run_module):
    facts = gpudirect_facts.gather_facts(sysfs_tree.gpu_server(tmp_path / "srv").root)
    facts["dmabuf"] = {"kernel_ok": True, "open_module": True, "config_dma_shared_buffer": "y"}
    monkeypatch.setattr(gpudirect_loopback, "ROOT", facts["root"])
    node = Node(monkeypatch, helper_line(mode="cuda_dmabuf", gid_index=-1, pair_role="server", peer="10.1.0.2"))
    result = run_module(gpudirect_loopback, {"mode": "cuda_dmabuf", "facts": facts, "listen": True,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result.get("failed") is not True, result.get("msg")
    cmd = node.helpers()[0]
    assert cmd[cmd.index("--gpu") + 1] == sysfs_tree.GPU and "--staged" not in cmd
    assert "--gid-index" not in cmd          # InfiniBand: LID routing, no GID
    assert result["gid_index"] is None and result["peer"] == "10.1.0.2"


def test_pair_check_mode_reports_the_commands(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    node = Node(monkeypatch)
    server = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "listen": True,
                                              "_corrupt_one_byte": True, "helper_dir": env["helper_dir"], "source": env["source"]},
                        check_mode=True)
    client = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": "10.0.2.2",
                                              "helper_dir": env["helper_dir"], "source": env["source"]}, check_mode=True)
    assert node.calls == [] and not os.path.exists(env["helper_dir"])
    assert server["would_run"][-1][-6:] == ["--pair-listen", "--pair-port", "18516", "--pair-timeout", "120",
                                            "--corrupt"]
    assert client["would_run"][-1][-6:-4] == ["--pair-peer", "10.0.2.2"]
    assert client["gid"]["index"] == 1 and client["local_address"] == "10.0.2.15"
    assert "bytes_compared" not in server and "bytes_compared" not in client


def test_pair_peer_failure_is_reported_with_the_peers_code(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    detail = ("the client (10.99.0.2) failed at its stage gid_for_peer: [no_gid] no GID of rxe0 port 1 carries "
              "10.0.2.15")
    Node(monkeypatch, helper_line(ok=0, error="peer_failed", stage="exchange", detail=detail, pair_role="server",
                                  peer="10.99.0.2", peer_error="no_gid", bandwidth_gbps=None, bytes_compared=0))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "listen": True,
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "peer_failed" and result["peer_error"] == "no_gid"
    assert "The other side of the pair failed" in result["msg"] and "[no_gid]" in result["msg"]
    assert "stage exchange" in result["msg"]


def test_pair_client_reports_the_servers_mismatch(env, monkeypatch, route, run_module):
    rxe_sysfs(env["root"])
    Node(monkeypatch, helper_line(ok=0, error="data_mismatch", stage="compare_on_server", mismatches=1,
                                  first_mismatch=32769, pair_role="client", peer="10.0.2.2", bandwidth_gbps=None,
                                  detail="the server (10.0.2.2) copied back what arrived: 1 of 65536 bytes differ"))
    result = run_module(gpudirect_loopback, {"mode": "host", "facts": vm_facts(), "peer": "10.0.2.2",
                                              "helper_dir": env["helper_dir"], "source": env["source"]})
    assert result["diagnosis"]["code"] == "data_mismatch" and result["first_mismatch"] == 32769
    assert "the server compared" in result["msg"]


@pytest.mark.parametrize("code", ["peer_unreachable", "pair_timeout", "peer_lost", "peer_failed", "peer_protocol",
                                  "pair_mismatch", "pair_port_in_use", "pair_socket_error"])
def test_pair_codes_say_what_to_do(code):
    assert code in lh.DIAGNOSES
    summary, fix = lh.DIAGNOSES[code]
    assert summary.endswith(".") and fix.endswith(".")


def test_address_gid_and_gid_for_address():
    assert lh.address_gid("10.99.0.1") == "0000:0000:0000:0000:0000:ffff:0a63:0001"
    assert lh.address_gid("fd00::5") == "fd00:0000:0000:0000:0000:0000:0000:0005"
    table = [(0, "RoCE v2", "fe80:0000:0000:0000:5054:00ff:fe24:896e"),
             (2, "IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a63:0001"),
             (3, "RoCE v2", "0000:0000:0000:0000:0000:ffff:0a63:0001")]
    assert lh.gid_for_address(table, "10.99.0.1")[0] == 3           # RoCE v2 first
    assert lh.gid_for_address(table[:2], "10.99.0.1")[0] == 2
    assert lh.gid_for_address(table, "10.99.0.7") is None
    assert lh.gid_addresses(table) == ["10.99.0.1"]


def test_route_source_and_resolve_peer_on_loopback():
    assert lh.resolve_peer("127.0.0.1", 18516) == "127.0.0.1"
    assert lh.route_source("127.0.0.1", 18516) == "127.0.0.1"


# ---------------------------------------------------------------------------
# pair mode for real: the helper's two processes over TCP, on a stand-in
# libibverbs (tests/unit/fake_libibverbs.c: one RoCE device fake0 whose RDMA
# WRITE lands in the process named by the destination QP number)
# ---------------------------------------------------------------------------

FAKE_VERBS_SRC = os.path.join(os.path.dirname(__file__), "fake_libibverbs.c")
HAVE_CC_VERBS = bool(shutil.which("cc") and os.path.exists(os.path.join(VERBS_INCLUDE, "infiniband/verbs.h")))


@pytest.fixture(scope="module")
def fake_verbs(tmp_path_factory):
    """The helper linked against the stand-in libibverbs; env runs it there."""
    if not HAVE_CC_VERBS:
        pytest.skip("needs cc and infiniband/verbs.h: scripts/setup.sh installs gcc and libibverbs-dev")
    base = tmp_path_factory.mktemp("fakeverbs")
    lib = base / "lib"
    lib.mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I" + VERBS_INCLUDE,
                    "-o", str(lib / "libibverbs.so"), FAKE_VERBS_SRC], check=True)
    helper = base / "helper"
    subprocess.run(["cc"] + lb.COMPILE_FLAGS + ["-I" + VERBS_INCLUDE, "-L" + str(lib), "-o", str(helper),
                                                ] + HELPER_C_FILES + lb.LINK_FLAGS, check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib), LIBRARY_PATH=str(lib), LANG="C", LC_ALL="C")
    return {"helper": str(helper), "lib": str(lib), "env": env, "base": base}


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_pair(fake, server_args=(), client_args=(), env_server=None, env_client=None, start_client=True,
             timeout=5, client_first=False):
    """Start the server, then the client (or the other way round); both JSON results."""
    port = str(free_port())
    common = ["--mode", "host", "--device", "fake0", "--gid-index", "auto", "--size", "65536", "--iters", "20",
              "--pair-port", port, "--pair-timeout", str(timeout)]
    server_cmd = [fake["helper"]] + common + ["--pair-listen"] + list(server_args)
    client_cmd = [fake["helper"]] + common + ["--pair-peer", "127.0.0.1"] + list(client_args)
    popen = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first, second = (client_cmd, server_cmd) if client_first else (server_cmd, client_cmd)
    first_env, second_env = ((env_client, env_server) if client_first else (env_server, env_client))
    procs = [subprocess.Popen(first, env=dict(fake["env"], **(first_env or {})), **popen)]
    if start_client or client_first:
        import time
        time.sleep(0.5 if client_first else 0.1)
        procs.append(subprocess.Popen(second, env=dict(fake["env"], **(second_env or {})), **popen))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout * 3 + 10)
        results.append(lh.parse_helper_output(out))
    if client_first:
        results.reverse()
    return results + [None] * (2 - len(results))


def test_fake_verbs_loopback_still_passes_and_catches_a_flipped_byte(fake_verbs):
    base = [fake_verbs["helper"], "--mode", "host", "--device", "fake0", "--gid-index", "1", "--size", "65536"]
    ok = lh.parse_helper_output(subprocess.run(base, env=fake_verbs["env"], capture_output=True, text=True).stdout)
    assert ok["ok"] == 1 and ok["bytes_compared"] == 65536 and ok["mismatches"] == 0 and ok["bandwidth_gbps"] > 0
    assert "pair_role" not in ok and ok["helper_version"] == 2
    bad = lh.parse_helper_output(subprocess.run(base + ["--corrupt"], env=fake_verbs["env"], capture_output=True,
                                                text=True).stdout)
    assert bad["error"] == "data_mismatch" and bad["first_mismatch"] == 32769 and bad["mismatches"] == 1


def test_fake_verbs_pair_passes(fake_verbs):
    server, client = run_pair(fake_verbs)
    for side, role in ((server, "server"), (client, "client")):
        assert side["ok"] == 1, side
        assert side["pair_role"] == role and side["bytes_compared"] == 65536 and side["mismatches"] == 0
        assert side["bandwidth_gbps"] > 0 and side["local_address"] == "127.0.0.1" and side["peer"] == "127.0.0.1"
        assert side["gid_index"] == 1 and side["gid"] == side["remote_gid"] == "0000:0000:0000:0000:0000:ffff:7f00:0001"
        assert side["peer_mode"] == "host"
    assert server["bandwidth_gbps"] == pytest.approx(client["bandwidth_gbps"], rel=1e-3)   # the client's figure


def test_fake_verbs_pair_client_may_start_first(fake_verbs):
    server, client = run_pair(fake_verbs, client_first=True)
    assert server["ok"] == 1 and client["ok"] == 1


def test_fake_verbs_pair_corrupt_on_the_server_fails_both(fake_verbs):
    server, client = run_pair(fake_verbs, server_args=["--corrupt"])
    assert server["error"] == "data_mismatch" and server["stage"] == "compare" and server["first_mismatch"] == 32769
    assert client["error"] == "data_mismatch" and client["stage"] == "compare_on_server"
    assert client["first_mismatch"] == 32769 and client["mismatches"] == 1 and client["bandwidth_gbps"] is None


def test_fake_verbs_pair_silent_drop_is_pattern_not_overwritten(fake_verbs):
    server, client = run_pair(fake_verbs, env_client={"FAKE_VERBS_DROP": "1"})
    assert server["error"] == client["error"] == "pattern_not_overwritten"
    assert server["mismatches"] == server["old_pattern_bytes"] == 65536


def test_fake_verbs_pair_client_without_a_gid_for_its_address(fake_verbs):
    server, client = run_pair(fake_verbs, env_client={"FAKE_VERBS_NO_IPV4_GID": "1"})
    assert client["error"] == "no_gid" and "carries 127.0.0.1" in client["detail"]
    assert server["error"] == "peer_failed" and server["peer_error"] == "no_gid"
    assert "[no_gid]" in server["detail"] and "client (127.0.0.1)" in server["detail"]


def test_fake_verbs_pair_size_mismatch(fake_verbs):
    server, client = run_pair(fake_verbs, client_args=["--size", "4096"])
    assert server["error"] in ("pair_mismatch", "peer_failed") and client["error"] in ("pair_mismatch", "peer_failed")
    assert "pair_mismatch" in (server["error"], client["error"])


def test_fake_verbs_pair_server_alone_times_out(fake_verbs):
    server, _ = run_pair(fake_verbs, start_client=False, timeout=1)
    assert server["error"] == "pair_timeout" and "no pair client connected" in server["detail"]


def test_fake_verbs_pair_client_alone_gives_up(fake_verbs):
    port = str(free_port())
    out = subprocess.run([fake_verbs["helper"], "--mode", "host", "--device", "fake0", "--gid-index", "auto",
                          "--pair-peer", "127.0.0.1", "--pair-port", port, "--pair-timeout", "1"],
                         env=fake_verbs["env"], capture_output=True, text=True, timeout=20)
    client = lh.parse_helper_output(out.stdout)
    assert out.returncode == 1 and client["error"] == "peer_unreachable" and "Connection refused" in client["detail"]


def test_fake_verbs_helper_rejects_contradictory_pair_arguments(fake_verbs):
    for args, fragment in ((["--pair-listen", "--pair-peer", "x"], "exclude each other"),
                           (["--pair-peer", "x", "--corrupt"], "give it to the server"),
                           (["--gid-index", "auto"], "needs pair mode"),
                           (["--pair-listen", "--pair-port", "0"], "--pair-port must be")):
        out = subprocess.run([fake_verbs["helper"], "--device", "fake0"] + args, env=fake_verbs["env"],
                             capture_output=True, text=True)
        result = lh.parse_helper_output(out.stdout)
        assert result["error"] == "bad_input" and fragment in result["detail"], args


PAIR_RUNNER = """
import sys
import ansible.module_utils
ansible.module_utils.__path__.append(%(mu)r)
sys.path.insert(0, %(library)r)
import gpudirect_loopback
gpudirect_loopback.ROOT = %(root)r
gpudirect_loopback.main()
"""


def test_module_pair_end_to_end_on_fake_verbs(fake_verbs, tmp_path):
    """Both sides through the module itself (build, sysfs, route, command, parsing) in two processes."""
    root = roce_sysfs(tmp_path / "root", "fake0", "7f00:0001", "lo")
    here = os.path.dirname(os.path.abspath(__file__))
    project = os.path.abspath(os.path.join(here, "..", ".."))
    runner = tmp_path / "runner.py"
    runner.write_text(PAIR_RUNNER % {"mu": os.path.join(project, "module_utils"),
                                     "library": os.path.join(project, "library"), "root": root})
    port = free_port()
    procs = []
    for name, extra in (("server", {"listen": True, "_corrupt_one_byte": False}), ("client", {"peer": "127.0.0.1"})):
        args = dict(extra, mode="host", size=65536, iterations=20, pair_port=port, pair_timeout=20,
                    helper_dir=str(tmp_path / ("cache-" + name)), source=HELPER_SOURCES)
        path = tmp_path / (name + ".json")
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        procs.append(subprocess.Popen([sys.executable, str(runner), str(path)], env=fake_verbs["env"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
        results.append(json.loads(out))
    server, client = results
    for side, role in ((server, "server"), (client, "client")):
        assert side.get("failed") is not True, (role, side.get("msg"), side.get("stderr"))
        assert side["changed"] is True and side["helper_built"] is True     # built in its own cache
        assert side["pair_role"] == role and side["rdma_device"] == "fake0"
        assert side["bytes_compared"] == 65536 and side["mismatches"] == 0 and side["bandwidth_gbps"] > 0
        assert side["gid"] == {"index": 1, "type": "RoCE v2", "gid": "0000:0000:0000:0000:0000:ffff:7f00:0001"}
    assert client["peer_address"] == "127.0.0.1" and client["command"][-6:-4] == ["--pair-peer", "127.0.0.1"]
    assert "--pair-listen" in server["command"]
