#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Hold or release the default boot kernel after a kernel update (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_boot_default
short_description: Hold the default boot kernel on the running one when a kernel update's chain was not proven
description:
  - O(state=held) makes the running kernel the boot loader's default again when the default boot kernel is
    another one (the new kernel of an update) and the update's chain (DKMS modules in dependency order, reboot,
    drivers, verification) was not proven in this run (O(proven=false)), so that an unplanned boot does not land
    on a kernel whose modules were not built in chain order. The decision is
    C(module_utils/gpudirect_kernel.py) C(boot_hold_decision).
  - GRUB (Debian/Ubuntu, C(/boot/grub/grub.cfg) and C(update-grub)) gets the drop-in O(dropin) that sets
    C(GRUB_DEFAULT) to the running kernel's own menu entry (its id path), then C(update-grub); this works
    whatever C(GRUB_DEFAULT) was and lasts across reboots (C(grub-reboot) would last one boot). EL uses
    C(grubby --set-default). The default is read back afterwards, the way the boot loader chooses it.
  - O(state=released) undoes a hold (removes the drop-in and runs C(update-grub), or sets the kernel the hold
    replaced back with C(grubby --set-default)), so the newest kernel is the default again. Run it when the
    update's chain starts again on the node.
  - A node without GRUB and grubby has nothing to hold; the result says so (RV(method) C(none)) without failing.
version_added: "1.3.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  state:
    description: C(held) (hold when needed) or C(released) (undo a hold).
    type: str
    choices: [held, released]
    required: true
  proven:
    description: The update's chain passed verification on the running kernel in this run (O(state=held)).
    type: bool
    default: false
  dropin:
    description: The GRUB drop-in that holds the default.
    type: path
    default: /etc/default/grub.d/99-gpudirect-boot-hold.cfg
  record:
    description: JSON file that records a hold (kernel held, kernel it replaced, method, since).
    type: path
    default: /var/lib/gpudirect/boot-hold.json
  update_grub:
    description: The command that regenerates C(/boot/grub/grub.cfg) on Debian/Ubuntu.
    type: path
    default: /usr/sbin/update-grub
  root:
    description:
      - Tree to work in instead of C(/) (tests). C(grubby) runs only when it is C(/); O(update_grub) is then the
        stand-in under it.
    type: path
    default: /
notes:
  - Supports check mode (reports what it would change, changes nothing).
"""

EXAMPLES = r"""
- name: Keep the running kernel as the default boot kernel unless the chain was proven
  gpudirect_boot_default:
    state: held
    proven: "{{ gpudirect_verify_status | default('') == 'passed' }}"

- name: Release a hold before the update's chain runs again
  gpudirect_boot_default:
    state: released
"""

RETURN = r"""
method:
  description: C(grub), C(grubby) or C(none) (no boot loader this module can set).
  returned: always
  type: str
held:
  description: A hold is in place after this task.
  returned: always
  type: bool
running:
  description: The running kernel.
  returned: always
  type: str
default:
  description: The default boot kernel after this task, read the way the boot loader chooses it (null when unknown).
  returned: always
  type: str
instead_of:
  description: The default boot kernel the hold replaced (null when none).
  returned: always
  type: str
reason:
  description: Why the module held, released or left the default, in one sentence.
  returned: always
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import read_text
from ansible.module_utils.gpudirect_kernel import (
    C_LOCALE, GRUB_CFG, boot_hold_decision, default_boot_kernel, grub_entry_path, parse_grub_cfg,
    render_hold_dropin, running_kernel, under)


class Boot:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.root = p["root"]
        self.live = self.root == "/"
        self.dropin = under(self.root, p["dropin"])
        self.record = under(self.root, p["record"])
        self.update_grub = p["update_grub"]
        self.method = self._method()

    def _method(self):
        if os.path.exists(under(self.root, GRUB_CFG)) and os.path.exists(under(self.root, self.update_grub)):
            return "grub"
        if self.live and self.module.get_bin_path("grubby"):
            return "grubby"
        return "none"

    def default(self):
        release, _source, warnings = default_boot_kernel(self.root, self.module if self.live else None, self.live)
        for warning in warnings:
            self.module.warn(warning)
        return release

    def run(self, argv, what):
        if not self.live:
            # tests: the command is a stand-in under root, run in root
            argv = [under(self.root, argv[0])] + list(argv[1:])
        rc, out, err = self.module.run_command(argv, environ_update=dict(C_LOCALE), cwd=self.root)
        if rc != 0:
            self.module.fail_json(msg="%s failed (rc %s): %s. Fix the boot loader configuration, then run "
                                      "playbooks/kernel_update.yml again" % (" ".join(argv), rc, (err or out).strip()),
                                  rc=rc, stdout=out, stderr=err, what=what)

    def grubby(self, release, what):
        self.run([self.module.get_bin_path("grubby", required=True), "--set-default", "/boot/vmlinuz-%s" % release], what)

    def read_record(self):
        text = read_text(self.record)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, path, text):
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        with open(path, "w") as handle:
            handle.write(text)


def hold(boot, proven, result):
    running = running_kernel(boot.root, live=boot.live)
    default = boot.default()
    result.update(running=running, default=default)
    decision = boot_hold_decision(running, default, proven)
    result["reason"] = decision["reason"]
    record = boot.read_record()
    result["held"] = record is not None and (record or {}).get("kernel") == running and default == running
    if result["held"]:
        result["instead_of"] = record.get("instead_of")
    if decision["action"] != "hold":
        return result
    if boot.method == "none":
        result["reason"] = ("%s; but this node has no GRUB (/boot/grub/grub.cfg with %s) and no grubby: nothing "
                            "to hold, an unplanned boot starts %s" % (decision["reason"], boot.update_grub, default))
        return result
    entry = None
    if boot.method == "grub":
        entry = grub_entry_path(parse_grub_cfg(read_text(under(boot.root, GRUB_CFG))), running)
        if entry is None:
            boot.module.fail_json(msg="%s, but no normal entry of /boot/grub/grub.cfg loads vmlinuz-%s: set the "
                                      "default by hand (grub-set-default, GRUB_DEFAULT) before the node reboots"
                                      % (decision["reason"], running), **result)
    result.update(changed=True, held=True, instead_of=default, default=running)
    if boot.module.check_mode:
        return result
    boot.write(boot.record, json.dumps({"kernel": running, "instead_of": default, "method": boot.method,
                                        "since": int(time.time())}, sort_keys=True) + "\n")
    if boot.method == "grub":
        boot.write(boot.dropin, render_hold_dropin(entry, running, default))
        boot.run([boot.update_grub], "hold")
    else:
        boot.grubby(running, "hold")
    after = boot.default()
    result["default"] = after
    if after != running:
        boot.module.fail_json(msg="the default boot kernel is still %s after holding %s (%s): check the boot "
                                  "loader's default entry by hand before the node reboots"
                                  % (after, running, boot.method), **result)
    return result


def release(boot, result):
    running = running_kernel(boot.root, live=boot.live)
    record = boot.read_record()
    has_dropin = os.path.exists(boot.dropin)
    result.update(running=running, default=boot.default(), instead_of=(record or {}).get("instead_of"))
    if record is None and not has_dropin:
        result["reason"] = "no hold of the default boot kernel is in place"
        return result
    result.update(changed=True, reason="hold of %s released: %s is the default boot kernel again"
                  % ((record or {}).get("kernel") or "the default", result["instead_of"] or "the newest kernel"))
    if boot.module.check_mode:
        return result
    if has_dropin:
        os.remove(boot.dropin)
        if boot.method == "grub":
            boot.run([boot.update_grub], "release")
    if boot.method == "grubby" and result["instead_of"]:
        if os.path.exists("/boot/vmlinuz-%s" % result["instead_of"]):
            boot.grubby(result["instead_of"], "release")
        else:
            boot.module.warn("the kernel the hold replaced (%s) is no longer installed: grubby's default stays %s"
                             % (result["instead_of"], result["default"]))
    if record is not None:
        os.remove(boot.record)
    result["default"] = boot.default()
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["held", "released"]),
            proven=dict(type="bool", default=False),
            dropin=dict(type="path", default="/etc/default/grub.d/99-gpudirect-boot-hold.cfg"),
            record=dict(type="path", default="/var/lib/gpudirect/boot-hold.json"),
            update_grub=dict(type="path", default="/usr/sbin/update-grub"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    boot = Boot(module)
    result = {"changed": False, "method": boot.method, "held": False, "running": None, "default": None,
              "instead_of": None, "reason": ""}
    if module.params["state"] == "held":
        result = hold(boot, module.params["proven"], result)
    else:
        result = release(boot, result)
        result["held"] = False
    module.exit_json(**result)


if __name__ == "__main__":
    main()
