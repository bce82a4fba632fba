"""gpudirect_mlnx_ofed's removal of the OFED stack in the way, detached (issue #13, outcome 4): with
the controller's connection over a ConnectX netdev and the override knob on, the plan's
connection_guard.detach_removal runs the uninstaller in the background on the node, then
waits for the connection and collects its result, so a removal that resets the netdev
under the connection still finishes, and a failed one still fails the node. Run on this
machine with a stand-in uninstaller (the real one is /usr/sbin/ofed_uninstall.sh)."""

from conftest import play_on_localhost

PLAY = """\
- name: Remove the OFED stack as the plan says
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Read the OS family the removal tasks branch on
      ansible.builtin.setup:
        gather_subset: [min]

    - name: Remove
      ansible.builtin.include_role:
        name: gpudirect_mlnx_ofed
        tasks_from: remove
"""


def _plan(uninstaller, detach):
    return {"gpudirect_mlnx_ofed_plan": {"release_holds": [], "uninstaller": str(uninstaller), "remove_packages": [],
                               "connection_guard": {"detach_removal": detach}}}


def _uninstaller(tmp_path, rc):
    script = tmp_path / "ofed_uninstall.sh"
    # the real uninstaller takes a while and resets the netdevs; this one leaves a mark
    script.write_text("#!/bin/sh\nsleep 2\necho \"$@\" >%s\nexit %d\n" % (tmp_path / "ran", rc))
    script.chmod(0o755)
    return script


def test_a_detached_removal_finishes_and_the_role_waits_for_it(tmp_path):
    proc = play_on_localhost(tmp_path, PLAY, _plan(_uninstaller(tmp_path, 0), True))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "ran").read_text().strip() == "--force"
    assert "Run the OFED uninstaller in the background" in proc.stdout
    assert "Wait for the connection to come back after the removal of the OFED stack" in proc.stdout
    assert "Collect the result of the removal of the OFED stack" in proc.stdout


def test_a_detached_removal_that_fails_fails_the_node(tmp_path):
    proc = play_on_localhost(tmp_path, PLAY, _plan(_uninstaller(tmp_path, 3), True))
    assert proc.returncode != 0
    assert (tmp_path / "ran").exists()
    assert "fatal: [localhost]: FAILED!" in proc.stdout.split("Collect the result of the removal")[1]


def test_without_the_override_the_removal_runs_in_the_foreground(tmp_path):
    proc = play_on_localhost(tmp_path, PLAY, _plan(_uninstaller(tmp_path, 0), False))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "ran").read_text().strip() == "--force"
    assert "Wait for the connection to come back" not in proc.stdout
    assert "TASK [gpudirect_mlnx_ofed : Run the OFED uninstaller] ***" in proc.stdout
