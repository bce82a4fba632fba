#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Read the node's kernel packages for the kernel update's plan (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_plan_kernel_update
short_description: Read a node's kernel packages, running and default boot kernel for the kernel update's plan
description:
  - The read-only first step of C(playbooks/kernel_update.yml), before any node is locked or drained. Returns, for
    each of O(packages), the installed version, the candidate and every version the node's repositories offer, with
    the running kernel, the default boot kernel (read the way the boot loader chooses it), a boot hold left by a run
    whose chain failed (O(hold_record)) and the record of the campaign an earlier run started (O(campaign_record)).
  - The controller then decides the campaign's one target and which nodes need it (filter C(kernel_update_campaign),
    C(module_utils/gpudirect_kernel_update.py)). With O(target) the module also judges this node alone (RV(pending)).
  - Debian/Ubuntu read C(LC_ALL=C apt-cache policy); EL reads C(rpm -q) and C(dnf repoquery). With O(refresh) the
    package lists are refreshed first (C(apt-get update), C(dnf makecache)), except in check mode, where the result
    says that the lists were not refreshed. Nothing else is written; C(changed) is always false.
  - Fails, naming the command and the knob, when the package tool is missing, when a refresh fails, or when the
    tool's output is not what it prints (a localized or garbled output never reads as "nothing installed").
version_added: "1.4.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  packages:
    description: The kernel and header packages of the update (C(gpudirect_kernel_update_packages), or the distribution's).
    type: list
    elements: str
    required: true
  refresh:
    description: Refresh the package lists before reading them (C(gpudirect_kernel_update_refresh_cache)).
    type: bool
    default: true
  target:
    description:
      - A version for every package (string) or one per package (mapping), to judge this node alone in RV(pending).
      - Empty leaves the decision to the controller.
    type: raw
    default: ""
  hold_record:
    description: The record of a boot hold (O(gpudirect.rdma.gpudirect_boot_default#module:record)).
    type: path
    default: /var/lib/gpudirect/boot-hold.json
  campaign_record:
    description: The record of the campaign's target that C(kernel_update.yml) writes on each node it updates.
    type: path
    default: /var/lib/gpudirect/kernel-update.json
  root:
    description: Tree to read the kernel files in instead of C(/) (tests). The package tools always describe this host.
    type: path
    default: /
notes:
  - Supports check mode (the package lists are not refreshed in it).
"""

EXAMPLES = r"""
- name: Read the kernel packages, refreshing the package lists first
  gpudirect_plan_kernel_update:
    packages: [linux-image-amd64, linux-headers-amd64]
  register: kernel_plan

- name: Judge this node against a known target
  gpudirect_plan_kernel_update:
    packages: [linux-image-amd64, linux-headers-amd64]
    target: 6.1.192-2
    refresh: false
"""

RETURN = r"""
method:
  description: C(apt) or C(dnf).
  returned: always
  type: str
packages:
  description:
    - Per package C(installed) (apt; null when not installed; a list of installed versions with dnf, which installs
      kernels side by side), C(candidate) (null when no repository offers it), C(versions) (every version offered or
      installed; apt's are newest first, C(ordered) true).
  returned: always
  type: dict
  sample: {"linux-image-amd64": {"installed": "6.1.176-1", "candidate": "6.1.192-2", "versions": ["6.1.192-2", "6.1.176-1"],
           "ordered": true}}
running:
  description: The running kernel release.
  returned: always
  type: str
default:
  description: The default boot kernel release (null when the boot loader's default cannot be read).
  returned: always
  type: str
hold:
  description: The boot hold record (null when none).
  returned: always
  type: dict
record:
  description: The campaign record an earlier run wrote on this node (null when none).
  returned: always
  type: dict
refreshed:
  description: Whether the package lists were refreshed (false in check mode or with O(refresh=false)).
  returned: always
  type: bool
pending:
  description: With O(target), whether this node needs the update.
  returned: when O(target) is set
  type: bool
reason:
  description: With O(target), why (one sentence).
  returned: when O(target) is set
  type: str
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import C_LOCALE, read_text
from ansible.module_utils.gpudirect_kernel import default_boot_kernel, running_kernel, under
from ansible.module_utils.gpudirect_kernel_update import (
    node_plan, normalise_target, parse_apt_policy, parse_rpm_versions)

RPM_QF = "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n"
DNF_QF = "%{name} %{epoch}:%{version}-%{release}\\n"


def _record(path):
    text = read_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return {"unreadable": True}
    return data if isinstance(data, dict) else {"unreadable": True}


class Reader:
    def __init__(self, module):
        self.module = module

    def run(self, argv, what, ok=(0,)):
        rc, out, err = self.module.run_command(argv, environ_update=dict(C_LOCALE))
        if rc not in ok:
            self.module.fail_json(msg="%s failed (rc %s): %s. %s" % (" ".join(argv), rc, (err or out).strip()[-800:], what),
                                  rc=rc, stdout=out, stderr=err)
        return out

    def parsed(self, parser, text, argv):
        try:
            return parser(text)
        except ValueError as exc:
            self.module.fail_json(msg="%s: %s. The plan cannot tell which kernel the node has; nothing was changed"
                                      % (" ".join(argv), exc), stdout=text)

    def apt(self, packages, refresh):
        if refresh:
            self.run([self.module.get_bin_path("apt-get", required=True), "update", "-q"],
                     "The package lists could not be refreshed: fix the node's apt sources, or set "
                     "gpudirect_kernel_update_refresh_cache: false to plan from the lists it has")
        argv = [self.module.get_bin_path("apt-cache", required=True), "policy"] + list(packages)
        found = self.parsed(parse_apt_policy, self.run(argv, "apt cannot read its package lists"), argv)
        out = {}
        for name in packages:
            package = found.get(name, {"installed": None, "candidate": None, "versions": []})
            package["ordered"] = True
            out[name] = package
        return out

    def dnf(self, packages, refresh):
        dnf = self.module.get_bin_path("dnf", required=True)
        if refresh:
            self.run([dnf, "-q", "makecache"], "The package metadata could not be refreshed: fix the node's "
                     "repositories, or set gpudirect_kernel_update_refresh_cache: false to plan from the metadata it has")
        rpm_argv = [self.module.get_bin_path("rpm", required=True), "-q", "--qf", RPM_QF] + list(packages)
        # rpm -q exits with the number of packages not installed
        installed = self.parsed(parse_rpm_versions, self.run(rpm_argv, "rpm cannot read its database",
                                                             ok=range(0, len(packages) + 1)), rpm_argv)
        every_argv = [dnf, "-q", "repoquery", "--showduplicates", "--qf", DNF_QF] + list(packages)
        every = self.parsed(lambda t: parse_rpm_versions(t, "dnf repoquery"),
                            self.run(every_argv, "dnf cannot read its repositories"), every_argv)
        newest_argv = [dnf, "-q", "repoquery", "--latest-limit", "1", "--qf", DNF_QF] + list(packages)
        newest = self.parsed(lambda t: parse_rpm_versions(t, "dnf repoquery"),
                             self.run(newest_argv, "dnf cannot read its repositories"), newest_argv)
        out = {}
        for name in packages:
            have = installed.get(name, [])
            offered = every.get(name, [])
            out[name] = {"installed": have, "candidate": (newest.get(name) or [None])[-1],
                         "versions": offered + [v for v in have if v not in offered], "ordered": False}
        return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", required=True),
            refresh=dict(type="bool", default=True),
            target=dict(type="raw", default=""),
            hold_record=dict(type="path", default="/var/lib/gpudirect/boot-hold.json"),
            campaign_record=dict(type="path", default="/var/lib/gpudirect/kernel-update.json"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    packages = [name.strip() for name in p["packages"]]
    bad = [name for name in packages if not name or any(c.isspace() for c in name) or name.startswith("-")]
    if not packages or bad:
        module.fail_json(msg="gpudirect_kernel_update_packages must name packages (got %r): fix it in the inventory" % p["packages"])
    try:
        target = normalise_target(p["target"], packages)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    refresh = p["refresh"] and not module.check_mode
    reader = Reader(module)
    if module.get_bin_path("apt-cache"):
        method, found = "apt", reader.apt(packages, refresh)
    elif module.get_bin_path("dnf"):
        method, found = "dnf", reader.dnf(packages, refresh)
    else:
        module.fail_json(msg="neither apt-cache nor dnf is on this node: kernel_update.yml updates Debian, Ubuntu and "
                             "EL kernels only; leave this node out (--limit)")
    root, live = p["root"], p["root"] == "/"
    try:
        running = running_kernel(root, live=live)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    default, _source, warnings = default_boot_kernel(root, module if live else None, live)
    for warning in warnings:
        module.warn(warning)
    result = dict(changed=False, method=method, packages=found, running=running, default=default,
                  hold=_record(under(root, p["hold_record"])), record=_record(under(root, p["campaign_record"])),
                  refreshed=refresh)
    if target:
        plan = node_plan("this node", result, target)
        if plan["errors"]:
            module.fail_json(msg="; ".join(plan["errors"]), **result)
        result.update(pending=plan["pending"], reason=plan["reason"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
