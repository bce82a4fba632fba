"""tests/harness/container/connection_plugins/gpudirect_podman.py, the container tier's connection:
containers.podman.podman with pipelining. Real ansible-playbook runs through the plugin against a
stand-in `podman` (ansible_podman_executable) that runs `exec` on this machine and logs every call,
so the tests count the podman processes a task costs and see what a stopped container gives.
"""

import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT
from hang_guard import HANG_GUARD_S

PLUGINS = os.path.join(ROOT, "tests", "harness", "container", "connection_plugins")

# podman exec: the command here, its stdin only with --interactive (as podman: without it the
# command reads nothing); `mount` gives / (the "container" is this machine); "stopped" and "gone"
# give what podman 4.3.1 (Debian 12) gives for a stopped and a removed container
FAKE_PODMAN = textwrap.dedent("""\
    #!{python}
    import json, os, subprocess, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_PODMAN_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    if args[0] == "mount":
        print("/")
        sys.exit(0)
    if args[0] == "exec":
        args = args[1:]
        interactive = False
        while args[0].startswith("--"):
            if args[0] == "--interactive":
                interactive = True
                args = args[1:]
            else:
                args = args[2:]
        if args[0] == "stopped":
            sys.stderr.write("Error: can only create exec sessions on running containers: container state improper\\n")
            sys.exit(255)
        if args[0] == "gone":
            sys.stderr.write('Error: no container with name or ID "gone" found: no such container\\n')
            sys.exit(125)
        if args[0] == "exits255":
            # a command that fails with 255 itself: a failed task, not an unreachable node
            sys.stderr.write("the command's own message\\n")
            sys.exit(255)
        stdin = sys.stdin.buffer.read() if interactive else b""
        sys.exit(subprocess.run(args[1:], input=stdin).returncode)
    sys.stderr.write("fake podman: %s not handled\\n" % args)
    sys.exit(2)
""")

PLAY = textwrap.dedent("""\
    - hosts: nodes
      gather_facts: false
      tasks:
        - name: A module
          ansible.builtin.command: echo through-the-plugin
          register: __out
          changed_when: false

        - name: Its output
          ansible.builtin.assert:
            that: __out.stdout == 'through-the-plugin'

        - name: A file copied in
          ansible.builtin.copy:
            content: "copied\\n"
            dest: "{{ dest }}"
            mode: "0644"
""")


def _run(tmp_path, hosts, extra_env=None):
    podman = tmp_path / "podman"
    podman.write_text(FAKE_PODMAN.format(python=sys.executable))
    podman.chmod(0o755)
    log = tmp_path / "podman.log"
    log.write_text("")
    inventory = {"nodes": {"hosts": {
        name: dict({"ansible_connection": "gpudirect_podman", "ansible_podman_executable": str(podman),
                    "ansible_python_interpreter": sys.executable, "dest": str(tmp_path / ("copied-" + name))},
                   **hostvars)
        for name, hostvars in hosts.items()}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONNECTION_PLUGINS=PLUGINS, FAKE_PODMAN_LOG=str(log),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "local-tmp"),
               ANSIBLE_REMOTE_TMP=str(tmp_path / "remote-tmp"), **(extra_env or {}))
    run = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return run, calls


def test_a_module_is_one_podman_exec_with_its_code_on_stdin(tmp_path):
    run, calls = _run(tmp_path, {"node1": {}})
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "copied-node1").read_text() == "copied\n"
    execs = [c for c in calls if c[0] == "exec"]
    modules = [c for c in execs if "--interactive" in c]
    # command, and copy's stat and copy: each module one `podman exec --interactive` (interpreter
    # discovery is a plain exec of its own)
    assert len(modules) == 3, calls
    assert all(c[1:3] == ["--interactive", "node1"] for c in modules), modules
    # only copy's file transfer mounts the container, once; no module went through a file
    assert [c for c in calls if c[0] == "mount"] == [["mount", "node1"]], calls
    assert not [c for c in execs if "AnsiballZ" in " ".join(c)], execs


def test_without_pipelining_the_module_goes_through_a_file_as_before(tmp_path):
    run, calls = _run(tmp_path, {"node1": {"ansible_pipelining": False}})
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "copied-node1").read_text() == "copied\n"
    assert not [c for c in calls if "--interactive" in c], calls
    assert len([c for c in calls if c[0] == "exec" and "AnsiballZ" in " ".join(c)]) >= 3, calls
    # a mount for each task that copies a file in (the module, or copy's source)
    assert [c for c in calls if c[0] == "mount"] == [["mount", "node1"]] * 2, calls


def test_a_stopped_or_removed_container_is_unreachable_not_a_failed_module(tmp_path):
    run, _ = _run(tmp_path, {"node1": {}, "stopped": {}, "gone": {}, "exits255": {}})
    assert run.returncode == 4, run.stdout + run.stderr
    recap = {line.split()[0]: line for line in run.stdout.splitlines() if "unreachable=" in line}
    for node in ("stopped", "gone"):
        assert "unreachable=1" in recap[node] and "failed=0" in recap[node], run.stdout
    assert "unreachable=0" in recap["node1"] and "failed=0" in recap["node1"], run.stdout
    # exit 255 without podman's "Error: " line is the command's own: the task fails, the node answered
    assert "unreachable=0" in recap["exits255"] and "failed=1" in recap["exits255"], run.stdout
    assert "container state improper" in run.stdout and "no such container" in run.stdout
