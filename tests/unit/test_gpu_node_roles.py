"""gpudirect_nvidia_driver and gpudirect_peermem on the GPU node, whose driver came with its image.

The node (tests/fixtures/gpu_node/h200 and its capture/): Ubuntu 24.04, kernel
6.18.44 with no /lib/modules, the open NVIDIA module 580.159.04 loaded but no driver
package, libibverbs.so.1 of rdma-core 50.0.  The gpudirect_nvidia_driver plan (module_utils/
gpudirect_nvidia_plan.py) and the peer-memory probe run on a simulation of it
(gpu_node_sim.py) with the node's real facts; and the two roles run in check mode on the
simulated node.
"""

import json
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

import gpu_node_sim as sim
from ansible.module_utils import gpudirect_nvidia_plan as plan
from ansible.module_utils import gpudirect_peermem as peermem
from conftest import PROJECT_FIXTURES, ROOT
from hang_guard import HANG_GUARD_S

FACTS = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "gpudirect_facts.json")
NOUVEAU_CONF = "/etc/modprobe.d/gpudirect-blacklist-nouveau.conf"
KEPT = ("driver 580.159.04 (open) is installed outside the package manager (runfile or image): "
        "kept, not managed by packages")


@pytest.fixture(name="facts")
def fixture_facts():
    with open(FACTS, encoding="utf-8") as handle:
        return json.load(handle)["ansible_facts"]["gpudirect"]


def test_driver_probe_finds_the_image_driver_without_lib_modules():
    out = plan.probe(sim.gpu_node().plan_host(), "580", NOUVEAU_CONF)
    assert out["packages"] == {} and out["module"]["disk_version"] == ""
    assert out["module"]["version"] == out["module"]["loaded_version"] == "580.159.04"
    assert out["module"]["flavor"] == "open" and out["module"]["owner"] == ""
    assert out["nouveau_kernels"] == [] and out["initramfs_nouveau_unblocked"] == []
    assert out["persistenced"] == {"unit": False, "systemd": True, "running": False}
    assert out["loaded"] == ["nvidia", "nvidia_uvm"]


def test_driver_probe_reads_the_version_from_proc_when_sysfs_has_none():
    out = plan.probe(sim.gpu_node(sys_version="").plan_host(), "580", NOUVEAU_CONF)
    assert out["module"]["version"] == "580.159.04" and out["module"]["flavor"] == "open"
    out = plan.probe(sim.gpu_node(proc=sim.PROC_PROPRIETARY, sys_version="").plan_host(), "580", NOUVEAU_CONF)
    assert (out["module"]["version"], out["module"]["flavor"]) == ("570.86.15", "proprietary")


def test_driver_probe_sees_the_persistenced_unit():
    out = plan.probe(sim.gpu_node(persistenced_unit=True).plan_host(), "580", NOUVEAU_CONF)
    assert out["persistenced"]["unit"] is True


def test_driver_probe_on_a_debian_node_finds_nouveau_for_each_kernel():
    """A stock Debian node: nouveau ships with every kernel, so the role blacklists it as before."""
    running, default = "6.1.0-41-amd64", "6.1.0-42-amd64"

    def commands(argv):
        if argv[:2] == ["modinfo", "-k"] and argv[3:] == ["-n", "nouveau"]:
            return 0, "/lib/modules/%s/kernel/drivers/gpu/drm/nouveau/nouveau.ko.xz" % argv[2]
        return 1, ""

    host = sim.Host(running, dirs={"/lib/modules/" + running, "/lib/modules/" + default},
                    which={"dpkg-query"}, commands=commands)
    assert plan.probe(host.plan_host(), "580", NOUVEAU_CONF)["nouveau_kernels"] == [running, default]
    # modinfo without an index (no depmod yet) still finds the file
    host = sim.Host(running, files={"/lib/modules/%s/kernel/drivers/gpu/drm/nouveau/nouveau.ko.xz" % default: "x"},
                    dirs={"/lib/modules/" + default}, which={"dpkg-query"}, commands=lambda argv: (1, ""))
    assert plan.probe(host.plan_host(), "580", NOUVEAU_CONF)["nouveau_kernels"] == [default]


@pytest.mark.parametrize("node,branch,version,flavor,action", [
    ({}, "580", "", "open", "keep"),
    ({}, "580", "580.159.04", "open", "keep"),
    ({}, "570", "", "open", "refuse"),
    ({"proc": sim.PROC_PROPRIETARY, "sys_version": "570.86.15"}, "570", "", "open", "refuse"),
    ({"proc": sim.PROC_PROPRIETARY, "sys_version": "570.86.15"}, "570", "", "proprietary", "keep"),
    ({"packages": {"nvidia-kernel-open-dkms": "580.95.05-1"}}, "580", "", "open", "none"),
    ({"proc": "", "sys_version": ""}, "580", "", "open", "install"),
])
def test_driver_decision_on_the_node_and_variants(facts, node, branch, version, flavor, action):
    found = plan.probe(sim.gpu_node(**node).plan_host(), branch, NOUVEAU_CONF)
    wanted = plan.choose_flavor(facts["gpus"], flavor)["flavor"]
    assert plan.driver_action(found, branch, version, wanted)["action"] == action


def test_driver_decision_on_the_node_keeps_it(facts):
    found = plan.probe(sim.gpu_node().plan_host(), "580", NOUVEAU_CONF)
    out = plan.decide(found, {"branch": "580", "gpus": facts["gpus"], "os_family": "Debian"})
    assert out["message"] == KEPT and not out["managed"]
    assert out["changes"] == [] and out["disruption"] == []


PEERMEM_PATHS = {"unit_name": "gpudirect-nvidia-peermem.service",
                 "unit_path": "/etc/systemd/system/gpudirect-nvidia-peermem.service",
                 "modules_load_path": "/etc/modules-load.d/gpudirect-nvidia-peermem.conf",
                 "nv_conf_path": "/etc/infiniband/nv_peer_mem.conf"}


def peermem_probe(**node):
    return peermem.probe(sim.ModuleHost(sim.gpu_node(**node)), PEERMEM_PATHS)


def test_peermem_probe_on_the_node():
    out = peermem_probe()
    assert out["driver"] == {"version": "580.159.04", "flavor": "open", "source": "loaded module"}
    assert out["libibverbs"] == {"path": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0", "version": "50.0",
                                 "dmabuf": True}
    assert out["rdma_core"] == "" and out["ofed"] == "" and not out["nvidia_peermem_built"]


@pytest.mark.parametrize("node,mechanism,ok", [
    ({}, "dmabuf", True),                                   # the node: only libibverbs1, no rdma-core package
    ({"rdma_core": "50.0-2build2"}, "dmabuf", True),        # with the rdma-core package too
    ({"libibverbs": None}, "nvidia_peermem", False),        # no libibverbs at all: no dma-buf, no OFED either
    ({"libibverbs": ("33.0", False)}, "nvidia_peermem", False),
])
def test_peermem_choice_with_the_node_values(facts, node, mechanism, ok):
    out = peermem.plan(facts, "auto", peermem_probe(**node), PEERMEM_PATHS)
    assert (out["mechanism"], out["ok"]) == (mechanism, ok), out["reasons"]


def test_peermem_auto_on_the_node_picks_dmabuf_with_the_reasons(facts):
    out = peermem.plan(facts, "auto", peermem_probe(), PEERMEM_PATHS)
    assert out["mechanism"] == "dmabuf" and out["ok"]
    assert out["reasons"] == [
        "dma-buf: 1 GPU(s): 0x2335 (NVIDIA H200); open kernel module; driver 580.159.04 >= 515 (CUDA >= 11.7); "
        "kernel 6.18.44-fc-v657-gpu >= 5.12; /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0 (rdma-core 50.0) "
        "exports ibv_reg_dmabuf_mr"]
    assert out["changes"] == [] and out["disruption"] == [] and not out["provisional"]


# --- the two roles in check mode on the simulated node ---------------------------------

# The wrappers load the real module by path; Ansible ships only the module_utils a module's own
# text imports, so each wrapper names those of the module it loads.
PEERMEM_PLAN_WRAPPER = """#!/usr/bin/python3
import importlib.util, sys
from ansible.module_utils.gpudirect_host import module_runner
from ansible.module_utils.gpudirect_peermem import Host
sys.path.insert(0, {tests!r})
import gpu_node_sim
spec = importlib.util.spec_from_file_location("gpudirect_peermem_plan_real", {real!r})
real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real)
real.make_host = lambda module: gpu_node_sim.ModuleHost(gpu_node_sim.gpu_node(**{node!r}))
real.main()
"""

NVIDIA_PLAN_WRAPPER = """#!/usr/bin/python
import importlib.util, sys
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import Host, module_runner
from ansible.module_utils.gpudirect_nvidia_plan import probe
sys.path.insert(0, {tests!r})
import gpu_node_sim
spec = importlib.util.spec_from_file_location("_real_nvidia_driver_plan", {real!r})
real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real)
real._Host = lambda module: gpu_node_sim.gpu_node(**{node!r}).plan_host()
real.main()
"""

FACTS_MODULE = """#!/usr/bin/python3
import json
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={{}}, supports_check_mode=True)
with open({facts!r}) as handle:
    module.exit_json(changed=False, ansible_facts=json.load(handle)["ansible_facts"])
"""


def _supported_controller():
    try:
        with open("/etc/os-release") as handle:
            text = handle.read()
    except OSError:
        return False
    return any(tag in text for tag in ('VERSION_ID="12"', 'VERSION_ID="22.04"', 'VERSION_ID="24.04"'))


def _roles_on_simulated_node(tmp_path, node, *extra):
    """Run tests/harness/gpu_node/roles.yml with --check on this machine, with the
    gpudirect_nvidia_driver plan module, the peer-memory probe and the facts module answering for the
    simulated node."""
    roles, library = tmp_path / "roles", tmp_path / "library"
    library.mkdir()
    shutil.copytree(os.path.join(ROOT, "roles", "gpudirect_nvidia_driver"), roles / "gpudirect_nvidia_driver")
    (library / "gpudirect_plan_nvidia_driver.py").write_text(NVIDIA_PLAN_WRAPPER.format(
        tests=os.path.dirname(__file__), node=node, real=os.path.join(ROOT, "library", "gpudirect_plan_nvidia_driver.py")))
    shutil.copytree(os.path.join(ROOT, "roles", "gpudirect_peermem"), roles / "gpudirect_peermem")
    (library / "gpudirect_plan_peermem.py").write_text(PEERMEM_PLAN_WRAPPER.format(
        tests=os.path.dirname(__file__), node=node, real=os.path.join(ROOT, "library", "gpudirect_plan_peermem.py")))
    (library / "gpudirect_facts.py").write_text(FACTS_MODULE.format(facts=FACTS))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpu_nodes:\n  hosts:\n    gpunode:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(roles), ANSIBLE_LIBRARY=str(library),
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inventory), "--check",
                           os.path.join(ROOT, "tests", "harness", "gpu_node", "roles.yml")] + list(extra),
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)
    return proc.returncode, proc.stdout


# the roles tests/harness/gpu_node/roles.yml runs
PLAY_ROLES = ("gpudirect_nvidia_driver", "gpudirect_peermem")


def _task_names_matching(prefix):
    """The task files of the roles this play runs holding a task whose name starts with prefix.

    Only those roles (issue #31 outcome 6, a vacuous loop): searched over every role,
    "Install the kernel headers" was also found in gpudirect_dkms, which this play never runs,
    so a rename in gpudirect_nvidia_driver left the name check green and the skip check matching nothing."""
    found = []
    for role in PLAY_ROLES:
        for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
            with open(path) as handle:
                if any(line.strip().startswith("- name: " + prefix) for line in handle):
                    found.append(path)
    return found


def _file_ran(path, log):
    """Whether the run read this task file: a role's main.yml, or a file the log says it included."""
    role, name = path.split(os.sep)[-3], os.path.basename(path)
    return name == "main.yml" or re.search(r"^included: \S*/roles/%s/tasks/%s for " % (role, re.escape(name)),
                                           log, re.M) is not None


@pytest.mark.skipif(not _supported_controller(), reason="the roles' vars need Debian 12 or Ubuntu 22.04/24.04 here")
def test_roles_in_check_mode_on_the_simulated_node(tmp_path):
    rc, log = _roles_on_simulated_node(tmp_path, {})
    assert rc == 0, log
    recap = [line for line in log.splitlines() if line.startswith("gpunode ")]
    assert recap and "changed=0" in recap[-1] and "failed=0" in recap[-1], log
    for needle in (KEPT, "nouveau: no module for 6.18.44-fc-v657-gpu, nothing to blacklist",
                   "nvidia-persistenced: no nvidia-persistenced unit on this node", "peer memory: dmabuf",
                   "exports ibv_reg_dmabuf_mr"):
        assert needle in log, needle
    # nothing of the package path, the nvidia_peermem path or a download
    assert "setup-Debian.yml" not in log and "nvidia_peermem.yml" not in log and "dmabuf.yml" in log
    # each task below is either not reached (its file not included) or reached and skipped; the
    # names must exist in the roles, or a renamed task would make this check pass vacuously
    for task in ("Install the kernel headers", "Fetch the CUDA repository signing key", "Hold the driver packages",
                 "Load nvidia_peermem", "Blacklist nouveau", "Record the driver, kernel and OFED"):
        files = _task_names_matching(task)
        assert files, "no task of %s is named '%s...'" % (" or ".join(PLAY_ROLES), task)
        header = [line for line in log.splitlines() if task in line and line.startswith("TASK")]
        # a task of a file the run read must show in the log, or "every header says skipping"
        # holds of no header at all (issue #31 outcome 6)
        ran = [path for path in files if _file_ran(path, log)]
        assert header or not ran, "%s: its file(s) %s ran but the log shows no such task" % (task, ran)
        assert all("skipping" in log.split(h, 1)[1].split("TASK", 1)[0] for h in header), task
    reached = [t for t in ("Install the kernel headers", "Record the driver, kernel and OFED")
               if any(t in line and line.startswith("TASK") for line in log.splitlines())]
    assert reached, "none of the tasks this test expects skipped was reached: the check above proved nothing"


@pytest.mark.skipif(not _supported_controller(), reason="the roles' vars need Debian 12 or Ubuntu 22.04/24.04 here")
def test_roles_refuse_another_branch_before_any_change(tmp_path):
    rc, log = _roles_on_simulated_node(tmp_path, {}, "-e", '{"gpudirect_nvidia_driver_branch": "570"}')
    assert rc != 0
    assert "branch 580 installed, 570 wanted" in log and "nvidia-uninstall" in log
    recap = [line for line in log.splitlines() if line.startswith("gpunode ")]
    assert "changed=0" in recap[-1] and "failed=1" in recap[-1]
