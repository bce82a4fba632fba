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
  boot_once:
    description:
      - With O(method=grub_dropin), a change of the boot configuration is booted once before it becomes the
        default. When the running kernel lacks the change, RV(trial) is the C(/etc/grub.d) script of a copy of the
        default entry with the new arguments (id C(gpudirect-trial), for C(grub-reboot)); when the running kernel
        already carries it, RV(deferred) says the drop-in is to be written only after verification passed.
      - Ignored with other methods (C(grubby) edits every entry at once).
    type: bool
    default: false
  pending:
    description:
      - With O(boot_once), the other owners whose change this run has not promoted yet, each
        C({args, owned_before}); the trial entry carries theirs and then this owner's.
    type: list
    elements: dict
    default: []
  root:
    description: Tree to read instead of C(/) (tests). C(grubby) runs only when it is C(/).
    type: path
    default: /
extends_documentation_fragment:
  - gpudirect_attributes
  - gpudirect_attributes.read_only
"""

EXAMPLES = r"""
- name: Plan the IOMMU arguments, to be booted once before they become the default
  gpudirect_kernel_args:
    method: grub_dropin
    owner: host_prereqs
    args: [iommu=pt]
    dropin: /etc/default/grub.d/90-gpudirect-iommu.cfg
    tool: /usr/sbin/update-grub
    # without it, plan.regenerate and plan.dropin_content say how to make them the default at once
    boot_once: true
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
dropin_changed:
  description: The owner's drop-in differs from what O(args) need (or exists while O(args) is empty).
  returned: always
  type: bool
trial:
  description:
    - With O(boot_once), the C(/etc/grub.d) script whose output is the trial entry (C(--id gpudirect-trial)),
      when the running kernel lacks the change and the default entry does not carry it yet; null otherwise.
  returned: always
  type: str
trial_args:
  description: The trial entry's kernel arguments (the default entry's, with every pending owner's change).
  returned: always
  type: list
  elements: str
deferred:
  description:
    - With O(boot_once), the running kernel carries the change but the default boot configuration does not, so
      the drop-in is written after verification passed, not now.
  returned: always
  type: bool
next_entry:
  description: GRUB's one-shot C(next_entry) in grubenv (set by C(grub-reboot)), null when none.
  returned: always
  type: str
unavailable:
  description:
    - With O(boot_once), why the change cannot be booted once (no default GRUB entry to copy); it is then made the
      default at once, with a warning. Empty otherwise.
  returned: always
  type: str
trial_entry:
  description: grub.cfg holds an entry with the id C(gpudirect-trial).
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
    C_LOCALE, TRIAL_ID, grub_default_entry, kernel_args_plan, parse_dropin_args, parse_grubby_info, render_dropin,
    trial_plan, under)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            method=dict(type="str", required=True, choices=["grub_dropin", "grubby", "none", "cmdline"]),
            owner=dict(type="str"),
            args=dict(type="list", elements="str", required=True),
            dropin=dict(type="path"),
            record=dict(type="path"),
            tool=dict(type="path"),
            boot_once=dict(type="bool", default=False),
            pending=dict(type="list", elements="dict", default=[]),
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
    boot_args, boot_entry, owned_before, warnings, grub = None, None, [], [], None
    dropin_content = render_dropin(p["owner"], p["args"]) if p["args"] and p["owner"] else ""
    dropin_changed = False
    if method == "grub_dropin":
        dropin_text = read_text(under(root, p["dropin"]))
        owned_before = parse_dropin_args(dropin_text)
        dropin_changed = (dropin_text or "") != dropin_content
        # the trial's one-shot boot is not the default: compare with what boots after it
        grub = grub_default_entry(root, ignore_next=(TRIAL_ID,)) if tool_present else None
        if grub is not None:
            warnings.extend(w for w in grub["warnings"] if TRIAL_ID not in w)
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
    once = {"trial": None, "trial_args": [], "deferred": False, "unavailable": ""}
    if p["boot_once"] and method == "grub_dropin" and plan["applicable"]:
        pending = [dict(args=e.get("args") or [], owned_before=e.get("owned_before") or []) for e in p["pending"]]
        once = trial_plan(plan, grub, pending + [dict(args=p["args"], owned_before=owned_before)], [p["owner"]],
                          dropin_changed)
        if once["unavailable"]:
            warnings.append("%s: %s is not booted once before it becomes the default: %s; the drop-in and "
                            "update-grub make it the default at once (gpudirect_reboot_boot_once)"
                            % (p["owner"], " ".join(p["args"]) or "the removal", once["unavailable"]))
        elif once["trial"] or once["deferred"]:
            # the drop-in and update-grub wait for verification: say that instead of "regenerate"
            plan["changes"] = [c for c in plan["changes"] if not c.startswith("regenerate grub.cfg")] + [
                "boot once into a copy of the default entry with %s (grub-reboot %s); the drop-in and "
                "update-grub make it the default only after the node verified on it"
                % (" ".join(once["trial_args"]), TRIAL_ID) if once["trial"] else
                "the running kernel carries the arguments: the drop-in and update-grub make them the default "
                "after the node verified"]
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, tool_present=tool_present, cmdline=cmdline, boot_args=boot_args,
                     boot_entry=boot_entry, owned_before=owned_before, dropin_content=dropin_content,
                     dropin_changed=dropin_changed,
                     next_entry=grub["next_entry"] if grub else None,
                     trial_entry=bool(grub and grub["trial_entry"]), **dict(plan, **once))


if __name__ == "__main__":
    main()
