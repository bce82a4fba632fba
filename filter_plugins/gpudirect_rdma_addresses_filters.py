"""Ansible filters of the gpudirect_rdma_addresses role: thin wrappers over
module_utils/gpudirect_rdma_addresses.py (the one implementation, which the unit tests import).

``map | gpudirect_rdma_addresses_wanted(pattern, index, offset)``
    roles/gpudirect_rdma_addresses tasks/validate.yml: the host's wanted addresses,
    ``{interface: [cidr]}``, checked (CIDR, pattern range); the map's entries replace the pattern's.
``wanted_by_host | gpudirect_rdma_addresses_duplicates``
    tasks/validate.yml: one sentence per address wanted twice among the play's hosts.

Bad input raises ``AnsibleFilterError`` naming the knob.
"""

import os

from ansible.errors import AnsibleFilterError

import ansible.module_utils

# The project's module_utils, importable here as on the nodes (Ansible loads filter files by
# path and ships module_utils only to modules): the same file, one implementation.
_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils import gpudirect_rdma_addresses as _ADDR  # noqa: E402


def gpudirect_rdma_addresses_wanted(mapping, pattern=None, index=0, offset=1):
    try:
        return _ADDR.wanted(mapping, pattern, index, offset)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rdma_addresses: %s" % exc)


def gpudirect_rdma_addresses_duplicates(by_host):
    if not isinstance(by_host, dict):
        raise AnsibleFilterError("gpudirect_rdma_addresses_duplicates: expects {host: {interface: [cidr]}}, got %r"
                                 % (by_host,))
    try:
        return _ADDR.duplicates(by_host)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rdma_addresses_duplicates: %s" % exc)


class FilterModule:
    def filters(self):
        return {
            "gpudirect_rdma_addresses_wanted": gpudirect_rdma_addresses_wanted,
            "gpudirect_rdma_addresses_duplicates": gpudirect_rdma_addresses_duplicates,
        }
