"""Degraded PCIe links of GPUs and RDMA NICs, for the preflight stage.

The logic lives in ``module_utils/gpudirect_links.py`` (one implementation, unit-tested
there); this file loads it by path, since filters run on the controller where the
project's module_utils are not a package.
"""

import importlib.util
import os

from ansible.errors import AnsibleFilterError

_spec = importlib.util.spec_from_file_location(
    "_gpudirect_links_module_util",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "gpudirect_links.py"))
_links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_links)


def gpudirect_degraded_links(facts, mode="warn"):
    """The degraded-link findings of ``ansible_facts.gpudirect``, each with ``stops``
    (whether it stops the host under ``gpudirect_preflight_degraded_link: mode``)."""
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("gpudirect_degraded_links expects ansible_facts.gpudirect, got %r" % (facts,))
    try:
        return [dict(f, stops=_links.stops_host(f, mode)) for f in _links.degraded_links(facts)]
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    """Degraded PCIe link findings."""

    def filters(self):
        return {"gpudirect_degraded_links": gpudirect_degraded_links}
