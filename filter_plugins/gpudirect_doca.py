"""Ansible filter of the mlnx_ofed role's vars: the DOCA repository's distro directory for a node.

``release | mlnx_ofed_doca_distro(os_family, distribution, version)`` -> e.g. 'rhel9.4' for
DOCA 2.9.1 on EL 9.4, 'rhel9' for DOCA 3.2.0 and later, 'ubuntu24.04', 'debian12'; '' when
not known (the role's validation then names mlnx_ofed_repo_distro). The decision lives in
module_utils/gpudirect_doca.py (one implementation, also used by the unit tests); this file
loads it by path, as Ansible loads filters.
"""

import os

import ansible.module_utils

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils import gpudirect_doca as _DOCA  # noqa: E402


def mlnx_ofed_doca_distro(release, os_family, distribution, version):
    return _DOCA.repo_distro(str(release), str(os_family), str(distribution), str(version))


class FilterModule:
    def filters(self):
        return {"mlnx_ofed_doca_distro": mlnx_ofed_doca_distro}
