# -*- coding: utf-8 -*-
"""dpkg-query's package lines, read one way by every module and filter (issue #31: six parsers
with different rules before).

``DPKG_QUERY_FORMAT``
    ``${Package} ${Version} ${db:Status-Abbrev}\\n``: what the modules and roles ask for.
``DPKG_QUERY_FORMAT_ARCH``
    The same with `` ${Architecture}`` last (``FIELDS_ARCH``): where a package name can be
    installed for several architectures (roles/gpudirect_os_release_pin's kernel packages).
``dpkg_query_argv(names, binary="dpkg-query", arch=False)``
    ``dpkg-query -W -f=<DPKG_QUERY_FORMAT> NAMES...`` as a list (no shell).
``parse_dpkg_query(text, fields=FIELDS, strict=False)``
    One record a package line: ``{"package", "version", "status", "installed", "held"}``.
    ``fields`` names the order the format printed them in (a capture taken with the status
    first: ``("status", "package", "version")``); with ``"arch"`` among them the records carry it.
``installed_and_held(text, fields=FIELDS, strict=False)``
    ``({installed package: version}, [held packages])``.

``${db:Status-Abbrev}`` is dpkg-query(1)'s three letters: the wanted action (``h`` hold, ``i``
install, ``r`` remove, ``p`` purge, ``u`` unknown), the current state (``i`` installed, ``c``
config-files, ``n`` not installed, ...) and the error flag, a blank when there is none (so the
field reads as two letters once the line is split). A package is installed when its current
state is ``i`` (``ii``, ``hi``; not ``rc``), held when its wanted action is ``h``.

dpkg prints an empty version for a package it knows but has not installed (``foo  un``), so a
line may have one field fewer than ``fields``: then the version is the one missing. A line with
another number of fields, a status that is not two or three of those letters, or an installed package
without a version is not a package line: ``strict`` raises ``DpkgQueryError`` naming it,
otherwise it is skipped (the modules pass dpkg's stdout as it came, rc 1 included).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DPKG_QUERY_FORMAT = "${Package} ${Version} ${db:Status-Abbrev}\n"
FIELDS = ("package", "version", "status")
DPKG_QUERY_FORMAT_ARCH = "${Package} ${Version} ${db:Status-Abbrev} ${Architecture}\n"
FIELDS_ARCH = FIELDS + ("arch",)
# dpkg-query(1), ${db:Status-Abbrev}: the wanted action, the current state, the error flag
WANTED = "uirph"
CURRENT = "ncHUFWti"


class DpkgQueryError(ValueError):
    """A line that is not what the query prints: the message names the line."""


def dpkg_query_argv(names, binary="dpkg-query", arch=False):
    """``[binary, "-W", "-f=<DPKG_QUERY_FORMAT>", *names]``: the query ``parse_dpkg_query`` reads
    (with ``FIELDS_ARCH`` when ``arch``)."""
    return [binary, "-W", "-f=" + (DPKG_QUERY_FORMAT_ARCH if arch else DPKG_QUERY_FORMAT)] + list(names)


def _record(words, fields):
    if len(words) == len(fields) - 1 and "version" in fields:
        rest = iter(words)
        values = dict((name, "" if name == "version" else next(rest)) for name in fields)
    elif len(words) == len(fields):
        values = dict(zip(fields, words))
    else:
        return None
    status = values["status"]
    if len(status) not in (2, 3) or status[0] not in WANTED or status[1] not in CURRENT or status[2:] not in ("", "R"):
        return None
    installed = status[1] == "i"
    if installed and not values["version"]:
        return None
    record = {"package": values["package"], "version": values["version"], "status": status,
              "installed": installed, "held": status[0] == "h"}
    if "arch" in values:
        record["arch"] = values["arch"]
    return record


def parse_dpkg_query(text, fields=FIELDS, strict=False):
    """The package lines of dpkg-query's output, in order, as records (see the module's text)."""
    fields = tuple(fields)
    if sorted(fields) not in (sorted(FIELDS), sorted(FIELDS_ARCH)):
        raise DpkgQueryError("fields %r: expected an order of %s, and optionally arch" % (fields, ", ".join(FIELDS)))
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
