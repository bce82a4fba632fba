"""Ansible filters of the roles that read dpkg's package database themselves: the query to run
and its records, both from module_utils/gpudirect_dpkg.py, the one place that knows the format
(the modules use it directly). This file loads it by path, as Ansible loads filters.

``gpudirect_dpkg_query_argv(names, arch=false)``
    The ``dpkg-query -W -f=...`` argv for ``ansible.builtin.command``'s ``argv``.
``gpudirect_dpkg_installed(stdout, arch=false)``
    ``{package: [{version, arch}]}`` of the installed packages, the shape of
    ``ansible.builtin.package_facts``; a line that is not a package line fails, named.
``gpudirect_dpkg_held(stdout, arch=false)``
    The packages dpkg holds (wanted action ``h``), sorted: a role holds only the
    others, so a converged node costs no call per package.
"""

import os

from ansible.errors import AnsibleFilterError
import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_dpkg as _dpkg  # noqa: E402


def gpudirect_dpkg_query_argv(names=None, arch=False):
    return _dpkg.dpkg_query_argv([str(n) for n in names or []], arch=bool(arch))


def _records(stdout, arch, name):
    try:
        return _dpkg.parse_dpkg_query(stdout, _dpkg.FIELDS_ARCH if arch else _dpkg.FIELDS, strict=True)
    except _dpkg.DpkgQueryError as exc:
        raise AnsibleFilterError("%s: %s (the output of gpudirect_dpkg_query_argv%s?)"
                                 % (name, exc, "(arch=true)" if arch else ""))


def gpudirect_dpkg_installed(stdout, arch=False):
    records = _records(stdout, arch, "gpudirect_dpkg_installed")
    installed = {}
    for record in records:
        if record["installed"]:
            installed.setdefault(record["package"], []).append(
                {"version": record["version"], "arch": record.get("arch", "")})
    return installed


def gpudirect_dpkg_held(stdout, arch=False):
    return sorted({r["package"] for r in _records(stdout, arch, "gpudirect_dpkg_held") if r["held"]})


class FilterModule:
    def filters(self):
        return {"gpudirect_dpkg_query_argv": gpudirect_dpkg_query_argv,
                "gpudirect_dpkg_installed": gpudirect_dpkg_installed,
                "gpudirect_dpkg_held": gpudirect_dpkg_held}
