# -*- coding: utf-8 -*-
"""The one definition of the GPU/NIC distance classes and their order.

The classes are the ones ``nvidia-smi topo -m`` prints in its legend (the facts
module derives the same class from sysfs, ``gpudirect_pci.distance``):

* ``PIX``  at most a single PCIe bridge between the two
* ``PXB``  several PCIe bridges, without the host bridge
* ``PHB``  through a PCIe host bridge (the CPU's root complex)
* ``NODE`` across the host bridges of one NUMA node
* ``SYS``  across the inter-socket link (QPI/UPI, Infinity Fabric)

``X`` is a device against itself. Closest first: PIX < PXB < PHB < NODE < SYS.
NVIDIA's GPUDirect RDMA guidance rates PIX and PXB good, PHB likely good (a warning
here), NODE and SYS bad. Everything that orders pairs, rates a path or lists the
classes (facts, coverage, loopback selection, reports, filters) uses this module;
the ``choices:`` lists of the roles' argument specs are YAML and are checked against
``DISTANCE_ORDER`` by tests/unit/test_gpudirect_topology.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DISTANCE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
SELF = "X"
DISTANCE_CLASSES = (SELF,) + DISTANCE_ORDER

GOOD = ("PIX", "PXB")
WARN = ("PHB",)
BAD = ("NODE", "SYS")

# What a path of each far class crosses, for messages.
CROSSES = {"PHB": "the host bridge", "NODE": "the host bridges of one NUMA node", "SYS": "the inter-socket link"}


class DistanceError(ValueError):
    """A text that is not one of the distance classes."""


def distance_rank(distance, unknown=None):
    """Position of ``distance`` in DISTANCE_CLASSES (X 0, PIX 1 ... SYS 5). ``None`` ranks
    ``unknown`` when that is given (after SYS: ``len(DISTANCE_CLASSES)``); any other text
    raises DistanceError naming it and the classes."""
    if distance is None and unknown is not None:
        return unknown
    if distance not in DISTANCE_CLASSES:
        raise DistanceError("unknown GPU/NIC distance class %r; expected one of %s"
                            % (distance, ", ".join(DISTANCE_CLASSES)))
    return DISTANCE_CLASSES.index(distance)


def distance_verdict(distance):
    """``good`` (PIX, PXB), ``warn`` (PHB) or ``bad`` (NODE, SYS) for GPUDirect RDMA."""
    if distance in GOOD:
        return "good"
    if distance in WARN:
        return "warn"
    if distance in BAD:
        return "bad"
    if distance == SELF:
        raise DistanceError("'X' marks a device against itself, not a path")
    raise DistanceError("unknown GPU/NIC distance class %r; expected one of %s"
                        % (distance, ", ".join(DISTANCE_ORDER)))
