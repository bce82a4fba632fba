"""Ansible filters of the gpudirect_nic_config role: thin wrappers over
module_utils/gpudirect_nic_config.py (the one implementation, which the module and the unit
tests use too).

``pins | gpudirect_nic_config_firmware_problem``
    roles/gpudirect_nic_config tasks/validate.yml: the sentence that says what is wrong with
    gpudirect_nic_config_firmware (the first bad entry, named by its index), or "" when every
    entry is a well-formed pinned image.
"""

import os

import ansible.module_utils

# The project's module_utils, importable here as on the nodes (Ansible loads filter files by
# path and ships module_utils only to modules): the same file, one implementation.
_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils import gpudirect_nic_config as _NIC  # noqa: E402


def gpudirect_nic_config_firmware_problem(pins):
    try:
        _NIC.validate_firmware_pins(pins)
    except ValueError as exc:
        return str(exc)
    return ""


class FilterModule:
    def filters(self):
        return {"gpudirect_nic_config_firmware_problem": gpudirect_nic_config_firmware_problem}
