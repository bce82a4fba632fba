# -*- coding: utf-8 -*-
"""Which of the loopback helper's build packages are missing on the node.

The role reads the package database with the package manager's own query tool, not
with ``package_facts`` or the ``apt`` module, because on Debian/Ubuntu both need
python3-apt, which minimal images lack (the lent GPU node's Ubuntu 24.04 among them),
and ``apt`` then stops ``--check`` ("python3-apt must be installed to use check
mode"). Only the missing packages are installed; none missing: nothing runs.

* ``dpkg``: ``dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'`` (the role's
  filter gpudirect_dpkg_query_argv), read by ``gpudirect_dpkg.parse_dpkg_query``. The
  abbreviation is three letters, wanted state, current state, error (dpkg-query(1)); a package
  is installed when the current state is ``i`` (``ii`` installed, ``hi`` held and installed;
  ``rc``, removed with its configuration left, is not). ``fields`` reads output taken in another
  order (the lent GPU node's capture, tests/fixtures/gpu_node/h100/vendor.txt, has the status
  first).
* ``rpm``: ``rpm -qa --queryformat '%{NAME}\\n'``: one installed package name a line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.gpudirect_dpkg import FIELDS, DpkgQueryError, parse_dpkg_query

MANAGERS = ("dpkg", "rpm")


class PackageQueryError(ValueError):
    """Output that is not what the query prints: names the line."""


def installed_packages(text, manager, fields=FIELDS):
    """Set of installed package names from the query's standard output."""
    if manager not in MANAGERS:
        raise PackageQueryError("unknown package manager %r; expected one of %s" % (manager, ", ".join(MANAGERS)))
    if manager == "rpm":
        return set(line.strip() for line in (text or "").splitlines() if line.strip())
    try:
        records = parse_dpkg_query(text, fields, strict=True)
    except DpkgQueryError as exc:
        raise PackageQueryError(str(exc))
    return set(record["package"] for record in records if record["installed"])


def missing_packages(text, wanted, manager, fields=FIELDS):
    """The packages of ``wanted`` (in its order) that the query output does not list as installed."""
    have = installed_packages(text, manager, fields)
    return [name for name in wanted or [] if name not in have]
