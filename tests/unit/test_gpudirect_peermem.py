"""module_utils/gpudirect_peermem.py and library/gpudirect_plan_peermem.py: probe, decision, plan.

Real inputs, each with its source:

* ``ansible_facts.gpudirect`` of the lent GPU nodes: tests/fixtures/gpu_node/h100 (H100, captured
  2026-11-22, its README) and tests/fixtures/gpu_node/h200 (H200); both Ubuntu 24.04, kernel 6.18.44,
  open module 580.159.04 loaded from the image, no RDMA NIC, no OFED.
* ``/proc/driver/nvidia/version``, ``ofed_info -s`` and package versions: the entries of
  tests/fixtures/vendor_strings/versions.yml, each naming where it was seen.
* the GPU node's ``dpkg -l`` lines for libibverbs1 ``50.0-2ubuntu0.2`` (tests/fixtures/gpu_node/h100/vendor.txt)
  and the libibverbs file name ``libibverbs.so.1.14.50.0`` the role printed there (h100/roles-check.log).
* the VM tier's facts with soft-RoCE (tests/fixtures/loopback/vm_rxe_gpudirect_facts.json): no GPU.
"""

import fnmatch
import json
import os

import pytest
import yaml
from ansible.module_utils import gpudirect_peermem as pm
from ansible.module_utils import gpudirect_versions as v

import gpudirect_plan_peermem
from conftest import PROJECT_FIXTURES

with open(os.path.join(PROJECT_FIXTURES, "vendor_strings", "versions.yml"), encoding="utf-8") as _handle:
    STRINGS = yaml.safe_load(_handle)

PATHS = {"unit_name": "gpudirect-nvidia-peermem.service",
         "unit_path": "/etc/systemd/system/gpudirect-nvidia-peermem.service",
         "modules_load_path": "/etc/modules-load.d/gpudirect-nvidia-peermem.conf",
         "nv_conf_path": "/etc/infiniband/nv_peer_mem.conf"}
DOCA_291 = STRINGS["ofed_info_s"][0]["text"]            # OFED-internal-24.10-1.1.4.0.200:
MLNX_OFED = next(e["text"] for e in STRINGS["ofed_info_s"] if e["text"].startswith("MLNX_OFED_LINUX"))
PROC_580 = STRINGS["proc_driver_nvidia_version"][0]["text"]     # the GPU node's own
LIB = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0"      # h100/roles-check.log


def facts_of(*parts):
    with open(os.path.join(PROJECT_FIXTURES, *parts), encoding="utf-8") as handle:
        data = json.load(handle)
    return data["ansible_facts"]["gpudirect"] if "ansible_facts" in data else data


@pytest.fixture(name="h100")
def fixture_h100():
    return facts_of("gpu_node", "h100", "gpudirect_facts.json")


@pytest.fixture(name="h200")
def fixture_h200():
    return facts_of("gpu_node", "h200", "gpudirect_facts.json")


VM_FACTS = {"gpus": [], "nvidia_driver": {"loaded": True, "version": "580.95.05", "flavor": "open"},
            "kernel": {"running": "6.1.0-41-amd64"}, "dmabuf": {"kernel_ok": True, "open_module": True},
            "peermem": {}}


def gpu(device_id):
    return {"device_id": device_id, "vendor_id": "0x10de"}


class FakeHost:
    """A host for the probe: files, directories, commands (argv tuple -> (rc, out)), libraries."""

    def __init__(self, kernel="6.8.0-90-generic", files=None, dirs=(), commands=None, which=(), libs=None):
        self.kernel = kernel
        self.files = dict(files or {})
        self.dirs = set(dirs)
        self.commands = dict(commands or {})
        self.which_ = set(which)
        self.libs = dict(libs or {})  # real path -> exports ibv_reg_dmabuf_mr
        self.ran = []

    def run(self, argv):
        self.ran.append(list(argv))
        rc, out = self.commands.get(tuple(argv), (1, ""))
        return rc, out, ""

    def read(self, path):
        return self.files.get(path, "")

    def links(self):
        return {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1": path for path in self.libs}

    def exists(self, path):
        return path in self.files or path in self.dirs or path in self.libs or path in self.links()

    def isdir(self, path):
        return path in self.dirs

    def realpath(self, path):
        return self.links().get(path, path)

    def glob(self, pattern):
        return sorted(p for p in self.links() if fnmatch.fnmatch(p, pattern))

    def which(self, name):
        return "/usr/bin/" + name if name in self.which_ else None

    def exports(self, path, symbol):
        return symbol == "ibv_reg_dmabuf_mr" and self.libs.get(path, False)

    def uname(self):
        return ("Linux", "node", self.kernel, "#1 SMP", "x86_64")


def vm_host(ofed=DOCA_291, loaded=("nvidia", "ib_core"), built=("nvidia_peermem",), openibd=True, files=(),
            nv_service=None, onboot=False, unit_enabled=False):
    """A VM-tier node: driver from packages (modinfo), OFED, no libibverbs exporting dma-buf."""
    k = "6.1.0-41-amd64"
    commands = {("modinfo", "-k", k, "-F", "version", "nvidia"): (0, "580.95.05"),
                ("modinfo", "-k", k, "-F", "license", "nvidia"): (0, "Dual MIT/GPL"),
                ("modinfo", "-k", k, "-n", "ib_core"): (0, "/lib/modules/%s/updates/dkms/ib_core.ko" % k),
                ("dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n", "rdma-core"):
                (0, "rdma-core 2410mlnx54-1.2410068 ii ")}
    for name in built:
        commands[("modinfo", "-k", k, "-n", name)] = (0, "/lib/modules/%s/updates/dkms/%s.ko" % (k, name))
    commands[("modinfo", "-k", k, "-F", "depends", "nvidia_peermem")] = (0, "nvidia,ib_core")
    if ofed:
        commands[("ofed_info", "-s")] = (0, ofed)
    which = {"dpkg-query", "systemctl"} | ({"ofed_info"} if ofed else set())
    all_files = {p: "" for p in files}
    if openibd:
        all_files["/lib/systemd/system/openibd.service"] = "[Unit]\n"
    if nv_service:
        all_files["/lib/systemd/system/nv_peer_mem.service"] = "[Unit]\n"
        commands[("systemctl", "is-enabled", "nv_peer_mem.service")] = (0, nv_service[0])
        commands[("systemctl", "is-active", "nv_peer_mem.service")] = (0, nv_service[1])
    if onboot:
        all_files[PATHS["nv_conf_path"]] = "ONBOOT=yes\n"
    commands[("systemctl", "is-enabled", PATHS["unit_name"])] = (0, "enabled" if unit_enabled else "disabled")
    commands[("systemctl", "is-active", PATHS["unit_name"])] = (0, "active" if unit_enabled else "inactive")
    return FakeHost(k, files=all_files, dirs={"/sys/module/" + m for m in loaded}, commands=commands, which=which)


def gpu_node_host(**changes):
    """The lent GPU node: no /lib/modules (modinfo finds nothing), driver from the image,
    libibverbs1 50.0 only (no rdma-core package), no OFED, no systemctl."""
    files = {"/proc/driver/nvidia/version": PROC_580, "/sys/module/nvidia/version": "580.159.04\n"}
    files.update(changes.pop("files", {}))
    return FakeHost("6.18.44-fc-v657-gpu", files=files, dirs={"/sys/module/nvidia", "/sys/module/ib_core"},
                    commands={("ldconfig", "-p"): (0, "\tlibibverbs.so.1 (libc6,x86-64) => "
                                                      "/usr/lib/x86_64-linux-gnu/libibverbs.so.1")},
                    which={"dpkg-query"}, libs={LIB: changes.pop("dmabuf", True)}, **changes)


# --- versions: one parser (gpudirect_versions) -------------------------------------------

@pytest.mark.parametrize("entry", [e for e in STRINGS["package_versions"] if "rdma_core_major" in e],
                         ids=lambda e: e["text"])
def test_rdma_core_major_of_real_package_versions(entry):
    assert pm.rdma_core_major(entry["text"]) == entry["rdma_core_major"]


@pytest.mark.parametrize("text", ["", None, "  "])
def test_rdma_core_not_installed(text):
    assert pm.rdma_core_major(text) is None


@pytest.mark.parametrize("text", ["not installed", "rdma-core 50.0", "(none)"])
def test_rdma_core_malformed_is_an_error_naming_the_text(text):
    with pytest.raises(pm.PeermemError, match="rdma-core package version: .*%s" % text.split()[0].strip("()")):
        pm.rdma_core_major(text)


def test_libibverbs_file_name():
    assert v.parse_libibverbs_file(LIB) == {"version": "50.0", "major": 50}
    assert v.parse_libibverbs_file("libibverbs.so.1.14.2410.0")["major"] == 2410
    for bad in ("/usr/lib/libibverbs.so.1", "libmlx5.so.1.24.50.0", ""):
        with pytest.raises(v.VersionError):
            v.parse_libibverbs_file(bad)


# --- the decision ---------------------------------------------------------------------------

def test_h200_auto_dmabuf_from_the_package_version(h200):
    out = pm.choose(h200, "auto", None, "50.0-2ubuntu0.2", "")
    assert out["mechanism"] == "dmabuf" and out["ok"]
    for needle in ("0x2335 (NVIDIA H200)", "open kernel module", "driver 580.159.04 >= 515", "kernel 6.18.44",
                   "rdma-core 50.0-2ubuntu0.2 (upstream 50 >= 34"):
        assert needle in out["reasons"][0]


def test_h100_auto_dmabuf_from_the_library(h100):
    lib = {"path": LIB, "version": "50.0", "dmabuf": True}
    out = pm.choose(h100, "auto", None, "", "", lib)
    assert out["mechanism"] == "dmabuf" and out["ok"]
    # what the role printed on the node (h100/roles-check.log), the GPU named from the current table
    assert out["reasons"] == [
        "dma-buf: 1 GPU(s): 0x2330 (NVIDIA H100 80GB HBM3); open kernel module; driver 580.159.04 >= 515 (CUDA >= 11.7); "
        "kernel 6.18.44-fc-v657-gpu >= 5.12; /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0 (rdma-core 50.0) "
        "exports ibv_reg_dmabuf_mr"]


def test_library_symbol_wins_over_the_package_version(h200):
    lib = {"path": LIB, "version": "50.0", "dmabuf": False}
    out = pm.choose(h200, "auto", None, "50.0-2ubuntu0.2", "", lib)
    assert out["mechanism"] == "nvidia_peermem" and not out["ok"]
    assert "does not export ibv_reg_dmabuf_mr" in out["reasons"][0]
    out = pm.choose(h200, "auto", None, "", "", {"path": "", "version": "", "dmabuf": False})
    assert out["mechanism"] == "nvidia_peermem" and "rdma-core not installed" in out["reasons"][0]


def test_h200_old_rdma_core_falls_back_to_nvidia_peermem_with_doca(h200):
    out = pm.choose(h200, "auto", None, "33.0-1", DOCA_291)
    assert out["mechanism"] == "nvidia_peermem" and out["ok"]
    assert "ibv_reg_dmabuf_mr needs >= 34" in out["reasons"][0]
    assert out["reasons"][-1] == "OFED-internal-24.10-1.1.4.0.200 provides the peer-memory API"


def test_vm_without_gpu_picks_nvidia_peermem():
    out = pm.choose(facts_of("loopback", "vm_rxe_gpudirect_facts.json"), "auto",
                    {"version": "580.95.05", "flavor": "open"}, "2410mlnx54-1.2410068", DOCA_291)
    assert out["mechanism"] == "nvidia_peermem" and out["ok"]
    assert "no NVIDIA GPU in the facts" in out["reasons"][0]


def test_nvidia_peermem_needs_ofed():
    out = pm.choose({"gpus": []}, "auto", {"version": "580.95.05", "flavor": "open"}, "44.0-2", "")
    assert out["mechanism"] == "nvidia_peermem" and not out["ok"]
    assert "peer-memory API" in out["reasons"][-1]


def test_old_driver_gets_nv_peer_mem():
    out = pm.choose({"gpus": [gpu("0x1db4")], "kernel": {"running": "4.18.0"}}, "auto",
                    {"version": "460.106.00", "flavor": "proprietary"}, "", MLNX_OFED)
    assert out["mechanism"] == "nv_peer_mem" and out["ok"]
    assert "nv_peer_mem: driver 460.106.00 < R470" in out["reasons"]


def test_dmabuf_requested_on_a_volta_is_refused_with_reasons():
    out = pm.choose({"gpus": [gpu("0x1db4")], "kernel": {"running": "6.1.0"}}, "dmabuf",
                    {"version": "535.104.05", "flavor": "proprietary"}, "44.0", "")
    assert out["mechanism"] == "dmabuf" and not out["ok"]
    assert "not supported by the open kernel module" in out["reasons"][0]


def test_nvidia_peermem_on_an_old_driver_is_refused():
    out = pm.choose({}, "nvidia_peermem", {"version": "460.106.00"}, "", MLNX_OFED)
    assert not out["ok"] and "R470" in out["reasons"][-1]


@pytest.mark.parametrize("requested", ["gdr", "", None, "nvidia-peermem"])
def test_unknown_mechanism_names_the_knob(requested):
    with pytest.raises(pm.PeermemError, match="gpudirect_peermem_mechanism must be one of"):
        pm.choose({}, requested)


@pytest.mark.parametrize("facts", [["gpus"], "ansible_facts", {"gpus": "0x2330"}])
def test_facts_that_are_not_the_facts_module_output(facts):
    with pytest.raises(pm.PeermemError, match="gpudirect_facts"):
        pm.choose(facts, "auto")


@pytest.mark.parametrize("ofed", ["ofed_info: command not found", "24.10", "MLNX_OFED_LINUX"])
def test_malformed_ofed_info_is_an_error_not_no_ofed(ofed):
    with pytest.raises(pm.PeermemError, match="ofed_info -s on the host: .*not an OFED version line"):
        pm.choose({"gpus": []}, "auto", {"version": "580.95.05", "flavor": "open"}, "", ofed)


def test_malformed_driver_version_is_an_error():
    with pytest.raises(pm.PeermemError, match="NVIDIA driver version: .*'580'"):
        pm.choose({"gpus": []}, "auto", {"version": "580", "flavor": "open"}, "", DOCA_291)


# --- the probe --------------------------------------------------------------------------------

def test_probe_on_the_gpu_node(h100):
    found = pm.probe(gpu_node_host(), PATHS)
    assert found["driver"] == {"version": "580.159.04", "flavor": "open", "source": "loaded module"}
    assert found["libibverbs"] == {"path": LIB, "version": "50.0", "dmabuf": True}
    assert found["rdma_core"] == "" and found["ofed"] == "" and not found["openibd"]
    assert found["loaded"] == ["ib_core", "nvidia"] and found["files"] == {"unit_path": False,
                                                                          "modules_load_path": False}
    out = pm.plan(h100, "auto", found, PATHS)
    assert (out["path"], out["ok"], out["changes"], out["disruption"]) == ("dmabuf", True, [], [])
    assert not out["provisional"]


@pytest.mark.parametrize("entry", [e for e in STRINGS["proc_driver_nvidia_version"] if len(e["version"]) > 6],
                         ids=lambda e: e["version"])
def test_probe_reads_proc_version_without_modinfo_or_sysfs(entry):
    host = gpu_node_host(files={"/proc/driver/nvidia/version": entry["text"], "/sys/module/nvidia/version": ""})
    assert pm.driver_of(host, host.kernel) == {"version": entry["version"], "flavor": entry["flavor"],
                                               "source": "loaded module"}


def test_probe_without_any_driver():
    host = FakeHost()
    assert pm.driver_of(host, host.kernel) == {"version": "", "flavor": None, "source": None}


@pytest.mark.parametrize("files,where", [
    ({"/proc/driver/nvidia/version": "NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"}, "/proc/driver/nvidia"),
    ({"/sys/module/nvidia/version": "580\n"}, "/sys/module/nvidia/version"),
])
def test_probe_unreadable_driver_version_is_an_error(files, where):
    host = FakeHost(files=files)
    with pytest.raises(pm.PeermemError, match=where):
        pm.driver_of(host, host.kernel)


def test_probe_failing_ofed_info_is_an_error():
    host = vm_host()
    host.commands[("ofed_info", "-s")] = (1, "")
    with pytest.raises(pm.PeermemError, match=r"ofed_info -s failed \(rc=1\).*reinstall"):
        pm.probe(host, PATHS)


def test_probe_on_a_vm_with_doca():
    host = vm_host()
    found = pm.probe(host, PATHS)
    assert found["driver"] == {"version": "580.95.05", "flavor": "open", "source": "modinfo"}
    assert found["rdma_core"] == "2410mlnx54-1.2410068" and found["ofed"] == DOCA_291
    assert found["openibd"] and found["nvidia_peermem_built"] and found["nvidia_peermem_depends"] == "nvidia,ib_core"
    assert ["ofed_info", "-s"] in host.ran and ["systemctl", "is-enabled", PATHS["unit_name"]] not in host.ran


# --- the plan: changes and disruption -------------------------------------------------------------

def plan_vm(**host):
    return pm.plan(VM_FACTS, "auto", pm.probe(vm_host(**host), PATHS), PATHS)


def test_plan_first_run_on_a_vm_loads_and_writes_the_unit():
    out = plan_vm()
    assert out["path"] == "nvidia_peermem" and out["ok"] and out["load"] == "nvidia_peermem"
    assert out["changes"] == ["load nvidia_peermem",
                              "write %s (load nvidia_peermem after openibd at boot)" % PATHS["unit_path"],
                              "enable gpudirect-nvidia-peermem.service"]
    assert out["disruption"] == [] and out["boot"] == "unit" and out["unload"] == []


def test_plan_converged_vm_changes_nothing():
    out = plan_vm(loaded=("nvidia", "ib_core", "nvidia_peermem"), files=(PATHS["unit_path"],), unit_enabled=True)
    assert out["changes"] == [] and out["disruption"] == [] and out["load"] is None


def test_plan_without_openibd_uses_modules_load_and_removes_the_unit():
    out = plan_vm(openibd=False, loaded=("nvidia", "ib_core", "nvidia_peermem"), files=(PATHS["unit_path"],))
    assert out["boot"] == "modules_load" and out["remove_files"] == [PATHS["unit_path"]]
    assert out["changes"] == ["write %s (load nvidia_peermem at boot)" % PATHS["modules_load_path"],
                              "remove %s (no openibd: boot loading moves to %s)"
                              % (PATHS["unit_path"], PATHS["modules_load_path"])]


def test_plan_loaded_nv_peer_mem_is_disruption():
    out = plan_vm(loaded=("nvidia", "ib_core", "nv_peer_mem"), built=("nvidia_peermem", "nv_peer_mem"),
                  nv_service=("enabled", "active"), files=(PATHS["unit_path"],), unit_enabled=True)
    assert out["disruption"] == ["nv_peer_mem unload -> nvidia-peermem load"]
    assert out["unload"] == ["nv_peer_mem"] and out["stop_nv_peer_mem_service"]
    assert out["changes"] == ["unload nv_peer_mem", "load nvidia_peermem",
                              "stop and disable nv_peer_mem.service (never both peer-memory clients)"]


def test_plan_nv_peer_mem_path_unloads_a_loaded_nvidia_peermem():
    facts = {"gpus": [gpu("0x1db4")], "kernel": {"running": "4.18.0"}}
    found = pm.probe(vm_host(ofed=MLNX_OFED, loaded=("nvidia", "ib_core", "nvidia_peermem"),
                             files=(PATHS["modules_load_path"],)), PATHS)
    found["driver"] = {"version": "460.106.00", "flavor": "proprietary", "source": "modinfo"}
    out = pm.plan(facts, "auto", found, PATHS)
    assert out["path"] == "nv_peer_mem" and out["boot"] == "service" and out["build_nv_peer_mem"]
    assert out["disruption"] == ["nvidia-peermem unload -> nv_peer_mem load"]
    assert out["remove_files"] == [PATHS["modules_load_path"]]
    assert "build and install the nv_peer_mem packages from gpudirect_peermem_nv_peer_mem_src" in out["changes"]
    assert "set ONBOOT=yes in /etc/infiniband/nv_peer_mem.conf" in out["changes"]


def test_plan_dmabuf_removes_old_boot_files_but_leaves_a_loaded_module(h100):
    found = pm.probe(gpu_node_host(files={PATHS["modules_load_path"]: "nvidia_peermem\n"}), PATHS)
    found["loaded"].append("nvidia_peermem")
    out = pm.plan(h100, "auto", found, PATHS)
    assert out["path"] == "dmabuf" and out["unload"] == [] and out["disruption"] == []
    assert out["changes"] == ["remove %s (dma-buf needs no nvidia_peermem at boot)" % PATHS["modules_load_path"]]


def test_plan_not_possible_is_a_change_and_provisional():
    out = plan_vm(ofed="")
    assert not out["ok"] and out["provisional"] and out["disruption"] == []
    assert out["changes"][0].startswith("peer memory cannot be enabled yet (nvidia_peermem): no MLNX_OFED")


# --- the module --------------------------------------------------------------------------------

def test_module_plans_read_only_in_check_mode(run_module, monkeypatch, h100):
    host = gpu_node_host()
    monkeypatch.setattr(gpudirect_plan_peermem, "make_host", lambda module: host)
    out = run_module(gpudirect_plan_peermem, {"facts": h100}, check_mode=True)
    assert out["changed"] is False and out["path"] == "dmabuf" and out["changes"] == []
    assert all(argv[0] in ("modinfo", "ldconfig", "dpkg-query") for argv in host.ran)


def test_module_fails_naming_the_knob(run_module, monkeypatch):
    monkeypatch.setattr(gpudirect_plan_peermem, "make_host", lambda module: gpu_node_host())
    out = run_module(gpudirect_plan_peermem, {"mechanism": "gdr"})
    assert out["failed"] and "gpudirect_peermem_mechanism must be one of" in out["msg"] and "'gdr'" in out["msg"]


def test_module_runs_commands_list_form_in_the_c_locale(run_module, monkeypatch):
    calls = []

    def run_command(self, args, **kwargs):
        calls.append((args, kwargs))
        return 1, "", ""

    monkeypatch.setattr(gpudirect_plan_peermem.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(pm.Host, "which", staticmethod(lambda name: None))
    monkeypatch.setattr(pm.Host, "read", staticmethod(lambda path: ""))
    monkeypatch.setattr(pm.Host, "exists", staticmethod(lambda path: False))
    monkeypatch.setattr(pm.Host, "isdir", staticmethod(lambda path: False))
    monkeypatch.setattr(pm.Host, "glob", staticmethod(lambda pattern: []))
    out = run_module(gpudirect_plan_peermem, {"facts": VM_FACTS})
    assert calls and all(isinstance(args, list) for args, _ in calls)
    assert all(kwargs["environ_update"]["LC_ALL"] == "C" for _, kwargs in calls)
    assert out["path"] == "nvidia_peermem" and not out["ok"] and out["provisional"] is True


def test_documentation_parses_and_covers_options_and_results(run_module, monkeypatch, h100):
    doc = yaml.safe_load(gpudirect_plan_peermem.DOCUMENTATION)
    returned = yaml.safe_load(gpudirect_plan_peermem.RETURN)
    assert yaml.safe_load(gpudirect_plan_peermem.EXAMPLES)
    specs = {}

    class Capture(Exception):
        pass

    def fake(*args, **kwargs):
        specs.update(kwargs["argument_spec"])
        assert kwargs["supports_check_mode"] is True
        raise Capture()

    with monkeypatch.context() as patch:
        patch.setattr(gpudirect_plan_peermem, "AnsibleModule", fake)
        with pytest.raises(Capture):
            gpudirect_plan_peermem.main()
    assert set(doc["options"]) == set(specs)
    for name, spec in specs.items():
        assert doc["options"][name]["type"] == spec["type"] and doc["options"][name]["default"] == spec["default"]
    monkeypatch.setattr(gpudirect_plan_peermem, "make_host", lambda module: gpu_node_host())
    out = run_module(gpudirect_plan_peermem, {"facts": h100})
    assert set(out) - {"changed", "invocation"} == set(returned)


class _NoKmodModule:
    """An AnsibleModule on a node without kmod (the lent H100 node has no modinfo: its
    first capture with the plan module failed with run_command's 'Error executing command')."""

    def __init__(self):
        self.ran = []

    @staticmethod
    def get_bin_path(name, *args, **kwargs):
        return None if name == "modinfo" else "/usr/bin/" + name

    def run_command(self, argv, **kwargs):
        self.ran.append(argv)
        return 0, "", ""


def test_a_missing_tool_answers_like_a_failed_command_not_a_module_failure():
    module = _NoKmodModule()
    host = gpudirect_plan_peermem.make_host(module)
    assert host.run(["modinfo", "-k", "6.8.0", "-n", "nvidia_peermem"]) == (
        127, "", "modinfo: not found on this node")
    assert module.ran == []
    assert host.run(["ldconfig", "-p"])[0] == 0 and module.ran == [["ldconfig", "-p"]]
