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


def cross_check(topo, gpus, pairs):
    """Notes on the tested pairs whose distance from sysfs (``pairs``: ``{gpu, nic, distance}``)
    differs from the class ``nvidia-smi topo -m`` prints for them (``topo``: the parsed matrix,
    filter ``nvidia_topo_matrix``). ``gpus`` are the facts' GPUs: nvidia-smi's ``index`` names
    the matrix row ``GPU<index>``; the NIC legend (or an ``mlx5_0`` column of older drivers)
    names the column. Pairs nvidia-smi does not show (a soft-RoCE device, a GPU without index)
    are not compared; ``SOC``, the older drivers' name, reads as ``SYS``."""
    row_of = dict((g.get("address"), "GPU%d" % g["index"]) for g in gpus or [] if g.get("index") is not None)
    column_of = dict((device, column) for column, device in (topo.get("nic_legend") or {}).items())
    notes = []
    for pair in pairs or []:
        gpu, nic, ours = pair.get("gpu"), pair.get("nic"), pair.get("distance")
        row, column = row_of.get(gpu), column_of.get(nic)
        if not ours or row is None or column is None:
            continue
        theirs = ((topo.get("matrix") or {}).get(row) or {}).get(column)
        if theirs is None:
            continue
        theirs = {"SOC": "SYS"}.get(theirs, theirs)
        if theirs != ours:
            notes.append("GPU %s (%s) and %s (%s): the distance from sysfs is %s, nvidia-smi topo -m says %s; the "
                         "pair choice and path warnings used %s (check the PCIe path with lspci -t)"
                         % (gpu, row, nic, column, ours, theirs, ours))
    return notes
