# -*- coding: utf-8 -*-
"""The locked-memory limit an RDMA job will get, as opposed to the one Ansible runs with.

``ibv_reg_mr`` and ``ibv_create_qp`` pin memory and fail (ENOMEM/EPERM) past
RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK. What matters is the limit of
the processes that run jobs: new PAM login sessions (ssh, su, runuser, which
pam_limits sets from /etc/security/limits.conf and limits.d/*.conf) and units
the systemd manager starts from now on (DefaultLimitMEMLOCK, which the manager
re-reads only at ``systemctl daemon-reexec`` or boot). The limit of the process
``gpudirect_facts`` runs in is neither: Ansible's session is root (outside pam's
``*`` domain, and root has CAP_IPC_LOCK anyway), and a session opened before a
change keeps its old limit.

The pam_limits rules follow Linux-PAM's ``modules/pam_limits/pam_limits.c``:

* ``limits.conf`` first, then ``limits.d/*.conf`` sorted by file name (a name in
  ``/etc/security/limits.d`` hides the same name in the vendor directory).
* A line is ``<domain> <type> <item> <value>``; ``#`` starts a comment; type,
  item and value are case-insensitive. Type ``soft``, ``hard`` or ``-`` (both).
* Priority: an entry for the user (name, or a ``min:max`` uid range) beats an
  ``@group`` entry, which beats ``*``; ``%`` domains only count for maxlogins.
  Among entries of the same priority the later one wins (later line, later file).
* Values ``unlimited``, ``infinity``, ``-1`` and ``-`` mean no limit; a number is
  KiB for memlock.
* A two-field line ``<domain> -`` that applies to the user ends the parse, and
  pam_limits then changes no limit at all.
* Nothing set: the session keeps the limit it started with (Debian's pam_limits
  starts from PID 1's limits; upstream from the calling daemon's).
* The soft limit is capped at the hard limit.

Pure functions over file contents and command output, so they are tested on
real files (``tests/unit/test_limits.py``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import resource

from ansible.module_utils.gpudirect_host import read_text

UNLIMITED = "unlimited"

LIMITS_CONF = "etc/security/limits.conf"
LIMITS_DIRS = ("etc/security/limits.d", "usr/etc/security/limits.d")  # /etc first: it hides the vendor file

# systemd's configuration directories for the system manager's own config
# (systemd-system.conf(5)): system.conf, then drop-ins sorted by file name over
# these directories, where a file in an earlier directory hides the same name.
SYSTEMD_CONF = "etc/systemd/system.conf"
SYSTEMD_DROPIN_DIRS = ("etc/systemd/system.conf.d", "run/systemd/system.conf.d",
                       "usr/local/lib/systemd/system.conf.d", "usr/lib/systemd/system.conf.d")

# pam_limits' priorities (lower wins), LIMITS_DEF_* in pam_limits.c
PRIO_USER, PRIO_GROUP, PRIO_DEFAULT, PRIO_NONE = 0, 1, 4, 6
NO_LIMIT_VALUES = ("unlimited", "infinity", "-1", "-")
SYSTEMD_SUFFIX = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4,
                  "p": 1024 ** 5, "e": 1024 ** 6}


def _under(root, relative):
    return os.path.join(root or "/", relative)


def show_limit(value):
    """None -> ``unlimited``; bytes stay an int's string."""
    return UNLIMITED if value is None else str(value)


# --------------------------------------------------------------------------
# pam_limits
# --------------------------------------------------------------------------

def pam_value_bytes(value):
    """A limits.conf memlock value -> bytes, None for no limit; ValueError when
    pam_limits would skip the line (no leading digits)."""
    value = value.strip().lower()
    if value in NO_LIMIT_VALUES:
        return None
    match = re.match(r"^\+?(\d+)", value)
    if not match:
        raise ValueError("not a number of KiB nor unlimited/infinity: %r" % value)
    return int(match.group(1)) * 1024


def parse_limits_file(text, path="limits.conf"):
    """The lines of one limits file that matter for memlock.

    Returns ``[{"path", "line", "domain", "type", "value"}]`` in file order, where
    type is ``soft``, ``hard``, ``-`` or ``stop`` (a two-field ``<domain> -`` line).
    Lines for other items and lines pam_limits skips are left out.
    """
    entries = []
    for lineno, raw in enumerate((text or "").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 3)
        if len(fields) == 2 and fields[1] == "-":
            entries.append({"path": path, "line": lineno, "domain": fields[0], "type": "stop", "value": None})
            continue
        if len(fields) != 4 or fields[2].lower() != "memlock":
            continue
        ltype = fields[1].lower()
        if ltype not in ("soft", "hard", "-"):
            continue
        try:
            value = pam_value_bytes(fields[3])
        except ValueError:
            continue
        entries.append({"path": path, "line": lineno, "domain": fields[0], "type": ltype, "value": value})
    return entries


def _conf_files(root, main, dropin_dirs):
    """(path shown, absolute path) of a main file and the *.conf of its drop-in directories:
    a name found in an earlier directory hides the same name in later ones, and drop-ins
    are read in name order after the main file (pam_limits' and systemd's rule alike)."""
    by_name = {}
    for directory in dropin_dirs:
        try:
            names = os.listdir(_under(root, directory))
        except (IOError, OSError):
            continue
        for name in names:
            if name.endswith(".conf") and name not in by_name:
                by_name[name] = ("/%s/%s" % (directory, name), _under(root, os.path.join(directory, name)))
    return [("/" + main, _under(root, main))] + [by_name[name] for name in sorted(by_name)]


def limits_files(root="/"):
    """(path shown, absolute path) of limits.conf and every limits.d/*.conf, in pam_limits' order."""
    return _conf_files(root, LIMITS_CONF, LIMITS_DIRS)


def read_limits(root="/"):
    """Every memlock entry of the host's limits files, in pam_limits' order."""
    entries = []
    for shown, path in limits_files(root):
        text = read_text(path)
        if text is not None:
            entries.extend(parse_limits_file(text, shown))
    return entries


def _domain_priority(domain, user, groups, uid):
    """pam_limits' priority of ``domain`` for this user, None when it does not apply."""
    if user is not None and domain == user:
        return PRIO_USER
    if domain.startswith("%"):
        return None  # maxlogins only
    range_match = re.match(r"^(@?)(\d*):(\d*)$", domain)
    if range_match:
        is_group, low, high = range_match.groups()
        if is_group or uid is None:
            return None  # gid ranges and unknown uids: not evaluated for a generic user
        low_ok = not low or uid >= int(low)
        high_ok = not high or uid <= int(high)
        return PRIO_USER if low_ok and high_ok else None
    if domain.startswith("@"):
        return PRIO_GROUP if domain[1:] in groups else None
    if domain == "*":
        return PRIO_DEFAULT
    return None


def pam_memlock(entries, base=(None, None), user=None, groups=(), uid=None):
    """The memlock limit pam_limits gives a new session of ``user`` (in ``groups``).

    ``user=None`` is any ordinary user named in no entry and in none of the
    ``@group``s: only ``*`` entries apply. ``base`` is (soft, hard) in bytes (None:
    unlimited) that the session starts with when no entry sets the limit.

    Returns ``{"soft", "hard"}`` in bytes (None: unlimited) and ``soft_source`` /
    ``hard_source`` (``"<file>:<line> <domain>"``, None when not set by pam_limits).
    """
    limit = {"soft": base[0], "hard": base[1]}
    prio = {"soft": PRIO_NONE, "hard": PRIO_NONE}
    source = {"soft": None, "hard": None}
    for entry in entries:
        p = _domain_priority(entry["domain"], user, groups, uid)
        if p is None:
            continue
        if entry["type"] == "stop":
            if p in (PRIO_USER, PRIO_GROUP):
                # pam_limits stops and sets nothing: the session keeps its starting limit
                return {"soft": base[0], "hard": base[1], "soft_source": None, "hard_source": None,
                        "stopped_by": "%s:%s %s -" % (entry["path"], entry["line"], entry["domain"])}
            continue
        kinds = ("soft", "hard") if entry["type"] == "-" else (entry["type"],)
        for kind in kinds:
            if prio[kind] < p:
                break  # pam_limits returns here: a '-' line loses its hard half too
            limit[kind] = entry["value"]
            prio[kind] = p
            source[kind] = "%s:%s %s" % (entry["path"], entry["line"], entry["domain"])
    soft, hard = limit["soft"], limit["hard"]
    if hard is not None and (soft is None or soft > hard):
        soft = hard  # setup_limits caps the soft limit at the hard one
    return {"soft": soft, "hard": hard, "soft_source": source["soft"], "hard_source": source["hard"],
            "stopped_by": None}


def named_domains(entries):
    """User and @group domains with memlock entries, in first-seen order (not ``*``, ranges or ``%``)."""
    out = []
    for entry in entries:
        domain = entry["domain"]
        if domain == "*" or domain.startswith("%") or ":" in domain or domain in out:
            continue
        out.append(domain)
    return out


def login_memlock(entries, base=(None, None), base_source=None):
    """What new PAM logins get: any ordinary user (``*``), and members of each named domain.

    Returns ``{"soft", "hard", "soft_bytes", "hard_bytes", "soft_source",
    "hard_source", "base_source", "domains": [{"domain", "soft", ...}]}``; values
    as strings (``unlimited`` or bytes) plus the byte counts (None: unlimited).
    """
    def shaped(result):
        return {"soft": show_limit(result["soft"]), "hard": show_limit(result["hard"]),
                "soft_bytes": result["soft"], "hard_bytes": result["hard"],
                "soft_source": result["soft_source"], "hard_source": result["hard_source"],
                "stopped_by": result["stopped_by"]}

    out = shaped(pam_memlock(entries, base))
    out["base_source"] = base_source
    out["domains"] = []
    for domain in named_domains(entries):
        if domain.startswith("@"):
            result = pam_memlock(entries, base, user=None, groups=(domain[1:],))
        else:
            result = pam_memlock(entries, base, user=domain)
        item = shaped(result)
        item["domain"] = domain
        out["domains"].append(item)
    return out


def parse_proc_limits(text, name="Max locked memory"):
    """``/proc/<pid>/limits`` -> (soft, hard) in bytes for ``name`` (None: unlimited);
    None when the line is missing."""
    for line in (text or "").splitlines():
        if not line.startswith(name):
            continue
        fields = line[len(name):].split()
        if len(fields) < 2:
            return None
        return tuple(None if f == UNLIMITED else int(f) for f in fields[:2])
    return None


# --------------------------------------------------------------------------
# systemd
# --------------------------------------------------------------------------

def parse_systemd_size(value):
    """One side of a systemd rlimit: ``infinity`` -> None, ``8M`` -> 8388608, ``65536`` -> 65536."""
    value = value.strip()
    if value.lower() == "infinity":
        return None
    match = re.match(r"^(\d+)\s*([bkmgtpe]?)$", value, re.I)
    if not match:
        raise ValueError("not a systemd size: %r" % value)
    return int(match.group(1)) * SYSTEMD_SUFFIX[match.group(2).lower()]


def parse_systemd_rlimit(value):
    """``LimitMEMLOCK=`` syntax: ``V`` (soft and hard) or ``SOFT:HARD`` -> (soft, hard) bytes."""
    if ":" in value:
        soft, hard = value.split(":", 1)
        return parse_systemd_size(soft), parse_systemd_size(hard)
    both = parse_systemd_size(value)
    return both, both


def parse_systemctl_show(text):
    """``systemctl show -p A -p B`` output -> ``{"A": "...", "B": "..."}``."""
    props = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def manager_memlock(props):
    """(soft, hard) bytes (None: unlimited) from ``systemctl show``'s DefaultLimitMEMLOCKSoft and
    DefaultLimitMEMLOCK (the hard limit); ValueError when they are missing or unreadable."""
    if "DefaultLimitMEMLOCK" not in props:
        raise ValueError("systemctl show did not report DefaultLimitMEMLOCK")
    hard = parse_systemd_size(props["DefaultLimitMEMLOCK"])
    soft = parse_systemd_size(props.get("DefaultLimitMEMLOCKSoft", props["DefaultLimitMEMLOCK"]))
    return soft, hard


def systemd_conf_files(root="/"):
    """(path shown, absolute path) of system.conf and its drop-ins, in systemd's order."""
    return _conf_files(root, SYSTEMD_CONF, SYSTEMD_DROPIN_DIRS)


def read_systemd_conf(root="/"):
    """[(path shown, text or None)] of system.conf and its drop-ins, in systemd's order."""
    return [(shown, read_text(path)) for shown, path in systemd_conf_files(root)]


def configured_manager_memlock(files):
    """The DefaultLimitMEMLOCK the manager will read at its next daemon-reexec or boot.

    ``files`` is [(path shown, text or None)] in systemd's order; the last
    assignment in a ``[Manager]`` section wins. Returns ``{"soft", "hard",
    "source"}`` (bytes, None: unlimited) or None when no file sets it (the
    built-in default applies, which only the running manager knows).
    """
    found = None
    for shown, text in files:
        section = None
        for lineno, raw in enumerate((text or "").splitlines(), 1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]").strip()
                continue
            if section != "Manager" or "=" not in line:
                continue
            key, value = (part.strip() for part in line.split("=", 1))
            if key != "DefaultLimitMEMLOCK":
                continue
            if not value:
                found = None  # an empty assignment resets to the built-in default
                continue
            try:
                soft, hard = parse_systemd_rlimit(value)
            except ValueError:
                continue  # systemd logs and ignores it
            found = {"soft": soft, "hard": hard, "source": "%s:%s" % (shown, lineno)}
    return found


def service_memlock(props, configured=None):
    """What a unit started now gets, and whether the config says otherwise (pending daemon-reexec)."""
    soft, hard = manager_memlock(props)
    out = {"soft": show_limit(soft), "hard": show_limit(hard), "soft_bytes": soft, "hard_bytes": hard,
           "source": "systemctl show DefaultLimitMEMLOCK", "configured": None, "pending_reexec": False}
    if configured is not None:
        out["configured"] = {"soft": show_limit(configured["soft"]), "hard": show_limit(configured["hard"]),
                             "source": configured["source"]}
        out["pending_reexec"] = (configured["soft"], configured["hard"]) != (soft, hard)
    return out


# --------------------------------------------------------------------------
# the decision
# --------------------------------------------------------------------------

def _limited(value):
    return value != UNLIMITED


def memlock_findings(memlock):
    """What RDMA jobs would hit: ``[(severity, message)]`` for the report.

    Judged on new logins and new services, never on the surveying session. Facts
    without ``login``/``service`` (an older capture) fall back to the session.
    """
    memlock = memlock or {}
    login, service = memlock.get("login"), memlock.get("service")
    findings = []
    if not login and not service:
        if memlock.get("soft") is not None and _limited(memlock.get("soft")):
            findings.append(("warn", "memlock soft limit is %s: ibv_reg_mr / ibv_create_qp fail for large "
                                     "buffers; the host prerequisites set it to unlimited" % memlock.get("soft")))
        return findings
    if login and _limited(login.get("soft")):
        wider = [d["domain"] for d in login.get("domains") or [] if not _limited(d.get("soft"))]
        where = login.get("soft_source") or "not set in limits.conf/limits.d: %s" % (
            login.get("base_source") or "the limit the session starts with")
        if wider:
            findings.append(("info", "new logins of users outside %s get memlock soft %s (%s)"
                             % (", ".join(wider), login.get("soft"), where)))
        else:
            findings.append(("warn", "new logins get memlock soft %s (%s): ibv_reg_mr / ibv_create_qp fail for "
                                     "large buffers; gpudirect_host_prereqs sets unlimited in limits.d"
                             % (login.get("soft"), where)))
    configured = (service or {}).get("configured") or {}
    if service and _limited(service.get("soft")):
        pending = ""
        if service.get("pending_reexec"):
            pending = "; %s sets %s, which the manager reads at its next daemon-reexec or boot" % (
                configured.get("source"), configured.get("soft"))
        findings.append(("warn", "services started from now on get memlock soft %s (systemd "
                                 "DefaultLimitMEMLOCK)%s" % (service.get("soft"), pending)))
    elif service and service.get("pending_reexec") and _limited(configured.get("soft")):
        findings.append(("warn", "services get memlock soft %s after the next daemon-reexec or boot (%s); "
                                 "new ones get %s until then" % (configured.get("soft"), configured.get("source"),
                                                                 service.get("soft"))))
    return findings


def _pair(item):
    return "soft %s, hard %s" % (item.get("soft"), item.get("hard"))


def memlock_lines(memlock):
    """The report's memlock lines (without the label): what new logins and new services get,
    with where it comes from, and the surveying session's own limit where it differs."""
    memlock = memlock or {}
    login, service = memlock.get("login"), memlock.get("service")
    if not login and not service:
        return ["soft %s, hard %s (this Ansible session)" % (memlock.get("soft"), memlock.get("hard"))]
    lines = []
    if login:
        source = login.get("soft_source") or "not set in limits.conf/limits.d%s" % (
            ", kept from " + login["base_source"] if login.get("base_source") else "")
        if login.get("stopped_by"):
            source = "pam_limits stops at %s" % login["stopped_by"]
        lines.append("new logins: %s (%s)" % (_pair(login), source))
        for domain in login.get("domains") or []:
            lines.append("  members of %s: %s" % (domain["domain"], _pair(domain)) if domain["domain"].startswith("@")
                         else "  user %s: %s" % (domain["domain"], _pair(domain)))
    else:
        lines.append("new logins: unknown (%s)" % memlock.get("login_reason"))
    if service:
        text = "new services: %s (systemd DefaultLimitMEMLOCK)" % _pair(service)
        if service.get("pending_reexec"):
            configured = service.get("configured") or {}
            text += "; %s after daemon-reexec (%s)" % (_pair(configured), configured.get("source"))
        lines.append(text)
    else:
        lines.append("new services: unknown (%s)" % memlock.get("service_reason"))
    session = memlock.get("session") or {}
    jobs = [x for x in (login, service) if x]
    if session and any((session.get("soft"), session.get("hard")) != (x.get("soft"), x.get("hard")) for x in jobs):
        lines.append("this Ansible session: %s (uid %s%s)" % (
            _pair(session), session.get("uid"),
            ": root is outside pam_limits' '*' and has CAP_IPC_LOCK" if session.get("uid") == 0
            else ": a session keeps the limit it was opened with"))
    return lines


# --------------------------------------------------------------------------
# this process's limit
# --------------------------------------------------------------------------

def _limit(value):
    if value == resource.RLIM_INFINITY:
        return "unlimited", None
    return str(value), int(value)


def memlock_limits(getrlimit=resource.getrlimit):
    """RLIMIT_MEMLOCK of this process: ``{soft, hard, soft_bytes, hard_bytes}`` (bytes None = unlimited)."""
    soft, hard = getrlimit(resource.RLIMIT_MEMLOCK)
    soft_s, soft_b = _limit(soft)
    hard_s, hard_b = _limit(hard)
    return {"soft": soft_s, "hard": hard_s, "soft_bytes": soft_b, "hard_bytes": hard_b}
