#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Hold or release the default boot kernel after a kernel update (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_boot_default
short_description: Boot a new kernel once before it becomes the default; hold the default on a proven kernel
description:
  - "A kernel update on GRUB (Debian/Ubuntu) boots the new kernel once before it becomes the default (issue #43):
    O(state=pinned), before the packages are installed, pins the default boot entry on the last proven kernel (a
    drop-in setting C(GRUB_DEFAULT) to its entry, C(update-grub), and a record with C(boot_once)); O(state=trial),
    just before the reboot, names the newest kernel's entry as GRUB's one-shot C(next_entry) (C(grub-reboot)).
    GRUB clears it as it boots it, so a node that panics, hangs or is power-cycled on the new kernel boots the
    pinned one next. O(state=held) at the end of the chain promotes the new kernel (removes the pin) when the node
    verified on it (O(proven=true)), and otherwise keeps the pin and clears a one-shot boot still pending. The
    decisions are C(module_utils/gpudirect_kernel.py) C(boot_once_decision) and C(boot_once_end)."
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
  - Boot once needs GRUB's C(next_entry). With grubby (EL) or no boot loader, O(state=pinned) and O(state=trial)
    change nothing and say that the new kernel is the default as the packages make it (RV(reason)); the hold
    after an unproven chain works as before.
version_added: "1.3.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  state:
    description:
      - C(pinned) (pin the default on the last proven kernel before a kernel install), C(trial) (boot the newest
        kernel once at the next boot), C(held) (at the end of the chain, promote, keep the pin, or hold the running
        kernel when needed) or C(released) (undo a hold or pin).
    type: str
    choices: [pinned, trial, held, released]
    required: true
  kernel:
    description:
      - With O(state=trial), the kernel release to boot once. Default, the newest kernel of C(/boot/grub/grub.cfg)
        (the one a plain C(update-grub) makes the default).
    type: str
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
  grub_reboot:
    description: The command that sets GRUB's one-shot C(next_entry) (O(state=trial)).
    type: path
    default: /usr/sbin/grub-reboot
  grub_editenv:
    description: The command that edits C(/boot/grub/grubenv) (clears a one-shot boot left pending).
    type: path
    default: /usr/bin/grub-editenv
  grub_set_default:
    description:
      - The command that sets grubenv's C(saved_entry); with C(GRUB_DEFAULT=saved) the promoted kernel becomes the
        default through it (no package install moves C(saved_entry)).
    type: path
    default: /usr/sbin/grub-set-default
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
- name: Pin the default boot kernel on the last proven one before the kernel packages are installed
  gpudirect_boot_default:
    state: pinned

- name: Boot the new kernel once at the next boot
  gpudirect_boot_default:
    state: trial

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
  description: The default boot kernel the hold replaced, or the kernel tried while pinned (null when none).
  returned: always
  type: str
kernel:
  description: The kernel the hold or pin keeps as the default boot kernel (null when none).
  returned: always
  type: str
trial:
  description: The kernel booted once at the next boot (O(state=trial)), or tried by this chain (null when none).
  returned: always
  type: str
refreshed_for:
  description:
    - With O(state=trial), the installed kernels (C(/boot/vmlinuz-*)) that C(/boot/grub/grub.cfg) did not list, for
      which C(update-grub) ran before the newest kernel was read (a node whose kernel packages did not run it).
  returned: when grub.cfg was regenerated
  type: list
  elements: str
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
    C_LOCALE, GRUB_CFG, GRUBENV, boot_hold_decision, boot_once_decision, boot_once_end, default_boot_kernel,
    grub_entry_path, kernels_without_grub_entry, newest_grub_kernel, parse_grub_cfg, parse_grubenv, render_hold_dropin,
    render_pin_dropin, running_kernel, under)


class Boot:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.root = p["root"]
        self.live = self.root == "/"
        self.dropin = under(self.root, p["dropin"])
        self.record = under(self.root, p["record"])
        self.update_grub = p["update_grub"]
        self.grub_reboot = p["grub_reboot"]
        self.grub_editenv = p["grub_editenv"]
        self.grub_set_default = p["grub_set_default"]
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

    def cfg(self):
        return parse_grub_cfg(read_text(under(self.root, GRUB_CFG)))

    def next_entry(self):
        return parse_grubenv(read_text(under(self.root, GRUBENV))).get("next_entry") or None

    def entry(self, cfg, release, why):
        entry = grub_entry_path(cfg, release)
        if entry is None:
            self.module.fail_json(msg="%s, but no normal entry of /boot/grub/grub.cfg loads vmlinuz-%s: check that the "
                                      "kernel is installed and update-grub ran, or set the default by hand "
                                      "(grub-set-default, GRUB_DEFAULT) before the node reboots" % (why, release))
        return entry

    def clear_next_entry(self):
        self.run([self.grub_editenv, "/" + GRUBENV, "unset", "next_entry"], "clear the one-shot boot")

    def write(self, path, text):
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        with open(path, "w") as handle:
            handle.write(text)


def hold(boot, proven, result):
    record = boot.read_record()
    if record and record.get("boot_once"):
        return end_boot_once(boot, proven, record, result)
    running = running_kernel(boot.root, live=boot.live)
    default = boot.default()
    result.update(running=running, default=default)
    decision = boot_hold_decision(running, default, proven)
    result["reason"] = decision["reason"]
    record = boot.read_record()
    result["held"] = record is not None and (record or {}).get("kernel") == running and default == running
    result["kernel"] = running if result["held"] else None
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
    result.update(changed=True, held=True, instead_of=default, default=running, kernel=running)
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


def _pin(boot, proven):
    """Make ``proven`` the default through the drop-in (update-grub when it changes); True when it changed."""
    text = render_pin_dropin(boot.entry(boot.cfg(), proven, "the default boot kernel is pinned on %s" % proven), proven)
    if read_text(boot.dropin) == text:
        return False
    if not boot.module.check_mode:
        boot.write(boot.dropin, text)
        boot.run([boot.update_grub], "pin")
    return True


def _write_record(boot, record, data):
    old = dict(record or {})
    old.pop("since", None)
    if old == data:
        return False
    if not boot.module.check_mode:
        boot.write(boot.record, json.dumps(dict(data, since=int(time.time())), sort_keys=True) + "\n")
    return True


def boot_once(boot, state, kernel, result):
    """state pinned (before the install) or trial (before the reboot)."""
    running = running_kernel(boot.root, live=boot.live)
    record = boot.read_record()
    result.update(running=running, default=boot.default())
    if boot.method != "grub":
        result["reason"] = ("boot once needs GRUB's one-shot entry (/boot/grub/grub.cfg with %s); this node has %s: "
                            "the new kernel is the default boot kernel as the packages make it"
                            % (boot.update_grub, "grubby" if boot.method == "grubby" else "neither GRUB nor grubby"))
        if record is not None and not record.get("boot_once"):
            # an earlier run's hold (grubby): released, as every chain did before boot once
            released = release(boot, dict(result))
            result.update(changed=released["changed"], default=released["default"],
                          reason="%s; %s" % (released["reason"], result["reason"]))
        return result
    refreshed = False
    if state == "trial":
        # grub.cfg must list what /boot holds before the newest kernel is read from it
        missing = kernels_without_grub_entry(boot.root, boot.cfg())
        if missing:
            refreshed = True
            result["refreshed_for"] = missing
            if not boot.module.check_mode:
                boot.run([boot.update_grub], "list the installed kernels")
        newest = kernel or (missing[-1] if boot.module.check_mode and missing else newest_grub_kernel(boot.cfg()))
    else:
        newest = None
    decision = boot_once_decision(running, newest, record)
    result["reason"] = decision["reason"]
    if decision["action"] == "unknown":
        return result
    proven, trial = decision["proven"], decision["trial"]
    changed = _pin(boot, proven) or refreshed
    data = {"kernel": proven, "boot_once": True, "method": "grub",
            "trial": trial if state == "trial" else (record or {}).get("trial") if (record or {}).get("boot_once") else None}
    data["instead_of"] = data["trial"]
    changed = _write_record(boot, record, data) or changed
    if trial is not None:
        entry = boot.entry(boot.cfg(), trial, "%s is to boot once" % trial)
        if boot.next_entry() != entry:
            changed = True
            if not boot.module.check_mode:
                boot.run([boot.grub_reboot, entry], "boot once")
    elif state == "trial" and boot.next_entry() is not None:
        # nothing to try: a one-shot boot left from elsewhere would boot another kernel than the proven one
        changed = True
        if not boot.module.check_mode:
            boot.clear_next_entry()
    result.update(changed=changed, held=True, kernel=proven, trial=trial, instead_of=data["instead_of"])
    if boot.module.check_mode:
        result["default"] = trial or proven
        return result
    after = boot.default()
    result["default"] = after
    if after != (trial or proven):
        boot.module.fail_json(msg="the kernel GRUB boots next is %s, not %s, after %s: check /boot/grub/grub.cfg and "
                                  "grubenv by hand before the node reboots"
                                  % (after, trial or proven, "grub-reboot" if trial else "pinning the default"), **result)
    return result


def end_boot_once(boot, proven_chain, record, result):
    """state held on a node with a boot-once record: promote, or keep the pin."""
    running = running_kernel(boot.root, live=boot.live)
    decision = boot_once_end(running, record, proven_chain)
    trial = record.get("trial")
    result.update(running=running, default=boot.default(), reason=decision["reason"], trial=trial,
                  instead_of=record.get("instead_of"))
    pending = boot.next_entry() if boot.method == "grub" else None
    trial_entry = grub_entry_path(boot.cfg(), trial) if trial and boot.method == "grub" else None
    # a one-shot boot of the tried kernel still pending (the node never rebooted, or a boot loader that
    # cannot write grubenv) would boot it again: cleared either way
    stale = pending is not None and pending == trial_entry
    if decision["action"] == "promote":
        result.update(changed=True, held=False, kernel=None)
        if boot.module.check_mode:
            result["default"] = running
            return result
        if stale:
            boot.clear_next_entry()
        if os.path.exists(boot.dropin):
            os.remove(boot.dropin)
            boot.run([boot.update_grub], "promote")
        os.remove(boot.record)
        result["default"] = boot.default()
        if result["default"] != running and "saved_entry" in (boot.cfg().get("default") or ""):
            # GRUB_DEFAULT=saved: the default is grubenv's saved_entry, which no package install moves
            boot.run([boot.grub_set_default, boot.entry(boot.cfg(), running, "%s verified" % running)], "promote")
            result["default"] = boot.default()
        if result["default"] != running:
            boot.module.warn("%s verified and the pin is removed, but GRUB's default is %s: GRUB_DEFAULT in "
                             "/etc/default/grub chooses it (set it to 0 for the newest kernel, or to saved)"
                             % (running, result["default"]))
        return result
    result.update(held=True, kernel=record.get("kernel"))
    changed = _pin(boot, record.get("kernel")) if boot.method == "grub" else False
    if stale:
        changed = True
        if not boot.module.check_mode:
            boot.clear_next_entry()
    result["changed"] = changed
    result["default"] = record.get("kernel") if boot.module.check_mode else boot.default()
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
            state=dict(type="str", required=True, choices=["pinned", "trial", "held", "released"]),
            proven=dict(type="bool", default=False),
            kernel=dict(type="str"),
            dropin=dict(type="path", default="/etc/default/grub.d/99-gpudirect-boot-hold.cfg"),
            record=dict(type="path", default="/var/lib/gpudirect/boot-hold.json"),
            update_grub=dict(type="path", default="/usr/sbin/update-grub"),
            grub_reboot=dict(type="path", default="/usr/sbin/grub-reboot"),
            grub_editenv=dict(type="path", default="/usr/bin/grub-editenv"),
            grub_set_default=dict(type="path", default="/usr/sbin/grub-set-default"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    boot = Boot(module)
    result = {"changed": False, "method": boot.method, "held": False, "running": None, "default": None,
              "instead_of": None, "kernel": None, "trial": None, "reason": ""}
    if module.params["state"] in ("pinned", "trial"):
        result = boot_once(boot, module.params["state"], module.params["kernel"], result)
    elif module.params["state"] == "held":
        result = hold(boot, module.params["proven"], result)
    else:
        result = release(boot, result)
        result["held"] = False
    module.exit_json(**result)


if __name__ == "__main__":
    main()
