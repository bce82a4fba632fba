"""Degraded PCIe links of GPUs and RDMA NICs, for the preflight stage.

The logic lives in ``plugin_utils/gpudirect_links.py`` (one implementation, unit-tested
there); this file loads it by path, since filters run on the controller where the
project's module_utils are not a package.
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

from ansible.module_utils import gpudirect_links as _links  # noqa: E402


def gpudirect_degraded_links(facts, mode="warn"):
    """The degraded-link findings of ``ansible_facts.gpudirect``, each with ``stops``
    (whether it stops the host under ``gpudirect_preflight_degraded_link: mode``)."""
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("gpudirect_degraded_links expects ansible_facts.gpudirect, got %r" % (facts,))
    # checked on every node, not only on one with a degraded link: a typo must not pass on healthy nodes
    if mode not in _links.MODES:
        raise AnsibleFilterError("gpudirect_preflight_degraded_link must be one of %s, got %r"
                                 % (", ".join(_links.MODES), mode))
    try:
        return [dict(f, stops=_links.stops_host(f, mode)) for f in _links.degraded_links(facts)]
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    """Degraded PCIe link findings."""

    def filters(self):
        return {"gpudirect_degraded_links": gpudirect_degraded_links}
