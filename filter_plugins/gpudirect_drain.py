"""Filters of the gpudirect_drain role (the run lock's holder, the table of nodes left drained).

The decisions live in module_utils/gpudirect_lock.py (one implementation, unit-tested);
these filters only call them from the controller:

``ansible_play_name | gpudirect_drain_holder``
    ``{controller: "user@host", pid: N, playbook: "site.yml (play: ...)"}``: who takes the lock.
``hostvars | gpudirect_drain_report_rows(ansible_play_hosts_all, ansible_play_hosts, final)``
    the rows of the final table (nodes left drained, nodes of a failed batch, unreachable
    nodes with their last stage; with ``final``, the nodes a stopped run never reached).
``gpudirect_verify_status | gpudirect_drain_left_drained_entry(resume_argv, drained, failure)``
    the node's ``gpudirect_drain_left_drained`` entry, or None when it may be resumed.
``note_text | gpudirect_drain_note(node)``
    the note an earlier run left on the node, with the line that names it first in a run.
``rows | gpudirect_drain_table``
    the rows as aligned text lines.
``lock_text | gpudirect_drain_lock_gone(holder)``
    the token of a node's run lock whose holder was a run of this controller that is gone, or "".
``argv | gpudirect_drain_command_line``
    an argv list as one shell-quoted command line an admin can paste.
``ansible_facts.gpudirect | gpudirect_drain_hardware``
    the node's hardware inventory, kept before a disruption (plugin_utils/gpudirect_hardware.py).
``before | gpudirect_drain_hardware_judge(ansible_facts.gpudirect, accept)``
    ``{findings, accepted, table}``: what the node lost or degraded since, as rows and as lines.
"""

import getpass
import multiprocessing
import os
import socket
import sys

from ansible.errors import AnsibleFilterError


import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_lock as _lock  # noqa: E402
from ansible.module_utils import gpudirect_hardware as _hardware  # noqa: E402


def _playbooks(argv):
    """The playbook files on ansible-playbook's command line (arguments ending in .yml/.yaml)."""
    return [os.path.basename(a) for a in argv[1:] if a.endswith((".yml", ".yaml")) and not a.startswith("-")]


def gpudirect_drain_holder(play_name):
    """Who takes the lock: controller user@host, ansible-playbook's pid, playbook and play."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    # Ansible runs tasks in worker processes forked from ansible-playbook: the pid an admin
    # sees in `ps` is the parent's (this process's own pid when templated in the main process).
    parent = multiprocessing.parent_process()
    pid = parent.pid if parent is not None else os.getpid()
    books = _playbooks(sys.argv) or ["unknown playbook"]
    return {"controller": "%s@%s" % (user, socket.gethostname()), "pid": pid,
            "playbook": "%s (play: %s)" % (" ".join(books), play_name or "unnamed")}


def gpudirect_drain_report_rows(hostvars, hosts_all, hosts_alive, final=False):
    try:
        return _lock.report_rows(hostvars, list(hosts_all), list(hosts_alive), bool(final))
    except (TypeError, AttributeError) as exc:
        raise AnsibleFilterError("gpudirect_drain_report_rows: %s" % exc)


def gpudirect_drain_left_drained_entry(verify_status, resume_argv, drained, failure=None):
    return _lock.left_drained_entry(verify_status or "", list(resume_argv or []), bool(drained), failure or None)


def gpudirect_drain_note(text, node):
    try:
        return _lock.note(text, node)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_drain_note: %s" % exc)


def gpudirect_drain_table(rows):
    return _lock.table(rows)


def gpudirect_drain_command_line(argv):
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("gpudirect_drain_command_line: expected an argv list, got %s" % type(argv).__name__)
    return _lock.command_line(argv)


def gpudirect_drain_lock_gone(text, holder):
    if not isinstance(holder, dict):
        raise AnsibleFilterError("gpudirect_drain_lock_gone: expected the holder mapping of gpudirect_drain_holder, got %s"
                                 % type(holder).__name__)
    return _lock.gone_token(text or "", holder)


def gpudirect_drain_hardware(facts):
    try:
        return _hardware.inventory(facts)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_drain_hardware: %s" % exc)


def gpudirect_drain_hardware_judge(before, facts, accept=None):
    try:
        verdict = _hardware.judge(before, _hardware.inventory(facts), accept)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_drain_hardware_judge: %s" % exc)
    verdict["table"] = _hardware.table(verdict["findings"] + verdict["accepted"]) if verdict["findings"] or verdict["accepted"] else []
    return verdict


class FilterModule:
    def filters(self):
        return {
            "gpudirect_drain_holder": gpudirect_drain_holder,
            "gpudirect_drain_report_rows": gpudirect_drain_report_rows,
            "gpudirect_drain_note": gpudirect_drain_note,
            "gpudirect_drain_table": gpudirect_drain_table,
            "gpudirect_drain_left_drained_entry": gpudirect_drain_left_drained_entry,
            "gpudirect_drain_command_line": gpudirect_drain_command_line,
            "gpudirect_drain_lock_gone": gpudirect_drain_lock_gone,
            "gpudirect_drain_hardware": gpudirect_drain_hardware,
            "gpudirect_drain_hardware_judge": gpudirect_drain_hardware_judge,
        }
