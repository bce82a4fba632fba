"""Ansible filter: check role variables against the shared input rules.

``rules | gpudirect_input_errors`` -> list of messages (empty when all is well);
each role's ``tasks/validate.yml`` asserts it is empty before anything changes.
The rules live in ``module_utils/gpudirect_input_rules.py`` (one implementation,
also used by the unit tests); this file loads it by path, as Ansible loads filters.
"""

import os

from ansible.errors import AnsibleFilterError


import ansible.module_utils

# The project's module_utils, importable here as on the nodes (Ansible loads filter files by
# path and ships module_utils only to modules): the same file, one implementation.
_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils import gpudirect_input_rules as _RULES  # noqa: E402


def _plain(value):
    """Ansible's lazy containers and tagged strings as plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def gpudirect_input_errors(rules):
    if not isinstance(rules, (list, tuple)):
        raise AnsibleFilterError("gpudirect_input_errors: expected a list of rules, got %s" % type(rules).__name__)
    try:
        return _RULES.errors([_plain(rule) for rule in rules])
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_input_errors: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"gpudirect_input_errors": gpudirect_input_errors}
