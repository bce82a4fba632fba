"""One Slurm node as ``scontrol`` prints it, and what the toolkit makes of its state.

Used by ``library/gpudirect_slurm_node.py`` on the Slurm host (``gpudirect_drain_delegate_to``)
and by the unit tests, on real outputs (tests/fixtures/slurm/, tests/fixtures/slurm_public/).

``parse_node(text)``
    The fields of one node from ``scontrol -o show node NAME`` (one line) or ``scontrol show node
    NAME`` (one field group per line), as ``{"NodeName": ..., "State": ..., "Reason": ...}``.
``node_status(fields, owner_prefix="gpudirect run ")``
    The decisions: drained or draining, jobs left, out of service, whose drain it is.
``describe(status)``
    One line for messages: ``IDLE+DRAIN, reason "Bad DIMM" (root, 2024-05-01T10:00:00)``.

How scontrol prints a node (src/api/node_info.c, ``slurm_sprint_node_table``, Slurm 16.05 to 25.11):
``Key=value`` pairs separated by blanks, one line (``-o``) or several indented ones. A few values hold
blanks: ``OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)`` (its own line),
and the free-text fields printed after every other one: ``Reason=`` (the reason, then `` [user@time]``
when Slurm knows who set it and when), ``Comment=`` and ``Extra=``. Since 23.02 ``InstanceId=``,
``InstanceType=``, ``ReservationName=`` (and later ``TLSCertTokenSet=``, ``Topology=``,
``Parameters=``) may follow them.

``State=`` is the base state (IDLE, ALLOCATED, MIXED, DOWN, ERROR, FUTURE, UNKNOWN) followed by
``+FLAG`` for each flag (``node_state_string_complete``): ``IDLE+DRAIN``, ``MIXED+DRAIN``,
``IDLE+COMPLETING+DRAIN``, ``DOWN+DRAIN+NOT_RESPONDING``, ``IDLE+DRAIN+REBOOT_REQUESTED``,
``IDLE+CLOUD+POWERED_DOWN``. Slurm before 21.08 printed some flags as a suffix of the base
(``DOWN*+DRAIN``: ``*`` is not responding, ``~`` powered down, ``#`` powering up, ``%`` powering
down, ``!`` power down requested, ``@`` reboot requested, ``^`` reboot issued, ``$`` maintenance,
``-`` planned) and a powered-down node as ``IDLE+POWER``; both forms are read.

Slurm's DRAINED is a drained node with no job left; DRAINING a drained node still running
(ALLOCATED or MIXED) or finishing (COMPLETING) jobs (``node_state_string``).
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

OWNER_PREFIX = "gpudirect run "

# fields whose value is free text (blanks included): they run to the next of TAIL_KEYS, or the line's end
FREE_TEXT = ("Reason", "Comment", "Extra")
# what scontrol prints after Reason=, each starting a field of its own
TAIL_KEYS = FREE_TEXT + ("InstanceId", "InstanceType", "ReservationName", "TLSCertTokenSet",
                         "TLSCertLastRenewal", "Topology", "Parameters")
_TAIL = re.compile(r"(?:^|(?<=\s))(%s)=" % "|".join(TAIL_KEYS))
_FREE_START = re.compile(r"(?:^|(?<=\s))(%s)=" % "|".join(FREE_TEXT))
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)=(.*)$")
# "Bad DIMM [root@2024-05-01T10:00:00]": who set the reason, and when
_STAMP = re.compile(r"^(.*?)\s*\[([^\[\]@\s]*)@([^\[\]]*)\]\s*$")
_NOT_FOUND = re.compile(r"^\s*Node \S+ not found\s*$", re.MULTILINE)

# the old suffix characters of the base state, as the flag each stands for
SUFFIX_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "%": "POWERING_DOWN",
                "!": "POWER_DOWN", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED", "$": "MAINTENANCE",
                "-": "PLANNED"}
# bases with no scheduling on the node
OUT_OF_SERVICE_BASES = ("DOWN", "ERROR", "FUTURE")
# flags that take a node out of service: drained, failed, in maintenance, unreachable, powered off
# or powering off, rebooting or about to (a reboot someone asked Slurm for is their maintenance),
# registered with a configuration that does not match slurm.conf. MAINT and POWER are older spellings.
OUT_OF_SERVICE_FLAGS = ("DRAIN", "FAIL", "MAINTENANCE", "MAINT", "NOT_RESPONDING", "POWERED_DOWN", "POWER_DOWN",
                        "POWERING_DOWN", "POWER", "REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID_REG", "INVAL")
JOB_BASES = ("ALLOCATED", "MIXED")


def _quote(text, limit=200):
    return repr((text or "")[:limit])


def _tokens(chunk, fields, last):
    """Add the ``Key=value`` pairs of ``chunk`` to ``fields``; a blank-separated word that is not
    ``Key=...`` belongs to the value before it (``OS=Linux 5.14.0 #1 SMP ...``). Returns the last key."""
    for word in chunk.split():
        found = _KEY.match(word)
        if found:
            last = found.group(1)
            fields[last] = found.group(2)
        elif last is not None:
            fields[last] = (fields[last] + " " + word) if fields[last] else word
    return last


def _line(line, fields, last):
    """One line of output: the pairs before the first free-text field, then the tail fields."""
    start = _FREE_START.search(line)
    if not start:
        return _tokens(line, fields, last)
    last = _tokens(line[:start.start()], fields, last)
    rest = line[start.start():]
    marks = list(_TAIL.finditer(rest))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(rest)
        key, value = mark.group(1), rest[mark.end():end].strip()
        if key in FREE_TEXT:
            fields[key] = value
            last = key
        else:
            last = _tokens(rest[mark.start():end], fields, last)
    return last


def parse_node(text):
    """The fields of the one node in ``text`` (``scontrol -o show node NAME`` or ``scontrol show node
    NAME``), values as printed. ``Reason`` is the whole reason with its ``[user@time]``.

    Raises ValueError, quoting the start of the text, for scontrol's ``Node X not found``, a text with
    no ``NodeName=`` (empty, an error message), one with several nodes, or one without ``State=``
    (cut short)."""
    text = (text or "").replace("\r\n", "\n")
    if _NOT_FOUND.search(text):
        raise ValueError("scontrol does not know the node: %s" % _quote(text.strip()))
    names = re.findall(r"(?:^|\s)NodeName=", text)
    if not names:
        raise ValueError("no NodeName= in the scontrol output: %s" % _quote(text.strip()))
    if len(names) > 1:
        raise ValueError("the scontrol output holds %d nodes, not one: %s" % (len(names), _quote(text.strip())))
    text = text[text.index("NodeName="):]
    fields, last = {}, None
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        # a reason of several lines goes on with lines indented past the fields ("   " + 7 blanks)
        if last == "Reason" and raw.startswith(" " * 8) and not _KEY.match(raw.split()[0]):
            fields["Reason"] += "\n" + raw.strip()
            continue
        last = _line(raw, fields, last)
    if not fields.get("NodeName"):
        raise ValueError("no node name after NodeName= in the scontrol output: %s" % _quote(text.strip()))
    if not fields.get("State"):
        raise ValueError("no State= for node %s in the scontrol output (cut short?): %s"
                         % (fields["NodeName"], _quote(text.strip())))
    return fields


def split_state(state):
    """``("DOWN", ["NOT_RESPONDING", "DRAIN"])`` for ``DOWN*+DRAIN``: the base and the flags as
    printed, upper case, the old suffix characters of the base turned into the flags they stand for."""
    parts = [part for part in state.strip().upper().split("+")]
    base, flags = parts[0], [flag for flag in parts[1:] if flag]
    suffixed = []
    while base and base[-1] in SUFFIX_FLAGS:
        suffixed.insert(0, SUFFIX_FLAGS[base[-1]])
        base = base[:-1]
    return base, suffixed + [flag for flag in flags if flag not in suffixed]


def split_reason(reason):
    """``("Bad DIMM", "root", "2024-05-01T10:00:00")`` for ``Bad DIMM [root@2024-05-01T10:00:00]``;
    user and time None when the reason has no stamp; the reason None when there is none."""
    if reason is None or not reason.strip():
        return None, None, None
    first, newline, more = reason.partition("\n")
    found = _STAMP.match(first)
    if not found:
        return reason.strip(), None, None
    return (found.group(1).strip() + newline + more).strip(), found.group(2) or None, found.group(3).strip() or None


def node_status(fields, owner_prefix=OWNER_PREFIX):
    """What the toolkit decides on: a dict with

    ``name``, ``state`` (as printed), ``base``, ``flags`` (list), ``reason`` (without the stamp; None
    when there is none), ``reason_user``, ``reason_time``; ``drain`` (the DRAIN flag); ``jobs`` (jobs
    running or completing: base ALLOCATED or MIXED, or the COMPLETING flag); ``drained`` (drain and no
    job left: Slurm's DRAINED) and ``draining`` (drain with jobs: Slurm's DRAINING); ``out_of_service``
    (drained, down, failed, in maintenance, not responding, powered down, rebooting, ...); ``owner``:
    ``"toolkit"`` for a node out of service whose reason starts with ``owner_prefix`` (this toolkit's
    drain), ``"other"`` for one out of service otherwise (an admin's drain, or Slurm's own: "Not
    responding", "Kill task failed"), None for a node in service."""
    base, flags = split_state(fields["State"])
    reason, user, when = split_reason(fields.get("Reason"))
    drain = "DRAIN" in flags
    jobs = base in JOB_BASES or "COMPLETING" in flags
    out = drain or base in OUT_OF_SERVICE_BASES or any(flag in OUT_OF_SERVICE_FLAGS for flag in flags)
    if not out:
        owner = None
    elif owner_prefix and reason is not None and reason.startswith(owner_prefix):
        owner = "toolkit"
    else:
        owner = "other"
    return {"name": fields.get("NodeName"), "state": fields["State"], "base": base, "flags": flags,
            "reason": reason, "reason_user": user, "reason_time": when, "drain": drain,
            "drained": drain and not jobs, "draining": drain and jobs, "jobs": jobs,
            "out_of_service": out, "owner": owner}


def describe(status):
    """``IDLE+DRAIN, reason "Bad DIMM" (root, 2024-05-01T10:00:00)``; ``MIXED, no reason``."""
    if not status.get("reason"):
        return "%s, no reason" % status["state"]
    stamp = [part for part in (status.get("reason_user"), status.get("reason_time")) if part]
    return "%s, reason \"%s\"%s" % (status["state"], status["reason"].replace("\n", " / "),
                                    " (%s)" % ", ".join(stamp) if stamp else "")
