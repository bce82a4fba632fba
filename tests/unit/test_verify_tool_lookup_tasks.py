"""roles/gpudirect_verify/tasks/gdrcopy.yml and dcgm.yml on this machine: GDRCopy's test
tools and dcgmi are looked up with one find over the tool directories, and the first
directory that holds a tool wins (as /usr/bin before /usr/local/bin). The directories
are temporary ones holding stand-in tools that print their own path."""

import json

from conftest import play_on_localhost

PLAYBOOK = """---
- name: The tool lookups
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: GDRCopy's tests
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: gdrcopy
    - name: DCGM's diagnostic
      ansible.builtin.include_role:
        name: gpudirect_verify
        tasks_from: dcgm
    - name: Write down what was found
      ansible.builtin.copy:
        dest: "{{ found_file }}"
        mode: "0644"
        content: "{{ {'gdrcopy': __gpudirect_verify_gdrcopy_tools, 'gdrcopy_missing': __gpudirect_verify_gdrcopy_missing,
                        'dcgmi': __gpudirect_verify_dcgmi, 'dcgm_missing': __gpudirect_verify_dcgm_missing,
                        'ran': [__gpudirect_verify_gdrcopy_sanity.cmd | default([]) | last | default(''),
                                __gpudirect_verify_gdrcopy_copybw.cmd | default([]) | last | default('')]} | to_json }}"
"""


def _tool(directory, name):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\necho \"$0\"\n")
    path.chmod(0o755)


def _play(tmp_path, **extra):
    found = tmp_path / "found.json"
    extra["found_file"] = str(found)
    proc = play_on_localhost(tmp_path, PLAYBOOK, extra)
    assert proc.returncode == 0, proc.stdout
    return json.loads(found.read_text())


def test_first_directory_holding_each_tool_wins(tmp_path):
    first, second = tmp_path / "bin", tmp_path / "local-bin"
    _tool(first, "gdrcopy_copybw")
    _tool(second, "gdrcopy_copybw")
    _tool(second, "gdrcopy_sanity")
    _tool(second, "dcgmi")
    found = _play(tmp_path, __gpudirect_verify_tool_dirs=[str(first), str(second), str(tmp_path / "absent")],
                  gpudirect_verify_dcgm_diag_level=1)
    assert found["gdrcopy"] == {"gdrcopy_sanity": str(second / "gdrcopy_sanity"),
                                "gdrcopy_copybw": str(first / "gdrcopy_copybw")}
    assert found["gdrcopy_missing"] == ""
    assert found["ran"] == [str(second / "gdrcopy_sanity"), str(first / "gdrcopy_copybw")]
    assert found["dcgmi"] == str(second / "dcgmi") and found["dcgm_missing"] == ""


def test_absent_tools_are_named_with_the_directories_looked_in(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    (empty / "gdrcopy_sanity.txt").write_text("not the tool\n")
    found = _play(tmp_path, __gpudirect_verify_tool_dirs=[str(empty)], gpudirect_verify_dcgm_diag_level=1)
    assert found["gdrcopy"] == {} and found["ran"] == ["", ""]
    assert found["gdrcopy_missing"].startswith("gdrcopy_sanity and gdrcopy_copybw are not installed (looked in %s;" % empty)
    assert found["dcgmi"] == "" and found["dcgm_missing"].startswith("dcgmi is not installed (looked in %s)" % empty)
