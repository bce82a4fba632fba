"""The harness's HTTP servers: where the scenarios reach them and who stops them.

- The rdma scenario's node (and kernel_update's and secureboot's, which share its host_vars)
  reaches the stand-in vendor repositories on the port ``GPUDIRECT_STANDIN_PORT`` gives
  ``serve.sh``: a suite or demo already on 8765 must not send a second one's node there.
- ``scripts/test.sh`` stops, when it ends, the servers it found stopped when it began, and
  leaves alone the ones that were serving (a demo's or another suite's).
"""
import os
import socket
import subprocess
import textwrap

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
from conftest import ROOT
from hang_guard import HANG_GUARD_S

HOST_VARS = os.path.join(ROOT, "molecule", "rdma", "host_vars", "rdma-node1.yml")


def rendered_host_vars(monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    init_plugin_loader()
    with open(HOST_VARS, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    # a file Ansible loads from the project is trusted as a template (ansible-core 2.19)
    data = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in data.items()}
    templar = Templar(loader=DataLoader(), variables=data)
    keys = ("gpudirect_mlnx_ofed_repo_base_url", "gpudirect_mlnx_ofed_repo_key_url",
            "gpudirect_nvidia_driver_repo_base_url", "gpudirect_nvidia_driver_repo_key_url", "standin_keys_dir")
    return {key: templar.template(data[key]) for key in keys}


def test_the_rdma_node_reaches_the_stand_in_on_the_port_serve_sh_uses(monkeypatch):
    moved = rendered_host_vars(monkeypatch, GPUDIRECT_STANDIN_PORT="9875", GPUDIRECT_CACHE="/c")
    assert moved["gpudirect_mlnx_ofed_repo_base_url"] == "http://10.0.2.2:9875/public/repo/doca"
    assert moved["gpudirect_nvidia_driver_repo_key_url"] == "http://10.0.2.2:9875/keys/cuda-archive-keyring.asc"
    assert moved["standin_keys_dir"].strip() == "/c/standin-repo/serve-9875.keys"
    # serve.sh names its state and keys by the same port
    serve = open(os.path.join(ROOT, "tests", "harness", "standin_repo", "serve.sh"), encoding="utf-8").read()
    assert "port=${2:-${GPUDIRECT_STANDIN_PORT:-8765}}" in serve


def test_the_rdma_node_uses_8765_when_no_port_is_given(monkeypatch):
    monkeypatch.delenv("GPUDIRECT_STANDIN_PORT", raising=False)
    default = rendered_host_vars(monkeypatch, GPUDIRECT_CACHE="/c")
    assert default["gpudirect_mlnx_ofed_repo_key_url"] == "http://10.0.2.2:8765/keys/doca-archive-keyring.asc"
    assert default["standin_keys_dir"].strip() == "/c/standin-repo/serve-8765.keys"


def test_no_scenario_file_names_a_harness_port_outside_a_comment_or_task_name():
    found = []
    for top, _dirs, files in os.walk(os.path.join(ROOT, "molecule")):
        for name in files:
            if not name.endswith((".yml", ".yaml")):
                continue
            path = os.path.join(top, name)
            for number, line in enumerate(open(path, encoding="utf-8"), 1):
                text = line.split("#", 1)[0]
                if text.lstrip().startswith("- name:"):
                    continue
                for port in ("8765", "8766", "8767"):
                    if port in text and "or '%s'" % port not in text:
                        found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert found == []


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# the block of scripts/test.sh from its server list to its EXIT trap, run in a fake ROOT
# whose serve.sh, kernel_repo.py and debian_mirror.py stop the listener of their port
# (its pid in pid-PORT) and log their arguments; LATER: the ports the run itself starts
BLOCK = textwrap.dedent("""\
    set -uo pipefail
    ROOT=$PWD
    eval "$(sed -n '/^harness_servers=(/,/^trap stop_servers EXIT/p' "$TEST_SH")"
    for port in $LATER; do
      python3 listener.py "$port" >/dev/null 2>&1 & echo $! >"pid-$port"
      until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
    done
""")

LISTENER = textwrap.dedent("""\
    import socket, sys
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(8)
    while True:
        s.accept()[0].close()
""")

STOP = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, signal, sys
    port = [a for a in sys.argv[1:] if a.isdigit()][-1]
    with open(os.path.join(os.environ["FAKE_ROOT"], "stops"), "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
    os.kill(int(open(os.path.join(os.environ["FAKE_ROOT"], "pid-" + port)).read()), signal.SIGTERM)
""")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def fake_tree(tmp_path):
    """The listener script and the stand-in stop commands under ``tmp_path`` (the fake ROOT)."""
    (tmp_path / "listener.py").write_text(LISTENER)
    for rel in ("tests/harness/standin_repo/serve.sh", "tests/harness/vm/kernel_repo.py",
                "tests/harness/vm/debian_mirror.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(STOP)
        path.chmod(0o755)


def run_block(tmp_path, standin, kernel, slim):
    """The server block of scripts/test.sh in the fake ROOT; the kernel and slim servers start during it."""
    env = dict(os.environ, TEST_SH=os.path.join(ROOT, "scripts", "test.sh"), FAKE_ROOT=str(tmp_path),
               GPUDIRECT_CACHE=str(tmp_path / "cache"), LATER="%d %d" % (kernel, slim),
               GPUDIRECT_STANDIN_PORT=str(standin), GPUDIRECT_KERNEL_REPO_PORT=str(kernel),
               GPUDIRECT_DEBIAN_SLIM_PORT=str(slim))
    return subprocess.run(["bash", "-c", BLOCK], cwd=tmp_path, env=env, timeout=HANG_GUARD_S,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def kill_started(tmp_path, ports):
    """Stop the listeners the block started that are still up (pid-PORT files)."""
    for port in ports:
        pidfile = tmp_path / ("pid-%d" % port)
        if pidfile.exists():
            subprocess.run(["kill", pidfile.read_text().strip()], check=False, stderr=subprocess.DEVNULL)


def test_the_suite_stops_the_servers_it_started_and_leaves_the_others(tmp_path):
    # a suite that was killed with -9 left its note: a pid that is gone is no user
    (tmp_path / "cache" / "harness-users").mkdir(parents=True)
    (tmp_path / "cache" / "harness-users" / "999999999").write_text("/gone\n")
    standin, kernel, slim = free_port(), free_port(), free_port()
    fake_tree(tmp_path)
    # the stand-in repository was serving before the suite began (a demo's)
    before = subprocess.Popen(["python3", str(tmp_path / "listener.py"), str(standin)])
    (tmp_path / ("pid-%d" % standin)).write_text(str(before.pid))
    try:
        for _ in range(200):
            if answers(standin):
                break
            subprocess.run(["sleep", "0.05"], check=True)
        proc = run_block(tmp_path, standin, kernel, slim)
        assert proc.returncode == 0, proc.stdout
        stops = (tmp_path / "stops").read_text().splitlines() if (tmp_path / "stops").exists() else []
        # kernel_repo.py stop PORT, debian_mirror.py stop --port PORT; never serve.sh
        assert sorted(stops) == sorted(["stop %d" % kernel, "stop --port %d" % slim]), proc.stdout
        for port in (kernel, slim):
            assert "stopped the harness server this run started on 127.0.0.1:%d" % port in proc.stdout
        assert before.poll() is None and answers(standin)
    finally:
        before.kill()
        kill_started(tmp_path, (kernel, slim))


def test_a_suite_leaves_the_servers_to_another_suite_still_running(tmp_path):
    kernel, slim = free_port(), free_port()
    standin = free_port()
    fake_tree(tmp_path)
    users = tmp_path / "cache" / "harness-users"
    users.mkdir(parents=True)
    # another suite, started after this one's servers came up: a live scripts/test.sh
    other = subprocess.Popen(["bash", "-c", "exec -a scripts/test.sh sleep 600"])
    (users / str(other.pid)).write_text("/elsewhere\n")
    try:
        proc = run_block(tmp_path, standin, kernel, slim)
        assert proc.returncode == 0, proc.stdout
        assert not (tmp_path / "stops").exists(), proc.stdout
        assert "left running: another suite (pid %d) uses them" % other.pid in proc.stdout
        assert answers(kernel) and answers(slim)
        # this suite's own note is gone, the other's stays
        assert sorted(p.name for p in users.iterdir()) == [str(other.pid)]
    finally:
        other.kill()
        kill_started(tmp_path, (kernel, slim))
