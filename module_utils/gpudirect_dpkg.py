# -*- coding: utf-8 -*-
"""dpkg-query's package lines, read one way by every module and filter (issue #31: six parsers
with different rules before).

``DPKG_QUERY_FORMAT``
    ``${Package} ${Version} ${db:Status-Abbrev}\\n``: what the modules ask for.
``dpkg_query_argv(names, binary="dpkg-query")``
    ``dpkg-query -W -f=<DPKG_QUERY_FORMAT> NAMES...`` as a list (no shell).
``parse_dpkg_query(text, fields=FIELDS, strict=False)``
    One record a package line: ``{"package", "version", "status", "installed", "held"}``.
    ``fields`` names the order the format printed them in (the roles' own queries put the
    status first: ``${db:Status-Abbrev} ${Package} ${Version}``).
``installed_and_held(text, fields=FIELDS, strict=False)``
    ``({installed package: version}, [held packages])``.

``${db:Status-Abbrev}`` is dpkg-query(1)'s three letters: the wanted action (``h`` hold, ``i``
install, ``r`` remove, ``p`` purge, ``u`` unknown), the current state (``i`` installed, ``c``
config-files, ``n`` not installed, ...) and the error flag, a blank when there is none (so the
field reads as two letters once the line is split). A package is installed when its current
state is ``i`` (``ii``, ``hi``; not ``rc``), held when its wanted action is ``h``.

dpkg prints an empty version for a package it knows but has not installed (``foo  un``), so a
line may have one field fewer than ``fields``: then the version is the one missing. A line with
another number of fields, a status that is not two or three letters, or an installed package
without a version is not a package line: ``strict`` raises ``DpkgQueryError`` naming it,
otherwise it is skipped (the modules pass dpkg's stdout as it came, rc 1 included).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DPKG_QUERY_FORMAT = "${Package} ${Version} ${db:Status-Abbrev}\n"
FIELDS = ("package", "version", "status")


class DpkgQueryError(ValueError):
    """A line that is not what the query prints: the message names the line."""


def dpkg_query_argv(names, binary="dpkg-query"):
    """``[binary, "-W", "-f=<DPKG_QUERY_FORMAT>", *names]``: the query ``parse_dpkg_query`` reads."""
    return [binary, "-W", "-f=" + DPKG_QUERY_FORMAT] + list(names)


def _record(words, fields):
    if len(words) == len(fields) - 1 and "version" in fields:
        rest = iter(words)
        values = dict((name, "" if name == "version" else next(rest)) for name in fields)
    elif len(words) == len(fields):
        values = dict(zip(fields, words))
    else:
        return None
    status = values["status"]
    if len(status) not in (2, 3):
        return None
    installed = status[1] == "i"
    if installed and not values["version"]:
        return None
    return {"package": values["package"], "version": values["version"], "status": status,
            "installed": installed, "held": status[0] == "h"}


def parse_dpkg_query(text, fields=FIELDS, strict=False):
    """The package lines of dpkg-query's output, in order, as records (see the module's text)."""
    fields = tuple(fields)
    if sorted(fields) != sorted(FIELDS):
        raise DpkgQueryError("fields %r: expected an order of %s" % (fields, ", ".join(FIELDS)))
    records = []
    for number, line in enumerate(str(text or "").splitlines(), start=1):
        if not line.strip():
            continue
        record = _record(line.split(), fields)
        if record is None:
            if strict:
                raise DpkgQueryError("line %d of dpkg-query is not '%s': %r"
                                     % (number, " ".join("<%s>" % f for f in fields), line))
            continue
        records.append(record)
    return records


def installed_and_held(text, fields=FIELDS, strict=False):
    """``({package: version} of the installed packages, [held packages that are installed])``."""
    installed, held = {}, []
    for record in parse_dpkg_query(text, fields, strict):
        if record["installed"]:
            installed[record["package"]] = record["version"]
            if record["held"]:
                held.append(record["package"])
    return installed, held
