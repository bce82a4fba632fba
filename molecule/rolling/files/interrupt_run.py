#!/usr/bin/env python3
"""The rolling scenario's "stop" run: a campaign cut off mid-batch, as on a real cluster.

    interrupt_run.py STATE_DIR OUT_DIR STOP_NODE FIRST_ARGV_JSON SECOND_ARGV_JSON

1. Starts the first controller (FIRST_ARGV_JSON, an ansible-playbook argv list) in its own
   session, its output in OUT_DIR/first-output.txt.
2. Waits until the fake scheduler's log (STATE_DIR/log) shows a batch of two nodes disrupted
   and the stand-in slow step (rolling_slow: `sleep`) runs in both containers: mid-batch.
3. Runs a second controller (SECOND_ARGV_JSON) on the same nodes, which the fleet lock must
   refuse; its output in OUT_DIR/second-output.txt.
4. Stops STOP_NODE's container (podman stop), as a node that loses power mid-batch.
5. Interrupts the first controller as Ctrl-C does (SIGINT to its process group) and waits
   for it to end.
Writes OUT_DIR/stop.json ({first_rc, second_rc, batch, stopped}) and exits 0 when every step
happened; check_rolling.py judges what the runs did.

    interrupt_run.py --kill STATE_DIR NODE OUT_DIR ARGV_JSON

The slurm scenario's crash (molecule/slurm): starts ARGV_JSON in its own session, its output in
OUT_DIR/crash-output.txt; once STATE_DIR/log says NODE was disrupted and the slow step runs on
it, kills the whole process group with SIGKILL, as a controller that loses power stops: no
rescue, no report, no lock released. Writes OUT_DIR/crash.json ({rc, killed, node}) and exits 0
when the kill came mid-batch, 1 when the run ended or never reached NODE within 300 s.
Standard library only.
"""

import json
import os
import signal
import subprocess
import sys
import time


def _disrupted(state):
    try:
        with open(os.path.join(state, "log")) as handle:
            return [line.split()[2] for line in handle if len(line.split()) >= 3 and line.split()[1] == "disrupt"]
    except FileNotFoundError:
        return []


def _sleeping(node):
    return subprocess.run(["podman", "exec", node, "pgrep", "-x", "sleep"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def kill(argv):
    """--kill STATE_DIR NODE OUT_DIR ARGV_JSON: SIGKILL the run once NODE works in its slow step."""
    if len(argv) != 6:
        sys.exit(__doc__)
    state, node, out, run_argv = argv[2], argv[3], argv[4], json.loads(argv[5])
    os.makedirs(out, exist_ok=True)
    killed = False
    with open(os.path.join(out, "crash-output.txt"), "w") as output:
        run = subprocess.Popen(run_argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline and run.poll() is None:
            if node in _disrupted(state) and _sleeping(node):
                os.killpg(run.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(1)
        if run.poll() is None and not killed:
            os.killpg(run.pid, signal.SIGKILL)
        rc = run.wait()
    with open(os.path.join(out, "crash.json"), "w") as handle:
        json.dump({"rc": rc, "killed": killed, "node": node}, handle)
    return 0 if killed else 1


def main(argv):
    if argv[1:2] == ["--kill"]:
        return kill(argv)
    if len(argv) != 6:
        sys.exit(__doc__)
    state, out, stop_node = argv[1], argv[2], argv[3]
    first_argv, second_argv = json.loads(argv[4]), json.loads(argv[5])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "first-output.txt"), "w") as first_out:
        first = subprocess.Popen(first_argv, stdout=first_out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 300
        batch = []
        while time.time() < deadline and first.poll() is None:
            batch = _disrupted(state)
            if len(batch) >= 2 and all(_sleeping(node) for node in batch[:2]):
                break
            time.sleep(0.5)
        else:
            first.kill()
            first.wait()
            sys.exit("the first run (rc %s) never had a batch of two nodes in its slow disruptive step within 300 s; "
                     "nodes disrupted: %s; see %s" % (first.returncode, batch, first_out.name))
        second = subprocess.run(second_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        with open(os.path.join(out, "second-output.txt"), "w") as second_out:
            second_out.write(second.stdout)
        subprocess.run(["podman", "stop", "-t", "5", stop_node], check=True, stdout=subprocess.DEVNULL)
        os.killpg(first.pid, signal.SIGINT)
        try:
            first.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            sys.exit("the first run did not end within 120 s of SIGINT (killed); see %s" % first_out.name)
    summary = {"first_rc": first.returncode, "second_rc": second.returncode, "batch": batch[:2], "stopped": stop_node}
    with open(os.path.join(out, "stop.json"), "w") as handle:
        json.dump(summary, handle)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
