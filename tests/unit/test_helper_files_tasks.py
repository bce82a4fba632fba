"""roles/gpudirect_verify/tasks/helper_files.yml on this machine: the loopback helper's C
source is read back with one sha256sum and only the files the node lacks or holds another
version of are shipped (a stat and a copy per file cost a round trip each: under TCG,
~40 s of every verification run; across a fleet, every node's no-op re-run). The helper's
directory points into a temporary one (extra vars win over role vars)."""

import os
import re

import yaml

from conftest import ROOT, play_on_localhost

FILES_DIR = os.path.join(ROOT, "roles", "gpudirect_verify", "files")
with open(os.path.join(ROOT, "roles", "gpudirect_verify", "vars", "main.yml")) as _handle:
    HELPER_FILES = yaml.safe_load(_handle)["__gpudirect_verify_helper_files"]

PLAYBOOK = """---
- name: The helper's files
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The helper tasks
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: helper_files
"""


def _play(tmp_path, check=False):
    helper = tmp_path / "loopback"
    # the node compiles its own helper (tests/unit/test_helper_once_per_platform.py has the copy);
    # this test ships files and builds nothing
    extra = {"__gpudirect_verify_helper_dir": str(helper), "__gpudirect_verify_helper_src_dir": str(helper / "src"),
             "gpudirect_verify_install_build_deps": False, "gpudirect_verify_helper_build": "every_node"}
    proc = play_on_localhost(tmp_path, PLAYBOOK, extra, check=check)
    assert proc.returncode == 0, proc.stdout
    shipped = re.findall(r"^changed: \[localhost\] => \(item=([^)]+)\)", proc.stdout, re.M)
    return [name for name in shipped if name in HELPER_FILES], helper / "src", proc.stdout


def test_ships_what_differs_and_only_that(tmp_path):
    # check mode on a node without the helper: every file would be shipped, none is
    planned, src, _log = _play(tmp_path, check=True)
    assert sorted(planned) == sorted(HELPER_FILES) and not src.exists()

    shipped, src, _log = _play(tmp_path)
    assert sorted(shipped) == sorted(HELPER_FILES)
    for name in HELPER_FILES:
        with open(os.path.join(FILES_DIR, name), "rb") as handle:
            assert (src / name).read_bytes() == handle.read()

    # the converged node: one read, nothing shipped, no directory task run
    shipped, _src, log = _play(tmp_path)
    assert shipped == [] and "changed=0" in log.split("PLAY RECAP")[1]
    assert "skipping: [localhost] => (item=%s)" % src in log

    # one file edited on the node, one removed: exactly those two come back
    edited, removed = HELPER_FILES[0], HELPER_FILES[-1]
    (src / edited).write_text("/* edited on the node */\n")
    (src / removed).unlink()
    shipped, _src, _log = _play(tmp_path)
    assert sorted(shipped) == sorted([edited, removed])
    with open(os.path.join(FILES_DIR, edited), "rb") as handle:
        assert (src / edited).read_bytes() == handle.read()
