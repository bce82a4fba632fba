"""Callback: a run summary file per run, and a Prometheus textfile a site can enable (issue #30, outcome 5).

What it records and how it is written live in plugin_utils/gpudirect_run_summary.py (one
implementation, exercised by the unit tests); this plugin only turns Ansible's events into
calls of ``gpudirect_run_summary.Summary``.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpudirect_run_summary
type: aggregate
short_description: write a JSON summary of each run (and a Prometheus textfile)
description:
  - At the end of each ansible-playbook run, writes C(<dir>/<run id>.json) and C(<dir>/latest.json) - per node the
    stages it went through (C(gpudirect_drain_stage)), tasks ok, changed, failed and skipped, unreachable, the task and
    message that failed it, the verification verdict, whether the run drained, resumed or left it drained and why, its
    notes, its first and last task times; per run its id, playbooks, controller, start, end, duration, totals and
    verdict. Prints the file's path after the recap, on stderr (a JSON stdout callback's output stays JSON).
  - With O(prometheus_textfile), also writes the run's and each node's state in Prometheus text format (for
    node_exporter's textfile collector), atomically.
requirements:
  - enable it in ansible.cfg (callbacks_enabled), with callback_plugins pointing at this directory
options:
  dir:
    description:
      - Directory of the summaries. Relative paths are taken from the directory of the ansible.cfg in use (the
        current directory without one). Empty - no summary is written.
    type: str
    default: logs/runs
    env:
      - name: GPUDIRECT_RUN_SUMMARY_DIR
    ini:
      - section: callback_gpudirect_run_summary
        key: dir
  prometheus_textfile:
    description:
      - A C(.prom) file to write the run's metrics to (e.g. C(/var/lib/node_exporter/textfile/gpudirect.prom) on the
        controller). Empty - none.
    type: str
    default: ""
    env:
      - name: GPUDIRECT_RUN_SUMMARY_PROMETHEUS
    ini:
      - section: callback_gpudirect_run_summary
        key: prometheus_textfile
"""

import getpass
import os
import socket

import ansible.module_utils
from ansible import constants as C
from ansible.module_utils.ansible_release import __version__ as ANSIBLE_VERSION
from ansible.plugins.callback import CallbackBase

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_run_summary as _summary  # noqa: E402

# only set_fact results are read for the toolkit's facts: other results are never copied
_SET_FACT = frozenset(("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact"))


def _base_dir():
    config = getattr(C, "CONFIG_FILE", None)
    return os.path.dirname(os.path.abspath(config)) if config else os.getcwd()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpudirect_run_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        try:
            controller = "%s@%s" % (getpass.getuser(), socket.gethostname())
        except Exception:  # pylint: disable=broad-except  a controller without a user name still gets a summary
            controller = socket.gethostname()
        self.summary = _summary.Summary(controller=controller, ansible_version=ANSIBLE_VERSION)

    def v2_playbook_on_start(self, playbook):
        self.summary.playbook(os.path.relpath(playbook._file_name, _base_dir())
                              if playbook._file_name.startswith(_base_dir() + os.sep) else playbook._file_name)

    def _result(self, result, outcome):
        task = result._task
        facts = None
        if outcome == "ok" and task is not None and task.action in _SET_FACT:
            facts = result._result.get("ansible_facts")
        self.summary.result(result._host.get_name(), outcome, changed=bool(result._result.get("changed")), facts=facts,
                            task=task.get_name() if task is not None else None,
                            message=_summary.result_message(result._result) if outcome in ("failed", "unreachable") else None)

    def v2_runner_on_ok(self, result):
        self._result(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "ok" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        directory = self.get_option("dir")
        prometheus = self.get_option("prometheus_textfile")
        if not directory and not prometheus:
            return
        self.summary.finish({host: {"failures": stats.failures.get(host, 0), "unreachable": stats.dark.get(host, 0)}
                             for host in stats.processed})
        data = self.summary.as_dict()
        try:
            if directory:
                path = _summary.write(data, os.path.join(_base_dir(), os.path.expanduser(directory)), prometheus or None)
                self._display.display("run summary: %s (%d node(s): %s)" % (
                    path, data["totals"]["nodes"], ", ".join("%s %d" % (k, data["totals"][k])
                                                             for k in ("ok", "failed", "unreachable", "left_drained"))),
                                      stderr=True)
            else:
                _summary.write_atomic(prometheus, _summary.render_prometheus(data))
            if prometheus:
                self._display.display("run metrics: %s" % prometheus, stderr=True)
        except (IOError, OSError) as exc:
            self._display.warning("gpudirect_run_summary: cannot write the run summary (%s): set "
                                  "GPUDIRECT_RUN_SUMMARY_DIR or [callback_gpudirect_run_summary] dir to a writable "
                                  "directory" % exc)
