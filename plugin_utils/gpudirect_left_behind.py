"""The nodes a rolling run left behind when Ansible ended it before the drain report's table
(issue #13, outcome 3): the bookkeeping of ``callback_plugins/gpudirect_left_behind.py``.

Ansible ends a playbook at once when every node of a ``serial`` batch failed or became
unreachable: the batch's ``gpudirect_drain`` report and the playbook's
last play never run, so no table names the nodes left drained. The callback feeds a
:class:`Recorder` with what it sees and, at the end of the run, prints the table the role
would have printed (``gpudirect_lock.report_rows`` with ``final``, ``gpudirect_lock.table``:
one implementation of the rows and their formatting).

What the recorder is told (plain values, no Ansible objects, so the decisions are testable):

``play_start(key, name, rolling, hosts_all)``
    a play (or a further batch of it: same ``key``) starts; ``rolling`` when the play carries
    the marker variable ``__gpudirect_drain_rolling_play: true`` (playbooks/rolling.yml,
    playbooks/kernel_update.yml); ``hosts_all`` the play's nodes over all its batches
    (``ansible_play_hosts_all``), None when unknown.
``facts(host, facts)``
    the facts a task set on ``host`` (``ansible_facts`` of its result); only the drain
    bookkeeping of :data:`FACTS` is kept, the way the role reads it from ``hostvars``.
``lost(host, kind, task, msg)``
    a task failed (``kind`` "failed", not ignored) or the node became unreachable.
``table_printed()``
    the role's report printed a table (a batch's or the final one): every loss before it is named.

``left_behind(gone)`` then gives ``[(play name, rows)]`` for each rolling play whose losses no
table named afterwards (``gone``: the nodes failed or unreachable at the end, Ansible's stats),
and ``[]`` when every loss was named, when nothing was lost, or when no rolling play ran.
"""

from __future__ import annotations

import re

from ansible.module_utils import gpudirect_lock as _lock

# The play variable that marks a rolling play (lock, drain, change, verify, resume, report).
MARKER = "__gpudirect_drain_rolling_play"

# The facts the role's report reads from hostvars (module_utils/gpudirect_lock.report_rows).
FACTS = (
    "gpudirect_drain_stage",
    "gpudirect_drain_drained",
    "gpudirect_drain_left_drained",
    "gpudirect_drain_notes",
    "__gpudirect_drain_failure",
    "__gpudirect_drain_resume_line",
    "__gpudirect_drain_batch_done",
)


def _natural(name):
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def is_table(msg):
    """Whether ``msg`` (a debug task's message) is a table of ``gpudirect_lock.table``."""
    lines = msg.splitlines() if isinstance(msg, str) else msg
    if not isinstance(lines, (list, tuple)) or not lines or not isinstance(lines[0], str):
        return False
    return lines[0].split() == _lock.table([{"node": "", "reason": "", "resume_command": ""}])[0].split() \
        or list(lines) == _lock.table([])


def rolling_marker(play_vars):
    """Whether a play's variables carry the rolling marker set to true."""
    try:
        value = play_vars.get(MARKER, False)
    except AttributeError:
        return False
    return value is True or str(value).strip().lower() in ("true", "yes", "1")


def event_note(kind, task, msg):
    """'unreachable at 'Take the node's run lock': Failed to connect ...' (first line, shortened)."""
    return "%s at '%s': %s" % (kind, task or "an unnamed task", _lock.short(msg))


class Recorder:
    """What a run did to the nodes of its rolling plays, in the order Ansible reported it."""

    def __init__(self):
        self._facts = {}        # host -> {fact: value}, as hostvars would hold them
        self._plays = []        # [{key, name, hosts_all, hosts_seen, losses}]
        self._current = None    # the rolling play now running, None outside one
        self._events = 0        # sequence number of the last loss or table
        self._last_table = 0    # sequence number of the last table the role printed

    @property
    def watching(self):
        """A rolling play is running: its facts and losses count."""
        return self._current is not None

    @property
    def watched(self):
        """A rolling play has run: a table the role prints from now on counts."""
        return bool(self._plays)

    def same_play(self, key):
        """``key`` is the rolling play now running (a further batch of it)."""
        return self._current is not None and self._current["key"] == key

    def play_start(self, key, name, rolling, hosts_all=None):
        if self.same_play(key):
            return              # the next batch of the same play
        self._current = None
        if not rolling:
            return
        self._current = {"key": key, "name": name or "unnamed play",
                         "hosts_all": [str(h) for h in hosts_all] if hosts_all else [],
                         "hosts_seen": [], "losses": [], "reported": set()}
        self._plays.append(self._current)

    def _seen(self, host):
        if self._current is not None and host not in self._current["hosts_seen"]:
            self._current["hosts_seen"].append(host)

    def facts(self, host, facts):
        host = str(host)
        self._seen(host)
        if not isinstance(facts, dict):
            return
        kept = {k: v for k, v in facts.items() if k in FACTS}
        if kept:
            self._facts.setdefault(host, {}).update(kept)
        if kept.get("__gpudirect_drain_batch_done") and self._current is not None:
            self._current["reported"].add(host)

    def lost(self, host, kind, task, msg):
        host = str(host)
        if self._current is None:
            return
        self._seen(host)
        # the role's report fails the nodes it has just named (after marking their batch done)
        if host in self._current["reported"]:
            return
        self._events += 1
        self._current["losses"].append({"seq": self._events, "host": host, "kind": kind,
                                        "task": task, "msg": msg})

    def table_printed(self):
        self._events += 1
        self._last_table = self._events

    def left_behind(self, gone=()):
        """``[(play name, rows)]`` of the rolling plays with a loss that no table named afterwards."""
        gone = set(str(h) for h in gone)
        out = []
        for play in self._plays:
            if not [loss for loss in play["losses"] if loss["seq"] > self._last_table]:
                continue
            # in name order, numbers as numbers (gpu2 before gpu10): a dynamic group's order is the
            # order in which its nodes finished the task that built it, another one in each run
            hosts_all = sorted(set(play["hosts_all"]) | set(play["hosts_seen"]), key=_natural)
            hostvars = {h: dict(self._facts.get(h, {})) for h in hosts_all}
            last = {}
            for loss in play["losses"]:
                last[loss["host"]] = loss
            for host, loss in last.items():
                hvars = hostvars[host]
                if host not in gone:
                    continue        # a failure a rescue turned into a record: the node went on
                if "__gpudirect_drain_failure" in hvars and loss["kind"] == "failed":
                    continue        # a rescue recorded it: its reason already says where and why
                if loss["kind"] == "failed":
                    hvars["__gpudirect_drain_failure"] = {"task": loss["task"], "msg": loss["msg"]}
                notes = hvars.get("gpudirect_drain_notes") or []
                notes = [notes] if isinstance(notes, str) else list(notes)
                hvars["gpudirect_drain_notes"] = notes + [event_note(loss["kind"], loss["task"], loss["msg"])]
            alive = [h for h in hosts_all if h not in gone]
            # still in the run, but Ansible ended it before their batch's report
            stopped = [h for h in alive if hostvars[h].get("gpudirect_drain_stage") is not None
                       and not hostvars[h].get("__gpudirect_drain_batch_done")]
            out.append((play["name"], _lock.report_rows(hostvars, hosts_all, alive, True, stopped)))
        return out


def render(left):
    """The lines the callback prints for ``Recorder.left_behind()``'s result ([] when nothing)."""
    lines = []
    for name, rows in left:
        lines.append("Ansible ended the run in play '%s' before the drain report could name these nodes (every "
                     "node of a batch failed or became unreachable, or a failure outside the rescued steps went "
                     "past max_fail_percentage). Nodes left drained, failed, unreachable, stopped or not reached:"
                     % name)
        lines.extend(_lock.table(rows))
    return lines
