#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Read-only plan for one owner's kernel command line arguments (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_kernel_args
short_description: Compare one owner's kernel arguments with the boot configuration and the running kernel
description:
  - Read-only; changes nothing, also outside check mode. The role C(gpudirect_reboot) (tasks
    C(kernel_args.yml)) acts on what it returns.
  - Reads C(/proc/cmdline), the default boot entry's arguments (the C(linux) line of the entry GRUB boots by
    default in C(/boot/grub/grub.cfg), with C(grubenv); C(grubby --info=DEFAULT) on EL) and what the owner set
    before (its GRUB drop-in, or its record file on EL).
  - The generated boot configuration is compared, not only the drop-in, so a drop-in whose C(update-grub)
    failed or was interrupted is regenerated on the next run.
  - Arguments are compared without double quotes (GRUB and the kernel drop them), and C(pci=) options one by
    one, so C(pci=realloc,config_acs=...) carries C(pci=config_acs=...).
version_added: "1.2.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  method:
    description:
      - C(grub_dropin) (Debian/Ubuntu), C(grubby) (EL), C(none) (no known way to edit the command line here),
        C(cmdline) (only compare O(args) with C(/proc/cmdline), e.g. after a reboot).
    type: str
    choices: [grub_dropin, grubby, none, cmdline]
    required: true
  owner:
    description: The role the arguments belong to (names the drop-in comment); required unless O(method=cmdline).
    type: str
  args:
    description: The owner's arguments now; an empty list removes what the owner set before.
    type: list
    elements: str
    required: true
  dropin:
    description: The owner's GRUB drop-in (O(method=grub_dropin)).
    type: path
  record:
    description: The file that records what the owner set with grubby (O(method=grubby)).
    type: path
  tool:
    description: C(update-grub) or C(grubby); its absence means the arguments cannot be applied here.
    type: path
  root:
    description: Tree to read instead of C(/) (tests). C(grubby) runs only when it is C(/).
    type: path
    default: /
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.read_only
"""

EXAMPLES = r"""
- name: Plan the IOMMU arguments
  gpudirect_kernel_args:
    method: grub_dropin
    owner: host_prereqs
    args: [iommu=pt]
    dropin: /etc/default/grub.d/90-gpudirect-iommu.cfg
    tool: /usr/sbin/update-grub
  register: plan

- name: After the reboot, check the running kernel
  gpudirect_kernel_args:
    method: cmdline
    args: [iommu=pt, 'pci=config_acs="0x00000@0000:02:08.0"']
  register: booted
"""

RETURN = r"""
applicable:
  description: The arguments can be applied here (a known method and its tool installed).
  returned: always
  type: bool
tool_present:
  description: O(tool) exists.
  returned: always
  type: bool
cmdline:
  description: The running kernel's arguments.
  returned: always
  type: list
  elements: str
boot_args:
  description: The default boot entry's arguments; null when unknown (no grub.cfg, an entry without Linux).
  returned: always
  type: list
  elements: str
boot_entry:
  description: The default boot entry (GRUB titles joined with C( > ), or grubby's title).
  returned: always
  type: str
owned_before:
  description: The arguments the owner had set before (its drop-in or record).
  returned: always
  type: list
  elements: str
missing_cmdline:
  description: Wanted arguments the running kernel lacks.
  returned: always
  type: list
  elements: str
stale_cmdline:
  description: Arguments the owner set before, no longer wants, and the running kernel still has.
  returned: always
  type: list
  elements: str
missing_boot:
  description: Wanted arguments the default boot entry lacks.
  returned: always
  type: list
  elements: str
stale_boot:
  description: Arguments the owner no longer wants that the default boot entry still has.
  returned: always
  type: list
  elements: str
regenerate:
  description: grub.cfg must be regenerated (update-grub).
  returned: always
  type: bool
grubby_remove:
  description: Arguments for C(grubby --update-kernel=ALL --remove-args).
  returned: always
  type: list
  elements: str
grubby_add:
  description: Arguments for C(grubby --update-kernel=ALL --args).
  returned: always
  type: list
  elements: str
dropin_content:
  description: The drop-in the owner's arguments need (empty when O(args) is empty).
  returned: always
  type: str
reboot:
  description: The running kernel lacks a wanted argument or still has one the owner removed.
  returned: always
  type: bool
changes:
  description: What would change, in short sentences (drop-in and record edits excluded).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import read_text
from ansible.module_utils.gpudirect_kernel import (
    C_LOCALE, grub_default_entry, kernel_args_plan, parse_dropin_args, parse_grubby_info, render_dropin, under)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            method=dict(type="str", required=True, choices=["grub_dropin", "grubby", "none", "cmdline"]),
            owner=dict(type="str"),
            args=dict(type="list", elements="str", required=True),
            dropin=dict(type="path"),
            record=dict(type="path"),
            tool=dict(type="path"),
            root=dict(type="path", default="/"),
        ),
        required_if=[("method", "grub_dropin", ("owner", "dropin", "tool")),
                     ("method", "grubby", ("owner", "record", "tool"))],
        supports_check_mode=True,
    )
    p = module.params
    root, method = p["root"], p["method"]
    bad = [a for a in p["args"] if not a or any(c.isspace() for c in a)]
    if bad:
        module.fail_json(msg="kernel arguments must be non-empty words without blanks, got %r: fix the list "
                             "the calling role passes as gpudirect_reboot_kernel_args" % (bad,))
    cmdline = (read_text(under(root, "proc/cmdline")) or "").split()
    tool_present = bool(p["tool"]) and os.path.exists(under(root, p["tool"]))
    boot_args, boot_entry, owned_before, warnings = None, None, [], []
    if method == "grub_dropin":
        owned_before = parse_dropin_args(read_text(under(root, p["dropin"])))
        grub = grub_default_entry(root) if tool_present else None
        if grub is not None:
            warnings.extend(grub["warnings"])
            boot_entry = grub["title"]
            boot_args = grub["args"] if grub["image"] else None
    elif method == "grubby":
        owned_before = (read_text(under(root, p["record"])) or "").split()
        if tool_present and root == "/":
            rc, out, err = module.run_command([p["tool"], "--info=DEFAULT"], environ_update=dict(C_LOCALE))
            if rc != 0:
                module.fail_json(msg="%s --info=DEFAULT failed (rc=%s): %s; the default boot entry cannot be read, "
                                     "fix grubby or the boot entries first" % (p["tool"], rc, (err or out).strip()))
            info = parse_grubby_info(out)
            boot_args, boot_entry = info["args"], info["title"]
    plan = kernel_args_plan(method, p["args"], owned_before, cmdline, boot_args, tool_present)
    if method == "cmdline":
        plan["reboot"] = False
        plan["changes"] = []
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, tool_present=tool_present, cmdline=cmdline, boot_args=boot_args,
                     boot_entry=boot_entry, owned_before=owned_before,
                     dropin_content=render_dropin(p["owner"], p["args"]) if p["args"] and p["owner"] else "",
                     **plan)


if __name__ == "__main__":
    main()
