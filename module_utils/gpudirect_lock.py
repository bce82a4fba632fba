"""The per-node run lock (issue #13, outcome 6) and the drain/resume bookkeeping (outcome 3).

One implementation, used by ``library/gpudirect_lock.py`` on the node, by the
``gpudirect_drain_*`` filters on the controller and by the unit tests.

A lock file holds one JSON object::

    {"token": "...", "controller": "admin@ctl1", "playbook": "site.yml", "pid": 4242,
     "boot_id": "<the node's /proc/sys/kernel/random/boot_id when taken>", "since": 1732460000,
     "renewed": 1732463600}

``token`` is random per run and node: only the run that wrote it removes it. The run
renews it (``renewed``) at each stage of the node's batch, its heartbeat (issue #30,
outcome 3). A lock is stale, and may be taken over, only when it was not renewed for
``stale_after`` seconds: the holder stopped working on the node. A lock from an earlier
boot of the node is not stale by itself: the lock lives under /var/lib/gpudirect, so it
survives the toolkit's own reboot, and the run that rebooted the node goes on holding it
(the boot ids only tell, in the messages, that the node rebooted since). A lock written
before ``renewed`` existed counts from ``since``.
"""

from __future__ import annotations

import json
import os
import shlex
import time

from ansible.module_utils.gpudirect_table import text_table

FIELDS = ("token", "controller", "playbook", "pid", "boot_id", "since")


def parse(text):
    """The lock's JSON object, or raise ValueError naming what is wrong with it."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("it is not the JSON this toolkit writes (%s)" % exc)
    if not isinstance(data, dict):
        raise ValueError("it is not the JSON object this toolkit writes")
    missing = [field for field in FIELDS if field not in data]
    if missing:
        raise ValueError("it lacks %s" % ", ".join(missing))
    for field in ("since", "renewed"):
        if field in data and (not isinstance(data[field], (int, float)) or isinstance(data[field], bool)):
            raise ValueError("its '%s' is not a number of seconds" % field)
    return data


def render(token, controller, playbook, pid, boot_id, since, renewed=None):
    """The text written to the lock file (one line, sorted keys)."""
    return json.dumps({"token": token, "controller": controller, "playbook": playbook, "pid": pid,
                       "boot_id": boot_id, "since": int(since),
                       "renewed": int(since if renewed is None else renewed)}, sort_keys=True) + "\n"


def renewed(lock):
    """When the holder last renewed the lock (its 'since' for a lock without 'renewed')."""
    return lock.get("renewed", lock["since"])


def when(since):
    """UTC time of a lock's 'since', as messages show it."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))


def describe(lock, now):
    """'admin@ctl1 (site.yml, pid 4242) since 2026-11-24 16:00:00 UTC, 300 s ago, renewed 20 s ago'."""
    return "%s (%s, pid %s) since %s, %d s ago, renewed %d s ago" % (
        lock["controller"], lock["playbook"], lock["pid"], when(lock["since"]), max(0, int(now - lock["since"])),
        max(0, int(now - renewed(lock))))


def ansible_alive(pid):
    """Whether ``pid`` is a running process of this machine that is still an Ansible one (not a reused pid)."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return b"ansible" in handle.read()
    except (IOError, OSError):
        return True


def gone_token(text, holder, alive=ansible_alive):
    """The token of the lock ``text`` when its holder was a run of this controller that is gone.

    Judged on the controller (``holder`` is this run's, from the ``gpudirect_drain_holder``
    filter): the lock names the same ``user@host`` and its ansible-playbook pid no longer
    runs an Ansible process here (Ctrl-C, a killed controller process). Such a lock can be
    taken over at once instead of after ``stale_after``. Returns ``""`` otherwise: no lock,
    a lock this toolkit did not write (the module judges it), another controller's lock
    (its processes cannot be seen from here), or a holder still alive.
    """
    if not text:
        return ""
    try:
        lock = parse(text)
    except ValueError:
        return ""
    if str(lock.get("controller")) != str((holder or {}).get("controller")):
        return ""
    if str(lock.get("pid")) == str((holder or {}).get("pid")) or alive(lock.get("pid")):
        return ""
    return str(lock["token"])


def decide(lock, token, boot_id, now, stale_after, gone=""):
    """What to do about an existing lock when this run (``token``) wants it.

    Returns ``(verdict, reason)``; verdict is ``free`` (no lock), ``ours`` (this run holds
    it already), ``stale`` (take it over, with a warning saying why) or ``held`` (fail).
    ``gone`` is the token of a lock whose holder the controller saw gone (:func:`gone_token`):
    that lock, and only while it still carries that token, is stale at once.
    """
    if lock is None:
        return "free", "no lock"
    if lock["token"] == token:
        return "ours", "this run holds the lock already"
    rebooted = " (taken before the node's last reboot)" if lock["boot_id"] != boot_id else ""
    if gone and lock["token"] == gone:
        return "stale", ("lock of %s%s: that ansible-playbook process no longer runs on this controller (interrupted "
                         "or killed)" % (describe(lock, now), rebooted))
    if now - renewed(lock) > stale_after:
        return "stale", ("lock of %s%s was not renewed for more than gpudirect_drain_lock_stale_after=%d s"
                         % (describe(lock, now), rebooted, stale_after))
    return "held", "held by %s%s" % (describe(lock, now), rebooted)


def held_message(node, path, lock, now, stale_after):
    """The failure a second run reads: who holds the lock since when, and what to do."""
    return ("%s is locked by another run of this toolkit: %s. Wait for that run to finish; if it is gone "
            "(killed, controller lost), remove %s on %s by hand, or wait until its holder has not renewed it "
            "for gpudirect_drain_lock_stale_after=%d s (the lock survives reboots of the node)."
            % (node, describe(lock, now), path, node, stale_after))


def command_line(argv):
    """The exact command line an admin can paste into a shell (each argument quoted as needed)."""
    return " ".join(shlex.quote(str(arg)) for arg in argv)


NO_RESUME = "(gpudirect_drain_resume_command is empty: resume it in your scheduler)"


def _resume_line(resume_argv):
    return command_line(resume_argv) if resume_argv else NO_RESUME


def note(text, node):
    """The note a run left on ``node`` (gpudirect_drain_left_drained_file: written before each
    drain, rewritten when the run leaves the node drained, removed at resume) as
    ``{reason, since, intent, resume_command, run, stage, line}``; ``line`` names the node for the table
    of nodes earlier runs left behind. A note that is not the JSON object the role writes is
    still a node left behind: its line says so, quoting the start of the text."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("reason"), str):
        shown = (text or "").strip().replace("\n", " ")[:80]
        return {"reason": None, "since": None, "intent": None, "resume_command": None,
                "line": "%s: a note the toolkit cannot read (%r): check the node, then remove the note" % (node, shown)}
    resume = data.get("resume_command")
    resume_line = command_line(resume) if isinstance(resume, list) and resume else (NO_RESUME if not resume else str(resume))
    since = data.get("since") or "an unknown time"
    kind = "lost in an earlier run after its drain" if data.get("intent") else "left drained by an earlier run"
    # the run and the last stage it began on the node (tasks/stage.yml writes it before each stage)
    where = " (run %s, last stage: %s)" % (data.get("run") or "?", data.get("stage") or "?") \
        if data.get("run") or data.get("stage") else ""
    return {"reason": data["reason"], "since": data.get("since"), "intent": bool(data.get("intent")),
            "resume_command": resume_line, "run": data.get("run"), "stage": data.get("stage"),
            "line": "%s: %s since %s%s: %s; resume by hand: %s" % (node, kind, since, where, data["reason"],
                                                                   resume_line)}


def short(message, limit=200):
    """The first line of a failure message, at most ``limit`` characters (for the table)."""
    text = str(message or "no message").strip().splitlines()[0] if str(message or "").strip() else "no message"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def left_drained_entry(verify_status, resume_argv, drained, failure=None):
    """The node's entry for ``gpudirect_drain_left_drained``, or None when it may be resumed.

    ``verify_status`` is ``gpudirect_verify_status`` of this run ('' when verification did
    not run), ``resume_argv`` the templated resume command, ``drained`` whether this run
    drained the node, ``failure`` ``{task, msg}`` when a task of the node failed after its
    drain (recorded by the role's ``failed`` entry point).
    """
    if not drained:
        return None
    if failure:
        return {"reason": "failed at '%s': %s" % (failure.get("task") or "?", short(failure.get("msg"))),
                "resume_command": _resume_line(resume_argv)}
    if verify_status == "passed":
        if resume_argv:
            return None
        return {"reason": "verification passed, but gpudirect_drain_resume_command is empty: nothing resumes it",
                "resume_command": NO_RESUME}
    shown = (verify_status or "did not run").replace("_", " ")
    return {"reason": "verification %s in this run: a node is resumed only after a verification that passed" % shown,
            "resume_command": _resume_line(resume_argv)}


def _get(hvars, key, default=None):
    try:
        value = hvars[key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _stage(hvars):
    """' (last stage: reboot)': the last disruptive step the node started, when known."""
    stage = _get(hvars, "gpudirect_drain_stage")
    return " (last stage: %s)" % stage if stage else ""


def _notes(hvars):
    notes = _get(hvars, "gpudirect_drain_notes", [])
    if isinstance(notes, str):
        notes = [notes]
    return "".join("; %s" % note for note in notes if note)


def report_rows(hostvars, hosts_all, hosts_alive, final=False, stopped=()):
    """Rows ``{node, reason, resume_command}`` for the final table.

    ``hostvars`` maps node -> its variables (``gpudirect_drain_drained``,
    ``gpudirect_drain_left_drained``, ``__gpudirect_drain_resume_line``,
    ``__gpudirect_drain_failure``, ``gpudirect_drain_stage``: the last disruptive step the
    node started, set before each; ``gpudirect_drain_notes``: sentences a step adds, e.g.
    the default boot kernel a failed kernel update held); ``hosts_all`` is
    ``ansible_play_hosts_all``, ``hosts_alive`` ``ansible_play_hosts`` (Ansible removes
    failed and unreachable hosts from it). Every node of a failed batch is named: drained
    ones with their resume command, the others as not drained; a node that is gone
    without a recorded failure became unreachable (a rescue records every failure).
    A node skipped because its jobs outlasted the wait (``gpudirect_drain_skipped``: back
    in service, untouched) is named with that sentence.
    Nodes of batches that never ran have nothing recorded: they are listed only when
    ``final`` (the run is over) and some node failed or was left drained, as not reached; a
    node drained ahead of its batch (``gpudirect_drain_drained`` without a stage) that the run
    never reached is named whenever ``final``, with its resume command.
    With ``final`` (a later play, whose ``ansible_play_hosts`` still lists the nodes lost
    in an earlier one), a node that started a stage (``gpudirect_drain_stage``) but never
    finished its batch's report (``__gpudirect_drain_batch_done``) counts as lost too.
    ``stopped`` names nodes still in the run that Ansible stopped in the middle of their batch
    (it ended the run when the rest of the batch was lost: callback_plugins/gpudirect_left_behind.py
    knows that, a play does not); they are neither failed nor unreachable.
    """
    rows = []
    alive = set(hosts_alive)
    unreached, ahead = [], []
    for node in hosts_all:
        try:
            hvars = hostvars[node]
        except KeyError:
            hvars = {}
        entry = _get(hvars, "gpudirect_drain_left_drained")
        drained = bool(_get(hvars, "gpudirect_drain_drained", False))
        failure = _get(hvars, "__gpudirect_drain_failure")
        resume = _get(hvars, "__gpudirect_drain_resume_line") or NO_RESUME
        where, notes = _stage(hvars), _notes(hvars)
        # after the run, a node that started a stage but never reached the end of its batch's
        # report was lost in its batch (a later play's ansible_play_hosts still lists it)
        lost = final and _get(hvars, "gpudirect_drain_stage") is not None \
            and not _get(hvars, "__gpudirect_drain_batch_done", False)
        if entry:
            reason = entry.get("reason", "left drained")
            if (node not in alive or lost) and node not in stopped:
                reason = "failed in this run; " + reason
            rows.append({"node": node, "reason": reason + notes,
                         "resume_command": entry.get("resume_command") or resume})
        elif _get(hvars, "gpudirect_drain_skipped"):
            rows.append({"node": node, "reason": str(_get(hvars, "gpudirect_drain_skipped")) + notes,
                         "resume_command": "-"})
        elif node not in alive or lost:
            gone = "failed" if failure else ("stopped mid-batch" if node in stopped else "unreachable")
            if drained:
                rows.append({"node": node, "reason": "%s in this run after its drain%s%s" % (gone, where, notes),
                             "resume_command": resume})
            else:
                rows.append({"node": node, "reason": "%s in this run before any drain (not drained by this run)%s: "
                             "check it%s" % (gone, where, notes), "resume_command": "-"})
        elif failure:
            rows.append({"node": node, "reason": "failed before any drain at '%s': %s (not drained by this run)%s"
                         % (failure.get("task") or "?", short(failure.get("msg")), notes), "resume_command": "-"})
        elif _get(hvars, "gpudirect_drain_stage") is None and not drained:
            unreached.append(node)
        elif _get(hvars, "gpudirect_drain_stage") is None:
            ahead.append((node, resume))
    # drained ahead of a batch that never came (gpudirect_rolling_lookahead): out of service, though
    # nothing was changed on it; always named once the run is over
    if final:
        rows.extend({"node": node, "reason": "drained ahead of its batch, not reached: the run stopped before it "
                     "(nothing changed on the node); resume it by hand, or run the playbook again",
                     "resume_command": resume} for node, resume in ahead)
    if final and rows:
        rows.extend({"node": node, "reason": "not reached: the run stopped before its batch (not drained, "
                     "not changed); run the playbook again", "resume_command": "-"} for node in unreached)
    return rows


def table(rows):
    """The rows as an aligned text table (a list of lines)."""
    if not rows:
        return ["no node was left drained by this run"]
    return text_table([("NODE", "WHY", "RESUME BY HAND")]
                      + [(row["node"], row["reason"], row["resume_command"]) for row in rows])
