"""Ansible filter: check role variables against the shared input rules.

``rules | gpudirect_input_errors`` -> list of messages (empty when all is well);
each role's ``tasks/validate.yml`` asserts it is empty before anything changes.
The rules live in ``plugin_utils/gpudirect_input_rules.py`` (one implementation,
also used by the unit tests); this file loads it by path, as Ansible loads filters.
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
