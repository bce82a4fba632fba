# -*- coding: utf-8 -*-
"""The fabric ring of gpudirect_verify (``gpudirect_verify_fabric: ring``): order, edges, labels.

Pure functions, no Ansible imports (unit-tested in tests/unit/test_gpudirect_ring.py,
used by filter_plugins/gpudirect_verify.py).

The members of a ring are the nodes of one play batch that verify. They are sorted in a
natural order (``node2`` before ``node10``; ties by the plain name), and each node writes
into the next one (``gpudirect_loopback`` client, ``peer: <next address>``) while it
serves the previous one (``listen: true``). Every member is therefore written into
exactly once and writes exactly once: n edges for n >= 3 nodes; for 2 nodes the ring is
the pair both ways (a -> b and b -> a); one node alone has no edge.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The knob that gives a node its address on the RDMA network (the role's variable).
ADDRESS_KNOB = "gpudirect_verify_pair_address"


class RingError(ValueError):
    """The ring cannot be formed (a member without address, two members on one address)."""


def natural_key(name):
    parts = re.split(r"(\d+)", name)
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts] + [(2, 0, name)]


def ring_order(hosts):
    """The members in ring order: natural sort of the names, duplicates dropped."""
    names = []
    for host in hosts or []:
        if not isinstance(host, str) or not host:
            raise RingError("ring member names must be non-empty strings, got %r" % (host,))
        if host not in names:
            names.append(host)
    return sorted(names, key=natural_key)


def plan_ring(members, knob=ADDRESS_KNOB):
    """The edges of the ring over ``members`` (``{host: address}``, an address of None or ''
    meaning none is known), in ring order: ``[{from, from_address, to, to_address}]``.

    Raises RingError, naming every node and the knob, when a member has no address, and
    naming the nodes when two members share an address (one would write into itself).
    """
    if not isinstance(members, dict):
        raise RingError("ring members must be a mapping of host to address, got %r" % (members,))
    order = ring_order(list(members))
    missing = [h for h in order if not isinstance(members[h], str) or not members[h].strip()]
    if missing:
        raise RingError(
            "gpudirect_verify_fabric: ring needs the address of every node on the RDMA network; %s %s none: "
            "set %s for %s (host_vars), or give %s an ansible_host."
            % (", ".join(missing), "has" if len(missing) == 1 else "have", knob,
               "it" if len(missing) == 1 else "each", "it" if len(missing) == 1 else "them"))
    seen = {}
    for host in order:
        seen.setdefault(members[host].strip(), []).append(host)
    shared = ["%s (%s)" % (address, ", ".join(hosts)) for address, hosts in sorted(seen.items()) if len(hosts) > 1]
    if shared:
        raise RingError(
            "gpudirect_verify_fabric: ring needs a distinct address per node, but nodes share one: %s. A node "
            "would write into itself, not across the fabric: set %s of each node to its own address on the RDMA "
            "network." % ("; ".join(shared), knob))
    if len(order) < 2:
        return []
    return [{"from": host, "from_address": members[host].strip(),
             "to": order[(i + 1) % len(order)], "to_address": members[order[(i + 1) % len(order)]].strip()}
            for i, host in enumerate(order)]


def neighbours(edges, host):
    """``{"next": edge this host writes, "prev": edge written into this host}`` (None when absent)."""
    found = {"next": None, "prev": None}
    for edge in edges or []:
        if edge.get("from") == host and found["next"] is None:
            found["next"] = edge
        if edge.get("to") == host and found["prev"] is None:
            found["prev"] = edge
    return found


def end_label(host, address):
    """'pair-b (10.99.0.2)', or the name alone without an address."""
    return "%s (%s)" % (host, address) if address and address != host else str(host)


def edge_label(edge):
    """'pair-b (10.99.0.2) -> pair-c (10.99.0.3)': both ends, writer first."""
    return "%s -> %s" % (end_label(edge.get("from"), edge.get("from_address")),
                         end_label(edge.get("to"), edge.get("to_address")))


# What each side does on an edge, as the messages say it.
SIDE_TEXT = {"client": "writer", "server": "target"}


def edge_diagnosis(edge, side, diagnosis):
    """The module's diagnosis of one side of an edge, reworded to name both ends.

    ``side`` is ``client`` (this node wrote, the edge's ``from``) or ``server`` (this node
    was written into, the edge's ``to``). The code stays the module's; the message starts
    with the edge and the side that saw it; the fix says on which nodes to look.
    """
    diagnosis = dict(diagnosis or {})
    if side not in SIDE_TEXT:
        raise RingError("side must be client or server, got %r" % (side,))
    seen_on = edge.get("from") if side == "client" else edge.get("to")
    other = edge.get("to") if side == "client" else edge.get("from")
    code = diagnosis.get("code") or "unknown"
    message = "ring edge %s, seen on %s (%s): [%s] %s" % (
        edge_label(edge), seen_on, SIDE_TEXT[side], code,
        diagnosis.get("message") or "the pair exchange failed without a message.")
    fix = diagnosis.get("fix") or ""
    hint = ("Check both ends: %s must reach %s on TCP (the pair port) and over its RDMA port, and %s must be "
            "running the same verification (its report names this edge too)." % (
                end_label(edge.get("from"), edge.get("from_address")), end_label(edge.get("to"), edge.get("to_address")),
                other))
    diagnosis.update(code=code, message=message, fix=(fix + " " + hint).strip() if fix else hint,
                     related=list(diagnosis.get("related") or []))
    return diagnosis
