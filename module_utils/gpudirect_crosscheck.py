# -*- coding: utf-8 -*-
"""Second opinions on the loopback's proof: perftest's ``ib_write_bw`` and nccl-tests.

Pure functions (no I/O), used by ``library/gpudirect_perftest.py`` on the node and by
the ``gpudirect_verify`` role's filters on the controller; one implementation of each
parser. Every format below is read from real output (``tests/fixtures/crosscheck/``,
with the public source of each capture):

perftest (https://github.com/linux-rdma/perftest)
  * ``ib_write_bw --help`` lists ``--use_cuda=<cuda device id>`` and
    ``--use_cuda_bus_id=<cuda full BUS id>`` only when the binary was built with CUDA,
    and ``--use_cuda_dmabuf`` only when that build also has CUDA DMA-BUF
    (``src/perftest_parameters.c``, ``usage()``): the help text is the capability test.
  * With ``--use_cuda=N`` it lists the CUDA devices (``CUDA device N: PCIe address is
    BB:DD``) and prints ``Picking device No. N``: the GPU it used is checked against the
    one the loopback tested (CUDA numbers devices fastest-first unless
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; the module sets it, and checks the listing anyway).
    With ``--use_cuda_bus_id`` it prints ``Got PCIe address of: <address>`` and
    ``Picking GPU number N``.
  * The result is the row after the header ``#bytes #iterations BW peak[Gb/sec]
    BW average[Gb/sec] MsgRate[Mpps]`` (``--report_gbits``, 10^9 bit/s), or
    ``[MB/sec]``/``[MiB/sec]`` without it (2^20 bytes/s: ``format_factor = 0x100000``).

NCCL (``NCCL_DEBUG=INFO``; ``src/transport/net.cc`` of https://github.com/NVIDIA/nccl)
  * one line per connection and channel: ``Channel 00/0 : 0[0] -> 1[0] [send] via
    NET/IB/0/GDRDMA`` (NCCL >= 2.12: ``channel/connIndex``, ``rank[nvmlDev]``), ``Channel
    00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0`` (older: ``rank[busId]``), ``Ring
    00 : 0 -> 1 [receive] via NET/IB/0/GDRDMA`` (2.3 and before). The NET transport is
    ``NET/<plugin>/<dev>[(<proxy rank>)][/GDRDMA][(PCI)][/Shared]``: ``/GDRDMA`` is NCCL
    saying that this connection's buffers are GPU memory the NIC reads or writes; without
    it the data is staged through host memory. ``P2P/...`` and ``SHM/...`` stay inside a
    node.
  * ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...`` maps the device number of
    ``NET/IB/<dev>`` to the NIC name (per host).

nccl-tests (https://github.com/NVIDIA/nccl-tests)
  * ``#  Rank  0 Group  0 Pid  85 on host-a device  0 [0x42] NVIDIA H100`` per rank;
    the result rows (``size count type redop root time algbw busbw #wrong time algbw busbw
    #wrong``; older: ``error`` instead of ``#wrong``), ``# Out of bounds values : 0 OK``
    and ``# Avg bus bandwidth    : 84.8558``. ``#wrong`` is ``N/A`` when the run did not
    check the data (``-c 0``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.gpudirect_versions import find_nccl_version


class CrosscheckError(ValueError):
    """Output the parsers cannot read, or input that names a bad value."""


# --------------------------------------------------------------------------- perftest

PERFTEST_MODES = ("host", "cuda_peermem", "cuda_dmabuf")
GPU_MODES = ("cuda_peermem", "cuda_dmabuf")

_RESULT_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb/sec|MB/sec|MiB/sec)\]\s+"
                            r"BW average\[(?:Gb/sec|MB/sec|MiB/sec)\]")
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_RESULT_ROW = re.compile(r"^\s*(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>%s)\s+(?P<avg>%s)\s+(?P<rate>%s)\s*$"
                         % (_NUMBER, _NUMBER, _NUMBER))
_CUDA_DEVICE = re.compile(r"^CUDA device (?P<index>\d+): PCIe address is (?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})")
_PICKED_INDEX = re.compile(r"^Picking device No\. (?P<index>\d+)")
_PICKED_BUS = re.compile(r"^Got PCIe address of: (?P<address>\S+)")
_PICKED_BUS_INDEX = re.compile(r"^Picking GPU number (?P<index>\d+)")
_FIELDS = (("device", re.compile(r"\bDevice\s+:\s+(\S+)")), ("gid_index", re.compile(r"\bGID index\s+:\s+(\d+)")),
           ("link_type", re.compile(r"\bLink type\s+:\s+(\S+)")))
# bandwidth unit -> factor to Gbit/s (10^9 bit/s)
_UNIT_GBPS = {"Gb/sec": 1.0, "MB/sec": 0x100000 * 8 / 1e9, "MiB/sec": 0x100000 * 8 / 1e9}
# lines perftest prints when it gives up (client or server side)
_PERFTEST_ERRORS = re.compile(r"(Couldn't|Unable to|Failed to|failed|Unsupported memory type|No such device|"
                              r"error|Error|ERROR|Conflicting CPU frequency|mismatch)")


def perftest_help(text):
    """What an ``ib_write_bw --help`` output says the binary can do."""
    if not isinstance(text, str) or "Usage:" not in text and "usage:" not in text.lower():
        raise CrosscheckError("this is not ib_write_bw's help text (no 'Usage:' line): %r" % (text or "")[:200])
    return {
        "cuda": "--use_cuda=" in text,
        "cuda_bus_id": "--use_cuda_bus_id" in text,
        "cuda_dmabuf": "--use_cuda_dmabuf" in text,
        "report_gbits": "--report_gbits" in text,
    }


def perftest_skip_reason(caps, mode, binary="ib_write_bw"):
    """Why ``binary`` with capabilities ``caps`` (``perftest_help``) cannot test ``mode``; None when it can."""
    if mode not in PERFTEST_MODES:
        raise CrosscheckError("mode must be one of %s, got %r" % (", ".join(PERFTEST_MODES), mode))
    if mode in GPU_MODES and not caps.get("cuda"):
        return ("%s built without CUDA: no --use_cuda in its help, so it cannot register GPU memory "
                "(mode %s); install a perftest built with CUDA (./configure CUDA_H_PATH=...)" % (binary, mode))
    if mode == "cuda_dmabuf" and not caps.get("cuda_dmabuf"):
        return ("%s built without CUDA DMA-BUF: no --use_cuda_dmabuf in its help, and the loopback used dma-buf "
                "(mode cuda_dmabuf); install a perftest built against CUDA 11.7 or later" % binary)
    if not caps.get("report_gbits"):
        return "%s has no --report_gbits in its help: not a perftest ib_write_bw this module can read" % binary
    return None


def cuda_index(gpu, gpus):
    """The CUDA device number of PCI address ``gpu`` among ``gpus`` (the node's NVIDIA GPU addresses)
    when CUDA numbers them in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``)."""
    wanted = _bus_device(gpu)
    keys = sorted(set(_bus_key(g) for g in gpus or []))
    for n, key in enumerate(keys):
        if key[1:3] == wanted:
            return n
    raise CrosscheckError("GPU %s is not among the node's GPUs (%s): its CUDA device number is unknown"
                          % (gpu, ", ".join(gpus or []) or "none in the facts"))


def _bus_key(address):
    m = re.match(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", (address or "").strip())
    if not m:
        raise CrosscheckError("not a PCI address: %r (expected 0000:1b:00.0)" % (address,))
    return (int(m.group(1) or "0", 16), m.group(2).upper(), m.group(3).upper(), int(m.group(4)))


def _bus_device(address):
    return _bus_key(address)[1:3]


def perftest_argv(binary, mode, device, ib_port=1, gid_index=None, size=65536, iterations=1000, tcp_port=18515,
                  gpu=None, caps=None, cuda_device=None, server=None):
    """One ``ib_write_bw`` command line (server when ``server`` is None, else the client connecting to it)."""
    if mode not in PERFTEST_MODES:
        raise CrosscheckError("mode must be one of %s, got %r" % (", ".join(PERFTEST_MODES), mode))
    if not device or not re.match(r"^[A-Za-z0-9_.:-]+$", device):
        raise CrosscheckError("rdma_device must be an RDMA device name such as mlx5_0, got %r" % (device,))
    argv = [binary, "-d", device, "-i", str(int(ib_port)), "-s", str(int(size)), "-n", str(int(iterations)),
            "-p", str(int(tcp_port)), "-F", "--report_gbits"]
    if gid_index is not None:
        argv += ["-x", str(int(gid_index))]
    if mode in GPU_MODES:
        caps = caps or {}
        if not gpu:
            raise CrosscheckError("mode %s needs the GPU's PCI address (gpu)" % mode)
        if caps.get("cuda_bus_id"):
            argv.append("--use_cuda_bus_id=%s" % gpu)
        elif cuda_device is not None:
            argv.append("--use_cuda=%d" % int(cuda_device))
        else:
            raise CrosscheckError("ib_write_bw has no --use_cuda_bus_id and the GPU's CUDA device number is unknown")
        if mode == "cuda_dmabuf":
            argv.append("--use_cuda_dmabuf")
    if server is not None:
        argv.append(server)
    return argv


def parse_perftest(text):
    """Read one ``ib_write_bw`` output (client or server side).

    Returns ``{"bytes", "iterations", "bw_peak_gbps", "bw_average_gbps", "msg_rate_mpps", "unit",
    "device", "gid_index", "link_type", "cuda_devices": {index: "BB:DD"}, "cuda_picked": index or None,
    "cuda_bus_id": address or None, "dmabuf": bool, "errors": [lines]}``. Raises ``CrosscheckError``
    when there is no result row (truncated, failed, or not ib_write_bw's output). With several
    rows (``-a``) the last (largest message) is the result.
    """
    if not isinstance(text, str):
        raise CrosscheckError("ib_write_bw output must be text, got %r" % (text,))
    out = {"bytes": None, "iterations": None, "bw_peak_gbps": None, "bw_average_gbps": None, "msg_rate_mpps": None,
           "unit": None, "device": None, "gid_index": None, "link_type": None, "cuda_devices": {},
           "cuda_picked": None, "cuda_bus_id": None, "dmabuf": False, "errors": []}
    unit, rows = None, []
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        header = _RESULT_HEADER.search(line)
        if header:
            unit = header.group("unit")
            continue
        if unit is not None:
            row = _RESULT_ROW.match(line)
            if row:
                rows.append(row)
                continue
        m = _CUDA_DEVICE.match(stripped)
        if m:
            out["cuda_devices"][int(m.group("index"))] = "%s:%s" % (m.group("bus").upper(), m.group("dev").upper())
            continue
        for pattern, key, conv in ((_PICKED_INDEX, "cuda_picked", int), (_PICKED_BUS_INDEX, "cuda_picked", int),
                                   (_PICKED_BUS, "cuda_bus_id", str)):
            m = pattern.match(stripped)
            if m:
                out[key] = conv(m.group(1))
        if "ibv_reg_dmabuf_mr" in stripped or "using DMA-BUF" in stripped:
            out["dmabuf"] = True
        # the parameter block has two columns per line: "Dual-port : OFF\t\tDevice : mlx5_0"
        for key, pattern in _FIELDS:
            f = pattern.search(line)
            if f and out[key] is None:
                out[key] = int(f.group(1)) if key == "gid_index" else f.group(1)
        if _PERFTEST_ERRORS.search(stripped) and not stripped.startswith("Perftest doesn't supports CUDA tests with inline"):
            out["errors"].append(stripped)
    if not rows:
        raise CrosscheckError("no ib_write_bw result row (the '#bytes #iterations BW peak ... BW average' table is "
                              "missing or empty: the run failed or the output is truncated)%s"
                              % (": " + "; ".join(out["errors"][:3]) if out["errors"] else ""))
    row = rows[-1]
    factor = _UNIT_GBPS[unit]
    out.update(bytes=int(row.group("bytes")), iterations=int(row.group("iters")),
               bw_peak_gbps=round(float(row.group("peak")) * factor, 6),
               bw_average_gbps=round(float(row.group("avg")) * factor, 6),
               msg_rate_mpps=float(row.group("rate")), unit=unit)
    return out


def perftest_gpu_problem(parsed, gpu):
    """Why the GPU ib_write_bw reports using is not ``gpu`` (None when it is, or cannot be told apart).

    ``--use_cuda_bus_id`` prints the address it was given; ``--use_cuda=N`` prints the CUDA
    device listing and the number it picked, whose ``BB:DD`` must be the GPU's bus and device.
    """
    if parsed.get("cuda_bus_id"):
        if _bus_key(parsed["cuda_bus_id"])[1:] != _bus_key(gpu)[1:]:
            return "ib_write_bw used the GPU at %s, not %s" % (parsed["cuda_bus_id"], gpu)
        return None
    picked = parsed.get("cuda_picked")
    if picked is None:
        return ("ib_write_bw did not say which GPU it used (no 'Picking device No.' line): GPU memory on %s is "
                "not proven by it" % gpu)
    listed = (parsed.get("cuda_devices") or {}).get(picked)
    if listed is None:
        return "ib_write_bw picked CUDA device %d, which its device listing does not show" % picked
    if listed != "%s:%s" % _bus_device(gpu):
        return ("ib_write_bw picked CUDA device %d at PCIe %s, not the GPU %s the loopback tested"
                % (picked, listed, gpu))
    return None


def perftest_ratio(module_gbps, perftest_gbps, min_ratio=0.0):
    """``{"ratio", "ok", "message"}``: module_bw / perftest_bw against ``min_ratio`` (0: report only)."""
    for name, value in (("module bandwidth", module_gbps), ("perftest bandwidth", perftest_gbps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CrosscheckError("%s must be a number (Gbit/s), got %r" % (name, value))
    if isinstance(min_ratio, bool) or not isinstance(min_ratio, (int, float)) or min_ratio < 0:
        raise CrosscheckError("gpudirect_verify_perftest_min_ratio must be a number >= 0, got %r" % (min_ratio,))
    if perftest_gbps <= 0:
        return {"ratio": None, "ok": False,
                "message": "ib_write_bw measured %s Gbit/s: no ratio can be taken" % perftest_gbps}
    ratio = round(module_gbps / perftest_gbps, 4)
    ok = min_ratio <= 0 or ratio >= min_ratio
    message = "module %.2f Gbit/s / ib_write_bw %.2f Gbit/s = %.3f" % (module_gbps, perftest_gbps, ratio)
    if not ok:
        message += (", below gpudirect_verify_perftest_min_ratio %.3f: the loopback moved data slower than perftest "
                    "on the same pair" % min_ratio)
    return {"ratio": ratio, "ok": ok, "message": message}


# --------------------------------------------------------------------------- NCCL / nccl-tests

# "host:pid:tid [dev] NCCL INFO " (the prefix NCCL puts on each debug line)
_NCCL_PREFIX = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN)")
_NCCL_CHANNEL = re.compile(
    r"NCCL INFO (?:Channel|Ring) (?P<channel>\d+)(?:/(?P<conn>\d+))? : "
    r"(?P<src>\d+)(?:\[(?P<src_dev>[0-9a-fA-F]+)\])? -> (?P<dst>\d+)(?:\[(?P<dst_dev>[0-9a-fA-F]+)\])?"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<transport>\S.*?)\s*$")
_NET_TRANSPORT = re.compile(r"^NET/(?P<plugin>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<rest>.*)$")
_NCCL_USING = re.compile(r"NCCL INFO NET/(?P<plugin>[^ ]+) : Using (?P<list>.*)$")
_NCCL_USING_DEV = re.compile(r"\[(?P<n>\d+)\](?P<name>[^\s:\[;]+)(?::(?P<port>\d+)(?=/|\s|$))?")
# NCCL's own words on its network (why no NIC carried GPUDirect RDMA): kept as printed
_NCCL_NET_NOTE = re.compile(r"NCCL INFO (?P<note>NET/IB : No device found\.?|Failed to initialize NET plugin \S+|"
                            r"NET/\S+ : GPU Direct RDMA Disabled for \S+ .*|Using network \S+|"
                            r"NET/IB : Using \[RO\].*|NET/Socket : Using .*)$")
_NCCL_NETWORK = re.compile(r"NCCL INFO Using network (?P<network>\S+)")
_TESTS_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+"
                         r"(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s*(?P<name>.*)$")
_TESTS_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s+(?P<verdict>\S+)")
_TESTS_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>%s|nan|inf)" % _NUMBER)


def _net_transport(transport):
    m = _NET_TRANSPORT.match(transport)
    if not m:
        return None
    rest = m.group("rest")
    return {"plugin": m.group("plugin"), "net_dev": int(m.group("dev")),
            "proxy_rank": int(m.group("proxy")) if m.group("proxy") else None,
            "gdr": "/GDRDMA" in rest, "shared": "/Shared" in rest}


def parse_nccl_log(text):
    """Read NCCL's debug lines and the nccl-tests report from one run's output.

    Returns ``{"nccl_version", "channels": [...], "nics": {host: {dev: name}}, "ranks": [...],
    "hosts": [...], "rows": n, "wrong": [...], "validated": bool, "out_of_bounds": n or None,
    "out_of_bounds_ok": bool or None, "avg_bus_bandwidth": GB/s or None, "warnings": [...],
    "network": the network NCCL chose ("IB", "Socket") or None, "net_notes": [...]}``; ``net_notes``
    are NCCL's own lines on its network, each once (``NET/IB : No device found.``, ``Using network
    Socket``, ``GPU Direct RDMA Disabled for HCA ...``): the reason a run was not GPUDirect RDMA.
    Each channel is ``{"host", "channel", "conn", "src", "dst", "direction", "transport", "type"
    ("NET", "P2P", "SHM" or the word before the first /), "net": {...} or None, "line"}``.
    """
    if not isinstance(text, str):
        raise CrosscheckError("the nccl-tests output must be text, got %r" % (text,))
    out = {"nccl_version": None, "channels": [], "nics": {}, "ranks": [], "hosts": [], "rows": 0, "wrong": [],
           "validated": False, "out_of_bounds": None, "out_of_bounds_ok": None, "avg_bus_bandwidth": None,
           "warnings": [], "network": None, "net_notes": []}
    header = None
    for raw in text.splitlines():
        line = raw.rstrip()
        prefix = _NCCL_PREFIX.match(line)
        host = prefix.group("host") if prefix else None
        if prefix and prefix.group("level") == "WARN":
            out["warnings"].append(line.strip())
        m = _NCCL_CHANNEL.search(line)
        if m:
            transport = m.group("transport")
            out["channels"].append({
                "host": host, "channel": int(m.group("channel")),
                "conn": int(m.group("conn")) if m.group("conn") is not None else None,
                "src": int(m.group("src")), "dst": int(m.group("dst")), "direction": m.group("dir"),
                "transport": transport, "type": transport.split("/", 1)[0].split()[0],
                "net": _net_transport(transport), "line": line.strip()})
            continue
        m = _NCCL_NET_NOTE.search(line)
        if m and m.group("note").rstrip(".") not in [n.rstrip(".") for n in out["net_notes"]]:
            out["net_notes"].append(m.group("note"))
        m = _NCCL_NETWORK.search(line)
        if m and out["network"] is None:
            out["network"] = m.group("network")
        m = _NCCL_USING.search(line)
        if m:
            nics = out["nics"].setdefault(host or "-", {})
            for dev in _NCCL_USING_DEV.finditer(m.group("list").split(";")[0]):
                nics[int(dev.group("n"))] = dev.group("name") + (":" + dev.group("port") if dev.group("port") else "")
            continue
        if out["nccl_version"] is None:
            out["nccl_version"] = find_nccl_version(line)
        stripped = line.strip()
        m = _TESTS_RANK.match(stripped)
        if m:
            out["ranks"].append({"rank": int(m.group("rank")), "host": m.group("host"),
                                 "device": int(m.group("device")), "bus": m.group("bus"),
                                 "name": m.group("name").strip()})
            if m.group("host") not in out["hosts"]:
                out["hosts"].append(m.group("host"))
            continue
        m = _TESTS_OOB.match(stripped)
        if m:
            out["out_of_bounds"] = int(m.group("count"))
            out["out_of_bounds_ok"] = m.group("verdict") == "OK" and out["out_of_bounds"] == 0
            continue
        m = _TESTS_AVG.match(stripped)
        if m:
            try:
                out["avg_bus_bandwidth"] = float(m.group("value"))
            except ValueError:
                out["avg_bus_bandwidth"] = None
            continue
        if stripped.startswith("#") and ("#wrong" in stripped or " error" in stripped) and "size" in stripped:
            header = stripped.lstrip("#").split()
            continue
        if not prefix and re.match(r"^\d+\s+\d+\s+\S+", stripped) and len(stripped.split()) >= 9:
            cells = stripped.split()
            if header and len(cells) == len(header):
                idx = [i for i, h in enumerate(header) if h in ("#wrong", "error")]
            else:
                idx = [len(cells) - 5, len(cells) - 1]
            out["rows"] += 1
            for i in idx:
                value = cells[i] if 0 <= i < len(cells) else "?"
                if value == "N/A":
                    continue
                out["validated"] = True
                try:
                    bad = float(value) != 0
                except ValueError:
                    bad = True
                if bad:
                    out["wrong"].append("size %s: %s %s" % (cells[0], header[i] if header and len(cells) == len(header)
                                                            else "#wrong", value))
    return out


def _nic_name(parsed, channel):
    net = channel["net"]
    name = (parsed["nics"].get(channel["host"] or "-") or {}).get(net["net_dev"])
    if name is None and len(parsed["nics"]) == 1:
        name = list(parsed["nics"].values())[0].get(net["net_dev"])
    return "NET/%s/%d%s" % (net["plugin"], net["net_dev"], " (%s)" % name if name else "")


def _channel_text(parsed, c):
    return "%schannel %02d %d->%d%s via %s" % ("%s " % c["host"] if c["host"] else "", c["channel"], c["src"],
                                             c["dst"], " [%s]" % c["direction"] if c["direction"] else "",
                                             _nic_name(parsed, c) if c["net"] else c["transport"])


def judge_nccl(parsed, rc=0, nccl_tests=True):
    """``{"status": "passed"|"failed", "problems": [...], "summary": text, ...}`` for one nccl-tests run.

    Passes only on proof: the run exited 0, printed its summary with no out-of-bounds value
    and no wrong value in data it checked, NCCL printed its transport lines, and every NET
    channel says GDRDMA. The exit code alone never passes a run.

    ``nccl_tests=False`` judges another NCCL program's log (a PyTorch all-reduce): it prints no
    nccl-tests summary, so its own data check is the caller's; the transport is still judged from
    NCCL's lines alone. A problem about the transport ends with NCCL's own lines on its network
    (``net_notes``: ``NET/IB : No device found.``, ``Using network Socket``) where it printed them.
    """
    problems = []
    why = ("; NCCL's own lines: %s" % "; ".join("'%s'" % n for n in parsed.get("net_notes") or [])
           if parsed.get("net_notes") else "")
    nets = [c for c in parsed["channels"] if c["net"]]
    no_gdr = [c for c in nets if not c["net"]["gdr"]]
    multi = len(parsed["hosts"]) > 1 or len(set(c["host"] for c in parsed["channels"] if c["host"])) > 1
    if rc != 0:
        problems.append("the command exited %s" % rc)
    if not nccl_tests:
        pass
    elif parsed["out_of_bounds"] is None:
        problems.append("nccl-tests printed no '# Out of bounds values' summary: the run did not finish or the "
                        "output is truncated")
    elif not parsed["out_of_bounds_ok"]:
        problems.append("nccl-tests found %d out-of-bounds values" % parsed["out_of_bounds"])
    if not nccl_tests:
        pass
    elif parsed["wrong"]:
        problems.append("nccl-tests found wrong values (%s)" % "; ".join(parsed["wrong"][:5]))
    elif parsed["rows"] and not parsed["validated"]:
        problems.append("nccl-tests did not check the data (#wrong is N/A: run without -c 0)")
    elif parsed["out_of_bounds"] is not None and not parsed["rows"]:
        problems.append("nccl-tests printed no result row")
    if not parsed["channels"] and len(parsed["ranks"]) == 1:
        problems.append("the run had one rank (%s device %d): NCCL connected nothing, so no transport carried data "
                        "and GPUDirect RDMA is not proven; run the test with ranks on several nodes"
                        % (parsed["ranks"][0]["host"], parsed["ranks"][0]["device"]))
    elif not parsed["channels"]:
        problems.append(("ranks ran on %d hosts (%s), but " % (len(parsed["hosts"]), ", ".join(parsed["hosts"]))
                         if multi else "") +
                        "NCCL printed no transport line ('Channel NN ... via ...'): NCCL_DEBUG=INFO did not reach "
                        "the ranks (pass it to every rank, e.g. mpirun -x NCCL_DEBUG) or NCCL_DEBUG_SUBSYS leaves "
                        "out INIT and NET, so which transport carried the data is unknown")
    elif no_gdr:
        plugins = sorted(set(c["net"]["plugin"] for c in no_gdr))
        problems.append("%d of %d NET channels did not use GPUDirect RDMA (no GDRDMA; %s): %s%s%s" % (
            len(no_gdr), len(nets), "TCP sockets" if plugins == ["Socket"] else "data staged through host memory",
            "; ".join(_channel_text(parsed, c) for c in no_gdr[:8]),
            " and %d more" % (len(no_gdr) - 8) if len(no_gdr) > 8 else "", why))
    elif not nets and multi:
        problems.append("ranks ran on %d hosts (%s) but no channel used the NET transport: NCCL's lines for the "
                        "connections between the nodes are missing (ranks without NCCL_DEBUG=INFO, or a log of "
                        "one node only), so GPUDirect RDMA between them is not proven"
                        % (len(parsed["hosts"]), ", ".join(parsed["hosts"])))
    elif not nets:
        problems.append("no channel used the NET transport (only %s): NCCL kept the data inside the node, so this "
                        "run proves nothing about GPUDirect RDMA; run it across nodes, or on one node with "
                        "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so that NCCL goes through the NICs%s"
                        % (", ".join(sorted(set(c["type"] for c in parsed["channels"]))), why))
    used = sorted(set(_nic_name(parsed, c) for c in nets))
    summary = "%d NET channel%s with GDRDMA (%s)%s" % (
        len(nets) - len(no_gdr), "" if len(nets) - len(no_gdr) == 1 else "s", ", ".join(used) or "none",
        ", avg bus bandwidth %.2f GB/s" % parsed["avg_bus_bandwidth"]
        if parsed["avg_bus_bandwidth"] is not None else "")
    return {"status": "failed" if problems else "passed", "problems": problems, "summary": summary,
            "net_channels": len(nets), "gdr_channels": len(nets) - len(no_gdr), "nics_used": used,
            "hosts": parsed["hosts"], "avg_bus_bandwidth": parsed["avg_bus_bandwidth"],
            "nccl_version": parsed["nccl_version"], "warnings": parsed["warnings"][:10],
            "network": parsed.get("network"), "net_notes": list(parsed.get("net_notes") or [])}


# --------------------------------------------------------------------------- the role's record

PERFTEST_SETTINGS = ("auto", "off", "required")


def _perftest_section(results, setting, min_ratio, check_mode, pair_mode):
    section = {"setting": setting, "min_ratio": min_ratio, "status": None, "reason": None, "pairs": []}
    failures = []
    if setting == "off":
        section.update(status="off", reason="gpudirect_verify_perftest: off")
        return section, failures
    if pair_mode:
        section.update(status="skipped", reason="pair mode (gpudirect_verify_pair_with): the ib_write_bw cross-check "
                                                "runs on the loopback's pairs only")
        return section, failures
    items = results.get("results") if isinstance(results, dict) and isinstance(results.get("results"), list) else []
    for res in items:
        if not isinstance(res, dict):
            raise CrosscheckError("a perftest result must be a dict, got %r" % (res,))
        pair = res.get("item") if isinstance(res.get("item"), dict) else {}
        row = {"gpu": pair.get("gpu"), "nic": pair.get("rdma_device"), "mode": pair.get("mode"),
               "module_gbps": pair.get("bandwidth_gbps"), "perftest_gbps": res.get("bandwidth_gbps"),
               "ratio": res.get("ratio"), "status": None, "message": None}
        name = "%s <-> %s" % (row["gpu"] or "host memory", row["nic"] or "?")
        if res.get("skipped") and "status" not in res:
            row.update(status="not_run", message="the loopback did not measure this pair")
        elif res.get("status") == "would_run":
            row.update(status="would_run", message=res.get("message"))
        elif res.get("status") == "skipped":
            row.update(status="skipped", message=res.get("reason"))
            if setting == "required":
                failures.append("%s: gpudirect_verify_perftest is required, but %s" % (name, res.get("reason")))
        elif res.get("status") == "measured":
            ok = res.get("ratio_ok", True)
            row.update(status="measured" if ok else "below_minimum", message=res.get("message"))
            if not ok:
                failures.append("%s: %s" % (name, res.get("message")))
        else:
            reason = res.get("msg") or res.get("reason") or "no result"
            row.update(status="error", message=reason)
            failures.append("%s: ib_write_bw did not measure: %s (gpudirect_verify_perftest: off skips the "
                            "cross-check)" % (name, reason))
        section["pairs"].append(row)
    statuses = [r["status"] for r in section["pairs"]]
    if failures:
        section["status"] = "failed"
    elif "would_run" in statuses or (check_mode and not statuses):
        section["status"] = "would_run"
    elif "measured" in statuses:
        section["status"] = "passed"
    else:
        section["status"] = "skipped"
        section["reason"] = "; ".join(sorted(set(r["message"] for r in section["pairs"] if r["message"]))) \
            or "no pair was measured by the loopback"
        if setting == "required" and not failures:
            failures.append("gpudirect_verify_perftest is required, but no pair was cross-checked (%s)"
                            % section["reason"])
            section["status"] = "failed"
    return section, failures


def _nccl_section(result, command, check_mode):
    section = {"status": None, "reason": None, "command": list(command or []), "rc": None, "summary": None,
               "problems": [], "avg_bus_bandwidth": None, "nics_used": [], "hosts": []}
    if not command:
        section.update(status="skipped", reason="no nccl-tests command set: gpudirect_verify_nccl_tests_command")
        return section, []
    # the command module in check mode runs nothing and says so ("Command would have run if not in check mode")
    if check_mode or (isinstance(result, dict) and result.get("skipped") and "check mode" in str(result.get("msg"))):
        section.update(status="would_run", reason="check mode: would run %s" % " ".join(command))
        return section, []
    if not isinstance(result, dict) or "rc" not in result:
        msg = (result or {}).get("msg") if isinstance(result, dict) else None
        section.update(status="failed", reason="the nccl-tests command did not run: %s" % (msg or "no result"))
        return section, ["nccl-tests: %s" % section["reason"]]
    parsed = parse_nccl_log("%s\n%s" % (result.get("stdout") or "", result.get("stderr") or ""))
    verdict = judge_nccl(parsed, result["rc"])
    section.update(status=verdict["status"], rc=result["rc"], summary=verdict["summary"], problems=verdict["problems"],
                   avg_bus_bandwidth=verdict["avg_bus_bandwidth"], nics_used=verdict["nics_used"],
                   hosts=verdict["hosts"], nccl_version=verdict["nccl_version"], warnings=verdict["warnings"])
    return section, ["nccl-tests: %s" % p for p in verdict["problems"]]


def crosscheck_record(perftest_results=None, setting="auto", min_ratio=0.0, nccl_result=None, nccl_command=None,
                      check_mode=False, pair_mode=False):
    """The cross-checks of one host: ``{"perftest": {...}, "nccl_tests": {...}, "failed": bool, "problems": [...]}``.

    ``perftest_results`` is the registered loop of ``gpudirect_perftest`` over the loopback's pairs (each
    ``item`` the loopback's result for that pair); ``nccl_result`` the registered command of
    ``gpudirect_verify_nccl_tests_command``. A perftest skip fails only when ``setting`` is ``required``;
    a perftest run that did not measure, a ratio below ``min_ratio`` (> 0) and every nccl-tests problem fail.
    """
    if setting not in PERFTEST_SETTINGS:
        raise CrosscheckError("gpudirect_verify_perftest must be one of %s, got %r" % (", ".join(PERFTEST_SETTINGS),
                                                                                    setting))
    if isinstance(min_ratio, bool) or not isinstance(min_ratio, (int, float)) or min_ratio < 0:
        raise CrosscheckError("gpudirect_verify_perftest_min_ratio must be a number >= 0, got %r" % (min_ratio,))
    if nccl_command is not None and (isinstance(nccl_command, str) or not isinstance(nccl_command, (list, tuple))):
        raise CrosscheckError("gpudirect_verify_nccl_tests_command must be a list of strings, got %r" % (nccl_command,))
    perftest, p_fail = _perftest_section(perftest_results, setting, min_ratio, check_mode, pair_mode)
    nccl, n_fail = _nccl_section(nccl_result, nccl_command, check_mode)
    problems = p_fail + n_fail
    return {"perftest": perftest, "nccl_tests": nccl, "failed": bool(problems), "problems": problems}


def crosscheck_lines(crosscheck):
    """Readable lines of a cross-check record, for the per-host report and the fleet table."""
    if not isinstance(crosscheck, dict):
        return []
    lines = []
    perftest = crosscheck.get("perftest") or {}
    if perftest.get("pairs"):
        for row in perftest["pairs"]:
            lines.append("perftest %s <-> %s: %s%s" % (
                row.get("gpu") or "host memory", row.get("nic") or "?", row.get("status"),
                (" - %s" % row["message"]) if row.get("message") else ""))
    elif perftest:
        lines.append("perftest: %s%s" % (perftest.get("status"),
                                         " - %s" % perftest["reason"] if perftest.get("reason") else ""))
    nccl = crosscheck.get("nccl_tests") or {}
    if nccl:
        lines.append("nccl-tests: %s - %s" % (nccl.get("status"), "; ".join(nccl.get("problems") or [])
                                               or nccl.get("summary") or nccl.get("reason") or ""))
    return lines


def merge_into_record(record, crosscheck):
    """The verification record with its cross-checks: ``record["crosscheck"]``, and a host that passed the
    loopback but failed a cross-check turned ``failed`` (code ``crosscheck_failed``) so that no converged
    state is recorded for it. Other verdicts are left as they are."""
    if not isinstance(record, dict) or "status" not in record:
        raise CrosscheckError("expected a verification record, got %r" % (record,))
    out = dict(record)
    if not isinstance(crosscheck, dict):
        return out
    out["crosscheck"] = crosscheck
    if crosscheck.get("failed") and record["status"] == "passed":
        out["status"] = "failed"
        out["result"] = "FAILED"
        out["diagnosis"] = {
            "code": "crosscheck_failed",
            "message": "the loopback passed, but a cross-check did not: " + "; ".join(crosscheck.get("problems") or []),
            "fix": "see the report's cross-checks: for NCCL without GDRDMA load the peer-memory path (nvidia_peermem "
                   "or dma-buf) and clear ACS on the GPU/NIC path; for perftest set gpudirect_verify_perftest: off or "
                   "gpudirect_verify_perftest_min_ratio: 0 to report only",
            "related": [],
        }
    return out
