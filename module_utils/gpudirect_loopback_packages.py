# -*- coding: utf-8 -*-
"""Which of the loopback helper's build packages are missing on the node.

The role reads the package database with the package manager's own query tool, not
with ``package_facts`` or the ``apt`` module, because on Debian/Ubuntu both need
python3-apt, which minimal images lack (the lent GPU node's Ubuntu 24.04 among them),
and ``apt`` then stops ``--check`` ("python3-apt must be installed to use check
mode"). Only the missing packages are installed; none missing: nothing runs.

* ``dpkg``: ``dpkg-query --show --showformat='${db:Status-Abbrev} ${Package} ${Version}\\n'``
  (the format the lent GPU node's capture, tests/fixtures/gpu_node/h100/vendor.txt, was
  taken with). The abbreviation is three letters, wanted state, current state, error
  (dpkg-query(1)); a package is installed when the current state is ``i`` (``ii``
  installed, ``hi`` held and installed; ``rc``, removed with its configuration left, is
  not).
* ``rpm``: ``rpm -qa --queryformat '%{NAME}\\n'``: one installed package name a line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MANAGERS = ("dpkg", "rpm")


class PackageQueryError(ValueError):
    """Output that is not what the query prints: names the line."""


def installed_packages(text, manager):
    """Set of installed package names from the query's standard output."""
    if manager not in MANAGERS:
        raise PackageQueryError("unknown package manager %r; expected one of %s" % (manager, ", ".join(MANAGERS)))
    names = set()
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        if manager == "rpm":
            names.add(line.strip())
            continue
        fields = line.split()
        if len(fields) not in (2, 3) or len(fields[0]) not in (2, 3):
            raise PackageQueryError("line %d of dpkg-query is not '<status> <package> <version>': %r"
                                    % (number, line))
        if fields[0][1] == "i":
            names.add(fields[1])
    return names


def missing_packages(text, wanted, manager):
    """The packages of ``wanted`` (in its order) that the query output does not list as installed."""
    have = installed_packages(text, manager)
    return [name for name in wanted or [] if name not in have]
