"""NVIDIA flavour and branch decisions from NVIDIA's supported-GPU data (module_utils/gpudirect_nvidia.py).

Real ids and their sources:
- 0x1db7 Tesla V100-DGXS-32GB, 0x1431 Tesla M4, 0x13f3 Tesla M6, 0x2330 H100 80GB HBM3, 0x1023 Tesla K40m:
  supported-gpus.json of the NVIDIA 525 driver (module_utils/gpudirect_nvidia_gpus.py header).
- 0x2330 on the lent GPU node: /work/gpu-node-vendor-capture-2026-11-24.txt
  (nvidia-smi ``0x233010DE, NVIDIA H100 80GB HBM3``, open module 580.159.04) and
  tests/fixtures/gpu_node/h100/gpudirect_facts.json.
- 0x1df5 V100 SXM2 16GB: pci.ids 2023.04.10; 0x1dbd V100: issue #15.
- 0x2342/0x2345/0x2348 GH200: Linux drivers/vfio/pci/nvgrace-gpu/main.c.
"""

import importlib.util
import json
import os

import pytest

from ansible.module_utils import gpudirect_nvidia as nv
from conftest import PROJECT_FIXTURES, ROOT

H100_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "gpudirect_facts.json")
H200_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")
GH200_IDS = ("0x2342", "0x2345", "0x2348")


def gpu(device_id, address=None):
    return {"device_id": device_id, "vendor_id": "0x10de", "address": address}


def facts(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


# --- open / proprietary ---------------------------------------------------

@pytest.mark.parametrize("device_id", ["0x1db7", "0x1df5", "0x1dbd", "0x1431", "0x13f3", "0x1db4", "0x15f9"])
def test_pre_turing_datacentre_gpus_get_the_proprietary_modules(device_id):
    out = nv.choose_flavor([gpu(device_id)], "auto")
    assert out["flavor"] == "proprietary"
    assert "only the proprietary modules" in out["reasons"][0]


@pytest.mark.parametrize("device_id", ["0x1db7", "0x1dbd", "0x1431", "0x13f3"])
def test_open_request_refused_on_pre_turing_ids(device_id):
    with pytest.raises(nv.NvidiaDecisionError, match="%s.*nvidia_driver_flavor: proprietary" % device_id):
        nv.choose_flavor([gpu(device_id, "0000:3b:00.0")], "open")


def test_tesla_m4_m6_names_come_from_the_vendor_list():
    assert nv.gpu_info("0x1431")["name"] == "Tesla M4"
    assert nv.gpu_info("0x13f3")["name"] == "Tesla M6"
    assert nv.gpu_info("0x1431")["source"].startswith("supported-gpus.json of driver 525")


def test_h100_on_the_gpu_node_still_decides_open_580():
    node = facts(H100_FACTS)
    assert [g["device_id"] for g in node["gpus"]] == ["0x2330"]
    out = nv.choose_flavor(node["gpus"], "auto", "open")
    assert out["flavor"] == "open"
    assert "0x2330 (NVIDIA H100 80GB HBM3)" in out["reasons"][0]
    assert nv.check_branch("580", node["gpus"])["branch"] == "580"


def test_h200_on_the_gpu_node_decides_open():
    node = facts(H200_FACTS)
    assert nv.choose_flavor(node["gpus"], "auto")["flavor"] == "open"
    assert nv.check_branch("580", node["gpus"])["branch"] == "580"


@pytest.mark.parametrize("device_id", GH200_IDS)
def test_gh200_refuses_proprietary_naming_the_knob(device_id):
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu(device_id, "0009:01:00.0")], "proprietary")
    message = str(err.value)
    assert "nvidia_driver_flavor: proprietary is not supported" in message
    assert "%s (GH200" % device_id in message and "at 0009:01:00.0" in message
    assert "set nvidia_driver_flavor: open" in message
    assert nv.choose_flavor([gpu(device_id)], "auto")["flavor"] == "open"


@pytest.mark.parametrize("device_id", GH200_IDS)
def test_gh200_needs_branch_535(device_id):
    with pytest.raises(nv.NvidiaDecisionError, match="nvidia_driver_branch 525 .*%s.*needs branch 535" % device_id):
        nv.check_branch("525", [gpu(device_id)])
    assert nv.check_branch("535", [gpu(device_id)])["branch"] == "535"


def test_unknown_id_fails_naming_id_address_and_knob():
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu("0x2bff", "0000:17:00.0")], "auto", "open")
    message = str(err.value)
    assert "0x2bff (unknown id) at 0000:17:00.0" in message
    assert "set nvidia_driver_flavor: open or proprietary" in message


def test_unknown_id_with_an_explicit_flavour_is_the_admins_choice():
    out = nv.choose_flavor([gpu("0x2bff")], "open")
    assert out["flavor"] == "open" and "0x2bff" in out["reasons"][1]
    checked = nv.check_branch("580", [gpu("0x2bff")])
    assert "not checked" in checked["reasons"][1]


def test_fallback_only_without_gpus():
    assert nv.choose_flavor([], "auto", "proprietary")["flavor"] == "proprietary"


# --- branches -------------------------------------------------------------

def test_legacy_branch_caps_the_branch():
    # Tesla K40m: legacybranch "470.xx" in the vendor list
    assert nv.gpu_info("0x1023")["max_branch"] == 470
    assert nv.check_branch("470", [gpu("0x1023")])["branch"] == "470"
    with pytest.raises(nv.NvidiaDecisionError, match="0x1023 .*supported up to branch 470"):
        nv.check_branch("535", [gpu("0x1023")])


def test_first_listed_branch_is_the_minimum():
    # H100 0x2330 is first named by the 525 list (absent from 510 and 515)
    assert nv.gpu_info("0x2330")["min_branch"] == 525
    with pytest.raises(nv.NvidiaDecisionError, match="needs branch 525"):
        nv.check_branch("470", [gpu("0x2330")])


def test_volta_capped_at_580():
    with pytest.raises(nv.NvidiaDecisionError, match="0x1dbd .*supported up to branch 580"):
        nv.check_branch("590", [gpu("0x1dbd")], True)


def test_every_later_id_has_a_source_and_open_required_implies_open():
    for device_id, (name, kopen, required, first, last, source) in nv.LATER_GPUS.items():
        assert nv.norm_id(device_id) == device_id and name and source
        assert kopen or not required
        assert first == "" or first in nv.KNOWN_BRANCHES
        assert last == "" or last in nv.KNOWN_BRANCHES


# --- the generator --------------------------------------------------------

def _generator():
    path = os.path.join(ROOT, "scripts", "nvidia-supported-gpus-table.py")
    spec = importlib.util.spec_from_file_location("nvidia_supported_gpus_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# entries copied in the vendor's exact shape from the 525 list (and its 515 list)
SAMPLE_525 = {"chips": [
    {"devid": "0x1023", "name": "Tesla K40m", "legacybranch": "470.xx", "features": []},
    {"devid": "0x1431", "name": "Tesla M4", "features": ["hdmi4k60rgb444", "vdpaufeaturesetF"]},
    {"devid": "0x1DB7", "name": "Tesla V100-DGXS-32GB",
     "features": ["dpycbcr420", "dpgsynccompatible", "hdmi4k60rgb444", "vdpaufeaturesetI"]},
    {"devid": "0x2330", "subdevid": "0x16C0", "subvendorid": "0x10DE", "name": "NVIDIA H100 80GB HBM3",
     "features": ["dpycbcr420", "dpgsynccompatible", "hdmi4k60rgb444", "hdmigsynccompatible", "runtimepm",
                  "vdpaufeaturesetK", "kernelopen"]},
    {"devid": "0x2330", "subdevid": "0x16C1", "subvendorid": "0x10DE", "name": "NVIDIA H100 80GB HBM3",
     "features": ["dpycbcr420", "dpgsynccompatible", "hdmi4k60rgb444", "hdmigsynccompatible", "runtimepm",
                  "vdpaufeaturesetK", "kernelopen"]},
]}
SAMPLE_515 = {"chips": [c for c in SAMPLE_525["chips"] if c["devid"] != "0x2330"]}


def test_generator_on_a_vendor_shaped_sample(tmp_path):
    gen = _generator()
    src, old, out = tmp_path / "supported-gpus.json", tmp_path / "old.json", tmp_path / "table.py"
    src.write_text(json.dumps(SAMPLE_525), encoding="utf-8")
    old.write_text(json.dumps(SAMPLE_515), encoding="utf-8")
    assert gen.main([str(src), "--driver", "525.85.12", "--source", "test sample",
                     "--earlier", "515=%s" % old, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "supported-gpus.json of NVIDIA driver 525.85.12" in text
    assert "--driver 525.85.12 --earlier 515=..." in text
    namespace = {}
    exec(compile(text, str(out), "exec"), namespace)  # noqa: S102 - the generated table is literals and one loop
    assert namespace["DRIVER"] == "525.85.12"
    assert namespace["GPUS"] == {
        "0x1023": ("Tesla K40m", False, "470", ""),
        "0x1431": ("Tesla M4", False, "", ""),
        "0x1db7": ("Tesla V100-DGXS-32GB", False, "", ""),
        "0x2330": ("NVIDIA H100 80GB HBM3", True, "", "525"),
    }


def test_generator_refuses_disagreeing_rows_and_other_shapes(tmp_path, capsys):
    gen = _generator()
    bad = {"chips": [{"devid": "0x2330", "name": "a", "features": ["kernelopen"]},
                     {"devid": "0x2330", "name": "b", "features": []}]}
    with pytest.raises(gen.TableError, match="entries of 0x2330 disagree"):
        gen.derive(bad)
    with pytest.raises(gen.TableError, match="no top-level"):
        gen.derive({"gpus": []})
    with pytest.raises(gen.TableError, match="legacybranch"):
        gen.derive({"chips": [{"devid": "0x1023", "name": "x", "legacybranch": "old"}]})
    path = tmp_path / "x.json"
    path.write_text("[]", encoding="utf-8")
    assert gen.main([str(path), "--driver", "525", "--source", "s"]) == 1
    assert "no top-level" in capsys.readouterr().err


def test_packed_table_groups_ids_by_name_and_refuses_separators():
    gen = _generator()
    rows = {"0x20b0": ("NVIDIA A100-SXM4-40GB", True, "", ""), "0x20b1": ("NVIDIA A100-PCIE-40GB", True, "", ""),
            "0x20b2": ("NVIDIA A100-SXM4-80GB", True, "", ""), "0x20be": ("NVIDIA GRID A100A", True, "", ""),
            "0x1db4": ("Tesla V100-PCIE-16GB", False, "", ""), "0x1e89": ("NVIDIA GeForce RTX 2060", True, "", ""),
            "0x1f03": ("NVIDIA GeForce RTX 2060", True, "", "525")}
    text = gen.render(rows, "525", "s", "c")
    # one name, two groups (the first branch differs): an item in each
    assert "1e89=NVIDIA GeForce RTX 2060; " in text and "1f03=NVIDIA GeForce RTX 2060; " in text
    namespace = {}
    exec(compile(text, "table", "exec"), namespace)  # noqa: S102 - the generated table is literals and one loop
    assert namespace["GPUS"] == rows
    same_name = dict(rows, **{"0x1f03": ("NVIDIA GeForce RTX 2060", True, "", "")})
    assert "1e89,1f03=NVIDIA GeForce RTX 2060; " in gen.render(same_name, "525", "s", "c")
    with pytest.raises(gen.TableError, match="holds '=' or ';'"):
        gen.render({"0x1234": ("A=B", True, "", "")}, "525", "s", "c")


def test_committed_table_is_what_the_generator_writes():
    gen = _generator()
    from ansible.module_utils import gpudirect_nvidia_gpus as table
    rows = {k: v for k, v in table.GPUS.items()}
    assert len(rows) > 1000 and table.DRIVER == "525"
    text = gen.render(rows, table.DRIVER, table.SOURCE,
                      "scripts/nvidia-supported-gpus-table.py supported-gpus.json --driver 525 "
                      "--earlier 510=... --earlier 515=...")
    with open(os.path.join(ROOT, "module_utils", "gpudirect_nvidia_gpus.py"), encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == text
    assert len(committed.splitlines()) < 800
