# -*- coding: utf-8 -*-
"""RDMA-CM's per-port defaults (issue #44, outcome 4): the RoCE mode and the ToS that the kernel's RDMA
connection manager gives a connection whose application did not choose them, read and set through
configfs. Shared by library/gpudirect_roce_qos.py (plans and sets them) and library/gpudirect_facts.py
(reads them back).

Sources (tests/fixtures/rdma_cm/README.md names the captures):

* Documentation/ABI/testing/configfs-rdma_cm (torvalds/linux): configfs mounted, ``mkdir
  /sys/kernel/config/rdma_cm/<hca>`` makes ``ports/<port-num>/default_roce_mode`` ("The possible RoCE types
  are either "IB/RoCE v1" or "RoCE v2"", since 4.4) and ``ports/<port-num>/default_roce_tos`` (0-255, since
  4.11; rdma_set_option's RDMA_OPTION_ID_TOS still overrides it per connection).
* drivers/infiniband/core/cma_configfs.c: the show functions print ``"%s\\n"`` of the kernel's GID type
  name and ``"%u\\n"`` of the ToS; the stores take ``ib_cache_gid_parse_type_str`` (cache.c: exactly one of
  the names, one trailing newline allowed, case-sensitive) and ``kstrtou8``. The values live in the kernel's
  ``cma_device``, not in the configfs group: removing the group (``rmdir``) keeps them, and they last until
  the RDMA device goes away (a reboot, a driver reload). The group is an item owned by the rdma_cm module,
  so while it exists rdma_cm cannot be unloaded (an openibd restart unloads it): it is made only to read or
  write and removed again when it was made here, as NVIDIA's ``cma_roce_tos`` (mlnx-tools, sbin/cma_roce_tos)
  does. ``mkdir`` fails with ENODEV for a name that is no RDMA device rdma_cm knows.
* drivers/infiniband/core/cma.c: a new device's ports start at RoCE v2 where the port supports it
  (CMA_PREFERRED_ROCE_GID_TYPE) and ToS 0; ``cma_set_default_gid_type`` refuses (EINVAL) a type the port
  does not support (an InfiniBand port takes only "IB/RoCE v1", soft-RoCE only "RoCE v2").
* The ToS is the IPv4 TOS / IPv6 traffic class byte of the RoCE v2 packets: DSCP in its upper six bits, ECN in
  the lower two (RFC 2474, RFC 3168); the profile's DSCP d is ToS ``d << 2`` (ECN bits 0).
* configfs and rdma_cm missing: ``cma_roce_mode``/``cma_roce_tos`` mount configfs on /sys/kernel/config when
  /proc/mounts lacks it and then need ``/sys/kernel/config/rdma_cm`` ("Module rdma_cm is not loaded or does
  not support configfs"); the directory comes with the module when the kernel has
  CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re

MODE_V1 = "IB/RoCE v1"
MODE_V2 = "RoCE v2"
# the names drivers/infiniband/core/cache.c prints and parses (gid_type_str)
MODES = (MODE_V1, MODE_V2)
ATTRS = ("default_roce_mode", "default_roce_tos")
CONFIGFS = "/sys/kernel/config"
RDMA_CM = CONFIGFS + "/rdma_cm"

_TOS = re.compile(r"^[0-9]{1,3}\Z")


def _value(text, what):
    if not isinstance(text, str):
        raise TypeError("%s must be text, got %r" % (what, text))
    # the kernel prints one value and one newline
    return text[:-1] if text.endswith("\n") else text


def parse_roce_mode(text):
    """The text of ``default_roce_mode`` -> ``"RoCE v2"`` or ``"IB/RoCE v1"``. Anything else (another
    spelling such as ``RoCE V2``, ``RoCE v1`` or ``IBOE V2``, blanks, two lines, the kernel's ``Invalid GID
    type``) is no value the kernel prints for a port: ValueError naming it."""
    value = _value(text, "default_roce_mode")
    if value not in MODES:
        raise ValueError("default_roce_mode reads %r, not one of the RoCE types the kernel prints (%s)"
                         % (text, " or ".join('"%s"' % m for m in MODES)))
    return value


def parse_roce_tos(text):
    """The text of ``default_roce_tos`` -> int 0-255 (the kernel prints it in decimal). ValueError for
    anything else (empty, hexadecimal, signed, out of range, more than one line)."""
    value = _value(text, "default_roce_tos")
    if not _TOS.match(value) or int(value) > 255:
        raise ValueError("default_roce_tos reads %r, not a ToS 0-255 as the kernel prints it" % (text,))
    return int(value)


def is_dscp(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 63


def tos_of_dscp(dscp):
    """DSCP 26 -> ToS 104 (DSCP in the upper six bits, ECN bits 0)."""
    if not is_dscp(dscp):
        raise ValueError("a DSCP is a number 0-63, got %r" % (dscp,))
    return dscp << 2


def split_tos(tos):
    """ToS 106 -> {"dscp": 26, "ecn": 2}."""
    return {"dscp": tos >> 2, "ecn": tos & 3}


def wanted(dscp, enabled=True):
    """The RDMA-CM defaults the QoS profile asks for: RoCE v2 and the ToS of its DSCP, or {} when the
    feature is off or the profile has no DSCP."""
    if not enabled or dscp is None:
        return {}
    return {"rdma_cm_mode": MODE_V2, "rdma_cm_tos": tos_of_dscp(dscp)}


def _path(root, absolute):
    return os.path.join(root or "/", absolute.lstrip("/"))


def configfs_mounted(root):
    """Whether <root>/proc/mounts has a configfs on /sys/kernel/config (None when it cannot be read)."""
    try:
        with open(_path(root, "/proc/mounts")) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return None
    return any(len(f) >= 3 and f[1] == CONFIGFS and f[2] == "configfs" for f in (line.split() for line in lines))


def availability(root):
    """What stands between this host and rdma_cm's configfs directory -> dict:

    ``ready``: <root>/sys/kernel/config/rdma_cm is there; ``mounted`` (configfs on /sys/kernel/config,
    None when /proc/mounts cannot be read); ``loaded`` (/sys/module/rdma_cm); ``steps``: what would make it
    appear (``mount configfs``, ``load rdma_cm``), in order; ``problem``: one sentence naming what is
    missing, "" when ready. A loaded rdma_cm on a mounted configfs without the directory is a kernel built
    without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS: no step helps (``steps`` empty, ``problem`` set)."""
    ready = os.path.isdir(_path(root, RDMA_CM))
    mounted = configfs_mounted(root)
    if ready:
        mounted = True if mounted is None else mounted
    loaded = os.path.isdir(_path(root, "/sys/module/rdma_cm"))
    out = {"ready": ready, "mounted": mounted, "loaded": loaded, "steps": [], "problem": ""}
    if ready:
        return out
    missing = []
    if not mounted:
        out["steps"].append("mount configfs")
        missing.append("configfs is not mounted on %s" % CONFIGFS)
    if not loaded:
        out["steps"].append("load rdma_cm")
        missing.append("the kernel module rdma_cm is not loaded")
    if missing:
        out["problem"] = "%s (no %s)" % (" and ".join(missing), RDMA_CM)
    else:
        out["problem"] = ("rdma_cm is loaded and configfs is mounted, but %s is absent: this kernel was built "
                          "without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS" % RDMA_CM)
    return out


# The two configfs calls, apart so that a test's fake configfs can answer as the kernel does (the kernel fills a
# new group with ports/<n>/ itself; a plain directory stays empty).
def _mkdir(path):
    os.mkdir(path)


def _rmdir(path):
    os.rmdir(path)


def _group(root, device):
    if not isinstance(device, str) or not device or device in (".", "..") or "/" in device or "\n" in device:
        raise ValueError("%r is no RDMA device name" % (device,))
    return _path(root, RDMA_CM + "/" + device)


class DeviceGroup(object):
    """``with DeviceGroup(root, "mlx5_0", create=True) as group:`` the configfs group of one RDMA device,
    made for the ``with`` when absent (``create``) and removed after it only when made here (see the module
    docstring: a group left behind pins rdma_cm). ``group.path`` is its directory; ``group.error`` the reason
    it could not be made (then ``group.path`` is None)."""

    def __init__(self, root, device, create=True):
        self.device = device
        self.dir = _group(root, device)
        self.create = create
        self.made = False
        self.path = None
        self.error = ""
        self.cleanup_error = ""

    def __enter__(self):
        if os.path.isdir(self.dir):
            self.path = self.dir
        elif not self.create:
            self.error = "no configfs group %s (reading it needs a mkdir there)" % _display(self.dir)
        else:
            try:
                _mkdir(self.dir)
                self.made = True
                self.path = self.dir
            except OSError as exc:
                why = "no RDMA device of that name known to rdma_cm" if exc.errno == errno.ENODEV else \
                    os.strerror(exc.errno) if exc.errno else str(exc)
                self.error = "mkdir %s failed: %s" % (_display(self.dir), why)
        return self

    def __exit__(self, *exc_info):
        if self.made:
            try:
                _rmdir(self.dir)
            except OSError as exc:
                self.cleanup_error = "rmdir %s failed: %s" % (_display(self.dir), exc)
        return False

    def attr(self, port, name):
        return os.path.join(self.path, "ports", str(port), name)


def _display(path):
    """A configfs path as it is on the host (the part from /sys/kernel/config on)."""
    index = path.find(RDMA_CM)
    return path[index:] if index >= 0 else path


def read_port(group, port):
    """One port's defaults from an open DeviceGroup -> (values, errors): values ``roce_mode`` (str) and
    ``roce_tos`` (int), each only when read and well-formed; errors {attribute: reason}."""
    values, errors = {}, {}
    if group.path is None:
        return values, dict((a, group.error) for a in ATTRS)
    for name, key, parse in (("default_roce_mode", "roce_mode", parse_roce_mode),
                             ("default_roce_tos", "roce_tos", parse_roce_tos)):
        path = group.attr(port, name)
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            errors[name] = "cannot read %s: %s" % (_display(path), os.strerror(exc.errno) if exc.errno else exc)
            continue
        try:
            values[key] = parse(text)
        except ValueError as exc:
            errors[name] = str(exc)
    return values, errors


def read_defaults(root, device, ports, create=True):
    """The defaults of the ``ports`` of ``device`` -> {"ports": {port: values}, "errors": {port: {attr:
    reason}}, "group": "" or why the group could not be made}. The group is made and removed again when
    absent and ``create`` (the only way the kernel shows the values); a read-only caller passes False."""
    out = {"ports": {}, "errors": {}, "group": ""}
    with DeviceGroup(root, device, create=create) as group:
        out["group"] = group.error
        for port in ports:
            values, errors = read_port(group, port)
            out["ports"][str(port)] = values
            if errors:
                out["errors"][str(port)] = errors
    if group.cleanup_error:
        out["group"] = group.cleanup_error
    return out


def write_defaults(root, device, port, values):
    """Write ``values`` ({"roce_mode": ..., "roce_tos": ...}, either) to one port, the group made for it and
    removed after when absent. Returns "" or the reason a write failed (the kernel's EINVAL for a RoCE type
    the port does not support is named as such)."""
    with DeviceGroup(root, device, create=True) as group:
        if group.path is None:
            return group.error
        for key, name in (("roce_mode", "default_roce_mode"), ("roce_tos", "default_roce_tos")):
            if key not in values:
                continue
            path = group.attr(port, name)
            try:
                with open(path, "w") as handle:
                    handle.write("%s\n" % values[key])
            except (IOError, OSError) as exc:
                why = os.strerror(exc.errno) if exc.errno else str(exc)
                if exc.errno == errno.EINVAL and key == "roce_mode":
                    why += " (the port does not support %s)" % values[key]
                return "writing %r to %s failed: %s" % (str(values[key]), _display(path), why)
    return group.cleanup_error
