"""An aarch64 (Grace) node resolves the roles' repositories and packages against the stand-in.

What this proves:

- The URLs the roles configure on a Debian 12 node whose ``ansible_facts['architecture']``
  is ``aarch64`` (rendered by ansible-core's templar from the roles' own defaults/, vars/ and
  vars/Debian-12.yml, as a play renders them) are directories of the stand-in
  (``tests/harness/standin_repo/build.sh``): CUDA ``.../debian12/sbsa/``, DOCA
  ``.../<release>/debian12/arm64-sbsa/``. The apt source line and the driver pin are the
  role's own task contents (``roles/gpudirect_nvidia_driver/tasks/setup-Debian.yml``), rendered.
- apt itself (no root, a private directory tree, ``APT::Architecture=arm64``) accepts those
  repositories' signatures with the stand-in's keys, and with the role's pin resolves the
  packages the roles install, at the driver version: the flavour's metapackages
  (``gpudirect_nvidia_plan.APT_PACKAGES``), the fabric manager as ``fabricmanager_package``
  names it (``nvidia-fabricmanager=<v>-*``), IMEX (``nvidia-imex=<v>-*``) and NVLSM
  (``nvlsm``, not held to the driver's version by the pin), and the DOCA profile with the
  OFED core packages. Every ``.deb`` apt would fetch is an ``arm64`` (or ``all``) file of an
  Arm tree; none comes from an x86_64 tree.
- The check can fail: the x86_64 URL, read by an arm64 apt, offers none of the packages.
- The Arm tree's ``nvidia-imex`` (unpacked, not installed) refuses a node list without this
  machine, and its ``nvidia-imex-ctl -N`` prints the real capture's lines
  (tests/fixtures/imex/).

What it does not prove: that anything installs or runs on an Arm machine (no package is
unpacked, no DKMS build, no arm64 kernel); that NVIDIA publishes Debian 12 Arm trees (the
stand-in keeps its one distribution); the role's tasks as a play (only their templates and
package names are used). Debian's own packages the stand-ins depend on (dkms, gcc, python3,
infiniband-diags, ...) are not on this machine's mirror for arm64: they are written into
the private dpkg status file as installed, so apt resolves only the vendor packages.
"""

import os
import re
import shutil
import subprocess
import time

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from conftest import ROOT
from ansible.module_utils.gpudirect_nvidia import fabricmanager_package
from ansible.module_utils.gpudirect_nvidia_plan import APT_PACKAGES

# the role's IMEX / NVLSM planning (module_utils/gpudirect_nvlink_plan.py)
from ansible.module_utils.gpudirect_nvlink_plan import NVLSM_PACKAGES, imex_package
from hang_guard import HANG_GUARD_S

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("apt-get", "apt-cache", "dpkg-deb", "apt-ftparchive", "gpg")),
    reason="needs apt-get, apt-cache, dpkg-deb, apt-ftparchive (dpkg-dev, apt-utils) and gpg")

BUILD = os.path.join(ROOT, "tests", "harness", "standin_repo", "build.sh")
# the node: an Arm server (Grace reports uname -m aarch64) running Debian 12, the stand-in's distribution
FACTS = {"architecture": "aarch64", "os_family": "Debian", "distribution": "Debian",
         "distribution_major_version": "12"}
# Debian packages the stand-ins depend on, "installed" in the private status file
DEBIAN_DEPS = {"dkms": "all", "make": "arm64", "gcc": "arm64", "kmod": "arm64", "python3": "arm64",
               "infiniband-diags": "arm64"}


def role_templar(role, **overrides):
    """A templar over the role's defaults, vars/main.yml and vars/Debian-12.yml (what
    include_vars loads for these facts), plus the inventory's overrides."""
    loader = DataLoader()
    variables = {}
    for sub in ("defaults/main.yml", "vars/main.yml", "vars/Debian-12.yml"):
        variables.update(loader.load_from_file(os.path.join(ROOT, "roles", role, sub)) or {})
    variables.update(overrides, ansible_facts=FACTS)
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    return Templar(loader=loader, variables=trusted), trusted


def render(templar, text):
    return templar.template(trust_as_template(text))


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    cache = tmp_path_factory.mktemp("standin-cache")
    run = subprocess.run([BUILD], env=dict(os.environ, GPUDIRECT_CACHE=str(cache)),
                         capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.strip().splitlines()[-1]
    env = {}
    with open(os.path.join(out, "repo.env"), encoding="utf-8") as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#"):
                env[key] = value.strip('"')
    return {"root": out, "www": os.path.join(out, "www"), "env": env}


def setup_debian_task(name):
    tasks = DataLoader().load_from_file(os.path.join(ROOT, "roles", "gpudirect_nvidia_driver", "tasks", "setup-Debian.yml"))
    return next(task for task in tasks if task.get("name") == name)


class Apt:
    """apt-get / apt-cache over a private tree (Dir=...), for an arm64 machine, without root."""

    def __init__(self, root):
        self.root = str(root)
        for sub in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d",
                    "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self.status = os.path.join(self.root, "var/lib/dpkg/status")
        with open(self.status, "w", encoding="utf-8") as handle:
            for name, arch in DEBIAN_DEPS.items():
                handle.write("Package: %s\nStatus: install ok installed\nPriority: optional\nSection: misc\n"
                             "Maintainer: Debian\nArchitecture: %s\nVersion: 99-debian12\n"
                             "Description: Debian's own package (fake installed entry)\n\n" % (name, arch))
        self.conf = os.path.join(self.root, "apt.conf")
        with open(self.conf, "w", encoding="utf-8") as handle:
            handle.write('Dir "%s/";\nDir::State::status "%s";\nAPT::Architecture "arm64";\n'
                         'APT::Architectures { "arm64"; };\nAcquire::Languages "none";\n'
                         'Debug::NoLocking "true";\n'
                         % (self.root, self.status))
            if os.geteuid() == 0:   # apt would fetch as _apt, who cannot read the pytest tmp dir
                handle.write('APT::Sandbox::User "root";\n')

    def write(self, rel, text):
        with open(os.path.join(self.root, rel), "w", encoding="utf-8") as handle:
            handle.write(text)

    def run(self, *argv):
        # APT_CONFIG is read before the machine's /etc/apt, so nothing of it is used
        env = dict(os.environ, APT_CONFIG=self.conf, LC_ALL="C")
        return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


def configure(apt, standin, version, arch_facts=None):
    """Write what the roles would: the CUDA list line and the driver pin (the role's task
    contents, rendered), the DOCA deb822 source; returns the two repository URLs."""
    www, env = standin["www"], standin["env"]
    cuda_key = os.path.join(standin["root"], "keys", "cuda-archive-keyring.asc")
    doca_key = os.path.join(standin["root"], "keys", "doca-archive-keyring.asc")
    nv, nv_vars = role_templar("gpudirect_nvidia_driver", gpudirect_nvidia_driver_repo_base_url="file://%s/compute/cuda/repos" % www,
                               gpudirect_nvidia_driver_version=version, __gpudirect_nvidia_driver_keyring=cuda_key)
    if arch_facts:
        nv_vars["ansible_facts"] = dict(FACTS, **arch_facts)
        nv = Templar(loader=DataLoader(), variables=nv_vars)
    items = {item["dest"]: item["content"] for item in setup_debian_task(
        "Add the CUDA repository and pin the driver branch")["loop"]}
    cuda_url = render(nv, "{{ __gpudirect_nvidia_driver_repo_url | trim }}")
    apt.write("etc/apt/sources.list.d/cuda.list", render(nv, items["{{ __gpudirect_nvidia_driver_apt_list }}"]))
    apt.write("etc/apt/preferences.d/gpudirect-nvidia-driver", render(nv, items["{{ __gpudirect_nvidia_driver_apt_pin }}"]))

    ofed, _ = role_templar("gpudirect_mlnx_ofed", gpudirect_mlnx_ofed_repo_base_url="file://%s/public/repo/doca" % www)
    doca_url = render(ofed, "{{ __gpudirect_mlnx_ofed_repo_url | trim }}")
    # the role's deb822_repository task: types deb, its URL, suite ./, signed-by the DOCA key
    apt.write("etc/apt/sources.list.d/doca.sources",
              "Types: deb\nURIs: %s\nSuites: ./\nSigned-By: %s\n" % (doca_url, doca_key))
    return cuda_url, doca_url, ofed


def wanted_packages(ofed, flavor, version):
    branch = version.split(".")[0]
    nvidia = list(APT_PACKAGES[flavor]) + [fabricmanager_package(branch, "Debian", version)["spec"],
                                           imex_package(branch, "Debian", version)["spec"]] + list(NVLSM_PACKAGES)
    doca = render(ofed, "{{ __gpudirect_mlnx_ofed_core_packages + [gpudirect_mlnx_ofed_profile] }}")
    return nvidia, list(doca)


def local(uri):
    """file:///x and apt's file:/x -> /x"""
    return re.sub(r"^file:/+", "/", uri)


def versions(standin):
    return standin["env"]["STANDIN_NVIDIA_VERSIONS"].split()


@pytest.mark.parametrize("flavor", sorted(APT_PACKAGES))
def test_aarch64_node_resolves_the_roles_packages_from_the_arm_trees(standin, tmp_path, flavor):
    for version in versions(standin):
        apt = Apt(tmp_path / version)
        cuda_url, doca_url, ofed = configure(apt, standin, version)
        www = "file://" + standin["www"] + "/"
        assert cuda_url == www + standin["env"]["STANDIN_CUDA_REPO_PATH_SBSA"], cuda_url
        assert doca_url == www + standin["env"]["STANDIN_DOCA_REPO_PATH_TEMPLATE_ARM64"].replace(
            "{doca_version}", render(ofed, "{{ gpudirect_mlnx_ofed_doca_version }}")), doca_url

        update = apt.run("apt-get", "update")
        assert update.returncode == 0 and "W:" not in update.stdout + update.stderr, update.stdout + update.stderr

        nvidia, doca = wanted_packages(ofed, flavor, version)
        got = apt.run("apt-get", "install", "--print-uris", "-qq", "-y", *(nvidia + doca))
        assert got.returncode == 0, got.stdout + got.stderr
        files = {}
        for line in got.stdout.splitlines():
            match = re.match(r"^'([^']+)' (\S+\.deb) ", line)
            if match:
                files[match.group(2)] = match.group(1)
        assert files, got.stdout
        trees = (local(cuda_url), local(doca_url))
        for name, uri in files.items():
            assert local(uri).startswith(trees), (name, uri)
            assert name.endswith(("_arm64.deb", "_all.deb")), name
        packages = {name.split("_")[0]: name.split("_")[1].replace("%3a", ":") for name in files}
        # the driver and everything held to it at the wanted version; nvlsm at its own
        for name in list(APT_PACKAGES[flavor]) + ["nvidia-driver-cuda", "nvidia-smi", "nvidia-persistenced",
                                                  "nvidia-fabricmanager", "nvidia-imex"]:
            assert packages.get(name) == version + "-1", (name, packages)
        assert packages.get("nvlsm") == standin["env"]["STANDIN_NVLSM_VERSION"] + "-1", packages
        for name in doca:
            assert name in packages, (name, packages)
            assert local(files[next(f for f in files if f.startswith(name + "_"))]).startswith(local(doca_url))


def test_nvlsm_is_not_pinned_to_the_driver_and_imex_is(standin, tmp_path):
    version = versions(standin)[0]
    apt = Apt(tmp_path)
    configure(apt, standin, version)
    assert apt.run("apt-get", "update").returncode == 0
    policy = apt.run("apt-cache", "policy", "nvidia-imex", "nvlsm", "nvidia-imex-570").stdout
    blocks = dict(re.findall(r"^(\S+):\n((?:  .*\n?)*)", policy, re.M))
    assert re.search(r"Candidate: %s-1\n" % re.escape(version), blocks["nvidia-imex"]), policy
    assert re.search(r"^ +%s-1 1001$" % re.escape(version), blocks["nvidia-imex"], re.M), policy
    assert re.search(r"Candidate: %s-1\n" % re.escape(standin["env"]["STANDIN_NVLSM_VERSION"]), blocks["nvlsm"]), policy
    assert "1001" not in blocks["nvlsm"], policy
    # the pre-580 name is in the Arm tree too (the pin leaves it at its own version, 500)
    assert "Candidate: %s-1\n" % standin["env"]["STANDIN_NVIDIA_570_VERSION"] in blocks["nvidia-imex-570"], policy


def test_the_x86_64_tree_offers_an_arm64_node_nothing(standin, tmp_path):
    """The same checks fail where the URL and the architecture disagree."""
    version = versions(standin)[0]
    apt = Apt(tmp_path)
    cuda_url, _, _ = configure(apt, standin, version, arch_facts={"architecture": "x86_64"})
    assert cuda_url.endswith("/debian12/x86_64/")
    assert apt.run("apt-get", "update").returncode == 0
    got = apt.run("apt-get", "install", "--print-uris", "-qq", "-y", "nvidia-open", "nvlsm")
    assert got.returncode != 0 and "Unable to locate package nvidia-open" in got.stdout + got.stderr, \
        got.stdout + got.stderr


def test_arm64_nvidia_imex_ctl_prints_the_real_format(standin, tmp_path):
    """The Arm tree's nvidia-imex, unpacked (its two paths under / moved into tmp_path): the
    daemon refuses a node list without this machine's address in the real log line's words;
    with it, ``nvidia-imex-ctl -N`` prints the real 18-node capture (tests/fixtures/imex/)
    line for line, but for the timestamp, this machine's address as node 17 and the driver
    version; with the daemon stopped, the stand-in's not-UP guess and exit status 1."""
    version = versions(standin)[0]
    deb = os.path.join(standin["www"], standin["env"]["STANDIN_CUDA_REPO_PATH_SBSA"],
                       "nvidia-imex_%s-1_arm64.deb" % version)
    unpacked = tmp_path / "pkg"
    subprocess.run(["dpkg-deb", "-x", deb, str(unpacked)], check=True)
    common = unpacked / "usr/share/nvidia-imex-standin/imex_common.sh"
    common.write_text(re.sub(r"(?m)^IMEX_PIDFILE=.*$", "IMEX_PIDFILE=%s/run/nvidia-imex.pid" % tmp_path,
                             common.read_text()))
    tools = {}
    for name in ("nvidia-imex", "nvidia-imex-ctl"):
        tool = tmp_path / name
        tool.write_text((unpacked / "usr/bin" / name).read_text().replace(
            "/usr/share/nvidia-imex-standin/imex_common.sh", str(common)))
        tool.chmod(0o755)
        tools[name] = str(tool)
    local = subprocess.run(["sh", "-c", '. "$1"; imex_local_ips | grep -v "^127\\." | head -n 1', "sh", str(common)],
                           capture_output=True, text=True, check=True).stdout.strip()
    if not local or len(local) > 15:
        pytest.skip("no IPv4 address of this machine to put in the node list (%r)" % local)
    config = tmp_path / "config.cfg"
    nodes = tmp_path / "nodes_config.cfg"
    config.write_text("IMEX_NODE_CONFIG_FILE=%s\n" % nodes)
    with open(os.path.join(ROOT, "tests", "fixtures", "imex", "ctl-N-gb200-18-nodes-570.172.txt"),
              encoding="utf-8") as handle:
        real = handle.read()
    addresses = re.findall(r"^Node #\d+ +- (\S+)", real, re.M)
    assert len(addresses) == 18

    nodes.write_text("\n".join(addresses) + "\n")   # none of them is this machine
    refused = subprocess.run([tools["nvidia-imex"], "-c", str(config)], capture_output=True, text=True, check=False)
    assert refused.returncode == 1
    assert "No matching network interface found for any IP addresses in the node configuration file" \
        in refused.stderr

    nodes.write_text("\n".join(addresses[:17] + [local]) + "\n")
    started = subprocess.run([tools["nvidia-imex"], "-c", str(config)], capture_output=True, text=True, check=False)
    assert started.returncode == 0, started.stderr
    try:
        up = subprocess.run([tools["nvidia-imex-ctl"], "-N", "-c", str(config)], capture_output=True, text=True,
                            check=False)
    finally:
        with open(tmp_path / "run" / "nvidia-imex.pid", encoding="utf-8") as handle:
            os.kill(int(handle.read()), 15)
    assert up.returncode == 0, up.stderr
    stamp = re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d\d:\d\d:\d\d\.\d{3}$")
    wanted = re.sub(r"(?m)^(Node #17 +- )\S+ +- ", lambda m: m.group(1) + local.ljust(16) + "- ", real)
    wanted = wanted.replace("Version: 570.172", "Version: " + version).splitlines()
    got = up.stdout.splitlines()
    assert [bool(stamp.match(line)) for line in got] == [bool(stamp.match(line)) for line in wanted], up.stdout
    assert [line for line in got if not stamp.match(line)] == [line for line in wanted if not stamp.match(line)]

    # the daemon gone: the stand-in's guess at the failure shapes, exit 1
    for _ in range(50):
        down = subprocess.run([tools["nvidia-imex-ctl"], "-N", "-c", str(config)], capture_output=True, text=True,
                              check=False)
        if down.returncode:
            break
        time.sleep(0.1)
    assert down.returncode == 1 and down.stdout.rstrip().endswith("Domain State: DOWN"), down.stdout
    assert re.search(r"^Node #17  - %s +- UNAVAILABLE +- Version: %s$" % (re.escape(local), re.escape(version)),
                     down.stdout, re.M), down.stdout
    assert re.search(r"^      17        N   N( +N)+$", down.stdout, re.M), down.stdout
