"""roles/gpudirect_roce_qos on localhost: with nothing wanted the plan reads nothing and the role
says so; a bad RDMA-CM knob fails validate.yml naming it, before anything is read; the boot
configuration it writes lists, per port, the values the port exposes (the RDMA-CM defaults with the
port's RDMA device); the boot script (files/gpudirect-roce-qos) sets them again on a fake /sys with
the stand-in mlnx_qos and a stand-in configfs, after which the module's plan finds nothing to change
(what a reboot does, without the reboot).
"""

import json
import os
import subprocess
import sys

import pytest

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
                    "ports_skipped": [], "tool_missing": "", "rdma_cm": {},
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


# ------------------------------------------------------------------ RDMA-CM defaults (issue #44, outcome 4)

# A value of the wrong type is refused by the role's argument spec (meta/argument_specs.yml), one out of range
# (or a boolean, which the spec's int takes) by tasks/validate.yml; either names the knob, before the module runs.
SPEC = "Validation of arguments failed:\nargument '%s' is of type str and we were unable to convert to %s"
VALIDATE = "gpudirect_roce_qos_dscp must be unset or a DSCP 0-63"


@pytest.mark.parametrize("knobs, said", [
    ({"gpudirect_roce_qos_dscp": 64}, [VALIDATE, "got 64;"]),
    ({"gpudirect_roce_qos_dscp": -1}, [VALIDATE, "got -1;"]),
    ({"gpudirect_roce_qos_dscp": True}, [VALIDATE, "got true;"]),
    ({"gpudirect_roce_qos_dscp": "26; reboot"}, [SPEC % ("gpudirect_roce_qos_dscp", "int")]),
    ({"gpudirect_roce_qos_dscp": 26, "gpudirect_roce_qos_rdma_cm": "sometimes"},
     [SPEC % ("gpudirect_roce_qos_rdma_cm", "bool")]),
])
def test_a_bad_rdma_cm_knob_fails_before_anything_is_read(tmp_path, knobs, said):
    done = play_on_localhost(tmp_path, role_tasks_play("gpudirect_roce_qos", "plan"), knobs, check=True)
    assert done.returncode != 0, done.stdout
    for text in said:
        assert text in done.stdout.replace("\\n", "\n"), done.stdout
    assert "Read the RoCE ports' QoS" not in done.stdout


def test_dscp_alone_with_rdma_cm_off_wants_nothing(tmp_path):
    then = ("    - name: Show the plan\n      ansible.builtin.debug:\n"
            "        msg: \"WANTED={{ gpudirect_roce_qos_plan.wanted }}\"\n")
    done = play_on_localhost(tmp_path, role_tasks_play("gpudirect_roce_qos", "plan", then),
                             {"gpudirect_roce_qos_dscp": "26", "gpudirect_roce_qos_rdma_cm": "false"}, check=True)
    assert done.returncode == 0, done.stdout
    assert '"WANTED=False"' in done.stdout


CM_PLAN = {"ports": [{"netdev": "ens1f0np0", "device": "mlx5_0", "port": 1, "not_exposed": {}},
                     {"netdev": "eth0", "device": "rxe0", "port": 1,
                      "not_exposed": {"trust": "x", "pfc": "x", "ecn_np": "x", "ecn_rp": "x", "cnp_dscp": "x",
                                      "cnp_802p_prio": "x"}},
                     {"netdev": "eth1", "device": "rxe1", "port": 1,
                      "not_exposed": {"rdma_cm_mode": "x", "rdma_cm_tos": "x", "mtu": "x"}}]}


def test_boot_configuration_has_the_rdma_cm_defaults_of_each_port(tmp_path):
    knobs = {"gpudirect_roce_qos_mtu": 9000, "gpudirect_roce_qos_dscp": 26}
    assert render_conf(tmp_path, CM_PLAN, knobs) == [
        "ens1f0np0 mtu=9000 rdma_cm_mode=mlx5_0:1:v2 rdma_cm_tos=mlx5_0:1:104",
        "eth0 mtu=9000 rdma_cm_mode=rxe0:1:v2 rdma_cm_tos=rxe0:1:104",
    ]
    off = render_conf(tmp_path, CM_PLAN, dict(knobs, gpudirect_roce_qos_rdma_cm=False))
    assert off == ["ens1f0np0 mtu=9000", "eth0 mtu=9000"]
    # from -e, a string: the same line
    assert render_conf(tmp_path, CM_PLAN, {"gpudirect_roce_qos_dscp": "46"})[0] == \
        "ens1f0np0 rdma_cm_mode=mlx5_0:1:v2 rdma_cm_tos=mlx5_0:1:184"


def _configfs_tools(tmp_path, sysroot):
    """PATH tools for the boot script on a fake tree: mountpoint/mount (configfs mounted once `mount` ran),
    modprobe rdma_cm (its configfs folder appears), and mkdir/rmdir that answer in rdma_cm's configfs as the
    kernel does (the group filled from the kernel's state under tmp_path/kernel; removed, written back), every
    other path to the real tools. Each call is logged in tmp_path/calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    cfg = sysroot / "sys" / "kernel" / "config"
    state = tmp_path / "kernel"
    log = tmp_path / "calls"
    tools = {
        "mountpoint": "[ -e %s/mounted ]" % tmp_path,
        "mount": "echo \"mount $*\" >> %s; touch %s/mounted" % (log, tmp_path),
        "modprobe": "echo \"modprobe $*\" >> %s; /bin/mkdir -p %s/rdma_cm" % (log, cfg),
        "mkdir": ("case \"$1\" in %s/rdma_cm/*) ;; *) exec /bin/mkdir \"$@\" ;; esac\n"
                  "dev=$(basename \"$1\"); [ -d %s/$dev ] || { echo \"mkdir: $1: No such device\" >&2; exit 1; }\n"
                  "echo \"mkdir $dev\" >> %s; /bin/mkdir \"$1\" && cp -r %s/$dev \"$1/ports\"" % (cfg, state, log, state)),
        "rmdir": ("case \"$1\" in %s/rdma_cm/*) ;; *) exec /bin/rmdir \"$@\" ;; esac\n"
                  "dev=$(basename \"$1\"); echo \"rmdir $dev\" >> %s; rm -rf %s/$dev; cp -r \"$1/ports\" %s/$dev; "
                  "rm -rf \"$1\"" % (cfg, log, state, state)),
    }
    for name, body in tools.items():
        (bindir / name).write_text("#!/bin/sh\n%s\n" % body)
        (bindir / name).chmod(0o755)
    for dev in ("mlx5_0", "rxe0"):
        (state / dev / "1").mkdir(parents=True)
        (state / dev / "1" / "default_roce_mode").write_text("IB/RoCE v1\n" if dev == "mlx5_0" else "RoCE v2\n")
        (state / dev / "1" / "default_roce_tos").write_text("0\n")
        (sysroot / "sys" / "class" / "infiniband" / dev).mkdir(parents=True)
    for netdev in ("ens1f0np0", "eth0"):
        (sysroot / "sys" / "class" / "net" / netdev).mkdir(parents=True)
    cfg.mkdir(parents=True)
    return dict(os.environ, PATH="%s:/usr/bin:/bin" % bindir, GPUDIRECT_ROCE_QOS_SYSFS=str(sysroot / "sys"),
                GPUDIRECT_ROCE_QOS_WAIT="0"), state, log


def test_boot_script_mounts_loads_and_sets_the_rdma_cm_defaults(tmp_path):
    sysroot = tmp_path / "root"
    env, state, log = _configfs_tools(tmp_path, sysroot)
    conf = tmp_path / "roce-qos.conf"
    conf.write_text("ens1f0np0 rdma_cm_mode=mlx5_0:1:v2 rdma_cm_tos=mlx5_0:1:104\n"
                    "eth0 rdma_cm_mode=rxe0:1:v2 rdma_cm_tos=rxe0:1:104\n")
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)], env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpudirect-roce-qos: ens1f0np0: rdma_cm_mode=mlx5_0:1:v2 set", "gpudirect-roce-qos: ens1f0np0: "
        "rdma_cm_tos=mlx5_0:1:104 set", "gpudirect-roce-qos: eth0: rdma_cm_mode=rxe0:1:v2 set",
        "gpudirect-roce-qos: eth0: rdma_cm_tos=rxe0:1:104 set"]
    for dev in ("mlx5_0", "rxe0"):
        assert (state / dev / "1" / "default_roce_mode").read_text() == "RoCE v2\n"
        assert (state / dev / "1" / "default_roce_tos").read_text() == "104\n"
    calls = log.read_text().splitlines()
    # configfs mounted and rdma_cm loaded once, first; every group made for its write and removed again
    assert calls[:2] == ["mount -t configfs configfs %s/sys/kernel/config" % sysroot, "modprobe rdma_cm"]
    assert calls[2:] == ["mkdir mlx5_0", "rmdir mlx5_0"] * 2 + ["mkdir rxe0", "rmdir rxe0"] * 2
    assert os.listdir(str(sysroot / "sys/kernel/config/rdma_cm")) == []


def test_boot_script_leaves_a_group_it_did_not_make_and_names_a_missing_device(tmp_path):
    sysroot = tmp_path / "root"
    env, state, log = _configfs_tools(tmp_path, sysroot)
    # configfs mounted, rdma_cm loaded, and an admin's group for mlx5_0 (made with the kernel's mkdir)
    (tmp_path / "mounted").touch()
    (sysroot / "sys/kernel/config/rdma_cm").mkdir()
    subprocess.run(["mkdir", str(sysroot / "sys/kernel/config/rdma_cm/mlx5_0")], env=env, check=True)
    conf = tmp_path / "roce-qos.conf"
    conf.write_text("ens1f0np0 rdma_cm_tos=mlx5_0:1:104\neth0 rdma_cm_tos=mlx5_9:1:104\n")
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)], env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 1
    assert "gpudirect-roce-qos: ens1f0np0: rdma_cm_tos=mlx5_0:1:104 set" in done.stdout.splitlines()
    assert (sysroot / "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "104\n"
    assert "gpudirect-roce-qos: mlx5_9: no such RDMA device after 0 s" in done.stderr
    assert "gpudirect-roce-qos: eth0: setting rdma_cm_tos=mlx5_9:1:104 failed" in done.stderr
    assert [c for c in log.read_text().splitlines() if c.startswith(("mount", "modprobe", "rmdir"))] == []


# ------------------------------------------------------------------ the role's own tasks with only gpudirect_roce_qos_dscp
# The rdma VM scenario's node sets gpudirect_roce_qos_dscp: 26 and no other gpudirect_roce_qos_* value. The role's
# tasks once passed every knob as "{{ gpudirect_roce_qos_<knob> }}": an unset trust reached the module as None, which
# ansible-core 2.19 checks against trust's choices (pcp, dscp) and fails the plan ("value of trust must be one of: pcp,
# dscp, got: None"). Here the role's plan and apply run through ansible-playbook, the module pointed at a fake host by
# module_defaults: mlx5_0 port 1 (RoCE, ens1f0np0) whose rdma_cm configfs group is already there (an admin's: read
# and written as it is, never made or removed, so a plain directory serves), MLNX_OFED's start values IB/RoCE v1 and
# ToS 0. mlnx_qos is a stand-in that logs every call: trust and PFC are not wanted, so it must never run.

ROLE_PLAY = """---
- name: gpudirect_roce_qos's %(tasks)s tasks on a fake host
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpudirect_roce_qos:
      root: %(root)s
  tasks:
    - name: The role's %(tasks)s tasks
      ansible.builtin.include_role:
        name: gpudirect_roce_qos
        tasks_from: %(tasks)s
    - name: Keep the plan
      ansible.builtin.copy:
        content: "{{ gpudirect_roce_qos_plan | to_json }}"
        dest: %(out)s
        mode: "0644"
      check_mode: false
"""


def _dscp_only_host(tmp_path):
    root = tmp_path / "root"
    ib = root / "sys/class/infiniband/mlx5_0/ports/1"
    (ib / "gid_attrs/ndevs").mkdir(parents=True)
    (ib / "link_layer").write_text("Ethernet\n")
    (ib / "gid_attrs/ndevs/0").write_text("ens1f0np0\n")
    (root / "sys/class/net/ens1f0np0").mkdir(parents=True)
    (root / "sys/class/net/ens1f0np0/mtu").write_text("1500\n")
    (root / "sys/module/rdma_cm").mkdir(parents=True)
    (root / "proc").mkdir()
    (root / "proc/mounts").write_text("configfs /sys/kernel/config configfs rw,nosuid,nodev,noexec,relatime 0 0\n")
    group = root / "sys/kernel/config/rdma_cm/mlx5_0/ports/1"
    group.mkdir(parents=True)
    (group / "default_roce_mode").write_text("IB/RoCE v1\n")
    (group / "default_roce_tos").write_text("0\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mlnx_qos").write_text("#!/bin/sh\necho \"mlnx_qos $*\" >> %s\nexit 1\n" % (tmp_path / "mlnx_qos.calls"))
    (bindir / "mlnx_qos").chmod(0o755)
    return root, group, {"PATH": "%s:%s" % (bindir, os.environ["PATH"])}


def _role_run(tmp_path, root, tasks, extra, env, check=False):
    out = tmp_path / ("plan-%s.json" % tasks)
    done = play_on_localhost(tmp_path, ROLE_PLAY % {"tasks": tasks, "root": root, "out": out}, extra, check=check,
                             env_extra=env)
    assert done.returncode == 0, done.stdout[-4000:]
    return done, json.loads(out.read_text())


def test_dscp_alone_makes_the_plan_without_trust_or_any_other_knob(tmp_path):
    root, group, env = _dscp_only_host(tmp_path)
    done, plan = _role_run(tmp_path, root, "plan", {"gpudirect_roce_qos_dscp": 26}, env, check=True)
    assert "value of trust must be one of" not in done.stdout
    assert plan["wanted"] is True and plan["skip_reason"] == "" and plan["tool_missing"] == ""
    assert plan["rdma_cm"] == {"wanted": {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104}, "ready": True, "steps": [],
                               "done": [], "problem": ""}
    [port] = plan["ports"]
    assert (port["device"], port["port"], port["netdev"]) == ("mlx5_0", 1, "ens1f0np0")
    # only what gpudirect_roce_qos_dscp asks for is wanted and read: no trust, PFC, ECN, CNP or MTU
    assert port["wanted"] == {"dscp": 26, "rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104}
    assert port["current"] == {"rdma_cm_mode": "IB/RoCE v1", "rdma_cm_tos": 0}
    assert port["to_set"] == {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104} and port["not_exposed"] == {}
    assert plan["changes"] == ["ens1f0np0 (mlx5_0 port 1): set RDMA-CM default RoCE mode RoCE v2, RDMA-CM default ToS "
                               "104 (DSCP 26)"]
    assert plan["disruption"] == [] and plan["not_exposed"] == []
    assert not (tmp_path / "mlnx_qos.calls").exists()                  # trust neither read nor set
    assert (group / "default_roce_mode").read_text() == "IB/RoCE v1\n"  # the plan wrote nothing


def test_dscp_alone_applies_through_the_role_and_the_boot_line_has_only_the_rdma_cm_defaults(tmp_path):
    root, group, env = _dscp_only_host(tmp_path)
    # the role's main tasks: plan, apply, the boot files (gpudirect_roce_qos_persist false: only removals, of paths
    # under tmp_path, so nothing of this machine's systemd is touched), the plan again
    paths = dict(("__gpudirect_roce_qos_%s_path" % name, str(tmp_path / name)) for name in ("conf", "script", "unit"))
    done, plan = _role_run(tmp_path, root, "main", dict(paths, gpudirect_roce_qos_dscp=26,
                                                        gpudirect_roce_qos_persist=False), env)
    assert "gpudirect_roce_qos : Set the RoCE QoS values that differ" in done.stdout
    assert (group / "default_roce_mode").read_text() == "RoCE v2\n"
    assert (group / "default_roce_tos").read_text() == "104\n"
    assert plan["changes"] == [] and plan["ports"][0]["current"] == {"rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 104}
    assert not (tmp_path / "mlnx_qos.calls").exists()
    # the boot configuration the persist step writes from this plan: the RDMA-CM defaults, nothing unset
    assert render_conf(tmp_path, plan, {"gpudirect_roce_qos_dscp": 26}) == [
        "ens1f0np0 rdma_cm_mode=mlx5_0:1:v2 rdma_cm_tos=mlx5_0:1:104"]


@pytest.mark.parametrize("knobs, wanted", [
    # 0 is a value, not "unset": PFC off everywhere, DSCP 0 (ToS 0), CNP DSCP and 802.1p priority 0
    ({"gpudirect_roce_qos_dscp": 0, "gpudirect_roce_qos_cnp_dscp": 0, "gpudirect_roce_qos_ecn_priorities": []},
     {"dscp": 0, "cnp_dscp": 0, "ecn_priorities": [], "rdma_cm_mode": "RoCE v2", "rdma_cm_tos": 0}),
    ({"gpudirect_roce_qos_cnp_802p_prio": 0}, {"cnp_802p_prio": 0}),
])
def test_a_knob_set_to_0_or_empty_is_passed_not_omitted(tmp_path, knobs, wanted):
    root, _group, env = _dscp_only_host(tmp_path)
    _done, plan = _role_run(tmp_path, root, "plan", knobs, env, check=True)
    assert plan["wanted"] is True and plan["ports"][0]["wanted"] == wanted


def test_boot_script_waits_for_rdma_cm_to_know_a_device_that_just_appeared(tmp_path):
    """The device's sysfs folder is there a moment before rdma_cm knows it (ib_register_device adds its clients
    last): the group's mkdir says ENODEV, then works. soft-RoCE's rxe0 is made by a unit that runs alongside this
    one."""
    sysroot = tmp_path / "root"
    env, state, log = _configfs_tools(tmp_path, sysroot)
    (tmp_path / "mounted").touch()
    (sysroot / "sys/kernel/config/rdma_cm").mkdir()
    bindir = tmp_path / "bin"
    os.rename(str(bindir / "mkdir"), str(bindir / "mkdir.kernel"))
    (bindir / "mkdir").write_text(
        "#!/bin/sh\ncase \"$1\" in */rdma_cm/*) if [ ! -e %s/known ]; then touch %s/known; "
        "echo \"mkdir: cannot create directory '$1': No such device\" >&2; exit 1; fi ;; esac\nexec %s \"$@\"\n"
        % (tmp_path, tmp_path, bindir / "mkdir.kernel"))
    (bindir / "mkdir").chmod(0o755)
    conf = tmp_path / "roce-qos.conf"
    conf.write_text("eth0 rdma_cm_tos=rxe0:1:104\n")
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)],
                          env=dict(env, GPUDIRECT_ROCE_QOS_WAIT="3"), capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == "gpudirect-roce-qos: eth0: rdma_cm_tos=rxe0:1:104 set\n"
    assert (state / "rxe0" / "1" / "default_roce_tos").read_text() == "104\n"
    assert log.read_text().splitlines() == ["mkdir rxe0", "rmdir rxe0"]
    # rdma_cm never learns of it: the kernel's words, after the retries, and the value is reported not set
    os.remove(str(tmp_path / "known"))
    (bindir / "mkdir").write_text("#!/bin/sh\ncase \"$1\" in */rdma_cm/*) echo \"mkdir: cannot create directory "
                                  "'$1': No such device\" >&2; exit 1 ;; esac\nexec /bin/mkdir \"$@\"\n")
    done = subprocess.run(["sh", os.path.join(ROLE, "files", "gpudirect-roce-qos"), str(conf)],
                          env=dict(env, GPUDIRECT_ROCE_QOS_WAIT="1"), capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 1
    assert done.stderr == ("mkdir: cannot create directory '%s/sys/kernel/config/rdma_cm/rxe0': No such device\n"
                           "gpudirect-roce-qos: eth0: setting rdma_cm_tos=rxe0:1:104 failed\n" % sysroot)
