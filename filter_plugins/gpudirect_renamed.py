"""The values a node still sets under the old names of the renamed roles' variables.

``hostvars[inventory_hostname] | gpudirect_renamed_vars(role)``
    ``role`` is a role renamed in 1.0.0 (gpudirect_nvidia_driver, ...). Returns
    ``[{"old", "new", "value"}, ...]``, one per old variable name that the node's host
    variables set (inventory, group_vars, host_vars, -e, set_fact; not role defaults)
    while the new name is not set, and prints a deprecation warning per old name: the
    old and the new name and the release that stops taking the old one. Where both
    names are set, the new one wins: the old name only gets the warning, which says so.
    Where the new name already holds the old one's value (an earlier entry point of the
    run copied it), nothing is returned and the warning is the plain one.
    The table of renamed variables is plugin_utils/gpudirect_renamed.py.

Each renamed role's entry points start with a task that sets the new names from this
list (``ansible.builtin.set_fact``), so an old name reaches the role, its own checks
(tasks/validate.yml) and its plan under the new one.
"""

import os

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display


import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_renamed as _RENAMED  # noqa: E402

_DISPLAY = Display()


def gpudirect_renamed_vars(variables, role):
    try:
        found = _RENAMED.renamed(variables, role)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_renamed_vars: %s" % exc)
    for entry in found:
        # one warning per message and run: Display keeps the deprecations it printed
        _DISPLAY.deprecated(entry["message"], version=_RENAMED.REMOVED_IN, collection_name="gpudirect.rdma")
    return [{"old": e["old"], "new": e["new"], "value": e["value"]} for e in found if not (e["both"] or e["taken"])]


class FilterModule:
    def filters(self):
        return {"gpudirect_renamed_vars": gpudirect_renamed_vars}
