"""gpudirect_reboot after_boot (issue #13 outcome 7, #14 outcome 5): a post-reboot check
that fails removes the node's converged-state record, so the next run runs every stage.

The real task file roles/gpudirect_reboot/tasks/after_boot.yml runs with ansible-playbook
on a local node. ``systemctl`` and ``journalctl`` are stand-ins on PATH that print what
systemd prints (``systemctl list-units --state=failed --plain --no-legend``: unit, load,
active, sub, description; systemd's own format); gpudirect_state's ``forget`` entry point
is a stand-in that logs, since the real one writes under /var/lib/gpudirect.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PLAY = """\
- name: After-boot checks
  hosts: node
  gather_facts: false
  tasks:
    - name: Run the post-reboot checks
      ansible.builtin.include_role:
        name: gpudirect_reboot
        tasks_from: after_boot
"""


def _project(tmp_path, failed_units, wanted_args=None):
    (tmp_path / "roles" / "gpudirect_state" / "tasks").mkdir(parents=True)
    os.symlink(os.path.join(ROOT, "roles", "gpudirect_reboot"), tmp_path / "roles" / "gpudirect_reboot")
    (tmp_path / "roles" / "gpudirect_state" / "tasks" / "forget.yml").write_text(textwrap.dedent("""\
        ---
        - name: Log the removal
          ansible.builtin.debug:
            msg: "EVENT forget {{ gpudirect_state_forget_reason }}"
        """))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = "".join("%s loaded failed failed %s\\n" % (unit, "Stand-in unit") for unit in failed_units)
    (bin_dir / "systemctl").write_text(textwrap.dedent("""\
        #!/bin/sh
        case "$1" in
          is-system-running) %s ;;
          list-units) printf '%s' ;;
        esac
        """ % ("echo degraded; exit 1" if failed_units else "echo running", listing)))
    (bin_dir / "journalctl").write_text("#!/bin/sh\necho \"Nov 24 20:01:02 gpu01 systemd[1]: $3: Failed with result 'exit-code'.\"\n")
    for name in ("systemctl", "journalctl"):
        os.chmod(bin_dir / name, 0o755)
    (tmp_path / "play.yml").write_text("---\n" + PLAY)
    hostvars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    if wanted_args:
        hostvars["__gpudirect_reboot_kernel_args_wanted"] = {"gpudirect_pcie_acs": wanted_args}
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    node: %s\n" % hostvars)
    (tmp_path / "ansible.cfg").write_text(textwrap.dedent("""\
        [defaults]
        roles_path = roles
        library = %s/library
        module_utils = %s/module_utils
        filter_plugins = %s/filter_plugins
        retry_files_enabled = false
        """ % (ROOT, ROOT, ROOT)))
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "hosts.yml", "play.yml"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    return proc, re.findall(r'"msg": "EVENT forget (.*)"', proc.stdout)


@pytest.mark.parametrize("unit", ["gpudirect-nvidia-peermem.service", "gpudirect-pcie-acs.service",
                                  # the legacy path's unit, from Mellanox's nv_peer_mem package
                                  "nv_peer_mem.service"])
def test_our_unit_failed_at_boot_removes_the_record_and_fails_naming_it(tmp_path, unit):
    proc, forgotten = _project(tmp_path, [unit, "systemd-networkd-wait-online.service"])
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert forgotten == ["post-reboot check 'Fail naming the toolkit's units that failed at boot' failed"]
    # the failure still names the unit and its journal line
    assert "%s failed at boot" % unit in proc.stdout
    assert "Failed with result 'exit-code'" in proc.stdout


def test_only_other_units_failed_keeps_the_record(tmp_path):
    proc, forgotten = _project(tmp_path, ["systemd-networkd-wait-online.service"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert forgotten == []
    assert "which the toolkit does not manage" in proc.stdout


def test_command_line_lacking_an_argument_removes_the_record(tmp_path):
    proc, forgotten = _project(tmp_path, [], wanted_args=["gpudirect_test_never_on_a_cmdline=1"])
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert forgotten == ["post-reboot check 'Check the kernel command line after the reboot' failed"]
    assert "lacks gpudirect_test_never_on_a_cmdline=1" in proc.stdout


def test_clean_boot_keeps_the_record(tmp_path):
    proc, forgotten = _project(tmp_path, [])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert forgotten == []
