#!/usr/bin/python
"""Take or release the per-node lock that keeps two runs of the toolkit off one node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_lock
short_description: Take or release the per-node run lock of the GPUDirect toolkit
description:
  - O(state=present) takes the lock file O(path) for this run (O(token)), written atomically (a temporary file
    linked into place, so two runs racing for it cannot both win). The file records the holder (controller
    user@host, playbook, controller pid), the node's boot id, the time it was taken and the time it was last
    renewed.
  - Called again by the run that holds it (same O(token)), it renews the lock (its heartbeat, at each stage
    of the node's batch) and reports no change; the lock is this run's bookkeeping, not the node's state.
  - When another run holds the lock, the module fails naming that holder, since when, when it last renewed
    it, and what to do.
  - A stale lock, one not renewed for O(stale_after) seconds, is taken over with a warning naming the old
    holder. A lock taken before a reboot of the node is not stale by itself (the toolkit's own reboot keeps
    the lock for the run that rebooted the node); keep O(path) on a disk that survives reboots.
  - O(state=absent) removes the lock only when it is this run's (same O(token)); another run's lock is left
    alone with a warning.
  - In check mode nothing is written or removed; a lock held by another run fails the same way, so that
    C(--check) says who is working on the node.
options:
  path:
    description: The lock file on the node.
    type: path
    required: true
  state:
    description: C(present) takes the lock, C(absent) releases this run's lock.
    type: str
    choices: [present, absent]
    default: present
  token:
    description: Random string that identifies this run on this node; only the same token releases the lock.
    type: str
    required: true
  controller:
    description: Who runs the playbook, C(user@host) of the controller.
    type: str
    default: unknown
  node:
    description: The node's name as the messages show it (the inventory name); default its host name.
    type: str
    default: ""
  playbook:
    description: The playbook (and play) taking the lock.
    type: str
    default: unknown
  pid:
    description: Process id of ansible-playbook on the controller.
    type: int
    default: 0
  stale_after:
    description: Seconds without a renewal after which a lock is stale and taken over.
    type: int
    default: 21600
  gone_token:
    description:
      - The token of a lock whose holder the controller found gone, a run of the same C(user@host) whose
        ansible-playbook process no longer runs (interrupted with Ctrl-C, killed). That lock, and only while it
        still carries this token, is taken over at once with a warning instead of after O(stale_after).
      - The C(gpudirect_drain) role computes it on the controller; empty, no lock is taken over early.
    type: str
    default: ""
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the node's run lock
  gpudirect_lock:
    path: /var/lib/gpudirect/run.lock
    token: "{{ __gpudirect_drain_lock_token }}"
    controller: admin@ctl1
    playbook: site.yml
    pid: 4242

- name: Release it
  gpudirect_lock:
    path: /var/lib/gpudirect/run.lock
    token: "{{ __gpudirect_drain_lock_token }}"
    state: absent
"""

RETURN = r"""
verdict:
  description: C(free) (taken), C(ours) (this run held it already; renewed), C(stale) (taken over),
    C(released), C(absent) (nothing to release), C(other) (another run's lock, left alone).
  returned: always
  type: str
holder:
  description: The lock's content before this call (null when there was none).
  returned: always
  type: dict
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import write_beside
from ansible.module_utils.gpudirect_lock import decide, describe, held_message, parse, render

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _read(module, path):
    """The existing lock (dict) or None; fails on a file this toolkit did not write."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        module.fail_json(msg="cannot read the lock file %s: %s" % (path, exc))
    try:
        return parse(text)
    except ValueError as exc:
        module.fail_json(msg="the lock file %s is not one this toolkit wrote: %s. Check what wrote it, then remove "
                             "it by hand (or point gpudirect_drain_lock_file elsewhere)." % (path, exc), content=text)
    return None


def _boot_id(module):
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip()
    except OSError as exc:
        module.fail_json(msg="cannot read %s (the node's boot id, which tells a stale lock): %s" % (BOOT_ID, exc))
    return ""


def _write(module, path, text, replace_expected):
    """Write the lock atomically. New lock: link a temporary file into place (fails if one appeared meanwhile).
    Take-over: re-read, then rename over the stale one only when it is still the one judged stale."""
    def place(tmp):
        if replace_expected is None:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            return True
        if _read(module, path) != replace_expected:
            return False
        os.rename(tmp, path)
        return True
    return write_beside(path, text, 0o644, ".gpudirect-lock-", place)


def take(module):
    params = module.params
    path, token = params["path"], params["token"]
    now = time.time()
    boot_id = _boot_id(module)
    node = params["node"] or os.uname()[1]
    if not module.check_mode:
        try:
            os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
        except OSError as exc:
            module.fail_json(msg="cannot create the directory of the lock file %s: %s (gpudirect_drain_lock_file)"
                                 % (path, exc))
    for _attempt in range(3):
        lock = _read(module, path)
        verdict, reason = decide(lock, token, boot_id, now, params["stale_after"], params["gone_token"])
        if verdict == "ours":
            # the heartbeat: the same lock with a new 'renewed' (no change to the node's state)
            if module.check_mode or _write(module, path, render(token, lock["controller"], lock["playbook"],
                                                                lock["pid"], lock["boot_id"], lock["since"], now),
                                           lock):
                return {"changed": False, "verdict": verdict, "holder": lock}
            continue
        if verdict == "held":
            module.fail_json(msg=held_message(node, path, lock, now, params["stale_after"]), verdict=verdict,
                             holder=lock)
        if verdict == "stale":
            module.warn("taking over a stale run lock on %s: %s" % (node, reason))
        result = {"changed": True, "verdict": verdict, "holder": lock}
        if module.check_mode:
            return result
        text = render(token, params["controller"], params["playbook"], params["pid"], boot_id, now)
        if _write(module, path, text, lock if verdict == "stale" else None):
            return result
        # another run took it between the read and the write: judge the new lock
    lock = _read(module, path)
    module.fail_json(msg="could not take the lock %s on %s: other runs keep taking it (last holder: %s)"
                     % (path, node, describe(lock, now) if lock else "none"), holder=lock)
    return {}


def release(module):
    path, token = module.params["path"], module.params["token"]
    lock = _read(module, path)
    if lock is None:
        return {"changed": False, "verdict": "absent", "holder": None}
    if lock["token"] != token:
        module.warn("the run lock %s belongs to another run (%s): left in place" % (path, describe(lock, time.time())))
        return {"changed": False, "verdict": "other", "holder": lock}
    if not module.check_mode:
        os.unlink(path)
    return {"changed": True, "verdict": "released", "holder": lock}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            token=dict(type="str", required=True, no_log=False),
            controller=dict(type="str", default="unknown"),
            node=dict(type="str", default=""),
            playbook=dict(type="str", default="unknown"),
            pid=dict(type="int", default=0),
            stale_after=dict(type="int", default=21600),
            gone_token=dict(type="str", default="", no_log=False),
        ),
        supports_check_mode=True,
    )
    if len(module.params["token"]) < 8:
        module.fail_json(msg="token must be a random string of at least 8 characters (it tells this run's lock)")
    result = take(module) if module.params["state"] == "present" else release(module)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
