# -*- coding: utf-8 -*-
"""Which GPU/NIC pairs the verification tests on one node (``gpudirect_verify_coverage``).

* ``nearest`` (default): each GPU with its nearest RDMA NIC by distance class; then
  every NIC not yet covered with its nearest GPU. Every GPU and every NIC of a
  GPU/NIC node is exercised at least once, and a node with one PIX NIC per GPU
  (the usual 8-GPU/8-NIC server) gets one pair per GPU. Among NICs (GPUs) at the
  same distance, the one used least so far wins, then the lower name (address):
  on a 4-GPU node with two dual-port HCAs at NODE distance the four GPUs land on
  four different ports.
* ``all``: every GPU with every NIC.
* ``one``: the single closest pair (what the verification did before coverage).

The distance order is the one of ``nvidia-smi topo -m`` as the facts module computes
it (``gpudirect_topology.DISTANCE_CLASSES``: X < PIX < PXB < PHB < NODE < SYS); a pair
whose distance is not known (a soft-RoCE device on a virtual netdev, facts without
pairs) ranks after SYS.

A node without GPUs, and a verification in host memory, has no GPU side: the pairs
are then the RDMA devices alone (``one``: the first), each tested in host memory.

Each pair is ``{"gpu": address or None, "nic": name or None, "distance": class or None}``.
A node with GPUs and no RDMA device in the facts gets ``{"gpu": address, "nic": None}`` for
each GPU (``one``: the first): the module fails each with its own diagnosis
(``no_rdma_device``), so that every GPU has its verdict. ``{"gpu": None, "nic": None}`` (no
RDMA device and no GPU, or host memory) lets the module choose, and fail once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.gpudirect_pci import normalize_pci_address, pci_address_key
from ansible.module_utils import gpudirect_topology as _topology

COVERAGES = ("nearest", "all", "one")
UNKNOWN_RANK = len(_topology.DISTANCE_CLASSES)


class CoverageError(ValueError):
    """Bad input: names the value and the knob."""


def distance_rank(distance):
    """Position of a distance class in the one shared order; unknown (None) ranks last."""
    try:
        return _topology.distance_rank(distance, unknown=UNKNOWN_RANK)
    except _topology.DistanceError as exc:
        raise CoverageError(str(exc))


def _gpu_key(address):
    return pci_address_key(address)


def _normalise_gpu(text):
    text = (text or "").strip()
    if not text:
        return ""
    address = normalize_pci_address(text if text.count(":") == 2 else "0000:" + text)
    if address is None:
        raise CoverageError("gpudirect_verify_gpu must be a PCI address such as 0000:1b:00.0, got %r" % text)
    return address


def plan_pairs(facts, coverage="nearest", gpu="", rdma_device="", host_memory=False):
    """The pairs to test, in the order they run.

    ``facts`` is ``ansible_facts.gpudirect`` (``gpus``, ``rdma_devices``, ``pairs``);
    ``gpu`` / ``rdma_device`` (the role's knobs) restrict the GPU and NIC sets to the
    one named; ``host_memory`` is true when the verification writes into host memory
    (mode ``host``), where only the NICs matter.
    """
    if coverage not in COVERAGES:
        raise CoverageError("gpudirect_verify_coverage must be one of %s, got %r" % (", ".join(COVERAGES), coverage))
    facts = facts or {}
    gpus = sorted((g.get("address") for g in facts.get("gpus") or [] if g.get("address")), key=_gpu_key)
    devices = [d for d in facts.get("rdma_devices") or [] if d.get("name")]
    nics = sorted(d["name"] for d in devices)
    wanted_gpu = _normalise_gpu(gpu)
    wanted_nic = (rdma_device or "").strip()
    if wanted_gpu:
        if wanted_gpu not in gpus:
            # let the module name what is wrong (unknown_gpu, with the GPUs present), in the report
            return [{"gpu": wanted_gpu, "nic": wanted_nic or None, "distance": None}]
        gpus = [wanted_gpu]
    if wanted_nic:
        by_pci = [d["name"] for d in devices if d.get("pci_address") == normalize_pci_address(wanted_nic)]
        if wanted_nic in nics:
            nics = [wanted_nic]
        elif len(by_pci) == 1:
            nics = by_pci
        else:
            # let the module name what is wrong (unknown device, several on one address)
            return [{"gpu": wanted_gpu or None, "nic": wanted_nic, "distance": None}]
    if not nics:
        if host_memory or not gpus:
            return [{"gpu": None, "nic": None, "distance": None}]
        # no RDMA device: one module run per GPU, so that each GPU gets its own failing verdict
        # (no_rdma_device) in the record and the tables (``one``: the first GPU)
        return [{"gpu": g, "nic": None, "distance": None} for g in (gpus[:1] if coverage == "one" else gpus)]
    if host_memory or not gpus:
        chosen = nics[:1] if coverage == "one" else nics
        return [{"gpu": None, "nic": nic, "distance": None} for nic in chosen]

    known = {}
    for pair in facts.get("pairs") or []:
        key = (pair.get("gpu_address"), pair.get("nic"))
        if key[0] in gpus and key[1] in nics:
            known[key] = pair.get("distance")
    for value in known.values():
        distance_rank(value)   # an unknown class is bad facts: say so, do not guess its place

    def dist(g, n):
        return known.get((g, n))

    if coverage == "all":
        return [{"gpu": g, "nic": n, "distance": dist(g, n)} for g in gpus for n in nics]
    if coverage == "one":
        g, n = min(((g, n) for g in gpus for n in nics),
                   key=lambda gn: (distance_rank(dist(*gn)), _gpu_key(gn[0]), gn[1]))
        return [{"gpu": g, "nic": n, "distance": dist(g, n)}]

    used_nic = dict((n, 0) for n in nics)
    used_gpu = dict((g, 0) for g in gpus)
    chosen = []
    for g in gpus:
        n = min(nics, key=lambda n: (distance_rank(dist(g, n)), used_nic[n], n))
        used_nic[n] += 1
        used_gpu[g] += 1
        chosen.append({"gpu": g, "nic": n, "distance": dist(g, n)})
    for n in nics:
        if used_nic[n]:
            continue
        g = min(gpus, key=lambda g: (distance_rank(dist(g, n)), used_gpu[g], _gpu_key(g)))
        used_nic[n] += 1
        used_gpu[g] += 1
        chosen.append({"gpu": g, "nic": n, "distance": dist(g, n)})
    return chosen
