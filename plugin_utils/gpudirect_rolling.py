"""Decisions of the rolling re-run (site.yml, issue #13): which nodes need a
disruptive change, and the batch settings of the one play that disrupts them.

``disruption(plans, reboot_reasons, os_reasons)``
    The reasons a node must be drained and rolled in a batch: every sentence of
    the ``disruption`` list of each role's plan (``<role>_plan``, registered by
    ``roles/<role>/tasks/plan.yml``), then the reboot reasons already pending,
    then the operating system's own (``gpudirect_reboot_os_reasons``). Empty:
    the node's changes run with every other such node at once, undrained.

``reboot_disruption(reboot_reasons, os_reasons)``
    The reboot part alone, for nodes whose undrained stages asked for a reboot
    after the plan pass (playbooks/reboot_gate.yml).

``changes(plans)``
    What the deciding roles would change, each sentence naming its role, for
    the plan pass's per-node line.

``batch(value)`` / ``max_fail_percentage(value)``
    The knobs ``gpudirect_rolling_batch`` (the play's ``serial``: a number of
    nodes, or a percentage of the nodes to disrupt such as ``"10%"``) and
    ``gpudirect_rolling_max_fail_percentage`` (0-100), checked and normalised.

``unprotected(nodes, hostvars)``
    The nodes to disrupt whose running jobs nothing protects, each with what is
    missing: a drain (``gpudirect_drain_command``), a wait until the node is idle
    (``gpudirect_drain_wait_command``, or ``gpudirect_drain_command_waits`` for a
    drain command that itself waits, as ``kubectl drain`` does) and a resume
    (``gpudirect_drain_resume_command``), unless the inventory says the node runs
    no jobs (``gpudirect_drain_nodes_run_no_jobs``). Empty: every disruption is
    drained first. The plays refuse the whole run before any change otherwise.

``drain_ahead(hosts_all, hostvars, alive, batch_hosts, count, max_out)``
    The nodes to drain now, ahead of their batch (``gpudirect_rolling_lookahead``): the next
    ``count`` nodes after the batch, so that their waits for running jobs overlap the
    batches before them instead of adding up; held back where the out-of-service budget
    has no room for them.

``order(hosts, hostvars, idle_first)``
    The rolling play's node order: by name, or (``gpudirect_rolling_idle_first``) the
    nodes that were idle when the plan pass looked first, each group by name.

``play_setting(hosts, hostvars, knob)``
    One value of a batch knob for the whole play: ``serial`` and
    ``max_fail_percentage`` are play keywords, which Ansible templates without
    inventory variables, so site.yml reads the knob from the nodes of the play;
    nodes that disagree are an error naming them.

Bad input raises ``ValueError`` with a message that names the knob or the role.
"""

from __future__ import annotations

import re

# The roles whose read-only plan (tasks/plan.yml, fact <role>_plan) the plan pass
# runs, in the order the install stages apply them.
PLANNED_ROLES = ("gpudirect_host_prereqs", "gpudirect_mlnx_ofed", "gpudirect_nic_config", "gpudirect_rdma_addresses", "gpudirect_roce_qos",
                 "gpudirect_nvidia_driver", "gpudirect_peermem", "gpudirect_pcie_acs")

DEFAULTS = {
    "gpudirect_rolling_batch": 1,
    "gpudirect_rolling_max_fail_percentage": 0,
    # the campaign's budgets (issue #30, outcome 1): None is no budget
    "gpudirect_rolling_max_failed_nodes": None,
    "gpudirect_rolling_max_out_of_service": None,
    # drain this many nodes ahead of their batch (issue #30, outcome 4): 0 is none
    "gpudirect_rolling_lookahead": 0,
    "gpudirect_rolling_idle_first": False,
}

_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")


def _sentences(value, what):
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError("%s must be a list of sentences, got %s %r" % (what, type(value).__name__, value))
    out = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ValueError("%s[%d] must be a non-empty sentence, got %r" % (what, index, item))
        out.append(item.strip())
    return out


def _check_plans(plans):
    """Every planned role, and no other, maps to a plan result (a mapping)."""
    if not isinstance(plans, dict):
        raise ValueError("the plans must be a mapping of role name to its <role>_plan, got %s" % type(plans).__name__)
    unknown = sorted(set(plans) - set(PLANNED_ROLES))
    if unknown:
        raise ValueError("no plan is expected from %s; planned roles: %s" % (", ".join(unknown), ", ".join(PLANNED_ROLES)))
    for role in PLANNED_ROLES:
        plan = plans.get(role)
        if not isinstance(plan, dict):
            raise ValueError("%s_plan is %s: roles/%s/tasks/plan.yml must register the fact %s_plan "
                             "(a mapping with 'changes' and 'disruption' lists)"
                             % (role, "missing" if plan is None else "a " + type(plan).__name__, role, role))


def disruption(plans, reboot_reasons=None, os_reasons=None):
    """Reasons (list of str) the node needs a disruptive change; [] when none.

    ``plans`` maps each role of PLANNED_ROLES to its ``<role>_plan`` result
    (None when the plan did not register one: an error, since every planned
    role must have said what it would do). Each reason names its source, e.g.
    ``"gpudirect_nvidia_driver: nvidia modules reload: 550.90.07 -> 570.86.15"``.
    """
    reasons = _role_sentences(plans, "disruption",
                              "what would interrupt running jobs (an empty list when nothing would)")
    return _unique(reasons + reboot_disruption(reboot_reasons, os_reasons))


def reboot_disruption(reboot_reasons=None, os_reasons=None):
    """The reboots pending on the node, as disruption reasons: the stages' requests
    (gpudirect_reboot_reasons), then the operating system's own reasons."""
    reasons = ["reboot requested: %s" % r for r in _sentences(reboot_reasons, "gpudirect_reboot_reasons")]
    reasons += ["reboot (operating system): %s" % r for r in _sentences(os_reasons, "the OS reboot reasons")]
    return _unique(reasons)


# the reboot-required flag files (Debian/Ubuntu's update-notifier, needrestart, unattended-upgrades)
_REBOOT_FLAG = re.compile(r"^/(var/)?run/reboot-required\b")
REBOOT_FLAG_POLICIES = ("report", "reboot")


def _split_reboot_reasons(reasons, flag_policy):
    """(acted on, only reported) of the OS reboot reasons under ``flag_policy``."""
    if flag_policy not in REBOOT_FLAG_POLICIES:
        raise ValueError("gpudirect_reboot_required_flag: %r is not one of %s"
                         % (flag_policy, ", ".join(REBOOT_FLAG_POLICIES)))
    kept, reported = [], []
    for reason in _sentences(reasons, "the OS reboot reasons"):
        (reported if flag_policy == "report" and _REBOOT_FLAG.match(reason) else kept).append(reason)
    return kept, reported


def os_reboot_reasons(reasons, flag_policy="report"):
    """The operating system's reboot reasons the run acts on: a default boot kernel other than the
    running one always; the reboot-required flag file (``/run/reboot-required exists (packages:
    ...)``) only with ``flag_policy`` ``reboot`` (``gpudirect_reboot_required_flag``): a package
    update of any kind sets it, and by default it is reported, not a reason to drain and reboot."""
    return _split_reboot_reasons(reasons, flag_policy)[0]


def reboot_flag_only(reasons, flag_policy="report"):
    """The OS reboot reasons the run reports but does not act on (``os_reboot_reasons`` left them out)."""
    return _split_reboot_reasons(reasons, flag_policy)[1]


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def changes(plans):
    """Every sentence of each plan's ``changes`` list, as "<role>: <sentence>", in stage order."""
    return _role_sentences(plans, "changes",
                           "what the role would change (an empty list when the node is converged)")


def _role_sentences(plans, key, meaning):
    """Every sentence of each plan's ``key`` list, as "<role>: <sentence>", in stage order; a plan
    without that list raises ValueError, saying the list must hold ``meaning``."""
    _check_plans(plans)
    out = []
    for role in PLANNED_ROLES:
        plan = plans[role]
        if key not in plan:
            raise ValueError("%s_plan has no '%s' list: the plan must say %s" % (role, key, meaning))
        out.extend("%s: %s" % (role, s) for s in _sentences(plan[key], "%s_plan.%s" % (role, key)))
    return out


def batch(value, name="gpudirect_rolling_batch"):
    """gpudirect_rolling_batch as the play's serial: an int >= 1 or "N%" with 1 <= N <= 100, or
    a list of those as Ansible's serial takes it (a canary: [1, 5, "10%"], the last size
    repeating until every node is done); a string "1, 5, 10%" is the same list."""
    if isinstance(value, str) and "," in value:
        value = [item for item in (part.strip() for part in value.split(",")) if item]
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError('%s=[] must list at least one batch size, e.g. [1, 5, "10%%"]' % name)
        sizes = []
        for item in value:
            if isinstance(item, (list, tuple, dict)):
                raise ValueError("%s=%r: each batch size is a number of nodes or a percentage, "
                                 "not %s" % (name, value, type(item).__name__))
            try:
                sizes.append(_one_batch(item, name))
            except ValueError as exc:
                # "gpudirect_rolling_batch=0 must be ...": the rule, said of the item
                raise ValueError("%s=%r: item %r must %s" % (name, value, item, str(exc).split(" must ", 1)[-1]))
        return sizes
    return _one_batch(value, name)


def _one_batch(value, name="gpudirect_rolling_batch"):
    if isinstance(value, bool):
        raise ValueError("%s=%r must be a number of nodes (1 or more) or a percentage "
                         "such as \"10%%\", not a boolean" % (name, value))
    if isinstance(value, int):
        if value < 1:
            raise ValueError("%s=%d must be 1 or more nodes (or a percentage such as \"10%%\")"
                             % (name, value))
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return _one_batch(int(text), name)
        match = _PERCENT.match(text)
        if match:
            percent = int(match.group(1))
            if not 1 <= percent <= 100:
                raise ValueError("%s=%r must be a percentage from 1%% to 100%%" % (name, value))
            return "%d%%" % percent
    raise ValueError("%s=%r must be a number of nodes (1 or more) or a percentage "
                     "such as \"10%%\"" % (name, value))


def max_fail_percentage(value, name="gpudirect_rolling_max_fail_percentage"):
    """gpudirect_rolling_max_fail_percentage as an int from 0 to 100."""
    if isinstance(value, bool):
        raise ValueError("%s=%r must be a whole number from 0 to 100, "
                         "not a boolean" % (name, value))
    number = value
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if not isinstance(number, int) or not 0 <= number <= 100:
        raise ValueError("%s=%r must be a whole number from 0 to 100 "
                         "(0: any failed node stops the run before the next batch)" % (name, value))
    return number


def node_budget(value, name):
    """A budget in nodes: None (none), a whole number >= 0, or "N%" (0-100) of the play's nodes."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    if isinstance(value, bool):
        raise ValueError("%s=%r must be a number of nodes (0 or more) or a percentage such as \"5%%\", not a boolean"
                         % (name, value))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%s=%d must be 0 or more nodes (or a percentage such as \"5%%\")" % (name, value))
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        match = _PERCENT.match(text)
        if match and 0 <= int(match.group(1)) <= 100:
            return "%d%%" % int(match.group(1))
    raise ValueError("%s=%r must be a number of nodes (0 or more), a percentage such as \"5%%\", or empty for no "
                     "budget" % (name, value))


def lookahead(value, name="gpudirect_rolling_lookahead"):
    """gpudirect_rolling_lookahead: a whole number of nodes, 0 or more."""
    if isinstance(value, bool):
        raise ValueError("%s=%r must be a whole number of nodes (0 or more), not a boolean" % (name, value))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < 0:
        raise ValueError("%s=%r must be a whole number of nodes, 0 (none: each node is drained at its batch) or more"
                         % (name, value))
    return value


def _boolean(value, name, empty_is_false=False):
    """A YAML boolean or its text (true/yes/on/1, false/no/off/0; "" too with ``empty_is_false``),
    else ValueError naming the knob."""
    words = ("true", "yes", "on", "1", "false", "no", "off", "0") + (("",) if empty_is_false else ())
    if isinstance(value, str) and value.strip().lower() in words:
        return value.strip().lower() in ("true", "yes", "on", "1")
    if not isinstance(value, bool):
        raise ValueError("%s=%r must be true or false" % (name, value))
    return value


def idle_first(value, name="gpudirect_rolling_idle_first"):
    """gpudirect_rolling_idle_first: true or false."""
    return _boolean(value, name)


_CHECKS = {
    "gpudirect_rolling_lookahead": lookahead,
    "gpudirect_rolling_idle_first": idle_first,
    "gpudirect_rolling_batch": batch,
    "gpudirect_rolling_max_fail_percentage": max_fail_percentage,
    "gpudirect_rolling_max_failed_nodes": node_budget,
    "gpudirect_rolling_max_out_of_service": node_budget,
}


def check(knob, value, name=None):
    """The normalised value of one batch knob (ValueError naming the knob when bad).
    ``name``: the knob the value came from when it is another one with the same rules
    (kernel_update.yml's gpudirect_kernel_update_serial and gpudirect_kernel_update_max_fail_percentage)."""
    if knob not in _CHECKS:
        raise ValueError("%r is not a batch knob (%s)" % (knob, ", ".join(sorted(_CHECKS))))
    return _CHECKS[knob](DEFAULTS[knob] if value is None else value, name or knob)


def _nodes_of(value, total):
    """A checked budget as a number of nodes out of ``total`` (a percentage rounds down)."""
    if isinstance(value, str) and value.endswith("%"):
        return int(total * int(value[:-1]) // 100)
    return value


def budget(hosts_all, hostvars, alive, batch_hosts, max_failed=None, max_out=None, held=()):
    """Whether the campaign may drain the next batch (issue #30, outcome 1).

    ``hosts_all``: the rolling play's nodes (ansible_play_hosts_all); ``alive``: those
    still in the run (ansible_play_hosts); ``batch_hosts``: the batch about to start
    (ansible_play_batch). Counted over the whole run, not per batch:

    * failed: nodes of earlier batches that started (``gpudirect_drain_stage``) and were
      failed, lost or left drained by this run; the campaign stops once more than
      ``max_failed`` (gpudirect_rolling_max_failed_nodes) have;
    * out of service with this batch: those, the nodes out of service before the run
      (``gpudirect_drain_out_before``, as read so far) and the batch's own nodes; more
      than ``max_out`` (gpudirect_rolling_max_out_of_service) stops the campaign before
      this batch is drained. ``held``: the nodes held out of the run, out of service by
      another hand (group gpudirect_held), which count as out of service before it.

    Returns {"stop": bool, "reason": sentence or "", "failed": [...], "out_before": [...]}.
    """
    batch_set = set(batch_hosts)
    failed, out_before, ahead = _out_of_service(hosts_all, hostvars, alive, batch_set)
    out_before += sorted(str(h) for h in held or () if str(h) not in out_before)
    total = len(hosts_all)
    cap_failed = _nodes_of(check("gpudirect_rolling_max_failed_nodes", max_failed), total)
    cap_out = _nodes_of(check("gpudirect_rolling_max_out_of_service", max_out), total)
    out = {"stop": False, "reason": "", "failed": failed, "out_before": out_before}
    not_touched = "Nothing was drained or changed on %s; run the playbook again once the nodes above are fixed" \
        % ", ".join(sorted(batch_set))
    if cap_failed is not None and len(failed) > cap_failed:
        out.update(stop=True, reason="the campaign stops: %d node(s) failed or were left drained by this run (%s), "
                   "more than gpudirect_rolling_max_failed_nodes=%s allows. %s"
                   % (len(failed), ", ".join(failed), max_failed, not_touched))
        return out
    if cap_out is not None:
        down = sorted(set(failed) | set(out_before) | batch_set | set(ahead))
        if len(down) > cap_out:
            out.update(stop=True, reason="the campaign stops before this batch: with it, %d node(s) would be out of "
                       "service (%d failed or left drained by this run, %d out of service before it: %s; %d drained "
                       "ahead of their batch; %d in this batch), more than gpudirect_rolling_max_out_of_service=%s "
                       "allows (%d of %d nodes). %s"
                       % (len(down), len(failed), len(out_before), ", ".join(out_before) or "none",
                          len(set(ahead) - set(out_before)), len(batch_set - set(out_before) - set(ahead)), max_out,
                          cap_out, total, not_touched))
    return out


def _variables(hostvars, host):
    return hostvars.get(host, {}) if isinstance(hostvars, dict) else hostvars[host]


def _out_of_service(hosts_all, hostvars, alive, batch_set):
    """``(failed, out_before, ahead)`` over the rolling play's nodes, leaving the batch's own out of
    ``failed`` and ``ahead``: failed, lost or left drained by this run; out of service before it (as read
    so far); drained ahead of a batch still to come (``gpudirect_drain_ahead``, not yet started)."""
    alive_set = set(alive)
    failed, out_before, ahead = [], [], []
    for host in hosts_all:
        variables = _variables(hostvars, host)
        # an admin's drain, or an earlier run's of this toolkit still in place
        if _flag(variables, "gpudirect_drain_out_before") or _flag(variables, "gpudirect_drain_own_before"):
            out_before.append(str(host))
        # skipped (its jobs outlasted the wait): back in service, untouched, not a failure
        if host in batch_set or variables.get("gpudirect_drain_skipped"):
            continue
        if variables.get("gpudirect_drain_stage") is None:
            if host in alive_set and _flag(variables, "gpudirect_drain_ahead"):
                ahead.append(str(host))
            continue
        if host not in alive_set or variables.get("gpudirect_drain_left_drained") \
                or variables.get("__gpudirect_drain_failure"):
            failed.append(str(host))
    return failed, out_before, ahead


def drain_ahead(hosts_all, hostvars, alive, batch_hosts, count, max_out=None):
    """The nodes to drain now, ahead of their batch (issue #30, outcome 4).

    The window is the ``count`` nodes that follow this batch in the play's order and have not
    started (``gpudirect_drain_stage`` unset), still in the run. Of those, the ones not drained
    ahead yet and not out of service before the run are drained now: their waits for running
    jobs overlap the batches before them. With an out-of-service budget (``max_out``), only as
    many as it has room for beside the nodes already out (failed, out before the run, drained
    ahead, this batch); the rest are held back, named, and drained at a later batch.

    A node of the window without the drain settings the plan pass rendered for it
    (``gpudirect_drain_rendered``) is drained at its own batch, and the reason says so.

    Returns ``{"drain": [...], "held_back": [...], "reason": sentence or ""}``.
    """
    count = check("gpudirect_rolling_lookahead", count)
    out = {"drain": [], "held_back": [], "reason": ""}
    if count == 0:
        return out
    order = [str(h) for h in hosts_all]
    batch_set = set(str(h) for h in batch_hosts)
    alive_set = set(str(h) for h in alive)
    positions = [order.index(h) for h in batch_set if h in order]
    after = order[max(positions) + 1:] if positions else order
    window = [h for h in after if h in alive_set and h not in batch_set
              and _variables(hostvars, h).get("gpudirect_drain_stage") is None][:count]
    failed, out_before, ahead = _out_of_service(order, hostvars, alive_set, batch_set)
    wanted = [h for h in window if h not in ahead and h not in out_before]
    # the node's own drain settings, rendered for it by the plan pass (gpudirect_drain render)
    unplanned = [h for h in wanted if not _variables(hostvars, h).get("gpudirect_drain_rendered")]
    wanted = [h for h in wanted if h not in unplanned]
    if unplanned:
        out["reason"] = ("%s drained at their own batch: this run's plan pass did not keep their drain settings "
                         "(gpudirect_drain_rendered)" % ", ".join(unplanned))
    cap_out = _nodes_of(check("gpudirect_rolling_max_out_of_service", max_out), len(order))
    if cap_out is not None:
        down = set(failed) | set(out_before) | set(ahead) | batch_set
        room = max(cap_out - len(down), 0)
        if len(wanted) > room:
            out["held_back"] = wanted[room:]
            out["reason"] = "; ".join(r for r in (out["reason"], (
                "%s held back from draining ahead: %d node(s) are out of service already (failed, out before the "
                "run, drained ahead, this batch) and gpudirect_rolling_max_out_of_service=%s allows %d; drained at "
                "their own batch instead" % (", ".join(out["held_back"]), len(down), max_out, cap_out))) if r)
            wanted = wanted[:room]
    out["drain"] = wanted
    return out


def order(hosts, hostvars, first_idle=None):
    """The rolling play's nodes in batch order: by name; with ``gpudirect_rolling_idle_first`` (read from
    the nodes when ``first_idle`` is None), those the plan pass found idle (``gpudirect_drain_idle_now``)
    first, so that the first batches wait least, each group by name."""
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise ValueError("expected a list of host names, got %s" % type(hosts).__name__)
    names = sorted(str(h) for h in hosts)
    wanted = play_setting(names, hostvars, "gpudirect_rolling_idle_first") if first_idle is None \
        else check("gpudirect_rolling_idle_first", first_idle)
    if not wanted:
        return names
    idle = []
    for name in names:
        try:
            variables = hostvars[name]
        except KeyError:
            variables = {}
        if _flag(variables, "gpudirect_drain_idle_now"):
            idle.append(name)
    return idle + [n for n in names if n not in idle]


def play_setting(hosts, hostvars, knob, override=None, override_name=None):
    """The one value of ``knob`` for the play over ``hosts`` (default when no host sets it).

    ``hostvars`` maps a host name to its variables (Ansible's hostvars). Every host
    must agree: a batch size is a property of the play, not of a node. ``override``
    (not None), from the knob ``override_name``, replaces it, checked by the same rules.
    """
    if override is not None:
        return check(knob, override, override_name)
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise ValueError("expected a list of host names, got %s" % type(hosts).__name__)
    values = {}
    for host in hosts:
        try:
            variables = hostvars[host]
        except KeyError:  # ansible-playbook --syntax-check templates play keywords without host variables
            continue
        raw = variables[knob] if knob in variables else None
        value = check(knob, raw)
        # a list (canary batches) is grouped by its items
        values.setdefault(tuple(value) if isinstance(value, list) else value, []).append(str(host))
    if not values:
        return check(knob, None)
    if len(values) > 1:
        raise ValueError("%s differs between the nodes of the rolling play (%s): it sets the play's batches, "
                         "so set it once for all of them (group_vars/all, or -e)"
                         % (knob, "; ".join("%r on %s" % (list(v) if isinstance(v, tuple) else v, ", ".join(h))
                                            for v, h in values.items())))
    value = next(iter(values))
    return list(value) if isinstance(value, tuple) else value


# the knobs that protect a node's running jobs from a disruption (roles/gpudirect_drain)
PROTECTION_KNOBS = ("gpudirect_drain_command", "gpudirect_drain_wait_command", "gpudirect_drain_resume_command")


def _flag(variables, knob):
    return _boolean(variables.get(knob, False), knob, empty_is_false=True)


def protection(variables):
    """What a node's variables lack to drain it before a disruption: a list of sentences
    naming the knobs (empty: protected, or declared to run no jobs)."""
    if _flag(variables, "gpudirect_drain_nodes_run_no_jobs"):
        return []
    # built-in Slurm support drains, waits (until DRAINED) and resumes through scontrol
    if variables.get("gpudirect_drain_scheduler") == "slurm":
        return []
    missing = []
    if not variables.get("gpudirect_drain_command"):
        missing.append("no drain (gpudirect_drain_command is empty)")
    if not variables.get("gpudirect_drain_wait_command") and not _flag(variables, "gpudirect_drain_command_waits"):
        missing.append("no wait until the node is idle (gpudirect_drain_wait_command is empty and "
                       "gpudirect_drain_command_waits is not true: a drain such as Slurm's "
                       "`scontrol update state=drain` returns at once, while jobs still run)")
    if not variables.get("gpudirect_drain_resume_command"):
        missing.append("no resume (gpudirect_drain_resume_command is empty)")
    return missing


SCHEDULERS = ("command", "slurm")


def scheduler_state(read, scheduler="command", pattern=None, note=None):
    """The node's scheduler state from before the run touched it, and whose it is:
    ``{text, out_of_service, owner}``, owner ``toolkit`` (an earlier run of this toolkit
    drained it: its run was killed or lost, or it left the node drained on purpose),
    ``other`` (an admin's drain, the scheduler's own DOWN) or None (in service).

    ``read``: with ``scheduler`` ``slurm`` the result of the module gpudirect_slurm_node
    (action query), whose ``node`` status says the owner from the drain's reason; with
    ``command`` the registered result of ``gpudirect_drain_state_command``, judged by
    ``pattern`` (``gpudirect_drain_state_out_of_service_pattern``). A command's output says no
    reason this code can trust, so there an out-of-service node is the toolkit's own only
    when an earlier run's note is on the node (``note``: ``gpudirect_drain_left_behind``).
    None when nothing was read (no state command): in service as far as the run knows."""
    if scheduler not in SCHEDULERS:
        raise ValueError("gpudirect_drain_scheduler: %r is not one of %s" % (scheduler, ", ".join(SCHEDULERS)))
    if not isinstance(read, dict) or read.get("skipped"):
        return None
    if scheduler == "slurm":
        status = read.get("node")
        if not isinstance(status, dict):
            raise ValueError("gpudirect_slurm_node returned no node status: %r" % (read,))
        out = bool(status.get("out_of_service"))
        owner = status.get("owner") if out else None
        if out and owner not in ("toolkit", "other"):
            raise ValueError("gpudirect_slurm_node: node %s is out of service with an unknown owner %r"
                             % (status.get("name"), owner))
        text = str(status.get("state") or "")
        if status.get("reason"):
            text += ', reason "%s"' % status["reason"]
        return {"text": text, "out_of_service": out, "owner": owner}
    text = str(read.get("stdout") or "").strip()
    try:
        out = bool(re.search(pattern or r"(?!)", text))
    except re.error as exc:
        raise ValueError("gpudirect_drain_state_out_of_service_pattern: %r is not a regular expression: %s"
                         % (pattern, exc))
    return {"text": text, "out_of_service": out, "owner": (("toolkit" if note else "other") if out else None)}


def unprotected(nodes, hostvars):
    """``{node: [what is missing, ...]}`` for the nodes to disrupt that nothing drains first."""
    if isinstance(nodes, str) or not isinstance(nodes, (list, tuple)):
        raise ValueError("expected a list of host names, got %s" % type(nodes).__name__)
    out = {}
    for node in nodes:
        missing = protection(hostvars[node] if node in hostvars else {})
        if missing:
            out[str(node)] = missing
    return out


def unprotected_message(found, what="a disruptive change"):
    """The refusal of a run that would disrupt ``found`` (``unprotected``'s result) undrained."""
    if not found:
        return ""
    return ("Refusing to start: %d node(s) need %s (driver reload, OFED restart or reboot) and nothing "
            "drains them first, so running jobs would be interrupted. Nothing was changed on any node. %s. "
            "Set gpudirect_drain_command, gpudirect_drain_wait_command (or gpudirect_drain_command_waits: true) "
            "and gpudirect_drain_resume_command for your scheduler (inventory/example/group_vars/gpu_nodes/drain.yml "
            "has Slurm and Kubernetes examples), or, for nodes that run no jobs (new servers not yet in service), "
            "gpudirect_drain_nodes_run_no_jobs: true."
            % (len(found), what, "; ".join("%s: %s" % (n, ", ".join(m)) for n, m in sorted(found.items()))))

