"""NVLink fabric services (fabric manager, NVLSM, IMEX) and nvidia module options
(module_utils/gpudirect_nvlink_plan.py, and the gpudirect_nvidia_driver plan that uses it).

Sources of the facts the decisions rest on:
- NVSwitch 3/4 ids: lspci of HGX A100/H100 (tests/unit/test_nvidia_fabricmanager.py names them).
- NVLink-5 HGX (B200/B300): "On NVIDIA DGX-B200, HGX-B200, and HGX-B100 systems and later, the FabricManager
  package needs an additional NVLSM dependency" (NVIDIA Fabric Manager User Guide, quoted in
  siderolabs/extensions pull request 717); the baseboard's CX7 bridge exposes "Limited PFs" whose VPD carries
  the vendor field SMDL=SW_MNG, which NVIDIA's nvidia-fabricmanager-start.sh (and siderolabs' wrapper,
  nvswitch.go findLpfDevices) look for. The VPD bytes below are built in the PCI VPD layout around that
  field: no real LPF VPD dump is public.
- GB200 compute trays need no fabric manager (aws/aws-parallelcluster-cookbook pull request 3098) and share
  GPU memory across trays through IMEX (NVIDIA IMEX guide, "Deployment Models").
- Packages: nvidia-imex-570 at 570.86.15-1 (NVIDIA/gpu-driver-container pull request 200), nvidia-imex at the
  driver version from 580, nvlsm and infiniband-diags (gpu-driver-container ubuntu24.04/install.sh,
  rhel9/install.sh, rhel9/precompiled/Dockerfile).
- /proc/driver/nvidia/params and /proc/devices: tests/fixtures/nvreg/ (captured on the lent H200 node).
- nvidia-imex-ctl -N: tests/fixtures/imex/ (README.md there names both public sources).
"""

import os

import pytest

import gpu_node_sim as sim
from ansible.module_utils import gpudirect_nvidia as nv
from ansible.module_utils import gpudirect_nvidia_plan as plan
from ansible.module_utils import gpudirect_nvlink_plan as fp

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "..", "fixtures")


def read(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def gpus(device_id, count):
    return [{"device_id": device_id, "address": "0000:%02x:00.0" % (0x18 + i)} for i in range(count)]


LPFS = [{"device_id": "0x1021", "address": "0000:4a:00.1"}, {"device_id": "0x1021", "address": "0000:4a:00.3"}]
H100_SWITCHES = [{"device_id": "0x22a3", "address": "0000:%02x:00.0" % a} for a in (5, 6, 7, 8)]


# --- which services -----------------------------------------------------------------------

def test_hgx_h100_gets_the_fabric_manager_alone():
    out = fp.fabric_plan(H100_SWITCHES, [], gpus("0x2330", 8))
    assert out["generation"] == "nvswitch"
    assert out["fabricmanager"]["wanted"] and not out["nvlsm"]["wanted"] and not out["imex"]["wanted"]
    assert "NVSwitch generation 3/4 needs the fabric manager alone" in out["nvlsm"]["reason"]


def test_hgx_b200_with_its_switch_management_functions_gets_fm_and_nvlsm():
    out = fp.fabric_plan([], LPFS, gpus("0x2901", 8))
    assert out["generation"] == "nvlink5"
    assert out["fabricmanager"]["wanted"] and out["nvlsm"]["wanted"] and not out["imex"]["wanted"]
    assert "0x1021 at 0000:4a:00.1" in out["fabricmanager"]["reason"]
    assert "SMDL=SW_MNG" in out["fabricmanager"]["reason"]
    assert out["nvlsm"]["lpfs"] == ["0x1021 at 0000:4a:00.1", "0x1021 at 0000:4a:00.3"]


def test_hgx_b300_without_visible_switches_is_decided_from_the_gpus():
    out = fp.fabric_plan([], [], gpus("0x3182", 8))
    assert out["generation"] == "nvlink5" and out["fabricmanager"]["wanted"] and out["nvlsm"]["wanted"]
    assert "decided from the GPUs: 8 x NVIDIA B300 SXM6 AC" in out["fabricmanager"]["reason"]


def test_one_b200_alone_is_no_baseboard():
    out = fp.fabric_plan([], [], gpus("0x2901", 1))
    assert out["generation"] == "none" and not out["fabricmanager"]["wanted"] and not out["nvlsm"]["wanted"]
    assert "one NVIDIA B200 only" in out["fabricmanager"]["reason"]


def test_gb200_tray_gets_imex_and_no_fabric_manager():
    out = fp.fabric_plan([], [], gpus("0x2941", 4))
    assert out["generation"] == "multinode"
    assert not out["fabricmanager"]["wanted"] and not out["nvlsm"]["wanted"] and out["imex"]["wanted"]
    assert "4 x NVIDIA GB200" in out["imex"]["reason"]
    assert out["fabricmanager"]["reason"].endswith("fabric manager skipped")


def test_gb300_tray_gets_imex():
    assert fp.fabric_plan([], [], gpus("0x31c2", 4))["imex"]["wanted"]


def test_gh200_function_is_a_gpu_and_imex_needs_the_knob():
    out = fp.fabric_plan([{"device_id": "0x2342", "address": "0009:01:00.0"}], [], gpus("0x2342", 1))
    assert out["generation"] == "none" and not out["fabricmanager"]["wanted"]
    assert not out["imex"]["wanted"] and "gpudirect_nvidia_driver_imex: true" in out["imex"]["reason"]
    assert fp.fabric_plan([], [], gpus("0x2342", 1), imex="true")["imex"]["wanted"]


def test_knobs_override_auto():
    off = fp.fabric_plan([], LPFS, gpus("0x2901", 8), fabricmanager=False)
    assert not off["fabricmanager"]["wanted"] and not off["nvlsm"]["wanted"]
    assert "the fabric manager is off" in off["nvlsm"]["reason"]
    assert fp.fabric_plan([], [], [], nvlsm="yes")["nvlsm"]["wanted"]
    assert not fp.fabric_plan([], [], gpus("0x2941", 4), imex="no")["imex"]["wanted"]
    assert fp.fabric_plan([], [], [], fabricmanager=True)["fabricmanager"]["wanted"]


@pytest.mark.parametrize("knob,arg", [("gpudirect_nvidia_driver_fabricmanager", "fabricmanager"),
                                      ("gpudirect_nvidia_driver_nvlsm", "nvlsm"), ("gpudirect_nvidia_driver_imex", "imex")])
def test_bad_knob_fails_naming_it(knob, arg):
    with pytest.raises(nv.NvidiaDecisionError, match="%s must be auto, true or false, got 'sometimes'" % knob):
        fp.fabric_plan([], [], [], **{arg: "sometimes"})


def test_unknown_nvidia_bridge_still_fails_under_auto():
    with pytest.raises(nv.NvidiaDecisionError, match="0x2b00 at 0000:0a:00.0"):
        fp.fabric_plan([{"device_id": "0x2b00", "address": "0000:0a:00.0"}], [], [])


# --- packages -----------------------------------------------------------------------------

@pytest.mark.parametrize("branch,family,version,name,spec", [
    ("580", "Debian", "580.95.05", "nvidia-imex", "nvidia-imex=580.95.05-*"),
    ("595", "Debian", "", "nvidia-imex", "nvidia-imex"),
    ("570", "Debian", "570.86.15", "nvidia-imex-570", "nvidia-imex-570=570.86.15-*"),
    ("570", "RedHat", "570.133.20", "nvidia-imex-570", "nvidia-imex-570-570.133.20"),
    ("580", "RedHat", "580.65.06", "nvidia-imex", "nvidia-imex-580.65.06"),
])
def test_imex_package(branch, family, version, name, spec):
    assert fp.imex_package(branch, family, version) == {"name": name, "spec": spec}


@pytest.mark.parametrize("args,needle", [(("535", "Debian"), "IMEX ships with driver branch 550"),
                                         (("580", "Suse"), "OS family"), (("58", "Debian"), "three-digit")])
def test_imex_package_refusals(args, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        fp.imex_package(*args)


# --- IMEX nodes ---------------------------------------------------------------------------

def test_imex_nodes_kept_in_order():
    nodes = ["10.0.0.3", "10.0.0.1", "tray-07.rack2"]
    assert fp.check_imex_nodes(nodes, ["10.0.0.1"]) == nodes
    assert fp.check_imex_nodes([], ["10.0.0.1"]) == [] and fp.check_imex_nodes(None) == []


@pytest.mark.parametrize("nodes,own,needle", [
    ("10.0.0.1", (), "must be a list"),
    (["10.0.0.1", "10.0.0.1"], (), "lists 10.0.0.1 twice"),
    (["10.0.0.1", "bad name!"], (), "'bad name!' is neither an IP address nor a host name"),
    (["10.0.0.2", "10.0.0.3"], ["10.0.0.1", "192.168.1.5"], "does not list any address of this node"),
])
def test_imex_nodes_refusals(nodes, own, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        fp.check_imex_nodes(nodes, own)


# --- module options -----------------------------------------------------------------------

def test_module_options_validated_and_written_sorted():
    out = fp.check_module_options({"NVreg_EnableStreamMemOPs": 1, "NVreg_CreateImexChannel0": True,
                                   "NVreg_RegistryDwords": "RMForceStaticBar1=1"})
    assert out == {"NVreg_CreateImexChannel0": "1", "NVreg_EnableStreamMemOPs": "1",
                   "NVreg_RegistryDwords": "RMForceStaticBar1=1"}
    line = fp.module_options_line(out)
    assert line == ("options nvidia NVreg_CreateImexChannel0=1 NVreg_EnableStreamMemOPs=1 "
                    "NVreg_RegistryDwords=RMForceStaticBar1=1")
    assert fp.parse_modprobe_options("# managed\n" + line + "\n") == out


@pytest.mark.parametrize("options,needle", [
    (["NVreg_X"], "must be a mapping"),
    ({"EnableStreamMemOPs": 1}, "'EnableStreamMemOPs' is not an nvidia module parameter"),
    ({"NVreg_RegistryDwords": "a b"}, "cannot be written to modprobe.d"),
    ({"NVreg_RegistryDwords": '"x"'}, "cannot be written to modprobe.d"),
    ({"NVreg_RegistryDwords": ""}, "cannot be written to modprobe.d"),
])
def test_module_options_refusals(options, needle):
    with pytest.raises(nv.NvidiaDecisionError, match=needle):
        fp.check_module_options(options)


def test_proc_params_of_the_h200_node():
    params = fp.parse_proc_params(read("nvreg", "proc-driver-nvidia-params-h200-580.159.04.txt"))
    assert len(params) == 42
    assert params["NVreg_CreateImexChannel0"] == "0" and params["NVreg_ImexChannelCount"] == "2048"
    assert params["NVreg_EnableGpuFirmware"] == "18" and params["NVreg_RegistryDwords"] == ""
    assert fp.params_differ({"NVreg_CreateImexChannel0": "1", "NVreg_EnableGpuFirmware": "0x12"}, params) == \
        ["NVreg_CreateImexChannel0=1 (loaded: 0)"]
    assert fp.params_differ({"NVreg_NoSuchThing": "1"}, params) == \
        ["NVreg_NoSuchThing=1 (the loaded module has no such parameter)"]
    assert fp.parse_proc_params("garbage without colons\n: empty name\n") == {}


def test_the_imex_channel_major_is_in_proc_devices():
    """What IMEX's channel device nodes hang off (the driver makes them with CreateImexChannel0)."""
    majors = dict(line.split()[::-1] for line in read("nvreg", "proc-devices-nvidia-h200.txt").splitlines())
    assert majors["nvidia-caps-imex-channels"] == "242"


# --- nvidia-imex-ctl -N -------------------------------------------------------------------

def test_imex_ctl_of_a_gb200_nvl72():
    text = read("imex", "ctl-N-gb200-18-nodes-570.172.txt")
    status = fp.parse_imex_ctl(text)
    assert status["domain_state"] == "UP" and len(status["nodes"]) == 18
    assert status["nodes"][0] == {"index": 0, "address": "172.31.48.81", "state": "READY", "version": "570.172"}
    assert status["nodes"][17]["address"] == "172.31.56.47"
    assert len(status["matrix"]) == 18 and all(len(row) == 18 for row in status["matrix"].values())
    assert status["timestamp"] == "5/12/2025 06:08:10.580"
    assert fp.imex_verdict(status) == {"ok": True, "problems": []}
    expected = [n["address"] for n in status["nodes"]]
    assert fp.imex_verdict(status, expected)["ok"]
    assert "differ from gpudirect_nvidia_driver_imex_nodes" in fp.imex_verdict(status, expected[:17])["problems"][0]


def test_imex_ctl_of_two_gh200_without_versions():
    status = fp.parse_imex_ctl(read("imex", "ctl-N-gh200-2-nodes-570.00.txt"))
    assert [(n["address"], n["version"]) for n in status["nodes"]] == [("10.136.206.47", ""), ("10.136.206.48", "")]
    assert status["matrix"] == {0: {0: "C", 1: "C"}, 1: {0: "C", 1: "C"}} and fp.imex_verdict(status)["ok"]


def test_imex_ctl_failures_are_named():
    """Derived from the real 2-node output by changing words (no public capture of a broken domain)."""
    text = read("imex", "ctl-N-gh200-2-nodes-570.00.txt")
    broken = (text.replace("Node #1   - 10.136.206.48   - READY", "Node #1   - 10.136.206.48   - UNAVAILABLE")
              .replace("       0        C  C", "       0        C  N").replace("Domain State: UP", "Domain State: DOWN"))
    problems = fp.imex_verdict(fp.parse_imex_ctl(broken))["problems"]
    assert problems == ["Domain State DOWN (UP wanted)", "node #1 10.136.206.48 is UNAVAILABLE",
                        "10.136.206.47 -> 10.136.206.48 is N (C, connected, wanted)"]


@pytest.mark.parametrize("mangle,needle", [
    (lambda t: t.replace("Nodes:\n", ""), "no 'Nodes:' block"),
    (lambda t: t.replace("Domain State: UP\n", ""), "no 'Domain State:' line"),
    (lambda t: t.replace("       1        C  C", "       1        C"), "row 1 has 1 cells for 2 columns"),
    (lambda t: "", "no 'Nodes:' block"),
])
def test_imex_ctl_malformed(mangle, needle):
    with pytest.raises(ValueError, match=needle):
        fp.parse_imex_ctl(mangle(read("imex", "ctl-N-gh200-2-nodes-570.00.txt")))


# --- the role's plan on simulated nodes ---------------------------------------------------

def _vpd(vendor_field):
    """PCI VPD: an identifier string tag (0x82), a read-only VPD-R tag (0x90) with PN and a vendor-specific
    V3 keyword carrying ``vendor_field``, and the end tag (0x78)."""
    ident = b"Nvidia ConnectX-7 bridge"
    v3 = vendor_field.encode()
    ro = b"PN" + bytes([12]) + b"699-2G530-00" + b"V3" + bytes([len(v3)]) + v3
    return (b"\x82" + len(ident).to_bytes(2, "little") + ident + b"\x90" + len(ro).to_bytes(2, "little") + ro
            + b"\x78").decode("latin-1")


def hgx_node(kind):
    """A node with NVIDIA GPUs and PCI functions: 'b200' (LPFs + an ordinary ConnectX-7), 'gb200', 'h100'."""
    host = sim.gpu_node(proc="", sys_version="", modules=())  # a new server: no driver yet

    def pci(address, vendor, device, klass, vpd=None):
        base = "/sys/bus/pci/devices/" + address
        host.dirs.add(base)
        host.files.update({base + "/vendor": vendor, base + "/device": device, base + "/class": klass})
        if vpd is not None:
            host.files[base + "/vpd"] = vpd
    if kind == "b200":
        pci("0000:4a:00.1", "0x15b3", "0x1021", "0x020700", _vpd("SMDL=SW_MNG"))
        pci("0000:4a:00.3", "0x15b3", "0x1021", "0x020700", _vpd("SMDL=SW_MNG"))
        pci("0000:4a:00.0", "0x15b3", "0x1021", "0x020700", _vpd("SMDL=NONE"))
        pci("0000:1a:00.0", "0x15b3", "0x1021", "0x020700")  # a NIC whose VPD the kernel does not expose
    elif kind == "h100":
        for n in (5, 6, 7, 8):
            pci("0000:%02x:00.0" % n, "0x10de", "0x22a3", "0x068000")
    return host


def options(**kw):
    out = {"branch": "580", "flavor": "auto", "flavor_fallback": "open", "os_family": "Debian", "hold": True,
           "blacklist_nouveau": True, "fabricmanager": "auto", "nvlsm": "auto", "imex": "auto"}
    out.update(kw)
    return out


def test_probe_finds_the_switch_management_functions_by_their_vpd():
    found = plan.probe(hgx_node("b200").plan_host(), "580")
    assert found["nvswitch_lpfs"] == [{"address": "0000:4a:00.1", "device_id": "0x1021"},
                                      {"address": "0000:4a:00.3", "device_id": "0x1021"}]
    out = plan.decide(found, options(gpus=gpus("0x2901", 8)))
    assert out["nvlink_generation"] == "nvlink5"
    assert out["fabricmanager"]["wanted"] and out["fabricmanager"]["package"] == "nvidia-fabricmanager"
    assert out["nvlsm"]["packages"] == ["nvlsm", "infiniband-diags"]
    assert "install NVLSM (nvlsm, infiniband-diags) for the fabric manager and load ib_umad" in out["changes"]
    assert not out["imex"]["wanted"] and out["module_options"]["wanted"] == {}


def test_probe_h100_switches_unchanged_behaviour():
    out = plan.decide(plan.probe(hgx_node("h100").plan_host(), "580"), options(gpus=gpus("0x2330", 8)))
    assert out["nvlink_generation"] == "nvswitch" and out["fabricmanager"]["wanted"] and not out["nvlsm"]["wanted"]


def test_gb200_plan_installs_imex_with_channel_zero_and_the_domain():
    found = plan.probe(hgx_node("gb200").plan_host(), "580")
    nodes = ["10.1.0.%d" % n for n in range(1, 19)]
    out = plan.decide(found, options(gpus=gpus("0x2941", 4), imex_nodes=nodes, own_addresses=["10.1.0.5"]))
    assert out["imex"]["wanted"] and out["imex"]["package"] == "nvidia-imex" and out["imex"]["service"] == "domain"
    assert out["imex"]["nodes_config"] == "".join(n + "\n" for n in nodes)
    assert out["module_options"]["wanted"] == {"NVreg_CreateImexChannel0": "1"}
    assert out["module_options"]["line"] == "options nvidia NVreg_CreateImexChannel0=1"
    assert "install nvidia-imex at the driver version" in out["changes"]
    assert "write the IMEX domain (18 nodes) to /etc/nvidia-imex/nodes_config.cfg and start nvidia-imex" in out["changes"]
    assert not out["fabricmanager"]["wanted"] and out["disruption"] == []


def test_gb200_admin_channel_setting_wins_and_scheduler_owns_the_service():
    out = plan.decide(plan.probe(hgx_node("gb200").plan_host(), "580"),
                      options(gpus=gpus("0x2941", 4), module_options={"NVreg_CreateImexChannel0": 0}))
    assert out["module_options"]["wanted"] == {"NVreg_CreateImexChannel0": "0"}
    assert out["imex"]["service"] == "scheduler" and not any("IMEX domain" in c for c in out["changes"])


def test_imex_domain_change_while_running_is_a_disruption():
    host = hgx_node("gb200")
    host.files["/etc/nvidia-imex/nodes_config.cfg"] = "10.1.0.1\n10.1.0.2\n"
    host.files["/proc/4242/comm"] = "nvidia-imex\n"
    found = plan.probe(host.plan_host(), "580")
    out = plan.decide(found, options(gpus=gpus("0x2941", 4), imex_nodes=["10.1.0.1", "10.1.0.2", "10.1.0.3"]))
    assert out["imex"]["running"] and out["imex"]["rewrite"]
    assert out["disruption"] == ["nvidia-imex restart: the IMEX domain changes (GPU memory shared across nodes is "
                                 "released)"]
    same = plan.decide(found, options(gpus=gpus("0x2941", 4), imex_nodes=["10.1.0.1", "10.1.0.2"]))
    assert not same["imex"]["rewrite"] and same["disruption"] == []


def test_module_options_stale_under_a_loaded_module_is_a_reload():
    host = sim.gpu_node(modules=("nvidia",))
    host.files["/proc/driver/nvidia/params"] = read("nvreg", "proc-driver-nvidia-params-h200-580.159.04.txt")
    host.files["/etc/modprobe.d/gpudirect-nvidia.conf"] = "options nvidia NVreg_EnableStreamMemOPs=1\n"
    found = plan.probe(host.plan_host(), "580", options_conf="/etc/modprobe.d/gpudirect-nvidia.conf")
    assert found["module_options_file"] == {"NVreg_EnableStreamMemOPs": "1"}
    out = plan.decide(found, options(module_options={"NVreg_EnableStreamMemOPs": 1}))
    # the file already says so (a run that stopped before the reload): the loaded 0 still needs one
    assert not out["module_options"]["write"] and out["module_options"]["reload"] and out["reload"]
    assert "nvidia modules reload: module options NVreg_EnableStreamMemOPs=1 (loaded: 0)" in out["disruption"]
    converged = plan.decide(found, options(module_options={"NVreg_EnableGpuFirmware": 18,
                                                           "NVreg_EnableStreamMemOPs": 0}))
    assert converged["module_options"]["write"] and not converged["module_options"]["reload"]


def test_no_options_and_no_file_is_converged():
    found = plan.probe(sim.gpu_node().plan_host(), "580", options_conf="/etc/modprobe.d/gpudirect-nvidia.conf")
    out = plan.decide(found, options())
    assert out["module_options"] == {"wanted": {}, "file": {}, "write": False, "line": "", "stale": [],
                                     "reload": False}


def test_bad_fabric_knobs_fail_the_plan_naming_them():
    with pytest.raises(plan.PlanError, match="gpudirect_nvidia_driver_imex_nodes"):
        plan.decide(plan.probe(sim.gpu_node().plan_host(), "580"), options(imex_nodes="10.0.0.1"))
    with pytest.raises(plan.PlanError, match="gpudirect_nvidia_driver_module_options"):
        plan.decide(plan.probe(sim.gpu_node().plan_host(), "580"), options(module_options={"Foo": 1}))
