"""The gpudirect_peermem role acting on a given plan, in check mode, on this machine.

A plan given as an extra var (``gpudirect_peermem_plan``) wins over the one the role makes
again, so the role acts on it. Here the plan is the legacy nv_peer_mem path on a host where
nv_peer_mem is not built yet (driver < R470): in check mode the role must change
nothing and say what it would build. The role's internal paths point into a temporary
directory, so a check mode that wrote anything would show there, not on this machine.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

from conftest import ROOT
from hang_guard import HANG_GUARD_S

PLAYBOOK = """---
- name: gpudirect_peermem on a given plan
  hosts: localhost
  connection: local
  gather_facts: true
  gather_subset: [min]
  roles:
    - role: gpudirect_peermem
"""


def _plan(tmp_path):
    return {
        "path": "nv_peer_mem", "mechanism": "nv_peer_mem", "ok": True, "provisional": False,
        "reasons": ["nv_peer_mem: driver 460.106.00 < R470", "MLNX_OFED_LINUX-5.4-3.6.8.1 provides the peer-memory API"],
        "changes": ["build and install the nv_peer_mem packages from gpudirect_peermem_nv_peer_mem_src"],
        "disruption": [], "load": "nv_peer_mem", "unload": [], "boot": "service",
        "remove_files": [str(tmp_path / "gpudirect-nvidia-peermem.conf")], "stop_nv_peer_mem_service": False,
        "build_nv_peer_mem": True, "dmabuf": {"ok": False, "reasons": ["driver 460.106.00 < 515"]},
        "found": {"kernel": "4.18.0-553.el8_10.x86_64", "driver": {"version": "460.106.00"}},
    }


def _run_check(tmp_path, **more):
    """The role in check mode on the nv_peer_mem plan; (rc, log, build dir, nv_peer_mem.conf)."""
    source = tmp_path / "nv_peer_memory-1.3-0.tar.gz"
    with tarfile.open(source, "w:gz") as tar:
        data = b"Version: 1.3\n"
        info = tarfile.TarInfo("nv_peer_memory-1.3-0/nvidia_peer_memory.spec")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    checksum = "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()
    (tmp_path / "gpudirect-nvidia-peermem.conf").write_text("nvidia_peermem\n")
    build, conf = tmp_path / "build", tmp_path / "infiniband" / "nv_peer_mem.conf"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    extra = {"gpudirect_peermem_plan": _plan(tmp_path), "gpudirect_peermem_mechanism": "nv_peer_mem",
             "gpudirect_peermem_nv_peer_mem_src": "file://" + str(source),
             "gpudirect_peermem_nv_peer_mem_checksum": checksum,
             "__gpudirect_peermem_build_dir": str(build), "__gpudirect_peermem_nv_conf": str(conf)}
    extra.update(more)
    # the role plans again on this machine: its modinfo answers as kmod's does for a module
    # that is not there (this controller may have no kmod at all)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "modinfo").write_text('#!/bin/sh\necho "modinfo: ERROR: Module $5 not found." >&2\nexit 1\n')
    (fake_bin / "modinfo").chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ.get("PATH", "")), ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ROLES_PATH=os.path.join(ROOT, "roles"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_INVENTORY_UNPARSED_WARNING="False", ANSIBLE_LOCALHOST_WARNING="False")
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "--check", "--diff",
                           "-e", json.dumps(extra), "-e", "ansible_python_interpreter=" + sys.executable,
                           str(playbook)],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=False)
    return proc.returncode, proc.stdout, build, conf, source


def test_nv_peer_mem_build_in_check_mode_changes_nothing_and_says_what(tmp_path):
    rc, log, build, conf, source = _run_check(tmp_path)
    assert rc == 0, log
    # the role plans again (as in every stage), but a plan given as an extra var wins over the
    # registered one, so the tasks act on the given nv_peer_mem plan
    assert "TASK [gpudirect_peermem : Plan the peer-memory path]" in log
    # says what it would build, from where
    assert "nv_peer_mem is not built for 4.18.0-553.el8_10.x86_64: building" in log
    assert "file://" + str(source) in log
    # the build commands do not run; the service the packages would bring is not touched
    for task in ("Build and install the Debian packages", "Build and install the RPM packages",
                 "Start nv_peer_mem now and at boot"):
        after = log.split("TASK [gpudirect_peermem : %s]" % task, 1)[1].split("TASK [", 1)[0]
        assert "skipping" in after and "changed:" not in after, (task, after)
    # and nothing changed on disk
    assert not build.exists() and not conf.exists()
    assert (tmp_path / "gpudirect-nvidia-peermem.conf").exists()
    recap = [line for line in log.splitlines() if line.startswith("localhost ")][-1]
    assert "failed=0" in recap
    # --diff comes from the modules: the ONBOOT line and the removed file are shown
    assert "+ONBOOT=yes" in log


def test_nv_peer_mem_waiting_for_the_enrolment_is_enabled_not_started_and_says_why(tmp_path):
    # gpudirect_dkms signed the chain with a certificate the running kernel does not trust yet
    # (tests/unit/test_dkms_sign_tasks.py): starting the service would fail "Key was rejected"
    rc, log, _build, _conf, _source = _run_check(tmp_path, gpudirect_dkms_signing_awaits_enrolment=True)
    assert rc == 0, log
    flat = " ".join(log.split())
    assert ("nv_peer_mem: the chain is signed by a certificate this kernel does not trust until it is enrolled "
            "(gpudirect_dkms): the service loads it at the boot after the enrolment") in flat
