"""Ansible filters of the rolling re-run: thin wrappers over plugin_utils/gpudirect_rolling.py
(the one implementation, which the unit tests import).

``plans | gpudirect_plan_disruption(reboot_reasons, os_reasons)``
    playbooks/plan.yml: the reasons a node must be drained and rolled (list of str).
``reboot_reasons | gpudirect_reboot_disruption(os_reasons)``
    playbooks/reboot_gate.yml: a pending reboot as disruption reasons (list of str).
``reasons | gpudirect_os_reboot_reasons(flag_policy[, left_out])``
    the OS's reboot reasons the run acts on (the reboot-required flag only with
    gpudirect_reboot_required_flag: reboot); with ``left_out`` those it only reports.
``plans | gpudirect_plan_changes``
    playbooks/plan.yml: what the deciding roles would change, "<role>: <sentence>" (list of str).
``nodes | gpudirect_rolling_unprotected(hostvars, playbook='site')``
    playbooks/plan.yml and kernel_update.yml: the refusal (str) of a run that would
    disrupt nodes that nothing drains first, naming each node and knob; '' when none.
``hosts_all | gpudirect_rolling_budget(hostvars, alive, batch[, held])``
    playbooks/rolling.yml and kernel_update.yml, before each batch: whether the campaign's
    budgets (gpudirect_rolling_max_failed_nodes, gpudirect_rolling_max_out_of_service) let
    it drain this batch ({stop, reason, failed, out_before}).
``hosts_all | gpudirect_rolling_drain_ahead(hostvars, alive, batch)``
    roles/gpudirect_drain tasks/drain_ahead.yml, in each batch: the nodes to drain now,
    ahead of their batch (gpudirect_rolling_lookahead), within the out-of-service budget.
``hosts | gpudirect_rolling_order(hostvars)``
    playbooks/rolling.yml and kernel_update.yml: the batch order, by name, or idle nodes
    first with gpudirect_rolling_idle_first.
``settings | gpudirect_drain_protection``
    roles/gpudirect_drain tasks/drain.yml: what one node's drain settings (a dict of the
    knobs) lack to drain it before a disruption (list of str, empty when protected).
``read | gpudirect_drain_state(scheduler, pattern, note)``
    roles/gpudirect_drain tasks/state.yml: the node's scheduler state before the run and
    whose it is ({text, out_of_service, owner: toolkit|other|None}).
``hosts | gpudirect_rolling_setting(hostvars, knob[, override, override_name])``
    site.yml: the checked value of ``gpudirect_rolling_batch`` or
    ``gpudirect_rolling_max_fail_percentage`` that every node of the rolling play agrees on;
    kernel_update.yml: ``override`` (gpudirect_kernel_update_serial, gpudirect_kernel_update_max_fail_percentage)
    replaces it when set, checked by the same rules under its own name.

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

from ansible.module_utils import gpudirect_rolling as _ROLLING  # noqa: E402


def gpudirect_plan_disruption(plans, reboot_reasons=None, os_reasons=None):
    try:
        return _ROLLING.disruption(plans, reboot_reasons, os_reasons)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_plan_disruption: %s" % exc)


def gpudirect_reboot_disruption(reboot_reasons, os_reasons=None):
    try:
        return _ROLLING.reboot_disruption(reboot_reasons, os_reasons)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_reboot_disruption: %s" % exc)


def gpudirect_os_reboot_reasons(reasons, flag_policy="report", left_out=False):
    try:
        if left_out:
            return _ROLLING.reboot_flag_only(reasons, flag_policy)
        return _ROLLING.os_reboot_reasons(reasons, flag_policy)
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_os_reboot_reasons: %s" % exc)


def gpudirect_plan_changes(plans):
    try:
        return _ROLLING.changes(plans)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_plan_changes: %s" % exc)


def gpudirect_rolling_setting(hosts, hostvars, knob, override=None, override_name=None):
    try:
        return _ROLLING.play_setting(hosts, hostvars, knob, override, override_name)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rolling_setting: %s" % exc)


def gpudirect_rolling_budget(hosts_all, hostvars, alive, batch_hosts, held=None):
    try:
        max_failed = _ROLLING.play_setting(list(hosts_all), hostvars, "gpudirect_rolling_max_failed_nodes")
        max_out = _ROLLING.play_setting(list(hosts_all), hostvars, "gpudirect_rolling_max_out_of_service")
        return _ROLLING.budget(list(hosts_all), hostvars, list(alive), list(batch_hosts), max_failed, max_out,
                               list(held or ()))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rolling_budget: %s" % exc)


def gpudirect_rolling_unprotected(nodes, hostvars, playbook="site"):
    try:
        what = "a kernel update and its reboot" if playbook == "kernel_update" else "a disruptive change"
        return _ROLLING.unprotected_message(_ROLLING.unprotected(nodes, hostvars), what)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rolling_unprotected: %s" % exc)


def gpudirect_drain_protection(settings):
    try:
        return _ROLLING.protection(settings)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("gpudirect_drain_protection: %s" % exc)


def gpudirect_drain_state(read, scheduler="command", pattern=None, note=None):
    try:
        return _ROLLING.scheduler_state(read, scheduler, pattern, note)
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_drain_state: %s" % exc)


def gpudirect_rolling_drain_ahead(hosts_all, hostvars, alive, batch_hosts):
    try:
        count = _ROLLING.play_setting(list(hosts_all), hostvars, "gpudirect_rolling_lookahead")
        max_out = _ROLLING.play_setting(list(hosts_all), hostvars, "gpudirect_rolling_max_out_of_service")
        return _ROLLING.drain_ahead(list(hosts_all), hostvars, list(alive), list(batch_hosts), count, max_out)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rolling_drain_ahead: %s" % exc)


def gpudirect_rolling_order(hosts, hostvars):
    try:
        return _ROLLING.order(list(hosts), hostvars)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_rolling_order: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "gpudirect_drain_protection": gpudirect_drain_protection,
            "gpudirect_drain_state": gpudirect_drain_state,
            "gpudirect_os_reboot_reasons": gpudirect_os_reboot_reasons,
            "gpudirect_plan_changes": gpudirect_plan_changes,
            "gpudirect_plan_disruption": gpudirect_plan_disruption,
            "gpudirect_reboot_disruption": gpudirect_reboot_disruption,
            "gpudirect_rolling_budget": gpudirect_rolling_budget,
            "gpudirect_rolling_drain_ahead": gpudirect_rolling_drain_ahead,
            "gpudirect_rolling_order": gpudirect_rolling_order,
            "gpudirect_rolling_setting": gpudirect_rolling_setting,
            "gpudirect_rolling_unprotected": gpudirect_rolling_unprotected,
        }
