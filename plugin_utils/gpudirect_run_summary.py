# -*- coding: utf-8 -*-
"""The run summary an operator reads after a run (issue #30, outcome 5).

``callback_plugins/gpudirect_run_summary.py`` turns Ansible's events into calls of
:class:`Summary`; this file holds what it records and how it is written, so that the
unit tests exercise the same code:

* per node: the stages it went through (``gpudirect_drain_stage``, in order), tasks
  ok / changed / failed / skipped, unreachable, the task and message that failed it,
  the verification verdict (``gpudirect_verify_status``), whether this run drained it,
  resumed it or left it drained (``gpudirect_drain_drained``,
  ``gpudirect_drain_left_drained``), whether it was held out of the run, out of service by
  another hand (``gpudirect_drain_held``, verdict ``held``), skipped because its jobs outlasted
  the drain's wait (``gpudirect_drain_skipped``, verdict ``skipped``), the notes (``gpudirect_drain_notes``), its first
  and last task times and the seconds between;
* per run: its id, the playbooks, the controller, start, end, duration, the totals and
  the verdict (``ok`` when no node failed or was unreachable);
* ``render_prometheus``: the same as a Prometheus textfile (node_exporter's textfile
  collector), written atomically.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import os
import re
import tempfile
import time

# the facts of the toolkit's roles that the summary reads from set_fact results
WATCHED = ("gpudirect_drain_stage", "gpudirect_verify_status", "gpudirect_drain_drained",
           "gpudirect_drain_left_drained", "gpudirect_drain_notes", "gpudirect_drain_out_before",
           "gpudirect_drain_held", "gpudirect_drain_skipped")


def _iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else None


def _flag(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")


def result_message(data, limit=2000):
    """The reason a task result gives (its dict): its msg, else its stderr, else that it was
    hidden (no_log); the last ``limit`` characters. Both callbacks name failures this way."""
    if data.get("censored"):
        return "output hidden (no_log)"
    for key in ("msg", "stderr", "module_stderr"):
        if data.get(key):
            return str(data[key])[-limit:]
    return "no message"


def run_id(started, playbooks, pid=None):
    """``20261127T023000Z-site-4242``: when, the first playbook's name (a file name part)
    and the controller process, so that two runs in the same second keep two files."""
    name = os.path.splitext(os.path.basename(playbooks[0]))[0] if playbooks else "run"
    return "%s-%s-%d" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)), re.sub(r"[^A-Za-z0-9_.-]", "_", name),
                         os.getpid() if pid is None else pid)


class Summary(object):
    def __init__(self, started=None, controller=None, ansible_version=None):
        self.started = started or time.time()
        self.ended = None
        self.playbooks = []
        self.controller = controller
        self.ansible_version = ansible_version
        self.nodes = {}

    def node(self, host):
        if host not in self.nodes:
            self.nodes[host] = {"stages": [], "ok": 0, "changed": 0, "failed": 0, "skipped": 0, "unreachable": False,
                                "failed_task": None, "verify": None, "drained": False, "resumed": False,
                                "left_drained": None, "out_of_service_before": False, "held": None, "skipped_why": None, "notes": [],
                                "first_task": None, "last_task": None}
        return self.nodes[host]

    def playbook(self, path):
        if path not in self.playbooks:
            self.playbooks.append(path)

    def _seen(self, node, now):
        node["first_task"] = node["first_task"] or now
        node["last_task"] = now

    def result(self, host, outcome, changed=False, facts=None, task=None, message=None, now=None):
        """One task's result on ``host``: ``ok``, ``failed``, ``skipped`` or ``unreachable``."""
        node = self.node(host)
        self._seen(node, now or time.time())
        if outcome == "unreachable":
            node["unreachable"] = True
            node["failed_task"] = {"task": task, "msg": message, "unreachable": True}
            return
        if outcome in ("ok", "failed", "skipped"):
            node[outcome] += 1
        if changed and outcome == "ok":
            node["changed"] += 1
        if outcome == "failed":
            node["failed_task"] = {"task": task, "msg": message}
        for key, value in (facts or {}).items():
            if key in WATCHED:
                self._fact(node, key, value)

    def _fact(self, node, key, value):
        if key == "gpudirect_drain_stage":
            if value and (not node["stages"] or node["stages"][-1] != value):
                node["stages"].append(str(value))
        elif key == "gpudirect_verify_status":
            node["verify"] = str(value) if value else node["verify"]
        elif key == "gpudirect_drain_drained":
            drained = _flag(value)
            if drained:
                node["drained"] = True
            elif node["drained"]:
                node["resumed"] = True
        elif key == "gpudirect_drain_left_drained":
            node["left_drained"] = (value or {}).get("reason") if isinstance(value, dict) else (str(value) if value else None)
        elif key == "gpudirect_drain_notes":
            for note in value if isinstance(value, list) else [value]:
                if note and str(note) not in node["notes"]:
                    node["notes"].append(str(note))
        elif key == "gpudirect_drain_out_before":
            node["out_of_service_before"] = _flag(value)
        elif key == "gpudirect_drain_skipped":
            node["skipped_why"] = " ".join(str(value).split()) if value else None
        elif key == "gpudirect_drain_held":
            node["held"] = " ".join(str(value).split()) if value else None

    def finish(self, stats=None, now=None):
        """End the run; ``stats``: {host: {failures, unreachable}} from Ansible's recap."""
        self.ended = now or time.time()
        for host, counts in (stats or {}).items():
            node = self.node(host)
            if counts.get("unreachable"):
                node["unreachable"] = True
            if counts.get("failures") and not node["failed"]:
                node["failed"] = counts["failures"]

    def verdict(self, node):
        if node["unreachable"]:
            return "unreachable"
        if node["failed"] and node["failed_task"] is not None:
            return "failed"
        if node["left_drained"]:
            return "left_drained"
        if node["held"]:
            return "held"
        if node["skipped_why"]:
            return "skipped"
        return "ok"

    def as_dict(self):
        nodes = {}
        for host in sorted(self.nodes):
            node = dict(self.nodes[host])
            first, last = node.pop("first_task"), node.pop("last_task")
            # drained by this run and not resumed by it (a node out of service before the run is not counted)
            node["still_drained"] = bool(node["drained"] and not node["resumed"])
            node.update(verdict=self.verdict(self.nodes[host]), first_task=_iso(first), last_task=_iso(last),
                        duration_s=round(last - first, 1) if first and last else 0.0)
            nodes[host] = node
        verdicts = [n["verdict"] for n in nodes.values()]
        totals = {"nodes": len(nodes), "changed_nodes": sum(1 for n in nodes.values() if n["changed"])}
        for name in ("ok", "failed", "unreachable", "left_drained", "held", "skipped"):
            totals[name] = verdicts.count(name)
        totals["drained"] = sum(1 for n in nodes.values() if n["drained"])
        totals["resumed"] = sum(1 for n in nodes.values() if n["resumed"])
        ended = self.ended or time.time()
        return {"run_id": run_id(self.started, self.playbooks), "playbooks": list(self.playbooks),
                "controller": self.controller, "ansible_version": self.ansible_version,
                "started": _iso(self.started), "ended": _iso(ended), "duration_s": round(ended - self.started, 1),
                "result": "ok" if totals["failed"] + totals["unreachable"] + totals["left_drained"] == 0 else "failed",
                "totals": totals, "nodes": nodes}


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_prometheus(summary):
    """The summary (``Summary.as_dict()``) as Prometheus text exposition format."""
    out = []

    def metric(name, kind, helptext, samples):
        out.append("# HELP %s %s" % (name, helptext))
        out.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            text = ",".join('%s="%s"' % (k, _label(v)) for k, v in labels)
            out.append("%s%s %s" % (name, "{%s}" % text if text else "", value))

    playbook = os.path.basename(summary["playbooks"][0]) if summary["playbooks"] else ""
    ended = calendar.timegm(time.strptime(summary["ended"], "%Y-%m-%dT%H:%M:%SZ"))
    metric("gpudirect_run_last_end_timestamp_seconds", "gauge", "When the last run of the toolkit ended.",
           [((("playbook", playbook),), "%d" % ended)])
    metric("gpudirect_run_duration_seconds", "gauge", "How long the last run took.",
           [((("playbook", playbook),), summary["duration_s"])])
    metric("gpudirect_run_success", "gauge", "1 when no node of the last run failed, was unreachable or was left drained.",
           [((("playbook", playbook),), 1 if summary["result"] == "ok" else 0)])
    metric("gpudirect_run_nodes", "gauge", "Nodes of the last run by verdict.",
           [((("playbook", playbook), ("verdict", name)), summary["totals"][name])
            for name in ("ok", "failed", "unreachable", "left_drained", "held", "skipped")])
    nodes = summary["nodes"]
    metric("gpudirect_node_verification_passed", "gauge",
           "1 when the node's GPUDirect RDMA verification passed in the last run, 0 when it ran and did not pass.",
           [((("node", h),), 1 if n["verify"] == "passed" else 0) for h, n in sorted(nodes.items()) if n["verify"]])
    metric("gpudirect_node_left_drained", "gauge", "1 when the last run left the node drained.",
           [((("node", h),), 1 if n["still_drained"] else 0) for h, n in sorted(nodes.items())])
    metric("gpudirect_node_changed_tasks", "gauge", "Tasks that changed the node in the last run.",
           [((("node", h),), n["changed"]) for h, n in sorted(nodes.items())])
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file in the same directory (a
    reader such as node_exporter never sees half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    handle, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write(summary_dict, directory, prometheus=None):
    """Write the summary as ``<directory>/<run_id>.json`` (and ``latest.json``), and the
    Prometheus textfile when ``prometheus`` names one. Returns the JSON file's path."""
    text = json.dumps(summary_dict, indent=2, sort_keys=True) + "\n"
    path = os.path.join(directory, summary_dict["run_id"] + ".json")
    write_atomic(path, text)
    write_atomic(os.path.join(directory, "latest.json"), text)
    if prometheus:
        write_atomic(prometheus, render_prometheus(summary_dict))
    return path
