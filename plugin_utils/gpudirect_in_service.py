# -*- coding: utf-8 -*-
"""The read-only check gpudirect_verify runs on a node in service (issue #29 outcome 4).

A node this run did not drain may be running jobs: the full loopback would allocate GPU
memory that a job owns (and fails on an EXCLUSIVE_PROCESS GPU), move RDMA traffic under
it and build a helper. On such a node gpudirect_verify reads instead: this check judges
the node's GPUDirect facts (``ansible_facts.gpudirect``, read by gpudirect_facts, which
only reads sysfs, /proc and nvidia-smi's queries) for what the data path needs:

* the NVIDIA driver loaded where the node has GPUs;
* at least one RDMA device with a port ACTIVE;
* a peer-memory path where the node has GPUs: nvidia_peermem or nv_peer_mem loaded, or
  dma-buf (a kernel with CONFIG_DMA_SHARED_BUFFER and the open kernel module).

``{name: in_service, status: passed|failed, summary, reason}``, the shape of the other
checks of the record (filter gpudirect_verify_verdict). It proves the parts are in
place, not that bytes move: the record says so, and the loopback runs when the node is
drained (or ``gpudirect_verify_scope: full``).
"""

NAME = "in_service"


def _active_ports(device):
    ports = device.get("ports") or {}
    return ["%s port %s" % (device.get("name"), num) for num, port in sorted(ports.items())
            if isinstance(port, dict) and port.get("state") == "ACTIVE"]


def judge(facts):
    """The check from ``ansible_facts.gpudirect``; ValueError on something else."""
    if not isinstance(facts, dict) or not isinstance(facts.get("gpus", []), list) \
            or not isinstance(facts.get("rdma_devices", []), list):
        raise ValueError("expected ansible_facts.gpudirect (gpudirect_facts), got %r" % (facts,))
    gpus = facts.get("gpus") or []
    devices = [d for d in facts.get("rdma_devices") or [] if isinstance(d, dict)]
    driver = facts.get("nvidia_driver") or {}
    peermem = facts.get("peermem") or {}
    dmabuf = facts.get("dmabuf") or {}
    seen, problems = [], []

    if gpus:
        if driver.get("loaded"):
            seen.append("%d GPU(s), NVIDIA driver %s loaded" % (len(gpus), driver.get("version") or "(version unknown)"))
        else:
            problems.append("the node lists %d GPU(s) but the NVIDIA driver is not loaded" % len(gpus))
    else:
        seen.append("no GPU")

    active = [p for d in devices for p in _active_ports(d)]
    if not devices:
        problems.append("no RDMA device")
    elif not active:
        problems.append("no RDMA port is ACTIVE (%s)" % ", ".join(
            "%s port %s %s" % (d.get("name"), num, (port or {}).get("state") or "state unknown")
            for d in devices for num, port in sorted((d.get("ports") or {}).items())) or "no port listed")
    else:
        seen.append("RDMA " + ", ".join(active) + " ACTIVE")

    if gpus:
        loaded = [m for m in ("nvidia_peermem", "nv_peer_mem") if peermem.get(m)]
        if loaded:
            seen.append(" and ".join(loaded) + " loaded")
        elif dmabuf.get("kernel_ok") and dmabuf.get("open_module"):
            seen.append("dma-buf (open kernel module, no peer-memory module loaded)")
        else:
            problems.append("no peer-memory path: neither nvidia_peermem nor nv_peer_mem is loaded and dma-buf is "
                            "not available (%s)" % ("the kernel lacks it" if not dmabuf.get("kernel_ok")
                                                    else "the proprietary kernel module has no dma-buf export"))

    if problems:
        reason = "; ".join(problems)
        return {"name": NAME, "status": "failed", "reason": reason,
                "summary": "in_service: FAILED (read-only, the node in service): %s" % reason}
    return {"name": NAME, "status": "passed", "reason": "",
            "summary": "in_service: passed (read-only, the node in service; the data path was not exercised): "
                       + "; ".join(seen)}
