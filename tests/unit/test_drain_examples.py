"""The Slurm and Kubernetes examples of inventory/example/group_vars/gpu_nodes/drain.yml
(issue #13, outcome 2): both blocks load as the role's knobs, pass its input rules,
and their wait wrappers say "idle" only when the scheduler command ran and listed nothing.

The scheduler commands are stood in by small scripts on PATH (no Slurm or Kubernetes here);
the Kubernetes go-template itself is run by the real kubectl when one is installed.
"""

import json
import os
import re
import shutil
import stat
import subprocess

import jinja2
import pytest
import yaml

from ansible.module_utils import gpudirect_input_rules as rules
from ansible.module_utils import gpudirect_rolling as rolling

from conftest import ROOT

EXAMPLE = os.path.join(ROOT, "inventory", "example", "group_vars", "gpu_nodes", "drain.yml")


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _block(name):
    """The commented-out YAML of one example block (lines '# gpudirect_drain_...' and '#   ...')."""
    with open(EXAMPLE) as handle:
        text = handle.read()
    part = text.split("# --- %s " % name)[1].split("\n# --- ")[0]
    lines = [m.group(1) for m in (re.match(r"^# (gpudirect_drain_\w+:.*|\s{2,}\S.*)$", line)
                                  for line in part.splitlines()) if m]
    return yaml.load("\n".join(lines), Loader=_Loader)


REASON = "gpudirect run 20261127T101500Z-12345: drivers"


def _render(argv, node):
    """Template each item as Ansible would for one node at one stage (the !unsafe template is left alone)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    return [item if item.startswith("{{- range") else
            env.from_string(item).render(inventory_hostname=node, gpudirect_drain_reason=REASON)
            for item in argv]


def _fake(tmp_path, name, script):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ["PATH"]))


@pytest.mark.parametrize("name", ["Slurm", "Kubernetes"])
def test_example_blocks_pass_the_roles_input_rules(name):
    knobs = _block(name)
    assert set(knobs) >= {"gpudirect_drain_command", "gpudirect_drain_wait_command", "gpudirect_drain_resume_command",
                          "gpudirect_drain_wait_timeout", "gpudirect_drain_wait_interval"}
    for knob in ("gpudirect_drain_command", "gpudirect_drain_wait_command", "gpudirect_drain_resume_command"):
        assert rules.check({"knob": knob, "value": knobs[knob], "rule": "argv", "min": 1}) == []
        assert any("{{ inventory_hostname }}" in item for item in knobs[knob]), knob
    assert knobs["gpudirect_drain_wait_interval"] < knobs["gpudirect_drain_wait_timeout"]


def test_slurm_commands_name_the_node():
    knobs = _block("Slurm")
    assert _render(knobs["gpudirect_drain_command"], "gpu07") == [
        "scontrol", "update", "nodename=gpu07", "state=drain", "reason=" + REASON]
    # scontrol(1) "update NodeName=... Reason=...": the reason of a node that is down or drained; an update that
    # gives only a reason keeps the node's state
    assert _render(knobs["gpudirect_drain_reason_command"], "gpu07") == [
        "scontrol", "update", "nodename=gpu07", "reason=" + REASON]
    assert _render(knobs["gpudirect_drain_resume_command"], "gpu07") == [
        "scontrol", "update", "nodename=gpu07", "state=resume"]


@pytest.mark.parametrize("squeue,idle", [
    ('echo "4711"; echo "4712"', False),      # two jobs still allocated to the node
    ("exit 0", True),                         # squeue ran, no job
    ('echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1', False),
])
def test_slurm_wait_is_idle_only_when_squeue_lists_nothing(tmp_path, squeue, idle):
    env = _fake(tmp_path, "squeue", '[ "$1 $2 $3 $4 $5" = "-h -w gpu07 -o %i" ] || { echo "bad args: $*" >&2; exit 9; }\n'
                + squeue + "\n")
    argv = _render(_block("Slurm")["gpudirect_drain_wait_command"], "gpu07")
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert result.returncode != 9, result.stderr
    assert (result.returncode == 0) is idle


@pytest.mark.parametrize("kubectl,idle", [
    ('printf "ml/train-0\\n"', False),
    ("exit 0", True),
    ('echo "The connection to the server localhost:8080 was refused" >&2; exit 1', False),
])
def test_kubernetes_wait_is_idle_only_when_no_gpu_pod_is_listed(tmp_path, kubectl, idle):
    knobs = _block("Kubernetes")
    env = _fake(tmp_path, "kubectl",
                'case "$*" in *"--field-selector spec.nodeName=gpu07,status.phase!=Succeeded,status.phase!=Failed'
                ' -o go-template={{- range .items -}}"*) ;; *) echo "bad args: $*" >&2; exit 9;; esac\n' + kubectl + "\n")
    argv = _render(knobs["gpudirect_drain_wait_command"], "gpu07")
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert result.returncode != 9, result.stderr
    assert (result.returncode == 0) is idle


# Pod objects in the shape the API server returns them (v1 Pod: metadata.ownerReferences,
# spec.containers[].resources.limits): a DaemonSet GPU pod (left running by
# `kubectl drain --ignore-daemonsets`), a Job's GPU pod, and a pod without GPU.
PODS = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "nvidia-dcgm-exporter-7xk2p", "namespace": "gpu-operator",
                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-dcgm-exporter",
                                       "uid": "0b1c", "controller": True}]},
     "spec": {"containers": [{"name": "exporter", "image": "dcgm-exporter",
                              "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "train-0", "namespace": "ml",
                  "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "9f2a",
                                       "controller": True}]},
     "spec": {"containers": [{"name": "trainer", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {}}]}},
]}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubernetes_template_lists_only_non_daemonset_gpu_pods(tmp_path):
    template = _block("Kubernetes")["gpudirect_drain_wait_command"][-1]
    assert template.startswith("{{- range .items -}}") and template.endswith("{{- end -}}")
    # `kubectl annotate --local` prints each object of the file on its own (no server needed):
    # run the template's body, the part inside `range .items`, on each pod
    body = template[len("{{- range .items -}}"):-len("{{- end -}}")]
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps(PODS))
    result = subprocess.run(["kubectl", "annotate", "--local", "-f", str(pods), "gpudirect=check",
                             "-o", "go-template=" + body], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ml/train-0\n"


# What the state commands print. Slurm's sinfo -o "%T %E": the extended state, then the
# reason ("none" when there is none; states from sinfo(1), NODE STATE CODES).
# Kubernetes' jsonpath {.spec.unschedulable}: "true" when cordoned, nothing otherwise.
@pytest.mark.parametrize("name, out, out_of_service", [
    ("Slurm", "drained Bad DIMM", True),
    ("Slurm", "draining gpu maintenance", True),
    ("Slurm", "down* Not responding", True),
    ("Slurm", "maint none", True),
    ("Slurm", "idle none", False),
    ("Slurm", "mixed none", False),
    ("Slurm", "allocated none", False),
    ("Kubernetes", "true", True),
    ("Kubernetes", "", False),
])
def test_example_state_commands_tell_a_node_out_of_service(name, out, out_of_service):
    knobs = _block(name)
    argv = _render(knobs["gpudirect_drain_state_command"], "gpu07")
    assert "gpu07" in argv
    with open(os.path.join(ROOT, "roles", "gpudirect_drain", "defaults", "main.yml")) as handle:
        pattern = yaml.safe_load(handle)["gpudirect_drain_state_out_of_service_pattern"]
    assert bool(re.search(pattern, out)) is out_of_service
    # and with the example's hooks the node is protected: a disruption is drained first
    assert rolling.protection(knobs) == []
