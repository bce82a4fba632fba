#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Build the GPUDirect DKMS modules for the kernels that matter, in dependency order (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_dkms
short_description: Build the GPUDirect DKMS modules for the running and the default boot kernel, in dependency order
description:
  - After a kernel update (a new kernel booted, or only installed and made the default for the next
    boot), the DKMS modules of the GPUDirect stack must exist for the new kernel, and they must be
    built in dependency order. DKMS's own autoinstall builds them in directory order, which does not
    know that C(nvidia-peermem) (in the C(nvidia) DKMS module) links against the peer-memory symbols
    of OFED's C(mlnx-ofed-kernel), or that C(nv_peer_mem) and C(gdrdrv) link against C(nvidia).
  - For each kernel in I(kernels), reads C(dkms status) once and, walking I(chain) in order, plans
    per module registered in DKMS one of the following.
  - C(install) (C(dkms install -m NAME -v VERSION -k KERNEL)) when the module is not built for the
    kernel, or built but not installed.
  - C(rebuild) (C(dkms remove -m NAME -v VERSION -k KERNEL), then C(dkms install ...)) when the module
    was built for the kernel before a module earlier in I(chain) was (its build time is older), and for
    every module after one that this run builds or rebuilds for that kernel.
  - "Build time: the modification time of C(<dkms_tree>/NAME/VERSION/KERNEL/ARCH/module). DKMS creates
    that directory and copies the freshly built C(.ko) files into it at the end of a build, and nothing
    else writes there: C(dkms install) copies out of it, depmod and initramfs tools never touch it,
    and C(dkms remove) deletes it. The installed C(.ko) under C(/lib/modules) is not used, because its
    time is the time of the last C(dkms install) (or package reinstall, or re-compression), which can be
    much later than the build and would hide a wrong build order; what matters for linking is when
    modpost read the symbol versions, that is the build."
  - Chain names that DKMS does not know are ignored and listed in C(skipped_modules). When a module has several
    versions registered, the version installed (else built) for a kernel is used for that kernel; for a
    kernel that has none, the highest version. Versions DKMS reports as C(broken) are never used.
  - Before anything is built, every kernel with planned work must have its headers
    (C(<root>/lib/modules/KERNEL/build)); otherwise the module fails naming the kernel and the package
    to install (C(linux-headers-KERNEL) on Debian/Ubuntu, C(kernel-devel-KERNEL) on EL). A kernel whose
    modules are all in place needs no headers.
  - A failed build stops the run with the module, version, kernel, the command and the last
    I(log_lines) lines of C(<dkms_tree>/NAME/VERSION/build/make.log). Nothing after it in the chain is
    built for that kernel.
  - Modules weak-installed from another kernel (EL C(weak-updates), state C(installed-weak)) have no build
    of their own for the kernel; they are left alone unless an earlier module is (re)built, in which case
    they are built for the kernel.
  - With I(build_order), DKMS's own autoinstall learns the chain's order too. For each registered version of
    each chain module after the first, a managed block at the end of the module's own C(dkms.conf)
    (C(<dkms_tree>/NAME/VERSION/source/dkms.conf), the file the package installed under C(/usr/src)) sets
    C(BUILD_DEPENDS) to the registered chain modules before it, so that a kernel or header package installed
    outside the toolkit (unattended-upgrades, an admin's C(apt upgrade)) gets OFED, then NVIDIA and its
    peer-memory module, then GDRCopy, in that order. Not C(/etc/dkms/NAME.conf) - DKMS 3.0.10 (Debian 12)
    reads that file only for a command given C(-m NAME), never in autoinstall, which builds in directory
    order then (seen on the VM tier, gdrdrv first). Where the node's DKMS knows C(BUILD_DEPENDS_REBUILD) (the
    module looks for the word in the C(dkms) script rather than trusting a version number), the block also sets
    it to C(yes), so that a rebuilt dependency rebuilds the modules that link against it. The rest of the file
    is kept; a package upgrade brings a new C(dkms.conf) and the next run writes the block again.
    This module stays the checker and repairer. Older DKMS, or a chain built before the block existed,
    is still rebuilt in order here.
  - C(changed) is true only when a dkms command ran or a build order block was written (would be, in
    check mode).
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  kernels:
    description:
      - Kernel releases to examine, as C(uname -r) prints them.
      - Empty (the default) means the running kernel and the default boot kernel (the target of
        C(/boot/vmlinuz) or C(/vmlinuz), else C(grubby --default-kernel)), the same detection as
        C(gpudirect_facts) uses (C(module_utils/gpudirect_kernel.py)).
    type: list
    elements: str
    default: []
  chain:
    description:
      - DKMS module names in build order. Each module is built for a kernel only after every module
        before it. Names DKMS does not know are ignored and reported in C(skipped_modules).
    type: list
    elements: str
    default: [mlnx-ofed-kernel, nvidia, nv_peer_mem, gdrdrv]
  dkms_tree:
    description:
      - Where DKMS keeps its tree (C(dkms_tree) in C(/etc/dkms/framework.conf)). The module reads build
        times and C(make.log) there; it does not pass the path to C(dkms). Change it only for tests.
    type: path
    default: /var/lib/dkms
  rebuild_out_of_order:
    description:
      - Rebuild a module built before an earlier module of I(chain) (see C(rebuild) above).
      - C(false) plans only what is missing or not installed (and everything after it); a module merely
        built out of order is listed in C(deferred) instead. For a pass that runs before a role that may
        rebuild the chain anyway (an OFED upgrade rebuilds OFED, then the NVIDIA driver), where a
        reordering rebuild now would be thrown away minutes later.
    type: bool
    default: true
  build_order:
    description:
      - Write the chain's order for DKMS's own autoinstall (C(BUILD_DEPENDS) in each chain module's
        C(dkms.conf), see above). C(false) leaves those files as they are.
    type: bool
    default: true
  log_lines:
    description:
      - How many lines from the end of C(make.log) to show when a build fails. C(0) shows none.
    type: int
    default: 40
  root:
    description:
      - Directory holding C(proc/), C(boot/), C(lib/modules/) and C(etc/os-release), read to find the
        running and the default kernel, the kernel headers and the distribution. Leave at C(/) on a live
        host; point it at a fabricated tree for tests (C(grubby) is asked only when it is C(/)).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Reports the planned C(actions) and C(build_order) changes, runs no dkms command but
      C(dkms status) and writes nothing. Missing headers
      are not a failure in check mode (the role installs them just before the real run); the reason of each
      action planned for such a kernel says which package must be installed first.
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.no_diff
notes:
  - Needs root (C(become)) to build; C(dkms status) alone does not.
  - Without C(dkms) on the host nothing is registered, every chain name is skipped and nothing changes.
  - The C(gpudirect_dkms) role installs the kernel headers first and reports the rebuilt modules of the
    running kernel in C(gpudirect_dkms_rebuilt_running) so that later roles reload them.
requirements:
  - dkms 2.x or 3.x.
"""

EXAMPLES = r"""
- name: Build the GPUDirect DKMS modules for the running and the default boot kernel, in order
  gpudirect_dkms:
  become: true

- name: Only the kernel installed for the next boot, OFED and nvidia only
  gpudirect_dkms:
    kernels: [6.1.0-20-amd64]
    chain: [mlnx-ofed-kernel, nvidia]
  become: true

- name: Show what would be built
  gpudirect_dkms:
  check_mode: true
  register: dkms_plan

- name: Build in order, but leave the modules' dkms.conf files as their packages wrote them
  gpudirect_dkms:
    build_order: false
  become: true
"""

RETURN = r"""
kernels:
  description: The kernels examined, running kernel first.
  returned: always
  type: list
  elements: dict
  contains:
    release:
      description: Kernel release.
      type: str
      sample: 6.1.0-20-amd64
    running:
      description: It is the running kernel.
      type: bool
      sample: false
    default:
      description: It is the default boot kernel.
      type: bool
      sample: true
    headers:
      description: C(<root>/lib/modules/<release>/build) exists.
      type: bool
      sample: true
    headers_package:
      description: The package that provides the headers on this distribution.
      type: str
      sample: linux-headers-6.1.0-20-amd64
  sample:
    - {release: 6.1.0-18-amd64, running: true, default: false, headers: true, headers_package: linux-headers-6.1.0-18-amd64}
    - {release: 6.1.0-20-amd64, running: false, default: true, headers: true, headers_package: linux-headers-6.1.0-20-amd64}
running:
  description: Release of the running kernel; null when unknown.
  returned: always
  type: str
  sample: 6.1.0-18-amd64
default:
  description: Release of the default boot kernel; null when unknown.
  returned: always
  type: str
  sample: 6.1.0-20-amd64
default_source:
  description: Where I(default) came from (C(/boot/vmlinuz), C(/vmlinuz), C(grubby)).
  returned: always
  type: str
  sample: /boot/vmlinuz
modules:
  description:
    - Per kernel, per registered chain module, its DKMS state after the run (before, in check mode).
    - C(state) is C(installed), C(built), C(installed-weak) or C(missing); C(build_time) the build time
      (epoch seconds; null when not built for the kernel) and C(built_at) the same in UTC.
  returned: always
  type: dict
  sample:
    6.1.0-20-amd64:
      mlnx-ofed-kernel: {version: 24.10.OFED.24.10.1.1.4.1, state: installed, arch: x86_64,
                         build_time: 1716460000.5, built_at: "2024-05-23T10:26:40Z"}
      nvidia: {version: 580.95.05, state: installed, arch: x86_64, build_time: 1716460100.1, built_at: "2024-05-23T10:28:20Z"}
actions:
  description: What was done (would be done, in check mode), in order.
  returned: always
  type: list
  elements: dict
  contains:
    kernel:
      description: Kernel release.
      type: str
    module:
      description: DKMS module name.
      type: str
    version:
      description: DKMS module version.
      type: str
    action:
      description: C(install) (build if needed, then install) or C(rebuild) (remove, then install).
      type: str
    reason:
      description: Why.
      type: str
    commands:
      description: The dkms commands, in order.
      type: list
      elements: list
  sample:
    - kernel: 6.1.0-20-amd64
      module: nvidia
      version: 580.95.05
      action: rebuild
      reason: built for 6.1.0-20-amd64 at 2024-05-23T10:20:00Z, before mlnx-ofed-kernel (2024-05-23T10:26:40Z)
      commands: [[/usr/sbin/dkms, remove, -m, nvidia, -v, 580.95.05, -k, 6.1.0-20-amd64],
                 [/usr/sbin/dkms, install, -m, nvidia, -v, 580.95.05, -k, 6.1.0-20-amd64]]
skipped_modules:
  description:
    - Chain names that were not used, with the reason.
    - Not called C(skipped), because Ansible reads a true C(skipped) in a result as "the task was skipped".
  returned: always
  type: list
  elements: dict
  sample: [{module: gdrdrv, reason: not registered in DKMS (dkms status does not list it)}]
deferred:
  description: With O(rebuild_out_of_order=false), the modules built out of order that were not rebuilt.
  returned: always
  type: list
  elements: dict
  sample: [{kernel: 6.1.0-20-amd64, module: nvidia, reason: "built for 6.1.0-20-amd64 at 2026-11-23T07:40:02Z,
            before mlnx-ofed-kernel (2026-11-23T07:44:10Z)"}]
build_order:
  description:
    - Per registered version of each chain module, the C(BUILD_DEPENDS) block its C(dkms.conf) needs
      (C(depends) empty for the first module, which needs none), and whether this run wrote or removed it
      (would, in check mode). Empty when I(build_order=false) or no chain module is registered.
  returned: always
  type: list
  elements: dict
  contains:
    module:
      description: DKMS module name.
      type: str
    version:
      description: The registered version whose C(dkms.conf) it is.
      type: str
    path:
      description: That C(dkms.conf), its symlinks resolved (under C(/usr/src)).
      type: str
    depends:
      description: The registered chain modules before it, which DKMS autoinstall builds first.
      type: list
      elements: str
    rebuild:
      description: Whether the block also sets C(BUILD_DEPENDS_REBUILD=yes) (the node's DKMS knows it).
      type: bool
    changed:
      description: The file was written or removed (would be, in check mode).
      type: bool
  sample:
    - {module: mlnx-ofed-kernel, version: 25.01.OFED.25.01.0.6.0.1, path: /usr/src/mlnx-ofed-kernel-25.01.OFED.25.01.0.6.0.1/dkms.conf,
       depends: [], rebuild: false, changed: false}
    - {module: nvidia, version: 580.95.05, path: /usr/src/nvidia-580.95.05/dkms.conf, depends: [mlnx-ofed-kernel],
       rebuild: false, changed: true}
dkms_messages:
  description: Lines of C(dkms status) that are not status lines (C(Error!), C(Warning:), anything malformed).
  returned: always
  type: list
  elements: str
summary:
  description: One line per action, or the single line of I(msg) when there is nothing to do.
  returned: always
  type: list
  elements: str
  sample:
    - "6.1.0-20-amd64 (default): install mlnx-ofed-kernel/24.10.OFED.24.10.1.1.4.1 - not built for 6.1.0-20-amd64"
    - "6.1.0-20-amd64 (default): install nvidia/580.95.05 - not built for 6.1.0-20-amd64"
msg:
  description: One-line summary.
  returned: always
  type: str
  sample: "DKMS modules up to date for kernels 6.1.0-18-amd64, 6.1.0-20-amd64"
"""

import datetime
import glob
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_kernel import C_LOCALE, default_boot_kernel, invalid_releases, is_release, running_kernel

DEFAULT_CHAIN = ["mlnx-ofed-kernel", "nvidia", "nv_peer_mem", "gdrdrv"]
KERNEL_STATES = ("built", "installed", "installed-weak")
KNOWN_STATES = ("added", "broken") + KERNEL_STATES
# how much a state counts when a version must be chosen for a kernel
STATE_RANK = {"installed": 3, "built": 2, "installed-weak": 1}

# dkms 3.x: "name/version, kernel, arch: state[ (note)]" and "name/version: added|broken"
STATUS3_RE = re.compile(r"^(?P<name>[^\s/,:]+)/(?P<version>[^\s,/]+?)"
                        r"(?:, (?P<kernel>[^\s,:]+), (?P<arch>[^\s,:]+))?: (?P<state>[a-z][a-z-]*)(?P<note>.*)$")
# dkms 2.x: "name, version, kernel, arch: state[ (note)]" and "name, version: added"; dkms 3.x
# prints weak installs this way too ("name, version, kernel, arch: installed-weak from kernel")
STATUS2_RE = re.compile(r"^(?P<name>[^\s/,:]+), (?P<version>[^\s,/]+?)"
                        r"(?:, (?P<kernel>[^\s,:]+), (?P<arch>[^\s,:]+))?: (?P<state>[a-z][a-z-]*)(?P<note>.*)$")
DKMS_BUILD_EXCLUDED = 77    # dkms exit status when BUILD_EXCLUSIVE rules out the kernel


# --------------------------------------------------------------------------
# dkms status
# --------------------------------------------------------------------------

def parse_status_line(line):
    """One ``dkms status`` line -> dict, or None when it is not a status line.

    dict: name, version, kernel (None for added/broken), arch, state, note
    (what follows the state, e.g. ``(Original modules exist)``), format (2 or 3).
    """
    text = line.strip()
    for fmt, regex in ((3, STATUS3_RE), (2, STATUS2_RE)):
        match = regex.match(text)
        if not match:
            continue
        state = match.group("state")
        if state not in KNOWN_STATES:
            return None
        kernel, arch = match.group("kernel"), match.group("arch")
        if state in KERNEL_STATES and not kernel:
            return None
        if kernel and not is_release(kernel):   # not a status line of a kernel release
            return None
        if state == "broken" and kernel:
            return None
        note = match.group("note").strip()
        if note and state != "installed-weak" and not (note.startswith("(") and note.endswith(")")):
            return None
        return {"name": match.group("name"), "version": match.group("version"), "kernel": kernel,
                "arch": arch, "state": state, "note": note or None, "format": fmt}
    return None


def parse_status(text):
    """``dkms status`` output -> (entries, messages): the status lines parsed,
    and every other non-blank line (``Error!``/``Warning:`` lines, malformed ones)."""
    entries, messages = [], []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        entry = parse_status_line(line)
        if entry is None:
            messages.append(line.rstrip())
        else:
            entries.append(entry)
    return entries, messages


def registry(entries):
    """Parsed entries -> ``{name: {version: {"broken": bool, "kernels": {kernel: {state, arch, note}}}}}``."""
    reg = {}
    for entry in entries:
        record = reg.setdefault(entry["name"], {}).setdefault(entry["version"], {"broken": False, "kernels": {}})
        if entry["state"] == "broken":
            record["broken"] = True
        elif entry["kernel"] and entry["state"] in KERNEL_STATES:
            old = record["kernels"].get(entry["kernel"])
            if old is None or STATE_RANK[entry["state"]] > STATE_RANK[old["state"]]:
                record["kernels"][entry["kernel"]] = {"state": entry["state"], "arch": entry["arch"],
                                                      "note": entry["note"]}
    return reg


def version_key(version):
    """Natural sort key: ``580.105.08`` > ``580.95.05``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|[^\d]+", version)]


def choose_version(versions, kernel):
    """The version of one module to use for ``kernel``: the one installed (else
    built, else weak-installed) there, else the highest; None when every
    version is broken."""
    usable = {v: r for v, r in versions.items() if not r["broken"]}
    if not usable:
        return None
    present = [(STATE_RANK[r["kernels"][kernel]["state"]], version_key(v), v)
               for v, r in usable.items() if kernel in r["kernels"]]
    if present:
        return max(present)[2]
    return max(usable, key=version_key)


# --------------------------------------------------------------------------
# build times and planning
# --------------------------------------------------------------------------

def build_dir(dkms_tree, name, version, kernel, arch):
    """``<dkms_tree>/NAME/VERSION/KERNEL/ARCH/module``, the directory a DKMS build fills
    (any architecture when ``arch`` is unknown); None when absent."""
    if arch:
        path = os.path.join(dkms_tree, name, version, kernel, arch, "module")
        return path if os.path.isdir(path) else None
    found = sorted(glob.glob(os.path.join(glob.escape(os.path.join(dkms_tree, name, version, kernel)), "*", "module")))
    return found[0] if found else None


def build_time(dkms_tree, name, version, kernel, arch):
    """When NAME/VERSION was built for KERNEL (mtime of its module directory), or None."""
    path = build_dir(dkms_tree, name, version, kernel, arch)
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def iso(timestamp):
    if timestamp is None:
        return None
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=timestamp)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def module_states(reg, chain, kernel, dkms_tree):
    """For one kernel, the registered chain modules in chain order:
    ``[{name, version, state, arch, build_time, built_at}]``."""
    rows = []
    for name in chain:
        if name not in reg:
            continue
        version = choose_version(reg[name], kernel)
        if version is None:
            continue
        info = reg[name][version]["kernels"].get(kernel)
        state = info["state"] if info else "missing"
        arch = info["arch"] if info else None
        when = build_time(dkms_tree, name, version, kernel, arch) if state in ("built", "installed") else None
        rows.append({"name": name, "version": version, "state": state, "arch": arch,
                     "build_time": when, "built_at": iso(when)})
    return rows


def plan_kernel(kernel, rows, dkms, deferred=None):
    """Actions for one kernel, from ``module_states`` rows in chain order.

    With a ``deferred`` list, a module built before an earlier one of the chain is
    not rebuilt but appended there (``{"kernel", "module", "reason"}``); missing
    modules and everything after them are still (re)built.
    """
    actions = []
    rebuilt = None          # first module (re)built for this kernel by this plan
    newest = None           # (build_time, name) of the newest build among earlier modules

    def act(row, action, reason):
        commands = []
        if action == "rebuild" and row["state"] in ("built", "installed"):
            commands.append([dkms, "remove", "-m", row["name"], "-v", row["version"], "-k", kernel])
        commands.append([dkms, "install", "-m", row["name"], "-v", row["version"], "-k", kernel])
        actions.append({"kernel": kernel, "module": row["name"], "version": row["version"],
                        "action": action, "reason": reason, "commands": commands})

    for row in rows:
        if row["state"] == "missing":
            act(row, "install", "not built for %s" % kernel)
            rebuilt = rebuilt or row["name"]
        elif rebuilt:
            act(row, "rebuild", "%s is (re)built for %s in this run and %s must be built after it"
                % (rebuilt, kernel, row["name"]))
        elif row["build_time"] is not None and newest is not None and row["build_time"] < newest[0]:
            reason = "built for %s at %s, before %s (%s)" % (kernel, row["built_at"], newest[1], iso(newest[0]))
            if deferred is None:
                act(row, "rebuild", reason)
                rebuilt = row["name"]
            else:
                deferred.append({"kernel": kernel, "module": row["name"], "reason": reason})
        elif row["state"] == "built":
            act(row, "install", "built for %s but not installed" % kernel)
        if row["build_time"] is not None and (newest is None or row["build_time"] >= newest[0]):
            newest = (row["build_time"], row["name"])
    return actions


# --------------------------------------------------------------------------
# host details
# --------------------------------------------------------------------------

def os_family(root):
    """``debian``, ``redhat`` or None, from ``<root>/etc/os-release``."""
    try:
        with open(os.path.join(root, "etc", "os-release")) as handle:
            text = handle.read()
    except (IOError, OSError):
        return None
    ids = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids.extend(value.strip().strip('"').strip("'").lower().split())
    if set(ids) & {"debian", "ubuntu"}:
        return "debian"
    if set(ids) & {"rhel", "fedora", "centos", "rocky", "almalinux"}:
        return "redhat"
    return None


def headers_package(kernel, family):
    if family == "debian":
        return "linux-headers-%s" % kernel
    if family == "redhat":
        return "kernel-devel-%s" % kernel
    return "linux-headers-%s (Debian/Ubuntu) or kernel-devel-%s (EL)" % (kernel, kernel)


def tail(path, lines):
    try:
        with open(path, errors="replace") as handle:
            content = handle.read().splitlines()
    except (IOError, OSError):
        return None
    return content[-lines:] if lines > 0 else []


def last_lines(err, out, count):
    """The last ``count`` non-blank lines of a command's output (stderr, else stdout)."""
    lines = [line for line in (err or out or "").splitlines() if line.strip()]
    return "\n".join(lines[-count:]) if lines else "(nothing)"


def find_make_log(dkms_tree, name, version, kernel):
    """make.log of the failed build (DKMS leaves it in NAME/VERSION/build), else the
    last one kept for the kernel."""
    path = os.path.join(dkms_tree, name, version, "build", "make.log")
    if os.path.isfile(path):
        return path
    kept = sorted(glob.glob(os.path.join(glob.escape(os.path.join(dkms_tree, name, version, kernel)),
                                         "*", "log", "make.log")))
    return kept[0] if kept else path


def summary_lines(kernels, actions):
    """One line per action: ``KERNEL (running): rebuild NAME/VERSION - reason``."""
    tags = {}
    for kernel in kernels:
        tag = [t for t in ("running", "default") if kernel[t]]
        tags[kernel["release"]] = " (%s)" % ", ".join(tag) if tag else ""
    return ["%s%s: %s %s/%s - %s" % (a["kernel"], tags.get(a["kernel"], ""), a["action"], a["module"], a["version"],
                                     a["reason"]) for a in actions]


# --------------------------------------------------------------------------
# DKMS's own build order (a block in each chain module's dkms.conf)
# --------------------------------------------------------------------------

ORDER_BEGIN = "# BEGIN gpudirect_dkms build order (the chain's order for DKMS autoinstall; managed by Ansible)"
ORDER_END = "# END gpudirect_dkms build order"


def order_block(depends, rebuild):
    """The lines of the block for a module built after ``depends``; [] when it needs none."""
    if not depends:
        return []
    lines = [ORDER_BEGIN, "BUILD_DEPENDS=(%s)" % " ".join('"%s"' % d for d in depends)]
    if rebuild:
        lines.append('BUILD_DEPENDS_REBUILD="yes"')
    return lines + [ORDER_END]


def with_block(text, block):
    """``text`` (a dkms.conf) with the managed block replaced by ``block`` (appended where there
    was none, dropped when ``block`` is empty)."""
    kept, inside, at = [], False, None
    for line in text.splitlines():
        if line.strip() == ORDER_BEGIN:
            inside, at = True, len(kept)
            continue
        if inside:
            if line.strip() == ORDER_END:
                inside = False
            continue
        kept.append(line)
    if at is None:
        at = len(kept)
    return "\n".join(kept[:at] + block + kept[at:]) + "\n"


def chain_order(chain, registered):
    """[(module, [registered chain modules before it])] for the registered ones, in chain order."""
    names = [n for n in chain if n in registered]
    return [(name, names[:index]) for index, name in enumerate(names)]


def dkms_knows_rebuild(dkms_path):
    """True when the dkms script on the node handles BUILD_DEPENDS_REBUILD."""
    try:
        with open(dkms_path, "rb") as f:
            return b"BUILD_DEPENDS_REBUILD" in f.read()
    except (IOError, OSError, TypeError):
        return False


# --------------------------------------------------------------------------
# module
# --------------------------------------------------------------------------

class DkmsChain(object):

    def __init__(self, module):
        self.module = module
        params = module.params
        self.chain = params["chain"]
        self.dkms_tree = params["dkms_tree"]
        self.log_lines = params["log_lines"]
        self.root = params["root"] or "/"
        self.live = os.path.realpath(self.root) == "/"
        self.dkms = module.get_bin_path("dkms")
        self.messages = []

    def run(self, args):
        return self.module.run_command(args, environ_update=dict(C_LOCALE))

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def validate(self):
        params = self.module.params
        chain = self.chain
        bad = [n for n in chain if not re.match(r"^[A-Za-z0-9._+-]+$", n or "")]
        if not chain or bad or len(set(chain)) != len(chain):
            self.fail("chain must be a non-empty list of distinct DKMS module names (letters, digits, . _ + -); "
                      "got %s" % chain)
        bad = invalid_releases(params["kernels"], "kernels (gpudirect_dkms_kernels in the gpudirect_dkms role)")
        if bad:
            self.fail("kernels must be kernel releases as uname -r prints them: %s" % "; ".join(bad))
        if self.log_lines < 0:
            self.fail("log_lines must be 0 or more; got %s" % self.log_lines)
        if not os.path.isabs(self.dkms_tree):
            self.fail("dkms_tree must be an absolute path; got %s" % self.dkms_tree)

    def kernels(self):
        running = running_kernel(self.root, self.live)
        default, source, warnings = default_boot_kernel(self.root, self.module, self.live)
        for warning in warnings:
            self.module.warn(warning)
        releases = list(self.module.params["kernels"]) or [k for k in (running, default) if k]
        seen, ordered = set(), []
        for release in releases:
            if release not in seen:
                seen.add(release)
                ordered.append(release)
        if not ordered:
            self.fail("the running kernel could not be found (%s/proc/sys/kernel/osrelease) and no default boot "
                      "kernel either: name the kernels in the kernels option" % self.root.rstrip("/"))
        family = os_family(self.root)
        rows = []
        for release in ordered:
            rows.append({"release": release, "running": release == running, "default": release == default,
                         "headers": os.path.exists(os.path.join(self.root, "lib", "modules", release, "build")),
                         "headers_package": headers_package(release, family)})
        return rows, running, default, source

    def status(self):
        """Registry of ``dkms status``; empty without dkms."""
        if not self.dkms:
            return {}
        cmd = [self.dkms, "status"]
        rc, out, err = self.run(cmd)
        entries, messages = parse_status((out or "") + "\n" + (err or ""))
        self.messages = messages
        if rc != 0 and not entries:
            self.fail("dkms status failed (rc=%s): %s. Run it by hand to see what DKMS needs."
                      % (rc, (err or out or "").strip()), cmd=cmd, rc=rc, stdout=out, stderr=err)
        if rc != 0:
            self.module.warn("dkms status exited with rc=%s; using the %d status lines it printed"
                             % (rc, len(entries)))
        return entries and registry(entries) or {}

    def skipped(self, reg):
        out = []
        for name in self.chain:
            if not self.dkms:
                out.append({"module": name, "reason": "dkms is not installed"})
            elif name not in reg:
                out.append({"module": name, "reason": "not registered in DKMS (dkms status does not list it)"})
            elif all(record["broken"] for record in reg[name].values()):
                out.append({"module": name, "reason": "broken in DKMS: the source directory of %s is missing; "
                            "reinstall its package or remove it (dkms remove %s/VERSION --all)"
                            % (", ".join("%s/%s" % (name, v) for v in sorted(reg[name], key=version_key)), name)})
        return out

    def states(self, reg, kernels):
        return {k["release"]: module_states(reg, self.chain, k["release"], self.dkms_tree) for k in kernels}

    def modules_of(self, states):
        return {kernel: {row["name"]: {"version": row["version"], "state": row["state"], "arch": row["arch"],
                                       "build_time": row["build_time"], "built_at": row["built_at"]}
                         for row in rows}
                for kernel, rows in states.items()}

    def check_headers(self, kernels, actions):
        planned = set(a["kernel"] for a in actions)
        for kernel in kernels:
            if kernel["release"] not in planned or kernel["headers"]:
                continue
            modules_dir = os.path.join(self.root, "lib", "modules", kernel["release"])
            modules = ", ".join(a["module"] for a in actions if a["kernel"] == kernel["release"])
            if not os.path.isdir(modules_dir):
                what = "Kernel %s is not installed (%s is missing)" % (kernel["release"], modules_dir)
            else:
                what = "The headers of kernel %s are missing (%s/build is absent)" % (kernel["release"], modules_dir)
            msg = ("%s, so DKMS cannot build %s for it: install %s (the gpudirect_dkms role does that with "
                   "gpudirect_dkms_install_headers: true), or leave this kernel out of kernels (gpudirect_dkms_kernels)"
                   % (what, modules, kernel["headers_package"]))
            if self.module.check_mode:
                for action in actions:
                    if action["kernel"] == kernel["release"]:
                        action["reason"] += "; headers missing: install %s first" % kernel["headers_package"]
            else:
                self.fail(msg, kernel=kernel["release"], headers_package=kernel["headers_package"],
                          actions=actions)

    def execute(self, actions):
        done = []
        for index, action in enumerate(actions):
            later = [a["module"] for a in actions[index + 1:] if a["kernel"] == action["kernel"]]
            removed = False
            for cmd in action["commands"]:
                if cmd[1] == "install" and removed and not self.registered(action["module"], action["version"]):
                    # dkms drops NAME/VERSION from its tree when it removes the last kernel;
                    # dkms 3 adds it back on install, dkms 2 needs an explicit add
                    self.must_run([self.dkms, "add", "-m", action["module"], "-v", action["version"]],
                                  action, done, later)
                self.must_run(cmd, action, done, later)
                removed = removed or cmd[1] == "remove"
            done.append(action)
        return done

    def registered(self, name, version):
        return os.path.isdir(os.path.join(self.dkms_tree, name, version, "source"))

    def build_order(self, skipped, reg):
        """Write (check mode: plan) the BUILD_DEPENDS block in the dkms.conf of each registered
        version of each chain module after the first."""
        if not self.module.params["build_order"] or not self.dkms:
            return []
        usable = set(self.chain) - set(entry["module"] for entry in skipped)
        rebuild = dkms_knows_rebuild(self.dkms)
        rows = []
        for name, depends in chain_order(self.chain, usable):
            for version in sorted(reg[name], key=version_key):
                if reg[name][version]["broken"]:
                    continue
                path = os.path.realpath(os.path.join(self.dkms_tree, name, version, "source", "dkms.conf"))
                try:
                    with open(path) as f:
                        current = f.read()
                except (IOError, OSError) as err:
                    self.fail("cannot read %s (%s), the dkms.conf of %s %s: reinstall its package, or set build_order: "
                              "false (gpudirect_dkms_build_order)" % (path, err, name, version))
                wanted = with_block(current, order_block(depends, rebuild))
                changed = wanted != current
                if changed and not self.module.check_mode:
                    self.write_conf(path, wanted)
                rows.append({"module": name, "version": version, "path": path, "depends": depends,
                             "rebuild": rebuild and bool(depends), "changed": changed})
        return rows

    def write_conf(self, path, text):
        mode = os.stat(path).st_mode & 0o7777
        tmp = path + ".gpudirect-tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        self.module.atomic_move(tmp, path)


    def must_run(self, cmd, action, done, later):
        started = time.time()
        rc, out, err = self.run(cmd)
        if rc == 0:
            return
        kernel, name, version = action["kernel"], action["module"], action["version"]
        common = dict(cmd=cmd, rc=rc, stdout=out, stderr=err, kernel=kernel, module=name, version=version,
                      done=done)
        not_built = " Not built for this kernel either: %s." % ", ".join(later) if later else ""
        said = last_lines(err, out, 5)
        if cmd[1] != "install":
            self.fail("`%s` failed (rc=%s) for %s %s on kernel %s. Fix DKMS's state for the module "
                      "(dkms status), then run again.%s dkms said:\n%s"
                      % (" ".join(cmd), rc, name, version, kernel, not_built, said), **common)
        if rc == DKMS_BUILD_EXCLUDED:
            self.fail("DKMS refuses to build %s %s for kernel %s (rc=%s: BUILD_EXCLUSIVE in its dkms.conf excludes "
                      "this kernel): `%s`. Use a version of %s that supports this kernel, or take %s out of the chain "
                      "(gpudirect_dkms_chain).%s dkms said:\n%s"
                      % (name, version, kernel, rc, " ".join(cmd), name, name, not_built, said), **common)
        log = find_make_log(self.dkms_tree, name, version, kernel)
        lines = tail(log, self.log_lines)
        if lines is None:
            shown = "%s is not there (the build did not start)." % log
        elif not lines:
            shown = "See %s." % log
        else:
            stale = os.path.getmtime(log) < started - 1
            shown = "Last %d lines of %s%s:\n%s" % (
                len(lines), log, " (from an earlier build: this one failed before make ran)" if stale else "",
                "\n".join(lines))
        self.fail("DKMS could not build %s %s for kernel %s (rc=%s): `%s`. Fix the build (a module version "
                  "that supports this kernel, the compiler, the headers), then run again.%s\ndkms said:\n%s\n%s"
                  % (name, version, kernel, rc, " ".join(cmd), not_built, said, shown),
                  make_log=log, make_log_tail=lines or [], **common)

    def main(self):
        self.validate()
        kernels, running, default, source = self.kernels()
        reg = self.status()
        skipped = self.skipped(reg)
        states = self.states(reg, kernels)
        actions = []
        deferred = None if self.module.params["rebuild_out_of_order"] else []
        for kernel in kernels:
            actions.extend(plan_kernel(kernel["release"], states[kernel["release"]], self.dkms, deferred))
        self.check_headers(kernels, actions)
        if actions and not self.module.check_mode:
            self.execute(actions)
            reg = self.status()
            states = self.states(reg, kernels)
        releases = ", ".join(k["release"] for k in kernels)
        if not any(states.values()):
            msg = "No module of the chain is registered in DKMS: nothing to build for kernels %s" % releases
        elif not actions:
            msg = "DKMS modules up to date for kernels %s" % releases
        else:
            msg = "%s %d DKMS module build(s) for kernels %s" % (
                "would run" if self.module.check_mode else "ran", len(actions), releases)
        order = self.build_order(skipped, reg)
        written = [row for row in order if row["changed"]]
        summary = summary_lines(kernels, actions) or [msg]
        summary += ["left for a later pass: %s for %s, %s" % (d["module"], d["kernel"], d["reason"])
                    for d in deferred or []]
        summary += ["%s %s: DKMS autoinstall builds %s %s" % (
            "would write" if self.module.check_mode else "wrote", row["path"], row["module"],
            "after " + ", ".join(row["depends"]) if row["depends"] else "first (block removed)")
            for row in written]
        self.module.exit_json(changed=bool(actions) or bool(written), msg=msg, summary=summary, deferred=deferred or [],
                              build_order=order,
                              kernels=kernels, running=running, default=default, default_source=source,
                              modules=self.modules_of(states), actions=actions, skipped_modules=skipped,
                              dkms_messages=self.messages)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernels=dict(type="list", elements="str", default=[]),
            chain=dict(type="list", elements="str", default=list(DEFAULT_CHAIN)),
            dkms_tree=dict(type="path", default="/var/lib/dkms"),
            log_lines=dict(type="int", default=40),
            rebuild_out_of_order=dict(type="bool", default=True),
            build_order=dict(type="bool", default=True),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    DkmsChain(module).main()


if __name__ == "__main__":
    main()
