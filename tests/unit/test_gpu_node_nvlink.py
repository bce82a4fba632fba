"""NVLink links and fabric state: module_utils/gpudirect_nvlink.py on the outputs captured on the lent
two-GPU H200 machine (tests/fixtures/gpu_node/h200x2/capture) and the one-GPU H200 (h200/capture),
the facts collector running them, and the per-host report showing them."""

import json
import os

import pytest

from ansible.module_utils import gpudirect_nvlink as nvlink

import gpudirect_facts
import gpudirect_report as report
from conftest import H200_CAPTURE, PROJECT_FIXTURES
from sysfs_tree import SysfsTree

H200X2 = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200x2")
H200X2_CAPTURE = os.path.join(H200X2, "capture")
ADDRESSES = ("0000:00:06.0", "0000:00:07.0")


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


# --------------------------------------------------------------------------- nvidia-smi nvlink -s

def test_nvlink_status_of_the_two_h200s():
    gpus = nvlink.parse_nvlink_status(read(H200X2_CAPTURE, "nvidia-smi-nvlink-s.txt"))
    assert sorted(gpus) == [0, 1]
    for gpu in gpus.values():
        assert gpu["name"] == "NVIDIA H200" and gpu["uuid"].startswith("GPU-")
        assert (gpu["links_total"], gpu["links_up"], gpu["link_speed_gbytes_s"]) == (18, 18, 26.562)
        assert gpu["total_gbytes_s"] == 478.116
        assert [link["link"] for link in gpu["links"]] == list(range(18))
    # the same GPUs as nvidia-smi -L names them on that machine
    listed = [line for line in read(H200X2_CAPTURE, "nvidia-smi-L.txt").splitlines() if line.startswith("GPU ")]
    assert ["GPU %d: %s (UUID: %s)" % (i, gpus[i]["name"], gpus[i]["uuid"]) for i in (0, 1)] == listed


def test_nvlink_status_inactive_links_mixed_speeds_and_no_nvlink():
    text = read(H200X2_CAPTURE, "nvidia-smi-nvlink-s.txt").replace("Link 17: 26.562 GB/s", "Link 17: <inactive>", 1)
    text = text.replace("Link 16: 26.562 GB/s", "Link 16: 25.781 GB/s", 1)
    gpu0 = nvlink.parse_nvlink_status(text)[0]
    assert (gpu0["links_total"], gpu0["links_up"], gpu0["link_speed_gbytes_s"]) == (18, 17, None)
    assert gpu0["links"][17] == {"link": 17, "up": False, "speed_gbytes_s": None}
    # a PCIe card: its header, no link; no GPU header at all (an error line): nothing
    assert nvlink.parse_nvlink_status("GPU 0: NVIDIA H100 PCIe (UUID: GPU-1)\n")[0]["links_total"] == 0
    assert nvlink.parse_nvlink_status("") == {}
    assert nvlink.parse_nvlink_status("NVIDIA-SMI has failed because it couldn't communicate\n") == {}


@pytest.mark.parametrize("text, message", [
    ("GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: fast\n", "link state 'fast'"),
    ("GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\nGPU 0: NVIDIA H200 (UUID: GPU-1)\n",
     "GPU 0 listed twice"),
    ("GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Lnk 0: 26.562 GB/s\n", "line 2: expected 'Link N: ...'"),
    (None, "expected text"),
])
def test_nvlink_status_malformed_is_named(text, message):
    with pytest.raises(nvlink.NvlinkParseError, match=message):
        nvlink.parse_nvlink_status(text)


# --------------------------------------------------------------------------- nvidia-smi -q: Fabric

def test_fabric_of_the_two_h200s():
    fabric = nvlink.parse_fabric(read(H200X2_CAPTURE, "nvidia-smi-q.txt"))
    assert sorted(fabric) == list(ADDRESSES)
    # 580.159.04 prints a Health sub-block, every row N/A on HGX H200: read, not dropped
    health_na = dict((key, None) for key in nvlink.HEALTH_LABELS)
    for state in fabric.values():
        assert state == {"state": "Completed", "status": "Success", "clique_id": 0,
                         "cluster_uuid": "00000000-0000-0000-0000-000000000000", "health": health_na, "unknown": {}}


def test_fabric_of_the_one_gpu_h200_is_not_applicable():
    # the one-GPU machine: a Fabric section whose fields are N/A; "GPU Fabric GUID" is another field
    assert nvlink.parse_fabric(read(H200_CAPTURE, "nvidia-smi-q.txt")) == {
        "0000:00:06.0": {"state": None, "status": None, "clique_id": None, "cluster_uuid": None,
                         "health": dict((key, None) for key in nvlink.HEALTH_LABELS), "unknown": {}}}


def test_fabric_section_absent_and_malformed():
    text = read(H200X2_CAPTURE, "nvidia-smi-q.txt")
    assert nvlink.parse_fabric(text.replace("    Fabric\n", "    Fabrik\n")) == {}
    assert nvlink.parse_fabric("") == {}
    with pytest.raises(nvlink.NvlinkParseError, match="CliqueId 'x7' is not a number"):
        nvlink.parse_fabric(text.replace("CliqueId                                       : 0",
                                         "CliqueId                                       : x7", 1))
    with pytest.raises(nvlink.NvlinkParseError, match="expected text"):
        nvlink.parse_fabric(b"bytes")


# --------------------------------------------------------------------------- the collector and the report

class SmiRunner(object):
    """nvidia-smi answering each of its three calls with what the node printed."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None

    def run_command(self, args, environ_update=None, **kwargs):
        self.calls.append(args)
        for key, answer in self.answers.items():
            if key in args[1:]:
                return answer
        raise AssertionError("unexpected command %r" % (args,))


def two_h200(tmp_path):
    tree = SysfsTree(tmp_path)
    for address in ADDRESSES:
        tree.add_pci(address, vendor=0x10de, device=0x2335, pci_class=0x030200, driver="nvidia")
    tree.empty_infiniband()
    return tree


def query_csv():
    """The GPU query rows of the two GPUs, from what the node printed (nvidia-smi-L.txt and its facts)."""
    facts = json.loads(read(H200X2, "gpudirect_facts.json"))["ansible_facts"]["gpudirect"]
    return "".join("%d, %s, 0000%s, %s, %s, %d\n" % (g["index"], g["name"], g["pci_bus_id"][4:], g["driver_version"],
                                                      g["compute_cap"], g["memory_total_mib"])
                   for g in facts["nvidia_smi"]["gpus"])


def test_the_collector_sets_nvlink_and_fabric_on_each_gpu(tmp_path):
    runner = SmiRunner({"--format=csv,noheader,nounits": (0, query_csv(), ""),
                        "nvlink": (0, read(H200X2_CAPTURE, "nvidia-smi-nvlink-s.txt"), ""),
                        "-q": (0, read(H200X2_CAPTURE, "nvidia-smi-q.txt"), "")})
    facts = gpudirect_facts.gather_facts(two_h200(tmp_path).root, runner, kernel_log=False, live=True)
    assert facts["nvlink"] == {"available": True, "reason": None, "fabric_available": True, "fabric_reason": None}
    assert [g["address"] for g in facts["gpus"]] == list(ADDRESSES)
    for gpu in facts["gpus"]:
        assert (gpu["nvlink"]["links_up"], gpu["nvlink"]["link_speed_gbytes_s"]) == (18, 26.562)
        assert gpu["fabric"]["state"] == "Completed" and gpu["fabric"]["status"] == "Success"
    text = "\n".join(report.gpudirect_preflight_report(facts, "h200x2"))
    assert text.count("NVLink 18/18 links up, 26.562 GB/s each (478.116 GB/s); fabric Completed/Success, clique 0, "
                      "cluster 00000000-0000-0000-0000-000000000000") == 2


def test_nodes_without_nvidia_smi_or_nvlink_keep_working(tmp_path):
    tree = two_h200(tmp_path)
    # the container and VM test nodes: no nvidia-smi at all
    facts = gpudirect_facts.gather_facts(tree.root, SmiRunner({}), nvidia_smi=False, kernel_log=False, live=True)
    assert facts["nvlink"]["available"] is False and facts["nvlink"]["reason"].startswith("nvidia-smi did not answer")
    assert all(g["nvlink"] is None and g["fabric"] is None for g in facts["gpus"])
    assert "NVLink not read (nvidia-smi did not answer: disabled" in "\n".join(
        report.gpudirect_preflight_report(facts, "vm"))
    # nvlink -s fails, -q prints garbage in the Fabric section: reasons and a warning, never a failure
    runner = SmiRunner({"--format=csv,noheader,nounits": (0, query_csv(), ""), "nvlink": (3, "", "Not Supported"),
                        "-q": (0, read(H200X2_CAPTURE, "nvidia-smi-q.txt").replace(": 0\n", ": zero\n"), "")})
    facts = gpudirect_facts.gather_facts(tree.root, runner, kernel_log=False, live=True)
    assert facts["nvlink"]["reason"] == "nvidia-smi nvlink -s failed (rc=3): Not Supported"
    assert "CliqueId 'zero' is not a number" in facts["nvlink"]["fabric_reason"]
    assert any(w.startswith("fabric: ") for w in facts["warnings"])
    assert all(g["nvlink"] is None and g["fabric"] is None for g in facts["gpus"])


class ImexRunner(SmiRunner):
    """nvidia-smi as on the 2x H200 machine, and nvidia-imex-ctl answering -N with ``imex``."""

    def __init__(self, answers, imex):
        SmiRunner.__init__(self, answers)
        self.imex = imex

    def get_bin_path(self, name, required=False, opt_dirs=None):
        if name == "nvidia-imex-ctl":
            return "/usr/bin/nvidia-imex-ctl"
        return SmiRunner.get_bin_path(self, name, required, opt_dirs)

    def run_command(self, args, environ_update=None, **kwargs):
        if args[0] == "/usr/bin/nvidia-imex-ctl":
            self.calls.append(args)
            return self.imex
        return SmiRunner.run_command(self, args, environ_update, **kwargs)


def _imex_facts(tmp_path, imex):
    runner = ImexRunner({"--format=csv,noheader,nounits": (0, query_csv(), ""),
                         "nvlink": (0, read(H200X2_CAPTURE, "nvidia-smi-nvlink-s.txt"), ""),
                         "-q": (0, read(H200X2_CAPTURE, "nvidia-smi-q.txt"), "")}, imex)
    return gpudirect_facts.gather_facts(two_h200(tmp_path).root, runner, kernel_log=False, live=True), runner


def test_the_collector_reads_the_imex_domain(tmp_path):
    """nvidia-imex-ctl -N of a real GB200 NVL72 (tests/fixtures/imex/README.md names the source)."""
    text = read(os.path.join(PROJECT_FIXTURES, "imex"), "ctl-N-gb200-18-nodes-570.172.txt")
    facts, runner = _imex_facts(tmp_path, (0, text, ""))
    assert ["/usr/bin/nvidia-imex-ctl", "-N"] in runner.calls
    imex = facts["imex"]
    assert imex["installed"] and imex["reason"] is None and imex["domain_state"] == "UP"
    assert len(imex["nodes"]) == 18 and imex["problems"] == []
    assert "  IMEX       domain UP, 18/18 nodes READY" in report.gpudirect_preflight_report(facts, "gb200")


def test_imex_that_does_not_answer_or_prints_garbage_is_a_reason(tmp_path):
    facts, _ = _imex_facts(tmp_path, (1, "", "Unable to connect to the IMEX daemon"))
    assert facts["imex"]["reason"] == "nvidia-imex-ctl -N failed (rc=1): Unable to connect to the IMEX daemon"
    assert "  IMEX       not read (nvidia-imex-ctl -N failed (rc=1): Unable to connect to the IMEX daemon)" in \
        report.gpudirect_preflight_report(facts, "gb200")
    facts, _ = _imex_facts(tmp_path / "again", (0, "no table here\n", ""))
    assert facts["imex"]["reason"].startswith("nvidia-imex-ctl -N: no 'Nodes:' block")
    assert any(w.startswith("imex: ") for w in facts["warnings"])
