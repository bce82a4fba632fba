"""roles/gpudirect_roce_qos on localhost: with nothing wanted the plan reads nothing and the role
says so; the boot configuration it writes lists, per port, the values the port exposes; the boot
script (files/gpudirect-roce-qos) sets them again on a fake /sys with the stand-in mlnx_qos, after
which the module's plan finds nothing to change (what a reboot does, without the reboot).
"""

import json
import os
import subprocess
import sys

from conftest import ROOT, play_on_localhost, role_tasks_play
from hang_guard import HANG_GUARD_S

ROLE = os.path.join(ROOT, "roles", "gpudirect_roce_qos")
STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "ofed", "qos", "mlnx_qos")


def test_nothing_wanted_reads_nothing_and_says_so(tmp_path):
    then = ("    - name: Show the plan\n      ansible.builtin.debug:\n"
            "        msg: \"PLAN={{ gpudirect_roce_qos_plan | to_json }}\"\n")
    done = play_on_localhost(tmp_path, role_tasks_play("gpudirect_roce_qos", "plan", then), {}, check=True)
    assert done.returncode == 0, done.stdout
    assert "Read the RoCE ports' QoS" in done.stdout and "skipping: [localhost]" in done.stdout
    plan = json.loads(done.stdout.split('"PLAN=', 1)[1].split('"\n', 1)[0].replace('\\"', '"'))
    assert plan == {"wanted": False, "changes": [], "disruption": [], "not_exposed": [], "ports": [],
                    "ports_skipped": [], "tool_missing": "",
                    "skip_reason": "no RoCE QoS value is wanted: no port read, nothing changed"}


def render_conf(tmp_path, plan, knobs):
    play = ("---\n- name: Render\n  hosts: localhost\n  connection: local\n  gather_facts: false\n"
            "  vars_files: [%s]\n  tasks:\n    - name: Render the boot configuration\n"
            "      ansible.builtin.template:\n        src: %s\n        dest: %s\n        mode: \"0644\"\n"
            % (os.path.join(ROLE, "defaults", "main.yml"), os.path.join(ROLE, "templates", "roce-qos.conf.j2"),
               tmp_path / "roce-qos.conf"))
    done = play_on_localhost(tmp_path, play, dict(knobs, gpudirect_roce_qos_plan=plan))
    assert done.returncode == 0, done.stdout
    return [line for line in (tmp_path / "roce-qos.conf").read_text().splitlines() if not line.startswith("#")]


KNOBS = {"gpudirect_roce_qos_trust": "dscp", "gpudirect_roce_qos_pfc_priorities": [3],
         "gpudirect_roce_qos_ecn_priorities": [3, 4], "gpudirect_roce_qos_cnp_dscp": 48,
         "gpudirect_roce_qos_cnp_802p_prio": 6, "gpudirect_roce_qos_mtu": 9000}
PLAN = {"ports": [{"netdev": "ens1f0np0", "not_exposed": {}},
                  {"netdev": "eth0", "not_exposed": {"trust": "x", "pfc": "x", "ecn_np": "x", "ecn_rp": "x",
                                                     "cnp_dscp": "x", "cnp_802p_prio": "x"}},
                  {"netdev": "eth1", "not_exposed": {"trust": "x", "pfc": "x", "ecn_np": "x", "ecn_rp": "x",
                                                     "cnp_dscp": "x", "cnp_802p_prio": "x", "mtu": "x"}}]}


def test_boot_configuration_lists_what_each_port_exposes(tmp_path):
    assert render_conf(tmp_path, PLAN, KNOBS) == [
        "ens1f0np0 trust=dscp pfc=0,0,0,1,0,0,0,0 mtu=9000 ecn=3,4 cnp_dscp=48 cnp_802p_prio=6",
        "eth0 mtu=9000",
    ]


def test_boot_script_sets_the_values_again(tmp_path):
    conf = tmp_path / "roce-qos.conf"
    conf.write_text("# header\nens1f0np0 trust=dscp pfc=0,0,0,1,0,0,0,0 mtu=9000 ecn=3 cnp_dscp=48\n")
    sysroot = tmp_path / "root"
    net = sysroot / "sys" / "class" / "net" / "ens1f0np0"
    for point in ("roce_np", "roce_rp"):
        (net / "ecn" / point / "enable").mkdir(parents=True)
        for prio in range(8):
            (net / "ecn" / point / "enable" / str(prio)).write_text("0\n")
    (net / "ecn" / "roce_np" / "cnp_dscp").write_text("0\n")
    (net / "mtu").write_text("1500\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(STANDIN, str(bindir / "mlnx_qos"))
    os.symlink(sys.executable, str(bindir / "python3"))
    (bindir / "ip").write_text("#!/bin/sh\necho \"$6\" > \"%s/sys/class/net/$4/mtu\"\n" % sysroot)
    (bindir / "ip").chmod(0o755)
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % bindir, STANDIN_MLNX_QOS_STATE=str(tmp_path / "run"),
               STANDIN_MLNX_QOS_SYSROOT=str(sysroot), GPUDIRECT_ROCE_QOS_SYSFS=str(sysroot / "sys"))
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["gpudirect-roce-qos: ens1f0np0: %s set" % kv for kv in
                                        ("trust=dscp", "pfc=0,0,0,1,0,0,0,0", "mtu=9000", "ecn=3", "cnp_dscp=48")]
    assert [(net / "ecn" / p / "enable" / str(i)).read_text().strip() for p in ("roce_np", "roce_rp")
            for i in range(8)] == ["0", "0", "0", "1", "0", "0", "0", "0"] * 2
    assert (net / "mtu").read_text().strip() == "9000"
    assert json.loads((tmp_path / "run" / "ens1f0np0.json").read_text()) == {"trust": "dscp",
                                                                            "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}
    # a port that never appears: reported, the others still set, exit 1
    conf.write_text("ens9 mtu=9000\n")
    env["GPUDIRECT_ROCE_QOS_WAIT"] = "0"
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)], env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 1
    assert done.stderr == "gpudirect-roce-qos: ens9: no such netdev after 0 s; left alone\n"
