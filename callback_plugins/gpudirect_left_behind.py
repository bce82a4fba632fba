"""Callback: the table of nodes left behind when Ansible ends a rolling run before the drain
report could print it (issue #13, outcome 3).

The decisions and the table live in module_utils (gpudirect_left_behind.py, gpudirect_lock.py:
one implementation, shared with the role's filters and the unit tests); this plugin only
turns Ansible's events into calls of ``gpudirect_left_behind.Recorder``.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpudirect_left_behind
type: aggregate
short_description: name the nodes a rolling run left drained when Ansible ended it early
description:
  - When every node of a C(serial) batch of a rolling play fails or becomes unreachable,
    Ansible ends the playbook at once, before the gpudirect_drain
    report of that batch and before the playbook's last play, so no table names the nodes
    left drained.
  - This callback watches the plays that carry the variable
    C(__gpudirect_drain_rolling_play=true) (playbooks/rolling.yml, playbooks/kernel_update.yml),
    records the drain bookkeeping facts they set and each node's failed or unreachable task,
    and, at the end of the run, prints the table the role would have printed (each node, why,
    the command that resumes it by hand), only when some node was lost after the last table
    the role printed. Otherwise it prints nothing.
requirements:
  - enable it in ansible.cfg (callbacks_enabled), with callback_plugins pointing at this directory
"""

import os

import ansible.module_utils
from ansible.plugins.callback import CallbackBase
from ansible import constants as C

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_left_behind as _left  # noqa: E402
from ansible.module_utils import gpudirect_run_summary as _summary  # noqa: E402

# Only the results of these actions are read (the drain facts come from set_fact, the role's
# table from debug): other results, gathered facts included, are never copied or converted.
_DEBUG = frozenset(("debug", "ansible.builtin.debug", "ansible.legacy.debug"))
_SET_FACT = frozenset(("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact"))


def _message(result):
    """The reason a result gives: its msg, else its stderr, else that it was hidden (no_log)."""
    return _summary.result_message(result.result, limit=100000)


def _task_name(result):
    task = result.task
    return (task.get_name() if task is not None else "") or "an unnamed task"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpudirect_left_behind"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self.recorder = _left.Recorder()

    @staticmethod
    def _play_hosts(play):
        """The play's nodes over all its batches (ansible_play_hosts_all); None when unknown."""
        try:
            manager = play.get_variable_manager()
            hosts = manager.get_vars(play=play, include_hostvars=False).get("ansible_play_hosts_all")
        except Exception:  # pylint: disable=broad-except  the table still names the nodes seen
            return None
        return list(hosts) if hosts else None

    def v2_playbook_on_play_start(self, play):
        key = getattr(play, "_uuid", None) or play.get_name()
        if self.recorder.same_play(key):
            return              # Ansible announces the play again for each batch
        rolling = _left.rolling_marker(play.get_vars())
        self.recorder.play_start(key, play.get_name(), rolling, self._play_hosts(play) if rolling else None)

    def v2_runner_on_ok(self, result):
        action = result.task.action if result.task is not None else None
        if action in _SET_FACT and self.recorder.watching:
            facts = result.result.get("ansible_facts")
            if facts:
                self.recorder.facts(result.host.name, facts)
        elif action in _DEBUG and self.recorder.watched and _left.is_table(result.result.get("msg")):
            self.recorder.table_printed()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self.recorder.lost(result.host.name, "failed", _task_name(result), _message(result))

    def v2_runner_on_unreachable(self, result):
        self.recorder.lost(result.host.name, "unreachable", _task_name(result), _message(result))

    def v2_playbook_on_stats(self, stats):
        gone = [host for host in set(stats.failures) | set(stats.dark)
                if stats.failures.get(host) or stats.dark.get(host)]
        lines = _left.render(self.recorder.left_behind(gone))
        if not lines:
            return
        self._display.banner("NODES LEFT BEHIND")
        for line in lines:
            self._display.display(line, color=C.COLOR_ERROR)
