# -*- coding: utf-8 -*-
"""Fingerprint of everything site.yml manages on a node, and how two compare.

``gpudirect_state`` records the fingerprint after a converged run and, on the
next run, compares the node against it: when nothing differs (and the
controller's inputs, i.e. inventory variables and toolkit files, are the same)
the install stages have nothing to do and are skipped. Anything that could make
a stage act must therefore show up here; being too broad only costs a full run.

The fingerprint is a dict of components. File trees keep one digest per path,
so a difference names the files; bulk components (package database, DKMS tree,
built modules) keep one digest each.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat

from ansible.module_utils.gpudirect_host import read_attr
from ansible.module_utils.gpudirect_kernel import default_boot_kernel, running_kernel
from ansible.module_utils.gpudirect_pci import (PCI_VENDOR_MELLANOX, PCI_VENDOR_NVIDIA, device_acs, list_pci_addresses,
                                                pci_address_of, pci_device_dir, read_pci_function)

# 2: the GPU and NIC inventory, NIC firmware, the peer-memory path and the toolkit's
# own units joined the fingerprint; a format 1 record means one full run.
FORMAT = 2

# Configuration the roles write (repositories, pins, keys, modprobe and
# modules-load files, units and drop-ins, limits, GRUB drop-ins, local facts,
# boot-time scripts, the toolkit's own state under /var/lib/gpudirect).
CONFIG_TREES = (
    "etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d", "etc/apt/keyrings",
    "etc/yum.repos.d", "etc/dnf", "etc/modprobe.d", "etc/modules-load.d", "etc/systemd/system",
    "etc/systemd/system.conf.d", "etc/systemd/user.conf.d", "etc/security/limits.d",
    "etc/default/grub.d", "etc/ansible/facts.d", "etc/gpudirect", "etc/infiniband",
    "usr/local/sbin", "var/lib/gpudirect",
    # framework.conf(.d) (signing) and a site's per-module NAME.conf overrides
    "etc/dkms",
)
# The runs' own bookkeeping under var/lib/gpudirect, never the node's configuration: the run
# lock (held while a run works on the node, so present when the record is written and
# rewritten by the next run) and the note of a node left drained (written before a drain,
# removed at resume). Left out of the fingerprint, as the record itself is; the role adds
# the paths its inventory sets (gpudirect_drain_lock_file, gpudirect_drain_left_drained_file).
RUN_BOOKKEEPING = ("var/lib/gpudirect/run.lock", "var/lib/gpudirect/left-drained.json")
CONFIG_FILES = (
    "etc/apt/sources.list", "etc/default/grub", "etc/security/limits.conf",
    "etc/systemd/system.conf", "etc/systemd/user.conf", "etc/os-release",
    # the trial entry of a kernel command line booted once, not yet promoted (gpudirect_reboot)
    "etc/grub.d/42_gpudirect_trial",
)
# Package databases: any install, removal, upgrade or hold changes them.
PACKAGE_DBS = ("var/lib/dpkg/status", "var/lib/rpm")
# What DKMS built and where the kernel looks for it; names, sizes and times only.
MODULE_TREES = ("var/lib/dkms", "lib/modules")
MODULE_SUBDIRS = ("updates", "extra", "weak-updates")
BOOT_FILES = ("boot/grub/grub.cfg", "boot/grub/grubenv", "boot/grub2/grubenv", "boot/loader/entries")
REBOOT_FLAGS = ("run/reboot-required", "var/run/reboot-required")
# Kernel modules the stages load or keep away; srcversion changes with each build.
WATCHED_MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "gdrdrv", "nouveau",
                   "ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib")
DKMS_SKIP = ("build",)
# The toolkit's own boot units (gpudirect-nvidia-peermem.service, gpudirect-pcie-acs.service,
# ...): every one installed is watched, whatever gpudirect_state_units lists.
OWN_UNIT_PREFIX = "gpudirect-"
UNIT_DIRS = ("etc/systemd/system", "lib/systemd/system", "usr/lib/systemd/system")
# The module signing certificate the gpudirect_dkms role keeps (roles/gpudirect_dkms/tasks/sign.yml).
SIGNING_CERT = "etc/gpudirect/module-signing/signing-cert.der"
# Modules that give the NIC a path into GPU memory (the dma-buf path needs none).
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")


def _under(root, relative):
    return os.path.join(root or "/", relative.lstrip("/"))


def _sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entry_digest(path):
    """Digest of one tree entry: file content, link target, or 'dir'; None when gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    mode = "%o" % stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "dir:" + mode
    if stat.S_ISREG(info.st_mode):
        try:
            return "file:%s:%s" % (mode, _sha256_file(path))
        except (IOError, OSError) as exc:
            return "unreadable:%s" % exc.__class__.__name__
    return "special:%o" % stat.S_IFMT(info.st_mode)


def _walk(top, skip_dirs=(), exclude=()):
    """Paths under top (relative to top), sorted, links not followed."""
    found = []
    for current, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        for name in sorted(dirs + files):
            path = os.path.join(current, name)
            if path in exclude:
                continue
            found.append(path)
    return found


def config_digests(root="/", exclude=()):
    """{'/etc/...': digest} for every entry of the configuration trees and files."""
    result = {}
    excluded = set(_under(root, p) for p in tuple(exclude) + RUN_BOOKKEEPING)
    for tree in CONFIG_TREES:
        top = _under(root, tree)
        if not os.path.isdir(top):
            continue
        for path in _walk(top, exclude=excluded):
            result["/" + os.path.relpath(path, root or "/")] = _entry_digest(path)
    for name in CONFIG_FILES:
        digest = _entry_digest(_under(root, name))
        if digest is not None:
            result["/" + name] = digest
    return result


def _listing_digest(paths, root):
    """Digest of names, kinds, sizes and modification times (not content)."""
    digest = hashlib.sha256()
    count = 0
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
        size = info.st_size if stat.S_ISREG(info.st_mode) else 0
        digest.update(("%s|%o|%d|%d|%s\n" % (os.path.relpath(path, root or "/"), stat.S_IFMT(info.st_mode),
                                             size, int(info.st_mtime), target)).encode("utf-8", "replace"))
        count += 1
    return "%d:%s" % (count, digest.hexdigest())


def package_digest(root="/"):
    """One digest over the package databases present (dpkg status content, rpmdb listing)."""
    parts = []
    for name in PACKAGE_DBS:
        path = _under(root, name)
        if os.path.isfile(path):
            parts.append("%s=%s" % (name, _sha256_file(path)))
        elif os.path.isdir(path):
            parts.append("%s=%s" % (name, _listing_digest(_walk(path), root)))
    return ";".join(parts) or "none"


def built_modules_digest(root="/"):
    """Listing digest of the DKMS tree (without build directories) and of each
    kernel's updates/extra/weak-updates directories."""
    paths = []
    dkms = _under(root, MODULE_TREES[0])
    if os.path.isdir(dkms):
        paths.extend(_walk(dkms, skip_dirs=DKMS_SKIP))
    modules = _under(root, MODULE_TREES[1])
    if os.path.isdir(modules):
        for kernel in sorted(os.listdir(modules)):
            for sub in MODULE_SUBDIRS:
                top = os.path.join(modules, kernel, sub)
                if os.path.isdir(top):
                    paths.append(top)
                    paths.extend(_walk(top))
    return _listing_digest(paths, root)


def module_signatures(root="/"):
    """Module signing state (issue #17): the sha256 of the toolkit's signing certificate
    (``etc/gpudirect/module-signing/signing-cert.der``, None when absent) and, per DKMS-installed
    module (``lib/modules/<kernel>/{updates,extra,weak-updates}``), the sha256 of its appended
    signature (None when unsigned, ``compressed`` for .xz/.gz/.zst files, whose signature sits
    inside). A key rotation or a re-signing changes it, so the stages run again."""
    cert = _under(root, SIGNING_CERT)
    out = {"cert": _sha256_file(cert) if os.path.isfile(cert) else None, "modules": {}}
    modules = _under(root, MODULE_TREES[1])
    if not os.path.isdir(modules):
        return out
    for kernel in sorted(os.listdir(modules)):
        for sub in MODULE_SUBDIRS:
            top = os.path.join(modules, kernel, sub)
            if not os.path.isdir(top):
                continue
            for path in _walk(top):
                if not os.path.isfile(path) or os.path.islink(path):
                    continue
                rel = os.path.relpath(path, _under(root, ""))
                if path.endswith(".ko"):
                    out["modules"][rel] = _signature_digest(path)
                elif path.endswith((".ko.xz", ".ko.gz", ".ko.zst")):
                    out["modules"][rel] = "compressed"
    return out


def _signature_digest(path):
    """sha256 of the module signature appended to an uncompressed module; None when unsigned."""
    magic = b"~Module signature appended~\n"
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size < len(magic) + 12:
                return None
            handle.seek(size - len(magic) - 12)
            tail = handle.read()
            if not tail.endswith(magic):
                return None
            sig_len = int.from_bytes(tail[8:12], "big")
            if sig_len > size - len(magic) - 12:
                return "malformed"
            handle.seek(size - len(magic) - 12 - sig_len)
            return hashlib.sha256(handle.read(sig_len)).hexdigest()
    except (IOError, OSError):
        return None


def boot_digest(root="/"):
    """Installed kernel images and boot loader configuration."""
    paths = []
    boot = _under(root, "boot")
    if os.path.isdir(boot):
        paths.extend(os.path.join(boot, n) for n in sorted(os.listdir(boot))
                     if n.startswith(("vmlinuz", "initrd", "initramfs")))
    for name in BOOT_FILES:
        path = _under(root, name)
        if os.path.isdir(path):
            paths.extend(_walk(path))
        elif os.path.lexists(path):
            paths.append(path)
    return _listing_digest(paths, root)


def loaded_modules(root="/"):
    """{'nvidia': '<srcversion or loaded>'} for the watched modules that are loaded
    (``/proc/modules``; ``/sys/module`` where there is no procfs)."""
    result = {}
    try:
        with open(_under(root, "proc/modules")) as handle:
            names = set(line.split(" ", 1)[0] for line in handle if line.strip())
    except (IOError, OSError):
        # a captured tree without procfs: /sys/module/<name> exists while it is loaded
        names = set(n for n in WATCHED_MODULES if os.path.isdir(_under(root, "sys/module/" + n)))
    for name in WATCHED_MODULES:
        if name in names:
            srcversion = None
            try:
                with open(_under(root, "sys/module/%s/srcversion" % name)) as handle:
                    srcversion = handle.read().strip()
            except (IOError, OSError):
                pass
            result[name] = srcversion or "loaded"
    return result


def acs_controls(root="/"):
    """{'0000:00:01.0': '0x001d'} for every function with a readable ACS capability."""
    result = {}
    for address in list_pci_addresses(root):
        info = device_acs(pci_device_dir(root, address))
        if info["status"] == "present":
            result[address] = info["ctl_hex"]
    return result


def reboot_flags(root="/"):
    return sorted("/" + name for name in REBOOT_FLAGS if os.path.exists(_under(root, name)))


def _link(speed, width):
    return "%s GT/s x%s" % ("?" if speed is None else ("%g" % speed), "?" if width is None else width)


def _rdma_names_by_address(root):
    """{'0000:04:00.0': ['mlx5_0']} from /sys/class/infiniband/*/device."""
    base = _under(root, "sys/class/infiniband")
    names = {}
    try:
        entries = sorted(os.listdir(base))
    except (IOError, OSError):
        return names
    for name in entries:
        address = pci_address_of(root or "/", os.path.join(base, name, "device"))
        if address:
            names.setdefault(address, []).append(name)
    return names


def device_inventory(root="/"):
    """{'0000:03:00.0': 'gpu 10de:2335 numa 0 link 32 GT/s x16 of 32 GT/s x16', ...} for every
    NVIDIA GPU (class 03xx), every function with an RDMA device and every Mellanox
    function: a GPU that fell off the bus, a NIC that lost its RDMA device, a link that
    trained narrower or slower than before, all change it."""
    rdma = _rdma_names_by_address(root)
    result = {}
    for address in list_pci_addresses(root):
        try:
            fn = read_pci_function(root or "/", address)
        except Exception:  # one unreadable function must not hide the others
            result[address] = "unreadable"
            continue
        is_gpu = fn.vendor == PCI_VENDOR_NVIDIA and fn.pci_class is not None and (fn.pci_class >> 16) == 0x03
        if not (is_gpu or address in rdma or fn.vendor == PCI_VENDOR_MELLANOX):
            continue
        if fn.pci_class is not None and (fn.pci_class >> 16) == 0x06:
            continue   # a Mellanox bridge (BlueField, ConnectX switch ports): not a device we verify
        kind = "gpu" if is_gpu else "nic " + ",".join(rdma.get(address) or ["(no RDMA device)"])
        result[address] = "%s %04x:%04x numa %s link %s of %s" % (
            kind, fn.vendor or 0, fn.device or 0, fn.numa_node,
            _link(fn.current_link_speed, fn.current_link_width), _link(fn.max_link_speed, fn.max_link_width))
    return result


def nic_firmware(root="/"):
    """{'mlx5_0': '20.39.1002'} from /sys/class/infiniband/*/fw_ver (soft devices have none)."""
    base = _under(root, "sys/class/infiniband")
    try:
        names = sorted(os.listdir(base))
    except (IOError, OSError):
        return {}
    return dict((name, read_attr(os.path.join(base, name, "fw_ver")) or "none") for name in names)


def peer_memory_path(root="/", loaded=None):
    """How the NIC reaches GPU memory now: the loaded peer-memory modules and/or
    dma-buf (the open NVIDIA module), or 'none'."""
    loaded = loaded_modules(root) if loaded is None else loaded
    parts = [name for name in PEERMEM_MODULES if name in loaded]
    if "Open Kernel Module" in (read_attr(_under(root, "proc/driver/nvidia/version")) or ""):
        parts.append("dma-buf (open NVIDIA module)")
    return " + ".join(parts) or "none"


def own_units(root="/"):
    """The toolkit's unit files installed on the node (gpudirect-*.service), sorted."""
    found = set()
    for directory in UNIT_DIRS:
        try:
            names = os.listdir(_under(root, directory))
        except (IOError, OSError):
            continue
        found.update(n for n in names if n.startswith(OWN_UNIT_PREFIX) and n.endswith(".service"))
    return sorted(found)


def kernel_state(root="/", runner=None, live=False):
    default, source, _warnings = default_boot_kernel(root, runner=runner, live=live)
    cmdline = ""
    try:
        with open(_under(root, "proc/cmdline")) as handle:
            cmdline = handle.read().strip()
    except (IOError, OSError):
        pass
    return {"running": running_kernel(root, live=live), "default": default, "default_source": source,
            "cmdline": cmdline, "reboot_flags": reboot_flags(root)}


def watched_files(root="/", paths=()):
    """sha256 of each file named by the inventory whose content decides what a run
    does but which no stage writes (the module signing certificate and key at the
    paths the admin gave, replaced in place at a key rotation): None when missing or
    unreadable, so a file that comes or goes is a difference too."""
    out = {}
    for path in paths:
        try:
            out[path] = _sha256_file(_under(root, path))
        except (IOError, OSError):
            out[path] = None
    return out


def fingerprint(root="/", units=None, runner=None, live=False, exclude=(), files=()):
    """The node's fingerprint (see module docstring). ``units`` maps unit name
    to its active state, as read by the caller (systemctl needs a live host);
    ``files`` are node paths whose content is watched (``watched_files``)."""
    loaded = loaded_modules(root)
    return {
        "format": FORMAT,
        "kernel": kernel_state(root, runner=runner, live=live),
        "packages": package_digest(root),
        "built_modules": built_modules_digest(root),
        "boot": boot_digest(root),
        "loaded_modules": loaded,
        "peer_memory": peer_memory_path(root, loaded),
        "acs": acs_controls(root),
        "devices": device_inventory(root),
        "firmware": nic_firmware(root),
        "units": dict(units or {}),
        "config": config_digests(root, exclude=exclude),
        "signing": module_signatures(root),
        "files": watched_files(root, files),
    }


def _changed_keys(old, new):
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def _describe(name, old, new):
    if old is None:
        return "%s: added" % name
    if new is None:
        return "%s: removed" % name
    return "%s: %s -> %s" % (name, old, new)


def _short_list(items, limit=5):
    shown = ", ".join(items[:limit])
    return shown + (" and %d more" % (len(items) - limit) if len(items) > limit else "")


def differences(recorded, current):
    """Human-readable reasons why ``current`` differs from ``recorded``; [] when equal.

    ``recorded`` and ``current`` are ``{"inputs": str, "fingerprint": dict}``.
    """
    if not isinstance(recorded, dict) or not isinstance(recorded.get("fingerprint"), dict):
        return ["the record holds no fingerprint"]
    reasons = []
    if recorded.get("inputs") != current.get("inputs"):
        stages = changed_stages(recorded.get("inputs"), current.get("inputs"))
        reasons.append("the controller's inputs changed (inventory variables or toolkit files)%s"
                       % (" of stage %s" % ", ".join(stages) if stages else ""))
    reasons.extend(node_differences(recorded, current))
    return reasons


def stage_inputs(text):
    """The per-stage digests of an ``inputs`` value (JSON ``{"stage": digest}``); None for any other value
    (a record of a toolkit that digested everything at once)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return value
    return None


def changed_stages(recorded, current):
    """Stages whose digest differs between two ``inputs`` values; every stage of ``current`` when the
    recorded value has no per-stage digests; [] when ``current`` has none either."""
    new = stage_inputs(current)
    if new is None:
        return []
    old = stage_inputs(recorded) or {}
    return sorted(k for k in new if old.get(k) != new[k])


def node_differences(recorded, current):
    """What differs on the node itself (the fingerprint), leaving the controller's inputs aside."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("fingerprint"), dict):
        return ["the record holds no fingerprint"]
    reasons = []
    old, new = recorded["fingerprint"], current["fingerprint"]
    if old.get("format") != new.get("format"):
        return reasons + ["the record was written by another toolkit version (format %s, now %s)"
                          % (old.get("format"), new.get("format"))]
    old_kernel, new_kernel = old.get("kernel") or {}, new.get("kernel") or {}
    for key, label in (("running", "running kernel"), ("default", "default boot kernel"),
                       ("cmdline", "kernel command line"), ("reboot_flags", "reboot-required flags")):
        if old_kernel.get(key) != new_kernel.get(key):
            reasons.append("%s: %s -> %s" % (label, old_kernel.get(key), new_kernel.get(key)))
    for key, label in (("packages", "installed packages (package database)"),
                       ("built_modules", "built kernel modules (DKMS tree, updates/extra directories)"),
                       ("boot", "installed kernels or boot loader configuration")):
        if old.get(key) != new.get(key):
            reasons.append("%s changed" % label)
    old_signing, new_signing = old.get("signing") or {}, new.get("signing") or {}
    if old_signing.get("cert") != new_signing.get("cert"):
        reasons.append("module signing certificate %s" % ("changed" if old_signing.get("cert") and new_signing.get("cert")
                                                         else "added" if new_signing.get("cert") else "removed"))
    resigned = _changed_keys(old_signing.get("modules"), new_signing.get("modules"))
    if resigned:
        reasons.append("module signatures changed: %s" % _short_list(resigned))
    if old.get("peer_memory") != new.get("peer_memory"):
        reasons.append("peer-memory path: %s -> %s" % (old.get("peer_memory"), new.get("peer_memory")))
    for key, label in (("loaded_modules", "loaded module"), ("acs", "ACS control of"),
                       ("devices", "GPU/NIC"), ("firmware", "NIC firmware of"), ("units", "unit")):
        changed = _changed_keys(old.get(key), new.get(key))
        if changed:
            reasons.append("%s %s" % (label, _short_list(
                [_describe(k, (old.get(key) or {}).get(k), (new.get(key) or {}).get(k)) for k in changed])))
    changed_files = _changed_keys(old.get("config"), new.get("config"))
    if changed_files:
        reasons.append("configuration files changed: %s" % _short_list(changed_files))
    old_files, new_files = old.get("files") or {}, new.get("files") or {}
    watched = _changed_keys(old_files, new_files)
    if watched:
        reasons.append("watched files changed: %s" % _short_list(
            ["%s (%s)" % (path, "now missing" if new_files.get(path) is None
                          else "new" if old_files.get(path) is None else "content") for path in watched]))
    return reasons
