"""NVIDIA flavour and branch decisions from NVIDIA's supported-GPU data (module_utils/gpudirect_nvidia.py).

Real ids and their sources:
- 0x1db7 Tesla V100-DGXS-32GB, 0x1431 Tesla M4, 0x13f3 Tesla M6, 0x2330 H100 80GB HBM3, 0x1023 Tesla K40m:
  supported-gpus.json of the NVIDIA 525 driver (tests/fixtures/nvidia_gpus/, README.md there).
- 0x2901 B200, 0x2941 GB200, 0x3182 B300 SXM6 AC, 0x31c2 GB300, 0x2bb5 RTX PRO 6000 Blackwell Server
  Edition, 0x233b H200 NVL, 0x2329 H20, 0x230e H20 NVL16: the "Compatible GPUs" table of
  NVIDIA/open-gpu-kernel-modules README.md at tag 595.45.04 (0x2c3a RTX PRO 4500 Blackwell Server
  Edition: at tag 580.142 only); copies in tests/fixtures/nvidia_gpus/.
- 0x2330 on the lent GPU node: /work/gpu-node-vendor-capture-2026-11-24.txt
  (nvidia-smi ``0x233010DE, NVIDIA H100 80GB HBM3``, open module 580.159.04) and
  tests/fixtures/gpu_node/h100/gpudirect_facts.json.
- 0x1df5 V100 SXM2 16GB: pci.ids 2023.04.10; 0x1dbd V100: issue #15.
- 0x2342/0x2345/0x2348 GH200: Linux drivers/vfio/pci/nvgrace-gpu/main.c.
- 0x1bb3 Tesla P4, 0x137d GeForce 940A, 0x1df5 Tesla V100-SXM2-16GB and the 580 legacy branch of
  Maxwell, Pascal and Volta: the driver 590.48.01 supported-gpus.json of NVIDIA's
  nvidia-driver-assistant 0.23.48.01 (extract in tests/fixtures/nvidia_gpus/).
- Chips and the ids no list names (0x2336/0x2337/0x2338/0x233d H100, 0x2309/0x230c/0x2328 H20,
  0x2343 GH200, 0x2909 HGX B200 168GB, 0x31c3 GB300, 0x2b00 GB10B ...): pci.ids 2026.08.22 and
  NVIDIA/gpu-admin-tools v2025.10.20 gpu/devid_names.py, gpu/devid_chips.py (extracts there too).
"""

import gzip
import importlib.util
import json
import os

import pytest

from ansible.module_utils import gpudirect_nvidia as nv
from ansible.module_utils import gpudirect_nvidia_gpus as table
from conftest import PROJECT_FIXTURES, ROOT

H100_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h100", "gpudirect_facts.json")
H200_FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")
GH200_IDS = ("0x2342", "0x2345", "0x2348")
NV_FIXTURES = os.path.join(PROJECT_FIXTURES, "nvidia_gpus")


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
    with pytest.raises(nv.NvidiaDecisionError, match="%s.*gpudirect_nvidia_driver_flavor: proprietary" % device_id):
        nv.choose_flavor([gpu(device_id, "0000:3b:00.0")], "open")


def test_tesla_m4_m6_names_come_from_the_vendor_list():
    assert nv.gpu_info("0x1431")["name"] == "Tesla M4"
    assert nv.gpu_info("0x13f3")["name"] == "Tesla M6"
    assert nv.gpu_info("0x1431")["source"].startswith("NVIDIA's lists up to driver 595.45.04")


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
    assert "gpudirect_nvidia_driver_flavor: proprietary is not supported" in message
    assert "%s (" % device_id in message and "GH200" in message and "at 0009:01:00.0" in message
    assert "set gpudirect_nvidia_driver_flavor: open" in message
    assert nv.choose_flavor([gpu(device_id)], "auto")["flavor"] == "open"


@pytest.mark.parametrize("device_id, first", [("0x2342", 535), ("0x2345", 535), ("0x2348", 565)])
def test_gh200_first_branches(device_id, first):
    # 0x2342 and 0x2348 first named by the open modules' table at 535.288.01 / 565.77; 0x2345 by hand (LATER_GPUS)
    with pytest.raises(nv.NvidiaDecisionError, match="gpudirect_nvidia_driver_branch 525 .*%s.*needs branch %d" % (device_id, first)):
        nv.check_branch("525", [gpu(device_id)])
    assert nv.check_branch(str(first), [gpu(device_id)])["branch"] == str(first)


def test_unknown_id_fails_naming_id_address_and_knobs():
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu("0x2bff", "0000:17:00.0")], "auto", "open")
    message = str(err.value)
    assert "0x2bff (unknown id) at 0000:17:00.0" in message
    assert "gpudirect_nvidia_driver_gpu_support: {'0x2bff': {flavors: open}}" in message
    assert "set gpudirect_nvidia_driver_flavor: open" in message
    assert "0x2bff) are Blackwell or later" in message


@pytest.mark.parametrize("device_id", ["0x2bff", "0x1234"])
def test_unknown_id_never_gets_the_proprietary_modules(device_id):
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu(device_id, "0000:17:00.0")], "proprietary")
    message = str(err.value)
    assert "gpudirect_nvidia_driver_flavor: proprietary cannot be planned for %s (unknown id)" % device_id in message
    assert "gpudirect_nvidia_driver_gpu_support" in message


def test_unknown_id_with_open_is_the_admins_choice():
    out = nv.choose_flavor([gpu("0x2bff")], "open")
    assert out["flavor"] == "open" and "0x2bff" in out["reasons"][1]
    checked = nv.check_branch("580", [gpu("0x2bff")])
    assert "not checked" in checked["reasons"][1]


def test_declared_id_decides_flavour_and_branch():
    support = {"0x1234": {"flavors": "proprietary", "first_branch": "570", "name": "future board"}}
    out = nv.choose_flavor([gpu("0x1234")], "auto", support=support)
    assert out["flavor"] == "proprietary"
    assert "declared in gpudirect_nvidia_driver_gpu_support: 0x1234" in out["reasons"]
    with pytest.raises(nv.NvidiaDecisionError, match=r"0x1234 \(future board\) needs branch 570"):
        nv.check_branch("565", [gpu("0x1234")], support=support)
    assert nv.choose_flavor([gpu("0x2bff")], "auto", support={"0x2BFF": "open"})["flavor"] == "open"


@pytest.mark.parametrize("value, match", [
    ({"0x2bff": {"flavors": "either"}}, r"gpudirect_nvidia_driver_gpu_support\[0x2bff\].flavors either: ids from 0x2900"),
    ({"0x2bff": {"flavors": "proprietary"}}, "declare flavors: open"),
    ({"gpu0": {"flavors": "open"}}, "'gpu0' is not a PCI device id"),
    ({"0x1234": {"flavors": "both"}}, "must be open, either or proprietary, got 'both'"),
    ({"0x1234": {"flavors": "open", "first_branch": "59"}}, r"first_branch: '59' is not a three-digit"),
    ({"0x1234": {"flavors": "open", "branch": "590"}}, "unknown keys branch"),
    (["0x1234"], "must be a dict"),
])
def test_gpu_support_knob_is_checked(value, match):
    with pytest.raises(nv.NvidiaDecisionError, match=match):
        nv.choose_flavor([gpu("0x2330")], "auto", support=value)


# --- Blackwell and current Hopper ids (open-gpu-kernel-modules README, tag 595.45.04) ---

BLACKWELL = {"0x2901": ("NVIDIA B200", 570), "0x2941": ("NVIDIA GB200", 570), "0x3182": ("NVIDIA B300 SXM6 AC", 580),
             "0x31c2": ("NVIDIA GB300", 580), "0x2bb5": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 575),
             "0x2c3a": ("NVIDIA RTX PRO 4500 Blackwell Server Edition", 580)}


@pytest.mark.parametrize("device_id", sorted(BLACKWELL))
def test_blackwell_ids_are_open_only_from_their_first_branch(device_id):
    name, first = BLACKWELL[device_id]
    info = nv.gpu_info(device_id)
    assert (info["name"], info["open_required"], info["min_branch"]) == (name, True, first)
    assert nv.choose_flavor([gpu(device_id)], "auto")["flavor"] == "open"
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu(device_id, "0000:1b:00.0")], "proprietary")
    assert "%s (%s) at 0000:1b:00.0" % (device_id, name) in str(err.value)
    assert "set gpudirect_nvidia_driver_flavor: open" in str(err.value)
    with pytest.raises(nv.NvidiaDecisionError, match="needs branch %d" % first):
        nv.check_branch(str(first - 5), [gpu(device_id)])
    assert nv.check_branch("590", [gpu(device_id)])["branch"] == "590"


@pytest.mark.parametrize("device_id, name, first", [
    ("0x233b", "NVIDIA H200 NVL", 565), ("0x2329", "NVIDIA H20", 535), ("0x230e", "NVIDIA H20 NVL16", 580),
    ("0x2335", "NVIDIA H200", 550)])
def test_current_hopper_ids_take_either_flavour(device_id, name, first):
    info = nv.gpu_info(device_id)
    assert (info["name"], info["open"], info["open_required"], info["min_branch"]) == (name, True, False, first)
    assert nv.choose_flavor([gpu(device_id)], "proprietary")["flavor"] == "proprietary"
    assert nv.choose_flavor([gpu(device_id)], "auto")["flavor"] == "open"


def test_every_id_nvidia_lists_today_is_decided():
    """Each id of the newest open-modules table has a flavour set and a first branch the toolkit knows."""
    gen = _generator()
    with gzip.open(os.path.join(NV_FIXTURES, "open-gpu-kernel-modules-595.45.04-compatible-gpus.md.gz"), "rt",
                   encoding="utf-8") as handle:
        listed = gen.read_open_readme(handle.read())
    assert len(listed) > 250
    for device_id in listed:
        info = nv.gpu_info(device_id)
        assert info["known"] and info["open"], device_id
        assert info["open_required"] == (int(device_id, 16) >= 0x2900 or "GH200" in info["name"]), device_id
        assert info["min_branch"] is None or str(info["min_branch"]) in nv.KNOWN_BRANCHES, device_id


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


@pytest.mark.parametrize("device_id, name", [("0x1db4", "Tesla V100-PCIE-16GB"), ("0x1b38", "Tesla P40"),
                                             ("0x13f2", "Tesla M60"), ("0x1bb3", "Tesla P4")])
def test_590_list_ends_maxwell_pascal_volta_at_580(device_id, name):
    # the 590 list names them on legacybranch 580.xx; 0x1bb3 is in no earlier list
    assert nv.TABLE_GPUS[device_id][1:3] == ("proprietary", "580")
    info = nv.gpu_info(device_id)
    assert (info["name"], info["open"], info["min_branch"], info["max_branch"]) == (name, False, None, 580)
    assert nv.check_branch("580", [gpu(device_id)])["branch"] == "580"
    with pytest.raises(nv.NvidiaDecisionError, match="%s .*supported up to branch 580" % device_id):
        nv.check_branch("590", [gpu(device_id)])


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


# entries copied in the vendor's exact shape from the 525 list (and its 515 list), and rows
# of the open modules' README table at tag 595.45.04
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
SAMPLE_README_595 = """## Compatible GPUs

| Product Name                                            | PCI ID         |
| ------------------------------------------------------- | -------------- |
| NVIDIA H100 80GB HBM3                                   | 2330 10DE 16C0 |
| NVIDIA H200                                             | 2335 10DE 18BE |
| NVIDIA GH200 120GB                                      | 2342 10DE 16EB |
| NVIDIA GH200 480GB                                      | 2342 10DE 1809 |
| NVIDIA B200                                             | 2901 10DE 1999 |
| NVIDIA GB300                                            | 31C2 10DE 21F1 |
"""


def _manifest(tmp_path):
    (tmp_path / "525.json").write_text(json.dumps(SAMPLE_525), encoding="utf-8")
    (tmp_path / "515.json").write_text(json.dumps(SAMPLE_515), encoding="utf-8")
    with gzip.open(str(tmp_path / "595.md.gz"), "wt", encoding="utf-8") as handle:
        handle.write(SAMPLE_README_595)
    where = {"repository": "r/x", "ref": "tag t", "path": "p", "commit": "0" * 40, "date": "2026-03-05"}
    inputs = [dict(where, file="515.json", kind="supported-gpus", branch="515"),
              dict(where, file="525.json", kind="supported-gpus", branch="525"),
              dict(where, file="595.md.gz", kind="open-readme", branch="595", ref="tag 595.45.04")]
    path = tmp_path / "sources.json"
    path.write_text(json.dumps({"inputs": inputs}), encoding="utf-8")
    return path


def test_generator_merges_supported_gpus_and_the_open_table(tmp_path):
    gen = _generator()
    out = tmp_path / "table.py"
    assert gen.main(["--manifest", str(_manifest(tmp_path)), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "595 open modules' Compatible GPUs: r/x tag 595.45.04 p, commit %s (2026-03-05)" % ("0" * 40) in text
    namespace = {}
    exec(compile(text, str(out), "exec"), namespace)  # noqa: S102 - the generated table is literals and one loop
    assert namespace["DRIVER"] == "595.45.04"
    assert namespace["GPUS"] == {
        "0x1023": ("Tesla K40m", "proprietary", "470", ""),
        "0x1431": ("Tesla M4", "proprietary", "", ""),
        "0x1db7": ("Tesla V100-DGXS-32GB", "proprietary", "", ""),
        "0x2330": ("NVIDIA H100 80GB HBM3", "either", "", "525"),
        "0x2335": ("NVIDIA H200", "either", "", "595"),
        "0x2342": ("NVIDIA GH200 120GB", "open", "", "595"),
        "0x2901": ("NVIDIA B200", "open", "", "595"),
        "0x31c2": ("NVIDIA GB300", "open", "", "595"),
    }


def test_generator_refuses_inputs_without_origin_or_shape(tmp_path, capsys):
    gen = _generator()
    bad = {"chips": [{"devid": "0x2330", "name": "a", "features": ["kernelopen"]},
                     {"devid": "0x2330", "name": "b", "features": []}]}
    with pytest.raises(gen.TableError, match="entries of 0x2330 disagree"):
        gen.read_supported_gpus(bad)
    with pytest.raises(gen.TableError, match="no top-level"):
        gen.read_supported_gpus({"gpus": []})
    with pytest.raises(gen.TableError, match="legacybranch"):
        gen.read_supported_gpus({"chips": [{"devid": "0x1023", "name": "x", "legacybranch": "old"}]})
    with pytest.raises(gen.TableError, match="line 3 of the Compatible GPUs section is not a table row"):
        gen.read_open_readme("## Compatible GPUs\n\n| NVIDIA B200 | 29O1 |\n")
    with pytest.raises(gen.TableError, match="lists no GPU"):
        gen.read_open_readme("## Compatible GPUs\n\nnone\n")
    manifest = _manifest(tmp_path)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    del data["inputs"][0]["commit"]
    manifest.write_text(json.dumps(data), encoding="utf-8")
    assert gen.main(["--manifest", str(manifest)]) == 1
    assert "input '515.json' does not say commit" in capsys.readouterr().err


def test_packed_table_groups_ids_by_name_and_refuses_separators():
    gen = _generator()
    rows = {"0x20b0": ("NVIDIA A100-SXM4-40GB", "either", "", ""), "0x20b1": ("NVIDIA A100-PCIE-40GB", "either", "", ""),
            "0x1db4": ("Tesla V100-PCIE-16GB", "proprietary", "", ""),
            "0x1e89": ("NVIDIA GeForce RTX 2060", "either", "", ""),
            "0x1f03": ("NVIDIA GeForce RTX 2060", "either", "", "525")}
    text = gen.render(rows, "595.45.04", ["s"], "c")
    # one name, two groups (the first branch differs): an item in each
    assert "1e89=NVIDIA GeForce RTX 2060; " in text and "1f03=NVIDIA GeForce RTX 2060; " in text
    namespace = {}
    exec(compile(text, "table", "exec"), namespace)  # noqa: S102 - the generated table is literals and one loop
    assert namespace["GPUS"] == rows
    same_name = dict(rows, **{"0x1f03": ("NVIDIA GeForce RTX 2060", "either", "", "")})
    assert "1e89,1f03=NVIDIA GeForce RTX 2060; " in gen.render(same_name, "595", ["s"], "c")
    with pytest.raises(gen.TableError, match="holds '=' or ';'"):
        gen.render({"0x1234": ("A=B", "either", "", "")}, "595", ["s"], "c")


def test_committed_table_is_what_the_generator_writes_from_the_checked_in_inputs():
    gen = _generator()
    text = gen.build(os.path.join(NV_FIXTURES, "sources.json"))
    with open(os.path.join(ROOT, "module_utils", "gpudirect_nvidia_gpus.py"), encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == text
    assert len(table.GPUS) == 1383 and len(table.BY_CHIP) == 214 and table.DRIVER == "595.45.04"
    assert len(table.CHIPS) == 953 and len(table.ARCHITECTURES) == 57


# --- the 590 list (NVIDIA's nvidia-driver-assistant 0.23.48.01) -------------

EXTRACT_590 = os.path.join(NV_FIXTURES, "nvidia-driver-assistant-0.23.48.01-supported-gpus.tsv")


def _read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read()


def test_590_list_is_the_590_48_01_driver_list():
    """Its current open-module ids are the open modules' table at tag 590.48.01, id for id."""
    gen = _generator()
    rows = gen.read_supported_gpus_extract(_read(EXTRACT_590))
    readme = gen.read_open_readme(_read(os.path.join(NV_FIXTURES, "open-gpu-kernel-modules-590.48.01-compatible-gpus.md.gz")))
    assert len(rows) == 1168
    assert {d for d, (_, kopen, legacy, _) in rows.items() if kopen and not legacy} == set(readme)


def test_590_flags_say_what_the_open_only_rule_says():
    """gsp_proprietary_supported is absent exactly on the ids from 0x2900 and the GH200 ones, and the
    table gives every current id of the list the flavour its flags say."""
    gen = _generator()
    for device_id, (name, kopen, legacy, gsp) in gen.read_supported_gpus_extract(_read(EXTRACT_590)).items():
        if legacy:
            assert nv.TABLE_GPUS[device_id][1] == "proprietary" or device_id in nv.LATER_GPUS, device_id
            continue
        assert kopen, device_id
        assert (not gsp) == gen.open_only(device_id, name), device_id
        assert nv.TABLE_GPUS[device_id][1] == ("either" if gsp else "open"), device_id


def test_extract_keeps_what_the_generator_reads():
    gen = _generator()
    lines = gen.extract_supported_gpus(SAMPLE_525)
    assert lines[0] == "1023\t470\t-\tTesla K40m"
    assert "2330\t-\tkernelopen\tNVIDIA H100 80GB HBM3" in lines
    assert gen.read_supported_gpus_extract("# a comment\n" + "\n".join(lines)) == gen.read_supported_gpus(SAMPLE_525)
    with_names = {"chips": [{"devid": "0x2342", "name": "NVIDIA GH200 120GB", "features": ["kernelopen"]},
                            {"devid": "0x2342", "subdevid": "0x1809", "name": "NVIDIA GH200 480GB",
                             "features": ["kernelopen"]}]}
    assert gen.extract_supported_gpus(with_names) == ["2342\t-\tkernelopen\tNVIDIA GH200 120GB\tNVIDIA GH200 480GB"]


@pytest.mark.parametrize("line", ["2330\t-\tkernelopen", "233\t-\t-\tx", "2330\told\t-\tx", "2330\t-\tfast\tx",
                                  "2330 - - x"])
def test_extract_reader_refuses_other_lines(line):
    gen = _generator()
    with pytest.raises(gen.TableError, match="line 1 is not devid"):
        gen.read_supported_gpus_extract(line)


def test_legacy_rows_kernelopen_is_not_open_support():
    """The 590 list marks its 580-legacy rows kernelopen; only a current row (or an open table) means the open
    modules support an id."""
    gen = _generator()
    legacy = {"0x1db4": ("Tesla V100-PCIE-16GB", True, "580", False), "0x1bb3": ("Tesla P4", True, "580", False)}
    older = {"0x1db4": ("Tesla V100-PCIE-16GB", False, "", False)}
    rows = gen.merge([("525", older), ("590", legacy)], [])
    assert rows == {"0x1db4": ("Tesla V100-PCIE-16GB", "proprietary", "580", ""),
                    "0x1bb3": ("Tesla P4", "proprietary", "580", "")}


def test_generator_refuses_flags_against_the_open_only_rule():
    gen = _generator()
    flagged = {"0x2330": ("NVIDIA H100 80GB HBM3", True, "", True), "0x2901": ("NVIDIA B200", True, "", True)}
    with pytest.raises(gen.TableError, match=r"0x2901 \(NVIDIA B200\): the 590 list carries gsp_proprietary_supported"):
        gen.merge([("590", flagged)], [])
    flagged["0x2901"] = ("NVIDIA B200", True, "", False)
    flagged["0x2331"] = ("NVIDIA H100 PCIe", True, "", False)
    with pytest.raises(gen.TableError, match=r"0x2331 .*lacks gsp_proprietary_supported, but the open-only rule says either"):
        gen.merge([("590", flagged)], [])
    # a list without the flag at all (the 525 one) says nothing about it
    assert gen.merge([("525", {"0x2331": ("NVIDIA H100 PCIe", True, "", False)})], [])["0x2331"][1] == "either"


def test_check_mode_compares_the_committed_table(tmp_path, capsys):
    gen = _generator()
    manifest = os.path.join(NV_FIXTURES, "sources.json")
    assert gen.main(["--manifest", manifest, "--check"]) == 0
    stale = tmp_path / "table.py"
    stale.write_text(gen.build(manifest).replace("NVIDIA H100 80GB HBM3", "H100"), encoding="utf-8")
    assert gen.main(["--manifest", manifest, "--check", "-o", str(stale)]) == 1
    captured = capsys.readouterr()
    assert "-" in captured.out and "+" in captured.out and "NVIDIA H100 80GB HBM3" in captured.out
    assert "differs from what the manifest gives" in captured.err


# --- chips: every id of a supported chip (pci.ids, NVIDIA's gpu-admin-tools) --------------

PCI_EXTRACT = os.path.join(NV_FIXTURES, "pci-ids-2026.08.22-10de.tsv")
ADMIN_EXTRACT = os.path.join(NV_FIXTURES, "gpu-admin-tools-v2025.10.20-devids.tsv")


def _published_ids():
    """Every device id NVIDIA's lists here name: the supported-gpus lists and the open modules' tables."""
    gen = _generator()
    with open(os.path.join(NV_FIXTURES, "sources.json"), encoding="utf-8") as handle:
        entries = json.load(handle)["inputs"]
    ids = set()
    for entry in entries:
        text = _read(os.path.join(NV_FIXTURES, entry["file"]))
        if entry["kind"] == "supported-gpus":
            ids.update(gen.read_supported_gpus(json.loads(text)))
        elif entry["kind"] == "supported-gpus-extract":
            ids.update(gen.read_supported_gpus_extract(text))
        elif entry["kind"] == "open-readme":
            ids.update(gen.read_open_readme(text))
    return ids


def test_every_published_id_resolves():
    """Each id of every list resolves, with the 0x prefix or without, in capitals or not; each one a branch
    the toolkit installs (470 and later) supports has its chip and architecture."""
    published = _published_ids()
    assert len(published) == 1169
    for device_id in published:
        for spelling in (device_id, device_id[2:], device_id.upper().replace("0X", "0x"), int(device_id, 16)):
            info = nv.gpu_info(spelling)
            assert info["known"] and info["device_id"] == device_id, spelling
        name, flavors, legacy, first = table.GPUS[device_id]
        assert device_id not in table.BY_CHIP
        if not legacy or int(legacy.split(".")[0]) >= 470:
            assert table.ARCHITECTURES[table.CHIPS[device_id]], device_id


def test_every_gpu_id_of_a_supported_chip_is_known():
    """pci.ids' GPU ids of each chip NVIDIA's lists support are all in the table (Kepler GK104/GK107 aside:
    their listed ids sit on two legacy branches), and those the lists do not name say so."""
    gen = _generator()
    pci = gen.read_pci_ids_extract(_read(PCI_EXTRACT))
    published = _published_ids()
    supported = {table.CHIPS[d] for d in published if d in table.CHIPS}
    for device_id, text in pci.items():
        chip = gen.pci_chip(text)
        if not chip or chip not in supported or chip in ("GK104", "GK107"):
            continue
        assert table.CHIPS[device_id] == chip
        name = table.GPUS[device_id][0]
        assert (device_id in table.BY_CHIP) == (device_id not in published), device_id
        if device_id in table.BY_CHIP:
            assert name.endswith("not in NVIDIA's lists)") and chip in name, device_id


# NVIDIA's gpu-admin-tools (v2025.10.20, gpu/devid_names.py): one product, several ids
PRODUCTS = {
    "H100": ("0x2313", "0x2321", "0x2330", "0x2331", "0x2336", "0x2337", "0x2338", "0x2339", "0x233d"),
    "H200": ("0x2335", "0x233b"),
    "H800": ("0x2322", "0x2324", "0x233a"),
    "H20": ("0x2309", "0x230c", "0x230e", "0x2328", "0x2329", "0x232c"),
    "GH200": ("0x2342", "0x2343", "0x2345", "0x2348"),
    "L20": ("0x26b7", "0x26ba"),
}


@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_a_product_under_several_ids_resolves_them_all_alike(product):
    rows = {d: nv.gpu_info(d) for d in PRODUCTS[product]}
    assert all(info["known"] for info in rows.values()), product
    assert len({table.CHIPS[d] for d in rows}) == 1
    assert len({table.ARCHITECTURES[table.CHIPS[d]] for d in rows}) == 1
    assert len({(info["open"], info["open_required"]) for info in rows.values()}) == 1
    flavors = {nv.choose_flavor([gpu(d)], "auto")["flavor"] for d in rows}
    assert flavors == {"open"}


def test_the_extract_of_gpu_admin_tools_is_what_the_tests_name():
    names, ranges = _generator().read_gpu_admin_tools_extract(_read(ADMIN_EXTRACT))
    for product, ids in PRODUCTS.items():
        if product != "L20":
            assert {d for d, p in names.items() if p == product} == set(ids), product
    assert names["0x26b7"] == names["0x26ba"] == "L20"
    assert (0x2900, 0x297F, "Blackwell", "GB100") in ranges and (0x3180, 0x31FF, "Blackwell", "GB110") in ranges


@pytest.mark.parametrize("device_id, chip, architecture", [
    ("0x2330", "GH100", "Hopper"), ("0x2331", "GH100", "Hopper"), ("0x2321", "GH100", "Hopper"),
    ("0x2335", "GH100", "Hopper"), ("0x2342", "GH100", "Hopper"), ("0x2901", "GB100", "Blackwell"),
    ("0x2941", "GB100", "Blackwell"), ("0x3182", "GB110", "Blackwell"), ("0x31c2", "GB110", "Blackwell"),
    ("0x20b0", "GA100", "Ampere"), ("0x20b2", "GA100", "Ampere"), ("0x26b9", "AD102", "Ada"),
    ("0x27b8", "AD104", "Ada"), ("0x1eb8", "TU104", "Turing"), ("0x1db4", "GV100", "Volta"),
    ("0x15f8", "GP100", "Pascal"), ("0x13f2", "GM204", "Maxwell"), ("0x1023", "GK110", "Kepler"),
    ("0x2bb5", "GB202", "Blackwell"), ("0x2e12", "GB20B", "Blackwell")])
def test_chip_and_architecture_of_ids(device_id, chip, architecture):
    assert table.CHIPS[device_id] == chip and table.ARCHITECTURES[chip] == architecture


@pytest.mark.parametrize("device_id, name, open_required, first", [
    ("0x2337", "H100 SXM5 64GB", False, 525), ("0x2338", "H100 SXM5 96GB", False, 525),
    ("0x233d", "H100 96GB", False, 525), ("0x2336", "H100", False, 525), ("0x2313", "H100 CNX", False, 525),
    ("0x2309", "H20", False, 525), ("0x230c", "H20 NVL16", False, 525),
    ("0x2343", "GH200", True, 535), ("0x2909", "HGX B200 168GB", True, 570), ("0x31c3", "GB300", True, 580),
    ("0x26b7", "L20", False, 525)])
def test_ids_no_list_names_take_their_chips_row(device_id, name, open_required, first):
    info = nv.gpu_info(device_id, address="0000:19:00.0")
    assert info["known"] and device_id in table.BY_CHIP
    assert info["name"].startswith(name + " (") and "not in NVIDIA's lists" in info["name"]
    assert (info["open"], info["open_required"], info["min_branch"]) == (True, open_required, first)
    assert nv.choose_flavor([gpu(device_id)], "auto")["flavor"] == "open"
    if open_required:
        with pytest.raises(nv.NvidiaDecisionError, match="proprietary is not supported on %s" % device_id):
            nv.choose_flavor([gpu(device_id)], "proprietary")
    else:
        assert nv.choose_flavor([gpu(device_id)], "proprietary")["flavor"] == "proprietary"
    with pytest.raises(nv.NvidiaDecisionError, match="%s .*needs branch %d" % (device_id, first)):
        nv.check_branch(str(first - 5), [gpu(device_id)], unlisted_ok=True)


@pytest.mark.parametrize("device_id, chip", [("0x2b00", "GB10B"), ("0x3224", "GB112"), ("0x3340", "GB120"),
                                             ("0x2bff", None)])
def test_ids_of_chips_no_list_supports_stay_unknown(device_id, chip):
    """The contract for an unknown id holds: auto and proprietary fail naming the id, its address and the
    knobs; open is the admin's choice. pci.ids still tells its chip."""
    assert device_id not in table.GPUS and table.CHIPS.get(device_id) == chip
    assert not nv.gpu_info(device_id)["known"]
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu(device_id, "0000:0a:00.0")], "auto")
    message = str(err.value)
    assert "%s (unknown id) at 0000:0a:00.0" % device_id in message
    assert "gpudirect_nvidia_driver_gpu_support: {'%s': {flavors: open}}" % device_id in message
    assert "set gpudirect_nvidia_driver_flavor: open" in message
    assert nv.choose_flavor([gpu(device_id)], "open")["flavor"] == "open"


@pytest.mark.parametrize("device_id", ["0x22a3", "0x1af1", "0x22e8", "0x10f8", "0x1ad6", "0x22ce"])
def test_functions_that_are_not_gpus_are_not_made_gpus(device_id):
    # H100/A100 NVSwitch, GB202/TU104 HD audio, TU102 USB, GB10 PCIe host: a GPU chip's name, not a GPU
    assert device_id not in table.GPUS and device_id not in table.CHIPS
    assert not nv.gpu_info(device_id)["known"]


@pytest.mark.parametrize("raw", [" 0x2330\n", "2330", "0x2330", "0x233B", "233b", 0x2330])
def test_ids_as_sysfs_and_lspci_write_them_resolve(raw):
    """sysfs writes 0x2330 and a newline, lspci -n 2330; either case of the hex digits."""
    info = nv.gpu_info(raw)
    assert info["known"] and info["device_id"] == ("0x233b" if "3b" in str(raw).lower() else "0x2330")


@pytest.mark.parametrize("raw", ["10de:2330", "0x233", "0x23300", "", "GH100", "0x2330 0x2331"])
def test_malformed_ids_are_unknown_and_named_as_given(raw):
    """Not an id: never looked up, never given the proprietary modules; the message names what was read."""
    info = nv.gpu_info(raw, address="0000:17:00.0")
    assert not info["known"] and info["device_id"] == raw
    with pytest.raises(nv.NvidiaDecisionError) as err:
        nv.choose_flavor([gpu(raw, "0000:17:00.0")], "auto")
    assert "%s (unknown id) at 0000:17:00.0" % raw in str(err.value)
    assert "gpudirect_nvidia_driver_gpu_support" in str(err.value)


# pci.ids in its own format (ids and names are facts of pci.ids 2026.08.22; the lines are written here)
SAMPLE_PCI_IDS = """#\tVersion: 2026.08.22
#\tDate:    2026-08-22 03:15:01
10de  NVIDIA Corporation
\t22a3  GH100 [H100 NVSwitch]
\t2330  GH100 [H100 SXM5 80GB]
\t\t10de 16c1  H100 SXM5 80GB
# a comment inside the vendor
\t2337  GH100 [H100 SXM5 64GB]
10df  Emulex Corporation
\t0101  LP101
C 03  Display controller
\t00  VGA compatible controller
"""


def test_pci_ids_extract_keeps_the_device_lines_of_one_vendor():
    gen = _generator()
    lines = gen.extract_pci_ids(SAMPLE_PCI_IDS)
    assert lines == ["#\tVersion: 2026.08.22", "#\tDate:    2026-08-22 03:15:01", "22a3\tGH100 [H100 NVSwitch]",
                     "2330\tGH100 [H100 SXM5 80GB]", "2337\tGH100 [H100 SXM5 64GB]"]
    assert gen.read_pci_ids_extract("\n".join(lines)) == {"0x22a3": "GH100 [H100 NVSwitch]",
                                                          "0x2330": "GH100 [H100 SXM5 80GB]",
                                                          "0x2337": "GH100 [H100 SXM5 64GB]"}
    with pytest.raises(gen.TableError, match="line 1 is not devid<TAB>text"):
        gen.read_pci_ids_extract("2330 GH100")


def test_gpu_admin_tools_extract_reads_the_dicts_as_text():
    gen = _generator()
    names = "GPU_NAME_BY_DEVID = {\n 0x2342: 'H100',\n 0x2330: 'H100',\n 0x2342: 'GH200',\n}\n"
    ranges = "GPU_DEVID_CHIPS = [\n  (0x2900, 0x297F, 'blackwell', 'gb100'),\n]\n"
    lines = gen.extract_gpu_admin_tools(names, ranges)
    assert lines == ["name\t2330\tH100", "name\t2342\tGH200", "chip\t2900\t297f\tblackwell\tgb100"]
    assert gen.read_gpu_admin_tools_extract("\n".join(lines)) == (
        {"0x2330": "H100", "0x2342": "GH200"}, [(0x2900, 0x297F, "Blackwell", "GB100")])
    with pytest.raises(gen.TableError, match="line 1 is neither"):
        gen.read_gpu_admin_tools_extract("chip\t297f\t2900\tblackwell\tgb100")


@pytest.mark.parametrize("text, chip", [
    ("GH100 [H100 SXM5 80GB]", "GH100"), ("GA102GL [RTX A6000]", "GA102"),
    ("AD104M [GeForce RTX 4070 Max-Q / Mobile]", "AD104"),
    ("GB203M / GN22-X11 [GeForce RTX 5090 Max-Q / Mobile]", "GB203"), ("GK110BGL [Tesla Stella SXM]", "GK110"),
    ("GA107BM / GN20-P0-R-K2 [GeForce RTX 3050 6GB Laptop GPU]", "GA107"), ("GB10B [Jetson AGX Thor]", "GB10B"),
    ("GB20B [GB10]", "GB20B"), ("GH100", "GH100"), ("TU104GL [Tesla T4]", "TU104"),
    ("GB202 High Definition Audio Controller", None), ("GH100 [H100 NVSwitch]", None),
    ("TU102 USB Type-C UCSI Controller", None), ("GB10 GEN5 X4 PCIe host", None), ("GB20B PCI bridge", None),
    ("GB6-256(N22W-ES-A1)", None), ("MCP79 Host Bridge", None), ("G92 [GeForce 9800 GT]", None), ("", None)])
def test_pci_chip_reads_the_chip_a_pci_ids_text_starts_with(text, chip):
    assert _generator().pci_chip(text) == chip


def test_chips_extends_each_chip_by_the_row_its_listed_ids_share():
    gen = _generator()
    rows = {"0x2330": ("NVIDIA H100 80GB HBM3", "either", "", "525"),
            "0x2335": ("NVIDIA H200", "either", "", "550"),
            "0x2342": ("NVIDIA GH200 120GB", "open", "", "535"),
            "0x11bf": ("GRID K2", "proprietary", "367", ""), "0x1180": ("GeForce GTX 680", "proprietary", "470", "")}
    pci = {"0x2330": "GH100 [H100 SXM5 80GB]", "0x2337": "GH100 [H100 SXM5 64GB]", "0x2343": "GH100", "0x2329": "GH100 [H20]",
           "0x22a3": "GH100 [H100 NVSwitch]", "0x11bf": "GK104GL [GRID K2]", "0x1180": "GK104 [GeForce GTX 680]",
           "0x1182": "GK104 [GeForce GTX 760 Ti]", "0x2b00": "GB10B [Jetson AGX Thor]"}
    admin = {"0x2343": "GH200", "0x2342": "GH200", "0x2329": "H20", "0x2309": "H20"}
    chip_of, by_chip, skipped = gen.chips(dict(rows, **{"0x2329": ("NVIDIA H20", "either", "", "535")}), pci, admin,
                                          [(0x2900, 0x297F, "Blackwell", "GB100")])
    assert chip_of["0x2337"] == chip_of["0x2309"] == "GH100" and "0x22a3" not in chip_of and chip_of["0x2b00"] == "GB10B"
    assert by_chip["0x2337"] == ("H100 SXM5 64GB (GH100, not in NVIDIA's lists)", "either", "", "525")
    assert by_chip["0x2309"] == ("H20 (GH100, not in NVIDIA's lists)", "either", "", "525")
    assert by_chip["0x2343"] == ("GH200 (GH100, not in NVIDIA's lists)", "open", "", "535")
    assert "0x1182" not in by_chip and skipped == {"GK104": "its listed ids disagree: proprietary/367, proprietary/470"}
    assert "0x2b00" not in by_chip
    with pytest.raises(gen.TableError, match="0x2901: pci.ids says chip GB102, gpu-admin-tools GB100"):
        gen.chips({"0x2901": ("NVIDIA B200", "open", "", "570")}, {"0x2901": "GB102 [B200]"}, {},
                  [(0x2900, 0x297F, "Blackwell", "GB100")])
    with pytest.raises(gen.TableError, match="chip GB100 is Blackwell, not Hopper"):
        gen.chips({}, {"0x2901": "GB100 [B200]"}, {}, [(0x2900, 0x297F, "Hopper", "GB100")])


def test_an_open_only_id_is_never_given_a_chips_other_flavour():
    gen = _generator()
    # an id from 0x2900 whose chip's listed ids were not open-only would be a contradiction: not extended
    _, by_chip, skipped = gen.chips({"0x28ff": ("X", "either", "", "")}, {"0x28ff": "AD107 [X]", "0x2900": "AD107 [Y]"})
    assert by_chip == {} and "0x2900 is Blackwell or later" in skipped["AD107"]
