"""The hosts of a play, chosen from groups that may not exist yet.

``groups | gpudirect_hosts(pattern)``
    The hosts that Ansible's host pattern ``pattern`` selects (``a:b`` union,
    ``a:&b`` intersection, ``a:!b`` exclusion, in Ansible's order: unions, then
    intersections, then exclusions), from the ``groups`` magic variable, in inventory
    order (``groups.all``), not in the order the run added them to a group, which
    follows the order their results came back: a campaign's batches are the same nodes
    every run. A name that is neither a group nor a host selects nothing, silently.

Why: the runs group their nodes at run time (``gpudirect_unchanged``,
``gpudirect_disrupt``, ``kernel_update_pending``, made by ``add_host`` only when a
node belongs there). A play whose ``hosts:`` names such a group when it is empty
makes Ansible print "Could not match supplied host pattern, ignoring: ..." once per
play, in every normal run, which trains admins to ignore the warning that matters
(a typo in their own inventory). The stage plays therefore say::

    hosts: "{{ groups | gpudirect_hosts('gpu_nodes:!gpudirect_unchanged:!gpudirect_disrupt') }}"

``--limit`` still applies to the list, and an empty list makes Ansible print
"skipping: no hosts matched", as for an empty group.

The group ``gpudirect_held`` (nodes that an admin or the scheduler took out of service
before the run, held out of it by ``roles/gpudirect_drain`` tasks/state.yml) is left out
of every pattern that does not name it: no later play touches such a node.

Wildcards, regular expressions and ranges (``*``, ``~``, ``[``) are refused with
``AnsibleFilterError``: these plays name groups, and a pattern this filter would
read differently from Ansible must not select hosts quietly.
"""

from ansible.errors import AnsibleFilterError

# the run-time group of the nodes held out of the run, which every pattern leaves out
HELD = "gpudirect_held"


def _terms(pattern):
    if not isinstance(pattern, str) or not pattern.strip():
        raise AnsibleFilterError("gpudirect_hosts: expected a host pattern such as 'gpu_nodes:!gpudirect_disrupt', "
                                 "got %r" % (pattern,))
    terms = [t.strip() for t in pattern.replace(",", ":").split(":") if t.strip()]
    if not terms:
        raise AnsibleFilterError("gpudirect_hosts: %r names no group or host" % (pattern,))
    for term in terms:
        name = term.lstrip("&!")
        if not name or any(c in name for c in "*?~[]"):
            raise AnsibleFilterError("gpudirect_hosts: %r in %r: only group and host names, each optionally "
                                     "prefixed with & or !, are understood" % (term, pattern))
    return terms


def gpudirect_hosts(groups, pattern):
    if not isinstance(groups, dict) or "all" not in groups:
        raise AnsibleFilterError("gpudirect_hosts: expected the groups magic variable ({group: [host]}), got %s"
                                 % type(groups).__name__)
    terms = _terms(pattern)

    def select(name):
        if name in groups:
            return list(groups[name])
        return [name] if name in groups["all"] else []

    # Ansible's order: every union first, then each intersection, then each exclusion
    hosts = []
    for term in terms:
        if term[0] not in "&!":
            hosts += [h for h in select(term) if h not in hosts]
    for term in terms:
        if term[0] == "&":
            keep = set(select(term[1:]))
            hosts = [h for h in hosts if h in keep]
    for term in terms:
        if term[0] == "!":
            drop = set(select(term[1:]))
            hosts = [h for h in hosts if h not in drop]
    # the nodes held out of the run (roles/gpudirect_drain tasks/state.yml: out of service by
    # another hand before it) are in no later play, unless the pattern names their group
    if HELD not in [t.lstrip("&!") for t in terms]:
        held = set(groups.get(HELD, ()))
        hosts = [h for h in hosts if h not in held]
    # inventory order, whatever order the run added the nodes to its groups in (group_by
    # and add_host add them as their results come back): batches are the same every run
    rank = {h: i for i, h in enumerate(groups["all"])}
    return sorted(hosts, key=lambda h: rank.get(h, len(rank)))


class FilterModule:
    """gpudirect_hosts: a play's hosts from groups made at run time."""

    def filters(self):
        return {"gpudirect_hosts": gpudirect_hosts}
