"""tests/harness/why_failed.py: the end of scripts/test.sh names what an inner
ansible-playbook of a failed side-effect step printed, not only "rc 2".

The logs are made by real runs: an outer playbook runs an inner ansible-playbook that
fails an assertion, as molecule's side-effect steps (record_again.yml) do, in the one-line
and the pretty result forms. CI's stop 41 printed only the cut outer line of such a step.
"""
import os
import subprocess
import sys
import textwrap

import pytest
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))

import why_failed  # noqa: E402  pylint: disable=wrong-import-position

INNER = textwrap.dedent("""\
    - name: Inner run
      hosts: localhost
      connection: local
      gather_facts: false
      tasks:
        - name: Say something harmless
          ansible.builtin.debug:
            msg: all well so far
        - name: Check the record
          ansible.builtin.assert:
            that: [false]
            fail_msg: "no converged-state record written: verification did not pass"
    """)

OUTER = textwrap.dedent("""\
    - name: Outer run
      hosts: localhost
      connection: local
      gather_facts: false
      tasks:
        - name: Run the inner playbook
          ansible.builtin.command:
            argv: ["{{ playbook }}", -i, "localhost,", -e, "ansible_python_interpreter={{ ansible_python_interpreter }}",
                   "{{ inner }}"]
          changed_when: false
    """)


def _real_log(tmp_path, pretty):
    (tmp_path / "inner.yml").write_text(INNER)
    (tmp_path / "outer.yml").write_text(OUTER)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_FORMAT_PRETTY="true" if pretty else "false",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.default", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    env.pop("ANSIBLE_CONFIG", None)
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([playbook, "-i", "localhost,", str(tmp_path / "outer.yml"),
                           "-e", "inner=%s" % (tmp_path / "inner.yml"), "-e", "playbook=%s" % playbook,
                           "-e", "ansible_python_interpreter=%s" % sys.executable],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    log = tmp_path / "molecule-x.log"
    log.write_text(proc.stdout + proc.stderr)
    return log


@pytest.mark.parametrize("pretty", [False, True], ids=["one-line", "pretty"])
def test_the_inner_runs_failure_is_named_under_the_outer_line(tmp_path, pretty):
    log = _real_log(tmp_path, pretty)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "harness", "why_failed.py"), str(log)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert any(line.startswith("fatal: [localhost]: FAILED!") for line in out), out
    inner = [line for line in out if line.startswith("    | ")]
    assert any("no converged-state record written" in line for line in inner), out
    assert any("failed=1" in line for line in inner), out
    # the harmless lines of the inner run are left out
    assert not any("all well so far" in line for line in inner), out


def test_a_cut_or_malformed_result_gives_the_outer_line_only():
    cut = 'fatal: [localhost]: FAILED! => {"changed": false, "rc": 2, "stdout": "PLAY [x] **'
    assert why_failed.why([cut + "\n"]) == [cut]
    assert why_failed.inner_lines('fatal: [h]: FAILED! => ["a list"]') == []
    assert why_failed.inner_lines("fatal: [h]: FAILED! => not json") == []


def test_the_output_is_cut_to_the_limit_and_quiet_on_a_passing_log():
    lines = ['fatal: [n%d]: FAILED! => {"msg": "x"}' % i for i in range(50)]
    assert len(why_failed.why(lines, limit=7)) == 7
    assert why_failed.why(["PLAY RECAP", "localhost : ok=3 changed=0 failed=0"]) == []
