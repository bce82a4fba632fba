"""What the operator reads after a run (issue #30, outcome 5): a JSON summary per run,
log_path by default, a Prometheus textfile a site can enable.

The callback (callback_plugins/gpudirect_run_summary.py) runs in real ansible-playbook
runs over local nodes; the recording and rendering (plugin_utils/gpudirect_run_summary.py)
are also tested alone.
"""
import configparser
import json
import os
import re
import subprocess
import sys
import textwrap

from conftest import ROOT
from hang_guard import HANG_GUARD_S

from ansible.module_utils import gpudirect_run_summary as rs  # noqa: E402

PLAY = textwrap.dedent("""\
    - name: A rolling batch's bookkeeping, as gpudirect_drain and gpudirect_verify set it
      hosts: all
      gather_facts: false
      tasks:
        - name: Drain
          ansible.builtin.set_fact: {gpudirect_drain_stage: drain, gpudirect_drain_drained: true}
        - name: A change
          ansible.builtin.command: "true"
          changed_when: true
        - name: Verify
          ansible.builtin.set_fact: {gpudirect_drain_stage: verify, gpudirect_verify_status: passed}
          when: inventory_hostname != 'gpu-c'
        - name: Verification failed on gpu-c
          ansible.builtin.set_fact:
            gpudirect_drain_stage: verify
            gpudirect_verify_status: failed
            gpudirect_drain_left_drained: {reason: "verification failed: 3 bytes differ", resume_command: "scontrol"}
            gpudirect_drain_notes: ["default boot kernel held on 6.1.0-40-amd64"]
          when: inventory_hostname == 'gpu-c'
        - name: Resume gpu-a
          ansible.builtin.set_fact: {gpudirect_drain_drained: false}
          when: inventory_hostname == 'gpu-a'
        - name: gpu-b fails
          ansible.builtin.fail: {msg: "dkms build of nvidia/580.95.05 failed"}
          when: inventory_hostname == 'gpu-b'
    """)


def run(tmp_path, env_extra):
    (tmp_path / "play.yml").write_text(PLAY)
    inv = tmp_path / "hosts.yml"
    inv.write_text(textwrap.dedent("""\
        all:
          hosts:
            gpu-a: {}
            gpu-b: {}
            gpu-c: {}
            gpu-lost: {ansible_connection: ssh, ansible_host: 127.0.0.1, ansible_port: 1, ansible_ssh_timeout: 3}
          vars:
            ansible_connection: local
            ansible_python_interpreter: %s
        """ % sys.executable))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_LOG_PATH=str(tmp_path / "ansible.log"), **env_extra)
    return subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(inv), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S)


def test_every_run_writes_a_summary_with_each_nodes_stages_verdict_and_drain(tmp_path):
    prom = tmp_path / "textfile" / "gpudirect.prom"
    p = run(tmp_path, {"GPUDIRECT_RUN_SUMMARY_DIR": str(tmp_path / "runs"),
                       "GPUDIRECT_RUN_SUMMARY_PROMETHEUS": str(prom)})
    assert p.returncode != 0   # gpu-b failed, gpu-lost unreachable
    line = re.search(r"^run summary: (\S+) \(4 node\(s\): ok 1, failed 1, unreachable 1, left_drained 1\)$",
                     p.stdout, re.M)
    assert line, p.stdout[-3000:]
    data = json.loads(open(line.group(1)).read())
    assert data == json.loads((tmp_path / "runs" / "latest.json").read_text())
    assert re.match(r"^\d{8}T\d{6}Z-play-\d+$", data["run_id"]) and data["playbooks"] == [str(tmp_path / "play.yml")]
    assert data["result"] == "failed"
    assert data["totals"] == {"nodes": 4, "changed_nodes": 3, "ok": 1, "failed": 1, "unreachable": 1,
                              "left_drained": 1, "held": 0, "skipped": 0, "drained": 4, "resumed": 1}
    a, b, c, lost = (data["nodes"][h] for h in ("gpu-a", "gpu-b", "gpu-c", "gpu-lost"))
    assert a["stages"] == ["drain", "verify"] and a["verify"] == "passed" and a["resumed"] and not a["still_drained"]
    assert a["verdict"] == "ok" and a["changed"] == 1
    assert b["verdict"] == "failed" and b["still_drained"]
    assert b["failed_task"] == {"task": "gpu-b fails", "msg": "dkms build of nvidia/580.95.05 failed"}
    assert c["verdict"] == "left_drained" and c["left_drained"] == "verification failed: 3 bytes differ"
    assert c["notes"] == ["default boot kernel held on 6.1.0-40-amd64"]
    # set_fact runs on the controller: the node was marked drained, then lost at its first command
    assert lost["verdict"] == "unreachable" and lost["stages"] == ["drain"] and lost["still_drained"]
    assert lost["failed_task"]["unreachable"] is True and lost["failed_task"]["task"] == "A change"
    text = prom.read_text()
    assert 'gpudirect_run_nodes{playbook="play.yml",verdict="failed"} 1' in text
    assert 'gpudirect_node_verification_passed{node="gpu-c"} 0' in text
    assert 'gpudirect_node_verification_passed{node="gpu-a"} 1' in text
    assert 'gpudirect_node_left_drained{node="gpu-b"} 1' in text and 'gpudirect_node_left_drained{node="gpu-a"} 0' in text
    assert 'gpudirect_run_success{playbook="play.yml"} 0' in text
    # no temporary file left beside it (written atomically)
    assert os.listdir(str(prom.parent)) == ["gpudirect.prom"]
    # and the run's output went to the log file too
    assert "dkms build of nvidia/580.95.05 failed" in (tmp_path / "ansible.log").read_text()


def test_an_unwritable_directory_warns_and_names_the_knob(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = run(tmp_path, {"GPUDIRECT_RUN_SUMMARY_DIR": str(blocker / "runs")})
    assert "cannot write the run summary" in p.stdout and "GPUDIRECT_RUN_SUMMARY_DIR" in p.stdout


def test_the_project_config_logs_and_writes_summaries_under_logs():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "ansible.cfg"))
    assert config["defaults"]["log_path"] == "logs/ansible.log"
    assert "gpudirect_run_summary" in config["defaults"]["callbacks_enabled"]
    # the directory exists in a plain clone (Ansible does not create log_path's directory)
    assert os.path.isfile(os.path.join(ROOT, "logs", ".gitignore"))


def test_summary_records_in_order_and_counts_a_resume_only_after_a_drain():
    s = rs.Summary(started=1795746000.0, controller="ops@ctl", ansible_version="2.19.14")
    s.playbook("site.yml")
    s.result("n1", "ok", facts={"gpudirect_drain_drained": False}, now=1795746001.0)   # not drained: no resume
    s.result("n1", "ok", facts={"gpudirect_drain_stage": "lock"}, now=1795746002.0)
    s.result("n1", "ok", facts={"gpudirect_drain_stage": "lock"}, now=1795746003.0)
    s.result("n1", "ok", changed=True, facts={"gpudirect_drain_stage": "drain", "gpudirect_drain_drained": "True"},
             now=1795746010.0)
    s.result("n1", "ok", facts={"gpudirect_drain_drained": False}, now=1795746070.0)
    s.result("n2", "ok", facts={"gpudirect_drain_out_before": True, "unrelated": 1}, now=1795746005.0)
    s.finish({"n1": {"failures": 0, "unreachable": 0}}, now=1795746080.0)
    d = s.as_dict()
    assert d["run_id"].startswith("20261127T") and d["duration_s"] == 80.0 and d["result"] == "ok"
    n1 = d["nodes"]["n1"]
    assert n1["stages"] == ["lock", "drain"] and n1["drained"] and n1["resumed"] and n1["duration_s"] == 69.0
    assert d["nodes"]["n2"]["out_of_service_before"] is True and d["nodes"]["n2"]["resumed"] is False
    assert "unrelated" not in json.dumps(d)
    # label values are escaped
    s.result('we"ird\\node', "ok", now=1795746071.0)
    assert 'node="we\\"ird\\\\node"' in rs.render_prometheus(s.as_dict())
