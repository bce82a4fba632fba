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
"""

import gzip
import importlib.util
import json
import os

import pytest

from ansible.module_utils import gpudirect_nvidia as nv
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
    from ansible.module_utils import gpudirect_nvidia_gpus as table
    assert len(table.GPUS) == 1169 and table.DRIVER == "595.45.04"


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
