"""The stand-in gdrcopy-tests tools (tests/harness/standin_repo/src/gdrcopy/tests/) through
roles/gpudirect_verify/tasks/gdrcopy.yml on this machine: the tools answer as the real 2.5.1
ones do on a node with no GPU, and the role turns that into "GDRCopy not measured", with
the tools' own error, where the facts list no GPU; with GPUs in the facts it stays a failure.

The facts come from a one-line module of the test (the GPU list is what the check reads);
the tools are the stand-in's scripts with their data directory pointed at the fixtures, as
build.sh packages them."""

import glob
import json
import os

import pytest

from conftest import play_on_localhost

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "gdrcopy", "tests")
FIX = os.path.join(ROOT, "tests", "fixtures", "gdrcopy")

PLAYBOOK = """---
- name: The GDRCopy check with the stand-in tools
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Facts with the GPUs this test says the node has
      test_gpudirect_facts:
        gpus: "{{ fact_gpus }}"
    - name: GDRCopy's tests
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: gdrcopy
    - name: Write down the check
      ansible.builtin.copy:
        dest: "{{ found_file }}"
        mode: "0644"
        content: "{{ __gpudirect_verify_check_gdrcopy | to_json }}"
"""

MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={"gpus": {"type": "list", "elements": "dict", "required": True}})
module.exit_json(changed=False, ansible_facts={"gpudirect": {"gpus": module.params["gpus"]}})
"""


def _machine_has_an_nvidia_gpu():
    for dev in glob.glob("/sys/bus/pci/devices/*"):
        try:
            with open(os.path.join(dev, "vendor")) as v, open(os.path.join(dev, "class")) as c:
                if v.read().strip() == "0x10de" and c.read().strip().startswith("0x03"):
                    return True
        except OSError:
            continue
    return bool(glob.glob("/proc/driver/nvidia/gpus/*") or glob.glob("/dev/nvidia[0-9]*"))


pytestmark = pytest.mark.skipif(_machine_has_an_nvidia_gpu(),
                                reason="this machine has an NVIDIA GPU: the stand-in tools refuse to answer there")


def _standin_tools(directory):
    """The stand-in scripts as build.sh packages them, their data read from the fixtures."""
    data = directory / "share"
    data.mkdir(parents=True)
    for packaged, fixture in (("sanity-no-gpu.stdout", "sanity-no-gpu-v2.5.1.stdout"),
                              ("sanity-no-gpu.stderr", "sanity-no-gpu-v2.5.1.stderr"),
                              ("copybw-no-gpu.stderr", "copybw-no-gpu-v2.5.1.stderr")):
        with open(os.path.join(FIX, fixture)) as fh:
            (data / packaged).write_text(fh.read())
    bindir = directory / "bin"
    bindir.mkdir()
    for tool in ("gdrcopy_sanity", "gdrcopy_copybw"):
        with open(os.path.join(SRC, tool)) as fh:
            text = fh.read().replace("@VERSION@", "2.5.1").replace("/usr/share/gdrcopy-tests-standin", str(data))
        (bindir / tool).write_text(text)
        (bindir / tool).chmod(0o755)
    return bindir


def _check(tmp_path, gpus):
    library = tmp_path / "library"
    library.mkdir()
    (library / "test_gpudirect_facts.py").write_text(MODULE)
    found = tmp_path / "check.json"
    extra = {"found_file": str(found), "fact_gpus": gpus,
             "__gpudirect_verify_tool_dirs": [str(_standin_tools(tmp_path / "standin"))]}
    proc = play_on_localhost(tmp_path, PLAYBOOK, extra,
                             env_extra={"ANSIBLE_LIBRARY": "%s:%s" % (library, os.path.join(ROOT, "library"))})
    assert proc.returncode == 0, proc.stdout
    return json.loads(found.read_text()), proc.stdout


def test_a_node_without_gpu_is_not_measured_in_the_tools_own_words(tmp_path):
    check, out = _check(tmp_path, [])
    assert check["status"] == "not_measured", check
    assert check["summary"].startswith("GDRCopy not measured: no NVIDIA GPU on this node (its facts list none); "
                                       "gdrcopy_sanity exited 1 with 0 of 36 tests passed: "
                                       "'CUDA error: CUDA_ERROR_NO_DEVICE' (no CUDA-capable device is detected)")
    assert "gdrcopy_copybw exited 1 before printing a bandwidth" in check["summary"]
    assert check["copybw"] is None and "GB/s" not in check["summary"]
    assert "GDRCopy not measured: " in out     # the role's debug line says it too


def test_a_node_with_gpus_in_its_facts_fails(tmp_path):
    check, _ = _check(tmp_path, [{"address": "0000:1b:00.0", "vendor": "0x10de", "device": "0x2335"}])
    assert check["status"] == "failed", check
    assert "0 passed, 36 failed" in check["reason"] and "CUDA_ERROR_NO_DEVICE" in check["reason"]
