"""Ansible filter: check role variables against the shared input rules.

``rules | gpudirect_input_errors`` -> list of messages (empty when all is well);
each role's ``tasks/validate.yml`` asserts it is empty before anything changes.
The rules live in ``module_utils/gpudirect_input_rules.py`` (one implementation,
also used by the unit tests); this file loads it by path, as Ansible loads filters.
"""

import importlib.util
import os

from ansible.errors import AnsibleFilterError


def _load_rules():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "module_utils", "gpudirect_input_rules.py")
    spec = importlib.util.spec_from_file_location("_gpudirect_input_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RULES = _load_rules()


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
