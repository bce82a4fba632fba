"""Ansible filter of the gpudirect_mlnx_ofed role's vars: the DOCA repository's distro directory for a node.

``release | mlnx_ofed_doca_distro(os_family, distribution, version)`` -> e.g. 'rhel9.4' for
DOCA 2.9.1 on EL 9.4, 'rhel9' for DOCA 3.2.0 and later, 'ubuntu24.04', 'debian12'; '' when
not known (the role's validation then names gpudirect_mlnx_ofed_repo_distro). The decision lives in
plugin_utils/gpudirect_doca.py (one implementation, also used by the unit tests); this file
loads it by path, as Ansible loads filters.
"""

import os

import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_doca as _DOCA  # noqa: E402


def mlnx_ofed_doca_distro(release, os_family, distribution, version):
    return _DOCA.repo_distro(str(release), str(os_family), str(distribution), str(version))


class FilterModule:
    def filters(self):
        return {"mlnx_ofed_doca_distro": mlnx_ofed_doca_distro}
