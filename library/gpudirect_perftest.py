#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run perftest's ib_write_bw on one GPU/NIC pair, for a second opinion."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_perftest
short_description: Measure one GPU/NIC pair with perftest's ib_write_bw, loopback through the NIC, for a cross-check
description:
  - Runs C(ib_write_bw) server and client on the node, the client connecting to the server through I(address)
    (out-of-band exchange only; the RDMA WRITEs go through I(rdma_device)), with the same device, port, GID index,
    message size and iteration count as the C(gpudirect_loopback) run it is compared with.
  - GPU modes put the buffers in the GPU's memory - C(--use_cuda_bus_id=<address>) when the binary knows that option,
    else C(--use_cuda=<n>) with C(CUDA_DEVICE_ORDER=PCI_BUS_ID) and I(n) the GPU's place among I(gpus) in PCI order;
    C(--use_cuda_dmabuf) in mode C(cuda_dmabuf). The GPU ib_write_bw reports using is checked against I(gpu).
  - First reads C(ib_write_bw --help) - a binary built without CUDA (or without CUDA DMA-BUF) lists no such option; the
    module then returns C(status=skipped) with that reason instead of running it. No binary is C(skipped) too.
  - With I(module_bandwidth_gbps) it returns the ratio module / ib_write_bw, and whether it meets I(min_ratio).
  - The server is started in the background (C(subprocess.Popen) of an argument list, output to a temporary file),
    the client runs with a timeout and is retried while the server is not listening yet; the server is killed on
    any error or timeout. Nothing on the node is configured.
options:
  mode:
    description: Memory the NIC writes into - C(host), C(cuda_peermem) (GPU memory), C(cuda_dmabuf) (GPU memory as dma-buf).
    type: str
    required: true
    choices: [host, cuda_peermem, cuda_dmabuf]
  rdma_device:
    description: RDMA device name (C(mlx5_0), C(rxe0)), the one the loopback used.
    type: str
    required: true
  ib_port:
    description: Port of the RDMA device (C(-i)).
    type: int
    default: 1
  gid_index:
    description: GID index (C(-x)) the loopback used on a RoCE port; omitted on InfiniBand.
    type: int
  gpu:
    description: PCI address of the GPU (C(0000:1b:00.0)); required in the GPU modes.
    type: str
  gpus:
    description:
      - PCI addresses of the node's NVIDIA GPUs (C(ansible_facts.gpudirect.gpus[*].address)). Only used when
        ib_write_bw has no C(--use_cuda_bus_id), to find the GPU's CUDA number in PCI order.
    type: list
    elements: str
    default: []
  size:
    description: Bytes per RDMA WRITE (C(-s)).
    type: int
    default: 1048576
  iterations:
    description: Writes measured (C(-n)).
    type: int
    default: 100
  tcp_port:
    description: TCP port of perftest's out-of-band exchange (C(-p)).
    type: int
    default: 18515
  address:
    description: Address the client connects to for the exchange (the server runs on this node).
    type: str
    default: 127.0.0.1
  timeout:
    description: Seconds for the whole measurement (server and client) before both are killed.
    type: int
    default: 120
  executable:
    description: ib_write_bw to run - a name looked up in PATH, or a path.
    type: str
    default: ib_write_bw
  module_bandwidth_gbps:
    description: The loopback's bandwidth on the same pair, Gbit/s; with it the result has C(ratio).
    type: float
  min_ratio:
    description: Lowest module / ib_write_bw ratio that is C(ratio_ok); 0 accepts any ratio (report only).
    type: float
    default: 0.0
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    support: full
    description: Returns C(status=would_run) and the commands it would run; runs nothing, not even C(--help).
  diff_mode:
    support: none
    description: Nothing on the node is configured.
extends_documentation_fragment:
  - gpudirect_attributes
notes:
  - Run with C(become) where registering memory needs it (memlock limits, GPU memory).
  - The server and client share the node; the figures are one port's loopback, as the module's are.
requirements:
  - perftest's C(ib_write_bw); a build with CUDA for the GPU modes (C(./configure CUDA_H_PATH=...)).
"""

EXAMPLES = r"""
- name: Cross-check the loopback's bandwidth on its pair (GPU memory through dma-buf)
  gpudirect_perftest:
    mode: cuda_dmabuf
    rdma_device: mlx5_0
    gid_index: 3
    gpu: "0000:1b:00.0"
    gpus: "{{ ansible_facts.gpudirect.gpus | map(attribute='address') | list }}"
    size: 1048576
    iterations: 100
    module_bandwidth_gbps: 180.2
  become: true
  register: perftest

- name: Host memory on soft-RoCE
  gpudirect_perftest:
    mode: host
    rdma_device: rxe0
    gid_index: 1
    size: 65536
    iterations: 1000
  become: true
"""

RETURN = r"""
status:
  description: C(measured), C(skipped) (no ib_write_bw, or one that cannot use this memory), C(would_run) (check mode).
    A run that did not measure fails the module with C(status=error).
  returned: always
  type: str
reason:
  description: Why it was skipped, or what went wrong; null when measured.
  returned: always
  type: str
executable:
  description: Path of the ib_write_bw found, null when none.
  returned: always
  type: str
capabilities:
  description: What C(--help) lists - C(cuda), C(cuda_bus_id), C(cuda_dmabuf), C(report_gbits).
  returned: when the help was read
  type: dict
server_argv:
  description: The server's command line.
  returned: when built
  type: list
  elements: str
client_argv:
  description: The client's command line.
  returned: when built
  type: list
  elements: str
environment:
  description: Variables set for both (C(CUDA_DEVICE_ORDER=PCI_BUS_ID) in the GPU modes).
  returned: when built
  type: dict
bandwidth_gbps:
  description: ib_write_bw's average bandwidth (client side), Gbit/s.
  returned: when measured
  type: float
perftest:
  description: The client's output as parsed (bytes, iterations, peak and average Gbit/s, device, GID index, CUDA device).
  returned: when measured
  type: dict
ratio:
  description: module_bandwidth_gbps / bandwidth_gbps, null without module_bandwidth_gbps.
  returned: when measured
  type: float
ratio_ok:
  description: Whether ratio meets min_ratio (true when min_ratio is 0).
  returned: when measured
  type: bool
message:
  description: One line for the report (both figures and the ratio, or the reason).
  returned: always
  type: str
client_output:
  description: The last 4000 characters of the client's output.
  returned: when it ran
  type: str
server_output:
  description: The last 4000 characters of the server's output.
  returned: when it ran
  type: str
would_run:
  description: In check mode, the commands that would run.
  returned: in check mode
  type: list
"""

import os
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import gpudirect_crosscheck as xc
from ansible.module_utils.gpudirect_host import C_LOCALE

# What the client prints while the server is not listening yet (perftest_communication.c).
_NOT_LISTENING = ("Couldn't connect to", "Unable to open file descriptor for socket connection")


def _tail(text, limit=4000):
    return text[-limit:] if text else ""


def _stop(proc):
    """Kill the server (and anything it started) if it still runs; never raises."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def measure(server_argv, client_argv, env, timeout):
    """Run the server in the background and the client against it; return (rc, client_out, server_out)
    or raise RuntimeError with what went wrong. The server never outlives this call."""
    deadline = time.monotonic() + timeout
    out = tempfile.TemporaryFile(mode="w+")
    server = None
    try:
        server = subprocess.Popen(server_argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=env, start_new_session=True)
        time.sleep(0.5)
        while True:
            if server.poll() is not None:
                out.seek(0)
                raise RuntimeError("the ib_write_bw server exited %s before the client finished: %s"
                                   % (server.returncode, _tail(out.read(), 600).strip()))
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("no measurement within %ds (timeout)" % timeout)
            try:
                client = subprocess.run(client_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, timeout=left, check=False,
                                        universal_newlines=True)
            except subprocess.TimeoutExpired:
                raise RuntimeError("the ib_write_bw client did not finish within %ds (timeout)" % timeout)
            if client.returncode != 0 and any(s in client.stdout for s in _NOT_LISTENING):
                time.sleep(1)      # the server is not listening yet
                continue
            break
        try:
            server.wait(timeout=max(1.0, min(30.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass
        out.seek(0)
        return client.returncode, client.stdout, out.read()
    finally:
        _stop(server)
        out.close()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", required=True, choices=list(xc.PERFTEST_MODES)),
            rdma_device=dict(type="str", required=True),
            ib_port=dict(type="int", default=1),
            gid_index=dict(type="int"),
            gpu=dict(type="str"),
            gpus=dict(type="list", elements="str", default=[]),
            size=dict(type="int", default=1048576),
            iterations=dict(type="int", default=100),
            tcp_port=dict(type="int", default=18515),
            address=dict(type="str", default="127.0.0.1"),
            timeout=dict(type="int", default=120),
            executable=dict(type="str", default="ib_write_bw"),
            module_bandwidth_gbps=dict(type="float"),
            min_ratio=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, status=None, reason=None, executable=None, message="")

    def fail(msg, **extra):
        result.update(extra)
        result["status"] = "error"
        result["reason"] = result["reason"] or msg
        result["message"] = msg
        module.fail_json(msg="gpudirect_perftest: " + msg, **result)
    problems = []
    if not 1 <= p["size"] <= 2 ** 31:
        problems.append("size must be 1..2147483648 bytes, got %s" % p["size"])
    if p["iterations"] < 1:
        problems.append("iterations must be at least 1, got %s" % p["iterations"])
    if not 1 <= p["tcp_port"] <= 65535:
        problems.append("tcp_port must be 1..65535, got %s" % p["tcp_port"])
    if p["timeout"] < 1:
        problems.append("timeout must be at least 1 second, got %s" % p["timeout"])
    if p["min_ratio"] < 0:
        problems.append("min_ratio must be >= 0 (0: report only), got %s" % p["min_ratio"])
    if p["mode"] in xc.GPU_MODES and not p["gpu"]:
        problems.append("mode %s needs gpu (the PCI address of the GPU the loopback tested)" % p["mode"])
    if p["gpu"]:
        try:
            xc.cuda_index(p["gpu"], [p["gpu"]])
        except xc.CrosscheckError as exc:
            problems.append("gpu: %s" % exc)
    try:
        xc.perftest_argv("ib_write_bw", "host", p["rdma_device"])
    except xc.CrosscheckError as exc:
        problems.append(str(exc))
    if problems:
        fail("; ".join(problems))

    env = dict(os.environ, **C_LOCALE)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if p["mode"] in xc.GPU_MODES:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

    def argvs(binary, caps, cuda_device):
        common = dict(ib_port=p["ib_port"], gid_index=p["gid_index"], size=p["size"], iterations=p["iterations"],
                      tcp_port=p["tcp_port"], gpu=p["gpu"], caps=caps, cuda_device=cuda_device)
        return (xc.perftest_argv(binary, p["mode"], p["rdma_device"], **common),
                xc.perftest_argv(binary, p["mode"], p["rdma_device"], server=p["address"], **common))

    binary = p["executable"] if os.path.isabs(p["executable"]) else module.get_bin_path(p["executable"])
    if module.check_mode:
        shown = binary or p["executable"]
        server_argv, client_argv = argvs(shown, {"cuda_bus_id": True}, None)
        result.update(status="would_run", executable=binary, would_run=[[shown, "--help"], server_argv, client_argv],
                      message="check mode: would read %s --help, then run the server and the client%s"
                      % (shown, "" if binary else " (not found on the node now: a real run would skip)"))
        module.exit_json(**result)
    if not binary or not os.access(binary, os.X_OK):
        result.update(status="skipped",
                      reason="%s not found on the node (install perftest: Debian/Ubuntu and EL package perftest; "
                             "a build with CUDA for the GPU modes)" % p["executable"])
        result["message"] = result["reason"]
        module.exit_json(**result)
    result["executable"] = binary
    # --help exits 1 on some builds: the text decides, not the exit code
    rc, out, err = module.run_command([binary, "--help"], environ_update=dict(C_LOCALE))
    try:
        caps = xc.perftest_help(out + err)
    except xc.CrosscheckError as exc:
        fail("%s --help exited %s and %s" % (binary, rc, exc))
    result["capabilities"] = caps
    reason = xc.perftest_skip_reason(caps, p["mode"], binary)
    if reason:
        result.update(status="skipped", reason=reason, message=reason)
        module.exit_json(**result)
    cuda_device = None
    if p["mode"] in xc.GPU_MODES and not caps["cuda_bus_id"]:
        try:
            cuda_device = xc.cuda_index(p["gpu"], p["gpus"] or [p["gpu"]])
        except xc.CrosscheckError as exc:
            fail("%s; pass gpus (the node's GPU addresses)" % exc)
    server_argv, client_argv = argvs(binary, caps, cuda_device)
    result.update(server_argv=server_argv, client_argv=client_argv,
                  environment={k: env[k] for k in ("CUDA_DEVICE_ORDER",) if k in env})
    try:
        rc, client_out, server_out = measure(server_argv, client_argv, env, p["timeout"])
    except (RuntimeError, OSError) as exc:
        fail("%s (server: %s)" % (exc, " ".join(server_argv)))
    result.update(client_output=_tail(client_out), server_output=_tail(server_out))
    try:
        parsed = xc.parse_perftest(client_out)
    except xc.CrosscheckError as exc:
        fail("ib_write_bw client exited %s and %s" % (rc, exc))
    if rc != 0:
        fail("the ib_write_bw client exited %s after printing a result" % rc, perftest=parsed)
    if p["mode"] in xc.GPU_MODES:
        wrong_gpu = xc.perftest_gpu_problem(parsed, p["gpu"])
        if wrong_gpu:
            fail(wrong_gpu, perftest=parsed)
    result.update(status="measured", perftest=parsed, bandwidth_gbps=parsed["bw_average_gbps"], ratio=None,
                  ratio_ok=True)
    if p["module_bandwidth_gbps"] is not None:
        verdict = xc.perftest_ratio(p["module_bandwidth_gbps"], parsed["bw_average_gbps"], p["min_ratio"])
        result.update(ratio=verdict["ratio"], ratio_ok=verdict["ok"], message=verdict["message"])
    else:
        result["message"] = "ib_write_bw %.2f Gbit/s" % parsed["bw_average_gbps"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
