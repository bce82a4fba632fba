"""Make the project's modules, module_utils and filter plugins importable in unit tests.

Ansible ships custom module_utils to the target as ``ansible.module_utils.<name>``;
adding the project's ``module_utils/`` to that package's search path lets the tests
import ``library/*.py`` exactly as Ansible runs them. ``plugin_utils/`` (the filters' and
callbacks' controller-only helpers) joins the same path, as the filter files add it.
"""

import json
import os
import sys

import ansible.module_utils
import pytest
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROJECT_FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# the H200 node's raw outputs (nvidia-smi, sysfs, /proc; README.md one folder up)
H200_CAPTURE = os.path.join(PROJECT_FIXTURES, "gpu_node", "h200", "capture")

for _utils in (os.path.join(ROOT, "module_utils"), os.path.join(ROOT, "plugin_utils")):
    if _utils not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_utils)

# the playbooks these tests run write no run summaries (tests/unit/test_run_summary.py
# turns them on where it checks them) and log to a file of their own, not logs/ansible.log
os.environ.setdefault("GPUDIRECT_RUN_SUMMARY_DIR", "")
os.environ.setdefault("ANSIBLE_LOG_PATH", os.path.join(__import__("tempfile").gettempdir(),
                                                       "gpudirect-unit-tests-ansible.log"))

for sub in ("library", "filter_plugins"):
    path = os.path.join(ROOT, sub)
    if path not in sys.path:
        sys.path.insert(0, path)


def pytest_configure(config):
    # pytest-xdist registers it too; registered here so that a run without xdist knows it
    config.addinivalue_line(
        "markers", "xdist_group(name): with -n and --dist loadgroup, run these tests on one worker "
        "(a module whose tests share one expensive module-scoped run)")


# The machine's own state files: a test run on this machine gives its nodes paths of their
# own (under /var/lib/gpudirect/unit-*, as the roles require, removed afterwards); one that
# writes the default paths leaves a note that a later run, or a parallel test, reads.
MACHINE_STATE_FILES = ("/var/lib/gpudirect/left-drained.json", "/var/lib/gpudirect/converged.json",
                       "/var/lib/gpudirect/run.lock")


def pytest_sessionstart(session):
    session.config._gpudirect_state_before = {p for p in MACHINE_STATE_FILES if os.path.exists(p)}


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return   # an xdist worker: the controller checks once, after every worker ended
    left = sorted(p for p in MACHINE_STATE_FILES
                  if os.path.exists(p) and p not in getattr(session.config, "_gpudirect_state_before", set()))
    if left:
        sys.stderr.write("\nA test wrote the machine's own state file(s) %s and left them: give the test's "
                         "nodes paths of their own (gpudirect_drain_left_drained_file, "
                         "gpudirect_state_record_path)\n" % ", ".join(left))
        session.exitstatus = 1


@pytest.fixture
def run_module(monkeypatch, capsys):
    """Run a module's main() as Ansible would and return its JSON result.

    ``run_module(module, {"opt": 1}, check_mode=True)``.
    """
    from ansible.module_utils import _internal, basic
    from ansible.module_utils.common import warnings

    def run(module, args, check_mode=False):
        module_args = dict(args)
        if check_mode:
            module_args["_ansible_check_mode"] = True
        # A module runs on the target: its warnings go into its result. A test in the same worker
        # that imported Ansible's controller code (tests/unit/test_left_behind_callback.py) turns
        # is_controller on, and module.warn() would print to the controller's display instead,
        # leaving the result without "warnings". Each run also starts with no warnings of its own.
        monkeypatch.setattr(_internal, "is_controller", False)
        monkeypatch.setattr(warnings, "_global_warnings", {})
        monkeypatch.setattr(warnings, "_global_deprecations", {})
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": module_args}).encode())
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
        with pytest.raises(SystemExit):
            module.main()
        return json.loads(capsys.readouterr().out)

    return run


def argument_spec_of(module, monkeypatch):
    """The argument_spec a module's main() hands to AnsibleModule (main() is stopped there)."""
    from ansible.module_utils.basic import AnsibleModule

    seen = {}

    class Capture(Exception):
        pass

    def capture(self, argument_spec, **kwargs):
        seen.update(argument_spec)
        raise Capture()

    monkeypatch.setattr(AnsibleModule, "__init__", capture)
    with pytest.raises(Capture):
        module.main()
    return seen


def host_pattern(hosts):
    """The host pattern of a play's ``hosts:``, plain (``gpu_nodes``) or through the
    project's filter (``"{{ groups | gpudirect_hosts('gpu_nodes:!gpudirect_disrupt') }}"``),
    maybe ordered by ``gpudirect_rolling_order(hostvars | default({}))``."""
    import re

    found = re.fullmatch(r"\{\{ groups \| gpudirect_hosts\('([^']+)'\)"
                         r"(?: \| gpudirect_rolling_order\(hostvars \| default\(\{\}\)\))? \}\}", hosts)
    return found.group(1) if found else hosts


def load_vm_harness(name):
    """tests/harness/vm/vm.py as a fresh module named ``name`` (a test may patch its globals)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", "harness", "vm", "vm.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_fixture(*parts, binary=False):
    """A file under tests/fixtures/, as text (or bytes)."""
    with open(os.path.join(ROOT, "tests", "fixtures", *parts), "rb" if binary else "r") as handle:
        return handle.read()


def role_tasks_play(role, tasks_from, then=""):
    """The playbook text that runs one tasks file of a role on localhost (for
    play_on_localhost); ``then`` is YAML for more tasks after it, indented as tasks."""
    return ("---\n- name: %s's %s tasks\n  hosts: localhost\n  connection: local\n  gather_facts: false\n"
            "  tasks:\n    - name: The %s tasks\n      ansible.builtin.include_role:\n        name: %s\n"
            "        tasks_from: %s\n" % (role, tasks_from, tasks_from, role, tasks_from)) + then


def playbook_env(tmp_path, **extra):
    """The environment of an ansible-playbook run of the tests: the project's ansible.cfg, no
    colour, the default output only, the run's temporary files under tmp_path; plus ``extra``."""
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), **extra)


def play_on_localhost(tmp_path, playbook_text, extra, check=False, diff=False, env_extra=None):
    """Run playbook_text on this machine (inventory localhost, local connection, this
    Python) with the project's ansible.cfg and roles, extra as one JSON extra-vars;
    the finished process (returncode, stdout with stderr)."""
    import subprocess

    playbook = tmp_path / "play.yml"
    playbook.write_text(playbook_text)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ROLES_PATH=os.path.join(ROOT, "roles"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               ANSIBLE_LOCALHOST_WARNING="False")
    env.update(env_extra or {})
    argv = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-e", json.dumps(extra),
            "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)]
    argv += (["--check"] if check else []) + (["--diff"] if diff else [])
    return subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)


def kernel_update_on_localhost(tmp_path, gpu_b_vars, *extra):
    """playbooks/kernel_update.yml over two local-connection nodes, gpu-a (no knobs) and gpu-b
    (``gpu_b_vars``), both this machine; the plan reads this machine's apt lists as they are
    (gpudirect_kernel_update_refresh_cache: false). ``extra``: more ansible-playbook arguments. The
    finished process (returncode, stdout with stderr)."""
    import shutil
    import subprocess
    import textwrap
    import uuid

    notes = "/var/lib/gpudirect/unit-notes-%s" % uuid.uuid4().hex
    inv = tmp_path / "hosts.yml"
    inv.write_text(textwrap.dedent("""\
        gpu_nodes:
          hosts:
            gpu-a: {}
            gpu-b: %s
          vars:
            ansible_connection: local
            ansible_python_interpreter: %s
            gpudirect_kernel_update_refresh_cache: false
            # this test's own notes, under the role's directory as it requires, removed after
            # the run (never the machine's /var/lib/gpudirect/left-drained.json)
            gpudirect_drain_left_drained_file: %s/{{ inventory_hostname }}.json
        """ % (json.dumps(gpu_b_vars), sys.executable, notes)))
    env = playbook_env(tmp_path)
    try:
        return subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inv),
                               os.path.join(ROOT, "playbooks", "kernel_update.yml")] + list(extra),
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=HANG_GUARD_S)
    finally:
        shutil.rmtree(notes, ignore_errors=True)
