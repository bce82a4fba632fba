"""gpudirect_verify_helper_build: once_per_platform (roles/gpudirect_verify/tasks/helper_copy.yml,
issue #29 outcome 4): the loopback helper is compiled on one node per platform and source,
kept on the controller and copied to the other nodes, which need no compiler.

Three local-connection nodes on this machine (one platform), each with its own helper
directory; a stand-in ``cc`` first on PATH logs each build and writes a small script as
the helper. The role's helper entry point runs as the pair scenario runs it
(include_role tasks_from=helper, gpudirect_verify_install_build_deps: false).
"""

import os
import subprocess
import sys
import textwrap

from conftest import ROOT, playbook_env
from hang_guard import HANG_GUARD_S

PLAY = """---
- name: The helper on every node
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: The helper tasks
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: helper
"""

FAKE_CC = """#!/bin/sh
# stand-in compiler: logs the output path, fails on request, writes a script as the helper
out=""
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out=$2; shift; done
echo "$out" >> "$FAKE_CC_LOG"
[ -n "$FAKE_CC_FAIL" ] && { echo "verbs.h: No such file or directory" >&2; exit 1; }
printf '#!/bin/sh\\necho helper\\n' > "$out"
"""


def run(tmp_path, check=False, fail=False):
    nodes = tmp_path / "nodes"
    inv = tmp_path / "hosts.yml"
    inv.write_text(textwrap.dedent("""\
        gpu_nodes:
          hosts:
            node-a: {}
            node-b: {}
            node-c: {}
          vars:
            ansible_connection: local
            ansible_python_interpreter: %s
            gpudirect_verify_install_build_deps: false
            gpudirect_verify_report_dir: %s
        """ % (sys.executable, tmp_path / "reports")))
    (tmp_path / "play.yml").write_text(PLAY)
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "cc").write_text(FAKE_CC)
    (fake / "cc").chmod(0o755)
    env = playbook_env(tmp_path, PATH="%s:%s" % (fake, os.environ["PATH"]), FAKE_CC_LOG=str(tmp_path / "cc.log"),
                       FAKE_CC_FAIL="1" if fail else "")
    # each node's own helper directory: an extra var (role vars beat inventory vars), templated per host
    argv = [sys.executable, "-m", "ansible.cli.playbook", "-i", str(inv), str(tmp_path / "play.yml"),
            "-e", "__gpudirect_verify_helper_dir=%s/{{ inventory_hostname }}" % nodes]
    argv += ["--check"] if check else []
    return subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)


def builds(tmp_path):
    log = tmp_path / "cc.log"
    return log.read_text().split() if log.exists() else []


def helper(tmp_path, node):
    return tmp_path / "nodes" / node / "gpudirect_loopback_helper"


def test_one_build_per_platform_copied_to_the_others_and_kept_on_the_controller(tmp_path):
    # check mode on fresh nodes: nothing built, nothing copied, nothing kept
    proc = run(tmp_path, check=True)
    assert proc.returncode == 0, proc.stdout
    assert builds(tmp_path) == [] and not (tmp_path / "reports").exists()

    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stdout
    made = builds(tmp_path)
    assert len(made) == 1 and made[0].startswith(str(tmp_path / "nodes" / "node-a") + "/"), made
    stamp = (tmp_path / "nodes" / "node-a" / "gpudirect_loopback_helper.sha256").read_text()
    for node in ("node-b", "node-c"):
        assert helper(tmp_path, node).read_bytes() == helper(tmp_path, "node-a").read_bytes()
        assert os.access(str(helper(tmp_path, node)), os.X_OK)
        assert (tmp_path / "nodes" / node / "gpudirect_loopback_helper.sha256").read_text() == stamp
    assert "node-b: loopback helper for" in proc.stdout and "built on node-a and copied here" in proc.stdout
    cached = [os.path.join(d, f) for d, _s, fs in os.walk(str(tmp_path / "reports" / "helpers")) for f in fs]
    assert sorted(os.path.basename(p) for p in cached) == ["gpudirect_loopback_helper", "gpudirect_loopback_helper.sha256"]
    assert os.path.basename(os.path.dirname(cached[0])) == stamp.strip()

    # the converged nodes: nothing built, nothing copied
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert len(builds(tmp_path)) == 1
    recap = proc.stdout.split("PLAY RECAP")[1]
    assert all("changed=0" in line for line in recap.splitlines() if line.startswith("node-")), recap

    # a node that lost its helper gets the controller's copy, and nothing is built
    helper(tmp_path, "node-c").unlink()
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert len(builds(tmp_path)) == 1 and helper(tmp_path, "node-c").exists()
    assert "node-c: loopback helper for" in proc.stdout and "built by an earlier batch or run" in proc.stdout


def test_a_failed_build_fails_the_others_naming_the_builder_and_the_knob(tmp_path):
    proc = run(tmp_path, fail=True)
    assert proc.returncode != 0
    assert len(builds(tmp_path)) == 1
    assert "helper_build_failed" in proc.stdout or "verbs.h" in proc.stdout
    for node in ("node-b", "node-c"):
        assert not helper(tmp_path, node).exists()
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [node-")]
    assert sorted(set(line[:len("fatal: [node-b]")] for line in fatal if "was to be built on node-a" in line)) == [
        "fatal: [node-b]", "fatal: [node-c]"], proc.stdout
    assert "gpudirect_verify_helper_build" in proc.stdout and "every_node" in proc.stdout
