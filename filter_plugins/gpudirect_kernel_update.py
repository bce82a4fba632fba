"""Ansible filters of the kernel update's plan: thin wrappers over
module_utils/gpudirect_kernel_update.py (the one implementation, which the unit tests import).

``plans | kernel_update_campaign(target)``
    playbooks/kernel_update.yml, once per run: ``plans`` maps each node to its
    ``gpudirect_plan_kernel_update`` result; returns {target, source, pending: {node: reason},
    done: {node: reason}, errors: [sentence]} (module_utils/gpudirect_kernel_update.py
    ``campaign``). The nodes must update the same packages.
``campaign | kernel_update_campaign_lines(lost, refreshed)``
    the lines the plan prints: the target and where it came from, each node with what
    it gets and why, the nodes not planned (``lost``), and how to keep the target.
``packages | kernel_update_target_versions(target)``
    ``gpudirect_kernel_update_target`` (a version, or a mapping package: version) as a mapping.
``packages | kernel_update_install_names(target, method)``
    roles/gpudirect_kernel_update: the package specs that install exactly the target
    (``name=version`` for apt, ``name-version`` for dnf).

Bad input raises ``AnsibleFilterError`` with the message of the decision.
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

from ansible.module_utils import gpudirect_kernel_update as _KU  # noqa: E402


def kernel_update_campaign(plans, target=""):
    try:
        if not isinstance(plans, dict):
            raise ValueError("expected {node: gpudirect_plan_kernel_update result}, got %s" % type(plans).__name__)
        lists = {}
        for host in sorted(plans):
            packages = (plans[host] or {}).get("packages")
            if not isinstance(packages, dict):
                raise ValueError("%s has no gpudirect_plan_kernel_update result (got %r)" % (host, plans[host]))
            lists.setdefault(tuple(sorted(packages)), []).append(host)
        if len(lists) > 1:
            return {"target": {}, "source": "", "pending": {}, "done": {},
                    "errors": ["the nodes update different kernel packages (%s): one campaign rolls one kernel out, so "
                               "run kernel_update.yml once per distribution (--limit), or set gpudirect_kernel_update_packages "
                               "alike" % "; ".join("%s on %s" % (", ".join(k), ", ".join(h)) for k, h in sorted(lists.items()))]}
        packages = list(next(iter(lists))) if lists else []
        if not packages:
            return {"target": {}, "source": "", "pending": {}, "done": {}, "errors": []}
        return _KU.campaign(dict(plans), target, packages)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("kernel_update_campaign: %s" % exc)


def kernel_update_campaign_lines(campaign, lost=(), refreshed=True):
    try:
        return _KU.campaign_lines(campaign, list(lost or []), bool(refreshed))
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("kernel_update_campaign_lines: %s" % exc)


def kernel_update_target_versions(packages, target):
    try:
        return _KU.normalise_target(target, list(packages))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("kernel_update_target_versions: %s" % exc)


def kernel_update_install_names(packages, target, method):
    try:
        if not isinstance(target, dict) or set(packages) - set(target):
            raise ValueError("the campaign's target %r does not name every package of %r" % (target, packages))
        return _KU.install_names(list(packages), target, method)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("kernel_update_install_names: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "kernel_update_campaign": kernel_update_campaign,
            "kernel_update_campaign_lines": kernel_update_campaign_lines,
            "kernel_update_install_names": kernel_update_install_names,
            "kernel_update_target_versions": kernel_update_target_versions,
        }
